"""The batch loop and the common checks of the compiled soaks (cells: :mod:`fred.sim.soak.cells`,
fabrics: :mod:`fred.sim.soak.fabric`).

A soak is a number of *batches*; a batch is a list of phases (:class:`fred.sim.soak.batch_io.StimPhase`)
that one run of the harness replays back to back after a reset. :func:`run_batches` overlaps the
work on two cores: the harness run of batch ``b`` starts as soon as its stimulus is written, then
Python checks batch ``b - 1`` (waiting for its run) and generates batch ``b + 1``, so at most
two harness runs and the Python side share the machine.

:func:`check_phase` is what every phase must satisfy: no hang, the stream rule on every output,
every input beat accepted, exactly the expected number of beats on every output (none on an
output that expects none, none extra after the drain), bit-exact payloads against the golden
model, and (for cells) inputs the phase does not use never ready.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import builder as soak_build
from .batch_io import read_results, unpack, write_stimulus
from fred.sim.toolchain import waves_requested

__all__ = ["SoakStats", "run_batches", "check_phase", "span_rate"]


class CycleRates:
    """``sim_rate`` / ``wall_rate`` of a soak's figures (``cycles``, ``sim_s``, ``wall_s``)."""

    @property
    def sim_rate(self) -> float:
        """Cycles per second of the harness's simulation loops."""
        return self.cycles / self.sim_s if self.sim_s else 0.0

    @property
    def wall_rate(self) -> float:
        """Cycles per second of the whole soak (golden model, files, harness, comparison)."""
        return self.cycles / self.wall_s if self.wall_s else 0.0


@dataclass
class SoakStats(CycleRates):
    """Figures of one soak: phases and beats checked, cycles simulated, seconds of the harness's
    simulation loops (``sim_s``) and of the whole soak after the build (``wall_s``)."""

    batches: int = 0
    phases: int = 0
    beats: int = 0
    cycles: int = 0
    sim_s: float = 0.0
    wall_s: float = 0.0
    build_s: float = 0.0
    extra: dict = field(default_factory=dict)


def run_batches(design, batches: int, gen, check, seed: int, what: str,
                opt: str = soak_build.TEST_OPT) -> SoakStats:
    """Build ``design`` (a :class:`fred.sim.soak.builder.SoakDesign`), then for each batch ``b``:
    ``gen(b)`` -> list of StimPhase, run the harness with seed ``seed + b``, and
    ``check(b, phases, results)`` (results: a list of :class:`fred.sim.soak.batch_io.PhaseResult`).
    With ``WAVES=1`` the harness is built with tracing and batch ``b`` writes
    ``dump-SEED-bB.vcd`` in its build folder (named in a failure's message)."""
    stats = SoakStats()
    t0 = time.perf_counter()
    waves = waves_requested()
    exe = soak_build.build(design, waves, opt)
    stats.build_s = time.perf_counter() - t0
    sizes = dict(n_in=design.n_in, n_out=design.n_out, words=design.payload_words)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="fred-soak-") as tmp:
        tmp = Path(tmp)
        pending = None
        nxt = gen(0) if batches else None
        for b in range(batches + 1):
            running = None
            if b < batches:
                phases = nxt
                stim, out = tmp / f"stim{b % 2}.bin", tmp / f"out{b % 2}.bin"
                write_stimulus(stim, phases, width=design.width, cfg_words=design.cfg_words,
                               **sizes)
                vcd = exe.parent.parent / f"dump-{seed}-b{b}.vcd" if waves else None
                running = (b, phases, out, soak_build.start(exe, stim, out, seed + b, vcd), vcd)
            if pending is not None:
                _collect(pending, sizes, check, stats, what, seed)
            if b + 1 < batches:
                nxt = gen(b + 1)
            pending = running
    stats.wall_s = time.perf_counter() - t0
    stats.batches = batches
    return stats


def _collect(pending, sizes, check, stats, what, seed):
    b, phases, out, proc, vcd = pending
    cycles, secs = soak_build.finish(proc, f"{what} batch {b}")
    status, total, results = read_results(out, **sizes)
    stats.cycles += total
    stats.sim_s += secs
    waves = f"; waves {vcd}" if vcd else ""
    if status != 0:
        ph = phases[len(results)]
        raise AssertionError(f"{what}: batch {b} phase {len(results)} ({ph.info.get('what', '')}) "
                             f"exceeded its budget of {ph.budget} cycles: a hang "
                             f"(harness seed {seed + b}{waves})")
    try:
        check(b, phases, results)
    except AssertionError as exc:
        if not vcd:
            raise
        raise AssertionError(f"{exc}{waves}") from None
    stats.phases += len(results)
    stats.beats += sum(len(c) for r in results for c in r.out_cycles)


def span_rate(cycles) -> float:
    """Beats per cycle of a port: beats / (last - first + 1)."""
    return len(cycles) / (int(cycles[-1]) - int(cycles[0]) + 1) if len(cycles) else 0.0


def check_phase(what, ph, res, expected, *, width, lanes, check_unused=True, describe=None):
    """Raise ``AssertionError`` unless phase ``ph`` (StimPhase) ran correctly: ``res`` its
    PhaseResult, ``expected`` one ``(n, lanes)`` array per output (empty: nothing expected).
    ``describe(j, beat, lane)`` adds operands to a mismatch message."""
    if res.stream_violations:
        raise AssertionError(f"{what}: {res.stream_violations} stream-rule violations (valid "
                             f"dropped or payload changed while stalled), first in cycle "
                             f"{res.first_violation}")
    if check_unused and res.unused_ready:
        raise AssertionError(f"{what}: an unused input was ready in {res.unused_ready} cycles")
    for k, x in enumerate(ph.inputs):
        n = 0 if x is None else len(x)
        if len(res.in_cycles[k]) != n:
            raise AssertionError(f"{what}: input {k} accepted {len(res.in_cycles[k])} of {n} beats")
    for j, exp in enumerate(expected):
        got_n, want = len(res.out_cycles[j]), len(exp)
        if got_n != want:
            raise AssertionError(f"{what}: output {j} delivered {got_n} beats, expected {want}"
                                 + (" (extra beats)" if got_n > want else ""))
        if not want:
            continue
        got = unpack(res.out_words[j], width, lanes)
        if np.array_equal(got, exp):
            continue
        bad = np.argwhere(got != exp)
        lines = []
        for beat, lane in bad[:4]:
            ops = describe(j, int(beat), int(lane)) if describe else ""
            lines.append(f"beat {beat} lane {lane}: {ops}got {int(got[beat, lane]):#x} "
                         f"expected {int(exp[beat, lane]):#x}")
        raise AssertionError(f"{what}: output {j}: {len(bad)} lane mismatches; " + "; ".join(lines))
