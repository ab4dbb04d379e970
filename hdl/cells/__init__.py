"""The microswitch cells: R (2 in x m out, optional reduction), D (m in x 2 out, optional
broadcast) and RD (2x2, both), and the port muxes/demuxes of odd fabrics. Each is one Amaranth
``wiring.Component`` with stream ports and a documented latency contract.
"""

from .microswitches import (
    CELL_CLASSES, DCell, FAULTS, RCell, RDCell, build_cell, cell_latency, check_cell_params,
    stream_signature, verilog_build)
from .muxes import DemuxCell, MuxCell, sel_width

__all__ = [
    "CELL_CLASSES",
    "DCell",
    "DemuxCell",
    "FAULTS",
    "MuxCell",
    "RCell",
    "RDCell",
    "build_cell",
    "cell_latency",
    "check_cell_params",
    "sel_width",
    "stream_signature",
    "verilog_build",
]
