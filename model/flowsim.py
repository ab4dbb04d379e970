"""Flow-level network simulator with max-min fair link sharing.

Public API (stable; the training model codes against it)::

    from fred.model.topology import build_fabric
    from fred.model.flowsim import Sim

    sim = Sim(build_fabric("fred-d"))           # timing=None: the topology's SwitchTiming
    c = sim.delay(1e-3, label="compute")        # compute or any fixed wait
    t = sim.transfer(0, [1, 2, 3], 1 << 20, deps=[c], label="pp")   # multicast tree
    r = sim.reduce([0, 1, 2, 3], 0, 1 << 20, label="dp")            # in-network reduction tree
    a = sim.collective("all-reduce", range(20), 1 << 30, deps=[c], label="dp")
    res = sim.run()
    res.finish[a], res.start[a], res.makespan, res.link_utilization, res.busy_time_by_label()

Semantics:

* A task (``TaskId``, an int) starts when all its ``deps`` have finished.
* A transfer/reduce is one *flow* over a set of links (a path, a multicast tree or a reduction
  tree; each link carries one copy of the data). A flow moves at one rate on all its links, so a
  reducing switch advances at the pace of its slowest input and a multicast at its slowest
  branch. Concurrent flows share links by max-min fairness, re-solved whenever a flow starts or
  ends. A flow of ``nbytes`` has finished sending ``nbytes`` after its (piecewise constant)
  rate integrates to ``nbytes``; it completes its latency later: the sum of link latencies
  along its longest source->destination path plus ``SwitchTiming.latency_s`` per switch on that
  path. (Links are released when the last byte is sent: a cut-through pipeline.)
* Flows that reduce or multicast inside a switch are capped at
  ``SwitchTiming.collective_bandwidth(link_bw)`` on the links of the tree.
* ``priority=`` (transfer, reduce, collective; default 0) gives strict priority between classes
  on shared links (max-min inside a class), e.g. FRED-SPEC §4's MP > PP > DP.
* On a topology with ``fred_switches`` (the FRED fabrics) each switch runs one phase at a time:
  priority classes time-share it (a class holds the fabric for the time its busiest port there
  needs; lower classes may use the switch's links only for the time left), a flow that starts
  while a lower class streams through a switch on its route pays
  ``SwitchTiming.preemption_delay_s`` and each flow it interrupts ``resume_delay_s`` (both
  measured; the rule is checked against the switch RTL by tests/test_model_vs_rtl_overlap.py).
  ``SimResult.preemptions`` / ``resumes`` / ``preemption_latency`` report them.
* Links carry payload at ``topo.link_efficiency`` of their bandwidth (packet headers and ACKs,
  :mod:`fred.model.packets`; 1 on generic topologies).
* ``collective(...)`` expands into many flows (see :mod:`fred.model.collectives`) and returns
  one TaskId whose start is when the collective began (its deps were met) and whose finish is
  when the whole collective completed.
* Sizes: ``nbytes`` is the per-NPU buffer size (All-Reduce: the buffer each NPU holds; RS: the
  input per NPU; AG: the output per NPU; A2A: each NPU's send buffer; io-broadcast: bytes every
  group member receives; io-reduce: each member's gradient buffer).

The engine keeps every task in flat numpy arrays (a 1,024-NPU ring All-Reduce is ~2 million
flows) and processes all events that fall at the same instant together; the max-min solver is
progressive filling vectorised over (flow, link) incidence entries.
"""

from __future__ import annotations

import math

import numpy as np

from .timing import SwitchTiming

TaskId = int

OPS = ("all-reduce", "reduce-scatter", "all-gather", "all-to-all", "reduce", "broadcast", "multicast",
       "p2p", "io-broadcast", "io-reduce")

_DELAY, _FLOW = 0, 1


def check_bytes(nbytes, what="nbytes") -> float:
    try:
        v = float(nbytes)
    except (TypeError, ValueError):
        raise ValueError(f"{what} {nbytes!r} is not a number") from None
    if not (v > 0 and math.isfinite(v)):
        raise ValueError(f"{what} must be a positive finite size, got {nbytes!r}")
    return v


class _Grow:
    """A growable 1-D numpy array."""

    __slots__ = ("a", "n")

    def __init__(self, dtype, cap=1024):
        self.a = np.empty(cap, dtype=dtype)
        self.n = 0

    def _reserve(self, k):
        if self.n + k > len(self.a):
            cap = max(len(self.a) * 2, self.n + k)
            b = np.empty(cap, dtype=self.a.dtype)
            b[: self.n] = self.a[: self.n]
            self.a = b

    def append(self, v):
        self._reserve(1)
        self.a[self.n] = v
        self.n += 1

    def extend(self, vals):
        vals = np.asarray(vals)
        k = vals.size
        self._reserve(k)
        self.a[self.n: self.n + k] = vals.ravel()
        self.n += k

    def fill(self, v, k):
        self._reserve(k)
        self.a[self.n: self.n + k] = v
        self.n += k

    def view(self):
        return self.a[: self.n]


class SimResult:
    """Result of :meth:`Sim.run`.

    * ``start[t]``, ``finish[t]``: numpy float arrays indexed by TaskId (seconds);
    * ``makespan``: finish time of the last task;
    * ``link_bytes``: bytes carried per directed link (index = link id of the topology);
    * ``link_utilization``: per link, ``link_bytes / (bandwidth * makespan)``;
    * ``bytes_sent``: bytes injected per node (a tree flow counts ``nbytes`` for each source);
    * ``bytes_received``: bytes delivered per node (a tree flow counts ``nbytes`` per destination);
    * ``busy_time_by_label()``: {label: length of the union of its tasks' [start, finish]};
    * ``exposed_time(label, hidden_by=("compute",))``: time ``label`` is busy and no task of a
      ``hidden_by`` label is;
    * ``timing_source``: where the switch timing came from; ``events``: engine event count;
    * ``preemptions`` / ``resumes``: flows that preempted a lower class in a FRED switch / flows
      interrupted so; ``preemption_latency``: the seconds of latency both added, summed.
    """

    def __init__(self, sim, start, finish, link_bytes, bytes_sent, events):
        self.topo = sim.topo
        self.start = start
        self.finish = finish
        self.labels = list(sim._labels)
        self._task_label = sim._label_of.view().copy()
        self._kind = sim._kind.view().copy()
        self.makespan = float(np.max(finish)) if finish.size else 0.0
        self.link_bytes = link_bytes
        bw = sim.topo.link_bw
        self.link_utilization = link_bytes / (bw * self.makespan) if self.makespan > 0 else np.zeros_like(link_bytes)
        self.bytes_sent = bytes_sent
        self.timing = sim.timing
        self.timing_source = sim.timing.source
        self.events = events
        self.num_tasks = int(start.size)
        self.num_flows = int(np.count_nonzero(self._kind == _FLOW))

    def duration(self, task: TaskId) -> float:
        return float(self.finish[task] - self.start[task])

    def _intervals(self, labels):
        ids = [self.labels.index(l) for l in labels if l in self.labels]
        if not ids:
            return np.empty(0), np.empty(0)
        m = np.isin(self._task_label, ids)
        s, f = self.start[m], self.finish[m]
        keep = f > s
        return _union(s[keep], f[keep])

    def busy_time(self, label: str) -> float:
        s, f = self._intervals([label])
        return float(np.sum(f - s))

    def busy_time_by_label(self) -> dict[str, float]:
        """{label: total time at least one task with that label is in progress}."""
        out = {}
        for i, l in enumerate(self.labels):
            s, f = self._intervals([l])
            out[l] = float(np.sum(f - s))
        return out

    def exposed_time(self, label, hidden_by=("compute",)) -> float:
        """Time when a task labelled ``label`` (a str or several) runs and none of ``hidden_by`` does."""
        labels = [label] if isinstance(label, str) else list(label)
        hidden = [hidden_by] if isinstance(hidden_by, str) else list(hidden_by)
        a0, a1 = self._intervals(labels)
        b0, b1 = self._intervals(hidden)
        return float(np.sum(a1 - a0) - _overlap(a0, a1, b0, b1))

    def top_links(self, k=5):
        """The ``k`` most utilised links as (name, utilisation, bytes)."""
        order = np.argsort(-self.link_utilization)[:k]
        return [(self.topo.link_name(int(i)), float(self.link_utilization[i]), float(self.link_bytes[i])) for i in order]


def _union(s, f):
    if s.size == 0:
        return s, f
    o = np.argsort(s, kind="stable")
    s, f = s[o], f[o]
    fmax = np.maximum.accumulate(f)
    new = np.ones(s.size, dtype=bool)
    new[1:] = s[1:] > fmax[:-1]
    starts = s[new]
    idx = np.flatnonzero(new)
    ends = fmax[np.r_[idx[1:] - 1, s.size - 1]]
    return starts, ends


def _overlap(a0, a1, b0, b1):
    """Total length of (union of disjoint [a0,a1]) intersected with (disjoint sorted [b0,b1])."""
    if a0.size == 0 or b0.size == 0:
        return 0.0
    pts = np.unique(np.concatenate([a0, a1, b0, b1]))
    mid = (pts[:-1] + pts[1:]) / 2
    ia = np.searchsorted(a0, mid, side="right") - 1
    ib = np.searchsorted(b0, mid, side="right") - 1
    ina = (ia >= 0) & (mid < a1[np.clip(ia, 0, None)])
    inb = (ib >= 0) & (mid < b1[np.clip(ib, 0, None)])
    return float(np.sum(np.diff(pts)[ina & inb]))


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


def maxmin_rates(ent_flow, ent_link, nflows, link_cap, flow_cap=None):
    """Max-min fair rates by progressive filling.

    ``ent_flow[e]`` uses link ``ent_link[e]``; ``link_cap`` per link (B/s); optional per-flow caps.
    Flows with no entries get their cap (``inf`` without one). All unfrozen flows rise together;
    when a link saturates, the flows crossing it freeze at the current level.
    """
    ent_flow = np.asarray(ent_flow, dtype=np.int64)
    ent_link = np.asarray(ent_link, dtype=np.int64)
    link_cap = np.asarray(link_cap, dtype=float)
    fcap = np.full(nflows, np.inf) if flow_cap is None else np.asarray(flow_cap, dtype=float)
    if nflows == 0:
        return np.zeros(0)
    if ent_flow.size == 0:
        return fcap.copy()
    cnt = np.bincount(ent_link, minlength=link_cap.size)
    if cnt.max() <= 1:
        # fast path: no link is shared, every flow runs at its own bottleneck
        rate = np.full(nflows, np.inf)
        np.minimum.at(rate, ent_flow, link_cap[ent_link])
        return np.minimum(rate, fcap)
    used = np.flatnonzero(cnt)
    remap = np.empty(link_cap.size, dtype=np.int64)
    remap[used] = np.arange(used.size)
    el = remap[ent_link]
    ef = ent_flow
    cap = link_cap[used].copy()
    tol = 1e-9 * np.maximum(cap, 1.0)
    nu = used.size
    rate = np.zeros(nflows)
    frozen = np.ones(nflows, dtype=bool)
    frozen[ef] = False
    rate[frozen] = fcap[frozen]
    capped = np.isfinite(fcap).any()
    level = 0.0
    for _ in range(nflows + 2):
        c = np.bincount(el, minlength=nu)
        m = c > 0
        inc = (cap[m] / c[m]).min()
        if capped:
            inc = min(inc, fcap[~frozen].min() - level)
        inc = max(inc, 0.0)
        level += inc
        cap -= inc * c
        sat = m & (cap <= tol)
        newly = np.zeros(nflows, dtype=bool)
        newly[ef[sat[el]]] = True
        if capped:
            newly |= (~frozen) & (fcap <= level * (1 + 1e-12))
            newly &= ~frozen
        if not newly.any():  # numerical corner: freeze everything left
            newly = ~frozen
        rate[newly] = level
        frozen |= newly
        if frozen.all():
            break
        keep = ~newly[ef]
        ef, el = ef[keep], el[keep]
    return rate


def _priority_rates(ent_flow, ent_link, nflows, link_cap, flow_cap, prio, sw=None):
    """Strict priority between classes (highest first), max-min fair inside each class.

    ``sw``: optional FRED switch arbitration ``(sw_a, sw_b, num_nodes)``: per link, the switch
    node at its source / destination end (-1: not a switch). A FRED switch runs one phase at a
    time (FRED-SPEC §4), so priority classes time-share its fabric: one class's flows at a switch
    form one phase and run in parallel; that phase needs the fabric for the busiest of its ports
    (the highest ``class rate on the link / link bandwidth`` over the switch's links), and the
    classes below may use a link at a switch only for the fabric time left: its capacity for
    them is at most ``left x bandwidth``.
    """
    rate = np.zeros(nflows)
    link_cap = np.asarray(link_cap, dtype=float)
    cap = link_cap.copy()
    levels = np.unique(prio)[::-1]
    if sw is not None:
        sw_a, sw_b, n_nodes = sw
        ma, mb = sw_a >= 0, sw_b >= 0
        left = np.ones(n_nodes)            # fabric time not yet taken by higher classes
    for lv in levels:
        sel = np.flatnonzero(prio == lv)
        local = np.full(nflows, -1, dtype=np.int64)
        local[sel] = np.arange(sel.size)
        m = local[ent_flow] >= 0
        ef, el = local[ent_flow[m]], ent_link[m]
        ecap = cap
        if sw is not None and (left < 1.0).any():
            ecap = cap.copy()
            ecap[ma] = np.minimum(ecap[ma], left[sw_a[ma]] * link_cap[ma])
            ecap[mb] = np.minimum(ecap[mb], left[sw_b[mb]] * link_cap[mb])
        # links (or switch fabrics) with no capacity left starve this class
        r = maxmin_rates(ef, el, sel.size, np.maximum(ecap, 1e-300), flow_cap[sel])
        dead = np.zeros(sel.size, dtype=bool)
        dead[ef[ecap[el] <= 1e-9 * np.maximum(link_cap[el], 1.0)]] = True
        r[dead] = 0.0
        rate[sel] = r
        used = np.bincount(el, weights=r[ef], minlength=cap.size)
        cap -= used
        np.maximum(cap, 0.0, out=cap)
        if sw is not None:
            occ = np.zeros(n_nodes)
            frac = used / np.maximum(link_cap, 1e-300)
            np.maximum.at(occ, sw_a[ma], frac[ma])
            np.maximum.at(occ, sw_b[mb], frac[mb])
            left -= occ
            left[left < 1e-9] = 0.0
    return rate


class Sim:
    """Build a dependency graph of tasks on a :class:`fred.model.graph.Topology`, then ``run()``.

    ``timing`` (a :class:`~fred.model.timing.SwitchTiming`) overrides the topology's switch timing.
    """

    def __init__(self, topo, timing: SwitchTiming | None = None):
        from .topology import Topology, resolve

        if not isinstance(topo, Topology):
            topo = resolve(topo)
        self.topo = topo
        self.timing = timing if timing is not None else topo.timing
        self._kind = _Grow(np.int8)
        self._dur = _Grow(np.float64)
        self._bytes = _Grow(np.float64)
        self._path = _Grow(np.int32)
        self._label_of = _Grow(np.int32)
        self._prio = _Grow(np.int32)
        self._prio_cur = 0
        self._pred = _Grow(np.int64)
        self._succ = _Grow(np.int64)
        self._labels: list[str] = []
        self._label_idx: dict[str, int] = {}
        # path table: links (CSR), sources (CSR), latency, per-flow cap
        self._p_links: list[np.ndarray] = []
        self._p_srcs: list[np.ndarray] = []
        self._p_dsts: list[np.ndarray] = []
        self._p_lat: list[float] = []
        self._p_cap: list[float] = []
        self._p_cache: dict = {}
        self._spans: list[tuple[int, int]] = []  # (begin task, join task) of collectives
        #: plans of the collectives expanded so far, by (op, group, algorithm, root, io): a
        #: collective repeated on the same group reuses its plan (:mod:`fred.model.collectives`)
        self.plan_cache: dict = {}
        #: algorithm names of the last collective added (one per group)
        self.last_algorithms: list[str] = []
        self._sw_lat = self.timing.latency_s
        eff = float(getattr(topo, "link_efficiency", 1.0))
        if not 0 < eff <= 1:
            raise ValueError(f"topology link_efficiency {eff!r} must be in (0, 1]")
        self._eff = eff

    # ---- bookkeeping ---------------------------------------------------------------------------
    @property
    def num_tasks(self) -> int:
        return self._kind.n

    @property
    def num_edges(self) -> int:
        """Dependency edges added so far."""
        return self._pred.n

    def edges(self, first: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """(predecessors, successors) of the dependency edges from edge number ``first`` on."""
        return self._pred.view()[first:], self._succ.view()[first:]

    def add_span(self, begin: TaskId, join: TaskId) -> None:
        """Report task ``join`` as starting when ``begin`` starts (a collective's one TaskId spans
        from its begin marker to its join)."""
        self._spans.append((int(begin), int(join)))

    def label_id(self, label) -> int:
        """The number of task label ``label`` (labels are numbered as they first appear)."""
        label = str(label)
        i = self._label_idx.get(label)
        if i is None:
            i = len(self._labels)
            self._labels.append(label)
            self._label_idx[label] = i
        return i

    def check_deps(self, deps) -> list[int]:
        """``deps`` (a TaskId, or nested lists of them) as a flat list; ValueError naming a bad one."""
        if deps is None:
            return []
        if isinstance(deps, (int, np.integer)):
            deps = [deps]
        out = []
        n = self.num_tasks
        for d in deps:
            if isinstance(d, (list, tuple, np.ndarray)):
                out.extend(self.check_deps(d))
                continue
            try:
                v = int(d)
            except (TypeError, ValueError):
                raise ValueError(f"dependency {d!r} is not a TaskId") from None
            if not 0 <= v < n:
                raise ValueError(f"dependency {d!r} is not a task of this simulation (0..{n - 1})")
            out.append(v)
        return out

    def _new(self, kind, dur, nbytes, path, label_id, k=1):
        first = self._kind.n
        if k == 1 and np.ndim(path) == 0 and np.ndim(nbytes) == 0:
            self._kind.append(kind)
            self._dur.append(dur)
            self._bytes.append(nbytes)
            self._path.append(path)
            self._label_of.append(label_id)
            self._prio.append(self._prio_cur)
        else:
            self._kind.fill(kind, k)
            self._dur.fill(dur, k)
            if np.ndim(nbytes) == 0:
                self._bytes.fill(nbytes, k)
            else:
                self._bytes.extend(nbytes)
            if np.ndim(path) == 0:
                self._path.fill(path, k)
            else:
                self._path.extend(path)
            self._label_of.fill(label_id, k)
            self._prio.fill(self._prio_cur, k)
        return first

    def add_edges(self, pred, succ):
        """Add edges pred -> succ (arrays broadcast; pred < 0 ignored)."""
        pred = np.asarray(pred, dtype=np.int64)
        succ = np.asarray(succ, dtype=np.int64)
        if pred.shape != succ.shape:
            if succ.ndim == 0:
                succ = np.full(pred.shape, succ, dtype=np.int64)
            elif pred.ndim == 0:
                pred = np.full(succ.shape, pred, dtype=np.int64)
            else:
                pred, succ = np.broadcast_arrays(pred, succ)
        m = pred >= 0
        if not m.all():
            pred, succ = pred[m], succ[m]
        if pred.size:
            self._pred.extend(pred)
            self._succ.extend(succ)

    def add_flows(self, paths, nbytes, label_id) -> np.ndarray:
        """Flows of ``nbytes`` (one value or one per flow) on path ids ``paths``; their TaskIds."""
        paths = np.asarray(paths, dtype=np.int32).ravel()
        first = self._new(_FLOW, 0.0, nbytes, paths, label_id, k=paths.size)
        return np.arange(first, first + paths.size, dtype=np.int64)

    def add_delays(self, k, dur, label_id) -> np.ndarray:
        """``k`` fixed waits of ``dur`` seconds (0: joins); their TaskIds."""
        first = self._new(_DELAY, dur, 0.0, -1, label_id, k=k)
        return np.arange(first, first + k, dtype=np.int64)

    # ---- paths -----------------------------------------------------------------------------
    def _add_path(self, key, links, srcs, lat, cap=np.inf, dsts=()):
        pid = len(self._p_lat)
        self._p_links.append(np.asarray(sorted(set(links)), dtype=np.int64))
        self._p_srcs.append(np.asarray(srcs, dtype=np.int64))
        self._p_dsts.append(np.asarray(dsts, dtype=np.int64))
        self._p_lat.append(float(lat))
        self._p_cap.append(float(cap))
        self._p_cache[key] = pid
        return pid

    def _lat(self, src, dst, order=None) -> float:
        return self.topo.path_latency(src, dst, self.timing, order)

    def _tree_cap(self, links) -> float:
        """In-switch collective cap: link bandwidth x beats/cycle/port on links touching a switch."""
        b = self.timing.beats_per_cycle_per_port
        if b >= 1.0 or not links:
            return np.inf
        t = self.topo
        sw = t.is_switch
        ls = [l for l in links if sw[t.link_src[l]] or sw[t.link_dst[l]]]
        if not ls:
            return np.inf
        return float(b * t.link_bw[ls].min() * self._eff)

    def path_unicast(self, src, dst) -> int:
        key = ("u", src, dst)
        pid = self._p_cache.get(key)
        if pid is None:
            pid = self._add_path(key, self.topo.path(src, dst), [src], self._lat(src, dst), dsts=[dst])
        return pid

    def paths_unicast(self, srcs, dsts) -> np.ndarray:
        srcs = np.asarray(srcs, dtype=np.int64).ravel()
        dsts = np.asarray(dsts, dtype=np.int64).ravel()
        out = np.empty(srcs.size, dtype=np.int64)
        cache = {}
        for i, (s, d) in enumerate(zip(srcs.tolist(), dsts.tolist())):
            p = cache.get((s, d))
            if p is None:
                p = cache[(s, d)] = self.path_unicast(s, d)
            out[i] = p
        return out

    def path_multicast(self, src, dsts, order=None) -> int:
        """Path id of the multicast tree from ``src`` (union of its routes; ``order``: grid
        dimension order of those routes)."""
        dsts = tuple(sorted(set(int(d) for d in dsts) - {int(src)}))
        key = ("m", src, dsts, order)
        pid = self._p_cache.get(key)
        if pid is None:
            links = set()
            for d in dsts:
                links.update(self.topo.path(src, d, order))
            lat = max((self._lat(src, d, order) for d in dsts), default=0.0)
            pid = self._add_path(key, links, [src], lat, self._tree_cap(links), dsts)
        return pid

    def path_reduce(self, srcs, dst, order=None) -> int:
        """Path id of the reduction tree into ``dst`` (union of the sources' routes)."""
        srcs = tuple(sorted(set(int(s) for s in srcs)))
        key = ("r", srcs, dst, order)
        pid = self._p_cache.get(key)
        if pid is None:
            links = set()
            for s in srcs:
                if s != dst:
                    links.update(self.topo.path(s, dst, order))
            lat = max((self._lat(s, dst, order) for s in srcs if s != dst), default=0.0)
            pid = self._add_path(key, links, srcs, lat, self._tree_cap(links), [dst])
        return pid

    def path_allreduce(self, members, root) -> int:
        """One in-switch All-Reduce flow: reduce every member into switch ``root``, multicast back."""
        members = tuple(sorted(set(int(m) for m in members)))
        key = ("a", members, root)
        pid = self._p_cache.get(key)
        if pid is None:
            links = set()
            up = down = 0.0
            for m in members:
                links.update(self.topo.path(m, root))
                links.update(self.topo.path(root, m))
                up = max(up, self._lat(m, root))
                down = max(down, self._lat(root, m))
            # a switch-rooted flow is a phase of its own: the switch first loads its configuration
            in_switch = self.topo.kinds[root] == "switch"
            lat = up + down + (self._sw_lat + self.timing.phase_switch_s if in_switch else 0.0)
            pid = self._add_path(key, links, members, lat, self._tree_cap(links), members)
        return pid

    # ---- public task API -------------------------------------------------------------------
    def delay(self, duration_s: float, deps=(), label: str = "") -> TaskId:
        """A fixed wait (compute, ...) of ``duration_s`` seconds after ``deps``."""
        try:
            d = float(duration_s)
        except (TypeError, ValueError):
            raise ValueError(f"duration {duration_s!r} is not a number") from None
        if not (d >= 0 and math.isfinite(d)):
            raise ValueError(f"duration must be >= 0 seconds, got {duration_s!r}")
        dl = self.check_deps(deps)
        t = self._new(_DELAY, d, 0.0, -1, self.label_id(label))
        if dl:
            self.add_edges(dl, t)
        return t

    def _with_priority(self, priority, fn, *a, **k):
        try:
            p = int(priority)
        except (TypeError, ValueError):
            raise ValueError(f"priority {priority!r} is not an integer") from None
        old, self._prio_cur = self._prio_cur, p
        try:
            return fn(*a, **k)
        finally:
            self._prio_cur = old

    def transfer(self, src: int, dsts, nbytes: float, deps=(), label: str = "", priority: int = 0) -> TaskId:
        """``nbytes`` from node ``src`` to ``dsts`` (an int: unicast; a list: one multicast tree).

        On a topology without multicast (``topo.multicast`` false) a list of destinations becomes
        one unicast copy per destination from ``src`` (the returned task joins them).
        ``priority``: flows of a higher priority are served first on shared links (strict
        priority; max-min fair within a priority), e.g. FRED-SPEC §4's MP > PP > DP.
        """
        if priority:
            return self._with_priority(priority, self._transfer, src, dsts, nbytes, deps, label)
        return self._transfer(src, dsts, nbytes, deps, label)

    def _transfer(self, src, dsts, nbytes, deps, label):
        nb = check_bytes(nbytes)
        src = self.topo.check_node(src, "source")
        dl = self.check_deps(deps)
        lab = self.label_id(label)
        if isinstance(dsts, (int, np.integer)):
            dst = self.topo.check_node(dsts, "destination")
            t = self._new(_FLOW, 0.0, nb, self.path_unicast(src, dst), lab)
            if dl:
                self.add_edges(dl, t)
            return t
        dl2 = [self.topo.check_node(d, "destination") for d in dsts]
        if not dl2:
            raise ValueError("transfer needs at least one destination")
        if self.topo.multicast or len(dl2) == 1:
            pid = self.path_multicast(src, dl2) if len(dl2) > 1 else self.path_unicast(src, dl2[0])
            t = self._new(_FLOW, 0.0, nb, pid, lab)
            if dl:
                self.add_edges(dl, t)
            return t
        ids = self.add_flows(self.paths_unicast([src] * len(dl2), dl2), nb, lab)
        if dl:
            self.add_edges(np.repeat(dl, ids.size), np.tile(ids, len(dl)))
        j = self._new(_DELAY, 0.0, 0.0, -1, lab)
        self.add_edges(ids, j)
        return j

    def reduce(self, srcs, dst: int, nbytes: float, deps=(), label: str = "", priority: int = 0) -> TaskId:
        """In-network reduction of ``nbytes`` from every node in ``srcs`` into ``dst`` (one tree flow).

        On a topology without in-network reduction each source sends its ``nbytes`` to ``dst``
        (which adds them); the returned task joins those transfers. ``priority``: see transfer.
        """
        if priority:
            return self._with_priority(priority, self._reduce, srcs, dst, nbytes, deps, label)
        return self._reduce(srcs, dst, nbytes, deps, label)

    def _reduce(self, srcs, dst, nbytes, deps, label):
        nb = check_bytes(nbytes)
        srcs = [self.topo.check_node(s, "source") for s in srcs]
        if not srcs:
            raise ValueError("reduce needs at least one source")
        dst = self.topo.check_node(dst, "destination")
        dl = self.check_deps(deps)
        lab = self.label_id(label)
        if self.topo.in_network_reduction:
            t = self._new(_FLOW, 0.0, nb, self.path_reduce(srcs, dst), lab)
            if dl:
                self.add_edges(dl, t)
            return t
        others = [s for s in srcs if s != dst]
        ids = self.add_flows(self.paths_unicast(others, [dst] * len(others)), nb, lab)
        j = self._new(_DELAY, 0.0, 0.0, -1, lab)
        if dl:
            if ids.size:
                self.add_edges(np.repeat(dl, ids.size), np.tile(ids, len(dl)))
            else:
                self.add_edges(dl, j)
        self.add_edges(ids, j)
        return j

    def collective(self, op: str, group, nbytes: float, deps=(), algorithm=None, chunks=None,
                   label: str = "", priority: int = 0, **options) -> TaskId:
        """Expand collective ``op`` (one of :data:`OPS`) over NPU ``group`` into flows.

        ``algorithm=None`` picks the fabric default (mesh: hierarchical 2D with two chunks in
        opposite directions for wafer-wide groups, logical rings for sub-groups; fred-a/c:
        hierarchical ring; fred-b/d: in-switch tree). ``group`` may also be a list of groups
        (all run at once; the returned task completes when all are done). ``chunks=None`` is the
        algorithm's default (1; 4 for hier-ring/hierarchical; 16 for io-broadcast/io-reduce).
        Options: ``root`` (reduce/broadcast, default group[0]), ``io`` (I/O controller node ids
        for io-* ops, default all). ``priority``: see :meth:`transfer` (default 0: all equal).
        """
        from . import collectives

        if priority:
            return self._with_priority(priority, collectives.expand, self, op, group, nbytes, deps=deps,
                                       algorithm=algorithm, chunks=chunks, label=label, **options)
        return collectives.expand(self, op, group, nbytes, deps=deps, algorithm=algorithm, chunks=chunks,
                                  label=label, **options)

    # ---- the engine ------------------------------------------------------------------------
    def run(self) -> SimResult:
        """Simulate every task; returns a :class:`SimResult`."""
        N = self.num_tasks
        kind = self._kind.view()
        dur = self._dur.view()
        nbytes = self._bytes.view()
        path = self._path.view().astype(np.int64)
        prio = self._prio.view()
        multi_prio = prio.size > 0 and prio.min() != prio.max()
        pred = self._pred.view()
        succ = self._succ.view()
        topo = self.topo
        L = topo.num_links
        cap_link = topo.link_bw.astype(float) * self._eff   # payload bytes/s

        # successor CSR and in-degrees
        order = np.argsort(pred, kind="stable")
        s_idx = succ[order]
        s_ptr = np.zeros(N + 1, dtype=np.int64)
        np.cumsum(np.bincount(pred, minlength=N), out=s_ptr[1:])
        indeg = np.bincount(succ, minlength=N).astype(np.int64)

        # path CSR
        P = len(self._p_lat)
        p_len = np.fromiter((a.size for a in self._p_links), dtype=np.int64, count=P)
        p_ptr = np.zeros(P + 1, dtype=np.int64)
        np.cumsum(p_len, out=p_ptr[1:])
        p_flat = np.concatenate(self._p_links) if P else np.zeros(0, dtype=np.int64)
        p_lat = np.asarray(self._p_lat, dtype=float)
        p_cap = np.asarray(self._p_cap, dtype=float)
        # FRED switch arbitration (one phase at a time, MP > PP > DP): only where classes differ
        arb = bool(multi_prio and topo.fred_switches and topo.is_switch.any())
        if arb:
            n_nodes = topo.num_nodes
            sw_a = np.where(topo.is_switch[topo.link_src], topo.link_src, -1).astype(np.int64)
            sw_b = np.where(topo.is_switch[topo.link_dst], topo.link_dst, -1).astype(np.int64)
            t_pre, t_resume = self.timing.preemption_delay_s, self.timing.resume_delay_s
        xlat = np.zeros(N)                     # latency added by preemptions, per task
        fresh = np.zeros(N, dtype=bool)        # flow started since the last rate solve
        n_pre = n_res = 0

        start = np.full(N, np.nan)
        finish = np.full(N, np.nan)

        act = np.zeros(0, dtype=np.int64)      # active flow task ids
        rem = np.zeros(0)                      # remaining bytes
        rate = np.zeros(0)
        tim = np.zeros(0, dtype=np.int64)      # timer task ids
        tim_t = np.zeros(0)                    # absolute completion times
        t = 0.0
        events = 0
        dirty = True

        def begin(ids, now):
            """Start tasks ``ids`` at ``now``; returns (new flows, new timers (ids, times))."""
            start[ids] = now
            isflow = kind[ids] == _FLOW
            fl = ids[isflow]
            if fl.size:
                empty = p_len[path[fl]] == 0
                if empty.any():
                    tl = fl[empty]
                    fl = fl[~empty]
                    dl = ids[~isflow]
                    return fl, np.concatenate([dl, tl]), np.concatenate([now + dur[dl], now + p_lat[path[tl]]])
            dl = ids[~isflow]
            return fl, dl, now + dur[dl]

        slot = np.empty(N, dtype=np.int64)
        pos = np.empty(N, dtype=np.int64)       # task id -> index in the active arrays
        gone = np.zeros(N, dtype=bool)          # flow has sent its last byte
        ent_task = np.zeros(0, dtype=np.int64)  # (flow, link) incidence of the active flows
        ent_link = np.zeros(0, dtype=np.int64)
        pending = np.flatnonzero(indeg == 0)
        done_now = np.zeros(0, dtype=np.int64)
        while True:
            # start newly ready tasks; complete zero-time timers immediately (cascade)
            while pending.size or done_now.size:
                if pending.size:
                    fl, ti, tt = begin(pending, t)
                    pending = np.zeros(0, dtype=np.int64)
                    if fl.size:
                        act = np.concatenate([act, fl])
                        rem = np.concatenate([rem, nbytes[fl]])
                        rate = np.concatenate([rate, np.zeros(fl.size)])
                        lk, ow = _gather(p_ptr, p_flat, path[fl])
                        ent_task = np.concatenate([ent_task, fl[ow]])
                        ent_link = np.concatenate([ent_link, lk])
                        fresh[fl] = True
                        dirty = True
                    if ti.size:
                        z = tt <= t
                        if z.any():
                            done_now = np.concatenate([done_now, ti[z]])
                            ti, tt = ti[~z], tt[~z]
                        tim = np.concatenate([tim, ti])
                        tim_t = np.concatenate([tim_t, tt])
                if done_now.size:
                    finish[done_now] = t
                    nxt, _ = _gather(s_ptr, s_idx, done_now)
                    done_now = np.zeros(0, dtype=np.int64)
                    if nxt.size:
                        np.subtract.at(indeg, nxt, 1)
                        cand = nxt[indeg[nxt] == 0]
                        if cand.size > 1:  # a task whose last two deps finished together
                            slot[cand] = np.arange(cand.size)
                            cand = cand[slot[cand] == np.arange(cand.size)]
                        pending = cand
            if act.size == 0 and tim.size == 0:
                break
            events += 1
            if dirty and act.size:
                pos[act] = np.arange(act.size)
                owner = pos[ent_task]
                links = ent_link
                if arb:
                    pa = prio[act]
                    isnew = fresh[act]
                    if isnew.any():
                        # a new flow meets a lower class holding the fabric of a switch on its
                        # route: it preempts (pays the measured preemption latency), and every
                        # flow it interrupts there pays a phase switch to get the fabric back
                        ea, eb = sw_a[links], sw_b[links]
                        sn = np.concatenate([ea[ea >= 0], eb[eb >= 0]])
                        so = np.concatenate([owner[ea >= 0], owner[eb >= 0]])
                        run_e = (~isnew & (rate > 0))[so]
                        new_e = isnew[so]
                        minp = np.full(n_nodes, np.iinfo(np.int64).max)
                        np.minimum.at(minp, sn[run_e], pa[so[run_e]])
                        pre = np.unique(so[new_e & (minp[sn] < pa[so])])
                        if pre.size:
                            maxp = np.full(n_nodes, np.iinfo(np.int64).min)
                            np.maximum.at(maxp, sn[new_e], pa[so[new_e]])
                            vic = np.unique(so[run_e & (maxp[sn] > pa[so])])
                            xlat[act[pre]] += t_pre
                            xlat[act[vic]] += t_resume
                            n_pre += int(pre.size)
                            n_res += int(vic.size)
                        fresh[act] = False
                    rate = _priority_rates(owner, links, act.size, cap_link, p_cap[path[act]], pa,
                                           sw=(sw_a, sw_b, n_nodes))
                elif multi_prio:
                    rate = _priority_rates(owner, links, act.size, cap_link, p_cap[path[act]], prio[act])
                else:
                    rate = maxmin_rates(owner, links, act.size, cap_link, p_cap[path[act]])
                dirty = False
            # next event time
            if act.size:
                with np.errstate(divide="ignore"):
                    tf = rem / rate          # a starved low-priority flow: inf
                dtf = tf.min()
            else:
                tf = None
                dtf = np.inf
            tnext = min(t + dtf, tim_t.min() if tim.size else np.inf)
            eps = 1e-12 * max(tnext, 1e-9)
            if act.size:
                dt = tnext - t
                fin = tf <= dt + eps
                rem = rem - rate * dt
                if fin.any():
                    fl = act[fin]
                    keep = ~fin
                    act, rem, rate = act[keep], rem[keep], rate[keep]
                    gone[fl] = True
                    ke = ~gone[ent_task]
                    ent_task, ent_link = ent_task[ke], ent_link[ke]
                    dirty = True
                    lat = p_lat[path[fl]] + xlat[fl]
                    z = lat <= 0
                    if z.any():
                        done_now = np.concatenate([done_now, fl[z]])
                    if (~z).any():
                        tim = np.concatenate([tim, fl[~z]])
                        tim_t = np.concatenate([tim_t, tnext + lat[~z]])
            t = tnext
            if tim.size:
                due = tim_t <= t + eps
                if due.any():
                    done_now = np.concatenate([done_now, tim[due]])
                    tim, tim_t = tim[~due], tim_t[~due]

        if np.isnan(finish).any():  # pragma: no cover - deps always point backwards
            bad = int(np.flatnonzero(np.isnan(finish))[0])
            raise RuntimeError(f"task {bad} never ran (dependency cycle?)")
        # collectives: the returned node spans from its begin marker to its join
        for b, j in self._spans:
            start[j] = start[b]

        # bytes per link and per source node
        isf = kind == _FLOW
        pb = np.bincount(path[isf], weights=nbytes[isf], minlength=P) if P else np.zeros(0)
        if P:
            link_bytes = np.bincount(p_flat, weights=np.repeat(pb, p_len), minlength=L)
            s_len = np.fromiter((a.size for a in self._p_srcs), dtype=np.int64, count=P)
            s_flat = np.concatenate(self._p_srcs)
            bytes_sent = np.bincount(s_flat, weights=np.repeat(pb, s_len), minlength=topo.num_nodes)
            d_len = np.fromiter((a.size for a in self._p_dsts), dtype=np.int64, count=P)
            d_flat = np.concatenate(self._p_dsts)
            bytes_recv = np.bincount(d_flat, weights=np.repeat(pb, d_len), minlength=topo.num_nodes)
        else:
            link_bytes = np.zeros(L)
            bytes_sent = np.zeros(topo.num_nodes)
            bytes_recv = np.zeros(topo.num_nodes)
        res = SimResult(self, start, finish, link_bytes[:L], bytes_sent[: topo.num_nodes], events)
        res.bytes_received = bytes_recv[: topo.num_nodes]
        res.preemptions = n_pre
        res.resumes = n_res
        res.preemption_latency = float(xlat.sum())
        return res
