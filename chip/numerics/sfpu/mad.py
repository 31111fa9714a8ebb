"""The MAD sub-unit's instructions: SFPMAD and its aliases SFPADD / SFPMUL, SFPADDI, SFPMULI, SFPLUT, SFPLUTFP32,
SFPMUL24 (their ISA pages), on the Blackhole FMA model (tt_backend.chip.numerics.fma)."""
from __future__ import annotations

import numpy as np

from tt_backend.chip.numerics.fma import fma_bh_stacked
from tt_backend.chip.numerics.sfpu.lane_math import I64, ONE_F32, SIGN, U32, lut16_to_fp32, lut8_to_fp32
from tt_backend.chip.numerics.sfpu.state import LANES


class MadOps:
    """Handlers of the multiply-add family (mixed into FunctionalSFPU)."""

    def _mad(self, xyz: np.ndarray, vd: int, mod1: int) -> None:
        """Shared tail of the SFPMAD family: NEGATE_VB/VC already applied by the caller; fma; INDIRECT_VD write."""
        en = self.enabled()
        if not mod1 & 8 and not self.all_enabled:
            # only the enabled lanes are written, and the fma is lane-wise: compute just those (the same bits; whatever
            # disabled lanes hold - often Inf/NaN/denormals under predication - cannot send it to its slow exact path)
            if vd < 8 or vd == 16:
                en = np.broadcast_to(en, xyz.shape[1:])
                if en.any():
                    self.lreg[vd][en] = fma_bh_stacked(np.ascontiguousarray(xyz[:, en]))
            return
        self.write_indirect(vd, bool(mod1 & 8), fma_bh_stacked(xyz), en)

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
        xyz = np.stack([lut8_to_fp32((coeffs >> 8) & 0xFF), b.astype(I64), lut8_to_fp32(coeffs & 0xFF)])
        d = fma_bh_stacked(xyz.astype(U32))
        if mod0 & 4:  # SGN_RETAIN: copysign from LReg[3]
            d = (d & U32(0x7FFFFFFF)) | (l3 & U32(SIGN))
        self.write_indirect(vd, bool(mod0 & 8), d, self.enabled())

    def SFPLUTFP32(self, f: dict, dst_base: int) -> None:
        vd, mod1 = f["lreg_dest"], f["instr_mod1"]
        l3 = self.lreg[3]
        b = l3 & U32(0x7FFFFFFF)
        bf = b.view(np.float32)
        i = np.where(bf < 1.0, 0, np.where(bf < 2.0, 1, 2))
        if mod1 & 2:
            if (mod1 & 10) == 10:   # FP16_3ENTRY_TABLE (overlaps INDIRECT_VD: that bit is then also honoured)
                li = self.lreg[i, LANES].astype(I64)
                a, c = lut16_to_fp32((li >> 16) & 0xFFFF), lut16_to_fp32(li & 0xFFFF)
            else:
                cut = 4.0 if (mod1 & 3) == 3 else 3.0
                j = np.where((bf < 0.5) | ((bf >= 1.0) & (bf < 1.5)) | ((bf >= 2.0) & (bf < cut)), 0, 16)
                a = lut16_to_fp32((self.lreg[i, LANES].astype(I64) >> j) & 0xFFFF)
                c = lut16_to_fp32((self.lreg[4 + i, LANES].astype(I64) >> j) & 0xFFFF)
        else:
            a, c = self.lreg[i, LANES].astype(I64), self.lreg[4 + i, LANES].astype(I64)
        d = fma_bh_stacked(np.stack([a, b.astype(I64), c]).astype(U32))
        if mod1 & 4:  # SGN_RETAIN
            d = (d & U32(0x7FFFFFFF)) | (l3 & U32(SIGN))
        self.write_indirect(vd, bool(mod1 & 8), d, self.enabled())

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
        self.write_indirect(f["lreg_dest"], bool(mod1 & 8), d.astype(U32), self.enabled())
