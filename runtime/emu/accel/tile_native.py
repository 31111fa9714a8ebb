"""The data side of the tile words in C (tile_native.c, a CPython extension module built by native.py): the loader and
the conversion codes the C part shares with unpack_pack.py.

unpack_pack.py's and tensix_fpu.py's handlers keep every check, address, bank handshake and counter; the C part does
the data effect of
* UNPACR and PACR for the conversions below, on contiguous whole-byte datums: one call instead of three to five numpy
  temporaries. BFP, FP8, INT8, Tileize_mode, ReLU, edge masks that drop datums, L1 accumulation and most 16-bit Dst
  modes stay on the Python path;
* MVMUL and ELWMUL / ELWADD / ELWSUB with an fp32 Dst and 8-bit-exponent sources (no INT8 math), each as it executes
  (MVMUL's numerics are mvmul_native.c's, which the MVMUL runs of fpu_batch use when this part is off).
The Python path is the reference: tests/emu/test_tile_native.py pins bits and cycles of both together.
`NATIVE = False` (or TT_EMU_TILE_NATIVE=0) keeps every word on the Python path; without a host compiler or Python's
headers it stays there too (`python -m tt_backend info` says which runs, and why).
"""
from __future__ import annotations

import functools
import os
from pathlib import Path

from tt_backend.chip.numerics import formats as F
from tt_backend.runtime.emu.accel import native

SOURCE = Path(__file__).with_name("tile_native.c")
NATIVE = os.environ.get("TT_EMU_TILE_NATIVE", "1") != "0"
# The common case of the UNPACR, PACR, MVMUL, ELW*, MOVA2D, SETADC*, SETDMAREG, SETC16, WRCFG, STALLWAIT, SEMWAIT,
# SEMPOST, SEMGET, SETRWC and ZEROACC handlers themselves in C, called from the C issue path (tile_handlers.c, built
# into sfpu_issue_native.c): the word runs without entering Python. Needs NATIVE and the handlers' setup caches;
# TT_EMU_TILE_HANDLERS_NATIVE=0 keeps the handlers in Python.
HANDLERS_NATIVE = os.environ.get("TT_EMU_TILE_HANDLERS_NATIVE", "1") != "0"
# handler name -> tile_handlers.c's H_* code
HANDLER_CODES = {"UNPACR": 1, "PACR": 2, "MVMUL": 3, "ELWMUL": 4, "ELWADD": 5, "ELWSUB": 6, "MOVA2D": 7,
                 "SETADC": 8, "SETADCXY": 9, "SETADCZW": 10, "SETADCXX": 11, "SETDMAREG": 12, "SETC16": 13,
                 "WRCFG": 14, "STALLWAIT": 15, "SEMWAIT": 16, "SEMPOST": 17, "SEMGET": 18, "SETRWC": 19,
                 "ZEROACC": 20}

# (In_data_format, Out_data_format, into Dst) -> tile_native.c's unpacker conversion code
UNPACK_KINDS = {(F.FP32, F.FP32, True): 0, (F.FP32, F.TF32, True): 0, (F.INT32, F.INT32, True): 0,
                (F.FP32, F.TF32, False): 1, (F.FP32, F.BF16, False): 2, (F.BF16, F.BF16, False): 3,
                (F.FP16, F.FP16, False): 4}
# (Read_32b_data, In_data_format, Out_data_format) of a PACR without ReLU or L1 accumulation that keeps every datum,
# with Read_raw=0 for BF16 -> tile_native.c's packer conversion code
PACK_KINDS = {(1, F.FP32, F.FP32): 0, (1, F.INT32, F.INT32): 0, (1, F.BF16, F.BF16): 1, (1, F.INT16, F.INT16): 2,
              (0, F.BF16, F.BF16): 3}


@functools.lru_cache(maxsize=None)
def _load() -> tuple[object | None, str]:
    """(the module or None, what `info` says about it)."""
    try:
        mod, path = native.load_extension(SOURCE, "tile_native")
    except OSError as e:
        return None, f"Python: the C part is unavailable: {e}"
    return mod, f"C ({path}) for UNPACR/PACR's common conversions, MVMUL and ELW* on an fp32 Dst"


def module():
    """The C module (unpack, pack, mvmul, elw), or None when it is off or unavailable."""
    return _load()[0] if NATIVE else None


def status() -> str:
    """Which path does the tile words' data effect, for `python -m tt_backend info`."""
    return _load()[1] if NATIVE else "Python: TT_EMU_TILE_NATIVE=0"
