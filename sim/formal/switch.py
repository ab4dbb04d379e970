"""Formal harnesses of the switch, for SymbiYosys: one input port
(:class:`fred.hdl.switch.buffers.InputPort`) with its four VC buffers and the credits it returns
(group ``credits``), and the whole switch's phase activation (group ``activation``,
:class:`ActivationHarness`).

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

from amaranth.hdl import Assert, Assume, Cat, Const, Elaboratable, Module, Mux, Signal
from amaranth.lib import data

from fred.contract.packet import DATA_VCS, DEFAULT_PHASE, HEADER_BITS
from fred.hdl.switch import Switch
from fred.hdl.switch import InputPort, OutputPort

__all__ = ["InputPortHarness", "ActivationHarness", "OutputPortHarness", "SWITCH_GROUPS"]

SWITCH_GROUPS = ("credits", "activation", "output-credits")


class InputPortHarness(Elaboratable):
    """An :class:`InputPort` (``flit_bits``, ``depths``, ``max_len``) between a credit-obeying
    sender and a control unit that keeps the read protocol; asserts group ``credits``."""

    def __init__(self, flit_bits=48, depths=(3, 3, 3, 1), max_len=2, group="credits", *,
                 fault=None):
        if fault not in (None, "credit-twice"):
            self._MustUse__silence = True
            raise ValueError(f"unknown input-port fault {fault!r}; known: credit-twice")
        self.fault = fault
        if group != "credits":
            self._MustUse__silence = True
            raise ValueError(f"unknown property group {group!r}; known: credits")
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
                Assume(~discard[v] | (port.head_valid[v] & port.head_done[v] & ~take[v])),
            ]


class ActivationHarness(Elaboratable):
    """The whole switch (``ports`` ports, ideal fabric of 2 int32 lanes = 64-bit flits, so online
    routing is on; VC buffers ``depths``, packets of at most ``max_len`` data flits, ``entries``
    table entries) with every input free: links (any flits, any framing, credits ignored),
    configuration writes, returned credits and output ``ready``. Asserts, every cycle:

    * a table phase's round starts only when every input port of the phase (in the entry the
      round uses) holds a head of that phase and length on the phase's VC;
    * an online round starts only when every input it takes holds a default-index head naming
      the output the round sends it to, with the length the output sends, no two inputs to one
      output;
    * the switch takes a data packet from an input only in a cycle a round starts.

    The property is over the current cycle only (plus one helper invariant on the stored
    online pairs), so k-induction proves it at small k.
    """

    def __init__(self, ports=2, depths=(3, 3, 3, 1), max_len=2, entries=2, *, fault=None):
        self.sw = Switch(ports, 3, 2, "int32", data_depth=depths[0], ctrl_depth=depths[3],
                         max_len=max_len, table_entries=entries, fabric="ideal", counter_bits=4,
                         fault=fault)
        self.P = ports

    def elaborate(self, platform):
        m = Module()
        sw, P = self.sw, self.P
        m.submodules.switch = sw.elaborate(platform)
        for p in range(P):
            m.d.comb += [sw.i[p].valid.eq(AnySeq(1)),
                         sw.i[p].payload.as_value().eq(AnySeq(len(sw.i[p].payload.as_value()))),
                         sw.o[p].ready.eq(AnySeq(1)),
                         sw.credit_i[p].as_value().eq(AnySeq(len(sw.credit_i[p].as_value())))]
        m.d.comb += [sw.cfg.valid.eq(AnySeq(1)),
                     sw.cfg.payload.as_value().eq(AnySeq(len(sw.cfg.payload.as_value())))]
        cu = sw.control
        self._table_rounds(m, cu)
        self._online_rounds(m, cu)
        for p in range(P):
            for v in DATA_VCS:
                m.d.comb += Assert(~cu.take[p][v] | sw.round_start,
                                   f"input {p} VC {v}: taken only when a round starts")
        return m

    def _table_rounds(self, m, cu):
        ports = self.sw._ports
        for p in range(self.P):
            with m.If(cu.start & cu.e_in(cu.sel_entry)[p]):
                here = Const(0)
                for v in DATA_VCS:
                    w = ports[p].head_word[v]
                    here = here | ((cu.sel_vc == v) & ports[p].head_valid[v]
                                   & (w[8:16] == cu.sel_phase) & (w[32:40] == cu.sel_len))
                m.d.comb += Assert(here, f"table round: input {p} holds its packet")

    def _online_rounds(self, m, cu):
        on, ports = cu.on, self.sw._ports
        sel, dst, length = on.r_pairs
        for p in range(self.P):
            with m.If(cu.on_start & sel[p]):
                here = Const(0)
                for v in DATA_VCS:
                    w = ports[p].head_word[v]
                    here = here | ((on.l_vc == v) & ports[p].head_valid[v]
                                   & (w[8:16] == DEFAULT_PHASE)
                                   & (w[HEADER_BITS:HEADER_BITS + 8] == dst[p])
                                   & (w[32:40] == length[p]))
                m.d.comb += Assert(here, f"online round: input {p} holds its packet")
                for q in range(p + 1, self.P):
                    m.d.comb += Assert(~sel[q] | (dst[q] != dst[p]),
                                       f"online round: inputs {p} and {q} to one output")
        # helper invariant (asserted, so proved too): the stored pairs never send two inputs to
        # one output -- the induction step needs it, as the stored round is checked at its start
        for p in range(self.P):
            for q in range(p + 1, self.P):
                m.d.comb += Assert(~(on.l_sel[p] & on.l_sel[q]) | (on.l_dst[p] != on.l_dst[q]),
                                   f"stored online pairs: inputs {p} and {q} to one output")


class OutputPortHarness(Elaboratable):
    """An :class:`~fred.hdl.switch.control.OutputPort` holding ``rounds`` rounds (the one it sends
    and ``rounds - 1`` queued), between a control unit and a receiver that are both free within
    their rules (group ``output-credits``):

    * the **control unit** starts a round (any data VC, 1..``max_len`` data flits, any header)
      only while ``can_queue`` and ``avail[vc] >= len + 1`` (the rule of
      :mod:`fred.hdl.switch.rounds`), queues a control packet (on CTRL) only while
      ``ctrl_space``; headers name their VC, every other header bit is free; the fabric's
      output (valid, data) is free;
    * the **receiver** holds ``init[v]`` flits per VC, ``ready`` is free, and it returns at most
      the credits of the flits it holds (any number per cycle, any delay).

    Properties, every cycle: the receiver's buffer of each VC never overflows (the port never
    sends a flit without a credit, however many rounds are queued: credits never overrun),
    ``credits[v] + held[v] == init[v]``, and the credits the queued rounds reserve never exceed
    the credits held (``avail[v] <= credits[v]``: the reservation never wraps).
    ``fault="no-reservation"`` gives the harness a control unit that starts rounds on
    ``credits`` instead of ``avail`` (forgetting what the queued rounds reserved): the receiver's
    buffer then overflows.
    """

    def __init__(self, rounds=3, init=(3, 3, 3, 1), max_len=2, flit_bits=48, *, fault=None):
        if fault not in (None, "no-reservation"):
            self._MustUse__silence = True
            raise ValueError(f"unknown output-port fault {fault!r}; known: no-reservation")
        self.fault, self.init, self.max_len = fault, tuple(init), max_len
        self.cib = max(self.init).bit_length() + 1
        self.port = OutputPort(flit_bits, self.init, self.cib, rounds=rounds)

    def elaborate(self, platform):
        m = Module()
        m.submodules.port = port = self.port
        lb = max(self.init).bit_length() + 2
        held = [Signal(lb, name=f"rx_held{v}") for v in range(4)]
        vc = Signal(2, name="cu_vc")
        length = Signal(8, name="cu_len")
        start = Signal(name="cu_start")
        m.d.comb += [vc.eq(AnySeq(2)), length.eq(AnySeq(8)), start.eq(AnySeq(1))]
        budget = port.credits if self.fault == "no-reservation" else port.avail
        room = Signal(name="cu_room")
        for v in DATA_VCS:
            with m.If(vc == v):
                m.d.comb += room.eq(budget[v] >= length + 1)
        m.d.comb += [
            Assume(vc != 3), Assume(length >= 1), Assume(length <= self.max_len),
            Assume(~start | (port.can_queue & room)),
            port.start.eq(start), port.start_vc.eq(vc), port.start_len.eq(length),
            port.start_hdr.eq(AnySeq(len(port.start_hdr))),
            port.ctrl_word.eq(AnySeq(len(port.ctrl_word))),
            port.fd.valid.eq(AnySeq(1)), port.fd.payload.eq(AnySeq(len(port.fd.payload))),
            port.o.ready.eq(AnySeq(1)),
        ]
        push = Signal(name="cu_ctrl_push")
        m.d.comb += [push.eq(AnySeq(1)), Assume(~push | port.ctrl_space), port.ctrl_push.eq(push)]
        # the headers name their VC (make_header; a forwarded control packet is on CTRL)
        m.d.comb += [Assume(~start | (port.start_hdr[4:6] == vc)),
                     Assume(~push | (port.ctrl_word[4:6] == 3))]
        # the receiver: which VC each flit is on (a header names it; the rest of a packet follows)
        o = port.o
        in_pkt = Signal(name="rx_in_packet")
        cur = Signal(2, name="rx_vc")
        fvc = Signal(2, name="rx_flit_vc")
        m.d.comb += fvc.eq(Mux(in_pkt, cur, o.payload.data[4:6]))
        fire = o.valid & o.ready
        with m.If(fire):
            m.d.sync += [in_pkt.eq(~o.payload.last), cur.eq(fvc)]
        for v in range(4):
            ret = Signal(self.cib, name=f"rx_ret{v}")
            m.d.comb += [ret.eq(AnySeq(self.cib)), Assume(ret <= held[v]),
                         port.credit_i[v].eq(ret)]
            m.d.sync += held[v].eq(held[v] + (fire & (fvc == v)) - ret)
            m.d.comb += [
                Assert(held[v] <= self.init[v], f"VC {v}: the receiver's buffer never overflows"),
                Assert(port.credits[v] + held[v] == self.init[v], f"VC {v}: credits + held = buffer"),
                Assert(port.avail[v] <= port.credits[v], f"VC {v}: reservations <= credits"),
            ]
        return m
