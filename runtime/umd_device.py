"""The card path: the Device protocol on a Blackhole chip behind a `tt_umd.TTDevice` (PyPI `tt-umd`, imported lazily).

`UmdDevice` is `runtime.noc_device.NocTileDevice` (the device code ttsim runs too) over `UmdTransport`: tt-umd's
`noc_read/noc_write/noc_read32/noc_write32` and `set_risc_reset_state`. Two ways reach a chip through it and share
everything below: `runtime.hw_device.HwDevice` (a card) and `runtime.umd_sim_device.UmdSimDevice` (tt-umd's own
simulation device on ttsim, target `umd-sim`).

Opening (`UmdDevice.__init__`), the same for both:
* the chip must be a Blackhole; `survey()` reads tt-umd's SoC descriptor of the chip: the tile we drive is the first
  Tensix core in logical coordinates, whose grid leaves the harvested columns out, addressed by its translated NoC
  coordinate (never a hard-coded one); the tile's NOC0 coordinate must not be a harvested core. NoC translation must
  be on for a card (`get_noc_translation_enabled()`): the DRAM coordinates the kernels are built with (the eight
  banks of `chip/interleave.py`, buffers interleaved over them) are translated ones, and each must be a DRAM core of
  the descriptor, not a harvested bank.
  tt-umd's simulation devices do not model translation (they report it off and their descriptor's translated
  coordinates are NOC0 ones); ttsim remaps translated coordinates itself, so on umd-sim the DRAM coordinates are not
  checked against tt-umd. `ChipSurvey.describe()` is what `python -m tt_backend info` shows;
* power: `set_power_state(BUSY)` (as tt-umd's own tests do before using a chip), `IDLE` again on close;
* a tile whose cores are out of reset and are not a finished kernel of ours belongs to someone else: refused.

Errors: every exception a tt-umd call raises (`tt_umd.error.UmdBaseException` and its subclasses such as
`DeviceTimeoutError`, `tt_umd.SigbusError`, the `RuntimeError`s its bindings raise) becomes `UmdError`, a `TTError`
naming the operation, the NoC coordinate and tt-umd's message (its C++ backtrace dropped; the original exception is
the `__cause__`); `DeviceTimeoutError` becomes `UmdTimeout`, also a `DeviceTimeout`. So `core_state()`, which reports
unreadable state instead of failing, survives a failing read.
"""
from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from typing import Callable

from tt_backend.chip import interleave
from tt_backend.chip.errors import DeviceTimeout, TTError

from .noc_device import NocTileDevice

HW_DRAM_BANK_SIZE = 0xFF00_0000      # tt-metal / UMD usable size of a Blackhole DRAM bank
INSTALL_HINT = "pip install tt-umd (or: pip install 'tt-backend[hw]')"

# tt-umd exception class name (the first one found along the raised exception's MRO) -> what the user can do
_WHAT_TO_DO = {
    "DeviceTimeoutError": "the chip did not answer in time; if it keeps happening, reset the card (tt-smi -r)",
    "SigbusError": "the card's PCIe mapping faulted (reset or removed while in use): reset it (tt-smi -r) and open "
                   "the device again",
}
_DEFAULT_WHAT_TO_DO = ("see tt-umd's message; if the chip is in a bad state, reset it (a card: tt-smi -r; a simulator: "
                       "restart() or a new device)")
_BACKTRACE_FRAME = re.compile(r"^\s*\d+\.\s")     # tt-umd appends " 1. frame", " 2. frame", ... to its messages


def import_umd():
    """tt_umd, or a TTError that says how to get it."""
    try:
        return importlib.import_module("tt_umd")
    except ImportError as e:
        raise TTError(f"this target needs tt-umd, which is not importable ({e}): {INSTALL_HINT}") from None


def is_blackhole(umd, arch) -> bool:
    want = getattr(getattr(umd, "ARCH", None), "BLACKHOLE", None)
    return arch == want or str(arch).upper().endswith("BLACKHOLE")


class UmdError(TTError):
    """A tt-umd call failed: `op` (what we asked), `xy` (NoC coordinate or None), `umd_type` (tt-umd's exception class),
    `umd_message` (its message without the backtrace), `sim_message` (umd-sim: ttsim's ERROR line when it died)."""

    def __init__(self, msg: str, *, op: str, xy, umd_type: str, umd_message: str, sim_message: str = ""):
        super().__init__(msg)
        self.op, self.xy, self.umd_type, self.umd_message, self.sim_message = op, xy, umd_type, umd_message, sim_message


class UmdTimeout(UmdError, DeviceTimeout):
    """tt-umd's DeviceTimeoutError."""


def umd_error(device: str, op: str, xy, exc: BaseException, died: TTError | None = None) -> UmdError:
    """The TTError for exception `exc` of a tt-umd call; `died`: the simulator's death, when that is the cause."""
    names = [k.__name__ for k in type(exc).__mro__]
    umd_type = names[0]
    lines = str(exc).splitlines()
    cut = next((i for i, ln in enumerate(lines) if _BACKTRACE_FRAME.match(ln)), len(lines))
    message = "\n    ".join(ln.rstrip() for ln in lines[:cut] if ln.strip()) or umd_type
    todo = next((_WHAT_TO_DO[n] for n in names if n in _WHAT_TO_DO), _DEFAULT_WHAT_TO_DO)
    where = f" at NoC {tuple(xy)}" if xy is not None else ""
    text = f"{device}: {op}{where} failed in tt-umd ({umd_type}): {message}"
    if died is not None:
        text += f"\n  because the simulator died: {died}"
    else:
        text += f"\n  {todo}"
    cls = UmdTimeout if "DeviceTimeoutError" in names else UmdError
    return cls(text, op=op, xy=xy, umd_type=umd_type, umd_message=message,
               sim_message=getattr(died, "sim_message", ""))


class UmdTransport:
    """NoC access through a `tt_umd.TTDevice`: the whole difference between a card and ttsim. `advance(budget)`: how the
    chip runs meanwhile (a card on its own, the simulator by its clock); `cause_of_failure(op)`: the simulator's death
    (a TTError) when that explains the failure of `op`, else None."""

    def __init__(self, umd_device, name: str, advance: Callable[[int], None],
                 cause_of_failure: Callable[[str], TTError | None] = lambda op: None):
        self.dev = umd_device
        self.name = name
        self._advance = advance
        self._cause_of_failure = cause_of_failure

    def call(self, op: str, xy, method: str, *args):
        """`self.dev.<method>(*args)`, with any exception it raises turned into UmdError."""
        if self.dev is None:
            raise TTError(f"{self.name}: the device is closed ({op})")
        try:
            return getattr(self.dev, method)(*args)
        except Exception as e:
            raise umd_error(self.name, op, xy, e, self._cause_of_failure(op)) from e

    def noc_write(self, xy, addr: int, data) -> None:
        self.call(f"writing {len(data)} bytes at {addr:#x}", xy, "noc_write", xy[0], xy[1], addr, data)

    def noc_read(self, xy, addr: int, size: int) -> bytes:
        return bytes(self.call(f"reading {size} bytes at {addr:#x}", xy, "noc_read", xy[0], xy[1], addr, size))

    def noc_write32(self, xy, addr: int, value: int) -> None:
        self.call(f"writing register {addr:#x}", xy, "noc_write32", xy[0], xy[1], addr, value)

    def noc_read32(self, xy, addr: int) -> int:
        return int(self.call(f"reading register {addr:#x}", xy, "noc_read32", xy[0], xy[1], addr))

    def set_soft_reset(self, xy, value: int) -> None:
        self.call(f"setting the soft reset to {value:#x}", xy, "set_risc_reset_state", xy[0], xy[1], value)

    def advance(self, budget: int) -> None:
        self._advance(budget)

    def sync(self) -> None:
        pass

    def close(self) -> None:
        self.dev = None


@dataclass(frozen=True)
class ChipSurvey:
    """What opening found out about the chip."""
    translation: bool                       # tt-umd's get_noc_translation_enabled()
    tile_xy: tuple[int, int]                # the tile's NoC address (translated coordinates): logical Tensix (0, 0)
    tile_noc0: tuple[int, int]
    harvested_tensix: tuple[tuple[int, int], ...]     # NOC0 coordinates tt-umd lists as harvested
    dram_noc0: tuple[tuple[int, int], ...] | None   # per bank of interleave.BANK_XYS (the translated coordinates the
                                                    # kernels address); None: not in tt-umd's map (its simulation
                                                    # devices do not translate)

    def describe(self) -> str:
        cols = sorted({x for x, _ in self.harvested_tensix})
        banks = ", ".join(f"{xy} = NOC0 {n}" for xy, n in zip(interleave.BANK_XYS, self.dram_noc0 or ()))
        dram = (f"DRAM banks {banks}" if self.dram_noc0 is not None else
                f"DRAM banks {', '.join(map(str, interleave.BANK_XYS))} (not in tt-umd's map: its simulation devices "
                "do not translate, ttsim does)")
        return (f"NoC translation {'on' if self.translation else 'off'}; tile {self.tile_xy} = NOC0 {self.tile_noc0}; "
                f"harvested Tensix columns: {', '.join(map(str, cols)) or 'none'}; {dram}")


def _xy(core) -> tuple[int, int]:
    return (int(core.x), int(core.y))


def _dram_bank_noc0(name: str, umd, sd, soc, xy: tuple[int, int], harvested: set) -> tuple[int, int]:
    """NOC0 coordinates of the DRAM bank the kernels address at translated `xy`; it must exist and not be harvested."""
    T, C = umd.CoreType, umd.CoordSystem
    try:
        dram = sd.get_coord_at(umd.tt_xy_pair(*xy), C.TRANSLATED)
    except Exception:        # tt-umd raises when nothing is at a coordinate
        dram = None
    if dram is None or dram.core_type != T.DRAM:
        raise TTError(f"{name}: the kernels address DRAM at translated {xy} (buffers are interleaved over the eight "
                      "banks), but tt-umd's SoC descriptor of this chip has no DRAM core there")
    noc0 = _xy(soc("translating the DRAM core", sd.translate_coord_to, dram, C.NOC0))
    if noc0 in harvested:
        raise TTError(f"{name}: DRAM {xy} is NOC0 {noc0}, a harvested bank; buffers are interleaved over all eight "
                      "banks, so a chip with a harvested DRAM bank (p100) is not supported yet")
    return noc0


def survey(umd, transport: UmdTransport, simulated: bool) -> ChipSurvey:
    """Check the chip against what the kernels need and choose the tile (see the module doc)."""
    arch = transport.call("reading the architecture", None, "get_arch")
    if not is_blackhole(umd, arch):
        raise TTError(f"{transport.name}: the chip is a {arch}, not a Blackhole; tt_backend drives Blackhole only")
    sd = transport.call("reading the SoC descriptor", None, "get_soc_descriptor")
    translation = bool(transport.call("reading the NoC translation state", None, "get_noc_translation_enabled"))
    if not translation and not simulated:
        raise TTError(f"{transport.name}: NoC translation is off on this card (tt-umd get_noc_translation_enabled()), "
                      f"but the kernels address the DRAM banks by their translated coordinates. The card's "
                      "firmware turns translation on at boot: update the firmware or reset the card (tt-smi -r).")
    T, C = umd.CoreType, umd.CoordSystem

    def soc(op, fn, *args):
        try:
            return fn(*args)
        except Exception as e:
            raise umd_error(transport.name, f"{op} (SoC descriptor)", None, e) from e

    logical = soc("listing Tensix cores", sd.get_cores, T.TENSIX, C.LOGICAL)
    if not logical:
        raise TTError(f"{transport.name}: tt-umd's SoC descriptor lists no usable Tensix core")
    first = min(logical, key=lambda c: (c.y, c.x))
    tile = _xy(soc("translating the tile", sd.translate_coord_to, first, C.TRANSLATED))
    tile_noc0 = _xy(soc("translating the tile", sd.translate_coord_to, first, C.NOC0))
    harvested = tuple(sorted(_xy(c) for c in soc("listing harvested cores", sd.get_harvested_cores, T.TENSIX, C.NOC0)))
    if tile_noc0 in harvested:
        raise TTError(f"{transport.name}: tt-umd's SoC descriptor maps logical Tensix {_xy(first)} to NOC0 "
                      f"{tile_noc0}, which it also lists as harvested; not driving a harvested core")
    dram_noc0 = None
    if translation:
        bad = {_xy(c) for c in soc("listing harvested DRAM", sd.get_harvested_cores, T.DRAM, C.NOC0)}
        dram_noc0 = tuple(_dram_bank_noc0(transport.name, umd, sd, soc, xy, bad) for xy in interleave.BANK_XYS)
    return ChipSurvey(translation, tile, tile_noc0, harvested, dram_noc0)


class UmdDevice(NocTileDevice):
    """A Blackhole chip behind a `tt_umd.TTDevice` (see the module doc). Subclasses find and release the chip."""

    def __init__(self, umd, umd_device, *, name: str, simulated: bool, advance: Callable[[int], None],
                 cause_of_failure: Callable[[str], TTError | None] = lambda op: None, retire_timeout_s: float = 5.0):
        self.umd = umd
        transport = UmdTransport(umd_device, name, advance, cause_of_failure)
        self.survey = survey(umd, transport, simulated)
        transport.call("setting the power state to BUSY", None, "set_power_state", umd.TTDevice.PowerState.BUSY)
        self.power_state = "BUSY"
        super().__init__(transport, tile_xy=self.survey.tile_xy, dram_size=HW_DRAM_BANK_SIZE,
                         retire_before_reset=True, retire_timeout_s=retire_timeout_s)
        try:
            self._claim_tile()
        except BaseException:
            self.close()                  # back to IDLE: the chip is not ours to use
            raise

    def _claim_tile(self) -> None:
        """Refuse a tile whose cores run something that is not a finished kernel of ours."""
        busy = self.unretired_cores()
        if busy:
            raise TTError(f"{self.name}: tile {self.tile_xy} has cores out of reset ({', '.join(busy)}) that are not a "
                          "finished tt_backend kernel: another process or firmware holds it; not touching it. Reset "
                          "the card (tt-smi -r) if nothing should be running.")

    def describe(self) -> str:
        """What opening found and did (`python -m tt_backend info`)."""
        return f"{self.survey.describe()}; power state {self.power_state} while open"

    def close(self) -> None:
        """Back to the IDLE power state, then let go of the chip (idempotent)."""
        try:
            if self.transport.dev is not None and self.chip_alive():
                self.transport.call("setting the power state to IDLE", None, "set_power_state",
                                    self.umd.TTDevice.PowerState.IDLE)
                self.power_state = "IDLE"
        finally:
            super().close()

    def chip_alive(self) -> bool:
        """False when the chip is known gone (a simulator that died): nothing is sent to it any more."""
        return True

