"""Matrix Unit instructions without a ttsim oracle (ttsim refuses them): DOTPV, GAPOOL's row masks, GMPOOL with ArgMax,
SrcB scaling, FP16/INT8 styles and 16-bit Dst, SHIFTXB. Each runs as instruction words (templates/isa/tensix_isa.json)
through the Tensix model and is compared with an independent computation of the WH ISA pages' functional models
(DOTPV.md, GAPOOL.md, MVMUL.md, GMPOOL.md, SHIFTXB.md): exact float64 arithmetic where the numerics are exact, a
literal scalar transcription of the page's pseudo-code for GMPOOL, numpy row moves for SHIFTXB."""
from __future__ import annotations

import zlib

import numpy as np
import pytest

from tt_backend.chip.numerics import dst as dst_mod
from tt_backend.chip.numerics import fpu_math as fm
from tt_backend.runtime.emu.tensix import Tensix
from tt_backend.chip.errors import EmuUnimplemented
from tt_backend.chip.isa import encode

BF16_CFG1 = 0x20AA0000          # SrcA/SrcB BF16, FP32 Dst (Fp32_enabled)


def make(cfg1=BF16_CFG1):
    tx = Tensix(np.zeros(1536 * 1024, np.uint8))
    tx.cfg[1] = cfg1
    return tx


def load_banks(tx, a, b, fmt=5, bank=0, valid=True):
    tx.srca[bank, :len(a)] = a
    tx.srcb[bank, :len(b)] = b
    tx.srca_valid[bank] = tx.srcb_valid[bank] = valid
    tx.srca_format[bank] = tx.srcb_format[bank] = fmt


def f32(x):
    return np.asarray(x, np.float32).view(np.uint32)


def val(bits):
    return np.asarray(bits, np.uint32).view(np.float32).astype(np.float64)


def bf16_unit(rng, shape, signed=True):
    """bf16 Src words with values in +-[1, 2): all products share one exponent, so MVMUL's group alignment is exact."""
    w = f32(rng.uniform(1, 2, shape)) & 0xFFFF0000
    if signed:
        w |= rng.integers(0, 2, shape).astype(np.uint32) << 31
    return w.astype(np.uint32)


def wide_words(rng, shape, fmt):
    """Src words of a format with exponents over a wide range plus zeros/denormals, as the unpacker leaves them."""
    n = int(np.prod(shape))
    if fmt == fm.FP16:
        h = rng.integers(0, 1 << 16, n).astype(np.uint32)
        h = np.where((h >> 10 & 0x1F) == 0x1F, h & ~np.uint32(0x4000), h)     # no Inf/NaN encodings
        return fm.fp16_to_dst32(h).reshape(shape)
    sign = rng.integers(0, 2, n).astype(np.uint32) << 31
    exp = rng.integers(100, 150, n).astype(np.uint32)
    exp = np.where(rng.random(n) < 0.05, 0, exp).astype(np.uint32)
    man = rng.integers(0, 1 << 23, n).astype(np.uint32) & (0x7FE000 if fmt == fm.TF32 else 0x7F0000)
    return (sign | exp << 23 | man).reshape(shape).astype(np.uint32)


def int8_words(rng, shape):
    v = rng.integers(-1023, 1024, shape)
    w = ((v < 0).astype(np.int64) << 31) | (16 << 23) | (np.abs(v) << 13)
    return np.where(rng.random(shape) < 0.05, 0, w).astype(np.uint32)


def set_addr_mod(tx, t, slot, a=0, b=0, d=0, fid=0):
    """ADDR_MOD_AB_SEC<slot> / ADDR_MOD_DST_SEC<slot>: plain increments (SrcA, SrcB, Dst, fidelity phase)."""
    tx.threads[t].cfg[12 + slot] = a | b << 8
    tx.threads[t].cfg[28 + slot] = d | fid << 13


# ------------------------------------------------------------------------------------------- encodings
def test_bh_encodings_follow_the_table():
    """DOTPV sits where BH puts MVMUL/ELWMUL's fields (addr_mode [16:14]); SHIFTXB: ShiftInZero [10], SrcRow [5:0]."""
    assert encode("DOTPV", clear_dvalid=3, addr_mode=5, dst=8) ^ encode("MVMUL", clear_dvalid=3, addr_mode=5, dst=8) \
        == (0x29 ^ 0x26) << 24
    assert encode("DOTPV", clear_dvalid=2, addr_mode=7, dst=0x3F8) == 0x2981C3F8
    assert encode("SHIFTXB", addr_mode=3, rot_shift=1, shift_row=63) == 0x1800C43F
    with pytest.raises(ValueError):
        encode("SHIFTXB", shift_row=64)                         # SrcRow is u6 on the page


# ------------------------------------------------------------------------------------------- DOTPV
def _run_pair(cfg1, fmt, a, b, dst0, words_fields, phase_base=0, rwc=(0, 0, 0)):
    """The same field values as MVMUL words on one Tensix and DOTPV words on another; returns both."""
    out = []
    for name in ("MVMUL", "DOTPV"):
        tx = make(cfg1)
        load_banks(tx, a, b, fmt)
        tx.dst.write_rows32(0, dst0)
        set_addr_mod(tx, 1, 1, d=8, fid=1)                      # slot 1: next Dst block, next phase
        set_addr_mod(tx, 1, 2, b=8, d=8)                        # slot 2: next SrcB block and Dst block
        tx.threads[1].cfg[11] = phase_base
        tx.threads[1].rwc.update(a=rwc[0], a_cr=rwc[0], b=rwc[1], b_cr=rwc[1], d=rwc[2], d_cr=rwc[2])
        for f in words_fields:
            tx.push(1, encode(name, **f))
        out.append(tx)
    return out


@pytest.mark.parametrize("kind", ["bf16", "tf32", "fp16", "bf16_dst16", "fp16_dst16", "int8"])
def test_dotpv_is_mvmul_without_broadcast(kind):
    """DOTPV.md: 'identical to MVMUL' (BroadcastSrcBRow = false). MVMUL's numerics are verified against ttsim, so DOTPV
    must give the same Dst bits, counters and bank state word for word, in every fidelity phase and format."""
    rng = np.random.default_rng(zlib.crc32(kind.encode()))
    fmt, cfg1 = {"bf16": (fm.BF16, 0x20AA0000), "tf32": (fm.TF32, 0x20880000), "fp16": (fm.FP16, 0x20220000),
                 "bf16_dst16": (fm.BF16, 0x0AAA0000), "fp16_dst16": (fm.FP16, 0x02220000),
                 "int8": (fm.INT8, 0xB1DC0000)}[kind]
    if fmt == fm.INT8:
        a, b = int8_words(rng, (64, 16)), int8_words(rng, (64, 16))
    else:
        a, b = wide_words(rng, (64, 16), fmt), wide_words(rng, (64, 16), fmt)
    dst0 = np.zeros((64, 16), np.uint32) if kind.endswith("dst16") else wide_words(rng, (64, 16), fm.BF16)
    if fmt == fm.INT8:
        dst0 = (rng.integers(0, 1 << 20, (64, 16)) | (rng.integers(0, 2, (64, 16)) << 31)).astype(np.uint32)
    fields = [dict(addr_mode=1, dst=0), dict(addr_mode=1, dst=0), dict(addr_mode=2, dst=8),
              dict(addr_mode=1, dst=16), dict(clear_dvalid=3, addr_mode=0, dst=24)]
    mv, dp = _run_pair(cfg1, fmt, a, b, dst0, fields, phase_base=1)
    assert np.array_equal(mv.dst.rows32, dp.dst.rows32)
    assert mv.threads[1].rwc == dp.threads[1].rwc
    assert dp.srca_valid == [False, False] and dp.srcb_matrix_bank == 1 and dp.thread_idle(1)
    assert not np.array_equal(dp.dst.rows32, dst0)


def _closed_forms(a, b):
    """docs/fpu_path.md §10 per-fidelity closed forms of SrcB @ SrcA for bf16 data with one exponent (exact in float64)."""
    av, bv = val(a), val(b)
    a5, b7 = val(a & 0xFFF80000), val(b & 0xFFFE0000)
    return {1: b7 @ a5, 2: b7 @ av, 3: b7 @ av + (bv - b7) @ a5, 4: bv @ av}


@pytest.mark.parametrize("n_phases", [1, 2, 3, 4])
def test_dotpv_fidelity_phases_exact(n_phases):
    """DOTPV run once per fidelity phase (the RWC phase counter stepped by the address modifier, as for MVMUL): with
    +-[1, 2) bf16 inputs every phase is exact, so Dst = the closed form (LoFi B7@A5 ... HiFi4 B@A) in float64."""
    rng = np.random.default_rng(20 + n_phases)
    a, b = bf16_unit(rng, (16, 16)), bf16_unit(rng, (8, 16))
    tx = make()
    load_banks(tx, a, b)
    tx.push(1, encode("ZEROACC", clear_mode=3))
    set_addr_mode = 3
    set_addr_mod(tx, 1, set_addr_mode, fid=1)
    for p in range(n_phases):
        tx.push(1, encode("DOTPV", dst=16, addr_mode=set_addr_mode, clear_dvalid=3 if p == n_phases - 1 else 0))
    assert np.array_equal(val(tx.dst.rows32[16:24]), _closed_forms(a, b)[n_phases])
    assert tx.threads[1].rwc["fid"] == n_phases & 3 and tx.srca_matrix_bank == 1


def test_dotpv_rows_follow_the_page_masks():
    """MVMUL.md's model: SrcARow = RWC.SrcA & 0x38 (16 rows from there, so RWC.SrcA = 13 reads rows 8..23, which ttsim
    refuses for MVMUL), SrcBRow = RWC.SrcB & 0x38, DstRow = (field + MATH_Offset + RWC.Dst + DEST_REGW_BASE) & 0x3F8."""
    rng = np.random.default_rng(30)
    a, b = bf16_unit(rng, (64, 16)), bf16_unit(rng, (64, 16))
    tx = make()
    load_banks(tx, a, b)
    tx.push(1, encode("ZEROACC", clear_mode=3))
    tx.threads[1].rwc.update(a=13, b=21, d=2)
    tx.threads[1].cfg[1] = 32                                   # DEST_TARGET_REG_CFG_MATH_Offset
    tx.cfg[6] = 64                                              # DEST_REGW_BASE_Base
    tx.threads[1].cfg[11] = 3                                   # HiFi4's last phase only
    tx.push(1, encode("DOTPV", dst=5))                          # 5 + 32 + 2 + 64 = 103 -> 96
    a_lo = val(a[8:24]) - val(a[8:24] & 0xFFF80000)            # SrcA significand bits 5..1 (phase bit 0 set)
    b_lo = val(b[16:24]) - val(b[16:24] & 0xFFFE0000)          # SrcB significand bits 3..0 (phase bit 1 set)
    want = b_lo @ a_lo
    assert np.array_equal(val(tx.dst.rows32[96:104]), want)     # phase 3: SrcA low 5 bits x SrcB low 4 bits
    assert not tx.dst.rows32[:96].any() and not tx.dst.rows32[104:].any()


def test_dotpv_waits_for_both_banks_and_honours_clr_dvalid_disable():
    tx = make()
    tx.push(1, encode("DOTPV", clear_dvalid=3))
    assert "SrcA bank 0 not valid" in tx.blocked_reason(1)
    rng = np.random.default_rng(31)
    tx.srca[0, :16] = bf16_unit(rng, (16, 16))
    tx.srca_valid[0] = True
    tx.srca_format[0] = tx.srcb_format[0] = fm.BF16
    tx.step()
    assert "SrcB bank 0 not valid" in tx.blocked_reason(1)
    tx.threads[1].cfg[7] = 1                                    # CLR_DVALID_SrcA_Disable: flip without releasing
    tx.srcb[0, :8] = bf16_unit(rng, (8, 16))
    tx.srcb_valid[0] = True
    tx.step()
    assert tx.thread_idle(1)
    assert tx.srca_valid == [True, False] and tx.srcb_valid == [False, False]
    assert tx.srca_matrix_bank == tx.srcb_matrix_bank == 1


# ------------------------------------------------------------------------------------------- GAPOOL
def test_gapool_is_four_rows_of_dotpv():
    """GAPOOL.md: MVMUL's model with NumRows = 4 (the top half of the aligned 8-row SrcB block)."""
    rng = np.random.default_rng(40)
    a, b = wide_words(rng, (64, 16), fm.BF16), wide_words(rng, (64, 16), fm.BF16)
    res = []
    for name, fields in (("GAPOOL", dict(instr_mod19=1, pool_addr_mode=0)), ("DOTPV", {})):
        tx = make()
        load_banks(tx, a, b)
        tx.push(1, encode("ZEROACC", clear_mode=3))
        tx.threads[1].rwc.update(b=16)
        for p in range(4):
            tx.threads[1].rwc["fid"] = p
            tx.push(1, encode(name, dst=32, **fields))
        res.append(tx.dst.rows32.copy())
    assert np.array_equal(res[0][32:36], res[1][32:36]) and not res[0][36:40].any()


def test_gapool_unaligned_rows_are_masked():
    """Rows ttsim refuses (dst & 3, RWC.SrcA = 8, RWC.SrcB not a multiple of 8) are defined by the page's masks:
    SrcA rows 8..23, SrcB rows (RWC.SrcB & 0x38)..+3, Dst rows (DstRow & 0x3FC)..+3; HiFi4 on +-[1, 2) is exact."""
    rng = np.random.default_rng(41)
    a, b = bf16_unit(rng, (64, 16)), bf16_unit(rng, (64, 16))
    tx = make()
    load_banks(tx, a, b)
    tx.push(1, encode("ZEROACC", clear_mode=3))
    set_addr_mod(tx, 1, 6, fid=1)
    tx.threads[1].rwc.update(a=8, b=43)
    for p in range(4):
        tx.push(1, encode("GAPOOL", dst=22, instr_mod19=1, pool_addr_mode=6))
    assert np.array_equal(val(tx.dst.rows32[20:24]), val(b[40:44]) @ val(a[8:24]))
    assert not tx.dst.rows32[:20].any() and not tx.dst.rows32[24:].any()


# ------------------------------------------------------------------------------------------- GMPOOL
# A literal transcription of GMPOOL.md's functional model, one datum at a time (plain Python ints), on the page's own
# representations: Src as Sign[18] Man[17:8] Exp[7:0], Dst as storage bits (Sign, Man hi, Exp, Man lo).
def _doc19(w):
    w = int(w)
    return ((w >> 31) << 18) | (((w >> 13) & 0x3FF) << 8) | ((w >> 23) & 0xFF)


def _to_storage(plain):
    plain = int(plain)
    hi = plain >> 16
    return (((hi & 0x8000) | ((hi & 0x7F) << 8) | ((hi >> 7) & 0xFF)) << 16) | (plain & 0xFFFF)


def _read_and_scale(a, style, b):
    ae, be = a & 0xFF, b & 0xFF
    if be == 0:
        return 1, 0x1FF, 0x3FF
    if ae == 0:
        return 0, 0, 0
    m = (a >> 8) & 0x3FF
    if style == "INT8":
        return a >> 18, 0, m
    if style == "FP16":
        return a >> 18, (ae & 0x1F) + (be & 0x1F), m
    return a >> 18, ae + be, m if style == "TF32" else m & 0x3F8


def _read_dst(v, style):
    s = v >> 31
    if style == "INT32":
        return s, ((v >> 10) & 0x3F) + (((v >> 24) & 7) << 6), v & 0x3FF
    if style == "FP16":
        return s, ((v >> 16) & 0x1F) + 15, (v >> 21) & 0x3FF
    m = ((v >> 24) & 0x7F) << 3
    if style == "TF32":
        m += (v >> 13) & 7
    return s, ((v >> 16) & 0xFF) + 127, m


def _write_dst(d, style):
    s, e, m = d
    if style == "INT32":
        return (s << 31) | ((e & 7) << 10) | m
    if style == "FP16":
        return 0 if (e & 0x3F) == 0 else (s << 31) | (m << 21) | (((e - 15) & 0x1F) << 16)
    if e == 0:
        return 0
    x = (s << 31) | ((m & 0x3F8) << 21) | (((e - 127) & 0xFF) << 16)
    return x + ((m & 7) << 13) if style == "TF32" else x


def _cmp(d):
    return (-1 if d[0] else 1) * ((d[1] << 10) + d[2])


def doc_gmpool(A, Brow, dst_rows, sstyle, dstyle, argmax, use32):
    """A: 16x16 Src words, Brow: 16 Src words, dst_rows: 4x16 storage values as the instruction reads them (Dst16b
    values already shifted left by 16). Returns the 4x16 block after the instruction (same representation)."""
    out = [[0] * 16 for _ in range(4)]
    for j in range(16):
        dv = dst_rows[0][j]
        mx = _read_dst(dv, dstyle)
        idx = dv & 0xFF
        phase = (dv + 0x100) & 0xF00
        for i_ in range(16):
            i = (i_ ^ 4) if i_ < 8 else i_
            x = _read_and_scale(_doc19(A[i][j]), sstyle, _doc19(Brow[i]))
            if _cmp(x) >= _cmp(mx):
                mx = x
                if i < 8:
                    idx = ((phase >> 4) + (0, 3, 6, 1, 4, 7, 2, 5)[i]) & 0xFF
        if argmax:
            res = phase | idx
            dv = res if dstyle == "INT32" else _write_dst(mx, dstyle) | res
        else:
            dv = _write_dst(mx, dstyle)
        out[0][j] = dv & 0xFFFFFFFF
        for r in range(1, 4):
            if use32:
                out[r][j] = ((dst_rows[r][j] + 0x100) & 0xF00) if argmax else 0
            else:
                out[r][j] = 0
        if not use32:
            out[0][j] &= 0xFFFF0000
    return out


GM_CASES = {   # name: (SrcA format, cfg1, SrcA style, Dst style (no ArgMax), Dst style (ArgMax), UseDst32b)
    "bf16_fp32dst": (fm.BF16, 0x20AA0000, "BF16", "TF32", "BF16", True),
    "bf16_dst16": (fm.BF16, 0x0AAA0000, "BF16", "BF16", "BF16", False),
    "tf32_fp32dst": (fm.TF32, 0x20880000, "TF32", "TF32", "INT32", True),
    "tf32_dst16": (fm.TF32, 0x0A880000, "TF32", "BF16", "INT32", False),
    "fp16_fp32dst": (fm.FP16, 0x20220000, "FP16", "TF32", "FP16", True),
    "fp16_dst16": (fm.FP16, 0x02220000, "FP16", "FP16", "FP16", False),
    "int8": (fm.INT8, 0xB1DC0000, "INT8", "INT32", "INT32", True),
}


@pytest.mark.parametrize("case,argmax", [(c, am) for c in GM_CASES for am in (0, 1)
                                          if not (c == "fp16_fp32dst" and not am)])   # refused, see below
def test_gmpool_matches_the_page_model(case, argmax):
    """Random SrcA (zeros, denormals, every sign), random SrcB scale rows (incl. exponent 0: that row is ignored),
    random or undefined Dst rows; SrcA block and SrcB row picked through masked RWCs; Dst row through the masks."""
    fmt, cfg1, sstyle, dstyle, dstyle_am, use32 = GM_CASES[case]
    rng = np.random.default_rng(zlib.crc32(f"{case}{argmax}".encode()))
    gen = int8_words if fmt == fm.INT8 else (lambda r, s: wide_words(r, s, fmt))
    for trial in range(8):
        tx = make(cfg1)
        a, b = gen(rng, (64, 16)), wide_words(rng, (64, 16), fm.BF16 if fmt == fm.INT8 else fmt)
        if trial % 2:                                  # mostly-unit scales: exercises the max, not only the exponents
            b = np.where(rng.random((64, 16)) < 0.8, (fm.fp16_to_dst32(0x3C00) if fmt == fm.FP16 else
                                                      f32(1.0)), b).astype(np.uint32)
        if trial in (2, 5):                            # few distinct values: ties decide the ArgMax index
            a = rng.choice(a.ravel()[:3], a.shape).astype(np.uint32)
        load_banks(tx, a, b, fmt)
        tx.threads[1].rwc.update(a=int(rng.integers(0, 64)), b=int(rng.integers(0, 64)), d=int(rng.integers(0, 8)))
        tx.threads[1].cfg[1] = 8 * int(rng.integers(0, 4))
        ra, rb = tx.threads[1].rwc["a"] & 0x30, tx.threads[1].rwc["b"] & 0x38
        field = int(rng.integers(0, 64))
        rd = (field + tx.threads[1].cfg[1] + tx.threads[1].rwc["d"]) & 0x3FC
        if use32:
            d0 = gen(rng, (512, 16)) if fmt == fm.INT8 else wide_words(rng, (512, 16), fm.TF32)
            tx.dst.write_rows32(0, np.where(rng.random((512, 16)) < 0.1, 0x80000000, d0))   # some -0 / sign-only
            if trial >= 3:
                tx.push(1, encode("ZEROACC", clear_mode=3))
            und = tx.dst.undefined32(np.arange(rd, rd + 4))
            before = [[0xFFFFFFFF if und[r] else _to_storage(tx.dst.rows32[rd + r, j]) for j in range(16)]
                      for r in range(4)]
        else:
            rows = np.repeat(np.arange(rd, rd + 4)[:, None], 16, 1)
            cols = np.repeat(np.arange(16)[None, :], 4, 0)
            tx.dst.write16(rows, cols, rng.integers(0, 1 << 16, (4, 16)).astype(np.uint32))
            if trial >= 3:
                tx.push(1, encode("ZEROACC", clear_mode=3))
            und = tx.dst.undefined16(rows[:, 0])
            before = [[(0xFFFF if und[r] else int(tx.dst.read16(rows[r, j:j + 1], cols[r, j:j + 1])[0])) << 16
                       for j in range(16)] for r in range(4)]
        want = doc_gmpool(a[ra:ra + 16], b[rb], before, sstyle, dstyle_am if argmax else dstyle, argmax, use32)
        tx.push(1, encode("GMPOOL", dst=field, instr_mod19=1, max_pool_index_en=argmax, pool_addr_mode=0))
        if use32:
            got = [[_to_storage(tx.dst.rows32[rd + r, j]) for j in range(16)] for r in range(4)]
        else:
            got = [[int(tx.dst.read16(rows[r, j:j + 1], cols[r, j:j + 1])[0]) << 16 for j in range(16)]
                   for r in range(4)]
        assert got == want, (case, argmax, trial)


def test_gmpool_scaled_max_numeric():
    """The page's summary in numbers: Dst row = max_i SrcA[i][j] * 2^floor(log2 |SrcB[0][i]|) over the 16 rows (bf16
    data, FP32 Dst read as TF32, undefined Dst = -inf); the other three rows of the block are 0."""
    rng = np.random.default_rng(50)
    a = (f32(rng.uniform(-4, 4, (16, 16))) & 0xFFFF0000).astype(np.uint32)
    b = np.zeros((8, 16), np.uint32)
    b[0] = f32(rng.choice([-1, 1], 16) * 2.0 ** rng.integers(-6, 7, 16) * rng.uniform(1, 2, 16))
    tx = make()
    load_banks(tx, a, b)
    tx.dst.write_rows32(0, np.full((16, 16), f32(7.0)))
    tx.push(1, encode("ZEROACC", clear_mode=1, use_32_bit_mode=1, where=0))
    tx.push(1, encode("GMPOOL", dst=8, instr_mod19=1))
    scale = 2.0 ** np.floor(np.log2(np.abs(val(b[0]))))
    want = (val(a) * scale[:, None]).max(axis=0)
    assert np.array_equal(val(tx.dst.rows32[8]), want) and not tx.dst.rows32[9:12].any()


def test_gmpool_zero_scale_rows_are_ignored():
    """SrcB datum with exponent 0: that SrcA row reads as -inf (ReadAndScaleSrc), i.e. takes no part in the max."""
    a = np.tile(f32(np.arange(16, dtype=np.float32) + 1)[:, None], (1, 16)).astype(np.uint32)   # row i = i + 1
    b = np.zeros((8, 16), np.uint32)
    b[0] = f32(1.0)
    b[0, 15] = b[0, 14] = 0                                     # rows 14, 15 (the largest) ignored
    tx = make()
    load_banks(tx, a & 0xFFFF0000, b)
    tx.push(1, encode("ZEROACC", clear_mode=3))
    tx.push(1, encode("GMPOOL", dst=0, instr_mod19=1))
    assert np.all(val(tx.dst.rows32[0]) == 14.0)


def test_gmpool_argmax_index_and_phase():
    """ArgMax with BF16 data and a 32-bit Dst: high half = bf16 max of all 16 rows; low 12 bits = index phase | (phase
    >> 4) + T[argmax over rows 0..7] (T = 0, 3, 6, 1, 4, 7, 2, 5) while a row 0..7 value reaches the running max.
    A second GMPOOL on the same Dst row advances the index phase by 0x100, so the block that won is recoverable."""
    rng = np.random.default_rng(51)
    t = np.array([0, 3, 6, 1, 4, 7, 2, 5])
    tx = make()
    b = np.full((8, 16), f32(1.0), np.uint32)
    vals1 = np.stack([rng.permutation(16) for _ in range(16)], axis=1).astype(np.float32) - 8   # distinct per column
    vals2 = np.stack([rng.permutation(16) for _ in range(16)], axis=1).astype(np.float32) - 8
    vals2 += rng.choice([-4.0, 0.5, 4.0], 16)[None, :]                                     # some columns win
    load_banks(tx, np.vstack([f32(vals1), f32(vals2)]) & 0xFFFF0000, b)
    tx.push(1, encode("ZEROACC", clear_mode=3))
    tx.dst.write_rows32(1, np.full((3, 16), 0x12345E77, np.uint32))                       # garbage rows' input
    set_addr_mod(tx, 1, 4, a=16)
    tx.push(1, encode("GMPOOL", dst=0, instr_mod19=1, max_pool_index_en=1, pool_addr_mode=4))
    r = tx.dst.rows32[0].astype(np.int64)
    assert np.array_equal(val(r & 0xFFFF0000), vals1.max(axis=0))
    assert np.array_equal(r & 0xFFFF, t[vals1[:8].argmax(axis=0)])                         # phase (-1 + 0x100) = 0
    assert np.all(tx.dst.rows32[1:4] == 0xF00)                                            # (0x5E77 + 0x100) & 0xF00
    tx.push(1, encode("GMPOOL", dst=0, instr_mod19=1, max_pool_index_en=1))              # block 2 on top
    r2 = tx.dst.rows32[0].astype(np.int64)
    assert np.array_equal(val(r2 & 0xFFFF0000), np.maximum(vals1.max(axis=0), vals2.max(axis=0)))
    won = vals2[:8].max(axis=0) >= vals1.max(axis=0)
    want_idx = np.where(won, 0x100 | (0x10 + t[vals2[:8].argmax(axis=0)]), 0x100 | (r & 0xFF))
    assert np.array_equal(r2 & 0xFFF, want_idx) and won.any() and not won.all()
    assert np.all(tx.dst.rows32[1:4] == 0)                                                # (0xF00 + 0x100) & 0xF00


def test_gmpool_argmax_tf32_is_index_only_and_ties_follow_visit_order():
    """TF32 + ArgMax: DstStyle INT32, the row holds only the index. All-equal columns: rows are visited 4..7, 0..3 and
    `>=` keeps the last, so the index is T[3] = 1. The running max starts from Dst read as INT32 (the index, a tiny
    positive number): a column whose rows 0..7 are negative keeps Dst's index byte even if row 12 is the max."""
    a = np.full((16, 16), f32(2.0), np.uint32)
    a[:, 1] = f32(-1.0)
    a[12, 1] = f32(5.0)
    tx = make(0x20880000)
    load_banks(tx, a, np.full((8, 16), f32(1.0), np.uint32), fm.TF32)
    tx.dst.write_rows32(0, np.full((4, 16), 0x000002A5, np.uint32))       # INT32 value with index byte 0xA5
    tx.push(1, encode("GMPOOL", dst=0, instr_mod19=1, max_pool_index_en=1))
    row = tx.dst.rows32[0]
    assert row[0] == 0x300 | (0x30 + 1)                                   # phase 0x300: (0x2A5 + 0x100) & 0xF00
    assert row[1] == 0x300 | 0xA5 and np.all(row[2:] == row[0])


def test_gmpool_fp16a_force_and_unknown_formats():
    """FP16A_FORCE_Enable (thread cfg 55) makes the page use FP16 styles and a 16-bit Dst whatever the formats; a SrcA
    format code in none of the page's lists is refused."""
    h = fm.fp16_to_dst32(np.arange(16, dtype=np.uint32) + 0x3C00)         # 1.0 .. 1.0146 (FP16)
    a = np.tile(h[:, None], (1, 16)).astype(np.uint32)
    tx = make()
    load_banks(tx, a, np.full((8, 16), fm.fp16_to_dst32(0x3C00), np.uint32), fm.BF16)
    tx.threads[1].cfg[55] = 1
    tx.push(1, encode("ZEROACC", clear_mode=3))
    tx.push(1, encode("GMPOOL", dst=0, instr_mod19=1))
    got = dst_mod.decode_fp16(tx.dst.read16(np.zeros(16, int), np.arange(16)))
    assert np.all(got == 0x3C0F)
    tx2 = make()
    load_banks(tx2, a, a, 12)
    with pytest.raises(EmuUnimplemented, match="format 12"):
        tx2.push(1, encode("GMPOOL", instr_mod19=1))


def test_gmpool_fp16_into_fp32_refused():
    """GMPOOL.md's table allows FP16 SrcA with a TF32 Dst row, but its model writes FP16-biased exponents with the TF32
    bias removed (a wrapped exponent for every input): self-contradictory, so EmuUnimplemented."""
    tx = make(0x20220000)
    h = np.full((64, 16), fm.fp16_to_dst32(0x3C00), np.uint32)
    load_banks(tx, h, h, fm.FP16)
    with pytest.raises(EmuUnimplemented, match="FP16-style SrcA into a 32-bit Dst"):
        tx.push(1, encode("GMPOOL", instr_mod19=1))
    tx = make(0x20220000)
    load_banks(tx, h, h, fm.FP16)
    tx.push(1, encode("ZEROACC", clear_mode=3))
    tx.push(1, encode("GMPOOL", instr_mod19=1, max_pool_index_en=1))   # FP16 high half + index: consistent
    stored = int(fm.dst_to_storage(tx.dst.rows32[0, 0]))                  # Dst.md storage bits of the row
    assert stored >> 16 == int(dst_mod.encode_fp16(0x3C00)) and stored & 0xFFF == 1   # 1.0; index T[3] = 1


# ------------------------------------------------------------------------------------------- SHIFTXB
@pytest.mark.parametrize("zero", [0, 1])
def test_shiftxb_rotates_or_shifts_one_row(zero):
    """SHIFTXB.md: row (SrcRow + RWC.SrcB) & 0x3F of the FPU's SrcB bank moves one column left; column 15 gets the old
    column 0 (rotate) or 0; then the address modifier. Waits for SrcB only and releases nothing."""
    rng = np.random.default_rng(60 + zero)
    b = rng.integers(1, 1 << 19, (64, 16)).astype(np.uint32) << 13
    tx = make()
    tx.srcb[1] = b
    tx.srcb_matrix_bank = 1
    tx.push(1, encode("SHIFTXB", shift_row=62, rot_shift=zero, addr_mode=2))
    assert "SrcB bank 1 not valid" in tx.blocked_reason(1)
    set_addr_mod(tx, 1, 2, b=3)
    tx.threads[1].rwc.update(b=3)
    tx.srcb_valid[1] = True
    tx.step()
    want = b.copy()
    want[1] = np.roll(b[1], -1)
    if zero:
        want[1, 15] = 0
    assert np.array_equal(tx.srcb[1], want) and not tx.srcb[0].any()
    assert tx.threads[1].rwc["b"] == 6 and tx.srcb_valid[1] and tx.srcb_matrix_bank == 1
    for _ in range(15):                                         # the cross-lane pattern composed 16 times
        tx.push(1, encode("SHIFTXB", shift_row=59, rot_shift=zero))
    assert np.array_equal(tx.srcb[1, 1], np.zeros(16) if zero else b[1])


# ------------------------------------------------------------------------------------------- refusals
@pytest.mark.parametrize("word,what", [
    (encode("GMPOOL", instr_mod19=0), "GMPOOL instr_mod19=0"),
    (encode("GAPOOL", instr_mod19=0), "GAPOOL max_pool_index_en=0 instr_mod19=0"),
    (encode("GAPOOL", instr_mod19=1, max_pool_index_en=1), "GAPOOL max_pool_index_en=1"),
    (encode("DOTPV", dest_accum_en=1), "DOTPV dest_accum_en=1"),
    (encode("DOTPV", instr_mod19=2), "instr_mod19=2")])
def test_undocumented_modes_stay_unimplemented(word, what):
    tx = make()
    load_banks(tx, np.zeros((64, 16), np.uint32), np.zeros((64, 16), np.uint32))
    with pytest.raises(EmuUnimplemented, match=what):
        tx.push(1, word)


def test_dotpv_srca_rows_past_63_unimplemented():
    tx = make()
    load_banks(tx, np.zeros((64, 16), np.uint32), np.zeros((64, 16), np.uint32))
    tx.threads[1].rwc["a"] = 56
    with pytest.raises(EmuUnimplemented, match="past SrcA row 63"):
        tx.push(1, encode("DOTPV"))
