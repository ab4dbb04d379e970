"""Control-unit pieces of the FRED switch: phase-table layout and RAM, output ports.

* :class:`TableLayout` (pure Python) -- the bit layout of one phase-table entry and how to build
  it from a phase's flows and fabric configuration bits;
* :class:`PhaseTable` -- the configuration RAM (``capacity`` entries) behind the configuration
  port, with write checks, a reject counter and combinational read ports;
* :class:`OutputPort` -- one switch output: per-VC credit counters towards the receiver, a small
  control-packet queue, and the header/data/control multiplexer onto the link;
* :func:`make_header` -- the header flit (see :mod:`fred.contract.packet`) as an Amaranth value.

Phase-table entry (LSB first), ``P`` = ports, ``C`` = fabric configuration width:

==========  =========  ====================================================================
field       bits       meaning
==========  =========  ====================================================================
vc          2          data VC of the phase (MP 0, DP 1, PP 2; CTRL is rejected)
in_mask     P          input ports of the phase's flows (all must hold a packet to start)
out_mask    P          output ports of the phase's flows
flow_in     P * P      for output q (bits ``q*P .. q*P+P-1``): input ports of q's flow --
                       where ACK/NACK arriving at q go, and the lowest one supplies q's seq
config      C          the fabric configuration bits of the phase
==========  =========  ====================================================================

The table is written through ``cfg`` (a stream that is always ready) with
``{index: 8, valid: 1, entry: entry_width}``; ``valid = 0`` erases an entry. A write is rejected
(and ``rejects`` incremented) when ``index >= capacity``, ``index`` is the reserved default
index 255, or (for ``valid = 1``) the VC is CTRL or a mask is empty. Capacity defaults to what
fits the paper's 1.5 KB budget (:func:`default_capacity`).
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import data, fifo, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from fred.contract.packet import DEFAULT_PHASE, HEADER_BITS, MAGIC, VC_CTRL
from .buffers import link_layout

__all__ = ["TableLayout", "default_capacity", "PhaseTable", "OutputPort", "make_header",
           "TABLE_BUDGET_BYTES", "round_queue_for", "MAX_ROUND_QUEUE"]

TABLE_BUDGET_BYTES = 1536
#: the most rounds an output port holds at once (sent + queued)
MAX_ROUND_QUEUE = 16


def round_queue_for(fabric_latency: int, max_len: int) -> int:
    """Rounds an output must hold at once (the one it sends + the queued ones) so that rounds of
    ``1 + max_len`` flits follow back to back: a round occupies its outputs from its start to its
    last flit, ``fabric_latency + max_len + 1`` cycles, and a new one may start every
    ``max_len + 1`` cycles, so ``ceil((fabric_latency + max_len + 1) / (max_len + 1))`` rounds
    are in flight (at least 2: the output always queues one behind the one it sends)."""
    n = -(-(int(fabric_latency) + max_len + 1) // (max_len + 1))
    return max(2, min(MAX_ROUND_QUEUE, n))


def default_capacity(ports: int, config_width: int, budget_bytes: int = TABLE_BUDGET_BYTES) -> int:
    """Entries of :class:`TableLayout` that fit ``budget_bytes`` (at most 255, at least 1)."""
    w = TableLayout(ports, config_width, 1).entry_width
    return max(1, min(DEFAULT_PHASE, (8 * budget_bytes) // w))


class TableLayout:
    """Bit layout of one phase-table entry (see the module docstring)."""

    def __init__(self, ports: int, config_width: int, capacity: int):
        if not 1 <= capacity <= DEFAULT_PHASE:
            raise ValueError(f"table capacity {capacity} must be 1..{DEFAULT_PHASE} entries "
                             f"(index {DEFAULT_PHASE} is the reserved default)")
        self.P, self.C, self.capacity = ports, config_width, capacity
        P = ports
        self.off_vc = 0
        self.off_in = 2
        self.off_out = 2 + P
        self.off_flow = 2 + 2 * P
        self.off_cfg = 2 + 2 * P + P * P
        self.entry_width = self.off_cfg + config_width
        self.bits = self.entry_width * capacity

    def encode(self, vc: int, flows, config: int) -> int:
        """Entry for a phase on data VC ``vc`` with ``flows`` (objects with ``inputs`` /
        ``outputs`` port sets) and fabric configuration ``config``."""
        if vc not in (0, 1, 2):
            raise ValueError(f"phase VC {vc!r} must be a data VC (0 MP, 1 DP, 2 PP)")
        if not 0 <= config < (1 << self.C):
            raise ValueError(f"fabric configuration {config:#x} does not fit in {self.C} bits")
        P = self.P
        ins = outs = 0
        word = vc
        for f in flows:
            fin = 0
            for p in f.inputs:
                if not 0 <= p < P:
                    raise ValueError(f"flow input port {p} out of range for {P} ports")
                if ins >> p & 1:
                    raise ValueError(f"input port {p} is used by two flows of one phase")
                fin |= 1 << p
            ins |= fin
            for q in f.outputs:
                if not 0 <= q < P:
                    raise ValueError(f"flow output port {q} out of range for {P} ports")
                if outs >> q & 1:
                    raise ValueError(f"output port {q} is used by two flows of one phase")
                outs |= 1 << q
                word |= fin << (self.off_flow + q * P)
        if not ins:
            raise ValueError("a phase needs at least one flow")
        word |= ins << self.off_in
        word |= outs << self.off_out
        word |= config << self.off_cfg
        return word

    def decode(self, word: int) -> dict:
        P = self.P
        m = (1 << P) - 1
        return {
            "vc": word & 3,
            "in_mask": word >> self.off_in & m,
            "out_mask": word >> self.off_out & m,
            "flow_in": [word >> (self.off_flow + q * P) & m for q in range(P)],
            "config": word >> self.off_cfg & ((1 << self.C) - 1),
        }

    def cfg_word(self, index: int, entry: int | None) -> int:
        """The ``cfg`` stream payload writing ``entry`` at ``index`` (``None`` erases)."""
        valid = entry is not None
        return (index & 0xFF) | (int(valid) << 8) | ((entry or 0) << 9)

    def cfg_layout(self):
        return data.StructLayout({"index": 8, "valid": 1, "entry": self.entry_width})


def make_header(vc, kind, phase, seq, length, port=None, bits=HEADER_BITS):
    """Header flit value of ``bits`` (48, or 56 with the default index's port byte; fields as
    Amaranth values; see packet.py)."""
    low = Cat(Const(MAGIC, 4), vc[:2], kind[:2], phase[:8], seq[:16], length[:8])
    check = Const(0x5A, 8)
    for k in range(5):
        check = check ^ low[8 * k:8 * k + 8]
    if bits <= HEADER_BITS:
        return Cat(low, check)
    port = Const(0, 8) if port is None else Value.cast(port)[:8]
    return Cat(low, check ^ port, port)


class PhaseTable(wiring.Component):
    """The configuration RAM of the control unit.

    ``cfg`` writes entries (always ready, effective the next cycle); ``rejects`` counts rejected
    writes (wraps). ``n_read`` combinational read ports: ``r_addr[k]`` (a phase index) ->
    ``r_entry[k]`` and ``r_hit[k]`` (index in range and entry valid). ``changed`` pulses the
    cycle after any accepted write.
    """

    def __init__(self, layout: TableLayout, n_read: int, counter_bits: int = 16):
        self.layout = layout
        self.n_read = n_read
        super().__init__({
            "cfg": In(stream.Signature(layout.cfg_layout())),
            "rejects": Out(counter_bits),
            "changed": Out(1),
            "r_addr": In(8).array(n_read),
            "r_entry": Out(layout.entry_width).array(n_read),
            "r_hit": Out(1).array(n_read),
        })

    def elaborate(self, platform):
        m = Module()
        L = self.layout
        cap = L.capacity
        m.submodules.mem = mem = memory.Memory(shape=L.entry_width, depth=cap, init=[])
        w = mem.write_port()
        ab = max(1, (cap - 1).bit_length())
        valid = Signal(2 ** ab)         # one bit per index value (a complete case); >= cap never set
        c = self.cfg.payload
        m.d.comb += self.cfg.ready.eq(1)
        e = c.entry
        entry_ok = ((e[0:2] != VC_CTRL) & (e[L.off_in:L.off_in + L.P] != 0)
                    & (e[L.off_out:L.off_out + L.P] != 0))
        in_range = (c.index < cap) & (c.index != DEFAULT_PHASE)
        accept = Signal()
        m.d.comb += accept.eq(self.cfg.valid & in_range & (~c.valid | entry_ok))
        m.d.comb += [w.addr.eq(c.index[:ab]), w.data.eq(e), w.en.eq(accept & c.valid)]
        with m.If(accept):
            m.d.sync += valid.bit_select(c.index[:ab], 1).eq(c.valid)
        with m.If(self.cfg.valid & ~accept):
            m.d.sync += self.rejects.eq(self.rejects + 1)
        m.d.sync += self.changed.eq(accept)
        for k in range(self.n_read):
            rp = mem.read_port(domain="comb")
            a = self.r_addr[k]
            m.d.comb += [rp.addr.eq(a[:ab]), self.r_entry[k].eq(rp.data),
                         self.r_hit[k].eq((a < cap) & valid.bit_select(a[:ab], 1))]
        return m


class OutputPort(wiring.Component):
    """One switch output: link out, credit counters per VC, control queue, round sequencing.

    A *round* is started with ``start``: the port sends ``start_hdr`` as a header flit on VC
    ``start_vc``, then forwards exactly ``start_len`` data flits from ``fd`` (the fabric
    output), ``last`` on the final one. A ``start`` while a round is in progress (allowed while
    ``can_queue``) queues the next round, which follows the current one back to back (same
    phase: the fabric may already hold its data). ``rounds`` = the rounds the port holds at
    once: the one it sends and ``rounds - 1`` queued behind it (in the order started; the
    switch sizes it with :func:`round_queue_for`); ``can_queue`` = a queue slot is free.
    ``idle`` = no round in progress or queued. ``avail[v]`` = credits not yet promised to the
    current and queued rounds (each queued round reserves its ``len + 1``); the scheduler
    starts a round only when ``avail[vc] >= start_len + 1``.

    Control packets (header-only) are queued with ``ctrl_push``/``ctrl_word`` while
    ``ctrl_space``; they go out between packets (before a round's header, never inside a packet)
    whenever a CTRL credit is available, ahead of data. ``credits[v]`` starts at ``init[v]``,
    drops by one per flit sent on VC ``v`` and rises by ``credit_i[v]`` per cycle.
    Latency: header offered the cycle after ``start``; a data flit offered in the same cycle it
    arrives on ``fd``; a queued control packet the cycle after ``ctrl_push``.
    """

    def __init__(self, flit_bits: int, init, credit_in_bits: int, ctrl_queue: int = 2,
                 hdr_bits: int = HEADER_BITS, rounds: int = 2):
        if isinstance(rounds, bool) or not isinstance(rounds, int) or not 1 <= rounds <= MAX_ROUND_QUEUE:
            raise ValueError(f"output round queue {rounds!r} must be 1..{MAX_ROUND_QUEUE} rounds")
        self.rounds = rounds
        self.flit_bits = flit_bits
        self.hdr_bits = hdr_bits
        self.init = tuple(int(x) for x in init)
        self.cw = (max(self.init) + 2 * (1 << credit_in_bits)).bit_length() + 1
        self.ctrl_queue = ctrl_queue
        super().__init__({
            "o": Out(stream.Signature(link_layout(flit_bits))),
            "credit_i": In(data.ArrayLayout(credit_in_bits, 4)),
            "fd": In(stream.Signature(flit_bits)),
            "start": In(1), "start_hdr": In(hdr_bits), "start_len": In(8), "start_vc": In(2),
            "idle": Out(1), "can_queue": Out(1),
            "credits": Out(data.ArrayLayout(self.cw, 4)),
            "avail": Out(data.ArrayLayout(self.cw, 4)),
            "ctrl_push": In(1), "ctrl_word": In(hdr_bits), "ctrl_space": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.cq = cq = fifo.SyncFIFO(width=self.hdr_bits, depth=self.ctrl_queue)
        m.d.comb += [cq.w_en.eq(self.ctrl_push), cq.w_data.eq(self.ctrl_word),
                     self.ctrl_space.eq(cq.w_rdy)]
        cred = [Signal(self.cw, name=f"cred{v}", init=self.init[v]) for v in range(4)]
        for v in range(4):
            m.d.comb += self.credits[v].eq(cred[v])

        IDLE, HDR, DATA = 0, 1, 2
        state = Signal(2, init=IDLE)
        rem = Signal(8)
        hdr = Signal(self.hdr_bits)
        vcr = Signal(2)
        lock = Signal(2)       # 0 none, 1 ctrl offered and waiting, 2 header offered and waiting
        q_v, q_hdr, q_len, q_vc = self._reserve(m, state, rem, vcr, cred, (IDLE, HDR, DATA))
        head_v = q_v[0] if q_v else Const(0, 1)

        boundary = state != DATA
        ctrl_ok = cq.r_rdy & (cred[VC_CTRL] != 0)
        sel_ctrl = Signal()
        sel_hdr = Signal()
        sel_data = Signal()
        m.d.comb += [
            sel_ctrl.eq((lock == 1) | ((lock == 0) & boundary & ctrl_ok)),
            sel_hdr.eq(~sel_ctrl & (state == HDR)),
            sel_data.eq(state == DATA),
        ]
        o = self.o
        with m.If(sel_ctrl):
            m.d.comb += [o.valid.eq(1), o.payload.data.eq(cq.r_data), o.payload.last.eq(1)]
        with m.Elif(sel_hdr):
            m.d.comb += [o.valid.eq(1), o.payload.data.eq(hdr), o.payload.last.eq(rem == 0)]
        with m.Elif(sel_data):
            m.d.comb += [o.valid.eq(self.fd.valid), o.payload.data.eq(self.fd.payload),
                         o.payload.last.eq(rem == 1)]
        m.d.comb += self.fd.ready.eq(sel_data & o.ready)
        fire = o.valid & o.ready
        with m.If(o.valid & ~o.ready):
            m.d.sync += lock.eq(Mux(sel_ctrl, 1, Mux(sel_hdr, 2, 0)))
        with m.Else():
            m.d.sync += lock.eq(0)

        sent = Signal(4)
        finishing = Signal()
        with m.If(fire):
            with m.If(sel_ctrl):
                m.d.comb += [cq.r_en.eq(1), sent[VC_CTRL].eq(1)]
            with m.Elif(sel_hdr):
                m.d.comb += [sent.bit_select(vcr, 1).eq(1), finishing.eq(rem == 0)]
                m.d.sync += state.eq(DATA)
            with m.Else():
                m.d.comb += [sent.bit_select(vcr, 1).eq(1), finishing.eq(rem == 1)]
                m.d.sync += rem.eq(rem - 1)
        shift = Signal()       # the current round ends and the oldest queued one takes over
        m.d.comb += shift.eq(finishing & head_v)
        with m.If(finishing):
            if q_v:
                with m.If(head_v):
                    m.d.sync += [state.eq(HDR), hdr.eq(q_hdr[0]), rem.eq(q_len[0]),
                                 vcr.eq(q_vc[0])]
                with m.Else():
                    m.d.sync += state.eq(IDLE)
            else:
                m.d.sync += state.eq(IDLE)
        direct = Signal()      # a start with nothing left in flight: it becomes the current round
        m.d.comb += direct.eq(self.start & ((state == IDLE) | (finishing & ~head_v)))
        with m.If(direct):
            m.d.sync += [state.eq(HDR), hdr.eq(self.start_hdr), rem.eq(self.start_len),
                         vcr.eq(self.start_vc)]
        self._queue(m, self.start & ~direct, shift, q_v, q_hdr, q_len, q_vc)
        for v in range(4):
            m.d.sync += cred[v].eq(cred[v] + self.credit_i[v] - sent[v])
        return m

    def _reserve(self, m, state, rem, vcr, cred, states):
        """The queued rounds (started while one runs; oldest first, a shift register), ``idle``,
        ``can_queue`` and ``avail`` (credits minus the current round's flits still to send and
        every queued round's ``len + 1``); returns the queue's (valid, header, length, VC)
        registers."""
        IDLE, HDR, DATA = states
        nq = self.rounds - 1
        q_v = [Signal(name=f"q_valid{i}") for i in range(nq)]
        q_hdr = [Signal(self.hdr_bits, name=f"q_hdr{i}") for i in range(nq)]
        q_len = [Signal(8, name=f"q_len{i}") for i in range(nq)]
        q_vc = [Signal(2, name=f"q_vc{i}") for i in range(nq)]
        head_v = q_v[0] if nq else Const(0, 1)
        m.d.comb += [self.idle.eq((state == IDLE) & ~head_v),
                     self.can_queue.eq(~q_v[-1] if nq else 0)]
        owed_cur = Signal(9)
        m.d.comb += owed_cur.eq(Mux(state == HDR, rem + 1, Mux(state == DATA, rem, 0)))
        for v in range(4):
            owed = Mux(vcr == v, owed_cur, 0)
            for i in range(nq):
                owed = owed + Mux(q_v[i] & (q_vc[i] == v), q_len[i] + 1, 0)
            m.d.comb += self.avail[v].eq(cred[v] - owed)
        return q_v, q_hdr, q_len, q_vc

    def _queue(self, m, push, shift, q_v, q_hdr, q_len, q_vc):
        """The queued rounds, oldest first: on ``shift`` each slot takes the next one's round
        (the oldest became the current round); a ``push`` goes to the first free slot after
        that."""
        nq = len(q_v)
        for i in range(nq):
            # slot i after the shift, then the start appended at the first free slot
            sv = (q_v[i + 1] if i + 1 < nq else Const(0, 1))
            s_v = Mux(shift, sv, q_v[i])
            prev_v = Mux(shift, q_v[i], q_v[i - 1]) if i else Const(1, 1)
            here = push & ~s_v & prev_v
            with m.If(here):
                m.d.sync += [q_v[i].eq(1), q_hdr[i].eq(self.start_hdr), q_len[i].eq(self.start_len),
                             q_vc[i].eq(self.start_vc)]
            with m.Elif(shift):
                if i + 1 < nq:
                    m.d.sync += [q_v[i].eq(q_v[i + 1]), q_hdr[i].eq(q_hdr[i + 1]),
                                 q_len[i].eq(q_len[i + 1]), q_vc[i].eq(q_vc[i + 1])]
                else:
                    m.d.sync += q_v[i].eq(0)
