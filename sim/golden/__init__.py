"""Golden models in plain Python + numpy (no simulator imports): IEEE element adds, the cells,
the fabric and the switch, bit-exact references for every bench.
"""

from .cells import Route, expected_outputs, mode_name, port_counts, routes, used_inputs, used_outputs
from .elem import (
    add, add_exact, canonicalize, from_values, is_nan, random_operands, special_values, to_values)
from .fabric import GoldenError, check_sums, random_inputs, simulate, simulate_result, tree_reference
from .switch import (
    Expected, Offered, SwitchModel, bad_packet_words, make_online_traffic, make_traffic, online,
    phases_from_json, phases_to_json, stream_key)

__all__ = [
    "Expected",
    "GoldenError",
    "Offered",
    "Route",
    "SwitchModel",
    "add",
    "add_exact",
    "bad_packet_words",
    "canonicalize",
    "check_sums",
    "expected_outputs",
    "from_values",
    "is_nan",
    "make_online_traffic",
    "make_traffic",
    "mode_name",
    "online",
    "phases_from_json",
    "phases_to_json",
    "port_counts",
    "random_inputs",
    "random_operands",
    "routes",
    "simulate",
    "simulate_result",
    "special_values",
    "stream_key",
    "to_values",
    "tree_reference",
    "used_inputs",
    "used_outputs",
]
