"""fred infer (fred.model.inference): the switch's measured figures on the decode path, the memory
refusal, the roofline regimes, and the JSON document. Small runs: a step costs the same to
simulate at any prompt length, so the tests use short prompts."""

from __future__ import annotations

import copy
import json

import pytest

from fred import FredError
from fred.cli import main
from fred.contract.timing import load_timing, write_timing
from fred.model.inference import infer, memory_per_npu, shape_of
from fred.model.system import default_params, switch_timing
from fred.model.workload import compute as C
from fred.model.workload import load_workload
from fred.model.workload.loader import workload_from_dict

SMALL = dict(batch=1, prompt_tokens=64, output_tokens=8)


def _timing_file(tmp_path, latency):
    """The embedded default with the switch traversal latency set to ``latency`` cycles (the
    chiplet fabric's part kept, the switch overhead taking the rest)."""
    doc = copy.deepcopy(load_timing().data)
    s = doc["summary"]
    s["switch_overhead_cycles"] = latency - s["fabric_latency_cycles"]
    s["switch_latency_cycles"] = latency
    path = tmp_path / f"t{latency}.json"
    write_timing(doc, path)
    return str(path)


def test_decode_latency_rises_with_the_switch_latency_on_fred_d_only(tmp_path):
    """Per-token decode latency on Fred-D strictly increases with the switch latency of the timing
    file; the mesh's (no switches) does not change."""
    base = load_timing().summary["fabric_latency_cycles"]
    tpot = {"fred-d": [], "mesh": []}
    for lat in (base, base + 30, base + 300, base + 3000):
        params = default_params().replace(switch=switch_timing(load_timing(_timing_file(tmp_path, lat))))
        for f in tpot:
            tpot[f].append(infer("llama2-70b", f, params=params, **SMALL).tpot)
    d = tpot["fred-d"]
    assert all(a < b for a, b in zip(d, d[1:])), d
    assert len(set(tpot["mesh"])) == 1, tpot["mesh"]
    # 162 All-Reduces per step (the embedding's, 2 per layer, the sampling reduce), each crossing
    # one L1 switch: 3,000 cycles more per traversal at 1 GHz add 162 x 3 us to the step
    assert d[3] - d[0] == pytest.approx(162 * 3000e-9, rel=1e-3)


def test_fred_d_in_switch_all_reduce_beats_the_mesh_ring_in_decode():
    """A decode All-Reduce is latency-bound: one in-switch flow (Fred-D) against the mesh's ring
    of 2 (a - 1) steps; the exposed MP time per token is smaller on Fred-D."""
    mesh = infer("llama2-70b", "mesh", **SMALL)
    fd = infer("llama2-70b", "fred-d", **SMALL)
    assert 0 < fd.decode_exposed["mp"] < mesh.decode_exposed["mp"]
    assert fd.decode_exposed["pp"] == mesh.decode_exposed["pp"] == 0     # PP(1)
    assert fd.decode_compute == pytest.approx(mesh.decode_compute)      # the same NPUs


def test_decode_is_memory_bound_and_prefill_compute_bound():
    """Batch-1 decode takes the NPU's weight (and cache) bytes at its HBM bandwidth; a long
    prefill the FLOPs at the sustained FLOP/s."""
    npu = C.default_npu()
    w = load_workload("llama2-70b")
    r = infer(w, "fred-d", batch=1, prompt_tokens=1024, output_tokens=8)
    weights = memory_per_npu(shape_of(w), (4, 5, 1), 1, 1024, 8)["weights"]
    assert r.decode_compute == pytest.approx(weights / npu.hbm_bw, rel=0.02)
    assert r.prefill_compute == pytest.approx(2 * w.params * 1024 / 4 / npu.flops, rel=0.05)


def test_pipeline_split_pays_pp_sends_and_replicas_multiply_tokens():
    pp = infer("llama2-70b", "mesh", "MP(4)-DP(1)-PP(5)", **SMALL)
    dp = infer("llama2-70b", "mesh", "MP(4)-DP(5)-PP(1)", **SMALL)
    assert pp.decode_exposed["pp"] > 0 and pp.prefill_exposed["pp"] > 0
    assert dp.tokens_per_s > 4 * pp.tokens_per_s       # five replicas against one


def test_kv_cache_refusal_names_the_figures(capsys):
    assert main(["infer", "-f", "mesh", "--batch", "4096", "--prompt-tokens", "1024"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("fred: error: ")
    assert "KV cache" in err and "batch 4096" in err and "> 80 GB" in err
    with pytest.raises(FredError, match="does not fit in HBM"):
        infer("gpt3-175b", "mesh", "MP(4)-DP(5)-PP(1)", **SMALL)   # weights alone: 87 GB per NPU


def test_context_window_and_kind_refusals():
    with pytest.raises(FredError, match="context window of 4096"):
        infer("llama2-70b", "mesh", batch=1, prompt_tokens=4000, output_tokens=100)
    with pytest.raises(FredError, match="serves decoder transformers"):
        infer("resnet-152", "mesh", **SMALL)


def test_a_block_the_step_does_not_model_is_refused_by_name():
    """The step runs the workload's own layers; a kind it has no cost model for is refused, not
    silently costed as an MLP."""
    import dataclasses

    w = load_workload("llama2-70b")
    mlp = next(l for l in w.layers if l.kind == "mlp")
    odd = dataclasses.replace(w, layers=w.layers[:3] + (dataclasses.replace(mlp, name="x.conv", kind="conv"),)
                              + w.layers[3:])
    with pytest.raises(FredError, match="layer x.conv of kind 'conv' is not modelled by fred infer"):
        shape_of(odd)


MOE = "MP(1)-EP(4)-DP(5)-PP(1)"


def _a2a_params(method):
    """The embedded timing with the all-to-all figures of ``method``."""
    from fred.commands.collective import apply_a2a_method

    p = default_params()
    return p.replace(switch=apply_a2a_method(p.switch, method))


def test_moe_decode_on_fred_d_pays_the_measured_all_to_all_and_the_mesh_does_not():
    """Each MoE layer's dispatch and combine all-to-all over the EP group run through the flow
    simulator at the switch's measured throughput: decode on Fred-D is slower with the online
    figure than with the precompiled one; the mesh (NPU routers) does not read the switch figures."""
    run = {m: {f: infer("mixtral-8x7b", f, MOE, params=_a2a_params(m), batch=32, prompt_tokens=64, output_tokens=8)
               for f in ("fred-d", "mesh")} for m in ("precompiled", "online")}
    pre, onl = run["precompiled"]["fred-d"], run["online"]["fred-d"]
    assert 0 < pre.decode_exposed["ep"] < onl.decode_exposed["ep"]
    assert pre.tpot < onl.tpot and pre.ttft < onl.ttft
    assert pre.decode_compute == pytest.approx(onl.decode_compute)
    assert run["precompiled"]["mesh"].tpot == run["online"]["mesh"].tpot > 0
    assert run["precompiled"]["mesh"].decode_exposed["ep"] > 0
    assert pre.strategy == MOE and pre.decode_exposed["mp"] == 0    # MP(1): no All-Reduce


def test_moe_batch_1_decode_moves_less_data_than_batch_32():
    """A decode step reads the weights of the experts its tokens activate (at most all the
    rank's) and dispatches its tokens: batch 1 reads fewer experts and sends fewer bytes."""
    from fred.model.inference.costs import block

    sh = shape_of(load_workload("mixtral-8x7b"), 4)
    ex = next(l for u in sh.units for l in u if l.kind == "experts")
    one, many = block(sh, ex, 1, 1, 1, 0.0), block(sh, ex, 1, 32, 1, 0.0)
    expert = ex.params / 8 * sh.b
    assert 0 < one.weights < many.weights <= 2 * expert                   # 2 of the 8 experts per rank
    assert 0 < sh.active_experts(1) < sh.active_experts(8) < sh.active_experts(32) <= 2   # of the rank's two
    assert sh.active_experts(1e6) == pytest.approx(2)
    assert 0 < one.a2a * 32 == pytest.approx(many.a2a) and one.skew == many.skew > 1   # Zipf routing
    b1 = infer("mixtral-8x7b", "mesh", MOE, batch=1, prompt_tokens=64, output_tokens=8)
    b32 = infer("mixtral-8x7b", "mesh", MOE, batch=32, prompt_tokens=64, output_tokens=8)
    assert b1.decode_exposed["ep"] < b32.decode_exposed["ep"] and b1.decode_compute < b32.decode_compute


def test_moe_memory_counts_every_expert_on_its_rank_and_ep_refusals():
    """EP(e) holds 1/e of every MoE layer's experts per NPU: the weights per NPU grow by the
    experts' share when EP halves; EP over a dense model or not dividing the experts is refused."""
    w = load_workload("mixtral-8x7b")
    experts = sum(l.params for l in w.layers if l.kind == "experts") * w.dtype_bytes
    m4 = memory_per_npu(shape_of(w, 4), (1, 20, 1), 1, 64, 8)["weights"]
    m2 = memory_per_npu(shape_of(w, 2), (1, 20, 1), 1, 64, 8)["weights"]
    assert m2 - m4 == pytest.approx(experts / 2 - experts / 4)
    assert m4 == pytest.approx(w.params * w.dtype_bytes - experts * 3 / 4)
    with pytest.raises(FredError, match="does not fit in HBM"):
        infer("mixtral-8x7b", "mesh", "MP(1)-DP(20)-PP(1)", **SMALL)     # every expert on every NPU
    with pytest.raises(FredError, match=r"EP\(4\) needs a mixture-of-experts workload"):
        infer("llama2-70b", "mesh", MOE, **SMALL)
    with pytest.raises(FredError, match=r"EP\(5\) must divide the 8 experts"):
        infer("mixtral-8x7b", "mesh", "MP(1)-EP(5)-DP(4)-PP(1)", **SMALL)


def test_kv_heads_field():
    raw = dict(name="t", kind="transformer", layers=2, hidden=64, heads=8, seq=32, vocab=100)
    mha = workload_from_dict(raw)
    gqa = workload_from_dict({**raw, "kv_heads": 2})
    assert gqa.shape["kv_heads"] == 2 and mha.shape["kv_heads"] == 8
    assert gqa.params < mha.params                  # K and V are a quarter as wide
    assert shape_of(gqa).kv_bytes(1) * 4 == shape_of(mha).kv_bytes(1)
    with pytest.raises(FredError, match=r"field 'kv_heads' = 3 must divide heads \(8\)"):
        workload_from_dict({**raw, "kv_heads": 3})
    with pytest.raises(FredError, match="field 'kv_heads' = 0 is too small"):
        workload_from_dict({**raw, "kv_heads": 0})


def test_uneven_head_split_charges_the_busiest_npu():
    """64 heads over MP(20): the busiest NPU holds 4 of them (Megatron splits whole heads), and
    one of the 8 key/value heads; its attention weights are 4/64 of the block's, not 1/20."""
    sh = shape_of(load_workload("llama2-70b"))
    assert sh.attention_share(20) == 4 / 64 and sh.attention_share(4) == 1 / 4
    assert sh.kv_heads_per_npu(20) == 1 and sh.kv_heads_per_npu(4) == 2 and sh.kv_heads_per_npu(8) == 1
    even = memory_per_npu(sh, (4, 5, 1), 1, 64, 8)["weights"]
    wide = memory_per_npu(sh, (20, 1, 1), 1, 64, 8)["weights"]
    assert even / 5 < wide < even / 4


def test_json_document(capsys):
    assert main(["infer", "-f", "fred-d", "--prompt-tokens", "64", "--output-tokens", "8", "--batch", "2",
                 "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["kind"] == "fred-infer" and doc["fabrics"] == ["fred-d"]
    (r,) = doc["results"]
    for key in ("time_to_first_token_s", "time_per_output_token_s", "tokens_per_s"):
        assert r[key] > 0
    assert r["workload"] == "llama2-70b" and r["strategy"] == "MP(4)-DP(5)-PP(1)" and r["batch"] == 2
    assert set(r["decode"]["exposed_s"]) == set(r["prefill"]["exposed_s"]) == {"mp", "pp", "ep"}
    total = r["time_to_first_token_s"] + 7 * r["time_per_output_token_s"]
    assert r["tokens_per_s"] == pytest.approx(5 * 2 * 8 / total, rel=1e-4)
    assert r["memory_per_npu_bytes"]["total"] < 80e9


def test_plot(tmp_path, capsys):
    out = tmp_path / "infer.png"
    assert main(["infer", "-f", "mesh,fred-d", "--prompt-tokens", "64", "--output-tokens", "8", "-q",
                 "--plot", str(out)]) == 0
    assert out.stat().st_size > 10_000 and f"plot: {out}" in capsys.readouterr().out
