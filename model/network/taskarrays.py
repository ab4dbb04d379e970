"""The flat numpy storage of the flow simulator's task graph (:mod:`fred.model.network.taskgraph`):
growable arrays, a recorded block of tasks for replay, and :class:`TaskArrays`, the finished
graph the event engine (:mod:`fred.model.network.engine`) reads."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Grow", "Block", "TaskArrays"]


class Grow:
    """A growable 1-D numpy array."""

    __slots__ = ("a", "n")

    def __init__(self, dtype, cap=1 << 16):        # np.empty: pages cost only once written
        self.a = np.empty(cap, dtype=dtype)
        self.n = 0

    def _reserve(self, k):
        if self.n + k > len(self.a):
            cap = max(len(self.a) * 2, self.n + k)
            b = np.empty(cap, dtype=self.a.dtype)
            b[: self.n] = self.a[: self.n]
            self.a = b

    def append(self, v):
        n = self.n
        if n >= len(self.a):
            self._reserve(1)
        self.a[n] = v
        self.n = n + 1

    def extend(self, vals):
        if not isinstance(vals, np.ndarray):
            vals = np.asarray(vals)
        k = vals.size
        n = self.n
        if n + k > len(self.a):
            self._reserve(k)
        self.a[n: n + k] = vals.ravel()
        self.n = n + k

    def fill(self, v, k):
        n = self.n
        if n + k > len(self.a):
            self._reserve(k)
        self.a[n: n + k] = v
        self.n = n + k

    def view(self):
        return self.a[: self.n]


@dataclass(frozen=True)
class Block:
    """Tasks and edges recorded by :meth:`TaskGraph.record` (edge ends relative to the block's
    first task; -1: the anchor)."""

    kind: np.ndarray
    dur: np.ndarray
    nbytes: np.ndarray
    path: np.ndarray
    pred: np.ndarray
    succ: np.ndarray


@dataclass(frozen=True)
class TaskArrays:
    """A task graph as flat arrays, indexed by TaskId (tasks) or path id (paths)."""

    kind: np.ndarray            # DELAY or FLOW
    duration: np.ndarray        # seconds (delays)
    nbytes: np.ndarray          # bytes (flows)
    path: np.ndarray            # path id (flows; -1 for delays)
    priority: np.ndarray        # priority class (higher first)
    label_of: np.ndarray        # label number
    labels: list                # label number -> label
    pred: np.ndarray            # dependency edges pred[i] -> succ[i]
    succ: np.ndarray
    spans: list                 # (begin, join): join reports begin's start
    path_links: list            # per path: its links (sorted, unique)
    path_srcs: list             # per path: its source nodes
    path_dsts: list             # per path: its destination nodes
    path_latency: list          # per path: seconds after the last byte is sent
    path_cap: list              # per path: rate cap (B/s; inf: none)
