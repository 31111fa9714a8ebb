"""Per-op SFPU instruction sequences (physical LRegs), used by `sfpu_codegen`.

Every sequence works on one 32-lane row: sources, destination and scratch registers are LReg numbers chosen by the
allocator in `sfpu_codegen`. A sequence never writes a source register (unless the allocator let `d` alias a source
that dies here, see `Seq.alias`) and always leaves the lane predication at the base state (UseLaneFlags = true,
LaneFlags = true in every lane), so spill/reload code between sequences runs on all lanes.

Value representation (docs/ARCHITECTURE.md): float32 = fp32 bits, bfloat16 = fp32 with the low 16 bits zero, int32 =
two's complement, uint32 = its 32 bits (add/sub/mul/bit ops shared with int32), bool = int32 0/1. Float arithmetic uses SFPMAD (one RNE rounding, denormal inputs/results flushed to
signed zero, NaN results canonical 0x7fc00000); everything else here is bit-exact integer work.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Callable

ZERO, ONE = 9, 10                       # read-only LRegs: all-zero bits, fp32 1.0
GP_REGS = tuple(range(8))               # the only writable general registers

# instruction modifier bits (names follow the ISA pages)
MAD_NEG_B, MAD_NEG_C = 1, 2             # SFPMAD/SFPADD/SFPMUL: negate VB / VC
IADD_IMM, IADD_SUB, IADD_CC_NONE, IADD_CC_GTE0 = 1, 2, 4, 8
SHFT_IMM, SHFT_ARITH, SHFT_USE_VC = 1, 2, 4
CC_LT0, CC_NE0, CC_GTE0, CC_EQ0 = 0, 2, 4, 6   # SFPSETCC modes
GT_SET_CC, GT_SET_VD = 1, 8             # SFPGT / SFPLE
LZ_NE0, LZ_NOSGN, LZ_COMP = 2, 4, 8
EXEXP_NODEBIAS = 1
USE_VB = 1                              # SFPAND/SFPOR three-operand form
MOV_NEG = 1
CAST_SM_TO_FP_RNE, CAST_INT_SM = 0, 3
LOAD_FP32, LOAD_INT32 = 3, 4            # SFPLOAD/SFPSTORE instr_mod0
STORE_HI16 = 7                          # SFPSTORE MOD0_FMT_HI16: the word into Dst32b as is, without Dst's field order

F32_INF, F32_NINF, F32_QNAN, F32_NEG0 = 0x7F800000, 0xFF800000, 0x7FC00000, 0x80000000
MAGIC_RND = 0x4B400000                  # 1.5 * 2**23: x + MAGIC rounds x to an integer (RNE) for |x| < 2**22


def f32_bits(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]


class Emitter:
    """Collects (mnemonic, fields) pairs; `sfpu_codegen` encodes them. Helpers are named after what they compute."""

    def __init__(self, pool: dict[int, int] | None = None) -> None:
        self.ins: list[tuple[str, dict[str, int]]] = []
        self.pool = pool or {}                            # constant bits -> LReg 11..14 (loaded by the setup)
        self.wanted: dict[int, int] = {}                  # constant bits -> instructions a pool entry would save

    def i(self, name: str, **fields: int) -> None:
        self.ins.append((name, fields))

    # ---- data movement
    def loadi(self, d: int, v: int) -> None:
        """d = 32-bit constant v (1 or 2 SFPLOADI)."""
        v &= 0xFFFFFFFF
        if v & 0xFFFF == 0:
            self.i("SFPLOADI", lreg_ind=d, instr_mod0=0, imm16=v >> 16)          # FLOATB: imm << 16
        elif v < 0x10000:
            self.i("SFPLOADI", lreg_ind=d, instr_mod0=2, imm16=v)                # USHORT: zero-extend
        elif v >= 0xFFFF8000:
            self.i("SFPLOADI", lreg_ind=d, instr_mod0=4, imm16=v & 0xFFFF)       # SHORT: sign-extend
        else:
            self.i("SFPLOADI", lreg_ind=d, instr_mod0=0, imm16=v >> 16)          # high half, low half 0
            self.i("SFPLOADI", lreg_ind=d, instr_mod0=10, imm16=v & 0xFFFF)      # LOWER: keep high half

    def loadf(self, d: int, x: float) -> None:
        self.loadi(d, f32_bits(x))

    def creg(self, t: int, v: int | float) -> int:
        """A register holding constant v (bits, or a float) for use as a READ operand (VA/VB/VC, never VD): a pooled
        LReg 11-14, else v is loaded into scratch t."""
        v = f32_bits(v) if isinstance(v, float) else v & 0xFFFFFFFF
        if v in self.pool:
            return self.pool[v]
        n = len(self.ins)
        self.loadi(t, v)
        self.wanted[v] = self.wanted.get(v, 0) + len(self.ins) - n
        return t

    def mov(self, d: int, c: int) -> None:
        if d != c:
            self.i("SFPMOV", lreg_c=c, lreg_dest=d, instr_mod1=0)

    def fneg(self, d: int, c: int) -> None:                   # d = c with the sign bit flipped
        self.i("SFPMOV", lreg_c=c, lreg_dest=d, instr_mod1=MOV_NEG)

    def load(self, d: int, addr: int, mod0: int) -> None:     # addr = Imm10 (the Dst RWC is added by hardware)
        self.i("SFPLOAD", lreg_ind=d, instr_mod0=mod0, sfpu_addr_mode=0, dest_reg_addr=addr)

    def store(self, r: int, addr: int, addr_mode: int = 0, mod0: int = LOAD_INT32) -> None:
        """INT32 (default): the fp32 / integer bits, no flush, Dst's field order applied; STORE_HI16: opaque bits."""
        self.i("SFPSTORE", lreg_ind=r, instr_mod0=mod0, sfpu_addr_mode=addr_mode, dest_reg_addr=addr)

    # ---- fp32 arithmetic (SFPMAD family)
    def mad(self, d: int, a: int, b: int, c: int, mod: int = 0) -> None:    # d = a * (+-b) + (+-c)
        self.i("SFPMAD", lreg_src_a=a, lreg_src_b=b, lreg_src_c=c, lreg_dest=d, instr_mod1=mod)

    def fadd(self, d: int, a: int, b: int) -> None:           # d = 1.0 * a + b
        self.i("SFPADD", lreg_src_a=ONE, lreg_src_b=a, lreg_src_c=b, lreg_dest=d, instr_mod1=0)

    def fsub(self, d: int, a: int, b: int) -> None:           # d = 1.0 * a - b
        self.i("SFPADD", lreg_src_a=ONE, lreg_src_b=a, lreg_src_c=b, lreg_dest=d, instr_mod1=MAD_NEG_C)

    def fmul(self, d: int, a: int, b: int) -> None:           # d = a * b + (-0): keeps the sign of a zero product
        # SFPMAD rather than SFPMUL: the ISA defines SFPMUL as SFPMAD with VC = LReg9, and ttsim 1.10 rejects
        # SFPMUL with NEGATE_VC (instr_mod1 = 2) while it implements the SFPMAD form; same operation, one encoding
        self.i("SFPMAD", lreg_src_a=a, lreg_src_b=b, lreg_src_c=ZERO, lreg_dest=d, instr_mod1=MAD_NEG_C)

    def addi(self, d: int, x: float) -> None:                 # d = bf16(x) + d (x must be bf16-exact)
        b = f32_bits(x)
        assert b & 0xFFFF == 0, x
        self.i("SFPADDI", lreg_dest=d, imm16_math=b >> 16, instr_mod1=0)

    def muli(self, d: int, x: float) -> None:                 # d = bf16(x) * d + 0 (x must be bf16-exact)
        b = f32_bits(x)
        assert b & 0xFFFF == 0, x
        self.i("SFPMULI", lreg_dest=d, imm16_math=b >> 16, instr_mod1=0)

    # ---- integer / bit ops (two's complement; CC_NONE so lane flags are untouched)
    def iadd(self, d: int, c: int) -> None:                   # d = c + d
        self.i("SFPIADD", lreg_c=c, lreg_dest=d, instr_mod1=IADD_CC_NONE)

    def isub_from(self, d: int, c: int) -> None:              # d = c - d
        self.i("SFPIADD", lreg_c=c, lreg_dest=d, instr_mod1=IADD_SUB | IADD_CC_NONE)

    def iaddi(self, d: int, c: int, imm: int, cc: int | None = None) -> None:
        """d = c + imm (|imm| < 2048); cc None: flags untouched, else CC_LT0/IADD_CC_GTE0: flags &= sign test."""
        assert -2048 <= imm < 2048
        mod = IADD_IMM | (IADD_CC_NONE if cc is None else cc)
        self.i("SFPIADD", lreg_c=c, lreg_dest=d, imm12_math=imm & 0xFFF, instr_mod1=mod)

    def shl(self, d: int, c: int, n: int) -> None:            # d = c << n
        self.i("SFPSHFT", lreg_c=c, lreg_dest=d, imm12_math=n, instr_mod1=SHFT_IMM | SHFT_USE_VC)

    def shr(self, d: int, c: int, n: int) -> None:            # d = c >> n (logical)
        self.i("SFPSHFT", lreg_c=c, lreg_dest=d, imm12_math=(-n) & 0xFFF, instr_mod1=SHFT_IMM | SHFT_USE_VC)

    def sar(self, d: int, c: int, n: int) -> None:            # d = c >> n (arithmetic)
        self.i("SFPSHFT", lreg_c=c, lreg_dest=d, imm12_math=(-n) & 0xFFF,
               instr_mod1=SHFT_IMM | SHFT_USE_VC | SHFT_ARITH)

    def shift_by(self, d: int, c: int) -> None:               # d = c_amt >= 0 ? d << amt : d >>> -amt (amt = LReg[c])
        self.i("SFPSHFT", lreg_c=c, lreg_dest=d, instr_mod1=0)

    def xor(self, d: int, c: int) -> None:                    # d ^= c
        self.i("SFPXOR", lreg_c=c, lreg_dest=d)

    def and3(self, d: int, b: int, c: int) -> None:           # d = b & c
        self.i("SFPAND", imm12_math=b, lreg_c=c, lreg_dest=d, instr_mod1=USE_VB)

    def or3(self, d: int, b: int, c: int) -> None:            # d = b | c
        self.i("SFPOR", imm12_math=b, lreg_c=c, lreg_dest=d, instr_mod1=USE_VB)

    def bnot(self, d: int, c: int) -> None:                   # d = ~c
        self.i("SFPNOT", lreg_c=c, lreg_dest=d)

    def clz(self, d: int, c: int, mod: int = 0) -> None:      # d = clz(c) (32 for 0); mod LZ_NOSGN ignores bit 31
        self.i("SFPLZ", lreg_c=c, lreg_dest=d, instr_mod1=mod)

    def exexp(self, d: int, c: int, mod: int = 0) -> None:    # d = exponent field (- 127 unless NODEBIAS)
        self.i("SFPEXEXP", lreg_c=c, lreg_dest=d, instr_mod1=mod)

    def exman(self, d: int, c: int) -> None:                  # d = (1 << 23) | mantissa
        self.i("SFPEXMAN", lreg_c=c, lreg_dest=d, instr_mod1=0)

    def setsgn_imm(self, d: int, c: int, s: int) -> None:     # d = c with sign bit s
        self.i("SFPSETSGN", imm12_math=s, lreg_c=c, lreg_dest=d, instr_mod1=1)

    def setexp_imm(self, d: int, c: int, exp: int) -> None:  # d = c with biased exponent field exp
        self.i("SFPSETEXP", imm12_math=exp, lreg_c=c, lreg_dest=d, instr_mod1=1)

    def setsgn_from_d(self, d: int, c: int) -> None:          # d = {sign of d, exponent+mantissa of c}
        self.i("SFPSETSGN", lreg_c=c, lreg_dest=d, instr_mod1=0)

    def cast(self, d: int, c: int, mod: int) -> None:
        self.i("SFPCAST", lreg_src_c=c, lreg_dest=d, instr_mod1=mod)

    def arecip(self, d: int, c: int) -> None:                 # d = sign(c) * ~1/|c| (7-bit LUT)
        self.i("SFPARECIP", lreg_c=c, lreg_dest=d, instr_mod1=0)

    def mul24(self, d: int, a: int, b: int, upper: bool = False) -> None:
        self.i("SFPMUL24", lreg_src_a=a, lreg_src_b=b, lreg_src_c=ZERO, lreg_dest=d, instr_mod1=int(upper))

    # ---- lane predication. Flags only narrow (SETCC/GT/LE/IADD update enabled lanes only) until `endif`.
    def setcc(self, c: int, mode: int) -> None:
        self.i("SFPSETCC", lreg_c=c, lreg_dest=0, instr_mod1=mode)

    def gt(self, vd: int, vc: int) -> None:                   # flags &= LReg[vd] > LReg[vc] (sign-magnitude order)
        self.i("SFPGT", lreg_c=vc, lreg_dest=vd, instr_mod1=GT_SET_CC)

    def le(self, vd: int, vc: int) -> None:                   # flags &= LReg[vd] <= LReg[vc]
        self.i("SFPLE", lreg_c=vc, lreg_dest=vd, instr_mod1=GT_SET_CC)

    def endif(self) -> None:                                  # LaneFlags = true in every lane
        self.i("SFPENCC", imm12_math=0, lreg_dest=0, instr_mod1=0)


# ------------------------------------------------------------------------------------------------ helpers

def int_order(e: Emitter, t: int, x: int) -> None:
    """t = x ^ ((x >>a 31) >>> 1): two's complement order -> the sign-magnitude order SFPGT/SFPLE compare in."""
    e.sar(t, x, 31)
    e.shr(t, t, 1)
    e.xor(t, x)


def int_lt_flags(e: Emitter, a: int, b: int, t1: int, t2: int) -> None:
    """LaneFlags &= (int32 a < int32 b)."""
    int_order(e, t1, a)
    int_order(e, t2, b)
    e.gt(t2, t1)


def round_bf16(e: Emitter, r: int, t: list[int]) -> None:
    """r = tinygrad cast_float_to_bf16(r) (as fp32 bits): finite/Inf -> r + 0x7fff + ((r >> 16) & 1), NaN -> r | 0x10000
    if its low half is non-zero, then clear the low 16 bits. 15 instructions, 3 scratch registers."""
    t1, t2, t3 = t[:3]
    e.shl(t1, r, 15)
    e.shr(t1, t1, 31)                       # t1 = (r >> 16) & 1
    e.iadd(t1, e.creg(t2, 0x7FFF))
    e.iadd(t1, r)                           # t1 = r + 0x7fff + lsb
    e.setsgn_imm(t3, r, 0)                  # |r|
    e.gt(t3, e.creg(t2, F32_INF))           # NaN lanes
    e.mov(t1, r)
    e.shl(t3, r, 16)
    e.setcc(t3, CC_NE0)                     # ... with a non-zero low half
    e.or3(t1, t1, e.creg(t2, 0x00010000))
    e.endif()
    e.and3(r, t1, e.creg(t2, 0xFFFF0000))


def round_f16(e: Emitter, r: int, t: list[int]) -> None:
    """r = float32 r rounded to the nearest float16 value (ties to even), as tinygrad's CPU device casts: |r| >= 65520
    -> +-inf, below 2^-14 a multiple of 2^-24 (float16 denormals, the sign of zero kept), NaN stays NaN. In range: the
    integer form r + 0xfff + ((r >> 13) & 1), low 13 bits cleared; below 2^-14: (r + 0.75) - 0.75 (the float32 add
    rounds to the 2^-24 grid there). 3 scratch registers. Not SFP_STOCH_RND's fp16 mode: it rounds ties away from zero,
    keeps float32's exponent range and turns NaN into inf (docs/isa.md §3)."""
    t1, t2, t3 = t[:3]
    e.shl(t1, r, 18)
    e.shr(t1, t1, 31)                       # t1 = (r >> 13) & 1
    e.iadd(t1, e.creg(t2, 0xFFF))
    e.iadd(t1, r)
    e.and3(t1, t1, e.creg(t2, 0xFFFFE000))  # in-range result
    e.setsgn_imm(t3, r, 0)                  # |r|
    e.gt(t3, e.creg(t2, 0x477FEFFF))        # |r| >= 65520 ...
    e.le(t3, e.creg(t2, F32_INF))           # ... and not NaN: +-inf
    e.mov(t1, r)
    e.setsgn_from_d(t1, e.creg(t2, F32_INF))
    e.endif()
    e.gt(t3, e.creg(t2, F32_INF))           # NaN lanes keep r
    e.mov(t1, r)
    e.endif()
    e.gt(e.creg(t2, 0x38800000), t3)        # |r| < 2^-14: the denormal grid
    e.fadd(t1, r, e.creg(t2, 0.75))
    e.fsub(t1, t1, e.creg(t2, 0.75))
    e.mov(t3, r)
    e.setsgn_from_d(t3, t1)                 # r's sign (-tiny rounds to -0)
    e.mov(t1, t3)
    e.endif()
    e.mov(r, t1)


# dtype -> (its rounding, whether every op's result is rounded or only a CAST's). float16 as tinygrad's CPU device
# computes it: arithmetic in float32, rounded where the program casts or stores (the writer's conversion)
ROUNDERS = {"bfloat16": (round_bf16, True), "float16": (round_f16, False)}


def rounder(op: str, dtype: str, seq: Seq) -> Callable | None:
    """The rounding appended to node (op, dtype) computed by seq, or None."""
    fn, every_op = ROUNDERS.get(dtype, (None, False))
    return fn if seq.rounds and (every_op or op == "CAST") else None


def horner(e: Emitter, p: int, x: int, coeffs: list[float], t: int) -> None:
    """p = sum(coeffs[k] * x**k) by Horner on SFPMAD (one rounding per step)."""
    e.loadf(p, coeffs[-1])
    for k in range(len(coeffs) - 2, -1, -1):
        e.mad(p, p, x, e.creg(t, coeffs[k]))


# ------------------------------------------------------------------------------------------------ sequences
# Signature: fn(e, d, s, t): d = destination LReg, s = source LRegs, t = scratch LRegs (count from the table).

def f_add(e, d, s, t): e.fadd(d, s[0], s[1])                 # a + b, one RNE rounding
def f_sub(e, d, s, t): e.fsub(d, s[0], s[1])                 # a - b
def f_mul(e, d, s, t): e.fmul(d, s[0], s[1])                 # a * b + (-0)
def f_neg(e, d, s, t): e.fneg(d, s[0])                       # flip the sign bit (exact, NaN stays NaN)
def f_muladd(e, d, s, t): e.mad(d, s[0], s[1], s[2])           # a * b + c, one rounding (lowering/rewrite.py)
def f_mulsub(e, d, s, t): e.mad(d, s[0], s[1], s[2], MAD_NEG_C)   # a * b - c
def f_nmuladd(e, d, s, t): e.mad(d, s[0], s[1], s[2], MAD_NEG_B)  # c - a * b = a * (-b) + c


def f_lt_value(e, d, s, t):
    """a < b  <=>  sign((a + 0) - b): +0 canonicalises -0 (so -0 - +0 cannot give -0), Inf-Inf and NaN give +NaN."""
    e.fadd(d, s[0], ZERO)
    e.fsub(d, d, s[1])
    e.shr(d, d, 31)


def f_max(e, d, s, t):
    """tinygrad MAX = (a < b).where(b, a) exactly: a NaN in a wins, a NaN in b loses; max(-0, +0) = -0 (= a)."""
    a, b = s
    e.fadd(t[0], a, ZERO)
    e.fsub(t[0], t[0], b)
    e.mov(d, a)
    e.setcc(t[0], CC_LT0)
    e.mov(d, b)
    e.endif()


def f_ne(e, d, s, t):
    """a != b: bits of (a+0) and (b+0) differ (zeros and NaNs canonicalised), or a is NaN (a+0 > +Inf)."""
    a, b = s
    t1, t2, t3 = t
    e.fadd(t1, a, ZERO)
    e.fadd(t2, b, ZERO)
    e.xor(t2, t1)
    inf = e.creg(t3, F32_INF)
    e.loadi(d, 1)
    e.setcc(t2, CC_EQ0)
    e.le(t1, inf)
    e.mov(d, ZERO)
    e.endif()


def f_trunc(e, d, s, t):
    """Clear the 23-e fraction bits (0 <= e < 23); |x| < 1 -> signed zero; e >= 23, Inf, NaN unchanged."""
    x = s[0]
    t1, t2 = t
    e.mov(d, x)
    e.exexp(t1, x)
    e.iaddi(t1, t1, -23, cc=0)              # flags: e - 23 < 0
    e.isub_from(t1, ZERO)                   # 23 - e
    e.loadi(t2, 0xFFFFFFFF)
    e.shift_by(t2, t1)                      # -1 << (23 - e): keeps sign, exponent and e mantissa bits
    e.and3(d, d, t2)
    e.iaddi(t1, t1, -24, cc=IADD_CC_GTE0)   # flags &= 23 - e >= 24, i.e. e < 0
    e.mov(d, x)
    e.setsgn_from_d(d, ZERO)                # +-0
    e.endif()


def unit_magnitude(e, d: int, x: int) -> None:
    """d = |x| with the exponent of 1.0: x's mantissa as a value in [1, 2)."""
    e.setsgn_imm(d, x, 0)
    e.setexp_imm(d, d, 127)


def high_half(e, d: int, x: int) -> None:
    """d = x with its 12 low mantissa bits cleared: 12 significant bits, so x - d is exact and holds the other 12."""
    e.shr(d, x, 12)
    e.shl(d, d, 12)


def exact_residual(e, r: int, ql: int, qh: int, bh: int, bl: int) -> None:
    """r = r - q*B exactly (Dekker's product split), q = ql on entry, split here into qh + ql (ql overwritten with the
    low half), B = bh + bl: all halves of 12 significant bits, so every partial product is exact and, with r a dividend
    in [1, 2) and q a faithful quotient, so is every partial difference (docs/isa.md §3.5). One SFPMAD alone would not
    do: it keeps only 3 bits of the product below fp32 precision."""
    high_half(e, qh, ql)
    e.fsub(ql, ql, qh)
    for x, y in ((qh, bh), (qh, bl), (ql, bh), (ql, bl)):
        e.mad(r, x, y, r, MAD_NEG_B)


def f_div(e, d, s, t):
    """a / b correctly rounded (IEEE round to nearest even, as the CPU device's division), for normal a and b: on the
    mantissas A, B in [1, 2) the quotient q = A * recip(B) is made faithful by one step q += (A - q*B) * recip(B), the
    residual R = A - q*B is then computed exactly, and the sign of 2R -/+ B*ulp says whether A/B lies beyond the
    midpoint to a neighbour of q (ties cannot occur); the exponent difference is added at the end (beyond the fp32
    range: Inf, or a signed zero where the quotient is denormal, as every SFPU result). Zero, denormal (read as
    zero), Inf or NaN operands: a * SFPARECIP(b), whose IEEE specials are the quotient's. 4 scratch registers (d is
    one until the end): a reduction's accumulator leaves 7 LRegs."""
    a, b = s
    ra, rb, y, u = t
    unit_magnitude(e, rb, b)
    e.arecip(y, rb)
    unit_magnitude(e, ra, a)
    for _ in range(2):                      # y = recip(B): 2 Newton steps from the 7-bit estimate
        e.mad(d, rb, y, ONE, MAD_NEG_B)
        e.mad(y, y, d, y)
    e.fmul(d, ra, y)                        # q within ~2 ulp of A/B
    e.mad(u, d, rb, ra, MAD_NEG_B)          # A - q*B, good to 2**-26 (enough for a faithful step)
    e.mad(d, u, y, d)                       # q faithful: |A/B - q| < ulp(q)
    high_half(e, u, rb)                     # Bh
    e.fsub(rb, rb, u)                       # Bl
    exact_residual(e, ra, d, y, u, rb)      # ra = R = A - q*B, exact; d, y = the halves of q
    e.fadd(d, y, d)                         # q
    e.fadd(rb, u, rb)                       # B
    e.fadd(ra, ra, ra)                      # 2R: the tests below are 2R -/+ B*ulp, sums of two exact terms
    e.iaddi(u, d, 1)
    e.fsub(u, u, d)                         # ulp above q
    e.mad(u, rb, u, ra, MAD_NEG_B)          # > 0: A/B is past the upper midpoint
    e.iaddi(y, d, -1)
    e.fsub(y, d, y)                         # ulp below q (half the one above when q is a power of 2)
    e.mad(y, rb, y, ra)                     # < 0: A/B is below the lower midpoint
    e.setcc(u, CC_GTE0)
    e.iaddi(d, d, 1)
    e.endif()
    e.setcc(y, CC_LT0)
    e.iaddi(d, d, -1)
    e.endif()
    e.exexp(ra, a, EXEXP_NODEBIAS)
    e.exexp(rb, b, EXEXP_NODEBIAS)
    e.isub_from(rb, ra)                     # ea - eb
    e.exexp(u, d, EXEXP_NODEBIAS)
    e.iadd(u, rb)                           # the quotient's biased exponent
    e.shl(rb, rb, 23)
    e.iadd(d, rb)
    e.iaddi(y, u, -255, cc=IADD_CC_GTE0)    # overflow: Inf
    e.loadi(d, F32_INF)
    e.endif()
    e.iaddi(y, u, -1, cc=CC_LT0)            # below the normal range: +0 (the sign follows)
    e.mov(d, ZERO)
    e.endif()
    e.mov(u, a)
    e.xor(u, b)
    e.setsgn_from_d(u, d)                   # u = the quotient of normal operands, signed
    e.exexp(y, b, EXEXP_NODEBIAS)
    e.arecip(rb, b)                         # b zero, denormal or Inf: a * SFPARECIP(b) is the quotient
    normal_exponent(e, d, y)
    e.mov(rb, b)                            # b normal: a * b is the quotient's zero, Inf or NaN where a is one
    e.endif()
    e.fmul(d, a, rb)
    e.setsgn_imm(rb, b, 0)
    e.gt(rb, e.creg(y, F32_INF))
    e.fadd(d, b, ZERO)                      # b NaN (SFPARECIP(NaN) is 0): NaN
    e.endif()
    normal_exponent(e, y, ra)
    e.exexp(rb, b, EXEXP_NODEBIAS)
    normal_exponent(e, y, rb)
    e.mov(d, u)
    e.endif()


def f_recip(e, d, s, t):
    """1/x correctly rounded, as the CPU device's: `f_div` with the read-only 1.0 as the dividend (its specials give
    1/+-0 and 1/denormal = +-Inf, 1/+-Inf = +-0, NaN; a denormal reciprocal, |x| > 2**126, a signed zero)."""
    f_div(e, d, (ONE, s[0]), t)


def normal_exponent(e, t: int, ex: int) -> None:
    """LaneFlags &= 1 <= ex <= 254: the biased exponent field ex is a normal number's."""
    e.iaddi(t, ex, -1, cc=IADD_CC_GTE0)
    e.iaddi(t, ex, -255, cc=CC_LT0)


def f_sqrt(e, d, s, t):
    """x > 0: xs = x (times 2**64 if x < 2**-60, so x - s*s cannot underflow), y = rsqrt(xs) by magic constant +
    2 Newton steps, s = xs*y, s += (y/2)*(xs - s*s), times 2**-32 where scaled.
    Specials: -0, +0, +Inf, +NaN -> x; x < 0 and -NaN -> NaN; denormal -> +0."""
    x = s[0]
    y, t2, xs = t
    e.loadi(d, F32_QNAN)
    e.loadi(y, F32_NEG0)
    e.le(y, x)                              # -0 <= x in the total order
    e.mov(d, x)
    e.endif()
    e.mov(xs, x)
    e.exexp(y, x)
    e.iaddi(y, y, 60, cc=0)                 # x < 2**-60
    e.muli(xs, 2.0 ** 64)
    e.endif()
    e.gt(x, ZERO)                           # x > +0
    e.loadi(y, F32_INF)
    e.gt(y, x)                              # x < +Inf
    e.shr(y, xs, 1)
    e.isub_from(y, e.creg(t2, 0x5F3759DF))                      # y0 = magic - (bits(xs) >> 1)
    for _ in range(2):
        e.fmul(t2, xs, y)
        e.mad(t2, t2, y, ONE, MAD_NEG_B)    # r = 1 - x*y*y
        e.muli(t2, 0.5)
        e.mad(y, y, t2, y)                  # y += y*r/2
    e.fmul(d, xs, y)                        # s = x*y
    e.mad(t2, d, d, xs, MAD_NEG_B)          # x - s*s
    e.muli(y, 0.5)
    e.mad(d, y, t2, d)                      # s += (y/2)*(x - s*s)
    e.exexp(y, x)
    e.iaddi(y, y, 60, cc=0)                 # ... and scaled
    e.fmul(d, d, e.creg(t2, 2.0 ** -32))
    e.endif()


EXP2_Q = [0.6931471824645996, 0.24022650718688965, 0.055504102259874344, 0.009618038311600685,
          0.0013333935057744384, 0.00015466756303794682, 1.5196156709862407e-05]   # 2^f = 1 + f*q(f), |f| <= 1/2


def f_exp2(e, d, s, t):
    """n = rint(x) (magic add), f = x - n exactly, 2^f = 1 + f*q(f) (degree 7), then add n to the exponent bits.
    x < -126 -> +0 (true results are denormal: flushed), x >= 128 -> +Inf, NaN -> NaN."""
    x = s[0]
    tn, tm, f = t
    m = e.creg(tm, MAGIC_RND)
    e.fadd(tn, x, m)                        # tn = n + 1.5*2**23
    e.fsub(f, tn, m)                        # n as float
    e.fsub(f, x, f)                         # f = x - n, exact
    e.shl(tn, tn, 23)                       # n << 23 (the magic's bits shift out)
    horner(e, d, f, EXP2_Q, tm)             # q(f)
    e.mad(d, d, f, ONE)                     # p = q*f + 1
    e.iadd(d, tn)                           # p * 2**n via the exponent field
    e.loadf(tm, -126.0)
    e.gt(tm, x)                             # x < -126 (also -Inf, -NaN)
    e.mov(d, ZERO)
    e.endif()
    e.loadf(tm, 128.0)
    e.le(tm, x)                             # x >= 128 (also +Inf, +NaN)
    e.loadi(d, F32_INF)
    e.endif()
    e.setsgn_imm(tn, x, 0)
    e.loadi(tm, F32_INF)
    e.gt(tn, tm)                            # NaN
    e.loadi(d, F32_QNAN)
    e.endif()


LOG2_L = 1.4426950216293335                 # fp32(1/ln 2)
# g(u) = (log2(1+u) - u*L)/u on u in [sqrt(1/2)-1, sqrt(2)-1] (degree 10, near-minimax relative fit)
LOG2_G = [2.0170300985000722e-08, -0.7213475108146667, 0.4808979034423828, -0.3606741428375244, 0.2885761857032776,
          -0.24046720564365387, 0.2050434947013855, -0.17890872061252594, 0.1720568686723709, -0.16906331479549408,
          0.09703376144170761]
SQRT_HALF_BITS = 0x3F3504F3


def f_log2(e, d, s, t):
    """x = 2^k * m, m in [sqrt(1/2), sqrt(2)) by integer ops on the bits; u = m - 1 (exact);
    log2(x) = k + (u*L + u*g(u)), g of degree 10. +Inf/+NaN -> x, x < 0 (incl -0 handled next) -> NaN,
    +-0/denormal -> -Inf."""
    x = s[0]
    k, u, tc = t
    e.loadi(u, SQRT_HALF_BITS)
    e.isub_from(u, x)                       # ix = bits(x) - bits(sqrt(1/2))
    e.sar(k, u, 23)                         # k = ix >> 23
    e.shl(u, u, 9)
    e.shr(u, u, 9)                          # ix & 0x7fffff
    e.iadd(u, e.creg(tc, SQRT_HALF_BITS))   # m
    e.addi(u, -1.0)                         # u = m - 1
    e.cast(k, k, CAST_INT_SM)
    e.cast(k, k, CAST_SM_TO_FP_RNE)         # k as float
    horner(e, d, u, LOG2_G, tc)             # g(u)
    e.fmul(d, u, d)                         # w = u*g
    e.mad(d, u, e.creg(tc, LOG2_L), d)                      # log2(m) = u*L + w (|w| < |u*L|/4)
    e.fadd(d, k, d)                         # k + log2(m): exact when they cancel (k = -1, log2 m > 1/4)
    e.loadi(tc, F32_INF)
    e.le(tc, x)                             # x >= +Inf: +Inf, +NaN
    e.mov(d, x)
    e.endif()
    e.setcc(x, CC_LT0)                      # sign bit set
    e.loadi(d, F32_QNAN)
    e.endif()
    e.exexp(k, x, EXEXP_NODEBIAS)
    e.setcc(k, CC_EQ0)                      # +-0, denormals
    e.loadi(d, F32_NINF)
    e.endif()


# pi = P1 + P2 + P3: P1 and P2 of 13 significant bits each (so k*P1, k*P2 are exact for k of 11 bits), P3 = fp32 rest
SIN_P = [3.1416015625, -8.909031748771667e-06, 1.2154188766544394e-10]
SIN_KH_RND = 1.5 * 2.0 ** 34                # k + this - this rounds k to a multiple of 2**11 (|k| < 2**22)
SIN_Q = [-0.1666666716337204, 0.008333333767950535, -0.00019841265748254955, 2.7556900477065938e-06,
         -2.5028459305076467e-08, 1.5387395524424363e-10]   # sin r = r + r^3 q(r^2), |r| <= pi/2


def f_sin(e, d, s, t):
    """k = rint(x/pi) (fused x*(1/pi) + magic, an integer for |x| < 2**22 * pi = 1.3e7), split k = kh + kl (kh a
    multiple of 2**11, |kl| <= 2**10), then Cody-Waite r = x - kh*P1 - kl*P1 - kh*P2 - kl*P2 - kh*P3 - kl*P3 on
    SFPMAD: every product with P1/P2 is exact (11 + 13 bits) and so are the first differences, so r is within about
    2**-24 of x - k*pi; sin x = (-1)^k (r + r^3 q(r^2)). |x| < 2**-13 -> x; Inf/NaN -> NaN. Beyond 2**22 * pi the
    reduction is not exact (that needs pi to ~150 bits, Payne-Hanek): the result is only kept in [-1, 1]."""
    x = s[0]
    tk, kl, kh, tc = t
    m = e.creg(tc, MAGIC_RND)
    e.mad(tk, x, e.creg(kl, 1 / 3.141592653589793), m)     # tk = k + magic
    e.fsub(kl, tk, m)                       # k as float
    e.shl(tk, tk, 31)                       # parity of k -> sign bit
    c = e.creg(tc, SIN_KH_RND)
    e.fadd(kh, kl, c)
    e.fsub(kh, kh, c)                       # kh
    e.fsub(kl, kl, kh)                      # kl = k - kh (exact)
    e.mov(d, x)
    for p in SIN_P:
        pc = e.creg(tc, p)
        e.mad(d, kh, pc, d, MAD_NEG_B)
        e.mad(d, kl, pc, d, MAD_NEG_B)
    e.fmul(kl, d, d)                        # z = r*r
    horner(e, kh, kl, SIN_Q, tc)            # q(z)
    e.fmul(kl, d, kl)                       # r^3
    e.mad(d, kl, kh, d)                     # r + r^3 q
    e.xor(d, tk)
    e.setsgn_imm(kl, d, 0)
    e.le(kl, e.creg(tc, F32_INF))           # not NaN ...
    e.gt(kl, ONE)                           # ... and |result| > 1 (only where the reduction was not exact)
    e.setsgn_from_d(d, ONE)                 # +-1
    e.endif()
    e.exexp(tk, x)
    e.iaddi(tk, tk, 13, cc=0)               # |x| < 2**-13: sin x = x in fp32 (keeps -0, denormals)
    e.mov(d, x)
    e.endif()


# ---- integer
def i_add(e, d, s, t):                      # a + b (wraps)
    a, b = s
    if d == a:
        e.iadd(d, b)
    else:
        e.mov(d, b)
        e.iadd(d, a)


def i_sub(e, d, s, t):                      # a - b = SFPIADD(VC=a, VD=b, 2SCOMP)
    a, b = s
    e.mov(d, b)
    e.isub_from(d, a)


def i_neg(e, d, s, t):                      # 0 - a
    e.mov(d, s[0])
    e.isub_from(d, ZERO)


def i_mul(e, d, s, t):
    """a*b mod 2**32 with a = a0 + a1*2**23: lo23(a0*b0) + ((hi23(a0*b0) + lo(a1*b) + lo(a*b1)) << 23)."""
    a, b = s
    t1, t2 = t
    e.mul24(t1, a, b, upper=True)           # (a0*b0) >> 23
    e.shr(t2, a, 23)
    e.mul24(t2, t2, b)                      # low 23 bits of a1*b0
    e.iadd(t1, t2)
    e.shr(t2, b, 23)
    e.mul24(t2, a, t2)                      # low 23 bits of a0*b1
    e.iadd(t1, t2)
    e.shl(t1, t1, 23)
    e.mul24(d, a, b)                        # (a0*b0) & 0x7fffff
    e.iadd(d, t1)


def i_max(e, d, s, t):                      # (a < b).where(b, a)
    a, b = s
    e.mov(d, a)
    int_lt_flags(e, a, b, t[0], t[1])
    e.mov(d, b)
    e.endif()


def i_lt_value(e, d, s, t):                 # SFPGT SET_VD gives -1/0 on order-mapped values; >>> 31 -> 1/0
    a, b = s
    t1, t2 = t
    int_order(e, t1, a)
    int_order(e, t2, b)
    e.i("SFPGT", lreg_c=t1, lreg_dest=t2, instr_mod1=GT_SET_VD)
    e.shr(d, t2, 31)


def i_ne(e, d, s, t):                       # clz(a ^ b) - 32 < 0  <=>  a != b
    t1 = t[0]
    e.mov(t1, s[0])
    e.xor(t1, s[1])
    e.clz(t1, t1)
    e.iaddi(t1, t1, -32)
    e.shr(d, t1, 31)


def i_shl(e, d, s, t):
    """a << b (C on int32: b in 0..31). SFPSHFT with the amount in VC shifts VD left for amounts >= 0."""
    a, b = s
    e.mov(d, a)
    e.shift_by(d, b)


def i_shr(e, d, s, t):
    """a >> b, arithmetic (C on int32: b in 0..31): SFPSHFT shifts right by -amount for negative amounts; the
    amount 0 - b is 0 for b = 0, which SFPSHFT takes as a left shift by 0 (the same value)."""
    a, b = s
    e.mov(t[0], b)
    e.isub_from(t[0], ZERO)
    e.mov(d, a)
    e.i("SFPSHFT", lreg_c=t[0], lreg_dest=d, instr_mod1=SHFT_ARITH)


def abs_into(e: Emitter, d: int, x: int) -> None:
    """d = |x| for int32 x; |INT_MIN| stays 0x80000000, i.e. 2**31 read as uint32."""
    e.mov(d, x)
    e.setcc(x, CC_LT0)
    e.isub_from(d, ZERO)
    e.endif()


def sub_flags_gte0(e: Emitter, d: int, c: int) -> None:
    """d = c - d; LaneFlags &= (d >= 0 as int32)."""
    e.i("SFPIADD", lreg_c=c, lreg_dest=d, instr_mod1=IADD_SUB | IADD_CC_GTE0)


BIG_DIVISOR = 0x40000001                    # |b| >= this: the restoring loop's signed compare could overflow


def int_divmod(want_rem: bool, floor: bool):
    """int32 division as tinygrad defines it (uop/ops.py python_alu: CDIV/CMOD truncate, FLOORDIV/FLOORMOD floor,
    the remainder taking the sign of the dividend resp. the divisor). Quotients wrap (INT_MIN / -1 = INT_MIN,
    remainder 0). Division by zero traps on the CPU device; here it gives tinygrad's constant-folding values
    (helpers.cdiv/floordiv): quotient 0, remainder = the dividend.
    Restoring division of |a| by |b| (32 steps of shift, trial subtract, keep): the quotient bits shift into the
    dividend's register from below. For |b| <= 2**30 the partial remainder stays below 2**31, so the trial
    subtraction's sign is an exact compare; larger divisors have quotient 0 or 1, set apart after the loop.
    ~320 instructions, 3 scratch registers."""
    def fn(e, d, s, t):
        x, y = s
        w = t[2]
        q, b, r = (t[0], t[1], d) if want_rem else (d, t[0], t[1])
        abs_into(e, q, x)
        abs_into(e, b, y)
        e.mov(r, ZERO)
        restoring_loop(e, q, b, r, w)
        e.loadi(w, BIG_DIVISOR)
        sub_flags_gte0(e, w, b)             # |b| > 2**30 (2**31 included: the difference stays below 2**31)
        e.sar(w, x, 31)
        e.mov(r, x)
        e.xor(r, w)
        e.isub_from(w, r)                   # w = |x| without a nested branch: (x ^ s) - s
        e.mov(r, w)
        e.mov(q, ZERO)
        e.mov(w, b)
        sub_flags_gte0(e, w, r)             # |x| - |b| >= 0 (no overflow: |b| > 2**30, |x| <= 2**31)
        e.mov(r, w)
        e.iaddi(q, q, 1)
        e.endif()
        e.setcc(x, CC_LT0)                  # the truncated remainder has the dividend's sign
        e.isub_from(r, ZERO)
        e.endif()
        e.mov(w, x)
        e.xor(w, y)
        e.setcc(w, CC_LT0)                  # operand signs differ: negative quotient
        e.isub_from(q, ZERO)
        e.endif()
        if floor:                           # r != 0 with the sign opposite to b: one step down
            e.mov(w, r)
            e.xor(w, y)
            e.setcc(w, CC_LT0)
            e.setcc(r, CC_NE0)
            e.iaddi(q, q, -1)
            e.iadd(r, y)
            e.endif()
        e.setcc(y, CC_EQ0)
        e.mov(q, ZERO)
        e.mov(r, x)
        e.endif()
    return fn


def restoring_loop(e: Emitter, q: int, b: int, r: int, w: int) -> None:
    """32 steps of restoring division of q by b (r = 0 on entry): shift, trial subtract, keep; the quotient bits shift
    into q from below, r ends as the remainder. The trial's sign is an exact compare while r < b <= 2**31 (as
    unsigned): 2r + 1 < 2**32 and 2r + 1 - b lies in [-2**31, 2**31)."""
    for _ in range(32):
        e.shl(r, r, 1)
        e.shr(w, q, 31)
        e.or3(r, r, w)                  # r = 2r + next dividend bit
        e.shl(q, q, 1)
        e.mov(w, b)
        sub_flags_gte0(e, w, r)         # w = r - b, lanes where it is >= 0:
        e.mov(r, w)
        e.iaddi(q, q, 1)                # quotient bit 1
        e.endif()


def uint_divmod(want_rem: bool):
    """uint32 division (truncating and flooring agree) as tinygrad defines it; x / 0 = 0 and x % 0 = x (helpers.cdiv,
    as int_divmod). The restoring loop on the operands as they are covers divisors up to 2**31; larger ones have
    quotient 0 or 1, decided on lanes where both operands are >= 2**31 (their difference is then an exact int32).
    ~300 instructions, 3 scratch registers."""
    def fn(e, d, s, t):
        x, y = s
        w = t[2]
        q, b, r = (t[0], t[1], d) if want_rem else (d, t[0], t[1])
        e.mov(q, x)
        e.mov(b, y)
        e.mov(r, ZERO)
        restoring_loop(e, q, b, r, w)
        e.setcc(y, CC_LT0)                  # y > 2**31 (2**31 itself gives the same answer here)
        e.mov(q, ZERO)
        e.mov(r, x)
        e.setcc(x, CC_LT0)                  # ... and x >= 2**31
        e.mov(w, y)
        sub_flags_gte0(e, w, x)             # ... and x - y >= 0: quotient 1
        e.mov(r, w)
        e.iaddi(q, q, 1)
        e.endif()
        e.setcc(y, CC_EQ0)
        e.mov(q, ZERO)
        e.mov(r, x)
        e.endif()
    return fn


def u_shr(e, d, s, t):
    """a >> b, logical (C on uint32: b in 0..31): SFPSHFT by the negated amount shifts right without sign fill."""
    a, b = s
    e.mov(t[0], b)
    e.isub_from(t[0], ZERO)
    e.mov(d, a)
    e.shift_by(d, t[0])


def u_lt_value(e, d, s, t):                 # unsigned a < b: flip both sign bits, then the int32 comparison
    a, b = s
    t1, t2, t3 = t
    e.loadi(t3, 0x80000000)
    e.mov(t1, a)
    e.xor(t1, t3)
    int_order(e, t2, t1)
    e.mov(t1, b)
    e.xor(t1, t3)
    int_order(e, t3, t1)
    e.i("SFPGT", lreg_c=t2, lreg_dest=t3, instr_mod1=GT_SET_VD)
    e.shr(d, t3, 31)


def u_max(e, d, s, t):                      # (a < b).where(b, a), unsigned
    a, b = s
    t1, t2, t3 = t
    e.loadi(t3, 0x80000000)
    e.mov(t1, a)
    e.xor(t1, t3)
    e.mov(t2, b)
    e.xor(t2, t3)
    e.mov(d, a)
    int_lt_flags(e, t1, t2, t3, t1)
    e.mov(d, b)
    e.endif()


def b_lt(e, d, s, t):                       # bool a < b  <=>  !a & b
    e.bnot(t[0], s[0])
    e.and3(d, t[0], s[1])


def bit_op(name):
    def fn(e, d, s, t):                     # d = a op b (bool: 0/1 stays 0/1)
        a, b = s
        if name == "SFPXOR":
            if d == b:
                a, b = b, a
            e.mov(d, a)
            e.xor(d, b)
        else:
            e.i(name, imm12_math=a, lreg_c=b, lreg_dest=d, instr_mod1=USE_VB)
    return fn


def where(e, d, s, t):                      # c ? x : y (c is 0/1)
    c, x, y = s
    e.mov(d, y)
    e.setcc(c, CC_NE0)
    e.mov(d, x)
    e.endif()


# ---- casts
def truncated_magnitude(e, d: int, x: int, t1: int) -> None:
    """d = trunc(|x|) for exponents e < 32 (the mantissa shifted by e-23; |x| < 1 -> 0), t1 = the unbiased exponent e:
    the part the float -> int32 and float -> uint32 casts share before their sign and range rules."""
    e.exman(d, x)
    e.exexp(t1, x)
    e.iaddi(t1, t1, -23)
    e.shift_by(d, t1)                       # left by e-23 or right by 23-e
    e.iaddi(t1, t1, 23, cc=0)               # flags: e < 0
    e.mov(d, ZERO)
    e.endif()


def cast_f_to_i(e, d, s, t):
    """C truncation: mantissa shifted by e-23; |x| < 1 -> 0; |x| >= 2**31, Inf, NaN -> INT32_MIN (x86 cvttss2si)."""
    x = s[0]
    t1 = t[0]
    truncated_magnitude(e, d, x, t1)
    e.setcc(x, CC_LT0)
    e.isub_from(d, ZERO)                    # negate for x < 0
    e.endif()
    e.iaddi(t1, t1, -31, cc=IADD_CC_GTE0)   # flags: e >= 31
    e.loadi(d, 0x80000000)
    e.endif()


def cast_f_to_b(e, d, s, t):                # x != 0.0 <=> (bits & 0x7fffffff) != 0 (NaN, denormals -> true)
    e.clz(d, s[0], LZ_NOSGN)
    e.iaddi(d, d, -32)
    e.shr(d, d, 31)


def cast_i_to_b(e, d, s, t):                # x != 0
    e.clz(d, s[0])
    e.iaddi(d, d, -32)
    e.shr(d, d, 31)


def cast_i_to_f(e, d, s, t):
    """two's complement -> sign-magnitude -> fp32 (RNE, exact like (float)x); -2**31 becomes -0 there: fix it."""
    x = s[0]
    t1 = t[0]
    e.cast(d, x, CAST_INT_SM)
    e.cast(d, d, CAST_SM_TO_FP_RNE)
    e.setcc(x, CC_LT0)                          # flags: x < 0
    e.iaddi(t1, x, -1, cc=IADD_CC_GTE0)         # ... and x - 1 >= 0 (wrapping): only x == -2**31
    e.loadi(d, 0xCF000000)
    e.endif()


def cast_f_to_u(e, d, s, t):
    """(uint32)x by x86's vcvttss2usi rule (C leaves out-of-range values undefined; tinygrad's CPU device gives this
    rule on AVX-512 hosts and wraps negative values on others): the mantissa shifted by e-23 (|x| < 1 -> 0);
    x <= -1, x >= 2**32, Inf and NaN -> 0xFFFFFFFF, on every host."""
    x = s[0]
    t1 = t[0]
    truncated_magnitude(e, d, x, t1)
    e.setcc(x, CC_LT0)
    e.iaddi(t1, t1, 0, cc=IADD_CC_GTE0)     # flags: x < 0 and e >= 0, i.e. x <= -1
    e.loadi(d, 0xFFFFFFFF)
    e.endif()
    e.iaddi(t1, t1, -32, cc=IADD_CC_GTE0)   # flags: e >= 32 (Inf, NaN included)
    e.loadi(d, 0xFFFFFFFF)
    e.endif()


def cast_u_to_f(e, d, s, t):
    """uint32 -> fp32 (RNE): below 2**31 the int32 conversion; from 2**31 on, (x >> 1) | (x & 1) (the dropped bit kept
    as a sticky bit, so one rounding of the halved value rounds like x) converted, then doubled (exact)."""
    x = s[0]
    t1 = t[0]
    e.cast(d, x, CAST_SM_TO_FP_RNE)         # x >= 0 as int32: its sign-magnitude form is itself
    e.setcc(x, CC_LT0)                      # bit 31 set
    e.shl(t1, x, 31)
    e.shr(t1, t1, 31)                       # x & 1
    e.shr(d, x, 1)
    e.or3(d, d, t1)
    e.cast(d, d, CAST_SM_TO_FP_RNE)
    e.fadd(d, d, d)
    e.endif()


def cast_b_to_f(e, d, s, t):                # 0/1 -> 0.0/1.0
    e.cast(d, s[0], CAST_SM_TO_FP_RNE)


def f_round_only(e, d, s, t):               # float32 -> bfloat16: the rounding is appended by the table
    e.mov(d, s[0])


@dataclass(frozen=True)
class Seq:
    fn: Callable
    tmps: int = 0                           # scratch registers
    alias: tuple[int, ...] = ()             # source positions the destination may share (when that source dies)
    rounds: bool = False                    # result is a new float value: bfloat16 results get round_bf16 appended


F, I, B = "f", "i", "b"                     # operand classes: float32/bfloat16, int32, bool
U = "u"                                     # uint32
CLASS = {"float32": F, "bfloat16": F, "int32": I, "bool": B, "uint32": U, "float16": F}

# (op, operand class) -> sequence. Comparisons are keyed by the operand class; their result is bool.
SEQS: dict[tuple[str, str], Seq] = {
    ("ADD", F): Seq(f_add, 0, (0, 1), True),
    ("SUB", F): Seq(f_sub, 0, (0, 1), True),
    ("MUL", F): Seq(f_mul, 0, (0, 1), True),
    ("NEG", F): Seq(f_neg, 0, (0,)),
    ("MULADD", F): Seq(f_muladd, 0, (0, 1, 2), True),
    ("MULSUB", F): Seq(f_mulsub, 0, (0, 1, 2), True),
    ("NMULADD", F): Seq(f_nmuladd, 0, (0, 1, 2), True),
    ("MAX", F): Seq(f_max, 1, (0,)),
    ("CMPLT", F): Seq(f_lt_value, 0, (0,)),
    ("CMPNE", F): Seq(f_ne, 3, (0, 1)),
    ("TRUNC", F): Seq(f_trunc, 2),
    ("RECIPROCAL", F): Seq(f_recip, 4, (), True),
    ("DIV", F): Seq(f_div, 4, (), True),
    ("SQRT", F): Seq(f_sqrt, 3, (), True),
    ("EXP2", F): Seq(f_exp2, 3, (), True),
    ("LOG2", F): Seq(f_log2, 3, (), True),
    ("SIN", F): Seq(f_sin, 4, (), True),
    ("ADD", I): Seq(i_add, 0, (0, 1)),
    ("SUB", I): Seq(i_sub, 0, (1,)),
    ("NEG", I): Seq(i_neg, 0, (0,)),
    ("MUL", I): Seq(i_mul, 2),
    ("MAX", I): Seq(i_max, 2, (0,)),
    ("CMPLT", I): Seq(i_lt_value, 2, (0, 1)),
    ("CMPNE", I): Seq(i_ne, 1, (0, 1)),
    ("AND", I): Seq(bit_op("SFPAND"), 0, (0, 1)),
    ("OR", I): Seq(bit_op("SFPOR"), 0, (0, 1)),
    ("XOR", I): Seq(bit_op("SFPXOR"), 0, (0, 1)),
    ("SHL", I): Seq(i_shl, 0, (0,)),
    ("SHR", I): Seq(i_shr, 1, (0,)),
    ("CDIV", I): Seq(int_divmod(False, False), 3),
    ("CMOD", I): Seq(int_divmod(True, False), 3),
    ("FLOORDIV", I): Seq(int_divmod(False, True), 3),
    ("FLOORMOD", I): Seq(int_divmod(True, True), 3),
    # uint32: the ops whose bits depend on the sign interpretation; the rest are int32's (below)
    ("MAX", U): Seq(u_max, 3, (0,)),
    ("CMPLT", U): Seq(u_lt_value, 3, (0, 1)),
    ("SHR", U): Seq(u_shr, 1, (0,)),
    **{(op, U): Seq(uint_divmod(rem), 3) for op, rem in (("CDIV", False), ("FLOORDIV", False), ("CMOD", True),
                                                          ("FLOORMOD", True))},
    ("CMPLT", B): Seq(b_lt, 1, (0, 1)),
    ("CMPNE", B): Seq(bit_op("SFPXOR"), 0, (0, 1)),
    ("AND", B): Seq(bit_op("SFPAND"), 0, (0, 1)),
    ("OR", B): Seq(bit_op("SFPOR"), 0, (0, 1)),
    ("XOR", B): Seq(bit_op("SFPXOR"), 0, (0, 1)),
    ("MAX", B): Seq(bit_op("SFPOR"), 0, (0, 1)),          # max of 0/1 = or
    ("ADD", B): Seq(bit_op("SFPOR"), 0, (0, 1)),          # bool add = or, bool mul = and (tinygrad)
    ("MUL", B): Seq(bit_op("SFPAND"), 0, (0, 1)),
}
# two's complement add/sub/neg/mul, equality, bit ops and left shifts give uint32's bits too: the int32 sequences
SEQS.update({(op, U): SEQS[(op, I)] for op in ("ADD", "SUB", "NEG", "MUL", "CMPNE", "AND", "OR", "XOR", "SHL")})
WHERE_SEQ = Seq(where, 0, (2,))


def shl_imm(e, d, s, t, n): e.shl(d, s[0], n & 31)          # C shifts of 32-bit values take amounts 0..31
def shr_imm(e, d, s, t, n): e.shr(d, s[0], n & 31)
def sar_imm(e, d, s, t, n): e.sar(d, s[0], n & 31)


def iadd_imm(e, d, s, t, n):
    e.iaddi(d, s[0], ((n + 2**31) & 0xFFFFFFFF) - 2**31)


# (op, operand class) -> (fits(v), sequence of "a op constant v", v given to the sequence as its last argument): the
# constant never takes a register (the code generator uses these when the second source is a CONST that fits)
IMM_SEQS: dict[tuple[str, str], tuple[Callable[[int], bool], Seq]] = {
    **{("SHL", c): (lambda v: True, Seq(shl_imm, 0, (0,))) for c in (I, U)},
    ("SHR", I): (lambda v: True, Seq(sar_imm, 0, (0,))),
    ("SHR", U): (lambda v: True, Seq(shr_imm, 0, (0,))),
    **{("ADD", c): (lambda v: -2048 <= ((v + 2**31) & 0xFFFFFFFF) - 2**31 < 2048, Seq(iadd_imm, 0, (0,)))
       for c in (I, U)},
}

# CAST (source dtype, result dtype) -> sequence; None = same bits (the value is shared, no code).
CASTS: dict[tuple[str, str], Seq | None] = {
    ("float32", "float32"): None, ("bfloat16", "bfloat16"): None, ("int32", "int32"): None, ("bool", "bool"): None,
    ("bfloat16", "float32"): None,                          # bf16 values already are fp32 values
    ("bool", "int32"): None,                                # 0/1 either way
    ("float32", "bfloat16"): Seq(f_round_only, 0, (0,), True),
    ("float32", "int32"): Seq(cast_f_to_i, 1), ("bfloat16", "int32"): Seq(cast_f_to_i, 1),
    ("float32", "bool"): Seq(cast_f_to_b, 0, (0,)), ("bfloat16", "bool"): Seq(cast_f_to_b, 0, (0,)),
    ("int32", "float32"): Seq(cast_i_to_f, 1), ("int32", "bfloat16"): Seq(cast_i_to_f, 1, (), True),
    ("int32", "bool"): Seq(cast_i_to_b, 0, (0,)),
    ("bool", "float32"): Seq(cast_b_to_f, 0, (0,)), ("bool", "bfloat16"): Seq(cast_b_to_f, 0, (0,)),
    ("uint32", "uint32"): None, ("uint32", "int32"): None, ("int32", "uint32"): None,   # same bits (wrapping)
    ("bool", "uint32"): None, ("uint32", "bool"): Seq(cast_i_to_b, 0, (0,)),
    ("float32", "uint32"): Seq(cast_f_to_u, 1), ("bfloat16", "uint32"): Seq(cast_f_to_u, 1),
    ("uint32", "float32"): Seq(cast_u_to_f, 1), ("uint32", "bfloat16"): Seq(cast_u_to_f, 1, (), True),
}
# float16 values are float32 values on the float16 grid: widening is free, narrowing rounds (ROUNDERS)
CASTS.update({
    ("float16", "float16"): None, ("float16", "float32"): None,
    ("float32", "float16"): Seq(f_round_only, 0, (0,), True), ("bfloat16", "float16"): Seq(f_round_only, 0, (0,), True),
    ("float16", "bfloat16"): Seq(f_round_only, 0, (0,), True),
    ("float16", "int32"): Seq(cast_f_to_i, 1), ("float16", "bool"): Seq(cast_f_to_b, 0, (0,)),
    ("int32", "float16"): Seq(cast_i_to_f, 1, (), True), ("bool", "float16"): Seq(cast_b_to_f, 0, (0,)),
    # uint32 -> float32 is exact below 2**24 and anything from 65520 on is inf in float16: one rounding either way
    ("float16", "uint32"): Seq(cast_f_to_u, 1), ("uint32", "float16"): Seq(cast_u_to_f, 1, (), True),
})
ROUND_TMPS = 3
