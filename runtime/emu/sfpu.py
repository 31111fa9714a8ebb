"""The emulator's Vector Unit (SFPU): the functional model (tt_backend.chip.numerics.sfpu) in time.

Every instruction executes at its issue cycle, given by the Tensix's cycle model; SFPLOADMACRO-scheduled instructions
due by then run first (sfpu_macro.py), and a regular instruction meeting a scheduled one on the same sub-unit in the
same cycle is dropped (strict mode: EmuUndefined). `timing` is the Vector Unit's auto-stall / hazard model
(cycles.SfpuTiming), handed in by the owner of the cycle model; the scheduled instructions report to it."""
from __future__ import annotations

from tt_backend.chip import isa
from tt_backend.chip.errors import EmuUndefined
from tt_backend.chip.numerics.dst import Dst
from tt_backend.chip.numerics.sfpu.functional import FunctionalSFPU
from tt_backend.chip.numerics.sfpu.state import FLAG_WRITERS
from tt_backend.runtime.emu.sfpu_macro import MacroScheduler


class SFPU(MacroScheduler, FunctionalSFPU):
    def __init__(self, dst: Dst, timing, strict: bool = True) -> None:
        self.timing = timing     # auto-stall / hazard bookkeeping shared with the Tensix's cycle model
        super().__init__(dst, strict, encode=isa.encode)

    def reset(self) -> None:
        super().reset()
        self.cycle = 0           # issue cycle of the latest instruction

    def execute(self, name: str, fields: dict, dst_base: int, cycle: int | None = None) -> None:
        """Execute one decoded SFPU instruction issued at `cycle` (default: the cycle after the previous one)."""
        self.instructions += 1
        self.cycle = cycle = self.cycle + 1 if cycle is None else cycle
        if self.scheduled and self._macro_tick(name, cycle):
            if self._flags_after is not None:
                self.lane_flags[:], self.use_lane_flags[:] = self._flags_after
                self._flags_after = None
                self.invalidate()
            return
        if self.run(name, fields, dst_base) and self._flags_after is not None:
            # lane flags written by a scheduled instruction of this same cycle
            if name in FLAG_WRITERS and self.strict:
                raise EmuUndefined(f"SFPU cycle {cycle}: {name} and an SFPLOADMACRO-scheduled instruction both write "
                                   f"the lane flags in the same cycle")
            self.lane_flags[:], self.use_lane_flags[:] = self._flags_after
            self._flags_after = None
            self.invalidate()

    def is_plain(self) -> bool:
        """No SFPLOADMACRO work scheduled, no same-cycle flag update pending, LaneConfig all zero: the state in which
        an instruction's effect depends only on LRegs, lane flags and Dst (what the emulator's batching relies on)."""
        return not self.scheduled and self._flags_after is None and not self.lane_config_any

    def busy_until(self) -> int:
        """The cycle by which the Vector Unit has no work left, scheduled instructions included (STALLWAIT C11)."""
        due = [p.due for p in self.scheduled if p.due is not None]
        return max([self.timing.busy_until] + [d + 1 for d in due])
