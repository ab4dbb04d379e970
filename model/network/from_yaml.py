"""Read and write the analytical-network YAML used by ASTRA-sim.

Format (one entry per dimension, dimension 0 = innermost, i.e. NPU ids vary fastest along it)::

    topology: [ Ring, Switch ]      # Ring | Switch | FullyConnected
    npus_count: [ 4, 8 ]            # NPUs along each dimension (total = product)
    bandwidth: [ 50.0, 25.0 ]       # GB/s per link, each direction
    latency: [ 500.0, 500.0 ]       # ns per link (hop)
    in_network: [ false, true ]     # optional (ours): this Switch dimension reduces in-network

Unit conventions (ours, stated): bandwidth is in GB/s with **1 GB = 1e9 bytes** by default and
latency is in nanoseconds per link. Upstream astra-network-analytical converts GB/s with
1 GB = 2**30 bytes; for a byte-exact comparison with such a build, add ``gb_bytes: 1073741824``
to the file (our extension) or pass ``gb_bytes=2**30`` to :func:`load_topology`. Every link is
bidirectional with the given bandwidth in each direction; a Switch dimension has one switch per
line with NPU<->switch links (so crossing it is two hops) and no traversal latency or in-network
reduction (as in ASTRA-sim's analytical backend) unless ``in_network`` marks it (our extension:
one bool per dimension, true only on a Switch: its switches reduce and multicast, so
``algorithm="in-switch"`` runs; still no traversal latency); a Ring of 2 NPUs is one link pair.
Routing is dimension-order, shortest direction on rings.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field

import yaml

from fred.contract.checks import check_int, check_number
from fred.contract.inputs import decode_text, input_problem, read_input
from fred.contract.outputs import write_atomic

from fred.model.system import GB, NS
from .graph import Topology, multidim

KINDS = {"ring": "Ring", "switch": "Switch", "fullyconnected": "FullyConnected"}
#: most NPUs a network file may describe (the flow simulator also caps the tasks one
#: simulation creates, fred.model.collectives.flowsim.MAX_TASKS: a ring All-Reduce over 2,048 NPUs is
#: 8.4 M flows, over 4,096 NPUs 33 M, refused; a hierarchical one over 4,096 NPUs is 4.1 M)
MAX_NPUS = 4_096
#: sane ranges of a link's figures: up to 1 PB/s per link and 1 s per hop (ASTRA-sim examples
#: use 25-1,000 GB/s and 500 ns)
MAX_BANDWIDTH_GBPS = 1e6
#: slowest link taken: 1 MB/s (a 1 GiB collective over slower links takes longer than is meaningful)
MIN_BANDWIDTH_GBPS = 1e-3
MAX_LATENCY_NS = 1e9
#: bytes per GB: 1e9 (ours) or 2**30 (upstream ASTRA-sim); anything from 1 B to 1 TiB is taken
MAX_GB_BYTES = 2**40
#: largest network file read (one line per key: a real one is a few hundred bytes)
MAX_FILE_BYTES = 2**20


class _Loader(yaml.SafeLoader):
    """Safe YAML loader that also reads ``1e3``, ``1.0e3`` and ``-2E-3`` as numbers (YAML 1.2;
    PyYAML's YAML 1.1 resolver wants a dot and a signed exponent, so ASTRA-sim files written
    ``bandwidth: [ 1e3 ]`` would hold strings)."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)(?:[eE][-+]?[0-9]+)?$"
                             r"|^[-+]?\.(?:inf|Inf|INF)$|^\.(?:nan|NaN|NAN)$"),
    list("-+0123456789."))
#: the loader of every YAML input of the model (workload files too)
NumberLoader = _Loader
_TO_DIM = {"Ring": "ring", "Switch": "switch", "FullyConnected": "fc"}
_FROM_DIM = {"ring": "Ring", "switch": "Switch", "fc": "FullyConnected"}
_KEYS = ("topology", "npus_count", "bandwidth", "latency", "gb_bytes", "in_network")


@dataclass
class NetworkSpec:
    """An ASTRA-sim analytical network: per-dimension kind, size, GB/s and ns."""

    topology: list[str]
    npus_count: list[int]
    bandwidth: list[float]
    latency: list[float]
    gb_bytes: float = GB
    name: str = field(default="", compare=False)
    #: per dimension: its switches reduce and multicast in-network (Switch dimensions only)
    in_network: list[bool] | None = None

    def __post_init__(self):
        for key in ("topology", "npus_count", "bandwidth", "latency"):
            v = getattr(self, key)
            if not isinstance(v, (list, tuple)):
                raise TypeError(f"{key} must be a list (one entry per dimension), not {type(v).__name__} {v!r}")
            setattr(self, key, list(v))
        n = len(self.topology)
        if n == 0:
            raise ValueError("network needs at least one dimension in 'topology'")
        for key in ("npus_count", "bandwidth", "latency"):
            if len(getattr(self, key)) != n:
                raise ValueError(f"'{key}' has {len(getattr(self, key))} entries but 'topology' has {n}")
        kinds = []
        for t in self.topology:
            k = KINDS.get(str(t).strip().lower().replace("_", "").replace("-", ""))
            if k is None:
                raise ValueError(f"unknown topology {t!r}; known: Ring, Switch, FullyConnected")
            kinds.append(k)
        self.topology = kinds
        for i, v in enumerate(self.npus_count):
            if isinstance(v, float) and v.is_integer():
                v = self.npus_count[i] = int(v)  # "8.0" is 8 NPUs
            check_int(f"npus_count[{i}]", v, 2, MAX_NPUS)
        if self.npus > MAX_NPUS:
            raise ValueError(f"npus_count {list(self.npus_count)} describes {self.npus:,} NPUs, more "
                             f"than the {MAX_NPUS:,} this simulator takes")
        for key, low, high, unit in (("bandwidth", MIN_BANDWIDTH_GBPS, MAX_BANDWIDTH_GBPS, "GB/s"),
                                     ("latency", 0, MAX_LATENCY_NS, "ns")):
            vals = getattr(self, key)
            for i, v in enumerate(vals):
                if key == "bandwidth" and isinstance(v, (int, float)) and not isinstance(v, bool) and v == 0:
                    check_number(f"{key}[{i}]", v, 0, high, unit, low_open=True)  # "must be > 0"
                check_number(f"{key}[{i}]", v, low, high, unit)
            setattr(self, key, [float(v) for v in vals])
        self.gb_bytes = check_number("gb_bytes", self.gb_bytes, 1, MAX_GB_BYTES, "bytes per GB")
        self.in_network = _check_in_network(self.in_network, self.topology)

    def mark_in_network(self, dims) -> None:
        """Mark dimensions ``dims`` (indices) as reducing in-network (Switch dimensions only)."""
        flags = list(self.in_network)
        for d in dims:
            if isinstance(d, bool) or not isinstance(d, int) or not 0 <= d < len(flags):
                raise ValueError(f"in-network dimension {d!r} is not a dimension of this network "
                                 f"(0..{len(flags) - 1})")
            flags[d] = True
        self.in_network = _check_in_network(flags, self.topology)

    @property
    def npus(self) -> int:
        return math.prod(self.npus_count)

    def build(self, name: str | None = None) -> Topology:
        dims = [(_TO_DIM[k], n, bw * self.gb_bytes, lat * NS)
                for k, n, bw, lat in zip(self.topology, self.npus_count, self.bandwidth, self.latency)]
        nm = name or self.name or "x".join(f"{k}({n})" for k, n in zip(self.topology, self.npus_count))
        inn = [d for d, f in enumerate(self.in_network) if f]
        single = len(dims) == 1 and bool(inn)
        # one reducing switch: a tree (the in-switch algorithms of the wafer fabrics apply as is);
        # several dimensions: the in-switch plan reduces per line of each marked dimension
        topo = multidim(dims, nm, multicast=single, in_network_reduction=single)
        topo.meta["yaml"] = True
        topo.meta["network_spec"] = self
        topo.meta["in_network_dims"] = tuple(inn)
        if single:
            sw = topo.meta["dims"][0][3][0]
            topo.meta["parent"] = {i: sw for i in range(topo.npus)}
            topo.meta["parent"][sw] = None
            topo.meta["l1_of"] = [0] * topo.npus
            topo.meta["l1_nodes"] = [sw]
            topo.meta["root"] = sw
        return topo

    def to_dict(self) -> dict:
        d = {"topology": list(self.topology), "npus_count": list(self.npus_count),
             "bandwidth": list(self.bandwidth), "latency": list(self.latency)}
        if self.gb_bytes != GB:
            d["gb_bytes"] = self.gb_bytes
        if any(self.in_network):
            d["in_network"] = list(self.in_network)
        return d

    def to_yaml(self) -> str:
        lines = [
            f"topology: [ {', '.join(self.topology)} ]",
            f"npus_count: [ {', '.join(str(n) for n in self.npus_count)} ]",
            f"bandwidth: [ {', '.join(_num(b) for b in self.bandwidth)} ]  # GB/s (1 GB = {self.gb_bytes:g} B)",
            f"latency: [ {', '.join(_num(l) for l in self.latency)} ]  # ns",
        ]
        if self.gb_bytes != GB:
            lines.append(f"gb_bytes: {self.gb_bytes:g}")
        if any(self.in_network):
            lines.append(f"in_network: [ {', '.join('true' if f else 'false' for f in self.in_network)} ]")
        return "\n".join(lines) + "\n"


def _check_in_network(flags, kinds) -> list[bool]:
    """``in_network`` as one bool per dimension (None: all false); true only on a Switch."""
    if flags is None:
        return [False] * len(kinds)
    flags = list(flags) if isinstance(flags, (list, tuple)) else [flags]
    if len(flags) != len(kinds):
        raise ValueError(f"'in_network' has {len(flags)} entries but 'topology' has {len(kinds)}")
    for i, (f, k) in enumerate(zip(flags, kinds)):
        if not isinstance(f, bool):
            raise ValueError(f"in_network[{i}] must be true or false, got {f!r}")
        if f and k != "Switch":
            raise ValueError(f"in_network[{i}]: dimension {i} is a {k}; only a Switch reduces in-network")
    return flags


def _num(v: float) -> str:
    r = repr(float(v))
    return r


def parse_network_yaml(text: str, where: str = "<string>") -> NetworkSpec:
    """Parse YAML text into a :class:`NetworkSpec` (ValueError with a one-line reason)."""
    if not isinstance(text, str):
        raise TypeError(f"network YAML must be text, not {type(text).__name__}")
    try:
        data = yaml.load(text, Loader=_Loader)
    except RecursionError:
        raise ValueError(f"malformed YAML in network file {where}: nested too deeply") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        at = f" at line {mark.line + 1}" if mark is not None else ""
        raise ValueError(f"malformed YAML in network file {where}{at}: {problem}") from None
    if not isinstance(data, dict):
        raise ValueError(f"malformed network file {where}: expected a mapping with keys topology, npus_count, "
                         f"bandwidth, latency; got {type(data).__name__}")
    unknown = [k for k in data if k not in _KEYS]
    if unknown:
        raise ValueError(f"unknown key {unknown[0]!r} in {where}; known: {', '.join(_KEYS)}")
    missing = [k for k in _KEYS[:4] if k not in data]
    if missing:
        raise ValueError(f"missing key {missing[0]!r} in {where}")

    def as_list(key):
        v = data[key]
        return list(v) if isinstance(v, (list, tuple)) else [v]

    try:
        return NetworkSpec(as_list("topology"), as_list("npus_count"), as_list("bandwidth"), as_list("latency"),
                           data.get("gb_bytes", GB), name=os.path.splitext(os.path.basename(where))[0]
                           if where != "<string>" else "", in_network=data.get("in_network"))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{exc} (in {where})") from None


def load_network_yaml(path) -> NetworkSpec:
    path = os.fspath(path)
    problem = input_problem(path, MAX_FILE_BYTES)
    if problem == "no such file":
        raise ValueError(f"network file {path!r} not found")
    if problem:
        raise ValueError(f"cannot read network file {path!r}: {problem}")
    text = decode_text(read_input(path, "network file", MAX_FILE_BYTES), f"network file {path!r}")
    return parse_network_yaml(text, path)


def load_topology(path, gb_bytes: float | None = None, in_network=()) -> Topology:
    """Build a :class:`Topology` from an ASTRA-sim analytical YAML file (``in_network``: more
    dimension indices whose switches reduce in-network, besides the file's own)."""
    spec = load_network_yaml(path)
    if gb_bytes is not None:
        spec.gb_bytes = gb_bytes
    if in_network:
        try:
            spec.mark_in_network(list(in_network))
        except ValueError as exc:
            raise ValueError(f"{exc} (in {os.fspath(path)})") from None
    return spec.build()


def dump_network_yaml(spec: NetworkSpec, path=None) -> str:
    text = spec.to_yaml()
    if path is not None:
        write_atomic(path, text)
    return text


def spec_from_topology(topo: Topology, gb_bytes: float = GB) -> NetworkSpec:
    """The YAML description of a topology built by :func:`fred.model.network.graph.multidim` (ring,
    fully connected, single switch, multi-dim); ValueError for anything else (meshes without
    wrap-around, FRED trees and hand-built graphs have no ASTRA-sim analytical equivalent)."""
    spec = topo.meta.get("dim_spec")
    if not spec:
        raise ValueError(f"topology {topo.name!r} has no ASTRA-sim analytical form")
    kinds = []
    for k, n, _, _ in spec:
        if k not in _FROM_DIM:
            raise ValueError(f"topology {topo.name!r}: dimension kind {k!r} has no ASTRA-sim analytical form")
        kinds.append(_FROM_DIM[k])
    def tidy(v):  # undo the unit conversion's rounding (20 ns -> 19.999999999999996)
        return float(f"{v:.12g}")

    inn = set(topo.meta.get("in_network_dims", ()))
    if topo.in_network_reduction and len(spec) == 1:
        inn.add(0)
    return NetworkSpec(kinds, [n for _, n, _, _ in spec], [tidy(bw / gb_bytes) for _, _, bw, _ in spec],
                       [tidy(lat / NS) for _, _, _, lat in spec], gb_bytes,
                       in_network=[d in inn and k == "Switch" for d, k in enumerate(kinds)])
