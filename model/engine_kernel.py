"""The event engine's compiled loop (numba): everything an event does but the rate solve.

:func:`advance_until_solve` runs the engine of :mod:`fred.model.engine` from its current state
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
I_NPEND, I_NDONE, I_NACT, I_NTIM, I_DIRTY, I_EVENTS, I_ARB = range(7)
N_ISTATE = 7


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


@njit(cache=True, nogil=True, error_model="numpy")
def advance_until_solve(ist, fst, kind, dur, path, nbytes, group, s_ptr, s_idx, p_len, p_lat,
                        indeg, start, finish, pend, done, act, rem, gcnt, grate, fresh, xlat, tim_t, tim_i):
    """Run events from the state (see the module docstring); DONE or SOLVE."""
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
            status = SOLVE
            break
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
