"""Link faults and their recovery: the fault injector on a wire, the Go-Back-N endpoints (NPU
side) and the fault bench that runs a switch between them.
"""

from .bench import COUNTERS, BenchFailure, PHASE_KINDS, Program, World, fault_phases, run_result
from .endpoint import Endpoint
from .gbn import GbnParams, GbnReceiver, GbnSource, MUTANTS, ack_fields
from .inject import FAULT_KINDS, Injector

__all__ = [
    "BenchFailure",
    "COUNTERS",
    "Endpoint",
    "FAULT_KINDS",
    "GbnParams",
    "GbnReceiver",
    "GbnSource",
    "Injector",
    "MUTANTS",
    "PHASE_KINDS",
    "Program",
    "World",
    "ack_fields",
    "fault_phases",
    "run_result",
]
