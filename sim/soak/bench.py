"""``make bench`` (``python -m fred.bench soak``): the cocotb bench against the compiled soak
harness on the same Verilog, measured in this run.

Design: the RD cell, 4 lanes of fp16 (the cell of issue 13's measurement). Three runs,
alternated ``ROUNDS`` times so a change of machine load hits each alike (the best of each is
reported):

* **cocotb**: :func:`fred.sim.benches.cells.run_cell_regression` (every RD mode, the three
  back-pressure settings); simulated cycles and seconds from cocotb's own results file (the
  test's simulated time / 10 ns, its real time: the simulation alone, not the build);
* **compiled**: :func:`fred.sim.soak.cells.cell_soak` (the :data:`fred.sim.soak.builder.SPEED_OPT`
  build, not the tests' quicker-to-build one) with the same modes and settings and
  ``COMPILED_FACTOR`` times the beats: the harness's simulation loop (*harness*) and the whole
  soak after the build (*whole*: the golden model, files, harness and comparison);
* **raw**: the harness's raw mode (every input valid, every output ready, nothing recorded):
  the speed of the compiled Verilator model alone.

Then the same compiled-versus-raw figures for the fabric FRED_3(4), fp16 x 1, random flows.
Printed: cycles/s of each and the ratios compiled/cocotb and raw/compiled.

Then the switch (:func:`switch_speed`, ``FRED_SOAK_BENCH_PORTS``: the port counts, default 4; 12
is the characterized switch), one Verilog text per port count:

* **cocotb**: the stress scenario of :mod:`fred.sim.compiled.world` under cocotb
  (sim/compiled/cocotb_driver.py; its loop's cycles and seconds);
* **compiled lockstep**: the same scenario, same seed, on the compiled switch
  (:data:`fred.sim.compiled.loader.LOCKSTEP_OPT` build, the one the characterization uses): the
  Python world between every two cycles;
* **compiled replay**: the replay soak (:func:`fred.sim.soak.switch.switch_soak`, the same phase
  table, idle and stall, :data:`fred.sim.compiled.loader.REPLAY_OPT` build): the harness's
  simulation loop and the whole soak (golden model, sealing, harness, checks);
* **raw**: that build's model alone, every input valid (a sealed header word), every output
  ready, nothing recorded.

The switch table goes to docs/cells.md between ``<!-- soak-switch:begin -->`` and
``<!-- soak-switch:end -->`` (when run from a checkout that has the file), so the documented
ratios are this code's output.
"""

from __future__ import annotations

import os
import pathlib
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np

from fred.contract import packet as pk
from fred.contract.link import LinkSender
from fred.contract.outputs import write_atomic
from fred.hdl.fabric import config_bits
from fred.hdl.netlist import RDMode
from fred.hdl.routing import route

from . import builder as soak_build
from .cells import cell_design, cell_soak
from .fabric import fabric_design, fabric_soak
from .batch_io import StimPhase, write_stimulus

__all__ = ["cocotb_speed", "raw_rate", "switch_speed", "switch_table", "main"]

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "cells.md"
BEGIN, END = "<!-- soak-switch:begin -->", "<!-- soak-switch:end -->"
#: replay soak batches and rounds per batch of the switch speed run
SWITCH_BATCHES, SWITCH_ROUNDS = 4, 24

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
    exe = soak_build.build(design, opt=soak_build.SPEED_OPT)
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
                        random_phase=False, opt=soak_build.SPEED_OPT)
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
    rep = fabric_soak(4, 3, 1, "fp16", beats=2000, batches=2, seed=seed, opt=soak_build.SPEED_OPT)
    raw = raw_rate(fab, config_bits(4, 3, route(4, 3, ["0,1,2,3>0,1,2,3"])))
    print(rep.table())
    print(f"FRED_3(4) fp16 x 1: raw {raw:,.0f} cycles/s; raw / compiled: harness "
          f"{raw / rep.stats.sim_rate:.2f}x, whole soak {raw / rep.stats.wall_rate:.2f}x")
    ports = [int(x) for x in os.environ.get("FRED_SOAK_BENCH_PORTS", "4").split(",")]
    rows = [switch_speed(P, seed) for P in ports]
    text = switch_table(rows)
    print(text)
    _write_doc(text)


def _switch_build(P):
    from fred.sim.characterize import switch as cs
    from fred.sim.characterize import switch_for

    if P >= 8:
        lanes, dtype, max_len, depth, shared = switch_for(P)
        return cs._build(P, 3, lanes, dtype, "fred", depth=depth, ctrl_depth=2, max_len=max_len,
                         shared=shared)
    return cs._build(P, 3, 2, "int32", "fred", depth=cs.data_depth_for(4))


def switch_speed(P: int, seed: int) -> dict:
    """Cycles/s of the four runs of the module docstring on the ``P``-port switch."""
    from fred.sim.golden import phases_from_json
    from fred.sim.characterize import switch as cs
    from .switch import switch_soak
    from fred.sim.compiled import REPLAY_OPT, load

    verilog, sw = _switch_build(P)
    tag = f"switch-p{P}-{sw.dtype.name}-{sw.fabric_kind}"
    cfg = cs.stress_config(sw, 12)
    sp_c, sp_l = [], []
    res_c = cs.run_lockstep(verilog, sw, tag, [cfg], seed, "cocotb", sp_c)
    res_l = cs.run_lockstep(verilog, sw, tag, [cfg], seed, "compiled", sp_l)
    if res_c != res_l:
        raise AssertionError(f"{P}-port switch: the stress run differs between cocotb and the "
                             f"compiled switch ({res_c} vs {res_l})")
    m = load(verilog, sw, tag, opt=REPLAY_OPT)
    rep = switch_soak(m, sw, phases_from_json(cfg["phases"]), batches=SWITCH_BATCHES,
                      rounds=SWITCH_ROUNDS, seed=seed, traffic=("table",), idle=cfg["idle"],
                      stall=cfg["stall"], credit_delay=cfg["credit_delay"], bad_rate=0.0)
    m.inv[:] = 0
    hdr = pk.pack(pk.Packet(pk.Header.data(pk.VC_DP, 0, 0, sw.max_len), (0,) * sw.max_len),
                  sw.flit_bits)[0]
    word = LinkSender(pk.WireFormat(sw.flit_bits, sw.fseq_bits)).seal_packet([hdr])[0]
    for p in range(P):
        m.set(f"i__{p}__valid", 1)
        m.set(f"i__{p}__payload", word)
        m.set(f"o__{p}__ready", 1)
    n = 20_000 if P < 8 else 4_000
    raw = n / m.raw(n)
    m.close()
    return {"ports": P, "flit": f"{sw.lanes} x {sw.dtype.name}", "cocotb": sp_c[0][0] / sp_c[0][1],
            "lockstep": sp_l[0][0] / sp_l[0][1], "harness": rep.sim_rate, "whole": rep.wall_rate,
            "raw": raw, "cycles": rep.cycles, "packets": rep.packets, "stress_cycles": sp_c[0][0]}


def switch_table(rows) -> str:
    """The markdown table of :func:`switch_speed` rows."""
    out = [f"Switch ({time.strftime('%Y-%m-%d')}, `python -m fred.bench soak`; cycles/s, one Verilog "
           f"text per row; stress scenario for cocotb and lockstep, {SWITCH_BATCHES} x "
           f"{SWITCH_ROUNDS} rounds of replay soak):", "",
           "| switch | cocotb | compiled lockstep | compiled replay, harness | replay, whole soak "
           "| raw Verilator | lockstep / cocotb | harness / cocotb | raw / harness |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        out.append(f"| {r['ports']} ports, {r['flit']} | {r['cocotb']:,.0f} | {r['lockstep']:,.0f} | "
                   f"{r['harness']:,.0f} | {r['whole']:,.0f} | {r['raw']:,.0f} | "
                   f"{r['lockstep'] / r['cocotb']:.1f}x | {r['harness'] / r['cocotb']:.0f}x | "
                   f"{r['raw'] / r['harness']:.2f}x |")
    return "\n".join(out)


def _write_doc(text: str):
    if not DOC.exists():
        return
    doc = DOC.read_text()
    if BEGIN not in doc or END not in doc:
        return
    head, rest = doc.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    write_atomic(DOC, f"{head}{BEGIN}\n{text}\n{END}{tail}")
    print(f"  (written to {DOC.name})")
