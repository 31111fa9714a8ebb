"""One DRAM bank (4 GiB address space), stored sparsely.

Like ttsim's anonymous mmap, untouched memory costs nothing and reads as zero: the bank is a dict of 1 MiB numpy pages
allocated on first write. Addresses at or beyond the bank size are EmuUndefined (ttsim: "DRAM read/write overrun").
"""
from __future__ import annotations

import os

import numpy as np

from tt_backend.chip import interleave, layout
from tt_backend.chip.errors import EmuUndefined

PAGE_BITS = 20
PAGE_SIZE = 1 << PAGE_BITS
# The host's interleaved DRAM writes and reads of a range of VECTOR_MIN_PAGES pages or more move each bank's share with
# numpy (write_interleaved / read_interleaved: a launch's 1 MiB buffers are 256 pages, which interleave.write / read
# walk page by page in Python, ~1 ms a launch); shorter ranges, where numpy's fixed cost is larger, and
# TT_EMU_INTERLEAVE_VECTOR=0 keep interleave's, the reference. (numpy, not C: hence no _NATIVE in its name.)
INTERLEAVE_VECTOR = os.environ.get("TT_EMU_INTERLEAVE_VECTOR", "1") != "0"
VECTOR_MIN_PAGES = 8


def as_bytes(data) -> np.ndarray:
    """bytes-like or numpy data as a flat uint8 array (a view where possible)."""
    if isinstance(data, np.ndarray):
        return np.ascontiguousarray(data).reshape(-1).view(np.uint8)
    return np.frombuffer(data, np.uint8)


def _page_grid(addr: int, size: int) -> np.ndarray:
    """An uninitialised (rows, banks, page) uint8 array over the pages of [addr, addr + size), page j of the range (from
    the one holding `addr`) at [j // 8, j mod 8]: interleave.bank_shares' layout, whose column c is one bank's share."""
    pages = ((addr & (interleave.PAGE_BYTES - 1)) + size + interleave.PAGE_BYTES - 1) >> interleave.PAGE_SHIFT
    rows = (pages + interleave.N_BANKS - 1) // interleave.N_BANKS
    return np.empty((rows, interleave.N_BANKS, interleave.PAGE_BYTES), np.uint8)


def _share_rows(start: int, length: int) -> int:
    return (start + length + interleave.PAGE_BYTES - 1) >> interleave.PAGE_SHIFT


def write_interleaved(addr: int, data, write_bank) -> None:
    """interleave.write with each bank's share gathered by numpy: the same write_bank calls, in the same order, with
    the same bytes."""
    src = np.frombuffer(memoryview(data).cast("B"), np.uint8)
    grid = _page_grid(addr, src.size)
    lead = addr & (interleave.PAGE_BYTES - 1)
    grid.reshape(-1)[lead:lead + src.size] = src
    for bank, off, column, start, length in interleave.bank_shares(addr, src.size):
        share = grid[:_share_rows(start, length), column].reshape(-1)       # (a copy: the column is strided)
        write_bank(interleave.BANK_XYS[bank], off, share[start:start + length].tobytes())


def read_interleaved(addr: int, size: int, read_bank) -> bytes:
    """interleave.read with each bank's share scattered by numpy: the same read_bank calls, in the same order, and the
    same bytes."""
    grid = _page_grid(addr, size)
    for bank, off, column, start, length in interleave.bank_shares(addr, size):
        got = np.frombuffer(read_bank(interleave.BANK_XYS[bank], off, length), np.uint8)
        rows = _share_rows(start, length)
        if start or length != rows * interleave.PAGE_BYTES:      # a partial first or last page: pad to whole pages
            whole = np.empty(rows * interleave.PAGE_BYTES, np.uint8)
            whole[start:start + length] = got
            got = whole
        grid[:rows, column] = got.reshape(rows, interleave.PAGE_BYTES)
    lead = addr & (interleave.PAGE_BYTES - 1)
    return grid.reshape(-1)[lead:lead + size].tobytes()


def vector_worth(addr: int, size: int) -> bool:
    """Whether the host's interleaved access of [addr, addr + size) takes write_interleaved / read_interleaved."""
    return INTERLEAVE_VECTOR and (addr & (interleave.PAGE_BYTES - 1)) + size >= VECTOR_MIN_PAGES * interleave.PAGE_BYTES


class Dram:
    def __init__(self, size: int = layout.DRAM_BANK_SIZE):
        self.size = size
        self.pages: dict[int, np.ndarray] = {}

    def _check(self, addr: int, n: int, what: str) -> None:
        if addr < 0 or n < 0 or addr + n > self.size:
            raise EmuUndefined(f"DRAM {what} overrun: addr=0x{addr:X} len={n} (bank size 0x{self.size:X})")

    def _spans(self, addr: int, n: int):
        """(page index, offset in page, offset in the request, length) for each page the range touches."""
        done = 0
        while done < n:
            a = addr + done
            page, off = a >> PAGE_BITS, a & (PAGE_SIZE - 1)
            take = min(n - done, PAGE_SIZE - off)
            yield page, off, done, take
            done += take

    def read(self, addr: int, n: int) -> np.ndarray:
        """A fresh uint8 array of n bytes (never a view into the bank)."""
        self._check(addr, n, "read")
        out = np.zeros(n, np.uint8)
        for page, off, pos, take in self._spans(addr, n):
            p = self.pages.get(page)
            if p is not None:
                out[pos:pos + take] = p[off:off + take]
        return out

    def write(self, addr: int, data) -> None:
        src = as_bytes(data)
        n = src.size
        self._check(addr, n, "write")
        for page, off, pos, take in self._spans(addr, n):
            p = self.pages.get(page)
            if p is None:
                p = self.pages[page] = np.zeros(PAGE_SIZE, np.uint8)
            p[off:off + take] = src[pos:pos + take]

    def touched_bytes(self) -> int:
        return len(self.pages) * PAGE_SIZE
