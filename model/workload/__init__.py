"""Workloads: the bundled and user YAML files (fields checked with types and ranges), the layer
lists they derive, the NPU compute model and the memory footprint per NPU.
"""
