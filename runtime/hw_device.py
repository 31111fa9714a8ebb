"""`HwDevice`: the Device protocol on a real Blackhole card through tt-umd: `runtime.umd_device.UmdDevice` (the card
path, shared with the `umd-sim` target) on `tt_umd.TTDevice.create(n)`.

What only a card needs:
* the card lock tt-umd and tt-metal honour: the named robust mutex `CHIP_IN_USE_<n>_PCIe` (`tt_umd.RobustMutex`, a
  robust pthread mutex in a /dev/shm file). tt-metal (tt-umd's `LocalChip::start_device`) holds it for as long as it
  uses card n, so we hold it for as long as the device is open: a tt-metal process started meanwhile waits instead of
  resetting the cores under us, and we refuse a card someone else holds, naming the holder. A holder that dies frees
  it (robust mutex). It replaces the project's own flock file, which tt-metal never saw and which added nothing
  the robust mutex does not do (holder pid, release on death);
* kernels retire by asking (`retire_before_reset=True`, in `UmdDevice`); DRAM is 0xFF00_0000 bytes per bank;
* `advance` sleeps briefly: the card runs on its own.
"""
from __future__ import annotations

import os
import time

from tt_backend.chip.errors import TTError

from .umd_device import UmdDevice, import_umd, is_blackhole, umd_error

AICLK_HZ = 1.35e9                    # for turning an advance budget (clocks) into a short sleep


def blackhole_cards(umd=None) -> list[int]:
    """PCI device numbers of the Blackhole cards tt-umd sees (empty when none, or tt-umd finds no driver)."""
    umd = umd or import_umd()
    try:
        infos = umd.PCIDevice.enumerate_devices_info()
    except Exception:            # no tt-kmd, no /dev/tenstorrent: no card, which is what the caller asks about
        return []
    return sorted(n for n, info in infos.items() if is_blackhole(umd, info.get_arch()))


def lock_name(device_number: int) -> str:
    """tt-umd's name for the lock on PCIe card n (LockManager: mutex type, device number, IO device type)."""
    return f"CHIP_IN_USE_{device_number}_PCIe"


def describe_process(pid: int) -> str:
    """'pid 123 (python3 app.py)', or what is known of it."""
    if not pid:
        return "a process tt-umd cannot identify"
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            args = f.read().decode(errors="replace").rstrip("\0").split("\0")
    except OSError:      # gone, or not visible from here (another container)
        args = []
    cmd = " ".join(" ".join((os.path.basename(a) if a.startswith("/") else a).split()) for a in args)
    return f"pid {pid} ({cmd if len(cmd) <= 100 else cmd[:97] + '...'})" if cmd else f"pid {pid}"


class CardLock:
    """`CHIP_IN_USE_<n>_PCIe`, taken without waiting, held until `release()`."""

    def __init__(self, umd, device_number: int):
        self.name = lock_name(device_number)
        try:
            mutex = umd.RobustMutex(self.name)
            holder = mutex.probe_lock(0)
        except Exception as e:
            raise umd_error(f"Tenstorrent device {device_number}", f"taking the card lock {self.name}", None, e) from e
        if holder is not None:
            raise TTError(f"Tenstorrent device {device_number} is in use: {describe_process(holder[0])} holds its lock "
                          f"{self.name} (the lock tt-umd and tt-metal take for a card). Wait for it to finish, or pick "
                          "another card (device 'TT:<n>').")
        self.mutex = mutex

    def release(self) -> None:
        if self.mutex is not None:
            self.mutex.unlock()
            self.mutex = None


def _card_runs_on_its_own(budget: int) -> None:
    time.sleep(min(budget / AICLK_HZ, 0.002))


class HwDevice(UmdDevice):
    """Blackhole card `device_number` (/dev/tenstorrent/<n>; default: the first one) through tt-umd."""

    def __init__(self, device_number: int | None = None, *, retire_timeout_s: float = 5.0):
        umd = import_umd()
        cards = blackhole_cards(umd)
        if device_number is None:
            if not cards:
                raise TTError("no Blackhole card found by tt-umd (is tt-kmd loaded and /dev/tenstorrent/* present?); "
                              "use TT_BACKEND=emu, or TT_SIMULATOR=/path/libttsim.so with TT_BACKEND=ttsim or umd-sim "
                              "to run without a card")
            device_number = cards[0]
        elif device_number not in cards:
            raise TTError(f"Tenstorrent device {device_number} is not a Blackhole card tt-umd can see (found: {cards})")
        self.device_number = device_number
        self._lock = CardLock(umd, device_number)
        try:
            label = f"hw (card {device_number})"
            try:
                dev = umd.TTDevice.create(device_number)
                dev.init_tt_device()
            except Exception as e:
                raise umd_error(label, f"opening Tenstorrent device {device_number}", None, e) from e
            super().__init__(umd, dev, name="hw", simulated=False, advance=_card_runs_on_its_own,
                             retire_timeout_s=retire_timeout_s)
        except BaseException:
            self._lock.release()
            raise

    def describe(self) -> str:
        return f"{super().describe()}, holding {self._lock.name}"

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._lock.release()
