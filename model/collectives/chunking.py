"""How many pieces a collective's streams are cut into, chosen from the plan itself.

A plan's streams run their phases in order and pieces pipeline through them
(:mod:`fred.model.collectives.phases`). Without pipelining a stream takes its *serial* time (the
sum of its phases' times); with ``c`` pieces the phases overlap, but every piece pays the hop
latencies of its ring steps again. The estimate (ours, checked against the simulator in
``tests/model/test_network_chunks.py`` and ``python -m fred.bench collectives``)::

    T(c) = T_bw + T_fill / c + (c - 1) * lam

* ``T_bw``: the plan's bandwidth bound, the busiest link's bytes over its payload rate (every
  phase of every stream, each link's bandwidth x the topology's payload share), and no less
  than the slowest phase alone (chained trees run one after another);
* ``T_fill = max(0, T_serial - T_bw)``: what pipelining can hide, with ``T_serial`` the slowest
  stream's serial time (0 when the phases already keep the bottleneck busy, e.g. a ring
  All-Reduce whose two phases use the same links, or the two complementary streams of hier2d);
* ``lam``: the latency one more piece adds on the busiest link: the ring steps (or flows) of
  the phases that cross it, each with the latency of its slowest path.

:func:`auto_chunks` returns the ``c`` in ``1..MAX_AUTO_CHUNKS`` that minimises ``T(c)``, capped
so that the collective creates at most ``FLOW_BUDGET`` flows (the simulator's cost grows with
them). Everything it reads comes from the plan, the sizes and the topology: the same inputs
give the same answer, so the memo of :func:`fred.model.collectives.api.expand` stays exact.
"""

from __future__ import annotations

import numpy as np

from .phases import Ring, Shift, Trees, Unicasts

__all__ = ["auto_chunks", "plan_estimate", "stream_link_seconds", "MAX_AUTO_CHUNKS", "FLOW_BUDGET"]

#: most pieces the automatic choice takes (ours): beyond 64 the gain is below 1/64 of the fill
MAX_AUTO_CHUNKS = 64
#: most flows one automatically cut collective may create (ours: ~0.1 GB of task arrays, a
#: few seconds of simulation); an explicit ``chunks=`` is bounded only by the simulator's caps
FLOW_BUDGET = 1_000_000


class _Load:
    """Per-link bytes, slowest-path latency per step, steps and flows of one phase."""

    def __init__(self, n_links):
        self.bytes = np.zeros(n_links)
        self.lat = 0.0
        self.steps = 0
        self.flows = 0
        self.serial = None  # seconds when the phase's flows run one after another (chained trees)

    def add(self, sim, pids, nbytes, steps):
        for pid in np.unique(pids).tolist():
            self.lat = max(self.lat, sim.path_latency(pid))
        for pid, nb in zip(np.asarray(pids).tolist(), np.broadcast_to(nbytes, np.shape(pids)).tolist()):
            self.bytes[sim.path_links(pid)] += nb * steps
        self.steps = max(self.steps, steps)
        self.flows += int(np.size(pids)) * steps


def _phase_load(sim, ph, D) -> _Load:
    """The load of phase ``ph`` moving ``D`` bytes per NPU (all its flows, one piece = all data)."""
    ld = _Load(sim.topo.num_links)
    if isinstance(ph, Ring):
        k = ph.rings.shape[1]
        if k < 2:
            return ld
        dirs = (False, True) if ph.bidir else (False,)
        for rev in dirs:
            rings = ph.rings[:, ::-1] if (rev != ph.reverse) else ph.rings
            rcv = np.roll(rings, -1, axis=1)
            pids = sim.paths_unicast(rings.ravel(), rcv.ravel())
            ld.add(sim, pids, D * ph.scale / k / len(dirs), k - 1)
    elif isinstance(ph, Unicasts):
        m = ph.srcs != ph.dsts
        if m.any():
            ld.add(sim, ph.paths(sim, m), D * ph.scale[m], 1)
    elif isinstance(ph, Shift):
        k = ph.g.size
        for s in range(1, k):
            ld.add(sim, sim.paths_unicast(ph.g, np.roll(ph.g, -s)), D * ph.scale / k, 1)
        ld.steps = max(k - 1, 0)
    elif isinstance(ph, Trees):
        ld.add(sim, ph.pids, D * ph.scale, 1)
        if ph.chain:
            rate = sim.topo.link_bw * sim.link_efficiency
            ld.serial = sum(D * ph.scale / float(rate[sim.path_links(p)].min()) for p in ph.pids.tolist()
                            if sim.path_links(p).size)
            ld.steps = len(ph.pids)
    return ld


def stream_link_seconds(sim, phases, nbytes) -> np.ndarray:
    """Per directed link: seconds of payload that one stream of ``phases`` moving ``nbytes`` per
    NPU puts on it (its bytes over the link's payload rate)."""
    rate = sim.topo.link_bw * sim.link_efficiency
    total = np.zeros(sim.topo.num_links)
    for ph in phases:
        total += _phase_load(sim, ph, nbytes).bytes
    return total / rate


def plan_estimate(sim, plan, nbytes):
    """(T_bw, T_fill, lam, flows per piece) of ``plan`` for ``nbytes`` per NPU (module docs)."""
    rate = sim.topo.link_bw * sim.link_efficiency
    total = np.zeros(sim.topo.num_links)
    loads = []
    for frac, phases in plan:
        ls = [_phase_load(sim, ph, nbytes * frac) for ph in phases]
        loads.append(ls)
        for ld in ls:
            total += ld.bytes
    if not loads or not total.any():
        return 0.0, 0.0, 0.0, 0

    def t(ld):
        return ld.serial if ld.serial is not None else float((ld.bytes / rate).max())

    busiest = int(np.argmax(total / rate))
    t_bw = max(float(total[busiest] / rate[busiest]), max(t(ld) for ls in loads for ld in ls))
    serial = max(sum(t(ld) for ld in ls) for ls in loads)
    lam = sum(ld.steps * ld.lat for ls in loads for ld in ls if ld.bytes[busiest] > 0)
    flows = sum(ld.flows for ls in loads for ld in ls)
    return t_bw, max(0.0, serial - t_bw), lam, flows


def auto_chunks(sim, plan, nbytes) -> int:
    """Pieces per stream for ``plan`` moving ``nbytes`` per NPU on ``sim.topo`` (module docs)."""
    t_bw, t_fill, lam, flows = plan_estimate(sim, plan, nbytes)
    if t_fill <= 0 or flows == 0:
        return 1
    top = max(1, min(MAX_AUTO_CHUNKS, FLOW_BUDGET // flows))
    c = np.arange(1, top + 1)
    cost = t_fill / c + (c - 1) * lam
    return int(c[np.argmin(cost)])
