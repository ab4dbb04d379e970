# amaranth: UnusedElaboratable=no
"""FRED_m(P) fabric RTL, Amaranth level: demux/mux cells, config layout, structure, CLI, lint."""

import subprocess
import sys

import pytest
from amaranth.sim import Simulator

from fred.hdl.fabric.recursive import (MAX_RTL_PORTS, Fabric, check_fabric_params, config_bits,
                             config_layout, config_width, decode_config, fabric_latency)
from fred.hdl.netlist.modes import CellAddr, DemuxMode, DMode, MuxMode, RDMode, RMode
from fred.hdl.cells.muxes import DemuxCell, MuxCell
from fred.hdl.netlist.structure import netlist, stages


# ---------------------------------------------------------------------------------------------
# demux / mux: every beat, in order, to the selected port only, 1 beat/cycle, cell latency
# ---------------------------------------------------------------------------------------------
def _run_demux(m, sel, latency, n=40, stall_every=0):
    dut = DemuxCell(m, 2, "fp16", latency)
    sent, got, first_out = [], {k: [] for k in range(m)}, {}
    accepted = []

    async def tb(ctx):
        ctx.set(dut.cfg, DemuxCell.encode(DemuxMode(sel), m))
        cyc = 0
        data = list(range(1, n + 1))
        k = 0
        while cyc < n * 4 + 20:
            for j in range(m):
                ctx.set(dut.o[j].ready, 0 if (stall_every and cyc % stall_every == 0) else 1)
            if k < n:
                ctx.set(dut.i.valid, 1)
                ctx.set(dut.i.payload, [data[k] & 0xFFFF, (data[k] * 7) & 0xFFFF])
            else:
                ctx.set(dut.i.valid, 0)
            _, _, iv, ir, *outs = await ctx.tick().sample(
                dut.i.valid, dut.i.ready, *[x for j in range(m) for x in (dut.o[j].valid, dut.o[j].ready, dut.o[j].payload)])
            if iv and ir:
                accepted.append(cyc)
                k += 1
            for j in range(m):
                v, r, p = outs[3 * j:3 * j + 3]
                if v and r:
                    got[j].append((cyc, int(p[0])))
            cyc += 1

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(tb)
    sim.run()
    return accepted, got


@pytest.mark.parametrize("m,sel", [(2, 0), (2, 1), (3, 2), (4, 1)])
def test_demux_routes_to_selected_output(m, sel):
    acc, got = _run_demux(m, sel, latency=3)
    assert [p for _, p in got[sel]] == list(range(1, 41))
    assert all(not got[j] for j in range(m) if j != sel)
    # one beat per cycle, latency 3 cycles from acceptance to output transfer
    assert acc == list(range(acc[0], acc[0] + 40))
    assert [c for c, _ in got[sel]] == [a + 3 for a in acc]


def test_demux_under_backpressure_loses_nothing():
    acc, got = _run_demux(3, 1, latency=2, stall_every=3)
    assert [p for _, p in got[1]] == list(range(1, 41))


def test_demux_idle_accepts_nothing():
    acc, got = _run_demux(3, None, latency=1, n=5)
    assert acc == [] and all(not g for g in got.values())


def _run_mux(m, src, latency, n=30):
    dut = MuxCell(m, 1, "int32", latency)
    acc, got = {j: [] for j in range(m)}, []

    async def tb(ctx):
        ctx.set(dut.cfg, MuxCell.encode(MuxMode(src), m))
        ctx.set(dut.o.ready, 1)
        ks = [0] * m
        for cyc in range(n + 20):
            for j in range(m):
                ctx.set(dut.i[j].valid, 1 if ks[j] < n else 0)
                ctx.set(dut.i[j].payload, [1000 * j + ks[j]])
            res = await ctx.tick().sample(*[x for j in range(m) for x in (dut.i[j].valid, dut.i[j].ready)],
                                          dut.o.valid, dut.o.payload)
            for j in range(m):
                if res[2 + 2 * j] and res[3 + 2 * j]:
                    acc[j].append(cyc)
                    ks[j] += 1
            if res[-2]:
                got.append((cyc, int(res[-1][0])))

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(tb)
    sim.run()
    return acc, got


@pytest.mark.parametrize("m,src", [(2, 1), (3, 0), (3, 2)])
def test_mux_takes_selected_input(m, src):
    acc, got = _run_mux(m, src, latency=3)
    assert [p for _, p in got] == [1000 * src + k for k in range(30)]
    assert all(not acc[j] for j in range(m) if j != src)
    assert [c for c, _ in got] == [a + 3 for a in acc[src]]


def test_demux_mux_encode_and_bad_modes():
    assert DemuxCell.encode(DemuxMode(None), 3) == 0
    assert DemuxCell.encode(DemuxMode(2), 3) == 3
    assert MuxCell.encode(MuxMode(0), 2) == 1
    assert DemuxCell.config_width(3) == 2 and DemuxCell.config_width(4) == 3
    with pytest.raises(ValueError, match="out of range"):
        DemuxCell.encode(DemuxMode(3), 3)
    with pytest.raises(ValueError, match="latency"):
        MuxCell(3, 1, "fp16", 0)


# ---------------------------------------------------------------------------------------------
# config layout
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("P", [2, 3, 4, 5, 6, 7, 8, 10, 12, 13, 20])
@pytest.mark.parametrize("m", [2, 3])
def test_config_layout_covers_every_cell_once(P, m):
    lay = config_layout(P, m)
    cells = [c for c, _, _ in lay]
    assert sorted(cells) == sorted(netlist(P, m).cells)      # same cells as structure.py
    off = 0
    for c, o, w in lay:                                         # contiguous, no overlap
        assert o == off and w > 0
        off += w
    assert config_width(P, m) == off
    # depth-first: every instance's cells (its own and its middle copies') form one contiguous run
    for path in {c.path[:d] for c in cells for d in range(len(c.path) + 1)}:
        idx = [n for n, c in enumerate(cells) if c.path[:len(path)] == path]
        assert idx == list(range(idx[0], idx[-1] + 1)), f"instance {path} is not contiguous"


def test_config_layout_order_and_widths():
    from fred.hdl.cells.microswitches import DCell, RCell
    from amaranth.hdl import Shape

    lay = config_layout(5, 3)
    names = [str(c) for c, _, _ in lay[:6]]
    assert names == ["top/in0", "top/in1", "top/demux0", "top/out0", "top/out1", "top/mux0"]
    assert lay[6][0] == CellAddr((0,), "in", 0)
    w = {c.stage: wd for c, _, wd in lay}
    assert w["in"] == Shape.cast(RCell.config_layout(3)).width
    assert w["out"] == Shape.cast(DCell.config_layout(3)).width
    assert w["rd"] == 3 and w["demux"] == 2 and w["mux"] == 2


def test_config_bits_from_routing_roundtrip():
    from fred.hdl.cells.microswitches import DCell, RCell
    from fred.hdl.routing.compiler import route

    res = route(6, 3, ["0,1,2>3", "3>0,1", "4,5>4,5"])
    word = config_bits(6, 3, res)
    fields = decode_config(6, 3, word)
    for c, mode in res.cell_modes.items():
        want = {"in": lambda: RCell.encode(mode, 3), "out": lambda: DCell.encode(mode, 3),
                "rd": lambda: mode.value, "demux": lambda: DemuxCell.encode(mode, 3),
                "mux": lambda: MuxCell.encode(mode, 3)}[c.stage]()
        assert fields[c] == want, c
    assert word.bit_length() <= config_width(6, 3)
    # unknown cells get idle modes; all-idle is the idle encoding everywhere
    idle = decode_config(6, 3, config_bits(6, 3))
    assert idle[CellAddr((), "in", 0)] == RCell.encode(RMode(), 3)
    assert idle[CellAddr((0,), "demux", 0)] == 0
    assert config_bits(6, 3, cell_modes={CellAddr((), "out", 1): DMode((2, 2))}) == \
        DCell.encode(DMode((2, 2)), 3) << [o for c, o, _ in config_layout(6, 3) if c == CellAddr((), "out", 1)][0]


def test_config_bits_rejects_mismatch():
    from fred.hdl.routing.compiler import route

    with pytest.raises(ValueError, match="FRED_3\\(4\\)"):
        config_bits(5, 3, route(4, 3, ["0>1"]))
    with pytest.raises(ValueError, match="not a cell"):
        config_bits(4, 3, cell_modes={CellAddr((), "demux", 0): DemuxMode(1)})
    with pytest.raises(ValueError, match="not an RMode"):
        config_bits(4, 3, cell_modes={CellAddr((), "in", 0): RDMode.PASS})


# ---------------------------------------------------------------------------------------------
# the component
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("P,m", [(2, 2), (3, 3), (4, 2), (5, 3), (7, 2)])
def test_fabric_ports_width_latency(P, m):
    from fred.hdl.cells.microswitches import cell_latency

    f = Fabric(P, m, 2, "bf16")
    assert len(f.i) == P and len(f.o) == P
    assert f.config_width == config_width(P, m) == len(f.cfg)
    assert f.latency == stages(P) * cell_latency("bf16") == fabric_latency(P, m, 2, "bf16")
    assert f.config_layout() == config_layout(P, m)


def test_fabric_latency_formula_per_dtype():
    assert fabric_latency(12, 3, 1, "int32") == 7 * 1
    assert fabric_latency(12, 3, 1, "fp16") == 7 * 3
    assert fabric_latency(2, 2, 1, "fp32") == 3
    assert [stages(P) for P in (2, 3, 4, 5, 8, 10, 12)] == [1, 3, 3, 5, 5, 7, 7]


@pytest.mark.parametrize("args,msg", [
    ((1, 3, 1, "fp16"), "ports 1"),
    ((4, 1, 1, "fp16"), "middle 1"),
    ((4, 3, 0, "fp16"), "lanes 0"),
    ((4, 3, 1, "fp8"), "'fp8'"),
    ((MAX_RTL_PORTS + 1, 3, 1, "fp16"), f"ports {MAX_RTL_PORTS + 1}"),
    ((64, 3, 64, "fp32"), "too large to generate"),
    (("4", 3, 1, "fp16"), "'4'"),
    ((4, 3, 1.5, "fp16"), "lanes must be an integer, not float 1.5"),
])
def test_bad_parameters_one_line(args, msg):
    # a wrong type is a TypeError, a wrong value a ValueError (fred.hdl.params)
    exc = TypeError if any(isinstance(a, (str, float)) for a in args[:3]) else ValueError
    with pytest.raises(exc, match=msg) as ei:
        Fabric(*args)
    assert "\n" not in str(ei.value)
    with pytest.raises(exc):
        check_fabric_params(*args)


def test_fabric_verilog_is_reproducible_and_lint_clean():
    from fred.sim.lint import lint
    from fred.hdl.verilog import emit

    a = emit(Fabric(3, 2, 1, "int32"), "fred2_p3")
    assert a == emit(Fabric(3, 2, 1, "int32"), "fred2_p3")
    assert lint(a, "fred2_p3") == []


@pytest.mark.parametrize("P,m,dtype", [(2, 3, "fp16"), pytest.param(5, 3, "bf16", marks=pytest.mark.regress)])
def test_fabric_lint_clean(P, m, dtype):
    from fred.sim.lint import lint
    from fred.hdl.verilog import emit

    top = f"fred{m}_p{P}"
    assert lint(emit(Fabric(P, m, 2, dtype), top), top) == []


# ---------------------------------------------------------------------------------------------
# fred verilog fabric
# ---------------------------------------------------------------------------------------------
def _fred(*args):
    return subprocess.run([sys.executable, "-m", "fred", *args], capture_output=True, text=True,
                          timeout=300)


def test_cli_verilog_fabric_writes_file(tmp_path):
    out = tmp_path / "f.v"
    r = _fred("verilog", "fabric", "--ports", "3", "--middle", "2", "--lanes", "1", "--dtype", "int32",
              "-o", str(out))
    assert r.returncode == 0, r.stderr
    text = out.read_text()
    assert "module fred2_p3(" in text and "i__2__payload" in text and "o__2__valid" in text


@pytest.mark.parametrize("args,msg", [
    (["--ports", "1"], "ports 1"),
    (["--ports", "65"], "ports 65"),
    (["--ports", "4", "--middle", "1"], "middle 1"),
    (["--ports", "4", "--lanes", "0"], "lanes 0"),
    (["--ports", "4", "--dtype", "fp8"], "fp8"),
    (["--ports", "four"], "four"),
    (["--ports", "64", "--lanes", "64", "--dtype", "fp32"], "more than the 65,535"),
    (["--ports", "64", "--lanes", "8", "--dtype", "fp32"], "too large to generate"),
    ([], "--ports"),
])
def test_cli_verilog_fabric_bad_input(args, msg):
    r = _fred("verilog", "fabric", *args)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "error" in lines[0] and msg in lines[0], r.stderr
    assert "Traceback" not in r.stderr


def test_shared_cell_verilog_lint_clean_and_structured():
    """fabric_verilog_text(shared=True): one module per cell kind, instantiated by every cell."""
    from fred.hdl.fabric.recursive import fabric_verilog_text
    from fred.sim.lint import lint

    text = fabric_verilog_text(5, 2, 1, "int32", "fred2_p5")
    assert text == fabric_verilog_text(5, 2, 1, "int32", "fred2_p5")
    for mod in ("fred_r_m2_l1_int32", "fred_d_m2_l1_int32", "fred_rd_l1_int32",
                "fred_demux_m2_l1_int32_lat1", "fred_mux_m2_l1_int32_lat1"):
        assert f"module {mod}(" in text
    assert "  fred_r_m2_l1_int32 in0 (" in text and "  fred_rd_l1_int32 rd (" in text
    assert lint(text, "fred2_p5") == []
