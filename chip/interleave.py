"""DRAM buffers interleaved page by page over the chip's eight banks: one address space for the host, the allocator
and the kernels, whose bytes live in all banks so that many cores reading one buffer share eight banks' bandwidth
instead of one's.

The layout (docs/memory_map.md §DRAM; tt-metal's interleaved buffers, where page i of a buffer is in bank i mod 8):
a DRAM address `a` is in page p = a // PAGE_BYTES; page p lives in bank p mod 8 at bank offset
(p // 8) * PAGE_BYTES + a mod PAGE_BYTES. The allocator starts every buffer at a multiple of BUFFER_ALIGN (eight
pages), so a buffer's page i is in bank i mod 8. Bank b is addressed at translated NoC coordinate
(17 + b // 4, 12 + 3 * (b mod 4) + b // 4): the first of its three endpoints in column 17, the second in column 18, so
that no two banks sit in one NoC row (a row's links would carry two banks' traffic, more than a link moves: 2 x 47
bytes per cycle against 64) (docs/launch_noc.md §1.2: the bank behind a
translated coordinate differs between ttsim and the card, which is invisible as long as the host and the kernels use
the same translated coordinates). A page offset keeps the address's low 12 bits, so the NoC's 64-byte congruence
between a DRAM and an L1 address holds per page as it does per buffer. The C side (templates/device/tt_noc.h) does the
same arithmetic with the constants of `c_defines`.

Leaf module (stdlib and the leaf chip/grid.py only).
"""
from __future__ import annotations

from typing import Callable

from tt_backend.chip.grid import DRAM_COLUMN, DRAM_Y0, ENDPOINTS_PER_BANK, N_BANKS, NOC_ROWS

PAGE_SHIFT = 12
PAGE_BYTES = 1 << PAGE_SHIFT
BUFFER_ALIGN = N_BANKS * PAGE_BYTES
# the translated DRAM coordinates (chip/grid.py): bank b is the (b mod 4)-th group of three endpoints of column b // 4
BANK_X0, BANK_Y0, BANK_Y_STEP = min(DRAM_COLUMN), DRAM_Y0, ENDPOINTS_PER_BANK
BANKS_PER_COLUMN = NOC_ROWS // ENDPOINTS_PER_BANK


def bank_xy(bank: int) -> tuple[int, int]:
    """Translated NoC coordinates the host and the kernels address bank `bank` (0..7) at."""
    column = bank // BANKS_PER_COLUMN
    return BANK_X0 + column, BANK_Y0 + BANK_Y_STEP * (bank % BANKS_PER_COLUMN) + column


BANK_XYS = tuple(bank_xy(b) for b in range(N_BANKS))


def locate(addr: int) -> tuple[int, int]:
    """(bank, bank offset) of DRAM address `addr`."""
    page = addr >> PAGE_SHIFT
    return page % N_BANKS, (page // N_BANKS << PAGE_SHIFT) | (addr & (PAGE_BYTES - 1))


def bank_spans(addr: int, size: int) -> list[tuple[int, int, list[tuple[int, int]]]]:
    """Where the bytes [addr, addr + size) are: per bank touched, (bank, bank offset, pieces), the pieces being
    (offset in the range, length) in order. A bank's pieces are one contiguous run of the bank (its consecutive pages
    of the range are consecutive in the bank), so the host moves each bank's share with one transfer."""
    spans: dict[int, tuple[int, list]] = {}
    pos = 0
    while pos < size:
        a = addr + pos
        n = min(size - pos, PAGE_BYTES - (a & (PAGE_BYTES - 1)))
        bank, off = locate(a)
        spans.setdefault(bank, (off, []))[1].append((pos, n))
        pos += n
    return [(bank, off, pieces) for bank, (off, pieces) in sorted(spans.items())]


def bank_shares(addr: int, size: int) -> list[tuple[int, int, int, int, int]]:
    """bank_spans in closed form, per bank touched: (bank, bank offset, column, start, length). The range's pages,
    counted from the one holding `addr`, laid out as rows of eight pages (page j at row j // 8, column j mod 8): a
    column is one bank's share, rows of whole pages but its first `start` bytes (column 0: `addr`'s offset in its page)
    and the bytes after the range's end; `length` bytes of it are the share, bank_spans' pieces of that bank joined.
    Sorted by bank, as bank_spans is. Eight entries at most, whatever the size (bank_spans makes one piece a page)."""
    if size <= 0:
        return []
    lead, first = addr & (PAGE_BYTES - 1), addr >> PAGE_SHIFT
    pages = (lead + size + PAGE_BYTES - 1) >> PAGE_SHIFT
    tail = pages * PAGE_BYTES - lead - size                  # bytes of the last page after the range
    shares = []
    for column in range(min(N_BANKS, pages)):
        rows = (pages - column + N_BANKS - 1) // N_BANKS
        start = lead if column == 0 else 0
        end = rows * PAGE_BYTES - (tail if (pages - 1 - column) % N_BANKS == 0 else 0)
        bank, off = locate(addr if column == 0 else (first + column) << PAGE_SHIFT)
        shares.append((bank, off, column, start, end - start))
    return sorted(shares)


def write(addr: int, data, write_bank: Callable[[tuple[int, int], int, bytes], None]) -> None:
    """Host write of `data` at DRAM address `addr`: one `write_bank(bank xy, bank offset, bytes)` per bank touched."""
    data = memoryview(data).cast("B")
    for bank, off, pieces in bank_spans(addr, len(data)):
        write_bank(BANK_XYS[bank], off, b"".join(data[p:p + n] for p, n in pieces))


def read(addr: int, size: int, read_bank: Callable[[tuple[int, int], int, int], bytes]) -> bytes:
    """Host read of `size` bytes at DRAM address `addr`: one `read_bank(bank xy, bank offset, bytes)` per bank."""
    out = bytearray(size)
    for bank, off, pieces in bank_spans(addr, size):
        got, at = memoryview(read_bank(BANK_XYS[bank], off, sum(n for _, n in pieces))), 0
        for p, n in pieces:
            out[p:p + n] = got[at:at + n]
            at += n
    return bytes(out)


def size_limit(bank_size: int) -> int:
    """The interleaved space eight banks of `bank_size` bytes hold, capped at 4 GiB (addresses travel as u32)."""
    return min(N_BANKS * (bank_size // PAGE_BYTES * PAGE_BYTES), 1 << 32)


def c_defines() -> dict[str, int]:
    """The constants tt_noc.h's address arithmetic uses (rendered into tt_layout.h)."""
    return {"DRAM_PAGE_SHIFT": PAGE_SHIFT, "DRAM_BANKS": N_BANKS, "DRAM_BANK_X0": BANK_X0, "DRAM_BANK_Y0": BANK_Y0,
            "DRAM_BANK_Y_STEP": BANK_Y_STEP, "DRAM_BANKS_PER_COLUMN": BANKS_PER_COLUMN}
