"""Reductions over pure index math folded at compile time: a REDUCE of an integer or bool value that reads no buffer
(only ranges and constants) has the same value on every launch, so it is evaluated here with numpy and, where that
value is affine in the ranges it depends on (a closed form), replaced by that affine expression.

Where it comes from: tinygrad builds `masked_select`, `nonzero` and the indices of `__getitem__` from cumulative sums
(an arange compared with itself, summed over a triangular window) and one-hot scatters of them; when the mask or the
index is a constant (`x.masked_select(Tensor(True))`), the whole index computation is range math, nested REDUCEs of
REDUCEs (a cumsum of a scatter of a cumsum). Run as written that is every combination of their ranges, 320^5 points
for 320 elements; folded, the gather's index is `r` and the kernel reads x[r] (tinygrad's own `pm_load_collapse` then
turns the one-hot sum into that load, lowering/frontend.py `lower_ast`).

Evaluation: each REDUCE is evaluated over the ranges it depends on and its own, the inner ones first, as broadcast
int64 arrays (the exact integer meaning of lowering/index.py's OPS), in chunks of at most CHUNK_POINTS points along
its largest free range; the folds of one kernel are abandoned once they have evaluated FOLD_MAX_POINTS points in all
(the reductions not folded by then stay as they are). A REDUCE whose value leaves its dtype's range is not folded (the device would wrap it).
A value that is not affine (a step function, a table) is not folded either: the REDUCEs inside it are tried instead.
This module may import tinygrad's uop/dtype layer, never its device layer, and never `runtime`.
"""
from __future__ import annotations

import math

import numpy as np
from tinygrad.dtype import dtypes
from tinygrad.uop.ops import Ops, UOp

from tt_backend.lowering.index import CAST_NP, OPS

CHUNK_POINTS = 1 << 22          # points evaluated at once (int64 temporaries of 32 MB)
FOLD_MAX_POINTS = 1 << 26       # points the folds of one kernel may evaluate in all (a few seconds of numpy)
REDUCE_NP = {Ops.ADD: np.sum, Ops.MAX: np.max, Ops.MUL: np.prod}


class _NotFoldable(Exception):
    """The value has an op, dtype or size this evaluator does not take."""


def _index_like(u: UOp) -> bool:
    return u.dtype == dtypes.bool or dtypes.is_int(u.dtype)


def _size(r: UOp) -> int:
    if r.src[0].op is not Ops.CONST: raise _NotFoldable("symbolic range size")
    return int(r.src[0].arg)


def foldable(u: UOp) -> bool:
    """A REDUCE of an integer or bool value over constant-size ranges that reads no buffer."""
    if u.op is not Ops.REDUCE or u.arg[0] not in REDUCE_NP or not _index_like(u): return False
    ops = {x.op for x in u.toposort()}
    return not ops & {Ops.INDEX, Ops.LOAD, Ops.PARAM}


class _Evaluator:
    """Values of index UOps over the ranges of one folded REDUCE: every range is an axis of a broadcast space."""

    def __init__(self, root: UOp, spent: int):
        rngs = sorted({x for x in root.toposort() if x.op is Ops.RANGE}, key=lambda r: r.arg[0])
        self.axis = {r: k for k, r in enumerate(rngs)}
        self.points = spent               # points evaluated so far for this kernel

    def arange(self, r: UOp, values: np.ndarray) -> np.ndarray:
        shape = [1] * len(self.axis)
        shape[self.axis[r]] = len(values)
        return values.reshape(shape)

    def value(self, u: UOp, env: dict[UOp, np.ndarray]) -> np.ndarray:
        """u's values where range r takes the values env[r] (a 1-D array each, on r's axis)."""
        memo: dict[UOp, np.ndarray] = {}

        def go(x: UOp) -> np.ndarray:
            if (v := memo.get(x)) is not None: return v
            if x.op is Ops.RANGE: v = self.arange(x, env[x])
            elif x.op is Ops.CONST:
                if not isinstance(x.arg, (bool, int)): raise _NotFoldable(f"constant {x.arg!r}")
                v = np.asarray(x.arg, dtype=np.bool_ if isinstance(x.arg, bool) else np.int64)
            elif x.op is Ops.REDUCE: v = self.reduce(x, env)
            elif x.op is Ops.CAST: v = CAST_NP["bool" if x.dtype == dtypes.bool else "int"](go(x.src[0]))
            elif x.op.name in OPS and x.op.name not in ("LOAD", "ALL") and _index_like(x):
                v = OPS[x.op.name].np(None, *(go(s) for s in x.src))
            else: raise _NotFoldable(f"{x.op.name} in {x.dtype}")
            memo[x] = v
            return v
        return go(u)

    def reduce(self, red: UOp, env: dict[UOp, np.ndarray]) -> np.ndarray:
        """The REDUCE's values over its free ranges (sized axes; every other axis 1), in chunks of at most
        CHUNK_POINTS points along its largest free range."""
        own = list(red.src[1:])
        free = {x for x in red.src[0].toposort() if x.op is Ops.RANGE} - set(own) - self.inner_own(red)
        env = {**env, **{r: np.arange(_size(r), dtype=np.int64) for r in own}}
        points = math.prod(len(env[r]) for r in free | set(own))
        if points > CHUNK_POINTS and free:
            split = max(free, key=lambda r: len(env[r]))
            step = max(1, len(env[split]) * CHUNK_POINTS // points)
            return np.concatenate([self.reduce(red, {**env, split: env[split][i:i + step]})
                                   for i in range(0, len(env[split]), step)], axis=self.axis[split])
        self.points += points
        if self.points > FOLD_MAX_POINTS: raise _NotFoldable("too many points")
        shape = [1] * len(self.axis)
        for r in free | set(own): shape[self.axis[r]] = len(env[r])
        body = np.broadcast_to(self.value(red.src[0], env), shape)
        out = REDUCE_NP[red.arg[0]](body, axis=tuple(self.axis[r] for r in own), keepdims=True)
        if red.dtype == dtypes.bool: return out != 0          # a bool sum is any, a bool product all
        dt = dtypes.int32 if red.dtype == dtypes.weakint else red.dtype
        if out.min() < dt.min or out.max() > dt.max: raise _NotFoldable(f"{red.dtype} overflow (the device wraps)")
        return out

    @staticmethod
    def inner_own(red: UOp) -> set[UOp]:
        """Ranges reduced by REDUCEs inside red's body (not free in red)."""
        return {r for x in red.src[0].toposort() if x.op is Ops.REDUCE for r in x.src[1:]}


def closed_form(red: UOp, spent: list[int] | None = None) -> UOp | None:
    """The folded REDUCE as an affine UOp expression of its free ranges, or None (not foldable, not affine, or its
    values leave the dtype's range). `spent`: the points the kernel's folds evaluated so far, updated."""
    spent = [0] if spent is None else spent
    ev = _Evaluator(red, spent[0])
    try:
        env = {r: np.arange(_size(r), dtype=np.int64) for r in ev.axis}
        vals = ev.reduce(red, env)
    except (_NotFoldable, ValueError, OverflowError, FloatingPointError, ZeroDivisionError):
        return None
    finally:
        spent[0] = ev.points
    if red.dtype == dtypes.bool:
        return UOp.const(bool(vals.flat[0]), red.dtype) if (vals == vals.flat[0]).all() else None
    origin = int(vals[(0,) * vals.ndim])
    coefs = {}
    for r, k in ev.axis.items():
        if vals.shape[k] > 1:
            coefs[r] = int(vals[tuple(1 if j == k else 0 for j in range(vals.ndim))]) - origin
    fit = np.asarray(origin, np.int64) + sum((c * ev.arange(r, env[r]) for r, c in coefs.items()), np.int64(0))
    if not np.array_equal(np.broadcast_to(fit, vals.shape), vals): return None
    out = UOp.const(origin, red.dtype)
    for r, c in coefs.items():
        if c: out = out + r.cast(red.dtype) * UOp.const(c, red.dtype)
    return out


def fold_index_reductions(sink: UOp) -> UOp:
    """The sink with each outermost foldable REDUCE whose value has a closed form replaced by it (inner ones tried
    where an outer one has none)."""
    subs: dict[UOp, UOp] = {}
    seen: set[UOp] = set()
    spent = [0]
    todo = [sink]
    while todo:                      # outermost first: a REDUCE inside a folded one is never visited
        u = todo.pop()
        if u in seen: continue
        seen.add(u)
        if foldable(u) and (c := closed_form(u, spent)) is not None:
            subs[u] = c
            continue
        todo.extend(u.src)
    return sink.substitute(subs) if subs else sink
