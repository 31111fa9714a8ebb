"""Disjoint half-open byte ranges, each carrying a tag: the bookkeeping of tt_backend.schedule_guard, which marks byte
ranges of a tinygrad base Buffer (not filled, to be uploaded again). Three questions: mark [lo, hi), what overlaps
[lo, hi), and forget [lo, hi) (a write), which may cut an older range in two."""
from __future__ import annotations


class RangeTags:
    __slots__ = ("items",)

    def __init__(self):
        self.items: list[tuple[int, int, object]] = []     # (lo, hi, tag), pairwise disjoint, unordered

    def __bool__(self) -> bool: return bool(self.items)

    def __repr__(self): return f"RangeTags({self.items})"

    def add(self, lo: int, hi: int, tag: object) -> None:
        """Tag [lo, hi); the newest tag wins where it overlaps older ones."""
        self.remove(lo, hi)
        if lo < hi: self.items.append((lo, hi, tag))

    def overlapping(self, lo: int, hi: int) -> list[tuple[int, int, object]]:
        return [(a, b, t) for a, b, t in self.items if a < hi and lo < b]

    def remove(self, lo: int, hi: int) -> None:
        """Forget [lo, hi): ranges inside it go, ranges across its ends keep their outside parts."""
        kept = []
        for a, b, t in self.items:
            if b <= lo or hi <= a:
                kept.append((a, b, t))
                continue
            if a < lo: kept.append((a, lo, t))
            if hi < b: kept.append((hi, b, t))
        self.items = kept
