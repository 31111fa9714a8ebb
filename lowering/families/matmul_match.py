"""Which matcher recognises a kernel as a matmul: the plain one (matmul_spec.match_matmul: strided operands), else the
gathered one (gathered_matmul: convolutions). Kept apart from both so that neither imports the other's module."""
from __future__ import annotations

from tinygrad.uop.ops import UOp

from tt_backend.lowering.families.family import Kernel
from tt_backend.lowering.families.gathered_matmul import match_gathered_matmul
from tt_backend.lowering.families.matmul_spec import MatmulSpec, match_matmul
from tt_backend.chip.errors import UnsupportedOp


def matmul_of(sink: UOp) -> MatmulSpec | None:
    """The sink's matmul spec; None when it is not a matmul or its index forms are beyond the matchers."""
    try:
        return match_matmul(sink) or match_gathered_matmul(sink)
    except UnsupportedOp:
        return None


def kernel_matmul(kernel: Kernel) -> MatmulSpec | None:
    """matmul_of the kernel (Kernel.shared: both matmul families and the SFPU reduction ask)."""
    return matmul_of(kernel.sink)
