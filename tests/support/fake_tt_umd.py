"""A stand-in for PyPI `tt_umd` (the names the card path uses: runtime/umd_device.py, runtime/hw_device.py), backed by
the project's emulated tile, so the hw device class runs real kernels in tests without a card. Its names and call
signatures are those of the real package (tests/runtime/test_umd.py checks them against an installed tt-umd).

The "card" is module state that outlives a TTDevice object, like a card outlives the process that used it: tests can
leave cores running and open the device again. It runs on its own: every read lets the emulated tile execute a
slice of instructions (a card does not need the host to clock it). `calls` records every method call by name.

The chip's geometry is Blackhole's as tt-umd describes it: Tensix columns at NOC0 x 1-7 and 10-16, rows y 2-11;
`harvested_columns` (NOC0 x) leaves columns out of the logical grid; with NoC `translation` on, translated Tensix
coordinates number the healthy columns from x=1 (harvested ones go last), so logical (0, 0) is always translated
(1, 2), and the translated DRAM banks (chip/interleave.py) are NOC0 column 9 (x 18) or 0 (x 17), row y - 12: (18, 12)
is NOC0 (9, 0), bank 4's (18, 13) is NOC0 (9, 1). `failing[method] = exception` makes every call of that TTDevice
method raise it (as tt-umd raises from C++), until removed; `failing["create"]` makes opening fail.
"""
from __future__ import annotations

import enum
import fcntl
import os
import tempfile
import types

from tt_backend.runtime.emu.tile import Tile
from tt_backend.chip import interleave, layout
from tt_backend.chip.grid import is_dram_xy

RUN_PER_READ = 20_000
COLUMNS = (1, 2, 3, 4, 5, 6, 7, 10, 11, 12, 13, 14, 15, 16)
ROWS = tuple(range(2, 12))
DRAM_NOC0 = (9, 1)          # bank 4's endpoint, the one `harvested_dram` fuses off


class ARCH(enum.Enum):
    WORMHOLE_B0 = 2
    BLACKHOLE = 3


class CoreType(enum.Enum):
    DRAM = 1
    TENSIX = 5


class CoordSystem(enum.Enum):
    LOGICAL = 0
    NOC0 = 1
    TRANSLATED = 2


class UmdBaseException(Exception):
    pass


class DeviceTimeoutError(UmdBaseException):
    pass


class SigbusError(Exception):
    pass


error = types.SimpleNamespace(UmdBaseException=UmdBaseException, DeviceTimeoutError=DeviceTimeoutError)


class tt_xy_pair:
    def __init__(self, x: int, y: int):
        self.x, self.y = x, y


class CoreCoord:
    def __init__(self, x: int, y: int, core_type: CoreType, coord_system: CoordSystem):
        self.x, self.y, self.core_type, self.coord_system = x, y, core_type, coord_system


cards: dict[int, ARCH] = {}         # PCI device number -> arch
tiles: dict[int, Tile] = {}         # the cards' state (one Tensix tile + its DRAM each)
calls: list[str] = []
translation = True
harvested_columns: set[int] = set()
harvested_dram = False              # a chip whose translated DRAM (18, 12) is a harvested bank (tt-umd never maps one)
failing: dict[str, BaseException] = {}
LOCK_DIR = tempfile.gettempdir()    # RobustMutex files (the real ones live in /dev/shm)


def reset(arches=(ARCH.BLACKHOLE,)) -> None:
    global translation, harvested_dram
    cards.clear(), tiles.clear(), calls.clear(), failing.clear(), harvested_columns.clear()
    translation, harvested_dram = True, False
    for n, a in enumerate(arches):
        cards[n] = a


def _healthy() -> list[int]:
    return [x for x in COLUMNS if x not in harvested_columns]


def tile_xy() -> tuple[int, int]:
    """The NoC address of logical Tensix (0, 0): what the card path drives."""
    return (COLUMNS[0], ROWS[0]) if translation else (_healthy()[0], ROWS[0])


class _Info:
    def __init__(self, arch): self._arch = arch
    def get_arch(self): return self._arch


class PCIDevice:
    @staticmethod
    def enumerate_devices() -> list[int]:
        return sorted(cards)

    @staticmethod
    def enumerate_devices_info() -> dict:
        return {n: _Info(a) for n, a in cards.items()}


class SocDescriptor:
    def get_cores(self, core_type, coord_system=CoordSystem.NOC0, channel=None):
        assert core_type == CoreType.TENSIX and coord_system == CoordSystem.LOGICAL
        return [CoreCoord(i, j, CoreType.TENSIX, CoordSystem.LOGICAL)
                for j in range(len(ROWS)) for i in range(len(_healthy()))]

    def get_harvested_cores(self, core_type, coord_system=CoordSystem.NOC0):
        if core_type == CoreType.DRAM:
            return [CoreCoord(*DRAM_NOC0, CoreType.DRAM, coord_system)] if harvested_dram else []
        return [CoreCoord(x, y, CoreType.TENSIX, coord_system) for x in sorted(harvested_columns) for y in ROWS]

    def translate_coord_to(self, core_coord, coord_system):
        if core_coord.core_type == CoreType.DRAM:
            return CoreCoord(9 if core_coord.x == 18 else 0, core_coord.y - 12, CoreType.DRAM, coord_system)
        noc0 = (_healthy()[core_coord.x], ROWS[core_coord.y])
        translated = coord_system == CoordSystem.TRANSLATED and translation
        xy = (COLUMNS[core_coord.x], ROWS[core_coord.y]) if translated else noc0
        return CoreCoord(*xy, CoreType.TENSIX, coord_system)

    def get_coord_at(self, core, coord_system):
        if translation and coord_system == CoordSystem.TRANSLATED and (core.x, core.y) in interleave.BANK_XYS:
            return CoreCoord(core.x, core.y, CoreType.DRAM, coord_system)
        raise RuntimeError(f"No core type found for system {coord_system.name} at location: ({core.x}, {core.y})")


class TTDevice:
    class PowerState(enum.Enum):
        BUSY = 0
        IDLE = 1

    def __init__(self, n: int):
        self.n = n
        self.tile = tiles.setdefault(n, Tile())

    def __getattribute__(self, name):
        if name in failing:
            calls.append(f"{name}:failed")
            raise failing[name]
        return object.__getattribute__(self, name)

    @staticmethod
    def create(device_number: int) -> "TTDevice":
        if "create" in failing:
            raise failing["create"]
        if device_number not in cards:
            raise RuntimeError(f"no device {device_number}")
        calls.append("create")
        return TTDevice(device_number)

    def init_tt_device(self) -> None:
        calls.append("init_tt_device")

    def get_arch(self):
        return cards[self.n]

    def get_noc_translation_enabled(self) -> bool:
        return translation

    def get_soc_descriptor(self) -> SocDescriptor:
        return SocDescriptor()

    def set_power_state(self, state) -> None:
        calls.append(f"set_power_state:{state.name}")

    # NoC access in translated coordinates: the one tile and the DRAM banks
    def _where(self, x: int, y: int) -> str:
        if (x, y) == tile_xy():
            return "tile"
        if is_dram_xy(x, y):            # any of a bank's three endpoints
            return "dram"
        raise RuntimeError(f"fake card: nothing at ({x}, {y})")

    def noc_write(self, core_x: int, core_y: int, addr: int, data) -> None:
        calls.append("noc_write")
        if self._where(core_x, core_y) == "dram":
            self.tile.chip.bank(core_x, core_y).write(addr, bytes(data))
        elif addr + len(data) <= layout.L1_SIZE:
            self.tile.write_l1(addr, bytes(data))
        else:
            raise RuntimeError(f"fake card: bulk write to MMIO {addr:#x}")

    def noc_read(self, core_x: int, core_y: int, addr: int, size: int) -> bytes:
        calls.append("noc_read")
        self.tile.run(RUN_PER_READ)
        if self._where(core_x, core_y) == "dram":
            return self.tile.chip.bank(core_x, core_y).read(addr, size).tobytes()
        if addr + size > layout.L1_SIZE:
            raise RuntimeError(f"fake card: bulk read of MMIO {addr:#x}")
        return self.tile.read_l1(addr, size)

    def noc_write32(self, core_x: int, core_y: int, addr: int, value: int) -> None:
        calls.append("noc_write32")
        if self._where(core_x, core_y) != "tile":
            raise RuntimeError("fake card: 32-bit DRAM access")
        if addr == layout.SOFT_RESET_0:
            raise RuntimeError("fake card: use set_risc_reset_state for the soft reset register")
        self.tile.write32(addr, value)

    def noc_read32(self, core_x: int, core_y: int, addr: int) -> int:
        calls.append("noc_read32")
        self.tile.run(RUN_PER_READ)
        if self._where(core_x, core_y) != "tile":
            raise RuntimeError("fake card: 32-bit DRAM access")
        return self.tile.read32(addr)

    def set_risc_reset_state(self, core_x: int, core_y: int, soft_reset_raw_value: int) -> None:
        calls.append(f"set_risc_reset_state:{soft_reset_raw_value:#x}")
        self._where(core_x, core_y)
        self.tile.write32(layout.SOFT_RESET_0, soft_reset_raw_value)

    def get_risc_reset_state(self, core_x: int, core_y: int) -> int:
        return self.tile.read32(layout.SOFT_RESET_0)


class RobustMutex:
    """tt-umd's named cross-process lock, here an flock'ed file under LOCK_DIR holding the owner's pid."""

    def __init__(self, mutex_name: str):
        self.path = os.path.join(LOCK_DIR, f"fake_tt_umd.{mutex_name}")
        self.fd = None

    def probe_lock(self, timeout_s: int = 0):
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            pid = int(os.pread(fd, 32, 0).decode().strip() or 0)
            os.close(fd)
            return (pid, pid)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self.fd = fd
        return None

    def lock(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self.fd = fd

    def unlock(self) -> None:
        os.close(self.fd)
        self.fd = None
