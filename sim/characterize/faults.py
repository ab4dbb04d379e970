"""Go-Back-N under link faults on the switch RTL: runs of the fault bench and the goodput curve.

``run_faults(ports, rates, packets, seed, ...)`` builds the switch (Verilator, cached: the
4-port int32 switch of the unit benches, or the 12-port fp16 switch ``fred characterize``
measures, with 8-flit packets), runs sim/benches/faults.py once without faults (the baseline) and
once per rate, and returns::

    {"params": {...}, "baseline": {...}, "runs": [{"rate", ..., "goodput"}, ...],
     "check": "pass" | "FAILED: ...", "runtime_s"}

Every run: ``delivered`` packets (summed over receivers), ``retransmissions`` (data packets
sent again), ``go_backs``, ``timeouts``, ACKs/NACKs, probes, the injected faults per link side
and kind, the switch's counters, and ``goodput`` = baseline cycles / this run's cycles (the
time until every receiver holds every packet; the program is the same). ``goodput_curve``
turns the runs into the timing file's ``link_faults`` section.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from fred.sim.faults import PHASE_KINDS, fault_phases
from fred.sim.faults import FAULT_KINDS

__all__ = ["run_faults", "goodput_curve", "switch_for", "CURVE_RATES", "SCHEMA"]

SCHEMA = "fred-link-faults/1"
#: the rates of the goodput curve (faults per flit on every link, both directions; at 1e-2 nine
#: rounds in ten of a 12-port All-Reduce of 9-flit packets are hit on one of their 24 links)
CURVE_RATES = (1e-4, 3e-4, 1e-3, 3e-3)


def switch_for(ports: int):
    """``(lanes, dtype, max_len, depth, shared)`` of the switch built for ``ports``: the unit
    benches' 4-port switch (2 x int32 lanes, 4-flit packets, 12-flit buffers) below 8 ports,
    else the characterized chiplet switch (4 x fp16, the paper's 8-flit packets, 24-flit
    buffers, shared cell modules)."""
    if ports >= 8:
        return 4, "fp16", 8, 24, True
    return 2, "int32", 4, 12, False


def bench_cfg(sw, *, kinds, packets, runs, out, seq_start=None, mutant=None, stall=0.1,
              max_cycles=None) -> dict:
    """The tb_faults configuration for switch ``sw`` (see sim/benches/faults.py)."""
    phases = fault_phases(sw.P, kinds)
    cfg = {
        "ports": sw.P, "middle": sw.middle, "lanes": sw.lanes, "dtype": sw.dtype.name,
        "fabric": sw.fabric_kind, "flit_bits": sw.flit_bits, "fseq_bits": sw.fseq_bits,
        "depths": list(sw.depths), "credit_bits": sw.credit_bits, "max_len": sw.max_len,
        "probe_idle": sw.probe_idle, "cfg_words": sw.cfg_words(phases), "kinds": list(kinds),
        "packets": packets, "rx_credits": [sw.depths[0]] * 3 + [4], "mutant": mutant,
        "stall": stall, "runs": runs, "out": out,
        "max_cycles": max_cycles or 400 * packets * len(kinds) + 50_000,
    }
    if seq_start is not None:
        cfg["seq_start"] = seq_start
    return cfg


def run_faults(ports=4, rates=(1e-3,), packets=64, seed=1, faults=FAULT_KINDS, kinds=PHASE_KINDS,
               mutant=None, fault=None, seq_start=None, baseline=True, stall=0.1, build=None) -> dict:
    """Run the fault bench (module docstring). ``faults``: fault kinds on the links; ``kinds``:
    phase kinds; ``mutant`` (endpoints) / ``fault`` (switch build): broken recoveries, tests
    only; ``build``: ``{"lanes", "dtype", "max_len", "depth", "middle"}`` of the switch (default
    :func:`switch_for`). A failing check does not raise: ``check`` says what failed."""
    from .switch import _build
    from fred.sim.toolchain import run_bench

    t0 = time.monotonic()
    lanes, dtype, max_len, depth, shared = switch_for(ports)
    b = dict(build or {})
    lanes, dtype, max_len = b.get("lanes", lanes), b.get("dtype", dtype), b.get("max_len", max_len)
    depth, middle = b.get("depth", depth), b.get("middle", 3)
    verilog, sw = _build(ports, middle, lanes, dtype, "fred", depth=depth, ctrl_depth=2,
                         max_len=max_len, shared=shared, fault=fault)
    runs = ([{"rate": 0.0, "faults": list(faults), "seed": seed}] if baseline else []) + \
        [{"rate": float(r), "faults": list(faults), "seed": seed} for r in rates]
    tag = f"switch-p{ports}-{dtype}-fred" + (f"-{fault}" if fault else "")
    with tempfile.TemporaryDirectory() as tmp:
        out = str(Path(tmp) / "faults.json")
        cfg = bench_cfg(sw, kinds=kinds, packets=packets, runs=runs, out=out,
                        seq_start=seq_start, mutant=mutant, stall=stall)
        try:
            run_bench(verilog=verilog, toplevel="fred_switch", test_module="fred.sim.benches.faults",
                      tag=tag, config=cfg, seed=seed, testcase="faults_run")
        except AssertionError:
            pass                           # the JSON says which check failed
        res = json.loads(Path(out).read_text()) if Path(out).exists() else \
            [{"check": "FAILED: the fault bench did not run (see the cocotb log)"}]
    failed = next((r["check"] for r in res if r["check"] != "pass"), None)
    if failed is None and len(res) != len(runs):
        failed = f"FAILED: {len(res)} of {len(runs)} runs finished (see the cocotb log)"
    base = res.pop(0) if baseline and res and res[0]["check"] == "pass" else None
    for r, run in zip(res, runs[1:] if baseline else runs):
        r["rate"] = run["rate"]
        if base and r["check"] == "pass":
            r["goodput"] = round(base["cycles"] / r["cycles"], 4)
    return {"schema": SCHEMA, "check": failed or "pass", "baseline": base, "runs": res,
            "params": {"ports": ports, "lanes": lanes, "dtype": dtype, "max_len": max_len,
                       "data_depth": depth, "packets_per_phase": packets, "seed": seed,
                       "faults": list(faults), "phases": list(kinds), "flit_bits": sw.flit_bits,
                       "wire_bits": sw.flit_bits + 5 + sw.fseq_bits + 32},
            "runtime_s": round(time.monotonic() - t0, 1)}


def goodput_curve(result: dict) -> dict:
    """The timing file's ``link_faults`` section from a :func:`run_faults` result."""
    if result["check"] != "pass":
        raise ValueError(f"fault bench failed, no goodput curve: {result['check']}")
    p = result["params"]
    return {
        "ports": p["ports"], "dtype": p["dtype"], "lanes": p["lanes"],
        "packet_flits": 1 + p["max_len"], "flit_bits": p["flit_bits"], "wire_bits": p["wire_bits"],
        "packets_per_phase": p["packets_per_phase"], "seed": p["seed"], "faults": p["faults"],
        "phases": p["phases"], "baseline_cycles": result["baseline"]["cycles"],
        "points": [{"rate_per_flit": r["rate"], "goodput": r["goodput"],
                    "retransmissions": r["retransmissions"], "cycles": r["cycles"]}
                   for r in result["runs"]],
    }
