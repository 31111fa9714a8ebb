"""Matmuls whose operands are gathered: convolutions (forward, weight and input gradients, conv_transpose; 1d/2d/3d,
padding, stride, dilation, groups) recognised as `MatmulSpec`s for the matmul families.

tinygrad 0.14 writes a convolution as one kernel `out[o] = sum_r x[f(o, r)] * w[g(o, r)]`: a REDUCE(ADD) over several
ranges (input channel x window) of the product of two loads whose indices are affine or not (a strided or dilated
transpose gives `//` and `%`) and gated by the padding (`WHERE(valid, INDEX(x, WHERE(valid, i, Invalid)), 0)`).
Seen as a matmul C[b, m, n] = sum_k A[b, m, k] B[b, k, n]:
* k: the reduce ranges, flattened in the kernel's order;
* n: the ranges only one operand (B) reads that merge into one contiguous run of the output (innermost stride 1);
* m: the ranges only the other operand (A) reads that merge into one strided run of the output;
* batch: every other output range (read by both, as a conv's group; or left out of the m/n runs, as a conv's batch).
An operand whose index is affine with strides that merge along its flattened row and column ranges stays a strided
operand (the weights, mostly); any other is gathered (`Gather`): the reader computes each element's offset with the
index expression in C, and writes a zero where its gate is off. The SFPU matmul then multiplies in fp32 with the
same numerics as any matmul (one SFPMAD rounding per multiply-add, k in order). Only the reader differs from a plain
matmul's, so everything that reads `Operand.rs/cs/bs` of a gathered operand is told by `Operand.gather`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from tinygrad.dtype import dtypes
from tinygrad.uop.ops import AxisType, Ops, UOp

from tt_backend.lowering.families.gathered_operand import Gather
from tt_backend.lowering.families.matmul_spec import MATMUL_DTYPES, MatmulSpec, Operand, stored_sum_of_products
from tt_backend.lowering.frontend import DTYPE_NAME, affine, index_expr, strip_invalid, strip_ops
from tt_backend.lowering.index import IndexExpr
from tt_backend.lowering.plan import DTYPE_SIZE
from tt_backend.chip.errors import UnsupportedOp

# rows (M) a gathered matmul needs. The one-core SFPU matmul gathers each B element once for M products; the SFPU
# reduction gathers both factors of every product but spreads the work over a core grid. So the matmul costs far less
# host time (what the emulator spends) from a few rows on, and more emulated cycles (one core against a grid) until
# the SFPU matmul runs on a grid itself. Measured (host s of the kernel / emulated cycles, matmul vs reduction):
# M = 1 (conv2d 2x4x9x9 * 6x2x3x3, groups 2, stride 2, pad 1) 0.49 / 348k vs 0.42 / 31k; M = 4 (test_simple_conv3d)
# 1.85 / 2.05M vs 6.56 / 131k; M = 4 (test_simple_conv_transpose3d) 12.2 / 15.8M vs 68.4 / 959k; M = 32
# (test_nested_conv2d's second conv) 0.70 / 431k vs 8.5 / 290k.
MIN_GATHERED_ROWS = 4


@dataclass(frozen=True)
class Load:
    """One factor of the product: the buffer, its index (Invalid stripped), the gate (index and value conditions)."""
    buf: UOp
    index: UOp
    conds: tuple[UOp, ...]
    tile: str                   # the precision the product sees: "bf16" | "fp32" (matmul_spec.match_matmul's rule)

    def ranges(self) -> frozenset[UOp]:
        return frozenset(u for x in (self.index, *self.conds) for u in x.toposort() if u.op is Ops.RANGE)


def _dtype(buf: UOp):
    return buf.dtype.base if hasattr(buf.dtype, "base") else buf.dtype   # PtrDType in some tinygrad paths


def _param(u: UOp) -> UOp | None:
    while u.op is not Ops.PARAM:
        if not u.src: return None
        u = u.src[0]
    return u


def _load(x: UOp) -> Load | None:
    """[CAST] [WHERE(cond, ] [LOAD] INDEX(buf, [WHERE(valid, ] idx [, Invalid)]) [, 0)]) as a Load, else None."""
    casts = []
    while x.op is Ops.CAST: casts.append(x.dtype); x = x.src[0]
    conds: list[UOp] = []
    if x.op is Ops.WHERE and x.src[2].op is Ops.CONST and x.src[2].arg == 0:
        conds.append(x.src[0])
        x = x.src[1]
        while x.op is Ops.CAST: casts.append(x.dtype); x = x.src[0]
    x = strip_ops(x, Ops.LOAD)
    if x.op is not Ops.INDEX or len(x.src) != 2 or any(dt not in MATMUL_DTYPES for dt in casts): return None
    buf = _param(x.src[0])
    if buf is None or _dtype(buf) not in MATMUL_DTYPES: return None
    idx_conds, idx = strip_invalid(x.src[1])
    tile = "bf16" if x.dtype == dtypes.bfloat16 or dtypes.bfloat16 in casts else "fp32"
    return Load(buf, idx, tuple(conds + idx_conds), tile)


def _run(ranges: list[UOp], co: dict, size: dict, stride: int | None) -> list[UOp]:
    """The longest run of `ranges` (any order) that flattens into one index of `co`, innermost first: its innermost
    range has coefficient `stride` (None: the smallest non-zero one), each next one the product of the sizes
    inside it."""
    left = sorted((r for r in ranges if co.get(r, 0) != 0), key=lambda r: abs(co[r]))
    if not left or (stride is not None and co[left[0]] != stride): return []
    run, step = [left[0]], co[left[0]] * size[left[0]]
    for r in left[1:]:
        if co[r] != step: break
        run.append(r)
        step *= size[r]
    return run


def _flat_stride(co: dict | None, group: list[UOp], size: dict) -> int | None:
    """The stride of the group's flattened index (outermost first) in affine coefficients co, when it has one."""
    if co is None: return None
    if not group: return 0
    inner = co.get(group[-1], 0)
    step = inner
    for r in reversed(group):
        if co.get(r, 0) != step: return None
        step *= size[r]
    return inner


def match_gathered_matmul(sink: UOp) -> MatmulSpec | None:
    """The MatmulSpec of a kernel that sums over its reduce ranges the product of two loads whose indices depend on
    disjoint output ranges (beyond shared batch ranges), or None. Only kernels the plain matcher
    (matmul_spec.match_matmul) leaves are asked."""
    if (found := stored_sum_of_products(sink)) is None: return None
    topo, store, red, mul, chain = found
    loads = [_load(x) for x in mul.src]
    if None in loads or loads[0].tile != loads[1].tile: return None
    rngs = {u for u in topo if u.op is Ops.RANGE}
    if any(r.src[0].op is not Ops.CONST for r in rngs): return None
    size = {r: int(r.src[0].arg) for r in rngs}
    rk = [r for r in red.src[1:]]
    if not rk or any(r.op is not Ops.RANGE or r.arg[-1] not in (AxisType.REDUCE, AxisType.GROUP_REDUCE) for r in rk):
        return None
    if any(r.arg[-1] in (AxisType.REDUCE, AxisType.GROUP_REDUCE) for r in rngs - set(rk)): return None
    out_idx = strip_ops(store.src[0], Ops.CAST)
    obuf = _param(out_idx) if out_idx.op is Ops.INDEX else None
    if obuf is None or _dtype(obuf) not in MATMUL_DTYPES or len(out_idx.src) != 2: return None
    oconds, oplain = strip_invalid(out_idx.src[1])
    oco = affine(oplain) if not oconds else None
    if oco is None or any(oco.get(r, 0) for r in rk): return None
    ro = frozenset(r for r in rngs - set(rk) if oco.get(r, 0) != 0)
    if ro != rngs - set(rk): return None                       # an output range the store does not index
    use = [ld.ranges() for ld in loads]
    if not set(rk) <= use[0] | use[1]: return None
    only = [sorted(ro & use[0] - use[1], key=lambda r: r.arg), sorted(ro & use[1] - use[0], key=lambda r: r.arg)]
    # B (n) is the operand whose exclusive ranges hold the output's contiguous run
    if not _run(only[1], oco, size, 1): loads, use, only = loads[::-1], use[::-1], only[::-1]
    n_run = _run(only[1], oco, size, 1)
    m_run = _run(only[0], oco, size, None)
    if math.prod(size[r] for r in m_run) < MIN_GATHERED_ROWS: return None     # see MIN_GATHERED_ROWS
    n_grp, m_grp = n_run[::-1], m_run[::-1]                    # outermost first
    batch = sorted(ro - set(n_grp) - set(m_grp), key=lambda r: -abs(oco[r]))
    numbers = {r: j for j, r in enumerate(sorted(rngs, key=lambda r: r.arg))}
    sizes = tuple(size[r] for r in sorted(rngs, key=lambda r: r.arg))

    def operand(ld: Load, rows: list[UOp], cols: list[UOp]) -> Operand | None:
        dt = DTYPE_NAME[_dtype(ld.buf)]
        nbytes = int(ld.buf.src[0].arg) * DTYPE_SIZE[dt]
        co = affine(ld.index) if not ld.conds else None
        rs, cs = _flat_stride(co, rows, size), _flat_stride(co, cols, size)
        if rs is not None and cs is not None:
            return Operand(ld.buf.arg.slot, dt, co.get(None, 0), rs, cs, tuple(co.get(r, 0) for r in batch), nbytes,
                           ld.tile)
        try:
            index = index_expr(ld.index, numbers)
            valid = IndexExpr.all_of([index_expr(c, numbers) for c in ld.conds]) if ld.conds else None
        except UnsupportedOp:
            return None
        if index.loads() or (valid is not None and valid.loads()): return None   # data-dependent: not a fixed gather
        gather = Gather(index, valid, sizes, (tuple(numbers[r] for r in batch), tuple(numbers[r] for r in rows),
                                              tuple(numbers[r] for r in cols)))
        if not gather.ranges() <= set().union(*gather.groups): return None
        return Operand(ld.buf.arg.slot, dt, 0, 0, 0, tuple(0 for _ in batch), nbytes, ld.tile, gather)
    k_grp = sorted(rk, key=lambda r: r.arg)
    a, b = operand(loads[0], m_grp, k_grp), operand(loads[1], k_grp, n_grp)
    if a is None or b is None: return None
    odt = DTYPE_NAME[_dtype(obuf)]
    out = Operand(obuf.arg.slot, odt, oco.get(None, 0), _flat_stride(oco, m_grp, size), 1,
                  tuple(oco[r] for r in batch), int(obuf.src[0].arg) * DTYPE_SIZE[odt], "fp32")
    return MatmulSpec(M=math.prod(size[r] for r in m_grp), N=math.prod(size[r] for r in n_grp),
                      K=math.prod(size[r] for r in k_grp), batch=tuple(size[r] for r in batch),
                      a=a, b=b, out=out, round_bf16=dtypes.bfloat16 in chain and odt == "float32")
