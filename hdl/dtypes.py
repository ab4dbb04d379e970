"""Element types carried in the lanes of a beat: the contract between RTL, golden models and CLI.

Pure Python, no Amaranth import.

==========  =====  ========  ========  ======  ===============
name        width  exp_bits  man_bits  kind    canonical NaN
==========  =====  ========  ========  ======  ===============
``fp16``    16     5         10        float   ``0x7E00``
``bf16``    16     8         7         float   ``0x7FC0``
``fp32``    32     8         23        float   ``0x7FC00000``
``int32``   32     0         0         int     ``None``
==========  =====  ========  ========  ======  ===============

Floating-point types are IEEE-754 binary formats (1 sign bit, ``exp_bits`` biased exponent
bits, ``man_bits`` stored fraction bits). Any NaN result is replaced by the *canonical quiet
NaN*: sign 0, all-ones exponent, fraction MSB (the quiet bit) set, zero payload.
``int32`` is two's complement and adds wrap modulo 2**32.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

__all__ = ["ElemType", "DTYPES", "get_dtype", "dtype_names"]


@dataclass(frozen=True)
class ElemType:
    """One element type.

    ``name``: ``fp16``, ``bf16``, ``fp32`` or ``int32``; ``width``: bits per element;
    ``exp_bits``/``man_bits``: exponent and stored-fraction widths (0 for integers);
    ``kind``: ``'float'`` or ``'int'``; ``canonical_nan``: the NaN bit pattern every NaN
    result is replaced with (``None`` for integers).
    """

    name: str
    width: int
    exp_bits: int
    man_bits: int
    kind: str
    canonical_nan: Optional[int] = None

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def bias(self) -> int:
        """Exponent bias (0 for integers)."""
        return (1 << (self.exp_bits - 1)) - 1 if self.is_float else 0

    @property
    def mask(self) -> int:
        """All ``width`` bits set."""
        return (1 << self.width) - 1

    @property
    def sign_bit(self) -> int:
        return 1 << (self.width - 1)

    @property
    def exp_max(self) -> int:
        """The all-ones biased exponent (infinities and NaNs)."""
        return (1 << self.exp_bits) - 1

    @property
    def pos_inf(self) -> Optional[int]:
        return self.exp_max << self.man_bits if self.is_float else None

    @property
    def neg_inf(self) -> Optional[int]:
        return (self.sign_bit | self.pos_inf) if self.is_float else None

    @property
    def max_finite(self) -> Optional[int]:
        """Largest finite positive value's bit pattern."""
        return ((self.exp_max - 1) << self.man_bits) | ((1 << self.man_bits) - 1) \
            if self.is_float else None

    def is_nan_bits(self, bits: int) -> bool:
        if not self.is_float:
            return False
        bits &= self.mask
        return (bits >> self.man_bits) & self.exp_max == self.exp_max \
            and bits & ((1 << self.man_bits) - 1) != 0

    def __str__(self):
        return self.name


def _float(name, exp_bits, man_bits):
    width = 1 + exp_bits + man_bits
    nan = (((1 << exp_bits) - 1) << man_bits) | (1 << (man_bits - 1))
    return ElemType(name, width, exp_bits, man_bits, "float", nan)


DTYPES = {
    "fp16": _float("fp16", 5, 10),
    "bf16": _float("bf16", 8, 7),
    "fp32": _float("fp32", 8, 23),
    "int32": ElemType("int32", 32, 0, 0, "int", None),
}

assert DTYPES["fp16"].canonical_nan == 0x7E00
assert DTYPES["bf16"].canonical_nan == 0x7FC0
assert DTYPES["fp32"].canonical_nan == 0x7FC00000


def dtype_names() -> tuple:
    return tuple(DTYPES)


def get_dtype(name) -> ElemType:
    """Return the :class:`ElemType` called ``name`` (an ``ElemType`` is returned as is).

    Raises ``ValueError("unknown element type 'x'; known: fp16, bf16, fp32, int32")``.
    """
    if isinstance(name, ElemType):
        return name
    try:
        return DTYPES[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown element type {str(name)!r}; known: "
                         + ", ".join(DTYPES)) from None
