"""Routing compiler for FRED_m(P): flows -> every cell's mode.

``route(P, middle, flows) -> RoutingResult`` for FRED_m(P), m = ``middle``. The algorithm is FRED-SPEC §3, recursive, outer stage
first, made exact, in three parts:

* hdl/routing/solver.py -- the conflict-graph search: each flow's *path* (the middle copy it takes
  at every recursion level), a fast top-down colouring first, then an exact search over paths
  that re-colours the levels above; an unroutable set is explained (:class:`RoutingError`);
* this module -- the public API (:func:`route`, :func:`route_phases`, :func:`routable`) and the
  paths -> modes step: an R cell whose two inputs belong to one flow reduces (in0 + in1); a D
  cell whose two outputs belong to one flow broadcasts; FRED_m(2) is one RD cell (pass / cross /
  broadcast / sum). Unused cells get the idle mode;
* hdl/routing/check.py -- the symbolic check of the result: a walk of the flattened structure
  (hdl/netlist/structure.py) in which every output must carry exactly its flow's inputs, each exactly
  once; the walk also yields each flow's reduction tree (which cells add, in pipeline order) and
  its broadcast cells;

and hdl/routing/result.py holds :class:`RoutingResult` with its JSON and text forms.
"""

from __future__ import annotations

from typing import Optional

from fred.hdl.netlist import Phase, validate_flows
from fred.hdl.netlist import CellAddr, DemuxMode, DMode, MuxMode, RDMode, RMode, idle_mode
from .check import broadcast_cells, check_and_trees, trace
from .result import ReduceStep, RoutingResult
from .solver import FAST_BUDGET, NODE_BUDGET, RoutingError, search
from fred.hdl.netlist import check_params, netlist, stages

__all__ = ["RoutingError", "RoutingResult", "ReduceStep", "route", "route_phases", "routable",
           "trace", "NODE_BUDGET", "FAST_BUDGET"]


def _prepare(P, middle, flows):
    check_params(P, middle, build=False)
    flows = validate_flows(flows, P)
    return flows


def routable(P: int, middle: int, flows) -> Optional[RoutingError]:
    """Feasibility only (no cell modes): None if the flows route, else the RoutingError."""
    flows = _prepare(P, middle, flows)
    try:
        search(P, middle, flows)
    except RoutingError as e:
        return e
    return None


def _rd_mode(lflows):
    """FRED_m(2): the RD mode for the local flows (ports 0/1)."""
    if not lflows:
        return RDMode.PASS
    if len(lflows) == 1:
        ins, outs = lflows[0]
        if len(ins) == 2:
            return {frozenset({0}): RDMode.SUM0, frozenset({1}): RDMode.SUM1}.get(outs, RDMode.SUM_BOTH)
        (i,) = ins
        if len(outs) == 2:
            return RDMode.BCAST0 if i == 0 else RDMode.BCAST1
        (o,) = outs
        return RDMode.PASS if i == o else RDMode.CROSS
    # two unicasts on opposite ports
    modes = {RDMode.PASS if next(iter(ins)) == next(iter(outs)) else RDMode.CROSS for ins, outs in lflows}
    assert len(modes) == 1, lflows
    return modes.pop()


def _materialise(net, paths, P, middle, flows):
    """Cell modes and each flow's middle copies from the flows' paths: walk the instances
    top-down."""
    m = middle
    modes = {c: idle_mode(net.kind[c]) for c in net.cells}
    copies = [dict() for _ in flows]

    def walk(path, Pi, members):
        # members: list of (flow index, ins, outs) local to this instance
        d = len(path)
        if Pi == 2:
            modes[CellAddr(path, "rd", 0)] = _rd_mode([(a, b) for _, a, b in members])
            return
        r, odd = Pi // 2, Pi % 2
        ins_owner, outs_owner = {}, {}
        col = {}
        for i, ins, outs in members:
            col[i] = paths[i][d]
            copies[i][path] = col[i]
            for p in ins:
                ins_owner[p] = i
            for p in outs:
                outs_owner[p] = i
        for j in range(r):
            a, b = ins_owner.get(2 * j), ins_owner.get(2 * j + 1)
            if a is not None and a == b:
                mode = RMode((col[a], None), reduce=True)
            else:
                mode = RMode((None if a is None else col[a], None if b is None else col[b]))
            modes[CellAddr(path, "in", j)] = mode.validate(m)
            a, b = outs_owner.get(2 * j), outs_owner.get(2 * j + 1)
            modes[CellAddr(path, "out", j)] = DMode((None if a is None else col[a],
                                                     None if b is None else col[b])).validate(m)
        if odd:
            i = ins_owner.get(2 * r)
            modes[CellAddr(path, "demux", 0)] = DemuxMode(None if i is None else col[i]).validate(m)
            i = outs_owner.get(2 * r)
            modes[CellAddr(path, "mux", 0)] = MuxMode(None if i is None else col[i]).validate(m)
        for k in range(m):
            sub = [(i, frozenset(p // 2 for p in ins), frozenset(p // 2 for p in outs))
                   for i, ins, outs in members if col[i] == k]
            if sub:
                walk(path + (k,), (Pi + 1) // 2, sub)

    walk((), P, [(i, f.inputs, f.outputs) for i, f in enumerate(flows)])
    return modes, copies


def route(P: int, middle: int, flows) -> RoutingResult:
    """Compile a set of concurrent flows (Flow objects or strings like ``"0,1>2"``) for FRED_m(P).

    Raises ``ValueError`` for bad parameters/flows and :class:`RoutingError` when unroutable.
    """
    flows = _prepare(P, middle, flows)
    net = netlist(P, middle)
    paths = search(P, middle, flows)
    modes, copies = _materialise(net, paths, P, middle, flows)
    trees, reductions = check_and_trees(net, modes, flows)
    bcast = broadcast_cells(net, modes, flows)
    return RoutingResult(
        P=P, middle=middle, flows=flows, cell_modes=modes, copies=copies, reductions=reductions,
        trees=trees, broadcasts=bcast,
        output_flow={p: i for i, f in enumerate(flows) for p in f.outputs},
        input_flow={p: i for i, f in enumerate(flows) for p in f.inputs},
        stages=stages(P), netlist=net)


def route_phases(P: int, middle: int, phases) -> list:
    """Route every :class:`Phase` of a collective: list of (phase, RoutingResult).

    A RoutingError names the phase."""
    out = []
    for ph in phases:
        if not isinstance(ph, Phase):
            ph = Phase(str(ph), tuple(ph))
        try:
            out.append((ph, route(P, middle, ph.flows)))
        except RoutingError as e:
            raise RoutingError(f"phase '{ph.label}': {e}", e.flows, e.level, e.path, e.P,
                               e.middle) from None
    return out
