"""A STORE of WHERE(r < a, x, y) over an output range r split into two STOREs over r's two parts.

tinygrad's gradient of a padded view writes the gradient of the whole padded buffer and zeroes the pad part:
cumprod's backward stores WHERE(p < K - 1, 0, REDUCE(...)) over the 2K - 1 positions p of the padded line, so run as
written the reduction is computed for every p and thrown away for the K - 1 pads (half its points). Split, the kernel
stores x over r in [0, a) and y over r in [a, n), each side computed only where it is stored; a kernel with several
STOREs is one stage per STORE (lowering/families/staged.py), so each side is planned by the one-pass families.

When it applies: the kernel has one STORE; its value (under CASTs) is a WHERE whose condition compares an output
range with a constant (r < a or a < r, tinygrad's two forms of a bound) that cuts r into two non-empty parts; and one of
its sides holds a reduction (splitting elementwise sides would only add a launch). Each part's STORE is the original
one with r replaced by a new range over that part (plus its start), so indices, gates and values are exactly the
original ones at the points each part covers.

This module may import tinygrad's uop/dtype layer, never its device layer, and never `runtime`.
"""
from __future__ import annotations

from tinygrad.dtype import dtypes
from tinygrad.uop.ops import Ops, UOp

from tt_backend.lowering.frontend import strip_ops


def _cut(cond: UOp) -> tuple[UOp, int] | None:
    """(r, c) when cond is a bound r < c or c - 1 < r of a range r by a constant: its value changes between r = c - 1
    and r = c (tinygrad's symbolic rewrites then fold it to a constant in each part); else None."""
    if cond.op is not Ops.CMPLT: return None
    lhs, rhs = (_uncast(x) for x in cond.src)
    if lhs.op is Ops.RANGE and rhs.op is Ops.CONST and isinstance(rhs.arg, int): return lhs, rhs.arg
    if rhs.op is Ops.RANGE and lhs.op is Ops.CONST and isinstance(lhs.arg, int): return rhs, lhs.arg + 1
    return None


def _uncast(u: UOp) -> UOp:
    """u without the casts of a range to integer dtypes that hold all its values (an arange's range is cast to its
    dtype); u itself otherwise."""
    x = u
    while x.op is Ops.CAST and dtypes.is_int(x.dtype) and x.dtype.max >= x.src[0].vmax: x = x.src[0]
    return x if x.op is Ops.RANGE else u


def _has_reduce(u: UOp) -> bool:
    return any(x.op is Ops.REDUCE for x in u.toposort())


def split_stored_where(sink: UOp) -> UOp:
    """The sink with its STORE split over the two parts of a range bound (module docstring), or the sink itself."""
    if len(sink.src) != 1 or (end := sink.src[0]).op is not Ops.END or (store := end.src[0]).op is not Ops.STORE:
        return sink
    where = strip_ops(store.src[1], Ops.CAST)
    if where.op is not Ops.WHERE or (rc := _cut(where.src[0])) is None: return sink
    r, cut = rc
    if r not in end.src[1:] or not 0 < cut < int(r.src[0].arg) or \
            not (_has_reduce(where.src[1]) or _has_reduce(where.src[2])):
        return sink
    fresh = 1 + max(u.arg[0] for u in sink.toposort() if u.op is Ops.RANGE)

    def part(k: int, start: int, size: int) -> UOp:
        rp = UOp.range(size, fresh + k, r.arg[-1], dtype=r.dtype)
        moved = store.substitute({r: rp + start if start else rp})
        return end.replace(src=(moved, *(rp if x is r else x for x in end.src[1:])))
    return sink.replace(src=(part(0, 0, cut), part(1, cut, int(r.src[0].arg) - cut)))
