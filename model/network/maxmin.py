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
    w = None if mult is None else np.asarray(mult, dtype=np.int64)[ent_flow]
    cnt = np.bincount(ent_link, weights=w, minlength=link_cap.size)
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
        c = np.bincount(el, weights=w, minlength=nu)
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
        if w is not None:
            w = w[keep]
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
