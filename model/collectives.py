"""Collective algorithms as dependency graphs of flows on a :class:`fred.model.taskgraph.TaskGraph`
(what :meth:`fred.model.flowsim.Sim.collective` calls).

An algorithm is a *plan*: a list of streams ``(fraction of the data, [phase, ...])``. Each
stream's data is cut into ``chunks`` pieces that run the stream's phases in order; piece ``c``
enters phase ``j`` at a node only after piece ``c-1`` has left phase ``j`` there, so pieces
pipeline through the phases (phase j of one piece overlaps phase j+1 of the previous one).
Phases emit flows with per-node dependencies (no global barriers):

* ``Ring``: ring steps over one or many rings at once (Reduce-Scatter or All-Gather; both have
  k-1 steps in which member i sends one k-th of its buffer to member i+1 and then forwards what
  it received). Step s of member i waits for step s-1 of members i-1 (its data) and i (its link).
  ``bidir`` splits the data over two rings in opposite directions.
* ``Unicasts``: a set of concurrent point-to-point flows (scatter, gather, All-to-All, I/O).
* ``Trees``: in-network flows (multicast, reduction, in-switch All-Reduce), concurrent or one
  after another.

Algorithms (``algorithm=``):

* ``ring`` / ``ring2``: logical ring over the group in the order given (``ring2``: two rings in
  opposite directions, half the data each).
* ``hier2d`` (2D mesh/torus, a full rectangle of NPUs): hierarchical 2D, two chunks in opposite
  directions -- half the data does rows then columns (Reduce-Scatter X, All-Reduce Y, All-Gather
  X), the other half columns then rows, so both dimensions' links work at once.
* ``hier-ring`` (FRED tree without in-switch collectives): Reduce-Scatter inside each L1,
  All-Reduce across L1s among NPUs with the same local index, All-Gather inside each L1.
* ``hierarchical`` (multi-dimensional topologies, e.g. from ASTRA-sim YAML): ring per dimension
  in dimension order (Reduce-Scatter up, All-Gather back down).
* ``in-switch`` (switch trees that reduce/multicast): one All-Reduce flow reduced up to the
  lowest common switch and multicast back down; Reduce-Scatter = k Reduce flows one after
  another, All-Gather = k multicasts one after another (FRED-SPEC §3).
* ``direct`` / ``shift`` (All-to-All): all pairs at once / k-1 permutation steps.

Operations (:data:`OPS`) and ``nbytes`` (always per NPU): see :mod:`fred.model.flowsim`.
"""

from __future__ import annotations

import math

import numpy as np

from . import engine
from .parallel_groups import parse_group
from .taskgraph import TaskGraph, check_bytes
from .topology import resolve

OPS = ("all-reduce", "reduce-scatter", "all-gather", "all-to-all", "reduce", "broadcast", "multicast",
       "p2p", "io-broadcast", "io-reduce")
ALGORITHMS = ("ring", "ring2", "hier2d", "hier-ring", "hierarchical", "in-switch", "direct", "shift")

_OP_ALIASES = {
    "allreduce": "all-reduce", "ar": "all-reduce", "reducescatter": "reduce-scatter", "rs": "reduce-scatter",
    "allgather": "all-gather", "ag": "all-gather", "alltoall": "all-to-all", "a2a": "all-to-all",
    "bcast": "broadcast", "mcast": "multicast", "point-to-point": "p2p", "sendrecv": "p2p",
    "iobroadcast": "io-broadcast", "io-bcast": "io-broadcast", "ioreduce": "io-reduce",
    "weight-stream": "io-broadcast", "weights-in": "io-broadcast", "gradients-out": "io-reduce",
}

#: default pieces per stream (ours): enough to pipeline hierarchical phases and I/O streaming
DEFAULT_CHUNKS = {"hier-ring": 4, "hierarchical": 4, "io": 16}


def canonical_op(op: str) -> str:
    k = str(op).strip().lower().replace("_", "-")
    k = _OP_ALIASES.get(k, _OP_ALIASES.get(k.replace("-", ""), k))
    if k not in OPS:
        raise ValueError(f"unknown collective {op!r}; known: {', '.join(OPS)}")
    return k


def canonical_algorithm(alg) -> str | None:
    if alg is None:
        return None
    k = str(alg).strip().lower().replace("_", "-")
    k = {"auto": None, "default": None, "tree": "in-switch", "innetwork": "in-switch", "in-network": "in-switch",
         "inswitch": "in-switch", "hierring": "hier-ring", "hierarchical-ring": "hier-ring", "2d": "hier2d",
         "hier-2d": "hier2d", "ring-bidir": "ring2", "bidir-ring": "ring2", "hier": "hierarchical"}.get(k, k)
    if k is not None and k not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {alg!r}; known: auto, {', '.join(ALGORITHMS)}")
    return k


# ---- topology helpers ---------------------------------------------------------------------------
def _grid_dims(topo):
    dims = topo.meta.get("dims")
    if not dims:
        return None
    return dims


def _is_2d_grid(topo):
    dims = _grid_dims(topo)
    return bool(dims) and len(dims) == 2 and all(d[0] in ("line", "ring") for d in dims) and not topo.meta.get("yaml")


def _rectangle(topo, group):
    """(rows array [R, C]) if group is a full rectangle of a 2D grid, else None."""
    if not _is_2d_grid(topo):
        return None
    (_, nx, _, _), (_, ny, _, _) = topo.meta["dims"]
    xs = sorted({g % nx for g in group})
    ys = sorted({g // nx for g in group})
    if len(xs) * len(ys) != len(group):
        return None
    rect = np.array([[y * nx + x for x in xs] for y in ys], dtype=np.int64)
    if set(rect.ravel().tolist()) != set(group):
        return None
    return rect


def _is_tree(topo):
    return "parent" in topo.meta and topo.routing in ("tree", "grid") and "l1_of" in topo.meta


def _l1_split(topo, group):
    """[n_l1, m] array of the group by L1 switch (equal counts), or None."""
    if not _is_tree(topo):
        return None
    l1 = topo.meta["l1_of"]
    by = {}
    for g in group:
        by.setdefault(l1[g], []).append(g)
    counts = {len(v) for v in by.values()}
    if len(counts) != 1:
        return None
    return np.array([sorted(by[k]) for k in sorted(by)], dtype=np.int64)


def _lca(topo, nodes):
    parent = topo.meta["parent"]
    chains = []
    for n in nodes:
        c = [n]
        while parent.get(c[-1]) is not None:
            c.append(parent[c[-1]])
        chains.append(c)
    common = set(chains[0])
    for c in chains[1:]:
        common &= set(c)
    for n in chains[0]:
        if n in common:
            if topo.kinds[n] != "switch":
                break
            return n
    raise ValueError(f"group {list(nodes)} has no common switch in topology {topo.name!r}")


def _multidim_levels(topo, group):
    """Per-dimension rings for a group covering the whole multi-dim topology, else None."""
    dims = _grid_dims(topo)
    if not dims or set(group) != set(range(topo.npus)):
        return None
    levels = []
    total = topo.npus
    for d, (kind, n, stride, _) in enumerate(dims):
        if n == 1:
            continue
        ids = np.arange(total)
        coord = (ids // stride) % n
        base = ids[coord == 0]
        levels.append(base[:, None] + stride * np.arange(n)[None, :])
    return levels


def default_algorithm(topo, op: str, group) -> str:
    """The fabric's default algorithm for ``op`` over ``group`` (see module docs)."""
    op = canonical_op(op)
    if op == "all-to-all":
        return "direct"
    if op in ("p2p", "multicast"):
        return "direct"
    g = list(group)
    if topo.in_network_reduction and _is_tree(topo):
        return "in-switch"
    if len(g) == topo.npus > 1 and set(g) == set(range(topo.npus)) and _rectangle(topo, g) is not None:
        return "hier2d"
    if _is_tree(topo):
        a = _l1_split(topo, g)
        if a is not None and a.shape[0] > 1 and a.shape[1] > 1:
            return "hier-ring"
        return "ring"
    lv = _multidim_levels(topo, g)
    if lv is not None and len(lv) > 1:
        return "hierarchical"
    return "ring"


# ---- the builder ------------------------------------------------------------------------------
class _B:
    def __init__(self, sim: TaskGraph, lab: int):
        self.sim = sim
        self.lab = lab
        self.N = sim.topo.num_nodes

    def empty(self):
        return np.full(self.N, -1, dtype=np.int64)

    def dep_on_state(self, st, nodes, ids):
        nodes = np.asarray(nodes, dtype=np.int64)
        ids = np.asarray(ids, dtype=np.int64)
        for a in st:
            self.sim.add_edges(a[nodes], ids)


_NEIGH: dict[int, tuple[np.ndarray, np.ndarray]] = {}


def _neighbours(k):
    r = _NEIGH.get(k)
    if r is None:
        a = np.arange(k)
        r = _NEIGH[k] = (np.roll(a, -1), np.roll(a, 1))
    return r


class Ring:
    """Ring steps (RS or AG: same dependency shape) over rings ``[R, k]``; msg = D*scale/k."""

    def __init__(self, rings, scale=1.0, bidir=False, reverse=False):
        self.rings = np.atleast_2d(np.asarray(rings, dtype=np.int64))
        self.scale = scale
        self.bidir = bidir
        self.reverse = reverse

    def __call__(self, b: _B, st, D):
        k = self.rings.shape[1]
        if k < 2:
            return st, []
        if self.bidir:
            s1, e1 = self._one(b, st, D / 2, self.reverse)
            s2, e2 = self._one(b, st, D / 2, not self.reverse)
            return s1 + s2, e1 + e2
        return self._one(b, st, D, self.reverse)

    def _one(self, b, st, D, reverse):
        rings = self.rings[:, ::-1] if reverse else self.rings
        R, k = rings.shape
        S = k - 1
        msg = D * self.scale / k
        nxt, prv = _neighbours(k)
        snd = rings
        rcv = rings[:, nxt]
        pids = b.sim.paths_unicast(snd.ravel(), rcv.ravel())
        ids = b.sim.add_flows(np.tile(pids, S), msg, b.lab).reshape(S, R, k)
        b.dep_on_state(st, snd.ravel(), ids[0].ravel())
        if S > 1:
            later = ids[1:].ravel()
            b.sim.add_edges(ids[:-1][:, :, prv].ravel(), later)
            b.sim.add_edges(ids[:-1].ravel(), later)
        ls = b.empty()
        lr = b.empty()
        ls[snd.ravel()] = ids[-1].ravel()
        lr[rcv.ravel()] = ids[-1].ravel()
        return [ls, lr], [ls]


class Unicasts:
    """Concurrent unicasts src[i] -> dst[i] of D*scale[i] bytes; per-node joins after."""

    def __init__(self, srcs, dsts, scale):
        self.srcs = np.asarray(srcs, dtype=np.int64).ravel()
        self.dsts = np.asarray(dsts, dtype=np.int64).ravel()
        self.scale = np.broadcast_to(np.asarray(scale, dtype=float), self.srcs.shape)

    def __call__(self, b: _B, st, D):
        m = self.srcs != self.dsts
        srcs, dsts, scale = self.srcs[m], self.dsts[m], self.scale[m]
        if srcs.size == 0:
            return st, []
        pids = b.sim.paths_unicast(srcs, dsts)
        ids = b.sim.add_flows(pids, D * scale, b.lab)
        b.dep_on_state(st, srcs, ids)
        nodes = np.unique(np.concatenate([srcs, dsts]))
        joins = b.sim.add_delays(nodes.size, 0.0, b.lab)
        pos = np.searchsorted(nodes, srcs)
        b.sim.add_edges(ids, joins[pos])
        pos = np.searchsorted(nodes, dsts)
        b.sim.add_edges(ids, joins[pos])
        # a node that only receives also keeps its prior state
        a = b.empty()
        a[nodes] = joins
        recv_only = np.setdiff1d(dsts, srcs)
        if recv_only.size:
            b.dep_on_state(st, recv_only, joins[np.searchsorted(nodes, recv_only)])
        return [a], [a]


class Shift:
    """All-to-All as k-1 permutation steps: step s, member i sends D*scale/k to member i+s."""

    def __init__(self, group, scale=1.0):
        self.g = np.asarray(group, dtype=np.int64)
        self.scale = scale

    def __call__(self, b: _B, st, D):
        k = self.g.size
        if k < 2:
            return st, []
        msg = D * self.scale / k
        prev = None
        for s in range(1, k):
            snd = self.g
            rcv = np.roll(self.g, -s)
            ids = b.sim.add_flows(b.sim.paths_unicast(snd, rcv), msg, b.lab)
            if prev is None:
                b.dep_on_state(st, snd, ids)
            else:
                b.sim.add_edges(prev, ids)                    # own previous step
            prev = ids
        a = b.empty()
        a[self.g] = prev
        return [a], [a]


class Trees:
    """In-network flows [(path id, participants)], each D*scale bytes; concurrent or chained."""

    #: pieces of a stream run these flows concurrently (a switch streams them back to back)
    concurrent_chunks = True

    def __init__(self, trees, scale=1.0, chain=False):
        self.trees = trees
        self.scale = scale
        self.chain = chain
        self.nodes = np.unique(np.concatenate([np.asarray(p, dtype=np.int64) for _, p in trees]))
        self.pids = np.asarray([pid for pid, _ in trees], dtype=np.int64)

    def __call__(self, b: _B, st, D):
        nodes, pids = self.nodes, self.pids
        ids = b.sim.add_flows(pids, D * self.scale, b.lab)
        # dependencies: the state of every participant (deduplicated)
        pre = np.unique(np.concatenate([a[nodes] for a in st])) if st else np.zeros(0, dtype=np.int64)
        pre = pre[pre >= 0]
        if self.chain:
            if pre.size:
                b.sim.add_edges(pre, ids[0])
            if ids.size > 1:
                b.sim.add_edges(ids[:-1], ids[1:])
            last = ids[-1]
        else:
            if pre.size:
                b.sim.add_edges(np.repeat(pre, ids.size), np.tile(ids, pre.size))
            if ids.size == 1:
                last = ids[0]
            else:
                last = b.sim.add_delays(1, 0.0, b.lab)[0]
                b.sim.add_edges(ids, last)
        a = b.empty()
        a[nodes] = last
        return [a], [a]


# ---- plans -----------------------------------------------------------------------------------
def _levels_rs_ag(levels, bidir=False, kind="ar"):
    """Phases for a hierarchical RS (kind rs), AG (ag) or AR (ar) over ``levels`` (list of [R,k])."""
    ks = [lv.shape[1] for lv in levels]
    scales = [1.0 / math.prod(ks[:i]) for i in range(len(levels))]
    if kind == "rs":
        return [Ring(lv, s, bidir) for lv, s in zip(levels, scales)]
    if kind == "ag":
        return [Ring(lv, s, bidir) for lv, s in reversed(list(zip(levels, scales)))]
    down = [Ring(lv, s, bidir) for lv, s in zip(levels, scales)]
    up = [Ring(lv, s, bidir) for lv, s in reversed(list(zip(levels, scales)))]
    return down + up


def _ring_order(topo, group):
    if _is_tree(topo) and not topo.meta.get("yaml"):
        l1 = topo.meta["l1_of"]
        return sorted(group, key=lambda g: (l1[g], g))
    return list(group)


def _reduction_plan(topo, alg, group, kind):
    """Plan (list of (fraction, phases)) for kind in rs/ag/ar with an endpoint algorithm."""
    g = list(group)
    if alg in ("ring", "ring2"):
        return [(1.0, _levels_rs_ag([np.array([_ring_order(topo, g)])], alg == "ring2", kind))]
    if alg == "hier2d":
        rect = _rectangle(topo, g)
        if rect is None:
            raise ValueError(f"algorithm 'hier2d' needs a full rectangle of a 2D mesh/torus, not group {_fmt(g)}")
        X, Y = rect, rect.T.copy()
        if X.shape[1] == 1 or Y.shape[1] == 1:
            return [(1.0, _levels_rs_ag([X if X.shape[1] > 1 else Y], False, kind))]
        return [(0.5, _levels_rs_ag([X, Y], False, kind)), (0.5, _levels_rs_ag([Y, X], False, kind))]
    if alg == "hier-ring":
        a = _l1_split(topo, g)
        if a is None:
            raise ValueError(f"algorithm 'hier-ring' needs a FRED tree and equal NPUs per L1 switch, not group {_fmt(g)}")
        levels = [lv for lv in (a, a.T.copy()) if lv.shape[1] > 1]
        if not levels:
            return []
        return [(1.0, _levels_rs_ag(levels, False, kind))]
    if alg == "hierarchical":
        levels = _multidim_levels(topo, g)
        if levels is None:
            raise ValueError(f"algorithm 'hierarchical' needs a multi-dimensional topology and the whole of it as group, not {_fmt(g)}")
        return [(1.0, _levels_rs_ag(levels, False, kind))] if levels else []
    raise ValueError(f"algorithm {alg!r} does not apply to this collective")


def _fmt(g):
    g = list(g)
    return str(g) if len(g) <= 8 else f"[{g[0]}, {g[1]}, ..., {g[-1]}] ({len(g)} NPUs)"


def _prepend(plan, phase_factory):
    return [(f, [phase_factory(f)] + ph) for f, ph in plan] if plan else [(1.0, [phase_factory(1.0)])]


def _append(plan, phase_factory):
    return [(f, ph + [phase_factory(f)]) for f, ph in plan] if plan else [(1.0, [phase_factory(1.0)])]


def build_plan(sim: TaskGraph, op: str, group, algorithm=None, root=None, io=None):
    """(plan, algorithm name, default chunks) for ``op`` over ``group`` on ``sim.topo``."""
    topo = sim.topo
    g = list(group)
    p = len(g)
    alg = canonical_algorithm(algorithm) or default_algorithm(topo, op, g)
    innet = topo.in_network_reduction and _is_tree(topo)

    def need_tree():
        if not innet:
            raise ValueError(f"algorithm 'in-switch' needs switches with in-network reduction; {topo.name!r} has none")

    if op in ("all-reduce", "reduce-scatter", "all-gather"):
        kind = {"all-reduce": "ar", "reduce-scatter": "rs", "all-gather": "ag"}[op]
        if p == 1:
            return [], alg, 1
        if alg == "in-switch":
            need_tree()
            if op == "all-reduce":
                pid = sim.path_allreduce(g, _lca(topo, g))
                return [(1.0, [Trees([(pid, g)])])], alg, 1
            if op == "reduce-scatter":
                trees = [(sim.path_reduce(g, d), g) for d in g]
            else:
                trees = [(sim.path_multicast(s, g), g) for s in g]
            return [(1.0, [Trees(trees, 1.0 / p, chain=True)])], alg, 1
        if alg in ("direct", "shift"):
            raise ValueError(f"algorithm {alg!r} is for all-to-all, not {op}")
        return _reduction_plan(topo, alg, g, kind), alg, DEFAULT_CHUNKS.get(alg, 1)

    if op == "all-to-all":
        if alg not in ("direct", "shift"):
            raise ValueError(f"all-to-all supports algorithms direct and shift, not {alg!r}")
        if alg == "shift":
            return [(1.0, [Shift(g)])], alg, 1
        src = np.repeat(g, p)
        dst = np.tile(g, p)
        return [(1.0, [Unicasts(src, dst, 1.0 / p)])], alg, 1

    if op == "p2p":
        if p < 2:
            raise ValueError(f"p2p needs at least two NPUs (source, destination), got {_fmt(g)}")
        return [(1.0, [Unicasts(g[:-1], g[1:], 1.0)])], "direct", 1

    rt = g[0] if root is None else topo.check_node(root, "root")
    if op in ("reduce", "broadcast") and rt not in g:
        g = [rt] + g
        p = len(g)
    others = [x for x in g if x != rt]

    if op == "multicast":
        if not others:
            return [], "direct", 1
        if topo.multicast:
            return [(1.0, [Trees([(sim.path_multicast(rt, others), g)])])], "multicast", 1
        return [(1.0, [Unicasts([rt] * len(others), others, 1.0)])], "unicast-copies", 1

    if op == "reduce":
        if not others:
            return [], alg, 1
        if alg == "in-switch" or (algorithm is None and innet):
            need_tree()
            return [(1.0, [Trees([(sim.path_reduce(g, rt), g)])])], "in-switch", 1
        ralg = alg if alg not in ("direct", "shift") else "ring"
        plan = _reduction_plan(topo, ralg, g, "rs")
        plan = _append(plan, lambda f: Unicasts(others_arr(g, rt), [rt] * (p - 1), 1.0 / p))
        return plan, ralg + "+gather", DEFAULT_CHUNKS.get(ralg, 1)

    if op == "broadcast":
        if not others:
            return [], alg, 1
        if alg == "in-switch" or (algorithm is None and topo.multicast):
            if not topo.multicast:
                raise ValueError(f"topology {topo.name!r} cannot multicast")
            return [(1.0, [Trees([(sim.path_multicast(rt, others), g)])])], "multicast", 1
        ralg = alg if alg not in ("direct", "shift") else "ring"
        plan = _reduction_plan(topo, ralg, g, "ag")
        plan = _prepend(plan, lambda f: Unicasts([rt] * (p - 1), others_arr(g, rt), 1.0 / p))
        return plan, "scatter+" + ralg, DEFAULT_CHUNKS.get(ralg, 1)

    # I/O controllers
    ios = list(topo.io_nodes) if io is None else [topo.check_node(x, "I/O controller") for x in io]
    if not ios:
        raise ValueError(f"topology {topo.name!r} has no I/O controllers")
    for x in ios:
        if topo.kinds[x] != "io":
            raise ValueError(f"node {x} of {topo.name!r} is not an I/O controller")
    n_io = len(ios)
    grid = topo.routing == "grid" and "io_port" in topo.meta
    if op == "io-broadcast":
        if topo.multicast:
            trees = [(sim.path_multicast(x, g, _io_order(topo, x, False)), [x] + g) for x in ios]
            return [(1.0, [Trees(trees, 1.0 / n_io)])], "io-multicast", DEFAULT_CHUNKS["io"]
        ralg = alg if alg in ("ring", "ring2", "hier2d", "hier-ring", "hierarchical") else "ring"
        plan = _reduction_plan(topo, ralg, g, "ag") if p > 1 else []
        src = np.repeat(ios, p)
        dst = np.tile(g, n_io)
        plan = _prepend(plan, lambda f: Unicasts(src, dst, 1.0 / (p * n_io)))
        return plan, "io-scatter+" + ralg + "-all-gather", DEFAULT_CHUNKS["io"]
    if op == "io-reduce":
        explicit = canonical_algorithm(algorithm)
        if (innet or (grid and topo.multicast)) and explicit not in ("ring", "ring2", "hier-ring", "hier2d", "hierarchical"):
            trees = [(sim.path_reduce(g, x, _io_order(topo, x, True)), g + [x]) for x in ios]
            name = "io-in-switch-reduce" if innet else "io-npu-tree-reduce"
            return [(1.0, [Trees(trees, 1.0 / n_io)])], name, DEFAULT_CHUNKS["io"]
        ralg = alg if alg in ("ring", "ring2", "hier2d", "hier-ring", "hierarchical") else "ring"
        plan = _reduction_plan(topo, ralg, g, "rs") if p > 1 else []
        src = np.repeat(g, n_io)
        dst = np.tile(ios, p)
        plan = _append(plan, lambda f: Unicasts(src, dst, 1.0 / (p * n_io)))
        return plan, ralg + "-reduce-scatter+io-gather", DEFAULT_CHUNKS["io"]
    raise ValueError(f"unknown collective {op!r}")  # pragma: no cover


def _io_order(topo, io, reduce):
    """Dimension order of the mesh I/O trees (ours, after FRED-SPEC §6 / paper Fig. 4): an I/O
    controller on a north/south port first runs down its column then spreads along the rows
    (Y-X); one on a west/east port runs along its row then spreads down the columns (X-Y). The
    hottest link then carries 2N-1 = 9 I/O streams on the 5x4 mesh. Reduction trees are the
    reverse (gradients summed hop by hop by the NPUs on the way out, as in the paper §7.3)."""
    port = topo.meta.get("io_port", {}).get(io)
    if port is None:
        return None
    bcast = (1, 0) if port in ("N", "S") else (0, 1)
    return bcast[::-1] if reduce else bcast


def io_tree_load(topo, groups, reduce=False) -> np.ndarray:
    """Per directed link of ``topo``: how many I/O controllers' line rates it carries when every
    controller streams at its line rate to every group of ``groups`` along the trees of
    ``io-broadcast`` (``reduce``: of ``io-reduce``). Each controller serves every group with an
    equal share of its bytes, so a tree carries 1/len(groups) of one controller's rate; a link's
    load is the sum over the trees that cross it. Needs a fabric that multicasts (the mesh, whose
    NPU routers replicate, or a FRED tree with in-switch collectives)."""
    if not topo.multicast:
        raise ValueError(f"topology {topo.name!r} cannot multicast: its I/O streams are not trees")
    if not topo.io_nodes:
        raise ValueError(f"topology {topo.name!r} has no I/O controllers")
    groups = _normalize_groups(topo, groups)
    graph = TaskGraph(topo)
    trees = np.zeros(topo.num_links, dtype=np.int64)
    for x in topo.io_nodes:
        for g in groups:
            if reduce:
                pid = graph.path_reduce(g, x, _io_order(topo, x, True))
            else:
                pid = graph.path_multicast(x, g, _io_order(topo, x, False))
            trees[graph.path_links(pid)] += 1
    return trees / len(groups)


def io_rate_bound(topo, groups, reduce=False) -> tuple[float, int]:
    """(fraction of the I/O controllers' line rate that the hottest link of ``io_tree_load``
    allows, that link's id): min(1, link bandwidth / (load x I/O bandwidth)) over the links,
    with the I/O bandwidth read off the controllers' own links. The paper's edge-I/O argument
    (FRED-SPEC §6): a broadcast to all 20 NPUs of the 5x4 mesh loads its hottest link with
    2N-1 = 9 streams, 750 / (9 x 128) = 0.65."""
    load = io_tree_load(topo, groups, reduce)
    io_bw = min(float(topo.link_bw[l]) for l in range(topo.num_links)
                if topo.kinds[topo.link_src[l]] == "io" or topo.kinds[topo.link_dst[l]] == "io")
    used = np.flatnonzero(load > 0)
    frac = topo.link_bw[used] / (load[used] * io_bw)
    k = int(np.argmin(frac))
    return float(min(1.0, frac[k])), int(used[k])


def others_arr(g, rt):
    return [x for x in g if x != rt]


def _normalize_groups(topo, group):
    """A list of groups (each a list of NPU ids) from a group or a list of groups."""
    if isinstance(group, (str, bytes)):
        group = parse_group(group, topo.npus)
    group = list(group)
    if not group:
        raise ValueError("empty group")
    if all(isinstance(x, (list, tuple, range, np.ndarray)) for x in group):
        out = [topo.check_npus(list(x), "group") for x in group]
        for x in out:
            if not x:
                raise ValueError("empty group")
        return out
    return [topo.check_npus(group, "group")]


def expand(sim: TaskGraph, op, group, nbytes, deps=(), algorithm=None, chunks=None, label="", root=None, io=None):
    """Add collective ``op`` to ``sim``; returns the TaskId of the whole collective."""
    op = canonical_op(op)
    nb = check_bytes(nbytes)
    if chunks is not None:
        if isinstance(chunks, bool) or not isinstance(chunks, (int, np.integer)) or chunks < 1:
            raise ValueError(f"chunks must be a positive integer, got {chunks!r}")
    groups = _normalize_groups(sim.topo, group)
    dl = sim.check_deps(deps)
    lab = sim.label_id(label or op)
    begin = int(sim.add_delays(1, 0.0, lab)[0])
    if dl:
        sim.add_edges(dl, begin)
    first_task = sim.num_tasks
    first_edge = sim.num_edges
    b = _B(sim, lab)
    cache = sim.plan_cache
    built = []
    for g in groups:
        key = (op, tuple(g), algorithm, root, None if io is None else tuple(io))
        r = cache.get(key)
        if r is None:
            r = cache[key] = build_plan(sim, op, g, algorithm, root=root, io=io)
        built.append(r)
    sim.last_algorithms = [alg for _, alg, _ in built]
    cks = [int(chunks or dc) for _, _, dc in built]
    todo = list(zip(groups, [p for p, _, _ in built], cks))
    if len(todo) > 1 and len(set(cks)) == 1:
        flat = [m for g in groups for m in g]
        if len(flat) == len(set(flat)) and all(p for p in (t[1] for t in todo)):
            # plans are read-only once built: merge a set of groups once per simulation
            mkey = ("merged", op, tuple(tuple(g) for g in groups), algorithm, root,
                    None if io is None else tuple(io))
            if mkey not in cache:
                cache[mkey] = _merge_plans([t[1] for t in todo])
            merged = cache[mkey]
            if merged is not None:
                todo = [(flat, merged, cks[0])]
    for g, plan, c in todo:
        st0 = b.empty()
        st0[g] = begin
        if op.startswith("io-"):
            st0[sim.topo.io_nodes] = begin
        _run_plan(b, plan, [st0], nb, c)
    last_task = sim.num_tasks
    join = int(sim.add_delays(1, 0.0, lab)[0])
    if last_task > first_task:
        pred, succ = sim.edges(first_edge)
        inner = (pred >= first_task) & (succ < last_task) & (succ >= first_task)
        has_succ = np.zeros(last_task - first_task, dtype=bool)
        has_succ[pred[inner] - first_task] = True
        sinks = np.flatnonzero(~has_succ) + first_task
        sim.add_edges(sinks, join)
    else:
        sim.add_edges(begin, join)
    sim.add_span(begin, join)
    return join


def _merge_phase(a, b):
    if type(a) is not type(b):
        return None
    if isinstance(a, Ring):
        if a.rings.shape[1] != b.rings.shape[1] or a.scale != b.scale or a.bidir != b.bidir or a.reverse != b.reverse:
            return None
        return Ring(np.vstack([a.rings, b.rings]), a.scale, a.bidir, a.reverse)
    if isinstance(a, Unicasts):
        m = Unicasts(np.r_[a.srcs, b.srcs], np.r_[a.dsts, b.dsts], np.r_[a.scale, b.scale])
        return m
    if isinstance(a, Trees):
        if a.chain or b.chain or a.scale != b.scale:
            return None
        return Trees(a.trees + b.trees, a.scale)
    return None


def _merge_plans(plans):
    """One plan doing the work of several same-shaped plans over disjoint groups, or None."""
    first = plans[0]
    merged = [(f, list(ph)) for f, ph in first]
    for other in plans[1:]:
        if len(other) != len(merged):
            return None
        for si, ((f, ph), (f2, ph2)) in enumerate(zip(merged, other)):
            if f != f2 or len(ph) != len(ph2):
                return None
            for j, (x, y) in enumerate(zip(ph, ph2)):
                m = _merge_phase(x, y)
                if m is None:
                    return None
                ph[j] = m
    return merged


def _run_plan(b: _B, plan, st0, nbytes, chunks):
    for frac, phases in plan:
        D = nbytes * frac / chunks
        prev = [[] for _ in phases]
        for _c in range(chunks):
            st = st0
            for j, ph in enumerate(phases):
                if getattr(ph, "concurrent_chunks", False):
                    st, _ = ph(b, st, D)
                else:
                    st, sends = ph(b, st + prev[j], D)
                    prev[j] = sends


# ---- convenience ------------------------------------------------------------------------------
class CollectiveResult:
    """Outcome of :func:`collective_time`."""

    def __init__(self, topo, op, groups, nbytes, algorithms, chunks, res, task):
        self.topo = topo
        self.op = op
        self.groups = groups
        self.nbytes = nbytes
        self.algorithms = algorithms
        self.chunks = chunks
        self.result = res
        self.time = float(res.finish[task] - res.start[task])
        members = sorted({m for g in groups for m in g})
        self.members = members
        sent = res.bytes_sent[members]
        recv = res.bytes_received[members]
        self.bytes_sent_per_npu = float(sent.mean())
        self.bytes_sent_max = float(sent.max())
        self.bytes_received_per_npu = float(recv.mean())
        #: per-NPU traffic: the larger of bytes sent and received, averaged over the members
        self.bytes_per_npu = float(np.maximum(sent, recv).mean())
        self.algorithm_bandwidth = nbytes / self.time if self.time > 0 else math.inf
        self.npu_bandwidth = self.bytes_per_npu / self.time if self.time > 0 else math.inf
        self.flows = res.num_flows
        self.events = res.events
        self.timing_source = res.timing_source

    def as_dict(self):
        return {
            "topology": self.topo.name, "op": self.op, "groups": self.groups, "nbytes": self.nbytes,
            "algorithm": self.algorithms[0] if len(set(self.algorithms)) == 1 else self.algorithms,
            "chunks": self.chunks, "time_s": self.time, "bytes_sent_per_npu": self.bytes_sent_per_npu,
            "bytes_sent_max": self.bytes_sent_max, "bytes_received_per_npu": self.bytes_received_per_npu,
            "algorithm_bandwidth_Bps": self.algorithm_bandwidth,
            "npu_effective_bandwidth_Bps": self.npu_bandwidth, "flows": self.flows, "events": self.events,
            "timing_source": self.timing_source,
            "busiest_links": [{"link": n, "utilization": u, "bytes": bb} for n, u, bb in self.result.top_links(3)],
        }


def collective_time(fabric, op, group=None, nbytes=2**30, *, algorithm=None, chunks=None, params=None,
                    timing=None, root=None, io=None) -> CollectiveResult:
    """Simulate one collective (or one per group, all at once) on a fresh network.

    ``fabric``: a Topology, a fabric name ("mesh", "fred-a".."fred-d") or an ASTRA-sim YAML
    path; ``group``: NPU ids, a list of groups, or None for every NPU.
    """
    topo = resolve(fabric, params)
    op = canonical_op(op)
    groups = _normalize_groups(topo, list(range(topo.npus)) if group is None else group)
    graph = TaskGraph(topo, timing)
    t = expand(graph, op, groups, nbytes, algorithm=algorithm, chunks=chunks, root=root, io=io)
    algs = list(graph.last_algorithms)
    res = engine.run(graph)
    return CollectiveResult(topo, op, groups, float(nbytes), algs, chunks, res, t)
