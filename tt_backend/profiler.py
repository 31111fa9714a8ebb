"""TT launches in tinygrad's own profiler (PROFILE=1, and VIZ=1 which shows it): one range per launch on the device's
row, like every tinygrad device, plus one row per lane of the launch's `trace.Timeline` when the emulator recorded
one: `TT core brisc` .. `TT core trisc2`, `TT thread0` .. `TT thread2`, `TT unit fpu`, `TT unit sfpu`, ... (VIZ sorts
rows by name; the group word keeps cores, threads and units together).

tinygrad (0.14, tinygrad/device.py and tinygrad/viz/serve.py) collects `ProfileRangeEvent(device, name, st, en,
profile_key)` in `Compiled.profile_events`, writes them at exit and draws one row per `device` string, with times in
microseconds whose start is truncated to a whole microsecond. Emulated cycles are far finer than a microsecond of
1.35 GHz silicon, so the lane rows count **one display microsecond per emulated cycle**. Each launch's lanes start
where its host launch started, or right after the previous launch's lanes when those are still being drawn (so
launches never overlap); the launch's own range on the `TT` row is host wall time, and its name says how many emulated
cycles it took. Without a cycle model (ttsim, a card) only that host range exists, named as such.
"""
from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING

from tinygrad.device import Compiled
from tinygrad.helpers import PROFILE, ProfileRangeEvent

from tt_backend.chip import layout

if TYPE_CHECKING:     # ops_tt imports this module at its top: trace's imports are paid only by launches that report
    from tt_backend.trace import Timeline

_lanes_free_at: dict[str, Decimal] = {}      # per device row: the display time its lanes are drawn up to


def enabled() -> bool:
    return bool(PROFILE)


def lane_row(device: str, lane: str) -> str:
    """The profiler row of one lane of `device` (e.g. "TT core trisc1", "TT thread1", "TT unit sfpu")."""
    if lane.startswith("thread"):
        return f"{device} {lane}"
    return f"{device} {'core' if lane in layout.CORES else 'unit'} {lane}"


def add_launch(device: str, tl: Timeline, host_st: Decimal, host_en: Decimal, profile_key: bytes | None) -> None:
    """The profiler events of one launch (host_st / host_en: tinygrad's perf_counter_us around it)."""
    drawn = max((iv.end for iv in tl.intervals), default=0)
    cycles = max(tl.counts.get("cycles", {}).values(), default=drawn)     # the slowest core: report.json's figure
    what = f"{cycles} emulated cycles" if tl.cycle_model else f"{tl.target}: no cycle model, host time only"
    events: list = [ProfileRangeEvent(device, f"{tl.kernel} ({what})", host_st, host_en, profile_key)]
    if tl.cycle_model and not tl.totals_only and drawn:
        base = max(host_st, _lanes_free_at.get(device, Decimal(0)))
        for iv in tl.intervals:
            name = iv.state + (f": {iv.reason}" if iv.reason else "")
            events.append(ProfileRangeEvent(lane_row(device, iv.lane), name, base + iv.start, base + iv.end))
        _lanes_free_at[device] = base + drawn
    Compiled.profile_events += events
