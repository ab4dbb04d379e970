"""The rate solver of the flow simulator: max-min fair link sharing, with strict priority classes
and FRED switch arbitration.

A flow moves at one rate on all its links. :func:`maxmin_rates` gives every flow its max-min
fair rate (progressive filling, vectorised over (flow, link) incidence entries);
:func:`priority_rates` serves priority classes one after another (highest first), each max-min
fair in what the classes above left, and on FRED switches lets the classes time-share the switch
fabric (FRED-SPEC §4). The event engine (:mod:`fred.model.network.engine`) re-solves whenever a flow
starts or ends.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["maxmin_rates", "priority_rates"]


def maxmin_rates(ent_flow, ent_link, nflows, link_cap, flow_cap=None, mult=None):
    """Max-min fair rates by progressive filling.

    ``ent_flow[e]`` uses link ``ent_link[e]``; ``link_cap`` per link (B/s); optional per-flow caps.
    Flows with no entries get their cap (``inf`` without one). All unfrozen flows rise together;
    when a link saturates, the flows crossing it freeze at the current level.
    ``mult``: optional per-flow multiplicity -- flow i stands for ``mult[i]`` identical flows
    (same links, same cap), which max-min gives the same rate; the result is the same as for
    the flows listed one by one (counts are whole numbers either way).
    """
    ent_flow = np.asarray(ent_flow, dtype=np.int64)
    ent_link = np.asarray(ent_link, dtype=np.int64)
    link_cap = np.asarray(link_cap, dtype=float)
    fcap = np.full(nflows, np.inf) if flow_cap is None else np.asarray(flow_cap, dtype=float)
    if nflows == 0:
        return np.zeros(0)
    if ent_flow.size == 0:
        return fcap.copy()
    w = np.ones(ent_flow.size) if mult is None else np.asarray(mult, dtype=np.int64)[ent_flow].astype(float)
    return _progressive_filling(ent_flow, ent_link, nflows, link_cap, fcap, w)


@njit(cache=True, nogil=True)
def _progressive_filling(ent_flow, ent_link, nflows, link_cap, fcap, w):
    """:func:`maxmin_rates` compiled: entry e (weight ``w[e]``, the multiplicity of its flow)
    puts flow ``ent_flow[e]`` on link ``ent_link[e]``. Sums run in entry order (as
    ``np.bincount`` does), so the rates are those of the vectorised formulation to the bit."""
    # long: the vectorised algorithm written out as loops, step by step, to keep its arithmetic
    L = link_cap.size
    cnt = np.zeros(L)
    for e in range(ent_flow.size):
        cnt[ent_link[e]] += w[e]
    if cnt.max() <= 1:
        # fast path: no link is shared, every flow runs at its own bottleneck
        rate = np.full(nflows, np.inf)
        for e in range(ent_flow.size):
            c = link_cap[ent_link[e]]
            if c < rate[ent_flow[e]]:
                rate[ent_flow[e]] = c
        for i in range(nflows):
            if fcap[i] < rate[i]:
                rate[i] = fcap[i]
        return rate
    remap = np.full(L, -1, dtype=np.int64)
    nu = 0
    for l in range(L):
        if cnt[l] != 0:
            remap[l] = nu
            nu += 1
    cap = np.zeros(nu)
    for l in range(L):
        if remap[l] >= 0:
            cap[remap[l]] = link_cap[l]
    tol = 1e-9 * np.maximum(cap, 1.0)
    n = ent_flow.size
    ef = ent_flow.copy()
    el = np.empty(n, dtype=np.int64)
    for e in range(n):
        el[e] = remap[ent_link[e]]
    ww = w.copy()
    rate = np.zeros(nflows)
    frozen = np.ones(nflows, dtype=np.bool_)
    for e in range(n):
        frozen[ef[e]] = False
    capped = False
    for i in range(nflows):
        if frozen[i]:
            rate[i] = fcap[i]
        if np.isfinite(fcap[i]):
            capped = True
    level = 0.0
    c = np.zeros(nu)
    newly = np.zeros(nflows, dtype=np.bool_)
    for _ in range(nflows + 2):
        c[:] = 0.0
        for e in range(n):
            c[el[e]] += ww[e]
        inc = np.inf
        for l in range(nu):
            if c[l] > 0:
                v = cap[l] / c[l]
                if v < inc:
                    inc = v
        if capped:
            fm = np.inf
            for i in range(nflows):
                if not frozen[i] and fcap[i] < fm:
                    fm = fcap[i]
            inc = min(inc, fm - level)
        inc = max(inc, 0.0)
        level += inc
        for l in range(nu):
            cap[l] -= inc * c[l]
        newly[:] = False
        for e in range(n):
            l = el[e]
            if c[l] > 0 and cap[l] <= tol[l]:
                newly[ef[e]] = True
        anynew = False
        for i in range(nflows):
            if capped:
                if not frozen[i] and fcap[i] <= level * (1 + 1e-12):
                    newly[i] = True
                if frozen[i]:
                    newly[i] = False
            if newly[i]:
                anynew = True
        if not anynew:  # numerical corner: freeze everything left
            for i in range(nflows):
                newly[i] = not frozen[i]
        done = True
        for i in range(nflows):
            if newly[i]:
                rate[i] = level
                frozen[i] = True
            if not frozen[i]:
                done = False
        if done:
            break
        k = 0
        for e in range(n):
            if not newly[ef[e]]:
                ef[k] = ef[e]
                el[k] = el[e]
                ww[k] = ww[e]
                k += 1
        n = k
    return rate


def priority_rates(ent_flow, ent_link, nflows, link_cap, flow_cap, prio, sw=None, mult=None):
    """Strict priority between classes (highest first), max-min fair inside each class.

    ``sw``: optional FRED switch arbitration ``(sw_a, sw_b, num_nodes)``: per link, the switch
    node at its source / destination end (-1: not a switch). A FRED switch runs one phase at a
    time (FRED-SPEC §4), so priority classes time-share its fabric: one class's flows at a switch
    form one phase and run in parallel; that phase needs the fabric for the busiest of its ports
    (the highest ``class rate on the link / link bandwidth`` over the switch's links), and the
    classes below may use a link at a switch only for the fabric time left: its capacity for
    them is at most ``left x bandwidth``. ``mult``: per-flow multiplicity, as in
    :func:`maxmin_rates`.
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
        ms = None if mult is None else np.asarray(mult, dtype=np.int64)[sel]
        r = maxmin_rates(ef, el, sel.size, np.maximum(ecap, 1e-300), flow_cap[sel], ms)
        dead = np.zeros(sel.size, dtype=bool)
        dead[ef[ecap[el] <= 1e-9 * np.maximum(link_cap[el], 1.0)]] = True
        r[dead] = 0.0
        rate[sel] = r
        used = np.bincount(el, weights=r[ef] if ms is None else r[ef] * ms[ef], minlength=cap.size)
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


# ---- the engine's solve, compiled -----------------------------------------------------------------
#: :func:`group_rates` modes: max-min alone; strict priority classes; classes and FRED switch arbitration
PLAIN, PRIORITY, ARBITRATED = 0, 1, 2


@njit(cache=True, nogil=True)
def group_rates(ag, mult, g_path, g_prio, p_ptr, p_flat, p_cap, link_cap, mode, sw_a, sw_b, n_nodes):
    """The rates of the event engine's active rate groups ``ag`` (ascending; ``mult[i]`` flows
    each, on path ``g_path[ag[i]]`` in class ``g_prio[ag[i]]``), compiled: the entries of the
    groups' paths gathered as :func:`fred.model.network.engine` does, then :func:`maxmin_rates`
    (``mode`` PLAIN) or :func:`priority_rates` (PRIORITY; ARBITRATED: with ``sw_a``/``sw_b``/
    ``n_nodes``). The same floating-point operations in the same order as those numpy functions
    (sums in entry order, as ``np.bincount``), so the same rates to the bit
    (tests/model/test_model_engine_memo.py)."""
    # long: priority_rates written out as loops, step by step, to keep its arithmetic
    n = ag.size
    tot = 0
    for i in range(n):
        p = g_path[ag[i]]
        tot += p_ptr[p + 1] - p_ptr[p]
    ent_flow = np.empty(tot, dtype=np.int64)
    ent_link = np.empty(tot, dtype=np.int64)
    fcap = np.empty(n)
    k = 0
    for i in range(n):
        p = g_path[ag[i]]
        fcap[i] = p_cap[p]
        for e in range(p_ptr[p], p_ptr[p + 1]):
            ent_flow[k] = i
            ent_link[k] = p_flat[e]
            k += 1
    m = np.empty(n, dtype=np.int64)
    for i in range(n):
        m[i] = mult[i]
    if mode == PLAIN:
        return _maxmin(ent_flow, ent_link, n, link_cap, fcap, m)
    prio = np.empty(n, dtype=np.int64)
    for i in range(n):
        prio[i] = g_prio[ag[i]]
    L = link_cap.size
    rate = np.zeros(n)
    cap = link_cap.copy()
    levels = np.unique(prio)[::-1]
    arb = mode == ARBITRATED
    left = np.ones(n_nodes)
    local = np.empty(n, dtype=np.int64)
    for lv in levels:
        ns = 0
        for i in range(n):
            if prio[i] == lv:
                local[i] = ns
                ns += 1
            else:
                local[i] = -1
        sel = np.empty(ns, dtype=np.int64)
        for i in range(n):
            if local[i] >= 0:
                sel[local[i]] = i
        ne = 0
        for e in range(tot):
            if local[ent_flow[e]] >= 0:
                ne += 1
        ef = np.empty(ne, dtype=np.int64)
        el = np.empty(ne, dtype=np.int64)
        j = 0
        for e in range(tot):
            if local[ent_flow[e]] >= 0:
                ef[j] = local[ent_flow[e]]
                el[j] = ent_link[e]
                j += 1
        ecap = cap
        if arb:
            partial = False
            for x in range(n_nodes):
                if left[x] < 1.0:
                    partial = True
                    break
            if partial:
                ecap = cap.copy()
                for l in range(L):
                    if sw_a[l] >= 0:
                        ecap[l] = min(ecap[l], left[sw_a[l]] * link_cap[l])
                for l in range(L):
                    if sw_b[l] >= 0:
                        ecap[l] = min(ecap[l], left[sw_b[l]] * link_cap[l])
        pos = np.empty(L)
        for l in range(L):
            pos[l] = max(ecap[l], 1e-300)
        ms = np.empty(ns, dtype=np.int64)
        fc = np.empty(ns)
        for i in range(ns):
            ms[i] = m[sel[i]]
            fc[i] = fcap[sel[i]]
        r = _maxmin(ef, el, ns, pos, fc, ms)
        for e in range(ne):
            l = el[e]
            if ecap[l] <= 1e-9 * max(link_cap[l], 1.0):
                r[ef[e]] = 0.0
        for i in range(ns):
            rate[sel[i]] = r[i]
        used = np.zeros(L)
        for e in range(ne):
            used[el[e]] += r[ef[e]] * ms[ef[e]]
        for l in range(L):
            cap[l] = max(cap[l] - used[l], 0.0)
        if arb:
            occ = np.zeros(n_nodes)
            for l in range(L):
                if sw_a[l] >= 0:
                    f = used[l] / max(link_cap[l], 1e-300)
                    if f > occ[sw_a[l]]:
                        occ[sw_a[l]] = f
            for l in range(L):
                if sw_b[l] >= 0:
                    f = used[l] / max(link_cap[l], 1e-300)
                    if f > occ[sw_b[l]]:
                        occ[sw_b[l]] = f
            for x in range(n_nodes):
                left[x] -= occ[x]
                if left[x] < 1e-9:
                    left[x] = 0.0
    return rate


@njit(cache=True, nogil=True)
def _maxmin(ent_flow, ent_link, nflows, link_cap, fcap, mult):
    """:func:`maxmin_rates` with a multiplicity per flow, compiled."""
    if nflows == 0:
        return np.zeros(0)
    if ent_flow.size == 0:
        return fcap.copy()
    w = np.empty(ent_flow.size)
    for e in range(ent_flow.size):
        w[e] = float(mult[ent_flow[e]])
    return _progressive_filling(ent_flow, ent_link, nflows, link_cap, fcap, w)
