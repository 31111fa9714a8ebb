"""The data side of UNPACR and PACR in C (tile_native.c, a CPython extension module built by native.py): the loader
and the conversion codes the C part shares with unpack_pack.py.

unpack_pack.py's handlers keep every check, address and counter; for the conversions below, on contiguous whole-byte
datums, they move the datums with one call instead of three to five numpy temporaries. Any other conversion (BFP,
FP8, INT8, Tileize_mode, ReLU, edge masks that drop datums, L1 accumulation, most 16-bit Dst modes) stays on the Python
path, which is the reference: tests/emu/test_tile_native.py pins bits and cycles of both together.
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
    return mod, f"C ({path}) for the unpacker's and packer's common conversions"


def module():
    """The C module (unpack, pack), or None when it is off or unavailable."""
    return _load()[0] if NATIVE else None


def status() -> str:
    """Which path moves UNPACR's and PACR's datums, for `python -m tt_backend info`."""
    return _load()[1] if NATIVE else "Python: TT_EMU_TILE_NATIVE=0"
