"""The network as a graph: :class:`Topology` (nodes, directed links, routing) and the
multi-dimensional grid builder :func:`multidim`, whose dimension table the grid routing reads.

* :class:`Topology`: nodes of kind "npu", "switch" or "io" (NPUs are always nodes
  ``0 .. npus-1``, so NPU ids are node ids), directed links with bandwidth (B/s) and latency (s),
  deterministic routing, capabilities (``multicast``, ``in_network_reduction``) and the switch
  timing used for per-switch traversal latency.
* :func:`multidim`: the ASTRA-sim-style multi-dimensional topology (``Ring``/``Switch``/
  ``FullyConnected`` per dimension; see :mod:`fred.model.network.from_yaml`); the generic shapes and
  the wafer fabrics built from it are in :mod:`fred.model.network.topology`.
* :func:`route`: the path (list of link ids) from one node to another.

Routing: dimension-order for grids (dimension 0, i.e. X = column, first; shortest direction
on rings, ties going + unless the order asks for -), up-to-the-common-ancestor-and-down for trees, BFS shortest path for
anything built by hand.
"""

from __future__ import annotations

import hashlib
from collections import deque

import numpy as np

from fred.model.system import ZERO_SWITCH_TIMING, SwitchTiming

NODE_KINDS = ("npu", "switch", "io")


class Topology:
    """A directed graph of links. Build with :meth:`add_node` / :meth:`add_link` (NPUs first)."""

    def __init__(self, name: str, *, multicast: bool = False, in_network_reduction: bool = False,
                 timing: SwitchTiming | None = None, fabric: str | None = None, fred_switches: bool = False):
        self.name = name
        self.fabric = fabric                  # "mesh", "fred-a", ... for the wafer fabrics
        # FRED switches (FRED-SPEC §4): each switch runs one phase at a time, MP > PP > DP with
        # preemption; the flow simulator then time-shares every switch between priority classes
        self.fred_switches = bool(fred_switches)
        # payload share of every link's bandwidth (packet headers and ACKs take the rest);
        # the wafer fabrics set it from the packet format (fred.model.system.packets), generic ones 1
        self.link_efficiency = 1.0
        # bytes a switch takes in before it forwards a packet: a store-and-forward switch (timing
        # files before schema 3) commits a whole packet first, so each switch hop adds that
        # packet's time on the incoming link; 0 = cut-through (the FRED switch RTL, generic
        # topologies)
        self.store_forward_bytes = 0.0
        self.multicast = multicast
        self.in_network_reduction = in_network_reduction
        self.timing = timing if timing is not None else ZERO_SWITCH_TIMING
        self.kinds: list[str] = []
        self.names: list[str] = []
        self._src: list[int] = []
        self._dst: list[int] = []
        self._bw: list[float] = []
        self._lat: list[float] = []
        self._link_of: dict[tuple[int, int], int] = {}
        self._adj: list[list[int]] = []
        self.meta: dict = {}
        self.routing = "shortest"             # "grid", "tree" or "shortest"
        self.io_nodes: list[int] = []
        self._route_cache: dict[tuple[int, int], tuple[tuple[int, ...], tuple[int, ...]]] = {}
        self._arrays = None
        self._n_npu = 0

    # ---- construction ------------------------------------------------------------------------
    def add_node(self, kind: str, name: str | None = None) -> int:
        if kind not in NODE_KINDS:
            raise ValueError(f"unknown node kind {kind!r}; known: {', '.join(NODE_KINDS)}")
        if kind == "npu" and any(k != "npu" for k in self.kinds):
            raise ValueError("add all NPUs before switches and I/O controllers (NPU ids are node ids)")
        nid = len(self.kinds)
        if kind == "npu":
            self._n_npu += 1
        self.kinds.append(kind)
        self.names.append(name or f"{kind}{nid}")
        self._adj.append([])
        if kind == "io":
            self.io_nodes.append(nid)
        self._arrays = None
        return nid

    def add_link(self, a: int, b: int, bw: float, latency: float, both: bool = True) -> int:
        """Add a directed link a->b (and b->a if ``both``); returns the a->b link id."""
        if not bw > 0:
            raise ValueError(f"link {a}->{b}: bandwidth must be > 0, got {bw!r}")
        if not latency >= 0:
            raise ValueError(f"link {a}->{b}: latency must be >= 0, got {latency!r}")
        lid = self._add1(a, b, bw, latency)
        if both:
            self._add1(b, a, bw, latency)
        return lid

    def _add1(self, a, b, bw, lat):
        n = len(self.kinds)
        if not (0 <= a < n and 0 <= b < n) or a == b:
            raise ValueError(f"bad link {a}->{b} in topology {self.name!r} with {n} nodes")
        if (a, b) in self._link_of:
            raise ValueError(f"duplicate link {a}->{b} in topology {self.name!r}")
        lid = len(self._src)
        self._src.append(a)
        self._dst.append(b)
        self._bw.append(float(bw))
        self._lat.append(float(lat))
        self._link_of[(a, b)] = lid
        self._adj[a].append(b)
        self._arrays = None
        self._route_cache.clear()
        return lid

    # ---- queries -----------------------------------------------------------------------------
    @property
    def num_nodes(self) -> int:
        return len(self.kinds)

    @property
    def num_links(self) -> int:
        return len(self._src)

    @property
    def npus(self) -> int:
        """Number of NPUs (nodes 0 .. npus-1)."""
        return self._n_npu

    def _arr(self):
        if self._arrays is None:
            self._arrays = (np.asarray(self._src, dtype=np.int64), np.asarray(self._dst, dtype=np.int64),
                            np.asarray(self._bw, dtype=float), np.asarray(self._lat, dtype=float),
                            np.asarray([k == "switch" for k in self.kinds], dtype=bool))
        return self._arrays

    @property
    def link_src(self) -> np.ndarray:
        return self._arr()[0]

    @property
    def link_dst(self) -> np.ndarray:
        return self._arr()[1]

    @property
    def link_bw(self) -> np.ndarray:
        return self._arr()[2]

    @property
    def link_latency(self) -> np.ndarray:
        return self._arr()[3]

    @property
    def is_switch(self) -> np.ndarray:
        return self._arr()[4]

    def link(self, a: int, b: int) -> int:
        try:
            return self._link_of[(a, b)]
        except KeyError:
            raise ValueError(f"no link {a}->{b} in topology {self.name!r}") from None

    def link_name(self, lid: int) -> str:
        return f"{self.names[self._src[lid]]}->{self.names[self._dst[lid]]}"

    def links(self):
        """Iterate (link id, src, dst, bandwidth B/s, latency s)."""
        for i in range(self.num_links):
            yield i, self._src[i], self._dst[i], self._bw[i], self._lat[i]

    def check_node(self, n, what="node") -> int:
        try:
            v = int(n)
        except (TypeError, ValueError):
            raise ValueError(f"{what} {n!r} is not an integer") from None
        if v != n or not 0 <= v < self.num_nodes:
            raise ValueError(f"{what} {n!r} outside topology {self.name!r} (nodes 0..{self.num_nodes - 1})")
        return v

    def check_npus(self, group, what="group") -> list[int]:
        """Validate a list of NPU ids; ValueError naming the first bad one."""
        out = []
        seen = set()
        for n in group:
            try:
                v = int(n)
            except (TypeError, ValueError):
                raise ValueError(f"NPU {n!r} in {what} is not an integer") from None
            if v != n or not 0 <= v < self.npus:
                raise ValueError(f"NPU {n!r} in {what} outside topology {self.name!r} (NPUs 0..{self.npus - 1})")
            if v in seen:
                raise ValueError(f"NPU {v} appears twice in {what}")
            seen.add(v)
            out.append(v)
        return out

    def describe(self) -> str:
        kinds = {k: self.kinds.count(k) for k in NODE_KINDS if k in self.kinds}
        return f"{self.name}: " + ", ".join(f"{v} {k}" for k, v in kinds.items()) + f", {self.num_links} directed links"

    # ---- routing -----------------------------------------------------------------------------
    def fingerprint(self) -> str:
        """A digest of everything that defines this topology (nodes, links, routing, timing and
        every other attribute; not the route cache): equal digests, equal topologies. The
        schedule's graph cache (:mod:`fred.model.schedule.tape`) keys on it."""
        h = hashlib.sha256()
        for k in sorted(vars(self)):
            if k not in _NOT_FINGERPRINTED:
                h.update(k.encode())
                h.update(_frozen_repr(getattr(self, k)).encode())
        fp = h.hexdigest()
        # equal topologies share one route cache (routes depend on nothing else): a topology built
        # again for the next estimate finds the routes the last one computed
        shared = _SHARED_ROUTES.setdefault(fp, self._route_cache)
        if shared is not self._route_cache:
            shared.update(self._route_cache)
            self._route_cache = shared
        if len(_SHARED_ROUTES) > _SHARED_ROUTES_MAX:
            _SHARED_ROUTES.pop(next(iter(_SHARED_ROUTES)))
        return fp

    def path_nodes(self, src: int, dst: int, order=None) -> list[int]:
        """Node sequence from src to dst (inclusive)."""
        return list(self._route(src, dst, order)[1])

    def path(self, src: int, dst: int, order=None) -> tuple[int, ...]:
        """Link ids from src to dst. ``order``: dimension order on grids (default (0, 1, ...) = X-Y)."""
        return self._route(src, dst, order)[0]

    def _route(self, src, dst, order=None):
        key = (src, dst) if order is None else (src, dst, tuple(order))
        r = self._route_cache.get(key)
        if r is None:
            src = self.check_node(src, "source")
            dst = self.check_node(dst, "destination")
            if src == dst:
                nodes = [src]
            elif self.routing == "grid":
                nodes = _grid_route(self, src, dst, order)
            elif self.routing == "tree":
                nodes = _tree_route(self, src, dst)
            else:
                nodes = _bfs_route(self, src, dst)
            links = tuple(self.link(a, b) for a, b in zip(nodes, nodes[1:]))
            r = (links, tuple(nodes))
            self._route_cache[key] = r
        return r

    def path_latency(self, src: int, dst: int, timing: SwitchTiming | None = None, order=None) -> float:
        """Sum of link latencies plus, per switch on the path, the switch traversal latency and
        (``store_forward_bytes`` > 0) the time to take one packet in on the link entering it."""
        links, nodes = self._route(src, dst, order)
        t = timing or self.timing
        sw = [k for k, n in enumerate(nodes[1:-1]) if self.kinds[n] == "switch"]
        lat = float(sum(self._lat[l] for l in links)) + len(sw) * t.latency_s
        if self.store_forward_bytes:
            lat += sum(self.store_forward_bytes / self._bw[links[k]] for k in sw)
        return lat


#: Topology attributes derived from the others (caches), left out of its fingerprint
_NOT_FINGERPRINTED = ("_route_cache", "_arrays", "_link_of", "_adj")
#: route caches by topology fingerprint (:meth:`Topology.fingerprint`), the oldest dropped first
_SHARED_ROUTES: dict = {}
_SHARED_ROUTES_MAX = 64


def _frozen_repr(v) -> str:
    """An exact text of ``v`` (numpy arrays in full, floats round-trip)."""
    if isinstance(v, np.ndarray):
        return f"ndarray({v.dtype},{v.shape},{v.tobytes().hex()})"
    if isinstance(v, dict):
        return "{" + ",".join(f"{_frozen_repr(k)}:{_frozen_repr(x)}" for k, x in sorted(v.items(), key=lambda kv: repr(kv[0]))) + "}"
    if isinstance(v, (list, tuple)):
        return ("[" if isinstance(v, list) else "(") + ",".join(_frozen_repr(x) for x in v) + ")"
    return repr(v)


def route(topo: Topology, src: int, dst: int) -> list[int]:
    """Path from ``src`` to ``dst`` as a list of link ids (empty when src == dst)."""
    return list(topo.path(src, dst))


# ---- routing helpers ---------------------------------------------------------------------------
def _bfs_route(topo, src, dst):
    prev = {src: None}
    q = deque([src])
    while q:
        u = q.popleft()
        if u == dst:
            break
        for v in topo._adj[u]:
            if v not in prev:
                prev[v] = u
                q.append(v)
    if dst not in prev:
        raise ValueError(f"no path from {topo.names[src]} to {topo.names[dst]} in topology {topo.name!r}")
    nodes = [dst]
    while nodes[-1] != src:
        nodes.append(prev[nodes[-1]])
    return nodes[::-1]


def _tree_route(topo, src, dst):
    parent = topo.meta["parent"]
    up = [src]
    while parent.get(up[-1]) is not None:
        up.append(parent[up[-1]])
    down = [dst]
    while parent.get(down[-1]) is not None:
        down.append(parent[down[-1]])
    anc = {n: i for i, n in enumerate(up)}
    for j, n in enumerate(down):
        if n in anc:
            return up[: anc[n] + 1] + down[:j][::-1]
    raise ValueError(f"no path from {topo.names[src]} to {topo.names[dst]} in topology {topo.name!r}")


def _grid_route(topo, src, dst, order=None):
    """Dimension-order routing over topo.meta["dims"] (``order``: dimension sequence, default
    0, 1, ...; an entry ``~d`` is dimension ``d`` with a tie on a ring -- the destination half
    way round -- going the - way instead of +); I/O nodes hop to/from their NPU."""
    attach = topo.meta.get("io_attach", {})
    prefix, suffix = [], []
    if topo.kinds[src] == "io":
        prefix = [src]
        src = attach[src]
    if topo.kinds[dst] == "io":
        suffix = [dst]
        dst = attach[dst]
    if topo.kinds[src] != "npu" or topo.kinds[dst] != "npu":
        return _bfs_route(topo, prefix[0] if prefix else src, suffix[0] if suffix else dst)
    dims = topo.meta["dims"]
    cur = list(_coords(src, dims))
    goal = _coords(dst, dims)
    nodes = [src]
    seq = range(len(dims)) if order is None else order
    for d in seq:
        minus = d < 0                 # ~d: dimension d, a tie on a ring goes the - way round
        if minus:
            d = ~d
        kind, n, stride, switches = dims[d]
        if cur[d] == goal[d]:
            continue
        base = _index(cur, dims) - cur[d] * stride
        if kind == "ring":
            fwd = (goal[d] - cur[d]) % n
            step = 1 if fwd < n - fwd or (fwd == n - fwd and not minus) else -1
            while cur[d] != goal[d]:
                cur[d] = (cur[d] + step) % n
                nodes.append(base + cur[d] * stride)
        elif kind == "line":
            step = 1 if goal[d] > cur[d] else -1
            while cur[d] != goal[d]:
                cur[d] += step
                nodes.append(base + cur[d] * stride)
        elif kind == "switch":
            line = _line_id(cur, dims, d)
            nodes.append(switches[line])
            cur[d] = goal[d]
            nodes.append(base + cur[d] * stride)
        elif kind == "fc":
            cur[d] = goal[d]
            nodes.append(base + cur[d] * stride)
        else:  # pragma: no cover
            raise ValueError(f"unknown dimension kind {kind!r}")
    return prefix + nodes + suffix


def _coords(nid, dims):
    out = []
    for _, n, _, _ in dims:
        out.append(nid % n)
        nid //= n
    return out


def _index(coords, dims):
    return sum(c * stride for c, (_, _, stride, _) in zip(coords, dims))


def _line_id(coords, dims, d):
    """Index of the line along dimension d through ``coords`` (other coordinates, mixed radix)."""
    lid, mul = 0, 1
    for i, (_, n, _, _) in enumerate(dims):
        if i == d:
            continue
        lid += coords[i] * mul
        mul *= n
    return lid


# ---- the multi-dimensional grid ----------------------------------------------------------------
_DIM_KINDS = {"ring": "ring", "line": "line", "mesh": "line", "switch": "switch", "fc": "fc",
              "fullyconnected": "fc", "fully_connected": "fc", "fully-connected": "fc"}


def multidim(dims, name: str | None = None, *, multicast: bool = False, in_network_reduction: bool = False,
             timing: SwitchTiming | None = None) -> Topology:
    """Multi-dimensional topology, ASTRA-sim style.

    ``dims`` = [(kind, npus, bandwidth B/s, latency s), ...] with kind in ring, line (mesh row
    without wrap-around), switch, fc (fully connected). NPU id = sum(coord_d * stride_d) with
    dimension 0 varying fastest. Every link is bidirectional with the dimension's bandwidth in
    each direction; a Switch dimension has one switch per line, NPU<->switch links.
    """
    spec = _check_dims(dims)
    total = int(np.prod([s[1] for s in spec]))
    name = name or "x".join(f"{k}({n})" for k, n, _, _ in spec)
    topo = Topology(name, multicast=multicast, in_network_reduction=in_network_reduction,
                    timing=timing if timing is not None else ZERO_SWITCH_TIMING)
    for i in range(total):
        topo.add_node("npu", f"npu{i}")
    strides = []
    s = 1
    for _, n, _, _ in spec:
        strides.append(s)
        s *= n
    dims_meta = []
    for d, (kind, n, _, _) in enumerate(spec):
        switches = [_add_line(topo, spec, strides, d, line) for line in range(total // n)]
        dims_meta.append((kind, n, strides[d], switches))
    topo.meta["dims"] = dims_meta
    topo.meta["dim_spec"] = spec
    topo.routing = "grid"
    return topo


def _check_dims(dims) -> list[tuple[str, int, float, float]]:
    """``dims`` of :func:`multidim` as (kind, npus, B/s, s) with canonical kinds; ValueError
    naming the first bad dimension."""
    spec = []
    for i, d in enumerate(dims):
        if len(d) != 4:
            raise ValueError(f"dimension {i}: expected (kind, npus, bandwidth, latency), got {d!r}")
        kind, n, bw, lat = d
        k = _DIM_KINDS.get(str(kind).strip().lower())
        if k is None:
            raise ValueError(f"unknown topology kind {kind!r} in dimension {i}; known: Ring, Switch, FullyConnected")
        if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 1:
            raise ValueError(f"dimension {i}: npus count must be a positive integer, got {n!r}")
        if not (isinstance(bw, (int, float)) and bw > 0):
            raise ValueError(f"dimension {i}: bandwidth must be > 0, got {bw!r}")
        if not (isinstance(lat, (int, float)) and lat >= 0):
            raise ValueError(f"dimension {i}: latency must be >= 0, got {lat!r}")
        spec.append((k, int(n), float(bw), float(lat)))
    if not spec:
        raise ValueError("topology needs at least one dimension")
    return spec


def _add_line(topo, spec, strides, d, line):
    """Links (and the switch) of line number ``line`` along dimension ``d``; returns its switch
    node (None without one)."""
    kind, n, bw, lat = spec[d]
    stride = strides[d]
    # members of this line: enumerate other coordinates in mixed radix order
    rem, coords = line, []
    for i, (_, ni, _, _) in enumerate(spec):
        if i == d:
            coords.append(0)
        else:
            coords.append(rem % ni)
            rem //= ni
    base = sum(c * st for c, st in zip(coords, strides))
    members = [base + j * stride for j in range(n)]
    if n == 1:
        return None
    if kind in ("ring", "line"):
        for j in range(n - 1):
            topo.add_link(members[j], members[j + 1], bw, lat)
        if kind == "ring" and n > 2:
            topo.add_link(members[-1], members[0], bw, lat)
        return None
    if kind == "switch":
        sw = topo.add_node("switch", f"sw{d}.{line}")
        for m in members:
            topo.add_link(m, sw, bw, lat)
        return sw
    for a in range(n):
        for b in range(a + 1, n):
            topo.add_link(members[a], members[b], bw, lat)
    return None
