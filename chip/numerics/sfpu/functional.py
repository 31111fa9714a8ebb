"""The Vector Unit's functional model: every SFPU instruction's effect on LRegs, lane flags and Dst, as on the
instruction pages of tt-isa-documentation (BlackholeA0/TensixTile/TensixCoprocessor/<NAME>.md), on whole 32-lane numpy
arrays (`lanewise { if (LaneEnabled) ... }` becomes a computed value plus a predicated `np.copyto`). Undefined
behaviour raises EmuUndefined in strict mode, modes no model pins down EmuUnspecified; modes that are not modelled
raise EmuUnimplemented by name.

Untimed: an instruction takes effect when executed. The emulator's SFPU (tt_backend.runtime.emu.sfpu) adds issue
cycles, SFPLOADMACRO scheduling and hazards on top; the lowering's precision evaluator runs programs on this model
directly. Field names are the instruction table's (tt_backend.chip.isa). `execute(name, fields, dst_base)` runs one
decoded instruction; `dst_base` = DEST_TARGET_REG_CFG_MATH_Offset + RWC.Dst (the caller applies address modifiers).
`sfpu_fp32_enabled` mirrors ALU_ACC_CTRL_SFPU_Fp32_enabled and `srcb_is_fp16` mirrors "SrcB format is FP16-like" for
the MOD0_FMT_SRCB resolution of SFPLOAD/SFPSTORE.
"""
from __future__ import annotations

from typing import Callable

from tt_backend.chip.errors import EmuUnimplemented
from tt_backend.chip.numerics.dst import Dst
from tt_backend.chip.numerics.sfpu.conversion import Conversions
from tt_backend.chip.numerics.sfpu.fp_fields import FpFieldOps
from tt_backend.chip.numerics.sfpu.integer_ops import IntegerOps
from tt_backend.chip.numerics.sfpu.lane_movement import LaneMovement
from tt_backend.chip.numerics.sfpu.load_store import LoadStore
from tt_backend.chip.numerics.sfpu.mad import MadOps
from tt_backend.chip.numerics.sfpu.predication import Predication
from tt_backend.chip.numerics.sfpu.state import FLAG_WRITERS, LC_DISABLE_BACKDOOR_LOAD, VD_IN_LREG_IND, \
    VectorUnitState

NO_BACKDOOR = frozenset({"SFPCONFIG", "SFPLOADMACRO", "SFPNOP"})   # instructions whose VD >= 12 is no template load


class FunctionalSFPU(LoadStore, MadOps, IntegerOps, FpFieldOps, Predication, Conversions, LaneMovement,
                     VectorUnitState):
    def __init__(self, dst: Dst, strict: bool = True, encode: Callable[..., int] | None = None) -> None:
        """`encode(name, **fields)` -> instruction word (tt_backend.chip.isa.encode): needed only by backdoor
        template loads (VD >= 12), which store the word itself; without it they raise EmuUnimplemented."""
        super().__init__(dst, strict)
        self.encode = encode
        # instruction name -> bound handler(fields, dst_base): every method named after an SFPU instruction
        self.handlers = {name: getattr(self, name) for name in dir(type(self)) if name.startswith("SFP")}

    def execute(self, name: str, fields: dict, dst_base: int) -> None:
        """Execute one decoded SFPU instruction (and count it)."""
        self.instructions += 1
        self.run(name, fields, dst_base)

    def run(self, name: str, fields: dict, dst_base: int) -> bool:
        """The instruction's functional model. False when it was consumed as a backdoor template load instead."""
        handler = self.handlers.get(name)
        if handler is None:
            raise EmuUnimplemented(f"SFPU instruction {name} is not modelled")
        if name not in NO_BACKDOOR:
            vd = fields.get("lreg_ind" if name in VD_IN_LREG_IND else "lreg_dest", 0)
            if vd >= 12 and self._backdoor(name, fields, vd):
                return False
        handler(fields, dst_base)
        if name in FLAG_WRITERS:
            self.invalidate()
        return True

    def _backdoor(self, name: str, fields: dict, vd: int) -> bool:
        """VD >= 12 with DISABLE_BACKDOOR_LOAD clear writes the instruction word to InstructionTemplate[VD - 12]
        (SFPCONFIG.md, LaneConfig). Returns True if the instruction was consumed that way."""
        disabled = (self.lane_config & LC_DISABLE_BACKDOOR_LOAD) != 0
        if disabled.all():
            return False
        if disabled.any():
            raise EmuUnimplemented(f"{name}: DISABLE_BACKDOOR_LOAD differs between lanes")
        if not self.enabled().all():
            # ttsim does not model a partially enabled backdoor write either.
            raise EmuUnimplemented(f"{name}: backdoor template load with some lanes disabled")
        if self.encode is None:
            raise EmuUnimplemented(f"{name}: backdoor template load without an instruction encoder")
        self.macro_templates[:, vd - 12] = self.encode(name, **fields)
        return True
