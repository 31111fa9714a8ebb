"""The Vector Unit's architectural state (BH VectorUnit.md): 32 lanes x 17 LRegs, lane flags and the flag stack,
LaneConfig, LoadMacroConfig and the PRNG, with the lane-level primitives every instruction's functional model uses
(IsLaneEnabled, writes to LRegs, the Dst lane mapping). The instructions themselves live in the sibling modules, one
handler per instruction, and meet in `functional.FunctionalSFPU`."""
from __future__ import annotations

import numpy as np

from tt_backend.chip.errors import EmuUndefined, EmuUnspecified
from tt_backend.chip.numerics.dst import Dst
from tt_backend.chip.numerics.sfpu.lane_math import ONE_F32, U32

LANES = np.arange(32)
LANE_ROW = LANES // 8                  # lane l <-> Dst row (addr & ~3) + l // 8 ...
LANE_COL = 2 * (LANES % 8)             # ... and column 2 * (l % 8) (+1 for odd columns)

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
VD_IN_LREG_IND = frozenset({"SFPLOAD", "SFPLOADI", "SFPSTORE", "SFPLUT"})
# Instructions that may change LaneFlags / UseLaneFlagsForLaneEnable / LaneConfig (invalidate the enable cache).
FLAG_WRITERS = frozenset({"SFPSETCC", "SFPENCC", "SFPPUSHC", "SFPPOPC", "SFPCOMPC", "SFPIADD", "SFPLZ", "SFPEXEXP",
                          "SFPGT", "SFPLE", "SFPCONFIG"})


class VectorUnitState:
    """LRegs, predication and configuration state of the Vector Unit over the Dst it loads from and stores to."""

    def __init__(self, dst: Dst, strict: bool = True) -> None:
        self.dst = dst
        self.strict = strict
        self.sfpu_fp32_enabled = False   # ALU_ACC_CTRL_SFPU_Fp32_enabled (set by the caller)
        self.srcb_is_fp16 = False        # SrcB format is FP16-like (MOD0_FMT_SRCB resolves to FP16 instead of BF16)
        self.instructions = 0
        self.reset()

    def reset(self) -> None:
        self.lreg = np.zeros((17, 32), dtype=U32)
        self.lreg[8] = LREG8_BITS
        self.lreg[10] = ONE_F32
        for i, v in PRGM_CONST_DEFAULTS.items():
            self.lreg[i] = v
        # Reset value of LReg[12]: the ISA pages give none (1/65536 above is SFPCONFIG's IMM16_IS_VALUE default);
        # ttsim resets it to 1/512 (0x3B000000), seen by tests/diff/test_diff_sfpu_ttsim.py.
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
        self.prng_state = np.zeros(32, dtype=U32)
        self._row_mask = np.zeros(32, dtype=bool)             # derived from LaneConfig.ROW_MASK
        self.col_exchange = False                             # any DEST_RD/WR_COL_EXCHANGE bit set
        self.lane_config_any = False                          # any LaneConfig bit set at all
        self._en = None                                       # enabled() cache
        self.all_enabled = True                               # every lane enabled (valid once enabled() ran)

    def enabled(self) -> np.ndarray:
        """IsLaneEnabled for all 32 lanes (VectorUnit.md). Cached: every handler that changes LaneFlags,
        UseLaneFlagsForLaneEnable or LaneConfig calls `invalidate()` (so must anyone poking that state directly)."""
        if self._en is None:
            self._en = (self.lane_flags | ~self.use_lane_flags) & ~self._row_mask
            self.all_enabled = np.count_nonzero(self._en) == self._en.size     # (all(): 9x the cost here)
        return self._en

    def invalidate(self) -> None:
        """Forget the cached lane enables (after LaneFlags / UseLaneFlagsForLaneEnable / LaneConfig changed)."""
        self._en = None

    def write(self, vd: int, value, en: np.ndarray) -> None:
        """LReg[vd] = value on enabled lanes; only LReg 0-7 (and 16) are writable by ordinary instructions."""
        if vd < 8 or vd == 16:
            if en is self._en and self.all_enabled:
                self.lreg[vd] = value
            else:
                np.copyto(self.lreg[vd], value, where=en, casting="unsafe")

    def write_indirect(self, vd: int, indirect: bool, value, en: np.ndarray) -> None:
        """The INDIRECT_VD rule of SFPMAD.md: per-lane vd = LReg[7] & 15, written only where vd < 8."""
        if not indirect or vd == 16:
            self.write(vd, value, en)
            return
        vds = self.lreg[7] & 15
        value = np.broadcast_to(np.asarray(value, dtype=U32), (32,))
        for r in np.unique(vds[en]):
            if r < 8:
                np.copyto(self.lreg[r], value, where=en & (vds == r))

    def undefined(self, what: str) -> None:
        """Behaviour the ISA pages leave undefined: an error in strict mode, else carry on as the model computes."""
        if self.strict:
            raise EmuUndefined(what)

    def unspecified(self, what: str) -> None:
        """Behaviour the documentation does not pin down (ttsim refuses it): an error in strict mode."""
        if self.strict:
            raise EmuUnspecified(what)

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

    def set_lane_config(self, value: np.ndarray) -> None:
        """LaneConfig := value, with the state derived from it (row mask, column exchange, any bit set)."""
        self.lane_config[:] = value
        rm = (self.lane_config[LANES & 7] >> LC_ROW_MASK_SHIFT) & 0xF   # LaneConfig[Lane & 7].ROW_MASK
        self._row_mask = ((rm >> LANE_ROW) & 1).astype(bool)         # ... .Bit[Lane / 8]
        self.col_exchange = bool((self.lane_config & (LC_DEST_RD_COL_EXCHANGE | LC_DEST_WR_COL_EXCHANGE)).any())
        self.lane_config_any = bool(self.lane_config.any())
        self.invalidate()

    def dst_addr(self, name: str, fields: dict, dst_base: int) -> int:
        """The Dst address of SFPLOAD / SFPSTORE: Imm10 + the caller's base (DEST_TARGET_REG_CFG_MATH_Offset + RWC)."""
        addr = (fields["dest_reg_addr"] + dst_base) & 0x3FF
        if addr & 1:
            # ttsim refuses odd addresses; the docs say bit 0 is unused.
            self.unspecified(f"{name}: odd Dst address {addr}")
        return addr

    def resolve_srcb(self, mod0: int) -> int:
        """SFPLOAD / SFPSTORE Mod0 with MOD0_FMT_SRCB (0) resolved by the SFPU's FP32 mode and the SrcB format."""
        if mod0 != 0:
            return mod0
        if self.sfpu_fp32_enabled:
            return 3
        return 1 if self.srcb_is_fp16 else 2

    def lanes_rc(self, addr: int, col_exchange_bit: int) -> tuple[np.ndarray, np.ndarray]:
        """The Dst (row, column) each lane reads or writes at `addr` (LaneConfig's column exchange applied)."""
        rows = (addr & ~3) + LANE_ROW
        odd = ((addr >> 1) & 1) | ((self.lane_config[LANES & 7] & col_exchange_bit) != 0)
        return rows, LANE_COL + odd
