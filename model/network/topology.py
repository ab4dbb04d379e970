"""Network topologies by name: the wafer fabrics and generic shapes, built as
:class:`~fred.model.network.graph.Topology` graphs.

* :func:`build_fabric`: the wafer fabrics "mesh" (5 x 4 mesh, X-Y routing, 18 I/O controllers on
  the free edge ports of the edge NPUs), "fred-a" .. "fred-d" (2-level tree: 5 L1 switches x
  4 NPUs, I/O controllers on the L1s, one L2 above; L1<->L2 bandwidth per variant), and the other
  baselines "torus" (5 x 4 torus, the mesh's links and I/O placement) and "switched" /
  "switched-inr" (one crossbar, endpoint or output-port-reducing; :func:`_build_crossbar`).
* Generic topologies for comparison with other tools: :func:`ring`, :func:`mesh2d`,
  :func:`torus2d`, :func:`fully_connected`, :func:`single_switch`, :func:`tree2`, and the
  ASTRA-sim-style multi-dimensional :func:`~fred.model.network.graph.multidim` (the graph, its routing
  and ``multidim`` live in :mod:`fred.model.network.graph`).
* :func:`resolve`: a Topology from a Topology, a fabric name or an ASTRA-sim YAML file
  (:mod:`fred.model.network.from_yaml`).
"""

from __future__ import annotations

import numpy as np

from .graph import Topology, multidim
from .from_yaml import load_topology
from fred.model.system import FabricVariant, WaferParams, canonical_fabric, default_params, variant
from fred.model.system import SwitchTiming


# ---- generic builders --------------------------------------------------------------------------
def ring(n: int, bw: float, latency: float = 0.0, name: str | None = None) -> Topology:
    """Bidirectional ring of ``n`` NPUs, ``bw`` B/s per direction per link."""
    return multidim([("ring", n, bw, latency)], name or f"ring({n})")


def mesh2d(rows: int, cols: int, bw: float, latency: float = 0.0, name: str | None = None, **kw) -> Topology:
    """``rows`` x ``cols`` 2D mesh, row-major NPU ids (id = r*cols + c), X-Y routing."""
    return multidim([("line", cols, bw, latency), ("line", rows, bw, latency)], name or f"mesh({rows}x{cols})", **kw)


def torus2d(rows: int, cols: int, bw: float, latency: float = 0.0, name: str | None = None) -> Topology:
    """``rows`` x ``cols`` 2D torus, row-major NPU ids, dimension-order shortest routing."""
    return multidim([("ring", cols, bw, latency), ("ring", rows, bw, latency)], name or f"torus({rows}x{cols})")


def fully_connected(n: int, bw: float, latency: float = 0.0, name: str | None = None) -> Topology:
    return multidim([("fc", n, bw, latency)], name or f"fully-connected({n})")


def single_switch(n: int, bw: float, latency: float = 0.0, name: str | None = None, *, in_switch: bool = False,
                  timing: SwitchTiming | None = None, fred_switches: bool = False) -> Topology:
    """``n`` NPUs on one switch. ``in_switch``: the switch reduces and multicasts (FRED-like);
    ``fred_switches``: it runs one phase at a time with MP > PP > DP preemption (FRED-SPEC §4)."""
    t = multidim([("switch", n, bw, latency)], name or f"switch({n})", multicast=in_switch,
                 in_network_reduction=in_switch, timing=timing)
    t.fred_switches = bool(fred_switches)
    # a single switch is also a tree: allows tree-style in-switch algorithms
    sw = t.meta["dims"][0][3][0]
    t.meta["parent"] = {i: sw for i in range(n)}
    t.meta["parent"][sw] = None
    t.meta["l1_of"] = [0] * n
    t.meta["l1_nodes"] = [sw]
    t.meta["root"] = sw
    return t


def tree2(l1_count: int, npus_per_l1: int, npu_bw: float, up_bw: float, latency: float = 0.0, *,
          io_count: int = 0, io_bw: float = 0.0, in_switch: bool = False, timing: SwitchTiming | None = None,
          name: str | None = None, fabric: str | None = None, fred_switches: bool = False) -> Topology:
    """2-level tree: ``l1_count`` L1 switches with ``npus_per_l1`` NPUs each, one L2 above.

    ``fred_switches``: the switches run one phase at a time with MP > PP > DP preemption.
    NPU i hangs off L1 ``i // npus_per_l1`` with ``npu_bw`` per direction; each L1<->L2 link has
    ``up_bw`` per direction; I/O controller k attaches to L1 ``k % l1_count`` with ``io_bw``.
    """
    for nm, v in (("l1_count", l1_count), ("npus_per_l1", npus_per_l1)):
        if not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"tree {nm} must be a positive integer, got {v!r}")
    topo = Topology(name or f"tree({l1_count}x{npus_per_l1})", multicast=in_switch,
                    in_network_reduction=in_switch, timing=timing, fabric=fabric, fred_switches=fred_switches)
    n = l1_count * npus_per_l1
    for i in range(n):
        topo.add_node("npu", f"npu{i}")
    l1s = [topo.add_node("switch", f"L1.{j}") for j in range(l1_count)]
    parent = {}
    if l1_count > 1:
        l2 = topo.add_node("switch", "L2")
        parent[l2] = None
        for s in l1s:
            topo.add_link(s, l2, up_bw, latency)
            parent[s] = l2
        root = l2
    else:
        parent[l1s[0]] = None
        root = l1s[0]
    for i in range(n):
        topo.add_link(i, l1s[i // npus_per_l1], npu_bw, latency)
        parent[i] = l1s[i // npus_per_l1]
    io_attach = {}
    for k in range(io_count):
        io = topo.add_node("io", f"io{k}")
        s = l1s[k % l1_count]
        topo.add_link(io, s, io_bw, latency)
        parent[io] = s
        io_attach[io] = s
    topo.meta.update(parent=parent, l1_of=[i // npus_per_l1 for i in range(n)], l1_nodes=l1s, root=root,
                     io_attach=io_attach, npus_per_l1=npus_per_l1)
    topo.routing = "tree"
    return topo


# ---- the wafer fabrics -------------------------------------------------------------------------
def build_fabric(name: str, params: WaferParams | None = None) -> Topology:
    """The wafer fabric ``name`` ("mesh", "fred-a" .. "fred-d") with ``params`` (default set)."""
    p = params or default_params()
    v: FabricVariant = variant(name)
    if v.kind in ("mesh", "torus"):
        return _build_mesh(p, v)
    if v.kind == "switch":
        return _build_crossbar(p, v)
    if p.npus % p.npus_per_l1:
        raise ValueError(f"{p.npus} NPUs do not split into L1 switches of {p.npus_per_l1}")
    topo = tree2(p.l1_count, p.npus_per_l1, p.npu_net_bw, v.l1_l2_bw, p.link_latency, io_count=p.io_count,
                 io_bw=p.io_bw, in_switch=v.in_switch, timing=p.switch, name=v.display, fabric=v.name,
                 fred_switches=True)
    topo.meta["variant"] = v
    topo.meta["params"] = p
    topo.link_efficiency = p.link_efficiency
    # a store-and-forward switch takes a whole packet in before forwarding it; a cut-through one
    # (the RTL's, timing files of schema 3) forwards once the head is in: no extra term
    topo.store_forward_bytes = 0.0 if p.switch.cut_through else p.packet_wire_bytes
    return topo


def _build_mesh(p: WaferParams, v: FabricVariant) -> Topology:
    if p.mesh_rows * p.mesh_cols != p.npus:
        raise ValueError(f"mesh {p.mesh_rows} x {p.mesh_cols} does not hold {p.npus} NPUs")
    # the torus: the mesh's rows and columns closed into rings (a folded torus on the wafer, every
    # link two NPU pitches long: docs/network.md "Other wafer fabrics"), the same 750 GB/s links
    kind = "ring" if v.kind == "torus" else "line"
    topo = multidim([(kind, p.mesh_cols, p.mesh_link_bw, p.link_latency),
                     (kind, p.mesh_rows, p.mesh_link_bw, p.link_latency)], v.display,
                    multicast=v.multicast, in_network_reduction=v.in_switch, timing=p.switch)
    topo.fabric = v.name
    # free edge ports, in row-major NPU order: north, south, west, east (on the torus the same NPUs
    # at the wafer's edge, whose I/O PHYs sit on the edge shoreline beside the wraparound links)
    free = []
    R, C = p.mesh_rows, p.mesh_cols
    for r in range(R):
        for c in range(C):
            nid = r * C + c
            for port, edge in (("N", r == 0), ("S", r == R - 1), ("W", c == 0), ("E", c == C - 1)):
                if edge:
                    free.append((nid, port))
    attach, ports = {}, {}
    for k in range(p.io_count):
        npu, port = free[k % len(free)] if free else (0, "N")
        io = topo.add_node("io", f"io{k}.{port}{npu}")
        topo.add_link(io, npu, p.io_bw, p.link_latency)
        attach[io] = npu
        ports[io] = port
    topo.meta["io_attach"] = attach
    topo.meta["io_port"] = ports
    topo.meta["grid"] = (R, C)
    topo.meta["variant"] = v
    topo.meta["params"] = p
    topo.link_efficiency = p.link_efficiency
    return topo


#: ours: bandwidth of a crossbar's path into one output port, in units of that port's bandwidth
#: (1: the crossbar's internal paths are as wide as its ports, the budget FRED's fabric runs at;
#: output-side reduction of P inputs at line rate needs P - 1, which the project's crossbar RTL
#: builds at 1.6-1.9x FRED's cells: README "Output-port-reducing crossbar vs FRED")
XBAR_OUTPUT_SPEEDUP = 1.0


def _build_crossbar(p: WaferParams, v: FabricVariant) -> Topology:
    """One crossbar: every NPU (``npu_net_bw``) and I/O controller (``io_bw``) on a port of its own.

    Each port is a node of its own between the wire and the crossbar: the wire (both directions),
    the port's path into the crossbar (its bandwidth) and the crossbar's path into the port
    (:data:`XBAR_OUTPUT_SPEEDUP` x its bandwidth). With ``v.in_switch`` the switch reduces **at
    the output port** (SHARP/NVLS-like, :mod:`fred.model.collectives.output_reduce`): every input's stream
    crosses the crossbar into the port that adds them, so a P-input Reduce loads that path with
    P - 1 streams and an All-Reduce with two (FRED-SPEC §1). A path crosses three switch nodes
    (port, crossbar, port), each with the switch timing's traversal latency, as a FRED path
    NPU-L1-L2-L1-NPU does."""
    topo = Topology(v.display, multicast=v.multicast, in_network_reduction=False, timing=p.switch, fabric=v.name)
    n = p.npus
    for i in range(n):
        topo.add_node("npu", f"npu{i}")
    x = topo.add_node("switch", "xbar")
    parent = {x: None}
    out = {}

    def port(node, bw, label):
        op = topo.add_node("switch", f"port.{label}")
        topo.add_link(node, op, bw, p.link_latency)
        topo.add_link(op, x, bw, 0.0, both=False)
        topo.add_link(x, op, bw * XBAR_OUTPUT_SPEEDUP, 0.0, both=False)
        parent[node], parent[op] = op, x
        out[node] = op

    for i in range(n):
        port(i, p.npu_net_bw, f"npu{i}")
    for k in range(p.io_count):
        port(topo.add_node("io", f"io{k}"), p.io_bw, f"io{k}")
    topo.meta.update(parent=parent, l1_of=[0] * n, l1_nodes=[x], root=x, out_port=out,
                     output_reduce=bool(v.in_switch), variant=v, params=p)
    topo.routing = "tree"
    topo.link_efficiency = p.link_efficiency
    topo.store_forward_bytes = 0.0 if p.switch.cut_through else p.packet_wire_bytes
    return topo


def resolve(topo_or_name, params: WaferParams | None = None) -> Topology:
    """A Topology from a Topology, a fabric name, or a path to an ASTRA-sim YAML file."""
    if isinstance(topo_or_name, Topology):
        return topo_or_name
    s = str(topo_or_name)
    if s.endswith((".yml", ".yaml")):
        return load_topology(s)
    canonical_fabric(s)
    return build_fabric(s, params)
