"""Which matcher recognises a kernel as a matmul: the plain one (matmul_spec.match_matmul: strided operands), else the
gathered one (gathered_matmul: convolutions). Kept apart from both so that neither imports the other's module."""
from __future__ import annotations

from tt_backend.lowering.families.family import Kernel
from tt_backend.lowering.families.gathered_matmul import match_gathered_matmul
from tt_backend.lowering.families.matmul_spec import MatmulSpec, match_matmul
from tt_backend.chip.errors import UnsupportedOp


def kernel_matmul(kernel: Kernel) -> MatmulSpec | None:
    """The kernel's matmul spec (Kernel.shared: both matmul families and the SFPU reduction ask); None when it is not
    a matmul or its index forms are beyond the matchers."""
    try:
        return match_matmul(kernel.sink) or match_gathered_matmul(kernel.sink)
    except UnsupportedOp:
        return None
