"""cocotb driver of the cycle-stepped fabric bench (:class:`fred.sim.compiled.fabric.FabricWorld`),
run through ``run_bench`` (:func:`fred.sim.characterize.fabric.run_fabric` with ``backend="cocotb"``).

Bench configuration (``FRED_BENCH_CONFIG``, see :func:`fred.sim.toolchain.bench_config`): the
world's (:mod:`fred.sim.compiled.fabric`: ports, middle, lanes, dtype, phases, labels,
config_phases, config_words, beats, idle, stall, specials, max_cycles) and ``result_path``: the
world's result (per-phase latency, rates, cycles) is written there as JSON.

The seed is ``FRED_SEED`` (set by run_bench; cocotb's ``RANDOM_SEED`` otherwise). The same reset
as the compiled driver (:data:`fred.sim.compiled.fabric.FABRIC_RESET`); then, every cycle, the
world's inputs written after the falling edge and the outputs read in ``ReadOnly``: the same
cycles as :func:`fred.sim.compiled.fabric.run_compiled_fabric`, so the same seed gives the same
result on both simulators. Functional coverage (``fred.fabric.kind_ports_middle``) is sampled
per passed phase and exported when the bench passes.
"""

from __future__ import annotations

import json

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, ReadOnly

from fred.sim.compiled import FABRIC_RESET, FabricWorld
from fred.sim.toolchain import bench_config, bench_seed

from . import cover as coverage


@cocotb.test()
async def fabric_phases(dut):
    cfg = bench_config()
    seed = bench_seed(int(cocotb.RANDOM_SEED))  # FRED_SEED (set by run_bench) wins
    w = FabricWorld(cfg, seed, log=dut._log.info)
    P = w.P
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())     # as sim/benches/streams.py
    dut.rst.value = 1
    g = lambda name: getattr(dut, name)
    iv, ip = [g(f"i__{p}__valid") for p in range(P)], [g(f"i__{p}__payload") for p in range(P)]
    ir = [g(f"i__{p}__ready") for p in range(P)]
    ov, op = [g(f"o__{p}__valid") for p in range(P)], [g(f"o__{p}__payload") for p in range(P)]
    ordy = [g(f"o__{p}__ready") for p in range(P)]
    await FallingEdge(dut.clk)
    dut.cfg.value = 0
    for h in iv + ip + ordy:
        h.value = 0
    for rst in FABRIC_RESET:
        dut.rst.value = rst
        await FallingEdge(dut.clk)
    word_now = None
    while not w.finished:
        word, valid, words, ready = w.drive()
        if word != word_now:
            dut.cfg.value = word
            word_now = word
        for p in range(P):
            iv[p].value = valid[p]
            if words[p] is not None:
                ip[p].value = words[p]
            ordy[p].value = ready[p]
        await ReadOnly()
        w.observe([int(h.value) for h in ir], [int(h.value) for h in ov], lambda q: int(op[q].value))
        await FallingEdge(dut.clk)
    for flows in w.checked:
        coverage.sample_fabric_phase(flows, P, w.middle)
    if cfg.get("result_path"):
        with open(cfg["result_path"], "w") as fh:
            json.dump(w.result, fh, indent=1)
    coverage.export("fabric")
