"""The breakdown of a simulated iteration: the critical path through the schedule's task graph
(:class:`fred.model.schedule.graph.ScheduleGraph`). Every instant of the iteration is attributed
to the task the last-finishing chain was waiting for -- compute (including pipeline fill/drain)
or exposed communication of one kind; the parts sum exactly to the iteration time."""

from __future__ import annotations

from dataclasses import dataclass, field

#: ``ep``: the all-to-alls of expert parallelism (MoE token dispatch and combine)
KINDS = ("compute", "mp", "dp", "pp", "stream", "input", "offload", "ep")


@dataclass
class ScheduleResult:
    iteration_time: float
    compute_time: float                 # compute on the critical path (incl. pipeline bubbles)
    compute_busy: float                 # pure compute of the busiest NPU
    exposed: dict                       # kind -> seconds on the critical path (excl. compute)
    comm_busy: dict                     # kind -> union of that kind's task intervals
    tasks: int
    sim_seconds: float
    timing_source: str = ""
    notes: list = field(default_factory=list)
    memory_per_npu: float = 0.0         # bytes per NPU (busiest stage) under the applied memory policy
    preemptions: int = 0                # flows that preempted a lower VC's phase in a FRED switch
    memory_policy: str = "none"         # fred.model.workload.memory policy applied
    memory_before: float = 0.0          # bytes per NPU with every activation kept in HBM (policy none)
    memory_states: float = 0.0          # of which model states (or streamed weight/gradient buffers)
    offload_bytes: float = 0.0          # activation bytes per NPU offloaded (each also read back)
    recompute_busy: float = 0.0         # recomputation seconds of the busiest stage (part of compute)
    microbatches: int = 0               # microbatches simulated (auto may split them to fit)
    memory_candidates: list = field(default_factory=list)


def _union(intervals):
    tot, cur_s, cur_e = 0.0, None, None
    for s, e in sorted(intervals):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                tot += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        tot += cur_e - cur_s
    return tot


def analyse(g, res, abc, notes):
    fin = res.finish
    start = res.start
    ids = list(g.kind)
    end_task = max(ids, key=lambda t: (fin[t], t))
    T = float(fin[end_task])
    exposed = {k: 0.0 for k in KINDS}
    t = end_task
    while t is not None:
        deps = g.deps.get(t, ())
        ready = max((float(fin[d]) for d in deps), default=0.0)
        span = max(0.0, float(fin[t]) - ready)
        k = g.kind[t]
        if k == "sync":
            k = "compute" if span == 0 else "compute"
        exposed[k] = exposed.get(k, 0.0) + span
        t = max(deps, key=lambda d: (fin[d], d)) if deps else None
    compute_cp = exposed.pop("compute")
    busy = {}
    for k in KINDS[1:]:
        busy[k] = _union([(float(start[t]), float(fin[t])) for t in ids if g.kind[t] == k])
    # busiest NPU's pure compute: compute tasks stand for one stage's lockstep MP groups
    per_stage = {}
    for t, (dur, s) in g.cdur.items():
        per_stage[s] = per_stage.get(s, 0.0) + dur
    cb = max(per_stage.values(), default=0.0)
    return ScheduleResult(iteration_time=T, compute_time=compute_cp, compute_busy=cb, exposed=exposed,
                          comm_busy=busy, tasks=len(ids), sim_seconds=0.0, notes=notes)
