"""The compiled path: the golden models' stimulus replayed by a C++ Verilator harness and checked
by Python in batches, for long random soaks at hundreds of thousands of cycles per second.
"""

from .batch_io import MAGIC_IN, MAGIC_OUT, PhaseResult, StimPhase, pack, read_results, unpack, write_stimulus
from .bench import cocotb_speed, main, raw_rate
from .builder import BUILD_ARGS, HARNESS, SoakDesign, build, finish, raw_speed, start
from .cells import CellSoakReport, DEFAULT_PAUSES, cell_design, cell_soak, representative_modes
from .fabric import FabricSoakReport, fabric_design, fabric_soak
from .run import SoakStats, check_phase, run_batches, span_rate

__all__ = [
    "BUILD_ARGS",
    "CellSoakReport",
    "DEFAULT_PAUSES",
    "FabricSoakReport",
    "HARNESS",
    "MAGIC_IN",
    "MAGIC_OUT",
    "PhaseResult",
    "SoakDesign",
    "SoakStats",
    "StimPhase",
    "build",
    "cell_design",
    "cell_soak",
    "check_phase",
    "cocotb_speed",
    "fabric_design",
    "fabric_soak",
    "finish",
    "main",
    "pack",
    "raw_rate",
    "raw_speed",
    "read_results",
    "representative_modes",
    "run_batches",
    "span_rate",
    "start",
    "unpack",
    "write_stimulus",
]
