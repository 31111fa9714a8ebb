"""The FPU matmul 2D-blocked over a grid of cores (lowering/families/fpu_matmul.py `use_cores`, templates matmul_*.c.j2):
each core's block of output tiles, the operands' K tiles tilized in shares and passed between the cores of a grid row
(A) and column (B) over the NoC. Checked on random bf16 data with shapes that are not multiples of 32 and grids that
split them unevenly: the one-core run against float64 within the FPU matmul's a-priori bound (docs/placement.md §3.4),
every grid bit for bit against the one-core run of the same ELFs, and on ttsim bit for bit against the emulator."""
from __future__ import annotations

import json

import numpy as np
import pytest
from tinygrad import Tensor, dtypes

from tests.support import target_params, ttsim_path
from tests.support.matmul_bound import error_ratio
from tests.support.matmul_ops import bf16_round, matmul_ast, rel_l2
from tt_backend.bench.kernels import launch_plan
from tt_backend.lowering.codegen.sources import split
from tt_backend.lowering.families.fpu_matmul import plan_matmul
from tt_backend.lowering.families.matmul_spec import match_matmul
from tt_backend.runtime.compile import compile_kernel
from tt_backend.runtime.targets import make_device

pytestmark = [pytest.mark.needs_cc, pytest.mark.usefixtures("serial_compile")]


def _bf16_bits(x: np.ndarray) -> np.ndarray:
    return (bf16_round(x).view(np.uint32) >> 16).astype(np.uint16)


def _plan(fn, a: np.ndarray, b: np.ndarray):
    spec = match_matmul(matmul_ast(fn, [a.shape, b.shape], dtypes.bfloat16))
    plan = plan_matmul(spec, f"mm_grid_{'x'.join(map(str, a.shape + b.shape))}", "HiFi2")
    elfs = compile_kernel(*split(plan.render()), plan.name)
    return plan, elfs, {spec.a.slot: _bf16_bits(a), spec.b.slot: _bf16_bits(b)}


def _run(target: str, plan, elfs, arrays, grid) -> bytes:
    plan.grid, plan.cores = grid, grid[0] * grid[1]
    dev = make_device(target, lib_path=ttsim_path())
    try:
        return launch_plan(dev, plan, arrays, elfs)[0]
    finally:
        if hasattr(dev, "close"):
            dev.close()


# (M, K, N), grids: 5 x 3 x 7 tiles (ragged edges), row and column shares of unequal size; A row-major (K a multiple
# of 32: shared by rows of its panels) with M past the last full panel (the sharers of the last panel's rows past M
# send zeros) over 3 and 7 grid columns (11/11/10 and 5/5/5/5/4/4/4 rows per core)
CASES = [((150, 90, 200), [(2, 3), (5, 1), (1, 7)]), ((64, 320, 96), [(2, 3)]), ((100, 64, 224), [(4, 3), (2, 7)])]


@pytest.mark.parametrize("target", target_params("emu"))
@pytest.mark.parametrize("mkn, grids", CASES, ids=[str(c[0]) for c in CASES])
def test_grid_matmul_matches_cpu_and_the_one_core_run(target, mkn, grids):
    M, K, N = mkn
    rng = np.random.default_rng(M)
    a, b = rng.standard_normal((M, K)).astype(np.float32), rng.standard_normal((K, N)).astype(np.float32)
    plan, elfs, arrays = _plan(lambda x, y: x @ y, a, b)
    one = _run(target, plan, elfs, arrays, (1, 1))
    got = (np.frombuffer(one, np.uint16).astype(np.uint32) << 16).view(np.float32).reshape(M, N)
    assert error_ratio(got, bf16_round(a), bf16_round(b), "bf16", plan.fidelity, True).max() <= 1
    for grid in grids:
        assert _run(target, plan, elfs, arrays, grid) == one, grid


@pytest.mark.parametrize("target", target_params("emu"))
def test_grid_matmul_transposed_b(target):
    """x @ y.T (B read column by column, the writer tilizing half of each core's share) on a 3 x 2 grid."""
    rng = np.random.default_rng(7)
    a, bt = rng.standard_normal((96, 130)).astype(np.float32), rng.standard_normal((100, 130)).astype(np.float32)
    plan, elfs, arrays = _plan(lambda x, y: x @ y.T, a, bt)
    assert _run(target, plan, elfs, arrays, (3, 2)) == _run(target, plan, elfs, arrays, (1, 1))


@pytest.mark.parametrize("target", target_params("emu", "ttsim"))
@pytest.mark.parametrize("layout", ["rows", "tensix"])
def test_grid_matmul_with_b_row_major(target, layout):
    """B's blocks row-major (fpu_matmul.b_panel_rows: each core reads its share's rows), walked by unpacker 0 on every
    product or tilized by the Tensix into CB_B's slot, and shared down the grid column as one run, on 2 x 3 and
    3 x 2 grids: the bits of B tilized by the movers on one core."""
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((96, 160)).astype(np.float32), rng.standard_normal((160, 96)).astype(np.float32)
    plan, _, arrays = _plan(lambda x, y: x @ y, a, b)
    tiles = plan.with_b_layout("tiles")
    tilized = _run("emu", tiles, compile_kernel(*split(tiles.render()), plan.name), arrays, (1, 1))
    plan = plan.with_b_layout(layout)
    elfs = compile_kernel(*split(plan.render()), plan.name)
    for grid in ((2, 3), (3, 2)):
        assert _run(target, plan, elfs, arrays, grid) == tilized, grid


@pytest.mark.ttsim
def test_grid_matmul_is_bit_identical_on_emu_and_ttsim():
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((100, 96)).astype(np.float32), rng.standard_normal((96, 130)).astype(np.float32)
    plan, elfs, arrays = _plan(lambda x, y: x @ y, a, b)
    assert _run("emu", plan, elfs, arrays, (2, 3)) == _run("ttsim", plan, elfs, arrays, (2, 3))


@pytest.mark.parametrize("target", target_params("emu"))
def test_tinygrad_matmul_uses_the_grid_the_launch_model_picks(target, monkeypatch, tmp_path):
    """Through tinygrad (FPU placement opted into): TT_CORES caps the grid, the report shows its shape."""
    monkeypatch.setenv("TT_ERR_BUDGET", "1e-2")
    monkeypatch.setenv("TT_BUDGET_SAMPLED", "1")
    monkeypatch.setenv("TT_CORES", "6")
    monkeypatch.setenv("TT_DUMP", str(tmp_path))
    rng = np.random.default_rng(11)
    a, b = rng.standard_normal((128, 160)).astype(np.float32), rng.standard_normal((160, 192)).astype(np.float32)
    dev = f"TT:{target}"
    got = (Tensor(a, device=dev, dtype=dtypes.bfloat16) @ Tensor(b, device=dev, dtype=dtypes.bfloat16)).float().numpy()
    ref = bf16_round((Tensor(bf16_round(a), device="CPU") @ Tensor(bf16_round(b), device="CPU")).numpy())
    assert rel_l2(got, ref) <= 1e-2
    (lc,) = [json.loads(p.read_text())["predicted_launch_cycles"] for p in tmp_path.glob("*/report.json")
             if "MATMUL" in p.read_text()]
    rows, cols = map(int, lc["grid"].split("x"))
    assert 1 < lc["cores"] == rows * cols <= 6 and lc["tiles_per_core"] == -(-4 // rows) * -(-6 // cols)
