"""Training model: workloads, roofline compute, schedule structure and bad input (no big sims)."""

import json
import math
import subprocess
import sys

import pytest

from fred import FredError
from fred.model.workload import compute as C
from fred.model.workload.loader import Layer, list_workloads, load_workload, workload_from_dict


# ---- workloads --------------------------------------------------------------------------------

def test_bundled_workloads():
    assert list_workloads() == ["resnet-152", "transformer-17b", "gpt3-175b", "transformer-1t", "llama2-70b",
                                "mixtral-8x7b", "deepseek-moe-16b"]
    for n in list_workloads():
        w = load_workload(n)
        assert w.source and w.layers and w.mode in ("weight-stationary", "weight-streaming")


@pytest.mark.parametrize("name, published, tol", [
    ("resnet-152", 60.19e6, 0.001),        # torchvision resnet152: 60,192,808
    ("transformer-17b", 17.2e9, 0.02),     # Turing-NLG: 17B
    ("gpt3-175b", 175e9, 0.01),            # Brown et al. Table 2.1
    ("transformer-1t", 1.008e12, 0.01),    # Narayanan et al. Table 1
    ("llama2-70b", 70.0e9, 0.02),          # Touvron et al. 2023: 70B (no position table, untied head)
])
def test_parameter_counts_match_published(name, published, tol):
    w = load_workload(name)
    assert abs(w.params - published) / published < tol, (name, w.params)


def test_resnet_exact_and_flops():
    w = load_workload("resnet-152")
    assert int(w.params) == 60192808
    # He et al.: 11.3e9 multiply-adds per image (v1.5 stride placement: ~11.5e9)
    macs = sum(l.fwd_flops for l in w.layers if l.kind in ("conv", "fc")) / 2
    assert 11.0e9 < macs < 11.8e9
    assert sum(l.kind in ("conv", "fc") for l in w.layers) == 152 + 4   # 152 layers + 4 downsample convs


def test_transformer_megatron_accounting():
    w = load_workload("gpt3-175b")
    d, s, L = 12288, 2048, 96
    blocks = [l for l in w.layers if l.kind in ("attention", "mlp")]
    assert len(blocks) == 2 * L
    assert sum(l.mp_ar_fwd for l in blocks) == 2 * L and sum(l.mp_ar_bwd for l in blocks) == 2 * L
    fwd = sum(l.fwd_flops for l in blocks)
    assert math.isclose(fwd, L * (24 * s * d * d + 4 * s * s * d), rel_tol=1e-9)
    assert all(math.isclose(l.bwd_flops, 2 * l.fwd_flops) for l in blocks)
    # ~6 x params x tokens per sample for fwd + bwd
    total = (w.fwd_flops + w.bwd_flops)
    assert 0.95 < total / (6 * w.params * s) < 1.2


def test_alias_and_path(tmp_path):
    assert load_workload("GPT3").name == "gpt3-175b"
    p = tmp_path / "tiny.yml"
    p.write_text("name: tiny\nkind: layers\nlayer_list:\n  - {fwd_flops: 1e9, params: 1e6, act_bytes: 1e6}\n")
    w = load_workload(str(p))
    assert w.params == 1e6 and w.layers[0].bwd_flops == 2e9


def test_unknown_workload_one_line():
    with pytest.raises(FredError, match="unknown workload 'vgg'.*known workloads: resnet-152"):
        load_workload("vgg")


@pytest.mark.parametrize("raw, msg", [
    ({"name": "x", "kind": "transformer", "layers": 2, "hidden": 10, "heads": 3, "seq": 4, "vocab": 5}, "multiple of heads"),
    ({"name": "x", "kind": "transformer", "layers": 2, "hidden": 12, "heads": 3, "seq": 4}, "missing field 'vocab'"),
    ({"name": "x", "kind": "transformer", "layers": -2, "hidden": 12, "heads": 3, "seq": 4, "vocab": 5}, "field 'layers' = -2 is too small: must be >= 1"),
    ({"name": "x", "kind": "cnn"}, "unknown kind 'cnn'"),
    ({"name": "x", "kind": "layers", "layer_list": [{"params": 1}]}, r"layer_list\[0\]\): missing field 'fwd_flops'"),
    ({"name": "x", "kind": "layers", "mode": "streamy", "layer_list": [{"fwd_flops": 1, "params": 1, "act_bytes": 1}]}, "unknown mode"),
])
def test_bad_workload_fields(raw, msg):
    with pytest.raises(FredError, match=msg):
        workload_from_dict(raw, "test")


# ---- compute roofline ----------------------------------------------------------------------------

def test_roofline_compute_and_memory_bound():
    npu = C.default_npu()
    big = Layer("mm", "mlp", 2e12, 4e12, 1e6, 1e3, 1e3)
    assert math.isclose(C.layer_time(big, "fwd", 1, 1, npu), 2e12 / (C.PEAK_FLOPS * C.UTILISATION))
    assert C.roofline_bound(big, "fwd", 1, 1, npu) == "compute"
    elt = Layer("relu", "eltwise", 1e6, 1e6, 0, 1e9, 3e9)
    assert math.isclose(C.layer_time(elt, "fwd", 1, 1, npu), 3e9 / C.HBM_BW)
    assert math.isclose(C.layer_time(elt, "bwd", 1, 1, npu), 6e9 / C.HBM_BW)
    assert C.roofline_bound(elt, "fwd", 1, 1, npu) == "memory"


def test_roofline_monotone_and_mp_split():
    w = load_workload("transformer-17b")
    slow, fast = C.default_npu(), C.default_npu().replace(peak_flops=2 * C.PEAK_FLOPS, hbm_bw=2 * C.HBM_BW)
    for l in w.layers:
        for ph in ("fwd", "bwd"):
            t1 = C.layer_time(l, ph, 2, 2, slow)
            assert C.layer_time(l, ph, 2, 2, fast) <= t1
            assert C.layer_time(l, ph, 2, 4, slow) <= t1 + 1e-15       # more MP never slower per NPU
            assert C.layer_time(l, ph, 4, 2, slow) >= t1                # more samples never faster
    # the transformer is compute-bound: time = FLOPs / sustained FLOP/s within 2%
    tot = C.layers_time(w.layers, "fwd", 16, 1)
    assert tot == pytest.approx(w.fwd_flops * 16 / (C.PEAK_FLOPS * C.UTILISATION), rel=0.02)


def test_npu_validation():
    with pytest.raises(FredError, match="utilisation"):
        C.NpuParams(utilisation=1.5)
    with pytest.raises(FredError, match="peak_flops"):
        C.NpuParams(peak_flops=0)


# ---- schedule pieces -----------------------------------------------------------------------------

def test_balanced_split_and_units():
    from fred.model.schedule.layout import balanced_split, streaming_units
    assert balanced_split([1] * 10, 3) == [0, 3, 7]
    assert balanced_split([5, 1, 1, 1, 1, 1], 3) == [0, 1, 3]
    assert balanced_split([1, 1], 5) == [0, 1]
    u = streaming_units(load_workload("gpt3-175b"))
    assert len(u) == 96 and u[0][0].kind == "embedding" and u[-1][-1].kind == "logits"
    assert sum(len(x) for x in u) == len(load_workload("gpt3-175b").layers)


def test_stationary_memory_check():
    from fred.model.schedule import stationary_memory
    w = load_workload("transformer-17b")
    states = 17.18e9 / 4 * (2 + 14 / 5)            # params per NPU x (fp16 weight + ZeRO-2 shards / DP)
    full = stationary_memory(w, (2, 5, 2), 8, 16)
    ckpt = stationary_memory(w, (2, 5, 2), 8, 16, policy="recompute")
    # every activation kept: Korthikanti et al.'s 34 s h + 5 a s^2 bytes per layer and sequence
    # (24 s h + 5 a s^2 of it split by MP(2)) for 39 layers x 16 sequences, on top of the states
    s, h, a = 1024, 4256, 28
    acts = (10 * s * h + (24 * s * h + 5 * a * s * s) / 2) * 39 * 16
    assert full == pytest.approx(states + acts, rel=0.05)
    # full recomputation keeps one 2 s h input per transformer layer and sequence, plus the
    # working set of one layer being recomputed (one microbatch of 2 sequences)
    from fred.model.workload import memory as M
    from fred.model.schedule import memory_plan
    from fred.model.schedule.layout import plan_layout
    lay = plan_layout(w, (2, 5, 2), "weight-stationary", C.default_npu(), 4, 4)
    plan = memory_plan(w, (2, 5, 2), lay, M.POLICIES["recompute"], 8, 16, C.default_npu())
    st = plan.busiest()
    # one s x h fp16 tensor per transformer layer (and for the embedding output and logits input)
    n_ckpt = sum(1 for layer in lay.stages[plan.stages.index(st)] if layer.kind != "mlp")
    assert st.stored == pytest.approx(2 * s * h * n_ckpt * 16, rel=1e-6)
    assert st.transient == pytest.approx(((10 * s * h + (24 * s * h + 5 * a * s * s) / 2) - 2 * s * h) * 2, rel=0.05)
    assert ckpt == pytest.approx(st.states + st.stored + st.transient) and ckpt < full / 3
    g = load_workload("gpt3-175b")
    assert stationary_memory(g, (1, 20, 1), 1, 16, policy="recompute") > 400e9


# ---- CLI (argument errors need no simulation) ---------------------------------------------------

def _fred(*args):
    return subprocess.run([sys.executable, "-m", "fred", *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("args, msg", [
    (["estimate", "--workload", "vgg"], "unknown workload 'vgg'"),
    (["estimate", "--fabric", "hypercube"], "unknown fabric 'hypercube'"),
    (["estimate", "--workload", "resnet-152", "--strategy", "MP(2)-DP(5)-PP(3)"], "uses 30 NPUs, not 20"),
    (["estimate", "--workload", "gpt3-175b", "--fabric", "mesh", "--mode", "weight-stationary"], "does not fit in HBM"),
    (["estimate", "--workload", "resnet-152", "--npu", "a100"], "npu 'a100' is unknown"),
    (["estimate", "--workload", "resnet-152", "--memory", "swap"], "--memory 'swap' is unknown"),
    (["sweep", "--workload", "nope"], "unknown workload 'nope'"),
    (["estimate", "--workload", "resnet-152", "--utilisation", "2"], "utilisation"),
])
def test_cli_bad_input_one_line(args, msg):
    r = _fred(*args)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("fred: error:") and msg in lines[0], r.stderr
    assert "Traceback" not in r.stderr


def test_cli_estimate_json_and_plot(tmp_path):
    png = tmp_path / "fig10.png"
    r = _fred("estimate", "--workload", "resnet-152", "--fabric", "fred-d", "--json", "--plot", str(png))
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["kind"] == "fred-estimate" and d["schema_version"] == 2 and d["switch_timing_source"]
    cells = {row["fabric"]: row for row in d["results"]}
    assert set(cells) == {"fred-d"} and cells["fred-d"]["speedup"] > 0
    row = cells["fred-d"]
    # rounded to 6 significant digits (jsonout.SIGNIFICANT)
    assert row["iteration_time_s"] == pytest.approx(row["critical_path_compute_s"] + row["exposed_comm_s"], rel=1e-5)
    assert row["compute_time_s"] <= row["iteration_time_s"] and isinstance(row["memory_per_npu_bytes"], int)
    assert row["iteration_time_s"] == pytest.approx(row["compute_time_s"] + row["beyond_compute_s"], rel=1e-5)
    assert png.stat().st_size > 5000
    r = _fred("estimate", "--workload", "resnet-152", "--fabric", "mesh,fred-c")
    assert r.returncode == 0 and r.stdout.startswith("switch timing:") and "Fred-C" in r.stdout


def test_cli_sweep_small(tmp_path):
    png = tmp_path / "sweep.png"
    r = _fred("sweep", "--workload", "resnet-152", "--fabric", "fred-d", "--rule", "16", "--json", "--plot", str(png))
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["kind"] == "fred-sweep" and d["switch_timing_source"] and d["rule"] == 16
    fred_d = [row for row in d["results"] if row["fabric"] == "fred-d"]
    assert len(fred_d) == 18 and {row["strategy"] for row in fred_d} >= {"MP(1)-DP(20)-PP(1)", "MP(20)-DP(1)-PP(1)"}
    # the mesh is simulated as the reference (its rows give the speedups and the memory policy)
    assert {row["fabric"] for row in d["results"]} == {"mesh", "fred-d"} and all(row["speedup"] for row in fred_d)
    assert d["memory_choice"] == "shared" and all(row["memory_choice"] == "shared" for row in fred_d)
    assert png.stat().st_size > 5000
