"""Mixture-of-experts training: the MoE workload fields and bundled models, expert parallelism in
the strategy notation, and the measured all-to-all throughput of the switch in the model."""

import math

import pytest

from fred import FredError
from fred.model.collectives import ep_groups, expert_dp_groups, expert_parallel, parse_strategy
from fred.model.workload import load_workload, routing, workload_from_dict

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


# ---- the switch's measured all-to-all throughput --------------------------------------------------

import json
import subprocess
import sys

from fred.contract.timing import READ_VERSIONS, TimingFileError, default_timing_path, load_timing
from fred.model.system import NO_A2A_SECTION, all_to_all_timing, switch_timing

#: made-up figures of the section's shape (what `fred characterize` writes from schema 5)
PRE, ONLINE = 0.9, 0.3


def _section(**over):
    sec = {"zipf_exponent": 1.0, "ports": 12,
           "methods": {"precompiled": {"uniform_flits_per_cycle_per_port": PRE, "skewed_fraction_of_bound": 0.8,
                                       "config_cycles_per_phase": 9, "phases_uniform": 11},
                       "online": {"uniform_flits_per_cycle_per_port": ONLINE, "skewed_fraction_of_bound": 0.18}},
           "default_method": "precompiled", "measured_by": "tests/test_model_moe.py (synthetic)"}
    sec.update(over)
    four = {"precompiled": {**sec["methods"].get("precompiled", {}), "phases_uniform": 3}} \
        if "precompiled" in sec["methods"] else {}
    sec["by_ports"] = {str(sec["ports"]): sec["methods"], "4": {**sec["methods"], **four}}
    return sec


@pytest.fixture
def a2a_timing(tmp_path):
    """A timing file: the embedded default plus an all_to_all section (the newest schema read)."""
    d = json.loads(default_timing_path().read_text())
    d["schema_version"] = max(READ_VERSIONS)
    d["all_to_all"] = _section()
    p = tmp_path / "a2a-timing.json"
    p.write_text(json.dumps(d))
    return p


@pytest.fixture
def no_a2a_timing(tmp_path):
    """The embedded default without its all_to_all section, as a schema-4 file: line rate."""
    d = json.loads(default_timing_path().read_text())
    d.pop("all_to_all", None)
    d["schema_version"] = 4
    p = tmp_path / "no-a2a-timing.json"
    p.write_text(json.dumps(d))
    return p


def _run(*args):
    r = subprocess.run([sys.executable, "-m", "fred", *args], capture_output=True, text=True, timeout=600)
    return r


def _a2a(fabric, timing, method, group="0-19"):
    r = _run("collective", "--fabric", fabric, "--op", "all-to-all", "--group", group, "--size", "1GiB",
             "--json", *(["--timing", str(timing)] if timing else []), *(["--a2a-method", method] if method else []))
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["results"][0]


def test_all_to_all_at_measured_throughput(a2a_timing, no_a2a_timing):
    """fred collective: Fred-D's all-to-all takes line-rate time / the measured figure (precompiled
    plus its configuration phases); online is slower; the mesh keeps its own algorithm."""
    line = _a2a("fred-d", no_a2a_timing, None)
    assert line["all_to_all_source"] == NO_A2A_SECTION
    pre = _a2a("fred-d", a2a_timing, "precompiled")
    onl = _a2a("fred-d", a2a_timing, "online")
    assert onl["time_s"] > pre["time_s"] > line["time_s"]
    assert onl["all_to_all_method"] == "online" and "measured by" in onl["all_to_all_source"]
    assert math.isclose(onl["time_s"], line["time_s"] / ONLINE, rel_tol=0.02)
    cfg = pre["all_to_all_config_s"]
    assert cfg > 0 and math.isclose(pre["time_s"], line["time_s"] / PRE + cfg, rel_tol=0.02)
    assert math.isclose(pre["bytes_sent_per_npu"], line["bytes_sent_per_npu"], rel_tol=1e-9)  # payload, not wire
    mesh = _a2a("mesh", a2a_timing, None)
    assert mesh["all_to_all_method"] is None and math.isclose(mesh["time_s"], _a2a("mesh", None, None)["time_s"])
    default = _a2a("fred-d", None, None)          # the embedded default's measured section
    assert default["all_to_all_source"].startswith("precompiled routing") and default["time_s"] > line["time_s"]


def test_all_to_all_section_checked(a2a_timing, tmp_path):
    tf = load_timing(a2a_timing)
    a = all_to_all_timing(tf)
    assert (a.method, a.uniform, a.phases(12), a.phases(4), a.phases(20)) == ("precompiled", PRE, 11, 3, 19)
    assert all_to_all_timing(tf, "online").config_cycles_per_phase == 0
    assert switch_timing(tf).with_all_to_all_method("online").all_to_all.uniform == ONLINE
    assert all_to_all_timing(load_timing()) is None or load_timing().data.get("all_to_all")
    d = json.loads(a2a_timing.read_text())
    for bad, words in ((_section(default_method="greedy"), "default_method"),
                       (_section(ports=1), "all_to_all.ports"),
                       (_section(methods={"online": {"uniform_flits_per_cycle_per_port": 1.5,
                                                     "skewed_fraction_of_bound": 0.2}}, default_method="online"),
                        "must be in (0, 1]"),
                       (_section(methods={"online": {"skewed_fraction_of_bound": 0.2}}, default_method="online"),
                        "missing field all_to_all.methods.online.uniform_flits_per_cycle_per_port")):
        d["all_to_all"] = bad
        p = tmp_path / "bad.json"
        p.write_text(json.dumps(d))
        try:
            tf = load_timing(p)          # the contract reader may check the section itself
        except TimingFileError as exc:
            assert "all_to_all" in str(exc) and "\n" not in str(exc)
            continue
        with pytest.raises(TimingFileError) as e:
            all_to_all_timing(tf)
        assert words in str(e.value) and "\n" not in str(e.value)


def test_a2a_method_refusals(a2a_timing):
    r = _run("collective", "--fabric", "fred-d", "--op", "all-reduce", "--a2a-method", "online")
    assert r.returncode == 2 and "only applies to --op all-to-all" in r.stderr and r.stderr.count("\n") == 1
    r = _run("collective", "--fabric", "fred-d", "--op", "all-to-all", "--a2a-method", "greedy")
    assert r.returncode == 2 and "greedy" in r.stderr and r.stderr.count("\n") == 1
    if load_timing().data.get("all_to_all") is None:      # until the embedded default carries the section
        r = _run("estimate", "-w", "mixtral", "-f", "fred-d", "--a2a-method", "online", "-q")
        assert r.returncode == 2 and "no all_to_all section" in r.stderr and r.stderr.count("\n") == 1


# ---- MoE training ------------------------------------------------------------------------------------

def _params(timing_path, method):
    from fred.model.system import default_params

    sw = switch_timing(load_timing(timing_path))
    return default_params().replace(switch=sw.with_all_to_all_method(method))


def test_moe_iteration_slower_with_online_all_to_all(a2a_timing):
    """The mechanism: an MoE iteration on Fred-D is slower with the online all-to-all figure than
    with the precompiled one, by its exposed all-to-all; the mesh does not see the switch."""
    from fred.model.training import estimate

    kw = dict(samples_per_replica=2)
    pre = estimate("deepseek-moe-16b", "fred-d", params=_params(a2a_timing, "precompiled"), **kw)
    onl = estimate("deepseek-moe-16b", "fred-d", params=_params(a2a_timing, "online"), **kw)
    assert pre.expert_parallel == 4 and "EP(4)" in pre.strategy
    assert onl.exposed["ep"] > pre.exposed["ep"] > 0
    assert onl.comm_busy["ep"] > pre.comm_busy["ep"]
    assert onl.iteration_time > pre.iteration_time
    assert math.isclose(onl.compute_busy, pre.compute_busy)
    assert "online" in onl.all_to_all_source and "precompiled" in pre.all_to_all_source
    m1 = estimate("deepseek-moe-16b", "mesh", params=_params(a2a_timing, "precompiled"), **kw)
    m2 = estimate("deepseek-moe-16b", "mesh", params=_params(a2a_timing, "online"), **kw)
    assert m1.iteration_time == m2.iteration_time and m1.exposed["ep"] > 0


def test_moe_skew_and_ep_mechanism():
    """More routing skew: more expert compute on the busiest rank and a longer all-to-all; EP(1)
    has no all-to-all; expert parameters are split over EP."""
    from fred.model.training import estimate
    from fred.model.schedule import stationary_memory

    raw = {"name": "moe-tiny", "kind": "transformer", "layers": 4, "hidden": 1024, "heads": 8, "kv_heads": 2,
           "seq": 512, "vocab": 1000, "experts": 8, "experts_per_token": 2, "expert_ffn_hidden": 2048,
           "gated_ffn": True, "strategy": "MP(1)-EP(4)-DP(5)-PP(1)", "samples_per_replica": 2}
    flat = workload_from_dict({**raw, "routing_zipf": 0}, "flat")
    skew = workload_from_dict({**raw, "routing_zipf": 1.5}, "skew")
    ef, es = estimate(flat, "fred-d"), estimate(skew, "fred-d")
    assert es.compute_busy > ef.compute_busy and es.comm_busy["ep"] > ef.comm_busy["ep"] > 0
    e1 = estimate(flat, "fred-d", "MP(1)-DP(20)-PP(1)")
    assert e1.exposed["ep"] == 0 and e1.comm_busy["ep"] == 0
    m1 = stationary_memory(flat, (1, 20, 1), 1, 2)
    m4 = stationary_memory(flat.with_expert_parallel(4), (1, 20, 1), 1, 2)
    assert m4 < m1


@pytest.mark.parametrize("strategy, words", [
    ("MP(1)-EP(3)-DP(5)-PP(1)", "uses 15 NPUs"),                 # not the wafer's 20
    ("MP(1)-EP(5)-DP(4)-PP(1)", "EP(5) must divide the 8 experts"),
    ("MP(1)-EP(4)-DP(5)-PP(1)", "needs a mixture-of-experts workload"),
])
def test_ep_strategy_refusals_cli(strategy, words):
    wl = "gpt3-175b" if "mixture" in words else "mixtral-8x7b"
    r = _run("estimate", "-w", wl, "-f", "fred-d", "-s", strategy, "-q")
    assert r.returncode == 2, r.stdout
    assert words in r.stderr and r.stderr.startswith("fred: error:") and r.stderr.count("\n") == 1, r.stderr


def test_ep_weight_streaming_refused():
    r = _run("estimate", "-w", "mixtral-8x7b", "-f", "fred-d", "--mode", "weight-streaming", "-q")
    assert r.returncode == 2 and "weight-stationary only" in r.stderr and r.stderr.count("\n") == 1


@pytest.mark.parametrize("name", MOE)
def test_bundled_moe_workloads_estimate_on_every_fabric(name):
    """Every fabric runs the bundled MoE workloads (fewer samples: the mechanism, not the figures)."""
    r = _run("estimate", "-w", name, "--samples", "2", "--json", "-q")
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)["results"]
    assert [x["fabric"] for x in res] == ["mesh", "fred-a", "fred-b", "fred-c", "fred-d"]
    for x in res:
        assert x["expert_parallel"] > 1 and x["exposed_s"]["ep"] >= 0 and x["comm_busy_s"]["ep"] > 0
        assert x["iteration_time_s"] > 0 and x["all_to_all_source"]


def test_sweep_enumerates_expert_parallelism():
    """fred sweep: every EP that divides both the DP replicas and the experts, for MoE workloads
    only (dense workloads keep their MP x DP x PP strategies)."""
    from fred.commands.sweep import sweep_strategies

    moe = [s for s, _ in sweep_strategies(load_workload("mixtral-8x7b"), 20) if isinstance(s, str)]
    assert "MP(1)-EP(4)-DP(5)-PP(1)" in moe and "MP(2)-EP(2)-DP(5)-PP(1)" in moe
    assert all(expert_parallel(s) in (2, 4, 8) for s in moe)                   # divisors of 8 experts
    for s in moe:
        a, b, c = parse_strategy(s, 20)
        assert b % expert_parallel(s) == 0
    dense = sweep_strategies(load_workload("gpt3-175b"), 20)
    assert all(not isinstance(s, str) for s, _ in dense)


def test_moe_iteration_slower_online_with_the_embedded_timing():
    """The same mechanism with the embedded default timing file (its measured schema-5 all_to_all
    section, not a synthetic one): on Fred-D an MoE iteration with the online all-to-all figure is
    slower than with the precompiled one; the mesh does not see the switch."""
    from fred.model.system import default_params
    from fred.model.training import estimate

    tf = load_timing()
    assert tf.all_to_all, "the embedded default has no all_to_all section"
    sw = switch_timing(tf)
    assert {"precompiled", "online"} <= set(sw.all_to_all.methods)
    on, pre = (sw.with_all_to_all_method(m) for m in ("online", "precompiled"))
    assert on.all_to_all.uniform < pre.all_to_all.uniform            # what the file measured
    kw = dict(samples_per_replica=2)
    got = {(f, m): estimate("deepseek-moe-16b", f, params=default_params().replace(switch=t), **kw)
           for f in ("fred-d", "mesh") for m, t in (("online", on), ("precompiled", pre))}
    assert got[("fred-d", "online")].exposed["ep"] > got[("fred-d", "precompiled")].exposed["ep"] > 0
    assert got[("fred-d", "online")].iteration_time > got[("fred-d", "precompiled")].iteration_time
    assert got[("mesh", "online")].iteration_time == got[("mesh", "precompiled")].iteration_time
