"""The kernel families the selector asks, one line each. Order only breaks ties between equally cheap candidates
(the earlier family's wins), so the more general family of two that match the same kernels comes first. The staged
family lowers each of its stages with the one-pass families and is taken only when none of them lowers the kernel."""
from tt_backend.lowering.families import elementwise, fpu_matmul, fpu_reduce, sfpu_matmul, sfpu_reduce, staged
from tt_backend.lowering.families.family import Family

ONE_PASS: tuple[Family, ...] = (
    elementwise.FAMILY,
    sfpu_reduce.FAMILY,
    fpu_reduce.FAMILY,
    fpu_matmul.FAMILY,
    sfpu_matmul.FAMILY,
)
REGISTRY: tuple[Family, ...] = (*ONE_PASS, staged.family(ONE_PASS))
