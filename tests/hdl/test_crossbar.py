"""The output-reducing crossbar baseline: config, golden order, and cocotb runs (throughput,
bit-exact results, back-pressure, a checker that can fail)."""

import numpy as np
import pytest

from fred.hdl.crossbar import (Crossbar, crossbar_config, crossbar_latency, crossbar_throughput,
                               tree_order)
from fred.sim.benches.crossbar import default_flows, golden_crossbar, measure_crossbar
from fred.sim.golden.elem import add, from_values


def test_config_word():
    # flow 0: inputs 0,1 -> outputs 0,1 ; flow 1: input 2 -> output 3
    w = crossbar_config(4, [([0, 1], [0, 1]), ([2], [3])])
    assert w == (0b0011 << 0) | (0b0011 << 4) | (0b0100 << 12)


@pytest.mark.parametrize("flows,needle", [
    ([([0, 4], [0])], "input port 4 out of range"),
    ([([0], [-1])], "output port -1 out of range"),
    ([([0, 1], [0]), ([1], [2])], "input port 1 used by two flows"),
    ([([0], [2]), ([1], [2])], "output port 2 used by two flows"),
    ([([], [0])], "empty port set"),
])
def test_bad_config(flows, needle):
    with pytest.raises(ValueError, match=needle):
        crossbar_config(4, flows)


@pytest.mark.parametrize("args,needle", [
    ((1, 4, "fp16", "tree"), "ports 1 is too small: must be >= 2"),
    ((4, 0, "fp16", "tree"), "lanes 0 is too small: must be >= 1"),
    ((65, 4, "fp16", "tree"), r"ports 65 is too large: must be <= 64"),
    ((4, 4, "fp16", "ring"), "unknown crossbar variant"),
    ((4, 4, "fp64", "tree"), "fp64"),
])
def test_bad_parameters(args, needle):
    with pytest.raises(ValueError, match=needle):
        Crossbar(*args)


def test_tree_order_and_figures():
    assert tree_order(4) == ((0, 1), (2, 3))
    assert tree_order(5) == (((0, 1), (2, 3)), 4)
    assert crossbar_latency(12, "fp16", "tree", 12) == 4 * 3
    assert crossbar_latency(12, "fp16", "tree", 1) == 1
    assert crossbar_throughput("serial", 12) == pytest.approx(1 / 11)
    assert crossbar_throughput("tree", 12) == 1.0
    from amaranth.hdl import Fragment

    for variant, n in (("tree", 11), ("serial", 1)):
        xb = Crossbar(12, 1, "fp16", variant)
        assert xb.adders_per_output == n
        Fragment.get(xb, None)  # elaborates


def test_golden_orders():
    rng = np.random.default_rng(0)
    data = {k: rng.integers(0, 1 << 16, (5, 2)).astype(np.uint32) for k in range(4)}
    ser = golden_crossbar("fp16", 4, "serial", [0, 1, 3], data)
    assert (ser == add("fp16", add("fp16", data[0], data[1]), data[3])).all()
    tree = golden_crossbar("int32", 4, "tree", [0, 1, 2, 3], data)
    assert (tree == (data[0] + data[1] + data[2] + data[3]) & 0xFFFFFFFF).all()
    # the tree pads an absent input with -0, which is exact: x + -0 == x
    fin = {k: from_values("fp16", rng.normal(0, 100, (5, 2))) for k in range(4)}
    t3 = golden_crossbar("fp16", 4, "tree", [0, 1, 2], fin)
    assert (t3 == add("fp16", add("fp16", fin[0], fin[1]), fin[2])).all()
    assert (golden_crossbar("fp16", 4, "tree", [2], data) == data[2]).all()


def _rates(r):
    return [f["beats_per_cycle"] for f in r["flows"]]


@pytest.mark.regress
def test_tree_crossbar_line_rate_and_exact():
    # All-Reduce over 3 ports plus a unicast, concurrently; zero back-pressure
    """make regress-cells: the crossbar is the comparison baseline, not FRED's datapath (a Verilator
    build each)."""
    r = measure_crossbar(4, "tree", [([0, 1, 2], [0, 1, 2]), ([3], [3])], lanes=1, beats=48, seed=3)
    assert _rates(r) == [1.0, 1.0]
    assert r["flows"][0]["latency_max"] == crossbar_latency(4, "fp16", "tree", 3) == 6
    assert r["flows"][1]["latency_max"] == 1
    # random back-pressure and idle sources: nothing lost, duplicated or wrong
    measure_crossbar(4, "tree", default_flows("all-reduce", 4), lanes=1, beats=48,
                     idle=0.3, stall=0.4, seed=4)


@pytest.mark.regress
def test_serial_crossbar_rate_and_exact():
    """make regress-cells: the crossbar is the comparison baseline, not FRED's datapath (a Verilator
    build each)."""
    r = measure_crossbar(4, "serial", default_flows("all-reduce", 4), lanes=1, beats=48, seed=5)
    assert _rates(r)[0] == pytest.approx(1 / 3, rel=0.05)       # 1/(P-1) of line rate
    r = measure_crossbar(4, "serial", [([0, 2], [1]), ([1], [0, 2, 3])], lanes=1, beats=48,
                         seed=6, idle=0.2, stall=0.3)
    assert 0 < _rates(r)[0] <= 1.0 and 0 < _rates(r)[1] <= 1.0


def _drop_caught(variant, **kw):
    """A crossbar that drops a beat (built with fault='drop-beat') fails the bench."""
    with pytest.raises(AssertionError, match="cocotb tests failed"):
        measure_crossbar(4, variant, default_flows("all-reduce", 4), lanes=1, beats=16, seed=5,
                         fault="drop-beat", **kw)


@pytest.mark.regress
def test_dropped_beat_mutant_caught():
    """make regress-cells, with the crossbar benches it checks."""
    _drop_caught("serial")


@pytest.mark.regress
def test_dropped_beat_mutant_caught_tree():
    _drop_caught("tree", idle=0.2, stall=0.3)


@pytest.mark.regress
@pytest.mark.parametrize("variant", ["tree", "serial"])
@pytest.mark.parametrize("kind", ["all-reduce", "reduce", "multicast", "unicast"])
@pytest.mark.parametrize("ports", [5, 8])
def test_crossbar_matrix(variant, kind, ports):
    r = measure_crossbar(ports, variant, default_flows(kind, ports), lanes=2, beats=64, seed=7)
    n = ports if kind in ("all-reduce", "reduce") else 1
    for f in r["flows"]:
        assert f["beats_per_cycle"] == pytest.approx(crossbar_throughput(variant, n), rel=0.1)
    measure_crossbar(ports, variant, default_flows(kind, ports), lanes=2, beats=64, seed=8,
                     idle=0.3, stall=0.3)
