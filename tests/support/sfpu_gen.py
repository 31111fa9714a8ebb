"""Case generators and launch packing for the SFPU differential suite (tests/diff/test_diff_sfpu_ttsim.py).

A *case* is a short SFPU program run by TRISC1 of tests/programs/sfpu/sfpu_diff.c (every word comes from L1):

    SFPLOAD  L0..L7 <- its 8 operand units (INT32 mode 4: raw bits, any pattern reaches the LRegs untouched)
    prologue            lane-predication scenario (SFPENCC / SFPSETCC / SFPPUSHC / SFPCOMPC ...), optional
    body                the instruction(s) under test (random legal fields)
    SFPSTORE L10 (1.0) -> its flag unit, predicated: a lane reads 0x3F800000 iff it was enabled after the body
    SFPPOPC x depth; SFPENCC (all lanes on, UseLaneFlags off)
    SFPSTORE L0..L7 -> the same 8 units (INT32 mode 4, raw)
    post                restore global state the body changed (LReg11..14 constants, LaneConfig)

A *unit* is what one SFPLOAD/SFPSTORE at Dst address 2u touches: Dst32b rows 4*(u//2)..+3, columns of parity u&1
(lane l <-> row + l//8, column 2*(l%8) + (u&1)). The 8 Dst slots of 32-bit mode hold 256 units.

Legal ranges come from what ttsim (the oracle) accepts; everything it treats as fatal (_Exit) is excluded here and
listed in EXCLUDED.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field

import numpy as np

from tt_backend.chip import isa

N_SLOTS = 8
N_UNITS = 32 * N_SLOTS
ALU_CFG = {"fp32": 0x60000000, "bf16": 0x20000000, "fp16": 0x20200000}  # cfg 1: SFPU_Fp32_enabled / SrcB format

E = isa.encode

# ---------------------------------------------------------------------------------------------------------------
# What ttsim rejects (tensix.cpp TTSIM_VERIFY / TTSIM_ERROR, BH build): never generated.
EXCLUDED = """\
SFPLOADMACRO: all (ttsim: explicitly out of scope)
SFPLOAD: instr_mod0 1,5,7,8,9,10,11,13 (Unimplemented); lreg_ind >= 12; odd address
SFPSTORE: instr_mod0 1,5,8,10,11,13 (Unimplemented); lreg_ind >= 12; odd address
SFPLOADI: instr_mod0 not in {0,1,2,4,8,10}; lreg_ind >= 8
SFPMAD/SFPADD: instr_mod1 >= 4 (INDIRECT_VA/VD); SFPADD needs lreg_src_a or lreg_src_b = 10
SFPMUL: instr_mod1 >= 2; lreg_src_c != 9
SFPADDI/SFPMULI: instr_mod1 != 0
SFPMUL24: instr_mod1 >= 2 (INDIRECT); lreg_src_c != 9
SFPDIVP2: instr_mod1 >= 2; imm12 in 0x80..0xF7F
SFPEXEXP: instr_mod1 not in {0,1,2,10}; SFPEXMAN: instr_mod1 >= 2
SFPIADD: instr_mod1 > 10 or (instr_mod1 & 3) == 3
SFPSHFT: instr_mod1 not in {0,1,2,3,5,7}; imm12 != 0 without bit 0
SFPSHFT2: instr_mod1 not in {3,4,5} (COPY4 modes 0-2, SHFT_IMM 6 unimplemented); imm12 != 0 unless mode 5 (VB < 16)
SFPSETCC: instr_mod1 odd or > 6 (IMM / CLEAR modes); imm12 != 0; UseLaneFlags off
SFPENCC: instr_mod1 not in {0,10}; mod1 0 with imm != 0
SFPPUSHC/SFPPOPC: instr_mod1 != 0; push beyond depth 8; pop of an empty stack
SFPCOMPC: UseLaneFlags off, or the stack top's UseLaneFlags off
SFPMOV: instr_mod1 not in {0,1,2,8}; mod1 8 with lreg_c != 9 (only the PRNG special register)
SFPAND/SFPOR: instr_mod1 >= 2; imm12 > 15 with mod1 1, imm12 != 0 with mod1 0
SFPLZ: instr_mod1 not in {0,2,4}; SFPABS, SFPSETSGN, SFPSETMAN: instr_mod1 >= 2
SFPSETEXP: instr_mod1 > 2; imm12 > 255; imm12 != 0 unless mod1 1
SFPSETMAN: imm12 != 0 (so mod1 1 only sets mantissa 0); SFPSETSGN: imm12 > 1
SFP_STOCH_RND: instr_mod1 not in {1,2,3,6,7} (FP16A, IntInt, stochastic); rnd_mode != 0; imm8 != 0
SFPCAST: instr_mod1 1 (stochastic), 2 (use SFPABS)
SFPCONFIG: instr_mod1 >= 2; L0 not uniform with mod1 0; some lanes disabled; dest 9, 10; dest 0-3 with mod1 1;
  dest 8 without mod1 1 or imm > 0xFFF; dest 11-14 with imm != 0, mod1 1 only for dest 11; LaneConfig bits
  other than ENABLE_DEST_INDEX (4) and EXCHANGE_SRCB_SRCC (0x100)
SFPSWAP: instr_mod1 4-8 (Unimplemented), 10-15; lreg_dest >= 12; with ENABLE_DEST_INDEX: lreg_c or lreg_dest >= 4
SFPLUT: instr_mod0 != 4; SFPLUTFP32: instr_mod1 != 2; SFPGT/SFPLE: instr_mod1 not in {1, 8}
SFPARECIP: instr_mod1 != 0 (COND_RECIP, EXP); imm12 != 0
SFPTRANSP: lreg_dest != 0 (field must be 0)
Not generated although ttsim would run them: 32-bit-mode SFPLOAD/SFPSTORE at Dst rows >= 512 (undefined in our model),
non-zero unused encoding bits (ttsim's decoders reject them), ADDR_MOD_DST_SEC<n> other than SEC1 = +2.
"""

# ---------------------------------------------------------------------------------------------------------------
# operands
SPECIAL32 = [
    0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF800001, 0x7FFFFFFF,
    0xFFFFFFFF, 0x7FBFFFFF, 0x00000001, 0x80000001, 0x007FFFFF, 0x807FFFFF, 0x00400000, 0x00800000, 0x80800000,
    0x00800001, 0x00FFFFFF, 0x7F7FFFFF, 0xFF7FFFFF, 0x7F000000, 0x7E800000, 0x7E7FFFFF, 0x3F800000, 0xBF800000,
    0x3F7FFFFF, 0x3F800001, 0x3FFFFFFF, 0x40000000, 0x3F000000, 0x3FC00000, 0x40400000, 0x4B000000, 0x4AFFFFFF,
    0x4B7FFFFF, 0x4F000000, 0xCF000000, 0x47800000, 0x477FFF00, 0x33800000, 0x34000000, 0x3C800000, 0x3F320000,
    0x00000002, 0x00000003, 0x0000001F, 0x00000020, 0x0000FFFF, 0xFFFF0000, 0x00010000, 0x7FFF0000, 0x8000FFFF,
    0xFFFFFFFE, 0xFFFFFFE0, 0xFFFFFFE1, 0x0000007F, 0x000000FF, 0x00000100, 0x55555555, 0xAAAAAAAA, 0x3F808000,
    0x3F818000, 0x3F807FFF, 0x00008000, 0x00007FFF,
]
SPECIAL_EXP = [0, 1, 2, 63, 64, 100, 103, 112, 113, 126, 127, 128, 129, 141, 142, 150, 151, 157, 158, 252, 253, 254,
               255]
_SPECIAL_ARR = np.array(SPECIAL32, dtype=np.uint32)


def operands(rng: np.random.Generator, n: int) -> np.ndarray:
    """n raw 32-bit patterns: ~30% listed specials, ~25% special exponents with edge/random mantissas, ~15% small
    signed integers, ~30% uniformly random bits."""
    kind = rng.integers(0, 20, n)
    out = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)          # random bits
    sp = kind < 6
    out[sp] = _SPECIAL_ARR[rng.integers(0, len(SPECIAL32), sp.sum())]
    ex = (kind >= 6) & (kind < 11)
    k = ex.sum()
    e = np.array(SPECIAL_EXP, dtype=np.uint32)[rng.integers(0, len(SPECIAL_EXP), k)]
    mchoice = rng.integers(0, 4, k)
    rnd = rng.integers(0, 1 << 23, k).astype(np.uint32)
    m = np.where(mchoice == 0, 0, np.where(mchoice == 1, 0x7FFFFF, np.where(mchoice == 2, rnd | 1, rnd)))
    s = rng.integers(0, 2, k).astype(np.uint32) << 31
    out[ex] = s | (e << 23) | m.astype(np.uint32)
    si = (kind >= 11) & (kind < 14)
    out[si] = rng.integers(-70, 70, si.sum()).astype(np.int64).astype(np.uint32)
    return out


def special_imm16(r: random.Random) -> int:
    """bf16/fp16 immediates biased to specials."""
    c = r.random()
    if c < 0.4:
        return r.choice([0x0000, 0x8000, 0x7F80, 0xFF80, 0x7FC0, 0xFFC0, 0x7F81, 0x3F80, 0xBF80, 0x0001, 0x807F,
                         0x0080, 0x7F7F, 0xFF7F, 0x4000, 0x3F00, 0x7C00, 0xFC00, 0x7BFF, 0x03FF, 0x0400, 0xFFFF,
                         0x7FFF, 0x3C00, 0x4B00, 0x3400])
    return r.getrandbits(16)


# ---------------------------------------------------------------------------------------------------------------
@dataclass
class Case:
    key: str                        # "INSTR/mode" the case counts for
    body: list[int]                 # words between the prologue and the flag store
    prologue: list[int] = field(default_factory=list)
    depth: int = 0                  # flag-stack depth left by prologue + body (popped before the final stores)
    post: list[int] = field(default_factory=list)
    scratch: int = 0                # extra units (host-initialised, never re-stored by the epilogue)
    counts: tuple[str, ...] = ()    # further keys this case also counts for
    fill: object = None             # optional fill(np_rng, vals[8, 32] uint32) -> vals: operands of L0..L7
    # filled in by pack(): absolute unit numbers
    units: list[int] = field(default_factory=list)


def lreg(r: random.Random, hi: int = 16) -> int:
    return r.randrange(hi)


def predication(r: random.Random, need_visible: bool = False) -> tuple[list[int], int]:
    """A random lane-predication prologue (all legal in ttsim) and the stack depth it leaves.
    need_visible: always leave UseLaneFlags on, so flag writes of the body show in the flag unit."""
    c = r.random()
    if c < (0.0 if need_visible else 0.3):
        return [], 0
    words = [E("SFPENCC", instr_mod1=10, imm12_math=3)]     # UseLaneFlags = 1, all flags set
    depth = 0
    if c < 0.45:
        return words, 0
    words.append(E("SFPSETCC", instr_mod1=r.choice([0, 2, 4, 6]), lreg_c=r.randrange(8)))
    if r.random() < 0.5:
        words.append(E("SFPPUSHC"))
        depth += 1
        words.append(E("SFPSETCC", instr_mod1=r.choice([0, 2, 4, 6]), lreg_c=r.randrange(8)))
        if r.random() < 0.5:
            words.append(E("SFPCOMPC"))
    elif r.random() < 0.2:
        words.append(E("SFPCOMPC"))
    return words, depth


# --- per-instruction generators: each returns a Case -------------------------------------------------------------
def _simple(name: str, key: str, **fixed):
    """Random lreg fields (dest < 8 where ttsim requires it) + given fixed fields, with a random predication."""
    def g(r: random.Random) -> Case:
        f = dict(fixed)
        for fld in isa.INSTRUCTIONS[name].fields:
            if fld.name in f:
                continue
            if fld.name in ("lreg_dest", "lreg_ind"):
                f[fld.name] = r.randrange(8)
            elif fld.name.startswith("lreg"):
                f[fld.name] = lreg(r)
        names = {fld.name for fld in isa.INSTRUCTIONS[name].fields}
        for k, v in list(f.items()):
            if callable(v):
                f[k] = v(r)
            if k not in names:   # a field this encoding does not have: only "0" may be asked for
                assert f.pop(k) == 0, (name, k)
        pro, depth = predication(r)
        return Case(key, [E(name, **f)], pro, depth)
    return g


def _flagwriter(name: str, key: str, **fixed):
    """Like _simple, but the prologue always turns UseLaneFlags on so the flag result is observed."""
    base = _simple(name, key, **fixed)

    def g(r: random.Random) -> Case:
        c = base(r)
        if r.random() < 0.85:
            c.prologue, c.depth = predication(r, need_visible=True)
        return c
    return g


def _mad(name: str, mod1: int):
    def g(r: random.Random) -> Case:
        a, b, c = lreg(r), lreg(r), lreg(r)
        if name == "SFPADD":
            if r.random() < 0.5:
                a = 10
            else:
                b = 10
        if name == "SFPMUL":
            c = 9
        pro, depth = predication(r)
        return Case(f"{name}/mod1={mod1}", [E(name, lreg_src_a=a, lreg_src_b=b, lreg_src_c=c,
                                               lreg_dest=r.randrange(8), instr_mod1=mod1)], pro, depth)
    return g


def _imm_mad(name: str):
    def g(r: random.Random) -> Case:
        pro, depth = predication(r)
        return Case(f"{name}/mod1=0", [E(name, lreg_dest=r.randrange(8), imm16_math=special_imm16(r))], pro, depth)
    return g


def _loadi(mod0: int):
    def g(r: random.Random) -> Case:
        pro, depth = predication(r)
        return Case(f"SFPLOADI/mod0={mod0}", [E("SFPLOADI", lreg_ind=r.randrange(8), instr_mod0=mod0,
                                                 imm16=special_imm16(r))], pro, depth)
    return g


_LOAD32 = {3, 4, 12}


def _addr16(unit: int, lo: bool) -> int:
    """16-bit-mode Dst address whose 4 x 8 Dst16b datums are the high (or low) halves of 32-bit unit `unit`."""
    b = 2 * unit                      # 32-bit address 8k + 4q + 2p
    return ((b >> 3) << 4) | (8 if lo else 0) | (b & 7)


def _addressed(r: random.Random, c: Case, name: str, vd: int, mod0: int, addr_of) -> None:
    """Set c.body_of for one SFPLOAD/SFPSTORE at addr_of(units), sometimes reached another way:
    * ~25%: through DEST_TARGET_REG_CFG_MATH_Offset (SETC16 thread reg 1 := off, Imm10 = addr - off mod 1024; reset
      to 0 after), counted also under "<name>/math-offset";
    * ~25%: with sfpu_addr_mode 1..3 (ADDR_MOD_DST_SEC1 = +2, SEC2/3 = 0), observed by a following raw SFPLOAD at
      Imm10 = 2u - 2 into another LReg, then SETRWC Dst := 0; counted also under "<name>/rwc-incr"."""
    v = r.random()
    off = r.randrange(0, 512, 2) if v < 0.25 else 0
    am = r.randrange(1, 4) if 0.25 <= v < 0.5 else 0
    obs_k, obs_dst = r.randrange(1, 8), r.randrange(8)
    if off:
        c.counts += (f"{name}/math-offset",)
    if am:
        c.counts += (f"{name}/rwc-incr",)

    def body(units):
        a = addr_of(units)
        words = []
        if off:
            words.append(E("SETC16", setc16_reg=1, setc16_value=off))
        words.append(E(name, lreg_ind=vd, instr_mod0=mod0, dest_reg_addr=(a - off) & 0x3FF, sfpu_addr_mode=am))
        if off:
            words.append(E("SETC16", setc16_reg=1, setc16_value=0))
        if am:
            words.append(E("SFPLOAD", lreg_ind=obs_dst, instr_mod0=4, dest_reg_addr=2 * units[obs_k] - 2))
            words.append(E("SETRWC", bit_mask=0x4))
        return words
    c.body_of = body


def _load(mod0: int, cfg: str, lo_rows: bool = False):
    """SFPLOAD mode mod0 (0 resolves by cfg) of one of the case's units; 16-bit modes read the high (or, lo_rows,
    the low) halves. Counted under SFPLOAD/mod0=<m>[@cfg][/lo]."""
    wide = mod0 in _LOAD32 or (mod0 == 0 and cfg == "fp32")

    def g(r: random.Random) -> Case:
        pro, depth = predication(r)
        c = Case(f"SFPLOAD/mod0={mod0}" + (f"@{cfg}" if mod0 == 0 else "") + ("/lo" if lo_rows else ""), [], pro,
                 depth, scratch=1)
        u = r.randrange(10)
        _addressed(r, c, "SFPLOAD", r.randrange(12), mod0,
                   lambda units: (2 * units[u]) if wide else _addr16(units[u], lo_rows))
        return c
    return g


def _store(mod0: int, cfg: str):
    """SFPSTORE mode mod0 of LReg 0..11 into the case's scratch unit (16-bit modes: its high or low halves)."""
    wide = mod0 in (3, 4, 7, 9, 12) or (mod0 == 0 and cfg == "fp32")

    def g(r: random.Random) -> Case:
        pro, depth = predication(r)
        c = Case(f"SFPSTORE/mod0={mod0}" + (f"@{cfg}" if mod0 == 0 else ""), [], pro, depth, scratch=1)
        lo = r.random() < 0.5
        _addressed(r, c, "SFPSTORE", r.randrange(12), mod0,
                   lambda units: (2 * units[9]) if wide else _addr16(units[9], lo))
        return c
    return g


def _config(dest: int, mod1: int):
    """SFPCONFIG: program LReg[11..14] (from a uniform L0, or the mod1 default for 11) or LaneConfig, observe it, and
    restore the reset state afterwards."""
    defaults = {11: 0xBF800000, 12: 0x3B000000, 13: 0xBF2CC4C7, 14: 0xBEB08FF9}

    def ld_l0(v: int) -> list[int]:
        return [E("SFPLOADI", lreg_ind=0, instr_mod0=8, imm16=v >> 16), E("SFPLOADI", lreg_ind=0, instr_mod0=10,
                                                                          imm16=v & 0xFFFF)]

    def g(r: random.Random) -> Case:
        key = f"SFPCONFIG/dest={dest},mod1={mod1}"
        if dest == 15:
            val = r.choice([0, 4, 0x100, 0x104])
            pro = ld_l0(val) if mod1 == 0 else []
            pro.append(E("SFPCONFIG", config_dest=15, instr_mod1=mod1, imm16_math=val if mod1 else 0))
            # observe with SFPSWAPs (the only instruction ttsim lets LaneConfig change); Dst index mode needs < 4
            body = []
            for _ in range(r.randrange(1, 4)):
                hi = 4 if val & 4 else 12
                body.append(E("SFPSWAP", instr_mod1=r.choice([0, 1, 2, 3, 9]), lreg_dest=r.randrange(hi),
                              lreg_src_c=r.randrange(4 if val & 4 else 16)))
            return Case(key, body, pro, 0, post=[E("SFPCONFIG", config_dest=15, instr_mod1=1, imm16_math=0)],
                        counts=(f"SFPSWAP/lanecfg={val:#x}",))
        val = int(operands(np.random.default_rng(r.getrandbits(32)), 1)[0])
        pro = (ld_l0(val) if mod1 == 0 else []) + [E("SFPCONFIG", config_dest=dest, instr_mod1=mod1)]
        body = [E("SFPMOV", lreg_dest=r.randrange(1, 8), lreg_c=dest, instr_mod1=0),
                E("SFPMAD", lreg_src_a=dest, lreg_src_b=r.randrange(8), lreg_src_c=r.randrange(16),
                  lreg_dest=r.randrange(1, 8), instr_mod1=0)]
        return Case(key, body, pro, 0, post=ld_l0(defaults[dest]) + [E("SFPCONFIG", config_dest=dest, instr_mod1=0)])
    return g


def _flag_sequence(r: random.Random) -> Case:
    """A random legal sequence of SFPENCC / SFPSETCC / SFPPUSHC / SFPPOPC / SFPCOMPC mixed with predicated data ops
    (SFPIADD, SFPMOV, SFPLOADI), tracking what ttsim requires (UseLaneFlags on for SETCC/COMPC, stack bounds)."""
    words, depth, use, stack_use = [], 0, False, []
    for _ in range(r.randrange(2, 9)):
        ops = ["ENCC"]
        if use:
            ops += ["SETCC", "SETCC"]
            if not stack_use or stack_use[-1]:
                ops.append("COMPC")
        if depth < 8:
            ops.append("PUSHC")
        if depth:
            ops.append("POPC")
        ops += ["DATA", "DATA"]
        op = r.choice(ops)
        if op == "ENCC":
            if r.random() < 0.25:
                words.append(E("SFPENCC", instr_mod1=0))
            else:
                imm = r.choice([1, 3, 3, 3, 0, 2])
                words.append(E("SFPENCC", instr_mod1=10, imm12_math=imm))
                use = bool(imm & 1)
        elif op == "SETCC":
            words.append(E("SFPSETCC", instr_mod1=r.choice([0, 2, 4, 6]), lreg_c=r.randrange(16)))
        elif op == "COMPC":
            words.append(E("SFPCOMPC"))
        elif op == "PUSHC":
            words.append(E("SFPPUSHC"))
            stack_use.append(use)
            depth += 1
        elif op == "POPC":
            words.append(E("SFPPOPC"))
            use = stack_use.pop()
            depth -= 1
        else:
            d = r.random()
            if d < 0.5:
                words.append(E("SFPIADD", lreg_dest=r.randrange(8), lreg_c=r.randrange(16), instr_mod1=r.choice(
                    [0, 2, 4, 6, 8, 10, 1, 5, 9]), imm12_math=0))
                if (isa.decode(words[-1])[1]["instr_mod1"]) & 1:
                    words[-1] |= r.getrandbits(12) << 12
            elif d < 0.8:
                words.append(E("SFPMOV", lreg_dest=r.randrange(8), lreg_c=r.randrange(16), instr_mod1=r.choice([0, 1])))
            else:
                words.append(E("SFPLOADI", lreg_ind=r.randrange(8), instr_mod0=2, imm16=r.getrandbits(16)))
    counts = set()
    for w in words:
        n, f = isa.decode(w)
        if n in ("SFPENCC", "SFPSETCC", "SFPPUSHC", "SFPPOPC", "SFPCOMPC"):
            counts.add(f"{n}/mod1={f.get('instr_mod1', 0)}" + (f",imm={f['imm12_math']}" if n == "SFPENCC" else ""))
    return Case("flagseq", words, [], depth, counts=tuple(sorted(counts)))


def _f32(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, dtype=np.float32).view(np.uint32)


def _rand_float(rng: np.random.Generator, n: int, elo: int, ehi: int) -> np.ndarray:
    """Random normal FP32 bit patterns with unbiased exponents in [elo, ehi] and random signs."""
    e = rng.integers(elo, ehi + 1, n) + 127
    return ((rng.integers(0, 2, n) << 31) | (np.clip(e, 1, 254) << 23) | rng.integers(0, 1 << 23, n)).astype(np.uint32)


def mad_fill(neg_prod: bool, neg_c: bool):
    """Operands for L0 * L1 + L2 near the FMA's hard spots: exact / near cancellation (c = -fl(a*b) +- a few ulps),
    products at the denormal and overflow boundaries, c far below the product (sticky bits), c a tie away."""
    def fill(rng: np.random.Generator, v: np.ndarray) -> np.ndarray:
        kind = rng.integers(0, 5, 32)
        a = _rand_float(rng, 32, -20, 20)
        b = _rand_float(rng, 32, -20, 20)
        lo = rng.integers(-75, -55, 32)                    # a*b exponent ~ -126 +- a few
        a = np.where(kind == 1, _rand_float(rng, 32, -63, -63) & 0x807FFFFF | ((lo + 127) << 23).astype(np.uint32), a)
        b = np.where(kind == 1, _rand_float(rng, 32, -63, -63), b)
        a = np.where(kind == 2, _rand_float(rng, 32, 63, 64), a)
        b = np.where(kind == 2, _rand_float(rng, 32, 63, 64), b)
        with np.errstate(all="ignore"):
            p = (a.view(np.float32).astype(np.float64) * b.view(np.float32).astype(np.float64)).astype(np.float32)
        pb = _f32(p)
        sign = np.uint32(0x80000000) if neg_prod == neg_c else np.uint32(0)   # c_eff = -p
        ulps = rng.integers(-3, 4, 32).astype(np.int64)
        cancel = ((pb.astype(np.int64) + ulps) & 0xFFFFFFFF).astype(np.uint32) ^ sign
        e_p = (pb >> 23) & 0xFF
        far = ((rng.integers(0, 2, 32) << 31) | (np.clip(e_p.astype(np.int64) - rng.integers(20, 30, 32), 1, 254) << 23)
               | rng.integers(0, 1 << 23, 32)).astype(np.uint32)
        c = np.where(kind == 0, cancel, np.where(kind == 3, far, np.where(kind == 4, cancel ^ np.uint32(0x80000000),
                                                                           v[2])))
        v[0], v[1], v[2] = a, b, c
        return v
    return fill


def _mad_hard(name: str, mod1: int):
    def g(r: random.Random) -> Case:
        pro, depth = predication(r)
        if name == "SFPADD":   # 1.0 * L1 + L2
            f = dict(lreg_src_a=10, lreg_src_b=1, lreg_src_c=2)
        else:
            f = dict(lreg_src_a=0, lreg_src_b=1, lreg_src_c=2)
        c = Case(f"{name}/mod1={mod1}/hard", [E(name, lreg_dest=r.randrange(8), instr_mod1=mod1, **f)], pro, depth)
        if name == "SFPADD":
            c.fill = _add_fill(bool(mod1 & 1), bool(mod1 & 2))
        else:
            c.fill = mad_fill(bool(mod1 & 1), bool(mod1 & 2))
        return c
    return g


def _add_fill(neg_prod: bool, neg_c: bool):
    """Operands for 1.0 * L1 + L2: L2 = -L1 +- a few ulps, or exponents 0..30 apart."""
    def fill(rng: np.random.Generator, v: np.ndarray) -> np.ndarray:
        b = _rand_float(rng, 32, -126, 127)
        sign = np.uint32(0x80000000) if neg_prod == neg_c else np.uint32(0)
        ulps = rng.integers(-3, 4, 32).astype(np.int64)
        cancel = ((b.astype(np.int64) + ulps) & 0xFFFFFFFF).astype(np.uint32) ^ sign
        eb = ((b >> 23) & 0xFF).astype(np.int64)
        near = ((rng.integers(0, 2, 32) << 31) | (np.clip(eb - rng.integers(0, 30, 32), 1, 254) << 23)
                | rng.integers(0, 1 << 23, 32)).astype(np.uint32)
        v[1], v[2] = b, np.where(rng.integers(0, 2, 32) == 0, cancel, near)
        return v
    return fill


def _roundtrip(st_mod0: int, ld_mod0: int):
    """SFPSTORE in a format mode into the scratch unit, SFPLOAD it back in a (compatible) mode into another LReg."""
    wide = st_mod0 in (3, 4, 7, 9, 12)

    def g(r: random.Random) -> Case:
        pro, depth = predication(r)
        c = Case(f"SFPSTORE+SFPLOAD/{st_mod0}->{ld_mod0}", [], pro, depth, scratch=1,
                 counts=(f"SFPSTORE/mod0={st_mod0}", f"SFPLOAD/mod0={ld_mod0}"))
        lo = r.random() < 0.5
        src, dst = r.randrange(8), r.randrange(8)

        def body(units):
            a = 2 * units[9] if wide else _addr16(units[9], lo)
            return [E("SFPSTORE", lreg_ind=src, instr_mod0=st_mod0, dest_reg_addr=a),
                    E("SFPLOAD", lreg_ind=dst, instr_mod0=ld_mod0, dest_reg_addr=a)]
        c.body_of = body
        return c
    return g


def generators() -> dict[str, tuple[str, callable]]:
    """key -> (alu cfg name, generator). Every (instruction, mode) ttsim accepts."""
    g: dict[str, tuple[str, callable]] = {}

    def add(key, fn, cfg="fp32"):
        g[key] = (cfg, fn)

    for name, mods in (("SFPMAD", range(4)), ("SFPADD", range(4)), ("SFPMUL", range(2))):
        for m in mods:
            add(f"{name}/mod1={m}", _mad(name, m))
    add("SFPADDI/mod1=0", _imm_mad("SFPADDI"))
    add("SFPMULI/mod1=0", _imm_mad("SFPMULI"))
    for m in (0, 1, 2, 4, 8, 10):
        add(f"SFPLOADI/mod0={m}", _loadi(m))
    for m in (2, 3, 4, 6, 12, 14, 15):
        add(f"SFPLOAD/mod0={m}", _load(m, "fp32"))
    for cfg in ("fp32", "bf16", "fp16"):
        add(f"SFPLOAD/mod0=0@{cfg}", _load(0, cfg), cfg)
    for m in (2, 3, 4, 6, 7, 9, 12, 14, 15):
        add(f"SFPSTORE/mod0={m}", _store(m, "fp32"))
    for cfg in ("fp32", "bf16", "fp16"):
        add(f"SFPSTORE/mod0=0@{cfg}", _store(0, cfg), cfg)
    rnd12 = lambda r: r.getrandbits(12)                                                         # noqa: E731
    for m in (0, 1):
        add(f"SFPMUL24/mod1={m}", _simple("SFPMUL24", f"SFPMUL24/mod1={m}", instr_mod1=m, lreg_src_c=9))
        add(f"SFPDIVP2/mod1={m}", _simple("SFPDIVP2", f"SFPDIVP2/mod1={m}", instr_mod1=m, imm12_math=lambda r: r.choice(
            [r.randrange(0x80), r.randrange(0xF80, 0x1000)])))   # ttsim: imm8 as a signed 8-bit value only
        add(f"SFPEXMAN/mod1={m}", _simple("SFPEXMAN", f"SFPEXMAN/mod1={m}", instr_mod1=m, imm12_math=0))
        add(f"SFPABS/mod1={m}", _simple("SFPABS", f"SFPABS/mod1={m}", instr_mod1=m, imm12_math=0))
        add(f"SFPSETMAN/mod1={m}", _simple("SFPSETMAN", f"SFPSETMAN/mod1={m}", instr_mod1=m, imm12_math=0))
        add(f"SFPSETSGN/mod1={m}", _simple("SFPSETSGN", f"SFPSETSGN/mod1={m}", instr_mod1=m,
                                           imm12_math=(lambda r: r.randrange(2)) if m else 0))
        add(f"SFPAND/mod1={m}", _simple("SFPAND", f"SFPAND/mod1={m}", instr_mod1=m,
                                        imm12_math=(lambda r: r.randrange(16)) if m else 0))
        add(f"SFPOR/mod1={m}", _simple("SFPOR", f"SFPOR/mod1={m}", instr_mod1=m,
                                       imm12_math=(lambda r: r.randrange(16)) if m else 0))
    for m in (0, 1, 2):
        add(f"SFPSETEXP/mod1={m}", _simple("SFPSETEXP", f"SFPSETEXP/mod1={m}", instr_mod1=m,
                                           imm12_math=(lambda r: r.randrange(256)) if m == 1 else 0))
    for m in (0, 1, 2, 10):
        add(f"SFPEXEXP/mod1={m}", _flagwriter("SFPEXEXP", f"SFPEXEXP/mod1={m}", instr_mod1=m, imm12_math=0))
    for m in (0, 2, 4):
        add(f"SFPLZ/mod1={m}", _flagwriter("SFPLZ", f"SFPLZ/mod1={m}", instr_mod1=m, imm12_math=0))
    for m in (0, 1, 2, 4, 5, 6, 8, 9, 10):
        add(f"SFPIADD/mod1={m}", _flagwriter("SFPIADD", f"SFPIADD/mod1={m}", instr_mod1=m,
                                             imm12_math=rnd12 if m & 1 else 0))
    for m in (0, 1, 2, 3, 5, 7):
        add(f"SFPSHFT/mod1={m}", _simple("SFPSHFT", f"SFPSHFT/mod1={m}", instr_mod1=m,
                                         imm12_math=rnd12 if m & 1 else 0))
    for m in (3, 4, 5):
        add(f"SFPSHFT2/mod1={m}", _simple("SFPSHFT2", f"SFPSHFT2/mod1={m}", instr_mod1=m,
                                          imm12_math=(lambda r: r.randrange(16)) if m == 5 else 0))
    add("SFPXOR/mod1=0", _simple("SFPXOR", "SFPXOR/mod1=0", instr_mod1=0, imm12_math=0))
    add("SFPNOT/mod1=0", _simple("SFPNOT", "SFPNOT/mod1=0", instr_mod1=0, imm12_math=0))
    for m in (0, 1, 2):
        add(f"SFPMOV/mod1={m}", _simple("SFPMOV", f"SFPMOV/mod1={m}", instr_mod1=m))
    add("SFPMOV/mod1=8", _simple("SFPMOV", "SFPMOV/mod1=8", instr_mod1=8, lreg_c=9))
    for m in (1, 8):
        add(f"SFPGT/mod1={m}", _flagwriter("SFPGT", f"SFPGT/mod1={m}", instr_mod1=m))
        add(f"SFPLE/mod1={m}", _flagwriter("SFPLE", f"SFPLE/mod1={m}", instr_mod1=m))
    for m in (0, 1, 2, 3, 9):
        add(f"SFPSWAP/mod1={m}", _simple("SFPSWAP", f"SFPSWAP/mod1={m}", instr_mod1=m,
                                         lreg_dest=lambda r: r.randrange(12)))
    add("SFPTRANSP", _simple("SFPTRANSP", "SFPTRANSP", lreg_dest=0))
    add("SFPNOP", _simple("SFPNOP", "SFPNOP"))
    for m in (0, 3):
        add(f"SFPCAST/mod1={m}", _simple("SFPCAST", f"SFPCAST/mod1={m}", instr_mod1=m))
    for m in (1, 2, 3, 6, 7):
        add(f"SFP_STOCH_RND/mod1={m}", _simple("SFP_STOCH_RND", f"SFP_STOCH_RND/mod1={m}", instr_mod1=m,
                                               lreg_src_b=0, imm8_math=0, rnd_mode=0))
    add("SFPLUT/mod0=4", _simple("SFPLUT", "SFPLUT/mod0=4", instr_mod0=4))
    add("SFPLUTFP32/mod1=2", _simple("SFPLUTFP32", "SFPLUTFP32/mod1=2", instr_mod1=2))
    add("SFPARECIP/mod1=0", _simple("SFPARECIP", "SFPARECIP/mod1=0", instr_mod1=0, imm12_math=0))
    for d in (11, 12, 13, 14):
        add(f"SFPCONFIG/dest={d},mod1=0", _config(d, 0))
    add("SFPCONFIG/dest=11,mod1=1", _config(11, 1))
    for m in (0, 1):
        add(f"SFPCONFIG/dest=15,mod1={m}", _config(15, m))
    add("flagseq", _flag_sequence)
    # chains: 2-6 bodies of the register-only generators back to back under one predication prologue (flag writes
    # of one instruction predicate the next ones)
    pool = [fn for k, (cfg, fn) in g.items() if cfg == "fp32" and not k.startswith(("SFPLOAD", "SFPSTORE",
                                                                                    "SFPCONFIG", "flagseq"))]

    def chain(r: random.Random) -> Case:
        parts = [r.choice(pool)(r) for _ in range(r.randrange(2, 7))]
        pro, depth = predication(r, need_visible=r.random() < 0.5)
        return Case("chain", [w for p in parts for w in p.body], pro, depth,
                    counts=tuple(sorted({"chain/" + p.key.split("/")[0] for p in parts})))
    add("chain", chain)
    for name, mods in (("SFPMAD", range(4)), ("SFPADD", range(4)), ("SFPMUL", range(2))):
        for m in mods:
            if name != "SFPMUL":
                add(f"{name}/mod1={m}/hard", _mad_hard(name, m))
    for m in (2, 6, 14, 15):
        add(f"SFPLOAD/mod0={m}/lo", _load(m, "fp32", lo_rows=True))
    for st, ld in ((3, 3), (3, 4), (4, 4), (12, 12), (7, 4), (9, 4), (7, 3), (2, 2), (6, 6), (14, 14), (15, 15),
                   (14, 15), (6, 2), (2, 6)):
        add(f"SFPSTORE+SFPLOAD/{st}->{ld}", _roundtrip(st, ld))
    return g


# ---------------------------------------------------------------------------------------------------------------
def _ld(k: int, unit: int) -> int:
    return E("SFPLOAD", lreg_ind=k, instr_mod0=4, dest_reg_addr=2 * unit)


def _st(k: int, unit: int) -> int:
    return E("SFPSTORE", lreg_ind=k, instr_mod0=4, dest_reg_addr=2 * unit)


def case_words(c: Case) -> list[int]:
    u = c.units
    words = [_ld(k, u[k]) for k in range(8)] + list(c.prologue)
    body = list(c.body)
    if hasattr(c, "body_of"):     # bodies that depend on the units the case was given
        body = c.body_of(u)
    words += body
    words.append(_st(10, u[8]))                            # flag unit: 1.0 where the lane is enabled
    words += [E("SFPPOPC")] * c.depth
    words.append(E("SFPENCC", instr_mod1=10, imm12_math=0))
    words += [_st(k, u[k]) for k in range(8)]
    words += list(c.post)
    return words


UNITS_PER_CASE = 9


def pack(cases: list[Case]) -> list[list[Case]]:
    """Split cases into launches; assign units (8 LReg units, 1 flag unit, scratch units) within N_UNITS."""
    launches, cur, used = [], [], 0
    for c in cases:
        need = UNITS_PER_CASE + c.scratch
        if used + need > N_UNITS:
            launches.append(cur)
            cur, used = [], 0
        c.units = list(range(used, used + need))
        used += need
        cur.append(c)
    if cur:
        launches.append(cur)
    return launches


def dst_index(unit: int) -> tuple[np.ndarray, np.ndarray]:
    """(rows, cols) of the 32 lanes of a unit in Dst32b."""
    lanes = np.arange(32)
    return 4 * (unit >> 1) + lanes // 8, 2 * (lanes % 8) + (unit & 1)


def launch_image(cases: list[Case], rng: np.random.Generator) -> tuple[np.ndarray, list[int]]:
    """The Dst32b image (512 x 16 uint32, = the L1 input of N_SLOTS fp32 tiles) and the TRISC1 word list."""
    img = operands(rng, 512 * 16).reshape(512, 16)
    words = []
    for c in cases:
        r, col = dst_index(c.units[8])
        img[r, col] = 0                                     # the flag unit starts as 0
        if c.fill is not None:                              # operands chosen for this case (e.g. cancellation)
            vals = np.stack([img[dst_index(u)] for u in c.units[:8]])
            vals = c.fill(rng, vals)
            for k in range(8):
                img[dst_index(c.units[k])] = vals[k]
        words += case_words(c)
    return img, words
