"""FP32 field manipulation: SFPEXEXP, SFPEXMAN, SFPSETEXP, SFPSETMAN, SFPSETSGN, SFPDIVP2 (their ISA pages)."""
from __future__ import annotations

import numpy as np

from tt_backend.chip.numerics.sfpu.lane_math import I64, SIGN, U32


class FpFieldOps:
    """Handlers of the exponent / mantissa / sign instructions (mixed into FunctionalSFPU)."""

    def SFPEXEXP(self, f: dict, dst_base: int) -> None:
        vd, mod1 = f["lreg_dest"], f["instr_mod1"]
        if not (vd < 8 or vd == 16):
            return
        e = ((self.lreg[f["lreg_c"]] >> 23) & 0xFF).astype(I64) - (0 if mod1 & 1 else 127)
        en = self.enabled()
        self.write(vd, e & 0xFFFFFFFF, en)
        if vd < 8:
            flags = (e < 0) if mod1 & 2 else self.lane_flags
            if mod1 & 8:
                flags = ~flags
            np.copyto(self.lane_flags, flags, where=en)

    def SFPEXMAN(self, f: dict, dst_base: int) -> None:
        hidden = 0 if f["instr_mod1"] & 1 else 1 << 23
        self.write(f["lreg_dest"], (self.lreg[f["lreg_c"]] & U32(0x7FFFFF)) + U32(hidden), self.enabled())

    def SFPSETEXP(self, f: dict, dst_base: int) -> None:
        vd, mod1 = f["lreg_dest"], f["instr_mod1"]
        c = self.lreg[f["lreg_c"]]
        if mod1 & 1:
            e = U32(f["imm12_math"] & 0xFF)
        elif mod1 & 2:
            e = (self.lreg[vd] >> 23) & U32(0xFF)
        else:
            e = self.lreg[vd] & U32(0xFF)
        self.write(vd, (c & U32(0x807FFFFF)) | (e << U32(23)), self.enabled())

    def SFPSETMAN(self, f: dict, dst_base: int) -> None:
        vd = f["lreg_dest"]
        c = self.lreg[f["lreg_c"]]
        man = U32((f["imm12_math"] & 0xFFF) << 11) if f["instr_mod1"] & 1 else self.lreg[vd] & U32(0x7FFFFF)
        self.write(vd, (c & U32(0xFF800000)) | man, self.enabled())

    def SFPSETSGN(self, f: dict, dst_base: int) -> None:
        vd = f["lreg_dest"]
        c = self.lreg[f["lreg_c"]]
        sign = U32((f["imm12_math"] & 1) << 31) if f["instr_mod1"] & 1 else self.lreg[vd] & U32(SIGN)
        self.write(vd, (c & U32(0x7FFFFFFF)) | sign, self.enabled())

    def SFPDIVP2(self, f: dict, dst_base: int) -> None:
        c = self.lreg[f["lreg_c"]]
        imm8 = f["imm12_math"] & 0xFF
        e = (c >> 23) & U32(0xFF)
        if f["instr_mod1"] & 1:   # ADD: wrapping 8-bit exponent add, Inf/NaN unchanged
            e = np.where(e == 255, e, (e + U32(imm8)) & U32(0xFF))
        else:
            e = np.full(32, imm8, dtype=U32)
        self.write(f["lreg_dest"], (c & U32(0x807FFFFF)) | (e << U32(23)), self.enabled())
