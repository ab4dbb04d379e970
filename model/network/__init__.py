"""The flow-level network simulator: topologies (mesh, Fred-A..D, YAML networks), the route graph,
the task graph of flows and compute, the event engine and its max-min rate solver, and what a
simulation returns.
"""

from .engine import run, warm
from .from_yaml import NumberLoader, load_network_yaml, parse_network_yaml
from .maxmin import maxmin_rates, priority_rates
from .simresult import SimResult
from .taskarrays import Block, Grow, TaskArrays
from .taskgraph import DELAY, FLOW, MAX_PATH_LINKS, MAX_TASKS, TaskGraph, TaskId, check_bytes, check_duration
from .topology import build_fabric, mesh2d, resolve, ring, single_switch, tree2

__all__ = [
    "Block",
    "DELAY",
    "FLOW",
    "Grow",
    "MAX_PATH_LINKS",
    "MAX_TASKS",
    "NumberLoader",
    "SimResult",
    "TaskArrays",
    "TaskGraph",
    "TaskId",
    "build_fabric",
    "check_bytes",
    "check_duration",
    "load_network_yaml",
    "maxmin_rates",
    "mesh2d",
    "parse_network_yaml",
    "priority_rates",
    "resolve",
    "ring",
    "run",
    "single_switch",
    "tree2",
    "warm",
]
