"""The staging-window loads of a per-datum gather (templates/blocks/read_gather.c.j2 by_index), for the launch model
(lowering/families/mover_cost.py): the reader fetches each datum through its stream's window (tt_noc.h
tt_window_fetch), and a datum outside the window reloads it, one NoC read waited for, from the datum's 64-byte line
on for the window's size (less at the buffer's end). A buffer the window holds whole is loaded once per launch; a
larger one is reloaded as often as the walk leaves the window, which its index expression decides: a[:, ::2].T of a
3 x 8000 buffer jumps 32 KB per datum, so every datum reloads a 32 KB window.

The walk is replayed here on the host over one tile's datums (the launch's first tile: the index evaluated with
numpy, lowering/index.py), from an empty window, as the reader starts each launch; `window_loads` replays any walk
given its byte offsets (the SFPU matmul's gathered operands: sfpu_matmul_cost.py).
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from tt_backend.lowering.index import IndexExpr


@lru_cache(maxsize=512)
def tile_window_loads(index: IndexExpr, valid: IndexExpr | None, ranges: tuple[int, ...], datums: int, esz: int,
                      buf_bytes: int, window: int) -> tuple[int, int]:
    """(loads, bytes loaded) of the walk over the first `datums` elements of the iteration space; (0, 0) when the
    window holds the whole buffer (its one load is the launch's, not the tile's) or when the index reads loaded data
    (unknown on the host)."""
    if buf_bytes <= window or index.loads() or (valid is not None and valid.loads()):
        return 0, 0
    axes = tuple(np.asarray(a, np.int64) for a in np.unravel_index(np.arange(datums), ranges)) if ranges else ()
    at = np.broadcast_to(index.evaluate(axes), (datums,)).astype(np.int64) * esz
    if valid is not None:
        at = at[np.broadcast_to(valid.evaluate(axes), (datums,)).astype(bool)]
    return window_loads(at, esz, buf_bytes, window)


def window_loads(at: np.ndarray, esz: int, buf_bytes: int, window: int) -> tuple[int, int]:
    """(loads, bytes loaded) of fetching the datums at byte offsets `at` in order through a window of `window` bytes
    over a buffer of `buf_bytes`, from an empty window: a datum outside it reloads the window from the datum's
    64-byte line on (less at the buffer's end)."""
    loads, moved, lo, hi = 0, 0, 0, 0
    for a in at.tolist():
        if a < lo or a + esz > hi:
            lo = a & ~63
            hi = lo + min(buf_bytes - lo, window)
            loads, moved = loads + 1, moved + hi - lo
    return loads, moved
