"""The fault bench's world (plain Python): the program, the endpoints, the injectors, the checks.

sim/benches/faults.py drives the switch with it, one clock cycle at a time:
:meth:`World.inputs` (the wire word on every input link), :meth:`World.outputs_taken` (the words
the switch's outputs delivered), :meth:`World.step` (credits, endpoints, checks).

**Program** (:func:`fault_phases`, :class:`Program`): phases of a kind: ``all-reduce`` (every
port to every port, DP), ``reduce`` (ports 0..P-2 to P-1, MP), ``multicast`` (port 1 to all
others, PP), ``unicast`` (port 2 to port 0, PP), one flow each; or ``all-to-all`` alone (the
precompiled uniform all-to-all of :func:`fred.hdl.routing.all_to_all.compile_all_to_all`: P - 1
cyclic-shift phases of P unicast flows each, DP, indices from 4; every source sends them in
order, a phase only once its previous one is acknowledged, as the switch needs the phases of
a VC in one global order); ``packets`` packets per phase of 1..``max_len`` random data flits,
numbered from ``seq_start`` (default near 65535, so the 16-bit sequence numbers wrap
mid-stream). A phase's sources and receivers are all its inputs and outputs: the switch fans
an ACK/NACK out to every input of the phase, and every source waits for every receiver's ACK. The expected delivery of every
packet at every receiver comes from the golden switch model (bit-exact reductions).

**Checks** (each raises a one-line error the moment it fails):

* *delivery*: every receiver accepts packets 0, 1, ... exactly once and in order, each one's
  header and data bit-exact (golden model);
* *fan-out*: every control packet the switch takes intact at an input reaches, at the switch's
  outputs (before the output links' faults), every input port of its phase, once;
* *counters*: the switch's ``err_crc`` and ``err_dup`` equal, every cycle, the corrupted and
  duplicated words that reached its inputs, and at the end ``err_lost`` equals the flits
  dropped or corrupted on the way in (after a last probe per VC), ``err_packet`` and
  ``err_phase`` are 0; the endpoints' receivers likewise for the output links;
* *progress*: no packet delivered and no source's window moved for ``stall_limit`` cycles is a
  deadlock; ``max_cycles`` bounds the run.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict

from fred.contract import packet as pk
from fred.hdl.netlist import Flow
from fred.hdl.routing import compile_all_to_all, uniform_matrix
from .inject import Injector
from .gbn import FINAL_ACKS, GbnParams, GbnReceiver, GbnSource
from .endpoint import Endpoint
from fred.sim.golden import SwitchModel

__all__ = ["PHASE_KINDS", "A2A_KIND", "COUNTERS", "fault_phases", "Program", "World", "BenchFailure",
           "run_result"]

PHASE_KINDS = ("all-reduce", "reduce", "multicast", "unicast")
#: the all-to-all's phases follow PHASE_KINDS' indices
A2A_KIND = "all-to-all"
#: the switch's error counters a run reads
COUNTERS = ("err_crc", "err_dup", "err_lost", "err_packet", "err_phase", "err_stale", "poisoned")


class BenchFailure(AssertionError):
    """A check of the fault bench failed (one line)."""


def fault_phases(P: int, kinds=PHASE_KINDS) -> dict:
    """``{index: (vc, [Flow])}`` of the fault bench's phases (index = position in PHASE_KINDS;
    ``all-to-all``: indices from ``len(PHASE_KINDS)``, alone)."""
    if A2A_KIND in kinds:
        if list(kinds) != [A2A_KIND]:
            raise ValueError(f"fault bench phase kind {A2A_KIND} runs alone, not with "
                             f"{', '.join(k for k in kinds if k != A2A_KIND)}")
        sched = compile_all_to_all(uniform_matrix(P, 1), len(PHASE_KINDS) + P)
        return {len(PHASE_KINDS) + k: (vc, flows)
                for k, (vc, flows) in sched.table(pk.VC_DP).items()}
    every = set(range(P))
    table = {"all-reduce": (pk.VC_DP, [Flow(every, every)]),
             "reduce": (pk.VC_MP, [Flow(set(range(P - 1)), {P - 1})]),
             "multicast": (pk.VC_PP, [Flow({1}, every - {1})]),
             "unicast": (pk.VC_PP, [Flow({2}, {0})])}
    return {PHASE_KINDS.index(k): table[k] for k in kinds}


class Program:
    """The packets of every phase and what every receiver must get (golden model)."""

    def __init__(self, cfg, model: SwitchModel, rng: random.Random):
        self.phases = model.phases
        self.n = cfg["packets"]
        self.s0 = cfg.get("seq_start", pk.SEQ_MOD - self.n // 2) % pk.SEQ_MOD
        FB, L = model.flit_bits, cfg["max_len"]
        self.words, self.expect = {}, {}
        for f, (vc, flows) in sorted(self.phases.items()):
            ins = sorted(set().union(*(fl.inputs for fl in flows)))
            for k in range(self.n):
                n = rng.randint(1, L)
                seq = (self.s0 + k) % pk.SEQ_MOD
                data = {p: tuple(rng.getrandbits(FB) for _ in range(n)) for p in ins}
                for p, d in data.items():
                    self.words[(f, k, p)] = pk.pack(pk.Packet(pk.Header.data(vc, f, seq, n), d), FB)
                outs = model.fabric_outputs(f, {p: list(d) for p, d in data.items()})
                for fl in flows:
                    for q in fl.outputs:
                        self.expect[(f, k, q)] = pk.Packet(pk.Header.data(vc, f, seq, n),
                                                           tuple(outs[q]))

    def ports(self, f):
        """(inputs, outputs) of phase ``f``: every flow's."""
        flows = self.phases[f][1]
        return (set().union(*(fl.inputs for fl in flows)),
                set().union(*(fl.outputs for fl in flows)))


class World:
    """Endpoints, injectors and checks of one run (``cfg``: see sim/benches/faults.py)."""

    def __init__(self, cfg, rng: random.Random, counters):
        self.P = P = cfg["ports"]
        self.fmt = pk.WireFormat(cfg["flit_bits"], cfg["fseq_bits"])
        self.counters = counters               # name -> current value of a switch counter
        self.g = GbnParams(P, window=cfg.get("window", 32), rto=cfg.get("rto", 2000),
                           ack_delay=cfg.get("ack_delay", 64), nack_retry=cfg.get("nack_retry", 600),
                           nack_guard=cfg.get("nack_guard", 150),
                           mutant=cfg.get("mutant"))
        model = SwitchModel(P, cfg["middle"], cfg["lanes"], cfg["dtype"],
                            fault_phases(P, cfg["kinds"]), fabric=cfg["fabric"], max_len=cfg["max_len"])
        self.prog = Program(cfg, model, random.Random(rng.random()))
        rate, kinds = cfg["rate"], cfg["faults"]
        mk = lambda: Injector(rate, kinds, random.Random(rng.random()), self.fmt.width, self.fmt.is_probe)
        self.inj_in = [mk() for _ in range(P)]
        self.inj_out = [mk() for _ in range(P)]
        self.eps = [Endpoint(p, self.fmt, cfg["depths"], cfg["rx_credits"], cfg["credit_bits"],
                             self.inj_in[p], probe_wait=cfg.get("probe_wait", 64),
                             credit_delay=cfg.get("credit_delay", 2)) for p in range(P)]
        self.delivered = defaultdict(int)
        self._wire_up()
        self.expect_ctrl = defaultdict(Counter)
        self.presented = Counter()             # (kind) -> words that reached the switch
        self.errors: list = []
        self.now = 0
        self.last_progress = 0
        self.stall_limit = cfg.get("stall_limit", 20_000)
        self.finished_at = None
        self.last_traffic = 0                  # last cycle a flit (not a probe) was on a link

    def _wire_up(self):
        prog, n, s0 = self.prog, self.prog.n, self.prog.s0
        before = {}                              # (port, VC) -> that port's previous source
        for f in sorted(prog.phases):
            vc = prog.phases[f][0]
            ins, outs = prog.ports(f)
            for p in sorted(ins):
                src = GbnSource(self.g, f, p, n, s0, outs, lambda k, f=f, p=p: prog.words[(f, k, p)])
                if f >= len(PHASE_KINDS):        # all-to-all: after this port's previous phase
                    src.after = before.get((p, vc))
                    before[(p, vc)] = src
                self.eps[p].sources[f] = src
            for q in sorted(outs):
                self.eps[q].receivers[f] = GbnReceiver(
                    self.g, f, q, n, s0, self.eps[q].send_ctrl,
                    lambda k, x, f=f, q=q: self._deliver(f, q, k, x))

    # -- checks -----------------------------------------------------------------------------------
    def fail(self, msg):
        self.errors.append(f"cycle {self.now}: {msg}")
        raise BenchFailure(self.errors[-1])

    def _deliver(self, f, q, k, packet):
        got = self.delivered[(f, q)]
        if k != got:
            self.fail(f"phase {f} output {q}: packet {k} delivered, expected packet {got} "
                      f"(lost, duplicated or out of order)")
        want = self.prog.expect[(f, k, q)]
        if packet.header != want.header:
            self.fail(f"phase {f} output {q} packet {k}: header {packet.header} != {want.header}")
        if packet.data != want.data:
            j = next(i for i, (a, b) in enumerate(zip(packet.data, want.data)) if a != b)
            self.fail(f"phase {f} output {q} packet {k} flit {j}: {packet.data[j]:#x} != "
                      f"expected {want.data[j]:#x} (reduction not bit-exact)")
        self.delivered[(f, q)] = got + 1
        self.last_progress = self.now

    # -- one cycle --------------------------------------------------------------------------------
    def inputs(self):
        """The wire word on every input link this cycle (None: idle)."""
        self.before = Counter(self.presented)   # what the switch's counters show this cycle
        out = []
        for p, inj in enumerate(self.inj_in):
            w = inj.step(self.now)
            if w is not None:
                self._presented(p, w, inj.last)
            out.append(w)
        return out

    def _presented(self, p, w, fault):
        probe = self.fmt.is_probe(w)
        if not probe:
            self.last_traffic = self.now
        if fault == "corrupt":
            self.presented["corrupt"] += 1
            return
        if fault == "copy":
            self.presented["dup"] += not probe
            return
        f = self.fmt.fields(w)
        if f.vc == pk.VC_CTRL and f.head and not probe:
            h = pk.decode_header(f.data)
            for t in self.prog.ports(h.phase)[0]:
                self.expect_ctrl[t][f.data] += 1

    def outputs_taken(self, words):
        """``words[q]``: the wire word output ``q`` delivered this cycle (None: none)."""
        for q, w in enumerate(words):
            if w is None:
                continue
            f = self.fmt.fields(w)
            if not f.ok:           # only a poisoned last flit (a round truncated by a lost flit)
                if f.probe or not f.last or f.vc == pk.VC_CTRL or f.check != self.fmt.check_of(w) ^ 0xFFFFFFFF:
                    self.fail(f"output {q}: the switch sent a word whose check fails and that is "
                              f"not a poisoned last flit")
                self.presented["poisoned"] += 1
            if not f.probe:
                self.last_traffic = self.now
            if f.vc == pk.VC_CTRL and f.head and not f.probe:
                if self.expect_ctrl[q][f.data] <= 0:
                    self.fail(f"output {q}: control packet {pk.decode_header(f.data)} was not "
                              f"sent to the switch for this port's phase")
                self.expect_ctrl[q][f.data] -= 1
            self.inj_out[q].push(w)

    def step(self, credit_o):
        """After the cycle's handshakes: credits back to the endpoints, the output links, the
        endpoints' logic, the checks; ``credit_o[p]`` = per-VC counts."""
        now = self.now
        for p, ep in enumerate(self.eps):
            ep.on_credit(credit_o[p])
            w = self.inj_out[p].step(now)
            if w is not None:
                if self.inj_out[p].last != "corrupt" and not self.fmt.fields(w).ok:
                    self.presented["poison_copy" if self.inj_out[p].last == "copy"
                                   else "poison_delivered"] += 1
                ep.rx_word(w, now)
            ep.tick(now)
            ep.tx_step(now)
            if ep.errors:
                self.fail(ep.errors[0])
        self._counters_now()
        moved = sum(s.base for ep in self.eps for s in ep.sources.values())
        if moved != getattr(self, "_moved", None):
            self._moved, self.last_progress = moved, now
        if now - self.last_progress > self.stall_limit:
            self.fail(f"deadlock: nothing delivered and no window moved for {self.stall_limit} "
                      f"cycles ({self.progress()})")
        if self.finished_at is None and self.complete():
            self.finished_at = now
        self.now += 1

    def _counters_now(self):
        c = self.counters(("err_crc", "err_dup", "poisoned"))
        for name, key, what in (("err_crc", "corrupt", "corrupted words reached its inputs"),
                                ("err_dup", "dup", "duplicated words reached its inputs"),
                                ("poisoned", "poisoned", "poisoned flits left its outputs")):
            if c[name] != self.before[key]:
                self.fail(f"switch {name} = {c[name]}, but {self.before[key]} {what}")

    def credit_words(self, cb):
        return [ep.credit_word(self.now, cb) for ep in self.eps]

    # -- end --------------------------------------------------------------------------------------
    def complete(self) -> bool:
        return all(r.expected >= r.n for ep in self.eps for r in ep.receivers.values()) and \
            all(s.done for ep in self.eps for s in ep.sources.values())

    def progress(self) -> str:
        """Where every phase stands: receivers' packets, and the sources of unfinished phases
        (port: base/next/sent, go-backs, timeouts)."""
        out = []
        for f in sorted(self.prog.phases):
            got = [self.delivered[(f, q)] for q in sorted(self.prog.ports(f)[1])]
            srcs = [ep.sources[f] for ep in self.eps if f in ep.sources]
            txt = f"phase {f}: {min(got)}/{self.prog.n} at every receiver"
            if any(not s.done for s in srcs):
                txt += " (sources " + ", ".join(f"{s.port}: {s.base}/{s.next}/{s.high} "
                                                f"gb{s.rewinds} to{s.timeouts} "
                                                f"cred{self.eps[s.port].credits}" for s in srcs) + ")"
            out.append(txt)
        return "; ".join(out)

    def drained(self, quiet: int) -> bool:
        """After :meth:`drain`: every receiver has repeated its final ACK and no flit was on
        any link for ``quiet`` cycles (the switch has sent its probes)."""
        return all(r.final_acks >= FINAL_ACKS for ep in self.eps for r in ep.receivers.values()) \
            and not any(i.busy for i in self.inj_in + self.inj_out) and self.now - self.last_traffic > quiet

    def drain(self):
        """Stop the faults; every endpoint probes every VC (reveals trailing losses)."""
        for inj in self.inj_in + self.inj_out:
            inj.enabled = False
        for ep in self.eps:
            for v in range(4):
                ep.link.push(ep.tx.probe(v))

    def final_checks(self):
        c = self.counters()
        lost_in = sum(i.faults("drop", False) + i.faults("corrupt", False) for i in self.inj_in)
        if c["err_lost"] != lost_in:
            self.fail(f"switch err_lost = {c['err_lost']}, but {lost_in} flits were dropped or "
                      f"corrupted on the way in")
        for name in ("err_packet", "err_phase"):
            if c[name]:
                self.fail(f"switch {name} = {c[name]}: a packet the sources sent was dropped")
        rx = {k: sum(getattr(ep.rx, k) for ep in self.eps) for k in ("bad", "dup", "lost")}
        poison = self.presented["poison_delivered"]     # poisoned flits the links left alone
        copies = self.presented["poison_copy"]          # ... and duplicated (a bad word again)
        want = {"bad": sum(i.faults("corrupt") for i in self.inj_out) + poison + copies,
                "dup": sum(i.faults("duplicate", False) for i in self.inj_out) - copies,
                "lost": sum(i.faults("drop", False) + i.faults("corrupt", False) for i in self.inj_out)
                + poison}
        if rx != want:
            self.fail(f"endpoint receivers counted {rx}, the output links' faults were {want}")
        for q, cnt in self.expect_ctrl.items():
            missing = +cnt
            if missing:
                h = pk.decode_header(next(iter(missing)))
                self.fail(f"output {q}: {sum(missing.values())} control packet(s) the switch "
                          f"never sent, e.g. {h} (not fanned out)")


def run_result(w, counters) -> dict:
    """The figures of a finished run of World ``w`` (``counters``: the switch's, at the end)."""
    srcs = [s for ep in w.eps for s in ep.sources.values()]
    rcvs = [r for ep in w.eps for r in ep.receivers.values()]
    inj = {}
    for side, lst in (("in", w.inj_in), ("out", w.inj_out)):
        for kind in ("drop", "corrupt", "duplicate", "delay"):
            inj[f"{side}_{kind}"] = sum(i.faults(kind) for i in lst)
    return {
        "check": "pass",
        "cycles": max(r.done_at for r in rcvs) + 1,
        "delivered": sum(r.expected for r in rcvs),
        "packets_sent": sum(s.high + s.retransmitted for s in srcs),
        "retransmissions": sum(s.retransmitted for s in srcs),
        "go_backs": sum(s.rewinds for s in srcs), "timeouts": sum(s.timeouts for s in srcs),
        "acks": sum(r.acks for r in rcvs), "nacks": sum(r.nacks for r in rcvs),
        "probes": sum(ep.probes for ep in w.eps),
        "injected": inj, "switch": counters,
        "endpoints": {k: sum(getattr(ep.rx, k) for ep in w.eps) for k in ("bad", "dup", "lost")},
    }
