"""Compiled long soak of a FRED_m(P) fabric: the fabric bench's checks (sim/compiled/fabric.py)
at compiled replay speed, with random flows.

:func:`fabric_soak` builds the fabric's Verilog (:func:`fred.sim.characterize.fabric.fabric_verilog`,
the text the cocotb bench builds) into the compiled harness (:mod:`fred.sim.soak.builder`) and
runs ``batches`` batches. A batch is one regression case (:func:`fred.sim.characterize.fabric_random.case_phases`:
a phase per flow kind, random mixed flow sets, a full permutation, compound collectives, each
routed by :func:`fred.hdl.routing.compiler.route` and loaded while the fabric is drained), with fresh
random data for every phase (IEEE special values in every other phase) and a back-pressure
setting per phase in turn: none (idle 0, stall 0), idle sources only (idle up to 0.8), and
both (idle up to 0.4, stall 0.1 .. 0.9).

Checked per phase: bit-exact against the structural golden model
(:func:`fred.sim.golden.fabric.simulate_result`, itself checked against the compiler's reduction
trees), the order-independent sums (:func:`fred.sim.golden.fabric.check_sums`), exact beat counts
with nothing on an output that belongs to no flow, the stream rule on every output in every
cycle, every input beat accepted, inputs of no flow never ready (but on FRED_m(2), one RD cell,
whose two-flow modes route an input no flow uses: :func:`routed_unused_inputs`); latency: with no back-pressure
at all every beat takes exactly the fabric's latency and every used port moves one beat per
cycle; with idle sources and no stall every beat takes between the latency and
:func:`fred.hdl.fabric.recursive.gapped_latency_bound` cycles (from the last of its inputs' acceptance).
"""

from __future__ import annotations

import random
import zlib
from dataclasses import dataclass

import numpy as np

from fred.hdl.dtypes import get_dtype
from fred.hdl.fabric import config_bits, config_width, fabric_latency, gapped_latency_bound
from fred.hdl.netlist import RDMode
from fred.hdl.routing import route

from fred.sim.characterize import case_phases
from fred.sim.golden import check_sums, random_inputs, simulate_result, tree_reference
from fred.sim.characterize import TOP, fabric_verilog
from .builder import TEST_OPT, SoakDesign
from .batch_io import StimPhase, unpack
from .run import SoakStats, check_phase, run_batches, span_rate

__all__ = ["fabric_design", "fabric_soak", "FabricSoakReport", "routed_unused_inputs"]


def fabric_design(ports, middle, lanes=1, dtype="fp16", fault=None) -> SoakDesign:
    """The fabric's SoakDesign (shared-module Verilog, top ``fred_fabric``)."""
    t = get_dtype(dtype)
    tag = f"fabric-p{ports}-m{middle}-l{lanes}-{t.name}" + (f"-{fault}" if fault else "")
    return SoakDesign(fabric_verilog(ports, middle, lanes, t.name, fault), TOP, ports, ports,
                      lanes, t.width, config_width(ports, middle), tag)


@dataclass
class FabricSoakReport:
    ports: int
    middle: int
    lanes: int
    dtype: str
    latency: int
    seed: int
    stats: SoakStats
    latency_range: dict    # setting ("none", "idle", "both") -> [min, max] cycles over every beat
    phase_figures: list    # per phase: {"label", "setting", "idle", "stall", "latency": [min, max]}

    def table(self) -> str:
        s = self.stats
        lat = ", ".join(f"{k} {v[0]}..{v[1]}" for k, v in self.latency_range.items())
        return (f"FRED_{self.middle}({self.ports}) lanes={self.lanes} {self.dtype} (compiled soak, "
                f"seed {self.seed}): {s.beats:,} output beats bit-exact in {s.phases} phases "
                f"({s.batches} batches), {s.cycles:,} cycles; harness {s.sim_rate:,.0f} cycles/s, "
                f"whole soak {s.wall_rate:,.0f} cycles/s ({s.wall_s:.1f} s, build "
                f"{s.build_s:.1f} s); latency {self.latency} cycles, measured per setting: {lat}")


SETTINGS = ("none", "idle", "both")


def _setting(which, prng, idle=None):
    """``(idle, stall)`` of a back-pressure setting: none, idle sources only (``idle``, or
    random up to 0.8), or both (random)."""
    if which == "none":
        return 0.0, 0.0
    if which == "idle":
        return (round(prng.uniform(0.05, 0.8), 3) if idle is None else idle), 0.0
    if which == "both":
        return round(prng.uniform(0.0, 0.4), 3), round(prng.uniform(0.1, 0.9), 3)
    raise ValueError(f"unknown back-pressure setting {which!r}; known: {', '.join(SETTINGS)}")


def fabric_soak(ports, middle, lanes=1, dtype="fp16", *, beats=64, batches=1, seed=None,
                fault=None, flowsets=None, settings=SETTINGS, idle=None, specials="mixed",
                wrong_config=None, idle_bound=None, opt=TEST_OPT) -> FabricSoakReport:
    """Soak FRED_middle(ports) in the compiled harness (module docstring); ``beats`` per input
    port per phase. Raises ``AssertionError`` on the first wrong phase.

    ``flowsets``: ``[(flows, label), ...]`` run in every batch instead of a random regression
    case; ``settings``: the back-pressure settings phases take in turn (``idle`` fixes the
    idle probability of the ``"idle"`` setting); ``specials``: ``"mixed"`` (every other phase),
    True or False; ``wrong_config`` (tests only): load the routing of these flows in every
    phase instead of the phase's own; ``idle_bound`` replaces :func:`gapped_latency_bound` as
    the most cycles a beat may take with idle sources; ``opt``: the build's C++ optimisation
    (:data:`fred.sim.soak.builder.TEST_OPT`, or ``SPEED_OPT`` for a speed figure)."""
    # long: one closure generates a batch, one checks it; both need the fabric's parameters
    if not isinstance(beats, int) or beats < 1:
        raise ValueError(f"beats must be >= 1, got {beats!r}")
    if not isinstance(batches, int) or batches < 1:
        raise ValueError(f"batches must be >= 1, got {batches!r}")
    for w in settings:
        _setting(w, random.Random(0))
    design = fabric_design(ports, middle, lanes, dtype, fault)
    dt = get_dtype(dtype).name
    seed = random.SystemRandom().randrange(1 << 31) if seed is None else int(seed)
    lat = fabric_latency(ports, middle, lanes, dt)
    bound = gapped_latency_bound(ports, middle, lanes, dt) if idle_bound is None else idle_bound
    ranges, figures = {}, []
    wrong = None if wrong_config is None else config_bits(ports, middle, route(ports, middle, wrong_config))

    def gen(b):
        bseed = zlib.crc32(f"{seed}/{b}".encode())
        sets = flowsets or list(zip(*case_phases(ports, middle, bseed)))
        prng = random.Random(bseed + 1)
        nrng = np.random.default_rng([seed, b])
        phases = []
        for k, (flows, label) in enumerate(sets):
            res = route(ports, middle, flows)
            sp = k % 2 == 1 if specials == "mixed" else bool(specials)
            inputs = random_inputs(ports, res.flows, beats, lanes, dt, rng=nrng, specials=sp)
            exp = simulate_result(res, inputs, dt)
            tref = tree_reference(res, inputs, dt)
            if set(tref) != set(exp) or any(not np.array_equal(tref[p], exp[p]) for p in exp):
                raise AssertionError(f"{label}: structural golden model and reduction tree disagree")
            which = settings[k % len(settings)]
            idle_p, stall = _setting(which, prng, idle)
            what = (f"FRED_{middle}({ports}) {dt} x{lanes} batch {b} {label} "
                    f"[{' '.join(map(str, res.flows))}] (idle {idle_p}, stall {stall}; seed {seed})")
            budget = beats * (4 + int(8 / max(0.05, 1 - max(idle_p, stall)))) * 3 + 4 * lat + 200
            phases.append(StimPhase(
                config_bits(ports, middle, res) if wrong is None else wrong, idle_p, stall,
                [inputs.get(p) for p in range(ports)],
                [beats if p in exp else 0 for p in range(ports)], 2 * lat + 8, budget,
                {"what": what, "res": res, "exp": exp, "which": which, "label": label}))
        return phases

    def check(b, phases, results):
        for ph, r in zip(phases, results):
            res, exp, what = ph.info["res"], ph.info.pop("exp"), ph.info["what"]
            expected = [exp.get(p, np.zeros((0, lanes), np.uint32)) for p in range(ports)]
            check_phase(what, ph, r, expected, width=design.width, lanes=lanes,
                        check_unused=not routed_unused_inputs(res))
            got = {p: unpack(r.out_words[p], design.width, lanes) for p in exp}
            inputs = {p: x for p, x in enumerate(ph.inputs) if x is not None}
            check_sums(res.flows, inputs, got, dt)
            lo_hi = _latency(what, ph.info["which"], res, r, lat, bound, ranges)
            figures.append({"label": ph.info["label"], "setting": ph.info["which"],
                            "idle": ph.idle, "stall": ph.stall, "latency": lo_hi})

    stats = run_batches(design, batches, gen, check, seed, f"FRED_{middle}({ports}) soak", opt)
    return FabricSoakReport(ports, middle, lanes, dt, lat, seed, stats, ranges, figures)


def routed_unused_inputs(res) -> set:
    """Inputs that no flow of ``res`` (a RoutingResult) uses but its configuration routes, so they
    may be ready. Only FRED_m(2) has such inputs: it is one RD cell, and its modes route both
    inputs (pass, cross, the sums) or one (the broadcasts), so a phase of one unicast flow leaves
    the other input routed to an output of no flow (a beat there would fail the output check,
    nothing is lost). A larger fabric enters through R cells, whose unused inputs are idle and
    never ready."""
    if res.P != 2:
        return set()
    (mode,) = res.cell_modes.values()
    routed = {RDMode.BCAST0: {0}, RDMode.BCAST1: {1}}.get(mode, {0, 1})
    return routed - {p for f in res.flows for p in f.inputs}


def _latency(what, which, res, r, lat, bound, ranges):
    """Per-beat latency (output transfer - last input acceptance) against the contract."""
    lo, hi = None, None
    for f in res.flows:
        last_in = np.max(np.stack([r.in_cycles[q].astype(np.int64) for q in f.inputs]), axis=0)
        for p in f.outputs:
            d = r.out_cycles[p].astype(np.int64) - last_in
            lo = int(d.min()) if lo is None else min(lo, int(d.min()))
            hi = int(d.max()) if hi is None else max(hi, int(d.max()))
            if which == "none" and span_rate(r.out_cycles[p]) != 1.0:
                raise AssertionError(f"{what}: output {p} below 1 beat/cycle at zero back-pressure")
        if which == "none":
            low = [q for q in f.inputs if span_rate(r.in_cycles[q]) != 1.0]
            if low:
                raise AssertionError(f"{what}: inputs {low} below 1 beat/cycle at zero back-pressure")
    if lo is None:
        return None
    if lo < lat:
        raise AssertionError(f"{what}: a beat took {lo} cycles, less than the latency {lat}")
    if which == "none" and (lo, hi) != (lat, lat):
        raise AssertionError(f"{what}: latency {lo}..{hi} cycles at zero back-pressure, the "
                             f"fabric promises exactly {lat}")
    if which == "idle" and not lat <= lo <= hi <= bound:
        raise AssertionError(f"{what}: latency {lo}..{hi} cycles with idle sources, the contract "
                             f"is {lat}..{bound}")
    old = ranges.get(which, [lo, hi])
    ranges[which] = [min(old[0], lo), max(old[1], hi)]
    return [lo, hi]
