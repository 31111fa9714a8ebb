"""A status line on the terminal while a long kernel launch runs (`runtime/driver.py` calls it from its wait loop).

Emulating a big kernel takes minutes (a 512x512 fp32 matmul over one); without a sign of life a user cannot tell a
slow kernel from a hung one. After `AFTER_S` seconds the line shows, at most every `EVERY_S` seconds and rewritten in
place on stderr:

    TT r_512_512_512: 14.2 s | writer 9 | 1.83M cycles | RISC-V 412k instr/s, Tensix 96k instr/s

* `writer N`: the writer core's (NCRISC's) progress word (status block +8), which every writer template bumps once per
  output step it has written to DRAM: an output tile for elementwise kernels and reductions, a 32-row output panel for
  matmuls. The total is not known to the driver (the kernel plan has it; passing it down is a follow-up).
* cycles and instructions per second: from the device's `stats()` (the emulator's cycle model: the tile clock since
  the launch began, RISC-V instructions retired by the five cores, Tensix instructions issued). A launch in the
  emulator's functional mode (`stats()["timed"]` false: the plugin's launches that report no cycles) shows no cycles. Targets without it
  (ttsim, a card) have no emulated cycles, and the line leaves them out rather than inventing them.

Only when stderr is a terminal: in a pipe, a log or a CI run nothing is printed (`for_terminal` returns a reporter that
does nothing, `NoProgress`). Stdlib only, like the rest of runtime: no tinygrad.
"""
from __future__ import annotations

import sys
import time
from typing import TextIO

AFTER_S = 2.0          # a launch shorter than this prints nothing
EVERY_S = 0.5          # redraw at most this often (each redraw asks the device for its stats)
WRITER = "ncrisc"      # the core whose progress word counts written output steps (templates' writer kernels)


def _si(x: float) -> str:
    """1234567 -> '1.23M': short numbers for a line that must fit a terminal."""
    for div, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= div:
            return f"{x / div:.3g}{unit}"
    return f"{x:.0f}"


def _totals(stats: dict) -> tuple[int, int, int]:
    """(tile clock, RISC-V instructions retired, Tensix instructions issued) from an emulator `stats()` dict."""
    return (int(stats.get("clock", 0)), sum(stats.get("instructions", {}).values()),
            sum(stats.get("tensix_instructions") or ()))


class LaunchProgress:
    """The status line of one launch. `poll(status)` after each advance of the device; `close()` at the end (clears
    the line it drew, so what follows on stderr starts on a clean line)."""

    def __init__(self, stream: TextIO, device, label: str = "", clock=time.perf_counter):
        self.stream, self.device, self.label, self.clock = stream, device, label, clock
        self.t0 = self.last = clock()
        self.drawn = False
        stats = getattr(device, "stats", None)
        self._stats = stats
        self.base = _totals(stats()) if stats is not None else None   # the device before this launch

    def poll(self, status: dict) -> None:
        now = self.clock()
        if now - self.t0 < AFTER_S or (self.drawn and now - self.last < EVERY_S):
            return
        self.last = now
        self.stream.write("\r" + self.line(now - self.t0, status) + "\x1b[K")
        self.stream.flush()
        self.drawn = True

    def line(self, elapsed: float, status: dict) -> str:
        parts = [f"TT {self.label}:" if self.label else "TT kernel:", f"{elapsed:.1f} s"]
        if WRITER in status:
            parts.append(f"| writer {status[WRITER].progress}")
        if self.base is not None:
            stats = self._stats()
            clock, riscv, tensix = (a - b for a, b in zip(_totals(stats), self.base))
            cycles = f"| {_si(clock)} cycles " if stats.get("timed", True) else ""   # the functional mode: none
            parts.append(f"{cycles}| RISC-V {_si(riscv / elapsed)} instr/s, Tensix {_si(tensix / elapsed)} instr/s")
        return " ".join(parts)

    def close(self) -> None:
        if self.drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self.drawn = False


class NoProgress:
    """The reporter when stderr is not a terminal: every call does nothing."""
    def poll(self, status: dict) -> None: pass
    def close(self) -> None: pass


def for_terminal(device, label: str = "", stream: TextIO | None = None) -> LaunchProgress | NoProgress:
    stream = sys.stderr if stream is None else stream
    isatty = getattr(stream, "isatty", None)
    return LaunchProgress(stream, device, label) if isatty is not None and isatty() else NoProgress()
