"""One SFPU body run k times at once (the speed layer's data path): the k repetitions' LRegs stacked into (17, k, 32)
arrays so every ordinary handler runs once for all of them, plus the static conditions under which that equals k
sequential runs (batchable, batch_regs, flag_transfer). Used by mop_batch.py and deferral.py, which prove the rest
of the equivalence (Dst ownership, loop-carried LRegs, timing) before they call it."""
from __future__ import annotations

import numpy as np

from tt_backend.chip.numerics.sfpu.lane_math import ONE_F32, SIGN, U32, unshuffle_fp32
from tt_backend.chip.numerics.sfpu.state import FLAG_WRITERS, LANE_COL, LANE_ROW, VD_IN_LREG_IND
from tt_backend.chip.sfpu_regs import sfpu_regs
from tt_backend.runtime.emu.sfpu import SFPU

# batchable(): instruction -> condition on its fields under which the handler is lane-wise and leaves the lane
# flags unchanged (flag writers only in modes that copy the flags onto themselves).
_BATCHABLE = {
    "SFPLOAD": lambda f: f["instr_mod0"] != 10, "SFPSTORE": lambda f: f["instr_mod0"] != 10,
    "SFPMAD": lambda f: not f["instr_mod1"] & 12, "SFPADD": lambda f: not f["instr_mod1"] & 12,
    "SFPMUL": lambda f: not f["instr_mod1"] & 12,
    "SFPLOADI": lambda f: f["instr_mod0"] in (0, 1, 2, 4, 8, 10),
    "SFPEXMAN": lambda f: True, "SFPSETEXP": lambda f: True, "SFPSETMAN": lambda f: True,
    "SFPSETSGN": lambda f: True, "SFPAND": lambda f: True, "SFPOR": lambda f: True, "SFPXOR": lambda f: True,
    "SFPNOT": lambda f: True, "SFPABS": lambda f: True, "SFPDIVP2": lambda f: True, "SFPSHFT": lambda f: True,
    "SFPARECIP": lambda f: True, "SFPNOP": lambda f: True,
    "SFPMOV": lambda f: not f["instr_mod1"] & 8 and f["instr_mod1"] != 2,
    "SFPCAST": lambda f: f["instr_mod1"] & 3 != 1,                      # not the stochastic (PRNG) mode
    "SFPEXEXP": lambda f: not f["instr_mod1"] & 10, "SFPLZ": lambda f: not f["instr_mod1"] & 10,
    "SFPIADD": lambda f: f["instr_mod1"] & 12 == 4,
    "SFPMUL24": lambda f: not f["instr_mod1"] & 12,
    # both LRegs written (VD < 8 is checked for all): a write to VC >= 8 would be dropped, which batch_regs would miss
    "SFPSWAP": lambda f: f["lreg_src_c"] < 8,
    "SFPTRANSP": lambda f: True,
}

# Lane-flag instructions execute_batch can run when the caller tracks the flag state (not the flag stack).
_FLAG_BATCHABLE = {
    "SFPSETCC": lambda f: True, "SFPENCC": lambda f: True,
    "SFPGT": lambda f: not f["instr_mod1"] & 2, "SFPLE": lambda f: not f["instr_mod1"] & 2,   # no MUTATE_STACK
    "SFPIADD": lambda f: True, "SFPEXEXP": lambda f: True, "SFPLZ": lambda f: True,
    "SFPADDI": lambda f: not f["instr_mod1"] & 8, "SFPMULI": lambda f: not f["instr_mod1"] & 8,
}


def queue_only(name: str, f: dict) -> bool:
    """Deferrable, run one by one in order, never in a batch: SFPCONFIG into a programmable constant, LReg[11..14]
    (or 9, 10, which take nothing). It writes an LReg the batches' dataflow (batch_regs) treats as constant and reads
    the flags of lanes 0..7 for all 32, so no batch may hold it; in order its effect is lane-wise and cannot raise. The
    compute template's setup writes the constants once per tile, between bodies: handled in Python each flushed the
    queue and cost ~15 % of a long-body tile (bench emu tile_long)."""
    return name == "SFPCONFIG" and 9 <= f["config_dest"] <= 14


def batchable(name: str, f: dict, flags: bool = False) -> bool:
    """Can this instruction run in execute_batch: lane-wise, no PRNG / LaneConfig / macro / flag-stack state
    read or changed, no fixed (32,)-lane indexing, VD outside the backdoor range (12..15), 32-bit Dst modes only
    (checked by the caller once the format is known). Without `flags`, also no lane flag read or written; with
    it, the lane-flag instructions of _FLAG_BATCHABLE too (the caller then tracks the flag state: flag_transfer,
    batch_regs)."""
    cond = _BATCHABLE.get(name)
    ok = cond is not None and cond(f)
    if not ok and flags:
        cond = _FLAG_BATCHABLE.get(name)
        ok = cond is not None and cond(f)
    if not ok:
        return False
    vd = f.get("lreg_ind" if name in VD_IN_LREG_IND else "lreg_dest", 0)
    # a store may read the constants 8..11; writers only to 0..7 (a write to 8..11 is dropped, which the LReg
    # dataflow analysis, using chip.sfpu_regs, would not see)
    return vd < 12 if name == "SFPSTORE" else vd < 8


def execute_batch(sfpu: SFPU, body: list, k: int, addrs: np.ndarray, cycle: int) -> np.ndarray:
    """Run `body` (name, fields, mem) k times as k x 32 lanes, instruction by instruction: LRegs become a
    (17, k, 32) array for the duration (repetition r = row r of each register), so the ordinary handlers run
    unchanged; `mem` = (is_store, vd, resolved mod0) for SFPLOAD/SFPSTORE, whose Dst addresses per repetition
    are the columns of `addrs` (k, n_mem). If the body writes lane flags, LaneFlags / UseLaneFlagsForLaneEnable
    become (k, 32) as well and loads/stores honour the lane enables. The caller proved equivalence with k
    sequential runs (every repetition starts from the same LReg inputs and flag state). Returns the (17, k, 32)
    LRegs as each repetition left them."""
    lreg, lf0, use0 = sfpu.lreg, sfpu.lane_flags, sfpu.use_lane_flags
    handlers = sfpu.handlers
    b = np.repeat(lreg[:, None, :], k, axis=1)
    rows32, written = sfpu.dst.rows32, sfpu.dst.written
    flags = any(name in FLAG_WRITERS for name, _, _ in body)
    sfpu.lreg = b
    if flags:
        sfpu.lane_flags = np.repeat(lf0[None, :], k, axis=0)
        sfpu.use_lane_flags = np.repeat(use0[None, :], k, axis=0)
    sfpu.invalidate()
    j = 0
    try:
        for name, fields, mem in body:
            if mem is None:
                handlers[name](fields, 0)
                if name in FLAG_WRITERS:
                    sfpu.invalidate()
                continue
            is_store, vd, mod0 = mem
            a = addrs[:, j]
            j += 1
            r0 = (a & ~3)[:, None]
            rows = r0 + LANE_ROW
            cols = ((a >> 1) & 1)[:, None] + LANE_COL
            en = sfpu.enabled()
            if not sfpu.all_enabled:
                en = np.broadcast_to(en, (k, 32))
            if is_store:
                d = b[vd]
                if mod0 == 3:  # FP32: flush denormals to signed zero
                    d = np.where((d & U32(0x7F800000)) == 0, d & U32(SIGN), d)
                elif mod0 == 7:  # HI16: the word as is in Dst's storage
                    d = unshuffle_fp32(d).astype(U32)
                if sfpu.all_enabled:
                    rows32[rows, cols] = d
                    written[r0 + np.arange(4)] = True
                else:
                    rows32[rows, cols] = np.where(en, d, rows32[rows, cols])
                    np.logical_or.at(written, r0 + np.arange(4), en.reshape(k, 4, 8).any(axis=2))
            elif vd < 8:
                if sfpu.all_enabled:
                    b[vd] = rows32[rows, cols]
                else:
                    np.copyto(b[vd], rows32[rows, cols], where=en)
    finally:
        sfpu.lreg = lreg
        if flags:
            last_lf, last_use = sfpu.lane_flags[-1], sfpu.use_lane_flags[-1]
            sfpu.lane_flags, sfpu.use_lane_flags = lf0, use0
            lf0[:], use0[:] = last_lf, last_use
        sfpu.invalidate()
    lreg[:] = b[:, -1]
    sfpu.instructions += k * len(body)
    sfpu.cycle = cycle
    return b


_ADDS = ("SFPMAD", "SFPADD", "SFPMUL")


def running_sum(sfpu: SFPU, name: str, f: dict, regs: np.ndarray) -> bool:
    """A chain that is one add into its own destination, acc = acc + y_r over k repetitions (an SFPMAD-family
    instruction acc = 1.0 * acc + y or 1.0 * y + acc, signs per mod1; `regs` the (17, k, 32) LRegs of the batch, which
    hold y_r and the 1.0), done as one sequential float32 np.add.accumulate: True when done (LReg acc, instruction
    count set), False (nothing changed) when the instruction is not of that form or a value leaves the range where
    the Blackhole FMA with an exact product (x * 1.0) is the IEEE float32 sum: every input and partial sum finite and
    normal or zero (tests/emu/test_emu_speed.py checks that identity against chip.numerics.fma on hard cases).
    For all-enabled lanes only (the caller's condition for a chain)."""
    if name not in _ADDS:
        return False
    a, b, c, acc, mod1 = f["lreg_src_a"], f["lreg_src_b"], f["lreg_src_c"], f["lreg_dest"], f["instr_mod1"]
    neg_b, neg_c = mod1 & 1, mod1 & 2
    if c == acc and not neg_c and acc not in (a, b):            # (1.0 * y) + acc, the product's sign from NEGATE_VB
        if (regs[a] == ONE_F32).all():
            y = b
        elif (regs[b] == ONE_F32).all():
            y = a
        else:
            return False
        neg_y = neg_b
    elif c != acc and not neg_b and acc in (a, b) and a != b:   # (1.0 * acc) + y, y's sign from NEGATE_VC
        if not (regs[b if a == acc else a] == ONE_F32).all():
            return False
        y, neg_y = c, neg_c
    else:
        return False
    terms = np.empty((regs.shape[1] + 1, regs.shape[2]), U32)
    terms[0] = sfpu.lreg[acc]
    terms[1:] = regs[y] ^ U32(SIGN) if neg_y else regs[y]
    if not _normal_or_zero(terms):
        return False
    with np.errstate(all="ignore"):
        sums = np.add.accumulate(terms.view(np.float32), axis=0).view(U32)
    if not _normal_or_zero(sums):
        return False
    sfpu.lreg[acc] = sums[-1]
    sfpu.instructions += regs.shape[1]
    return True


def _normal_or_zero(bits: np.ndarray) -> bool:
    """Every value a finite normal float32 or a zero (exponent field 1..254, or no bits but the sign)."""
    e = bits & U32(0x7F800000)
    return bool((((e != 0) & (e != U32(0x7F800000))) | ((bits & U32(0x7FFFFFFF)) == 0)).all())


def batch_regs(name: str, f: dict) -> tuple[int, int]:
    """(LRegs read, LRegs written) as bitmasks, exact enough for the loop-carried analysis of a batch: a write
    listed here really happens on every enabled lane (no over-approximated writes), reads may be
    over-approximated."""
    if name == "SFPSETCC":
        return (0 if f["instr_mod1"] & 9 else 1 << f["lreg_c"]), 0
    if name in ("SFPGT", "SFPLE"):
        vd = f["lreg_dest"]
        return (1 << f["lreg_c"]) | (1 << vd), (1 << vd if f["instr_mod1"] & 8 else 0)
    if name == "SFPENCC":
        return 0, 0
    reads, _, writes = sfpu_regs(name, f)
    if name == "SFPLOADI" and f["instr_mod0"] in (8, 10):   # keeps half of VD
        reads |= 1 << f["lreg_ind"]
    return reads, writes


def flag_transfer(name: str, f: dict, lf, use):
    """Abstract effect of a batchable instruction on (LaneFlags, UseLaneFlagsForLaneEnable) when each is known
    to be the same on all lanes (0 / 1) or unknown (None): the new (lf, use)."""
    if name not in FLAG_WRITERS:
        return lf, use
    mod1 = f.get("instr_mod1", 0)
    if name == "SFPENCC":
        imm2 = f["imm12_math"] & 3
        if mod1 & 2:
            use = imm2 & 1
        elif mod1 & 1:
            use = None if use is None else 1 - use
        return (int(imm2 & 2 != 0) if mod1 & 8 else 1), use
    if name == "SFPSETCC":
        if use == 0 or (use == 1 and mod1 & 8):
            return 0, use
        if use == 1 and mod1 & 1 and lf is not None:
            return lf & (f["imm12_math"] & 1), use
        return None, use
    if name == "SFPIADD":
        return (lf if mod1 & 12 == 4 else None), use
    if name in ("SFPLZ", "SFPEXEXP"):
        return (lf if not mod1 & 10 else None), use
    if name in ("SFPGT", "SFPLE"):
        return (None if mod1 & 1 else lf), use
    return None, None