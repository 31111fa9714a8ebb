"""True/false streams computed from the ranges packed into the bits of one integer stream.

The frontend turns integer/bool index math that reaches the value part into computed streams (lowering/frontend.py
`computed_stream`): the reader evaluates each per element in C and the compute kernel loads it like an input, so each
one costs a Dst slot and a tile per tile step. Gradients through padded, pooled views carry several range predicates
at once (cumprod's backward: which window an element is in, whether it is a pad), enough to overflow the Dst slots and
stage the kernel for its streams alone.

Computed bool streams over the same ranges (a reduction's per-output and per-(output, k) streams are kept apart, as the
reduction families read them at different rates) become one int32 computed stream whose bit b is the b-th predicate;
each predicate is read back on the SFPU as (packed & 2**b) != 0. A point where the reader streams no datum (a pad of
the last tile) reads 0, every predicate False there, as each bool stream read before.

This module imports nothing of tinygrad's and nothing of `runtime`.
"""
from __future__ import annotations

from dataclasses import replace

from tt_backend.lowering.dag import ValueDAG
from tt_backend.lowering.index import IndexExpr

BITS = 31              # bits 0..30: the packed value stays a non-negative int32


def _packable(s) -> bool:
    return s.value is not None and s.dtype == "bool"


def pack_bool_streams(inputs: list, dag: ValueDAG) -> tuple[list, ValueDAG]:
    """(inputs, dag) with the computed bool streams of each range set packed BITS to an int32 stream (module
    docstring); unchanged when no two of them share their ranges. `inputs` are the frontend's StreamIndex objects."""
    groups: dict[frozenset, list[int]] = {}
    for j, s in enumerate(inputs):
        if _packable(s): groups.setdefault(s.ranges, []).append(j)
    chunks = [g[i:i + BITS] for g in groups.values() for i in range(0, len(g), BITS)]
    chunks = [c for c in chunks if len(c) > 1]
    if not chunks: return inputs, dag
    packed_of = {j: (n, b) for n, c in enumerate(chunks) for b, j in enumerate(c)}   # stream -> (chunk, bit)
    kept = [j for j in range(len(inputs)) if j not in packed_of]
    new_inputs = [inputs[j] for j in kept]
    renumber = {j: k for k, j in enumerate(kept)}
    for c in chunks:
        bits = [IndexExpr("WHERE", "int", (inputs[j].value, IndexExpr.const(1 << b), IndexExpr.const(0)), nonneg=True)
                for b, j in enumerate(c)]
        value = bits[0]
        for x in bits[1:]: value = IndexExpr("OR", "int", (value, x), nonneg=True)
        new_inputs.append(replace(inputs[c[0]], dtype="int32", value=value))

    out = ValueDAG()
    ids: dict[int, int] = {}
    loads: dict[int, int] = {}          # chunk -> its packed LOAD node in `out`
    ints: dict[int, int] = {}           # int32 constant -> its node in `out` (one node per constant, as the frontend)

    def int_const(v: int) -> int:
        if v not in ints: ints[v] = out.add("CONST", "int32", (), v)
        return ints[v]
    for nd in dag.nodes:
        if nd.op == "LOAD" and nd.arg in packed_of:
            n, b = packed_of[nd.arg]
            if n not in loads: loads[n] = out.add("LOAD", "int32", (), len(kept) + n)
            bit = out.add("AND", "int32", (loads[n], int_const(1 << b)))
            ids[nd.id] = out.add("CMPNE", "bool", (bit, int_const(0)))
        elif nd.op == "LOAD":
            ids[nd.id] = out.add("LOAD", nd.dtype, (), renumber[nd.arg])
        elif nd.op == "CONST" and nd.dtype == "int32" and type(nd.arg) is int:
            ids[nd.id] = int_const(nd.arg)
        else:
            ids[nd.id] = out.add(nd.op, nd.dtype, tuple(ids[s] for s in nd.srcs), nd.arg)
    out.out = ids[dag.out]
    return new_inputs, out
