"""Measure all-to-all throughput on the switch RTL: precompiled phases vs online routing.

:func:`measure_all_to_all` builds the switch (Verilator, cached; the bench build of
:mod:`fred.sim.characterize.switch` with the switch's default phase-table capacity: at 12 ports
the very build the switch measurement and the fault curve of ``fred characterize`` run on) and
runs the ``a2a`` scenario of :mod:`fred.sim.compiled.scenarios` four times, on the compiled
switch (lockstep; ``backend="cocotb"``: the same world under cocotb, the same figures):

* **uniform**: every input sends ``packets_per_pair`` packets to every other output;
* **skewed**: every input sends ``packets_per_source`` packets, each to an output drawn from a
  Zipf distribution of exponent ``exponent`` over the other outputs (one popularity order for
  all sources, :func:`fred.hdl.routing.all_to_all.zipf_matrix`);

(the online runs with ``online_packets_per_pair`` / ``online_packets_per_source``: online
routing has no per-phase cost to amortize, its rate does not grow with the size, and a
12-port online run of the precompiled runs' size would simulate for most of an hour)

each **precompiled** (:func:`fred.hdl.routing.all_to_all.compile_all_to_all`: cyclic shifts / Birkhoff-von
Neumann phases in the phase table, the tail online when the table is full) and **online** (every
packet a default-index packet, in a random order per source). Packets have ``length`` data flits
(the paper's 4 KB packets in 512 B flits: 8); the receivers are always ready (``stall`` 0) for
the figures, and the bench checks every packet either way.

Figures (per method): ``uniform_flits_per_cycle_per_port`` (flits delivered, headers included,
/ cycles / ports; 1 = every link busy every cycle), ``skewed_fraction_of_bound`` (the busiest
input's or output's flits / cycles: 1 = the skewed all-to-all finishes as soon as one flit per
cycle on its busiest link allows); precompiled also ``config_cycles_per_phase`` (uniform run:
the mean idle cycles at an output between the last flit of one phase and the header of the
next, rounded up: fabric drain, new configuration, first header) and ``phases_uniform``
(P - 1).
"""

from __future__ import annotations

import json
import math
import random
import time
from pathlib import Path

from fred.contract import packet as pk
from fred.contract.outputs import write_atomic
from fred.contract.rounding import rounded
from fred.contract.timing import load_timing, write_timing
from fred.hdl.routing import (bound_packets, compile_all_to_all, online_schedule,
                                 uniform_matrix, zipf_matrix)

__all__ = ["measure_all_to_all", "timing_section", "section_for", "write_section", "embed",
           "run_a2a", "ZIPF_EXPONENT", "DEFAULTS", "main"]

#: the skew of MoE token routing the issue asks for (destinations ~ Zipf(1.0))
ZIPF_EXPONENT = 1.0
#: the measurement's defaults (make run's characterization and the embedded default use them)
DEFAULTS = {"packets_per_pair": 64, "packets_per_source": 128, "online_packets_per_pair": 8,
            "online_packets_per_source": 48, "length": 8, "lanes": 4, "dtype": "fp16",
            "middle": 3}


def _switch(ports, length, lanes=4, dtype="fp16", middle=3, fabric="fred", table_entries=None):
    """``(verilog, switch)``: the bench build of :mod:`fred.sim.characterize.switch` with the
    switch's default phase-table capacity (what fits the paper's 1.5 KB), or ``table_entries``
    (the unit benches' 8: the same Verilog as :func:`~fred.sim.characterize.switch.measure_switch`'s
    for the same ports, lanes, dtype and packet length, so one build serves both)."""
    from .switch import SHARED_FROM_PORTS, _build, check_params

    depth = check_params(ports, length)
    return _build(ports, middle, lanes, dtype, fabric, depth=depth, ctrl_depth=2, max_len=length,
                  entries=table_entries, shared=ports >= SHARED_FROM_PORTS)


def run_a2a(ports, schedule, *, seed, length, lanes=4, dtype="fp16", middle=3, stall=0.0,
            fabric="fred", backend="compiled", speeds=None, table_entries=None) -> dict:
    """One run of ``schedule`` (:class:`fred.hdl.routing.all_to_all.Schedule`): the ``a2a``
    scenario of :mod:`fred.sim.compiled.scenarios` on ``backend`` (``"compiled"``: the switch
    compiled as a shared library, lockstep; ``"cocotb"``: the same world under cocotb, the same
    figures for the same seed). Returns the scenario's result dict plus ``phases``,
    ``online_packets``, ``filler_packets`` and ``method`` (with filler, ``flits``,
    ``flits_per_cycle_per_port``, ``busiest_flits`` and ``fraction_of_bound`` count the
    matrix's packets, ``flits_sent`` every flit the bench delivered); ``speeds`` (a list) gets
    the run's ``(cycles, seconds)``; ``table_entries``: as :func:`_switch`."""
    from .switch import BACKENDS, _base_config, run_lockstep

    if backend not in BACKENDS:
        raise ValueError(f"all-to-all backend {backend!r} must be one of {', '.join(BACKENDS)}")
    verilog, sw = _switch(ports, length, lanes, dtype, middle, fabric, table_entries)
    if len(schedule.phases) > sw.capacity:
        raise ValueError(f"{len(schedule.phases)} phases do not fit the {sw.capacity}-entry table")
    table = schedule.table(pk.VC_DP)
    order = schedule.per_source(random.Random(seed))
    cfg = dict(_base_config(sw, table), scenario="a2a", order=[order[p] for p in range(ports)],
               length=length, stall=stall, rx_credits=[200, 200, 200, 8], credit_burst=8,
               max_cycles=2_000_000)
    (res,) = run_lockstep(verilog, sw, f"switch-p{ports}-{dtype}-{sw.fabric_kind}", [cfg], seed,
                          backend, speeds)
    res["phases"] = len(schedule.phases)
    res["online_packets"] = sum(map(sum, schedule.online))
    # filler packets (padded phases) are traffic to the bench; the figures count the matrix's
    res["filler_packets"] = schedule.filler()
    if res["filler_packets"]:
        real = schedule.covered()
        res["flits_sent"] = res["flits"]
        res["flits"] = sum(map(sum, real)) * (1 + length)
        res["flits_per_cycle_per_port"] = round(res["flits"] / res["cycles"] / ports, 4)
        res["busiest_flits"] = bound_packets(real) * (1 + length)
        res["fraction_of_bound"] = round(res["busiest_flits"] / res["cycles"], 4)
    res["method"] = schedule.method
    return res


def measure_all_to_all(ports=4, seed=1, packets_per_pair=None, packets_per_source=None,
                       length=None, exponent=ZIPF_EXPONENT, stall=0.0, lanes=None, dtype=None,
                       middle=None, online_packets_per_pair=None,
                       online_packets_per_source=None, backend="compiled") -> dict:
    """Both methods on a uniform and a Zipf-skewed all-to-all; returns ``{"ports", "seed",
    "length", "packets_per_pair", "packets_per_source", "exponent", "capacity", "runs":
    {"precompiled-uniform", "precompiled-skewed", "online-uniform", "online-skewed"},
    "figures": {"precompiled": {...}, "online": {...}}, "runtime_s"}``; ``backend``: as
    :func:`run_a2a`."""
    d = dict(DEFAULTS)
    d.update({k: v for k, v in (("lanes", lanes), ("dtype", dtype), ("middle", middle))
              if v is not None})
    ppair = d["packets_per_pair"] if packets_per_pair is None else packets_per_pair
    psrc = d["packets_per_source"] if packets_per_source is None else packets_per_source
    L = d["length"] if length is None else length
    oppair = d["online_packets_per_pair"] if online_packets_per_pair is None else online_packets_per_pair
    opsrc = d["online_packets_per_source"] if online_packets_per_source is None else online_packets_per_source
    for name, v in (("ports", ports), ("packets_per_pair", ppair), ("packets_per_source", psrc),
                    ("online_packets_per_pair", oppair), ("online_packets_per_source", opsrc),
                    ("length", L), ("seed", seed)):
        if isinstance(v, bool) or not isinstance(v, int) or v < (4 if name == "ports" else 1):
            raise ValueError(f"all-to-all {name} {v!r} must be an integer >= "
                             f"{4 if name == 'ports' else 1}")
    t0 = time.monotonic()
    cap = _switch(ports, L, d["lanes"], d["dtype"], d["middle"])[1].capacity
    runs = {}
    for method, kind, M in (
            ("precompiled", "uniform", uniform_matrix(ports, ppair)),
            ("precompiled", "skewed", zipf_matrix(ports, psrc, exponent, random.Random(seed))),
            ("online", "uniform", uniform_matrix(ports, oppair)),
            ("online", "skewed", zipf_matrix(ports, opsrc, exponent, random.Random(seed)))):
        sched = compile_all_to_all(M, cap, length=L) if method == "precompiled" else online_schedule(M)
        runs[f"{method}-{kind}"] = r = run_a2a(ports, sched, seed=seed, length=L, stall=stall,
                                               lanes=d["lanes"], dtype=d["dtype"],
                                               middle=d["middle"], backend=backend)
        assert r["busiest_flits"] == bound_packets(M) * (1 + L)
    pu = runs["precompiled-uniform"]
    figures = {m: {"uniform_flits_per_cycle_per_port": runs[f"{m}-uniform"]["flits_per_cycle_per_port"],
                   "skewed_fraction_of_bound": runs[f"{m}-skewed"]["fraction_of_bound"]}
               for m in ("precompiled", "online")}
    figures["precompiled"]["config_cycles_per_phase"] = math.ceil(
        pu["phase_change_idle_cycles"]["mean"])
    figures["precompiled"]["phases_uniform"] = pu["phases"]
    return {"ports": ports, "seed": seed, "length": L, "lanes": d["lanes"], "dtype": d["dtype"],
            "middle": d["middle"], "packets_per_pair": ppair,
            "packets_per_source": psrc, "online_packets_per_pair": oppair,
            "online_packets_per_source": opsrc, "exponent": exponent, "capacity": cap, "stall": stall,
            "runs": runs, "figures": figures, "runtime_s": round(time.monotonic() - t0, 1)}


def section_for(results: list, measured_by: str) -> dict:
    """The timing file's ``all_to_all`` section (schema 5, docs/characterization.md) from
    :func:`measure_all_to_all` results of one or more switch sizes; ``ports`` and ``methods``
    come from the largest."""
    if not results:
        raise ValueError("all-to-all section: no measurement")
    exps = {r["exponent"] for r in results}
    if len(exps) != 1:
        raise ValueError(f"all-to-all section: measurements with different Zipf exponents {sorted(exps)}")
    top = max(results, key=lambda r: r["ports"])
    return {"zipf_exponent": float(exps.pop()), "ports": top["ports"],
            "methods": json.loads(json.dumps(top["figures"])),
            "by_ports": {str(r["ports"]): json.loads(json.dumps(r["figures"]))
                         for r in sorted(results, key=lambda r: r["ports"])},
            "default_method": "precompiled", "measured_by": measured_by}


def timing_section(ports=(4, 12), seed=1, **kw) -> dict:
    """Measure every size in ``ports`` and return the section (``measured_by`` names the
    call)."""
    results = [measure_all_to_all(p, seed=seed, **kw) for p in ports]
    args = ", ".join([f"ports={tuple(ports)}", f"seed={seed}"] + [f"{k}={v}" for k, v in sorted(kw.items())])
    return section_for(results, f"fred.sim.characterize.all_to_all.timing_section({args})"), results


def write_section(path, ports=(4, 12), seed=1, **kw) -> dict:
    """Measure (:func:`timing_section`) and write the section and the runs behind it as JSON
    (``{"section", "results"}``) to ``path``; return the section."""
    sec, results = timing_section(ports=ports, seed=seed, **kw)
    write_atomic(path, json.dumps(rounded({"section": sec, "results": results}), indent=1,
                                  sort_keys=True) + "\n")
    return sec


def embed(section_json, timing_in, timing_out) -> dict:
    """Write ``timing_out``: the timing file ``timing_in`` (``None``: the embedded default) with
    the ``all_to_all`` section of ``section_json`` (a file :func:`write_section` wrote) and
    schema version 5 (the rest of the file unchanged, as it was measured). Returns the section."""
    sec = json.loads(Path(section_json).read_text())["section"]
    doc = dict(load_timing(timing_in).data)
    doc["all_to_all"] = sec
    doc["schema_version"] = max(5, doc["schema_version"])
    write_timing(doc, timing_out)
    return sec


def main(argv=None):
    """``python -m fred.bench all-to-all``: the 4-port figures (both methods)."""
    r = measure_all_to_all(4)
    print(f"all-to-all on FRED_3({r['ports']}), packets of 1 + {r['length']} flits, seed {r['seed']}, "
          f"table capacity {r['capacity']}")
    for name, x in r["runs"].items():
        print(f"  {name:20} {x['cycles']:6} cycles  {x['flits_per_cycle_per_port']:.3f} flits/cycle/port"
              f"  {x['fraction_of_bound']:.3f} of bound  {x['phases']} phases"
              f"  {x['online_packets']} online packets  {x['rounds']} rounds")
    print(f"  figures: {json.dumps(r['figures'])}")
    print(f"  runtime_s {r['runtime_s']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
