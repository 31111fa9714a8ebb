"""Per-core timelines of one kernel launch, written as a Chrome/Perfetto trace (`trace.json` next to report.json under
TT_DUMP; open it in ui.perfetto.dev or chrome://tracing).

`Timeline` is the interface: per lane (a RISC-V core such as `trisc1`, a Tensix thread `thread0-2`, a unit `unpack0`,
`unpack1`, `fpu`, `sfpu`, `pack`, `noc0`, `noc1`) a list of `Interval`s in emulated cycles since the launch began,
each busy, stalled (with the reason) or idle. `chrome_trace` and `write` turn it into the file; tt_backend/profiler.py
turns the same Timeline into tinygrad's profiler events (PROFILE=1, VIZ=1). The sources, best first:

* `from_recording`: the emulator's timeline recorder (runtime/emu/timeline.py) ran during the launch: every lane's
  intervals as the cycle model decided them. A core's busy cycles are its retired instructions and busy + stalled its
  cycles in report.json (`measured_cycles`); a thread's busy cycles are its issued instructions.
* `from_emulator_totals`: only the emulator's `stats()` before and after the launch (a device without the recorder):
  each core gets one interval from its release to the cycle it finished, labelled as a total.
* `without_cycle_model`: ttsim and cards have no cycle model. The trace says so and shows only the host's wall time of
  the launch (in real microseconds), rather than inventing cycles.

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


# lanes in the order a reader scans them: the RISC-V cores, the Tensix threads they feed, the units
LANES = (*layout.CORES, "thread0", "thread1", "thread2", "unpack0", "unpack1", "fpu", "sfpu", "pack", "noc0", "noc1")


UNPACK_LANES = ("unpack0", "unpack1")


def lane_order(lane: str) -> tuple:
    return (LANES.index(lane) if lane in LANES else len(LANES), lane)


@dataclass(frozen=True)
class Interval:
    lane: str               # a core (layout.CORES), a Tensix thread or unit (LANES)
    start: int              # emulated cycles since the launch began
    end: int
    state: str = "busy"     # "busy", "stall" or "idle"
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
    counts: dict = field(default_factory=dict)   # what the emulator counted in the launch, to check the lanes against

    def busy_cycles(self) -> dict[str, int]:
        """Per lane: the cycles of its busy intervals."""
        return self.cycles_in("busy")

    def cycles_in(self, state: str) -> dict[str, int]:
        out: dict[str, int] = {}
        for iv in self.intervals:
            if iv.state == state:
                out[iv.lane] = out.get(iv.lane, 0) + iv.end - iv.start
        return out

    def lanes(self) -> list[str]:
        return sorted({iv.lane for iv in self.intervals}, key=lane_order)

    def compute_span(self) -> int | None:
        """The compute part of the launch L1 to L1, as issue 10 measures it against silicon's hand-written kernels:
        from the first unpacker read to the end of the last packer write (cycles); None when nothing was both
        unpacked and packed (a totals-only or cycle-free timeline, a mover-only kernel)."""
        unpack = [iv.start for iv in self.intervals if iv.state == "busy" and iv.lane in UNPACK_LANES]
        pack = [iv.end for iv in self.intervals if iv.state == "busy" and iv.lane == "pack"]
        return max(pack) - min(unpack) if unpack and pack and not self.totals_only else None


def launch_counts(stats: tuple | None) -> dict:
    """From the emulator's stats() before a kernel and after each of its launches: RISC-V instructions retired per
    core, Tensix instructions issued per thread, and each core's cycles (report.json's measured_cycles)."""
    cycles = measured_cycles(stats)
    if cycles is None:
        return {}
    a, b = stats[0], stats[-1]
    issued = [y - x for x, y in zip(a["tensix_cycles"]["issued"], b["tensix_cycles"]["issued"])] \
        if a.get("tensix_cycles") and b.get("tensix_cycles") else None
    return {"instructions retired": {c: int(b["instructions"][c]) - int(a["instructions"].get(c, 0))
                                     for c in b["instructions"]},
            "tensix instructions issued": issued,
            "cycles": {c: v for c, v in cycles.items() if c != "max"}}


def from_recording(kernel: str, target: str, recording: dict, wall_s: float | None = None,
                   stats: tuple | None = None) -> Timeline:
    """recording = the emulator's timeline_end() for the launch (runtime/emu/timeline.py); stats (optional) = its
    stats() before/after, whose counts go into the trace beside the lanes."""
    intervals = [Interval(sp.lane, sp.start, sp.end, sp.state, sp.reason) for sp in recording["spans"]]
    note = ("the emulator's cycle model, recorded per lane: RISC-V cores (busy = retiring instructions; stalls with "
            "their cause), Tensix threads (busy = issuing; gaps with the constraint that delayed the next issue), and "
            "the unpackers, FPU, SFPU, packer and NIUs (busy while they hold work)")
    return Timeline(kernel, target, True, intervals, note, totals_only=False, wall_s=wall_s,
                    counts={"window cycles": recording["cycles"], **launch_counts(stats)})


def from_emulator_totals(kernel: str, target: str, stats: tuple[dict, ...], wall_s: float | None = None) -> Timeline:
    """stats = the emulator's stats() before the kernel and after each of its launches (what report.json's
    measured_cycles come from)."""
    before, after = stats[0], stats[-1]
    cycles = measured_cycles(stats)
    intervals = []
    for core in layout.CORES:
        if not cycles.get(core):
            continue
        instret = int(after["instructions"][core]) - int(before["instructions"].get(core, 0))
        intervals.append(Interval(core, 0, cycles[core], args={
            "total cycles": cycles[core], "instructions retired": instret,
            "stall cycles": sum(int(s["stall_cycles"].get(core, 0)) for s in stats[1:])}))
    note = ("per-core totals from the emulator's cycle model: each core's bar spans its release to the cycle it "
            "finished (instructions retired + stall cycles); this device recorded no timeline, so when within the "
            "launch each unit was busy or stalled is not known")
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
    lanes = tl.lanes()
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
                          "note": tl.note, "host_wall_s": tl.wall_s, "counts": tl.counts,
                          "compute_span_cycles": tl.compute_span()}}


def write(tl: Timeline, directory: str | Path) -> Path | None:
    """trace.json in the kernel's dump directory, replaced whole; None when that directory was never written (an
    unwritable TT_DUMP has already been reported once by tt_backend.dump)."""
    if not Path(directory).is_dir():
        return None
    path = Path(directory) / TRACE_NAME
    dump.replace_text(path, to_json(chrome_trace(tl)))
    return path


def to_json(trace: dict) -> str:
    """One event per line (readable, diffable) without json's indent= (which turns its C encoder off: 5x slower on
    the ~10^4-10^5 events of a recorded launch)."""
    events = ",\n".join(json.dumps(e) for e in trace["traceEvents"])
    rest = ",\n".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in trace.items() if k != "traceEvents")
    return f'{{"traceEvents": [\n{events}\n],\n{rest}\n}}\n'


def from_launch(kernel: str, target: str, stats: tuple | None, wall_s: float,
                recording: dict | None = None) -> Timeline:
    """The best timeline the sources give for one kernel (stats: stats() before it and after each of its launches,
    None without a cycle model; recording: the emulator's timeline_end(), None when the device has no recorder)."""
    if recording is not None:
        return from_recording(kernel, target, recording, wall_s, stats)
    if stats is not None and measured_cycles(stats) is not None:
        return from_emulator_totals(kernel, target, stats, wall_s)
    return without_cycle_model(kernel, target, wall_s)
