"""cocotb stream verification components shared by every FRED bench.

Ports follow ``amaranth.lib.stream`` as emitted to Verilog: ``<prefix>__valid``,
``<prefix>__ready``, ``<prefix>__payload`` (for an array member ``o[2]`` the prefix is
``o__2``). A payload of ``lanes`` elements of ``width`` bits has lane 0 in the low bits.

Timing discipline (one place, used by all components): every cycle, inputs are driven just
after the falling clock edge; the handshake is sampled in the ``ReadOnly`` phase of that same
time step, when everything combinational has settled and nothing changes until the next rising
edge -- so the sampled ``valid & ready`` is exactly the transfer that the rising edge performs.

* :class:`Cycles`         -- the cycle counter all timestamps refer to;
* :class:`PauseGenerator` -- seeded random (or patterned) idle/back-pressure decisions;
* :class:`StreamDriver`   -- a source: raises ``valid`` without waiting for ``ready`` and holds
  the beat until it is taken (stream rules 1-2), optionally idling between beats;
* :class:`StreamMonitor`  -- a sink: drives ``ready`` from a pause generator, records beats
  with their cycle, and checks the producer obeys the rules (no retraction, stable payload);
* :func:`watchdog`        -- fails the test after a cycle budget, so a hang fails fast;
* :func:`start`           -- clock and synchronous reset.
"""

from __future__ import annotations

import random
from collections import deque

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, ReadOnly, RisingEdge

from fred.contract.packet import flit_from_lanes, lanes_from_flit

__all__ = ["pack_lanes", "unpack_lanes", "Cycles", "PauseGenerator", "StreamDriver",
           "StreamMonitor", "watchdog", "start"]


# one implementation of the lane packing, shared with the packet format
pack_lanes = flit_from_lanes      # (values, width) -> payload integer, lane 0 in the low bits
unpack_lanes = lanes_from_flit    # (payload, width, lanes) -> list of lane values


class Cycles:
    """Counts rising clock edges; ``now`` is the index of the current cycle."""

    def __init__(self, clk):
        self.clk = clk
        self.now = 0
        cocotb.start_soon(self._count())

    async def _count(self):
        while True:
            await RisingEdge(self.clk)
            self.now += 1


class PauseGenerator:
    """Yields ``True`` on cycles that should pause (source idle or sink not ready).

    ``probability`` in [0, 1) draws independently each cycle from a seeded ``random.Random``;
    ``pattern`` (a sequence of bools) repeats instead.
    """

    def __init__(self, probability: float = 0.0, rng: random.Random | None = None, pattern=None):
        if not 0.0 <= probability < 1.0:
            raise ValueError(f"pause probability {probability!r} must be in [0, 1)")
        self.probability = probability
        self.rng = rng or random.Random(0)
        self.pattern = list(pattern) if pattern is not None else None
        self._k = 0

    def __next__(self) -> bool:
        if self.pattern is not None:
            v = bool(self.pattern[self._k % len(self.pattern)])
            self._k += 1
            return v
        return self.probability > 0 and self.rng.random() < self.probability

    def __iter__(self):
        return self


class StreamDriver:
    """Drive a stream input of the DUT from a queue of integer payloads."""

    def __init__(self, dut, prefix: str, clk, cycles: Cycles, pause: PauseGenerator | None = None):
        self.valid = getattr(dut, f"{prefix}__valid")
        self.ready = getattr(dut, f"{prefix}__ready")
        self.payload = getattr(dut, f"{prefix}__payload")
        self.clk, self.cycles = clk, cycles
        self.pause = pause or PauseGenerator(0.0)
        self.queue: deque = deque()
        self.sent: list = []          # (cycle, payload) of every accepted beat
        self.name = prefix
        self.valid.value = 0
        self.payload.value = 0
        cocotb.start_soon(self._run())

    def send(self, payloads):
        self.queue.extend(int(p) for p in payloads)

    @property
    def idle(self) -> bool:
        return not self.queue and not int(self.valid.value)

    async def _run(self):
        holding = False
        while True:
            await FallingEdge(self.clk)
            if not holding and self.queue and not next(self.pause):
                self.payload.value = self.queue[0]
                self.valid.value = 1
                holding = True
            elif not holding:
                self.valid.value = 0
            await ReadOnly()
            if holding and int(self.ready.value):
                self.sent.append((self.cycles.now, self.queue.popleft()))
                holding = False
            await RisingEdge(self.clk)


class StreamMonitor:
    """Sink a stream output of the DUT with random back-pressure; record and check beats."""

    def __init__(self, dut, prefix: str, clk, cycles: Cycles, pause: PauseGenerator | None = None,
                 on_beat=None, keep=None):
        self.valid = getattr(dut, f"{prefix}__valid")
        self.ready = getattr(dut, f"{prefix}__ready")
        self.payload = getattr(dut, f"{prefix}__payload")
        self.clk, self.cycles = clk, cycles
        self.pause = pause or PauseGenerator(0.0)
        self.beats: list = []         # (cycle, payload) of the beats ``keep(payload)`` keeps
        self.on_beat = on_beat
        self.keep = keep
        self.name = prefix
        self.ready.value = 0
        cocotb.start_soon(self._run())

    async def _run(self):
        pending = None  # payload offered but not taken last cycle
        while True:
            await FallingEdge(self.clk)
            self.ready.value = 0 if next(self.pause) else 1
            await ReadOnly()
            valid = int(self.valid.value)
            if pending is not None:
                assert valid, f"{self.name}: valid dropped before the beat was taken (stream rule)"
                now = int(self.payload.value)
                assert now == pending, (f"{self.name}: payload changed while valid and not ready "
                                        f"({pending:#x} -> {now:#x})")
            if valid:
                p = int(self.payload.value)
                if int(self.ready.value):
                    if self.keep is None or self.keep(p):
                        self.beats.append((self.cycles.now, p))
                    if self.on_beat:
                        self.on_beat(self.cycles.now, p)
                    pending = None
                else:
                    pending = p
            await RisingEdge(self.clk)


async def watchdog(clk, max_cycles: int, what: str = "bench"):
    """Fail the test after ``max_cycles`` rising edges (start it with ``cocotb.start_soon``)."""
    for _ in range(max_cycles):
        await RisingEdge(clk)
    raise AssertionError(f"watchdog: {what} still running after {max_cycles} cycles (hang?)")


async def start(dut, clk_name: str = "clk", rst_name: str = "rst", reset_cycles: int = 2) -> Cycles:
    """Start a 10 ns clock, hold synchronous reset for ``reset_cycles``; return the counter."""
    clk = getattr(dut, clk_name)
    cocotb.start_soon(Clock(clk, 10, unit="ns").start())
    rst = getattr(dut, rst_name, None)
    if rst is not None:
        rst.value = 1
        for _ in range(reset_cycles):
            await FallingEdge(clk)
        rst.value = 0
    cycles = Cycles(clk)
    return cycles
