"""The FPU matmul's SFPU epilogue and mover split in the rendered sources (lowering/families/matmul_epilogue.py,
fpu_matmul.py), no compiler, no device: which outputs get which epilogue, that its body fits the replay buffer, which
Dst slot the packer takes, and that B's tilize is split between reader and writer only for the line-by-line modes.
Their bits are checked on the emulator and ttsim in tests/e2e/test_matmul.py (test_epilogue_rounding_is_bit_exact)."""
from __future__ import annotations

import pytest

from tinygrad import Tensor, dtypes
from tinygrad.uop.ops import Ops

from tt_backend.chip.isa import disasm
from tt_backend.lowering.codegen.replay import REPLAY_WORDS
from tt_backend.lowering.families.fpu_matmul import DST_SET, plan_matmul
from tt_backend.lowering.families.matmul_epilogue import BLOCK_ROWS, PASS_OFFSETS, STEPS, body, epilogue_ctx
from tt_backend.lowering.families.matmul_spec import match_matmul


def spec_of(fn, shapes, dt):
    out = fn(*[Tensor.empty(*s, device="CPU", dtype=dt) for s in shapes])
    calls = [c for c in out.schedule_linear().src if c.op is Ops.CALL]
    return match_matmul(calls[-1].src[0])


BF16_OUT = (lambda x, y: x @ y, dtypes.bfloat16)
FP32_OUT = (lambda x, y: x.float() @ y.float(), dtypes.bfloat16)
ROUNDED_FP32_OUT = (lambda x, y: (x.float() @ y.float()).cast(dtypes.bfloat16).float(), dtypes.bfloat16)


@pytest.mark.parametrize("form,n,mode", [(BF16_OUT, 36, "pair"), (BF16_OUT, 48, "dst16"), (ROUNDED_FP32_OUT, 36, "round"),
                                         (FP32_OUT, 36, None)], ids=["bf16", "bf16 packed rows", "round", "fp32"])
def test_epilogue_by_output(form, n, mode):
    """bf16 rows that start 16-byte aligned (N = 48) are written by the packer ("dst16"), others (N = 36) paired."""
    fn, dt = form
    spec = spec_of(fn, [(40, 64), (64, n)], dt)
    epi = epilogue_ctx(spec)
    srcs = plan_matmul(spec, "k", "HiFi2").render()
    if mode is None:
        assert epi is None
        assert "SFPLOAD" not in srcs["trisc0"] and "tt_set_gpr(5, 0u)" in srcs["trisc0"]   # the packer takes slot 0
        return
    assert epi["mode"] == mode and epi["mop_steps"] * len(epi["passes"]) == STEPS[mode]
    assert len(epi["body"]) <= REPLAY_WORDS
    ops = [disasm(w).split()[0] for w in body(mode)]
    assert ops.count("SFPLOAD") == (2 if mode == "pair" else 1) and ops[-1] == "SFPSTORE"
    # in place, consecutive row steps in different Dst blocks (a store's block is unreadable for a few cycles): a
    # tile's steps are passes over its 8 blocks, each pass from its own address in the first block
    assert epi["mop_steps"] * BLOCK_ROWS == 64
    covered = sorted(a + BLOCK_ROWS * k for a in PASS_OFFSETS[mode] for k in range(epi["mop_steps"]))
    assert covered == list(range(0, 64, 64 // STEPS[mode]))
    assert "SFPMAD" not in ops and "SFPADD" not in ops          # integer work only: no flush, no NaN canonicalisation
    src = srcs["trisc0"]
    math, pack = src[src.index("#elif defined(TRISC_MATH)"):src.index("#elif defined(TRISC_PACK)")], \
        src[src.index("#elif defined(TRISC_PACK)"):]
    assert epi["replay_record"] not in math and epi["replay_record"] in pack   # the pack thread runs the epilogue
    assert math.index("tt_sem_take(TT_SEM_FREE)") < math.index("MM_KT; kt++")  # a group waits for its Dst set
    assert pack.index("tt_sem_take(TT_SEM_MATHDONE)") < pack.index(epi["mop_body"])
    assert f"set ? {64 * DST_SET}u : 0u" in pack                 # the packer takes the tile's slot of the group's set
    assert "fp32_to_bf16" not in srcs["ncrisc"]                  # the writer no longer rounds
    packed = mode == "dst16"                                     # the packer writes the rows: no untilize on a RISC-V
    assert ("untilize_row" in srcs["ncrisc"]) != packed and ("untilize_row" in srcs["brisc"]) != packed
    assert ("panel_rows(&noc" in srcs["ncrisc"]) == packed


@pytest.mark.parametrize("form,split", [("plain", True), ("bT", True), ("gather", False)])
def test_b_split_between_reader_and_writer(form, split):
    """B is tilized by both movers for row- and column-contiguous B; an element gather stays on the reader. (The
    plain B is 48 columns wide: whole tiles of aligned bf16 rows may stay row-major instead, test_matmul.py.)"""
    fns = {"plain": lambda x, y: x @ y, "bT": lambda x, y: x @ y.transpose(-1, -2),
           "gather": lambda x, y: x @ y[:, ::2]}
    shapes = {"plain": [(64, 96), (96, 48)], "bT": [(64, 96), (64, 96)], "gather": [(64, 96), (96, 128)]}
    spec = spec_of(fns[form], shapes[form], dtypes.bfloat16)
    assert spec is not None
    plan = plan_matmul(spec, "k", "HiFi2")
    srcs = plan.render()
    assert ("stage_in_w" in plan.l1) == split
    assert ("#define CB_B_LOWER" in srcs["args.h"]) == split
    assert ("tilize_b(" in srcs["ncrisc"]) == split
    assert ("tt_cb_wait(&cbl)" in srcs["brisc"]) == split
