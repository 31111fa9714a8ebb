"""The pack/unpack format cases of the differential format tests (tests/diff/test_diff_pack_ttsim.py) and the recorded
verdicts (tests/verdicts): the TRISC0 kernel tests/programs/pack/pack.c, input patterns biased to specials, the
configurations per format pair (CASES: L1 -> Dst32b -> PACR; UNPACK_CASES: unpackers into SrcA/SrcB/Dst;
DST16_CASES: MOVA2D into Dst16b and the FP16-overlay unpacker conversions) and `launch` (one batch of tiles).
"""
from __future__ import annotations

import numpy as np

from tt_backend.chip.isa import encode
from tt_backend.chip.numerics.formats import bfp_datums_to_bytes
from tt_backend.lowering.codegen.mvmul import face_row_cfg, face_row_words

from tests.support import programs
from tests.support.harness import run_on

IN_BASE, OUT_BASE, TILE = 0x20000, 0xA0000, 4096
PUSH = 0x10000


def compile_pack() -> bytes:
    """tests/programs/pack/pack.c for TRISC0 (tests/support/programs.py)."""
    return programs.compile_prog("pack/pack.c", "trisc0")


# ------------------------------------------------------------------------------------------------ input data
_SPECIALS = np.array([
    0x00000000, 0x80000000, 0x00000001, 0x80000001, 0x007FFFFF, 0x807FFFFF, 0x00800000, 0x80800000, 0x00400000,
    0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF800001, 0x7FFFFFFF, 0xFFFFFFFF, 0x7F7FFFFF,
    0xFF7FFFFF, 0x7F7F8000, 0x7F7F7FFF, 0x3F800000, 0xBF800000, 0x3F808000, 0xBF808000, 0x3F818000, 0x3F80FFFF,
    0x3F807FFF, 0x3F801000, 0x3F800FFF, 0x3F803000, 0x3F802000, 0x477FE000, 0x477FF000, 0x47800000, 0x47FFE000,
    0x47FFF000, 0x48000000, 0x38000000, 0x38800000, 0x387FF000, 0x387FE000, 0x37FFFFFF, 0x37800000, 0xB8000000,
    0x3BFFF000, 0x3C000000, 0x43E00000, 0x43F00000, 0x3C7FF000, 0x4B7FFFFF, 0x0000007F, 0x00000080, 0x000000FF,
    0x00000100, 0x8000007F, 0x80000080, 0x800000FF, 0x80000100, 0x7FFFFFFE,
], dtype=np.uint32)


def gen_patterns(rng: np.random.Generator, n: int) -> np.ndarray:
    """n (multiple of 16) 32-bit patterns, one style per block of 16 datums."""
    blocks = []
    for style in rng.integers(0, 7, n // 16):
        if style == 0:                                   # uniform bits
            b = rng.integers(0, 1 << 32, 16, dtype=np.uint64).astype(np.uint32)
        elif style == 1:                                 # specials
            b = rng.choice(_SPECIALS, 16)
        elif style == 2:                                 # BFP block: exponents close to a common maximum
            e0 = int(rng.integers(0, 256))
            e = np.clip(e0 - rng.integers(0, 10, 16), 0, 255).astype(np.uint32)
            b = (rng.integers(0, 2, 16).astype(np.uint32) << 31) | (e << 23) | \
                rng.integers(0, 1 << 23, 16).astype(np.uint32)
        elif style == 3:                                 # rounding ties and near-ties for 16/13/17 dropped bits
            hi = rng.integers(0, 1 << 32, 16, dtype=np.uint64).astype(np.uint32)
            lo = rng.choice(np.array([0x8000, 0x7FFF, 0x8001, 0x18000, 0x10000, 0x1000, 0xFFF, 0x1001, 0x0, 0xFFFF],
                                     np.uint32), 16)
            b = (hi & np.uint32(0xFFFE0000)) | lo
        elif style == 4:                                 # FP16 / FP8 range edges
            e = rng.integers(100, 150, 16).astype(np.uint32)
            b = (rng.integers(0, 2, 16).astype(np.uint32) << 31) | (e << 23) | \
                rng.integers(0, 1 << 23, 16).astype(np.uint32)
        elif style == 5:                                 # small sign-magnitude integers (INT8 saturation)
            b = (rng.integers(0, 2, 16).astype(np.uint32) << 31) | rng.integers(0, 400, 16).astype(np.uint32)
        else:                                            # normal floats around 1
            b = np.asarray(rng.normal(0, 4, 16), np.float32).view(np.uint32)
        blocks.append(np.asarray(b, np.uint32))
    return np.concatenate(blocks)


# ------------------------------------------------------------------------------------------------ configurations
_UNPACK_ADC = [0x5120000B, 0x5420000F, 0x5E23FC00]
_PACK_ADC = [0x5180000B, 0x5480000F, 0x5E803C00]
_PACR = ([0x41000000] * 3 + [0x41008000]) * 3 + [0x41000000] * 3 + [0x41010001]


def pack_config(in_fmt: int, out_fmt: int, *, unpack_fmt: int = 0, rd: int = 1, c71: int = 0, relu: int = 0,
                edge: tuple[int, int, int] = (0xFFFF, 0, 0), exp_sect: int = 0) -> tuple[list, list]:
    """(setup pairs, per-tile words) for one conversion."""
    esz = max(1, {0: 32, 1: 16, 5: 16, 6: 8, 8: 32, 9: 16, 10: 8, 14: 8}[in_fmt] // 8)
    mask0, mapping, mask1 = edge
    setup = [
        (64, 0x01000010 | unpack_fmt), (65, 0x00040001), (72, 0x20 | unpack_fmt), (73, 0x1F), (86, 0x01000100),
        (57, 0x400), (92, 0), (84, 64),
        (1, in_fmt << 25), (2, relu), (12, (16 * esz) << 16 | esz), (13, (1024 * esz) << 16 | (256 * esz)),
        (18, rd), (20, mapping), (24, mask0), (25, mask1), (28, 0x1000), (68, exp_sect << 16),
        (70, 1 | out_fmt << 4 | in_fmt << 8), (71, c71),
        (PUSH, 0xB2250004), (PUSH, 0xB2261020), (PUSH, 0xB2272020),
        (PUSH, 0xB2050000),                                             # SrcA override off: unpack to Dst
    ]
    words = _UNPACK_ADC + _PACK_ADC + [0x42088081] * 4 + _PACR
    return setup, words


FP, FP16, BF, BFP8, BFP4, BFP2, I32, I16, FP8, I8 = 0, 1, 5, 6, 7, 15, 8, 9, 10, 14
CASES = {
    "fp32->fp32": pack_config(FP, FP),
    "fp32->fp16(tf32 round)": pack_config(FP16, FP16, rd=1 | 8),
    "fp32->fp8(e4m3)": pack_config(FP16, FP8, rd=1 | 8, c71=1 << 23),
    "fp32->bf16(round)": pack_config(BF, BF),
    "fp32->bfp8(trunc)": pack_config(FP, BFP8, exp_sect=4),
    "fp32->bfp4(trunc)": pack_config(FP, BFP4, exp_sect=4),
    "fp32->bfp2(trunc)": pack_config(FP, BFP2, exp_sect=4),
    "fp32->e8m6->bfp8": pack_config(BFP8, BFP8, exp_sect=4),
    "fp32->e8m6->bfp4": pack_config(BFP8, BFP4, exp_sect=4),
    "int32->int32": pack_config(I32, I32, unpack_fmt=8),
    "int32->int16(hi)": pack_config(I16, I16, unpack_fmt=8),
    "int32->int8(sat)": pack_config(I8, I8, unpack_fmt=8),
    "int32->uint8(sat)": pack_config(I8, I8, unpack_fmt=8, rd=1 | 2),
    "relu1 fp32": pack_config(FP, FP, relu=1 << 2),
    "relu2 fp32": pack_config(FP, FP, relu=2 << 2 | 0x3F80 << 6),
    "relu3 fp32": pack_config(FP, FP, relu=3 << 2 | 0x4040 << 6),
    "relu1 bf16": pack_config(BF, BF, relu=1 << 2),
    "relu2 bf16": pack_config(BF, BF, relu=2 << 2 | 0x3F00 << 6),
    "relu3 bf16": pack_config(BF, BF, relu=3 << 2 | 0x4040 << 6),
    "relu3 fp16": pack_config(FP16, FP16, rd=1 | 8, relu=3 << 2 | 0x3C00 << 6),
    "relu2 e8m6->bfp8": pack_config(BFP8, BFP8, exp_sect=4, relu=2 << 2 | 0x3000 << 6),
    "relu1 int32": pack_config(I32, I32, unpack_fmt=8, relu=1 << 2),
    "edge mask 1 fp32": pack_config(FP, FP, edge=(0x0001, 0, 0)),
    "edge row sets bf16": pack_config(BF, BF, edge=(0xFFFF, 0x45114511, 0x0001)),
    "edge row sets bfp8": pack_config(FP, BFP8, exp_sect=4, edge=(0x0000, 0x11111111, 0xFFFF)),
    "l1 acc fp32": pack_config(FP, FP, c71=1 << 19),
    "l1 acc bf16": pack_config(BF, BF, c71=1 << 19),
    "l1 acc fp16": pack_config(FP16, FP16, rd=1 | 8, c71=1 << 19),
}


# ------------------------------------------------------------------------------------------------ unpacker cases
# Unpacker 0 (or 1) writes SrcA (SrcB) one face per UNPACR; the other operand is a zeroed bank (UNPACR_NOP); the
# FPU's ELWADD (Fp32_enabled) adds them into Dst32b and the packer writes FP32, so every Src datum is observed
# through "x + 0" (FPU: exponent-0 -> +0, NaN/Inf patterns as extended normals).
_ELW_FACE = [0x28008000, 0x28008000, 0x37C00003]          # 2 x ELWADD 8 rows (ADDR_MOD 2), release both banks


def unpack_config(in_fmt: int, out_fmt: int, *, which: int = 0, force_exp: int = 0, c1_extra: int = 0):
    esz = 4
    fmt_a = out_fmt if which == 0 else 5
    fmt_b = out_fmt if which == 1 else 5
    setup = [
        (64, 0x01000010 | (in_fmt if which == 0 else 5)), (65, 0x00040001), (72, 0x20 | fmt_a),
        (73, 0x0F | force_exp << 8), (86, 0x01000100), (57, 0), (92, 0), (84, 64), (50, 0x3A),
        (112, 0x01000010 | (in_fmt if which == 1 else 5)), (113, 0x00040001), (120, 0x20 | fmt_b),
        (121, 0x0F | force_exp << 8), (124, 0),
        (1, 1 << 29 | fmt_a << 17 | fmt_b << 21 | c1_extra), (2, 0), (12, (16 * esz) << 16 | esz),
        (13, (1024 * esz) << 16 | (256 * esz)), (18, 1), (20, 0), (24, 0xFFFF), (25, 0), (28, 0x1000), (68, 0),
        (70, 1), (71, 0),
        (PUSH, 0xB2250004), (PUSH, 0xB2261020), (PUSH, 0xB2272020),     # ADDR_MOD_PACK 0/1/2
        (PUSH, 0xB2050004), (PUSH, 0xB20E0008), (PUSH, 0xB21E0008),     # SrcA override; AB/DST SEC2 += 8
    ]
    real = 0x420080C1 if which == 0 else 0x428080C1                      # UNPACR face, ch0 Z += 1, dvalid
    zero = 0x43800101 if which == 0 else 0x43000101                      # UNPACR_NOP on the other unpacker
    per_face = [real, zero] + _ELW_FACE if which == 0 else [zero, real] + _ELW_FACE
    words = ([0x5160000B, 0x5460000F, 0x5E63FC00] + _PACK_ADC + [0x37000007] + per_face * 4 + [0x37000004]
             + _PACR)
    return setup, words


def tileize_config(row_stride: int):
    """FP32 -> Dst with Tileize_mode: one UNPACR of 1024 datums reading rows of 32 datums `row_stride` bytes
    apart (BH row width for 32-bit data), written to Dst rows 0..63 in order."""
    setup, _ = pack_config(FP, FP)
    shift = (row_stride >> 4 & 0xF) << 16 | (row_stride >> 8 & 0xF) << 20 | (row_stride >> 12 & 0xF) << 24
    setup = [(a, b) for a, b in setup if a != 72] + [(72, 0x20 | 1 << 9 | shift)]
    words = [0x5120000B, 0x5420000F, 0x5E2FFC00] + _PACK_ADC + [0x42000081] + _PACR
    return setup, words


def mova2d_config(src_fmt: int, in_fmt: int, out_fmt: int, *, unpack_in: int | None = None, rd: int = 0,
                  c71: int = 0, relu: int = 0, exp_sect: int = 4, c1_extra: int = 0, alu_srca: int | None = None):
    """16-bit Dst: unpacker 0 -> SrcA (format src_fmt), MOVA2D writes Dst16b rows (BF16 or FP16 field order), the
    packer reads them with Read_32b_data=0 and converts Dstacc=In -> Out. `alu_srca`: MOVA2D uses this declared
    SrcA format instead of the bank's implied one (ttsim's MOVA2D rejects INT8 banks)."""
    esz = max(1, {1: 16, 2: 8, 5: 16, 6: 8, 9: 16}[in_fmt] // 8)
    setup = [
        (64, 0x01000010 | (src_fmt if unpack_in is None else unpack_in)), (65, 0x00040001), (72, 0x20 | src_fmt),
        (73, 0x0F), (86, 0x01000100), (57, 0), (92, 0), (84, 64),
        (1, in_fmt << 25 | (src_fmt if alu_srca is None else alu_srca) << 17 | 5 << 21 | c1_extra), (2, relu),
        (12, (16 * esz) << 16 | esz),
        (13, (1024 * esz) << 16 | (256 * esz)), (18, rd), (20, 0), (24, 0xFFFF), (25, 0), (28, 0x1000),
        (68, exp_sect << 16), (70, 1 | out_fmt << 4 | in_fmt << 8), (71, c71),
        (PUSH, 0xB2250004), (PUSH, 0xB2261020), (PUSH, 0xB2272020),
        (PUSH, 0xB2050004), (PUSH, 0xB20E0008), (PUSH, 0xB21E0008), (PUSH, 0xB2020000 | (alu_srca is not None)),
    ]
    per_face = [0x420080C1, 0x1200A000, 0x1200A000, 0x37400003]       # UNPACR, 2 x MOVA2D 8 rows, release SrcA
    words = (_UNPACK_ADC + _PACK_ADC + [0x37000007] + per_face * 4 + [0x37000004] + _PACR)
    return setup, words


def walk_tilize_config():
    """A row-major 32 x 32 bf16 tile tilized on the Tensix alone (the candidate B tilize pass of the FPU matmul,
    docs/performance.md §8.3): unpacker 0 walks the tile's 64 face rows into one SrcA bank (codegen/mvmul's
    face_row_words and face_row_cfg, rows of 32 datums), eight MOVA2Ds copy SrcA's 64 rows into Dst16b, one release,
    and the packer writes them in face layout as bf16 (mova2d_config's Dst16 setup)."""
    setup, _ = mova2d_config(BF, BF, BF)
    walk_cfg = face_row_cfg(0, 32)
    cfgs = [(a, walk_cfg.get(a, v)) for a, v in setup if a < PUSH]
    cfgs += [(a, v) for a, v in walk_cfg.items() if a not in dict(cfgs)]
    w = face_row_words(0)

    def word(literal: str) -> int:                  # the lowering's words are C literals ("0x...u")
        return int(literal.rstrip("u"), 16)
    walk = []
    for f in range(4):
        last = "row_down" if f == 1 else "row_last" if f == 3 else "row"
        walk += [word(w["adcy0"]), word(w["cols"][0][f % 2])] + [word(w["row"])] * 15 + [word(w[last])]
    mova2d_8_rows = 0x1200A000                      # MOVA2D 8 rows, address modifier 2: Src and Dst += 8
    words = (_UNPACK_ADC + _PACK_ADC + [0x37000007] + walk + [mova2d_8_rows] * 8 + [0x37400003, 0x37000004]
             + _PACR)
    return cfgs + [(a, v) for a, v in setup if a >= PUSH], words


def tilized_bf16(tile: np.ndarray) -> np.ndarray:
    """What walk_tilize_config makes of a row-major 32 x 32 bf16 tile (uint16 bits): its four 16 x 16 faces in order,
    denormals and -0 as +0 (MOVA2D flushes them), NaN as Inf of its sign (the packer's BF16 output)."""
    faces = np.concatenate([tile[16 * (f // 2):16 * (f // 2) + 16, 16 * (f % 2):16 * (f % 2) + 16].reshape(-1)
                            for f in range(4)]).astype(np.uint32)
    e, m = faces >> 7 & 0xFF, faces & 0x7F
    out = np.where(e == 0, 0, faces)
    return np.where((e == 0xFF) & (m != 0), faces & 0xFF80, out).astype(np.uint16)


def _bytes8(rng):
    return rng.integers(0, 256, 1024).astype(np.uint8).tobytes()


def _bits16(rng, n):
    return (gen_patterns(rng, n) >> 16).astype("<u2").tobytes()


def _bfp_tile(rng, bits):
    """One BFP tile: 64 shared exponents (biased to the wrap-around ends), then the packed datums."""
    e = np.where(rng.random(64) < 0.3, rng.integers(0, 8, 64), rng.integers(0, 256, 64))
    e = np.where(rng.random(64) < 0.2, rng.integers(248, 256, 64), e).astype(np.uint8)
    d = rng.integers(0, 1 << bits, 1024).astype(np.uint32)
    d[rng.random(1024) < 0.1] = 1 << (bits - 1)                          # sign with magnitude 0 (-Inf)
    return e.tobytes() + bfp_datums_to_bytes(d, bits).tobytes()


def _gen_tiles(per_tile):
    def gen(rng, n):
        out = bytearray(n * TILE)
        for t in range(n):
            b = per_tile(rng)
            out[t * TILE:t * TILE + len(b)] = b
        return bytes(out)
    return gen


GEN32 = lambda rng, n: gen_patterns(rng, n * 1024).tobytes()          # noqa: E731
UNPACK_CASES = {
    "unp0 bf16->SrcA": (unpack_config(BF, BF), _gen_tiles(lambda r: _bits16(r, 1024))),
    "unp0 fp32->bf16 SrcA": (unpack_config(FP, BF), GEN32),
    "unp0 fp32->tf32 SrcA": (unpack_config(FP, 4), GEN32),
    "unp0 bfp8->SrcA": (unpack_config(BFP8, BFP8), _gen_tiles(lambda r: _bfp_tile(r, 8))),
    "unp0 bfp4->SrcA": (unpack_config(BFP4, BFP4), _gen_tiles(lambda r: _bfp_tile(r, 4))),
    "unp0 bfp2->SrcA": (unpack_config(BFP2, BFP2), _gen_tiles(lambda r: _bfp_tile(r, 2))),
    "unp0 bfp8 forced exp": (unpack_config(BFP8, BFP8, force_exp=1),
                             _gen_tiles(lambda r: r.integers(0, 256, 1024).astype(np.uint8).tobytes())),
    "unp1 bf16->SrcB": (unpack_config(BF, BF, which=1), _gen_tiles(lambda r: _bits16(r, 1024))),
    "unp1 bfp8->SrcB": (unpack_config(BFP8, BFP8, which=1), _gen_tiles(lambda r: _bfp_tile(r, 8))),
    "unp1 fp32->tf32 SrcB": (unpack_config(FP, 4, which=1), GEN32),
    # into Dst, "TF32" means FP32: bit exact like FP32 -> FP32
    "unp0 fp32->tf32 Dst": (([(a, 0x24 if a == 72 else b) for a, b in pack_config(FP, FP)[0]], pack_config(FP, FP)[1]),
                            GEN32),
    "unp0 tileize fp32 Dst": (tileize_config(256), GEN32),
}


def untilize_config(out_fmt: int = FP, in_fmt: int = FP):
    """Packer untilize: one PACR stream per Dst row (read_intf_sel=1, `last` on each); SETADC puts the packer's
    ch1.Y at 2 * (tile row) + (right face), so with Ystride1 = half a 32-wide row the stream starts at
    L1_Dest + 16 * floor(ch1.Y * Ystride1 / 16): the tile lands row-major in L1."""
    half = 16 * (4 if out_fmt == FP else 2)                     # bytes of 16 output datums
    setup, _ = pack_config(in_fmt, out_fmt)
    setup = [(a, b) for a, b in setup if a != PUSH] + [
        (14, half << 16), (PUSH, 0xB2250001), (PUSH, 0xB2261020), (PUSH, 0xB2272020), (PUSH, 0xB2050000)]
    words = _UNPACK_ADC + _PACK_ADC + [0x42088081] * 4
    for face in range(4):
        for r in range(16):
            words.append(encode("SETADC", cnt_set_mask=4, channel_index=1, dimension_index=1,
                                value=2 * (16 * (face // 2) + r) + face % 2))
            am = 0 if r < 15 else (2 if face == 3 else 1)
            words.append(encode("PACR", read_intf_sel=1, last=1, addr_mode=am))
    return setup, words


def read_intf_config(variant: str, out_fmt: int = FP, in_fmt: int = FP, edge=(0xFFFF, 0, 0)):
    """Other PACR read-interface selections over a full tile (Dst32b rows 0..63):
    "5/10": rows +0,+2 then +1,+3 of each 4-row group (L1 order 0,2,1,3); "3": two rows per PACR;
    "1x8": one row per PACR with an X range of 8 datums (left half of every row)."""
    setup, _ = pack_config(in_fmt, out_fmt, edge=edge, exp_sect=4)
    setup = [(a, b) for a, b in setup if a != PUSH]
    words = _UNPACK_ADC + _PACK_ADC + [0x42088081] * 4
    if variant == "5/10":
        setup += [(PUSH, 0xB2250004), (PUSH, 0xB2261020), (PUSH, 0xB2272020), (PUSH, 0xB2280000)]
        for face in range(4):
            for g in range(4):
                last_group = g == 3
                words.append(encode("PACR", read_intf_sel=5, addr_mode=3))
                am = (2 if face == 3 else 1) if last_group else 0
                words.append(encode("PACR", read_intf_sel=10, addr_mode=am, last=int(face == 3 and last_group)))
    elif variant == "3":
        setup += [(PUSH, 0xB2250002), (PUSH, 0xB2261020), (PUSH, 0xB2272020)]
        for face in range(4):
            for k in range(8):
                am = (2 if face == 3 else 1) if k == 7 else 0
                words.append(encode("PACR", read_intf_sel=3, addr_mode=am, last=int(face == 3 and k == 7)))
    else:
        words[words.index(0x5E803C00)] = encode("SETADCXX", cnt_set_mask=4, x_end2=7, x_start=0)
        setup += [(PUSH, 0xB2250001), (PUSH, 0xB2261020), (PUSH, 0xB2272020)]
        for face in range(4):
            for r in range(16):
                am = (2 if face == 3 else 1) if r == 15 else 0
                words.append(encode("PACR", read_intf_sel=1, addr_mode=am, last=int(face == 3 and r == 15)))
    setup.append((PUSH, 0xB2050000))
    return setup, words


CASES["read_intf_sel 5/10 fp32"] = read_intf_config("5/10")
CASES["read_intf_sel 3 bfp8"] = read_intf_config("3", BFP8, BFP8)
CASES["read_intf_sel 1 x8 fp32 + row sets"] = read_intf_config("1x8", edge=(0xFFFF, 0x44444444, 0x0001))
CASES["read_intf_sel 1 x8 bf16"] = read_intf_config("1x8", BF, BF)
CASES["untilize fp32"] = untilize_config()
CASES["untilize bf16"] = untilize_config(BF, BF)

_BF16_TILES = _gen_tiles(lambda r: _bits16(r, 1024))
# the Tensix tilize of a row-major bf16 tile: beside DST16_CASES (whose names the recorded verdicts list)
TILIZE_CASE = (walk_tilize_config(), _BF16_TILES)
_FP16_TILES = _gen_tiles(lambda r: r.integers(0, 1 << 16, 1024).astype("<u2").tobytes())
DST16_CASES = {
    "dst16 bf16->bf16": (mova2d_config(BF, BF, BF), _BF16_TILES),
    "dst16 bf16->fp32": (mova2d_config(BF, BF, FP), _BF16_TILES),
    "dst16 bf16->bfp8": (mova2d_config(BF, BF, BFP8), _BF16_TILES),
    "dst16 bf16->bfp4": (mova2d_config(BF, BF, BFP4), _BF16_TILES),
    "dst16 bf16->bfp2": (mova2d_config(BF, BF, BFP2), _BF16_TILES),
    "dst16 bf16->e8m6->bf16": (mova2d_config(BF, BFP8, BF), _BF16_TILES),
    "dst16 bf16->e8m6->fp32": (mova2d_config(BF, BFP8, FP), _BF16_TILES),
    "dst16 bf16->e8m6->bfp8": (mova2d_config(BF, BFP8, BFP8), _BF16_TILES),
    "dst16 bf16->e8m6->bfp4": (mova2d_config(BF, BFP8, BFP4), _BF16_TILES),
    "dst16 bf16 relu3": (mova2d_config(BF, BF, BF, relu=3 << 2 | 0x4040 << 6), _BF16_TILES),
    "dst16 bf16 l1 acc": (mova2d_config(BF, BF, BF, c71=1 << 19), _BF16_TILES),
    "dst16 fp16->fp16": (mova2d_config(FP16, FP16, FP16), _FP16_TILES),
    "dst16 fp16->fp32": (mova2d_config(FP16, FP16, FP), _FP16_TILES),
    "dst16 fp16->bf16": (mova2d_config(FP16, FP16, BF), _FP16_TILES),
    "dst16 fp16->fp8(e4m3)": (mova2d_config(FP16, FP16, FP8, c71=1 << 23), _FP16_TILES),
    "dst16 fp16->e5m6->bfp8": (mova2d_config(FP16, 2, BFP8), _FP16_TILES),
    "dst16 fp16 relu2": (mova2d_config(FP16, FP16, FP16, relu=2 << 2 | 0x3C00 << 6), _FP16_TILES),
    "dst16 fp16 l1 acc": (mova2d_config(FP16, FP16, FP16, c71=1 << 19), _FP16_TILES),
    "dst16 bf16->fp16->fp8 (round10)": (mova2d_config(BF, FP16, FP8, rd=8, c71=1 << 23), _BF16_TILES),
    # unpacker conversions into an FP16-overlay SrcA, observed through MOVA2D -> Dst16b -> FP16 in L1
    "unp0 fp32->fp16 SrcA (dst16)": (mova2d_config(FP16, FP16, FP16, unpack_in=FP), GEN32),
    "unp0 fp8 e5m2 SrcA (dst16)": (mova2d_config(FP8, FP16, FP16), _gen_tiles(_bytes8)),
    "unp0 fp8 e4m3 SrcA (dst16)": (mova2d_config(FP8, FP16, FP16, c71=1 << 22), _gen_tiles(_bytes8)),
    "unp0 int8 SrcA (dst16)": (mova2d_config(I8, FP16, FP16, alu_srca=FP16), _gen_tiles(_bytes8)),
    "unp0 uint8 SrcA (dst16)": (mova2d_config(I8, FP16, FP16, c1_extra=1 << 15, alu_srca=FP16),
                                _gen_tiles(_bytes8)),
}


def _args(setup, words, n):
    flat = [n, IN_BASE, TILE, OUT_BASE, TILE, len(setup), len(words), 0]
    for a, b in setup:
        flat += [a, b]
    return flat + list(words)


def launch(dev, elf, setup, words, inputs: bytes, prior: bytes, n: int) -> bytes:
    """n tiles through pack.c on `dev`: inputs at IN_BASE, prior output contents (L1 accumulation reads them) at
    OUT_BASE; returns the output region."""
    dev.write_l1(IN_BASE, inputs)
    dev.write_l1(OUT_BASE, prior)
    run_on(dev, {"trisc0": elf}, _args(setup, words, n), step=20000, max_clocks=200_000_000)
    return dev.read_l1(OUT_BASE, n * TILE)
