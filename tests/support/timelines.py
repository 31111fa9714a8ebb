"""Checks every recorded timeline must pass (tests/emu/test_timeline.py, tests/e2e/test_observe.py): intervals given
as (lane, start, end, state) in emulated cycles since the launch began."""
from __future__ import annotations

from collections import defaultdict


def check_lanes(intervals, window: int) -> dict[str, dict[str, int]]:
    """Every interval is non-empty and inside [0, window]; the intervals of one lane never overlap; states are busy,
    stall or idle. Returns per lane the cycles in each state."""
    by_lane = defaultdict(list)
    for lane, start, end, state in intervals:
        assert 0 <= start < end <= window, (lane, start, end, window)
        assert state in ("busy", "stall", "idle"), state
        by_lane[lane].append((start, end, state))
    totals: dict[str, dict[str, int]] = {}
    for lane, ivs in by_lane.items():
        ivs.sort()
        for (_, e0, _), (s1, _, _) in zip(ivs, ivs[1:]):
            assert s1 >= e0, (lane, e0, s1)
        t = totals[lane] = defaultdict(int)
        for s, e, state in ivs:
            t[state] += e - s
    return totals


def recorded_spans(tx) -> tuple[list[tuple], int]:
    """A bare Tensix's recorded timeline (tensix_runs.mop_run(record=True)): its spans as (lane, start, end, state,
    reason) up to the end of thread 1's and the SFPU's work, and that end."""
    end = max(tx.tm.clock[1] + 1, tx.tm.sfpu.busy_until)
    return [(s.lane, s.start, s.end, s.state, s.reason) for s in tx.rec.spans(end, {})], end
