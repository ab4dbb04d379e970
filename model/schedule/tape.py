"""One task graph per schedule, re-timed: what lets ``fred scan`` build a graph once for all k.

A schedule builder (:mod:`fred.model.schedule.stationary`, :mod:`fred.model.schedule.streaming`)
talks to the flow simulator only through :class:`~fred.model.schedule.graph.ScheduleGraph`, i.e.
through ``Sim.delay`` and ``Sim.collective``. :class:`Tape` stands in for the ``Sim`` while the
builder runs: it records every call (cheap: no collective is expanded) and keeps the delays'
durations apart. The calls without the durations are the graph's *structure*; two estimates
with the same structure on the same topology (the same workload, fabric, strategy, memory plan
and samples at another NPU speed k) build the same task graph and differ only in the durations
of their compute tasks.

:func:`simulate` looks the structure up in a per-process cache of built graphs; on a miss it
replays the tape into a new ``Sim`` (the same calls in the same order, so the same graph a direct
build gives), and on a hit it only swaps the durations in. The engine's per-graph set-up and its
rate memory (:mod:`fred.model.network.engine`) are kept with the graph. The result is indexed by the
tape's task ids, which is what the schedule's analysis reads.
"""

from __future__ import annotations

import hashlib
import io
import itertools
import pickle
from collections import OrderedDict

import numpy as np

from fred.model.collectives import Sim
from fred.model.network import check_duration
from fred.model.network import run as run_graph

__all__ = ["Tape", "simulate", "GRAPH_CACHE_TASKS"]

#: tasks (flows and delays) the per-process graph cache holds at most, over all its graphs
#: (~170 bytes each with their dependencies, plus the engine's set-up: a few hundred MB); a scan
#: job re-times the few graphs of one workload x fabric, the least recently used graph goes first
GRAPH_CACHE_TASKS = 2_000_000


class Tape:
    """Stands in for a :class:`~fred.model.collectives.flowsim.Sim` while a schedule is built: records the
    calls (:attr:`calls`, hashable) and the delays' durations (:attr:`durations`) apart."""

    def __init__(self, topo):
        self.topo = topo
        self.calls: list = []
        self.durations: list[float] = []
        self.is_delay: list[bool] = []

    def _deps(self, deps):
        if deps is None:
            return ()
        if isinstance(deps, (int, np.integer)):
            deps = [deps]
        out = []
        for d in deps:
            if isinstance(d, (list, tuple)):
                out.extend(self._deps(d))
            else:
                out.append(int(d))
        return tuple(out)

    def delay(self, duration_s, deps=(), label=""):
        self.durations.append(check_duration(duration_s))
        self.calls.append(("d", str(label), self._deps(deps)))
        self.is_delay.append(True)
        return len(self.calls) - 1

    def collective(self, op, group, nbytes, deps=(), **kw):
        grp = tuple(tuple(int(x) for x in g) if isinstance(g, (list, tuple, np.ndarray)) else int(g) for g in group)
        self.calls.append(("c", op, grp, float(nbytes), self._deps(deps), tuple(sorted(kw.items()))))
        self.is_delay.append(False)
        return len(self.calls) - 1

    def key(self) -> bytes:
        """The structure: a digest of every call without the delays' durations. A digest, not the
        calls: the graph cache would otherwise hold every tape's tuples for its lifetime, which
        the garbage collector then walks at each full collection (1.1 s of the Transformer-1T
        sweep's run, measured). The calls are pickled without the pickler's memo, so equal calls
        give equal bytes whichever objects hold them."""
        buf = io.BytesIO()
        pk = pickle.Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL)
        pk.fast = True
        pk.dump(self.calls)
        return hashlib.blake2b(buf.getbuffer(), digest_size=32).digest()


class _Template:
    """The tasks and edges one collective call added to a graph (its begin marker, task 0, to its
    join, the last task), edge ends relative to the begin marker: what a later call with the same
    structure adds again (:meth:`fred.model.network.taskgraph.TaskGraph.replay` does the same, one call at
    a time)."""

    __slots__ = ("kind", "dur", "nbytes", "path", "pred", "succ", "size")

    def __init__(self, sim, begin: int, first_edge: int):
        a = sim.arrays()
        self.kind = a.kind[begin:].copy()
        self.dur = a.duration[begin:].copy()
        self.nbytes = a.nbytes[begin:].copy()
        self.path = a.path[begin:].copy()
        self.pred = a.pred[first_edge:] - begin
        self.succ = a.succ[first_edge:] - begin
        self.size = self.kind.size


class _DelayTemplate:
    """A delay call: one task, no edges of its own."""

    size = 1
    kind = np.zeros(1, dtype=np.int8)          # DELAY
    dur = np.zeros(1)
    nbytes = np.zeros(1)
    path = np.full(1, -1, dtype=np.int32)
    pred = succ = np.zeros(0, dtype=np.int64)


_DELAY = _DelayTemplate()


class _Built:
    """A graph built from a tape: the Sim, the Sim task of every tape call and of every delay.

    The graph is the one the tape's calls made one by one on a ``Sim`` would give, task for task,
    edge for edge and path for path: the first call of each structure (op, groups, size and
    options; label and priority apart) in this graph is made on the Sim (so its paths get their ids
    in the same order), and the later ones -- most of a schedule: the same collectives layer after
    layer, microbatch after microbatch -- are appended with the delays in batches of arrays
    (:class:`_Template`, ``TaskGraph.append_tasks``) instead of one call each."""

    def __init__(self, tape: Tape, topo):
        sim = Sim(topo)
        self.sim = sim
        self.real = np.zeros(len(tape.calls), dtype=np.int64)
        templates: dict = {}
        options: dict = {}          # a call's sorted options -> (structural options, label, priority)
        pend: list = []             # (call index, template, label id, priority, deps), not yet added
        for i, c in enumerate(tape.calls):
            if c[0] == "d":
                pend.append((i, _DELAY, sim.label_id(c[1]), 0, c[2]))
                continue
            _, op, grp, nbytes, deps, kw = c
            o = options.get(kw)
            if o is None:
                d = dict(kw)
                o = options[kw] = (tuple(kv for kv in kw if kv[0] not in ("label", "priority")),
                                   d.get("label") or "", int(d.get("priority") or 0))
            key = (op, grp, nbytes, o[0])
            t = templates.get(key)
            if t is not None:
                pend.append((i, t, sim.label_id(o[1] or op), o[2], deps))
                continue
            self._flush(pend)
            pend = []
            n0, e0 = sim.num_tasks, sim.num_edges
            group = [list(g) if isinstance(g, tuple) else g for g in grp]
            self.real[i] = sim.collective(op, group, nbytes, deps=[int(self.real[d]) for d in deps], **dict(kw))
            templates[key] = _Template(sim, n0, e0 + len(deps))
        self._flush(pend)
        self.delays = self.real[np.asarray(tape.is_delay, dtype=bool)]
        self.tasks = sim.num_tasks

    def _flush(self, pend):
        """Append the pending calls (delays and repeated collectives) to the graph, in order."""
        if not pend:
            return
        sim, real = self.sim, self.real
        n = len(pend)
        tmpl = [p[1] for p in pend]
        size = np.fromiter((t.size for t in tmpl), dtype=np.int64, count=n)
        start = sim.num_tasks + np.cumsum(size) - size
        call = np.fromiter((p[0] for p in pend), dtype=np.int64, count=n)
        real[call] = start + size - 1                       # a delay itself; a collective's join
        # edges, per call: its dependencies into its first task, then its template's own edges
        dcount = np.fromiter((len(p[4]) for p in pend), dtype=np.int64, count=n)
        dflat = np.fromiter(itertools.chain.from_iterable(p[4] for p in pend), dtype=np.int64,
                            count=int(dcount.sum()))
        ecount = np.fromiter((t.pred.size for t in tmpl), dtype=np.int64, count=n)
        per = dcount + ecount
        base = np.cumsum(per) - per                         # each call's first edge
        pred = np.empty(int(per.sum()), dtype=np.int64)
        succ = np.empty_like(pred)
        if dflat.size:
            pos = np.repeat(base - (np.cumsum(dcount) - dcount), dcount) + np.arange(dflat.size)
            pred[pos] = real[dflat]
            succ[pos] = np.repeat(start, dcount)
        if ecount.sum():
            pos = np.repeat(base + dcount - (np.cumsum(ecount) - ecount), ecount) + np.arange(int(ecount.sum()))
            off = np.repeat(start, ecount)
            pred[pos] = np.concatenate([t.pred for t in tmpl]) + off
            succ[pos] = np.concatenate([t.succ for t in tmpl]) + off
        coll = np.fromiter((t is not _DELAY for t in tmpl), dtype=bool, count=n)
        spans = list(zip(start[coll].tolist(), (start + size - 1)[coll].tolist()))    # (begin, join)
        sim.append_tasks(np.concatenate([t.kind for t in tmpl]), np.concatenate([t.dur for t in tmpl]),
                         np.concatenate([t.nbytes for t in tmpl]), np.concatenate([t.path for t in tmpl]),
                         np.repeat(np.fromiter((p[2] for p in pend), dtype=np.int32, count=n), size),
                         np.repeat(np.fromiter((p[3] for p in pend), dtype=np.int32, count=n), size),
                         pred, succ, spans)


_CACHE: "OrderedDict[tuple, _Built]" = OrderedDict()
_stats = {"hits": 0, "misses": 0}


def _topo_key(topo):
    fp = getattr(topo, "fingerprint", None)
    return fp() if callable(fp) else ("object", id(topo))


def simulate(tape: Tape, topo):
    """Run the graph ``tape`` recorded on ``topo``: (result indexed by tape call, flow-sim result).

    The first is a view with ``start``/``finish`` per tape call (what the schedule's analysis
    reads); the second the engine's :class:`~fred.model.network.simresult.SimResult` of the whole graph."""
    key = (_topo_key(topo), tape.key())
    built = _CACHE.get(key)
    if built is None:
        _stats["misses"] += 1
        built = _Built(tape, topo)
        _CACHE[key] = built
        total = sum(b.tasks for b in _CACHE.values())
        while total > GRAPH_CACHE_TASKS and len(_CACHE) > 1:
            _, old = _CACHE.popitem(last=False)
            total -= old.tasks
    else:
        _stats["hits"] += 1
        _CACHE.move_to_end(key)
    dur = built.sim.arrays().duration.copy()
    dur[built.delays] = tape.durations
    res = run_graph(built.sim, durations=dur)
    return _TapeView(res, built.real), res


class _TapeView:
    """``start``/``finish`` of a result, indexed by tape call."""

    def __init__(self, res, real):
        self.start = res.start[real]
        self.finish = res.finish[real]


def cache_stats() -> dict:
    """Hits and misses of the graph cache in this process, and the graphs it holds."""
    return dict(_stats, graphs=len(_CACHE), tasks=sum(b.tasks for b in _CACHE.values()))


def clear_cache() -> None:
    _CACHE.clear()
