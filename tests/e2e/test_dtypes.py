"""The narrow dtypes on Device TT against tinygrad's CPU device, bit for bit: int8/uint8/int16/uint16 (every value of
the type) loaded, computed in int32 lanes, wrapped and stored back; float16 (every bit pattern widened, random and
edge float32 values rounded); BITCAST float32 <-> int32; float constants in index expressions (interpolate); and
int64/float64, which are declared unsupported (TTRenderer.supported_dtypes) and refused by name, except int64 values
within 32 bits (tinygrad's promotion of uint32 meeting a signed integer: lowering/int64.py).

Exactness: integer results and float16 results are compared bit for bit. NaN compares as NaN (the SFPU's NaN is the
canonical quiet NaN, the CPU's may keep a payload); float16 denormals are float32 normals, so the SFPU's denormal flush
(docs/isa.md §3.4) never touches them.
"""
import json

import numpy as np
import pytest

from tinygrad import Device, Tensor, dtypes

from tt_backend import placement_eval
from tt_backend.chip.errors import UnsupportedOp
from tests.support import target_params

pytestmark = pytest.mark.needs_cc

NARROW_INTS = {dtypes.int8: np.int8, dtypes.uint8: np.uint8, dtypes.int16: np.int16, dtypes.uint16: np.uint16}


def run(dev: str, fn, *arrays: np.ndarray, dtype=None) -> np.ndarray:
    return fn(*[Tensor(a, device=dev, dtype=dtype) for a in arrays]).numpy()


def same_bits(got: np.ndarray, want: np.ndarray) -> bool:
    """Equal dtypes and equal bits, NaN matching any NaN."""
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    if got.dtype.kind != "f":
        return np.array_equal(got, want)
    u = {2: np.uint16, 4: np.uint32}[got.dtype.itemsize]
    return bool(np.all((got.view(u) == want.view(u)) | (np.isnan(got) & np.isnan(want))))


def all_values(np_dt) -> np.ndarray:
    info = np.iinfo(np_dt)
    return np.arange(info.min, info.max + 1, dtype=np.int64).astype(np_dt)


@pytest.mark.parametrize("dt", list(NARROW_INTS), ids=str)
def test_every_value_loads_computes_and_stores(serial_compile, dt):
    """Every value of the type loaded, through arithmetic that wraps (tinygrad's CPU device: two's complement
    truncation) and stored; more ops and casts to int32/float32 on every 8-bit value and on 16-bit edges + a sample."""
    x = all_values(NARROW_INTS[dt])
    fn = lambda a: a * 3 + 1                                # wraps in the narrow type
    assert same_bits(run("TT", fn, x, dtype=dt), run("CPU", fn, x, dtype=dt))
    if x.itemsize == 2:
        rng = np.random.default_rng(0)
        x = np.concatenate([x[:130], x[-130:], x[len(x) // 2 - 130:len(x) // 2 + 130], rng.choice(x, 500)])
    programs = {
        "-x": lambda a: -a,
        "x>>1|x<<3": lambda a: (a >> 1) | (a << 3),
        "int32": lambda a: a.cast(dtypes.int32) * 1000,     # widened first: no wrap
        "float32": lambda a: a.cast(dtypes.float32) * 0.5,
        "max": lambda a: a.maximum(a.flip(0)),
    }
    for name, fn in programs.items():
        got, want = run("TT", fn, x, dtype=dt), run("CPU", fn, x, dtype=dt)
        assert same_bits(got, want), name


@pytest.mark.parametrize("dt", list(NARROW_INTS), ids=str)
def test_casts_into_the_narrow_type_wrap(serial_compile, dt):
    """int32 (edges and random) and float32 (in int32 range, fractions truncated toward zero) cast into the type."""
    rng = np.random.default_rng(1)
    i = np.concatenate([np.array([0, 1, -1, 127, 128, -128, -129, 255, 256, 32767, 32768, -32768, 65535, 65536,
                                  2**31 - 1, -2**31], np.int64), rng.integers(-2**31, 2**31, 240)]).astype(np.int32)
    f = np.concatenate([rng.uniform(-70000, 70000, 200), rng.uniform(-300, 300, 56)]).astype(np.float32)
    for src in (i, f):
        got, want = run("TT", lambda a: a.cast(dt), src), run("CPU", lambda a: a.cast(dt), src)
        assert same_bits(got, want), src.dtype


def test_uint8_min_and_image_style_pipeline(serial_compile):
    """test_ops' TestOpsUint8 patterns: relu().cast(uint8), min over uint8, a nearest resize of uint8."""
    x = np.random.default_rng(2).uniform(-5, 30, (1, 2, 12, 12)).astype(np.float32)
    for fn in (lambda a: (10 * a).relu().cast(dtypes.uint8),
               lambda a: a.cast(dtypes.uint8).min(),
               lambda a: a.relu().cast(dtypes.uint8).interpolate(size=(5, 7), mode="nearest")):
        assert same_bits(run("TT", fn, x), run("CPU", fn, x))


@pytest.mark.parametrize("target", target_params("emu", "ttsim"))
def test_float16_every_bit_pattern_widens_exactly(serial_compile, target):
    """The reader's widening (templates/device/tt_convert.h) normalises denormals with Zbb's clz and minu, which the
    compiler does not emit under rv32im (.insn): ttsim executes them as the emulator does."""
    h = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    got = run(f"TT:{target}", lambda a: a.cast(dtypes.float32), h)
    assert same_bits(got, h.astype(np.float32))


def test_float16_widening_costs_the_same_for_every_class_of_value(serial_compile, monkeypatch, tmp_path):
    """One tile of zeros, of denormals, of normals widened: the same reader cycles (tt_convert.h's one straight path;
    a denormal used to cost a loop pass per leading zero: 33,107 cycles against 20,829 for normals), so the launch
    model's one figure per datum (mover_cost.FLOAT16_WIDEN_EXTRA) holds whatever the data; inf and NaN branch off
    to a shorter path. Each launch within 25 % of its prediction."""
    ramp = np.arange(1024, dtype=np.uint16)
    tiles = {"zero": np.zeros(1024, np.uint16), "denormal": ramp % 0x3FF + 1, "normal": ramp + 0x3C00,
             "inf_nan": ramp + 0x7C00}
    reports = {}
    for name, bits in tiles.items():
        monkeypatch.setenv("TT_DUMP", str(tmp_path / name))
        got = run("TT:emu", lambda a: a.cast(dtypes.float32), bits.view(np.float16))
        assert same_bits(got, bits.view(np.float16).astype(np.float32)), name
        (reports[name],) = [json.loads(p.read_text()) for p in (tmp_path / name).glob("*/report.json")]
    reader = {name: r["measured_cycles"]["brisc"] for name, r in reports.items()}
    assert reader["zero"] == reader["denormal"] == reader["normal"], reader
    assert reader["inf_nan"] <= reader["normal"], reader
    for name, r in reports.items():
        assert abs(r["predicted_launch_cycles"]["total"] / r["emulated_cycles"] - 1) <= 0.25, (name, r)


F16_EDGES = [0.0, -0.0, 1e-8, -1e-8, 2.98e-8, 2.9802322e-8, 5.96e-8, 8.9e-8, 6.1e-5, 6.103515e-5, 6.09e-5,
             65504.0, 65519.99, 65520.0, -65520.0, 1e6, -1e6, np.inf, -np.inf, np.nan, 1 / 3, 2049.0, 2051.0,
             1e-45, 1e-38, 0.1, -2.5]


@pytest.mark.parametrize("target", target_params("emu", "ttsim"))
def test_float16_rounding(serial_compile, target):
    """float32 -> float16 rounds to nearest even (SFPU, lowering/codegen/sfpu_ops.py round_f16): overflow to inf,
    the denormal grid below 2^-14, signed zeros; stored by the writer's conversion; read back widened."""
    rng = np.random.default_rng(3)
    x = np.concatenate([np.array(F16_EDGES, np.float32), rng.standard_normal(500).astype(np.float32) * 10.0 **
                        rng.integers(-9, 6, 500)]).astype(np.float32)
    dev = f"TT:{target}"
    with np.errstate(over="ignore"):
        want = x.astype(np.float16)
    assert same_bits(run(dev, lambda a: a.cast(dtypes.float16), x), want)
    # float16 in, float16 out: arithmetic in float32, rounded once at the store (as tinygrad's CPU device computes)
    fn = lambda a: a * 3 + 7
    assert same_bits(run(dev, fn, want), run("CPU", fn, want))


def test_float16_uint32_casts(serial_compile):
    """uint32 <-> float16 (found missing by the random programs): one rounding to nearest even (inf from 65520 on),
    and float16 to uint32 truncating, as numpy converts."""
    u = np.array([0, 1, 2047, 2049, 4097, 65504, 65519, 65520, 70000, 2**24 + 3, 2**32 - 1, 12345], np.uint32)
    with np.errstate(over="ignore"):
        want = u.astype(np.float16)
    assert same_bits(run("TT", lambda a: a.cast(dtypes.float16), u), want)
    h = np.array([0, 0.5, 1.5, 2.5, 65504, 3.75, 1000.5, 7.0], np.float16)
    np.testing.assert_array_equal(run("TT", lambda a: a.cast(dtypes.uint32), h), h.astype(np.uint32))


def test_float16_matmul_matches_cpu(serial_compile):
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((16, 40)).astype(np.float32), rng.standard_normal((40, 8)).astype(np.float32)
    fn = lambda x, y: x.half().matmul(y.half())
    got, want = run("TT", fn, a, b), run("CPU", fn, a, b)
    assert got.dtype == np.float16
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("target", target_params("emu", "ttsim"))
def test_bitcast_float32_int32(serial_compile, target):
    x = np.concatenate([np.array([0.0, -0.0, 1.0, -2.5, np.inf, -np.inf, 3e38], np.float32),
                        np.random.default_rng(5).standard_normal(57).astype(np.float32)])
    dev = f"TT:{target}"
    assert same_bits(run(dev, lambda a: a.bitcast(dtypes.int32), x), x.view(np.int32))
    i = x.view(np.int32)
    assert same_bits(run(dev, lambda a: (a + 0).bitcast(dtypes.float32), i), i.view(np.float32))


@pytest.mark.parametrize("mode", ["nearest", "nearest-exact"])
def test_float_constants_in_index_expressions(serial_compile, mode):
    """interpolate's source index is float32 math over the output index (scale 13/9 etc.): evaluated in C float."""
    rng = np.random.default_rng(6)
    for in_sz, out_sz in [((13,), (9,)), ((9, 11), (10, 13))]:
        x = rng.standard_normal((1, 2, *in_sz)).astype(np.float32)
        fn = lambda a: a.interpolate(size=out_sz, mode=mode)
        assert same_bits(run("TT", fn, x), run("CPU", fn, x)), (in_sz, out_sz)


def test_64_bit_dtypes_are_declared_unsupported_and_refused():
    """The SFPU's lanes are 32 bits and int64/float64 are not emulated: tinygrad learns it from the renderer's
    supported_dtypes (test_ops skips its float64 cases by it), and a kernel that still uses them is refused by name."""
    supported = Device["TT"].renderer.supported_dtypes()
    assert {dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint16, dtypes.float16, dtypes.bfloat16} <= supported
    assert not {dtypes.int64, dtypes.uint64, dtypes.float64} & supported
    with pytest.raises(UnsupportedOp, match="double"):
        (Tensor.ones(4, dtype=dtypes.float64, device="TT") + 1).realize()


U32_EDGES = np.array([0, 1, 5, 7, 2 ** 31 - 1, 2 ** 31, 2 ** 32 - 1, 40000, 3, 2 ** 31 + 5], np.uint32)
I32_EDGES = np.array([-1, 0, 5, 8, 2 ** 31 - 1, -2 ** 31, -7, 40000, 3, 5], np.int32)


@pytest.mark.parametrize("other", [np.int32, np.int16])
def test_comparisons_promoted_to_int64_match_cpu(serial_compile, other):
    """uint32 against a signed integer compares in int64 (tinygrad's promotion); TT decides it on the 32-bit values
    (lowering/int64.py): every pair of edge values both ways, against the CPU device (random programs 5219, 5282)."""
    a = np.repeat(U32_EDGES, len(I32_EDGES))
    b = np.tile(I32_EDGES, len(U32_EDGES)).astype(other)
    for fn in (lambda x, y: x < y, lambda x, y: y < x, lambda x, y: x == y, lambda x, y: x != y,
               lambda x, y: (x <= y) & (y >= 0)):
        assert (run("TT", fn, a, b) == run("CPU", fn, a, b)).all()


def test_int64_values_within_int32_are_computed_in_int32(serial_compile):
    """An int64 intermediate whose bounds tinygrad proves within int32 (uint8 * 3 - int16, widened on purpose) is
    exact in int32 lanes; one that may leave 32 bits (uint32 + int32, an int64 result) is refused by the rule."""
    rng = np.random.default_rng(64)
    u8, i16 = rng.integers(0, 256, 300).astype(np.uint8), rng.integers(-2 ** 15, 2 ** 15, 300).astype(np.int16)
    fn = lambda x, y: (x.cast(dtypes.int64) * 3 - y.cast(dtypes.int64)).maximum(-5).cast(dtypes.int32)
    assert (run("TT", fn, u8, i16) == run("CPU", fn, u8, i16)).all()
    with pytest.raises(UnsupportedOp, match="within int32"):
        run("TT", lambda x, y: x + y, U32_EDGES, I32_EDGES)


def test_measured_error_check_reads_narrow_buffers(serial_compile, monkeypatch):
    """TT_CHECK's float32 reference reads narrow buffers widened to their lane values (tt_backend/placement_eval.py):
    wrapping int8 and float16 kernels measure zero error."""
    monkeypatch.setenv("TT_CHECK", "1")
    placement_eval.CHECKS.clear()
    x = np.arange(-128, 128, dtype=np.int8)
    (Tensor(x, device="TT") * 5 + 3).numpy()
    (Tensor(x.astype(np.float16), device="TT") * 0.5).numpy()
    assert len(placement_eval.CHECKS) == 2 and all(c["measured_error"] == 0 for c in placement_eval.CHECKS)


@pytest.mark.parametrize("target", target_params("emu", "ttsim"))
@pytest.mark.parametrize("dt", [dtypes.int8, dtypes.uint16], ids=str)
def test_narrow_buffers_on_each_target(serial_compile, target, dt):
    """The widening reader and narrowing writer (bulk and gathered: a flip) and the wrap, on the emulator and on
    ttsim: both give tinygrad's CPU device's bits."""
    x = all_values(NARROW_INTS[dt])
    x = x[::32] if x.itemsize == 2 else x     # 2048 of the 16-bit values, every 8-bit one
    for fn in (lambda a: a * 3 + 1, lambda a: a.flip(0) - 7):
        assert same_bits(run(f"TT:{target}", fn, x, dtype=dt), run("CPU", fn, x, dtype=dt))
