"""Ranges split at a divisor: a range r of size S that the kernel reads as `r // c` and `r % c` (c dividing S) becomes
two ranges, h of size S / c and g of size c, with r = h * c + g: `r // c` is h, `r % c` is g and every other use of r
is the affine h * c + g. An index that was not affine in r (so no strided reader could walk it) is then affine in h
and g.

Where it comes from: grouped-query attention broadcasts each key head to c query heads, and tinygrad indexes the key
with the query head's range divided by c (`K[b, r // c, k, d]`). Split, the query head range is (h, g) and the key's
index is affine with stride 0 along g: a strided matmul (matmul_match.matmul_of) whose rows are g and the queries
(matmul_spec.chained_run).

A range read through several divisors (r // 2 and r // 4) is left as it is; a quotient that is divided again
(`(r // 4) // 2`) is split again, since the quotient is a range of its own after the first split. The pass only
rewrites the index math, so the kernel computes the same values at the same output elements.
This module may import tinygrad's uop layer, never its device layer, and never `runtime`.
"""
from __future__ import annotations

from tinygrad.uop.ops import Ops, UOp

RANGE_LISTS = (Ops.REDUCE, Ops.END)   # ops whose sources after the first are ranges (the ranges they close)
QUOTIENT = (Ops.FLOORDIV, Ops.CDIV)   # equal on a range (never negative)
REMAINDER = (Ops.FLOORMOD, Ops.CMOD)


def _divided(u: UOp, r: UOp) -> bool:
    """Whether u is `r // c` or `r % c` for a constant c."""
    return u.op in QUOTIENT + REMAINDER and u.src[0] is r and u.src[1].op is Ops.CONST


def _divisor(r: UOp, topo: list[UOp]) -> int | None:
    """The one constant c that r is divided by or taken modulo (`r // c`, `r % c`) when c splits r's size
    (1 < c < size, size % c == 0), else None."""
    if r.src[0].op is not Ops.CONST: return None
    size = int(r.src[0].arg)
    cs = {int(u.src[1].arg) for u in topo if _divided(u, r)}
    if len(cs) != 1: return None
    c = cs.pop()
    return c if 1 < c < size and size % c == 0 else None


def _split(sink: UOp, r: UOp, c: int, next_id: int) -> UOp:
    """The sink with range r split into (h, g), r = h * c + g; h and g get the range ids next_id and next_id + 1
    (after every id in the kernel, h before g as it is the outer one)."""
    size = int(r.src[0].arg)
    h, g = (r.replace(src=(UOp.const(n, r.src[0].dtype), *r.src[1:]), arg=(i, *r.arg[1:]))
            for n, i in ((size // c, next_id), (c, next_id + 1)))
    flat = h * c + g
    new: dict[UOp, UOp] = {}
    for u in sink.toposort():
        if u is r: new[u] = flat
        elif _divided(u, r): new[u] = h if u.op in QUOTIENT else g
        elif u.op in RANGE_LISTS and r in u.src[1:]:
            rngs = tuple(x for s in u.src[1:] for x in ((h, g) if s is r else (new[s],)))
            new[u] = u.replace(src=(new[u.src[0]], *rngs))
        else:
            src = tuple(new[s] for s in u.src)
            new[u] = u if src == u.src else u.replace(src=src)
    return new[sink]


def split_divided_ranges(sink: UOp) -> UOp:
    """The sink with every range read as `r // c` and `r % c` (one divisor c of its size) split into (r // c, r % c),
    repeatedly (a quotient divided again is split again); the sink itself when there is none."""
    while True:
        topo = sink.toposort()
        rngs = sorted((u for u in topo if u.op is Ops.RANGE), key=lambda u: u.arg[0])
        found = next(((r, c) for r in rngs if (c := _divisor(r, topo)) is not None), None)
        if found is None: return sink
        sink = _split(sink, *found, max(r.arg[0] for r in rngs) + 1)
