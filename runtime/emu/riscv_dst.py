"""RISC-V T0/T1/T2 direct access to Dst (Dst.md "RISCV access to Dst"): the window's address map and the Load32/16/8,
Store32/16/8 functions over the emulator's Dst (tt_backend.chip.numerics.dst), whose rows32 hold CPU-layout values."""
from __future__ import annotations

import numpy as np

from tt_backend.chip.errors import EmuUndefined
from tt_backend.chip.numerics.dst import COLS, ROWS16, Dst

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
    is EmuUndefined. With `strict`, reading an element of a row whose contents are undefined (never written since
    reset, or marked undefined by ZEROACC and not written since) is EmuUndefined too."""

    def __init__(self, dst: Dst) -> None:
        self.dst = dst

    def _elements(self, who: str, off: int, size: int, ctrl, multi: bool) -> tuple[int, int]:
        fmt = ctrl[0]
        if fmt not in RISCV_ELEM:
            raise EmuUndefined(f"{who}: Dst access at 0x{RISCV_BASE + off:08X} with RISC_DEST_ACCESS_CTRL fmt={fmt}: "
                           f"reserved (Dst.md: fmt >= 6)")
        elem = RISCV_ELEM[fmt]
        if size != elem and not (multi and size > elem):
            rule = ("RISCV T0/T1 access one element at a time" if size > elem else
                    "an access narrower than the element is UndefinedBehaviour()")
            raise EmuUndefined(f"{who}: {8 * size}-bit Dst access at 0x{RISCV_BASE + off:08X} with fmt={fmt} "
                           f"({RISCV_FMT[fmt]}, {8 * elem}-bit elements): {rule} (Dst.md)")
        if elem == 1 and off + size > ROWS16 * COLS:
            raise EmuUndefined(f"{who}: 8-bit Dst access at 0x{RISCV_BASE + off:08X}: element {off} is beyond "
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
            raise EmuUndefined(f"{who}: RISC-V read of {what}, whose Dst32b row {r32} was never written since reset "
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
            self.dst.mark_defined(np.array([r]))
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
