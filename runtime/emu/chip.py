"""One emulated Blackhole chip: the Tensix grid (chip/grid.py, harvested columns as a parameter), the eight DRAM banks
behind their translated NoC coordinates, the NoC time model (noc.Fabric) and the scheduler that runs every tile.

Tiles are created when first addressed (by the host or by another tile's NoC request), so a one-tile program costs
what it did before the chip existed; a tile whose cores are all held in reset is not visited, and one whose cores are
parked or waiting costs a few host instructions per round (tile.py: parked, blocked and spinning cores cost no host
time). All tiles share one time base: a core released on a tile starts at the chip's latest cycle (`clock`, Tile's
release), so cores released together start at the same cycle and the NoC's busy intervals (absolute cycles) mean the
same on every tile. The tile class is injected (`tile_factory(chip, xy)`), so this module does not import tile.py.
"""
from __future__ import annotations

import heapq
from typing import Callable

from tt_backend.chip import layout
from tt_backend.chip.errors import EmuDeadlock, EmuUnimplemented
from tt_backend.chip.grid import N_BANKS, Grid, dram_bank, is_dram_xy

from .dram import Dram
from .noc import Fabric

SLICE = 2000        # instructions a tile runs before the least advanced tile gets its turn


class Chip:
    def __init__(self, tile_factory: Callable[[Chip, tuple[int, int]], object] | None = None,
                 harvested: tuple[int, ...] = ()):
        self.grid = Grid(tuple(harvested))
        self.banks = [Dram() for _ in range(N_BANKS)]
        self.fabric = Fabric(self.grid)
        self.tiles: dict[tuple[int, int], object] = {}
        self._factory = tile_factory
        self._timed = True

    @property
    def timed(self) -> bool:
        """The cycle model on every tile (the default) or the functional mode (Tile.set_timed): same results, no
        NoC or MMIO timing, for when nobody reads the cycles."""
        return self._timed

    @timed.setter
    def timed(self, on: bool) -> None:
        if on != self._timed:
            self._timed = on
            for t in self.tiles.values():
                t.set_timed(on)

    def tile(self, xy: tuple[int, int]):
        """The tile at translated `xy`, created on first use."""
        xy = tuple(xy)
        t = self.tiles.get(xy)
        if t is None:
            if not self.grid.is_tensix(*xy):
                raise EmuUnimplemented(f"({xy[0]}, {xy[1]}) is not a usable Tensix tile of this chip (Tensix columns "
                                       f"{self.grid.tensix[0][0]}..{self.grid.tensix[-1][0]} translated, rows 2..11)")
            if self._factory is None:
                raise EmuUnimplemented(f"this chip was built around one tile and cannot create tile {xy}")
            t = self._factory(self, xy)
        return t

    def adopt(self, xy: tuple[int, int], tile) -> None:
        """Register a tile built by its own constructor (tile.py builds itself into a chip)."""
        self.tiles[tuple(xy)] = tile
        tile.clock = max([tile.clock] + [t.clock for t in self.tiles.values()])

    def bank(self, x: int, y: int) -> Dram:
        return self.banks[dram_bank(x, y)]

    def peer(self, x: int, y: int):
        """What a NoC request to translated (x, y) reaches: a DRAM bank, a Tensix tile, or None."""
        if is_dram_xy(x, y):
            return self.bank(x, y)
        if self.grid.is_tensix(x, y) and (self._factory is not None or (x, y) in self.tiles):
            return self.tile((x, y))
        return None

    @property
    def clock(self) -> int:
        return max(t.clock for t in self.tiles.values())

    def run(self, budget: int) -> int:
        """Up to `budget` instructions per tile that can still run (Tile.active), in slices of `SLICE` handed to the least
        advanced tile first, so that the tiles stay within about a slice of each other in emulated time and reserve
        the NoC's links and banks nearly in time order (noc.Fabric). A tile leaves the round when it stops retiring
        instructions (parked, blocked or spinning: Tile.run returns early). Tiles that deadlock (EmuDeadlock: nothing
        on the tile can progress and none of its cores is in reset) are collected and raised together, with what every
        other tile's cores are waiting for."""
        left = {xy: budget for xy, t in self.tiles.items() if t.active()}
        # the least advanced tile from a heap of (clock, xy): a tile's clock only grows, and may grow while another
        # tile runs (a NoC write releasing its cores), so an entry whose clock is out of date goes back in with the
        # current one; an up-to-date entry at the top is then the least (clock, xy) of all, as a scan would find
        queue = [(self.tiles[xy].clock, xy) for xy in left]
        heapq.heapify(queue)
        total, stuck = 0, {}
        while queue:
            clock, xy = heapq.heappop(queue)
            tile = self.tiles[xy]
            if tile.clock != clock:
                heapq.heappush(queue, (tile.clock, xy))
                continue
            try:
                n = tile.run(min(SLICE, left[xy]))
            except EmuDeadlock as e:
                stuck[xy], n = str(e), 0
            total += n
            left[xy] -= n
            if n == 0 or left[xy] <= 0:
                del left[xy]
            else:
                heapq.heappush(queue, (tile.clock, xy))
        if stuck:
            others = [f"tile {xy}: " + "; ".join(f"{k} {v}" for k, v in t.state().items())
                      for xy, t in self.tiles.items() if xy not in stuck]
            raise EmuDeadlock("\n".join(f"tile {xy}: {msg}" for xy, msg in stuck.items())
                              + "".join(f"\n  {line}" for line in others))
        return total

    def stats(self) -> dict:
        return {"tiles": {f"{x},{y}": t.stats() for (x, y), t in self.tiles.items()}, "noc": self.fabric.stats()}
