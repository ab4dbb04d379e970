"""The routing compiler's symbolic check: walk the flattened structure with the cell modes.

:func:`trace` interprets a set of cell modes cell by cell, in pipeline order, on the flattened
FRED_m(P) of hdl/netlist/structure.py. :func:`check_and_trees` runs it with symbolic values (the input
port numbers, and an add node per reducing cell): every output must carry exactly its flow's
inputs, each exactly once; the walk also yields each flow's reduction tree (which cells add, in
pipeline order). :func:`broadcast_cells` finds the cells that copy a flow to both outputs.

This is the compiler checking its own output. The bit-exact oracle for the RTL,
sim/golden/fabric.py, interprets the same modes on the same structure with its *own* code on
purpose: it must not share an interpreter with the compiler it checks, so that a
misreading of a mode in one does not hide in both.
"""

from __future__ import annotations

from fred.hdl.netlist import RDMode
from .result import ReduceStep
from fred.hdl.netlist import Netlist, Pin

__all__ = ["trace", "check_and_trees", "broadcast_cells"]


def trace(net: Netlist, cell_modes: dict, sources: dict, add, copy=lambda v: v) -> dict:
    """Walk the flattened fabric ``net`` in pipeline order, interpreting ``cell_modes``.

    ``sources``: fabric input port -> value (absent = no data); ``add(cell, a, b)`` combines
    in0 and in1 of a reducing cell. Returns fabric output port -> value (None = no data).
    Raises AssertionError when a mode reads an input that carries no data.
    """
    val = {Pin(None, "in", p): v for p, v in sources.items()}

    def get(cell, i):
        return val.get(net.driver[Pin(cell, "in", i)])

    def need(x, cell, what):
        assert x is not None, f"{cell} {what} carries no data"
        return x

    for c in net.cells:
        mode, kind = cell_modes[c], net.kind[c]
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
    return {p: val.get(net.driver[Pin(None, "out", p)]) for p in range(net.P)}


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


def check_and_trees(net, modes, flows):
    """Symbolic walk: verify every output gets exactly its flow's sum; extract reduction trees."""
    outs = trace(net, modes, {p: p for f in flows for p in f.inputs}, lambda c, a, b: _Add(c, a, b))
    trees, reductions = [], []
    owner = {}
    for i, f in enumerate(flows):
        for p in f.outputs:
            owner[p] = i
    for p in range(net.P):
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
                steps.append(ReduceStep(x.cell, net.column[x.cell], _leaves(x.a), _leaves(x.b)))
        visit(e)
        steps.sort(key=lambda s: (s.column, s.cell.path, s.cell.stage, s.cell.index))
        reductions.append(steps)
        trees.append(_expr(e))
    return trees, reductions


def broadcast_cells(net, modes, flows):
    """Per flow, the cells whose two outputs both carry that flow's stream."""
    vals = _pin_values(net, modes, {Pin(None, "in", p): i for i, f in enumerate(flows) for p in f.inputs})
    out = [[] for _ in flows]
    for c in net.cells:
        mode, kind = modes[c], net.kind[c]
        if (kind == "D" and mode.broadcast) or (kind == "RD" and mode.broadcasts):
            i = vals.get(Pin(c, "out", 0))
            if i is not None:
                out[i].append(c)
    return out


def _pin_values(net, modes, val):
    """Flow index on every source pin (cheap trace with 'add' = keep in0's flow)."""
    val = dict(val)
    for c in net.cells:
        mode, kind = modes[c], net.kind[c]

        def g(i):
            return val.get(net.driver[Pin(c, "in", i)])
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
