"""The other wafer fabrics: the 5x4 torus at the mesh's link budget, and one crossbar with
endpoint collectives (switched) or reduction at its output ports (switched-inr)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import fred.model.network.topology as T
from fred.model.collectives import collective_time
from fred.model.network import build_fabric
from fred.model.system import FABRICS, GiB, MESH_LINK_BW, NPU_NET_BW, canonical_fabric, variant
from fred.model.training import estimate

NEW = ("torus", "switched", "switched-inr")


def _out_bw(topo, node):
    return sum(float(bw) for s, d, bw in zip(topo.link_src, topo.link_dst, topo.link_bw)
               if int(s) == node and topo.kinds[int(d)] != "io")


@pytest.mark.parametrize("name", NEW)
def test_fabric_builds_at_the_mesh_budget(name):
    assert name in FABRICS and canonical_fabric(name.upper()) == name
    topo = build_fabric(name)
    assert topo.npus == 20 and len(topo.io_nodes) == 18
    for npu in range(20):                            # 3 TB/s out of every NPU, as on the mesh
        assert _out_bw(topo, npu) == pytest.approx(NPU_NET_BW)


def test_torus_wraps_around():
    torus, mesh = build_fabric("torus"), build_fabric("mesh")
    assert len(torus.path(0, 3)) == 1 and len(mesh.path(0, 3)) == 3         # row ring of 4
    assert len(torus.path(0, 16)) == 1 and len(mesh.path(0, 16)) == 4       # column ring of 5
    assert all(float(torus.link_bw[l]) == MESH_LINK_BW for l in torus.path(0, 16))
    assert variant("torus").bisection == 2 * variant("mesh").bisection
    # the bisection shows in All-to-All
    assert collective_time("torus", "all-to-all", None, GiB).time < 0.75 * collective_time("mesh", "all-to-all", None, GiB).time


def test_output_port_reduction_needs_twice_the_bandwidth_for_all_reduce():
    """An output-reducing crossbar whose paths into the ports are as wide as its ports takes about
    2 D / B for an All-Reduce (each port receives every input's slice and then every port's
    sum), FRED's in-fabric reduction D / B (FRED-SPEC §1); with twice the internal bandwidth the
    crossbar catches up."""
    inr = collective_time("switched-inr", "all-reduce", None, GiB, algorithm="in-switch")
    fred = collective_time("fred-d", "all-reduce", None, GiB)
    assert inr.algorithms[0] == "output-reduce"
    assert 1.7 < inr.time / fred.time < 2.2
    ring = collective_time("switched", "all-reduce", None, GiB)
    assert ring.algorithms[0] == "ring"


def test_output_port_reduce_loads_the_root_port(monkeypatch):
    """A 20-input Reduce into one output port: 19 streams into that port."""
    d = 64 * 2**20
    r = collective_time("switched-inr", "reduce", None, d, algorithm="in-switch")
    assert r.time >= 19 * d / NPU_NET_BW
    # by default the crossbar picks the endpoint plan when it is faster (Reduce-Scatter + gather)
    auto = collective_time("switched-inr", "reduce", None, d)
    assert auto.algorithms[0] != "output-reduce" and auto.time < r.time / 5


def test_internal_speedup_is_the_mechanism(monkeypatch):
    base = collective_time("switched-inr", "all-reduce", None, GiB, algorithm="in-switch").time
    monkeypatch.setattr(T, "XBAR_OUTPUT_SPEEDUP", 2.0)
    fast = collective_time("switched-inr", "all-reduce", None, GiB, algorithm="in-switch").time
    fred = collective_time("fred-d", "all-reduce", None, GiB).time
    assert fast < 0.65 * base
    assert fast == pytest.approx(fred, rel=0.15)


def test_crossbar_multicasts_only_with_inr():
    a = collective_time("switched", "io-broadcast", None, GiB)
    b = collective_time("switched-inr", "io-broadcast", None, GiB)
    assert a.algorithms[0].startswith("io-scatter") and b.algorithms[0] == "io-multicast"


@pytest.mark.parametrize("workload", ["resnet-152", "transformer-17b", "gpt3-175b", "transformer-1t"])
def test_estimates_run_on_every_new_fabric(workload):
    ref = estimate(workload, "fred-d")
    for f in NEW:
        e = estimate(workload, f)
        assert e.fabric == f and np.isfinite(e.iteration_time)
        assert e.compute_busy == pytest.approx(ref.compute_busy, rel=0.02)
        assert e.iteration_time >= e.compute_busy * (1 - 1e-9)


def test_cli_lists_the_new_fabrics():
    r = subprocess.run([sys.executable, "-m", "fred", "estimate", "-w", "resnet-152", "-f", "torus,switched,switched-inr"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    for disp in ("Torus", "Xbar", "XbarINR"):
        assert f" {disp} " in r.stdout
