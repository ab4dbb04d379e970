"""The wafer's physical constants and configurations, each defined once with its source, and the
switch figures read from a timing file (latency, activation, phase switch, preemption, link
faults, packet overheads).
"""

from .bit_errors import curve_from_section, goodput_at, max_bit_error_rate, packet_error
from .packets import (
    ACK_EVERY, FLIT_BYTES, PACKET_BYTES, control_packet_flits, data_packet_flits, link_efficiency,
    wire_bits)
from .params import (
    FABRICS, FabricVariant, GB, GiB, LINK_LATENCY, MESH_LINK_BW, MiB, NPU_NET_BW, NS, TB, TRAFFIC_VC,
    VC_PRIORITY, WaferParams, canonical_fabric, default_params, variant)
from .timing import (
    A2A_METHODS, NO_A2A_SECTION, SWITCH_CLOCK_HZ, AllToAllTiming, SwitchTiming, ZERO_SWITCH_TIMING, all_to_all_timing,
    switch_timing)

__all__ = [
    "A2A_METHODS",
    "ACK_EVERY",
    "AllToAllTiming",
    "FABRICS",
    "FLIT_BYTES",
    "FabricVariant",
    "GB",
    "GiB",
    "LINK_LATENCY",
    "MESH_LINK_BW",
    "MiB",
    "NO_A2A_SECTION",
    "NPU_NET_BW",
    "NS",
    "PACKET_BYTES",
    "SWITCH_CLOCK_HZ",
    "SwitchTiming",
    "TB",
    "TRAFFIC_VC",
    "VC_PRIORITY",
    "WaferParams",
    "ZERO_SWITCH_TIMING",
    "all_to_all_timing",
    "canonical_fabric",
    "control_packet_flits",
    "curve_from_section",
    "data_packet_flits",
    "default_params",
    "goodput_at",
    "link_efficiency",
    "max_bit_error_rate",
    "packet_error",
    "switch_timing",
    "variant",
    "wire_bits",
]
