"""Flow-level network simulator with max-min fair link sharing.

Public API (stable; the training model codes against it)::

    from fred.model.network.topology import build_fabric
    from fred.model.collectives.flowsim import Sim

    sim = Sim(build_fabric("fred-d"))           # timing=None: the topology's SwitchTiming
    c = sim.delay(1e-3, label="compute")        # compute or any fixed wait
    t = sim.transfer(0, [1, 2, 3], 1 << 20, deps=[c], label="pp")   # multicast tree
    r = sim.reduce([0, 1, 2, 3], 0, 1 << 20, label="dp")            # in-network reduction tree
    a = sim.collective("all-reduce", range(20), 1 << 30, deps=[c], label="dp")
    res = sim.run()
    res.finish[a], res.start[a], res.makespan, res.link_utilization, res.busy_time_by_label()

Semantics:

* A task (``TaskId``, an int) starts when all its ``deps`` have finished.
* A transfer/reduce is one *flow* over a set of links (a path, a multicast tree or a reduction
  tree; each link carries one copy of the data). A flow moves at one rate on all its links, so a
  reducing switch advances at the pace of its slowest input and a multicast at its slowest
  branch. Concurrent flows share links by max-min fairness, re-solved whenever a flow starts or
  ends. A flow of ``nbytes`` has finished sending ``nbytes`` after its (piecewise constant)
  rate integrates to ``nbytes``; it completes its latency later: the sum of link latencies
  along its longest source->destination path plus ``SwitchTiming.latency_s`` per switch on that
  path. (Links are released when the last byte is sent: a cut-through pipeline.)
* Flows that reduce or multicast inside a switch are capped at
  ``SwitchTiming.collective_bandwidth(link_bw)`` on the links of the tree.
* ``priority=`` (transfer, reduce, collective; default 0) gives strict priority between classes
  on shared links (max-min inside a class), e.g. FRED-SPEC §4's MP > PP > DP.
* On a topology with ``fred_switches`` (the FRED fabrics) each switch runs one phase at a time:
  priority classes time-share it (a class holds the fabric for the time its busiest port there
  needs; lower classes may use the switch's links only for the time left), a flow that starts
  while a lower class streams through a switch on its route pays
  ``SwitchTiming.preemption_delay_s`` and each flow it interrupts ``resume_delay_s`` (both
  measured; the rule is checked against the switch RTL by tests/model/test_model_vs_rtl_overlap.py).
  ``SimResult.preemptions`` / ``resumes`` / ``preemption_latency`` report them.
* Links carry payload at ``topo.link_efficiency`` of their bandwidth (packet headers and ACKs,
  :mod:`fred.model.system.packets`; 1 on generic topologies).
* ``collective(...)`` expands into many flows (see :mod:`fred.model.collectives.api`) and returns
  one TaskId whose start is when the collective began (its deps were met) and whose finish is
  when the whole collective completed.
* Sizes: ``nbytes`` is the per-NPU buffer size (All-Reduce: the buffer each NPU holds; RS: the
  input per NPU; AG: the output per NPU; A2A: each NPU's send buffer; io-broadcast: bytes every
  group member receives; io-reduce: each member's gradient buffer).

Inside (each module one job; :class:`Sim` puts them together):

* :mod:`fred.model.network.taskgraph` -- the tasks, their dependencies and the paths flows take, in flat
  numpy arrays (a 1,024-NPU ring All-Reduce is ~2 million flows); ``delay``, ``transfer`` and
  ``reduce`` are defined there;
* :mod:`fred.model.collectives.api` -- expands a collective into flows on the task graph;
* :mod:`fred.model.network.engine` -- the event engine: runs the graph in time, processing all events
  that fall at the same instant together;
* :mod:`fred.model.network.maxmin` -- the rate solver: max-min fair sharing by progressive filling,
  vectorised over (flow, link) incidence entries, with priority classes and FRED switch
  arbitration;
* :mod:`fred.model.network.simresult` -- :class:`SimResult`.
"""

from __future__ import annotations

from fred.model.collectives import api as collectives
from fred.model.network import engine
from fred.model.network import SimResult
from fred.model.network import TaskGraph, TaskId

__all__ = ["Sim", "SimResult", "TaskId"]


class Sim(TaskGraph):
    """Build a dependency graph of tasks on a :class:`fred.model.network.graph.Topology` (or a fabric
    name or YAML path), then ``run()`` it.

    ``timing`` (a :class:`~fred.model.system.timing.SwitchTiming`) overrides the topology's switch timing.
    Tasks: :meth:`delay`, :meth:`transfer`, :meth:`reduce` (:class:`~fred.model.network.taskgraph.TaskGraph`)
    and :meth:`collective`.
    """

    def collective(self, op: str, group, nbytes: float, deps=(), algorithm=None, chunks=None,
                   label: str = "", priority: int = 0, **options) -> TaskId:
        """Expand collective ``op`` (one of :data:`fred.model.collectives.algorithms.OPS`) over NPU
        ``group`` into flows (:func:`fred.model.collectives.api.expand`).

        ``algorithm=None`` picks the fabric default (mesh: hierarchical 2D with two chunks in
        opposite directions for wafer-wide groups, logical rings for sub-groups; fred-a/c:
        hierarchical ring; fred-b/d: in-switch tree). ``group`` may also be a list of groups
        (all run at once; the returned task completes when all are done). ``chunks=None``: pieces
        chosen from the plan, the size and the hop latencies (:mod:`fred.model.collectives.chunking`);
        ``chunks="plan"``: the algorithm's fixed count (1; 4 for hier-ring/hierarchical; 16 for
        io-broadcast/io-reduce), what the training schedule uses.
        Options: ``root`` (reduce/broadcast, default group[0]), ``io`` (I/O controller node ids
        for io-* ops, default all). ``priority``: see :meth:`transfer` (default 0: all equal).
        """
        if priority:
            return self._with_priority(priority, collectives.expand, self, op, group, nbytes, deps=deps,
                                       algorithm=algorithm, chunks=chunks, label=label, **options)
        return collectives.expand(self, op, group, nbytes, deps=deps, algorithm=algorithm, chunks=chunks,
                                  label=label, **options)

    def run(self) -> SimResult:
        """Simulate every task; returns a :class:`SimResult`."""
        return engine.run(self)
