"""Conversions and approximations: SFPCAST, SFP_STOCH_RND, SFPARECIP (their ISA pages; the SFPARECIP tables in
lane_math)."""
from __future__ import annotations

import numpy as np

from tt_backend.chip.numerics.sfpu.lane_math import I64, SIGN, U32, approx_exp, approx_recip, clz32


class Conversions:
    """Handlers of the conversion instructions (mixed into FunctionalSFPU)."""

    def SFPCAST(self, f: dict, dst_base: int) -> None:
        vc, vd, mode = f["lreg_src_c"], f["lreg_dest"], f["instr_mod1"] & 3
        c = self.lreg[vc].astype(I64)
        en = self.enabled()
        if mode in (0, 1):   # sign-magnitude int32 -> FP32 (SFPCAST_IntFloat.md)
            sign, mag = c & SIGN, c & 0x7FFFFFFF
            lz = np.where(mag != 0, clz32(mag), 157)
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
        self.write(vd, d & 0xFFFFFFFF, en)

    def SFP_STOCH_RND(self, f: dict, dst_base: int) -> None:
        vd, vc, rnd = f["lreg_dest"], f["lreg_src_c"], f["rnd_mode"]
        mod1, use_imm5 = f["instr_mod1"] & 7, f["instr_mod1"] >> 3
        if rnd == 3:
            self.undefined("SFP_STOCH_RND: undefined RoundingMode 3")
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
            self.undefined(f"SFP_STOCH_RND: undefined Mod1 {mod1}")
            return
        self.write(vd, d, en)

    def SFPARECIP(self, f: dict, dst_base: int) -> None:
        vd, mod1 = f["lreg_dest"], f["instr_mod1"]
        x = self.lreg[f["lreg_c"]].astype(I64)
        sign = x & SIGN
        mag = x - sign
        en = self.enabled()
        if mod1 == 0:        # RECIP: sign | ApproxRecip(|x|)
            d = sign + approx_recip(mag)
        elif mod1 == 1:      # COND_RECIP: where VB < 0, ApproxRecip(|x|) without the sign; else VC unchanged
            vb = f["imm12_math"] & 15
            d = np.where(self.lreg[vb].view(np.int32) < 0, approx_recip(mag), x)
        else:                # EXP (and the default case)
            d = sign + approx_exp(mag)
        self.write(vd, d, en)
