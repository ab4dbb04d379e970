"""cocotb + Verilator regression of one microswitch cell, and the runner-side API around it.

Structure (as in cocotb's ``examples/matrix_multiplier``):

* :class:`CellDriver`    -- one :class:`~fred.sim.benches.streams.StreamDriver` per cell input;
* :class:`CellMonitor`   -- one :class:`~fred.sim.benches.streams.StreamMonitor` per cell output;
* :class:`CellModel`     -- expected output beats from the driven beats
  (:mod:`fred.sim.golden.cells`, i.e. :func:`fred.sim.golden.elem.add` for sums);
* :class:`CellChecker`   -- bit-exact comparison per output, first mismatches reported with
  lane, operands and both values;
* :class:`CellTestbench` -- runs every requested mode of the cell in ONE simulation: for each
  mode it programs ``cfg`` while the cell is drained, then runs one *phase* per
  back-pressure setting (source idle / sink stall probabilities, default ``(0, 0)``,
  ``(0.5, 0.5)``, ``(0.2, 0.9)``) with random operands including special values
  (:func:`fred.sim.golden.elem.random_operands`), waits for the drain, checks that nothing
  extra comes out and that unused inputs are never ready, and compares. In the zero
  back-pressure phase it measures the latency (first beat accepted -> first beat offered) and
  the throughput (beats per cycle on every used port), and asserts they equal the cell's
  ``latency`` and 1.0. A watchdog (cycle budget) fails a hang.

Runner side (no simulator needed): :func:`regression_config`, :func:`run_cell_regression`
(build through :func:`fred.sim.toolchain.run_bench`, run, return the per-mode figures as a
:class:`CellReport`) and :func:`main` (``make bench``: figures for one parameter set per cell).
The seed comes from ``FRED_SEED`` (or the ``seed`` argument) and is logged; ``WAVES=1`` writes
``dump.vcd`` in the run folder.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

import cocotb
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge

from fred.hdl.cells import build_cell
from fred.hdl.netlist import DMode, RDMode, RMode, mode_from_json, mode_to_json
from fred.hdl.verilog import emit
from fred.sim.golden import random_operands
from fred.sim.toolchain import bench_config, bench_seed
from fred.sim.benches import cover as coverage
from fred.sim.golden import cells as gc
from .streams import PauseGenerator, StreamDriver, StreamMonitor, pack_lanes, start, \
    unpack_lanes, watchdog

#: (source idle probability, sink stall probability, share of a mode's beats)
DEFAULT_PAUSES = ((0.0, 0.0, 0.45), (0.5, 0.5, 0.45), (0.2, 0.9, 0.1))
RESULTS_FILE = "cell_results.json"


def representative_modes(kind, middle):
    """Modes the regression runs: every RD mode; for R/D cells with ``middle`` middle ports, every
    reduction / broadcast target, two-flow modes that send each input to every output (R) or
    feed each output from every input (D), and the single-flow modes at both ends."""
    if kind == "rd":
        return list(RDMode)
    if kind == "r":
        return ([RMode((k, None), reduce=True) for k in range(middle)]
                + [RMode((k, (k + 1) % middle)) for k in range(middle)]
                + [RMode((None, 0)), RMode((middle - 1, None))])
    if kind == "d":
        return ([DMode((k, k)) for k in range(middle)]
                + [DMode((k, (k + 1) % middle)) for k in range(middle)]
                + [DMode((0, None)), DMode((None, middle - 1))])
    raise ValueError(f"unknown cell kind {kind!r}; known: r, d, rd")


# ---- verification components -----------------------------------------------------------------

class CellDriver:
    """Sources for every cell input (StreamDriver each), payloads packed lane 0 first."""

    def __init__(self, dut, n_in, width, cycles, rng):
        self.width = width
        self.drivers = [StreamDriver(dut, f"i__{k}", dut.clk, cycles,
                                     PauseGenerator(0.0, random.Random(rng.random())))
                        for k in range(n_in)]

    def set_idle(self, p):
        for d in self.drivers:
            d.pause.probability = p

    def send(self, k, beats):
        self.drivers[k].send(pack_lanes(row, self.width) for row in beats)

    def mark(self):
        return [len(d.sent) for d in self.drivers]

    def idle(self):
        return all(d.idle for d in self.drivers)


class CellMonitor:
    """Sinks for every cell output (StreamMonitor each), with random back-pressure."""

    def __init__(self, dut, n_out, width, lanes, cycles, rng):
        self.width, self.lanes = width, lanes
        self.monitors = [StreamMonitor(dut, f"o__{j}", dut.clk, cycles,
                                       PauseGenerator(0.0, random.Random(rng.random())))
                         for j in range(n_out)]

    def set_stall(self, p):
        for mo in self.monitors:
            mo.pause.probability = p

    def mark(self):
        return [len(mo.beats) for mo in self.monitors]

    def beats_since(self, j, start):
        return self.monitors[j].beats[start:]

    def as_array(self, j, start):
        rows = [unpack_lanes(p, self.width, self.lanes) for _, p in self.monitors[j].beats[start:]]
        return np.asarray(rows, dtype=np.uint32).reshape(-1, self.lanes)


class CellModel:
    """Golden expected outputs of the cell in one mode (plain numpy, fred.sim.golden.cells)."""

    def __init__(self, kind, middle, dtype, lanes):
        self.kind, self.middle, self.dtype, self.lanes = kind, middle, dtype, lanes

    def stimulus(self, mode, n, rng):
        """Random input beats for every used input (sums get paired operand draws)."""
        n_in, _ = gc.port_counts(self.kind, self.middle)
        ins = [None] * n_in
        for r in gc.routes(self.kind, mode, self.middle):
            a, b = random_operands(self.dtype, n * self.lanes, rng)
            ins[r.inputs[0]] = a.reshape(n, self.lanes)
            if r.is_sum:
                ins[r.inputs[1]] = b.reshape(n, self.lanes)
        return ins

    def expected(self, mode, ins):
        return gc.expected_outputs(self.kind, mode, ins, self.dtype, self.middle, lanes=self.lanes)


class CellChecker:
    """Bit-exact comparison of received and expected beats, with a readable first mismatch."""

    def __init__(self, dtype):
        self.dtype = dtype
        self.checked = 0

    def compare(self, what, j, got, exp, ins, routes):
        if got.shape == exp.shape and np.array_equal(got, exp):
            self.checked += len(got)
            return
        if got.shape[0] != exp.shape[0]:
            raise AssertionError(f"{what}: output {j} delivered {got.shape[0]} beats, "
                                 f"expected {exp.shape[0]}")
        bad = np.argwhere(got != exp)
        lines = []
        route = next(r for r in routes if j in r.outputs)
        for beat, lane in bad[:5]:
            ops = ", ".join(f"in{i}={int(ins[i][beat, lane]):#x}" for i in route.inputs)
            lines.append(f"beat {beat} lane {lane}: {ops} got {int(got[beat, lane]):#x} "
                         f"expected {int(exp[beat, lane]):#x}")
        raise AssertionError(f"{what}: output {j}: {len(bad)} lane mismatches ({self.dtype}); "
                             + "; ".join(lines))


@dataclass
class PhaseResult:
    mode: str
    idle: float
    stall: float
    beats: int
    cycles: int
    latency: int | None = None
    throughput: dict = field(default_factory=dict)


class CellTestbench:
    """Drive, monitor, model and check every requested mode of one cell (see module doc)."""

    def __init__(self, dut, cfg, seed):
        self.dut, self.cfg = dut, cfg
        self.kind, self.middle = cfg["kind"], cfg["middle"]
        self.lanes, self.dtype = cfg["lanes"], cfg["dtype"]
        self.width = cfg["width"]
        self.latency = cfg["latency"]
        self.modes = [mode_from_json(self.kind, x) for x in cfg["modes"]]
        self.codes = cfg["codes"]
        self.beats = int(cfg["beats"])
        self.pauses = [tuple(p) for p in cfg.get("pauses", DEFAULT_PAUSES)]
        self.rng = random.Random(seed)
        self.nprng = np.random.default_rng(seed)
        self.n_in, self.n_out = gc.port_counts(self.kind, self.middle)
        self.model = CellModel(self.kind, self.middle, self.dtype, self.lanes)
        self.checker = CellChecker(self.dtype)
        self.results: list[PhaseResult] = []

    def budget_cycles(self):
        per_mode = 0
        for idle, stall, share in self.pauses:
            n = max(1, int(self.beats * share))
            per_mode += int(n / ((1 - idle) * (1 - stall)) * 3) + 200
        return len(self.modes) * per_mode + 1000

    async def run(self):
        dut = self.dut
        dut.cfg.value = 0
        self.cycles = await start(dut)
        cocotb.start_soon(watchdog(dut.clk, self.budget_cycles(), f"{self.kind} cell bench"))
        self.drv = CellDriver(dut, self.n_in, self.width, self.cycles, self.rng)
        self.mon = CellMonitor(dut, self.n_out, self.width, self.lanes, self.cycles, self.rng)
        for mode, code in zip(self.modes, self.codes):
            await self._drained()
            dut.cfg.value = code
            await ClockCycles(dut.clk, 2)
            for idle, stall, share in self.pauses:
                await self._phase(mode, idle, stall, max(1, int(round(self.beats * share))))
        return self.results

    async def _drained(self):
        while not self.drv.idle():
            await RisingEdge(self.dut.clk)
        await ClockCycles(self.dut.clk, self.latency + 3)

    async def _phase(self, mode, idle, stall, n):
        name = gc.mode_name(self.kind, mode)
        what = f"{self.kind} m={self.middle} {self.dtype} x{self.lanes} mode {name} " \
               f"(idle {idle}, stall {stall})"
        routes = gc.routes(self.kind, mode, self.middle)
        used_in = gc.used_inputs(self.kind, mode, self.middle)
        unused_in = [k for k in range(self.n_in) if k not in used_in]
        self.drv.set_idle(idle)
        self.mon.set_stall(stall)
        if not routes:
            n = 0  # a mode with nothing connected: only check that nothing moves
        ins = self.model.stimulus(mode, n, self.nprng)
        exp = self.model.expected(mode, ins)
        want = [len(e) for e in exp]
        in_mark, out_mark = self.drv.mark(), self.mon.mark()
        t0 = self.cycles.now
        for k in used_in:
            self.drv.send(k, ins[k])
        while True:
            await ClockCycles(self.dut.clk, 16)
            await ReadOnly()
            for k in unused_in:
                assert not int(getattr(self.dut, f"i__{k}__ready").value), \
                    f"{what}: unused input {k} is ready"
            got = [len(mo.beats) - s for mo, s in zip(self.mon.monitors, out_mark)]
            if all(g >= w for g, w in zip(got, want)):
                break
        # nothing extra may follow
        await ClockCycles(self.dut.clk, self.latency + 4)
        got = [len(mo.beats) - s for mo, s in zip(self.mon.monitors, out_mark)]
        assert got == want, f"{what}: output beat counts {got}, expected {want} (extra beats)"
        for j in range(self.n_out):
            self.checker.compare(what, j, self.mon.as_array(j, out_mark[j]), exp[j], ins, routes)
        coverage.sample_cell_phase(self.kind, self.dtype, routes, ins, idle, stall)
        res = PhaseResult(name, idle, stall, n, self.cycles.now - t0)
        if idle == 0 and stall == 0 and used_in:
            first_in = min(self.drv.drivers[k].sent[in_mark[k]][0] for k in used_in)
            outs = [j for j in range(self.n_out) if want[j]]
            first_out = min(self.mon.monitors[j].beats[out_mark[j]][0] for j in outs)
            res.latency = first_out - first_in
            for k in used_in:
                s = self.drv.drivers[k].sent[in_mark[k]:]
                res.throughput[f"i{k}"] = len(s) / (s[-1][0] - s[0][0] + 1)
            for j in outs:
                b = self.mon.monitors[j].beats[out_mark[j]:]
                res.throughput[f"o{j}"] = len(b) / (b[-1][0] - b[0][0] + 1)
            assert res.latency == self.latency, \
                f"{what}: latency {res.latency} cycles, the cell promises {self.latency}"
            low = {p: t for p, t in res.throughput.items() if t != 1.0}
            assert not low, f"{what}: throughput below 1 beat/cycle at zero back-pressure: {low}"
        self.results.append(res)
        cocotb.log.info(f"{what}: {n} beats ok in {res.cycles} cycles"
                        + (f", latency {res.latency}, beats/cycle "
                           f"{min(res.throughput.values()):.2f}" if res.latency is not None
                           else ""))


@cocotb.test()
async def cell_regression(dut):
    """Every configured mode of the cell, every back-pressure setting, bit-exact."""
    cfg = bench_config()
    seed = bench_seed()   # FRED_SEED, set by run_bench (cocotb.RANDOM_SEED is derived from it)
    cocotb.log.info(f"cell bench seed {seed} (rerun with FRED_SEED={seed})")
    tb = CellTestbench(dut, cfg, seed)
    try:
        await tb.run()
        coverage.export(f"cell-{tb.kind}")
    finally:
        out = {"seed": seed, "checked": tb.checker.checked,
               "phases": [r.__dict__ for r in tb.results]}
        Path(RESULTS_FILE).write_text(json.dumps(out, indent=1))


# ---- runner side ---------------------------------------------------------------------------

@dataclass
class CellReport:
    """Figures of one cell regression: per mode, beats checked, latency and beats/cycle."""

    kind: str
    middle: int
    lanes: int
    dtype: str
    latency: int
    seed: int
    checked: int
    phases: list
    seconds: float = 0.0
    run_dir: str = ""

    def per_mode(self):
        """mode name -> dict(beats, latency, throughput (min over ports, zero back-pressure))."""
        out = {}
        for p in self.phases:
            d = out.setdefault(p["mode"], {"beats": 0, "latency": "-", "throughput": "-"})
            d["beats"] += p["beats"]
            if p["latency"] is not None:
                d["latency"] = p["latency"]
                d["throughput"] = min(p["throughput"].values())
        return out

    def table(self) -> str:
        head = (f"{self.kind} cell m={self.middle} lanes={self.lanes} {self.dtype}: latency "
                f"{self.latency} cycles, seed {self.seed}, {self.checked} output beats checked "
                f"bit-exact in {self.seconds:.1f} s")
        rows = [f"  {'mode':<12} {'beats':>7} {'latency':>8} {'beats/cycle':>12}"]
        for name, d in self.per_mode().items():
            tp = d["throughput"]
            tp = f"{tp:.2f}" if isinstance(tp, float) else tp
            rows.append(f"  {name:<12} {d['beats']:>7} {d['latency']:>8} {tp:>12}")
        return "\n".join([head] + rows)


def regression_config(cell, modes, beats, pauses=DEFAULT_PAUSES) -> dict:
    kind = cell.kind
    # the runner passes the modes to the bench as JSON (fred.hdl.netlist.modes.mode_to_json)
    modes = [RDMode.parse(md) if kind == "rd" else md for md in modes]
    codes = [cell.encode(md) if kind == "rd" else cell.encode(md, cell.middle) for md in modes]
    return {"kind": kind, "middle": cell.middle, "lanes": cell.lanes, "dtype": cell.dtype.name,
            "width": cell.width, "latency": cell.latency, "beats": int(beats),
            "modes": [mode_to_json(md) for md in modes], "codes": codes,
            "pauses": [list(p) for p in pauses]}


def run_cell_regression(kind, *, middle=3, lanes=4, dtype="fp16", beats=10_000, seed=None,
                        modes=None, pauses=DEFAULT_PAUSES, fault=None, waves=None,
                        tag=None) -> CellReport:
    """Build one cell under Verilator and run its regression; return the figures.

    ``beats`` per mode (split over ``pauses`` by their shares). ``modes`` defaults to
    :func:`representative_modes`. Raises ``AssertionError`` naming the log on any failure.
    """
    from fred.sim.toolchain import run_bench

    if not isinstance(beats, int) or beats < 1:
        raise ValueError(f"beats must be >= 1, got {beats}")
    cell = build_cell(kind, middle=middle, lanes=lanes, dtype=dtype, fault=fault)
    if modes is None:
        modes = representative_modes(kind, cell.middle)
    cfg = regression_config(cell, modes, beats, pauses)
    name = cell.verilog_name
    t0 = time.perf_counter()
    results = run_bench(verilog=emit(cell, name), toplevel=name,
                        test_module="fred.sim.benches.cells",
                        tag=tag or f"cell-{kind}" + (f"-{fault}" if fault else ""),
                        config=cfg, seed=seed, waves=waves)
    data = json.loads((Path(results).parent / RESULTS_FILE).read_text())
    return CellReport(kind, cell.middle, cell.lanes, cell.dtype.name, cell.latency, data["seed"],
                      data["checked"], data["phases"], time.perf_counter() - t0,
                      str(Path(results).parent))


def main():
    """``make bench``: latency and beats/cycle of each cell (fp16, 4 lanes, middle = 3)."""
    beats = int(os.environ.get("FRED_CELL_BEATS", "2000"))
    for kind in ("rd", "r", "d"):
        rep = run_cell_regression(kind, middle=3, lanes=4, dtype="fp16", beats=beats,
                                  seed=int(os.environ.get("FRED_SEED", "1"), 0))
        print(rep.table(), flush=True)


if __name__ == "__main__":
    sys.exit(main())
