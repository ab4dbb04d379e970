"""``make bench`` (``python -m fred.bench soak``): the cocotb bench against the compiled soak
harness on the same Verilog, measured in this run.

Design: the RD cell, 4 lanes of fp16 (the cell of issue 13's measurement). Three runs,
alternated ``ROUNDS`` times so a change of machine load hits each alike (the best of each is
reported):

* **cocotb**: :func:`fred.sim.benches.cells.run_cell_regression` (every RD mode, the three
  back-pressure settings); simulated cycles and seconds from cocotb's own results file (the
  test's simulated time / 10 ns, its real time: the simulation alone, not the build);
* **compiled**: :func:`fred.sim.soak.cells.cell_soak` with the same modes and settings and
  ``COMPILED_FACTOR`` times the beats: the harness's simulation loop (*harness*) and the whole
  soak after the build (*whole*: the golden model, files, harness and comparison);
* **raw**: the harness's raw mode (every input valid, every output ready, nothing recorded):
  the speed of the compiled Verilator model alone.

Then the same compiled-versus-raw figures for the fabric FRED_3(4), fp16 x 1, random flows.
Printed: cycles/s of each and the ratios compiled/cocotb and raw/compiled.
"""

from __future__ import annotations

import os
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np

from fred.hdl.fabric import config_bits
from fred.hdl.netlist import RDMode
from fred.hdl.routing import route

from . import builder as soak_build
from .cells import cell_design, cell_soak
from .fabric import fabric_design, fabric_soak
from .batch_io import StimPhase, write_stimulus

__all__ = ["cocotb_speed", "raw_rate", "main"]

ROUNDS = 2
COMPILED_FACTOR = 10
CLOCK_NS = 10  # sim/benches/streams.py: start() runs a 10 ns clock


def cocotb_speed(beats: int, seed: int) -> tuple:
    """``(cycles, seconds)`` of one cocotb RD-cell regression (fp16 x 4)."""
    from fred.sim.benches import run_cell_regression  # imports cocotb

    rep = run_cell_regression("rd", lanes=4, dtype="fp16", beats=beats, seed=seed)
    case = ET.parse(Path(rep.run_dir) / "results.xml").find(".//testcase")
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    return int(float(props["sim_time_duration"]) / CLOCK_NS), float(case.get("time"))


def raw_rate(design, cfg: int, cycles: int = 1_000_000) -> float:
    """Cycles/s of the raw mode of ``design`` with ``cfg``: every input valid, every output ready."""
    exe = soak_build.build(design)
    with tempfile.TemporaryDirectory(prefix="fred-soak-") as tmp:
        stim = Path(tmp) / "raw.bin"
        beat = np.full((1, design.lanes), 0x3C00, np.uint32)
        write_stimulus(stim, [StimPhase(cfg, 0.0, 0.0, [beat] * design.n_in, [1] * design.n_out,
                                        1, 100)], n_in=design.n_in, n_out=design.n_out,
                       width=design.width, words=design.payload_words, cfg_words=design.cfg_words)
        n, secs = soak_build.raw_speed(exe, stim, cycles)
    return n / secs


def _fmt(rate: float) -> str:
    return f"{rate:>12,.0f}"


def main():
    """Print the speed table (see the module docstring)."""
    beats = int(os.environ.get("FRED_SOAK_BENCH_BEATS", "1500"))
    seed = int(os.environ.get("FRED_SEED", "1"), 0)
    _, rd = cell_design("rd", lanes=4, dtype="fp16")
    best = {"cocotb": 0.0, "harness": 0.0, "whole": 0.0, "raw": 0.0}
    for r in range(ROUNDS):
        cyc, secs = cocotb_speed(beats, seed + r)
        best["cocotb"] = max(best["cocotb"], cyc / secs)
        rep = cell_soak("rd", lanes=4, dtype="fp16", beats=beats * COMPILED_FACTOR, seed=seed + r,
                        random_phase=False)
        best["harness"] = max(best["harness"], rep.stats.sim_rate)
        best["whole"] = max(best["whole"], rep.stats.wall_rate)
        best["raw"] = max(best["raw"], raw_rate(rd, RDMode.SUM_BOTH.value))
    print(f"RD cell, fp16 x 4, one Verilog text; best of {ROUNDS} alternated runs (cycles/s):")
    print(f"  cocotb bench            {_fmt(best['cocotb'])}")
    print(f"  compiled harness        {_fmt(best['harness'])}   (simulation loop)")
    print(f"  compiled soak, whole    {_fmt(best['whole'])}   (golden model + harness + compare)")
    print(f"  raw Verilator model     {_fmt(best['raw'])}")
    print(f"  compiled / cocotb:  harness {best['harness'] / best['cocotb']:.0f}x, whole soak "
          f"{best['whole'] / best['cocotb']:.0f}x")
    print(f"  raw / compiled:     harness {best['raw'] / best['harness']:.2f}x, whole soak "
          f"{best['raw'] / best['whole']:.2f}x (target: within 10x)")
    fab = fabric_design(4, 3, 1, "fp16")
    rep = fabric_soak(4, 3, 1, "fp16", beats=2000, batches=2, seed=seed)
    raw = raw_rate(fab, config_bits(4, 3, route(4, 3, ["0,1,2,3>0,1,2,3"])))
    print(rep.table())
    print(f"FRED_3(4) fp16 x 1: raw {raw:,.0f} cycles/s; raw / compiled: harness "
          f"{raw / rep.stats.sim_rate:.2f}x, whole soak {raw / rep.stats.wall_rate:.2f}x")
