"""`EmuDevice`: the Device protocol of docs/ARCHITECTURE.md over one emulated `Tile`."""
from __future__ import annotations

from .tile import Tile


class EmuDevice:
    name = "emu"

    def __init__(self, tile: Tile | None = None):
        self.tile = tile if tile is not None else Tile()

    def write_l1(self, addr: int, data: bytes) -> None:
        self.tile.write_l1(addr, data)

    def read_l1(self, addr: int, size: int) -> bytes:
        return self.tile.read_l1(addr, size)

    def write32(self, addr: int, value: int) -> None:
        self.tile.write32(addr, value)

    def read32(self, addr: int) -> int:
        return self.tile.read32(addr)

    def write_dram(self, addr: int, data: bytes) -> None:
        self.tile.dram.write(addr, data)

    def read_dram(self, addr: int, size: int) -> bytes:
        return self.tile.dram.read(addr, size).tobytes()

    def advance(self, budget: int) -> None:
        """Run up to `budget` instructions; returns early once every released core is parked or all are blocked."""
        self.tile.run(budget)

    def core_state(self) -> dict[str, str]:
        return self.tile.state()

    def timeline_begin(self) -> None:
        """Record per-core and per-unit timelines of what runs next (runtime/emu/timeline.py)."""
        self.tile.timeline_begin()

    def timeline_end(self) -> dict | None:
        """{"cycles": window, "spans": [timeline.Span]} since timeline_begin(), in emulated cycles."""
        return self.tile.timeline_end()

    def stats(self) -> dict:
        """Instructions per core and per Tensix thread (pushes), Tensix instructions, NoC requests/bytes, clock, and
        the cycle model's view: `cycles` per core (since its release), `stall_cycles` per core, `tensix_cycles`
        (per-thread issue cycles, stall cycles, unit busy-until cycles; runtime/emu/cycles.py)."""
        return self.tile.stats()
