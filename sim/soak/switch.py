"""Compiled long soak of the FRED switch: the golden switch model's traffic replayed in C++
(sim/compiled/harness.cpp, replay mode), checked by Python batch by batch.

A batch: a reset and the phase table loaded (lockstep cycles), then one replay of a random
program -- :func:`fred.sim.golden.switch.make_traffic` (rounds of the table's phases, control
packets, malformed packets, online-routed packets mixed in) or
:func:`fred.sim.golden.switch.make_online_traffic` (``"perm"`` / ``"a2a"``: default-index
traffic alone) --, any phase table the golden model knows (:func:`fred.sim.golden.switch.phases_from_json`
form). Every packet is sealed into wire words by :class:`fred.contract.link.LinkSender` (the
contract's CRC), so the harness never computes a check. Back-pressure per batch: idle sources
and stalled sinks from seeded pause patterns, credits returned after a random delay.

Checked per batch (the checks of the cocotb switch bench, sim/benches/switch.py): no hang (the
budget), the stream rule on every output in every cycle, every output word's link check, every
data packet bit-exact and in order per stream (:func:`fred.sim.golden.switch.stream_key`),
control packets per output as a multiset, exact flit counts with nothing extra after the drain,
the error counters (``err_packet`` / ``err_phase`` = the malformed packets sent, the link
counters 0), strict priority at every round start, every round within ``bound`` cycles of its
last input flit.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field

import numpy as np

from fred.contract import packet as pk
from fred.contract.link import LinkSender

from fred.sim.golden import SwitchModel, make_online_traffic, make_traffic, phases_from_json
from fred.sim.compiled import RANK, BenchFailure, check_outputs, reset_sequence

from .run import CycleRates

__all__ = ["switch_soak", "SwitchSoakReport", "replay_stimulus", "parse_replay", "default_phases",
           "load_table", "TRAFFIC"]

#: the programs a batch can draw
TRAFFIC = ("table", "online", "perm", "a2a")
_PROB = 2 ** 32


def _prob(p: float) -> int:
    if not 0.0 <= p < 1.0:
        raise ValueError(f"pause probability {p!r} must be in [0, 1)")
    return min(int(round(p * _PROB)), _PROB - 1)


def replay_stimulus(sealed, expect, *, ww, idle, stall, credit_delay, credit_burst, drain, budget,
                    rx_credits, depths) -> np.ndarray:
    """The replay stimulus (layout: sim/compiled/harness.cpp). ``sealed[p]``: port ``p``'s packets,
    each a list of wire words; ``expect[q]``: words output ``q`` must deliver."""
    head = [_prob(idle), _prob(stall), int(credit_delay), int(credit_burst), int(drain), int(budget),
            *map(int, rx_credits), *map(int, depths)]
    parts = [np.array(head, np.uint32)]
    for p, packets in enumerate(sealed):
        parts.append(np.array([len(packets), int(expect[p])], np.uint32))
        for words in packets:
            vc = (words[0] >> 4) & 3
            raw = b"".join(int(w).to_bytes(4 * ww, "little") for w in words)
            parts.append(np.array([vc, len(words)], np.uint32))
            parts.append(np.frombuffer(raw, "<u4"))
    return np.concatenate(parts)


@dataclass
class ReplayResult:
    status: int
    cycles: int
    stream_violations: int
    first_violation: int
    words: list          # per output: [(cycle, word)]
    sent: list           # per input: {packet index: cycle its last word was accepted}
    rounds: list         # (cycle, vc, phase, ready_vcs)
    outv: np.ndarray     # the output vector of the last cycle


def parse_replay(res, P, ww) -> ReplayResult:
    status, cycles, n_rounds, bad, first = (int(x) for x in res[:5])
    k = 5
    words = []
    for _ in range(P):
        n = int(res[k])
        k += 1
        blk = res[k:k + n * (ww + 1)].reshape(n, ww + 1)
        k += n * (ww + 1)
        words.append([(int(r[0]), int.from_bytes(r[1:].astype("<u4").tobytes(), "little")) for r in blk])
    sent = []
    for _ in range(P):
        n = int(res[k])
        k += 1
        blk = res[k:k + 2 * n].reshape(n, 2)
        k += 2 * n
        sent.append({int(i): int(c) for i, c in blk})
    rounds = [tuple(int(x) for x in r) for r in res[k:k + 4 * n_rounds].reshape(n_rounds, 4)]
    k += 4 * n_rounds
    return ReplayResult(status, cycles, bad, first, words, sent, rounds, res[k:])


class _Checked:
    """What :func:`fred.sim.compiled.world.check_outputs` reads, from a replay's result."""

    def __init__(self, P, flit_bits, wire, rr: ReplayResult, outo, what):
        self.P, self.what = P, what
        self.beats = [[(c, w) for c, w in ws if not wire.is_probe(w)] for ws in rr.words]
        self.status = {k: int(rr.outv[off]) for k, (off, _) in outo.items() if k.startswith("err_")}
        self.packets = []
        for q, ws in enumerate(self.beats):
            out, cur, t0 = [], [], None
            for c, w in ws:
                if not wire.fields(w).ok:
                    self.fail(f"output {q} cycle {c}: wire check fails on {w:#x}")
                if not cur:
                    t0 = c
                cur.append(w)
                if pk.word_fields(w, flit_bits)[1]:
                    out.append((c, t0, pk.unpack(cur, flit_bits)))
                    cur = []
            if cur:
                self.fail(f"output {q}: stream ends inside a packet")
            self.packets.append(out)

    def fail(self, msg):
        raise BenchFailure(f"{self.what}: {msg}")

    def output_packets(self, q):
        return self.packets[q]


@dataclass
class SwitchSoakReport(CycleRates):
    ports: int
    seed: int
    batches: int = 0
    packets: int = 0
    flits: int = 0
    cycles: int = 0
    rounds: int = 0
    sim_s: float = 0.0
    wall_s: float = 0.0
    build_s: float = 0.0
    worst_round: int = 0
    peak: dict = field(default_factory=dict)

    def table(self) -> str:
        return (f"{self.ports}-port switch (compiled soak, seed {self.seed}): {self.packets:,} packets "
                f"({self.flits:,} flits) bit-exact in {self.batches} batches, {self.rounds:,} rounds, "
                f"{self.cycles:,} cycles; harness {self.sim_rate:,.0f} cycles/s, whole soak "
                f"{self.wall_rate:,.0f} cycles/s ({self.wall_s:.1f} s, build {self.build_s:.1f} s); "
                f"worst round {self.worst_round} cycles, peak occupancy {self.peak}")


def switch_soak(m, sw, phases, *, batches=1, rounds=20, seed=1, traffic=("table",), idle=None,
                stall=None, ctrl_rate=0.2, bad_rate=0.1, online_rate=0.2, credit_delay=4,
                credit_burst=2, rx_credits=(120, 120, 120, 8), bound=20_000,
                unknown_phase=None) -> SwitchSoakReport:
    """Soak the compiled switch ``m`` (:class:`fred.sim.compiled.loader.CompiledSwitch` of
    switch ``sw``) with table ``phases`` (``{index: (vc, [Flow])}``). Batch ``b`` draws
    ``traffic[b % len(traffic)]`` (:data:`TRAFFIC`), ``rounds`` rounds of it, idle and stall
    probabilities (random per batch unless given). Raises ``AssertionError`` on the first wrong
    batch (:class:`fred.sim.compiled.world.BenchFailure`)."""
    for t in traffic:
        if t not in TRAFFIC:
            raise ValueError(f"switch soak traffic {t!r} must be one of {', '.join(TRAFFIC)}")
    P, FB = sw.P, sw.flit_bits
    model = SwitchModel(P, sw.middle, sw.lanes, sw.dtype.name, phases, fabric=sw.fabric_kind,
                        max_len=sw.max_len)
    cfg_words = sw.cfg_words(phases)
    wire = pk.WireFormat(FB, sw.fseq_bits)
    ww = m.ino["i__0__payload"][1]
    rep = SwitchSoakReport(P, seed)
    t0 = time.perf_counter()
    for b in range(batches):
        rng = random.Random(f"{seed}/{b}")
        kind = traffic[b % len(traffic)]
        if kind in ("perm", "a2a"):
            offered = make_online_traffic(P, rng, pattern=kind, rounds=rounds, flit_bits=FB,
                                          max_len=sw.max_len)
        else:
            offered = make_traffic(P, phases, rng, rounds=rounds, flit_bits=FB, max_len=sw.max_len,
                                   ctrl_rate=ctrl_rate, bad_rate=bad_rate, unknown_phase=unknown_phase,
                                   online_rate=online_rate if kind == "online" else 0.0)
        exp = model.expected(offered)
        want = exp.flits()
        p_idle = round(rng.uniform(0, 0.5), 3) if idle is None else idle
        p_stall = round(rng.uniform(0, 0.7), 3) if stall is None else stall
        sealed = []
        for p in range(P):
            tx = LinkSender(wire)
            sealed.append([tx.seal_packet(words) for _, words, _ in offered[p].items])
        n_flits = sum(len(x) for s in sealed for x in s)
        budget = int(40 * n_flits / P / ((1 - p_idle) * (1 - p_stall))) + 4 * bound
        stim = replay_stimulus(sealed, [want.get(q, 0) for q in range(P)], ww=ww, idle=p_idle,
                               stall=p_stall, credit_delay=credit_delay, credit_burst=credit_burst,
                               drain=60 + 4 * P, budget=budget, rx_credits=rx_credits,
                               depths=sw.depths)
        load_table(m, cfg_words)
        cap = 64 + 8 * budget + sum((ww + 1) * (want.get(q, 0) + 64) for q in range(P)) + \
            sum(2 * len(s) for s in sealed) + m.ports.out_words
        res, secs = m.replay(stim, seed * 1_000_003 + b, cap)
        rr = parse_replay(res, P, ww)
        what = (f"{P}-port switch soak batch {b} ({kind}, {rounds} rounds, idle {p_idle}, stall "
                f"{p_stall}; seed {seed})")
        rep.worst_round = max(rep.worst_round, _check(what, rr, exp, want, sw, wire, m, offered, bound))
        rep.batches += 1
        rep.packets += sum(len(v) for v in exp.data.values()) + sum(sum(c.values()) for c in exp.ctrl.values())
        rep.flits += sum(want.values())
        rep.cycles += rr.cycles
        rep.rounds += len(rr.rounds)
        rep.sim_s += secs
        lw = max(sw.depths).bit_length()
        peak = int(rr.outv[m.outo["peak"][0]])
        for v in range(4):
            name = pk.VC_NAMES[v]
            rep.peak[name] = max(rep.peak.get(name, 0), (peak >> (v * lw)) & ((1 << lw) - 1))
    rep.wall_s = time.perf_counter() - t0
    return rep


def load_table(m, cfg_words):
    """Reset the switch and load its table (lockstep cycles, as the lockstep benches do)."""
    m.inv[:] = 0
    for rst, word in reset_sequence(cfg_words):
        m.set("rst", rst)
        m.set("cfg__valid", word is not None)
        if word is not None:
            m.set("cfg__payload", word)
        m.cycle()


def _check(what, rr, exp, want, sw, wire, m, offered, bound) -> int:
    """Every check of a replayed batch (module docstring); the worst round latency."""
    if rr.status == 1:
        raise BenchFailure(f"{what}: exceeded its budget of cycles: a hang")
    if rr.stream_violations:
        raise BenchFailure(f"{what}: {rr.stream_violations} stream-rule violations (valid dropped "
                           f"or payload changed while stalled), first in cycle {rr.first_violation}")
    for p in range(sw.P):
        if len(rr.sent[p]) != len(offered[p].items):
            raise BenchFailure(f"{what}: input {p} sent {len(rr.sent[p])} of "
                               f"{len(offered[p].items)} packets")
    w = _Checked(sw.P, sw.flit_bits, wire, rr, m.outo, what)
    got_times = check_outputs(w, exp, want)
    for t, vc, phase, ready in rr.rounds:
        higher = [u for u in pk.PRIORITY[:RANK[vc]] if ready >> u & 1]
        if higher:
            raise BenchFailure(f"{what}: cycle {t}: started VC {pk.VC_NAMES[vc]} (phase {phase}) "
                               f"while {pk.VC_NAMES[higher[0]]} was ready")
    worst = 0
    for (idx, k), r in exp.rounds.items():
        t_in = max(rr.sent[p][i] for p, i in r["inputs"].items())
        for q in r["outputs"]:
            t_out = got_times[(q, idx)][k][1]
            worst = max(worst, t_out - t_in)
            if t_out - t_in > bound:
                raise BenchFailure(f"{what}: phase {idx} round {k} at output {q}: {t_out - t_in} "
                                   f"cycles > bound {bound}")
    return worst


def default_phases(P: int) -> dict:
    """A table for soaks: every VC, a multi-port reduction, a multicast and a permutation."""
    every = set(range(P))
    return phases_from_json([
        {"index": 0, "vc": pk.VC_DP, "flows": [[sorted(every), sorted(every)]]},
        {"index": 1, "vc": pk.VC_MP, "flows": [[[0, 1], [0, 1]]]},
        {"index": 2, "vc": pk.VC_PP, "flows": [[[p], [(p + 1) % P]] for p in range(P)]},
        {"index": 3, "vc": pk.VC_DP, "flows": [[[1], sorted(every - {1})]]},
    ])
