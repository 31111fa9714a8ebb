"""The two compiled kernels the emulator's native-path equality tests launch with and without a C part: a float32
elementwise kernel (one tile) and a bf16 64^3 matmul on a 2x2 grid (semaphores and NoC multicast between tiles)."""
from __future__ import annotations

import numpy as np

from tt_backend.bench.emu import elementwise_inputs, elementwise_plan
from tt_backend.bench.kernels import matmul_arrays, matmul_plan

KERNEL_CASES = ("elementwise", "matmul_grid")


def kernel_case(which: str, seed: int) -> tuple:
    """(plan, inputs) of KERNEL_CASES' `which`; `seed` draws the elementwise inputs (the matmul's are its own)."""
    if which == "elementwise":
        plan = elementwise_plan(40)
        return plan, elementwise_inputs(plan, np.random.default_rng(seed))
    plan = matmul_plan(64, "HiFi2")
    plan.use_cores(4)
    return plan, matmul_arrays(plan)
