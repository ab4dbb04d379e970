"""The off-wafer level: W wafers joined through their I/O controllers by an off-wafer network.

A multi-wafer system is W identical wafers that train one model data-parallel across wafers: each
wafer runs the same per-wafer strategy MP(a)-DP(b)-PP(c) on its own samples (global data
parallelism b x W), and the gradients are reduced across the wafers once per iteration. The
wafers meet only through their I/O controllers (FRED-SPEC §5: 18 x 128 GB/s per wafer), which
attach to an **off-wafer network** described as a one-dimension ASTRA-sim analytical YAML section
(:mod:`fred.model.network.from_yaml` conventions, without ``npus_count``: the number of wafers is given
separately)::

    topology: [ Switch ]    # Switch (a non-blocking switched fabric) or Ring (a ring of wafers)
    bandwidth: [ 128.0 ]    # GB/s per I/O controller port, each direction
    latency: [ 1000.0 ]     # ns per link (a Switch path is two links)
    in_network: [ false ]   # the switches reduce (SHARP-like), Switch only

Bundled networks (``model/data/offwafer-*.yml``, sources in docs/network.md "Several wafers"):
``ndr`` (InfiniBand NDR fat tree, endpoint collectives; the default), ``ndr-sharp`` (the same with
in-network reduction) and ``ring`` (a ring of wafers, half the controllers to each neighbour).

The level is simulated by the same flow model as a wafer, on a W-node network whose node is one
wafer's controllers (:meth:`OffWaferLevel.topology`): a Switch gives each wafer one link of
``min(port, controller) x controllers`` bandwidth; a Ring two links of half that (one of the
whole on a ring of two). :meth:`OffWaferLevel.exchange_time` is an All-Reduce of a wafer's bucket
across the W wafers on that network (default algorithm: ring on a plain switch or ring, in-switch
with ``in_network``); :meth:`OffWaferLevel.bound` its closed-form bandwidth bound
(:func:`fred.model.collectives.bounds.port_bound`). The training schedule inserts these exchanges between the
wafer's own collectives (:mod:`fred.model.schedule.multiwafer`); one wafer's flows and the W-node level are
simulated, never W x 20 NPUs.
"""

from __future__ import annotations

import functools
import os
import pathlib
from dataclasses import dataclass

import yaml

from fred.contract.checks import check_int, check_number
from fred.contract.inputs import decode_text, input_problem, read_input

from fred.model.network import NumberLoader, from_yaml
from fred.model.system import GB, NS
from fred.model.system import params as P

DATA_DIR = pathlib.Path(__file__).resolve().parents[1] / "data"
#: bundled off-wafer networks: name -> file in model/data
NETWORKS = {"ndr": "offwafer-ndr.yml", "ndr-sharp": "offwafer-ndr-sharp.yml", "ring": "offwafer-ring.yml"}
#: ours: the common deployment (InfiniBand NDR without SHARP; docs/network.md)
DEFAULT_NETWORK = "ndr"
#: most wafers: an exchange over 256 wafers takes < 0.1 s of CPU per size simulated (a 256-wafer
#: GPT-3 estimate 0.6 s), over 1,024 wafers 1.3-1.7 s per size, and an estimate simulates a few sizes
MAX_WAFERS = 256
_KEYS = ("topology", "bandwidth", "latency", "in_network")


@dataclass(frozen=True)
class OffWaferNetwork:
    """An off-wafer network: ``kind`` Switch or Ring, ``port_bw`` B/s per controller port and
    direction, ``latency`` s per link, ``in_network`` (the switches reduce), ``name``."""

    name: str
    kind: str
    port_bw: float
    latency: float
    in_network: bool = False

    def __post_init__(self):
        if self.kind not in ("Switch", "Ring"):
            raise ValueError(f"off-wafer topology must be Switch or Ring, got {self.kind!r}")
        check_number("off-wafer bandwidth", self.port_bw / GB, from_yaml.MIN_BANDWIDTH_GBPS, from_yaml.MAX_BANDWIDTH_GBPS, "GB/s")
        check_number("off-wafer latency", self.latency / NS, 0, from_yaml.MAX_LATENCY_NS, "ns")
        if self.in_network and self.kind != "Switch":
            raise ValueError("off-wafer in_network: only a Switch reduces in-network")

    def describe(self) -> str:
        how = "in-network reduction" if self.in_network else "endpoint collectives"
        return (f"{self.name}: {self.kind}, {self.port_bw / GB:g} GB/s per I/O controller port, "
                f"{self.latency / NS:g} ns per link, {how}")


def parse_off_wafer(text: str, where: str = "<string>") -> OffWaferNetwork:
    """An :class:`OffWaferNetwork` from YAML text (ValueError naming ``where`` and the field)."""
    try:
        data = yaml.load(text, Loader=NumberLoader)
    except (yaml.YAMLError, RecursionError):
        raise ValueError(f"malformed YAML in off-wafer network file {where}") from None
    if not isinstance(data, dict):
        raise ValueError(f"malformed off-wafer network file {where}: expected a mapping with keys "
                         f"{', '.join(_KEYS)}")
    unknown = [k for k in data if k not in _KEYS]
    if unknown:
        raise ValueError(f"unknown key {unknown[0]!r} in off-wafer network file {where}; known: {', '.join(_KEYS)} "
                         f"(the number of wafers is --wafers, not npus_count)")
    missing = [k for k in _KEYS[:3] if k not in data]
    if missing:
        raise ValueError(f"missing key {missing[0]!r} in off-wafer network file {where}")

    def one(key, default=None):
        v = data.get(key, default)
        v = v if isinstance(v, (list, tuple)) else [v]
        if len(v) != 1:
            raise ValueError(f"{key} in off-wafer network file {where} must have one entry (one dimension), "
                             f"got {len(v)}")
        return v[0]

    kind = {"switch": "Switch", "ring": "Ring"}.get(str(one("topology")).strip().lower())
    if kind is None:
        raise ValueError(f"topology in off-wafer network file {where} must be Switch or Ring, "
                         f"got {one('topology')!r}")
    inn = one("in_network", False)
    if not isinstance(inn, bool):
        raise ValueError(f"in_network in off-wafer network file {where} must be true or false, got {inn!r}")
    try:
        bw = check_number("bandwidth", one("bandwidth"), from_yaml.MIN_BANDWIDTH_GBPS, from_yaml.MAX_BANDWIDTH_GBPS, "GB/s")
        lat = check_number("latency", one("latency"), 0, from_yaml.MAX_LATENCY_NS, "ns")
        name = os.path.splitext(os.path.basename(where))[0] if where != "<string>" else "off-wafer"
        return OffWaferNetwork(name, kind, bw * GB, lat * NS, inn)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{exc} (in off-wafer network file {where})") from None


@functools.cache
def _bundled(name: str) -> OffWaferNetwork:
    path = DATA_DIR / NETWORKS[name]
    net = parse_off_wafer(path.read_text(encoding="utf-8"), str(path))
    return OffWaferNetwork(name, net.kind, net.port_bw, net.latency, net.in_network)


def off_wafer_network(spec=None) -> OffWaferNetwork:
    """The off-wafer network ``spec``: an :class:`OffWaferNetwork`, a bundled name
    (:data:`NETWORKS`; None: :data:`DEFAULT_NETWORK`) or the path of a YAML file."""
    if isinstance(spec, OffWaferNetwork):
        return spec
    if spec is None:
        return _bundled(DEFAULT_NETWORK)
    if not isinstance(spec, (str, os.PathLike)):
        raise TypeError(f"off-wafer network must be a name or a path, not {type(spec).__name__} {spec!r}")
    s = os.fspath(spec)
    if s.strip().lower() in NETWORKS:
        return _bundled(s.strip().lower())
    if not s.endswith((".yml", ".yaml")):
        raise ValueError(f"unknown off-wafer network {s!r}; known: {', '.join(NETWORKS)} or a .yml file")
    problem = input_problem(s, from_yaml.MAX_FILE_BYTES)
    if problem == "no such file":
        raise ValueError(f"off-wafer network file {s!r} not found")
    if problem:
        raise ValueError(f"cannot read off-wafer network file {s!r}: {problem}")
    return parse_off_wafer(decode_text(read_input(s, "off-wafer network file", from_yaml.MAX_FILE_BYTES),
                                       f"off-wafer network file {s!r}"), s)


@dataclass(frozen=True)
class OffWaferLevel:
    """W wafers on ``network``, each with ``io_count`` controllers of ``io_bw`` B/s."""

    wafers: int
    network: OffWaferNetwork
    io_count: int = P.IO_COUNT
    io_bw: float = P.IO_BW

    def __post_init__(self):
        check_int("wafers", self.wafers, 1, MAX_WAFERS)
        if not isinstance(self.network, OffWaferNetwork):
            raise TypeError(f"network must be an OffWaferNetwork, not {type(self.network).__name__}")
        if self.wafers > 1 and self.io_count < 2:
            raise ValueError(f"{self.wafers} wafers meet through their I/O controllers, and a wafer has "
                             f"{self.io_count}: at least 2 are needed")

    @property
    def port_bw(self) -> float:
        """B/s of one controller into the off-wafer network: the slower of the two ends."""
        return min(self.network.port_bw, self.io_bw)

    @property
    def wafer_bw(self) -> float:
        """B/s one wafer injects into the off-wafer network (and receives), each direction."""
        return self.port_bw * self.io_count

    def link_bw(self) -> float:
        """B/s per direction of one link of the W-node network (a Ring splits the controllers
        between its two neighbours; a ring of two wafers is one link pair)."""
        if self.network.kind == "Ring" and self.wafers > 2:
            return self.port_bw * (self.io_count // 2)
        return self.wafer_bw

    def topology(self):
        """The W-node flow-model network (node = one wafer's controllers)."""
        if self.wafers < 2:
            raise ValueError("one wafer has no off-wafer level")
        spec = from_yaml.NetworkSpec([self.network.kind], [self.wafers], [self.link_bw() / GB], [self.network.latency / NS],
                           in_network=[self.network.in_network])
        return spec.build(f"{self.network.name} x {self.wafers} wafers")

    def exchange_time(self, nbytes: float) -> float:
        """Seconds of an All-Reduce of ``nbytes`` per wafer across the W wafers (flow model)."""
        if self.wafers < 2 or nbytes <= 0:
            return 0.0
        return _exchange_time(self, float(nbytes))

    def bound(self, nbytes: float) -> tuple[float, str]:
        """(seconds, name) of the closed-form bandwidth bound of :meth:`exchange_time`."""
        from .bounds import port_bound

        t = port_bound(self.topology(), "all-reduce", float(nbytes), in_network=self.network.in_network)
        return t, ("in-network: D / B_wafer" if self.network.in_network else "ports: 2(W-1)/W D / B_wafer")

    def describe(self) -> str:
        return (f"{self.wafers} wafers on {self.network.describe()}; {self.io_count} controllers x "
                f"{self.port_bw / GB:g} GB/s = {self.wafer_bw / 1e12:.3g} TB/s per wafer")


@functools.lru_cache(maxsize=4096)
def _exchange_time(level: OffWaferLevel, nbytes: float) -> float:
    from .api import collective_time

    return float(collective_time(_topology(level), "all-reduce", None, nbytes).time)


@functools.lru_cache(maxsize=64)
def _topology(level: OffWaferLevel):
    return level.topology()


__all__ = ["OffWaferNetwork", "OffWaferLevel", "NETWORKS", "DEFAULT_NETWORK", "MAX_WAFERS", "off_wafer_network",
           "parse_off_wafer"]
