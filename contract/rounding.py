"""Numbers written for people and tools to read: no float noise.

One rule for every JSON document fred writes (``--json`` outputs, timing files): a float is
rounded to :data:`SIGNIFICANT` significant digits (``0.0024330563200000003`` -> ``0.00243306``),
a whole-valued float is written as an integer (``1073741824.0`` -> ``1073741824``, exact), and
infinities and NaN become ``None`` (JSON has neither).
"""

from __future__ import annotations

import math

__all__ = ["SIGNIFICANT", "rounded"]

#: significant digits of every float fred writes to JSON
SIGNIFICANT = 6


def rounded(obj, digits: int = SIGNIFICANT):
    """``obj`` with every float rounded (see the module docstring), recursively through dicts,
    lists, tuples and sets; numpy scalars and arrays become Python numbers and lists; other
    objects their ``str``."""
    if isinstance(obj, bool) or obj is None or isinstance(obj, (int, str)):
        return obj
    if isinstance(obj, float):
        if not math.isfinite(obj):
            return None
        if obj.is_integer() and abs(obj) < 2**53:
            return int(obj)
        return float(f"{obj:.{digits}g}")
    if isinstance(obj, dict):
        return {str(k): rounded(v, digits) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [rounded(v, digits) for v in obj]
    if isinstance(obj, (set, frozenset)):
        return [rounded(v, digits) for v in sorted(obj, key=repr)]
    if hasattr(obj, "item") and getattr(obj, "ndim", 0) == 0:  # numpy scalar
        return rounded(obj.item(), digits)
    if hasattr(obj, "tolist"):  # numpy array
        return rounded(obj.tolist(), digits)
    return str(obj)
