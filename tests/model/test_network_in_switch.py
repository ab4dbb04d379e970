"""In-network reduction on ASTRA-sim YAML networks: the in_network key, --in-network-dims and
--algorithm in-switch (issue 16)."""

import json

import pytest

from fred.cli import main
from fred.model.collectives.api import collective_time
from fred.model.network.from_yaml import NetworkSpec, load_topology, parse_network_yaml, spec_from_topology

SW16 = "topology: [ Switch ]\nnpus_count: [ 16 ]\nbandwidth: [ 100.0 ]\nlatency: [ 500.0 ]\n"
RS = "topology: [ Ring, Switch ]\nnpus_count: [ 4, 8 ]\nbandwidth: [ 100.0, 10.0 ]\nlatency: [ 500.0, 500.0 ]\n"


def run_cli(capsys, *argv):
    rc = main(["collective", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_key_round_trip_and_refusals():
    spec = parse_network_yaml(RS + "in_network: [ false, true ]\n")
    assert spec.in_network == [False, True]
    assert parse_network_yaml(spec.to_yaml()) == spec
    assert spec_from_topology(spec.build()) == spec
    with pytest.raises(ValueError, match=r"in_network\[0\]: dimension 0 is a Ring"):
        parse_network_yaml(RS + "in_network: [ true, false ]\n")
    with pytest.raises(ValueError, match=r"in_network\[1\] must be true or false, got 'yes please'"):
        parse_network_yaml(RS + "in_network: [ false, yes please ]\n")
    with pytest.raises(ValueError, match="'in_network' has 1 entries but 'topology' has 2"):
        parse_network_yaml(RS + "in_network: [ true ]\n")
    assert NetworkSpec(["Ring"], [4], [1.0], [0.0]).in_network == [False]


def test_single_switch_in_switch_is_one_flow_at_line_rate(tmp_path):
    f = tmp_path / "sw.yml"
    f.write_text(SW16 + "in_network: [ true ]\n")
    r = collective_time(load_topology(f), "all-reduce", None, 2**30)
    assert r.algorithms == ["in-switch"] and r.flows == 1
    # S/B, up and down at once, + one hop up to the switch and one back down
    assert r.time == pytest.approx(2**30 / 100e9 + 2 * 500e-9, rel=1e-9)


def test_multidim_in_switch_beats_the_ring_on_the_switch_dimension(tmp_path):
    """[Ring(4) 100 GB/s, Switch(8) 10 GB/s] with the switch reducing: ring RS over the ring, one in-switch
    All-Reduce per switch on a quarter of the data, ring AG; the switch dimension then moves
    D/4 per NPU instead of the ring's 2 x 7/8 x D/4."""
    f = tmp_path / "rs.yml"
    f.write_text(RS)
    topo = load_topology(f, in_network=[1])
    r = collective_time(topo, "all-reduce", None, 2**30, algorithm="in-switch")
    h = collective_time(load_topology(f), "all-reduce", None, 2**30, algorithm="hierarchical")
    assert r.algorithms == ["in-switch"]
    ring_links = 2 * 3 / 4 * 2**30 / 2 / 100e9                  # RS + AG, both ring directions
    tree = 2**30 / 4 / 10e9                                      # a quarter up and down the switch
    assert max(ring_links, tree) <= r.time < ring_links + tree   # pipelined
    assert h.time > 2 * 7 / 8 * tree and r.time < 0.7 * h.time   # the ring on the switch: 2 x 7/8


def test_cli_flag_and_clear_refusal(capsys, tmp_path):
    f = tmp_path / "sw.yml"
    f.write_text(SW16)
    rc, out, err = run_cli(capsys, "--network", str(f), "--algorithm", "in-switch")
    assert rc == 2 and out == "" and err.count("\n") == 1
    assert "has none; mark a Switch dimension with the YAML key in_network" in err
    rc, out, err = run_cli(capsys, "--network", str(f), "--algorithm", "in-switch", "--in-network-dims", "0",
                           "--json")
    (d,) = json.loads(out)["results"]
    assert rc == 0 and d["algorithm"] == "in-switch" and d["flows"] == 1


@pytest.mark.parametrize("argv, match", [
    (["--in-network-dims", "0"], r"in_network\[0\]: dimension 0 is a Ring"),
    (["--in-network-dims", "2"], r"in-network dimension 2 is not a dimension of this network \(0..1\)"),
    (["--in-network-dims", "1", "--algorithm", "in-switch", "--op", "all-gather"], "runs all-reduce only"),
    (["--in-network-dims", "x"], r"--in-network-dims 'x' is not a whole number"),
])
def test_cli_refusals_one_line(capsys, tmp_path, argv, match):
    import re

    f = tmp_path / "rs.yml"
    f.write_text(RS)
    rc, out, err = run_cli(capsys, "--network", str(f), *argv)
    assert rc == 2 and out == "" and err.count("\n") == 1 and re.search(match, err), err


def test_cli_flag_needs_network(capsys):
    rc, out, err = run_cli(capsys, "--in-network-dims", "1")
    assert rc == 2 and "--in-network-dims '1' only applies with --network" in err
