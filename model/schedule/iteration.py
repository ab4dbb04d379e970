"""Training schedule: MP(a)-DP(b)-PP(c) over the wafer's NPUs as a task graph in flowsim.

One training iteration (steady state) is built as a dependency graph of compute tasks
(``Sim.delay`` with roofline durations from :mod:`fred.model.workload.compute`) and communication tasks
(``Sim.collective`` / ``Sim.transfer``); **all communication runs through the flow-level
network simulator** (:mod:`fred.model.collectives.flowsim`), so contention between concurrent groups, the
mesh's corner NPUs, edge-I/O hotspots and in-switch reduction all come from simulated routes.

Placement: worker (mp, dp, pp) sits on NPU ``mp + a * (pp + c * dp)``
(:mod:`fred.model.collectives.strategy`).

Memory (:mod:`fred.model.workload.memory`, :func:`memory_plan`): before simulating, the HBM each NPU of
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
pipeline fill/drain) or exposed communication of one kind (mp, dp, pp, stream, input, offload, ep).
The parts sum exactly to the iteration time.

Expert parallelism (mixture-of-experts workloads, strategy ``MP(a)-EP(e)-DP(b)-PP(c)``;
:mod:`fred.model.collectives.strategy`, :mod:`fred.model.workload.loader.moe`): the ``e x b`` replicas run as
DP replicas for every non-expert weight; each NPU holds 1/e of every MoE layer's experts
and does the busiest EP rank's share of their work (the routing skew). Every MoE layer moves its
tokens to their experts (dispatch) and back (combine) by all-to-all over its EP group, in forward
and again in backward (the gradients), on the critical path like the MP All-Reduces; a stage's
all-to-alls of one microbatch and pass are one simulated all-to-all of their summed bytes that
pays the switch's per-all-to-all configuration for each of them. The all-to-all is simulated as
an even one of the busiest port's bytes (its bound; ``skew`` of :func:`fred.model.collectives.api.expand`),
and on FRED at the switch's measured all-to-all throughput (:mod:`fred.model.system.timing`). Expert
gradients are All-Reduced over the ``b`` replicas holding the same experts, the others over all
``e x b``; ZeRO-2 shards each over its own group. Exposed all-to-all is the kind ``ep``.
"""

from __future__ import annotations

import contextlib
import gc
import time

from fred import FredError

from fred.model.workload import compute as C
from fred.model.workload import memory as M
from fred.model.collectives import expert_parallel, format_strategy, parse_strategy
from .analysis import KINDS, ScheduleResult, analyse
from .graph import ScheduleGraph
from .multiwafer import MultiWaferGraph, add_busy
from .layout import DEFAULT_GRANULARITY, DEFAULT_STREAM_STEPS, chunk, offload_layout, plan_layout
from .memory import STREAM_BUFFERS, memory_plan, stationary_memory
from .stationary import build_stationary
from .tape import Tape
from .tape import simulate as simulate_tape
from .streaming import build_streaming


def io_bandwidth(topo) -> float:
    """Payload bytes/s the I/O controllers can send (= receive) in all."""
    io = set(getattr(topo, "io_nodes", ()))
    if not io:
        return 0.0
    bw = sum(float(x) for src, x in zip(topo.link_src, topo.link_bw) if int(src) in io)
    return bw * getattr(topo, "link_efficiency", 1.0)


def lower_bound(w, abc, layout, plan, B, npu, io_bw):
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
            ch = chunk(layers, B / m, a, npu, w.dtype_bytes, lv)
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
                  memory=M.DEFAULT_POLICY, wafers=None):
    """Build one iteration of ``workload`` on topology ``topo`` and simulate it.

    ``wafers``: an :class:`~fred.model.collectives.offwafer.OffWaferLevel` of several wafers training
    data-parallel (:mod:`fred.model.schedule.iteration.multiwafer`), or None for one wafer.

    ``memory``: the memory policy (:mod:`fred.model.workload.memory`): ``auto`` (default), ``none``,
    ``selective``, ``recompute``, ``offload``, ``selective+offload``, ``recompute+offload``.
    A configuration the policy cannot fit into HBM raises :class:`~fred.FredError`."""
    npu = npu or C.default_npu()
    abc, mode, m, B = _check_run(workload, topo, strategy, microbatches, samples_per_replica, mode, granularity)
    workload = _expert_view(workload, strategy, abc, mode)
    policy = M.check_policy(memory)
    run = _Run(workload, topo, abc, mode, B, npu, plan_layout(workload, abc, mode, npu, granularity, stream_steps),
               sim_factory, wafers)
    before = memory_plan(workload, abc, run.layout, M.POLICIES["none"], m, B, npu)
    pols = list(M.POLICIES.values()) if policy == "auto" else [M.POLICIES[policy]]
    considered = [run.smallest_fit(pol, m) for pol in pols]
    cands = _candidates(considered)
    if not cands:
        raise M.refusal(workload.name, format_strategy(abc, workload.expert_parallel), mode, npu.hbm_capacity,
                        considered, m)
    # cheapest by simulation; a candidate whose lower bound (its compute, its offload I/O) is
    # not below the best simulated iteration is not simulated
    io_bw = io_bandwidth(topo)
    bound = {id(p): lower_bound(workload, abc, run.lay(p.policy), p, B, npu, io_bw) for p in cands}
    cands.sort(key=lambda p: bound[id(p)])
    results = []
    for plan in cands:
        if results and bound[id(plan)] >= min(r.iteration_time for _, r in results):
            continue
        results.append((plan, run.simulate(plan)))
    plan, out = min(results, key=lambda pr: pr[1].iteration_time)   # ties: the first (fewest mechanisms)
    out.sim_seconds = sum(r.sim_seconds for _, r in results)
    _record_memory(out, plan, before, considered, results, m)
    return out


def _expert_view(w, strategy, abc, mode):
    """The workload as laid out for the strategy's expert parallelism (EP(e) in a strategy text;
    a workload already viewed so keeps its EP): :meth:`Workload.with_expert_parallel`."""
    ep = expert_parallel(strategy or w.strategy) if isinstance(strategy or w.strategy, str) else 1
    if not isinstance(strategy, str) and w.expert_parallel > 1:
        ep = w.expert_parallel
    if ep > 1 and not w.is_moe:
        raise FredError(f"EP({ep}) needs a mixture-of-experts workload; {w.name} has no experts")
    if ep > 1 and mode == "weight-streaming":
        raise FredError(f"EP({ep}) runs weight-stationary only (weight streaming streams every expert to "
                        f"every replica); use --mode weight-stationary or a strategy without EP")
    if abc[1] % ep:
        raise FredError(f"EP({ep}) must divide the {abc[1]} data-parallel replicas")
    return w.with_expert_parallel(ep)


def _check_run(workload, topo, strategy, microbatches, samples_per_replica, mode, granularity):
    """The checked (MP, DP, PP), mode, microbatch count and samples per replica of a run."""
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
    return abc, mode, m, B


class _Run:
    """One workload, strategy and topology: the memory plan of a policy, and the simulation of a
    plan."""

    def __init__(self, workload, topo, abc, mode, B, npu, layout, sim_factory, wafers=None):
        self.workload, self.topo, self.abc, self.mode, self.B, self.npu = workload, topo, abc, mode, B, npu
        self.wafers = wafers if wafers is not None and wafers.wafers > 1 else None
        self.layout, self.off_layout = layout, offload_layout(layout)
        self.sim_factory = sim_factory

    def lay(self, pol):
        """The layout simulated under memory policy ``pol`` (offloading has its own)."""
        return self.off_layout if pol.offload else self.layout

    def smallest_fit(self, pol, m):
        """``pol``'s plan at the smallest microbatch count >= m that fits (doubling, down to one
        sample per microbatch), else its least-needing plan (not fitting)."""
        mm, tried = m, []
        while True:
            p = memory_plan(self.workload, self.abc, self.lay(pol), pol, mm, self.B, self.npu)
            tried.append(p)
            if p.fits:
                return p
            nxt = min(2 * mm, max(mm, int(self.B)))
            if nxt <= mm:
                return min(tried, key=lambda x: x.need)
            mm = nxt

    def simulate(self, plan) -> ScheduleResult:
        """Build the iteration under memory plan ``plan``, simulate it and analyse the run.

        With the cyclic garbage collector paused (:func:`_gc_paused`): a schedule is hundreds of
        thousands of small acyclic objects (the recorded calls, the graph's bookkeeping) that live
        for one simulation, which the collector would walk again and again for nothing (~0.9 s of
        the Transformer-1T sweep's ~10 s, measured); reference counting frees them."""
        with _gc_paused():
            return self._simulate(plan)

    def _simulate(self, plan) -> ScheduleResult:
        topo, B = self.topo, self.B
        # the builder runs on a Tape; the graph it records is built once per structure and
        # re-timed for other durations (fred.model.schedule.tape)
        sim = self.sim_factory(topo) if self.sim_factory is not None else Tape(topo)
        g = ScheduleGraph(sim) if self.wafers is None else MultiWaferGraph(sim, self.wafers)
        notes = []
        t0 = time.perf_counter()
        mb = B / plan.microbatches
        build = build_stationary if self.mode == "weight-stationary" else build_streaming
        build(g, self.workload, self.abc, plan.microbatches, mb, B, self.npu, self.lay(plan.policy), plan)
        if self.sim_factory is None:
            view, res = simulate_tape(sim, topo)
        else:
            view = res = sim.run()
        out = analyse(g, view, self.abc, notes)
        if self.wafers is not None:
            add_busy(g, view, out.comm_busy)
        out.sim_seconds = time.perf_counter() - t0
        out.preemptions = int(getattr(res, "preemptions", 0))
        out.timing_source = str(getattr(res, "timing_source", "") or getattr(getattr(topo, "timing", None), "source", ""))
        out.recompute_busy = max(g.rec.values(), default=0.0)
        return out


@contextlib.contextmanager
def _gc_paused():
    """No automatic cyclic garbage collection inside (the collector runs again after, for any
    cycle made meanwhile); nests."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _record_memory(out, plan, before, considered, results, m):
    """Write the chosen memory plan, and every plan considered, into the result ``out``."""
    sims = {id(p): r.iteration_time for p, r in results}
    out.microbatches = plan.microbatches
    out.memory_policy = plan.policy.name
    out.memory_before = before.need
    out.memory_per_npu = plan.need
    out.memory_states = plan.states
    out.offload_bytes = plan.offloaded
    out.memory_candidates = [{"policy": p.policy.name, "microbatches": p.microbatches, "need_bytes": int(round(p.need)),
                              "fits": p.fits, "iteration_time": sims.get(id(p))} for p in considered]
    if plan.policy.name != "none":
        why = f"needs {before.need / 1e9:.0f} GB/NPU with all activations in HBM" if not before.fits else "requested"
        split = (f", microbatches {m} -> {plan.microbatches}" if plan.microbatches != m else "")
        out.notes.append(f"memory: {why}; {plan.policy.description}{split}: {plan.need / 1e9:.0f} GB/NPU"
                         + (f", {plan.offloaded / 1e9:.0f} GB/NPU offloaded" if plan.offloaded else ""))


__all__ = ["KINDS", "DEFAULT_GRANULARITY", "DEFAULT_STREAM_STEPS", "STREAM_BUFFERS", "ScheduleResult",
           "build_and_run", "memory_plan", "stationary_memory", "io_bandwidth"]
