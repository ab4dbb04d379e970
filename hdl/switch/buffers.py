"""Input side of the FRED switch: per-VC packet buffers, header check, credits, cut-through.

:class:`VCBuffer` is a FIFO of flits: every written flit is readable at once (cut-through), and
the packet being written (the *open* packet) can still be *aborted* -- it disappears without a
trace -- as long as none of it has been read. :class:`InputPort` is one switch input: it parses
the link (:mod:`fred.contract.packet`), checks every header, writes packets into the buffer of
their virtual channel (VC), returns credits to the sender and offers the head packet of every VC
to the control unit.

Contracts and latencies (all cycles of the ``sync`` domain):

* a packet's head becomes visible (``head_valid``) the cycle after its *header* flit was
  accepted (virtual cut-through: the sender holds credits for the whole packet, so the rest
  follows); ``head_done`` says the whole head packet is in the buffer;
* ``take[v]`` pops the head header of VC ``v`` in that cycle; for a data VC the port then streams
  the packet's ``length`` data flits on ``d`` (first flit offered the next cycle, one per cycle
  while it has arrived and ``d.ready``), ``busy`` stays high until the last one is taken;
* ``discard[v]`` drops the whole head packet of VC ``v`` in one cycle (only when ``head_done``);
* a packet whose framing breaks (``last`` early or missing) or that overflows its buffer (the
  sender ignored credits) is dropped and counted (``err``) when it has not been taken; a taken
  one cannot be recalled: it is completed with zero flits (``trunc`` pulses) and counted;
* ``credit[v]`` (per cycle) = flits of VC ``v`` freed this cycle: popped, discarded, aborted or
  dropped on arrival. A sender starts with ``depths[v]`` credits.
"""

from __future__ import annotations

from amaranth.hdl import Const, Module, Mux, Signal
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from fred.contract.packet import DEFAULT_PHASE, HEADER_BITS, MAGIC, ONLINE_HEADER_BITS, VC_CTRL

__all__ = ["link_layout", "VCBuffer", "InputPort", "header_ok", "header_bits"]


def link_layout(flit_bits: int):
    """The link beat: ``{"data": flit_bits, "last": 1}`` (data in the low bits)."""
    return data.StructLayout({"data": flit_bits, "last": 1})


def header_bits(flit_bits: int) -> int:
    """Header-word width inside the switch: 56 (with the default index's port byte) when the
    flit has room for it, else 48."""
    return ONLINE_HEADER_BITS if flit_bits >= ONLINE_HEADER_BITS else HEADER_BITS


def header_ok(flit, max_len: int):
    """Amaranth expression: ``flit`` (>= 48 bits) is a well-formed header (see packet.py)."""
    check = Const(0x5A, 8)
    for k in range(5):
        check = check ^ flit[8 * k:8 * k + 8]
    vc, kind, phase, length = flit[4:6], flit[6:8], flit[8:16], flit[32:40]
    if len(flit) >= ONLINE_HEADER_BITS:
        check = check ^ flit[HEADER_BITS:ONLINE_HEADER_BITS]
    ok = (flit[0:4] == MAGIC) & (flit[40:48] == check)
    if len(flit) > ONLINE_HEADER_BITS:
        ok &= flit[ONLINE_HEADER_BITS:] == 0
    if len(flit) >= ONLINE_HEADER_BITS:
        ok &= (flit[HEADER_BITS:ONLINE_HEADER_BITS] == 0) | (phase == DEFAULT_PHASE)
    elif len(flit) > HEADER_BITS:
        ok &= flit[HEADER_BITS:] == 0
    is_data = kind == 0
    ok &= kind != 3
    ok &= is_data == (vc != VC_CTRL)
    ok &= Mux(is_data, (length >= 1) & (length <= max_len), length == 0)
    return ok


def _inc(m, ptr, n, depth):
    s = ptr + n
    return Mux(s >= depth, s - depth, s)


class VCBuffer(wiring.Component):
    """FIFO of ``depth`` flits of ``width`` bits; the packet being written can be aborted.

    Write: ``w_en`` writes ``w_data`` (``w_space`` must be high); the flit is readable the next
    cycle. ``w_close`` ends the open packet (a flit written in the same cycle is its last);
    ``w_abort`` forgets the open packet (only allowed while none of it has been read); ``w_cut``
    ends the open packet *before* a flit written in the same cycle. With ``w_abort`` or ``w_cut``
    a flit written in the same cycle starts the next packet (closed at once with ``w_close``):
    a link receiver found the packet in progress broken when the next one's header arrived. Read: ``r_data`` is the oldest flit (combinational read),
    ``r_avail`` the number of flits held, ``r_closed`` = the head flit belongs to a closed
    packet; ``r_pop`` removes one flit, ``skip_en`` removes ``skip_n`` flits of closed packets.
    ``open_left`` = flits of the open packet still held after this cycle's reads. ``freed`` =
    flits removed this cycle (popped, skipped, aborted); ``level`` = all flits held.
    """

    def __init__(self, width: int, depth: int):
        if depth < 1:
            raise ValueError(f"buffer depth {depth} must be at least 1 flit")
        self.width, self.depth = width, depth
        super().__init__({
            "w_en": In(1), "w_data": In(width), "w_close": In(1), "w_abort": In(1),
            "w_cut": In(1), "w_space": Out(1),
            "r_data": Out(width), "r_avail": Out(range(depth + 1)), "r_closed": Out(1),
            "r_pop": In(1), "skip_en": In(1), "skip_n": In(range(depth + 1)),
            "open_left": Out(range(depth + 1)),
            "freed": Out(range(2 * depth + 2)), "level": Out(range(depth + 1)),
        })

    def elaborate(self, platform):
        m = Module()
        D = self.depth
        m.submodules.mem = mem = memory.Memory(shape=self.width, depth=D, init=[])
        wp_ = mem.write_port()
        rp_ = mem.read_port(domain="comb")
        rp = Signal(range(D))
        wp = Signal(range(D))
        ps = Signal(range(D))                 # where the open packet starts
        count_all = Signal(range(D + 1))
        count_c = Signal(range(D + 1))        # flits of closed packets (always the oldest)
        open_n = Signal(range(D + 1))
        m.d.comb += open_n.eq(count_all - count_c)

        pop_n = Signal(range(D + 1))
        m.d.comb += pop_n.eq(Mux(self.r_pop, 1, Mux(self.skip_en, self.skip_n, 0)))
        c_left = Signal(range(D + 1))         # closed flits after this cycle's reads
        m.d.comb += c_left.eq(Mux(count_c >= pop_n, count_c - pop_n, 0))
        write = Signal()
        m.d.comb += write.eq(self.w_en)
        base = Signal(range(D))               # where this cycle's flit goes (after an abort: ps)
        m.d.comb += base.eq(Mux(self.w_abort, ps, wp))
        m.d.comb += [
            wp_.addr.eq(base), wp_.data.eq(self.w_data), wp_.en.eq(write),
            rp_.addr.eq(rp), self.r_data.eq(rp_.data),
            self.r_avail.eq(count_all), self.r_closed.eq(count_c != 0), self.level.eq(count_all),
            self.w_space.eq(count_all < D),
            self.open_left.eq(open_n - Mux(count_c == 0, pop_n, 0)),
            self.freed.eq(pop_n + Mux(self.w_abort, open_n, 0)),
        ]
        wp_next = Signal(range(D))
        m.d.comb += wp_next.eq(Mux(write, _inc(m, base, 1, D), base))
        m.d.sync += rp.eq(_inc(m, rp, pop_n, D))
        with m.If(self.w_abort):
            m.d.sync += [wp.eq(wp_next), count_all.eq(c_left + write)]
            with m.If(self.w_close):
                m.d.sync += [ps.eq(wp_next), count_c.eq(c_left + write)]
            with m.Else():
                m.d.sync += count_c.eq(c_left)
        with m.Elif(self.w_cut):              # close the open packet, this flit starts the next
            m.d.sync += [wp.eq(wp_next), count_all.eq(count_all + write - pop_n)]
            with m.If(self.w_close):
                m.d.sync += [ps.eq(wp_next), count_c.eq(count_all + write - pop_n)]
            with m.Else():
                m.d.sync += [ps.eq(wp), count_c.eq(count_all - pop_n)]
        with m.Else():
            m.d.sync += [wp.eq(wp_next), count_all.eq(count_all + write - pop_n)]
            with m.If(self.w_close):
                m.d.sync += [ps.eq(wp_next), count_c.eq(count_all + write - pop_n)]
            with m.Else():
                m.d.sync += count_c.eq(c_left)
        return m


class InputPort(wiring.Component):
    """One switch input port: link parser, one :class:`VCBuffer` per VC, credit return.

    Parameters: ``flit_bits``; ``depths`` = buffer sizes in flits for VCs (MP, DP, PP, CTRL);
    ``max_len`` = longest accepted data packet (data flits; header + data must fit the smallest
    data-VC buffer). Ports: ``i`` (link in; ``ready`` is always 1 -- flow control is by
    credits), ``credit`` (per-VC count of credits returned this cycle), ``head_valid`` /
    ``head_word`` (per VC: a packet's header is at the head and not being streamed; the word is
    :func:`header_bits` wide), ``head_done`` (per VC: that whole packet has arrived), ``take`` /
    ``discard`` (per-VC pulses from the control unit), ``d`` (data flits of the taken packet),
    ``busy``, ``err`` (pulse: one malformed, mis-framed or overflowing packet dropped or
    truncated), ``trunc`` (pulse: the packet being streamed was truncated and is completed with
    zero flits), ``level`` / ``peak`` (buffer occupancy per VC, current and highest since reset),
    ``restart`` (from :class:`fred.hdl.switch.linkcheck.LinkRx`: the packet in progress lost flits on
    the link; it is dropped, or truncated when already taken, without counting it in ``err``;
    a flit arriving in that cycle starts a packet).
    """

    def __init__(self, flit_bits: int, depths, max_len: int):
        depths = tuple(int(d) for d in depths)
        if len(depths) != 4:
            raise ValueError(f"depths {depths!r} must give 4 VC buffer sizes (MP, DP, PP, CTRL)")
        if flit_bits < HEADER_BITS:
            raise ValueError(f"flit width {flit_bits} bits is below the {HEADER_BITS}-bit header")
        if not 1 <= max_len <= min(depths[:3]) - 1 or max_len > 255:
            raise ValueError(f"max packet length {max_len} flits must be 1..{min(min(depths[:3]) - 1, 255)} "
                             f"(header + data must fit a data-VC buffer of {min(depths[:3])} flits)")
        self.flit_bits, self.depths, self.max_len = flit_bits, depths, max_len
        self.hdr_bits = header_bits(flit_bits)
        dmax = max(depths)
        self.credit_bits = (2 * dmax + 3).bit_length()
        lw = (dmax).bit_length()
        super().__init__({
            "i": In(stream.Signature(link_layout(flit_bits))),
            "credit": Out(data.ArrayLayout(self.credit_bits, 4)),
            "head_valid": Out(4), "head_done": Out(4),
            "head_word": Out(data.ArrayLayout(self.hdr_bits, 4)),
            "take": In(4), "discard": In(4),
            "d": Out(stream.Signature(flit_bits)),
            "busy": Out(1), "err": Out(1), "trunc": Out(1), "restart": In(1),
            "level": Out(data.ArrayLayout(lw, 4)),
            "peak": Out(data.ArrayLayout(lw, 4)),
        })

    def elaborate(self, platform):
        m = Module()
        bufs = []
        for v in range(4):
            b = VCBuffer(self.flit_bits, self.depths[v])
            m.submodules[f"vc{v}"] = b
            bufs.append(b)
        self._stream_regs()
        drop, drop_vc = self._receive(m, bufs)
        self._read_side(m, bufs)
        self._credits(m, bufs, drop, drop_vc)
        return m

    def _stream_regs(self):
        self.s_active = Signal()       # a taken packet is being streamed on d
        self.s_vc = Signal(2)
        self.s_rem = Signal(8)
        self.pad = Signal()            # the streamed packet was truncated: zeros after pad_left
        self.pad_left = Signal(range(max(self.depths) + 1))

    def _receive(self, m, bufs):
        """Write side: parse the link, check each header and framing, write packets into their
        VC's buffer (readable at once), drop bad ones (abort if not taken, else truncate).
        Returns ``(drop, drop_vc)``: a flit dropped this cycle, whose credit goes back on
        ``drop_vc``."""
        # long: one parser state machine with its three error paths
        flit = self.i.payload.data
        last = self.i.payload.last
        fire = self.i.valid
        m.d.comb += self.i.ready.eq(1)
        vc = flit[4:6]
        length = flit[32:40]
        hdr_ok = Signal()
        m.d.comb += hdr_ok.eq(header_ok(flit, self.max_len))

        cur_vc = Signal(2)
        rem = Signal(8)
        taken = Signal()         # the open packet's header has been taken (it streams)
        drop = Signal()          # this flit is dropped: return its credit on drop_vc
        drop_vc = Signal(2)
        err = Signal()
        space = Signal(4)
        m.d.comb += [space[v].eq(bufs[v].w_space) for v in range(4)]
        for v in range(4):
            m.d.comb += bufs[v].w_data.eq(flit)

        def on_vc(v, **sigs):
            for k in range(4):
                with m.If(v == k):
                    m.d.comb += [getattr(bufs[k], n).eq(x) for n, x in sigs.items()]

        HDR, BODY, DROP = 0, 1, 2
        rx = Signal(2, name="rx_state")
        st = Signal(2)           # the state this cycle: a restart (link loss) starts over at HDR
        m.d.comb += st.eq(Mux(self.restart, HDR, rx))
        broken = Signal()        # the open packet lost flits on the link
        m.d.comb += broken.eq(self.restart & (rx == BODY))
        final = rem == 1
        body_bad = Signal()
        m.d.comb += body_bad.eq(fire & (st == BODY) & (~space.bit_select(cur_vc, 1) | (last != final)))
        taken_now = Signal()
        closed = Signal(4)
        m.d.comb += [closed[v].eq(bufs[v].r_closed) for v in range(4)]
        m.d.comb += taken_now.eq(taken | (self.take.bit_select(cur_vc, 1)
                                          & ~closed.bit_select(cur_vc, 1)))
        with m.If(body_bad | broken):
            with m.If(taken_now):
                # cannot be recalled: close it (before a flit arriving now: it starts the next
                # packet); the reader pads it with zero flits, the outputs poison its round
                on_vc(cur_vc, w_cut=1)
                m.d.comb += self.trunc.eq(1)
                open_left = Signal.like(self.pad_left)
                for k in range(4):
                    with m.If(cur_vc == k):
                        m.d.comb += open_left.eq(bufs[k].open_left)
                m.d.sync += [self.pad.eq(1), self.pad_left.eq(open_left)]
            with m.Else():
                on_vc(cur_vc, w_abort=1)
        with m.If(self.restart):
            m.d.sync += [rx.eq(HDR), taken.eq(0)]    # (a header arriving now may override it)
        with m.Switch(st):
            with m.Case(BODY):
                with m.If(self.take.bit_select(cur_vc, 1) & ~closed.bit_select(cur_vc, 1)):
                    m.d.sync += taken.eq(1)
                with m.If(fire):
                    with m.If(body_bad):
                        m.d.comb += [drop.eq(1), drop_vc.eq(cur_vc), err.eq(1)]
                        m.d.sync += [taken.eq(0), rx.eq(Mux(last, HDR, DROP))]
                    with m.Else():
                        on_vc(cur_vc, w_en=1, w_close=final)
                        m.d.sync += rem.eq(rem - 1)
                        with m.If(final):
                            m.d.sync += [rx.eq(HDR), taken.eq(0)]
            with m.Case(DROP):
                with m.If(fire):
                    m.d.comb += [drop.eq(1), drop_vc.eq(cur_vc)]
                    with m.If(last):
                        m.d.sync += rx.eq(HDR)
            with m.Default():                      # HDR
                with m.If(fire):
                    with m.If(~hdr_ok | ~space.bit_select(vc, 1) | (last != (length == 0))):
                        m.d.comb += [drop.eq(1), drop_vc.eq(vc), err.eq(1)]
                        m.d.sync += cur_vc.eq(vc)
                        with m.If(~last):
                            m.d.sync += rx.eq(DROP)
                    with m.Else():
                        on_vc(vc, w_en=1, w_close=(length == 0))
                        m.d.sync += [cur_vc.eq(vc), rem.eq(length), taken.eq(0)]
                        with m.If(length != 0):
                            m.d.sync += rx.eq(BODY)
        m.d.comb += self.err.eq(err)
        return drop, drop_vc

    def _read_side(self, m, bufs):
        """Offer each VC's head header; stream a taken data packet on ``d`` as its flits arrive
        (zeros once a truncated packet's flits are used up); drop a discarded head packet."""
        s_active, s_vc, s_rem = self.s_active, self.s_vc, self.s_rem
        for v in range(4):
            head = bufs[v].r_data[:self.hdr_bits]
            m.d.comb += [
                self.head_word[v].eq(head),
                self.head_valid[v].eq((bufs[v].r_avail != 0) & ~(s_active & (s_vc == v))),
                self.head_done[v].eq(bufs[v].r_closed & ~(s_active & (s_vc == v))),
                bufs[v].skip_en.eq(self.discard[v]),
                bufs[v].skip_n.eq(head[32:40] + 1),
            ]
        d_fire = Signal()
        have = Signal()            # the next flit of the streamed packet is in the buffer
        padding = Signal()         # a truncated packet's real flits are used up
        m.d.comb += padding.eq(self.pad & (self.pad_left == 0))
        for v in range(3):
            with m.If(s_vc == v):
                m.d.comb += have.eq(bufs[v].r_avail != 0)
        m.d.comb += [
            self.d.valid.eq(s_active & (have | padding)),
            d_fire.eq(self.d.valid & self.d.ready),
            self.busy.eq(s_active),
        ]
        for v in range(3):
            with m.If((s_vc == v) & ~padding):
                m.d.comb += self.d.payload.eq(bufs[v].r_data)
        for v in range(4):
            m.d.comb += bufs[v].r_pop.eq(self.take[v] | (d_fire & ~padding & (s_vc == v)))
        with m.If(d_fire):
            m.d.sync += s_rem.eq(s_rem - 1)
            with m.If(self.pad & ~padding):
                m.d.sync += self.pad_left.eq(self.pad_left - 1)
            with m.If(s_rem == 1):
                m.d.sync += [s_active.eq(0), self.pad.eq(0)]
        for v in range(3):
            with m.If(self.take[v]):
                m.d.sync += [s_active.eq(1), s_vc.eq(v), s_rem.eq(bufs[v].r_data[32:40])]

    def _credits(self, m, bufs, drop, drop_vc):
        """Credits returned per VC (freed flits + a dropped one) and buffer occupancy."""
        for v in range(4):
            m.d.comb += [
                self.credit[v].eq(bufs[v].freed + (drop & (drop_vc == v))),
                self.level[v].eq(bufs[v].level),
            ]
            with m.If(bufs[v].level > self.peak[v]):
                m.d.sync += self.peak[v].eq(bufs[v].level)
