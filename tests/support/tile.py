"""The emulated tile launched by hand, step by step (for the tests of the launch sequence itself): the programs of
tests/programs/tile, loading an ELF into a Tile, and the hold / load / trampoline / release sequence.
Launches through the launch protocol (status words, generation) use tests/support/harness.py instead."""
from __future__ import annotations

from pathlib import Path

from tt_backend.chip import layout
from tt_backend.runtime.driver import jal_x0
from tt_backend.runtime.emu.tile import Tile

from tests.support import programs
from tests.support.harness import load_segments

FLAG = 0x30000          # the tile programs' result words (cleared by `launch`)


def build(src: str, core: str, **defines: int) -> Path:
    """tests/programs/tile/<src> built for `core` (linked at its IMAGE_SLOT)."""
    return programs.build(f"tile/{src}", core, defines=defines)


def load_elf(tile: Tile, path: Path) -> int:
    """Write every PT_LOAD segment at p_paddr (zero-filled to p_memsz); returns the entry point."""
    entry, segs = load_segments(path.read_bytes())
    for paddr, data, memsz in segs:
        tile.write_l1(paddr, bytes(data) + bytes(memsz - len(data)))
    return entry


def launch(tile: Tile, images: dict[str, Path], release: bool = True) -> None:
    """The launch sequence by hand: hold, load, trampoline, reset PCs + overrides, clear flags, release."""
    tile.write32(layout.SOFT_RESET_0, layout.ALL_CORES_RESET)
    entries = {core: load_elf(tile, path) for core, path in images.items()}
    if "brisc" in entries:
        tile.write32(0, jal_x0(entries["brisc"]))
    for i in range(3):
        if f"trisc{i}" in entries:
            tile.write32(layout.TRISC_RESET_PC[i], entries[f"trisc{i}"])
    tile.write32(layout.TRISC_RESET_PC_OVERRIDE, 7)
    if "ncrisc" in entries:
        tile.write32(layout.NCRISC_RESET_PC, entries["ncrisc"])
        tile.write32(layout.NCRISC_RESET_PC_OVERRIDE, 1)
    tile.write_l1(FLAG, bytes(64))
    if release:
        held = layout.ALL_CORES_RESET
        for core in images:
            held &= ~(1 << layout.SOFT_RESET_BIT[core])
        tile.write32(layout.SOFT_RESET_0, held)
