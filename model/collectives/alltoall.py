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
    """[pairs, dims] bool: the ring dimensions (of a grid topology, rings of more than 2 NPUs, even)
    in which the destination is half way round, so both directions are shortest (None: none)."""
    dims = topo.meta.get("dims")
    if not dims or topo.routing != "grid":
        return None
    cols = []
    for kind, n, stride, _ in dims:
        if kind == "ring" and n > 2 and n % 2 == 0:
            cols.append(((dst // stride) % n - (src // stride) % n) % n == n // 2)
        else:
            cols.append(np.zeros(src.size, dtype=bool))
    tie = np.stack(cols, axis=1)
    return tie if tie.any() else None


def _both_ways(topo, src, dst, scale):
    """Unicasts src[i] -> dst[i] of D*scale each; a pair that is half way round a ring in some
    dimensions sends an equal share each way round in each of them (2**t routes for t such
    dimensions), so both directions of every ring carry the same load (dimension-order routing
    alone sends all of it the + way). The split pairs come first, with their routes; the others
    keep the default route (vectorised: an All-to-All over thousands of NPUs has millions of
    pairs, and only a few are half way round)."""
    src, dst = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
    tie = _ring_ties(topo, src, dst)
    if tie is None:
        return Unicasts(src, dst, scale)
    nd = tie.shape[1]
    split = np.flatnonzero(tie.any(axis=1))
    s_out, d_out, sc_out, orders = [], [], [], []
    for i in split.tolist():
        t = np.flatnonzero(tie[i]).tolist()
        for mask in range(2 ** len(t)):
            minus = {d for k, d in enumerate(t) if mask >> k & 1}
            s_out.append(int(src[i])), d_out.append(int(dst[i])), sc_out.append(scale / 2 ** len(t))
            orders.append(tuple(~d if d in minus else d for d in range(nd)))
    keep = np.ones(src.size, dtype=bool)
    keep[split] = False
    return Unicasts(np.r_[np.asarray(s_out, dtype=np.int64), src[keep]],
                    np.r_[np.asarray(d_out, dtype=np.int64), dst[keep]],
                    np.r_[np.asarray(sc_out, dtype=float), np.full(int(keep.sum()), scale)], orders)
