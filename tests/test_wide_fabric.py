"""The fabric bench at the chiplet's real width: 256 fp16 lanes (a 512-byte flit per beat),
hierarchical Verilog, a few hundred beats of every flow kind under random pauses and
back-pressure, so lane ordering, packing and the full-width payload cannot hide behind 4 lanes.
FRED_3(4) (R, D and RD cells, 7 cells): Verilator flattens the design, and FRED_3(12) at 256
lanes (93 cells) needs more than 7 GB and many minutes just to lint, so the chiplet itself is
benched at its real width only by ``make regress`` runs that ask for it (``FRED_WIDE_PORTS``).
Slow (a Verilator build of a 256-lane design): ``make regress``."""

import os
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
def test_fred3_256_lanes_every_flow_kind():
    P = int(os.environ.get("FRED_WIDE_PORTS", "4"))
    seed = bench_seed(1712)
    phases = _flows(P, 3, random.Random(seed))
    res = run_fabric(P, 3, 256, "fp16", phases, labels=list(KINDS), seed=seed, beats=300,
                     idle=0.2, stall=0.3, form="hier")
    assert [ph["label"] for ph in res["phases"]] == list(KINDS)
