"""Routing compiler for FRED_m(P): flows -> every cell's mode.

``route(P, m, flows) -> RoutingResult``. The algorithm is FRED-SPEC §3, recursive, outer stage
first, made exact. At an instance with P ports (r = P // 2; odd P has one extra port through the
demux/mux) every flow maps to its *child flow* (input port p -> middle port p // 2, the odd port
2r -> middle port r; outputs likewise). Two flows that share an R or D cell are exactly two flows
whose child flows overlap; they must take different middle copies (colour the conflict graph with
m colours, colour = middle copy), then each copy is solved recursively.

1. Fast path (:func:`_top_down`): exactly that, with an exact colouring at each instance (DSatur
   order, forward checking, colour-symmetry breaking, backtracking) and no re-colouring above.
2. If some copy fails, the exact search (:class:`_PathCSP`) re-colours the levels above: the
   whole recursion is one CSP over the flows' *paths* (see the comment at the search), complete,
   so it finds a routing whenever one exists, bounded by :data:`NODE_BUDGET`.
3. A failure is explained by a minimal conflicting subset of flows, the first recursion level at
   which that subset is unroutable and an instance there whose colouring fails
   (:class:`RoutingError`).
4. Modes: an R cell whose two inputs belong to one flow reduces (in0 + in1); a D cell whose two
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

from .flows import Phase, validate_flows
from .modes import CellAddr, DemuxMode, DMode, MuxMode, RDMode, RMode
from .structure import Fabric, Pin, check_params, depth, fabric, instance_ports, stages

__all__ = ["RoutingError", "RoutingResult", "ReduceStep", "route", "route_phases", "routable",
           "idle_mode", "mode_to_json", "mode_str", "trace", "NODE_BUDGET", "FAST_BUDGET"]

#: CSP search nodes allowed per route() call before giving up (keeps every call fast; no case
#: in the tests or the study comes near it).
NODE_BUDGET = 2_000_000
#: node budget of the fast top-down pass tried first (falls back to the exact search)
FAST_BUDGET = 100_000


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
# the search
# ---------------------------------------------------------------------------------------------
# Observation that makes the recursion one global problem: input port p of an instance at
# depth d feeds R cell p // 2 (or the demux when p = 2r), which drives middle port p // 2, so a
# flow occupies the ports {p >> d} at depth d *whatever middle copies it took above*. A flow's
# route is therefore just its *path* (c_0, .., c_{D-1}): the middle copy taken at each of the
# D = depth(P) colouring levels. Two flows A, B are in the same depth-d instance iff their paths
# agree on c_0..c_{d-1}; there they share an R or D cell iff their ports >> (d+1) overlap, and
# then need c_d(A) != c_d(B). Overlap at d+1 implies overlap below, so with L(A, B) = the first
# such level the constraint is simply: paths of A and B differ within their first L+1 digits.
# Colouring "instance by instance, outer stage first, re-colouring above when a copy below
# fails" is exactly a backtracking search over these paths. We solve it as one CSP: paths are
# integers (base m), domains are bitmasks over the m**D paths, a constraint forbids one aligned
# block of paths, and the m copies inside every instance are interchangeable (a flow may enter
# a copy already used under its prefix, or the first unused one), which removes the symmetry.

class _Budget(Exception):
    pass


class _PathCSP:
    """Exact path assignment for flows (list of (ins, outs)) on FRED_m(P)."""

    def __init__(self, P, m, flows, budget=NODE_BUDGET):
        self.P, self.m, self.flows = P, m, flows
        self.D = depth(P)
        self.budget = budget
        self.nodes = 0
        n = len(flows)
        # level[a][b] = first level at which a and b share an outer cell (absent: never)
        self.level = [dict() for _ in range(n)]
        for d in range(self.D):
            sh = d + 1
            for side in (0, 1):
                bucket = {}
                for i, f in enumerate(flows):
                    for q in {p >> sh for p in f[side]}:
                        bucket.setdefault(q, []).append(i)
                for members in bucket.values():
                    for x in range(len(members)):
                        a = members[x]
                        la = self.level[a]
                        for y in range(x + 1, len(members)):
                            b = members[y]
                            if b not in la:
                                la[b] = d
                                self.level[b][a] = d

    def components(self, vs):
        vs = set(vs)
        seen, comps = set(), []
        for v in sorted(vs):
            if v in seen:
                continue
            comp, stack = [], [v]
            seen.add(v)
            while stack:
                u = stack.pop()
                comp.append(u)
                for w in self.level[u]:
                    if w in vs and w not in seen:
                        seen.add(w)
                        stack.append(w)
            comps.append(sorted(comp))
        return comps

    def solve(self, vs, Dt=None):
        """Assignment {flow: path int} for the flows ``vs`` using levels < Dt, or None."""
        Dt = self.D if Dt is None else Dt
        out = {}
        for comp in self.components_at(vs, Dt):
            sol = self._solve_comp(comp, Dt)
            if sol is None:
                return None
            out.update(sol)
        return out

    def components_at(self, vs, Dt):
        if Dt == self.D:
            return self.components(vs)
        # restricted to levels < Dt
        vs = set(vs)
        seen, comps = set(), []
        for v in sorted(vs):
            if v in seen:
                continue
            comp, stack = [], [v]
            seen.add(v)
            while stack:
                u = stack.pop()
                comp.append(u)
                for w, lv in self.level[u].items():
                    if lv < Dt and w in vs and w not in seen:
                        seen.add(w)
                        stack.append(w)
            comps.append(sorted(comp))
        return comps

    def _solve_comp(self, comp, Dt):
        m = self.m
        if Dt == 0 or len(comp) == 1:
            return {v: 0 for v in comp}
        N = m ** Dt
        block = [m ** (Dt - 1 - d) for d in range(Dt)]     # paths sharing a (d+1)-prefix
        full = (1 << N) - 1
        inset = set(comp)
        nbr = {v: [(u, lv) for u, lv in self.level[v].items() if u in inset and lv < Dt] for v in comp}
        deg = {v: len(nbr[v]) for v in comp}
        dom = {v: full for v in comp}
        col = {}
        cnt = [dict() for _ in range(Dt)]     # cnt[d][prefix of d+1 digits] = assigned flows
        if sys.getrecursionlimit() < 3 * len(comp) + 200:
            sys.setrecursionlimit(3 * len(comp) + 200)

        def cands(d, prefix, dv):
            """Symmetry-reduced paths allowed by domain dv, in increasing order."""
            used_any = False
            first_new = True
            for c in range(m):
                key = prefix * m + c
                start = key * block[d]
                if cnt[d].get(key):
                    used_any = True
                    if (dv >> start) & ((1 << block[d]) - 1):
                        if d + 1 == Dt:
                            yield key
                        else:
                            yield from cands(d + 1, key, dv)
                elif first_new:
                    first_new = False
                    if (dv >> start) & 1:      # a fresh copy: the rest of the path is all 0s
                        yield start

        def rec(left):
            if not left:
                return True
            self.nodes += 1
            if self.nodes > self.budget:
                raise _Budget()
            v = min(left, key=lambda u: (dom[u].bit_count(), -deg[u], u))
            left.discard(v)
            for q in list(cands(0, 0, dom[v])):
                col[v] = q
                undo = []
                ok = True
                for u, lv in nbr[v]:
                    if u in col:
                        continue
                    b = block[lv]
                    start = (q // b) * b
                    nd = dom[u] & ~(((1 << b) - 1) << start)
                    if nd != dom[u]:
                        undo.append((u, dom[u]))
                        dom[u] = nd
                        if not nd:
                            ok = False
                            break
                if ok:
                    for d in range(Dt):
                        key = q // block[d]
                        cnt[d][key] = cnt[d].get(key, 0) + 1
                    if rec(left):
                        return True
                    for d in range(Dt):
                        cnt[d][q // block[d]] -= 1
                for u, old in undo:
                    dom[u] = old
                del col[v]
            left.add(v)
            return False

        return dict(col) if rec(set(comp)) else None

    def digits(self, q, Dt=None):
        Dt = self.D if Dt is None else Dt
        out = []
        for _ in range(Dt):
            out.append(q % self.m)
            q //= self.m
        return tuple(reversed(out))

    # -- explaining a failure ------------------------------------------------------------------
    def core(self, vs):
        """Minimal unroutable subset of ``vs`` (deletion-based)."""
        comps = [c for c in self.components(vs) if self._solve_comp(c, self.D) is None]
        keep = list(comps[0])
        i = 0
        while i < len(keep):
            trial = keep[:i] + keep[i + 1:]
            if self.solve(trial) is None:
                keep = trial
            else:
                i += 1
        return keep

    def explain(self, core):
        """(level, instance path, pairs) where colouring of the core fails.

        level = first depth d such that the core is already unroutable with levels <= d; path =
        an instance at depth d that cannot be coloured under an assignment valid above it; pairs =
        the core pairs sharing an outer cell there."""
        d = 0
        while self.solve(core, d + 1) is not None:
            d += 1
        above = self.solve(core, d) if d else {v: 0 for v in core}
        groups = {}
        for v in core:
            groups.setdefault(self.digits(above[v], d) if d else (), []).append(v)
        for pref, g in sorted(groups.items()):
            sub = _PathCSP.__new__(_PathCSP)
            sub.__dict__.update(self.__dict__)
            # colour this group at level d alone: constraints of level exactly d
            sub.level = [dict() for _ in self.flows]
            for a in g:
                for b, lv in self.level[a].items():
                    if b in g and lv == d:
                        sub.level[a][b] = 0
            sub.D = 1
            if sub.solve(g, 1) is None:
                pairs = sorted((a, b) for a in g for b, lv in self.level[a].items() if b in g and lv == d and a < b)
                return d, pref, pairs
        return d, (), []  # pragma: no cover - unreachable by construction


def _flow_names(flows, idx):
    return ", ".join(f"#{i} '{flows[i]}'" for i in sorted(idx))


def _prepare(P, m, flows):
    check_params(P, m, build=False)
    flows = validate_flows(flows, P)
    return flows


def _graph_csp(n, adj, m, budget):
    """A one-level _PathCSP: exact m-colouring of a graph (adj: list of sets)."""
    g = _PathCSP.__new__(_PathCSP)
    g.P, g.m, g.flows, g.D, g.budget, g.nodes = None, m, [None] * n, 1, budget, 0
    g.level = [{j: 0 for j in adj[i]} for i in range(n)]
    return g


def _top_down(P, m, flows, budget):
    """Fast path: colour instance by instance, outer first, no re-colouring above (the classic
    recursive Clos/Benes procedure). Returns the paths, or None if some instance fails."""
    paths = [[] for _ in flows]
    spent = [0]

    def rec(Pi, members):
        if Pi == 2 or not members:
            return True
        child = [(i, frozenset(p // 2 for p in ins), frozenset(p // 2 for p in outs)) for i, ins, outs in members]
        n = len(child)
        adj = [set() for _ in range(n)]
        for side in (1, 2):
            owner = {}
            for x, c in enumerate(child):
                for q in c[side]:
                    if q in owner:
                        adj[x].add(owner[q])
                        adj[owner[q]].add(x)
                    else:
                        owner[q] = x
        g = _graph_csp(n, adj, m, budget - spent[0])
        try:
            col = g.solve(range(n))
        finally:
            spent[0] += g.nodes
        if col is None:
            return False
        for x, c in enumerate(child):
            paths[c[0]].append(col[x])
        return all(rec((Pi + 1) // 2, [c for x, c in enumerate(child) if col[x] == k]) for k in range(m))

    try:
        ok = rec(P, [(i, ins, outs) for i, (ins, outs) in enumerate(flows)])
    except _Budget:
        return None
    return [tuple(p) for p in paths] if ok else None


def _search(P, m, flows):
    """flows (validated) -> list of paths (tuples), or raise RoutingError."""
    local = [(f.inputs, f.outputs) for f in flows]
    fast = _top_down(P, m, local, FAST_BUDGET)
    if fast is not None:
        return fast
    csp = _PathCSP(P, m, local)
    try:
        sol = csp.solve(range(len(flows)))
        if sol is not None:
            return [csp.digits(sol[i]) for i in range(len(flows))]
        core = csp.core(range(len(flows)))
        level, path, pairs = csp.explain(core)
    except _Budget:
        shown = _flow_names(flows, range(min(len(flows), 6))) + (" ..." if len(flows) > 6 else "")
        raise RoutingError(f"routing search on FRED_{m}({P}) gave up after {csp.budget:,} nodes "
                           f"(no routing found, none ruled out) for {len(flows)} flows {shown}",
                           flows=range(len(flows)), P=P, m=m) from None
    Pd = instance_ports(P, path)
    shared = ", ".join(f"#{a}/#{b}" for a, b in pairs)
    above = "" if level == 0 else " whichever middle copies they take above it"
    msg = (f"routing conflict on FRED_{m}({P}): flows {_flow_names(flows, core)} cannot be routed "
           f"together: colouring fails at level {level} (instance {_path_str(path)}, {Pd} ports){above}, "
           f"where {shared} share microswitches and {m} middle copies are not enough")
    raise RoutingError(msg, flows=core, level=level, path=path, P=P, m=m)


def routable(P: int, m: int, flows) -> Optional[RoutingError]:
    """Feasibility only (no cell modes): None if the flows route, else the RoutingError."""
    flows = _prepare(P, m, flows)
    try:
        _search(P, m, flows)
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


def _materialise(fab, paths, P, m, flows):
    """Cell modes from the flows' paths: walk the instances top-down."""
    modes = {c: idle_mode(fab.kind[c]) for c in fab.cells}
    middle = [dict() for _ in flows]

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
            middle[i][path] = col[i]
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
    return modes, middle


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
    flows = _prepare(P, m, flows)
    fab = fabric(P, m)
    paths = _search(P, m, flows)
    modes, middle = _materialise(fab, paths, P, m, flows)
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
