"""The 16 RISC-V mailboxes of a Tensix tile (BH `BabyRISCV/Mailboxes.md`, "the same as those in Wormhole").

One FIFO of 32-bit values from each of B, T0, T1, T2 to each of B, T0, T1, T2; NCRISC, the NoC (so the host) and
the Tensix coprocessor have none. `TENSIX_MAILBOX{i}_BASE = 0xFFEC0000 + 0x1000 * i`: a *write* there by core X
pushes onto the X -> core_i mailbox, a *read* there by core Y pops from (or queries) the core_i -> Y mailbox, with
core_0..3 = B, T0, T1, T2. Any address inside the 4 KiB range may be used; for reads, `address & 4` selects the
non-blocking query (0 if empty, 1 otherwise) instead of the blocking pop.

Capacity (Mailboxes.md functional model): a push waits while the target mailbox holds 4 values or the four
mailboxes the writer can write hold 4 values in aggregate. On silicon the waiting write then sits in shared buffers
of undocumented depth while the RISC-V may run on; the emulator stalls the writer right there (the conservative
choice: a program that completes here relies on no buffering beyond the documented 4 values). ttsim models a
single slot per mailbox (docs/launch_noc.md §3.5); the emulator follows the documented hardware.

Reset (SoftReset.md): entering soft reset discards the contents of every mailbox the core can *write*.

Each entry carries the cycle its writer pushed it at, so a reader that was blocked resumes no earlier than that.

Not checked: ManualTTSync.md's hardware bug (a TRISC must not start a mailbox / PC_BUF load before its TTSync load has
finished; the emulator has no pipeline to see it) and the reordering MemoryOrdering.md allows between the read and
write sides (the in-order emulator processes every request in program order; a pop of a core's own empty X -> X
mailbox, which only a *later* store of that core could satisfy on silicon, is an EmuUnimplemented).
"""
from __future__ import annotations

from collections import deque

from tt_backend.chip import layout
from tt_backend.chip.errors import EmuUndefined, EmuUnimplemented

BASE = layout.MAILBOX_BASE   # TENSIX_MAILBOX0_BASE
SIZE = 0x4000
DEPTH = 4            # values per mailbox
WRITER_TOTAL = 4     # values in aggregate over the four mailboxes one core can write
ENDS = ("brisc", "trisc0", "trisc1", "trisc2")   # mailbox index i <-> ENDS[i]
SHORT = {"brisc": "B", "trisc0": "T0", "trisc1": "T1", "trisc2": "T2"}


class Mailboxes:
    def __init__(self) -> None:
        # (writer, reader) -> deque of (value, push cycle)
        self.fifo: dict[tuple[str, str], deque] = {(w, r): deque() for w in ENDS for r in ENDS}
        self.freed_at: dict[str, int] = {w: 0 for w in ENDS}   # cycle a writer's last occupied slot was freed
        self.pops = {r: 0 for r in ENDS}                       # values popped per reader (progress marker)

    @staticmethod
    def name(writer: str, reader: str) -> str:
        return f"{SHORT[writer]} to {SHORT[reader]}"

    def _end(self, who: str, addr: int, kind: str) -> str:
        if who not in SHORT:
            how = ("the NoC (and so the host) cannot reach mailboxes" if who in ("host", "noc")
                   else f"{who} has no mailboxes (unmapped)")
            raise EmuUndefined(f"{who}: mailbox {kind} at 0x{addr:08X}: {how} (BabyRISCV/Mailboxes.md)")
        return ENDS[(addr - BASE) >> 12]

    def held_by(self, writer: str) -> int:
        return sum(len(self.fifo[(writer, r)]) for r in ENDS)

    def write(self, who: str, addr: int, value: int, t: int) -> str | None:
        """Push `value` (at cycle `t`). Returns None when done, else the reason the writer must wait."""
        reader = self._end(who, addr, "write")
        q = self.fifo[(who, reader)]
        if len(q) >= DEPTH or self.held_by(who) >= WRITER_TOTAL:
            why = (f"mailbox {self.name(who, reader)} full ({DEPTH} values)" if len(q) >= DEPTH else
                   f"the mailboxes written by {SHORT[who]} hold {WRITER_TOTAL} values in aggregate")
            return (f"{why}; waiting for a pop (Mailboxes.md; silicon may buffer further writes in shared buffers "
                    f"of undocumented depth, the emulator stalls the writer here)")
        q.append((value & 0xFFFFFFFF, t))
        return None

    def read(self, who: str, addr: int) -> tuple[int | None, int, str, str]:
        """A read at `addr` by `who`: (value or None if it must block, push cycle of the popped value, reason,
        writer)."""
        writer = self._end(who, addr, "read")
        q = self.fifo[(writer, who)]
        if addr & 4:
            return (1 if q else 0), 0, "", writer
        if not q:
            if writer == who:
                # only `who` itself can ever push here; on silicon its own later store may satisfy this pop
                # ("Mailbox read from the future", MemoryOrdering.md), which an in-order emulator cannot reproduce
                raise EmuUnimplemented(f"{who}: blocking pop of its own empty {self.name(who, who)} mailbox at "
                                       f"0x{addr:08X}: only a later store by {who} itself could fill it (\"mailbox "
                                       f"read from the future\", BabyRISCV/MemoryOrdering.md), not modelled")
            return None, 0, f"mailbox read: {self.name(writer, who)} mailbox (0x{addr:08X}) is empty", writer
        value, t = q.popleft()
        self.pops[who] += 1
        return value, t, "", writer

    def note_freed(self, writer: str, t: int) -> None:
        self.freed_at[writer] = max(self.freed_at[writer], t)

    def discard_writable(self, core: str) -> None:
        """SoftReset.md: entering soft reset discards the mailboxes `core` can write."""
        if core in SHORT:
            for r in ENDS:
                self.fifo[(core, r)].clear()

    def state(self) -> dict[str, list[int]]:
        return {self.name(w, r): [v for v, _ in q] for (w, r), q in self.fifo.items() if q}
