"""Readers of workloads written elsewhere: ASTRA-sim text workloads and Chakra execution traces
(protobuf schema included).
"""

from .astra_trace import (
    FIELDS, KINDS, Trace, TraceHeader, TraceLayer, load_trace, parse_header, parse_trace, trace_header)
from .chakra_et import EtOp, EtTrace, OPS_BY_COMM_TYPE, load_chakra, read_et_file, run_chakra
from .chakra_schema import AttributeProto, GlobalMetadata, NODE_TYPES, Node

__all__ = [
    "AttributeProto",
    "EtOp",
    "EtTrace",
    "FIELDS",
    "GlobalMetadata",
    "KINDS",
    "NODE_TYPES",
    "Node",
    "OPS_BY_COMM_TYPE",
    "Trace",
    "TraceHeader",
    "TraceLayer",
    "load_chakra",
    "load_trace",
    "parse_header",
    "parse_trace",
    "read_et_file",
    "run_chakra",
    "trace_header",
]
