"""Parameter checks with one wording, for every block, model object and command.

Every check returns the (normalised) value or raises:

* :class:`TypeError` when the value has the wrong type: ``lanes must be an integer, not str '4'``;
* :class:`ValueError` when the value is out of its range or not allowed:
  ``lanes 0 is too small: must be >= 1`` or ``lanes 5000 is too large: must be <= 1024 (a beat
  wider than that is not generated in reasonable time)``.

``name`` is what the user knows the parameter as (``"lanes"`` in the Python API, ``"--lanes"`` in
the CLI), and the message always names it and the value. ``why`` says where a bound comes from.
"""

from __future__ import annotations

import math
import numbers

__all__ = ["check_int", "check_number", "check_name", "check_choice", "check_bytes",
           "check_unique"]


def _range(name, value, low, high, why, low_open=False, shown=None):
    said = repr(value) if shown is None else shown
    if low is not None and (value <= low if low_open else value < low):
        op = ">" if low_open else ">="
        raise ValueError(f"{name} {said} is too small: must be {op} {low}" + (f" ({why})" if why else ""))
    if high is not None and value > high:
        raise ValueError(f"{name} {said} is too large: must be <= {high}" + (f" ({why})" if why else ""))


def check_int(name: str, value, low: int | None = None, high: int | None = None,
              why: str | None = None, shown: str | None = None) -> int:
    """An integer (``bool`` is not one) with ``low <= value <= high``. ``shown``: how a refusal
    names the value (the text the user typed; default its ``repr``)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, not {type(value).__name__} {value!r}")
    value = int(value)
    _range(name, value, low, high, why, shown=shown)
    return value


def check_number(name: str, value, low: float | None = None, high: float | None = None,
                 why: str | None = None, low_open: bool = False, shown: str | None = None) -> float:
    """A finite real number with ``low <= value <= high`` (``low < value`` with ``low_open``).
    ``shown``: how a refusal names the value (the text the user typed; default its ``repr``)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number, not {type(value).__name__} {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"{name} {repr(value) if shown is None else shown} must be a finite number")
    _range(name, value, low, high, why, low_open, shown)
    return float(value)


def check_bytes(name: str, value, low: int = 1, high: float = 2 ** 60,
                why: str | None = "larger sizes are not meaningful on one wafer") -> int:
    """A whole number of bytes (an integral float such as ``1e9`` is accepted)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number of bytes, not {type(value).__name__} {value!r}")
    if not math.isfinite(value) or value != int(value):
        raise ValueError(f"{name} {value!r} must be a whole number of bytes")
    value = int(value)
    _range(name, value, low, int(high), why)
    return value


def check_name(name: str, value) -> str:
    """A non-empty string without surrounding white space."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a string, not {type(value).__name__} {value!r}")
    if not value.strip():
        raise ValueError(f"{name} {value!r} must not be empty")
    return value.strip()


def check_choice(name: str, value, choices) -> str:
    """One of ``choices`` (strings; compared case-insensitively, returned as listed)."""
    check_name(name, value)
    by_lower = {c.lower(): c for c in choices}
    try:
        return by_lower[value.strip().lower()]
    except KeyError:
        raise ValueError(f"{name} {value!r} is unknown; known: {', '.join(choices)}") from None


def check_unique(name: str, values) -> list:
    """``values`` as a list, refusing duplicates (naming the first one repeated)."""
    out, seen = [], set()
    for v in values:
        if v in seen:
            raise ValueError(f"{name} names {v!r} twice")
        seen.add(v)
        out.append(v)
    return out
