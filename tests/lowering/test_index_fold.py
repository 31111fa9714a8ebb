"""Reductions over pure index math folded at compile time (lowering/index_fold.py).

closed_form against a brute-force evaluation (tinygrad's own simplifier on every point, nested loops over the reduce
ranges) on random nested programs of comparisons, sums and wheres of ranges: when it gives a form, that form equals the
reduction at every point; an affine case always gets one, a non-affine one never. The e2e part: masked_select with a
constant mask (a cumsum of a scatter of a cumsum of pure index math: the 320^5-point kernel of tinygrad's
test_masked_select, over the time limit before the fold) on the emulator equals numpy.
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from tinygrad import Tensor, dtypes
from tinygrad.uop.ops import AxisType, Ops, UOp

from tt_backend.lowering.index_fold import closed_form, fold_index_reductions

rng = np.random.default_rng(17)


def _int(v: int) -> UOp:
    return UOp.const(v, dtypes.int)


def _point(u: UOp, env: dict[UOp, int]) -> int:
    """u's value with the ranges in env set, each REDUCE inside it evaluated by looping over its own ranges."""
    if u.op is Ops.REDUCE:
        own = list(u.src[1:])
        terms = [_point(u.src[0], {**env, **dict(zip(own, kp))})
                 for kp in itertools.product(*(range(int(r.src[0].arg)) for r in own))]
        return sum(terms) if u.arg[0] is Ops.ADD else max(terms)
    inner = {x: UOp.const(_point(x, env), x.dtype) for x in u.toposort() if x.op is Ops.REDUCE
             and not any(x in y.src[0].toposort() for y in u.toposort() if y.op is Ops.REDUCE and y is not x)}
    sub = {**inner, **{r: UOp.const(v, r.dtype) for r, v in env.items()}}
    return int(u.substitute(sub).simplify().arg)


def _brute(red: UOp, outs: list[UOp]) -> np.ndarray:
    """red at every point of the output ranges, by nested loops."""
    vals = np.zeros([int(r.src[0].arg) for r in outs], np.int64)
    for pt in itertools.product(*(range(int(r.src[0].arg)) for r in outs)):
        vals[pt] = _point(red, dict(zip(outs, pt)))
    return vals


def _at(form: UOp, outs: list[UOp]) -> np.ndarray:
    vals = np.zeros([int(r.src[0].arg) for r in outs], np.int64)
    for pt in itertools.product(*(range(int(r.src[0].arg)) for r in outs)):
        vals[pt] = int(form.substitute({r: UOp.const(v, r.dtype) for r, v in zip(outs, pt)}).simplify().arg)
    return vals


def _program(seed: int) -> tuple[UOp, list[UOp]]:
    """A random REDUCE over index math: a count (or max) of window positions, maybe of a nested count."""
    g = np.random.default_rng(seed)
    o = [UOp.range(int(g.integers(2, 6)), 0), UOp.range(int(g.integers(2, 5)), 1)]
    k = UOp.range(int(g.integers(2, 9)), 2, AxisType.REDUCE)
    a, b, c = (int(v) for v in g.integers(-3, 4, 3))
    lin = o[0] * a + o[1] * b + c
    if g.integers(2):   # a nested count over another reduce range
        j = UOp.range(int(g.integers(2, 6)), 3, AxisType.REDUCE)
        inner = (j < k + 1).where(_int(1), _int(0)).reduce(j, arg=Ops.ADD)
        body = (inner.cast(dtypes.weakint) < lin + 5).where(_int(1), _int(0))
    else:
        body = (k < lin).where(k.cast(dtypes.int), _int(int(g.integers(-2, 3))))
    return body.reduce(k, arg=Ops.MAX if g.integers(3) == 0 else Ops.ADD), o


@pytest.mark.parametrize("seed", range(24))
def test_closed_form_equals_the_reduction(seed):
    red, outs = _program(seed)
    form, want = closed_form(red), _brute(red, outs)
    if form is None:   # refused only where no affine form exists
        grid = np.meshgrid(*(np.arange(n) for n in want.shape), indexing="ij")
        a = np.stack([g.reshape(-1) for g in grid] + [np.ones(want.size)], 1)
        coef = np.linalg.lstsq(a, want.reshape(-1).astype(float), rcond=None)[0]
        assert not np.allclose(a @ coef, want.reshape(-1))
    else:
        assert not any(u.op is Ops.REDUCE for u in form.toposort())
        np.testing.assert_array_equal(_at(form, outs), want)


def test_affine_count_folds_and_a_step_does_not():
    o, k = UOp.range(7, 0), UOp.range(9, 1, AxisType.REDUCE)
    count = (k < o + 1).where(_int(1), _int(0)).reduce(k, arg=Ops.ADD)      # o + 1: affine for o < 9
    np.testing.assert_array_equal(_at(closed_form(count), [o]), np.arange(1, 8))
    short = UOp.range(4, 2, AxisType.REDUCE)
    clipped = (short < o + 1).where(_int(1), _int(0)).reduce(short, arg=Ops.ADD)   # min(o + 1, 4): not affine
    assert closed_form(clipped) is None
    tri = (k < o + 1).where(k.cast(dtypes.int), _int(0)).reduce(k, arg=Ops.ADD)     # o(o+1)/2: not affine
    assert closed_form(tri) is None


def test_reduction_reading_a_buffer_is_left_alone():
    x = Tensor(rng.standard_normal((4, 6)).astype(np.float32), device="CPU").realize()
    sinks = [c.src[0] for c in x.cumsum(1).schedule_linear().src if c.op is Ops.CALL and c.src[0].op is Ops.SINK]
    assert sinks and all(fold_index_reductions(s) is s for s in sinks)


@pytest.mark.parametrize("shape,full", [((6, 5), False), ((3, 2, 7), True)])
def test_masked_select_with_a_constant_mask(shape, full):
    """The gather index is a cumsum of a scatter of a cumsum of the constant mask: folded, it is the flat position."""
    data = rng.standard_normal(shape).astype(np.float32)
    mask = Tensor.ones(*shape, dtype=dtypes.bool, device="TT") if full else Tensor(True, device="TT")
    np.testing.assert_array_equal(Tensor(data, device="TT").masked_select(mask).numpy(), data.reshape(-1))


def test_bool_reduction_inside_a_count_and_overflow():
    """An inner bool sum is `any` (0/1), not a count, where an outer sum reads it; an int8 sum past 127 is not
    folded (the device wraps it)."""
    k, j = UOp.range(6, 1, AxisType.REDUCE), UOp.range(4, 2, AxisType.REDUCE)
    anyj = (j < k + 1).reduce(j, arg=Ops.ADD)             # any(j <= k): True for every k (a count would be 1..4)
    assert closed_form(anyj.cast(dtypes.int).reduce(k, arg=Ops.ADD)).arg == 6   # not 1+2+3+4+4+4 = 18
    big = UOp.range(200, 3, AxisType.REDUCE)
    assert closed_form(UOp.const(1, dtypes.int8).reduce(big, arg=Ops.ADD)) is None
    assert closed_form(UOp.const(1, dtypes.int32).reduce(big, arg=Ops.ADD)).arg == 200
