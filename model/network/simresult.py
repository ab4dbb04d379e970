"""What a flow simulation returns: :class:`SimResult`, per-task times and per-link and per-node
traffic, with the interval arithmetic behind busy and exposed times."""

from __future__ import annotations

import numpy as np

from .taskarrays import TaskArrays
from .taskgraph import FLOW, TaskId

__all__ = ["SimResult"]


class SimResult:
    """Result of :meth:`fred.model.collectives.flowsim.Sim.run` (made by :func:`fred.model.network.engine.run`).

    * ``start[t]``, ``finish[t]``: numpy float arrays indexed by TaskId (seconds);
    * ``makespan``: finish time of the last task;
    * ``link_bytes``: bytes carried per directed link (index = link id of the topology);
    * ``link_utilization``: per link, ``link_bytes / (bandwidth * makespan)``;
    * ``bytes_sent``: bytes injected per node (a tree flow counts ``nbytes`` for each source);
    * ``bytes_received``: bytes delivered per node (a tree flow counts ``nbytes`` per destination);
    * ``busy_time_by_label()``: {label: length of the union of its tasks' [start, finish]};
    * ``exposed_time(label, hidden_by=("compute",))``: time ``label`` is busy and no task of a
      ``hidden_by`` label is;
    * ``timing_source``: where the switch timing came from; ``events``: engine event count;
    * ``preemptions`` / ``resumes``: flows that preempted a lower class in a FRED switch / flows
      interrupted so; ``preemption_latency``: the seconds of latency both added, summed.
    """

    def __init__(self, topo, timing, tasks: TaskArrays, start, finish, *, link_bytes, bytes_sent, bytes_received,
                 events, preemptions=0, resumes=0, preemption_latency=0.0):
        self.topo = topo
        self.start = start
        self.finish = finish
        self.labels = list(tasks.labels)
        self._task_label = tasks.label_of.copy()
        self._kind = tasks.kind.copy()
        self.makespan = float(np.max(finish)) if finish.size else 0.0
        self.link_bytes = link_bytes
        bw = topo.link_bw
        self.link_utilization = link_bytes / (bw * self.makespan) if self.makespan > 0 else np.zeros_like(link_bytes)
        self.bytes_sent = bytes_sent
        self.bytes_received = bytes_received
        self.timing = timing
        self.timing_source = timing.source
        self.events = events
        self.num_tasks = int(start.size)
        self.num_flows = int(np.count_nonzero(self._kind == FLOW))
        self.preemptions = preemptions
        self.resumes = resumes
        self.preemption_latency = preemption_latency

    def duration(self, task: TaskId) -> float:
        return float(self.finish[task] - self.start[task])

    def _intervals(self, labels):
        ids = [self.labels.index(l) for l in labels if l in self.labels]
        if not ids:
            return np.empty(0), np.empty(0)
        m = np.isin(self._task_label, ids)
        s, f = self.start[m], self.finish[m]
        keep = f > s
        return _union(s[keep], f[keep])

    def busy_time(self, label: str) -> float:
        s, f = self._intervals([label])
        return float(np.sum(f - s))

    def busy_time_by_label(self) -> dict[str, float]:
        """{label: total time at least one task with that label is in progress}."""
        out = {}
        for l in self.labels:
            s, f = self._intervals([l])
            out[l] = float(np.sum(f - s))
        return out

    def exposed_time(self, label, hidden_by=("compute",)) -> float:
        """Time when a task labelled ``label`` (a str or several) runs and none of ``hidden_by`` does."""
        labels = [label] if isinstance(label, str) else list(label)
        hidden = [hidden_by] if isinstance(hidden_by, str) else list(hidden_by)
        a0, a1 = self._intervals(labels)
        b0, b1 = self._intervals(hidden)
        return float(np.sum(a1 - a0) - _overlap(a0, a1, b0, b1))

    def top_links(self, k=5):
        """The ``k`` most utilised links as (name, utilisation, bytes)."""
        order = np.argsort(-self.link_utilization)[:k]
        return [(self.topo.link_name(int(i)), float(self.link_utilization[i]), float(self.link_bytes[i])) for i in order]


def _union(s, f):
    if s.size == 0:
        return s, f
    o = np.argsort(s, kind="stable")
    s, f = s[o], f[o]
    fmax = np.maximum.accumulate(f)
    new = np.ones(s.size, dtype=bool)
    new[1:] = s[1:] > fmax[:-1]
    starts = s[new]
    idx = np.flatnonzero(new)
    ends = fmax[np.r_[idx[1:] - 1, s.size - 1]]
    return starts, ends


def _overlap(a0, a1, b0, b1):
    """Total length of (union of disjoint [a0,a1]) intersected with (disjoint sorted [b0,b1])."""
    if a0.size == 0 or b0.size == 0:
        return 0.0
    pts = np.unique(np.concatenate([a0, a1, b0, b1]))
    mid = (pts[:-1] + pts[1:]) / 2
    ia = np.searchsorted(a0, mid, side="right") - 1
    ib = np.searchsorted(b0, mid, side="right") - 1
    ina = (ia >= 0) & (mid < a1[np.clip(ia, 0, None)])
    inb = (ib >= 0) & (mid < b1[np.clip(ib, 0, None)])
    return float(np.sum(np.diff(pts)[ina & inb]))
