"""The Dst register file (BH `Dst.md`), kept as its canonical 32-bit view.

`rows32[r][c]` holds Dst32b[r][c] as a plain IEEE/integer bit pattern (the hardware's field shuffle,
Sign,ManHi,Exp,ManLo, is not stored: every reader/writer in the emulator uses unshuffled values, which is equivalent
as long as nobody observes the raw storage). `written[r]` records which Dst32b rows were written since reset, so a
strict caller can flag reads of never-written rows (hardware has no reset value).

The 16-bit view (Dst16b[1024][16]) shares storage with the 32-bit view: with DEST_ACCESS_CFG remap/swizzle off,
Adj32(r) = ((r & 0x1f8) << 1) | (r & 7), so Dst32b row r is Dst16b row Adj32(r) (high halves) and Adj32(r) + 8 (low
halves). Physical high halves hold the *shuffled* BF16 of the value; low halves hold raw bits. `read16`/`write16`
expose physical DstBits so any 16-bit format's own shuffle can be applied by the caller. Callers that only touch
Dst via the 32-bit view never see the difference.
"""
from __future__ import annotations

import numpy as np

from templates.errors import EmuError

ROWS32 = 512
ROWS16 = 1024
COLS = 16


def _shuffle_bf16(h: np.ndarray) -> np.ndarray:
    """Sign,Exp,Man(7) -> Sign,Man(7),Exp as Dst stores BF16 (and the high half of FP32)."""
    return (h & 0x8000) | ((h & 0x7F) << 8) | ((h >> 7) & 0xFF)


def _unshuffle_bf16(h: np.ndarray) -> np.ndarray:
    return (h & 0x8000) | ((h & 0xFF) << 7) | ((h >> 8) & 0x7F)


def _row16_to_32(rows16: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Dst16b row -> (Dst32b row, is_high_half); inverse of Adj32 with remap/swizzle off."""
    rows16 = np.asarray(rows16, dtype=np.int64)
    return ((rows16 >> 4) << 3) | (rows16 & 7), (rows16 & 8) == 0


class Dst:
    def __init__(self) -> None:
        self.rows32 = np.zeros((ROWS32, COLS), dtype=np.uint32)
        self.written = np.zeros(ROWS32, dtype=bool)

    def reset(self) -> None:
        self.rows32[:] = 0
        self.written[:] = False

    # --- 32-bit view -------------------------------------------------------------------------------------------
    def read_rows32(self, row: int, n: int = 1) -> np.ndarray:
        """Copy of Dst32b rows [row, row + n) as uint32 (n, 16)."""
        if not (0 <= row and row + n <= ROWS32):
            raise EmuError(f"Dst32b rows [{row}, {row + n}) out of range")
        return self.rows32[row:row + n].copy()

    def write_rows32(self, row: int, values) -> None:
        """Write uint32 values of shape (n, 16) (or (16,)) starting at Dst32b row `row`."""
        v = np.asarray(values, dtype=np.uint32).reshape(-1, COLS)
        if not (0 <= row and row + len(v) <= ROWS32):
            raise EmuError(f"Dst32b rows [{row}, {row + len(v)}) out of range")
        self.rows32[row:row + len(v)] = v
        self.written[row:row + len(v)] = True

    # --- 16-bit view (physical DstBits) -----------------------------------------------------------------------
    def read16(self, rows16, cols) -> np.ndarray:
        """Physical 16-bit Dst16b[rows16][cols] (element-wise index arrays) as uint32 values < 2**16."""
        r32, hi = _row16_to_32(rows16)
        v = self.rows32[r32 & (ROWS32 - 1), cols]
        return np.where(hi, _shuffle_bf16(v >> 16), v & 0xFFFF).astype(np.uint32)

    def write16(self, rows16, cols, values) -> None:
        """Write physical 16-bit values to Dst16b[rows16][cols] (element-wise index arrays)."""
        r32, hi = _row16_to_32(rows16)
        r32 = r32 & (ROWS32 - 1)
        v = np.asarray(values, dtype=np.uint32) & 0xFFFF
        old = self.rows32[r32, cols]
        new = np.where(hi, (_unshuffle_bf16(v) << 16) | (old & 0xFFFF), (old & 0xFFFF0000) | v)
        self.rows32[r32, cols] = new.astype(np.uint32)
        self.written[r32] = True
