"""Measurements of the RTL in simulation (fabric and switch latency, activation, phase switch,
preemption, link-fault goodput, overlap, clock and area at width) and the timing file writer
that turns them into the versioned file the model reads.
"""

from .area_width import (
    CTRL_VC_BYTES, DATA_PACKET_BYTES, DATA_VC_BYTES, SPEC_LOGIC_FRACTION, SPEC_SWITCH_CHIPLETS_MM2,
    check_width_area, switch_buffers, width_area)
from .clock import CLOCK_DEFAULTS, limiting, measure_clock
from .fabric import KINDS, TOP, fabric_verilog, kind_flows, measure_fabric, run_fabric
from .fabric_random import case_phases, random_flow_set
from .faults import CURVE_RATES, goodput_curve, run_faults, switch_for
from .overlap import default_switch_figures, measure_overlap
from .run import Progress, characterize, chiplet_name, source_revision, switch_verilog, tool_versions
from .switch import activation_samples_for, check_params, data_depth_for, measure_online, measure_switch
# the characterization's defaults (overlap.DEFAULTS are the overlap bench's own)
from .run import DEFAULTS

__all__ = [
    "DEFAULTS",
    "CLOCK_DEFAULTS",
    "CTRL_VC_BYTES",
    "CURVE_RATES",
    "DATA_PACKET_BYTES",
    "DATA_VC_BYTES",
    "KINDS",
    "Progress",
    "SPEC_LOGIC_FRACTION",
    "SPEC_SWITCH_CHIPLETS_MM2",
    "TOP",
    "activation_samples_for",
    "case_phases",
    "characterize",
    "check_params",
    "check_width_area",
    "chiplet_name",
    "data_depth_for",
    "default_switch_figures",
    "fabric_verilog",
    "goodput_curve",
    "kind_flows",
    "limiting",
    "measure_clock",
    "measure_fabric",
    "measure_online",
    "measure_overlap",
    "measure_switch",
    "random_flow_set",
    "run_fabric",
    "run_faults",
    "source_revision",
    "switch_buffers",
    "switch_for",
    "switch_verilog",
    "tool_versions",
    "width_area",
]
