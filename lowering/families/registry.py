"""The kernel families the selector asks, one line each. Order only breaks ties between equally cheap candidates
(the earlier family's wins), so the more general family of two that match the same kernels comes first."""
from tt_backend.lowering.families import elementwise, fpu_matmul, fpu_reduce, sfpu_matmul, sfpu_reduce
from tt_backend.lowering.families.family import Family

REGISTRY: tuple[Family, ...] = (
    elementwise.FAMILY,
    sfpu_reduce.FAMILY,
    fpu_reduce.FAMILY,
    fpu_matmul.FAMILY,
    sfpu_matmul.FAMILY,
)
