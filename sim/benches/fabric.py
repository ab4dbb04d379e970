"""cocotb bench for the FRED_m(P) fabric (hdl/fabric/recursive.py), run through ``run_bench``.

Bench configuration (``FRED_BENCH_CONFIG``, see :func:`fred.sim.toolchain.bench_config`)::

    ports, middle, lanes, dtype     the fabric's parameters (must match the Verilog)
    phases        list of phases; a phase is a list of flow strings ("0,1>0,1"), routed here
                  with fred.hdl.routing.compiler.route; phases run one after another, the config is
                  applied while the fabric is drained (reconfiguration between phases)
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
    result_path   if set, a JSON file with per-phase measurements (see below) is written there
    max_cycles    watchdog budget for the whole test (default from the beat count)

Per phase the bench drives every input port of the phase's flows with random beats, monitors
every output port (all P of them) with random back-pressure, and checks

* bit-exact: each used output's beats equal :func:`fred.sim.golden.fabric.simulate_result`
  (same adds in the same cells in the same order as the hardware), which is itself checked
  against the compiler's reduction trees (``tree_reference``);
* order-independent: :func:`fred.sim.golden.fabric.check_sums` (int32 exact, floats within the
  rounding bound of the float64 sum, IEEE specials);
* nothing appears on an output that belongs to no flow, and no extra beats appear.

The seed is ``FRED_SEED`` (set by run_bench; cocotb's ``RANDOM_SEED`` otherwise); every random choice
(data, pauses, back-pressure) derives from it, so a failing case reruns with ``FRED_SEED=N``.

Measurements (``result_path``): ``{"latency_formula": L, "phases": [{"label", "flows", "kinds",
"latency": {"min", "max", "mean"}, "out_rate": {port: beats/cycle}, "in_rate": {port: ..},
"cycles": n}]}`` where a beat's latency is the cycle its output transfer happens minus the cycle
the last of its inputs was accepted, and a port's rate is beats / (last - first + 1) cycles.
"""

from __future__ import annotations

import json
import random

import cocotb
import numpy as np
from cocotb.triggers import FallingEdge, RisingEdge

from fred.hdl.dtypes import get_dtype
from fred.hdl.fabric import config_bits, fabric_latency
from fred.hdl.routing import route
from fred.sim.benches import cover as coverage
from fred.sim.golden import check_sums, random_inputs, simulate_result, tree_reference
from .streams import (PauseGenerator, StreamDriver, StreamMonitor, pack_lanes, start,
                              unpack_lanes, watchdog)
from fred.sim.toolchain import bench_config, bench_seed


def _stats(values):
    if not values:
        return {"min": None, "max": None, "mean": None}
    return {"min": int(min(values)), "max": int(max(values)), "mean": float(sum(values) / len(values))}


def _golden(cfg, k, flows, wrong, beats, nrng, label):
    """Route phase ``k``; its config word (of the ``wrong`` flows' routing if given), random
    inputs and the expected outputs (structural golden model, checked against the reduction
    trees)."""
    P, m, lanes, dtype = cfg["ports"], cfg["middle"], cfg["lanes"], cfg["dtype"]
    specials = cfg.get("specials", "mixed")
    res = route(P, m, flows)
    cres = res if wrong is None else route(P, m, wrong)
    word = config_bits(P, m, cres)
    given = (cfg.get("config_words") or [None] * (k + 1))[k]
    if given is not None:
        word = int(given, 16)
    if specials == "mixed":
        sp = k % 2 == 1
    else:
        sp = bool(specials)
    inputs = random_inputs(P, res.flows, beats, lanes, dtype, rng=nrng, specials=sp)
    expected = simulate_result(res, inputs, dtype)
    tref = tree_reference(res, inputs, dtype)
    assert set(tref) == set(expected), f"{label}: golden outputs {sorted(expected)} != tree {sorted(tref)}"
    for p in expected:
        assert np.array_equal(tref[p], expected[p]), f"{label}: structural golden model and reduction tree disagree on output {p}"
    return res, word, inputs, expected


async def _run_phase(dut, cycles, drivers, monitors, word, inputs, expected, beats, width,
                     latency):
    """Load ``word`` while drained, drive ``inputs``, wait for every expected beat and a drain
    margin. Returns ``(base_in, base_out, start_cycle, end_cycle)``."""
    await FallingEdge(dut.clk)
    dut.cfg.value = word
    await RisingEdge(dut.clk)
    await RisingEdge(dut.clk)
    base_in = [len(d.sent) for d in drivers]
    base_out = [len(mo.beats) for mo in monitors]
    start_cycle = cycles.now
    for p, x in inputs.items():
        drivers[p].send(pack_lanes(row, width) for row in x.tolist())
    while any(len(monitors[p].beats) - base_out[p] < beats for p in expected) or \
            any(not d.idle for d in drivers):
        await RisingEdge(dut.clk)
    # drain margin: anything still coming out would be an extra beat
    for _ in range(2 * latency + 8):
        await RisingEdge(dut.clk)
    return base_in, base_out, start_cycle, cycles.now


def _check_outputs(label, res, monitors, base_out, inputs, expected, cfg, beats, seed):
    """Bit-exact against the golden model, nothing on unused outputs, then the order-independent
    sums check."""
    P, lanes, dtype = cfg["ports"], cfg["lanes"], cfg["dtype"]
    width = get_dtype(dtype).width
    got = {}
    for p in range(P):
        new = monitors[p].beats[base_out[p]:]
        if p not in expected:
            assert not new, (f"{label}: output {p} belongs to no flow but received {len(new)} beats "
                             f"(first {new[0][1]:#x}; seed {seed})")
            continue
        assert len(new) == beats, f"{label}: output {p} received {len(new)} beats, expected {beats} (seed {seed})"
        got[p] = np.array([unpack_lanes(w, width, lanes) for _, w in new], dtype=np.uint64).astype(np.uint32)
    for p in sorted(expected):
        diff = np.argwhere(got[p] != expected[p])
        if diff.size:
            b, lane = (int(v) for v in diff[0])
            flow = res.flows[res.output_flow[p]]
            raise AssertionError(
                f"{label}: output {p} (flow '{flow}', tree {res.trees[res.output_flow[p]]}) beat {b} "
                f"lane {lane}: got {int(got[p][b, lane]):#x}, golden {int(expected[p][b, lane]):#x} "
                f"({int((diff.shape[0]))} mismatching elements; seed {seed}, rerun with FRED_SEED={seed})")
    check_sums(res.flows, inputs, got, dtype)


def _phase_figures(res, drivers, monitors, base_in, base_out):
    """Per-beat latencies and per-port rates of one phase (see the module docstring)."""
    lat = []
    out_rate, in_rate = {}, {}
    for i, f in enumerate(res.flows):
        ins = {p: drivers[p].sent[base_in[p]:] for p in f.inputs}
        for p in f.outputs:
            outs = monitors[p].beats[base_out[p]:]
            for b, (c_out, _) in enumerate(outs):
                lat.append(c_out - max(ins[q][b][0] for q in f.inputs))
            out_rate[p] = len(outs) / (outs[-1][0] - outs[0][0] + 1)
        for q in f.inputs:
            in_rate[q] = len(ins[q]) / (ins[q][-1][0] - ins[q][0][0] + 1)
    return lat, out_rate, in_rate


@cocotb.test()
async def fabric_phases(dut):
    cfg = bench_config()
    P, m, lanes, dtype = cfg["ports"], cfg["middle"], cfg["lanes"], cfg["dtype"]
    width = get_dtype(dtype).width
    phases = cfg["phases"]
    labels = cfg.get("labels") or [f"phase {k}" for k in range(len(phases))]
    wrong = cfg.get("config_phases") or [None] * len(phases)
    beats = int(cfg.get("beats", 64))
    idle, stall = float(cfg.get("idle", 0.0)), float(cfg.get("stall", 0.0))
    seed = bench_seed(int(cocotb.RANDOM_SEED))  # FRED_SEED (set by run_bench) wins
    rng = random.Random(seed)
    nrng = np.random.default_rng(seed)
    latency = fabric_latency(P, m, lanes, dtype)
    dut._log.info(f"FRED_{m}({P}) lanes={lanes} {dtype}: {len(phases)} phases x {beats} beats, "
                  f"idle={idle} stall={stall}, seed {seed} (rerun with FRED_SEED={seed}), "
                  f"latency {latency}")

    budget = cfg.get("max_cycles") or (len(phases) * (beats * (4 + int(8 / max(0.05, 1 - max(idle, stall))))
                                                      + 4 * latency + 100) + 1000)
    dut.cfg.value = 0
    for p in range(P):
        getattr(dut, f"i__{p}__valid").value = 0
    cycles = await start(dut)
    cocotb.start_soon(watchdog(dut.clk, int(budget), f"FRED_{m}({P}) bench (seed {seed})"))
    drivers = [StreamDriver(dut, f"i__{p}", dut.clk, cycles,
                            PauseGenerator(idle, random.Random(rng.random()))) for p in range(P)]
    monitors = [StreamMonitor(dut, f"o__{p}", dut.clk, cycles,
                              PauseGenerator(stall, random.Random(rng.random()))) for p in range(P)]

    results = []
    for k, flows in enumerate(phases):
        label = labels[k]
        res, word, inputs, expected = _golden(cfg, k, flows, wrong[k], beats, nrng, label)
        base_in, base_out, start_cycle, end_cycle = await _run_phase(
            dut, cycles, drivers, monitors, word, inputs, expected, beats, width, latency)
        _check_outputs(label, res, monitors, base_out, inputs, expected, cfg, beats, seed)
        coverage.sample_fabric_phase(res.flows, P, m)
        lat, out_rate, in_rate = _phase_figures(res, drivers, monitors, base_in, base_out)
        results.append({"label": label, "flows": [str(f) for f in res.flows],
                        "kinds": [f.kind for f in res.flows], "latency": _stats(lat),
                        "out_rate": out_rate, "in_rate": in_rate, "cycles": end_cycle - start_cycle})
        dut._log.info(f"{label}: {' '.join(str(f) for f in res.flows)}: ok, latency {_stats(lat)}, "
                      f"{end_cycle - start_cycle} cycles")

    if cfg.get("result_path"):
        with open(cfg["result_path"], "w") as fh:
            json.dump({"latency_formula": latency, "seed": seed, "phases": results}, fh, indent=1)
    coverage.export("fabric")
