"""Collectives on a network: endpoint algorithms (rings, 2D hierarchical, multi-ring), FRED's
in-switch phases, multi-dimensional and chunked forms, closed-form bounds, the MP/DP/PP groups
of a strategy, and running a set of collectives through the simulator.
"""

from .algorithms import (
    ALGORITHMS, DEFAULT_CHUNKS, OPS, build_plan, canonical_algorithm, canonical_op, default_algorithm,
    io_tree_order)
from .api import CollectiveResult, all_to_all_bytes, collective_time, expand, io_rate_bound, io_tree_load
from .bounds import FACTORS, cut_bound, lower_bound, port_bound, ring_time, uplink_bound
from .chunking import FLOW_BUDGET, MAX_AUTO_CHUNKS, auto_chunks, plan_estimate, stream_link_seconds
from .flowsim import Sim, SimResult, TaskId
from .strategy import (
    all_strategies, ep_groups, expert_dp_groups, expert_parallel, format_strategy, groups, parse_group, parse_strategy,
    place)
from .offwafer import (
    DEFAULT_NETWORK, MAX_WAFERS, NETWORKS, OffWaferLevel, OffWaferNetwork, off_wafer_network, parse_off_wafer)
from .multidim import best_algorithm, dim_lines, in_switch_plan, multi_ring_plan
from .phases import Builder, Ring, Shift, Trees, Unicasts, merge_plans, run_plan

__all__ = [
    "ALGORITHMS",
    "Builder",
    "CollectiveResult",
    "DEFAULT_CHUNKS",
    "DEFAULT_NETWORK",
    "FACTORS",
    "FLOW_BUDGET",
    "MAX_AUTO_CHUNKS",
    "MAX_WAFERS",
    "NETWORKS",
    "OPS",
    "OffWaferLevel",
    "OffWaferNetwork",
    "Ring",
    "Shift",
    "Sim",
    "SimResult",
    "TaskId",
    "Trees",
    "Unicasts",
    "all_strategies",
    "all_to_all_bytes",
    "auto_chunks",
    "best_algorithm",
    "build_plan",
    "canonical_algorithm",
    "canonical_op",
    "collective_time",
    "cut_bound",
    "default_algorithm",
    "dim_lines",
    "ep_groups",
    "expand",
    "expert_dp_groups",
    "expert_parallel",
    "format_strategy",
    "groups",
    "in_switch_plan",
    "io_rate_bound",
    "io_tree_load",
    "io_tree_order",
    "lower_bound",
    "merge_plans",
    "multi_ring_plan",
    "off_wafer_network",
    "parse_group",
    "parse_off_wafer",
    "parse_strategy",
    "place",
    "plan_estimate",
    "port_bound",
    "ring_time",
    "run_plan",
    "stream_link_seconds",
    "uplink_bound",
]
