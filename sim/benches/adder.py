"""cocotb bench for the emitted Verilog of one :class:`fred.hdl.adders.ElementAdder`.

Run it through :func:`fred.sim.toolchain.run_bench` with ``config``:

* ``dtype`` (required): fp16, bf16, fp32 or int32;
* ``latency`` (required): the adder's ``latency`` attribute;
* ``n``: number of random operand pairs (default 100000), drawn by
  :func:`fred.sim.golden.elem.random_operands` and preceded by every pair of
  :func:`~fred.sim.golden.elem.special_values`;
* ``en_p``: probability that ``en`` is high in a cycle (default 0.8; 1.0 = no stalls);

Each cycle, at the falling clock edge, the bench reads ``y`` and compares it bit-exactly with
:func:`fred.sim.golden.elem.add` of the pair presented ``latency`` advancing cycles earlier,
then drives the next ``a``, ``b``, ``en``. It fails on any mismatch (the first ones logged
with operands), and a simulated-time watchdog fails a hang. Seed: ``FRED_SEED``.
"""

from __future__ import annotations

import numpy as np

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge

from fred.hdl.adders import ElementAdder
from fred.sim.golden import elem as golden_elem
from fred.sim.toolchain import bench_config, bench_seed

_PERIOD_NS = 10


def operands(dtype, n, rng):
    """Every special-value pair, then ``n`` random pairs (``np.uint32`` arrays)."""
    sp = golden_elem.special_values(dtype)
    a, b = golden_elem.random_operands(dtype, n, rng)
    return (np.concatenate([np.repeat(sp, len(sp)), a]),
            np.concatenate([np.tile(sp, len(sp)), b]))


def _budget_ns(cfg):
    n = cfg.get("n", 100000) + 1000
    return int(n / max(cfg.get("en_p", 0.8), 0.05) * 4 + 1000) * _PERIOD_NS


@cocotb.test()
async def adder_matches_golden(dut):
    cfg = bench_config()
    dtype, lat = cfg["dtype"], int(cfg["latency"])
    rng = np.random.default_rng(bench_seed())
    A, B = operands(dtype, int(cfg.get("n", 100000)), rng)
    expect = golden_elem.add(dtype, A, B)
    total = len(A)
    en_seq = rng.random(total * 3 + 64) < float(cfg.get("en_p", 0.8))
    A_l, B_l, E_l = A.tolist(), B.tolist(), expect.tolist()

    cocotb.start_soon(Clock(dut.clk, _PERIOD_NS, unit="ns").start())
    watchdog = cocotb.start_soon(_watchdog(dut, _budget_ns(cfg)))
    dut.en.value = 0
    dut.a.value = 0
    dut.b.value = 0
    dut.rst.value = 1
    await FallingEdge(dut.clk)
    await FallingEdge(dut.clk)
    dut.rst.value = 0

    sig_a, sig_b, sig_en, sig_y = dut.a, dut.b, dut.en, dut.y
    fall = FallingEdge(dut.clk)
    bad = []
    last_bad = -1
    issued = 0       # pairs accepted (advancing cycles so far)
    cycles = 0
    en_prev = 0
    while issued < total + lat:
        # y after the rising edge that just passed
        if en_prev:
            issued += 1
        k = issued - lat
        if 0 <= k < total:
            y = int(sig_y.value)   # checked again on every cycle it is held
            if y != E_l[k] and k != last_bad:
                last_bad = k
                if len(bad) < 10:
                    bad.append(f"#{k}: {A_l[k]:#x} + {B_l[k]:#x} -> {y:#x}, "
                               f"golden {E_l[k]:#x}")
                else:
                    bad.append(None)
        en = int(en_seq[cycles % len(en_seq)])
        if issued < total:
            sig_a.value = A_l[issued]
            sig_b.value = B_l[issued]
        sig_en.value = en
        en_prev = en
        cycles += 1
        await fall
    watchdog.cancel()
    dut._log.info(f"{dtype}: {total} pairs checked in {cycles} cycles "
                  f"(latency {lat}, en_p {cfg.get('en_p', 0.8)}), {len(bad)} mismatches")
    shown = [m for m in bad if m]
    assert not bad, f"{len(bad)} mismatching results of {total}; first: " + "; ".join(shown)


async def _watchdog(dut, budget_ns):
    from cocotb.triggers import Timer

    await Timer(budget_ns, unit="ns")
    raise AssertionError(f"watchdog: bench did not finish within {budget_ns} ns of sim time")


# ---- measured figures (``make bench``; callable by characterization code) -----------------

def measure(dtype, n: int = 2000, seed: int = 1) -> dict:
    """Measure an :class:`~fred.hdl.adders.ElementAdder` in ``amaranth.sim``.

    Latency: cycles from presenting ``1 + 1`` once (``en`` high every cycle) until ``2`` is on
    ``y``. Throughput: results per cycle over ``n`` back-to-back pairs, each checked against
    :func:`fred.sim.golden.elem.add`. Returns ``dtype``, ``latency`` (measured), ``declared``
    (the ``latency`` attribute), ``throughput``, ``pairs`` and ``mismatches``.
    """
    from amaranth.sim import Simulator


    dut = ElementAdder(dtype)
    rng = np.random.default_rng(seed)
    A, B = golden_elem.random_operands(dtype, n, rng)
    want = golden_elem.add(dtype, A, B).tolist()
    A, B = A.tolist(), B.tolist()
    out = {"dtype": str(dtype), "declared": dut.latency, "pairs": n}
    one, two = (int(v) for v in golden_elem.from_values(dtype, [1, 2]))

    async def bench(ctx):
        # latency: present 1 + 1 once (zeros before and after), wait for 2 on y
        ctx.set(dut.en, 1)
        ctx.set(dut.a, one)
        ctx.set(dut.b, one)
        lat = None
        for cycle in range(1, 64):
            await ctx.tick()
            ctx.set(dut.a, 0)
            ctx.set(dut.b, 0)
            if ctx.get(dut.y) == two:
                lat = cycle
                break
        out["latency"] = lat
        for _ in range(2 * dut.latency):   # flush
            await ctx.tick()
        # throughput: n pairs back to back, count correct results per cycle
        got, bad, cycles = 0, 0, 0
        for i in range(n + dut.latency):
            if i < n:
                ctx.set(dut.a, A[i])
                ctx.set(dut.b, B[i])
            await ctx.tick()
            cycles += 1
            k = i + 1 - dut.latency
            if 0 <= k < n:
                got += 1
                bad += ctx.get(dut.y) != want[k]
        out["throughput"] = got / (cycles - dut.latency)
        out["mismatches"] = bad

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return out


def main():
    print(f"{'dtype':6} {'latency':>7} {'declared':>8} {'beats/cycle':>11} {'pairs':>6} "
          f"{'mismatches':>10}")
    for dtype in ("fp16", "bf16", "fp32", "int32"):
        r = measure(dtype)
        print(f"{r['dtype']:6} {r['latency']:>7} {r['declared']:>8} {r['throughput']:>11.2f} "
              f"{r['pairs']:>6} {r['mismatches']:>10}")
