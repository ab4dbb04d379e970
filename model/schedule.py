"""Training schedule: MP(a)-DP(b)-PP(c) over the wafer's NPUs as a task graph in flowsim.

One training iteration (steady state) is built as a dependency graph of compute tasks
(``Sim.delay`` with roofline durations from :mod:`fred.model.compute`) and communication tasks
(``Sim.collective`` / ``Sim.transfer``); **all communication runs through the flow-level
network simulator** (:mod:`fred.model.flowsim`), so contention between concurrent groups, the
mesh's corner NPUs, edge-I/O hotspots and in-switch reduction all come from simulated routes.

Placement: worker (mp, dp, pp) sits on NPU ``mp + a * (pp + c * dp)``
(:mod:`fred.model.parallel_groups`).

Memory (:mod:`fred.model.memory`, :func:`memory_plan`): before simulating, the HBM each NPU of
the busiest stage needs is computed per memory policy; the policy asked for (default ``auto``:
the cheapest that fits, by simulation) decides what is recomputed (extra compute in backward)
and what is offloaded through the I/O controllers (``io-reduce`` out as forward produces it,
``io-broadcast`` back as backward consumes it, on the DP VC, in the flow simulator next to
weight streaming); a configuration no policy fits raises :class:`~fred.FredError`.

Weight-stationary mode (model states fit in HBM):

* layers are split into ``c`` pipeline stages of balanced compute;
* Megatron MP: each attention and MLP block ends with an All-Reduce of its output activation in
  forward and of its input gradient in backward (2 + 2 per transformer layer), on the critical
  path of the MP group; a stage's blocks for one microbatch are simulated as one compute task
  followed by one All-Reduce of the summed bytes (same bytes and the same serial order of
  compute and communication; only per-collective latency terms are merged);
* PP: at a stage boundary one NPU of the MP group multicasts the activation (forward) or the
  gradient (backward) to the whole MP group of the neighbouring stage (paper §8.1, note 8);
* pipeline schedule: **GPipe** (all microbatches forward, then all backward; gradients
  accumulate; the paper cites GPipe [Hua19] for its 8 microbatches);
* DP: in the last microbatch's backward each stage is cut into DP buckets (its first layer
  alone, then up to ``granularity - 1`` balanced chunks); a bucket's gradients are All-Reduced
  across the DP group (ZeRO-2: reduce-scatter + all-gather, the same bytes as an All-Reduce) as
  soon as they exist, overlapping the remaining backward compute and its MP traffic; a stage's
  DP collectives run one after another (one communication stream); then an HBM-bound optimizer
  step on the NPU's 1/DP shard; the iteration ends when every stage has stepped;
* the next iteration's input minibatch is prefetched from the I/O controllers during this one.

Weight-streaming mode (weights live off-wafer):

* the model is streamed in per layer group: ``c`` consecutive layers at a time, one per PP
  stage (paper §7.3), each MP shard broadcast from the 18 I/O controllers to the ``b`` NPUs of
  its DP group (``io-broadcast``); double-buffered (a group streams while the previous one
  computes); streamed again in reverse order for backward; each group's gradients are reduced
  across DP on the way out to the I/O controllers (``io-reduce``);
* MP All-Reduces as above; PP transfers between consecutive layers (stage c-1 hands back to
  stage 0 for the next layer group);
* the input minibatch is loaded at the start of the iteration (the I/O controllers are busy
  streaming during the previous one, so it cannot be prefetched -- paper §8.2);
* simulation cost: a pass over the layer groups is coarsened into at most ``stream_steps``
  simulated folds of consecutive groups; inside a fold the stream, compute, MP and PP bytes are
  summed. A fold's first group is streamed in on its own and its head (all groups but the last)
  computes as soon as that group is in; in backward the head's gradients leave as soon as its
  first group is computed (the head is two compute tasks, first group and rest). For identical
  layer groups and PP = 1 a fold then finishes exactly when layer-by-layer streaming would, in
  both directions; what the fold loses is the overlap of each group's gradients with that
  group's own MP All-Reduce (on the mesh they share links: ~1% faster folded).

DP replicas are symmetric and are simulated in lockstep: one compute task stands for the same
compute on every replica, and each collective task covers the groups of all replicas at once
(it completes when the slowest replica's copy does), so inter-replica contention is simulated.

The result's breakdown is the critical path through the graph: every instant of the iteration is
attributed to the task that the last-finishing chain was waiting for -- compute (including
pipeline fill/drain) or exposed communication of one kind (mp, dp, pp, stream, input, offload). The parts
sum exactly to the iteration time.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from fred import FredError

from . import compute as C
from . import memory as M
from .params import TRAFFIC_VC, VC_PRIORITY
from .parallel_groups import parse_strategy, place

KINDS = ("compute", "mp", "dp", "pp", "stream", "input", "offload")
DEFAULT_GRANULARITY = 4      # DP buckets in the last microbatch's backward, per stage
DEFAULT_STREAM_STEPS = 4     # simulated folds per weight-streaming pass (see _fold / fold_plan)
OFFLOAD_RUNS = 4             # simulated offload pieces per stage and fold: runs of microbatches
STREAM_BUFFERS = 3           # ours: streamed shards held per NPU: weights in use + next (double
                             # buffer) + the gradients of the unit in backward (memory_plan)


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
    memory_policy: str = "none"         # fred.model.memory policy applied
    memory_before: float = 0.0          # bytes per NPU with every activation kept in HBM (policy none)
    memory_states: float = 0.0          # of which model states (or streamed weight/gradient buffers)
    offload_bytes: float = 0.0          # activation bytes per NPU offloaded (each also read back)
    recompute_busy: float = 0.0         # recomputation seconds of the busiest stage (part of compute)
    microbatches: int = 0               # microbatches simulated (auto may split them to fit)
    memory_candidates: list = field(default_factory=list)


class _Graph:
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

    def coll(self, op, groups, nbytes, deps, kind, chunks=None):
        deps = [d for d in deps if d is not None]
        groups = [list(g) for g in groups]
        if nbytes <= 0 or not groups:
            return self.join(deps) if deps else None
        if op not in ("io-broadcast", "io-reduce"):
            groups = [g for g in groups if len(g) > 1]
            if not groups:
                return self.join(deps) if deps else None
        arg = groups[0] if len(groups) == 1 else groups
        t = self.sim.collective(op, arg, float(nbytes), deps=deps, label=kind, priority=self.priority(kind),
                                chunks=chunks)
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


# ---- layer partitioning -----------------------------------------------------------------------

def _balanced_split(weights, parts):
    """Split non-negative ``weights`` into ``parts`` contiguous non-empty runs of nearly equal
    sums; returns the start index of each run."""
    n = len(weights)
    parts = max(1, min(int(parts), n))
    prefix = [0.0]
    for x in weights:
        prefix.append(prefix[-1] + x)
    total = prefix[-1]
    starts = [0]
    for k in range(1, parts):
        target = total * k / parts
        lo, hi = starts[-1] + 1, n - (parts - k)
        best = min(range(lo, hi + 1), key=lambda i: (abs(prefix[i] - target), i))
        starts.append(best)
    return starts


def _runs(items, starts):
    return [items[s:e] for s, e in zip(starts, starts[1:] + [len(items)])]


@dataclass
class _Chunk:
    layers: list
    fwd: float          # compute seconds per microbatch
    bwd: float
    mp_fwd: float       # MP All-Reduce bytes per microbatch (forward), merged over the chunk
    mp_bwd: float
    params: float
    out_act: float      # output activation bytes per microbatch
    rec: float = 0.0    # recomputation seconds per microbatch (charged in backward)


def _chunk(layers, mb, a, npu, b, level="none"):
    fwd = sum(C.layer_time(l, "fwd", mb, a, npu, b) for l in layers)
    bwd = sum(C.layer_time(l, "bwd", mb, a, npu, b) for l in layers)
    rec = sum(M.recompute_time(l, level, mb, a, npu, b) for l in layers)
    if a > 1:
        mpf = sum(l.mp_ar_fwd * l.act_bytes * mb for l in layers)
        mpb = sum(l.mp_ar_bwd * l.act_bytes * mb for l in layers)
    else:
        mpf = mpb = 0.0
    return _Chunk(list(layers), fwd, bwd, mpf, mpb, sum(l.params for l in layers), layers[-1].act_bytes * mb, rec)


def _weights(layers, a, npu, b):
    return [C.layer_time(l, "fwd", 1.0, a, npu, b) + C.layer_time(l, "bwd", 1.0, a, npu, b) for l in layers]


def _units(workload):
    """Streaming units: a transformer layer = its attention + MLP blocks (the embedding joins the
    first, the logits the last); other workloads stream layer by layer (parameter-free layers
    join the previous unit)."""
    units, pending = [], []
    for l in workload.layers:
        if workload.kind == "transformer":
            if l.kind == "attention" or not units and l.kind != "embedding":
                units.append(pending + [l])
                pending = []
            elif l.kind == "embedding" and not units:
                pending.append(l)
            else:
                units[-1].append(l)
        else:
            if l.params == 0 and units:
                units[-1].append(l)
            elif l.params == 0:
                pending.append(l)
            else:
                units.append(pending + [l])
                pending = []
    if pending:
        if units:
            units[-1] += pending
        else:
            units.append(pending)
    return units


# ---- memory ------------------------------------------------------------------------------------

def _stage_units(layers):
    """A stage's layers grouped into units (a new unit at every non-MLP layer: a transformer
    layer = attention + MLP; elsewhere one layer each): what full recomputation recomputes at once."""
    units = []
    for l in layers:
        if l.kind == "mlp" and units:
            units[-1].append(l)
        else:
            units.append([l])
    return units


@dataclass
class _Layout:
    """Everything about the split of the work that does not depend on the microbatch count:
    weight stationary -- stages and their DP buckets; weight streaming -- layer groups and folds."""
    mode: str
    stages: list = None           # stationary: layers per stage
    buckets: list = None          # stationary: per stage, runs of layers (first layer alone, then G-1)
    units: list = None            # streaming: streaming units
    folds: list = None            # streaming: folds of layer groups


def _layout(w, abc, mode, npu, G, S):
    a, b, c = abc
    dt = w.dtype_bytes
    if mode == "weight-stationary":
        layers = list(w.layers)
        stages = _runs(layers, _balanced_split(_weights(layers, a, npu, dt), c))
        buckets = []
        for st in stages:
            rest = st[1:]
            runs = [st[:1]] + (_runs(rest, _balanced_split(_weights(rest, a, npu, dt), max(1, G - 1))) if rest else [])
            buckets.append(runs)
        return _Layout(mode, stages=stages, buckets=buckets)
    units = _units(w)
    groups_ = [units[i:i + c] for i in range(0, len(units), c)]
    return _Layout(mode, units=units, folds=_fold(groups_, S))


def _offload_layout(layout):
    """The layout offloading is simulated with: in weight streaming the last fold of forward --
    the first of backward, whose activations are needed first -- is split into folds of
    geometrically falling size (..., 4, 2, 1 layer groups), so the piece backward waits for at
    the turn is one layer group, as at layer granularity, and each later piece's reload overlaps
    the backward of the smaller pieces before it."""
    if layout.mode != "weight-streaming" or not layout.folds:
        return layout
    last = layout.folds[-1]
    tail, size = [], 1
    while len(last) >= 3 * size:                  # keep the first piece at least twice the next
        tail.insert(0, last[len(last) - size:])
        last = last[:len(last) - size]
        size *= 2
    tail.insert(0, last)
    return _Layout(layout.mode, units=layout.units, folds=layout.folds[:-1] + tail)


def _mb_groups(m, most=OFFLOAD_RUNS):
    """Microbatches 0..m-1 in at most ``most`` runs of consecutive ones (offload granularity)."""
    if m <= 0:
        return []
    starts = _balanced_split([1.0] * m, min(m, most))
    return [list(range(a, b)) for a, b in zip(starts, starts[1:] + [m])]


def _fold_stage_layers(fold, s):
    return [l for grp in fold if s < len(grp) for l in grp[s]]


def memory_plan(w, abc, layout, policy, m, B, npu) -> M.MemoryPlan:
    """Memory per NPU of every stage under ``policy`` at ``m`` microbatches of ``B / m`` samples
    (see :mod:`fred.model.memory`). Stored-activation pieces follow the simulated granularity:
    stationary -- runs of microbatches (:func:`_mb_groups`), the last microbatch by DP bucket;
    streaming -- (fold, run of microbatches); listed in the order backward needs them, which is the order offloading keeps
    them in HBM. The staging buffers are counted at unit granularity (two units of one
    microbatch); the simulation moves whole pieces (a coarsening of time, not of bytes)."""
    a, b, c = abc
    dt = w.dtype_bytes
    mb = B / m
    lv = policy.recompute
    per = lambda layers: sum(M.saved_bytes(l, lv, a) for l in layers) * mb
    stages = []
    if layout.mode == "weight-stationary":
        for st, bks in zip(layout.stages, layout.buckets):
            p = sum(l.params for l in st) / a
            states = p * (dt + (C.MODEL_STATE_BYTES_PER_PARAM - dt) / b)
            # pieces: runs of microbatches, the last microbatch by DP bucket (as simulated)
            pieces = [per(st) * len(grp) for grp in _mb_groups(m - 1)] + [per(bk) for bk in reversed(bks)]
            units = _stage_units(st)
            transient = max(M.transient_bytes(u, lv, a) for u in units) * mb
            staging = 2 * max(per(u) for u in units)
            stages.append(M.plan_stage(states, pieces, transient, staging, npu.hbm_capacity, policy.offload))
        return M.MemoryPlan(policy, m, stages)
    # weight streaming: the largest streamed shard, double-buffered in (weights), plus the
    # gradient shard of the unit in backward (it drains out while the next unit computes)
    biggest = max(sum(l.params for l in u) for u in layout.units) * dt / a
    for s in range(c):
        mine = [u for i, u in enumerate(layout.units) if i % c == s]
        if not mine:                       # more stages than units: an idle stage
            stages.append(M.plan_stage(0.0, [], 0.0, 0.0, npu.hbm_capacity, False))
            continue
        pieces = [per(_fold_stage_layers(f, s)) * len(grp) for f in reversed(layout.folds) for grp in _mb_groups(m)]
        transient = max(M.transient_bytes(u, lv, a) for u in mine) * mb
        staging = 2 * max(per(u) for u in mine)
        stages.append(M.plan_stage(STREAM_BUFFERS * biggest, pieces, transient, staging, npu.hbm_capacity, policy.offload))
    return M.MemoryPlan(policy, m, stages)


def stationary_memory(workload, abc, microbatches, samples_per_replica, npu=None, policy="none",
                      granularity=DEFAULT_GRANULARITY):
    """Bytes per NPU (busiest stage) of ``workload`` in weight-stationary mode under memory
    ``policy`` (default ``none``: every activation the backward pass needs stays in HBM)."""
    npu = npu or C.default_npu()
    layout = _layout(workload, abc, "weight-stationary", npu, granularity, DEFAULT_STREAM_STEPS)
    return memory_plan(workload, abc, layout, M.POLICIES[policy], int(microbatches), float(samples_per_replica),
                       npu).need


def _io_bandwidth(topo) -> float:
    """Payload bytes/s the I/O controllers can send (= receive) in all."""
    io = set(getattr(topo, "io_nodes", ()))
    if not io:
        return 0.0
    bw = sum(float(x) for src, x in zip(topo.link_src, topo.link_bw) if int(src) in io)
    return bw * getattr(topo, "link_efficiency", 1.0)


def _lower_bound(w, abc, layout, plan, B, npu, io_bw):
    """A lower bound of the iteration under ``plan``: the busiest stage's compute (forward,
    backward and recomputation of every microbatch); and, with offloading, the time the I/O
    controllers need to take in a stage's offloaded activations before its last forward piece
    may start (all but two pieces, the staging buffers), followed by the stage's backward --
    per stage, and for all stages together (they share the I/O controllers)."""
    a, b, c = abc
    per_stage = _stage_compute(w, abc, layout, plan, B, npu)
    bound = max(f + bw for f, bw in per_stage)
    if plan.offloaded and io_bw > 0:
        drains = []
        for sm in plan.stages:
            pieces = sorted((x for x in sm.offload if x > 0), reverse=True)
            drains.append(max(0.0, sum(pieces[2:])) * a * b / io_bw)
        # weight streaming starts every backward after the whole forward; GPipe each stage's
        after = (max if layout.mode == "weight-streaming" else min)(bw for _, bw in per_stage)
        bound = max(bound, max(d + bw for d, (_, bw) in zip(drains, per_stage)), sum(drains) + after)
    return bound


def _stage_compute(w, abc, layout, plan, B, npu):
    """(forward, backward incl. recomputation) compute seconds of every stage's NPU."""
    a, b, c = abc
    m = plan.microbatches
    lv = plan.policy.recompute
    if layout.mode == "weight-stationary":
        per_stage = list(layout.stages)
    else:
        per_stage = [[l for i, u in enumerate(layout.units) if i % c == s for l in u] for s in range(c)]
    out = []
    for layers in per_stage:
        if layers:
            ch = _chunk(layers, B / m, a, npu, w.dtype_bytes, lv)
            out.append((m * ch.fwd, m * (ch.bwd + ch.rec)))
        else:
            out.append((0.0, 0.0))
    return out


def _candidates(plans):
    """The fitting plans worth simulating: ``none`` alone if it fits (every other policy only adds
    work); drop plans another fitting plan dominates (selective < full recomputation; an
    offload plan that offloads nothing equals its plan without offload)."""
    fit = {p.policy.name: p for p in plans if p.fits}
    if "none" in fit:
        return [fit["none"]]
    drop = set()
    if "selective" in fit:
        drop |= {"recompute", "selective+offload", "recompute+offload"}
    if "recompute" in fit:
        drop |= {"recompute+offload"}
    return [p for n, p in fit.items() if n not in drop]


# ---- the schedule -----------------------------------------------------------------------------

def build_and_run(workload, topo, strategy=None, *, npu=None, microbatches=None, samples_per_replica=None,
                  mode=None, granularity=DEFAULT_GRANULARITY, stream_steps=DEFAULT_STREAM_STEPS, sim_factory=None,
                  memory=M.DEFAULT_POLICY):
    """Build one iteration of ``workload`` on topology ``topo`` and simulate it.

    ``memory``: the memory policy (:mod:`fred.model.memory`): ``auto`` (default), ``none``,
    ``selective``, ``recompute``, ``offload``, ``selective+offload``, ``recompute+offload``.
    A configuration the policy cannot fit into HBM raises :class:`~fred.FredError`."""
    from .flowsim import Sim

    npu = npu or C.default_npu()
    abc = parse_strategy(strategy or workload.strategy)
    a, b, c = abc
    n = getattr(topo, "npus", None)
    n = n() if callable(n) else n
    if n is not None and a * b * c != n:
        raise FredError(f"strategy MP({a})-DP({b})-PP({c}) uses {a * b * c} NPUs, but the fabric has {n}")
    mode = workload.with_mode(mode).mode if mode else workload.mode
    m = int(microbatches or (workload.microbatches if (c > 1 or mode == "weight-streaming") else 1))
    if m < 1:
        raise FredError(f"microbatches must be >= 1, got {microbatches!r}")
    B = float(samples_per_replica or workload.samples_per_replica)
    if not B > 0:
        raise FredError(f"samples per replica must be > 0, got {samples_per_replica!r}")
    if c > len(workload.layers):
        raise FredError(f"PP({c}) exceeds the {len(workload.layers)} layers of {workload.name}")
    if not granularity or granularity < 1:
        raise FredError(f"granularity must be >= 1, got {granularity!r}")
    policy = M.check_policy(memory)
    layout = _layout(workload, abc, mode, npu, granularity, stream_steps)
    off_layout = _offload_layout(layout)
    lay = lambda pol: off_layout if pol.offload else layout
    label = f"MP({a})-DP({b})-PP({c})"
    before = memory_plan(workload, abc, layout, M.POLICIES["none"], m, B, npu)

    def smallest_fit(pol):
        """``pol``'s plan at the smallest microbatch count >= m that fits (doubling, down to one
        sample per microbatch), else its least-needing plan (not fitting)."""
        mm, tried = m, []
        while True:
            p = memory_plan(workload, abc, lay(pol), pol, mm, B, npu)
            tried.append(p)
            if p.fits:
                return p
            nxt = min(2 * mm, max(mm, int(B)))
            if nxt <= mm:
                return min(tried, key=lambda x: x.need)
            mm = nxt

    pols = list(M.POLICIES.values()) if policy == "auto" else [M.POLICIES[policy]]
    considered = [smallest_fit(pol) for pol in pols]
    cands = _candidates(considered)
    if not cands:
        raise M.refusal(workload.name, label, mode, npu.hbm_capacity, considered, m)
    # cheapest by simulation; a candidate whose lower bound (its compute, its offload I/O) is
    # not below the best simulated iteration is not simulated
    io_bw = _io_bandwidth(topo)
    bound = {id(p): _lower_bound(workload, abc, lay(p.policy), p, B, npu, io_bw) for p in cands}
    cands.sort(key=lambda p: bound[id(p)])
    def simulate(plan):
        sim = (sim_factory or Sim)(topo)
        g = _Graph(sim)
        notes = []
        t0 = time.perf_counter()
        mb = B / plan.microbatches
        if mode == "weight-stationary":
            _stationary(g, workload, abc, plan.microbatches, mb, B, npu, lay(plan.policy), plan)
        else:
            _streaming(g, workload, abc, plan.microbatches, mb, B, npu, lay(plan.policy), plan)
        res = sim.run()
        out = _analyse(g, res, abc, notes)
        out.sim_seconds = time.perf_counter() - t0
        out.preemptions = int(getattr(res, "preemptions", 0))
        out.timing_source = str(getattr(res, "timing_source", "") or getattr(getattr(topo, "timing", None), "source", ""))
        out.recompute_busy = max(g.rec.values(), default=0.0)
        return out

    results = []
    for plan in cands:
        if results and bound[id(plan)] >= min(r.iteration_time for _, r in results):
            continue
        results.append((plan, simulate(plan)))
    plan, out = min(results, key=lambda pr: pr[1].iteration_time)   # ties: the first (fewest mechanisms)
    out.sim_seconds = sum(r.sim_seconds for _, r in results)
    sims = {id(p): r.iteration_time for p, r in results}
    out.microbatches = plan.microbatches
    out.memory_policy = plan.policy.name
    out.memory_before = before.need
    out.memory_per_npu = plan.need
    out.memory_states = plan.states
    out.offload_bytes = plan.offloaded
    out.memory_candidates = [{"policy": p.policy.name, "microbatches": p.microbatches, "need_bytes": p.need,
                              "fits": p.fits, "iteration_time": sims.get(id(p))} for p in considered]
    if plan.policy.name != "none":
        why = f"needs {before.need / 1e9:.0f} GB/NPU with all activations in HBM" if not before.fits else "requested"
        split = (f", microbatches {m} -> {plan.microbatches}" if plan.microbatches != m else "")
        out.notes.append(f"memory: {why}; {plan.policy.description}{split}: {plan.need / 1e9:.0f} GB/NPU"
                         + (f", {plan.offloaded / 1e9:.0f} GB/NPU offloaded" if plan.offloaded else ""))
    return out


def _mp_groups(abc, s):
    a, b, c = abc
    return [[place(x, d, s, abc) for x in range(a)] for d in range(b)]


def _dp_groups(abc, s):
    a, b, c = abc
    return [[place(x, d, s, abc) for d in range(b)] for x in range(a)]


def _stage_npus(abc, s):
    """Every NPU of pipeline stage ``s`` (all MP members of all DP replicas), one group each:
    activation offload/reload moves each NPU's own data, spread over all I/O controllers."""
    a, b, c = abc
    return [[place(x, d, s, abc)] for d in range(b) for x in range(a)]


def _pp_pairs(abc, s_from, s_to):
    a, b, c = abc
    return [(place(0, d, s_from, abc), [place(x, d, s_to, abc) for x in range(a)]) for d in range(b)]


class _Offload:
    """Activation offload/reload tasks of one stage, both pipelined with the compute: a piece
    streams out as its forward produces it (its offload starts with the piece's forward, after
    the previous piece's offload: one stream per stage) and streams back in as its backward
    consumes it (the backward starts with the reload and ends no earlier than the reload); the
    reload waits for the offload and for the end of the forward that produced the piece. Two
    staging buffers: a piece's forward waits for the offload of the piece two offloaded pieces
    before it, a piece's reload for the backward of the piece two before it (in backward
    order), so at most two pieces are in transit per direction."""

    def __init__(self, g, abc, s):
        self.g, self.npus = g, _stage_npus(abc, s)
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


def _stationary(g, w, abc, m, mb, B, npu, layout, plan):
    a, b, c = abc
    dt = w.dtype_bytes
    lv = plan.policy.recompute
    stages, bks = layout.stages, layout.buckets
    # a whole stage per microbatch and pass (compute and MP bytes summed; MP All-Reduces are on
    # the MP group's critical path either way), except the last microbatch's backward, which is
    # split into DP buckets: the stage's first layer alone (its bucket is the exposed DP tail)
    # and up to G-1 balanced chunks of the rest, each All-Reduced as soon as its gradients exist.
    # With offloading, the last microbatch's forward runs by the same buckets too (the pieces).
    full = [_chunk(st, mb, a, npu, dt, lv) for st in stages]
    buckets = [[_chunk(r, mb, a, npu, dt, lv) for r in runs] for runs in bks]
    nb = [len(x) for x in buckets]
    # bytes offloaded per stage and piece; plan pieces are in backward order: runs of
    # microbatches 0..m-2 (a run leaves after its last microbatch's forward and comes back before
    # its first one's backward), then the last microbatch bucket by bucket
    runs = _mb_groups(m - 1)
    run_of = {j: r for r, grp in enumerate(runs) for j in grp}
    firsts = {grp[0] for grp in runs}
    lasts = {grp[-1] for grp in runs}
    key = lambda j, k: ("run", run_of[j]) if j < m - 1 else (m - 1, k)
    off = []
    for s, sm in enumerate(plan.stages):
        d = {("run", r): sm.offload[r] for r in range(len(runs))}
        for r in range(nb[s]):
            d[(m - 1, nb[s] - 1 - r)] = sm.offload[len(runs) + r]
        off.append(d)
    offloading = any(x > 0 for d in off for x in d.values())
    io = [_Offload(g, abc, s) for s in range(c)]
    mpg = [_mp_groups(abc, s) for s in range(c)]
    dpg = [_dp_groups(abc, s) for s in range(c)]

    # next iteration's input minibatch, prefetched while this one runs (weight stationary)
    g.coll("io-broadcast", mpg[0], B * w.input_bytes_per_sample, (), "input")

    fwd_done = [[None] * m for _ in range(c)]
    pp_f = [[None] * m for _ in range(c)]
    for j in range(m):
        for s in range(c):
            t = g.join([pp_f[s - 1][j] if s else None, fwd_done[s][j - 1] if j else None]) if (s or j) else None
            for k, ch in (enumerate(buckets[s]) if offloading and j == m - 1 else [(None, full[s])]):
                nbytes = off[s].get(key(j, k), 0.0) if offloading else 0.0
                if nbytes > 0 and (j == m - 1 or j in firsts):
                    t = g.join([t, io[s].gate_forward()])
                    io[s].offload(key(j, k), nbytes, t)
                t = g.compute(ch.fwd, [t], stage=s)
                if ch.mp_fwd:
                    t = g.coll("all-reduce", mpg[s], ch.mp_fwd, [t], "mp")
                if nbytes > 0 and (j == m - 1 or j in lasts):
                    io[s].produced(key(j, k), t)
            fwd_done[s][j] = t
            if s < c - 1:
                pp_f[s][j] = g.multicasts(_pp_pairs(abc, s, s + 1), full[s].out_act, [t], "pp")

    bwd_done = [[None] * m for _ in range(c)]
    pp_b = [[None] * m for _ in range(c)]
    last_dp = [None] * c
    for j in range(m):
        for s in reversed(range(c)):
            deps = [fwd_done[s][m - 1]]
            if j:
                deps.append(bwd_done[s][j - 1])
            if s < c - 1:
                deps.append(pp_b[s + 1][j])
            t = g.join(deps)
            for k, ch in (reversed(list(enumerate(buckets[s]))) if j == m - 1 else [(None, full[s])]):
                first = j == m - 1 or j in firsts
                if offloading and first:
                    r0, io[s].pending = io[s].reload(key(j, k), off[s].get(key(j, k), 0.0))
                    t = g.join([t, r0])
                t = g.compute(ch.bwd + ch.rec, [t], stage=s, rec=ch.rec)
                if offloading and (j == m - 1 or j in lasts):
                    t = g.join([t, io[s].pending])
                    io[s].backward_done(t)
                grads = t
                if ch.mp_bwd:
                    t = g.coll("all-reduce", mpg[s], ch.mp_bwd, [t], "mp")
                if j == m - 1 and b > 1 and ch.params:
                    last_dp[s] = g.coll("all-reduce", dpg[s], ch.params * dt / a, [grads, last_dp[s]], "dp")
            bwd_done[s][j] = t
            if s > 0:
                pp_b[s][j] = g.multicasts(_pp_pairs(abc, s, s - 1), full[s - 1].out_act, [t], "pp")
    ends = []
    for s in range(c):
        p = full[s].params / a
        ends.append(g.compute(C.optimizer_time(p, b, npu), [bwd_done[s][m - 1], last_dp[s]], "optimizer", stage=s))
    g.join(ends)


def _fold(steps, S):
    """Coarsen a pass of ``len(steps)`` layer groups into at most ``S`` simulated folds of
    consecutive groups (balanced sizes). Returns a list of lists of layer groups."""
    n = len(steps)
    S = max(1, int(S))
    if n <= S:
        return [[x] for x in steps]
    starts = _balanced_split([1.0] * n, S)
    return [steps[s:e] for s, e in zip(starts, starts[1:] + [n])]


def _streaming(g, w, abc, m, mb, B, npu, layout, mplan):
    a, b, c = abc
    dt = w.dtype_bytes
    lv = mplan.policy.recompute
    mpg = [_mp_groups(abc, s) for s in range(c)]
    dpg = [_dp_groups(abc, s) for s in range(c)]
    folds = layout.folds
    nf = len(folds)
    # bytes offloaded per (stage, fold, run of microbatches); plan pieces are in backward order.
    # A run's activations leave after its last microbatch and come back before its first one.
    runs = _mb_groups(m)
    first = {grp[0]: r for r, grp in enumerate(runs)}
    last = {grp[-1]: r for r, grp in enumerate(runs)}
    off = [{(nf - 1 - i // len(runs), i % len(runs)): x for i, x in enumerate(sm.offload)} for sm in mplan.stages]
    offloading = any(x > 0 for d in off for x in d.values())
    io = [_Offload(g, abc, s) for s in range(c)]

    def part(grps, s):
        ls = [l for grp in grps if s < len(grp) for l in grp[s]]
        return _chunk(ls, mb, a, npu, dt, lv) if ls else None

    def fold_plan(fold):
        """Per stage: (head chunk or None, last chunk, PP bytes out, the head's first group and
        the rest of the head); stream bytes of the first group and of the rest. The first k-1
        groups compute as soon as the first group's weights are in; the last group waits for the
        whole fold -- for identical layer groups this gives exactly the layer-by-layer finish time
        max(prev + k c, t + s + k c, t + k s + c). Backward mirrors it for the gradients going
        out: the head's gradients leave once its first group is computed, the last group's once
        it is (see ``_streaming``), which again finishes exactly when layer by layer would:
        max(prev + k s, t + c + k s, t + k c + s)."""
        k = len(fold)
        head, last = fold[:-1], fold[-1:]
        stages = []
        for s in range(c):
            lc = part(last, s)
            if lc is None:
                continue
            hc = part(head, s) if k > 1 else None
            hs = [grp for grp in head if s < len(grp)]
            fc, rc = (part(hs[:1], s), part(hs[1:], s)) if hc is not None else (None, None)
            pp_out = sum(grp[s][-1].act_bytes for grp in fold if s < len(grp)) * mb
            stages.append((hc, lc, pp_out, fc, rc))
        wb = lambda grps: sum(l.params for grp in grps for u in grp for l in u) * dt / a / max(1, len(stages))
        return stages, wb(fold[:1]), wb(fold[1:]), wb(head), wb(last)

    inp = g.coll("io-broadcast", mpg[0], B * w.input_bytes_per_sample, (), "input")
    last_stream = [None]

    def stream(nbytes, nst):
        # every stage's shard at once (one collective; stages differ only by embedding/logits);
        # the I/O controllers stream continuously (prefetch limited by I/O bandwidth only)
        if nbytes <= 0:
            return last_stream[0]
        groups = [grp for s in range(nst) for grp in dpg[s]]
        t = g.coll("io-broadcast", groups, nbytes, [last_stream[0]], "stream")
        last_stream[0] = t
        return t

    def run_stage_chain(plan, t_in, prev, s_first, s_rest, phase, extra=None):
        """One stage's fold for one microbatch: head compute, its MP All-Reduce, last compute,
        its MP All-Reduce. Returns (end, head's first group computed, last group computed):
        in backward the head is computed as its first group and the rest, so that the head's
        gradients can leave as soon as its first group has produced them (the layers after it
        keep producing theirs at the compute rate, which the fold cannot show). ``extra``: one
        more task the chain waits for (an offload gate or a reload's start)."""
        hc, lc, _, fc, rc = plan
        mpb = (lambda ch: ch.mp_fwd) if phase == "fwd" else (lambda ch: ch.mp_bwd)
        dur = (lambda ch: ch.fwd) if phase == "fwd" else (lambda ch: ch.bwd + ch.rec)
        rec = (lambda ch: 0.0) if phase == "fwd" else (lambda ch: ch.rec)
        t = g.join([s_first, t_in, prev, extra])
        started[0] = t
        head_done = None
        if hc is not None:
            if phase == "bwd" and fc is not None and rc is not None:
                t = g.compute(dur(fc), [t], stage=s_idx[0], rec=rec(fc))
                head_done = t
                t = g.compute(dur(rc), [t], stage=s_idx[0], rec=rec(rc))
            else:
                t = g.compute(dur(hc), [t], stage=s_idx[0], rec=rec(hc))
                head_done = t
            if mpb(hc):
                t = g.coll("all-reduce", mpg[s_idx[0]], mpb(hc), [t], "mp")
        t = g.compute(dur(lc), [t, s_rest], stage=s_idx[0], rec=rec(lc))
        last_done = t
        if mpb(lc):
            t = g.coll("all-reduce", mpg[s_idx[0]], mpb(lc), [t], "mp")
        return t, head_done, last_done

    s_idx = [0]
    started = [None]              # the start of the last chain's first compute
    plans = [fold_plan(f) for f in folds]
    last_on_stage = [None] * c
    # ---- forward
    prev_out = [inp] * m
    for k, (st, b1, b2, _, _) in enumerate(plans):
        s1 = stream(b1, len(st))
        s2 = stream(b2, len(st)) if b2 > 0 else s1
        for j in range(m):
            t_in = prev_out[j]
            for s, plan in enumerate(st):
                s_idx[0] = s
                pp_out = plan[2]
                r = first.get(j, last.get(j))
                nbytes = off[s].get((k, r), 0.0) if offloading else 0.0
                gate = io[s].gate_forward() if nbytes > 0 and j in first else None
                t, _, _ = run_stage_chain(plan, t_in, last_on_stage[s], s1, s2, "fwd", gate)
                if nbytes > 0 and j in first:
                    io[s].offload((k, r), nbytes, started[0])
                if nbytes > 0 and j in last:
                    io[s].produced((k, r), t)
                last_on_stage[s] = t
                more = s < len(st) - 1 or k < len(plans) - 1
                t_in = g.multicasts(_pp_pairs(abc, s, (s + 1) % c), pp_out, [t], "pp") if (c > 1 and more) else t
            prev_out[j] = t_in
    fwd_end = g.join(prev_out + [x for x in last_on_stage if x is not None])

    # ---- backward (reverse order), gradients reduced over DP on their way out
    prev_in = [fwd_end] * m
    last_out = [None]

    def grads_out(nbytes, nst, dep):
        if nbytes <= 0 or dep is None:
            return
        groups = [grp for s in range(nst) for grp in dpg[s]]
        last_out[0] = g.coll("io-reduce", groups, nbytes, [dep, last_out[0]], "stream")

    rplans = [fold_plan(list(reversed(f))) for f in reversed(folds)]
    for k, (st, b1, b2, bh, bl) in enumerate(rplans):
        s1 = stream(b1, len(st))
        s2 = stream(b2, len(st)) if b2 > 0 else s1
        heads, lasts = [], []
        for j in range(m):
            t_in = prev_in[j]
            for s in reversed(range(len(st))):
                s_idx[0] = s
                key = (nf - 1 - k, first.get(j, last.get(j)))
                r0 = None
                if offloading and j in first:
                    r0, io[s].pending = io[s].reload(key, off[s].get(key, 0.0))
                t, hd, ld = run_stage_chain(st[s], t_in, last_on_stage[s], s1, s2, "bwd", r0)
                if offloading and j in last:
                    t = g.join([t, io[s].pending])
                    io[s].backward_done(t)
                if j == m - 1:
                    heads.append(hd)
                    lasts.append(ld)
                last_on_stage[s] = t
                if c > 1 and (s > 0 or k < len(rplans) - 1):
                    src = st[s - 1] if s > 0 else rplans[k + 1][0][-1]
                    t_in = g.multicasts(_pp_pairs(abc, s, (s - 1) % c), src[2], [t], "pp")
                else:
                    t_in = t
            prev_in[j] = t_in
        # the head groups' gradients leave once the head's first group is computed (on every
        # stage, last microbatch), the last group's once it is computed and the head's are out
        hd = [x for x in heads if x is not None]
        grads_out(bh, len(st), g.join(hd) if hd else None)
        grads_out(bl, len(st), g.join(lasts))
    g.join([last_out[0]] + [x for x in last_on_stage if x is not None])


# ---- critical path -----------------------------------------------------------------------------

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


def _analyse(g, res, abc, notes):
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
