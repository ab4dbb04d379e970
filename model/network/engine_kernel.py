"""The event engine's compiled loop (numba): everything an event does but the rate solve.

:func:`advance_until_solve` runs the engine of :mod:`fred.model.network.engine` from its current state
until the run ends (returns :data:`DONE`) or the set of active flows has changed and their rates
must be solved again (returns :data:`SOLVE`; the caller solves, writes the rates per rate group
and calls again). The state lives in numpy arrays the caller owns, so a call costs no copying.

Per event (as the numpy engine before it did, in the same floating-point operations):

1. *cascade* -- start every ready task (a delay or a flow to itself becomes a timer, a flow joins
   the active flows with all its bytes left), complete the tasks due now and release their
   successors, until nothing more happens at this instant;
2. *advance* -- the next event is the earliest of a flow's last byte (remaining bytes / its
   group's rate) and the earliest timer; every active flow sends ``rate x dt``; a flow that has
   sent its last byte (within 1e-12 of the time) leaves the active flows and completes after its
   path latency plus the latency preemptions added to it (a timer, or now if that is 0).

The timers are a binary heap (time, task) in two arrays.
"""

from __future__ import annotations

import numpy as np
from numba import njit

DONE, SOLVE = 0, 1
# slots of the integer state array
(I_NPEND, I_NDONE, I_NACT, I_NTIM, I_DIRTY, I_EVENTS, I_ARB, I_REMEMBER, I_NAG, I_HASH, I_NPRE, I_NRES,
 I_STAMP, I_NENTRY) = range(14)
N_ISTATE = 14


@njit(cache=True, nogil=True)
def _heap_push(tt, ti, n, t, task):
    i = n
    tt[i] = t
    ti[i] = task
    while i > 0:
        p = (i - 1) >> 1
        if tt[p] <= tt[i]:
            break
        tt[p], tt[i] = tt[i], tt[p]
        ti[p], ti[i] = ti[i], ti[p]
        i = p
    return n + 1


@njit(cache=True, nogil=True)
def _heap_pop(tt, ti, n):
    task = ti[0]
    n -= 1
    tt[0] = tt[n]
    ti[0] = ti[n]
    i = 0
    while True:
        l = 2 * i + 1
        if l >= n:
            break
        r = l + 1
        c = l if (r >= n or tt[l] <= tt[r]) else r
        if tt[i] <= tt[c]:
            break
        tt[c], tt[i] = tt[i], tt[c]
        ti[c], ti[i] = ti[i], ti[c]
        i = c
    return task, n


@njit(cache=True, nogil=True)
def _charge_preemptions(ist, fst, act, nact, group, fresh, grate, g_path, g_prio, q_ptr, q_flat, xlat,
                        nf, nold, minrun, maxnew, ag, nag):
    """FRED switch arbitration at a rate solve: a flow started since the last solve that meets a
    lower class running through a switch on its route preempts it (pays the preemption latency)
    and every running flow of a class below the new flows' highest at one of its switches pays a
    phase switch (resume latency). Per rate group: its new and its running flows."""
    anynew = False
    for j in range(nact):
        f = act[j]
        g = group[f]
        if fresh[f]:
            nf[g] += 1
            anynew = True
        else:
            nold[g] += 1
    if anynew:
        big = np.iinfo(np.int64).max
        minrun[:] = big
        maxnew[:] = -big
        for a in range(nag):
            g = ag[a]
            p = g_path[g]
            pr = g_prio[g]
            run = nold[g] > 0 and grate[g] > 0
            for e in range(q_ptr[p], q_ptr[p + 1]):
                sw = q_flat[e]
                if run and pr < minrun[sw]:
                    minrun[sw] = pr
                if nf[g] > 0 and pr > maxnew[sw]:
                    maxnew[sw] = pr
        t_pre, t_resume = fst[1], fst[2]
        anypre = False
        for a in range(nag):                 # nf[g] becomes -1: the group's new flows preempt
            g = ag[a]
            if nf[g] > 0:
                p = g_path[g]
                for e in range(q_ptr[p], q_ptr[p + 1]):
                    if minrun[q_flat[e]] < g_prio[g]:
                        nf[g] = -1
                        anypre = True
                        break
        if anypre:
            for a in range(nag):             # nold[g] becomes -1: the group's running flows resume
                g = ag[a]
                if nold[g] > 0 and grate[g] > 0:
                    p = g_path[g]
                    for e in range(q_ptr[p], q_ptr[p + 1]):
                        if maxnew[q_flat[e]] > g_prio[g]:
                            nold[g] = -1
                            break
            for j in range(nact):
                f = act[j]
                g = group[f]
                if fresh[f]:
                    if nf[g] == -1:
                        xlat[f] += t_pre
                        ist[I_NPRE] += 1
                elif nold[g] == -1:
                    xlat[f] += t_resume
                    ist[I_NRES] += 1
    for j in range(nact):
        f = act[j]
        fresh[f] = 0
        nf[group[f]] = 0
        nold[group[f]] = 0


@njit(cache=True, nogil=True)
def _active_groups(ist, act, nact, group, gcnt, mark, ag):
    """The active rate groups, ascending, into ``ag``; their count. Also the multiset's hash."""
    stamp = ist[I_STAMP] + 1
    ist[I_STAMP] = stamp
    n = 0
    for j in range(nact):
        g = group[act[j]]
        if mark[g] != stamp:
            mark[g] = stamp
            ag[n] = g
            n += 1
    ag[:n].sort()
    h = np.uint64(14695981039346656037)
    prime = np.uint64(1099511628211)
    for a in range(n):
        h = (h ^ np.uint64(ag[a])) * prime
        h = (h ^ np.uint64(gcnt[ag[a]])) * prime
    ist[I_NAG] = n
    ist[I_HASH] = np.int64(h)
    return n


@njit(cache=True, nogil=True)
def hash_insert(htab, hkey, e):
    """Put entry ``e`` (hash ``hkey[e]``) into the open-addressing table ``htab`` (-1: empty)."""
    mask = htab.size - 1
    i = hkey[e] & mask
    while htab[i] >= 0:
        i = (i + 1) & mask
    htab[i] = e


@njit(cache=True, nogil=True)
def rehash(htab, hkey, n):
    """Fill the (empty) table ``htab`` with entries 0..n-1."""
    htab[:] = -1
    for e in range(n):
        hash_insert(htab, hkey, e)


@njit(cache=True, nogil=True)
def _remembered(ist, ag, nag, gcnt, grate, htab, hkey, kptr, kflat, mflat, rflat):
    """The rates of the active groups from the memory (True), if this multiset is in it."""
    h = ist[I_HASH]
    mask = htab.size - 1
    i = h & mask
    while htab[i] >= 0:
        e = htab[i]
        i = (i + 1) & mask
        if hkey[e] != h:
            continue
        lo = kptr[e]
        if kptr[e + 1] - lo != nag:
            continue
        same = True
        for a in range(nag):
            if kflat[lo + a] != ag[a] or mflat[lo + a] != gcnt[ag[a]]:
                same = False
                break
        if not same:
            continue
        for a in range(nag):
            grate[ag[a]] = rflat[lo + a]
        return True
    return False


@njit(cache=True, nogil=True, error_model="numpy")
def advance_until_solve(ist, fst, kind, dur, path, nbytes, group, s_ptr, s_idx, p_len, p_lat,
                        indeg, start, finish, pend, done, act, rem, gcnt, grate, fresh, xlat, tim_t, tim_i,
                        g_path, g_prio, q_ptr, q_flat, nf, nold, minrun, maxnew, mark, ag,
                        htab, hkey, kptr, kflat, mflat, rflat):
    """Run events from the state (see the module docstring); DONE, or SOLVE with the active groups
    in ``ag[:ist[I_NAG]]`` when their rates are not in the memory (the memory: entry e holds a
    multiset of groups ``kflat[kptr[e]:kptr[e + 1]]`` with flow counts ``mflat[...]``, its rates
    ``rflat[...]`` and its hash ``hkey[e]``; ``htab`` finds entries by hash)."""
    # long: one compiled loop over the event steps; the counters live in locals between steps
    npend, ndone, nact, ntim = ist[I_NPEND], ist[I_NDONE], ist[I_NACT], ist[I_NTIM]
    dirty, events, arb = ist[I_DIRTY], ist[I_EVENTS], ist[I_ARB]
    t = fst[0]
    status = DONE
    while True:
        # ---- cascade
        while npend > 0 or ndone > 0:
            for j in range(npend):
                i = pend[j]
                start[i] = t
                if kind[i] == 1:
                    p = path[i]
                    if p_len[p] > 0:
                        act[nact] = i
                        rem[nact] = nbytes[i]
                        nact += 1
                        gcnt[group[i]] += 1
                        dirty = 1
                        if arb:
                            fresh[i] = 1
                        continue
                    tt = t + p_lat[p]
                else:
                    tt = t + dur[i]
                if tt <= t:
                    done[ndone] = i
                    ndone += 1
                else:
                    ntim = _heap_push(tim_t, tim_i, ntim, tt, i)
            npend = 0
            for j in range(ndone):
                i = done[j]
                finish[i] = t
                for e in range(s_ptr[i], s_ptr[i + 1]):
                    s = s_idx[e]
                    indeg[s] -= 1
                    if indeg[s] == 0:
                        pend[npend] = s
                        npend += 1
            ndone = 0
        if nact == 0 and ntim == 0:
            status = DONE
            break
        if dirty and nact > 0:
            nag = _active_groups(ist, act, nact, group, gcnt, mark, ag)
            if arb:
                _charge_preemptions(ist, fst, act, nact, group, fresh, grate, g_path, g_prio, q_ptr, q_flat,
                                    xlat, nf, nold, minrun, maxnew, ag, nag)
            if not (ist[I_REMEMBER] and _remembered(ist, ag, nag, gcnt, grate, htab, hkey, kptr, kflat, mflat,
                                                    rflat)):
                status = SOLVE
                dirty = 0          # the caller solves before calling again
                break
            dirty = 0
        events += 1
        # ---- advance
        dtf = np.inf
        for j in range(nact):
            tf = rem[j] / grate[group[act[j]]]
            if tf < dtf:
                dtf = tf
        tnext = t + dtf
        if ntim > 0 and tim_t[0] < tnext:
            tnext = tim_t[0]
        eps = 1e-12 * max(tnext, 1e-9)
        if nact > 0:
            dt = tnext - t
            lim = dt + eps
            w = 0
            for j in range(nact):
                f = act[j]
                r = grate[group[f]]
                if rem[j] / r <= lim:
                    gcnt[group[f]] -= 1
                    dirty = 1
                    lat = p_lat[path[f]] + xlat[f]
                    if lat <= 0:
                        done[ndone] = f
                        ndone += 1
                    else:
                        ntim = _heap_push(tim_t, tim_i, ntim, tnext + lat, f)
                else:
                    act[w] = f
                    rem[w] = rem[j] - r * dt
                    w += 1
            nact = w
        t = tnext
        lim = tnext + eps
        while ntim > 0 and tim_t[0] <= lim:
            task, ntim = _heap_pop(tim_t, tim_i, ntim)
            done[ndone] = task
            ndone += 1
    ist[I_NPEND], ist[I_NDONE], ist[I_NACT], ist[I_NTIM] = npend, ndone, nact, ntim
    ist[I_DIRTY], ist[I_EVENTS] = dirty, events
    fst[0] = t
    return status


@njit(cache=True, nogil=True)
def successors(pred, succ, n):
    """Successor lists in CSR form (``s_idx[s_ptr[i]:s_ptr[i + 1]]``: the successors of task i,
    in the order the edges were added) and in-degrees, by counting (no sort)."""
    s_ptr = np.zeros(n + 1, dtype=np.int64)
    indeg = np.zeros(n, dtype=np.int64)
    for e in range(pred.size):
        s_ptr[pred[e] + 1] += 1
        indeg[succ[e]] += 1
    for i in range(n):
        s_ptr[i + 1] += s_ptr[i]
    fill = s_ptr[:-1].copy()
    s_idx = np.empty(pred.size, dtype=np.int64)
    for e in range(pred.size):
        p = pred[e]
        s_idx[fill[p]] = succ[e]
        fill[p] += 1
    return s_ptr, s_idx, indeg
