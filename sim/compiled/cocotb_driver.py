"""cocotb driver of the cycle-stepped switch benches (:mod:`fred.sim.compiled.world`).

Configuration (``bench_config()``): the world's ``cfg`` (:func:`fred.sim.characterize.switch.run_lockstep`),
its ``seed``, and ``out`` (the result is written there as JSON, with ``_speed``: the cycles
and seconds of the loop after the reset). The same reset and configuration sequence as
the compiled driver (:func:`fred.sim.compiled.world.reset_sequence`); then, every cycle, the
world's inputs written after the falling edge and the outputs read in ``ReadOnly``: the same
cycles as :func:`fred.sim.compiled.world.run_compiled`, so the same seed gives the same result.
"""

from __future__ import annotations

import json
import time

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, ReadOnly

from fred.sim.compiled.scenarios import make_world
from fred.sim.compiled.world import STATUS, reset_sequence
from fred.sim.toolchain import bench_config


@cocotb.test()
async def switch_lockstep(dut):
    """Run ``cfg["scenario"]`` and write its result to ``cfg["out"]``."""
    cfg = bench_config()
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())     # as sim/benches/streams.py
    dut.rst.value = 1
    w = make_world(cfg, cfg["seed"])
    P = w.P
    g = lambda name: getattr(dut, name)
    iv, ip = [g(f"i__{p}__valid") for p in range(P)], [g(f"i__{p}__payload") for p in range(P)]
    ir = [g(f"i__{p}__ready") for p in range(P)]
    ov, op = [g(f"o__{p}__valid") for p in range(P)], [g(f"o__{p}__payload") for p in range(P)]
    ordy = [g(f"o__{p}__ready") for p in range(P)]
    co, ci = [g(f"credit_o__{p}") for p in range(P)], [g(f"credit_i__{p}") for p in range(P)]
    st = {k: g(k) for k in STATUS}
    await FallingEdge(dut.clk)
    for h in iv + ordy + ci:
        h.value = 0
    for rst, word in reset_sequence(cfg["cfg_words"]):
        dut.rst.value = rst
        dut.cfg__valid.value = int(word is not None)
        if word is not None:
            dut.cfg__payload.value = word
        await FallingEdge(dut.clk)
    limit = cfg.get("max_cycles", 200_000)
    t0 = time.perf_counter()
    while not w.finished:
        valid, words, ready, credit = w.drive()
        for p in range(P):
            iv[p].value = valid[p]
            if words[p] is not None:
                ip[p].value = words[p]
            ordy[p].value = ready[p]
            ci[p].value = credit[p]
        await ReadOnly()
        w.observe([int(h.value) for h in ir], [int(h.value) for h in ov],
                  lambda q: int(op[q].value), [int(h.value) for h in co],
                  {k: int(h.value) for k, h in st.items()})
        if w.now > limit:
            w.fail(f"watchdog: {cfg.get('scenario')} still running after {limit} cycles (hang?)")
        await FallingEdge(dut.clk)
    speed = {"cycles": w.now, "seconds": time.perf_counter() - t0}
    with open(cfg["out"], "w") as f:
        json.dump(dict(w.result, _speed=speed), f)
