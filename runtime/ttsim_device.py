"""ttsim as a device: `TtsimTransport` (the simulator in a child process, reached through BAR0 TLB windows) under
`runtime.noc_device.NocTileDevice`, the device layer a real card shares (`runtime.hw_device`).

ttsim facts that shape `TtsimTransport`: every access goes through BAR0 TLB windows (BAR0 at paddr 0x1_0000_0000,
window i at BAR0 + i*2 MiB, three u32 config words at BAR0 + 0x1FC00000 + 12*i), tile MMIO only with single 4-byte
accesses, DRAM by translated coordinates. ttsim `_Exit(1)`s its process on any error, so it runs in a child process
(`runtime/ttsim_server.py`) reached over a socketpair. When the child dies the call in progress raises `TtsimDied`
(a `TTError`) carrying ttsim's `[clock] ERROR: <Category>: <function>: <detail>` line and the last output lines; the
user's process survives, the dead device refuses further use, and a new `TtsimDevice` (or `restart()`) gives a fresh
simulator. Writes and `advance` are pipelined (not acknowledged): an error they trigger is raised by the next call that
waits for a reply (`read*`, `core_state`, `sync`). Call `sync()` to force it.

Not observable on ttsim (so absent from `core_state`): RISC-V PCs (the 0xFFB13138 PC snapshot is not modelled and
reading it is fatal), and `NCRISC_RESET_PC(_OVERRIDE)` which are write-only there.
"""
from __future__ import annotations

import os
import struct

from tt_backend.chip import layout
from tt_backend.chip.errors import TTError
from tt_backend.chip.grid import Grid

from .noc_device import U32_MAX, WRITE_ONLY, NocTileDevice
from .sim_child import SimChild, TtsimDied, clock_calls

BAR0_BASE = 0x1_0000_0000
TLB_WINDOW = 1 << 21                 # 2 MiB
TLB_CFG_BASE = BAR0_BASE + 0x1FC00000
TLB_CFG_STRIDE = 12
TLB_WINDOWS = 4                      # tile L1, tile MMIO and a DRAM page stay mapped: the common paths never reprogram
BH_PCI_ID = 0xB1401E52               # config word 0: device 0xB140, vendor 0x1E52

_HDR = struct.Struct("<B3xQI")
_U32 = struct.Struct("<I")
_SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ttsim_server.py")


def default_lib_path() -> str | None:
    return os.environ.get("TT_SIMULATOR") or os.environ.get("TT_METAL_SIMULATOR")


# ================================================================================================ ttsim transport
class TtsimTransport:
    """ttsim (`libttsim.so`) in a child process, reached through BAR0 TLB windows exactly as a host reaches silicon."""

    name = "ttsim"

    def __init__(self, lib_path: str, start_timeout: float = 30.0):
        self.lib_path = lib_path
        self._win: dict[int, tuple[int, int, int]] = {}      # idx -> (cfg0, cfg1, cfg2) last written
        self._win_order: list[int] = []                       # least recently used first
        self.clocks = 0                                        # simulated clocks advanced through this object
        self.requests = 0
        try:
            self.child = SimChild(_SERVER, [self.lib_path], "ttsim simulator", start_timeout)
        except TtsimDied as e:     # nothing ran yet: what matters is which library failed to start, and why
            raise TTError(f"cannot start ttsim from {self.lib_path}: {e.sim_message or 'it exited at once'}. "
                          "TT_SIMULATOR must name a Blackhole build of tenstorrent/ttsim "
                          "(./make.py src/_out/release_bh/libttsim.so)") from None
        ident = self._config_rd32(0, 0)
        if ident != BH_PCI_ID:
            self.close()
            raise TTError(f"{self.lib_path} is not a Blackhole ttsim (PCI id {ident:#010x}, want {BH_PCI_ID:#010x});"
                          " build src/_out/release_bh/libttsim.so")

    @property
    def dead(self) -> TtsimDied | None:
        return self.child.dead

    @property
    def alive(self) -> bool:
        return self.child.alive

    def close(self) -> None:
        """Shut the simulator down (idempotent)."""
        self.child.close(_HDR.pack(0x51, 0, 0))

    # ------------------------------------------------------------------ wire
    def _send(self, data, doing: str) -> None:
        self.requests += 1
        self.child.send(data, doing)

    def _wr(self, paddr: int, data, doing: str) -> None:
        self._send(_HDR.pack(0x57, paddr, len(data)), doing)
        self.child.send(data, doing)

    def _rd(self, paddr: int, n: int, doing: str) -> bytes:
        self._send(_HDR.pack(0x52, paddr, n), doing)
        return self.child.recv(n, doing)

    def _config_rd32(self, bdf: int, offset: int) -> int:
        self._send(_HDR.pack(0x47, bdf, offset), "reading PCI config space")
        return _U32.unpack(self.child.recv(4, "reading PCI config space"))[0]

    def sync(self) -> None:
        """Round trip to the simulator: raises TtsimDied if an earlier pipelined write/advance killed it."""
        self._send(_HDR.pack(0x50, 0, 0), "syncing")
        self.child.recv(1, "syncing")

    # ------------------------------------------------------------------ TLB windows
    def _window(self, xy: tuple[int, int], addr: int) -> int:
        """A BAR0 window pointing at (xy, addr's 2 MiB page), reusing one already there; returns the paddr for addr."""
        x, y = xy
        cfg = ((addr >> 21) & U32_MAX, ((addr >> 53) & 0x7FF) | ((x | (y << 6)) << 11), 0)
        idx = next((i for i, c in self._win.items() if c == cfg), None)
        if idx is None:
            idx = len(self._win) if len(self._win) < TLB_WINDOWS else self._win_order[0]
            old = self._win.get(idx)
            base = TLB_CFG_BASE + TLB_CFG_STRIDE * idx
            for i, word in enumerate(cfg):
                if old is None or old[i] != word:
                    self._wr(base + 4 * i, _U32.pack(word), "programming a TLB window")
            self._win[idx] = cfg
        if idx in self._win_order:
            self._win_order.remove(idx)
        self._win_order.append(idx)
        return BAR0_BASE + idx * TLB_WINDOW + (addr & (TLB_WINDOW - 1))

    def _pages(self, xy, addr: int, size: int):
        """Split [addr, addr+size) on 2 MiB boundaries: yields (paddr, offset, length)."""
        off = 0
        while off < size:
            a = addr + off
            n = min(size - off, TLB_WINDOW - (a & (TLB_WINDOW - 1)))
            yield self._window(xy, a), off, n
            off += n

    # ------------------------------------------------------------------ transport interface
    def noc_write(self, xy, addr: int, data) -> None:
        for paddr, off, n in self._pages(xy, addr, len(data)):
            self._wr(paddr, data[off:off + n], f"writing {xy}:{addr:#x}+{len(data)}")

    def noc_read(self, xy, addr: int, size: int) -> bytes:
        return b"".join(self._rd(paddr, n, f"reading {xy}:{addr:#x}+{size}")
                        for paddr, off, n in self._pages(xy, addr, size))

    def noc_write32(self, xy, addr: int, value: int) -> None:
        self._wr(self._window(xy, addr), _U32.pack(value & U32_MAX), f"writing {addr:#x}")

    def noc_read32(self, xy, addr: int) -> int:
        return _U32.unpack(self._rd(self._window(xy, addr), 4, f"reading {addr:#x}"))[0]

    def set_soft_reset(self, xy, value: int) -> None:
        self.noc_write32(xy, layout.SOFT_RESET_0, value)

    def advance(self, budget: int) -> None:
        """Clock the simulator `budget` clocks. Pipelined: see module doc."""
        for reps, n in clock_calls(budget):
            self._send(_HDR.pack(0x43, reps, n), f"clocking {budget}")
        self.clocks += max(budget, 0)


class TtsimDevice(NocTileDevice):
    """The Device protocol on Tenstorrent's ttsim: `NocTileDevice` over a `TtsimTransport`."""

    def __init__(self, lib_path: str | None = None, *, tile_xy: tuple[int, int] = layout.TILE_XY,
                 start_timeout: float = 30.0, retire_before_reset: bool = False):
        lib_path = lib_path or default_lib_path()
        if not lib_path or not os.path.isfile(lib_path):
            what = "is a directory" if lib_path and os.path.isdir(lib_path) else "does not exist"
            raise TTError(f"ttsim library {lib_path!r} {what}: build tenstorrent/ttsim "
                          "(./make.py src/_out/release_bh/libttsim.so) and set TT_SIMULATOR to its path")
        self.lib_path = os.path.abspath(lib_path)
        self.start_timeout = start_timeout
        super().__init__(TtsimTransport(self.lib_path, start_timeout), tile_xy=tile_xy,
                         retire_before_reset=retire_before_reset)

    def tile_xys(self) -> list[tuple[int, int]]:
        """ttsim models the whole unharvested chip (docs/launch_noc.md §3.6): every Tensix tile, own tile first."""
        rest = [xy for xy in Grid().tensix if xy != self.tile_xy]
        return [self.tile_xy, *rest]

    def restart(self) -> None:
        """Drop this simulator (dead or alive) and start a fresh one (all state lost)."""
        self.transport.close()
        self.transport = TtsimTransport(self.lib_path, self.start_timeout)
        self._shadow = {a: 0 for a in WRITE_ONLY}

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    @property
    def alive(self) -> bool:
        return self.transport.alive

    @property
    def clocks(self) -> int:
        return self.transport.clocks

    @property
    def requests(self) -> int:
        return self.transport.requests

    def core_state(self) -> dict[str, str]:
        if self.transport.dead is not None:
            dead = self.transport.dead
            return {c: f"simulator dead: {dead.sim_message or dead.returncode}" for c in layout.CORES}
        return super().core_state()
