"""cocotb bench of the output-reducing crossbar (:mod:`fred.hdl.crossbar`), plus its driver.

:func:`measure_crossbar` (plain Python) emits the crossbar, runs this module's cocotb test
through :func:`fred.sim.toolchain.run_bench` and returns the measured figures. The cocotb test
(:func:`crossbar_flows`) reads its ``cfg``:

* ``ports``, ``lanes``, ``dtype``, ``variant``: the crossbar's parameters;
* ``flows``: list of ``[input ports, output ports]``;
* ``beats``: beats sent on every input port of every flow;
* ``idle``, ``stall``: source idle / sink back-pressure probabilities (0 = line rate);
* ``out``: path of the JSON file the figures are written to;

Every output beat is compared bit-exactly with the golden reduction built from
:func:`fred.sim.golden.elem.add` in the crossbar's order (tree variant: the pairwise tree of
:func:`fred.hdl.crossbar.tree_order` with ``-0``/``0`` for absent inputs; serial variant: the
left fold in port order; plain paths: the input unchanged).

Figures per flow: ``beats_per_cycle`` (per output port: beats / (last - first + 1) cycles,
worst output), latency in cycles (output beat cycle minus the cycle the last of its input beats
was accepted: min / mean / max).
"""

from __future__ import annotations

import json
import random

import numpy as np

import cocotb
from cocotb.triggers import RisingEdge

from .streams import PauseGenerator, StreamDriver, StreamMonitor, pack_lanes, \
    start, unpack_lanes, watchdog
from fred.hdl.crossbar import Crossbar, crossbar_config, tree_order
from fred.hdl.dtypes import get_dtype
from fred.hdl.verilog import emit
from fred.sim.toolchain import bench_config, bench_seed

__all__ = ["golden_crossbar", "measure_crossbar", "default_flows", "main"]


# ---- golden model (pure Python) --------------------------------------------------------------

def golden_crossbar(dtype, ports, variant, ips, beats_by_port):
    """Expected output beats (lists of lane bit patterns) of a flow with inputs ``ips``.

    ``beats_by_port[k]`` is an ``(n, lanes)`` array of input k's beats.
    """
    from fred.sim.golden import add

    t = get_dtype(dtype)
    ips = sorted(ips)
    if len(ips) == 1:
        return np.asarray(beats_by_port[ips[0]], dtype=np.uint32)
    shape = np.asarray(beats_by_port[ips[0]]).shape
    if variant == "serial":
        acc = np.asarray(beats_by_port[ips[0]], dtype=np.uint32)
        for k in ips[1:]:
            acc = add(dtype, acc, beats_by_port[k])
        return acc
    ident = np.full(shape, t.sign_bit if t.is_float else 0, dtype=np.uint32)
    present = set(ips)

    def ev(node):
        if isinstance(node, int):
            return np.asarray(beats_by_port[node], dtype=np.uint32) if node in present else ident
        return add(dtype, ev(node[0]), ev(node[1]))

    return ev(tree_order(ports))


def default_flows(kind: str, ports: int):
    """Flow sets for one flow kind on ``ports`` ports: all-reduce (all ports), reduce
    (all -> 0), multicast (0 -> all), unicast (a shift permutation)."""
    allp = list(range(ports))
    if kind == "all-reduce":
        return [[allp, allp]]
    if kind == "reduce":
        return [[allp, [0]]]
    if kind == "multicast":
        return [[[0], allp]]
    if kind == "unicast":
        return [[[k], [(k + 1) % ports]] for k in allp]
    raise ValueError(f"unknown flow kind {kind!r}; known: all-reduce, reduce, multicast, unicast")


# ---- the cocotb test ---------------------------------------------------------------------------

@cocotb.test()
async def crossbar_flows(dut):
    cfg = bench_config()
    from fred.sim.golden import random_operands

    P, lanes, dtype, variant = cfg["ports"], cfg["lanes"], cfg["dtype"], cfg["variant"]
    flows = [(list(a), list(b)) for a, b in cfg["flows"]]
    n = int(cfg.get("beats", 64))
    w = get_dtype(dtype).width
    seed = bench_seed()
    rng = np.random.default_rng(seed)
    prng = random.Random(seed)
    dut.cfg.value = crossbar_config(P, flows)
    for k in range(P):
        getattr(dut, f"i__{k}__valid").value = 0
        getattr(dut, f"o__{k}__ready").value = 0
    cycles = await start(dut)
    data = {}
    for ips, _ in flows:
        for k in ips:
            a, b = random_operands(dtype, n * lanes, rng)
            vals = np.where(rng.integers(0, 2, n * lanes) == 1, a, b)
            data[k] = vals.reshape(n, lanes).astype(np.uint32)
    drivers = {k: StreamDriver(dut, f"i__{k}", dut.clk, cycles,
                               PauseGenerator(cfg.get("idle", 0.0), random.Random(prng.random())))
               for k in data}
    outs = sorted(j for _, ops in flows for j in ops)
    monitors = {j: StreamMonitor(dut, f"o__{j}", dut.clk, cycles,
                                 PauseGenerator(cfg.get("stall", 0.0), random.Random(prng.random())))
                for j in outs}
    # unused outputs: always ready, must stay silent
    budget = 2000 + n * (P + 2) * 8 * int(1 / (1 - max(cfg.get("idle", 0), cfg.get("stall", 0))) + 1)
    cocotb.start_soon(watchdog(dut.clk, budget, f"crossbar {variant} P={P}"))
    for k, drv in drivers.items():
        drv.send(pack_lanes(row, w) for row in data[k])
    # until every output has its beats, or the sources are done and nothing has come out for
    # a while (a lost beat is then reported as a count, not a watchdog timeout)
    quiet, seen = 0, -1
    while any(len(mon.beats) < n for mon in monitors.values()) and quiet < 8 * P + 40:
        await RisingEdge(dut.clk)
        now = sum(len(mon.beats) for mon in monitors.values())
        quiet = quiet + 1 if now == seen and all(d.idle for d in drivers.values()) else 0
        seen = now
    for _ in range(20):  # nothing extra may follow
        await RisingEdge(dut.clk)
    result = {"flows": []}
    errors = []
    for fi, (ips, ops) in enumerate(flows):
        exp = golden_crossbar(dtype, P, variant, ips, data)
        in_cycles = np.max([[c for c, _ in drivers[k].sent] for k in ips], axis=0)
        rates, lats = [], []
        for j in ops:
            beats = monitors[j].beats
            if len(beats) != n:
                errors.append(f"output {j}: {len(beats)} beats, expected {n}")
                continue
            for b, (_, p) in enumerate(beats):
                got = unpack_lanes(p, w, lanes)
                if [int(x) for x in got] != [int(x) for x in exp[b]]:
                    errors.append(f"flow {fi} output {j} beat {b}: got "
                                  f"{[hex(x) for x in got]} expected {[hex(int(x)) for x in exp[b]]}")
                    break
            oc = np.array([c for c, _ in beats])
            rates.append(n / (oc[-1] - oc[0] + 1))
            lats.extend((oc - in_cycles).tolist())
        result["flows"].append({
            "inputs": ips, "outputs": ops, "beats": n,
            "beats_per_cycle": float(min(rates)) if rates else 0.0,
            "latency_min": int(min(lats)) if lats else None,
            "latency_mean": float(np.mean(lats)) if lats else None,
            "latency_max": int(max(lats)) if lats else None,
        })
    result["cycles"] = cycles.now
    if cfg.get("out"):
        with open(cfg["out"], "w") as f:
            json.dump(result, f)
    assert not errors, "; ".join(errors[:4])


# ---- plain-Python driver -----------------------------------------------------------------------

def measure_crossbar(ports: int, variant: str, flows, *, lanes: int = 4, dtype: str = "fp16",
                     beats: int = 64, idle: float = 0.0, stall: float = 0.0, seed: int = 1,
                     fault=None) -> dict:
    """Build, simulate and check the crossbar carrying ``flows``; return the bench's figures.
    ``fault`` builds a broken crossbar (``fred.hdl.crossbar.FAULTS``: the bench must fail)."""
    import tempfile
    from pathlib import Path

    from fred.sim.toolchain import run_bench

    crossbar_config(ports, flows)  # validate before building anything
    top = f"xbar_{variant}_p{ports}"
    verilog = emit(Crossbar(ports, lanes, dtype, variant, fault=fault), top)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "figures.json"
        cfg = {"ports": ports, "lanes": lanes, "dtype": dtype, "variant": variant,
               "flows": [[list(a), list(b)] for a, b in flows], "beats": beats,
               "idle": idle, "stall": stall, "out": str(out)}
        run_bench(verilog=verilog, toplevel=top, test_module="fred.sim.benches.crossbar",
                  tag=f"{top}-l{lanes}-{dtype}{'-' + fault if fault else ''}", config=cfg, seed=seed)
        return json.loads(out.read_text())


def main():
    """``make bench``: crossbar throughput per flow kind, P = 4, both variants (lanes 1)."""
    for variant in ("tree", "serial"):
        for kind in ("all-reduce", "reduce", "multicast", "unicast"):
            r = measure_crossbar(4, variant, default_flows(kind, 4), lanes=1, beats=48)
            f = r["flows"]
            print(f"crossbar {variant:6s} P=4 {kind:10s}: "
                  f"{min(x['beats_per_cycle'] for x in f):.3f} beats/cycle/port, "
                  f"latency {min(x['latency_min'] for x in f)}..{max(x['latency_max'] for x in f)} cycles")
