"""The cocotb harness of the FRED switch benches (sim/benches/switch.py, sim/benches/overlap.py).

:class:`Bench` drives a switch under simulation: it loads the phase table through ``cfg``, runs
one credited source per input port (packets offered by :mod:`fred.sim.golden.switch`, sent only
while the source holds credits, credits counted back from ``credit_o``), one sink per output port
(random back-pressure, a receiver buffer returning credits on ``credit_i``, optionally starved),
watches every round start (strict-priority check) and splits the outputs back into packets.

Checks as things happen: a source never holds more credits than the switch's buffer of that
VC (a credit returned twice shows at once); with :meth:`Bench.expect`, every packet is checked
against the golden model the moment its last flit is delivered (data packets in order per
(output, phase), control packets as a multiset per output). :meth:`Bench.raise_errors` fails
the test on the first error (benches call it every cycle they wait).
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict, deque

import cocotb
from cocotb.triggers import FallingEdge, ReadOnly, RisingEdge

from fred.contract import packet as pk
from fred.contract.link import LinkSender
from fred.sim.golden import stream_key
from .streams import PauseGenerator, StreamDriver, StreamMonitor

__all__ = ["Bench", "RANK"]

RANK = {v: k for k, v in enumerate(pk.PRIORITY)}


def _cfield(value, cb, v):
    return (value >> (v * cb)) & ((1 << cb) - 1)


class Bench:
    def __init__(self, dut, cfg, rng, cycles):
        self.dut, self.cfg, self.rng, self.cycles = dut, cfg, rng, cycles
        self.P = cfg["ports"]
        self.flit_bits = cfg["lanes"] * {"fp16": 16, "bf16": 16, "fp32": 32, "int32": 32}[cfg["dtype"]]
        self.cb = cfg["credit_bits"]
        self.depths = cfg["depths"]
        # the links carry wire words: every flit sealed (head, VC, fseq, CRC); outputs checked
        self.wire = pk.WireFormat(self.flit_bits, cfg.get("fseq_bits", 8))
        self.tx = {p: LinkSender(self.wire) for p in range(self.P)}
        self.clk = dut.clk
        self.events = []          # (cycle, vc, phase) round starts
        self.round_log = []       # (cycle, vc, phase, ready_vcs) round starts (coverage)
        self.prio_errors = []
        self.credit_errors = []
        self.packet_errors = []
        self._exp = None          # per-packet scoreboard (see expect)
        self._partial = defaultdict(list)
        self.delivered = 0

    # -- configuration ---------------------------------------------------------------------------
    async def load_table(self, words):
        d = self.dut
        for w in words:
            await FallingEdge(self.clk)
            d.cfg__valid.value = 1
            d.cfg__payload.value = w
        await FallingEdge(self.clk)
        d.cfg__valid.value = 0
        for _ in range(3):
            await RisingEdge(self.clk)

    # -- sources ---------------------------------------------------------------------------------
    def start_sources(self, offered):
        self.drivers, self.sent_items = {}, {}
        self.src_credits = {p: list(self.depths) for p in range(self.P)}
        self.src_done = {p: False for p in range(self.P)}
        for p in range(self.P):
            drv = StreamDriver(self.dut, f"i__{p}", self.clk, self.cycles,
                               PauseGenerator(self.cfg.get("idle", 0.0), random.Random(self.rng.random())))
            self.drivers[p] = drv
            self.sent_items[p] = []
            cocotb.start_soon(self._credit_rx(p))
            cocotb.start_soon(self._source(p, offered[p].items, random.Random(self.rng.random())))

    async def _credit_rx(self, p):
        sig = getattr(self.dut, f"credit_o__{p}")
        while True:
            await FallingEdge(self.clk)
            await ReadOnly()
            val = int(sig.value)
            if val:
                for v in range(4):
                    self.src_credits[p][v] += _cfield(val, self.cb, v)
                    if self.src_credits[p][v] > self.depths[v]:
                        self.credit_errors.append(
                            f"input {p} VC {pk.VC_NAMES[v]}: {self.src_credits[p][v]} credits held, "
                            f"more than the {self.depths[v]}-flit buffer (a credit returned twice; "
                            f"cycle {self.cycles.now})")
            await RisingEdge(self.clk)

    async def _source(self, p, items, rng):
        queues = defaultdict(deque)
        for k, (kind, words, packet) in enumerate(items):
            vc = (words[0] >> 4) & 3
            queues[vc].append((k, words))
        delay = rng.randint(0, self.cfg.get("skew", 0))
        for _ in range(delay):
            await RisingEdge(self.clk)
        drv = self.drivers[p]
        while any(queues.values()):
            await RisingEdge(self.clk)
            if drv.queue:
                continue
            choices = [vc for vc, q in sorted(queues.items())
                       if q and self.src_credits[p][vc] >= len(q[0][1])]
            if not choices:
                continue
            vc = rng.choice(choices)
            k, words = queues[vc].popleft()
            self.src_credits[p][vc] -= len(words)
            assert self.src_credits[p][vc] >= 0
            drv.send(self.tx[p].seal_packet(words))
            self.sent_items[p].append((k, len(words)))
        while drv.queue:
            await RisingEdge(self.clk)
        self.src_done[p] = True

    async def send_credited(self, p, words):
        """Queue one packet's ``words`` at port p as soon as the port holds credits for all of
        them (virtual cut-through: whole packets only); returns the index of its first word in
        the driver's sent list."""
        vc = (words[0] >> 4) & 3
        while self.src_credits[p][vc] < len(words):
            await RisingEdge(self.clk)
        self.src_credits[p][vc] -= len(words)
        drv = self.drivers[p]
        first = len(drv.sent) + len(drv.queue)
        drv.send(self.tx[p].seal_packet(words))
        return first

    def item_end_cycles(self, p):
        """item index -> cycle its last flit was accepted."""
        out, pos = {}, 0
        sent = self.drivers[p].sent
        for k, n in self.sent_items[p]:
            pos += n
            out[k] = sent[pos - 1][0]
        return out

    # -- sinks -----------------------------------------------------------------------------------
    def start_sinks(self, grant_now=True):
        self.monitors, self.rx = {}, {}
        for q in range(self.P):
            st = {"vc": None, "received": [0] * 4, "granted": [0] * 4, "due": [], "grant": None}
            self.rx[q] = st
            mon = StreamMonitor(self.dut, f"o__{q}", self.clk, self.cycles,
                                PauseGenerator(self.cfg.get("stall", 0.0), random.Random(self.rng.random())),
                                on_beat=lambda c, w, q=q: self._on_beat(q, c, w),
                                keep=lambda w: not self.wire.is_probe(w))
            self.monitors[q] = mon
            cocotb.start_soon(self._credit_tx(q, random.Random(self.rng.random())))
        if grant_now:
            self.grant_all()

    def grant_all(self):
        for q in range(self.P):
            for v in range(4):
                n = self.cfg["rx_credits"][v]
                self.rx[q]["due"].extend([(0, v)] * n)

    def _on_beat(self, q, cyc, word):
        st = self.rx[q]
        if not self.wire.fields(word).ok:
            self.packet_errors.append(f"output {q} cycle {cyc}: wire check fails on {word:#x}")
        if self.wire.is_probe(word):
            return                    # a credit probe: no flit, no credit (no faults here)
        data, last = pk.word_fields(word, self.flit_bits)
        if st["vc"] is None:
            st["vc"] = (data >> 4) & 3
        v = st["vc"]
        st["received"][v] += 1
        if st["received"][v] > st["granted"][v]:
            self.credit_errors.append(f"output {q} VC {pk.VC_NAMES[v]}: flit {st['received'][v]} "
                                      f"sent with only {st['granted'][v]} credits granted (cycle {cyc})")
        dl = self.rng.randint(1, max(1, self.cfg.get("credit_delay", 1)))
        st["due"].append((cyc + dl, v))
        if last:
            st["vc"] = None
        if self._exp is not None:
            self._partial[q].append(word)
            if last:
                self._score(q, cyc, pk.unpack(self._partial.pop(q), self.flit_bits))

    # -- per-packet scoreboard -------------------------------------------------------------------
    def expect(self, data: dict, ctrl: dict):
        """Check every packet as it is delivered: ``data`` maps each stream
        (:func:`fred.sim.golden.switch.stream_key`) to the expected packets in order, ``ctrl``
        output -> Counter of encoded control headers."""
        self._exp = ({k: deque(v) for k, v in data.items()},
                     {q: Counter(c) for q, c in ctrl.items()})

    def _score(self, q, cyc, packet):
        self.delivered += 1
        data, ctrl = self._exp
        h = packet.header
        where = f"output {q} cycle {cyc}"
        if h.vc == pk.VC_CTRL:
            key = pk.encode_header(h)
            if ctrl.get(q, Counter())[key] <= 0:
                self.packet_errors.append(f"{where}: unexpected control packet {h}")
            else:
                ctrl[q][key] -= 1
            return
        queue = data.get(stream_key(q, h))
        if not queue:
            self.packet_errors.append(f"{where}: unexpected data packet {h} (no packet of this "
                                      f"phase or online stream is due at this output)")
            return
        want = queue.popleft()
        if want.header != h:
            self.packet_errors.append(f"{where}: header {h} != expected {want.header}")
        for j, (fe, fg) in enumerate(zip(want.data, packet.data)):
            if fe != fg:
                self.packet_errors.append(f"{where} phase {h.phase} flit {j}: {fg:#x} != "
                                          f"expected {fe:#x}")
                break

    def raise_errors(self):
        """Fail now on the first credit, priority or packet error seen so far."""
        for errs in (self.packet_errors, self.credit_errors, self.prio_errors):
            assert not errs, errs[0]

    async def _credit_tx(self, q, rng):
        sig = getattr(self.dut, f"credit_i__{q}")
        st = self.rx[q]
        sig.value = 0
        starve_until = 0
        pstarve, lstarve = self.cfg.get("starve", 0.0), self.cfg.get("starve_len", 0)
        burst = min(self.cfg.get("credit_burst", 2), (1 << self.cb) - 1)
        while True:
            await FallingEdge(self.clk)
            now = self.cycles.now
            if pstarve and now >= starve_until and rng.random() < pstarve:
                starve_until = now + rng.randint(1, lstarve)
            val = 0
            if now >= starve_until and st["due"]:
                counts = [0] * 4
                keep = []
                for when, v in st["due"]:
                    if when <= now and counts[v] < burst:
                        counts[v] += 1
                    else:
                        keep.append((when, v))
                st["due"] = keep
                for v in range(4):
                    st["granted"][v] += counts[v]
                    val |= counts[v] << (v * self.cb)
            sig.value = val

    # -- status ----------------------------------------------------------------------------------
    async def watch_rounds(self):
        d = self.dut
        pending = None
        while True:
            await FallingEdge(self.clk)
            await ReadOnly()
            now = self.cycles.now
            if pending is not None:
                t, ready = pending
                vc = int(d.act_vc.value)
                self.events.append((t, vc, int(d.act_phase.value)))
                self.round_log.append((t, vc, int(d.act_phase.value), ready))
                higher = [u for u in pk.PRIORITY[:RANK[vc]] if ready >> u & 1]
                if higher:
                    self.prio_errors.append(f"cycle {t}: started VC {pk.VC_NAMES[vc]} while "
                                            f"{pk.VC_NAMES[higher[0]]} was ready")
                pending = None
            if int(d.round_start.value):
                pending = (now, int(d.ready_vcs.value))
            await RisingEdge(self.clk)

    # -- results ---------------------------------------------------------------------------------
    def output_packets(self, q, partial_ok=False):
        """[(end cycle, start cycle, Packet)] from monitor q (strict framing; with
        ``partial_ok`` a packet still arriving is left out)."""
        out, cur, t0 = [], [], None
        for cyc, w in self.monitors[q].beats:
            if not cur:
                t0 = cyc
            cur.append(w)
            if pk.word_fields(w, self.flit_bits)[1]:
                out.append((cyc, t0, pk.unpack(cur, self.flit_bits)))
                cur = []
        assert partial_ok or not cur, f"output {q}: stream ends inside a packet"
        return out
