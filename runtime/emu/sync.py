"""The sync unit of the Tensix (SEMINIT.md, SEMPOST.md, SEMGET.md, SEMWAIT.md, STALLWAIT.md, ATGETM.md, ATRELM.md):
the eight semaphores (also reachable from RISC-V through MMIO), the mutexes, and the Wait Gate latches STALLWAIT /
SEMWAIT leave on a thread until their conditions are met. Mixed into tensix.Tensix."""
from __future__ import annotations

from collections import deque

from tt_backend.chip.errors import EmuDeadlock, EmuUnspecified
from tt_backend.runtime.emu.frontend import B6
from tt_backend.runtime.emu.thread_state import Latch

# per 8-bit semaphore mask (sem_sel), the semaphores it selects in order: SEMPOST / SEMGET / SEMINIT / a SEMWAIT latch
# and stamp_posts ask once per instruction
SEM_LISTS = tuple(tuple(i for i in range(8) if mask >> i & 1) for mask in range(256))


class SyncMixin:
    def _init_sync(self) -> None:
        self.sem_value = [0] * 8                   # ttsim reset state: Value 0, Max 0
        self.sem_max = [0] * 8
        # per semaphore the cycle of each post its value still counts, oldest first (SEMGET takes the oldest): a RISC-V
        # that reads the semaphore sees a post only from that cycle on (the threads run in host order, not in time)
        self.sem_posts: list[deque] = [deque() for _ in range(8)]
        self.mutex_holder: dict[int, int | None] = {0: None, 2: None, 3: None, 4: None}   # BH: 4 mutexes

    def sem_read(self, i: int) -> int:
        return self.sem_value[i]

    def sem_posted_at(self, i: int) -> int:
        """The cycle from which semaphore i's value is non-zero (its oldest counted post; 0 when it is zero)."""
        posts = self.sem_posts[i]
        return posts[0] if posts else 0

    def stamp_posts(self, mask: int, cycle: int) -> None:
        """The SEMPOST just executed on the semaphores of `mask` issued at `cycle` (known only after it executed)."""
        for i in SEM_LISTS[mask & 0xFF]:
            if self.sem_posts[i]:
                self.sem_posts[i][-1] = cycle

    def sem_mmio_write(self, i: int, value: int, t: int = 0) -> None:
        self.tm.event_t = max(self.tm.event_t, t)
        if value & 1:
            self._sem_get(i, "RISC-V store to semaphore (SEMGET)")
        else:
            self._sem_post(i, "RISC-V store to semaphore (SEMPOST)", t)

    def _sem_post(self, i: int, who: str | None, t: int = 0) -> None:
        """`who`: the poster for an error message; None: the Tensix instruction being executed (where())."""
        v = self.sem_value[i]
        if self.strict and v >= self.sem_max[i]:
            # ttsim: NonContractualBehavior sem_max (pf08); hardware ignores Max here and saturates at 15
            raise EmuUnspecified(f"{who or self.where()}: SEMPOST on semaphore {i} at Value {v} >= Max "
                                 f"{self.sem_max[i]}")
        if v < 15:
            self.sem_value[i] = v + 1
            self.sem_posts[i].append(t)

    def _sem_get(self, i: int, who: str | None) -> None:
        """`who` as _sem_post's."""
        v = self.sem_value[i]
        if v == 0:
            if self.strict:
                raise EmuUnspecified(f"{who or self.where()}: SEMGET on semaphore {i} at Value 0")
            return
        self.sem_value[i] = v - 1
        if self.sem_posts[i]:
            self.sem_posts[i].popleft()

    def SEMINIT(self, t, f):
        for i in SEM_LISTS[f["sem_sel"] & 0xFF]:
            self.sem_value[i] = f["init_value"]
            self.sem_max[i] = f["max_value"]
            self.sem_posts[i] = deque([0] * f["init_value"])

    def SEMPOST(self, t, f):
        for i in SEM_LISTS[f["sem_sel"] & 0xFF]:
            self._sem_post(i, None)

    def SEMGET(self, t, f):
        for i in SEM_LISTS[f["sem_sel"] & 0xFF]:
            self._sem_get(i, None)

    def SEMWAIT(self, t, f):
        w = self.current[1]
        if f["wait_sem_cond"]:
            latch = Latch("SEMWAIT", f["wait_sem_cond"], f["sem_sel"], f["stall_res"] or B6, w)
        else:  # SEMWAIT.md: no condition = STALLWAIT with the default condition mask
            latch = Latch("STALLWAIT", 0x0F, 0, f["stall_res"] or B6, w)
        self.threads[t].latch = latch

    def STALLWAIT(self, t, f):
        self.threads[t].latch = Latch("STALLWAIT", f["wait_res"] or 0x0F, 0, f["stall_res"] or B6, self.current[1])

    def poll_latches(self) -> None:
        # The Wait Gate re-evaluates its latch every cycle and forgets it once met, even with no instruction waiting.
        for t, th in enumerate(self.threads):
            if th.latch is not None and self.latch_unmet(t, th.latch) is None:
                th.latch = None

    def latch_unmet(self, t: int, latch: Latch) -> str | None:
        """None if every condition of the latch is met, else why the thread keeps waiting."""
        if latch.kind == "SEMWAIT":
            for i in SEM_LISTS[latch.sems & 0xFF]:
                v, m = self.sem_value[i], self.sem_max[i]
                if latch.cond & 1 and v == 0:
                    return f"SEMWAIT sem{i} (value 0) [word 0x{latch.word:08X}]"
                if latch.cond & 2 and v >= m:
                    return f"SEMWAIT sem{i} (value {v} >= max {m}) [word 0x{latch.word:08X}]"
            return None
        c = latch.cond
        # C0-C4, C9-C12: units and requests finish at issue in this model, so those conditions always hold.
        if not c & 0x1E0:       # (none of C5-C8: the reason below is built only for a condition that holds it)
            return None
        tail = f"[word 0x{latch.word:08X}]"
        if c & (1 << 5) and self.srca_valid[self.srca_unpack_bank]:
            return f"STALLWAIT C5: SrcA bank {self.srca_unpack_bank} not owned by the unpacker {tail}"
        if c & (1 << 6) and self.srcb_valid[self.srcb_unpack_bank]:
            return f"STALLWAIT C6: SrcB bank {self.srcb_unpack_bank} not owned by the unpacker {tail}"
        if c & (1 << 7) and not self.srca_valid[self.srca_matrix_bank]:
            return f"STALLWAIT C7: SrcA bank {self.srca_matrix_bank} not owned by the FPU {tail}"
        if c & (1 << 8) and not self.srcb_valid[self.srcb_matrix_bank]:
            return f"STALLWAIT C8: SrcB bank {self.srcb_matrix_bank} not owned by the FPU {tail}"
        return None

    def _mutex(self, f) -> int:
        i = f["mutex_index"]
        if i not in self.mutex_holder:
            # ATGETM.md: an invalid index waits forever; report it instead of hanging the tile
            raise EmuDeadlock(f"{self.where()}: mutex index {i} does not exist (BH has 0, 2, 3, 4): the thread "
                              f"would wait forever")
        return i

    def ATGETM(self, t, f):
        i = self._mutex(f)
        holder = self.mutex_holder[i]
        if holder is not None and holder != t:
            return f"ATGETM mutex {i} held by T{holder}"
        self.mutex_holder[i] = t

    def ATRELM(self, t, f):
        i = self._mutex(f)
        if self.mutex_holder[i] == t:      # releasing a mutex held by another thread changes nothing
            self.mutex_holder[i] = None
