"""Typed, bounded command-line options: every value is checked while the command line is parsed,
before any work starts, with the one wording of :mod:`fred.contract.checks`.

Each factory returns an ``argparse`` ``type=`` callable bound to the option's name, so a bad
value gives one line naming the option and the value::

    p.add_argument("--lanes", type=options.integer("--lanes", 1, MAX_LANES, why="..."))
    fred: error: --lanes 100000 is too large: must be <= 1024 (...)

:class:`ListOption` is an ``argparse`` action for options that take a comma-separated list and
may be repeated (``-w a,b -w c``): every item is converted and checked, duplicates are refused.
Cross-option rules (an option that only applies with another one) are checked by the command at
the start of ``run``, also before any work; :func:`refuse_unused` words them.
"""

from __future__ import annotations

import argparse
import math
import re

from fred.contract.checks import check_bytes, check_int, check_name, check_number

__all__ = ["integer", "number", "Typed", "size", "name", "choice", "ListOption", "parse_size",
           "refuse_unused", "shown", "SIZE_UNITS", "MAX_BYTES"]

#: size suffixes (case-insensitive): SI (k, M, G, T = 1e3..1e12) and binary (KiB..TiB)
SIZE_UNITS = {
    "": 1, "b": 1, "byte": 1, "bytes": 1,
    "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9, "gb": 10**9, "t": 10**12, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
}
#: largest size a command accepts: 1 PiB per NPU, ~12,000 times an 80 GB HBM; beyond it the
#: figures are not meaningful for one wafer (and float times lose their precision)
MAX_BYTES = 2**50

_SIZE = re.compile(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*")


class _Type:
    """An argparse ``type=`` callable whose error message argparse prints as is."""

    def __init__(self, option, convert, what, low=None, high=None, low_open=False):
        self.option, self.convert, self.__name__ = option, convert, what
        #: the range (documentation, and the fuzz tests' boundary values)
        self.low, self.high, self.low_open = low, high, low_open

    def __call__(self, text):
        from fred import FredError

        try:
            return self.convert(text)
        except (TypeError, ValueError, FredError) as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None


#: digits of the longest number taken (more is far beyond every range, and Python refuses to
#: convert more than 4,300 digits)
MAX_DIGITS = 100
_FLOAT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[+-]?(?:inf|infinity|nan)", re.I)


def shown(text, most: int = 40) -> str:
    """``repr(text)``, shortened to about ``most`` characters (the length said) for long text."""
    r = repr(text)
    return r if len(r) <= most else f"{r[:most - 4]}...{r[0]} ({len(str(text)):,} characters)"


def _parse_int(option, text) -> int:
    s = str(text).strip()
    if not re.fullmatch(r"[+-]?[0-9]+", s, re.ASCII):
        raise ValueError(f"{option} {shown(text)} is not a whole number")
    if len(s.lstrip("+-")) > MAX_DIGITS:
        raise ValueError(f"{option} {shown(text)} is too large")
    return int(s)


def _parse_float(option, text) -> float:
    s = str(text).strip()
    if not _FLOAT.fullmatch(s) or len(s) > MAX_DIGITS + 10:  # ASCII digits only, no '1_000'
        raise ValueError(f"{option} {shown(text)} is not a number")
    return float(s)


def integer(option: str, low: int | None = None, high: int | None = None, why: str | None = None):
    """Whole number with ``low <= value <= high``."""
    return _Type(option, lambda t: check_int(option, _parse_int(option, t), low, high, why, t.strip()),
                 "integer", low, high)


class Typed(float):
    """A number from the command line that prints as it was typed (``5``, ``1e-7``; not ``5.0``,
    ``1e-07``): ``str``, ``repr`` and the ``g`` and empty format specs give the text, so a refusal
    made after parsing names the value the user gave. Arithmetic gives plain floats."""

    def __new__(cls, value, text):
        self = super().__new__(cls, value)
        self.text = str(text).strip()
        return self

    def __repr__(self):
        return self.text

    __str__ = __repr__

    def __format__(self, spec):
        return self.text if spec in ("", "g") else super().__format__(spec)

    def __reduce__(self):
        return (Typed, (float(self), self.text))


def number(option: str, low: float | None = None, high: float | None = None, why: str | None = None,
           low_open: bool = False):
    """Finite real number with ``low <= value <= high`` (``low < value`` with ``low_open``), as a
    :class:`Typed` float."""
    return _Type(option, lambda t: Typed(check_number(option, _parse_float(option, t), low, high, why, low_open,
                                                      t.strip()), t),
                 "number", low, high, low_open)


def parse_size(text, option: str = "size", low: int = 1, high: int = MAX_BYTES) -> int:
    """``"1GiB"`` -> 1073741824, ``"512MB"`` -> 512000000, ``"1e9"`` -> 1000000000 (bytes).

    A whole number of bytes between ``low`` and ``high``: ``"0.5"``, ``"1e30GiB"`` and ``"inf"``
    are refused (``ValueError`` naming ``option`` and the text). Numbers (int, float) are taken
    as bytes.
    """
    if isinstance(text, bool):
        raise TypeError(f"{option} must be a size such as 1GiB, not bool {text!r}")
    if isinstance(text, (int, float)):
        value = text
    elif isinstance(text, str):
        m = _SIZE.fullmatch(text)
        if not m or m.group(2).lower() not in SIZE_UNITS:
            raise ValueError(f"{option} {text!r} is not a size; expected e.g. 1GiB, 256MiB, 1e9, 64KB")
        value = float(m.group(1)) * SIZE_UNITS[m.group(2).lower()]
        if math.isfinite(value) and value == int(value):
            value = int(value)
    else:
        raise TypeError(f"{option} must be a size such as 1GiB, not {type(text).__name__} {text!r}")
    if not isinstance(value, bool) and isinstance(value, (int, float)) and value > high:
        raise ValueError(f"{option} {text!r} is too large: must be <= {high} bytes ({high / 2**50:g} PiB)")
    try:
        return check_bytes(option, value, low, high, why=None)
    except ValueError as exc:
        if isinstance(text, str):  # name the text the user typed, not the converted value
            raise ValueError(str(exc).replace(f"{option} {value!r}", f"{option} {text!r}", 1)) from None
        raise


def size(option: str, low: int = 1, high: int = MAX_BYTES):
    """A byte size (:func:`parse_size`)."""
    return _Type(option, lambda t: parse_size(t, option, low, high), "size", low, high)


def name(option: str):
    """A non-empty string (surrounding white space removed)."""
    return _Type(option, lambda t: check_name(option, t), "name")


def choice(option: str, canonical):
    """A name turned into its canonical form by ``canonical(text)`` (which raises ValueError for
    an unknown one); ``canonical`` may import lazily."""
    def convert(t):
        from fred import FredError

        check_name(option, t)
        try:
            return canonical(t)
        except (ValueError, FredError) as exc:
            if "," in str(t):   # a list where one name goes (options taking several use ListOption)
                raise ValueError(f"{option} takes one name, not a list: {shown(t)}") from None
            msg = str(exc)
            raise ValueError(msg if msg.startswith(option) else f"{option}: {msg}") from None
    return _Type(option, convert, "choice")


class ListOption(argparse.Action):
    """Comma-separated values, the option repeatable; items converted by ``item`` (a ``type=``
    callable from this module), duplicates refused. The result is a list in the given order."""

    #: given several times, the items add up (fred.cli.Parser refuses other options given twice)
    repeatable = True

    def __init__(self, option_strings, dest, item=None, **kw):
        self.item = item
        super().__init__(option_strings, dest, **kw)

    def __call__(self, parser, namespace, values, option_string=None):
        opt = max(self.option_strings, key=len) if self.option_strings else self.dest
        got = list(getattr(namespace, self.dest, None) or [])
        parts = [p.strip() for p in str(values).split(",")]
        if not any(parts):
            parser.error(f"{opt} {values!r} names nothing")
        if not all(parts):
            parser.error(f"{opt} {values!r} has an empty item")
        for part in parts:
            try:
                v = self.item(part) if self.item else part
            except argparse.ArgumentTypeError as exc:
                parser.error(str(exc))
            if v in got:
                parser.error(f"{opt} names {part!r} twice")
            got.append(v)
        setattr(namespace, self.dest, got)


def refuse_unused(option: str, value, needs: str) -> None:
    """``ValueError`` when ``option`` was given (``value`` not None/False) but does not apply:
    ``needs`` says when it does (``"only applies with --network"``)."""
    if value is not None and value is not False and value != [] and value != ():  # 0 is a value
        if isinstance(value, (list, tuple)):
            value = ",".join(str(v) for v in value)
        shown = "" if value is True else f" {value!r}"
        raise ValueError(f"{option}{shown} {needs}")
