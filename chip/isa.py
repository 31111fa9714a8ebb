"""The one Blackhole Tensix instruction table, and what is derived from it.

Leaf module (stdlib only): the lowering, the C header generator and the emulator's decoder all read the table through
here, so a field changes in exactly one place (`isa/tensix_isa.json`). Field names follow ttsim's BH table; positions
are `[hi, lo]` bit ranges of the 32-bit word, opcode = word[31:24].
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

TABLE_PATH = Path(__file__).with_name("isa") / "tensix_isa.json"


@dataclass(frozen=True)
class Field:
    name: str
    hi: int
    lo: int

    @property
    def width(self) -> int:
        return self.hi - self.lo + 1

    @property
    def mask(self) -> int:
        return (1 << self.width) - 1


@dataclass(frozen=True)
class Instruction:
    name: str
    opcode: int
    unit: str
    fields: tuple[Field, ...]
    ttsim_unsupported: bool = False

    def encode(self, **values: int) -> int:
        unknown = set(values) - {f.name for f in self.fields}
        if unknown:
            raise KeyError(f"{self.name} has no field(s) {sorted(unknown)}; fields: {[f.name for f in self.fields]}")
        word = self.opcode << 24
        for f in self.fields:
            v = values.get(f.name, 0)
            if not 0 <= v <= f.mask:
                raise ValueError(f"{self.name}.{f.name}={v} does not fit in {f.width} bits")
            word |= v << f.lo
        return word

    def decode(self, word: int) -> dict[str, int]:
        return {f.name: (word >> f.lo) & f.mask for f in self.fields}

    def used_bits(self) -> int:
        bits = 0xFF000000
        for f in self.fields:
            bits |= f.mask << f.lo
        return bits


def _load() -> dict[str, Instruction]:
    table = json.loads(TABLE_PATH.read_text())
    out = {}
    for name, e in table.items():
        fields = tuple(sorted((Field(fn, hi, lo) for fn, (hi, lo) in e["fields"].items()), key=lambda f: f.lo))
        out[name] = Instruction(name, e["opcode"], e["unit"], fields, e.get("ttsim_unsupported", False))
    return out


INSTRUCTIONS: dict[str, Instruction] = _load()
OPCODES: dict[int, Instruction] = {i.opcode: i for i in INSTRUCTIONS.values()}


def encode(name: str, **fields: int) -> int:
    """Encode one instruction word, e.g. encode('SFPMAD', lreg_src_a=0, lreg_src_b=2, lreg_src_c=3, lreg_dest=1)."""
    return INSTRUCTIONS[name].encode(**fields)


def decode(word: int) -> tuple[str, dict[str, int]]:
    """Decode a 32-bit Tensix word into (mnemonic, fields). Raises KeyError for an unknown opcode."""
    ins = OPCODES.get((word >> 24) & 0xFF)
    if ins is None:
        raise KeyError(f"unknown Tensix opcode 0x{(word >> 24) & 0xFF:02x} in word 0x{word:08x}")
    return ins.name, ins.decode(word)


def disasm(word: int) -> str:
    try:
        name, fields = decode(word)
    except KeyError:
        return f".word 0x{word:08x}  # unknown opcode"
    args = ", ".join(f"{k}={v:#x}" if v > 9 else f"{k}={v}" for k, v in fields.items() if v)
    return f"{name} {args}".rstrip()


def ttinsn(word: int) -> int:
    """The RISC-V instruction word that pushes `word` (`.ttinsn`): the Tensix word rotated left by 2."""
    if word >= 0xC0000000:
        raise ValueError(f"0x{word:08x} is not a Tensix word (must be < 0xC0000000)")
    return ((word << 2) | (word >> 30)) & 0xFFFFFFFF


def from_ttinsn(insn: int) -> int:
    """Inverse of ttinsn (valid whenever insn & 3 != 3)."""
    return ((insn >> 2) | (insn << 30)) & 0xFFFFFFFF


def c_header() -> str:
    """C99 encoder macros, one per instruction: TT_OP_<NAME>(field, ...) in the table's field order (by lsb)."""
    lines = [
        "/* Generated from chip/isa/tensix_isa.json by chip/isa.py: do not edit. */",
        "#ifndef TT_ISA_H", "#define TT_ISA_H", "",
        "#define TT_ROTL2(w) ((((w) << 2) | ((w) >> 30)) & 0xFFFFFFFFu)",
        "/* .ttinsn: push a compile-time constant Tensix word through the instruction stream */",
        '#define TTI(w) __asm__ volatile(".word %0" :: "i"(TT_ROTL2((unsigned)(w))) : "memory")',
        "/* run-time word: store to the instruction buffer of this core's thread */",
        "#define TT_PUSH(w) (*(volatile unsigned *)0xFFE40000u = (unsigned)(w))", "",
    ]
    for ins in sorted(INSTRUCTIONS.values(), key=lambda i: i.opcode):
        params = ", ".join(f.name for f in ins.fields)
        body = f"(0x{ins.opcode:02X}u << 24)"
        for f in ins.fields:
            body += f" | ((((unsigned)({f.name})) & 0x{f.mask:X}u) << {f.lo})"
        lines.append(f"#define TT_OP_{ins.name}({params}) ({body})")
    lines += ["", "#endif", ""]
    return "\n".join(lines)
