"""`NocTileDevice`: the Device protocol (docs/ARCHITECTURE.md) for one Tensix tile and the DRAM banks, written only in
terms of NoC accesses, so that Tenstorrent's simulator and a real card run the same device code.

It owns everything a host must know about the tile: range checks, the 32-bit-only MMIO rule, the write-only NCRISC
reset-PC registers (answered from a shadow of what was written), `core_state`, and, when asked to
(`retire_before_reset=True`, the card path), the rule "never assert reset on a core that has not retired": before it
holds released cores in reset it raises the launch block's stop flag and waits for them to report done/error, and
refuses if they do not. The bytes travel through a transport: `runtime.ttsim_device.TtsimTransport` (ttsim) or
`runtime.umd_device.UmdTransport` (tt-umd: a card, or its simulation device). A transport has:
`noc_write(xy, addr, data)`, `noc_read(xy, addr, size)`, `noc_write32(xy, addr, value)`, `noc_read32(xy, addr)`,
`set_soft_reset(xy, value)`, `advance(budget)`, `sync()`, `close()`, `name`.
"""
from __future__ import annotations

import copy
import struct
import time

from tt_backend.chip import interleave, layout
from tt_backend.chip.errors import TTError

U32_MAX = 0xFFFFFFFF
WRITE_ONLY = (layout.NCRISC_RESET_PC, layout.NCRISC_RESET_PC_OVERRIDE)
_STATUS_BYTES = layout.STATUS_STRIDE * len(layout.CORES)


class NocTileDevice:
    """Device protocol for tile `tile_xy` and the DRAM banks (`dram_size` bytes each) over a NoC transport (see the
    module doc)."""

    def __init__(self, transport, *, tile_xy: tuple[int, int] = layout.TILE_XY, dram_size: int = layout.DRAM_BANK_SIZE,
                 retire_before_reset: bool = False, retire_timeout_s: float = 5.0):
        self.transport = transport
        self.name = transport.name
        self.tile_xy = tuple(tile_xy)
        self.dram_size = dram_size
        self.retire_before_reset = retire_before_reset
        self.retire_timeout_s = retire_timeout_s
        self._shadow = {a: 0 for a in WRITE_ONLY}
        self._owns_transport = True        # False on the views of other tiles (on_tile): closing them closes nothing

    # ------------------------------------------------------------------ several tiles (driver.GridDevice)
    def tile_xys(self) -> list[tuple[int, int]]:
        """The tiles a kernel may be launched on: this device's own one (a transport that reaches the whole grid
        says more: TtsimDevice)."""
        return [self.tile_xy]

    def on_tile(self, xy: tuple[int, int]) -> NocTileDevice:
        """The same chip and transport, L1 and MMIO accesses going to the tile at `xy` (its own write-only register
        shadow; the retire-before-reset rule applies to it alike). Not to be closed: the transport is this device's."""
        if tuple(xy) == self.tile_xy:
            return self
        if tuple(xy) not in self.tile_xys():
            raise TTError(f"{self.name}: tile {tuple(xy)} is not one of the tiles this device launches on")
        view = copy.copy(self)
        view.tile_xy = tuple(xy)
        view._shadow = {a: 0 for a in WRITE_ONLY}
        view._owns_transport = False
        return view

    # ------------------------------------------------------------------ Device protocol
    def write_l1(self, addr: int, data: bytes) -> None:
        data = memoryview(data).cast("B")
        _check_range("L1", addr, len(data), layout.L1_SIZE)
        if len(data):
            self.transport.noc_write(self.tile_xy, addr, data)

    def read_l1(self, addr: int, size: int) -> bytes:
        _check_range("L1", addr, size, layout.L1_SIZE)
        return self.transport.noc_read(self.tile_xy, addr, size) if size else b""

    def write32(self, addr: int, value: int) -> None:
        _check_word(addr)
        value &= U32_MAX
        if addr in self._shadow:
            self._shadow[addr] = value
        if addr == layout.SOFT_RESET_0:
            if self.retire_before_reset:
                self._retire_cores_about_to_be_held(value)
            self.transport.set_soft_reset(self.tile_xy, value)
        else:
            self.transport.noc_write32(self.tile_xy, addr, value)

    def read32(self, addr: int) -> int:
        _check_word(addr)
        if addr in self._shadow:    # write-only on ttsim (reading it is fatal there): what we wrote
            return self._shadow[addr]
        return self.transport.noc_read32(self.tile_xy, addr)

    def write_dram(self, addr: int, data: bytes) -> None:
        data = memoryview(data).cast("B")
        _check_range("DRAM", addr, len(data), interleave.size_limit(self.dram_size))
        interleave.write(addr, data, self.write_bank)

    def read_dram(self, addr: int, size: int) -> bytes:
        _check_range("DRAM", addr, size, interleave.size_limit(self.dram_size))
        return interleave.read(addr, size, self.read_bank)

    def write_bank(self, xy: tuple[int, int], addr: int, data: bytes) -> None:
        data = memoryview(data).cast("B")
        _check_range("DRAM bank", addr, len(data), self.dram_size)
        if len(data):
            self.transport.noc_write(tuple(xy), addr, data)

    def read_bank(self, xy: tuple[int, int], addr: int, size: int) -> bytes:
        _check_range("DRAM bank", addr, size, self.dram_size)
        return self.transport.noc_read(tuple(xy), addr, size) if size else b""

    def advance(self, budget: int) -> None:
        self.transport.advance(int(budget))

    def sync(self) -> None:
        self.transport.sync()

    def close(self) -> None:
        if self._owns_transport:
            self.transport.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def core_state(self) -> dict[str, str]:
        """Per core: reset state, reset PC and status words. PCs are not readable through the NoC on ttsim."""
        try:
            soft = self.read32(layout.SOFT_RESET_0)
            wall = self.read32(layout.WALL_CLOCK_LO) | (self.read32(layout.WALL_CLOCK_HI) << 32)
            override = self.read32(layout.TRISC_RESET_PC_OVERRIDE)
            reset_pc = {"brisc": 0}
            for i in range(3):
                reset_pc[f"trisc{i}"] = (self.read32(layout.TRISC_RESET_PC[i]) if override >> i & 1
                                         else layout.DEFAULT_RESET_PC[f"trisc{i}"])
            reset_pc["ncrisc"] = (self._shadow[layout.NCRISC_RESET_PC] if self._shadow[layout.NCRISC_RESET_PC_OVERRIDE] & 1
                                  else layout.DEFAULT_RESET_PC["ncrisc"])
            status = self.read_l1(layout.STATUS_BASE, _STATUS_BYTES)
        except TTError as e:
            return {c: f"unreadable: {e}" for c in layout.CORES}
        out = {}
        for i, c in enumerate(layout.CORES):
            done, err, prog, _ = struct.unpack_from("<4I", status, layout.STATUS_STRIDE * i)
            held = soft >> layout.SOFT_RESET_BIT[c] & 1
            out[c] = (f"pc=? (not readable on {self.name}) {'in reset' if held else 'released'} "
                      f"reset_pc={reset_pc[c]:#x} done={done} error={err:#x} progress={prog} wall_clock={wall}")
        return out

    # ------------------------------------------------------------------ retire by asking, never by reset
    def unretired_cores(self, soft_reset: int | None = None) -> list[str]:
        """Cores out of reset whose status says neither done (= the launch generation) nor error: still running
        or blocked. A finished kernel's cores are parked in `j .` and may be held in reset safely."""
        soft = self.read32(layout.SOFT_RESET_0) if soft_reset is None else soft_reset
        released = [c for c in layout.CORES if not soft >> layout.SOFT_RESET_BIT[c] & 1]
        if not released:
            return []
        generation = self.read32(layout.LAUNCH_GENERATION)
        status = self.read_l1(layout.STATUS_BASE, _STATUS_BYTES)
        busy = []
        for c in released:
            done, err = struct.unpack_from("<2I", status, layout.STATUS_STRIDE * layout.CORES.index(c))
            if not (err or (generation and done == generation)):
                busy.append(c)
        return busy

    def _retire_cores_about_to_be_held(self, new_value: int) -> None:
        """Asserting reset on a core blocked in a NoC transaction can wedge the NoC on silicon: ask first (stop flag,
        which every blocking wait of our kernels polls), wait, and refuse rather than reset a core that did not retire."""
        soft = self.read32(layout.SOFT_RESET_0)
        to_hold = new_value & ~soft            # reset bits that go 0 -> 1: cores about to be held
        busy = [c for c in self.unretired_cores(soft) if to_hold >> layout.SOFT_RESET_BIT[c] & 1]
        if not busy:
            return
        self.transport.noc_write32(self.tile_xy, layout.LAUNCH_STOP, 1)
        deadline = time.monotonic() + self.retire_timeout_s
        while busy:
            if time.monotonic() > deadline:
                raise TTError(f"{self.name}: cores {', '.join(busy)} of tile {self.tile_xy} did not retire within "
                              f"{self.retire_timeout_s:g} s of the stop request; not asserting reset on a blocked core "
                              "(that can hang the NoC). Reset the card (tt-smi -r) if it stays stuck.\n  "
                              + "\n  ".join(f"{c}: {s}" for c, s in self.core_state().items() if c in busy))
            self.transport.advance(2000)
            busy = [c for c in self.unretired_cores(soft) if c in busy]


def _check_range(what: str, addr: int, size: int, limit: int) -> None:
    if addr < 0 or size < 0 or addr + size > limit:
        raise TTError(f"{what} access {addr:#x}+{size:#x} outside 0..{limit:#x}")


def _check_word(addr: int) -> None:
    if addr & 3 or not (0 <= addr <= U32_MAX):
        raise TTError(f"32-bit access to {addr:#x}: must be a 4-byte aligned 32-bit address")
