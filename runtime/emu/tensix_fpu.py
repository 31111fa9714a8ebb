"""Matrix Unit (FPU) of the Tensix model: SrcA/SrcB banks and their ownership handshake, RWCs and address modifiers
(incl. the fidelity-phase counter), SETRWC/INCRWC/CLEARDVALID, ZEROACC/ZEROSRC, MVMUL/DOTPV/GAPOOL,
ELWMUL/ELWADD/ELWSUB, GMPOOL (incl. ArgMax and SrcB scaling), MOVA2D/MOVB2D/MOVD2A/MOVD2B/MOVB2A, TRNSPSRCB, SHIFTXB.
The numerics live in `fpu_math.py`.

Mixed into `tensix.Tensix`; every handler gets (thread, decoded fields) and returns None or a blocked reason.
Where the ISA pages (WH) and ttsim (the BH oracle) differ, or ttsim refuses a mode, the mode raises EmuUnimplemented
by name rather than guessing. DOTPV, SHIFTXB, GAPOOL's row masking and GMPOOL's ArgMax/scaling have no oracle (ttsim
refuses them): they transcribe the WH pages' functional models (BH has no Matrix Unit pages; its README lists no FPU
change), with the BH encodings of templates/isa/tensix_isa.json; what those pages leave open stays EmuUnimplemented.
Facts: docs/fpu_path.md §6-10, docs/isa.md §2/4, WH MatrixUnit/ELWMUL/MVMUL/DOTPV/GAPOOL/GMPOOL/SHIFTXB/MOV*/
ZEROACC/ZEROSRC pages, BH Dst.md.
"""
from __future__ import annotations

import numpy as np

from tt_backend.chip.numerics import dst as dst_mod
from tt_backend.chip.numerics import fpu_math as fm
from tt_backend.runtime.emu.accel import tile_native

SRC_ROWS = 64
DST32_ROWS = 512
DST_RWC_MASK = 1023      # RWC.Dst is 10 bits
SRC_RWC_MASK = 63        # RWC.SrcA / SrcB are 6 bits

class FpuMixin:
    def _init_src(self):
        self.srca = np.zeros((2, SRC_ROWS, 16), np.uint32)
        self.srcb = np.zeros((2, SRC_ROWS, 16), np.uint32)
        self.srca_valid = [False, False]      # True: bank owned by the FPU (dvalid set)
        self.srcb_valid = [False, False]
        self.srca_unpack_bank = self.srca_matrix_bank = 0
        self.srcb_unpack_bank = self.srcb_matrix_bank = 0
        self.srca_format = [0, 0]             # "implied" format recorded by the unpacker per bank (BH)
        self.srcb_format = [0, 0]

    # ------------------------------------------------------------------------------------------------ RWCs
    def apply_addr_mod(self, t: int, mode: int, fidelity: bool = True) -> None:
        """ApplyAddrMod (BH: 3-bit index straight into ADDR_MOD_AB_SEC / ADDR_MOD_DST_SEC, thread cfg 12+i / 28+i)."""
        th = self.threads[t]
        if th.cfg[47 + mode]:
            # ttsim: bias state is fatal on BH and BiasClear unimplemented; not modelled here either
            raise self.unimpl(f"ADDR_MOD_BIAS_SEC{mode} (thread cfg {47 + mode}) = 0x{th.cfg[47 + mode]:X}")
        ab, dm = th.cfg[12 + mode], th.cfg[28 + mode]
        r = th.rwc
        self._upd(r, "a", ab & 0x3F, ab >> 7 & 1, ab >> 6 & 1, 0, SRC_RWC_MASK)
        self._upd(r, "b", ab >> 8 & 0x3F, ab >> 15 & 1, ab >> 14 & 1, 0, SRC_RWC_MASK)
        self._upd(r, "d", dm & 0x3FF, dm >> 11 & 1, dm >> 10 & 1, dm >> 12 & 1, DST_RWC_MASK)
        if fidelity:
            r["fid"] = 0 if dm >> 15 & 1 else (r["fid"] + (dm >> 13 & 3)) & 3

    def _upd(self, r, k, incr, clear, cr, c_to_cr, mask):
        if c_to_cr:
            if clear or cr:
                # ttsim refuses the combination; the two docs disagree on priority, so do not guess
                raise self.unimpl(f"address modifier with DestCToCR combined with {'Clear' if clear else 'CR'}")
            r[k] = (r[k] + incr) & mask
            r[k + "_cr"] = r[k]
        elif clear:
            r[k] = r[k + "_cr"] = 0
        elif cr:
            r[k] = r[k + "_cr"] = (r[k + "_cr"] + incr) & mask
        else:
            r[k] = (r[k] + incr) & mask

    def _release_banks(self, t: int, which: int) -> None:
        """clear_dvalid / clear_ab_vld: hand the FPU's current SrcA (bit 0) / SrcB (bit 1) bank back to the unpacker
        (unless CLR_DVALID_SrcX_Disable) and move the FPU to the other bank."""
        cfg7 = self.threads[t].cfg[7]
        if which & 1:
            b = self.srca_matrix_bank
            if not cfg7 & 1:
                if not self.srca_valid[b]:
                    raise self.unspecified(f"releasing SrcA bank {b} which is not valid (ttsim: math_clear_src_valid)")
                self.srca_valid[b] = False
            self.srca_matrix_bank ^= 1
        if which & 2:
            b = self.srcb_matrix_bank
            if not cfg7 & 2:
                if not self.srcb_valid[b]:
                    raise self.unspecified(f"releasing SrcB bank {b} which is not valid (ttsim: math_clear_src_valid)")
                self.srcb_valid[b] = False
            self.srcb_matrix_bank ^= 1

    def src_bank_state(self) -> tuple:
        """All an FPU or unpacker handler waits on: the Src banks' valid flags and which bank each side owns."""
        return (self.srca_valid[0], self.srca_valid[1], self.srcb_valid[0], self.srcb_valid[1], self.srca_unpack_bank,
                self.srca_matrix_bank, self.srcb_unpack_bank, self.srcb_matrix_bank)

    def _banks_ready(self, what: str) -> str | None:
        if not self.srca_valid[self.srca_matrix_bank]:
            return f"{what}: SrcA bank {self.srca_matrix_bank} not valid (waiting for the unpacker)"
        if not self.srcb_valid[self.srcb_matrix_bank]:
            return f"{what}: SrcB bank {self.srcb_matrix_bank} not valid (waiting for the unpacker)"
        return None

    def SETRWC(self, t, f):
        r = self.threads[t].rwc
        m, crs = f["bit_mask"], f["rwc_cr"]
        if m & 1:
            v = f["rwc_a"] + (r["a_cr"] if crs & 1 else 0)
            r["a"] = r["a_cr"] = v & SRC_RWC_MASK
        if m & 2:
            v = f["rwc_b"] + (r["b_cr"] if crs & 2 else 0)
            r["b"] = r["b_cr"] = v & SRC_RWC_MASK
        if m & 4 or crs & 8:
            v = f["rwc_d"]
            if crs & 8:
                v += r["d"]
            elif crs & 4:
                v += r["d_cr"]
            r["d"] = r["d_cr"] = v & DST_RWC_MASK
        if m & 8:
            r["fid"] = 0
        if f["clear_ab_vld"]:
            self._release_banks(t, f["clear_ab_vld"])

    def INCRWC(self, t, f):
        r = self.threads[t].rwc
        crs = f["rwc_cr"]
        for k, inc, bit, mask in (("a", f["rwc_a"], 1, SRC_RWC_MASK), ("b", f["rwc_b"], 2, SRC_RWC_MASK),
                                  ("d", f["rwc_d"], 4, DST_RWC_MASK)):
            if crs & bit:
                r[k + "_cr"] = (r[k + "_cr"] + inc) & mask
                r[k] = r[k + "_cr"]
            else:
                r[k] = (r[k] + inc) & mask

    def CLEARDVALID(self, t, f):
        """Release the FPU's SrcA/SrcB bank. Unlike clear_dvalid on FPU instructions, CLR_DVALID_SrcX_Disable does not
        apply (CLEARDVALID.md; ttsim agrees)."""
        if f["reset"]:
            raise self.unimpl("CLEARDVALID reset != 0")
        if not f["cleardvalid"]:
            raise self.unimpl("CLEARDVALID with cleardvalid=0 (ttsim: unsupported no-op)")
        th = self.threads[t]
        saved, th.cfg[7] = th.cfg[7], 0
        try:
            self._release_banks(t, f["cleardvalid"])
        finally:
            th.cfg[7] = saved

    # ------------------------------------------------------------------------------------------------ formats/rows
    def _implied_formats(self, t: int) -> tuple[int, int]:
        """(SrcA, SrcB) formats the FPU sees: on BH the format the unpacker recorded for the FPU's bank, unless
        DISABLE_IMPLIED_SRCA/B_FMT_Base (thread cfg 2/3) selects ALU_FORMAT_SPEC_REG0_SrcA / REG1_SrcB (docs/fpu_path.md §3)."""
        th = self.threads[t]
        fa = self.srca_format[self.srca_matrix_bank] if not th.cfg[2] & 1 else self.cfg[1] >> 17 & 0xF
        fb = self.srcb_format[self.srcb_matrix_bank] if not th.cfg[3] & 1 else self.cfg[1] >> 21 & 0xF
        return fa, fb

    def _check_dst_access(self, name: str) -> None:
        if self.cfg[220] & 3:
            # BH Dst.md remaps rows with these bits; ttsim ignores them ("XXX handle Adj16/Adj32"): no oracle
            raise self.unimpl(f"{name} with DEST_ACCESS_CFG remap_addrs/swizzle_32b = {self.cfg[220] & 3}")

    def _math_mode(self, t: int, name: str, ok_a, ok_b, ok_int8_b) -> tuple[int, int, bool, bool, bool]:
        """(fa, fb, int8, use_dst32b, exp8) for a computing FPU instruction, refusing what no oracle defines."""
        if self.cfg[0] >> 4 & 1:
            raise self.unimpl(f"{name} with ALU_FORMAT_SPEC_REG_SrcA_override=1")
        if self.cfg[1] & 7:
            raise self.unimpl(f"{name} with stochastic rounding (ALU_ROUNDING_MODE_*_srnd_en = {self.cfg[1] & 7})")
        self._check_dst_access(name)
        int8 = bool(self.cfg[1] >> 31 & 1)
        fa, fb = self._implied_formats(t)
        if int8:
            if fa != fm.INT8 or fb not in ok_int8_b:
                raise self.unimpl(f"{name} INT8 math with Src formats SrcA={fa} SrcB={fb}")
        elif fa in fm.FMT_5BIT_EXP:
            if fa != fb:
                raise self.unimpl(f"{name} with FP16-style SrcA={fa} but SrcB={fb}")
        elif fa not in ok_a or fb not in ok_b:
            raise self.unimpl(f"{name} with Src formats SrcA={fa} SrcB={fb}")
        use32 = int8 or bool(self.cfg[1] >> 29 & 1)
        return fa, fb, int8, use32, (fa not in fm.FMT_5BIT_EXP and not int8)

    def _fpu_dst_row(self, t: int, dst_field: int, align: int, use32: bool, name: str) -> int:
        """Dst row = DEST_TARGET_REG_CFG_MATH_Offset + RWC.Dst + instruction field (10 bits). Dst32b rows >= 512 alias
        through Adj32 in a way nobody has verified: refused."""
        th = self.threads[t]
        row = ((th.cfg[1] & 0xFFF) + th.rwc["d"] + dst_field) & DST_RWC_MASK
        if row % align:
            raise self.unimpl(f"{name} with Dst row {row} not a multiple of {align}")
        if use32 and row + align > DST32_ROWS:
            raise self.undefined(f"{name} Dst32b rows {row}..{row + align - 1} beyond row 511")
        return row

    def _doc_dst_row(self, t: int, dst_field: int, mask: int, n: int, use32: bool, name: str) -> int:
        """DstRow as the WH pages' models compute it: (field + DEST_TARGET_REG_CFG_MATH_Offset + RWC.Dst +
        DEST_REGW_BASE_Base) & mask (cfg 6; ttsim never instantiates it). Dst32b rows >= 512: refused as above."""
        th = self.threads[t]
        row = (dst_field + (th.cfg[1] & 0xFFF) + th.rwc["d"] + (self.cfg[6] & 0xFFFF)) & mask
        if use32 and row + n > DST32_ROWS:
            raise self.undefined(f"{name} Dst32b rows {row}..{row + n - 1} beyond row 511")
        return row

    def _check_5bit_exp(self, name: str, *blocks) -> None:
        for blk in blocks:
            if np.any(np.asarray(blk) & 0x70000000):
                raise self.unspecified(f"{name}: FP16-style Src datum with non-zero high exponent bits "
                                       f"(ttsim: unsupported)")

    @staticmethod
    def _grid(row: int, n: int):
        return np.arange(row, row + n)[:, None].repeat(16, 1), np.arange(16)[None, :].repeat(n, 0)

    def _dst_read(self, row: int, n: int, use32: bool, exp8: bool) -> np.ndarray:
        """Plain fp32-layout Dst values (int64, (n, 16)). 16-bit Dst: Dst16b rows (= physical rows, remap off) decoded
        from the BF16/FP16 storage layout. Undefined rows read as 0 (GMPOOL reads them itself, as all ones)."""
        if use32:
            return self.dst.rows32[row:row + n].astype(np.int64)
        rows, cols = self._grid(row, n)
        bits = self.dst.read16(rows, cols).astype(np.int64)
        if exp8:
            return dst_mod.decode_bf16(bits).astype(np.int64) << 16
        return fm.fp16_to_dst32(dst_mod.decode_fp16(bits)).astype(np.int64)

    def _dst_write(self, row: int, vals, use32: bool, exp8: bool) -> None:
        vals = np.asarray(vals, np.int64)
        if use32:
            self.dst.write_rows32(row, vals.astype(np.uint32))
            return
        rows, cols = self._grid(row, len(vals))
        bits = dst_mod.encode_bf16(vals >> 16) if exp8 else dst_mod.encode_fp16(fm.dst32_to_fp16(vals))
        self.dst.write16(rows, cols, bits)

    def _phase(self, t: int) -> int:
        th = self.threads[t]
        return (th.rwc["fid"] + th.cfg[11]) & 3      # RWC.FidelityPhase + FIDELITY_BASE_Phase

    def _finish(self, t: int, addr_mode: int, clear_dvalid: int) -> None:
        # counters first, then the bank release (docs/fpu_path.md §6)
        self.apply_addr_mod(t, addr_mode)
        if clear_dvalid:
            self._release_banks(t, clear_dvalid)

    # ------------------------------------------------------------------------------------------------ ZEROACC
    def ZEROACC(self, t, f):
        mode = f["clear_mode"] | (f["use_32_bit_mode"] << 2)   # BH merges the two fields (ttsim: WH mode numbers)
        if f["clear_zero_flags"]:
            # "Revert": un-marks rows; the data the model zeroed is gone, and the docs call it undefined behaviour
            raise self.unimpl("ZEROACC clear_zero_flags=1 (Revert)")
        self._check_dst_access("ZEROACC")
        th = self.threads[t]
        imm = f["where"]
        offset = (th.cfg[1] & 0xFFF) + th.rwc["d"]
        absolute = self.cfg[220] >> 3 & 1             # DEST_ACCESS_CFG_zeroacc_absolute_tile_mode
        if mode in (0, 4):                            # one row (Dst32b with an FP32/INT32 Dst, else Dst16b)
            row = imm + offset
            if row >= 1024:
                raise self.unimpl(f"ZEROACC one row {row} >= 1024")
            if self.cfg[1] >> 31 & 1:
                raise self.unimpl("ZEROACC one row with ALU_ACC_CTRL_INT8_math_enabled")
            if self.cfg[1] >> 29 & 1:
                if row >= DST32_ROWS:
                    raise self.undefined(f"ZEROACC Dst32b row {row} beyond row 511")
                self.dst.undefine32([row])
            else:
                self.dst.undefine16([row])
        elif mode == 1:                               # 16 Dst16b rows; Imm relative to the Dst half of the offset
            face = imm + (32 if not absolute and offset & 512 else 0)
            if face >= 64:
                raise self.unspecified(f"ZEROACC 16-row face {face} >= 64 (ttsim: NonContractual)")
            self.dst.undefine16(np.arange(16 * face, 16 * face + 16))
        elif mode == 5:                               # 16 Dst32b rows (docs/fpu_path.md §8.3)
            face = imm + (16 if not absolute and offset & 0x300 else 0)
            if face >= 32:
                raise self.unspecified(f"ZEROACC 32-bit face {face} >= 32 (ttsim: NonContractual)")
            self.dst.undefine32(np.arange(16 * face, 16 * face + 16))
        elif mode in (2, 6):                          # half of Dst
            if imm > 1:
                raise self.unspecified(f"ZEROACC clear-half with where={imm} > 1 (ttsim: NonContractual)")
            self.dst.undefine16(np.arange(512 * imm, 512 * imm + 512))
        elif mode in (3, 7):                          # all of Dst
            if imm:
                raise self.unspecified(f"ZEROACC clear-all with where={imm} != 0 (ttsim: NonContractual)")
            self.dst.undefine16(np.arange(1024))
        if mode & 3 <= 1:                             # only the 1-row and 16-row modes move the counters
            self.apply_addr_mod(t, f["addr_mode"])

    # ------------------------------------------------------------------------------------------------ ZEROSRC
    def ZEROSRC(self, t, f):
        """The two forms ttsim models: bank_mask=1 clears both banks of SrcA and SrcB; bank_mask=0, write_mode=1 clears
        the FPU's current bank of the selected registers. No bank wait."""
        mask = f["src_mask"]
        if not mask or f["zero_val"]:
            raise self.unimpl(f"ZEROSRC src_mask={mask} zero_val={f['zero_val']}")
        if f["bank_mask"]:
            if f["write_mode"] or mask != 3:
                raise self.unimpl(f"ZEROSRC all banks with write_mode={f['write_mode']} src_mask={mask}")
            self.srca[:] = 0
            self.srcb[:] = 0
        else:
            if f["write_mode"] != 1:
                raise self.unimpl("ZEROSRC current bank with write_mode=0")
            if mask & 1:
                self.srca[self.srca_matrix_bank] = 0
            if mask & 2:
                self.srcb[self.srcb_matrix_bank] = 0

    # ------------------------------------------------------------------------------------------------ MVMUL/GAPOOL
    def _matmul(self, t, f, name, n_rows, addr_mode, doc_rows=False):
        """Dst[n_rows x 16] += SrcB[n_rows x 16] @ SrcA[16 x 16], MVMUL's numerics (fpu_math.mvmul19, ttsim-verified).
        doc_rows (DOTPV, GAPOOL: no oracle): rows as MVMUL.md's model computes them, SrcARow = RWC.SrcA & 0x38,
        SrcBRow = RWC.SrcB & 0x38, DstRow = (DstRow + MATH_Offset + RWC.Dst + DEST_REGW_BASE) & (0x400 - NumRows);
        otherwise ttsim's stricter alignment rules (MVMUL)."""
        why = self._banks_ready(name)
        if why is not None:
            return why
        fa, fb, int8, use32, exp8 = self._math_mode(t, name, _MM_SRCA, _MM_SRCB, {fm.INT8})
        if self.cfg[2] & 1:
            raise self.unimpl(f"{name} with ALU_ACC_CTRL_Zero_Flag_disabled_src=1")
        th = self.threads[t]
        if doc_rows:
            if th.cfg[55] & 1:
                raise self.unimpl(f"{name} with FP16A_FORCE_Enable (thread cfg 55)")
            ra, rb = th.rwc["a"] & 0x38, th.rwc["b"] & 0x38
            if ra + 16 > SRC_ROWS:
                # the page reads SrcA rows SrcARow..SrcARow+15; past row 63 it does not say what happens
                raise self.unimpl(f"{name} with SrcA row {ra}: rows {ra}..{ra + 15} run past SrcA row 63")
            rd = self._doc_dst_row(t, f["dst"], 0x400 - n_rows, n_rows, use32, name)
        else:
            ra, rb = th.rwc["a"], th.rwc["b"]
            if ra % 16 or rb % 8:
                raise self.unimpl(f"{name} with SrcA row {ra} (needs a multiple of 16) / SrcB row {rb} (of 8)")
            rd = self._fpu_dst_row(t, f["dst"], n_rows, use32, name)
        phase = self._phase(t)
        a = self.srca[self.srca_matrix_bank, ra:ra + 16]
        b = self.srcb[self.srcb_matrix_bank, rb:rb + n_rows]
        if not exp8 and not int8:
            self._check_5bit_exp(name, a, b)
        # the common case the C part and the recorded runs both take (with an 8-bit-exponent SrcA, _math_mode admits
        # only 8-bit-exponent SrcB formats: their numerics)
        common = use32 and exp8 and not int8 and not doc_rows and n_rows == 8
        c = tile_native.module() if common else None
        if c is not None:                                       # this MVMUL's numerics in C, here and now
            if self.mm_record:
                self.flush_mvmul(keep=True)
            dst = self.dst
            c.mvmul(self.srca[self.srca_matrix_bank], ra, self.srcb[self.srcb_matrix_bank], rb, dst.rows32,
                    dst.written, dst.cleared16, rd, fm.src19_mask(fa), fm.src19_mask(fb), phase)
            self._finish(t, addr_mode, f["clear_dvalid"])
            return None
        if self.mm_record is not None:       # inside a pushed MVMUL run (accel/fpu_batch.py)
            if common and not self.raw_sfpu.scheduled:
                self.record_mvmul(a, b, fa, fb, rd, phase)
                self._finish(t, addr_mode, f["clear_dvalid"])
                return None
            self.flush_mvmul(keep=True)         # this one runs here: the recorded steps before it first
        if int8:
            ai, bi = fm.int8_operands(a, b, phase)
            old = fm.int32_from_dst(self.dst.rows32[rd:rd + n_rows])
            new = fm.int32_to_dst(fm.saturate_add_int32(old, bi @ ai))
        else:
            old = self._dst_read(rd, n_rows, use32, exp8)
            new = fm.mvmul19(fm.src19(a, fa), fm.src19(b, fb), old, phase, use32, exp8)
        self._dst_write(rd, new, use32, exp8)
        self._finish(t, addr_mode, f["clear_dvalid"])

    def MVMUL(self, t, f):
        if f["instr_mod19"]:
            return self._mvmul_broadcast_row(t, f)
        if f["dst"] & 7:
            raise self.unimpl(f"MVMUL dst field {f['dst']} not a multiple of 8")
        return self._matmul(t, f, "MVMUL", 8, f["addr_mode"])

    def _mvmul_broadcast_row(self, t, f):
        """MVMUL.md BroadcastSrcBRow: SrcB row RWC.SrcB (any row) @ SrcA, added to Dst rows DstRow + 0, 2, 4, 6 with
        DstRow &= 0x3F9 (the page's `0x400 - NumRows` mask); odd rows are left alone. ttsim refuses this mode, so
        only the documented model is followed (same per-output numerics as MVMUL); FP32/INT32 Dst only."""
        why = self._banks_ready("MVMUL")
        if why is not None:
            return why
        fa, fb, int8, use32, exp8 = self._math_mode(t, "MVMUL", _MM_SRCA, _MM_SRCB, {fm.INT8})
        if not use32 or int8 or self.cfg[2] & 1:
            raise self.unimpl("MVMUL broadcast-row with a 16-bit Dst, INT8 math or Zero_Flag_disabled_src")
        th = self.threads[t]
        ra, rb = th.rwc["a"] & 0x38, th.rwc["b"] & 0x3F
        if ra % 16:
            raise self.unimpl(f"MVMUL broadcast-row with SrcA row {ra} (needs a multiple of 16)")
        rd = ((th.cfg[1] & 0xFFF) + th.rwc["d"] + f["dst"]) & 0x3F9
        rows = rd + np.arange(0, 8, 2)
        if rows[-1] >= DST32_ROWS:
            raise self.undefined(f"MVMUL broadcast-row Dst32b row {rows[-1]} beyond row 511")
        a = fm.src19(self.srca[self.srca_matrix_bank, ra:ra + 16], fa)
        b = fm.src19(np.repeat(self.srcb[self.srcb_matrix_bank, rb:rb + 1], 4, axis=0), fb)
        new = fm.mvmul19(a, b, self.dst.rows32[rows].astype(np.int64), self._phase(t), True, exp8)
        self.dst.rows32[rows] = new
        self.dst.mark_defined(rows)
        self._finish(t, f["addr_mode"], f["clear_dvalid"])

    def GAPOOL(self, t, f):
        """GAPOOL.md: MVMUL's model with NumRows = 4 and no broadcast: SrcB rows (RWC.SrcB & 0x38) + 0..3 @ SrcA rows
        (RWC.SrcA & 0x38) + 0..15, added to Dst rows DstRow & 0x3FC + 0..3 (ttsim refuses the unaligned rows the
        page's masks define). The page's syntax passes 0 for max_pool_index_en and does not decode bit 19; on BH, ttsim
        and tt-llk use instr_mod19 = 1 and no BH page says what 0 does, so only instr_mod19 = 1 is modelled."""
        if f["max_pool_index_en"] or f["instr_mod19"] != 1:
            raise self.unimpl(f"GAPOOL max_pool_index_en={f['max_pool_index_en']} instr_mod19={f['instr_mod19']}")
        return self._matmul(t, f, "GAPOOL", 4, f["pool_addr_mode"], doc_rows=True)

    def DOTPV(self, t, f):
        """DOTPV.md: MVMUL's functional model with BroadcastSrcBRow = false (8x16 SrcB @ 16x16 SrcA into an 8x16 Dst
        block, fidelity phase = RWC.FidelityPhase + FIDELITY_BASE_Phase, clear_dvalid flips, ApplyAddrMod), rows as
        the page's model masks them. BH encoding (tensix_isa.json): the page's syntax passes dest_accum_en = false and
        instr_mod19 = 0; other values are not described anywhere, so they are refused."""
        if f["dest_accum_en"] or f["instr_mod19"]:
            raise self.unimpl(f"DOTPV dest_accum_en={f['dest_accum_en']} instr_mod19={f['instr_mod19']}")
        return self._matmul(t, f, "DOTPV", 8, f["addr_mode"], doc_rows=True)

    # ------------------------------------------------------------------------------------------------ ELWMUL/ADD/SUB
    def _elw(self, t, f, name):
        mul, sub = name == "ELWMUL", name == "ELWSUB"
        if f["dst"] & 7:
            raise self.unimpl(f"{name} dst field {f['dst']} not a multiple of 8")
        if mul and f["dest_accum_en"]:
            raise self.unspecified("ELWMUL with dest_accum_en=1 (ELWMUL always accumulates; ttsim: NonContractual)")
        why = self._banks_ready(name)
        if why is not None:
            return why
        fa, fb, int8, use32, exp8 = self._math_mode(t, name, _ELW_SRCA, _ELW_SRCB, {fm.INT8, fm.BFP2_B})
        flush = not self.cfg[2] & 1                   # ALU_ACC_CTRL_Zero_Flag_disabled_src: keep SrcB denormals
        th = self.threads[t]
        ra, rb = th.rwc["a"], th.rwc["b"]
        if ra % 8 or rb % 8:
            raise self.unimpl(f"{name} with SrcA row {ra} / SrcB row {rb} not multiples of 8")
        rd = self._fpu_dst_row(t, f["dst"], 8, use32, name)
        phase = self._phase(t)
        if not mul and phase:
            raise self.unspecified(f"{name} with fidelity phase {phase} != 0 (ttsim: NonContractual)")
        mod = f["instr_mod19"]
        accumulate = mul or bool(f["dest_accum_en"])
        if use32 and exp8 and not int8 and (c := tile_native.module()) is not None:
            dst = self.dst                                  # this word's numerics in C
            c.elw(self.srca[self.srca_matrix_bank], ra, self.srcb[self.srcb_matrix_bank], rb, dst.rows32, dst.written,
                  dst.cleared16, rd, fm.src19_mask(fa), fm.src19_mask(fb), _ELW_OPS[name], mod & 3, flush, accumulate,
                  phase)
            self._finish(t, f["addr_mode"], f["clear_dvalid"])
            return None
        a = self.srca[self.srca_matrix_bank, ra:ra + 8].astype(np.int64)
        b = self.srcb[self.srcb_matrix_bank, rb:rb + 8].astype(np.int64)
        if mod & 2:                                   # BroadcastSrcBRow: SrcB row 0 of the block to all rows
            b = np.broadcast_to(b[0:1], (8, 16))
        if mod & 1:                                   # BroadcastSrcBCol0: column 0 to all columns
            b = np.broadcast_to(b[:, 0:1], (8, 16))
        if sub:
            b = b ^ 0x80000000
        if not exp8 and not int8:
            self._check_5bit_exp(name, a, b)
        if int8:
            za = (a & 0x7F800000) == 0
            zb = flush & ((b & 0x7F800000) == 0)
            am = fm.INT8_A_MASK[phase & 1] if mul else 0xFFFFFFFF
            bm = fm.INT8_B_MASK[phase & 2] if mul else 0xFFFFFFFF
            av = np.where(za, 0, fm.src_int8(a, am))
            bv = np.where(zb, 0, fm.src_int8(b, bm))
            res = av * bv if mul else av + bv
            if accumulate:
                res = fm.saturate_add_int32(fm.int32_from_dst(self.dst.rows32[rd:rd + 8]), res)
            new = fm.int32_to_dst(res)
        else:
            a19, b19 = fm.src19(a, fa), fm.src19(b, fb)
            zb = fm.is_zero19(b19) & flush
            old = self._dst_read(rd, 8, use32, exp8) if accumulate else np.zeros((8, 16), np.int64)
            if mul:
                new = fm.elwmul19(a19, b19, old, phase, use32, exp8, zero_b=zb)
            else:
                new = fm.elwadd19(a19, b19, old, use32, exp8, accumulate_dst=accumulate, zero_b=zb)
        self._dst_write(rd, new, use32, exp8)
        self._finish(t, f["addr_mode"], f["clear_dvalid"])

    def ELWMUL(self, t, f):
        return self._elw(t, f, "ELWMUL")

    def ELWADD(self, t, f):
        return self._elw(t, f, "ELWADD")

    def ELWSUB(self, t, f):
        return self._elw(t, f, "ELWSUB")

    # ------------------------------------------------------------------------------------------------ GMPOOL
    def GMPOOL(self, t, f):
        """GMPOOL.md: column-wise max of SrcA rows (RWC.SrcA & 0x30) + 0..15, row i scaled by the exponent of SrcB
        [RWC.SrcB & 0x38][i], max-ed with Dst row DstRow & 0x3FC (undefined rows read as all ones), written back; the
        other three rows of the 4-row block get 0 (with ArgMax and a 32-bit Dst: (old + 0x100) & 0xF00). ArgMax
        (max_pool_index_en) returns the transformed index of the largest of SrcA rows 0..7 in the low 12 bits.
        Numerics: fpu_math.gmpool. ttsim checks the subset scale 1.0 / BF16 / TF32 / no ArgMax; the rest has no
        oracle. The page's syntax passes instr_mod19 = true; what 0 does is described nowhere: refused."""
        if f["instr_mod19"] != 1:
            raise self.unimpl(f"GMPOOL instr_mod19={f['instr_mod19']}")
        why = self._banks_ready("GMPOOL")
        if why is not None:
            return why
        if self.cfg[0] >> 4 & 1:
            # the page's SrcA_override vs BH's implied (unpacker-recorded) format: BH docs do not say which wins
            raise self.unimpl("GMPOOL with ALU_FORMAT_SPEC_REG_SrcA_override=1")
        self._check_dst_access("GMPOOL")
        th = self.threads[t]
        fa, _ = self._implied_formats(t)
        argmax = bool(f["max_pool_index_en"])
        try:
            s_style, d_style, use32 = fm.gmpool_styles(fa, bool(self.cfg[1] >> 31 & 1), bool(th.cfg[55] & 1),
                                                       bool(self.cfg[1] >> 29 & 1), argmax)
        except ValueError as e:
            raise self.unimpl(f"GMPOOL: {e}") from None
        if s_style == fm.S_FP16 and d_style == fm.S_TF32:
            # The page lists FP16 SrcA with a TF32 Dst row as supported, but its model then adds FP16-biased exponents
            # (5-bit, bias 15) and removes the TF32 bias 127 on the write: the exponent wraps for every input. The page
            # contradicts itself here, so this combination is not modelled.
            raise self.unimpl("GMPOOL with FP16-style SrcA into a 32-bit Dst without ArgMax (GMPOOL.md inconsistent)")
        ra, rb = th.rwc["a"] & 0x30, th.rwc["b"] & 0x38
        rd = self._doc_dst_row(t, f["dst"], 0x3FC, 4, use32, "GMPOOL")
        if use32:
            old = fm.dst_to_storage(self.dst.rows32[rd:rd + 4])
            old = np.where(self.dst.undefined32(np.arange(rd, rd + 4))[:, None], 0xFFFFFFFF, old)
        else:
            rows, cols = self._grid(rd, 4)
            old = np.where(self.dst.undefined16(rows), 0xFFFF, self.dst.read16(rows, cols)).astype(np.int64) << 16
        top = fm.gmpool(self.srca[self.srca_matrix_bank, ra:ra + 16], self.srcb[self.srcb_matrix_bank, rb],
                        old[0], s_style, d_style, argmax)
        new = np.zeros((4, 16), np.int64)
        if use32:
            new[0] = top
            if argmax:
                new[1:] = (old[1:] + 0x100) & 0xF00          # "zero or garbage": the rows' own index phase + 1
            self.dst.write_rows32(rd, fm.dst_from_storage(new).astype(np.uint32))
        else:
            new[0] = top >> 16
            self.dst.write16(rows, cols, new.astype(np.uint32))
        self._finish(t, f["pool_addr_mode"], f["clear_dvalid"])

    # ------------------------------------------------------------------------------------------------ moves
    def _mov_fmt(self, t, name, bank_fmt, use_override=True):
        th = self.threads[t]
        if self.cfg[0] >> 4 & 1 and not use_override:
            raise self.unimpl(f"{name} with ALU_FORMAT_SPEC_REG_SrcA_override=1")
        fmt = (self.cfg[0] & 0xF) if self.cfg[0] >> 4 & 1 else (self.cfg[1] >> 17 & 0xF)
        if not th.cfg[2] & 1:                        # the implied format of the bank read (BH)
            fmt = bank_fmt
        return fmt

    def _mov_to_dst(self, row: int, vals: np.ndarray, fmt: int, use8: bool, lo: bool, name: str) -> None:
        """Write Src words to Dst like MOVA2D/MOVB2D: TF32 as a Dst32b row, other 8-bit-exponent formats as Dst16b BF16
        (or into the low half of Dst32b with dest_32b_lo), FP16 as Dst16b FP16."""
        n = len(vals)
        if fmt == fm.TF32:
            if lo:
                raise self.undefined(f"{name} TF32 with dest_32b_lo=1 (HW erratum TEN-4245; ttsim: UndefinedBehavior)")
            if not use8:
                raise self.unimpl(f"{name} TF32 with a 5-bit exponent style")
            if row + n > DST32_ROWS:
                raise self.undefined(f"{name} Dst32b rows {row}..{row + n - 1} beyond row 511")
            self.dst.write_rows32(row, vals.astype(np.uint32))
            return
        rows, cols = self._grid(row, n)
        if not use8:
            if lo:
                raise self.unimpl(f"{name} FP16 with dest_32b_lo=1")
            self.dst.write16(rows, cols, dst_mod.encode_fp16(fm.dst32_to_fp16(vals)))
            return
        enc = dst_mod.encode_bf16(vals >> 16).astype(np.int64)
        if lo:
            if row + n > DST32_ROWS:
                raise self.undefined(f"{name} Dst32b rows {row}..{row + n - 1} beyond row 511")
            old = self.dst.rows32[row:row + n].astype(np.int64)
            self.dst.write_rows32(row, ((old & 0xFFFF0000) | enc).astype(np.uint32))
        else:
            self.dst.write16(rows, cols, enc)

    def MOVA2D(self, t, f):
        if f["instr_mod"] != 2:
            raise self.unimpl(f"MOVA2D instr_mod={f['instr_mod']} (only 2: 8 rows)")
        if f["dst"] & 7 or f["src"] & 7:
            raise self.unimpl(f"MOVA2D dst={f['dst']} src={f['src']} not multiples of 8")
        if not self.srca_valid[self.srca_matrix_bank]:
            return f"MOVA2D: SrcA bank {self.srca_matrix_bank} not valid (waiting for the unpacker)"
        self._check_dst_access("MOVA2D")
        fmt = self._mov_fmt(t, "MOVA2D", self.srca_format[self.srca_matrix_bank])
        use8 = fmt in _MOV_8BIT
        if not use8 and fmt not in fm.FMT_5BIT_EXP:
            raise self.unimpl(f"MOVA2D with SrcA format {fmt}")
        th = self.threads[t]
        sr = f["src"] + th.rwc["a"]
        if sr % 8 or sr >= SRC_ROWS:
            raise self.unimpl(f"MOVA2D SrcA row {sr}")
        rd = self._fpu_dst_row(t, f["dst"], 8, False, "MOVA2D")
        v = self.srca[self.srca_matrix_bank, sr:sr + 8].astype(np.int64)
        if not self.cfg[2] & 1:
            v = np.where(v & 0x7F800000, v, 0)       # flush denormals (and -0) unless Zero_Flag_disabled_src
        self._mov_to_dst(rd, v, fmt, use8, bool(f["dest_32b_lo"]), "MOVA2D")
        self.apply_addr_mod(t, f["addr_mode"])

    def MOVB2D(self, t, f):
        mod = f["movb2d_instr_mod"]
        if mod not in (2, 3, 4, 5):
            raise self.unimpl(f"MOVB2D instr_mod={mod}")
        if f["dst"] & 3 or f["src"] & 3:
            raise self.unimpl(f"MOVB2D dst={f['dst']} src={f['src']} not multiples of 4")
        if not self.srcb_valid[self.srcb_matrix_bank]:
            return f"MOVB2D: SrcB bank {self.srcb_matrix_bank} not valid (waiting for the unpacker)"
        self._check_dst_access("MOVB2D")
        bank_fmt = self.srcb_format[self.srcb_matrix_bank]
        fmt = self._mov_fmt(t, "MOVB2D", bank_fmt)             # decides the Dst write style
        th = self.threads[t]
        fb = bank_fmt if not th.cfg[3] & 1 else self.cfg[1] >> 21 & 0xF   # decides the datum precision
        use8 = fmt in _MOV_8BIT - {fm.BFP2_B}
        if not use8 and fmt != fm.FP16:
            raise self.unimpl(f"MOVB2D with SrcB format {fmt}")
        n = 8 if mod & 2 else 4                      # 2/3: one row broadcast to 8 rows; 4/5: 4 rows
        sr = f["src"] + th.rwc["b"]
        if sr % n or sr >= SRC_ROWS:
            raise self.unimpl(f"MOVB2D SrcB row {sr}")
        rd = self._fpu_dst_row(t, f["dst"], n, False, "MOVB2D")
        bank = self.srcb[self.srcb_matrix_bank]
        v = (np.repeat(bank[sr:sr + 1], 8, axis=0) if mod & 2 else bank[sr:sr + 4]).astype(np.int64)
        if mod & 1:                                  # column 0 to every column
            v = np.repeat(v[:, 0:1], 16, axis=1)
        if not self.cfg[2] & 1:
            v = np.where(v & 0x7F800000, v, 0)
        if fb == fm.FP16:
            v &= 0x8FFFE000
        elif fb != fm.TF32:
            v &= 0xFFFF0000
        self._mov_to_dst(rd, v, fmt, use8, bool(f["dest_32b_lo"]), "MOVB2D")
        self.apply_addr_mod(t, f["addr_mode"])

    def _mov_from_dst(self, t, f, name, fmt, n, dst_is_b):
        """Dst rows -> Src words (MOVD2A/MOVD2B): FP32 Dst truncated to TF32 or BF16, 16-bit Dst decoded."""
        use32 = bool(self.cfg[1] >> 29 & 1 or self.cfg[1] >> 31 & 1)
        rd = self._fpu_dst_row(t, f["dst"], 4, use32, name)
        lo = bool(f["dest_32b_lo"])
        if use32:
            if fmt == fm.FP16:
                raise self.unimpl(f"{name} FP16 from a 32-bit Dst")
            v = self.dst.rows32[rd:rd + n].astype(np.int64)
            if lo:
                if not dst_is_b or fmt == fm.TF32:
                    raise self.unimpl(f"{name} with dest_32b_lo=1 (format {fmt})")
                v = dst_mod.decode_bf16(v & 0xFFFF).astype(np.int64) << 16
            elif fmt == fm.TF32:
                v = v & 0xFFFFE000
            else:
                v = v & 0xFFFF0000
            return v
        if lo or fmt == fm.TF32:
            raise self.undefined(f"{name} with dest_32b_lo={int(lo)} / TF32 from a 16-bit Dst "
                                 f"(ttsim: UndefinedBehavior)")
        rows, cols = self._grid(rd, n)
        bits = self.dst.read16(rows, cols)
        if fmt == fm.FP16:
            return fm.fp16_to_dst32(dst_mod.decode_fp16(bits)).astype(np.int64)
        return dst_mod.decode_bf16(bits).astype(np.int64) << 16

    def MOVD2A(self, t, f):
        """Dst -> SrcA, 4 rows, no bank wait (software uses STALLWAIT C7)."""
        if f["instr_mod"] != 2 or f["dst"] & 3 or f["src"] & 3:
            raise self.unimpl(f"MOVD2A instr_mod={f['instr_mod']} dst={f['dst']} src={f['src']}")
        self._check_dst_access("MOVD2A")
        fmt = self._mov_fmt(t, "MOVD2A", self.srca_format[self.srca_matrix_bank], use_override=False)
        if fmt not in _MOVD2A_FMTS:
            raise self.unimpl(f"MOVD2A with SrcA format {fmt}")
        sr = (f["src"] + self.threads[t].rwc["a"]) & SRC_RWC_MASK
        if sr % 4:
            raise self.unimpl(f"MOVD2A SrcA row {sr}")
        self.srca[self.srca_matrix_bank, sr:sr + 4] = self._mov_from_dst(t, f, "MOVD2A", fmt, 4, False)
        self.apply_addr_mod(t, f["addr_mode"])

    def MOVD2B(self, t, f):
        """Dst -> SrcB, 1 (instr_mod 0) or 4 rows (2), no bank wait."""
        if f["instr_mod"] not in (0, 2) or f["dst"] & 3 or f["src"] & 3:
            raise self.unimpl(f"MOVD2B instr_mod={f['instr_mod']} dst={f['dst']} src={f['src']}")
        self._check_dst_access("MOVD2B")
        fmt = self._mov_fmt(t, "MOVD2B", self.srcb_format[self.srcb_matrix_bank])
        if fmt not in _MOVD2A_FMTS | {fm.INT32}:
            raise self.unimpl(f"MOVD2B with SrcB format {fmt}")
        n = 4 if f["instr_mod"] == 2 else 1
        sr = f["src"] + self.threads[t].rwc["b"]
        if sr % 4 or sr >= SRC_ROWS:
            raise self.unimpl(f"MOVD2B SrcB row {sr}")
        self.srcb[self.srcb_matrix_bank, sr:sr + n] = self._mov_from_dst(t, f, "MOVD2B", fmt, n, True)
        self.apply_addr_mod(t, f["addr_mode"])

    def MOVB2A(self, t, f):
        """SrcB -> SrcA, 4 rows; waits for SrcB only; exponent-0 data flushed unless Zero_Flag_disabled_src."""
        if f["instr_mod"] != 2 or f["srcb"] & 3 or f["srca"] & 3:
            raise self.unimpl(f"MOVB2A instr_mod={f['instr_mod']} srcb={f['srcb']} srca={f['srca']}")
        if not self.srcb_valid[self.srcb_matrix_bank]:
            return f"MOVB2A: SrcB bank {self.srcb_matrix_bank} not valid (waiting for the unpacker)"
        th = self.threads[t]
        ra, rb = f["srca"] + th.rwc["a"], f["srcb"] + th.rwc["b"]
        if ra % 4 or ra >= SRC_ROWS or rb % 4 or rb >= SRC_ROWS:
            raise self.unimpl(f"MOVB2A rows SrcA={ra} SrcB={rb}")
        v = self.srcb[self.srcb_matrix_bank, rb:rb + 4]
        if not self.cfg[2] & 1:
            v = np.where(v & 0x7F800000, v, 0)
        self.srca[self.srca_matrix_bank, ra:ra + 4] = v
        self.apply_addr_mod(t, f["addr_mode"])

    def TRNSPSRCB(self, t, f):
        """Transpose SrcB rows 16..31 (one 16x16 face) of the FPU's bank in place; waits for SrcB; no counters."""
        if not self.srcb_valid[self.srcb_matrix_bank]:
            return f"TRNSPSRCB: SrcB bank {self.srcb_matrix_bank} not valid (waiting for the unpacker)"
        blk = self.srcb[self.srcb_matrix_bank, 16:32]
        blk[:] = blk.T.copy()

    def GATESRCRST(self, t, f):
        pass     # clock-gating control of the Src registers: no architectural effect (ttsim: no-op)

    def SHIFTXB(self, t, f):
        """SHIFTXB.md: waits for the FPU's SrcB bank, then row (shift_row + RWC.SrcB) & 0x3F of it moves left by one
        column; column 15 gets the old column 0 (rot_shift = ShiftInZero = 0) or 0 (1); then ApplyAddrMod. No bank
        release. BH encoding (tensix_isa.json): addr_mode [16:14] like every BH FPU instruction, ShiftInZero [10],
        SrcRow [5:0]. The one-cycle FPU bubble after it is cycles.py's business (FPU_TIMING)."""
        bank = self.srcb_matrix_bank
        if not self.srcb_valid[bank]:
            return f"SHIFTXB: SrcB bank {bank} not valid (waiting for the unpacker)"
        row = (f["shift_row"] + self.threads[t].rwc["b"]) & SRC_RWC_MASK
        old = self.srcb[bank, row].copy()
        self.srcb[bank, row, :15] = old[1:]
        self.srcb[bank, row, 15] = 0 if f["rot_shift"] else old[0]
        self.apply_addr_mod(t, f["addr_mode"])


_ELW_OPS = {"ELWMUL": 0, "ELWADD": 1, "ELWSUB": 2}      # tile_native.c's ELW_MUL, ELW_ADD, ELW_SUB
# Src formats each instruction family accepts (ttsim's lists; others are refused by name)
_MM_SRCA = frozenset({fm.FP32, fm.TF32, fm.BF16, fm.BFP8_B, fm.BFP4_B})
_MM_SRCB = _MM_SRCA | {fm.INT16}
_ELW_SRCA = _MM_SRCA | {fm.BFP2_B}
_ELW_SRCB = _ELW_SRCA | {fm.INT32, fm.INT16}
_MOV_8BIT = frozenset({fm.FP32, fm.TF32, fm.BF16, fm.BFP8_B, fm.BFP4_B, fm.INT32, fm.INT16, fm.BFP2_B})
_MOVD2A_FMTS = frozenset({fm.FP32, fm.FP16, fm.TF32, fm.BF16, fm.BFP8_B, fm.BFP4_B})


def tile_format_tables() -> tuple[tuple, tuple]:
    """Per Src format code, for tile_handlers.c: fpu_math.src19_mask, and which of MVMUL's / ELW*'s SrcA / SrcB lists
    admit it (bits 1, 2, 4, 8), 16 for a 5-bit-exponent format, 32 for one MOVA2D writes as Dst16b BF16."""
    lists = (_MM_SRCA, _MM_SRCB, _ELW_SRCA, _ELW_SRCB, fm.FMT_5BIT_EXP, _MOV_8BIT - {fm.TF32})
    return (tuple(fm.src19_mask(f) for f in range(16)),
            tuple(sum(1 << i for i, fmts in enumerate(lists) if f in fmts) for f in range(16)))
