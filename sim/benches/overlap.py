"""cocotb scenario: a DP phase and an MP phase overlapping on one FRED switch (model vs RTL).

Run through :func:`fred.sim.characterize.overlap.measure_overlap` (testcase ``switch_overlap``); the
flow model's prediction of the same scenario is :func:`fred.benchmarks.overlap.model_overlap`.

Phase table (:func:`overlap_phases`): phase 0 = DP all-reduce over ports {0, 1}
(``Flow({0, 1}, {0, 1})``: reduce the two inputs, multicast the sum back to both), phase 1 = MP
all-reduce over ports {2, 3}, phase 2 = a one-round "primer" (DP, every port) sent before each
run so that every run starts with a *different* configuration loaded (each activation of the DP
and the MP phase is a new configuration, as in a training step where phases alternate).

Runs (one simulator run, one after the other, the switch idle in between):

* ``mp_alone``: ports 2, 3 each offer ``J`` MP packets of ``L`` data flits at once (queued
  back to back; each packet leaves the source as soon as it holds the credits);
* ``dp_alone``: ports 0, 1 each offer ``K`` DP packets the same way;
* ``both@o`` for every ``o`` in ``offsets``: the DP stream as in ``dp_alone``; ``o`` cycles
  after it starts, the MP burst as in ``mp_alone``.

Sinks always accept and grant their (large) buffer at once (``grant_now``); sources start with
the switch's input-buffer depth as credits and get them back as the switch forwards flits.

Per run (cycles; ``t_dp`` / ``t_mp`` = cycle the first DP / MP input flit was accepted):
``dp_end`` = DP's last output flit - ``t_dp``; ``mp_end`` = MP's last output flit - ``t_mp``;
``mp_in`` = ``t_mp - t_dp`` (both runs); ``dp_gap`` = longest pause between two DP output
packets at port 0 (cycles with no DP flit, 0 = back to back); ``mp_first`` = first MP header
out - last input flit of the first MP round (the preemption latency when DP holds the fabric);
``rounds`` = ``[cycle - t_dp, vc name, phase]`` of every round start. Every output packet is
checked bit-exactly against :class:`fred.sim.golden.switch.SwitchModel`; the strict-priority
check of :class:`fred.sim.benches.switch_harness.Bench` applies. Results go to ``cfg["out"]`` as JSON.
"""

from __future__ import annotations

import json
import random

import cocotb
from cocotb.triggers import RisingEdge

from fred.contract import packet as pk
from fred.hdl.netlist import Flow
from fred.sim.golden import Offered, SwitchModel, phases_from_json
from .streams import start, watchdog
from .switch_harness import Bench
from fred.sim.toolchain import bench_config

PH_DP, PH_MP, PH_PRIMER = 0, 1, 2
DP_PORTS, MP_PORTS = (0, 1), (2, 3)


def overlap_phases() -> dict:
    """The scenario's phase table ``{index: (vc, [Flow])}`` (4-port switch)."""
    return {
        PH_DP: (pk.VC_DP, [Flow(set(DP_PORTS), set(DP_PORTS))]),
        PH_MP: (pk.VC_MP, [Flow(set(MP_PORTS), set(MP_PORTS))]),
        PH_PRIMER: (pk.VC_DP, [Flow({0, 1, 2, 3}, {0, 1, 2, 3})]),
    }


class _Scenario:
    """State and steps of the overlap bench: the packets sent, the golden model, the runs."""

    def __init__(self, dut, cfg, rng, cycles, b, phases, golden):
        self.dut, self.cfg, self.rng, self.cycles, self.b = dut, cfg, rng, cycles, b
        self.phases, self.golden = phases, golden
        self.K, self.J, self.L = int(cfg["K"]), int(cfg["J"]), int(cfg["L"])
        self.seq = {}
        self.sent = {}          # (port, phase) -> [(seq, data)] in order

    # -- sources and sinks ---------------------------------------------------------------------
    def packet(self, p, phase, n):
        vc = self.phases[phase][0]
        s = self.seq.get((p, phase), 0)
        self.seq[(p, phase)] = (s + 1) % pk.SEQ_MOD
        FB = self.b.flit_bits
        data = tuple(self.rng.randrange(1 << FB) for _ in range(n))
        self.sent.setdefault((p, phase), []).append((s, data))
        return pk.pack(pk.Packet(pk.Header.data(vc, phase, s, n), data), FB)

    async def feed(self, p, phase, n, delay, first_idx):
        for _ in range(delay):
            await RisingEdge(self.dut.clk)
        for k in range(n):
            i = await self.b.send_credited(p, self.packet(p, phase, self.L))
            if k == 0:
                first_idx[p] = i

    async def quiet(self, n):
        for _ in range(n):
            await RisingEdge(self.dut.clk)

    def out_packets(self, q, t_from):
        return [(t_end, t0, x) for t_end, t0, x in self.b.output_packets(q, True) if t0 >= t_from]

    async def accepted(self, p, idx):
        drv = self.b.drivers[p]
        while len(drv.sent) <= idx:
            await RisingEdge(self.dut.clk)
            self.b.raise_errors()
        return drv.sent[idx][0]

    async def wait_flits(self, q, n, t_from):
        while sum(1 for c, _ in self.b.monitors[q].beats if c >= t_from) < n:
            await RisingEdge(self.dut.clk)
            self.b.raise_errors()

    def check_rounds(self, phase, ports, outs, t_from, k0, n):
        """Output packets of ``phase`` since ``t_from`` == golden model of rounds k0..k0+n-1."""
        vc = self.phases[phase][0]
        got = {q: [x for _, _, x in self.out_packets(q, t_from) if x.header.phase == phase]
               for q in outs}
        for q in outs:
            assert len(got[q]) == n, f"output {q}: {len(got[q])} packets of phase {phase}, expected {n}"
        for k in range(n):
            ins = {p: self.sent[(p, phase)][k0 + k] for p in ports}
            exp = self.golden.fabric_outputs(phase, {p: list(d) for p, (_, d) in ins.items()})
            s = ins[min(ports)][0]
            for q in outs:
                x = got[q][k]
                want = pk.Header.data(vc, phase, s, self.L)
                assert x.header == want, f"phase {phase} round {k0 + k} output {q}: header {x.header} != {want}"
                assert tuple(x.data) == tuple(exp[q]), f"phase {phase} round {k0 + k} output {q}: data mismatch"

    async def primer(self):
        t_from = self.cycles.now
        for p in range(self.b.P):
            await self.b.send_credited(p, self.packet(p, PH_PRIMER, 1))
        for q in range(self.b.P):
            await self.wait_flits(q, 2, t_from)
        await self.quiet(30)

    # -- one run -------------------------------------------------------------------------------
    async def run(self, name, dp, mp_off) -> dict:
        """One run (see the module docstring): ``dp`` streams DP, ``mp_off`` (None: no MP)
        starts the MP burst that many cycles later. Returns the run's figures."""
        K, J, L, b = self.K, self.J, self.L, self.b
        await self.primer()
        t_start = self.cycles.now
        first = {}
        k_dp = len(self.sent.get((DP_PORTS[0], PH_DP), []))
        k_mp = len(self.sent.get((MP_PORTS[0], PH_MP), []))
        ev0 = len(b.events)
        if dp:
            for p in DP_PORTS:
                cocotb.start_soon(self.feed(p, PH_DP, K, 0, first))
        if mp_off is not None:
            for p in MP_PORTS:
                cocotb.start_soon(self.feed(p, PH_MP, J, mp_off, first))
        if dp:
            for q in DP_PORTS:
                await self.wait_flits(q, K * (L + 1), t_start)
        if mp_off is not None:
            for q in MP_PORTS:
                await self.wait_flits(q, J * (L + 1), t_start)
        await self.quiet(40)                  # anything extra would show up now
        self._count_flits(name, t_start, K * (L + 1) if dp else 0,
                          J * (L + 1) if mp_off is not None else 0)
        r = await self._figures(dp, mp_off, t_start, first, k_dp, k_mp)
        t_ref = r.pop("_t_ref")
        r["rounds"] = [[t - t_ref, pk.VC_NAMES[vc], ph] for t, vc, ph in b.events[ev0:]]
        return r

    def _count_flits(self, name, t_start, n_dp, n_mp):
        for q in DP_PORTS:
            n = sum(1 for c, _ in self.b.monitors[q].beats if c >= t_start)
            assert n == n_dp, f"{name}: output {q} got {n} flits, expected {n_dp}"
        for q in MP_PORTS:
            n = sum(1 for c, _ in self.b.monitors[q].beats if c >= t_start)
            assert n == n_mp, f"{name}: output {q} got {n} flits, expected {n_mp}"

    async def _figures(self, dp, mp_off, t_start, first, k_dp, k_mp) -> dict:
        """Check the rounds against the golden model and measure dp_end, dp_gap, mp_end,
        mp_first, mp_in (and ``_t_ref``, the time origin of the round list)."""
        b, L = self.b, self.L
        r = {}
        t_dp = t_mp = None
        if dp:
            t_dp = min([await self.accepted(p, first[p]) for p in DP_PORTS])
            self.check_rounds(PH_DP, DP_PORTS, DP_PORTS, t_start, k_dp, self.K)
            r["dp_end"] = max(b.monitors[q].beats[-1][0] for q in DP_PORTS) - t_dp
            pk0 = self.out_packets(DP_PORTS[0], t_start)
            r["dp_gap"] = max([pk0[i + 1][1] - pk0[i][0] - 1 for i in range(len(pk0) - 1)], default=0)
        if mp_off is not None:
            t_mp = min([await self.accepted(p, first[p]) for p in MP_PORTS])
            self.check_rounds(PH_MP, MP_PORTS, MP_PORTS, t_start, k_mp, self.J)
            r["mp_end"] = max(b.monitors[q].beats[-1][0] for q in MP_PORTS) - t_mp
            ready = max([await self.accepted(p, first[p] + L) for p in MP_PORTS])
            hdr = min(x[1] for q in MP_PORTS for x in self.out_packets(q, t_start))
            r["mp_first"] = hdr - ready
        if dp and mp_off is not None:
            r["mp_in"] = t_mp - t_dp
        r["_t_ref"] = t_dp if t_dp is not None else t_mp
        return r


@cocotb.test()
async def switch_overlap(dut):
    """DP stream over {0,1} with an MP burst over {2,3}: completion times with / without overlap."""
    cfg = bench_config()
    L = int(cfg["L"])
    offsets = [int(o) for o in cfg.get("offsets", [20])]
    assert 1 <= L <= cfg["max_len"], f"L {L} must be 1..max_len {cfg['max_len']}"
    rng = random.Random(int(cocotb.RANDOM_SEED))
    cycles = await start(dut)
    cocotb.start_soon(watchdog(dut.clk, cfg.get("max_cycles", 100_000), "overlap bench"))
    b = Bench(dut, cfg, rng, cycles)
    assert b.P == 4, "the overlap scenario is written for a 4-port switch"
    phases = phases_from_json(cfg["phases"])
    golden = SwitchModel(b.P, cfg["middle"], cfg["lanes"], cfg["dtype"], phases,
                         fabric=cfg["fabric"], max_len=cfg["max_len"])
    await b.load_table(cfg["cfg_words"])
    cocotb.start_soon(b.watch_rounds())
    b.start_sinks(grant_now=True)
    b.start_sources({p: Offered() for p in range(b.P)})
    sc = _Scenario(dut, cfg, rng, cycles, b, phases, golden)

    results = {}
    runs = [("mp_alone", False, 0), ("dp_alone", True, None)] + \
           [(f"both@{o}", True, o) for o in offsets]
    for name, dp, mp_off in runs:
        r = await sc.run(name, dp, mp_off)
        results[name] = r
        dut._log.info(f"overlap {name}: { {k: v for k, v in r.items() if k != 'rounds'} }")
        await sc.quiet(20)
    b.raise_errors()
    assert int(dut.err_packet.value) == 0 and int(dut.err_phase.value) == 0, "switch dropped packets"
    if cfg.get("out"):
        with open(cfg["out"], "w") as f:
            json.dump(results, f)
