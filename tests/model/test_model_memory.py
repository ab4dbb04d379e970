"""Memory feasibility and the policies that make a configuration fit (fred.model.workload.memory), and the
NPU presets (fred.model.workload.compute): mechanism checks, no frozen results.

Simulations here use small minibatches (1-2 samples per replica) so that they stay fast; the
assertions hold for any size.
"""

import re

import pytest

from fred import FredError
from fred.model.workload import compute as C
from fred.model.workload import memory as M
from fred.model.training.estimator import estimate
from fred.model.system.params import default_params
from fred.model.schedule.iteration import io_bandwidth, memory_plan
from fred.model.schedule.layout import plan_layout
from fred.model.network.topology import build_fabric
from fred.model.workload.loader import load_workload

GB = 1e9


# ---- activation bytes per layer ------------------------------------------------------------------

def test_transformer_saved_bytes_follow_korthikanti():
    """34 s h + 5 a s^2 bytes per layer and sequence with nothing recomputed (2-byte values, 1-byte
    dropout masks); MP splits 24 s h + 5 a s^2 of it; selective recomputation drops the 5 a s^2."""
    w = load_workload("transformer-17b")
    s, h, a = w.shape["seq"], w.shape["hidden"], w.shape["heads"]
    attn, mlp = (next(l for l in w.layers if l.kind == k) for k in ("attention", "mlp"))
    layer = lambda level, mp: M.saved_bytes(attn, level, mp) + M.saved_bytes(mlp, level, mp)
    assert layer("none", 1) == pytest.approx(34 * s * h + 5 * a * s * s)
    assert layer("none", 4) == pytest.approx(10 * s * h + (24 * s * h + 5 * a * s * s) / 4)
    assert layer("none", 1) - layer("selective", 1) == pytest.approx(5 * a * s * s)
    assert layer("full", 1) == pytest.approx(2 * s * h)              # the layer's input only
    # recomputing a layer materialises what it would have stored, less its checkpoint
    assert M.transient_bytes([attn, mlp], "full", 1) == pytest.approx(layer("none", 1) - 2 * s * h)
    assert M.transient_bytes([attn, mlp], "selective", 2) == pytest.approx(5 * a * s * s / 2)


def test_recompute_time_is_one_forward_or_the_attention_core():
    w = load_workload("transformer-17b")
    npu = C.default_npu()
    for l in w.layers:
        assert M.recompute_time(l, "full", 2, 2, npu) == pytest.approx(C.layer_time(l, "fwd", 2, 2, npu))
        assert M.recompute_time(l, "none", 2, 2, npu) == 0
        sel = M.recompute_time(l, "selective", 2, 2, npu)
        assert 0 <= sel <= C.layer_time(l, "fwd", 2, 2, npu)
        assert (sel > 0) == (l.kind == "attention")


# ---- the policies in the schedule --------------------------------------------------------------

def test_recompute_adds_one_forward_per_layer():
    """Full recomputation puts one extra forward of every layer on the critical path: the busiest
    NPU computes forward + backward + forward again (backward = 2x forward in FLOPs)."""
    kw = dict(strategy="MP(2)-DP(5)-PP(2)", microbatches=2, samples_per_replica=2)
    base = estimate("transformer-17b", "fred-d", memory="none", **kw)
    rec = estimate("transformer-17b", "fred-d", memory="recompute", **kw)
    assert base.memory_policy == "none" and rec.memory_policy == "recompute"
    extra = rec.compute_busy - base.compute_busy
    assert extra == pytest.approx(rec.recompute_time, rel=0.01)     # (busiest stage with and without)
    fwd = rec.recompute_time
    # compute busy = forward (F) + backward (~2F, the optimizer step is small) + recompute (F)
    assert base.compute_busy == pytest.approx(3 * fwd, rel=0.05)
    assert rec.iteration_time >= base.iteration_time + 0.9 * fwd
    assert rec.memory_per_npu < base.memory_per_npu


def test_selective_recompute_is_cheaper_than_full():
    kw = dict(strategy="MP(2)-DP(5)-PP(2)", microbatches=2, samples_per_replica=2)
    sel = estimate("transformer-17b", "fred-d", memory="selective", **kw)
    rec = estimate("transformer-17b", "fred-d", memory="recompute", **kw)
    assert 0 < sel.recompute_time < rec.recompute_time / 5
    assert rec.memory_per_npu < sel.memory_per_npu < sel.memory_before


def test_offload_runs_through_the_io_and_costs_at_least_its_bytes():
    """With a small HBM and a fast NPU, offloaded activations go out through the 18 I/O
    controllers and come back; the simulated transfers take at least bytes / I/O bandwidth and,
    with the I/O the bottleneck, show as exposed offload time that grows when the I/O slows."""
    p = default_params()
    fast = C.default_npu().replace(peak_flops=100 * C.PEAK_FLOPS, hbm_bw=100 * C.HBM_BW, hbm_capacity=32 * GB)
    kw = dict(strategy="MP(2)-DP(10)-PP(1)", samples_per_replica=2, memory="offload", npu=fast)
    e = estimate("transformer-17b", "mesh", **kw)
    assert e.memory_policy == "offload" and e.memory_before > fast.hbm_capacity
    assert e.offload_bytes > 0 and e.memory_per_npu <= fast.hbm_capacity
    io_bw = io_bandwidth(build_fabric("mesh", p))
    assert io_bw == pytest.approx(p.io_count * p.io_bw * build_fabric("mesh", p).link_efficiency)
    total = e.offload_bytes * 20                          # every NPU offloads (one stage, MP x DP = 20)
    assert e.comm_busy["offload"] >= total / io_bw
    assert e.iteration_time >= total / io_bw
    assert e.exposed["offload"] > 0
    slow = estimate("transformer-17b", "mesh", params=p.replace(io_bw=p.io_bw / 2), **kw)
    assert slow.exposed["offload"] > e.exposed["offload"]
    assert slow.comm_busy["offload"] >= 2 * total / io_bw


def test_offload_contends_with_weight_streaming():
    """Activation offload and weight streaming share the I/O controllers in the flow simulator:
    the less HBM, the more is offloaded and the longer the weight stream is busy."""
    npu = C.default_npu().replace(peak_flops=30 * C.PEAK_FLOPS, hbm_bw=30 * C.HBM_BW)
    kw = dict(strategy="MP(2)-DP(5)-PP(2)", microbatches=2, samples_per_replica=2)
    need = estimate("gpt3-175b", "fred-d", memory="recompute", npu=npu, **kw).memory_per_npu
    runs = [estimate("gpt3-175b", "fred-d", memory="recompute+offload", npu=npu.replace(hbm_capacity=f * need), **kw)
            for f in (0.99, 0.7)]
    assert 0 < runs[0].offload_bytes < runs[1].offload_bytes
    assert runs[0].comm_busy["stream"] < runs[1].comm_busy["stream"]


def test_auto_picks_the_cheapest_policy_that_fits():
    e = estimate("transformer-17b", "fred-d", strategy="MP(2)-DP(5)-PP(2)", microbatches=8, samples_per_replica=16)
    assert e.memory_before > e.hbm_capacity >= e.memory_per_npu
    assert e.memory_policy != "none"
    fits = {c["policy"]: c for c in e.memory_candidates if c["fits"]}
    assert e.memory_policy in fits and "none" not in fits
    simulated = [c["iteration_time"] for c in fits.values() if c["iteration_time"] is not None]
    assert e.iteration_time == pytest.approx(min(simulated))
    # what fits without any measure is run as it is
    small = estimate("transformer-17b", "fred-d", strategy="MP(2)-DP(5)-PP(2)", microbatches=2,
                     samples_per_replica=2)
    assert small.memory_policy == "none" and small.memory_before == small.memory_per_npu <= small.hbm_capacity


def test_auto_splits_microbatches_when_one_microbatch_is_too_large():
    """Transformer-1T at 16 sequences in one microbatch: no policy fits (one layer's working set
    alone exceeds what the streamed weight buffers leave); auto splits the microbatch."""
    w = load_workload("transformer-1t")
    npu = C.default_npu()
    lay = plan_layout(w, (1, 20, 1), "weight-streaming", npu, 4, 4)
    assert not any(memory_plan(w, (1, 20, 1), lay, pol, 1, 16, npu).fits for pol in M.POLICIES.values())
    plan = memory_plan(w, (1, 20, 1), lay, M.POLICIES["recompute+offload"], 16, 16, npu)
    assert plan.fits
    # the smallest split the simulated choice ends up with fits, and is reported
    e = estimate("transformer-1t", "fred-d", microbatches=1, samples_per_replica=16, stream_steps=2)
    assert e.microbatches > 1 and e.memory_per_npu <= npu.hbm_capacity
    assert any("microbatches 1 ->" in n for n in e.notes)


def test_refusal_names_workload_strategy_and_bytes():
    w = load_workload("gpt3-175b")
    states = w.params / 4 * (2 + 14 / 5)          # MP(2) x PP(2) shards; ZeRO-2 over DP(5)
    with pytest.raises(FredError) as exc:
        estimate("gpt3-175b", "mesh", mode="weight-stationary")
    msg = str(exc.value)
    assert "\n" not in msg and msg.startswith("gpt3-175b MP(2)-DP(5)-PP(2) (weight-stationary) does not fit in HBM")
    assert "under any memory policy" in msg and "model states alone exceed HBM" in msg
    got = float(re.search(r"model states ([0-9.]+) GB", msg).group(1)) * GB
    assert got == pytest.approx(states, rel=0.1)                  # the busiest stage holds a bit more
    # none refuses what does not fit, naming the bytes that do not fit
    with pytest.raises(FredError, match=r"with memory policy none: needs at least [0-9.]+ GB per NPU"):
        estimate("transformer-17b", "mesh", memory="none")


def test_memory_policy_names_are_checked():
    assert M.check_policy("Selective+Offload") == "selective+offload"
    with pytest.raises(ValueError, match="memory policy 'swap' is unknown"):
        M.check_policy("swap")


def test_sweep_shows_infeasible_strategies():
    from fred.commands.sweep import format_sweep, summary, sweep

    npu = C.default_npu().replace(hbm_capacity=0.3 * GB)
    res = sweep("resnet-152", ("fred-d",), 16, npu=npu, sim_options={"memory": "none"})
    bad = [r for r in res if r["estimate"] is None]
    ok = [r for r in res if r["estimate"] is not None]
    assert bad and all("does not fit in HBM" in r["error"] for r in bad)
    assert all(r["estimate"].memory_per_npu <= npu.hbm_capacity for r in ok)
    text = format_sweep(res, summary(res), "t", "resnet-152", 16, npu)
    assert text.count("INFEASIBLE, skipped") == len(bad) and "under no allowed memory policy" in text


# ---- NPU presets -------------------------------------------------------------------------------

def test_presets_scale_compute_bound_layers_with_flops():
    h, b = C.npu_preset("h100"), C.npu_preset("B200")
    assert h == C.default_npu() and b.name == "b200"
    assert b.peak_flops > h.peak_flops and b.hbm_capacity > h.hbm_capacity and b.hbm_bw > h.hbm_bw
    assert h.hbm_bw == default_params().hbm_bw              # the wafer's NPU keeps FRED-SPEC's 3 TB/s
    assert h.utilisation == b.utilisation == C.UTILISATION
    w = load_workload("transformer-17b")
    mlp = next(l for l in w.layers if l.kind == "mlp")
    assert C.roofline_bound(mlp, "fwd", 16, 1, h) == C.roofline_bound(mlp, "fwd", 16, 1, b) == "compute"
    ratio = C.layer_time(mlp, "fwd", 16, 1, h) / C.layer_time(mlp, "fwd", 16, 1, b)
    assert ratio == pytest.approx(b.peak_flops / h.peak_flops)
    with pytest.raises(ValueError, match="npu 'a100' is unknown"):
        C.npu_preset("a100")


def test_utilisation_derates_compute_bound_layers_only():
    w = load_workload("resnet-152")
    ideal = C.default_npu().replace(utilisation=1.0)
    real = C.default_npu()
    for l in w.layers:
        t1, t2 = C.layer_time(l, "fwd", 16, 1, ideal), C.layer_time(l, "fwd", 16, 1, real)
        if C.roofline_bound(l, "fwd", 16, 1, real) == "memory":
            assert t2 == pytest.approx(t1)
        else:
            assert t1 < t2 <= t1 / real.utilisation * (1 + 1e-12)


def test_cli_npu_and_memory_options():
    import argparse

    from fred.commands.estimate import add_arguments, hardware_from_args

    ap = argparse.ArgumentParser()
    add_arguments(ap)
    _, npu, opts = hardware_from_args(ap.parse_args(["--npu", "b200", "--hbm-gb", "100", "--memory", "recompute"]))
    assert npu.peak_flops == C.B200_PEAK_FLOPS and npu.hbm_capacity == 100 * GB and opts["memory"] == "recompute"
    _, npu, opts = hardware_from_args(ap.parse_args([]))
    assert npu == C.default_npu() and opts["memory"] == "auto"
