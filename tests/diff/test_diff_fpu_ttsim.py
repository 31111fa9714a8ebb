"""Differential tests of the Matrix Unit (FPU): the same unpack -> FPU -> pack programs (tests/programs/fpu, modelled on
docs/fpu_path.md §8/9) run on EmuDevice and on ttsim (the oracle); the packed FP32 output tiles must match bit for bit.

Inputs are random and biased to specials (+-0, denormals, Inf, NaN, extreme exponents, powers of two). Each case
compares 1024 outputs per tile. Skipped unless TT_SIMULATOR points at libttsim.so and the RISC-V compiler exists.
"""
from __future__ import annotations

import zlib

import numpy as np
import pytest

from tt_backend.chip.isa import encode
from tt_backend.runtime.emu.device import EmuDevice
from tt_backend.runtime.ttsim_device import TtsimDevice

from tests.support import fpu_scripts as fs, ttsim_path
from tests.support.fpu_scripts import BF16, FP16, INT8, PHASES, TF32, Case, inputs, mild_inputs
from tests.support.words import setc16

LIB = ttsim_path()
pytestmark = [pytest.mark.ttsim, pytest.mark.needs_program_cc]


def diff(case: Case, min_nonzero: float = 0.25) -> int:
    """Run on both; assert bit-identical output tiles; return the number of outputs compared."""
    sim = TtsimDevice(LIB)
    try:
        want = np.frombuffer(fs.run_case(sim, case), np.uint32)
    finally:
        sim.close()
    got = np.frombuffer(fs.run_case(EmuDevice(), case), np.uint32)
    bad = np.nonzero(got != want)[0]
    detail = ", ".join(f"[{i}] emu {got[i]:08X} ttsim {want[i]:08X}" for i in bad[:6])
    assert not len(bad), f"{case.name}: {len(bad)} of {len(want)} outputs differ: {detail}"
    assert np.count_nonzero(want) > min_nonzero * len(want), f"{case.name}: suspiciously empty output"
    return len(want)


def seed(*parts) -> int:
    """Stable across processes (str hashes are salted)."""
    return zlib.crc32(repr(parts).encode())


FIDS = list(PHASES)
SETRWC_AB = encode("SETRWC", bit_mask=3)                     # SrcA/SrcB RWCs := 0
RELEASE = encode("SETRWC", clear_ab_vld=3)                   # hand both banks back to the unpacker
WAIT_AB = encode("STALLWAIT", stall_res=0x40, wait_res=0x180)   # FPU waits until SrcA/SrcB are the FPU's (C7, C8)


@pytest.mark.parametrize("fmt", [BF16, TF32])
@pytest.mark.parametrize("fid", FIDS)
def test_elwmul(fid, fmt):
    setup, words = fs.elwmul_words(PHASES[fid])
    a, b = inputs(seed(fid, fmt), fmt)
    diff(Case(f"ELWMUL {fid} {fmt}", fmt, words, a, b, setup))


@pytest.mark.parametrize("fid", ["HiFi3", "HiFi4"])
def test_elwmul_phases_outer(fid):
    setup, words = fs.elwmul_phases_outer_words(PHASES[fid])
    a, b = inputs(17, BF16)
    diff(Case(f"ELWMUL phases-outer {fid}", BF16, words, a, b, setup))


@pytest.mark.parametrize("mod", [1, 2, 3])
def test_elwmul_broadcast(mod):
    setup, words = fs.elwmul_words(2, mod)
    a, b = inputs(20 + mod, TF32, 2)
    diff(Case(f"ELWMUL HiFi2 bcast {mod}", TF32, words, a, b, setup))


@pytest.mark.parametrize("fmt", [BF16, TF32])
@pytest.mark.parametrize("fid", FIDS)
@pytest.mark.parametrize("data", ["specials", "mild"])
def test_mvmul(fid, fmt, data):
    setup, words = fs.mvmul_words(PHASES[fid])
    sd = seed(fid, fmt, data)
    a, b = inputs(sd, fmt) if data == "specials" else mild_inputs(sd, fmt)
    diff(Case(f"MVMUL {fid} {fmt} {data}", fmt, words, a, b, setup))


@pytest.mark.parametrize("fmt", [BF16, TF32])
@pytest.mark.parametrize("name", ["ELWADD", "ELWSUB"])
@pytest.mark.parametrize("mod", [0, 3])
def test_elwadd_elwsub(name, fmt, mod):
    setup, words = fs.elwadd_words(name, 0, mod)
    a, b = inputs(seed(name, fmt, mod), fmt)
    diff(Case(f"{name} {fmt} mod{mod}", fmt, words, a, b, setup))


@pytest.mark.parametrize("fmt", [BF16, TF32])
def test_multi_pass_accumulate(fmt):
    """ELWMUL HiFi2, then ELWADD with dest_accum_en, then ELWSUB with dest_accum_en on the same banks and Dst."""
    s1, w1 = fs.elwmul_words(2)
    _, w2 = fs.elwadd_words("ELWADD", 1)
    _, w3 = fs.elwadd_words("ELWSUB", 1, 2)
    words = []
    for part in (w1, w2):
        words += [w & ~(3 << 22) for w in part] + [0x37000007]   # SETRWC: SrcA/SrcB/Dst back to 0
    words += w3
    a, b = inputs(31 if fmt == BF16 else 32, fmt)
    diff(Case(f"ELWMUL+ELWADD+ELWSUB {fmt}", fmt, words, a, b, s1))


def test_gapool():
    """ttsim's GAPOOL: MVMUL on 4 SrcB rows (instr_mod19 = 1); SrcB rows 0, 8, .. 56 (must be multiples of 8)."""
    words = [SETRWC_AB]
    for i in range(8):
        words.append(encode("GAPOOL", dst=4 * i, pool_addr_mode=7, instr_mod19=1))
        if i < 7:
            words.append(encode("INCRWC", rwc_b=8))
    words.append(RELEASE)
    a, b = mild_inputs(41, BF16, 2)
    diff(Case("GAPOOL bf16", BF16, words, a, b, []))


@pytest.mark.parametrize("fmt", [BF16, TF32])
def test_gmpool(fmt):
    """Column max of each 16-row SrcA face into one Dst row (+3 zeroed rows), from undefined (ZEROACC'd) Dst and
    again on top of the result; SrcB row 0 = 1.0 (the only scale ttsim models)."""
    a, b = inputs(51, fmt, 2)
    b = b.copy()
    b[:, :16] = 0x3F80 if fmt == BF16 else 0x3F800000
    words = [SETRWC_AB]
    for rep in range(2):
        for f in range(4):
            words.append(encode("GMPOOL", dst=4 * f + 16 * rep, pool_addr_mode=5, instr_mod19=1))
    words.append(encode("GMPOOL", dst=20, pool_addr_mode=7, instr_mod19=1))   # face 0 on top of face 1's max
    words.append(RELEASE)
    setup = [setc16(17, 0x0010), setc16(33, 0)]                # slot 5: SrcA += 16 (wraps after 4 faces)
    diff(Case(f"GMPOOL {fmt}", fmt, words, a, b, setup), min_nonzero=0.1)


def test_movb2a_then_elwmul():
    """SrcB rows -> SrcA rows (4 at a time, denormals flushed), then ELWMUL HiFi4 = B*B."""
    words = [WAIT_AB, SETRWC_AB] + [encode("MOVB2A", srca=0, srcb=0, instr_mod=2, addr_mode=6)] * 16
    s, w = fs.elwmul_words(4)
    a, b = inputs(61, TF32, 2)
    diff(Case("MOVB2A+ELWMUL", TF32, words + [SETRWC_AB] + w, a, b, s + [setc16(18, 0x0404), setc16(34, 0)]))


def test_mova2d_movb2d_tf32():
    """MOVA2D (TF32 -> Dst32b rows) for faces 0-1, MOVB2D (4-row copy and column-0 broadcast) for faces 2-3."""
    words = [0x37000003]
    for i in range(4):
        words.append(encode("MOVA2D", dst=8 * i, src=8 * i, instr_mod=2, addr_mode=7))
    for i in range(4):
        words.append(encode("MOVB2D", dst=32 + 4 * i, src=4 * i, movb2d_instr_mod=4, addr_mode=7))
    for i in range(4):
        words.append(encode("MOVB2D", dst=48 + 4 * i, src=16 + 4 * i, movb2d_instr_mod=5, addr_mode=7))
    words.append(RELEASE)
    a, b = inputs(71, TF32, 2)
    diff(Case("MOVA2D+MOVB2D tf32", TF32, words, a, b, []))


def test_movb2d_broadcast_row_tf32():
    words = [0x37000003]
    for i in range(8):
        words.append(encode("MOVB2D", dst=8 * i, src=8 * i, movb2d_instr_mod=2 + (i & 1), addr_mode=7))
    words.append(RELEASE)
    a, b = inputs(72, TF32, 1)
    diff(Case("MOVB2D bcast tf32", TF32, words, a, b, []))


def test_movd2b_movd2a_roundtrip():
    """ELWMUL HiFi4 into Dst, MOVD2B/MOVD2A copy Dst rows back into SrcB/SrcA (truncated to TF32), ELWADD with
    accumulate adds them to Dst again."""
    s, w = fs.elwmul_words(4)
    words = [x & ~(3 << 22) for x in w] + [0x37000007]
    for i in range(16):
        words.append(encode("MOVD2B", dst=4 * i, src=4 * i, instr_mod=2, addr_mode=7))
    for i in range(16):
        words.append(encode("MOVD2A", dst=4 * i, src=4 * i, instr_mod=2, addr_mode=7))
    _, w2 = fs.elwadd_words("ELWADD", 1)
    words += [0x37000007] + w2
    a, b = mild_inputs(81, TF32, 2)
    diff(Case("MOVD2A/MOVD2B round trip", TF32, words, a, b, s))


def test_trnspsrcb_then_mvmul():
    s, w = fs.mvmul_words(2)
    a, b = mild_inputs(91, BF16, 2)
    diff(Case("TRNSPSRCB+MVMUL", BF16, [0x16000000] + w, a, b, s))


def test_zerosrc_then_elwadd():
    """ZEROSRC of the FPU's SrcB bank (write_mode 1): ELWADD then copies A exactly (denormals flushed)."""
    _, w = fs.elwadd_words("ELWADD")
    a, b = inputs(95, BF16, 2)
    diff(Case("ZEROSRC+ELWADD", BF16, [WAIT_AB, encode("ZEROSRC", src_mask=2, write_mode=1)] + w, a, b,
              [setc16(13, 0x0808), setc16(29, 0x8008)]))


@pytest.mark.parametrize("dst16", [False, True])
@pytest.mark.parametrize("mode,where", [(2, 0), (2, 1), (3, 0)])
def test_zeroacc_half_and_all(mode, where, dst16):
    """ELWMUL HiFi2 twice with ZEROACC clear-half / clear-all in between: rows of the cleared half start again."""
    s, w = fs.elwmul_words(2)
    first = [x & ~(3 << 22) for x in w] + [0x37000007]
    zero = [encode("ZEROACC", clear_mode=mode, use_32_bit_mode=0 if dst16 else 1, where=where, addr_mode=7)]
    a, b = inputs(seed("zeroacc", mode, where), BF16, 1)
    diff(Case(f"ZEROACC mode {mode} where {where}", BF16, first + zero + w, a, b, s, dst16=dst16))


def test_zeroacc_row_and_all_modes():
    """ELWMUL HiFi4 once, then ZEROACC one FP32 row (mode 0 + 32-bit) and ELWMUL again with accumulation."""
    s, w = fs.elwmul_words(4)
    first = [x & ~(3 << 22) for x in w] + [0x37000007]
    zero = [encode("ZEROACC", clear_mode=0, where=r, addr_mode=7) for r in (3, 17, 40, 63)]
    a, b = inputs(97, TF32, 1)
    diff(Case("ZEROACC rows", TF32, first + zero + [0x37000007] + w, a, b, s))


@pytest.mark.parametrize("fmt", [BF16, TF32])
@pytest.mark.parametrize("fid", ["LoFi", "HiFi4"])
@pytest.mark.parametrize("op", ["ELWMUL", "MVMUL"])
def test_bf16_dst(op, fid, fmt):
    """16-bit (BF16) Dst: every accumulation rounds away 13 low bits and renormalises to BF16 (Dst16b rows)."""
    setup, words = (fs.elwmul_words if op == "ELWMUL" else fs.mvmul_words)(PHASES[fid])
    a, b = inputs(seed(op, fid, fmt, 16), fmt) if op == "ELWMUL" else mild_inputs(seed(fid, fmt), fmt)
    diff(Case(f"{op} {fid} {fmt} BF16 Dst", fmt, words, a, b, setup, dst16=True))


@pytest.mark.parametrize("name", ["ELWADD", "ELWSUB"])
def test_bf16_dst_elwadd(name):
    setup, words = fs.elwadd_words(name, 0, 0)
    a, b = inputs(seed(name, 16), BF16)
    diff(Case(f"{name} BF16 Dst", BF16, words, a, b, setup, dst16=True))


@pytest.mark.parametrize("dst16", [False, True])
@pytest.mark.parametrize("fid", ["LoFi", "HiFi2", "HiFi4"])
@pytest.mark.parametrize("op", ["ELWMUL", "MVMUL"])
def test_fp16_sources(op, fid, dst16):
    """FP16 Src (5-bit exponent path) into an FP32 Dst or an FP16 Dst."""
    setup, words = (fs.elwmul_words if op == "ELWMUL" else fs.mvmul_words)(PHASES[fid])
    a, b = inputs(seed(op, fid, "fp16"), FP16)
    diff(Case(f"{op} {fid} fp16 {'FP16' if dst16 else 'FP32'} Dst", FP16, words, a, b, setup, dst16=dst16))


@pytest.mark.parametrize("dst16", [False, True])
@pytest.mark.parametrize("name", ["ELWADD", "ELWSUB"])
def test_fp16_elwadd(name, dst16):
    setup, words = fs.elwadd_words(name, 0, 0)
    a, b = inputs(seed(name, "fp16"), FP16)
    diff(Case(f"{name} fp16", FP16, words, a, b, setup, dst16=dst16))


@pytest.mark.parametrize("fid", ["LoFi", "HiFi4"])
@pytest.mark.parametrize("op", ["ELWMUL", "MVMUL", "ELWADD"])
def test_int8(op, fid):
    """INT8 math: Src Integer "8" operands, the phase masks of the magnitude bits, saturating INT32 Dst."""
    if op == "ELWADD":
        if fid != "LoFi":
            pytest.skip("no phases")
        setup, words = fs.elwadd_words("ELWADD", 0, 0)
    else:
        setup, words = (fs.elwmul_words if op == "ELWMUL" else fs.mvmul_words)(PHASES[fid])
    a, b = inputs(seed(op, fid, "int8"), INT8)
    diff(Case(f"{op} {fid} int8", INT8, words, a, b, setup))
