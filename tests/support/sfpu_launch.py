"""The SFPU differential kernel (tests/programs/sfpu/sfpu_diff.c) and its launch loop, shared by the SFPU sweep
(tests/diff/test_diff_sfpu_ttsim.py) and the recorded verdicts (tests/verdicts): the three TRISC ELFs with their fixed
Tensix words, the cases of every (instruction, mode) key grouped by ALU configuration, and `Runner` (one device, one
launch per batch of cases; tests/support/sfpu_gen.py builds the batches).
"""
from __future__ import annotations

import collections
import random
import time

import numpy as np

from tt_backend.chip import isa, layout

from tests.support import programs, sfpu_gen as gen
from tests.support.harness import run_on

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



def cases_by_config(r: random.Random, n_cases: int, only: str = "") -> dict[str, list[gen.Case]]:
    """n_cases cases per key (times MULTIPLIER) whose key contains `only`, grouped by the ALU configuration they run
    under (gen.ALU_CFG)."""
    by_cfg: dict[str, list[gen.Case]] = collections.defaultdict(list)
    for key, (cfg, fn) in gen.generators().items():
        if only and only not in key:
            continue
        n = n_cases * MULTIPLIER.get(key.split(",")[0], 1)
        by_cfg[cfg] += [fn(r) for _ in range(n)]
    return by_cfg
