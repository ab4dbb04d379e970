"""The weight-stationary iteration as a task graph (:mod:`fred.model.schedule.iteration`: GPipe over the
pipeline stages, Megatron MP All-Reduces, DP buckets overlapping the last backward, the optimizer
step, activation offloading)."""

from __future__ import annotations

from fred.model.workload import compute as C
from fred.model.collectives import ep_groups, expert_dp_groups
from .layout import chunk, dp_groups, mb_groups, mp_groups, pp_pairs
from .offload import Offload


def build_stationary(g, w, abc, m, mb, B, npu, layout, plan):
    """Add one weight-stationary iteration of workload ``w`` to ``g`` (a :class:`ScheduleGraph`):
    ``m`` microbatches of ``mb`` samples (``B`` per replica), the stages and DP buckets of
    ``layout``, the offloading of memory plan ``plan``."""
    st = _Stationary(g, w, abc, m, mb, npu, layout, plan)
    # next iteration's input minibatch, prefetched while this one runs (weight stationary)
    g.coll("io-broadcast", st.mpg[0], B * w.input_bytes_per_sample, (), "input")
    fwd_done = st.forward()
    bwd_done, last_dp = st.backward(fwd_done)
    st.optimizer(bwd_done, last_dp)


class _Stationary:
    """What the passes share: per stage its whole-stage chunk and DP-bucket chunks, the offload
    bytes per piece, the offload tasks and the NPU groups.

    A whole stage per microbatch and pass (compute and MP bytes summed; MP All-Reduces are on
    the MP group's critical path either way), except the last microbatch's backward, which is
    split into DP buckets: the stage's first layer alone (its bucket is the exposed DP tail)
    and up to G-1 balanced chunks of the rest, each All-Reduced as soon as its gradients exist.
    With offloading, the last microbatch's forward runs by the same buckets too (the pieces)."""

    def __init__(self, g, w, abc, m, mb, npu, layout, plan):
        a, b, c = abc
        self.g, self.abc, self.m, self.npu = g, abc, m, npu
        self.dt = dt = w.dtype_bytes
        lv = plan.policy.recompute
        self.full = [chunk(st, mb, a, npu, dt, lv) for st in layout.stages]
        self.buckets = [[chunk(r, mb, a, npu, dt, lv) for r in runs] for runs in layout.buckets]
        self.off = self._offload_bytes(plan, m)
        self.offloading = any(x > 0 for d in self.off for x in d.values())
        self.io = [Offload(g, abc, s) for s in range(c)]
        self.mpg = [mp_groups(abc, s) for s in range(c)]
        self.dpg = [dp_groups(abc, s) for s in range(c)]
        # expert parallelism: the all-to-all groups, the groups holding the same experts, and
        # the busiest EP rank's tokens over an even share (the all-to-all's busiest port)
        self.ep = ep = w.expert_parallel
        self.epg = [ep_groups(abc, ep, s) for s in range(c)]
        self.edpg = [expert_dp_groups(abc, ep, s) for s in range(c)]
        self.skew = w.expert_imbalance()

    def _offload_bytes(self, plan, m):
        """Bytes offloaded per stage and piece; plan pieces are in backward order: runs of
        microbatches 0..m-2 (a run leaves after its last microbatch's forward and comes back
        before its first one's backward), then the last microbatch bucket by bucket."""
        nb = [len(x) for x in self.buckets]
        runs = mb_groups(m - 1)
        self.run_of = {j: r for r, grp in enumerate(runs) for j in grp}
        self.firsts = {grp[0] for grp in runs}
        self.lasts = {grp[-1] for grp in runs}
        off = []
        for s, sm in enumerate(plan.stages):
            d = {("run", r): sm.offload[r] for r in range(len(runs))}
            for r in range(nb[s]):
                d[(m - 1, nb[s] - 1 - r)] = sm.offload[len(runs) + r]
            off.append(d)
        return off

    def key(self, j, k):
        """The offload piece of microbatch ``j`` (bucket ``k`` in the last microbatch)."""
        return ("run", self.run_of[j]) if j < self.m - 1 else (self.m - 1, k)

    def forward(self):
        """GPipe forward: every microbatch through every stage; returns the forward end of
        every (stage, microbatch)."""
        g, m, c, io, key = self.g, self.m, self.abc[2], self.io, self.key
        fwd_done = [[None] * m for _ in range(c)]
        pp_f = [[None] * m for _ in range(c)]
        for j in range(m):
            for s in range(c):
                t = g.join([pp_f[s - 1][j] if s else None, fwd_done[s][j - 1] if j else None]) if (s or j) else None
                for k, ch in (enumerate(self.buckets[s]) if self.offloading and j == m - 1 else [(None, self.full[s])]):
                    nbytes = self.off[s].get(key(j, k), 0.0) if self.offloading else 0.0
                    if nbytes > 0 and (j == m - 1 or j in self.firsts):
                        t = g.join([t, io[s].gate_forward()])
                        io[s].offload(key(j, k), nbytes, t)
                    t = g.compute(ch.fwd, [t], stage=s)
                    if ch.mp_fwd:
                        t = g.coll("all-reduce", self.mpg[s], ch.mp_fwd, [t], "mp")
                    t = self.all_to_all(s, ch, t)
                    if nbytes > 0 and (j == m - 1 or j in self.lasts):
                        io[s].produced(key(j, k), t)
                fwd_done[s][j] = t
                if s < c - 1:
                    pp_f[s][j] = g.multicasts(pp_pairs(self.abc, s, s + 1), self.full[s].out_act, [t], "pp")
        return fwd_done

    def backward(self, fwd_done):
        """GPipe backward after each stage's last forward; the last microbatch by DP bucket, each
        bucket's gradients All-Reduced over DP. Returns the backward end of every (stage,
        microbatch) and every stage's last DP All-Reduce."""
        g, m, c = self.g, self.m, self.abc[2]
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
                bwd_done[s][j] = self.backward_stage(s, j, g.join(deps), last_dp)
                if s > 0:
                    pp_b[s][j] = g.multicasts(pp_pairs(self.abc, s, s - 1), self.full[s - 1].out_act,
                                              [bwd_done[s][j]], "pp")
        return bwd_done, last_dp

    def backward_stage(self, s, j, t, last_dp):
        """Stage ``s``'s backward of microbatch ``j`` from task ``t``; returns its end."""
        g, m, io, key = self.g, self.m, self.io[s], self.key
        a, b, _ = self.abc
        for k, ch in (reversed(list(enumerate(self.buckets[s]))) if j == m - 1 else [(None, self.full[s])]):
            first = j == m - 1 or j in self.firsts
            if self.offloading and first:
                r0, io.pending = io.reload(key(j, k), self.off[s].get(key(j, k), 0.0))
                t = g.join([t, r0])
            t = g.compute(ch.bwd + ch.rec, [t], stage=s, rec=ch.rec)
            if self.offloading and (j == m - 1 or j in self.lasts):
                t = g.join([t, io.pending])
                io.backward_done(t)
            grads = t
            t = self.all_to_all(s, ch, t)
            if ch.mp_bwd:
                t = g.coll("all-reduce", self.mpg[s], ch.mp_bwd, [t], "mp")
            if j == m - 1 and (b > 1 or getattr(g, "wafers", 1) > 1) and ch.params:   # DP across wafers
                # non-expert gradients over every replica; an expert's over the replicas holding it
                last_dp[s] = g.coll("all-reduce", self.dpg[s], (ch.params - ch.expert_params) * self.dt / a,
                                    [grads, last_dp[s]], "dp")
                if ch.expert_params and (b > self.ep or getattr(g, "wafers", 1) > 1):
                    last_dp[s] = g.coll("all-reduce", self.edpg[s], ch.expert_params * self.dt / a,
                                        [grads, last_dp[s]], "dp")
        return t

    def all_to_all(self, s, ch, t):
        """The MoE all-to-alls (dispatch and combine of every MoE layer of chunk ``ch``, one
        pass) over stage ``s``'s EP groups after task ``t``; ``t`` without expert parallelism."""
        if not ch.a2a or self.ep < 2:
            return t
        return self.g.coll("all-to-all", self.epg[s], ch.a2a, [t], "ep", skew=self.skew, repeats=ch.a2a_n)

    def optimizer(self, bwd_done, last_dp):
        """Every stage's optimizer step after its backward and DP All-Reduces; the iteration's end."""
        a, b, c = self.abc
        ends = []
        for s in range(c):
            pe = self.full[s].expert_params / a
            p = self.full[s].params / a - pe
            step = C.optimizer_time(p, b, self.npu) + C.optimizer_time(pe, b // self.ep, self.npu)
            ends.append(self.g.compute(step, [bwd_done[s][self.m - 1], last_dp[s]], "optimizer", stage=s))
        self.g.join(ends)
