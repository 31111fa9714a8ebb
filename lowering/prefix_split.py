"""Prefix reductions (cumsum, cumprod, cummax, logcumsumexp's sum) split into blocks: K^2 -> about 2 K^1.5 points.

tinygrad writes a cumulative reduction along an axis of length K as a window reduction over a padded copy (tinygrad
0.14 tensor.py `_cumalu`; an axis longer than 512 is first cut into rows of 256 by `_split_cumalu`): output i is
REDUCE(op, WHERE(k + i < K - 1, identity, x[i + k - (K - 1)]), k) over k in [0, K). Run as written that is K
points per output, K^2 per line, half of them the identity. With j = k + i - (K - 1) (the element the point reads) the
same value is the prefix op(v(j) for j <= i), and the prefix splits into whole blocks of B = ceil(sqrt(K)) elements
plus the part of i's own block up to i:

    S(u)     = op(v(B u + t) for t in [0, B), B u + t < K)                  one value per (line, block u)
    out(i)   = op over one range u in [0, nb + B)  (nb = ceil(K / B) blocks):
               u <  nb: S(u) for the blocks before i's own (u < i // B), else the identity
               u >= nb: v(B (i // B) + u - nb) where that element is at or before i, else the identity

The block sums S are a reduction that the outer one reads over its own range u: the staged family
(lowering/families/staged.py) materializes them in a first launch (n_lines x (nb + B) x B points), and the outputs
reduce nb + B points each. Both launches are the ordinary one-pass families' plans.

When it applies (`prefix_form`), proved on the UOps with tinygrad's own simplifier (`sym`), never assumed from the
shape of tinygrad's code: a REDUCE over one range k of size K with no REDUCE inside, and a range i of the body of the
same size such that (1) with k = j - i + K - 1 for any j < 0 (a variable in [-(K-1), -1]) the body simplifies to the
reduction's identity (those points contribute nothing), and (2) with j a range in [0, K) the body no longer reads i
(it is a function v(j) of the element alone, so v(j) for j > i is v at the in-range point k = j, i = K - 1 and every
load stays inside its buffer). Element indices outside [0, K) never reach a load: the block terms' indices are
clamped by a WHERE to 0 where their gate is off.
The order of the ADD/MUL operations changes (blocks, then the block results): a float sum or product is rounded
differently from the sequential one, well inside tinygrad's test tolerances; MAX is exact.

This module may import tinygrad's uop/dtype layer, never its device layer, and never `runtime`.
"""
from __future__ import annotations

import math

from tinygrad.uop.ops import AxisType, Ops, UOp, graph_rewrite, identity_element
from tinygrad.uop.symbolic import sym

MIN_GAIN = 2          # split only when the outputs' points drop by at least this factor (K / (nb + B))


def _size(r: UOp) -> int | None:
    return int(r.src[0].arg) if r.src[0].op is Ops.CONST else None


def _is_const(u: UOp, value) -> bool:
    if u.op is not Ops.CONST: return False
    try:
        return float(u.arg) == float(value)
    except (TypeError, ValueError):
        return False


def block_shape(K: int) -> tuple[int, int] | None:
    """(B, nb): blocks of B = ceil(sqrt(K)) elements, nb of them; None when that saves too little (MIN_GAIN)."""
    B = math.isqrt(K - 1) + 1 if K > 1 else 1
    nb = -(-K // B)
    return (B, nb) if K >= MIN_GAIN * (nb + B) else None


def prefix_form(red: UOp, fresh: int) -> tuple[UOp, UOp, UOp] | None:
    """(i, v, j): red is the prefix reduction op(v(j) for j <= i) with v the body over the new range j (RANGE id
    `fresh`, size K), or None (module docstring: when it applies)."""
    if red.op is not Ops.REDUCE or len(red.src) != 2 or red.arg[0] not in (Ops.ADD, Ops.MUL, Ops.MAX): return None
    body, k = red.src
    if k.op is not Ops.RANGE or (K := _size(k)) is None or block_shape(K) is None: return None
    topo = body.toposort()
    if any(u.op is Ops.REDUCE for u in topo): return None
    ident = identity_element(red.arg[0], red.dtype)
    neg = UOp.variable("prefix_j", -(K - 1), -1, dtype=k.dtype)
    for i in sorted((u for u in topo if u.op is Ops.RANGE and u is not k and _size(u) == K), key=lambda r: r.arg[0]):
        off = graph_rewrite(body.substitute({k: neg - i + (K - 1)}), sym)
        if not _is_const(off, ident): continue
        j = UOp.range(K, fresh, AxisType.REDUCE, dtype=k.dtype)
        v = graph_rewrite(body.substitute({k: j - i + (K - 1)}), sym)
        if i not in v.toposort(): return i, v, j
    return None


def split_prefix(red: UOp, i: UOp, v: UOp, j: UOp, fresh: int) -> UOp:
    """The blocked form of red = op(v(j) for j <= i) (module docstring); u and t get RANGE ids fresh, fresh + 1."""
    K = _size(j)
    B, nb = block_shape(K)
    ident = UOp.const(identity_element(red.arg[0], red.dtype), red.dtype)
    u = UOp.range(nb + B, fresh, AxisType.REDUCE, dtype=j.dtype)
    t = UOp.range(B, fresh + 1, AxisType.REDUCE, dtype=j.dtype)

    def at(elem: UOp, valid: UOp) -> UOp:
        """v at element `elem` where `valid`, else the identity. The loads of v that depend on the element are gated
        by `valid` too (the frontend then folds WHERE(valid, load, 0) into the load: no mask stream for a sum) and
        the element index is 0 where not valid (index math between loads stays in range)."""
        gated = {x: x.replace(src=(x.src[0], x.src[1].get_idx().valid(valid & x.src[1].get_valid()), *x.src[2:]))
                 for x in v.toposort() if x.op is Ops.INDEX and j in x.src[1].toposort()}
        return valid.where(v.substitute(gated).substitute({j: valid.where(elem, 0)}), ident)

    full_elem = u * B + t
    blocks = UOp(Ops.REDUCE, red.dtype, (at(full_elem, full_elem < K), t), red.arg)
    whole = (u < i // B).where(blocks, ident)                             # the blocks before i's own (u < nb)
    own_elem = (i // B) * B + (u - nb)
    own = at(own_elem, (u < nb).logical_not() & (own_elem < i + 1))       # i's own block, up to i (u >= nb)
    return UOp(Ops.REDUCE, red.dtype, (whole.alu(red.arg[0], own), u), red.arg)   # one of them is the identity


def split_prefix_reductions(sink: UOp) -> UOp:
    """The sink with every prefix reduction (prefix_form) in blocked form (split_prefix)."""
    fresh = 1 + max((u.arg[0] for u in sink.toposort() if u.op is Ops.RANGE), default=0)
    subs: dict[UOp, UOp] = {}
    for red in [u for u in sink.toposort() if u.op is Ops.REDUCE]:
        if (form := prefix_form(red, fresh)) is not None:
            subs[red] = split_prefix(red, *form, fresh + 1)
            fresh += 3
    return sink.substitute(subs) if subs else sink
