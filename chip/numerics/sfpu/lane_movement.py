"""Lane movement and configuration: SFPSWAP, SFPTRANSP, SFPCONFIG, SFPNOP (their ISA pages)."""
from __future__ import annotations

import numpy as np

from tt_backend.chip.numerics.sfpu.lane_math import U32, bitwise, smag_key
from tt_backend.chip.numerics.sfpu.state import LANES, LC_ENABLE_DEST_INDEX, LC_EXCHANGE_SRCB_SRCC, \
    PRGM_CONST_DEFAULTS


class LaneMovement:
    """Handlers of the swap / transpose / configuration instructions (mixed into FunctionalSFPU)."""

    def SFPSWAP(self, f: dict, dst_base: int) -> None:
        vc, vd, mod1 = f["lreg_src_c"], f["lreg_dest"], f["instr_mod1"]
        en = self.enabled()
        cv, dv = self.lreg[vc].copy(), self.lreg[vd].copy()
        if mod1 == 0:
            swap = np.ones(cv.shape, dtype=bool)      # (the shape of the LRegs: (32,), or (k, 32) in a batch)
        else:
            gets_min = {1: 0xFFFFFFFF, 2: 0x0000FFFF, 3: 0x00FF00FF, 4: 0xFF0000FF, 5: 0x000000FF,
                        6: 0x0000FF00, 7: 0x00FF0000, 8: 0xFF000000}.get(mod1, 0)
            gm = ((gets_min >> LANES) & 1).astype(bool)
            c_smaller = smag_key(cv) < smag_key(dv)
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
            regs = self.lreg[base:base + 4]                        # (4, 32), or (4, k, 32) in a batch
            m = regs.reshape(regs.shape[:-1] + (4, 8))             # [i][..][j][column] = LReg[base+i][..][8j+column]
            t = np.swapaxes(m, 0, -2).reshape(regs.shape)          # t[i][..][8j+c] = LReg[base+j][..][8i+c]
            np.copyto(regs, t, where=en[None])

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
            np.copyto(self.macro_misc, bitwise(mod1, self.macro_misc, value & U32(0xFFF)), where=sel)
        elif vd in (9, 10):
            pass
        elif vd <= 14:
            v = np.full(32, PRGM_CONST_DEFAULTS[vd], dtype=U32) if mod1 & 1 else l0
            np.copyto(self.lreg[vd], v, where=sel)
        else:          # 15: LaneConfig (18 bits); with IMM16_IS_VALUE the high bits are OR-ed back
            orig = self.lane_config.copy()
            new = bitwise(mod1, orig, value & U32(0x3FFFF))
            if mod1 & 1:
                new |= orig & ~U32(0xFFFF)
            self.set_lane_config(np.where(sel, new, orig))

    def SFPNOP(self, f: dict, dst_base: int) -> None:
        pass
