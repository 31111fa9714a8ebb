"""Which matcher recognises a kernel as a matmul: the plain one (matmul_spec.match_matmul: strided operands) on the
kernel as it is, then on the kernel with its divided ranges split (range_split: GQA's key head `r // 4` becomes
affine), else the gathered one (gathered_matmul: convolutions). Kept apart from both so that neither imports the
other's module."""
from __future__ import annotations

from tinygrad.uop.ops import Ops, PatternMatcher, UOp, UPat, graph_rewrite

from tt_backend.lowering.families.family import Kernel
from tt_backend.lowering.families.gathered_matmul import match_gathered_matmul
from tt_backend.lowering.families.matmul_spec import MatmulSpec, match_matmul
from tt_backend.lowering.range_split import split_divided_ranges
from tt_backend.chip.errors import UnsupportedOp


def merged_sum(outer: UOp) -> UOp | None:
    """REDUCE(ADD, REDUCE(ADD, f, k1), k2) -> REDUCE(ADD, f, k1 + k2), else None."""
    inner = outer.src[0]
    if outer.arg[0] is not Ops.ADD or inner.op is not Ops.REDUCE or inner.arg[0] is not Ops.ADD: return None
    return outer.replace(src=(inner.src[0], *inner.src[1:], *outer.src[1:]))


# A sum of a sum, REDUCE(ADD, REDUCE(ADD, a * b, k1), k2), is one sum over k1 and k2 (GQA's key gradient sums over the
# queries, then over the heads sharing the key): a matmul with K = k1 x k2 when the operands walk both as one
# (matmul_spec.k_order), summed in that order.
sums_of_sums = PatternMatcher([(UPat(Ops.REDUCE, name="outer"), merged_sum)])


def matmul_of(sink: UOp) -> MatmulSpec | None:
    """The sink's matmul spec (directly nested sums merged); None when it is not a matmul or its index forms are
    beyond the matchers. A plain matmul once its divided ranges are split is taken before a gathered one: its operands
    are read by strides, not element by element."""
    sink = graph_rewrite(sink, sums_of_sums)
    try:
        if spec := match_matmul(sink):
            return spec
        split = split_divided_ranges(sink)         # the sink itself when no range is divided: matched just above
        return (split is not sink and match_matmul(split)) or match_gathered_matmul(sink)
    except UnsupportedOp:
        return None


def kernel_matmul(kernel: Kernel) -> MatmulSpec | None:
    """matmul_of the kernel (Kernel.shared: both matmul families and the SFPU reduction ask)."""
    return matmul_of(kernel.sink)
