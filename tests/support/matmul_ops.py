"""Helpers of the matmul tests (e2e/test_matmul.py, e2e/test_matmul_grid.py): the writer's bf16 rounding in numpy,
the one kernel tinygrad schedules for a matmul expression, the relative L2 error."""
from __future__ import annotations

import numpy as np
from tinygrad import Tensor
from tinygrad.uop.ops import Ops


def bf16_round(x) -> np.ndarray:
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return (((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16).astype(np.uint32).view(np.float32)


def matmul_ast(fn, shapes, dt):
    """The single kernel tinygrad schedules for fn(*inputs) (inputs are slots 1.. in order)."""
    out = fn(*[Tensor.empty(*s, device="CPU", dtype=dt) for s in shapes])
    calls = [c for c in out.schedule_linear().src if c.op is Ops.CALL]
    assert len(calls) == 1, f"{len(calls)} kernels"
    return calls[0].src[0]


def rel_l2(got, ref) -> float:
    return float(np.linalg.norm(np.asarray(got, np.float64) - ref) / np.linalg.norm(np.asarray(ref, np.float64)))
