"""`HwDevice`: the Device protocol on a real Blackhole card through tt-umd (PyPI `tt-umd`, imported lazily).

It is `runtime.noc_device.NocTileDevice`, the same code that drives ttsim, over `UmdTransport` (tt-umd's
`noc_read/noc_write/noc_read32/noc_write32` and `set_risc_reset_state`) instead of ttsim's BAR0 windows. What only a
card needs:

* a shared card: an advisory lock file per device (`<TT_LOCK_DIR or tmp>/tt_backend-device<N>.lock`, flock'ed for
  the device's lifetime) so two tt_backend processes never drive one card, and a look at the tile before taking it:
  cores out of reset that are not a finished tt_backend kernel (launch block generation / status words) belong to
  someone else (tt-metal firmware, another program) and the device refuses to open;
* kernels retire by asking: `retire_before_reset=True`, i.e. before a launch holds released cores in reset it raises
  the stop flag and waits for them to report; a core that does not retire is never reset under a NoC transaction;
* DRAM: 0xFF00_0000 usable bytes per bank (ttsim has the whole 4 GiB);
* `advance` sleeps briefly: the card runs on its own.
"""
from __future__ import annotations

import importlib
import os
import tempfile
import time

from tt_backend.chip import layout
from tt_backend.chip.errors import TTError

from .noc_device import NocTileDevice

HW_DRAM_BANK_SIZE = 0xFF00_0000      # tt-metal / UMD usable size of a Blackhole DRAM bank
AICLK_HZ = 1.35e9                    # for turning an advance budget (clocks) into a short sleep
INSTALL_HINT = "pip install tt-umd (or: pip install 'tt-backend[hw]')"


def import_umd():
    """tt_umd, or a TTError that says how to get it."""
    try:
        return importlib.import_module("tt_umd")
    except ImportError as e:
        raise TTError(f"TT_BACKEND=hw needs tt-umd, which is not importable ({e}): {INSTALL_HINT}") from None


def _is_blackhole(umd, arch) -> bool:
    want = getattr(getattr(umd, "ARCH", None), "BLACKHOLE", None)
    return arch == want or str(arch).upper().endswith("BLACKHOLE")


def blackhole_cards(umd=None) -> list[int]:
    """PCI device numbers of the Blackhole cards tt-umd sees (empty when none, or tt-umd finds no driver)."""
    umd = umd or import_umd()
    try:
        infos = umd.PCIDevice.enumerate_devices_info()
    except Exception:
        return []
    return sorted(n for n, info in infos.items() if _is_blackhole(umd, info.get_arch()))


class UmdTransport:
    """NoC access through a `tt_umd.TTDevice`: the whole difference between a card and ttsim."""

    name = "hw"

    def __init__(self, umd_device):
        self.dev = umd_device

    def noc_write(self, xy, addr: int, data) -> None:
        self.dev.noc_write(xy[0], xy[1], addr, bytes(data))

    def noc_read(self, xy, addr: int, size: int) -> bytes:
        return bytes(self.dev.noc_read(xy[0], xy[1], addr, size))

    def noc_write32(self, xy, addr: int, value: int) -> None:
        self.dev.noc_write32(xy[0], xy[1], addr, value)

    def noc_read32(self, xy, addr: int) -> int:
        return int(self.dev.noc_read32(xy[0], xy[1], addr))

    def set_soft_reset(self, xy, value: int) -> None:
        self.dev.set_risc_reset_state(xy[0], xy[1], value)

    def advance(self, budget: int) -> None:
        time.sleep(min(budget / AICLK_HZ, 0.002))

    def sync(self) -> None:
        pass

    def close(self) -> None:
        self.dev = None


class DeviceLock:
    """Advisory per-card lock file (flock): held while this process drives the card; the holder's pid inside."""

    def __init__(self, device_number: int, lock_dir: str | None = None):
        import fcntl
        d = lock_dir or os.environ.get("TT_LOCK_DIR") or tempfile.gettempdir()
        self.path = os.path.join(d, f"tt_backend-device{device_number}.lock")
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.pread(self.fd, 64, 0).decode(errors="replace").strip() or "?"
            os.close(self.fd)
            self.fd = None
            raise TTError(f"Tenstorrent device {device_number} is in use by another tt_backend process (pid {holder}, "
                          f"lock {self.path}); wait for it to finish or pick another card (device 'TT:<n>')") from None
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, f"{os.getpid()}\n".encode(), 0)

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)        # closing the descriptor drops the flock
            self.fd = None


class HwDevice(NocTileDevice):
    """A Blackhole card's tile `tile_xy` (translated coordinates) through tt-umd."""

    def __init__(self, device_number: int | None = None, *, tile_xy: tuple[int, int] = layout.TILE_XY,
                 dram_xy: tuple[int, int] = layout.DRAM_XY, lock_dir: str | None = None,
                 retire_timeout_s: float = 5.0):
        umd = import_umd()
        cards = blackhole_cards(umd)
        if device_number is None:
            if not cards:
                raise TTError("no Blackhole card found by tt-umd (is tt-kmd loaded and /dev/tenstorrent/* present?); "
                              "use TT_BACKEND=emu or TT_SIMULATOR=/path/libttsim.so to run without a card")
            device_number = cards[0]
        elif device_number not in cards:
            raise TTError(f"Tenstorrent device {device_number} is not a Blackhole card tt-umd can see (found: {cards})")
        self.device_number = device_number
        self._lock = DeviceLock(device_number, lock_dir)
        try:
            dev = umd.TTDevice.create(device_number)
            if hasattr(dev, "init_tt_device"):
                dev.init_tt_device()
            super().__init__(UmdTransport(dev), tile_xy=tile_xy, dram_xy=dram_xy, dram_size=HW_DRAM_BANK_SIZE,
                             retire_before_reset=True, retire_timeout_s=retire_timeout_s)
            self._claim_tile()
        except BaseException:
            self._lock.release()
            raise

    def _claim_tile(self) -> None:
        """Refuse a tile whose cores run something that is not a finished kernel of ours."""
        busy = self.unretired_cores()
        if busy:
            raise TTError(f"tile {self.tile_xy} of Tenstorrent device {self.device_number} has cores out of reset "
                          f"({', '.join(busy)}) that are not a finished tt_backend kernel: another process or firmware "
                          "holds it; not touching it. Reset the card (tt-smi -r) if nothing should be running.")

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._lock.release()
