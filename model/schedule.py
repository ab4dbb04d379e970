"""Training schedule: MP(a)-DP(b)-PP(c) over the wafer's NPUs as a task graph in flowsim.

One training iteration (steady state) is built as a dependency graph of compute tasks
(``Sim.delay`` with roofline durations from :mod:`fred.model.compute`) and communication tasks
(``Sim.collective`` / ``Sim.transfer``); **all communication runs through the flow-level
network simulator** (:mod:`fred.model.flowsim`), so contention between concurrent groups, the
mesh's corner NPUs, edge-I/O hotspots and in-switch reduction all come from simulated routes.

Placement: worker (mp, dp, pp) sits on NPU ``mp + a * (pp + c * dp)``
(:mod:`fred.model.parallel_groups`).

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
pipeline fill/drain) or exposed communication of one kind (mp, dp, pp, stream, input). The parts
sum exactly to the iteration time.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from fred import FredError

from . import compute as C
from .params import TRAFFIC_VC, VC_PRIORITY
from .parallel_groups import parse_strategy, place

KINDS = ("compute", "mp", "dp", "pp", "stream", "input")
KIND_TITLES = {"compute": "compute", "mp": "MP", "dp": "DP", "pp": "PP", "stream": "weight streaming",
               "input": "input load"}
DEFAULT_GRANULARITY = 4      # DP buckets in the last microbatch's backward, per stage
DEFAULT_STREAM_STEPS = 4     # simulated folds per weight-streaming pass (see _fold / fold_plan)


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
    memory_per_npu: float = 0.0
    preemptions: int = 0                # flows that preempted a lower VC's phase in a FRED switch


class _Graph:
    """Records every task's kind and dependencies next to the simulator's task ids."""

    def __init__(self, sim):
        self.sim = sim
        # FRED switches arbitrate by virtual channel (MP > PP > DP); elsewhere all traffic is equal
        self.vc_priority = bool(getattr(sim.topo, "fred_switches", False))
        self.kind: dict[int, str] = {}
        self.deps: dict[int, tuple] = {}
        self.cdur: dict[int, float] = {}

    def _rec(self, tid, kind, deps):
        self.kind[tid] = kind
        self.deps[tid] = tuple(d for d in deps if d is not None)
        return tid

    def compute(self, dur, deps=(), label="compute", stage=0):
        deps = [d for d in deps if d is not None]
        t = self.sim.delay(max(0.0, float(dur)), deps=deps, label=label)
        self.cdur[t] = (float(dur), stage)
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

    def coll(self, op, groups, nbytes, deps, kind):
        deps = [d for d in deps if d is not None]
        groups = [list(g) for g in groups]
        if nbytes <= 0 or not groups:
            return self.join(deps) if deps else None
        if op not in ("io-broadcast", "io-reduce"):
            groups = [g for g in groups if len(g) > 1]
            if not groups:
                return self.join(deps) if deps else None
        arg = groups[0] if len(groups) == 1 else groups
        t = self.sim.collective(op, arg, float(nbytes), deps=deps, label=kind, priority=self.priority(kind))
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


def _chunk(layers, mb, a, npu, b):
    fwd = sum(C.layer_time(l, "fwd", mb, a, npu, b) for l in layers)
    bwd = sum(C.layer_time(l, "bwd", mb, a, npu, b) for l in layers)
    if a > 1:
        mpf = sum(l.mp_ar_fwd * l.act_bytes * mb for l in layers)
        mpb = sum(l.mp_ar_bwd * l.act_bytes * mb for l in layers)
    else:
        mpf = mpb = 0.0
    return _Chunk(list(layers), fwd, bwd, mpf, mpb, sum(l.params for l in layers), layers[-1].act_bytes * mb)


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

def stationary_memory(workload, abc, microbatches, samples_per_replica, stage_layers=None):
    """Bytes per NPU in weight-stationary mode for the busiest stage: fp16 weights + ZeRO-2
    shards of gradients and Adam state (16 B/param in total, 2 B replicated, 14 B / DP) +
    checkpointed activations of every microbatch in flight (GPipe): one activation per layer
    (per transformer layer: its input; ResNet: every layer's output). Recomputation FLOPs are
    not charged (the paper charges none either)."""
    a, b, c = abc
    if stage_layers is None:
        stage_layers = _runs(list(workload.layers), _balanced_split([1.0] * len(workload.layers), c))
    best = 0.0
    for layers in stage_layers:
        p = sum(l.params for l in layers) / a
        states = p * (workload.dtype_bytes + (C.MODEL_STATE_BYTES_PER_PARAM - workload.dtype_bytes) / b)
        acts = sum(l.act_bytes for l in layers if l.kind != "mlp") * samples_per_replica
        best = max(best, states + acts)
    return best


# ---- the schedule -----------------------------------------------------------------------------

def build_and_run(workload, topo, strategy=None, *, npu=None, microbatches=None, samples_per_replica=None,
                  mode=None, granularity=DEFAULT_GRANULARITY, stream_steps=DEFAULT_STREAM_STEPS, sim_factory=None,
                  check_memory=True):
    """Build one iteration of ``workload`` on topology ``topo`` and simulate it."""
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
    mb = B / m
    if c > len(workload.layers):
        raise FredError(f"PP({c}) exceeds the {len(workload.layers)} layers of {workload.name}")
    if not granularity or granularity < 1:
        raise FredError(f"granularity must be >= 1, got {granularity!r}")

    sim = (sim_factory or Sim)(topo)
    g = _Graph(sim)
    notes = []
    t0 = time.perf_counter()
    if mode == "weight-stationary":
        mem = _stationary(g, workload, abc, m, mb, B, npu, granularity, notes, check_memory)
    else:
        mem = _streaming(g, workload, abc, m, mb, B, npu, notes, stream_steps)
    res = sim.run()
    wall = time.perf_counter() - t0
    out = _analyse(g, res, abc, notes)
    out.sim_seconds = wall
    out.memory_per_npu = mem
    out.preemptions = int(getattr(res, "preemptions", 0))
    out.timing_source = str(getattr(res, "timing_source", "") or getattr(getattr(topo, "timing", None), "source", ""))
    return out


def _mp_groups(abc, s):
    a, b, c = abc
    return [[place(x, d, s, abc) for x in range(a)] for d in range(b)]


def _dp_groups(abc, s):
    a, b, c = abc
    return [[place(x, d, s, abc) for d in range(b)] for x in range(a)]


def _pp_pairs(abc, s_from, s_to):
    a, b, c = abc
    return [(place(0, d, s_from, abc), [place(x, d, s_to, abc) for x in range(a)]) for d in range(b)]


def _stationary(g, w, abc, m, mb, B, npu, G, notes, check_memory):
    a, b, c = abc
    dt = w.dtype_bytes
    layers = list(w.layers)
    stages = _runs(layers, _balanced_split(_weights(layers, a, npu, dt), c))
    mem = stationary_memory(w, abc, m, B, stages)
    if check_memory and mem > npu.hbm_capacity:
        raise FredError(f"{w.name} does not fit in HBM in weight-stationary mode with MP({a})-DP({b})-PP({c}): "
                        f"needs {mem / 1e9:.1f} GB per NPU > {npu.hbm_capacity / 1e9:.0f} GB "
                        f"(use weight-streaming mode or more MP/PP)")
    # a whole stage per microbatch and pass (compute and MP bytes summed; MP All-Reduces are on
    # the MP group's critical path either way), except the last microbatch's backward, which is
    # split into DP buckets: the stage's first layer alone (its bucket is the exposed DP tail)
    # and up to G-1 balanced chunks of the rest, each All-Reduced as soon as its gradients exist
    full = [_chunk(st, mb, a, npu, dt) for st in stages]
    buckets = []
    for st in stages:
        rest = st[1:]
        runs = [st[:1]] + (_runs(rest, _balanced_split(_weights(rest, a, npu, dt), max(1, G - 1))) if rest else [])
        buckets.append([_chunk(r, mb, a, npu, dt) for r in runs])
    mpg = [_mp_groups(abc, s) for s in range(c)]
    dpg = [_dp_groups(abc, s) for s in range(c)]

    # next iteration's input minibatch, prefetched while this one runs (weight stationary)
    g.coll("io-broadcast", mpg[0], B * w.input_bytes_per_sample, (), "input")

    fwd_done = [[None] * m for _ in range(c)]
    pp_f = [[None] * m for _ in range(c)]
    for j in range(m):
        for s in range(c):
            t = g.join([pp_f[s - 1][j] if s else None, fwd_done[s][j - 1] if j else None]) if (s or j) else None
            t = g.compute(full[s].fwd, [t], stage=s)
            if full[s].mp_fwd:
                t = g.coll("all-reduce", mpg[s], full[s].mp_fwd, [t], "mp")
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
            for ch in (reversed(buckets[s]) if j == m - 1 else [full[s]]):
                t = g.compute(ch.bwd, [t], stage=s)
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
    return mem


def _fold(steps, S):
    """Coarsen a pass of ``len(steps)`` layer groups into at most ``S`` simulated folds of
    consecutive groups (balanced sizes). Returns a list of lists of layer groups."""
    n = len(steps)
    S = max(1, int(S))
    if n <= S:
        return [[x] for x in steps]
    starts = _balanced_split([1.0] * n, S)
    return [steps[s:e] for s, e in zip(starts, starts[1:] + [n])]


def _streaming(g, w, abc, m, mb, B, npu, notes, S):
    a, b, c = abc
    dt = w.dtype_bytes
    units = _units(w)
    groups_ = [units[i:i + c] for i in range(0, len(units), c)]
    mpg = [_mp_groups(abc, s) for s in range(c)]
    dpg = [_dp_groups(abc, s) for s in range(c)]
    # memory: two layer groups' weight shards (double buffer) must fit; activations are noted
    biggest = max(sum(l.params for l in u) for u in units) * dt / a
    acts = sum(l.act_bytes for l in w.layers if l.kind != "mlp") * B / c
    mem = 2 * biggest + acts
    if 2 * biggest > npu.hbm_capacity:
        raise FredError(f"{w.name}: a streamed layer shard of {biggest / 1e9:.1f} GB does not fit twice in "
                        f"{npu.hbm_capacity / 1e9:.0f} GB HBM with MP({a})")
    if mem > npu.hbm_capacity:
        notes.append(f"checkpointed activations ({acts / 1e9:.0f} GB/NPU) exceed HBM; assumed to fit as in the paper")

    def part(grps, s):
        ls = [l for grp in grps if s < len(grp) for l in grp[s]]
        return _chunk(ls, mb, a, npu, dt) if ls else None

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

    def run_stage_chain(plan, t_in, prev, s_first, s_rest, phase):
        """One stage's fold for one microbatch: head compute, its MP All-Reduce, last compute,
        its MP All-Reduce. Returns (end, head's first group computed, last group computed):
        in backward the head is computed as its first group and the rest, so that the head's
        gradients can leave as soon as its first group has produced them (the layers after it
        keep producing theirs at the compute rate, which the fold cannot show)."""
        hc, lc, _, fc, rc = plan
        mpb = (lambda ch: ch.mp_fwd) if phase == "fwd" else (lambda ch: ch.mp_bwd)
        dur = (lambda ch: ch.fwd) if phase == "fwd" else (lambda ch: ch.bwd)
        t = g.join([s_first, t_in, prev])
        head_done = None
        if hc is not None:
            if phase == "bwd" and fc is not None and rc is not None:
                t = g.compute(dur(fc), [t], stage=s_idx[0])
                head_done = t
                t = g.compute(dur(rc), [t], stage=s_idx[0])
            else:
                t = g.compute(dur(hc), [t], stage=s_idx[0])
                head_done = t
            if mpb(hc):
                t = g.coll("all-reduce", mpg[s_idx[0]], mpb(hc), [t], "mp")
        t = g.compute(dur(lc), [t, s_rest], stage=s_idx[0])
        last_done = t
        if mpb(lc):
            t = g.coll("all-reduce", mpg[s_idx[0]], mpb(lc), [t], "mp")
        return t, head_done, last_done

    s_idx = [0]
    folds = _fold(groups_, S)
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
                t, _, _ = run_stage_chain(plan, t_in, last_on_stage[s], s1, s2, "fwd")
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
                t, hd, ld = run_stage_chain(st[s], t_in, last_on_stage[s], s1, s2, "bwd")
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
    return mem


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
