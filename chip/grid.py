"""The Blackhole chip's tile grid as the NoC sees it: where the Tensix tiles and the DRAM banks are, how translated
coordinates map onto the physical grid when columns are harvested, and the route a NoC packet takes.

Facts (docs/launch_noc.md §1; the model: docs/performance.md §8): the NoC is a 17 x 12 torus (x 0..16, y 0..11); Tensix tiles sit in columns 1..7 and
10..16, rows 2..11 (140 tiles); DRAM endpoints in columns 0 and 9, rows 0..11, three per bank (8 banks). Kernels and
the host use translated coordinates: Tensix tiles keep their NoC0 coordinates on an unharvested chip; harvesting
removes whole Tensix columns and the translated columns are handed out to the good physical columns in order, so the
harvested ones are the last translated columns. Translated DRAM coordinates are x 17/18, y 12..23 (three consecutive y
per bank). NoC0 routes X first in +x then +y; NoC1 runs mirrored, Y first in -y then -x; both wrap around (torus).
"""
from __future__ import annotations

from dataclasses import dataclass, field

NOC_COLS, NOC_ROWS = 17, 12
TENSIX_COLUMNS = (1, 2, 3, 4, 5, 6, 7, 10, 11, 12, 13, 14, 15, 16)
TENSIX_ROWS = tuple(range(2, 12))
# translated DRAM column -> physical DRAM column (which of the two is which is the emulator's assumption:
# docs/launch_noc.md §1.2 says only that the physical bank behind a translated coordinate differs between ttsim and
# tt-umd; routes differ by a few hops at most)
DRAM_COLUMN = {17: 0, 18: 9}
DRAM_Y0 = 12
ENDPOINTS_PER_BANK = 3
N_BANKS = 8


def is_dram_xy(x: int, y: int) -> bool:
    """A translated DRAM coordinate."""
    return x in DRAM_COLUMN and DRAM_Y0 <= y < DRAM_Y0 + NOC_ROWS


def dram_bank(x: int, y: int) -> int:
    """Bank 0..7 behind translated DRAM coordinate (x, y): four banks per DRAM column, three endpoints each."""
    return (x - min(DRAM_COLUMN)) * (NOC_ROWS // ENDPOINTS_PER_BANK) + (y - DRAM_Y0) // ENDPOINTS_PER_BANK


@dataclass(frozen=True)
class Grid:
    """The Tensix grid of one chip with `harvested` physical Tensix columns removed."""
    harvested: tuple[int, ...] = ()
    _phys: dict = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        bad = [c for c in self.harvested if c not in TENSIX_COLUMNS]
        if bad or len(set(self.harvested)) != len(self.harvested):
            raise ValueError(f"harvested columns {self.harvested}: each must be one of the Tensix columns "
                             f"{TENSIX_COLUMNS}, at most once")
        good = [c for c in TENSIX_COLUMNS if c not in self.harvested]
        object.__setattr__(self, "_phys", {tx: px for tx, px in zip(TENSIX_COLUMNS, good)})

    @property
    def columns(self) -> int:
        return len(self._phys)

    @property
    def tensix(self) -> list[tuple[int, int]]:
        """Translated coordinates of every usable Tensix tile, in launch order: row by row of the logical grid."""
        return [(x, y) for y in TENSIX_ROWS for x in TENSIX_COLUMNS[:self.columns]]

    def is_tensix(self, x: int, y: int) -> bool:
        return x in self._phys and y in TENSIX_ROWS

    def physical(self, x: int, y: int) -> tuple[int, int]:
        """NoC0 physical coordinates of a translated Tensix or DRAM coordinate."""
        if self.is_tensix(x, y):
            return self._phys[x], y
        if is_dram_xy(x, y):
            return DRAM_COLUMN[x], y - DRAM_Y0
        raise ValueError(f"({x}, {y}) is neither a usable Tensix tile nor a DRAM endpoint of this grid")

    def shape(self, n: int) -> tuple[int, int]:
        """(columns, rows) of the logical rectangle the first n tiles of `tensix` occupy."""
        return (min(n, self.columns), -(-n // self.columns))


def route(noc: int, src: tuple[int, int], dst: tuple[int, int]) -> list[tuple[int, int, int, str]]:
    """The router-to-router links a packet crosses from physical `src` to physical `dst` on NoC `noc`, in order: each
    (noc, x, y, direction) names the output link of router (x, y) in that direction."""
    (x, y), (dx, dy) = src, dst
    out = []
    if noc == 0:                                      # X first, +x then +y
        while x != dx:
            out.append((0, x, y, "x"))
            x = (x + 1) % NOC_COLS
        while y != dy:
            out.append((0, x, y, "y"))
            y = (y + 1) % NOC_ROWS
    else:                                             # Y first, -y then -x
        while y != dy:
            out.append((1, x, y, "y"))
            y = (y - 1) % NOC_ROWS
        while x != dx:
            out.append((1, x, y, "x"))
            x = (x - 1) % NOC_COLS
    return out
