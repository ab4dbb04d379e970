"""Formal harness of one switch input port (:class:`fred.hdl.switch_buffers.InputPort`): its four
VC buffers and the credits it returns, for SymbiYosys.

:class:`InputPortHarness` puts the port between two free environments:

* a **sender that obeys credits**: it starts with ``depths[v]`` credits per VC, adds the
  credits the port returns each cycle, and sends a flit of VC ``v`` only while it holds a credit
  of ``v``. Packets are framed as the link format says (a header, then ``length`` body flits,
  ``last`` on the final one), but every header field, checksum included, is free: headers the
  port must reject (bad magic, checksum, VC/kind mismatch, length) are part of the search.
  The sender may idle any cycle.
* a **control unit that keeps the port's read protocol**: ``take[v]`` only for a VC whose head
  is offered while nothing streams, at most one ``take`` per cycle, ``discard[v]`` only of an
  offered head that is not taken; the data stream's ``ready`` is free.

Properties (group ``credits``):

* the sender's credits never go negative and never exceed the buffer (``0 <= credits[v] <=
  depths[v]``): the port never returns a credit it does not owe;
* no VC buffer overflows: ``level[v] <= depths[v]``;
* the invariant tying them: ``credits[v] + level[v] == depths[v]``, every flit sent is either
  held in the buffer or its credit is back.

It is not inductive on its own (the induction step finds unreachable states of the port's
packet parser and buffer pointers), so ``make formal`` checks it by bounded model checking.
``fault="credit-twice"`` puts the switch's own mutant (``Switch(fault="credit-twice")``: the
first data-VC credit returned twice) between the port and the sender.
"""

from __future__ import annotations

from amaranth.asserts import AnySeq
from types import SimpleNamespace

from amaranth.hdl import Assert, Assume, Cat, Elaboratable, Module, Mux, Signal
from amaranth.lib import data

from fred.hdl.switch import Switch
from fred.hdl.switch_buffers import InputPort

__all__ = ["InputPortHarness", "SWITCH_GROUPS"]

SWITCH_GROUPS = ("credits",)


class InputPortHarness(Elaboratable):
    """An :class:`InputPort` (``flit_bits``, ``depths``, ``max_len``) between a credit-obeying
    sender and a control unit that keeps the read protocol; asserts group ``credits``."""

    def __init__(self, flit_bits=48, depths=(3, 3, 3, 1), max_len=2, group="credits", *,
                 fault=None):
        if fault not in (None, "credit-twice"):
            self._MustUse__silence = True
            raise ValueError(f"unknown input-port fault {fault!r}; known: credit-twice")
        self.fault = fault
        if group not in SWITCH_GROUPS:
            self._MustUse__silence = True
            raise ValueError(f"unknown property group {group!r}; known: {', '.join(SWITCH_GROUPS)}")
        self.depths, self.group = tuple(depths), group
        self.port = InputPort(flit_bits, depths, max_len)

    def elaborate(self, platform):
        m = Module()
        m.submodules.port = port = self.port
        # the credits the sender sees: the port's, or (fault="credit-twice") the switch's own
        # mutant between port 0 and its sender (Switch._credit_twice)
        self.credit = Signal(data.ArrayLayout(port.credit_bits, 4), name="credit_seen")
        m.d.comb += self.credit.eq(port.credit)
        if self.fault == "credit-twice":
            Switch._credit_twice(SimpleNamespace(credit_o=[self.credit]), m, port)
        self._sender(m, port)
        self._control(m, port)
        for v, depth in enumerate(self.depths):
            level = port.level[v]
            m.d.comb += [
                Assert(self.credits[v] <= depth, f"VC {v}: sender credits <= buffer"),
                Assert(level <= depth, f"VC {v}: buffer never overflows"),
                Assert(self.credits[v] + level == depth, f"VC {v}: credits + level = buffer"),
            ]
        return m

    def _sender(self, m, port):
        flit = Signal(len(port.i.payload.data), name="tx_flit")
        send = Signal(name="tx_send")
        in_pkt = Signal(name="tx_in_packet")          # between a header and its last body flit
        vc_q = Signal(2, name="tx_vc")
        rem = Signal(8, name="tx_rem")                 # body flits still to send
        m.d.comb += [flit.eq(AnySeq(len(flit))), send.eq(AnySeq(1))]
        vc = Signal(2, name="tx_flit_vc")
        m.d.comb += vc.eq(Mux(in_pkt, vc_q, flit[4:6]))
        length = flit[32:40]
        last = Mux(in_pkt, rem == 1, length == 0)
        bits = max(d for d in self.depths).bit_length() + 2
        self.credits = [Signal(bits, name=f"tx_credits{v}", init=d) for v, d in enumerate(self.depths)]
        have = Signal(name="tx_have_credit")
        m.d.comb += have.eq(Cat(*[c != 0 for c in self.credits]).bit_select(vc, 1))
        fire = Signal(name="tx_fire")
        m.d.comb += [
            fire.eq(send & have),
            port.i.valid.eq(fire), port.i.payload.data.eq(flit), port.i.payload.last.eq(last),
        ]
        with m.If(fire):
            with m.If(in_pkt):
                m.d.sync += rem.eq(rem - 1)
                with m.If(rem == 1):
                    m.d.sync += in_pkt.eq(0)
            with m.Elif(length != 0):
                m.d.sync += [in_pkt.eq(1), vc_q.eq(flit[4:6]), rem.eq(length)]
        for v, c in enumerate(self.credits):
            m.d.sync += c.eq(c + self.credit[v] - (fire & (vc == v)))

    def _control(self, m, port):
        take = Signal(4, name="cu_take")
        discard = Signal(4, name="cu_discard")
        m.d.comb += [take.eq(AnySeq(4)), discard.eq(AnySeq(4)), port.d.ready.eq(AnySeq(1)),
                     port.take.eq(take), port.discard.eq(discard)]
        m.d.comb += Assume((take & (take - 1)) == 0)                 # at most one take
        for v in range(4):
            m.d.comb += [
                Assume(~take[v] | (port.head_valid[v] & ~port.busy)),
                Assume(~discard[v] | (port.head_valid[v] & ~take[v])),
            ]
