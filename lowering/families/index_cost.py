"""What a stream's index math adds per datum to a per-datum mover (lowering/families/mover_cost.py), in emulated
cycles: the reader and writer evaluate the stream's index, validity or value expression (lowering/index.py, rendered
to C) once per datum on their RISC-V core, which has no FPU (rv32im: runtime/compile.py), so float index math
(interpolate's scaled indices, float16 index buffers) runs in libgcc's soft-float routines.

The per-datum gather figure (mover_cost.READ_PER_DATUM["gather"], 14.1) was measured on a pad, whose index and
validity are a few integer adds, multiplies and compares: integer ops are inside it (one instruction each, divisions
by constants too: a DIVU, or a multiply and shifts), and are not priced again. What it does not cover is priced here
per distinct node of the stream's expressions (the C compiler evaluates a shared sub-expression once):

* a float op: the libgcc routine's instruction count on the emulator's RV32 core (one cycle per instruction), measured
  by a loop of 512 calls on varying inputs against the same loop without the op (gcc -O2 -march=rv32im, the kernels'
  flags): add 62, subtract 66, multiply 108, divide 100, a comparison 23; int -> float 46, float -> int 20;
  rounding a float32 to float16 31.5 (tt_convert.h tt_round_f16), to bfloat16 7;
* a load from a buffer (index math reading an index tensor: x[idx], templates/blocks/index_loads.c.j2): a call of
  tt_ld<slot>, whose path when the window holds the element is 34 instructions (counted in the compiled reader of
  x[idx] over a 40 x 33 buffer: the call, saving and restoring four registers, the bounds and window checks, the
  load). Such a call is not pure (a miss reads the NoC), so the compiler evaluates it, and the math on its result,
  at every place the rendered C has it: x[idx] with idx wrapped for negative values in the validity and the index
  renders nine calls per datum, 306 cycles, and its reader was emulated at 317 per datum beyond the gather's own
  figure. Window misses (a data-dependent index into a buffer larger than its window) are not
  priced.
"""
from __future__ import annotations

from tt_backend.lowering.index import IndexExpr

# libgcc's soft-float routines, cycles per call (measured as above), by index op on float operands
FLOAT_OP_CYCLES = {"ADD": 62, "SUB": 66, "MUL": 108, "CDIV": 100, "FLOORDIV": 100,
                   "CMPLT": 23, "CMPNE": 23, "CMPEQ": 23, "MAX": 23}
# C casts between index dtypes (lowering/index.py C_CAST), (source, result) -> cycles
CAST_CYCLES = {("int", "float"): 46, ("bool", "float"): 46, ("float", "int"): 20, ("float", "bool"): 23}
ROUND_CYCLES = {"f16": 31.5, "bf16": 7}
LOAD_CYCLES = 34        # a tt_ld<slot> call whose window holds the element


def node_cycles(n: IndexExpr) -> float:
    """One node's cycles beyond the integer index math the gather figure holds."""
    if n.op == "LOAD":
        return LOAD_CYCLES
    if n.op == "ROUND":
        return ROUND_CYCLES[n.arg]
    if n.op == "CAST":
        return CAST_CYCLES.get((n.src[0].dtype, n.dtype), 0)
    if any(s.dtype == "float" for s in n.src):
        return FLOAT_OP_CYCLES.get(n.op, 0)
    return 0


def index_math_cycles(exprs: list[IndexExpr | None]) -> float:
    """Per datum, a stream's expressions (index, validity, value; None: absent): the nodes that read a range and no
    buffer once per distinct structure (the C compiler evaluates a recurring pure expression once, and folds
    constants), the ones that load (and the math on what they load) at every occurrence in the rendered C."""
    key: dict[int, tuple] = {}          # node -> its structure (equal structures: one evaluation)
    loaded: dict[int, float] = {}       # node that loads -> the cycles of the rendered C under it
    pure: dict[tuple, float] = {}
    for e in exprs:
        for n in e.toposort() if e is not None else ():
            key[id(n)] = k = (n.op, n.dtype, n.arg, tuple(key[id(s)] for s in n.src))
            if n.op == "LOAD" or any(id(s) in loaded for s in n.src):
                loaded[id(n)] = node_cycles(n) + sum(loaded.get(id(s), 0) for s in n.src)
            elif k not in pure and n.ranges():
                pure[k] = node_cycles(n)
    return sum(pure.values()) + sum(loaded.get(id(e), 0) for e in exprs if e is not None)
