"""Chakra execution traces (ASTRA-sim 2.x workloads): read a directory of per-NPU ``.et`` files
and run their collectives on a network.

A trace is one file per NPU, ``<name>.<npu>.et``: a stream of protobuf messages, each preceded
by its length as a varint, first a ``GlobalMetadata`` and then one ``Node`` per operation
(:mod:`fred.model.inputs.chakra_schema`). This reader takes collective nodes (``COMM_COLL_NODE`` with
the attributes ``comm_type`` and ``comm_size``) and compute nodes (``COMP_NODE``, their
``duration_micros``), in the files' order, with their data and control dependencies.

Every NPU must hold the same operations (the same types, collectives, sizes and dependencies;
node ids may differ between files: ASTRA-sim's microbenchmarks number a node by its NPU); each
collective then runs over every NPU of the network, as ASTRA-sim runs a trace without
communicator groups. ``comm_size`` is bytes per NPU in ASTRA-sim's convention: each NPU's
input (an All-Gather's output is ``p`` times it). A compute node waits its longest duration
over the NPUs. Anything else is a one-line ``ValueError`` naming the file and what is wrong.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from google.protobuf.message import DecodeError

from fred.contract.inputs import read_input

from .chakra_schema import COMM_TYPES, NODE_TYPES, GlobalMetadata, Node
from fred.model.collectives import expand
from fred.model.collectives import Sim

__all__ = ["EtOp", "EtTrace", "read_et_file", "load_chakra", "run_chakra", "OPS_BY_COMM_TYPE"]

#: Chakra CollectiveCommType -> this model's collective
OPS_BY_COMM_TYPE = {"ALL_REDUCE": "all-reduce", "ALL_GATHER": "all-gather", "REDUCE_SCATTER": "reduce-scatter",
                    "ALL_TO_ALL": "all-to-all", "REDUCE": "reduce", "BROADCAST": "broadcast"}
#: ops whose model size is the output per NPU (p x ASTRA-sim's input)
_OUTPUT_SIZED = ("all-gather",)
_COMP, _COLL = 4, 7
#: most nodes per file (a microbenchmark has one; a training step thousands)
MAX_NODES = 100_000
#: largest .et file read (a node is ~50-100 bytes)
MAX_FILE_BYTES = 64 * 2**20
#: largest collective (bytes per NPU) and compute node (microseconds) taken
MAX_COMM_BYTES = 2**50
MAX_DURATION_US = 10**12
#: most NPU files in a trace folder (the networks take at most 4,096 NPUs)
MAX_NPU_FILES = 4_096
_FILE = re.compile(r"^(?P<name>.+)\.(?P<npu>[0-9]+)\.et$")


@dataclass
class EtOp:
    """One operation of a trace (the same on every NPU)."""

    index: int
    name: str
    kind: str                 # "collective" or "compute"
    op: str | None = None     # the model's collective name
    size: int = 0             # comm_size: bytes per NPU (ASTRA-sim: each NPU's input)
    duration_s: float = 0.0   # compute: the longest over the NPUs
    deps: tuple[int, ...] = ()


@dataclass
class EtTrace:
    directory: str
    name: str
    npus: int
    version: str
    ops: list[EtOp] = field(default_factory=list)


def _varint(data: bytes, pos: int, where: str) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data):
            raise ValueError(f"{where}: truncated length prefix at byte {pos}")
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise ValueError(f"{where}: length prefix at byte {pos} is not a varint")


def _messages(data: bytes, where: str):
    pos = 0
    while pos < len(data):
        n, start = _varint(data, pos, where)
        if start + n > len(data):
            raise ValueError(f"{where}: message at byte {pos} claims {n} bytes, only {len(data) - start} left")
        yield pos, data[start:start + n]
        pos = start + n


def read_et_file(path) -> tuple[str, list]:
    """(version, [Node, ...]) of one ``.et`` file; ValueError naming the file and the fault."""
    path = os.fspath(path)
    where = os.path.basename(path)
    data = read_input(path, "Chakra trace file", MAX_FILE_BYTES)
    msgs = _messages(data, where)
    first = next(msgs, None)
    if first is None:
        raise ValueError(f"{where}: empty file (expected a GlobalMetadata message, then nodes)")
    meta = GlobalMetadata()
    try:
        meta.ParseFromString(first[1])
    except DecodeError:
        raise ValueError(f"{where}: the first message is not a Chakra GlobalMetadata") from None
    if not meta.version:
        raise ValueError(f"{where}: the first message is not a Chakra GlobalMetadata (no version)")
    nodes = []
    for pos, raw in msgs:
        node = Node()
        try:
            node.ParseFromString(raw)
        except DecodeError:
            raise ValueError(f"{where}: the message at byte {pos} is not a Chakra Node") from None
        nodes.append(node)
        if len(nodes) > MAX_NODES:
            raise ValueError(f"{where}: more than {MAX_NODES:,} nodes")
    if not nodes:
        raise ValueError(f"{where}: no nodes after the GlobalMetadata")
    return meta.version, nodes


def _attrs(node) -> dict:
    out = {}
    for a in node.attr:
        kind = a.WhichOneof("value")
        out[a.name] = getattr(a, kind) if kind else None
    return out


def _op_of(node, index, where, id_pos) -> tuple:
    """The NPU-independent description of ``node`` (for comparing files) and its duration."""
    deps = []
    for d in list(node.data_deps) + list(node.ctrl_deps):
        if d not in id_pos:
            raise ValueError(f"{where}: node {node.id} ({node.name!r}) depends on node {d}, which is not in the file")
        if id_pos[d] >= index:
            raise ValueError(f"{where}: node {node.id} ({node.name!r}) depends on node {d}, which comes after it")
        deps.append(id_pos[d])
    deps = tuple(sorted(set(deps)))
    if node.type == _COMP:
        if node.duration_micros > MAX_DURATION_US:
            raise ValueError(f"{where}: compute node {node.id} ({node.name!r}) lasts {node.duration_micros:,} us; at "
                             f"most {MAX_DURATION_US:,} us (11.6 days)")
        return ("compute", None, 0, deps), node.duration_micros * 1e-6
    if node.type != _COLL:
        kind = NODE_TYPES.get(node.type, f"type {node.type}")
        raise ValueError(f"{where}: node {node.id} ({node.name!r}) is a {kind}; only COMM_COLL_NODE and COMP_NODE "
                         f"are supported")
    at = _attrs(node)
    for key in ("comm_type", "comm_size"):
        if not isinstance(at.get(key), int) or isinstance(at.get(key), bool):
            raise ValueError(f"{where}: collective node {node.id} ({node.name!r}) has no integer attribute {key!r}")
    ct = COMM_TYPES.get(at["comm_type"], f"comm_type {at['comm_type']}")
    op = OPS_BY_COMM_TYPE.get(ct)
    if op is None:
        raise ValueError(f"{where}: node {node.id} ({node.name!r}) is a {ct}; supported: "
                         f"{', '.join(OPS_BY_COMM_TYPE)}")
    if at["comm_size"] <= 0:
        raise ValueError(f"{where}: node {node.id} ({node.name!r}) has comm_size {at['comm_size']}; must be > 0")
    if at["comm_size"] > MAX_COMM_BYTES:
        raise ValueError(f"{where}: node {node.id} ({node.name!r}) has comm_size {at['comm_size']:,}; at most "
                         f"{MAX_COMM_BYTES:,} bytes (1 PiB per NPU, as fred collective --size)")
    return ("collective", op, int(at["comm_size"]), deps), 0.0


def load_chakra(directory) -> EtTrace:
    """Read the per-NPU files of one trace in ``directory`` (module docs)."""
    directory = os.fspath(directory)
    if not os.path.isdir(directory):
        if os.path.exists(directory):
            raise ValueError(f"Chakra trace directory {directory!r} is a file, not a directory (give the directory "
                             f"that holds the <name>.<npu>.et files)")
        raise ValueError(f"Chakra trace directory {directory!r} not found")
    found = {}
    for fn in sorted(os.listdir(directory)):
        m = _FILE.match(fn)
        if m:
            found.setdefault(m["name"], {})[int(m["npu"])] = fn
    if not found:
        raise ValueError(f"{directory}: no Chakra trace files (<name>.<npu>.et)")
    if len(found) > 1:
        raise ValueError(f"{directory}: files of several traces ({', '.join(sorted(found))}); give one per directory")
    (name, files), = found.items()
    npus = len(files)
    if npus > MAX_NPU_FILES:
        raise ValueError(f"{directory}: {npus:,} files of trace {name!r}, more than the {MAX_NPU_FILES:,} NPUs "
                         f"a network takes")
    missing = sorted(set(range(npus)) - set(files))
    if missing:
        raise ValueError(f"{directory}: {npus} files but no {name}.{missing[0]}.et (one file per NPU, 0..{npus - 1})")
    ref = None
    durations = []
    version = ""
    for npu in range(npus):
        where = files[npu]
        version, nodes = read_et_file(os.path.join(directory, where))
        if ref is not None and len(nodes) != len(ref):
            raise ValueError(f"{where}: {len(nodes)} operations, {files[0]} has {len(ref)} (every NPU must run the "
                             f"same collectives)")
        id_pos = {}
        desc = []
        for i, node in enumerate(nodes):
            if node.id in id_pos:
                raise ValueError(f"{where}: node id {node.id} appears twice")
            id_pos[node.id] = i
        for i, node in enumerate(nodes):
            d, dur = _op_of(node, i, where, id_pos)
            desc.append((d, node.name))
            if npu == 0:
                durations.append(dur)
            else:
                durations[i] = max(durations[i], dur)
        if ref is None:
            ref = desc
        elif [d for d, _ in desc] != [d for d, _ in ref]:
            k = next((i for i, (a, b) in enumerate(zip(desc, ref)) if a[0] != b[0]), min(len(desc), len(ref)))
            raise ValueError(f"{where}: operation {k} differs from {files[0]}'s (every NPU must run the same "
                             f"collectives)")
    ops = [EtOp(i, nm, d[0], d[1], d[2], durations[i], d[3]) for i, (d, nm) in enumerate(ref)]
    return EtTrace(directory, name, npus, version, ops)


def model_bytes(op: EtOp, npus: int) -> int:
    """The model's per-NPU size of collective ``op`` (ASTRA-sim's comm_size is the input)."""
    return op.size * npus if op.op in _OUTPUT_SIZED else op.size


def run_chakra(trace: EtTrace, topo, algorithm=None, chunks=None, timing=None) -> list[dict]:
    """Simulate ``trace`` on ``topo``; per operation: start, finish, time, algorithm, chunks."""
    if trace.npus != topo.npus:
        raise ValueError(f"trace {trace.name!r} ({trace.directory}) has {trace.npus} NPU files but network "
                         f"{topo.name!r} has {topo.npus} NPUs")
    sim = Sim(topo, timing)
    tasks, meta = [], []
    for op in trace.ops:
        deps = [tasks[d] for d in op.deps]
        if op.kind == "compute":
            tasks.append(sim.delay(op.duration_s, deps=deps, label="compute"))
            meta.append(("compute", 1))
            continue
        tasks.append(expand(sim, op.op, list(range(topo.npus)), model_bytes(op, topo.npus), deps=deps,
                            algorithm=algorithm, chunks=chunks, label=op.op))
        meta.append((sim.last_algorithms[0], sim.last_chunks))
    res = sim.run()
    out = []
    for op, t, (alg, ck) in zip(trace.ops, tasks, meta):
        out.append({"index": op.index, "name": op.name, "kind": op.kind, "op": op.op, "comm_size_bytes": op.size,
                    "model_bytes_per_npu": model_bytes(op, topo.npus) if op.op else 0, "algorithm": alg,
                    "chunks": ck, "start_s": float(res.start[t]), "finish_s": float(res.finish[t]),
                    "time_s": float(res.finish[t] - res.start[t])})
    return out
