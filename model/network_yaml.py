"""Read and write the analytical-network YAML used by ASTRA-sim.

Format (one entry per dimension, dimension 0 = innermost, i.e. NPU ids vary fastest along it)::

    topology: [ Ring, Switch ]      # Ring | Switch | FullyConnected
    npus_count: [ 4, 8 ]            # NPUs along each dimension (total = product)
    bandwidth: [ 50.0, 25.0 ]       # GB/s per link, each direction
    latency: [ 500.0, 500.0 ]       # ns per link (hop)

Unit conventions (ours, stated): bandwidth is in GB/s with **1 GB = 1e9 bytes** by default and
latency is in nanoseconds per link. Upstream astra-network-analytical converts GB/s with
1 GB = 2**30 bytes; for a byte-exact comparison with such a build, add ``gb_bytes: 1073741824``
to the file (our extension) or pass ``gb_bytes=2**30`` to :func:`load_topology`. Every link is
bidirectional with the given bandwidth in each direction; a Switch dimension has one switch per
line with NPU<->switch links (so crossing it is two hops) and no traversal latency or in-network
reduction (as in ASTRA-sim's analytical backend); a Ring of 2 NPUs is one link pair. Routing is
dimension-order, shortest direction on rings.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

import yaml

from fred.contract.outputs import write_atomic

from .params import GB, NS
from .graph import Topology, multidim

KINDS = {"ring": "Ring", "switch": "Switch", "fullyconnected": "FullyConnected"}
_TO_DIM = {"Ring": "ring", "Switch": "switch", "FullyConnected": "fc"}
_FROM_DIM = {"ring": "Ring", "switch": "Switch", "fc": "FullyConnected"}
_KEYS = ("topology", "npus_count", "bandwidth", "latency", "gb_bytes")


@dataclass
class NetworkSpec:
    """An ASTRA-sim analytical network: per-dimension kind, size, GB/s and ns."""

    topology: list[str]
    npus_count: list[int]
    bandwidth: list[float]
    latency: list[float]
    gb_bytes: float = GB
    name: str = field(default="", compare=False)

    def __post_init__(self):
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
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"npus_count[{i}] must be a positive integer, got {v!r}")
        for key, lo_ok in (("bandwidth", False), ("latency", True)):
            vals = getattr(self, key)
            for i, v in enumerate(vals):
                if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or \
                        (v < 0 if lo_ok else v <= 0):
                    need = ">= 0" if lo_ok else "> 0"
                    raise ValueError(f"{key}[{i}] must be a number {need}, got {v!r}")
            setattr(self, key, [float(v) for v in vals])
        if isinstance(self.gb_bytes, bool) or not isinstance(self.gb_bytes, (int, float)) or self.gb_bytes <= 0:
            raise ValueError(f"gb_bytes must be a positive number, got {self.gb_bytes!r}")

    @property
    def npus(self) -> int:
        return math.prod(self.npus_count)

    def build(self, name: str | None = None) -> Topology:
        dims = [(_TO_DIM[k], n, bw * self.gb_bytes, lat * NS)
                for k, n, bw, lat in zip(self.topology, self.npus_count, self.bandwidth, self.latency)]
        nm = name or self.name or "x".join(f"{k}({n})" for k, n in zip(self.topology, self.npus_count))
        topo = multidim(dims, nm)
        topo.meta["yaml"] = True
        topo.meta["network_spec"] = self
        return topo

    def to_dict(self) -> dict:
        d = {"topology": list(self.topology), "npus_count": list(self.npus_count),
             "bandwidth": list(self.bandwidth), "latency": list(self.latency)}
        if self.gb_bytes != GB:
            d["gb_bytes"] = self.gb_bytes
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
        return "\n".join(lines) + "\n"


def _num(v: float) -> str:
    r = repr(float(v))
    return r


def parse_network_yaml(text: str, where: str = "<string>") -> NetworkSpec:
    """Parse YAML text into a :class:`NetworkSpec` (ValueError with a one-line reason)."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        at = f" at line {mark.line + 1}" if mark is not None else ""
        raise ValueError(f"malformed YAML in {where}{at}: {problem}") from None
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
                           if where != "<string>" else "")
    except ValueError as exc:
        raise ValueError(f"{exc} (in {where})") from None


def load_network_yaml(path) -> NetworkSpec:
    path = os.fspath(path)
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except FileNotFoundError:
        raise ValueError(f"network file {path!r} not found") from None
    except (IsADirectoryError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read network file {path!r}: {type(exc).__name__}") from None
    return parse_network_yaml(text, path)


def load_topology(path, gb_bytes: float | None = None) -> Topology:
    """Build a :class:`Topology` from an ASTRA-sim analytical YAML file."""
    spec = load_network_yaml(path)
    if gb_bytes is not None:
        spec.gb_bytes = gb_bytes
    return spec.build()


def dump_network_yaml(spec: NetworkSpec, path=None) -> str:
    text = spec.to_yaml()
    if path is not None:
        write_atomic(path, text)
    return text


def spec_from_topology(topo: Topology, gb_bytes: float = GB) -> NetworkSpec:
    """The YAML description of a topology built by :func:`fred.model.graph.multidim` (ring,
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

    return NetworkSpec(kinds, [n for _, n, _, _ in spec], [tidy(bw / gb_bytes) for _, _, bw, _ in spec],
                       [tidy(lat / NS) for _, _, _, lat in spec], gb_bytes)
