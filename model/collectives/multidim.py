"""Collective plans for multi-dimensional (ASTRA-sim style) networks that use every port, and the
choice of the best plan on a YAML network.

* ``multi-ring``: the data is split into one stream per dimension; stream ``d`` runs the
  hierarchical Reduce-Scatter starting with dimension ``d`` (then ``d+1``, ... cyclically) and
  the All-Gather back, and on every Ring dimension it runs two rings in opposite directions with
  half the data each. The split is equal unless another one (searched on a grid of 1/48ths, up
  to 4 dimensions) lowers the busiest link's load: dimensions with fewer or slower ports (a
  Switch next to Rings, a slow dimension) then start smaller streams. In the first phase every dimension's links in both directions carry one
  stream's big share, so all ports work at once; on a k-D torus of equal rings each link then
  carries exactly the All-Reduce lower bound 2 (p-1)/p x D / (2k) (per direction). On one
  dimension it is the bidirectional ring.
* ``in-switch`` on several dimensions: ring Reduce-Scatter over the dimensions whose switches do
  not reduce (both directions on rings), one in-switch All-Reduce flow per line of each ``in_network`` Switch dimension,
  ring All-Gather back.
* :func:`best_algorithm`: the default on YAML networks for All-Reduce, Reduce-Scatter and
  All-Gather over the whole network: the candidate (in-switch where a dimension reduces,
  multi-ring, hierarchical) with the smallest bandwidth bound (the busiest link's bytes over its
  rate, :func:`fred.model.collectives.chunking.plan_estimate`; it scales with the size, so the choice does
  not depend on it; ties go to the earlier candidate).
"""

from __future__ import annotations

import math

import numpy as np

from .chunking import plan_estimate, stream_link_seconds
from .phases import Ring, Trees

__all__ = ["dim_lines", "multi_ring_plan", "in_switch_plan", "best_algorithm"]


def dim_lines(topo, d):
    """[R, n] NPU ids of the lines of dimension ``d`` of a multi-dimensional topology."""
    _, n, stride, _ = topo.meta["dims"][d]
    ids = np.arange(topo.npus)
    base = ids[(ids // stride) % n == 0]
    return base[:, None] + stride * np.arange(n)[None, :]


def _active_dims(topo):
    return [d for d, dm in enumerate(topo.meta["dims"]) if dm[1] > 1]


def _rs_ag(topo, dims, kind):
    """Phases of a hierarchical RS/AG/AR over ``dims`` in that order (bidirectional on rings)."""
    lines = [dim_lines(topo, d) for d in dims]
    bidir = [topo.meta["dims"][d][0] == "ring" and topo.meta["dims"][d][1] > 2 for d in dims]
    scales = [1.0 / math.prod(lv.shape[1] for lv in lines[:i]) for i in range(len(lines))]
    down = [Ring(lv, s, b) for lv, s, b in zip(lines, scales, bidir)]
    up = [Ring(lv, s, b) for lv, s, b in reversed(list(zip(lines, scales, bidir)))]
    return {"rs": down, "ag": up, "ar": down + up}[kind]


#: the split's grid (1/48ths) and the most streams searched on it
SPLIT_STEPS = 48
MAX_SPLIT_DIMS = 4


def _compositions(n, k):
    """Every way of writing ``n`` as ``k`` non-negative integers, as an [m, k] array."""
    if k == 1:
        return np.array([[n]])
    return np.vstack([np.hstack([np.full((len(r), 1), i), r]) for i in range(n + 1)
                      for r in [_compositions(n - i, k - 1)]])


def _split(sim, streams):
    """Fractions of the data per stream: equal, or the grid point with the least busy link."""
    k = len(streams)
    equal = np.full(k, 1.0 / k)
    if k == 1 or k > MAX_SPLIT_DIMS:
        return equal
    load = np.vstack([stream_link_seconds(sim, ph, 1.0) for ph in streams])     # [k, links]
    grid = _compositions(SPLIT_STEPS, k) / SPLIT_STEPS
    busiest = (grid @ load).max(axis=1)
    best = int(np.argmin(busiest))
    return grid[best] if busiest[best] < (equal @ load).max() * (1 - 1e-6) else equal


def multi_ring_plan(sim, kind):
    """``multi-ring`` over the whole of ``sim.topo`` (module docs); ``kind`` in rs, ag, ar."""
    topo = sim.topo
    dims = _active_dims(topo)
    if not dims:
        return []
    k = len(dims)
    streams = [_rs_ag(topo, dims[i:] + dims[:i], kind) for i in range(k)]
    return [(float(f), ph) for f, ph in zip(_split(sim, streams), streams) if f > 0]


def in_switch_plan(sim, kind):
    """In-switch All-Reduce over the whole of a multi-dimensional ``sim.topo`` (module docs)."""
    topo = sim.topo
    if kind != "ar":
        raise ValueError(f"algorithm 'in-switch' on a multi-dimensional network runs all-reduce only; use "
                         f"multi-ring or hierarchical for {'reduce-scatter' if kind == 'rs' else 'all-gather'}")
    inn = set(topo.meta["in_network_dims"])
    dims = _active_dims(topo)
    others = [d for d in dims if d not in inn]
    phases = _rs_ag(topo, others, "rs") if others else []
    scale = 1.0 / math.prod(topo.meta["dims"][d][1] for d in others)
    for d in dims:
        if d in inn:
            trees = []
            for line in dim_lines(topo, d).tolist():
                sw = int(topo.link_dst[topo.path(line[0], line[1])[0]])
                trees.append((sim.path_allreduce(line, sw), line))
            phases.append(Trees(trees, scale))
    if others:
        phases += _rs_ag(topo, others, "ag")
    return [(1.0, phases)]


def best_algorithm(sim, plans):
    """The name in ``plans`` ({name: plan}, in order of preference) with the smallest bandwidth
    bound (module docs)."""
    best, best_t = None, math.inf
    for name, plan in plans.items():
        t = plan_estimate(sim, plan, 2.0**30)[0]
        if t < best_t * (1 - 1e-9):
            best, best_t = name, t
    return best
