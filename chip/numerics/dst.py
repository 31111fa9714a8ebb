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

Undefined rows (ZEROACC.md): ZEROACC marks rows undefined. Packers and most FPU instructions read them as 0, GMPOOL as
-Inf. `undefine32/undefine16` zero the data (so every reader that ignores the mark sees 0) and set a per-physical-row
`cleared16` mark; a row counts as undefined while it is marked and its Dst32b row has not been written since
(`written` is cleared by ZEROACC and set by every writer: the SFPU, the unpacker, the FPU, RISC-V). ttsim keeps one
valid bit per physical 16-bit row and tests the high-half row on 32-bit reads; `undefined32` does the same.
"""
from __future__ import annotations

import numpy as np

from tt_backend.chip.errors import EmuUndefined

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


def adj32(rows32) -> np.ndarray:
    """Dst32b row -> physical row of its high half (Adj32 with remap/swizzle off); the low half is + 8."""
    r = np.asarray(rows32, dtype=np.int64)
    return ((r & 0x1F8) << 1) | (r & 7)


def encode_fp16(h):
    """Sign,Exp(5),Man(10) -> Sign,Man(10),Exp(5) as Dst stores FP16."""
    h = np.asarray(h, dtype=np.int64)
    return ((h & 0x8000) | ((h & 0x3FF) << 5) | ((h >> 10) & 0x1F)).astype(np.uint32)


def decode_fp16(h):
    h = np.asarray(h, dtype=np.int64)
    return ((h & 0x8000) | ((h & 0x1F) << 10) | ((h >> 5) & 0x3FF)).astype(np.uint32)


def encode_bf16(h):
    return _shuffle_bf16(np.asarray(h, dtype=np.int64)).astype(np.uint32)


def decode_bf16(h):
    return _unshuffle_bf16(np.asarray(h, dtype=np.int64)).astype(np.uint32)


class Dst:
    def __init__(self) -> None:
        self.rows32 = np.zeros((ROWS32, COLS), dtype=np.uint32)
        self.written = np.zeros(ROWS32, dtype=bool)
        self.cleared16 = np.zeros(ROWS16, dtype=bool)

    def reset(self) -> None:
        self.rows32[:] = 0
        self.written[:] = False
        self.cleared16[:] = False

    # --- undefined rows (ZEROACC) -------------------------------------------------------------------------------
    def undefine16(self, rows16) -> None:
        """ZEROACC of physical 16-bit rows: that half of the data becomes 0 and the row reads as undefined."""
        rows16 = np.asarray(rows16, dtype=np.int64) & (ROWS16 - 1)
        r32, hi = _row16_to_32(rows16)
        for r, h in zip(r32.ravel(), hi.ravel()):
            self.rows32[r] &= np.uint32(0x0000FFFF if h else 0xFFFF0000)
        self.cleared16[rows16] = True
        self.written[r32] = False

    def undefine32(self, rows32) -> None:
        """ZEROACC of Dst32b rows: the whole 32-bit row becomes 0; its high-half physical row is marked."""
        rows32 = np.asarray(rows32, dtype=np.int64) & (ROWS32 - 1)
        self.rows32[rows32] = 0
        self.cleared16[adj32(rows32)] = True
        self.written[rows32] = False

    def undefined16(self, rows16) -> np.ndarray:
        rows16 = np.asarray(rows16, dtype=np.int64) & (ROWS16 - 1)
        return self.cleared16[rows16] & ~self.written[_row16_to_32(rows16)[0]]

    def undefined32(self, rows32) -> np.ndarray:
        rows32 = np.asarray(rows32, dtype=np.int64) & (ROWS32 - 1)
        return self.cleared16[adj32(rows32)] & ~self.written[rows32]

    def mark_defined(self, rows32) -> None:
        """Dst32b rows `rows32` were written: they count as written and no longer as undefined (ZEROACC)."""
        self.written[rows32] = True
        a = adj32(rows32)
        self.cleared16[a] = False
        self.cleared16[a + 8] = False

    # --- 32-bit view -------------------------------------------------------------------------------------------
    def read_rows32(self, row: int, n: int = 1) -> np.ndarray:
        """Copy of Dst32b rows [row, row + n) as uint32 (n, 16)."""
        if not (0 <= row and row + n <= ROWS32):
            raise EmuUndefined(f"Dst32b rows [{row}, {row + n}) out of range")
        return self.rows32[row:row + n].copy()

    def write_rows32(self, row: int, values) -> None:
        """Write uint32 values of shape (n, 16) (or (16,)) starting at Dst32b row `row`."""
        v = np.asarray(values, dtype=np.uint32).reshape(-1, COLS)
        if not (0 <= row and row + len(v) <= ROWS32):
            raise EmuUndefined(f"Dst32b rows [{row}, {row + len(v)}) out of range")
        self.rows32[row:row + len(v)] = v
        self.mark_defined(np.arange(row, row + len(v)))

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
        self.cleared16[np.asarray(rows16, dtype=np.int64) & (ROWS16 - 1)] = False
