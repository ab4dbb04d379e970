"""Fred-D against the mesh over a whole sweep where the I/O controllers are the bottleneck
(issue 24): transformer-1t, every MP x DP x PP = 20 strategy, minibatch DP x 40, on an NPU
152 times an H100's compute (``fred sweep -w transformer-1t --rule 40 --tflops 150587 --hbm-bw
456.6``): weight streaming and activation offload through the 18 I/O controllers set the pace.

What the design promises, and the one mechanism that takes it back (docs/training.md, "Fred-D
and the I/O"): the FRED fabric itself -- its bandwidth, I/O controllers on the L1 switches
instead of the mesh's edge hotspots -- never makes an iteration slower than the mesh: with the
switches forwarding every traffic class at once (as the mesh's NPU routers do), Fred-D is never
slower, for any strategy. What can make it slower is FRED-SPEC §4's arbitration: a FRED switch
runs one phase at a time, MP > PP > DP, and the I/O traffic (on the DP VC) gets only the switch
time MP and PP leave; in an I/O-bound regime every MP or PP phase at an L1 switch stalls its I/O
controllers. Every strategy on which Fred-D is slower than the mesh pays exactly that: it
preempts, and its I/O traffic is busy longer than without the arbitration.
"""

from __future__ import annotations

import pytest

import fred.model.training.estimator as E
from fred.commands.sweep import summary, sweep
from fred.model.workload import compute as C

#: the issue's I/O-bound NPU: --tflops 150587 --hbm-bw 456.6 (152x the default NPU's compute)
IO_BOUND_NPU = dict(peak_flops=150587e12, hbm_bw=456.6e12)
RULE = 40


def _io_busy(e) -> float:
    return e.comm_busy.get("stream", 0.0) + e.comm_busy.get("offload", 0.0)


@pytest.fixture(scope="module")
def runs():
    npu = C.default_npu().replace(**IO_BOUND_NPU)
    res = sweep("transformer-1t", ("mesh", "fred-d"), RULE, npu=npu)
    rows = {(r["strategy"], r["fabric"]): r["estimate"] for r in res}
    # the same Fred-D runs with every FRED switch forwarding all classes at once
    orig = E.build_fabric

    def no_phases(name, p):
        t = orig(name, p)
        t.fred_switches = False
        return t

    free = {}
    E.build_fabric = no_phases
    try:
        for (s, f), e in rows.items():
            if f == "fred-d" and e is not None:
                free[s] = E.estimate("transformer-1t", "fred-d", s, npu=npu, microbatches=e.microbatches,
                                     samples_per_replica=RULE, reference_memory=rows[(s, "mesh")].memory_policy)
    finally:
        E.build_fabric = orig
    return res, rows, free


def test_one_memory_policy_per_strategy(runs):
    _, rows, free = runs
    for s in free:
        assert rows[(s, "fred-d")].memory_policy == rows[(s, "mesh")].memory_policy, s
        assert rows[(s, "fred-d")].memory_choice == "shared"
        assert rows[(s, "fred-d")].compute_time == pytest.approx(rows[(s, "mesh")].compute_time, rel=1e-9)


def test_the_fabric_itself_never_loses_to_the_mesh(runs):
    _, rows, free = runs
    assert len(free) == 18
    for s, e in free.items():
        mesh = rows[(s, "mesh")]
        assert e.iteration_time <= mesh.iteration_time * (1 + 1e-6), (s, e.iteration_time, mesh.iteration_time)
        assert e.preemptions == 0


def test_where_fred_d_is_slower_the_one_phase_arbitration_is_why(runs):
    res, rows, free = runs
    slower = [s for s in free if rows[(s, "fred-d")].iteration_time > rows[(s, "mesh")].iteration_time * (1 + 1e-6)]
    for s in slower:
        d, alone = rows[(s, "fred-d")], free[s]
        assert d.preemptions > 0, s
        assert d.iteration_time > alone.iteration_time, s
        assert _io_busy(d) > _io_busy(alone), (s, _io_busy(d), _io_busy(alone))
    assert summary(res)["slower_than_mesh"] == len(slower)
