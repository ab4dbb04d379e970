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

from . import engine_kernel as K_
from .maxmin import ARBITRATED, PLAIN, PRIORITY, group_rates, maxmin_rates, priority_rates
from .simresult import SimResult
from .taskgraph import FLOW, TaskGraph

__all__ = ["run", "warm"]


def run(graph: TaskGraph, durations=None, remember_rates=True) -> SimResult:
    """Simulate every task of ``graph``; returns a :class:`SimResult`. ``durations``: the
    delays' durations to use instead of the graph's (one per task; flows ignore theirs).
    ``remember_rates=False`` solves every rate afresh, each flow on its own (for tests)."""
    engine = _Engine(graph, durations, remember_rates)
    engine.simulate()
    return engine.result()


def warm() -> None:
    """Load the compiled engine into this process (numba loads each compiled function from its
    on-disk cache at its first call): a process about to fork workers calls this once, so that
    no worker loads it again (:class:`fred.jobs.JobRunner`)."""
    from .taskgraph import TaskGraph
    from .topology import single_switch

    g = TaskGraph(single_switch(3, 1e9))
    g.transfer(0, 1, 1e6)                       # two flows share a link: a max-min solve
    g.transfer(2, 1, 1e6, priority=1)
    run(g)                                      # the loop, the solve, the memory's insert
    K_.rehash(np.full(4, -1, dtype=np.int64), np.zeros(1, dtype=np.int64), 1)   # (when the memory grows)


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


class _Static:
    """What a run needs of a graph that does not change between runs of it (successors, the
    path table, the flows' rate groups, the switch arbitration set-up) and the rate solver's
    memory; kept on the graph (:func:`_static`) so that a graph re-timed for another k starts
    with the rates it has already solved."""

    def __init__(self, graph: TaskGraph, g):
        topo = graph.topo
        self.topo, self.timing, self.graph = topo, graph.timing, g
        N = self.N = g.kind.size
        self.kind = np.ascontiguousarray(g.kind, dtype=np.int8)
        self.nbytes = np.ascontiguousarray(g.nbytes, dtype=np.float64)
        self.path = g.path.astype(np.int64)
        self.prio = g.priority
        self.multi_prio = self.prio.size > 0 and self.prio.min() != self.prio.max()
        self.cap_link = topo.link_bw.astype(float) * graph.link_efficiency   # payload bytes/s
        # successors (CSR) and in-degrees
        self.s_ptr, self.s_idx, self.indeg = K_.successors(np.ascontiguousarray(g.pred, dtype=np.int64),
                                                           np.ascontiguousarray(g.succ, dtype=np.int64), N)
        # the paths' links (CSR), latencies and rate caps
        P = self.P = len(g.path_latency)
        self.p_len = np.fromiter((a.size for a in g.path_links), dtype=np.int64, count=P)
        self.p_ptr = np.zeros(P + 1, dtype=np.int64)
        np.cumsum(self.p_len, out=self.p_ptr[1:])
        self.p_flat = np.concatenate(g.path_links).astype(np.int64) if P else np.zeros(0, dtype=np.int64)
        self.p_lat = np.asarray(g.path_latency, dtype=np.float64)
        self.p_cap = np.asarray(g.path_cap, dtype=np.float64)
        if not P:                                   # the kernel indexes the path table of flows only
            self.p_len, self.p_lat = np.zeros(1, dtype=np.int64), np.zeros(1)
        # rate groups: flows with the same (path, class) always get the same rate; numbered in
        # the order of that key, so the active groups ascending are in the solver's order
        pmin = int(self.prio.min()) if self.prio.size else 0
        span = (int(self.prio.max()) - pmin + 1) if self.prio.size else 1
        isf = self.kind == FLOW
        rkey = self.path * span + (self.prio.astype(np.int64) - pmin)
        # the keys present, ascending, by marking (keys are < paths x classes): no sort
        rk = rkey[isf]
        present = np.zeros(max(P, 1) * span, dtype=bool)
        present[rk] = True
        rank = np.cumsum(present) - 1
        ukeys = np.flatnonzero(present)
        inv = rank[rk]
        self.group = np.zeros(N, dtype=np.int64)        # delays: group 0, never read
        self.group[isf] = inv
        self.K = ukeys.size
        first = np.zeros(self.K, dtype=np.int64)
        fl = np.flatnonzero(isf)
        first[inv[::-1]] = fl[::-1]                     # one flow of each group
        self.g_path = self.path[first] if self.K else np.zeros(0, dtype=np.int64)
        self.g_prio = self.prio[first].astype(np.int64) if self.K else np.zeros(0, dtype=np.int64)
        self._arbitration()
        # the rate memory: entry e is a multiset (active groups kflat[kptr[e]:kptr[e + 1]], their
        # flow counts mflat[...]) with its rates rflat[...] and hash hkey[e]; htab (open
        # addressing, -1 empty) finds an entry by hash in the compiled loop
        self.entries = 0
        self.kptr = np.zeros(256, dtype=np.int64)
        self.hkey = np.zeros(256, dtype=np.int64)
        self.htab = np.full(1024, -1, dtype=np.int64)
        self.kflat = np.zeros(4096, dtype=np.int64)
        self.mflat = np.zeros(4096, dtype=np.int64)
        self.rflat = np.zeros(4096)

    def remember(self, h, ag, mult, rate):
        """Add the rates of multiset (``ag``, ``mult``) with hash ``h`` to the memory."""
        e = self.entries
        lo = int(self.kptr[e])
        hi = lo + ag.size
        if hi > self.kflat.size:                    # grow by doubling
            cap = max(2 * self.kflat.size, hi)
            self.kflat, self.mflat, self.rflat = (_grown(a, cap) for a in (self.kflat, self.mflat, self.rflat))
        if e + 2 > self.kptr.size:
            self.kptr = _grown(self.kptr, 2 * self.kptr.size)
            self.hkey = _grown(self.hkey, self.kptr.size)
        self.kflat[lo:hi], self.mflat[lo:hi], self.rflat[lo:hi] = ag, mult, rate
        self.kptr[e + 1] = hi
        self.hkey[e] = h
        self.entries = e + 1
        if 2 * self.entries > self.htab.size:       # keep the table at most half full
            self.htab = np.full(2 * self.htab.size, -1, dtype=np.int64)
            K_.rehash(self.htab, self.hkey, self.entries)
        else:
            K_.hash_insert(self.htab, self.hkey, e)

    def _arbitration(self):
        """FRED switch arbitration (one phase at a time, MP > PP > DP): only where classes differ."""
        topo = self.topo
        self.arb = bool(self.multi_prio and topo.fred_switches and topo.is_switch.any())
        self.n_nodes = topo.num_nodes
        self.q_flat = np.zeros(1, dtype=np.int64)
        self.q_ptr = np.zeros(self.P + 1, dtype=np.int64)
        self.t_pre = self.t_resume = 0.0
        self.mode = ARBITRATED if self.arb else PRIORITY if self.multi_prio else PLAIN
        self.sw_a = self.sw_b = np.full(1, -1, dtype=np.int64)
        if self.arb:
            self.sw_a = np.where(topo.is_switch[topo.link_src], topo.link_src, -1).astype(np.int64)
            self.sw_b = np.where(topo.is_switch[topo.link_dst], topo.link_dst, -1).astype(np.int64)
            self.t_pre, self.t_resume = self.timing.preemption_delay_s, self.timing.resume_delay_s
            self.levels = np.unique(self.prio).astype(np.int64)
            # per path, the switches on it (CSR): where its flows meet other classes
            pid = np.repeat(np.arange(self.P, dtype=np.int64), self.p_len[:self.P])
            ends = np.concatenate([self.sw_a[self.p_flat], self.sw_b[self.p_flat]])
            key = np.unique(np.tile(pid, 2)[ends >= 0] * self.n_nodes + ends[ends >= 0])
            self.q_flat = key % self.n_nodes
            self.q_ptr = np.zeros(self.P + 1, dtype=np.int64)
            np.cumsum(np.bincount(key // self.n_nodes, minlength=self.P), out=self.q_ptr[1:])

    def solve(self, ag, mult):
        """Rates of the active groups ``ag`` (ascending) with ``mult`` flows each: solved as one
        flow of that multiplicity per group (compiled: :func:`fred.model.network.maxmin.group_rates`,
        the rates :func:`maxmin_rates` / :func:`priority_rates` give, to the bit)."""
        return group_rates(ag, mult, self.g_path, self.g_prio, self.p_ptr, self.p_flat, self.p_cap, self.cap_link,
                           self.mode, self.sw_a, self.sw_b, self.n_nodes)


def _grown(a, cap):
    b = np.zeros(cap, dtype=a.dtype)
    b[:a.size] = a
    return b


def _static(graph: TaskGraph) -> _Static:
    """The graph's :class:`_Static`, made on its first run (again if tasks were added since)."""
    sig = (graph.num_tasks, graph.num_edges, len(graph.arrays().path_latency))
    st = getattr(graph, "_engine_static", None)
    if st is None or st[0] != sig:
        st = (sig, _Static(graph, graph.arrays()))
        graph._engine_static = st
    return st[1]


class _Engine:
    """The state of one run, in arrays the compiled loop (:mod:`fred.model.network.engine_kernel`)
    works on: per task its start and finish, the active flows (``act``) with their remaining
    bytes, per rate group its active flows (``gcnt``) and rate (``grate``), the timers (a heap).
    Between calls of the loop this class solves the rates: they depend only on the multiset of
    active groups, and are remembered per multiset (collectives repeat the same set of flows step
    after step, layer after layer) in the graph's :class:`_Static`, across runs of the graph."""

    def __init__(self, graph: TaskGraph, durations=None, remember_rates=True):
        st = self.st = _static(graph)
        g = st.graph
        self.topo, self.timing, self.graph = st.topo, st.timing, g
        self.dur = np.ascontiguousarray(g.duration if durations is None else durations, dtype=np.float64)
        self.remember = remember_rates
        N, K = st.N, st.K
        self.start = np.full(N, np.nan)
        self.finish = np.full(N, np.nan)
        self.indeg = st.indeg.copy()
        self.pend = np.zeros(max(N, 1), dtype=np.int64)
        first = np.flatnonzero(self.indeg == 0)
        self.pend[:first.size] = first
        self.done = np.zeros(max(N, 1), dtype=np.int64)
        self.act = np.zeros(max(N, 1), dtype=np.int64)
        self.rem = np.zeros(max(N, 1))
        self.gcnt = np.zeros(max(K, 1), dtype=np.int64)
        self.grate = np.zeros(max(K, 1))
        self.fresh = np.zeros(max(N, 1), dtype=np.uint8)
        self.xlat = np.zeros(max(N, 1))
        self.tim_t = np.zeros(max(N, 1))
        self.tim_i = np.zeros(max(N, 1), dtype=np.int64)
        self.ist = np.zeros(K_.N_ISTATE, dtype=np.int64)
        self.ist[K_.I_NPEND] = first.size
        self.ist[K_.I_ARB] = int(st.arb)
        self.ist[K_.I_REMEMBER] = int(bool(remember_rates))
        self.fst = np.array([0.0, st.t_pre, st.t_resume])
        # scratch of the compiled loop: per group, per node
        self.nf = np.zeros(max(K, 1), dtype=np.int64)
        self.nold = np.zeros(max(K, 1), dtype=np.int64)
        self.mark = np.zeros(max(K, 1), dtype=np.int64)
        self.ag = np.zeros(max(K, 1), dtype=np.int64)
        self.minrun = np.zeros(max(st.n_nodes, 1), dtype=np.int64)
        self.maxnew = np.zeros(max(st.n_nodes, 1), dtype=np.int64)

    def simulate(self):
        s, ist = self.st, self.ist
        state = (self.ist, self.fst, s.kind, self.dur, s.path, s.nbytes, s.group, s.s_ptr, s.s_idx, s.p_len,
                 s.p_lat, self.indeg, self.start, self.finish, self.pend, self.done, self.act, self.rem,
                 self.gcnt, self.grate, self.fresh, self.xlat, self.tim_t, self.tim_i,
                 s.g_path, s.g_prio, s.q_ptr, s.q_flat, self.nf, self.nold, self.minrun, self.maxnew, self.mark,
                 self.ag)
        while K_.advance_until_solve(*state, s.htab, s.hkey, s.kptr, s.kflat, s.mflat, s.rflat) == K_.SOLVE:
            self._solve_rates()

    # ---- rates -------------------------------------------------------------------------------
    def _solve_rates(self):
        """Rates of the active groups (the compiled loop found them not in the memory)."""
        st, ist = self.st, self.ist
        ag = self.ag[:ist[K_.I_NAG]].copy()
        mult = self.gcnt[ag]
        if self.remember:
            rate = st.solve(ag, mult)
            st.remember(int(ist[K_.I_HASH]), ag, mult, rate)
        else:
            rate = _solve_one_by_one(st, ag, mult)
        self.grate[ag] = rate

    # ---- the result --------------------------------------------------------------------------
    def result(self) -> SimResult:
        st, g, topo = self.st, self.graph, self.topo
        N = st.N
        start, finish = self.start, self.finish
        if np.isnan(finish).any():  # pragma: no cover - deps always point backwards
            bad = int(np.flatnonzero(np.isnan(finish))[0])
            raise RuntimeError(f"task {bad} never ran (dependency cycle?)")
        # collectives: the returned node spans from its begin marker to its join
        for b, j in g.spans:
            start[j] = start[b]
        link_bytes, bytes_sent, bytes_recv = self._traffic()
        return SimResult(topo, self.timing, g, start, finish, link_bytes=link_bytes, bytes_sent=bytes_sent,
                         bytes_received=bytes_recv, events=int(self.ist[K_.I_EVENTS]),
                         preemptions=int(self.ist[K_.I_NPRE]), resumes=int(self.ist[K_.I_NRES]),
                         preemption_latency=float(self.xlat[:N].sum()))

    def _traffic(self):
        """Bytes per link, sent per node and received per node."""
        st = self.st
        g, topo, P, L = self.graph, self.topo, st.P, self.topo.num_links
        isf = st.kind == FLOW
        pb = np.bincount(st.path[isf], weights=st.nbytes[isf], minlength=P) if P else np.zeros(0)
        if not P:
            return np.zeros(L), np.zeros(topo.num_nodes), np.zeros(topo.num_nodes)
        link_bytes = np.bincount(st.p_flat, weights=np.repeat(pb, st.p_len), minlength=L)
        s_len = np.fromiter((a.size for a in g.path_srcs), dtype=np.int64, count=P)
        s_flat = np.concatenate(g.path_srcs)
        bytes_sent = np.bincount(s_flat, weights=np.repeat(pb, s_len), minlength=topo.num_nodes)
        d_len = np.fromiter((a.size for a in g.path_dsts), dtype=np.int64, count=P)
        d_flat = np.concatenate(g.path_dsts)
        bytes_recv = np.bincount(d_flat, weights=np.repeat(pb, d_len), minlength=topo.num_nodes)
        return link_bytes[:L], bytes_sent[: topo.num_nodes], bytes_recv[: topo.num_nodes]


def _solve_one_by_one(st: _Static, ag, mult):
    """The rates of groups ``ag`` solved afresh with every flow listed on its own (no
    multiplicity, no memory): what the remembered, grouped solve must equal."""
    reps = np.repeat(ag, mult)
    path = st.g_path[reps]
    lk, ow = _gather(st.p_ptr, st.p_flat, path)
    cap = st.p_cap[path]
    if st.arb:
        r = priority_rates(ow, lk, reps.size, st.cap_link, cap, st.g_prio[reps], sw=(st.sw_a, st.sw_b, st.n_nodes))
    elif st.multi_prio:
        r = priority_rates(ow, lk, reps.size, st.cap_link, cap, st.g_prio[reps])
    else:
        r = maxmin_rates(ow, lk, reps.size, st.cap_link, cap)
    return r[np.r_[0, np.cumsum(mult)[:-1]]]
