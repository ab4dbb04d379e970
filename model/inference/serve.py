"""Serving a decoder transformer on the wafer: prefill and decode as task graphs in the flow
simulator, mesh vs Fred-A..D.

>>> from fred.model.inference.serve import infer
>>> r = infer("llama2-70b", "fred-d", batch=1)          # doctest: +SKIP
>>> r.ttft, r.tpot, r.tokens_per_s, r.decode_exposed["mp"]  # doctest: +SKIP

Strategy ``MP(a)-DP(b)-PP(c)``, or ``MP(a)-EP(e)-DP(b)-PP(c)`` for a mixture-of-experts workload
(placement and groups as in training, :mod:`fred.model.collectives.strategy`): ``b`` (``e x b``) independent replicas serve separate batches of
``batch`` sequences each, simulated in lockstep (one compute task stands for every replica, each
collective covers all replicas' groups, so their traffic contends as it would); a replica's
layers are split over ``c`` pipeline stages, each stage's blocks over its MP group.

One step (the prefill of the prompts, or one decode step producing one token per sequence) is a
chain: on each stage, per layer, the attention block's compute, its MP All-Reduce, the MLP
block's compute, its MP All-Reduce (Megatron); at a stage boundary one NPU of the MP group
multicasts the activation to the next stage's MP group (PP, as in training); on the last stage
the output head and a sampling reduce over MP; in decode the sampled token ids go back to the
first stage (PP) for the next step. One batch is in flight per replica: a pipeline split buys
memory per NPU, not speed. Every collective and transfer runs through the flow simulator with
the fabric's algorithms (:mod:`fred.model.collectives.api`): on FRED an in-switch All-Reduce pays the
measured switch traversal and phase switch of the timing file per switch it crosses, traffic
classes time-share the switches (MP > PP, preemption and activation as measured); the mesh
pays its per-hop link latency. Compute per block is the NPU roofline (:mod:`.costs`).

Figures:

* time to first token (TTFT): the prefill (the first token is sampled at its end);
* time per output token (TPOT): the mean decode step over output tokens 2..N. A step's
  communication does not depend on the context; its compute does (the key/value cache read
  grows by one token per step): one step is simulated at the mean context, and its compute on
  the critical path is replaced by the mean over every step's context (exact on a serial chain,
  which a step is);
* tokens per second: the wafer's output tokens (replicas x batch x N) over TTFT + (N-1) TPOT;
* exposed communication per kind (``mp``, ``pp``, ``ep``) on the critical path of each phase.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field

import numpy as np

from fred import FredError
from fred.contract.checks import check_int

from fred.model.collectives import Sim, ep_groups, expert_parallel, format_strategy, parse_strategy
from fred.model.network import build_fabric
from fred.model.schedule import ScheduleGraph, analyse
from fred.model.schedule import layout as L
from fred.model.system import canonical_fabric, default_params
from fred.model.workload import compute as C
from fred.model.workload import load_workload

from .costs import MAX_BATCH, MAX_TOKENS, TOKEN_BYTES, block, check_memory, memory_per_npu, shape_of, stage_layers

__all__ = ["Inference", "infer", "infer_table", "plan", "default_strategy", "COMM_KINDS", "DEFAULT_STRATEGIES"]

#: the exposed-communication kinds of a serving step (``ep``: the MoE dispatch and combine
#: all-to-alls over the EP groups)
COMM_KINDS = ("mp", "pp", "ep")
#: ours: the default splits, tried in order: an MP group per L1 switch (4 NPUs, one row of the
#: mesh), five replicas; when the weights and cache do not fit, one replica over five stages
DEFAULT_STRATEGIES = ((4, 5, 1), (4, 1, 5))


@dataclass
class Inference:
    workload: str
    fabric: str
    strategy: str
    replicas: int
    batch: int
    prompt_tokens: int
    output_tokens: int
    ttft: float
    tpot: float
    tokens_per_s: float
    prefill_compute: float
    prefill_exposed: dict
    decode_compute: float
    decode_exposed: dict
    memory: dict
    timing_source: str
    npu: str
    sim_seconds: float
    preemptions: int = 0
    speedup_ttft: float | None = None
    speedup_tpot: float | None = None
    notes: list = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def default_strategy(sh, batch, prompt, output, npu, npus):
    """The first of :data:`DEFAULT_STRATEGIES` whose weights and cache fit in HBM (the last one
    when none does: its refusal names the figures)."""
    cands = [abc for abc in DEFAULT_STRATEGIES if abc[0] * abc[1] * abc[2] == npus] or [(1, npus, 1)]
    for abc in cands:
        if memory_per_npu(sh, abc, batch, prompt, output)["total"] <= npu.hbm_capacity:
            return abc
    return cands[-1]


def _chain(g, sh, abc, npu, batch, tokens, context, back_bytes):
    """One step: the embedding, every stage's layers (each block, then its MP All-Reduces), PP
    hand-overs, the head and its sampling reduce, and (``back_bytes``) the token ids back to the
    first stage."""
    a, _, c = abc
    t, first = None, 0

    def run(layer, s, t):
        blk = block(sh, layer, a, batch, tokens, context)
        a2a = blk.a2a if sh.ep > 1 else 0.0
        if a2a:                                          # dispatch the tokens to their experts
            t = g.coll("all-to-all", ep_groups(abc, sh.ep, s), a2a, [t], "ep", skew=blk.skew)
        t = g.compute(blk.time(npu), [t], stage=s)
        for _ in range(blk.count):
            t = g.coll("all-reduce", L.mp_groups(abc, s), blk.allreduce, [t], "mp")
        if a2a:                                          # combine: the expert outputs come back
            t = g.coll("all-to-all", ep_groups(abc, sh.ep, s), a2a, [t], "ep", skew=blk.skew)
        return t

    t = run(sh.embedding, 0, t)
    for s, n in enumerate(stage_layers(sh, c)):
        for unit in sh.units[first:first + n]:
            for layer in unit:
                t = run(layer, s, t)
        first += n
        if s < c - 1:
            t = g.multicasts(L.pp_pairs(abc, s, s + 1), batch * tokens * sh.d * sh.b, [t], "pp")
    t = run(sh.head, c - 1, t)
    if back_bytes and c > 1:
        t = g.multicasts(L.pp_pairs(abc, c - 1, 0), back_bytes, [t], "pp")
    return t


def _simulate(topo, sh, abc, npu, batch, tokens, context, back_bytes):
    """(critical-path result, preemptions) of one step on ``topo``."""
    sim = Sim(topo)
    g = ScheduleGraph(sim)
    _chain(g, sh, abc, npu, batch, tokens, context, back_bytes)
    res = sim.run()
    r = analyse(g, res, abc, [])
    r.timing_source = res.timing_source
    return r, int(res.preemptions)


def step_compute(sh, abc, batch, contexts, npu) -> np.ndarray:
    """Compute seconds on the critical path of one decode step at each context length of
    ``contexts`` (an attention block's FLOPs and bytes are linear in the context, the other
    blocks do not depend on it)."""
    a = abc[0]
    ctx = np.asarray(contexts, dtype=np.float64)
    out = np.full(ctx.shape, block(sh, sh.embedding, a, batch, 1, 0).time(npu) + block(sh, sh.head, a, batch, 1, 0)
                  .time(npu))
    for unit in sh.units:
        for layer in unit:
            b0, b1 = block(sh, layer, a, batch, 1, 0.0), block(sh, layer, a, batch, 1, 1.0)
            if layer.kind != "attention":
                out += b0.time(npu)
                continue
            flops = b0.flops + (b1.flops - b0.flops) * ctx
            nbytes = b0.bytes + (b1.bytes - b0.bytes) * ctx
            out += np.maximum(flops / npu.flops, nbytes / npu.hbm_bw)
    return out


def _check_sizes(batch, prompt, output):
    check_int("batch", batch, 1, MAX_BATCH)
    check_int("prompt_tokens", prompt, 1, MAX_TOKENS)
    check_int("output_tokens", output, 2, MAX_TOKENS,
              why="the time per output token is the time between two of them")


def plan(workload, strategy, batch, prompt_tokens, output_tokens, params, npu):
    """(workload, shape, (a, b, c), memory per NPU) of a serving run, every check done: sizes,
    a decoder transformer, the context window, the strategy (default :func:`default_strategy`),
    a stage per PP rank, HBM. Runs no simulation (the CLI checks every run with it first)."""
    _check_sizes(batch, prompt_tokens, output_tokens)
    w = load_workload(workload)
    ep = expert_parallel(strategy) if isinstance(strategy, str) else 1
    sh = shape_of(w, ep)
    if prompt_tokens + output_tokens > sh.context:
        raise FredError(f"{w.name}: prompt tokens {prompt_tokens} + output tokens {output_tokens} exceed its "
                        f"context window of {sh.context} tokens")
    if strategy is None:
        abc = default_strategy(sh, batch, prompt_tokens, output_tokens, npu, params.npus)
    else:
        abc = parse_strategy(strategy, npus=params.npus)
    if abc[2] > len(sh.units):
        raise FredError(f"{w.name} has {len(sh.units)} layers: PP({abc[2]}) leaves a stage without one")
    mem = check_memory(sh, abc, batch, prompt_tokens, output_tokens, npu, format_strategy(abc, ep))
    return w, sh, abc, mem


def infer(workload, fabric, strategy=None, *, batch=1, prompt_tokens=1024, output_tokens=256, params=None,
          npu=None) -> Inference:
    """Serve ``batch`` sequences per replica of ``prompt_tokens`` prompt and ``output_tokens``
    output tokens of ``workload`` on ``fabric``. A wrong type raises ``TypeError``, a value out of
    range ``ValueError``, a configuration that does not fit (memory, context window)
    :class:`~fred.FredError`, each one line naming the figures."""
    fab = canonical_fabric(fabric)
    p = params or default_params()
    npu = npu or C.default_npu()
    w, sh, abc, mem = plan(workload, strategy, batch, prompt_tokens, output_tokens, p, npu)
    name = format_strategy(abc, sh.ep)
    topo = build_fabric(fab, p)
    t0 = time.process_time()
    pre, pre_n = _simulate(topo, sh, abc, npu, batch, prompt_tokens, 0.0, 0)
    steps = np.arange(1, output_tokens, dtype=np.float64) + prompt_tokens   # tokens attended per step
    dec, dec_n = _simulate(topo, sh, abc, npu, batch, 1, float(steps.mean()), batch * TOKEN_BYTES)
    compute = float(step_compute(sh, abc, batch, steps, npu).mean())
    exposed = {k: dec.exposed.get(k, 0.0) for k in COMM_KINDS}
    tpot = compute + sum(dec.exposed.values())
    total = pre.iteration_time + (output_tokens - 1) * tpot
    return Inference(workload=w.name, fabric=fab, strategy=name, replicas=abc[1], batch=batch,
                     prompt_tokens=prompt_tokens, output_tokens=output_tokens, ttft=pre.iteration_time, tpot=tpot,
                     tokens_per_s=abc[1] * batch * output_tokens / total, prefill_compute=pre.compute_time,
                     prefill_exposed={k: pre.exposed.get(k, 0.0) for k in COMM_KINDS}, decode_compute=compute,
                     decode_exposed=exposed, memory=mem, timing_source=dec.timing_source or p.switch.source,
                     npu=npu.source, sim_seconds=time.process_time() - t0, preemptions=pre_n + dec_n)


def infer_table(workloads, fabrics, strategy=None, progress=None, **kw) -> list[Inference]:
    """Every workload x fabric; TTFT and TPOT speedups over the mesh (simulated even if not
    listed). ``progress(what)``, if given, is called as each run starts."""
    rows = []
    for wn in workloads:
        cells = {}
        for f in ["mesh"] + [x for x in fabrics if x != "mesh"]:
            if progress is not None:
                progress(f"{wn} on {f}")
            cells[f] = infer(wn, f, strategy, **kw)
        base = cells["mesh"]
        for f in fabrics:
            r = cells[f]
            r.speedup_ttft = base.ttft / r.ttft if r.ttft > 0 else None
            r.speedup_tpot = base.tpot / r.tpot if r.tpot > 0 else None
            rows.append(r)
    return rows
