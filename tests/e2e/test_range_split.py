"""Ranges split at a divisor (lowering/range_split.py) so that a grouped-query matmul is a strided one.

`q @ k.repeat_interleave(c, 1)^T` indexes k's head with the query head's range divided by c. Checks: the kernel is
matched as a plain (strided, not gathered) batched matmul whose rows are the c query heads of a key head times the
queries (group sizes 2, 3, 4, 8; M, N, K not multiples of a tile); its result against float64 numpy within the SFPU
matmul's bound (K x 2^-24 of sum_k |q k| per element, sfpu_matmul.py; the reader fetches several rows or columns per NoC
read, the writer sends a row block of 16 or 40 contiguous columns as one write); a range read through two divisors is
left unsplit; the split kernel gives the same bits on the emulator and on ttsim (rows written one by one or joined).
"""
from __future__ import annotations

import numpy as np
import pytest
from tinygrad import Tensor, dtypes
from tinygrad.uop.ops import Ops

from tt_backend.bench.kernels import launch_plan
from tt_backend.lowering.codegen.sources import split
from tt_backend.lowering.families.matmul_match import matmul_of
from tt_backend.lowering.families.sfpu_matmul import plan_sfpu_matmul
from tt_backend.lowering.range_split import split_divided_ranges
from tt_backend.runtime.compile import compile_kernel
from tt_backend.runtime.targets import make_device

from tests.support import ttsim_path
from tests.support.matmul_ops import matmul_ast

rng = np.random.default_rng(1731)
pytestmark = pytest.mark.needs_cc


def grouped_scores(q: Tensor, k: Tensor) -> Tensor:
    """q [B, H*c, S, D] against k [B, H, T, D] with each key head shared by c query heads: [B, H*c, S, T]."""
    return q @ k.repeat_interleave(q.shape[1] // k.shape[1], dim=1).transpose(-1, -2)


def shapes(heads: int, group: int, s: int, t: int, d: int) -> list[tuple[int, ...]]:
    return [(2, heads * group, s, d), (2, heads, t, d)]


CASES = {2: (3, 2, 9, 37, 20), 3: (2, 3, 33, 5, 41), 4: (2, 4, 16, 16, 64), 8: (2, 8, 7, 40, 13)}   # c: shapes()


@pytest.mark.parametrize("group", list(CASES))
def test_grouped_matmul_is_strided_and_matches_numpy(group, serial_compile):
    heads, _, s, t, d = CASES[group]
    qs, ks = shapes(heads, group, s, t, d)
    spec = matmul_of(matmul_ast(grouped_scores, [qs, ks], dtypes.float32))
    assert spec is not None and not spec.gathered
    # the query heads sharing a key head are rows of one matmul (matmul_spec.chained_run), not batches
    assert spec.batch == (2, heads) and (spec.M, spec.N, spec.K) == (group * s, t, d)
    q = rng.standard_normal(qs).astype(np.float32)
    k = rng.standard_normal(ks).astype(np.float32)
    got = grouped_scores(Tensor(q, device="TT"), Tensor(k, device="TT")).numpy()
    q64, k64 = q.astype(np.float64), np.repeat(k, group, axis=1).astype(np.float64).swapaxes(-1, -2)
    err = np.abs(got - q64 @ k64) / np.maximum(np.abs(q64) @ np.abs(k64), 1e-30)
    assert err.max() <= d * 2.0 ** -24


def test_two_divisors_are_left_alone():
    """a[r // 2] + b[r // 3] over one range r of 12: no single divisor splits it (the kernel is returned as it is);
    a[r // 4] alone: the range is replaced by two (3 x 4), and no division of a range is left."""
    two = matmul_ast(lambda a, b: a.repeat_interleave(2) + b.repeat_interleave(3), [(6,), (4,)], dtypes.float32)
    assert split_divided_ranges(two) is two
    one = matmul_ast(lambda a: a.repeat_interleave(4) * 2, [(3,)], dtypes.float32)
    done = split_divided_ranges(one)
    ranges = [u for u in done.toposort() if u.op is Ops.RANGE]
    assert sorted(int(r.src[0].arg) for r in ranges) == [3, 4]
    assert not any(u.op in (Ops.FLOORDIV, Ops.FLOORMOD, Ops.CDIV, Ops.CMOD) and u.src[0].op is Ops.RANGE
                   for u in done.toposort())


def run_split_matmul(target: str, q: np.ndarray, k: np.ndarray) -> bytes:
    """The grouped scores of q, k by the SFPU matmul on `target`, as the output's bytes."""
    plan = plan_sfpu_matmul(matmul_of(matmul_ast(grouped_scores, [q.shape, k.shape], dtypes.float32)), "mm_split")
    dev = make_device(target, lib_path=ttsim_path())
    try:
        raw, _ = launch_plan(dev, plan, {1: q, 2: k}, compile_kernel(*split(plan.render()), plan.name))
    finally:
        if hasattr(dev, "close"): dev.close()
    return raw


@pytest.mark.ttsim
@pytest.mark.parametrize("qs,ks", [((1, 6, 5, 24), (1, 2, 9, 24)),      # 9 columns: one NoC write per output row
                                   ((2, 8, 5, 24), (2, 2, 16, 24))])   # 16: a row block's rows in one write
def test_split_matmul_is_bit_identical_on_emu_and_ttsim(qs, ks):
    q, k = (rng.standard_normal(s).astype(np.float32) for s in (qs, ks))
    assert run_split_matmul("emu", q, k) == run_split_matmul("ttsim", q, k)
