"""Mixture-of-experts training: the MoE workload fields and bundled models, expert parallelism in
the strategy notation, and the measured all-to-all throughput of the switch in the model."""

import math

import pytest

from fred import FredError
from fred.model.collectives.groups import ep_groups, expert_dp_groups, expert_parallel, parse_strategy
from fred.model.workload.loader import load_workload, workload_from_dict
from fred.model.workload.moe import routing

MOE = ("mixtral-8x7b", "deepseek-moe-16b")


# ---- workloads ------------------------------------------------------------------------------

@pytest.mark.parametrize("name, total, active", [
    ("mixtral-8x7b", 46.7e9, 12.9e9),        # Jiang et al. 2024: 47B parameters, 13B active (model card 46.7B / 12.9B)
    ("deepseek-moe-16b", 16.4e9, 2.8e9),     # Dai et al. 2024, Sec. 5: 16.4B, 2.8B activated
])
def test_moe_parameter_counts_match_published(name, total, active):
    w = load_workload(name)
    assert w.is_moe and w.source
    assert abs(w.params - total) / total < 0.01, w.params
    assert abs(w.active_params - active) / active < 0.02, w.active_params


def test_moe_fields_generic_names():
    """The fields another command (inference) reads: kv_heads, experts, experts_per_token,
    expert_ffn_hidden, in the workload's shape."""
    w = load_workload("mixtral")
    assert (w.shape["kv_heads"], w.shape["experts"], w.shape["experts_per_token"], w.shape["expert_ffn_hidden"]) \
        == (8, 8, 2, 14336)
    d = load_workload("deepseek-moe-16b")
    moe = [l for l in d.layers if l.kind == "experts"]
    assert len(moe) == 28 - 1                             # the first layer is dense
    assert all(l.a2a_bytes > 0 and l.expert_params == l.params for l in moe)
    assert not any(l.a2a_bytes for l in load_workload("gpt3").layers)


def _tiny(**kw):
    raw = {"name": "t", "kind": "transformer", "layers": 2, "hidden": 64, "heads": 4, "seq": 16, "vocab": 100,
           "experts": 4, "experts_per_token": 2, "expert_ffn_hidden": 32}
    raw.update(kw)
    return raw


@pytest.mark.parametrize("field, value, words", [
    ("experts_per_token", 5, "exceeds experts"),
    ("kv_heads", 3, "must divide heads"),
    ("experts", 0, "too small"),
    ("routing_zipf", -1, "too small"),
    ("capacity_factor", 0.5, "too small"),
    ("gated_ffn", "yes", "true or false"),
    ("first_dense_layers", 2, "leaves no MoE layer"),
    ("expert_ffn_hidden", 1.5, "whole number"),
])
def test_moe_bad_fields_one_line(field, value, words):
    with pytest.raises(FredError) as e:
        workload_from_dict(_tiny(**{field: value}), "t.yml")
    msg = str(e.value)
    assert "\n" not in msg and field in msg and words in msg, msg


def test_moe_field_without_experts_refused():
    raw = _tiny()
    del raw["experts"]
    with pytest.raises(FredError, match="needs the field 'experts'"):
        workload_from_dict(raw, "t.yml")


def test_routing_skew():
    flat = routing(8, 2, 0.0)
    assert math.isclose(flat.kept, 1.0) and math.isclose(flat.imbalance(4), 1.0)
    skew = routing(8, 2, 1.0)
    assert math.isclose(skew.kept, 1.0)                      # no capacity: no token dropped
    assert max(skew.loads) <= 0.5 + 1e-12                     # an expert takes a token at most once
    assert skew.imbalance(1) == 1.0 < skew.imbalance(2) < skew.imbalance(4)
    assert routing(8, 2, 2.0).imbalance(4) > skew.imbalance(4)
    capped = routing(8, 2, 1.0, 1.25)                         # Switch Transformer capacity: drops
    assert capped.kept < 1 and max(capped.loads) <= 1.25 / 8 + 1e-12
    with pytest.raises(FredError, match="EP\\(3\\) must divide the 8 experts"):
        skew.imbalance(3)


# ---- strategy notation --------------------------------------------------------------------------

def test_ep_strategy_parse_and_groups():
    s = "MP(1)-EP(4)-DP(5)-PP(1)"
    assert parse_strategy(s, 20) == (1, 20, 1) and expert_parallel(s) == 4
    assert expert_parallel("MP(2)-DP(10)") == 1
    assert ep_groups((1, 20, 1), 4, 0)[0] == [0, 1, 2, 3]                 # one L1 switch on FRED
    assert expert_dp_groups((1, 20, 1), 4, 0)[0] == [0, 4, 8, 12, 16]
    # MP(2)-EP(2)-DP(5): EP peers share the MP index, two NPUs apart
    assert ep_groups((2, 10, 1), 2, 0)[:2] == [[0, 2], [1, 3]]
    groups = ep_groups((2, 10, 1), 2, 0) + expert_dp_groups((2, 10, 1), 2, 0)
    assert sorted(n for g in ep_groups((2, 10, 1), 2, 0) for n in g) == list(range(20)), groups


@pytest.mark.parametrize("text, words", [
    ("MP(1)-EP(4)-EP(5)", "EP given twice"),
    ("MP(1)-EP(0)-DP(20)", "EP(0) must be >= 1"),
    ("MP(1)-EQ(4)-DP(5)", "cannot parse"),
])
def test_ep_strategy_bad_text(text, words):
    with pytest.raises(ValueError) as e:
        parse_strategy(text)
    assert words in str(e.value) and "\n" not in str(e.value)
