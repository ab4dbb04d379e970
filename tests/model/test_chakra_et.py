"""Chakra execution traces (ASTRA-sim 2.x) on YAML networks: the reader, the runner, the CLI and
one-line errors for malformed files (issue 16)."""

import json
import os
import pathlib

import pytest

from fred.cli import main
from fred.model.collectives.bounds import lower_bound
from fred.model.inputs.chakra_et import load_chakra, read_et_file, run_chakra
from fred.model.inputs.chakra_schema import GlobalMetadata, Node
from fred.model.network.from_yaml import parse_network_yaml

HERE = pathlib.Path(__file__).resolve().parents[1]
SHIPPED = HERE / "data" / "chakra-et" / "all_reduce_4npus_1MB"
SHARED = HERE.parent.parent / "shared" / "workloads" / "chakra-et"
MiB = 2**20


def ring(n, bw=50.0, lat=500.0):
    return parse_network_yaml(f"topology: [ Ring ]\nnpus_count: [ {n} ]\nbandwidth: [ {bw} ]\n"
                              f"latency: [ {lat} ]\n").build()


def _varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def node(nid, ntype=7, comm_type=0, size=MiB, deps=(), dur=0, name="n"):
    x = Node(id=nid, name=name, type=ntype, duration_micros=dur)
    x.data_deps.extend(deps)
    if ntype == 7:
        x.attr.add(name="comm_type", int64_val=comm_type)
        x.attr.add(name="comm_size", int64_val=size)
    return x


def write_trace(d, npus, make_nodes, name="t"):
    d.mkdir(exist_ok=True)
    for npu in range(npus):
        msgs = [GlobalMetadata(version="0.0.4")] + make_nodes(npu)
        data = b"".join(_varint(len(m.SerializeToString())) + m.SerializeToString() for m in msgs)
        (d / f"{name}.{npu}.et").write_bytes(data)
    return d


def test_shipped_microbenchmark_reads():
    version, nodes = read_et_file(SHIPPED / "all_reduce.1.et")
    assert version == "0.0.4" and len(nodes) == 1 and nodes[0].id == 1 and nodes[0].type == 7
    tr = load_chakra(SHIPPED)
    assert tr.npus == 4 and tr.name == "all_reduce"
    (op,) = tr.ops
    assert op.op == "all-reduce" and op.size == MiB and op.deps == ()


def test_shipped_all_reduce_runs_the_bidirectional_ring_closed_form():
    (r,) = run_chakra(load_chakra(SHIPPED), ring(4))
    # two opposite rings, each half the data: 2(p-1) steps of D/(2p) at 50 GB/s, 500 ns each
    assert r["algorithm"] == "multi-ring" and r["chunks"] == 1
    assert r["time_s"] == pytest.approx(6 * (MiB / 8 / 50e9 + 500e-9), rel=1e-9)


def test_dependencies_compute_and_sizes(tmp_path):
    """AG (size = input, ASTRA-sim) after a compute node, then an AR that depends on both."""
    def nodes(npu):
        return [node(10, ntype=4, dur=5 + npu, name="fwd"), node(11, comm_type=2, deps=[10], name="ag"),
                node(12, comm_type=0, size=2 * MiB, deps=[10, 11], name="ar")]
    tr = load_chakra(write_trace(tmp_path / "t", 4, nodes))
    rows = run_chakra(tr, ring(4))
    comp, ag, ar = rows
    assert comp["time_s"] == pytest.approx(8e-6)               # the longest NPU's compute
    assert ag["start_s"] == pytest.approx(comp["finish_s"]) and ag["model_bytes_per_npu"] == 4 * MiB
    assert ar["start_s"] == pytest.approx(ag["finish_s"]) and ar["model_bytes_per_npu"] == 2 * MiB


@pytest.mark.skipif(not SHARED.is_dir(), reason="shared Chakra microbenchmarks not present")
def test_every_shared_microbenchmark_runs_at_or_above_its_bound():
    dirs = sorted(p for p in SHARED.glob("*/*") if p.is_dir())
    assert len(dirs) == 12
    for d in dirs:
        tr = load_chakra(d)
        topo = ring(tr.npus)
        (r,) = run_chakra(tr, topo)
        assert r["op"] == d.parent.name.replace("_", "-")
        assert r["time_s"] >= lower_bound(topo, r["op"], r["model_bytes_per_npu"])[0] * (1 - 1e-9)


def test_cli_prints_the_times(capsys):
    net = HERE / "data" / "chakra-et" / "ring4.yml"
    assert main(["collective", "--chakra", str(SHIPPED), "--network", str(net), "--json"]) == 0
    (r,) = json.loads(capsys.readouterr().out)["results"]
    assert r["op"] == "all-reduce" and r["npus"] == 4 and r["time_s"] > r["port_bound_s"] > 0
    assert main(["collective", "--chakra", str(SHIPPED), "--network", str(net)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[:4] == ["trace", "NPUs", "node", "op"] and "all-reduce" in out[1]


def _bad(tmp_path, case):
    d = tmp_path / "bad"
    if case == "truncated":
        write_trace(d, 2, lambda n: [node(0)])
        p = d / "t.1.et"
        p.write_bytes(p.read_bytes()[:-3])
        return d, r"t\.1\.et: message at byte \d+ claims \d+ bytes, only \d+ left"
    if case == "garbage":
        write_trace(d, 2, lambda n: [node(0)])
        (d / "t.0.et").write_bytes(b"\x03\xff\xff\xff")
        return d, r"t\.0\.et: the first message is not a Chakra GlobalMetadata"
    if case == "missing":
        write_trace(d, 3, lambda n: [node(0)])
        os.remove(d / "t.1.et")
        return d, r"2 files but no t\.1\.et"
    if case == "differs":
        write_trace(d, 2, lambda n: [node(0, comm_type=0 if n == 0 else 2)])
        return d, r"t\.1\.et: operation 0 differs from t\.0\.et's"
    if case == "barrier":
        write_trace(d, 2, lambda n: [node(0, comm_type=9)])
        return d, r"t\.0\.et: node 0 \('n'\) is a BARRIER; supported: ALL_REDUCE"
    if case == "send":
        write_trace(d, 2, lambda n: [node(0, ntype=5)])
        return d, r"is a COMM_SEND_NODE; only COMM_COLL_NODE and COMP_NODE"
    if case == "dangling":
        write_trace(d, 2, lambda n: [node(0, deps=[7])])
        return d, r"depends on node 7, which is not in the file"
    if case == "no-size":
        def nodes(n):
            x = Node(id=0, name="n", type=7)
            x.attr.add(name="comm_type", int64_val=0)
            return [x]
        write_trace(d, 2, nodes)
        return d, r"has no integer attribute 'comm_size'"
    if case == "npus":
        write_trace(d, 8, lambda n: [node(0)])
        return d, r"has 8 NPU files but network 'ring4' has 4 NPUs"
    raise AssertionError(case)


@pytest.mark.parametrize("case", ["truncated", "garbage", "missing", "differs", "barrier", "send", "dangling",
                                  "no-size", "npus"])
def test_malformed_traces_one_line(capsys, tmp_path, case):
    import re

    d, match = _bad(tmp_path, case)
    net = HERE / "data" / "chakra-et" / "ring4.yml"
    rc = main(["collective", "--chakra", str(d), "--network", str(net)])
    out, err = capsys.readouterr()
    assert rc == 2 and out == "" and err.startswith("fred: error: ") and err.count("\n") == 1
    assert re.search(match, err), err


@pytest.mark.parametrize("argv, match", [
    ([], "--chakra needs --network"),
    (["--network", "NET", "--size", "1MiB"], "--size 1048576 does not apply with --chakra"),
    (["--network", "NET", "--op", "ag"], "--op 'all-gather' does not apply with --chakra"),
])
def test_cli_option_rules(capsys, argv, match):
    net = str(HERE / "data" / "chakra-et" / "ring4.yml")
    rc = main(["collective", "--chakra", str(SHIPPED), *[net if a == "NET" else a for a in argv]])
    out, err = capsys.readouterr()
    assert rc == 2 and out == "" and err.count("\n") == 1 and match in err, err
