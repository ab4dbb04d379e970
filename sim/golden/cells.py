"""Golden models of the R, D and RD microswitches: plain Python + numpy, no simulator imports.

A cell in a mode is a set of *routes* (:func:`routes`): each route takes one input (a copy) or
both inputs of a 2-input cell (a sum, ``in0 + in1`` lane by lane with
:func:`fred.sim.golden.elem.add`) and delivers the result to one or two outputs (two = a
broadcast). Beats are arrays of element bit patterns, shape ``(n_beats, lanes)``; every route
keeps the order of its input beats, and a sum pairs the k-th beat of in0 with the k-th of in1.

* :func:`routes` (kind, mode, middle) -> list of :class:`Route`;
* :func:`expected_outputs` (kind, mode, inputs, dtype, middle) -> expected beats per output;
* :func:`used_inputs` / :func:`used_outputs` -- which ports a mode uses.

``kind`` is ``"r"`` (2 inputs, ``middle`` outputs, :class:`~fred.hdl.netlist.modes.RMode`), ``"d"``
(``middle`` inputs, 2 outputs, :class:`~fred.hdl.netlist.modes.DMode`) or ``"rd"`` (2 x 2,
:class:`~fred.hdl.netlist.modes.RDMode`).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from fred.hdl.netlist import DMode, RDMode, RMode
from .elem import add

__all__ = ["Route", "routes", "port_counts", "used_inputs", "used_outputs",
           "expected_outputs", "mode_name"]


class Route(NamedTuple):
    """``inputs``: 1 input index (copy) or ``(0, 1)`` (sum); ``outputs``: 1 or 2 indices."""

    inputs: tuple
    outputs: tuple

    @property
    def is_sum(self) -> bool:
        return len(self.inputs) == 2


def port_counts(kind: str, middle: int = 2) -> tuple:
    """``(inputs, outputs)`` of a cell kind."""
    if kind == "r":
        return 2, middle
    if kind == "d":
        return middle, 2
    if kind == "rd":
        return 2, 2
    raise ValueError(f"unknown cell kind {kind!r}; known: r, d, rd")


_RD_ROUTES = {
    RDMode.PASS: [((0,), (0,)), ((1,), (1,))],
    RDMode.CROSS: [((0,), (1,)), ((1,), (0,))],
    RDMode.BCAST0: [((0,), (0, 1))],
    RDMode.BCAST1: [((1,), (0, 1))],
    RDMode.SUM0: [((0, 1), (0,))],
    RDMode.SUM1: [((0, 1), (1,))],
    RDMode.SUM_BOTH: [((0, 1), (0, 1))],
}


def routes(kind: str, mode, middle: int = 2) -> list:
    """The routes of ``mode`` (validated; one-line ``ValueError`` for a mode the cell lacks)."""
    if kind == "r":
        if not isinstance(mode, RMode):
            raise ValueError(f"R-microswitch mode must be an RMode, got {mode!r}")
        mode.validate(middle)
        s0, s1 = mode.sel
        if mode.reduce:
            return [Route((0, 1), (s0,))]
        return [Route((i,), (s,)) for i, s in enumerate(mode.sel) if s is not None]
    if kind == "d":
        if not isinstance(mode, DMode):
            raise ValueError(f"D-microswitch mode must be a DMode, got {mode!r}")
        mode.validate(middle)
        if mode.broadcast:
            return [Route((mode.src[0],), (0, 1))]
        return [Route((s,), (j,)) for j, s in enumerate(mode.src) if s is not None]
    if kind == "rd":
        if isinstance(mode, (RMode, DMode)):
            raise ValueError(f"RD-microswitch mode must be an RDMode, got {mode!r}")
        return [Route(i, o) for i, o in _RD_ROUTES[RDMode.parse(mode)]]
    raise ValueError(f"unknown cell kind {kind!r}; known: r, d, rd")


def used_inputs(kind, mode, middle=2) -> list:
    return sorted({i for r in routes(kind, mode, middle) for i in r.inputs})


def used_outputs(kind, mode, middle=2) -> list:
    return sorted({o for r in routes(kind, mode, middle) for o in r.outputs})


def mode_name(kind, mode) -> str:
    """Short printable name: ``sel=0,2``, ``sum->1``, ``src=1,1``, ``pass`` ..."""
    def s(v):
        return "-" if v is None else str(v)

    if kind == "r":
        return f"sum->{mode.sel[0]}" if mode.reduce else f"sel={s(mode.sel[0])},{s(mode.sel[1])}"
    if kind == "d":
        return f"src={s(mode.src[0])},{s(mode.src[1])}"
    return RDMode.parse(mode).name.lower()


def _beats(x, lanes):
    if x is None:
        return np.zeros((0, lanes), dtype=np.uint32)
    a = np.asarray(x, dtype=np.uint64)
    if a.ndim == 1:
        a = a.reshape(-1, lanes)
    return a.astype(np.uint32)


def expected_outputs(kind: str, mode, inputs, dtype: str, middle: int = 2, lanes: int | None = None):
    """Expected beats on every output.

    ``inputs``: one entry per input port, each an array ``(n, lanes)`` of bit patterns (or
    ``None`` / empty for an unused port). Returns a list with one ``(n, lanes)`` ``np.uint32``
    array per output (empty for idle outputs). A sum delivers ``min(n0, n1)`` beats (a beat
    without a partner stays in its input).
    """
    n_in, n_out = port_counts(kind, middle)
    if len(inputs) != n_in:
        raise ValueError(f"{kind} cell with m={middle} has {n_in} inputs, got {len(inputs)} streams")
    if lanes is None:
        lanes = next((np.asarray(x).shape[-1] for x in inputs
                      if x is not None and np.asarray(x).ndim == 2), 1)
    ins = [_beats(x, lanes) for x in inputs]
    outs = [np.zeros((0, lanes), dtype=np.uint32) for _ in range(n_out)]
    for r in routes(kind, mode, middle):
        if r.is_sum:
            a, b = ins[r.inputs[0]], ins[r.inputs[1]]
            n = min(len(a), len(b))
            val = add(dtype, a[:n], b[:n]).astype(np.uint32).reshape(n, lanes)
        else:
            val = ins[r.inputs[0]]
        for o in r.outputs:
            outs[o] = val.copy()
    return outs
