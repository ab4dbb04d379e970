"""The flow simulator's event engine: runs a task graph in time.

:func:`run` takes a :class:`~fred.model.network.taskgraph.TaskGraph` and returns a
:class:`~fred.model.network.simresult.SimResult`. The engine keeps the state of every task in flat
numpy arrays and processes all events that fall at the same instant together. One step:

1. *cascade* -- start every task whose dependencies are done (a delay becomes a timer, a flow
   joins the active flows), and complete at once the tasks that take no time (which may make
   more tasks ready);
2. *solve* -- if the set of active flows changed, give every active flow its rate
   (:mod:`fred.model.network.maxmin`; on FRED switches with several priority classes, first charge the
   preemptions the new flows cause);
3. *advance* -- move time to the next event (a flow sends its last byte or a timer expires);
   a flow that has sent its last byte releases its links and completes its path latency later
   (a timer).

The run ends when no flow is active and no timer is pending.
"""

from __future__ import annotations

import numpy as np

from .maxmin import maxmin_rates, priority_rates
from .simresult import SimResult
from .taskgraph import FLOW, TaskGraph

__all__ = ["run"]


def run(graph: TaskGraph, durations=None) -> SimResult:
    """Simulate every task of ``graph``; returns a :class:`SimResult`. ``durations``: the
    delays' durations to use instead of the graph's (one per task; flows ignore theirs)."""
    engine = _Engine(graph, durations)
    engine.simulate()
    return engine.result()


def _gather(ptr, flat, ids):
    """Concatenate segments ``flat[ptr[i]:ptr[i+1]]`` for i in ids; also return the owner index."""
    if ids.size == 1:                      # the common case: one task or path
        i = int(ids[0])
        seg = flat[ptr[i]:ptr[i + 1]]
        return seg, np.zeros(seg.size, dtype=np.int64)
    lo = ptr[ids]
    ln = ptr[ids + 1] - lo
    tot = int(ln.sum())
    if tot == 0:
        return flat[:0], np.zeros(0, dtype=np.int64)
    owner = np.repeat(np.arange(ids.size), ln)
    off = np.arange(tot) - np.repeat(np.cumsum(ln) - ln, ln)
    return flat[lo[owner] + off], owner


def _extreme_per_node(n_nodes, nodes, classes, levels, lowest):
    """Per node, the lowest (or highest) of ``classes`` at it (entries ``nodes[i]``,
    ``classes[i]``); nodes with none: the int64 maximum (or minimum). ``levels``: every class
    there may be, ascending -- a few, so one assignment per class beats ``np.minimum.at``."""
    info = np.iinfo(np.int64)
    out = np.full(n_nodes, info.max if lowest else info.min)
    for lv in (levels[::-1] if lowest else levels):   # the last write wins
        out[nodes[classes == lv]] = lv
    return out


def _segments(ptr, flat, ids):
    """``flat[ptr[i]:ptr[i+1]]`` for i in ids, concatenated (no owner index): slices for a few
    ids, :func:`_gather` for many."""
    if ids.size == 0:
        return flat[:0]
    if ids.size <= 16:
        segs = [flat[ptr[i]:ptr[i + 1]] for i in ids.tolist()]
        return segs[0] if len(segs) == 1 else np.concatenate(segs)
    return _gather(ptr, flat, ids)[0]


class _Engine:
    """The state of one run: the graph as arrays, then per task its start/finish and the
    active flows (``act``, remaining bytes ``rem``, ``rate``) with their (flow, link) incidence,
    and the timers (``tim``, absolute times ``tim_t``)."""

    def __init__(self, graph: TaskGraph, durations=None):
        g = graph.arrays()
        topo = graph.topo
        self.topo = topo
        self.timing = graph.timing
        self.graph = g
        N = self.N = g.kind.size
        self.kind = g.kind
        self.dur = g.duration if durations is None else np.asarray(durations, dtype=float)
        self.nbytes = g.nbytes
        self.path = g.path.astype(np.int64)
        self.prio = g.priority
        self.multi_prio = self.prio.size > 0 and self.prio.min() != self.prio.max()
        self.cap_link = topo.link_bw.astype(float) * graph.link_efficiency   # payload bytes/s
        self._successors(g.pred, g.succ)
        self._path_table(g)
        self._arbitration()

        self.start = np.full(N, np.nan)
        self.finish = np.full(N, np.nan)
        self.act = np.zeros(0, dtype=np.int64)      # active flow task ids
        self.rem = np.zeros(0)                      # remaining bytes
        self.rate = np.zeros(0)
        self.tim = np.zeros(0, dtype=np.int64)      # timer task ids
        self.tim_t = np.zeros(0)                    # absolute completion times
        self.t = 0.0
        self.events = 0
        self.dirty = True                           # the active flows changed: re-solve rates
        self.slot = np.empty(N, dtype=np.int64)
        self.pending = np.flatnonzero(self.indeg == 0)   # ready to start now
        self.done_now = np.zeros(0, dtype=np.int64)      # completing now

    # ---- setup -------------------------------------------------------------------------------
    def _successors(self, pred, succ):
        """Successor lists (CSR) and in-degrees."""
        N = self.N
        order = np.argsort(pred, kind="stable")
        self.s_idx = succ[order]
        self.s_ptr = np.zeros(N + 1, dtype=np.int64)
        np.cumsum(np.bincount(pred, minlength=N), out=self.s_ptr[1:])
        self.indeg = np.bincount(succ, minlength=N).astype(np.int64)

    def _path_table(self, g):
        """The paths' links (CSR), latencies and rate caps."""
        P = self.P = len(g.path_latency)
        self.p_len = np.fromiter((a.size for a in g.path_links), dtype=np.int64, count=P)
        self.p_ptr = np.zeros(P + 1, dtype=np.int64)
        np.cumsum(self.p_len, out=self.p_ptr[1:])
        self.p_flat = np.concatenate(g.path_links) if P else np.zeros(0, dtype=np.int64)
        self.p_lat = np.asarray(g.path_latency, dtype=float)
        self.p_cap = np.asarray(g.path_cap, dtype=float)

    def _arbitration(self):
        """FRED switch arbitration (one phase at a time, MP > PP > DP): only where classes differ."""
        topo = self.topo
        self.arb = bool(self.multi_prio and topo.fred_switches and topo.is_switch.any())
        if self.arb:
            self.n_nodes = topo.num_nodes
            self.sw_a = np.where(topo.is_switch[topo.link_src], topo.link_src, -1).astype(np.int64)
            self.sw_b = np.where(topo.is_switch[topo.link_dst], topo.link_dst, -1).astype(np.int64)
            self.t_pre, self.t_resume = self.timing.preemption_delay_s, self.timing.resume_delay_s
            self.levels = np.unique(self.prio).astype(np.int64)
            # per path, the switches on it (CSR): where its flows meet other classes
            pid = np.repeat(np.arange(self.P, dtype=np.int64), self.p_len)
            ends = np.concatenate([self.sw_a[self.p_flat], self.sw_b[self.p_flat]])
            key = np.unique(np.tile(pid, 2)[ends >= 0] * self.n_nodes + ends[ends >= 0])
            self.q_flat = key % self.n_nodes
            self.q_ptr = np.zeros(self.P + 1, dtype=np.int64)
            np.cumsum(np.bincount(key // self.n_nodes, minlength=self.P), out=self.q_ptr[1:])
        # the rate solver's memory: (path, class) key per task, rates per sorted key multiset
        pmin = int(self.prio.min()) if self.prio.size else 0
        span = (int(self.prio.max()) - pmin + 1) if self.prio.size else 1
        self.rkey = self.path * span + (self.prio.astype(np.int64) - pmin)
        self.rate_cache = {}
        self.xlat = np.zeros(self.N)                # latency added by preemptions, per task
        self.fresh = np.zeros(self.N, dtype=bool)   # flow started since the last rate solve
        self.n_pre = self.n_res = 0

    # ---- the loop ----------------------------------------------------------------------------
    def simulate(self):
        with np.errstate(divide="ignore", invalid="ignore"):   # a starved flow: rem / 0 = inf
            self._loop()

    def _loop(self):
        while True:
            self._cascade()
            if self.act.size == 0 and self.tim.size == 0:
                break
            self.events += 1
            if self.dirty and self.act.size:
                self._solve_rates()
                self.dirty = False
            self._advance()

    def _cascade(self):
        """Start newly ready tasks; complete zero-time ones at once (which may ready more)."""
        while self.pending.size or self.done_now.size:
            if self.pending.size:
                self._start_pending()
            if self.done_now.size:
                self._complete_now()

    def _start_pending(self):
        fl, ti, tt = self._begin(self.pending, self.t)
        self.pending = np.zeros(0, dtype=np.int64)
        if fl.size:
            self.act = np.concatenate([self.act, fl])
            self.rem = np.concatenate([self.rem, self.nbytes[fl]])
            self.rate = np.concatenate([self.rate, np.zeros(fl.size)])
            self.fresh[fl] = True
            self.dirty = True
        if ti.size:
            z = tt <= self.t
            if z.any():
                self.done_now = np.concatenate([self.done_now, ti[z]])
                ti, tt = ti[~z], tt[~z]
            self.tim = np.concatenate([self.tim, ti])
            self.tim_t = np.concatenate([self.tim_t, tt])

    def _begin(self, ids, now):
        """Start tasks ``ids`` at ``now``; returns (new flows, new timers' ids, their times)."""
        self.start[ids] = now
        isflow = self.kind[ids] == FLOW
        fl = ids[isflow]
        if fl.size:
            empty = self.p_len[self.path[fl]] == 0
            if empty.any():       # a flow to itself: only its latency (a timer)
                tl = fl[empty]
                fl = fl[~empty]
                dl = ids[~isflow]
                return fl, np.concatenate([dl, tl]), np.concatenate([now + self.dur[dl],
                                                                     now + self.p_lat[self.path[tl]]])
        dl = ids[~isflow]
        return fl, dl, now + self.dur[dl]

    def _complete_now(self):
        """Finish the tasks in ``done_now``; their successors whose last dependency this was
        become ``pending``."""
        done = self.done_now
        self.finish[done] = self.t
        nxt = _segments(self.s_ptr, self.s_idx, done)
        self.done_now = np.zeros(0, dtype=np.int64)
        if nxt.size:
            np.subtract.at(self.indeg, nxt, 1)
            cand = nxt[self.indeg[nxt] == 0]
            if cand.size > 1:  # a task whose last two deps finished together
                self.slot[cand] = np.arange(cand.size)
                cand = cand[self.slot[cand] == np.arange(cand.size)]
            self.pending = cand

    # ---- rates -------------------------------------------------------------------------------
    def _solve_rates(self):
        """Rates of the active flows. They depend only on the multiset of (path, priority) of
        the active flows (flows with the same path and class get the same rate), so the solve
        runs on the flows sorted by that key -- the result is the same whatever order the flows
        became active in -- and is remembered per multiset: collectives repeat the same set of
        flows step after step, layer after layer."""
        act = self.act
        if self.arb:
            isnew = self.fresh[act]
            if isnew.any():
                sn, so = _gather(self.q_ptr, self.q_flat, self.path[act])
                self._charge_preemptions(sn, so, self.prio[act], isnew)
                self.fresh[act] = False
        key = self.rkey[act]
        order = np.argsort(key, kind="stable")
        skey = key[order]
        tag = skey.tobytes()
        rate = self.rate_cache.get(tag)
        if rate is None:
            rate = self._solve_sorted(act[order], skey)
            self.rate_cache[tag] = rate
        self.rate = np.empty(act.size)
        self.rate[order] = rate

    def _solve_sorted(self, act, skey):
        """Rates of the flows ``act``, sorted by their (path, class) keys ``skey``. Flows with the
        same key are solved as one flow of that multiplicity (a collective's pieces and
        repeated collectives put many identical flows on the network at once)."""
        first = np.flatnonzero(np.r_[True, skey[1:] != skey[:-1]])
        mult = None
        if first.size < act.size:
            mult = np.diff(np.r_[first, act.size])
            act = act[first]
        lk, ow = _gather(self.p_ptr, self.p_flat, self.path[act])
        flow_cap = self.p_cap[self.path[act]]
        if self.arb:
            r = priority_rates(ow, lk, act.size, self.cap_link, flow_cap, self.prio[act],
                               sw=(self.sw_a, self.sw_b, self.n_nodes), mult=mult)
        elif self.multi_prio:
            r = priority_rates(ow, lk, act.size, self.cap_link, flow_cap, self.prio[act], mult=mult)
        else:
            r = maxmin_rates(ow, lk, act.size, self.cap_link, flow_cap, mult)
        return r if mult is None else np.repeat(r, mult)

    def _charge_preemptions(self, sn, so, pa, isnew):
        """A new flow meets a lower class holding the fabric of a switch on its route: it
        preempts (pays the measured preemption latency), and every flow it interrupts there pays
        a phase switch to get the fabric back. ``sn[i]``: a switch on the route of active flow
        ``so[i]``; ``pa``: the active flows' classes; ``isnew``: started since the last solve."""
        n_nodes = self.n_nodes
        run_e = (~isnew & (self.rate > 0))[so]
        new_e = isnew[so]
        pe = pa[so]
        minp = _extreme_per_node(n_nodes, sn[run_e], pe[run_e], self.levels, lowest=True)
        pre = np.unique(so[new_e & (minp[sn] < pe)])
        if pre.size:
            maxp = _extreme_per_node(n_nodes, sn[new_e], pe[new_e], self.levels, lowest=False)
            vic = np.unique(so[run_e & (maxp[sn] > pe)])
            self.xlat[self.act[pre]] += self.t_pre
            self.xlat[self.act[vic]] += self.t_resume
            self.n_pre += int(pre.size)
            self.n_res += int(vic.size)

    # ---- time --------------------------------------------------------------------------------
    def _advance(self):
        """Move to the next event: flows that send their last byte then, timers due then."""
        if self.act.size:
            tf = self.rem / self.rate              # a starved low-priority flow: inf
            dtf = tf.min()
        else:
            tf = None
            dtf = np.inf
        t = self.t
        tnext = min(t + dtf, self.tim_t.min() if self.tim.size else np.inf)
        eps = 1e-12 * max(tnext, 1e-9)
        if self.act.size:
            dt = tnext - t
            fin = tf <= dt + eps
            self.rem = self.rem - self.rate * dt
            if fin.any():
                self._retire(fin, tnext)
        self.t = tnext
        if self.tim.size:
            due = self.tim_t <= tnext + eps
            if due.any():
                self.done_now = np.concatenate([self.done_now, self.tim[due]])
                self.tim, self.tim_t = self.tim[~due], self.tim_t[~due]

    def _retire(self, fin, tnext):
        """Active flows ``fin`` (a mask) have sent their last byte at ``tnext``: they release
        their links and complete after their path latency (plus any preemption latency)."""
        fl = self.act[fin]
        keep = ~fin
        self.act, self.rem, self.rate = self.act[keep], self.rem[keep], self.rate[keep]
        self.dirty = True
        lat = self.p_lat[self.path[fl]] + self.xlat[fl]
        z = lat <= 0
        if z.any():
            self.done_now = np.concatenate([self.done_now, fl[z]])
        if (~z).any():
            self.tim = np.concatenate([self.tim, fl[~z]])
            self.tim_t = np.concatenate([self.tim_t, tnext + lat[~z]])

    # ---- the result --------------------------------------------------------------------------
    def result(self) -> SimResult:
        start, finish, g, topo = self.start, self.finish, self.graph, self.topo
        if np.isnan(finish).any():  # pragma: no cover - deps always point backwards
            bad = int(np.flatnonzero(np.isnan(finish))[0])
            raise RuntimeError(f"task {bad} never ran (dependency cycle?)")
        # collectives: the returned node spans from its begin marker to its join
        for b, j in g.spans:
            start[j] = start[b]
        link_bytes, bytes_sent, bytes_recv = self._traffic()
        return SimResult(topo, self.timing, g, start, finish, link_bytes=link_bytes, bytes_sent=bytes_sent,
                         bytes_received=bytes_recv, events=self.events, preemptions=self.n_pre,
                         resumes=self.n_res, preemption_latency=float(self.xlat.sum()))

    def _traffic(self):
        """Bytes per link, sent per node and received per node."""
        g, topo, P, L = self.graph, self.topo, self.P, self.topo.num_links
        isf = self.kind == FLOW
        pb = np.bincount(self.path[isf], weights=self.nbytes[isf], minlength=P) if P else np.zeros(0)
        if not P:
            return np.zeros(L), np.zeros(topo.num_nodes), np.zeros(topo.num_nodes)
        link_bytes = np.bincount(self.p_flat, weights=np.repeat(pb, self.p_len), minlength=L)
        s_len = np.fromiter((a.size for a in g.path_srcs), dtype=np.int64, count=P)
        s_flat = np.concatenate(g.path_srcs)
        bytes_sent = np.bincount(s_flat, weights=np.repeat(pb, s_len), minlength=topo.num_nodes)
        d_len = np.fromiter((a.size for a in g.path_dsts), dtype=np.int64, count=P)
        d_flat = np.concatenate(g.path_dsts)
        bytes_recv = np.bincount(d_flat, weights=np.repeat(pb, d_len), minlength=topo.num_nodes)
        return link_bytes[:L], bytes_sent[: topo.num_nodes], bytes_recv[: topo.num_nodes]
