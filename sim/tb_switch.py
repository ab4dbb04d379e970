"""cocotb bench for the FRED switch (run through tests/test_switch_bench.py / measure_switch).

Configuration (``bench_config()``): the switch parameters (``ports``, ``middle``, ``lanes``,
``dtype``, ``fabric``, ``depths``, ``max_len``, ``table_entries``), the phase table
(``phases``, see :func:`fred.sim.golden_switch.phases_to_json`), and the scenario knobs:
``rounds``, ``ctrl_rate``, ``bad_rate``, ``unknown_phase``, ``skew`` (max start delay per input),
``idle`` (source idle probability), ``stall`` (sink back-pressure probability), ``rx_credits``
(receiver buffer per VC), ``credit_burst`` (credits returned per VC per cycle at most,
default 2), ``credit_delay`` (max cycles before a credit returns), ``starve``
(probability per cycle of a credit-starvation window of up to ``starve_len`` cycles), ``bound``
(cycles a round may take from its last input flit to its last output flit), ``max_cycles``
(watchdog), ``expect_corrupt`` (flip one expected flit: the checker must fail), ``out``
(write measurements as JSON there), ``expect_prio_reversed`` (check the reversed priority
order: must fail).

The benchmark (``python -m fred.bench switch``) is :func:`fred.sim.measure_switch.main`.

The DUT is built with ``out_credits = 0``: the bench's receivers grant their buffer as credits
(immediately, or in ``priority`` mode only once every input has been delivered).

Checks: bit-exact data per (output, phase) in order; control packets per output (multiset);
error counters; nothing lost or duplicated (exact flit counts, and nothing more arrives); every
round within ``bound``; strict priority at every round start (no higher-priority VC was ready);
output credits never exceeded; in ``priority`` mode, at every output all MP packets precede all
PP packets, which precede all DP packets.
"""

from __future__ import annotations

import json
import random
from collections import Counter, defaultdict, deque

import cocotb
from cocotb.triggers import FallingEdge, ReadOnly, RisingEdge

from fred.contract import packet as pk
from fred.sim.golden_switch import Offered, SwitchModel, make_traffic, phases_from_json
from fred.sim.streams import PauseGenerator, StreamDriver, StreamMonitor, start, watchdog
from fred.sim.toolchain import bench_config

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
        self.clk = dut.clk
        self.events = []          # (cycle, "start", vc) round starts
        self.prio_errors = []
        self.credit_errors = []

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
            drv.send(words)
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
        drv.send(words)
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
                                on_beat=lambda c, w, q=q: self._on_beat(q, c, w))
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


def _model(cfg):
    phases = phases_from_json(cfg["phases"])
    return phases, SwitchModel(cfg["ports"], cfg["middle"], cfg["lanes"], cfg["dtype"], phases,
                               fabric=cfg["fabric"], max_len=cfg["max_len"])


async def _run(dut, mode):
    cfg = bench_config()
    rng = random.Random(int(cocotb.RANDOM_SEED))
    cycles = await start(dut)
    cocotb.start_soon(watchdog(dut.clk, cfg.get("max_cycles", 100_000), "switch bench"))
    b = Bench(dut, cfg, rng, cycles)
    phases, model = _model(cfg)
    bad_cfg = cfg.get("bad_cfg_words", [])
    await b.load_table(cfg["cfg_words"] + bad_cfg)
    assert int(dut.cfg_rejects.value) == len(bad_cfg), \
        f"cfg_rejects {int(dut.cfg_rejects.value)} != {len(bad_cfg)} bad configuration writes"
    offered = make_traffic(b.P, phases, rng, rounds=cfg["rounds"], flit_bits=b.flit_bits,
                           max_len=cfg["max_len"], ctrl_rate=cfg.get("ctrl_rate", 0.0),
                           bad_rate=cfg.get("bad_rate", 0.0),
                           unknown_phase=cfg.get("unknown_phase"))
    exp = model.expected(offered)
    if cfg.get("expect_corrupt"):
        key = sorted(exp.data)[0]
        p0 = exp.data[key][0]
        exp.data[key][0] = p0.with_data((p0.data[0] ^ 1,) + p0.data[1:])
    cocotb.start_soon(b.watch_rounds())
    b.start_sinks(grant_now=(mode != "priority"))
    b.start_sources(offered)
    want = exp.flits()
    if mode == "priority":
        while not all(b.src_done.values()):
            await RisingEdge(dut.clk)
        for _ in range(4 * b.P + 20):
            await RisingEdge(dut.clk)
        assert all(not m.beats for m in b.monitors.values()), "data left before credits were granted"
        b.grant_all()
    while any(len(b.monitors[q].beats) < want.get(q, 0) for q in range(b.P)) \
            or not all(b.src_done.values()):
        await RisingEdge(dut.clk)
    for _ in range(60 + 4 * b.P):          # anything extra would show up now
        await RisingEdge(dut.clk)

    # -- checks -----------------------------------------------------------------------------
    for q in range(b.P):
        n = len(b.monitors[q].beats)
        assert n == want.get(q, 0), f"output {q}: {n} flits, expected {want.get(q, 0)} (lost or duplicated)"
    got_data, got_ctrl, got_times = defaultdict(list), defaultdict(Counter), defaultdict(list)
    for q in range(b.P):
        for t_end, t0, packet in b.output_packets(q):
            h = packet.header
            if h.vc == pk.VC_CTRL:
                got_ctrl[q][pk.encode_header(h)] += 1
            else:
                got_data[(q, h.phase)].append(packet)
                got_times[(q, h.phase)].append((t0, t_end))
    for key in sorted(set(exp.data) | set(got_data)):
        e, g = exp.data.get(key, []), got_data.get(key, [])
        assert len(e) == len(g), f"output {key[0]} phase {key[1]}: {len(g)} packets, expected {len(e)}"
        for k, (pe, pg) in enumerate(zip(e, g)):
            assert pe.header == pg.header, f"output {key[0]} phase {key[1]} packet {k}: header {pg.header} != {pe.header}"
            for j, (fe, fg) in enumerate(zip(pe.data, pg.data)):
                assert fe == fg, (f"output {key[0]} phase {key[1]} packet {k} flit {j}: "
                                  f"{fg:#x} != expected {fe:#x}")
    for q in range(b.P):
        assert got_ctrl.get(q, Counter()) == exp.ctrl.get(q, Counter()), \
            f"output {q}: control packets {dict(got_ctrl.get(q, {}))} != expected {dict(exp.ctrl.get(q, {}))}"
    assert int(dut.err_packet.value) == exp.err_packet, \
        f"err_packet {int(dut.err_packet.value)} != {exp.err_packet} malformed packets sent"
    assert int(dut.err_phase.value) == exp.err_phase, \
        f"err_phase {int(dut.err_phase.value)} != {exp.err_phase} unknown-phase packets sent"
    assert not b.credit_errors, b.credit_errors[0]
    assert not b.prio_errors, b.prio_errors[0]
    ends = {p: b.item_end_cycles(p) for p in range(b.P)}
    worst = 0
    for (idx, k), r in exp.rounds.items():
        t_in = max(ends[p][i] for p, i in r["inputs"].items())
        for q in r["outputs"]:
            t_out = got_times[(q, idx)][k][1]
            worst = max(worst, t_out - t_in)
            assert t_out - t_in <= cfg.get("bound", 10_000), \
                f"phase {idx} round {k} at output {q}: {t_out - t_in} cycles > bound {cfg['bound']}"
    if mode == "priority":
        rank = dict(RANK)
        if cfg.get("expect_prio_reversed"):      # the order check must be able to fail
            rank = {v: -r for v, r in RANK.items()}
        for q in range(b.P):
            ranks = [rank[p.header.vc] for _, _, p in b.output_packets(q) if p.header.vc != pk.VC_CTRL]
            assert ranks == sorted(ranks), f"output {q}: VC order {ranks} violates MP > PP > DP"
    peak = int(dut.peak.value)
    lw = max(b.depths).bit_length()
    peaks = {pk.VC_NAMES[v]: (peak >> (v * lw)) & ((1 << lw) - 1) for v in range(4)}
    dut._log.info(f"switch bench {mode}: {cycles.now} cycles, {len(b.events)} rounds, "
                  f"worst round latency {worst}, peak occupancy {peaks}")
    if cfg.get("out"):
        with open(cfg["out"], "w") as f:
            json.dump({"cycles": cycles.now, "rounds": len(b.events), "worst_round": worst,
                       "peak": peaks}, f)


@cocotb.test()
async def switch_random(dut):
    """Random phases, skew, credit starvation and back-pressure; everything checked."""
    await _run(dut, "random")


@cocotb.test()
async def switch_priority(dut):
    """All traffic buffered before credits appear: outputs must show MP, then PP, then DP."""
    await _run(dut, "priority")


@cocotb.test()
async def switch_measure(dut):
    """Latency measurements (see sim/measure_switch.py); writes JSON to cfg['out']."""
    await measure_in_bench(dut)


# -- inside cocotb ---------------------------------------------------------------------------
async def measure_in_bench(dut):
    """The ``switch_measure`` cocotb test body (phases from :func:`fred.sim.measure_switch._phases`)."""
    cfg = bench_config()
    rng = random.Random(int(cocotb.RANDOM_SEED))
    cycles = await start(dut)
    cocotb.start_soon(watchdog(dut.clk, cfg.get("max_cycles", 200_000), "switch measurement"))
    b = Bench(dut, cfg, rng, cycles)
    await b.load_table(cfg["cfg_words"])
    b.start_sinks(grant_now=True)
    b.start_sources({p: Offered() for p in range(b.P)})
    P, L, FB = b.P, cfg["max_len"], b.flit_bits
    half = P // 2
    A_ports, B_ports, C_ports = list(range(half)), list(range(half, P)), list(range(P))
    seq = {}

    def packet(p, phase, vc, n):
        s = seq.get((p, phase), 0)
        seq[(p, phase)] = s + 1
        data = tuple(rng.randrange(1 << FB) for _ in range(n))
        return pk.pack(pk.Packet(pk.Header.data(vc, phase, s, n), data), FB)

    async def send(p, words):
        """Queue words at port p once credits allow; return the index of its last beat."""
        return await b.send_credited(p, words) + len(words)

    async def sent_at(p, end):
        drv = b.drivers[p]
        while len(drv.sent) < end:
            await RisingEdge(dut.clk)
        return drv.sent[end - 1][0]

    async def round_of(phase, vc, ports, n):
        ends = {p: await send(p, packet(p, phase, vc, n)) for p in ports}
        return ends

    async def done(ends):
        return max([await sent_at(p, e) for p, e in ends.items()])

    def packets(q):
        return [(t_end, t0, x) for t_end, t0, x in b.output_packets(q, True) if x.header.vc != pk.VC_CTRL]

    async def wait_packets(q, n):
        while True:
            if len(packets(q)) >= n:
                return
            await RisingEdge(dut.clk)

    async def quiet(n=20):
        for _ in range(n):
            await RisingEdge(dut.clk)

    res = {}
    # 1. activation on an idle switch: new configuration, then the same one again
    #    (same_config: the worst of several samples -- the scanner position varies)
    act, first = {}, {}
    for name in ("new_config",) + ("same_config",) * cfg.get("activation_samples", 6):
        n0 = len(packets(0))
        ends = await round_of(0, pk.VC_DP, A_ports, L)
        t_in = await done(ends)
        await wait_packets(0, n0 + 1)
        t_end, t0, _ = packets(0)[n0]
        beats = [c for c, _ in b.monitors[0].beats if c > t0]
        act[name] = max(act.get(name, 0), t0 - t_in)
        first[name] = max(first.get(name, 0), beats[0] - t_in)
        await quiet(20 + rng.randrange(P))
    res["activation_cycles"] = act
    res["first_data_cycles"] = first

    # 2. successive rounds, the second already buffered when the first ends
    detail = {}
    # same phase twice
    n0 = len(packets(0))
    await round_of(0, pk.VC_DP, A_ports, L)
    await round_of(0, pk.VC_DP, A_ports, L)
    await wait_packets(0, n0 + 2)
    p0 = packets(0)
    detail["same_phase"] = p0[n0 + 1][1] - p0[n0][0]
    await quiet()
    # different phase, same VC: A then B, both buffered (B's inputs sent first, A's right after)
    nA, nB = len(packets(A_ports[0])), len(packets(B_ports[0]))
    for p in B_ports + A_ports:
        await send(p, packet(p, 0 if p in A_ports else 1, pk.VC_DP, L))
    await wait_packets(A_ports[0], nA + 1)
    await wait_packets(B_ports[0], nB + 1)
    pa, pb = packets(A_ports[0])[nA], packets(B_ports[0])[nB]
    first, second = (pa, pb) if pa[1] < pb[1] else (pb, pa)
    detail["new_phase_same_vc"] = second[1] - first[0]
    await quiet()
    # different VC: DP round A and MP round C buffered together; MP goes first, then DP
    n0 = len(packets(0))
    for p in C_ports:
        await send(p, packet(p, 2, pk.VC_MP, L))
    for p in A_ports:
        await send(p, packet(p, 0, pk.VC_DP, L))
    await wait_packets(0, n0 + 2)
    p0 = packets(0)
    detail["new_vc"] = p0[n0 + 1][1] - p0[n0][0]
    assert p0[n0][2].header.vc == pk.VC_MP, "MP round did not go first"
    res["phase_switch_detail"] = detail
    res["phase_switch_cycles"] = detail["new_phase_same_vc"]
    await quiet()

    # 3. preemption: DP phase A streams on the low ports; MP rounds of phase D (high ports,
    #    1 data flit) become complete at random times and must wait for the DP packet in flight
    n_pre = cfg.get("preemptions", 10)
    stop = {"dp": False}

    async def dp_feeder(p):
        while not stop["dp"]:
            await send(p, packet(p, 0, pk.VC_DP, L))
            while b.drivers[p].queue:
                await RisingEdge(dut.clk)

    def mp_count():
        return len([x for x in packets(B_ports[0]) if x[2].header.vc == pk.VC_MP])

    n_mp0 = mp_count()
    for p in A_ports:
        cocotb.start_soon(dp_feeder(p))
    await quiet(60)
    samples = []
    for k in range(n_pre):
        await quiet(rng.randint(1, 3 * (L + 2)))
        ends = {p: await send(p, packet(p, 3, pk.VC_MP, 1)) for p in B_ports}
        t_ready = max([await sent_at(p, e) for p, e in ends.items()])
        while mp_count() < n_mp0 + k + 1:
            await RisingEdge(dut.clk)
        t_hdr = [x for x in packets(B_ports[0]) if x[2].header.vc == pk.VC_MP][n_mp0 + k][1]
        samples.append(t_hdr - t_ready)
    stop["dp"] = True
    res["preemption_cycles"] = {"min": min(samples), "max": max(samples),
                                "mean": round(sum(samples) / len(samples), 2),
                                "samples": len(samples)}
    await quiet(100)
    dut._log.info(f"switch measurement: {res}")
    with open(cfg["out"], "w") as f:
        json.dump(res, f)
