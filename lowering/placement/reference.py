"""The float32 reference of a kernel's value graph in numpy (`reference`: per-op rounding, bfloat16 results rounded to
nearest even once, reductions accumulated exactly or in the SFPU reduction's lane order), its error measures
(`rel_error`, `worst_error`) and the sample data predictions run on (`sample_inputs`, `sample_sets`)."""
from __future__ import annotations

import math

import numpy as np

from tt_backend.lowering.dag import ValueDAG
from tt_backend.lowering.graph import live_nodes
from tt_backend.lowering.rewrite import cpu_divisions
from tt_backend.chip.errors import UnsupportedOp

SAMPLE_ELEMENTS = 1024  # one tile of samples per distribution and evaluation
# Sample distributions: the real data is unknown when tinygrad compiles a kernel, and the relative L2 error of heavy-
# tailed outputs (1/x of N(0,1) data) rests on a few elements, so the prediction is the worst over a few shapes of data.
SAMPLE_DISTS = ("normal", "uniform", "positive")


def bf16_round(x: np.ndarray) -> np.ndarray:
    """float32 -> nearest-even bfloat16 as float32 (tinygrad's cast; NaN stays NaN)."""
    b = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    nan_bit = ((b & 0xFFFF) != 0).astype(np.uint64) << np.uint64(16)
    r = np.where((b & 0x7F800000) == 0x7F800000, b | nan_bit, b + 0x7FFF + ((b >> 16) & 1))
    return (r & 0xFFFF0000).astype(np.uint32).view(np.float32)


NP = {"float32": np.float32, "bfloat16": np.float32, "int32": np.int32, "bool": np.bool_, "uint32": np.uint32,
      "float16": np.float32}


def f16_round(x: np.ndarray) -> np.ndarray:
    """float32 -> nearest-even float16 as float32."""
    with np.errstate(over="ignore"):
        return np.asarray(x, np.float32).astype(np.float16).astype(np.float32)


ROUND = {"bfloat16": bf16_round, "float16": f16_round}


def _cast(x: np.ndarray, dt: str) -> np.ndarray:
    if dt in ROUND:
        return ROUND[dt](x.astype(np.float32))
    if dt == "bool":
        return x != 0
    if dt == "int32" and x.dtype.kind == "f":
        return np.trunc(np.nan_to_num(x)).astype(np.int64).astype(np.int32)
    return x.astype(NP[dt])


def _int_div(floor: bool, rem: bool):
    """tinygrad's CDIV/CMOD/FLOORDIV/FLOORMOD on int32 arrays (helpers.cdiv/floordiv: x / 0 is 0, x % 0 is x),
    computed in int64 and wrapped back to the operands' dtype."""
    def f(a, b):
        a64, b64 = np.asarray(a).astype(np.int64), np.asarray(b).astype(np.int64)
        nz = np.where(b64 == 0, 1, b64)
        q = a64 // nz if floor else np.sign(a64) * np.sign(nz) * (np.abs(a64) // np.abs(nz))
        q = np.where(b64 == 0, 0, q)
        return (a64 - q * b64 if rem else q).astype(np.asarray(a).dtype)
    return f


_REF = {"ADD": np.add, "MUL": np.multiply, "SUB": np.subtract, "NEG": np.negative, "MAX": np.maximum,
        "RECIPROCAL": lambda a: np.float32(1) / a, "EXP2": np.exp2, "LOG2": np.log2, "SQRT": np.sqrt, "SIN": np.sin,
        "TRUNC": np.trunc, "MULADD": lambda a, b, c: a * b + c, "MULSUB": lambda a, b, c: a * b - c,
        "NMULADD": lambda a, b, c: c - a * b, "DIV": np.divide, "AND": np.bitwise_and, "OR": np.bitwise_or, "XOR": np.bitwise_xor,
        "SHL": np.left_shift, "SHR": np.right_shift, "CDIV": _int_div(False, False), "CMOD": _int_div(False, True),
        "FLOORDIV": _int_div(True, False), "FLOORMOD": _int_div(True, True)}   # int32: right_shift is arithmetic, as C's >> on int


def reduce_exact(op: str, v: np.ndarray, axes: tuple[int, ...], dtype: str) -> np.ndarray:
    """REDUCE of the float32 reference: float sums/products accumulated in float64, rounded once (keepdims)."""
    if op == "MAX":
        return v.max(axis=axes, keepdims=True)
    if dtype in ("float32", "bfloat16"):
        f = np.sum if op == "ADD" else np.prod
        return _cast(f(v.astype(np.float64), axis=axes, keepdims=True), dtype)
    f = np.sum if op == "ADD" else np.prod
    if dtype == "bool":
        return (v.any if op == "ADD" else v.all)(axis=axes, keepdims=True)
    return f(v.astype(np.int64), axis=axes, keepdims=True).astype(NP[dtype])   # int sums/products wrap


def two_sum(s: np.ndarray, c: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(s, c) + x as lowering/codegen/lane_combine.two_sum computes it in float32: s' = s + x, its exact rounding
    error added to c."""
    n = s + x
    b = n - s
    return n, c + ((s - (n - b)) + (x - b))


def compensated_lanes(x: np.ndarray) -> np.ndarray:
    """float32 rows x (outputs, steps, lanes) summed as the compensated SFPU sum: per lane (s, c) over the steps in
    order, the lanes combined pairwise (s by two_sum, c plainly), s + c rounded once."""
    s, c = np.zeros_like(x[:, 0, :]), np.zeros_like(x[:, 0, :])
    for k in range(x.shape[1]):
        s, c = two_sum(s, c, x[:, k, :])
    while s.shape[1] > 1:
        s, c = two_sum(s[:, 0::2], c[:, 0::2] + c[:, 1::2], s[:, 1::2])
    return s + c


def reduce_in_lanes(lanes: int, compensated: bool = False):
    """REDUCE as lowering/families/sfpu_reduce.py runs it: lane c of an output accumulates reduce indices k = c (mod lanes) in order
    (one fp32 rounding per element), then the lanes combine pairwise; `compensated`: a float32 sum accumulated and
    combined as (sum, rounding errors) (`compensated_lanes`). MAX and integer reductions are exact."""
    def red(op: str, v: np.ndarray, axes: tuple[int, ...], dtype: str) -> np.ndarray:
        if op == "MAX" or dtype not in ("float32", "bfloat16"):
            return reduce_exact(op, v, axes, dtype)
        keep = [a for a in range(v.ndim) if a not in axes]
        out_shape = [v.shape[a] if a in keep else 1 for a in range(v.ndim)]
        x = np.transpose(v, keep + list(axes)).reshape(-1, int(np.prod([v.shape[a] for a in axes])))
        k = x.shape[1]
        pad = -k % lanes
        ident = np.float32(0 if op == "ADD" else 1)
        x = np.concatenate([x.astype(np.float32), np.full((x.shape[0], pad), ident, np.float32)], 1)
        x = x.reshape(x.shape[0], -1, lanes)
        if compensated and op == "ADD":
            return _cast(compensated_lanes(x).reshape(out_shape), dtype)
        acc = (np.cumsum if op == "ADD" else np.cumprod)(x, axis=1, dtype=np.float32)[:, -1, :]
        while acc.shape[1] > 1:
            acc = acc[:, 0::2] + acc[:, 1::2] if op == "ADD" else acc[:, 0::2] * acc[:, 1::2]
        return _cast(acc.reshape(out_shape), dtype)
    return red


def reference(dag: ValueDAG, inputs: list[np.ndarray], ranges: tuple[int, ...] | None = None,
              reduce=reduce_exact) -> np.ndarray:
    """The graph in float32 (numpy, per-op rounding; bfloat16 results rounded to nearest even). With REDUCE nodes,
    `ranges` gives the iteration space the inputs were gathered over (flat, row-major); a REDUCE reduces its axes
    (`reduce`: exact float64 accumulation by default) and the result is broadcast back over the whole space.
    A float `a * (1/b)` is the correctly rounded quotient, as tinygrad's CPU device computes it (lowering/rewrite.py)."""
    dag = cpu_divisions(dag)
    vals: dict[int, np.ndarray] = {}
    shaped = ranges is not None and any(n.op == "REDUCE" for n in dag.nodes)
    with np.errstate(all="ignore"):
        for i in live_nodes(dag):
            n = dag.nodes[i]
            s = [vals[k] for k in n.srcs]
            if n.op == "LOAD":
                v = np.asarray(inputs[n.arg])
                if shaped:
                    v = np.broadcast_to(v.reshape(-1), (int(np.prod(ranges)),)).reshape(ranges)
            elif n.op == "REDUCE":
                if not shaped:
                    raise UnsupportedOp("reference: a REDUCE needs the kernel's ranges")
                v = reduce(n.arg[0], np.broadcast_to(s[0], ranges), tuple(n.arg[1]), n.dtype)
            elif n.op == "CONST":
                v = np.array(n.arg, NP[n.dtype])
            elif n.op == "CAST":
                v = _cast(s[0], n.dtype)
            elif n.op == "BITCAST":
                v = np.asarray(s[0]).astype(NP[dag.nodes[n.srcs[0]].dtype]).view(NP[n.dtype])
            elif n.op == "WHERE":
                v = np.where(s[0], s[1], s[2])
            elif n.op in ("CMPLT", "CMPNE"):
                v = (s[0] < s[1]) if n.op == "CMPLT" else (s[0] != s[1])
            else:
                v = _REF[n.op](*s)
                if n.dtype == "bfloat16":
                    v = bf16_round(v)
                v = np.asarray(v).astype(NP[n.dtype])
            vals[i] = v
    if shaped:
        return np.broadcast_to(vals[dag.out], ranges).reshape(-1)
    return vals[dag.out]


def rel_error(out: np.ndarray, ref: np.ndarray) -> tuple[float, float]:
    """(||out - ref||_2 / ||ref||_2, max_i |out_i - ref_i| / |ref_i| over ref_i != 0); non-finite reference entries are
    left out (both sides), a non-finite output where the reference is finite counts as infinite error."""
    o, r = np.asarray(out, np.float64).reshape(-1), np.asarray(ref, np.float64).reshape(-1)
    o, r = np.broadcast_arrays(o, r)
    keep = np.isfinite(r)
    o, r = o[keep], r[keep]
    if not np.isfinite(o).all():
        return math.inf, math.inf
    d = np.abs(o - r)
    nr = float(np.linalg.norm(r))
    l2 = float(np.linalg.norm(d)) / nr if nr > 0 else (math.inf if (d > 0).any() else 0.0)
    nz = r != 0
    mx = float((d[nz] / np.abs(r[nz])).max()) if nz.any() else 0.0
    if (~nz).any() and (d[~nz] > 0).any():
        mx = math.inf
    return l2, mx


def sample_sets(dtypes: list[str], n: int = SAMPLE_ELEMENTS, seed: int = 0, dists=SAMPLE_DISTS) -> list[list]:
    return [sample_inputs(dtypes, n, seed + k, dist) for k, dist in enumerate(dists)]


def concat_sets(sets: list[list[np.ndarray]]) -> tuple[list[np.ndarray], list[int]]:
    """Sample sets -> one input list (the evaluator runs them in one go) and the size of each set."""
    sizes = [max(np.asarray(x).size for x in st) for st in sets]
    xs = [np.concatenate([np.broadcast_to(np.asarray(st[j]), (n,)) for st, n in zip(sets, sizes)])
          for j in range(len(sets[0]))]
    return xs, sizes


def worst_error(out: np.ndarray, ref: np.ndarray, sizes: list[int]) -> tuple[float, float]:
    """rel_error per sample set; the worst of each metric."""
    o = np.broadcast_to(np.asarray(out).reshape(-1), (sum(sizes),))
    r = np.broadcast_to(np.asarray(ref).reshape(-1), (sum(sizes),))
    errs, k = [], 0
    for n in sizes:
        errs.append(rel_error(o[k:k + n], r[k:k + n]))
        k += n
    return max(e[0] for e in errs), max(e[1] for e in errs)


def sample_inputs(dtypes: list[str], n: int, seed: int = 0, dist: str = "normal") -> list[np.ndarray]:
    """Samples drawn like typical user data (the real data is not known when tinygrad compiles a kernel): N(0,1)
    (or U(-1,1) / U(0.5,2)) in the stream's dtype; int32 small integers; bool fair coins."""
    rng = np.random.default_rng(seed)
    out = []
    for dt in dtypes:
        if dt in ("float32", "bfloat16", "float16"):
            x = {"normal": lambda: rng.standard_normal(n), "uniform": lambda: rng.uniform(-1, 1, n),
                 "positive": lambda: rng.uniform(0.5, 2, n)}[dist]().astype(np.float32)
            out.append(ROUND[dt](x) if dt in ROUND else x)
        elif dt == "int32":
            out.append(rng.integers(-100, 100, n).astype(np.int32))
        elif dt == "uint32":
            out.append(rng.integers(0, 2**32, n, dtype=np.uint32))
        else:
            out.append(rng.integers(0, 2, n).astype(bool))
    return out
