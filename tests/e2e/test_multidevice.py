"""Several chips through tinygrad's own multi-device path: `TT:<target>:<n>` is chip n of a target (its own emulator
or ttsim instance), `Tensor.shard` splits work across them, tinygrad's scheduler inserts the cross-device allreduce
(naive, ring or all-to-all: `RING` / `ALL2ALL`) and the copies between devices (`TTAllocator._transfer`, through the
host). Everything is compared with tinygrad's CPU device on random inputs.

Tolerances, stated per case:
  * copies, shards, per-device elementwise work: exact (the same fp32 operations as the CPU device);
  * float32 sums: |tt - cpu| <= 4 * eps32 * K * sum|x|, K the number of summed elements (the TT and CPU devices sum
    in different orders, and an allreduce adds the per-chip partials in another order again);
  * fp32 matmul (SFPU, fp32-faithful): the normalised error |C - C_cpu| / (|A| @ |B|) <= 2 * K * 2^-24, as in
    tests/e2e/test_matmul.py, plus one fp32 rounding per allreduce addition when K is split across chips.
"""
from __future__ import annotations

import numpy as np
import pytest

from tinygrad import Device, Tensor
from tinygrad.helpers import Context
from tinygrad.dtype import dtypes
from tinygrad.uop.ops import AxisType, Ops, UOp

from tests.support import target_params

EPS32 = 2.0 ** -23
rng = np.random.default_rng(11)

pytestmark = [pytest.mark.needs_cc, pytest.mark.usefixtures("serial_compile")]


def chips(target: str, n: int) -> tuple[str, ...]:
    """n chips of `target` that no other test module uses (tinygrad keeps devices for the whole process)."""
    return tuple(f"TT:{target}:{i}" for i in range(1, n + 1))


def cpu(a: np.ndarray) -> Tensor:
    return Tensor(a, device="CPU")


def assert_sum_close(got: np.ndarray, want: np.ndarray, x: np.ndarray, k: int) -> None:
    bound = 4 * EPS32 * k * np.abs(x).sum()
    assert np.abs(np.asarray(got, np.float64) - want).max() <= bound, (got, want, bound)


def test_every_device_is_its_own_chip():
    a, b = chips("emu", 2)
    assert Device[a].target is not Device[b].target
    assert Device[a].allocator.arena is not Device[b].allocator.arena
    # tinygrad's own name for chip 0 is the bare target ("TT:emu:0" canonicalises to "TT:emu")
    assert Device.canonicalize("TT:emu:0") == "TT:emu"


def test_copies_between_chips_and_the_host(monkeypatch):
    """TT -> TT goes through the allocator's _transfer (one read, one write: no tinygrad staging buffer); TT <-> CPU
    through copyin / copyout. Every hop is exact."""
    from tt_backend.ops_tt import TTAllocator
    calls, real = [], TTAllocator._transfer
    monkeypatch.setattr(TTAllocator, "_transfer", lambda self, *a, **kw: calls.append(a[2]) or real(self, *a, **kw))
    a, b, c = chips("emu", 3)
    x = rng.standard_normal((8, 24)).astype(np.float32)
    on_a = Tensor(x, device=a).realize()
    on_c = on_a.to(b).to(c).realize()
    assert calls == [x.nbytes, x.nbytes]
    np.testing.assert_array_equal(on_c.to("CPU").numpy(), x)
    np.testing.assert_array_equal((on_c + 1).numpy(), (cpu(x) + 1).numpy())


@pytest.mark.parametrize("n", [2, 4])
def test_sharded_elementwise_and_per_chip_reduce(n):
    x = rng.standard_normal((4 * n, 40)).astype(np.float32)
    t = Tensor(x).shard(chips("emu", n), axis=0)
    np.testing.assert_array_equal((t * 2 + 1).numpy(), (cpu(x) * 2 + 1).numpy())
    assert_sum_close(t.sum(axis=1).numpy(), x.astype(np.float64).sum(1), x, 40)


@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.parametrize("axis", [None, 0])
def test_sum_over_the_sharded_axis_is_an_allreduce(n, axis):
    """(t * 2).sum() over a sharded axis: each chip sums its shard, tinygrad's allreduce adds the partials (its kernels
    are a precompiled function whose scalar chunks arrive as RESHAPE(PARAM): lowering/frontend.py folds them)."""
    x = rng.standard_normal((4 * n, 24)).astype(np.float32)
    t = Tensor(x).shard(chips("emu", n), axis=0)
    got = (t * 2).sum(axis).numpy()
    want = (2 * x.astype(np.float64)).sum(axis)
    assert_sum_close(got, want, 2 * x, x.size if axis is None else x.shape[0])
    assert_sum_close(got, (cpu(x) * 2).sum(axis).numpy(), 2 * x, x.size if axis is None else x.shape[0])


@pytest.mark.parametrize("mode", [{"RING": 0}, {"RING": 2}, {"ALL2ALL": 2}], ids=["naive", "ring", "all2all"])
def test_allreduce_schemes_on_four_chips(mode):
    """tinygrad's three allreduce schemes (chunks padded, shrunk and copied around the ring): every chip ends with
    the sum of the four shards."""
    x = rng.standard_normal((4 * 8, 64)).astype(np.float32)
    ts = Tensor(x).shard(chips("emu", 4), axis=0).realize()
    with Context(**mode):
        out = Tensor(UOp.allreduce(ts.uop, Ops.ADD, ts.device)).numpy()
    parts = x.reshape(4, 8, 64)
    want = parts.astype(np.float64).sum(0)
    np.testing.assert_allclose(out.reshape(4, 8, 64), np.broadcast_to(want, (4, 8, 64)),
                               atol=4 * EPS32 * 4 * np.abs(parts).sum(0).max())
    for copy in out.reshape(4, 8, 64)[1:]:   # every scheme reduces each element once and copies the result around
        np.testing.assert_array_equal(copy, out.reshape(4, 8, 64)[0])


@pytest.mark.parametrize("n", [2, 4])
def test_sharded_matmul(n):
    """Data parallel (rows of A sharded, B on every chip) and model parallel over K (A's columns and B's rows sharded:
    each chip's partial product, then the allreduce)."""
    m, k, cols = 8 * n, 16 * n, 24
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, cols)).astype(np.float32)
    want = (cpu(a) @ cpu(b)).numpy()
    scale = np.abs(a) @ np.abs(b)
    devs = chips("emu", n)
    rows = (Tensor(a).shard(devs, axis=0) @ Tensor(b).shard(devs, axis=None)).numpy()
    assert (np.abs(rows - want) / scale).max() <= 2 * k * 2.0 ** -24
    inner = (Tensor(a).shard(devs, axis=1) @ Tensor(b).shard(devs, axis=0)).numpy()
    assert (np.abs(inner - want) / scale).max() <= 2 * k * 2.0 ** -24 + n * EPS32


@pytest.mark.parametrize("target", target_params("ttsim"))
def test_two_ttsim_chips_match_two_emulated_chips(target):
    """Each TT:ttsim:<n> is its own ttsim instance; the sharded program gives the emulated chips' bits."""
    x = rng.standard_normal((8, 32)).astype(np.float32)
    w = rng.standard_normal((32, 16)).astype(np.float32)

    def run(tgt):
        devs = chips(tgt, 2)
        t = Tensor(x).shard(devs, axis=0)
        return (t * 2 + 1).sum().numpy(), (t @ Tensor(w).shard(devs, axis=None)).numpy()

    sim, emu = run(target), run("emu")
    assert Device["TT:ttsim:1"].target.transport is not Device["TT:ttsim:2"].target.transport
    for s, e in zip(sim, emu):
        np.testing.assert_array_equal(s.view(np.uint32), e.view(np.uint32))
    assert_sum_close(sim[0], (2 * x.astype(np.float64) + 1).sum(), 2 * x + 1, x.size)


# ------------------------------------------------------------------------------------------- the DEVICE axis
# A kernel of a multi-device tensor may index by its chip's position (tinygrad's RANGE of AxisType.DEVICE, bound per
# chip at launch): ops_tt lowers one variant per position. 2D sharding (rows over position // 2, columns over
# position % 2 of four chips) is the smallest program that produces such kernels. tinygrad 0.14 builds it only on a
# device tuple that starts with chip 0 (on its CPU device too: "sharded on multiple axes" otherwise).
CHIPS_0_TO_3 = tuple(f"TT:emu:{i}" for i in range(4))

def shard_2d(x: np.ndarray, devs: tuple[str, ...]) -> Tensor:
    pos = UOp.range(4, -1, AxisType.DEVICE)
    rows, cols = pos // 2, pos % 2
    u = Tensor(x).uop.copy_to_device(devs)._shard(0, rows)._shard(1, cols).unshard((0, 1), (rows, cols))
    return Tensor(u)


def test_2d_shard_elementwise_sum_matmul():
    devs = CHIPS_0_TO_3
    a = rng.standard_normal((8, 8)).astype(np.float32)
    b = rng.standard_normal((8, 8)).astype(np.float32)
    np.testing.assert_array_equal((shard_2d(a, devs) * 2 + 1).contiguous().realize().numpy(), (cpu(a) * 2 + 1).numpy())
    assert_sum_close(shard_2d(a, devs).sum().numpy(), a.astype(np.float64).sum(), a, a.size)
    got = (shard_2d(a, devs) @ shard_2d(b, devs)).contiguous().realize().numpy()
    want = (cpu(a) @ cpu(b)).numpy()
    assert (np.abs(got - want) / (np.abs(a) @ np.abs(b))).max() <= 2 * 8 * 2.0 ** -24 + 2 * EPS32


def test_device_axis_kernels_are_one_variant_per_position(monkeypatch):
    from tt_backend.ops_tt import DeviceAxisProgram, device_variants, pack_variants, unpack_variants
    assert unpack_variants(pack_variants([b"a", b"bcd", b""])) == [b"a", b"bcd", b""]
    assert unpack_variants(b"TTBNDL1\0...") == [b"TTBNDL1\0..."]
    pos = UOp.range(4, -1, AxisType.DEVICE)
    assert [v.simplify().src[0].arg for v in device_variants((pos * 3).sink())] == [0, 3, 6, 9]
    plain = UOp.const(1, dtypes.int).sink()
    assert device_variants(plain) == [plain]
    launched, real = [], DeviceAxisProgram.__call__
    monkeypatch.setattr(DeviceAxisProgram, "__call__",
                        lambda self, *bufs, vals=(), **kw: launched.append(vals) or real(self, *bufs, vals=vals, **kw))
    x = rng.standard_normal((4, 4)).astype(np.float32)
    np.testing.assert_array_equal((shard_2d(x, CHIPS_0_TO_3) - 3).contiguous().realize().numpy(), (cpu(x) - 3).numpy())
    assert sorted(launched) == [(0,), (1,), (2,), (3,)]
