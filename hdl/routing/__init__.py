"""The routing compiler: colours each level's conflict graph with m middle subnetworks, enables
reduction and broadcast where a flow owns both ports of a cell, and checks the result.
The precompiled all-to-all (a traffic matrix -> permutation phases, :mod:`.all_to_all`). Also the placement study (which 3D-parallel flow sets route under which numbering).
"""

from .all_to_all import (A2APhase, Schedule, bound_packets, check_matrix, compile_all_to_all,
                         estimate_cycles, online_schedule, uniform_matrix, zipf_matrix)
from .check import broadcast_cells, check_and_trees, trace
from .compiler import routable, route, route_phases
from .result import ReduceStep, RoutingResult
from .solver import FAST_BUDGET, NODE_BUDGET, PathCSP, RoutingError, search, top_down
from .placement import (
    DEFAULT_PORTS, DEFAULT_SAMPLES, StudyRow, format_study, paper_placement, phases, strategies, study,
    study_json)

__all__ = [
    "A2APhase",
    "DEFAULT_PORTS",
    "DEFAULT_SAMPLES",
    "FAST_BUDGET",
    "NODE_BUDGET",
    "PathCSP",
    "ReduceStep",
    "RoutingError",
    "RoutingResult",
    "Schedule",
    "StudyRow",
    "bound_packets",
    "broadcast_cells",
    "check_matrix",
    "check_and_trees",
    "compile_all_to_all",
    "estimate_cycles",
    "format_study",
    "online_schedule",
    "paper_placement",
    "phases",
    "routable",
    "route",
    "route_phases",
    "search",
    "strategies",
    "study",
    "study_json",
    "top_down",
    "trace",
    "uniform_matrix",
    "zipf_matrix",
]
