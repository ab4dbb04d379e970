"""One JSON shape for every command's ``--json`` output.

Every document is an object::

    {"kind": "fred-<command>", "schema_version": 1, ...fields..., "results": [ {...}, ... ]}

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

#: version of every command's JSON shape
SCHEMA_VERSION = 1


def document(kind: str, results, **fields) -> dict:
    """``{"kind": "fred-<kind>", "schema_version": ..., **fields, "results": [...]}``."""
    return {"kind": f"fred-{kind}", "schema_version": SCHEMA_VERSION, **fields, "results": list(results)}


def dumps(doc: dict) -> str:
    """The document as JSON text (floats rounded, strict JSON: no NaN or Infinity)."""
    return json.dumps(rounded(doc), indent=1, allow_nan=False)
