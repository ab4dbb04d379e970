"""The weight-stationary iteration as a task graph (:mod:`fred.model.schedule`: GPipe over the
pipeline stages, Megatron MP All-Reduces, DP buckets overlapping the last backward, the optimizer
step, activation offloading)."""

from __future__ import annotations

from . import compute as C
from .schedule_layout import chunk, dp_groups, mb_groups, mp_groups, pp_pairs
from .schedule_offload import Offload


def build_stationary(g, w, abc, m, mb, B, npu, layout, plan):
    a, b, c = abc
    dt = w.dtype_bytes
    lv = plan.policy.recompute
    stages, bks = layout.stages, layout.buckets
    # a whole stage per microbatch and pass (compute and MP bytes summed; MP All-Reduces are on
    # the MP group's critical path either way), except the last microbatch's backward, which is
    # split into DP buckets: the stage's first layer alone (its bucket is the exposed DP tail)
    # and up to G-1 balanced chunks of the rest, each All-Reduced as soon as its gradients exist.
    # With offloading, the last microbatch's forward runs by the same buckets too (the pieces).
    full = [chunk(st, mb, a, npu, dt, lv) for st in stages]
    buckets = [[chunk(r, mb, a, npu, dt, lv) for r in runs] for runs in bks]
    nb = [len(x) for x in buckets]
    # bytes offloaded per stage and piece; plan pieces are in backward order: runs of
    # microbatches 0..m-2 (a run leaves after its last microbatch's forward and comes back before
    # its first one's backward), then the last microbatch bucket by bucket
    runs = mb_groups(m - 1)
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
    io = [Offload(g, abc, s) for s in range(c)]
    mpg = [mp_groups(abc, s) for s in range(c)]
    dpg = [dp_groups(abc, s) for s in range(c)]

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
                pp_f[s][j] = g.multicasts(pp_pairs(abc, s, s + 1), full[s].out_act, [t], "pp")

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
                pp_b[s][j] = g.multicasts(pp_pairs(abc, s, s - 1), full[s - 1].out_act, [t], "pp")
    ends = []
    for s in range(c):
        p = full[s].params / a
        ends.append(g.compute(C.optimizer_time(p, b, npu), [bwd_done[s][m - 1], last_dp[s]], "optimizer", stage=s))
    g.join(ends)
