"""Input side of the FRED switch: per-VC packet buffers with commit/abort, header check, credits.

:class:`VCBuffer` is a FIFO of flits whose writes become visible to the reader only when the
writer *commits* them (at the end of a well-formed packet) and can be *aborted* (a malformed or
overflowing packet disappears without a trace). :class:`InputPort` is one switch input: it
parses the link (:mod:`fred.contract.packet`), checks every header, writes packets into the buffer of
their virtual channel (VC), returns credits to the sender and offers the head packet of every VC
to the control unit.

Contracts and latencies (all cycles of the ``sync`` domain):

* a packet's head becomes visible (``head_valid``) the cycle after its last flit was accepted
  (store-and-forward into the buffer; the link itself is cut-through with credits);
* ``take[v]`` pops the head header of VC ``v`` in that cycle; for a data VC the port then streams
  the packet's ``length`` data flits on ``d`` (first flit offered the next cycle, one per cycle
  while ``d.ready``), ``busy`` stays high until the last one is taken;
* ``discard[v]`` drops the whole head packet of VC ``v`` in one cycle;
* ``credit[v]`` (per cycle) = flits of VC ``v`` freed this cycle: popped, discarded, aborted or
  dropped on arrival. A sender starts with ``depths[v]`` credits.
"""

from __future__ import annotations

from amaranth.hdl import Const, Module, Mux, Signal
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from fred.contract.packet import HEADER_BITS, MAGIC, VC_CTRL

__all__ = ["link_layout", "VCBuffer", "InputPort", "header_ok"]


def link_layout(flit_bits: int):
    """The link beat: ``{"data": flit_bits, "last": 1}`` (data in the low bits)."""
    return data.StructLayout({"data": flit_bits, "last": 1})


def header_ok(flit, max_len: int):
    """Amaranth expression: ``flit`` (>= 48 bits) is a well-formed header (see packet.py)."""
    check = Const(0x5A, 8)
    for k in range(5):
        check = check ^ flit[8 * k:8 * k + 8]
    vc, kind, length = flit[4:6], flit[6:8], flit[32:40]
    ok = (flit[0:4] == MAGIC) & (flit[40:48] == check)
    if len(flit) > HEADER_BITS:
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
    """FIFO of ``depth`` flits of ``width`` bits with commit/abort on the write side.

    Write: ``w_en`` writes ``w_data`` (uncommitted; ``w_space`` must be high). ``w_commit`` makes
    every uncommitted flit, including one written in the same cycle, visible to the reader.
    ``w_abort`` forgets the uncommitted flits (a ``w_en`` in the same cycle is ignored).
    Read: ``r_data`` is the oldest committed flit (combinational read), ``r_avail`` the number of
    committed flits; ``r_pop`` removes one, ``skip_en`` removes ``skip_n`` (<= ``r_avail``).
    ``freed`` = flits removed this cycle (popped, skipped, aborted); ``level`` = all flits held.
    """

    def __init__(self, width: int, depth: int):
        if depth < 1:
            raise ValueError(f"buffer depth {depth} must be at least 1 flit")
        self.width, self.depth = width, depth
        super().__init__({
            "w_en": In(1), "w_data": In(width), "w_commit": In(1), "w_abort": In(1),
            "w_space": Out(1),
            "r_data": Out(width), "r_avail": Out(range(depth + 1)), "r_pop": In(1),
            "skip_en": In(1), "skip_n": In(range(depth + 1)),
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
        cp = Signal(range(D))
        count_all = Signal(range(D + 1))
        count_c = Signal(range(D + 1))
        unc = Signal(range(D + 1))
        m.d.comb += unc.eq(count_all - count_c)

        pop_n = Signal(range(D + 1))
        m.d.comb += pop_n.eq(Mux(self.r_pop, 1, Mux(self.skip_en, self.skip_n, 0)))
        write = Signal()
        m.d.comb += write.eq(self.w_en & ~self.w_abort)
        m.d.comb += [
            wp_.addr.eq(wp), wp_.data.eq(self.w_data), wp_.en.eq(write),
            rp_.addr.eq(rp), self.r_data.eq(rp_.data),
            self.r_avail.eq(count_c), self.level.eq(count_all),
            self.w_space.eq(count_all < D),
            self.freed.eq(pop_n + Mux(self.w_abort, unc, 0)),
        ]
        wp_next = Signal(range(D))
        m.d.comb += wp_next.eq(Mux(write, _inc(m, wp, 1, D), wp))
        new_unc = Signal(range(D + 2))
        m.d.comb += new_unc.eq(unc + write)
        m.d.sync += rp.eq(_inc(m, rp, pop_n, D))
        with m.If(self.w_abort):
            m.d.sync += [wp.eq(cp), count_all.eq(count_c - pop_n), count_c.eq(count_c - pop_n)]
        with m.Else():
            m.d.sync += [wp.eq(wp_next), count_all.eq(count_all + write - pop_n)]
            with m.If(self.w_commit):
                m.d.sync += [cp.eq(wp_next), count_c.eq(count_c + new_unc - pop_n)]
            with m.Else():
                m.d.sync += count_c.eq(count_c - pop_n)
        return m


class InputPort(wiring.Component):
    """One switch input port: link parser, one :class:`VCBuffer` per VC, credit return.

    Parameters: ``flit_bits``; ``depths`` = buffer sizes in flits for VCs (MP, DP, PP, CTRL);
    ``max_len`` = longest accepted data packet (data flits; header + data must fit the smallest
    data-VC buffer). Ports: ``i`` (link in; ``ready`` is always 1 -- flow control is by
    credits), ``credit`` (per-VC count of credits returned this cycle), ``head_valid`` /
    ``head_word`` (per VC: a committed packet's header is at the head and not being streamed),
    ``take`` / ``discard`` (per-VC pulses from the control unit), ``d`` (data flits of the taken
    packet), ``busy``, ``err`` (pulse: one malformed, mis-framed or overflowing packet dropped),
    ``level`` / ``peak`` (buffer occupancy per VC, current and highest since reset).
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
        dmax = max(depths)
        self.credit_bits = (2 * dmax + 3).bit_length()
        lw = (dmax).bit_length()
        super().__init__({
            "i": In(stream.Signature(link_layout(flit_bits))),
            "credit": Out(data.ArrayLayout(self.credit_bits, 4)),
            "head_valid": Out(4),
            "head_word": Out(data.ArrayLayout(HEADER_BITS, 4)),
            "take": In(4), "discard": In(4),
            "d": Out(stream.Signature(flit_bits)),
            "busy": Out(1), "err": Out(1),
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
        drop, drop_vc = self._receive(m, bufs)
        self._read_side(m, bufs)
        self._credits(m, bufs, drop, drop_vc)
        return m

    def _receive(self, m, bufs):
        """Write side: parse the link, check each header and framing, write packets into their
        VC's buffer (committed at the last flit), drop bad ones. Returns ``(drop, drop_vc)``:
        a flit dropped this cycle, whose credit goes back on ``drop_vc``."""
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
        drop = Signal()          # this flit is dropped: return its credit on drop_vc
        drop_vc = Signal(2)
        err = Signal()
        space = Signal(4)
        m.d.comb += [space[v].eq(bufs[v].w_space) for v in range(4)]
        for v in range(4):
            m.d.comb += bufs[v].w_data.eq(flit)

        def write(v, commit=False):
            for k in range(4):
                with m.If(v == k):
                    m.d.comb += bufs[k].w_en.eq(1)
                    if commit is not False:
                        m.d.comb += bufs[k].w_commit.eq(commit)

        def abort(v):
            for k in range(4):
                with m.If(v == k):
                    m.d.comb += bufs[k].w_abort.eq(1)

        HDR, BODY, DROP = 0, 1, 2
        rx = Signal(2, name="rx_state")
        final = rem == 1
        body_bad = Signal()
        m.d.comb += body_bad.eq(fire & (rx == BODY) & (~space.bit_select(cur_vc, 1) | (last != final)))
        with m.If(body_bad):
            abort(cur_vc)
        with m.Switch(rx):
            with m.Case(BODY):
                with m.If(fire):
                    with m.If(body_bad):
                        m.d.comb += [drop.eq(1), drop_vc.eq(cur_vc), err.eq(1)]
                        with m.If(last):
                            m.d.sync += rx.eq(HDR)
                        with m.Else():
                            m.d.sync += rx.eq(DROP)
                    with m.Else():
                        write(cur_vc, commit=final)
                        m.d.sync += rem.eq(rem - 1)
                        with m.If(final):
                            m.d.sync += rx.eq(HDR)
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
                        write(vc, commit=(length == 0))
                        m.d.sync += [cur_vc.eq(vc), rem.eq(length)]
                        with m.If(length != 0):
                            m.d.sync += rx.eq(BODY)
        m.d.comb += self.err.eq(err)
        return drop, drop_vc

    def _read_side(self, m, bufs):
        """Offer each VC's head header; stream a taken data packet on ``d``; drop a discarded
        head packet."""
        s_active = Signal()
        s_vc = Signal(2)
        s_rem = Signal(8)
        for v in range(4):
            head = bufs[v].r_data[:HEADER_BITS]
            m.d.comb += [
                self.head_word[v].eq(head),
                self.head_valid[v].eq((bufs[v].r_avail != 0) & ~(s_active & (s_vc == v))),
                bufs[v].skip_en.eq(self.discard[v]),
                bufs[v].skip_n.eq(head[32:40] + 1),
            ]
        d_fire = Signal()
        m.d.comb += [
            self.d.valid.eq(s_active),
            self.d.payload.eq(bufs[0].r_data),
            d_fire.eq(self.d.valid & self.d.ready),
            self.busy.eq(s_active),
        ]
        for v in range(3):
            with m.If(s_vc == v):
                m.d.comb += self.d.payload.eq(bufs[v].r_data)
        for v in range(4):
            m.d.comb += bufs[v].r_pop.eq(self.take[v] | (d_fire & (s_vc == v)))
        with m.If(d_fire):
            m.d.sync += s_rem.eq(s_rem - 1)
            with m.If(s_rem == 1):
                m.d.sync += s_active.eq(0)
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
