"""The FRED switch and fabric compiled for Python: the Verilog under Verilator as a shared library
driven through ``ctypes`` (``loader``, ``harness.cpp``), the cycle-stepped switch benches that run
on it or, unchanged, under cocotb (``world``, ``scenarios``: the latency measurement, the stress
run, the all-to-all; the cocotb twin ``cocotb_driver`` is not imported here: it needs cocotb),
and the cycle-stepped fabric bench (``fabric``; its cocotb twin is sim/benches/fabric.py). The
replay soak on top of it is :mod:`fred.sim.soak.switch`.
"""

from .fabric import FABRIC_RESET, FabricWorld, run_compiled_fabric
from .loader import (LOCKSTEP_OPT, REPLAY_OPT, CompiledSwitch, PortMap, build, build_top, load, load_top,
                     port_map)
from .scenarios import SCENARIOS, Measurement, a2a_offered, all_to_all, make_world, run_compiled, stress
from .world import RANK, STATUS, BenchFailure, SwitchWorld, check_outputs, reset_sequence, wait

__all__ = [
    "BenchFailure",
    "CompiledSwitch",
    "FABRIC_RESET",
    "FabricWorld",
    "LOCKSTEP_OPT",
    "Measurement",
    "PortMap",
    "RANK",
    "SCENARIOS",
    "REPLAY_OPT",
    "STATUS",
    "SwitchWorld",
    "a2a_offered",
    "all_to_all",
    "build",
    "build_top",
    "check_outputs",
    "load",
    "load_top",
    "make_world",
    "port_map",
    "reset_sequence",
    "run_compiled",
    "run_compiled_fabric",
    "stress",
    "wait",
]
