"""Collectives on a crossbar that reduces at its output ports (the ``switched-inr`` wafer fabric).

SHARP and NVSwitch (NVLS) reduce inside the switch, but at an **output port**: the port whose
result is wanted receives every input's stream through the crossbar and adds them there (our
reading of their public descriptions; FRED-SPEC §1 states the consequence: such a switch needs 2x
its link bandwidth inside for an All-Reduce, P x for a P-port Reduce, where FRED reduces step by
step inside its fabric). :func:`fred.model.network.topology._build_crossbar` gives each port a node of its
own between the wire and the crossbar, so these plans put every input's stream on the crossbar's
path into the reducing port, and the bandwidth of that path (``XBAR_OUTPUT_SPEEDUP`` x the
port's) limits the reduction as it would the silicon:

* All-Reduce: every member sends slice j of its buffer to port j (``Unicasts`` into the port
  nodes: P - 1 streams cross into each port), port j multicasts its sum to every member (the
  crossbar replicates); pieces pipeline the two phases;
* Reduce-Scatter: the same first phase, then port j hands its sum to member j;
* All-Gather: every member multicasts its slice (concurrent trees);
* Reduce into ``root``: every member's whole buffer into the root's port, then to the root;
* io-reduce: every member sends 1/n of its buffer to each controller's port, which adds them and
  passes the sum to the controller.

Broadcast, multicast and io-broadcast use the crossbar's multicast trees and All-to-All its
unicasts (:mod:`fred.model.collectives.algorithms`).
"""

from __future__ import annotations

import numpy as np

from .phases import Trees, Unicasts

#: pieces the two phases are pipelined in (as the hierarchical endpoint algorithms)
CHUNKS = 4
NAME = "output-reduce"


def output_reduce_plan(sim, op, g, root=None, io=None):
    """(plan, algorithm name, pieces) of canonical ``op`` over ``g`` on an output-reducing
    crossbar, or None where the crossbar's plain plans apply (multicasts, unicasts)."""
    topo = sim.topo
    port = topo.meta["out_port"]
    g = [int(x) for x in g]
    p = len(g)
    if op in ("all-reduce", "reduce-scatter", "all-gather") and p < 2:
        return [], NAME, 1
    if op in ("all-reduce", "reduce-scatter"):
        src = np.repeat(g, p)
        dst = np.tile([port[x] for x in g], p)
        into = Unicasts(src, dst, 1.0 / p)
        if op == "all-reduce":
            trees = [(sim.path_multicast(port[x], g), [port[x]] + g) for x in g]
            return [(1.0, [into, Trees(trees, 1.0 / p)])], NAME, CHUNKS
        return [(1.0, [into, Unicasts([port[x] for x in g], g, 1.0 / p)])], NAME, CHUNKS
    if op == "all-gather":
        trees = [(sim.path_multicast(x, g), g) for x in g]
        return [(1.0, [Trees(trees, 1.0 / p)])], "multicast", 1
    if op == "reduce":
        rt = g[0] if root is None else topo.check_node(root, "root")
        members = g if rt in g else [rt] + g
        if len(members) < 2:
            return [], NAME, 1
        into = Unicasts(members, [port[rt]] * len(members), 1.0)
        return [(1.0, [into, Unicasts([port[rt]], [rt], 1.0)])], NAME, CHUNKS
    if op == "io-reduce":
        if p < 2:
            return None       # nothing to add: the plain gather to the controllers
        ios = list(topo.io_nodes) if io is None else [topo.check_node(x, "I/O controller") for x in io]
        n = len(ios)
        if not n:
            raise ValueError(f"topology {topo.name!r} has no I/O controllers")
        src = np.repeat(g, n)
        dst = np.tile([port[x] for x in ios], p)
        into = Unicasts(src, dst, 1.0 / n)
        return [(1.0, [into, Unicasts([port[x] for x in ios], ios, 1.0 / n)])], "io-" + NAME, CHUNKS
    return None


__all__ = ["output_reduce_plan", "CHUNKS", "NAME"]
