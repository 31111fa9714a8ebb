"""Per-core timelines of one kernel launch, written as a Chrome/Perfetto trace (`trace.json` next to report.json under
TT_DUMP; open it in ui.perfetto.dev or chrome://tracing).

`Timeline` is the interface: per lane (a core such as `trisc1`, or later a Tensix unit such as `unpack0`, `fpu`,
`sfpu`, `pack`, `noc0`) a list of `Interval`s in emulated cycles since the launch released the cores, each busy or
stalled (with the reason). Whoever knows what happened when fills one in; `chrome_trace` and `write` turn it into the
file. Today's sources:

* `from_emulator_totals`: the emulator's `stats()` before and after the launch give each core's total cycles (retired
  instructions plus stall cycles, runtime/emu/cycles.py) but not when within the launch they were spent. So each core
  gets one interval from its release to the cycle it finished, labelled as a total, with its instruction and stall
  counts as arguments; the trace says that the per-interval timeline is not recorded yet.
* `without_cycle_model`: ttsim and cards have no cycle model. The trace says so and shows only the host's wall time of
  the launch (in real microseconds), rather than inventing cycles.

A recorder in the emulator that produces real per-unit intervals plugs in as another constructor of `Timeline` (with
`totals_only=False`); the same Timeline is what tinygrad's profiler events (PROFILE=1, VIZ=1) will be made from.

Time axis: Chrome's trace format counts in microseconds. With a cycle model one trace microsecond is one emulated
cycle (no clock frequency is assumed); without one, the axis is the host's real time. `time_unit` in the file says
which.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from tt_backend import dump
from tt_backend.chip import layout
from tt_backend.placement_eval import measured_cycles

TRACE_NAME = "trace.json"
CYCLES_UNIT = "1 trace microsecond = 1 emulated cycle (no clock frequency assumed)"
HOST_UNIT = "microseconds of host wall time"


@dataclass(frozen=True)
class Interval:
    lane: str               # a core (layout.CORES) or a Tensix unit
    start: int              # emulated cycles since the launch released the cores
    end: int
    state: str = "busy"     # "busy" or "stall"
    reason: str = ""        # what a stall waited for
    args: dict = field(default_factory=dict)


@dataclass
class Timeline:
    kernel: str
    target: str
    cycle_model: bool                   # False: ttsim / a card, no emulated cycles exist
    intervals: list[Interval]
    note: str                           # what the trace does and does not show, in words
    totals_only: bool = True            # one interval per lane = its total, not when the work happened
    wall_s: float | None = None         # the host's wall time of the launch

    def busy_cycles(self) -> dict[str, int]:
        """Per lane: the cycles of its busy intervals."""
        out: dict[str, int] = {}
        for iv in self.intervals:
            if iv.state == "busy":
                out[iv.lane] = out.get(iv.lane, 0) + iv.end - iv.start
        return out


def from_emulator_totals(kernel: str, target: str, stats: tuple[dict, dict], wall_s: float | None = None) -> Timeline:
    """stats = the emulator's stats() before and after the launch (what report.json's measured_cycles come from)."""
    before, after = stats
    cycles = measured_cycles(stats)
    intervals = []
    for core in layout.CORES:
        if not cycles.get(core):
            continue
        instret = int(after["instructions"][core]) - int(before["instructions"].get(core, 0))
        intervals.append(Interval(core, 0, cycles[core], args={
            "total cycles": cycles[core], "instructions retired": instret,
            "stall cycles": int(after["stall_cycles"].get(core, 0))}))
    note = ("per-core totals from the emulator's cycle model: each core's bar spans its release to the cycle it "
            "finished (instructions retired + stall cycles); when within the launch each unit was busy or stalled is "
            "not recorded yet")
    return Timeline(kernel, target, True, intervals, note, totals_only=True, wall_s=wall_s)


def without_cycle_model(kernel: str, target: str, wall_s: float) -> Timeline:
    note = (f"{target} has no cycle model: no per-core or per-unit timeline exists for this launch; the only bar is the "
            f"host's wall time of the launch")
    return Timeline(kernel, target, False, [], note, totals_only=True, wall_s=wall_s)


def _meta(pid: int, tid: int | None, what: str, name: str) -> dict:
    ev = {"ph": "M", "pid": pid, "name": what, "args": {"name": name}}
    if tid is not None:
        ev["tid"] = tid
    return ev


def chrome_trace(tl: Timeline) -> dict:
    """The Chrome trace-event JSON object (process = the kernel, one thread per lane, cores first in layout order)."""
    pid = 1
    lanes = sorted({iv.lane for iv in tl.intervals},
                   key=lambda n: (layout.CORES.index(n) if n in layout.CORES else len(layout.CORES), n))
    tid = {lane: k + 1 for k, lane in enumerate(lanes)}
    what = "per-core totals" if tl.totals_only else "timeline"
    title = f"{tl.kernel} on {tl.target}: " + (what if tl.cycle_model else "no cycle model")
    events = [_meta(pid, None, "process_name", title)]
    events += [_meta(pid, tid[lane], "thread_name", lane) for lane in lanes]
    for iv in tl.intervals:
        name = (f"{iv.lane}: {iv.end - iv.start} cycles (total)" if tl.totals_only
                else iv.state + (f": {iv.reason}" if iv.reason else ""))
        events.append({"ph": "X", "pid": pid, "tid": tid[iv.lane], "name": name, "cat": iv.state,
                       "ts": iv.start, "dur": iv.end - iv.start, "args": dict(iv.args)})
    if not tl.cycle_model and tl.wall_s is not None:
        events.append(_meta(pid, 1, "thread_name", "host"))
        events.append({"ph": "X", "pid": pid, "tid": 1, "name": "launch (host wall time)", "cat": "host",
                       "ts": 0, "dur": round(tl.wall_s * 1e6, 3), "args": {}})
    return {"traceEvents": events, "displayTimeUnit": "ns",
            "otherData": {"kernel": tl.kernel, "target": tl.target, "cycle_model": tl.cycle_model,
                          "totals_only": tl.totals_only, "time_unit": CYCLES_UNIT if tl.cycle_model else HOST_UNIT,
                          "note": tl.note, "host_wall_s": tl.wall_s}}


def write(tl: Timeline, directory: str | Path) -> Path | None:
    """trace.json in the kernel's dump directory, replaced whole; None when that directory was never written (an
    unwritable TT_DUMP has already been reported once by tt_backend.dump)."""
    if not Path(directory).is_dir():
        return None
    path = Path(directory) / TRACE_NAME
    dump.replace_text(path, json.dumps(chrome_trace(tl), indent=1))
    return path


def from_launch(kernel: str, target: str, stats: tuple | None, wall_s: float) -> Timeline:
    """The best timeline today's sources give for one launch (stats: before/after stats(), None without a cycle
    model)."""
    if stats is not None and measured_cycles(stats) is not None:
        return from_emulator_totals(kernel, target, stats, wall_s)
    return without_cycle_model(kernel, target, wall_s)
