"""The fabric bench at the chiplet's real width: 256 fp16 lanes (a 512-byte flit per beat),
hierarchical Verilog, a few hundred beats of every flow kind under random pauses and
back-pressure, so lane ordering, packing and the full-width payload cannot hide behind 4 lanes.

Verilator flattens a design, copying every module into every instance: FRED_3(12) at 256 lanes
needs more than 7.5 GB to verilate that way. These builds mark the cell kinds as Verilator
hierarchical blocks (``run_fabric(..., verilator_blocks=True)``, ``--hierarchical``): each cell
kind is verilated once (FRED_3(12) at 256 lanes: 0.6 GB). The chiplet itself, FRED_3(12) at 256
lanes, 300 beats per flow kind, is ``make regress`` (about 6 CPU minutes, build and simulation),
and so is the regression bench on FRED_3(5) at 256 lanes; ``make test`` checks the marking here
and runs the bench with the blocks on FRED_3(5) at 5 lanes (tests/hdl/test_hier.py).
"""

import random

import pytest

from fred.hdl.routing.compiler import route
from fred.sim.characterize.fabric import CELL_MODULE_PREFIXES, KINDS, TOP, kind_flows, run_fabric
from fred.sim.toolchain import bench_seed, verilator_hier_blocks


def _flows(P, m, rng):
    out = []
    for kind in KINDS:
        for _ in range(100):
            fl = kind_flows(kind, P, rng)
            try:
                route(P, m, fl)
                out.append(fl)
                break
            except ValueError:
                continue
    return out


def test_hier_blocks_mark_each_cell_kind_once():
    from fred.hdl.fabric.recursive import fabric_verilog_text

    text = fabric_verilog_text(12, 3, 2, "fp16", TOP, form="hier")
    marked, names = verilator_hier_blocks(text, CELL_MODULE_PREFIXES, TOP)
    assert sorted(names) == ["fred_d_m3_l2_fp16", "fred_demux_m3_l2_fp16_lat3", "fred_mux_m3_l2_fp16_lat3",
                             "fred_r_m3_l2_fp16", "fred_rd_l2_fp16"]
    assert marked.count("/*verilator hier_block*/") == 5
    assert marked.replace("\n  /*verilator hier_block*/", "") == text     # nothing else changes
    with pytest.raises(ValueError, match="nothing to verilate hierarchically"):
        verilator_hier_blocks(text, ("no_such_",), TOP)


@pytest.mark.regress
def test_fabric_bench_at_real_width_with_verilator_blocks():
    """The regression bench (20 phases: every flow kind, mixed sets, the collectives' steps; 24
    beats each) at the real width, 256 fp16 lanes (a 4,096-bit beat), on FRED_3(5) built with
    the cells as Verilator hierarchical blocks: lane order and packing at full width (about 100
    s of CPU, most of it the build). make test runs the same bench, form and blocks on FRED_3(5)
    at 5 lanes (tests/hdl/test_hier.py::test_fabric_bench_passes_on_hier_form)."""
    from tests.sim.test_fabric_sim import _run_case

    res = _run_case(5, 3, 256, "fp16", default_seed=1053, form="hier", verilator_blocks=True)
    assert all(ph["latency"]["min"] >= res["latency_formula"] for ph in res["phases"])


@pytest.mark.regress
@pytest.mark.parametrize("P", [12])
def test_fred3_p12_256_lanes_every_flow_kind(P):
    """FRED_3(12), the chiplet, at 256 fp16 lanes: 300 beats per port of unicast, reduce,
    multicast and all-reduce, bit-exact against the golden model."""
    seed = bench_seed(1712)
    phases = _flows(P, 3, random.Random(seed))
    res = run_fabric(P, 3, 256, "fp16", phases, labels=list(KINDS), seed=seed, beats=300,
                     idle=0.2, stall=0.3, form="hier", verilator_blocks=True)
    assert [ph["label"] for ph in res["phases"]] == list(KINDS)


#: the switch's own wide modules, verilated once each besides the cells
SWITCH_BLOCK_PREFIXES = CELL_MODULE_PREFIXES + ("fred_switch_in_", "fred_switch_out_")


def wide_switch_run(P=4, lanes=256, seed=1717, **kw):
    """The switch regression bench (tests/sim/test_switch_bench.py) on the hierarchical switch at
    ``lanes`` fp16 lanes: a 48-bit header flit and ``lanes`` x 16-bit payload flits through the
    same ports, buffers and fabric, every packet checked against the golden model."""
    from fred.hdl.fabric.hier import emit_modules
    from fred.hdl.switch.top import Switch
    from fred.sim.toolchain import HIER_ARGS, run_bench
    from tests.sim import test_switch_bench as tsb

    registry = {}
    sw = Switch(P, 3, lanes, "fp16", data_depth=12, ctrl_depth=2, max_len=4, table_entries=8,
                out_credits=(0,) * 4, _shared=registry, _hier=True)
    text, _ = verilator_hier_blocks(emit_modules(sw, "fred_switch", registry), SWITCH_BLOCK_PREFIXES,
                                    "fred_switch")
    tsb._CACHE[(P, lanes, "fp16", "fred", None)] = (sw, text)
    try:
        verilog, cfg = tsb.bench_config(P=P, lanes=lanes, dtype="fp16", **kw)
    finally:
        del tsb._CACHE[(P, lanes, "fp16", "fred", None)]
    return run_bench(verilog=verilog, toplevel="fred_switch", test_module="fred.sim.benches.switch",
                     tag=f"switch-p{P}-l{lanes}-fp16-hier-blocks", config=cfg, seed=seed,
                     testcase="switch_random", build_args=HIER_ARGS)


@pytest.mark.regress
def test_switch_256_lanes_header_and_payload():
    wide_switch_run(P=4, lanes=256, rounds=6, max_cycles=200_000)
