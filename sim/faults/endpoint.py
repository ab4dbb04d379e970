"""One NPU endpoint of the fault bench: its link to a switch input and from a switch output.

Plain Python, stepped once per cycle by sim/benches/faults.py. Transmit side: a
:class:`fred.contract.link.LinkSender`, credits per VC (counted back from the switch's
``credit_o``), ACK/NACK headers first, then the Go-Back-N sources (:mod:`fred.sim.faults.gbn`) in
turn, whole packets only (virtual cut-through); a *credit probe* for a VC whose next packet has
waited ``probe_wait`` cycles for credits (a flit lost at the tail of a burst returns its credit
only when the switch sees a later word of that VC), and one for a VC that sent flits when the
link has been idle ``probe_idle`` cycles (the switch forwards cut-through: a round that took a
packet whose last flits were lost waits until a later word of that VC shows the loss). Receive
side: a
:class:`fred.contract.link.LinkReceiver` (bad words, duplicates, gaps, broken packets) whose
credits go back to the switch after ``credit_delay`` cycles, packets assembled and handed to
the receivers (data) or the sources (ACK/NACK) of their phase; a broken packet of a known
phase makes its receiver NACK.
"""

from __future__ import annotations

from collections import deque

from fred.contract import packet as pk
from fred.contract.link import LinkReceiver, LinkSender

__all__ = ["Endpoint"]


class Endpoint:
    def __init__(self, port, fmt, depths, windows, credit_bits, link, probe_wait=64,
                 credit_delay=2, probe_idle=64):
        self.port, self.fmt, self.link = port, fmt, link
        self.tx = LinkSender(fmt)
        self.credits = list(depths)                # towards the switch's input buffers
        self.ctrl = deque()                        # ACK/NACK headers to send
        self.sources, self.receivers = {}, {}      # phase -> GbnSource / GbnReceiver
        self.rx = LinkReceiver(fmt, windows)
        self.cur, self.cur_phase = [], None        # the packet being received
        self.due = deque([(0, v) for v in range(4) for _ in range(windows[v])])  # initial grant
        self.cmax = (1 << credit_bits) - 1
        self.credit_delay, self.probe_wait, self.probe_idle = credit_delay, probe_wait, probe_idle
        self.blocked_since = [None] * 4
        self.pend = [False] * 4                    # VCs that sent flits since their last probe
        self.last_busy = 0
        self.turn = 0
        self.errors: list = []
        self.data_sent = self.ctrl_sent = self.probes = 0

    # -- transmit ---------------------------------------------------------------------------------
    def send_ctrl(self, header):
        self.ctrl.append(header)

    def _start(self, words, vc):
        self.pend[vc] = True
        self.credits[vc] -= len(words)
        for w in self.tx.seal_packet(words):
            self.link.push(w)

    def tx_step(self, now):
        """Queue at most one packet (or probe) on the link when it has nothing left to send."""
        if self.link.busy:
            self.last_busy = now
            return
        want = []                                  # (vc, flits) of what would go next
        if self.ctrl:
            if self.credits[pk.VC_CTRL] >= 1:
                self._start(pk.pack(pk.Packet(self.ctrl.popleft()), self.fmt.flit_bits), pk.VC_CTRL)
                self.ctrl_sent += 1
                self.blocked_since[pk.VC_CTRL] = None
                return
            want.append(pk.VC_CTRL)
        srcs = [s for _, s in sorted(self.sources.items())]
        for i in range(len(srcs)):
            s = srcs[(self.turn + i) % len(srcs)]
            if not s.ready():
                continue
            words = s.packet(s.next)
            vc = (words[0] >> 4) & 3
            if self.credits[vc] >= len(words):
                self.turn = (self.turn + i + 1) % len(srcs)
                _, words = s.take(now)
                self._start(words, vc)
                self.data_sent += 1
                self.blocked_since[vc] = None
                return
            want.append(vc)
        for vc in want:                            # waiting for credits: probe after a while
            if self.blocked_since[vc] is None:
                self.blocked_since[vc] = now
            elif now - self.blocked_since[vc] >= self.probe_wait:
                self._probe(vc, now)
                return
        if not want and any(self.pend) and now - self.last_busy >= self.probe_idle:
            self._probe(self.pend.index(True), now)

    def _probe(self, vc, now):
        self.link.push(self.tx.probe(vc))
        self.probes += 1
        self.pend[vc] = False
        self.blocked_since[vc] = now

    def on_credit(self, counts):
        for v in range(4):
            self.credits[v] += counts[v]

    # -- receive ----------------------------------------------------------------------------------
    def rx_word(self, word, now):
        r = self.rx.receive(word)
        for _ in range(r.credits + r.passed):      # a passed flit is consumed at once
            self.due.append((now + self.credit_delay, r.vc))
        if r.restart or r.kind == "bad":
            if self.cur and self.cur_phase in self.receivers:
                self.receivers[self.cur_phase].on_broken(now)
            if r.restart or self.cur:
                self.cur, self.cur_phase = [], None
        if not r.passed:
            return
        if r.head:
            self.cur_phase = (r.data >> 8) & 0xFF
        self.cur.append(pk.link_word(r.data, r.last, self.fmt.flit_bits))
        if r.last:
            words, self.cur, self.cur_phase = self.cur, [], None
            self._dispatch(words, now)

    def _dispatch(self, words, now):
        try:
            packet = pk.unpack(words, self.fmt.flit_bits)
        except pk.PacketError as exc:
            self.errors.append(f"endpoint {self.port} cycle {now}: malformed packet: {exc}")
            return
        h = packet.header
        if h.vc == pk.VC_CTRL:
            src = self.sources.get(h.phase)
            if src is None:
                self.errors.append(f"endpoint {self.port} cycle {now}: {h} for a phase it does "
                                   f"not send")
            elif h.kind == pk.KIND_NACK:
                src.on_nack(h.seq, now)
            else:
                src.on_ack(h.seq, now)
            return
        rcv = self.receivers.get(h.phase)
        if rcv is None:
            self.errors.append(f"endpoint {self.port} cycle {now}: data {h} for a phase it does "
                               f"not receive")
            return
        rcv.on_packet(packet, now)

    def credit_word(self, now, cb):
        """The ``credit_i`` value this cycle (at most ``2**cb - 1`` per VC)."""
        counts = [0] * 4
        keep = deque()
        while self.due:
            t, v = self.due.popleft()
            if t <= now and counts[v] < self.cmax:
                counts[v] += 1
            else:
                keep.append((t, v))
        self.due = keep
        return sum(c << (v * cb) for v, c in enumerate(counts))

    def tick(self, now):
        for s in self.sources.values():
            s.tick(now)
        for r in self.receivers.values():
            r.tick(now)
