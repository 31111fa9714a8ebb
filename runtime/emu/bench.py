"""`python -m tt_backend bench emu` (tt_backend/bench lists every benchmark): emulator speed on fixed kernels, in
emulated instructions per second of host time, with the cycle model's view of the same runs.

Kernels (no compiler needed: RISC-V programs are assembled here, Tensix words come from chip.isa):
* `riscv`  - BRISC counting loop (RV32I add/branch), through Tile.run.
* `sfpu`   - SFPU only: an exp2-shaped row body (SFPLOAD, SFPEXEXP/SFPEXMAN, 4 Horner SFPMADs, SFPSETEXP,
             SFPSTORE = 9 instructions, the shape lowering/codegen/sfpu_ops.py's exp2 has) replayed over a 32-row tile,
             pushed straight into a Tensix thread.
* `sfpu_mop` - the same body in the compute template's shape: recorded once in the replay buffer, one MOP
             (32 x REPLAY) per 32-row tile, pushed straight into a Tensix thread (the emulator batches the row steps).
* `tile`   - the same body through the whole tile: TRISC1 issues one MOP per tile (MOP -> REPLAY -> SFPU), BRISC
             and the other TRISCs spin on a shared counter like the real reader/writer/pack cores do.
* `sfpu_long` - a real 171-word body (lowering's sqrt(sin(x) * exp2(y) + log2(z)): predication with SFPSETCC /
             SFPGT / SFPLE / SFPENCC, Horner chains, 3 loads, 1 store) with its 14 setup words, longer than the
             replay buffer, so issued as the compute template does: every word pushed on its own, 32 row steps per
             tile, straight into a Tensix thread, a basic block of tile_long's loop per Tensix.push_many call.
* `tile_long` - the same through the whole tile: TRISC1 runs the template's loop (MATH_Offset, SETRWC, setup words,
             32 x the 171 body words as .ttinsn, STALLWAIT, TTSync per tile).
Each fixed row is timed warm, the best of 3 calls after one untimed call (best_of), as the kernel rows' launches are;
wall (`seconds`) and this process's CPU (`cpu_seconds`, the mean of the 3 calls). riscv, tile and tile_long end with
a done word stored to L1 (done_store: one instruction before `j .`, so that a target whose parked cores cannot be seen
shows the end too).

Against ttsim (issue #12: every row >= 1.0 against ttsim measured in the same run): with TT_SIMULATOR set, each row's
work runs on ttsim in the same run (runtime/emu/bench_side.py): riscv, tile and tile_long their own words; sfpu and
sfpu_mop, which ttsim has no entry for (no RISC-V), against tile's program (the same exp2 body from the replay buffer
through TRISC1); sfpu_long against tile_long's (the same 171 words pushed by TRISC1). `vs_ttsim_same_run` (table:
`vs ttsim`) is the row's rate over ttsim's in instructions of the same kind, wall time; `vs_ttsim_same_run_cpu` the
same in CPU time; `identical` whether both targets ended that program in the same state (done word, Dst rows).
`vs_ttsim` (table: `vs ref`) stays the rate over ttsim's stored reference rates TTSIM_SFPU_PER_S and
TTSIM_RISCV_PER_S (measured on another day and host, whose speed varies 1.5x over a session: a rough bar only).
"""
from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

from tt_backend.runtime.driver import jal_x0
from tt_backend.chip import isa, layout
from tt_backend.runtime.emu.tensix import Tensix
from tt_backend.runtime.emu.tile import Tile
from tt_backend.runtime.emu.timeline import TimelineRecorder

E = isa.encode
TTSIM_SFPU_PER_S = 4.3e6
TTSIM_RISCV_PER_S = 8.5e6


# A few RISC-V encoders for the hand-assembled bench programs (also used by tests/emu/test_emu_speed.py).
def ttinsn(w: int) -> int:
    """The RISC-V word that pushes Tensix word w (`.ttinsn`: w rotated left by 2)."""
    return ((w << 2) | (w >> 30)) & 0xFFFFFFFF


def i_type(imm: int, rs1: int, f3: int, rd: int, op: int) -> int:
    """An I-type instruction (addi, lw, ...)."""
    return ((imm & 0xFFF) << 20) | (rs1 << 15) | (f3 << 12) | (rd << 7) | op


def b_type(off: int, rs2: int, rs1: int, f3: int) -> int:
    """A branch to pc + off."""
    o = off & 0x1FFF
    return (((o >> 12) & 1) << 31) | (((o >> 5) & 0x3F) << 25) | (rs2 << 20) | (rs1 << 15) | (f3 << 12) | \
        (((o >> 1) & 0xF) << 8) | (((o >> 11) & 1) << 7) | 0x63


def sw(rs2: int, rs1: int, imm: int) -> int:
    """sw rs2, imm(rs1)"""
    return (((imm >> 5) & 0x7F) << 25) | (rs2 << 20) | (rs1 << 15) | (2 << 12) | ((imm & 31) << 7) | 0x23


def lui(rd: int, imm20: int) -> int:
    """lui rd, imm20"""
    return ((imm20 & 0xFFFFF) << 12) | (rd << 7) | 0x37


def li(rd: int, value: int) -> list[int]:
    """lui + addi: rd = value"""
    hi, lo = (value + 0x800) >> 12, value & 0xFFF
    return [lui(rd, hi), i_type(lo, rd, 0, rd, 0x13)]


J_SELF = 0x0000006F


def done_addr(core: str) -> int:
    """The L1 word a bench program stores a nonzero word to just before it parks (`j .`): the completion signal a host
    polls between budgets on a target whose parked cores cannot be seen (ttsim; runtime/emu/bench_side.py). It is the
    core's launch status word (chip/layout.py STATUS_BASE), within reach of `sw rs, imm(x0)`."""
    return layout.STATUS_BASE + layout.STATUS_STRIDE * layout.CORES.index(core)


def done_store(reg: int, core: str) -> int:
    """sw reg, done_addr(core)(x0): one instruction, so a row's count moves by one."""
    return sw(reg, 0, done_addr(core))


def exp2_body() -> list[int]:
    """One 32-lane row of an exp2-shaped SFPU sequence (9 instructions, the last one advances Dst by 2)."""
    mad = lambda a, b, c, d: E("SFPMAD", lreg_src_a=a, lreg_src_b=b, lreg_src_c=c, lreg_dest=d, instr_mod1=0)
    return [E("SFPLOAD", lreg_ind=0, instr_mod0=3, sfpu_addr_mode=0, dest_reg_addr=0),
            E("SFPEXEXP", lreg_c=0, lreg_dest=1, instr_mod1=0),
            E("SFPEXMAN", lreg_c=0, lreg_dest=2, instr_mod1=0),
            mad(0, 12, 13, 3), mad(3, 0, 14, 3), mad(3, 0, 10, 3), mad(3, 0, 10, 3),
            E("SFPSETEXP", lreg_c=3, lreg_dest=1, instr_mod1=0, imm12_math=0),
            E("SFPSTORE", lreg_ind=3, instr_mod0=3, sfpu_addr_mode=1, dest_reg_addr=0)]


LONG_SETUP = [
    0x8A00300A, 0x71003F35, 0x710A04F3, 0x910000B0, 0x7100BE2D, 0x710A1EEF, 0x910000C0, 0x71003E30, 0x710A2FAD,
    0x910000D0, 0x7100BE37, 0x710A33D9, 0x910000E0, 0x8F000000,
]
LONG_BODY = [
    0x70030080, 0x71303F35, 0x713A04F3, 0x79000036, 0x7AFE9327, 0x7A009335, 0x7AFF7335, 0x79000B34, 0x75BF8030,
    0x90000223, 0x90000220, 0x71103DC6, 0x711AB9A3, 0x84013C10, 0x84013D10, 0x84013E10, 0x71403E51, 0x714AF6EC,
    0x84013410, 0x7140BE76, 0x714A3D09, 0x84013410, 0x71403E93, 0x714AC042, 0x84013410, 0x7140BEB8, 0x714AAA48,
    0x84013410, 0x71403EF6, 0x714A3840, 0x84013410, 0x7140BF38, 0x714AAA3B, 0x84013410, 0x714032AD, 0x714A42F6,
    0x84013410, 0x84031912, 0x71403FB8, 0x714AAA3B, 0x84034110, 0x850A2110, 0x71407F80, 0x96000041, 0x7C000010,
    0x8A000000, 0x7B000000, 0x71107FC0, 0x8A000000, 0x77000021, 0x7B000206, 0x7110FF80, 0x8A000000, 0x70030040,
    0x71404B40, 0x850A0430, 0x850A3452, 0x850A0552, 0x7A017335, 0x7120377E, 0x712AF2FF, 0x71403922, 0x714A2E42,
    0x84025420, 0x71403AAE, 0x714AC543, 0x84025420, 0x71403C1D, 0x714A94FA, 0x84025420, 0x71403D63, 0x714A5845,
    0x84025420, 0x71403E75, 0x714AFDF0, 0x84025420, 0x71403F31, 0x714A7218, 0x84025420, 0x84025A20, 0x8F000000,
    0x79000324, 0x7140C2FC, 0x97000041, 0x7C000920, 0x8A000000, 0x71404300, 0x96000041, 0x71207F80, 0x8A000000,
    0x89000031, 0x71407F80, 0x97000431, 0x71207FC0, 0x8A000000, 0x70030000, 0x71604B40, 0x71503EA2, 0x715AF983,
    0x84005640, 0x850A4652, 0x71604049, 0x716A1000, 0x84056031, 0x7160B715, 0x716A777A, 0x84056331, 0x7A01F445,
    0x84033952, 0x71602F29, 0x716A2FAB, 0x7170B2D6, 0x717AFE2A, 0x84065760, 0x71703638, 0x717AEE65, 0x84065760,
    0x7170B950, 0x717A0CFE, 0x84065760, 0x71703C08, 0x717A8889, 0x84065760, 0x7170BE2A, 0x717AAAAB, 0x84065760,
    0x84035952, 0x84056330, 0x8F000000, 0x8D000430, 0x77000040, 0x7900D441, 0x7C000030, 0x8A000000, 0x84032130,
    0x71007FC0, 0x71108000, 0x96000311, 0x7C000300, 0x8A000000, 0x7C000340, 0x77000310, 0x7903C111, 0x745F8040,
    0x8A000000, 0x97000931, 0x71107F80, 0x97000311, 0x7AFFF415, 0x71205F37, 0x712A59DF, 0x79000216, 0x84041922,
    0x84021A21, 0x743F0020, 0x84012110, 0x84041922, 0x84021A21, 0x743F0020, 0x84012110, 0x84041902, 0x84000421,
    0x743F0010, 0x84012000, 0x77000310, 0x7903C111, 0x71202F80, 0x84002902, 0x8F000000, 0x8A000000, 0x720420C0,
]
LONG_CFG1 = 0x60000000          # ALU formats + Fp32_enabled + SFPU_Fp32_enabled (the kernel's tt_cfg_write(1, ...))
LONG_PROLOGUE = [0xB2010000, 0x37000004]       # MATH_Offset := 0, SETRWC Dst := 0
LONG_EPILOGUE = [0xA2010810]                   # STALLWAIT until SFPU and FPU idle


def long_inputs() -> np.ndarray:
    """Dst slots 0..2 (rows 0..191) hold the three inputs, positive (log2, sqrt); slot 3 receives the output."""
    rows = np.random.default_rng(0).uniform(0.5, 1.5, (512, 16)).astype(np.float32).view(np.uint32)
    return rows


DST_RESET = E("SETRWC", rwc_cr=0, rwc_d=0, rwc_b=0, rwc_a=0, bit_mask=4, clear_ab_vld=0)     # Dst RWC := 0


def tensix_setup() -> list[int]:
    return [E("SETC16", setc16_reg=28 + 1, setc16_value=2)]      # ADDR_MOD_DST_SEC1: Dst += 2


RECORD_TIMELINE = False    # --timeline: every kernel runs with the timeline recorder attached (its cost, measured)


def _recording(emu):
    """A fresh Tensix or Tile, with a timeline recorder attached when --timeline asked for one."""
    if RECORD_TIMELINE:
        if isinstance(emu, Tile):
            emu.timeline_begin()
        else:
            emu.tm.rec = emu.tm.sfpu.rec = TimelineRecorder(0, emu.tm)
    return emu


def bench_sfpu(rows: int = 4096) -> dict:
    tx = _recording(Tensix(np.zeros(layout.L1_SIZE, np.uint8), strict=True))
    tx.dst.write_rows32(0, np.random.default_rng(0).standard_normal((512, 16)).astype(np.float32).view(np.uint32))
    body = exp2_body()
    per = 32 // len(body)                                  # rows per replay buffer load
    rec = body * per
    words = tensix_setup() + [E("REPLAY", load_mode=1, execute_while_loading=0, len=len(rec), start_idx=0)] + rec
    for w in words:
        tx.push(1, w)
    n0 = tx.instructions[1]
    t0, c0 = time.perf_counter(), time.process_time()
    done_rows = 0
    replay = E("REPLAY", load_mode=0, execute_while_loading=0, len=len(rec), start_idx=0)   # (not timed)
    while done_rows < rows:
        tx.push(1, replay)
        done_rows += per
        if done_rows % 128 < per:
            tx.push(1, DST_RESET)                          # stay inside the 512 Dst rows
    tx.settle()                                            # deferred SFPU work (accel/deferral.py) included
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    n = tx.instructions[1] - n0
    return {"kernel": "sfpu", "sfpu_instructions": n, "seconds": dt, "cpu_seconds": cpu, "per_second": n / dt,
            "vs_ttsim": n / dt / TTSIM_SFPU_PER_S, "cycles": tx.tm.clock[1] - (tx.tm.first[1] or 0)}


def bench_sfpu_mop(tiles: int = 128) -> dict:
    """The compute template's issue shape (lowering/families/tile_render.py): the 9-word body recorded once in the replay
    buffer, then per tile one MOP (template 1: 32 x REPLAY) pushed straight into a Tensix thread."""
    tx = _recording(Tensix(np.zeros(layout.L1_SIZE, np.uint8), strict=True))
    tx.dst.write_rows32(0, np.random.default_rng(0).standard_normal((512, 16)).astype(np.float32).view(np.uint32))
    body = exp2_body()
    replay = E("REPLAY", load_mode=0, execute_while_loading=0, len=len(body), start_idx=0)
    nop = E("NOP")
    for i, v in enumerate([1, 32, nop, nop, nop, replay, nop, replay, replay]):
        tx.mop_cfg_write(1, i, v)
    for w in tensix_setup() + [E("REPLAY", load_mode=1, execute_while_loading=0, len=len(body), start_idx=0)] + body:
        tx.push(1, w)
    mop = E("MOP", mop_type=1, loop_count=0, zmask_lo16_or_loop_count=0)
    n0 = tx.instructions[1]
    t0, c0 = time.perf_counter(), time.process_time()
    for i in range(tiles):
        if i % 4 == 0:
            tx.push(1, DST_RESET)                          # stay inside the 512 Dst rows
        tx.push(1, mop)
    tx.settle()
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    n = tx.instructions[1] - n0
    return {"kernel": "sfpu_mop", "sfpu_instructions": n, "seconds": dt, "cpu_seconds": cpu, "per_second": n / dt,
            "vs_ttsim": n / dt / TTSIM_SFPU_PER_S, "cycles": tx.tm.clock[1] - (tx.tm.first[1] or 0)}


LONG_BLOCKS = (tuple(LONG_PROLOGUE + LONG_SETUP),) + (tuple(LONG_BODY),) * 32 + (tuple(LONG_EPILOGUE),)


def bench_sfpu_long(tiles: int = 8) -> dict:
    """The long-body issue shape: every SFPU word pushed on its own (32 row steps of the 171-word body per tile), each
    of tile_long_program's basic blocks (prologue + setup, the body, the epilogue) in one Tensix.push_many call, the
    entry the RISC-V fast path hands a block's `.ttinsn` words to (the same state and cycles as a push() per word:
    tests/emu/test_emu_speed.py; the Python loop around push() per word cost as much again as the emulation)."""
    tx = _recording(Tensix(np.zeros(layout.L1_SIZE, np.uint8), strict=True))
    tx.dst.write_rows32(0, long_inputs())
    tx.cfg_write(1, LONG_CFG1)
    tx.push(1, 0xB21D0002)                                 # ADDR_MOD_DST_SEC1: Dst RWC += 2
    n0 = tx.instructions[1]
    push_many = tx.push_many
    t0, c0 = time.perf_counter(), time.process_time()
    t = 0
    for _ in range(tiles):
        for block in LONG_BLOCKS:
            t = push_many(1, block, t)
    tx.settle()
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    n = tx.instructions[1] - n0 - tiles * (len(LONG_PROLOGUE) + len(LONG_EPILOGUE))
    return {"kernel": "sfpu_long", "sfpu_instructions": n, "seconds": dt, "cpu_seconds": cpu, "per_second": n / dt,
            "vs_ttsim": n / dt / TTSIM_SFPU_PER_S, "cycles": tx.tm.clock[1] - (tx.tm.first[1] or 0),
            "checksum": int(tx.dst.rows32[192:256].astype(np.uint64).sum())}


def tile_long_program(tiles: int, fill: list[int] = ()) -> list[int]:
    """TRISC1's words for the compute template's long-body loop (each SFPU word pushed on its own, 32 row steps per
    tile, TTSync after each tile) over `tiles` tiles; `fill` (Tensix words, dst_fill) runs once after the config
    write. Ends with done_store(x9 = TENSIX_SYNC) and `j .`."""
    prog = li(7, layout.TENSIX_CFG_BASE) + li(8, LONG_CFG1) + [sw(8, 7, 4)] + [ttinsn(w) for w in fill]
    prog += [ttinsn(0xB21D0002)] + li(5, tiles) + li(9, layout.TENSIX_SYNC)
    tile_loop = len(prog)
    prog += [ttinsn(w) for w in LONG_PROLOGUE + LONG_SETUP] + [i_type(32, 0, 0, 6, 0x13)]     # x6 = 32 row steps
    row_loop = len(prog)
    prog += [ttinsn(w) for w in LONG_BODY] + [i_type(-1, 6, 0, 6, 0x13)]
    prog += [b_type(4 * (row_loop - len(prog)), 0, 6, 1)]
    prog += [ttinsn(w) for w in LONG_EPILOGUE] + [sw(0, 9, 0), i_type(0, 9, 2, 10, 0x03)]  # TTSync: sw, then lw
    prog += [i_type(-1, 5, 0, 5, 0x13)]
    prog += [b_type(4 * (tile_loop - len(prog)), 0, 5, 1), done_store(9, "trisc1"), J_SELF]
    return prog


def launch_tile_long(tile, tiles: int) -> None:
    """Release `tile` with TRISC1 running tile_long_program over `tiles` tiles on long_inputs; the other cores park."""
    tile.tensix.dst.write_rows32(0, long_inputs())
    launch_words(tile, {"trisc1": tile_long_program(tiles)})


def bench_tile_long(tiles: int = 8) -> dict:
    """TRISC1 runs the compute template's long-body loop; the other cores park."""
    tile = _recording(Tile())
    launch_tile_long(tile, tiles)
    dt, cpu = run_tile(tile, 10_000_000)
    st = tile.stats()
    n_sfpu = tiles * (len(LONG_SETUP) + 32 * len(LONG_BODY))
    n_rv = sum(st["instructions"].values())
    return {"kernel": "tile_long", "sfpu_instructions": n_sfpu, "riscv_instructions": n_rv, "seconds": dt,
            "cpu_seconds": cpu, "per_second": n_sfpu / dt, "vs_ttsim": n_sfpu / dt / TTSIM_SFPU_PER_S,
            "cycles": st["cycles"]["trisc1"], "tensix_cycles": st["tensix_cycles"]["issue_cycle"][1],
            "tensix_instructions": st["tensix_instructions"][1],
            "checksum": int(tile.tensix.dst.rows32[192:256].astype(np.uint64).sum())}


def launch_words(tile, programs: dict[str, list[int]]) -> None:
    """Put hand-assembled programs (lists of RISC-V words) at each core's image slot and release all five
    (the others park at once: `j .`)."""
    load_words(tile, programs)
    tile.write32(layout.SOFT_RESET_0, 0)


def load_words(tile, programs: dict[str, list[int]]) -> None:
    """launch_words without the release: images, BRISC's vector and the other cores' reset PCs. `tile` is anything
    with write_l1 / write32 whose cores are held in reset (a fresh emulator Tile, or a device after its host held
    them)."""
    for core in layout.CORES:
        tile.write_l1(layout.IMAGE_SLOT[core], np.array(programs.get(core, [J_SELF]), np.uint32).tobytes())
    tile.write_l1(0, np.array([jal_x0(layout.IMAGE_SLOT["brisc"])], np.uint32).tobytes())
    for i in range(3):
        tile.write32(layout.TRISC_RESET_PC[i], layout.IMAGE_SLOT[f"trisc{i}"])
    tile.write32(layout.TRISC_RESET_PC_OVERRIDE, 7)
    tile.write32(layout.NCRISC_RESET_PC, layout.IMAGE_SLOT["ncrisc"])
    tile.write32(layout.NCRISC_RESET_PC_OVERRIDE, 1)


def run_tile(tile, budget: int) -> tuple[float, float]:
    """Run `tile` in steps of `budget` until every core parked (or a step ran short): (wall, this process's CPU)
    seconds."""
    t0, c0 = time.perf_counter(), time.process_time()
    while True:
        ran = tile.run(budget)
        if ran < budget or all(not tile.running(c) for c in layout.CORES):
            break
    return time.perf_counter() - t0, time.process_time() - c0


def riscv_program(iters: int) -> list[int]:
    """BRISC's counting loop: x6 counts to `iters` (x5 counts down), then x6 is the done word (done_store)."""
    # x5 = iters; x6 = 0; loop: addi x6, x6, 1; addi x5, x5, -1; bne x5, x0, loop; sw x6, done; j .
    return li(5, iters) + [i_type(0, 0, 0, 6, 0x13), i_type(1, 6, 0, 6, 0x13), i_type(-1, 5, 0, 5, 0x13),
                           b_type(-8, 0, 5, 1), done_store(6, "brisc"), J_SELF]


def bench_riscv(iters: int = 1_000_000) -> dict:
    tile = _recording(Tile())
    launch_words(tile, {"brisc": riscv_program(iters)})
    dt, cpu = run_tile(tile, 50_000_000)
    n = tile.instructions["brisc"]
    return {"kernel": "riscv", "riscv_instructions": n, "seconds": dt, "cpu_seconds": cpu, "per_second": n / dt,
            "vs_ttsim": n / dt / TTSIM_RISCV_PER_S, "cycles": tile.stats()["cycles"]["brisc"]}


def tile_program(tiles: int, fill: list[int] = ()) -> list[int]:
    """TRISC1's words for the exp2 body through the whole tile: the MOP config through MMIO (template 1: 11 x REPLAY
    of a 3-row recording, ~ one 32-row tile), the recording, then per tile SETRWC (Dst := 0) and one MOP; TTSync and
    done_store(x9) at the end. `fill` (Tensix words, dst_fill) runs once first."""
    body = exp2_body()
    per = 32 // len(body)
    rec = body * per                                      # 3 rows per replay
    reps = 32 // per + 1                                  # 11 replays ~ one 32-row tile (33 rows)
    mopcfg = [1, reps, E("NOP"), E("NOP"), E("NOP"),
              E("REPLAY", load_mode=0, execute_while_loading=0, len=len(rec), start_idx=0),
              E("NOP"), E("REPLAY", load_mode=0, execute_while_loading=0, len=len(rec), start_idx=0),
              E("REPLAY", load_mode=0, execute_while_loading=0, len=len(rec), start_idx=0)]
    mop = E("MOP", mop_type=1, loop_count=0, zmask_lo16_or_loop_count=0)
    prog = [ttinsn(w) for w in fill]
    # MOP config through MMIO: x7 = 0xFFB80000; sw each word
    prog += li(7, 0xFFB80000)
    for i, v in enumerate(mopcfg):
        prog += li(8, v) + [((4 * i >> 5) << 25) | (8 << 20) | (7 << 15) | (2 << 12) | ((4 * i & 31) << 7) | 0x23]
    prog += [ttinsn(w) for w in tensix_setup()]
    prog += [ttinsn(E("REPLAY", load_mode=1, execute_while_loading=0, len=len(rec), start_idx=0))]
    prog += [ttinsn(w) for w in rec]
    prog += li(5, tiles)
    loop = len(prog)
    prog += [ttinsn(DST_RESET), ttinsn(mop), i_type(-1, 5, 0, 5, 0x13)]
    prog += [b_type(4 * (loop - len(prog)), 0, 5, 1)]
    prog += [lui(9, 0xFFE80), i_type(4, 9, 2, 10, 0x03), done_store(9, "trisc1"), J_SELF]    # TTSync, done, park
    return prog


def bench_tile(tiles: int = 64) -> dict:
    """TRISC1 runs tile_program (one MOP of 11 REPLAYs of the 3-row exp2 recording per tile) on random Dst rows; the
    other cores park."""
    tile = _recording(Tile())
    tile.tensix.dst.write_rows32(0, np.random.default_rng(0).standard_normal((512, 16)).astype(np.float32)
                                 .view(np.uint32))
    launch_words(tile, {"trisc1": tile_program(tiles)})
    dt, cpu = run_tile(tile, 10_000_000)
    st = tile.stats()
    n_sfpu = st["tensix_instructions"][1]
    n_rv = sum(st["instructions"].values())
    return {"kernel": "tile", "sfpu_instructions": n_sfpu, "riscv_instructions": n_rv, "seconds": dt,
            "cpu_seconds": cpu, "per_second": n_sfpu / dt, "vs_ttsim": n_sfpu / dt / TTSIM_SFPU_PER_S,
            "cycles": st["cycles"]["trisc1"], "tensix_cycles": st["tensix_cycles"]["issue_cycle"][1]}


FILL_STEPS = 96      # row steps dst_fill writes: Dst slots 0..2 (rows 0..191), every input tile_long and tile read


def dst_fill() -> list[int]:
    """Tensix words that give Dst rows 0..191 known, positive float32 values from inside a program (ttsim's host
    cannot write Dst): SETRWC Dst := 0 (a previous launch may have left the counter elsewhere), then per row step k
    SFPLOADI L0 := bf16 1 + k/128, SFPSTORE L0 as float32 at Dst address 2k (the bodies' row-step addressing: rows
    4 (k // 2) .. + 3, the columns of k's parity). One value per row step (all 32 lanes alike): the data bench_side
    compares both targets on, not the rows' random inputs."""
    words = [DST_RESET]
    for k in range(FILL_STEPS):
        words += [E("SFPLOADI", lreg_ind=0, instr_mod0=0, imm16=0x3F80 + k),
                  E("SFPSTORE", lreg_ind=0, instr_mod0=3, sfpu_addr_mode=0, dest_reg_addr=2 * k)]
    return words


KERNELS = ("riscv", "sfpu", "sfpu_mop", "tile", "sfpu_long", "tile_long")
ROWS = {"riscv": bench_riscv, "sfpu": bench_sfpu, "sfpu_mop": bench_sfpu_mop, "tile": bench_tile,
        "sfpu_long": bench_sfpu_long, "tile_long": bench_tile_long}
SIZES = {"riscv": (200_000, 2_000_000), "sfpu": (512, 4096), "sfpu_mop": (16, 128), "tile": (8, 64),   # (--quick,
         "sfpu_long": (2, 8), "tile_long": (2, 8)}                                                       #  default)
REPEAT = 3                                        # timed calls of a fixed row after one warm-up call: the best counts
TIMES = ("seconds", "cpu_seconds", "per_second", "vs_ttsim")     # what differs between the calls of a row


def best_of(row) -> dict:
    """A fixed row measured warm, as the kernel rows' launches are (tt_backend/bench/emu.py): one untimed call (the
    first use of each word and path), then the fastest of REPEAT calls, with the mean CPU time of the REPEAT (ttsim's
    side is a mean too: bench_side.best_polled). Each call does the same work on a fresh Tensix or tile, so all but the
    times must be equal: a difference is an error."""
    row()
    results = [row() for _ in range(REPEAT)]
    same = [{k: v for k, v in r.items() if k not in TIMES} for r in results]
    if any(s != same[0] for s in same):
        raise RuntimeError(f"bench emu: the {results[0]['kernel']} row's repeated calls differ: {same}")
    best = min(results, key=lambda r: r["seconds"])
    if "cpu_seconds" not in best:
        return best
    return dict(best, cpu_seconds=sum(r["cpu_seconds"] for r in results) / REPEAT)


def print_fixed(fixed: list[dict]) -> None:
    """The fixed rows' table: the emulator's rate, its ratio to the stored reference rate (`vs ref`), and where ttsim
    ran in this run, ttsim's rate on the counterpart program and the ratios (wall, CPU; >= 1: the emulator is at
    least as fast) with the end-state check."""
    if not fixed:
        return
    side = "ttsim_per_second" in fixed[0]
    print(f"{'kernel':9} {'instructions':>12} {'seconds':>8} {'M instr/s':>10} {'vs ref':>8} {'cycles':>9}"
          + (f"  {'ttsim prog':10} {'ttsim M/s':>9} {'vs ttsim':>9} {'vs (cpu)':>9} {'end state':>9}" if side else ""))
    for r in fixed:
        n = r.get("sfpu_instructions", r.get("riscv_instructions"))
        line = (f"{r['kernel']:9} {n:>12} {r['seconds']:>8.3f} {r['per_second'] / 1e6:>10.3f} {r['vs_ttsim']:>7.2f}x "
                f"{r['cycles']:>9}")
        if side:
            mark = " " if r["same_work"] else "*"
            ratio = lambda v: f"{v:>7.2f}x{mark}" if v else f"{'-':>9}"
            line += (f"  {r['ttsim_program']:10} {r['ttsim_per_second'] / 1e6:>9.3f} {ratio(r['vs_ttsim_same_run'])} "
                     f"{ratio(r['vs_ttsim_same_run_cpu'])} {'identical' if r['identical'] else 'DIFFER':>9}")
        print(line)
    print(f"vs ref: the rate over ttsim's stored reference rate ({TTSIM_SFPU_PER_S / 1e6:g} M SFPU / "
          f"{TTSIM_RISCV_PER_S / 1e6:g} M RISC-V instructions/s, another day and host)"
          + ("; vs ttsim: over ttsim's rate on the counterpart whole-tile program in this run (sfpu, sfpu_mop: "
             "tile's; sfpu_long: tile_long's; *: the row pushed the words straight into a Tensix thread, less work "
             "than the whole tile ttsim ran), end state: that program's done word and Dst on both (no ratio where "
             "they differ)" if side else ""))


def main(argv: list[str] | None = None, extra_rows: dict | None = None, side=None) -> int:
    """`extra_rows`: name -> (quick) -> result dict of a row measured side by side on the emulator and ttsim (the
    kernel rows tt_backend/bench/emu.py adds: they need the lowering, which the runtime does not import). `side`:
    (fixed rows' results, their sizes, libttsim path) -> None, which adds the rows' ttsim figures when TT_SIMULATOR
    is set (bench_side.add_ttsim, which tt_backend/bench/emu.py passes: bench_side imports this module)."""
    extra_rows = extra_rows or {}
    names = KERNELS + tuple(extra_rows)
    ap = argparse.ArgumentParser(prog="python -m tt_backend bench emu", description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (a few seconds)")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    ap.add_argument("--timeline", action="store_true",
                    help="record per-lane timelines while running (what TT_DUMP and PROFILE=1 turn on)")
    # (no `choices=`: Python 3.11's argparse rejects an empty nargs="*" list against choices)
    ap.add_argument("kernels", nargs="*", help=f"any of {', '.join(names)} (default: all)")
    args = ap.parse_args(argv)
    global RECORD_TIMELINE
    RECORD_TIMELINE = args.timeline
    if unknown := [k for k in args.kernels if k not in names]:
        ap.error(f"unknown kernel(s) {', '.join(unknown)}: choose from {', '.join(names)}")
    size = {k: small if args.quick else full for k, (small, full) in SIZES.items()}
    runs = {**{k: (lambda f=f, n=size[k]: f(n)) for k, f in ROWS.items()},
            **{k: (lambda f=f: f(args.quick)) for k, f in extra_rows.items()}}
    results = [best_of(runs[k]) if k in KERNELS else runs[k]() for k in args.kernels or names]
    fixed = [r for r in results if r["kernel"] in KERNELS]
    if fixed and side and os.environ.get("TT_SIMULATOR"):
        side(fixed, size, os.environ["TT_SIMULATOR"])
    if args.json:
        print(json.dumps(results))
        return 0
    print_fixed(fixed)
    launched = [r for r in results if r["kernel"] not in KERNELS]
    if launched:
        print(f"\n{'kernel':15} {'plan':20} {'emu s':>8} {'ttsim s':>8} {'vs ttsim':>9} {'emu cpu':>8} {'ttsim cpu':>9} "
              f"{'vs (cpu)':>9} {'cycles':>10} {'output':>9}")
    for r in launched:
        sim = (f"{r['ttsim_seconds']:>8.3f} {r['vs_ttsim']:>8.2f}x" if "ttsim_seconds" in r else f"{'-':>8} {'-':>9}")
        sim_cpu = (f"{r['ttsim_cpu_seconds']:>9.3f} {r['vs_ttsim_cpu']:>8.2f}x" if "ttsim_seconds" in r
                   else f"{'-':>9} {'-':>9}")
        same = {None: "-", True: "identical", False: "DIFFER"}[r.get("identical")]
        print(f"{r['kernel']:15} {r['plan']:20} {r['seconds']:>8.3f} {sim} {r['cpu_seconds']:>8.3f} {sim_cpu} "
              f"{r['cycles']:>10} {same:>9}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
