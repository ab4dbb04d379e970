"""One JSON shape for every command's ``--json`` output.

Every document is an object::

    {"kind": "fred-<command>", "schema_version": 2, ...fields..., "results": [ {...}, ... ]}

* ``results`` is a list even for one item (one fabric, one phase, one row);
* units are in the key names (``time_s``, ``bandwidth_Bps``, ``size_bytes``, ``latency_cycles``);
  a key without a unit is a count, a ratio or a name;
* no float noise: :func:`fred.contract.rounding.rounded` (6 significant digits, whole-valued
  floats as integers, infinities and NaN as ``null``), the same rule as the timing files.

The README's table "JSON output" lists each command's ``kind`` and top-level keys; bump
:data:`SCHEMA_VERSION` when a key changes meaning or disappears.
"""

from __future__ import annotations

import json

from fred.contract.rounding import SIGNIFICANT, rounded

__all__ = ["SCHEMA_VERSION", "SIGNIFICANT", "rounded", "document", "dumps"]

#: version of every command's JSON shape. 2: a training result's ``compute_time_s`` is the busiest
#: NPU's busy compute (the same on every fabric for one memory plan; ``compute_busy_s`` is gone)
#: and ``critical_path_compute_s`` the compute on the critical path (with ``exposed_comm_s`` it
#: makes the iteration), ``beyond_compute_s`` = iteration - busy compute; results say ``memory_choice``; the sweep summary's keys name what they
#: are (``avg_iteration_speedup``, ``exposed_comm_ratio_of_sums``, ``fastest_per_sample_<fabric>``,
#: ``least_busy_compute_per_sample_<fabric>``, ``slower_than_mesh``); byte counts are integers
SCHEMA_VERSION = 2


def document(kind: str, results, **fields) -> dict:
    """``{"kind": "fred-<kind>", "schema_version": ..., **fields, "results": [...]}``."""
    return {"kind": f"fred-{kind}", "schema_version": SCHEMA_VERSION, **fields, "results": list(results)}


def dumps(doc: dict) -> str:
    """The document as JSON text (floats rounded, strict JSON: no NaN or Infinity)."""
    return json.dumps(rounded(doc), indent=1, allow_nan=False)
