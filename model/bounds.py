"""Closed-form bandwidth lower bounds of collectives (for comparison, never used to simulate).

* :func:`port_bound`: every NPU must send (and receive) ``factor x (p-1)/p x D`` bytes through
  its own links (All-Reduce factor 2 with the model's per-NPU size D; Reduce-Scatter, All-Gather
  and All-to-All factor 1 with D the larger per-NPU buffer), so no endpoint algorithm beats
  ``factor (p-1)/p D / (sum of the NPU's outgoing link bandwidths x payload share)``; with
  in-network reduction an All-Reduce needs only ``D`` through the NPU's links (the switch adds),
  which :func:`port_bound` gives with ``in_network=True`` (Patarasuk & Yuan 2009 for the
  endpoint bound; FRED-SPEC §3 for the in-network one).
* :func:`ring_time`: the textbook ring All-Reduce ``2 (p-1)/p D / B + 2 (p-1) a`` (one
  direction; Thakur, Rabenseifner & Gropp 2005).
"""

from __future__ import annotations

import numpy as np

__all__ = ["FACTORS", "port_bound", "ring_time"]

#: bytes each NPU must send, in units of (p-1)/p x the model's per-NPU size
FACTORS = {"all-reduce": 2.0, "reduce-scatter": 1.0, "all-gather": 1.0, "all-to-all": 1.0}


def _npu_out_rate(topo, npus) -> float:
    """The smallest total outgoing payload rate (B/s) of the NPUs ``npus``."""
    eff = float(getattr(topo, "link_efficiency", 1.0))
    out = np.zeros(topo.num_nodes)
    np.add.at(out, np.asarray(topo.link_src), np.asarray(topo.link_bw, dtype=float))
    return float(out[list(npus)].min()) * eff


def port_bound(topo, op: str, nbytes: float, group=None, in_network: bool = False) -> float:
    """Seconds: the NPU-port lower bound of ``op`` moving ``nbytes`` per NPU (module docs)."""
    if op not in FACTORS:
        raise ValueError(f"no port bound for {op!r}; known: {', '.join(FACTORS)}")
    g = list(range(topo.npus)) if group is None else list(group)
    p = len(g)
    need = nbytes if (in_network and op == "all-reduce") else FACTORS[op] * (p - 1) / p * nbytes
    return need / _npu_out_rate(topo, g)


def ring_time(p: int, nbytes: float, bw: float, hop_latency: float) -> float:
    """The ring All-Reduce closed form (module docs), seconds."""
    return 2 * (p - 1) / p * nbytes / bw + 2 * (p - 1) * hop_latency
