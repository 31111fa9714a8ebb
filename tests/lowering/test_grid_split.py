"""The elementwise family's split over a grid of cores, without a device: tile ranges, the launch model's choice of
the count (lowering/families/mover_cost.py grid_pipeline_cycles, elementwise.use_cores), each core's argument block
and the sources that read it."""
from __future__ import annotations

import pytest
from tinygrad import Tensor
from tinygrad.uop.ops import Ops

from tt_backend.lowering.families import mover_cost, shared_programs
from tt_backend.lowering.families.mover_cost import grid_pipeline_cycles, split_ranges
from tt_backend.lowering.select import lower
from tt_backend.placement_eval import placer


def _plan(t: Tensor, name: str):
    call = [c for c in t.schedule_linear().src if c.op is Ops.CALL][-1]
    return lower(call.src[0], name, placer())


@pytest.mark.parametrize("n, cores", [(10, 3), (7, 7), (64, 5), (1, 1)])
def test_split_ranges_cover_every_tile_once_and_differ_by_at_most_one(n, cores):
    r = split_ranges(n, cores)
    assert len(r) == cores and r[0][0] == 0 and r[-1][1] == n
    assert all(a[1] == b[0] for a, b in zip(r, r[1:]))
    sizes = [e - b for b, e in r]
    assert max(sizes) - min(sizes) <= 1 and sorted(sizes, reverse=True) == sizes


def test_grid_model_is_bounded_by_the_dram_banks():
    reads, write = [("contiguous", "fp32", None)] * 2, ("contiguous", "fp32")
    one = grid_pipeline_cycles(4096, reads, write, 300.0, 1, 12 * 1024)
    many = [grid_pipeline_cycles(4096, reads, write, 300.0, n, 12 * 1024) for n in (8, 64)]
    bank = 4096 * 12 * 1024 / (8 * mover_cost.DRAM_BANK_BYTES_PER_CYCLE)      # buffers interleaved over 8 banks
    assert one["total"] > many[0]["total"] > round(bank) and many[1]["bank"] == round(bank)
    # far past the knee the banks' time alone, within what the cores' pipelines add by queueing (bank_queueing)
    assert round(bank) < many[1]["total"] < 1.001 * bank
    assert many[1]["price"] == many[1]["total"] + 63 * mover_cost.CORE_LAUNCH_CYCLES
    assert many[1]["tiles_per_core"] == 64 and one["cores"] == 1


def test_use_cores_picks_the_cheapest_count_within_the_cap():
    a = Tensor.empty(64, 400)
    plan = _plan((a * 3).exp2(), "E_grid")             # 25 tiles, SFPU-bound
    plan.use_cores(1)
    assert plan.cores == 1
    plan.use_cores(140)
    best = plan.cores
    prices = {n: plan.launch_cycles(n)["price"] for n in range(1, 26)}
    assert best > 1 and prices[best] == min(prices.values())
    plan.use_cores(3)
    assert plan.cores == 3                              # capped (TT_CORES): the cap is the cheapest allowed here
    lc = plan.launch_cycles()
    assert (lc["cores"], lc["tiles_per_core"], lc["grid"]) == (3, 9, "3x1")


def test_each_core_gets_its_argument_block_and_the_sources_read_it():
    a, b = Tensor.empty(70, 333), Tensor.empty(70, 333)
    plan = _plan(a * b + a, "E_grid_args")               # 23 tiles
    plan.cores = 4
    addrs = [0x1000 * (k + 1) for k in range(len(plan.buffers))]
    blocks = plan.core_arg_words(addrs)
    n = 2 + len(plan.buffers)                            # the launch words before the range
    assert [blk[n:n + 2] for blk in blocks] == [[0, 6], [6, 12], [12, 18], [18, 23]]
    assert all(blk[:n] == [23, 70 * 333, *addrs] for blk in blocks)
    assert plan.arg_words(addrs)[:n + 2] == [23, 70 * 333, *addrs, 0, 23]      # one core: all tiles
    # the shared programs find the range through their table (shared_programs.table), the rest through args.h
    shared = shared_programs.programs(plan, plan.fpu_ops, plan.dst_inputs)
    assert shared == {"brisc", "ncrisc", "trisc0", "trisc2"}
    assert all(blk[shared_programs.TABLE_AT] == n and len(blk) > shared_programs.TABLE_AT for blk in blocks)
    src = plan.render()
    assert f"#define ARG_TILE_BEGIN ARG_BUF({len(plan.buffers)})" in src["args.h"]
    for core in ("brisc", "ncrisc", "trisc0", "trisc1", "trisc2"):
        text = src[core]
        read = "tile_begin = tt_arg(range)" if core in shared else "tile_begin = tt_arg(ARG_TILE_BEGIN)"
        assert read in text and "t < tile_end" in text, core


def test_reductions_split_by_whole_output_groups():
    # 96 rows of 500 (not a 64-byte multiple: one lane per output, gathered): 3 groups of 32 outputs
    plan = _plan(Tensor.empty(96, 500).sum(1), "r_grid")
    assert plan.reduce.lanes == 1
    unit = plan.split_unit
    assert unit == plan.reduce.tiles_per_group and plan.n_tiles == 3 * unit
    plan.use_cores(64)
    assert plan.cores == 3                                  # no more cores than groups: each owns whole rows
    blocks = plan.core_arg_words([0] * len(plan.buffers))
    assert [blk[-2:] for blk in blocks] == [[0, unit], [unit, 2 * unit], [2 * unit, 3 * unit]]



# ---------------------------------------------------------------------------------------- the FPU matmul's grid

def _matmul_plan(m: int, k: int, n: int, dtype: str = "bfloat16"):
    from tinygrad import dtypes
    from tt_backend.lowering.families.fpu_matmul import plan_matmul
    from tt_backend.lowering.families.matmul_spec import match_matmul
    a = Tensor.empty(m, k, device="CPU", dtype=getattr(dtypes, dtype))
    b = Tensor.empty(k, n, device="CPU", dtype=getattr(dtypes, dtype))
    call = [c for c in (a @ b).schedule_linear().src if c.op is Ops.CALL][-1]
    return plan_matmul(match_matmul(call.src[0]), "mm", "HiFi2")


def test_matmul_blocks_cover_every_output_tile_once():
    plan = _matmul_plan(150, 90, 200)                     # 5 x 7 output tiles
    blocks = plan.blocks((2, 3))
    cells = [(mt, nt) for m0, m1, n0, n1 in blocks for mt in range(m0, m1) for nt in range(n0, n1)]
    assert sorted(cells) == [(mt, nt) for mt in range(5) for nt in range(7)]


def test_matmul_core_arguments_rectangles_and_semaphores():
    from tt_backend.lowering.families.fpu_matmul import SEMAPHORES, block_words, sem_word
    from tt_backend.chip import layout
    plan = _matmul_plan(150, 90, 200)
    plan.grid, plan.cores = (2, 3), 6
    xys = plan.core_xys()
    assert xys == [(1, 2), (2, 2), (3, 2), (1, 3), (2, 3), (3, 3)]
    words = plan.core_arg_words(list(range(len(plan.buffers))))
    base = 2 + len(plan.buffers)
    sem = sem_word(plan)
    assert (layout.ARGS_BASE + 4 * sem) % 16 == 0 and sem >= block_words(plan)
    for k, w in enumerate(words):
        i, j = divmod(k, 3)
        assert w[base:base + 4] == list(plan.blocks()[k]) and w[base + 4:base + 8] == [3, j, 2, i]
        # the grid row (x 1..3 on row 2 + i) and column (x = 1 + j, rows 2..3) as NoC0 rectangles, start <= end
        assert w[base + 8] == 3 | (2 + i) << 6 | 1 << 12 | (2 + i) << 18
        assert w[base + 9] == (1 + j) | 3 << 6 | (1 + j) << 12 | 2 << 18
        assert not any(w[base + 10:sem + 4 * len(SEMAPHORES)])          # semaphores start at zero
        peers = w[sem + 4 * len(SEMAPHORES):]
        assert peers == [x | y << 6 for x, y in xys[3 * i:3 * i + 3] + xys[j::3]]
    assert plan.arg_words(list(range(len(plan.buffers))))[base:base + 10] == [0, 5, 0, 7, 1, 0, 1, 0, 0, 0]


def test_matmul_grid_starts_when_its_slowest_core_has_shared():
    """Every core's products wait for its grid row's A and its grid column's B, and a core sends its A only after
    its B: a grid's block starts when the slowest core's shares are in (mover_cost.matmul_cycles grid_fill). With
    N = 36 the second grid column's B share is 4 columns of an edge tile, zeroed first and copied element by element,
    slower than the first column's 32 columns: the launch predicted slower than with N = 64, as emulated (22,405
    against 19,588 cycles on 2 x 2, docs/performance.md §8.1); pricing the widest shares alone made them equal."""
    narrow, wide = _matmul_plan(40, 80, 36, "float32"), _matmul_plan(40, 80, 64, "float32")
    assert narrow.launch_cycles((2, 2))["total"] > wide.launch_cycles((2, 2))["total"]


def test_matmul_grid_choice_within_the_cap_and_the_chip():
    plan = _matmul_plan(1024, 1024, 1024)
    plan.use_cores(1)
    assert plan.grid == (1, 1) and plan.cores == 1
    for cap in (8, 64):
        plan.use_cores(cap)
        lc = plan.launch_cycles()
        assert 1 < plan.cores <= cap and lc["grid"] == "x".join(map(str, plan.grid))
        assert plan.launch_cycles((1, 1))["total"] > 5 * lc["total"]
    # at most the chip's 10 rows and 14 columns; a grid row walks as many blocks of B's columns on every core
    from tt_backend.lowering.families.fpu_matmul import grid_options
    opts = grid_options((64, 64, 4), 200, 5)
    assert max(r for r, _ in opts) == 10 and max(c for _, c in opts) == 14
    assert all(len({-(-(e - b) // 5) for b, e in split_ranges(64, c)}) == 1 for _, c in opts)


def test_contiguous_row_reductions_read_one_tile_per_noc_request():
    """Rows of 1024 floats (64-byte multiples, no pads): the launch model prices the 32-lane layout (a tile = 1024 consecutive
    elements of one row, one NoC read; the max a one-value-per-row fill) below the 32-outputs-per-tile gather, and it
    has a group per row, so it splits over as many cores as there are rows."""
    x = Tensor.empty(96, 1024)
    plan = _plan((x - x.max(1, keepdim=True)).exp().sum(1), "r_rows")
    assert plan.reduce.lanes == 32 and plan.reduce.groups == 96
    assert plan.reader_modes()[0] == "red contiguous"
    gathered = mover_cost.tile_read_cycles("red affine", "fp32")
    assert plan.launch_cycles(1)["reader"] < plan.n_tiles * gathered / 5      # x gathered alone: 5x the whole reader
    plan.use_cores(64)
    assert 3 < plan.cores <= 64
