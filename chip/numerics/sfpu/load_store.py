"""SFPLOAD, SFPSTORE, SFPLOADI: data into and out of the LRegs (SFPLOAD.md, SFPSTORE.md, SFPLOADI.md), with Dst's
32-bit and 16-bit views and the per-format conversions of the functional models."""
from __future__ import annotations

import numpy as np

from tt_backend.chip.errors import EmuUnimplemented
from tt_backend.chip.numerics.sfpu.lane_math import I64, SIGN, U32, sext, unshuffle_fp32
from tt_backend.chip.numerics.sfpu.state import LC_BLOCK_DEST_WR_FROM_SFPU, LC_BLOCK_SFPU_RD_FROM_DEST, \
    LC_CAPTURE_DEFAULT_DEST_INDEX, LC_DEST_RD_COL_EXCHANGE, LC_DEST_WR_COL_EXCHANGE, LC_ENABLE_DEST_INDEX, \
    LC_ENABLE_FP16A_INF


class LoadStore:
    """Handlers of the load / store / immediate instructions (mixed into FunctionalSFPU)."""

    def SFPLOAD(self, f: dict, dst_base: int) -> None:
        vd, mod0 = f["lreg_ind"], self.resolve_srcb(f["instr_mod0"])
        addr = self.dst_addr("SFPLOAD", f, dst_base)
        if mod0 == 10:
            raise EmuUnimplemented("SFPLOAD MOD0_FMT_INT32_ALL (stack-pointer addressing) is not modelled")
        if vd >= 8:
            return
        en = self.enabled()
        if self.lane_config_any:
            en = en & ((self.lane_config & LC_BLOCK_SFPU_RD_FROM_DEST) == 0)
        if mod0 in (3, 4, 12) and not self.col_exchange:
            # FP32 / INT32 / INT32_SM (deprecated, no conversion on BH): 32-bit view, raw bits. Fast path: the
            # 32 lanes are a (4 rows x 8 columns) strided slice of Dst32b.
            if addr >= 512:
                self.undefined(f"SFPLOAD: Dst32b row {addr & ~3} out of range")
            r0 = (addr & ~3) & 511
            self.write(vd, self.dst.rows32[r0:r0 + 4, (addr >> 1) & 1::2].reshape(32), en)
            if vd < 4 and self.lane_config_any:
                self._capture_index(vd, en, *self.lanes_rc(addr, LC_DEST_RD_COL_EXCHANGE))
            return
        rows, cols = self.lanes_rc(addr, LC_DEST_RD_COL_EXCHANGE)
        if mod0 in (3, 4, 12):
            if addr >= 512:
                self.undefined(f"SFPLOAD: Dst32b row {addr & ~3} out of range")
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
        self.write(vd, datum, en)
        if vd < 4 and self.lane_config_any:
            self._capture_index(vd, en, rows, cols)

    def _capture_index(self, vd: int, en: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> None:
        """SFPLOAD's second write under ENABLE_DEST_INDEX + CAPTURE_DEFAULT_DEST_INDEX: LReg[VD+4] = Row<<4 | Col."""
        both = LC_ENABLE_DEST_INDEX | LC_CAPTURE_DEFAULT_DEST_INDEX
        cap = en & ((self.lane_config & both) == both)
        if cap.any():
            self.write(vd + 4, (rows << 4) | cols, cap)

    def SFPSTORE(self, f: dict, dst_base: int) -> None:
        vd, mod0 = f["lreg_ind"], self.resolve_srcb(f["instr_mod0"])
        addr = self.dst_addr("SFPSTORE", f, dst_base)
        if mod0 == 10:
            raise EmuUnimplemented("SFPSTORE MOD0_FMT_INT32_ALL (stack-pointer addressing) is not modelled")
        if vd == 16 and not f.get("_macro"):
            self.undefined("SFPSTORE of LReg[16]: only readable by an SFPLOADMACRO-scheduled SFPSTORE")
            return
        en = self.enabled()
        if self.lane_config_any:
            en = en & ((self.lane_config & LC_BLOCK_DEST_WR_FROM_SFPU) == 0)
        if mod0 in (3, 4, 12, 7) and not self.col_exchange:   # fast path: strided (4 x 8) slice of Dst32b
            if addr >= 512:
                self.undefined(f"SFPSTORE: Dst32b row {addr & ~3} out of range")
            r0 = (addr & ~3) & 511
            d = self.lreg[vd]
            if mod0 == 3:  # FP32: flush denormals to signed zero
                d = np.where((d & U32(0x7F800000)) == 0, d & U32(SIGN), d)
            elif mod0 == 7:  # HI16: the raw word lands in (shuffled) storage, as below
                d = unshuffle_fp32(d).astype(U32)
            view = self.dst.rows32[r0:r0 + 4, (addr >> 1) & 1::2]
            if self.all_enabled and not self.lane_config_any:   # en is the unmasked enable vector, all set
                view[...] = d.reshape(4, 8)
                self.dst.written[r0:r0 + 4] = True
            else:
                np.copyto(view, d.reshape(4, 8), where=en.reshape(4, 8))
                self.dst.written[r0:r0 + 4] |= en.reshape(4, 8).any(axis=1)
            return
        rows, cols = self.lanes_rc(addr, LC_DEST_WR_COL_EXCHANGE)
        rows, cols = rows[en], cols[en]
        d = self.lreg[vd][en].astype(I64)
        if mod0 in (3, 4, 12, 7, 9):  # Dst32b targets
            if addr >= 512:
                self.undefined(f"SFPSTORE: Dst32b row {addr & ~3} out of range")
            if mod0 == 3:    # FP32: flush denormals to signed zero
                d = np.where((d & 0x7F800000) == 0, d & SIGN, d)
            elif mod0 == 7:  # HI16: the raw word lands in (shuffled) storage; canonical = UnshuffleFP32(word)
                d = unshuffle_fp32(d)
            elif mod0 == 9:  # LO16: halves swapped, raw storage
                d = unshuffle_fp32(((d << 16) | (d >> 16)) & 0xFFFFFFFF)
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

    def SFPLOADI(self, f: dict, dst_base: int) -> None:
        vd, mod0, imm = f["lreg_ind"], f["instr_mod0"], f["imm16"]
        if mod0 not in (0, 1, 2, 4, 8, 10):
            self.undefined(f"SFPLOADI: undefined Mod0 {mod0}")
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
            v = sext(imm, 16) & 0xFFFFFFFF
        elif mod0 == 8:
            v = (imm << 16) | (old & 0xFFFF)
        else:
            v = (old & 0xFFFF0000) | imm
        self.write(vd, v, self.enabled())
