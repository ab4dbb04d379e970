"""The fabric as data (pure Python, no Amaranth): cell modes, the recursive FRED_m(P) structure
(stages, cells, wires) and flows (sets of input ports summed and delivered to output ports).
The routing compiler, the RTL and the golden models all read this one description.
"""

from .flows import (
    COLLECTIVES, Flow, Phase, all_gather, all_reduce, all_to_all, broadcast, expand, format_ports,
    gather, multicast, parse_flow, parse_ports, reduce, reduce_scatter, scatter, validate_flows)
from .modes import (
    CellAddr, DMode, DemuxMode, KINDS, MuxMode, RDMode, RMode, STAGES, idle_mode, mode_from_json,
    mode_str, mode_to_json, path_name)
from .structure import (
    CELL_KINDS, MAX_CELLS, MAX_PORTS, Netlist, Pin, cell_counts, check_params, child_ports, depth,
    instance_count, instance_ports, netlist, stages, total_cells)

__all__ = [
    "CELL_KINDS",
    "COLLECTIVES",
    "CellAddr",
    "DMode",
    "DemuxMode",
    "Flow",
    "KINDS",
    "MAX_CELLS",
    "MAX_PORTS",
    "MuxMode",
    "Netlist",
    "Phase",
    "Pin",
    "RDMode",
    "RMode",
    "STAGES",
    "all_gather",
    "all_reduce",
    "all_to_all",
    "broadcast",
    "cell_counts",
    "check_params",
    "child_ports",
    "depth",
    "expand",
    "format_ports",
    "gather",
    "idle_mode",
    "instance_count",
    "instance_ports",
    "mode_from_json",
    "mode_str",
    "mode_to_json",
    "multicast",
    "netlist",
    "parse_flow",
    "parse_ports",
    "path_name",
    "reduce",
    "reduce_scatter",
    "scatter",
    "stages",
    "total_cells",
    "validate_flows",
]
