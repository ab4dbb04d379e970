"""Run the FRED_m(P) fabric bench under Verilator, and measure latency and throughput.

* :func:`fabric_verilog` -- the fabric's Verilog text, cached on disk (emitting a fabric takes
  seconds to a minute; the cache key covers the parameters and the source of every HDL module
  the fabric is built from, so any RTL change regenerates it);
* :func:`run_fabric` -- run the fabric bench (:mod:`fred.sim.compiled.fabric`) on a list of
  phases (flow lists) and return its measurements, on ``backend="compiled"`` (the Verilog in
  the compiled lockstep harness, :func:`fred.sim.compiled.load_top`, built at
  :data:`fred.sim.compiled.LOCKSTEP_OPT`) or ``"cocotb"`` (sim/benches/fabric.py: the same
  bench, so the same seed gives the same measurements; functional coverage, waves and the
  hierarchical ``verilator_blocks`` build are the cocotb backend's);
* :func:`measure_fabric` -- the characterization numbers (schema below), on the compiled
  backend by default.

``measure_fabric(ports, middle, lanes, dtype, seed=...)`` returns::

    {
      "ports": P, "middle": m, "lanes": L, "dtype": "fp16", "seed": N,
      "stages": S,                         # cells on every path, stages(P) = 2 depth(P) + 1
      "cell_latency": c,                   # cycles per cell (R = D = RD = demux = mux)
      "latency_formula": S * c,            # cycles, from the stage count
      "flows": {kind: [flow strings]},     # the flow set measured per kind (all P ports)
      "latency": {kind: cycles},           # measured at zero back-pressure (min == max)
      "latency_range": {kind: [min, max]}, # over every beat, zero back-pressure
      "latency_matches_formula": bool,     # every beat of every kind took exactly S * c cycles
      "throughput": {kind: {"per_port_min": x, "per_port_mean": x,
                            "inputs_min": x, "outputs_min": x}},  # beats/cycle/port, zero
                                                                  # back-pressure, no idling
      "load_sweep": {"stall": p, "points": [{"kind": k, "offered_load": l, "latency_mean": x,
                     "latency_max": n, "delivered_per_port": x}]},  # random back-pressure
      "beats": n,                          # beats per port per measurement
    }

kinds: ``unicast`` (a random permutation of all P ports, P concurrent flows), ``reduce`` (all P
inputs -> one output), ``multicast`` (one input -> all P outputs), ``all-reduce`` (all P -> all P).
A port's throughput is beats / (last beat's cycle - first beat's cycle + 1).
"""

from __future__ import annotations

import hashlib
import json
import random
import tempfile
from pathlib import Path

from fred.contract.outputs import write_atomic
from fred.hdl.fabric import cell_latencies, check_fabric_params, fabric_verilog_text
from fred.hdl.routing import route
from fred.hdl.netlist import stages

__all__ = ["fabric_verilog", "run_fabric", "measure_fabric", "kind_flows", "KINDS", "TOP", "BACKENDS"]

KINDS = ("unicast", "reduce", "multicast", "all-reduce")
#: the simulators :func:`run_fabric` runs the bench on
BACKENDS = ("compiled", "cocotb")
TOP = "fred_fabric"
#: module-name prefixes of the cells in the hierarchical form: the Verilator hierarchical blocks
#: of a ``verilator_blocks`` build (each cell kind verilated once)
CELL_MODULE_PREFIXES = ("fred_r_m", "fred_d_m", "fred_rd_", "fred_mux_", "fred_demux_")

_SOURCES = ("fabric/recursive.py", "cells/microswitches.py", "adders.py", "dtypes.py", "netlist/modes.py",
            "netlist/structure.py", "verilog.py", "fabric/hier.py", "cells/muxes.py", "params.py")


def _source_digest() -> str:
    import amaranth

    h = hashlib.sha256(amaranth.__version__.encode())
    hdl = Path(__file__).resolve().parents[2] / "hdl"
    for name in _SOURCES:
        p = hdl / name
        h.update(name.encode())
        h.update(p.read_bytes() if p.exists() else b"-")
    return h.hexdigest()[:16]


def fabric_verilog(ports, middle, lanes, dtype, fault=None, name=TOP, shared=True, form=None) -> str:
    """Verilog text of ``Fabric(ports, middle, lanes, dtype, fault=fault)`` (disk-cached), by
    :func:`fred.hdl.fabric.recursive.fabric_verilog_text` in ``form`` (flat, shared, hier; default
    shared, or flat with ``shared=False``)."""
    from fred.sim.toolchain import build_root

    form = form or ("shared" if shared else "flat")
    check_fabric_params(ports, middle, lanes, dtype, form)
    key = f"p{ports}-m{middle}-l{lanes}-{dtype}-{fault or 'ok'}-{name}-{form}-{_source_digest()}"
    cache = build_root() / "fabric-verilog" / f"{key}.v"
    if cache.exists():
        return cache.read_text()
    text = fabric_verilog_text(ports, middle, lanes, dtype, name, fault=fault, form=form)
    write_atomic(cache, text)  # parallel workers may write it at once: each renames a whole file
    return text


def run_fabric(ports, middle, lanes, dtype, phases, *, seed=None, beats=64, idle=0.0, stall=0.0,
               specials="mixed", labels=None, config_phases=None, config_words=None, fault=None, max_cycles=None,
               tag=None, shared=True, form=None, verilator_blocks=False, backend="cocotb") -> dict:
    """Run the fabric bench on ``phases`` (each a list of flow strings); return its measurements
    (:attr:`fred.sim.compiled.fabric.FabricWorld.result`). Raises AssertionError when the bench
    fails. ``backend``: ``"compiled"`` or ``"cocotb"`` (module docstring). ``form``: the Verilog
    form (:func:`fabric_verilog`). ``verilator_blocks`` (the hierarchical form, cocotb only):
    build with every cell kind a Verilator hierarchical block
    (:func:`fred.sim.toolchain.verilator_hier_blocks`), how a chiplet at its real width fits in
    memory; the same Verilog otherwise."""
    from fred.sim.toolchain import HIER_ARGS, bench_seed, run_bench, verilator_hier_blocks

    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; known: {', '.join(BACKENDS)}")
    form = form or ("shared" if shared else "flat")
    if verilator_blocks and form != "hier":
        raise ValueError(f"verilator_blocks needs the hierarchical form, not {form!r}")
    if verilator_blocks and backend != "cocotb":
        raise ValueError("verilator_blocks builds for the cocotb backend only")
    text = fabric_verilog(ports, middle, lanes, dtype, fault, form=form)
    tag = tag or (f"fabric-p{ports}-m{middle}-l{lanes}-{dtype}{'-' + fault if fault else ''}"
                  f"{'' if form == 'shared' else '-' + form}{'-blocks' if verilator_blocks else ''}")
    phases = [[str(f) for f in ph] for ph in phases]
    config = {"ports": ports, "middle": middle, "lanes": lanes, "dtype": dtype, "phases": phases,
              "beats": beats, "idle": idle, "stall": stall, "specials": specials}
    if labels:
        config["labels"] = list(labels)
    if config_phases:
        config["config_phases"] = [None if c is None else [str(f) for f in c] for c in config_phases]
    if config_words:
        config["config_words"] = [None if w is None else str(w) for w in config_words]
    if max_cycles:
        config["max_cycles"] = int(max_cycles)
    if backend == "compiled":
        from fred.sim.compiled import LOCKSTEP_OPT, load_top, run_compiled_fabric

        m = load_top(text, TOP, tag, LOCKSTEP_OPT)
        try:
            res = run_compiled_fabric(m, config, bench_seed(seed))
        finally:
            m.close()
        return json.loads(json.dumps(res))       # the cocotb backend's result file, as read back
    build_args = ()
    if verilator_blocks:
        text, _ = verilator_hier_blocks(text, CELL_MODULE_PREFIXES, TOP)
        build_args = HIER_ARGS
    with tempfile.TemporaryDirectory(prefix="fred-fabric-") as tmp:
        out = Path(tmp) / "result.json"
        run_bench(verilog=text, toplevel=TOP, test_module="fred.sim.benches.fabric", tag=tag,
                  config=dict(config, result_path=str(out)), seed=seed, build_args=build_args)
        return json.loads(out.read_text())


def kind_flows(kind, ports, rng=None) -> list:
    """The all-ports flow set of one kind (strings)."""
    rng = rng or random.Random(0)
    allp = ",".join(str(p) for p in range(ports))
    if kind == "unicast":
        perm = list(range(ports))
        rng.shuffle(perm)
        return [f"{p}>{q}" for p, q in enumerate(perm)]
    if kind == "reduce":
        return [f"{allp}>{rng.randrange(ports)}"]
    if kind == "multicast":
        return [f"{rng.randrange(ports)}>{allp}"]
    if kind == "all-reduce":
        return [f"{allp}>{allp}"]
    raise ValueError(f"unknown flow kind {kind!r}; known: {', '.join(KINDS)}")


def measure_fabric(ports, middle, lanes=4, dtype="fp16", seed=1, beats=200,
                   loads=(0.25, 0.5, 0.75, 1.0), stall=0.25, sweep_beats=200,
                   backend="compiled") -> dict:
    """Measure FRED_middle(ports) under Verilator on ``backend`` (:func:`run_fabric`; the same
    figures on both); see the module docstring for the schema."""

    rng = random.Random(seed)
    flows = {}
    for kind in KINDS:
        for _ in range(100):  # a unicast permutation always routes for m >= 2; be safe anyway
            fl = kind_flows(kind, ports, rng)
            try:
                route(ports, middle, fl)
                break
            except ValueError:
                continue
        flows[kind] = fl
    lat = cell_latencies(middle, lanes, dtype)
    cell = lat["R"]
    S = stages(ports)
    # zero back-pressure, no idling: latency and line rate
    res = run_fabric(ports, middle, lanes, dtype, [flows[k] for k in KINDS], seed=seed, beats=beats,
                     labels=list(KINDS), specials=False, backend=backend)
    latency, lrange, thr = {}, {}, {}
    for kind, ph in zip(KINDS, res["phases"]):
        latency[kind] = ph["latency"]["max"]
        lrange[kind] = [ph["latency"]["min"], ph["latency"]["max"]]
        o = list(ph["out_rate"].values())
        i = list(ph["in_rate"].values())
        thr[kind] = {"per_port_min": min(o + i), "per_port_mean": sum(o + i) / len(o + i),
                     "inputs_min": min(i), "outputs_min": min(o)}
    # offered load sweep under random back-pressure
    points = []
    for load in loads:
        r = run_fabric(ports, middle, lanes, dtype, [flows[k] for k in KINDS], seed=seed + 1,
                       beats=sweep_beats, idle=round(1.0 - load, 6), stall=stall,
                       labels=[f"{k}@{load}" for k in KINDS], specials=False, backend=backend)
        for kind, ph in zip(KINDS, r["phases"]):
            o = list(ph["out_rate"].values())
            points.append({"kind": kind, "offered_load": load, "latency_mean": ph["latency"]["mean"],
                           "latency_max": ph["latency"]["max"],
                           "delivered_per_port": sum(o) / len(o)})
    return {
        "ports": ports, "middle": middle, "lanes": lanes, "dtype": dtype, "seed": seed,
        "stages": S, "cell_latency": cell, "cell_latencies": lat,
        "latency_formula": S * cell, "flows": flows, "latency": latency, "latency_range": lrange,
        "latency_matches_formula": all(v == [S * cell, S * cell] for v in lrange.values()),
        "throughput": thr, "load_sweep": {"stall": stall, "points": points}, "beats": beats,
    }


def main(argv=None):  # python -m fred.sim.characterize.fabric P M [LANES DTYPE]
    import sys

    args = list(sys.argv[1:] if argv is None else argv)
    P = int(args[0]) if args else 4
    m = int(args[1]) if len(args) > 1 else 3
    lanes = int(args[2]) if len(args) > 2 else 1
    dtype = args[3] if len(args) > 3 else "fp16"
    print(json.dumps(measure_fabric(P, m, lanes, dtype), indent=1))


if __name__ == "__main__":
    main()
