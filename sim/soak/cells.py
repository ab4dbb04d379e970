"""Compiled long soak of one microswitch cell (R, D or RD): the cocotb cell bench's checks
(sim/benches/cells.py) at compiled speed.

:func:`cell_soak` builds the cell's Verilog (the text the cocotb bench builds) into the
compiled harness (:mod:`fred.sim.soak.builder`) and runs ``batches`` batches. A batch runs every
mode (default :func:`fred.sim.benches.cells.representative_modes`) once per back-pressure setting:
the cocotb bench's three, ``(idle, stall)`` = (0, 0), (0.5, 0.5), (0.2, 0.9), sharing ``beats``
per mode as it does, plus one phase with a random setting (idle up to 0.8, stall up to 0.9; a
quarter of ``beats``). Operands are :func:`fred.sim.golden.elem.random_operands` (special
values, ties, cancellation, overflow ...), expected beats :func:`fred.sim.golden.cells.expected_outputs`.

Checked per phase (:func:`fred.sim.soak.run.check_phase`): bit-exact outputs, exact beat
counts (nothing extra after the drain), the stream rule on every output in every cycle, every
input beat accepted, unused inputs never ready; in each zero back-pressure phase the latency
(first beat accepted -> first beat offered) equals the cell's ``latency`` and every used port
moves one beat per cycle.
"""

from __future__ import annotations

import random
import zlib
from dataclasses import dataclass, field

import numpy as np
from amaranth.hdl import Shape

from fred.hdl.cells import build_cell
from fred.hdl.netlist import RDMode
from fred.hdl.verilog import emit

from fred.sim.golden import cells as gc
from fred.sim.golden import random_operands
from .builder import TEST_OPT, SoakDesign
from .batch_io import StimPhase
from .run import SoakStats, check_phase, run_batches, span_rate

__all__ = ["cell_design", "cell_soak", "CellSoakReport", "DEFAULT_PAUSES", "representative_modes"]

#: (idle, stall, share of a mode's beats): the cocotb bench's settings (sim/benches/cells.py)
DEFAULT_PAUSES = ((0.0, 0.0, 0.45), (0.5, 0.5, 0.45), (0.2, 0.9, 0.1))
#: share of a mode's beats in the extra random-setting phase of a batch
RANDOM_SHARE = 0.25


def representative_modes(kind, middle):
    """The modes the cocotb bench runs (:func:`fred.sim.benches.cells.representative_modes`)."""
    from fred.sim.benches import representative_modes as modes  # tb_cells imports cocotb: only here

    return modes(kind, middle)


def cell_design(kind, *, middle=3, lanes=4, dtype="fp16", fault=None):
    """``(cell, SoakDesign)`` of a cell: the cocotb bench's Verilog text and top name."""
    cell = build_cell(kind, middle=middle, lanes=lanes, dtype=dtype, fault=fault)
    n_in, n_out = gc.port_counts(kind, cell.middle)
    cfg_bits = Shape.cast(cell.signature.members["cfg"].shape).width
    tag = f"cell-{kind}-m{cell.middle}-l{lanes}-{cell.dtype.name}" + (f"-{fault}" if fault else "")
    return cell, SoakDesign(emit(cell, cell.verilog_name), cell.verilog_name, n_in, n_out, lanes,
                            cell.width, cfg_bits, tag)


def _code(cell, mode) -> int:
    return cell.encode(RDMode.parse(mode)) if cell.kind == "rd" else cell.encode(mode, cell.middle)


def _stimulus(cell, mode, n, rng):
    n_in, _ = gc.port_counts(cell.kind, cell.middle)
    ins = [None] * n_in
    for r in gc.routes(cell.kind, mode, cell.middle):
        a, b = random_operands(cell.dtype.name, n * cell.lanes, rng)
        ins[r.inputs[0]] = a.reshape(n, cell.lanes)
        if r.is_sum:
            ins[r.inputs[1]] = b.reshape(n, cell.lanes)
    return ins


def _budget(n, idle, stall, latency) -> int:
    return int(n / ((1 - idle) * (1 - stall)) * 3) + 20 * latency + 200


@dataclass
class CellSoakReport:
    kind: str
    middle: int
    lanes: int
    dtype: str
    latency: int
    seed: int
    stats: SoakStats
    modes: dict = field(default_factory=dict)   # mode name -> beats, latency, beats/cycle

    def table(self) -> str:
        s = self.stats
        head = (f"{self.kind} cell m={self.middle} lanes={self.lanes} {self.dtype} (compiled soak, "
                f"seed {self.seed}): {s.beats:,} output beats bit-exact in {s.phases} phases, "
                f"{s.cycles:,} cycles; harness {s.sim_rate:,.0f} cycles/s, whole soak "
                f"{s.wall_rate:,.0f} cycles/s ({s.wall_s:.1f} s, build {s.build_s:.1f} s)")
        rows = [f"  {'mode':<12} {'beats':>9} {'latency':>8} {'beats/cycle':>12}"]
        for name, d in self.modes.items():
            rows.append(f"  {name:<12} {d['beats']:>9} {d['latency']:>8} {d['throughput']:>12}")
        return "\n".join([head] + rows)


def cell_soak(kind, *, middle=3, lanes=4, dtype="fp16", beats=10_000, batches=1, seed=None,
              modes=None, pauses=DEFAULT_PAUSES, random_phase=True, fault=None,
              codes=None, opt=TEST_OPT) -> CellSoakReport:
    """Soak one cell in the compiled harness (module docstring); raises ``AssertionError`` on
    the first wrong phase. ``beats`` per mode per batch; ``codes`` (tests only) replaces the
    configuration word of each mode; ``opt``: the build's C++ optimisation
    (:data:`fred.sim.soak.builder.TEST_OPT`, or ``SPEED_OPT`` for a speed figure)."""
    # long: one closure generates a batch, one checks it; both need the cell's parameters
    if not isinstance(beats, int) or beats < 1:
        raise ValueError(f"beats must be >= 1, got {beats!r}")
    if not isinstance(batches, int) or batches < 1:
        raise ValueError(f"batches must be >= 1, got {batches!r}")
    cell, design = cell_design(kind, middle=middle, lanes=lanes, dtype=dtype, fault=fault)
    seed = random.SystemRandom().randrange(1 << 31) if seed is None else int(seed)
    modes = list(representative_modes(kind, cell.middle) if modes is None else modes)
    codes = list(codes) if codes is not None else [_code(cell, md) for md in modes]
    lat, W, L, dt = cell.latency, cell.width, cell.lanes, cell.dtype.name
    figures = {}

    def gen(b):
        rng = np.random.default_rng([seed, b])
        prng = random.Random(zlib.crc32(f"{seed}/{b}".encode()))
        phases = []
        for mode, code in zip(modes, codes):
            name = gc.mode_name(kind, mode)
            settings = [tuple(p) for p in pauses]
            if random_phase:
                settings.append((round(prng.uniform(0, 0.8), 3), round(prng.uniform(0, 0.9), 3),
                                 RANDOM_SHARE))
            for idle, stall, share in settings:
                n = max(1, int(round(beats * share))) if gc.routes(kind, mode, cell.middle) else 0
                ins = _stimulus(cell, mode, n, rng)
                exp = gc.expected_outputs(kind, mode, ins, dt, cell.middle, lanes=L)
                what = (f"{kind} m={cell.middle} {dt} x{L} mode {name} (idle {idle}, stall {stall}; "
                        f"batch {b}, seed {seed})")
                phases.append(StimPhase(code, idle, stall, ins, [len(e) for e in exp], lat + 4,
                                        _budget(n, idle, stall, lat),
                                        {"what": what, "mode": mode, "name": name, "exp": exp}))
        return phases

    def check(b, phases, results):
        for ph, res in zip(phases, results):
            mode, exp = ph.info["mode"], ph.info.pop("exp")
            routes = gc.routes(kind, mode, cell.middle)

            def describe(j, beat, lane):
                r = next(r for r in routes if j in r.outputs)
                return "".join(f"in{i}={int(ph.inputs[i][beat, lane]):#x} " for i in r.inputs)

            check_phase(ph.info["what"], ph, res, exp, width=W, lanes=L, describe=describe)
            d = figures.setdefault(ph.info["name"], {"beats": 0, "latency": "-", "throughput": "-"})
            d["beats"] += sum(len(e) for e in exp)
            if ph.idle == 0 and ph.stall == 0 and routes:
                _line_rate(ph, res, lat, d)

    stats = run_batches(design, batches, gen, check, seed, f"{kind} cell soak", opt)
    return CellSoakReport(kind, cell.middle, L, dt, lat, seed, stats, figures)


def _line_rate(ph, res, latency, d):
    """Zero back-pressure: latency == the cell's, one beat per cycle on every used port."""
    used_in = [k for k, c in enumerate(res.in_cycles) if len(c)]
    used_out = [j for j, c in enumerate(res.out_cycles) if len(c)]
    first_in = min(int(res.in_cycles[k][0]) for k in used_in)
    first_out = min(int(res.out_cycles[j][0]) for j in used_out)
    rates = {f"i{k}": span_rate(res.in_cycles[k]) for k in used_in}
    rates.update({f"o{j}": span_rate(res.out_cycles[j]) for j in used_out})
    got = first_out - first_in
    if got != latency:
        raise AssertionError(f"{ph.info['what']}: latency {got} cycles, the cell promises {latency}")
    low = {p: r for p, r in rates.items() if r != 1.0}
    if low:
        raise AssertionError(f"{ph.info['what']}: below 1 beat/cycle at zero back-pressure: {low}")
    d["latency"], d["throughput"] = got, f"{min(rates.values()):.2f}"
