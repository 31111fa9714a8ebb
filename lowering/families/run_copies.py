"""Which runs of a `runs` walk the reader copies out of its staging window, for the launch model
(lowering/families/mover_cost.py). templates/blocks/read_runs.c.j2 copy_run reads a run straight into the CB slot with
one NoC read only when its DRAM address and its place in the slot are congruent mod 64 and it is at least
`direct_min` elements long (and DRAM and tile element sizes agree); every other run goes through the staging window
and is copied datum by datum (tt_copy32 / tt_copy16 or a converting loop). Buffers and CB slots are 64-byte aligned,
so the test depends only on each run's first element and its place in the tile: replayed here over the launch's first
tiles (the walk is periodic in the outer ranges, so a few tiles stand for all).
"""
from __future__ import annotations

from functools import lru_cache

from tt_backend.lowering.plan import TILE_ELEMS

SAMPLE_TILES = 8


@lru_cache(maxsize=512)
def copied_share(run: int, outer: tuple[tuple[int, int], ...], const: int, n_elements: int, esz: int, tsz: int,
                 direct_min: int, direct: bool) -> float:
    """The share of the first SAMPLE_TILES tiles' datums that a runs walk (runs of `run` consecutive elements, the
    run's first element const + sum(coef * o) over the `outer` ranges (size, coef), outermost first) copies from its
    window: all of them when the walk has no direct reads (`direct` False)."""
    end = min(n_elements, SAMPLE_TILES * TILE_ELEMS)
    if not direct or end <= 0:
        return 1.0
    copied, e = 0, 0
    while e < end:
        r, q = divmod(e, run)
        first, rest = const + q, r
        for size, coef in reversed(outer):
            rest, o = divmod(rest, size)
            first += coef * o
        i = e % TILE_ELEMS
        n = min(run - q, end - e, TILE_ELEMS - i)
        if (esz * first - tsz * i) % 64 or n < direct_min:
            copied += n
        e += n
    return copied / end
