"""UNPACR's and PACR's datum moves, single MVMULs and ELWMUL / ELWADD / ELWSUB in C (runtime/emu/accel/tile_native.c)
against the Python path (TT_EMU_TILE_NATIVE=0): every conversion on random words with the special patterns (denormals,
-0, Inf, NaN payloads, rounding ties), the ELW numerics on random operands (MVMUL's are tests/emu/test_native_mvmul.py's
and tests/e2e/test_emu_fast_paths.py's), and whole compiled kernels with the C part on and off - the same output bytes,
the same emulated cycles of every core and Tensix thread, and the C part really taken."""
import numpy as np
import pytest
from tinygrad import Tensor, dtypes
from tinygrad.uop.ops import Ops

from tt_backend import knobs
from tt_backend.bench.kernels import launch_plan, matmul_plan
from tt_backend.chip.numerics import formats as F
from tt_backend.chip.numerics import fpu_math as fm
from tt_backend.chip.numerics.dst import Dst
from tt_backend.lowering.codegen.sources import split
from tt_backend.lowering.select import lower
from tt_backend.placement_eval import placer
from tt_backend.runtime.compile import compile_kernel
from tt_backend.runtime.emu.accel import tile_native
from tt_backend.runtime.emu.device import EmuDevice

pytestmark = pytest.mark.skipif(tile_native.module() is None, reason=tile_native.status())

_SPECIALS = [0x00000000, 0x80000000, 0x00000001, 0x807FFFFF, 0x00800000, 0x7F800000, 0xFF800000, 0x7FC00001,
             0xFF800001, 0x3F808000, 0x3F818000, 0xBF7F8000, 0x7F7FFFFF, 0x007FFFFF, 0x0000FFFF, 0x47FFF000]


def _words(rng, n: int) -> np.ndarray:
    x = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    x[:len(_SPECIALS)] = _SPECIALS
    x[len(_SPECIALS):2 * len(_SPECIALS)] = np.array(_SPECIALS, np.uint32) >> 16 | 0x8000
    return x


@pytest.mark.parametrize("key", sorted(tile_native.UNPACK_KINDS))
def test_unpack_conversions_match_formats(key):
    """tile_native.unpack of each conversion = unpack_pack's conversion of the same L1 bytes, written at an offset
    into a larger target without touching the rest."""
    in_fmt, out_fmt, to_dst = key
    rng = np.random.default_rng(in_fmt * 16 + out_fmt)
    nbytes = F.element_bits(in_fmt) // 8
    raw = _words(rng, 512)
    l1 = (raw if nbytes == 4 else (raw & 0xFFFF).astype(np.uint16)).view(np.uint8).copy()
    py_conv = {(F.FP32, F.TF32, False): F.unp_fp32_to_tf32, (F.FP32, F.BF16, False): F.unp_fp32_to_bf16,
               (F.BF16, F.BF16, False): F.bf16_to_src, (F.FP16, F.FP16, False): F.fp16_to_src}.get(key, lambda r: r)
    want = py_conv(l1.view("<u4" if nbytes == 4 else "<u2").astype(np.uint32))
    out = np.full((64, 16), 0xA5A5A5A5, np.uint32)
    assert tile_native.module().unpack(l1, 0, 512, tile_native.UNPACK_KINDS[key], out, 96) is True
    flat = out.reshape(-1)
    assert np.array_equal(flat[96:608], want)
    assert (flat[:96] == 0xA5A5A5A5).all() and (flat[608:] == 0xA5A5A5A5).all()
    assert tile_native.module().unpack(l1, 16, 512, tile_native.UNPACK_KINDS[key], out, 0) is False   # L1 bounds


@pytest.mark.parametrize("key", sorted(tile_native.PACK_KINDS))
@pytest.mark.parametrize("rows", [(0, 4, 1), (3, 2, 2), (9, 1, 1)])
def test_pack_conversions_match_formats(key, rows):
    """tile_native.pack of each conversion = the packer's early and late conversions of the same Dst rows
    (read through Dst.read16 for a 16-bit Dst), written at an address without touching the rest of L1."""
    rd32, in_fmt, out_fmt = key
    first, n_rows, step = rows
    rng = np.random.default_rng(in_fmt + 16 * first)
    dst = Dst()
    dst.rows32[:] = _words(rng, 512 * 16).reshape(512, 16)
    first += 17 * (not rd32)                       # (Dst16b rows from both halves of their Dst32b rows)
    picked = np.arange(first, first + step * n_rows, step)
    if rd32:
        v = dst.rows32[picked].reshape(-1)
        want = {F.FP32: lambda: v, F.INT32: lambda: v, F.BF16: lambda: F.early_fp32_to_bf16(v),
                F.INT16: lambda: F.shuffle_bf16(v >> 16)}[in_fmt]()
    else:
        h = dst.read16(np.repeat(picked, 16), np.tile(np.arange(16), n_rows))
        want = F.early_bf16(F.unshuffle_bf16(h))
    want = want.astype("<u4" if F.element_bits(out_fmt) == 32 else "<u2").view(np.uint8)
    l1 = np.full(4096, 0xA5, np.uint8)
    got = tile_native.module().pack(dst.rows32, first, n_rows, step, 16, tile_native.PACK_KINDS[key], l1, 112)
    assert got == want.size and np.array_equal(l1[112:112 + got], want)
    assert (l1[:112] == 0xA5).all() and (l1[112 + got:] == 0xA5).all()
    assert tile_native.module().pack(dst.rows32, first, n_rows, step, 16, tile_native.PACK_KINDS[key], l1,
                                     4096 - 16) == -1


def _src_words(rng, shape, fmt: int) -> np.ndarray:
    """Src words of format `fmt` whose exponents crowd together (carries, cancellations, ties), with zeros and
    denormals."""
    sign = rng.integers(0, 2, shape, dtype=np.uint32) << 31
    exp = rng.integers(120, 132, shape, dtype=np.uint32)
    exp[rng.random(shape) < 0.05] = 0
    exp[rng.random(shape) < 0.02] = 254
    x = sign | exp << 23 | rng.integers(0, 1 << 23, shape, dtype=np.uint32)
    return x & np.uint32(fm.src19_mask(fmt) | 0x1FFF * (fmt == F.FP32))     # (FP32 Src words keep their low bits)


@pytest.mark.parametrize("fa, fb", [(F.BF16, F.BF16), (F.TF32, F.BF16), (F.BFP8, F.TF32)])
def test_elw_matches_fpu_math(fa, fb):
    """tile_native.elw = _elw's numpy path (fpu_math.elwmul19 / elwadd19 of the 19-bit views, SrcB's sign flipped for
    ELWSUB, its row / column broadcasts, its zero test only with flushing, Dst or 0 accumulated) for every op, phase,
    broadcast, flush and accumulate, on random operands; the rows are marked written and no longer undefined."""
    rng = np.random.default_rng(fa * 16 + fb)
    for op, name in enumerate(("ELWMUL", "ELWADD", "ELWSUB")):
        for phase in range(4 if op == 0 else 1):
            for bcast in range(4):
                for flush in (True, False):
                    accumulate = op == 0 or bool(rng.integers(0, 2))
                    srca, srcb = _src_words(rng, (64, 16), fa), _src_words(rng, (64, 16), fb)
                    dst = Dst()
                    dst.rows32[:] = _words(rng, 512 * 16).reshape(512, 16)
                    dst.cleared16[:] = True
                    ra, rb, rd = 8 * rng.integers(0, 8, 3)
                    rd = rd * 8
                    b = srcb[rb:rb + 8].astype(np.int64)
                    b = np.broadcast_to(b[0:1], (8, 16)) if bcast & 2 else b
                    b = np.broadcast_to(b[:, 0:1], (8, 16)) if bcast & 1 else b
                    b = b ^ 0x80000000 if op == 2 else b
                    a19, b19 = fm.src19(srca[ra:ra + 8], fa), fm.src19(b, fb)
                    zb = fm.is_zero19(b19) & flush
                    old = dst.rows32[rd:rd + 8].astype(np.int64) if accumulate else np.zeros((8, 16), np.int64)
                    want = (fm.elwmul19(a19, b19, old, phase, True, True, zero_b=zb) if op == 0 else
                            fm.elwadd19(a19, b19, old, True, True, accumulate_dst=accumulate, zero_b=zb))
                    before = dst.rows32.copy()
                    tile_native.module().elw(srca, ra, srcb, rb, dst.rows32, dst.written, dst.cleared16, rd,
                                             fm.src19_mask(fa), fm.src19_mask(fb), op, bcast, flush, accumulate,
                                             phase)
                    assert np.array_equal(dst.rows32[rd:rd + 8], want), (name, phase, bcast, flush, accumulate)
                    before[rd:rd + 8] = want
                    assert np.array_equal(dst.rows32, before)
                    assert dst.written.sum() == 8 and dst.written[rd:rd + 8].all()
                    assert (~dst.cleared16).sum() == 16 and not dst.cleared16[2 * rd:2 * rd + 16].any()


def _tinygrad_plan(build, name: str):
    call = [c for c in build().schedule_linear().src if c.op is Ops.CALL][-1]
    return lower(call.src[0], name, placer(knobs.err_budget(), knobs.place_spec()))


def _elementwise(dtype, n):
    a, b = Tensor.empty(n, n, dtype=dtype, device="CPU"), Tensor.empty(n, n, dtype=dtype, device="CPU")
    return _tinygrad_plan(lambda: a * b + a, f"tile_native_ew_{dtype.name}_{n}")


def _reduce(n):
    a = Tensor.empty(n, n, dtype=dtypes.float32, device="CPU")
    return _tinygrad_plan(lambda: a.sum(-1), f"tile_native_sum_{n}")


def _inputs(plan, rng) -> dict[int, np.ndarray]:
    """Random finite values of every input buffer (bf16 buffers as the top halves of float32s)."""
    out = {}
    for i, buf in enumerate(plan.buffers):
        if i == plan.output.buf:
            continue
        if buf.nbytes % 4 == 0 and "bfloat16" not in plan.name and "matmul" not in plan.name:
            out[buf.slot] = rng.standard_normal(buf.nbytes // 4).astype(np.float32)
        else:
            out[buf.slot] = (rng.standard_normal(buf.nbytes // 2).astype(np.float32).view(np.uint32) >> 16
                             ).astype(np.uint16)
    return out


KERNELS = {"ew_f32_40": lambda: _elementwise(dtypes.float32, 40),
           "ew_bf16_64": lambda: _elementwise(dtypes.bfloat16, 64),
           "sum_f32_64": lambda: _reduce(64),
           "mm_LoFi": lambda: matmul_plan(64, "LoFi"),
           "mm_HiFi2": lambda: matmul_plan(64, "HiFi2"),
           "mm_HiFi4": lambda: matmul_plan(64, "HiFi4")}


@pytest.mark.needs_cc
@pytest.mark.parametrize("kernel", sorted(KERNELS))
def test_kernels_identical_with_and_without_c(kernel, monkeypatch):
    """Two warm launches of a compiled kernel with the C part on and off: the same output bytes and EmuDevice.stats()
    (every core's and Tensix thread's cycles), with the C part moving datums of both UNPACR and PACR and running
    the matmuls' MVMULs and the bf16 elementwise kernel's ELWMUL / ELWADD."""
    plan = KERNELS[kernel]()
    arrays = _inputs(plan, np.random.default_rng(len(kernel)))
    elfs = compile_kernel(*split(plan.render()), plan.name)
    calls = {"unpack": 0, "pack": 0, "mvmul": 0, "elw": 0}
    real = tile_native.module()

    class Counted:
        def __getattr__(self, name):
            fn = getattr(real, name)
            return lambda *a: calls.__setitem__(name, calls[name] + 1) or fn(*a)

    runs = []
    monkeypatch.setattr(tile_native, "HANDLERS_NATIVE", False)        # (the handlers' calls, counted, from Python)
    for on in (True, False):
        monkeypatch.setattr(tile_native, "module", (lambda: Counted()) if on else (lambda: None))
        dev = EmuDevice()
        runs.append(([launch_plan(dev, plan, arrays, elfs)[0] for _ in range(2)], dev.stats()))
        if on:
            assert calls["unpack"] > 0 and calls["pack"] > 0, calls          # the C part ran
            assert (calls["mvmul"] > 0) == kernel.startswith("mm_"), calls
            assert (calls["elw"] > 0) == (kernel == "ew_bf16_64"), calls
    assert runs[0] == runs[1]
    assert len(set(runs[0][0][0])) > 1                                        # (a real output, not a constant fill)
