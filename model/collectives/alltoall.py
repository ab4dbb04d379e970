"""All-to-All plans (:mod:`fred.model.collectives.algorithms` names the algorithms): ``direct``
sends every pair's share at once, ``shift`` runs k-1 permutation steps.

On rings (a ring, a torus, the Ring dimensions of an ASTRA-sim YAML network) dimension-order
routing takes the shortest way round and, between two NPUs exactly half way round each other,
the + way: with ``direct`` every such pair would load only the + links, 1.5x the bound on a ring
of 4 and 1.25x on a ring of 8 (the cut bound, :mod:`fred.model.collectives.bounds`). So such a
pair sends half its bytes each way round in each dimension where it is half way round; both
directions of every ring then carry the same load and ``direct`` meets the bound.
"""

from __future__ import annotations

import numpy as np

from .phases import Shift, Unicasts

__all__ = ["plan_all_to_all"]


def plan_all_to_all(topo, g, alg):
    """All-to-All over ``g``: ``direct`` (every pair at once, both ways round a ring where the
    destination is half way round) or ``shift`` (k-1 permutation steps)."""
    if alg not in ("direct", "shift"):
        raise ValueError(f"all-to-all supports algorithms direct and shift, not {alg!r}")
    if alg == "shift":
        return [(1.0, [Shift(g)])], alg, 1
    p = len(g)
    src = np.repeat(g, p)
    dst = np.tile(g, p)
    return [(1.0, [_both_ways(topo, src, dst, 1.0 / p)])], alg, 1


def _ring_ties(topo, src, dst):
    """Per pair, the ring dimensions (of a grid topology, rings of more than 2 NPUs) in which the
    destination is half way round: both directions are shortest there."""
    dims = topo.meta.get("dims")
    if not dims or topo.routing != "grid":
        return [()] * len(src)
    out = []
    for a, b in zip(src.tolist(), dst.tolist()):
        ties = []
        for d, (kind, n, stride, _) in enumerate(dims):
            if kind == "ring" and n > 2 and n % 2 == 0 and ((b // stride) % n - (a // stride) % n) % n == n // 2:
                ties.append(d)
        out.append(tuple(ties))
    return out


def _both_ways(topo, src, dst, scale):
    """Unicasts src[i] -> dst[i] of D*scale each; a pair that is half way round a ring in some
    dimensions sends an equal share each way round in each of them (2**t routes for t such
    dimensions), so both directions of every ring carry the same load (dimension-order routing
    alone sends all of it the + way)."""
    ties = _ring_ties(topo, src, dst)
    if not any(ties):
        return Unicasts(src, dst, scale)
    nd = len(topo.meta["dims"])
    s_out, d_out, sc_out, orders = [], [], [], []
    for a, b, t in zip(src.tolist(), dst.tolist(), ties):
        if not t:
            s_out.append(a), d_out.append(b), sc_out.append(scale), orders.append(None)
            continue
        for mask in range(2 ** len(t)):
            minus = {d for i, d in enumerate(t) if mask >> i & 1}
            s_out.append(a), d_out.append(b), sc_out.append(scale / 2 ** len(t))
            orders.append(tuple(~d if d in minus else d for d in range(nd)))
    return Unicasts(s_out, d_out, sc_out, orders)
