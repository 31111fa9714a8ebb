"""wolfpine (PyPI, BSD-3, pure Python) as a differential oracle for single SFPU instructions.

wolfpine is an *installed test dependency* only: nothing of it is copied here. We drive its Blackhole Vector Unit
model (`framework.pe.tensix.backends.vector.VectorUnit`) directly, without a device, a Tensix frontend or a RISC-V
program: a `VectorUnit` needs only a backend object with `.blackhole` and `getDiagnosticSettings()`, and one
instruction is executed exactly as its `TensixBackendUnit.clock_tick` does it, i.e.

    info = TensixInstructionDecoder.getInstructionInfo(word)
    getattr(unit, unit.opcode_to_method_map[info["name"]])(info, thread, info["instr_args"])

(without the event bus and cost model, which do not touch architectural state). LRegs are written into / read from
`unit.lregs[i].data` (uint32 bit patterns, one Python int per lane); lane flags are `unit.laneFlags` and the
per-lane "use lane flags as lane enable" bits are `unit.useLaneFlagsForLaneEnable`. Cost: ~20 us to build a unit,
then the handler's own per-lane Python loop (~10-100 us per instruction).

Known wolfpine 2.2 deviations from the Blackhole ISA pages that matter for single-instruction use (see
tests/diff/test_sfpu_wolfpine.py, which restricts itself to the cases where wolfpine follows the ISA):
  * SFPADD forces VA = LReg[10] and SFPMUL forces VC = LReg[9] (ISA: both are plain SFPMAD).
  * SFPAND/SFPOR take VB from the imm12 field whenever it is non-zero, ignoring Mod1 USE_VB (bit 0).
  * SFPSHFT Mod1 bit 2 (ARG_IMM_USE_VC) also takes the shifted value from VC when ARG_IMM is clear.
  * SFPCAST Mod1 2 is treated as sm32 <-> int32 (ISA: INT32_ABS); Mod1 1 (stochastic) rounds to nearest.
  * SFP_STOCH_RND: rnd_mode 1/3 (stochastic) use the nearest-even constant; rnd_mode 2 (toward zero) uses
    0x800000 where the ISA uses PRNGBits = 0x7fffff (which rounds up when every discarded bit is 1).
  * SFPMUL24 ignores Mod1 (UPPER, INDIRECT_VA/VD) and VC (Mul24ShiftAdd); SFPARECIP models Mod1 = 0 only.
  * SFPMAD-family INDIRECT_VD: the per-lane VD leaks into the next lane's `VD < 12` gate (only harmless while every
    lane's LReg[7] & 15 < 12); SFPADDI/SFPMULI INDIRECT_VD is broken the same way and NEGATE_VC is ignored.
  * SFPLOADI with VD 8-10/15 asserts (writes a read-only LReg) where the ISA drops the write.
  * Not modelled (raise): SFPMOV Mod1 8, SFPGT/SFPLE Mod1 0/9, SFPSHFT2 Mod1 0-2/6, SFPARECIP Mod1 != 0, SFPLZ,
    SFPLOADMACRO; SFPSHFT2 Mod1 5 indexes LRegs with the whole Imm12.
"""
from __future__ import annotations

import numpy as np

try:
    from framework.pe.tensix.backends.vector import VectorUnit as _VectorUnit
    from framework.pe.tensix.util import TensixInstructionDecoder as _Decoder
    import importlib.metadata as _md

    WOLFPINE_VERSION = _md.version("wolfpine")
    AVAILABLE = True
    IMPORT_ERROR = None
except Exception as e:  # not installed (or a foreign top-level package called `framework`)
    _VectorUnit = _Decoder = None
    WOLFPINE_VERSION = None
    AVAILABLE = False
    IMPORT_ERROR = f"wolfpine not importable: {type(e).__name__}: {e}"

N_LREGS, N_LANES = 17, 32


def require_wolfpine() -> None:
    """Skip the calling test (or module, at import time) cleanly when wolfpine is not installed."""
    if not AVAILABLE:
        import pytest
        pytest.skip(IMPORT_ERROR + " (pip install wolfpine)", allow_module_level=True)


class _Diagnostics:
    @staticmethod
    def reportSFPUCalculations() -> bool:
        return False


class _Backend:
    """The only backend state a VectorUnit reads for non-Dst instructions."""
    blackhole = True
    _diag = _Diagnostics()

    def getDiagnosticSettings(self):
        return self._diag


def default_lregs() -> np.ndarray:
    """wolfpine's reset LRegs (rows 8, 9, 10, 15 are the architectural constants; the rest zero)."""
    require_wolfpine()
    unit = _VectorUnit(_Backend())
    return np.array([[unit.lregs[i][l] for l in range(N_LANES)] for i in range(N_LREGS)], dtype=np.uint32)


def wolfpine_exec_ex(word: int, lregs: np.ndarray, lane_flags=None, use_lane_flags=None):
    """Execute one SFPU instruction word in wolfpine's Blackhole Vector Unit.

    `lregs`: uint32 (17, 32) initial LRegs (every row is loaded, the read-only constant rows included: pass the
    architectural constants there). `lane_flags` / `use_lane_flags`: optional bool (32,) initial LaneFlags and
    per-lane UseLaneFlagsForLaneEnable (default all False = every lane enabled).
    Returns (lregs uint32 (17, 32), lane_flags bool (32,)) after the instruction."""
    require_wolfpine()
    lregs = np.asarray(lregs, dtype=np.uint32)
    assert lregs.shape == (N_LREGS, N_LANES), lregs.shape
    unit = _VectorUnit(_Backend())
    for i in range(N_LREGS):
        lr = unit.lregs[i]
        lr.data = [int(x) for x in lregs[i]]
        lr.hard_wired_value = None  # rows 8/9/10 read a scalar otherwise; read_only stays set (writes assert)
    if lane_flags is not None:
        unit.laneFlags = [bool(x) for x in lane_flags]
    if use_lane_flags is not None:
        unit.useLaneFlagsForLaneEnable = [bool(x) for x in use_lane_flags]
    info = _Decoder.getInstructionInfo(int(word))
    name = info["name"]
    handler = unit.opcode_to_method_map.get(name)
    if handler is None:
        raise NotImplementedError(f"wolfpine's Vector Unit has no handler for {name}")
    getattr(unit, handler)(info, 1, info.get("instr_args"))  # issued by thread 1 (TRISC1, the math thread)
    out = np.array([[int(unit.lregs[i].data[l]) & 0xFFFFFFFF for l in range(N_LANES)] for i in range(N_LREGS)],
                   dtype=np.uint32)
    return out, np.array(unit.laneFlags, dtype=bool)


def wolfpine_exec(word: int, lregs: np.ndarray) -> np.ndarray:
    """Execute one SFPU instruction word on `lregs` (uint32 (17, 32)), all lanes enabled; return the LRegs after."""
    return wolfpine_exec_ex(word, lregs)[0]
