"""SFPU code generator (lowering/codegen/sfpu_codegen.py) run on the bit-exact SFPU model (runtime/emu/sfpu.py).

Harness: inputs go to Dst32b slots (slot j = rows 64j..64j+63, 1024 values), setup runs once, the body 32 times with
the Dst RWC starting at 0 and +2 after the final SFPSTORE (sfpu_addr_mode=1), then the output slot is read back.
References: numpy float32 (bit-exact ops) and float64 (transcendentals). Denormal inputs are not used for the
accuracy checks (the SFPU treats them as zero); denormal results are accepted as signed zero.
"""
from __future__ import annotations

import numpy as np
import pytest
from tinygrad.helpers import cdiv, cmod, floordiv, floormod

from tt_backend.lowering.dag import ValueDAG, VNode
from tt_backend.lowering.placement.cost import sfpu_op_cycles
from tt_backend.lowering.codegen.sfpu_codegen import compile_sfpu, disassemble
from tt_backend.chip.numerics.dst import Dst
from tt_backend.chip.numerics.sfpu.functional import FunctionalSFPU as SFPU
from tt_backend.chip.errors import UnsupportedOp
from tt_backend.chip.isa import decode

N = 1024
F32_MIN_NORMAL = np.float32(2.0 ** -126)


# ------------------------------------------------------------------------------------------------ harness

MAD_CLASS = {"SFPMAD", "SFPADD", "SFPMUL", "SFPADDI", "SFPMULI", "SFPMUL24"}
STALL_BLIND = {"SFPIADD": ("lreg_c", "lreg_dest"), "SFPSHFT": ("lreg_c", "lreg_dest"),
               "SFPAND": ("imm12_math", "lreg_c", "lreg_dest"), "SFPOR": ("imm12_math", "lreg_c", "lreg_dest")}


def check_hazards(body, spill_base):
    """What the SFPU model does not check: no stall-blind read of an SFPMAD result in the next instruction, and
    >= 4 instructions between a spill SFPSTORE and any SFPLOAD of spill space (Dst.md)."""
    last_store = -100
    for k, (name, f) in enumerate(body):
        if k and body[k - 1][0] in MAD_CLASS and name in STALL_BLIND:
            assert all(f.get(r, -1) != body[k - 1][1]["lreg_dest"] for r in STALL_BLIND[name]), (k, name)
        if name == "SFPSTORE" and f["dest_reg_addr"] >= spill_base:
            last_store = k
        if name == "SFPLOAD" and f["dest_reg_addr"] >= spill_base:
            assert k - last_store > 4, k


def run(prog, inputs, kept: dict[int, int] | None = None) -> np.ndarray:
    """The program's output row block; `kept`: LReg -> bits set before the run, which it must leave unchanged
    (a reduction's accumulators, compile_sfpu `reserve`)."""
    check_hazards([decode(w) for w in prog.body], 64 * (prog.out_slot + 1))
    dst = Dst()
    sfpu = SFPU(dst)
    for r, bits in (kept or {}).items():
        sfpu.lreg[r] = bits
    for j, a in enumerate(inputs):
        dst.write_rows32(64 * j, np.asarray(a).view(np.uint32).reshape(64, 16))
    for w in prog.setup:
        sfpu.execute(*decode(w), 0)
    body = [decode(w) for w in prog.body]
    assert body[-1][0] == "SFPSTORE" and body[-1][1]["sfpu_addr_mode"] == 1
    assert all(f.get("sfpu_addr_mode", 0) == 0 for _, f in body[:-1])
    assert prog.dst_slots <= 8 and len(inputs) <= prog.dst_slots
    rwc = 0
    for _ in range(32):
        for name, f in body:
            sfpu.execute(name, f, rwc)
            if name == "SFPSTORE" and f["sfpu_addr_mode"] == 1:
                rwc += 2
        # every row step leaves the predication at the base state: all lanes enabled, empty flag stack
        assert sfpu.lane_flags.all() and sfpu.use_lane_flags.all() and sfpu.stack_depth == 0
    for r, bits in (kept or {}).items():
        assert (sfpu.lreg[r] == bits).all(), f"reserved LReg{r} changed"
    return dst.rows32[64 * prog.out_slot: 64 * prog.out_slot + 64].reshape(N).copy()


def compile_op(op, in_dtypes, out_dtype, arg=None):
    d = ValueDAG()
    srcs = tuple(d.add("LOAD", dt, (), j) for j, dt in enumerate(in_dtypes))
    d.out = d.add(op, out_dtype, srcs, arg)
    return compile_sfpu(d, len(in_dtypes), out_dtype)


def run_op(op, in_dtypes, out_dtype, *inputs):
    return run(compile_op(op, in_dtypes, out_dtype), [np.asarray(x) for x in inputs])


# ------------------------------------------------------------------------------------------------ data

def bits(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float32).view(np.uint32)


def f32(b) -> np.ndarray:
    return np.asarray(b, dtype=np.uint32).view(np.float32)


SPECIALS = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, 2.0, 3.0, np.float32(3.4028235e38),
                     -np.float32(3.4028235e38), F32_MIN_NORMAL, -F32_MIN_NORMAL, 1.5, -2.5, 0.75, 123456.7,
                     2.0 ** 23, 2.0 ** 23 + 1, 2.0 ** 24, 2.0 ** 31, -2.0 ** 31, 0.99999994, 1.0000001], np.float32)


def rand_normal_f32(rng, n=N, emin=-126, emax=127, specials=True) -> np.ndarray:
    """Random normal floats, exponent uniform in [emin, emax], random sign/mantissa; specials at the front."""
    e = rng.integers(emin + 127, emax + 128, n, dtype=np.uint32)
    b = (rng.integers(0, 2, n, dtype=np.uint32) << 31) | (e << 23) | rng.integers(0, 1 << 23, n, dtype=np.uint32)
    x = f32(b).copy()
    if specials:
        x[:len(SPECIALS)] = SPECIALS
    return x


def rand_mixed_f32(rng, n=N) -> np.ndarray:
    """Half small-exponent numbers (so sums/products stay normal and interesting), half anywhere."""
    x = rand_normal_f32(rng, n)
    k = n // 2
    x[len(SPECIALS):k] = (rng.standard_normal(k - len(SPECIALS)) * 100).astype(np.float32)
    x[k:k + 64] = np.round(x[k:k + 64])          # integers: ties, equal values
    return x


def bf16_round_bits(b) -> np.ndarray:
    """tinygrad cast_float_to_bf16 (renderer/cstyle.py), result as fp32 bits with the low half zero."""
    b = np.asarray(b, dtype=np.uint64)
    x = b.astype(np.int64)
    rounding = ((-x) & 0x7F800000) != 0
    r = np.where(rounding, b + ((b >> 16) & 1) + 0x7FFF, np.where((b & 0xFFFF) != 0, b | 0x10000, b))
    return ((r & 0xFFFFFFFF) >> 16 << 16).astype(np.uint32)


def to_bf16(x) -> np.ndarray:
    return f32(bf16_round_bits(bits(x)))


def is_denormal(x) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    return (x != 0) & (np.abs(x) < 2.0 ** -126)


def assert_bits_equal(got_bits, ref, what, flush_ok=True):
    """Bit-exact except: NaN == any NaN; a denormal reference may come back as a zero of the same sign."""
    ref = np.asarray(ref, dtype=np.float32)
    g = f32(got_bits)
    ok = bits(ref) == got_bits
    ok |= np.isnan(ref) & np.isnan(g)
    if flush_ok:
        ok |= is_denormal(ref) & (g == 0) & (np.signbit(g) == np.signbit(ref))
    bad = np.flatnonzero(~ok)
    assert bad.size == 0, f"{what}: {bad.size} mismatches, e.g. " + ", ".join(
        f"[{i}] got {g[i]!r} ({got_bits[i]:#010x}) want {ref[i]!r} ({bits(ref)[i]:#010x})" for i in bad[:5])


def ulp_error(got, ref64) -> np.ndarray:
    """|got - ref| in units of the fp32 ulp at ref (ulp of the smallest normal binade below 2**-126)."""
    ref64 = np.asarray(ref64, dtype=np.float64)
    e = np.floor(np.log2(np.maximum(np.abs(ref64), 2.0 ** -126)))
    return np.abs(np.asarray(got, np.float64) - ref64) / 2.0 ** (e - 23)


# ------------------------------------------------------------------------------------------------ float, exact

BINARY_F = {"ADD": np.add, "SUB": np.subtract, "MUL": np.multiply}


@pytest.mark.parametrize("op", list(BINARY_F))
def test_float_binary_exact(op):
    rng = np.random.default_rng(1)
    a, b = rand_mixed_f32(rng), rand_mixed_f32(rng)
    b[:len(SPECIALS)] = np.roll(SPECIALS, 3)
    a[100:200] = b[100:200]                                      # x - x, equal operands
    got = run_op(op, ["float32"] * 2, "float32", a, b)
    with np.errstate(all="ignore"):
        assert_bits_equal(got, BINARY_F[op](a, b), op)


def test_neg_exact():
    x = rand_mixed_f32(np.random.default_rng(2))
    x[5] = f32(0x7FC12345)                                       # NaN payloads survive a sign flip
    assert (run_op("NEG", ["float32"], "float32", x) == (bits(x) ^ 0x80000000)).all()


def test_max_exact():
    rng = np.random.default_rng(3)
    a, b = rand_mixed_f32(rng), rand_mixed_f32(rng)
    b[:len(SPECIALS)] = SPECIALS[::-1]
    a[200:260], b[200:230] = b[200:260], -a[200:230]             # equal values and +-0 pairs
    a[300], b[300], a[301], b[301] = 0.0, -0.0, -0.0, 0.0
    got = run_op("MAX", ["float32"] * 2, "float32", a, b)
    with np.errstate(invalid="ignore"):
        ref = np.where(a < b, b, a)                                  # tinygrad: (a < b).where(b, a)
    assert (got == bits(ref)).all()


@pytest.mark.parametrize("op,fn", [("CMPLT", np.less), ("CMPNE", np.not_equal)])
def test_float_compare(op, fn):
    rng = np.random.default_rng(4)
    a, b = rand_mixed_f32(rng), rand_mixed_f32(rng)
    b[:len(SPECIALS)] = np.roll(SPECIALS, 7)
    a[200:300] = b[200:300]
    a[300:320], b[300:320] = 0.0, -0.0
    a[320:330], b[320:330] = np.inf, np.inf
    a[330:340], b[330:340] = np.nan, np.nan
    a[340:350] = np.nextafter(b[340:350], np.float32(np.inf))
    got = run_op(op, ["float32"] * 2, "bool", a, b)
    with np.errstate(invalid="ignore"):
        assert (got == fn(a, b)).all()


def test_trunc_exact():
    rng = np.random.default_rng(5)
    x = rand_normal_f32(rng, emin=-3, emax=30)
    x[len(SPECIALS):len(SPECIALS) + 8] = [0.5, -0.5, 0.99, -0.99, 1e-30, -1e-30, 2.0 ** 22 + 0.5, -8388607.5]
    got = run_op("TRUNC", ["float32"], "float32", x)
    assert_bits_equal(got, np.trunc(x), "TRUNC", flush_ok=False)


def test_where_any_dtype():
    rng = np.random.default_rng(6)
    c = rng.integers(0, 2, N).astype(np.int32)
    for dt, gen in [("float32", lambda: rand_mixed_f32(rng)), ("int32", lambda: rng.integers(-2**31, 2**31, N)
                    .astype(np.int32)), ("bool", lambda: rng.integers(0, 2, N).astype(np.int32))]:
        x, y = gen(), gen()
        got = run_op("WHERE", ["bool", dt, dt], dt, c, x, y)
        assert (got == np.where(c != 0, x, y).view(np.uint32)).all(), dt


@pytest.mark.parametrize("dt", ["int32", "uint32"])
def test_where_on_a_word_test_selects_as_numpy(dt):
    """WHERE(x != 0, a, b) and WHERE(0 != x & 2**k, a, b) on int32/uint32 words (zero, INT_MIN's lone sign bit, single
    bits, random words) select as numpy does, with the CMPNE folded into the WHERE's own test (lowering/rewrite.py
    where_on_integer): no 0/1 value computed first (its clz, sfpu_ops.i_ne, is absent)."""
    rng = np.random.default_rng(7)
    x = rand_i32(rng)
    x[8:200] = np.int32(1) << rng.integers(0, 32, 192).astype(np.int32)
    x[200:300] = 0
    x = x.view(np.uint32) if dt == "uint32" else x
    a, b = rand_mixed_f32(rng), rand_mixed_f32(rng)
    for k in (None, 0, 31):
        d = ValueDAG()
        w, fa, fb = d.add("LOAD", dt, (), 0), d.add("LOAD", "float32", (), 1), d.add("LOAD", "float32", (), 2)
        if k is not None:
            w = d.add("AND", dt, (w, d.add("CONST", dt, (), 1 << k if dt == "uint32" or k < 31 else -2 ** 31)))
        zero = d.add("CONST", dt, (), 0)
        test = d.add("CMPNE", "bool", (zero, w) if k == 31 else (w, zero))
        d.out = d.add("WHERE", "float32", (test, fa, fb))
        prog = compile_sfpu(d, 3, "float32")
        word = x if k is None else x & (x.dtype.type(1) << x.dtype.type(k))
        got = run(prog, [x, a, b])
        assert (got == np.where(word != 0, a, b).view(np.uint32)).all(), (dt, k)
        assert "SFPLZ" not in {decode(w)[0] for w in prog.body}, "the 0/1 value of x != 0 (i_ne) was computed"


# ------------------------------------------------------------------------------------------------ casts

def test_cast_f32_to_bf16_all_bit_classes():
    rng = np.random.default_rng(7)
    b = rng.integers(0, 2 ** 32, N, dtype=np.uint64).astype(np.uint32)
    b[:len(SPECIALS)] = bits(SPECIALS)
    b[30:40] = [0x3F808000, 0x3F818000, 0x3F80FFFF, 0x7F7FFFFF, 0xFF7FFFFF, 0x7F800001, 0x7FC00000, 0xFFFFFFFF,
                0x00000001, 0x80008000]                           # ties, overflow to Inf, NaN payloads, denormals
    got = run_op("CAST", ["float32"], "bfloat16", f32(b))
    assert (got == bf16_round_bits(b)).all()


def test_cast_float_to_int_and_bool():
    rng = np.random.default_rng(8)
    x = rand_normal_f32(rng, emin=-3, emax=33)
    ref = np.where(np.isfinite(x) & (np.abs(x) < 2.0 ** 31), np.trunc(np.nan_to_num(x)), -2.0 ** 31)
    assert (run_op("CAST", ["float32"], "int32", x).view(np.int32) == ref.astype(np.int64).astype(np.int32)).all()
    x[50:60] = f32(np.arange(1, 11, dtype=np.uint32))               # denormals are != 0
    assert (run_op("CAST", ["float32"], "bool", x) == (x != 0)).all()


def test_cast_int_to_float_bf16_bool():
    rng = np.random.default_rng(9)
    i = rng.integers(-2 ** 31, 2 ** 31, N).astype(np.int32)
    i[:12] = [0, 1, -1, 2 ** 31 - 1, -2 ** 31, 2 ** 24 + 1, 2 ** 24 + 3, -(2 ** 24 + 1), 16777217, 33554435, 7, -7]
    i[12:300] >>= rng.integers(0, 31, 288).astype(np.int32)
    assert (run_op("CAST", ["int32"], "float32", i) == bits(i.astype(np.float32))).all()
    assert (run_op("CAST", ["int32"], "bfloat16", i) == bf16_round_bits(bits(i.astype(np.float32)))).all()
    assert (run_op("CAST", ["int32"], "bool", i) == (i != 0)).all()


def test_cast_bool_and_identity():
    b = np.random.default_rng(10).integers(0, 2, N).astype(np.int32)
    assert (run_op("CAST", ["bool"], "float32", b) == bits(b.astype(np.float32))).all()
    assert (run_op("CAST", ["bool"], "bfloat16", b) == bits(b.astype(np.float32))).all()
    assert (run_op("CAST", ["bool"], "int32", b) == b).all()
    x = to_bf16(rand_mixed_f32(np.random.default_rng(11)))
    assert (run_op("CAST", ["bfloat16"], "float32", x) == bits(x)).all()
    assert (run_op("CAST", ["bfloat16"], "int32", x).view(np.int32) ==
            np.where(np.isfinite(x) & (np.abs(x) < 2.0 ** 31), np.trunc(np.nan_to_num(x)), -2.0 ** 31)
            .astype(np.int64).astype(np.int32)).all()


# ------------------------------------------------------------------------------------------------ int32 / bool

def rand_i32(rng):
    v = rng.integers(-2 ** 31, 2 ** 31, N).astype(np.int32)
    v[:8] = [0, 1, -1, 2 ** 31 - 1, -2 ** 31, 2, -2, 65536]
    v[8:400] >>= rng.integers(0, 31, 392).astype(np.int32)
    return v


INT_OPS = {"ADD": lambda a, b: a + b, "SUB": lambda a, b: a - b, "MUL": lambda a, b: a * b,
           "MAX": lambda a, b: np.where(a < b, b, a), "CMPLT": lambda a, b: (a < b).astype(np.int32),
           "CMPNE": lambda a, b: (a != b).astype(np.int32), "AND": np.bitwise_and, "OR": np.bitwise_or,
           "XOR": np.bitwise_xor}


@pytest.mark.parametrize("op", list(INT_OPS))
def test_int32_binary(op):
    rng = np.random.default_rng(12)
    a, b = rand_i32(rng), rand_i32(rng)
    a[500:600] = b[500:600]
    b[600:608] = [0, 1, -1, 2 ** 31 - 1, -2 ** 31, -2 ** 31, 2 ** 31 - 1, 7]
    a[600:608] = [-2 ** 31, -2 ** 31, -2 ** 31, -2 ** 31, 2 ** 31 - 1, -2 ** 31, 2 ** 31 - 1, -7]
    out = "bool" if op.startswith("CMP") else "int32"
    with np.errstate(over="ignore"):
        ref = INT_OPS[op](a, b).astype(np.int32)
    assert (run_op(op, ["int32"] * 2, out, a, b).view(np.int32) == ref).all()


@pytest.mark.parametrize("op", ["SHL", "SHR"])
def test_int32_shifts(op):
    """C's << and >> on int32 (>> arithmetic) for every amount 0..31, bit-exact; a constant amount too."""
    rng = np.random.default_rng(14)
    a = rand_i32(rng)
    n = (np.arange(N) % 32).astype(np.int32)
    ref = {"SHL": np.left_shift, "SHR": np.right_shift}[op]
    assert (run_op(op, ["int32"] * 2, "int32", a, n).view(np.int32) == ref(a, n)).all()
    d = ValueDAG()
    x = d.add("LOAD", "int32", (), 0)
    d.out = d.add(op, "int32", (x, d.add("CONST", "int32", (), 7)))
    assert (run(compile_sfpu(d, 1, "int32"), [a]).view(np.int32) == ref(a, 7)).all()


def test_new_op_costs():
    """The placement's cost table prices the new sequences from their cycles (32 row steps a tile): one instruction
    each, the destination taking the dying first source's register; SHR negates the amount first (3); DIV, correctly
    rounded (sfpu_ops.f_div), 71 instructions + the 5 auto-stalls left after scheduling (sfpu_schedule), and
    RECIPROCAL, the same division of 1.0, 71 + 6."""
    from_counts = {("AND", "int32"): 1, ("OR", "int32"): 1, ("XOR", "int32"): 1, ("SHL", "int32"): 1,
                   ("SHR", "int32"): 3, ("DIV", "float32"): 71 + 5, ("RECIPROCAL", "float32"): 71 + 6}
    for (op, dt), n in from_counts.items():
        srcs = (dt,) if op == "RECIPROCAL" else (dt, dt)
        assert sfpu_op_cycles(VNode(0, op, dt), srcs) == 32 * n, op


def test_int32_neg():
    a = rand_i32(np.random.default_rng(13))
    with np.errstate(over="ignore"):
        assert (run_op("NEG", ["int32"], "int32", a).view(np.int32) == -a).all()


@pytest.mark.parametrize("op", ["CMPNE", "CMPLT", "AND", "OR", "XOR", "MAX", "ADD", "MUL"])
def test_bool_ops(op):
    a, b = np.array([0, 0, 1, 1] * 256, np.int32), np.array([0, 1, 0, 1] * 256, np.int32)
    ref = {"CMPNE": a != b, "CMPLT": a < b, "AND": a & b, "OR": a | b, "XOR": a ^ b, "MAX": np.maximum(a, b),
           "ADD": a | b, "MUL": a & b}[op]
    assert (run_op(op, ["bool"] * 2, "bool", a, b) == ref).all()


# ------------------------------------------------------------------------------------------------ transcendental

def check_accuracy(op, x, got_bits, ref64, max_ulp, what=""):
    """Returns the max ulp error over lanes whose reference is a finite normal number."""
    g = f32(got_bits)
    fin = np.isfinite(ref64) & (np.abs(ref64) >= 2.0 ** -126) & (np.abs(ref64) <= 3.4028234663852886e38)
    err = ulp_error(g[fin], ref64[fin])
    worst = int(np.argmax(err)) if err.size else 0
    assert err.size == 0 or err.max() <= max_ulp, \
        f"{op}{what}: {err.max():.3f} ulp at x={x[fin][worst]!r}: got {g[fin][worst]!r} want {ref64[fin][worst]!r}"
    return float(err.max()) if err.size else 0.0


def reciprocal_cases(rng, n: int = 8 * N) -> np.ndarray:
    """Random normals over the whole range (|x| > 2**126 has a denormal reciprocal), mantissas within a few ulp of 1
    and of 2 (reciprocals next to a power of two, where the ulp changes), and the specials, denormals and extremes."""
    near = f32((127 << 23) + rng.integers(-64, 64, n // 8).astype(np.int64) + (rng.integers(0, 2, n // 8) << 23))
    near = near * np.float32(2.0) ** rng.integers(-100, 100, n // 8).astype(np.float32)
    edge = np.array([1e-40, -1e-45, 2.0 ** 126, -2.0 ** 126, 2.0 ** 127, 3e38, 1e-38, 0.1, 3.0, 7.0], np.float32)
    return np.concatenate([rand_normal_f32(rng, n - n // 8 - len(edge)), near.astype(np.float32), edge])


def test_reciprocal_is_correctly_rounded():
    """RECIPROCAL gives the IEEE 1/x bit for bit, as the CPU device (lowering/codegen/sfpu_ops.py f_recip, the
    correctly rounded division by f_div with 1.0 as the dividend): numpy float32 1 / x of the flushed operand (a
    denormal reads as zero: +-Inf), a denormal reciprocal written as a signed zero; 1/+-Inf = +-0, NaN stays NaN."""
    x = reciprocal_cases(np.random.default_rng(20))
    fx = np.where(is_denormal(x), np.copysign(np.float32(0), x), x).astype(np.float32)
    with np.errstate(all="ignore"):
        want = np.float32(1) / fx
    prog = compile_op("RECIPROCAL", ["float32"], "float32")
    for k in range(0, len(x), N):
        assert_bits_equal(run(prog, [x[k:k + N]]), want[k:k + N], f"RECIPROCAL cases {k // N}")


def division_cases(rng) -> tuple[np.ndarray, np.ndarray]:
    """Pairs for a / b, 1024 of each kind: random normals over the whole range (huge and tiny ratios, overflow and
    underflow), exact quotients (integers times 12-bit divisors), quotients within a hair of the midpoint between two
    floats (the hard cases of rounding), and zeros, Infs, NaNs, denormals and extremes against everything."""
    a, b = [rand_normal_f32(rng, specials=False)], [rand_normal_f32(rng, specials=False)]
    q = rng.integers(-2 ** 12, 2 ** 12, N).astype(np.float32)
    b.append(f32(bits(rand_normal_f32(rng, emin=-10, emax=10, specials=False)) & 0xFFFFF000))
    a.append(q * b[-1])
    mid = (rng.integers(1 << 24, 1 << 25, N) | 1) * 2.0 ** -24
    b.append(rand_normal_f32(rng, emin=-30, emax=30, specials=False))
    a.append((mid * b[-1]).astype(np.float32) * np.float32(2.0) ** rng.integers(-40, 40, N).astype(np.float32))
    edge = np.concatenate([SPECIALS, np.array([1e-40, -1e-45, 2.0 ** 127, 3e38, 1e-38, 0.1, 7.0], np.float32)])
    a.append(edge[rng.integers(0, len(edge), N)])
    b.append(edge[rng.integers(0, len(edge), N)])
    a[-1][:N // 2] = rand_normal_f32(rng, specials=False)[:N // 2]
    return np.concatenate(a), np.concatenate(b)


def test_division_is_correctly_rounded():
    """MUL(a, RECIPROCAL(b)) compiles to DIV (lowering/rewrite.py fuse_divide), which gives the IEEE quotient bit for
    bit, as the CPU device's division: numpy float32 a / b of the flushed operands (the SFPU reads a denormal as zero),
    a denormal quotient written as a signed zero."""
    a, b = division_cases(np.random.default_rng(28))
    d = ValueDAG()
    x, y = d.add("LOAD", "float32", (), 0), d.add("LOAD", "float32", (), 1)
    d.out = d.add("MUL", "float32", (x, d.add("RECIPROCAL", "float32", (y,))))
    prog = compile_sfpu(d, 2, "float32")
    assert prog.body == compile_op("DIV", ["float32"] * 2, "float32").body
    fa, fb = (np.where(is_denormal(v), np.copysign(np.float32(0), v), v).astype(np.float32) for v in (a, b))
    with np.errstate(all="ignore"):
        want = fa / fb
    for k in range(0, len(a), N):
        assert_bits_equal(run(prog, [a[k:k + N], b[k:k + N]]), want[k:k + N], f"DIV cases {k // N}")


def test_uniform_values_are_hoisted_bit_for_bit():
    """A value computed from uniform inputs alone (here sqrt(s) + 1 and its reciprocal, s one value for the whole
    tile) moves into the setup (once per tile, into LReg11-14) and the body shrinks; the output equals the per-row
    program's bit for bit, the division kept a division (hoisting implies no rewrite)."""
    rng = np.random.default_rng(31)
    d = ValueDAG()
    x, s = d.add("LOAD", "float32", (), 0), d.add("LOAD", "float32", (), 1)
    r = d.add("ADD", "float32", (d.add("SQRT", "float32", (s,)), d.add("CONST", "float32", (), 1.0)))
    d.out = d.add("MUL", "float32", (d.add("MUL", "float32", (x, d.add("RECIPROCAL", "float32", (r,)))), r))
    per_row, hoisted = compile_sfpu(d, 2, "float32"), compile_sfpu(d, 2, "float32", uniform=frozenset({1}))
    sqrt_words = len(compile_op("SQRT", ["float32"], "float32").body) - 2       # without its load and store
    assert len(hoisted.body) <= len(per_row.body) - sqrt_words and len(hoisted.setup) > len(per_row.setup) + sqrt_words
    for v in (np.float32(2.5), np.float32(3e-30), np.float32(7e30)):
        xs = rand_normal_f32(rng, specials=False)
        ins = [xs, np.full(N, v, np.float32)]
        assert_bits_equal(run(hoisted, ins), f32(run(per_row, ins)), f"s = {v}", flush_ok=False)


def test_kept_reciprocal_is_a_product():
    """keep_uniform_reciprocals marks a * (1/b) with a uniform b: fuse_divide leaves it a product (two roundings),
    the reciprocal hoisted; a non-uniform b still divides."""
    from tt_backend.lowering.rewrite import keep_uniform_reciprocals
    d = ValueDAG()
    x, y = d.add("LOAD", "float32", (), 0), d.add("LOAD", "float32", (), 1)
    d.out = d.add("MUL", "float32", (x, d.add("RECIPROCAL", "float32", (y,))))
    assert keep_uniform_reciprocals(d, frozenset({0})).nodes == d.nodes
    kept = keep_uniform_reciprocals(d, frozenset({1}))
    prog = compile_sfpu(kept, 2, "float32", uniform=frozenset({1}))
    assert len(prog.body) < 6       # load x, multiply by the pooled reciprocal, store
    a = rand_normal_f32(np.random.default_rng(32), specials=False)
    with np.errstate(all="ignore"):
        want = a * (np.float32(1) / np.float32(3.7))
    assert_bits_equal(run(prog, [a, np.full(N, 3.7, np.float32)]), want, "x * (1/3.7)")


def test_division_fits_beside_a_reduction_accumulator():
    """A reduction keeps its accumulator in an LReg across the program (compile_sfpu `reserve`): DIV's destination, two
    sources and scratch registers fit in the 7 left (random program 5091: "an op needs more than 8 registers")."""
    a, b = (rand_normal_f32(np.random.default_rng(30 + k), specials=False) for k in range(2))
    d = ValueDAG()
    d.out = d.add("DIV", "float32", (d.add("LOAD", "float32", (), 0), d.add("LOAD", "float32", (), 1)))
    prog = compile_sfpu(d, 2, "float32", reserve=(7,))
    assert all(f.get(k, -1) != 7 for _, f in map(decode, prog.body) for k in ("lreg_dest", "lreg_ind"))
    with np.errstate(all="ignore"):
        assert_bits_equal(run(prog, [a, b]), a / b, "DIV beside an accumulator")


def test_division_borrows_a_register_beside_two_accumulators():
    """Two reserved LRegs (a reduction's accumulator pair) leave 6, one short of DIV's two sources, destination and
    four temporaries: a reserved LReg is saved to Dst, lent to the op and restored (random program 6040)."""
    a, b = (rand_normal_f32(np.random.default_rng(32 + k), specials=False) for k in range(2))
    d = ValueDAG()
    d.out = d.add("DIV", "float32", (d.add("LOAD", "float32", (), 0), d.add("LOAD", "float32", (), 1)))
    prog = compile_sfpu(d, 2, "float32", reserve=(6, 7))
    assert any(f.get("lreg_dest") in (6, 7) for _, f in map(decode, prog.body))      # it did borrow
    with np.errstate(all="ignore"):
        assert_bits_equal(run(prog, [a, b], kept={6: 0x3F800000, 7: 0xC0490FDB}), a / b, "DIV beside two accumulators")


@pytest.mark.parametrize("c", [1 / 3e38, -2.0 ** -149, 1e-40])
def test_product_with_a_denormal_constant(c):
    """x * c with c denormal (tinygrad's x / 3e38): bit-exact against numpy's float32 product (the SFPU would read c
    as 0; lowering/rewrite.py scales it), a denormal product flushed to a signed zero."""
    rng = np.random.default_rng(29)
    x = rand_normal_f32(rng, emin=60, emax=127)
    x[:len(SPECIALS)] = SPECIALS
    d = ValueDAG()
    d.out = d.add("MUL", "float32", (d.add("LOAD", "float32", (), 0), d.add("CONST", "float32", (), c)))
    with np.errstate(all="ignore"):
        assert_bits_equal(run(compile_sfpu(d, 1, "float32"), [x]), x * np.float32(c), f"x * {c!r}")


def test_sqrt():
    x = np.abs(rand_normal_f32(np.random.default_rng(21)))
    x[:6] = [0.0, -0.0, np.inf, np.nan, -1.0, -np.inf]
    got = run_op("SQRT", ["float32"], "float32", x)
    with np.errstate(invalid="ignore"):
        check_accuracy("SQRT", x, got, np.sqrt(x.astype(np.float64)), 1.0)
    g = f32(got[:6])
    assert bits(g[:3]).tolist() == bits([0.0, -0.0, np.inf]).tolist() and np.isnan(g[3:]).all()


def test_exp2():
    rng = np.random.default_rng(22)
    x = rng.uniform(-130, 130, N).astype(np.float32)
    x[:200] = rng.uniform(-1, 1, 200).astype(np.float32)
    x[200:260] = rand_normal_f32(rng, 60, emin=-40, emax=-2, specials=False)
    x[:12] = [0.0, -0.0, np.inf, -np.inf, np.nan, 128.0, 127.99, -126.0, -126.5, 1.0, -1.0, 0.5]
    got = run_op("EXP2", ["float32"], "float32", x)
    ref = np.exp2(x.astype(np.float64))
    check_accuracy("EXP2", x, got, ref, 2.0)
    g = f32(got)
    assert (g[ref >= 2.0 ** 128] == np.inf).all() and (g[ref < 2.0 ** -126] == 0).all()
    assert g[0] == 1 and g[1] == 1 and g[2] == np.inf and g[3] == 0 and np.isnan(g[4])


def test_log2():
    x = np.abs(rand_normal_f32(np.random.default_rng(23)))
    x[:len(SPECIALS)] = np.abs(SPECIALS)
    x[30:330] = np.random.default_rng(24).uniform(0.5, 2.0, 300).astype(np.float32)   # near log2 = 0
    x[:6] = [0.0, -0.0, np.inf, np.nan, -1.0, 1.0]
    got = run_op("LOG2", ["float32"], "float32", x)
    with np.errstate(divide="ignore", invalid="ignore"):
        ref = np.log2(x.astype(np.float64))
    check_accuracy("LOG2", x, got, ref, 2.0)
    g = f32(got[:6])
    assert g[0] == -np.inf and g[1] == -np.inf and g[2] == np.inf and np.isnan(g[3]) and np.isnan(g[4]) \
        and bits(g[5]) == 0


def sin_abs_error_ulps(x, got_bits):
    """|sin_sfpu - sin| in units of 2**-24 (the ulp of values in [0.5, 1))."""
    return np.abs(f32(got_bits).astype(np.float64) - np.sin(x.astype(np.float64))) / 2.0 ** -24


def test_sin():
    rng = np.random.default_rng(25)
    x = rng.uniform(-100, 100, N).astype(np.float32)
    x[:300] = rng.uniform(-4, 4, 300).astype(np.float32)
    x[:8] = [0.0, -0.0, np.pi, -np.pi, np.pi / 2, 100.0, -100.0, 1e-3]
    got = run_op("SIN", ["float32"], "float32", x)
    err = sin_abs_error_ulps(x, got)
    assert err.max() <= 2.0, f"SIN: {err.max():.3f} x 2**-24 at x={x[np.argmax(err)]!r}"
    assert bits(f32(got[:2])).tolist() == [0, 0x80000000]
    inf = run_op("SIN", ["float32"], "float32", np.array([np.inf, -np.inf, np.nan] * 342, np.float32)[:N])
    assert np.isnan(f32(inf)).all()


def test_sin_large_arguments():
    """The two-part k and three-part pi keep the reduction exact up to |x| < 2**22 * pi (1.3e7); beyond it the result
    is only bounded: it stays in [-1, 1] (tinygrad's CPU device reduces exactly there, the SFPU does not)."""
    rng = np.random.default_rng(26)
    x = (np.exp(rng.uniform(np.log(100), np.log(1.3e7), N)) * rng.choice([-1, 1], N)).astype(np.float32)
    err = sin_abs_error_ulps(x, run_op("SIN", ["float32"], "float32", x))
    assert err.max() <= 4.0, f"SIN: {err.max():.3f} x 2**-24 at x={x[np.argmax(err)]!r}"
    huge = (np.exp(rng.uniform(np.log(1.4e7), np.log(3e38), N)) * rng.choice([-1, 1], N)).astype(np.float32)
    got = f32(run_op("SIN", ["float32"], "float32", huge))
    assert (np.abs(got) <= 1).all()


# ------------------------------------------------------------------------------------------------ bfloat16

@pytest.mark.parametrize("op", list(BINARY_F))
def test_bf16_binary(op):
    rng = np.random.default_rng(30)
    a, b = to_bf16(rand_mixed_f32(rng)), to_bf16(rand_mixed_f32(rng))
    got = run_op(op, ["bfloat16"] * 2, "bfloat16", a, b)
    with np.errstate(all="ignore"):
        ref = f32(bf16_round_bits(bits(BINARY_F[op](a, b))))
    assert_bits_equal(got, ref, f"bf16 {op}")
    assert (got & 0xFFFF == 0).all()


@pytest.mark.parametrize("op,fn,lo,hi", [("EXP2", np.exp2, -20, 20), ("LOG2", np.log2, 1e-3, 1e3),
                                        ("SQRT", np.sqrt, 0, 1e6), ("RECIPROCAL", np.reciprocal, 1e-3, 1e3),
                                        ("SIN", np.sin, -10, 10)])
def test_bf16_unary(op, fn, lo, hi):
    x = to_bf16(np.random.default_rng(31).uniform(lo, hi, N).astype(np.float32))
    got = f32(run_op(op, ["bfloat16"], "bfloat16", x))
    ref = to_bf16(fn(x.astype(np.float64)).astype(np.float32))
    assert (bits(got) & 0xFFFF == 0).all()
    # one bf16 ulp: the fp32 result is within 2 fp32 ulp, so the RNE to bf16 can differ only on near-ties
    assert (np.abs(bits(got).astype(np.int64) - bits(ref).astype(np.int64)) <= 0x10000).all()


def test_bf16_neg_max_trunc_exact():
    rng = np.random.default_rng(32)
    a, b = to_bf16(rand_mixed_f32(rng)), to_bf16(rand_mixed_f32(rng))
    assert (run_op("NEG", ["bfloat16"], "bfloat16", a) == bits(a) ^ 0x80000000).all()
    with np.errstate(invalid="ignore"):
        assert (run_op("MAX", ["bfloat16"] * 2, "bfloat16", a, b) == bits(np.where(a < b, b, a))).all()
        assert (run_op("CMPLT", ["bfloat16"] * 2, "bool", a, b) == (a < b)).all()
    assert_bits_equal(run_op("TRUNC", ["bfloat16"], "bfloat16", a), np.trunc(a), "bf16 TRUNC", flush_ok=False)


# ------------------------------------------------------------------------------------------------ whole DAGs

def test_composite():
    """((a*b+1).maximum(0.5) - (a<0).where(exp2(a), 1/b))"""
    d = ValueDAG()
    a, b = d.add("LOAD", "float32", (), 0), d.add("LOAD", "float32", (), 1)
    one, half = d.add("CONST", "float32", (), 1.0), d.add("CONST", "float32", (), 0.5)
    zero = d.add("CONST", "float32", (), 0.0)
    m = d.add("MAX", "float32", (d.add("ADD", "float32", (d.add("MUL", "float32", (a, b)), one)), half))
    w = d.add("WHERE", "float32", (d.add("CMPLT", "bool", (a, zero)), d.add("EXP2", "float32", (a,)),
                                   d.add("RECIPROCAL", "float32", (b,))))
    d.out = d.add("SUB", "float32", (m, w))
    prog = compile_sfpu(d, 2, "float32")
    assert "SFPSTORE" in disassemble(prog)
    rng = np.random.default_rng(40)
    x, y = rng.uniform(-4, 4, N).astype(np.float32), rng.uniform(0.25, 4, N).astype(np.float32)
    got = f32(run(prog, [x, y])).astype(np.float64)
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    ref = np.maximum(np.float32(x * y) + np.float32(1), 0.5) - np.where(x < 0, np.exp2(x64), 1 / y64)
    assert np.allclose(got, ref, rtol=2e-6, atol=2e-6)


def _shared_terms_dag(d, ins, n_terms, op="MUL"):
    """t_k = (in[k % n] + c_k) op in[(k+1) % n]; out = (t_0 + ... + t_n-1) - (t_n-1 * ... * t_0): every t_k stays live
    from the first sum to the reversed product, so n_terms values are live at once."""
    ts = [d.add(op, "float32", (d.add("ADD", "float32", (ins[k % len(ins)], d.add("CONST", "float32", (), k + 2.0))),
                                ins[(k + 1) % len(ins)])) for k in range(n_terms)]
    s, p = ts[0], ts[-1]
    for t in ts[1:]:
        s = d.add("ADD", "float32", (s, t))
    for t in ts[-2::-1]:
        p = d.add("MUL", "float32", (p, t))
    d.out = d.add("SUB", "float32", (s, p))
    return d


def _shared_terms_ref(ins, n_terms):
    ts = [(ins[k % len(ins)] + np.float32(k + 2)) * ins[(k + 1) % len(ins)] for k in range(n_terms)]
    s, p = ts[0], ts[-1]
    for t in ts[1:]:
        s = s + t
    for t in ts[-2::-1]:
        p = p * t
    return s - p


def test_spills():
    """12 values live at once need more than the 8 LRegs: spill to Dst slots and reload, bit-exact."""
    d = ValueDAG()
    d = _shared_terms_dag(d, [d.add("LOAD", "float32", (), 0), d.add("LOAD", "float32", (), 1)], 12)
    prog = compile_sfpu(d, 2, "float32", fuse_mad=False)
    assert prog.dst_slots > 2
    rng = np.random.default_rng(41)
    x, y = rng.uniform(-1.5, 1.5, N).astype(np.float32), rng.uniform(-1.5, 1.5, N).astype(np.float32)
    assert_bits_equal(run(prog, [x, y]), _shared_terms_ref([x, y], 12), "spills")


def test_constants_and_int_dag():
    d = ValueDAG()
    a = d.add("LOAD", "int32", (), 0)
    k = d.add("CONST", "int32", (), 100000)
    s = d.add("MUL", "int32", (d.add("ADD", "int32", (a, k)), d.add("CONST", "int32", (), -3)))
    d.out = d.add("WHERE", "int32", (d.add("CMPLT", "bool", (s, d.add("CONST", "int32", (), 0))), s, a))
    a_v = rand_i32(np.random.default_rng(42))
    with np.errstate(over="ignore"):
        s_v = (a_v + np.int32(100000)) * np.int32(-3)
    assert (run(compile_sfpu(d, 1, "int32"), [a_v]).view(np.int32) == np.where(s_v < 0, s_v, a_v)).all()


def test_allocator_edge_cases():
    rng = np.random.default_rng(43)
    x = rand_mixed_f32(rng)
    d = ValueDAG()
    a = d.add("LOAD", "float32", (), 0)
    sq = d.add("MUL", "float32", (a, a))                              # repeated operand
    z = d.add("SUB", "float32", (sq, sq))                             # dying operand used twice
    c = d.add("CAST", "float32", (d.add("CAST", "float32", (a,)),))   # identity casts share the value
    d.add("EXP2", "float32", (a,))                                    # dead node: no code
    d.out = d.add("ADD", "float32", (d.add("ADD", "float32", (z, c)), sq))
    prog = compile_sfpu(d, 1, "float32")
    assert "SFPLOADI" not in disassemble(prog)
    with np.errstate(all="ignore"):
        assert_bits_equal(run(prog, [x]), (x * x - x * x) + x + x * x, "x*x-x*x+x+x*x")
    # copy kernel, constant kernel, ARCHITECTURE.md signature (node list, n_inputs, out node id), output dtype cast
    d = ValueDAG()
    d.out = d.add("LOAD", "int32", (), 0)
    assert (run(compile_sfpu(d, 1, "int32"), [x.view(np.int32)]) == bits(x)).all()
    assert (run(compile_sfpu(d, 1, "float32"), [np.arange(N, dtype=np.int32)]) == bits(np.arange(N))).all()
    d = ValueDAG()
    d.out = d.add("CONST", "bfloat16", (), 1.00390625)                # rounds (RNE) to bf16 1.0
    assert (run(compile_sfpu(d, 0, "bfloat16"), []) == 0x3F800000).all()
    d.add("LOAD", "float32", (), 0)
    assert (run(compile_sfpu(d.nodes, 1, 0), [x]) == 0x3F800000).all()


def test_too_many_slots():
    """7 inputs + the output slot fill Dst: fine without spills; 6 inputs leave room for one spill location only,
    a DAG with 16 values live at once -> UnsupportedOp; 8 inputs -> UnsupportedOp."""
    d = ValueDAG()
    ins = [d.add("LOAD", "float32", (), j) for j in range(7)]
    acc = d.add("MUL", "float32", (ins[0], ins[1]))
    for j in range(1, 7):                                             # few values live at once
        acc = d.add("MAX", "float32", (acc, d.add("MUL", "float32", (ins[j], ins[(j + 1) % 7]))))
    d.out = acc
    prog = compile_sfpu(d, 7, "float32")
    assert prog.dst_slots == 8 and prog.out_slot == 7
    d = ValueDAG()
    with pytest.raises(UnsupportedOp, match="Dst slots"):
        compile_sfpu(_shared_terms_dag(d, [d.add("LOAD", "float32", (), j) for j in range(6)], 16), 6, "float32")
    d = ValueDAG()
    d.out = d.add("LOAD", "float32", (), 7)
    with pytest.raises(UnsupportedOp, match="output"):
        compile_sfpu(d, 8, "float32")


def test_unsupported():
    with pytest.raises(UnsupportedOp, match="SQRT"):
        compile_op("SQRT", ["int32"], "int32")
    with pytest.raises(UnsupportedOp, match="RECIPROCAL"):
        compile_op("RECIPROCAL", ["bool"], "bool")
    # tinygrad's int / int: a float32 RECIPROCAL of an int32 value; the division fusion must not take it as a float
    d = ValueDAG()
    x, y = d.add("LOAD", "int32", (), 0), d.add("LOAD", "int32", (), 1)
    d.out = d.add("MUL", "float32", (d.add("CAST", "float32", (x,)), d.add("RECIPROCAL", "float32", (y,))))
    with pytest.raises(UnsupportedOp, match="RECIPROCAL on dtype int32"):
        compile_sfpu(d, 2, "float32")


def _random_dag(rng, n_inputs, n_ops, dtype):
    """Random DAG over exact ops; returns (dag, numpy evaluator)."""
    d = ValueDAG()
    vals = [d.add("LOAD", dtype, (), j) for j in range(n_inputs)]
    evals = [lambda ins, j=j: ins[j] for j in range(n_inputs)]
    f = np.float32 if dtype == "float32" else np.int32
    for _ in range(n_ops):
        op = rng.choice(["ADD", "SUB", "MUL", "NEG", "MAX", "WHERE", "CONST"])
        a, b, c = (int(rng.integers(0, len(vals))) for _ in range(3))
        ea, eb, ec = evals[a], evals[b], evals[c]
        if op == "CONST":
            k = f(rng.integers(-3, 4))
            vals.append(d.add("CONST", dtype, (), k.item()))
            evals.append(lambda ins, k=k: np.full(N, k))
        elif op == "NEG":
            vals.append(d.add("NEG", dtype, (vals[a],)))
            evals.append(lambda ins, ea=ea: -ea(ins))
        elif op == "WHERE":
            cond = d.add("CMPLT", "bool", (vals[a], vals[b]))
            vals.append(d.add("WHERE", dtype, (cond, vals[c], vals[a])))
            evals.append(lambda ins, ea=ea, eb=eb, ec=ec: np.where(ea(ins) < eb(ins), ec(ins), ea(ins)))
        else:
            fn = {"ADD": np.add, "SUB": np.subtract, "MUL": np.multiply,
                  "MAX": lambda x, y: np.where(x < y, y, x)}[op]
            vals.append(d.add(op, dtype, (vals[a], vals[b])))
            evals.append(lambda ins, ea=ea, eb=eb, fn=fn: fn(ea(ins), eb(ins)))
    acc, eacc = vals[-1], evals[-1]
    for v, ev in zip(vals[-12:-1], evals[-12:-1]):                   # keep many values live -> spills
        acc = d.add("ADD", dtype, (v, acc))
        eacc = (lambda ins, ev=ev, eacc=eacc: ev(ins) + eacc(ins))
    d.out = acc
    return d, eacc


@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_random_dags(dtype):
    """Random DAGs (many values live at once -> spills) against numpy, bit-exact."""
    rng = np.random.default_rng(50)
    for trial in range(25):
        n_in = int(rng.integers(1, 5))
        d, ev = _random_dag(rng, n_in, int(rng.integers(5, 40)), dtype)
        if dtype == "float32":
            ins = [rng.uniform(-2, 2, N).astype(np.float32) for _ in range(n_in)]
        else:
            ins = [rng.integers(-1000, 1000, N).astype(np.int32) for _ in range(n_in)]
        prog = compile_sfpu(d, n_in, dtype, fuse_mad=False)
        with np.errstate(all="ignore"):
            ref = ev(ins).astype(np.float32 if dtype == "float32" else np.int32)
        got = run(prog, ins)
        if dtype == "float32":
            assert_bits_equal(got, ref, f"trial {trial}")
        else:
            assert (got.view(np.int32) == ref).all(), f"trial {trial}"


@pytest.mark.parametrize("form", ["a*b+c", "a*b-c", "c-a*b", "c+a*b"])
def test_fused_multiply_add(form):
    """float32 a*b+c (and the subtract forms) become ONE SFPMAD: the result is the Blackhole FMA of the operands
    (chip.numerics.fma.fma_bh, itself checked against exact rational arithmetic in test_sfpu.py), not two roundings."""
    from tt_backend.chip.numerics.fma import fma_bh
    d = ValueDAG()
    a, b, c = (d.add("LOAD", "float32", (), j) for j in range(3))
    p = d.add("MUL", "float32", (a, b))
    op, srcs = {"a*b+c": ("ADD", (p, c)), "a*b-c": ("SUB", (p, c)), "c-a*b": ("SUB", (c, p)),
                "c+a*b": ("ADD", (c, p))}[form]
    d.out = d.add(op, "float32", srcs)
    prog = compile_sfpu(d, 3, "float32")
    mads = [w for w in prog.body if w >> 24 == 0x84]
    assert len(mads) == 1 and not [w for w in prog.body if w >> 24 in (0x85, 0x86)], disassemble(prog)
    rng = np.random.default_rng(60)
    x, y, z = (rng.uniform(-4, 4, N).astype(np.float32) for _ in range(3))
    neg = lambda v: (v.view(np.uint32) ^ np.uint32(0x80000000))
    xb, yb, zb = x.view(np.uint32), y.view(np.uint32), z.view(np.uint32)
    want = {"a*b+c": fma_bh(xb, yb, zb), "a*b-c": fma_bh(xb, yb, neg(z)), "c-a*b": fma_bh(xb, neg(y), zb),
            "c+a*b": fma_bh(xb, yb, zb)}[form]
    assert_bits_equal(run(prog, [x, y, z]), want.view(np.float32), form)
    # and it is within one rounding of the exact value (the CPU's fma) relative to the operands' magnitude
    sign = {"a*b+c": (1, 1), "a*b-c": (1, -1), "c-a*b": (-1, 1), "c+a*b": (1, 1)}[form]
    exact = sign[0] * x.astype(np.float64) * y + sign[1] * z.astype(np.float64)
    scale = np.abs(x.astype(np.float64) * y) + np.abs(z)
    assert (np.abs(f32(run(prog, [x, y, z])) - exact) <= 2.0 ** -23 * scale).all()


@pytest.mark.parametrize("dtype", ["int32", "uint32"])
def test_constant_shift_and_add_are_immediates(dtype):
    """x << 5, x >> 3 (arithmetic for int32, logical for uint32) and x + (-7): SFPSHFT/SFPIADD immediates, no constant
    register (sfpu_ops.IMM_SEQS), same bits as numpy."""
    rng = np.random.default_rng(3)
    npt = np.int32 if dtype == "int32" else np.uint32
    x = rng.integers(-2**31, 2**31, N).astype(np.int64).astype(npt)
    for op, k, ref in [("SHL", 5, x << npt(5)), ("SHR", 3, x >> npt(3)), ("ADD", -7, (x.astype(np.int64) - 7).astype(npt))]:
        d = ValueDAG()
        d.out = d.add(op, dtype, (d.add("LOAD", dtype, (), 0), d.add("CONST", dtype, (), k)))
        prog = compile_sfpu(d, 1, dtype)
        assert not any(decode(w)[0] == "SFPLOADI" for w in prog.setup + prog.body), (op, disassemble(prog))
        np.testing.assert_array_equal(run(prog, [x]).view(npt), ref, err_msg=op)


def test_int32_divmod_on_the_model():
    """CDIV/CMOD/FLOORDIV/FLOORMOD against tinygrad's definitions on every pair of edge values and random ones
    (x / 0 = 0, x % 0 = x, INT_MIN / -1 = INT_MIN: tinygrad.helpers, wrapped to int32)."""
    rng = np.random.default_rng(4)
    edge = np.array([0, 1, -1, 2, -2, 5, -5, 2**31 - 1, -2**31, 2**30, -2**30, 2**30 + 1, -2**30 - 1, 2**31 - 2,
                     -2**31 + 1, 77, -12345], np.int64)
    a = np.concatenate([np.repeat(edge, len(edge)), rng.integers(-2**31, 2**31, N)])[:N].astype(np.int32)
    b = np.concatenate([np.tile(edge, len(edge)), rng.integers(-2**31, 2**31, N // 2),
                        rng.integers(-9, 10, N)])[:N].astype(np.int32)
    for op, f in (("CDIV", cdiv), ("CMOD", cmod), ("FLOORDIV", floordiv), ("FLOORMOD", floormod)):
        want = np.array([(f(int(p), int(q)) + 2**31) % 2**32 - 2**31 for p, q in zip(a, b)], np.int64).astype(np.int32)
        np.testing.assert_array_equal(run_op(op, ["int32", "int32"], "int32", a, b).view(np.int32), want, err_msg=op)
