"""Launch helpers for the bare-metal test programs (built by tests/support/programs.py) on any `Device`.

* `run_on(device, elfs, args=...)` runs ELFs with the launch protocol of docs/ARCHITECTURE.md and waits for them.
* `release_brisc(device, elf, generation)` loads and releases BRISC alone, without waiting.
* `load_segments(elf)` reads the PT_LOAD segments of an ELF.
"""
from __future__ import annotations

import struct
import time
from dataclasses import dataclass, field

from tt_backend.runtime.driver import jal_x0
from tt_backend.chip import layout
from tt_backend.chip.errors import DeviceTimeout, TTError

DRAM_XY = layout.DRAM_XY[0] | layout.DRAM_XY[1] << 6     # the DRAM bank's NoC (x, y) as the device programs take it


def load_segments(elf: bytes) -> tuple[int, list[tuple[int, bytes, int]]]:
    """(entry, [(paddr, file bytes, memsz)]) of the PT_LOAD segments of a little-endian ELF32."""
    if elf[:4] != b"\x7fELF" or elf[4] != 1 or elf[5] != 1:
        raise TTError("not a little-endian ELF32 file")
    entry, phoff = struct.unpack_from("<II", elf, 24)
    phentsize, phnum = struct.unpack_from("<HH", elf, 42)
    segs = []
    for i in range(phnum):
        p_type, p_offset, _vaddr, p_paddr, p_filesz, p_memsz, _fl, _al = struct.unpack_from(
            "<8I", elf, phoff + i * phentsize)
        if p_type == 1 and p_memsz:
            segs.append((p_paddr, elf[p_offset:p_offset + p_filesz], p_memsz))
    return entry, segs


def release_brisc(device, elf: bytes, generation: int) -> None:
    """Load `elf` for BRISC and release BRISC alone (status cleared, stop flag 0) without waiting for it."""
    device.write32(layout.SOFT_RESET_0, layout.ALL_CORES_RESET)
    entry, segs = load_segments(elf)
    for paddr, data, memsz in segs:
        device.write_l1(paddr, bytes(data) + bytes(memsz - len(data)))
    device.write32(layout.BRISC_VECTOR, jal_x0(entry))
    device.write_l1(layout.STATUS_BASE, bytes(layout.STATUS_STRIDE * len(layout.CORES)))
    device.write32(layout.LAUNCH_STOP, 0)
    device.write32(layout.LAUNCH_GENERATION, generation)
    device.write32(layout.SOFT_RESET_0, layout.ALL_CORES_RESET & ~(1 << layout.SOFT_RESET_BIT["brisc"]))


@dataclass
class RunResult:
    clocks: int                                   # clocks advanced until every core was done
    seconds: float                                # host wall time of the launch (load + run + poll)
    status: dict[str, tuple[int, int, int]] = field(default_factory=dict)  # core -> (done, error, progress)


def run_on(device, elfs: dict[str, bytes], args: bytes | list[int] | None = None, *, generation: int = 1,
           step: int = 2000, max_clocks: int = 50_000_000) -> RunResult:
    """Launch `elfs` (core name -> ELF bytes) on `device` per docs/ARCHITECTURE.md and wait until all are done.

    Raises TTError if a core reports error != 0, DeviceTimeout after `max_clocks` (with core_state()).
    `step` is the number of clocks per advance() between status polls.
    """
    t0 = time.perf_counter()
    unknown = set(elfs) - set(layout.CORES)
    if unknown:
        raise TTError(f"unknown cores {sorted(unknown)}")
    device.write32(layout.SOFT_RESET_0, layout.ALL_CORES_RESET)
    entries = {}
    for core, elf in elfs.items():
        entry, segs = load_segments(elf)
        entries[core] = entry
        for paddr, data, memsz in segs:
            device.write_l1(paddr, bytes(data) + bytes(memsz - len(data)))
    if "brisc" in entries:
        device.write32(layout.BRISC_VECTOR, jal_x0(entries["brisc"]))
    override = 0
    for i in range(3):
        if f"trisc{i}" in entries:
            device.write32(layout.TRISC_RESET_PC[i], entries[f"trisc{i}"])
            override |= 1 << i
    if override:
        device.write32(layout.TRISC_RESET_PC_OVERRIDE, override)
    if "ncrisc" in entries:
        device.write32(layout.NCRISC_RESET_PC, entries["ncrisc"])
        device.write32(layout.NCRISC_RESET_PC_OVERRIDE, 1)
    if args is not None:
        blob = args if isinstance(args, (bytes, bytearray)) else struct.pack(f"<{len(args)}I", *args)
        if len(blob) > layout.ARGS_SIZE:
            raise TTError("argument block too large")
        device.write_l1(layout.ARGS_BASE, bytes(blob))
    nstat = len(layout.CORES) * layout.STATUS_STRIDE
    device.write_l1(layout.STATUS_BASE, bytes(nstat))
    device.write32(layout.LAUNCH_STOP, 0)
    device.write32(layout.LAUNCH_GENERATION, generation)
    release = layout.ALL_CORES_RESET
    for core in elfs:
        release &= ~(1 << layout.SOFT_RESET_BIT[core])
    device.write32(layout.SOFT_RESET_0, release)

    clocks = 0
    while True:
        device.advance(step)
        clocks += step
        raw = device.read_l1(layout.STATUS_BASE, nstat)
        status = {c: struct.unpack_from("<3I", raw, layout.STATUS_STRIDE * layout.CORES.index(c)) for c in elfs}
        errs = {c: s for c, s in status.items() if s[1]}
        if errs:
            raise TTError(f"cores reported errors: {errs}; state: {device.core_state()}")
        if all(s[0] == generation for s in status.values()):
            return RunResult(clocks, time.perf_counter() - t0, status)
        if clocks >= max_clocks:
            raise DeviceTimeout(f"not done after {clocks} clocks: {device.core_state()}")
