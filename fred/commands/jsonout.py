"""One JSON shape for every command's ``--json`` output.

Every document is an object::

    {"kind": "fred-<command>", "schema_version": 1, ...fields..., "results": [ {...}, ... ]}

* ``results`` is a list even for one item (one fabric, one phase, one row);
* units are in the key names (``time_s``, ``bandwidth_Bps``, ``size_bytes``, ``latency_cycles``);
  a key without a unit is a count, a ratio or a name;
* floats are rounded to :data:`SIGNIFICANT` significant digits (no float noise such as
  ``0.0024330563200000003``); a whole-valued float is written as an integer (``1073741824``,
  exact); infinities and NaN become ``null`` (JSON has neither).

The README's table "JSON output" lists each command's ``kind`` and top-level keys; bump
:data:`SCHEMA_VERSION` when a key changes meaning or disappears.
"""

from __future__ import annotations

import json
import math

__all__ = ["SCHEMA_VERSION", "SIGNIFICANT", "rounded", "document", "dumps"]

#: version of every command's JSON shape
SCHEMA_VERSION = 1
#: significant digits of every float in JSON output
SIGNIFICANT = 6


def rounded(obj, digits: int = SIGNIFICANT):
    """``obj`` with every float rounded to ``digits`` significant digits (recursively through
    dicts, lists and tuples); whole-valued floats become ints, non-finite ones None; numpy
    scalars become Python ones."""
    if isinstance(obj, bool) or obj is None or isinstance(obj, (int, str)):
        return obj
    if isinstance(obj, float):
        if not math.isfinite(obj):
            return None
        if obj.is_integer() and abs(obj) < 2**53:  # a count of bytes, samples ...: exact
            return int(obj)
        return float(f"{obj:.{digits}g}")
    if isinstance(obj, dict):
        return {str(k): rounded(v, digits) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [rounded(v, digits) for v in obj]
    if hasattr(obj, "item"):  # numpy scalar
        return rounded(obj.item(), digits)
    if hasattr(obj, "tolist"):  # numpy array
        return rounded(obj.tolist(), digits)
    return str(obj)


def document(kind: str, results, **fields) -> dict:
    """``{"kind": "fred-<kind>", "schema_version": ..., **fields, "results": [...]}``."""
    return {"kind": f"fred-{kind}", "schema_version": SCHEMA_VERSION, **fields, "results": list(results)}


def dumps(doc: dict) -> str:
    """The document as JSON text (floats rounded, strict JSON: no NaN or Infinity)."""
    return json.dumps(rounded(doc), indent=1, allow_nan=False)
