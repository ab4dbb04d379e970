"""Closed-form bounds (fred.model.collectives.bounds) and the mesh placement report of fred.benchmarks.bounds
(issue 16)."""

import pytest

from fred.benchmarks.bounds import placement_report
from fred.benchmarks.bounds import _net
from fred.model.collectives.bounds import cut_bound, lower_bound, port_bound, ring_time, uplink_bound
from fred.model.collectives.api import collective_time
from fred.model.system.params import default_params
from fred.model.network.topology import build_fabric, ring

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


def test_all_to_all_cut_bounds():
    """All-to-All needs |S| |rest| / p x D across every cut: the mesh's cut between rows 2 and 3
    (8 | 12 NPUs, 4 links), one Fred-A L1 with its 4 NPUs (16 of 20 peers behind one uplink), a
    ring's half (2 links each way); the L1 uplink argument of the reductions does not apply."""
    eff = default_params().link_efficiency
    mesh, a, c = build_fabric("mesh"), build_fabric("fred-a"), build_fabric("fred-c")
    assert cut_bound(mesh, "all-to-all", GiB) == pytest.approx(8 * 12 / 20 * GiB / (4 * 750e9 * eff))
    assert lower_bound(mesh, "all-to-all", GiB)[1] == "cut"
    assert cut_bound(a, "all-to-all", GiB) == pytest.approx(4 * 16 / 20 * GiB / (1.5e12 * eff))
    assert uplink_bound(a, "all-to-all", GiB) == 0.0
    assert lower_bound(c, "all-to-all", GiB) == (port_bound(c, "all-to-all", GiB), "NPU ports")
    r16 = _net(["Ring"], [16], [50.0], 500.0)
    assert cut_bound(r16, "all-to-all", 1e6) == pytest.approx(8 * 8 / 16 * 1e6 / (2 * 50e9))
    # only the group's members count: row 0 (NPUs 0-3) and NPU 4 below 0; the cut after column
    # 0 (or 1) leaves 2 (3) of the 5 on one side, over the 5 links of one column boundary
    assert cut_bound(mesh, "all-to-all", GiB, group=[0, 1, 2, 3, 4]) == \
        pytest.approx(2 * 3 / 5 * GiB / (5 * 750e9 * eff))
    assert cut_bound(mesh, "all-reduce", GiB) == 0.0


@pytest.mark.parametrize("net", ["mesh", "fred-a", "fred-d", "ring16", "torus", "ring-switch"])
@pytest.mark.parametrize("alg", ["direct", "shift"])
def test_no_all_to_all_beats_its_lower_bound(net, alg):
    """The bounds are lower bounds: both All-to-All algorithms take at least as long, on every
    kind of network the cuts are taken on (grids, trees, YAML rings, a torus, a ring of switches)."""
    topo = {"ring16": lambda: _net(["Ring"], [16], [50.0], 500.0),
            "torus": lambda: _net(["Ring", "Ring"], [4, 4], [100.0, 100.0], 500.0),
            "ring-switch": lambda: _net(["Ring", "Switch"], [4, 4], [100.0, 50.0], 500.0)}.get(net, lambda: build_fabric(net))()
    for group in (None, [0, 1, 2, 5, 6, 9]):
        r = collective_time(topo, "all-to-all", group, 2**26, algorithm=alg)
        bound, _ = lower_bound(topo, "all-to-all", 2**26, group)
        assert r.time >= bound * (1 - 1e-9) > 0


def test_mesh_placement_routes_show_the_shared_pp_link():
    text = "\n".join(placement_report())
    assert "shared: npu1->npu2 by 0->2, 1->3" in text
    counts = [line.split(": ")[1] for line in text.splitlines() if "pairs on links of their own" in line]
    assert counts == ["0 of 10", "10 of 10", "8 of 10", "10 of 10"]
