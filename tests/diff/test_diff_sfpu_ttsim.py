"""SFPU differential suite: the same three TRISC ELFs (tests/programs/sfpu/sfpu_diff.c) on EmuDevice (our emulator) and
on ttsim (the oracle); the packed Dst image must match bit for bit.

How it works (tests/support/sfpu_gen.py has the details): the host writes 8 fp32 tiles of raw operand patterns (= the
whole Dst32b, 256 "units" of 32 lanes) and a table of Tensix words into L1. TRISC0 unpacks the tiles into Dst,
TRISC1 pushes the table word by word (each case: SFPLOAD L0-L7 raw, predication prologue, the instruction under
test, a predicated store of 1.0 that records the lane enables, SFPSTORE L0-L7 raw), TRISC2 packs Dst back to L1.
Every case owns 9-10 units, ~25 cases per launch.

Skipped unless TT_SIMULATOR points at libttsim.so (CI cannot build ttsim). Case count per (instruction, mode):
TT_DIFF_CASES (default 100: ~30 s with ttsim, a few minutes on a loaded machine); TT_DIFF_CASES=1000 is the full
sweep (~170k cases, ~4 min CPU). TT_DIFF_ONLY=<substring> restricts the keys; TT_DIFF_SEED changes the random
stream. `python -m tests.diff.test_diff_sfpu_ttsim [n] [only]` prints the per-key counts. The regression tests at
the end need no ttsim. What ttsim refuses (and is therefore never generated): gen.EXCLUDED.
"""
from __future__ import annotations

import collections
import os
import random
import sys
import time

import numpy as np
import pytest

from tt_backend.chip import isa, layout
from tt_backend.chip.numerics.dst import Dst
from tt_backend.chip.numerics.sfpu.functional import FunctionalSFPU
from tt_backend.runtime.emu.device import EmuDevice
from tt_backend.runtime.ttsim_device import TtsimDevice

from tests.support import programs, sfpu_gen as gen, ttsim_path
from tests.support.harness import run_on

LIB = ttsim_path()
N_CASES = int(os.environ.get("TT_DIFF_CASES", "100"))
ONLY = os.environ.get("TT_DIFF_ONLY", "")
SEED = int(os.environ.get("TT_DIFF_SEED", "20261130"))
IN_BASE, OUT_BASE, PROG_BASE = 0x20000, 0x40000, 0x60000
SYNC_WORD = layout.SYNC_BASE + 0x80        # TRISC0's "semaphores initialised" word

E = isa.encode


def tensix_defines() -> dict[str, int]:
    """The fixed Tensix words of sfpu_diff.c (docs/sfpu_path.md §3-7, 10)."""
    return {
        "W_SETDMAREG_BASE": E("SETDMAREG"),
        "W_SEMINIT_UNPACKED": E("SEMINIT", max_value=1, init_value=0, sem_sel=1),
        "W_SEMINIT_MATHDONE": E("SEMINIT", max_value=1, init_value=0, sem_sel=2),
        "W_UNP_ADCXY_RESET": E("SETADCXY", cnt_set_mask=1, bit_mask=0xB),
        "W_UNP_ADCZW_RESET": E("SETADCZW", cnt_set_mask=1, bit_mask=0xF),
        "W_UNP_ADCXX_FACE": E("SETADCXX", cnt_set_mask=1, x_end2=255, x_start=0),
        "W_SRCA_OVRD_OFF": E("SETC16", setc16_reg=5, setc16_value=0),
        "W_STALL_CFG_UNPACK": E("STALLWAIT", stall_res=0x80, wait_res=0x3),
        "W_WRCFG_UNP_BASE": E("WRCFG", gpr_address=4, cfg_reg=76),
        "W_WRCFG_UNP_DEST": E("WRCFG", gpr_address=5, cfg_reg=84),
        "W_UNP_ADCZW_TILE": E("SETADCZW", cnt_set_mask=1, bit_mask=0x5),
        "W_UNPACR_DST_FACE": E("UNPACR", addr_mode=0x11, ovrd_thread_id=1, last=1),
        "W_STALL_SYNC_UNPACK": E("STALLWAIT", stall_res=0x2, wait_res=0x2),
        "W_SEMPOST_UNPACKED": E("SEMPOST", sem_sel=1),
        "W_DST_SEC1_INCR2": E("SETC16", setc16_reg=29, setc16_value=2),
        "W_MATH_OFFSET0": E("SETC16", setc16_reg=1, setc16_value=0),
        "W_SETRWC_DST": E("SETRWC", bit_mask=0x4),
        "W_STALL_SYNC_MATH": E("STALLWAIT", stall_res=0x2, wait_res=0x810),
        "W_SEMPOST_MATHDONE": E("SEMPOST", sem_sel=2),
        "W_PACK_SEC0": E("SETC16", setc16_reg=37, setc16_value=4),
        "W_PACK_SEC1": E("SETC16", setc16_reg=38, setc16_value=0x1020),
        "W_PACK_SEC2": E("SETC16", setc16_reg=39, setc16_value=0x2020),
        "W_PCK_ADCXY_RESET": E("SETADCXY", cnt_set_mask=4, bit_mask=0xB),
        "W_PCK_ADCZW_RESET": E("SETADCZW", cnt_set_mask=4, bit_mask=0xF),
        "W_PCK_ADCXX_ROW": E("SETADCXX", cnt_set_mask=4, x_end2=15, x_start=0),
        "W_STALL_CFG_PACK": E("STALLWAIT", stall_res=0x80, wait_res=0x9),
        "W_WRCFG_PCK_DEST": E("WRCFG", gpr_address=4, cfg_reg=69),
        "W_WRCFG_PCK_OFFSET": E("WRCFG", gpr_address=5, cfg_reg=180),
        "W_PACR_ROWS": E("PACR", addr_mode=0),
        "W_PACR_NEXT_FACE": E("PACR", addr_mode=1),
        "W_PACR_LAST": E("PACR", addr_mode=2, last=1),
        "W_STALL_SYNC_PACK": E("STALLWAIT", stall_res=0x2, wait_res=0x8),
        "SYNC_WORD": SYNC_WORD,
    }


# keys whose cases are split over several sub-keys: flag sequences count for ~17 (SFPENCC/SETCC/PUSHC/POPC/COMPC
# modes), SFPCONFIG LaneConfig cases for 4 SFPSWAP/lanecfg values
MULTIPLIER = {"flagseq": 16, "SFPCONFIG/dest=15": 3, "chain": 2}

_ROLE = {"trisc0": "TRISC_UNPACK", "trisc1": "TRISC_MATH", "trisc2": "TRISC_PACK"}


def build_elfs() -> dict[str, bytes]:
    """tests/programs/sfpu/sfpu_diff.c for the three TRISCs (tests/support/programs.py, cached)."""
    defs = {k: f"{v:#x}u" for k, v in tensix_defines().items()}
    return {core: programs.compile_prog("sfpu/sfpu_diff.c", core, defines={role: None, **defs})
            for core, role in _ROLE.items()}


class Runner:
    """One device + the launch loop (generation numbers keep the start-up handshake fresh)."""

    def __init__(self, device, elfs):
        self.dev, self.elfs, self.gen = device, elfs, 0
        self.seconds = 0.0

    def run(self, img: np.ndarray, words: list[int], alu_cfg: int) -> np.ndarray:
        self.gen += 1
        d = self.dev
        d.write_l1(IN_BASE, img.astype("<u4").tobytes())
        d.write_l1(OUT_BASE, bytes(img.nbytes))
        d.write_l1(PROG_BASE, np.asarray(words, dtype="<u4").tobytes())
        args = [gen.N_SLOTS, IN_BASE, OUT_BASE, PROG_BASE, len(words), alu_cfg]
        t0 = time.perf_counter()
        run_on(d, self.elfs, args, generation=self.gen, step=20000, max_clocks=200_000_000)
        out = np.frombuffer(d.read_l1(OUT_BASE, img.nbytes), dtype="<u4").reshape(img.shape).copy()
        self.seconds += time.perf_counter() - t0
        return out


def case_keys(c: gen.Case) -> list[str]:
    return [c.key, *c.counts]


def describe(c: gen.Case, img: np.ndarray, got: np.ndarray, want: np.ndarray) -> str:
    lines = [f"case {c.key}: words " + " ".join(isa.disasm(w) for w in gen.case_words(c))]
    names = [f"L{k}" for k in range(8)] + ["flags"] + [f"scratch{i}" for i in range(c.scratch)]
    for i, u in enumerate(c.units):
        r, col = gen.dst_index(u)
        bad = np.nonzero(got[r, col] != want[r, col])[0]
        for lane in bad[:4]:
            ins = " ".join(f"L{k}={img[gen.dst_index(c.units[k])][lane]:#010x}" for k in range(8))
            lines.append(f"  {names[i]} lane {lane}: emu {got[r, col][lane]:#010x} ttsim {want[r, col][lane]:#010x}"
                         f"   inputs {ins}")
    return "\n".join(lines)


def sweep(n_cases: int, only: str = "", seed: int = SEED, verbose: bool = False):
    """Generate >= n_cases cases per key, run them on both devices; returns (counts, mismatches, stats)."""
    r = random.Random(seed)
    nrng = np.random.default_rng(seed)
    gens = gen.generators()
    by_cfg: dict[str, list[gen.Case]] = collections.defaultdict(list)
    for key, (cfg, fn) in gens.items():
        if only and only not in key:
            continue
        n = n_cases * MULTIPLIER.get(key.split(",")[0], 1)
        by_cfg[cfg] += [fn(r) for _ in range(n)]
    elfs = build_elfs()
    emu, sim = Runner(EmuDevice(), elfs), Runner(TtsimDevice(LIB), elfs)
    counts, mism = collections.Counter(), []
    mism_keys = collections.Counter()
    launches = 0
    try:
        for cfg, cases in by_cfg.items():
            r.shuffle(cases)
            for batch in gen.pack(cases):
                img, words = gen.launch_image(batch, nrng)
                want = sim.run(img, words, gen.ALU_CFG[cfg])
                got = emu.run(img, words, gen.ALU_CFG[cfg])
                launches += 1
                for c in batch:
                    bad = any((got[gen.dst_index(u)] != want[gen.dst_index(u)]).any() for u in c.units)
                    for k in case_keys(c):
                        counts[k] += 1
                        if bad:
                            mism_keys[k] += 1
                    if bad:
                        mism.append(describe(c, img, got, want))
                        if verbose and len(mism) <= 30:
                            print(mism[-1], flush=True)
    finally:
        sim.dev.close()
    stats = {"launches": launches, "emu_s": emu.seconds, "ttsim_s": sim.seconds,
             "cases": sum(len(v) for v in by_cfg.values()), "mismatch_keys": dict(mism_keys)}
    return counts, mism, stats


@pytest.mark.ttsim
@pytest.mark.needs_program_cc
def test_sfpu_diff_sweep():
    counts, mism, stats = sweep(N_CASES, ONLY)
    assert counts, "no cases generated"
    assert not mism, f"{len(mism)} cases differ ({stats['mismatch_keys']}):\n" + "\n".join(mism[:10])


# --------------------------------------------------------------------------------------------------------------------
# no-ttsim checks of the generator itself

def test_generators_encode_legal_words():
    """Every generated word decodes to an SFPU instruction, and the units of a launch never overlap."""
    r = random.Random(1)
    for key, (_cfg, fn) in gen.generators().items():
        cases = [fn(r) for _ in range(30)]
        for batch in gen.pack(cases):
            used = [u for c in batch for u in c.units]
            assert len(used) == len(set(used)) and max(used) < gen.N_UNITS
            for c in batch:
                for w in gen.case_words(c):
                    assert isa.decode(w)[0].startswith("SFP") or isa.decode(w)[0] in ("SETC16", "SETRWC"), (key, hex(w))


def test_addr16_maps_to_unit_halves():
    # 16-bit Dst row R <-> Dst32b row ((R >> 4) << 3) | (R & 7), high half iff R & 8 == 0
    for unit in (0, 1, 2, 3, 37, 255):
        for lo in (False, True):
            a = gen._addr16(unit, lo)
            rows16 = (a & ~3) + np.arange(4)
            assert all(((r >> 4) << 3 | (r & 7)) == 4 * (unit >> 1) + i for i, r in enumerate(rows16))
            assert all(bool(r & 8) == lo for r in rows16) and (a >> 1) & 1 == unit & 1


if __name__ == "__main__":   # full sweep with a report: python -m tests.diff.test_diff_sfpu_ttsim [n] [only]
    n = int(sys.argv[1]) if len(sys.argv) > 1 else N_CASES
    only = sys.argv[2] if len(sys.argv) > 2 else ONLY
    t0 = time.time()
    counts, mism, stats = sweep(n, only, verbose=True)
    for k in sorted(counts):
        print(f"{k:40s} {counts[k]:6d}  mismatches {stats['mismatch_keys'].get(k, 0)}")
    print(stats, f"wall {time.time() - t0:.1f}s", f"{len(mism)} mismatching cases")


# --------------------------------------------------------------------------------------------------------------------
# regressions for model bugs this suite found (no ttsim needed; the expected values are what ttsim produced)

def _sfpu():
    return FunctionalSFPU(Dst())


def _run(s, name, **fields):
    s.execute(name, isa.decode(isa.encode(name, **fields))[1], 0)


def test_regression_sfplz_flags_when_vd_is_vc():
    """SFPLZ with SET_CC and VD == VC: the flag is c != 0 of the *input* (SFPLZ.md reads c before writing VD).
    Found as: SFPLZ lreg_dest=2, lreg_c=2, mod1=2 on L2 = 0x80000001 -> ttsim flag set, emu flag clear."""
    s = _sfpu()
    vals = np.array([0x80000001, 0, 0x00000001, 0x7FFFFFFF] * 8, dtype=np.uint32)
    s.lreg[2] = vals
    _run(s, "SFPENCC", instr_mod1=10, imm12_math=3)
    _run(s, "SFPLZ", instr_mod1=2, lreg_dest=2, lreg_c=2)
    assert list(s.lane_flags) == list(vals != 0)
    assert list(s.lreg[2][:4]) == [0, 32, 31, 1]


def test_regression_lreg12_reset_value():
    """LReg[12] after reset reads 1/512 (0x3B000000) on ttsim, not SFPCONFIG's IMM16_IS_VALUE default 1/65536.
    Found as: SFPMOV L6 := -L12 -> ttsim 0xBB000000, emu 0xB7800000."""
    s = _sfpu()
    assert (s.lreg[12] == 0x3B000000).all()
    _run(s, "SFPMOV", instr_mod1=1, lreg_dest=6, lreg_c=12)
    assert (s.lreg[6] == 0xBB000000).all()
