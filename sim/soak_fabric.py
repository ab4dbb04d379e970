"""Compiled long soak of a FRED_m(P) fabric: the cocotb fabric bench's checks (sim/tb_fabric.py)
at compiled speed, with random flows.

:func:`fabric_soak` builds the fabric's Verilog (:func:`fred.sim.measure_fabric.fabric_verilog`,
the text the cocotb bench builds) into the compiled harness (:mod:`fred.sim.soak_build`) and
runs ``batches`` batches. A batch is one regression case (:func:`fred.sim.fabric_random.case_phases`:
a phase per flow kind, random mixed flow sets, a full permutation, compound collectives, each
routed by :func:`fred.hdl.routing.route` and loaded while the fabric is drained), with fresh
random data for every phase (IEEE special values in every other phase) and a back-pressure
setting per phase in turn: none (idle 0, stall 0), idle sources only (idle up to 0.8), and
both (idle up to 0.4, stall 0.1 .. 0.9).

Checked per phase: bit-exact against the structural golden model
(:func:`fred.sim.golden_fabric.simulate_result`, itself checked against the compiler's reduction
trees), the order-independent sums (:func:`fred.sim.golden_fabric.check_sums`), exact beat counts
with nothing on an output that belongs to no flow, the stream rule on every output in every
cycle, every input beat accepted, inputs of no flow never ready; latency: with no back-pressure
at all every beat takes exactly the fabric's latency and every used port moves one beat per
cycle; with idle sources and no stall every beat takes between the latency and
:func:`fred.hdl.fabric.gapped_latency_bound` cycles (from the last of its inputs' acceptance).
"""

from __future__ import annotations

import random
import zlib
from dataclasses import dataclass

import numpy as np

from fred.hdl.dtypes import get_dtype
from fred.hdl.fabric import config_bits, config_width, fabric_latency, gapped_latency_bound
from fred.hdl.routing import route

from .fabric_random import case_phases
from .golden_fabric import check_sums, random_inputs, simulate_result, tree_reference
from .measure_fabric import TOP, fabric_verilog
from .soak_build import SoakDesign
from .soak_io import StimPhase, unpack
from .soak_run import SoakStats, check_phase, run_batches, span_rate

__all__ = ["fabric_design", "fabric_soak", "FabricSoakReport"]


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

    def table(self) -> str:
        s = self.stats
        lat = ", ".join(f"{k} {v[0]}..{v[1]}" for k, v in self.latency_range.items())
        return (f"FRED_{self.middle}({self.ports}) lanes={self.lanes} {self.dtype} (compiled soak, "
                f"seed {self.seed}): {s.beats:,} output beats bit-exact in {s.phases} phases "
                f"({s.batches} batches), {s.cycles:,} cycles; harness {s.sim_rate:,.0f} cycles/s, "
                f"whole soak {s.wall_rate:,.0f} cycles/s ({s.wall_s:.1f} s, build "
                f"{s.build_s:.1f} s); latency {self.latency} cycles, measured per setting: {lat}")


def _setting(k, prng):
    """Back-pressure of phase ``k``: none, idle sources only, or both (in turn)."""
    which = ("none", "idle", "both")[k % 3]
    if which == "none":
        return which, 0.0, 0.0
    if which == "idle":
        return which, round(prng.uniform(0.05, 0.8), 3), 0.0
    return which, round(prng.uniform(0.0, 0.4), 3), round(prng.uniform(0.1, 0.9), 3)


def fabric_soak(ports, middle, lanes=1, dtype="fp16", *, beats=64, batches=1, seed=None,
                fault=None) -> FabricSoakReport:
    """Soak FRED_middle(ports) in the compiled harness (module docstring); ``beats`` per input
    port per phase. Raises ``AssertionError`` on the first wrong phase."""
    # long: one closure generates a batch, one checks it; both need the fabric's parameters
    if not isinstance(beats, int) or beats < 1:
        raise ValueError(f"beats must be >= 1, got {beats!r}")
    if not isinstance(batches, int) or batches < 1:
        raise ValueError(f"batches must be >= 1, got {batches!r}")
    design = fabric_design(ports, middle, lanes, dtype, fault)
    dt = get_dtype(dtype).name
    seed = random.SystemRandom().randrange(1 << 31) if seed is None else int(seed)
    lat = fabric_latency(ports, middle, lanes, dt)
    bound = gapped_latency_bound(ports, middle, lanes, dt)
    ranges = {}

    def gen(b):
        bseed = zlib.crc32(f"{seed}/{b}".encode())
        flowsets, labels = case_phases(ports, middle, bseed)
        prng = random.Random(bseed + 1)
        nrng = np.random.default_rng([seed, b])
        phases = []
        for k, (flows, label) in enumerate(zip(flowsets, labels)):
            res = route(ports, middle, flows)
            inputs = random_inputs(ports, res.flows, beats, lanes, dt, rng=nrng, specials=k % 2 == 1)
            exp = simulate_result(res, inputs, dt)
            tref = tree_reference(res, inputs, dt)
            if set(tref) != set(exp) or any(not np.array_equal(tref[p], exp[p]) for p in exp):
                raise AssertionError(f"{label}: structural golden model and reduction tree disagree")
            which, idle, stall = _setting(k, prng)
            what = (f"FRED_{middle}({ports}) {dt} x{lanes} batch {b} {label} "
                    f"[{' '.join(map(str, res.flows))}] (idle {idle}, stall {stall}; seed {seed})")
            budget = beats * (4 + int(8 / max(0.05, 1 - max(idle, stall)))) * 3 + 4 * lat + 200
            phases.append(StimPhase(
                config_bits(ports, middle, res), idle, stall,
                [inputs.get(p) for p in range(ports)],
                [beats if p in exp else 0 for p in range(ports)], 2 * lat + 8, budget,
                {"what": what, "res": res, "exp": exp, "which": which}))
        return phases

    def check(b, phases, results):
        for ph, r in zip(phases, results):
            res, exp, what = ph.info["res"], ph.info.pop("exp"), ph.info["what"]
            expected = [exp.get(p, np.zeros((0, lanes), np.uint32)) for p in range(ports)]
            check_phase(what, ph, r, expected, width=design.width, lanes=lanes)
            got = {p: unpack(r.out_words[p], design.width, lanes) for p in exp}
            inputs = {p: x for p, x in enumerate(ph.inputs) if x is not None}
            check_sums(res.flows, inputs, got, dt)
            _latency(what, ph.info["which"], res, r, lat, bound, ranges)

    stats = run_batches(design, batches, gen, check, seed, f"FRED_{middle}({ports}) soak")
    return FabricSoakReport(ports, middle, lanes, dt, lat, seed, stats, ranges)


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
        return
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
