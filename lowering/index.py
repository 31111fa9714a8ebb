"""Index expressions: what a stream's reader or writer computes per iteration point (the element index into its
buffer, the validity of a padded read, the datum of a computed stream) as a small expression tree over the kernel's
ranges, independent of tinygrad.

The frontend builds them from tinygrad's UOps (lowering/frontend.py `index_expr`); the templates get their C text
(`render_c`); TT_CHECK evaluates them with numpy in the device process (`evaluate`, carried through the kernel bundle
by `to_json`/`from_json`); the reader picks its run paths from their structure (`affine`, `coefficients`, `ranges`).

Each op is defined once, in OPS, in both languages. C: ranges are uint32; +, -, * give the same bits modulo 2^32
whatever the signedness, so only comparisons, division, modulo, right shifts and max need signed casts, and only
when an operand can be negative (`nonneg` False: tinygrad's bounds, recorded when the frontend builds the node).
numpy: the exact integer meaning in int64, which the C forms implement for values that fit in int32.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from tt_backend.chip.errors import UnsupportedOp

DTYPES = ("int", "bool", "float")   # float: tinygrad's float32 index math (interpolate's scaled indices), C float


@dataclass(frozen=True)
class IndexOp:
    c: Callable[..., str]           # (node, *operand C texts) -> C99 text
    np: Callable[..., np.ndarray]   # (node, *operand values) -> values (int64 / bool / float64 arrays)


def _signed(s: str) -> str:
    return f"(int32_t)({s})"


def _float_operands(n) -> bool:
    """A float32 operand (C float arithmetic: the baby cores' soft float, IEEE round-to-nearest-even like tinygrad's
    CPU device): comparisons and max need no signed casts."""
    return any(s.dtype == "float" for s in n.src)


# C casts between the index dtypes (source dtype, result dtype): float -> int truncates toward zero as C and tinygrad do
C_CAST = {("int", "float"): "(float)(int32_t)({})", ("bool", "float"): "(float)({})",
          ("float", "int"): "(uint32_t)(int32_t)({})", ("float", "bool"): "({} != 0.0f)",
          ("int", "bool"): "({} != 0)", ("bool", "bool"): "({} != 0)", ("float", "float"): "{}"}


def _c_floordiv(a: str, b: str) -> str:   # floor division for a possibly negative numerator, positive divisor
    return f"(({_signed(a)} >= 0) ? ({_signed(a)} / {b}) : (({_signed(a)} - ({b}) + 1) / {b}))"


def _values(f: Callable) -> Callable:       # a numpy meaning that does not depend on the node's dtype
    return lambda n, *v: f(*v)


def _cdiv(a, b):   # C division: truncates toward zero (a - fmod(a, b) is an exact multiple of b)
    return np.floor_divide(np.subtract(a, np.fmod(a, b)), b)


def _no_data(n, *v):
    raise UnsupportedOp(f"an index loaded from buffer slot {n.arg} has no value without the buffer's data")


def _round_bf16(v: np.ndarray) -> np.ndarray:
    bits = v.view(np.uint32).astype(np.uint64)
    out = ((bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000).astype(np.uint32).view(np.float32)
    return np.where(np.isnan(v), v, out)


ROUND_NP = {"f16": lambda v: v.astype(np.float16).astype(np.float32), "bf16": _round_bf16}
CAST_NP = {"bool": lambda v: np.not_equal(v, 0), "int": lambda v: np.asarray(np.trunc(v) if np.asarray(v).dtype.kind == "f" else v).astype(np.int64),
           "float": lambda v: np.asarray(v, np.float32)}
CONST_NP = {"bool": np.bool_, "int": np.int64, "float": np.float32}   # float index math is float32 (tinygrad's)

OPS: dict[str, IndexOp] = {   # names as tinygrad's Ops, plus ALL (the conjunction of a stream's validity terms)
    "ADD": IndexOp(lambda n, a, b: f"({a} + {b})", _values(np.add)),
    "SUB": IndexOp(lambda n, a, b: f"({a} - {b})", _values(np.subtract)),
    "MUL": IndexOp(lambda n, a, b: f"({a} * {b})", _values(np.multiply)),
    "NEG": IndexOp(lambda n, a: f"(-{a})", _values(np.negative)),
    "CDIV": IndexOp(lambda n, a, b: f"({a} / {b})" if n.nonneg else f"({_signed(a)} / {_signed(b)})", _values(_cdiv)),
    "CMOD": IndexOp(lambda n, a, b: f"({a} % {b})" if n.nonneg else f"({_signed(a)} % {_signed(b)})",
                    _values(np.fmod)),
    "FLOORDIV": IndexOp(lambda n, a, b: f"({a} / {b})" if n.nonneg else _c_floordiv(a, b), _values(np.floor_divide)),
    "FLOORMOD": IndexOp(lambda n, a, b: f"({a} % {b})" if n.nonneg else
                        f"({_signed(a)} - {_c_floordiv(a, b)} * ({b}))", _values(np.mod)),
    "SHL": IndexOp(lambda n, a, b: f"({a} << {b})", _values(np.left_shift)),
    "SHR": IndexOp(lambda n, a, b: f"({a} >> {b})" if n.nonneg else f"({_signed(a)} >> {b})",   # arithmetic shift
                   _values(np.right_shift)),
    "MAX": IndexOp(lambda n, a, b: f"(({a}) > ({b}) ? ({a}) : ({b}))" if n.nonneg or _float_operands(n) else
                   f"({_signed(a)} > {_signed(b)} ? ({a}) : ({b}))", _values(np.maximum)),
    "CMPLT": IndexOp(lambda n, a, b: f"({a} < {b})" if n.nonneg or _float_operands(n) else
                     f"({_signed(a)} < {_signed(b)})",
                     _values(np.less)),
    "CMPNE": IndexOp(lambda n, a, b: f"({a} != {b})", _values(np.not_equal)),
    "CMPEQ": IndexOp(lambda n, a, b: f"({a} == {b})", _values(np.equal)),
    # on bools logical (C && / ||), on integers bitwise; numpy's bitwise ops are the logical ones on bool arrays
    "AND": IndexOp(lambda n, a, b: f"({a} && {b})" if n.dtype == "bool" else f"({a} & {b})", _values(np.bitwise_and)),
    "OR": IndexOp(lambda n, a, b: f"({a} || {b})" if n.dtype == "bool" else f"({a} | {b})", _values(np.bitwise_or)),
    "XOR": IndexOp(lambda n, a, b: f"({a} ^ {b})", _values(np.bitwise_xor)),
    "WHERE": IndexOp(lambda n, c, a, b: f"({c} ? {a} : {b})", _values(np.where)),
    # C integer casts keep the value (a bool is 0/1 already); to bool is a test against zero
    "CAST": IndexOp(lambda n, a: C_CAST.get((n.src[0].dtype, n.dtype), "{}").format(a),
                    lambda n, v: CAST_NP[n.dtype](v)),
    # the one unparenthesised form: a validity is rendered as the bare chain of its terms and is never an operand
    "ALL": IndexOp(lambda n, *terms: " && ".join(terms), _values(lambda *t: functools.reduce(np.logical_and, t))),
    # a float32 value rounded to the narrow float n.arg ("f16", "bf16": to nearest even) and widened back (a CAST to
    # float16/bfloat16 in float index math, which is float32 C)
    "ROUND": IndexOp(lambda n, a: f"tt_round_{n.arg}({a})", lambda n, v: ROUND_NP[n.arg](np.asarray(v, np.float32))),
    # element `a` of the buffer in tinygrad slot n.arg (an index that depends on loaded data: x[idx] after tinygrad's
    # load collapse): the reader defines tt_ld<slot>() (templates/blocks/index_loads.c.j2); numpy has no buffer data
    "LOAD": IndexOp(lambda n, a: f"tt_ld{n.arg}({a})", _no_data),
}


def _c_const(v) -> str:
    if isinstance(v, bool): return "1" if v else "0"
    if isinstance(v, float):   # the float32 value, exactly (a hexadecimal literal)
        f = float(np.float32(v))
        if not np.isfinite(f): raise UnsupportedOp(f"non-finite constant {v!r} in an index expression")
        return f"({f.hex()}f)"
    return f"({v})" if v < 0 else str(v)


def _dtype_of(v) -> str:
    return "bool" if isinstance(v, bool) else "int" if isinstance(v, int) else "float"


def grid(ranges: Sequence[int]) -> tuple[np.ndarray, ...]:
    """The value of each range over the iteration space (outermost first), as broadcastable int64 arrays."""
    return tuple(np.arange(n, dtype=np.int64).reshape([n if j == i else 1 for j in range(len(ranges))])
                 for i, n in enumerate(ranges))


@dataclass(frozen=True)
class IndexExpr:
    """One node of an index expression and, as the root, the whole expression (sub-expressions may be shared)."""
    op: str                              # RANGE (arg: range number, outermost first), CONST (arg: value) or an OPS key
                                         # (LOAD: arg the buffer's tinygrad slot)
    dtype: str                           # one of DTYPES
    src: tuple[IndexExpr, ...] = ()
    arg: int | float | bool | str | None = None
    nonneg: bool = False                 # every operand is known >= 0: C keeps unsigned arithmetic

    def __post_init__(self):
        if self.op not in OPS and self.op not in ("RANGE", "CONST"): raise ValueError(f"unknown index op {self.op}")
        if self.dtype not in DTYPES: raise ValueError(f"index dtype {self.dtype!r} not in {DTYPES}")

    # ---- building
    @staticmethod
    def range_var(k: int) -> IndexExpr:
        return IndexExpr("RANGE", "int", arg=k)

    @staticmethod
    def const(v: int | float | bool) -> IndexExpr:
        if isinstance(v, float): v = float(v)   # a plain float (not tinygrad's ConstFloat subclass): tinygrad-free
        return IndexExpr("CONST", _dtype_of(v), arg=v)

    @staticmethod
    def all_of(terms: Sequence[IndexExpr]) -> IndexExpr:
        """The conjunction of validity terms (at least one)."""
        return terms[0] if len(terms) == 1 else IndexExpr("ALL", "bool", tuple(terms))

    def _bin(self, op: str, other: IndexExpr | int, reverse: bool = False, dtype: str = "int") -> IndexExpr:
        a, b = self, other if isinstance(other, IndexExpr) else IndexExpr.const(other)
        if reverse: a, b = b, a
        return IndexExpr(op, dtype, (a, b), nonneg=a.at_least_zero and b.at_least_zero)

    def __add__(self, x): return self._bin("ADD", x)
    def __radd__(self, x): return self._bin("ADD", x, True)
    def __sub__(self, x): return self._bin("SUB", x)
    def __rsub__(self, x): return self._bin("SUB", x, True)
    def __mul__(self, x): return self._bin("MUL", x)
    def __rmul__(self, x): return self._bin("MUL", x, True)
    def lt(self, x) -> IndexExpr: return self._bin("CMPLT", x, dtype="bool")

    @property
    def at_least_zero(self) -> bool:
        """Known >= 0 from the structure alone (ranges, constants, bools, sums and products of those): the bound
        the builder operators above record; the frontend records tinygrad's bounds instead."""
        return (self.op == "RANGE" or self.op == "CONST" and self.arg >= 0 or self.dtype == "bool"
                or self.op in ("ADD", "MUL") and self.nonneg)

    # ---- traversal
    def toposort(self) -> list[IndexExpr]:
        """Every distinct node once, operands before their users, this node last."""
        order, seen, todo = [], set(), [(self, False)]
        while todo:
            n, done = todo.pop()
            if done:
                order.append(n)
            elif id(n) not in seen:
                seen.add(id(n))
                todo.append((n, True))
                todo.extend((s, False) for s in reversed(n.src))
        return order

    def _fold(self, leaf: Callable, node: Callable):
        """Bottom-up over the DAG: leaf(n) for RANGE/CONST, node(n, operand results) for the rest."""
        out: dict[int, object] = {}
        for n in self.toposort():
            out[id(n)] = leaf(n) if n.op in ("RANGE", "CONST") else node(n, [out[id(s)] for s in n.src])
        return out[id(self)]

    # ---- the two languages
    def render_c(self) -> str:
        """C99 over uint32 r0..r{n-1} (the reader/writer templates' loop variables)."""
        return self._fold(lambda n: f"r{n.arg}" if n.op == "RANGE" else _c_const(n.arg),
                          lambda n, ops: OPS[n.op].c(n, *ops))

    def evaluate(self, grid: Sequence[np.ndarray]) -> np.ndarray:
        """The values at every point of `grid` (range k takes the values grid[k], e.g. `index.grid(ranges)`), as an
        array broadcastable to the grid's shape."""
        return np.asarray(self._fold(lambda n: grid[n.arg] if n.op == "RANGE" else CONST_NP[n.dtype](n.arg),
                                     lambda n, vals: OPS[n.op].np(n, *vals)))

    def flat(self, ranges: Sequence[int]) -> np.ndarray:
        """The values over the whole iteration space, row-major (one point when there are no ranges)."""
        return np.broadcast_to(self.evaluate(grid(ranges)), tuple(ranges) or (1,)).reshape(-1)

    # ---- structure
    def ranges(self) -> frozenset[int]:
        """The ranges the expression reads."""
        return frozenset(n.arg for n in self.toposort() if n.op == "RANGE")

    def loads(self) -> frozenset[int]:
        """The tinygrad slots of the buffers the expression loads from (its LOAD nodes)."""
        return frozenset(n.arg for n in self.toposort() if n.op == "LOAD")

    def affine(self) -> dict[int | None, int] | None:
        """{range: coefficient, None: constant} when the expression is affine in the ranges, else None."""
        return self._fold(lambda n: {n.arg: 1} if n.op == "RANGE" else {None: n.arg} if n.dtype == "int" else None,
                          _affine_node)

    def coefficients(self, n: int) -> tuple[int, ...] | None:
        """affine() as (coefficient of range 0, ..., of range n-1, constant), or None when not affine."""
        if (co := self.affine()) is None: return None
        out = [0] * (n + 1)
        for k, c in co.items(): out[n if k is None else k] += c
        return tuple(out)

    # ---- the kernel bundle (TT_CHECK)
    def to_json(self) -> list:
        """[[op, dtype, arg, [operand positions], nonneg], ...], operands first, the root last."""
        order = self.toposort()
        pos = {id(n): i for i, n in enumerate(order)}
        return [[n.op, n.dtype, n.arg, [pos[id(s)] for s in n.src], n.nonneg] for n in order]

    @staticmethod
    def from_json(rows: list) -> IndexExpr:
        nodes: list[IndexExpr] = []
        for op, dtype, arg, src, nonneg in rows:
            nodes.append(IndexExpr(op, dtype, tuple(nodes[i] for i in src), arg, nonneg))
        return nodes[-1]


C_TYPE = {"int": "uint32_t", "bool": "uint32_t", "float": "float"}


def render_c_nested(exprs: Sequence[IndexExpr], level: dict[int, int], n_levels: int,
                    prefix: str) -> tuple[list[list[str]], list[str]]:
    """The C text of `exprs` for a walk by nested loops, each loop-invariant sub-expression computed once in the loop
    level it belongs to: range k is the loop variable r<k> of level level[k] (0 outermost; every range of the exprs
    has one), level n_levels - 1 the innermost. A sub-expression whose ranges all belong to levels outside the one
    its user is evaluated in becomes a C local <prefix><i> declared in its own level. Returns (declarations per
    level, the C text of each expr over those locals and the ranges). Loads (an index read from a buffer) are never
    hoisted: their reads may be gated by the expression's validity."""
    order: list[IndexExpr] = []
    seen: set[int] = set()
    for e in exprs:
        for n in e.toposort():
            if id(n) not in seen:
                seen.add(id(n))
                order.append(n)
    lvl: dict[int, int] = {}          # the innermost level a node reads (-1: constants only)
    pinned: set[int] = set()          # LOAD inside: evaluated where its user is
    for n in order:
        if n.op == "RANGE": lvl[id(n)] = level[n.arg]
        elif n.op == "CONST": lvl[id(n)] = -1
        else: lvl[id(n)] = max(lvl[id(s)] for s in n.src)
        if n.op == "LOAD" or any(id(s) in pinned for s in n.src): pinned.add(id(n))
    inner = n_levels - 1
    user_lvl = {id(n): -1 for n in order}   # the innermost level a node is used in (roots: the innermost)
    for n in order:
        for s in n.src: user_lvl[id(s)] = max(user_lvl[id(s)], lvl[id(n)])
    for e in exprs: user_lvl[id(e)] = inner
    hoist = {id(n) for n in order if n.op not in ("RANGE", "CONST") and id(n) not in pinned
             and 0 <= lvl[id(n)] < user_lvl[id(n)]}
    decls: list[list[str]] = [[] for _ in range(n_levels)]
    text: dict[int, str] = {}
    for n in order:
        if n.op == "RANGE": c = f"r{n.arg}"
        elif n.op == "CONST": c = _c_const(n.arg)
        else: c = OPS[n.op].c(n, *(text[id(s)] for s in n.src))
        if id(n) in hoist:
            name = f"{prefix}{len([d for ds in decls for d in ds])}"
            decls[lvl[id(n)]].append(f"const {C_TYPE[n.dtype]} {name} = {c};")
            c = name
        text[id(n)] = c
    return decls, [text[id(e)] for e in exprs]


def _affine_node(n: IndexExpr, ops: list) -> dict | None:
    if any(o is None for o in ops): return None
    if n.op in ("ADD", "SUB"):
        a, b = ops
        sign = 1 if n.op == "ADD" else -1
        return {k: a.get(k, 0) + sign * b.get(k, 0) for k in a.keys() | b.keys()}
    if n.op == "MUL":
        a, b = ops
        if set(b) <= {None}: a, b = b, a
        if not set(a) <= {None}: return None      # a product of two range expressions
        k = a.get(None, 0)
        return {r: k * c for r, c in b.items()}
    return None


class IndexTexts:
    """The C text of a stream record's expressions (fields `index`, `valid`, `value`: plan.Stream,
    frontend.StreamIndex), as the templates and reports read them; None where the expression is absent."""

    @property
    def index_c(self) -> str | None:
        return None if self.index is None else self.index.render_c()

    @property
    def valid_c(self) -> str | None:
        return None if self.valid is None else self.valid.render_c()

    @property
    def value_c(self) -> str | None:
        return None if self.value is None else self.value.render_c()

    @property
    def index_loads(self) -> frozenset[int]:
        """tinygrad slots of the buffers the index or validity loads from (a gather by loaded indices)."""
        return frozenset().union(*(e.loads() for e in (self.index, self.valid) if e is not None))
