"""Random tinygrad programs for the differential test of Device TT against tinygrad's CPU device.

`generate(seed, size)` draws a program from a grammar of ops: elementwise float (exp, exp2, log, log2, sqrt, rsqrt,
reciprocal, sin, cos, tanh, sigmoid, gelu, silu, pow, floor/ceil/trunc/round, add/sub/mul/div, floor division and
mod, maximum/minimum, comparisons, where), elementwise integer (add/sub/mul, truncating and floor division, mod,
and/or/xor/not, shifts by constants and by tensors, comparisons, where, neg), casts among the dtypes the backend
supports (TTRenderer.supported_dtypes()), movement (reshape, permute, expand, pad, shrink, flip, strided slices, cat,
gather, tensor indexing), reductions (sum, mean, max, min, prod, any, all, argmax, argmin, cumsum) over random axes,
matmuls (float32, bfloat16 and exact int32, batched, against a fresh weight or the operand's own transpose), softmax,
log_softmax, logsumexp, layernorm, RMSNorm, variance, standard deviation and cross-entropy patterns, and realizes in the
middle so kernels fuse differently.
Shapes are small (1-4 dims, sizes that are not multiples of 32 included) and broadcast between operands.

A program is text: one line per input and one per step (`v7 = sum(v5, axis=(1,), keepdim=True)`), so a failure is
replayed from its seed (`Program.text()` prints it); `run(program, device)` executes the same steps with tinygrad's
Tensor ops on any device from the same numpy inputs (`inputs(program)`).

Domains. The generator tracks, for every value, bounds on its elements (`lo`, `hi`), whether it is a multiple of a
power of two (`grid`), and whether both devices must agree bit for bit (`unit == 0`). It keeps the reference defined:
  * log/log2/sqrt/rsqrt/reciprocal/pow take `|x| + 0.5` (a `pos` step) unless x is already >= 0.5; exp/exp2 clip their
    argument to [-8, 8], sin/cos to [-100, 100] ([-8, 8] on narrow floats, below); float divisors are made positive the same way;
  * no float value's bound exceeds 1e4 (a step that would is not taken), so nothing overflows float16 and no op
    amplifies a rounding difference by more than its bounded condition number;
  * integers: divisors are made nonzero (`where(b == 0, 1, b)`); int32 arithmetic never leaves int32 (C's signed
    overflow is undefined on the CPU device) and never reaches INT_MIN; uint16 products stay below 2**31 (C promotes
    them to int); left shifts take non-negative operands, counts below the width and never overflow (also not in C's
    int promotion); right shift counts are below the width. Only uint32 arithmetic wraps (modular in C); the narrow
    types stay in range (the CPU device drops their truncation where a fused consumer is wider: `wraps`), except in
    explicit casts, which convert modulo 2**width;
  * float -> int casts take values clipped into the target's range (C leaves others undefined);
  * ops that are discontinuous in their input (comparisons, floor/ceil/trunc/round, float // and %, casts to integers
    or bool, argmax/argmin) take only values both devices compute bit for bit: inputs and what bit-exact ops make of
    them (movement, where, max/min, neg/abs, casts, integer ops, and float add/sub/mul/sum/matmul on values that are
    multiples of 2**-grid small enough to be represented exactly, so no rounding happens in any order or fusion).
    Anything rounded differently (transcendentals, divisions, sums in another order) is never compared against a
    threshold, so a one-ulp difference cannot flip a discrete result.

Tolerances (`compare`): integers and bool exact; a float value both devices compute bit for bit must agree exactly
(NaN = NaN, -0 = +0); any other float value must have the same NaN/inf positions and a relative L2 error
||tt - cpu|| / ||cpu|| within TOL of the narrowest float format it was rounded to while inexact: the default placement
is float32-faithful (no TT_ERR_BUDGET), each SFPU op is within 2 float32 ulps, sums and matmuls differ by their order
(K ulps of the terms), and the bounded ranges keep amplification below ~16, so float32 gets 1e-4 (~1700 ulps) and
bfloat16/float16 16 units of their rounding: the CPU device rounds every intermediate of an op tinygrad decomposes
(sigmoid, pow, ...) to the narrow format where TT keeps float32 lanes, and exp amplifies such a rounding by |x|, so the
arguments of exp-like ops on narrow floats are clipped to [-8, 8] (and pow's to |y ln x| <= 4.3). So are sin's and
cos's: one bfloat16 unit of an argument near 100 is 0.5, a different value of sin; the CPU device also drops the
bfloat16 rounding of a fused matmul that TT keeps (seed 5197: sin of a clipped bfloat16 matmul).
The norm ||cpu|| is the wrong yardstick where terms cancel: a float16 sum of seven terms of about 1 that cancels to
~1e-16 differs between any two summation orders by a float16 unit of its terms, 100 % of its value (seed 11628). An
output that fails the test above is measured again with ||cpu|| replaced by ||m||, its `magnitudes`: an elementwise
bound m >= |value| carried through the steps by first-order forward error analysis (the sum of the terms' magnitudes
for sums, means and matmuls, |y| plus |dy/dx| times the operands' excess for elementwise ops, a Lipschitz bound for
the softmax/norm patterns), from the CPU device's step-by-step values. It admits the rounding of the terms, not a
wrong one: a term dropped, doubled or misread moves the result by a term's size and still fails.
"""
from __future__ import annotations

import math
import subprocess
from dataclasses import dataclass, field

import numpy as np
from tinygrad import Tensor, dtypes
from tinygrad.helpers import Context

FLOAT_DTYPES = ("float32", "bfloat16", "float16")
INT_DTYPES = ("int32", "uint32", "int8", "uint8", "int16", "uint16")
MANTISSA = {"float32": 24, "bfloat16": 8, "float16": 11}         # significand bits: exact integers up to 2**m
UNIT = {"float32": 2.0 ** -24, "bfloat16": 2.0 ** -8, "float16": 2.0 ** -11}
TOL = {2.0 ** -24: 1e-4, 2.0 ** -11: 16 * 2.0 ** -11, 2.0 ** -8: 16 * 2.0 ** -8}
INT_RANGE = {"int32": (-2 ** 31, 2 ** 31 - 1), "uint32": (0, 2 ** 32 - 1), "int8": (-128, 127), "uint8": (0, 255),
             "int16": (-2 ** 15, 2 ** 15 - 1), "uint16": (0, 2 ** 16 - 1), "bool": (0, 1)}
# the dtypes the backend declares to tinygrad (tt_backend.ops_tt.TTRenderer.supported_dtypes; the CI test checks it)
SUPPORTED = (*FLOAT_DTYPES, *INT_DTYPES, "bool")
INT32_SAFE = 2 ** 30                   # int32 values stay within +-2**30: no overflow, no INT_MIN
FLOAT_CAP = 1e4                        # bound on every float value
DIMS = (1, 2, 3, 5, 7, 8, 16, 31, 32, 33, 40, 64)
# dtype of a fresh input, with its weight
INPUT_DTYPES = {"float32": 40, "bfloat16": 8, "float16": 6, "int32": 14, "uint32": 5, "int8": 3, "uint8": 3,
                "int16": 3, "uint16": 3, "bool": 6}


def tdt(name: str):
    return getattr(dtypes, name)


def dname(t: Tensor) -> str:
    """The dtype's name as this module spells it (tinygrad's own names are C's: "__bf16", "unsigned char")."""
    return next((n for n in SUPPORTED if tdt(n) == t.dtype), t.dtype.name)


# ---- the ops: name -> fn(*tensors, **params); the generator emits only these, `run` executes them
def _pos(x): return x.abs() + 0.5
def _nonzero(x): return (x == 0).where(1, x)
NORM_EPS = 1e-5                        # tinygrad's layernorm default; the rmsnorm pattern's
def _rmsnorm(x, axis): return x * ((x * x).mean(axis, keepdim=True) + NORM_EPS).rsqrt()
def _slice(x, sl): return x[tuple(slice(*s) for s in sl)]


OPS = {
    # float unary
    "exp": Tensor.exp, "exp2": Tensor.exp2, "log": Tensor.log, "log2": Tensor.log2, "sqrt": Tensor.sqrt,
    "rsqrt": Tensor.rsqrt, "reciprocal": Tensor.reciprocal, "sin": Tensor.sin, "cos": Tensor.cos, "tanh": Tensor.tanh,
    "sigmoid": Tensor.sigmoid, "gelu": Tensor.gelu, "silu": Tensor.silu, "square": Tensor.square,
    "floor": Tensor.floor, "ceil": Tensor.ceil, "trunc": Tensor.trunc, "round": Tensor.round,
    "relu": Tensor.relu, "pow_c": lambda x, e: x.pow(e),
    # any dtype
    "neg": Tensor.neg, "abs": Tensor.abs, "pos": _pos, "nonzero": _nonzero, "add_c": lambda x, c: x + c,
    "mul_c": lambda x, c: x * c, "clip": lambda x, lo, hi: x.clip(lo, hi),
    "add": Tensor.add, "sub": Tensor.sub, "mul": Tensor.mul, "div": Tensor.div, "pow": Tensor.pow,
    "maximum": Tensor.maximum, "minimum": Tensor.minimum, "floordiv": lambda a, b: a // b, "mod": Tensor.mod,
    "tdiv": lambda a, b: a.div(b, rounding_mode="trunc"),
    "lt": Tensor.__lt__, "eq": Tensor.__eq__, "ne": Tensor.__ne__, "where": lambda c, a, b: c.where(a, b),
    "and": Tensor.bitwise_and, "or": Tensor.bitwise_or, "xor": Tensor.bitwise_xor, "not": Tensor.bitwise_not,
    "logical_not": Tensor.logical_not,
    "shl": Tensor.lshift, "shr": Tensor.rshift, "shl_c": lambda x, c: x << c, "shr_c": lambda x, c: x >> c,
    "cast": lambda x, dtype: x.cast(tdt(dtype)),
    # movement
    "reshape": lambda x, shape: x.reshape(shape), "permute": lambda x, order: x.permute(order),
    "expand": lambda x, shape: x.reshape(tuple(1 if s == -1 else s for s in shape[0])).expand(shape[1]),
    "pad": lambda x, pads, value: x.pad(pads, value=value), "shrink": lambda x, arg: x.shrink(arg),
    "flip": lambda x, axis: x.flip(axis), "slice": _slice, "cat": lambda a, b, dim: a.cat(b, dim=dim),
    "gather": lambda x, idx, dim: x.gather(dim, idx), "index": lambda x, idx: x[idx],
    "realize": lambda x: x.contiguous().realize(),
    # reductions
    "sum": lambda x, axis, keepdim: x.sum(axis, keepdim=keepdim),
    "mean": lambda x, axis, keepdim: x.mean(axis, keepdim=keepdim),
    "max": lambda x, axis, keepdim: x.max(axis, keepdim=keepdim),
    "min": lambda x, axis, keepdim: x.min(axis, keepdim=keepdim),
    "prod": lambda x, axis, keepdim: x.prod(axis, keepdim=keepdim),
    "any": lambda x, axis, keepdim: x.any(axis, keepdim=keepdim),
    "all": lambda x, axis, keepdim: x.all(axis, keepdim=keepdim),
    "argmax": lambda x, axis, keepdim: x.argmax(axis, keepdim=keepdim),
    "argmin": lambda x, axis, keepdim: x.argmin(axis, keepdim=keepdim),
    "cumsum": lambda x, axis: x.cumsum(axis),
    # matmul and patterns
    "matmul": Tensor.matmul, "softmax": lambda x, axis: x.softmax(axis), "log_softmax": lambda x, axis: x.log_softmax(axis),
    "logsumexp": lambda x, axis: x.logsumexp(axis), "layernorm": lambda x, axis: x.layernorm(axis),
    "rmsnorm": _rmsnorm, "cross_entropy": lambda x, y: x.cross_entropy(y),
    "sparse_ce": lambda x, y: x.sparse_categorical_crossentropy(y),
    "var": lambda x, axis: x.var(axis), "std": lambda x, axis: x.std(axis),
}
# the op class a wrong result is summarized by (first step that differs, see test_random_programs.locate)
OP_CLASS = {**{o: "float unary" for o in ("exp", "exp2", "log", "log2", "sqrt", "rsqrt", "reciprocal", "sin", "cos",
                                          "tanh", "sigmoid", "gelu", "silu", "square", "floor", "ceil", "trunc",
                                          "round", "relu", "pow_c", "pos")},
            **{o: "elementwise" for o in ("neg", "abs", "add_c", "mul_c", "clip", "add", "sub", "mul", "div", "pow",
                                          "maximum", "minimum", "lt", "eq", "ne", "where", "nonzero", "logical_not")},
            **{o: "integer" for o in ("floordiv", "mod", "tdiv", "and", "or", "xor", "not", "shl", "shr", "shl_c",
                                      "shr_c")},
            "cast": "cast",
            **{o: "movement" for o in ("reshape", "permute", "expand", "pad", "shrink", "flip", "slice", "cat",
                                       "gather", "index", "realize")},
            **{o: "reduction" for o in ("sum", "mean", "max", "min", "prod", "any", "all", "argmax", "argmin",
                                        "cumsum")},
            "matmul": "matmul",
            **{o: "softmax/norm" for o in ("softmax", "log_softmax", "logsumexp", "layernorm", "rmsnorm",
                                           "cross_entropy", "sparse_ce", "var", "std")}}
assert set(OP_CLASS) == set(OPS)


@dataclass
class Input:
    name: str
    dtype: str
    shape: tuple[int, ...]
    lo: float
    hi: float
    grid: int | None          # floats: multiples of 2**-grid; None: continuous uniform

    def text(self) -> str:
        g = "" if self.grid is None else f", grid=2**-{self.grid}"
        return f"{self.name} = input({self.dtype}, {self.shape}, [{self.lo!r}, {self.hi!r}]{g})"


@dataclass
class Step:
    out: str
    op: str
    args: tuple[str, ...]
    params: dict

    def text(self) -> str:
        return f"{self.out} = {self.op}({', '.join([*self.args, *(f'{k}={v!r}' for k, v in self.params.items())])})"


@dataclass
class Program:
    seed: int
    inputs: list[Input]
    steps: list[Step]
    outputs: list[str]
    units: dict[str, float] = field(default_factory=dict)   # value -> 0 (bit for bit) or its rounding unit

    def text(self) -> str:
        return "\n".join([f"# seed {self.seed}", *(i.text() for i in self.inputs), *(s.text() for s in self.steps),
                          f"outputs {', '.join(f'{o} (unit {self.units[o]:g})' for o in self.outputs)}"])


@dataclass
class Val:
    name: str
    t: Tensor                  # lazy CPU tensor: the shape and dtype tinygrad infers (never realized while generating)
    lo: float
    hi: float
    grid: int | None           # floats: every element is a multiple of 2**-grid (so exactly representable); else None
    unit: float                # 0: both devices compute it bit for bit; else the largest rounding unit it went through

    @property
    def dtype(self) -> str: return dname(self.t)
    @property
    def shape(self) -> tuple[int, ...]: return tuple(self.t.shape)
    @property
    def isfloat(self) -> bool: return self.dtype in FLOAT_DTYPES
    @property
    def isint(self) -> bool: return self.dtype in INT_DTYPES
    @property
    def bound(self) -> float: return max(abs(self.lo), abs(self.hi))


class Reject(Exception):
    """The drawn step does not apply here (domain, size, bounds): the generator draws another."""


class Gen:
    def __init__(self, seed: int, max_numel: int, n_steps: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.seed, self.max_numel, self.n_steps = seed, max_numel, n_steps
        self.inputs: list[Input] = []
        self.steps: list[Step] = []
        self.vals: list[Val] = []
        self.n = 0

    # ---- helpers
    def choice(self, seq):
        return seq[int(self.rng.integers(len(seq)))]

    def coin(self, p: float = 0.5) -> bool:
        return bool(self.rng.random() < p)

    def fresh_name(self) -> str:
        self.n += 1
        return f"v{self.n}"

    def rand_shape(self, ndim: int | None = None) -> tuple[int, ...]:
        ndim = ndim or int(self.rng.integers(1, 5))
        for _ in range(20):
            shape = tuple(self.choice(DIMS) for _ in range(ndim))
            if math.prod(shape) <= self.max_numel // 2:
                return shape
        return (self.choice(DIMS[:8]),) * 1

    def add_input(self, dtype: str, shape: tuple[int, ...], lo: float | None = None, hi: float | None = None) -> Val:
        grid = None
        if dtype in FLOAT_DTYPES:
            if self.coin():
                lo, hi, grid = (-4.0, 4.0, 3) if lo is None else (lo, hi, 3)
            else:
                lo, hi = (-3.0, 3.0) if lo is None else (lo, hi)
        elif dtype == "bool":
            lo, hi = 0, 1
        elif lo is None:
            lo, hi = {"int32": (-1000, 1000), "uint32": (0, 3000), "int8": (-100, 100), "uint8": (0, 255),
                      "int16": (-3000, 3000), "uint16": (0, 3000)}[dtype]
        inp = Input(self.fresh_name(), dtype, tuple(shape), lo, hi, grid)
        self.inputs.append(inp)
        v = Val(inp.name, make_input_tensor(inp, input_array(inp, self.seed), "CPU"), lo, hi, grid, 0.0)
        self.vals.append(v)
        return v

    def emit(self, op: str, args: list[Val], params: dict, lo: float, hi: float, grid: int | None,
             unit: float) -> Val:
        """Append a step; its result's shape/dtype come from tinygrad (lazily, on the CPU device)."""
        t = (Tensor.contiguous if op == "realize" else OPS[op])(*[a.t for a in args], **params)
        if math.prod(t.shape) > self.max_numel:
            raise Reject("too large")
        if dname(t) not in SUPPORTED:
            raise Reject(f"{dname(t)} is not a TT dtype")
        name = self.fresh_name()
        v = Val(name, t, float(lo), float(hi), grid, unit)
        if v.isfloat:
            if not (v.bound <= FLOAT_CAP):
                raise Reject("float bound")
            if grid is not None and v.bound * 2.0 ** grid >= 2.0 ** MANTISSA[v.dtype]:
                v.grid = None          # no longer exactly representable: an arithmetic op rounds
                if op in ROUNDING_OPS:
                    v.unit = max([UNIT[v.dtype], *(a.unit for a in args)])
            if op != "cast" and any(a.dtype != v.dtype and not fits(a, v.dtype) for a in args):
                # tinygrad's promotion casts an operand that rounds (the CPU device's bfloat16 emulation truncates)
                v.unit, v.grid = max([UNIT[v.dtype], *(a.unit for a in args)]), None
        elif v.dtype == "bool":
            v.lo, v.hi, v.grid = 0, 1, None
        else:
            rlo, rhi = INT_RANGE[v.dtype]
            if lo < rlo or hi > rhi:
                if not wraps(v.dtype):
                    raise Reject("int32 overflow")
                v.lo, v.hi = rlo, rhi
            v.grid = None
        self.steps.append(Step(name, op, tuple(a.name for a in args), params))
        self.vals.append(v)
        return v

    def pick(self, pred=lambda v: True) -> Val:
        """An existing value satisfying pred, recent ones more likely (chains fuse)."""
        cands = [v for v in self.vals if pred(v)]
        if not cands:
            raise Reject("no operand")
        w = np.arange(1, len(cands) + 1, dtype=np.float64) ** 2
        return cands[int(self.rng.choice(len(cands), p=w / w.sum()))]

    # ---- fix-ups that make a value a valid operand (ordinary steps, printed with the program)
    def positive(self, x: Val) -> Val:
        if x.lo >= 0.5:
            return x
        g = None if x.grid is None else max(x.grid, 1)
        return self.emit("pos", [x], {}, 0.5, x.bound + 0.5, g, arith_unit(x, x, g))

    def clipped(self, x: Val, lo: float, hi: float) -> Val:
        if x.lo >= lo and x.hi <= hi:
            return x
        if x.dtype == "bool":
            raise Reject("clip of bool")
        if x.isint:
            lo, hi = max(lo, INT_RANGE[x.dtype][0]), min(hi, INT_RANGE[x.dtype][1])
            lo, hi = int(math.ceil(lo)), int(math.floor(hi))
        return self.emit("clip", [x], {"lo": lo, "hi": hi}, max(x.lo, lo), min(x.hi, hi), x.grid, x.unit)

    def nonzero(self, x: Val) -> Val:
        if x.lo > 0 or x.hi < 0:
            return x
        return self.emit("nonzero", [x], {}, min(x.lo, 1), max(x.hi, 1), None, 0.0)

    def partner(self, x: Val, kind) -> Val:
        """A second operand broadcastable with x: an existing value of the same kind, or a fresh input whose shape
        is x's with some dims set to 1 (or dropped in front)."""
        if self.coin(0.6):
            try:
                return self.pick(lambda v: v is not x and kind(v.dtype) and (broadcastable(v.shape, x.shape) or
                                                                             broadcastable(x.shape, v.shape)))
            except Reject:
                pass
        shape = [1 if self.coin(0.3) else s for s in x.shape]
        if shape and self.coin(0.2):
            shape = shape[int(self.rng.integers(len(shape))):]
        dtype = x.dtype if kind(x.dtype) else self.choice([d for d in INPUT_DTYPES if kind(d)])
        return self.add_input(dtype, tuple(shape) or (1,))

    # ---- the grammar: each rule emits one or more steps or raises Reject
    def r_float_unary(self) -> None:
        x = self.pick(lambda v: v.isfloat)
        op = self.choice(("exp", "exp2", "log", "log2", "sqrt", "rsqrt", "reciprocal", "sin", "cos", "tanh", "sigmoid",
                          "gelu", "silu", "square", "floor", "ceil", "trunc", "round", "relu", "neg", "abs", "pow_c"))
        u = max(x.unit, UNIT[x.dtype])
        if op in ("exp", "exp2"):
            x = self.clipped(x, -8, 8)
            f = math.exp if op == "exp" else lambda z: 2.0 ** z
            self.emit(op, [x], {}, f(x.lo), f(x.hi), None, u)
        elif op in ("log", "log2", "sqrt", "rsqrt", "reciprocal"):
            x = self.positive(x)
            f = {"log": math.log, "log2": math.log2, "sqrt": math.sqrt, "rsqrt": lambda z: z ** -0.5,
                 "reciprocal": lambda z: 1 / z}[op]
            a, b = f(x.lo), f(x.hi)
            self.emit(op, [x], {}, min(a, b), max(a, b), None, u)
        elif op in ("sin", "cos"):
            lim = 100 if x.dtype == "float32" else 8     # a narrow rounding of x moves sin(x) by ~|x| units (doc)
            x = self.clipped(x, -lim, lim)
            self.emit(op, [x], {}, -1, 1, None, u)
        elif op in ("tanh", "sigmoid", "gelu", "silu"):
            lim = 50 if x.dtype == "float32" else 8      # exp's condition number |x| (module doc)
            x = self.clipped(x, -lim, lim)
            lo, hi = {"tanh": (-1, 1), "sigmoid": (0, 1)}.get(op, (min(x.lo, 0) - 0.5, max(x.hi, 0)))
            self.emit(op, [x], {}, lo, hi, None, u)
        elif op == "square":
            g = grid_of(x, 2 * x.grid if x.grid is not None else None)
            self.emit(op, [x], {}, 0, x.bound ** 2, g, arith_unit(x, x, g))
        elif op in ("floor", "ceil", "trunc", "round"):
            if x.unit:
                raise Reject("discontinuous op on a rounded value")
            if op == "round" and x.dtype != "float32" and x.bound >= 2.0 ** (MANTISSA[x.dtype] - 1):
                # tinygrad's round takes x - 0.5 or x + 0.5, not exact in the dtype from 2**(m-1) up: tinygrad rounds
                # it (TT, and its PYTHON interpreter), the CPU reference's emulation keeps it in float32 (seed 50691:
                # round(-137) in bfloat16 is ceil(-137.5 -> -138) = -138, the CPU device gives -137)
                raise Reject("round of a value whose halves the dtype does not hold")
            self.emit(op, [x], {}, math.floor(x.lo), math.ceil(x.hi), 0 if x.bound < 2 ** 20 else None, 0.0)
        elif op in ("relu", "neg", "abs"):
            lo, hi = {"relu": (max(x.lo, 0), max(x.hi, 0)), "neg": (-x.hi, -x.lo), "abs": (0, x.bound)}[op]
            self.emit(op, [x], {}, lo, hi, x.grid, x.unit)
        else:
            e = self.choice((0.5, 1.5, 2.0, 3.0, -1.0, -0.5, 2.5, 0.0, 1.0))
            if e != int(e) or e < 0:          # a real power of a positive base
                x = self.positive(x)
                lo, hi = sorted((x.lo ** e, x.hi ** e))
            else:
                hi = x.bound ** e
                lo = -hi if e % 2 else 0.0
            self.emit("pow_c", [x], {"e": e}, lo, hi, None, u)

    def r_float_binary(self) -> None:
        x = self.pick(lambda v: v.isfloat)
        y = self.partner(x, is_float)
        op = self.choice(("add", "sub", "mul", "div", "maximum", "minimum", "pow", "floordiv", "mod", "lt", "eq",
                          "ne", "where", "mul_c", "add_c"))
        if op in ("add", "sub"):
            g = grid_of2(x, y)
            b = x.bound + y.bound
            self.emit(op, [x, y], {}, -b, b, g, arith_unit(x, y, g))
        elif op == "mul":
            g = None if x.grid is None or y.grid is None else x.grid + y.grid
            b = x.bound * y.bound
            self.emit(op, [x, y], {}, -b, b, g, arith_unit(x, y, g))
        elif op == "div":
            y = self.positive(y)
            b = x.bound / y.lo
            self.emit(op, [x, y], {}, -b, b, None, max(x.unit, y.unit, UNIT[x.dtype]))
        elif op in ("maximum", "minimum"):
            f = max if op == "maximum" else min
            self.emit(op, [x, y], {}, f(x.lo, y.lo), f(x.hi, y.hi), grid_of2(x, y), max(x.unit, y.unit))
        elif op == "pow":
            b, e = (20, 3) if x.dtype == "float32" else (8, 2)   # |y ln x| <= 9 resp. 4.3 (module doc)
            x, y = self.positive(self.clipped(x, -b, b)), self.clipped(y, -e, e)
            corners = [a ** b for a in (x.lo, x.hi) for b in (y.lo, y.hi)]
            self.emit(op, [x, y], {}, min(corners), max(corners), None, max(x.unit, y.unit, UNIT[x.dtype]))
        elif op in ("floordiv", "mod"):
            if x.unit or y.unit or x.grid is None or y.grid is None:
                # continuous operands put floor(x / y) at its discontinuity only by rounding; grid operands reach it
                # exactly (integer quotients), which the devices must agree on
                raise Reject("discontinuous op on a rounded value")
            y = self.positive(y)
            q = x.bound / y.lo
            if (q + 1) * y.hi * 2.0 ** max(x.grid, y.grid) >= 2.0 ** MANTISSA[x.dtype]:
                # floor(x / y) * y must be exact in the dtype, and the quotient's rounding must not reach an integer
                # (a non-integer x / y is at least 2**-grid / y from one): tinygrad rounds every bfloat16 op, the
                # CPU reference's bfloat16 emulation computes the chain in float32 and rounds once (seed 6517:
                # -97 % 3.375, the product -97.875 is -98 in bfloat16: 1.0 per op, 0.875 emulated)
                raise Reject("floor(x / y) * y inexact in the dtype")
            lo, hi = (-q - 1, q) if op == "floordiv" else (0, y.hi)
            self.emit(op, [x, y], {}, lo, hi, None, 0.0)
        elif op in ("lt", "eq", "ne"):
            if x.unit or y.unit:
                raise Reject("comparison of rounded values")
            self.emit(op, [x, y], {}, 0, 1, None, 0.0)
        elif op == "where":
            c = self.condition(x)
            self.emit(op, [c, x, y], {}, min(x.lo, y.lo), max(x.hi, y.hi), grid_of2(x, y), max(x.unit, y.unit))
        elif op == "mul_c":
            c = self.choice((0.5, 2.0, -3.0, 0.1, 1.7))
            g = None if x.grid is None or c not in (0.5, 2.0) else x.grid + 1
            self.emit(op, [x], {"c": c}, -x.bound * abs(c), x.bound * abs(c), g, arith_unit(x, x, g))
        else:
            c = self.choice((0.5, -1.0, 3.0, 0.3))
            g = grid_of(x, max(x.grid, 1) if x.grid is not None and c != 0.3 else None)
            self.emit(op, [x], {"c": c}, x.lo + c, x.hi + c, g, arith_unit(x, x, g))

    def condition(self, like: Val) -> Val:
        """A bool value broadcastable with `like` that both devices compute bit for bit."""
        try:
            c = self.pick(lambda v: v.dtype == "bool" and v.unit == 0 and broadcastable(v.shape, like.shape))
            if self.coin(0.7):
                return c
        except Reject:
            pass
        src = self.pick(lambda v: v.unit == 0 and v.dtype != "bool" and broadcastable(v.shape, like.shape))
        return self.emit("lt", [src, src_threshold(self, src)], {}, 0, 1, None, 0.0)

    def r_int_binary(self) -> None:
        x = self.pick(lambda v: v.isint)
        y = self.partner(x, is_int)
        op = self.choice(("add", "sub", "mul", "tdiv", "floordiv", "mod", "and", "or", "xor", "not", "shl", "shr",
                          "shl_c", "shr_c", "maximum", "minimum", "lt", "eq", "ne", "where", "neg"))
        dt = x.dtype
        if op in ("add", "sub"):
            if dt == "int32" or y.dtype == "int32":
                x, y = self.clipped(x, -INT32_SAFE // 2, INT32_SAFE // 2), self.clipped(y, -INT32_SAFE // 2, INT32_SAFE // 2)
            lo, hi = (x.lo + y.lo, x.hi + y.hi) if op == "add" else (x.lo - y.hi, x.hi - y.lo)
            self.emit(op, [x, y], {}, lo, hi, None, 0.0)
        elif op == "mul":
            x, y = self.clipped(x, -30000, 30000), self.clipped(y, -30000, 30000)
            c = [a * b for a in (x.lo, x.hi) for b in (y.lo, y.hi)]
            self.emit(op, [x, y], {}, min(c), max(c), None, 0.0)
        elif op in ("tdiv", "floordiv", "mod"):
            if x.dtype == "int32":            # INT_MIN / -1 overflows
                x = self.clipped(x, -INT32_SAFE, INT32_SAFE)
            y = self.nonzero(y)
            b = max(x.bound, 1)
            lo, hi = (-b, b) if op != "mod" else (min(0, y.lo), max(0, y.hi))
            self.emit(op, [x, y], {}, lo, hi, None, 0.0)
        elif op in ("and", "or", "xor"):
            bits = int(max(x.bound, y.bound, 1)).bit_length()
            lo = 0 if x.lo >= 0 and y.lo >= 0 else -(2 ** bits)
            self.emit(op, [x, y], {}, lo, 2 ** bits - 1, None, 0.0)
        elif op == "not":
            self.emit(op, [x], {}, -x.hi - 1, -x.lo - 1, None, 0.0)
        elif op == "neg":
            if dt.startswith("u"):
                raise Reject("neg of unsigned")
            self.emit(op, [x], {}, -x.hi, -x.lo, None, 0.0)
        elif op in ("shl", "shl_c", "shr", "shr_c"):
            width = 8 * tdt(dt).itemsize
            if op.startswith("shl"):
                x = self.clipped(x, 0, 2 ** 15)
                room = (width - 1) - max(int(x.hi), 1).bit_length()      # no overflow, also in C's int promotion
                if room < 0:
                    raise Reject("no room to shift")
                top = room
            else:
                top = width - 1
            if op.endswith("_c"):
                c = int(self.rng.integers(0, top + 1))
                lo, hi = ((x.lo * 2 ** c, x.hi * 2 ** c) if op == "shl_c" else (min(x.lo, 0), max(x.hi, 0)))
                self.emit(op, [x], {"c": c}, lo, hi, None, 0.0)
            else:
                cnt = self.add_input(dt, self.choice([x.shape, x.shape[-1:] or (1,)]), 0, top)
                lo, hi = ((x.lo, x.hi * 2 ** top) if op == "shl" else (min(x.lo, 0), max(x.hi, 0)))
                self.emit(op, [x, cnt], {}, lo, hi, None, 0.0)
        elif op in ("maximum", "minimum"):
            f = max if op == "maximum" else min
            self.emit(op, [x, y], {}, f(x.lo, y.lo), f(x.hi, y.hi), None, 0.0)
        elif op in ("lt", "eq", "ne"):
            self.emit(op, [x, y], {}, 0, 1, None, 0.0)
        else:
            c = self.condition(x)
            self.emit(op, [c, x, y], {}, min(x.lo, y.lo), max(x.hi, y.hi), None, 0.0)

    def r_bool(self) -> None:
        x = self.pick(lambda v: v.dtype == "bool")
        op = self.choice(("and", "or", "xor", "logical_not", "where"))
        if op == "logical_not":
            self.emit(op, [x], {}, 0, 1, None, 0.0)
        elif op == "where":
            a = self.pick(lambda v: broadcastable(v.shape, x.shape))
            b = self.partner(a, lambda d: d == a.dtype)
            try:     # b fits a, but a shape larger than a's (a scalar a takes any b) need not fit the condition's
                np.broadcast_shapes(x.shape, a.shape, b.shape)
            except ValueError:
                raise Reject("where operands do not broadcast together") from None
            self.emit(op, [x, a, b], {}, min(a.lo, b.lo), max(a.hi, b.hi), grid_of2(a, b), max(a.unit, b.unit))
        else:
            y = self.partner(x, lambda d: d == "bool")
            self.emit(op, [x, y], {}, 0, 1, None, 0.0)

    def r_cast(self) -> None:
        x = self.pick()
        to = self.choice([*FLOAT_DTYPES, *INT_DTYPES, "bool"])
        if to == x.dtype:
            raise Reject("same dtype")
        if to in FLOAT_DTYPES:
            if x.isfloat:
                g = x.grid if x.grid is not None and x.bound * 2.0 ** x.grid < 2.0 ** MANTISSA[to] else None
                unit = 0.0 if x.unit == 0 else max(x.unit, UNIT[to])
                self.emit("cast", [x], {"dtype": to}, x.lo, x.hi, g, unit)
            else:
                if x.bound > FLOAT_CAP:
                    x = self.clipped(x, -FLOAT_CAP, FLOAT_CAP)
                self.emit("cast", [x], {"dtype": to}, x.lo, x.hi, 0 if x.bound < 2 ** MANTISSA[to] else None, 0.0)
        elif to == "bool":
            if x.unit:
                raise Reject("discontinuous op on a rounded value")
            self.emit("cast", [x], {"dtype": to}, 0, 1, None, 0.0)
        else:
            if x.isfloat:
                if x.unit:
                    raise Reject("discontinuous op on a rounded value")
                rlo, rhi = INT_RANGE[to]
                x = self.clipped(x, max(rlo, -FLOAT_CAP), min(rhi, FLOAT_CAP))
                self.emit("cast", [x], {"dtype": to}, math.trunc(x.lo), math.trunc(x.hi), None, 0.0)
            else:
                lo, hi = x.lo, x.hi
                rlo, rhi = INT_RANGE[to]
                if lo < rlo or hi > rhi:
                    lo, hi = rlo, rhi
                    if to == "int32":                # a uint32 above 2**31 reads negative: still within int32
                        lo, hi = -2 ** 31, 2 ** 31 - 1
                        x = self.clipped(x, 0, INT32_SAFE) if x.dtype == "uint32" else x
                        lo, hi = x.lo, x.hi
                self.emit("cast", [x], {"dtype": to}, lo, hi, None, 0.0)

    def r_movement(self) -> None:
        x = self.pick()
        op = self.choice(("reshape", "permute", "expand", "pad", "shrink", "flip", "slice", "cat", "gather", "index"))
        keep = dict(lo=x.lo, hi=x.hi, grid=x.grid, unit=x.unit)
        shape, nd = x.shape, len(x.shape)
        if nd == 0 and op not in ("reshape", "expand"):
            raise Reject("0-d")
        if op == "reshape":
            self.emit(op, [x], {"shape": factor_shape(self, math.prod(shape))}, **keep)
        elif op == "permute":
            if nd < 2:
                raise Reject("1-d")
            self.emit(op, [x], {"order": tuple(int(i) for i in self.rng.permutation(nd))}, **keep)
        elif op == "expand":
            src = list(shape)
            if 1 in src and self.coin():
                i = src.index(1)
                new = list(src); new[i] = self.choice(DIMS[1:])
                self.emit(op, [x], {"shape": (tuple(src), tuple(new))}, **keep)
            else:
                if nd >= 4:
                    raise Reject("4-d")
                i = int(self.rng.integers(nd + 1))
                src.insert(i, 1)
                new = list(src); new[i] = self.choice(DIMS[1:6])
                self.emit(op, [x], {"shape": (tuple(src), tuple(new))}, **keep)
        elif op == "pad":
            pads = tuple((int(self.rng.integers(0, 3)), int(self.rng.integers(0, 3))) for _ in shape)
            value = 0 if x.dtype == "bool" or self.coin(0.7) else (1.5 if x.isfloat else 3)
            if x.dtype.startswith("u") and value != 0:
                value = 3
            g = None if x.grid is None else max(x.grid, 1)
            self.emit(op, [x], {"pads": pads, "value": value}, min(x.lo, value), max(x.hi, value), g, x.unit)
        elif op == "shrink":
            arg = []
            for s in shape:
                a = int(self.rng.integers(0, s))
                arg.append((a, int(self.rng.integers(a + 1, s + 1))))
            self.emit(op, [x], {"arg": tuple(arg)}, **keep)
        elif op == "flip":
            self.emit(op, [x], {"axis": int(self.rng.integers(nd))}, **keep)
        elif op == "slice":
            sl = []
            for s in shape:
                a = int(self.rng.integers(0, s))
                sl.append((a, s, int(self.rng.integers(1, 4))))
            self.emit(op, [x], {"sl": tuple(sl)}, **keep)
        elif op == "cat":
            d = int(self.rng.integers(nd))
            try:
                y = self.pick(lambda v: v is not x and v.dtype == x.dtype and len(v.shape) == nd
                              and all(a == b for i, (a, b) in enumerate(zip(v.shape, shape)) if i != d))
            except Reject:
                y = x
            self.emit(op, [x, y], {"dim": d}, min(x.lo, y.lo), max(x.hi, y.hi), grid_of2(x, y), max(x.unit, y.unit))
        elif op == "gather":
            d = int(self.rng.integers(nd))
            ishape = tuple(self.choice(DIMS[:9]) if i == d else int(self.rng.integers(1, s + 1))
                           for i, s in enumerate(shape))
            idx = self.add_input("int32", ishape, 0, shape[d] - 1)
            self.emit(op, [x, idx], {"dim": d}, **keep)
        else:
            idx = self.add_input("int32", (self.choice(DIMS[:9]),), 0, shape[0] - 1)
            self.emit(op, [x, idx], {}, **keep)

    def r_reduce(self) -> None:
        x = self.pick(lambda v: len(v.shape) >= 1)
        op = self.choice(("sum", "sum", "mean", "max", "min", "prod", "any", "all", "argmax", "argmin", "cumsum"))
        nd = len(x.shape)
        if op in ("argmax", "argmin", "cumsum"):
            axis = int(self.rng.integers(nd)) if op == "cumsum" or self.coin(0.8) else None
        else:
            axes = tuple(sorted(int(i) for i in self.rng.choice(nd, int(self.rng.integers(1, nd + 1)), replace=False)))
            axis = None if self.coin(0.15) else axes
        K = math.prod(x.shape) if axis is None else (x.shape[axis] if isinstance(axis, int) else
                                                     math.prod(x.shape[a] for a in axis))
        keepdim = self.coin()
        if op in ("sum", "cumsum"):
            if x.dtype == "bool":
                self.emit(op, [x], {"axis": axis, **({} if op == "cumsum" else {"keepdim": keepdim})}, 0, K, None, 0.0)
                return
            if x.dtype == "int32":
                x = self.clipped(x, -INT32_SAFE // K, INT32_SAFE // K)
            g = x.grid if x.isfloat and x.grid is not None and K * x.bound * 2.0 ** x.grid < 2.0 ** MANTISSA[x.dtype] else None
            unit = 0.0 if x.isint or (x.unit == 0 and g is not None) else max(x.unit, UNIT[x.dtype] if x.isfloat else 0)
            lo, hi = K * min(x.lo, 0), K * max(x.hi, 0)
            self.emit(op, [x], {"axis": axis, **({} if op == "cumsum" else {"keepdim": keepdim})}, lo, hi, g, unit)
        elif op == "mean":
            out_unit = max(x.unit, UNIT[x.dtype] if x.isfloat else UNIT["float32"])
            self.emit(op, [x], {"axis": axis, "keepdim": keepdim}, min(x.lo, 0), max(x.hi, 0), None, out_unit)
        elif op in ("max", "min"):
            self.emit(op, [x], {"axis": axis, "keepdim": keepdim}, x.lo, x.hi, x.grid, x.unit)
        elif op == "prod":
            if K > 8:
                raise Reject("long product")
            lim = 2.0 if x.isfloat else 4
            x = self.clipped(x, -lim, lim)
            b = x.bound ** K
            g = None if x.grid is None else x.grid * K
            self.emit(op, [x], {"axis": axis, "keepdim": keepdim}, -b, b, grid_of(x, g), arith_unit(x, x, g))
        elif op in ("any", "all"):
            if x.unit:
                raise Reject("discontinuous op on a rounded value")
            self.emit(op, [x], {"axis": axis, "keepdim": keepdim}, 0, 1, None, 0.0)
        else:
            if x.unit:
                raise Reject("discontinuous op on a rounded value")
            if isinstance(axis, tuple):
                axis = axis[0]
            self.emit(op, [x], {"axis": axis, "keepdim": keepdim}, 0, K - 1, None, 0.0)

    def r_matmul(self) -> None:
        if self.coin(0.25):
            return self.int_matmul()
        x = self.pick(lambda v: v.isfloat and len(v.shape) >= 1)
        if self.coin(0.25):
            x = self.emit("cast", [x], {"dtype": "bfloat16"}, x.lo, x.hi,
                          x.grid if x.grid is not None and x.bound * 2.0 ** x.grid < 2 ** 8 else None,
                          0.0 if x.unit == 0 else max(x.unit, UNIT["bfloat16"]))
        k = x.shape[-1]
        if len(x.shape) >= 2 and self.coin(0.3):
            order = tuple(range(len(x.shape) - 2)) + (len(x.shape) - 1, len(x.shape) - 2)
            w = self.emit("permute", [x], {"order": order}, x.lo, x.hi, x.grid, x.unit)
        else:
            n = self.choice(DIMS[:10])
            batch = x.shape[:-2] if len(x.shape) >= 3 and self.coin() else ()
            w = self.add_input(x.dtype, (*batch, k, n))
        g = None if x.grid is None or w.grid is None else x.grid + w.grid
        b = k * x.bound * w.bound
        if g is not None and b * 2.0 ** g >= 2.0 ** MANTISSA[x.dtype]:
            g = None
        unit = 0.0 if g is not None and x.unit == 0 and w.unit == 0 else max(x.unit, w.unit, UNIT[x.dtype], UNIT[w.dtype])
        self.emit("matmul", [x, w], {}, -b, b, g, unit)

    def int_matmul(self) -> None:
        """An int32 matmul (narrower integers cast to int32 first), exact: operands clipped so no sum leaves
        +-INT32_SAFE."""
        x = self.pick(lambda v: v.isint and len(v.shape) >= 1)
        if x.dtype != "int32":
            x = self.emit("cast", [x], {"dtype": "int32"}, x.lo, x.hi, None, 0.0)
        k = x.shape[-1]
        if len(x.shape) >= 2 and self.coin(0.3):
            lim = math.isqrt(INT32_SAFE // k)
            x = self.clipped(x, -lim, lim)
            order = tuple(range(len(x.shape) - 2)) + (len(x.shape) - 1, len(x.shape) - 2)
            w = self.emit("permute", [x], {"order": order}, x.lo, x.hi, None, 0.0)
        else:
            batch = x.shape[:-2] if len(x.shape) >= 3 and self.coin() else ()
            w = self.add_input("int32", (*batch, k, self.choice(DIMS[:10])), -100, 100)
            lim = INT32_SAFE // (100 * k)
            x = self.clipped(x, -lim, lim)
        b = k * x.bound * w.bound
        self.emit("matmul", [x, w], {}, -b, b, None, 0.0)

    def r_pattern(self) -> None:
        x = self.pick(lambda v: v.isfloat and len(v.shape) >= 1)
        op = self.choice(("softmax", "log_softmax", "logsumexp", "layernorm", "rmsnorm", "cross_entropy", "sparse_ce",
                          "var", "std"))
        x = self.clipped(x, -30, 30)
        nd, u = len(x.shape), max(x.unit, UNIT[x.dtype])
        axis = int(self.rng.integers(nd))
        n = x.shape[axis]
        span = x.hi - x.lo
        if op == "softmax":
            self.emit(op, [x], {"axis": axis}, 0, 1, None, u)
        elif op == "log_softmax":
            self.emit(op, [x], {"axis": axis}, -span - math.log(n) - 1, 0, None, u)
        elif op == "logsumexp":
            self.emit(op, [x], {"axis": axis}, x.lo, x.hi + math.log(n) + 1, None, u)
        elif op in ("var", "std"):
            if n < 2:
                raise Reject("variance of one element (tinygrad's correction divides by n - 1)")
            var = (x.hi - x.lo) ** 2 / 4 * n / (n - 1)      # the largest sample variance of values in [lo, hi]
            self.emit(op, [x], {"axis": axis}, 0, var if op == "var" else math.sqrt(var), None, u)
        elif op in ("layernorm", "rmsnorm"):
            if op == "rmsnorm" and x.dtype != "float32":
                x = self.emit("cast", [x], {"dtype": "float32"}, x.lo, x.hi, x.grid, x.unit)
            lim = math.sqrt(max(n, 1)) + 1
            self.emit(op, [x], {"axis": axis if op == "rmsnorm" else -1}, -lim, lim, None, u)
        elif op == "cross_entropy":
            cd = 0 if nd == 1 else 1                          # tinygrad's class dimension
            if self.coin():                                   # class probabilities
                p = self.add_input("float32", x.shape)
                y = self.emit("softmax", [p], {"axis": cd}, 0, 1, None, UNIT["float32"])
            else:                                             # class indices
                y = self.add_input("int32", x.shape[:cd] + x.shape[cd + 1:] or (), 0, x.shape[cd] - 1)
            self.emit(op, [x, y], {}, -1, span + math.log(x.shape[cd]) + 1, None, max(u, y.unit))
        else:
            if nd != 2:
                x = self.emit("reshape", [x], {"shape": (-1, x.shape[-1])}, x.lo, x.hi, x.grid, x.unit)
            labels = self.add_input("int32", (x.shape[0],), 0, x.shape[-1] - 1)
            self.emit(op, [x, labels], {}, -1, span + math.log(x.shape[-1]) + 1, None, u)

    def r_realize(self) -> None:
        x = self.pick(lambda v: v.name not in {i.name for i in self.inputs})
        self.emit("realize", [x], {}, x.lo, x.hi, x.grid, x.unit)

    RULES = {"r_float_unary": 16, "r_float_binary": 16, "r_int_binary": 14, "r_bool": 3, "r_cast": 8,
             "r_movement": 16, "r_reduce": 12, "r_matmul": 5, "r_pattern": 6, "r_realize": 4}

    def program(self) -> Program:
        for _ in range(int(self.rng.integers(1, 3))):
            self.add_input(self.choice(list(INPUT_DTYPES)), self.rand_shape())
        names, w = list(self.RULES), np.array(list(self.RULES.values()), np.float64)
        tries = 0
        while len(self.steps) < self.n_steps and tries < 50 * self.n_steps:
            tries += 1
            rule = names[int(self.rng.choice(len(names), p=w / w.sum()))]
            n_steps, n_vals, n_inputs = len(self.steps), len(self.vals), len(self.inputs)
            try:
                getattr(self, rule)()
            except Reject:
                # drop what a rejected rule emitted, so the program text is only what runs
                del self.steps[n_steps:], self.vals[n_vals:], self.inputs[n_inputs:]
        if not self.steps:
            raise RuntimeError(f"seed {self.seed}: no step could be generated")
        outs = [self.vals[-1]]
        others = [v for v in self.vals[:-1] if v.name not in {i.name for i in self.inputs}]
        if others and self.coin(0.4):
            outs.append(self.choice(others))
        return Program(self.seed, self.inputs, self.steps, [o.name for o in outs], {v.name: v.unit for v in self.vals})


ROUNDING_OPS = {"add", "sub", "mul", "square", "mul_c", "add_c", "pos", "sum", "cumsum", "matmul", "prod"}


def wraps(dtype: str) -> bool:
    """Whether the CPU device defines arithmetic leaving the dtype's range: uint32's is modular in C. int32 overflow
    is undefined in C, and a narrow type's result is computed in int and only truncated where tinygrad keeps the cast:
    fused into a wider consumer (uint8 * uint8 into a uint32 cumsum) the CPU device keeps the untruncated product."""
    return dtype == "uint32"


def fits(a: Val, dtype: str) -> bool:
    """Whether every value of a is exactly a `dtype` value (a cast to it rounds nothing)."""
    if a.dtype == "bool" or a.isfloat and MANTISSA[a.dtype] <= MANTISSA[dtype] and (a.dtype, dtype) != ("float16", "bfloat16"):
        return True
    g = 0 if a.isint else a.grid
    return g is not None and a.bound * 2.0 ** g < 2.0 ** MANTISSA[dtype] and a.bound < 6e4


def grid_of(x: Val, g: int | None) -> int | None:
    return None if x.grid is None or g is None else g


def grid_of2(a: Val, b: Val) -> int | None:
    if a.isint and b.isint:
        return None
    ga = a.grid if a.isfloat else (0 if a.bound < 2 ** 24 else None)
    gb = b.grid if b.isfloat else (0 if b.bound < 2 ** 24 else None)
    return None if ga is None or gb is None else max(ga, gb)


def arith_unit(a: Val, b: Val, g: int | None) -> float:
    """Rounding-free arithmetic on grid values keeps the result bit for bit; otherwise it is rounded (fused
    multiply-adds and operation order may differ between the devices). Integer arithmetic never rounds."""
    if not (a.isfloat or b.isfloat) or g is not None and a.unit == 0 and b.unit == 0:
        return 0.0
    dt = a.dtype if a.isfloat else b.dtype
    return max(a.unit, b.unit, UNIT.get(dt, UNIT["float32"]))


def broadcastable(a: tuple, b: tuple) -> bool:
    return len(a) <= len(b) and all(p in (1, q) for p, q in zip(a[::-1], b[::-1]))


def is_float(d: str) -> bool: return d in FLOAT_DTYPES
def is_int(d: str) -> bool: return d in INT_DTYPES


def src_threshold(g: Gen, src: Val) -> Val:
    """A fresh input of the same dtype to compare `src` against (a comparison of two exact values)."""
    return g.add_input(src.dtype, src.shape[-1:] or (1,), src.lo, src.hi) if src.dtype != "bool" else src


def factor_shape(g: Gen, n: int) -> tuple[int, ...]:
    """A random shape of 1-4 dims with n elements."""
    primes, m, p = [], n, 2
    while m > 1:
        while m % p == 0:
            primes.append(p)
            m //= p
        p += 1
    nd = int(g.rng.integers(1, 5))
    dims = [1] * nd
    for q in primes:
        dims[int(g.rng.integers(nd))] *= q
    return tuple(dims)


def generate(seed: int, max_numel: int = 2048, n_steps: int | None = None) -> Program:
    """The program of `seed`: deterministic (same seed, same text)."""
    rng = np.random.default_rng([seed, 1])
    return Gen(seed, max_numel, n_steps or int(rng.integers(3, 13))).program()


# ---- inputs and execution
def input_array(inp: Input, seed: int) -> np.ndarray:
    """The input's data, drawn from its own stream (same numbers on every device and every replay)."""
    rng = np.random.default_rng([seed, int(inp.name[1:])])
    if inp.dtype == "bool":
        return rng.random(inp.shape) < 0.5
    if inp.dtype in FLOAT_DTYPES:
        if inp.grid is not None:
            step = 2.0 ** -inp.grid
            x = rng.integers(int(inp.lo / step), int(inp.hi / step) + 1, inp.shape) * step
        else:
            x = rng.uniform(inp.lo, inp.hi, inp.shape)
        x = x.astype(np.float32)
        if inp.dtype == "bfloat16":   # exactly representable, so the upload's cast rounds nothing
            x = (x.view(np.uint32) & 0xFFFF0000).view(np.float32)
        return x.astype(np.float16) if inp.dtype == "float16" else x
    return rng.integers(int(inp.lo), int(inp.hi) + 1, inp.shape).astype(tdt(inp.dtype).fmt)


def make_input_tensor(inp: Input, arr: np.ndarray, device: str) -> Tensor:
    if inp.dtype == "bfloat16":       # numpy has no bfloat16: upload float32 and cast on the device
        return Tensor(arr, device=device).cast(dtypes.bfloat16)
    return Tensor(arr, device=device)


def run(program: Program, device: str, every_step: bool = False) -> dict[str, np.ndarray]:
    """Execute the program on `device` from the seed's inputs; the outputs (every value with every_step, each realized
    on its own) as numpy arrays. On the CPU device bfloat16 goes through tinygrad's own float emulation (the host's
    clang may have no __bf16 for tinygrad's CPU target), explicit casts still rounding to nearest even."""
    if not device.startswith("CPU"):
        return _run(program, device, every_step)
    with Context(EMULATED_DTYPES="bfloat16"):
        try:
            return _run(program, device, every_step)
        except subprocess.CalledProcessError:
            # tinygrad's CPU renderer casts float16 vectors in a way clang refuses (`(__fp164)(float4){...}`: seeds
            # 11766, 12030); without its optimizations (no upcast, so no vectors) the same kernels compile
            with Context(NOOPT=1):
                return _run(program, device, every_step)


def _run(program: Program, device: str, every_step: bool) -> dict[str, np.ndarray]:
    env = {i.name: make_input_tensor(i, input_array(i, program.seed), device) for i in program.inputs}
    cpu = device.startswith("CPU")
    for s in program.steps:
        args = [env[a] for a in s.args]
        if cpu and s.op in SUMMING:
            args = [a.contiguous() if a.dtype == dtypes.bfloat16 else a for a in args]
        if cpu and s.op == "cast" and s.params["dtype"] == "bfloat16":
            env[s.out] = cast_bf16_rne(*args, **s.params)
        elif cpu and s.op in MAX_REDUCING and any(a.dtype == dtypes.bfloat16 for a in args):
            env[s.out] = cpu_max_reducing(s.op, args, s.params)
        else:
            env[s.out] = OPS[s.op](*args, **s.params)
        if every_step:     # contiguous: a realized movement op can stay a view, fused into the next step's kernel
            env[s.out] = env[s.out].contiguous().realize()
    names = [s.out for s in program.steps] if every_step else program.outputs
    Tensor.realize(*[env[n] for n in names])
    return {n: to_numpy(env[n]) for n in names}


def to_numpy(t: Tensor) -> np.ndarray:
    """t's values. tinygrad leaves some movement ops of a realized value as a view with no buffer of its own, on
    every device, and .numpy() refuses it (seed 9675: a permute of a size-1-axis flip of a realized value; even
    .contiguous() keeps the view): a clone copies it into one."""
    try:
        return t.numpy()
    except RuntimeError as e:
        if "non-contiguous view" not in str(e):
            raise
        return t.clone().numpy()


# ops with a reduction inside (gather and tensor indexing: a one-hot sum). tinygrad's bfloat16 emulation fails to
# build a reduction over a fused bfloat16 reduction on the CPU device (UOp verification of an accumulator: seeds 9142,
# the mean of a bfloat16 prod, and 9147, an index into a bfloat16 matmul), so the reference realizes a bfloat16
# operand of these first (a bfloat16 value either way; realized, it is rounded once more at most: within the bfloat16
# tolerance).
SUMMING = {o for o, c in OP_CLASS.items() if c in ("reduction", "matmul", "softmax/norm")} | {"gather", "index"}
# ops with a MAX reduction inside: tinygrad's bfloat16 emulation fails to build them on the CPU device (UOp verification
# of the accumulator), so the reference computes them from the bf16 values widened to float32 (max is exact)
MAX_REDUCING = {"max", "min", "argmax", "argmin", "softmax", "log_softmax", "logsumexp", "cross_entropy", "sparse_ce"}


def cpu_max_reducing(op: str, args: list[Tensor], params: dict) -> Tensor:
    want = OPS[op](*args, **params).dtype          # the dtype the program computes in (lazy: nothing runs)
    out = OPS[op](*[a.float() if a.dtype == dtypes.bfloat16 else a for a in args], **params)
    return cast_bf16_rne(out, "bfloat16") if want == dtypes.bfloat16 and out.dtype != want else out.cast(want)


def cast_bf16_rne(x: Tensor, dtype: str) -> Tensor:
    """The CPU device's cast to bfloat16 rounded to nearest even, as tinygrad defines it (dtypes' truncate, a native
    __bf16): its bfloat16 emulation, which the reference runs under, truncates instead. On float32 bits: add 0x7fff
    plus the lowest kept bit, clear the low half (NaN kept); the final cast is then exact."""
    f = x.cast(dtypes.float32)
    bits = f.bitcast(dtypes.uint32)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000).bitcast(dtypes.float32)
    return (f != f).where(f, rounded).cast(dtypes.bfloat16)


# ---- error scales: what a rounding difference is measured against (module doc, "Tolerances")
# A float value's rounding differences are relative to the terms it was computed from, not to the value itself: a
# sum whose terms cancel (seed 11628: the 7 entries of a float16 layernorm's row sum to ~1e-16) differs between devices
# by the rounding of its terms. `magnitudes` gives every value an elementwise scale m >= |value| by first-order forward
# error analysis: an input's m is |x|; a step carries its operands' m through the op as the rules below say.
MAG_LINEAR = {"reshape", "permute", "expand", "pad", "shrink", "flip", "slice", "cat", "gather", "index", "realize",
              "sum", "mean", "cumsum", "matmul", "mul", "mul_c", "square", "prod", "neg", "abs", "where"}
              # the op itself on the operands' m (bounds |J| m, J the op's Jacobian, and the op's own terms)
MAG_KEPT = {"clip", "relu", "cast"}     # 1-Lipschitz: the operand's m (a float operand's; else |value|)
MAG_RAW_ARGS = {"gather": (1,), "index": (1,), "where": (0,)}   # index / condition operands: their values
MAG_ADDITIVE = {"add": 2, "sub": 2, "add_c": 1, "pos": 1}       # m_a + m_b (+ |c|) over the first n operands
# elementwise ops through tinygrad's autograd: m = |y| + sum_i |dy/dx_i| (m_i - |x_i|)
MAG_DIFFERENTIABLE = {o for o, c in OP_CLASS.items() if c == "float unary"} | {"div", "pow", "maximum", "minimum"}
# reductions over other elements: m = |y| + pattern_error(e), e = the operands' largest excess max_i (m_i - |x_i|)
MAG_PATTERNS = {o for o, c in OP_CLASS.items() if c == "softmax/norm"} | {"max", "min"}


def pattern_error(op: str, x: np.ndarray, y: np.ndarray, params: dict, e: float) -> float:
    """A bound on max|dy| when every operand element moves by at most e, for a softmax/norm pattern or a max/min
    reduction at x (its first operand; y its value)."""
    if op in ("logsumexp", "max", "min"):
        return e
    if op in ("softmax", "log_softmax", "sparse_ce"):
        return 2 * e
    if op == "cross_entropy":   # -sum p log_softmax(x): 2e through x, |log_softmax| <= span + log n through p
        return (2 + float(x.max() - x.min()) + math.log(max(x.size, 2))) * e
    axis = params.get("axis", -1)
    d = x - x.mean(axis, keepdims=True)
    if op == "layernorm":       # y = d / s, s = sqrt(mean d^2 + eps): |dy| <= (2 + |y|) |dx| / s
        return (2 + float(np.abs(y).max())) * e / float(np.sqrt((d * d).mean(axis) + NORM_EPS).min())
    if op == "rmsnorm":         # y = x / r, r = sqrt(mean x^2 + eps): |dy| <= (1 + |y|) |dx| / r
        return (1 + float(np.abs(y).max())) * e / float(np.sqrt((x * x).mean(axis) + NORM_EPS).min())
    n = x.shape[axis]
    dvar = 2 * float(np.abs(d).max()) * n / max(n - 1, 1) * e       # var = sum d^2 / (n - 1)
    # std = sqrt(var): |dstd| <= dvar / (2 std), and never more than sqrt(dvar)
    return dvar if op == "var" else min(dvar / (2 * max(float(y.min()), 1e-30)), math.sqrt(dvar))


def magnitudes(program: Program, steps: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The scale m >= |value| of every value (float64 arrays) from the step-by-step CPU values `steps`
    (run(program, "CPU", every_step=True)); only the float values' m is used (integers compare exactly)."""
    vals = {n: np.asarray(v) for n, v in ({i.name: input_array(i, program.seed) for i in program.inputs} | steps).items()}
    mag = {i.name: np.asarray(np.abs(vals[i.name].astype(np.float64))) for i in program.inputs}
    for s in program.steps:
        y = vals[s.out].astype(np.float64)
        xs = [vals[a].astype(np.float64) for a in s.args]
        excess = [mag[a] - np.abs(x) for a, x in zip(s.args, xs)]
        if not np.issubdtype(vals[s.out].dtype, np.floating):
            m = np.abs(y)
        elif s.op in MAG_LINEAR:
            raw = MAG_RAW_ARGS.get(s.op, ())
            ts = [Tensor(vals[a] if k in raw else mag[a].astype(np.float32), device="CPU") for k, a in enumerate(s.args)]
            params = {k: abs(v) if k in ("value", "c") else v for k, v in s.params.items()}   # pad's value, mul_c's c
            m = np.abs(OPS[s.op](*ts, **params).numpy().astype(np.float64))
        elif s.op in MAG_ADDITIVE:
            m = sum(mag[a] for a in s.args[:MAG_ADDITIVE[s.op]]) + abs(s.params.get("c", 0.0)) + (s.op == "pos") * 0.5
        elif s.op in MAG_DIFFERENTIABLE:
            m = np.abs(y) + sum(np.abs(g) * e for g, e in zip(elementwise_grads(s, xs, y.shape), excess))
        elif s.op in MAG_PATTERNS:
            e = max(float(e.max(initial=0.0)) for e in excess)
            m = np.abs(y) + (pattern_error(s.op, xs[0], y, s.params, e) if e > 0 else 0.0)
        elif s.op in MAG_KEPT:
            m = mag[s.args[0]]
        else:               # the rest take only values both devices compute bit for bit (module doc, "Domains")
            m = np.abs(y)
        mag[s.out] = np.asarray(np.maximum(np.broadcast_to(m, y.shape), np.abs(y)))     # 0-d stays an array
    return mag


def elementwise_grads(s: Step, xs: list[np.ndarray], shape: tuple[int, ...]) -> list[np.ndarray]:
    """dy/dx_i of an elementwise step at every output element (operands broadcast to the output's shape first, so
    the gradient of sum(y) is the derivative itself), computed by tinygrad's autograd in float32 on the CPU device."""
    ts = [Tensor(np.broadcast_to(x, shape).astype(np.float32), device="CPU") for x in xs]
    return [g.numpy().astype(np.float64) for g in OPS[s.op](*ts, **s.params).sum().gradient(*ts)]


def compare(tt: np.ndarray, ref: np.ndarray, unit: float, scale: np.ndarray | None = None) -> str | None:
    """None when the TT value is right within the tolerance of its class (module doc), else what differs; an inexact
    float value's error is relative to `scale` (its `magnitudes`) when given, else to the reference itself."""
    if tt.shape != ref.shape or tt.dtype != ref.dtype:
        return f"shape/dtype {tt.shape} {tt.dtype} != {ref.shape} {ref.dtype}"
    if not np.issubdtype(ref.dtype, np.floating):
        bad = tt != ref
        if bad.any():
            i = np.unravel_index(int(np.argmax(bad)), bad.shape)
            return f"{int(bad.sum())}/{bad.size} elements differ (exact), first at {i}: {tt[i]} != {ref[i]}"
        return None
    a, b = np.atleast_1d(tt.astype(np.float64)), np.atleast_1d(ref.astype(np.float64))   # a 0-d sum: indexable
    special = ~np.isfinite(a) | ~np.isfinite(b)
    same = (a == b) | (np.isnan(a) & np.isnan(b))
    if unit == 0:
        bad = ~same
        if bad.any():
            i = np.unravel_index(int(np.argmax(bad)), bad.shape)
            return f"{int(bad.sum())}/{bad.size} elements differ (bit for bit), first at {i}: {a[i]!r} != {b[i]!r}"
        return None
    if (special & ~same).any():
        i = np.unravel_index(int(np.argmax(special & ~same)), a.shape)
        return f"inf/nan positions differ, first at {i}: {a[i]!r} != {b[i]!r}"
    fa, fb = a[~special], b[~special]
    tol = TOL[unit]
    norm = np.linalg.norm(fb) if scale is None else np.linalg.norm(np.atleast_1d(scale)[~special])
    err = float(np.linalg.norm(fa - fb)) / max(float(norm), 1e-30)
    if err > tol and np.linalg.norm(fa - fb) > 0:
        d = np.abs(a - b)
        d[special] = 0
        i = np.unravel_index(int(np.argmax(d)), d.shape)
        return f"relative L2 error {err:.3g} > {tol:.3g}; worst at {i}: {a[i]!r} != {b[i]!r}"
    return None
