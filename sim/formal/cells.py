"""Formal harness of one FRED cell (R, D or RD) in one fixed mode, for SymbiYosys.

:class:`CellHarness` wraps a cell (:mod:`fred.hdl.cells.microswitches`), drives every input port and every
output ``ready`` from free signals (``AnySeq``: the solver picks any value each cycle, so
sources and sinks may idle and stall at will, and the reset may come at any cycle), fixes the
configuration to one mode, and states the properties of one *group* as Amaranth
``Assert`` statements:

``stream``
    on every output: once ``valid`` is high and ``ready`` low, the next cycle still has
    ``valid`` high and the same ``payload`` (the stream rule; the cell never retracts or
    changes an offered beat).
``conservation``
    for every (flow, output) pair of the mode: the beats accepted at the flow's input minus the
    beats emitted at the output is never negative and never above ``latency + 1`` (the
    datapath's ``latency`` stages plus the output's skid register); a sum's two inputs are taken
    in the same cycle; inputs no flow uses are never ready and outputs no flow feeds never
    valid.
``routing``
    for every (flow, output) pair: a beat the solver picks at the flow's input (any beat, at
    any time) is the next beat emitted after the beats accepted before it, at exactly the
    output(s) the mode names, with its payload unchanged (a pass or broadcast), or the
    lane-wise wrapping sum of the two inputs' payloads (an int32 sum). Together with
    ``conservation`` this says: no beat lost, duplicated, reordered, changed or misrouted.
    Float sums are counted (``conservation``) but their value is not checked here (the
    bit-exact adder is the simulation benches' job).

The groups ``conservation`` and ``routing`` also assert helper invariants on the cell's internal
registers (``cell.probes``: pipeline valid bits and data, skid registers) that make the
properties inductive: the accepted-minus-emitted count equals the valid beats in the datapath
plus the output's skid, and the tracked beat sits at its place in that queue with its value.
"""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.asserts import AnySeq
from amaranth.hdl import Assert, Cat, Const, Elaboratable, Module, Signal

from fred.hdl.cells import build_cell
from fred.hdl.netlist import DMode, RDMode, RMode

__all__ = ["Flow", "cell_flows", "CellHarness", "GROUPS"]

GROUPS = ("stream", "conservation", "routing")


@dataclass(frozen=True)
class Flow:
    """One flow of a cell mode: ``inputs`` (one, or two for a sum) to ``outputs`` (one, or two
    for a broadcast); ``datapath`` is the internal pipeline carrying it (for the invariants)."""

    inputs: tuple
    outputs: tuple
    sum: bool
    datapath: str


_RD_FLOWS = {
    RDMode.PASS: [Flow((0,), (0,), False, "A"), Flow((1,), (1,), False, "B")],
    RDMode.CROSS: [Flow((0,), (1,), False, "A"), Flow((1,), (0,), False, "B")],
    RDMode.BCAST0: [Flow((0,), (0, 1), False, "A")],
    RDMode.BCAST1: [Flow((1,), (0, 1), False, "B")],
    RDMode.SUM0: [Flow((0, 1), (0,), True, "A")],
    RDMode.SUM1: [Flow((0, 1), (1,), True, "A")],
    RDMode.SUM_BOTH: [Flow((0, 1), (0, 1), True, "A")],
}


def cell_flows(kind: str, mode) -> list:
    """The flows of ``mode`` as the SPEC states them (independent of the RTL's decoding)."""
    if kind == "rd":
        return list(_RD_FLOWS[RDMode.parse(mode) if not isinstance(mode, RDMode) else mode])
    if kind == "r":
        assert isinstance(mode, RMode)
        s0, s1 = mode.sel
        if mode.reduce:
            return [Flow((0, 1), (s0,), True, "A")]
        return ([Flow((0,), (s0,), False, "A")] if s0 is not None else []) + \
               ([Flow((1,), (s1,), False, "B")] if s1 is not None else [])
    if kind == "d":
        assert isinstance(mode, DMode)
        s0, s1 = mode.src
        if mode.broadcast:
            return [Flow((s0,), (0, 1), False, "A")]
        return ([Flow((s0,), (0,), False, "A")] if s0 is not None else []) + \
               ([Flow((s1,), (1,), False, "B")] if s1 is not None else [])
    raise ValueError(f"unknown cell kind {kind!r}; known: r, d, rd")


def _lane_sum(a, b, width, lanes):
    return Cat(*[(a[k * width:(k + 1) * width] + b[k * width:(k + 1) * width])[:width]
                 for k in range(lanes)])


class CellHarness(Elaboratable):
    """The cell ``kind`` (``middle``, ``lanes``, ``dtype``, ``fault``) in ``mode`` with the
    assertions of ``group`` (one of :data:`GROUPS`)."""

    def __init__(self, kind, dtype, lanes, mode, group, *, middle=2, fault=None):
        if group not in GROUPS:
            self._MustUse__silence = True
            raise ValueError(f"unknown property group {group!r}; known: {', '.join(GROUPS)}")
        self.kind, self.dtype, self.lanes, self.mode, self.group = kind, dtype, lanes, mode, group
        self.cell = build_cell(kind, middle=middle, lanes=lanes, dtype=dtype, fault=fault)
        self.cell._MustUse__silence = True   # elaborated by hand in elaborate()
        self.flows = cell_flows(kind, mode)

    def elaborate(self, platform):
        m = Module()
        cell = self.cell
        # elaborate here (not as a component) so the probes name this very instance's registers
        m.submodules.dut = cell.elaborate(platform)
        cfg = cell.cfg if isinstance(cell.cfg, Signal) else cell.cfg.as_value()
        m.d.comb += cfg.eq(cell.encode(self.mode, cell.middle))
        W = cell.width * cell.lanes
        for p in cell.i:
            m.d.comb += [p.valid.eq(AnySeq(1)), p.payload.as_value().eq(AnySeq(W))]
        for p in cell.o:
            m.d.comb += p.ready.eq(AnySeq(1))
        if self.group == "stream":
            self._stream(m)
        else:
            self._conservation(m)
            if self.group == "routing":
                for f in self.flows:
                    for j in f.outputs:
                        if not f.sum or cell.dtype.name == "int32":
                            self._track(m, f, j)
        return m

    def _stream(self, m):
        for j, o in enumerate(self.cell.o):
            held = Signal(name=f"o{j}_held")
            last = Signal(len(o.payload.as_value()), name=f"o{j}_last")
            m.d.sync += [held.eq(o.valid & ~o.ready), last.eq(o.payload.as_value())]
            with m.If(held):
                m.d.comb += Assert(o.valid & (o.payload.as_value() == last),
                                   f"o{j} holds valid and payload until taken")

    def _fire(self, p):
        return p.valid & p.ready

    def _diff(self, f, j):
        """Accepted-minus-emitted counter of (flow ``f``, output ``j``), created once."""
        key = (f, j)
        if key not in self._diffs:
            self._diffs[key] = Signal(range(2 * (self.cell.latency + 2)), name=f"diff_o{j}")
        return self._diffs[key]

    def _conservation(self, m):
        cell = self.cell
        self._diffs = {}
        L = cell.latency
        skid = cell.probes["skid"]
        used_in = {k for f in self.flows for k in f.inputs}
        used_out = {j for f in self.flows for j in f.outputs}
        for k, p in enumerate(cell.i):
            if k not in used_in:
                m.d.comb += Assert(~p.ready, f"unused input {k} never ready")
        for j, o in enumerate(cell.o):
            if j not in used_out:
                m.d.comb += [Assert(~o.valid, f"unused output {j} never valid"),
                             Assert(~skid[j][0], f"unused output {j}: skid empty")]
        for f in self.flows:
            fin = self._fire(cell.i[f.inputs[0]])
            if f.sum:
                m.d.comb += Assert(fin == self._fire(cell.i[f.inputs[1]]), "sum inputs join")
            valid = cell.probes[f.datapath][0]
            for j in f.outputs:
                diff = self._diff(f, j)
                fout = self._fire(cell.o[j])
                m.d.comb += [
                    Assert(~(fout & (diff == 0)), f"o{j}: no beat emitted before it is accepted"),
                    Assert(diff <= L + 1, f"o{j}: in flight <= latency + 1"),
                    # helper invariant (inductive strengthening): the count is the queue's size
                    Assert(diff == sum(valid, Const(0, 3)) + skid[j][0],
                           f"o{j}: count = datapath valid bits + skid"),
                ]
                m.d.sync += diff.eq(diff + fin - fout)

    def _track(self, m, f, j):
        """Follow one beat of flow ``f`` (picked by the solver) to output ``j``."""
        cell = self.cell
        W = cell.width * cell.lanes
        diff = self._diff(f, j)
        i0 = cell.i[f.inputs[0]]
        value = (_lane_sum(i0.payload.as_value(), cell.i[f.inputs[1]].payload.as_value(),
                           cell.width, cell.lanes) if f.sum else i0.payload.as_value())
        trk = Signal(name=f"trk_o{j}")
        ahead = Signal(range(2 * (cell.latency + 2)), name=f"ahead_o{j}")
        tv = Signal(W, name=f"tv_o{j}")
        o = cell.o[j]
        fin, fout = self._fire(i0), self._fire(o)
        with m.If(trk):
            with m.If(fout):
                with m.If(ahead == 0):
                    m.d.comb += Assert(o.payload.as_value() == tv,
                                       f"o{j}: tracked beat arrives in order, unchanged")
                    m.d.sync += trk.eq(0)
                with m.Else():
                    m.d.sync += ahead.eq(ahead - 1)
        with m.Elif(fin & AnySeq(1)):
            m.d.sync += [trk.eq(1), ahead.eq(diff - fout), tv.eq(value)]
        # helper invariant: the tracked beat is queued at position ``ahead`` with its value
        valid, delay, add = cell.probes[f.datapath]
        datas = [add.y.as_value()] if f.sum else delay
        entries = [cell.probes["skid"][j]] + [(valid[k], datas[k]) for k in reversed(range(len(valid)))]
        m.d.comb += Assert(~trk | (ahead < diff), f"o{j}: tracked beat is in flight")
        before = Const(0, 3)
        for v, d in entries:
            m.d.comb += Assert(~(trk & v & (before == ahead)) | (d == tv),
                               f"o{j}: tracked beat held unchanged")
            before = before + v
