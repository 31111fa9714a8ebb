"""What a stream's index math adds per datum to a per-datum mover (lowering/families/mover_cost.py), in emulated
cycles: the reader and writer evaluate the stream's index, validity or value expression (lowering/index.py, rendered
to C) once per datum on their RISC-V core, which has no FPU (rv32im: runtime/compile.py), so float index math
(interpolate's scaled indices, float16 index buffers) runs in libgcc's soft-float routines.

Priced per distinct node of the stream's expressions (the C compiler evaluates a shared sub-expression once):

* an integer op (`integer`: the elementwise gather, whose loop figure mover_cost.GATHER_LOOP holds none; the other
  per-datum modes' figures were measured with their integer index math in them): one instruction (a DIVU, or a
  multiply and shifts, for a division by a constant), four for a floor division or modulo of a possibly negative
  numerator (lowering/index.py _c_floordiv); the conjunction of validity terms nothing beyond its terms;
* a float op: the libgcc routine's instruction count on the emulator's RV32 core (one cycle per instruction), measured
  by a loop of 512 calls on varying inputs against the same loop without the op (gcc -O2 -march=rv32im, the kernels'
  flags): add 62, subtract 66, multiply 108, divide 100, a comparison 23; int -> float 46, float -> int 20;
  rounding a float32 to float16 31.5 (tt_convert.h tt_round_f16), to bfloat16 7;
* a load from a buffer (index math reading an index tensor: x[idx], templates/blocks/index_loads.c.j2): a call of
  tt_ld<slot>, whose path when the window holds the element is 34 instructions (counted in the compiled reader of
  x[idx] over a 40 x 33 buffer: the call, saving and restoring four registers, the bounds and window checks, the
  load). Such a call is not pure (a miss reads the NoC), so the compiler evaluates it, and the math on its result,
  at every place the rendered C has it: x[idx] with idx wrapped for negative values in the validity and the index
  renders nine calls per datum, and its reader runs six of them per datum (below). gcc inlines a loader called from
  at most INLINE_LOAD_SITES places in the reader's C (`inlined_loads`), where a load is 15 cycles (LOAD_INLINED_CYCLES:
  the bounds and window checks and the load, its arguments already in registers). Window misses (a data-dependent
  index into a buffer larger than its window) are not priced.

A load, and the math on what it loads, is priced as often as the reader runs it (`evaluated_cycles`): the C form of
a conditional (lowering/index.py OPS) evaluates its condition and one of its two branches (priced the costlier: the
data decide, and a gated value is mostly taken), `&&` every term (a validity is mostly true), max both operands and
then the larger once more, a floor division or modulo of a possibly negative numerator that numerator in its test and
again in the branch taken. Measured as brisc busy time per datum (one core, one tile, TT_DUMP trace.json: the slope
over 256, 512, 768 and 1024 datums, plus the 9.2 cycles of the slot past the end each datum replaces, counted in the
compiled loop): x[idx] of a 40 x 32 buffer (nine calls rendered, six run) 235 a datum, priced 235.3 (all nine: 337.3);
x.gather(1, idx) of a 32 x 50 one (three inlined loads) 70.7, 45 of them the loads.
"""
from __future__ import annotations

import numpy as np

from tt_backend.lowering.index import IndexExpr

# libgcc's soft-float routines, cycles per call (measured as above), by index op on float operands
FLOAT_OP_CYCLES = {"ADD": 62, "SUB": 66, "MUL": 108, "CDIV": 100, "FLOORDIV": 100,
                   "CMPLT": 23, "CMPNE": 23, "CMPEQ": 23, "MAX": 23}
# C casts between index dtypes (lowering/index.py C_CAST), (source, result) -> cycles
CAST_CYCLES = {("int", "float"): 46, ("bool", "float"): 46, ("float", "int"): 20, ("float", "bool"): 23}
ROUND_CYCLES = {"f16": 31.5, "bf16": 7}
INT_OP_CYCLES = 1
INT_SIGNED_FLOOR_CYCLES = 4     # FLOORDIV / FLOORMOD whose numerator may be negative
FREE_INT_OPS = ("ALL", "RANGE", "CONST")     # the loop variables and literals are operands, not ops
LOAD_CYCLES = 34        # a tt_ld<slot> call whose window holds the element
LOAD_INLINED_CYCLES = 15    # the same load inlined at its call site
# gcc 12 -O2 inlines the loader (a static inline function) at up to four call sites of the reader; at five or six it
# keeps the call (growth limits: a fifth call site kept x.gather's loader out of line, a sixth x[idx]'s)
INLINE_LOAD_SITES = 4
# the C forms of lowering/index.py OPS that evaluate an operand more than once: a floor division or modulo of a
# possibly negative numerator (its test, then the branch taken: _c_floordiv), per operand
_SIGNED_FLOOR = {"FLOORDIV": (2, 2), "FLOORMOD": (3, 3)}


def evaluated_cycles(n: IndexExpr, operands: list[float]) -> float:
    """What evaluating `n`'s operands costs per datum, given each operand's cycles (module docstring): a conditional
    its condition and the costlier branch (a gate's value, where the data mostly take it), max both operands in its
    test and the costlier once more."""
    if n.op == "WHERE":
        return operands[0] + max(operands[1:])
    if n.op == "MAX":
        return sum(operands) + max(operands)
    if n.op in _SIGNED_FLOOR and not n.nonneg:
        return sum(m * c for m, c in zip(_SIGNED_FLOOR[n.op], operands))
    return sum(operands)


def inlined_loads(exprs: list[IndexExpr | None]) -> frozenset[int]:
    """The buffer slots whose loader gcc inlines in a reader that renders `exprs` (every stream's index and
    validity): those called from at most INLINE_LOAD_SITES places of the C text."""
    text = " ".join(e.render_c() for e in exprs if e is not None)
    slots = frozenset().union(*(e.loads() for e in exprs if e is not None))
    return frozenset(k for k in slots if text.count(f"tt_ld{k}(") <= INLINE_LOAD_SITES)


def node_cycles(n: IndexExpr, integer: bool, inlined: frozenset[int] = frozenset()) -> float:
    """One node's cycles; integer ops only when `integer`; loads from the slots in `inlined` inlined."""
    if n.op == "LOAD":
        return LOAD_INLINED_CYCLES if n.arg in inlined else LOAD_CYCLES
    if n.op == "ROUND":
        return ROUND_CYCLES[n.arg]
    if n.op == "CAST" and (n.src[0].dtype, n.dtype) in CAST_CYCLES:
        return CAST_CYCLES[n.src[0].dtype, n.dtype]
    if any(s.dtype == "float" for s in n.src):
        return FLOAT_OP_CYCLES.get(n.op, 0)
    if not integer or n.op in FREE_INT_OPS or n.op == "CAST":
        return 0
    return INT_SIGNED_FLOOR_CYCLES if n.op in ("FLOORDIV", "FLOORMOD") and not n.nonneg else INT_OP_CYCLES


def index_math_cycles(exprs: list[IndexExpr | None], integer: bool = False,
                      inlined: frozenset[int] = frozenset()) -> float:
    """Per datum, a stream's expressions (index, validity, value; None: absent): the nodes that read a range and no
    buffer once per distinct structure (the C compiler evaluates a recurring pure expression once, and folds
    constants), the ones that load (and the math on what they load) as often as the reader evaluates them
    (`evaluated_cycles`); integer ops when `integer`; the loaders of the slots in `inlined` inlined
    (`inlined_loads`)."""
    key: dict[int, tuple] = {}          # node -> its structure (equal structures: one evaluation)
    loaded: dict[int, float] = {}       # node that loads -> the cycles of the rendered C under it
    pure: dict[tuple, float] = {}
    for e in exprs:
        for n in e.toposort() if e is not None else ():
            key[id(n)] = k = (n.op, n.dtype, n.arg, tuple(key[id(s)] for s in n.src))
            if n.op == "LOAD" or any(id(s) in loaded for s in n.src):
                loaded[id(n)] = node_cycles(n, integer, inlined) + evaluated_cycles(
                    n, [loaded.get(id(s), 0) for s in n.src])
            elif k not in pure and n.ranges():
                pure[k] = node_cycles(n, integer, inlined)
    return sum(pure.values()) + sum(loaded.get(id(e), 0) for e in exprs if e is not None)


def validity_terms(valid: IndexExpr | None) -> list[IndexExpr]:
    """A validity's terms in the order C's `&&` evaluates them (the conjunction ALL and bool ANDs flattened)."""
    if valid is None:
        return []
    if valid.op == "ALL" or valid.op == "AND" and valid.dtype == "bool":
        return [t for s in valid.src for t in validity_terms(s)]
    return [valid]


def inside_fraction(valid: IndexExpr | None, axes: list[np.ndarray]) -> float:
    """The share of the elements whose range values `axes` gives where the validity holds (all without one)."""
    if valid is None:
        return 1.0
    return float(np.broadcast_to(valid.evaluate(axes), np.broadcast_shapes(*(a.shape for a in axes))).mean())


def gated_math_cycles(index: IndexExpr | None, valid: IndexExpr | None, axes: list[np.ndarray]) -> float:
    """Per element, the integer index math of a reader that tests the validity first and computes the index only
    where it holds (templates/blocks/chunks.c.j2 `<operand>_index`): each validity term where the terms before it
    held (C's `&&`), the index (if any: None for a conjunction alone) where all held, over the elements whose range
    values `axes` gives; a pure node priced once, where it is first reached (the compiler evaluates a recurring
    expression once)."""
    key: dict[int, tuple] = {}
    seen: set[tuple] = set()

    def new_cycles(e: IndexExpr) -> float:
        out = 0.0
        for n in e.toposort():
            key[id(n)] = k = (n.op, n.dtype, n.arg, tuple(key[id(s)] for s in n.src))
            if k not in seen and n.ranges():
                seen.add(k)
                out += node_cycles(n, integer=True)
        return out
    reach = np.ones(np.broadcast_shapes(*(a.shape for a in axes)), bool)
    total = 0.0
    for term in validity_terms(valid):
        total += reach.mean() * new_cycles(term)
        reach = reach & np.broadcast_to(term.evaluate(axes), reach.shape).astype(bool)
    return total + (reach.mean() * new_cycles(index) if index is not None else 0.0)
