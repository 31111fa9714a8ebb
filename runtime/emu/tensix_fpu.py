"""FPU (Matrix Unit) subset of the Tensix model: SrcA/SrcB banks and their ownership handshake, RWCs and address
modifiers, SETRWC/INCRWC/CLEARDVALID, ZEROACC (FP32 face/all modes) and ELWADD/ELWSUB into a 32-bit Dst.

Mixed into `tensix.Tensix`; every handler gets (thread, decoded fields) and returns None or a blocked reason.
Facts: fpu-path.md sections 6-8, unpack-sfpu-pack.md section 5, WH RWCs.md / SETRWC.md / INCRWC.md.
"""
from __future__ import annotations

import numpy as np

SRC_ROWS = 64
DST32_ROWS = 512
DST_RWC_MASK = 1023      # RWC.Dst is 10 bits
SRC_RWC_MASK = 63        # RWC.SrcA / SrcB are 6 bits

# Src bank formats with an 8-bit exponent that the FPU adds as BF16/TF32 (FP32, TF32, BF16, BFP8/4/2)
_FMT_8BIT_EXP = {0, 4, 5, 6, 7, 15}


def _src19(x: np.ndarray, fmt: int) -> np.ndarray:
    """Src datum (fp32 layout) -> the FPU's 19-bit view sign[18] exp[17:10] man[9:0]. Every 8-bit-exponent format
    except TF32 is read with BF16 precision (fpu-path.md 3: "every 8-bit-exponent format other than TF32 ... as
    BF16")."""
    x = x.astype(np.int64)
    if fmt != 4:
        x &= 0xFFFF0000
    return x >> 13


def _accum_normalize(sign_t, exp_t, man_t, dst):
    """Add one signed term (sign, 8-bit exponent, magnitude with the implicit bit at position 23 when normalised)
    to a Dst FP32 value and renormalise, as fpu-path.md 10.2 describes the FP32 Dst accumulator:
    align to the larger exponent (term: round half up, minus 1 if negative; Dst: half away from zero; shifts >= 31
    give 0), signed integer sum (0 -> +0), renormalise to 24 bits rounding half up, exponent <= 0 -> +0,
    >= 255 -> Inf. Exponent 0 in Dst counts as 0; exponent 255 (Inf/NaN) is just a large exponent."""
    dst = dst.astype(np.int64)
    sign_d = dst >> 31 & 1
    exp_d = dst >> 23 & 0xFF
    man_d = np.where(exp_d == 0, 0, (dst & 0x7FFFFF) | 0x800000)
    exp = np.maximum(exp_t, exp_d)

    def align(man, e, bias):
        diff = exp - e
        sh = np.clip(diff, 1, 31)
        shifted = np.where(diff < 31, (man + (np.int64(1) << (sh - 1)) - bias) >> sh, 0)
        return np.where(diff > 0, shifted, man)

    man_t = align(man_t, exp_t, sign_t)
    man_d = align(man_d, exp_d, 0)
    man = np.where(sign_t == sign_d, man_d + man_t, man_d - man_t)
    sign = np.where(man < 0, sign_d ^ 1, sign_d)
    man = np.abs(man)
    bitlen = np.frexp(man.astype(np.float64))[1].astype(np.int64)     # exact: man < 2**27
    shift = 24 - bitlen
    exp = exp - shift
    rs = np.clip(-shift, 1, 62)
    man = np.where(shift < 0, (man + (np.int64(1) << (rs - 1))) >> rs, man << np.clip(shift, 0, 62))
    exp = np.where(man & 0x1000000, exp + 1, exp)
    out = (sign << 31) | (exp << 23) | (man & 0x7FFFFF)
    out = np.where(exp >= 255, (sign << 31) | (0xFF << 23), out)
    out = np.where((exp <= 0) | (man == 0) | (np.maximum(exp_t, exp_d) <= 0), 0, out)
    return out.astype(np.uint32)


def elwadd_fp32(a19: np.ndarray, b19: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """ELWADD of 19-bit Src values into an FP32 Dst (dst = 0 when not accumulating), Fp32_enabled=1 and an 8-bit
    exponent. The two operands are aligned to the larger one on an 11-bit significand grid (round half up; 12 or more
    bits apart -> 0), added as integers, then accumulated/normalised like every FP32 Dst write."""
    a = np.where((a19 & 0x3FFFF) < 0x400, 0, a19)         # exponent 0: zero / denormal flushed
    b = np.where((b19 & 0x3FFFF) < 0x400, 0, b19)
    swap = (a & 0x3FFFF) < (b & 0x3FFFF)                  # make |a| >= |b|
    a, b = np.where(swap, b, a), np.where(swap, a, b)
    sign_a, sign_b = a >> 18 & 1, b >> 18 & 1
    exp_a, exp_b = a >> 10 & 0xFF, b >> 10 & 0xFF
    man_a = np.where(a != 0, (a & 0x3FF) | 0x400, 0)
    man_b = np.where(b != 0, (b & 0x3FF) | 0x400, 0)
    d = exp_a - exp_b
    sh = np.clip(d, 1, 11)
    man_b = np.where(d <= 0, man_b, np.where(d < 12, (man_b + (np.int64(1) << (sh - 1))) >> sh, 0))
    man = np.where(sign_a == sign_b, man_a + man_b, man_a - man_b) << 13
    return _accum_normalize(sign_a, exp_a, man, dst)


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
                    raise self.err(f"releasing SrcA bank {b} which is not valid (ttsim: math_clear_src_valid)")
                self.srca_valid[b] = False
            self.srca_matrix_bank ^= 1
        if which & 2:
            b = self.srcb_matrix_bank
            if not cfg7 & 2:
                if not self.srcb_valid[b]:
                    raise self.err(f"releasing SrcB bank {b} which is not valid (ttsim: math_clear_src_valid)")
                self.srcb_valid[b] = False
            self.srcb_matrix_bank ^= 1

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
        if f["reset"]:
            raise self.unimpl("CLEARDVALID reset != 0")
        self._release_banks(t, f["cleardvalid"])

    # ------------------------------------------------------------------------------------------------ ZEROACC
    def ZEROACC(self, t, f):
        mode = f["clear_mode"] | (f["use_32_bit_mode"] << 2)   # ttsim BH merges the two fields
        if f["clear_zero_flags"]:
            raise self.unimpl("ZEROACC clear_zero_flags=1")
        th = self.threads[t]
        rows32 = self.dst.rows32
        if mode == 5:    # one face of FP32 rows: 16*where .. +15 (RWC/offset not added, fpu-path 8.3)
            start = 16 * f["where"]
            base = (th.cfg[1] & 0xFFF) + th.rwc["d"]
            if not self.cfg[220] >> 3 & 1 and base & 0x300:
                start += 256      # upper Dst half unless zeroacc_absolute_tile_mode
            start &= DST32_ROWS - 1
            rows32[start:start + 16] = 0
            self.dst.written[start:start + 16] = True
            self.apply_addr_mod(t, f["addr_mode"])
        elif mode == 7 or mode == 3:   # all of Dst; no counter update
            if f["where"]:
                raise self.unimpl("ZEROACC clear-all with where != 0")
            rows32[:] = 0
            self.dst.written[:] = True
        else:
            raise self.unimpl(f"ZEROACC clear_mode={f['clear_mode']} use_32_bit_mode={f['use_32_bit_mode']}")

    # ------------------------------------------------------------------------------------------------ ELWADD/SUB
    def _elw_add_sub(self, t, f, name, negate_b):
        why = self._banks_ready(name)
        if why is not None:
            return why
        if not self.cfg[1] >> 29 & 1:
            # 16-bit Dst rows would be written (pf12); the 16-bit Dst view is not modelled
            raise self.unimpl(f"{name} with ALU_ACC_CTRL_Fp32_enabled=0 (16-bit Dst)")
        if self.cfg[1] >> 31 & 1:
            raise self.unimpl(f"{name} with ALU_ACC_CTRL_INT8_math_enabled=1")
        if self.cfg[0] & 1 << 4:
            raise self.unimpl(f"{name} with ALU_FORMAT_SPEC_REG_SrcA_override=1")
        if self.cfg[2] & 1:
            raise self.unimpl(f"{name} with ALU_ACC_CTRL_Zero_Flag_disabled_src=1 (SrcB denormals not flushed)")
        th = self.threads[t]
        r = th.rwc
        fa = self.srca_format[self.srca_matrix_bank] if not th.cfg[2] & 1 else self.cfg[1] >> 17 & 0xF
        fb = self.srcb_format[self.srcb_matrix_bank] if not th.cfg[3] & 1 else self.cfg[1] >> 21 & 0xF
        if fa not in _FMT_8BIT_EXP or fb not in _FMT_8BIT_EXP:
            raise self.unimpl(f"{name} with Src formats SrcA={fa} SrcB={fb} (only 8-bit-exponent formats)")
        if (r["fid"] + th.cfg[11]) & 3:
            raise self.err(f"{name} with fidelity phase {(r['fid'] + th.cfg[11]) & 3} != 0 (ttsim: NonContractual)")
        mod = f["instr_mod19"]
        ra, rb = r["a"], r["b"]
        rd = (th.cfg[1] & 0xFFF) + r["d"] + f["dst"]
        if ra % 8 or rb % 8 or rd % 8:
            raise self.unimpl(f"{name} with rows SrcA={ra} SrcB={rb} Dst={rd} not multiples of 8")
        if rd + 8 > DST32_ROWS:
            raise self.err(f"{name} Dst32b rows {rd}..{rd + 7} beyond row 511")
        a = self.srca[self.srca_matrix_bank, ra:ra + 8]
        b = self.srcb[self.srcb_matrix_bank, rb:rb + 8]
        if mod & 2:      # broadcast SrcB row 0 to all rows
            b = np.broadcast_to(b[0:1], (8, 16))
        if mod & 1:      # broadcast SrcB column 0 to all columns
            b = np.broadcast_to(b[:, 0:1], (8, 16))
        a19, b19 = _src19(a, fa), _src19(b, fb)
        if negate_b:
            b19 = b19 ^ (1 << 18)
        old = self.dst.rows32[rd:rd + 8] if f["dest_accum_en"] else np.zeros((8, 16), np.uint32)
        self.dst.rows32[rd:rd + 8] = elwadd_fp32(a19, b19, old)
        self.dst.written[rd:rd + 8] = True
        self.apply_addr_mod(t, f["addr_mode"])
        if f["clear_dvalid"]:
            self._release_banks(t, f["clear_dvalid"])

    def ELWADD(self, t, f):
        return self._elw_add_sub(t, f, "ELWADD", False)

    def ELWSUB(self, t, f):
        return self._elw_add_sub(t, f, "ELWSUB", True)
