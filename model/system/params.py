"""Physical parameters of the wafer network model, as plain data.

Every constant is defined exactly once, with its source; the wafer's are here, the two groups
that belong to one mechanism live with it and are imported here:

* the packet format sizes (FRED-SPEC §4): :mod:`fred.model.system.packets`;
* the switch timing fallback figures: :mod:`fred.model.system.timing` (with :class:`SwitchTiming`).

Sources:

* ``FRED-SPEC §N`` -- the project's fact sheet (``../shared/FRED-SPEC.md`` beside the checkout), i.e. the paper;
* ``ours`` -- the paper is silent and this project decides (documented in docs/network.md).

Units: bytes, seconds, bytes/second, hertz. ``GB = 1e9`` and ``TB = 1e12`` bytes (decimal),
``GiB = 2**30`` bytes.

The switch timing (:class:`SwitchTiming`) is a single field of :class:`WaferParams`. By default
it is read from the timing file measured from the RTL that ships inside the package
(``fred/contract/data/timing-default.json``, written by ``fred characterize``); another file::

    from fred.contract.timing import load_timing
    from fred.model.system.timing import switch_timing
    p = dataclasses.replace(default_params(), switch=switch_timing(load_timing("build/fred-timing.json")))
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field

from .bit_errors import goodput_at, max_bit_error_rate, packet_error
from .packets import ACK_EVERY, FLIT_BYTES, PACKET_BYTES, data_packet_flits, link_efficiency, wire_bits
from .timing import SwitchTiming, switch_timing

# ---- units -----------------------------------------------------------------------------------
KB = 1e3
MB = 1e6
GB = 1e9
TB = 1e12
KiB = 2**10
MiB = 2**20
GiB = 2**30
NS = 1e-9
US = 1e-6

# ---- the documented default set (each constant once, with its source) -------------------------
NPU_COUNT = 20                    # FRED-SPEC §5: 20 NPUs per wafer
MESH_ROWS = 5                     # FRED-SPEC §5: 5 x 4 mesh; ours: 5 rows of 4 NPUs, row-major ids
MESH_COLS = 4                     #   (so NPUs 4k..4k+3 form one mesh row *and* one L1 switch)
NPU_NET_BW = 3 * TB               # FRED-SPEC §5: 3 TB/s send + 3 TB/s receive per NPU
NPU_HBM_BW = 3 * TB               # FRED-SPEC §5: 3 TB/s HBM per NPU
MESH_LINK_BW = 750 * GB           # FRED-SPEC §5: 750 GB/s per NPU-NPU mesh link (3 TB/s / 4)
IO_COUNT = 18                     # FRED-SPEC §5: 18 I/O controllers to off-wafer memory
IO_BW = 128 * GB                  # FRED-SPEC §5: 128 GB/s each
LINK_LATENCY = 20 * NS            # FRED-SPEC §5 (reconstructed): wafer link latency ~20 ns
NPUS_PER_L1 = 4                   # FRED-SPEC §5: every 4 NPUs hang off one L1 switch (5 L1s)
L1_L2_BW_LOW = 1.5 * TB           # FRED-SPEC §5: Fred-A/B L1<->L2 bandwidth per L1
L1_L2_BW_HIGH = 12 * TB           # FRED-SPEC §5: Fred-C/D L1<->L2 bandwidth per L1
# ours: the 18 I/O controllers are spread over the 5 L1 switches as evenly as possible (4,4,4,3,3)
# and, on the mesh, one per free edge port of the edge NPUs (corner NPUs have two free ports:
# 4 corners x 2 + 10 other edge NPUs x 1 = 18 = 2 * (5 + 4)).

# FRED-SPEC §4: a FRED switch runs one phase at a time; a higher-priority phase preempts at packet
# boundaries, MP > PP > DP (one data VC each). Flow-simulator priority classes (higher first):
VC_PRIORITY = {"mp": 2, "pp": 1, "dp": 0}
# ours: weight streaming in, gradients streaming out, the input minibatch and activation offload/reload
# (fred.model.workload.memory) travel on the DP VC
# (the lowest): they feed the DP group's members and are the least latency-critical. The all-to-alls
# of expert parallelism (MoE token dispatch and combine) travel on the MP VC: like the MP
# All-Reduces they sit between a layer's compute and the next, on the critical path.
TRAFFIC_VC = {"mp": "mp", "pp": "pp", "dp": "dp", "stream": "dp", "input": "dp", "offload": "dp", "ep": "mp"}


@functools.cache
def _measured_switch() -> SwitchTiming:
    """The switch timing measured from the RTL: the embedded default timing file."""
    return switch_timing()


@dataclass(frozen=True)
class WaferParams:
    """One wafer: NPUs, links, I/O controllers and switch timing (defaults = FRED-SPEC §5)."""

    npus: int = NPU_COUNT
    mesh_rows: int = MESH_ROWS
    mesh_cols: int = MESH_COLS
    npu_net_bw: float = NPU_NET_BW          # per NPU, each direction (NPU <-> L1 link on FRED)
    hbm_bw: float = NPU_HBM_BW
    mesh_link_bw: float = MESH_LINK_BW      # per mesh link, each direction
    io_count: int = IO_COUNT
    io_bw: float = IO_BW                    # per I/O controller link, each direction
    link_latency: float = LINK_LATENCY      # per wafer link hop
    npus_per_l1: int = NPUS_PER_L1
    switch: SwitchTiming = field(default_factory=lambda: _measured_switch())
    packet_bytes: int = PACKET_BYTES        # payload per data packet
    flit_bytes: int = FLIT_BYTES
    ack_every: int = ACK_EVERY              # data packets per cumulative ACK
    #: bit-error rate of every wafer link (None: error-free links, no derating); the links' payload
    #: share is derated by the Go-Back-N goodput the switch RTL measured (fred.model.system.bit_errors)
    bit_error_rate: float | None = None

    def __post_init__(self):
        for name in ("npus", "mesh_rows", "mesh_cols", "io_count", "npus_per_l1"):
            v = getattr(self, name)
            if not (isinstance(v, int) and v > 0) and not (name == "io_count" and v == 0):
                raise ValueError(f"WaferParams.{name} must be a positive integer, got {v!r}")
        for name in ("npu_net_bw", "hbm_bw", "mesh_link_bw", "io_bw"):
            v = getattr(self, name)
            if not v > 0:
                raise ValueError(f"WaferParams.{name} must be > 0, got {v!r}")
        if not self.link_latency >= 0:
            raise ValueError(f"WaferParams.link_latency must be >= 0, got {self.link_latency!r}")
        if self.bit_error_rate is not None and not (
                isinstance(self.bit_error_rate, (int, float)) and not isinstance(self.bit_error_rate, bool)
                and 0 <= self.bit_error_rate < 1):
            raise ValueError(f"WaferParams.bit_error_rate must be in [0, 1), got {self.bit_error_rate!r}")
        self.link_efficiency  # validates the packet sizes (and the bit-error rate against the curve)

    @property
    def packet_wire_bytes(self) -> float:
        """Bytes one data packet occupies on a link (header flit + data flits)."""
        return float(data_packet_flits(self.packet_bytes, self.flit_bytes) * self.flit_bytes)

    @property
    def link_efficiency(self) -> float:
        """Payload share of a link's bandwidth under the packet format (:mod:`fred.model.system.packets`),
        times the Go-Back-N goodput at :attr:`bit_error_rate` (:attr:`bit_error_goodput`)."""
        return link_efficiency(self.packet_bytes, self.flit_bytes, self.ack_every) * self.bit_error_goodput

    @property
    def bit_error_goodput(self) -> float:
        """Go-Back-N goodput at :attr:`bit_error_rate` (1.0 without one), from the switch timing's
        measured curve (:mod:`fred.model.system.bit_errors`)."""
        if not self.bit_error_rate:
            return 1.0
        curve = self.switch.fault_curve
        if not curve:
            raise ValueError(f"bit-error rate {self.bit_error_rate:g} needs the measured goodput curve, "
                             f"and the switch timing ({self.switch.source}) has none: use a timing file "
                             f"of schema 4 (`fred characterize`)")
        flits = data_packet_flits(self.packet_bytes, self.flit_bytes)
        bits = wire_bits(self.flit_bytes)
        q = packet_error(self.bit_error_rate, bits, flits)
        if q > curve[-1][0]:
            reach = max_bit_error_rate(curve, bits, flits)
            raise ValueError(f"bit-error-rate {self.bit_error_rate:g} is beyond the goodput curve measured "
                             f"on the switch RTL (packet error {q:.3g} > {curve[-1][0]:.3g}; it covers "
                             f"bit-error rates up to {reach:.3g})")
        return goodput_at(curve, q)

    @property
    def l1_count(self) -> int:
        return -(-self.npus // self.npus_per_l1)

    def replace(self, **changes) -> "WaferParams":
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True)
class FabricVariant:
    """A wafer fabric choice (FRED-SPEC §5 table).

    * ``kind``: "mesh" (5x4 2D mesh, X-Y routing), "torus" (5x4 2D torus at the mesh's link
      budget, shortest-direction dimension-order routing), "tree" (FRED 2-level tree) or "switch"
      (one crossbar of the NPUs' port bandwidth; docs/network.md "Other wafer fabrics");
    * ``l1_l2_bw``: L1<->L2 bandwidth per L1, each direction (tree only);
    * ``in_switch``: switches reduce and multicast (in-switch collectives);
    * ``multicast``: the network can replicate a stream (tree: = in_switch; mesh: ours, the NPU
      routers replicate, which FRED-SPEC §6's edge-I/O broadcast reasoning assumes);
    * ``allreduce``: default All-Reduce algorithm for wafer-wide groups.
    """

    name: str
    kind: str
    l1_l2_bw: float | None
    in_switch: bool
    multicast: bool
    allreduce: str
    bisection: float
    source: str

    @property
    def display(self) -> str:
        return {"mesh": "Mesh", "fred-a": "Fred-A", "fred-b": "Fred-B", "fred-c": "Fred-C", "fred-d": "Fred-D",
                "torus": "Torus", "switched": "Xbar", "switched-inr": "XbarINR"}.get(self.name, self.name)


VARIANTS: dict[str, FabricVariant] = {
    "mesh": FabricVariant("mesh", "mesh", None, False, True, "hier2d", 5 * MESH_LINK_BW,
                          "FRED-SPEC §5 baseline: 5x4 mesh, 750 GB/s links, X-Y routing, bisection 3.75 TB/s"),
    "fred-a": FabricVariant("fred-a", "tree", L1_L2_BW_LOW, False, False, "hier-ring", 3.75 * TB,
                            "FRED-SPEC §5: Fred-A, 1.5 TB/s L1<->L2, no in-switch collectives"),
    "fred-b": FabricVariant("fred-b", "tree", L1_L2_BW_LOW, True, True, "in-switch", 3.75 * TB,
                            "FRED-SPEC §5: Fred-B, 1.5 TB/s L1<->L2, in-switch collectives"),
    "fred-c": FabricVariant("fred-c", "tree", L1_L2_BW_HIGH, False, False, "hier-ring", 30 * TB,
                            "FRED-SPEC §5: Fred-C, 12 TB/s L1<->L2, no in-switch collectives"),
    "fred-d": FabricVariant("fred-d", "tree", L1_L2_BW_HIGH, True, True, "in-switch", 30 * TB,
                            "FRED-SPEC §5: Fred-D, 12 TB/s L1<->L2, in-switch reduce L1->L2 + broadcast down"),
    # ours (docs/network.md "Other wafer fabrics"): the baselines a reviewer would propose, each at
    # the mesh's per-NPU budget (3 TB/s send + 3 TB/s receive), I/O controllers as on the mesh
    "torus": FabricVariant("torus", "torus", None, False, True, "hier2d", 10 * MESH_LINK_BW,
                           "ours: 5x4 2D torus (folded, wraparound links), 4 x 750 GB/s per NPU, bisection 7.5 TB/s"),
    "switched": FabricVariant("switched", "switch", None, False, False, "ring", NPU_COUNT // 2 * NPU_NET_BW,
                              "ours: one crossbar, 3 TB/s per NPU port, endpoint collectives, bisection 30 TB/s"),
    "switched-inr": FabricVariant("switched-inr", "switch", None, True, True, "in-switch", NPU_COUNT // 2 * NPU_NET_BW,
                                  "ours: one crossbar, 3 TB/s per NPU port, reduction at the output port "
                                  "(SHARP/NVLS-like) at line rate, multicast"),
}

FABRICS = tuple(VARIANTS)

_ALIASES = {"fred_a": "fred-a", "freda": "fred-a", "a": "fred-a", "fred_b": "fred-b", "fredb": "fred-b", "b": "fred-b",
            "fred_c": "fred-c", "fredc": "fred-c", "c": "fred-c", "fred_d": "fred-d", "fredd": "fred-d", "d": "fred-d",
            "2d-mesh": "mesh", "mesh2d": "mesh", "2d-torus": "torus", "torus2d": "torus", "xbar": "switched",
            "crossbar": "switched", "switched_inr": "switched-inr", "xbar-inr": "switched-inr"}


def canonical_fabric(name: str) -> str:
    """Canonical fabric name ("Fred-C" -> "fred-c"); ValueError naming it if unknown."""
    key = str(name).strip().lower()
    key = _ALIASES.get(key, key)
    if key not in VARIANTS:
        raise ValueError(f"unknown fabric {name!r}; known fabrics: {', '.join(FABRICS)}")
    return key


def variant(name: str) -> FabricVariant:
    """The :class:`FabricVariant` called ``name`` (case-insensitive; "Fred-D" works)."""
    return VARIANTS[canonical_fabric(name)]


def default_params() -> WaferParams:
    """The one documented default parameter set (FRED-SPEC §5 plus our documented choices)."""
    return WaferParams()


#: name, value, unit, source -- for docs and `--json` output
def parameter_table(params: WaferParams | None = None) -> list[tuple[str, float | str, str, str]]:
    p = params or default_params()
    return [
        ("NPUs per wafer", p.npus, "", "FRED-SPEC §5"),
        ("mesh shape (rows x cols)", f"{p.mesh_rows} x {p.mesh_cols}", "", "FRED-SPEC §5; row-major ids: ours"),
        ("NPU network send = receive", p.npu_net_bw / TB, "TB/s", "FRED-SPEC §5"),
        ("NPU HBM", p.hbm_bw / TB, "TB/s", "FRED-SPEC §5"),
        ("mesh link (each direction)", p.mesh_link_bw / GB, "GB/s", "FRED-SPEC §5"),
        ("I/O controllers", p.io_count, "", "FRED-SPEC §5"),
        ("I/O controller bandwidth", p.io_bw / GB, "GB/s", "FRED-SPEC §5"),
        ("wafer link latency", p.link_latency / NS, "ns", "FRED-SPEC §5 (reconstructed)"),
        ("NPUs per L1 switch", p.npus_per_l1, "", "FRED-SPEC §5"),
        ("L1<->L2 per L1, Fred-A/B", L1_L2_BW_LOW / TB, "TB/s", "FRED-SPEC §5"),
        ("L1<->L2 per L1, Fred-C/D", L1_L2_BW_HIGH / TB, "TB/s", "FRED-SPEC §5"),
        ("data packet payload", p.packet_bytes / KiB, "KiB", "FRED-SPEC §4"),
        ("flit", p.flit_bytes, "B", "FRED-SPEC §4"),
        ("data packets per ACK", p.ack_every, "", "FRED-SPEC §4 (Go-Back-N)"),
        ("link payload share", round(p.link_efficiency, 4), "", "ours: header flit of its own (fred.contract.packet) + ACKs"
         + (f", x {p.bit_error_goodput:.6g} Go-Back-N goodput at bit-error rate {p.bit_error_rate:g} "
            "(measured on the switch RTL)" if p.bit_error_rate else "")),
        ("switch traversal latency", p.switch.latency_cycles, "cycles", p.switch.source),
        ("switch clock", p.switch.clock_hz / 1e9, "GHz", p.switch.source),
        ("in-switch collective rate", p.switch.beats_per_cycle_per_port, "beats/cycle/port", p.switch.source),
    ]
