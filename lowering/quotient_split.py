"""A reduction body that reads X // D and X % D (X affine in the ranges) split into the cases of X's quotient, kept
only where one case survives: the quotient and remainder become affine and a gate on the remainder a range bound.

Where it comes from: tinygrad's pooling (conv, conv_transpose, avg/max pool: tensor.py `_pool`) repeats the input and
reshapes it, so a window element is x[(i * k + o) % i]-like index math; the gradient of that repeat sums over the
repeats r and reads the pooled gradient at t = i * r + a through t // (i + d) (the window offset) and t % (i + d) (the
output position), gated by t % (i + d) < o. conv_transpose3d's input gradient is such a sum with D = 14 and
i = 13: run as written, each point's index is two integer divisions in the reader's scalar loop, and the gather the
staged family hoists out of the sum depends on every (r, a) pair instead of the 3 window offsets.

The rewrite: write X = D * Q + M with Q and M affine (each coefficient c = D * round(c / D) + the rest), so M's
bounds are narrow. On the points where k * D <= M < (k + 1) * D, X // D = Q + k and X % D = M - k * D exactly (the
quotient-remainder pair of X is unique), so the body equals the sum over k of WHERE(k D <= M < (k + 1) D, body[X //
D := Q + k, X % D := M - k D], identity). tinygrad's own simplifier (`sym`) folds the cases its range bounds rule
out (a gate `M + 14 < 11` with M >= -3 is False); when exactly one case is left and it divides no expression of X's
ranges any more, the body becomes that case (its condition a range bound, its index affine), otherwise the body is
left as it was (more cases, or a division left, would only add work). The case's rewritten reads are gated by the
case's condition as well (outside it, Q + k may index past the buffer; lowering/implied_gates.py drops the terms
again where an enclosing WHERE makes them redundant).

Where it applies: the innermost REDUCE that owns a range of X (its body holds every use of X), with the divisor a
positive constant and X affine in the ranges (integer coefficients). Exact: the same loads at the same points.
This module may import tinygrad's uop/dtype layer, never its device layer, and never `runtime`.
"""
from __future__ import annotations

from tinygrad.uop.ops import Ops, UOp, graph_rewrite, identity_element
from tinygrad.uop.symbolic import sym

from tt_backend.lowering.frontend import affine

MAX_CASES = 4        # quotient cases tried per (X, D): each one is a rewritten copy of the body to simplify


def _divisions(sink: UOp) -> list[tuple[UOp, int]]:
    """The distinct (X, D) of the sink's X // D and X % D with a positive constant integer D."""
    out: dict[tuple[UOp, int], None] = {}
    for u in sink.toposort():
        if u.op in (Ops.FLOORDIV, Ops.FLOORMOD) and u.src[1].op is Ops.CONST and isinstance(u.src[1].arg, int) \
                and u.src[1].arg > 1:
            out[(u.src[0], u.src[1].arg)] = None
    return list(out)


def _owner(sink: UOp, x: UOp) -> UOp | None:
    """The innermost REDUCE that reduces a range of x (its body holds every use of x), or None."""
    rngs = {r for r in x.toposort() if r.op is Ops.RANGE}
    owners = [u for u in sink.toposort() if u.op is Ops.REDUCE and rngs & set(u.src[1:])]
    return min(owners, key=lambda u: len(u.src[0].toposort()), default=None)


def quotient_parts(x: UOp, d: int) -> tuple[UOp, UOp] | None:
    """(Q, M) affine with x = d * Q + M identically and M's coefficients within d / 2, or None (x not affine)."""
    if (co := affine(x)) is None: return None
    q, m = x.const_like(0), x.const_like(0)
    for r, c in co.items():
        qc = (2 * c + d) // (2 * d)                      # the nearest multiple of d
        term = (lambda k: x.const_like(k)) if r is None else (lambda k, r=r: r.cast(x.dtype) * k)
        if qc: q = q + term(qc)
        if c - d * qc: m = m + term(c - d * qc)
    return q, m


def _divides(u: UOp, x: UOp) -> bool:
    """Whether u still divides an expression of x's ranges (a nested X % D // E, as in a strided max pool's gradient:
    the case would trade one division for a signed one and a condition, no gain)."""
    rngs = {r for r in x.toposort() if r.op is Ops.RANGE}
    return any(v.op in (Ops.FLOORDIV, Ops.FLOORMOD) and rngs & {r for r in v.src[0].toposort() if r.op is Ops.RANGE}
               for v in u.toposort())


def split_quotient(body: UOp, x: UOp, d: int, identity: UOp) -> UOp | None:
    """body with x // d and x % d affine in its one surviving quotient case (module docstring), or None."""
    if (parts := quotient_parts(x, d)) is None: return None
    q, m = parts
    lo, hi = int(m.vmin) // d, int(m.vmax) // d
    if hi - lo + 1 > MAX_CASES: return None
    divs = [u for u in body.toposort() if u.op in (Ops.FLOORDIV, Ops.FLOORMOD) and u.src[0] is x and
            u.src[1].op is Ops.CONST and u.src[1].arg == d]
    live = []
    for k in range(lo, hi + 1):
        cond = graph_rewrite((m < k * d).logical_not() & (m < (k + 1) * d), sym)
        if cond.op is Ops.CONST and cond.arg is False: continue
        # (the case is kept as substituted: simplified, the terms it shares with other reads would no longer match)
        case = body.substitute({u: (q + k) if u.op is Ops.FLOORDIV else (m - k * d) for u in divs})
        if (simple := graph_rewrite(case, sym)) is identity: continue
        if live or _divides(simple, x): return None        # a second case, or a division left: no gain
        live.append((cond, case))
    if not live: return None
    cond, case = live[0]
    if cond.op is Ops.CONST and cond.arg is True: return case
    # the case's rewritten reads are gated by its condition too: outside it their affine index may leave the buffer
    old = set(body.toposort())
    gated = {x: x.replace(src=(x.src[0], x.src[1].get_idx().valid(cond & x.src[1].get_valid()), *x.src[2:]))
             for x in case.toposort() if x.op is Ops.INDEX and x not in old and x.src[0].op is not Ops.INDEX}
    case = case.substitute(gated)
    # where every read the case makes is gated off it is already the identity (a gated load under a sum): no select;
    # a case that is itself gated (WHERE(g, v, identity), a pooled gradient's window test) takes the condition into g
    if graph_rewrite(case.substitute({x: x.const_like(0) for x in gated.values()}), sym) is identity: return case
    if case.op is Ops.WHERE and case.src[2].op is Ops.CONST and case.src[2].arg == identity.arg:
        return (cond & case.src[0]).where(case.src[1], case.src[2])
    return cond.where(case, identity)


def split_quotients(sink: UOp) -> UOp:
    """The sink with each (X, D) split where one quotient case survives (module docstring)."""
    for x, d in _divisions(sink):
        if (red := _owner(sink, x)) is None or red.arg[0] not in (Ops.ADD, Ops.MAX, Ops.MUL): continue
        identity = graph_rewrite(red.src[0].const_like(identity_element(red.arg[0], red.dtype)), sym)
        if (body := split_quotient(red.src[0], x, d, identity)) is not None:
            sink = sink.substitute({red: red.replace(src=(body, *red.src[1:]))})
    return sink
