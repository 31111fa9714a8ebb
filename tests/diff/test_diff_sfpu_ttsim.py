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

from tt_backend.chip import isa
from tt_backend.chip.numerics.dst import Dst
from tt_backend.chip.numerics.sfpu.functional import FunctionalSFPU
from tt_backend.runtime.emu.device import EmuDevice
from tt_backend.runtime.ttsim_device import TtsimDevice

from tests.support import sfpu_gen as gen, ttsim_path
from tests.support.sfpu_launch import Runner, build_elfs, cases_by_config

LIB = ttsim_path()
N_CASES = int(os.environ.get("TT_DIFF_CASES", "100"))
ONLY = os.environ.get("TT_DIFF_ONLY", "")
SEED = int(os.environ.get("TT_DIFF_SEED", "20261130"))


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
    by_cfg = cases_by_config(r, n_cases, only)
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
