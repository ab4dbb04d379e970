"""Element adders: fp16, bf16, fp32 (IEEE-754 binary add) and int32 (wrapping), fully pipelined.

:class:`ElementAdder` adds one element per cycle, :class:`VectorAdder` ``lanes`` elements per
beat. Both have the ports ``a``, ``b`` (operands), ``en`` (advance) and ``y`` (sum) and an
attribute ``latency``: every cycle with ``en`` high the pipeline advances by one stage and
takes a new operand pair; with ``en`` low every stage holds. ``y`` shows ``a + b`` of the pair
presented ``latency`` advancing cycles earlier (``y`` is a register output; after reset the
pipeline holds ``0 + 0`` bubbles, so ``y`` reads 0 until the first pair comes out).

Pipeline depth (``latency``, cycles)
------------------------------------
========  =======  =============================================================
dtype     latency  stages
========  =======  =============================================================
int32     1        wrapping add -> ``y``
fp16      3        unpack, compare, swap, align (sticky) | add/sub, LZC,
bf16      3        normalize (subnormal-limited shift) | round to nearest even,
fp32      3        pack, overflow -> inf, special values -> ``y``
========  =======  =============================================================

Floating-point semantics (one parametric core over ``exp_bits``/``man_bits``)
---------------------------------------------------------------------------
* IEEE-754 binary addition, round to nearest, ties to even; subnormal inputs and outputs are
  exact (no flush to zero).
* An exact zero sum is ``+0`` unless both operands are ``-0`` (so ``+0 + -0 = +0`` and
  ``x + -x = +0``).
* ``±inf + finite = ±inf``, ``inf + inf = inf`` (same sign), ``+inf + -inf = NaN``.
* Any NaN operand (quiet or signalling, any payload) gives the canonical quiet NaN:
  sign 0, exponent all ones, quiet bit set, payload 0 (fp16 ``0x7E00``, bf16 ``0x7FC0``,
  fp32 ``0x7FC00000``); see :mod:`fred.hdl.dtypes`.
* A sum whose rounded magnitude exceeds the largest finite value gives ``±inf``.

The datapath keeps the significands with three extra bits (guard, round, sticky). The
smaller operand is aligned by a right shift whose shifted-out bits are OR-ed into the lowest
bit; that is exact for rounding both for addition and for subtraction (at most one
normalizing left shift follows a lossy alignment). The normalizing left shift is limited so
that the exponent never drops below the subnormal exponent, and the packed result
``((e - 1) << man_bits) + significand`` lets a rounding carry move into the exponent (and a
subnormal round up into the smallest normal) for free.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .dtypes import ElemType, get_dtype
from .params import check_lanes, rejecting

__all__ = ["ElementAdder", "VectorAdder", "adder_latency", "ADDER_FAULTS"]

#: build-time faults (tests only: each bench must catch them). ``"round-bit"``: the float
#: rounding ignores the kept LSB, so an exact tie rounds down (to odd) instead of to even.
ADDER_FAULTS = (None, "round-bit")

_LATENCY = {"int32": 1, "fp16": 3, "bf16": 3, "fp32": 3}


def adder_latency(dtype) -> int:
    """Pipeline depth in cycles of :class:`ElementAdder` for ``dtype``."""
    return _LATENCY[get_dtype(dtype).name]


def _clz(m, v, name):
    """Number of leading zeros of ``v`` (``len(v)`` when ``v == 0``), as a comb signal."""
    n = len(v)
    lz = Signal(range(n + 1), name=name)
    expr = Const(n, len(lz))
    for i in range(n):  # LSB first: the MSB's mux ends up outermost, i.e. highest priority
        expr = Mux(v[i], n - 1 - i, expr)
    m.d.comb += lz.eq(expr)
    return lz


class ElementAdder(wiring.Component):
    """``y = a + b`` for one element of type ``dtype`` (see the module docstring).

    Ports: ``a``, ``b``: ``In(width)``; ``en``: ``In(1)``; ``y``: ``Out(width)``.
    Attributes: ``dtype`` (:class:`~fred.hdl.dtypes.ElemType`), ``latency`` (cycles: 1 for
    int32, 3 for fp16/bf16/fp32). Every cycle with ``en`` high the pipeline advances one stage
    and accepts a new operand pair; with ``en`` low it holds. ``y`` shows ``a + b`` of the pair
    presented ``latency`` advancing cycles earlier.
    """

    def __init__(self, dtype, *, fault=None):
        with rejecting(self):
            self.dtype = get_dtype(dtype)
            if fault not in ADDER_FAULTS:
                raise ValueError(f"unknown adder fault {fault!r}; known: round-bit")
        self.fault = fault
        self.latency = adder_latency(self.dtype)
        w = self.dtype.width
        super().__init__({"a": In(w), "b": In(w), "en": In(1), "y": Out(w)})

    def elaborate(self, platform):
        m = Module()
        if self.dtype.kind == "int":
            with m.If(self.en):
                m.d.sync += self.y.eq(self.a + self.b)
        else:
            self._float(m)
        return m

    def _float(self, m):
        """The three pipeline stages of the floating-point add (see the module docstring)."""
        r1 = self._float_align(m)
        r2 = self._float_add(m, r1)
        self._float_round(m, r2)

    def _float_align(self, m):
        """Stage 1: unpack, specials, compare/swap, align; returns the stage-1 registers."""
        t: ElemType = self.dtype
        E, M, W = t.exp_bits, t.man_bits, t.width
        N = M + 4                    # significand (hidden + M) plus guard, round, sticky
        emax = t.exp_max
        a, b = self.a, self.b

        def unpack(x, tag):
            e = x[M:M + E]
            f = x[:M]
            return dict(
                s=x[W - 1], e=e, f=f, mag=x[:W - 1],
                nan=(e == emax) & f.any(), inf=(e == emax) & ~f.any(),
                # effective exponent (subnormals live at exponent 1) and significand
                ee=Mux(e == 0, 1, e), sig=Cat(f, e.any()))

        ua, ub = unpack(a, "a"), unpack(b, "b")
        swap = Signal(name="s1_swap")
        m.d.comb += swap.eq(ub["mag"] > ua["mag"])
        ex = Signal(E, name="s1_ex")
        ey = Signal(E, name="s1_ey")
        sx_sig = Signal(M + 1, name="s1_sx")
        sy_sig = Signal(M + 1, name="s1_sy")
        m.d.comb += [
            ex.eq(Mux(swap, ub["ee"], ua["ee"])), ey.eq(Mux(swap, ua["ee"], ub["ee"])),
            sx_sig.eq(Mux(swap, ub["sig"], ua["sig"])), sy_sig.eq(Mux(swap, ua["sig"], ub["sig"])),
        ]
        d = Signal(E, name="s1_d")
        m.d.comb += d.eq(ex - ey)
        dc = Signal(range(N + 1), name="s1_dc")          # shifts >= N lose everything
        m.d.comb += dc.eq(Mux(d >= N, N, d[:len(dc)]))
        wide = Signal(2 * N, name="s1_wide")             # [N:] aligned y, [:N] shifted out
        m.d.comb += wide.eq(Cat(Const(0, N + 3), sy_sig) >> dc)
        y_al = Signal(N, name="s1_yal")
        m.d.comb += y_al.eq(Cat(wide[N] | wide[:N].any(), wide[N + 1:]))

        r1_x = Signal(N, name="r1_x")
        r1_y = Signal(N, name="r1_y")
        r1_e = Signal(E, name="r1_e", init=1)           # reset state: a bubble adding 0 + 0
        r1_sub = Signal(name="r1_sub")
        r1_sign = Signal(name="r1_sign")                 # sign of the larger magnitude
        r1_zsign = Signal(name="r1_zsign")               # sign of an exact-zero sum
        r1_nan = Signal(name="r1_nan")
        r1_inf = Signal(name="r1_inf")
        with m.If(self.en):
            m.d.sync += [
                r1_x.eq(Cat(Const(0, 3), sx_sig)),
                r1_y.eq(y_al),
                r1_e.eq(ex),
                r1_sub.eq(ua["s"] ^ ub["s"]),
                r1_sign.eq(Mux(swap, ub["s"], ua["s"])),
                r1_zsign.eq(ua["s"] & ub["s"]),
                r1_nan.eq(ua["nan"] | ub["nan"]
                          | (ua["inf"] & ub["inf"] & (ua["s"] ^ ub["s"]))),
                r1_inf.eq(ua["inf"] | ub["inf"]),
            ]
        return dict(x=r1_x, y=r1_y, e=r1_e, sub=r1_sub, sign=r1_sign, zsign=r1_zsign,
                    nan=r1_nan, inf=r1_inf)

    def _float_add(self, m, r1):
        """Stage 2: add/subtract, leading-zero count, normalize; returns the stage-2 registers."""
        E, M = self.dtype.exp_bits, self.dtype.man_bits
        N = M + 4
        r1_x, r1_y, r1_e, r1_sub = r1["x"], r1["y"], r1["e"], r1["sub"]
        total = Signal(N + 1, name="s2_sum")
        m.d.comb += total.eq(Mux(r1_sub, r1_x - r1_y, r1_x + r1_y))
        carry = total[N]
        low = total[:N]
        lz = _clz(m, low, "s2_lz")
        em1 = Signal(E, name="s2_em1")                   # largest shift keeping e >= 1
        m.d.comb += em1.eq(r1_e - 1)
        sh = Signal(range(N + 1), name="s2_sh")
        m.d.comb += sh.eq(Mux(lz < em1, lz, em1))
        shifted = Signal(N, name="s2_shifted")
        m.d.comb += shifted.eq(low << sh)
        n_sig = Signal(N, name="s2_norm")
        n_e = Signal(E + 1, name="s2_e")                 # 1 .. emax
        with m.If(carry):
            m.d.comb += [n_sig.eq(Cat(total[1] | total[0], total[2:])), n_e.eq(r1_e + 1)]
        with m.Else():
            m.d.comb += [n_sig.eq(shifted), n_e.eq(r1_e - sh)]

        r2_sig = Signal(N, name="r2_sig")
        r2_e = Signal(E + 1, name="r2_e", init=1)
        r2_zero = Signal(name="r2_zero", init=1)         # reset state: +0 result
        r2_sign = Signal(name="r2_sign")
        r2_zsign = Signal(name="r2_zsign")
        r2_nan = Signal(name="r2_nan")
        r2_inf = Signal(name="r2_inf")
        with m.If(self.en):
            m.d.sync += [
                r2_sig.eq(n_sig), r2_e.eq(n_e), r2_zero.eq(~total.any()),
                r2_sign.eq(r1["sign"]), r2_zsign.eq(r1["zsign"]), r2_nan.eq(r1["nan"]),
                r2_inf.eq(r1["inf"]),
            ]
        return dict(sig=r2_sig, e=r2_e, zero=r2_zero, sign=r2_sign, zsign=r2_zsign, nan=r2_nan,
                    inf=r2_inf)

    def _float_round(self, m, r2):
        """Stage 3: round to nearest even, pack, overflow, specials -> ``y``."""
        t: ElemType = self.dtype
        E, M, W = t.exp_bits, t.man_bits, t.width
        emax = t.exp_max
        r2_sig, r2_e, r2_sign = r2["sig"], r2["e"], r2["sign"]
        keep = r2_sig[3:]                                # hidden bit + M fraction bits
        up = r2_sig[2] & (r2_sig[1] | r2_sig[0] | keep[0])
        if self.fault == "round-bit":              # mutant: ties no longer round to even
            up = r2_sig[2] & (r2_sig[1] | r2_sig[0])
        packed = Signal(E + M + 1, name="s3_packed")
        m.d.comb += packed.eq(((r2_e - 1) << M) + keep + up)
        ovf = Signal(name="s3_ovf")
        m.d.comb += ovf.eq(packed >= (emax << M))
        inf_bits = Const(emax << M, W - 1)
        res = Signal(W, name="s3_res")
        with m.If(r2["nan"]):
            m.d.comb += res.eq(t.canonical_nan)
        with m.Elif(r2["inf"]):
            m.d.comb += res.eq(Cat(inf_bits, r2_sign))
        with m.Elif(r2["zero"]):
            m.d.comb += res.eq(Cat(Const(0, W - 1), r2["zsign"]))
        with m.Elif(ovf):
            m.d.comb += res.eq(Cat(inf_bits, r2_sign))
        with m.Else():
            m.d.comb += res.eq(Cat(packed[:W - 1], r2_sign))
        with m.If(self.en):
            m.d.sync += self.y.eq(res)


class VectorAdder(wiring.Component):
    """``lanes`` :class:`ElementAdder` side by side: ``y[i] = a[i] + b[i]`` per beat.

    Ports: ``a``, ``b``: ``In(ArrayLayout(width, lanes))``; ``en``: ``In(1)``;
    ``y``: ``Out(ArrayLayout(width, lanes))``. ``latency`` is the element adder's.
    """

    def __init__(self, dtype, lanes):
        with rejecting(self):
            self.dtype = get_dtype(dtype)
            self.lanes = check_lanes(lanes)
        self.latency = adder_latency(self.dtype)
        lay = data.ArrayLayout(self.dtype.width, lanes)
        super().__init__({"a": In(lay), "b": In(lay), "en": In(1), "y": Out(lay)})

    def elaborate(self, platform):
        m = Module()
        for i in range(self.lanes):
            add = m.submodules[f"lane{i}"] = ElementAdder(self.dtype)
            m.d.comb += [add.a.eq(self.a[i]), add.b.eq(self.b[i]), add.en.eq(self.en),
                         self.y[i].eq(add.y)]
        return m
