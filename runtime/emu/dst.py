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
(`written` is cleared by ZEROACC and set by every writer, including the SFPU and unpacker modules). ttsim keeps one
valid bit per physical 16-bit row and tests the high-half row on 32-bit reads; `undefined32` does the same.
"""
from __future__ import annotations

import numpy as np

from tt_backend.chip.errors import EmuError

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

    def _defined(self, rows32) -> None:
        self.written[rows32] = True
        a = adj32(rows32)
        self.cleared16[a] = False
        self.cleared16[a + 8] = False

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
        self._defined(np.arange(row, row + len(v)))

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


# --- RISC-V T0/T1/T2 direct access (Dst.md "RISCV access to Dst") ----------------------------------------------
RISCV_BASE = 0xFFBD8000
RISCV_SIZE = 0x8000
RISCV_ELEM = {0: 4, 1: 4, 2: 2, 3: 2, 4: 2, 5: 1}      # RISC_DEST_ACCESS_CTRL_SEC[].fmt -> element bytes
RISCV_FMT = {0: "fp32/uint32 Dst32b", 1: "int32 Dst32b", 2: "fp16 Dst16b", 3: "bf16 Dst16b", 4: "int16 Dst16b",
             5: "int8 Dst16b"}
_M32 = 0xFFFFFFFF


def cpu_to_dst32(v: int) -> int:
    """CPU (IEEE / conventional integer) layout -> Dst32b bit layout (Dst.md Store32 with the swizzle)."""
    return (v & 0x8000FFFF) | ((v & 0x7F800000) >> 7) | ((v & 0x007F0000) << 8)


def dst32_to_cpu(v: int) -> int:
    """Dst32b bit layout -> CPU layout (Dst.md Load32 with the swizzle)."""
    return (v & 0x8000FFFF) | ((v & 0x7F000000) >> 8) | ((v & 0x00FF0000) << 7)


def _r16to32(row16: int) -> int:
    return ((row16 >> 4) << 3) | (row16 & 7)


class RiscvDstAccess:
    """The Dst.md Load32/16/8 and Store32/16/8 functions over a `Dst` whose rows32 hold CPU-layout values.

    `ctrl` = (fmt, no_swizzle, unsigned_int) of RISC_DEST_ACCESS_CTRL_SEC[thread]. `multi`: RISCV T2 may access
    several elements at once (a wider aligned scalar access is split into elements, lowest address in the low
    bits); T0/T1 must access exactly one element. Anything Dst.md calls UndefinedBehaviour(), or leaves undefined
    (a reserved fmt, a T0/T1 access wider or narrower than the element, 8-bit addresses beyond Dst16b row 1023),
    is an EmuError. With `strict`, reading an element of a row whose contents are undefined (never written since
    reset, or marked undefined by ZEROACC and not written since) is an EmuError too."""

    def __init__(self, dst: "Dst") -> None:
        self.dst = dst

    def _elements(self, who: str, off: int, size: int, ctrl, multi: bool) -> tuple[int, int]:
        fmt = ctrl[0]
        if fmt not in RISCV_ELEM:
            raise EmuError(f"{who}: Dst access at 0x{RISCV_BASE + off:08X} with RISC_DEST_ACCESS_CTRL fmt={fmt}: "
                           f"reserved (Dst.md: fmt >= 6)")
        elem = RISCV_ELEM[fmt]
        if size != elem and not (multi and size > elem):
            rule = ("RISCV T0/T1 access one element at a time" if size > elem else
                    "an access narrower than the element is UndefinedBehaviour()")
            raise EmuError(f"{who}: {8 * size}-bit Dst access at 0x{RISCV_BASE + off:08X} with fmt={fmt} "
                           f"({RISCV_FMT[fmt]}, {8 * elem}-bit elements): {rule} (Dst.md)")
        if elem == 1 and off + size > ROWS16 * COLS:
            raise EmuError(f"{who}: 8-bit Dst access at 0x{RISCV_BASE + off:08X}: element {off} is beyond "
                           f"Dst16b[1024][16] (Dst.md leaves the upper 16 KiB of the window undefined for fmt=5)")
        return elem, size // elem

    def rows32_of(self, off: int, size: int, elem: int) -> list[int]:
        """The Dst32b rows an access touches (for hazard checks by the caller)."""
        first, last = off // elem, (off + size - 1) // elem
        if elem == 4:
            return sorted({e // COLS for e in range(first, last + 1)})
        return sorted({_r16to32(e // COLS) for e in range(first, last + 1)})

    def _check_defined(self, who: str, r32: int, what: str, strict: bool) -> None:
        if strict and not self.dst.written[r32]:
            raise EmuError(f"{who}: RISC-V read of {what}, whose Dst32b row {r32} was never written since reset "
                           f"or was marked undefined by ZEROACC (Dst.md: Dst has no reset value; the RISC-V view "
                           f"of undefined rows is not documented)")

    def load(self, who: str, off: int, size: int, ctrl, multi: bool, strict: bool = True) -> int:
        elem, n = self._elements(who, off, size, ctrl, multi)
        out = 0
        for k in range(n):
            out |= self._load1(who, off + k * elem, elem, ctrl, strict) << (8 * elem * k)
        return out

    def store(self, who: str, off: int, size: int, value: int, ctrl, multi: bool) -> None:
        elem, n = self._elements(who, off, size, ctrl, multi)
        for k in range(n):
            self._store1(off + k * elem, elem, (value >> (8 * elem * k)) & ((1 << (8 * elem)) - 1), ctrl)

    def _load1(self, who: str, off: int, elem: int, ctrl, strict: bool) -> int:
        fmt, no_swizzle, unsigned_int = ctrl
        if elem == 4:
            e = off // 4
            r, c = e // COLS, e % COLS
            self._check_defined(who, r, f"Dst32b[{r}][{c}]", strict)
            v = int(self.dst.rows32[r, c])                  # CPU layout == Load32 after its swizzle
            if no_swizzle:
                return cpu_to_dst32(v)                      # the raw Dst32b bits
            if fmt == 1 and v >= 0x80000000:
                v = (-(v & 0x7FFFFFFF)) & _M32              # sign-magnitude -> two's complement (-0 -> +0)
            return v
        e = off // elem
        row, c = e // COLS, e % COLS                         # Dst16b[row][c] = DstBits[Adj16(row)][c]
        r32 = _r16to32(row)
        self._check_defined(who, r32, f"Dst16b[{row}][{c}]", strict)
        v = int(self.dst.read16(np.array([row]), np.array([c]))[0])
        if elem == 1:                                        # fmt 5
            if no_swizzle or unsigned_int:
                return (v >> 5) & 0xFF
            mag = (v >> 5) & 0x7F
            return ((-mag) & 0xFF) if v & 0x8000 else mag
        if fmt == 2:
            return (v & 0x8000) | ((v & 0x7FE0) >> 5) | ((v & 0x001F) << 10) if not no_swizzle else v
        if fmt == 3:
            return (v & 0x8000) | ((v & 0x7F00) >> 8) | ((v & 0x00FF) << 7) if not no_swizzle else v
        if no_swizzle or unsigned_int or v < 0x8000:        # fmt 4
            return v
        return (-(v & 0x7FFF)) & 0xFFFF

    def _store1(self, off: int, elem: int, value: int, ctrl) -> None:
        fmt, no_swizzle, unsigned_int = ctrl
        if elem == 4:
            if fmt == 1 and not no_swizzle and value >= 0x80000000:
                # two's complement -> sign-magnitude, clamping -2**31 to -(2**31-1)
                value = 0x80000000 | ((-(value + (value == 0x80000000))) & _M32)
            e = off // 4
            r, c = e // COLS, e % COLS
            # rows32 holds CPU layout: with the swizzle the value is stored as is; without it the value was raw
            # Dst32b bits and is brought back to CPU layout
            self.dst.rows32[r, c] = dst32_to_cpu(value) if no_swizzle else value
            self.dst._defined(np.array([r]))
            return
        if elem == 1:                                        # fmt 5
            if no_swizzle or unsigned_int or value < 0x80:
                v16 = (value << 5) | (16 if value else 0)
            else:
                mag = (0x180 - value - (value == 0x80)) & 0xFF   # Dst.md: "meant to be" two's complement -> s-m
                v16 = 0x8000 | (mag << 5) | 16
        elif fmt == 2:
            v16 = value if no_swizzle else (value & 0x8000) | ((value & 0x7C00) >> 10) | ((value & 0x03FF) << 5)
        elif fmt == 3:
            v16 = value if no_swizzle else (value & 0x8000) | ((value & 0x7F80) >> 7) | ((value & 0x007F) << 8)
        elif no_swizzle or unsigned_int or value < 0x8000:   # fmt 4
            v16 = value
        else:
            v16 = 0x8000 | ((-(value + (value == 0x8000))) & 0xFFFF)
        e = off // elem
        self.dst.write16(np.array([e // COLS]), np.array([e % COLS]), np.array([v16 & 0xFFFF], dtype=np.uint32))
