"""Go-Back-N endpoints (NPU side) for the switch's fault bench (sim/benches/faults.py).

Plain Python, stepped once per cycle by the bench. The unit of recovery is a *phase* (one
flow in the fault bench): every source of it numbers its packets alike, ``seq(k) = (s0 + k) mod
2**16`` for the ``k``-th packet, so that the switch can align its inputs
(:mod:`fred.hdl.switch.seqalign`); a receiver delivers packets strictly in order.

* :class:`GbnSource` -- one source of a phase: a send window of ``window`` packets, a base
  that advances when *every* receiver of the phase has acknowledged (ACKs name the receiver,
  below), go-back to the NACKed packet (once: the NACKs of the other receivers for the same
  packet within ``nack_guard`` cycles are the same loss), and a retransmission timeout (``rto``
  cycles without progress while packets are outstanding: go back to the base) for lost ACKs and
  NACKs.
* :class:`GbnReceiver` -- one receiver: accepts the expected packet only; a cumulative ACK per
  ``ack_every`` (16) accepted packets, and after ``ack_delay`` quiet cycles for the rest; a NACK
  on a sequence gap or a broken packet (its link check failed), once per expected packet, and
  again every ``nack_retry`` cycles while that brings no progress (a lost NACK or go-back); a
  duplicate (a go-back already served) is answered with the cumulative ACK again; once it holds
  every packet it repeats the final ACK :data:`FINAL_ACKS` times, backing off (the sources of a
  phase are lock-stepped by the switch's rounds: a source that missed it and timed out could
  never be answered, since the other sources send nothing more).

Control packets are ACK/NACK headers (``fred.contract.packet``): a NACK's ``seq`` is the expected
packet; an ACK's ``seq`` carries the receiver's port in its top ``rbits`` bits and the next
expected ``seq`` modulo ``2**(16 - rbits)`` below (*ours*: the switch forwards the ACKs of every
receiver of a flow to every source, and a source may free a packet only once all receivers have
it, so it must tell the ACKs apart; the window must stay below ``2**(15 - rbits)``).

Mutants (tests only): ``retx-late`` (sources go back to the packet after the NACKed one, and
to base + 1 on a timeout), ``accept-gap`` (receivers accept a packet beyond a gap).
"""

from __future__ import annotations

from fred.contract import packet as pk

__all__ = ["GbnParams", "GbnSource", "GbnReceiver", "ack_fields", "MUTANTS"]

SEQ = pk.SEQ_MOD
MUTANTS = (None, "retx-late", "accept-gap")
#: repetitions of a receiver's final ACK (backing off: the last one ~2,000 cycles later)
FINAL_ACKS = 5


class GbnParams:
    """Protocol settings (cycles and packets) shared by all endpoints of a bench."""

    def __init__(self, ports, window=32, ack_every=16, rto=2000, ack_delay=64, nack_retry=600,
                 nack_guard=150, mutant=None):
        if mutant not in MUTANTS:
            raise ValueError(f"unknown endpoint mutant {mutant!r}; known: retx-late, accept-gap")
        self.rbits = max(1, (ports - 1).bit_length())
        self.nbits = 16 - self.rbits
        if not 1 <= window < 1 << (self.nbits - 1):
            raise ValueError(f"window {window!r} must be 1..{(1 << (self.nbits - 1)) - 1} packets")
        self.window, self.ack_every, self.rto = window, ack_every, rto
        self.ack_delay, self.nack_retry, self.mutant = ack_delay, nack_retry, mutant
        self.nack_guard = nack_guard


def ack_fields(params, seq16):
    """ACK seq field -> (receiver port, next expected seq mod 2**nbits)."""
    return seq16 >> params.nbits, seq16 & ((1 << params.nbits) - 1)


class GbnSource:
    """Source ``port`` of ``phase`` sending ``n`` packets (``packet(k)`` -> link words)."""

    def __init__(self, params, phase, port, n, s0, receivers, packet):
        self.g, self.phase, self.port, self.n, self.s0 = params, phase, port, n, s0
        self.receivers = sorted(receivers)
        self.packet = packet
        self.base = self.next = self.high = 0
        self.acked = {r: 0 for r in self.receivers}
        self.last_progress = 0
        self.retransmitted = self.rewinds = self.timeouts = 0
        self.rewound, self.rewound_at = None, 0    # the last go-back (packet, by NACK)
        self.after = None      # a source that must be done before this one sends (or None)

    def seq(self, k):
        return (self.s0 + k) % SEQ

    @property
    def done(self) -> bool:
        return self.base >= self.n

    def ready(self) -> bool:
        return (self.next < self.n and self.next - self.base < self.g.window
                and (self.after is None or self.after.done))

    def take(self, now):
        """The next packet to send: (k, link words); advances ``next``."""
        k = self.next
        self.next += 1
        if self.base == self.high:        # nothing was outstanding: the timer starts now
            self.last_progress = now
        if k < self.high:
            self.retransmitted += 1
        else:
            self.high = k + 1
        return k, self.packet(k)

    def _offset(self, value, bits):
        """Packets from base to the packet whose seq is ``value`` mod 2**bits, or None when
        outside [base, high]."""
        off = (value - self.seq(self.base)) % (1 << bits)
        return off if off <= self.high - self.base else None

    def on_ack(self, seq16, now):
        r, low = ack_fields(self.g, seq16)
        off = self._offset(low, self.g.nbits)
        if r not in self.acked or off is None:
            return
        self.acked[r] = max(self.acked[r], self.base + off)
        base = min(self.acked.values())
        if base > self.base:
            self.base = base
            self.next = max(self.next, base)
            self.last_progress = now

    def on_nack(self, seq16, now):
        off = self._offset(seq16, 16)
        if off is None or self.base + off >= self.next + (self.g.mutant == "retx-late"):
            return
        k = self.base + off
        if self.rewound == k and now - self.rewound_at < self.g.nack_guard:
            return                        # the other receivers' NACKs of the same loss
        self.rewound, self.rewound_at = k, now
        self.next = k + (self.g.mutant == "retx-late")
        self.rewinds += 1
        self.last_progress = now

    def tick(self, now):
        if self.base < self.high and now - self.last_progress > self.g.rto:
            self.next = self.base + (self.g.mutant == "retx-late")
            self.timeouts += 1
            self.last_progress = now


class GbnReceiver:
    """Receiver ``port`` of ``phase`` expecting ``n`` packets; ``send(header)`` queues an
    ACK/NACK; ``deliver(k, packet)`` gets every accepted packet (the bench checks them)."""

    def __init__(self, params, phase, port, n, s0, send, deliver):
        self.g, self.phase, self.port, self.n, self.s0 = params, phase, port, n, s0
        self.send, self.deliver = send, deliver
        self.expected = 0
        self.unacked = 0
        self.nacked_at = None          # cycle of the last NACK for ``expected`` (None: none yet)
        self.last_progress = self.last_accept = self.last_ack = 0
        self.acks = self.nacks = self.dups = 0
        self.done_at = None
        self.final_acks = 0

    def _seq(self, k):
        return (self.s0 + k) % SEQ

    def _ack(self, now):
        low = self._seq(self.expected) & ((1 << self.g.nbits) - 1)
        self.send(pk.Header.control(self.phase, (self.port << self.g.nbits) | low))
        self.unacked = 0
        self.last_ack = now
        self.acks += 1

    def _nack(self, now):
        self.send(pk.Header.control(self.phase, self._seq(self.expected), nack=True))
        self.nacked_at = now
        self.nacks += 1

    def on_packet(self, packet, now):
        d = (packet.header.seq - self._seq(self.expected)) % SEQ
        if d >= SEQ // 2 or self.expected >= self.n:      # behind (or all received): a duplicate
            self.dups += 1
            if now - self.last_ack > self.g.ack_delay:
                self._ack(now)
            return
        if d and self.g.mutant != "accept-gap":             # a gap: packets were lost
            if self.nacked_at is None:
                self._nack(now)
            return
        self.deliver(self.expected + d, packet)
        self.expected += d + 1
        self.unacked += 1
        self.nacked_at = None
        self.last_progress = self.last_accept = now
        if self.expected >= self.n and self.done_at is None:
            self.done_at = now
        if self.unacked >= self.g.ack_every or self.expected >= self.n:
            self._ack(now)

    def on_broken(self, now):
        """A packet of this phase failed on the link (check or lost flits)."""
        if self.nacked_at is None and self.expected < self.n:
            self._nack(now)

    def tick(self, now):
        if self.unacked and now - self.last_accept > self.g.ack_delay:
            self._ack(now)
        # the final ACK again, ack_delay x 1, 2, 4, ... 32 cycles apart: a source that lost it
        # would time out and send packets no round can take any more (the others are done)
        if self.done_at is not None and self.final_acks < FINAL_ACKS and \
                now - self.last_ack >= self.g.ack_delay << self.final_acks:
            self._ack(now)
            self.final_acks += 1
        # a NACK that brought nothing for nack_retry cycles was lost (or its go-back was): again
        if self.nacked_at is not None and self.expected < self.n and \
                now - max(self.nacked_at, self.last_progress) > self.g.nack_retry:
            self._nack(now)
