"""Hierarchical gradient reduction across wafers inside one wafer's training schedule.

W wafers train data-parallel (:mod:`fred.model.collectives.offwafer`); by symmetry every wafer does the same
thing at the same time, so one wafer's iteration is simulated (:mod:`fred.model.schedule.iteration`) with
the inter-wafer level inserted where gradients leave it. :class:`MultiWaferGraph` is the
schedule's task graph with two changes:

* **weight stationary** -- each DP bucket's gradient All-Reduce becomes the hierarchical one, in
  :data:`PIECES` pipelined pieces: ``io-reduce`` of the piece over the wafer's DP groups into the
  I/O controllers (simulated on the wafer: FRED-B/D reduce it in the switches, the mesh and torus
  in the NPU routers' trees, Fred-A/C and the endpoint crossbar by a ring Reduce-Scatter and a
  gather: the wafer fabric's own io-reduce, :mod:`fred.model.collectives.algorithms`), the
  exchange between the wafers (an All-Reduce of the piece's wafer-wide bytes on the off-wafer
  network, :meth:`~fred.model.collectives.offwafer.OffWaferLevel.exchange_time`), then ``io-broadcast`` of
  the sum back to the DP group (multicast where the fabric can, else scatter and All-Gather).
  The three stages of consecutive pieces overlap (piece i+1 leaves while piece i is exchanged);
  the exchanges of all buckets of all stages form one stream (the off-wafer ports are shared).
  A wafer with no DP group (DP(1)) still exchanges with the other wafers (one-NPU groups).
* **weight streaming** -- gradients already leave the wafer reduced over DP (``io-reduce`` of
  the schedule); after each such fold the wafers' off-wafer memory exchanges it across wafers
  (same stream of exchanges); the next iteration's weights are the exchanged sums, so the
  iteration ends when the last exchange has. Each wafer streams the weights from its own
  off-wafer memory (one replica per wafer), at the same rate as a lone wafer.

The exchanges are tasks of kind ``inter_wafer`` in the critical-path breakdown
(``exposed["inter_wafer"]``).
"""

from __future__ import annotations

import math

from fred.model.collectives import DEFAULT_CHUNKS
from .graph import ScheduleGraph

#: most pieces a DP bucket's hierarchical All-Reduce is pipelined in (:meth:`MultiWaferGraph.pieces`
#: picks fewer where the exchange's latency dominates); 8 leaves the fill and drain of the two
#: wafer-side stages at 2/8 of one stage, and the I/O collectives keep their 16 pieces in all
#: (fred.model.collectives.algorithms.DEFAULT_CHUNKS["io"]: 2 per piece)
PIECES = 8
INTER_WAFER = "inter_wafer"


class MultiWaferGraph(ScheduleGraph):
    """A :class:`ScheduleGraph` whose gradient reductions continue across ``level.wafers``
    wafers (``level``: an :class:`~fred.model.collectives.offwafer.OffWaferLevel`)."""

    def __init__(self, sim, level):
        super().__init__(sim)
        self.level = level
        self.wafers = level.wafers
        self.last_exchange = None          # the off-wafer exchanges form one stream

    def exchange(self, nbytes, deps):
        """One off-wafer All-Reduce of ``nbytes`` per wafer after ``deps`` (and the previous one)."""
        deps = [d for d in deps + [self.last_exchange] if d is not None]
        t = self.sim.delay(self.level.exchange_time(nbytes), deps=deps, label=INTER_WAFER)
        self.last_exchange = self._rec(t, INTER_WAFER, deps)
        return self.last_exchange

    def coll(self, op, groups, nbytes, deps, kind, chunks="plan"):
        if self.wafers > 1 and kind == "dp" and op == "all-reduce" and nbytes > 0 and groups:
            return self._hierarchical(groups, nbytes, deps)
        t = super().coll(op, groups, nbytes, deps, kind, chunks)
        if self.wafers > 1 and kind == "stream" and op == "io-reduce" and nbytes > 0 and t is not None:
            self.exchange(nbytes * len(groups), [t])
        return t

    def pieces(self, total):
        """Pieces for a hierarchical All-Reduce of ``total`` bytes per wafer: pipelining k pieces
        through the three stages (out through the controllers, exchange, back in) costs about
        ``max stage + (sum of the other stages) / k + k x exchange latency``; the k minimizing
        it, from 1 to :data:`PIECES` (the wafer-side stages taken at the controllers' rate)."""
        lat = self.level.exchange_time(1.0)
        s_off = max(0.0, self.level.exchange_time(total) - lat) / total
        s_io = 1.0 / self.level.wafer_bw
        rest = 2 * s_io + s_off - max(s_io, s_off)
        if lat <= 0:
            return PIECES
        return max(1, min(PIECES, round(math.sqrt(total * rest / lat))))

    def _hierarchical(self, groups, nbytes, deps):
        """io-reduce -> exchange -> io-broadcast, in up to :data:`PIECES` overlapping pieces."""
        groups = [list(g) for g in groups]
        k = self.pieces(nbytes * len(groups))
        piece = nbytes / k
        chunks = max(1, DEFAULT_CHUNKS["io"] // k)     # the I/O collectives' pieces in all
        out = back = None
        deps = [d for d in deps if d is not None]
        for _ in range(k):
            out = super().coll("io-reduce", groups, piece, deps + [out], "dp", chunks)
            x = self.exchange(piece * len(groups), [out])
            back = super().coll("io-broadcast", groups, piece, [x, back], "dp", chunks)
        return back


def add_busy(g, res, busy: dict) -> None:
    """Add the union of the inter-wafer tasks' intervals to ``busy`` (comm_busy)."""
    from .analysis import _union

    ids = [t for t, k in g.kind.items() if k == INTER_WAFER]
    if ids:
        busy[INTER_WAFER] = _union([(float(res.start[t]), float(res.finish[t])) for t in ids])


__all__ = ["MultiWaferGraph", "PIECES", "INTER_WAFER", "add_busy"]
