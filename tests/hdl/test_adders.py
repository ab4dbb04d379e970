"""Element adders (hdl/adders.py), element types (hdl/dtypes.py) and their oracle
(sim/golden/elem.py).

* the oracle against hand-written IEEE-754 cases and against an independent exact integer
  implementation;
* the operand generator covers every class it promises;
* ElementAdder / VectorAdder in amaranth.sim with ``en`` toggled randomly, bit-exact;
* the emitted Verilog of ElementAdder under cocotb + Verilator, >= 100,000 pairs per float type;
* every checker is shown to fail on a wrong result.

Seeds: ``FRED_SEED`` (else a fresh one, printed).
"""

from __future__ import annotations

import numpy as np
import pytest

from fred.hdl.dtypes import DTYPES, ElemType, get_dtype
from fred.sim.golden import elem as g
from fred.sim.toolchain import bench_seed

FLOATS = ("fp16", "bf16", "fp32")
ALL = FLOATS + ("int32",)


def _seed(request=None):
    seed = bench_seed()
    print(f"seed {seed} (rerun with FRED_SEED={seed})")
    return seed


# ---- element types -----------------------------------------------------------------------

def test_dtypes_table():
    assert list(DTYPES) == ["fp16", "bf16", "fp32", "int32"]
    fp16, bf16, fp32, i32 = (get_dtype(n) for n in ALL)
    assert (fp16.width, fp16.exp_bits, fp16.man_bits, fp16.kind) == (16, 5, 10, "float")
    assert (bf16.width, bf16.exp_bits, bf16.man_bits, bf16.kind) == (16, 8, 7, "float")
    assert (fp32.width, fp32.exp_bits, fp32.man_bits, fp32.kind) == (32, 8, 23, "float")
    assert (i32.width, i32.kind, i32.canonical_nan) == (32, "int", None)
    assert (fp16.canonical_nan, bf16.canonical_nan, fp32.canonical_nan) == \
        (0x7E00, 0x7FC0, 0x7FC00000)
    assert (fp16.pos_inf, fp16.max_finite, fp16.bias) == (0x7C00, 0x7BFF, 15)
    assert get_dtype(fp32) is fp32 and isinstance(fp32, ElemType)


@pytest.mark.parametrize("bad", ["x", "fp64", "FP16", "", None, 16])
def test_unknown_dtype_is_a_one_line_error(bad):
    with pytest.raises(ValueError) as e:
        get_dtype(bad)
    assert str(e.value) == f"unknown element type '{bad}'; known: fp16, bf16, fp32, int32"


# ---- the oracle ----------------------------------------------------------------------------

HAND = {
    "fp16": [
        (0x0001, 0x0001, 0x0002),   # smallest subnormals add exactly
        (0x03FF, 0x0001, 0x0400),   # largest subnormal + ulp = smallest normal
        (0x0400, 0x8001, 0x03FF),   # gradual underflow back into the subnormals
        (0x7BFF, 0x7BFF, 0x7C00),   # overflow -> +inf
        (0xFBFF, 0xFBFF, 0xFC00),   # overflow -> -inf
        (0x7BFF, 0x4C00, 0x7C00),   # max + half an ulp of max: tie rounds to even = inf
        (0x7BFF, 0x4BFF, 0x7BFF),   # just under the tie: stays at max
        (0x7BFF, 0x5000, 0x7C00),   # max + one ulp of max
        (0x3C00, 0xBC00, 0x0000),   # x + -x = +0
        (0xBC00, 0x3C00, 0x0000),
        (0x0000, 0x8000, 0x0000),   # +0 + -0 = +0
        (0x8000, 0x8000, 0x8000),   # -0 + -0 = -0
        (0x8000, 0x0001, 0x0001),
        (0x3C00, 0x3C00, 0x4000),   # 1 + 1 = 2
        (0x3C00, 0x1000, 0x3C00),   # 1 + 2^-11 (a tie) -> even (1.0)
        (0x3C01, 0x1000, 0x3C02),   # 1+ulp + 2^-11 (a tie) -> even (1+2ulp)
        (0x3C00, 0x1001, 0x3C01),   # just above the tie rounds up
        (0x3C00, 0x8C00, 0x3C00),   # 1 - 2^-12: tie between 1-2^-11 and 1 -> even (1.0)
        (0x3C00, 0x8C01, 0x3BFF),   # just past that tie: the number below 1
        (0x7C00, 0x3C00, 0x7C00),   # inf + 1 = inf
        (0xFC00, 0xFC00, 0xFC00),   # -inf + -inf = -inf
        (0x7C00, 0xFC00, 0x7E00),   # inf + -inf = canonical NaN
        (0x7C01, 0x3C00, 0x7E00),   # signalling NaN in -> canonical quiet NaN
        (0xFE55, 0x7C00, 0x7E00),   # negative NaN with payload -> canonical
        (0x3C00, 0x7FFF, 0x7E00),
    ],
    "bf16": [
        (0x0001, 0x0001, 0x0002),
        (0x007F, 0x0001, 0x0080),
        (0x7F7F, 0x7F7F, 0x7F80),   # overflow -> +inf
        (0x3F80, 0xBF80, 0x0000),
        (0x8000, 0x8000, 0x8000),
        (0x0000, 0x8000, 0x0000),
        (0x3F80, 0x3B80, 0x3F80),   # 1 + 2^-8: tie -> even
        (0x3F81, 0x3B80, 0x3F82),   # tie -> even, upward
        (0x7F80, 0xFF80, 0x7FC0),
        (0x7F81, 0x0000, 0x7FC0),
        (0xFFC1, 0xFFC1, 0x7FC0),
    ],
    "fp32": [
        (0x00000001, 0x00000001, 0x00000002),
        (0x007FFFFF, 0x00000001, 0x00800000),
        (0x7F7FFFFF, 0x7F7FFFFF, 0x7F800000),
        (0xFF7FFFFF, 0xFF7FFFFF, 0xFF800000),
        (0x3F800000, 0xBF800000, 0x00000000),
        (0x80000000, 0x80000000, 0x80000000),
        (0x00000000, 0x80000000, 0x00000000),
        (0x3F800000, 0x33800000, 0x3F800000),  # 1 + 2^-24: tie -> even
        (0x3F800001, 0x33800000, 0x3F800002),
        (0x3F800000, 0x3F800000, 0x40000000),
        (0x7F800000, 0xFF800000, 0x7FC00000),
        (0x7F800001, 0x3F800000, 0x7FC00000),
        (0xFFFFFFFF, 0x7F800000, 0x7FC00000),
    ],
    "int32": [
        (0x7FFFFFFF, 0x00000001, 0x80000000),  # wraps
        (0xFFFFFFFF, 0x00000001, 0x00000000),
        (0x80000000, 0x80000000, 0x00000000),
        (0x00000005, 0xFFFFFFFD, 0x00000002),  # 5 + -3
        (0x12345678, 0x11111111, 0x23456789),
    ],
}


@pytest.mark.parametrize("dtype", ALL)
def test_golden_hand_cases(dtype):
    a, b, want = (np.array(c, dtype=np.uint64) for c in zip(*HAND[dtype]))
    got = g.add(dtype, a, b)
    assert got.dtype == np.uint32
    for x, y, w, r in zip(a, b, want, got):
        assert int(r) == int(w), f"{dtype}: {int(x):#x} + {int(y):#x} -> {int(r):#x}, want {int(w):#x}"
        assert g.add_exact(dtype, int(x), int(y)) == int(w), (dtype, hex(x), hex(y))
    # scalars and broadcasting
    assert int(g.add(dtype, int(a[0]), int(b[0]))) == int(want[0])
    assert g.add(dtype, a[:, None], b[None, :]).shape == (len(a), len(b))


@pytest.mark.parametrize("dtype", ALL)
def test_golden_matches_exact_reference(dtype):
    """numpy / ml_dtypes adds == exact integer rounding, on random and all special pairs."""
    rng = np.random.default_rng(_seed())
    a, b = g.random_operands(dtype, 20000, rng)
    sp = g.special_values(dtype)
    a = np.concatenate([a, np.repeat(sp, len(sp))])
    b = np.concatenate([b, np.tile(sp, len(sp))])
    got = g.add(dtype, a, b).tolist()
    bad = [(hex(x), hex(y), hex(r)) for x, y, r in zip(a.tolist(), b.tolist(), got)
           if g.add_exact(dtype, x, y) != r]
    assert not bad, bad[:10]


def test_golden_is_commutative_and_canonical():
    rng = np.random.default_rng(_seed())
    for dtype in ALL:
        a, b = g.random_operands(dtype, 5000, rng)
        assert np.array_equal(g.add(dtype, a, b), g.add(dtype, b, a))
        s = g.add(dtype, a, b)
        t = get_dtype(dtype)
        if t.is_float:
            assert np.all(s[g.is_nan(dtype, s)] == t.canonical_nan)


def test_golden_value_conversions():
    assert g.from_values("fp16", [1.0, -2.0, np.inf]).tolist() == [0x3C00, 0xC000, 0x7C00]
    assert g.from_values("bf16", [1.0]).tolist() == [0x3F80]
    assert g.from_values("int32", [-1]).tolist() == [0xFFFFFFFF]
    assert g.to_values("fp32", [0x40490FDB]).astype(float)[0] == pytest.approx(3.14159265)
    assert g.to_values("int32", [0xFFFFFFFE]).tolist() == [-2]


@pytest.mark.parametrize("dtype", FLOATS)
def test_random_operands_cover_every_class(dtype):
    t = get_dtype(dtype)
    rng = np.random.default_rng(1)
    a, b = g.random_operands(dtype, 20000, rng)
    assert a.dtype == np.uint32 and a.shape == (20000,) and b.shape == (20000,)
    assert int(a.max()) <= t.mask and int(b.max()) <= t.mask
    s = g.add(dtype, a, b)
    x = np.concatenate([a, b]).astype(np.int64)
    mag = x & ~t.sign_bit
    exp = mag >> t.man_bits
    n = len(a)

    def share(mask):
        return np.count_nonzero(mask) / mask.size

    assert share((exp == 0) & (mag != 0)) > 0.05                  # subnormals
    assert share(mag == 0) > 0.01 and np.any(x == t.sign_bit)     # both zeros
    assert share(mag == t.pos_inf) > 0.01 and np.any(x == t.neg_inf)
    nans = x[g.is_nan(dtype, x)]
    assert len(set(nans.tolist())) > 20                           # NaN payloads and signs
    assert np.any(nans & t.sign_bit) and np.any(~nans & (1 << (t.man_bits - 1)))  # -, sNaN
    fin = ~g.is_nan(dtype, a) & ~g.is_nan(dtype, b) & ((a & ~np.uint32(t.sign_bit)) != t.pos_inf) \
        & ((b & ~np.uint32(t.sign_bit)) != t.pos_inf)
    s_inf = (s & ~np.uint32(t.sign_bit)) == t.pos_inf
    assert np.count_nonzero(fin & s_inf) / n > 0.02               # finite sums that overflow
    assert np.count_nonzero(fin & (a != b) & (s == 0)) / n > 0.03  # exact cancellation
    a_e = (a.astype(np.int64) >> t.man_bits) & t.exp_max
    close = fin & (a != (b ^ np.uint32(t.sign_bit))) & (a_e > 4) \
        & ((s.astype(np.int64) >> t.man_bits & t.exp_max) < a_e - 3)
    assert np.count_nonzero(close) / n > 0.01                     # near cancellation
    assert set(g.special_values(dtype).tolist()) <= set(x.tolist())


def test_random_operands_int32():
    a, b = g.random_operands("int32", 10000, 3)
    s = g.add("int32", a, b)
    sa, sb, ss = (v.view(np.int32).astype(np.int64) for v in (a, b, s))
    assert np.any(sa + sb > 2**31 - 1) and np.any(sa + sb < -2**31)   # both wraps
    assert np.count_nonzero((ss == 0) & (sa != 0)) > 100
    assert np.any(a == 0x80000000) and np.any(a == 0x7FFFFFFF)


def test_random_operands_are_seeded():
    for dtype in ALL:
        x = g.random_operands(dtype, 100, np.random.default_rng(7))
        y = g.random_operands(dtype, 100, 7)
        assert np.array_equal(x[0], y[0]) and np.array_equal(x[1], y[1])


# ---- RTL in amaranth.sim -----------------------------------------------------------------

def _sim_element(dtype, A, B, expect, rng, en_p=0.7):
    """Drive ElementAdder(dtype) with pairs A, B (``en`` random); return the mismatches."""
    from amaranth.sim import Simulator

    from fred.hdl.adders import ElementAdder

    dut = ElementAdder(dtype)
    lat = dut.latency
    A, B, expect = A.tolist(), B.tolist(), expect.tolist()
    en_seq = (rng.random(3 * len(A) + 16) < en_p).tolist()
    bad = {}

    async def bench(ctx):
        issued = cycle = 0
        while issued < len(A) + lat:
            en = en_seq[cycle]
            cycle += 1
            if issued < len(A):
                ctx.set(dut.a, A[issued])
                ctx.set(dut.b, B[issued])
            ctx.set(dut.en, en)
            await ctx.tick()
            issued += en
            k = issued - lat
            y = ctx.get(dut.y)
            if k < 0:
                assert y == 0
            elif k < len(A) and y != expect[k] and k not in bad:  # checked again while held
                bad[k] = f"#{k} {A[k]:#x} + {B[k]:#x} -> {y:#x}, golden {expect[k]:#x}"

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return list(bad.values())


def _pairs(dtype, n, rng):
    sp = g.special_values(dtype)
    a, b = g.random_operands(dtype, n, rng)
    return (np.concatenate([np.repeat(sp, len(sp)), a]),
            np.concatenate([np.tile(sp, len(sp)), b]))


@pytest.mark.parametrize("dtype", ALL)
def test_element_adder_pysim(dtype):
    rng = np.random.default_rng(_seed())
    A, B = _pairs(dtype, 2500, rng)
    bad = _sim_element(dtype, A, B, g.add(dtype, A, B), rng)
    assert not bad, f"{len(bad)} mismatches of {len(A)}: " + "; ".join(bad[:8])


def test_element_adder_pysim_checker_can_fail():
    rng = np.random.default_rng(_seed())
    A, B = _pairs("fp16", 100, rng)
    want = g.add("fp16", A, B)
    want[[3, 250]] ^= np.uint32(0x0001)
    bad = _sim_element("fp16", A, B, want, rng)
    assert len(bad) == 2 and bad[0].startswith("#3 ") and bad[1].startswith("#250 ")


def test_latency_attribute():
    import gc
    import warnings

    from fred.hdl.adders import ElementAdder, VectorAdder, adder_latency

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # components built only to read an attribute
        assert {d: ElementAdder(d).latency for d in ALL} == \
            {"fp16": 3, "bf16": 3, "fp32": 3, "int32": 1}
        assert VectorAdder("bf16", 2).latency == adder_latency("bf16") == 3
        gc.collect()


@pytest.mark.parametrize("dtype", ["fp32", "int32"])
def test_measured_latency_and_throughput(dtype):
    from fred.sim.benches.adder import measure

    r = measure(dtype, n=200)
    assert r["latency"] == r["declared"] and r["throughput"] == 1.0 and r["mismatches"] == 0


@pytest.mark.parametrize("dtype,lanes", [("fp16", 4), ("int32", 3), ("fp32", 1)])
def test_vector_adder_pysim(dtype, lanes):
    from amaranth.sim import Simulator

    from fred.hdl.adders import VectorAdder

    rng = np.random.default_rng(_seed())
    beats = 300
    a, b = g.random_operands(dtype, beats * lanes, rng)
    A, B = a.reshape(beats, lanes), b.reshape(beats, lanes)
    want = g.add(dtype, A, B).tolist()
    A, B = A.tolist(), B.tolist()
    dut = VectorAdder(dtype, lanes)
    lat = dut.latency
    bad = []

    async def bench(ctx):
        issued = 0
        while issued < beats + lat:
            en = int(rng.random() < 0.6)
            if issued < beats:
                ctx.set(dut.a, A[issued])
                ctx.set(dut.b, B[issued])
            ctx.set(dut.en, en)
            await ctx.tick()
            issued += en
            k = issued - lat
            if 0 <= k < beats:
                y = list(ctx.get(dut.y))
                if y != want[k]:
                    bad.append((k, y, want[k]))

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert not bad, bad[:5]


@pytest.mark.parametrize("lanes,exc,msg", [
    (0, ValueError, "lanes 0 is too small: must be >= 1"),
    (-3, ValueError, "lanes -3 is too small: must be >= 1"),
    (2.5, TypeError, "lanes must be an integer, not float 2.5"),
    ("4", TypeError, "lanes must be an integer, not str '4'"),
])
def test_vector_adder_bad_lanes(lanes, exc, msg):
    from fred.hdl.adders import VectorAdder

    with pytest.raises(exc) as e:
        VectorAdder("fp16", lanes)
    assert str(e.value) == msg


def test_adders_reject_unknown_dtype():
    from fred.hdl.adders import ElementAdder, VectorAdder

    for make in (lambda: ElementAdder("fp8"), lambda: VectorAdder("fp8", 2)):
        with pytest.raises(ValueError, match=r"^unknown element type 'fp8'; known: fp16, bf16, "
                                             r"fp32, int32$"):
            make()


def test_verilog_is_reproducible():
    from fred.hdl.adders import ElementAdder
    from fred.hdl.verilog import emit

    assert emit(ElementAdder("fp16"), "fred_adder_fp16") == \
        emit(ElementAdder("fp16"), "fred_adder_fp16")


@pytest.mark.parametrize("name", [*ALL, "fp16x4"])
def test_verilator_lint_clean(name):
    """``verilator --lint-only -Wall`` with the project's one waiver list (fred.sim.lint)."""
    from fred.hdl.adders import ElementAdder, VectorAdder
    from fred.sim.lint import lint
    from fred.hdl.verilog import emit

    dut = VectorAdder("fp16", 4) if name == "fp16x4" else ElementAdder(name)
    top = f"fred_adder_{name}"
    assert lint(emit(dut, top), top) == []


# ---- emitted Verilog under cocotb + Verilator ----------------------------------------------

def _cocotb(dtype, fault=None, **config):
    from fred.hdl.adders import ElementAdder
    from fred.hdl.verilog import emit
    from fred.sim.toolchain import run_bench

    dut = ElementAdder(dtype, fault=fault)
    top = f"fred_adder_{dtype}"
    return run_bench(verilog=emit(dut, top), toplevel=top, test_module="fred.sim.benches.adder",
                     tag=f"adder-{dtype}{'-' + fault if fault else ''}",
                     config={"dtype": dtype, "latency": dut.latency, **config})


# fp16 in make test; bf16 and fp32 (one Verilator build each) in make regress-adders, where the
# cells' cocotb regressions of those types run anyway
@pytest.mark.parametrize("dtype", ["fp16"] + [pytest.param(d, marks=pytest.mark.regress) for d in FLOATS[1:]])
def test_element_adder_verilator(dtype):
    """>= 100,000 random pairs plus every special pair, ``en`` high 80% of cycles."""
    _cocotb(dtype, n=100_000, en_p=0.8)


def _mutant_caught(dtype):
    """The adder built with a wrong rounding bit (ties round down instead of to even) fails the
    bench: its special pairs and random operands contain exact ties."""
    with pytest.raises(AssertionError, match="1 of 1 cocotb tests failed"):
        _cocotb(dtype, fault="round-bit", n=2000, en_p=0.8)


def test_element_adder_round_bit_mutant_caught():
    _mutant_caught("fp16")


@pytest.mark.regress
@pytest.mark.parametrize("dtype", ["bf16", "fp32"])
def test_element_adder_round_bit_mutant_caught_regress(dtype):
    _mutant_caught(dtype)


@pytest.mark.regress
@pytest.mark.parametrize("en_p,n", [(1.0, 2_000_000), (0.3, 300_000)])
@pytest.mark.parametrize("dtype", ALL)
def test_element_adder_verilator_soak(dtype, en_p, n):
    """Two million pairs per type without stalls, 300k with en low 70% of cycles."""
    _cocotb(dtype, n=n, en_p=en_p)


@pytest.mark.regress
@pytest.mark.parametrize("dtype", FLOATS)
def test_golden_matches_exact_reference_soak(dtype):
    rng = np.random.default_rng(_seed())
    a, b = g.random_operands(dtype, 1_000_000, rng)
    got = g.add(dtype, a, b).tolist()
    bad = [(hex(x), hex(y)) for x, y, r in zip(a.tolist(), b.tolist(), got)
           if g.add_exact(dtype, x, y) != r]
    assert not bad, bad[:10]
