"""Link integrity in the switch RTL: the wire format's CRC, a checking receiver in front of every
input port and a sealing sender behind every output port (docs/switch.md, "Link integrity").

The wire format and the protocol rules are :class:`fred.contract.packet.WireFormat` and
:mod:`fred.contract.link` (plain Python, the reference these modules are tested against):

* :func:`wire_layout` -- ``{data, last, head, probe, vc, fseq, check}``, LSB first;
* :func:`crc_check` -- the standard CRC-32C of a bit vector (:func:`fred.contract.packet.crc32c`:
  reflected, preset and final XOR all ones, the bits as little-endian bytes) as an XOR network:
  one XOR tree per check bit from :func:`fred.contract.packet.crc_columns`, then the constant
  :func:`fred.contract.packet.crc_zero` (the CRC of the all-zero message; the preset, the final
  XOR and the zero padding of the last byte all fold into it);
* :class:`LinkRx` -- combinational, in front of an :class:`~fred.hdl.switch.buffers.InputPort`:
  checks every word, drops bad words, duplicates, probes and orphans, returns the credits of
  lost and orphan flits, and tells the port to discard a broken packet (``restart``);
* :class:`LinkTx` -- behind an output port: marks heads, counts ``fseq`` per VC, appends the
  check (``poison`` inverts it: a flit known bad after forwarding started reaches the receiver
  as a bad flit, which the receiver NACKs), and sends a credit probe for a VC that sent flits
  when the link has been idle ``probe_idle`` cycles.

Latency: none added (both are combinational on the data path).
"""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from fred.contract.packet import CRC_BITS, WireFormat, crc_columns, crc_zero

from .buffers import link_layout

__all__ = ["wire_layout", "crc_check", "LinkRx", "LinkTx"]

_ALL_ONES = (1 << CRC_BITS) - 1


def wire_layout(flit_bits: int, fseq_bits: int):
    """The wire beat (:class:`fred.contract.packet.WireFormat`, same bit order)."""
    return data.StructLayout({"data": flit_bits, "last": 1, "head": 1, "probe": 1, "vc": 2,
                              "fseq": fseq_bits, "check": CRC_BITS})


def crc_check(m, bits):
    """The wire check of the covered bits ``bits`` (the standard CRC-32C of their little-endian
    bytes, :func:`fred.contract.packet.crc32c`): 32 XOR trees and a constant, added to ``m``.

    ``bits`` is first driven onto a signal (``crc_in``) and the taps are slices of that signal:
    tapping an expression (a ``Cat`` of fields, a slice of a view) makes Amaranth re-emit the
    whole expression for every tap, which at a 4,096-bit flit took most of a minute per module."""
    n = len(bits)
    word = Signal(n, name="crc_in")
    check = Signal(CRC_BITS, name="crc_check")
    cols = crc_columns(n)
    out = []
    for j in range(CRC_BITS):
        taps = [word[i] for i in range(n) if cols[i] >> j & 1]
        out.append(Cat(*taps).xor() if taps else Const(0, 1))
    m.d.comb += [word.eq(bits), check.eq(Cat(*out) ^ Const(crc_zero(n), CRC_BITS))]
    return check


class LinkRx(wiring.Component):
    """Checking receiver of one link (the rules of :class:`fred.contract.link.LinkReceiver`).

    ``i``: the wire (always ready); ``o``: checked flits to the input port (its ``ready`` is
    ignored: ports are always ready); ``restart``: the packet in progress is broken (discard
    it; the flit on ``o`` this cycle, if any, starts a new packet); ``credit[v]``: credits to
    return for lost and orphan flits; pulses ``bad`` / ``dup`` and count ``lost`` for the
    switch counters. ``windows[v]``: the input buffer of VC ``v`` (flits). ``check=False``
    (the ``no-crc-check`` mutant, tests only) accepts every word as good.
    """

    def __init__(self, flit_bits: int, fseq_bits: int, windows, check: bool = True):
        self.fmt = WireFormat(flit_bits, fseq_bits)
        self.windows = tuple(int(w) for w in windows)
        self.check = check
        self.cw = (max(self.windows) + 1).bit_length()
        super().__init__({
            "i": In(stream.Signature(wire_layout(flit_bits, fseq_bits))),
            "o": Out(stream.Signature(link_layout(flit_bits))),
            "restart": Out(1),
            "credit": Out(data.ArrayLayout(self.cw, 4)),
            "bad": Out(1), "dup": Out(1), "lost": Out(range(max(self.windows) + 1)),
        })

    def elaborate(self, platform):
        m = Module()
        f = self.fmt
        w = self.i.payload
        word = w.as_value()
        ok = Signal()
        m.d.comb += ok.eq(crc_check(m, word[:f.covered]) == w.check if self.check else 1)
        exp = [Signal(f.fseq_bits, name=f"exp{v}") for v in range(4)]
        in_pkt = Signal()
        cur_vc = Signal(2)
        v = w.vc
        d = Signal(f.fseq_bits)
        m.d.comb += d.eq(w.fseq - Array(exp)[v])
        win = Array([Const(x, range(max(self.windows) + 1)) for x in self.windows])[v]
        good = Signal()
        broken = Signal()
        orphan = Signal()
        m.d.comb += [self.i.ready.eq(1), self.o.payload.data.eq(w.data),
                     self.o.payload.last.eq(w.last),
                     good.eq(self.i.valid & ok & (d <= win)),
                     broken.eq(in_pkt & (w.head | w.probe | (v != cur_vc) | (d != 0))),
                     self.bad.eq(self.i.valid & ~ok),
                     self.dup.eq(self.i.valid & ok & (d > win) & ~w.probe)]
        with m.If(good):
            m.d.comb += [self.lost.eq(d), self.restart.eq(broken)]
            with m.If(w.probe):
                m.d.sync += in_pkt.eq(0)
            with m.Elif(w.head | (in_pkt & ~broken)):
                m.d.comb += self.o.valid.eq(1)
                m.d.sync += [in_pkt.eq(~w.last), cur_vc.eq(v)]
            with m.Else():
                m.d.comb += orphan.eq(1)
                m.d.sync += in_pkt.eq(0)
            for k in range(4):
                with m.If(v == k):
                    m.d.sync += exp[k].eq(w.fseq + ~w.probe)
        for k in range(4):
            m.d.comb += self.credit[k].eq(Mux(good & (v == k), d + orphan, 0))
        return m


class LinkTx(wiring.Component):
    """Sealing sender of one link: ``i`` (link words from an output port) -> ``o`` (the wire).

    ``head`` marks the first flit after a ``last``; the VC of a packet is its header's; ``fseq``
    counts flits per VC; ``check`` covers everything (``poison``: this flit's check is sent
    inverted, i.e. wrong). With ``probe_idle`` > 0, a VC that has sent flits since its last
    probe gets a probe once the link has been idle (no flit offered, between packets) that
    many cycles; the port waits while a probe is offered.
    """

    def __init__(self, flit_bits: int, fseq_bits: int, probe_idle: int = 256):
        self.fmt = WireFormat(flit_bits, fseq_bits)
        if not isinstance(probe_idle, int) or probe_idle < 0:
            raise ValueError(f"probe_idle {probe_idle!r} must be a whole number of cycles >= 0")
        self.probe_idle = probe_idle
        super().__init__({
            "i": In(stream.Signature(link_layout(flit_bits))),
            "o": Out(stream.Signature(wire_layout(flit_bits, fseq_bits))),
            "poison": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        f = self.fmt
        fseq = [Signal(f.fseq_bits, name=f"fseq{v}") for v in range(4)]
        in_pkt = Signal()
        cur_vc = Signal(2)
        probing = Signal()
        pv = Signal(2)
        vc = Signal(2)
        m.d.comb += vc.eq(Mux(in_pkt, cur_vc, self.i.payload.data[4:6]))
        # the covered bits: a flit of the port, or a probe (data 0, probe 1)
        fdata, last, head, probe, fvc, fs = (Signal(f.flit_bits), Signal(), Signal(), Signal(),
                                             Signal(2), Signal(f.fseq_bits))
        with m.If(probing):
            m.d.comb += [self.o.valid.eq(1), probe.eq(1), fvc.eq(pv), fs.eq(Array(fseq)[pv])]
        with m.Else():
            m.d.comb += [self.o.valid.eq(self.i.valid), fdata.eq(self.i.payload.data),
                         last.eq(self.i.payload.last), head.eq(~in_pkt), fvc.eq(vc),
                         fs.eq(Array(fseq)[vc])]
        low = Cat(fdata, last, head, probe, fvc, fs)
        check = crc_check(m, low) ^ Mux(self.poison & ~probing, _ALL_ONES, 0)
        m.d.comb += [self.o.payload.eq(Cat(low, check)), self.i.ready.eq(self.o.ready & ~probing)]
        fire = self.i.valid & self.i.ready
        pend = Signal(4)        # VCs that sent flits since their last probe
        with m.If(fire):
            m.d.sync += [in_pkt.eq(~self.i.payload.last), cur_vc.eq(vc)]
            for k in range(4):
                with m.If(vc == k):
                    m.d.sync += [fseq[k].eq(fseq[k] + 1), pend[k].eq(1)]
        if self.probe_idle:
            self._probes(m, probing, pv, pend, in_pkt)
        return m

    def _probes(self, m, probing, pv, pend, in_pkt):
        idle = Signal(range(self.probe_idle + 1))
        quiet = ~probing & ~in_pkt & ~self.i.valid
        with m.If(probing):
            with m.If(self.o.ready):         # (still idle: the next VC may follow at once)
                m.d.sync += [probing.eq(0), pend.bit_select(pv, 1).eq(0)]
        with m.Elif(quiet):
            with m.If((idle >= self.probe_idle - 1) & (pend != 0)):
                m.d.sync += probing.eq(1)
                for k in reversed(range(4)):
                    with m.If(pend[k]):
                        m.d.sync += pv.eq(k)
            with m.Elif(idle != self.probe_idle):
                m.d.sync += idle.eq(idle + 1)
        with m.Else():
            m.d.sync += idle.eq(0)
