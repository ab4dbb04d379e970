"""Structural golden model of FRED_m(P): the bit-exact oracle for the fabric RTL.

Plain Python + numpy, no simulator import. :func:`simulate` interprets a routing's
``cell_modes`` *cell by cell* along the flattened structure of hdl/netlist/structure.py -- it never looks
at the flow list -- so it applies exactly the adds the hardware applies, in the same cells and
the same order (``in0 + in1`` of each reducing cell, with :func:`fred.sim.golden.elem.add`).

It is deliberately a second interpreter of the cell modes, independent of the routing compiler's
own one (:func:`fred.hdl.routing.check.trace`): this model is the oracle that checks the
compiler and the RTL, so it shares only the vocabulary (hdl/netlist/modes.py) and the structure
(hdl/netlist/structure.py) with them, never the code that reads a mode -- a misreading in one then
cannot hide in both.

Data: per input port an array of bit patterns shaped ``(n_beats, lanes)`` (any unsigned/int
dtype; results are ``np.uint32``). Output: per output port that receives data, its array. An
input port without data is simply absent; a cell mode that reads a pin carrying no data raises
:class:`GoldenError` (it would be a routing bug).

:func:`check_sums` is the order-independent check: per flow, every output must equal the sum of
the flow's inputs -- exactly for int32 (mod 2**32), and for floating point within the rounding
bound of the float64 sum (``(n-1) u / (1-(n-1) u) * sum|x|`` plus subnormal slack), with the
IEEE special cases (NaN in, or +inf and -inf -> NaN; one infinity sign -> that infinity;
overflow allowed only when the magnitudes can overflow).

:func:`tree_reference` recomputes every flow's output from the compiler's reduction tree
(``RoutingResult.reductions``) -- a second, independent bit-exact reference.
"""

from __future__ import annotations

import numpy as np

from fred.hdl.dtypes import get_dtype
from fred.hdl.netlist import RDMode
from fred.hdl.netlist import Pin, netlist

__all__ = ["GoldenError", "simulate", "simulate_result", "check_sums", "tree_reference", "random_inputs"]


class GoldenError(AssertionError):
    pass


def _add_fn(dtype, add):
    if add is not None:
        return add
    from .elem import add as elem_add
    return lambda a, b: elem_add(dtype, a, b)


def simulate(P, middle, cell_modes, inputs, dtype="int32", add=None) -> dict:
    """Run FRED_middle(P) configured by ``cell_modes`` on ``inputs`` (port -> (n_beats, lanes) bits).

    ``add(a, b)`` overrides the element add (default ``golden_elem.add(dtype, a, b)``).
    Returns output port -> np.uint32 array for every output that receives data.
    """
    net = netlist(P, middle)
    add = _add_fn(dtype, add)
    shape = None
    val = {}
    for p, x in inputs.items():
        if not 0 <= p < P:
            raise GoldenError(f"input port {p} out of range for {P} ports")
        x = np.asarray(x)
        if shape is None:
            shape = x.shape
        elif x.shape != shape:
            raise GoldenError(f"input port {p} has shape {x.shape}, others {shape}")
        val[Pin(None, "in", p)] = x.astype(np.uint32)
    missing = [c for c in net.cells if c not in cell_modes]
    if missing:
        raise GoldenError(f"{len(missing)} cells have no mode, e.g. {missing[0]}")

    for c in net.cells:
        mode, kind = cell_modes[c], net.kind[c]

        def get(i, need=True):
            x = val.get(net.driver[Pin(c, "in", i)])
            if x is None and need:
                raise GoldenError(f"{c} ({kind}, mode {mode}) reads in{i}, which carries no data")
            return x

        out = {}
        if kind == "R":
            if mode.reduce:
                out[mode.sel[0]] = add(get(0), get(1))
            else:
                for i in (0, 1):
                    if mode.sel[i] is not None:
                        out[mode.sel[i]] = get(i)
        elif kind == "D":
            for j in (0, 1):
                if mode.src[j] is not None:
                    out[j] = get(mode.src[j])
        elif kind == "RD":
            if mode is RDMode.PASS:
                out = {0: get(0, False), 1: get(1, False)}
            elif mode is RDMode.CROSS:
                out = {0: get(1, False), 1: get(0, False)}
            elif mode is RDMode.BCAST0:
                out = {0: get(0), 1: get(0)}
            elif mode is RDMode.BCAST1:
                out = {0: get(1), 1: get(1)}
            else:
                s = add(get(0), get(1))
                out = {RDMode.SUM0: {0: s}, RDMode.SUM1: {1: s}, RDMode.SUM_BOTH: {0: s, 1: s}}[mode]
        elif kind == "DEMUX":
            if mode.sel is not None:
                out[mode.sel] = get(0)
        elif kind == "MUX":
            if mode.src is not None:
                out[0] = get(mode.src)
        else:  # pragma: no cover
            raise GoldenError(f"unknown cell kind {kind}")
        for k, x in out.items():
            if x is not None:
                val[Pin(c, "out", k)] = np.asarray(x, dtype=np.uint32)
    res = {}
    for p in range(P):
        x = val.get(net.driver[Pin(None, "out", p)])
        if x is not None:
            res[p] = x
    return res


def simulate_result(result, inputs, dtype="int32", add=None) -> dict:
    """:func:`simulate` with a :class:`fred.hdl.routing.compiler.RoutingResult`'s modes."""
    return simulate(result.P, result.middle, result.cell_modes, inputs, dtype, add)


def tree_reference(result, inputs, dtype="int32", add=None) -> dict:
    """Output port -> array computed from the compiler's reduction trees (same adds, same order)."""
    add = _add_fn(dtype, add)
    out = {}
    for i, f in enumerate(result.flows):
        part = {frozenset({p}): np.asarray(inputs[p]).astype(np.uint32) for p in f.inputs}
        for s in result.reductions[i]:
            part[s.left | s.right] = add(part.pop(s.left), part.pop(s.right))
        if len(part) != 1 or next(iter(part)) != f.inputs:
            raise GoldenError(f"reduction tree of flow '{f}' does not cover its inputs: {list(part)}")
        total = next(iter(part.values()))
        for p in f.outputs:
            out[p] = total
    return out


def random_inputs(P, flows, n_beats, lanes, dtype="int32", rng=None, specials=False) -> dict:
    """Random bit patterns for every input port of ``flows``. Floats are moderate-range values
    (plus specials when asked); int32 is uniform over 32 bits."""
    from .elem import from_values, random_operands

    rng = np.random.default_rng(rng)
    ports = sorted(p for f in flows for p in f.inputs)
    out = {}
    for p in ports:
        if dtype == "int32":
            out[p] = rng.integers(0, 2 ** 32, size=(n_beats, lanes), dtype=np.uint64).astype(np.uint32)
        elif specials:
            out[p] = np.asarray(random_operands(dtype, n_beats * lanes, rng)[0]).reshape(n_beats, lanes).astype(np.uint32)
        else:
            out[p] = from_values(dtype, rng.normal(0, 4, size=(n_beats, lanes)))
    return out


def _float_info(dtype):

    t = get_dtype(dtype)
    u = 2.0 ** -(t.man_bits + 1)
    tiny = 2.0 ** (1 - t.bias - t.man_bits)        # smallest subnormal
    max_finite = float(np.float64((2 - 2.0 ** -t.man_bits) * 2.0 ** t.bias))
    return t, u, tiny, max_finite


def check_sums(flows, inputs, outputs, dtype="int32", all_outputs=None) -> None:
    """Order-independent check of ``outputs`` against the flows' sums; raises GoldenError.

    Also checks that no output outside the flows receives data.
    """
    from .elem import is_nan, to_values

    owned = set()
    for f in flows:
        owned |= set(f.outputs)
    extra = sorted(set(outputs) - owned)
    if extra:
        raise GoldenError(f"output port(s) {extra} receive data but belong to no flow")
    for f in flows:
        xs = [np.asarray(inputs[p]).astype(np.uint32) for p in sorted(f.inputs)]
        n = len(xs)
        if dtype == "int32":
            want = (sum(x.astype(np.int64) for x in xs) & 0xFFFFFFFF).astype(np.uint32)
        for p in sorted(f.outputs):
            if p not in outputs:
                raise GoldenError(f"flow '{f}': output port {p} receives no data")
            got = np.asarray(outputs[p]).astype(np.uint32)
            if got.shape != xs[0].shape:
                raise GoldenError(f"flow '{f}': output {p} shape {got.shape} != input shape {xs[0].shape}")
            if dtype == "int32":
                bad = np.argwhere(got != want)
                if bad.size:
                    i = tuple(bad[0])
                    raise GoldenError(f"flow '{f}': output {p} element {i} is {int(got[i])}, sum is {int(want[i])}")
                continue
            t, u, tiny, max_finite = _float_info(dtype)
            vals = np.stack([to_values(dtype, x).astype(np.float64) for x in xs])
            nan_in = np.any(np.isnan(vals), axis=0)
            pinf = np.any(vals == np.inf, axis=0)
            ninf = np.any(vals == -np.inf, axis=0)
            finite = np.where(np.isfinite(vals), vals, 0.0)
            exact = finite.sum(axis=0)
            mag = np.abs(finite).sum(axis=0)
            g = to_values(dtype, got).astype(np.float64)
            gnan = is_nan(dtype, got)
            expect_nan = nan_in | (pinf & ninf)
            gamma = (n - 1) * u / max(1e-300, 1 - (n - 1) * u)
            tol = gamma * mag + (n - 1) * tiny + 4 * np.finfo(np.float64).eps * mag
            may_overflow = mag * (1 + gamma) >= max_finite
            with np.errstate(invalid="ignore"):
                close = np.isfinite(g) & (np.abs(g - exact) <= tol)
                one_inf = pinf | ninf
                ok_nan = expect_nan & gnan
                # partial sums of large magnitudes may overflow (then inf, or NaN against the
                # opposite infinity); a finite result must still be close
                ok_ovf = ~expect_nan & may_overflow & (np.isinf(g) | gnan | close)
                ok_inf = ~expect_nan & one_inf & (g == np.where(pinf, np.inf, -np.inf))
                ok_fin = ~expect_nan & ~one_inf & close
            ok = ok_nan | ok_inf | ok_fin | ok_ovf
            if not np.all(ok):
                i = tuple(np.argwhere(~ok)[0])
                raise GoldenError(f"flow '{f}': output {p} element {i} is {g[i]!r} (bits {int(got[i]):#x}), "
                                  f"float64 sum of inputs is {exact[i]!r} (tolerance {tol[i]:.3g})")
