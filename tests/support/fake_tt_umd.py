"""A stand-in for PyPI `tt_umd` (the calls runtime/hw_device.py makes), backed by the project's emulated tile, so the
hw device class runs real kernels in tests without a card.

The "card" is module state that outlives a TTDevice object, like a card outlives the process that used it: tests can
leave cores running and open the device again. It runs on its own: every read lets the emulated tile execute a
slice of instructions (a card does not need the host to clock it). `calls` records every method call by name.
"""
from __future__ import annotations

import enum

from tt_backend.runtime.emu.tile import Tile
from tt_backend.chip import layout

RUN_PER_READ = 20_000


class ARCH(enum.Enum):
    WORMHOLE_B0 = 2
    BLACKHOLE = 3


class _Info:
    def __init__(self, arch): self._arch = arch
    def get_arch(self): return self._arch


cards: dict[int, ARCH] = {}         # PCI device number -> arch
tiles: dict[int, Tile] = {}         # the cards' state (one Tensix tile + its DRAM each)
calls: list[str] = []


def reset(arches=(ARCH.BLACKHOLE,)) -> None:
    cards.clear(), tiles.clear(), calls.clear()
    for n, a in enumerate(arches):
        cards[n] = a


class PCIDevice:
    @staticmethod
    def enumerate_devices() -> list[int]:
        return sorted(cards)

    @staticmethod
    def enumerate_devices_info() -> dict:
        return {n: _Info(a) for n, a in cards.items()}


class TTDevice:
    def __init__(self, n: int):
        self.n = n
        self.tile = tiles.setdefault(n, Tile())

    @staticmethod
    def create(device_number: int) -> "TTDevice":
        if device_number not in cards:
            raise RuntimeError(f"no device {device_number}")
        calls.append("create")
        return TTDevice(device_number)

    def init_tt_device(self) -> None:
        calls.append("init_tt_device")

    def get_arch(self):
        return cards[self.n]

    # NoC access in translated coordinates: the one tile and the one DRAM bank
    def _where(self, x: int, y: int) -> str:
        if (x, y) == layout.TILE_XY:
            return "tile"
        if (x, y) == layout.DRAM_XY:
            return "dram"
        raise RuntimeError(f"fake card: nothing at ({x}, {y})")

    def noc_write(self, x: int, y: int, addr: int, data) -> None:
        calls.append("noc_write")
        if self._where(x, y) == "dram":
            self.tile.dram.write(addr, bytes(data))
        elif addr + len(data) <= layout.L1_SIZE:
            self.tile.write_l1(addr, bytes(data))
        else:
            raise RuntimeError(f"fake card: bulk write to MMIO {addr:#x}")

    def noc_read(self, x: int, y: int, addr: int, size: int) -> bytes:
        calls.append("noc_read")
        self.tile.run(RUN_PER_READ)
        if self._where(x, y) == "dram":
            return self.tile.dram.read(addr, size).tobytes()
        if addr + size > layout.L1_SIZE:
            raise RuntimeError(f"fake card: bulk read of MMIO {addr:#x}")
        return self.tile.read_l1(addr, size)

    def noc_write32(self, x: int, y: int, addr: int, value: int) -> None:
        calls.append("noc_write32")
        if self._where(x, y) != "tile":
            raise RuntimeError("fake card: 32-bit DRAM access")
        if addr == layout.SOFT_RESET_0:
            raise RuntimeError("fake card: use set_risc_reset_state for the soft reset register")
        self.tile.write32(addr, value)

    def noc_read32(self, x: int, y: int, addr: int) -> int:
        calls.append("noc_read32")
        self.tile.run(RUN_PER_READ)
        if self._where(x, y) != "tile":
            raise RuntimeError("fake card: 32-bit DRAM access")
        return self.tile.read32(addr)

    def set_risc_reset_state(self, x: int, y: int, value: int) -> None:
        calls.append(f"set_risc_reset_state:{value:#x}")
        self._where(x, y)
        self.tile.write32(layout.SOFT_RESET_0, value)

    def get_risc_reset_state(self, x: int, y: int) -> int:
        return self.tile.read32(layout.SOFT_RESET_0)
