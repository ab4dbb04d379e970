"""Demux and mux cells for the last port of an odd FRED_m(P) (hdl/fabric/recursive.py).

At an instance with P = 2r + 1 ports the last input enters a :class:`DemuxCell` (1 -> m) whose
output k drives port r of middle copy k, and port r of middle copy k is input k of a
:class:`MuxCell` (m -> 1) that drives the last output. Each has ``latency`` register stages (the
R cell's, resp. the D cell's, so it is one pipeline column like a cell) and a one-beat output
skid, exactly like a cell's datapath (hdl/cells/microswitches.py); one beat per cycle.
"""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from fred.contract.checks import check_int

from .microswitches import stream_signature
from fred.hdl.dtypes import get_dtype
from fred.hdl.netlist import DemuxMode, MuxMode
from fred.hdl.params import check_lanes, check_middle, rejecting

__all__ = ["DemuxCell", "MuxCell", "sel_width"]


def sel_width(m: int) -> int:
    """Width of a demux/mux ``cfg``: values 0 (idle) .. m."""
    return int(m).bit_length()


class _Pipe:
    """``latency`` registers (valid + payload) that advance together, then a one-beat output skid
    register -- the same scheme as a cell's datapath (hdl/cells/microswitches.py): the pipeline advances while
    the skid is empty; a beat leaving it is taken if the output is ready, else parked in the skid.
    No combinational path from the output's ``ready`` to the input's ``ready``."""

    def __init__(self, payload_shape, latency, name):
        if latency < 1:
            raise ValueError(f"latency {latency} must be >= 1")
        self.latency = latency
        self.name = name
        self.shape = payload_shape

    def build(self, mod, in_valid, in_payload, o):
        """Drive stream ``o`` (valid, payload; reads ready); return the pipeline enable."""
        L, n = self.latency, self.name
        valid = [Signal(name=f"{n}_v{k}") for k in range(L)]
        dat = [Signal(self.shape, name=f"{n}_d{k}") for k in range(L)]
        skid_v = Signal(name=f"{n}_skid_v")
        skid_d = Signal(self.shape, name=f"{n}_skid_d")
        en = Signal(name=f"{n}_en")
        offer = Signal(name=f"{n}_offer")
        mod.d.comb += [en.eq(~skid_v), offer.eq(valid[-1] & en)]
        with mod.If(en):
            mod.d.sync += [valid[0].eq(in_valid), dat[0].eq(in_payload)]
            for k in range(1, L):
                mod.d.sync += [valid[k].eq(valid[k - 1]), dat[k].eq(dat[k - 1])]
        mod.d.comb += o.valid.eq(skid_v | offer)
        with mod.If(skid_v):
            mod.d.comb += o.payload.eq(skid_d)
            with mod.If(o.ready):
                mod.d.sync += skid_v.eq(0)
        with mod.Else():
            mod.d.comb += o.payload.eq(dat[-1])
            with mod.If(offer & ~o.ready):
                mod.d.sync += [skid_v.eq(1), skid_d.eq(dat[-1])]
        return en


def _check_mux_params(cell, middle, lanes, dtype, latency):
    """Validate and store the parameters shared by :class:`DemuxCell` and :class:`MuxCell`."""
    with rejecting(cell):
        check_middle(middle)
        check_lanes(lanes)
        check_int("latency", latency, 1)
        cell.middle, cell.lanes, cell.dtype, cell.latency = middle, lanes, get_dtype(dtype), latency


class DemuxCell(wiring.Component):
    """1 -> middle demultiplexer for the last input port of an odd FRED_m(P).

    Ports: ``i: In(S)``, ``o: Out(S).array(middle)``, ``cfg: In(middle.bit_length())`` (0 = idle: input
    not ready, no output valid; k + 1 = forward to output k). ``latency`` register stages (the
    R cell's latency, so the demux is one pipeline column like an R cell) and a one-beat output
    skid, exactly like a cell's datapath; one beat per cycle.
    """

    def __init__(self, middle: int, lanes: int, dtype, latency: int):
        _check_mux_params(self, middle, lanes, dtype, latency)
        S = stream_signature(lanes, dtype)
        super().__init__({"i": In(S), "o": Out(S).array(middle), "cfg": In(sel_width(middle))})

    @staticmethod
    def config_width(middle: int) -> int:
        return sel_width(middle)

    @staticmethod
    def encode(mode: DemuxMode, middle: int) -> int:
        mode = DemuxMode() if mode is None else mode
        mode.validate(middle)
        return 0 if mode.sel is None else mode.sel + 1

    def elaborate(self, platform):
        mod = Module()
        cfg = self.cfg
        active = Signal()
        mod.d.comb += active.eq(cfg != 0)
        # one internal stream; its handshake is steered to the selected output
        inner = stream_signature(self.lanes, self.dtype).flip().create(path=("inner",))
        en = _Pipe(self.i.payload.shape(), self.latency, "p").build(
            mod, self.i.valid & active, self.i.payload, inner)
        mod.d.comb += self.i.ready.eq(en & active)
        for k in range(self.middle):
            sel = Signal(name=f"sel{k}")
            mod.d.comb += [sel.eq(cfg == k + 1), self.o[k].payload.eq(inner.payload),
                           self.o[k].valid.eq(inner.valid & sel)]
            with mod.If(sel):
                mod.d.comb += inner.ready.eq(self.o[k].ready)
        return mod


class MuxCell(wiring.Component):
    """middle -> 1 multiplexer for the last output port of an odd FRED_m(P).

    Ports: ``i: In(S).array(middle)``, ``o: Out(S)``, ``cfg: In(middle.bit_length())`` (0 = idle: no input
    ready, output not valid; k + 1 = take input k). ``latency`` register stages (the D cell's
    latency) and a one-beat output skid; one beat per cycle.
    """

    def __init__(self, middle: int, lanes: int, dtype, latency: int):
        _check_mux_params(self, middle, lanes, dtype, latency)
        S = stream_signature(lanes, dtype)
        super().__init__({"i": In(S).array(middle), "o": Out(S), "cfg": In(sel_width(middle))})

    @staticmethod
    def config_width(middle: int) -> int:
        return sel_width(middle)

    @staticmethod
    def encode(mode: MuxMode, middle: int) -> int:
        mode = MuxMode() if mode is None else mode
        mode.validate(middle)
        return 0 if mode.src is None else mode.src + 1

    def elaborate(self, platform):
        mod = Module()
        cfg = self.cfg
        shape = self.o.payload.shape()
        in_valid = Signal()
        in_payload = Signal(shape)
        sel = [Signal(name=f"sel{k}") for k in range(self.middle)]
        for k in range(self.middle):
            mod.d.comb += sel[k].eq(cfg == k + 1)
            with mod.If(sel[k]):
                mod.d.comb += [in_valid.eq(self.i[k].valid), in_payload.eq(self.i[k].payload)]
        en = _Pipe(shape, self.latency, "p").build(mod, in_valid, in_payload, self.o)
        for k in range(self.middle):
            mod.d.comb += self.i[k].ready.eq(en & sel[k])
        return mod
