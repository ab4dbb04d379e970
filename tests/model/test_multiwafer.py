"""Several wafers (fred.model.collectives.offwafer, fred.model.schedule.multiwafer): one wafer is exactly today's
estimate, the inter-wafer level against its closed-form bound, the mechanism of scaling W at a
fixed global batch, and the command line."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from fred.model.collectives import NETWORKS, OffWaferLevel, off_wafer_network, parse_off_wafer
from fred.model.system import GiB
from fred.model.training import estimate, multi_wafer


@pytest.mark.parametrize("workload", ["resnet-152", "transformer-17b", "gpt3-175b", "transformer-1t"])
@pytest.mark.parametrize("fabric", ["mesh", "fred-d"])
def test_one_wafer_is_todays_estimate(workload, fabric):
    a = estimate(workload, fabric)
    b = estimate(workload, fabric, wafers=1)
    assert b.iteration_time == a.iteration_time
    assert b.compute_time == a.compute_time
    assert b.exposed == a.exposed and "inter_wafer" not in b.exposed
    assert b.comm_busy == a.comm_busy
    assert b.minibatch == a.minibatch and b.tasks == a.tasks
    assert b.wafers == 1 and b.off_wafer == ""


@pytest.mark.parametrize("name", sorted(NETWORKS))
@pytest.mark.parametrize("wafers", [2, 4, 16, 64])
def test_exchange_against_bound(name, wafers):
    """The simulated exchange is never below the bandwidth bound, and above it by at most the
    latency of a ring's 2(W-1) steps of two links each; the in-network switch needs half the
    endpoint's bytes."""
    lv = OffWaferLevel(wafers, off_wafer_network(name))
    t = lv.exchange_time(GiB)
    b, _ = lv.bound(GiB)
    assert b <= t * (1 + 1e-9)
    assert t - b <= 2 * (wafers - 1) * 2 * lv.network.latency * 1.05, (name, wafers, b, t)
    assert b / t > 0.75, (name, wafers, b, t)
    if name == "ndr-sharp":
        endpoint = OffWaferLevel(wafers, off_wafer_network("ndr"))
        assert endpoint.exchange_time(GiB) > 1.5 * t * (wafers - 1) / wafers


def test_level_bandwidth_from_controllers():
    lv = OffWaferLevel(16, off_wafer_network("ndr"))
    assert lv.wafer_bw == 18 * 128e9
    fast = OffWaferLevel(16, parse_off_wafer("topology: [ Switch ]\nbandwidth: [ 400 ]\nlatency: [ 0 ]\n"))
    assert fast.wafer_bw == lv.wafer_bw          # the controller's 128 GB/s caps a faster port
    ring = OffWaferLevel(16, off_wafer_network("ring"))
    assert ring.link_bw() == 9 * 128e9
    assert OffWaferLevel(2, off_wafer_network("ring")).link_bw() == 18 * 128e9


def test_scaling_wafers_at_fixed_global_batch():
    """Strong scaling: the same global minibatch over more wafers. Each wafer computes W times
    less, the gradient exchange does not shrink, so the iteration gets shorter but less than W
    times (efficiency falls), and the exposed inter-wafer share grows."""
    glob = 20 * 16 * 64                    # ResNet-152 is pure DP(20): 16 samples per replica at W = 64
    rows = {}
    for w in (1, 4, 16, 64):
        rows[w] = estimate("resnet-152", "fred-d", samples_per_replica=glob / (20 * w), wafers=w)
        assert rows[w].minibatch == pytest.approx(glob)
    t = {w: e.iteration_time for w, e in rows.items()}
    assert t[1] > t[4] > t[16] > t[64]
    eff = {w: t[1] / (w * t[w]) for w in t}
    assert eff[4] > eff[16] > eff[64]
    share = {w: rows[w].exposed.get("inter_wafer", 0.0) / t[w] for w in (4, 16, 64)}
    assert 0 < share[4] < share[16] < share[64]


def test_in_network_off_wafer_and_fred_wafer_reduce_exposure():
    """At a fixed global batch, SHARP-like switches expose less of the exchange than endpoint
    ones, and FRED-D's in-switch wafer side exposes no more DP + inter-wafer time than the mesh."""
    kw = dict(samples_per_replica=1, wafers=64)
    ep = estimate("resnet-152", "fred-d", off_wafer="ndr", **kw)
    inn = estimate("resnet-152", "fred-d", off_wafer="ndr-sharp", **kw)
    assert inn.exposed["inter_wafer"] < ep.exposed["inter_wafer"]
    mesh = estimate("resnet-152", "mesh", off_wafer="ndr-sharp", **kw)
    comm = lambda e: e.exposed["dp"] + e.exposed["inter_wafer"]
    assert comm(inn) <= comm(mesh)


def test_weight_streaming_exchanges_after_the_gradients_leave():
    one = estimate("transformer-1t", "fred-d")
    four = estimate("transformer-1t", "fred-d", wafers=4)
    assert four.exposed["inter_wafer"] > 0
    assert four.iteration_time == pytest.approx(one.iteration_time + four.exposed["inter_wafer"], rel=1e-3)
    assert four.comm_busy["inter_wafer"] >= four.exposed["inter_wafer"]


def test_api_refusals():
    with pytest.raises(ValueError, match="wafers"):
        multi_wafer(0)
    with pytest.raises(ValueError, match="off_wafer needs wafers > 1"):
        multi_wafer(1, "ndr")
    with pytest.raises(ValueError, match="unknown off-wafer network 'x'"):
        off_wafer_network("x")
    with pytest.raises(ValueError, match="only a Switch reduces"):
        parse_off_wafer("topology: [ Ring ]\nbandwidth: [ 1 ]\nlatency: [ 1 ]\nin_network: [ true ]\n")
    with pytest.raises(ValueError, match="unknown key 'npus_count'"):
        parse_off_wafer("topology: [ Ring ]\nnpus_count: [ 4 ]\nbandwidth: [ 1 ]\nlatency: [ 1 ]\n")
    with pytest.raises(ValueError, match="bandwidth"):
        parse_off_wafer("topology: [ Switch ]\nbandwidth: [ -1 ]\nlatency: [ 1 ]\n")


def _fred(*args):
    return subprocess.run([sys.executable, "-m", "fred", *args], capture_output=True, text=True, timeout=300)


def test_cli_estimate_sixteen_wafers_json():
    r = _fred("estimate", "-w", "gpt3-175b", "-f", "fred-d", "--wafers", "16", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    for res in doc["results"]:
        assert res["wafers"] == 16 and res["off_wafer"] == "ndr"
        assert res["exposed_s"]["inter_wafer"] > 0
        assert res["minibatch"] == 16 * 5 * 16


def test_cli_refusals(tmp_path):
    r = _fred("estimate", "-w", "resnet-152", "--off-wafer", "ring")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip() == "fred: error: --off-wafer 'ring' needs --wafers 2 or more"
    bad = tmp_path / "net.yml"
    bad.write_text("topology: [ Torus ]\nbandwidth: [ 1 ]\nlatency: [ 1 ]\n")
    r = _fred("estimate", "-w", "resnet-152", "--wafers", "2", "--off-wafer", str(bad))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "topology" in r.stderr and "Torus" in r.stderr
    r = _fred("estimate", "-w", "resnet-152", "--wafers", "100000")
    assert r.returncode == 2 and "--wafers" in r.stderr
