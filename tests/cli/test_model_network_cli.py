"""`fred collective`, ASTRA-sim YAML networks and bad input (issue 4)."""

import json

import pytest

from fred.model.system import params as P

from fred.cli import main
from fred.commands.collective import parse_size
from fred.model.collectives import parse_group
from fred.model.collectives import collective_time
from fred.model.network.from_yaml import NetworkSpec, dump_network_yaml, load_network_yaml, load_topology, parse_network_yaml, spec_from_topology
from fred.model.network.topology import multidim, ring, single_switch

GiB = 2**30


def run_cli(capsys, *argv):
    rc = main(["collective", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


# ---- YAML -----------------------------------------------------------------------------------
def test_yaml_round_trip(tmp_path):
    spec = NetworkSpec(["Ring", "Switch", "FullyConnected"], [4, 2, 3], [250.0, 100.5, 50.0], [500.0, 20.0, 0.0])
    f = tmp_path / "net.yml"
    dump_network_yaml(spec, f)
    back = load_network_yaml(f)
    assert back == spec
    assert parse_network_yaml(back.to_yaml()) == spec
    topo = back.build()
    assert topo.npus == 24
    assert spec_from_topology(topo) == spec


def test_yaml_matches_builder_and_simulates_the_same(tmp_path):
    f = tmp_path / "ring8.yml"
    f.write_text("topology: [ Ring ]\nnpus_count: [ 8 ]\nbandwidth: [ 100.0 ]  # GB/s\nlatency: [ 500 ]  # ns\n")
    t = load_topology(f)
    b = ring(8, 100e9, 500e-9)
    assert t.num_links == b.num_links and list(t.link_bw) == list(b.link_bw)
    ty = collective_time(t, "all-reduce", None, GiB, algorithm="ring").time
    tb = collective_time(b, "all-reduce", None, GiB, algorithm="ring").time
    assert ty == pytest.approx(tb, rel=1e-12)
    assert ty == pytest.approx(2 * 7 / 8 * GiB / 100e9 + 14 * 500e-9, rel=1e-9)
    # upstream ASTRA-sim unit: 1 GB = 2**30 B
    t2 = load_topology(f, gb_bytes=2**30)
    assert t2.link_bw[0] == 100 * 2**30


def test_yaml_switch_dimension_is_two_hops():
    spec = parse_network_yaml("topology: [Switch]\nnpus_count: [4]\nbandwidth: [10]\nlatency: [100]\n")
    t = spec.build()
    assert t.kinds.count("switch") == 1 and len(t.path(0, 3)) == 2
    s = single_switch(4, 10e9, 100e-9)
    assert collective_time(t, "all-reduce", None, 1e9, algorithm="ring").time == \
        pytest.approx(collective_time(s, "all-reduce", None, 1e9, algorithm="ring").time)


def test_multidim_yaml_hierarchical():
    t = parse_network_yaml("topology: [Ring, Ring]\nnpus_count: [4, 4]\nbandwidth: [100, 100]\nlatency: [0, 0]\n").build()
    for alg in ("hierarchical", None):          # the default on a torus: multi-ring (issue 16), same bytes
        r = collective_time(t, "all-reduce", None, 1e9, algorithm=alg)
        assert r.algorithms == [alg or "multi-ring"]
        assert r.bytes_sent_per_npu == pytest.approx(2 * 15 / 16 * 1e9)


@pytest.mark.parametrize("text, match", [
    ("topology: [Ring\n", "malformed YAML"),
    ("- just a list\n", "expected a mapping"),
    ("topology: [Torus]\nnpus_count: [4]\nbandwidth: [1]\nlatency: [1]\n", "unknown topology 'Torus'"),
    ("topology: [Ring]\nnpus_count: [4, 2]\nbandwidth: [1]\nlatency: [1]\n", "'npus_count' has 2 entries"),
    ("topology: [Ring]\nnpus_count: [0]\nbandwidth: [1]\nlatency: [1]\n", r"npus_count\[0\] 0 is too small"),
    ("topology: [Ring]\nnpus_count: [4]\nbandwidth: [-5]\nlatency: [1]\n", r"bandwidth\[0\] -5 is too small"),
    ("topology: [Ring]\nnpus_count: [4]\nbandwidth: [1]\n", "missing key 'latency'"),
    ("topology: [Ring]\nnpus_count: [4]\nbandwidth: [1]\nlatency: [1]\nlinks: 3\n", "unknown key 'links'"),
])
def test_bad_yaml(text, match):
    with pytest.raises(ValueError, match=match):
        parse_network_yaml(text)


def test_topology_without_yaml_form():
    with pytest.raises(ValueError, match="no ASTRA-sim analytical form"):
        spec_from_topology(multidim([("line", 3, 1e9, 0)]))


# ---- sizes and groups --------------------------------------------------------------------------
def test_parse_size_and_group():
    assert parse_size("1GiB") == 2**30 and parse_size("512MB") == 512e6 and parse_size("1e9") == 1e9
    for bad in ("0", "-1GiB", "0GiB"):
        with pytest.raises(ValueError, match="is too small: must be >= 1|is not a size"):
            parse_size(bad)
    with pytest.raises(ValueError, match="size '1XB' is not a size"):
        parse_size("1XB")
    assert parse_group("0-3,8", 20) == [0, 1, 2, 3, 8]
    with pytest.raises(ValueError, match="NPU 20 in group '0-20' outside"):
        parse_group("0-20", 20)
    with pytest.raises(ValueError, match="cannot parse 'x'"):
        parse_group("0,x", 20)


# ---- CLI ---------------------------------------------------------------------------------------
def test_cli_text(capsys):
    rc, out, err = run_cli(capsys, "--fabric", "mesh", "--op", "all-reduce", "--group", "0-19", "--size", "1GiB")
    assert rc == 0 and err == ""
    assert "hier2d" in out and "Mesh" in out and "TB/s" in out and "switch timing" in out


def test_cli_json_all_fabrics(capsys):
    rc, out, _ = run_cli(capsys, "--fabric", "all", "--size", "256MiB", "--json")
    doc = json.loads(out)
    assert doc["kind"] == "fred-collective" and doc["schema_version"] == 2
    rows = doc["results"]
    assert rc == 0 and [r["fabric"] for r in rows] == ["mesh", "fred-a", "fred-b", "fred-c", "fred-d", "torus",
                                                     "switched", "switched-inr"]
    d = next(r for r in rows if r["fabric"] == "fred-d")
    assert d["algorithm"] == "in-switch" and d["bytes_sent_per_npu"] == pytest.approx(256 * 2**20)
    eff = P.default_params().link_efficiency           # header flits and ACKs (fred.model.system.packets)
    assert d["npu_effective_bandwidth_Bps"] == pytest.approx(3e12 * eff, rel=0.01)


def test_cli_strategy_phase(capsys):
    rc, out, _ = run_cli(capsys, "--fabric", "fred-c", "--strategy", "MP(2)-DP(5)-PP(2)", "--phase", "dp", "--json")
    (d,) = json.loads(out)["results"]
    assert rc == 0 and len(d["groups"]) == 4 and d["groups"][0] == [0, 4, 8, 12, 16]
    assert d["strategy"] == "MP(2)-DP(5)-PP(2) DP"


def test_cli_network_file(capsys, tmp_path):
    f = tmp_path / "n.yml"
    f.write_text("topology: [ Ring, Switch ]\nnpus_count: [ 4, 2 ]\nbandwidth: [ 100, 50 ]\nlatency: [ 10, 10 ]\n")
    rc, out, _ = run_cli(capsys, "--network", str(f), "--json")
    (d,) = json.loads(out)["results"]
    assert rc == 0 and d["topology"] == "n" and len(d["groups"][0]) == 8


@pytest.mark.parametrize("argv, match", [
    (["--fabric", "hypercube"], "unknown fabric 'hypercube'"),
    (["--op", "allsum"], "unknown collective 'allsum'"),
    (["--group", "0-25"], "NPU 20 in group '0-25' outside"),
    (["--size", "0"], "--size '0' is too small: must be >= 1"),
    (["--size=-3MiB"], "--size '-3MiB' is not a size"),
    (["--strategy", "MP(3)-DP(5)", "--phase", "dp"], "uses 15 NPUs, not 20"),
    (["--strategy", "MP(4)-DP(5)"], "needs --phase"),
    (["--network", "/nonexistent.yml"], "not found"),
    (["--algorithm", "in-switch", "--fabric", "mesh"], "in-switch"),
])
def test_cli_bad_input_one_line(capsys, argv, match):
    rc, out, err = run_cli(capsys, *argv)
    assert rc == 2 and out == ""
    assert err.startswith("fred: error: ") and err.count("\n") == 1
    import re
    assert re.search(match, err), err


def test_cli_malformed_yaml(capsys, tmp_path):
    f = tmp_path / "bad.yml"
    f.write_text("topology: [Ring\nnpus_count: 4\n")
    rc, _, err = run_cli(capsys, "--network", str(f))
    assert rc == 2 and "malformed YAML" in err and err.count("\n") == 1


def test_cli_bad_timing_file_one_line(capsys, tmp_path):
    rc, out, err = run_cli(capsys, "--fabric", "fred-d", "--timing", str(tmp_path / "missing.json"))
    assert rc == 2 and out == "" and err.startswith("fred: error: ") and err.count("\n") == 1


def test_chunks_bound_is_the_models():
    """The CLI keeps its own copy of the bound (it imports no model at start-up); they agree."""
    from fred.commands import collective as cmd
    from fred.model.collectives import api as collectives

    assert cmd.MAX_CHUNKS == collectives.MAX_CHUNKS
