"""The one L1 allocator: a kernel's buffers (circular buffers, staging windows, resident operands) are laid out in
order from layout.DATA_BASE, each starting 64-byte aligned (NoC transfers and the unpackers want aligned addresses),
up to layout.DATA_END. Families name the regions and their sizes; the allocator places them or says they do not fit."""
from __future__ import annotations

from tt_backend.chip import layout

ALIGN = 64
STAGING_BYTES = 32 * 1024       # per gathered stream: a window of the source buffer in L1
CAPACITY = layout.DATA_END - layout.DATA_BASE


def aligned(nbytes: int) -> int:
    return (nbytes + ALIGN - 1) & ~(ALIGN - 1)


def l1_bytes(sizes: dict[str, int]) -> int:
    """Bytes the regions take, laid out in order (each one aligned)."""
    return sum(aligned(n) for n in sizes.values())


def place(sizes: dict[str, int]) -> dict[str, int] | None:
    """{region: L1 address} for the regions in order, or None when they do not fit."""
    if l1_bytes(sizes) > CAPACITY:
        return None
    addr, l1 = layout.DATA_BASE, {}
    for name, n in sizes.items():
        l1[name] = addr
        addr += aligned(n)
    return l1


# A reduction's reader walks each output's reduce indices one output after the other (lowering/families/tile_streams.py,
# templates/blocks/tilize.c.j2 `reduction`), so a gathered buffer larger than its staging window is reloaded whenever
# the walk's strides span more than the window (a convolution gradient's second stage over its DRAM scratch: about
# twice per output). Such a window grows to hold the whole buffer (read once, then addressed directly) while L1 has
# room, up to this size.
MAX_RESIDENT_WINDOW = 512 * 1024


def grow_window(sizes: dict[str, int], name: str, nbytes: int) -> int | None:
    """The size staging window `name` of `sizes` takes to hold a buffer of `nbytes` whole (its start aligned down to
    64), when that is larger than the window, at most MAX_RESIDENT_WINDOW and fits L1 with the other regions; else
    None. `sizes` is updated."""
    want = aligned(nbytes + ALIGN)
    if not sizes[name] < want <= MAX_RESIDENT_WINDOW or l1_bytes(sizes) + want - sizes[name] > CAPACITY:
        return None
    sizes[name] = want
    return want


def room(sizes: dict[str, int], more: int = 0) -> int:
    """Bytes left after the regions in `sizes`, less the alignment padding `more` further regions may need."""
    return CAPACITY - l1_bytes(sizes) - more * ALIGN
