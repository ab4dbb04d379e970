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
