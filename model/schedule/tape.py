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

    def key(self):
        """The structure: every call without the delays' durations (hashable)."""
        return tuple(self.calls)


class _Built:
    """A graph built from a tape: the Sim, the Sim task of every tape call and of every delay."""

    def __init__(self, tape: Tape, topo):
        sim = Sim(topo)
        real = []
        for c in tape.calls:
            if c[0] == "d":
                real.append(sim.delay(0.0, deps=[real[d] for d in c[2]], label=c[1]))
            else:
                _, op, grp, nbytes, deps, kw = c
                group = [list(g) if isinstance(g, tuple) else g for g in grp]
                real.append(sim.collective(op, group, nbytes, deps=[real[d] for d in deps], **dict(kw)))
        self.sim = sim
        self.real = np.asarray(real, dtype=np.int64)
        self.delays = self.real[np.asarray(tape.is_delay, dtype=bool)]
        self.tasks = sim.num_tasks


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
