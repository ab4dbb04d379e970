"""The compiled soak path (sim/soak_*.py, sim/soak/harness.cpp): cells and fabrics replayed by a
compiled Verilator harness, checked bit-exact by the numpy golden models.

``make test``: a short soak of each cell kind, of FRED_3(4), and checks that the path can fail
(the corrupt-lane fault, a hang, a block that breaks the stream rule or duplicates beats).
``make regress``: long soaks of every cell kind x element type and of fabrics with random flows.
"""

import os

import numpy as np
import pytest

from fred.hdl.dtypes import dtype_names
from fred.sim.soak.builder import SoakDesign
from fred.sim.soak.cells import cell_soak, representative_modes
from fred.sim.soak.fabric import fabric_soak
from fred.sim.soak.batch_io import StimPhase, pack, unpack
from fred.sim.soak.run import check_phase, run_batches
from fred.sim.toolchain import bench_seed

REGRESS = bool(os.environ.get("FRED_REGRESS"))


def test_pack_unpack_round_trip():
    rng = np.random.default_rng(1)
    for width, lanes in ((16, 1), (16, 3), (16, 4), (32, 1), (32, 5)):
        x = rng.integers(0, 1 << width, size=(7, lanes), dtype=np.uint64).astype(np.uint32)
        words = (width * lanes + 31) // 32
        w = pack(x, width, words)
        assert w.shape == (7, words)
        assert np.array_equal(unpack(w, width, lanes), x)
    # lane 0 in the low bits
    assert pack(np.array([[0x1234, 0xABCD]]), 16, 1)[0, 0] == 0xABCD1234


def _check_cell(rep, kind, beats, modes):
    names = {name for name in rep.modes}
    assert len(names) == len(modes)
    for name, d in rep.modes.items():
        if name in ("sel=-,-", "src=-,-"):
            continue
        assert d["latency"] == rep.latency and d["throughput"] == "1.00", (name, d)
        assert d["beats"] >= beats
    assert rep.stats.cycles > rep.stats.beats // 4 > 0


# one build per cell kind, the builds of tests/sim/test_cells_cocotb.py's SUBSET (make test
# builds each design once): here the soak in 2 batches; each element type and kind in make regress.
# The r-m3-int32-x2 and d-m2-bf16-x1 builds this used to add: the R cell's int32 adder is checked
# by tests/hdl/test_cells.py::test_every_mode_golden[r-2-int32-1] (amaranth.sim, every mode) and
# the D cell at m = 2 inside the FRED_2(P) soaks of tests/sim/test_fabric_sim.py (bit-exact).
SHORT = [("rd", 2, "fp16", 4), ("r", 3, "bf16", 4), ("d", 4, "int32", 32)]


@pytest.mark.parametrize("kind,m,dtype,lanes", SHORT, ids=[f"{k}-m{m}-{t}-x{n}" for k, m, t, n in SHORT])
def test_cell_soak_short(kind, m, dtype, lanes):
    modes = representative_modes(kind, m)
    rep = cell_soak(kind, middle=m, lanes=lanes, dtype=dtype, beats=1000, batches=2,
                    seed=bench_seed(11), modes=modes)
    print(rep.table())
    _check_cell(rep, kind, 2 * 1000, modes)


def test_cell_soak_catches_corrupt_lane():
    """The RD cell built with fault='corrupt-lane' (bit 0 of the last lane of every sum flipped)
    fails the compiled soak at the first sum; the good cell passes the same soak."""
    kw = dict(lanes=4, dtype="fp16", beats=300, seed=5)
    cell_soak("rd", **kw)
    with pytest.raises(AssertionError, match=r"mode sum0 .* output 0: \d+ lane mismatches; beat 0 lane 3"):
        cell_soak("rd", fault="corrupt-lane", **kw)


def test_cell_soak_catches_a_hang():
    """RD configuration word 7 (no mode) while the soak drives PASS traffic: nothing moves and
    the harness's budget ends the phase as a hang."""
    from fred.hdl.netlist.modes import RDMode

    with pytest.raises(AssertionError, match="exceeded its budget .*: a hang"):
        cell_soak("rd", lanes=4, dtype="fp16", beats=50, seed=5, modes=[RDMode.PASS], codes=[7])


# a 1-in, 1-out, 16-bit block: cfg 0 a correct one-beat buffer; 1 emits every beat twice;
# 2 drops valid every other cycle (retracts an offered beat); 3 changes the payload while stalled
BAD_BLOCK = """
module bad_block(input clk, input rst, input [1:0] cfg,
  input i__0__valid, output i__0__ready, input [15:0] i__0__payload,
  output o__0__valid, input o__0__ready, output [15:0] o__0__payload);
  reg v, flip, again;
  reg [15:0] d;
  wire hide = cfg == 2'd2 && flip;
  assign i__0__ready = !v;
  assign o__0__valid = v && !hide;
  assign o__0__payload = (cfg == 2'd3 && flip) ? ~d : d;
  always @(posedge clk) begin
    flip <= !flip;
    if (rst) begin v <= 1'b0; again <= 1'b0; flip <= 1'b0; end
    else if (!v && i__0__valid) begin v <= 1'b1; d <= i__0__payload; again <= cfg == 2'd1; end
    else if (o__0__valid && o__0__ready) begin v <= again; again <= 1'b0; end
  end
endmodule
"""


def _bad_block_soak(cfg):
    design = SoakDesign(BAD_BLOCK, "bad_block", 1, 1, 1, 16, 2, "bad-block")
    x = np.arange(1, 201, dtype=np.uint32).reshape(200, 1)

    def gen(b):
        return [StimPhase(cfg, 0.3, 0.5, [x], [200], 8, 5000, {"what": f"bad block cfg {cfg}"})]

    def check(b, phases, results):
        for ph, res in zip(phases, results):
            check_phase(ph.info["what"], ph, res, [x], width=16, lanes=1)

    return run_batches(design, 1, gen, check, 3, "bad block")


def test_harness_checks_can_fail():
    """The same harness and checks on a hand-written block: the correct buffer passes, a
    duplicated beat, a retracted beat and a payload changed while stalled each fail."""
    stats = _bad_block_soak(0)
    assert stats.beats == 200 and stats.cycles > 400
    with pytest.raises(AssertionError, match="output 0 delivered 400 beats, expected 200 .extra beats."):
        _bad_block_soak(1)
    with pytest.raises(AssertionError, match="stream-rule violations"):
        _bad_block_soak(2)
    with pytest.raises(AssertionError, match="stream-rule violations"):
        _bad_block_soak(3)


@pytest.mark.regress
def test_waves_name_the_vcd(monkeypatch):
    """``WAVES=1``: the harness is built with tracing and a failure names the batch's VCD. make
    regress-fabric (its own build with waves); make test checks the harness can fail without them
    (test_harness_checks_can_fail)."""
    import re
    from pathlib import Path

    monkeypatch.setenv("WAVES", "1")
    with pytest.raises(AssertionError, match="stream-rule violations") as exc:
        _bad_block_soak(2)
    vcd = Path(re.search(r"waves (\S+\.vcd)", str(exc.value)).group(1))
    text = vcd.read_text()
    assert "out0_valid" in text and "#10" in text


def test_fabric_soak_short():
    rep = fabric_soak(4, 3, 1, "fp16", beats=100, seed=bench_seed(21))
    print(rep.table())
    assert rep.latency_range["none"] == [9, 9]
    assert 9 <= rep.latency_range["idle"][0] <= rep.latency_range["idle"][1] <= 11
    assert rep.stats.phases >= 12 and rep.stats.beats >= 12 * 100


# ---- make regress: long soaks ------------------------------------------------------------------

CELLS = [(k, m, t) for k, m in (("rd", 2), ("r", 3), ("d", 3)) for t in dtype_names()]


@pytest.mark.regress
@pytest.mark.skipif(not REGRESS, reason="long soak: make regress (FRED_REGRESS=1)")
@pytest.mark.parametrize("kind,m,dtype", CELLS, ids=[f"{k}-m{m}-{t}" for k, m, t in CELLS])
def test_cell_soak_long(kind, m, dtype):
    """Every cell kind x element type, 4 lanes: 8 batches of 25,000 beats per mode."""
    modes = representative_modes(kind, m)
    rep = cell_soak(kind, middle=m, lanes=4, dtype=dtype, beats=25_000, batches=8,
                    seed=bench_seed(100 + CELLS.index((kind, m, dtype))), modes=modes)
    print(rep.table())
    _check_cell(rep, kind, 8 * 25_000, modes)


FABRICS = [(4, 3, 2, "fp16"), (5, 2, 1, "bf16"), (7, 3, 1, "fp32"), (12, 3, 1, "int32"),
           (12, 3, 2, "fp16")]


@pytest.mark.regress
@pytest.mark.skipif(not REGRESS, reason="long soak: make regress (FRED_REGRESS=1)")
@pytest.mark.parametrize("P,m,lanes,dtype", FABRICS, ids=[f"P{p}-m{m}-{t}-x{n}" for p, m, n, t in FABRICS])
def test_fabric_soak_long(P, m, lanes, dtype):
    """Random flows (8 regression cases of ~20 phases), 1,000 beats per port per phase."""
    rep = fabric_soak(P, m, lanes, dtype, beats=1000, batches=8, seed=bench_seed(200 + P + m))
    print(rep.table())
    assert rep.latency_range["none"][0] == rep.latency_range["none"][1] == rep.latency


@pytest.mark.regress
def test_fabric_soak_catches_corrupt_lane():
    with pytest.raises(AssertionError, match="lane mismatches"):
        fabric_soak(4, 3, 1, "fp16", beats=50, seed=4, fault="corrupt-lane")
