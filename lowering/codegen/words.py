"""Tensix instruction words and 32-bit constants as the C literals the templates paste in (`0x0123ABCDu`)."""
from __future__ import annotations

from tt_backend.chip import isa


def hex_u32(v: int) -> str:
    """A 32-bit value as an unsigned C hex literal."""
    return f"0x{v:08X}u"


def word_u32(name: str, **fields: int) -> str:
    """The Tensix instruction `name` (fields by ISA name, isa.encode) as an unsigned C hex literal."""
    return hex_u32(isa.encode(name, **fields))
