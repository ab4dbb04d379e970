"""Cycle-stepped benches of the FRED switch (plain Python): the latency measurement and the
random stress run of :func:`fred.sim.characterize.switch.measure_switch`, driven by either simulator.

A *world* (:class:`SwitchWorld`) holds everything outside the switch: one credited source per
input port (whole packets once the port holds credits for every flit, wire words sealed by
:class:`fred.contract.link.LinkSender` -- the contract's CRC --, one word per cycle unless it
idles), one sink per output (random back-pressure, the stream rule checked every cycle, a
receiver buffer returning credits after a random delay, at most ``credit_burst`` per VC per
cycle, optionally starved), the round-start monitor (strict priority at every round start), and
the scenario's tasks (generators resumed once per cycle). Per cycle a driver asks
:meth:`SwitchWorld.drive` for the inputs, applies them after the falling edge, samples the
outputs and hands them to :meth:`SwitchWorld.observe`:

* :func:`run_compiled` -- the compiled switch (:mod:`fred.sim.compiled.loader`, lockstep);
* sim/compiled/cocotb_driver.py -- cocotb (the same world, the same seed: the same figures;
  tests/sim/test_switch_soak.py compares them).

Scenarios (``cfg["scenario"]``):

* ``measure`` -- :class:`Measurement`: activation on an idle switch (new and same
  configuration), phase switch (same phase, new phase of the same VC, new VC), preemption of a
  streaming DP phase by MP rounds; the figures of :mod:`fred.sim.characterize.switch`;
* ``stress`` -- :func:`stress`: random phases (:func:`fred.sim.golden.switch.make_traffic`,
  control packets), start skew, idle sources, stalled sinks, slow and starved credits; every
  packet checked against the golden model, the error counters, the worst round latency and the
  peak buffer occupancy.

The scenarios and the compiled driver are in :mod:`fred.sim.compiled.scenarios`.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict, deque

from fred.contract import packet as pk
from fred.contract.link import LinkSender
from fred.sim.golden import stream_key

__all__ = ["SwitchWorld", "check_outputs", "reset_sequence", "wait", "BenchFailure", "STATUS", "RANK"]

#: the switch's status outputs a world reads every cycle
STATUS = ("round_start", "act_vc", "act_phase", "ready_vcs", "peak", "err_packet", "err_phase",
          "err_crc", "err_lost", "err_dup", "err_stale")
RANK = {v: k for k, v in enumerate(pk.PRIORITY)}
FLIT_BITS = {"fp16": 16, "bf16": 16, "fp32": 32, "int32": 32}


class BenchFailure(AssertionError):
    """A check of a lockstep bench failed (one line)."""


class SwitchWorld:
    """Sources, sinks, monitor and tasks around a switch (module docstring); ``cfg`` as
    :func:`fred.sim.characterize.switch._base_config` makes it plus the scenario's knobs."""

    def __init__(self, cfg, rng: random.Random):
        self.cfg, self.rng = cfg, rng
        self.P = P = cfg["ports"]
        self.flit_bits = cfg["lanes"] * FLIT_BITS[cfg["dtype"]]
        self.cb = cfg["credit_bits"]
        self.depths = cfg["depths"]
        self.wire = pk.WireFormat(self.flit_bits, cfg.get("fseq_bits", 8))
        self.now = 0
        self.finished = False
        self.result = None
        # sources
        self.tx = [LinkSender(self.wire) for _ in range(P)]
        self.queue = [deque() for _ in range(P)]
        self.holding = [False] * P
        self.sent = [[] for _ in range(P)]            # (cycle, word) of every accepted word
        self.src_credits = [list(self.depths) for _ in range(P)]
        idle = cfg.get("idle", 0.0)
        self.src_pause = [_pause(idle, random.Random(rng.random())) for _ in range(P)]
        # sinks
        stall = cfg.get("stall", 0.0)
        self.snk_pause = [_pause(stall, random.Random(rng.random())) for _ in range(P)]
        self.cred_rng = [random.Random(rng.random()) for _ in range(P)]
        self.ready = [0] * P
        self.pending = [None] * P                     # payload offered and not taken
        self.beats = [[] for _ in range(P)]           # (cycle, word), probes left out
        self.rx = [{"vc": None, "received": [0] * 4, "granted": [0] * 4, "due": deque(),
                    "starve_until": 0} for _ in range(P)]
        self.partial = [[] for _ in range(P)]
        self.packets_out = [[] for _ in range(P)]     # (end cycle, start cycle, Packet)
        self.credit_burst = min(cfg.get("credit_burst", 2), (1 << self.cb) - 1)
        # monitor
        self.events, self.round_log = [], []
        self._round_pending = None
        self.status = {}
        self.tasks = []
        self.trace = []

    # -- the scenario's helpers -----------------------------------------------------------------
    def fail(self, msg):
        raise BenchFailure(f"cycle {self.now}: {msg}")

    def spawn(self, gen):
        self.tasks.append(gen)

    def grant_all(self):
        for q in range(self.P):
            for v in range(4):
                self.rx[q]["due"].extend([(0, v)] * self.cfg["rx_credits"][v])

    def send_credited(self, p, words):
        """(generator) Queue one packet at port ``p`` once it holds credits for every flit;
        returns the index of its first word among the port's sent words."""
        vc = (words[0] >> 4) & 3
        while self.src_credits[p][vc] < len(words):
            yield
        self.src_credits[p][vc] -= len(words)
        first = len(self.sent[p]) + len(self.queue[p])
        self.queue[p].extend(self.tx[p].seal_packet(words))
        return first

    def busy(self, p) -> bool:
        return bool(self.queue[p])

    def output_packets(self, q):
        return self.packets_out[q]

    # -- one cycle --------------------------------------------------------------------------------
    def drive(self):
        """``(valid, word or None, ready, credit)`` per port for this cycle (after the falling
        edge). A held word stays until taken (``word`` None: the payload is left as it was)."""
        iv, ip = drive_sources(self.holding, self.queue, self.src_pause)
        self.ready = [0 if next(self.snk_pause[q]) else 1 for q in range(self.P)]
        return iv, ip, list(self.ready), [self._credit_word(q) for q in range(self.P)]

    def _credit_word(self, q):
        st = self.rx[q]
        now = self.now
        pstarve, lstarve = self.cfg.get("starve", 0.0), self.cfg.get("starve_len", 0)
        if pstarve and now >= st["starve_until"] and self.cred_rng[q].random() < pstarve:
            st["starve_until"] = now + self.cred_rng[q].randint(1, lstarve)
        if now < st["starve_until"] or not st["due"]:
            return 0
        counts, keep = [0] * 4, deque()
        for when, v in st["due"]:
            if when <= now and counts[v] < self.credit_burst:
                counts[v] += 1
            else:
                keep.append((when, v))
        st["due"] = keep
        val = 0
        for v in range(4):
            st["granted"][v] += counts[v]
            val |= counts[v] << (v * self.cb)
        return val

    def observe(self, in_ready, out_valid, out_word, credit_o, status):
        """The outputs sampled this cycle: ``in_ready[p]``, ``out_valid[q]``, ``out_word[q]``
        (a callable ``q -> int``: read only when needed), ``credit_o[p]``, ``status`` (the
        :data:`STATUS` outputs); then the tasks run and the cycle ends."""
        now = self.now
        self.status = status
        if self.cfg.get("trace_cycles", 0) > now:
            self.trace.append([now, list(in_ready), list(out_valid), list(credit_o), dict(status),
                               [self.holding[p] for p in range(self.P)], list(self.ready)])
        for p in range(self.P):
            if self.holding[p] and in_ready[p]:
                self.sent[p].append((now, self.queue[p].popleft()))
                self.holding[p] = False
            c = credit_o[p]
            if c:
                cr = self.src_credits[p]
                for v in range(4):
                    cr[v] += (c >> (v * self.cb)) & ((1 << self.cb) - 1)
                    if cr[v] > self.depths[v]:
                        self.fail(f"input {p} VC {pk.VC_NAMES[v]}: {cr[v]} credits held, more "
                                  f"than the {self.depths[v]}-flit buffer (a credit returned twice)")
        for q in range(self.P):
            if self.pending[q] is not None:
                if not out_valid[q]:
                    self.fail(f"output {q}: valid dropped before the word was taken (stream rule)")
                if out_word(q) != self.pending[q]:
                    self.fail(f"output {q}: payload changed while valid and not ready")
                self.pending[q] = None
            if out_valid[q]:
                w = out_word(q)
                if self.ready[q]:
                    self._on_word(q, now, w)
                else:
                    self.pending[q] = w
        self._watch_rounds(status)
        self.tasks = [t for t in self.tasks if _resume(t)]
        self.now += 1

    def _on_word(self, q, now, word):
        st = self.rx[q]
        if not self.wire.fields(word).ok:
            self.fail(f"output {q}: wire check fails on {word:#x}")
        if self.wire.is_probe(word):
            return                    # a credit probe: no flit, no credit (no faults here)
        self.beats[q].append((now, word))
        data, last = pk.word_fields(word, self.flit_bits)
        if st["vc"] is None:
            st["vc"] = (data >> 4) & 3
        v = st["vc"]
        st["received"][v] += 1
        if st["received"][v] > st["granted"][v]:
            self.fail(f"output {q} VC {pk.VC_NAMES[v]}: flit {st['received'][v]} sent with only "
                      f"{st['granted'][v]} credits granted")
        dl = self.cred_rng[q].randint(1, max(1, self.cfg.get("credit_delay", 1)))
        st["due"].append((now + dl, v))
        self.partial[q].append(word)
        if last:
            st["vc"] = None
            t0 = self.beats[q][-len(self.partial[q])][0]
            self.packets_out[q].append((now, t0, pk.unpack(self.partial[q], self.flit_bits)))
            self.partial[q] = []

    def _watch_rounds(self, status):
        now = self.now
        if self._round_pending is not None:
            t, ready = self._round_pending
            vc = status["act_vc"]
            self.events.append((t, vc, status["act_phase"]))
            self.round_log.append((t, vc, status["act_phase"], ready))
            higher = [u for u in pk.PRIORITY[:RANK[vc]] if ready >> u & 1]
            if higher:
                self.fail(f"cycle {t}: started VC {pk.VC_NAMES[vc]} while "
                          f"{pk.VC_NAMES[higher[0]]} was ready")
            self._round_pending = None
        if status["round_start"]:
            self._round_pending = (now, status["ready_vcs"])

    def peaks(self) -> dict:
        peak = self.status["peak"]
        lw = max(self.depths).bit_length()
        return {pk.VC_NAMES[v]: (peak >> (v * lw)) & ((1 << lw) - 1) for v in range(4)}


def drive_sources(holding, queue, pause):
    """One cycle of stream sources (the rule of sim/benches/streams.py's ``StreamDriver``): a
    source holding a beat keeps ``valid`` up; one with a queued beat draws its pause generator
    and, unless it pauses, raises ``valid`` with the beat and holds it (``holding[p]`` set) until
    the sink takes it. Returns ``(valid, payload or None)`` per port (None: the payload is left
    as it was). Only sources with a beat to send and none held draw, so the random draws follow
    the cocotb driver's exactly."""
    iv, ip = [], []
    for p in range(len(queue)):
        if holding[p]:
            iv.append(1)
            ip.append(None)
        elif queue[p] and not next(pause[p]):
            holding[p] = True
            iv.append(1)
            ip.append(queue[p][0])
        else:
            iv.append(0)
            ip.append(None)
    return iv, ip


def _pause(probability, rng):
    if not 0.0 <= probability < 1.0:
        raise ValueError(f"pause probability {probability!r} must be in [0, 1)")
    while True:
        yield probability > 0 and rng.random() < probability


def _resume(task) -> bool:
    try:
        next(task)
        return True
    except StopIteration:
        return False


def wait(n):
    for _ in range(n):
        yield


def check_outputs(w, exp, want):
    """Exact flit counts, every data packet per stream bit-exact and in order, control packets
    per output, the error counters; returns each stream's packets' (start, end) cycles."""
    for q in range(w.P):
        n = len(w.beats[q])
        if n != want.get(q, 0):
            w.fail(f"output {q}: {n} flits, expected {want.get(q, 0)} (lost or duplicated)")
    got_data, got_ctrl, got_times = defaultdict(list), defaultdict(Counter), defaultdict(list)
    for q in range(w.P):
        for t_end, t0, packet in w.output_packets(q):
            h = packet.header
            if h.vc == pk.VC_CTRL:
                got_ctrl[q][pk.encode_header(h)] += 1
            else:
                got_data[stream_key(q, h)].append(packet)
                got_times[stream_key(q, h)].append((t0, t_end))
    for key in sorted(set(exp.data) | set(got_data), key=lambda k: (k[0], repr(k[1]))):
        e, g = exp.data.get(key, []), got_data.get(key, [])
        if len(e) != len(g):
            w.fail(f"output {key[0]} stream {key[1]}: {len(g)} packets, expected {len(e)}")
        for k, (pe, pg) in enumerate(zip(e, g)):
            if pe.header != pg.header:
                w.fail(f"output {key[0]} phase {key[1]} packet {k}: header {pg.header} != {pe.header}")
            for j, (fe, fg) in enumerate(zip(pe.data, pg.data)):
                if fe != fg:
                    w.fail(f"output {key[0]} phase {key[1]} packet {k} flit {j}: {fg:#x} != "
                           f"expected {fe:#x}")
    for q in range(w.P):
        if got_ctrl.get(q, Counter()) != exp.ctrl.get(q, Counter()):
            w.fail(f"output {q}: control packets {dict(got_ctrl.get(q, {}))} != expected "
                   f"{dict(exp.ctrl.get(q, {}))}")
    s = w.status
    for name, want_n in (("err_packet", exp.err_packet), ("err_phase", exp.err_phase),
                         ("err_crc", 0), ("err_lost", 0), ("err_dup", 0), ("err_stale", 0)):
        if s[name] != want_n:
            w.fail(f"{name} {s[name]} != {want_n}")
    return got_times



def reset_sequence(cfg_words):
    """The cycles before a world's first: ``[(rst, cfg word or None), ...]``: 3 cycles of
    reset, one idle cycle, the configuration words one per cycle, one idle cycle."""
    return [(1, None)] * 3 + [(0, None)] + [(0, w) for w in cfg_words] + [(0, None)]
