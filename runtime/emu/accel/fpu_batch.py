"""MVMUL runs (the speed layer's FPU path): a matmul's K block is a run of back-to-back MVMUL words a core pushes in
one go (`.ttinsn` words of one RISC-V basic block, Tensix.push_many), e.g. 16 per fidelity phase. Each MVMUL is issued
and executed as usual - Wait Gate, bank checks, cycle model, RWC address modifiers, bank release - except its data
effect: the handler records (SrcA rows, SrcB rows, Dst row, phase) in `mm_record`, and when the run ends (or raises)
all recorded steps run at once (fpu_math.mvmul19_batch: products and group sums of every step in one numpy pass,
accumulation in waves of distinct Dst rows). Nothing can observe Dst or the Src rows in between: during the run only
this thread's MVMULs execute (push drains the pushing thread alone), MVMUL reads only its Src rows and Dst block, and
no MVMUL writes Src. Only the common case records (fp32 Dst, 8-bit-exponent sources, no INT8 math, MVMUL's own row
rules); anything else runs through the reference handler, also inside a run. Mixed into tensix.Tensix.

Where tile_native (the tile words' data in C) is loaded, each MVMUL of that common case runs its numerics in C as it
executes, ahead of the recording, so nothing is recorded: this batching is then the path of TT_EMU_TILE_NATIVE=0 and
of hosts without the C part (its tests switch tile_native off).
"""
from __future__ import annotations

import numpy as np

from tt_backend.chip.numerics import fpu_math as fm
from tt_backend.runtime.emu.accel import deferral, native

BATCH_MVMUL = True       # tests turn it off to compare with the per-instruction handler
NATIVE_MVMUL = True      # the runs' numerics in C (accel/native.py) where it is built; tests compare with numpy's


class FpuBatchMixin:
    def _init_fpu_batch(self) -> None:
        self.mm_record: list | None = None       # recorded MVMUL steps while a run is pushed, else None
        self._mm_runs: dict[tuple, tuple] = {}   # pushed words -> ((start, end), ...) of their MVMUL runs (>= 2)

    def push_many(self, thread: int, words: tuple, t: int) -> int:
        """push_many with every run of two or more MVMUL words pushed with recording on, then executed at once."""
        if not BATCH_MVMUL:
            return super().push_many(thread, words, t)
        runs = self._mm_runs.get(words)
        if runs is None:
            runs = self._mm_runs[words] = self._mvmul_runs(words)
        if not runs:
            return super().push_many(thread, words, t)
        done = 0
        for lo, hi in runs:
            if lo > done:
                t = self._push_slice(thread, words, done, lo, t)
            self.mm_record = []
            try:
                t = self._push_slice(thread, words, lo, hi, t)
            finally:
                self.flush_mvmul()
            done = hi
        return self._push_slice(thread, words, done, len(words), t) if done < len(words) else t

    def _push_slice(self, thread: int, words: tuple, lo: int, hi: int, t: int) -> int:
        try:
            return super().push_many(thread, words[lo:hi], t)
        except BaseException:
            self.pm_done += lo               # (relative to the slice)
            raise

    def _mvmul_runs(self, words: tuple) -> tuple:
        runs, i, n = [], 0, len(words)
        while i < n:
            j = i
            while j < n and self._is_mvmul(words[j]):
                j += 1
            if j - i >= 2:
                runs.append((i, j))
            i = j + 1
        return tuple(runs)

    def _is_mvmul(self, w: int) -> bool:
        try:
            return self.decode(w & 0xFFFFFFFF)[0] == "MVMUL"
        except Exception:         # an undecodable word is the reference path's error, raised in order
            return False

    def record_mvmul(self, a, b, fa: int, fb: int, row: int, phase: int) -> None:
        """The handler's data effect of one MVMUL (SrcA rows a, SrcB rows b, Dst rows row..row+7), run at the flush."""
        if self.mm_record and self.mm_record[0][2:4] != (fa, fb):
            self.flush_mvmul(keep=True)          # (a change of Src formats inside a run: the steps so far first)
        self.mm_record.append((a, b, fa, fb, row, phase))

    def flush_mvmul(self, keep: bool = False) -> None:
        """Execute the recorded MVMUL steps in order (fpu_math.mvmul19_batch); recording goes on if `keep`."""
        recs, self.mm_record = self.mm_record, ([] if keep else None)
        if not recs:
            return
        blocks = sorted({r[4] for r in recs})
        slot = {row: i for i, row in enumerate(blocks)}
        fa, fb = recs[0][2], recs[0][3]
        dst = self.dst
        old = np.stack([dst.rows32[row:row + 8] for row in blocks])
        srca, srcb = np.stack([r[0] for r in recs]), np.stack([r[1] for r in recs])
        phases, slots = [r[5] for r in recs], [slot[r[4]] for r in recs]
        new = native.mvmul_steps(srca, srcb, fa, fb, phases, slots, old) if NATIVE_MVMUL else None
        if new is None:
            new = fm.mvmul19_batch(fm.src19(srca, fa), fm.src19(srcb, fb), phases, slots, old).astype(np.uint32)
        for row, vals in zip(blocks, new):
            dst.write_rows32(row, vals)


# a run's head of deferrable SFPU words holds no MVMUL: push_many hands it to DeferralMixin.push_many as it is
deferral.ISSUE_RUN_FIRST.add(FpuBatchMixin.push_many)
