"""The link protocol around the wire format: what a sender puts on a link and what a receiver
does with every wire word (the switch's RTL, :mod:`fred.hdl.switch.linkcheck`, and the test-bench
endpoints follow these same rules; tests/hdl/test_linkcheck.py checks the RTL against them).

Pure Python. A link carries flits with credits (:mod:`fred.contract.packet`): a sender spends
one credit of VC ``v`` per flit and gets it back when the receiver frees the slot. Faults
(a flit lost, corrupted, duplicated) must neither leak nor double a credit, or a VC starves or
overflows; so every flit carries its VC and a per-VC flit sequence number ``fseq`` under the
CRC, and the receiver classifies each wire word (:class:`LinkReceiver`):

* **bad** -- the check fails: nothing in the word can be trusted; dropped, no credit (the slot
  is recovered as a gap by the next good word of its VC);
* **dup** -- ``fseq`` is behind the expected one (the copy of a flit already seen): dropped, no
  credit (the sender spent none for it);
* otherwise the distance ``d = fseq - expected`` (mod ``2**fseq_bits``, at most the receiver's
  buffer of that VC) counts flits **lost** before this word: their ``d`` credits go back at once;
* **probe** -- no flit (a sender with credits outstanding sends one when it has waited long
  enough, so that lost trailing flits are found): reveals gaps, nothing else;
* a flit: passed on when it starts a packet (``head``) or continues the packet in progress
  (same VC, no gap); a packet in progress is **broken** (its tail was lost) when a word arrives
  that is a head, a probe, of another VC or after a gap -- the receiver discards what it holds of
  it (``restart``); a flit whose packet start was lost is an **orphan**: dropped, credit back.

Every flit the sender sent is so credited back exactly once: freed from the buffer, dropped on
arrival (orphan, or by the packet layer), or counted lost.
"""

from __future__ import annotations

from dataclasses import dataclass

from .packet import WireFormat, word_fields

__all__ = ["LinkSender", "LinkReceiver", "Received"]


class LinkSender:
    """Seals a sender's link words into wire words (head, VC, per-VC ``fseq``, check)."""

    def __init__(self, fmt: WireFormat):
        self.fmt = fmt
        self.fseq = [0] * 4
        self.in_pkt = False
        self.vc = 0

    def seal(self, word: int) -> int:
        """Wire word for the next link word (``data | last << flit_bits``) of the stream."""
        data, last = word_fields(word, self.fmt.flit_bits)
        head = not self.in_pkt
        if head:
            self.vc = (data >> 4) & 3
        v = self.vc
        out = self.fmt.seal(data, last, head, v, self.fseq[v])
        self.fseq[v] = (self.fseq[v] + 1) % self.fmt.fseq_mod
        self.in_pkt = not last
        return out

    def seal_packet(self, words) -> list:
        return [self.seal(w) for w in words]

    def probe(self, vc: int) -> int:
        """A credit probe for ``vc`` (between packets only: raises inside one)."""
        if self.in_pkt:
            raise ValueError("a probe cannot be sent inside a packet")
        return self.fmt.seal(0, False, False, vc, self.fseq[vc], probe=True)


@dataclass
class Received:
    """What a receiver did with one wire word."""
    kind: str            # "bad", "dup", "probe", "orphan", "flit"
    vc: int = 0
    lost: int = 0        # flits of ``vc`` found lost (their credits go back)
    restart: bool = False  # the packet in progress was broken: discard what is held of it
    data: int = 0
    last: bool = False
    head: bool = False
    credits: int = 0     # credits of ``vc`` to return now: lost + a dropped orphan

    @property
    def passed(self) -> bool:
        return self.kind == "flit"


class LinkReceiver:
    """The receiving side of a link: classify each wire word (module docstring).

    ``windows[v]``: the receiver's buffer of VC ``v`` in flits (the most a sender can have in
    flight on it; a larger distance is a duplicate). Counters: ``bad``, ``dup``, ``lost``,
    ``orphans``, ``restarts``.
    """

    def __init__(self, fmt: WireFormat, windows):
        self.fmt = fmt
        self.windows = [int(w) for w in windows]
        if len(self.windows) != 4 or max(self.windows) * 2 + 1 >= fmt.fseq_mod:
            raise ValueError(f"receive windows {windows!r} need 4 VCs of at most "
                             f"{(fmt.fseq_mod - 2) // 2} flits with {fmt.fseq_bits}-bit fseq")
        self.exp = [0] * 4
        self.in_pkt = False
        self.vc = 0
        self.bad = self.dup = self.lost = self.orphans = self.restarts = 0

    def receive(self, word: int) -> Received:
        w = self.fmt.fields(word)
        if not w.ok:
            self.bad += 1
            return Received("bad")
        v = w.vc
        d = (w.fseq - self.exp[v]) % self.fmt.fseq_mod
        if d > self.windows[v]:
            if w.probe:
                return Received("probe", v)
            self.dup += 1
            return Received("dup", v)
        self.lost += d
        broken = self.in_pkt and (w.head or w.probe or v != self.vc or d != 0)
        self.restarts += broken
        if w.probe:
            self.exp[v] = w.fseq
            self.in_pkt = False
            return Received("probe", v, lost=d, restart=broken, credits=d)
        self.exp[v] = (w.fseq + 1) % self.fmt.fseq_mod
        if w.head or (self.in_pkt and not broken):
            self.in_pkt = not w.last
            self.vc = v
            return Received("flit", v, lost=d, restart=broken, data=w.data, last=w.last,
                            head=w.head, credits=d)
        self.in_pkt = False
        self.orphans += 1
        return Received("orphan", v, lost=d, restart=broken, credits=d + 1)
