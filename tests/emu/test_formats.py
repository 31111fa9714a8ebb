"""Unit tests of chip/numerics/formats.py (hand-computed bit patterns from the docs and docs/sfpu_path.md §8) and of
the unpacker/packer format paths of the Tensix model without ttsim."""
from __future__ import annotations

import numpy as np
import pytest

from tt_backend.chip.numerics import formats as F
from tt_backend.runtime.emu.tensix import Tensix
from tt_backend.chip.errors import EmuError, EmuUnimplemented

U = lambda *v: np.array(v, dtype=np.uint32)  # noqa: E731


def hexes(a):
    return [hex(int(x)) for x in np.asarray(a).reshape(-1)]


# ------------------------------------------------------------------------------------------------ element sizes
def test_element_bits():
    assert [F.element_bits(f) for f in (F.FP32, F.TF32, F.INT32, F.FP16, F.BF16, F.INT16, F.FP8, F.INT8, F.BFP8,
                                        F.BFP8A, F.BFP4, F.BFP4A, F.BFP2, F.BFP2A)] == \
        [32, 32, 32, 16, 16, 16, 8, 8, 8, 8, 4, 4, 2, 2]


# ------------------------------------------------------------------------------------------------ value decoding
def test_fp16_exponent_31_is_normal():
    # FloatBitPatterns.md: Tensix FP16 has no Inf/NaN; 0x7C00 = 2^16, 0x7FFF = (2 - 2^-10) * 2^16
    assert list(F.value_fp16(U(0x3C00, 0x7C00, 0x7FFF, 0xFC00, 0x0001, 0x8000))) == \
        [1.0, 65536.0, 131008.0, -65536.0, 2.0 ** -24, -0.0]


def test_sign_magnitude_integers_round_trip():
    x = np.array([0, 1, -1, 127, -127, 2 ** 31 - 1, -(2 ** 31 - 1), 12345, -12345])
    b = F.int32_to_sm(x)
    assert hexes(b[:3]) == ["0x0", "0x1", "0x80000001"]
    assert list(F.value_int32_sm(b)) == list(x)
    y = np.array([0, 5, -5, 127, -127])
    assert hexes(F.int8_to_sm(y)) == ["0x0", "0x5", "0x85", "0x7f", "0xff"]
    assert list(F.value_int8_sm(F.int8_to_sm(y))) == list(y)


def test_fp32_bf16_round_trip_of_exact_values():
    x = np.array([1.0, -2.5, 2.0 ** 100, -(2.0 ** -100), 0.0, -0.0], np.float32)
    b = F.fp32_bits(x)
    assert np.array_equal(F.value_fp32(b), x.astype(np.float64))
    h = b >> 16                                           # these values are exact in BF16
    assert np.array_equal(F.value_bf16(h), x.astype(np.float64))
    assert np.array_equal(F.bf16_to_src(h), b)


# ------------------------------------------------------------------------------------------------ BFP
def test_bfp8_to_bf16_documented_routine():
    # datum 0x40 exp 127: Mag = 0x80 -> 1.0; 0x01: Mag 0x02, LZ 6 -> exponent 121, 2^-6; sign + 0 -> -Inf
    got = F.bfp8_to_bf16(U(0x40, 0x7F, 0x01, 0x80, 0xC0, 0x00), U(127, 127, 127, 127, 127, 127))
    assert hexes(got) == ["0x3f80", "0x3ffe", "0x3c80", "0xff80", "0xbf80", "0x0"]
    # the exponent wraps when it is smaller than the normalisation shift (hardware and docs agree)
    assert hexes(F.bfp8_to_bf16(U(0x01), U(3))) == [hex(((3 - 6) & 0xFF) << 7)]
    assert list(F.value_bfp(U(0x40, 0x7F, 0x01, 0x80), U(127, 127, 127, 127))) == \
        [1.0, 127 / 64, 1 / 64, -np.inf]


def test_bfp4_bfp2_to_bf16():
    assert hexes(F.bfp4_to_bf16(U(0x4, 0x6, 0x1, 0x8, 0xC), U(127))) == \
        ["0x3f80", "0x3fc0", "0x3e80", "0xff80", "0xbf80"]      # 4/4, 6/4, 1/4, -Inf, -1
    assert hexes(F.bfp2_to_bf16(U(0x1, 0x3, 0x0, 0x2), U(130))) == ["0x4100", "0xc100", "0x0", "0xff80"]


def test_bf16_to_bfp8_shared_exponent_and_rounding():
    # block: 1.0, 2.0 (max -> shared exponent 128), 1.5, 1 + 2^-7 (0x3F81)
    v = np.full(16, 0x3F80, np.uint32)
    v[1], v[2], v[3] = 0x4000, 0x3FC0, 0x3F81
    e, d = F.bf16_to_bfp(v)
    assert hexes(e) == ["0x80"]
    # 1.0 at shift 1: (0x80 + 2) >> 2 = 0x20 (= 32/64 * 2); 2.0: (0x80 + 1) >> 1 = 0x40; 1.5: (0xC0 + 2) >> 2 = 0x30;
    # 0x3F81: (0x81 + 2) >> 2 = 0x20 (rounds down: below half)
    assert hexes(d[:4]) == ["0x20", "0x40", "0x30", "0x20"]


def test_bf16_to_bfp8_ties_away_saturation_and_signs():
    v = np.full(16, 0x3F80, np.uint32)
    v[1] = 0x3F81                      # sig 0x81, shift 0: (0x81 + 1) >> 1 = 0x41 (tie rounds away)
    v[2] = 0x3FFF                      # sig 0xFF: rounds to 128 -> saturates to 127
    v[3] = 0xBF80                      # -1.0 -> sign | 0x40
    v[4] = 0x8000                      # -0 -> +0 (a signed zero magnitude would mean -Inf)
    v[5] = 0x3B80                      # 2^-8: shift 8 -> 0
    e, d = F.bf16_to_bfp(v)
    assert hexes(e) == ["0x7f"]
    assert hexes(d[:6]) == ["0x40", "0x41", "0x7f", "0xc0", "0x0", "0x0"]
    e4, d4 = F.bf16_to_bfp(v, 4)       # BFP4 truncates the BFP8 magnitude to its top 3 bits
    assert hexes(d4[:6]) == ["0x4", "0x4", "0x7", "0xc", "0x0", "0x0"]
    e2, d2 = F.bf16_to_bfp(v, 2)
    assert hexes(d2[:6]) == ["0x1", "0x1", "0x1", "0x3", "0x0", "0x0"]


def test_bfp8_round_trip_same_exponent():
    rng = np.random.default_rng(0)
    exp = 120
    man = rng.integers(0, 64, 16).astype(np.uint32) << 1          # 6-bit mantissas fit BFP8 exactly
    sign = rng.integers(0, 2, 16).astype(np.uint32) << 15
    v = sign | (exp << 7) | man
    e, d = F.bf16_to_bfp(v)
    assert np.array_equal(F.bfp8_to_bf16(d, np.repeat(e, 16)), v)


def test_bfp_byte_packing():
    assert hexes(F.bfp_datums_to_bytes(U(1, 2, 0xF, 0x3), 4)) == ["0x21", "0x3f"]
    assert hexes(F.bfp_datums_to_bytes(U(1, 2, 3, 0), 2)) == ["0x39"]
    d = np.arange(32, dtype=np.uint32) & 0xF
    assert np.array_equal(F.bfp_bytes_to_datums(F.bfp_datums_to_bytes(d, 4), 4, 32), d)
    assert F.bfp_exp_section_bytes(1024) == 64 and F.bfp_exp_section_bytes(16) == 16


# ------------------------------------------------------------------------------------------------ unpacker
def test_unpacker_fp32_truncations():
    x = U(0x3F80FFFF, 0x3F801FFF, 0x00400000, 0x80400000, 0x7FC00001, 0xFF800000)
    assert hexes(F.unp_fp32_to_tf32(x)) == ["0x3f80e000", "0x3f800000", "0x400000", "0x80400000", "0x7fc00000",
                                            "0xff800000"]
    # BF16: truncation, exponent-0 inputs to zero of the same sign
    assert hexes(F.unp_fp32_to_bf16(x)) == ["0x3f800000", "0x3f800000", "0x0", "0x80000000", "0x7fc00000",
                                            "0xff800000"]


def test_fp32_to_fp16_saturate_truncate():
    x = U(0x3F800000, 0x7F800000, 0xC7800000, 0x38000000, 0x38100000, 0x37800000, 0xB7800000, 0x3F801FFF)
    # 1.0; Inf saturates; -2^16 = FP16 exponent 31; 2^-15 -> exponent field 0 (the "mishandled" range keeps its
    # truncated mantissa); 2^-16 -> signed zero; mantissa truncated
    assert hexes(F.fp32_to_fp16_sat_trunc(x)) == ["0x3c00", "0x7fff", "0xfc00", "0x0", "0x80", "0x0", "0x8000",
                                                  "0x3c00"]
    # Src keeps the FP16 overlay: sign at 31, exponent+mantissa at [27:13]
    assert hexes(F.unp_fp32_to_fp16(U(0x3F800000))) == [hex(0x3C00 << 13)]


def test_fp8_and_int8_to_src():
    # E5M2: top byte of an FP16; BH: 0x7F fills the low byte with ones
    assert hexes(F.fp8_to_src(U(0x3C, 0x7F))) == [hex(0x3C00 << 13), hex(0x7FFF << 13)]
    # E4M3: exponent 7 (bias 7) -> FP16 exponent 15
    assert hexes(F.fp8_to_src(U(0x38, 0xB8), exp_4b=True)) == [hex(0x3C00 << 13), hex(0x80000000 | 0x3C00 << 13)]
    # INT8 -> "Integer 8" overlay: magnitude, dummy exponent 16, sign
    assert hexes(F.int8_to_src(U(0x85, 0x00), unsigned=False)) == [hex(0x80000000 | (0x4005 << 13)), "0x0"]
    assert hexes(F.int8_to_src(U(0x85), unsigned=True)) == [hex(0x4085 << 13)]


def test_bf16_field_order_tables_match_their_definition():
    """shuffle_bf16 / unshuffle_bf16 (tables of every 16-bit pattern) against the field arithmetic that defines them,
    on every pattern, on wider, negative and scalar inputs (only the low 16 bits count); bf16_to_src on wide words."""
    every = np.arange(1 << 16, dtype=np.uint32)
    wide = np.random.default_rng(3).integers(-(1 << 40), 1 << 40, 4096)
    for table, fields in ((F.shuffle_bf16, F.shuffle_bf16_fields), (F.unshuffle_bf16, F.unshuffle_bf16_fields)):
        assert np.array_equal(table(every), fields(every))
        got, want = table(wide), fields(wide)
        assert got.dtype == want.dtype == np.uint32 and np.array_equal(got, want)
        assert table(0xABCD) == fields(0xABCD) and table(every.reshape(256, 256)).shape == (256, 256)
    assert np.array_equal(F.bf16_to_src(wide), (wide.astype(np.uint32) & 0xFFFF) << 16)


def test_int16_to_src_inverts_dst_shuffle():
    h = U(0x1234, 0xABCD)
    assert np.array_equal(F.shuffle_bf16(F.int16_to_src(h) >> 16), h)


# ------------------------------------------------------------------------------------------------ packer early
def test_packer_bf16_rounding_facts():
    """docs/sfpu_path.md §8 (ttsim round_probe)."""
    x = U(0x3F808000, 0xBF808000, 0x3F818000, 0x7FC00001, 0xFFC00000, 0x7F7FFFFF, 0x80000000, 0x00400000,
          0x007FFFFF, 0x807FFFFF, 0x3F807FFF)
    assert hexes(F.early_fp32_to_bf16(x)) == ["0x3f81", "0xbf81", "0x3f82", "0x7f80", "0xff80", "0x7f80", "0x0",
                                              "0x0", "0x80", "0x8080", "0x3f80"]
    assert hexes(F.early_fp32_to_bf16_trunc(U(0x3F80FFFF, 0x7FC00001))) == ["0x3f80", "0x7fc0"]


def test_packer_e8m6_and_tf32_rounding():
    # E8M6 keeps 6 mantissa bits: 0x3F81xxxx rounds up (bit 16 set = half), 0x3F80FFFF rounds down
    assert hexes(F.early_fp32_to_e8m6(U(0x3F810000, 0x3F80FFFF, 0x3F830000, 0x7FFFFFFF, 0x00400000))) == \
        ["0x3f82", "0x3f80", "0x3f84", "0x7f80", "0x0"]
    # TF32: ties away (0x3F801000 -> mantissa 1), NaN -> Inf, exponent 0 -> +0; 19-bit result
    assert hexes(F.early_fp32_to_tf32(U(0x3F801000, 0x3F800FFF, 0xFFC00000, 0x80001000))) == \
        [hex(0x1FC01), hex(0x1FC00), hex(0x7FC00), "0x0"]


def test_packer_stochastic_rounding_bounds():
    x = U(0x3F808000)
    assert hexes(F.early_fp32_to_bf16(x, rand=U(0))) == ["0x3f80"]
    assert hexes(F.early_fp32_to_bf16(x, rand=U(0x8000))) == ["0x3f81"]


def test_packer_int8_conversions():
    x = F.int32_to_sm(np.array([5, -5, 300, -300, 127, -128, 383]))
    assert hexes(F.early_int32_to_int8(x, unsigned=False)) == ["0x5", "0x85", "0x7f", "0xff", "0x7f", "0xff",
                                                               "0x7f"]
    assert hexes(F.early_int32_to_int8(x, unsigned=True)) == ["0x5", "0x0", "0xff", "0x0", "0x7f", "0x0", "0xff"]
    # shift by 1 with rounding on the shifted-out bit: 5 -> 3, 383 -> 192 -> saturate
    assert hexes(F.early_int32_to_int8(x, unsigned=False, shift=1)[[0, 6]]) == ["0x3", "0x7f"]
    assert hexes(F.early_int32_to_int8_raw(x[:4], unsigned=False)) == ["0x5", "0x85", "0x2c", "0xac"]


# ------------------------------------------------------------------------------------------------ packer late
def test_packer_late_conversions():
    # TF32 -> FP16: 1.0; +Inf/NaN pattern saturates; -Inf saturates with sign; 2^-16 -> 0
    assert hexes(F.late_tf32_to_fp16(U(0x1FC00, 0x1FC01 | 0x3FC00, 0x7FC00, 0x1BC00))) == \
        ["0x3c00", "0x7fff", "0xffff", "0x0"]
    assert hexes(F.late_fp32_to_bf16_for_bfp(U(0x3F80FFFF, 0x80400000, 0x7FC00001))) == ["0x3f80", "0x0",
                                                                                         "0x7fc0"]
    assert hexes(F.late_fp16_to_fp8(U(0x3C00, 0x4100), exp_4b=False)) == ["0x3c", "0x41"]
    # E4M3: 1.0 -> 0x38, 2^-7 (FP16 exponent 8) -> 0, 2^9 (exponent 24) saturates
    assert hexes(F.late_fp16_to_fp8(U(0x3C00, 0x2000, 0x6000, 0xBC00), exp_4b=True)) == ["0x38", "0x0", "0x7f",
                                                                                         "0xb8"]


def test_relu_modes():
    x = F.fp32_bits(np.array([-1.0, 0.5, 1.0, 1.5, 5.0], np.float32))
    assert hexes(F.relu(x, "fp32", 1, 0)) == ["0x0", "0x3f000000", "0x3f800000", "0x3fc00000", "0x40a00000"]
    assert hexes(F.relu(x, "fp32", 2, 0x3F80)) == ["0x0", "0x0", "0x0", "0x3fc00000", "0x40a00000"]
    assert hexes(F.relu(x, "fp32", 3, 0x4040)) == ["0x0", "0x3f000000", "0x3f800000", "0x3fc00000", "0x40400000"]
    assert hexes(F.relu(x >> 16, "b16", 3, 0x4040)) == ["0x0", "0x3f00", "0x3f80", "0x3fc0", "0x4040"]
    assert hexes(F.relu(F.int32_to_sm([-3, 3]), "int32", 1, 0)) == ["0x0", "0x3"]


def test_l1_accumulation():
    one, two = 0x3F800000, 0x40000000
    assert hexes(F.l1_acc_fp32(U(one, 0x00000001, 0x7F800000), U(two, one, 0xFF800000))) == \
        ["0x40400000", "0x3f800000", "0x7fc00000"]
    # BF16: exact sum rounded to nearest even (1 + 2^-8 is a tie -> 1.0), Inf + -Inf -> 0x7FC0, NaN reads huge
    assert hexes(F.l1_acc_bf16(U(0x3F80, 0x3F80, 0x7F80, 0x7FC1), U(0x3F80, 0x3B80, 0xFF80, 0x3F80))) == \
        ["0x4000", "0x3f80", "0x7fc0", "0x7f80"]
    assert hexes(F.l1_acc_fp16(U(0x3C00, 0x7FFF, 0x3C00), U(0x3C00, 0x3C00, 0xBC00))) == ["0x4000", "0x7fff", "0x0"]


# ------------------------------------------------------------------------------------------------ Tensix paths
L1_SIZE = 1536 * 1024
IN, OUT = 0x20000, 0x40000


def _tensix():
    l1 = np.zeros(L1_SIZE, np.uint8)
    return Tensix(l1), l1


def _pack_setup(tx, in_fmt, out_fmt, rd=1, exp_sect=0, c71=0):
    esz = max(1, F.element_bits(in_fmt) // 8)
    for i, v in ((1, in_fmt << 25), (12, (16 * esz) << 16 | esz), (13, (1024 * esz) << 16 | 256 * esz), (18, rd),
                 (24, 0xFFFF), (28, 0x1000), (68, exp_sect << 16), (70, 1 | out_fmt << 4 | in_fmt << 8),
                 (71, c71), (69, OUT // 16 - 1)):
        tx.cfg_write(i, v)
    for w in (0xB2250004, 0xB2261020, 0xB2272020, 0x5180000B, 0x5480000F, 0x5E803C00):
        tx.push(2, w)


def _pack_tile(tx):
    for face in range(4):
        for _ in range(3):
            tx.push(2, 0x41000000)
        tx.push(2, 0x41010001 if face == 3 else 0x41008000)


def test_packer_bfp8_output_has_exponent_section():
    tx, l1 = _tensix()
    rng = np.random.default_rng(1)
    x = np.asarray(rng.normal(0, 3, 1024), np.float32).view(np.uint32)
    tx.dst.rows32[0:64] = x.reshape(64, 16)
    _pack_setup(tx, F.FP32, F.BFP8, exp_sect=4)
    _pack_tile(tx)
    e, d = F.bf16_to_bfp(F.late_fp32_to_bf16_for_bfp(x))
    assert np.array_equal(l1[OUT:OUT + 64], e.astype(np.uint8))
    assert np.array_equal(l1[OUT + 64:OUT + 64 + 1024], d.astype(np.uint8))
    # values survive to within one BFP8 step of the block maximum
    v = F.value_bfp(d, np.repeat(e, 16))
    step = np.repeat(np.exp2(e.astype(np.float64) - 127 - 6), 16)
    assert np.all(np.abs(v - x.view(np.float32)) <= step)


def test_packer_bfp4_and_int8_sizes_and_padding():
    tx, l1 = _tensix()
    l1[OUT:OUT + 4096] = 0xAA
    tx.dst.rows32[0:64] = np.arange(1024, dtype=np.uint32).reshape(64, 16) * 3
    _pack_setup(tx, F.INT8, F.INT8)
    _pack_tile(tx)
    assert np.array_equal(l1[OUT:OUT + 1024], np.minimum(np.arange(1024) * 3, 127).astype(np.uint8))
    assert l1[OUT + 1024] == 0xAA
    tx2, l2 = _tensix()
    tx2.dst.rows32[0:64] = np.full((64, 16), 0x3F800000, np.uint32)
    _pack_setup(tx2, F.FP32, F.BFP4, exp_sect=4)
    _pack_tile(tx2)
    assert np.all(l2[OUT:OUT + 64] == 127) and np.all(l2[OUT + 64:OUT + 64 + 512] == 0x44)


def test_packer_l1_accumulation_fp32():
    tx, l1 = _tensix()
    l1[OUT:OUT + 4096].view(np.float32)[:] = 1.5
    tx.dst.rows32[0:64] = np.full((64, 16), 0x40000000, np.uint32)
    _pack_setup(tx, F.FP32, F.FP32, c71=1 << 19)
    _pack_tile(tx)
    assert np.all(l1[OUT:OUT + 4096].view(np.float32) == 3.5)


def test_packer_unmodelled_modes_are_named():
    tx, _ = _tensix()
    tx.dst.rows32[0:64] = 0
    _pack_setup(tx, F.FP32, F.BF16)                         # ttsim pf20: In=FP32, Out=BF16
    with pytest.raises(EmuUnimplemented, match="0x105"):
        tx.push(2, 0x41000000)
    tx, _ = _tensix()
    _pack_setup(tx, F.FP32, F.FP32, rd=0)                   # FP32 from a 16-bit Dst: ttsim pf24
    with pytest.raises(EmuUnimplemented, match="0x0"):
        tx.push(2, 0x41000000)
    tx, _ = _tensix()
    _pack_setup(tx, F.FP32, F.BFP8A)
    with pytest.raises(EmuUnimplemented, match="0x102"):
        tx.push(2, 0x41000000)


def _unpack_srca_setup(tx, in_fmt, out_fmt, force_exp=0):
    for i, v in ((64, 0x01000010 | in_fmt), (65, 0x00040001), (72, 0x20 | out_fmt), (73, 0x0F | force_exp << 8),
                 (86, 0x01000100), (84, 64), (76, IN // 16 - 1), (50, 0x42)):
        tx.cfg_write(i, v)
    for w in (0xB2050004, 0x5120000B, 0x5420000F, 0x5E23FC00):
        tx.push(0, w)


def test_unpack_bfp8_face_into_srca():
    tx, l1 = _tensix()
    rng = np.random.default_rng(2)
    exps = rng.integers(100, 140, 64).astype(np.uint8)
    dat = rng.integers(0, 256, 1024).astype(np.uint8)
    l1[IN:IN + 64] = exps
    l1[IN + 64:IN + 64 + 1024] = dat
    _unpack_srca_setup(tx, F.BFP8, F.BFP8)
    tx.push(0, 0x420080C1)                                  # face 0 -> SrcA bank 0
    want = F.bfp_to_src(dat[:256], np.repeat(exps[:16], 16), 8)
    assert np.array_equal(tx.srca[0, :16].reshape(-1), want)
    assert tx.srca_format[0] == F.BFP8


def test_unpack_bfp4_forced_exponent_and_fp16():
    tx, l1 = _tensix()
    l1[IN:IN + 128] = np.arange(128, dtype=np.uint8)
    _unpack_srca_setup(tx, F.BFP4, F.BFP4, force_exp=1)     # no exponent section, exponent 0x42 from cfg 50
    tx.push(0, 0x420080C1)
    d = F.bfp_bytes_to_datums(np.arange(128, dtype=np.uint8), 4, 256)
    assert np.array_equal(tx.srca[0, :16].reshape(-1), F.bfp_to_src(d, np.full(256, 0x42), 4))
    tx, l1 = _tensix()
    h = np.arange(256, dtype=np.uint16) * 251
    l1[IN:IN + 512] = h.view(np.uint8)
    _unpack_srca_setup(tx, F.FP16, F.FP16)
    tx.push(0, 0x420080C1)
    assert np.array_equal(tx.srca[0, :16].reshape(-1), F.fp16_to_src(h))


def test_unpack_format_rules():
    tx, _ = _tensix()
    _unpack_srca_setup(tx, F.BF16, F.FP16)                  # only FP32 input may change format
    with pytest.raises(EmuError, match="mismatches"):
        tx.push(0, 0x420080C1)
    tx, _ = _tensix()
    _unpack_srca_setup(tx, F.INT32, F.INT32)                # INT32 only into Dst
    with pytest.raises(EmuError, match="only into Dst"):
        tx.push(0, 0x420080C1)
    tx, _ = _tensix()
    _unpack_srca_setup(tx, F.BFP8A, F.BFP8A)
    with pytest.raises(EmuUnimplemented, match="BFP8a"):
        tx.push(0, 0x420080C1)


def _dst16_tile(tx, values16):
    """Write 1024 physical 16-bit values to Dst16b rows 0..63 (one row per call: a Dst16b row and the row 8 above
    it share Dst32b storage)."""
    v = np.asarray(values16, np.uint32).reshape(64, 16)
    for r in range(64):
        tx.dst.write16(np.full(16, r), np.arange(16), v[r])


@pytest.mark.parametrize("out_fmt", [F.BF16, F.FP32, F.BFP8])
def test_packer_from_16bit_dst_bf16(out_fmt):
    tx, l1 = _tensix()
    rng = np.random.default_rng(3)
    b = rng.integers(0, 1 << 16, 1024).astype(np.uint32)
    b[:6] = (0x7FC1, 0x0001, 0x8001, 0xFF80, 0x3F80, 0x8000)
    _dst16_tile(tx, F.shuffle_bf16(b))
    _pack_setup(tx, F.BF16, out_fmt, rd=0, exp_sect=4)
    _pack_tile(tx)
    want = F.early_bf16(b)                                  # NaN -> Inf, exponent 0 -> +0
    assert hexes(want[:6]) == ["0x7f80", "0x0", "0x0", "0xff80", "0x3f80", "0x0"]
    if out_fmt == F.BF16:
        assert np.array_equal(l1[OUT:OUT + 2048].view(np.uint16), want)
    elif out_fmt == F.FP32:
        assert np.array_equal(l1[OUT:OUT + 4096].view(np.uint32), want << 16)
    else:
        e, d = F.bf16_to_bfp(want)
        assert np.array_equal(l1[OUT:OUT + 64], e) and np.array_equal(l1[OUT + 64:OUT + 1088], d)


def test_packer_from_16bit_dst_fp16():
    tx, l1 = _tensix()
    h = np.arange(1024, dtype=np.uint32) * 64 + 3
    _dst16_tile(tx, F.fp16_to_dst16(h))
    _pack_setup(tx, F.FP16, F.FP32, rd=0)
    _pack_tile(tx)
    got = l1[OUT:OUT + 4096].view(np.uint32)
    want = F.late_fp16_to_fp32(F.early_fp16(h))
    assert np.array_equal(got, want)
    # normal FP16 values widen exactly; exponent 31 is a normal binade (2^16 .. 2^17)
    normal = (h & 0x7C00) != 0
    assert np.array_equal(F.value_fp32(got[normal]), F.value_fp16(h[normal]))


def test_packer_bf16_truncation_mode_and_relu_clamp():
    """Read_raw=1 (PCK_DEST_RD_CTRL_Read_int8) selects truncation (docs; ttsim pf28 refuses it); ReLU mode 3 clamps
    the rounded BF16 intermediate."""
    tx, l1 = _tensix()
    x = np.full(1024, 0x3F80FFFF, np.uint32)
    x[1], x[2] = 0x7FC00001, 0x00400000
    tx.dst.rows32[0:64] = x.reshape(64, 16)
    _pack_setup(tx, F.BF16, F.BF16, rd=1 | 4)
    _pack_tile(tx)
    assert hexes(l1[OUT:OUT + 6].view(np.uint16)) == ["0x3f80", "0x7fc0", "0x40"]
    tx, l1 = _tensix()
    tx.dst.rows32[0:64] = np.full((64, 16), 0x40A00000, np.uint32)      # 5.0
    tx.dst.rows32[0, 1] = 0xBF800000                                    # -1.0
    _pack_setup(tx, F.BF16, F.BF16)
    tx.cfg_write(2, 3 << 2 | 0x4040 << 6)                                # clamp to [0, 3.0]
    _pack_tile(tx)
    assert hexes(l1[OUT:OUT + 4].view(np.uint16)) == ["0x4040", "0x0"]
