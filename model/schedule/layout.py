"""How one training iteration's work is laid out over the wafer (:mod:`fred.model.schedule.iteration`).

Weight stationary: the layers in ``c`` pipeline stages of balanced compute, each stage's DP
buckets (its first layer alone, then up to ``granularity - 1`` balanced runs). Weight streaming:
the streaming units, their layer groups (one unit per stage) and the simulated folds of
consecutive groups. Also the per-microbatch compute and MP bytes of a run of layers
(:class:`Chunk`), the runs of microbatches offloading moves at once, and the NPU groups of a
pipeline stage (placement: :func:`fred.model.collectives.strategy.place`).
"""

from __future__ import annotations

from dataclasses import dataclass

from fred.model.workload import compute as C
from fred.model.workload import memory as M
from fred.model.collectives import place

DEFAULT_GRANULARITY = 4      # DP buckets in the last microbatch's backward, per stage
DEFAULT_STREAM_STEPS = 4     # simulated folds per weight-streaming pass (see fold_groups / fold_plan)
OFFLOAD_RUNS = 4             # simulated offload pieces per stage and fold: runs of microbatches


def balanced_split(weights, parts):
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
class Chunk:
    layers: list
    fwd: float          # compute seconds per microbatch
    bwd: float
    mp_fwd: float       # MP All-Reduce bytes per microbatch (forward), merged over the chunk
    mp_bwd: float
    params: float
    out_act: float      # output activation bytes per microbatch
    rec: float = 0.0    # recomputation seconds per microbatch (charged in backward)
    expert_params: float = 0.0   # of params: routed experts' (gradients All-Reduced over the expert DP group)
    a2a: float = 0.0    # MoE all-to-all bytes per NPU and microbatch, each pass (dispatch + combine)
    a2a_n: int = 0      # all-to-alls that stands for (2 per MoE layer and pass)


def chunk(layers, mb, a, npu, b, level="none"):
    fwd = sum(C.layer_time(l, "fwd", mb, a, npu, b) for l in layers)
    bwd = sum(C.layer_time(l, "bwd", mb, a, npu, b) for l in layers)
    rec = sum(M.recompute_time(l, level, mb, a, npu, b) for l in layers)
    if a > 1:
        mpf = sum(l.mp_ar_fwd * l.act_bytes * mb for l in layers)
        mpb = sum(l.mp_ar_bwd * l.act_bytes * mb for l in layers)
    else:
        mpf = mpb = 0.0
    moe = [l for l in layers if l.a2a_bytes]
    return Chunk(list(layers), fwd, bwd, mpf, mpb, sum(l.params for l in layers), layers[-1].act_bytes * mb, rec,
                 expert_params=sum(l.expert_params for l in layers), a2a=sum(2 * l.a2a_bytes * mb for l in moe),
                 a2a_n=2 * len(moe))


def _weights(layers, a, npu, b):
    return [C.layer_time(l, "fwd", 1.0, a, npu, b) + C.layer_time(l, "bwd", 1.0, a, npu, b) for l in layers]


def streaming_units(workload):
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


def stage_units(layers):
    """A stage's layers grouped into units (a new unit at every layer but a feed-forward block: a
    transformer layer = attention + MLP, or attention + router + experts; elsewhere one layer
    each): what full recomputation recomputes at once."""
    units = []
    for l in layers:
        if l.kind in ("mlp", "moe", "experts") and units:
            units[-1].append(l)
        else:
            units.append([l])
    return units


@dataclass
class Layout:
    """Everything about the split of the work that does not depend on the microbatch count:
    weight stationary -- stages and their DP buckets; weight streaming -- layer groups and folds."""
    mode: str
    stages: list = None           # stationary: layers per stage
    buckets: list = None          # stationary: per stage, runs of layers (first layer alone, then G-1)
    units: list = None            # streaming: streaming units
    folds: list = None            # streaming: folds of layer groups


def plan_layout(w, abc, mode, npu, G, S):
    a, b, c = abc
    dt = w.dtype_bytes
    if mode == "weight-stationary":
        layers = list(w.layers)
        stages = _runs(layers, balanced_split(_weights(layers, a, npu, dt), c))
        buckets = []
        for st in stages:
            rest = st[1:]
            runs = [st[:1]] + (_runs(rest, balanced_split(_weights(rest, a, npu, dt), max(1, G - 1))) if rest else [])
            buckets.append(runs)
        return Layout(mode, stages=stages, buckets=buckets)
    units = streaming_units(w)
    groups_ = [units[i:i + c] for i in range(0, len(units), c)]
    return Layout(mode, units=units, folds=fold_groups(groups_, S))


def offload_layout(layout):
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
    return Layout(layout.mode, units=layout.units, folds=layout.folds[:-1] + tail)


def mb_groups(m, most=OFFLOAD_RUNS):
    """Microbatches 0..m-1 in at most ``most`` runs of consecutive ones (offload granularity)."""
    if m <= 0:
        return []
    starts = balanced_split([1.0] * m, min(m, most))
    return [list(range(a, b)) for a, b in zip(starts, starts[1:] + [m])]


def fold_stage_layers(fold, s):
    return [l for grp in fold if s < len(grp) for l in grp[s]]


def fold_groups(steps, S):
    """Coarsen a pass of ``len(steps)`` layer groups into at most ``S`` simulated folds of
    consecutive groups (balanced sizes). Returns a list of lists of layer groups."""
    n = len(steps)
    S = max(1, int(S))
    if n <= S:
        return [[x] for x in steps]
    starts = balanced_split([1.0] * n, S)
    return [steps[s:e] for s, e in zip(starts, starts[1:] + [n])]


def mp_groups(abc, s):
    a, b, c = abc
    return [[place(x, d, s, abc) for x in range(a)] for d in range(b)]


def dp_groups(abc, s):
    a, b, c = abc
    return [[place(x, d, s, abc) for d in range(b)] for x in range(a)]


def stage_npus(abc, s):
    """Every NPU of pipeline stage ``s`` (all MP members of all DP replicas), one group each:
    activation offload/reload moves each NPU's own data, spread over all I/O controllers."""
    a, b, c = abc
    return [[place(x, d, s, abc)] for d in range(b) for x in range(a)]


def pp_pairs(abc, s_from, s_to):
    a, b, c = abc
    return [(place(0, d, s_from, abc), [place(x, d, s_to, abc) for x in range(a)]) for d in range(b)]
