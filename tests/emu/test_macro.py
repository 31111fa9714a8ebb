"""SFPLOADMACRO (functional: a macro schedule computes what the same instructions issued one by one compute) and the
cycle-model validations against the published Blackhole measurements (docs/performance.md §4):
`where` 3 / 4 cycles per row, x2 scale 306 vs 1054 cycles for 8192 FP32 values, reciprocal 1 / 3 / 5 cycles per row.

Kernels are Tensix words pushed straight into thread 1 (no RISC-V): SFPCONFIG/backdoor set-up, then REPLAY-expanded
bodies. Cycles are the thread's span from its first issue to the cycle the SFPU (including scheduled instructions)
is done."""
from __future__ import annotations

import numpy as np
import pytest

from tt_backend.chip import isa
from tt_backend.chip.errors import EmuError
from tt_backend.runtime.emu.tensix import Tensix

from tests.support.words import FP32, loadi32, loadmacro, macro_setup, seq_bits, sequence, setc16

E = isa.encode
T = 1   # the math thread
PUBLISHED_TOLERANCE = 0.15


def tensix(strict=True):
    l1 = np.zeros(1536 * 1024, np.uint8)
    tx = Tensix(l1, strict=strict)
    return tx


def push_all(tx, words):
    for w in words:
        tx.push(T, w)


def dst_incr(slot, incr):
    """ADDR_MOD_DST_SEC<slot>: Dst RWC += incr after each use (thread config 28 + slot)."""
    return setc16(28 + slot, incr)


def replay_body(body: list[int], repeats: int) -> list[int]:
    """Record `body` (<= 32 words) while executing it, then replay it `repeats - 1` more times."""
    assert len(body) <= 32
    return ([E("REPLAY", load_mode=1, execute_while_loading=1, len=len(body), start_idx=0)] + body
            + [E("REPLAY", load_mode=0, execute_while_loading=0, len=len(body), start_idx=0)] * (repeats - 1))


def fill_dst(tx, values: np.ndarray, row0=0):
    v = np.asarray(values, np.float32).view(np.uint32).reshape(-1, 16)
    tx.dst.write_rows32(row0, v)


def read_dst(tx, row0, n):
    return tx.dst.rows32[row0:row0 + n].copy()


def span(tx) -> int:
    """Cycles from the thread's first issue until the SFPU has finished everything (scheduled work included)."""
    tm = tx.tm
    return tm.sfpu_busy() - tm.first[T]


def run(tx, words):
    push_all(tx, words)
    tx.settle()
    return span(tx)


def within(measured, published):
    return abs(measured - published) <= PUBLISHED_TOLERANCE * published


# ------------------------------------------------------------------------------------------------ x2 scale
def scale_explicit(rows):
    """Per row: SFPLOAD, SFPMULI 2.0, SFPSTORE (the store auto-stalls one cycle on the MAD result)."""
    body = [E("SFPLOAD", lreg_ind=0, instr_mod0=FP32, sfpu_addr_mode=0, dest_reg_addr=0),
            E("SFPMULI", lreg_dest=0, instr_mod1=0, imm16_math=0x4000),
            E("SFPSTORE", lreg_ind=0, instr_mod0=FP32, sfpu_addr_mode=1, dest_reg_addr=0)]
    per = 8
    assert rows % per == 0
    return [dst_incr(1, 2)] + replay_body(body * per, rows // per)


def scale_macro(rows):
    """One SFPLOADMACRO per row, four LRegs in rotation: load at t, SFPMULI (MAD sub-unit) at t+1, SFPSTORE at t+3."""
    mul_tpl = E("SFPMULI", lreg_dest=0, instr_mod1=0, imm16_math=0x4000)
    seq = sequence(mad=seq_bits(4, 0), store=seq_bits(3, 2))
    setup = [dst_incr(1, 2)] + macro_setup({0: mul_tpl}, {0: seq}, misc=FP32 | (1 << 4))
    body = [loadmacro(0, vd, addr_mode=1) for vd in range(4)] * 8
    assert rows % 32 == 0
    return setup + replay_body(body, rows // 32)


def test_macro_x2_scale_matches_explicit_and_published_cycles():
    rng = np.random.default_rng(1)
    x = rng.standard_normal(8192).astype(np.float32) * 100
    rows = 8192 // 32
    results, cycles = [], []
    for build in (scale_explicit, scale_macro):
        tx = tensix()
        fill_dst(tx, x)
        cycles.append(run(tx, build(rows)))
        results.append(read_dst(tx, 0, 512))
    assert np.array_equal(results[0], results[1])
    assert np.array_equal(results[1].view(np.float32).reshape(-1), x * 2)
    explicit, macro = cycles
    print(f"\nx2 scale, 8192 FP32: explicit {explicit} cycles (published 1054), SFPLOADMACRO {macro} (published 306)")
    assert within(explicit, 1054), explicit
    assert within(macro, 306), macro


# ------------------------------------------------------------------------------------------------ reciprocal
RECIP = E("SFPARECIP", lreg_dest=0, lreg_c=0, instr_mod1=0, imm12_math=0)


def recip7(rows):
    """7-bit: SFPLOADMACRO loads x, SFPARECIP on the Simple sub-unit at t+1, SFPSTORE at t+2; 1 issue per row."""
    seq = sequence(simple=seq_bits(4, 0), store=seq_bits(3, 1))
    setup = [dst_incr(1, 2)] + macro_setup({0: RECIP}, {0: seq}, misc=FP32 | (1 << 4))
    body = [loadmacro(0, vd, addr_mode=1) for vd in range(4)] * 8
    return setup + replay_body(body, rows // 32)


def recip_bf16(rows):
    """One Newton step, rounded to BF16 (nearest): 3 issues per row, two rows per 6-word replay body.
    Row r uses the set (X, Y) = (L0, L1) or (L2, L3):
      p    SFPLOADMACRO m0 -> Y (x); Simple: Y = ARECIP(Y) at p+1
      p+1  SFPLOADMACRO m1/m2 -> X (x); MAD: X = 1 - Y*X at p+3; Round: L16 = bf16(X) at p+7; Store L16 at p+8
      p+2  SFPMAD (regular) finishing the previous row: X' = Y'*X' + Y'
    """
    mad1 = {s: E("SFPMAD", lreg_src_a=2 * s + 1, lreg_src_b=0, lreg_src_c=10, lreg_dest=0, instr_mod1=1)
            for s in (0, 1)}
    rnd = E("SFP_STOCH_RND", rnd_mode=0, instr_mod1=1, lreg_src_b=0, lreg_src_c=0, lreg_dest=0, imm8_math=0)
    tpl = {0: RECIP, 1: mad1[0], 2: mad1[1], 3: rnd}
    m1 = lambda mad_sel: sequence(mad=seq_bits(mad_sel, 1, vb_is_vd=True), rnd=seq_bits(7, 5, vd16=True),
                                  store=seq_bits(3, 6, vd16=True))
    seqs = {0: sequence(simple=seq_bits(4, 0)), 1: m1(5), 2: m1(6)}
    setup = [dst_incr(1, 2)] + macro_setup(tpl, seqs, misc=FP32)
    finish = {s: E("SFPMAD", lreg_src_a=2 * s + 1, lreg_src_b=2 * s, lreg_src_c=2 * s + 1, lreg_dest=2 * s,
                   instr_mod1=0) for s in (0, 1)}
    body = [loadmacro(0, 1, addr_mode=0), loadmacro(1, 0, addr_mode=1), finish[1],
            loadmacro(0, 3, addr_mode=0), loadmacro(2, 2, addr_mode=1), finish[0]]
    # drain: the last row's MAD1 runs two cycles after the body; its regular finishing MAD must come after that
    return setup + replay_body(body, rows // 2) + [E("SFPNOP"), E("SFPNOP"), finish[1]]


ONE = 10                            # LReg10 = 1.0
YA, EE, YB, FF = 0, 1, 2, (3, 4)    # fp32 tier registers: y0, e0, y1, (e1 -> y2) alternating between rows


def mad(va, vb, vc, vd, neg_vb=False):
    """SFPMAD: VD = VA * (+-VB) + VC (Mod1 bit 0 = NEGATE_VB)."""
    return E("SFPMAD", lreg_src_a=va, lreg_src_b=vb, lreg_src_c=vc, lreg_dest=vd, instr_mod1=1 if neg_vb else 0)


def recip_fp32(rows, e1_delay=3):
    """FP32 (<= 1 ulp): SFPARECIP + two Newton steps, 5 issues per row, two rows per 10-word replay body.
    Per row (x = the row's Dst value, loaded three times: a reload is cheaper than a register copy):
        y0 = ARECIP(x);  e0 = 1 - y0*x;  y1 = y0 + y0*e0;  e1 = 1 - y1*x;  y2 = y1 + y1*e1;  store y2
    Four MADs per row: the MAD sub-unit bounds this at 4 cycles/row, the 5 issues (3 SFPLOADMACROs + 2 SFPMADs)
    at 5. Row r starts at p = 5r; F = FF[r % 2] (F lives p+2..p+10, so two rows need two), YA/EE/YB are shared
    (lifetimes p..p+4, p+1..p+4, p+4..p+8 fit in the 5-cycle period):
      p    SFPLOADMACRO m0 -> YA (x); Simple: YA = ARECIP(YA) at p+1
      p+1  SFPLOADMACRO m1 -> EE (x); MAD: EE = 1 - YA*EE at p+2 (template 1: VA = YA, VB := VD, VC = 1.0)
      p+2  SFPLOADMACRO m2 -> F (x), RWC += 2; MAD: F = 1 - YB*F at p+6 (template 2: VA = YB, delay 3);
           Store: F -> the row at p+10 (delay 7)
      p+3  SFPMAD (regular) of the previous row: F' = YB*F' + YB (y2 of row r-1, stored by its macro at p+5)
      p+4  SFPMAD (regular): YB = YA*EE + YA
      p+8  (= the next row's p+3) SFPMAD: F = YB*F + YB
    Every MAD result is consumed two cycles later (scheduled MADs have no auto-stall); the sub-units never meet:
    MAD at p+1 (scheduled, row r-1), p+2 (scheduled), p+3, p+4 (regular); Simple at p+1; Store at p (row r-2); the
    issues at p, p+1, p+2 are loads. The first body's p+3 MAD finishes a row that does not exist (it writes F of row
    1, which row 1 reloads before use); the drain issues the last row's y2 MAD. The next row's load of YA at p+5
    directly follows the y1 MAD's read of YA at p+4: this assumes (as the functional models do) that a MAD reads
    its operands in its first cycle.
    Range: |x| in [2^-126, 2^103). Beyond 2^103 the correction products y*e fall below 2^-126 and the MAD flushes
    them to zero (SFPMAD.md), so the last step is lost (up to ~2^-7 relative near 2^126)."""
    tpl = {0: RECIP, 1: mad(YA, 0, ONE, 0, neg_vb=True), 2: mad(YB, 0, ONE, 0, neg_vb=True)}
    seqs = {0: sequence(simple=seq_bits(4, 0)),
            1: sequence(mad=seq_bits(5, 0, vb_is_vd=True)),
            2: sequence(mad=seq_bits(6, e1_delay, vb_is_vd=True), store=seq_bits(3, 7))}
    setup = [dst_incr(1, 2)] + macro_setup(tpl, seqs, misc=FP32)
    body = []
    for s in (0, 1):
        body += [loadmacro(0, YA), loadmacro(1, EE), loadmacro(2, FF[s], addr_mode=1),
                 mad(YB, FF[1 - s], YB, FF[1 - s]), mad(YA, EE, YA, YB)]
    assert rows % 2 == 0
    return setup + replay_body(body, rows // 2) + [E("SFPNOP")] * 3 + [mad(YB, FF[1], YB, FF[1])]


def recip_fp32_plain(rows):
    """The same computation (same operand order, bit-identical) with regular instructions only: 7 issues per row and
    4 auto-stalls (every instruction but the SFPARECIP waits on the previous one)."""
    X = 5
    body = [E("SFPLOAD", lreg_ind=X, instr_mod0=FP32, sfpu_addr_mode=0, dest_reg_addr=0),
            E("SFPARECIP", lreg_dest=YA, lreg_c=X, instr_mod1=0, imm12_math=0),
            mad(YA, X, ONE, EE, neg_vb=True), mad(YA, EE, YA, YB),
            mad(YB, X, ONE, FF[0], neg_vb=True), mad(YB, FF[0], YB, FF[0]),
            E("SFPSTORE", lreg_ind=FF[0], instr_mod0=FP32, sfpu_addr_mode=1, dest_reg_addr=0)]
    assert rows % 4 == 0
    return [dst_incr(1, 2)] + replay_body(body * 4, rows // 4)


def recip_check(rows, build, cycles_per_row, tolerance_bits):
    rng = np.random.default_rng(2)
    x = (rng.uniform(0.5, 2.0, rows * 32) * np.where(rng.random(rows * 32) < 0.5, -1, 1)
         * 2.0 ** rng.integers(-20, 20, rows * 32)).astype(np.float32)
    tx = tensix()
    fill_dst(tx, x)
    push_all(tx, build(rows))
    tx.settle()
    got = read_dst(tx, 0, rows * 32 // 16).view(np.float32).reshape(-1)
    rel = np.abs(got.astype(np.float64) * x - 1.0)
    assert rel.max() < 2.0 ** -tolerance_bits, rel.max()
    return span(tx), got, x


@pytest.mark.parametrize("tier,build,published,bits", [("7-bit", recip7, 1, 7), ("bf16", recip_bf16, 3, 8),
                                                        ("fp32", recip_fp32, 5, 22)])
def test_reciprocal_tiers_cycles_per_row(tier, build, published, bits):
    c1 = recip_check(64, build, published, bits)[0]
    c2 = recip_check(256, build, published, bits)[0]
    per_row = (c2 - c1) / (256 - 64)
    print(f"\nreciprocal {tier}: {per_row:.2f} cycles/row (published {published}); 256 rows in {c2} cycles")
    assert within(per_row, published), per_row


def test_reciprocal_bf16_is_correctly_rounded_bf16():
    _, got, x = recip_check(64, recip_bf16, 3, 8)
    g = got.view(np.uint32)
    assert (g & 0xFFFF == 0).all()
    ref = (1.0 / x.astype(np.float64)).astype(np.float32).view(np.uint32)
    ref_bf16 = ((ref.astype(np.uint64) + 0x8000) >> 16 << 16).astype(np.uint32)   # nearest, ties away
    assert (g == ref_bf16).mean() > 0.97


def ulp_distance(got: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """|got - ref| in units in the last place for same-signed finite float32 values (bit patterns as integers)."""
    g, r = got.view(np.int32).astype(np.int64), ref.view(np.int32).astype(np.int64)
    assert ((g < 0) == (r < 0)).all()
    return np.abs(g - r)


def run_recip(build, rows, x):
    tx = tensix()
    fill_dst(tx, x)
    push_all(tx, build(rows))
    tx.settle()
    return span(tx), read_dst(tx, 0, rows * 2).view(np.float32).reshape(-1)


def test_reciprocal_fp32_within_one_ulp_and_same_as_plain_instructions():
    """Random inputs, both signs, binary exponents -126..102 (plus standard-normal values scaled by 2^-100..2^100):
    the macro schedule is bit-identical to the same instructions issued one by one, and within 1 ulp of numpy's
    correctly rounded float32 1/x (about 91% exact)."""
    rows = 256
    rng = np.random.default_rng(7)
    n = rows * 32
    sign = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    wide = (rng.uniform(1.0, 2.0, n) * sign * 2.0 ** rng.integers(-126, 103, n)).astype(np.float32)
    normal = (rng.standard_normal(n) * 2.0 ** rng.integers(-100, 100, n)).astype(np.float32)
    for x in (wide, normal):
        c_macro, got = run_recip(recip_fp32, rows, x)
        c_plain, plain = run_recip(recip_fp32_plain, rows, x)
        assert np.array_equal(got.view(np.uint32), plain.view(np.uint32))
        ulps = ulp_distance(got, np.float32(1) / x)
        print(f"\nreciprocal fp32, {rows} rows: max {ulps.max()} ulp, {np.mean(ulps == 0):.3f} exact; "
              f"{c_macro} cycles with SFPLOADMACRO, {c_plain} issued one by one")
        assert ulps.max() <= 1
        assert c_macro < c_plain / 2


def test_reciprocal_fp32_schedule_is_tight():
    """One cycle earlier for the scheduled e1 MAD (delay 2: p+5) reads YB one cycle after the regular y1 MAD wrote
    it: no auto-stall protects a macro-scheduled consumer, so strict mode rejects it."""
    tx = tensix()
    fill_dst(tx, np.ones(4 * 32, np.float32))
    with pytest.raises(EmuError, match="one cycle after a MAD wrote it"):
        push_all(tx, recip_fp32(4, e1_delay=2))
        tx.settle()


# ------------------------------------------------------------------------------------------------ where
SETCC_EQ0 = E("SFPSETCC", lreg_dest=0, lreg_c=0, instr_mod1=6, imm12_math=0)
SETCC_NE0 = E("SFPSETCC", lreg_dest=0, lreg_c=0, instr_mod1=2, imm12_math=0)
ENCC_ALL = E("SFPENCC", lreg_dest=0, instr_mod1=0, imm12_math=0)          # LaneFlags = true
ENCC_USE = E("SFPENCC", lreg_dest=0, instr_mod1=2, imm12_math=1)          # UseLaneFlagsForLaneEnable = true
# Dst layout: cond, a, b, out in 128-row quarters of Dst32b (up to 64 SFPU rows of 32 lanes each).
C0, A0, B0, O0 = 0, 128, 256, 384


def where_in_place(rows):
    """a = cond ? a : b, in place over a: 3 issues per row (period 3):
      p    SFPLOADMACRO m1 -> Yreg from a's address (lanes don't matter: it is only there for the store address);
           schedules ENCC at p+6 and SFPSTORE Yreg -> a's address at p+6
      p+1  SFPLOAD Yreg <- b (all lanes enabled)
      p+2  SFPLOADMACRO m0 -> L1 <- cond; schedules SETCC (LaneFlags = cond == 0) at p+5
    The store at p+6 writes b only where cond == 0; cycle p+6 (the next-but-one row's don't-care load) is the only
    cycle with lanes masked. Yreg alternates L0 / L3."""
    seqs = {0: sequence(simple=seq_bits(4, 2)), 1: sequence(simple=seq_bits(5, 5), store=seq_bits(3, 5))}
    setup = [dst_incr(1, 2), ENCC_USE] + macro_setup({0: SETCC_EQ0, 1: ENCC_ALL}, seqs, misc=FP32 | (1 << 5))
    body = []
    for yreg in (0, 3):
        body += [loadmacro(1, yreg, imm10=A0), E("SFPLOAD", lreg_ind=yreg, instr_mod0=FP32, sfpu_addr_mode=0,
                                                  dest_reg_addr=B0), loadmacro(0, 1, imm10=C0, addr_mode=1)]
    return setup + replay_body(body * 5, rows // 10) + [E("SFPNOP")] * 6


def where_out_of_place(rows):
    """out = cond ? a : b: 4 issues per row (period 4):
      p    SFPLOADMACRO m1 -> Yreg from out's address (don't care); ENCC at p+4, SFPSTORE Yreg -> out at p+5
      p+1  SFPLOADMACRO m0 -> L1 <- cond; SETCC (LaneFlags = cond != 0) at p+2
      p+2  SFPLOAD Yreg <- b (all lanes)
      p+3  SFPLOAD Yreg <- a (lanes where cond != 0)"""
    seqs = {0: sequence(simple=seq_bits(4, 0)), 1: sequence(simple=seq_bits(5, 3), store=seq_bits(3, 4))}
    setup = [dst_incr(1, 2), ENCC_USE] + macro_setup({0: SETCC_NE0, 1: ENCC_ALL}, seqs, misc=FP32 | (1 << 5))
    body = []
    for yreg in (0, 3):
        body += [loadmacro(1, yreg, imm10=O0), loadmacro(0, 1, imm10=C0),
                 E("SFPLOAD", lreg_ind=yreg, instr_mod0=FP32, sfpu_addr_mode=0, dest_reg_addr=B0),
                 E("SFPLOAD", lreg_ind=yreg, instr_mod0=FP32, sfpu_addr_mode=1, dest_reg_addr=A0)]
    return setup + replay_body(body * 4, rows // 8) + [E("SFPNOP")] * 6


def where_data(rng, n):
    cond = np.where(rng.random(n) < 0.5, 0.0, rng.standard_normal(n)).astype(np.float32)
    return cond, rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)


@pytest.mark.parametrize("build,published,out_row,sizes", [(where_in_place, 3, A0, (20, 60)),
                                                             (where_out_of_place, 4, O0, (16, 64))])
def test_where_cycles_per_row_and_result(build, published, out_row, sizes):
    spans = []
    for rows in sizes:
        rng = np.random.default_rng(rows)
        n = rows * 32
        cond, a, b = where_data(rng, n)
        tx = tensix()
        tx.dst.write_rows32(0, np.zeros((512, 16), np.uint32))
        for row0, v in ((C0, cond), (A0, a), (B0, b)):
            fill_dst(tx, v, row0)
        spans.append((rows, run(tx, build(rows))))
        got = read_dst(tx, out_row, n // 16).view(np.float32).reshape(-1)
        assert np.array_equal(got, np.where(cond != 0, a, b))
    (r1, c1), (r2, c2) = spans
    per_row = (c2 - c1) / (r2 - r1)
    print(f"\nwhere {build.__name__}: {per_row:.2f} cycles/row (published {published}); {r2} rows in {c2} cycles")
    assert within(per_row, published), per_row


# ------------------------------------------------------------------------------------------------ semantics
def test_macro_equals_plain_instructions_with_lreg16_and_store_mod0():
    """Scheduled SFPMUL writing LReg16 + a store reading LReg16 with StoreMod0 = BF16 = plain SFPMUL into L5 and an
    SFPSTORE BF16 of L5."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal(1024).astype(np.float32)
    mul = E("SFPMUL", lreg_src_a=7, lreg_src_b=0, lreg_src_c=9, lreg_dest=0, instr_mod1=0)
    seq = sequence(mad=seq_bits(4, 0, vd16=True, vb_is_vd=True), store=seq_bits(3, 2, vd16=True))
    out = []
    for use_macro in (False, True):
        tx = tensix()
        fill_dst(tx, x)
        words = [dst_incr(1, 2)] + loadi32(7, 0x40400000)   # L7 = 3.0
        if use_macro:
            words += macro_setup({0: mul}, {2: seq}, misc=2)          # StoreMod0 = BF16, macro 2 uses it
            # one macro every other cycle: LReg16 is a single register and the MAD takes two cycles
            for vd in (0, 1, 2, 3, 4, 5, 6) * 4:
                words += [loadmacro(2, vd, addr_mode=1), E("SFPNOP")]
            words += [E("SFPNOP")] * 3
        else:
            for _ in range(28):
                words += [E("SFPLOAD", lreg_ind=0, instr_mod0=FP32, sfpu_addr_mode=0, dest_reg_addr=0),
                          E("SFPMUL", lreg_src_a=7, lreg_src_b=0, lreg_src_c=9, lreg_dest=5, instr_mod1=0),
                          E("SFPSTORE", lreg_ind=5, instr_mod0=2, sfpu_addr_mode=1, dest_reg_addr=0)]
        push_all(tx, words)
        tx.settle()
        out.append(tx.dst.read16(np.repeat(np.arange(128), 16), np.tile(np.arange(16), 128)))
    assert np.array_equal(out[0], out[1])


def test_instruction_counted_delay_waits_for_issued_sfpu_instructions():
    """UnitDelayKind = instructions: the scheduled store waits for 3 more SFPU instructions, however late."""
    tx = tensix()
    fill_dst(tx, np.arange(16 * 8, dtype=np.float32))
    seq = sequence(store=seq_bits(3, 3))
    words = macro_setup({}, {0: seq}, misc=FP32 | (1 << 4) | (1 << 11)) + [loadmacro(0, 2, imm10=0)]
    words += loadi32(2, 0x41200000)                      # two SFPLOADIs: L2 = 10.0 (not yet stored)
    push_all(tx, words)
    tx.settle()
    assert tx.dst.rows32[0, 0] == np.float32(0).view(np.uint32)
    push_all(tx, [E("SFPNOP")])                          # third instruction: counts to 0, store runs next cycle
    push_all(tx, [E("SFPNOP")])
    assert tx.dst.rows32[0, 0] == np.float32(10).view(np.uint32)


def test_strict_slot_collision_is_an_error():
    tx = tensix()
    fill_dst(tx, np.ones(128, np.float32))
    seq = sequence(mad=seq_bits(4, 0))
    words = macro_setup({0: E("SFPMULI", lreg_dest=0, instr_mod1=0, imm16_math=0x4000)}, {0: seq}, misc=0)
    words += [loadmacro(0, 0), E("SFPMULI", lreg_dest=1, instr_mod1=0, imm16_math=0x4000)]
    with pytest.raises(EmuError, match="collides with an SFPLOADMACRO-scheduled"):
        push_all(tx, words)


def test_non_strict_collision_drops_the_regular_instruction():
    tx = tensix(strict=False)
    fill_dst(tx, np.ones(128, np.float32))
    seq = sequence(mad=seq_bits(4, 0))
    words = macro_setup({0: E("SFPMULI", lreg_dest=0, instr_mod1=0, imm16_math=0x4000)}, {0: seq}, misc=0)
    words += loadi32(1, 0x3F800000)
    words += [loadmacro(0, 0), E("SFPMULI", lreg_dest=1, instr_mod1=0, imm16_math=0x4000)]
    push_all(tx, words)
    tx.settle()
    assert (tx.sfpu.lreg[0] == np.float32(2).view(np.uint32)).all()
    assert (tx.sfpu.lreg[1] == np.float32(1).view(np.uint32)).all()      # dropped


def test_macro_mad_consumed_next_cycle_is_an_error():
    tx = tensix()
    fill_dst(tx, np.ones(128, np.float32))
    seq = sequence(mad=seq_bits(4, 0), store=seq_bits(3, 1))       # store at t+2 reads the MAD of t+1
    words = macro_setup({0: E("SFPMULI", lreg_dest=0, instr_mod1=0, imm16_math=0x4000)}, {0: seq}, misc=FP32)
    with pytest.raises(EmuError, match="no auto-stall inside"):
        push_all(tx, words + [loadmacro(0, 0), E("SFPNOP"), E("SFPNOP"), E("SFPNOP")])
        tx.settle()


def test_simple_and_round_same_cycle_need_one_lreg16():
    tx = tensix()
    fill_dst(tx, np.ones(128, np.float32))
    tpl = {0: E("SFPABS", lreg_dest=0, lreg_c=0, instr_mod1=1),
           1: E("SFP_STOCH_RND", rnd_mode=0, instr_mod1=1, lreg_src_b=0, lreg_src_c=0, lreg_dest=0, imm8_math=0)}
    seq = sequence(simple=seq_bits(4, 0), rnd=seq_bits(5, 0))
    with pytest.raises(EmuError, match="exactly one of them with VD == 16"):
        push_all(tx, macro_setup(tpl, {0: seq}, misc=0) + [loadmacro(0, 0), E("SFPNOP"), E("SFPNOP")])
