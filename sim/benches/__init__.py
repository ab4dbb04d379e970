"""cocotb test benches (drivers, monitors, pause generators, checkers) that drive the emitted
Verilog under Verilator against the golden models, with their functional cover points.
"""

from .cells import representative_modes, run_cell_regression
from .cover import (
    FABRIC_CASES, POINTS, STALLS, enabled, export, report, sample_cell_phase, sample_fabric_phase,
    sample_switch, tie_mask, value_classes)
from .crossbar import default_flows, golden_crossbar, main, measure_crossbar
from .overlap import overlap_phases
from .streams import (
    Cycles, PauseGenerator, StreamDriver, StreamMonitor, pack_lanes, start, unpack_lanes, watchdog)
from .switch_harness import Bench, RANK

__all__ = [
    "Bench",
    "Cycles",
    "FABRIC_CASES",
    "POINTS",
    "PauseGenerator",
    "RANK",
    "STALLS",
    "StreamDriver",
    "StreamMonitor",
    "default_flows",
    "enabled",
    "export",
    "golden_crossbar",
    "main",
    "measure_crossbar",
    "overlap_phases",
    "pack_lanes",
    "report",
    "representative_modes",
    "run_cell_regression",
    "sample_cell_phase",
    "sample_fabric_phase",
    "sample_switch",
    "start",
    "tie_mask",
    "unpack_lanes",
    "value_classes",
    "watchdog",
]
