"""The full FRED switch around the fabric: input-port buffers with virtual channels and credits,
the control unit with its per-phase configuration table, priority preemption, online routing
for the default index, and the link ends (per-flit CRC, Go-Back-N sequence alignment, poisoning).
"""

from .buffers import InputPort, VCBuffer, header_bits, header_ok, link_layout
from .control import (MAX_ROUND_QUEUE, OutputPort, PhaseTable, TABLE_BUDGET_BYTES, TableLayout,
                      default_capacity, make_header, round_queue_for)
from .ideal import IdealFabric, ideal_config_bits
from .linkcheck import LinkRx, LinkTx, crc_check, wire_layout
from .online import OnlineRouter, check_online_middle, online_config, online_modes
from .online_ctl import OnlineRounds
from .poison import poison_rounds
from .rounds import ControlUnit
from .seqalign import REWIND_EPOCH, align, outputs
from .top import (
    FABRICS, PAPER_CTRL_DEPTH, PAPER_DATA_DEPTH, PAPER_MAX_LEN, SWITCH_FAULTS, Switch, verilog_build)

__all__ = [
    "ControlUnit",
    "FABRICS",
    "IdealFabric",
    "InputPort",
    "LinkRx",
    "LinkTx",
    "MAX_ROUND_QUEUE",
    "OnlineRounds",
    "OnlineRouter",
    "OutputPort",
    "PAPER_CTRL_DEPTH",
    "PAPER_DATA_DEPTH",
    "PAPER_MAX_LEN",
    "PhaseTable",
    "REWIND_EPOCH",
    "SWITCH_FAULTS",
    "Switch",
    "TABLE_BUDGET_BYTES",
    "TableLayout",
    "VCBuffer",
    "align",
    "check_online_middle",
    "crc_check",
    "default_capacity",
    "header_bits",
    "header_ok",
    "ideal_config_bits",
    "link_layout",
    "make_header",
    "online_config",
    "online_modes",
    "outputs",
    "poison_rounds",
    "round_queue_for",
    "verilog_build",
    "wire_layout",
]
