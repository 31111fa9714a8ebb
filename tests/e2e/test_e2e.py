"""End to end: tinygrad programs on Device TT (emulator) against tinygrad's CPU device.

Every kernel here is lowered to SFPU code, compiled for the baby RISC-V cores, and run on the emulated tile. Inputs are
random; tolerances are per op, in float32 ulps (the SFPU flushes denormals, so inputs and results stay normal).
"""
import os
import subprocess
import sys

import numpy as np
import pytest

from tinygrad import Device, Tensor, dtypes

from tests.support.elementwise import BINARY, SHAPES, UNARY
from tests.support.ulp import ulp_distance

pytestmark = pytest.mark.needs_cc

# ulp bounds per op, measured on the SFPU sequences (see lowering/codegen/sfpu_ops.py); 0 = bit-exact
ULP = {"add": 0, "mul": 0, "sub": 0, "neg": 0, "max": 0, "recip": 0, "sqrt": 1, "exp2": 2, "log2": 2, "trunc": 0}


TT = "TT:emu"          # the device the current test runs on (set per target by tt_target)


@pytest.fixture(autouse=True)
def tt_target(target):
    """Every test runs on each target (tests/conftest.py `target`): the emulator, ttsim when TT_SIMULATOR is set, and
    the card path (the real tt-umd's simulation device) on that ttsim when tt-umd is installed too."""
    global TT
    TT = f"TT:{target}"
    if target != "emu":
        if not (sim := Device[TT].target).alive:
            sim.restart()                      # an earlier test's fatal simulator error must not fail this one
    return target


def on_tt(compute):
    """compute() for the TT side. ttsim stopping on a feature it does not implement is a gap of the simulator, not
    a wrong result: the test xfails naming it (a wrong result, or any other error, still fails)."""
    try:
        return compute()
    except Exception as e:
        msg = getattr(e, "sim_message", "")
        if "UnimplementedFunctionality" in msg or "UnsupportedFunctionality" in msg:
            pytest.xfail(f"ttsim does not implement this kernel: {msg}")
        raise


def run_both(fn, *arrays):
    tt = on_tt(lambda: fn(*[Tensor(a, device=TT) for a in arrays]).numpy())
    cpu = fn(*[Tensor(a, device="CPU") for a in arrays]).numpy()
    return tt, cpu


def assert_ulp(tt, cpu, bound, what):
    assert tt.shape == cpu.shape, (tt.shape, cpu.shape)
    if tt.dtype == np.float32:
        d = ulp_distance(tt, cpu)
        worst = int(d.max()) if d.size else 0
        assert worst <= bound, f"{what}: max ulp error {worst} > {bound} at {np.unravel_index(d.argmax(), d.shape)}"
    else:
        np.testing.assert_array_equal(tt, cpu, err_msg=what)


rng = np.random.default_rng(0)


def rand(shape, lo=-4.0, hi=4.0):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("op", list(BINARY))
def test_binary(op, shape):
    a, b = rand(shape), rand(shape)
    tt, cpu = run_both(BINARY[op], a, b)
    assert_ulp(tt, cpu, ULP[op], f"{op} {shape}")


@pytest.mark.parametrize("shape", SHAPES[:4], ids=str)
@pytest.mark.parametrize("op", list(UNARY))
def test_unary(op, shape):
    fn, (lo, hi) = UNARY[op]
    a = rand(shape, lo, hi)
    tt, cpu = run_both(fn, a)
    assert_ulp(tt, cpu, ULP[op], f"{op} {shape}")


def test_sin_absolute_error():
    a = rand((3, 100), -100, 100)
    tt, cpu = run_both(lambda x: x.sin(), a)
    assert np.abs(tt - cpu).max() <= 4e-7 * 4, np.abs(tt - cpu).max()


@pytest.mark.parametrize("shape", [(5, 33), (2, 3, 5, 7)], ids=str)
def test_compare_and_where(shape):
    a, b = rand(shape), rand(shape)
    b[..., 0] = a[..., 0]                                  # exercise equality
    for fn in (lambda x, y: x < y, lambda x, y: x != y, lambda x, y: (x < y).where(x, y * 2)):
        tt, cpu = run_both(fn, a, b)
        assert_ulp(tt, cpu, 0, "compare/where")


def test_broadcast_permute_pad_shrink():
    a, b, c = rand((64, 1)), rand((1, 50)), rand((50, 64))
    tt, cpu = run_both(lambda x, y, z: x * y + z.T, a, b, c)                  # broadcast + transposed view
    # x*y + z is one SFPMAD (as the CPU's fma): within one rounding of the operands' magnitude (cancellation aside,
    # SFPMAD keeps only 3 extra product bits: docs/isa.md §3); everything else in this kernel is exact
    scale = np.abs(a * b) + np.abs(c.T)
    assert (np.abs(tt - cpu) <= 2.0 ** -23 * scale).all(), "broadcast+permute"
    tt, cpu = run_both(lambda x: x.pad(((1, 2), (0, 3))) + 1.0, rand((5, 33)))  # pads read as 0
    assert_ulp(tt, cpu, 0, "pad")
    tt, cpu = run_both(lambda x: x[1:4, ::2] * 3.0, rand((7, 40)))              # shrink + stride
    assert_ulp(tt, cpu, 0, "shrink")


def test_pad_of_a_strided_slice():
    """tinygrad leaves this STORE gated by a tautology (!(a && b) || a); the frontend finds it true everywhere (found
    by the random programs)."""
    x = rng.integers(-1000, 1000, (28, 5, 1)).astype(np.int32)
    tt, cpu = run_both(lambda t: t[6:28:3, 0:5:3, 0:1:2].pad(((0, 2), (0, 2), (2, 1))), x)
    assert_ulp(tt, cpu, 0, "pad of a strided slice")


def test_fusions_reading_more_buffers_than_dst_holds_are_split_by_tinygrad():
    """13 input buffers in one expression: tinygrad's scheduler, told the TT limit (tt_backend/tinygrad_knobs.py),
    stores an intermediate and starts a new kernel instead of handing the device a kernel it cannot hold in Dst.
    Additions in tinygrad's order, float32 intermediates: bit-identical to the CPU device."""
    from tinygrad.helpers import GlobalCounters
    from tinygrad.schedule.rangeify import DEVICE_MAX_BUFS
    from tt_backend.lowering.codegen.sfpu_codegen import MAX_SLOTS
    from tt_backend.tinygrad_knobs import KERNEL_BUFFERS
    assert KERNEL_BUFFERS == MAX_SLOTS and DEVICE_MAX_BUFS["TT"] == KERNEL_BUFFERS
    arrays = [rand((33, 40)) for _ in range(13)]
    kernels = GlobalCounters.kernel_count
    tt, cpu = run_both(lambda *xs: sum(xs[1:], xs[0]) * xs[3], *arrays)
    assert GlobalCounters.kernel_count - kernels >= 3        # at least two TT kernels (+ the CPU device's)
    assert_ulp(tt, cpu, 0, "13 inputs")


@pytest.mark.parametrize("src,dst", [(dtypes.float32, dtypes.int32), (dtypes.int32, dtypes.float32),
                                     (dtypes.float32, dtypes.bfloat16), (dtypes.bfloat16, dtypes.float32),
                                     (dtypes.float32, dtypes.bool), (dtypes.bool, dtypes.float32)])
def test_casts(src, dst):
    x = rand((3, 77), -1000, 1000)
    x[0, :5] = 0.0
    base_tt, base_cpu = Tensor(x, device=TT).cast(src), Tensor(x, device="CPU").cast(src)
    tt, cpu = on_tt(lambda: base_tt.cast(dst).numpy()), base_cpu.cast(dst).numpy()
    if dst == dtypes.bfloat16:
        tt, cpu = tt.astype(np.float32), cpu.astype(np.float32)
    np.testing.assert_array_equal(tt, cpu)


def test_bf16_arithmetic():
    a, b = rand((9, 70)), rand((9, 70))
    tt, cpu = run_both(lambda x, y: (x.cast(dtypes.bfloat16) * y.cast(dtypes.bfloat16) + 1).cast(dtypes.float32), a, b)
    np.testing.assert_array_equal(tt, cpu)


def test_readme_expression_in_fresh_interpreter(tt_target):
    """The README's demo expression with DEVICE=TT (and DEV=TT) in a fresh interpreter, against CPU; TT_BACKEND
    picks the target."""
    code = ("from tinygrad import Tensor, Device; import numpy as np; assert Device.DEFAULT == 'TT', Device.DEFAULT\n"
            "np.random.seed(1); an=np.random.randn(64,128).astype(np.float32); bn=np.random.randn(128).astype(np.float32)\n"
            "f=lambda a,b: ((a*b+1).maximum(0.5) - (a<0).where(a.exp2(), b.reciprocal()))\n"
            "tt=f(Tensor(an),Tensor(bn)).numpy(); cpu=f(Tensor(an,device='CPU'),Tensor(bn,device='CPU')).numpy()\n"
            "print(float(np.abs(tt-cpu).max()/np.abs(cpu).max()))")
    for var in ("DEVICE", "DEV"):
        env = {k: v for k, v in os.environ.items() if k not in ("DEVICE", "DEV")}
        env[var], env["TT_BACKEND"] = "TT", tt_target
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, out.stderr[-3000:]
        assert float(out.stdout.strip().splitlines()[-1]) < 1e-6
