"""Answers: the per-workload training estimate on each fabric, the strategy sweep, the NPU-speed
scan with its crossovers, and estimates from ASTRA-sim and Chakra traces.
"""

from .estimator import (
    ALL_FABRICS, Estimate, FABRIC_ORDER, KINDS, MEMORY_CHOICES, PAPER_SPEEDUPS, REFERENCE_FABRIC, estimate,
    estimate_table, multi_wafer, reference_policy, resolve_fabrics, resolve_workloads)
from .scanner import (
    K_MAX, K_MIN, K_POINTS, PAPER_BAND, PAPER_SAMPLES_PER_REPLICA, REFINE_RTOL, SAVINGS, k_grid, scan,
    to_json)
from .trace_estimate import (
    COMM_OPS, DEFAULT_CLOCK_GHZ, TraceEstimate, estimate_trace, resolve_strategy, trace_table)

__all__ = [
    "ALL_FABRICS",
    "COMM_OPS",
    "DEFAULT_CLOCK_GHZ",
    "Estimate",
    "FABRIC_ORDER",
    "KINDS",
    "MEMORY_CHOICES",
    "K_MAX",
    "K_MIN",
    "K_POINTS",
    "PAPER_BAND",
    "PAPER_SAMPLES_PER_REPLICA",
    "PAPER_SPEEDUPS",
    "REFERENCE_FABRIC",
    "REFINE_RTOL",
    "SAVINGS",
    "TraceEstimate",
    "estimate",
    "estimate_table",
    "estimate_trace",
    "k_grid",
    "multi_wafer",
    "reference_policy",
    "resolve_fabrics",
    "resolve_strategy",
    "resolve_workloads",
    "scan",
    "to_json",
    "trace_table",
]
