"""The routing compiler: colours each level's conflict graph with m middle subnetworks, enables
reduction and broadcast where a flow owns both ports of a cell, and checks the result.
Also the placement study (which 3D-parallel flow sets route under which numbering).
"""

from .check import broadcast_cells, check_and_trees, trace
from .compiler import routable, route, route_phases
from .result import ReduceStep, RoutingResult
from .solver import FAST_BUDGET, NODE_BUDGET, PathCSP, RoutingError, search, top_down
from .placement import (
    DEFAULT_PORTS, DEFAULT_SAMPLES, StudyRow, format_study, paper_placement, phases, strategies, study,
    study_json)

__all__ = [
    "DEFAULT_PORTS",
    "DEFAULT_SAMPLES",
    "FAST_BUDGET",
    "NODE_BUDGET",
    "PathCSP",
    "ReduceStep",
    "RoutingError",
    "RoutingResult",
    "StudyRow",
    "broadcast_cells",
    "check_and_trees",
    "format_study",
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
]
