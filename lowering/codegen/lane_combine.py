"""SFPU building blocks of reductions: combining two values by the reduce op (`COMBINE`), and across lanes - each
output's partial results in `lanes` neighbouring lanes combined into one lane (`lane_combine`), and that result copied
back to every lane the output owns (`lane_broadcast`). Used by the SFPU reduction (its accumulators) and the FPU sum
(its column partials).

A float32 sum may be compensated (`two_sum`; `lane_combine(..., comp=c)`): the sum lives as a pair (s, c) of LRegs
standing for s + c, s the running float32 sum and c the sum of the exact rounding errors of every addition into s
(TwoSum: SFPADD rounds once to nearest even, so five more additions recover each error exactly, without a branch on
the operands' magnitudes); s + c is rounded once at the end. docs/placement.md §5 gives its error bound."""
from __future__ import annotations

from tt_backend.lowering.codegen import sfpu_ops as so


def _swap_max(em: so.Emitter, d: int, s: int, t) -> None:
    """SFPSWAP VEC_MIN_MAX: VD := min, VC := max in sign-magnitude order (= float order; -0 < +0). Two cycles: the
    following SFPNOP keeps the next instruction off its second cycle."""
    em.i("SFPSWAP", lreg_src_c=d, lreg_dest=s, instr_mod1=1)
    em.i("SFPNOP")


def _unsigned_max(em: so.Emitter, d: int, s: int, t) -> None:
    """uint32 max: both sign bits flipped, the int32 max, the sign bit flipped back."""
    for r in (d, s):
        em.loadi(t[0], 0x80000000)
        em.xor(r, t[0])
    so.i_max(em, d, [d, s], t)
    em.loadi(t[0], 0x80000000)
    em.xor(d, t[0])


# combine(em, d, s, t): d = d (+|*|max) s; s may be clobbered, t = two scratch LRegs. One table, used by a reduction's
# per-row-step accumulation and by the lane combine.
COMBINE = {
    ("ADD", "float32"): lambda em, d, s, t: em.fadd(d, d, s),
    ("MUL", "float32"): lambda em, d, s, t: em.fmul(d, d, s),
    ("MAX", "float32"): _swap_max,
    ("MAX", "bfloat16"): _swap_max,       # bf16 values are fp32 values: max is exact, no rounding
    ("MAX", "float16"): _swap_max,        # float16 values as well
    ("ADD", "int32"): lambda em, d, s, t: em.iadd(d, s),
    ("MAX", "int32"): lambda em, d, s, t: so.i_max(em, d, [d, s], t),   # two's complement order, not SFPSWAP's
    ("ADD", "bool"): lambda em, d, s, t: em.or3(d, d, s),
    ("MAX", "bool"): lambda em, d, s, t: em.or3(d, d, s),
    ("MUL", "bool"): lambda em, d, s, t: em.and3(d, d, s),            # all()
    ("MUL", "int32"): lambda em, d, s, t: so.i_mul(em, d, [d, s], t),  # low 32 bits: wraps like the CPU device
    ("ADD", "uint32"): lambda em, d, s, t: em.iadd(d, s),
    ("MUL", "uint32"): lambda em, d, s, t: so.i_mul(em, d, [d, s], t),
    ("MAX", "uint32"): _unsigned_max,
}


def two_sum(em: so.Emitter, s: int, c: int, x: int, t: tuple[int, int]) -> None:
    """(s, c) := (s, c) + x compensated: s = fl(s + x), and its rounding error e (exact: b' = s' - s and a' = s' - b'
    split s' into the parts of the operands, e = (s - a') + (x - b')) added to c. x and the two LRegs in t clobbered.
    Exact for every float32 s, x whose sum does not overflow or fall into the denormals (SFPADD flushes those)."""
    n, b = t
    em.fadd(n, s, x)          # s' = fl(s + x)
    em.fsub(b, n, s)          # b' = s' - s
    em.fsub(x, x, b)          # x - b'
    em.fsub(b, n, b)          # a' = s' - b'
    em.fsub(b, s, b)          # s - a'
    em.fadd(b, b, x)          # e
    em.fadd(c, c, b)
    em.mov(s, n)


def _rotate(em: so.Emitter, d: int, x: int, amount: int) -> None:
    """d := x rotated right by `amount` lanes within each 8-lane row (SFPSHFT2 SUBVEC_SHFLROR1, two cycles each)."""
    em.mov(d, x)
    for _ in range(amount):
        em.i("SFPSHFT2", lreg_src_c=d, lreg_dest=d, instr_mod1=3)
        em.i("SFPNOP")


def lane_combine(em: so.Emitter, op: str, dtype: str, lanes: int, x: int, t: int, comp: int | None = None) -> int:
    """Combine the values of each group of `lanes` lanes of LReg x (t: scratch). Returns the LReg holding the result,
    valid in lane j*lanes + min(lanes, 8) - 1 of output j (tile_plan.reduce_out_datum). For 2/4/8: x (+)= ror^(2^i)(x)
    in each 8-lane row, so lane 8r+c ends with the combine of lanes c-2^n+1..c. For 32: the full 8-lane rotation tree,
    then SFPTRANSP moves row i of LReg0 into row 0 of LReg i (LReg0-3), and three combines add up the rows.
    `comp`: the LReg of a compensated float32 sum's error part (x, comp) (`two_sum`); the combines are then
    compensated too (`_lane_combine_compensated`) and the result is x + comp rounded once."""
    if comp is not None:
        assert (op, dtype) == ("ADD", "float32"), (op, dtype)
        return _lane_combine_compensated(em, lanes, x, comp)
    comb = COMBINE[(op, dtype)]
    levels = {1: 0, 2: 1, 4: 2, 8: 3, 32: 3}[lanes]
    for lvl in range(levels):
        _rotate(em, t, x, 1 << lvl)
        comb(em, x, t, [r for r in (1, 2, 3, 4, 5, 6) if r not in (x, t)][:2])
    if lanes != 32:
        return x
    em.mov(0, x)
    em.i("SFPTRANSP", lreg_dest=0)        # also permutes LReg4-7 (x is dead after the move)
    for r in (1, 2, 3):
        comb(em, 0, r, [4, 5])
    return 0


def _lane_combine_compensated(em: so.Emitter, lanes: int, s: int, c: int) -> int:
    """lane_combine of the compensated sum (s, c): each level adds the rotated s with `two_sum` and the rotated c
    plainly (the errors' own rounding is far below the result's); for 32 lanes s goes to LReg0 and c to LReg4, so
    that SFPTRANSP (which transposes LReg0-3 and LReg4-7 alike) leaves the rows' s in row 0 of LReg0-3 and their c
    in row 0 of LReg4-7; the c are summed first, freeing LReg5-7 for the three row combines."""
    levels = {1: 0, 2: 1, 4: 2, 8: 3, 32: 3}[lanes]
    ts, tc, *tmp = [r for r in so.GP_REGS if r not in (s, c)][:4]
    for lvl in range(levels):
        _rotate(em, ts, s, 1 << lvl)
        _rotate(em, tc, c, 1 << lvl)
        em.fadd(c, c, tc)
        two_sum(em, s, c, ts, tuple(tmp))
    if lanes == 32:
        em.mov(0, s)
        em.mov(4, c)
        em.i("SFPTRANSP", lreg_dest=0)
        for r in (5, 6, 7):
            em.fadd(4, 4, r)
        for r in (1, 2, 3):
            two_sum(em, 0, 4, r, (5, 6))
        s, c = 0, 4
    em.fadd(s, s, c)
    return s


def lane_broadcast(em: so.Emitter, lanes: int, r: int) -> int:
    """After lane_combine: copy each output's result (lane j*lanes + min(lanes, 8) - 1 of LReg r) to every lane the
    output owns, bit for bit (a rotation tree leaves float sums that differ in the last bit between lanes, so the
    result lane is broadcast rather than the tree made symmetric). 32 lanes: LReg0 row 0 holds the result (r = 0);
    copies in LReg0-3 and an SFPTRANSP put row 0 into every row. Then per 8-lane row: a lane-0 mask (shift right
    with zero fill, then NOT), lane 7 rotated to lane 0 and masked, and three OR-with-rotation doublings. Bitwise, so
    it is the same for every op and dtype. Returns the LReg holding the broadcast result."""
    if lanes == 1:
        return r
    if lanes == 32:
        assert r == 0
        for q in (1, 2, 3):
            em.mov(q, 0)
        em.i("SFPTRANSP", lreg_dest=0)      # LReg i row j := old LReg j row i = row 0 of the result for i = 0
    m, y, t = [q for q in (1, 2, 3, 4) if q != r][:3]
    em.loadi(m, 0xFFFFFFFF)
    em.i("SFPSHFT2", lreg_src_c=m, lreg_dest=m, instr_mod1=4)     # SUBVEC_SHFLSHR1: lane 0 of each row := 0
    em.i("SFPNOP")
    em.bnot(m, m)                                                 # all ones in lane 0 of each row only
    em.i("SFPSHFT2", lreg_src_c=r, lreg_dest=y, instr_mod1=3)     # SUBVEC_SHFLROR1: lane 0 := lane 7
    em.i("SFPNOP")
    em.and3(y, y, m)
    for amount in (1, 2, 4):                                      # lanes 0..2*amount-1 hold the result
        em.mov(t, y)
        for _ in range(amount):
            em.i("SFPSHFT2", lreg_src_c=t, lreg_dest=t, instr_mod1=3)
            em.i("SFPNOP")
        em.or3(y, y, t)
    return y
