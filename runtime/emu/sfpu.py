"""The Blackhole Vector Unit (SFPU): LRegs, lane predication, flag stack, and one handler per instruction.

Every handler is named after its instruction and follows the functional model on the matching page of
tt-isa-documentation/BlackholeA0/TensixTile/TensixCoprocessor/<NAME>.md, but works on whole 32-lane numpy arrays
(`lanewise { if (LaneEnabled) ... }` becomes a computed value plus a predicated `np.copyto`). Undefined behaviour
raises EmuError in strict mode; modes that are not modelled raise EmuUnimplemented by name.

Field names are the instruction table's (templates/isa/tensix_isa.json, ttsim spelling). `execute(name, fields,
dst_base)` runs one decoded instruction; `dst_base` = DEST_TARGET_REG_CFG_MATH_Offset + RWC.Dst (the caller applies
address modifiers). `sfpu_fp32_enabled` mirrors ALU_ACC_CTRL_SFPU_Fp32_enabled and `srcb_is_fp16` mirrors "SrcB format
is FP16-like" for the MOD0_FMT_SRCB resolution of SFPLOAD/SFPSTORE.
"""
from __future__ import annotations

import numpy as np

from tt_backend.chip import isa
from tt_backend.chip.errors import EmuError, EmuUnimplemented

from .dst import Dst
from .cycles import SUB_LOAD, SUB_MAD, SUB_ROUND, SUB_SIMPLE, SUB_STORE, SUB_UNIT_NAMES, SUB_UNIT_OPS, SfpuTiming, \
    sfpu_regs, sfpu_sub_unit
from tt_backend.chip.numerics.fma import fma_bh_stacked

U32 = np.uint32
I64 = np.int64
LANES = np.arange(32)
LANE_ROW = LANES // 8                  # lane l <-> Dst row (addr & ~3) + l // 8 ...
LANE_COL = 2 * (LANES % 8)             # ... and column 2 * (l % 8) (+1 for odd columns)
ONE_F32 = 0x3F800000
SIGN = 0x80000000

# LaneConfig bits (SFPCONFIG.md)
LC_ENABLE_FP16A_INF = 1 << 0
LC_DISABLE_BACKDOOR_LOAD = 1 << 1
LC_ENABLE_DEST_INDEX = 1 << 2
LC_CAPTURE_DEFAULT_DEST_INDEX = 1 << 3
LC_BLOCK_DEST_WR_FROM_SFPU = 1 << 4
LC_BLOCK_SFPU_RD_FROM_DEST = 1 << 5
LC_DEST_RD_COL_EXCHANGE = 1 << 6
LC_DEST_WR_COL_EXCHANGE = 1 << 7
LC_EXCHANGE_SRCB_SRCC = 1 << 8
LC_ROW_MASK_SHIFT = 12

# SFPCONFIG MOD1_IMM16_IS_VALUE defaults for LReg[11..14] (SFPCONFIG.md), also used as reset values: -1.0,
# 1/65536, -0.67487759, -0.34484843. LReg[8] = 0.8373 rounded to FP32 (0x3F56594B; the value ttsim uses).
PRGM_CONST_DEFAULTS = {11: 0xBF800000, 12: 0x37800000, 13: 0xBF2CC4C7, 14: 0xBEB08FF9}
LREG8_BITS = 0x3F56594B
LREG12_RESET = 0x3B000000   # ttsim's reset value (not the SFPCONFIG default)

# Instructions whose VD lives in bits [23:20] (lreg_ind) rather than [7:4] (lreg_dest).
_VD_IN_LREG_IND = {"SFPLOAD", "SFPLOADI", "SFPSTORE", "SFPLUT"}
_NO_BACKDOOR = {"SFPCONFIG", "SFPLOADMACRO", "SFPNOP"}
# Instructions that may change LaneFlags / UseLaneFlagsForLaneEnable / LaneConfig (invalidate the enable cache).
_FLAG_WRITERS = {"SFPSETCC", "SFPENCC", "SFPPUSHC", "SFPPOPC", "SFPCOMPC", "SFPIADD", "SFPLZ", "SFPEXEXP", "SFPGT",
                 "SFPLE", "SFPCONFIG"}


def _sext(v: int, bits: int) -> int:
    return v - (1 << bits) if v & (1 << (bits - 1)) else v


def _smag_key(v: np.ndarray) -> np.ndarray:
    """Map sign-magnitude (or FP32) bit patterns to int64 keys in the total order -NaN < -Inf < ... < -0 < +0 <
    ... < +Inf < +NaN, so SignMagIsSmaller(C, D) == key(C) < key(D)."""
    v = v.astype(I64)
    return np.where(v >= SIGN, SIGN - 1 - v, v)  # -0 (0x80000000) -> -1, most negative -> -2**31


def _boolean_op(mod1: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """BooleanOp of SFPPUSHC.md / SFPPOPC.md."""
    return {1: lambda: b, 2: lambda: ~b, 3: lambda: a & b, 4: lambda: a | b, 5: lambda: a & ~b,
            6: lambda: a | ~b, 7: lambda: ~a & b, 8: lambda: ~a | b, 9: lambda: ~a & ~b, 10: lambda: ~a | ~b,
            11: lambda: a != b, 12: lambda: a == b}[mod1]()


def _bit_length32(v: np.ndarray) -> np.ndarray:
    return np.frexp(v.astype(np.float64))[1].astype(I64)


def _clz32(v: np.ndarray) -> np.ndarray:
    return 32 - _bit_length32(v)
_RECIP_LUT = bytes.fromhex(
    "7f7d7b7977757472706e6d6b696866646361605e5d5b5a585755545351504f4d4c4b4a48474645444241403f3e3d3c3b3a39383736353433"
    "3231302f2e2d2c2b2a2928282726252423232221201f1f1e1d1c1c1b1a1919181717161515141313121111100f0f0e0e0d0c0c0b0b0a0909"
    "08080707060505040403030202010100"
)
_EXP_LUT = bytes.fromhex(
    "0202020202020202020202020202020202020202020202020202020202020202020202020202020202020202020202020202020202020202"
    "0202020202020303030303030303030303030303030303030303030303030303030303030303030303030303030303030303030303030303"
    "0303030303030303030303030304040404040404040404040404040404040404040404040404040404040404040505050505050505050505"
    "0505050505050505050505050505050505050505060606060606060606060606060606060606060606060606060606060606060707070707"
    "0707070707070707070707070707070707070707070707070708080808080808080808080808080808080808090909090909090909090909"
    "0909090a0a0a0a0a0a0a0a0a0a0a0a0a0a0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0d0d0d0d0d0d0d0d0d"
    "0d0d0d0d0d0e0e0e0e0e0e0e0e0e0e0e0e0e0e0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f10101010101010101010101010101111111111111112"
    "1212121212121313131313131314141414141414151515151515151616161616161617171717171718181818181818191919191919191a1a"
    "1a1a1a1a1b1b1b1b1b1b1b1c1c1c1c1c1c1c1d1d1d1d1d1d1e1e1e1e1e1e1e1f1f1f1f1f1f20202020202021212121212121222222222222"
    "23232323232324242424242525252626262727272828282929292a2a2a2b2b2b2c2c2c2d2d2d2e2e2e2f2f2f303031313132323233333334"
    "343435353536363637373838383939393a3a3a3b3b3c3c3c3d3d3d3e3e3f3f3f404040414142424243434344444545454646474747484848"
    "49494a4a4a4b4b4c4c4c4d4d4e4e4e4f4f505050515152525353545556575858595a5b5c5d5e5e5f60616263646565666768696a6b6c6d6e"
    "6f70717172737475767778797a7b7c7d7e7f000001010202030304040505060607080809090a0a0b0b0c0c0d0d0e0f0f1010111112131314"
    "1415151617171818191a1a1b1b1c1d1d1e1f1f202021222223242425262627272829292a2b2b2c2d2d2f303233343637393a3c3d3f404243"
    "454648494b4c4e5051535556585a5b5d5f61626466686a6b6d6f71737577797b7d7f808182838485868788898b8c8d8e8f90919293959697"
    "98999b9c9d9e9fa1a2a3a5a6a7a8aaabacaeafb1b2b3b5b6b8b9bbbcbdbfc0c2c4c5c7c8cacbcdcfd0d2d3d5d7d8dadcdedfe1e3e5e6e8ea"
)


def _approx_recip(x: np.ndarray) -> np.ndarray:
    """ApproxRecip of SFPARECIP.md on sign-cleared FP32 bits (int64 in, int64 out)."""
    mid = ((253 - (x >> 23)) << 23) | (_RECIP_ARR[(x >> 16) & 0x7F] << 16)
    return np.where(x < 0x00800000, 0x7F800000, np.where(x < 0x7E800000, mid, 0))


def _approx_exp(x: np.ndarray) -> np.ndarray:
    """ApproxExp of SFPARECIP.md on sign-cleared FP32 bits (int64 in, int64 out)."""
    lo = x & 0xFFFF
    lut = _EXP_ARR[np.clip((x >> 16) - 0x3C80, 0, len(_EXP_ARR) - 1)] << 16
    return np.select([x < 0x00800000, x < 0x3C800000, x < 0x3F320000, x < 0x40000000],
                     [0x3F800000, 0x3F810000 | lo, 0x3F800000 | lut | lo, 0x40000000 | lut | lo],
                     0x40800000 | lo)


_RECIP_ARR = np.frombuffer(_RECIP_LUT, dtype=np.uint8).astype(I64)
_EXP_ARR = np.frombuffer(_EXP_LUT, dtype=np.uint8).astype(I64)


def _lut8_to_fp32(x: np.ndarray) -> np.ndarray:
    """Lut8ToFp32 of SFPLUT.md (int64 bytes in, FP32 bits out)."""
    v = ((x >> 7) << 31) | ((127 - ((x >> 4) & 7)) << 23) | ((x & 0xF) << 19)
    return np.where(x == 0xFF, 0, v)


def _lut16_to_fp32(x: np.ndarray) -> np.ndarray:
    """Lut16ToFp32 of SFPLUTFP32.md: FP16-like, exponent 31 means zero, exponent 0 is not denormal."""
    e = (x >> 10) & 0x1F
    return ((x >> 15) << 31) | (np.where(e == 0x1F, 0, 112 + e) << 23) | ((x & 0x3FF) << 13)


class SFPU:
    def __init__(self, dst: Dst, strict: bool = True) -> None:
        self.dst = dst
        self.strict = strict
        self.sfpu_fp32_enabled = False   # ALU_ACC_CTRL_SFPU_Fp32_enabled (set by the caller)
        self.srcb_is_fp16 = False        # SrcB format is FP16-like (MOD0_FMT_SRCB resolves to FP16 instead of BF16)
        self.instructions = 0
        self._handlers = {name: getattr(self, name) for name in isa.INSTRUCTIONS
                          if name.startswith("SFP") and hasattr(self, name)}
        self.reset()

    def reset(self) -> None:
        self.lreg = np.zeros((17, 32), dtype=U32)
        self.lreg[8] = LREG8_BITS
        self.lreg[10] = ONE_F32
        for i, v in PRGM_CONST_DEFAULTS.items():
            self.lreg[i] = v
        # Reset value of LReg[12]: the ISA pages give none (1/65536 above is SFPCONFIG's IMM16_IS_VALUE default);
        # ttsim resets it to 1/512 (0x3B000000), seen by tests/test_diff_sfpu_ttsim.py.
        self.lreg[12] = LREG12_RESET
        self.lreg[15] = LANES * 2
        self.lane_flags = np.zeros(32, dtype=bool)
        self.use_lane_flags = np.zeros(32, dtype=bool)
        # Flag stack: push/pop act on all lanes together, so one depth serves every lane.
        self.stack_flags = np.zeros((8, 32), dtype=bool)
        self.stack_use = np.zeros((8, 32), dtype=bool)
        self.stack_depth = 0
        self.lane_config = np.zeros(32, dtype=U32)
        self.macro_templates = np.zeros((32, 4), dtype=U32)   # LoadMacroConfig[Lane].InstructionTemplate[4]
        self.macro_sequences = np.zeros((32, 4), dtype=U32)   # LoadMacroConfig[Lane].Sequence[4]
        self.macro_misc = np.zeros(32, dtype=U32)             # LoadMacroConfig[Lane].Misc (12 bits)
        self.cycle = 0                                        # issue cycle of the latest instruction
        self._pending = []                                    # SFPLOADMACRO-scheduled instructions (_Scheduled)
        self.macro_ops = 0                                    # scheduled instructions executed
        self.timing = SfpuTiming(self.strict)                 # auto-stall / hazard bookkeeping (cycles.py)
        self._last_ran = {}                                   # sub-unit -> last cycle a scheduled instruction ran
        self._swap_cycle = -10                                # cycle of the last scheduled SFPSWAP
        self._flags_after = None                              # flags a same-cycle scheduled instruction wrote
        self.prng_state = np.zeros(32, dtype=U32)
        self._row_mask = np.zeros(32, dtype=bool)             # derived from LaneConfig.ROW_MASK
        self._col_exchange = False                            # any DEST_RD/WR_COL_EXCHANGE bit set
        self._lc_any = False                                  # any LaneConfig bit set at all
        self._en = None
        self._en_all = True

    # --- plumbing --------------------------------------------------------------------------------------------
    def execute(self, name: str, fields: dict, dst_base: int, cycle: int | None = None) -> None:
        """Execute one decoded SFPU instruction issued at `cycle` (default: the cycle after the previous one).
        SFPLOADMACRO-scheduled instructions due by then run first (SFPLOADMACRO.md); a regular instruction that
        meets a scheduled one on the same sub-unit in the same cycle is dropped (strict mode: EmuError)."""
        self.instructions += 1
        self.cycle = cycle = self.cycle + 1 if cycle is None else cycle
        if self._pending and self._macro_tick(name, cycle):
            if self._flags_after is not None:
                self.lane_flags[:], self.use_lane_flags[:] = self._flags_after
                self._flags_after, self._en = None, None
            return
        handler = self._handlers.get(name)
        if handler is None:
            raise EmuUnimplemented(f"SFPU instruction {name} is not modelled")
        if name not in _NO_BACKDOOR:
            vd = fields.get("lreg_ind" if name in _VD_IN_LREG_IND else "lreg_dest", 0)
            if vd >= 12 and self._backdoor(name, fields, vd):
                return
        handler(fields, dst_base)
        if name in _FLAG_WRITERS:
            self._en = None
        if self._flags_after is not None:   # lane flags written by a scheduled instruction of this same cycle
            if name in _FLAG_WRITERS and self.strict:
                raise EmuError(f"SFPU cycle {cycle}: {name} and an SFPLOADMACRO-scheduled instruction both write the "
                               f"lane flags in the same cycle")
            self.lane_flags[:], self.use_lane_flags[:] = self._flags_after
            self._flags_after = None
            self._en = None

    def _backdoor(self, name: str, fields: dict, vd: int) -> bool:
        """VD >= 12 with DISABLE_BACKDOOR_LOAD clear writes the instruction word to InstructionTemplate[VD - 12]
        (SFPCONFIG.md, LaneConfig). Returns True if the instruction was consumed that way."""
        disabled = (self.lane_config & LC_DISABLE_BACKDOOR_LOAD) != 0
        if disabled.all():
            return False
        if disabled.any():
            raise EmuUnimplemented(f"{name}: DISABLE_BACKDOOR_LOAD differs between lanes")
        if not self.enabled().all():
            # ttsim does not model a partially enabled backdoor write either.
            raise EmuUnimplemented(f"{name}: backdoor template load with some lanes disabled")
        self.macro_templates[:, vd - 12] = isa.encode(name, **fields)
        return True

    def enabled(self) -> np.ndarray:
        """IsLaneEnabled for all 32 lanes (VectorUnit.md). Cached: every handler that changes LaneFlags,
        UseLaneFlagsForLaneEnable or LaneConfig calls `invalidate()` (so must anyone poking that state directly)."""
        if self._en is None:
            self._en = (self.lane_flags | ~self.use_lane_flags) & ~self._row_mask
            self._en_all = bool(self._en.all())
        return self._en

    def invalidate(self) -> None:
        self._en = None

    def _write(self, vd: int, value, en: np.ndarray) -> None:
        """LReg[vd] = value on enabled lanes; only LReg 0-7 (and 16) are writable by ordinary instructions."""
        if vd < 8 or vd == 16:
            if en is self._en and self._en_all:
                self.lreg[vd] = value
            else:
                np.copyto(self.lreg[vd], value, where=en, casting="unsafe")

    def _write_indirect(self, vd: int, indirect: bool, value, en: np.ndarray) -> None:
        """The INDIRECT_VD rule of SFPMAD.md: per-lane vd = LReg[7] & 15, written only where vd < 8."""
        if not indirect or vd == 16:
            self._write(vd, value, en)
            return
        vds = self.lreg[7] & 15
        value = np.broadcast_to(np.asarray(value, dtype=U32), (32,))
        for r in np.unique(vds[en]):
            if r < 8:
                np.copyto(self.lreg[r], value, where=en & (vds == r))

    def _undefined(self, what: str) -> None:
        if self.strict:
            raise EmuError(what)

    def advance_prng(self, mask: np.ndarray) -> np.ndarray:
        """AdvancePRNG (VectorUnit.md) on the lanes in `mask`; returns the pre-advance state for every lane."""
        s = self.prng_state.copy()
        parity = ((s >> 31) ^ (s >> 21) ^ (s >> 1) ^ s) & 1      # popcount(s & 0x80200003) & 1
        nxt = ((parity ^ 1) << 31) | (s >> 1)                   # bit 31 = ~Taps, the rest shifts down
        np.copyto(self.prng_state, nxt, where=mask, casting="unsafe")
        return s

    def seed_prng(self, seed: int) -> None:
        """Effect of writing PRNG_SEED_Seed_Val (not in the ISA pages; behaviour as in ttsim): step a scalar LFSR
        32 times, then give lane 31-i the state after 2 more steps each."""
        def step(v):
            taps = bin(v & 0x80200003).count("1")
            return ((~taps << 31) | (v >> 1)) & 0xFFFFFFFF
        v = seed & 0xFFFFFFFF
        for _ in range(32):
            v = step(v)
        for i in range(32):
            v = step(step(v))
            self.prng_state[31 - i] = v

    def _set_lane_config(self, value: np.ndarray) -> None:
        self.lane_config[:] = value
        rm = (self.lane_config[LANES & 7] >> LC_ROW_MASK_SHIFT) & 0xF   # LaneConfig[Lane & 7].ROW_MASK
        self._row_mask = ((rm >> LANE_ROW) & 1).astype(bool)         # ... .Bit[Lane / 8]
        self._col_exchange = bool((self.lane_config & (LC_DEST_RD_COL_EXCHANGE | LC_DEST_WR_COL_EXCHANGE)).any())
        self._lc_any = bool(self.lane_config.any())
        self.invalidate()

    # --- Dst addressing ----------------------------------------------------------------------------------------
    def _dst_addr(self, name: str, fields: dict, dst_base: int) -> int:
        addr = (fields["dest_reg_addr"] + dst_base) & 0x3FF
        if addr & 1:
            # ttsim refuses odd addresses; the docs say bit 0 is unused.
            self._undefined(f"{name}: odd Dst address {addr}")
        return addr

    def _resolve_srcb(self, mod0: int) -> int:
        if mod0 != 0:
            return mod0
        if self.sfpu_fp32_enabled:
            return 3
        return 1 if self.srcb_is_fp16 else 2

    def _lanes_rc(self, addr: int, col_exchange_bit: int) -> tuple[np.ndarray, np.ndarray]:
        rows = (addr & ~3) + LANE_ROW
        odd = ((addr >> 1) & 1) | ((self.lane_config[LANES & 7] & col_exchange_bit) != 0)
        return rows, LANE_COL + odd

    # --- load / store / immediate ------------------------------------------------------------------------------
    def SFPLOAD(self, f: dict, dst_base: int) -> None:
        vd, mod0 = f["lreg_ind"], self._resolve_srcb(f["instr_mod0"])
        addr = self._dst_addr("SFPLOAD", f, dst_base)
        if mod0 == 10:
            raise EmuUnimplemented("SFPLOAD MOD0_FMT_INT32_ALL (stack-pointer addressing) is not modelled")
        if vd >= 8:
            return
        en = self.enabled()
        if self._lc_any:
            en = en & ((self.lane_config & LC_BLOCK_SFPU_RD_FROM_DEST) == 0)
        if mod0 in (3, 4, 12) and not self._col_exchange:
            # FP32 / INT32 / INT32_SM (deprecated, no conversion on BH): 32-bit view, raw bits. Fast path: the
            # 32 lanes are a (4 rows x 8 columns) strided slice of Dst32b.
            if addr >= 512:
                self._undefined(f"SFPLOAD: Dst32b row {addr & ~3} out of range")
            r0 = (addr & ~3) & 511
            self._write(vd, self.dst.rows32[r0:r0 + 4, (addr >> 1) & 1::2].reshape(32), en)
            if vd < 4 and self._lc_any:
                self._capture_index(vd, en, *self._lanes_rc(addr, LC_DEST_RD_COL_EXCHANGE))
            return
        rows, cols = self._lanes_rc(addr, LC_DEST_RD_COL_EXCHANGE)
        if mod0 in (3, 4, 12):
            if addr >= 512:
                self._undefined(f"SFPLOAD: Dst32b row {addr & ~3} out of range")
            datum = self.dst.rows32[rows & 511, cols]
        else:
            x = self.dst.read16(rows, cols).astype(I64)
            old = self.lreg[vd].astype(I64)
            if mod0 == 1:    # FP16: Dst holds Sign,Man10,Exp5; rebias unless exponent 0 (denormals stay denormal)
                s, man, e = x >> 15, (x >> 5) & 0x3FF, x & 0x1F
                inf = ((self.lane_config & LC_ENABLE_FP16A_INF) != 0) & (e == 0x1F) & (man == 0x3FF)
                e = np.where(inf, 255, np.where(e != 0, e + 112, 0))
                man = np.where(inf, 0, man)
                datum = (s << 31) | (e << 23) | (man << 13)
            elif mod0 == 2:  # BF16: Dst holds Sign,Man7,Exp8
                datum = ((x & 0x8000) | ((x & 0xFF) << 7) | ((x >> 8) & 0x7F)) << 16
            elif mod0 == 5:   # INT8 (sign + 8-bit magnitude)
                datum = ((x >> 15) << 31) | ((x >> 5) & 0xFF)
            elif mod0 == 13:  # INT8_COMP (deprecated): sign + 10-bit magnitude
                datum = ((x >> 15) << 31) | ((x >> 5) & 0x3FF)
            elif mod0 == 8:   # INT16 (sign-magnitude)
                datum = ((x >> 15) << 31) | (x & 0x7FFF)
            elif mod0 in (6, 9):  # UINT16, LO16
                datum = x
            elif mod0 == 7:   # HI16
                datum = x << 16
            elif mod0 == 11:  # ZERO
                datum = np.zeros(32, dtype=I64)
            elif mod0 == 14:  # LO16_ONLY: keep the high half of VD
                datum = (old & 0xFFFF0000) | x
            else:             # 15 HI16_ONLY: keep the low half of VD
                datum = (x << 16) | (old & 0xFFFF)
        self._write(vd, datum, en)
        if vd < 4 and self._lc_any:
            self._capture_index(vd, en, rows, cols)

    def _capture_index(self, vd: int, en: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> None:
        """SFPLOAD's second write under ENABLE_DEST_INDEX + CAPTURE_DEFAULT_DEST_INDEX: LReg[VD+4] = Row<<4 | Col."""
        both = LC_ENABLE_DEST_INDEX | LC_CAPTURE_DEFAULT_DEST_INDEX
        cap = en & ((self.lane_config & both) == both)
        if cap.any():
            self._write(vd + 4, (rows << 4) | cols, cap)

    def SFPSTORE(self, f: dict, dst_base: int) -> None:
        vd, mod0 = f["lreg_ind"], self._resolve_srcb(f["instr_mod0"])
        addr = self._dst_addr("SFPSTORE", f, dst_base)
        if mod0 == 10:
            raise EmuUnimplemented("SFPSTORE MOD0_FMT_INT32_ALL (stack-pointer addressing) is not modelled")
        if vd == 16 and not f.get("_macro"):
            self._undefined("SFPSTORE of LReg[16]: only readable by an SFPLOADMACRO-scheduled SFPSTORE")
            return
        en = self.enabled()
        if self._lc_any:
            en = en & ((self.lane_config & LC_BLOCK_DEST_WR_FROM_SFPU) == 0)
        if mod0 in (3, 4, 12) and not self._col_exchange:   # fast path: strided (4 x 8) slice of Dst32b
            if addr >= 512:
                self._undefined(f"SFPSTORE: Dst32b row {addr & ~3} out of range")
            r0 = (addr & ~3) & 511
            d = self.lreg[vd]
            if mod0 == 3:  # FP32: flush denormals to signed zero
                d = np.where((d & U32(0x7F800000)) == 0, d & U32(SIGN), d)
            view = self.dst.rows32[r0:r0 + 4, (addr >> 1) & 1::2]
            if en is self._en and self._en_all:
                view[...] = d.reshape(4, 8)
                self.dst.written[r0:r0 + 4] = True
            else:
                np.copyto(view, d.reshape(4, 8), where=en.reshape(4, 8))
                self.dst.written[r0:r0 + 4] |= en.reshape(4, 8).any(axis=1)
            return
        rows, cols = self._lanes_rc(addr, LC_DEST_WR_COL_EXCHANGE)
        rows, cols = rows[en], cols[en]
        d = self.lreg[vd][en].astype(I64)
        if mod0 in (3, 4, 12, 7, 9):  # Dst32b targets
            if addr >= 512:
                self._undefined(f"SFPSTORE: Dst32b row {addr & ~3} out of range")
            if mod0 == 3:    # FP32: flush denormals to signed zero
                d = np.where((d & 0x7F800000) == 0, d & SIGN, d)
            elif mod0 == 7:  # HI16: the raw word lands in (shuffled) storage; canonical = UnshuffleFP32(word)
                d = self._unshuffle_fp32(d)
            elif mod0 == 9:  # LO16: halves swapped, raw storage
                d = self._unshuffle_fp32(((d << 16) | (d >> 16)) & 0xFFFFFFFF)
            self.dst.rows32[rows & 511, cols] = d.astype(U32)
            self.dst.written[rows & 511] = True
            return
        if mod0 == 1:    # FP16: rebias, flush underflow, saturate overflow, truncate; then shuffle Sign,Man,Exp
            s, e, man = d >> 31, ((d >> 23) & 0xFF) - 112, d & 0x7FFFFF
            under, over = e <= 0, e > 31
            e = np.where(under, 0, np.where(over, 31, e))
            man = np.where(under, 0, np.where(over, 0x7FFFFF, man)) >> 13
            v = (s << 15) | (man << 5) | e
        elif mod0 == 2:  # BF16: flush denormals, truncate toward zero, then shuffle Sign,Man7,Exp8
            h = np.where((d & 0x7F800000) == 0, d & SIGN, d) >> 16
            v = (h & 0x8000) | ((h & 0x7F) << 8) | ((h >> 7) & 0xFF)
        elif mod0 in (5, 13):  # INT8 / INT8_COMP: "Integer 8" = FP16 with exponent 16, 10-bit magnitude
            v = ((d >> 31) << 15) | ((d & 0x3FF) << 5) | 16
        elif mod0 in (14, 6):  # LO16_ONLY, UINT16
            v = d & 0xFFFF
        elif mod0 == 15:  # HI16_ONLY
            v = d >> 16
        elif mod0 == 8:   # INT16
            v = ((d >> 31) << 15) | (d & 0x7FFF)
        else:             # 11 ZERO
            v = np.zeros(len(d), dtype=I64)
        self.dst.write16(rows, cols, v)

    @staticmethod
    def _unshuffle_fp32(x: np.ndarray) -> np.ndarray:
        h = x >> 16
        return (((h & 0x8000) | ((h & 0xFF) << 7) | ((h >> 8) & 0x7F)) << 16) | (x & 0xFFFF)

    def SFPLOADI(self, f: dict, dst_base: int) -> None:
        vd, mod0, imm = f["lreg_ind"], f["instr_mod0"], f["imm16"]
        if mod0 not in (0, 1, 2, 4, 8, 10):
            self._undefined(f"SFPLOADI: undefined Mod0 {mod0}")
            return
        if vd >= 8:
            return  # LReg[11..14] are only writable through SFPCONFIG
        old = self.lreg[vd]
        if mod0 == 0:
            v = imm << 16
        elif mod0 == 1:   # FP16 -> FP32 by rebiasing the exponent, no special cases
            v = ((imm >> 15) << 31) | ((((imm >> 10) & 0x1F) + 112) << 23) | ((imm & 0x3FF) << 13)
        elif mod0 == 2:
            v = imm
        elif mod0 == 4:
            v = _sext(imm, 16) & 0xFFFFFFFF
        elif mod0 == 8:
            v = (imm << 16) | (old & 0xFFFF)
        else:
            v = (old & 0xFFFF0000) | imm
        self._write(vd, v, self.enabled())

    # --- MAD sub-unit ------------------------------------------------------------------------------------------
    def _mad(self, xyz: np.ndarray, vd: int, mod1: int) -> None:
        """Shared tail of the SFPMAD family: NEGATE_VB/VC already applied by the caller; fma; INDIRECT_VD write."""
        en = self.enabled()
        if not mod1 & 8 and not self._en_all:
            # only the enabled lanes are written, and the fma is lane-wise: compute just those (the same bits; whatever
            # disabled lanes hold - often Inf/NaN/denormals under predication - cannot send it to its slow exact path)
            if vd < 8 or vd == 16:
                en = np.broadcast_to(en, xyz.shape[1:])
                if en.any():
                    self.lreg[vd][en] = fma_bh_stacked(np.ascontiguousarray(xyz[:, en]))
            return
        self._write_indirect(vd, bool(mod1 & 8), fma_bh_stacked(xyz), en)

    def SFPMAD(self, f: dict, dst_base: int) -> None:
        mod1 = f["instr_mod1"]
        if mod1 & 4:  # INDIRECT_VA: va = LReg[7] & 15 per lane
            a = self.lreg[self.lreg[7] & 15, LANES]
            xyz = np.stack([a, self.lreg[f["lreg_src_b"]], self.lreg[f["lreg_src_c"]]])
        else:
            xyz = self.lreg[[f["lreg_src_a"], f["lreg_src_b"], f["lreg_src_c"]]]
        if mod1 & 1:
            xyz[1] ^= U32(SIGN)
        if mod1 & 2:
            xyz[2] ^= U32(SIGN)
        self._mad(xyz, f["lreg_dest"], mod1)

    SFPADD = SFPMAD  # same functional model, different opcode (the assembler puts LReg10 = 1.0 in VA)
    SFPMUL = SFPMAD  # (the assembler puts LReg9 = 0 in VC)

    def SFPADDI(self, f: dict, dst_base: int) -> None:
        vd, mod1 = f["lreg_dest"], f["instr_mod1"]
        vc = f.get("_vc", vd)   # SFPLOADMACRO picks VC itself (the usual VC = VD is skipped)
        c = self.lreg[vc] ^ U32(SIGN) if mod1 & 2 else self.lreg[vc]
        xyz = np.empty((3,) + c.shape, dtype=U32)                     # (3, 32), or (3, k, 32) in execute_batch
        xyz[0], xyz[1], xyz[2] = f["imm16_math"] << 16, ONE_F32, c      # BF16ToFP32(Imm16) * 1.0 + c
        self._mad(xyz, vd, mod1)

    def SFPMULI(self, f: dict, dst_base: int) -> None:
        vd, mod1 = f["lreg_dest"], f["instr_mod1"]
        vc = f.get("_vc", vd)   # SFPLOADMACRO picks VC itself (the usual VC = VD is skipped)
        c = self.lreg[vc] ^ U32(SIGN) if mod1 & 2 else self.lreg[vc]
        xyz = np.empty((3,) + c.shape, dtype=U32)
        xyz[0], xyz[1], xyz[2] = f["imm16_math"] << 16, c, 0            # BF16ToFP32(Imm16) * c + 0.0
        self._mad(xyz, vd, mod1)

    def SFPLUT(self, f: dict, dst_base: int) -> None:
        vd, mod0 = f["lreg_ind"], f["instr_mod0"]
        l3 = self.lreg[3]
        b = l3 & U32(0x7FFFFFFF)
        bf = b.view(np.float32)
        i = np.where(bf < 1.0, 0, np.where(bf < 2.0, 1, 2))
        coeffs = self.lreg[i, LANES].astype(I64)
        xyz = np.stack([_lut8_to_fp32((coeffs >> 8) & 0xFF), b.astype(I64), _lut8_to_fp32(coeffs & 0xFF)])
        d = fma_bh_stacked(xyz.astype(U32))
        if mod0 & 4:  # SGN_RETAIN: copysign from LReg[3]
            d = (d & U32(0x7FFFFFFF)) | (l3 & U32(SIGN))
        self._write_indirect(vd, bool(mod0 & 8), d, self.enabled())

    def SFPLUTFP32(self, f: dict, dst_base: int) -> None:
        vd, mod1 = f["lreg_dest"], f["instr_mod1"]
        l3 = self.lreg[3]
        b = l3 & U32(0x7FFFFFFF)
        bf = b.view(np.float32)
        i = np.where(bf < 1.0, 0, np.where(bf < 2.0, 1, 2))
        if mod1 & 2:
            if (mod1 & 10) == 10:   # FP16_3ENTRY_TABLE (overlaps INDIRECT_VD: that bit is then also honoured)
                li = self.lreg[i, LANES].astype(I64)
                a, c = _lut16_to_fp32((li >> 16) & 0xFFFF), _lut16_to_fp32(li & 0xFFFF)
            else:
                cut = 4.0 if (mod1 & 3) == 3 else 3.0
                j = np.where((bf < 0.5) | ((bf >= 1.0) & (bf < 1.5)) | ((bf >= 2.0) & (bf < cut)), 0, 16)
                a = _lut16_to_fp32((self.lreg[i, LANES].astype(I64) >> j) & 0xFFFF)
                c = _lut16_to_fp32((self.lreg[4 + i, LANES].astype(I64) >> j) & 0xFFFF)
        else:
            a, c = self.lreg[i, LANES].astype(I64), self.lreg[4 + i, LANES].astype(I64)
        d = fma_bh_stacked(np.stack([a, b.astype(I64), c]).astype(U32))
        if mod1 & 4:  # SGN_RETAIN
            d = (d & U32(0x7FFFFFFF)) | (l3 & U32(SIGN))
        self._write_indirect(vd, bool(mod1 & 8), d, self.enabled())

    def SFPMUL24(self, f: dict, dst_base: int) -> None:
        mod1 = f["instr_mod1"]
        va = (self.lreg[7] & 15) if mod1 & 4 else f["lreg_src_a"]
        a = self.lreg[va, LANES].astype(I64) if mod1 & 4 else self.lreg[va].astype(I64)
        b = self.lreg[f["lreg_src_b"]].astype(I64)
        if mod1 & 1:  # UPPER: high 23 bits of the 46-bit product of the low 23 bits
            p = ((a & 0x7FFFFF) * (b & 0x7FFFFF)) >> 23
        else:         # low 23 bits of the (wrapping) 32-bit product
            p = (a * b) & 0x7FFFFF
        z = self.lreg[f["lreg_src_c"]].astype(I64)
        # Mul24ShiftAdd: the FMA datapath aligns p (at exponent 129) with z, adds, keeps 23 bits.
        z_e = (z >> 23) & 0xFF
        r_e = np.maximum(129, z_e)
        s = (r_e - z_e) & 31
        z_grs = ((1 << 23) + (z & 0x7FFFFF)) << 3
        p2 = p >> ((r_e - 129) & 31)
        zm = z_grs >> s
        carry = ((((zm << s) ^ z_grs) > 0xFFFF).astype(I64)) << 16
        summed = (p2 + zm + carry) & 0x7FFFFF
        d = np.where(z_e == 0, p, np.where(zm != 0, summed, p2))
        self._write_indirect(f["lreg_dest"], bool(mod1 & 8), d.astype(U32), self.enabled())

    # --- moves, integer and bit ops ----------------------------------------------------------------------------
    def SFPMOV(self, f: dict, dst_base: int) -> None:
        vc, vd, mod1 = f["lreg_c"], f["lreg_dest"], f["instr_mod1"]
        en = np.ones(32, dtype=bool) if mod1 == 2 else self.enabled()   # ALL_LANES_ENABLED only as exactly 2
        if mod1 & 8:  # FROM_SPECIAL: same numbering as SFPCONFIG's VD
            if vc < 4:
                x = self.macro_templates[:, vc]
            elif vc < 8:
                x = self.macro_sequences[:, vc - 4]
            elif vc == 8:
                x = self.macro_misc
            elif vc == 9:
                x = self.advance_prng(en)
            elif vc == 15:
                x = self.lane_config
            else:
                x = np.zeros(32, dtype=U32)
        else:
            x = self.lreg[vc] ^ U32(SIGN) if mod1 & 1 else self.lreg[vc]
        self._write(vd, x, en)

    def SFPIADD(self, f: dict, dst_base: int) -> None:
        vc, vd, mod1 = f["lreg_c"], f["lreg_dest"], f["instr_mod1"]
        if not (vd < 8 or vd == 16):
            return
        en = self.enabled()
        c = self.lreg[vc].astype(I64)
        if mod1 & 1:
            r = c + _sext(f["imm12_math"], 12)
        elif mod1 & 2:
            r = c - self.lreg[vd].astype(I64)
        else:
            r = c + self.lreg[vd].astype(I64)
        r = (r & 0xFFFFFFFF).astype(U32)
        self._write(vd, r, en)
        if vd < 8:
            flags = self.lane_flags if mod1 & 4 else (r >> 31).astype(bool)
            if mod1 & 8:
                flags = ~flags
            np.copyto(self.lane_flags, flags, where=en)

    def SFPSHFT(self, f: dict, dst_base: int) -> None:
        vc, vd, mod1 = f["lreg_c"], f["lreg_dest"], f["instr_mod1"]
        x = self.lreg[vd].astype(I64)
        amt = self.lreg[vc].view(np.int32).astype(I64)
        if mod1 & 1:
            if mod1 & 4:
                x = self.lreg[vc].astype(I64)
            amt = np.full(32, _sext(f["imm12_math"], 12), dtype=I64)
        left = (x << (amt & 31)) & 0xFFFFFFFF
        rs = (-amt) & 31
        if mod1 & 2:
            right = ((x - ((x >> 31) << 32)) >> rs) & 0xFFFFFFFF   # arithmetic: shift the signed value
        else:
            right = x >> rs
        self._write(vd, np.where(amt >= 0, left, right), self.enabled())

    def SFPSHFT2(self, f: dict, dst_base: int) -> None:
        vc, vd, mod1 = f["lreg_src_c"], f["lreg_dest"], f["instr_mod1"]
        imm12 = _sext(f["imm12_math"], 12)
        en = self.enabled()
        L = self.lreg
        if mod1 in (0, 1, 2):
            v0, vcv = L[0].copy(), L[vc].copy()
            for i in range(3):
                np.copyto(L[i], L[i + 1], where=en)
            if mod1 == 0:
                new3 = np.zeros(32, dtype=U32)
            elif mod1 == 1:   # SUBVEC_CHAINED_COPY4: original L0 shifted by 8 lanes
                new3 = np.concatenate([v0[8:], np.zeros(8, dtype=U32)])
            else:             # SUBVEC_SHFLROR1_AND_COPY4: rotate each 8-lane group of VC right by one
                new3 = np.roll(vcv.reshape(4, 8), 1, axis=1).ravel()
            np.copyto(L[3], new3, where=en)
        elif mod1 == 3:
            self._write(vd, np.roll(L[vc].reshape(4, 8), 1, axis=1).ravel(), en)
        elif mod1 == 4:       # SUBVEC_SHFLSHR1: shift right by one lane within each group, zero fill
            v = L[vc].reshape(4, 8)
            self._write(vd, np.concatenate([np.zeros((4, 1), dtype=U32), v[:, :7]], axis=1).ravel(), en)
        elif mod1 in (5, 6):
            if mod1 == 5:
                vb, amt = imm12 & 15, L[vc].view(np.int32).astype(I64)
            else:
                vb, amt = imm12 & 15, np.full(32, imm12, dtype=I64)
            x = L[vb].astype(I64)
            r = np.where(amt >= 0, (x << (amt & 31)) & 0xFFFFFFFF, x >> ((-amt) & 31))
            self._write(vd, r, en)
        else:
            self._undefined(f"SFPSHFT2: undefined Mod1 {mod1}")

    def SFPAND(self, f: dict, dst_base: int) -> None:
        vd = f["lreg_dest"]
        vb = f["imm12_math"] & 15 if f["instr_mod1"] & 1 else vd     # BH USE_VB
        self._write(vd, self.lreg[vb] & self.lreg[f["lreg_c"]], self.enabled())

    def SFPOR(self, f: dict, dst_base: int) -> None:
        vd = f["lreg_dest"]
        vb = f["imm12_math"] & 15 if f["instr_mod1"] & 1 else vd
        self._write(vd, self.lreg[vb] | self.lreg[f["lreg_c"]], self.enabled())

    def SFPXOR(self, f: dict, dst_base: int) -> None:
        vd = f["lreg_dest"]
        self._write(vd, self.lreg[vd] ^ self.lreg[f["lreg_c"]], self.enabled())

    def SFPNOT(self, f: dict, dst_base: int) -> None:
        self._write(f["lreg_dest"], ~self.lreg[f["lreg_c"]], self.enabled())

    def SFPABS(self, f: dict, dst_base: int) -> None:
        x = self.lreg[f["lreg_c"]]
        if f["instr_mod1"] & 1:   # FLOAT: clear the sign unless the value is -NaN
            r = np.where(x > U32(0xFF800000), x, x & U32(0x7FFFFFFF))
        else:                     # two's complement abs; -2**31 stays
            r = np.where(x >= U32(SIGN), (-x.astype(I64)) & 0xFFFFFFFF, x)
        self._write(f["lreg_dest"], r, self.enabled())

    def SFPLZ(self, f: dict, dst_base: int) -> None:
        vd, mod1 = f["lreg_dest"], f["instr_mod1"]
        if not (vd < 8 or vd == 16):
            return
        # copy: with VD == VC the flag test below must still see the input (SFPLZ.md reads c before writing VD;
        # found by tests/test_diff_sfpu_ttsim.py)
        c = self.lreg[f["lreg_c"]].copy()
        if mod1 & 4:
            c = c & U32(0x7FFFFFFF)
        en = self.enabled()
        self._write(vd, _clz32(c), en)
        if vd < 8:
            flags = (c != 0) if mod1 & 2 else self.lane_flags
            if mod1 & 8:
                flags = ~flags
            np.copyto(self.lane_flags, flags, where=en)

    # --- FP32 field manipulation -------------------------------------------------------------------------------
    def SFPEXEXP(self, f: dict, dst_base: int) -> None:
        vd, mod1 = f["lreg_dest"], f["instr_mod1"]
        if not (vd < 8 or vd == 16):
            return
        e = ((self.lreg[f["lreg_c"]] >> 23) & 0xFF).astype(I64) - (0 if mod1 & 1 else 127)
        en = self.enabled()
        self._write(vd, e & 0xFFFFFFFF, en)
        if vd < 8:
            flags = (e < 0) if mod1 & 2 else self.lane_flags
            if mod1 & 8:
                flags = ~flags
            np.copyto(self.lane_flags, flags, where=en)

    def SFPEXMAN(self, f: dict, dst_base: int) -> None:
        hidden = 0 if f["instr_mod1"] & 1 else 1 << 23
        self._write(f["lreg_dest"], (self.lreg[f["lreg_c"]] & U32(0x7FFFFF)) + U32(hidden), self.enabled())

    def SFPSETEXP(self, f: dict, dst_base: int) -> None:
        vd, mod1 = f["lreg_dest"], f["instr_mod1"]
        c = self.lreg[f["lreg_c"]]
        if mod1 & 1:
            e = U32(f["imm12_math"] & 0xFF)
        elif mod1 & 2:
            e = (self.lreg[vd] >> 23) & U32(0xFF)
        else:
            e = self.lreg[vd] & U32(0xFF)
        self._write(vd, (c & U32(0x807FFFFF)) | (e << U32(23)), self.enabled())

    def SFPSETMAN(self, f: dict, dst_base: int) -> None:
        vd = f["lreg_dest"]
        c = self.lreg[f["lreg_c"]]
        man = U32((f["imm12_math"] & 0xFFF) << 11) if f["instr_mod1"] & 1 else self.lreg[vd] & U32(0x7FFFFF)
        self._write(vd, (c & U32(0xFF800000)) | man, self.enabled())

    def SFPSETSGN(self, f: dict, dst_base: int) -> None:
        vd = f["lreg_dest"]
        c = self.lreg[f["lreg_c"]]
        sign = U32((f["imm12_math"] & 1) << 31) if f["instr_mod1"] & 1 else self.lreg[vd] & U32(SIGN)
        self._write(vd, (c & U32(0x7FFFFFFF)) | sign, self.enabled())

    def SFPDIVP2(self, f: dict, dst_base: int) -> None:
        c = self.lreg[f["lreg_c"]]
        imm8 = f["imm12_math"] & 0xFF
        e = (c >> 23) & U32(0xFF)
        if f["instr_mod1"] & 1:   # ADD: wrapping 8-bit exponent add, Inf/NaN unchanged
            e = np.where(e == 255, e, (e + U32(imm8)) & U32(0xFF))
        else:
            e = np.full(32, imm8, dtype=U32)
        self._write(f["lreg_dest"], (c & U32(0x807FFFFF)) | (e << U32(23)), self.enabled())

    # --- predication ---------------------------------------------------------------------------------------------
    def SFPSETCC(self, f: dict, dst_base: int) -> None:
        mod1 = f["instr_mod1"]
        if mod1 & 8:
            flags = np.zeros(32, dtype=bool)
        elif mod1 & 1:
            flags = np.full(32, (f["imm12_math"] & 1) != 0)
        else:
            c = self.lreg[f["lreg_c"]].view(np.int32)   # integer test: -0.0 counts as negative
            flags = {0: c < 0, 2: c != 0, 4: c >= 0, 6: c == 0}[mod1]
        flags = flags & self.use_lane_flags              # !UseLaneFlagsForLaneEnable -> false
        np.copyto(self.lane_flags, flags, where=self.enabled())

    def SFPENCC(self, f: dict, dst_base: int) -> None:
        mod1, imm2 = f["instr_mod1"], f["imm12_math"] & 3
        # Executes on every lane regardless of LaneEnabled.
        if mod1 & 2:
            self.use_lane_flags[:] = (imm2 & 1) != 0
        elif mod1 & 1:
            self.use_lane_flags[:] = ~self.use_lane_flags
        self.lane_flags[:] = (imm2 & 2) != 0 if mod1 & 8 else True

    def SFPPUSHC(self, f: dict, dst_base: int) -> None:
        mod1 = f["instr_mod1"]
        if mod1 == 0:
            if self.stack_depth >= 8:
                self._undefined("SFPPUSHC: flag stack overflow (9th push)")
                return
            self.stack_flags[self.stack_depth] = self.lane_flags
            self.stack_use[self.stack_depth] = self.use_lane_flags
            self.stack_depth += 1
            return
        if self.stack_depth == 0:
            self._undefined(f"SFPPUSHC Mod1={mod1} with an empty flag stack")
            return
        t = self.stack_depth - 1
        if mod1 <= 12:
            self.stack_use[t] = self.use_lane_flags
            self.stack_flags[t] = _boolean_op(mod1, self.stack_flags[t], self.lane_flags)
        elif mod1 == 13:
            self.lane_flags[:] = ~self.lane_flags
            self.stack_use[t] = self.use_lane_flags
            self.stack_flags[t] = self.lane_flags
        else:  # 14: {true, true}; 15: {false, true}
            self.stack_use[t] = True
            self.stack_flags[t] = mod1 == 14

    def _top(self, empty_flags: bool, empty_use: bool) -> tuple[np.ndarray, np.ndarray]:
        if self.stack_depth == 0:
            return np.full(32, empty_flags), np.full(32, empty_use)
        t = self.stack_depth - 1
        return self.stack_flags[t].copy(), self.stack_use[t].copy()

    def SFPPOPC(self, f: dict, dst_base: int) -> None:
        mod1 = f["instr_mod1"]
        top_flags, top_use = self._top(False, False)
        if mod1 == 0:
            if self.stack_depth == 0:
                self._undefined("SFPPOPC: pop from an empty flag stack")
            else:
                self.stack_depth -= 1
            self.use_lane_flags[:] = top_use
            self.lane_flags[:] = top_flags
        elif mod1 <= 12:
            self.use_lane_flags[:] = top_use
            self.lane_flags[:] = _boolean_op(mod1, self.lane_flags, top_flags)
        elif mod1 == 13:
            self.lane_flags[:] = ~self.lane_flags
        else:
            self.use_lane_flags[:] = True
            self.lane_flags[:] = mod1 == 14

    def SFPCOMPC(self, f: dict, dst_base: int) -> None:
        top_flags, top_use = self._top(True, True)
        self.lane_flags[:] = top_use & self.use_lane_flags & top_flags & ~self.lane_flags

    def _compare(self, f: dict, result: np.ndarray) -> None:
        """Shared tail of SFPGT / SFPLE (their pages differ only in the comparison)."""
        vd, mod1 = f["lreg_dest"], f["instr_mod1"]
        en = self.enabled()
        if mod1 & 8:   # SET_VD: -1 / 0
            self._write(vd, np.where(result, U32(0xFFFFFFFF), U32(0)), en)
        if mod1 & 1:   # SET_CC
            np.copyto(self.lane_flags, result, where=en)
        if mod1 & 2 and self.stack_depth:   # MUTATE_STACK: ignores lane enables
            t = self.stack_depth - 1
            if mod1 & 4:
                self.stack_flags[t] |= result
            else:
                self.stack_flags[t] &= result

    def SFPGT(self, f: dict, dst_base: int) -> None:
        # VD > VC  <=>  SignMagIsSmaller(VC, VD)
        self._compare(f, _smag_key(self.lreg[f["lreg_c"]]) < _smag_key(self.lreg[f["lreg_dest"]]))

    def SFPLE(self, f: dict, dst_base: int) -> None:
        self._compare(f, ~(_smag_key(self.lreg[f["lreg_c"]]) < _smag_key(self.lreg[f["lreg_dest"]])))

    # --- conversions -----------------------------------------------------------------------------------------------
    def SFPCAST(self, f: dict, dst_base: int) -> None:
        vc, vd, mode = f["lreg_src_c"], f["lreg_dest"], f["instr_mod1"] & 3
        c = self.lreg[vc].astype(I64)
        en = self.enabled()
        if mode in (0, 1):   # sign-magnitude int32 -> FP32 (SFPCAST_IntFloat.md)
            sign, mag = c & SIGN, c & 0x7FFFFFFF
            lz = np.where(mag != 0, _clz32(mag), 157)
            norm = (mag << (lz & 31)) & 0xFFFFFFFF
            d = sign + ((157 - lz) << 23) + (norm >> 8)
            if mode == 1:    # stochastic: 7 PRNG bits
                prng = self.advance_prng(en).astype(I64)
                d = d + ((norm & 0xFE) > ((prng >> 9) & 0xFE))
            else:            # round to nearest, ties to even
                d = d + (((norm & 0x80) != 0) & ((norm & 0x17F) != 0))
        elif mode == 2:      # INT32_ABS
            d = np.where(c >= SIGN, -c, c)
        else:                # two's complement <-> sign-magnitude (the same formula both ways)
            sign = c & SIGN
            d = sign | np.where(sign != 0, -c, c)
        self._write(vd, d & 0xFFFFFFFF, en)

    def SFP_STOCH_RND(self, f: dict, dst_base: int) -> None:
        vd, vc, rnd = f["lreg_dest"], f["lreg_src_c"], f["rnd_mode"]
        mod1, use_imm5 = f["instr_mod1"] & 7, f["instr_mod1"] >> 3
        if rnd == 3:
            self._undefined("SFP_STOCH_RND: undefined RoundingMode 3")
        en = self.enabled()
        prng = (self.advance_prng(en) & U32(0x7FFFFF)).astype(I64)   # always advanced, even when not used
        if rnd == 0:
            prng[:] = 0x400000
        elif rnd == 2:
            prng[:] = 0x7FFFFF
        c = self.lreg[vc].astype(I64)
        if mod1 in (0, 1):   # FP32 -> FP16A / FP16B precision (SFPSTOCHRND_FloatFloat.md)
            e = (c >> 23) & 0xFF
            keep_lo = 0x1FFF if mod1 == 0 else 0xFFFF
            shift = 10 if mod1 == 0 else 7
            disc = c & keep_lo
            r = (c - disc) + np.where(disc >= (prng >> shift), keep_lo + 1, 0)
            d = np.where(e == 0, 0, np.where(e == 255, c & 0xFF800000, r))
        elif mod1 in (2, 3, 6, 7):   # FP32 -> (u)int8/16 sign-magnitude (SFPSTOCHRND_FloatInt.md)
            keep_sign = mod1 in (3, 7)
            max_mag = {2: 255, 3: 127, 6: 65535, 7: 32767}[mod1]
            sign = c & SIGN if keep_sign else np.zeros(32, dtype=I64)
            e = ((c >> 23) & 0xFF) - 127
            m = 0x800000 | (c & 0x7FFFFF)
            m = np.where(e >= 0, m << np.clip(e, 0, 15), m >> np.clip(-e, 0, 1))
            mag = np.minimum((m >> 23) + ((m & 0x7FFFFF) >= prng), max_mag)
            mag = np.where(e < -1, 0, np.where(e >= 16, max_mag, mag))
            sign = np.where(mag == 0, 0, sign)
            d = sign + mag
        elif mod1 in (4, 5):         # sign-magnitude int32 -> (u)int8 (SFPSTOCHRND_IntInt.md)
            amt = f["imm8_math"] & 31 if use_imm5 else (self.lreg[f["lreg_src_b"]] & U32(31)).astype(I64)
            sign, mag = c & SIGN, (c & 0x7FFFFFFF) << 23
            mag = mag >> amt
            mag = (mag >> 23) + ((mag & 0x7FFFFF) >= prng)
            if mod1 == 4:
                mag, sign = np.minimum(mag, 255), 0
            else:
                mag = np.minimum(mag, 127)
                sign = np.where(mag == 0, 0, sign)
            d = sign + mag
        else:
            self._undefined(f"SFP_STOCH_RND: undefined Mod1 {mod1}")
            return
        self._write(vd, d, en)

    def SFPARECIP(self, f: dict, dst_base: int) -> None:
        vd, mod1 = f["lreg_dest"], f["instr_mod1"]
        x = self.lreg[f["lreg_c"]].astype(I64)
        sign = x & SIGN
        mag = x - sign
        en = self.enabled()
        if mod1 == 0:        # RECIP: sign | ApproxRecip(|x|)
            d = sign + _approx_recip(mag)
        elif mod1 == 1:      # COND_RECIP: where VB < 0, ApproxRecip(|x|) without the sign; else VC unchanged
            vb = f["imm12_math"] & 15
            d = np.where(self.lreg[vb].view(np.int32) < 0, _approx_recip(mag), x)
        else:                # EXP (and the default case)
            d = sign + _approx_exp(mag)
        self._write(vd, d, en)

    # --- lane movement -----------------------------------------------------------------------------------------------
    def SFPSWAP(self, f: dict, dst_base: int) -> None:
        vc, vd, mod1 = f["lreg_src_c"], f["lreg_dest"], f["instr_mod1"]
        en = self.enabled()
        cv, dv = self.lreg[vc].copy(), self.lreg[vd].copy()
        if mod1 == 0:
            swap = np.ones(32, dtype=bool)
        else:
            gets_min = {1: 0xFFFFFFFF, 2: 0x0000FFFF, 3: 0x00FF00FF, 4: 0xFF0000FF, 5: 0x000000FF,
                        6: 0x0000FF00, 7: 0x00FF0000, 8: 0xFF000000}.get(mod1, 0)
            gm = ((gets_min >> LANES) & 1).astype(bool)
            c_smaller = _smag_key(cv) < _smag_key(dv)
            swap = np.where(gm, c_smaller, ~c_smaller)
            swap ^= (self.lane_config & LC_EXCHANGE_SRCB_SRCC) != 0
        swap &= en
        idx = (self.lane_config & LC_ENABLE_DEST_INDEX) != 0
        plain = swap & ~idx
        if vc < 8:
            np.copyto(self.lreg[vc], dv, where=plain)
        if vd < 8:
            np.copyto(self.lreg[vd], cv, where=plain)
        arg = swap & idx
        if arg.any():   # argmin/argmax: values in LReg0-3 only, indices swapped in LReg[4 + (v & 3)]
            if vc < 4:
                np.copyto(self.lreg[vc], dv, where=arg)
            if vd < 4:
                np.copyto(self.lreg[vd], cv, where=arg)
            vca, vda = 4 + (vc & 3), 4 + (vd & 3)
            ca, da = self.lreg[vca].copy(), self.lreg[vda].copy()
            np.copyto(self.lreg[vca], da, where=arg)
            np.copyto(self.lreg[vda], ca, where=arg)

    def SFPTRANSP(self, f: dict, dst_base: int) -> None:
        en = self.enabled()
        for base in (0, 4):
            m = self.lreg[base:base + 4].reshape(4, 4, 8)          # [i][j][column] = LReg[base+i][8j+column]
            t = m.transpose(1, 0, 2).reshape(4, 32)                # t[i][8j+c] = LReg[base+j][8i+c]
            np.copyto(self.lreg[base:base + 4], t, where=en[None, :])

    # --- configuration and others -----------------------------------------------------------------------------------
    def SFPCONFIG(self, f: dict, dst_base: int) -> None:
        vd, mod1, imm16 = f["config_dest"], f["instr_mod1"], f["imm16_math"]
        lanes8 = LANES & 7
        sel = np.ones(32, dtype=bool)
        if mod1 & 8:   # IMM16_IS_LANE_MASK
            sel &= ((imm16 >> (lanes8 * 2)) & 1).astype(bool)
        sel &= ~self.use_lane_flags[lanes8] | self.lane_flags[lanes8]
        l0 = self.lreg[0][lanes8]            # LReg[0][Lane & 7]
        value = np.full(32, imm16, dtype=U32) if mod1 & 1 else l0
        if vd < 4:
            np.copyto(self.macro_templates[:, vd], l0, where=sel)
        elif vd < 8:
            np.copyto(self.macro_sequences[:, vd - 4], value, where=sel)
        elif vd == 8:
            np.copyto(self.macro_misc, self._bitwise(mod1, self.macro_misc, value & U32(0xFFF)), where=sel)
        elif vd in (9, 10):
            pass
        elif vd <= 14:
            v = np.full(32, PRGM_CONST_DEFAULTS[vd], dtype=U32) if mod1 & 1 else l0
            np.copyto(self.lreg[vd], v, where=sel)
        else:          # 15: LaneConfig (18 bits); with IMM16_IS_VALUE the high bits are OR-ed back
            orig = self.lane_config.copy()
            new = self._bitwise(mod1, orig, value & U32(0x3FFFF))
            if mod1 & 1:
                new |= orig & ~U32(0xFFFF)
            self._set_lane_config(np.where(sel, new, orig))

    @staticmethod
    def _bitwise(mod1: int, old: np.ndarray, value: np.ndarray) -> np.ndarray:
        op = mod1 & 6
        return value if op == 0 else old | value if op == 2 else old & value if op == 4 else old ^ value

    def SFPNOP(self, f: dict, dst_base: int) -> None:
        pass

    # --- batched row steps (Tensix._sfpu_batch) ---------------------------------------------------------------------
    @staticmethod
    def batchable(name: str, f: dict, flags: bool = False) -> bool:
        """Can this instruction run in SFPU.execute_batch: lane-wise, no PRNG / LaneConfig / macro / flag-stack state
        read or changed, no fixed (32,)-lane indexing, VD outside the backdoor range (12..15), 32-bit Dst modes only
        (checked by the caller once the format is known). Without `flags`, also no lane flag read or written; with
        it, the lane-flag instructions of _FLAG_BATCHABLE too (the caller then tracks the flag state: flag_transfer,
        batch_regs)."""
        cond = _BATCHABLE.get(name)
        ok = cond is not None and cond(f)
        if not ok and flags:
            cond = _FLAG_BATCHABLE.get(name)
            ok = cond is not None and cond(f)
        if not ok:
            return False
        vd = f.get("lreg_ind" if name in _VD_IN_LREG_IND else "lreg_dest", 0)
        # a store may read the constants 8..11; writers only to 0..7 (a write to 8..11 is dropped, which the LReg
        # dataflow analysis, using cycles.sfpu_regs, would not see)
        return vd < 12 if name == "SFPSTORE" else vd < 8

    def execute_batch(self, body: list, k: int, addrs: np.ndarray, cycle: int) -> None:
        """Run `body` (name, fields, mem) k times as k x 32 lanes, instruction by instruction: LRegs become a
        (17, k, 32) array for the duration (repetition r = row r of each register), so the ordinary handlers run
        unchanged; `mem` = (is_store, vd, resolved mod0) for SFPLOAD/SFPSTORE, whose Dst addresses per repetition
        are the columns of `addrs` (k, n_mem). If the body writes lane flags, LaneFlags / UseLaneFlagsForLaneEnable
        become (k, 32) as well and loads/stores honour the lane enables. The caller proved equivalence with k
        sequential runs (every repetition starts from the same LReg inputs and flag state)."""
        lreg, lf0, use0 = self.lreg, self.lane_flags, self.use_lane_flags
        b = np.repeat(lreg[:, None, :], k, axis=1)
        rows32, written = self.dst.rows32, self.dst.written
        flags = any(name in _FLAG_WRITERS for name, _, _ in body)
        self.lreg = b
        if flags:
            self.lane_flags = np.repeat(lf0[None, :], k, axis=0)
            self.use_lane_flags = np.repeat(use0[None, :], k, axis=0)
        self._en = None
        j = 0
        try:
            for name, fields, mem in body:
                if mem is None:
                    self._handlers[name](fields, 0)
                    if name in _FLAG_WRITERS:
                        self._en = None
                    continue
                is_store, vd, mod0 = mem
                a = addrs[:, j]
                j += 1
                r0 = (a & ~3)[:, None]
                rows = r0 + LANE_ROW
                cols = ((a >> 1) & 1)[:, None] + LANE_COL
                en = self.enabled()
                if not self._en_all:
                    en = np.broadcast_to(en, (k, 32))
                if is_store:
                    d = b[vd]
                    if mod0 == 3:  # FP32: flush denormals to signed zero
                        d = np.where((d & U32(0x7F800000)) == 0, d & U32(SIGN), d)
                    if self._en_all:
                        rows32[rows, cols] = d
                        written[r0 + np.arange(4)] = True
                    else:
                        rows32[rows, cols] = np.where(en, d, rows32[rows, cols])
                        np.logical_or.at(written, r0 + np.arange(4), en.reshape(k, 4, 8).any(axis=2))
                elif vd < 8:
                    if self._en_all:
                        b[vd] = rows32[rows, cols]
                    else:
                        np.copyto(b[vd], rows32[rows, cols], where=en)
        finally:
            self.lreg = lreg
            if flags:
                last_lf, last_use = self.lane_flags[-1], self.use_lane_flags[-1]
                self.lane_flags, self.use_lane_flags = lf0, use0
                lf0[:], use0[:] = last_lf, last_use
            self._en = None
        lreg[:] = b[:, -1]
        self.instructions += k * len(body)
        self.cycle = cycle

    @staticmethod
    def batch_regs(name: str, f: dict) -> tuple[int, int]:
        """(LRegs read, LRegs written) as bitmasks, exact enough for the loop-carried analysis of a batch: a write
        listed here really happens on every enabled lane (no over-approximated writes), reads may be
        over-approximated."""
        if name == "SFPSETCC":
            return (0 if f["instr_mod1"] & 9 else 1 << f["lreg_c"]), 0
        if name in ("SFPGT", "SFPLE"):
            vd = f["lreg_dest"]
            return (1 << f["lreg_c"]) | (1 << vd), (1 << vd if f["instr_mod1"] & 8 else 0)
        if name == "SFPENCC":
            return 0, 0
        reads, _, writes = sfpu_regs(name, f)
        if name == "SFPLOADI" and f["instr_mod0"] in (8, 10):   # keeps half of VD
            reads |= 1 << f["lreg_ind"]
        return reads, writes

    @staticmethod
    def flag_transfer(name: str, f: dict, lf, use):
        """Abstract effect of a batchable instruction on (LaneFlags, UseLaneFlagsForLaneEnable) when each is known
        to be the same on all lanes (0 / 1) or unknown (None): the new (lf, use)."""
        if name not in _FLAG_WRITERS:
            return lf, use
        mod1 = f.get("instr_mod1", 0)
        if name == "SFPENCC":
            imm2 = f["imm12_math"] & 3
            if mod1 & 2:
                use = imm2 & 1
            elif mod1 & 1:
                use = None if use is None else 1 - use
            return (int(imm2 & 2 != 0) if mod1 & 8 else 1), use
        if name == "SFPSETCC":
            if use == 0 or (use == 1 and mod1 & 8):
                return 0, use
            if use == 1 and mod1 & 1 and lf is not None:
                return lf & (f["imm12_math"] & 1), use
            return None, use
        if name == "SFPIADD":
            return (lf if mod1 & 12 == 4 else None), use
        if name in ("SFPLZ", "SFPEXEXP"):
            return (lf if not mod1 & 10 else None), use
        if name in ("SFPGT", "SFPLE"):
            return (None if mod1 & 1 else lf), use
        return None, None

    # --- SFPLOADMACRO ----------------------------------------------------------------------------------------------
    def SFPLOADMACRO(self, f: dict, dst_base: int) -> None:
        """SFPLOADMACRO.md: an SFPLOAD into LReg[VD], then up to one instruction scheduled per sub-unit (Simple, MAD,
        Round, Store) from Sequence[MacroIndex], InstructionTemplate[0-3] and Misc."""
        lreg_ind, imm10 = f["lreg_ind"], f["dest_reg_addr"]
        macro, vd, mod0 = lreg_ind >> 2, ((imm10 & 1) << 2) | (lreg_ind & 3), f["instr_mod0"]
        addr = (imm10 + dst_base) & 0x3FE          # Imm10 bit 0 is VDHi; Dst address bit 0 is unused anyway
        self.SFPLOAD({"lreg_ind": vd, "instr_mod0": mod0, "dest_reg_addr": addr}, 0)
        seq, misc, templates = self._macro_config(macro)
        if not seq:
            return
        cycle = self.cycle
        for i in range(4):
            bits = (seq >> (8 * i)) & 0xFF
            delay = (bits >> 3) & 7
            if delay != 7:   # ForgetFutureInstructionWhoseDelayIs(Delay)
                due = cycle + 1 + delay
                self._pending = [e for e in self._pending if not (e.sub == i and e.due == due)]
            sel = bits & 7
            if sel == 0:
                continue
            if sel == 1:
                self._undefined(f"SFPLOADMACRO: Sequence[{macro}] selects 1 for the {SUB_UNIT_NAMES[i]} sub-unit")
                continue
            if sel == 2:
                name, tf = "SFPNOP", {}
            elif sel == 3:
                name, tf = "SFPSTORE", {"lreg_ind": 0}
            else:
                name, tf = self._template(int(templates[sel - 4]))
            if name not in SUB_UNIT_OPS[i]:
                if i == SUB_STORE:
                    self._undefined(f"SFPLOADMACRO: {name} scheduled on the Store sub-unit")
                    continue
                name, tf = "SFPNOP", {}
            e = _Scheduled(i, name, dict(tf), delay, bool(misc >> (8 + i) & 1))
            if i != SUB_STORE:
                self._macro_operands(e, bits, vd)
            else:
                e.fields["lreg_ind"] = 16 if bits & 0x40 else tf.get("lreg_ind", 0) if bits & 0x80 else vd
                e.fields["instr_mod0"] = mod0 if misc >> (4 + macro) & 1 else misc & 15
                e.fields["dest_reg_addr"] = addr
                e.fields["sfpu_addr_mode"] = 0
                e.fields["_macro"] = True
            self._schedule(e, cycle)

    def _macro_config(self, macro: int) -> tuple[int, int, np.ndarray]:
        seq = self.macro_sequences[:, macro]
        if not (seq == seq[0]).all() or not (self.macro_misc == self.macro_misc[0]).all() or \
                not (self.macro_templates == self.macro_templates[0]).all():
            raise EmuUnimplemented("SFPLOADMACRO with LoadMacroConfig differing between lanes")
        return int(seq[0]), int(self.macro_misc[0]), self.macro_templates[0]

    def _template(self, word: int) -> tuple[str, dict]:
        d = _TEMPLATE_CACHE.get(word)
        if d is None:
            try:
                d = isa.decode(word)
            except Exception:
                d = ("?", {})
            _TEMPLATE_CACHE[word] = d
        return d

    @staticmethod
    def _macro_operands(e: "_Scheduled", bits: int, vd: int) -> None:
        """The VB / VC / VD overrides of SFPLOADMACRO.md's functional model (Simple, MAD and Round sub-units)."""
        name, f = e.name, e.fields
        if name == "SFPNOP":
            return
        vd_field = "lreg_ind" if name == "SFPLUT" else "lreg_dest"
        vc_field = "lreg_c" if "lreg_c" in f else "lreg_src_c" if "lreg_src_c" in f else None
        t_vd = f.get(vd_field, 0)
        t_vc = f[vc_field] if vc_field else None
        mod1 = f.get("instr_mod1", 0)
        if "lreg_src_b" in f:
            t_vb = f["lreg_src_b"]
        elif (name in ("SFPAND", "SFPOR") and mod1 & 1) or (name == "SFPSHFT2" and mod1 in (5, 6)) or \
                (name == "SFPARECIP" and mod1 == 1):
            t_vb = f.get("imm12_math", 0) & 15
        else:
            t_vb = None
        if bits & 0x80:
            vb, vc = vd, (t_vc if t_vc is not None else t_vd)
            if name == "SFPSHFT2" and mod1 in (5, 6):
                raise EmuUnimplemented("SFPLOADMACRO: SFPSHFT2 SHFT_LREG/SHFT_IMM template with VB := VD")
        else:
            vc, vb = vd, (t_vb if t_vb is not None else t_vd)
        e.vd = 16 if bits & 0x40 else vd
        e.vb, e.vc = vb, vc
        f[vd_field] = e.vd
        if vc_field:
            f[vc_field] = vc
        if "lreg_src_b" in f:
            f["lreg_src_b"] = vb
        if name in ("SFPADDI", "SFPMULI"):
            f["_vc"] = vc
        if name == "SFPARECIP" and mod1 == 1:
            f["imm12_math"] = (f.get("imm12_math", 0) & ~15) | vb
        # Simple-unit instructions that read "VD" as an input read VB instead (the usual VB = VD is skipped)
        e.vb_input = name in _VB_AS_VD_INPUT and not (name == "SFPIADD" and mod1 & 1) and \
            not (name in ("SFPSETEXP", "SFPSETMAN", "SFPSETSGN") and mod1 & 1) and \
            not (name == "SFPSHFT" and mod1 & 1 and mod1 & 4)
        if name in ("SFPAND", "SFPOR"):
            f["instr_mod1"] = mod1 & ~1        # VB is routed through the VD input below

    def _schedule(self, e: "_Scheduled", cycle: int) -> None:
        pend = self._pending
        was_instr = any(p.by_instr for p in pend)
        if e.delay == 0:
            e.due = cycle + 1
        elif e.by_instr or was_instr:
            e.due, e.rem = None, e.delay
        else:
            e.due = cycle + 1 + e.delay
        if e.by_instr and not was_instr:    # every outstanding counter now counts issued SFPU instructions
            for p in pend:
                if p.due is not None and p.due > cycle + 1:
                    p.rem, p.due = p.due - cycle - 1, None
        if self.strict and e.due is not None and e.name != "SFPNOP":
            for p in pend:
                if p.sub == e.sub and p.due == e.due and p.name != "SFPNOP":
                    raise EmuError(f"SFPLOADMACRO at cycle {cycle}: two scheduled instructions ({p.name}, {e.name}) "
                                   f"on the {SUB_UNIT_NAMES[e.sub]} sub-unit in cycle {e.due}")
        pend.append(e)

    def _macro_tick(self, name: str, cycle: int) -> bool:
        """Before a regular instruction issued at `cycle`: run the scheduled instructions due by then, count this
        issue for instruction-counted delays. Returns True if the regular instruction is dropped (collision)."""
        # Everything in one cycle sees the state at the start of the cycle: the scheduled instructions run first
        # (latest pipeline stage first), and the regular one then still sees the lane flags of before.
        self.drain_macros(cycle - 1)
        if any(p.due == cycle for p in self._pending):
            lf, ul = self.lane_flags.copy(), self.use_lane_flags.copy()
            self.drain_macros(cycle)
            if not (np.array_equal(lf, self.lane_flags) and np.array_equal(ul, self.use_lane_flags)):
                self._flags_after = (self.lane_flags.copy(), self.use_lane_flags.copy())
                self.lane_flags[:], self.use_lane_flags[:] = lf, ul
                self._en = None
        dropped = False
        sub = sfpu_sub_unit(name)
        if sub != SUB_LOAD and self._last_ran.get(sub) == cycle:
            if self.strict:
                raise EmuError(f"SFPU cycle {cycle}: {name} collides with an SFPLOADMACRO-scheduled instruction on "
                               f"the {SUB_UNIT_NAMES[sub]} sub-unit (the regular instruction would be dropped)")
            dropped = True
        if self._pending and any(p.by_instr for p in self._pending):
            for p in self._pending:
                if p.due is None:
                    p.rem -= 1
                    if p.rem <= 0:
                        p.due = cycle + 1
        return dropped

    def drain_macros(self, upto: int | None = None) -> None:
        """Run every scheduled instruction due by cycle `upto` (all cycle-counted ones when None: time passes)."""
        pend = self._pending
        while pend:
            if not any(p.by_instr for p in pend):      # back to counting cycles
                for p in pend:
                    if p.due is None:
                        p.due = self.cycle + 1 + p.rem
            due = [p.due for p in pend if p.due is not None]
            if not due:
                return
            c = min(due)
            if upto is not None and c > upto:
                return
            now = sorted((p for p in pend if p.due == c), key=lambda p: -p.sub)
            self._pending = pend = [p for p in pend if p.due != c]
            self._run_cycle(c, now)

    def _run_cycle(self, c: int, now: list) -> None:
        by_sub = {p.sub: p for p in now}
        simple, mad, rnd = by_sub.get(SUB_SIMPLE), by_sub.get(SUB_MAD), by_sub.get(SUB_ROUND)
        if self.strict:
            if simple and rnd and simple.name != "SFPNOP" and rnd.name != "SFPNOP" and \
                    (simple.vd == 16) == (rnd.vd == 16):
                raise EmuError(f"SFPLOADMACRO: Simple ({simple.name}) and Round ({rnd.name}) in cycle {c} need "
                               f"exactly one of them with VD == 16")
            if simple and simple.name == "SFPSWAP" and not (mad and mad.name == "SFPNOP"):
                raise EmuError(f"SFPLOADMACRO: SFPSWAP on the Simple sub-unit in cycle {c} without SFPNOP scheduled "
                               f"on the MAD sub-unit for the same cycle")
            if self._swap_cycle == c - 1:
                for p in (simple, rnd):
                    if p and p.name != "SFPNOP":
                        raise EmuError(f"SFPLOADMACRO: {p.name} on the {SUB_UNIT_NAMES[p.sub]} sub-unit in cycle {c}, "
                                       f"the cycle after a scheduled SFPSWAP (must be idle or SFPNOP)")
        for p in now:
            self._last_ran[p.sub] = c
            if p.name == "SFPSWAP":
                self._swap_cycle = c
            if p.name == "SFPNOP":
                continue
            reads, _, writes = sfpu_regs(p.name, p.fields)
            self.timing.scheduled(c, p.name, reads, writes, p.sub)
            self._exec_scheduled(p)
            self.macro_ops += 1

    def _exec_scheduled(self, p: "_Scheduled") -> None:
        handler = self._handlers[p.name]
        f = p.fields
        if p.vb_input and p.vb != p.vd:
            # The instruction reads its "VD" input from VB: run it on an extended register file whose VD row holds
            # VB's value (VC moved to a scratch row 17 when it aliases VD), then restore VD on disabled lanes.
            orig = self.lreg
            ext = np.empty((18, 32), dtype=U32)
            ext[:17] = orig
            vc_field = "lreg_c" if "lreg_c" in f else "lreg_src_c" if "lreg_src_c" in f else None
            f2 = dict(f)
            if vc_field and f[vc_field] == p.vd:
                ext[17] = orig[p.vd]
                f2[vc_field] = 17
            old_vd = orig[p.vd].copy()
            ext[p.vd] = orig[p.vb]
            self.lreg = ext
            try:
                handler(f2, 0)
            finally:
                self.lreg = orig
            en = self.enabled()
            if vc_field and f2[vc_field] == 17 and p.name == "SFPSWAP":
                ext[p.vd] = ext[17]
            orig[:] = ext[:17]
            if p.vd < 8 or p.vd == 16:
                orig[p.vd] = np.where(en, ext[p.vd], old_vd)
        else:
            handler(f, 0)
        if p.name in _FLAG_WRITERS:
            self._en = None


# SFPU.batchable: instruction -> condition on its fields under which the handler is lane-wise and leaves the lane
# flags unchanged (flag writers only in modes that copy the flags onto themselves).
_BATCHABLE = {
    "SFPLOAD": lambda f: f["instr_mod0"] != 10, "SFPSTORE": lambda f: f["instr_mod0"] != 10,
    "SFPMAD": lambda f: not f["instr_mod1"] & 12, "SFPADD": lambda f: not f["instr_mod1"] & 12,
    "SFPMUL": lambda f: not f["instr_mod1"] & 12,
    "SFPLOADI": lambda f: f["instr_mod0"] in (0, 1, 2, 4, 8, 10),
    "SFPEXMAN": lambda f: True, "SFPSETEXP": lambda f: True, "SFPSETMAN": lambda f: True,
    "SFPSETSGN": lambda f: True, "SFPAND": lambda f: True, "SFPOR": lambda f: True, "SFPXOR": lambda f: True,
    "SFPNOT": lambda f: True, "SFPABS": lambda f: True, "SFPDIVP2": lambda f: True, "SFPSHFT": lambda f: True,
    "SFPARECIP": lambda f: True, "SFPNOP": lambda f: True,
    "SFPMOV": lambda f: not f["instr_mod1"] & 8 and f["instr_mod1"] != 2,
    "SFPCAST": lambda f: f["instr_mod1"] & 3 != 1,                      # not the stochastic (PRNG) mode
    "SFPEXEXP": lambda f: not f["instr_mod1"] & 10, "SFPLZ": lambda f: not f["instr_mod1"] & 10,
    "SFPIADD": lambda f: f["instr_mod1"] & 12 == 4,
}

# Lane-flag instructions execute_batch can run when the caller tracks the flag state (not the flag stack).
_FLAG_BATCHABLE = {
    "SFPSETCC": lambda f: True, "SFPENCC": lambda f: True,
    "SFPGT": lambda f: not f["instr_mod1"] & 2, "SFPLE": lambda f: not f["instr_mod1"] & 2,   # no MUTATE_STACK
    "SFPIADD": lambda f: True, "SFPEXEXP": lambda f: True, "SFPLZ": lambda f: True,
    "SFPADDI": lambda f: not f["instr_mod1"] & 8, "SFPMULI": lambda f: not f["instr_mod1"] & 8,
}

# Simple-unit instructions whose functional model reads VD as an input (`unsigned VB = VD;`): inside an
# SFPLOADMACRO sequence that input is the macro-chosen VB.
_VB_AS_VD_INPUT = frozenset({"SFPIADD", "SFPSHFT", "SFPAND", "SFPOR", "SFPXOR", "SFPSETEXP", "SFPSETMAN", "SFPSETSGN",
                             "SFPGT", "SFPLE", "SFPSWAP"})
_TEMPLATE_CACHE: dict[int, tuple[str, dict]] = {}


class _Scheduled:
    """One instruction scheduled by SFPLOADMACRO on a sub-unit: executes at cycle `due`, or after `rem` more issued
    SFPU instructions while any outstanding one counts instructions (UnitDelayKind)."""
    __slots__ = ("sub", "name", "fields", "delay", "by_instr", "due", "rem", "vb", "vc", "vd", "vb_input")

    def __init__(self, sub, name, fields, delay, by_instr):
        self.sub, self.name, self.fields, self.delay, self.by_instr = sub, name, fields, delay, by_instr
        self.due, self.rem = None, 0
        self.vb = self.vc = self.vd = fields.get("lreg_ind", 0)
        self.vb_input = False
