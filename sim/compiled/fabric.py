"""The cycle-stepped FRED_m(P) fabric bench (plain Python), driven by either simulator.

:class:`FabricWorld` holds everything outside the fabric: one stream source per input port (raises
``valid`` without waiting for ``ready``, holds the beat until it is taken, idles before a beat
with a seeded probability), one sink per output port (random back-pressure, the stream rule
checked every cycle), and the bench's sequence of phases. Per phase it routes the phase's flows
(:func:`fred.hdl.routing.compiler.route`), loads the configuration word while the fabric is
drained, waits two cycles, queues the phase's random inputs, waits for every expected beat and
every source to go idle, then a drain margin (``2 x latency + 8`` cycles: anything still coming
out would be an extra beat), and checks

* bit-exact: each used output's beats equal :func:`fred.sim.golden.fabric.simulate_result`
  (same adds in the same cells in the same order as the hardware), which is itself checked
  against the compiler's reduction trees (``tree_reference``);
* order-independent: :func:`fred.sim.golden.fabric.check_sums` (int32 exact, floats within the
  rounding bound of the float64 sum, IEEE specials);
* nothing appears on an output that belongs to no flow, and no extra or missing beats;
* the stream rule on every output (valid and payload held until taken), every cycle;
* the watchdog: a run longer than its cycle budget fails (a hang fails fast).

Per cycle a driver asks :meth:`FabricWorld.drive` for the inputs, applies them after the falling
edge, samples the outputs and hands them to :meth:`FabricWorld.observe` (the rising edge ends
the cycle):

* :func:`run_compiled_fabric` -- the compiled fabric (:func:`fred.sim.compiled.loader.load_top`,
  lockstep);
* sim/benches/fabric.py -- cocotb (the same world, the same seed: the same figures;
  tests/sim/test_fabric_sim.py compares them).

Configuration (``cfg``, what :func:`fred.sim.characterize.fabric.run_fabric` passes)::

    ports, middle, lanes, dtype     the fabric's parameters (must match the Verilog)
    phases        list of phases; a phase is a list of flow strings ("0,1>0,1")
    labels        optional phase labels (for messages)
    config_phases optional list parallel to ``phases``: route *these* flows for the config of
                  that phase instead (None = the phase's own) -- a deliberately wrong config, so
                  a test can prove the checker fails
    config_words  optional list parallel to ``phases``: the configuration word of that phase as
                  a hex string (e.g. ``config.word_hex`` of ``fred route --json``), driven into
                  ``cfg`` as given instead of the bench's own packing (None = the bench's own)
    beats         beats per input port per phase (default 64)
    idle          probability a source idles in a cycle (offered load = 1 - idle)
    stall         probability a sink is not ready in a cycle (random back-pressure)
    specials      "mixed" (default: every other phase draws IEEE special values / hard
                  operands from golden_elem.random_operands), true or false
    max_cycles    watchdog budget for the whole run (default from the beat count)

Every random choice derives from the seed: ``random.Random(seed)`` seeds the per-port pause
generators (sources first, then sinks), ``numpy.random.default_rng(seed)`` draws the data, phase
by phase.

The result (:attr:`FabricWorld.result`): ``{"latency_formula": L, "seed": N, "phases": [{"label",
"flows", "kinds", "latency": {"min", "max", "mean"}, "out_rate": {port: beats/cycle}, "in_rate":
{port: ..}, "cycles": n}]}`` where a beat's latency is the cycle its output transfer happens minus
the cycle the last of its inputs was accepted, and a port's rate is beats / (last - first + 1)
cycles.
"""

from __future__ import annotations

import random
from collections import deque

import numpy as np

from fred.contract.packet import flit_from_lanes, lanes_from_flit
from fred.hdl.dtypes import get_dtype
from fred.hdl.fabric import config_bits, fabric_latency
from fred.hdl.routing import route
from fred.sim.golden import check_sums, random_inputs, simulate_result, tree_reference

from .world import BenchFailure, _pause, drive_sources

__all__ = ["FabricWorld", "run_compiled_fabric", "FABRIC_RESET"]

#: ``rst`` in the cycles before a fabric world's first: two cycles of reset, one idle cycle
FABRIC_RESET = (1, 1, 0)


def _stats(values):
    if not values:
        return {"min": None, "max": None, "mean": None}
    return {"min": int(min(values)), "max": int(max(values)), "mean": float(sum(values) / len(values))}


class FabricWorld:
    """Sources, sinks and the phase sequence around a fabric (module docstring). ``log``: a
    callable given one line per phase (the cocotb driver's logger), or None."""

    def __init__(self, cfg, seed: int, log=None):
        self.cfg, self.seed, self.log = cfg, int(seed), log
        self.P = P = cfg["ports"]
        self.middle, self.lanes, self.dtype = cfg["middle"], cfg["lanes"], cfg["dtype"]
        self.width = get_dtype(self.dtype).width
        self.phases = cfg["phases"]
        self.labels = cfg.get("labels") or [f"phase {k}" for k in range(len(self.phases))]
        self.wrong = cfg.get("config_phases") or [None] * len(self.phases)
        self.beats_per_phase = int(cfg.get("beats", 64))
        idle, stall = float(cfg.get("idle", 0.0)), float(cfg.get("stall", 0.0))
        for name, v in (("idle", idle), ("stall", stall)):
            if not 0.0 <= v < 1.0:
                raise ValueError(f"{name} probability {v!r} must be in [0, 1)")
        self.latency = fabric_latency(P, self.middle, self.lanes, self.dtype)
        self.budget = int(cfg.get("max_cycles") or (
            len(self.phases) * (self.beats_per_phase * (4 + int(8 / max(0.05, 1 - max(idle, stall))))
                                + 4 * self.latency + 100) + 1000))
        rng = random.Random(self.seed)
        self.nrng = np.random.default_rng(self.seed)
        self.src_pause = [_pause(idle, random.Random(rng.random())) for _ in range(P)]
        self.snk_pause = [_pause(stall, random.Random(rng.random())) for _ in range(P)]
        # sources
        self.queue = [deque() for _ in range(P)]
        self.holding = [False] * P
        self.valid = [0] * P                          # valid as driven this cycle
        self.sent = [[] for _ in range(P)]            # (cycle, payload) of every accepted beat
        # sinks
        self.ready = [0] * P
        self.pending = [None] * P                     # payload offered and not taken
        self.beats = [[] for _ in range(P)]           # (cycle, payload) of every taken beat
        self.cfg_word = 0
        self.now = 0
        self.finished = False
        self.result = None
        self.checked = []                             # the routed flows of every passed phase
        self._main = self._run()
        next(self._main)                              # phase 0 routed, its word loaded at cycle 0

    def fail(self, msg):
        raise BenchFailure(msg)

    # -- one cycle --------------------------------------------------------------------------------
    def drive(self):
        """``(cfg word, valid, payload or None, ready)`` for this cycle (after the falling edge);
        a held beat stays until taken (payload None: the payload is left as it was)."""
        iv, ip = drive_sources(self.holding, self.queue, self.src_pause)
        self.valid = iv
        self.ready = [0 if next(self.snk_pause[q]) else 1 for q in range(self.P)]
        return self.cfg_word, iv, ip, list(self.ready)

    def observe(self, in_ready, out_valid, out_payload):
        """The outputs sampled this cycle: ``in_ready[p]``, ``out_valid[q]``, ``out_payload``
        (a callable ``q -> int``: read only when needed); then the rising edge."""
        now = self.now
        for p in range(self.P):
            if self.holding[p] and in_ready[p]:
                self.sent[p].append((now, self.queue[p].popleft()))
                self.holding[p] = False
        for q in range(self.P):
            valid = out_valid[q]
            if self.pending[q] is not None:
                if not valid:
                    self.fail(f"o__{q}: valid dropped before the beat was taken (stream rule; "
                              f"cycle {now}, seed {self.seed})")
                w = out_payload(q)
                if w != self.pending[q]:
                    self.fail(f"o__{q}: payload changed while valid and not ready "
                              f"({self.pending[q]:#x} -> {w:#x}; cycle {now}, seed {self.seed})")
            if valid:
                w = out_payload(q)
                if self.ready[q]:
                    self.beats[q].append((now, w))
                    self.pending[q] = None
                else:
                    self.pending[q] = w
        self.now += 1
        if self.now > self.budget:
            self.fail(f"watchdog: FRED_{self.middle}({self.P}) bench (seed {self.seed}) still "
                      f"running after {self.budget} cycles (hang?)")
        next(self._main)

    # -- the phases (a generator resumed at every rising edge) ---------------------------------
    def _idle(self, p) -> bool:
        return not self.queue[p] and not self.valid[p]

    def _run(self):
        P, beats, lat = self.P, self.beats_per_phase, self.latency
        results = []
        if self.log:
            idle, stall = self.cfg.get("idle", 0.0), self.cfg.get("stall", 0.0)
            self.log(f"FRED_{self.middle}({P}) lanes={self.lanes} {self.dtype}: {len(self.phases)} "
                     f"phases x {beats} beats, idle={idle} stall={stall}, seed {self.seed} (rerun "
                     f"with FRED_SEED={self.seed}), latency {lat}")
        for k, flows in enumerate(self.phases):
            label = self.labels[k]
            res, word, inputs, expected = self._golden(k, flows, label)
            self.cfg_word = word             # loaded while drained, from the next falling edge
            yield
            yield
            base_in = [len(s) for s in self.sent]
            base_out = [len(b) for b in self.beats]
            start_cycle = self.now
            for p, x in inputs.items():
                self.queue[p].extend(flit_from_lanes(row, self.width) for row in x.tolist())
            while any(len(self.beats[p]) - base_out[p] < beats for p in expected) or \
                    any(not self._idle(p) for p in range(P)):
                yield
            for _ in range(2 * lat + 8):     # drain margin: anything still coming out is extra
                yield
            end_cycle = self.now
            self._check(label, res, base_out, inputs, expected)
            self.checked.append(res.flows)
            lat_k, out_rate, in_rate = self._figures(res, base_in, base_out)
            results.append({"label": label, "flows": [str(f) for f in res.flows],
                            "kinds": [f.kind for f in res.flows], "latency": _stats(lat_k),
                            "out_rate": out_rate, "in_rate": in_rate, "cycles": end_cycle - start_cycle})
            if self.log:
                self.log(f"{label}: {' '.join(str(f) for f in res.flows)}: ok, latency "
                         f"{_stats(lat_k)}, {end_cycle - start_cycle} cycles")
        self.result = {"latency_formula": lat, "seed": self.seed, "phases": results}
        self.finished = True
        while True:
            yield

    def _golden(self, k, flows, label):
        """Route phase ``k``; its config word (of the ``config_phases`` flows' routing if
        given), random inputs and the expected outputs (structural golden model, checked against
        the reduction trees)."""
        P, m, wrong = self.P, self.middle, self.wrong[k]
        specials = self.cfg.get("specials", "mixed")
        res = route(P, m, flows)
        cres = res if wrong is None else route(P, m, wrong)
        word = config_bits(P, m, cres)
        given = (self.cfg.get("config_words") or [None] * (k + 1))[k]
        if given is not None:
            word = int(given, 16)
        sp = k % 2 == 1 if specials == "mixed" else bool(specials)
        inputs = random_inputs(P, res.flows, self.beats_per_phase, self.lanes, self.dtype,
                               rng=self.nrng, specials=sp)
        expected = simulate_result(res, inputs, self.dtype)
        tref = tree_reference(res, inputs, self.dtype)
        if set(tref) != set(expected):
            self.fail(f"{label}: golden outputs {sorted(expected)} != tree {sorted(tref)}")
        for p in expected:
            if not np.array_equal(tref[p], expected[p]):
                self.fail(f"{label}: structural golden model and reduction tree disagree on output {p}")
        return res, word, inputs, expected

    def _check(self, label, res, base_out, inputs, expected):
        """Bit-exact against the golden model, nothing on unused outputs, then the
        order-independent sums check."""
        seed, beats = self.seed, self.beats_per_phase
        got = {}
        for p in range(self.P):
            new = self.beats[p][base_out[p]:]
            if p not in expected:
                if new:
                    self.fail(f"{label}: output {p} belongs to no flow but received {len(new)} "
                              f"beats (first {new[0][1]:#x}; seed {seed})")
                continue
            if len(new) != beats:
                self.fail(f"{label}: output {p} received {len(new)} beats, expected {beats} (seed {seed})")
            got[p] = np.array([lanes_from_flit(w, self.width, self.lanes) for _, w in new],
                              dtype=np.uint64).astype(np.uint32)
        for p in sorted(expected):
            diff = np.argwhere(got[p] != expected[p])
            if diff.size:
                b, lane = (int(v) for v in diff[0])
                flow = res.flows[res.output_flow[p]]
                self.fail(f"{label}: output {p} (flow '{flow}', tree {res.trees[res.output_flow[p]]}) "
                          f"beat {b} lane {lane}: got {int(got[p][b, lane]):#x}, golden "
                          f"{int(expected[p][b, lane]):#x} ({int(diff.shape[0])} mismatching "
                          f"elements; seed {seed}, rerun with FRED_SEED={seed})")
        check_sums(res.flows, inputs, got, self.dtype)

    def _figures(self, res, base_in, base_out):
        """Per-beat latencies and per-port rates of one phase (see the module docstring)."""
        lat = []
        out_rate, in_rate = {}, {}
        for f in res.flows:
            ins = {p: self.sent[p][base_in[p]:] for p in f.inputs}
            for p in f.outputs:
                outs = self.beats[p][base_out[p]:]
                for b, (c_out, _) in enumerate(outs):
                    lat.append(c_out - max(ins[q][b][0] for q in f.inputs))
                out_rate[p] = len(outs) / (outs[-1][0] - outs[0][0] + 1)
            for q in f.inputs:
                in_rate[q] = len(ins[q]) / (ins[q][-1][0] - ins[q][0][0] + 1)
        return lat, out_rate, in_rate


def run_compiled_fabric(m, cfg, seed) -> dict:
    """Run the fabric world ``cfg`` (module docstring) on a compiled fabric ``m``
    (:func:`fred.sim.compiled.loader.load_top` of the fabric's Verilog); the world's result.
    Raises :class:`fred.sim.compiled.world.BenchFailure` (an ``AssertionError``) on a failed
    check."""
    w = FabricWorld(cfg, seed)
    P = w.P
    inv, outv, ino, outo = m.inv, m.outv, m.ino, m.outo
    inv[:] = 0
    for rst in FABRIC_RESET:
        m.set("rst", rst)
        m.cycle()
    r = range(P)
    iv, ordy = [ino[f"i__{p}__valid"][0] for p in r], [ino[f"o__{p}__ready"][0] for p in r]
    ir, ov = [outo[f"i__{p}__ready"][0] for p in r], [outo[f"o__{p}__valid"][0] for p in r]
    ip, op = [f"i__{p}__payload" for p in r], [f"o__{p}__payload" for p in r]
    get = m.get
    word_now = None
    while not w.finished:
        word, valid, words, ready = w.drive()
        if word != word_now:
            m.set("cfg", word)
            word_now = word
        for p in r:
            inv[iv[p]] = valid[p]
            if words[p] is not None:
                m.set(ip[p], words[p])
            inv[ordy[p]] = ready[p]
        m.cycle()
        w.observe([int(outv[i]) for i in ir], [int(outv[i]) for i in ov], lambda q: get(op[q]))
    return w.result
