"""The training iteration as a task graph: layer placement per strategy, weight-stationary and
weight-streaming schedules, offload and recomputation policies, and the analysis of a
simulated iteration into busy and exposed time per kind.
"""

from .analysis import analyse
from .graph import ScheduleGraph
from .multiwafer import INTER_WAFER, MultiWaferGraph
from .iteration import (
    DEFAULT_GRANULARITY, DEFAULT_STREAM_STEPS, KINDS, STREAM_BUFFERS, ScheduleResult, build_and_run,
    io_bandwidth, memory_plan, stationary_memory)

__all__ = [
    "INTER_WAFER",
    "MultiWaferGraph",
    "DEFAULT_GRANULARITY",
    "DEFAULT_STREAM_STEPS",
    "KINDS",
    "STREAM_BUFFERS",
    "ScheduleGraph",
    "ScheduleResult",
    "analyse",
    "build_and_run",
    "io_bandwidth",
    "memory_plan",
    "stationary_memory",
]
