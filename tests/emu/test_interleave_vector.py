"""The host's interleaved DRAM accesses with numpy (dram.write_interleaved / read_interleaved, the EmuDevice's path
for ranges of eight pages or more) against interleave.write / read, their reference: the same bank calls in the same
order with the same bytes, and the same bytes read back, on ranges of every alignment and length."""
from __future__ import annotations

import numpy as np
import pytest

from tt_backend.chip import interleave
from tt_backend.runtime.emu import dram
from tt_backend.runtime.emu.device import EmuDevice

PAGE = interleave.PAGE_BYTES


def _ranges(rng, n: int) -> list[tuple[int, int]]:
    """Page-aligned and unaligned starts, lengths from one byte to 40 pages, some ending on a page boundary."""
    fixed = [(0, 1), (0, PAGE), (PAGE - 1, 2), (5, 8 * PAGE), (3 * PAGE - 200, 9 * PAGE + 333), (0, 64 * PAGE),
             (7 * PAGE + 5, 17 * PAGE - 5), (interleave.BUFFER_ALIGN, 256 * PAGE)]
    drawn = []
    for _ in range(n):
        addr = int(rng.integers(0, 1 << 22)) & ~int(rng.choice([0, 0, PAGE - 1]))
        size = int(rng.integers(1, 40 * PAGE))
        if rng.random() < 0.3:                           # end on a page boundary
            size += -(addr + size) % PAGE
        drawn.append((addr, size))
    return fixed + drawn


def _calls_of(fn, *args):
    calls = []
    fn(*args, lambda xy, off, data: calls.append((xy, off, bytes(data))))
    return calls


def test_bank_shares_are_bank_spans_joined():
    rng = np.random.default_rng(3)
    for addr, size in _ranges(rng, 500) + [(1000, 0)]:
        spans = interleave.bank_spans(addr, size)
        shares = interleave.bank_shares(addr, size)
        assert [(b, o, sum(n for _, n in ps)) for b, o, ps in spans] == [(b, o, n) for b, o, _, _, n in shares]


def test_write_interleaved_makes_the_reference_calls():
    rng = np.random.default_rng(4)
    for addr, size in _ranges(rng, 120):
        data = rng.integers(0, 256, size, dtype=np.uint8).tobytes()
        assert _calls_of(dram.write_interleaved, addr, data) == _calls_of(interleave.write, addr, data), (addr, size)


def test_read_interleaved_reads_the_reference_bytes():
    rng = np.random.default_rng(5)
    banks = {xy: rng.integers(0, 256, 2 << 20, dtype=np.uint8).tobytes() for xy in interleave.BANK_XYS}
    for addr, size in _ranges(rng, 120):
        asked = {"ref": [], "vec": []}

        def reader(key):
            def read_bank(xy, off, n):
                asked[key].append((xy, off, n))
                return banks[xy][off:off + n]
            return read_bank
        ref = interleave.read(addr, size, reader("ref"))
        assert dram.read_interleaved(addr, size, reader("vec")) == ref, (addr, size)
        assert asked["vec"] == asked["ref"]


@pytest.mark.parametrize("vector", [True, False])
def test_device_round_trip_either_path(monkeypatch, vector):
    """EmuDevice's write_dram / read_dram on both paths leave the same banks and read the same bytes."""
    monkeypatch.setattr(dram, "INTERLEAVE_VECTOR", vector)
    rng = np.random.default_rng(6)
    dev = EmuDevice()
    ref = EmuDevice()
    for addr, size in _ranges(rng, 30):
        data = rng.integers(0, 256, size, dtype=np.uint8).tobytes()
        dev.write_dram(addr, data)
        interleave.write(addr, data, ref.write_bank)
        assert dev.read_dram(addr, size) == data == interleave.read(addr, size, ref.read_bank)
    for a, b in zip(dev.chip.banks, ref.chip.banks):
        assert a.pages.keys() == b.pages.keys() and all(np.array_equal(a.pages[k], b.pages[k]) for k in a.pages)
