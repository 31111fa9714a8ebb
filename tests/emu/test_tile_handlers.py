"""The common case of the UNPACR, PACR, MVMUL, ELW*, MOVA2D, SETADC*, SETDMAREG, SETC16, WRCFG, STALLWAIT, SEMWAIT,
SEMPOST, SEMGET, SETRWC and ZEROACC handlers in C (runtime/emu/accel/tile_handlers.c, called from the C issue path)
against the Python handlers (tile_native.HANDLERS_NATIVE off): random programs of tile words over the three threads
(unpacks to SrcA / SrcB / Dst in several formats, bank handovers and waits, MVMULs and ELW* with random broadcast,
accumulate, release and address modes, MOVA2Ds into both halves of Dst rows, PACRs over every read interface, ADC
changes by every SETADC*, RWC / address-modifier changes, config changes from the host and in-stream through GPRs
(SETDMAREG, WRCFG), STALLWAITs on the Src banks and units, a semaphore posted by T1 and waited for and taken by T2,
ZEROACCs of every mode, some that leave the common case: INT8 math, a 16-bit Dst, edge masks that drop datums, unknown
pack formats, ADDR_MOD bias) give the same state after every step and the same error; each handler really ran in C.
And whole compiled kernels (also tests/emu/test_direct_issue.py's SWITCHES); the forms the sync handlers leave to
Python, and the Wait Gate's questions asked of a replaced method."""
from __future__ import annotations

import random
import sys

import numpy as np
import pytest

from tt_backend.bench.kernels import launch_plan
from tt_backend.chip import isa, layout
from tt_backend.chip.errors import EmuError
from tt_backend.lowering.codegen.sources import split
from tt_backend.runtime.compile import compile_kernel
from tt_backend.runtime.emu import cycles, sync, thread_state, unpack_pack
from tt_backend.runtime.emu.accel import sfpu_issue_native, tile_native
from tt_backend.runtime.emu.config import CFG_WORDS
from tt_backend.runtime.emu.device import EmuDevice
from tt_backend.runtime.emu.rv32 import Stall
from tt_backend.runtime.emu.tensix import Tensix

from tests.emu import test_direct_issue
from tests.emu.test_tile_native import _SPECIALS, KERNELS, _inputs

E = isa.encode
pytestmark = pytest.mark.skipif(sfpu_issue_native.plain_run() is None or tile_native.module() is None,
                                reason="the C issue path or the C tile data is unavailable")

IN_A, IN_B, OUT = 0x20000, 0x30000, 0x40000
# (config word, value) of the unpackers (BF16 or FP32 tiles of 1024 datums), the FPU (fp32 Dst) and the packer
_SETUP = ((1, 0x60AA0000), (64, 0x04000015), (65, 0x00010001), (72, 0x25), (73, 0x0F), (76, IN_A // 16 - 1),
          (84, 0x00400040), (86, 0x04000400), (112, 0x04000015), (113, 0x00010001), (120, 5), (121, 0xF),
          (124, IN_B // 16 - 1), (12, 0x00400004), (13, 0x10000400), (70, 0x001), (18, 1), (24, 0xFFFF),
          (28, 0x1000), (69, OUT // 16 - 1))
# config changes (the same in both runs): other formats, and (rarer) what leaves the C part's common case
_CFG_CHANGES = (((1, 0x6AAA0000), (70, 0x551)), ((1, 0x60AA0000), (70, 0x001)), ((1, 0x60880000), (70, 0x001)),
                ((64, 0x04000010), (72, 0x24)), ((64, 0x04000015), (72, 0x25)), ((24, 0x0FFF),), ((24, 0xFFFF),),
                ((84, 0x00400040),))
_CFG_ERRORS = (((1, 0xE0AA0000),), ((1, 0x40AA0000),), ((70, 0x0A1),), ((84, 0x00400000),), ((2, 1),))


def _setters(rng: random.Random) -> list[int]:
    """In-stream register and config writes: a config change of _CFG_CHANGES through a GPR
    (SETDMAREG's two halves, then WRCFG), or four config words read into GPRs (RDCFG) and written back by a 128-bit
    WRCFG naming any word of the four; rarely a form the handlers raise at (SETDMAREG's set_signals_mode, SETC16 past
    ThreadConfig, WRCFG in config state bank 1)."""
    g = rng.randrange(64)
    if rng.random() < 0.6:
        i, v = rng.choice(rng.choice(_CFG_CHANGES))
        return [E("SETDMAREG", reg_index_16b=2 * g, set_signals_mode=0, payload=v & 0xFFFF),
                E("SETDMAREG", reg_index_16b=2 * g + 1, set_signals_mode=0, payload=v >> 16),
                E("WRCFG", cfg_reg=i, wr128b=0, gpr_address=g)]
    if rng.random() < 0.95:
        base, g = rng.choice((0, 12, 64, 72, 84, 112, 120)), g & ~3
        return [*(E("RDCFG", cfg_reg=base + k, gpr_address=g + k) for k in range(4)),
                E("WRCFG", cfg_reg=base + rng.randrange(4), wr128b=1, gpr_address=g + rng.randrange(4))]
    return [rng.choice((E("SETDMAREG", reg_index_16b=rng.randrange(128), set_signals_mode=1, payload=1),
                        E("SETC16", setc16_reg=rng.randrange(68, 256), setc16_value=1))),
            E("SETC16", setc16_reg=0, setc16_value=1), E("WRCFG", cfg_reg=1, wr128b=0, gpr_address=g)]


def _zeroacc(rng: random.Random) -> int:
    """A ZEROACC of any mode (one row, a 16-row face, half or all of Dst; 16- or 32-bit rows) with a random address
    modifier; rarely a form the handler raises at (Revert, a face or half out of range)."""
    mode = rng.randrange(8)
    where = {0: 64, 1: 32, 2: 2, 3: 1}[mode & 3] if mode != 5 else 16
    if rng.random() < 0.03:
        return E("ZEROACC", clear_mode=mode & 3, use_32_bit_mode=mode >> 2, where=where, clear_zero_flags=1)
    return E("ZEROACC", clear_mode=mode & 3, use_32_bit_mode=mode >> 2, where=rng.randrange(where),
             addr_mode=rng.randrange(8))


def _round(rng: random.Random, packs: tuple[int, ...]) -> list[tuple[int, int]]:
    """(thread, word) of one round, the threads' words interleaved at random: T0 hands both Src banks to the FPU, T1
    computes on them (random counters and address modifiers) and releases both, T2 packs (words from `packs`, as a
    kernel repeats a few: each new word's first PACR under a configuration is Python's); ADC changes between."""
    fpu = lambda clear: E(rng.choice(("MVMUL", "MVMUL", "ELWADD", "ELWSUB", "ELWMUL")), dst=8 * rng.randrange(4),
                          instr_mod19=0, clear_dvalid=clear, addr_mode=rng.randrange(8))
    elw = lambda clear: E(rng.choice(("ELWADD", "ELWSUB")), dst=8 * rng.randrange(4), instr_mod19=rng.randrange(4),
                          dest_accum_en=rng.randrange(2), clear_dvalid=clear, addr_mode=rng.randrange(8))
    unpack = lambda sel: (E("UNPACR", unpack_block_selection=sel, addr_mode=rng.choice((0, 1, 0x41, 0x15)),
                            set_dat_valid=1, ovrd_thread_id=1, last=1) if rng.random() < 0.9 else
                          E("UNPACR_NOP", unpacker_select=sel, unpack_pop=1, set_dvalid=1))
    t0 = [unpack(0), unpack(1)]
    if rng.random() < 0.3:           # (a wait for the unpacker's banks, blocking the unpacks or not)
        t0.insert(0, E("STALLWAIT", wait_res=rng.choice((0x20, 0x40, 0x60)), stall_res=rng.choice((0, 0x08, 0x1FF))))
    if rng.random() < 0.3:
        t0.insert(0, E("SETADCXY", cnt_set_mask=rng.choice((1, 2, 3)), bit_mask=rng.choice((2, 8, 10)), ch0_x=0,
                       ch0_y=rng.randrange(4), ch1_y=rng.randrange(4)))
    if rng.random() < 0.2:           # (the other ADC setters: a Z / W plane, the X range, one counter)
        t0.insert(0, rng.choice([
            lambda: E("SETADCZW", cnt_set_mask=rng.randrange(8), bit_mask=rng.randrange(16), ch0_x=rng.randrange(2),
                      ch0_y=0, ch1_x=rng.randrange(2), ch1_y=0),          # (W stays 0: UNPACR refuses others)
            lambda: E("SETADCXX", cnt_set_mask=rng.choice((1, 2, 3)), x_start=0, x_end2=rng.choice((255, 511, 1023))),
            lambda: E("SETADC", cnt_set_mask=rng.randrange(8), channel_index=rng.randrange(2),
                      dimension_index=rng.choice((1, 2, 3)), value=rng.choice((0, 1, 4, 0x1FFFF if rng.random() < 0.05
                                                                              else 2)))])())
    t1 = []
    for _ in range(rng.randrange(1, 6)):
        t1.append(rng.choice([
            lambda: fpu(0), lambda: fpu(0), lambda: elw(0),
            lambda: E("MOVA2D", dst=8 * rng.randrange(4), src=8 * rng.randrange(2), instr_mod=2,
                      dest_32b_lo=int(rng.random() < 0.05), addr_mode=rng.randrange(8)),
            lambda: E("SETRWC", bit_mask=rng.randrange(16), rwc_a=0, rwc_b=rng.choice((0, 8)),
                      rwc_d=rng.choice((0, 8)), rwc_cr=0, clear_ab_vld=0),
            lambda: E("SETC16", setc16_reg=rng.randrange(12, 20),   # ADDR_MOD_AB_SEC0-7: SrcA by 16s, SrcB by 8s
                      setc16_value=rng.choice((0, 0x10, 0x800, 0x810, 0x80, 0x4800, 0x8000))),
            lambda: E("SETC16", setc16_reg=rng.randrange(28, 36),   # ADDR_MOD_DST_SEC0-7 (C reads the word's only)
                      setc16_value=rng.choice((0, 8, 0x400 | 8, 0x800, 0x1000 | 8, 0x8000 | 8))),
        ])())
    if rng.random() < 0.5:           # (a wait for the FPU's banks or for units, blocking the FPU or everything)
        t1.insert(0, E("STALLWAIT", wait_res=rng.choice((0x180, 0x80, 0x06, 0x18, 0x800, 0)),
                       stall_res=rng.choice((0, 0x40, 0x1FF))))
    waited = any(isa.OPCODES[w >> 24].name in ("MVMUL", "ELWADD", "ELWSUB", "ELWMUL") for w in t1)
    t1.append(fpu(3) if rng.random() < 0.7 or not waited else     # (SETRWC does not wait for the banks)
              E("SETRWC", bit_mask=rng.randrange(16), rwc_a=0, rwc_b=0, rwc_d=0, rwc_cr=0, clear_ab_vld=3))
    if rng.random() < 0.5:           # (T1 posts semaphore 1, T2 waits for it and takes it)
        t1.append(E("SEMPOST", sem_sel=2))
    t2 = [rng.choice([
        lambda: rng.choice(packs), lambda: rng.choice(packs),
        lambda: E("SETADCXY", cnt_set_mask=4, bit_mask=rng.choice((2, 8, 10)), ch0_x=0, ch0_y=rng.randrange(4),
                  ch1_y=rng.randrange(4)),
        lambda: E("SETC16", setc16_reg=rng.choice((37, 38, 39, 40)),
                  setc16_value=rng.choice((4, 0x1020, 0x2020, 0x20, 0x10 | 2, 0x8000, 0x1000 | 0x800))),
    ])() for _ in range(rng.randrange(1, 5))]
    if rng.random() < 0.5:
        if rng.random() < 0.9:
            wait = E("SEMWAIT", wait_sem_cond=1, sem_sel=2, stall_res=rng.choice((0x06, 0x1FF)))
            t2[:0] = [wait, E("SEMGET", sem_sel=2)]
        else:
            t2[:0] = [E("SEMWAIT", wait_sem_cond=0, sem_sel=2, stall_res=0)]
    queues = [[(t, w) for w in ws] for t, ws in enumerate((t0, t1, t2))]
    out = []
    while any(queues):
        out.append(rng.choice([q for q in queues if q]).pop(0))
    return out


def _snapshot(tx: Tensix) -> tuple:
    """Everything the tile handlers read or write, and the cycle model's per-thread counts."""
    th = [(repr(t.adc), repr(t.adc_cr), dict(t.rwc), list(t.cfg), list(t.gpr), t.blocked,
           t.latch and (t.latch.kind, t.latch.cond, t.latch.sems, t.latch.block, t.latch.word)) for t in tx.threads]
    return (th, list(tx.cfg), tx.srca.tobytes(), tx.srcb.tobytes(), list(tx.srca_valid), list(tx.srcb_valid),
            tx.srca_unpack_bank, tx.srcb_unpack_bank, tx.srca_matrix_bank, tx.srcb_matrix_bank, list(tx.srca_format),
            list(tx.srcb_format), tx.dst.rows32.tobytes(), tx.dst.written.tobytes(), tx.dst.cleared16.tobytes(),
            tx.l1[OUT:OUT + 0x8000].tobytes(), tx.packer_open, tx.packer_addr, tx.packer_exp_addr, tx.packer_tpg,
            tx.tm.stats(), list(tx.instructions), list(tx.sem_value), list(tx.sem_max), [list(q) for q in tx.sem_posts],
            list(tx.tm.gate))


# (thread, word) before a program: SrcA's SetOvrdWithAddr, the unpackers' and the packer's ADC ranges, the pack
# address modifiers, the FPU's address modifier, and (last) T1's semaphore 2
_START = ((0, E("SETC16", setc16_reg=5, setc16_value=4)), (0, 0x5160000A), (0, 0x5460000F), (0, 0x5E6FFC00),
          (2, 0xB2250004), (2, 0xB2261020), (2, 0xB2272020), (2, 0x5180000B), (2, 0x5480000F), (2, 0x5E803C00),
          (1, 0x37000007), (1, E("SEMINIT", sem_sel=2, init_value=0, max_value=15)))


def _special_words(data: np.random.Generator, n: int) -> np.ndarray:
    """n random 32-bit words, a quarter of them test_tile_native's special patterns (denormals, -0, Inf, NaN payloads,
    rounding ties) and an eighth two 16-bit ones (the high halves of those, for 16-bit datums in either half)."""
    x = data.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    specials = np.array(_SPECIALS, np.uint32)
    pick = data.random(n)
    x[pick < 0.25] = data.choice(specials, int((pick < 0.25).sum()))
    half = (pick >= 0.25) & (pick < 0.375)
    x[half] = data.choice(specials >> 16, int(half.sum())) << 16 | data.choice(specials >> 16, int(half.sum()))
    return x


def _run(seed: int, strict: bool, handlers_c: bool, monkeypatch) -> list:
    monkeypatch.setattr(tile_native, "HANDLERS_NATIVE", handlers_c)
    rng, setters = random.Random(seed), random.Random(seed + 1000)
    data = np.random.default_rng(seed)
    tx = Tensix(np.zeros(layout.L1_SIZE, np.uint8), strict=strict)
    tx.l1[IN_A:OUT] = data.standard_normal((OUT - IN_A) // 4).astype(np.float32).view(np.uint8)
    tx.dst.write_rows32(0, data.standard_normal((512, 16)).astype(np.float32).view(np.uint32))
    for i, v in _SETUP:
        tx.cfg_write(i, v)
    for t, w in _START:
        tx.push(t, w)
    packs = tuple(E("PACR", read_intf_sel=rng.choice((0, 1, 3, 5, 10)), last=rng.randrange(2),
                    addr_mode=rng.randrange(4)) for _ in range(4))
    trace = []
    try:
        for _ in range(60):
            if rng.random() < 0.15:
                for i, v in rng.choice(_CFG_ERRORS if rng.random() < 0.1 else _CFG_CHANGES):
                    tx.cfg_write(i, v)
            words = _round(rng, packs)
            if setters.random() < 0.3:        # (their own generator: the seed's tile words stay as they were)
                thread, extra = setters.randrange(3), _setters(setters)
                if setters.random() < 0.5:
                    extra.append(_zeroacc(setters))
                for at, w in zip(sorted(setters.sample(range(len(words) + len(extra)), len(extra))), extra):
                    words.insert(at, (thread, w))
            for t, w in words:
                _push_traced(tx, t, w, trace)
                if rng.random() < 0.2:
                    trace.append(("step", tx.step()))
    except EmuError as e:
        return trace + [str(e)]
    return trace


def _push_traced(tx, t: int, w: int, trace: list) -> None:
    """tx.push(t, w) onto `trace`: a Stall's step (the word dropped), then the snapshot after it."""
    try:
        tx.push(t, w, 0)
    except Stall:
        trace.append(("stall", tx.step()))
    trace.append(_snapshot(tx))


@pytest.mark.parametrize("seed,strict", [(3, True), (8, True), (6, False), (12, False), (1, True), (5, False)])
def test_random_tile_programs_identical(seed, strict, monkeypatch):
    """State by state the same with the handlers in C and in Python (and the same error, where one comes), with
    every handler code taken in C."""
    before = sfpu_issue_native._load()[0].handler_counts()
    a = _run(seed, strict, True, monkeypatch)
    taken = [n - b for b, n in zip(before, sfpu_issue_native._load()[0].handler_counts())]
    assert a == _run(seed, strict, False, monkeypatch)
    assert sfpu_issue_native._load()[0].handler_counts() == tuple(b + t for b, t in zip(before, taken))  # (off: none)
    assert all(n > 0 for n in taken[1:]), taken
    assert len(a) > 100


def _special_data_run(seed: int, formats: tuple, monkeypatch) -> list:
    """A Tensix set up as _run's with `formats` written after _SETUP and _special_words as L1's inputs and Dst; 40
    rounds of T0 unpacking both Src banks (random ADC steps), T1 adding them into Dst and releasing them, T2 packing
    (a PACR of random read interface, last and address modifier): the snapshot after every word."""
    rng, data = random.Random(seed), np.random.default_rng(seed)
    tx = Tensix(np.zeros(layout.L1_SIZE, np.uint8), strict=True)
    tx.l1[IN_A:OUT] = _special_words(data, (OUT - IN_A) // 4).view(np.uint8)
    tx.dst.write_rows32(0, _special_words(data, 512 * 16).reshape(512, 16))
    for i, v in _SETUP + formats:
        tx.cfg_write(i, v)
    for t, w in _START[:-1]:
        tx.push(t, w)
    trace = []
    for _ in range(40):
        words = [(0, E("UNPACR", unpack_block_selection=sel, addr_mode=rng.choice((0, 1, 0x41, 0x15)),
                       set_dat_valid=1, ovrd_thread_id=1, last=1)) for sel in (0, 1)]
        words.append((1, E("ELWADD", dst=8 * rng.randrange(4), instr_mod19=0, clear_dvalid=3, addr_mode=0)))
        words += [(2, E("PACR", read_intf_sel=rng.choice((0, 1, 3, 5, 10)), last=rng.randrange(2),
                        addr_mode=rng.randrange(4))) for _ in range(rng.randrange(1, 4))]
        for t, w in words:
            _push_traced(tx, t, w, trace)
    return trace


@pytest.mark.parametrize("formats", [(), ((64, 0x04000010), (72, 0x24), (112, 0x04000010), (120, 4)),
                                     ((64, 0x04000010), (72, 0x25), (112, 0x04000010), (120, 5)),
                                     ((64, 0x04000011), (72, 0x21), (112, 0x04000011), (120, 1)),
                                     ((1, 0x6AAA0000), (70, 0x551))])
@pytest.mark.parametrize("seed", [2, 9])
def test_unpack_pack_special_data_identical(seed, formats, monkeypatch):
    """UNPACR's and PACR's conversions on data with the special patterns (_special_words), BF16, FP32 (as TF32 or
    BF16) or FP16 tiles into SrcA / SrcB, FP32 or BF16 packs: with the handlers and their data in C, snapshot by snapshot the same as with both
    in Python (tile_native.NATIVE off: numpy's conversions), most UNPACRs and PACRs taken in C."""
    counts = sfpu_issue_native._load()[0].handler_counts
    before = counts()
    monkeypatch.setattr(tile_native, "HANDLERS_NATIVE", True)
    a = _special_data_run(seed, formats, monkeypatch)
    taken = [n - b for b, n in zip(before, counts())]
    monkeypatch.setattr(tile_native, "HANDLERS_NATIVE", False)
    monkeypatch.setattr(tile_native, "NATIVE", False)
    assert a == _special_data_run(seed, formats, monkeypatch)
    assert taken[tile_native.HANDLER_CODES["UNPACR"]] > 60 and taken[tile_native.HANDLER_CODES["PACR"]] > 40, taken


@pytest.mark.needs_cc
@pytest.mark.parametrize("kernel,codes", [("mm_HiFi2", ("UNPACR", "PACR", "MVMUL", "MOVA2D", "STALLWAIT", "SEMPOST",
                                                        "SETRWC", "ZEROACC")),
                                          ("ew_bf16_64", ("UNPACR", "PACR", "ELWMUL", "ELWADD", "SETDMAREG", "WRCFG",
                                                          "STALLWAIT", "SEMPOST"))])
def test_kernels_identical_with_handlers_in_c(kernel, codes, monkeypatch):
    """Two warm launches of a compiled kernel with the handlers in C and in Python: the same output bytes and every
    core's and Tensix thread's cycles, and the kernel's tile handlers really ran in C."""
    plan = KERNELS[kernel]()
    arrays = _inputs(plan, np.random.default_rng(len(kernel)))
    elfs = compile_kernel(*split(plan.render()), plan.name)
    counts = sfpu_issue_native._load()[0].handler_counts
    runs = []
    for on in (True, False):
        monkeypatch.setattr(tile_native, "HANDLERS_NATIVE", on)
        before = counts()
        dev = EmuDevice()
        runs.append(([launch_plan(dev, plan, arrays, elfs)[0] for _ in range(2)], dev.stats()))
        taken = {name: counts()[code] - before[code] for name, code in tile_native.HANDLER_CODES.items()}
        assert all(taken[name] > 0 for name in codes) if on else not any(taken.values()), taken
    assert runs[0] == runs[1]
    assert len(set(runs[0][0][0])) > 1                                        # (a real output, not a constant fill)


_SET_GPR = (E("SETDMAREG", reg_index_16b=6, set_signals_mode=0, payload=0xBEEF),
            E("SETDMAREG", reg_index_16b=7, set_signals_mode=0, payload=0x60AA))


@pytest.mark.parametrize("last", [E("SETDMAREG", reg_index_16b=7, set_signals_mode=1, payload=1),
                                  E("SETC16", setc16_reg=68, setc16_value=1),
                                  E("WRCFG", cfg_reg=CFG_WORDS, wr128b=0, gpr_address=3),
                                  E("WRCFG", cfg_reg=CFG_WORDS + 1, wr128b=1, gpr_address=3)])
def test_register_setters_raise_in_python(last, monkeypatch):
    """SETDMAREG, SETC16 and WRCFG: C takes the plain forms (GPR halves, a 128-bit WRCFG; on a second Tensix SETC16
    selecting config state bank 1) and leaves to Python the forms the handler raises at (`last`; then WRCFG in state
    bank 1): the same states and errors as the Python handlers."""
    counts = sfpu_issue_native._load()[0].handler_counts
    codes = [tile_native.HANDLER_CODES[n] for n in ("SETDMAREG", "SETC16", "WRCFG")]
    bank1 = (E("SETC16", setc16_reg=0, setc16_value=1), E("WRCFG", cfg_reg=1, wr128b=0, gpr_address=3))
    runs = []
    for on in (True, False):
        monkeypatch.setattr(tile_native, "HANDLERS_NATIVE", on)
        trace, before = [], counts()
        for program in ((_SET_GPR, (E("WRCFG", cfg_reg=1, wr128b=1, gpr_address=2),), (last,)), (bank1,)):
            tx = Tensix(np.zeros(layout.L1_SIZE, np.uint8))
            for words in program:
                try:
                    tx.push_many(0, words, 0)
                except EmuError as e:
                    trace.append(str(e))
                trace.append(_snapshot(tx))
        runs.append(trace)
        assert [counts()[c] - before[c] for c in codes] == ([2, 1, 1] if on else [0, 0, 0])
    assert runs[0] == runs[1]
    assert runs[0][1][0][0][4][3] == runs[0][1][1][3] == 0x60AABEEF      # (GPR 3; config words 0-3 from GPRs 0-3)
    assert [i for i, x in enumerate(runs[0]) if isinstance(x, str)] == [2, 4]          # (`last`, bank 1's WRCFG)


def test_replaced_handler_keeps_being_called(monkeypatch):
    """A handler replaced on the class (a test's spy) is called for every word: C takes none of its words."""
    calls = []
    pacr = unpack_pack.UnpackPackMixin.PACR
    monkeypatch.setattr(unpack_pack.UnpackPackMixin, "PACR", lambda self, t, f: calls.append(1) or pacr(self, t, f))
    counts = sfpu_issue_native._load()[0].handler_counts
    before = counts()
    _run(6, False, True, monkeypatch)
    after = counts()
    code = tile_native.HANDLER_CODES["PACR"]
    assert len(calls) > 20 and after[code] == before[code] and after[1] > before[1]     # (UNPACR still in C)


def _unpack_tx() -> Tensix:
    """A Tensix set up as _run sets it up (unpackers, FPU, packer configured; L1 and Dst random)."""
    data = np.random.default_rng(3)
    tx = Tensix(np.zeros(layout.L1_SIZE, np.uint8), strict=True)
    tx.l1[IN_A:OUT] = data.standard_normal((OUT - IN_A) // 4).astype(np.float32).view(np.uint8)
    tx.dst.write_rows32(0, data.standard_normal((512, 16)).astype(np.float32).view(np.uint32))
    for i, v in _SETUP:
        tx.cfg_write(i, v)
    for t, w in ((0, E("SETC16", setc16_reg=5, setc16_value=4)), (0, 0x5160000A), (0, 0x5460000F), (0, 0x5E6FFC00)):
        tx.push(t, w)
    return tx


def test_setup_memo_follows_the_setup_cache(monkeypatch):
    """UNPACR's setup memo (setup_lookup) answers only while the handler's setup cache is as it was: cleared, the next
    UNPACR of a remembered configuration is Python's again (which caches it anew), then C's; the state matches the
    Python handlers' after every word."""
    code = tile_native.HANDLER_CODES["UNPACR"]
    counts = sfpu_issue_native._load()[0].handler_counts
    word = E("UNPACR", unpack_block_selection=0, addr_mode=1, set_dat_valid=0, ovrd_thread_id=1, last=1)
    runs = []
    for on in (True, False):
        monkeypatch.setattr(tile_native, "HANDLERS_NATIVE", on)
        tx, trace, in_c = _unpack_tx(), [], []
        for step in range(6):
            if step == 3:
                tx._unpack_setups.clear()
            before = counts()[code]
            tx.push(0, word, 0)
            in_c.append(counts()[code] - before)
            trace.append(_snapshot(tx))
        assert len(tx._unpack_setups) == 1
        runs.append(trace)
        if on:
            assert in_c == [0, 1, 1, 0, 1, 1], in_c          # (first: Python checks it; after the clear: again)
    assert runs[0] == runs[1]


def test_setup_memo_follows_the_config_words(monkeypatch):
    """UNPACR's setup memo answers by the config words of its key: two configurations (FP32 and BF16 input), both in
    the setup cache after their first UNPACR, alternated between words and written back as the same int objects or as
    equal new ones, each UNPACR in C unpacking by its own (the memo's same-object check against its last answer, then
    its compare of the values), the state as the Python handlers leave it after every word."""
    code = tile_native.HANDLER_CODES["UNPACR"]
    counts = sfpu_issue_native._load()[0].handler_counts
    word = E("UNPACR", unpack_block_selection=0, addr_mode=1, set_dat_valid=0, ovrd_thread_id=1, last=1)
    configs = (((64, 0x04000015), (72, 0x25)), ((64, 0x04000010), (72, 0x24)))
    order = (0, 1, 0, 1, 1, 0, 0, 1, 0)
    runs = []
    for on in (True, False):
        monkeypatch.setattr(tile_native, "HANDLERS_NATIVE", on)
        tx, trace, in_c = _unpack_tx(), [], []
        held = [{i: int(str(v)) for i, v in c} for c in configs]    # each configuration's words, one object each
        for step, which in enumerate(order):
            for i, v in configs[which]:
                if step in (3, 6):
                    tx.cfg_write(i, int(str(v)))                      # (an equal int, not the same object)
                else:
                    tx.cfg[i] = held[which][i]   # (the very object again: cfg_write would store a new int)
            before = counts()[code]
            tx.push(0, word, 0)
            in_c.append(counts()[code] - before)
            trace.append(_snapshot(tx))
        runs.append(trace)
        if on:
            assert in_c == [0, 0] + [1] * (len(order) - 2), in_c    # (each configuration's first: Python)
    assert runs[0] == runs[1]


def test_run_view_dropped_at_python(monkeypatch):
    """A Python handler between C words of one pushed run may rebind the containers C reads (here SETRWC's spy gives
    the thread a new RWC dict, the Tensix new Src valid lists and Src banks, Dst new row and flag arrays): the C words
    after it use the new ones, as the Python path does (run_view's drop at each call into Python, the arrays' data
    pointers it keeps with them included: the old arrays stay alive in view_buffer's memo, so a kept pointer would
    write them and leave the new ones as they were)."""
    setrwc = type(_unpack_tx()).SETRWC

    def rebinding_setrwc(self, t, f):
        self.threads[t].rwc = dict(self.threads[t].rwc)
        self.srca_valid, self.srcb_valid = list(self.srca_valid), list(self.srcb_valid)
        self.srca, self.srcb = self.srca.copy(), self.srcb.copy()
        d = self.dst
        d.rows32, d.written, d.cleared16 = d.rows32.copy(), d.written.copy(), d.cleared16.copy()
        return setrwc(self, t, f)

    monkeypatch.setattr(Tensix, "SETRWC", rebinding_setrwc)
    counts = sfpu_issue_native._load()[0].handler_counts
    mm = tile_native.HANDLER_CODES["MVMUL"]
    unpack = tuple(E("UNPACR", unpack_block_selection=sel, addr_mode=0, set_dat_valid=1, ovrd_thread_id=1, last=1)
                   for sel in (0, 1))
    run = (E("MVMUL", dst=0, instr_mod19=0, clear_dvalid=0, addr_mode=1),
           E("SETRWC", bit_mask=0, rwc_a=0, rwc_b=0, rwc_d=0, rwc_cr=0, clear_ab_vld=0),
           E("MVMUL", dst=8, instr_mod19=0, clear_dvalid=3, addr_mode=1))
    runs = []
    for on in (True, False):
        monkeypatch.setattr(sfpu_issue_native, "PLAIN_ISSUE_NATIVE", on)
        tx, trace = _unpack_tx(), []
        before = counts()[mm]
        for _ in range(4):              # (the run waits for the banks: the drain takes it whole once they are valid)
            tx.push_many(1, run, 0)
            for w in unpack:
                tx.push(0, w, 0)
            while tx.step():
                pass
            trace.append(_snapshot(tx))
        runs.append(trace)
        assert (counts()[mm] - before > 0) == on
    assert runs[0] == runs[1]


def test_packer_state_followed_across_python(monkeypatch):
    """The packer state a PACR in C left (packer_open, packer_addr, packer_tpg: items of the Tensix's _packer list) is
    read again after Python ran: SETRWC's spy between the PACRs of one pushed run moves the packer's address and tile
    position through the properties, and the PACRs after it pack there, as on the Python path; the PACRs really run in
    C."""
    setrwc = type(_unpack_tx()).SETRWC

    def moving_setrwc(self, t, f):
        self.packer_addr += 64
        self.packer_tpg = (0, 1, 0)
        return setrwc(self, t, f)

    monkeypatch.setattr(Tensix, "SETRWC", moving_setrwc)
    counts = sfpu_issue_native._load()[0].handler_counts
    code = tile_native.HANDLER_CODES["PACR"]
    pacr = lambda last: E("PACR", read_intf_sel=0, last=last, addr_mode=0)
    run = (pacr(0), pacr(0), E("SETRWC", bit_mask=0, rwc_a=0, rwc_b=0, rwc_d=0, rwc_cr=0, clear_ab_vld=0), pacr(0),
           pacr(1))
    runs = []
    for on in (True, False):
        monkeypatch.setattr(sfpu_issue_native, "PLAIN_ISSUE_NATIVE", on)
        tx, trace = _unpack_tx(), []
        for w in (0xB2250004, 0xB2261020, 0xB2272020, 0x5180000B, 0x5480000F, 0x5E803C00):
            tx.push(2, w)
        before = counts()[code]
        for _ in range(3):
            tx.push_many(2, run, 0)
            while tx.step():
                pass
            trace.append(_snapshot(tx))
        runs.append(trace)
        assert (counts()[code] - before >= 3 * 3) == on
    assert runs[0] == runs[1]


# (mapping word 20, mask words 25, 26) of PACR's edge masks: every row mask 0, 1 or a mix of masks 0-2, the masks
# all ones (the C PACR packs) or one a row takes dropping columns (Python's), or one no row takes dropping them (C's)
_EDGE_MASKS = ((0, 0, 0), (0x55555555, 0xFFFF, 0), (0x55555555, 0x00FF, 0xFFFF), (0x24924924, 0xFFFF, 0xFFFF),
               (0x24924924, 0xFFFF, 0xF0FF), (0x11111111, 0xFFFF, 0x0000), (0xAAAAAAAA, 0x0000, 0xFFFF))


def test_pack_edge_mask_mappings_identical(monkeypatch):
    """PACRs under edge masks chosen row by row by the mapping word (edge_masks_keep_all): in C where every row's
    mask keeps all 16 columns, whichever masks those are, and in Python where one row's does not; the state after
    every PACR as the Python handlers leave it."""
    code = tile_native.HANDLER_CODES["PACR"]
    counts = sfpu_issue_native._load()[0].handler_counts
    runs = []
    for on in (True, False):
        monkeypatch.setattr(tile_native, "HANDLERS_NATIVE", on)
        tx, trace, in_c = _unpack_tx(), [], []
        for w in (0xB2250004, 0xB2261020, 0xB2272020, 0x5180000B, 0x5480000F, 0x5E803C00):
            tx.push(2, w)
        for mapping, m25, m26 in _EDGE_MASKS:
            for i, v in ((20, mapping), (25, m25), (26, m26)):
                tx.cfg_write(i, v)
            for last in (0, 1, 0, 1):       # (the first PACR of each word is Python's: it caches the setup)
                before = counts()[code]
                tx.push(2, E("PACR", read_intf_sel=0, last=last, addr_mode=0), 0)
                in_c.append(counts()[code] - before)
                trace.append(_snapshot(tx))
        runs.append(trace)
        if on:
            kept = [all((0xFFFF, m25, m26, 0)[m >> 2 * row & 3] == 0xFFFF for row in range(16))   # (words 24-27)
                    for m, m25, m26 in _EDGE_MASKS]
            assert kept == [True, True, False, True, False, True, True]
            assert in_c == [0, 0, 1, 1] + [int(k) for k in kept[1:] for _ in range(4)], in_c
    assert runs[0] == runs[1]


def _move_attributes(obj, names: tuple[str, ...]) -> None:
    """obj's attributes `names` bound again to copies, last in its dict's order, and the dict grown (filler attributes)
    until its keys are rebuilt: each name is then at another entry of the dict than before, and another name at its
    old one."""
    for name in names:
        v = getattr(obj, name)
        delattr(obj, name)
        setattr(obj, name, v.copy())
    for i in range(300):
        setattr(obj, f"_filler{i}", i)


def test_view_hints_follow_moved_attributes(monkeypatch):
    """The run's view reads the containers of the Tensix and its Dst at the dict entry each was found at last
    (get_attr_hinted): between pushed runs of UNPACRs and PACRs in C, L1, the packer state, the setup caches and Dst's
    arrays are bound again to copies at other entries of rebuilt dicts, and the words after that read and write the
    copies: state for state as with the look-ups (TT_EMU_DICT_HINTS_NATIVE=0) and as the Python handlers leave it,
    the words in C where the handlers are."""
    mod = sfpu_issue_native._load()[0]
    codes = tuple(tile_native.HANDLER_CODES[n] for n in ("UNPACR", "PACR"))
    unpack = E("UNPACR", unpack_block_selection=0, addr_mode=1, set_dat_valid=0, ovrd_thread_id=1, last=1)
    pacr = lambda last: E("PACR", read_intf_sel=0, last=last, addr_mode=0)
    runs = []
    try:
        for handlers_c, hints in ((True, True), (True, False), (False, False)):
            monkeypatch.setattr(tile_native, "HANDLERS_NATIVE", handlers_c)
            mod.dict_hints_native(hints)
            tx, trace = _unpack_tx(), []
            for w in (0xB2250004, 0xB2261020, 0xB2272020, 0x5180000B, 0x5480000F, 0x5E803C00):
                tx.push(2, w)
            before = [mod.handler_counts()[c] for c in codes]
            for step in range(4):
                tx.push_many(0, (unpack, unpack), 0)
                tx.push_many(2, (pacr(0), pacr(0), pacr(1)), 0)
                while tx.step():
                    pass
                trace.append(_snapshot(tx))
                _move_attributes(tx, ("l1", "_packer", "_pack_setups", "_unpack_setups"))
                _move_attributes(tx._dst, ("rows32", "written", "cleared16"))
            runs.append(trace)
            taken = [mod.handler_counts()[c] - b for c, b in zip(codes, before)]
            assert all(n >= 4 for n in taken) == handlers_c, taken
    finally:
        mod.dict_hints_native(sfpu_issue_native.DICT_HINTS_NATIVE)
    assert runs[0] == runs[1] == runs[2]


def _rebind_view_items(tx, step: int) -> None:
    """Between two pushed runs, the containers plain_run's view holds bound again to copies, a kind a step: the
    Tensix's in its dict, Dst's in its own dict (the Tensix's unchanged), the threads' in their __slots__ (no dict
    changes), nothing, and once L1 and the packer thread's ADC read through properties their classes gain (only the
    classes' version tags change)."""
    kind = step % 5
    if kind == 0:
        for name in ("l1", "_packer", "_pack_setups", "_unpack_setups", "srca_valid", "srcb_valid", "cfg"):
            tx.__dict__[name] = tx.__dict__[name].copy()      # (as setattr; L1's, once a property reads it: unread)
    elif kind == 1:
        for name in ("rows32", "written", "cleared16"):
            setattr(tx._dst, name, getattr(tx._dst, name).copy())
    elif kind == 2:
        for th in tx.threads:
            th.cfg, th.adc, th.adc_cr, th.rwc = list(th.cfg), [[list(c) for c in s] for s in th.adc], \
                [[list(c) for c in s] for s in th.adc_cr], dict(th.rwc)
    elif step == 8:
        tx.__dict__["_l1_b"] = tx.l1.copy()
    elif step == 9:                 # (after a step that left the Tensix's dict as it was)
        type(tx).l1 = property(lambda self: self.__dict__["_l1_b"])
        box = [[[list(c) for c in s] for s in tx.threads[2].adc]]      # (the packer's ADC: its slot keeps the old)
        type(tx.threads[2]).adc = property(lambda self: box[0], lambda self, v: box.__setitem__(0, v))


def test_kept_view_follows_rebound_items(monkeypatch):
    """plain_run's view kept from call to call (TT_EMU_VIEW_KEEP_NATIVE) against the items read anew at each call and
    the Python handlers: the containers it holds bound again between pushed runs of UNPACRs and PACRs in C, in the
    Tensix's dict, in Dst's, in the threads' slots and through a class property (_rebind_view_items), state by state
    the same; the kept items answered only where it is on."""
    mod = sfpu_issue_native._load()[0]
    unpack = E("UNPACR", unpack_block_selection=0, addr_mode=1, set_dat_valid=0, ovrd_thread_id=1, last=1)
    pacr = lambda last: E("PACR", read_intf_sel=0, last=last, addr_mode=0)      # noqa: E731
    runs, kept = [], []
    try:
        for handlers_c, keep in ((True, True), (True, False), (False, False)):
            monkeypatch.setattr(tile_native, "HANDLERS_NATIVE", handlers_c)
            mod.view_keep_native(keep)
            tx, trace = _unpack_tx(), []
            tx.__class__ = type("KeptViewTensix", (Tensix,), {"__slots__": ()})   # (their own classes to change)
            tx.threads[2].__class__ = type("KeptViewThread", (thread_state.ThreadState,), {"__slots__": ()})
            for w in (0xB2250004, 0xB2261020, 0xB2272020, 0x5180000B, 0x5480000F, 0x5E803C00):
                tx.push(2, w)
            before = mod.view_keep_counts()
            for step in range(15):
                tx.push_many(0, (unpack, unpack), 0)
                tx.push_many(2, (pacr(0), pacr(0), pacr(1)), 0)
                tx.push_many(2, (pacr(0), pacr(1)), 0)
                while tx.step():
                    pass
                trace.append(_snapshot(tx))
                _rebind_view_items(tx, step)
            runs.append(trace)
            kept.append(mod.view_keep_counts() - before)
    finally:
        mod.view_keep_native(sfpu_issue_native.VIEW_KEEP_NATIVE)
    assert kept[0] > 0 and kept[1] == kept[2] == 0, kept
    assert runs[0] == runs[1] == runs[2]


# (programs of thread 1, pushed word by word, then the Tensix stepped) where the sync handlers and SETRWC leave a word
# to Python: a SEMPOST at Max (strict: raises at semaphore 0 before semaphore 1 changes), a SEMGET at zero (strict:
# raises at semaphore 0; else semaphore 1 is taken), SETRWC releasing a SrcB bank the FPU does not own (raises, strict
# or not, after its counters changed), a SEMWAIT without a condition (the default STALLWAIT) and one on Max, a ZEROACC
# of a 16-row face out of range (raises)
_DECLINES = ((E("SEMINIT", sem_sel=3, init_value=1, max_value=2), E("SEMPOST", sem_sel=3), E("SEMPOST", sem_sel=3)),
             (E("SEMINIT", sem_sel=2, init_value=2, max_value=4), E("SEMGET", sem_sel=2), E("SEMGET", sem_sel=3)),
             (E("SETRWC", bit_mask=7, rwc_a=1, rwc_b=2, rwc_d=8, rwc_cr=0, clear_ab_vld=2),),
             (E("SEMINIT", sem_sel=1, init_value=2, max_value=2), E("SEMWAIT", wait_sem_cond=0, sem_sel=1, stall_res=0),
              E("SEMWAIT", wait_sem_cond=2, sem_sel=1, stall_res=2), E("SEMGET", sem_sel=1), E("SEMPOST", sem_sel=1)),
             (E("ZEROACC", clear_mode=1, use_32_bit_mode=1, where=1, addr_mode=1),
              E("ZEROACC", clear_mode=1, use_32_bit_mode=0, where=70)))


@pytest.mark.parametrize("strict", [True, False])
@pytest.mark.parametrize("program", range(len(_DECLINES)))
def test_sync_handlers_decline_where_python_raises(program, strict, monkeypatch):
    """The same states and errors with the handlers in C and in Python where the handler raises or a SEMWAIT waits;
    C took words of each program (the ones before the raise)."""
    counts = sfpu_issue_native._load()[0].handler_counts
    codes = [tile_native.HANDLER_CODES[n] for n in ("SEMPOST", "SEMGET", "SETRWC", "SEMWAIT", "ZEROACC")]
    runs = []
    for on in (True, False):
        monkeypatch.setattr(tile_native, "HANDLERS_NATIVE", on)
        tx, trace, before = Tensix(np.zeros(layout.L1_SIZE, np.uint8), strict=strict), [], counts()
        try:
            for w in _DECLINES[program]:
                tx.push(1, w, 0)
                trace.append(_snapshot(tx))
            trace.append(("step", tx.step(), _snapshot(tx)))
        except EmuError as e:
            trace.append(str(e))
        runs.append(trace)
        taken = sum(counts()[c] - before[c] for c in codes)
        assert taken > 0 if on and program != 2 else taken == 0
    assert runs[0] == runs[1]
    assert isinstance(runs[0][-1], str) == (strict and program < 2 or program in (2, 4))


def test_sync_questions_go_to_replaced_methods():
    """latch_unmet, stamp_posts, poll_latches, drain, handler_blocked and the cycle model's waited replaced on the
    instance (a test's spy) are called by the C issue path and step_run instead of their own answers, with the same
    states as the reference methods give in C (the last SEMPOST waits for a SrcA bank the FPU never gets: step() polls
    and drains). (A replaced src_bank_state: test_direct_issue.test_bank_wait_answered_in_c.)"""
    words = (E("SEMINIT", sem_sel=2, init_value=0, max_value=4), E("SEMPOST", sem_sel=2),
             E("STALLWAIT", wait_res=0x10, stall_res=0x1FF), E("SEMPOST", sem_sel=2),
             E("SEMWAIT", wait_sem_cond=1, sem_sel=2, stall_res=0x1FF), E("SEMGET", sem_sel=2),
             E("STALLWAIT", wait_res=0x80, stall_res=0x1FF), E("SEMPOST", sem_sel=2))
    runs, calls = [], []
    for spied in (True, False):
        tx, trace = Tensix(np.zeros(layout.L1_SIZE, np.uint8)), []
        if spied:
            for owner, name in ((tx, "latch_unmet"), (tx, "stamp_posts"), (tx, "poll_latches"), (tx, "drain"),
                                (tx, "handler_blocked"), (tx.tm, "waited")):
                method = getattr(owner, name)
                setattr(owner, name, lambda *a, _m=method, _n=name: calls.append(_n) or _m(*a))
        for w in words:
            tx.push(1, w, 0)
            trace.append(_snapshot(tx))
        trace.append((tx.step(), tx.step(), _snapshot(tx)))
        runs.append(trace)
    assert runs[0] == runs[1]
    assert runs[0][-1][2][0][1][5].startswith("STALLWAIT C7")                    # (T1 blocked at the Wait Gate)
    assert sorted(set(calls)) == ["drain", "handler_blocked", "latch_unmet", "poll_latches", "stamp_posts",
                                  "waited"], calls


def _run_counting_latch_inits(monkeypatch) -> tuple[list, int]:
    """_run(8, strict, handlers in C) and how many times thread_state.Latch.__init__ ran in it."""
    init, inits = thread_state.Latch.__init__.__code__, []
    sys.setprofile(lambda frame, event, arg: event == "call" and frame.f_code is init and inits.append(1))
    try:
        return _run(8, True, True, monkeypatch), len(inits)
    finally:
        sys.setprofile(None)


def test_latch_built_in_c_as_its_class_builds_it(monkeypatch):
    """STALLWAIT / SEMWAIT's latch made in C (new_latch: the five slots thread_state.Latch.__init__ sets) gives the
    same states after every step as the class called (wait_native off, TT_EMU_WAIT_NATIVE=0) and as the Python
    handlers (test_random_tile_programs_identical), without running __init__ for the latches C made; where sync.py
    names another class (here a subclass whose __init__ counts), that class is called for every latch."""
    mod = sfpu_issue_native._load()[0]
    try:
        mod.wait_native(False)
        called, inits_called = _run_counting_latch_inits(monkeypatch)
        mod.wait_native(True)
        built, inits_built = _run_counting_latch_inits(monkeypatch)
    finally:
        mod.wait_native(sfpu_issue_native.WAIT_NATIVE)
    assert built == called
    assert inits_built < inits_called / 2, (inits_built, inits_called)
    made = []

    class Counted(thread_state.Latch):
        __slots__ = ()

        def __init__(self, *args):
            made.append(args)
            super().__init__(*args)

    monkeypatch.setattr(sync, "Latch", Counted)
    assert _run(8, True, True, monkeypatch) == built
    assert len(made) == inits_called
    set_seen = []

    class Watched(thread_state.Latch):     # (thread_state.Latch's own __init__, but its slots set through a spy)
        __slots__ = ()

        def __setattr__(self, name, value):
            set_seen.append(name)
            super().__setattr__(name, value)

    monkeypatch.setattr(sync, "Latch", Watched)
    assert _run(8, True, True, monkeypatch) == built
    assert len(set_seen) == 5 * inits_called


@pytest.mark.parametrize("seed", [6, 7])
def test_wait_reads_sfpu_busy_in_c(seed, monkeypatch):
    """A wait on the Vector Unit (STALLWAIT C11) issued in C after SFPU work reads what tm.sfpu_busy() would answer in C
    (sfpu_busy_in_c: both methods the reference ones, nothing scheduled): the same states after every step as asking
    the method (wait_native off, TT_EMU_WAIT_NATIVE=0), which then is asked more often."""
    mod, code = sfpu_issue_native._load()[0], cycles.TensixTiming.sfpu_busy.__code__

    def run(on: bool) -> tuple[list, int]:
        mod.wait_native(on)
        asked = []
        sys.setprofile(lambda frame, event, arg: event == "call" and frame.f_code is code and asked.append(1))
        try:
            return test_direct_issue._run(seed, False, True, monkeypatch, plain_c=True, timed=False,
                                          wait_share=0.2), len(asked)
        finally:
            sys.setprofile(None)
            mod.wait_native(sfpu_issue_native.WAIT_NATIVE)

    (in_c, asked_in_c), (asked, asked_always) = run(True), run(False)
    assert in_c == asked
    assert asked_in_c < asked_always, (asked_in_c, asked_always)
