"""Collective algorithms: the names of operations and algorithms, each fabric's default, and the
*plan* of an algorithm (streams of phases, :mod:`fred.model.collectives.phases`) for one group.

Algorithms (``algorithm=``):

* ``ring`` / ``ring2``: logical ring over the group in the order given (``ring2``: two rings in
  opposite directions, half the data each).
* ``hier2d`` (2D mesh/torus, a full rectangle of NPUs): hierarchical 2D, two chunks in opposite
  directions -- half the data does rows then columns (Reduce-Scatter X, All-Reduce Y, All-Gather
  X), the other half columns then rows, so both dimensions' links work at once.
* ``hier-ring`` (FRED tree): Reduce-Scatter inside each L1, All-Reduce across L1s among NPUs
  with the same local index, All-Gather inside each L1, every level a ring.
* ``hier-direct`` (FRED tree; the default there for groups over several L1s with equal NPUs per
  L1): the same levels, each as a direct exchange (every member sends each other member its
  slice at once and adds what it receives; ASTRA-sim's ``direct``). Every link carries the bytes
  it carries under ``hier-ring``, but a level is one step instead of k-1, so a piece pays one hop
  latency per level where the ring pays k-1: with pieces pipelining through the levels the
  L1<->L2 links of Fred-A/B idle less (:mod:`fred.model.collectives.chunking`).
* ``hierarchical`` (multi-dimensional topologies, e.g. from ASTRA-sim YAML): ring per dimension
  in dimension order (Reduce-Scatter up, All-Gather back down).
* ``in-switch`` (switch trees that reduce/multicast): one All-Reduce flow reduced up to the
  lowest common switch and multicast back down; Reduce-Scatter = k Reduce flows one after
  another, All-Gather = k multicasts one after another (FRED-SPEC §3). The default for
  All-Reduce there; for Reduce-Scatter and All-Gather the default is whichever of in-switch and
  the tree's endpoint default has the smaller bandwidth bound (every NPU port moves the whole
  buffer through k flows in turn, where the endpoint algorithms move (k-1)/k of it and keep every
  L1<->L2 link busy: the endpoint one wins on Fred-B and Fred-D).
* ``direct`` / ``shift`` (All-to-All): all pairs at once / k-1 permutation steps.

Each plan says which phases (rings, unicasts, trees) move which share of the data; the
expansion into flows is :func:`fred.model.collectives.api.expand`.
"""

from __future__ import annotations

import math

import numpy as np

from .alltoall import plan_all_to_all
from .multidim import best_algorithm, in_switch_plan, multi_ring_plan
from .phases import Ring, Shift, Trees, Unicasts
from fred.model.network import TaskGraph
from .output_reduce import output_reduce_plan

__all__ = ["OPS", "ALGORITHMS", "DEFAULT_CHUNKS", "canonical_op", "canonical_algorithm", "default_algorithm",
           "build_plan", "io_tree_order"]

OPS = ("all-reduce", "reduce-scatter", "all-gather", "all-to-all", "reduce", "broadcast", "multicast",
       "p2p", "io-broadcast", "io-reduce")
ALGORITHMS = ("ring", "ring2", "hier2d", "hier-ring", "hier-direct", "hierarchical", "multi-ring", "in-switch",
              "direct", "shift")

_OP_ALIASES = {
    "allreduce": "all-reduce", "ar": "all-reduce", "reducescatter": "reduce-scatter", "rs": "reduce-scatter",
    "allgather": "all-gather", "ag": "all-gather", "alltoall": "all-to-all", "a2a": "all-to-all",
    "bcast": "broadcast", "mcast": "multicast", "point-to-point": "p2p", "sendrecv": "p2p",
    "iobroadcast": "io-broadcast", "io-bcast": "io-broadcast", "ioreduce": "io-reduce",
    "weight-stream": "io-broadcast", "weights-in": "io-broadcast", "gradients-out": "io-reduce",
}

#: default pieces per stream (ours): enough to pipeline hierarchical phases and I/O streaming
DEFAULT_CHUNKS = {"hier-ring": 4, "hier-direct": 4, "hierarchical": 4, "multi-ring": 4, "io": 16}


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
         "inswitch": "in-switch", "hierring": "hier-ring", "hierarchical-ring": "hier-ring",
         "hierdirect": "hier-direct", "hierarchical-direct": "hier-direct", "2d": "hier2d",
         "hier-2d": "hier2d", "ring-bidir": "ring2", "bidir-ring": "ring2", "hier": "hierarchical",
         "multiring": "multi-ring", "torus": "multi-ring"}.get(k, k)
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
    if len(g) == topo.npus > 1 and set(g) == set(range(topo.npus)) and _rectangle(topo, g) is not None \
            and not _plain_multidim(topo, g):
        return "hier2d"
    if _is_tree(topo):
        return _tree_endpoint(topo, g)
    lv = _multidim_levels(topo, g)
    if lv is not None and len(lv) > 1:
        return "hierarchical"
    return "ring"


def _tree_endpoint(topo, g) -> str:
    """The endpoint default on a FRED tree: hier-direct over several L1s with equal NPUs per L1
    (more than one each), else a ring."""
    a = _l1_split(topo, g)
    return "hier-direct" if a is not None and a.shape[0] > 1 and a.shape[1] > 1 else "ring"


# ---- plans -----------------------------------------------------------------------------------
def _exchange(rows, scale):
    """A direct exchange inside each row of ``rows`` [R, k]: every member sends every other
    member D*scale/k (its slice) at once."""
    k = rows.shape[1]
    i, j = np.nonzero(~np.eye(k, dtype=bool))
    return Unicasts(rows[:, i].ravel(), rows[:, j].ravel(), scale / k)


def _levels_rs_ag(levels, bidir=False, kind="ar", direct=False):
    """Phases for a hierarchical RS (kind rs), AG (ag) or AR (ar) over ``levels`` (list of [R,k]):
    rings (both directions with ``bidir``) or, with ``direct``, direct exchanges."""
    ks = [lv.shape[1] for lv in levels]
    scales = [1.0 / math.prod(ks[:i]) for i in range(len(levels))]
    down = [_exchange(lv, s) if direct else Ring(lv, s, bidir) for lv, s in zip(levels, scales)]
    up = down[::-1]
    return {"rs": down, "ag": up, "ar": down + up}[kind]


def _ring_order(topo, group):
    if _is_tree(topo) and not topo.meta.get("yaml"):
        l1 = topo.meta["l1_of"]
        return sorted(group, key=lambda g: (l1[g], g))
    return list(group)


def _reduction_plan(sim, alg, group, kind):
    """Plan (list of (fraction, phases)) for kind in rs/ag/ar with an endpoint algorithm."""
    topo = sim.topo
    g = list(group)
    if alg in ("ring", "ring2"):
        return [(1.0, _levels_rs_ag([np.array([_ring_order(topo, g)])], alg == "ring2", kind))]
    if alg == "hier2d":
        if topo.meta.get("yaml"):
            raise ValueError(f"algorithm 'hier2d' does not run on ASTRA-sim YAML networks ({topo.name!r}); "
                             f"use ring, ring2 or hierarchical")
        if not _is_2d_grid(topo):
            raise ValueError(f"algorithm 'hier2d' needs a 2D mesh or torus; {topo.name!r} is not one")
        rect = _rectangle(topo, g)
        if rect is None:
            raise ValueError(f"algorithm 'hier2d' needs a full rectangle of a 2D mesh/torus, not group {_fmt(g)}")
        X, Y = rect, rect.T.copy()
        if X.shape[1] == 1 or Y.shape[1] == 1:
            return [(1.0, _levels_rs_ag([X if X.shape[1] > 1 else Y], False, kind))]
        return [(0.5, _levels_rs_ag([X, Y], False, kind)), (0.5, _levels_rs_ag([Y, X], False, kind))]
    if alg in ("hier-ring", "hier-direct"):
        a = _l1_split(topo, g)
        if a is None:
            raise ValueError(f"algorithm {alg!r} needs a FRED tree and equal NPUs per L1 switch, not group {_fmt(g)}")
        levels = [lv for lv in (a, a.T.copy()) if lv.shape[1] > 1]
        if not levels:
            return []
        return [(1.0, _levels_rs_ag(levels, False, kind, alg == "hier-direct"))]
    if alg == "multi-ring":
        if _multidim_levels(topo, g) is None:
            raise ValueError(f"algorithm 'multi-ring' needs a multi-dimensional topology and the whole of it as group, not {_fmt(g)}")
        return multi_ring_plan(sim, kind)
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
    """(plan, algorithm name, default chunks) for canonical ``op`` over ``group`` on ``sim.topo``
    (``sim`` gives the tree paths; ``algorithm``: a name or None for the fabric default)."""
    topo = sim.topo
    g = list(group)
    if topo.meta.get("output_reduce") and canonical_algorithm(algorithm) in (None, "in-switch"):
        # a crossbar that reduces at its output ports (switched-inr, fred.model.collectives.output_reduce): its
        # own plan, or by default the endpoint one where that has the smaller bandwidth bound
        out = output_reduce_plan(sim, op, g, root, io)
        if out is not None and algorithm is None:
            ep = _build_plan(sim, op, g, None, root, io)
            if ep[0] and best_algorithm(sim, {out[1]: out[0], ep[1]: ep[0]}) == ep[1]:
                return ep
        if out is not None:
            return out
    return _build_plan(sim, op, g, algorithm, root, io)


def _build_plan(sim, op, g, algorithm, root, io):
    topo = sim.topo
    alg = canonical_algorithm(algorithm) or default_algorithm(topo, op, g)
    if op in ("all-reduce", "reduce-scatter", "all-gather"):
        if algorithm is None and _plain_multidim(topo, g):
            alg = _best_multidim(sim, op, g, alg)
        elif algorithm is None and alg == "in-switch" and op != "all-reduce" and _in_network(topo):
            ep = _tree_endpoint(topo, g)
            alg = best_algorithm(sim, {alg: _plan_reduction_op(sim, op, g, alg)[0],
                                       ep: _plan_reduction_op(sim, op, g, ep)[0]})
        return _plan_reduction_op(sim, op, g, alg)
    if op == "all-to-all":
        return plan_all_to_all(topo, g, alg)
    if op == "p2p":
        if len(g) < 2:
            raise ValueError(f"p2p needs at least two NPUs (source, destination), got {_fmt(g)}")
        return [(1.0, [Unicasts(g[:-1], g[1:], 1.0)])], "direct", 1
    rt = g[0] if root is None else topo.check_node(root, "root")
    if op == "multicast":
        return _plan_multicast(sim, g, rt)
    if op == "reduce":
        return _plan_reduce(sim, g, rt, alg, algorithm)
    if op == "broadcast":
        return _plan_broadcast(sim, g, rt, alg, algorithm)
    return _plan_io(sim, op, g, alg, algorithm, io)


def _in_network(topo) -> bool:
    """The topology is a switch tree whose switches reduce and multicast."""
    return topo.in_network_reduction and _is_tree(topo)


def _need_in_network(topo):
    if not _in_network(topo):
        how = ("; mark a Switch dimension with the YAML key in_network (fred collective --in-network-dims)"
               if topo.meta.get("yaml") else "")
        raise ValueError(f"algorithm 'in-switch' needs switches with in-network reduction; {topo.name!r} has none{how}")


def _plan_reduction_op(sim, op, g, alg):
    """All-Reduce, Reduce-Scatter or All-Gather."""
    topo = sim.topo
    p = len(g)
    kind = {"all-reduce": "ar", "reduce-scatter": "rs", "all-gather": "ag"}[op]
    if p == 1:
        return [], alg, 1
    if alg == "in-switch":
        if topo.meta.get("in_network_dims") and not _in_network(topo):
            if set(g) != set(range(topo.npus)):
                raise ValueError(f"algorithm 'in-switch' on a multi-dimensional network needs the whole network "
                                 f"as group, not {_fmt(g)}")
            return in_switch_plan(sim, kind), alg, DEFAULT_CHUNKS["hierarchical"]
        _need_in_network(topo)
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
    return _reduction_plan(sim, alg, g, kind), alg, DEFAULT_CHUNKS.get(alg, 1)


def _plain_multidim(topo, g) -> bool:
    """``g`` is the whole of a multi-dimensional network of rings, switches and fully
    connected dimensions (a ring, a torus, an ASTRA-sim YAML network; not a mesh, whose lines
    cannot be rings, nor a switch tree), built by the API or read from YAML alike."""
    dims = _grid_dims(topo)
    return (bool(dims) and all(d[0] != "line" for d in dims) and not _is_tree(topo) and not _in_network(topo)
            and bool(_multidim_levels(topo, g)))


def _best_multidim(sim, op, g, plain):
    """The default on a multi-dimensional network over all of it (:func:`_plain_multidim`):
    the plain default (``ring`` on one dimension, else ``hierarchical``), in-switch (where a
    dimension reduces, All-Reduce only) or multi-ring, whichever has the smallest bandwidth bound
    (the plain one on a tie)."""
    if plain not in ("ring", "hierarchical"):
        plain = "ring" if len(_multidim_levels(sim.topo, g)) == 1 else "hierarchical"
    topo = sim.topo
    kind = {"all-reduce": "ar", "reduce-scatter": "rs", "all-gather": "ag"}[op]
    plans = {plain: _reduction_plan(sim, plain, g, kind)}
    if topo.meta.get("in_network_dims") and kind == "ar":
        plans["in-switch"] = in_switch_plan(sim, kind)
    plans["multi-ring"] = multi_ring_plan(sim, kind)
    return best_algorithm(sim, plans)


def _plan_multicast(sim, g, rt):
    """``rt`` sends its buffer to the rest of ``g``: one tree, or a copy each."""
    topo = sim.topo
    others = _others(g, rt)
    if not others:
        return [], "direct", 1
    if topo.multicast:
        return [(1.0, [Trees([(sim.path_multicast(rt, others), g)])])], "multicast", 1
    return [(1.0, [Unicasts([rt] * len(others), others, 1.0)])], "unicast-copies", 1


def _plan_reduce(sim, g, rt, alg, algorithm):
    """Reduce into ``rt``: an in-switch tree, else Reduce-Scatter then gather into ``rt``."""
    topo = sim.topo
    if rt not in g:
        g = [rt] + g
    p = len(g)
    others = _others(g, rt)
    if not others:
        return [], alg, 1
    if alg == "in-switch" or (algorithm is None and _in_network(topo)):
        _need_in_network(topo)
        return [(1.0, [Trees([(sim.path_reduce(g, rt), g)])])], "in-switch", 1
    ralg = alg if alg not in ("direct", "shift") else "ring"
    plan = _reduction_plan(sim, ralg, g, "rs")
    plan = _append(plan, lambda f: Unicasts(_others(g, rt), [rt] * (p - 1), 1.0 / p))
    return plan, ralg + "+gather", DEFAULT_CHUNKS.get(ralg, 1)


def _plan_broadcast(sim, g, rt, alg, algorithm):
    """Broadcast from ``rt``: a multicast tree, else scatter from ``rt`` then All-Gather."""
    topo = sim.topo
    if rt not in g:
        g = [rt] + g
    p = len(g)
    others = _others(g, rt)
    if not others:
        return [], alg, 1
    if alg == "in-switch" or (algorithm is None and topo.multicast):
        if not topo.multicast:
            raise ValueError(f"topology {topo.name!r} cannot multicast")
        return [(1.0, [Trees([(sim.path_multicast(rt, others), g)])])], "multicast", 1
    ralg = alg if alg not in ("direct", "shift") else "ring"
    plan = _reduction_plan(sim, ralg, g, "ag")
    plan = _prepend(plan, lambda f: Unicasts([rt] * (p - 1), _others(g, rt), 1.0 / p))
    return plan, "scatter+" + ralg, DEFAULT_CHUNKS.get(ralg, 1)


def _io_controllers(topo, io):
    """The I/O controller node ids ``io`` (default: all), checked."""
    ios = list(topo.io_nodes) if io is None else [topo.check_node(x, "I/O controller") for x in io]
    if not ios:
        raise ValueError(f"topology {topo.name!r} has no I/O controllers")
    for x in ios:
        if topo.kinds[x] != "io":
            raise ValueError(f"node {x} of {topo.name!r} is not an I/O controller")
    return ios


def _plan_io(sim, op, g, alg, algorithm, io):
    """io-broadcast (I/O controllers -> every member) or io-reduce (members -> I/O controllers):
    one tree per I/O controller where the network can, else an endpoint algorithm plus
    scatter/gather to the controllers; each controller carries 1/n of the data."""
    topo = sim.topo
    ios = _io_controllers(topo, io)
    p = len(g)
    n_io = len(ios)
    innet = _in_network(topo)
    grid = topo.routing == "grid" and "io_port" in topo.meta
    endpoint = ("ring", "ring2", "hier2d", "hier-ring", "hier-direct", "hierarchical", "multi-ring")
    if op == "io-broadcast":
        if topo.multicast:
            trees = [(sim.path_multicast(x, g, io_tree_order(topo, x, False)), [x] + g) for x in ios]
            return [(1.0, [Trees(trees, 1.0 / n_io)])], "io-multicast", DEFAULT_CHUNKS["io"]
        ralg = alg if alg in endpoint else "ring"
        plan = _reduction_plan(sim, ralg, g, "ag") if p > 1 else []
        src = np.repeat(ios, p)
        dst = np.tile(g, n_io)
        plan = _prepend(plan, lambda f: Unicasts(src, dst, 1.0 / (p * n_io)))
        return plan, "io-scatter+" + ralg + "-all-gather", DEFAULT_CHUNKS["io"]
    if op == "io-reduce":
        explicit = canonical_algorithm(algorithm)
        if (innet or (grid and topo.multicast)) and explicit not in endpoint:
            trees = [(sim.path_reduce(g, x, io_tree_order(topo, x, True)), g + [x]) for x in ios]
            name = "io-in-switch-reduce" if innet else "io-npu-tree-reduce"
            return [(1.0, [Trees(trees, 1.0 / n_io)])], name, DEFAULT_CHUNKS["io"]
        ralg = alg if alg in endpoint else "ring"
        plan = _reduction_plan(sim, ralg, g, "rs") if p > 1 else []
        src = np.repeat(g, n_io)
        dst = np.tile(ios, p)
        plan = _append(plan, lambda f: Unicasts(src, dst, 1.0 / (p * n_io)))
        return plan, ralg + "-reduce-scatter+io-gather", DEFAULT_CHUNKS["io"]
    raise ValueError(f"unknown collective {op!r}")  # pragma: no cover


def io_tree_order(topo, io, reduce):
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


def _others(g, rt):
    """The members of ``g`` other than ``rt``."""
    return [x for x in g if x != rt]
