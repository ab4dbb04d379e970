"""The building blocks of collective plans: phases of flows and how a plan runs on a task graph.

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
* ``Shift``: All-to-All as k-1 permutation steps.
* ``Trees``: in-network flows (multicast, reduction, in-switch All-Reduce), concurrent or one
  after another.

A phase is called with the :class:`Builder` (the task graph and the label), the *state* (per
node, the task its next flow must wait for; a list of such arrays) and the piece size; it
returns the new state and its own sends (what the next piece's same phase waits for).
:func:`run_plan` runs a plan; :func:`merge_plans` fuses same-shaped plans over disjoint groups
into one (fewer, larger phases: the same flows, built faster).
"""

from __future__ import annotations

import numpy as np

from fred.model.network import TaskGraph

__all__ = ["Builder", "Ring", "Unicasts", "Shift", "Trees", "run_plan", "merge_plans"]


class Builder:
    """Where phases put their flows: the task graph ``sim``, the label ``lab`` and per-node state
    arrays (``empty()``: no task to wait for, -1)."""

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

    def __call__(self, b: Builder, st, D):
        k = self.rings.shape[1]
        if k < 2:
            return st, []
        if self.bidir:
            s1, e1 = self._one(b, st, D / 2, self.reverse)
            s2, e2 = self._one(b, st, D / 2, not self.reverse)
            return s1 + s2, e1 + e2
        return self._one(b, st, D, self.reverse)

    def _prepared(self, sim, reverse):
        """What every call on graph ``sim`` shares (the plan is built per graph, its phase called
        once per piece): the flows' paths, and the steps' dependencies relative to the first flow."""
        prep = getattr(self, "_prep", None)
        if prep is None:
            prep = self._prep = {}
        hit = prep.get(reverse)
        if hit is not None and hit[0] is sim:
            return hit[1]
        rings = self.rings[:, ::-1] if reverse else self.rings
        R, k = rings.shape
        S = k - 1
        nxt, prv = _neighbours(k)
        snd = rings.ravel()
        rcv = rings[:, nxt].ravel()
        pids = np.tile(sim.paths_unicast(snd, rcv), S)
        rel = np.arange(S * R * k, dtype=np.int64).reshape(S, R, k)
        later = rel[1:].ravel()
        out = (k, snd, rcv, pids, rel[0].ravel(), rel[-1].ravel(), rel[:-1][:, :, prv].ravel(), rel[:-1].ravel(),
               later)
        prep[reverse] = (sim, out)
        return out

    def _one(self, b, st, D, reverse):
        k, snd, rcv, pids, first_rel, last_rel, prev_rel, own_rel, later_rel = self._prepared(b.sim, reverse)
        msg = D * self.scale / k
        first = int(b.sim.add_flows(pids, msg, b.lab)[0])
        b.dep_on_state(st, snd, first_rel + first)
        if later_rel.size:
            later = later_rel + first
            b.sim.add_edges(prev_rel + first, later)
            b.sim.add_edges(own_rel + first, later)
        ls = b.empty()
        lr = b.empty()
        last = last_rel + first
        ls[snd] = last
        lr[rcv] = last
        return [ls, lr], [ls]


class Unicasts:
    """Concurrent unicasts src[i] -> dst[i] of D*scale[i] bytes; per-node joins after.
    ``orders``: optional grid dimension orders of the first ``len(orders)`` unicasts (None, and
    every unicast after them: the default route; see
    :func:`fred.model.network.graph._grid_route`, e.g. the other way round a ring)."""

    def __init__(self, srcs, dsts, scale, orders=None):
        self.srcs = np.asarray(srcs, dtype=np.int64).ravel()
        self.dsts = np.asarray(dsts, dtype=np.int64).ravel()
        self.scale = np.broadcast_to(np.asarray(scale, dtype=float), self.srcs.shape)
        self.orders = None if orders is None else list(orders)

    def paths(self, sim, mask=None):
        """The path ids of the unicasts (of those selected by ``mask``)."""
        srcs, dsts = (self.srcs, self.dsts) if mask is None else (self.srcs[mask], self.dsts[mask])
        if self.orders is None:
            return sim.paths_unicast(srcs, dsts)
        orders = self.orders if mask is None else [o for o, k in zip(self.orders, mask) if k]
        # (the routed unicasts come first, so after the mask they are still the first ones)
        pids = sim.paths_unicast(srcs, dsts)
        for i, o in enumerate(orders):
            if o is not None:     # a route of its own: a one-destination tree is that route
                pids[i] = sim.path_multicast(int(srcs[i]), [int(dsts[i])], tuple(o))
        return pids

    def _prepared(self, sim):
        """What every call on graph ``sim`` shares (the plan is built per graph, its phase called
        once per piece): the unicasts that move data, their paths, the nodes that join and where."""
        prep = getattr(self, "_prep", None)
        if prep is not None and prep[0] is sim:
            return prep[1]
        m = self.srcs != self.dsts
        srcs, dsts, scale = self.srcs[m], self.dsts[m], self.scale[m]
        if srcs.size == 0:
            out = None
        else:
            pids = self.paths(sim, m)
            nodes = np.unique(np.concatenate([srcs, dsts]))
            recv_only = np.setdiff1d(dsts, srcs)
            out = (srcs, scale, pids, nodes, np.searchsorted(nodes, srcs), np.searchsorted(nodes, dsts),
                   recv_only, np.searchsorted(nodes, recv_only))
        self._prep = (sim, out)
        return out

    def __call__(self, b: Builder, st, D):
        prep = self._prepared(b.sim)
        if prep is None:
            return st, []
        srcs, scale, pids, nodes, pos_s, pos_d, recv_only, pos_r = prep
        ids = b.sim.add_flows(pids, D * scale, b.lab)
        b.dep_on_state(st, srcs, ids)
        joins = b.sim.add_delays(nodes.size, 0.0, b.lab)
        b.sim.add_edges(ids, joins[pos_s])
        b.sim.add_edges(ids, joins[pos_d])
        # a node that only receives also keeps its prior state
        a = b.empty()
        a[nodes] = joins
        if recv_only.size:
            b.dep_on_state(st, recv_only, joins[pos_r])
        return [a], [a]


class Shift:
    """All-to-All as k-1 permutation steps: step s, member i sends D*scale/k to member i+s."""

    def __init__(self, group, scale=1.0):
        self.g = np.asarray(group, dtype=np.int64)
        self.scale = scale

    def __call__(self, b: Builder, st, D):
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

    def __call__(self, b: Builder, st, D):
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


# ---- plans: running and merging -------------------------------------------------------------
def run_plan(b: Builder, plan, st0, nbytes, chunks):
    """Emit ``plan`` for ``nbytes`` per NPU in ``chunks`` pieces per stream, from state ``st0``.

    The pieces of a stream are alike: piece c has the tasks of piece 1 and their edges, shifted
    by c - 1 pieces, except that edges from before the stream (the state ``st0``) stay where
    they are; so pieces 2.. are added as copies of piece 1 (:func:`_repeat_piece`), not phase by
    phase. The graph is the one the phase-by-phase loop gives (tests/model/test_model_engine_memo.py)."""
    sim = b.sim
    for frac, phases in plan:
        D = nbytes * frac / chunks
        prev = [[] for _ in phases]
        first = sim.num_tasks
        for c in range(min(chunks, 2)):
            if c == 1:
                t1, e1 = sim.num_tasks, sim.num_edges
            st = st0
            for j, ph in enumerate(phases):
                if getattr(ph, "concurrent_chunks", False):
                    st, _ = ph(b, st, D)
                else:
                    st, sends = ph(b, st + prev[j], D)
                    prev[j] = sends
        if chunks > 2:
            _repeat_piece(sim, first, t1, e1, chunks - 2)


def _repeat_piece(sim, first, t1, e1, copies):
    """Add ``copies`` more pieces after the stream's pieces 0 (tasks from ``first``) and 1 (tasks
    from ``t1``, edges from ``e1``): piece 1 shifted by one piece each time; an edge from a task
    before ``first`` keeps its source."""
    t2 = sim.num_tasks
    size = t2 - t1
    if size != t1 - first:                          # pragma: no cover - pieces are alike
        raise AssertionError("the pieces of a stream differ in size")
    a = sim.arrays()
    sl = slice(t1, t2)
    pred, succ = sim.edges(e1)
    inside = pred >= first
    shift = (np.arange(1, copies + 1, dtype=np.int64) * size)[:, None]
    sim.append_tasks(np.tile(a.kind[sl], copies), np.tile(a.duration[sl], copies), np.tile(a.nbytes[sl], copies),
                     np.tile(a.path[sl], copies), np.tile(a.label_of[sl], copies), np.tile(a.priority[sl], copies),
                     (pred[None, :] + shift * inside[None, :]).ravel(), (succ[None, :] + shift).ravel())


def _merge_phase(a, b):
    if type(a) is not type(b):
        return None
    if isinstance(a, Ring):
        if a.rings.shape[1] != b.rings.shape[1] or a.scale != b.scale or a.bidir != b.bidir or a.reverse != b.reverse:
            return None
        return Ring(np.vstack([a.rings, b.rings]), a.scale, a.bidir, a.reverse)
    if isinstance(a, Unicasts):
        orders = None
        if a.orders is not None or b.orders is not None:
            ao = list(a.orders or [])
            orders = ao + [None] * (a.srcs.size - len(ao)) + list(b.orders or [])
        return Unicasts(np.r_[a.srcs, b.srcs], np.r_[a.dsts, b.dsts], np.r_[a.scale, b.scale], orders)
    if isinstance(a, Trees):
        if a.chain or b.chain or a.scale != b.scale:
            return None
        return Trees(a.trees + b.trees, a.scale)
    return None


def merge_plans(plans):
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
