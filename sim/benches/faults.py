"""cocotb fault bench of the FRED switch: Go-Back-N endpoints on faulty links (sim/faults/bench.py).

Configuration (``bench_config()``, built by :func:`fred.sim.characterize.faults.bench_cfg`): the
switch (``ports``, ``middle``, ``lanes``, ``dtype``, ``fabric``, ``flit_bits``, ``fseq_bits``,
``depths``, ``credit_bits``, ``max_len``, ``cfg_words`` of :func:`fault_phases`), the program
(``kinds``: phase kinds, ``packets`` per phase, ``seq_start``), the endpoints (``rx_credits``,
``window``, ``rto``, ``ack_delay``, ``nack_retry``, ``probe_wait``, ``credit_delay``,
``mutant``), the links (``stall``: probability an endpoint is not ready), and ``runs``: a list of
``{"rate", "faults", "seed"}``, each run after a reset of the switch. One clock-cycle loop drives
every link (no coroutine per port: about 3x faster). Writes a JSON list, one result per run, to
``out`` (also when a check fails: the failing run has ``"check": "FAILED: ..."``).
"""

from __future__ import annotations

import json
import random

import cocotb
from cocotb.triggers import FallingEdge, ReadOnly

from fred.sim.faults import COUNTERS, BenchFailure, World, run_result
from .streams import start
from fred.sim.toolchain import bench_config

class _Dut:
    """The switch's ports as lists of handles."""

    def __init__(self, dut, P):
        g = lambda name: getattr(dut, name)
        self.dut, self.clk = dut, dut.clk
        self.iv = [g(f"i__{p}__valid") for p in range(P)]
        self.ip = [g(f"i__{p}__payload") for p in range(P)]
        self.ov = [g(f"o__{p}__valid") for p in range(P)]
        self.op = [g(f"o__{p}__payload") for p in range(P)]
        self.ordy = [g(f"o__{p}__ready") for p in range(P)]
        self.co = [g(f"credit_o__{p}") for p in range(P)]
        self.ci = [g(f"credit_i__{p}") for p in range(P)]
        self.cnt = {k: g(k) for k in COUNTERS}

    def counters(self, names=COUNTERS):
        return {k: int(self.cnt[k].value) for k in names}

    def put(self, handles, k, value, last):
        """Write ``value`` to ``handles[k]`` unless it holds it already (writes are slow)."""
        if last[k] != value:
            handles[k].value = value
            last[k] = value


async def _reset(d, cfg):
    await FallingEdge(d.clk)
    d.dut.rst.value = 1
    for h in d.iv + d.ordy:
        h.value = 0
    for h in d.ci:
        h.value = 0
    d.dut.cfg__valid.value = 0
    for _ in range(3):
        await FallingEdge(d.clk)
    d.dut.rst.value = 0
    for w in cfg["cfg_words"]:
        await FallingEdge(d.clk)
        d.dut.cfg__valid.value = 1
        d.dut.cfg__payload.value = w
    await FallingEdge(d.clk)
    d.dut.cfg__valid.value = 0


async def _one_run(d, cfg) -> dict:
    await _reset(d, cfg)
    P, cb = cfg["ports"], cfg["credit_bits"]
    rng = random.Random(cfg["seed"])
    stall = random.Random(rng.random())
    w = World(cfg, rng, d.counters)
    mask = (1 << cb) - 1
    draining = False
    quiet = cfg["probe_idle"] + 8 * cfg["max_len"] + 64
    last = {k: [0] * P for k in ("iv", "ip", "ordy", "ci")}   # what the handles hold (after reset)
    while not (draining and w.drained(quiet)):
        await FallingEdge(d.clk)
        for p, word in enumerate(w.inputs()):
            d.put(d.iv, p, int(word is not None), last["iv"])
            if word is not None:
                d.put(d.ip, p, word, last["ip"])
        ready = [int(stall.random() >= cfg.get("stall", 0.0)) for _ in range(P)]
        for q in range(P):
            d.put(d.ordy, q, ready[q], last["ordy"])
        for q, c in enumerate(w.credit_words(cb)):
            d.put(d.ci, q, c, last["ci"])
        await ReadOnly()
        taken = [int(d.op[q].value) if ready[q] and int(d.ov[q].value) else None for q in range(P)]
        credits = []
        for p in range(P):
            c = int(d.co[p].value)
            credits.append([(c >> (v * cb)) & mask for v in range(4)] if c else [0] * 4)
        w.outputs_taken(taken)
        w.step(credits)
        if not draining and w.finished_at is not None:
            w.drain()
            draining = True
        if w.now > cfg.get("max_cycles", 200_000):
            w.fail(f"watchdog: not finished after {w.now} cycles ({w.progress()})")
    w.final_checks()
    return run_result(w, d.counters())


@cocotb.test()
async def faults_run(dut):
    """Every run of ``cfg["runs"]``; all checks (sim/faults/bench.py)."""
    cfg = bench_config()
    await start(dut)
    d = _Dut(dut, cfg["ports"])
    results = []
    try:
        for run in cfg["runs"]:
            results.append(await _one_run(d, dict(cfg, **run)))
            dut._log.info(f"fault run {run}: {results[-1]}")
    except BenchFailure as exc:
        results.append({"check": f"FAILED: {exc}"})
        raise
    except Exception as exc:                     # a bench bug: say so, never "pass"
        results.append({"check": f"FAILED: fault bench error {type(exc).__name__}: {exc}"})
        raise
    finally:
        with open(cfg["out"], "w") as f:
            json.dump(results, f)
