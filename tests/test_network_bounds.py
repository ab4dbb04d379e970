"""Closed-form bounds (fred.model.bounds) and the mesh placement report of fred.benchmarks.bounds
(issue 16)."""

import pytest

from fred.benchmarks.bounds import placement_report
from fred.model.bounds import port_bound, ring_time, uplink_bound
from fred.model.params import default_params
from fred.model.topology import build_fabric, ring

GiB = 2**30


def test_port_and_uplink_bounds():
    eff = default_params().link_efficiency
    t = ring(8, 100e9, 0.0)
    assert port_bound(t, "all-reduce", GiB) == pytest.approx(2 * 7 / 8 * GiB / 200e9)
    assert port_bound(t, "all-gather", GiB) == pytest.approx(7 / 8 * GiB / 200e9)
    mesh = build_fabric("mesh")      # a corner NPU has two mesh links (its I/O links do not count)
    assert port_bound(mesh, "all-reduce", GiB) == pytest.approx(2 * 19 / 20 * GiB / (2 * 750e9 * eff))
    a = build_fabric("fred-a")
    assert uplink_bound(a, "all-reduce", GiB) == pytest.approx(2 * 4 / 5 * GiB / (1.5e12 * eff))
    assert uplink_bound(build_fabric("fred-b"), "all-reduce", GiB, in_network=True) == \
        pytest.approx(GiB / (1.5e12 * eff))
    assert uplink_bound(t, "all-reduce", GiB) == 0.0
    assert ring_time(4, 1e9, 1e9, 1e-6) == pytest.approx(1.5 + 6e-6)
    with pytest.raises(ValueError, match="no port bound for 'p2p'"):
        port_bound(t, "p2p", GiB)


def test_mesh_placement_routes_show_the_shared_pp_link():
    text = "\n".join(placement_report())
    assert "shared: npu1->npu2 by 0->2, 1->3" in text
    counts = [line.split(": ")[1] for line in text.splitlines() if "pairs on links of their own" in line]
    assert counts == ["0 of 10", "10 of 10", "8 of 10", "10 of 10"]
