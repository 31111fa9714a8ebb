"""lowering/index.py: index expressions built from tinygrad UOps render the C the kernels have always contained,
evaluate in numpy to what tinygrad's own ALU gives (negative operands, floor/trunc division and modulo, shifts, where,
casts), compile with a host C compiler to the same values, survive the kernel bundle's JSON, and answer the structural
questions the reader's run paths are chosen by."""
import itertools
import json
import os
import subprocess
import tempfile

import numpy as np
import pytest

from tinygrad import Tensor
from tinygrad.dtype import dtypes
from tinygrad.helpers import Context
from tinygrad.uop.ops import Ops, UOp, exec_alu

from tt_backend import placement_eval as PE
from tt_backend.chip.errors import UnsupportedOp
from tt_backend.lowering.frontend import affine, index_expr
from tt_backend.lowering.index import IndexExpr, grid, render_c_nested

from tests.support import HOST_CC

W, B = dtypes.weakint, dtypes.bool
SIZES = (6, 5, 4)
R0, R1, R2 = (UOp.range(n, k) for k, n in enumerate(SIZES))
RVAR = {R0: 0, R1: 1, R2: 2}


def c(v, dt=W): return UOp(Ops.CONST, dt, arg=v)
def alu(op, *s, dt=W): return UOp(op, dt, tuple(s))   # explicit ops: nothing is simplified away


NEG = alu(Ops.SUB, R0, c(3))            # -3..2: the signed C paths
LIN = alu(Ops.SUB, alu(Ops.ADD, alu(Ops.MUL, R0, c(5)), R1), c(7))   # -7..22
# (name, UOp, the C text the frontend rendered before index expressions were structured)
CASES = [
    ("range", R1, "r1"),
    ("const", c(7), "7"),
    ("negative const", c(-3), "(-3)"),
    ("true", c(True, B), "1"),
    ("false", c(False, B), "0"),
    ("affine", alu(Ops.ADD, alu(Ops.MUL, R0, c(20)), alu(Ops.ADD, alu(Ops.MUL, R1, c(4)), R2)),
     "((r0 * 20) + ((r1 * 4) + r2))"),
    ("sub", NEG, "(r0 - 3)"),
    ("neg", alu(Ops.NEG, R1), "(-r1)"),
    ("mul negative", alu(Ops.MUL, R1, c(-2)), "(r1 * (-2))"),
    ("cdiv", alu(Ops.CDIV, R0, c(4)), "(r0 / 4)"),
    ("cdiv negative", alu(Ops.CDIV, NEG, c(2)), "((int32_t)((r0 - 3)) / (int32_t)(2))"),
    ("cdiv negative divisor", alu(Ops.CDIV, NEG, c(-2)), "((int32_t)((r0 - 3)) / (int32_t)((-2)))"),
    ("cmod", alu(Ops.CMOD, R0, c(4)), "(r0 % 4)"),
    ("cmod negative", alu(Ops.CMOD, NEG, c(2)), "((int32_t)((r0 - 3)) % (int32_t)(2))"),
    ("floordiv", alu(Ops.FLOORDIV, R0, c(4)), "(r0 / 4)"),
    ("floordiv negative", alu(Ops.FLOORDIV, NEG, c(2)),
     "(((int32_t)((r0 - 3)) >= 0) ? ((int32_t)((r0 - 3)) / 2) : (((int32_t)((r0 - 3)) - (2) + 1) / 2))"),
    ("floormod", alu(Ops.FLOORMOD, R0, c(4)), "(r0 % 4)"),
    ("floormod negative", alu(Ops.FLOORMOD, NEG, c(4)),
     "((int32_t)((r0 - 3)) - (((int32_t)((r0 - 3)) >= 0) ? ((int32_t)((r0 - 3)) / 4) : "
     "(((int32_t)((r0 - 3)) - (4) + 1) / 4)) * (4))"),
    ("shl", alu(Ops.SHL, R1, c(2)), "(r1 << 2)"),
    ("shr", alu(Ops.SHR, R0, c(1)), "(r0 >> 1)"),
    ("shr negative", alu(Ops.SHR, NEG, c(1)), "((int32_t)((r0 - 3)) >> 1)"),
    ("shr negative by a range", alu(Ops.SHR, LIN, R2), "((int32_t)((((r0 * 5) + r1) - 7)) >> r2)"),
    ("max", alu(Ops.MAX, R0, R1), "((r0) > (r1) ? (r0) : (r1))"),
    ("max negative", alu(Ops.MAX, NEG, c(0)), "((int32_t)((r0 - 3)) > (int32_t)(0) ? ((r0 - 3)) : (0))"),
    ("cmplt", alu(Ops.CMPLT, R0, c(3), dt=B), "(r0 < 3)"),
    ("cmplt negative", alu(Ops.CMPLT, NEG, c(-1), dt=B), "((int32_t)((r0 - 3)) < (int32_t)((-1)))"),
    ("cmpne", alu(Ops.CMPNE, R0, R1, dt=B), "(r0 != r1)"),
    ("cmpeq negative", alu(Ops.CMPEQ, NEG, c(-2), dt=B), "((r0 - 3) == (-2))"),
    ("and bool", alu(Ops.AND, alu(Ops.CMPLT, R0, c(3), dt=B), alu(Ops.CMPNE, R1, c(2), dt=B), dt=B),
     "((r0 < 3) && (r1 != 2))"),
    ("or bool", alu(Ops.OR, alu(Ops.CMPLT, R0, c(3), dt=B), c(False, B), dt=B), "((r0 < 3) || 0)"),
    ("and int", alu(Ops.AND, R0, c(3)), "(r0 & 3)"),
    ("or int", alu(Ops.OR, R0, c(8)), "(r0 | 8)"),
    ("xor", alu(Ops.XOR, R0, R1), "(r0 ^ r1)"),
    ("where", alu(Ops.WHERE, alu(Ops.CMPLT, R1, c(2), dt=B), NEG, alu(Ops.MUL, R1, c(3))),
     "((r1 < 2) ? (r0 - 3) : (r1 * 3))"),
    ("cast to bool", alu(Ops.CAST, alu(Ops.FLOORMOD, NEG, c(3)), dt=B),
     "(((int32_t)((r0 - 3)) - (((int32_t)((r0 - 3)) >= 0) ? ((int32_t)((r0 - 3)) / 3) : "
     "(((int32_t)((r0 - 3)) - (3) + 1) / 3)) * (3)) != 0)"),
    ("cast bool to int", alu(Ops.CAST, alu(Ops.CMPLT, R0, R1, dt=B), dt=dtypes.int32), "(r0 < r1)"),
    ("shared subexpression", alu(Ops.ADD, alu(Ops.MUL, alu(Ops.FLOORDIV, LIN, c(3)), c(11)), alu(Ops.FLOORMOD, LIN, c(3))),
     "(((((int32_t)((((r0 * 5) + r1) - 7)) >= 0) ? ((int32_t)((((r0 * 5) + r1) - 7)) / 3) : "
     "(((int32_t)((((r0 * 5) + r1) - 7)) - (3) + 1) / 3)) * 11) + ((int32_t)((((r0 * 5) + r1) - 7)) - "
     "(((int32_t)((((r0 * 5) + r1) - 7)) >= 0) ? ((int32_t)((((r0 * 5) + r1) - 7)) / 3) : "
     "(((int32_t)((((r0 * 5) + r1) - 7)) - (3) + 1) / 3)) * (3)))"),
]
IDS = [name for name, _, _ in CASES]


def tinygrad_value(u: UOp, point: tuple[int, ...]):
    """u at one iteration point by tinygrad's own ALU (exec_alu), the independent reference."""
    if u.op is Ops.RANGE: return point[RVAR[u]]
    if u.op is Ops.CONST: return u.arg
    srcs = [tinygrad_value(s, point) for s in u.src]
    if u.op is Ops.CAST: return bool(srcs[0]) if u.dtype == B else int(srcs[0])
    return exec_alu(u.op, u.dtype, srcs)


def full(e: IndexExpr) -> np.ndarray:
    return np.broadcast_to(e.evaluate(grid(SIZES)), SIZES)


@pytest.mark.parametrize("name,u,want", CASES, ids=IDS)
def test_c_text_is_unchanged(name, u, want):
    assert index_expr(u, RVAR).render_c() == want


@pytest.mark.parametrize("name,u,want", CASES, ids=IDS)
def test_numpy_equals_tinygrad(name, u, want):
    got = full(index_expr(u, RVAR))
    for point in itertools.product(*map(range, SIZES)):
        assert got[point] == tinygrad_value(u, point), (name, point)


@pytest.mark.needs_host_cc
def test_compiled_c_equals_numpy():
    """The C forms over uint32 ranges (as in the reader/writer templates), compiled and run, give numpy's values."""
    exprs = [index_expr(u, RVAR) for _, u, _ in CASES]
    loops = "".join(f"for (uint32_t r{k} = 0; r{k} < {n}u; r{k}++) " for k, n in enumerate(SIZES))
    lines = ["#include <stdint.h>", "#include <stdio.h>", "int main(void) {"]
    lines += [f'  {loops}printf("%d\\n", (int)(int32_t)({e.render_c()}));' for e in exprs]
    lines.append("  return 0; }")
    with tempfile.TemporaryDirectory() as d:
        src, exe = os.path.join(d, "idx.c"), os.path.join(d, "idx")
        open(src, "w").write("\n".join(lines))
        subprocess.run([HOST_CC, "-std=c99", "-O0", "-Wall", "-Werror", "-o", exe, src], check=True)
        out = iter(subprocess.run([exe], capture_output=True, text=True, check=True).stdout.split())
    for name, e in zip(IDS, exprs):
        want = full(e).reshape(-1).astype(np.int64)
        got = np.array([int(next(out)) for _ in range(want.size)])
        np.testing.assert_array_equal(got, want, err_msg=name)


@pytest.mark.needs_host_cc
def test_nested_c_equals_numpy():
    """render_c_nested (the reduction reader's nested walk): each case over nested loops r0 { r1 { r2 } } with its
    loop-invariant terms hoisted into their loops, compiled and run, gives numpy's values; and terms are hoisted."""
    exprs = [index_expr(u, RVAR) for _, u, _ in CASES]
    decls, texts = render_c_nested(exprs, {0: 0, 1: 1, 2: 2}, 3, "h")
    assert decls[0] and decls[1], "terms of the outer ranges are computed in their loops"
    lines = ["#include <stdint.h>", "#include <stdio.h>", "int main(void) {"]
    for k, n in enumerate(SIZES):
        lines.append(f"for (uint32_t r{k} = 0; r{k} < {n}u; r{k}++) {{")
        lines += decls[k]
    lines += [f'  printf("%d\\n", (int)(int32_t)({t}));' for t in texts]
    lines.append("}" * len(SIZES) + " return 0; }")
    with tempfile.TemporaryDirectory() as d:
        src, exe = os.path.join(d, "idx.c"), os.path.join(d, "idx")
        open(src, "w").write("\n".join(lines))
        subprocess.run([HOST_CC, "-std=c99", "-O0", "-Wall", "-Werror", "-o", exe, src], check=True)
        out = subprocess.run([exe], capture_output=True, text=True, check=True).stdout.split()
    got = np.array([int(v) for v in out]).reshape(*SIZES, len(exprs))
    for j, (name, e) in enumerate(zip(IDS, exprs)):
        np.testing.assert_array_equal(got[..., j], full(e).astype(np.int64), err_msg=name)


@pytest.mark.parametrize("name,u,want", CASES, ids=IDS)
def test_json_roundtrip(name, u, want):
    e = index_expr(u, RVAR)
    back = IndexExpr.from_json(json.loads(json.dumps(e.to_json())))
    assert back == e and back.render_c() == want
    np.testing.assert_array_equal(full(back), full(e))
    assert len(back.toposort()) == len(e.toposort())   # shared sub-expressions stay shared


def test_shared_subexpression_is_one_node():
    e = index_expr(CASES[IDS.index("shared subexpression")][1], RVAR)
    lin = [n for n in e.toposort() if n.op == "SUB" and n.src[1] == IndexExpr.const(7)]
    assert len(lin) == 1 and len(e.to_json()) == len(e.toposort())


def test_structure():
    e = index_expr(CASES[IDS.index("affine")][1], RVAR)
    assert e.affine() == {0: 20, 1: 4, 2: 1}
    assert e.coefficients(3) == (20, 4, 1, 0) and e.ranges() == {0, 1, 2}
    assert index_expr(NEG, RVAR).coefficients(3) == (1, 0, 0, -3)
    assert index_expr(alu(Ops.MUL, R0, R1), RVAR).affine() is None                # a product of ranges
    assert index_expr(alu(Ops.FLOORDIV, R0, c(4)), RVAR).coefficients(3) is None  # not affine
    assert index_expr(c(5), RVAR).ranges() == frozenset()
    # two ranges numbered alike (an aliased reduce range) add up
    assert index_expr(alu(Ops.ADD, alu(Ops.MUL, R0, c(3)), R1), {R0: 0, R1: 0}).coefficients(1) == (4, 0)
    # the UOp-level view (matmul matching, range order) keys the same coefficients by RANGE UOp
    assert affine(alu(Ops.ADD, alu(Ops.MUL, R2, c(3)), NEG)) == {R2: 3, R0: 1, None: -3}
    assert affine(alu(Ops.CMOD, R0, c(3))) is None
    assert affine(UOp(Ops.NOOP, W)) is None


def test_builders_and_validity():
    r0, r1 = IndexExpr.range_var(0), IndexExpr.range_var(1)
    assert (r0 * 100 + r1).render_c() == "((r0 * 100) + r1)"
    assert (2499 - r0).render_c() == "(2499 - r0)"
    assert r1.lt(32).render_c() == "(r1 < 32)"                            # both sides >= 0: unsigned compare
    assert (r0 - 3).lt(0).render_c() == "((int32_t)((r0 - 3)) < (int32_t)(0))"
    valid = IndexExpr.all_of([r0.lt(4), r1.lt(3)])
    assert valid.render_c() == "(r0 < 4) && (r1 < 3)" and IndexExpr.all_of([r1.lt(3)]) == r1.lt(3)
    g = grid((6, 5))
    np.testing.assert_array_equal(np.broadcast_to(valid.evaluate(g), (6, 5)),
                                  (np.arange(6)[:, None] < 4) & (np.arange(5)[None, :] < 3))
    assert valid.ranges() == {0, 1} and valid.affine() is None
    np.testing.assert_array_equal(IndexExpr.const(0).flat(()), [0])   # a kernel with no ranges: one point
    with pytest.raises(ValueError, match="unknown index op"):
        IndexExpr("FDIV", "int", (r0, r1))


def test_float_index_math_renders_as_c_float():
    """float32 index math (interpolate's scaled index): the constant as an exact float32 literal, casts truncating
    toward zero as C and tinygrad do; numpy evaluates it in float32 (compiled against it: test_frontend's C check);
    the structure ships through JSON. A non-finite constant has no index meaning and is refused."""
    scale = 13 / 9   # not a float32 value: the literal is its float32 rounding
    u = alu(Ops.CAST, alu(Ops.MUL, alu(Ops.CAST, R0, dt=dtypes.float32), c(scale, dtypes.float32), dt=dtypes.float32),
            dt=dtypes.int32)
    e = index_expr(u, RVAR)
    assert e.render_c() == f"(uint32_t)(int32_t)(((float)(int32_t)(r0) * ({float(np.float32(scale)).hex()}f)))"
    np.testing.assert_array_equal(full(e)[:, 0, 0], (np.arange(6, dtype=np.float32) * np.float32(scale)).astype(int))
    assert IndexExpr.from_json(json.loads(json.dumps(e.to_json()))) == e
    assert [n.dtype for n in e.toposort()] == ["int", "float", "float", "float", "int"]
    inf = alu(Ops.MUL, alu(Ops.CAST, R0, dt=dtypes.float32), c(float("inf"), dtypes.float32), dt=dtypes.float32)
    with pytest.raises(UnsupportedOp, match="non-finite constant"):
        index_expr(inf, RVAR).render_c()
    assert IndexExpr.from_json(json.loads(json.dumps(e.to_json()))) == e
    assert [n.dtype for n in e.toposort()] == ["int", "float", "float", "float", "int"]


# ---------------------------------------------------------------------------------- TT_CHECK through the bundle

@pytest.mark.needs_cc
@pytest.mark.parametrize("fn", [
    lambda t: t.pad(((1, 2), (0, 3))) * 2,                      # gated reads: a validity expression
    lambda t: -t.T.reshape(8, 33).flip(1),                      # a permuted, reversed read (division and modulo)
    lambda t: t + Tensor.arange(33).float(),                    # a computed stream (arange)
    lambda t: (t * 0).tril() + t.triu(1),                       # computed masks (comparisons of ranges)
], ids=["pad", "transpose_flip", "arange", "tril_triu"])
def test_tt_check_reads_structured_indices(monkeypatch, fn):
    """TT_CHECK=1 end to end on the emulator: the reference is built from the index expressions the bundle carries
    as JSON (placement_eval.check). The ops are exact, so a wrong gather or scatter shows as a nonzero error."""
    monkeypatch.setenv("TT_CHECK", "1")
    PE.CHECKS.clear()
    x = np.random.default_rng(5).standard_normal((8, 33)).astype(np.float32)
    got = fn(Tensor(x, device="TT")).numpy()
    with Context(DEV="PYTHON"):
        want = fn(Tensor(x, device="PYTHON")).numpy()
    np.testing.assert_array_equal(got, want)
    assert PE.CHECKS and all(c["measured_error"] == 0 for c in PE.CHECKS), PE.CHECKS
