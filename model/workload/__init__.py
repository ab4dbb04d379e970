"""Workloads: the bundled and user YAML files (fields checked with types and ranges), the layer
lists they derive, the NPU compute model and the memory footprint per NPU.
"""

from .compute import DEFAULT_NPU, NPU_PRESETS, UTILISATION, UTILISATION_SOURCE
from .fields import (
    LIMITS, MODERN_FIELDS, MOE_FIELDS, check_layer_list, check_resnet_shape, check_sweep_microbatches, get_field,
    layer_entry)
from .loader import (
    TABLE_WORKLOADS, default_workloads, list_workloads, load_workload, sweep_microbatches, workload_from_dict,
    workload_ref)
from .moe import DEFAULT_CAPACITY_FACTOR, DEFAULT_ROUTING_ZIPF, Routing, routing
from .memory import CHOICES, DEFAULT_POLICY, check_policy

__all__ = [
    "CHOICES",
    "DEFAULT_CAPACITY_FACTOR",
    "DEFAULT_NPU",
    "DEFAULT_POLICY",
    "DEFAULT_ROUTING_ZIPF",
    "LIMITS",
    "MODERN_FIELDS",
    "MOE_FIELDS",
    "NPU_PRESETS",
    "Routing",
    "TABLE_WORKLOADS",
    "UTILISATION",
    "UTILISATION_SOURCE",
    "check_layer_list",
    "check_policy",
    "check_resnet_shape",
    "check_sweep_microbatches",
    "default_workloads",
    "get_field",
    "layer_entry",
    "list_workloads",
    "load_workload",
    "routing",
    "sweep_microbatches",
    "workload_from_dict",
    "workload_ref",
]
