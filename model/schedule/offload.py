"""Activation offload/reload tasks of one pipeline stage (the offload memory policies,
:mod:`fred.model.workload.memory`), pipelined with the stage's compute in the schedule's task graph."""

from __future__ import annotations

from .layout import stage_npus


class Offload:
    """Activation offload/reload tasks of one stage, both pipelined with the compute: a piece
    streams out as its forward produces it (its offload starts with the piece's forward, after
    the previous piece's offload: one stream per stage) and streams back in as its backward
    consumes it (the backward starts with the reload and ends no earlier than the reload); the
    reload waits for the offload and for the end of the forward that produced the piece. Two
    staging buffers: a piece's forward waits for the offload of the piece two offloaded pieces
    before it, a piece's reload for the backward of the piece two before it (in backward
    order), so at most two pieces are in transit per direction."""

    def __init__(self, g, abc, s):
        self.g, self.npus = g, stage_npus(abc, s)
        self.out = {}                 # piece key -> offload task
        self.made = {}                # piece key -> end of the forward that produced it
        self.out_order = []           # offload tasks in forward order
        self.bwd_done = []            # backward tasks in backward order
        self.pending = None           # the reload the piece in backward must wait for at its end

    def gate_forward(self):
        return self.out_order[-2] if len(self.out_order) >= 2 else None

    def offload(self, key, nbytes, start):
        """Offload ``nbytes`` of piece ``key`` from the start (task ``start``) of its forward."""
        if nbytes <= 0:
            return
        t = self.g.coll("io-reduce", self.npus, nbytes, [start, self.out_order[-1] if self.out_order else None],
                        "offload", chunks=1)
        self.out[key] = t
        self.out_order.append(t)

    def produced(self, key, end):
        if key in self.out:
            self.made[key] = end

    def reload(self, key, nbytes):
        """(start, task) of piece ``key``'s reload, or (None, None): the backward of the piece
        starts at ``start`` and ends no earlier than ``task``."""
        if nbytes <= 0 or key not in self.out:
            return None, None
        prev = self.bwd_done[-2] if len(self.bwd_done) >= 2 else None
        start = self.g.join([self.out[key], self.made.get(key), prev])
        return start, self.g.coll("io-broadcast", self.npus, nbytes, [start], "offload", chunks=1)

    def backward_done(self, t):
        self.bwd_done.append(t)
