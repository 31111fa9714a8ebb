"""The launch model's price of the elementwise reader's run walks (lowering/families/mover_cost.py): runs copied out of
the staging window where they are not congruent with their CB slot (run_copies.py), a columns walk's segment fills
per core and their block reads at the banks, and the reader's work before its first tile kept beside the writer's
round trip."""
from __future__ import annotations

import pytest

from tt_backend.lowering.families import mover_cost
from tt_backend.lowering.families.run_copies import copied_share, split_share


def test_runs_are_copied_where_they_are_not_congruent_with_their_slot():
    # a[:, 16:80] of 48 x 80 fp32: every run starts 64 bytes into a 320-byte row and lands at 256 r in the slot
    assert copied_share(64, ((48, 80),), 16, 48 * 64, 4, 4, 16, True) == 0.0
    # a[5:2905]: one run 20 bytes off its slot
    assert copied_share(2900, (), 5, 2900, 4, 4, 16, True) == 1.0
    # a[:, 3:50] of 40 x 70: runs of 47 at 4 * (3 + 70 r) against 4 * 47 r in the slot, congruent every 16 runs
    share = copied_share(47, ((40, 70),), 3, 40 * 47, 4, 4, 16, True)
    assert 0.85 < share < 1.0
    # another element size than the tile's (bf16 in DRAM, fp32 tile): no direct reads at all
    assert copied_share(64, ((48, 80),), 16, 48 * 64, 2, 4, 32, False) == 1.0
    # each copied run of 47 words: five blocks of 8 and 7 words one by one
    runs = {"step": "4u", "copied": share, "run": 47}
    assert mover_cost.copy32_cycles(47) == 5 * mover_cost.COPY32_BLOCK + 7 * mover_cost.COPY32_TAIL
    assert mover_cost.run_copy_cycles(runs, "fp32", 1024) == share * 1024 / 47 * mover_cost.copy32_cycles(47)
    assert mover_cost.run_copy_cycles({**runs, "step": "2u"}, "fp32", 1024) == \
        share * 1024 * mover_cost.READ_PER_DATUM["contiguous convert"]      # bf16 widened datum by datum


def test_a_resident_runs_walk_pays_its_steps_and_copies_and_no_round_trip():
    # x[:, 2:8] + 1 of a resident 512 x 10: runs of 6, every one copied, none can go straight into the slot
    short = {"run": 6, "step": "4u", "copied": 1.0, "resident": True, "direct": True, "direct_min": 16}
    # (the run the tile's edge cuts steps twice; its two parts copy its 6 words)
    assert mover_cost.tile_read_cycles("runs", "fp32", short) == \
        (1024 / 6 + 1) * mover_cost.RUN_STEP["runs"] + 1024 / 6 * mover_cost.copy32_cycles(6)
    # runs of 32 can be long enough for a straight read: the compiled walk's dearer step
    long = {**short, "run": 32}
    assert mover_cost.tile_read_cycles("runs", "fp32", long) == 32 * (mover_cost.RUN_STEP["direct"]
                                                                       + mover_cost.copy32_cycles(32))
    # a buffer the window does not hold: the window check per run, and its reloads' wait
    far = mover_cost.tile_read_cycles("runs", "fp32", {**long, "resident": False, "span": 32768})
    assert far == mover_cost.tile_read_cycles("runs", "fp32", long) + 32 * mover_cost.RUN_WINDOW_CHECK \
        + mover_cost.NOC_ROUND_TRIP
    # runs read straight into the slot: a request each and the tile's one wait
    straight = mover_cost.tile_read_cycles("runs", "fp32", {**long, "copied": 0.0})
    assert straight == 32 * (mover_cost.RUN_STEP["direct"] + mover_cost.MM_NOC_REQUEST) \
        + mover_cost.NOC_ROUND_TRIP + 4096 / mover_cost.NOC_BYTES_PER_CYCLE
    # a broadcast of runs of 8: the step and a fill of 8 words one by one
    bcast = mover_cost.tile_read_cycles("broadcast", "fp32", {"run": 8, "resident": True, "head": None})
    assert bcast == 128 * (mover_cost.RUN_STEP["broadcast"] + 8 * mover_cost.FILL32_TAIL)


def test_the_readers_work_before_its_first_tile_is_kept_beside_the_writers_round_trip():
    reads = [("strided", "fp32", {"resident": True, "step": "8u", "run": 64}, 0.0)]
    write = ("contiguous", "fp32", 0.0)
    without = mover_cost.tile_pipeline_cycles(4, reads, write, 500.0)
    with_window = mover_cost.tile_pipeline_cycles(4, reads, write, 500.0, before=1000.0)
    assert with_window["total"] - without["total"] == 1000


def test_a_columns_walk_fills_each_column_once_per_core_and_its_blocks_go_to_the_banks():
    # a.T of a 256 x 128 fp32 buffer: runs of 256 datums 512 bytes apart, 960-byte segments, 32 KB block fills
    runs = {"run": 256, "column_bytes": 960, "column_block": 32768, "slots": 256, "stride": 128}
    one, one_bytes, _ = mover_cost.column_fill_cycles(runs, 4, 1, None)
    many, many_bytes, _ = mover_cost.column_fill_cycles(runs, 4, 32, None)
    assert one_bytes == many_bytes == 4 * 32768        # 64 columns per block, every column filled once
    # 128 rows, not 4: each column's segment copy from its first datum's line, 137 words against 13
    assert many - one == 256 * (mover_cost.copy32_cycles(137) - mover_cost.copy32_cycles(13))
    # rows that outgrow a segment fill the column again
    deep, deep_bytes, _ = mover_cost.column_fill_cycles(runs, 4, 64, None)
    assert deep_bytes == 2 * many_bytes and deep > 2 * one
    # the blocks of 32 cores reach the banks beside the tiles' bytes
    reads = [("columns", "fp32", {**runs, "resident": False}, 0.0)]
    write = ("contiguous", "fp32", 0.0)
    alone = mover_cost.grid_pipeline_cycles(32, reads, write, 400.0, 32, 8 * 1024)
    filled = mover_cost.grid_pipeline_cycles(32, reads, write, 400.0, 32, 8 * 1024, core_bytes=one_bytes)
    assert filled["bank"] == alone["bank"] + round(32 * one_bytes / mover_cost.DRAM_BYTES_PER_CYCLE)
    assert filled["total"] > alone["total"]


def test_halfword_runs_whose_parities_differ_are_copied_halfword_by_halfword():
    # -t[:, 2:66] and -t[:, 1:65] of a bf16 64 x 72: every run's parity agrees with its slot's, or none does;
    # -t[:, 1:40] of 37 x 45: runs of 39 (odd) from rows of 45 (odd), so the two parities flip together
    assert split_share(64, ((64, 72),), 2, 64 * 64) == 0.0
    assert split_share(64, ((64, 72),), 1, 64 * 64) == 1.0
    assert split_share(39, ((37, 45),), 1, 37 * 39) == 1.0
    runs = {"run": 64, "step": "2u", "copied": 1.0}
    words = mover_cost.run_copy_cycles({**runs, "split": 0.0}, "bf16", 1024)
    assert words == 16 * mover_cost.copy32_cycles(32)
    assert mover_cost.run_copy_cycles({**runs, "split": 1.0}, "bf16", 1024) == 1024 * mover_cost.COPY16_SPLIT


def test_bool_bytes_are_widened_and_narrowed_datum_by_datum():
    plain = mover_cost.tile_read_cycles("contiguous", "fp32")
    assert mover_cost.tile_read_cycles("contiguous bool", "fp32") - plain == 1024 * mover_cost.BOOL_PER_DATUM
    plain = mover_cost.tile_write_cycles("contiguous", "fp32", valid=0.5)
    assert mover_cost.tile_write_cycles("contiguous bool", "fp32", valid=0.5) - plain == 512 * mover_cost.BOOL_PER_DATUM


def test_segments_filled_without_blocks_are_not_copied_and_short_columns_walk_cheaply():
    # a.T of 3 x 4000: three columns, each filled by one NoC read straight into its segment
    runs = {"run": 3, "column_bytes": 10880, "column_block": 0, "slots": 3, "stride": 4000}
    cycles, nbytes, _ = mover_cost.column_fill_cycles(runs, 4, 1, None)
    assert cycles == 3 * 6 * 2 / 2 + 3 * (mover_cost.COLUMN_FILL_FIXED + mover_cost.MM_NOC_REQUEST
                                           + nbytes / 3 / mover_cost.NOC_BYTES_PER_CYCLE) + mover_cost.NOC_ROUND_TRIP
    # per datum: a column's set-up shared by its 341 datums of the tile, against 4 datums for runs of 256
    assert mover_cost.column_datum_cycles(3) < 3.25 < mover_cost.column_datum_cycles(256) == pytest.approx(10.6)


def test_runs_far_apart_reload_the_window_once_per_run():
    # a.permute(1, 0, 2) of 4 x 40 x 60: runs of 60 at a 9,600-byte step, span 0: each copied run its own NoC read
    dense = {"run": 60, "step": "4u", "copied": 1.0, "resident": False, "direct": True, "direct_min": 16,
             "span": 32768}
    sparse = {**dense, "span": 0}
    runs = 1024 / 60 + 1
    extra = runs * (mover_cost.MM_NOC_REQUEST + mover_cost.NOC_ROUND_TRIP) + 4096 / mover_cost.NOC_BYTES_PER_CYCLE
    assert mover_cost.tile_read_cycles("runs", "fp32", sparse) == pytest.approx(
        mover_cost.tile_read_cycles("runs", "fp32", dense) - mover_cost.NOC_ROUND_TRIP + extra)
    # a broadcast of one value per run, each from afar: a reload per run
    bcast = {"run": 50, "resident": False, "head": None, "span": 0}
    assert mover_cost.tile_read_cycles("broadcast", "fp32", bcast) > runs * mover_cost.NOC_ROUND_TRIP


def test_a_resident_strided_walk_pays_its_runs_steps():
    # runs of 64 move in blocks of four after one step; runs of 2 datum by datum after a cheap step
    assert mover_cost.strided_datum_cycles(64) == pytest.approx(3 + 34 / 64)
    assert mover_cost.strided_datum_cycles(2) == pytest.approx((3 + 2 * 11) / 2)
    resident = {"run": 4, "resident": True, "step": "8u"}
    assert mover_cost.tile_read_cycles("strided", "fp32", resident) == 1024 * (18 + 4 * 3) / 4


def _transpose_reads(dtype) -> list[tuple]:
    """The launch model's input streams of -a.T for a 64 x 600 buffer of `dtype` (a columns walk with block fills)."""
    from tinygrad import Tensor
    from tinygrad.uop.ops import Ops
    from tt_backend.lowering.select import lower
    a = Tensor.empty(64, 600, device="CPU", dtype=dtype)
    (call,) = [c for c in (-a.T).schedule_linear().src if c.op is Ops.CALL]
    return lower(call.src[0], "t")._reads()[0]


def test_a_bf16_tiles_halfwords_pay_their_zero_extension_in_the_walks():
    from tinygrad import dtypes
    (f32,), (bf16,) = _transpose_reads(dtypes.float32), _transpose_reads(dtypes.bfloat16)
    assert f32[0] == bf16[0] == "columns" and (f32[1], bf16[1]) == ("fp32", "bf16")
    assert bf16[3] - f32[3] == mover_cost.WALK_HALFWORD_PER_DATUM


def test_each_cores_first_column_fill_joins_the_start_burst():
    runs = {"run": 64, "column_bytes": 1024, "column_block": 32768, "slots": 64, "stride": 600, "resident": False}
    _, nbytes, first = mover_cost.column_fill_cycles(runs, 2, 1, None)
    assert first == 32768 < nbytes             # three blocks, the first read with the core's first tile
    _, _, first = mover_cost.column_fill_cycles({**runs, "column_block": 0}, 2, 1, None)
    assert first == 64 * (32 + 2 * 17)          # no blocks: every column's first segment at once
    reads = [("columns", "bf16", runs, 0.0)]
    write = ("contiguous", "fp32", 0.0)
    # one core: no other core's burst to wait for
    one = mover_cost.grid_pipeline_cycles(38, reads, write, 700.0, 1, 6 * 1024)
    assert one == mover_cost.grid_pipeline_cycles(38, reads, write, 700.0, 1, 6 * 1024, first_bytes=first)
    # every core's first block through the banks before the core served last has its data
    alone = mover_cost.grid_pipeline_cycles(38, reads, write, 700.0, 38, 6 * 1024)
    burst = mover_cost.grid_pipeline_cycles(38, reads, write, 700.0, 38, 6 * 1024, first_bytes=32768)
    rate = mover_cost.DRAM_BYTES_PER_CYCLE * mover_cost.DRAM_SUSTAINED_SHARE
    assert burst["total"] > alone["total"] + 0.9 * (38 * 32768 / rate - 32768 / mover_cost.NOC_BYTES_PER_CYCLE)


def test_on_a_grid_the_first_cores_whole_tiles_set_the_pace_of_a_walk():
    runs = {"run": 21, "stride": 50, "resident": True, "column_bytes": 0}
    reads, write = [("columns", "bf16", runs, 2.0)], ("contiguous", "fp32", 0.0)
    # 2 tiles, the second of 26 elements: the first core walks a whole tile's 1024 datums
    grid = mover_cost.grid_pipeline_cycles(2, reads, write, 700.0, 2, 6 * 1024, valid=1050 / 2048)
    assert grid["total"] == mover_cost.grid_pipeline_cycles(2, reads, write, 700.0, 2, 6 * 1024)["total"]
    # a bulk reader's partial tile zeroes its pads: the tiles' average share stays the price
    bulk = [("contiguous", "bf16", None, 0.0)]
    assert mover_cost.grid_pipeline_cycles(2, bulk, write, 700.0, 2, 6 * 1024, valid=0.5)["total"] > \
        mover_cost.grid_pipeline_cycles(2, bulk, write, 700.0, 2, 6 * 1024)["total"]


def test_a_columns_walk_is_priced_by_the_slowest_cores_tiles_blocks_and_partial_runs():
    # a.permute(2, 3, 0, 1) of 5 x 7 x 12 x 40: runs of 35, a block of whole runs stops where the outer 40 wraps
    tiles = mover_cost.column_walk_tiles(16800, 35, 40)
    block = mover_cost.COLUMN_BLOCK_PER_COLUMN * 35
    assert tiles[0] == block + 1015 * mover_cost.COLUMN_BLOCK_PER_DATUM + 9 * mover_cost.COLUMN_PARTIAL_PER_DATUM
    # tile 1 starts 9 datums into a run and crosses the wrap: two blocks and 26 + 18 partial datums
    assert tiles[1] == 2 * block + 980 * mover_cost.COLUMN_BLOCK_PER_DATUM + 44 * mover_cost.COLUMN_PARTIAL_PER_DATUM
    runs = {"run": 35, "last_size": 40}
    assert mover_cost.column_walk_cycles(runs, 16800, 17) == max(tiles)
    assert mover_cost.column_walk_cycles(runs, 16800, 1) == pytest.approx(sum(tiles) / len(tiles))
