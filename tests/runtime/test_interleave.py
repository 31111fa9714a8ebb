"""DRAM buffers interleaved page by page over the eight banks (chip/interleave.py, docs/memory_map.md §6): the address
arithmetic, and the host's writes landing in the banks where the kernels' tt_noc.h looks for them."""
from __future__ import annotations

import numpy as np

from tt_backend.chip import interleave
from tt_backend.chip.grid import dram_bank
from tt_backend.runtime.emu.device import EmuDevice

PAGE = interleave.PAGE_BYTES


def test_bank_coordinates_are_the_grids_banks():
    assert [dram_bank(*interleave.bank_xy(b)) for b in range(8)] == list(range(8))


def test_page_i_of_an_aligned_buffer_is_in_bank_i_mod_8():
    base = 5 * interleave.BUFFER_ALIGN
    for i in range(20):
        assert interleave.locate(base + i * PAGE + 100) == (i % 8, (5 + i // 8) * PAGE + 100)


def test_bank_spans_cover_the_range_once_in_order():
    addr, size = 3 * PAGE - 200, 9 * PAGE + 333
    spans = interleave.bank_spans(addr, size)
    pieces = sorted(p for _, _, ps in spans for p in ps)
    assert pieces[0][0] == 0 and sum(n for _, n in pieces) == size
    assert all(a + n == b for (a, n), (b, _) in zip(pieces, pieces[1:]))
    for bank, off, ps in spans:            # each bank's share is one contiguous run of the bank
        assert all(interleave.locate(addr + p) == (bank, off + sum(n for _, n in ps[:k])) for k, (p, _) in enumerate(ps))


def test_the_emulators_banks_hold_the_pages():
    dev = EmuDevice()
    rng = np.random.default_rng(0)
    data = rng.integers(0, 256, 11 * PAGE + 77, dtype=np.uint8).tobytes()
    addr = 2 * interleave.BUFFER_ALIGN + 64
    dev.write_dram(addr, data)
    assert dev.read_dram(addr, len(data)) == data
    for i in range(11):                    # page k of the address space: bank k mod 8, offset (k div 8) pages
        k = (addr >> 12) + i
        first = max(k * PAGE, addr)
        got = dev.read_bank(interleave.bank_xy(k % 8), (k // 8) * PAGE + first % PAGE, 16)
        assert got == data[first - addr:first - addr + 16], i
