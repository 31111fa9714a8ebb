"""`EmuDevice`: the Device protocol of docs/ARCHITECTURE.md over one emulated chip (runtime/emu/chip.py).

L1 and MMIO accesses address the device's tile (the chip's tile at `layout.TILE_XY` unless `on_tile` chose another);
DRAM (interleaved over the banks: chip/interleave.py; one bank by its coordinates: write_bank/read_bank), `advance`
and `stats` are the whole chip's, so a launch over several tiles (runtime/driver.py) takes one view
per tile and advances the chip through any of them.
"""
from __future__ import annotations

from tt_backend.chip import interleave, layout

from .chip import Chip
from .dram import read_interleaved, vector_worth, write_interleaved
from .tile import Tile


class EmuDevice:
    name = "emu"

    def __init__(self, tile: Tile | None = None, *, harvested: tuple[int, ...] = ()):
        """`tile`: an existing tile (and its chip); otherwise a fresh chip with `harvested` Tensix columns removed."""
        if tile is None:
            tile = Chip(lambda c, at: Tile(chip=c, xy=at), harvested).tile(layout.TILE_XY)
        self.tile = tile
        self.chip = tile.chip

    def tile_xys(self) -> list[tuple[int, int]]:
        """Translated coordinates of the chip's usable Tensix tiles, in launch order (this device's tile first)."""
        return self.chip.grid.tensix

    def on_tile(self, xy: tuple[int, int]) -> EmuDevice:
        """The same chip, with L1 and MMIO accesses going to the tile at `xy`."""
        return EmuDevice(self.chip.tile(xy))

    def write_l1(self, addr: int, data: bytes) -> None:
        self.tile.write_l1(addr, data)

    def read_l1(self, addr: int, size: int) -> bytes:
        return self.tile.read_l1(addr, size)

    def write32(self, addr: int, value: int) -> None:
        self.tile.write32(addr, value)

    def read32(self, addr: int) -> int:
        return self.tile.read32(addr)

    def write_dram(self, addr: int, data: bytes) -> None:
        if vector_worth(addr, memoryview(data).nbytes):
            write_interleaved(addr, data, self.write_bank)
        else:
            interleave.write(addr, data, self.write_bank)

    def read_dram(self, addr: int, size: int) -> bytes:
        if vector_worth(addr, size):
            return read_interleaved(addr, size, self.read_bank)
        return interleave.read(addr, size, self.read_bank)

    def write_bank(self, xy: tuple[int, int], addr: int, data: bytes) -> None:
        self.chip.bank(*xy).write(addr, data)

    def read_bank(self, xy: tuple[int, int], addr: int, size: int) -> bytes:
        return self.chip.bank(*xy).read(addr, size).tobytes()

    def advance(self, budget: int) -> None:
        """Run every tile with released cores up to `budget` instructions each; a tile returns early once its
        released cores are parked or all blocked."""
        self.chip.run(budget)

    def set_timed(self, timed: bool) -> None:
        """The cycle model on (the default) or the functional mode for what follows (Chip.timed, Tile.set_timed):
        the same results, less host time, cycles that are not the cycle model's (stats()["timed"] says which)."""
        self.chip.timed = timed

    def core_state(self) -> dict[str, str]:
        return self.tile.state()

    def spinning(self, core: str) -> bool:
        """Whether `core` of this tile is polling in a wait loop (Tile.spinning): the driver's L1-resident launch
        refuses a reader that keeps waiting while the other cores are held."""
        return self.tile.spinning(core)

    def timeline_begin(self) -> None:
        """Record per-core and per-unit timelines of what runs next on this tile (runtime/emu/timeline.py)."""
        self.tile.timeline_begin()

    def timeline_end(self) -> dict | None:
        """{"cycles": window, "spans": [timeline.Span]} since timeline_begin(), in emulated cycles."""
        return self.tile.timeline_end()

    def stats(self) -> dict:
        """This tile's counters (instructions per core and per Tensix thread, Tensix instructions, NoC requests and
        bytes, clock, and the cycle model's view: `cycles` per core since its release, `stall_cycles` per core,
        `tensix_cycles`; runtime/emu/cycles.py) and, when the chip has more than one tile, `tiles` (the same per tile,
        keyed "x,y") and `fabric` (NoC transfers and their waiting cycles)."""
        out = self.tile.stats()
        if len(self.chip.tiles) > 1:
            chip = self.chip.stats()
            out["tiles"], out["fabric"] = chip["tiles"], chip["noc"]
        return out

