"""The scenarios of the cycle-stepped switch benches (:mod:`fred.sim.compiled.world`) and the
compiled driver.

* ``measure`` -- :class:`Measurement`: the figures of :mod:`fred.sim.characterize.switch`;
* ``stress`` -- :func:`stress`: random phases checked against the golden model, the worst round
  latency and the peak buffer occupancy;
* ``a2a`` -- :func:`all_to_all`: an all-to-all (precompiled phases of
  :func:`fred.hdl.routing.compile_all_to_all` and/or default-index packets routed online), every
  packet checked, the throughput figures of :mod:`fred.sim.characterize.all_to_all`;
* ``throughput`` -- :func:`throughput`: a permutation from a table phase or routed online, or an
  online all-to-all, back to back (:func:`fred.sim.characterize.switch.measure_online`);
* :func:`run_compiled` steps a world against the compiled switch (the cocotb twin is
  :mod:`fred.sim.compiled.cocotb_driver`).
"""

from __future__ import annotations

import random
from collections import deque, defaultdict

from fred.contract import packet as pk
from fred.sim.golden import Offered, SwitchModel, make_online_traffic, make_traffic, phases_from_json

from .world import STATUS, SwitchWorld, check_outputs, reset_sequence, wait

__all__ = ["Measurement", "stress", "all_to_all", "a2a_offered", "throughput", "perm_traffic",
           "make_world", "run_compiled", "SCENARIOS"]


# -- the measurement scenario --------------------------------------------------------------------
class Measurement:
    """The ``measure`` scenario (the figures of :mod:`fred.sim.characterize.switch`), phases
    :func:`fred.sim.characterize.switch._phases`: 0 = DP on the low half of the ports, 1 = DP on
    the high half, 2 = MP on every port, 3 = MP on the high half."""

    def __init__(self, world: SwitchWorld):
        self.w = w = world
        self.cfg, self.rng = w.cfg, w.rng
        P = w.P
        self.L = self.cfg["max_len"]
        half = P // 2
        self.A_ports, self.B_ports, self.C_ports = list(range(half)), list(range(half, P)), list(range(P))
        self.seq = {}

    def packet(self, p, phase, vc, n):
        s = self.seq.get((p, phase), 0)
        self.seq[(p, phase)] = s + 1
        FB = self.w.flit_bits
        data = tuple(self.rng.randrange(1 << FB) for _ in range(n))
        return pk.pack(pk.Packet(pk.Header.data(vc, phase, s, n), data), FB)

    def send(self, p, words):
        first = yield from self.w.send_credited(p, words)
        return first + len(words)

    def send_at(self, p, words):
        first = yield from self.w.send_credited(p, words)
        return first + 1, first + len(words)

    def sent_at(self, p, end):
        while len(self.w.sent[p]) < end:
            yield
        return self.w.sent[p][end - 1][0]

    def round_of(self, phase, vc, ports, n):
        out = {}
        for p in ports:
            out[p] = yield from self.send_at(p, self.packet(p, phase, vc, n))
        return out

    def done(self, ends):
        heads = []
        for p, (h, _) in ends.items():
            heads.append((yield from self.sent_at(p, h)))
        lasts = []
        for p, (_, e) in ends.items():
            lasts.append((yield from self.sent_at(p, e)))
        return max(heads), max(lasts)

    def packets(self, q):
        return [x for x in self.w.output_packets(q) if x[2].header.vc != pk.VC_CTRL]

    def wait_packets(self, q, n):
        while len(self.packets(q)) < n:
            yield

    def run(self):
        """(generator) The whole scenario; sets ``world.result``."""
        res = {}
        yield from self.activation(res)
        yield from self.phase_switch(res)
        yield from self.preemption(res)
        self.w.result = res
        self.w.finished = True

    def activation(self, res):
        """Activation on an idle switch: a new configuration, then the same one again (the
        worst of ``activation_samples``: the scanner position varies)."""
        w, L = self.w, self.L
        act, first, c_act, c_first = {}, {}, {}, {}

        def worst(d, k, v):
            d[k] = max(d.get(k, v), v)
        for name in ("new_config",) + ("same_config",) * self.cfg.get("activation_samples", 6):
            n0 = len(self.packets(0))
            ends = yield from self.round_of(0, pk.VC_DP, self.A_ports, L)
            t_head, t_in = yield from self.done(ends)
            yield from self.wait_packets(0, n0 + 1)
            _, t0, _ = self.packets(0)[n0]
            beats = [c for c, _ in w.beats[0] if c > t0]
            worst(act, name, t0 - t_in)
            worst(first, name, beats[0] - t_in)
            worst(c_act, name, t0 - t_head)
            worst(c_first, name, beats[0] - t_head)
            yield from wait(20 + self.rng.randrange(w.P))
        res["activation_cycles"] = act
        res["first_data_cycles"] = first
        res["cut_through_cycles"] = {"activation": c_act, "first_data": c_first}

    def phase_switch(self, res):
        """Successive rounds, the second already buffered when the first ends."""
        L, packets, send, packet = self.L, self.packets, self.send, self.packet
        A_ports, B_ports = self.A_ports, self.B_ports
        detail = {}
        n0 = len(packets(0))
        yield from self.round_of(0, pk.VC_DP, A_ports, L)
        yield from self.round_of(0, pk.VC_DP, A_ports, L)
        yield from self.wait_packets(0, n0 + 2)
        p0 = packets(0)
        detail["same_phase"] = p0[n0 + 1][1] - p0[n0][0]
        yield from wait(20)
        nA, nB = len(packets(A_ports[0])), len(packets(B_ports[0]))
        for p in B_ports + A_ports:
            yield from send(p, packet(p, 0 if p in A_ports else 1, pk.VC_DP, L))
        yield from self.wait_packets(A_ports[0], nA + 1)
        yield from self.wait_packets(B_ports[0], nB + 1)
        pa, pb = packets(A_ports[0])[nA], packets(B_ports[0])[nB]
        first, second = (pa, pb) if pa[1] < pb[1] else (pb, pa)
        detail["new_phase_same_vc"] = second[1] - first[0]
        yield from wait(20)
        n0 = len(packets(0))
        for p in self.C_ports:
            yield from send(p, packet(p, 2, pk.VC_MP, L))
        for p in A_ports:
            yield from send(p, packet(p, 0, pk.VC_DP, L))
        yield from self.wait_packets(0, n0 + 2)
        p0 = packets(0)
        detail["new_vc"] = p0[n0 + 1][1] - p0[n0][0]
        if p0[n0][2].header.vc != pk.VC_MP:
            self.w.fail("MP round did not go first")
        res["phase_switch_detail"] = detail
        res["phase_switch_cycles"] = detail["new_phase_same_vc"]
        yield from wait(20)

    def preemption(self, res):
        """DP phase 0 streams on the low ports; MP rounds of phase 3 (high ports, 1 data flit)
        become complete at random times and wait for the DP packet in flight."""
        w, L, packets, packet = self.w, self.L, self.packets, self.packet
        B_ports = self.B_ports
        n_pre = self.cfg.get("preemptions", 10)
        stop = {"dp": False}

        def dp_feeder(p):
            while not stop["dp"]:
                yield from self.send(p, packet(p, 0, pk.VC_DP, L))
                while w.busy(p):
                    yield

        def mp_count():
            return len([x for x in packets(B_ports[0]) if x[2].header.vc == pk.VC_MP])

        n_mp0 = mp_count()
        for p in self.A_ports:
            w.spawn(dp_feeder(p))
        yield from wait(60)
        samples, c_samples = [], []
        for k in range(n_pre):
            yield from wait(self.rng.randint(1, 3 * (L + 2)))
            ends = {}
            for p in B_ports:
                ends[p] = yield from self.send_at(p, packet(p, 3, pk.VC_MP, 1))
            t_head, t_ready = yield from self.done(ends)
            while mp_count() < n_mp0 + k + 1:
                yield
            t_hdr = [x for x in packets(B_ports[0]) if x[2].header.vc == pk.VC_MP][n_mp0 + k][1]
            samples.append(t_hdr - t_ready)
            c_samples.append(t_hdr - t_head)
        stop["dp"] = True
        res["preemption_cycles"] = _stats(samples)
        res["cut_through_cycles"]["preemption"] = _stats(c_samples)
        yield from wait(100)


def _stats(samples):
    return {"min": min(samples), "max": max(samples), "mean": round(sum(samples) / len(samples), 2),
            "samples": len(samples)}


# -- the stress scenario -------------------------------------------------------------------------
def stress(w: SwitchWorld):
    """(generator) The ``stress`` scenario (module docstring); sets ``world.result`` to
    ``{"cycles", "rounds", "worst_round", "peak"}``."""
    cfg, rng = w.cfg, w.rng
    phases = phases_from_json(cfg["phases"])
    model = SwitchModel(w.P, cfg["middle"], cfg["lanes"], cfg["dtype"], phases, fabric=cfg["fabric"],
                        max_len=cfg["max_len"])
    offered = make_traffic(w.P, phases, rng, rounds=cfg["rounds"], flit_bits=w.flit_bits,
                           max_len=cfg["max_len"], ctrl_rate=cfg.get("ctrl_rate", 0.0),
                           bad_rate=cfg.get("bad_rate", 0.0), online_rate=cfg.get("online_rate", 0.0))
    exp = model.expected(offered)
    w.grant_all()
    done, items_sent = _start_sources(w, offered, rng)
    want = exp.flits()
    bound = cfg.get("bound", 10_000)
    yield from _delivered(w, want, done, bound)
    got_times = check_outputs(w, exp, want)
    worst = _worst_round(w, exp, got_times, items_sent, bound)
    w.result = {"cycles": w.now, "rounds": len(w.events), "worst_round": worst, "peak": w.peaks()}
    if w.trace:
        w.result["trace"] = w.trace
    w.finished = True


def _start_sources(w, offered, rng):
    """One :func:`_source` per port; returns ``(done, items_sent)`` (filled as they run)."""
    done = [False] * w.P
    items_sent = [[] for _ in range(w.P)]
    for p in range(w.P):
        w.spawn(_source(w, p, offered[p].items, random.Random(rng.random()), done, items_sent[p]))
    return done, items_sent


def _delivered(w, want, done, bound):
    """(generator) Until every output has its ``want`` flits and every source is done (or
    nothing moved for ``bound`` cycles after the sources finished: flits lost, the count check
    says so), then ``60 + 4 P`` cycles more: anything extra would show up then."""
    quiet, seen = 0, -1
    while any(len(w.beats[q]) < want.get(q, 0) for q in range(w.P)) or not all(done):
        yield
        now = sum(len(b) for b in w.beats)
        quiet = quiet + 1 if now == seen and all(done) else 0
        seen = now
        if quiet > bound:
            break
    yield from wait(60 + 4 * w.P)


def _source(w, p, items, rng, done, items_sent):
    """Port ``p``'s source: after a random skew, whole packets in per-VC order, a random VC
    among those whose next packet has credits."""
    queues = defaultdict(deque)
    for k, (_, words, _) in enumerate(items):
        queues[(words[0] >> 4) & 3].append((k, words))
    yield from wait(rng.randint(0, w.cfg.get("skew", 0)))
    while any(queues.values()):
        yield
        if w.busy(p):
            continue
        choices = [vc for vc, q in sorted(queues.items())
                   if q and w.src_credits[p][vc] >= len(q[0][1])]
        if not choices:
            continue
        vc = rng.choice(choices)
        k, words = queues[vc].popleft()
        yield from w.send_credited(p, words)
        items_sent.append((k, len(words)))
    while w.busy(p):
        yield
    done[p] = True


def _worst_round(w, exp, got_times, items_sent, bound) -> int:
    ends = []
    for p in range(w.P):
        out, pos = {}, 0
        for k, n in items_sent[p]:
            pos += n
            out[k] = w.sent[p][pos - 1][0]
        ends.append(out)
    worst = 0
    for (idx, k), r in exp.rounds.items():
        t_in = max(ends[p][i] for p, i in r["inputs"].items())
        for q in r["outputs"]:
            t_out = got_times[(q, idx)][k][1]
            worst = max(worst, t_out - t_in)
            if t_out - t_in > bound:
                w.fail(f"phase {idx} round {k} at output {q}: {t_out - t_in} cycles > bound {bound}")
    return worst


# -- the all-to-all scenario ---------------------------------------------------------------------
def a2a_offered(P, order, rng, *, length, flit_bits):
    """``{port: Offered}`` and ``{(source, destination): [data tuple, ...]}`` for ``order``
    (per port a list of ``[phase, destination]``: a phase-table index, the k-th packet of a
    phase carrying ``seq`` k at every input, or ``None``: a default-index packet naming
    ``destination``, routed online); ``length`` random data flits per packet."""
    offered = {p: Offered() for p in range(P)}
    sent = defaultdict(list)
    seq = defaultdict(int)
    for p in range(P):
        for phase, d in order[p]:
            data = tuple(rng.randrange(1 << flit_bits) for _ in range(length))
            key = (p, pk.DEFAULT_PHASE if phase is None else phase, d if phase is None else 0)
            s = seq[key] % pk.SEQ_MOD
            seq[key] += 1
            h = (pk.Header.data(pk.VC_DP, pk.DEFAULT_PHASE, s, length, port=d) if phase is None
                 else pk.Header.data(pk.VC_DP, phase, s, length))
            x = pk.Packet(h, data)
            offered[p].items.append(("data", pk.pack(x, flit_bits), x))
            sent[(p, d)].append(data)
    return offered, sent


def all_to_all(w: SwitchWorld):
    """(generator) The ``a2a`` scenario: every input sends its packets of ``cfg["order"]``
    (:func:`a2a_offered`; ``cfg["length"]`` data flits each) as fast as its credits allow, the
    sinks stall with probability ``cfg["stall"]``.

    Checks: every packet against the golden model (:func:`check_outputs`: exact flit counts,
    per table phase and output and per online stream in order, bit-exact; the error counters;
    the world's per-cycle checks: credits, the stream rule, strict priority); per (source,
    destination) the packets delivered are exactly the ones sent, once, in the order sent (the
    source of a table-phase packet is the phase's input for that output; of an online one, its
    port byte).

    ``world.result``: ``cycles`` from the first header accepted at an input to the last flit
    delivered, ``flits`` delivered (headers included), ``flits_per_cycle_per_port``,
    ``busiest_flits`` (the busiest input's or output's flits) and ``fraction_of_bound``
    (= busiest_flits / cycles), ``rounds`` started, ``phase_changes`` (rounds whose phase
    differs from the previous round's), ``phase_change_idle_cycles`` ``{mean, max, samples}``:
    at every output, the idle cycles between the last flit of one table phase's packet and the
    header of the next phase's (0 = back to back)."""
    cfg, rng, P, L = w.cfg, w.rng, w.P, w.cfg["length"]
    phases = phases_from_json(cfg["phases"])
    offered, sent = a2a_offered(P, cfg["order"], rng, length=L, flit_bits=w.flit_bits)
    exp, want = yield from _bulk(w, phases, offered)
    src_of = {(k, q): min(f.inputs) for k, (_, flows) in phases.items() for f in flows
              for q in f.outputs}
    got = defaultdict(list)
    for q in range(P):
        for _, _, x in w.output_packets(q):
            h = x.header
            s = h.port if h.phase == pk.DEFAULT_PHASE else src_of[(h.phase, q)]
            got[(s, q)].append(tuple(x.data))
    for pair in sorted(set(sent) | set(got)):
        if got.get(pair, []) != sent.get(pair, []):
            w.fail(f"pair {pair[0]} -> {pair[1]}: {len(got.get(pair, []))} packets delivered, "
                   f"{len(sent.get(pair, []))} sent, or not the same data in the same order")
    n = _span(w)
    flits = sum(want.values())
    per_in = defaultdict(int)
    for (s, _), pkts in sent.items():
        per_in[s] += len(pkts) * (1 + L)
    busiest = max(max(per_in.values()), max(want.values()))
    changes = sum(1 for a, c in zip(w.events, w.events[1:]) if a[2] != c[2])
    gaps = []
    for q in range(P):
        pk_q = w.output_packets(q)
        for (e0, _, x0), (_, s1, x1) in zip(pk_q, pk_q[1:]):
            if pk.DEFAULT_PHASE not in (x0.header.phase, x1.header.phase) and \
                    x0.header.phase != x1.header.phase:
                gaps.append(s1 - e0 - 1)
    w.result = {"cycles": n, "flits": flits, "rounds": len(w.events), "phase_changes": changes,
                "flits_per_cycle_per_port": round(flits / n / P, 4),
                "busiest_flits": busiest, "fraction_of_bound": round(busiest / n, 4),
                "phase_change_idle_cycles": {
                    "mean": round(sum(gaps) / len(gaps), 2) if gaps else None,
                    "max": max(gaps, default=None), "samples": len(gaps)}}
    w.finished = True


def _bulk(w, phases, offered):
    """(generator) Send ``offered`` (``{port: Offered}``, data packets only) through the switch
    of ``phases`` as fast as credits allow and check every packet (:func:`check_outputs`);
    returns the golden model's :class:`fred.sim.golden.Expected` and the flits per output."""
    cfg = w.cfg
    model = SwitchModel(w.P, cfg["middle"], cfg["lanes"], cfg["dtype"], phases, fabric=cfg["fabric"],
                        max_len=cfg["max_len"])
    exp = model.expected(offered)
    if exp.err_packet or exp.err_phase:
        w.fail(f"the golden model drops {exp.err_packet + exp.err_phase} packets of the "
               f"program (a phase or port the table does not route)")
    w.grant_all()
    done, _ = _start_sources(w, offered, w.rng)
    want = exp.flits()
    yield from _delivered(w, want, done, cfg.get("bound", 10_000))
    check_outputs(w, exp, want)
    return exp, want


def _span(w) -> int:
    """Cycles from the first word accepted at an input to the last flit delivered."""
    return max(b[-1][0] for b in w.beats if b) - min(s[0][0] for s in w.sent if s) + 1


# -- the throughput scenario ---------------------------------------------------------------------
def perm_traffic(P, perm, rng, *, packets, length, flit_bits, online):
    """Per port ``packets`` packets of phase 0 (``online`` False) or of the default index naming
    ``perm[p]``, ``length`` data flits each."""
    offered = {p: Offered() for p in range(P)}
    for p in range(P):
        for k in range(packets):
            data = tuple(rng.randrange(1 << flit_bits) for _ in range(length))
            h = (pk.Header.data(pk.VC_DP, pk.DEFAULT_PHASE, k, length, port=perm[p]) if online
                 else pk.Header.data(pk.VC_DP, 0, k, length))
            x = pk.Packet(h, data)
            offered[p].items.append(("data", pk.pack(x, flit_bits), x))
    return offered


def throughput(w: SwitchWorld):
    """(generator) The ``throughput`` scenario: every input sends ``cfg["packets"]`` packets of
    ``cfg["length"]`` data flits back to back, by ``cfg["mode"]``: ``table`` (one table phase
    routes the permutation ``cfg["perm"]``), ``online`` (the same permutation in default-index
    packets, routed on the fly) or ``online-a2a`` (default-index all-to-all: one packet to every
    output per exchange, a random order per input, ``packets // ports`` exchanges). Every
    packet checked (:func:`check_outputs`). ``world.result``: ``mode``, ``cycles`` from the
    first header accepted to the last flit delivered, ``flits`` delivered (headers included),
    ``flits_per_cycle_per_port`` (1 = every link busy every cycle),
    ``payload_per_cycle_per_port`` (data flits only), ``rounds``."""
    cfg, rng, P, L, n = w.cfg, w.rng, w.P, w.cfg["length"], w.cfg["packets"]
    if cfg["mode"] == "online-a2a":
        offered = make_online_traffic(P, rng, pattern="a2a", rounds=max(1, n // P),
                                      flit_bits=w.flit_bits, max_len=L, length=L)
    elif cfg["mode"] in ("table", "online"):
        offered = perm_traffic(P, cfg["perm"], rng, packets=n, length=L, flit_bits=w.flit_bits,
                               online=cfg["mode"] == "online")
    else:
        raise ValueError(f"throughput mode {cfg['mode']!r}; known: table, online, online-a2a")
    exp, want = yield from _bulk(w, phases_from_json(cfg["phases"]), offered)
    span, flits = _span(w), sum(want.values())
    data = sum(len(x.data) for pkts in exp.data.values() for x in pkts)
    w.result = {"mode": cfg["mode"], "cycles": span, "flits": flits, "rounds": len(w.events),
                "flits_per_cycle_per_port": round(flits / span / P, 4),
                "payload_per_cycle_per_port": round(data / span / P, 4)}
    w.finished = True


#: the scenarios a world runs (``cfg["scenario"]``)
SCENARIOS = ("measure", "stress", "a2a", "throughput")


def make_world(cfg, seed) -> SwitchWorld:
    """The world of ``cfg["scenario"]`` with its scenario task spawned."""
    w = SwitchWorld(cfg, random.Random(seed))
    scenario = cfg.get("scenario")
    if scenario == "measure":
        w.grant_all()
        w.spawn(Measurement(w).run())
    elif scenario == "stress":
        w.spawn(stress(w))
    elif scenario == "a2a":
        w.spawn(all_to_all(w))
    elif scenario == "throughput":
        w.spawn(throughput(w))
    else:
        raise ValueError(f"unknown lockstep scenario {scenario!r}; known: {', '.join(SCENARIOS)}")
    return w


def run_compiled(m, cfg, seed) -> dict:
    """Run ``cfg``'s scenario on a compiled switch ``m`` (:class:`fred.sim.compiled.loader.
    CompiledSwitch`); the world's result."""
    w = make_world(cfg, seed)
    P = w.P
    inv, outv, outo = m.inv, m.outv, m.outo
    inv[:] = 0
    for rst, word in reset_sequence(cfg["cfg_words"]):
        m.set("rst", rst)
        m.set("cfg__valid", word is not None)
        if word is not None:
            m.set("cfg__payload", word)
        m.cycle()
    s = m.port_slots(P)
    iv, ordy, ci, ir, ov, co = s.in_valid, s.out_ready, s.credit_in, s.in_ready, s.out_valid, s.credit_out
    ip, op = s.in_payload, s.out_payload
    st = {k: outo[k][0] for k in STATUS}
    limit = cfg.get("max_cycles", 200_000)
    while not w.finished:
        valid, words, ready, credit = w.drive()
        for p in range(P):
            inv[iv[p]] = valid[p]
            if words[p] is not None:
                m.set(ip[p], words[p])
            inv[ordy[p]] = ready[p]
            inv[ci[p]] = credit[p]
        m.cycle()
        w.observe([int(outv[i]) for i in ir], [int(outv[i]) for i in ov], lambda q: m.get(op[q]),
                  [int(outv[i]) for i in co], {k: int(outv[i]) for k, i in st.items()})
        if w.now > limit:
            w.fail(f"watchdog: {cfg.get('scenario')} still running after {limit} cycles (hang?)")
    return w.result
