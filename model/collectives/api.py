"""Collectives on the flow simulator: expansion into flows and a one-call simulation.

* :func:`expand` adds a collective to a :class:`~fred.model.network.taskgraph.TaskGraph` (what
  :meth:`fred.model.collectives.flowsim.Sim.collective` calls): it normalises the groups, gets each group's
  plan (:func:`fred.model.collectives.algorithms.build_plan`, cached per graph), fuses same-shaped
  plans over disjoint groups, emits the flows (:mod:`fred.model.collectives.phases`) and joins
  them into one task that spans the whole collective.
* :func:`collective_time` simulates one collective (or one per group, all at once) on a fresh
  network and returns a :class:`CollectiveResult`.
* :func:`io_tree_load` / :func:`io_rate_bound`: how the I/O trees load the links, without
  simulating (the paper's edge-I/O argument).

Operations (:data:`~fred.model.collectives.algorithms.OPS`), algorithms and plans:
:mod:`fred.model.collectives.algorithms`; ``nbytes`` is always per NPU (see :mod:`fred.model.collectives.flowsim`).
"""

from __future__ import annotations

import math

import numpy as np

from fred.contract.checks import check_int, check_number

from fred.model.network import engine
from .algorithms import build_plan, canonical_op, io_tree_order
from .chunking import auto_chunks
from .phases import Builder, merge_plans, run_plan
from .strategy import parse_group
from fred.model.network import TaskGraph, check_bytes
from fred.model.network import resolve

__all__ = ["expand", "collective_time", "CollectiveResult", "io_tree_load", "io_rate_bound", "all_to_all_bytes"]


#: most pieces per stream (as `fred collective --chunks`: each piece is a flow per step)
MAX_CHUNKS = 1024


def _check_call(algorithm, chunks, root) -> None:
    """The types (and the chunk range) of collective_time's options, before any work."""
    if algorithm is not None and not isinstance(algorithm, str):
        raise TypeError(f"algorithm must be a name or None, not {type(algorithm).__name__} {algorithm!r}")
    if chunks is not None and not (isinstance(chunks, str) and chunks == "plan"):
        check_int("chunks", chunks, 1, MAX_CHUNKS)
    if root is not None:
        check_int("root", root, 0)


def _normalize_groups(topo, group):
    """A list of groups (each a list of NPU ids) from a group or a list of groups."""
    if isinstance(group, (str, bytes)):
        group = parse_group(group if isinstance(group, str) else group.decode("utf-8", "replace"), topo.npus)
    if isinstance(group, (bool, int, float, complex, np.number)) or not hasattr(group, "__iter__"):
        raise TypeError(f"group must be NPU ids (a list, or text such as '0-3') or a list of groups, "
                        f"not {type(group).__name__} {group!r}")
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


def expand(sim: TaskGraph, op, group, nbytes, deps=(), algorithm=None, chunks=None, label="", root=None, io=None,
           skew=1.0, repeats=1):
    """Add collective ``op`` to ``sim``; returns the TaskId of the whole collective (all-to-all:
    ``skew`` and ``repeats`` as :func:`all_to_all_bytes`)."""
    op = canonical_op(op)
    nb = check_bytes(nbytes)
    if chunks is not None and chunks != "plan":
        if isinstance(chunks, bool) or not isinstance(chunks, (int, np.integer)) or chunks < 1:
            raise ValueError(f"chunks must be a positive integer, None or 'plan', got {chunks!r}")
    groups = _normalize_groups(sim.topo, group)
    nb, config_s = all_to_all_bytes(sim, groups, nb, skew, repeats) if op == "all-to-all" else (nb, 0.0)
    dl = sim.check_deps(deps)
    lab = sim.label_id(label or op)
    begin = int(sim.add_delays(1, config_s, lab)[0])
    if dl:
        sim.add_edges(dl, begin)
    first_edge = sim.num_edges
    cache = sim.plan_cache
    # the same collective again (same groups, algorithm, chunks and size): replay its tasks
    bkey = ("block", op, tuple(tuple(g) for g in groups), algorithm, chunks, root,
            None if io is None else tuple(io), nb)
    hit = cache.get(bkey)
    if hit is not None:
        block, algs, sim.last_chunks = hit
        sim.last_algorithms = list(algs)
        join = sim.replay(block, begin, lab)
        sim.add_span(begin, join)
        return join
    first_task = sim.num_tasks
    b = Builder(sim, lab)
    built = []
    for g in groups:
        key = (op, tuple(g), algorithm, root, None if io is None else tuple(io))
        r = cache.get(key)
        if r is None:
            r = cache[key] = build_plan(sim, op, g, algorithm, root=root, io=io)
        built.append(r)
    sim.last_algorithms = [alg for _, alg, _ in built]
    # pieces: as given, else one count for all the groups, chosen from their plans together
    # (concurrent groups contend, which the estimate sees); a function of the key's fields
    if chunks == "plan":
        cks = [int(dc) for _, _, dc in built]
    else:
        c = int(chunks) if chunks else _auto(sim, bkey[:4] + bkey[5:], [s for p, _, _ in built for s in p], nb)
        cks = [c] * len(built)
    c = cks[0] if len(set(cks)) == 1 else cks
    sim.last_chunks = c
    todo = list(zip(groups, [p for p, _, _ in built], cks))
    if len(todo) > 1 and len(set(cks)) == 1:
        flat = [m for g in groups for m in g]
        if len(flat) == len(set(flat)) and all(p for p in (t[1] for t in todo)):
            # plans are read-only once built: merge a set of groups once per simulation
            mkey = ("merged", op, tuple(tuple(g) for g in groups), algorithm, root,
                    None if io is None else tuple(io))
            if mkey not in cache:
                cache[mkey] = merge_plans([t[1] for t in todo])
            merged = cache[mkey]
            if merged is not None:
                todo = [(flat, merged, cks[0])]
    for g, plan, c in todo:
        st0 = b.empty()
        st0[g] = begin
        if op.startswith("io-"):
            st0[sim.topo.io_nodes] = begin
        run_plan(b, plan, [st0], nb, c)
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
    cache[bkey] = (sim.record(begin, first_edge), list(sim.last_algorithms), c)
    return join


def all_to_all_bytes(sim: TaskGraph, groups, nb: float, skew: float = 1.0, repeats: int = 1):
    """(bytes to simulate at line rate, configuration seconds) of an all-to-all of ``nb`` bytes
    per NPU over ``groups`` (lists of NPU ids) whose busiest port carries ``skew`` x an even share
    (an uneven all-to-all, e.g. MoE token routing, is simulated as an even one of the busiest
    port's bytes: its bound), standing for ``repeats`` all-to-alls of ``nb / repeats`` each.

    On a fabric of FRED switches whose timing carries the switch's measured all-to-all
    throughput (:class:`fred.model.system.timing.AllToAllTiming`), the bytes move at that share of line
    rate: ``nb x skew / fraction`` at line rate (uniform traffic: the uniform flits per cycle per
    port; skewed: the skewed fraction of bound), plus, for a precompiled all-to-all, its
    configuration phases (``repeats`` x phases x cycles per phase / clock) before the flows.
    Elsewhere (the mesh's NPU routers; a timing without the section) the bytes move at line rate.
    ``sim.last_all_to_all`` records what was applied (``fred collective``, estimates)."""
    if not (isinstance(skew, (int, float)) and not isinstance(skew, bool) and math.isfinite(skew) and skew >= 1):
        raise ValueError(f"all-to-all skew must be a number >= 1, got {skew!r}")
    check_int("repeats", repeats, 1)
    nb = nb * skew
    t = sim.timing
    a = getattr(t, "all_to_all", None)
    skewed = skew > 1 + 1e-9
    info = {"method": None, "fraction": 1.0, "skewed": skewed, "config_s": 0.0}
    if not getattr(sim.topo, "fred_switches", False):
        info["source"] = "line rate (not a fabric of FRED switches)"
    elif a is None:
        info["source"] = t.all_to_all_source if hasattr(t, "all_to_all_source") else "line rate"
    else:
        frac = a.fraction(skewed)
        cfg = repeats * a.phases(max(len(g) for g in groups)) * a.config_cycles_per_phase / t.clock_hz
        info.update(method=a.method, fraction=frac, config_s=cfg, source=a.describe())
        nb = nb / frac
    sim.last_all_to_all = info
    return nb, info["config_s"]


def _auto(sim, key, plan, nb) -> int:
    """Pieces for ``plan`` (the streams of every group of collective ``key``) moving ``nb``
    bytes per NPU: :func:`fred.model.collectives.chunking.auto_chunks`, remembered per graph."""
    ckey = ("chunks", key)
    c = sim.plan_cache.get(ckey)
    if c is None:
        c = sim.plan_cache[ckey] = auto_chunks(sim, plan, nb) if plan else 1
    return c


# ---- convenience ------------------------------------------------------------------------------
class CollectiveResult:
    """Outcome of :func:`collective_time`."""

    def __init__(self, topo, op, groups, nbytes, algorithms, chunks, res, task, all_to_all=None):
        self.topo = topo
        #: all-to-all: what moved its bytes (:func:`all_to_all_bytes`), else None
        self.all_to_all = all_to_all
        self.op = op
        self.groups = groups
        self.nbytes = nbytes
        self.algorithms = algorithms
        self.chunks = chunks
        self.result = res
        self.time = float(res.finish[task] - res.start[task])
        members = sorted({m for g in groups for m in g})
        self.members = members
        # an all-to-all below line rate is simulated as more bytes at line rate: report its payload
        payload = all_to_all["fraction"] if all_to_all else 1.0
        sent = res.bytes_sent[members] * payload
        recv = res.bytes_received[members] * payload
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
            **({"all_to_all_source": self.all_to_all["source"], "all_to_all_method": self.all_to_all["method"],
                "all_to_all_fraction_of_line_rate": self.all_to_all["fraction"],
                "all_to_all_config_s": self.all_to_all["config_s"]} if self.all_to_all else {}),
            "busiest_links": [{"link": n, "utilization": u, "bytes": bb} for n, u, bb in self.result.top_links(3)],
        }


def collective_time(fabric, op, group=None, nbytes=2**30, *, algorithm=None, chunks=None, params=None,
                    timing=None, root=None, io=None) -> CollectiveResult:
    """Simulate one collective (or one per group, all at once) on a fresh network.

    ``fabric``: a Topology, a fabric name ("mesh", "fred-a".."fred-d") or an ASTRA-sim YAML
    path; ``group``: NPU ids, a list of groups, or None for every NPU. A wrong type raises
    ``TypeError``, a value out of range ``ValueError`` (fred.contract.checks).
    """
    check_number("nbytes", nbytes, 0, low_open=True)
    topo = resolve(fabric, params)
    op = canonical_op(op)
    _check_call(algorithm, chunks, root)
    groups = _normalize_groups(topo, list(range(topo.npus)) if group is None else group)
    if not op.startswith("io-") and any(len(g) < 2 for g in groups):
        g = next(g for g in groups if len(g) < 2)
        raise ValueError(f"group {g} has one NPU: {op} needs at least 2")
    graph = TaskGraph(topo, timing)
    t = expand(graph, op, groups, nbytes, algorithm=algorithm, chunks=chunks, root=root, io=io)
    algs = list(graph.last_algorithms)
    res = engine.run(graph)
    return CollectiveResult(topo, op, groups, float(nbytes), algs, graph.last_chunks, res, t,
                            getattr(graph, "last_all_to_all", None) if op == "all-to-all" else None)


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
                pid = graph.path_reduce(g, x, io_tree_order(topo, x, True))
            else:
                pid = graph.path_multicast(x, g, io_tree_order(topo, x, False))
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
