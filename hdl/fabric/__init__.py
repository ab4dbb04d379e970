"""The FRED_m(P) fabric in RTL: the recursive Clos network of cells (flat, shared or hierarchical
Verilog forms) and the configuration image a routed phase loads into it.
"""

from .image import PACKING, annotate, config_image
from .hier import (
    AUTO_HIER_LANES, FORMS, LaneAdders, emit_modules, input_bits, instantiate, lane_module_name,
    plain_signature, resolve_form)
from .recursive import (
    Fabric, MAX_MODULE_PORT_BITS, MAX_RTL_PORTS, MAX_RTL_WORK, RD_CONFIG_WIDTH, cell_latencies,
    check_fabric_params, config_bits, config_layout, config_width, decode_config, emit_with_shared,
    fabric_latency, fabric_verilog_text, gapped_latency_bound, module_port_bits, verilog_build)

__all__ = [
    "AUTO_HIER_LANES",
    "FORMS",
    "Fabric",
    "LaneAdders",
    "MAX_MODULE_PORT_BITS",
    "MAX_RTL_PORTS",
    "MAX_RTL_WORK",
    "PACKING",
    "RD_CONFIG_WIDTH",
    "annotate",
    "cell_latencies",
    "check_fabric_params",
    "config_bits",
    "config_image",
    "config_layout",
    "config_width",
    "decode_config",
    "emit_modules",
    "emit_with_shared",
    "fabric_latency",
    "fabric_verilog_text",
    "gapped_latency_bound",
    "input_bits",
    "instantiate",
    "lane_module_name",
    "module_port_bits",
    "plain_signature",
    "resolve_form",
    "verilog_build",
]
