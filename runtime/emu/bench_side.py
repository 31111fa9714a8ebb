"""`bench emu`'s fixed rows measured against ttsim in the same run (add_ttsim: runtime/emu/bench.py's main calls it
when TT_SIMULATOR is set, given it by tt_backend/bench/emu.py).

ttsim runs whole-tile programs only, so each fixed row is compared with the whole-tile program of its work
(COUNTERPART): riscv, tile and tile_long with their own RISC-V words; sfpu and sfpu_mop (the exp2 body pushed straight
into a Tensix thread, no RISC-V) with tile's program (the same body from the replay buffer through TRISC1's MOPs);
sfpu_long (the 171-word body pushed word by word) with tile_long's (the same words through TRISC1). The ratio is of
rates: the row's instructions per second on the emulator over ttsim's for the counterpart program's instructions (SFPU
instructions for the SFPU rows, BRISC's RISC-V instructions for riscv), wall and CPU.

How ttsim runs a program: the host holds every core in reset, clears the program core's done word
(bench.done_addr), writes the words as bench.launch_words does, releases the cores and advances the simulator in
budgets, reading the done word between them (a parked core spins on `j .` forever: the done word is the only sign of
the end both targets show). Two untimed launches first find the clocks to the end to FINE_CLOCKS (end_clocks); each
timed launch then advances that many clocks at once and polls on from there, so the host's polling costs ttsim at
most FINE_CLOCKS extra clocks and a read or two (ttsim's TRISC pushes cost few clocks: tile_long's 8 tiles end within
600 of them, where the emulator's cycle model says 48,820; BRISC's loop takes a clock an instruction on both). Warm:
the best wall time of REPEAT launches, as the emulator's row is the best of REPEAT calls (best_polled); CPU (this
process plus ttsim's, /proc's 10 ms ticks) as the mean over those launches and more, until they fill CPU_WINDOW_S,
since one launch of the SFPU programs is only a few ticks long (the emulator's row: the mean CPU of its REPEAT
calls).

What the two targets are checked on: the done word (riscv: BRISC's count, the loop's whole result) and, for the
programs that compute in Dst, the Dst rows they read and write, from ttsim's debug array read against the emulator's
Dst after the same program. ttsim's host cannot write Dst, so those programs start with bench.dst_fill (known values
written by the SFPU itself, 193 Tensix words, in ttsim's timed launches too) where the emulator's row writes random
rows from the host: the rates compare the same words, the check compares the same words on the same data.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from tt_backend.chip import layout
from tt_backend.runtime.emu import bench
from tt_backend.runtime.emu.device import EmuDevice
from tt_backend.runtime.emu.riscv_dst import dst32_to_cpu
from tt_backend.runtime.emu.tile import Tile
from tt_backend.runtime.ttsim_device import TtsimDevice

REPEAT = 3                    # timed launches on ttsim after the untimed ones, at least; the best wall time counts
CPU_WINDOW_S = 0.3            # ... and as many more as fill this much wall time (at most MAX_LAUNCHES): CPU's mean
MAX_LAUNCHES = 50
POLL_CLOCKS = 1000            # clocks between two reads of the done word while looking for the end ...
FINE_CLOCKS = 50              # ... and while pinning it down (end_clocks), and in the timed launches
DBG_ARRAY_RD_EN = 0xFFB12060  # RISC-V debug registers: Dst read-back (enable, command, data)
DBG_ARRAY_RD_CMD = 0xFFB12064
DBG_ARRAY_RD_DATA = 0xFFB1206C
DBG_ARRAY_DST = 2 << 16       # the command's array select: Dst


@dataclass(frozen=True)
class SideProgram:
    """A whole-tile program both targets run: `words` on `core` (the others park), ending with bench.done_store."""
    name: str                              # the fixed row whose program it is
    core: str
    words: list[int]
    count: Callable[[dict], int]           # the instructions the rate counts, from the emulator's Tile.stats()
    dst_rows: int                          # Dst rows 0..dst_rows-1 compared after the run (0: none)


def side_program(name: str, size: int) -> SideProgram:
    """riscv, tile or tile_long at the row's size (iterations or tiles), Dst-computing ones behind bench.dst_fill."""
    if name == "riscv":
        return SideProgram(name, "brisc", bench.riscv_program(size), lambda st: st["instructions"]["brisc"], 0)
    fill = bench.dst_fill()
    if name == "tile":
        return SideProgram(name, "trisc1", bench.tile_program(size, fill), lambda st: st["tensix_instructions"][1],
                           2 * bench.FILL_STEPS)
    if name == "tile_long":
        n = size * (len(bench.LONG_SETUP) + 32 * len(bench.LONG_BODY)) + len(fill)    # as bench_tile_long counts
        return SideProgram(name, "trisc1", bench.tile_long_program(size, fill), lambda st: n, 256)
    raise ValueError(f"no whole-tile program for {name}")


COUNTERPART = {"riscv": "riscv", "tile": "tile", "tile_long": "tile_long",
               "sfpu": "tile", "sfpu_mop": "tile", "sfpu_long": "tile_long"}


# ------------------------------------------------------------------ CPU time (ttsim runs in a child process)
def children_cpu() -> float:
    """CPU seconds of this process's live child processes (ttsim runs in one), from /proc; 0 where there is none."""
    total, me = 0, os.getpid()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            f = stat.read_text().rsplit(")", 1)[1].split()     # after "pid (comm)": state ppid ... utime stime
        except (OSError, IndexError):
            continue
        if int(f[1]) == me:
            total += int(f[11]) + int(f[12])
    return total / os.sysconf("SC_CLK_TCK")


def cpu_start() -> float:
    """The start of a CPU measurement of this process and its children (cpu_since): children_cpu's scan of /proc
    (~2 ms of CPU here) comes before this process's own clock is read, so that the interval does not count it."""
    children = children_cpu()
    return time.process_time() + children


def cpu_since(start: float) -> float:
    """CPU seconds of this process and its children since cpu_start: what a launch costs whoever else shares the
    machine. This process's clock is read before the scan (which then falls outside the interval too)."""
    own = time.process_time()
    return own + children_cpu() - start


# ------------------------------------------------------------------ one program on a device, polled
def launch_polled(dev, prog: SideProgram, first_clocks: int, limit: int,
                  step_clocks: int = FINE_CLOCKS) -> tuple[float, float, int]:
    """Hold the cores, load `prog`, release, advance `first_clocks` and then `step_clocks` at a time until the done
    word is set: (wall seconds, CPU seconds, clocks advanced), both times from the release. `dev` is a Device
    (runtime/driver.py: write_l1, write32, read32, advance): ttsim, or the emulator's EmuDevice in tests."""
    done = bench.done_addr(prog.core)
    dev.write32(layout.SOFT_RESET_0, layout.ALL_CORES_RESET)
    dev.write32(done, 0)
    bench.load_words(dev, {prog.core: prog.words})
    if hasattr(dev, "sync"):      # ttsim's writes are pipelined: the load is over before the clock starts
        dev.sync()
    c0 = cpu_start()
    t0 = time.perf_counter()
    dev.write32(layout.SOFT_RESET_0, 0)
    clocks, step = 0, max(first_clocks, step_clocks)
    while True:
        dev.advance(step)
        clocks += step
        if dev.read32(done):
            wall = time.perf_counter() - t0
            return wall, cpu_since(c0), clocks
        if clocks > limit:
            raise RuntimeError(f"bench emu: {prog.name} did not store its done word within {clocks} clocks on "
                               f"{getattr(dev, 'name', dev)}")
        step = step_clocks


def end_clocks(dev, prog: SideProgram, limit: int) -> int:
    """The clocks from the release to the done word, to FINE_CLOCKS: two untimed launches, the first polling every
    POLL_CLOCKS, the second every FINE_CLOCKS over the first's last budget."""
    _, _, coarse = launch_polled(dev, prog, POLL_CLOCKS, limit, POLL_CLOCKS)
    return launch_polled(dev, prog, coarse - POLL_CLOCKS, limit)[2]


def best_polled(dev, prog: SideProgram, limit: int) -> dict:
    """end_clocks, then REPEAT timed launches, more while they fill less than CPU_WINDOW_S: the best wall time of the
    first REPEAT (as the emulator's rows are the best of REPEAT calls), the mean CPU time of all (/proc's ticks are
    10 ms: the SFPU programs take a few)."""
    clocks = end_clocks(dev, prog, limit)
    runs = []
    while len(runs) < REPEAT or (sum(r[0] for r in runs) < CPU_WINDOW_S and len(runs) < MAX_LAUNCHES):
        runs.append(launch_polled(dev, prog, clocks, limit))
    return {"seconds": min(r[0] for r in runs[:REPEAT]), "cpu_seconds": sum(r[1] for r in runs) / len(runs),
            "clocks": clocks, "launches": len(runs)}


# ------------------------------------------------------------------ what both targets end with
def ttsim_dst(dev, rows: int) -> np.ndarray:
    """Dst rows 0..rows-1 as float32 bits (rows, 16), CPU layout as the emulator's Dst.rows32 holds them, through the
    debug array read: a 32-bit row r is two 16-bit rows of Dst's storage, its high halves in row 16 * (r // 8) + r % 8
    and its low halves 8 rows further; each read returns two neighbouring columns' halves (the lower column in the
    low 16 bits); the halves joined are in Dst32b's bit layout (riscv_dst.dst32_to_cpu undoes it)."""
    out = np.zeros((rows, 16), np.uint32)
    dev.write32(DBG_ARRAY_RD_EN, 1)
    for r in range(rows):
        hi_row = 16 * (r // 8) + r % 8
        for shift, row16 in ((16, hi_row), (0, hi_row + 8)):
            for pair in range(8):
                dev.write32(DBG_ARRAY_RD_CMD, DBG_ARRAY_DST | (pair << 12) | row16)
                word = dev.read32(DBG_ARRAY_RD_DATA)
                out[r, 2 * pair] |= (word & 0xFFFF) << shift
                out[r, 2 * pair + 1] |= (word >> 16) << shift
    dev.write32(DBG_ARRAY_RD_EN, 0)
    return np.array([[dst32_to_cpu(int(v)) for v in row] for row in out], np.uint32).reshape(rows, 16)


def end_state(dev, prog: SideProgram, dst: Callable[[int], np.ndarray]) -> dict:
    """The done word and the compared Dst rows (`dst(rows)`: the target's read-back) after `prog` ran on `dev`."""
    return {"done": dev.read32(bench.done_addr(prog.core)), "dst": dst(prog.dst_rows) if prog.dst_rows else None}


def same_state(a: dict, b: dict) -> bool:
    """Two end_state results alike: the same done word and, where compared, bit-identical Dst rows."""
    return a["done"] == b["done"] and ((a["dst"] is None and b["dst"] is None) or np.array_equal(a["dst"], b["dst"]))


def on_emulator(prog: SideProgram) -> tuple[dict, int, int]:
    """`prog` once on a fresh emulated tile whose Dst holds zeros (ttsim's Dst after reset): (its end state, the
    instructions the rate counts, its cycles)."""
    tile = Tile()
    tile.tensix.dst.write_rows32(0, np.zeros((512, 16), np.uint32))
    dev = EmuDevice(tile)
    launch_polled(dev, prog, POLL_CLOCKS, 1 << 30, POLL_CLOCKS)
    st = tile.stats()
    return end_state(dev, prog, lambda rows: tile.tensix.dst.rows32[:rows].copy()), prog.count(st), \
        st["cycles"][prog.core]


def on_ttsim(sim, prog: SideProgram, emu_cycles: int) -> tuple[dict, dict]:
    """`prog` on ttsim (`sim`: a TtsimDevice), warm, best of REPEAT: (times, end state)."""
    timing = best_polled(sim, prog, limit=20 * emu_cycles + 1_000_000)
    return timing, end_state(sim, prog, lambda rows: ttsim_dst(sim, rows))


def measure(rows: list[str], sizes: dict[str, int], lib: str) -> dict[str, dict]:
    """For each fixed row in `rows`, its counterpart program's figures on ttsim (one ttsim process for all):
    ttsim_program, ttsim_instructions, ttsim_seconds, ttsim_cpu_seconds, ttsim_per_second, ttsim_cpu_per_second,
    ttsim_clocks, ttsim_launches and identical (the emulator and ttsim ended the program in the same state).
    `sizes`: the size (iterations or tiles) each counterpart program runs at, the row's own."""
    wanted = sorted({COUNTERPART[r] for r in rows if r in COUNTERPART})
    out = {}
    with TtsimDevice(lib) as sim:
        for name in wanted:
            prog = side_program(name, sizes[name])
            emu_state, n, cycles = on_emulator(prog)
            timing, sim_state = on_ttsim(sim, prog, cycles)
            out[name] = {"ttsim_program": name, "ttsim_instructions": n, "ttsim_seconds": timing["seconds"],
                         "ttsim_cpu_seconds": timing["cpu_seconds"], "ttsim_per_second": n / timing["seconds"],
                         "ttsim_cpu_per_second": n / timing["cpu_seconds"] if timing["cpu_seconds"] else None,
                         "ttsim_clocks": timing["clocks"], "ttsim_launches": timing["launches"],
                         "identical": same_state(emu_state, sim_state)}
    return {r: out[COUNTERPART[r]] for r in rows if r in COUNTERPART}


def add_ttsim(fixed: list[dict], size: dict[str, int], lib: str) -> None:
    """bench.main's `side`: the fixed rows' counterparts measured on ttsim (measure) and each row's rate over ttsim's,
    wall (vs_ttsim_same_run) and CPU (vs_ttsim_same_run_cpu; both None where the end states differ), into the rows'
    dicts; same_work: the row timed its counterpart program itself (riscv, tile, tile_long), not words pushed straight
    into a Tensix thread (sfpu, sfpu_mop, sfpu_long: less work than ttsim's whole tile does for them)."""
    side = measure([r["kernel"] for r in fixed], size, lib)
    for r in fixed:
        sim = side[r["kernel"]]
        n = r.get("sfpu_instructions", r.get("riscv_instructions"))
        ok = sim["identical"]           # (no ratio where ttsim did not end the program as the emulator did)
        r.update(sim, same_work=r["kernel"] == sim["ttsim_program"],
                 vs_ttsim_same_run=r["per_second"] / sim["ttsim_per_second"] if ok else None,
                 vs_ttsim_same_run_cpu=(n / r["cpu_seconds"] / sim["ttsim_cpu_per_second"]
                                        if ok and sim["ttsim_cpu_per_second"] and r["cpu_seconds"] else None))
