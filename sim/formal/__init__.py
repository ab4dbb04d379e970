"""Formal proofs with SymbiYosys and Yices: the stream rules, beat conservation and routing of
the cells and of small fabrics, and the switch input port's credit and buffer bounds.
"""

from .cells import CellHarness, Flow, GROUPS, cell_flows
from .fabric import FABRIC_GROUPS, FabricHarness, flow_paths
from .runner import Result, SOLVER, check, descendants, tool_env
from .suite import Job, jobs, main, run_job, table
from .switch import ActivationHarness, InputPortHarness, SWITCH_GROUPS

__all__ = [
    "ActivationHarness",
    "CellHarness",
    "FABRIC_GROUPS",
    "FabricHarness",
    "Flow",
    "GROUPS",
    "InputPortHarness",
    "Job",
    "Result",
    "SOLVER",
    "SWITCH_GROUPS",
    "cell_flows",
    "check",
    "descendants",
    "flow_paths",
    "jobs",
    "main",
    "run_job",
    "table",
    "tool_env",
]
