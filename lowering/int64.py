"""64-bit integers in a kernel's value part, computed in the SFPU's 32-bit lanes where that is exact.

tinygrad promotes a uint32 meeting a signed integer to int64 (`uint32 < int16`, `uint32 != int32`, `uint32 + int8`),
so int64 values appear in programs that never asked for them. The SFPU has 32-bit lanes; the rule
(docs/tinygrad.md §2):
  * an int64 value whose bounds (tinygrad's symbolic `vmin`/`vmax`, from its operands' dtypes and constants)
    lie within int32 is computed as int32, else within uint32 as uint32: ADD/SUB/MUL/NEG/bitwise/SHL are exact modulo
    2**32, so their in-range result is exact from operands in either 32-bit dtype; the other ops (max, division, SHR,
    where, casts) take operands whose own bounds lie in the chosen dtype;
  * a comparison of two such values is decided on the 32-bit values (an int32 against a uint32: a negative int32 is
    below every uint32, otherwise both compare as uint32);
  * anything else 64-bit (a value that may leave int32, a 64-bit buffer) stays as it is and is refused with the
    rule in the message (lowering/frontend.py dtype_name).
"""
from __future__ import annotations

from tinygrad.dtype import dtypes
from tinygrad.uop.ops import Ops, UOp

WIDE = (dtypes.int64,)      # uint64 is the THREEFRY word packing the frontend lowers itself (lowering/threefry.py)
RANGE = {dtypes.int32: (-2 ** 31, 2 ** 31 - 1), dtypes.uint32: (0, 2 ** 32 - 1)}    # the narrow dtypes, preferred first
COMPARES = (Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ)
# exact modulo 2**32: an operand in either 32-bit dtype gives the exact result whenever that result is in range
RING = (Ops.ADD, Ops.SUB, Ops.MUL, Ops.NEG, Ops.AND, Ops.OR, Ops.XOR, Ops.SHL)
# the others need each operand's value in the narrow dtype's range (no PARAM/INDEX: 64-bit buffers are refused)
# (a REDUCE never qualifies: tinygrad bounds it by its dtype's range)
NARROWABLE = RING + (Ops.CONST, Ops.CAST, Ops.MAX, Ops.WHERE, Ops.CDIV, Ops.CMOD, Ops.FLOORDIV, Ops.FLOORMOD, Ops.SHR)


def bounds(u: UOp) -> tuple[int, int] | None:
    try:
        return int(u.vmin), int(u.vmax)
    except Exception:      # no bounds for this op
        return None


def within(u: UOp, dt) -> bool:
    lo, hi = RANGE[dt]
    return (b := bounds(u)) is not None and lo <= b[0] and b[1] <= hi


def narrow_int64(sink: UOp) -> UOp:
    """sink with the 64-bit integer values that fit 32 bits computed in int32 or uint32 (module doc)."""
    new: dict[UOp, UOp] = {}
    for u in sink.toposort():
        srcs = tuple(new.get(s, s) for s in u.src)
        if u.dtype in WIDE and u.op in NARROWABLE and (n := narrowed(u, srcs)) is not None:
            new[u] = n
        elif u.op in COMPARES and u.src[0].dtype in WIDE:
            new[u] = compare(u, srcs)
        elif srcs != u.src:
            new[u] = u.replace(src=srcs)
    return new.get(sink, sink)


def narrowed(u: UOp, srcs: tuple[UOp, ...]) -> UOp | None:
    """u computed in the first 32-bit dtype its bounds fit, or None when an operand keeps it 64-bit."""
    if u.op is Ops.CAST and srcs[0].dtype not in WIDE and (dtypes.is_int(srcs[0].dtype) or srcs[0].dtype == dtypes.bool):
        return widened(srcs[0])
    dt = next((d for d in RANGE if within(u, d)), None)
    if dt is None: return None
    wide = [(o, n) for o, n in zip(u.src, srcs) if o.dtype in WIDE]
    if any(n.dtype in WIDE or (u.op not in RING and not within(o, dt)) for o, n in wide): return None
    return u.replace(dtype=dt, src=tuple(n.cast(dt) if o.dtype in WIDE and n.dtype != dt else n
                                         for o, n in zip(u.src, srcs)))


def widened(x: UOp) -> UOp:
    """A 32-bit-or-narrower value widened to 64 bits, as a 32-bit value: int32 unless it is a uint32 whose bounds leave
    int32 (tinygrad's bounds of an int32 op may exceed int32; its value never does)."""
    if x.dtype == dtypes.int32 or (x.dtype == dtypes.uint32 and not within(x, dtypes.int32)): return x
    return x.cast(dtypes.int32)


def compare(u: UOp, srcs: tuple[UOp, ...]) -> UOp:
    """A comparison of 64-bit operands on their 32-bit values, or u unchanged when one has none."""
    a, b = srcs
    if a.dtype in WIDE or b.dtype in WIDE or a.dtype == b.dtype: return u.replace(src=srcs)
    if a.dtype == dtypes.uint32: return unsigned_vs_signed(u.op, a, b, swapped=False)
    return unsigned_vs_signed(u.op, b, a, swapped=True)


def unsigned_vs_signed(op: Ops, x: UOp, y: UOp, swapped: bool) -> UOp:
    """x (uint32) OP y (int32) as integers, or y OP x when swapped: a negative y is below every x, otherwise both
    compare as uint32."""
    neg, yu = y < 0, y.cast(dtypes.uint32)
    if op is Ops.CMPNE: return neg | x.alu(Ops.CMPNE, yu)
    if op is Ops.CMPEQ: return neg.logical_not() & x.alu(Ops.CMPEQ, yu)
    return (neg | (yu < x)) if swapped else (neg.logical_not() & (x < yu))     # CMPLT: y < x, else x < y
