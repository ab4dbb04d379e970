"""The hierarchical Verilog form (fred.hdl.fabric.hier): same design as the flat form, at any width.

* formally equivalent to the flat form at a small width (yosys equiv_*), and a broken cell is
  caught by the same check;
* the fabric bench passes on a narrow hierarchical instance (as on the flat and shared forms);
* lint clean; each distinct module once (lane adder, cell kinds, sub-fabric sizes);
* ``fred verilog fabric`` picks the form by width and bounds it with a one-line error.
"""

import re
import subprocess
import sys

import pytest

from fred.hdl.fabric.recursive import MAX_MODULE_PORT_BITS, fabric_verilog_text, module_port_bits
from fred.hdl.fabric.hier import resolve_form
from fred.sim.equiv import prove_equivalent


def _modules(text):
    return re.findall(r"^module\s+(\\?[^\s(]+)", text, re.M)


@pytest.mark.regress
def test_hier_equivalent_to_flat():
    """FRED_2(3) (RD, R, D, demux and mux cells), 1 int32 lane: flat == hier, proven. Only make
    regress-synth runs it: make test runs no yosys (tests/conftest.py REGRESS_TESTS)."""
    flat = fabric_verilog_text(3, 2, 1, "int32", "gold", form="flat")
    hier = fabric_verilog_text(3, 2, 1, "int32", "gate", form="hier")
    ok, summary = prove_equivalent(flat, "gold", hier, "gate")
    assert ok, summary
    assert "0 are unproven" in summary


@pytest.mark.regress
def test_equivalence_check_catches_a_broken_lane():
    """Only make regress-synth runs it: make test runs no yosys (tests/conftest.py
    REGRESS_TESTS)."""
    flat = fabric_verilog_text(3, 2, 1, "int32", "gold", form="flat")
    bad = fabric_verilog_text(3, 2, 1, "int32", "gate", form="hier", fault="corrupt-lane")
    ok, summary = prove_equivalent(flat, "gold", bad, "gate")
    assert not ok, summary


@pytest.mark.regress
def test_hier_module_count_does_not_grow_with_lanes():
    """One module per distinct thing: top, 3 sub-fabric sizes, R, D, RD, demux, mux, the lane
    adder and the two groups of lane-adder instances (in R and RD).
    Only make regress-synth runs it: make test runs no yosys (tests/conftest.py REGRESS_TESTS)."""
    a = fabric_verilog_text(12, 3, 2, "fp16", "top", form="hier")
    b = fabric_verilog_text(12, 3, 8, "fp16", "top", form="hier")
    assert _modules(a) == [n.replace("_l8_", "_l2_") for n in _modules(b)]
    assert len(_modules(a)) == 12
    assert sum(n.startswith("fred_add_fp16") for n in _modules(a)) == 1
    # lanes are instances of the one lane module, not modules of their own
    assert b.count("fred_add_fp16 lane") == 2 * 8      # the adders of the R and the RD module
    assert "lane7" in b and "lane8" not in b


@pytest.mark.regress
def test_hier_lint_clean():
    """make regress-synth, with the other checks of the hierarchical form; make test lints the
    shared form (tests/hdl/test_fabric.py::test_shared_cell_verilog_lint_clean_and_structured)."""
    from fred.sim.lint import lint

    assert lint(fabric_verilog_text(5, 3, 2, "fp16", "fred3_p5", form="hier"), "fred3_p5") == []


@pytest.mark.regress
def test_lint_modules_clean_and_catches_a_fault_in_a_submodule():
    """Module-by-module lint (how the wide chiplet is linted, fred.benchmarks.verilog): clean on
    the hierarchical form, and an undriven signal inside one cell kind is reported there.
    make regress-synth, with the other checks of the hierarchical form; make test lints the shared
    form (tests/hdl/test_fabric.py::test_shared_cell_verilog_lint_clean_and_structured)."""
    from fred.sim.lint import lint_modules

    text = fabric_verilog_text(3, 2, 1, "int32", "fred2_p3", form="hier")
    assert lint_modules(text, "fred2_p3") == {}
    at = text.index("endmodule", text.index("module fred_r_"))
    bad = text[:at] + "  wire fred_undriven;\n  wire fred_use = fred_undriven;\n" + text[at:]
    found = lint_modules(bad, "fred2_p3")
    assert list(found) == [m for m in _modules(text) if m.startswith("fred_r_")]
    assert "Signal is not driven: 'fred_undriven'" in found[list(found)[0]][0]


@pytest.mark.regress
def test_fabric_bench_passes_on_hier_form():
    """The regression bench of tests/sim/test_fabric_sim.py on the hierarchical form, built with
    the cells as Verilator hierarchical blocks (as the chiplet at 256 lanes is), at 5 fp16 lanes:
    an 80-bit beat, wider than a machine word, and an odd lane count (make test's stand-in for
    the 256-lane bench of tests/sim/test_wide_fabric.py, which is make regress).
    make regress-synth (its own Verilator build of the hierarchical form with blocks); make test
    checks the marking of the blocks
    (tests/sim/test_wide_fabric.py::test_hier_blocks_mark_each_cell_kind_once)."""
    from tests.sim.test_fabric_sim import _run_case

    res = _run_case(5, 3, 5, "fp16", default_seed=1053, form="hier", verilator_blocks=True)
    assert all(ph["latency"]["min"] >= res["latency_formula"] for ph in res["phases"])


def test_form_choice_and_bound():
    assert resolve_form("fabric", 4) == "shared" and resolve_form("switch", 4) == "flat"
    assert resolve_form("fabric", 256) == "hier" == resolve_form("switch", 17)
    assert resolve_form("fabric", 256, "flat") == "flat"
    assert module_port_bits(12, 3, 256, "fp16") < MAX_MODULE_PORT_BITS
    assert module_port_bits(12, 3, 339, "fp16") > MAX_MODULE_PORT_BITS


@pytest.mark.parametrize("argv,msg", [
    (["--ports", "12", "--lanes", "339"], "needs 65,541 input bits in one module"),
    (["--ports", "12", "--lanes", "64", "--form", "shared"], "or --form hier"),
])
def test_cli_refuses_too_wide(argv, msg, tmp_path):
    p = subprocess.run([sys.executable, "-m", "fred", "verilog", "fabric", *argv, "-o",
                        str(tmp_path / "x.v")], capture_output=True, text=True)
    assert p.returncode == 2
    assert msg in p.stderr and len(p.stderr.strip().splitlines()) == 1


@pytest.mark.regress
def test_switch_bench_passes_on_hier_form(monkeypatch):
    """The switch regression bench (tests/sim/test_switch_bench.py, P = 4) on the hierarchical
    switch: shared input/output port modules, hierarchical fabric."""
    from fred.hdl.fabric.hier import emit_modules
    from fred.hdl.switch.top import Switch
    from tests.sim import test_switch_bench as tsb

    registry = {}
    sw = Switch(4, 3, 2, "int32", data_depth=12, ctrl_depth=2, max_len=4, table_entries=8,
                out_credits=(0, 0, 0, 0), _shared=registry, _hier=True)
    text = emit_modules(sw, "fred_switch", registry)
    assert "fred_switch_in_d12_12_12_2_n4_f64 in3" in text      # one module for every input port
    monkeypatch.setitem(tsb._CACHE, (4, 2, "int32", "fred", None), (sw, text))   # bench_config's key
    tsb.run("switch_random", 1, P=4)
