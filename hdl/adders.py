"""Element adders: fp16, bf16, fp32 (IEEE-754) and int32 (wrapping), fully pipelined.

(Interim version: int32 only; the floating-point core follows.)
"""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .dtypes import ElemType, get_dtype

__all__ = ["ElementAdder", "VectorAdder", "adder_latency"]

_LATENCY = {"int32": 1, "fp16": 3, "bf16": 3, "fp32": 3}


def adder_latency(dtype) -> int:
    """Pipeline depth in cycles of :class:`ElementAdder` for ``dtype``."""
    return _LATENCY[get_dtype(dtype).name]


class ElementAdder(wiring.Component):
    """``y = a + b`` for one element of type ``dtype``; ``latency`` advancing cycles.

    Ports: ``a``, ``b``: ``In(width)``; ``en``: ``In(1)``; ``y``: ``Out(width)``.
    Every cycle with ``en`` high the pipeline advances one stage (and accepts a new operand
    pair); with ``en`` low it holds. ``y`` shows ``a + b`` of the pair presented ``latency``
    advancing cycles earlier.
    """

    def __init__(self, dtype):
        self.dtype = get_dtype(dtype)
        self.latency = adder_latency(self.dtype)
        w = self.dtype.width
        super().__init__({"a": In(w), "b": In(w), "en": In(1), "y": Out(w)})

    def elaborate(self, platform):
        m = Module()
        if self.dtype.kind == "int":
            with m.If(self.en):
                m.d.sync += self.y.eq(self.a + self.b)
        else:
            raise NotImplementedError("floating-point adder core not yet in this version")
        return m


class VectorAdder(wiring.Component):
    """``lanes`` :class:`ElementAdder` side by side: ``y[i] = a[i] + b[i]`` per beat.

    Ports: ``a``, ``b``: ``In(ArrayLayout(width, lanes))``; ``en``: ``In(1)``;
    ``y``: ``Out(ArrayLayout(width, lanes))``. ``latency`` as the element adder's.
    """

    def __init__(self, dtype, lanes):
        self.dtype = get_dtype(dtype)
        if not isinstance(lanes, int) or isinstance(lanes, bool):
            raise ValueError(f"lanes must be an integer, got {lanes!r}")
        if lanes < 1:
            raise ValueError(f"lanes must be >= 1, got {lanes}")
        self.lanes = lanes
        self.latency = adder_latency(self.dtype)
        lay = data.ArrayLayout(self.dtype.width, lanes)
        super().__init__({"a": In(lay), "b": In(lay), "en": In(1), "y": Out(lay)})

    def elaborate(self, platform):
        m = Module()
        for i in range(self.lanes):
            add = m.submodules[f"lane{i}"] = ElementAdder(self.dtype)
            m.d.comb += [add.a.eq(self.a[i]), add.b.eq(self.b[i]), add.en.eq(self.en),
                         self.y[i].eq(add.y)]
        return m
