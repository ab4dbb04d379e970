"""The weight-streaming iteration as a task graph (:mod:`fred.model.schedule`: layer groups
streamed in from the I/O controllers, simulated in folds; gradients reduced on the way out;
activation offloading)."""

from __future__ import annotations

from .schedule_layout import chunk, dp_groups, mb_groups, mp_groups, pp_pairs
from .schedule_offload import Offload


def build_streaming(g, w, abc, m, mb, B, npu, layout, mplan):
    a, b, c = abc
    dt = w.dtype_bytes
    lv = mplan.policy.recompute
    mpg = [mp_groups(abc, s) for s in range(c)]
    dpg = [dp_groups(abc, s) for s in range(c)]
    folds = layout.folds
    nf = len(folds)
    # bytes offloaded per (stage, fold, run of microbatches); plan pieces are in backward order.
    # A run's activations leave after its last microbatch and come back before its first one.
    runs = mb_groups(m)
    first = {grp[0]: r for r, grp in enumerate(runs)}
    last = {grp[-1]: r for r, grp in enumerate(runs)}
    off = [{(nf - 1 - i // len(runs), i % len(runs)): x for i, x in enumerate(sm.offload)} for sm in mplan.stages]
    offloading = any(x > 0 for d in off for x in d.values())
    io = [Offload(g, abc, s) for s in range(c)]

    def part(grps, s):
        ls = [l for grp in grps if s < len(grp) for l in grp[s]]
        return chunk(ls, mb, a, npu, dt, lv) if ls else None

    def fold_plan(fold):
        """Per stage: (head chunk or None, last chunk, PP bytes out, the head's first group and
        the rest of the head); stream bytes of the first group and of the rest. The first k-1
        groups compute as soon as the first group's weights are in; the last group waits for the
        whole fold -- for identical layer groups this gives exactly the layer-by-layer finish time
        max(prev + k c, t + s + k c, t + k s + c). Backward mirrors it for the gradients going
        out: the head's gradients leave once its first group is computed, the last group's once
        it is (see ``build_streaming``), which again finishes exactly when layer by layer would:
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
                t_in = g.multicasts(pp_pairs(abc, s, (s + 1) % c), pp_out, [t], "pp") if (c > 1 and more) else t
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
                    t_in = g.multicasts(pp_pairs(abc, s, (s - 1) % c), src[2], [t], "pp")
                else:
                    t_in = t
            prev_in[j] = t_in
        # the head groups' gradients leave once the head's first group is computed (on every
        # stage, last microbatch), the last group's once it is computed and the head's are out
        hd = [x for x in heads if x is not None]
        grads_out(bh, len(st), g.join(hd) if hd else None)
        grads_out(bl, len(st), g.join(lasts))
    g.join([last_out[0]] + [x for x in last_on_stage if x is not None])
