"""The Device protocol, ELF loading and the launch protocol of docs/ARCHITECTURE.md.

`launch(device, elfs, args, timeout_s)` holds the cores in reset, loads each ELF's PT_LOAD segments, points the reset
vectors at the images, writes the argument block, clears the status words, bumps the generation, releases the cores and
advances the device until every launched core reports done (= generation) or any reports an error. On a timeout it
raises the stop flag so blocked cores retire by themselves, then raises DeviceTimeout naming every core's status and
the device's own view of the cores.

A kernel split over several Tensix tiles (`per_tile`: the argument block of each tile, instead of `args`) runs the same
ELFs on the first len(per_tile) tiles of `device.tile_xys()`, or on the tiles `tile_xys` names (a kernel whose cores
multicast to rectangles of the grid places them), each reached through `device.on_tile(xy)`
(a `GridDevice`): every tile is loaded and given its arguments first, then all are released, then all are awaited;
a failure or time-out stops and reports every tile.

`l1_resident=True` measures a launch's compute part L1 to L1 (docs/performance.md §8.5): the reader (BRISC) is
released alone and run to its end on every tile, so every input tile it moves is in its circular buffer, with the CB
counters of its pushes, before the compute cores (TRISC0-2) and the writer are released. A reader that cannot end
alone (its inputs need more slots than its CBs have, or it waits for the compute) is refused with a TTError.
"""
from __future__ import annotations

import functools
import hashlib
import struct
import time
from dataclasses import dataclass
from typing import Protocol


from tt_backend.chip import layout
from tt_backend.chip.errors import DeviceTimeout, TTError
from tt_backend.runtime.progress import LaunchProgress, NoProgress, for_terminal


class Device(Protocol):
    name: str

    def write_l1(self, addr: int, data: bytes) -> None: ...
    def read_l1(self, addr: int, size: int) -> bytes: ...
    def write32(self, addr: int, value: int) -> None: ...      # L1 or tile MMIO (soft reset, reset PCs)
    def read32(self, addr: int) -> int: ...
    def write_dram(self, addr: int, data: bytes) -> None: ...  # buffers: interleaved over the banks (chip/interleave.py)
    def read_dram(self, addr: int, size: int) -> bytes: ...
    def write_bank(self, xy: tuple[int, int], addr: int, data: bytes) -> None: ...   # one bank (translated xy), its
    def read_bank(self, xy: tuple[int, int], addr: int, size: int) -> bytes: ...     # own byte offset
    def advance(self, budget: int) -> None: ...                # let the target run
    def core_state(self) -> dict[str, str]: ...                # per core: PC and run/wait state


class GridDevice(Device, Protocol):
    """A device that reaches several Tensix tiles of its chip (emu, ttsim)."""

    def tile_xys(self) -> list[tuple[int, int]]: ...      # usable tiles, translated, launch order (own tile first)
    def on_tile(self, xy: tuple[int, int]) -> Device: ...  # the same chip, L1/MMIO of the tile at xy


# status error codes written by the kernels (templates/device/tt_kernel.h TT_ERR_*)
ERROR_NAMES = {1: "stopped by the host", 2: "NoC request breaks the alignment rule", 3: "index outside its buffer",
               4: "invalid kernel configuration"}


@dataclass(frozen=True)
class Segment:
    paddr: int
    data: bytes        # p_filesz bytes followed by the zero fill up to p_memsz


@dataclass(frozen=True)
class LoadedElf:
    entry: int
    segments: tuple[Segment, ...]


ELF32_PHDR = struct.Struct("<8I")    # type, offset, vaddr, paddr, filesz, memsz, flags, align
EM_RISCV, PT_LOAD = 243, 1


@functools.lru_cache(maxsize=256)
def _parse(digest: str, elf: bytes) -> LoadedElf:
    # the ELF header and program headers read with struct: pyelftools builds its parser objects for every file it
    # opens, which cost more than a cached kernel build's everything else
    try:
        if elf[:4] != b"\x7fELF":
            raise ValueError("no ELF magic")
        elfclass, machine = {1: 32, 2: 64}.get(elf[4], elf[4]), struct.unpack_from("<H", elf, 18)[0]
        if elfclass != 32 or elf[5] != 1 or machine != EM_RISCV:
            raise TTError(f"not a 32-bit RISC-V ELF (machine {machine}, class {elfclass})")
        (entry, phoff), (phentsize, phnum) = struct.unpack_from("<II", elf, 24), struct.unpack_from("<HH", elf, 42)
        segs = []
        for i in range(phnum):
            p_type, offset, _, paddr, filesz, memsz, _, _ = ELF32_PHDR.unpack_from(elf, phoff + i * phentsize)
            if p_type != PT_LOAD or memsz == 0:
                continue
            if len(data := elf[offset:offset + filesz]) != filesz:
                raise ValueError(f"segment at 0x{paddr:X} is cut short")
            segs.append(Segment(paddr, data + bytes(memsz - filesz)))
    except (struct.error, ValueError) as e:      # truncated or overwritten
        raise TTError(f"not a loadable ELF image ({e}): the kernel bundle is damaged; recompile the kernel") from None
    return LoadedElf(entry, tuple(segs))


def load_elf_segments(elf: bytes) -> LoadedElf:
    """Entry point and PT_LOAD segments (zero-filled to p_memsz). Parsed once per distinct ELF."""
    return _parse(hashlib.sha256(elf).hexdigest(), elf)


def jal_x0(offset: int) -> int:
    """`jal x0, offset` (J-type), for the BRISC reset vector at L1 0."""
    if offset % 2 or not -(1 << 20) <= offset < (1 << 20):
        raise ValueError(f"jal cannot reach offset {offset:#x}")
    imm = offset & 0x1FFFFF
    return (0x6F | (((imm >> 12) & 0xFF) << 12) | (((imm >> 11) & 1) << 20) | (((imm >> 1) & 0x3FF) << 21)
            | (((imm >> 20) & 1) << 31))


@dataclass
class CoreInfo:
    done: int
    error: int
    progress: int

    def describe(self, generation: int) -> str:
        if self.error:
            what = f"error {self.error} ({ERROR_NAMES.get(self.error, 'unknown code')})"
        elif self.done == generation:
            what = "done"
        else:
            what = "running"
        return f"{what}, progress {self.progress}"


@dataclass
class LaunchResult:
    seconds: float
    generation: int
    cores: dict[str, CoreInfo]          # the first tile's cores
    tiles: int = 1


def read_status(device: Device) -> dict[str, CoreInfo]:
    raw = device.read_l1(layout.STATUS_BASE, layout.STATUS_STRIDE * len(layout.CORES))
    out = {}
    for i, core in enumerate(layout.CORES):
        done, error, progress, _ = struct.unpack_from("<4I", raw, i * layout.STATUS_STRIDE)
        out[core] = CoreInfo(done, error, progress)
    return out


READER_STUCK_POLLS = 3       # advances in a row an L1-resident launch's reader may spin before it is refused


def _release_mask(cores) -> int:
    return layout.ALL_CORES_RESET & ~sum(1 << layout.SOFT_RESET_BIT[c] for c in cores)


def launch(device: Device, elfs: dict[str, bytes], args: list[int], timeout_s: float = 30.0,
           budget: int = 20000, grace_budget: int = 20000, label: str = "",
           per_tile: list[list[int]] | None = None,
           tile_xys: list[tuple[int, int]] | None = None, l1_resident: bool = False) -> LaunchResult:
    """Run one kernel (the module docstring). A launch longer than a few seconds shows a status line on a terminal
    (runtime/progress.py; `label` names the kernel there), cleared however the launch ends."""
    progress = for_terminal(device, label)
    try:
        tiles = on_tiles(device, len(per_tile) if per_tile else 1, label, tile_xys)
        tile_args = [list(block) for block in per_tile] if per_tile else [list(args)]
        return _launch(device, tiles, elfs, tile_args, timeout_s, budget, grace_budget, progress, l1_resident)
    finally:
        progress.close()


def on_tiles(device: Device, n: int, label: str = "",
             chosen: list[tuple[int, int]] | None = None) -> list[tuple[tuple[int, int] | None, Device]]:
    """(coordinates, device view) of the first n tiles of the device, or of the `chosen` ones (n = 1: the device
    itself)."""
    if n == 1:
        return [(None, device)]
    xys = device.tile_xys() if hasattr(device, "tile_xys") else []
    if n > len(xys):
        raise TTError(f"kernel {label or '?'} is split over {n} Tensix tiles, but {device.name} launches on "
                      f"{max(1, len(xys))}: compile it for this target (TT_CORES={max(1, len(xys))} caps the split)")
    if chosen is None:
        return [(xy, device.on_tile(xy)) for xy in xys[:n]]
    chosen = [tuple(xy) for xy in chosen]
    if len(chosen) != n or len(set(chosen)) != n or not set(chosen) <= set(xys):
        raise TTError(f"kernel {label or '?'} asks for tiles {chosen[:8]}{'...' if n > 8 else ''}: {n} distinct "
                      f"usable Tensix tiles of {device.name} expected")
    return [(xy, device.on_tile(xy)) for xy in chosen]


def _launch(device: Device, tiles, elfs: dict[str, bytes], tile_args: list[list[int]], timeout_s: float, budget: int,
            grace_budget: int, progress: LaunchProgress | NoProgress, l1_resident: bool = False) -> LaunchResult:
    unknown = set(elfs) - set(layout.CORES)
    if unknown:
        raise ValueError(f"unknown cores {sorted(unknown)}; expected a subset of {layout.CORES}")
    if max(len(a) for a in tile_args) * 4 > layout.ARGS_SIZE:
        raise TTError(f"{max(len(a) for a in tile_args)} argument words do not fit the {layout.ARGS_SIZE}-byte "
                      f"argument block")
    loaded = {core: load_elf_segments(elf) for core, elf in elfs.items()}
    generations = [_load(dev, loaded, args) for (_, dev), args in zip(tiles, tile_args)]
    # 5. release the launched cores of every tile (edge-triggered: they were all held above)
    t0 = time.perf_counter()
    deadline = t0 + timeout_s
    if l1_resident:
        _run_reader_alone(device, tiles, loaded, generations, deadline, budget, grace_budget)
    for _, dev in tiles:
        dev.write32(layout.SOFT_RESET_0, _release_mask(loaded))

    # 6. wait
    while True:
        device.advance(budget)
        statuses = [read_status(dev) for _, dev in tiles]
        progress.poll(statuses[0])
        if any(s.error for status in statuses for c, s in status.items() if c in loaded):
            raise TTError("kernel failed: " + _stop_and_report(tiles, grace_budget, loaded, generations))
        if all(status[c].done == g for status, g in zip(statuses, generations) for c in loaded):
            return LaunchResult(time.perf_counter() - t0, generations[0], {c: statuses[0][c] for c in loaded},
                                len(tiles))
        if time.perf_counter() > deadline:
            raise DeviceTimeout(f"kernel did not finish within {timeout_s:.1f} s: "
                                + _stop_and_report(tiles, grace_budget, loaded, generations))


def _run_reader_alone(device: Device, tiles, loaded: dict[str, LoadedElf], generations: list[int], deadline: float,
                      budget: int, grace_budget: int) -> None:
    """The l1_resident launch's first part: BRISC released alone on every tile and run until each reports done. On a
    device that tells a core polling in a wait loop (the emulator's `spinning`), a reader found so after
    READER_STUCK_POLLS advances in a row waits for the held cores: refused at once, not at the timeout."""
    if "brisc" not in loaded:
        raise TTError("an L1-resident launch needs a reader (BRISC) to fill the circular buffers")
    for _, dev in tiles:
        dev.write32(layout.SOFT_RESET_0, _release_mask(["brisc"]))
    stuck = 0
    while True:
        device.advance(budget)
        statuses = [read_status(dev) for _, dev in tiles]
        if any(status["brisc"].error for status in statuses):
            raise TTError("kernel failed: " + _stop_and_report(tiles, grace_budget, {"brisc": loaded["brisc"]},
                                                               generations))
        running = [dev for (_, dev), status, g in zip(tiles, statuses, generations) if status["brisc"].done != g]
        if not running:
            return
        spinning = [getattr(dev, "spinning", None) for dev in running]
        stuck = stuck + 1 if all(s is not None and s("brisc") for s in spinning) else 0
        if stuck >= READER_STUCK_POLLS or time.perf_counter() > deadline:
            why = "waits with the compute cores held" if stuck >= READER_STUCK_POLLS else "did not finish in time"
            raise TTError(f"no L1-resident launch: the reader {why} (its inputs need more slots than its circular "
                          f"buffers hold, or it waits for the compute or the writer): "
                          + _stop_and_report(tiles, grace_budget, {"brisc": loaded["brisc"]}, generations))


def _load(device: Device, loaded: dict[str, LoadedElf], args: list[int]) -> int:
    """Steps 1-4 of the launch on one tile: hold, load, vectors, arguments, status, stop flag, generation (returned)."""
    # 1. hold every core in reset (also stops whatever ran before), 2. load the images
    device.write32(layout.SOFT_RESET_0, layout.ALL_CORES_RESET)
    for core, img in loaded.items():
        lo, hi = layout.IMAGE_SLOT[core], layout.IMAGE_SLOT[core] + layout.IMAGE_SLOT_SIZE
        for seg in img.segments:
            if not (lo <= seg.paddr and seg.paddr + len(seg.data) <= hi):
                raise TTError(f"{core} segment at 0x{seg.paddr:X} (+{len(seg.data)}) is outside its slot "
                              f"0x{lo:X}..0x{hi:X}")
            device.write_l1(seg.paddr, seg.data)
    # 3. reset vectors: BRISC always starts at L1 0, the others through their reset-PC overrides
    if "brisc" in loaded:
        device.write32(layout.BRISC_VECTOR, jal_x0(loaded["brisc"].entry - layout.BRISC_VECTOR))
    for i, core in enumerate(("trisc0", "trisc1", "trisc2")):
        if core in loaded:
            device.write32(layout.TRISC_RESET_PC[i], loaded[core].entry)
    device.write32(layout.TRISC_RESET_PC_OVERRIDE, 0x7)
    if "ncrisc" in loaded:
        device.write32(layout.NCRISC_RESET_PC, loaded["ncrisc"].entry)
        device.write32(layout.NCRISC_RESET_PC_OVERRIDE, 1)
    # 4. arguments, status, stop flag, generation
    if args:
        device.write_l1(layout.ARGS_BASE, struct.pack(f"<{len(args)}I", *(a & 0xFFFFFFFF for a in args)))
    device.write_l1(layout.STATUS_BASE, bytes(layout.STATUS_STRIDE * len(layout.CORES)))
    device.write32(layout.LAUNCH_STOP, 0)
    generation = (device.read32(layout.LAUNCH_GENERATION) + 1) & 0xFFFFFFFF or 1
    device.write32(layout.LAUNCH_GENERATION, generation)
    return generation


def _stop_and_report(tiles, grace_budget: int, loaded, generations: list[int]) -> str:
    """Ask every core of every tile to retire (each blocking wait polls the stop flag), give them a little time to do
    so, and describe every tile's cores."""
    for _, dev in tiles:
        dev.write32(layout.LAUNCH_STOP, 1)
    for _ in range(4):
        tiles[0][1].advance(grace_budget)
    parts = []
    for (xy, dev), generation in zip(tiles, generations):
        text = _report(dev, read_status(dev), loaded, generation)
        parts.append(text if xy is None else f"\n  tile {xy}:" + text.replace("\n  ", "\n    "))
    return "".join(parts)


def _report(device: Device, status: dict[str, CoreInfo], loaded, generation: int) -> str:
    try:
        state = device.core_state()
    except Exception as e:  # the report must not hide the original problem
        state = {"?": f"core_state() failed: {e}"}
    lines = [f"{c}: {status[c].describe(generation)}; {state.get(c, 'no state')}" for c in loaded]
    extra = [f"{k}: {v}" for k, v in state.items() if k not in loaded]
    return "\n  " + "\n  ".join(lines + extra)
