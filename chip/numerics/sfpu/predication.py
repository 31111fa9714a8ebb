"""Lane predication: LaneFlags, UseLaneFlagsForLaneEnable and the flag stack (SFPSETCC, SFPENCC, SFPPUSHC, SFPPOPC,
SFPCOMPC, SFPGT, SFPLE; their ISA pages and VectorUnit.md)."""
from __future__ import annotations

import numpy as np

from tt_backend.chip.numerics.sfpu.lane_math import U32, boolean_op, smag_key


class Predication:
    """Handlers of the lane-flag instructions (mixed into FunctionalSFPU)."""

    def SFPSETCC(self, f: dict, dst_base: int) -> None:
        mod1 = f["instr_mod1"]
        if mod1 & 8:
            flags = np.zeros(32, dtype=bool)
        elif mod1 & 1:
            flags = np.full(32, (f["imm12_math"] & 1) != 0)
        else:
            c = self.lreg[f["lreg_c"]].view(np.int32)   # integer test: -0.0 counts as negative
            flags = {0: c < 0, 2: c != 0, 4: c >= 0, 6: c == 0}[mod1]
        flags = flags & self.use_lane_flags              # !UseLaneFlagsForLaneEnable -> false
        np.copyto(self.lane_flags, flags, where=self.enabled())

    def SFPENCC(self, f: dict, dst_base: int) -> None:
        mod1, imm2 = f["instr_mod1"], f["imm12_math"] & 3
        # Executes on every lane regardless of LaneEnabled.
        if mod1 & 2:
            self.use_lane_flags[:] = (imm2 & 1) != 0
        elif mod1 & 1:
            self.use_lane_flags[:] = ~self.use_lane_flags
        self.lane_flags[:] = (imm2 & 2) != 0 if mod1 & 8 else True

    def SFPPUSHC(self, f: dict, dst_base: int) -> None:
        mod1 = f["instr_mod1"]
        if mod1 == 0:
            if self.stack_depth >= 8:
                self.undefined("SFPPUSHC: flag stack overflow (9th push)")
                return
            self.stack_flags[self.stack_depth] = self.lane_flags
            self.stack_use[self.stack_depth] = self.use_lane_flags
            self.stack_depth += 1
            return
        if self.stack_depth == 0:
            self.undefined(f"SFPPUSHC Mod1={mod1} with an empty flag stack")
            return
        t = self.stack_depth - 1
        if mod1 <= 12:
            self.stack_use[t] = self.use_lane_flags
            self.stack_flags[t] = boolean_op(mod1, self.stack_flags[t], self.lane_flags)
        elif mod1 == 13:
            self.lane_flags[:] = ~self.lane_flags
            self.stack_use[t] = self.use_lane_flags
            self.stack_flags[t] = self.lane_flags
        else:  # 14: {true, true}; 15: {false, true}
            self.stack_use[t] = True
            self.stack_flags[t] = mod1 == 14

    def _top(self, empty_flags: bool, empty_use: bool) -> tuple[np.ndarray, np.ndarray]:
        if self.stack_depth == 0:
            return np.full(32, empty_flags), np.full(32, empty_use)
        t = self.stack_depth - 1
        return self.stack_flags[t].copy(), self.stack_use[t].copy()

    def SFPPOPC(self, f: dict, dst_base: int) -> None:
        mod1 = f["instr_mod1"]
        top_flags, top_use = self._top(False, False)
        if mod1 == 0:
            if self.stack_depth == 0:
                self.undefined("SFPPOPC: pop from an empty flag stack")
            else:
                self.stack_depth -= 1
            self.use_lane_flags[:] = top_use
            self.lane_flags[:] = top_flags
        elif mod1 <= 12:
            self.use_lane_flags[:] = top_use
            self.lane_flags[:] = boolean_op(mod1, self.lane_flags, top_flags)
        elif mod1 == 13:
            self.lane_flags[:] = ~self.lane_flags
        else:
            self.use_lane_flags[:] = True
            self.lane_flags[:] = mod1 == 14

    def SFPCOMPC(self, f: dict, dst_base: int) -> None:
        top_flags, top_use = self._top(True, True)
        self.lane_flags[:] = top_use & self.use_lane_flags & top_flags & ~self.lane_flags

    def _compare(self, f: dict, result: np.ndarray) -> None:
        """Shared tail of SFPGT / SFPLE (their pages differ only in the comparison)."""
        vd, mod1 = f["lreg_dest"], f["instr_mod1"]
        en = self.enabled()
        if mod1 & 8:   # SET_VD: -1 / 0
            self.write(vd, np.where(result, U32(0xFFFFFFFF), U32(0)), en)
        if mod1 & 1:   # SET_CC
            np.copyto(self.lane_flags, result, where=en)
        if mod1 & 2 and self.stack_depth:   # MUTATE_STACK: ignores lane enables
            t = self.stack_depth - 1
            if mod1 & 4:
                self.stack_flags[t] |= result
            else:
                self.stack_flags[t] &= result

    def SFPGT(self, f: dict, dst_base: int) -> None:
        # VD > VC  <=>  SignMagIsSmaller(VC, VD)
        self._compare(f, smag_key(self.lreg[f["lreg_c"]]) < smag_key(self.lreg[f["lreg_dest"]]))

    def SFPLE(self, f: dict, dst_base: int) -> None:
        self._compare(f, ~(smag_key(self.lreg[f["lreg_c"]]) < smag_key(self.lreg[f["lreg_dest"]])))
