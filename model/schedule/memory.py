"""Memory per NPU of a laid-out iteration under a memory policy (:mod:`fred.model.workload.memory`): the
pieces of stored activations at the granularity the schedule simulates, model states or streamed
weight buffers, working set and staging buffers, per pipeline stage."""

from __future__ import annotations

from fred.model.workload import compute as C
from fred.model.workload import memory as M
from .layout import (DEFAULT_GRANULARITY, DEFAULT_STREAM_STEPS, fold_stage_layers, mb_groups,
                              plan_layout, stage_units)

STREAM_BUFFERS = 3           # ours: streamed shards held per NPU: weights in use + next (double
                             # buffer) + the gradients of the unit in backward (memory_plan)


def memory_plan(w, abc, layout, policy, m, B, npu) -> M.MemoryPlan:
    """Memory per NPU of every stage under ``policy`` at ``m`` microbatches of ``B / m`` samples
    (see :mod:`fred.model.workload.memory`). Stored-activation pieces follow the simulated granularity:
    stationary -- runs of microbatches (:func:`mb_groups`), the last microbatch by DP bucket;
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
        ep = w.expert_parallel
        for st, bks in zip(layout.stages, layout.buckets):
            pe = sum(l.expert_params for l in st) / a          # this NPU's experts: ZeRO-2 over b / EP
            p = sum(l.params for l in st) / a - pe
            states = p * (dt + (C.MODEL_STATE_BYTES_PER_PARAM - dt) / b) \
                + pe * (dt + (C.MODEL_STATE_BYTES_PER_PARAM - dt) / (b // ep))
            # pieces: runs of microbatches, the last microbatch by DP bucket (as simulated)
            pieces = [per(st) * len(grp) for grp in mb_groups(m - 1)] + [per(bk) for bk in reversed(bks)]
            units = stage_units(st)
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
        pieces = [per(fold_stage_layers(f, s)) * len(grp) for f in reversed(layout.folds) for grp in mb_groups(m)]
        transient = max(M.transient_bytes(u, lv, a) for u in mine) * mb
        staging = 2 * max(per(u) for u in mine)
        stages.append(M.plan_stage(STREAM_BUFFERS * biggest, pieces, transient, staging, npu.hbm_capacity, policy.offload))
    return M.MemoryPlan(policy, m, stages)


def stationary_memory(workload, abc, microbatches, samples_per_replica, npu=None, policy="none",
                      granularity=DEFAULT_GRANULARITY):
    """Bytes per NPU (busiest stage) of ``workload`` in weight-stationary mode under memory
    ``policy`` (default ``none``: every activation the backward pass needs stays in HBM)."""
    npu = npu or C.default_npu()
    layout = plan_layout(workload, abc, "weight-stationary", npu, granularity, DEFAULT_STREAM_STEPS)
    return memory_plan(workload, abc, layout, M.POLICIES[policy], int(microbatches), float(samples_per_replica),
                       npu).need
