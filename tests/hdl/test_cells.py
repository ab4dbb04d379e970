# amaranth: UnusedElaboratable=no
"""Microswitch cells under amaranth.sim: every cell and mode, golden-checked, plus bad input.

The async testbench drives random beats with random source idles and sink back-pressure,
checks the stream rules on every output (no retraction, stable payload while stalled), and
compares each output's beat sequence with :mod:`fred.sim.golden.cells`. The heavy random
regression runs under Verilator (tests/sim/test_cells_cocotb.py).
"""

import random

import numpy as np
import pytest
from amaranth.hdl import Shape
from amaranth.sim import Simulator

from fred.hdl.cells.microswitches import DCell, RCell, RDCell, build_cell, cell_latency
from fred.hdl.netlist.modes import DMode, RDMode, RMode
from fred.sim.golden import cells as gc
from fred.sim.golden.elem import random_operands


def _raw(x):
    """The plain Value of a signal or a data view (``ctx.set`` of an int needs it for views)."""
    return x.as_value() if hasattr(x, "as_value") else x


def _pack(row, width):
    w = 0
    for k, v in enumerate(row):
        w |= int(v) << (k * width)
    return w


def _unpack(word, width, lanes):
    return [(word >> (k * width)) & ((1 << width) - 1) for k in range(lanes)]


def run_cell(cell, mode, inputs, *, idle=0.0, stall=0.0, seed=1, max_cycles=None,
             phases=None):
    """Simulate ``cell``; return (outputs, log).

    ``phases``: list of (mode, inputs); a phase starts when the previous one drained (all
    expected beats out). ``outputs[phase][j]`` lists the payload rows received on output j;
    ``log`` has per-phase ``first_in``, ``first_out`` cycles and counts.
    """
    if phases is None:
        phases = [(mode, inputs)]
    kind, m = cell.kind, cell.middle
    n_in, n_out = gc.port_counts(kind, m)
    W, L = cell.width, cell.lanes
    rng = random.Random(seed)
    results, logs = [], []
    expected_counts = []
    for md, ins in phases:
        exp = gc.expected_outputs(kind, md, ins, cell.dtype.name, m, lanes=L)
        expected_counts.append([len(e) for e in exp])
    slow = max(1e-3, (1 - stall) * (1 - idle))
    budget = max_cycles or 500 + int(sum(max(c, default=0) for c in expected_counts) * 4 / slow)

    async def bench(ctx):
        cyc = 0
        for (md, ins), want in zip(phases, expected_counts):
            ctx.set(_raw(cell.cfg), cell.encode(md, m) if kind != "rd" else cell.encode(md))
            queues = [list(x) if x is not None else [] for x in ins]
            got = [[] for _ in range(n_out)]
            pending = [None] * n_out
            holding = [False] * n_in
            log = {"first_in": None, "first_out": None, "cycles": 0, "in": [0] * n_in}
            start = cyc
            while [len(g) for g in got] != want:
                assert cyc < budget, f"hang: got {[len(g) for g in got]} of {want} beats"
                for k in range(n_in):
                    if not holding[k]:
                        if queues[k] and not (idle and rng.random() < idle):
                            ctx.set(cell.i[k].payload.as_value(), _pack(queues[k][0], W))
                            ctx.set(cell.i[k].valid, 1)
                            holding[k] = True
                        else:
                            ctx.set(cell.i[k].valid, 0)
                for j in range(n_out):
                    ctx.set(cell.o[j].ready, 0 if (stall and rng.random() < stall) else 1)
                # settled values of this cycle
                for j in range(n_out):
                    v = ctx.get(cell.o[j].valid)
                    p = ctx.get(cell.o[j].payload.as_value())
                    if pending[j] is not None:
                        assert v, f"o[{j}] dropped valid before transfer"
                        assert p == pending[j], f"o[{j}] payload changed while stalled"
                    if v and ctx.get(cell.o[j].ready):
                        got[j].append(_unpack(p, W, L))
                        pending[j] = None
                        if log["first_out"] is None:
                            log["first_out"] = cyc - start
                    elif v:
                        pending[j] = p
                for k in range(n_in):
                    if holding[k] and ctx.get(cell.i[k].ready):
                        queues[k].pop(0)
                        holding[k] = False
                        log["in"][k] += 1
                        if log["first_in"] is None:
                            log["first_in"] = cyc - start
                await ctx.tick()
                cyc += 1
            for k in range(n_in):
                ctx.set(cell.i[k].valid, 0)
            log["cycles"] = cyc - start
            # a few idle cycles: nothing more may come out
            for _ in range(cell.latency + 2):
                for j in range(n_out):
                    ctx.set(cell.o[j].ready, 1)
                    assert not ctx.get(cell.o[j].valid), f"o[{j}]: extra beat after drain"
                await ctx.tick()
                cyc += 1
            results.append(got)
            logs.append(log)

    sim = Simulator(cell)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return results, logs


def _inputs(kind, mode, m, dtype, lanes, n, rng):
    n_in, _ = gc.port_counts(kind, m)
    used = gc.used_inputs(kind, mode, m)
    ins = [None] * n_in
    for k in used:
        a, b = random_operands(dtype, n * lanes, rng)
        ins[k] = a.reshape(n, lanes)
    # for sums pair with the second operand stream of the same draw (special-value pairs)
    if any(r.is_sum for r in gc.routes(kind, mode, m)):
        a, b = random_operands(dtype, n * lanes, rng)
        ins[0], ins[1] = a.reshape(n, lanes), b.reshape(n, lanes)
    return ins


def _check(cell, mode, n=60, idle=0.3, stall=0.3, seed=5):
    rng = np.random.default_rng(seed)
    ins = _inputs(cell.kind, mode, cell.middle, cell.dtype.name, cell.lanes, n, rng)
    res, logs = run_cell(cell, mode, ins, idle=idle, stall=stall, seed=seed)
    exp = gc.expected_outputs(cell.kind, mode, ins, cell.dtype.name, cell.middle, lanes=cell.lanes)
    for j, (g, e) in enumerate(zip(res[0], exp)):
        assert np.array_equal(np.asarray(g, dtype=np.uint32).reshape(-1, cell.lanes), e), \
            f"{gc.mode_name(cell.kind, mode)}: output {j} differs"
    return logs[0]


# ---- every mode, every cell (one build per cell, modes in phases) --------------------------

def _all_phases(cell, modes, n, seed):
    rng = np.random.default_rng(seed)
    return [(md, _inputs(cell.kind, md, cell.middle, cell.dtype.name, cell.lanes, n, rng))
            for md in modes]


@pytest.mark.parametrize("kind,m,dtype,lanes", [
    ("rd", 2, "fp16", 2), ("rd", 2, "int32", 1),
    ("r", 3, "bf16", 2), ("r", 2, "int32", 1),
    ("d", 3, "fp32", 1), ("d", 4, "int32", 2),
])
def test_every_mode_golden(kind, m, dtype, lanes):
    cell = build_cell(kind, middle=m, lanes=lanes, dtype=dtype)
    modes = type(cell).all_modes(m)
    phases = _all_phases(cell, modes, 24, seed=11)
    res, logs = run_cell(cell, None, None, idle=0.3, stall=0.4, seed=3, phases=phases)
    for (md, ins), got in zip(phases, res):
        exp = gc.expected_outputs(kind, md, ins, dtype, m, lanes=lanes)
        for j, (g, e) in enumerate(zip(got, exp)):
            assert np.array_equal(np.asarray(g, dtype=np.uint32).reshape(-1, lanes), e), \
                f"{gc.mode_name(kind, md)}: output {j} differs"


@pytest.mark.parametrize("kind,mode", [
    ("rd", RDMode.PASS), ("rd", RDMode.SUM_BOTH), ("rd", RDMode.BCAST1),
    ("r", RMode((2, 0))), ("r", RMode((1, None), reduce=True)),
    ("d", DMode((2, 2))), ("d", DMode((0, 1))),
])
def test_latency_and_full_rate(kind, mode):
    cell = build_cell(kind, middle=3, lanes=2, dtype="fp16")
    log = _check(cell, mode, n=40, idle=0.0, stall=0.0)
    assert log["first_in"] == 0
    assert log["first_out"] == cell.latency == cell_latency("fp16") == 3
    assert log["cycles"] == 40 + cell.latency, "not one beat per cycle"


def test_int32_latency():
    cell = RDCell(1, "int32")
    log = _check(cell, RDMode.SUM0, n=20, idle=0.0, stall=0.0)
    assert log["first_out"] == cell.latency == 1
    assert log["cycles"] == 21


def _independence(cell, mode, busy_in, busy_out, blocked_out):
    """Flow on busy_in -> busy_out keeps full rate while blocked_out never takes a beat."""
    n_in, n_out = gc.port_counts(cell.kind, cell.middle)
    W, L = cell.width, cell.lanes
    moved = {"n": 0, "cycles": 0}

    async def bench(ctx):
        ctx.set(_raw(cell.cfg), cell.encode(mode, cell.middle) if cell.kind != "rd" else cell.encode(mode))
        for k in range(n_in):
            ctx.set(cell.i[k].valid, 1)
            ctx.set(cell.i[k].payload.as_value(), k + 1)
        ctx.set(cell.o[busy_out].ready, 1)
        ctx.set(cell.o[blocked_out].ready, 0)
        for c in range(100):
            if ctx.get(cell.o[busy_out].valid):
                moved["n"] += 1
            await ctx.tick()
        moved["cycles"] = 100

    sim = Simulator(cell)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert moved["n"] == 100 - cell.latency, f"flow stalled by the other flow: {moved}"


def test_rd_pass_flows_are_independent():
    cell = RDCell(1, "fp16")
    _independence(cell, RDMode.PASS, 0, 0, 1)
    _independence(cell, RDMode.PASS, 1, 1, 0)
    _independence(cell, RDMode.CROSS, 0, 1, 0)


def test_r_and_d_flows_are_independent():
    _independence(RCell(3, 1, "int32"), RMode((2, 0)), 0, 2, 0)
    _independence(DCell(3, 1, "bf16"), DMode((1, 2)), 1, 0, 1)


def test_broadcast_waits_for_the_stalled_output():
    """A broadcast is one flow: a stalled output stops its sibling after at most one beat."""
    cell = RDCell(1, "int32")
    seen = {"n": 0}

    async def bench(ctx):
        ctx.set(_raw(cell.cfg), cell.encode(RDMode.BCAST0))
        ctx.set(cell.i[0].valid, 1)
        ctx.set(cell.o[0].ready, 1)
        ctx.set(cell.o[1].ready, 0)
        for _ in range(50):
            if ctx.get(cell.o[0].valid):
                seen["n"] += 1
            await ctx.tick()

    sim = Simulator(cell)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert seen["n"] == 1


def test_unused_inputs_not_ready():
    cell = RCell(3, 1, "int32")

    async def bench(ctx):
        ctx.set(_raw(cell.cfg), cell.encode(RMode((None, 1)), 3))
        ctx.set(cell.i[0].valid, 1)
        ctx.set(cell.i[1].valid, 1)
        for _ in range(5):
            for j in range(3):
                ctx.set(cell.o[j].ready, 1)
            await ctx.tick()
            assert not ctx.get(cell.i[0].ready)
            assert ctx.get(cell.i[1].ready)
            assert not ctx.get(cell.o[0].valid) and not ctx.get(cell.o[2].valid)

    sim = Simulator(cell)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()


def test_corrupt_lane_fault_is_caught():
    cell = RDCell(2, "fp16", fault="corrupt-lane")
    with pytest.raises(AssertionError, match="differs"):
        _check(cell, RDMode.SUM0, n=10, idle=0.0, stall=0.0)
    # pass-through paths are untouched by the fault
    _check(cell, RDMode.PASS, n=10, idle=0.0, stall=0.0)


# ---- parameters, modes, encodings ------------------------------------------------------------

@pytest.mark.parametrize("ctor,msg", [
    (lambda: RCell(1, 4, "fp16"), "middle 1 is too small: must be >= 2"),
    (lambda: DCell(0, 4, "fp16"), "middle 0 is too small: must be >= 2"),
    (lambda: RCell(3, 0, "fp16"), "lanes 0 is too small: must be >= 1"),
    (lambda: RDCell(-2, "fp16"), "lanes -2 is too small: must be >= 1"),
    (lambda: RDCell(4, "fp8"), "unknown element type 'fp8'; known: fp16, bf16, fp32, int32"),
    (lambda: DCell(3, 4, "float16"), "unknown element type 'float16'"),
    (lambda: RCell(2.5, 4, "fp16"), "middle must be an integer, not float 2.5"),
    (lambda: RDCell(4, "fp16", fault="bogus"), "unknown fault 'bogus'"),
    (lambda: RCell.encode(RMode((3, None)), 3), "sel[0] 3 is out of range"),
    (lambda: RCell.encode(RMode((1, 1)), 3), "sends both inputs to output 1"),
    (lambda: RCell.encode(RMode((0, 1), reduce=True), 3), "reduce needs sel[0] set and sel[1] None"),
    (lambda: RCell.encode(DMode((0, 1)), 3), "R-microswitch mode must be an RMode"),
    (lambda: DCell.encode(DMode((0, 4)), 4), "src[1] 4 is out of range"),
    (lambda: DCell.encode(RDMode.PASS, 4), "D-microswitch mode must be a DMode"),
    (lambda: RDCell.encode("sum2"), "unknown RD-microswitch mode 'sum2'"),
    (lambda: RDCell.encode(RMode()), "RD-microswitch mode must be an RDMode"),
])
def test_bad_parameters_one_line(ctor, msg):
    # a wrong type is a TypeError, a wrong value a ValueError (fred.hdl.params)
    with pytest.raises(TypeError if "must be an integer" in msg else ValueError) as exc:
        ctor()
    assert msg in str(exc.value)
    assert "\n" not in str(exc.value)


def test_encodings_distinct_and_fit():
    for m in (2, 3, 4, 5):
        for cls in (RCell, DCell):
            lay = cls.config_layout(m)
            codes = [cls.encode(md, m) for md in cls.all_modes(m)]
            assert len(set(codes)) == len(codes)
            assert all(0 <= c < (1 << lay.size) for c in codes)
    assert [RDCell.encode(md) for md in RDMode] == list(range(7))
    assert RDCell.encode("sum-both") == 6


def test_latency_is_class_level():
    for dt, lat in (("int32", 1), ("fp16", 3), ("bf16", 3), ("fp32", 3)):
        assert RCell.cell_latency(dt) == DCell.cell_latency(dt) == RDCell.cell_latency(dt) == lat
        assert RCell(2, 1, dt).latency == DCell(3, 1, dt).latency == RDCell(1, dt).latency == lat


def test_ports():
    c = RCell(4, 3, "bf16")
    assert len(c.i) == 2 and len(c.o) == 4
    assert c.signature.members["cfg"].shape == RCell.config_layout(4)
    d = DCell(4, 3, "bf16")
    assert len(d.i) == 4 and len(d.o) == 2
    rd = RDCell(3, "fp32")
    assert len(rd.i) == 2 and len(rd.o) == 2
    assert Shape.cast(rd.signature.members["cfg"].shape).width == 3


# ---- the golden model on hand-worked examples ----------------------------------------------

def test_golden_cells_examples():
    one, nan_payload, inf, ninf = 0x3C00, 0x7C01, 0x7C00, 0xFC00
    a = np.array([[one, nan_payload], [inf, 0x0001]], dtype=np.uint32)
    b = np.array([[one, one], [ninf, 0x8001]], dtype=np.uint32)
    s0, s1 = gc.expected_outputs("rd", RDMode.SUM1, [a, b], "fp16")
    assert s0.shape == (0, 2)
    assert s1.tolist() == [[0x4000, 0x7E00], [0x7E00, 0x0000]]   # 1+1, NaN, inf-inf, x + -x
    p0, p1 = gc.expected_outputs("rd", RDMode.CROSS, [a, b], "fp16")
    assert p0.tolist() == b.tolist() and p1.tolist() == a.tolist()  # payloads untouched
    outs = gc.expected_outputs("r", RMode((2, None), reduce=True), [a, b[:1]], "fp16", middle=3)
    assert [len(o) for o in outs] == [0, 0, 1]                      # a sum pairs beats
    outs = gc.expected_outputs("d", DMode((1, 1)), [None, a, b], "fp16", middle=3)
    assert outs[0].tolist() == outs[1].tolist() == a.tolist()
    i32 = gc.expected_outputs("rd", "sum_both", [[[0x7FFFFFFF]], [[1]]], "int32")
    assert i32[0].tolist() == i32[1].tolist() == [[0x80000000]]
    assert gc.used_inputs("d", DMode((3, None)), 4) == [3]
    assert gc.used_outputs("r", RMode((None, 1)), 2) == [1]
    with pytest.raises(ValueError, match="out of range"):
        gc.routes("d", DMode((0, 5)), 4)
