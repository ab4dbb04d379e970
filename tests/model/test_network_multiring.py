"""Every port at once on multi-dimensional YAML networks: multi-ring, the default where it is
the best plan (issue 16)."""

import json

import pytest

from fred.cli import main
from fred.model.collectives.api import collective_time
from fred.model.network.from_yaml import parse_network_yaml

GiB = 2**30


def net(kinds, counts, bws, lat=500.0):
    return parse_network_yaml(f"topology: [ {', '.join(kinds)} ]\nnpus_count: {list(counts)}\n"
                              f"bandwidth: {list(bws)}\nlatency: {[lat] * len(kinds)}\n").build()


def ports_bound(p, d, ports, bw, factor):
    """Every NPU moves factor x (p-1)/p x D over its ports (All-Reduce: 2, RS/AG: 1)."""
    return factor * (p - 1) / p * d / (ports * bw)


@pytest.mark.parametrize("op, factor", [("all-reduce", 2), ("reduce-scatter", 1), ("all-gather", 1)])
def test_torus_8x8_default_within_10_percent_of_the_port_bound(op, factor):
    topo = net(["Ring", "Ring"], [8, 8], [100.0, 100.0])
    r = collective_time(topo, op, None, GiB)
    assert r.algorithms == ["multi-ring"]
    bound = ports_bound(64, GiB, 4, 100e9, factor)
    assert bound <= r.time <= 1.1 * bound
    plain = collective_time(topo, op, None, GiB, algorithm="hierarchical")
    assert plain.time > 2 * r.time            # one direction, one dimension at a time


def test_torus_4x4x4_uses_six_ports():
    r = collective_time(net(["Ring"] * 3, [4, 4, 4], [50.0] * 3), "all-reduce", None, GiB)
    bound = ports_bound(64, GiB, 6, 50e9, 2)
    assert r.algorithms == ["multi-ring"] and bound <= r.time <= 1.1 * bound


def test_one_ring_default_is_bidirectional():
    r = collective_time(net(["Ring"], [8], [100.0]), "all-reduce", None, GiB)
    bound = ports_bound(8, GiB, 2, 100e9, 2)
    assert r.algorithms == ["multi-ring"] and bound <= r.time <= 1.02 * bound


def test_unequal_dimensions_get_unequal_streams():
    """A slow second ring: an equal split would push half the data through it first; the split
    search starts a smaller stream there, so multi-ring stays no slower than the hierarchy."""
    from fred.model.collectives.multidim import multi_ring_plan
    from fred.model.collectives.flowsim import Sim

    topo = net(["Ring", "Ring"], [4, 4], [1000.0, 10.0])
    fracs = [f for f, _ in multi_ring_plan(Sim(topo), "ar")]
    assert fracs[0] > 0.75 and sum(fracs) == pytest.approx(1.0)      # (here: all of it)
    d = collective_time(topo, "all-reduce", None, GiB)
    h = collective_time(topo, "all-reduce", None, GiB, algorithm="hierarchical")
    assert d.algorithms == ["multi-ring"] and d.time <= h.time
    # a Ring (2 ports) next to a Switch (1 port): weighted streams reach the port bound
    rs = net(["Ring", "Switch"], [4, 8], [100.0, 100.0])
    r = collective_time(rs, "all-reduce", None, GiB)
    bound = ports_bound(32, GiB, 3, 100e9, 2)
    assert r.algorithms == ["multi-ring"] and bound <= r.time <= 1.1 * bound
    # a switch alone: nothing to gain, the plain ring stays
    assert collective_time(net(["Switch"], [8], [100.0]), "all-reduce", None, GiB).algorithms == ["ring"]


def test_sub_groups_keep_rings_and_multi_ring_needs_the_whole_network():
    topo = net(["Ring", "Ring"], [4, 4], [100.0, 100.0])
    assert collective_time(topo, "all-reduce", [0, 1, 2, 3], GiB).algorithms == ["ring"]
    with pytest.raises(ValueError, match="'multi-ring' needs a multi-dimensional topology and the whole"):
        collective_time(topo, "all-reduce", [0, 1, 2, 3], GiB, algorithm="multi-ring")


def test_cli_names_the_algorithm(capsys, tmp_path):
    f = tmp_path / "torus.yml"
    f.write_text("topology: [ Ring, Ring ]\nnpus_count: [ 8, 8 ]\nbandwidth: [ 100, 100 ]\nlatency: [ 500, 500 ]\n")
    assert main(["collective", "--network", str(f)]) == 0
    out = capsys.readouterr().out
    assert " multi-ring " in out.splitlines()[1]
    assert main(["collective", "--network", str(f), "--json"]) == 0
    (d,) = json.loads(capsys.readouterr().out)["results"]
    assert d["algorithm"] == "multi-ring"


# ---- issue 24: one default whether the network comes from the API or a YAML file ------------------

@pytest.mark.parametrize("shape", [(8, 8), (4, 6)])
@pytest.mark.parametrize("op", ["all-reduce", "reduce-scatter", "all-gather", "all-to-all"])
def test_api_torus_runs_what_its_yaml_twin_runs(tmp_path, shape, op):
    from fred.model.network.topology import torus2d

    rows, cols = shape
    f = tmp_path / "torus.yml"
    f.write_text(f"topology: [ Ring, Ring ]\nnpus_count: [ {cols}, {rows} ]\nbandwidth: [ 100, 100 ]\n"
                 f"latency: [ 500, 500 ]\n")
    api = collective_time(torus2d(rows, cols, 100e9, 500e-9), op, nbytes=2**30)
    yml = collective_time(str(f), op, nbytes=2**30)
    assert api.algorithms == yml.algorithms
    assert api.time == pytest.approx(yml.time, rel=1e-9)


@pytest.mark.parametrize("build", ["ring4", "ring6", "ring8", "ring16", "torus4x4", "torus4x6", "torus8x8"])
def test_all_to_all_on_rings_meets_the_cut_bound(build):
    """Direct All-to-All sends half of what goes to the NPU half way round each way round, so it
    meets the cut bound (the + way alone: 1.5x on a ring of 4, 1.25x on 8)."""
    from fred.model.collectives import lower_bound
    from fred.model.network.topology import ring, torus2d

    topo = ring(int(build[4:]), 100e9) if build.startswith("ring") else torus2d(
        *map(int, build[5:].split("x")), 100e9)
    r = collective_time(topo, "all-to-all", nbytes=2**30)
    bound, what = lower_bound(topo, "all-to-all", 2**30)
    assert r.time == pytest.approx(bound, rel=1e-6), (build, r.time / bound, what)
    sent = r.result.bytes_sent[:topo.npus]
    assert sent.max() == pytest.approx(sent.min(), rel=1e-9)      # every NPU sends alike
