"""cocotb bench for the FRED switch (run through tests/sim/test_switch_bench.py / measure_switch).

Configuration (``bench_config()``): the switch parameters (``ports``, ``middle``, ``lanes``,
``dtype``, ``fabric``, ``depths``, ``max_len``, ``table_entries``), the phase table
(``phases``, see :func:`fred.sim.golden.switch.phases_to_json`), and the scenario knobs:
``rounds``, ``ctrl_rate``, ``bad_rate``, ``unknown_phase``, ``online_rate`` (default-index
packets mixed in, :func:`fred.sim.golden.switch.make_traffic`), ``online_pattern`` (``perm`` or
``a2a``: default-index traffic only, ``rounds`` permutations or all-to-all exchanges),
``skew`` (max start delay per input),
``idle`` (source idle probability), ``stall`` (sink back-pressure probability), ``rx_credits``
(receiver buffer per VC), ``credit_burst`` (credits returned per VC per cycle at most,
default 2), ``credit_delay`` (max cycles before a credit returns), ``starve``
(probability per cycle of a credit-starvation window of up to ``starve_len`` cycles), ``bound``
(cycles a round may take from its last input flit to its last output flit), ``max_cycles``
(watchdog), ``out`` (write measurements as JSON there). The tests build the switch with a
``fault`` (``fred.hdl.switch.top.SWITCH_FAULTS``) to show that these checks catch broken hardware.

The benchmark (``python -m fred.bench switch``) is :func:`fred.sim.characterize.switch.main`.

The DUT is built with ``out_credits = 0``: the bench's receivers grant their buffer as credits
(immediately, or in ``priority`` mode only once every input has been delivered).

Checks: every packet as it is delivered (bit-exact data per (output, phase) in order, control
packets per output as a multiset: :meth:`fred.sim.benches.switch_harness.Bench.expect`), sources never
holding more credits than the buffer, then at the end: nothing missing;
error counters; nothing lost or duplicated (exact flit counts, and nothing more arrives); every
round within ``bound``; strict priority at every round start (no higher-priority VC was ready);
output credits never exceeded; in ``priority`` mode, at every output all MP packets precede all
PP packets, which precede all DP packets.
"""

from __future__ import annotations

import json
import random
from collections import Counter, defaultdict

import cocotb
from cocotb.triggers import RisingEdge

from fred.contract import packet as pk
from fred.sim.benches import cover as coverage
from fred.sim.golden import (Offered, SwitchModel, make_online_traffic, make_traffic,
                                    phases_from_json, stream_key)
from .streams import start, watchdog
from .switch_harness import RANK, Bench
from fred.sim.toolchain import bench_config

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
    if cfg.get("online_pattern"):
        offered = make_online_traffic(b.P, rng, pattern=cfg["online_pattern"], rounds=cfg["rounds"],
                                      flit_bits=b.flit_bits, max_len=cfg["max_len"])
    else:
        offered = make_traffic(b.P, phases, rng, rounds=cfg["rounds"], flit_bits=b.flit_bits,
                               max_len=cfg["max_len"], ctrl_rate=cfg.get("ctrl_rate", 0.0),
                               bad_rate=cfg.get("bad_rate", 0.0),
                               unknown_phase=cfg.get("unknown_phase"),
                               online_rate=cfg.get("online_rate", 0.0))
    exp = model.expected(offered)
    b.expect(exp.data, exp.ctrl)
    cocotb.start_soon(b.watch_rounds())
    b.start_sinks(grant_now=(mode != "priority"))
    b.start_sources(offered)
    want = exp.flits()
    if mode == "priority":
        while not all(b.src_done.values()):
            await RisingEdge(dut.clk)
            b.raise_errors()
        for _ in range(4 * b.P + 20):
            await RisingEdge(dut.clk)
        assert all(not m.beats for m in b.monitors.values()), "data left before credits were granted"
        b.grant_all()
    quiet, seen = 0, -1
    while any(len(b.monitors[q].beats) < want.get(q, 0) for q in range(b.P)) \
            or not all(b.src_done.values()):
        await RisingEdge(dut.clk)
        b.raise_errors()                    # a wrong packet fails the moment it is delivered
        now = sum(len(m.beats) for m in b.monitors.values())
        quiet = quiet + 1 if now == seen and all(b.src_done.values()) else 0
        seen = now
        if quiet > cfg.get("bound", 10_000):
            break                           # flits lost: reported by the count check below
    for _ in range(60 + 4 * b.P):          # anything extra would show up now
        await RisingEdge(dut.clk)
        b.raise_errors()

    got_times = _check_outputs(dut, b, exp, want)
    worst = _check_rounds(b, exp, got_times, cfg)
    if mode == "priority":
        _check_priority_order(b, cfg)
    coverage.sample_switch(b.round_log, [(q, p.header) for q in range(b.P)
                                         for _, _, p in b.output_packets(q) if p.header.vc == pk.VC_CTRL])
    coverage.export(f"switch-{mode}")
    peak = int(dut.peak.value)
    lw = max(b.depths).bit_length()
    peaks = {pk.VC_NAMES[v]: (peak >> (v * lw)) & ((1 << lw) - 1) for v in range(4)}
    dut._log.info(f"switch bench {mode}: {cycles.now} cycles, {len(b.events)} rounds, "
                  f"worst round latency {worst}, peak occupancy {peaks}")
    if cfg.get("out"):
        with open(cfg["out"], "w") as f:
            json.dump({"cycles": cycles.now, "rounds": len(b.events), "worst_round": worst,
                       "peak": peaks}, f)


def _check_outputs(dut, b, exp, want):
    """Exact flit counts, bit-exact data packets per (output, phase), control packets per
    output, error counters, credits and priority; returns the data packets' (start, end)
    cycles per (output, phase)."""
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
                got_data[stream_key(q, h)].append(packet)
                got_times[stream_key(q, h)].append((t0, t_end))
    # keys: (output, phase) and (output, (255, port, vc)) for online streams: sort as text
    for key in sorted(set(exp.data) | set(got_data), key=lambda k: (k[0], repr(k[1]))):
        e, g = exp.data.get(key, []), got_data.get(key, [])
        assert len(e) == len(g), f"output {key[0]} stream {key[1]}: {len(g)} packets, expected {len(e)}"
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
    for name in ("err_crc", "err_lost", "err_dup", "err_stale"):     # no link faults here
        assert int(getattr(dut, name).value) == 0, f"{name} {int(getattr(dut, name).value)} != 0"
    assert not b.credit_errors, b.credit_errors[0]
    assert not b.prio_errors, b.prio_errors[0]
    return got_times


def _check_rounds(b, exp, got_times, cfg) -> int:
    """Every round within ``bound`` cycles from its last input flit; returns the worst."""
    ends = {p: b.item_end_cycles(p) for p in range(b.P)}
    worst = 0
    for (idx, k), r in exp.rounds.items():
        t_in = max(ends[p][i] for p, i in r["inputs"].items())
        for q in r["outputs"]:
            t_out = got_times[(q, idx)][k][1]
            worst = max(worst, t_out - t_in)
            assert t_out - t_in <= cfg.get("bound", 10_000), \
                f"phase {idx} round {k} at output {q}: {t_out - t_in} cycles > bound {cfg['bound']}"
    return worst


def _check_priority_order(b, cfg):
    """``priority`` mode: at every output all MP packets precede all PP, then all DP."""
    rank = dict(RANK)
    for q in range(b.P):
        ranks = [rank[p.header.vc] for _, _, p in b.output_packets(q) if p.header.vc != pk.VC_CTRL]
        assert ranks == sorted(ranks), f"output {q}: VC order {ranks} violates MP > PP > DP"


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
    """Latency measurements (see sim/characterize/switch.py); writes JSON to cfg['out']."""
    await measure_in_bench(dut)


# -- inside cocotb ---------------------------------------------------------------------------
class _Measurement:
    """The steps of the ``switch_measure`` scenario on a loaded, running :class:`Bench`."""

    def __init__(self, dut, cfg, rng, b):
        self.dut, self.cfg, self.rng, self.b = dut, cfg, rng, b
        P = b.P
        self.L = cfg["max_len"]
        half = P // 2
        self.A_ports, self.B_ports, self.C_ports = list(range(half)), list(range(half, P)), list(range(P))
        self.seq = {}

    def packet(self, p, phase, vc, n):
        s = self.seq.get((p, phase), 0)
        self.seq[(p, phase)] = s + 1
        FB = self.b.flit_bits
        data = tuple(self.rng.randrange(1 << FB) for _ in range(n))
        return pk.pack(pk.Packet(pk.Header.data(vc, phase, s, n), data), FB)

    async def send(self, p, words):
        """Queue words at port p once credits allow; return the index of its last beat."""
        return await self.b.send_credited(p, words) + len(words)

    async def send_at(self, p, words):
        """Queue words at port p once credits allow; return (first beat index + 1, last beat
        index + 1) for :meth:`sent_at`."""
        first = await self.b.send_credited(p, words)
        return first + 1, first + len(words)

    async def sent_at(self, p, end):
        drv = self.b.drivers[p]
        while len(drv.sent) < end:
            await RisingEdge(self.dut.clk)
        return drv.sent[end - 1][0]

    async def round_of(self, phase, vc, ports, n):
        """One packet per port; ``{p: (header beat, last beat)}`` (indices + 1)."""
        return {p: await self.send_at(p, self.packet(p, phase, vc, n)) for p in ports}

    async def done(self, ends):
        """Cycles the round's last header and last flit were accepted (the latest over ports)."""
        heads = [await self.sent_at(p, h) for p, (h, _) in ends.items()]
        lasts = [await self.sent_at(p, e) for p, (_, e) in ends.items()]
        return max(heads), max(lasts)

    def packets(self, q):
        return [(t_end, t0, x) for t_end, t0, x in self.b.output_packets(q, True)
                if x.header.vc != pk.VC_CTRL]

    async def wait_packets(self, q, n):
        while True:
            if len(self.packets(q)) >= n:
                return
            await RisingEdge(self.dut.clk)

    async def quiet(self, n=20):
        for _ in range(n):
            await RisingEdge(self.dut.clk)

    async def activation(self, res):
        """1. activation on an idle switch: new configuration, then the same one again
        (same_config: the worst of several samples -- the scanner position varies)."""
        b, L, packets = self.b, self.L, self.packets
        act, first, c_act, c_first = {}, {}, {}, {}

        def worst(d, k, v):
            d[k] = max(d.get(k, v), v)
        for name in ("new_config",) + ("same_config",) * self.cfg.get("activation_samples", 6):
            n0 = len(packets(0))
            ends = await self.round_of(0, pk.VC_DP, self.A_ports, L)
            t_head, t_in = await self.done(ends)
            await self.wait_packets(0, n0 + 1)
            t_end, t0, _ = packets(0)[n0]
            beats = [c for c, _ in b.monitors[0].beats if c > t0]
            worst(act, name, t0 - t_in)
            worst(first, name, beats[0] - t_in)
            worst(c_act, name, t0 - t_head)
            worst(c_first, name, beats[0] - t_head)
            await self.quiet(20 + self.rng.randrange(b.P))
        res["activation_cycles"] = act
        res["first_data_cycles"] = first
        res["cut_through_cycles"] = {"activation": c_act, "first_data": c_first}

    async def phase_switch(self, res):
        """2. successive rounds, the second already buffered when the first ends."""
        L, packets, send, packet = self.L, self.packets, self.send, self.packet
        A_ports, B_ports = self.A_ports, self.B_ports
        detail = {}
        # same phase twice
        n0 = len(packets(0))
        await self.round_of(0, pk.VC_DP, A_ports, L)
        await self.round_of(0, pk.VC_DP, A_ports, L)
        await self.wait_packets(0, n0 + 2)
        p0 = packets(0)
        detail["same_phase"] = p0[n0 + 1][1] - p0[n0][0]
        await self.quiet()
        # different phase, same VC: A then B, both buffered (B's inputs sent first, A's right after)
        nA, nB = len(packets(A_ports[0])), len(packets(B_ports[0]))
        for p in B_ports + A_ports:
            await send(p, packet(p, 0 if p in A_ports else 1, pk.VC_DP, L))
        await self.wait_packets(A_ports[0], nA + 1)
        await self.wait_packets(B_ports[0], nB + 1)
        pa, pb = packets(A_ports[0])[nA], packets(B_ports[0])[nB]
        first, second = (pa, pb) if pa[1] < pb[1] else (pb, pa)
        detail["new_phase_same_vc"] = second[1] - first[0]
        await self.quiet()
        # different VC: DP round A and MP round C buffered together; MP goes first, then DP
        n0 = len(packets(0))
        for p in self.C_ports:
            await send(p, packet(p, 2, pk.VC_MP, L))
        for p in A_ports:
            await send(p, packet(p, 0, pk.VC_DP, L))
        await self.wait_packets(0, n0 + 2)
        p0 = packets(0)
        detail["new_vc"] = p0[n0 + 1][1] - p0[n0][0]
        assert p0[n0][2].header.vc == pk.VC_MP, "MP round did not go first"
        res["phase_switch_detail"] = detail
        res["phase_switch_cycles"] = detail["new_phase_same_vc"]
        await self.quiet()

    async def preemption(self, res):
        """3. preemption: DP phase A streams on the low ports; MP rounds of phase D (high ports,
        1 data flit) become complete at random times and must wait for the DP packet in flight."""
        b, L, packets, send, packet = self.b, self.L, self.packets, self.send, self.packet
        B_ports = self.B_ports
        n_pre = self.cfg.get("preemptions", 10)
        stop = {"dp": False}

        async def dp_feeder(p):
            while not stop["dp"]:
                await send(p, packet(p, 0, pk.VC_DP, L))
                while b.drivers[p].queue:
                    await RisingEdge(self.dut.clk)

        def mp_count():
            return len([x for x in packets(B_ports[0]) if x[2].header.vc == pk.VC_MP])

        n_mp0 = mp_count()
        for p in self.A_ports:
            cocotb.start_soon(dp_feeder(p))
        await self.quiet(60)
        samples, c_samples = [], []
        for k in range(n_pre):
            await self.quiet(self.rng.randint(1, 3 * (L + 2)))
            ends = {p: await self.send_at(p, packet(p, 3, pk.VC_MP, 1)) for p in B_ports}
            t_head, t_ready = await self.done(ends)
            while mp_count() < n_mp0 + k + 1:
                await RisingEdge(self.dut.clk)
            t_hdr = [x for x in packets(B_ports[0]) if x[2].header.vc == pk.VC_MP][n_mp0 + k][1]
            samples.append(t_hdr - t_ready)
            c_samples.append(t_hdr - t_head)
        stop["dp"] = True
        res["preemption_cycles"] = _stats(samples)
        res["cut_through_cycles"]["preemption"] = _stats(c_samples)
        await self.quiet(100)


def _stats(samples):
    return {"min": min(samples), "max": max(samples), "mean": round(sum(samples) / len(samples), 2),
            "samples": len(samples)}


async def measure_in_bench(dut):
    """The ``switch_measure`` cocotb test body (phases from :func:`fred.sim.characterize.switch._phases`)."""
    cfg = bench_config()
    rng = random.Random(int(cocotb.RANDOM_SEED))
    cycles = await start(dut)
    cocotb.start_soon(watchdog(dut.clk, cfg.get("max_cycles", 200_000), "switch measurement"))
    b = Bench(dut, cfg, rng, cycles)
    await b.load_table(cfg["cfg_words"])
    b.start_sinks(grant_now=True)
    b.start_sources({p: Offered() for p in range(b.P)})
    me = _Measurement(dut, cfg, rng, b)
    res = {}
    await me.activation(res)
    await me.phase_switch(res)
    await me.preemption(res)
    dut._log.info(f"switch measurement: {res}")
    with open(cfg["out"], "w") as f:
        json.dump(res, f)
