"""Per-lane timelines of one launch, recorded by the cycle model (cycles.py, tile.py) while someone asked for them.

A `TimelineRecorder` is attached to a Tile between `Tile.timeline_begin()` and `Tile.timeline_end()`; detached (the
default) every hook is one `is None` test inside a branch the cycle model takes anyway, so the emulator's speed
without a recorder is unchanged. What is recorded is what the cycle model already decides, never a second model:

* **cores** (brisc, ncrisc, trisc0-2): a core's time is its retired instructions plus the cycles it stalled
  (tile.py); each stall is recorded where it is charged, with its cause (Tensix instruction FIFO full, TTSync, an
  MMIO load's latency, NoC completion, a mailbox, a spin loop fast-forwarded). Busy = the rest of the core's time from
  its release to its last cycle, so a core's busy cycles are its retired instructions by construction of the model.
* **Tensix threads** (thread0-2, the instruction streams the TRISCs push): a thread issues at most one instruction a
  cycle; every gap between two issues is recorded with the constraint that set the later issue cycle (no instruction
  delivered yet = idle; the Wait Gate; a semaphore / Src bank wait; an FPU, unpacker or packer hazard; an SFPU
  auto-stall). Busy = issue cycles, so a thread's busy cycles are its issued instructions.
* **units**: unpack0/unpack1 and pack busy from an UNPACR/PACR's issue to the cycle its data is moved (L1 bandwidth
  rule), fpu for the cycles an FPU instruction occupies the matrix unit, sfpu while an issued SFPU instruction is in
  flight (1 cycle, 2 for the MAD class: `SfpuTiming.busy_until`), noc0/noc1 while an NIU's transfers are in flight.

The speed layer (runtime/emu/accel) skips the per-instruction walk for repeated SFPU bodies; there the gaps of the
repetition it walked are replicated in closed form (`marks` / `repeat`, `since` / `replay`), the same way it advances
the cycle counts.
"""
from __future__ import annotations

from dataclasses import dataclass

from tt_backend.chip import layout

THREADS = ("thread0", "thread1", "thread2")
UNIT_LANES = ("unpack0", "unpack1", "fpu", "sfpu", "pack", "noc0", "noc1")

# why a thread's next instruction issued later than the cycle after its previous one (TensixTiming.issue*)
IDLE_FRONTEND = "no instruction delivered yet (the RISC-V has not pushed it / MOP expander)"
WAIT_GATE = "Wait Gate: STALLWAIT/SEMWAIT condition"
BLOCKED = "blocked on a semaphore, Src bank or mutex"
SFPU_AUTO_STALL = "SFPU auto-stall (result of the previous instruction not ready)"
UNIT_WAIT = {"fpu": "FPU: Dst block written < 5 cycles ago or Src bank not unpacked yet",
             "unpack": "unpacker busy with the previous UNPACR", "pack": "packer busy with the previous PACR",
             "sync": "semaphore / mutex instruction", "plain": "frontend"}
# why a RISC-V core stalled (tile.py)
FIFO_FULL = "Tensix instruction FIFO full"
TTSYNC = "TTSync: waiting for its Tensix thread to finish"
MMIO_LATENCY = "MMIO load latency"
NOC_WAIT = "waiting for NoC transfers to complete"
MAILBOX_WAIT = "mailbox: waiting for a value / for room"
SEM_WAIT = "semaphore: the post it reads lands later (another thread's SEMPOST)"
SPIN = "polling memory nobody has changed yet (spin loop, time carried with the other cores)"
SPIN_WRITE = "polling L1 until the write it waits for (spin loop resumed at the write's cycle)"
LOAD_WAIT = "L1 load of a line written later in emulated time (the writer ran first on the host)"


@dataclass(frozen=True)
class Span:
    lane: str
    start: int          # emulated cycles since the launch window opened
    end: int
    state: str          # "busy", "stall" or "idle"
    reason: str = ""


class TimelineRecorder:
    """The raw record: absolute tile cycles, appended by the hooks; `spans()` turns it into lanes."""

    def __init__(self, start: int, tm):
        self.start = start
        self.core_stalls: dict[str, list] = {c: [] for c in layout.CORES}    # (start, end, reason)
        self.released: dict[str, int] = {}                                  # core -> cycle of its release
        self.thread_gaps: list[list] = [[], [], []]      # (start, end, reason), appended by TensixTiming.issue*
        self.pusher = [f"trisc{t}" for t in range(3)]                        # the core pushing each thread
        self.sfpu_idle: list = []                                            # (start, end)
        self.unit_busy: dict[str, list] = {u: [] for u in UNIT_LANES if u != "sfpu"}   # [start, end]
        self.tm = tm
        if tm is not None:
            self.thread0 = [(tm.clock[t], tm.issued[t], tm.first[t]) for t in range(3)]
            self.sfpu0 = tm.sfpu.busy_until

    # --- hooks (called only while attached, from branches the cycle model takes anyway) ---------------------------
    def core_stall(self, core: str, start: int, end: int, reason: str) -> None:
        if end > start:
            self.core_stalls[core].append((start, end, reason))

    def fifo_full(self, thread: int, push_t: int, accepted: int) -> None:
        self.core_stalls[self.pusher[thread]].append((push_t, accepted, FIFO_FULL))

    def busy(self, unit: str, start: int, end: int) -> None:
        """A unit is busy in [start, end): extends the last interval when they touch (the common case)."""
        lst = self.unit_busy[unit]
        if lst and start <= lst[-1][1]:
            if end > lst[-1][1]:
                lst[-1][1] = end
        elif end > start:
            lst.append([start, end])

    # --- the speed layer's closed forms (accel/batch_timing.py) --------------------------------------------------
    def marks(self, t: int) -> tuple[int, int]:
        return len(self.thread_gaps[t]), len(self.sfpu_idle)

    def repeat(self, t: int, m1: tuple, m2: tuple, n: int, delta: int) -> None:
        """The gaps recorded between marks m1 and m2 (one repetition of a periodic body), n more times, shifted by
        delta cycles per repetition."""
        for lst, a, b in ((self.thread_gaps[t], m1[0], m2[0]), (self.sfpu_idle, m1[1], m2[1])):
            one = lst[a:b]
            if one:
                lst.extend(tuple((g[0] + k * delta, g[1] + k * delta) + tuple(g[2:])) for k in range(1, n + 1)
                           for g in one)

    def since(self, t: int, m: tuple, base: int, clock0: int, busy0: int) -> tuple:
        """What a memoised batch recorded since mark m, relative to its base B: the thread's gaps, its first issue
        cycle and the SFPU's idle gaps. The SFPU gap ending at the first issue starts at the SFPU's busy_until from
        before the batch (busy0), an absolute time the memo's key does not fix: it is left out and `replay` rebuilds
        it from the busy_until it finds. (clock0: the thread's clock before the batch.)"""
        gaps = self.thread_gaps[t][m[0]:]
        first = gaps[0][1] if gaps and gaps[0][0] == clock0 + 1 else clock0 + 1
        idle = self.sfpu_idle[m[1]:]
        if idle and idle[0] == (busy0, first):
            idle = idle[1:]
        return (tuple((g[0] - base, g[1] - base, g[2]) for g in gaps), first - base,
                tuple((g[0] - base, g[1] - base) for g in idle))

    def replay(self, t: int, rel: tuple, base: int, busy_until: int) -> None:
        """since()'s record at a new base B (busy_until: the SFPU's, before the batch)."""
        gaps, first, idle = rel
        self.thread_gaps[t].extend((g[0] + base, g[1] + base, g[2]) for g in gaps)
        if busy_until < base + first:
            self.sfpu_idle.append((busy_until, base + first))
        self.sfpu_idle.extend((g[0] + base, g[1] + base) for g in idle)

    # --- the result -------------------------------------------------------------------------------------------
    def spans(self, end: int, core_end: dict[str, int]) -> list[Span]:
        """Every lane's intervals within the window [start, end), relative to its start, in time order per lane.
        core_end: each core's cycle count (tile.cycles) at the end."""
        lo, out = self.start, []

        def emit(lane: str, a: int, b: int, state: str, reason: str = "") -> None:
            a, b = max(a, lo), min(b, end)
            if b > a:
                out.append(Span(lane, a - lo, b - lo, state, reason))

        for core, rel in self.released.items():
            _fill(emit, core, rel, core_end[core], [(a, b, "stall", r) for a, b, r in self.core_stalls[core]])
        tm = self.tm
        if tm is not None:
            for t in range(3):
                clock0, issued0, first0 = self.thread0[t]
                if tm.issued[t] == issued0:
                    continue
                begin = clock0 + 1 if first0 is not None else tm.first[t]
                gaps = [(a, b, "idle" if r == IDLE_FRONTEND else "stall", r) for a, b, r in self.thread_gaps[t]]
                _fill(emit, THREADS[t], begin, tm.clock[t] + 1, gaps)
            hi = tm.sfpu.busy_until
            if hi > self.sfpu0:
                _fill(emit, "sfpu", self.sfpu0, hi, [(a, b, "idle", "") for a, b in self.sfpu_idle])
            for unit, lst in self.unit_busy.items():
                for a, b in _merged(lst):
                    emit(unit, a, b, "busy")
        return out


def _fill(emit, lane: str, begin: int, end: int, gaps: list) -> None:
    """Lane [begin, end): the gaps as recorded, busy in between."""
    t = begin
    for a, b, state, reason in sorted(gaps):
        a = max(a, begin)
        if a > t:
            emit(lane, t, a, "busy")
        if b > a:
            emit(lane, a, b, state, reason)
        t = max(t, b)
    if end > t:
        emit(lane, t, end, "busy")


def _merged(intervals: list) -> list:
    """Sorted, overlapping or touching intervals joined (work issued by several threads can arrive out of order)."""
    out: list = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out
