"""Fault injection on one direction of a link (endpoint -> switch port, or port -> endpoint).

Plain Python, stepped once per clock cycle by the fault bench (sim/benches/faults.py). The injector
sits on the wire: wire words go in, in order, and come out one per cycle at most, each with
probability ``rate`` hit by one fault drawn from ``kinds`` (a seeded ``random.Random``):

* ``drop`` -- the word vanishes (its cycle is lost);
* ``corrupt`` -- 1 to 3 random bits of the word flip (data, sideband or check alike);
* ``duplicate`` -- the word is delivered twice, on consecutive cycles;
* ``delay`` -- the word is held back 1..``max_delay`` cycles (the link stays in order, so the
  words behind it wait too).

Every fault is logged (:attr:`Injector.log`: cycle, kind, whether the word was a probe) and
counted, so the bench can say what each receiver must have counted.
"""

from __future__ import annotations

import random
from collections import Counter, deque

__all__ = ["FAULT_KINDS", "Injector"]

FAULT_KINDS = ("drop", "corrupt", "duplicate", "delay")


class Injector:
    """``rate``: faults per word, 0..1; ``kinds``: a subset of :data:`FAULT_KINDS`;
    ``width``: bits of a wire word; ``is_probe(word)``: whether a word is a credit probe."""

    def __init__(self, rate: float, kinds, rng: random.Random, width: int, is_probe,
                 max_delay: int = 16):
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"fault rate {rate!r} must be in 0..1")
        bad = [k for k in kinds if k not in FAULT_KINDS]
        if bad or not kinds:
            raise ValueError(f"fault kinds {list(kinds)!r} must name some of {', '.join(FAULT_KINDS)}")
        self.rate, self.kinds, self.rng = rate, tuple(kinds), rng
        self.width, self.is_probe, self.max_delay = width, is_probe, max_delay
        self.queue: deque = deque()      # words waiting to go on the wire
        self.hold = 0                    # cycles the head word is still delayed
        self.repeat = None               # the second copy of a duplicated word
        self.drawn = False               # the head word had its fault draw
        self.enabled = True
        self.last = None                 # the fault of the word returned by step (None, a kind,
                                         # or "copy" for the second copy of a duplicate)
        self.count = Counter()           # (kind, probe) -> faults
        self.log: list = []

    def push(self, word: int):
        self.queue.append(word)

    @property
    def busy(self) -> bool:
        return bool(self.queue) or self.repeat is not None

    def step(self, now: int):
        """The word on the wire this cycle (or None); call once per cycle."""
        self.last = None
        if self.repeat is not None:
            w, self.repeat = self.repeat, None
            self.last = "copy"
            return w
        if not self.queue:
            return None
        if self.hold:
            self.hold -= 1
            return None
        w = self.queue[0]
        if not self.drawn:                # each word draws its fault once
            self.drawn = True
            if self.enabled and self.rate and self.rng.random() < self.rate:
                kind = self.rng.choice(self.kinds)
                self._note(now, kind, w)
                if kind == "delay":
                    self.hold = self.rng.randint(1, self.max_delay) - 1
                    return None
                if kind == "drop":
                    self.queue.popleft()
                    self.drawn = False
                    return None
                if kind == "corrupt":
                    for b in self.rng.sample(range(self.width), self.rng.randint(1, 3)):
                        w ^= 1 << b
                    self.last = "corrupt"
                else:
                    self.repeat = w       # duplicate
        self.queue.popleft()
        self.drawn = False
        return w

    def _note(self, now, kind, word):
        probe = bool(self.is_probe(word))
        self.count[(kind, probe)] += 1
        self.log.append((now, kind, probe))

    def faults(self, kind: str, probe=None) -> int:
        """How many faults of ``kind`` (on probes only / flits only / both)."""
        return sum(n for (k, p), n in self.count.items() if k == kind and (probe is None or p == probe))
