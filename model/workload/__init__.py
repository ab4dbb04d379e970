"""Workloads: the bundled and user YAML files (fields checked with types and ranges), the layer
lists they derive, the NPU compute model and the memory footprint per NPU.
"""

from .compute import DEFAULT_NPU, NPU_PRESETS, UTILISATION, UTILISATION_SOURCE
from .fields import (
    LIMITS, check_layer_list, check_resnet_shape, check_sweep_microbatches, get_field, layer_entry)
from .loader import list_workloads, load_workload, sweep_microbatches, workload_ref
from .memory import CHOICES, DEFAULT_POLICY, check_policy

__all__ = [
    "CHOICES",
    "DEFAULT_NPU",
    "DEFAULT_POLICY",
    "LIMITS",
    "NPU_PRESETS",
    "UTILISATION",
    "UTILISATION_SOURCE",
    "check_layer_list",
    "check_policy",
    "check_resnet_shape",
    "check_sweep_microbatches",
    "get_field",
    "layer_entry",
    "list_workloads",
    "load_workload",
    "sweep_microbatches",
    "workload_ref",
]
