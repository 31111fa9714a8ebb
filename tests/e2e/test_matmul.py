"""Matmul on the FPU (lowering/families/fpu_matmul.py + templates/matmul_*.c.j2): pattern matching, plans, and runs on
the emulator (and on ttsim when TT_SIMULATOR is set) against tinygrad's CPU device and float64.

Error measures: every FPU matmul output is checked elementwise against the float64 product of the operands as the
kernel sees them (bf16-rounded for bf16 tensors) with the a-priori bound of docs/placement.md §3.4
(tests/support/matmul_bound.py: eps(format, fidelity) x sum_k |a b| plus a K-dependent Dst term, plus the output's bf16
rounding), proven from the FPU's documented arithmetic rather than taken from the project's error model, and checked on
adversarial data (large K, mixed scales, heavy tails, cancellation, significands and groups built for the worst
case) with its tightness asserted. Where the selector chose the fidelity under a budget, the relative L2 error
||C - C32|| / ||C32|| against tinygrad's CPU device in float32 (the metric TT_ERR_BUDGET is defined in; C32 rounded to
bf16 for a bf16 result) is checked against the budget too.

Shapes up to 128 run by default (the suite's share stays well under a minute); TT_SLOW=1 adds 256 and 512 cubes.
"""
from __future__ import annotations

import json
import os
import time

import numpy as np
import pytest

from tinygrad import Tensor, dtypes

from tt_backend.fpu_reduce_eval import fpu_matmul
from tt_backend.lowering.families.fpu_matmul import (FpuMatmulPlan, a_panel_rows, b_layouts, b_panel_rows,
                                                     plan_matmul, sample_errors)
from tt_backend.lowering.families.matmul_spec import match_matmul
from tt_backend.lowering.families.sfpu_matmul import SfpuMatmulPlan
from tt_backend.lowering.placement.placer import Placer
from tt_backend.lowering.placement.reference import SAMPLE_DISTS
from tt_backend.lowering.placement.search import SAFETY
from tt_backend.lowering.select import lower
from tt_backend.chip.errors import UnsupportedOp

from tests.support import target_params, ttsim_path
from tests.support.matmul_bound import error_ratio
from tests.support.matmul_ops import bf16_round, matmul_ast, rel_l2

LIB = ttsim_path()
slow = pytest.mark.skipif(not os.environ.get("TT_SLOW"), reason="large matmul: set TT_SLOW=1")


# ------------------------------------------------------------------------------------------------------- helpers

def to_bytes(a: np.ndarray, dt: str) -> bytes:
    if dt == "bfloat16": return (bf16_round(a).view(np.uint32) >> 16).astype(np.uint16).tobytes()
    return np.asarray(a, np.float32).tobytes()


def from_bytes(raw: bytes, dt: str) -> np.ndarray:
    if dt == "bfloat16": return (np.frombuffer(raw, np.uint16).astype(np.uint32) << 16).view(np.float32)
    return np.frombuffer(raw, np.float32).copy()


def lower_matmul(ast, name: str, err_budget: float | None = None):
    """The plan the selector (lowering.select) picks for a matmul kernel under `err_budget` (with the FPU matmul's
    error model, as tt_backend.placement_eval.placer injects it, and TT_BUDGET_SAMPLED's opt-in: a fidelity on its
    sample-data prediction; by default no FPU matmul has an all-data bound, tests/lowering/test_guarantee.py)."""
    return lower(ast, name, Placer(budget=err_budget, matmul_evaluator=fpu_matmul, sampled=True))


def run_plan(dev, plan, arrays):
    """Launch a MatmulPlan on a Device with numpy inputs (slot k+1 = arrays[k]); returns (raw output bytes, seconds)."""
    from tt_backend.lowering.codegen.sources import split
    from tt_backend.runtime.compile import compile_kernel
    from tt_backend.runtime.driver import launch
    srcs, hdrs = split(plan.render())
    elfs = compile_kernel(srcs, hdrs, plan.name)
    out_slot = plan.buffers[plan.output.buf].slot
    addrs, addr = [], 0x100000
    for b in plan.buffers:
        addrs.append(addr)
        data = b"\xAB" * b.nbytes if b.slot == out_slot else to_bytes(arrays[b.slot - 1].reshape(-1), b.dtype)
        dev.write_dram(addr, data)
        addr += -(-b.nbytes // 64) * 64 + 4096
    res = launch(dev, elfs, plan.arg_words(addrs), timeout_s=900)
    return dev.read_dram(addrs[plan.output.buf], plan.buffers[plan.output.buf].nbytes), res.seconds


def emu():
    from tt_backend.runtime.emu.device import EmuDevice
    return EmuDevice()


def normalised_error(got, a64, b64, matmul=np.matmul):
    """|C - C64| / (|A| @ |B|) per element: the K-dependent bound the fp32 SFPU matmul meets (K x 2^-24)."""
    ref = matmul(a64, b64)
    return np.abs(got - ref) / np.maximum(matmul(np.abs(a64), np.abs(b64)), 1e-30)


def predicted(spec, fidelity: str) -> float:
    """The error the family predicts for `fidelity` on this matmul (what a candidate carries): an input of the
    selector's rule in test_fidelity_and_budget, never a tolerance."""
    return sample_errors(fpu_matmul, "bf16" if spec.a.tile == "bf16" else "tf32", spec.K, spec.out_bf16, SAMPLE_DISTS,
                         0)[fidelity]


rng = np.random.default_rng(1234)


def case(M, K, N, dt=dtypes.bfloat16, form="plain", batch=None, fidelity=None, err_budget=None, dev=None):
    """Run one matmul through tt_backend.lowering.families.fpu_matmul on `dev` (default: emulator) at `fidelity`, or
    at the selector's choice under `err_budget`; check every output against the a-priori bound and, under a budget,
    the relative L2 error against tinygrad's CPU device. Returns (plan, raw output, relative L2, seconds)."""
    sa, sb = ((batch,) if batch else ()) + (M, K), ((batch,) if batch else ()) + (K, N)
    a = rng.standard_normal(sa).astype(np.float32)
    b = rng.standard_normal(sb).astype(np.float32)
    if form == "bT":     # x @ y.T with y stored N x K (a linear layer)
        fn, arrays, shapes = (lambda x, y: x @ y.transpose(-1, -2)), [a, np.ascontiguousarray(np.swapaxes(b, -1, -2))], None
    elif form == "aT":   # x.T @ y with x stored K x M
        fn, arrays, shapes = (lambda x, y: x.transpose(-1, -2) @ y), [np.ascontiguousarray(np.swapaxes(a, -1, -2)), b], None
    elif form == "f32out":   # bf16 operands, fp32 result (x.float() @ y.float())
        fn, arrays = (lambda x, y: x.float() @ y.float()), [a, b]
    elif form == "cast":     # fp32 buffers cast to bf16 inside the kernel
        fn, arrays = (lambda x, y: x.cast(dtypes.bfloat16) @ y.cast(dtypes.bfloat16)), [a, b]
    else:
        fn, arrays = (lambda x, y: x @ y), [a, b]
    shapes = [x.shape for x in arrays]
    spec = match_matmul(matmul_ast(fn, shapes, dt))
    assert spec is not None
    assert (spec.M, spec.N, spec.K, spec.n_batch) == (M, N, K, batch or 1)
    name = f"mm_{M}_{K}_{N}"
    if fidelity is None and err_budget is None:
        fidelity = "HiFi4"      # the FPU tests' default (without a budget the dispatcher picks the SFPU matmul)
    if fidelity is None:        # the selector's choice under the budget
        plan = lower_matmul(matmul_ast(fn, shapes, dt), name, err_budget)
        assert isinstance(plan, FpuMatmulPlan), f"budget {err_budget}: {type(plan).__name__}"
    else:
        plan = plan_matmul(spec, name, fidelity)
    raw, secs = run_plan(dev or emu(), plan, arrays)
    dtn = "bfloat16" if dt == dtypes.bfloat16 or form == "cast" else "float32"
    got = from_bytes(raw, spec.out.dtype).reshape(((batch,) if batch else ()) + (M, N))
    rd = bf16_round if dtn == "bfloat16" else (lambda x: x)
    # tinygrad's CPU device on the same values in float32
    cpu = (Tensor(rd(a), device="CPU") @ Tensor(rd(b), device="CPU")).numpy()
    if spec.out_bf16: cpu = bf16_round(cpu)
    err = rel_l2(got, cpu)
    ratio = error_ratio(got, rd(a), rd(b), plan.src_format, plan.fidelity, spec.out_bf16).max()
    assert ratio <= 1, f"{plan.fidelity} {plan.src_format}: error {ratio:.3g} x the a-priori bound"
    assert err_budget is None or err <= err_budget, f"{plan.fidelity}: relative L2 {err:.3g} > budget {err_budget:.3g}"
    return plan, raw, err, secs


# ------------------------------------------------------------------------------------------------ pattern matching

def test_match_plain_transposed_batched():
    s = match_matmul(matmul_ast(lambda x, y: x @ y, [(64, 48), (48, 80)], dtypes.float32))
    assert (s.M, s.N, s.K, s.batch) == (64, 80, 48, ())
    assert (s.a.rs, s.a.cs, s.b.rs, s.b.cs, s.out.rs, s.out.cs) == (48, 1, 80, 1, 80, 1)
    s = match_matmul(matmul_ast(lambda x, y: x @ y.T, [(64, 48), (80, 48)], dtypes.bfloat16))
    assert (s.b.rs, s.b.cs, s.b.transposed, s.a.dtype) == (1, 48, True, "bfloat16")
    s = match_matmul(matmul_ast(lambda x, y: x.T @ y, [(48, 64), (48, 80)], dtypes.float32))
    assert (s.a.rs, s.a.cs, s.a.transposed) == (1, 64, True)
    s = match_matmul(matmul_ast(lambda x, y: x @ y, [(3, 64, 48), (3, 48, 80)], dtypes.float32))
    assert (s.batch, s.a.bs, s.b.bs, s.out.bs) == ((3,), (3072,), (3840,), (5120,))
    # broadcast B: A's batch follows its rows in A and in the output (matmul_spec.chained_run), one 192-row matmul
    s = match_matmul(matmul_ast(lambda x, y: x @ y, [(3, 64, 48), (48, 80)], dtypes.float32))
    assert (s.M, s.batch, s.a.rs, s.out.rs) == (192, (), 48, 80)
    # the same with A's batch inside its rows (a permuted A): not chained, a batch range B does not read
    s = match_matmul(matmul_ast(lambda x, y: x.permute(1, 0, 2) @ y, [(64, 3, 48), (48, 80)], dtypes.float32))
    assert (s.M, s.batch, s.a.rs, s.a.bs, s.b.bs) == (64, (3,), 144, (48,), (0,))
    # matrix-vector: computed as the row vector y^T @ x^T, so the 64 outputs are one contiguous row
    s = match_matmul(matmul_ast(lambda x, y: x @ y, [(64, 48), (48,)], dtypes.float32))
    assert (s.M, s.N, s.K, s.b.transposed) == (1, 64, 48, True)


def test_not_a_matmul():
    assert match_matmul(matmul_ast(lambda x, y: x + y, [(64, 48), (64, 48)], dtypes.float32)) is None
    assert match_matmul(matmul_ast(lambda x, y: (x * y).sum(1), [(64, 48), (64, 48)], dtypes.float32)) is None
    assert match_matmul(matmul_ast(lambda x: x.sum(0), [(64, 48)], dtypes.float32)) is None
    # a fused epilogue (bias, relu) is not a plain matmul: the generic path gets it
    assert match_matmul(matmul_ast(lambda x, y: (x @ y).relu(), [(32, 32), (32, 32)], dtypes.float32)) is None
    # a bf16-rounded operand times an fp32 one: no common Src format
    assert match_matmul(matmul_ast(lambda x, y: x.cast(dtypes.bfloat16).float() @ y,
                                   [(32, 32), (32, 32)], dtypes.float32)) is None


def test_match_fused_casts():
    """x.cast(bf16) @ y.cast(bf16) on fp32 buffers: one kernel; the reader rounds to bf16 (nearest even)."""
    s = match_matmul(matmul_ast(lambda x, y: x.cast(dtypes.bfloat16) @ y.cast(dtypes.bfloat16),
                                [(32, 48), (48, 40)], dtypes.float32))
    assert (s.a.dtype, s.a.tile, s.b.tile, s.out.dtype) == ("float32", "bf16", "bf16", "bfloat16")
    assert plan_matmul(s, "k", fidelity="HiFi4").src_format == "bf16"


def test_a_panel_rows_only_for_aligned_bf16_rows():
    """A stays row-major in L1 (unpacked face row by face row, no RISC-V tilize) exactly when every tile row of A is
    one 64-byte aligned run of bf16 in DRAM; otherwise the reader tilizes it. The CB_A slot holds either form."""
    def spec(fn, shapes, dt=dtypes.bfloat16):
        return match_matmul(matmul_ast(fn, shapes, dt))
    plain = spec(lambda x, y: x @ y, [(40, 64), (64, 48)])
    assert a_panel_rows(plain)
    assert "#define MM_A_PITCH 128u" in plan_matmul(plain, "k", "HiFi2").render()["args.h"]
    assert a_panel_rows(spec(lambda x, y: x @ y, [(3, 64, 96), (96, 32)]))      # batched, aligned
    for fn, shapes, dt in [(lambda x, y: x @ y, [(40, 47), (47, 48)], dtypes.bfloat16),     # K not a tile multiple
                           (lambda x, y: x @ y, [(40, 64), (64, 48)], dtypes.float32),      # fp32 (tf32 tiles)
                           (lambda x, y: x.T @ y, [(64, 40), (64, 48)], dtypes.bfloat16),   # A transposed
                           (lambda x, y: x.cast(dtypes.bfloat16) @ y.cast(dtypes.bfloat16),   # rounded by the reader
                            [(40, 64), (64, 48)], dtypes.float32)]:
        assert not a_panel_rows(spec(fn, shapes, dt))


def test_b_panel_rows_only_for_whole_aligned_bf16_tiles():
    """B may stay row-major in L1 (unpacker 0 walking face rows, no RISC-V tilize) exactly when B's rows are 64-byte
    aligned bf16 runs of whole tiles (K and N multiples of 32); the launch model then picks the faster layout."""
    def spec(fn, shapes, dt=dtypes.bfloat16):
        return match_matmul(matmul_ast(fn, shapes, dt))
    assert b_panel_rows(spec(lambda x, y: x @ y, [(40, 64), (64, 96)]))
    assert b_panel_rows(spec(lambda x, y: x @ y, [(3, 64, 96), (96, 32)]))      # batched, aligned
    for fn, shapes, dt in [(lambda x, y: x @ y, [(40, 64), (64, 48)], dtypes.bfloat16),     # N not a tile multiple
                           (lambda x, y: x @ y, [(40, 47), (47, 64)], dtypes.bfloat16),     # K not a tile multiple
                           (lambda x, y: x @ y, [(40, 64), (64, 64)], dtypes.float32),      # fp32 (tf32 tiles)
                           (lambda x, y: x @ y.T, [(40, 64), (64, 64)], dtypes.bfloat16)]:  # B transposed
        assert not b_panel_rows(spec(fn, shapes, dt))
    # the launch model's cheapest layout: B tilized once per block on the Tensix for a bf16 output (the pass
    # reconfigures the packer that writes its rows), never for an fp32 one
    assert b_layouts(spec(lambda x, y: (x.float() @ y.float()), [(64, 64), (64, 64)])) == ("tiles", "rows")
    plan = plan_matmul(spec(lambda x, y: x @ y, [(512, 512), (512, 512)]), "k", "HiFi2")
    prices = {lay: plan.with_b_layout(lay).launch_cycles()["price"] for lay in b_layouts(plan.spec)}
    assert plan.b_layout == min(prices, key=prices.get) == "tensix"


def with_specials(x: np.ndarray, r: np.random.Generator) -> np.ndarray:
    """x with a few bf16 special values at random places: +-Inf, NaN, a denormal, -0 and the largest finite."""
    x = x.copy()
    x.reshape(-1)[r.choice(x.size, 6, replace=False)] = [np.inf, -np.inf, np.nan, 1e-39, -0.0, 3.3e38]
    return x


@pytest.mark.needs_cc
@pytest.mark.parametrize("target", target_params("emu", "ttsim"))
@pytest.mark.parametrize("fidelity,layout", [("HiFi2", "rows"), ("HiFi4", "rows"), ("HiFi2", "tensix"),
                                             ("HiFi4", "tensix")])
def test_b_row_major_same_bits_as_tilized_b(target, fidelity, layout):
    """B row-major in L1 (fpu_matmul.b_panel_rows), walked face row by face row by unpacker 0 on every product or
    tilized by the Tensix once per block, gives the bits of B tilized by the reader, on random bf16 data with
    special values in both operands (the Tensix pass writes a NaN of B as Inf of its sign, pack_cases.tilized_bf16:
    the tilized run gets that B); two blocks of B's columns, 4 and 1 tiles wide (a group of 4 output tiles, then one
    of 1 in a block of shorter rows). On ttsim: the same bits as the emulator's tilized run."""
    from tt_backend.runtime.targets import make_device
    r = np.random.default_rng(11)
    a = with_specials(r.standard_normal((64, 96)).astype(np.float32), r)
    b = with_specials(r.standard_normal((96, 160)).astype(np.float32), r)
    spec = match_matmul(matmul_ast(lambda x, y: x @ y, [a.shape, b.shape], dtypes.bfloat16))
    plan = plan_matmul(spec, f"mm_b_{layout}_{fidelity}", fidelity)
    tiles, plan = plan.with_b_layout("tiles"), plan.with_b_layout(layout)
    tiles.block_cols = plan.block_cols = 4
    b_seen = np.where(np.isnan(b), np.copysign(np.inf, b), b) if layout == "tensix" else b
    tilized, _ = run_plan(emu(), tiles, [a, b_seen])
    dev = make_device(target, lib_path=LIB)
    try:
        rows, _ = run_plan(dev, plan, [a, b])
    finally:
        if hasattr(dev, "close"):
            dev.close()
    assert rows == tilized


def test_fidelity_and_budget():
    """The selector takes the cheapest fidelity whose predicted relative L2 error (the family's sample_errors) is within
    SAFETY x the budget; none without a budget or without the error model."""
    bf = matmul_ast(lambda x, y: x @ y, [(64, 64), (64, 64)], dtypes.bfloat16)
    f32 = matmul_ast(lambda x, y: x @ y, [(64, 64), (64, 64)], dtypes.float32)
    for ast in (bf, f32):
        spec = match_matmul(ast)
        errs = {fid: predicted(spec, fid) for fid in ("LoFi", "HiFi2", "HiFi3", "HiFi4")}
        assert errs["LoFi"] > errs["HiFi2"] > errs["HiFi4"] > 0
        for fid, err in errs.items():
            budget = err / SAFETY
            got = lower_matmul(ast, "k", err_budget=budget)
            cheapest = next(f for f, e in errs.items() if e <= SAFETY * budget)
            assert isinstance(got, FpuMatmulPlan) and got.fidelity == cheapest and got.predicted_err == errs[cheapest]
        assert isinstance(lower(ast, "k", Placer(budget=1.0)), SfpuMatmulPlan)   # no error model: no FPU
    # the frontend's dispatch: fp32 without a budget (or one tighter than tf32 allows) takes the SFPU matmul
    ast = matmul_ast(lambda x, y: x @ y, [(64, 64), (64, 64)], dtypes.float32)
    for budget in (None, 1e-6, 1e-4):
        plan = lower_matmul(ast, "k", err_budget=budget)
        assert isinstance(plan, SfpuMatmulPlan) and plan.placement.nodes[0]["engine"] == "SFPU"
        assert plan.placement.report()["budget"] == budget
    assert lower_matmul(ast, "k", err_budget=1.0).fidelity == "LoFi"
    # bf16 operands with an fp32 result: the FPU is not fp32-faithful there either
    ast = matmul_ast(lambda x, y: x.float() @ y.float(), [(64, 64), (64, 64)], dtypes.bfloat16)
    assert isinstance(lower_matmul(ast, "k"), SfpuMatmulPlan)
    assert lower_matmul(ast, "k", err_budget=2e-3).fidelity == "HiFi3"
    ast = matmul_ast(lambda x, y: (x @ y).float(), [(64, 64), (64, 64)], dtypes.bfloat16)
    assert lower_matmul(ast, "k").spec.round_bf16


def test_l1_limit():
    """B stays resident in blocks of its columns: the limit is one column tile of B and two A panels (K tiles each)."""
    s = match_matmul(matmul_ast(lambda x, y: x @ y, [(64, 1024), (1024, 1024)], dtypes.float32))
    assert plan_matmul(s, "fits", "LoFi").block_cols < s.tiles[1]
    s = match_matmul(matmul_ast(lambda x, y: x @ y, [(64, 4096), (4096, 64)], dtypes.float32))
    with pytest.raises(UnsupportedOp, match="bytes of L1"):
        plan_matmul(s, "big", "LoFi")


# -------------------------------------------------------------------------------------------------- on the emulator

@pytest.mark.needs_cc
@pytest.mark.parametrize("mkn", [(32, 32, 32), (64, 64, 64), (33, 47, 65), (96, 160, 64)], ids=str)
def test_bf16_hifi4(mkn):
    case(*mkn)


@pytest.mark.needs_cc
@pytest.mark.parametrize("fidelity", ["LoFi", "HiFi2", "HiFi3", "HiFi4"])
def test_bf16_fidelities(fidelity):
    case(64, 96, 48, fidelity=fidelity)


@pytest.mark.needs_cc
@pytest.mark.parametrize("form", ["bT", "aT"])
def test_transposed(form):
    case(40, 72, 56, form=form)


@pytest.mark.needs_cc
def test_bf16_fp32_out():
    plan, *_ = case(40, 80, 48, form="f32out", err_budget=2e-3)
    assert plan.spec.out.dtype == "float32" and plan.src_format == "bf16"


@pytest.mark.needs_cc
def test_fused_cast():
    plan, *_ = case(36, 64, 50, dt=dtypes.float32, form="cast")
    assert plan.spec.a.dtype == "float32" and plan.src_format == "bf16"


@pytest.mark.needs_cc
@pytest.mark.parametrize("dt", [dtypes.bfloat16, dtypes.float32], ids=["bf16", "fp32"])
def test_offset_views(dt):
    """Operands are blocks of larger buffers (an element offset, a row stride other than K) and N = 65 is odd, so
    bf16 output rows start mid-word: the reader's row fetches and the writer's face-row untilize, every output within
    the a-priori bound of the views' product."""
    a = rng.standard_normal((40, 77)).astype(np.float32)
    b = rng.standard_normal((70, 71)).astype(np.float32)
    spec = match_matmul(matmul_ast(lambda x, y: x[3:36, 5:69] @ y[1:65, 2:67], [a.shape, b.shape], dt))
    assert spec is not None and (spec.M, spec.K, spec.N) == (33, 64, 65)
    assert (spec.a.offset, spec.a.rs, spec.b.offset, spec.b.rs) == (3 * 77 + 5, 77, 71 + 2, 71)
    plan = plan_matmul(spec, "mm_views", "HiFi4")
    raw, _ = run_plan(emu(), plan, [a, b])
    got = from_bytes(raw, spec.out.dtype).reshape(33, 65)
    rd = bf16_round if dt == dtypes.bfloat16 else (lambda x: x)
    ratio = error_ratio(got, rd(a)[3:36, 5:69], rd(b)[1:65, 2:67], plan.src_format, "HiFi4", spec.out_bf16).max()
    assert ratio <= 1, f"error {ratio:.3g} x the a-priori bound"


@pytest.mark.needs_cc
def test_batched():
    case(40, 48, 36, batch=3)


@pytest.mark.needs_cc
@pytest.mark.parametrize("fidelity", ["LoFi", "HiFi4"])
def test_fp32_with_budget(fidelity):
    plan, *_ = case(48, 64, 40, dt=dtypes.float32, fidelity=fidelity)
    assert plan.src_format == "tf32"


@pytest.mark.needs_cc
def test_tinygrad_device_bf16(monkeypatch):
    """Through tinygrad's TT device (ops_tt): casts on the SFPU, the matmul on the FPU (the budget lets a fidelity in),
    C rounded to bf16."""
    import tt_backend.lowering.families.fpu_matmul as lm
    monkeypatch.setenv("TT_ERR_BUDGET", "2e-3")
    monkeypatch.setenv("TT_BUDGET_SAMPLED", "1")
    a = rng.standard_normal((48, 64)).astype(np.float32)
    b = rng.standard_normal((64, 40)).astype(np.float32)
    ta = Tensor(a, device="TT").cast(dtypes.bfloat16).realize()
    tb = Tensor(b, device="TT").cast(dtypes.bfloat16).realize()
    planned, real = [], lm.plan_matmul
    lm.plan_matmul = lambda *args, **kw: planned.append(real(*args, **kw)) or planned[-1]
    try:
        got = (ta @ tb).float().numpy()
    finally:
        lm.plan_matmul = real
    assert len(planned) == 1 and planned[0].predicted_err <= SAFETY * 2e-3    # the matmul kernel took the FPU path
    assert np.array_equal(got, bf16_round(got))                        # rounded to bf16 before the widening cast
    cpu = bf16_round((Tensor(bf16_round(a), device="CPU") @ Tensor(bf16_round(b), device="CPU")).numpy())
    assert rel_l2(got, cpu) <= 2e-3


@pytest.mark.needs_cc
def test_tinygrad_device_bf16_default_is_float32_faithful(monkeypatch):
    """No budget: a bf16 matmul runs on the fp32 SFPU matmul, so the bf16 result is the exactly rounded one except
    at rounding ties of the fp32 accumulation (MVMUL at HiFi4 would be ~1e-3 off in relative L2: one bf16 ulp on
    many outputs)."""
    import tt_backend.lowering.select as sel
    monkeypatch.delenv("TT_ERR_BUDGET", raising=False)
    a = rng.standard_normal((40, 256)).astype(np.float32)
    b = rng.standard_normal((256, 36)).astype(np.float32)
    planned, real = [], sel.lower
    monkeypatch.setattr(sel, "lower", lambda *args, **kw: planned.append(real(*args, **kw)) or planned[-1])
    ta = Tensor(a, device="TT").cast(dtypes.bfloat16).realize()
    tb = Tensor(b, device="TT").cast(dtypes.bfloat16).realize()
    got = (ta @ tb).float().numpy()
    assert any(isinstance(p, SfpuMatmulPlan) for p in planned)
    exact = bf16_round((bf16_round(a).astype(np.float64) @ bf16_round(b)).astype(np.float32))
    assert np.linalg.norm(got - exact) / np.linalg.norm(exact) <= 1e-4


@pytest.mark.needs_cc
def test_tinygrad_device_fp32_with_budget(monkeypatch, tmp_path):
    """TT_ERR_BUDGET reaches the fidelity choice (tt_backend.placement_eval.placer -> lowering.select -> fpu_matmul);
    the grid launch's model within 25 % of the emulated cycles (its edge core, whose shares are zeroed tiles, sets
    the grid's start: docs/performance.md §8.1)."""
    import tt_backend.lowering.families.fpu_matmul as lm
    monkeypatch.setenv("TT_ERR_BUDGET", "1e-2")
    monkeypatch.setenv("TT_BUDGET_SAMPLED", "1")
    monkeypatch.setenv("TT_DUMP", str(tmp_path))
    a = rng.standard_normal((40, 80)).astype(np.float32)
    b = rng.standard_normal((80, 36)).astype(np.float32)
    planned, real = [], lm.plan_matmul
    monkeypatch.setattr(lm, "plan_matmul", lambda *args, **kw: planned.append(real(*args, **kw)) or planned[-1])
    got = (Tensor(a, device="TT:emu") @ Tensor(b, device="TT:emu")).numpy()
    cpu = (Tensor(a, device="CPU") @ Tensor(b, device="CPU")).numpy()
    assert [p.src_format for p in planned] == ["tf32"] and planned[0].predicted_err <= SAFETY * 1e-2
    assert rel_l2(got, cpu) <= 1e-2
    (report,) = [json.loads(p.read_text()) for p in tmp_path.glob("r_*/report.json")]
    assert report["predicted_launch_cycles"]["cores"] > 1
    assert abs(report["predicted_launch_cycles"]["total"] / report["emulated_cycles"] - 1) <= 0.25
    # every tile's cores in the report (trace.json records the first tile only); the slowest is the launch's time
    tiles = report["tile_cycles"]
    assert len(tiles) == report["predicted_launch_cycles"]["cores"]
    assert max(max(c.values()) for c in tiles.values()) == report["emulated_cycles"]


@pytest.mark.needs_cc
@slow
@pytest.mark.parametrize("n", [128, 256, 512])
def test_large_bf16(n):
    t0 = time.perf_counter()
    plan, raw, err, secs = case(n, n, n)
    print(f"{n}^3 bf16 HiFi4 on the emulator: launch {secs:.1f} s, total {time.perf_counter() - t0:.1f} s, "
          f"relative L2 error {err:.3g}")


# -------------------------------------------------------------------------- the a-priori bound on adversarial data
#
# A's rows and B's columns come in blocks of 8 per data family, so C's diagonal blocks pair a family with itself and
# the others mix two. "worst" is built for the bound's two large terms (docs/placement.md §3.4): in every group of 8 k
# one product of significands that lose the most bits to the fidelity's slices (and, fp32, to the tf32 truncation),
# and seven products just under half the group's resolution, which MVMUL's alignment rounds to 0, all positive so the
# errors add up; it measures how tight the bound is.

def _worst(src: str, rows: bool, K: int) -> np.ndarray:
    big = np.arange(K) % 8 == 0
    if src == "bf16":   # A: s_B = 1032 (s mod 16 = 8); B: s_A = 1080 (s mod 64 = 56, bits 5..3 set); small: 1.9921875
        a_big, b_big, b_small = 1 + 2 ** -7, 1 + 7 * 2 ** -7, 2 - 2 ** -7
    else:               # s_B = 1039, s_A = 1087 (bit 0 set), and the 13 bits the unpacker drops all set
        low = (2 ** 13 - 1) * 2.0 ** -23
        a_big, b_big, b_small = 1 + 15 * 2 ** -10 + low, 1 + 63 * 2 ** -10 + low, 2 - 2.0 ** -23
    if rows:
        return np.tile(np.where(big, a_big, 2.0 ** -6), (8, 1))
    return np.tile(np.where(big, b_big, 2.0 ** -6 * b_small)[:, None], (1, 8))


def _cancelling(rng, rows: bool, K: int) -> np.ndarray:
    """A: x in the first half of k, -x (1 + 2^-6 noise) in the second; B: the same y in both halves."""
    h = K // 2
    if rows:
        x = rng.standard_normal((8, h))
        return np.concatenate([x, -x * (1 + 2.0 ** -6 * rng.standard_normal((8, h)))], axis=1)
    y = rng.standard_normal((h, 8))
    return np.concatenate([y, y], axis=0)


ADVERSARIAL_FAMILIES = {    # name -> (rng, src, rows?, K) -> an (8, K) block of A or a (K, 8) block of B
    "normal": lambda rng, src, rows, K: rng.standard_normal((8, K) if rows else (K, 8)),
    "heavy tails": lambda rng, src, rows, K: rng.standard_cauchy((8, K) if rows else (K, 8)),
    "mixed scales": lambda rng, src, rows, K: (rng.standard_normal((8, K) if rows else (K, 8))
                                               * 2.0 ** rng.integers(-24, 25, (8, K) if rows else (K, 8))),
    "cancelling": lambda rng, src, rows, K: _cancelling(rng, rows, K),
    "worst": lambda rng, src, rows, K: _worst(src, rows, K),
}
BOUND_TIGHTNESS = 0.85      # "worst" reaches 0.87 to 0.96 of the bound (docs/placement.md §3.4)


def adversarial_operands(src: str, K: int, seed: int):
    """A (8 F, K) and B (K, 8 F) float32 (bf16-rounded for bf16), F = the number of families."""
    rng = np.random.default_rng(seed)
    rd = bf16_round if src == "bf16" else (lambda x: x)
    a = np.concatenate([f(rng, src, True, K) for f in ADVERSARIAL_FAMILIES.values()], axis=0)
    b = np.concatenate([f(rng, src, False, K) for f in ADVERSARIAL_FAMILIES.values()], axis=1)
    return rd(a.astype(np.float32)), rd(b.astype(np.float32))


def adversarial_run(src: str, fidelity: str, K: int, dev=None):
    """The adversarial operands through the FPU matmul at `fidelity` with an fp32 output (the Dst value itself) on
    `dev` (default: the emulator); returns (a, b, raw output bytes)."""
    a, b = adversarial_operands(src, K, seed=K + len(fidelity))
    fn, dt = ((lambda x, y: x.float() @ y.float()), dtypes.bfloat16) if src == "bf16" else ((lambda x, y: x @ y),
                                                                                            dtypes.float32)
    spec = match_matmul(matmul_ast(fn, [a.shape, b.shape], dt))
    plan = plan_matmul(spec, f"mm_bound_{K}", fidelity)
    assert plan.src_format == src and not spec.out_bf16
    return a, b, run_plan(dev or emu(), plan, [a, b])[0]


@pytest.mark.needs_cc
@pytest.mark.parametrize("src,fidelity,K", [(s, f, 256) for s in ("bf16", "tf32")
                                            for f in ("LoFi", "HiFi2", "HiFi3", "HiFi4")] + [("bf16", "HiFi4", 2048)],
                         ids=str)
def test_bound_holds_on_adversarial_data(src, fidelity, K):
    """The emulated FPU matmul never exceeds the a-priori bound against float64 on any output of any family pair,
    and the worst-case block comes within BOUND_TIGHTNESS of it (the bound is not vacuous: a kernel losing a little
    more than the documented arithmetic allows fails here)."""
    a, b, raw = adversarial_run(src, fidelity, K)
    ratio = error_ratio(from_bytes(raw, "float32").reshape(a.shape[0], b.shape[1]), a, b, src, fidelity, False)
    per_family = {name: float(ratio[8 * i:8 * i + 8, 8 * i:8 * i + 8].max()) for i, name in
                  enumerate(ADVERSARIAL_FAMILIES)}
    print(f"\n{src} {fidelity} K={K}: error / bound, max over all outputs {ratio.max():.3f}; per family "
          + ", ".join(f"{n} {r:.3f}" for n, r in per_family.items()))
    assert ratio.max() <= 1, np.unravel_index(ratio.argmax(), ratio.shape)
    assert per_family["worst"] >= BOUND_TIGHTNESS, per_family


@pytest.mark.needs_cc
@pytest.mark.ttsim
@pytest.mark.parametrize("src,fidelity", [("bf16", "LoFi"), ("tf32", "HiFi3")], ids=str)
def test_adversarial_bits_on_ttsim(src, fidelity):
    """The adversarial operands give ttsim's output bits on the emulator, so the bound checked there holds on ttsim."""
    from tt_backend.runtime.ttsim_device import TtsimDevice
    *_, raw_emu = adversarial_run(src, fidelity, 256)
    with TtsimDevice(LIB) as sim:
        *_, raw_sim = adversarial_run(src, fidelity, 256, sim)
    e, t = np.frombuffer(raw_emu, np.uint8), np.frombuffer(raw_sim, np.uint8)
    assert np.array_equal(e, t), f"{int((e != t).sum())} of {e.size} output bytes differ"


# --------------------------------------------------------------------------------------------- ttsim vs emulator

@pytest.mark.needs_cc
@pytest.mark.ttsim
@pytest.mark.parametrize("mkn,dt,fidelity,form", [
    ((64, 96, 80), dtypes.bfloat16, "HiFi4", "plain"), ((33, 47, 65), dtypes.bfloat16, "HiFi3", "plain"),
    ((40, 64, 48), dtypes.bfloat16, "HiFi2", "plain"),     # A's panels by face rows, the last one padded past M
    ((40, 72, 56), dtypes.bfloat16, "LoFi", "bT"), ((48, 64, 40), dtypes.float32, "HiFi2", "aT"),
    ((40, 64, 200), dtypes.bfloat16, "HiFi2", "plain"),    # 7 column tiles: a group of 4 sharing A, then one of 3
], ids=str)
def test_ttsim_vs_emu_bits(mkn, dt, fidelity, form):
    from tt_backend.runtime.ttsim_device import TtsimDevice
    state = rng.bit_generator.state
    _, raw_emu, *_ = case(*mkn, dt=dt, fidelity=fidelity, form=form)
    rng.bit_generator.state = state                                    # the same inputs
    with TtsimDevice(LIB) as sim:
        _, raw_sim, *_ = case(*mkn, dt=dt, fidelity=fidelity, form=form, dev=sim)
    e, t = np.frombuffer(raw_emu, np.uint8), np.frombuffer(raw_sim, np.uint8)
    assert np.array_equal(e, t), f"{int((e != t).sum())} of {e.size} output bytes differ"


# ------------------------------------------------------------------------------------ fp32 on the SFPU (sfpu_matmul)
#
# Bound: every SFPMAD rounds once (fp32, RNE) and k runs sequentially, so |C - C64| <= K * 2^-24 * sum_k |a b| (C64 the
# float64 product of the fp32 inputs); tinygrad's CPU fp32 sum has the same bound, so the two differ by at most twice it.

def sfpu_case(M, K, N, form="plain", batch=None, err_budget=None, dev=None, dt=dtypes.float32):
    """Run a matmul with an fp32 result through lower_matmul (which must pick the SFPU matmul) and check it."""
    sa, sb = ((batch,) if batch else ()) + (M, K), ((batch,) if batch else ()) + (K, N)
    a = rng.standard_normal(sa).astype(np.float32)
    b = rng.standard_normal(sb).astype(np.float32)
    if dt == dtypes.bfloat16: a, b = bf16_round(a), bf16_round(b)
    if form == "f32out":     # bf16 operands, fp32 result
        fn, arrays = (lambda x, y: x.float() @ y.float()), [a, b]
    elif form == "bT":
        fn, arrays = (lambda x, y: x @ y.transpose(-1, -2)), [a, np.ascontiguousarray(np.swapaxes(b, -1, -2))]
    elif form == "aT":
        fn, arrays = (lambda x, y: x.transpose(-1, -2) @ y), [np.ascontiguousarray(np.swapaxes(a, -1, -2)), b]
    else:
        fn, arrays = (lambda x, y: x @ y), [a, b]
    plan = lower_matmul(matmul_ast(fn, [x.shape for x in arrays], dt), f"smm_{M}_{K}_{N}", err_budget)
    assert isinstance(plan, SfpuMatmulPlan), type(plan)
    assert (plan.spec.M, plan.spec.N, plan.spec.K, plan.spec.n_batch) == (M, N, K, batch or 1)
    raw, secs = run_plan(dev or emu(), plan, arrays)
    got = from_bytes(raw, "float32").reshape(((batch,) if batch else ()) + (M, N))
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    bound = K * 2.0 ** -24
    err = normalised_error(got, a64, b64)
    assert err.max() <= bound, f"max normalised error {err.max():.3g} > K * 2^-24 = {bound:.3g}"
    cpu = (Tensor(a, device="CPU") @ Tensor(b, device="CPU")).numpy()
    assert (np.abs(got - cpu) / np.matmul(np.abs(a64), np.abs(b64))).max() <= 2 * bound
    return plan, raw, err, secs


@pytest.mark.needs_cc
@pytest.mark.parametrize("mkn", [(32, 32, 32), (64, 64, 64), (33, 47, 65)], ids=str)
def test_fp32_sfpu(mkn):
    sfpu_case(*mkn)


@pytest.mark.needs_cc
@pytest.mark.parametrize("form", ["bT", "aT"])
def test_fp32_sfpu_transposed(form):
    sfpu_case(40, 72, 56, form=form)


@pytest.mark.needs_cc
def test_bf16_fp32_out_sfpu():
    """bf16 operands with an fp32 result and no budget: the FPU's alignment is not fp32-faithful, the SFPU is."""
    sfpu_case(40, 80, 48, form="f32out", dt=dtypes.bfloat16)


@pytest.mark.needs_cc
def test_fp32_sfpu_batched():
    sfpu_case(40, 24, 36, batch=3, err_budget=1e-4)   # a budget tighter than the FPU's: still the SFPU


def test_fp32_sfpu_column_groups():
    """B is resident per group of column tiles; when all of B and the replicated A panel do not fit, N is split."""
    s = match_matmul(matmul_ast(lambda x, y: x @ y, [(512, 512), (512, 512)], dtypes.float32))
    plan = lower_matmul(matmul_ast(lambda x, y: x @ y, [(512, 512), (512, 512)], dtypes.float32), "k")
    assert isinstance(plan, SfpuMatmulPlan) and plan.ng == 2 and plan.ntg == 8 and s.K == 512
    assert max(plan.l1.values()) < 0x180000


@pytest.mark.needs_cc
def test_fp32_sfpu_column_groups_run():
    """Several column groups (forced by a small ng limit) give the same bits as one."""
    import tt_backend.lowering.families.sfpu_matmul as sm
    state = rng.bit_generator.state
    _, raw1, *_ = sfpu_case(40, 16, 100)
    real = sm.allocate_sfpu_matmul_l1

    def two_groups(plan):
        plan = real(plan)
        plan.ng = 2
        return plan
    rng.bit_generator.state = state
    sm.allocate_sfpu_matmul_l1 = two_groups
    try:
        plan, raw2, *_ = sfpu_case(40, 16, 100)
    finally:
        sm.allocate_sfpu_matmul_l1 = real
    assert plan.ng == 2 and raw1 == raw2


@pytest.mark.needs_cc
def test_tinygrad_device_fp32_sfpu(monkeypatch, tmp_path):
    """Through tinygrad's TT device without a budget: fp32-faithful, so the SFPU matmul; its launch model
    (sfpu_matmul_cost.py) within 25 % of the emulated cycles."""
    monkeypatch.delenv("TT_ERR_BUDGET", raising=False)
    monkeypatch.setenv("TT_DUMP", str(tmp_path))
    import tt_backend.lowering.families.sfpu_matmul as sm
    planned, real = [], sm.plan_sfpu_matmul
    monkeypatch.setattr(sm, "plan_sfpu_matmul", lambda *args, **kw: planned.append(real(*args, **kw)) or planned[-1])
    a = rng.standard_normal((44, 76)).astype(np.float32)     # a shape no other test compiles (program cache)
    b = rng.standard_normal((76, 36)).astype(np.float32)
    got = (Tensor(a, device="TT:emu") @ Tensor(b, device="TT:emu")).numpy()
    assert len(planned) == 1
    cpu = (Tensor(a, device="CPU") @ Tensor(b, device="CPU")).numpy()
    assert (np.abs(got - cpu) / (np.abs(a) @ np.abs(b))).max() <= 2 * 76 * 2.0 ** -24
    (report,) = [json.loads(p.read_text()) for p in tmp_path.glob("*/report.json")]
    assert abs(report["predicted_launch_cycles"]["total"] / report["emulated_cycles"] - 1) <= 0.25


@pytest.mark.needs_cc
@slow
@pytest.mark.parametrize("n", [128, 256, 512])
def test_large_fp32_sfpu(n):
    t0 = time.perf_counter()
    plan, raw, err, secs = sfpu_case(n, n, n)
    print(f"{n}^3 fp32 SFPU on the emulator: launch {secs:.1f} s, total {time.perf_counter() - t0:.1f} s, "
          f"max normalised error {err.max():.3g}")


@pytest.mark.needs_cc
@pytest.mark.ttsim
@pytest.mark.parametrize("mkn,form,batch", [((64, 64, 64), "plain", None), ((33, 47, 65), "bT", None),
                                            ((40, 24, 36), "aT", 2)], ids=str)
def test_ttsim_vs_emu_bits_fp32_sfpu(mkn, form, batch):
    from tt_backend.runtime.ttsim_device import TtsimDevice
    state = rng.bit_generator.state
    _, raw_emu, *_ = sfpu_case(*mkn, form=form, batch=batch)
    rng.bit_generator.state = state
    with TtsimDevice(LIB) as sim:
        _, raw_sim, *_ = sfpu_case(*mkn, form=form, batch=batch, dev=sim)
    e, t = np.frombuffer(raw_emu, np.uint8), np.frombuffer(raw_sim, np.uint8)
    assert np.array_equal(e, t), f"{int((e != t).sum())} of {e.size} output bytes differ"


# ------------------------------------------------------------------------- fp32 SFPU matmul with K split in blocks
#
# The replicated A panel takes 1 KiB of L1 per k, so K above ~1100 is split into K blocks (allocate_sfpu_matmul_l1),
# the C tiles carried across blocks as packed fp32 partials (exact); every C tile still sees the same SFPMADs in
# ascending k, so the result must be the bits of the one-block kernel.

def _split_plans(M, K, N, form="plain", batch=None):
    fn = {"plain": lambda x, y: x @ y, "bT": lambda x, y: x @ y.transpose(-1, -2),
          "aT": lambda x, y: x.transpose(-1, -2) @ y}[form]
    bt = (batch,) if batch else ()
    shapes = {"plain": [bt + (M, K), bt + (K, N)], "bT": [bt + (M, K), bt + (N, K)], "aT": [bt + (K, M), bt + (K, N)]}
    return lower_matmul(matmul_ast(fn, shapes[form], dtypes.float32), f"split_{M}_{K}_{N}_{form}")


@pytest.mark.parametrize("shape", [(64, 4096, 64, None), (32, 8192, 32, None), (64, 4096, 64, 8), (1, 4096, 64, None),
                                   (33, 1500, 40, None), (256, 8192, 100, None), (7, 20000, 4096, None)], ids=str)
def test_fp32_sfpu_split_k_plans(shape):
    """Large K plans the SFPU matmul with K blocks (never the generic path); B resident while a column tile of it fits
    beside >= 128 k of A, else streamed with A; everything inside L1."""
    from tt_backend.chip import layout
    M, K, N, batch = shape
    plan = _split_plans(M, K, N, batch=batch)
    assert isinstance(plan, SfpuMatmulPlan) and plan.split_k, plan
    assert plan.nkb * plan.kb_chunks >= plan.kc > (plan.nkb - 1) * plan.kb_chunks
    assert plan.kb_chunks >= 8 and max(plan.l1.values()) < layout.DATA_END
    assert plan.b_stream == (K * 128 > 1 << 20)   # one column tile of B takes 128 bytes per k
    plan.render()


@pytest.mark.needs_cc
@pytest.mark.parametrize("mkn,form,batch,kbc,stream", [
    ((40, 100, 70), "plain", None, 3, False), ((40, 100, 70), "plain", None, 1, True),
    ((33, 47, 65), "bT", None, 2, True), ((20, 60, 36), "aT", 2, 3, False)], ids=str)
def test_fp32_sfpu_split_k_bits(mkn, form, batch, kbc, stream):
    """Forced small K blocks (B resident or streamed; C packed to L1 between blocks and unpacked back): the bits of the
    one-block kernel."""
    from tt_backend.lowering.families.sfpu_matmul import force_split_k
    state = rng.bit_generator.state
    plan, raw1, *_ = sfpu_case(*mkn, form=form, batch=batch)
    assert not plan.split_k
    rng.bit_generator.state = state
    sa, sb = ((batch,) if batch else ()) + (mkn[0], mkn[1]), ((batch,) if batch else ()) + (mkn[1], mkn[2])
    a, b = rng.standard_normal(sa).astype(np.float32), rng.standard_normal(sb).astype(np.float32)
    arrays = {"plain": [a, b], "bT": [a, np.ascontiguousarray(np.swapaxes(b, -1, -2))],
              "aT": [np.ascontiguousarray(np.swapaxes(a, -1, -2)), b]}[form]
    split = force_split_k(_split_plans(*mkn, form=form, batch=batch), kbc, stream)
    assert split.split_k and split.b_stream == stream and split.kb_chunks == kbc
    raw2, _ = run_plan(emu(), split, arrays)
    assert raw2 == raw1, f"kbc={kbc} stream={stream}: bits differ from the one-block kernel"


@pytest.mark.needs_cc
def test_fp32_sfpu_large_k():
    """K = 1400 does not fit one replicated A panel: K blocks, within K * 2^-24 * sum|a||b| of float64."""
    plan, *_ = sfpu_case(20, 1400, 24)
    assert plan.split_k and plan.nkb >= 2


@pytest.mark.needs_cc
@pytest.mark.ttsim
def test_ttsim_vs_emu_bits_fp32_sfpu_split_k():
    from tt_backend.runtime.ttsim_device import TtsimDevice
    state = rng.bit_generator.state
    plan, raw_emu, *_ = sfpu_case(20, 1400, 40)
    assert plan.split_k
    rng.bit_generator.state = state
    with TtsimDevice(LIB) as sim:
        _, raw_sim, *_ = sfpu_case(20, 1400, 40, dev=sim)
    e, t = np.frombuffer(raw_emu, np.uint8), np.frombuffer(raw_sim, np.uint8)
    assert np.array_equal(e, t), f"{int((e != t).sum())} of {e.size} output bytes differ"


@pytest.mark.needs_cc
@pytest.mark.parametrize("form", ["xv", "vx"])
def test_fp32_sfpu_matvec(form):
    """Matrix-vector products (one output row after the matcher's transpose): the MOP runs one 4-row group of the C tile
    instead of 8, the reader zeroes the rows past M once per panel slot; results within K * 2^-24 of float64."""
    K, N = 300, 40
    m = rng.standard_normal((N, K) if form == "xv" else (K, N)).astype(np.float32)
    v = rng.standard_normal(K).astype(np.float32)
    fn, arrays = ((lambda x, y: x @ y), [m, v]) if form == "xv" else ((lambda x, y: x @ y), [v, m])
    plan = lower_matmul(matmul_ast(fn, [x.shape for x in arrays], dtypes.float32), f"smv_{form}")
    assert isinstance(plan, SfpuMatmulPlan) and plan.spec.M == 1 and plan.row_groups == 1
    raw, _ = run_plan(emu(), plan, arrays)
    got = from_bytes(raw, "float32")
    a64, b64 = (arrays[0].astype(np.float64), arrays[1].astype(np.float64))
    ref, scale = a64 @ b64, np.abs(a64) @ np.abs(b64)
    assert (np.abs(got - ref) / scale).max() <= K * 2.0 ** -24


@pytest.mark.needs_cc
def test_fpu_plan_too_big_takes_sfpu():
    """A matmul the FPU would take but whose K is too long for L1 (the FPU plan keeps a column tile of B and two A
    panels resident) runs on the SFPU matmul instead of failing: bf16 operands widen exactly, C accumulates in fp32 and
    is rounded to bf16 once."""
    from tt_backend.lowering.families.sfpu_matmul import force_split_k, plan_sfpu_matmul
    ast = matmul_ast(lambda x, y: x @ y, [(64, 8192), (8192, 64)], dtypes.bfloat16)
    with pytest.raises(UnsupportedOp, match="bytes of L1"):
        plan_matmul(match_matmul(ast), "k", "HiFi3")
    assert isinstance(lower_matmul(ast, "k", err_budget=2e-3), SfpuMatmulPlan)
    ast = matmul_ast(lambda x, y: x @ y, [(64, 4096), (4096, 64)], dtypes.float32)
    assert isinstance(lower_matmul(ast, "k", err_budget=1e-2), SfpuMatmulPlan)
    M, K, N = 40, 200, 70     # run: a small bf16 matmul on the SFPU matmul with K in blocks
    a = bf16_round(rng.standard_normal((M, K)).astype(np.float32))
    b = bf16_round(rng.standard_normal((K, N)).astype(np.float32))
    spec = match_matmul(matmul_ast(lambda x, y: x @ y, [(M, K), (K, N)], dtypes.bfloat16))
    plan = force_split_k(plan_sfpu_matmul(spec, "bf16_sfpu"), 5)
    raw, _ = run_plan(emu(), plan, [a, b])
    got = from_bytes(raw, "bfloat16").reshape(M, N)
    assert np.array_equal(got, bf16_round(got))
    assert normalised_error(got, a.astype(np.float64), b.astype(np.float64)).max() <= K * 2.0 ** -24 + 2.0 ** -9


@pytest.mark.needs_cc
@pytest.mark.parametrize("fmt,fidelity", [("bf16", "LoFi"), ("bf16", "HiFi3"), ("tf32", "HiFi2"), ("tf32", "HiFi4")])
def test_error_model_is_the_kernels_arithmetic(fmt, fidelity):
    """The matmul's error model (tt_backend.fpu_reduce_eval.fpu_matmul, what the placement predicts with) gives the
    emulated kernel's output bit for bit on the same operands (fp32 output, so the writer adds no rounding)."""
    M, K, N = 40, 96, 36
    a = rng.standard_normal((M, K)).astype(np.float32)
    b = rng.standard_normal((K, N)).astype(np.float32)
    if fmt == "bf16":
        a, b = bf16_round(a), bf16_round(b)
        fn, dt = (lambda x, y: x.float() @ y.float()), dtypes.bfloat16
    else:
        fn, dt = (lambda x, y: x @ y), dtypes.float32
    plan = plan_matmul(match_matmul(matmul_ast(fn, [a.shape, b.shape], dt)), "model", fidelity)
    raw, _ = run_plan(emu(), plan, [a, b])
    model = fpu_matmul(a, b, fmt, {"LoFi": 1, "HiFi2": 2, "HiFi3": 3, "HiFi4": 4}[fidelity])
    np.testing.assert_array_equal(np.frombuffer(raw, np.uint32).reshape(M, N), model)


# ------------------------------------------------------------------------- the SFPU epilogue (matmul_epilogue.py)

def rne_bf16_bits(words: np.ndarray) -> np.ndarray:
    """fp32 words -> bf16 bits as the epilogue (and before it the writer) rounds: nearest even, NaN quiet."""
    u = words.astype(np.uint64)
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    return np.where(nan, (u | 0x400000) >> 16, (u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


@pytest.mark.needs_cc
@pytest.mark.parametrize("target", target_params("emu", "ttsim"))
@pytest.mark.parametrize("mkn,form,batch,specials", [((33, 47, 65), "bf16", None, False),
                                                     ((40, 64, 36), "round", 2, False),
                                                     ((40, 64, 136), "bf16", None, False),
                                                     ((40, 64, 136), "bf16", None, True)], ids=str)
def test_epilogue_rounding_is_bit_exact(new_device, target, mkn, form, batch, specials):
    """The SFPU epilogue's bf16 rounding on Dst (pair: a bf16 output, N odd so rows start mid-word; round: an fp32
    output of a bf16-rounded result, batched; dst16: bf16 rows 16-byte aligned, written by the packer, five column
    tiles: a group of 4 and a short one) gives exactly the nearest-even rounding of the MVMUL model's fp32 words,
    on the emulator and on ttsim (hence the same bits on both); exact ties and values near overflow included, and
    (specials) +-Inf, NaN, a denormal and -0 in both operands: the FPU makes a NaN input's products Inf
    (docs/fpu_path.md §10.4), so Dst holds Infs of both signs but no NaN, and the rounding keeps them."""
    M, K, N = mkn
    shp = ((batch,) if batch else ())
    a = rng.standard_normal(shp + (M, K)).astype(np.float32)
    b = rng.standard_normal(shp + (K, N)).astype(np.float32)
    a[..., 0, :2] = [1.0, 2.0 ** -8]; a[..., 0, 2:] = 0          # row 0: 1 + 2^-8 (+ 2^-16): exact ties, a round-up
    b[..., :2, :4] = [[1.0, -1.0, 1.0, 1.0], [1.0, -1.0, 0.0, 1.5]]
    a[..., 1, :] = 0; a[..., 1, 0] = 2.0 ** 127                  # row 1: near and past overflow, a denormal
    b[..., 0, 4:8] = [1.9921875, -2.0, 1.0, 2.0 ** -130]
    if specials:
        a, b = with_specials(a, rng), with_specials(b, rng)
    a, b = bf16_round(a), bf16_round(b)
    fn = (lambda x, y: x @ y) if form == "bf16" else (lambda x, y: (x.float() @ y.float()).cast(dtypes.bfloat16).float())
    spec = match_matmul(matmul_ast(fn, [a.shape, b.shape], dtypes.bfloat16))
    assert spec.out_bf16 and (spec.out.dtype == "bfloat16") == (form == "bf16") and spec.n_batch == (batch or 1)
    plan = plan_matmul(spec, "epi", "HiFi4")
    raw, _ = run_plan(new_device(), plan, [a, b])
    model = np.stack([fpu_matmul(x, y, "bf16", 4) for x, y in zip(a.reshape((-1, M, K)), b.reshape((-1, K, N)))])
    want = rne_bf16_bits(model).reshape(shp + (M, N))
    if specials:
        inf = (model & 0x7FFFFFFF) == 0x7F800000
        assert inf[model >> 31 == 1].any() and inf[model >> 31 == 0].any() and not ((model & 0x7FFFFFFF) > 0x7F800000).any()
    got = (np.frombuffer(raw, np.uint16) if form == "bf16" else np.frombuffer(raw, np.uint32) >> 16).reshape(want.shape)
    if form == "round":
        assert not (np.frombuffer(raw, np.uint32) & 0xFFFF).any()
    np.testing.assert_array_equal(got, want)

