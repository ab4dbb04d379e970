"""The weight-streaming iteration as a task graph (:mod:`fred.model.schedule.iteration`: layer groups
streamed in from the I/O controllers, simulated in folds; gradients reduced on the way out;
activation offloading)."""

from __future__ import annotations

from .layout import chunk, dp_groups, mb_groups, mp_groups, pp_pairs
from .offload import Offload


def build_streaming(g, w, abc, m, mb, B, npu, layout, mplan):
    """Add one weight-streaming iteration of workload ``w`` to ``g`` (a :class:`ScheduleGraph`):
    ``m`` microbatches of ``mb`` samples (``B`` per replica), the folds of ``layout``, the
    offloading of memory plan ``mplan``."""
    _Streaming(g, w, abc, m, mb, npu, layout, mplan).build(B)


class _Streaming:
    """The builder's state: the NPU groups, the offload pieces, the last stream task, the last
    task on every stage."""

    def __init__(self, g, w, abc, m, mb, npu, layout, mplan):
        a, b, c = abc
        self.g, self.w, self.abc, self.c, self.m, self.mb, self.npu = g, w, abc, c, m, mb, npu
        self.lv = mplan.policy.recompute
        self.mpg = [mp_groups(abc, s) for s in range(c)]
        self.dpg = [dp_groups(abc, s) for s in range(c)]
        self.folds = layout.folds
        nf = len(self.folds)
        # bytes offloaded per (stage, fold, run of microbatches); plan pieces are in backward order.
        # A run's activations leave after its last microbatch and come back before its first one.
        runs = mb_groups(m)
        self.first = {grp[0]: r for r, grp in enumerate(runs)}
        self.last = {grp[-1]: r for r, grp in enumerate(runs)}
        self.off = [{(nf - 1 - i // len(runs), i % len(runs)): x for i, x in enumerate(sm.offload)}
                    for sm in mplan.stages]
        self.offloading = any(x > 0 for d in self.off for x in d.values())
        self.io = [Offload(g, abc, s) for s in range(c)]
        self.last_stream = None       # the last stream-in task (the I/O controllers stream in order)
        self.last_out = None          # the last gradients-out task
        self.last_on_stage = [None] * c
        self.started = None           # the start of the last chain's first compute

    def build(self, B):
        inp = self.g.coll("io-broadcast", self.mpg[0], B * self.w.input_bytes_per_sample, (), "input")
        fwd_end = self.forward(inp)
        self.backward(fwd_end)
        self.g.join([self.last_out] + [x for x in self.last_on_stage if x is not None])

    def part(self, grps, s):
        ls = [l for grp in grps if s < len(grp) for l in grp[s]]
        return chunk(ls, self.mb, self.abc[0], self.npu, self.w.dtype_bytes, self.lv) if ls else None

    def fold_plan(self, fold):
        """Per stage: (head chunk or None, last chunk, PP bytes out, the head's first group and
        the rest of the head); stream bytes of the first group and of the rest. The first k-1
        groups compute as soon as the first group's weights are in; the last group waits for the
        whole fold -- for identical layer groups this gives exactly the layer-by-layer finish time
        max(prev + k c, t + s + k c, t + k s + c). Backward mirrors it for the gradients going
        out: the head's gradients leave once its first group is computed, the last group's once
        it is (see :meth:`backward`), which again finishes exactly when layer by layer would:
        max(prev + k s, t + c + k s, t + k c + s)."""
        k = len(fold)
        head, last = fold[:-1], fold[-1:]
        stages = []
        for s in range(self.c):
            lc = self.part(last, s)
            if lc is None:
                continue
            hc = self.part(head, s) if k > 1 else None
            hs = [grp for grp in head if s < len(grp)]
            fc, rc = (self.part(hs[:1], s), self.part(hs[1:], s)) if hc is not None else (None, None)
            pp_out = sum(grp[s][-1].act_bytes for grp in fold if s < len(grp)) * self.mb
            stages.append((hc, lc, pp_out, fc, rc))
        dt, a = self.w.dtype_bytes, self.abc[0]
        wb = lambda grps: sum(l.params for grp in grps for u in grp for l in u) * dt / a / max(1, len(stages))
        return stages, wb(fold[:1]), wb(fold[1:]), wb(head), wb(last)

    def stream(self, nbytes, nst):
        # every stage's shard at once (one collective; stages differ only by embedding/logits);
        # the I/O controllers stream continuously (prefetch limited by I/O bandwidth only)
        if nbytes <= 0:
            return self.last_stream
        groups = [grp for s in range(nst) for grp in self.dpg[s]]
        self.last_stream = self.g.coll("io-broadcast", groups, nbytes, [self.last_stream], "stream")
        return self.last_stream

    def grads_out(self, nbytes, nst, dep):
        if nbytes <= 0 or dep is None:
            return
        groups = [grp for s in range(nst) for grp in self.dpg[s]]
        self.last_out = self.g.coll("io-reduce", groups, nbytes, [dep, self.last_out], "stream")

    def stage_chain(self, s, plan, t_in, s_first, s_rest, phase, extra=None):
        """Stage ``s``'s fold for one microbatch: head compute, its MP All-Reduce, last compute,
        its MP All-Reduce. Returns (end, head's first group computed, last group computed):
        in backward the head is computed as its first group and the rest, so that the head's
        gradients can leave as soon as its first group has produced them (the layers after it
        keep producing theirs at the compute rate, which the fold cannot show). ``extra``: one
        more task the chain waits for (an offload gate or a reload's start)."""
        g = self.g
        hc, lc, _, fc, rc = plan
        mpb = (lambda ch: ch.mp_fwd) if phase == "fwd" else (lambda ch: ch.mp_bwd)
        dur = (lambda ch: ch.fwd) if phase == "fwd" else (lambda ch: ch.bwd + ch.rec)
        rec = (lambda ch: 0.0) if phase == "fwd" else (lambda ch: ch.rec)
        t = g.join([s_first, t_in, self.last_on_stage[s], extra])
        self.started = t
        head_done = None
        if hc is not None:
            if phase == "bwd" and fc is not None and rc is not None:
                t = g.compute(dur(fc), [t], stage=s, rec=rec(fc))
                head_done = t
                t = g.compute(dur(rc), [t], stage=s, rec=rec(rc))
            else:
                t = g.compute(dur(hc), [t], stage=s, rec=rec(hc))
                head_done = t
            if mpb(hc):
                t = g.coll("all-reduce", self.mpg[s], mpb(hc), [t], "mp")
        t = g.compute(dur(lc), [t, s_rest], stage=s, rec=rec(lc))
        last_done = t
        if mpb(lc):
            t = g.coll("all-reduce", self.mpg[s], mpb(lc), [t], "mp")
        return t, head_done, last_done

    def forward(self, inp):
        """Every fold forward, microbatch by microbatch through the stages; returns its end."""
        g, c, io = self.g, self.c, self.io
        plans = [self.fold_plan(f) for f in self.folds]
        prev_out = [inp] * self.m
        for k, (st, b1, b2, _, _) in enumerate(plans):
            s1 = self.stream(b1, len(st))
            s2 = self.stream(b2, len(st)) if b2 > 0 else s1
            for j in range(self.m):
                t_in = prev_out[j]
                for s, plan in enumerate(st):
                    r = self.first.get(j, self.last.get(j))
                    nbytes = self.off[s].get((k, r), 0.0) if self.offloading else 0.0
                    gate = io[s].gate_forward() if nbytes > 0 and j in self.first else None
                    t, _, _ = self.stage_chain(s, plan, t_in, s1, s2, "fwd", gate)
                    if nbytes > 0 and j in self.first:
                        io[s].offload((k, r), nbytes, self.started)
                    if nbytes > 0 and j in self.last:
                        io[s].produced((k, r), t)
                    self.last_on_stage[s] = t
                    more = s < len(st) - 1 or k < len(plans) - 1
                    if c > 1 and more:
                        t_in = g.multicasts(pp_pairs(self.abc, s, (s + 1) % c), plan[2], [t], "pp")
                    else:
                        t_in = t
                prev_out[j] = t_in
        return g.join(prev_out + [x for x in self.last_on_stage if x is not None])

    def backward(self, fwd_end):
        """Every fold backward (reverse order); gradients reduced over DP on their way out."""
        prev_in = [fwd_end] * self.m
        rplans = [self.fold_plan(list(reversed(f))) for f in reversed(self.folds)]
        for k, (st, b1, b2, bh, bl) in enumerate(rplans):
            s1 = self.stream(b1, len(st))
            s2 = self.stream(b2, len(st)) if b2 > 0 else s1
            heads, lasts = [], []
            for j in range(self.m):
                prev_in[j] = self.backward_microbatch(k, j, rplans, prev_in[j], s1, s2, heads, lasts)
            # the head groups' gradients leave once the head's first group is computed (on every
            # stage, last microbatch), the last group's once it is computed and the head's are out
            hd = [x for x in heads if x is not None]
            self.grads_out(bh, len(st), self.g.join(hd) if hd else None)
            self.grads_out(bl, len(st), self.g.join(lasts))

    def backward_microbatch(self, k, j, rplans, t_in, s1, s2, heads, lasts):
        """Microbatch ``j``'s backward of reversed fold ``k`` through the stages (last first);
        returns the task the next fold's backward of ``j`` waits for. The last microbatch's
        head-computed and last-computed tasks are appended to ``heads`` and ``lasts``."""
        g, c, io = self.g, self.c, self.io
        st = rplans[k][0]
        for s in reversed(range(len(st))):
            key = (len(self.folds) - 1 - k, self.first.get(j, self.last.get(j)))
            r0 = None
            if self.offloading and j in self.first:
                r0, io[s].pending = io[s].reload(key, self.off[s].get(key, 0.0))
            t, hd, ld = self.stage_chain(s, st[s], t_in, s1, s2, "bwd", r0)
            if self.offloading and j in self.last:
                t = g.join([t, io[s].pending])
                io[s].backward_done(t)
            if j == self.m - 1:
                heads.append(hd)
                lasts.append(ld)
            self.last_on_stage[s] = t
            if c > 1 and (s > 0 or k < len(rplans) - 1):
                src = st[s - 1] if s > 0 else rplans[k + 1][0][-1]
                t_in = g.multicasts(pp_pairs(self.abc, s, (s - 1) % c), src[2], [t], "pp")
            else:
                t_in = t
        return t_in
