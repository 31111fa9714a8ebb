"""Recorded ttsim verdicts: what a device was asked and what ttsim answered, replayable on any `Device`.

A *session* is the trace of one fresh device, as a list of events in order:

    ["write_l1" | "write_dram", addr, blob]      host writes (ELF segments included: a trace needs no compiler)
    ["write_bank", addr, blob, [x, y]]           a host write to one DRAM bank (translated x, y), its own offset
    ["write32", addr, value]                     MMIO / L1 words (reset vectors, soft reset, launch generation)
    ["read_l1" | "read_dram", addr, blob, base]  host reads and the bytes ttsim returned (`base`: see `Corpus`)
    ["read_bank", addr, blob, base, [x, y]]
    ["read32", addr, value]
    ["advance", clocks]                          an advance outside a launch
    ["run", cores, generation, clocks]           the released cores ran until each reported done for generation
                                                 (ttsim needed at most `clocks`: the replay's limit scales with it)

`Recorder` wraps a device and writes the trace while a test helper (harness.run_on, driver.launch, a tinygrad
program) drives it. The wait of a launch (advance + status polls after the release write) is timing, which differs
between simulators, so the recorder folds it into one "run" event and the replay waits the same way on its own
clock. Everything the host reads outside that wait is a verdict: the replay must read the same bytes.

`Corpus` stores sessions compactly (one compressed .npz: a JSON manifest and content-addressed blobs; a read's
expected bytes may be stored XOR an earlier equally long write, which leaves mostly zeros where a kernel changed
only part of what it was given). `replay(session, device, corpus)` runs a session and returns its differences.
"""
from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path

import numpy as np

from tt_backend.chip import layout

from tests.support.device_diff import first_diffs

_STATUS_BYTES = layout.STATUS_STRIDE * len(layout.CORES)
_DELTA_CANDIDATES = 8            # how many recent equally long writes a read's bytes are compared with
RUN_CLOCKS_FACTOR, RUN_CLOCKS_MARGIN = 10, 2_000_000


def _in_status(addr: int, size: int) -> bool:
    return layout.STATUS_BASE <= addr and addr + size <= layout.STATUS_BASE + _STATUS_BYTES


def released_cores(soft_reset: int) -> list[str]:
    """The cores a SOFT_RESET_0 value lets run."""
    return [c for c in layout.CORES if not soft_reset >> layout.SOFT_RESET_BIT[c] & 1]


class Corpus:
    """Sessions (name, category, keys they cover, events) and the blobs their events refer to by index."""

    def __init__(self):
        self.sessions: list[dict] = []
        self.blobs: list[bytes] = []
        self._index: dict[bytes, int] = {}

    def blob(self, data: bytes) -> int:
        digest = hashlib.sha256(data).digest()
        if digest not in self._index:
            self._index[digest] = len(self.blobs)
            self.blobs.append(bytes(data))
        return self._index[digest]

    def expected(self, event: list) -> bytes:
        """The bytes a read event expects (undoing the XOR with its base write)."""
        data, base = self.blobs[event[2]], event[3]
        if base < 0:
            return data
        return (np.frombuffer(data, np.uint8) ^ np.frombuffer(self.blobs[base], np.uint8)).tobytes()

    def save(self, path: Path) -> None:
        manifest = json.dumps({"sessions": self.sessions}, separators=(",", ":")).encode()
        arrays = {f"b{i}": np.frombuffer(b, np.uint8) for i, b in enumerate(self.blobs)}
        np.savez_compressed(path, manifest=np.frombuffer(manifest, np.uint8), **arrays)

    @classmethod
    def load(cls, path: Path) -> Corpus:
        c = cls()
        with np.load(path) as z:
            c.sessions = json.loads(z["manifest"].tobytes())["sessions"]
            c.blobs = [z[f"b{i}"].tobytes() for i in range(len(z.files) - 1)]
        return c


class Recorder:
    """A `Device` that forwards every call to `inner` and appends the trace of the calls to `events`."""

    def __init__(self, inner, corpus: Corpus):
        self.inner, self.corpus = inner, corpus
        self.events: list[list] = []
        self._running: list | None = None     # the "run" event of the launch being waited for
        self._generation = 0
        self._writes: list[tuple[int, int]] = []    # (size, blob) of recent writes: bases for reads' XOR

    def __getattr__(self, name):              # stats(), core_state(), alive, restart, close, ...: the inner device's
        return getattr(self.inner, name)

    def finish(self) -> list[list]:
        """The trace so far (a pending launch wait closed)."""
        self._settle()
        return self.events

    def _settle(self) -> None:
        if self._running is not None:
            self.events.append(self._running)
            self._running = None

    def _write(self, kind: str, addr: int, data: bytes, *where) -> None:
        self._settle()
        blob = self.corpus.blob(bytes(data))
        self.events.append([kind, addr, blob, *where])
        self._writes = [*self._writes[-_DELTA_CANDIDATES + 1:], (len(data), blob)]

    def _read(self, kind: str, addr: int, data: bytes, *where) -> bytes:
        self._settle()
        got = np.frombuffer(data, np.uint8)
        best, base = np.count_nonzero(got), -1
        for size, blob in self._writes:       # the write this read differs least from, if any
            if size == len(data):
                delta = got ^ np.frombuffer(self.corpus.blobs[blob], np.uint8)
                if (n := np.count_nonzero(delta)) < best:
                    best, base = n, blob
        stored = data if base < 0 else (got ^ np.frombuffer(self.corpus.blobs[base], np.uint8)).tobytes()
        self.events.append([kind, addr, self.corpus.blob(stored), base, *where])
        return data

    def write_l1(self, addr: int, data: bytes) -> None:
        self.inner.write_l1(addr, data)
        self._write("write_l1", addr, data)

    def write_dram(self, addr: int, data: bytes) -> None:
        self.inner.write_dram(addr, data)
        self._write("write_dram", addr, data)

    def write_bank(self, xy: tuple[int, int], addr: int, data: bytes) -> None:
        self.inner.write_bank(xy, addr, data)
        self._write("write_bank", addr, data, list(xy))

    def write32(self, addr: int, value: int) -> None:
        self.inner.write32(addr, value)
        self._settle()
        self.events.append(["write32", addr, value & 0xFFFFFFFF])
        if addr == layout.LAUNCH_GENERATION:
            self._generation = value & 0xFFFFFFFF
        if addr == layout.SOFT_RESET_0 and (cores := released_cores(value)):
            self._running = ["run", cores, self._generation, 0]

    def read_l1(self, addr: int, size: int) -> bytes:
        data = self.inner.read_l1(addr, size)
        if self._running is not None and _in_status(addr, size):
            return data                        # a status poll of the launch wait
        return self._read("read_l1", addr, data)

    def read_dram(self, addr: int, size: int) -> bytes:
        return self._read("read_dram", addr, self.inner.read_dram(addr, size))

    def read_bank(self, xy: tuple[int, int], addr: int, size: int) -> bytes:
        return self._read("read_bank", addr, self.inner.read_bank(xy, addr, size), list(xy))

    def read32(self, addr: int) -> int:
        value = self.inner.read32(addr)
        if self._running is None or not _in_status(addr, 4):
            self._settle()
            self.events.append(["read32", addr, value])
        return value

    def advance(self, budget: int) -> None:
        self.inner.advance(budget)
        if self._running is None:
            self.events.append(["advance", budget])
        else:
            self._running[3] += budget


def wait_done(device, cores: list[str], generation: int, max_clocks: int, step: int = 20000) -> str:
    """Advance until every core in `cores` reports done for `generation`; '' or what went wrong."""
    clocks = 0
    while clocks < max_clocks:
        device.advance(step)
        clocks += step
        raw = device.read_l1(layout.STATUS_BASE, _STATUS_BYTES)
        status = {c: struct.unpack_from("<2I", raw, layout.STATUS_STRIDE * layout.CORES.index(c)) for c in cores}
        if errors := {c: s[1] for c, s in status.items() if s[1]}:
            return f"cores reported errors {errors}"
        if all(s[0] == generation for s in status.values()):
            return ""
    return f"not done after {clocks} clocks: {device.core_state()}"


def replay(session: dict, device, corpus: Corpus) -> list[str]:
    """Run `session`'s events on `device` (fresh); every difference from the recorded reads, in order."""
    diffs = []
    for i, ev in enumerate(session["events"]):
        kind = ev[0]
        if kind == "write_l1":
            device.write_l1(ev[1], corpus.blobs[ev[2]])
        elif kind == "write_dram":
            device.write_dram(ev[1], corpus.blobs[ev[2]])
        elif kind == "write_bank":
            device.write_bank(tuple(ev[3]), ev[1], corpus.blobs[ev[2]])
        elif kind == "write32":
            device.write32(ev[1], ev[2])
        elif kind == "advance":
            device.advance(ev[1])
        elif kind == "run":
            # the emulator's timing is not ttsim's: a generous multiple of ttsim's clocks, so a hang fails quickly
            if err := wait_done(device, ev[1], ev[2], max_clocks=RUN_CLOCKS_FACTOR * ev[3] + RUN_CLOCKS_MARGIN):
                return diffs + [f"event {i} (run {ev[1]} generation {ev[2]}): {err}"]
        elif kind == "read32":
            if (got := device.read32(ev[1])) != ev[2]:
                diffs.append(f"event {i} read32 {ev[1]:#x}: got {got:#010x} recorded {ev[2]:#010x}")
        else:
            want = corpus.expected(ev)
            got = (device.read_l1(ev[1], len(want)) if kind == "read_l1" else
                   device.read_bank(tuple(ev[4]), ev[1], len(want)) if kind == "read_bank" else
                   device.read_dram(ev[1], len(want)))
            if got != want:
                diffs.append(f"event {i} {kind} {ev[1]:#x}+{len(want):#x}: {first_diffs(got, want)}"
                             " (emu: this device, ttsim: the recording)")
    return diffs
