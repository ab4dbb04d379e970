"""The fabric bench at the chiplet's real width: FRED_3(12) with 256 fp16 lanes (a 512-byte
flit per beat), hierarchical Verilog, a few hundred beats of every flow kind under random
pauses and back-pressure (lane ordering, packing and the full-width payload cannot hide at
4 lanes). Slow (a Verilator build of the 256-lane design): ``make regress``."""

import random

import pytest

from fred.hdl.routing import route
from fred.sim.measure_fabric import KINDS, kind_flows, run_fabric
from fred.sim.toolchain import bench_seed


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


@pytest.mark.regress
def test_fred3_p12_256_lanes_every_flow_kind():
    seed = bench_seed(1712)
    phases = _flows(12, 3, random.Random(seed))
    res = run_fabric(12, 3, 256, "fp16", phases, labels=list(KINDS), seed=seed, beats=300,
                     idle=0.2, stall=0.3, form="hier")
    assert [ph["label"] for ph in res["phases"]] == list(KINDS)
