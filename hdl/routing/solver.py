"""The conflict-graph search of the routing compiler: flows -> each flow's middle copies.

At an instance of FRED_m(P) with P ports (r = P // 2; odd P has one extra port through the
demux/mux) every flow maps to its *child flow* (input port p -> middle port p // 2, the odd port
2r -> middle port r; outputs likewise). Two flows that share an R or D cell are exactly two flows
whose child flows overlap; they must take different middle copies (colour the conflict graph with
m colours, colour = middle copy), then each copy is solved recursively.

1. Fast path (:func:`top_down`): exactly that, with an exact colouring at each instance (DSatur
   order, forward checking, colour-symmetry breaking, backtracking) and no re-colouring above.
2. If some copy fails, the exact search (:class:`PathCSP`) re-colours the levels above: the
   whole recursion is one CSP over the flows' *paths* (see the comment at the search), complete,
   so it finds a routing whenever one exists, bounded by :data:`NODE_BUDGET`.
3. A failure is explained by a minimal conflicting subset of flows, the first recursion level at
   which that subset is unroutable and an instance there whose colouring fails
   (:class:`RoutingError`).

:func:`search` is the entry point; it returns each flow's *path* (the middle copy taken at each
recursion level), which hdl/routing/compiler.py turns into cell modes.
"""

from __future__ import annotations

import sys

from fred import FredError

from fred.hdl.netlist import path_name
from fred.hdl.netlist import depth, instance_ports

__all__ = ["RoutingError", "NODE_BUDGET", "FAST_BUDGET", "PathCSP", "top_down", "search"]


#: CSP search nodes allowed per route() call before giving up (keeps every call fast; no case
#: in the tests or the study comes near it).
NODE_BUDGET = 2_000_000
#: node budget of the fast top-down pass tried first (falls back to the exact search)
FAST_BUDGET = 100_000


class RoutingError(FredError, ValueError):
    """A flow set that cannot be routed (or that the bounded search gave up on).

    Attributes: ``flows`` (indices into the routed flow list), ``level`` (recursion depth of the
    failing colouring, 0 = top), ``path`` (instance path), ``P``, ``middle``.
    """

    def __init__(self, message, flows=(), level=0, path=(), P=None, middle=None):
        super().__init__(message)
        self.flows = tuple(flows)
        self.level = level
        self.path = tuple(path)
        self.P = P
        self.middle = middle


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


class PathCSP:
    """Exact path assignment for flows (list of (ins, outs)) on FRED_m(P)."""

    def __init__(self, P, middle, flows, budget=NODE_BUDGET):
        self.P, self.middle, self.flows = P, middle, flows
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
        return self.components_at(vs, None)

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
        """Connected components of the conflict graph on ``vs`` (sorted lists), counting only
        conflicts at levels < ``Dt`` (``None`` or ``self.D``: every level)."""
        limit = None if Dt is None or Dt == self.D else Dt
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
                    if (limit is None or lv < limit) and w in vs and w not in seen:
                        seen.add(w)
                        stack.append(w)
            comps.append(sorted(comp))
        return comps

    def _solve_comp(self, comp, Dt):
        m = self.middle
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
            first_new = True
            for c in range(m):
                key = prefix * m + c
                start = key * block[d]
                if cnt[d].get(key):
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
            out.append(q % self.middle)
            q //= self.middle
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
            sub = PathCSP.__new__(PathCSP)
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


def graph_csp(n, adj, middle, budget):
    """A one-level PathCSP: exact colouring of a graph (adj: list of sets) with ``middle``
    colours."""
    g = PathCSP.__new__(PathCSP)
    g.P, g.middle, g.flows, g.D, g.budget, g.nodes = None, middle, [None] * n, 1, budget, 0
    g.level = [{j: 0 for j in adj[i]} for i in range(n)]
    return g


def top_down(P, middle, flows, budget):
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
        g = graph_csp(n, adj, middle, budget - spent[0])
        try:
            col = g.solve(range(n))
        finally:
            spent[0] += g.nodes
        if col is None:
            return False
        for x, c in enumerate(child):
            paths[c[0]].append(col[x])
        return all(rec((Pi + 1) // 2, [c for x, c in enumerate(child) if col[x] == k]) for k in range(middle))

    try:
        ok = rec(P, [(i, ins, outs) for i, (ins, outs) in enumerate(flows)])
    except _Budget:
        return None
    return [tuple(p) for p in paths] if ok else None


def search(P, middle, flows):
    """flows (validated) -> list of paths (tuples), or raise RoutingError."""
    m = middle
    local = [(f.inputs, f.outputs) for f in flows]
    fast = top_down(P, m, local, FAST_BUDGET)
    if fast is not None:
        return fast
    csp = PathCSP(P, m, local)
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
                           flows=range(len(flows)), P=P, middle=m) from None
    Pd = instance_ports(P, path)
    shared = ", ".join(f"#{a}/#{b}" for a, b in pairs)
    above = "" if level == 0 else " whichever middle copies they take above it"
    msg = (f"routing conflict on FRED_{m}({P}): flows {_flow_names(flows, core)} cannot be routed "
           f"together: colouring fails at level {level} (instance {path_name(path)}, {Pd} ports){above}, "
           f"where {shared} share microswitches and {m} middle copies are not enough")
    raise RoutingError(msg, flows=core, level=level, path=path, P=P, middle=m)


