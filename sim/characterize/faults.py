"""Go-Back-N under link faults on the switch RTL: runs of the fault bench and the goodput curve.

``run_faults(ports, rates, packets, seed, ...)`` builds the switch (Verilator, cached: the
4-port int32 switch of the unit benches, or the 12-port fp16 switch ``fred characterize``
measures, with 8-flit packets), runs the fault bench once without faults (the baseline) and
once per rate, and returns::

    {"params": {...}, "baseline": {...}, "runs": [{"rate", ..., "goodput"}, ...],
     "check": "pass" | "FAILED: ...", "runtime_s"}

Every run: ``delivered`` packets (summed over receivers), ``retransmissions`` (data packets
sent again), ``go_backs``, ``timeouts``, ACKs/NACKs, probes, the injected faults per link side
and kind, the switch's counters, and ``goodput`` = baseline cycles / this run's cycles (the
time until every receiver holds every packet; the program is the same). ``goodput_curve``
turns the runs into the timing file's ``link_faults`` section.

Two drivers run the same bench (:class:`fred.sim.faults.World`: the Go-Back-N endpoints,
the injectors, every check), one clock cycle at a time, the switch's outputs sampled after the
cycle's inputs are applied:

* ``backend="compiled"`` (default): the switch compiled as a shared library
  (:mod:`fred.sim.compiled.loader`, lockstep mode), the world stepped in this process;
* ``backend="cocotb"``: sim/benches/faults.py under cocotb.

The endpoints react within a cycle (credits, ACK/NACK, go-back, probes), so the world runs
between every two cycles rather than from a precomputed schedule; that keeps one
implementation of the endpoints, and the same seed gives the same figures on both drivers
(same reset and configuration sequence, same random streams; tests/sim/test_switch_soak.py compares
them). Without cocotb the cycle costs the endpoints' Python and one call into the model.
"""

from __future__ import annotations

import json
import random
import tempfile
import time
from pathlib import Path

from fred.sim.faults import COUNTERS, FAULT_KINDS, PHASE_KINDS, BenchFailure, World, fault_phases, run_result

__all__ = ["run_faults", "goodput_curve", "switch_for", "CURVE_RATES", "SCHEMA", "BACKENDS"]

#: the simulators that run the fault bench
BACKENDS = ("compiled", "cocotb")

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
        "max_cycles": max_cycles or 400 * packets * len(phases) + 50_000,
    }
    if seq_start is not None:
        cfg["seq_start"] = seq_start
    return cfg


def run_faults(ports=4, rates=(1e-3,), packets=64, seed=1, faults=FAULT_KINDS, kinds=PHASE_KINDS,
               mutant=None, fault=None, seq_start=None, baseline=True, stall=0.1, build=None,
               backend="compiled") -> dict:
    """Run the fault bench (module docstring). ``faults``: fault kinds on the links; ``kinds``:
    phase kinds; ``mutant`` (endpoints) / ``fault`` (switch build): broken recoveries, tests
    only; ``build``: ``{"lanes", "dtype", "max_len", "depth", "middle", "entries"}`` of the switch
    (default :func:`switch_for`, 8 table entries; ``"entries": None``: the switch's default
    capacity); ``backend``: one of :data:`BACKENDS`. A failing check does not raise:
    ``check`` says what failed."""
    from .switch import _build
    from fred.sim.toolchain import run_bench

    if backend not in BACKENDS:
        raise ValueError(f"fault bench backend {backend!r} must be one of {', '.join(BACKENDS)}")
    t0 = time.monotonic()
    lanes, dtype, max_len, depth, shared = switch_for(ports)
    b = dict(build or {})
    lanes, dtype, max_len = b.get("lanes", lanes), b.get("dtype", dtype), b.get("max_len", max_len)
    depth, middle, entries = b.get("depth", depth), b.get("middle", 3), b.get("entries", 8)
    verilog, sw = _build(ports, middle, lanes, dtype, "fred", depth=depth, ctrl_depth=2,
                         max_len=max_len, entries=entries, shared=shared, fault=fault)
    runs = ([{"rate": 0.0, "faults": list(faults), "seed": seed}] if baseline else []) + \
        [{"rate": float(r), "faults": list(faults), "seed": seed} for r in rates]
    tag = f"switch-p{ports}-{dtype}-fred" + (f"-{fault}" if fault else "")
    with tempfile.TemporaryDirectory() as tmp:
        out = str(Path(tmp) / "faults.json")
        cfg = bench_cfg(sw, kinds=kinds, packets=packets, runs=runs, out=out,
                        seq_start=seq_start, mutant=mutant, stall=stall)
        if backend == "compiled":
            res = compiled_runs(verilog, sw, tag, cfg)
        else:
            try:
                run_bench(verilog=verilog, toplevel="fred_switch", test_module="fred.sim.benches.faults",
                          tag=tag, config=cfg, seed=seed, testcase="faults_run")
            except AssertionError:
                pass                       # the JSON says which check failed
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


# -- the compiled driver (sim/benches/faults.py's loop, against the lockstep harness) ---------------------
def compiled_runs(verilog, sw, tag, cfg) -> list:
    """Every run of ``cfg["runs"]`` on one compiled instance of the switch (as sim/benches/faults.py
    runs them on one simulation): a list of results, the failing one ``{"check": "FAILED: ..."}``."""
    from fred.sim.compiled import load

    m = load(verilog, sw, tag)
    results = []
    try:
        for run in cfg["runs"]:
            results.append(_one_run(m, dict(cfg, **run)))
    except BenchFailure as exc:
        results.append({"check": f"FAILED: {exc}"})
    except Exception as exc:                     # a bench bug: say so, never "pass"
        results.append({"check": f"FAILED: fault bench error {type(exc).__name__}: {exc}"})
    finally:
        m.close()
    return results


def _reset(m, cfg):
    """sim/benches/faults.py's reset: 3 cycles of reset (inputs idle), one idle cycle, the
    configuration words one per cycle, one idle cycle."""
    P = cfg["ports"]
    m.inv[:] = 0
    m.set("rst", 1)
    m.cycle(3)
    m.set("rst", 0)
    m.cycle(1)
    for w in cfg["cfg_words"]:
        m.set("cfg__valid", 1)
        m.set("cfg__payload", w)
        m.cycle()
    m.set("cfg__valid", 0)
    m.cycle(1)
    assert P == sum(1 for n, _ in m.ports.inputs if n.endswith("__valid") and n.startswith("i__"))


def _one_run(m, cfg) -> dict:
    """One run (sim/benches/faults.py ``_one_run``, cycle for cycle)."""
    _reset(m, cfg)
    P, cb = cfg["ports"], cfg["credit_bits"]
    rng = random.Random(cfg["seed"])
    stall = random.Random(rng.random())
    inv, outv, outo = m.inv, m.outv, m.outo
    s = m.port_slots(P)
    iv, ordy, ci, ov, co = s.in_valid, s.out_ready, s.credit_in, s.out_valid, s.credit_out
    ip, op = s.in_payload, s.out_payload
    cnt = {k: outo[k][0] for k in COUNTERS}

    def counters(names=COUNTERS):
        return {k: int(outv[cnt[k]]) for k in names}

    w = World(cfg, rng, counters)
    mask = (1 << cb) - 1
    draining = False
    quiet = cfg["probe_idle"] + 8 * cfg["max_len"] + 64
    p_stall = cfg.get("stall", 0.0)
    limit = cfg.get("max_cycles", 200_000)
    while not (draining and w.drained(quiet)):
        for p, word in enumerate(w.inputs()):
            inv[iv[p]] = word is not None
            if word is not None:
                m.set(ip[p], word)
        ready = [int(stall.random() >= p_stall) for _ in range(P)]
        for q in range(P):
            inv[ordy[q]] = ready[q]
        for q, c in enumerate(w.credit_words(cb)):
            inv[ci[q]] = c
        m.cycle()
        taken = [m.get(op[q]) if ready[q] and outv[ov[q]] else None for q in range(P)]
        credits = []
        for p in range(P):
            c = int(outv[co[p]])
            credits.append([(c >> (v * cb)) & mask for v in range(4)] if c else [0] * 4)
        w.outputs_taken(taken)
        w.step(credits)
        if not draining and w.finished_at is not None:
            w.drain()
            draining = True
        if w.now > limit:
            w.fail(f"watchdog: not finished after {w.now} cycles ({w.progress()})")
    w.final_checks()
    return run_result(w, counters())
