"""The flow simulator's task graph: tasks, their dependencies and the paths flows take.

A task (``TaskId``, an int) is a fixed wait (``DELAY``: compute, a join) or a *flow*
(``FLOW``: ``nbytes`` over one path of the topology -- a route, a multicast tree, a reduction
tree or an in-switch All-Reduce tree). Tasks live in flat growable numpy arrays
(:mod:`fred.model.network.taskarrays`; a 1,024-NPU ring All-Reduce is ~2 million flows); paths (:mod:`fred.model.network.paths`) are numbered and cached by their end points, so
repeated flows share one entry. :class:`TaskGraph` is what collective expansion
(:mod:`fred.model.collectives.api`) builds on; :class:`fred.model.collectives.flowsim.Sim` adds collectives and
``run()``, and :meth:`TaskGraph.arrays` is what the event engine (:mod:`fred.model.network.engine`) reads.
"""

from __future__ import annotations

import math

import numpy as np

from fred import FredError

from .graph import Topology
from .paths import MAX_PATH_LINKS, PathTable
from .taskarrays import Block, Grow, TaskArrays
from fred.model.system import SwitchTiming
from .topology import resolve

__all__ = ["TaskId", "DELAY", "FLOW", "TaskGraph", "TaskArrays", "check_bytes", "check_duration", "MAX_TASKS",
           "MAX_PATH_LINKS"]

TaskId = int

#: task kinds
DELAY, FLOW = 0, 1
#: most tasks (flows and delays) one simulation creates: ~170 bytes each with their dependencies
#: (a 2,048-NPU ring All-Reduce is 8.4 M flows, 1.4 GB); beyond it a run is refused as it is
#: built, before memory runs out
MAX_TASKS = 10_000_000


def _too_many_tasks():
    return FredError(f"this simulation needs more than {MAX_TASKS:,} tasks (flows and delays), more than "
                     f"fit in memory; use fewer NPUs, fewer chunks or a hierarchical algorithm")


def check_bytes(nbytes, what="nbytes") -> float:
    """``nbytes`` as a positive finite float; ValueError naming the value otherwise."""
    try:
        v = float(nbytes)
    except (TypeError, ValueError):
        raise ValueError(f"{what} {nbytes!r} is not a number") from None
    if not (v > 0 and math.isfinite(v)):
        raise ValueError(f"{what} must be a positive finite size, got {nbytes!r}")
    return v


def check_duration(duration_s) -> float:
    """``duration_s`` as a float >= 0 and finite; ValueError naming the value otherwise."""
    try:
        d = float(duration_s)
    except (TypeError, ValueError):
        raise ValueError(f"duration {duration_s!r} is not a number") from None
    if not (d >= 0 and math.isfinite(d)):
        raise ValueError(f"duration must be >= 0 seconds, got {duration_s!r}")
    return d


class TaskGraph(PathTable):
    """Tasks and dependencies on a :class:`fred.model.network.graph.Topology` (or a fabric name or YAML
    path, see :func:`fred.model.network.topology.resolve`).

    ``timing`` (a :class:`~fred.model.system.timing.SwitchTiming`) overrides the topology's switch timing.
    """

    def __init__(self, topo, timing: SwitchTiming | None = None):
        if not isinstance(topo, Topology):
            topo = resolve(topo)
        self.topo = topo
        self.timing = timing if timing is not None else topo.timing
        self._kind = Grow(np.int8)
        self._dur = Grow(np.float64)
        self._bytes = Grow(np.float64)
        self._path = Grow(np.int32)
        self._label_of = Grow(np.int32)
        self._prio = Grow(np.int32)
        self._prio_cur = 0
        self._pred = Grow(np.int64)
        self._succ = Grow(np.int64)
        self._labels: list[str] = []
        self._label_idx: dict[str, int] = {}
        self._init_paths()
        self._spans: list[tuple[int, int]] = []  # (begin task, join task) of collectives
        #: plans of the collectives expanded so far, by (op, group, algorithm, root, io): a
        #: collective repeated on the same group reuses its plan (:mod:`fred.model.collectives.api`)
        self.plan_cache: dict = {}
        #: algorithm names of the last collective added (one per group)
        self.last_algorithms: list[str] = []
        self.last_chunks: int = 1
        self._sw_lat = self.timing.latency_s
        eff = float(getattr(topo, "link_efficiency", 1.0))
        if not 0 < eff <= 1:
            raise ValueError(f"topology link_efficiency {eff!r} must be in (0, 1]")
        self._eff = eff

    # ---- bookkeeping ---------------------------------------------------------------------------
    @property
    def num_tasks(self) -> int:
        return self._kind.n

    @property
    def num_edges(self) -> int:
        """Dependency edges added so far."""
        return self._pred.n

    def edges(self, first: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """(predecessors, successors) of the dependency edges from edge number ``first`` on."""
        return self._pred.view()[first:], self._succ.view()[first:]

    def add_span(self, begin: TaskId, join: TaskId) -> None:
        """Report task ``join`` as starting when ``begin`` starts (a collective's one TaskId spans
        from its begin marker to its join)."""
        self._spans.append((int(begin), int(join)))

    def label_id(self, label) -> int:
        """The number of task label ``label`` (labels are numbered as they first appear)."""
        label = str(label)
        i = self._label_idx.get(label)
        if i is None:
            i = len(self._labels)
            self._labels.append(label)
            self._label_idx[label] = i
        return i

    def check_deps(self, deps) -> list[int]:
        """``deps`` (a TaskId, or nested lists of them) as a flat list; ValueError naming a bad one."""
        if deps is None:
            return []
        if isinstance(deps, (int, np.integer)):
            deps = [deps]
        out = []
        n = self.num_tasks
        for d in deps:
            if isinstance(d, (list, tuple, np.ndarray)):
                out.extend(self.check_deps(d))
                continue
            try:
                v = int(d)
            except (TypeError, ValueError):
                raise ValueError(f"dependency {d!r} is not a TaskId") from None
            if not 0 <= v < n:
                raise ValueError(f"dependency {d!r} is not a task of this simulation (0..{n - 1})")
            out.append(v)
        return out

    def _check_room(self, k: int) -> None:
        """Refuse, before any work, ``k`` more tasks beyond :data:`MAX_TASKS`."""
        if self._kind.n + k > MAX_TASKS:
            raise _too_many_tasks()

    def _new(self, kind, dur, nbytes, path, label_id, k=1):
        first = self._kind.n
        if first + k > MAX_TASKS:
            raise _too_many_tasks()
        if k == 1 and np.ndim(path) == 0 and np.ndim(nbytes) == 0:
            self._kind.append(kind)
            self._dur.append(dur)
            self._bytes.append(nbytes)
            self._path.append(path)
            self._label_of.append(label_id)
            self._prio.append(self._prio_cur)
        else:
            self._kind.fill(kind, k)
            self._dur.fill(dur, k)
            if np.ndim(nbytes) == 0:
                self._bytes.fill(nbytes, k)
            else:
                self._bytes.extend(nbytes)
            if np.ndim(path) == 0:
                self._path.fill(path, k)
            else:
                self._path.extend(path)
            self._label_of.fill(label_id, k)
            self._prio.fill(self._prio_cur, k)
        return first

    def add_edges(self, pred, succ):
        """Add edges pred -> succ (arrays broadcast; pred < 0 ignored)."""
        pred = np.asarray(pred, dtype=np.int64)
        succ = np.asarray(succ, dtype=np.int64)
        if pred.shape != succ.shape:
            if succ.ndim == 0:
                succ = np.full(pred.shape, succ, dtype=np.int64)
            elif pred.ndim == 0:
                pred = np.full(succ.shape, pred, dtype=np.int64)
            else:
                pred, succ = np.broadcast_arrays(pred, succ)
        m = pred >= 0
        if not m.all():
            pred, succ = pred[m], succ[m]
        if pred.size:
            self._pred.extend(pred)
            self._succ.extend(succ)

    def record(self, anchor: int, first_edge: int) -> "Block":
        """The tasks added after task ``anchor`` and the edges from edge number ``first_edge``
        on, as a block :meth:`replay` can add again (edges from ``anchor`` or inside the block
        only; every task of one label and priority)."""
        lo, hi = anchor + 1, self._kind.n
        pred, succ = self.edges(first_edge)
        if (pred < anchor).any() or (succ <= anchor).any():  # pragma: no cover - guarded by callers
            raise ValueError("a recorded block depends on a task outside it")
        return Block(self._kind.view()[lo:hi].copy(), self._dur.view()[lo:hi].copy(),
                      self._bytes.view()[lo:hi].copy(), self._path.view()[lo:hi].copy(),
                      pred - lo, succ - lo)

    def replay(self, block: "Block", anchor: int, label_id: int) -> int:
        """Add ``block`` again after task ``anchor`` (which stands for the recorded anchor), with
        label ``label_id`` and the current priority; returns the TaskId of its last task."""
        k = block.kind.size
        lo = self._new(FLOW, 0.0, 0.0, -1, label_id, k=k)   # reserve k tasks, then fill them in
        self._kind.a[lo: lo + k] = block.kind
        self._dur.a[lo: lo + k] = block.dur
        self._bytes.a[lo: lo + k] = block.nbytes
        self._path.a[lo: lo + k] = block.path
        pred = block.pred + lo
        pred[block.pred < 0] = anchor
        self._pred.extend(pred)
        self._succ.extend(block.succ + lo)
        return lo + k - 1

    def append_tasks(self, kind, dur, nbytes, path, label_of, priority, pred, succ, spans=()) -> int:
        """Append tasks and edges as they are (arrays, one value per task or edge; edge ends are
        TaskIds), and collective spans (begin, join); returns the TaskId of the first task. What a
        graph assembled from recorded blocks (:mod:`fred.model.schedule.tape`) adds in one step."""
        k = int(np.size(kind))
        first = self._kind.n
        if first + k > MAX_TASKS:
            raise _too_many_tasks()
        self._kind.extend(kind)
        self._dur.extend(dur)
        self._bytes.extend(nbytes)
        self._path.extend(path)
        self._label_of.extend(label_of)
        self._prio.extend(priority)
        self._pred.extend(pred)
        self._succ.extend(succ)
        self._spans.extend(spans)
        return first

    def add_flows(self, paths, nbytes, label_id) -> np.ndarray:
        """Flows of ``nbytes`` (one value or one per flow) on path ids ``paths``; their TaskIds."""
        paths = np.asarray(paths, dtype=np.int32).ravel()
        first = self._new(FLOW, 0.0, nbytes, paths, label_id, k=paths.size)
        return np.arange(first, first + paths.size, dtype=np.int64)

    def add_delays(self, k, dur, label_id) -> np.ndarray:
        """``k`` fixed waits of ``dur`` seconds (0: joins); their TaskIds."""
        first = self._new(DELAY, dur, 0.0, -1, label_id, k=k)
        return np.arange(first, first + k, dtype=np.int64)

    # ---- public task API -------------------------------------------------------------------
    def delay(self, duration_s: float, deps=(), label: str = "") -> TaskId:
        """A fixed wait (compute, ...) of ``duration_s`` seconds after ``deps``."""
        d = check_duration(duration_s)
        dl = self.check_deps(deps)
        t = self._new(DELAY, d, 0.0, -1, self.label_id(label))
        if dl:
            self.add_edges(dl, t)
        return t

    def _with_priority(self, priority, fn, *a, **k):
        try:
            p = int(priority)
        except (TypeError, ValueError):
            raise ValueError(f"priority {priority!r} is not an integer") from None
        old, self._prio_cur = self._prio_cur, p
        try:
            return fn(*a, **k)
        finally:
            self._prio_cur = old

    def transfer(self, src: int, dsts, nbytes: float, deps=(), label: str = "", priority: int = 0) -> TaskId:
        """``nbytes`` from node ``src`` to ``dsts`` (an int: unicast; a list: one multicast tree).

        On a topology without multicast (``topo.multicast`` false) a list of destinations becomes
        one unicast copy per destination from ``src`` (the returned task joins them).
        ``priority``: flows of a higher priority are served first on shared links (strict
        priority; max-min fair within a priority), e.g. FRED-SPEC §4's MP > PP > DP.
        """
        if priority:
            return self._with_priority(priority, self._transfer, src, dsts, nbytes, deps, label)
        return self._transfer(src, dsts, nbytes, deps, label)

    def _transfer(self, src, dsts, nbytes, deps, label):
        nb = check_bytes(nbytes)
        src = self.topo.check_node(src, "source")
        dl = self.check_deps(deps)
        lab = self.label_id(label)
        if isinstance(dsts, (int, np.integer)):
            dst = self.topo.check_node(dsts, "destination")
            t = self._new(FLOW, 0.0, nb, self.path_unicast(src, dst), lab)
            if dl:
                self.add_edges(dl, t)
            return t
        dl2 = [self.topo.check_node(d, "destination") for d in dsts]
        if not dl2:
            raise ValueError("transfer needs at least one destination")
        if self.topo.multicast or len(dl2) == 1:
            pid = self.path_multicast(src, dl2) if len(dl2) > 1 else self.path_unicast(src, dl2[0])
            t = self._new(FLOW, 0.0, nb, pid, lab)
            if dl:
                self.add_edges(dl, t)
            return t
        ids = self.add_flows(self.paths_unicast([src] * len(dl2), dl2), nb, lab)
        if dl:
            self.add_edges(np.repeat(dl, ids.size), np.tile(ids, len(dl)))
        j = self._new(DELAY, 0.0, 0.0, -1, lab)
        self.add_edges(ids, j)
        return j

    def reduce(self, srcs, dst: int, nbytes: float, deps=(), label: str = "", priority: int = 0) -> TaskId:
        """In-network reduction of ``nbytes`` from every node in ``srcs`` into ``dst`` (one tree flow).

        On a topology without in-network reduction each source sends its ``nbytes`` to ``dst``
        (which adds them); the returned task joins those transfers. ``priority``: see transfer.
        """
        if priority:
            return self._with_priority(priority, self._reduce, srcs, dst, nbytes, deps, label)
        return self._reduce(srcs, dst, nbytes, deps, label)

    def _reduce(self, srcs, dst, nbytes, deps, label):
        nb = check_bytes(nbytes)
        srcs = [self.topo.check_node(s, "source") for s in srcs]
        if not srcs:
            raise ValueError("reduce needs at least one source")
        dst = self.topo.check_node(dst, "destination")
        dl = self.check_deps(deps)
        lab = self.label_id(label)
        if self.topo.in_network_reduction:
            t = self._new(FLOW, 0.0, nb, self.path_reduce(srcs, dst), lab)
            if dl:
                self.add_edges(dl, t)
            return t
        others = [s for s in srcs if s != dst]
        ids = self.add_flows(self.paths_unicast(others, [dst] * len(others)), nb, lab)
        j = self._new(DELAY, 0.0, 0.0, -1, lab)
        if dl:
            if ids.size:
                self.add_edges(np.repeat(dl, ids.size), np.tile(ids, len(dl)))
            else:
                self.add_edges(dl, j)
        self.add_edges(ids, j)
        return j

    # ---- for the engine ------------------------------------------------------------------
    def arrays(self) -> TaskArrays:
        """The graph as flat arrays (views: valid until the next task is added)."""
        return TaskArrays(kind=self._kind.view(), duration=self._dur.view(), nbytes=self._bytes.view(),
                          path=self._path.view(), priority=self._prio.view(), label_of=self._label_of.view(),
                          labels=self._labels, pred=self._pred.view(), succ=self._succ.view(), spans=self._spans,
                          path_links=self._p_links, path_srcs=self._p_srcs, path_dsts=self._p_dsts,
                          path_latency=self._p_lat, path_cap=self._p_cap)

    @property
    def link_efficiency(self) -> float:
        """Payload share of every link's bandwidth (the topology's, checked)."""
        return self._eff
