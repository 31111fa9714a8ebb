"""The value DAG of one kernel: what is computed per element, independent of how indices are formed.

Produced by the frontend from tinygrad's AST, consumed by the SFPU code generator (and later the tile graph/placement).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

DTYPES = ("float32", "bfloat16", "int32", "bool", "uint32", "float16")
ELEMENTWISE_OPS = ("ADD", "MUL", "SUB", "NEG", "MAX", "CMPLT", "CMPNE", "WHERE", "RECIPROCAL", "EXP2", "LOG2",
                   "SQRT", "SIN", "TRUNC", "CAST",
                   "BITCAST",                         # the same 32 lane bits read as another dtype (float32/int32/uint32)
                   "AND", "OR", "XOR", "SHL", "SHR",  # integer and bool bit ops (shifts: int32/uint32 only)
                   "CDIV", "CMOD", "FLOORDIV", "FLOORMOD",   # int32 division (truncating / flooring)
                   "MULADD", "MULSUB", "NMULADD",     # fused a*b+c, a*b-c, c-a*b (lowering/rewrite.py)
                   "DIV")                             # fused a*(1/b) (lowering/rewrite.py)
# REDUCE: srcs = (value,), arg = (combine op "ADD" | "MUL" | "MAX", indices of the reduced ranges in kernel order).
# Nodes below it are evaluated per (output, k) element, nodes above it per output (lowering/families/sfpu_reduce.py
# splits there).
REDUCE_OPS = ("ADD", "MUL", "MAX")


@dataclass(frozen=True)
class VNode:
    id: int
    op: str                 # LOAD (arg = input stream index), CONST (arg = Python value), REDUCE, or ELEMENTWISE_OPS
    dtype: str              # result dtype, one of DTYPES
    srcs: tuple[int, ...] = ()
    arg: Any = None


@dataclass
class ValueDAG:
    nodes: list[VNode] = field(default_factory=list)   # topologically ordered: srcs always precede a node
    out: int = -1                                      # id of the node whose value is stored

    def add(self, op: str, dtype: str, srcs: tuple[int, ...] = (), arg: Any = None) -> int:
        if dtype not in DTYPES:
            raise ValueError(f"dtype {dtype!r} not in {DTYPES}")
        for s in srcs:
            if not 0 <= s < len(self.nodes):
                raise ValueError(f"source {s} of {op} is not an earlier node")
        n = VNode(len(self.nodes), op, dtype, tuple(srcs), arg)
        self.nodes.append(n)
        return n.id

    def uses(self) -> Counter:
        """Node id -> how many times it is read (as a source, or as the stored output)."""
        uses = Counter(s for n in self.nodes for s in n.srcs)
        uses[self.out] += 1
        return uses
