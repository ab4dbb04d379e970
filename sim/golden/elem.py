"""Golden element adds: the oracle every bench compares the RTL against, bit for bit.

Plain Python + numpy (+ ml_dtypes for bfloat16); no simulator or Amaranth imports.

Everything works on *bit patterns*: unsigned integers holding the raw encoding of an element
(``0x3C00`` is fp16 1.0). Arrays of any integer dtype (or Python ints / lists) go in; results
come back as ``np.uint32`` arrays of the same (broadcast) shape, for every element type.

Semantics (identical to :mod:`fred.hdl.adders`):

* ``fp16``, ``bf16``, ``fp32``: IEEE-754 addition, round to nearest even, subnormals kept,
  ``+0 + -0 = +0``, ``x + -x = +0``, ``+inf + -inf = NaN``, overflow to ``±inf``. Every NaN
  result is replaced by the canonical quiet NaN (:attr:`fred.hdl.dtypes.ElemType.canonical_nan`:
  fp16 ``0x7E00``, bf16 ``0x7FC0``, fp32 ``0x7FC00000``).
* ``int32``: two's complement, wrapping modulo 2**32.

How the float adds are computed: fp32 with numpy ``float32`` (IEEE single add). fp16 with numpy
``float16`` and bf16 with ``ml_dtypes.bfloat16``; both evaluate the add in float32 and round the
result once more to the narrow type, which is still correctly rounded: float32's 24-bit
significand is at least 2p + 2 bits for p = 11 (fp16) and p = 8 (bf16), so the double rounding
is innocuous, and the float32 exponent range covers both narrow ranges (bf16 shares it, so a
bf16 overflow is also a float32 overflow). :func:`add_exact` is an independent, slow,
pure-integer implementation used by the tests to cross-check this claim.

Operand generators: :func:`special_values` and :func:`random_operands` (a seeded mix of uniform
bit patterns, subnormals, signed zeros, infinities, NaNs with payloads, overflowing sums,
exact and near cancellation, close exponents).
"""

from __future__ import annotations

import numpy as np

from fred.hdl.dtypes import ElemType, get_dtype

__all__ = ["add", "add_exact", "canonicalize", "is_nan", "random_operands", "special_values",
           "to_values", "from_values"]


def _np_float_type(t: ElemType):
    if t.name == "fp16":
        return np.float16, np.uint16
    if t.name == "fp32":
        return np.float32, np.uint32
    if t.name == "bf16":
        import ml_dtypes

        return ml_dtypes.bfloat16, np.uint16
    raise ValueError(f"element type {t.name!r} is not a float type")


def _as_bits(t: ElemType, x) -> np.ndarray:
    """``x`` (ints, lists, arrays) as an ``np.uint64`` array masked to the element width."""
    arr = np.asarray(x)
    if arr.dtype.kind not in "iub":
        if arr.dtype.kind == "O" or arr.size == 0:
            arr = arr.astype(np.int64) if arr.size else arr.astype(np.uint64)
        else:
            raise TypeError(f"bit patterns must be integers, got dtype {arr.dtype}")
    return arr.astype(np.uint64) & np.uint64(t.mask)


def is_nan(dtype_name, bits) -> np.ndarray:
    """Boolean array: which ``bits`` encode a NaN (always False for int32)."""
    t = get_dtype(dtype_name)
    x = _as_bits(t, bits)
    if not t.is_float:
        return np.zeros(x.shape, dtype=bool)
    exp = (x >> np.uint64(t.man_bits)) & np.uint64(t.exp_max)
    frac = x & np.uint64((1 << t.man_bits) - 1)
    return (exp == t.exp_max) & (frac != 0)


def canonicalize(dtype_name, bits) -> np.ndarray:
    """``bits`` as ``np.uint32`` with every NaN replaced by the canonical quiet NaN."""
    t = get_dtype(dtype_name)
    x = _as_bits(t, bits)
    if t.is_float:
        x = np.where(is_nan(t, x), np.uint64(t.canonical_nan), x)
    return x.astype(np.uint32)


def to_values(dtype_name, bits) -> np.ndarray:
    """Bit patterns -> numpy values (float16 / bfloat16 / float32 / int32)."""
    t = get_dtype(dtype_name)
    x = _as_bits(t, bits)
    if not t.is_float:
        return x.astype(np.uint32).view(np.int32)
    ftype, utype = _np_float_type(t)
    return x.astype(utype).view(ftype)


def from_values(dtype_name, values) -> np.ndarray:
    """Numbers -> bit patterns (``np.uint32``), converting with round to nearest even."""
    t = get_dtype(dtype_name)
    if not t.is_float:
        v = np.asarray(values, dtype=np.int64)
        return (v & t.mask).astype(np.uint32)
    ftype, utype = _np_float_type(t)
    with np.errstate(all="ignore"):
        v = np.asarray(values, dtype=np.float64).astype(ftype)
    return v.view(utype).astype(np.uint32)


def add(dtype_name, a_bits, b_bits) -> np.ndarray:
    """Element-wise ``a + b`` on bit patterns; returns ``np.uint32`` bit patterns.

    Vectorized and broadcasting. NaN results are canonicalized; int32 wraps.
    """
    t = get_dtype(dtype_name)
    a = _as_bits(t, a_bits)
    b = _as_bits(t, b_bits)
    if not t.is_float:
        return ((a + b) & np.uint64(t.mask)).astype(np.uint32)
    ftype, utype = _np_float_type(t)
    fa = a.astype(utype).view(ftype)
    fb = b.astype(utype).view(ftype)
    with np.errstate(all="ignore"):
        s = np.asarray(fa + fb, dtype=ftype)
    return canonicalize(t, s.view(utype))


# ---- independent exact reference (slow, scalar, pure integers) ----------------------------

def _decode(t: ElemType, x: int):
    """-> ('nan'|'inf'|'num', sign, integer significand, exponent of its lsb)."""
    s = x >> (t.width - 1)
    e = (x >> t.man_bits) & t.exp_max
    f = x & ((1 << t.man_bits) - 1)
    if e == t.exp_max:
        return ("nan" if f else "inf"), s, 0, 0
    if e == 0:
        return "num", s, f, 1 - t.bias - t.man_bits
    return "num", s, f | (1 << t.man_bits), e - t.bias - t.man_bits


def add_exact(dtype_name, a: int, b: int) -> int:
    """``a + b`` for one pair of bit patterns, computed with exact integer arithmetic.

    Independent of numpy: the exact sum ``n * 2**k`` is rounded once to nearest even. Used by
    the tests to cross-check :func:`add`; too slow for benches.
    """
    t = get_dtype(dtype_name)
    a, b = int(a) & t.mask, int(b) & t.mask
    if not t.is_float:
        return (a + b) & t.mask
    ka, sa, ma, ea = _decode(t, a)
    kb, sb, mb, eb = _decode(t, b)
    if ka == "nan" or kb == "nan" or (ka == kb == "inf" and sa != sb):
        return t.canonical_nan
    if ka == "inf":
        return a
    if kb == "inf":
        return b
    k = min(ea, eb)
    n = (-1) ** sa * (ma << (ea - k)) + (-1) ** sb * (mb << (eb - k))
    if n == 0:
        return (sa & sb) << (t.width - 1)
    sign = 1 if n < 0 else 0
    n = abs(n)
    # value = n * 2**k; choose the result exponent (of the lsb) q so that the significand
    # fits man_bits + 1 bits, but not below the subnormal lsb exponent
    emin_lsb = 1 - t.bias - t.man_bits
    q = max(k + n.bit_length() - (t.man_bits + 1), emin_lsb)
    if q > k:
        shift = q - k
        keep, rem = n >> shift, n & ((1 << shift) - 1)
        half = 1 << (shift - 1)
        if rem > half or (rem == half and keep & 1):
            keep += 1
        if keep >> (t.man_bits + 1):  # rounding carried out of the significand
            keep >>= 1
            q += 1
    else:
        keep = n << (k - q)
    if keep >> t.man_bits:  # normal
        e = q + t.bias + t.man_bits
        if e >= t.exp_max:
            return (sign << (t.width - 1)) | t.pos_inf
        return (sign << (t.width - 1)) | (e << t.man_bits) | (keep & ((1 << t.man_bits) - 1))
    return (sign << (t.width - 1)) | keep  # subnormal (q == emin_lsb)


# ---- operand generators ----------------------------------------------------------------------

def special_values(dtype_name) -> np.ndarray:
    """The interesting encodings of a type (``np.uint32``), both signs where it matters.

    Floats: ±0, ±smallest/largest subnormal, ±smallest normal, ±1, ±1.5, ±largest finite, ±inf,
    the canonical quiet NaN, a negative quiet NaN, quiet and signalling NaNs with payloads.
    int32: 0, ±1, ±2, INT32_MAX, INT32_MIN, INT32_MIN + 1, 0x55555555, 0xAAAAAAAA.
    """
    t = get_dtype(dtype_name)
    if not t.is_float:
        vals = [0, 1, 0xFFFFFFFF, 2, 0xFFFFFFFE, 0x7FFFFFFF, 0x80000000, 0x80000001,
                0x55555555, 0xAAAAAAAA]
        return np.array(vals, dtype=np.uint32)
    M, S = t.man_bits, t.sign_bit
    fmask = (1 << M) - 1
    one = t.bias << M
    mags = [0, 1, fmask, 1 << M, one, one | (1 << (M - 1)), t.max_finite, t.pos_inf]
    vals = [v | s for v in mags for s in (0, S)]
    q = 1 << (M - 1)
    vals += [t.canonical_nan, t.canonical_nan | S, t.pos_inf | q | 1,   # quiet, payload
             t.pos_inf | 1, S | t.pos_inf | (fmask >> 1)]               # signalling NaNs
    return np.array(vals, dtype=np.uint32)


def _rand_float_fields(t: ElemType, rng, n, exp):
    """Random sign and fraction around given biased exponents."""
    sign = rng.integers(0, 2, n, dtype=np.uint64) << np.uint64(t.width - 1)
    frac = rng.integers(0, 1 << t.man_bits, n, dtype=np.uint64)
    return sign | (np.asarray(exp, dtype=np.uint64) << np.uint64(t.man_bits)) | frac


def random_operands(dtype_name, n: int, rng=None):
    """``(a, b)``: two ``np.uint32`` arrays of ``n`` operand bit patterns.

    ``rng`` is a ``np.random.Generator`` (or a seed). For floats each pair is drawn from one
    of these classes, in roughly these shares:

    * 25% uniform random bit patterns (both operands);
    * 20% close exponents (difference 0 .. man_bits + 4): alignment, carries, rounding ties;
    * 10% subnormal pairs and subnormal + smallest normals (gradual underflow both ways);
    * 10% near-maximum magnitudes of equal sign (sums that overflow, or round up, to inf);
    * 15% cancellation: (x, -x) exactly, and (x, -(x ± small)) close magnitudes;
    * 10% one operand from :func:`special_values` (±0, ±inf, NaNs with payloads), other random;
    * 10% both operands from :func:`special_values`.

    For int32: uniform, extremes around INT32_MIN/INT32_MAX (wrapping), x + -x, small values.
    """
    t = get_dtype(dtype_name)
    rng = np.random.default_rng(rng)
    spec = special_values(t).astype(np.uint64)
    mask = np.uint64(t.mask)
    if not t.is_float:
        a = rng.integers(0, 1 << 32, n, dtype=np.uint64)
        b = rng.integers(0, 1 << 32, n, dtype=np.uint64)
        cls = rng.integers(0, 5, n)
        ext = rng.choice(spec, n) + rng.integers(-3, 4, n).astype(np.uint64)
        a = np.where(cls == 1, ext, a)
        b = np.where(cls == 1, rng.choice(spec, n), b)
        b = np.where(cls == 2, (-a.astype(np.int64)).astype(np.uint64), b)   # x + -x
        small = rng.integers(-1000, 1000, (2, n)).astype(np.uint64)
        a = np.where(cls == 3, small[0], a)
        b = np.where(cls == 3, small[1], b)
        return (a & mask).astype(np.uint32), (b & mask).astype(np.uint32)

    M, emax = t.man_bits, t.exp_max
    S = np.uint64(t.sign_bit)
    cls = rng.choice(7, n, p=[0.25, 0.20, 0.10, 0.10, 0.15, 0.10, 0.10])
    # 0: uniform
    a = rng.integers(0, 1 << t.width, n, dtype=np.uint64)
    b = rng.integers(0, 1 << t.width, n, dtype=np.uint64)
    # 1: close exponents (finite)
    ea = rng.integers(1, emax, n)
    eb = np.clip(ea + rng.integers(-(M + 4), M + 5, n), 0, emax - 1)
    a1 = _rand_float_fields(t, rng, n, ea)
    b1 = _rand_float_fields(t, rng, n, eb)
    # 2: subnormals (exponent 0) with subnormals or the smallest normals
    a2 = _rand_float_fields(t, rng, n, np.zeros(n, dtype=np.int64))
    b2 = _rand_float_fields(t, rng, n, rng.integers(0, 3, n) * (rng.random(n) < 0.5))
    # 3: near-max, equal signs
    a3 = _rand_float_fields(t, rng, n, np.full(n, emax - 1) - rng.integers(0, 2, n))
    b3 = (_rand_float_fields(t, rng, n, np.full(n, emax - 1) - rng.integers(0, 3, n)) & ~S) \
        | (a3 & S)
    # 4: cancellation: exact (x, -x) or (x, -(x + delta)) with a small delta in ulps
    a4 = rng.integers(0, 1 << t.width, n, dtype=np.uint64)
    a4 = np.where(is_nan(t, a4) | ((a4 & ~S) == np.uint64(t.pos_inf)), a4 & ~np.uint64(
        emax << M), a4)   # keep x finite so x + -x is a real cancellation
    delta = np.where(rng.random(n) < 0.4, 0, rng.integers(-4, 5, n)).astype(np.int64)
    mag = ((a4 & ~S).astype(np.int64) + delta).clip(0, t.max_finite).astype(np.uint64)
    b4 = (mag | (a4 & S)) ^ S
    # 5: one special, one random (either order)
    s5 = rng.choice(spec, n)
    r5 = rng.integers(0, 1 << t.width, n, dtype=np.uint64)
    first = rng.random(n) < 0.5
    a5, b5 = np.where(first, s5, r5), np.where(first, r5, s5)
    # 6: two specials
    a6, b6 = rng.choice(spec, n), rng.choice(spec, n)
    for k, (xa, xb) in enumerate([(a1, b1), (a2, b2), (a3, b3), (a4, b4), (a5, b5),
                                  (a6, b6)], start=1):
        a = np.where(cls == k, xa, a)
        b = np.where(cls == k, xb, b)
    # NaN payload variety: some NaNs from above get random payloads and signs
    pay = rng.integers(1, 1 << M, n, dtype=np.uint64)
    nanify = rng.random(n) < 0.02
    a = np.where(nanify, (a & S) | np.uint64(t.pos_inf) | pay, a)
    return (a & mask).astype(np.uint32), (b & mask).astype(np.uint32)
