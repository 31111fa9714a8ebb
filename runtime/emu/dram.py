"""One DRAM bank (4 GiB address space), stored sparsely.

Like ttsim's anonymous mmap, untouched memory costs nothing and reads as zero: the bank is a dict of 1 MiB numpy pages
allocated on first write. Addresses at or beyond the bank size are EmuUndefined (ttsim: "DRAM read/write overrun").
"""
from __future__ import annotations

import numpy as np

from tt_backend.chip import layout
from tt_backend.chip.errors import EmuUndefined

PAGE_BITS = 20
PAGE_SIZE = 1 << PAGE_BITS


def as_bytes(data) -> np.ndarray:
    """bytes-like or numpy data as a flat uint8 array (a view where possible)."""
    if isinstance(data, np.ndarray):
        return np.ascontiguousarray(data).reshape(-1).view(np.uint8)
    return np.frombuffer(data, np.uint8)


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
