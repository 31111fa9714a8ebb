"""SFPU instructions one at a time in C (sfpu_native.c, built by native.py): the loader, the instruction records the C
part reads, and the count of what still runs through Python.

The emulator's deferred SFPU work (deferral.py) that no numpy batch takes ran one instruction at a time through the
functional model, about 22 us of numpy calls per instruction (SFPMAD's FMA most of it). Here a whole run of them is
one C call over the LRegs, lane flags and Dst, passed by pointer. The C part covers exactly the instructions the
emulator defers (sfpu_batch.batchable with flags, sfpu_batch.queue_only, SFPLOAD/SFPSTORE in the 32-bit Dst modes) in
the Vector Unit's plain state (SFPU.is_plain: no LaneConfig bit, no SFPLOADMACRO work); everything else runs through
the functional model in Python, which stays the reference the equality tests pin this against
(tests/emu/test_native_sfpu.py).
`NATIVE_SFPU = False` (or TT_EMU_SFPU_NATIVE=0) forces the Python path.
"""
from __future__ import annotations

import ctypes
import functools
import os
from collections import Counter
from pathlib import Path

import numpy as np

from tt_backend.chip.errors import EmuUnimplemented
from tt_backend.chip.numerics.sfpu import lane_math
from tt_backend.runtime.emu.accel import native, sfpu_batch

SOURCE = Path(__file__).with_name("sfpu_native.c")
NATIVE_SFPU = os.environ.get("TT_EMU_SFPU_NATIVE", "1") != "0"
# The C part's FMA in float64 where that form applies (sfpu_native.c fma8_f64), else its integer reference (fma8);
# TT_EMU_FMA_F64_NATIVE=0 keeps the integer form on every lane. Read when the library loads; set_fma_f64 changes it.
FMA_F64 = os.environ.get("TT_EMU_FMA_F64_NATIVE", "1") != "0"

# The op codes of sfpu_native.c, in its order (checked against the library when it loads). SFPADD and SFPMUL are
# SFPMAD (the same functional model).
OPS = ("SFPLOAD", "SFPSTORE", "SFPMAD", "SFPADDI", "SFPMULI", "SFPLOADI", "SFPEXMAN", "SFPSETEXP", "SFPSETMAN",
       "SFPSETSGN", "SFPDIVP2", "SFPAND", "SFPOR", "SFPXOR", "SFPNOT", "SFPABS", "SFPSHFT", "SFPARECIP", "SFPNOP",
       "SFPMOV", "SFPCAST", "SFPEXEXP", "SFPLZ", "SFPIADD", "SFPSETCC", "SFPENCC", "SFPGT", "SFPLE", "SFPMUL24",
       "SFPSWAP", "SFPTRANSP", "SFPCONFIG")
_OP = {name: i for i, name in enumerate(OPS)} | {"SFPADD": OPS.index("SFPMAD"), "SFPMUL": OPS.index("SFPMAD")}
DST32_MODES = (3, 4, 12)      # SFPLOAD / SFPSTORE modes the C part moves: FP32, INT32, INT32_SM (raw 32-bit words)
DST32_STORE_MODES = DST32_MODES + (7,)   # and HI16 for a store: its word as is (an SFPLOAD's HI16 reads Dst16b)
DST32_MODES_OF = {False: DST32_MODES, True: DST32_STORE_MODES}   # by is_store: what a load / a store may use

REC_BYTES = 8 * 4             # a record's size: eight int32 (sfpu_native.c's REC)
# A record: op, mod, va, vb, vc, vd, imm, addr; per instruction, which field fills each of mod .. imm (None, or a
# field the instruction lacks: 0).
_FIELDS = {
    "SFPLOAD": (None, None, None, None, "lreg_ind", None), "SFPSTORE": (None, None, None, None, "lreg_ind", None),
    "SFPMAD": ("instr_mod1", "lreg_src_a", "lreg_src_b", "lreg_src_c", "lreg_dest", None),
    "SFPADDI": ("instr_mod1", None, None, None, "lreg_dest", "imm16_math"),
    "SFPMULI": ("instr_mod1", None, None, None, "lreg_dest", "imm16_math"),
    "SFPLOADI": ("instr_mod0", None, None, None, "lreg_ind", "imm16"),
    "SFPCAST": ("instr_mod1", None, None, "lreg_src_c", "lreg_dest", None),
    "SFPSWAP": ("instr_mod1", None, None, "lreg_src_c", "lreg_dest", None),
    "SFPNOP": (None,) * 6, "SFPTRANSP": (None,) * 6,
    "SFPCONFIG": ("instr_mod1", None, None, None, "config_dest", "imm16_math"),
}
_FIELDS["SFPADD"] = _FIELDS["SFPMUL"] = _FIELDS["SFPMUL24"] = _FIELDS["SFPMAD"]
_LREG_C_FORM = ("instr_mod1", None, None, "lreg_c", "lreg_dest", "imm12_math")   # every other covered instruction

# SFPU instructions executed since the process started: "C" (by this module) and, by name, those that ran through the
# functional model in Python (tensix_sfpu.execute_sfpu counts them).
traffic: Counter = Counter()

# SFPARECIP's tables, handed to the C part (which keeps pointers to them)
_RECIP = np.frombuffer(lane_math.RECIP_LUT, dtype=np.uint8)
_EXP = np.frombuffer(lane_math.EXP_LUT, dtype=np.uint8)


@functools.lru_cache(maxsize=None)
def _load() -> tuple[object | None, str]:
    """(the library or None, what `info` says about it)."""
    try:
        path = native.build(SOURCE)
        lib = ctypes.CDLL(str(path))
    except OSError as e:
        return None, f"Python (the functional model): the C part is unavailable: {e}"
    lib.sfpu_op_names.restype = ctypes.c_char_p
    names = tuple(lib.sfpu_op_names().decode().split())
    if names != OPS:
        return None, f"Python (the functional model): {path.name}'s op codes {names} are not the loader's {OPS}"
    ptr = ctypes.c_void_p
    lib.sfpu_set_tables.argtypes = [ptr, ptr, ctypes.c_int32]
    lib.sfpu_set_tables.restype = None
    lib.sfpu_set_tables(_RECIP.ctypes.data, _EXP.ctypes.data, len(_EXP))
    lib.sfpu_run.argtypes = [ptr, ptr, ptr, ptr, ptr, ptr, ctypes.c_int32]
    lib.sfpu_run.restype = ctypes.c_int32
    lib.sfpu_run_repeated.argtypes = [ptr, ptr, ptr, ptr, ptr, ptr, ctypes.c_int32, ptr, ctypes.c_int32,
                                      ctypes.c_int32]
    lib.sfpu_run_repeated.restype = ctypes.c_int32
    lib.sfpu_fma_lanes.argtypes = [ptr, ptr, ptr, ptr, ctypes.c_int64]
    lib.sfpu_fma_lanes.restype = None
    lib.sfpu_set_fma_f64.argtypes = [ctypes.c_int32]
    lib.sfpu_set_fma_f64.restype = ctypes.c_int32
    lib.sfpu_set_fma_f64(int(FMA_F64))
    for counter in (lib.sfpu_fma_f64_groups, lib.sfpu_fma_f64_declined):
        counter.argtypes = []
        counter.restype = ctypes.c_int64
    return lib, f"C ({path}) for the deferred instructions ({', '.join(OPS)}); the rest in Python"


def available() -> bool:
    return NATIVE_SFPU and _load()[0] is not None


def status() -> str:
    """Which path runs the SFPU's instructions one at a time, for `python -m tt_backend info`."""
    return _load()[1] if NATIVE_SFPU else "Python (the functional model): TT_EMU_SFPU_NATIVE=0"


def record(name: str, fields: dict) -> tuple | None:
    """The C record of a decoded instruction (addr 0, mod of SFPLOAD / SFPSTORE 0: the caller's, per execution), or
    None when the C part does not cover it."""
    op = _OP.get(name)
    if op is None or not (sfpu_batch.batchable(name, fields, flags=True) or sfpu_batch.queue_only(name, fields)):
        return None
    return (op,) + tuple(fields.get(k, 0) for k in _FIELDS.get(name, _LREG_C_FORM)) + (0,)


def at_address(r: tuple, mode: int, addr: int) -> tuple:
    """Record r of an SFPLOAD / SFPSTORE with its Dst access resolved: the 32-bit mode and the address."""
    return (r[0], mode) + r[2:7] + (addr,)


# The arrays _state checked last and their pointers: an array's `.ctypes.data` costs ~3.5 us (a ctypes object each
# time), five of them a third of a 288-instruction MOP batch's C run. The same array objects have the same buffers
# (nothing in the emulator reshapes or resizes them in place; a resize would fail on the reference held here).
_bound: list = [(), ()]


def _state(sfpu, what: str) -> tuple:
    """The pointers the C part takes: LRegs, lane flags, lane-flag use, Dst words, Dst rows written."""
    lreg, lf, use, rows32, written = sfpu.lreg, sfpu.lane_flags, sfpu.use_lane_flags, sfpu.dst.rows32, sfpu.dst.written
    last = _bound[0]
    if last and lreg is last[0] and lf is last[1] and use is last[2] and rows32 is last[3] and written is last[4]:
        return _bound[1]
    if not (lreg.flags.c_contiguous and lreg.shape == (17, 32) and lreg.dtype == np.uint32
            and lf.dtype == use.dtype == written.dtype == np.bool_ and lf.shape == use.shape == (32,)
            and rows32.flags.c_contiguous and rows32.shape == (512, 16) and rows32.dtype == np.uint32):
        raise EmuUnimplemented(f"sfpu_native.{what}: the SFPU's LRegs, lane flags or Dst are not the plain arrays the "
                               "C part reads")
    ptrs = lreg.ctypes.data, lf.ctypes.data, use.ctypes.data, rows32.ctypes.data, written.ctypes.data
    _bound[:] = (lreg, lf, use, rows32, written), ptrs
    return ptrs


def run(sfpu, records: list) -> None:
    """Execute `records` (each with its Dst address and mode resolved; SFPLOAD / SFPSTORE at even addresses below 512
    in DST32_MODES, stores also in DST32_STORE_MODES) on `sfpu` in its plain state, in order. The caller checked
    coverage (record() is not None)."""
    run_program(sfpu, np.array(records, dtype=np.int32))


def run_program(sfpu, prog: np.ndarray, flags_kept: bool = False) -> None:
    """run() of records already in an int32 array, one record a row. `flags_kept`: the caller proved that no record
    reads or writes a lane flag (sfpu_batch.batchable without flags), so the SFPU's cached lane enables stay valid
    (recomputing them costs a MOP batch ~6 us)."""
    run_at(sfpu, prog.ctypes.data, len(prog), flags_kept)


def run_at(sfpu, prog, n: int, flags_kept: bool = False) -> None:
    """run_program() of the n records at `prog`: the address of an int32 array the caller keeps (a kept program's
    `.ctypes.data` read once: it costs ~3.5 us a call) or a bytes object of packed records (read in place)."""
    done = _load()[0].sfpu_run(*_state(sfpu, "run"), prog, n)
    if not flags_kept:
        sfpu.invalidate()
    if done != n:
        at = REC_BYTES * done
        op = (int.from_bytes(prog[at:at + 4], "little", signed=True) if isinstance(prog, bytes)
              else ctypes.c_int32.from_address(prog + at).value)
        raise EmuUnimplemented(f"sfpu_native.run: op code {op} is not the C part's")
    traffic["C"] += done


def run_repeated(sfpu, records: list, regs: np.ndarray, carried: np.ndarray) -> None:
    """For each repetition r of a batch: LRegs `carried` (indices) set to regs[carried, r] (`regs`: the batch's
    (17, k, 32) LRegs), then run(sfpu, records); records without Dst access. One C call for all k repetitions."""
    prog = np.array(records, dtype=np.int32)
    regs = np.ascontiguousarray(regs, dtype=np.uint32)
    k = regs.shape[1]
    mask = int(sum(1 << int(i) for i in carried))
    done = _load()[0].sfpu_run_repeated(*_state(sfpu, "run_repeated"), prog.ctypes.data, len(prog),
                                        regs.ctypes.data, k, mask)
    sfpu.invalidate()
    if done != k:
        raise EmuUnimplemented("sfpu_native.run_repeated: an op code of the records is not the C part's")
    traffic["C"] += k * len(records)


def set_fma_f64(on: bool) -> bool:
    """Whether the C part's FMA takes its float64 form where it applies (FMA_F64; the equality tests compare both):
    returns whether it now does (never on a host without AVX2)."""
    return bool(_load()[0].sfpu_set_fma_f64(int(on)))


def fma_f64_counts() -> tuple[int, int]:
    """(8-lane FMA groups the float64 form was asked for, those it declined: left to the integer form) since the
    library loaded."""
    lib = _load()[0]
    return lib.sfpu_fma_f64_groups(), lib.sfpu_fma_f64_declined()


def fma(x: np.ndarray, y: np.ndarray, z: np.ndarray) -> np.ndarray:
    """The C part's Blackhole FMA on uint32 bit patterns (for the equality tests against fma._fma_exact)."""
    x, y, z = (np.ascontiguousarray(v, dtype=np.uint32).ravel() for v in np.broadcast_arrays(x, y, z))
    out = np.empty_like(x)
    _load()[0].sfpu_fma_lanes(x.ctypes.data, y.ctypes.data, z.ctypes.data, out.ctypes.data, len(out))
    return out
