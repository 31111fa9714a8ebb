"""Value-DAG rewrites that run before instruction selection. Each rule is one function from DAG to DAG.

`fuse_multiply_add`: float32 `a*b + c`, `a*b - c` and `c - a*b` become one SFPMAD (MULADD / MULSUB / NMULADD) when
the product has no other use. One rounding instead of two: that is both half the instructions and what tinygrad's CPU
device computes (clang contracts these expressions into fma). SFPMAD is "partially fused" (docs/isa.md §3), so in
rare cancellation cases it differs from an exact fma by the product's dropped low bits. bfloat16 expressions are left
alone: tinygrad rounds the bf16 product before the add.

`fuse_divide`: float `a * (1/b)` (tinygrad's division) becomes DIV(a, b), the correctly rounded quotient
(lowering/codegen/sfpu_ops.py `f_div`). tinygrad's CPU device does the same rewrite (codegen/decomp `a*(1/b) -> a/b`
for renderers with FDIV) whatever else uses 1/b, before anything could contract the product into an fma: so does
this one (it runs before `fuse_multiply_add`), the reciprocal staying for its other uses. Two roundings instead
would put floor(a/b) and a % b an integer off wherever a/b is an integer. The CPU device rewrites bfloat16 and
float16 divisions the same way (its C: the float quotient of the two narrow values, rounded once to the narrow type;
DIV's bfloat16 rounding is appended by sfpu_ops.rounder). Rounding 1/b to bfloat16 first, then the product, is up to
a bfloat16 step off: floor(a/b) and a % b then differ by b (found through random program 6517).

`keep_uniform_reciprocals`: marks the float32 `a * (1/b)` whose b is computed from uniform inputs alone (one value
per tile: a broadcast scalar, `LoweredKernel.uniform_inputs`) so that `fuse_divide` leaves it a product: the
reciprocal is then computed once per tile (sfpu_codegen's hoisting) and each row pays one multiply instead of a
division. Two roundings instead of one (within an ulp of the quotient, not always its bits): the placement offers
this graph as a variant (lowering/placement/search.py), taken only within an error budget.

`where_on_integer`: WHERE(x != 0, a, b) with an int32 or uint32 x becomes WHERE(x, a, b). The WHERE's SFPSETCC NE0
tests the condition's 32 bits against zero (docs/isa.md §3.3), the very test the CMPNE computes into a 0/1 value first
(five words, sfpu_ops.i_ne): a predicate packed into bits (lowering/bool_pack.py) is read as (packed & 2**b) != 0,
and every such test that only selects saves them. The CMPNE stays for its other uses.

`scale_denormal_constants`: float32 `a * c` with a denormal constant c (tinygrad folds `x / 3e38` into `x * 3.3e-39`)
becomes `(a * (c * 2**64)) * 2**-64`: the SFPU reads a denormal operand as zero, the scaled one it reads right, and
multiplying by 2**-64 is exact unless the product is itself denormal (then it is flushed, as every SFPU result is).
"""
from __future__ import annotations

import numpy as np

from tt_backend.lowering.dag import ValueDAG, VNode

KEEP_RECIPROCAL = "keep reciprocal"       # a MUL's arg: fuse_divide leaves it a product
F32_MIN_NORMAL = 2.0 ** -126
DENORMAL_SCALE = 2.0 ** 64
FLOAT_DTYPES = ("float32", "bfloat16", "float16")
WORD_CONDITIONS = ("int32", "uint32")     # condition dtypes a WHERE tests as 32-bit words (where_on_integer)


def fuse_multiply_add(dag: ValueDAG) -> ValueDAG:
    uses = dag.uses()
    nodes = list(dag.nodes)

    def fusable(i: int) -> bool:
        n = nodes[i]
        return n.op == "MUL" and n.dtype == "float32" and uses[i] == 1

    for k, n in enumerate(nodes):
        if n.dtype != "float32" or n.op not in ("ADD", "SUB"):
            continue
        x, y = n.srcs
        if fusable(x):                       # a*b + y  /  a*b - y
            a, b = nodes[x].srcs
            nodes[k] = VNode(k, "MULADD" if n.op == "ADD" else "MULSUB", n.dtype, (a, b, y))
        elif fusable(y):                     # x + a*b  /  x - a*b
            a, b = nodes[y].srcs
            nodes[k] = VNode(k, "MULADD" if n.op == "ADD" else "NMULADD", n.dtype, (a, b, x))
    # the fused MULs are now dead; compile_sfpu schedules only what the output reaches
    return ValueDAG(nodes, dag.out)


def fuse_divide(dag: ValueDAG) -> ValueDAG:
    nodes = list(dag.nodes)

    def float_reciprocal(i: int, dtype: str) -> bool:
        n = nodes[i]   # (tinygrad's AST may take the reciprocal of an int32 value: that one stays as it is)
        return n.op == "RECIPROCAL" and nodes[n.srcs[0]].dtype == n.dtype == dtype

    for k, n in enumerate(nodes):
        if (n.op != "MUL" or n.dtype not in FLOAT_DTYPES or n.arg == KEEP_RECIPROCAL
                or any(nodes[s].dtype != n.dtype for s in n.srcs)):
            continue
        x, y = n.srcs
        if float_reciprocal(y, n.dtype):
            nodes[k] = VNode(k, "DIV", n.dtype, (x, nodes[y].srcs[0]))
        elif float_reciprocal(x, n.dtype):
            nodes[k] = VNode(k, "DIV", n.dtype, (y, nodes[x].srcs[0]))
    return ValueDAG(nodes, dag.out)


def cpu_divisions(dag: ValueDAG) -> ValueDAG:
    """The graph as tinygrad's CPU device computes it: every float `a * (1/b)` one rounded quotient, including the
    products `keep_uniform_reciprocals` marked (the placement's reference measures that choice against this)."""
    return fuse_divide(ValueDAG([VNode(n.id, n.op, n.dtype, n.srcs, None) if n.arg == KEEP_RECIPROCAL else n
                                 for n in dag.nodes], dag.out))


def uniform_nodes(nodes: list[VNode], uniform: frozenset[int]) -> set[int]:
    """The nodes (topologically ordered, ids = positions) whose value is the same at every point: LOADs of the
    `uniform` inputs, constants, and ops of such nodes only."""
    uni: set[int] = set()
    for n in nodes:
        if n.arg in uniform if n.op == "LOAD" else n.op == "CONST" or (n.srcs and all(s in uni for s in n.srcs)):
            uni.add(n.id)
    return uni


def keep_uniform_reciprocals(dag: ValueDAG, uniform: frozenset[int]) -> ValueDAG:
    uni = uniform_nodes(dag.nodes, uniform)
    recip = lambda i: dag.nodes[i].op == "RECIPROCAL" and dag.nodes[i].dtype == "float32" and i in uni
    return ValueDAG([VNode(n.id, n.op, n.dtype, n.srcs, KEEP_RECIPROCAL)
                     if n.op == "MUL" and n.dtype == "float32" and any(recip(s) for s in n.srcs) else n
                     for n in dag.nodes], dag.out)


def where_on_integer(dag: ValueDAG) -> ValueDAG:
    nodes = dag.nodes

    def zero(i: int) -> bool:
        return nodes[i].op == "CONST" and nodes[i].arg == 0

    def word_test(i: int) -> int | None:
        """x when node i is x != 0 (either side) on an int32/uint32 x, else None."""
        n = nodes[i]
        if n.op != "CMPNE" or nodes[n.srcs[0]].dtype not in WORD_CONDITIONS:
            return None
        x, y = n.srcs
        return x if zero(y) else y if zero(x) else None

    return ValueDAG([VNode(n.id, n.op, n.dtype, (x, *n.srcs[1:]), n.arg)
                     if n.op == "WHERE" and (x := word_test(n.srcs[0])) is not None else n
                     for n in nodes], dag.out)


def scale_denormal_constants(dag: ValueDAG) -> ValueDAG:
    def denormal(i: int) -> bool:
        n = dag.nodes[i]
        # (a value below half the smallest denormal rounds to a zero constant: nothing to scale)
        return n.op == "CONST" and n.dtype == "float32" and 0 < abs(n.arg) < F32_MIN_NORMAL and np.float32(n.arg) != 0

    def scaled_product(n: VNode) -> bool:
        return n.op == "MUL" and n.dtype == "float32" and any(denormal(s) for s in n.srcs)

    if not any(scaled_product(n) for n in dag.nodes):
        return dag
    out, new = ValueDAG(), {}
    for n in dag.nodes:                     # rebuilt in order: the inserted nodes keep the DAG topological
        if scaled_product(n):
            # the constant as the float32 the CPU device holds (rounded to a denormal), then scaled exactly
            srcs = tuple(out.add("CONST", "float32", (), float(np.float32(dag.nodes[s].arg)) * DENORMAL_SCALE)
                         if denormal(s) else new[s] for s in n.srcs)
            unscale = out.add("CONST", "float32", (), 1 / DENORMAL_SCALE)
            new[n.id] = out.add("MUL", "float32", (out.add("MUL", "float32", srcs), unscale))
        else:
            new[n.id] = out.add(n.op, n.dtype, tuple(new[s] for s in n.srcs), n.arg)
    out.out = new[dag.out if dag.out >= 0 else len(dag.nodes) - 1]
    return out
