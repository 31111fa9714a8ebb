"""Execution targets by name: `make_device("emu" | "ttsim" | "umd-sim" | "hw")` and what this machine offers (`probe`).

| target | device | needs |
|---|---|---|
| `emu` | `runtime.emu.device.EmuDevice` | nothing (always available) |
| `ttsim` | `runtime.ttsim_device.TtsimDevice` | `TT_SIMULATOR=/path/libttsim.so` (Blackhole build) |
| `umd-sim` | `runtime.umd_sim_device.UmdSimDevice` (card path, tt-umd's simulation device) | `tt-umd`, `TT_SIMULATOR` |
| `hw` | `runtime.hw_device.HwDevice` | PyPI `tt-umd` and a Blackhole card |

The emulator is imported when it is used (it costs ~240 ms of imports, numpy included: `python -X importtime`, and
tinygrad's compile workers reach this module through the plugin); the other device modules are a few milliseconds
each and import their heavy parts (tt-umd) themselves when opened. Probing `umd-sim` and
`hw` opens the device, so what opening found (`UmdDevice.survey`) is part of the answer.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from importlib.metadata import version

from tt_backend.chip.errors import TTError
from tt_backend.runtime.hw_device import HwDevice, blackhole_cards
from tt_backend.runtime.ttsim_device import TtsimDevice, default_lib_path
from tt_backend.runtime.umd_device import import_umd
from tt_backend.runtime.umd_sim_device import UmdSimDevice

TARGET_NAMES = ("emu", "ttsim", "umd-sim", "hw")
NEEDS_TTSIM = ("TT_SIMULATOR=/path/to/libttsim.so (Blackhole build of tenstorrent/ttsim: "
               "./make.py src/_out/release_bh/libttsim.so)")


def _simulator(target: str, lib_path: str | None) -> str:
    lib = lib_path or default_lib_path()
    if not lib:
        raise TTError(f"TT_BACKEND={target} needs {NEEDS_TTSIM}")
    return lib


def make_device(name: str, *, device_number: int | None = None, lib_path: str | None = None):
    """A fresh Device for target `name`. Raises TTError saying what is missing when the target is unavailable."""
    if name == "emu":
        # lazy: the emulator's imports cost ~240 ms (see the module doc)
        from tt_backend.runtime.emu.device import EmuDevice
        return EmuDevice()
    if name == "ttsim":
        return TtsimDevice(_simulator(name, lib_path))
    if name == "umd-sim":
        if device_number not in (None, 0):
            raise TTError(f"umd-sim simulates one chip (device 0), not device {device_number}")
        return UmdSimDevice(_simulator(name, lib_path))
    if name == "hw":
        return HwDevice(device_number)
    raise TTError(f"unknown target {name!r}: expected one of {', '.join(TARGET_NAMES)}")


@dataclass(frozen=True)
class TargetStatus:
    name: str
    available: bool
    detail: str            # what it is (version, path, card) or what is missing

    def __str__(self) -> str:
        return f"{self.name}: {'available' if self.available else 'unavailable'} ({self.detail})"


def _version(dist: str) -> str:
    try:
        return version(dist)
    except Exception:
        return "version unknown"


def probe(name: str) -> TargetStatus:
    """Can `name` run here? ttsim is started once (it must load and identify as Blackhole); umd-sim and hw (its first
    card) are opened and closed again, and the detail says what opening found."""
    if name == "emu":
        return TargetStatus("emu", True, "the project's emulator (runtime/emu)")
    if name == "ttsim":
        lib = default_lib_path()
        if not lib:
            return TargetStatus("ttsim", False, "set TT_SIMULATOR=/path/libttsim.so")
        try:
            make_device("ttsim", lib_path=lib).close()
        except TTError as e:
            return TargetStatus("ttsim", False, f"{lib}: {str(e).splitlines()[0]}")
        return TargetStatus("ttsim", True, f"{os.path.abspath(lib)} loads, Blackhole PCI id")
    if name == "umd-sim":
        lib = default_lib_path()
        if not lib:
            return TargetStatus("umd-sim", False, "set TT_SIMULATOR=/path/libttsim.so (and pip install tt-umd)")
        try:
            dev = make_device("umd-sim", lib_path=lib)
        except TTError as e:
            return TargetStatus("umd-sim", False, f"{lib}: {str(e).splitlines()[0]}")
        try:
            return TargetStatus("umd-sim", True, f"tt-umd {_version('tt-umd')} simulation device on "
                                                 f"{os.path.abspath(lib)}: {dev.describe()}")
        finally:
            dev.close()
    if name == "hw":
        try:
            umd = import_umd()
        except TTError as e:
            return TargetStatus("hw", False, str(e))
        cards = blackhole_cards(umd)
        umd_v = f"tt-umd {_version('tt-umd')}"
        if not cards:
            return TargetStatus("hw", False, f"{umd_v}: no Blackhole card found")
        found = f"{umd_v}: Blackhole card(s) {', '.join(map(str, cards))}"
        try:
            dev = make_device("hw", device_number=cards[0])
        except TTError as e:
            return TargetStatus("hw", False, f"{found}; card {cards[0]}: {str(e).splitlines()[0]}")
        try:
            return TargetStatus("hw", True, f"{found}; card {cards[0]}: {dev.describe()}")
        finally:
            dev.close()
    raise TTError(f"unknown target {name!r}: expected one of {', '.join(TARGET_NAMES)}")


def available_targets() -> list[TargetStatus]:
    return [probe(n) for n in TARGET_NAMES]
