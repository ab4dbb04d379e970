"""The reproduced headline table (FRED-SPEC §7) and schedule properties, with real simulations.

All eight Fred-C/Fred-D speedups fall outside +-10% of the paper with the one documented
parameter set (an H100-like NPU at its roofline makes every headline iteration compute-bound);
docs/training.md explains each case with the model's own numbers. Per the issue, each is
therefore asserted at its *measured* value with a tolerance (MEASURED below), and the
mechanisms the paper names are asserted where they can be checked: the communication-only
ratios (corner-limited mesh All-Reduce, 4x MP/PP bandwidth, in-switch byte halving, the 0.65
edge-I/O hotspot) come out of simulated routes.
"""

import math

import pytest

from fred import FredError
from fred.model.estimate import PAPER_SPEEDUPS, estimate, estimate_table

#: measured with the default parameter set (docs/training.md, "Reproduced table"); documented
#: exceptions to the paper's values (PAPER_SPEEDUPS), asserted at +-3%
MEASURED = {
    "resnet-152": {"fred-c": 1.000, "fred-d": 1.000},
    "transformer-17b": {"fred-c": 1.064, "fred-d": 1.065},
    "gpt3-175b": {"fred-c": 1.029, "fred-d": 1.031},
    "transformer-1t": {"fred-c": 1.000, "fred-d": 1.000},
}
TOL = 0.03


@pytest.fixture(scope="module")
def table():
    rows = estimate_table(None, ["mesh", "fred-c", "fred-d"])
    return {(e.workload, e.fabric): e for e in rows}


@pytest.mark.parametrize("wl", list(MEASURED))
@pytest.mark.parametrize("fab", ["fred-c", "fred-d"])
def test_headline_speedup(table, wl, fab):
    e = table[(wl, fab)]
    paper = PAPER_SPEEDUPS[wl][fab]
    assert e.paper_speedup == paper
    if abs(e.speedup - paper) / paper <= 0.10:
        return                                    # reproduced within +-10%
    # documented exception: asserted at its measured value
    assert e.speedup == pytest.approx(MEASURED[wl][fab], rel=TOL), (wl, fab, e.speedup)


def test_breakdown_sums_and_is_nonnegative(table):
    for e in table.values():
        assert e.compute_time > 0
        assert all(v >= 0 for v in e.exposed.values()), e.exposed
        assert math.isclose(e.compute_time + e.exposed_comm, e.iteration_time, rel_tol=1e-9, abs_tol=1e-12)
        assert e.compute_busy <= e.iteration_time * (1 + 1e-9)
        assert "switch" not in e.timing_source or e.timing_source


def test_mechanisms_emerge_from_routes(table):
    busy = lambda wl, f, k: table[(wl, f)].comm_busy[k]
    # ResNet-152 wafer-wide DP All-Reduce: mesh ~1.5 TB/s/NPU (corner NPUs), Fred-C 3 TB/s,
    # Fred-D 3 TB/s with about half the bytes (paper §8.1/8.2)
    r_c = busy("resnet-152", "mesh", "dp") / busy("resnet-152", "fred-c", "dp")
    r_d = busy("resnet-152", "mesh", "dp") / busy("resnet-152", "fred-d", "dp")
    assert 1.8 < r_c < 2.3 and 3.4 < r_d < 4.4, (r_c, r_d)
    # Transformer-17B MP(2): one 750 GB/s mesh link vs 3 TB/s into the L1 (paper: ~4x)
    r_mp = busy("transformer-17b", "mesh", "mp") / busy("transformer-17b", "fred-c", "mp")
    assert 3.0 < r_mp < 4.2, r_mp
    # ... DP(5): in-switch reduction moves ~37.5% fewer bytes on Fred-D than Fred-C
    r_dp = busy("transformer-17b", "fred-c", "dp") / busy("transformer-17b", "fred-d", "dp")
    assert 1.35 < r_dp < 1.75, r_dp
    # Transformer-1T weight streaming to all 20 NPUs: mesh edge I/O at 0.65 of line rate (with
    # HBM large enough that no activations are offloaded through the same I/O controllers)
    from fred.model.compute import default_npu
    big = default_npu().replace(hbm_capacity=20e12)
    stream = {f: estimate("transformer-1t", f, npu=big).comm_busy["stream"] for f in ("mesh", "fred-d")}
    r_io = stream["mesh"] / stream["fred-d"]
    assert 1.4 < r_io < 1.7, r_io


def test_exposed_comm_shrinks_on_fred(table):
    for wl in MEASURED:
        mesh = table[(wl, "mesh")]
        for f in ("fred-c", "fred-d"):
            # latency-bound tails (a few us) may differ; bandwidth-bound exposure must not grow
            assert table[(wl, f)].exposed_comm <= mesh.exposed_comm * 1.05 + 1e-5, (wl, f)


def test_more_bandwidth_never_slower():
    from fred.model.params import GB, default_params
    p = default_params()
    fast = p.replace(mesh_link_bw=2 * p.mesh_link_bw, npu_net_bw=2 * p.npu_net_bw)
    for f in ("mesh", "fred-d"):
        a = estimate("transformer-17b", f, microbatches=2)
        b = estimate("transformer-17b", f, microbatches=2, params=fast)
        assert b.iteration_time <= a.iteration_time * (1 + 1e-9)
        assert b.exposed_comm <= a.exposed_comm * (1 + 1e-9)


def test_faster_compute_exposes_more_communication():
    from fred.model.compute import default_npu
    npu = default_npu()
    fast = npu.replace(peak_flops=50 * npu.peak_flops, hbm_bw=50 * npu.hbm_bw)
    a = estimate("resnet-152", "mesh")
    b = estimate("resnet-152", "mesh", npu=fast)
    assert b.iteration_time < a.iteration_time
    assert b.exposed["dp"] > a.exposed["dp"]
    # with compute 50x faster, DP becomes visible and Fred-D's in-switch All-Reduce pays off
    d = estimate("resnet-152", "fred-d", npu=fast)
    assert b.iteration_time / d.iteration_time > 1.2


def test_pipeline_bubble_shrinks_with_microbatches():
    e1 = estimate("transformer-17b", "fred-d", microbatches=1)
    e8 = estimate("transformer-17b", "fred-d", microbatches=8)
    assert e8.iteration_time < e1.iteration_time
    # GPipe, 2 stages: bubble fraction (c-1)/(m+c-1): 1/2 at m=1, 1/9 at m=8
    assert e1.compute_time / e1.compute_busy == pytest.approx(2.0, rel=0.05)
    assert e8.compute_time / e8.compute_busy == pytest.approx(9 / 8, rel=0.05)


def test_bad_strategy_and_memory():
    with pytest.raises(ValueError, match="uses 40 NPUs, not 20"):
        estimate("resnet-152", "mesh", "MP(2)-DP(20)")
    with pytest.raises(FredError, match=r"does not fit in HBM .* under any memory policy"):
        estimate("gpt3-175b", "fred-d", mode="weight-stationary")
    with pytest.raises(ValueError, match="unknown fabric 'hypercube'"):
        estimate("resnet-152", "hypercube")
