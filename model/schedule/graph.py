"""The task graph of one training iteration as the schedule builds it (:mod:`fred.model.schedule.iteration`):
every task's kind (compute, a communication kind, sync) and dependencies recorded next to the flow
simulator's task ids, for the critical-path analysis (:mod:`fred.model.schedule.analysis`).
"""

from __future__ import annotations

from fred.model.system import TRAFFIC_VC, VC_PRIORITY


class ScheduleGraph:
    """Records every task's kind and dependencies next to the simulator's task ids."""

    def __init__(self, sim):
        self.sim = sim
        # FRED switches arbitrate by virtual channel (MP > PP > DP); elsewhere all traffic is equal
        self.vc_priority = bool(getattr(sim.topo, "fred_switches", False))
        self.kind: dict[int, str] = {}
        self.deps: dict[int, tuple] = {}
        self.cdur: dict[int, float] = {}
        self.rec: dict[int, float] = {}      # stage -> recomputation seconds

    def _rec(self, tid, kind, deps):
        self.kind[tid] = kind
        self.deps[tid] = tuple(d for d in deps if d is not None)
        return tid

    def compute(self, dur, deps=(), label="compute", stage=0, rec=0.0):
        deps = [d for d in deps if d is not None]
        t = self.sim.delay(max(0.0, float(dur)), deps=deps, label=label)
        self.cdur[t] = (float(dur), stage)
        if rec:
            self.rec[stage] = self.rec.get(stage, 0.0) + float(rec)
        return self._rec(t, "compute", deps)

    def priority(self, kind) -> int:
        """Flow-simulator priority of a communication kind: its VC's on FRED switches, else 0."""
        if not self.vc_priority:
            return 0
        return VC_PRIORITY[TRAFFIC_VC.get(kind, "dp")]

    def join(self, deps):
        deps = [d for d in deps if d is not None]
        if len(deps) == 1:
            return deps[0]
        return self._rec(self.sim.delay(0.0, deps=deps, label="sync"), "sync", deps)

    def coll(self, op, groups, nbytes, deps, kind, chunks="plan", **options):
        deps = [d for d in deps if d is not None]
        groups = [list(g) for g in groups]
        if nbytes <= 0 or not groups:
            return self.join(deps) if deps else None
        if op not in ("io-broadcast", "io-reduce"):
            groups = [g for g in groups if len(g) > 1]
            if not groups:
                return self.join(deps) if deps else None
        arg = groups[0] if len(groups) == 1 else groups
        # chunks="plan": each algorithm's fixed pieces (docs/network.md, "Pieces"): the automatic
        # choice moves the training table by < 0.05% but makes Transformer-1T on Fred-A 3x slower
        t = self.sim.collective(op, arg, float(nbytes), deps=deps, label=kind, priority=self.priority(kind),
                                chunks=chunks, **options)
        return self._rec(t, kind, deps)

    def multicasts(self, pairs, nbytes, deps, kind):
        """One multicast per (src, dsts) pair, all at once; returns a join task."""
        deps = [d for d in deps if d is not None]
        if nbytes <= 0 or not pairs:
            return self.join(deps) if deps else None
        groups = [[src] + [d for d in dsts if d != src] for src, dsts in pairs]
        groups = [g for g in groups if len(g) > 1]
        if not groups:
            return self.join(deps) if deps else None
        arg = groups[0] if len(groups) == 1 else groups
        t = self.sim.collective("multicast", arg, float(nbytes), deps=deps, label=kind,
                                priority=self.priority(kind))
        return self._rec(t, kind, deps)
