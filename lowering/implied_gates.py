"""A load's gate terms that an enclosing WHERE already tests dropped from the load (kept as an in-bounds test).

tinygrad gates a padded or pooled read twice: on the load (its INDEX's `valid`) and on the value (WHERE(gate, ..., 0)
around the reduction that reads it). Inside WHERE(g, v, e), v's value is used only where g holds, so a term of g in
the gate of a load inside v decides nothing. It does cost: the term's ranges become ranges of the load, so a
reduction the staged family hoists out of an enclosing sum is materialized over them too (conv_transpose3d's
gradient: the window sum over (offset, output position) pairs instead of the 3^3 offsets, after
lowering/quotient_split.py made its index affine).

Only the loads inside a reduction under the WHERE are changed, and only where the reduction then depends on fewer
ranges: a load that is the WHERE's value itself is better left gated (the frontend folds WHERE(gate, gated load, 0)
into the load), and a sum the frontend merges with the reduction inside it (frontend.merge_nested_sum: one launch,
where staging would save less than a launch) keeps its loads' gates, folded the same way. A dropped term is replaced by what keeps the read inside its buffer: where the index's range bounds
reach below 0 or past the buffer's end, the test 0 <= index (or index < size), which holds wherever the original
gate did. A load whose buffer size is not a constant keeps its gate. Exact: the same values wherever they are used.
This module may import tinygrad's uop/dtype layer, never its device layer, and never `runtime`.
"""
from __future__ import annotations

from tinygrad.dtype import Invalid
from tinygrad.uop.ops import Ops, UOp

from tt_backend.lowering.frontend import conjuncts, free_ranges, merge_nested_sum, output_ranges, strip_invalid


def _buffer_size(index: UOp) -> int | None:
    buf = index.src[0]
    while buf.op is not Ops.PARAM and buf.src: buf = buf.src[0]
    size = buf.src[0] if buf.op is Ops.PARAM and buf.src else None
    return size.arg if size is not None and size.op is Ops.CONST and isinstance(size.arg, int) else None


def _regated(index: UOp, known: frozenset[UOp]) -> UOp:
    """index (an INDEX) without the gate terms in `known`, with the bounds test that keeps the read in the buffer."""
    if len(index.src) != 2: return index
    conds, idx = strip_invalid(index.src[1])
    terms = conjuncts(conds)
    if not terms & known or (size := _buffer_size(index)) is None: return index
    kept = [t for t in terms if t not in known]
    if idx.vmin < 0: kept.append((idx < 0).logical_not())
    if idx.vmax >= size: kept.append(idx < size)
    gate = kept[0] if kept else None
    for t in kept[1:]: gate = gate & t
    return index.replace(src=(index.src[0], idx if gate is None else idx.valid(gate)))


def drop_implied_gates(sink: UOp) -> UOp:
    """The sink with the gate terms an enclosing WHERE tests dropped from the loads inside a reduction under it, where
    that lets the reduction depend on fewer ranges (module docstring). A load that is the WHERE's value itself keeps
    its gate: the frontend folds WHERE(gate, gated load, 0) into the load, one stream and no select."""
    memo: dict[tuple[UOp, frozenset, bool], UOp] = {}
    ranges_memo: dict[UOp, frozenset] = {}
    out_ranges = output_ranges(sink)

    def go(u: UOp, known: frozenset[UOp], in_reduce: bool) -> UOp:
        if (key := (u, known, in_reduce)) in memo: return memo[key]
        if u.op is Ops.WHERE and not (u.src[2].op is Ops.CONST and u.src[2].arg is Invalid):   # not an index's valid
            g, v, e = u.src
            new = u.replace(src=(go(g, known, in_reduce), go(v, known | conjuncts([g]), False),
                                 go(e, known, in_reduce)))
        elif u.op is Ops.REDUCE:
            new = u.replace(src=(go(u.src[0], known, True), *u.src[1:]))
            if new is not u and not free_ranges(new, ranges_memo) < free_ranges(u, ranges_memo):
                new = u.replace(src=(go(u.src[0], frozenset(), True), *u.src[1:]))
            if new is not u and merge_nested_sum(out_ranges, new) is not None: new = u   # the frontend merges it
        else:
            new = u.replace(src=tuple(go(s, known, in_reduce) for s in u.src)) if u.src else u
            if new.op is Ops.INDEX and known and in_reduce: new = _regated(new, known)
        memo[key] = new
        return new
    return go(sink, frozenset(), False)
