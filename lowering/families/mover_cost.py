"""What a whole launch is predicted to take, in emulated cycles: the data movers (the reader on BRISC, the writer on
NCRISC) next to the compute threads the placement prices (lowering/placement/cost.py, per tile).

Reader, compute threads and writer run at the same time, coupled by circular buffers, so a launch takes the
pipeline's fill (the first tile through every stage; the FPU matmul's reader tilizes all of B before the first A
panel) and then the slowest stage per tile. The movers' costs are those of the generated RISC-V loops (templates
reader.c.j2 / writer.c.j2 and blocks/read_*, matmul_reader.c.j2 / blocks/tilize.c.j2, matmul_writer.c.j2 /
blocks/untilize.c.j2), measured on the emulator's cycle model (one cycle per RISC-V instruction, MMIO load latency,
NoC latency 2 x 5 NIU + 9 per hop + one 64-byte flit per cycle + 100 for DRAM: docs/performance.md) with
`python -m tt_backend bench kernels` and single-kernel runs under TT_DUMP (trace.json: each core's busy time). A
template change that makes a loop faster or slower changes its number here; the bench shows the drift.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from tt_backend.chip.interleave import N_BANKS
from tt_backend.lowering.families.index_cost import gated_math_cycles, index_math_cycles, inside_fraction
from tt_backend.lowering.index import grid
from tt_backend.lowering.placement.cost import pack_cycles, unpack_cycles
from tt_backend.lowering.plan import DTYPE_SIZE, TILE_BYTES, TILE_ELEMS, Stream

NOC_BYTES_PER_CYCLE = 64

# --- tile pipeline (elementwise): per tile of a stream, by the reader's / writer's mode -------------------------
# The NoC round trip of one request between a tile and the DRAM bank: two NIU passes of 5 cycles, 9 cycles per hop
# over the request's and the answer's routes (on the 17 x 12 torus a round trip is 17 + 12 = 29 hops unless the two
# share a row or column: chip/grid.py), and the DRAM's 100 cycles (docs/performance.md §6, §8)
NOC_ROUND_TRIP = 2 * 5 + 29 * 9 + 100
# what the round trip adds to the movers' figures below that were measured when the emulator's NoC charged one hop
# and no DRAM latency (2 x 5 + 9)
NOC_ROUND_TRIP_EXTRA = NOC_ROUND_TRIP - (2 * 5 + 9)
# a bulk tile read the reader waits for: the loop's own instructions and MMIO accesses (96 cycles, measured on the
# emulator when its NoC charged one hop and no DRAM latency) plus the round trip, plus one cycle per 64-byte flit
TILE_READ_FIXED = 96 + NOC_ROUND_TRIP
# a bulk tile write from the output CB slot, acked (78 cycles of the writer's own, measured alike)
TILE_WRITE_FIXED = 78 + NOC_ROUND_TRIP
# per datum, the modes that touch every datum on the RISC-V, measured as brisc busy time per datum on fp32 views: a
# buffer that fits the staging window is read once ("resident", 64x64: a.T 3.7, a.flip(1) 3.6), a larger one through
# window reloads (256x256: strided a.flip(1) 5.5, columns a.T 15.7); a gated gather (a pad) by its parts (GATHER_LOOP
# below). Bool bytes widened to words in place ("contiguous bool", read_contiguous.c.j2: a loop of 7 instructions per
# datum, brisc busy time of a bool cast of 5,000 on 5 cores 7,222 per 1,024 datums) and narrowed back by the writer
# (write_contiguous.c.j2, also 7: ncrisc 2,848 for the 400 datums of a uint32 -> bool cast) at BOOL_PER_DATUM. Not
# measured yet: computed streams and scatter writes (given UNMEASURED_PER_DATUM, which modes missing from the table
# take).
# A reduction's affine gather (lanes 1: 32 outputs' runs of k per tile, reader.c.j2 "red affine") over a buffer its
# window does not hold whole: 44.8 per datum (the softmax's exp-sum over x, 52.8K brisc cycles per tile both at
# 512 x 512, 256 tiles, and at 384 x 384, 144 tiles, less its max stream's 6.7 per slot as "red const" below; an older
# figure of 23 came from the 256 x 256 softmax, whose buffer is now resident and priced by reduce_walk_cycles).
# A reduction stream indexed by the output alone (softmax's max in its sum: tile_streams k_const) replicates one value
# per output cell: through the layout's datum table a loop of 6 instructions per slot (the table's halfword load, the
# address, the store: brisc.dis) and the cell's set-up, 6.7 per slot (brisc busy time of AdamW's r_2_4_4_2 with and
# without such a stream, 2 outputs of 32 over a 1-tile walk: 14,388 - 7,502 = 6,886 per tile; it was 2.5, the
# difference of two larger figures of the 256 x 256 softmax), with 32 lanes a word fill of the tile ("red fill",
# read_gather.c.j2 cell_const) 1.85 (64 x 1024 softmax sum: 2,420 cycles per tile, less the bulk read of x).
# Narrow integers and float16 ("contiguous convert") land in the slot's tail with one NoC read and are widened word by
# word in place: 8.1 per datum (brisc busy time of int8 x + 1 at 256 x 256), and the writer narrows them back before
# its write at 7.2 (ncrisc, the same kernel).
# The elementwise layout's per-datum gather (read_gather.c.j2 by_index) is priced by its parts: GATHER_LOOP per datum
# (the loop, the stream's window fetch, the store into the slot) and GATHER_PER_RANGE per iteration range (the ranges'
# carry and the index functions' arguments), plus the index math (stream_datum_cycles: integer ops one cycle each,
# index_cost.py). brisc busy time per element of padded float32 views read on one core (x.pad(...) + 1): 1-D 8192
# elements, 1 range, 4 integer ops: 19.2; 2-D 128 x 128, 2 ranges, 9 ops: 27.6; 3-D 4 x 32 x 32, 3 ranges, 11 ops:
# 33.2 -> 11.8 + 3.4 per range (the 3-D view from the other two: 33.0). Modes not measured take UNMEASURED_PER_DATUM,
# an older figure of the same gather on a 2-D pad before the index math was priced.
GATHER_LOOP, GATHER_PER_RANGE = 11.8, 3.4
UNMEASURED_PER_DATUM = 14.1
BOOL_PER_DATUM = 7.0
READ_PER_DATUM = {"contiguous": 0.0, "contiguous bool": BOOL_PER_DATUM, "contiguous convert": 8.1,
                  "red contiguous": 0.0, "red k run": 0.0,
                  "strided": 5.5, "columns": 15.7, "gather": GATHER_LOOP, "red affine": 44.8, "red const": 6.7,
                  "red fill": 1.85, "red mask": 8.5}
# a bulk reader's pads past the valid datums of a tile, zeroed (or set to datum 0) by word stores (read_contiguous.c.j2
# pad_fill): 1.4 per 32-bit word, brisc busy time of the softmax's row max over rows of 512 and 384 (one row per
# 32-lane tile: 512 and 640 pad words per tile, 818 and 1013 cycles per tile against 120 for the read).
# The validity mask of a sum whose pre-op is not zero at pads ("red mask", 32 lanes): 8.5 per datum, the 512 x 512
# softmax's exp-sum over rows of 512 (11.45K cycles per tile less x's bulk read and pads and the max's fill).
PAD_FILL_PER_WORD = 1.4
READ_PER_DATUM_RESIDENT = {"columns": 3.7}       # strided: strided_datum_cycles
WRITE_PER_DATUM = {"contiguous": 0.0, "contiguous bool": BOOL_PER_DATUM, "contiguous convert": 7.2,
                   "scatter": UNMEASURED_PER_DATUM}
# The per-datum movers of the elementwise layout (read_gather.c.j2 by_index / computed) walk all 1024 slots of a tile;
# a slot past the kernel's last element only stores 0 and steps the ranges: 7.3 cycles (brisc busy time of a 64-element
# padded gather, E_8_8: 8,632 cycles for 960 such slots and 64 elements at the 22 per datum of the same gather at
# 66 x 66). The bulk readers zero those slots by words instead (pad_fill_cycles). Past two ranges the compiled step
# of the ranges (args.h tt_iter_next) costs 4.6 more per slot and range: the same 64-element pad over 1 / 2 / 3 / 4
# ranges (E_64, E_8_8, E_2_8_4 and E_4_2_8, E_2_2_2_8; 960 such slots each) took 8,114 / 8,632 / 13,458 / 17,994.
GATHER_PAST_END_PER_SLOT, GATHER_PAST_END_PER_RANGE = 7.3, 4.6
# A gather whose index or validity loads from a buffer (x[idx], index_cost.py) compiles its slot past the end to more
# instructions: the zero is materialized per slot and the ranges stepped without branches (brisc.dis of r_3_8: 11
# instructions against E_8_8's 7); 9.2 cycles counted in x[idx]'s compiled loop (index_cost.py's calibration)
GATHER_LOADED_PAST_END_PER_SLOT = 9.2
# Runs and broadcasts move run by run (read_runs.c.j2 copy_run / broadcast_run; a run ends at its tile's edge): per
# run the walk's step (the run's length and address, the bounds check, the outer ranges' carry), then the copy out of
# the staging window or the fill of one fetched value; a buffer the window does not hold whole also checks the window
# per run (tt_window_span) and reloads it as the walk leaves it. Measured as brisc busy time per run on one core
# (TT_DUMP timelines, fp32, x[:, 2:n+2] + 1 over (2048 / n) x (n + 4) and x + b of (2048 / n) x n with b (2048 / n) x 1,
# 2 to 5 tiles, less a launch's ~400 cycles of set-up): a copied run's step 22 cycles (runs of 2 to 15: 18 .. 27),
# 58 where the run can be long enough for a straight NoC read (`direct` walks, run >= direct_min: the compiled loop
# keeps the direct path and spills registers around the copy; runs of 16 to 128: 57 .. 62); a broadcast's 20; not
# resident 7 more (runs of 6 and 3 over 40 KB: 29, broadcasts of 2 to 4 over 36 KB: 6 .. 8 more). The copy is tt_copy32
# (8 words per 8 loads, 8 stores and 3 loop instructions, then word by word: 5 each; a bf16 tile's halfwords in pairs
# where the run's DRAM address and its place in the slot agree in halfword parity, else tt_copy16's halfword loop,
# 4.5 a datum: -t[:, 1:65] of a bf16 64 x 72 on 4 cores, 5,935 brisc cycles per tile, against 2,671 for t[:, 2:66]),
# the fill tt_fill32 (16 stores and the loop per 16 words, 1.36 a word as measured, then 3 a word). Runs read straight
# into the CB slot (where congruent mod 64: run_copies.py) add a NoC request each and the tile's one wait.
RUN_STEP = {"runs": 22, "direct": 58, "broadcast": 20}
RUN_WINDOW_CHECK = 7
# Runs farther apart than a quarter window (tile_streams: span 0) reload the window with just the run's bytes each
# time: a NoC request and its round trip (a.permute(1, 0, 2) of 4 x 40 x 60, runs of 60 at a 9,600-byte step: per run
# ~47 cycles of the reload beside the copy, then 353 waiting)
COPY32_BLOCK, COPY32_TAIL, FILL32_BLOCK, FILL32_TAIL = 19, 5, 1.36 * 16, 3
COPY16_SPLIT = 4.5
# The older per-run figure of a broadcast read for the SFPU setup alone (head_broadcast: one fetch from a window read
# once): 74 + 0.15 per datum (b[0] broadcast over a 64x64 and a 256x256 when the NoC charged one hop)
READ_PER_RUN, READ_PER_RUN_DATUM = 74, 0.15
# A run of another element size than the tile's is converted datum by datum out of the window: the widening loop of
# "contiguous convert"
# A strided walk through a buffer larger than its staging window (read_runs.c.j2 strided_run, tt_noc.h tt_window_span)
# reloads the window whenever the next datum is outside it: `span` bytes from the datum on (dense walks) or just the
# datum (span 0), one NoC read waited for. A run of `run` datums `step` bytes apart spans run * step bytes, so it
# takes ceil(run * step / span) loads, and the next run (the walk back near its start) begins with a load of its own
# unless several runs fit one window. a[:, ::2].T of a 60 x 300 fp32 (E_150_60, runs of 60 datums 1,200 bytes apart):
# 17 runs of 3 loads per tile, each the loop, the round trip and 512 flits, about 1,000 cycles
WINDOW_RELOAD_FIXED = TILE_READ_FIXED
# The per-datum figures above were measured on float32 and int8 streams whose index math is integer. What a stream
# adds to them (stream_datum_cycles): its index math (index_cost.py: soft float, loaded indices) in the modes that
# evaluate it per datum, and the float16 conversion (templates/device/tt_convert.h) in every mode that converts per
# datum: widening a float16 normal takes 11 cycles more than the int8 sign extension of the measured 8.1, and
# narrowing one 18 more than int8's truncation, as compiled in the movers (brisc / ncrisc busy time on one core,
# 64 x 64: h.float() * 2 of float16 19.1 a datum against int8's 8.1; (x * 2).cast(float16) 25.2 against int8's 7.1;
# the conversions alone, a loop of 512 against the same loop without them, gcc -O2 -march=rv32im, counted 8 - 2 and
# 17.5 - 1; other values below). The run walks (strided, columns and runs'
# converting copies) convert every datum too: a narrow integer's sign extension 2 beyond the float32 walk
# (WALK_WIDEN_PER_DATUM: h.float().T * 2 of int8 and int16 64 x 64, strided, 5.6 a datum against 3.6), float16's 11
# beyond that (16.6). A bf16 tile's halfwords are moved as compiled from `(uint32_t)TT_L1_U16(p)` into a
# `(uint16_t)` store: each load is followed by a redundant zero extension (sll, srl; brisc.dis of -a.T of a bf16
# 64 x 600: 19 instructions per block of four datums against fp32's 11), WALK_HALFWORD_PER_DATUM beyond the float32
# walk (one core, 4 tiles, brisc instructions bf16 against fp32: a.T of 8 x 512 and 40 x 100 columns, 64 x 64
# strided: 1.97, 1.89, 1.94 a datum)
DATUM_EXTRA_MODES = ("gather", "computed", "scatter", "contiguous convert", "strided", "columns", "runs")
# The widening (tt_convert.h) takes one path for zeros, denormals and normals alike (Zbb clz: 19 a datum in the bulk
# reader's loop, as normals took before, where a denormal took 21 + 5 per normalising shift), infinities and NaNs a
# shorter one (16, not priced); the narrowing's denormals, infinities and NaNs take other paths, not priced.
FLOAT16_WIDEN_EXTRA, FLOAT16_NARROW_EXTRA = 11, 18
WALK_WIDEN_PER_DATUM = 2
WALK_HALFWORD_PER_DATUM = 2
# modes that read a tile with one NoC transaction
BULK_READS = ("contiguous", "contiguous bool", "contiguous convert", "red contiguous", "red k run")
PER_SLOT_READS = ("gather", "computed")     # modes whose loop walks every slot of the tile, past the last element too
RUN_WALKS = ("strided", "columns")  # walks of read_runs.c.j2 that zero the slots past the last element by words


def tile_read_cycles(mode: str, tile_format: str, runs: dict | None = None, datum_extra: float = 0.0,
                     ranges: int = 0, loaded: bool = False, *, valid: float = 1.0) -> float:
    """Reader cycles per tile of one input stream: mode and run structure as tile_streams.stream_ctx gives them;
    `datum_extra`: what the stream adds per datum to a mode that touches every datum (DATUM_EXTRA_MODES) beyond the
    mode's own figure (stream_datum_cycles); `ranges`: the kernel's iteration ranges (the per-slot walks' step);
    `loaded`: a per-slot walk whose index math loads from a buffer; `valid`: the share of the tile's slots that hold
    elements (the elementwise layout's partial last tile: the rest is zeroed)."""
    datums, past_end = valid * TILE_ELEMS, (1 - valid) * TILE_ELEMS
    past_end_slot = ((GATHER_LOADED_PAST_END_PER_SLOT if loaded else GATHER_PAST_END_PER_SLOT)
                     + GATHER_PAST_END_PER_RANGE * max(0, ranges - 2))
    bulk = (TILE_READ_FIXED + TILE_BYTES[tile_format] / NOC_BYTES_PER_CYCLE + pad_fill_cycles(past_end, tile_format)
            if mode in BULK_READS else past_end_slot * past_end if mode in PER_SLOT_READS
            else pad_fill_cycles(past_end, tile_format) if mode in RUN_WALKS else 0)
    if head_broadcast(mode, runs):     # one fetch, the datums the SFPU setup reads
        return READ_PER_RUN + NOC_ROUND_TRIP + READ_PER_RUN_DATUM * runs["head"]
    if mode in ("runs", "broadcast"):       # the tile's runs up to its last element, the rest zeroed by words
        return (run_walk_cycles(mode, runs, tile_format, datums) + pad_fill_cycles(past_end, tile_format)
                + (datum_extra * datums if mode == "runs" else 0))
    table = READ_PER_DATUM_RESIDENT if runs is not None and runs["resident"] else READ_PER_DATUM
    reloads = window_reload_cycles(runs, datums) if mode == "strided" and not runs["resident"] else 0
    per_datum = table.get(mode, READ_PER_DATUM.get(mode, UNMEASURED_PER_DATUM))
    if mode == "columns" and runs.get("column_bytes"):     # the walk through segments; their fills are per core
        per_datum = (runs["walk_cycles"] / datums if runs.get("walk_cycles") is not None
                     else column_datum_cycles(runs["run"]))
    elif mode == "strided" and runs["resident"]:
        per_datum = strided_datum_cycles(runs["run"])
    return bulk + reloads + (per_datum + (datum_extra if mode in DATUM_EXTRA_MODES else 0)) * datums


# A strided walk over a resident buffer (read_runs.c.j2 strided_run) moves a run's datums four at a time (4 loads, 4
# stores and the loop: 3 a datum) and the rest one by one, 11 a datum as compiled, after the run's step: 34 cycles,
# 18 for runs of 4 to 7 (at most one block), 3 for runs of 2 and 3 (no block). Brisc busy time of x[:, 1::2] * 2 over
# (2048 / n) x (2n + 1), one core, 2 tiles, runs of n = 2, 3, 4, 8, 16, 32, 64: 12.5, 12.0, 7.5, 7.3, 5.3, 4.1, 3.6
# cycles a datum (a.flip(1) of 64 x 64, runs of 64: 3.6)
STRIDED_BLOCK_PER_DATUM, STRIDED_TAIL_PER_DATUM = 3, 11
STRIDED_STEP = ((8, 34), (4, 18), (0, 3))          # (shortest run, step)


def strided_datum_cycles(run: int) -> float:
    """Per datum, a resident strided walk's runs of `run` (STRIDED_STEP and the datums' moves)."""
    run = max(1, min(run, TILE_ELEMS))
    step = next(cycles for least, cycles in STRIDED_STEP if run >= least)
    blocks = run // 4 * 4
    return (step + STRIDED_BLOCK_PER_DATUM * blocks + STRIDED_TAIL_PER_DATUM * (run - blocks)) / run


# A columns walk through segments (tile_streams.py RUN_MODES, read_runs.c.j2 column_segments) pays, per core, for
# every column its tiles touch a segment fill each time the walk leaves the segment (the test over the columns from the
# missing one up, the copy of the segment's bytes: tt_copy32), the fills' NoC reads (a block of COLUMN_BLOCK_BYTES
# read into the bounce area per run of columns it reaches, or one read per column, all waited for once) and the
# segment table's set-up (two words per slot); per datum, the walk: a block of whole runs copies column by column
# out of the segments, a partial run (every datum of a tile in another column: runs of a tile or more) goes datum
# by datum through the column's hit test. Measured as brisc busy time (TT_DUMP timelines): a.T of 256 x 128 fp32 on
# 1, 4, 8 cores (32, 8, 4 tiles a core, every tile 4 rows of the 256 columns): 13.45K cycles per tile beyond a
# core's 22.9K; less the copy of each datum's word into its segment, 10.6 per datum; the fixed part less the table
# (6 per slot: 1,748 for 256) and the four 32 KB block reads (892 each), 68 per column fill with its ~12 words
# (45 beside the copy). (a.T of 1100 x 150 on 81 cores, 2 tiles a core through 1024 columns: 148K instructions
# less its 1,024 fills and the table, 33 per datum of the datum-by-datum walk.) The block's 10.6 per datum is its
# columns' set-up and their datums' copies: a.T of 3 x 4000 and of 6 x 3000 (runs of 3 and 6, 341 and 170 datums of
# each column per tile, one tile on each of 12 and 18 cores) walked their tile in 3,325 and 3,224 cycles, 3.1 a datum,
# so each of the 256 columns of a tile of the 256 x 128 took 30 besides its 4 datums. Segments filled without blocks
# are NoC reads straight into the segment: no copy.
COLUMN_TABLE_PER_SLOT, COLUMN_FILL_FIXED = 6, 45
COLUMN_BLOCK_PER_DATUM, COLUMN_BLOCK_PER_COLUMN, COLUMN_PARTIAL_PER_DATUM = 3.1, 30, 33


def column_datum_cycles(run: int) -> float:
    """Per datum of a tile, the columns walk through segments for runs of `run` (COLUMN_BLOCK_PER_DATUM and a share
    of COLUMN_BLOCK_PER_COLUMN for the tile's whole runs, COLUMN_PARTIAL_PER_DATUM for the rest)."""
    whole = (TILE_ELEMS // run) * run / TILE_ELEMS if run < TILE_ELEMS else 0.0
    block = COLUMN_BLOCK_PER_DATUM + COLUMN_BLOCK_PER_COLUMN * run / TILE_ELEMS
    return whole * block + (1 - whole) * COLUMN_PARTIAL_PER_DATUM


# Where a tile's runs do not line up with its edges, or cross the end of the last outer range (a block of whole runs
# stops there: `room`), the walk of that tile pays more partial runs datum by datum and more blocks, each block the
# set-up of every column. Which tiles do is replayed on the host (column_walk_tiles) and the slowest core's tiles
# priced (column_walk_cycles): a.permute(2, 3, 0, 1) of 5 x 7 x 12 x 40 on 17 cores (runs of 35, the last outer range
# 40) walked one block and 9 partial datums per tile in 10.7K .. 12.0K brisc instructions, two blocks and 44 partial
# datums in 12.7K .. 14.6K (TT_DUMP per-core counts)
@functools.lru_cache(maxsize=64)
def column_walk_tiles(n_elements: int, run: int, last_size: int) -> tuple[float, ...]:
    """Per tile, the columns walk's cycles by its parts (read_runs.c.j2 columns_run): partial runs datum by datum
    (COLUMN_PARTIAL_PER_DATUM), blocks of whole runs up to the last outer range's end (per block COLUMN_BLOCK_PER_COLUMN
    for each of the run's columns, COLUMN_BLOCK_PER_DATUM per datum)."""
    out = []
    for e in range(0, n_elements, TILE_ELEMS):
        end, o = min(n_elements, e + TILE_ELEMS), e // run
        q, cycles = e - o * run, 0.0
        while e < end:
            if q or end - e < run:
                k = min(run - q, end - e)
                cycles += COLUMN_PARTIAL_PER_DATUM * k
                e, q, o = e + k, 0, o + 1
                continue
            nb = min((end - e) // run, last_size - o % last_size)
            cycles += COLUMN_BLOCK_PER_COLUMN * run + COLUMN_BLOCK_PER_DATUM * nb * run
            e, o = e + nb * run, o + nb
        out.append(cycles)
    return tuple(out)


def column_walk_cycles(runs: dict, n_elements: int, cores: int) -> float:
    """Per tile, the columns walk of the slowest core's tiles (column_walk_tiles over each core's range)."""
    tiles = column_walk_tiles(n_elements, runs["run"], runs["last_size"])
    per_core = -(-len(tiles) // cores)
    return max(sum(tiles[b:e]) for b, e in split_ranges(len(tiles), cores)) / per_core


def column_fill_cycles(runs: dict, esz: int, tiles: int, grid_rows: int | None) -> tuple[float, float, float]:
    """(reader cycles, DRAM bytes, the bytes of the first fill) of one core's segment fills of a columns walk through
    segments over `tiles` tiles (the launch model's per-core work before its tiles; grid_rows: the rows of the walk
    down grid columns, tile_streams.tile_grid, or None). The first fill is issued with the core's first tile: one
    block, or every column's first segment (all of the first row's misses, waited for at once)."""
    run, seg, step = runs["run"], runs["column_bytes"], abs(runs["stride"]) * esz
    if run < TILE_ELEMS:                    # every tile holds rows of every column
        columns = run
    elif grid_rows:                         # a core's tiles down a grid column share its tiles' columns
        columns = min(run, TILE_ELEMS * -(-tiles // grid_rows))
    else:
        columns = min(run, TILE_ELEMS * tiles)
    rows = tiles * TILE_ELEMS / columns       # the rows of each column the core reads
    per_column = max(1, math.ceil((esz * (rows + 1) + 32) / seg))
    fills = columns * per_column
    nbytes = min(seg, 32 + esz * (rows / per_column + 1))     # a fill's copy, from the line of its first datum
    copy = copy32_cycles(nbytes / 4) if runs["column_block"] else 0     # tt_copy32 of the segment's words
    cycles = COLUMN_TABLE_PER_SLOT * runs["slots"] + fills * (COLUMN_FILL_FIXED + copy)
    if runs["column_block"]:                # a block read per run of columns it reaches
        block = runs["column_block"]
        loads = fills / max(1, block // max(1, step))
        return cycles + loads * (NOC_ROUND_TRIP + block / NOC_BYTES_PER_CYCLE), loads * block, min(loads, 1) * block
    return (cycles + fills * (MM_NOC_REQUEST + nbytes / NOC_BYTES_PER_CYCLE) + per_column * NOC_ROUND_TRIP,
            fills * nbytes, columns * nbytes)


def copy32_cycles(words: float) -> float:
    """tt_copy32 of `words` words (COPY32_BLOCK per 8, COPY32_TAIL per word left)."""
    blocks = words // 8
    return COPY32_BLOCK * blocks + COPY32_TAIL * (words - 8 * blocks)


def fill32_cycles(words: float) -> float:
    """tt_fill32 of `words` words (FILL32_BLOCK per 16, FILL32_TAIL per word left)."""
    blocks = words // 16
    return FILL32_BLOCK * blocks + FILL32_TAIL * (words - 16 * blocks)


def run_walk_cycles(mode: str, runs: dict, tile_format: str, datums: float) -> float:
    """A runs or broadcast walk's cycles for the `datums` datums of a tile (RUN_STEP): per run the step, the copy
    (run_copy_cycles) or the fill, the window checks of a buffer not resident; runs read straight into the slot a NoC
    request each and the tile's one wait, a walk that is not resident the wait of its window reloads: once per tile
    where the window is reloaded a full span ahead, once per run it reads from the window where the runs lie farther
    apart than a quarter window (span 0: each reload brings just the run's bytes: a NoC request and the round trip)."""
    run = max(1, min(runs["run"], TILE_ELEMS))
    n_runs = datums / run + (1 if TILE_ELEMS % run else 0)       # the runs the tile's edges cut count twice
    tsz = TILE_BYTES[tile_format] // TILE_ELEMS
    direct = runs.get("direct") and runs["run"] >= runs["direct_min"]
    step = RUN_STEP["broadcast" if mode == "broadcast" else "direct" if direct else "runs"]
    waits = 0 if runs.get("resident") else NOC_ROUND_TRIP
    step += RUN_WINDOW_CHECK if waits else 0
    sparse = bool(waits) and not runs.get("span")
    reload = MM_NOC_REQUEST + NOC_ROUND_TRIP
    if mode == "broadcast":
        if sparse:
            return n_runs * (step + fill32_cycles(datums / n_runs * tsz / 4) + reload)
        return n_runs * (step + fill32_cycles(datums / n_runs * tsz / 4)) + waits
    straight = 1 - runs["copied"]                 # the share of datums read straight into the slot
    reads = (NOC_ROUND_TRIP + straight * (n_runs * MM_NOC_REQUEST + datums * tsz / NOC_BYTES_PER_CYCLE)
             if straight > 0 else 0)
    if sparse:               # every copied run its own reload, its bytes at 64 a cycle
        waits = runs["copied"] * (n_runs * reload + datums * tsz / NOC_BYTES_PER_CYCLE)
        return n_runs * step + waits + reads + run_copy_cycles(runs, tile_format, datums)
    return n_runs * step + max(waits, reads) + run_copy_cycles(runs, tile_format, datums)


def run_copy_cycles(runs: dict | None, tile_format: str, datums: float) -> float:
    """A runs walk's copies out of its window for `datums` datums of a tile: tt_copy32 of each run's words where the
    DRAM and tile element sizes agree (copy32_cycles; halfwords of differing parity COPY16_SPLIT each), else the
    converting loop per datum."""
    if not runs or not runs.get("copied"):
        return 0.0
    esz, tsz = int(runs["step"][:-1]), TILE_BYTES[tile_format] // TILE_ELEMS     # a run's step is one element
    if esz != tsz:
        return runs["copied"] * datums * READ_PER_DATUM["contiguous convert"]
    run, split = max(1, min(runs["run"], TILE_ELEMS)), runs.get("split", 0.0)
    return (runs["copied"] - split) * datums / run * copy32_cycles(run * tsz / 4) + split * datums * COPY16_SPLIT


def stream_datum_cycles(s: Stream, writer: bool = False, gather_ranges: int | None = None,
                        inlined: frozenset[int] = frozenset()) -> float:
    """Cycles per datum stream `s` adds to its mover's mode figure (DATUM_EXTRA_MODES): its index math and its float16
    conversion; for the elementwise gather (`gather_ranges`: the kernel's iteration ranges) also the ranges and the
    integer index math (GATHER_LOOP), which the other modes' figures hold; `inlined`: the index loaders the mover's
    compiler inlines (index_cost.inlined_loads)."""
    exprs = [s.index, s.valid] if writer else [s.index, s.valid, s.value]
    convert = (FLOAT16_NARROW_EXTRA if writer else FLOAT16_WIDEN_EXTRA) if s.dtype == "float16" else 0
    walk = 0.0 if gather_ranges is None else GATHER_PER_RANGE * gather_ranges
    return index_math_cycles(exprs, integer=gather_ranges is not None, inlined=inlined) + convert + walk


def gather_reload_cycles(loads: int, moved: int) -> float:
    """A per-datum gather's window reloads (window_walk.tile_window_loads): each the loop and the waited round trip,
    and its bytes at 64 per cycle."""
    return loads * WINDOW_RELOAD_FIXED + moved / NOC_BYTES_PER_CYCLE


def window_reload_cycles(runs: dict, datums: float) -> float:
    """A strided walk's staging-window loads for `datums` datums of its runs (tile_streams._affine_runs' `runs`)."""
    step = int(runs["step"][:-1])                  # the C literal of the u32 byte step (negative walks wrap)
    step = min(step, (1 << 32) - step)
    span = runs["span"]
    load = WINDOW_RELOAD_FIXED + max(span, 1) / NOC_BYTES_PER_CYCLE
    if not span:                                   # sparse: every datum its own load
        return datums * load
    per_run = runs["run"] * step / span
    return datums / runs["run"] * (math.ceil(per_run) if per_run > 1 else per_run) * load



# --- reduction readers: per tile of the reduction layout, the reduce indices walked output by output -------------
# A gathered buffer up to l1.MAX_RESIDENT_WINDOW is read into its staging window once (l1.grow_window: the launch's
# fill, `window_load_cycles`) and then addressed directly. Measured brisc busy time per datum slot of a tile (fp32,
# one core, TT_DUMP measured_cycles) with resident windows:
#   * the SFPU reduction's affine walk ("red affine", read_gather.c.j2 reduce_affine) by its parts: every slot of the
#     tile a store (5.7), a datum its load and the carry chain's step besides (7.9: x.sum(1) of 64 x 512, every slot
#     a datum, 13.6 per slot; 32 x 700, 8.1); per output cell a tile visits, tt_red_set's remainder and division by a
#     constant per range of the kernel (5 per range: the sums of 120 outputs of 6 over 2, 3, 4 and 5 ranges, 12,880 /
#     13,461 / 13,944 / 14,674) and the index's first value and the loop's set-up (5); where pads read the output's
#     element 0 (max: pad_read) and the tile has pads, 32 per output for that read (max against sum of the same
#     120 x 6 and 2 x 6 x 10 x 6: 3,798 and 3,902 more). The set-up's 5 is the one figure fitted, on 30 reductions
#     of 2 to 5 ranges and 1 to 22 tiles (x.sum / x.max over one axis of 2 x 3 x 5 x 7, 6 x 10 x 12, 4 x 5 x 6 x 7,
#     2 x 3 x 4 x 5 x 6, 120 x 3 .. 128 x 20, 32 x 700): their readers predicted within 0.93 .. 1.12 (without the
#     outputs' costs 0.61 .. 1.05). All of them had at least 8 reduce slots per output cell; with fewer (RED_STEPS 2
#     or 4, lanes 1: short reductions over many outputs) the compiler unrolls the cell's loops and neither these
#     figures nor the older ones fit (brisc busy per tile of 256 cells: 8,625 for x.sum(0) of 2 x 256, 15,020 for
#     3 x 256): such walks keep the slot and datum figures alone (RED_WALK_MIN_SLOTS). The other modes keep the tile
#     pipeline's per-datum figures (READ_PER_DATUM);
#   * the FPU sum's tilizing reader (templates/blocks/tilize.c.j2 `reduction`): a 32-element line of the tile whose
#     data goes to SrcB is two straight 16-element copies when it is full (5.6 per slot: x.sum(1) 64x512, 256x256)
#     or zeros when it is past the outputs or K (2.5: 4096-long sum, one line per tile), else (a partial line, data
#     to SrcA) slot by slot with the face index computed per element (15.5; SrcA 15.9: x.sum(1) 64x512 HiFi2);
#     per-datum gathers (index math per slot) 30.2 (x.sum(0) 64x512), 25.4 (x.T.sum(1) 300x40, 59 % datums) -> 30.
RED_WALK_PER_SLOT, RED_WALK_PER_DATUM = 5.7, 7.9
RED_WALK_PER_OUTPUT, RED_WALK_PER_RANGE, RED_WALK_PAD_READ = 5, 5, 32
RED_WALK_MIN_SLOTS = 8            # reduce slots per output cell (steps x lanes) the output figures were measured at
FPU_REDUCE_READ_PER_SLOT = {"full line": 5.6, "empty line": 2.5, "line": 15.5, "srca": 15.9, "gather": 30.0}
# the FPU sum's reader writes the ones tile first (1024 stores and the loop: about 3 per datum), before any tile
FPU_REDUCE_ONES = 3 * TILE_ELEMS


# The reduction layout's per-datum walks (tile_streams: "red gather", "red computed": a carry chain over the ranges,
# the index, gate or value evaluated per datum; "... nested": nested loops, the index's terms hoisted to the loop
# they depend on) per datum beside the stream's integer index math, and per slot past the outputs' reduce indices a
# stored zero (the elementwise gather's GATHER_PAST_END_PER_SLOT). The carry chain's math is priced as far as the C
# gets (red_datum_math_cycles, branch predB): a gather's validity is a `&&` chain and its index and window fetch sit
# behind it (read_gather.c.j2 reduce_by_index), a convolution gradient's computed mask is a `&&` chain too, so a term
# is priced where the terms before it held (conv3d's weight gradient: its first term, a modulo, holds for half the
# datums; 11 % of them inside). The computed walk keeps the figure measured with every op priced (GATHER_LOOP +
# GATHER_PER_RANGE, measured on the pad-sum x.pad().T.sum(1) over 1500 x 4 when every op was priced: 18,222 brisc busy
# per tile; one figure for both modes took argmax's reversed index, a computed value with no conjunction, from 1.07 to
# 1.26). The nested walks: the same pad-sum over 30 x 20 (9,607 per tile: 10.1 per datum beside its pad slots, less
# its 6 ops), x.argmax()'s reversed index over 1,000 elements (5.6 per datum, its pass's tile less x's resident walk,
# less its 2 ops).
# The gather by its parts (branch predConv), measured on reductions built for it, x.pad(((0, 0), (2, 2))).T.sum(1) of
# 1536 x 4 and 1536 x 12 (6 tiles of 256 reduce slots per output, 8 and 16 outputs: no empty cell, no slot past K;
# 50 % and 75 % inside) and of 3072 x 4 and 3072 x 12, one core, every brisc block's executions counted
# (TT_RV32_NATIVE=0, TT_DUMP brisc.dis): per datum 13 or 14 instructions on every path (the datum table's halfword,
# the slot's address, the store, the range step and its carry, the loop test with the validity's branch), where the
# validity holds the index and tt_window_fetch (RED_GATHER_FETCH 11, as in the SFPU matmul's readers: the byte offset,
# the bounds and window checks, the L1 address, the load), where it does not v = 0 and a jump (GATED_OFF 2).
# RED_GATHER_LOOP is brisc busy time per datum less the priced fetch, zeros and index math: 10.1, 11.7, 11.1, 11.5 in
# the four (the math prices a validity's `(r < 2) != 1` as two ops where gcc tests the range with one branch), 11.
# The flat figure it replaces, 25.7 with the math, had been fitted on multi-core launches whose slowest core holds
# more datums, or more of them inside, than the average share the model gave every core (sum_pad_long on 3 cores:
# 6,000 against 4,500; a conv gradient's outputs at the image's edges have fewer inside), so it took in that share: on
# one core it priced sum_pad_long 1.33 and conv2d_relu's gradient 1.23 of emulated (now 1.02, 0.98). The carry-chain
# walks are now priced on their slowest core's groups (sfpu_reduce.datum_walk_cycles).
RED_GATHER_LOOP, RED_GATHER_FETCH, GATED_OFF = 11, 11, 2
RED_PER_DATUM = {"red gather": RED_GATHER_LOOP, "red computed": GATHER_LOOP + GATHER_PER_RANGE,
                 "red gather nested": 10.1 - 6, "red computed nested": 5.6 - 2}


def red_datum_read_cycles(mode: str, valid: float, datum_extra: float) -> float:
    """A per-datum reduction stream's reader cycles per tile (RED_PER_DATUM): `valid` of its slots datums, each with
    `datum_extra` (its index math, stream_datum_cycles), the others zeroed."""
    return ((RED_PER_DATUM[mode] + datum_extra) * valid + GATHER_PAST_END_PER_SLOT * (1 - valid)) * TILE_ELEMS


# the iteration points a reduction gather's gated index math is averaged over: the whole space up to this many, else
# this many drawn uniformly (a fixed seed: the prediction is deterministic)
RED_GATED_POINTS = 1 << 16
RED_GATED_CORE_POINTS = 1 << 12     # the same over one core's outputs (sfpu_reduce.datum_walk_cycles, every core)


def red_datum_math_cycles(s: Stream, ranges: tuple[int, ...], points: tuple[int, int] | None = None) -> float:
    """Per datum, what a "red gather" or "red computed" stream adds to RED_PER_DATUM, averaged over the kernel's
    iteration space, or over its points [start, stop) in row-major order (`points`: a core's outputs, the outermost
    ranges) (index_cost.gated_math_cycles): a gather's validity tested term by term (C's `&&`), its index
    computed and its element fetched only where the validity holds, a zero stored where not (read_gather.c.j2
    reduce_by_index); a computed value that is a
    conjunction (a convolution gradient's mask) evaluated up to its first false term; and a float16 conversion. An
    expression that loads from a buffer (x[idx].sum()) has values the host cannot evaluate: priced as every other
    per-datum stream (stream_datum_cycles), a gather's fetch for every datum."""
    if any(e is not None and e.loads() for e in (s.index, s.valid, s.value)):
        return stream_datum_cycles(s, gather_ranges=0) + (RED_GATHER_FETCH if s.value is None else 0)
    if points is not None:
        start, stop = points
        flat = (np.arange(start, stop) if stop - start <= RED_GATED_CORE_POINTS
                else np.random.default_rng(0).integers(start, stop, RED_GATED_CORE_POINTS))
        axes = list(np.unravel_index(flat, ranges))
    elif math.prod(ranges) <= RED_GATED_POINTS:
        axes = list(grid(ranges))
    else:
        rng = np.random.default_rng(0)
        axes = [rng.integers(0, n, RED_GATED_POINTS) for n in ranges]
    if s.value is not None:
        math_cycles = gated_math_cycles(None, s.value, axes)
    else:
        inside = inside_fraction(s.valid, axes)
        math_cycles = (gated_math_cycles(s.index, s.valid, axes) + inside * RED_GATHER_FETCH
                       + (1 - inside) * GATED_OFF)
    return math_cycles + (FLOAT16_WIDEN_EXTRA if s.dtype == "float16" else 0)


def pad_fill_cycles(pads: float, tile_format: str) -> float:
    """A bulk reader's fill of `pads` datums of a tile (whole 32-bit words: two bf16 datums each)."""
    return PAD_FILL_PER_WORD * pads * TILE_BYTES[tile_format] / (4 * TILE_ELEMS)


def window_load_cycles(nbytes: int) -> float:
    """A staging window that holds its buffer whole, read once: one NoC read waited for."""
    return NOC_ROUND_TRIP + nbytes / NOC_BYTES_PER_CYCLE


def reduce_walk_cycles(valid_fraction: float, outputs: float = 0.0, ranges: int = 0, pad_reads: float = 0.0) -> float:
    """The SFPU reduction reader's affine walk over a resident buffer, per tile: `valid_fraction` of its slots are
    datums, the others pads; `outputs` output cells set up over the kernel's `ranges` ranges, `pad_reads` of them
    reading their element 0 for the pads."""
    return ((RED_WALK_PER_SLOT + RED_WALK_PER_DATUM * valid_fraction) * TILE_ELEMS
            + (RED_WALK_PER_OUTPUT + RED_WALK_PER_RANGE * ranges) * outputs + RED_WALK_PAD_READ * pad_reads)

def tile_write_cycles(mode: str, tile_format: str, datum_extra: float = 0.0, *, valid: float = 1.0) -> float:
    """Writer cycles per tile of the output stream; `datum_extra` and `valid` as in tile_read_cycles (only elements
    are written)."""
    bulk = TILE_WRITE_FIXED + TILE_BYTES[tile_format] / NOC_BYTES_PER_CYCLE if mode.startswith("contiguous") else 0
    per_datum = WRITE_PER_DATUM.get(mode, WRITE_PER_DATUM["scatter"])
    return bulk + (per_datum + (datum_extra if mode in DATUM_EXTRA_MODES else 0)) * valid * TILE_ELEMS


# The reduction's writer per output (templates/blocks/scatter.c.j2 red_scatter_out: the output's datum in the tile,
# its ranges from the output index (tt_red_set), the element's address and store): ncrisc busy time of
# x.max(axis) over a 2 x 3 x 5 x 7 fp32, one tile: 1,155 for 30 outputs (axis 3), 3,362 for 70 (axis 1), 5,007 for
# 105 (axis 0): 38.5, 48, 47.7 per output
RED_SCATTER_PER_OUTPUT = 45


def group_write_cycles(outputs: int) -> float:
    """A reduction's writer per output group: its `outputs` values scattered (red_scatter_out), one acked NoC
    write."""
    return TILE_WRITE_FIXED + RED_SCATTER_PER_OUTPUT * outputs


# The fused reduction's scattered output ("red out", templates/blocks/scatter.c.j2 with the `ring` staging: each run's
# NoC write issued and not waited for, the NIU's shared fields set once), ncrisc busy + MMIO-stall time per output
# group (TT_DUMP trace.json, fp32, one group per core, less a launch's ~180 cycles of set-up):
#   * an index that does not step by a constant per k (fused_out): per datum its ranges (tt_red_set), address, bounds
#     check and staging store 26.1 (RMSNorm over 3 x 701 written row-major by this path: one run), per run one NoC
#     write 90 (r_2_4_4_2_2_3_3 of a conv-transpose gradient: 32 single-datum runs, 116 per datum); a bf16 output 2
#     more per datum;
#   * stepping by 1 (fused_affine run_copy): tt_copy32 of the datums (copy32_cycles; bf16 halfwords of differing
#     parity COPY16_SPLIT) and 120 per tile (its first address, the run's extension or write): 3 x 701 1,761 for one
#     tile, 2 x 2501 6,327 for three;
#   * stepping by another constant (fused_affine run_one: each datum a NoC write of its own): 34.4 per datum (RMSNorm
#     written transposed: 3 x 700 34.5, 2 x 1500 34.3, 5 x 333 35.0)
RED_OUT_PER_DATUM, RED_OUT_PER_RUN, RED_OUT_NARROW = 26.1, 90.0, 2.0
RED_OUT_COPY_TILE, RED_OUT_ONE = 120.0, 34.4


def red_out_cycles(step: int | None, datums: int, runs: int, tiles: int, esz: int, split: bool = False) -> float:
    """The fused reduction's scattered writer for one output: `datums` elements of `esz` bytes in `runs` runs of
    consecutive addresses over `tiles` tiles, the index stepping `step` elements per k (None: evaluated per datum);
    `split`: a bf16 run whose halfwords differ in parity from the slot's."""
    narrow = RED_OUT_NARROW if esz < 4 else 0.0
    if step is None:
        return (RED_OUT_PER_DATUM + narrow) * datums + RED_OUT_PER_RUN * runs
    if step == 1:
        copy = COPY16_SPLIT * datums if split else copy32_cycles(datums * esz / 4)
        return RED_OUT_COPY_TILE * tiles + copy
    return (RED_OUT_ONE + narrow) * datums


def pipeline(n_tiles: int, reader: float, compute: float, writer: float, fill: float = 0.0) -> dict:
    """A launch of n_tiles through reader -> compute -> writer (per-tile cycles of each): the first tile passes every
    stage, the others leave at the slowest stage's rate. `fill`: work before the first tile can start."""
    total = fill + reader + compute + writer + max(0, n_tiles - 1) * max(reader, compute, writer)
    return {"reader": round(reader * n_tiles + fill), "compute": round(compute * n_tiles),
            "writer": round(writer * n_tiles), "total": round(total)}


def l1_resident_cycles(n_tiles: int, reader: float, compute: float, writer: float, reader_fill: float = 0.0,
                       writer_fill: float = 0.0) -> float:
    """A launch measured L1 to L1 (TT_L1_RESIDENT=1, runtime/driver.py): the reader runs alone to its end, then the
    compute cores and the writer start with every input tile in its CB, each core's cycles counted from its own
    release: the slower of the reader's run (`reader_fill` before its first tile) and the compute and writer's
    pipeline with nothing to wait for (`writer_fill`: the writer's work beyond its tiles, the last write's wait)."""
    return max(reader_fill + n_tiles * reader, writer_fill + pipeline(n_tiles, 0.0, compute, writer)["total"])


def tile_pipeline_cycles(n_tiles: int, reads: list[tuple], write: tuple, compute_per_tile: float,
                         valid: float = 1.0, before: float = 0.0) -> dict:
    """The tile pipeline's launch: reads = (mode, tile format, run structure, datum extra, ranges) per input, write =
    (mode, tile format, datum extra) of the output (tile_read_cycles; the datum extra and ranges may be left out);
    compute_per_tile the compute's cycles per tile (compute_stage); valid: the share of the tiles' slots that hold
    elements (tile_read_cycles); before: the reader's work before its first tile (resident windows' loads).
    Where every input is plain contiguous (or a head broadcast beside them) the reader keeps several tiles' reads in
    flight (templates/reader.c.j2 `in_flight`, `reads_in_flight`): the round trip is paid once, in the fill, not per
    tile. Otherwise the plain contiguous inputs' reads are issued first and their round trip overlaps the other
    inputs' movers (`early`). A bulk writer keeps its writes in flight likewise (writer.c.j2): the last tile's
    acknowledgement is waited for once. `l1_resident`: the launch measured L1 to L1 (l1_resident_cycles)."""
    writer, fill, write_wait = tile_write_cycles(*write, valid=valid), before, 0.0
    if write[0].startswith("contiguous"):      # (the reader's work before its first tile stays in the fill)
        writer, fill, write_wait = writer - NOC_ROUND_TRIP, before + NOC_ROUND_TRIP, NOC_ROUND_TRIP
    if reads_in_flight(reads):
        reader, reader_fill = in_flight_read_cycles(reads, valid), before + NOC_ROUND_TRIP
        fill += NOC_ROUND_TRIP
    else:
        early = [r for r in reads if r[0] == "contiguous"]
        others = sum(tile_read_cycles(*r, valid=valid) for r in reads if r[0] != "contiguous")
        reader, reader_fill = in_flight_read_cycles(early, valid) + max(others, NOC_ROUND_TRIP if early else 0), before
    return {**pipeline(n_tiles, reader, compute_per_tile, writer, fill),
            "l1_resident": round(l1_resident_cycles(n_tiles, reader, compute_per_tile, writer, reader_fill,
                                                    write_wait))}


def head_broadcast(mode: str, runs: dict | None) -> bool:
    """A broadcast input only the SFPU setup reads (tile_streams.HEAD_DATUMS): a few datums of a window read once."""
    return mode == "broadcast" and bool(runs and runs["head"])


def reads_in_flight(reads: list[tuple[str, str, dict | None, float]]) -> bool:
    """Whether the tile pipeline's reader keeps several tiles' reads in flight (templates/reader.c.j2 `in_flight`):
    every input a plain contiguous stream, or a head broadcast beside them, whose window load (its only NoC read) is
    waited for with the first tile's reads, never holding the next tiles' reads back: a head of one NoC flit (64
    bytes or less: a scalar) is issued before the first tile's reads, a larger one right after them (reader.c.j2
    head_first)."""
    return (any(mode == "contiguous" for mode, *_ in reads)
            and all(mode == "contiguous" or head_broadcast(mode, runs) for mode, _, runs, *_ in reads))


def in_flight_read_cycles(reads: list[tuple[str, str, dict | None, float]], valid: float = 1.0) -> float:
    """Per tile, bulk reads whose round trip is not waited for alone (paid once, by the caller)."""
    return sum(tile_read_cycles(*r, valid=valid) - NOC_ROUND_TRIP for r in reads)


# The tile pipeline's compute (templates/compute.c.j2) keeps one Dst group in flight (semaphore FREE, max 1) where a
# core has one tile or Dst has no room for a second group, so a tile's unpack, math and pack follow each other; with
# more tiles than cores it keeps two (tile_render.second_dst_group: tile t + 1 is unpacked and computed while the packer
# drains tile t), priced below (DST_GROUPS_HANDOFF). Beyond the unpack, FPU and SFPU cycles the placement prices, each
# tile pays the pack as the emulator times it (runtime/emu/cycles.py: the packer's ADC x count of datums at 16 B per
# cycle, 64 cycles per tile of either format, where the placement prices 16 B per cycle of the whole tile) and the three
# hand-offs between the threads (UNPACKED, MATHDONE, FREE: a SEMPOST, the next thread's RISC-V polling for it, the
# thread drained by STALLWAIT): 127-133 cycles per tile on one core over fp32 a*b+a, a+1, exp2 and a+b cast to bf16 at
# 512 x 512 (emulated per tile less unpack + FPU + SFPU). A bf16 input reaches Dst through SrcA and an ELWADD
# (docs/sfpu_path.md §5.2), and an FPU op of the placement likewise waits for its Src banks: 37 cycles each beyond the
# ELWADD's priced 31 (bf16 a*b+a: 205 per tile beyond unpack + FPU + SFPU).
TILE_PACK_AND_HANDOFFS = 130
FPU_OP_HANDOFF = 37
# With two Dst groups the three threads work on different tiles, so a tile leaves at the pace of the slowest thread:
# TRISC0's unpacks (and the FPU op where fpu_on_unpacker moves it there), TRISC1's FPU ops and SFPU program, TRISC2's
# pack (the emulator's 64 cycles per tile, above), plus the hand-offs that thread still waits for. Measured on one
# core, fp32, 256 x 256 (64 tiles, TT_DUMP per-core cycles, `bench kernels`-style launches of the plan): a.exp2() 1,247
# and a.reciprocal() 2,556 emulated cycles per tile, their SFPU programs 1,134 and 2,468: 113 and 88 beyond the SFPU
# thread, where the one-group sum charged 258 (unpack 64 + pack + hand-offs 130 + the placement's pack 64)
DST_GROUPS_HANDOFF = 100
PACK_EMULATED = 64


def compute_stage(cycles: dict, fpu_ops: int, overlap: str | None = None) -> float:
    """Per tile, the tile pipeline's compute of a placement's per-tile cycles (unpack, fpu, sfpu) with `fpu_ops` FPU
    instruction groups (bf16 inputs' ELWADDs and the placement's FPU ops): with one Dst group (`overlap` None) their
    sum, the pack and the hand-offs; with two (tile_render.dst_overlap: "groups", or "fpu_on_unpacker" where TRISC0
    issues the FPU op) the slowest thread's part and the hand-offs."""
    fpu = cycles["fpu"] + FPU_OP_HANDOFF * fpu_ops
    if overlap is None:
        return cycles["unpack"] + fpu + cycles["sfpu"] + TILE_PACK_AND_HANDOFFS
    on_unpacker = overlap == "fpu_on_unpacker"
    threads = (cycles["unpack"] + (fpu if on_unpacker else 0), cycles["sfpu"] + (0 if on_unpacker else fpu),
               PACK_EMULATED)
    return max(threads) + DST_GROUPS_HANDOFF


# --- FPU matmul: per operand element tilized / output element untilized ------------------------------------------
# reader (blocks/tilize.c.j2), per (mode, DRAM element size): rows = one NoC read per row, as many rows as the
# 16 KB staging area holds issued before one wait (MM_STAGE_ROWS_BYTES; one round trip per such batch), then word
# copies into face rows, 32 elements per straight-line step; brisc instructions fitted on bf16 128^3 and 256^3 (1.2
# per element + 87 per row) and fp32 64x256x64, 128^3 (1.95 per element, when a row waited for its own round trip).
# cols: one NoC read per column and its wait. An fp32 operand rounded to bf16 tiles goes element by element through
# fp32_to_bf16 (a load, the NaN test, the rounding add, a halfword store and the loop: about 14 instructions): brisc
# busy time of the walk after the rows' reads, per element, fp32 128 x 160 by 160 x 192 on 1 x 6 cores (TT_DUMP
# timeline): A's 32 x 32 panels 16,376 cycles (16.0), B's 96 x 32 rows on brisc 14.2 and 64 x 32 on ncrisc 16.3
MM_READ_PER_ELEM = {("rows", 2): 1.2, ("rows", 4): 1.95, ("cols", 2): 15.7, ("cols", 4): 15.7,
                    ("gather", 2): 14.1, ("gather", 4): 14.1}   # cols, gather: the tile pipeline's columns / gather
MM_READ_ROUND_PER_ELEM = 15.5
MM_READ_PER_ROW = 87                               # rows: issuing the row's NoC read and walking its face rows
MM_READ_PER_COL = 100 + NOC_ROUND_TRIP_EXTRA       # cols: one staged NoC read per column and its wait
MM_STAGE_ROWS_BYTES = 16 * 1024                    # fpu_matmul.STAGE_ROWS_BYTES
MM_NOC_REQUEST = 30                                # issuing one NoC request (tt_noc.h: ten MMIO stores and a read)
# a packed output panel's row to DRAM (blocks/matmul_out.c.j2 panel_rows: the row's address and bounds check, then
# tt_noc_write_dram: the bank and offset of the row's page and the request): 63 ncrisc instructions and two MMIO
# reads of 6 cycles, 75 cycles a row (TT_DUMP timeline of r_256_256_256 on 8 x 8 cores, rows of 64 bytes; the bf16
# 1024^3 grid's last row block, rows of 256 bytes, 2,806 cycles from the last pack to the end: 72 a row beside the
# round trip), where one request alone was priced (MM_NOC_REQUEST) and the last row block's writes came out 0.45 short
MM_PANEL_WRITE_PER_ROW = 75
# the operand shares go out in multicasts of at most 2 KB (blocks/matmul_share.c.j2 MM_SHARE_PIECE): the emulator's
# packet holds its links and every receiver's port for its whole length, and whole 8 KB panel shares on 8 x 8 waited
# longer for a common free window (bf16 1024^3 on 8 x 8: 53,952 cycles in one piece, 48,876 in 2 KB pieces)
MM_SHARE_PIECE = 2048
# a row-major operand (mode "panel"): one NoC read per row straight into L1, issued through tt_noc_read_dram (the
# bank and offset of the row's DRAM page, then the request): bf16 128^3 with B row-major, 160 rows (B's 128 and A's
# first 32) read before the first unpack at cycle 13,947
MM_PANEL_READ_PER_ROW = 87
# writer (blocks/untilize.c.j2 untilize_row: a tile row of word copies, + one NoC write per output row), ncrisc busy
# time per element after its half of B: 1.4 per bf16 element (256^3, 64x64x512: 1.43, 1.37) and 2.4 per fp32 one
# (fp32 out 256x64x256); round_bf16 as fp32 (rounded by the epilogue). Each row's NoC write is priced apart
# (MM_PANEL_WRITE_PER_ROW, the same tt_noc_write_dram, and the rows' wait): rows of 32 columns on a 2 x 2 grid
# (r_64_64_64, r_80_40_36 fp32; TT_DUMP timelines of every tile) took 2.8K cycles for a tile's 16 rows, 1.2K priced
# by the element alone; at the 256-512 columns these figures were measured on it adds 0.15-0.3 an element
MM_WRITE_PER_ELEM = {"bf16": 1.4, "round_bf16": 2.4, "fp32": 2.4}
# per K block of an output tile: the unpackers take a whole tile each (its L1 bytes at 64 B per cycle,
# placement.cost.unpack_cycles: 32 cycles for a bf16 tile, 64 for an fp32 one) while the FPU runs 16 MVMULs per
# fidelity phase; the rest of a tile product, measured on the bf16 512^3 timelines with groups of 4 (the SFPU's idle
# gap between two groups' epilogues over the group's 64 tile products): 58 cycles per product at HiFi2 (32 MVMUL
# cycles + 26), 97 at HiFi4 (64 + 33): the math thread's Src bank waits while thread 0 issues A's face rows
MM_K_BLOCK_FIXED = 30
# an operand kept row-major (fpu_matmul.a_panel_rows / b_panel_rows, mode "panel"): thread 0 issues the tile's 64
# face-row UNPACRs and 8 ADC words itself, one per cycle, besides the base-address words; A's once per group of
# output tiles that share the A tile (fpu_matmul.dst_group), B's once per tile product
MM_FACE_ROW_ISSUE = 80
# B's walk (per tile product): 64 UNPACRs, per face SETADCXY, SETADCXX and the REPLAY, and the SETADCZW between
# tiles; bf16 512^3 at HiFi4 with B row-major: thread 0 busy 381,959 cycles from its first unpack on, 93 per tile
# product, 75 beside A's share (80 / 4). Thread 0 then sets the pace: the math thread's 5 cycles per product beyond
# its MVMULs (MM_K_BLOCK_OVERLAP) hide under it
MM_B_FACE_ROW_ISSUE = 75
# B tilized on the Tensix (fpu_matmul b_layout "tensix", mode "tensix"), per tile: thread 0's walk (77 issues) sets
# the pace, the MOVA2Ds and the packer's 2 KB (128 cycles, two tiles in flight) keep up; bf16 512^3 HiFi2: the
# 256 tiles' pass from the first walk's UNPACR at 39,634 to A's first at 59,746, 78.5 per tile
MM_TILIZE_PASS_PER_TILE = 79
# the SFPU epilogue (lowering/families/matmul_epilogue.py) per output tile, on top of its SFPU instructions: the
# STALLWAITs around it, and the FREE / MATHDONE round trip with the pack thread before the group's next tile's
# epilogue (bf16 512^3 timelines: 369 SFPU cycles + 104 between two epilogues of a group)
MM_EPILOGUE_FIXED = 105
# with an epilogue the pack thread rounds one Dst set while the math thread's MVMULs fill the other
# (fpu_matmul.DST_SET): per tile product the math thread then spends its MVMULs or B's unpack and MM_K_BLOCK_OVERLAP
# (bf16 512^3 HiFi4: 1,109 cycles per output tile = 16 x (64 + 5)), the pack thread per tile the epilogue and the
# packing: one PACR stream per face row with its SETADC (128 words) and the packer's 16 bytes per cycle for a
# packed bf16 panel (fpu_matmul.out_packed_rows; HiFi2, where this thread and the math thread's 16 x (32 + 5) per
# tile set the pace together: 637 per tile = 320 SFPU + 105 + 212, measured about 640), else a face-layout fp32
# tile (pack_cycles) waited for before the next epilogue
MM_K_BLOCK_OVERLAP = 5
MM_PACK_ROWS = 212
# A tilized operand's tiles that reach past an edge are zeroed before the valid elements overwrite them, and a
# row-major A panel's rows past M likewise (blocks/tilize.c.j2, matmul_reader.c.j2 read_a_rows: zero_words, a store,
# an add and a branch per word): 3,061 cycles for an fp32 tile on the timeline of r_80_40_36 on 2 x 2 (TT_DUMP, every
# tile recorded), 1,489 for a bf16 one (r_64_48_40), 1,650 for 16 rows of a 64-element bf16 panel
MM_ZERO_PER_WORD = 3
# per row of a word-copied tilize (mode "rows", not rounded), beside MM_READ_PER_ROW's read and the copies: the row's
# source and tile-row addresses and the chunk loop's entry; the row's last partial face row (cols % 16 elements)
# goes element by element. Measured on the timelines (each core's brisc, between the rows' read wait and the next
# phase): fp32 rows of 64 / 32 / 32 / 16 valid columns 166 / 98 / 104 / 87 cycles a row (1.95 an element priced:
# 41 / 36 / 42 / 56 beside it); bf16 rows of 32 69 and 72 (1.2 an element: 31, 34); rows of 4 fp32 and 8 bf16
# valid columns 89 and 119 (12 and 11 an element beside the row's set-up)
MM_COPY_PER_ROW = {2: 32, 4: 42}
MM_COPY_PARTIAL_PER_ELEM = 11.5


def epilogue_cycles(words: int, steps: int) -> int:
    """One tile's SFPU epilogue: `words` instructions per row step (one cycle each), `steps` row steps."""
    return words * steps + MM_EPILOGUE_FIXED if words else 0


def share_cycles(cores: int, nbytes: int) -> float:
    """One core's part in sharing a block with the other cores of its grid row or column
    (templates/blocks/matmul_share.c.j2): multicast writes of MM_SHARE_PIECE bytes (the grid's rows and columns are
    NoC rectangles), a semaphore increment per peer and per direction, the semaphore waits (a round trip)."""
    if cores == 1:
        return 0
    return (-(-nbytes // MM_SHARE_PIECE) * MM_NOC_REQUEST + nbytes / NOC_BYTES_PER_CYCLE
            + 2 * (cores - 1) * MM_NOC_REQUEST + NOC_ROUND_TRIP)


def matmul_cycles(spec, phases: int, read_modes: tuple[str, str], epilogue: int, b_split: bool, block_cols: int,
                  grid: tuple[int, int] = (1, 1), group: int = 1, packed_out: bool = False) -> dict:
    """The FPU matmul's launch (lowering/families/fpu_matmul.py) on a `grid` of (rows, columns) cores, each with its
    block of the output (the largest block sets the pace): read_modes = the A and B operands' reader modes
    (matmul_spec.operand_ctx; A "panel": kept row-major, fpu_matmul.a_panel_rows), epilogue = the SFPU epilogue's
    cycles per output tile (epilogue_cycles), group = the output tiles that share each A tile in SrcB, packed_out =
    the packer writes the output rows into a row-major panel (matmul_spec.out_packed_rows: the writer only sends
    them). Per batch and per block of up to `block_cols` of the core's column tiles every core's reader reads its
    share of the block's first A panel and its half of its share of B (the writer the other half at the same time),
    then shares them; a core sends its A only after its B, and every core's products wait for its grid row's A and
    its grid column's B, so the block starts when the slowest core's shares are in (grid_fill). Then per output row
    block one A panel, the block's tile products and its rows written. At least the DRAM banks' time for every
    core's bytes."""
    mt, nt, kt = spec.tiles
    a_mode, b_mode = read_modes
    gr, gc = grid
    mtc, ntc = -(-mt // gr), -(-nt // gc)                            # the largest core's row blocks, column tiles

    def read(mode: str, o, rows: int, cols: int, zeroed: int = 0) -> float:
        """`rows` x `cols` valid elements of operand `o` read into L1, `zeroed` bytes of edge tiles zeroed first."""
        if rows <= 0 or cols <= 0:
            return MM_ZERO_PER_WORD * zeroed / 4
        if mode in ("panel", "tensix"):        # one NoC read per row straight into place, one wait
            return (MM_PANEL_READ_PER_ROW * rows + NOC_ROUND_TRIP + MM_ZERO_PER_WORD * zeroed / 4
                    + DTYPE_SIZE[o.dtype] * rows * cols / NOC_BYTES_PER_CYCLE)
        rounds = o.dtype == "float32" and o.tile == "bf16"          # matmul_spec.operand_ctx's "round"
        per = MM_READ_ROUND_PER_ELEM if mode == "rows" and rounds else MM_READ_PER_ELEM[(mode, DTYPE_SIZE[o.dtype])]
        if mode == "rows":                     # batches of rows per NoC wait (blocks/tilize.c.j2 `pitch`)
            pitch = (DTYPE_SIZE[o.dtype] * cols + 127) & ~63
            lines = MM_READ_PER_ROW * rows + NOC_ROUND_TRIP * -(-rows // max(1, MM_STAGE_ROWS_BYTES // pitch))
            if not rounds:                     # word copies: the row's set-up, its last partial face row by elements
                lines += rows * (MM_COPY_PER_ROW[DTYPE_SIZE[o.dtype]] + cols % 16 * (MM_COPY_PARTIAL_PER_ELEM - per))
        else:
            lines = MM_READ_PER_COL * cols if mode == "cols" else 0
        return per * rows * cols + lines + MM_ZERO_PER_WORD * zeroed / 4
    out = "bf16" if spec.out.dtype == "bfloat16" else "round_bf16" if spec.round_bf16 else "fp32"
    rows = min(32, spec.M)                                            # per row block: one A panel
    tb = 2048 if spec.a.tile == "bf16" else 4096                  # a tile in L1
    a_kt, b_kt = -(-kt // gc), -(-kt // gr)                           # the largest share of the K tiles
    a_share = share_cycles(gc, -(-32 // gc) * 2 * spec.K if a_mode == "panel" else a_kt * tb)
    # thread 0's issue per tile product: a row-major operand's face-row walk, A's once per group, B's every time
    walks = (MM_FACE_ROW_ISSUE / group if a_mode == "panel" else 0) + (MM_B_FACE_ROW_ISSUE if b_mode == "panel" else 0)
    unpack = max(unpack_cycles("bf16" if tb == 2048 else "fp32"), walks)
    # B's share in halves when the reader and the writer each fill one (B tilized by both, or read for the Tensix):
    # the reader reads its half of the rows, and each sends its own half (NoC0 and NoC1)
    halves = 2 if b_split or b_mode == "tensix" else 1

    def a_read(mt0: int, share: tuple[int, int]) -> float:
        """One core's share of row block mt0's A panel: rows of the row-major panel (rows past M zeroed), else K
        tiles tilized (edge tiles zeroed first)."""
        valid = max(0, min(32, spec.M - 32 * mt0))
        if a_mode == "panel":
            got = max(0, min(share[1], valid) - share[0])
            return read(a_mode, spec.a, got, spec.K, (share[1] - share[0] - got) * 2 * spec.K)
        cols = max(0, min(spec.K, 32 * share[1]) - 32 * share[0])
        edge = sum(valid < 32 or 32 * t + 32 > spec.K for t in range(*share))
        return read(a_mode, spec.a, valid, cols, edge * tb)

    def b_read(k0: int, k1: int, cols: int, ct: int) -> float:
        """K tiles [k0, k1) of a block of B's `ct` column tiles (`cols` valid columns), edge tiles zeroed first."""
        krows = max(0, min(spec.K, 32 * k1) - 32 * k0)
        edge = 0 if b_mode in ("panel", "tensix") else sum(
            32 * t + 32 > spec.K or 32 * u + 32 > cols for t in range(k0, k1) for u in range(ct))
        return read(b_mode, spec.b, krows, cols, edge * tb)

    def out_rows(n: int, cols: int) -> float:
        """n rows of an output row block untilized and written, one NoC write per row, then their wait."""
        return (MM_WRITE_PER_ELEM[out] * n * cols + MM_PANEL_WRITE_PER_ROW * n + NOC_ROUND_TRIP) if n else 0

    def grid_fill(block: int, block_ct: int) -> float:
        """The `block`-th column block's start: every core's reader reads its share of the block's first A panel and
        its half of its B share (the writer the other half), then the row's A and the column's B are exchanged."""
        slowest = 0.0
        for (mt0, _), (bk0, bk1) in zip(split_ranges(mt, gr), split_ranges(kt, gr)):
            bkm = bk0 + (bk1 - bk0 + 1) // 2 if halves == 2 else bk1
            for (nt0, nt1), a_sh in zip(split_ranges(nt, gc),
                                        split_ranges(32 if a_mode == "panel" else kt, gc)):
                c0 = nt0 + block * block_cols
                if c0 >= nt1:
                    continue
                ct = min(block_cols, nt1 - c0)
                cols = min(spec.N - 32 * c0, 32 * ct)
                # "tensix": the core's share tilized on the Tensix once both halves are read
                tilize = MM_TILIZE_PASS_PER_TILE * (bk1 - bk0) * ct if b_mode == "tensix" else 0
                slowest = max(slowest, max(a_read(mt0, a_sh) + b_read(bk0, bkm, cols, ct),
                                           b_read(bkm, bk1, cols, ct)) + tilize)
        return slowest + a_share + share_cycles(gr, b_kt * block_ct * tb // halves)
    # every later A panel: the largest share of a whole row block
    reader_a = max(a_read(0, sh) for sh in split_ranges(32 if a_mode == "panel" else kt, gc)) + a_share
    launch, reader_all, compute_all, writer_all = 0, 0, 0, 0
    for c0 in range(0, ntc, block_cols):                             # the core's blocks of B's columns
        ct = min(block_cols, ntc - c0)
        cols = min(spec.N, 32 * ct)
        # per tile product unpacker 0 moves B's tile (A's tile, its face rows issued one by one, once per group)
        # while the FPU runs 16 MVMULs per fidelity phase; without an epilogue the packer holds the Dst tile
        if epilogue:         # the epilogue and the packing on the pack thread, overlapping the next group's MVMULs
            mvmul = kt * max(unpack, 16 * phases + MM_K_BLOCK_OVERLAP)
            per_tile = epilogue + (MM_PACK_ROWS if packed_out else pack_cycles("fp32"))
            compute = ct * max(mvmul, per_tile)
            # the launch's last group is rounded and packed after its MVMULs, with nothing left to overlap (bf16
            # 1024^3 on 8 x 8, 4 column tiles per core: the pack thread's last group 3,137 cycles after the math's)
            drain = ((ct - 1) % group + 1) * per_tile          # the last group's tiles
        else:
            compute = ct * (kt * (max(unpack, 16 * phases) + MM_K_BLOCK_FIXED) + pack_cycles("fp32"))
            drain = 0
        if packed_out:       # the panel's rows, one NoC write each, all in flight before one wait
            reader = reader_a
            writer = (MM_PANEL_WRITE_PER_ROW * rows + NOC_ROUND_TRIP
                      + DTYPE_SIZE[spec.out.dtype] * rows * cols / NOC_BYTES_PER_CYCLE)
            last = writer
        else:
            # the untilize split by rows (blocks/matmul_out.c.j2): the reader the upper 16 of each tile, the writer
            # the rest; the last row block's halves at once
            upper = out_rows(min(16, rows), cols)
            reader, writer = reader_a + upper, out_rows(rows - min(16, rows), cols)
            last = max(upper, writer)
        fill = grid_fill(c0 // block_cols, ct)
        # the tile products and the writer's untilize overlap since the writer's row writes are in flight together
        # (they added up while each NoC request waited for the previous one: runtime/emu/tile.py _niu_load)
        launch += spec.n_batch * (fill + compute + last + (mtc - 1) * max(reader, compute, writer))
        reader_all += spec.n_batch * (fill + (mtc - 1) * reader_a + mtc * (reader - reader_a))
        compute_all += spec.n_batch * mtc * compute
        writer_all += spec.n_batch * mtc * writer
    launch += drain
    chunks = -(-ntc // block_cols)
    # shared, A is read once per block of B's columns, B once, and the outputs written once
    dram = spec.n_batch * (DTYPE_SIZE[spec.a.dtype] * spec.M * spec.K * chunks + DTYPE_SIZE[spec.b.dtype] * spec.K
                           * spec.N + DTYPE_SIZE[spec.out.dtype] * spec.M * spec.N)
    bank = dram / DRAM_BYTES_PER_CYCLE             # buffers interleaved over the banks (chip/interleave.py)
    total = round(max(launch, bank))
    cores = gr * gc
    return {"reader": round(reader_all), "compute": round(compute_all), "writer": round(writer_all), "total": total, "bank": round(bank),
            "price": total + CORE_LAUNCH_CYCLES * (cores - 1), "cores": cores, "grid": f"{gr}x{gc}",
            "tiles_per_core": spec.n_batch * mtc * ntc}


# --- the tile pipeline split over a grid of cores (lowering/families/elementwise.py `use_cores`) -------------------
# Each core runs the pipeline above over its own range of tiles, all released together, so the launch takes the
# pipeline of the largest range. Every buffer is interleaved page by page over the eight DRAM banks
# (chip/interleave.py): the cores together move at most eight banks' bytes per cycle (the emulator's
# runtime/emu/noc.py Fabric models the banks and the NoC links on the way), so past some cores the banks, not the
# cores, set the time.
DRAM_BANK_BYTES_PER_CYCLE = 47      # docs/performance.md §3: 512 GB/s over 8 banks at 1.35 GHz [derived]
DRAM_BYTES_PER_CYCLE = N_BANKS * DRAM_BANK_BYTES_PER_CYCLE
# What an extra core adds to a launch's device time (docs/performance.md §8.1, "The price of a core"): the driver
# (runtime/driver.py) writes every tile's images, arguments and status first, then releases the tiles one host write
# each, and the targets that launch grids (emu, ttsim) advance no device cycle between host writes, so every tile
# starts at the same cycle. The card path launches one tile; a grid released tile by tile through tt-umd would pay
# about one tt-umd write (1.36 us at its C++ interface, tenstorrent/tt-umd#269) per extra tile, not priced here.
CORE_LAUNCH_CYCLES = 0


def split_ranges(n_tiles: int, cores: int) -> list[tuple[int, int]]:
    """[begin, end) tile ranges of `cores` cores, sizes differing by at most one tile (the larger ones first)."""
    base, extra = divmod(n_tiles, cores)
    out, b = [], 0
    for i in range(cores):
        e = b + base + (i < extra)
        out.append((b, e))
        b = e
    return out


# Cores released together meet at the banks twice (TT_DUMP per-core cycles, runtime/emu/noc.py Fabric: a packet holds
# its bank, links and ports for its whole length, granted in the order the cores ask). At the start every core issues
# its first tiles' reads at once (reader.c.j2: READ_AHEAD + 1 tiles in flight where reads_in_flight, else one tile's),
# so the core served last gets its data only once every core's first window has passed the banks, and computes after
# that: a*b+a and the demo expression at 512 x 512 on 128 cores (2 tiles each, 2 MB read) both had their slowest
# core's reader done at 7,543 (the fastest at 1,366), the demo's slowest core then computing its two tiles
# (7,543 -> 15,645). At the end, cores that finish together write their last tiles together: a bf16 -> fp32 cast of
# 256 x 256 on 64 cores (one tile each: 128 KB read, 256 KB written) packed its tile by 1,308 and wrote it by 2,269.
# Where the start was staggered by a longer read burst the writes spread over it (the demo's slowest core wrote
# 549 cycles after its pack). The bursts pass the banks at DRAM_SUSTAINED_SHARE of their nominal bytes per cycle, what
# the emulated fabric sustains with every core streaming (a packet holds its bank, links and ports at once, so the
# free windows fragment): a*b+a's bytes over its emulated cycles, 512 x 512 on 16, 32, 64 and 128 cores 0.78 / 0.78 /
# 0.82 / 0.83 and 2048 x 2048 on 13 cores 0.89 (the banks' own bound keeps the nominal rate: bank_queueing)
DRAM_SUSTAINED_SHARE = 0.85


def lockstep_cycles(cores: int, window_bytes: float, last_write_bytes: float) -> float:
    """What the core served last waits beyond its own pipeline when `cores` cores start together: every core's first
    read window of `window_bytes` through the banks before its data lands, and the last tiles' writes of
    `last_write_bytes` per core where they outlast the start's stagger; each less the core's own bytes' flits, which
    its pipeline already counts."""
    if cores == 1:
        return 0.0
    rate = DRAM_BYTES_PER_CYCLE * DRAM_SUSTAINED_SHARE
    start = cores * window_bytes / rate
    end = cores * last_write_bytes / rate
    return (max(0.0, start - window_bytes / NOC_BYTES_PER_CYCLE)
            + max(0.0, end - start - last_write_bytes / NOC_BYTES_PER_CYCLE))


def grid_pipeline_cycles(n_tiles: int, reads: list[tuple[str, str, dict | None, float]], write: tuple[str, str, float],
                         compute_per_tile: float, cores: int, dram_bytes_per_tile: int, valid: float = 1.0,
                         before: float = 0.0, out_bytes_per_tile: int = 0, read_ahead: int = 0,
                         core_bytes: float = 0.0, first_bytes: float = 0.0) -> dict:
    """tile_pipeline_cycles for a launch split over `cores` cores: the largest range's pipeline, delayed by the cores'
    bursts at the banks (lockstep_cycles: `out_bytes_per_tile` of the `dram_bytes_per_tile` are written; reads in
    flight issue `read_ahead` tiles beyond the first before they wait, tile_plan.READ_AHEAD; `first_bytes` of its
    `core_bytes` each core reads with its first tile), combined with the DRAM banks' time for every core's bytes
    (bank_queueing; `total`, emulated cycles; `core_bytes`: what each core reads beside its tiles, column segments'
    fills); `price` adds CORE_LAUNCH_CYCLES per extra core (what the choice of the count minimises). On a grid the
    largest range is the first core's, whose tiles are whole: where a whole tile costs more than the tiles' average
    share of elements (`valid`: walks that touch every datum), that core sets the pace. A per-slot walk (gather,
    computed) is priced on that core's share alone, whole tiles where the launch has more elements than it has slots
    (x[idx] on 3 cores: 0.75 of the slots)."""
    per_core = -(-n_tiles // cores)
    per_slot = any(mode in PER_SLOT_READS for mode, *_ in reads)
    first = min(1.0, valid * n_tiles / per_core) if per_slot else valid
    one = tile_pipeline_cycles(per_core, reads, write, compute_per_tile, first, before)
    if cores > 1 and valid < 1.0 and not per_slot:
        one = max(one, tile_pipeline_cycles(per_core, reads, write, compute_per_tile, 1.0, before),
                  key=lambda p: p["total"])
    window = min(per_core, read_ahead + 1) if reads_in_flight(reads) else 1
    start_bytes = window * (dram_bytes_per_tile - out_bytes_per_tile) + first_bytes
    one = {**one, "total": one["total"] + lockstep_cycles(cores, start_bytes, out_bytes_per_tile)}
    dram = n_tiles * dram_bytes_per_tile + cores * core_bytes
    out = on_grid(one, cores, per_core, dram)
    total = round(bank_queueing(one["total"], dram / DRAM_BYTES_PER_CYCLE))
    return {**out, "total": total, "price": total + CORE_LAUNCH_CYCLES * (cores - 1)}


# Near the knee, where the cores' reads together ask about what the banks move, they queue behind each other's packets
# at the banks and each core's pipeline slows: a*b+a at 2048 x 2048 (fp32; one core's pipeline 315 emulated cycles per
# tile, the banks' share of 9 / 10 / 13 cores' tiles 294 / 327 / 425) took 371 / 390 / 474 cycles per tile (169,231 /
# 159,887 / 149,701 emulated), more than either bound. The launch takes the two bounds' p-norm: p = 3.6 from the 9- and
# 10-core launches (13 cores, held out: predicted 0.98 of emulated; a+b at 1024 x 1024 on 8 cores 1.02). A hard
# maximum let the chooser stop at the fewest cores that reach the banks' floor, the knee (10 cores, 6.8 % slower than
# 13)
BANK_QUEUE_NORM = 3.6


def bank_queueing(pipeline_cycles: float, bank_cycles: float) -> float:
    """A grid launch whose cores' pipelines take `pipeline_cycles` and whose bytes take `bank_cycles` on the banks:
    the two bounds' BANK_QUEUE_NORM-norm (the larger one where the other is far below it)."""
    p = BANK_QUEUE_NORM
    return (pipeline_cycles ** p + bank_cycles ** p) ** (1 / p)


def on_grid(one: dict, cores: int, tiles_per_core: int, dram_bytes: int) -> dict:
    """A launch split over `cores` cores from `one`, the pipeline of the largest core's `tiles_per_core` tiles:
    at least the DRAM banks' time for all cores' `dram_bytes` (`total`); `price` adds CORE_LAUNCH_CYCLES per extra
    core (what the choice of the count minimises)."""
    bank = dram_bytes / DRAM_BYTES_PER_CYCLE
    total = round(max(one["total"], bank))
    return {**one, "total": total, "price": total + CORE_LAUNCH_CYCLES * (cores - 1), "cores": cores,
            "tiles_per_core": tiles_per_core, "bank": round(bank)}
