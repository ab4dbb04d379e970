"""Routing compiler for FRED_m(P): flows -> every cell's mode.

``route(P, m, flows) -> RoutingResult``. The algorithm is FRED-SPEC §3, recursive, outer stage
first. At an instance with P ports (r = P // 2; odd P has one extra port through demux/mux):

1. every flow present maps to its *child flow*: input port p -> middle port p // 2 (the R cell),
   the odd port 2r -> middle port r (demux); outputs likewise. Two flows that share an R or D
   cell are exactly two flows whose child flows overlap, and must take different middle copies;
2. the conflict graph is coloured with m colours (colour = middle copy) by an exact CSP solver
   (DSatur order, forward checking, colour-symmetry breaking, backtracking): it finds a
   colouring whenever one exists;
3. each middle copy is solved recursively with the child flows of its colour. If a copy fails,
   its minimal failing flow set (a *core*) becomes a constraint at this level ("these flows may
   not all take one middle copy" -- valid because a superset of an unroutable set is
   unroutable, and copies are identical) and the level is re-coloured. This is complete: the
   search ends with a routing, or with a proof that none exists (bounded by a node budget);
4. modes: an R cell whose two inputs belong to one flow reduces (in0 + in1); a D cell whose two
   outputs belong to one flow broadcasts; FRED_m(2) is one RD cell (pass / cross / broadcast /
   sum). Unused cells get the idle mode.

The result is then *checked* by a symbolic walk of the flattened structure (hdl/structure.py):
every output must carry exactly its flow's inputs, each exactly once; that walk also yields each
flow's reduction tree (which cells add, in pipeline order) and its broadcast cells.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from typing import Optional

from fred import FredError

from .flows import Flow, Phase, validate_flows
from .modes import CellAddr, DemuxMode, DMode, MuxMode, RDMode, RMode
from .structure import Fabric, Pin, check_params, child_ports, fabric, stages

__all__ = ["RoutingError", "RoutingResult", "ReduceStep", "route", "route_phases", "routable",
           "idle_mode", "mode_to_json", "mode_str", "NODE_BUDGET"]

#: CSP search nodes allowed per route() call before giving up (keeps every call fast; no case
#: in the tests or the study comes near it).
NODE_BUDGET = 2_000_000


class RoutingError(FredError, ValueError):
    """A flow set that cannot be routed (or that the bounded search gave up on).

    Attributes: ``flows`` (indices into the routed flow list), ``level`` (recursion depth of the
    failing colouring, 0 = top), ``path`` (instance path), ``P``, ``m``.
    """

    def __init__(self, message, flows=(), level=0, path=(), P=None, m=None):
        super().__init__(message)
        self.flows = tuple(flows)
        self.level = level
        self.path = tuple(path)
        self.P = P
        self.m = m


# ---------------------------------------------------------------------------------------------
# modes helpers
# ---------------------------------------------------------------------------------------------
def idle_mode(kind: str):
    return {"R": RMode((None, None)), "D": DMode((None, None)), "RD": RDMode.PASS,
            "DEMUX": DemuxMode(None), "MUX": MuxMode(None)}[kind]


def mode_to_json(mode):
    if isinstance(mode, RMode):
        return {"sel": list(mode.sel), "reduce": mode.reduce}
    if isinstance(mode, DMode):
        return {"src": list(mode.src), "broadcast": mode.broadcast}
    if isinstance(mode, RDMode):
        return mode.name.lower()
    if isinstance(mode, DemuxMode):
        return {"sel": mode.sel}
    if isinstance(mode, MuxMode):
        return {"src": mode.src}
    raise TypeError(f"not a cell mode: {mode!r}")


def mode_str(mode):
    def s(x):
        return "-" if x is None else str(x)
    if isinstance(mode, RMode):
        if mode.reduce:
            return f"R reduce in0+in1 -> mid{s(mode.sel[0])}"
        return f"R in0 -> {'mid' + s(mode.sel[0]) if mode.sel[0] is not None else '-'}, in1 -> {'mid' + s(mode.sel[1]) if mode.sel[1] is not None else '-'}"
    if isinstance(mode, DMode):
        if mode.broadcast:
            return f"D broadcast mid{mode.src[0]} -> out0,out1"
        return f"D out0 <- {'mid' + s(mode.src[0]) if mode.src[0] is not None else '-'}, out1 <- {'mid' + s(mode.src[1]) if mode.src[1] is not None else '-'}"
    if isinstance(mode, RDMode):
        return "RD " + mode.name.lower()
    if isinstance(mode, DemuxMode):
        return f"demux -> {'mid' + str(mode.sel) if mode.sel is not None else '-'}"
    if isinstance(mode, MuxMode):
        return f"mux <- {'mid' + str(mode.src) if mode.src is not None else '-'}"
    return repr(mode)


def _path_str(path):
    return "top" if not path else "mid" + ".".join(str(k) for k in path)


# ---------------------------------------------------------------------------------------------
# the search (path-independent, memoised)
# ---------------------------------------------------------------------------------------------
# A local flow is a pair (ins, outs) of frozensets of the instance's ports. Inside one instance
# the local flows are distinct (their input sets are disjoint and non-empty), so they serve as
# their own identity; this makes sub-problems path-independent and memoisable.

class _Sol:
    __slots__ = ("colour", "children")

    def __init__(self, colour, children):
        self.colour = colour        # dict local flow -> middle copy (None for P == 2)
        self.children = children    # tuple of m (_Sol or None) (None for P == 2)


class _Fail:
    """The flows ``core`` (local to this instance) cannot be routed together here.

    ``edges``: pairs of core flows that share an outer cell; ``subs``: list of
    (copy, child _Fail, {child flow: flow}) -- learned "not all in one copy" constraints used.
    """

    __slots__ = ("core", "P", "edges", "subs")

    def __init__(self, core, P, edges, subs):
        self.core = core
        self.P = P
        self.edges = edges
        self.subs = subs


class _Budget(Exception):
    pass


class _Search:
    def __init__(self, m, budget=NODE_BUDGET):
        self.m = m
        self.memo = {}
        self.nodes = 0
        self.budget = budget

    # -- CSP: colour n variables with m colours -----------------------------------------------
    def colour(self, n, adj, nogoods, order_hint=None):
        """Exact colouring. adj: list of sets; nogoods: list of tuples (not all one colour).

        Returns a list of colours, or None when no colouring exists.
        """
        m = self.m
        for ng in nogoods:
            if len(ng) == 1:
                return None
        ng_of = [[] for _ in range(n)]
        for g in nogoods:
            for v in g:
                ng_of[v].append(g)
        col = [-1] * n
        dom = [set(range(m)) for _ in range(n)]
        deg = [len(adj[v]) + len(ng_of[v]) for v in range(n)]
        if sys.getrecursionlimit() < 4 * n + 200:
            sys.setrecursionlimit(4 * n + 200)

        def pick():
            best, bk = -1, None
            for v in range(n):
                if col[v] < 0:
                    k = (len(dom[v]), -deg[v], v)
                    if bk is None or k < bk:
                        best, bk = v, k
            return best

        def assign(v, c, used):
            """Set col[v] = c with forward checking; return the undo log or None on wipe-out."""
            col[v] = c
            log = []
            for u in adj[v]:
                if col[u] < 0 and c in dom[u]:
                    dom[u].discard(c)
                    log.append((u, c))
                    if not dom[u]:
                        return log, False
            for g in ng_of[v]:
                free = [u for u in g if col[u] < 0]
                if any(col[u] >= 0 and col[u] != c for u in g):
                    continue
                if not free:
                    return log, False  # every member has colour c
                if len(free) == 1:
                    u = free[0]
                    if c in dom[u]:
                        dom[u].discard(c)
                        log.append((u, c))
                        if not dom[u]:
                            return log, False
            return log, True

        def rec(left, used):
            if left == 0:
                return True
            self.nodes += 1
            if self.nodes > self.budget:
                raise _Budget()
            v = pick()
            # colour symmetry: existing colours, or the first unused one
            cands = [c for c in range(min(used + 1, m)) if c in dom[v]]
            for c in cands:
                log, ok = assign(v, c, used)
                if ok and rec(left - 1, max(used, c + 1)):
                    return True
                for u, cc in log:
                    dom[u].add(cc)
                col[v] = -1
            return False

        return list(col) if rec(n, 0) else None

    def colour_core(self, n, adj, nogoods):
        """Minimal subset of variables whose (restricted) CSP is still unsatisfiable."""
        keep = list(range(n))
        i = 0
        while i < len(keep):
            trial = keep[:i] + keep[i + 1:]
            if not self._sub_sat(trial, adj, nogoods):
                keep = trial
            else:
                i += 1
        return keep

    def _sub_sat(self, vs, adj, nogoods):
        idx = {v: i for i, v in enumerate(vs)}
        sadj = [set(idx[u] for u in adj[v] if u in idx) for v in vs]
        sng = [tuple(idx[u] for u in g) for g in nogoods if all(u in idx for u in g)]
        return self.colour(len(vs), sadj, sng) is not None

    # -- one instance -------------------------------------------------------------------------
    def solve(self, P, flows):
        """flows: frozenset of local flows -> _Sol or _Fail (memoised)."""
        key = (P, flows)
        hit = self.memo.get(key)
        if hit is not None:
            return hit
        res = self._solve(P, flows)
        self.memo[key] = res
        return res

    def _solve(self, P, flows):
        m = self.m
        if P == 2 or not flows:
            return _Sol(None, None)
        fl = sorted(flows, key=lambda f: (min(f[0]), sorted(f[0])))
        n = len(fl)
        child = [(frozenset(p // 2 for p in f[0]), frozenset(p // 2 for p in f[1])) for f in fl]
        # conflict graph: child flows that overlap in a middle port (= share an R/D cell)
        adj = [set() for _ in range(n)]
        owner_in, owner_out = {}, {}
        for i, (ci, co) in enumerate(child):
            for side, ports, owner in ((0, ci, owner_in), (1, co, owner_out)):
                for q in ports:
                    if q in owner:
                        j = owner[q]
                        adj[i].add(j)
                        adj[j].add(i)
                    else:
                        owner[q] = i
        nogoods = []
        subs_of = {}   # nogood tuple -> (copy, child fail, child->local map)
        cidx = {c: i for i, c in enumerate(child)}
        cP = child_ports(P)
        while True:
            col = self.colour(n, adj, nogoods)
            if col is None:
                core = self.colour_core(n, adj, nogoods)
                cs = set(core)
                edges = [(fl[i], fl[j]) for i in core for j in adj[i] if j in cs and i < j]
                subs = [subs_of[g] for g in nogoods if all(v in cs for v in g)]
                return _Fail(frozenset(fl[i] for i in core), P, edges, subs)
            children = []
            failed = False
            for k in range(m):
                members = frozenset(child[i] for i in range(n) if col[i] == k)
                if not members:
                    children.append(None)
                    continue
                sub = self.solve(cP, members)
                if isinstance(sub, _Fail):
                    g = tuple(sorted(cidx[c] for c in sub.core))
                    nogoods.append(g)
                    subs_of[g] = (k, sub, {child[i]: fl[i] for i in g})
                    failed = True
                    break
                children.append(sub)
            if not failed:
                return _Sol({fl[i]: col[i] for i in range(n)}, tuple(children))


# ---------------------------------------------------------------------------------------------
# results
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ReduceStep:
    """One add of a flow's reduction tree: ``cell`` computes in0 + in1 = ``left`` + ``right``
    (the sets of fabric input ports already summed into each operand), in pipeline ``column``."""

    cell: CellAddr
    column: int
    left: frozenset
    right: frozenset

    def __str__(self):
        from .flows import format_ports
        return f"{self.cell}: [{format_ports(self.left)}] + [{format_ports(self.right)}]"


@dataclass
class RoutingResult:
    """The compiled routing of one phase (a set of concurrent flows) on FRED_m(P).

    Fields
    ------
    P, m, flows : the problem (``flows`` a tuple of :class:`Flow`, indexed as given)
    cell_modes : dict CellAddr -> mode for *every* cell of the fabric (idle modes for unused ones)
    middle : per flow, dict instance path -> middle copy the flow takes there
    reductions : per flow, list of :class:`ReduceStep` in pipeline order (column, then path)
    trees : per flow, the reduction tree as a nested expression string, e.g. ``((0+1)+2)``
    broadcasts : per flow, the cells that copy the flow's stream to both outputs
    output_flow : dict fabric output port -> flow index (unused ports absent)
    input_flow : dict fabric input port -> flow index
    stages : cells on every input -> output path
    """

    P: int
    m: int
    flows: tuple
    cell_modes: dict
    middle: list
    reductions: list
    trees: list
    broadcasts: list
    output_flow: dict
    input_flow: dict
    stages: int
    fabric: Fabric = field(repr=False, compare=False, default=None)

    # -- views ---------------------------------------------------------------------------------
    def used_cells(self):
        return [c for c in self.fabric.cells if self.cell_modes[c] != idle_mode(self.fabric.kind[c])]

    def to_dict(self):
        fab = self.fabric
        return {
            "ports": self.P,
            "middle": self.m,
            "stages": self.stages,
            "flows": [{"index": i, "flow": str(f), **f.to_json(),
                       "middle_copies": {_path_str(p): k for p, k in sorted(self.middle[i].items())},
                       "reduction_tree": self.trees[i],
                       "reductions": [{"cell": str(s.cell), "column": s.column,
                                       "left": sorted(s.left), "right": sorted(s.right)}
                                      for s in self.reductions[i]],
                       "broadcasts": [str(c) for c in self.broadcasts[i]]}
                      for i, f in enumerate(self.flows)],
            "cells": [{"cell": str(c), "path": list(c.path), "stage": c.stage, "index": c.index,
                       "kind": fab.kind[c], "column": fab.column[c],
                       "mode": mode_to_json(self.cell_modes[c])} for c in fab.cells],
        }

    def to_json(self, indent=None) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    def format(self, show_idle=False) -> str:
        fab = self.fabric
        L = [f"FRED_{self.m}({self.P}): {self.stages} stages, {len(fab.cells)} cells, "
             f"{len(self.flows)} flow{'s' if len(self.flows) != 1 else ''}"]
        for i, f in enumerate(self.flows):
            mids = " ".join(f"{_path_str(p)}:{k}" for p, k in sorted(self.middle[i].items(), key=lambda x: (len(x[0]), x[0])))
            L.append(f"  flow #{i} {f.kind:<10} {str(f):<16} sum {self.trees[i]}")
            if mids:
                L.append(f"           middle copies  {mids}")
        for d in range(fab.depth + 1):
            paths = [p for p in fab.instances if len(p) == d]
            Pd = fab.instances[paths[0]]
            L.append(f"level {d} ({len(paths)} instance{'s' if len(paths) > 1 else ''} of {Pd} ports)")
            idle = 0
            for p in paths:
                for c in fab.cells_of(p):
                    mode = self.cell_modes[c]
                    if mode == idle_mode(fab.kind[c]) and not show_idle:
                        idle += 1
                        continue
                    L.append(f"  {str(c):<16} {mode_str(mode)}{self._marks(c)}")
            if idle:
                L.append(f"  ({idle} idle cell{'s' if idle > 1 else ''} not shown)")
        return "\n".join(L)

    def _marks(self, c):
        tags = []
        for i in range(len(self.flows)):
            if any(s.cell == c for s in self.reductions[i]):
                tags.append(f"REDUCE #{i}")
            if c in self.broadcasts[i]:
                tags.append(f"BCAST #{i}")
        return ("   [" + ", ".join(tags) + "]") if tags else ""


# ---------------------------------------------------------------------------------------------
# public entry points
# ---------------------------------------------------------------------------------------------
def _flow_names(flows, idx):
    return ", ".join(f"#{i} '{flows[i]}'" for i in sorted(idx))


def _explain(fail, path, flows, to_top, m):
    """One-line explanation of a _Fail at instance ``path`` (to_top: local flow -> flow index)."""
    level = len(path)
    core = sorted(to_top[f] for f in fail.core)
    parts = []
    where = f"level {level} ({_path_str(path)}, {fail.P} ports)"
    if fail.subs:
        parts.append(f"at {where} flows {_flow_names(flows, core)} cannot be spread over {m} middle copies")
    else:
        pairs = "; ".join(f"#{to_top[a]}/#{to_top[b]}" for a, b in fail.edges)
        parts.append(f"at {where} flows {_flow_names(flows, core)} share outer microswitches "
                     f"pairwise ({pairs}) and need more than {m} middle copies")
    deepest = (level, path, core)
    for k, sub, cmap in fail.subs:
        txt, d = _explain(sub, path + (k,), flows, {cf: to_top[lf] for cf, lf in cmap.items()}, m)
        parts.append(txt)
        if d[0] > deepest[0]:
            deepest = d
    return "; ".join(parts), deepest


def _fail_error(fail, flows, P, m, to_top):
    txt, (level, path, core) = _explain(fail, (), flows, to_top, m)
    top_core = sorted(to_top[f] for f in fail.core)
    return RoutingError(f"routing conflict on FRED_{m}({P}): {txt}", flows=top_core, level=level,
                        path=path, P=P, m=m)


def _prepare(P, m, flows):
    check_params(P, m, build=False)
    flows = validate_flows(flows, P)
    local = {(f.inputs, f.outputs): i for i, f in enumerate(flows)}
    return flows, local


def _search(P, m, flows, local):
    s = _Search(m)
    try:
        res = s.solve(P, frozenset(local))
    except _Budget:
        raise RoutingError(f"routing search on FRED_{m}({P}) gave up after {s.budget:,} nodes "
                           f"for flows {_flow_names(flows, range(len(flows)))}",
                           flows=range(len(flows)), P=P, m=m) from None
    if isinstance(res, _Fail):
        raise _fail_error(res, flows, P, m, local)
    return res


def routable(P: int, m: int, flows) -> Optional[RoutingError]:
    """Feasibility only (no cell modes): None if the flows route, else the RoutingError."""
    flows, local = _prepare(P, m, flows)
    try:
        _search(P, m, flows, local)
    except RoutingError as e:
        return e
    return None


def _rd_mode(lflows):
    """FRED_m(2): the RD mode for the local flows (ports 0/1)."""
    if not lflows:
        return RDMode.PASS
    if len(lflows) == 1:
        ins, outs = next(iter(lflows))
        if len(ins) == 2:
            return {frozenset({0}): RDMode.SUM0, frozenset({1}): RDMode.SUM1}.get(outs, RDMode.SUM_BOTH)
        (i,) = ins
        if len(outs) == 2:
            return RDMode.BCAST0 if i == 0 else RDMode.BCAST1
        (o,) = outs
        return RDMode.PASS if i == o else RDMode.CROSS
    # two unicasts in opposite ports
    modes = {RDMode.PASS if next(iter(ins)) == next(iter(outs)) else RDMode.CROSS for ins, outs in lflows}
    assert len(modes) == 1, lflows
    return modes.pop()


def _materialise(fab, sol, P, m, flows, local):
    modes = {c: idle_mode(fab.kind[c]) for c in fab.cells}
    middle = [dict() for _ in flows]

    def walk(path, Pi, sol, to_top):
        lflows = list(to_top)
        if Pi == 2:
            modes[CellAddr(path, "rd", 0)] = _rd_mode(lflows)
            return
        if not lflows:
            return
        r, odd = Pi // 2, Pi % 2
        ins_owner, outs_owner = {}, {}
        for f in lflows:
            for p in f[0]:
                ins_owner[p] = f
            for p in f[1]:
                outs_owner[p] = f
        col = sol.colour
        for f in lflows:
            middle[to_top[f]][path] = col[f]
        for j in range(r):
            a, b = ins_owner.get(2 * j), ins_owner.get(2 * j + 1)
            if a is not None and a is b:
                mode = RMode((col[a], None), reduce=True)
            else:
                mode = RMode((None if a is None else col[a], None if b is None else col[b]))
            modes[CellAddr(path, "in", j)] = mode.validate(m)
            a, b = outs_owner.get(2 * j), outs_owner.get(2 * j + 1)
            modes[CellAddr(path, "out", j)] = DMode((None if a is None else col[a],
                                                     None if b is None else col[b])).validate(m)
        if odd:
            f = ins_owner.get(2 * r)
            modes[CellAddr(path, "demux", 0)] = DemuxMode(None if f is None else col[f])
            f = outs_owner.get(2 * r)
            modes[CellAddr(path, "mux", 0)] = MuxMode(None if f is None else col[f])
        for k in range(m):
            sub = {}
            for f in lflows:
                if col[f] == k:
                    cf = (frozenset(p // 2 for p in f[0]), frozenset(p // 2 for p in f[1]))
                    sub[cf] = to_top[f]
            if sub:
                walk(path + (k,), (Pi + 1) // 2, sol.children[k], sub)

    walk((), P, sol, dict(local))
    return modes, middle


def trace(fab: Fabric, cell_modes: dict, sources: dict, add, copy=lambda v: v) -> dict:
    """Walk the flattened fabric in pipeline order, interpreting ``cell_modes``.

    ``sources``: fabric input port -> value (absent = no data); ``add(cell, a, b)`` combines
    in0 and in1 of a reducing cell. Returns fabric output port -> value (None = no data).
    Raises AssertionError when a mode reads an input that carries no data.
    """
    val = {Pin(None, "in", p): v for p, v in sources.items()}

    def get(cell, i):
        return val.get(fab.driver[Pin(cell, "in", i)])

    def need(x, cell, what):
        assert x is not None, f"{cell} {what} carries no data"
        return x

    for c in fab.cells:
        mode, kind = cell_modes[c], fab.kind[c]
        out = {}
        if kind == "R":
            a, b = get(c, 0), get(c, 1)
            if mode.reduce:
                out[mode.sel[0]] = add(c, need(a, c, "in0"), need(b, c, "in1"))
            else:
                for i, x in ((0, a), (1, b)):
                    if mode.sel[i] is not None:
                        out[mode.sel[i]] = need(x, c, f"in{i}")
        elif kind == "D":
            for j in (0, 1):
                if mode.src[j] is not None:
                    out[j] = copy(need(get(c, mode.src[j]), c, f"in{mode.src[j]}"))
        elif kind == "RD":
            a, b = get(c, 0), get(c, 1)
            if mode is RDMode.PASS:
                out = {0: a, 1: b}
            elif mode is RDMode.CROSS:
                out = {0: b, 1: a}
            elif mode is RDMode.BCAST0:
                out = {0: need(a, c, "in0"), 1: copy(a)}
            elif mode is RDMode.BCAST1:
                out = {0: need(b, c, "in1"), 1: copy(b)}
            else:
                s = add(c, need(a, c, "in0"), need(b, c, "in1"))
                out = {RDMode.SUM0: {0: s}, RDMode.SUM1: {1: s}, RDMode.SUM_BOTH: {0: s, 1: copy(s)}}[mode]
        elif kind == "DEMUX":
            if mode.sel is not None:
                out[mode.sel] = need(get(c, 0), c, "in0")
        elif kind == "MUX":
            if mode.src is not None:
                out[0] = need(get(c, mode.src), c, f"in{mode.src}")
        for k, v in out.items():
            if v is not None:
                val[Pin(c, "out", k)] = v
    return {p: val.get(fab.driver[Pin(None, "out", p)]) for p in range(fab.P)}


class _Add:
    __slots__ = ("cell", "a", "b", "leaves")

    def __init__(self, cell, a, b):
        self.cell, self.a, self.b = cell, a, b
        la = a.leaves if isinstance(a, _Add) else frozenset({a})
        lb = b.leaves if isinstance(b, _Add) else frozenset({b})
        assert not (la & lb), f"{cell} adds port(s) {sorted(la & lb)} twice"
        self.leaves = la | lb


def _leaves(e):
    return e.leaves if isinstance(e, _Add) else frozenset({e})


def _expr(e):
    return f"({_expr(e.a)}+{_expr(e.b)})" if isinstance(e, _Add) else str(e)


def _check_and_trees(fab, modes, flows):
    """Symbolic walk: verify every output gets exactly its flow's sum; extract reduction trees."""
    outs = trace(fab, modes, {p: p for f in flows for p in f.inputs}, lambda c, a, b: _Add(c, a, b))
    trees, reductions = [], []
    owner = {}
    for i, f in enumerate(flows):
        for p in f.outputs:
            owner[p] = i
    for p in range(fab.P):
        e = outs[p]
        if p not in owner:
            assert e is None, f"unused output {p} receives data"
            continue
        f = flows[owner[p]]
        assert e is not None and _leaves(e) == f.inputs, \
            f"output {p} of flow '{f}' receives {sorted(_leaves(e)) if e is not None else None}"
    for i, f in enumerate(flows):
        e = outs[min(f.outputs)]
        for p in f.outputs:
            assert _expr(outs[p]) == _expr(e), f"flow '{f}': outputs {min(f.outputs)} and {p} differ"
        steps = []

        def visit(x):
            if isinstance(x, _Add):
                visit(x.a)
                visit(x.b)
                steps.append(ReduceStep(x.cell, fab.column[x.cell], _leaves(x.a), _leaves(x.b)))
        visit(e)
        steps.sort(key=lambda s: (s.column, s.cell.path, s.cell.stage, s.cell.index))
        reductions.append(steps)
        trees.append(_expr(e))
    return trees, reductions


def _broadcast_cells(fab, modes, flows):
    """Per flow, the cells whose two outputs both carry that flow's stream."""
    vals = _pin_values(fab, modes, {Pin(None, "in", p): i for i, f in enumerate(flows) for p in f.inputs})
    out = [[] for _ in flows]
    for c in fab.cells:
        mode, kind = modes[c], fab.kind[c]
        if (kind == "D" and mode.broadcast) or (kind == "RD" and mode.broadcasts):
            i = vals.get(Pin(c, "out", 0))
            if i is not None:
                out[i].append(c)
    return out


def _pin_values(fab, modes, val):
    """Flow index on every source pin (cheap trace with 'add' = keep in0's flow)."""
    val = dict(val)
    for c in fab.cells:
        mode, kind = modes[c], fab.kind[c]

        def g(i):
            return val.get(fab.driver[Pin(c, "in", i)])
        if kind == "R":
            if mode.reduce:
                val[Pin(c, "out", mode.sel[0])] = g(0)
            else:
                for i in (0, 1):
                    if mode.sel[i] is not None:
                        val[Pin(c, "out", mode.sel[i])] = g(i)
        elif kind == "D":
            for j in (0, 1):
                if mode.src[j] is not None:
                    val[Pin(c, "out", j)] = g(mode.src[j])
        elif kind == "RD":
            a, b = g(0), g(1)
            o = {RDMode.PASS: (a, b), RDMode.CROSS: (b, a), RDMode.BCAST0: (a, a), RDMode.BCAST1: (b, b),
                 RDMode.SUM0: (a if a is not None else b, None), RDMode.SUM1: (None, a if a is not None else b),
                 RDMode.SUM_BOTH: (a, a)}[mode]
            for j in (0, 1):
                if o[j] is not None:
                    val[Pin(c, "out", j)] = o[j]
        elif kind == "DEMUX":
            if mode.sel is not None:
                val[Pin(c, "out", mode.sel)] = g(0)
        elif kind == "MUX":
            if mode.src is not None:
                val[Pin(c, "out", 0)] = g(mode.src)
    return val


def route(P: int, m: int, flows) -> RoutingResult:
    """Compile a set of concurrent flows (Flow objects or strings like ``"0,1>2"``) for FRED_m(P).

    Raises ``ValueError`` for bad parameters/flows and :class:`RoutingError` when unroutable.
    """
    flows, local = _prepare(P, m, flows)
    fab = fabric(P, m)
    sol = _search(P, m, flows, local)
    modes, middle = _materialise(fab, sol, P, m, flows, local)
    trees, reductions = _check_and_trees(fab, modes, flows)
    bcast = _broadcast_cells(fab, modes, flows)
    return RoutingResult(
        P=P, m=m, flows=flows, cell_modes=modes, middle=middle, reductions=reductions, trees=trees,
        broadcasts=bcast,
        output_flow={p: i for i, f in enumerate(flows) for p in f.outputs},
        input_flow={p: i for i, f in enumerate(flows) for p in f.inputs},
        stages=stages(P), fabric=fab)


def route_phases(P: int, m: int, phases) -> list:
    """Route every :class:`Phase` of a collective: list of (phase, RoutingResult).

    A RoutingError names the phase."""
    out = []
    for ph in phases:
        if not isinstance(ph, Phase):
            ph = Phase(str(ph), tuple(ph))
        try:
            out.append((ph, route(P, m, ph.flows)))
        except RoutingError as e:
            raise RoutingError(f"phase '{ph.label}': {e}", e.flows, e.level, e.path, e.P, e.m) from None
    return out
