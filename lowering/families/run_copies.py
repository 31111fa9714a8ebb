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


def _runs(run: int, outer: tuple[tuple[int, int], ...], const: int, end: int):
    """(first element, place in its tile, length) of each run cut at the tiles' edges, up to element `end`."""
    e = 0
    while e < end:
        r, q = divmod(e, run)
        first, rest = const + q, r
        for size, coef in reversed(outer):
            rest, o = divmod(rest, size)
            first += coef * o
        i = e % TILE_ELEMS
        n = min(run - q, end - e, TILE_ELEMS - i)
        yield first, i, n
        e += n


@lru_cache(maxsize=512)
def copied_share(run: int, outer: tuple[tuple[int, int], ...], const: int, n_elements: int, esz: int, tsz: int,
                 direct_min: int, direct: bool) -> float:
    """The share of the first SAMPLE_TILES tiles' datums that a runs walk (runs of `run` consecutive elements, the
    run's first element const + sum(coef * o) over the `outer` ranges (size, coef), outermost first) copies from its
    window: all of them when the walk has no direct reads (`direct` False)."""
    end = min(n_elements, SAMPLE_TILES * TILE_ELEMS)
    if not direct or end <= 0:
        return 1.0
    copied = sum(n for first, i, n in _runs(run, outer, const, end) if (esz * first - tsz * i) % 64 or n < direct_min)
    return copied / end


@lru_cache(maxsize=512)
def split_share(run: int, outer: tuple[tuple[int, int], ...], const: int, n_elements: int) -> float:
    """Of a halfword walk (bf16 in DRAM and in the tile), the share of the first SAMPLE_TILES tiles' datums in runs
    whose DRAM address and place in the slot differ in their halfword parity: tt_copy16 moves those halfword by
    halfword, the others a word at a time."""
    end = min(n_elements, SAMPLE_TILES * TILE_ELEMS)
    return sum(n for first, i, n in _runs(run, outer, const, end) if (first - i) % 2) / max(1, end)
