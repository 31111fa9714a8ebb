"""The SFPU matmul's launch (lowering/families/sfpu_matmul.py) in emulated cycles, for the launch model
(Plan.launch_cycles) beside the other families' (mover_cost.py): the reader (BRISC, templates/blocks/chunks.c.j2)
fills the group's B chunks, then per row block the 8x replicated A panel; TRISC0 unpacks one A and one B chunk per
8 k while TRISC1 runs the chunk's passes on the SFPU; the writer (NCRISC, sfpu_matmul_writer.c.j2) untilizes each C
tile into a row panel and sends its rows.

Measured on the emulator's cycle model, one core, fp32 operands, TT_DUMP trace.json (each RISC-V's busy time, the
Tensix threads' issue): brisc busy per operand element of x @ y at 32 x 64 x 32 (33,587), 32 x 128 x 32 (66,810),
32 x 64 x 64 (46,954): a row-major A element 9.7 (its load and the 8 stores of put8, half a put16), a row-major B
element 6.5 (a load and a store), about 350 besides; A and B read by columns (x.T @ y.T): 37,716 and 34,129 with one
of the two so -> A 11.5, B 6.8; a strided A (x[:, ::2] @ y, mode "gather": every element through tt_window_fetch)
86,634 -> 35.6, its window reloads (one NoC read waited for each) beside it. A B chunk group with a partial edge is
zeroed word by word first (zero_words: 2.7 per word, 4 x 64 @ 64 x 16: 15,058 less its elements).
TRISC1 per 8-k chunk: 4 x (column halves) passes of the B setup (5 SFPU words), the body's record (10 words), the
MOP's REPLAYs (10 words per row group) and one auto-stall per row group; 870 cycles per chunk at 8 row groups and
both halves (64^3: thread 1 issues 694 per chunk), 337 at 2 row groups (8 x 64 x 32); at one row group and one half
(4 x 64 x 16) the unpacker's 8 KB A chunk and 1 KB B chunk set the pace, 175 per chunk.
Elements walked one by one (modes "gather", "indexed": chunks.c.j2 fill_a / fill_b) are priced by the parts of the
compiled walk, instructions counted per path in the readers TT_DUMP writes (brisc.dis, each block's executions
counted on the emulator): the store, the column counter and its carry and the loop test, 5.4 an element (conv2d
stride 2 groups 2: 5 and the carry every fourth); b_elem's chunk address, 17.2 (conv2d of 1 x 3 x 8 x 8 by
8 x 3 x 3 x 3, padding 1, B 27 x 64: its loop 22.6 an element against 5.4), which gcc replaces by a 4-byte step where
the group's columns fit one 16-column half (N <= 16: n >> 4 and n >> 5 are known zero); the window fetch
(tt_window_fetch: the byte offset, the bounds and window checks, the L1 address, the load) only where the gate
holds, 11.5 (11 and 12 in the two); and where both operands are walked so, gcc keeps tt_window_fetch out of line
(two call sites), 21 more a fetch (the arguments, the call, the saved registers: conv1d groups 3's weight gradient,
33 against 12). Beside them the index math (index_cost.gated_math_cycles: integer ops, each validity term where the
terms before it held, the index where all held). The calibration conv2d (84 % inside) is priced 44.1 an element,
brisc busy 77.6K (the flat 31.5 with 11.8 of math before); conv2d stride 2 groups 2 (B 18 x 16, 69 % inside) 30.9
against about 28 counted, where the flat figure priced 49. An operand's other per-element modes take the
figure of the other operand's by the difference of the two stores (put8 against one store: 3.2). The gathers'
window reloads are replayed on the host over the first row block (window_walk.window_loads), each its request, the
round trip and its bytes. bf16 operands (a 16-bit load and a shift) are priced as fp32 ones, and rounded ones add
the rounding (index_cost.ROUND_CYCLES).
"""
from __future__ import annotations

import numpy as np

from tt_backend.lowering.families.index_cost import ROUND_CYCLES, gated_math_cycles, inside_fraction
from tt_backend.lowering.families.matmul_spec import stage_bytes, stage_in_bytes
from tt_backend.lowering.families.mover_cost import (MM_NOC_REQUEST, MM_WRITE_PER_ELEM, NOC_BYTES_PER_CYCLE,
                                                     NOC_ROUND_TRIP, on_grid, pipeline)
from tt_backend.lowering.placement.cost import pack_cycles
from tt_backend.lowering.families.window_walk import window_loads
from tt_backend.lowering.plan import DTYPE_SIZE

# brisc cycles per operand element by reader mode (matmul_spec.operand_ctx); "indexed" and "gather" (element by
# element) are B's walk by its parts below, A's adds put8's 3.2 over one store
PUT8_OVER_STORE = 9.7 - 6.5
A_PER_ELEM = {"rows": 9.7, "cols": 11.5, "gather": 35.6}
B_PER_ELEM = {"rows": 6.5, "cols": 6.8, "gather": 35.6 - PUT8_OVER_STORE}
# an element-by-element walk by its parts (instructions counted in compiled readers, docstring): the store, the column
# counter and its carry, the loop test (WALK); b_elem's chunk address (B_ADDR: gcc steps it by 4 bytes instead where
# the group's columns fit one 16-column half, N <= 16); tt_window_fetch where the gate holds (FETCH: the bounds and
# window checks, the L1 address, the load), called out of line where both operands are walked so (FETCH_CALL more)
WALK, B_ADDR, FETCH, FETCH_CALL = 5.4, 17.2, 11.5, 21
ELEMENT_WALKS = ("gather", "indexed")
READER_FIXED = 350
ZERO_PER_WORD = 2.7
# one replicated A element: zeros past K are put the same way, and those past M by put16 two per call, each with the
# same 8 stores (charged at this figure, a load included)
PUT8 = A_PER_ELEM["rows"]
# TRISC1 per pass of a chunk: the B setup, the record, the MOP and the syncs (PASS_FIXED) and per row group its 10
# REPLAYed words and an auto-stall (PASS_PER_ROW_GROUP): 8 x (19 + 11 x 8) + 14 = 870, 8 x (19 + 11 x 2) + 14 = 342
PASS_FIXED, PASS_PER_ROW_GROUP, CHUNK_SYNC = 19, 11, 14
UNPACK_CHUNK = 175
# per C tile, beside its fp32 pack: zeroing C (32 SFPSTOREs), before the tile's first chunk (FREE, max 1)
TILE_FIXED = 32
# a gathered operand's window walk is replayed over at most this many elements of its block, the rest scaled
WALK_REPLAY_MAX = 1 << 14


def chunk_cycles(row_groups: int, halves: int) -> float:
    """One 8-k chunk: the SFPU's passes, or the unpacker's two chunks when they take longer."""
    return max(UNPACK_CHUNK, 4 * halves * (PASS_FIXED + PASS_PER_ROW_GROUP * row_groups) + CHUNK_SYNC)


def fetch_cycles(lines: int, stride: int, length: int, stage: int) -> float:
    """The NoC reads of `lines` operand lines of `length` bytes, `stride` bytes apart (chunks.c.j2 fetch_run): lines
    at least as far apart as they are long go as many per read as the staging area holds (fetch_lines), others one
    per read; each read waited for (its request and the round trip) and its bytes at 64 per cycle."""
    per_read = max(1, (stage - 128 - length) // stride + 1) if stride >= length else 1
    reads = -(-lines // per_read)
    span = (per_read - 1) * stride + length if stride >= length else length
    return reads * (MM_NOC_REQUEST + NOC_ROUND_TRIP) + reads * span / NOC_BYTES_PER_CYCLE


def operand_fetch_cycles(o, mode: str, rows: int, cols: int, stage: int, window: int) -> float:
    """The NoC reads of the first `rows` x `cols` block of operand `o` (batch 0): read by rows or by columns, or
    element by element through the staging window (each reload waited for, window_walk.window_loads)."""
    esz = DTYPE_SIZE[o.dtype]
    if mode == "rows":
        return fetch_cycles(rows, esz * abs(o.rs), esz * cols, stage)
    if mode == "cols":
        return fetch_cycles(cols, esz * abs(o.cs), esz * rows, stage)
    replayed = min(rows, max(1, WALK_REPLAY_MAX // cols))
    loads, moved = window_loads(element_offsets(o, replayed, cols), esz, o.nbytes, window)
    return rows / replayed * (loads * (NOC_ROUND_TRIP + MM_NOC_REQUEST) + moved / NOC_BYTES_PER_CYCLE)


def block_axes(o, rows: int, cols: int) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """The block's elements row by row: (row, column, the gather's range values per element) (chunks.c.j2 fill_a /
    fill_b gather and indexed walks; the ranges empty for an operand that is not gathered)."""
    r, c = (a.reshape(-1) for a in np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij"))
    if o.gather is None:
        return r, c, []
    g, axes = o.gather, [np.zeros_like(r)] * len(o.gather.sizes)
    for flat, group in ((r, g.groups[1]), (c, g.groups[2])):      # innermost range first, as the reader's _at
        for j, rng in enumerate(reversed(group)):
            axes[rng] = flat if j == len(group) - 1 else flat % g.sizes[rng]
            flat = flat // g.sizes[rng]
    return r, c, axes


def element_offsets(o, rows: int, cols: int) -> np.ndarray:
    """The byte offsets the reader fetches the block's elements from, row by row, gated-off elements left out."""
    r, c, axes = block_axes(o, rows, cols)
    if o.gather is None:
        return (o.offset + r * o.rs + c * o.cs) * DTYPE_SIZE[o.dtype]
    g = o.gather
    at = np.broadcast_to(g.index.evaluate(axes), r.shape).astype(np.int64) * DTYPE_SIZE[o.dtype]
    return at if g.valid is None else at[np.broadcast_to(g.valid.evaluate(axes), r.shape).astype(bool)]


def walk_cycles(o, operand: str, mode: str, rows: int, cols: int, both: bool) -> float:
    """Per element of operand `o` ("a" or "b") walked element by element in `mode` over its first `rows` x `cols`
    block (chunks.c.j2 fill_a / fill_b), by the walk's parts: B's figure for a strided gather less what its columns
    save (an address stepped where they fit one half), an index expression's walk with its fetch only where the gate
    holds and its index math (the validity's terms and the index as far as the reader gets with each element:
    index_cost.gated_math_cycles); the fetch out of line when `both` operands are walked so."""
    stepped = operand == "b" and cols <= 16
    if mode == "gather":
        figure = B_PER_ELEM["gather"] - (B_ADDR if stepped else 0) + (FETCH_CALL if both else 0)
        return figure + (PUT8_OVER_STORE if operand == "a" else 0)
    replayed = min(rows, max(1, WALK_REPLAY_MAX // cols))
    g, axes = o.gather, block_axes(o, replayed, cols)[2]
    return (WALK + (0 if stepped else B_ADDR) + inside_fraction(g.valid, axes) * (FETCH + (FETCH_CALL if both else 0))
            + gated_math_cycles(g.index, g.valid, axes) + (PUT8_OVER_STORE if operand == "a" else 0))


def element_cycles(o, operand: str, modes: tuple[str, str], rows: int, cols: int) -> float:
    """The reader's cycles per element of operand `o` ("a" or "b", read in modes[0] / modes[1]) over its first `rows`
    x `cols` block: the mode's figure or its walk by parts (walk_cycles), the rounding of an fp32 operand rounded to
    bf16."""
    mode = modes[operand == "b"]
    figure = (walk_cycles(o, operand, mode, rows, cols, all(m in ELEMENT_WALKS for m in modes))
              if mode in ELEMENT_WALKS else (A_PER_ELEM if operand == "a" else B_PER_ELEM)[mode])
    return figure + (ROUND_CYCLES["bf16"] if o.dtype == "float32" and o.tile == "bf16" else 0)


def sfpu_matmul_cycles(plan, modes: tuple[str, str], row_groups: int, halves: int, cores: int) -> dict:
    """The launch of `plan` (an SfpuMatmulPlan: spec, kc, ntg, ng) on `cores` cores, each with whole batches: per
    batch and column group the B fill (the pipeline's fill), then per row block the A panel (the reader), the group's
    C tiles (compute) and their untilize and row writes (writer), the largest core's batches in a row; at least the
    DRAM banks' time for the operands' and the output's bytes (on_grid). Split K is priced as one K block (the same
    elements filled; its partial C tiles' pack and unpack are left out)."""
    s = plan.spec
    mt, nt, _ = plan.tiles
    cols = min(s.N, 32 * plan.ntg)
    rows = min(32, s.M)
    a_elem, b_elem = element_cycles(s.a, "a", modes, rows, s.K), element_cycles(s.b, "b", modes, s.K, cols)
    kpad = 8 * plan.kc
    zero_b = ZERO_PER_WORD * plan.kc * plan.ntg * 256 if s.K < kpad or s.N < 32 * plan.ntg * plan.ng else 0
    stage, window = stage_bytes(s), stage_in_bytes(s)   # the gathers' window: STAGE_IN_BYTES
    fill_b = b_elem * s.K * cols + operand_fetch_cycles(s.b, modes[1], s.K, cols, stage, window)
    past_m = 4 * row_groups - rows if mt == 1 else 0        # rows the MOP computes past M (one row block)
    fill_a = (a_elem * rows * s.K + PUT8 * rows * (kpad - s.K)
              + operand_fetch_cycles(s.a, modes[0], rows, s.K, stage, window))
    tile = plan.kc * chunk_cycles(row_groups, halves) + TILE_FIXED + pack_cycles("fp32")
    out = "bf16" if s.out.dtype == "bfloat16" else "round_bf16" if s.round_bf16 else "fp32"
    writes = 1 if plan.rows_joined else rows
    write = MM_WRITE_PER_ELEM[out] * rows * cols + MM_NOC_REQUEST * writes + NOC_ROUND_TRIP
    batches = -(-s.n_batch // cores)
    groups = batches * plan.ng
    # one row block: the rows past M stay zero in an A slot once its first fill has zeroed them (chunks.c.j2 fill_a)
    zero_a = PUT8 * past_m * kpad * min(groups, plan.a_depth)
    one = pipeline(mt, fill_a, plan.ntg * tile, write, fill_b)
    # B's one slot is refilled once the group's last chunk is unpacked, so a group's B fill and first A panel follow
    # the previous group's compute, and only its last row block's writes overlap the next group
    total = READER_FIXED + zero_a + zero_b + groups * max(one["total"] - write, write) + write
    launch = {"reader": round(groups * one["reader"]), "compute": round(groups * one["compute"]),
              "writer": round(groups * one["writer"]), "total": round(total)}
    dram = s.n_batch * (DTYPE_SIZE[s.a.dtype] * s.M * s.K * plan.ng + DTYPE_SIZE[s.b.dtype] * s.K * s.N
                        + DTYPE_SIZE[s.out.dtype] * s.M * s.N)
    return on_grid(launch, cores, batches * mt * nt, dram)
