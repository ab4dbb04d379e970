"""Closed-form bandwidth lower bounds of collectives (for comparison, never used to simulate).

* :func:`port_bound`: every NPU must send (and receive) ``factor x (p-1)/p x D`` bytes through
  its own links (All-Reduce factor 2 with the model's per-NPU size D; Reduce-Scatter, All-Gather
  and All-to-All factor 1 with D the larger per-NPU buffer), so no endpoint algorithm beats
  ``factor (p-1)/p D / (sum of the NPU's outgoing link bandwidths x payload share)``; with
  in-network reduction an All-Reduce needs only ``D`` through the NPU's links (the switch adds),
  which :func:`port_bound` gives with ``in_network=True`` (Patarasuk & Yuan 2009 for the
  endpoint bound; FRED-SPEC §3 for the in-network one).
* :func:`uplink_bound`: the same argument on a two-level tree with each L1 switch and its NPUs
  taken as one node behind its L1<->L2 link (reductions only: the L1's NPUs can first combine
  their data among themselves, which All-to-All cannot).
* :func:`cut_bound` (All-to-All): across any cut of the network into a side S and the rest,
  each member in S sends D/p to each member outside, so ``|S| |rest| / p x D`` bytes must cross
  the cut each way over the links that cross it (their payload rate). The cuts tried: every
  L1 switch with its NPUs (the uplink: ``m (p-m)/p x D`` through one L1<->L2 link), and on
  grids and YAML networks every cut of one dimension at a coordinate (on a ring an arc); I/O
  controllers forward nothing, so their links do not count. On the 5x4 mesh the cut between
  rows 2 and 3 (8 | 12 NPUs, 4 links of 750 GB/s) gives ``8 x 12 / 20 x D`` over 3 TB/s, 2.5x
  the port bound (the bisection argument of Leighton 1992, ch. 1.2).
* :func:`lower_bound`: the largest of them, with its name.
* :func:`ring_time`: the textbook ring All-Reduce ``2 (p-1)/p D / B + 2 (p-1) a`` (one
  direction; Thakur, Rabenseifner & Gropp 2005).
"""

from __future__ import annotations

import numpy as np

__all__ = ["FACTORS", "port_bound", "uplink_bound", "cut_bound", "lower_bound", "ring_time"]

#: bytes each NPU must send, in units of (p-1)/p x the model's per-NPU size
FACTORS = {"all-reduce": 2.0, "reduce-scatter": 1.0, "all-gather": 1.0, "all-to-all": 1.0}


def _npu_out_rate(topo, npus) -> float:
    """The smallest total outgoing payload rate (B/s) of the NPUs ``npus`` into the network
    (links to I/O controllers do not count)."""
    eff = float(getattr(topo, "link_efficiency", 1.0))
    src = np.asarray(topo.link_src)
    dst = np.asarray(topo.link_dst)
    net = np.array([topo.kinds[d] != "io" for d in dst.tolist()], dtype=bool)
    out = np.zeros(topo.num_nodes)
    np.add.at(out, src[net], np.asarray(topo.link_bw, dtype=float)[net])
    return float(out[list(npus)].min()) * eff


def uplink_bound(topo, op: str, nbytes: float, in_network: bool = False) -> float:
    """Seconds: on a two-level tree (``meta['l1_of']``) whose L1 switches do not add, treat
    each L1 and its NPUs as one node: its uplink must carry ``factor (L-1)/L x D`` each way
    (``D`` with in-network reduction for All-Reduce); 0 on other topologies."""
    l1_of = topo.meta.get("l1_of")
    parent = topo.meta.get("parent")
    if not l1_of or op not in FACTORS or op == "all-to-all":
        return 0.0
    nl1 = len(set(l1_of))
    if nl1 < 2:
        return 0.0
    l1 = parent[0]
    up = [lid for lid, s, d, _, _ in topo.links() if s == l1 and d == parent.get(l1)]
    if not up:
        return 0.0
    rate = float(topo.link_bw[up[0]]) * float(getattr(topo, "link_efficiency", 1.0))
    need = nbytes if (in_network and op == "all-reduce") else FACTORS[op] * (nl1 - 1) / nl1 * nbytes
    return need / rate


def port_bound(topo, op: str, nbytes: float, group=None, in_network: bool = False) -> float:
    """Seconds: the NPU-port lower bound of ``op`` moving ``nbytes`` per NPU (module docs)."""
    if op not in FACTORS:
        raise ValueError(f"no port bound for {op!r}; known: {', '.join(FACTORS)}")
    g = list(range(topo.npus)) if group is None else list(group)
    p = len(g)
    need = nbytes if (in_network and op == "all-reduce") else FACTORS[op] * (p - 1) / p * nbytes
    return need / _npu_out_rate(topo, g)


def _cut_sides(topo):
    """Candidate cuts: boolean arrays over the nodes (True: side S), module docs."""
    npus = np.arange(topo.npus)
    sides = []
    l1_of = topo.meta.get("l1_of")
    if l1_of:
        l1 = np.asarray(l1_of)[: topo.npus]
        sides += [l1 == x for x in np.unique(l1).tolist()]
    for _, n, stride, *_ in topo.meta.get("dims") or ():
        coord = (npus // stride) % n
        sides += [coord < c for c in range(1, n)]
    if not sides:
        return []
    # a switch goes with its NPUs when they all are in S (links switch -> NPU, grouped by switch)
    src = np.asarray(topo.link_src)
    dst = np.asarray(topo.link_dst)
    m = (np.asarray(topo.kinds)[src] == "switch") & (dst < topo.npus)
    order = np.argsort(src[m], kind="stable")
    sw, nb = src[m][order], dst[m][order]
    heads = np.flatnonzero(np.r_[True, sw[1:] != sw[:-1]]) if sw.size else sw
    out = []
    for s in sides:
        side = np.zeros(topo.num_nodes, dtype=bool)
        side[: topo.npus] = s
        if sw.size:
            side[sw[heads]] = np.minimum.reduceat(s[nb].astype(np.int8), heads).astype(bool)
        out.append(side)
    return out


def cut_bound(topo, op: str, nbytes: float, group=None) -> float:
    """Seconds: the cut lower bound of All-to-All moving ``nbytes`` per NPU (module docs); 0 for
    the other operations and on topologies without cuts to try."""
    if op != "all-to-all":
        return 0.0
    g = np.zeros(topo.npus, dtype=bool)
    g[list(range(topo.npus)) if group is None else list(group)] = True
    p = int(g.sum())
    src = np.asarray(topo.link_src)
    dst = np.asarray(topo.link_dst)
    kinds = np.asarray(topo.kinds)
    net = (kinds[src] != "io") & (kinds[dst] != "io")
    bw = np.asarray(topo.link_bw, dtype=float) * float(getattr(topo, "link_efficiency", 1.0))
    best = 0.0
    for side in _cut_sides(topo):
        k = int((side[: topo.npus] & g).sum())
        need = k * (p - k) / p * nbytes
        if need <= 0:
            continue
        for a, b in ((side, ~side), (~side, side)):
            cap = float(bw[net & a[src] & b[dst]].sum())
            best = max(best, need / cap) if cap > 0 else best
    return best


def lower_bound(topo, op: str, nbytes: float, group=None, in_network: bool = False) -> tuple[float, str]:
    """(seconds, which) the largest of the port, uplink and cut bounds of ``op`` (module docs)."""
    cands = [(port_bound(topo, op, nbytes, group, in_network), "NPU ports")]
    if group is None or set(group) == set(range(topo.npus)):
        cands.append((uplink_bound(topo, op, nbytes, in_network), "L1 uplinks"))
    cands.append((cut_bound(topo, op, nbytes, group), "cut"))
    return max(cands, key=lambda c: c[0])


def ring_time(p: int, nbytes: float, bw: float, hop_latency: float) -> float:
    """The ring All-Reduce closed form (module docs), seconds."""
    return 2 * (p - 1) / p * nbytes / bw + 2 * (p - 1) * hop_latency
