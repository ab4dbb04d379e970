"""Microswitch cells under Verilator: regression, broken variant, lint, ``fred verilog``.

The regression soaks run on the compiled path (sim/soak/cells.py: the cocotb cell bench's
checks on the same Verilog, replayed by a compiled harness); the cocotb bench itself
(sim/benches/cells.py) runs in the broken-variant, watchdog and ``fred sim cell`` tests.
``make test`` runs a representative subset (every dtype and every cell kind at least once;
lanes 1/4/32 and m 2/3/4 each at least once; one Verilator build per parameter set, every
mode of the cell in one simulation). ``make regress`` (``-m regress``) runs the full cross
product of element types x lanes {1, 4, 32} x m {2, 3, 4} (84 builds; it also needs
``FRED_REGRESS=1``, which make regress sets), the representative modes of each cell.

One cell's regression with waves and a chosen seed::

    WAVES=1 FRED_SEED=123 .venv/bin/pytest tests/sim/test_cells_cocotb.py -k "rd and fp16"
    .venv/bin/fred sim cell rd --dtype fp16 --lanes 4 --seed 123 --waves
"""

import os
import re
import subprocess
import sys

import pytest

from fred.hdl.cells.microswitches import CELL_CLASSES, build_cell
from fred.hdl.dtypes import dtype_names
from fred.sim.lint import WAIVERS, lint
from fred.hdl.netlist.modes import DMode, RDMode, RMode
from fred.hdl.verilog import emit
from fred.sim.soak.cells import cell_soak
from fred.sim.benches.cells import representative_modes, run_cell_regression
from fred.sim.toolchain import bench_seed

#: beats per mode in the regression (the issue asks for at least 10,000)
BEATS = int(os.environ.get("FRED_CELL_BEATS", "10000"))

#: (kind, m, dtype, lanes): the make-test subset
SUBSET = [
    ("rd", 2, "fp16", 4),
    ("r", 2, "fp32", 1),
    ("r", 3, "bf16", 4),
    ("d", 4, "int32", 32),
]


def _check_report(rep, kind, m, dtype, lanes, modes):
    """A compiled soak's figures (sim/soak/cells.py): every mode ran, latency and line rate."""
    per = rep.modes
    assert len(per) == len(modes)
    for name, d in per.items():
        if name in ("sel=-,-", "src=-,-"):  # nothing connected: checked idle, no figures
            continue
        assert d["beats"] >= BEATS, (name, d)
        assert d["latency"] == CELL_CLASSES[kind].cell_latency(dtype), (name, d)
        assert d["throughput"] == "1.00", (name, d)
    assert rep.stats.beats >= BEATS * len([md for md in modes if md not in (RMode(), DMode())])


def _soak(kind, m, dtype, lanes, modes, default_seed):
    rep = cell_soak(kind, middle=m, lanes=lanes, dtype=dtype, beats=BEATS, modes=modes,
                    seed=bench_seed(default_seed))
    print(rep.table())
    _check_report(rep, kind, m, dtype, lanes, modes)


def _id(p):
    kind, m, dtype, lanes = p
    return f"{kind}-m{m}-{dtype}-x{lanes}" if kind != "rd" else f"rd-{dtype}-x{lanes}"


@pytest.mark.parametrize("params", SUBSET, ids=[_id(p) for p in SUBSET])
def test_cell_regression(params):
    kind, m, dtype, lanes = params
    _soak(kind, m, dtype, lanes, representative_modes(kind, m), SUBSET.index(params))


_FULL = [("rd", 2, dt, ln) for dt in dtype_names() for ln in (1, 4, 32)] + \
        [(k, m, dt, ln) for k in ("r", "d") for m in (2, 3, 4) for dt in dtype_names()
         for ln in (1, 4, 32)]


# marked regress (excluded from make test) and also gated on FRED_REGRESS (set by make regress),
# so that `pytest tests/sim/test_cells_cocotb.py -k "rd and fp16"` runs just the quick set
@pytest.mark.regress
@pytest.mark.skipif(not os.environ.get("FRED_REGRESS"),
                    reason="full cell sweep: run with make regress (FRED_REGRESS=1)")
@pytest.mark.parametrize("params", _FULL, ids=[_id(p) for p in _FULL])
def test_cell_regression_full(params):
    kind, m, dtype, lanes = params
    # every mode of every cell is checked exhaustively (fewer beats) under amaranth.sim in
    # tests/hdl/test_cells.py and with `fred sim cell --all-modes`; here the representative set
    _soak(kind, m, dtype, lanes, representative_modes(kind, m), 100 + _FULL.index(params))


def _sim_log(exc) -> str:
    """The sim.log named by run_bench's failure message."""
    m = re.search(r"log (\S+sim\.log)", str(exc.value))
    assert m, str(exc.value)
    return open(m.group(1)).read()


def test_broken_cell_fails_the_checker():
    """A cell built with fault='corrupt-lane' (one flipped bit in the last lane of each sum)
    must make the bench fail; the same bench passes on the good cell."""
    modes = [RDMode.PASS, RDMode.SUM0]
    run_cell_regression("rd", lanes=2, dtype="int32", beats=300, modes=modes, seed=5)
    with pytest.raises(AssertionError, match="cocotb tests failed") as exc:
        run_cell_regression("rd", lanes=2, dtype="int32", beats=300, modes=modes, seed=5,
                            fault="corrupt-lane")
    log = _sim_log(exc)
    assert "mode sum0" in log and "lane mismatches" in log and "lane 1:" in log


def test_bench_watchdog_fails_a_hang():
    """Programming the RD cell with 7 (no mode) while the bench drives PASS traffic: nothing
    moves, and the watchdog must fail the run instead of hanging."""
    from fred.sim.benches.cells import regression_config
    from fred.sim.toolchain import run_bench

    cell = build_cell("rd", lanes=2, dtype="int32")
    cfg = regression_config(cell, [RDMode.PASS], beats=50)
    cfg["codes"] = [7]
    with pytest.raises(AssertionError, match="cocotb tests failed") as exc:
        run_bench(verilog=emit(cell, cell.verilog_name), toplevel=cell.verilog_name,
                  test_module="fred.sim.benches.cells", tag="cell-rd", config=cfg, seed=5)
    assert "watchdog: rd cell bench still running" in _sim_log(exc)


# ---- lint ---------------------------------------------------------------------------------

_LINT = [("rd", 2, "fp16", 4), ("r", 3, "fp16", 4), ("d", 3, "fp16", 4),
         ("rd", 2, "int32", 1), ("r", 2, "bf16", 1), ("d", 4, "fp32", 1), ("r", 4, "int32", 2)]


@pytest.mark.parametrize("params", _LINT, ids=[_id(p) for p in _LINT])
def test_lint_clean(params):
    kind, m, dtype, lanes = params
    cell = build_cell(kind, middle=m, lanes=lanes, dtype=dtype)
    assert lint(emit(cell, cell.verilog_name), cell.verilog_name) == []


def test_lint_reports_real_problems():
    """Lint is not a rubber stamp: real problems survive the waivers."""
    bad = ("module bad(input clk, input [3:0] a, output reg [3:0] q, output [3:0] z);\n"
           "  always @(posedge clk) q = q + a;\n"
           "endmodule\n")
    msgs = lint(bad, "bad")
    assert any("BLKSEQ" in x for x in msgs), msgs
    assert any("UNDRIVEN" in x and "'z'" in x for x in msgs), msgs
    # the UNUSEDSIGNAL waiver covers internal nets only, never a top-level port
    from fred.sim.lint import _waived

    msg = "Signal is not used: 'cfg'"
    assert not _waived("UNUSEDSIGNAL", msg, "top", "top", {"cfg", "clk"})
    assert _waived("UNUSEDSIGNAL", "Signal is not used: 'cfg[0]'", "top", "top", {"cfg"})
    assert _waived("UNUSEDSIGNAL", msg, "top.sub", "top", {"cfg"})


def test_waivers_are_justified():
    assert WAIVERS and all(len(w) == 3 and len(w[2]) > 20 for w in WAIVERS)


# ---- fred verilog --------------------------------------------------------------------------

def _fred(*args, **kw):
    return subprocess.run([sys.executable, "-m", "fred", *args], capture_output=True, text=True,
                          timeout=300, **kw)


def test_fred_verilog_reproducible(tmp_path):
    a, b = tmp_path / "a.v", tmp_path / "b.v"
    for out in (a, b):
        r = _fred("verilog", "r", "--middle", "3", "--lanes", "2", "--dtype", "bf16", "-o", str(out))
        assert r.returncode == 0, r.stderr
    assert a.read_text() == b.read_text()
    assert "module fred_r_m3_l2_bf16(" in a.read_text()
    r = _fred("verilog", "d", "--middle", "4", "--lanes", "1", "--dtype", "int32")
    assert r.returncode == 0 and "module fred_d_m4_l1_int32(" in r.stdout
    r = _fred("verilog", "rd", "--lanes", "1", "--dtype", "fp32")
    assert r.returncode == 0 and "module fred_rd_l1_fp32(" in r.stdout
    # rd is always 2 x 2: --middle is refused, not silently ignored
    r2 = _fred("verilog", "rd", "--middle", "4", "--lanes", "1", "--dtype", "fp32")
    assert r2.returncode == 2 and "--middle 4 does not apply to rd" in r2.stderr and not r2.stdout


@pytest.mark.parametrize("argv,msg", [
    (["verilog", "r", "--middle", "1"], "--middle 1 is too small: must be >= 2"),
    (["verilog", "d", "--middle", "0"], "--middle 0 is too small: must be >= 2"),
    (["verilog", "rd", "--lanes", "0"], "--lanes 0 is too small: must be >= 1"),
    (["verilog", "r", "--dtype", "fp8"], "unknown element type 'fp8'"),
    (["verilog", "rd", "--middle", "1"], "--middle 1 is too small: must be >= 2"),
    (["verilog", "d", "--lanes", "four"], "--lanes 'four' is not a whole number"),
    (["sim", "cell", "rd", "--beats", "0"], "--beats 0 is too small: must be >= 1"),
    (["sim", "cell", "r", "--dtype", "half"], "unknown element type 'half'"),
    (["sim", "cell", "x"], "invalid choice: 'x'"),
])
def test_bad_input_one_line_nonzero(argv, msg):
    r = _fred(*argv)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert msg in r.stderr
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr


def test_fred_sim_cell_cli():
    r = _fred("sim", "cell", "rd", "--dtype", "int32", "--lanes", "2", "--beats", "200",
              "--seed", "3")
    assert r.returncode == 0, r.stderr
    for name in ("pass", "cross", "bcast0", "bcast1", "sum0", "sum1", "sum_both"):
        assert f"  {name} " in r.stdout
    assert "latency 1 cycles" in r.stdout and "seed 3" in r.stdout
