"""Training schedule: MP(a)-DP(b)-PP(c) over the wafer's NPUs as a task graph in flowsim.

One training iteration (steady state) is built as a dependency graph of compute tasks
(``Sim.delay`` with roofline durations from :mod:`fred.model.compute`) and communication tasks
(``Sim.collective`` / ``Sim.transfer``); **all communication runs through the flow-level
network simulator** (:mod:`fred.model.flowsim`), so contention between concurrent groups, the
mesh's corner NPUs, edge-I/O hotspots and in-switch reduction all come from simulated routes.

Placement: worker (mp, dp, pp) sits on NPU ``mp + a * (pp + c * dp)``
(:mod:`fred.model.parallel_groups`).

Weight-stationary mode (model states fit in HBM):

* layers are split into ``c`` pipeline stages of balanced compute; within a stage consecutive
  layers are merged into at most ``granularity`` chunks (compute and MP bytes summed);
* Megatron MP: each attention and MLP block ends with an All-Reduce of its output activation in
  forward and of its input gradient in backward (2 + 2 per transformer layer), on the critical
  path of the MP group;
* PP: at a stage boundary one NPU of the MP group multicasts the activation (forward) or the
  gradient (backward) to the whole MP group of the neighbouring stage (paper §8.1, note 8);
* pipeline schedule: **GPipe** (all microbatches forward, then all backward; gradients
  accumulate; paper cites GPipe [Hua19] for its 8 microbatches);
* DP: after the last microbatch's backward of a chunk, the chunk's gradients are All-Reduced
  across the DP group (ZeRO-2: reduce-scatter + all-gather, the same bytes as an All-Reduce),
  overlapping the remaining backward compute; DP collectives of a stage run one after another
  (one communication stream); then an HBM-bound optimizer step on the NPU's 1/DP shard;
* the next iteration's input minibatch is prefetched from the I/O controllers during this one.

Weight-streaming mode (weights live off-wafer):

* the model is streamed in per layer group: ``c`` consecutive layers at a time, one per PP
  stage (paper §7.3), each MP shard broadcast from the 18 I/O controllers to the ``b`` NPUs of
  its DP group (``io-broadcast``); double-buffered (the next group streams while this one
  computes); streamed again in reverse for backward; each layer's gradients are reduced across
  DP on the way out to the I/O controllers (``io-reduce``);
* MP All-Reduces as above; PP transfers between consecutive layers (stage c-1 hands back to
  stage 0 for the next layer group);
* the input minibatch is loaded at the start of the iteration (the I/O controllers are busy
  streaming during the previous one, so it cannot be prefetched -- paper §8.2).

DP replicas are symmetric and are simulated in lockstep: one compute task stands for the same
compute on every replica, and each collective task covers the groups of all replicas at once
(it completes when the slowest replica's copy does), so inter-replica contention is simulated.

The result's breakdown is the critical path through the graph: every instant of the iteration is
attributed to the task that the last-finishing chain was waiting for -- compute (including
pipeline fill/drain) or exposed communication of one kind (mp, dp, pp, stream, input). The parts
sum exactly to the iteration time.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

from fred import FredError

from . import compute as C
from .parallel_groups import parse_strategy, place

KINDS = ("compute", "mp", "dp", "pp", "stream", "input")
KIND_TITLES = {"compute": "compute", "mp": "MP", "dp": "DP", "pp": "PP", "stream": "weight streaming",
               "input": "input load"}
DEFAULT_GRANULARITY = 4      # DP buckets in the last microbatch's backward, per stage
DEFAULT_STREAM_STEPS = 6     # simulated steps per streaming pass (first and last layer group exact)


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


class _Graph:
    """Records every task's kind and dependencies next to the simulator's task ids."""

    def __init__(self, sim):
        self.sim = sim
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
        t = self.sim.collective(op, arg, float(nbytes), deps=deps, label=kind)
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
        t = self.sim.collective("multicast", arg, float(nbytes), deps=deps, label=kind)
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
    checkpointed layer-boundary activations of every microbatch in flight (GPipe)."""
    a, b, c = abc
    if stage_layers is None:
        stage_layers = _runs(list(workload.layers), _balanced_split([1.0] * len(workload.layers), c))
    best = 0.0
    for layers in stage_layers:
        p = sum(l.params for l in layers) / a
        states = p * (workload.dtype_bytes + (C.MODEL_STATE_BYTES_PER_PARAM - workload.dtype_bytes) / b)
        acts = sum(l.act_bytes for l in layers) * samples_per_replica
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
    """Coarsen a pass of ``len(steps)`` layer groups into at most ``S`` simulated steps: the first
    and last groups stay alone (pipeline fill and drain are exact), the middle ones are merged
    in balanced runs. Returns a list of lists of layer groups."""
    n = len(steps)
    if n <= S or S < 3:
        return [[x] for x in steps] if n <= S else [steps]
    mid = steps[1:-1]
    k = S - 2
    starts = _balanced_split([1.0] * len(mid), k)
    return [[steps[0]]] + [mid[s:e] for s, e in zip(starts, starts[1:] + [len(mid)])] + [[steps[-1]]]


def _streaming(g, w, abc, m, mb, B, npu, notes, S):
    a, b, c = abc
    dt = w.dtype_bytes
    units = _units(w)
    groups_ = [units[i:i + c] for i in range(0, len(units), c)]
    mpg = [_mp_groups(abc, s) for s in range(c)]
    dpg = [_dp_groups(abc, s) for s in range(c)]
    # memory: two layer groups' weight shards (double buffer) must fit; activations are noted
    biggest = max(sum(l.params for l in u) for u in units) * dt / a
    acts = sum(l.act_bytes for l in w.layers) * B / c
    mem = 2 * biggest + acts
    if 2 * biggest > npu.hbm_capacity:
        raise FredError(f"{w.name}: a streamed layer shard of {biggest / 1e9:.1f} GB does not fit twice in "
                        f"{npu.hbm_capacity / 1e9:.0f} GB HBM with MP({a})")
    if mem > npu.hbm_capacity:
        notes.append(f"checkpointed activations ({acts / 1e9:.0f} GB/NPU) exceed HBM; assumed to fit as in the paper")

    # simulated steps: per step and stage, the merged layers, PP bytes out of the stage (one
    # boundary activation per folded layer group), and streamed bytes
    steps = []
    for fold in _fold(groups_, S):
        st = []
        for s in range(c):
            ls = [l for grp in fold if s < len(grp) for l in grp[s]]
            if not ls:
                continue
            ch = _chunk(ls, mb, a, npu, dt)
            pp_out = sum(grp[s][-1].act_bytes for grp in fold if s < len(grp)) * mb
            st.append((ch, pp_out, ch.params * dt / a))
        steps.append(st)

    inp = g.coll("io-broadcast", mpg[0], B * w.input_bytes_per_sample, (), "input")
    order = []          # compute-done task of each step, in processing order (fwd then bwd)
    streams = []

    def stream(st, deps):
        # every stage's shard at once (one collective; stages differ only by embedding/logits)
        groups = [grp for s in range(len(st)) for grp in dpg[s]]
        nbytes = sum(x[2] for x in st) / len(st)
        return g.coll("io-broadcast", groups, nbytes, deps, "stream")

    last_on_stage = [None] * c
    # ---- forward
    prev_out = [inp] * m
    for k, st in enumerate(steps):
        s_task = stream(st, [streams[-1] if streams else None, order[-2] if len(order) >= 2 else None])
        streams.append(s_task)
        done_k = []
        for j in range(m):
            t_in = prev_out[j]
            for s, (ch, pp_out, _) in enumerate(st):
                t = g.join([s_task, t_in, last_on_stage[s]])
                t = g.compute(ch.fwd, [t], stage=s)
                if ch.mp_fwd:
                    t = g.coll("all-reduce", mpg[s], ch.mp_fwd, [t], "mp")
                last_on_stage[s] = t
                more = s < len(st) - 1 or k < len(steps) - 1
                if c > 1 and more:
                    t_in = g.multicasts(_pp_pairs(abc, s, (s + 1) % c), pp_out, [t], "pp")
                else:
                    t_in = t
            prev_out[j] = t_in
            done_k.append(t_in)
        order.append(g.join(done_k + [x for x in last_on_stage if x is not None]))

    # ---- backward (reverse order), gradients reduced over DP on their way out
    prev_in = [order[-1]] * m
    last_out = None
    for k in reversed(range(len(steps))):
        st = steps[k]
        s_task = stream(st, [streams[-1], order[-2] if len(order) >= 2 else None])
        streams.append(s_task)
        done_k = []
        for j in range(m):
            t_in = prev_in[j]
            for s in reversed(range(len(st))):
                ch = st[s][0]
                t = g.join([s_task, t_in, last_on_stage[s]])
                t = g.compute(ch.bwd, [t], stage=s)
                if ch.mp_bwd:
                    t = g.coll("all-reduce", mpg[s], ch.mp_bwd, [t], "mp")
                last_on_stage[s] = t
                if c > 1 and (s > 0 or k > 0):
                    src = st[s - 1] if s > 0 else steps[k - 1][-1]
                    t_in = g.multicasts(_pp_pairs(abc, s, (s - 1) % c), src[1], [t], "pp")
                else:
                    t_in = t
            prev_in[j] = t_in
            done_k.append(t)
        step_done = g.join(done_k + [x for x in last_on_stage if x is not None])
        order.append(step_done)
        groups = [grp for s in range(len(st)) for grp in dpg[s]]
        last_out = g.coll("io-reduce", groups, sum(x[2] for x in st) / len(st), [step_done, last_out], "stream")
    g.join([last_out, order[-1]])
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
