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


def room(sizes: dict[str, int], more: int = 0) -> int:
    """Bytes left after the regions in `sizes`, less the alignment padding `more` further regions may need."""
    return CAPACITY - l1_bytes(sizes) - more * ALIGN
