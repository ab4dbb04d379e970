"""The compiled path: the golden models' stimulus replayed by a C++ Verilator harness and checked
by Python in batches, for long random soaks at hundreds of thousands of cycles per second.
"""

from .batch_io import MAGIC_IN, MAGIC_OUT, PhaseResult, StimPhase, pack, read_results, unpack, write_stimulus
from .bench import cocotb_speed, main, raw_rate, switch_speed, switch_table
from .builder import BUILD_ARGS, HARNESS, SoakDesign, build, finish, raw_speed, start
from .cells import CellSoakReport, DEFAULT_PAUSES, cell_design, cell_soak, representative_modes
from .fabric import FabricSoakReport, fabric_design, fabric_soak, routed_unused_inputs
from .run import SoakStats, check_phase, run_batches, span_rate
from .switch import (TRAFFIC, SwitchSoakReport, default_phases, load_table, parse_replay,
                     replay_stimulus, switch_soak)

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
    "SwitchSoakReport",
    "TRAFFIC",
    "build",
    "cell_design",
    "cell_soak",
    "check_phase",
    "cocotb_speed",
    "default_phases",
    "fabric_design",
    "fabric_soak",
    "routed_unused_inputs",
    "finish",
    "load_table",
    "main",
    "pack",
    "parse_replay",
    "raw_rate",
    "raw_speed",
    "read_results",
    "replay_stimulus",
    "representative_modes",
    "run_batches",
    "span_rate",
    "start",
    "switch_soak",
    "switch_speed",
    "switch_table",
    "unpack",
    "write_stimulus",
]
