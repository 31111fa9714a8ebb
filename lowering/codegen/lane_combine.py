"""SFPU building blocks of reductions: combining two values by the reduce op (`COMBINE`), and across lanes - each
output's partial results in `lanes` neighbouring lanes combined into one lane (`lane_combine`), and that result copied
back to every lane the output owns (`lane_broadcast`). Used by the SFPU reduction (its accumulators) and the FPU sum
(its column partials)."""
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


def lane_combine(em: so.Emitter, op: str, dtype: str, lanes: int, x: int, t: int) -> int:
    """Combine the values of each group of `lanes` lanes of LReg x (t: scratch). Returns the LReg holding the result,
    valid in lane j*lanes + min(lanes, 8) - 1 of output j (tile_plan.reduce_out_datum). For 2/4/8: x (+)= ror^(2^i)(x)
    in each 8-lane row, so lane 8r+c ends with the combine of lanes c-2^n+1..c. For 32: the full 8-lane rotation tree,
    then SFPTRANSP moves row i of LReg0 into row 0 of LReg i (LReg0-3), and three combines add up the rows."""
    comb = COMBINE[(op, dtype)]
    levels = {1: 0, 2: 1, 4: 2, 8: 3, 32: 3}[lanes]
    for lvl in range(levels):
        em.mov(t, x)
        for _ in range(1 << lvl):
            em.i("SFPSHFT2", lreg_src_c=t, lreg_dest=t, instr_mod1=3)   # SUBVEC_SHFLROR1
            em.i("SFPNOP")                                             # SFPSHFT2 takes two cycles
        comb(em, x, t, [r for r in (1, 2, 3, 4, 5, 6) if r not in (x, t)][:2])
    if lanes != 32:
        return x
    em.mov(0, x)
    em.i("SFPTRANSP", lreg_dest=0)        # also permutes LReg4-7 (x is dead after the move)
    for r in (1, 2, 3):
        comb(em, 0, r, [4, 5])
    return 0


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
