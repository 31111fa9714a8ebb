"""How the tile pipeline's reader and writer move each stream (templates reader.c.j2 / writer.c.j2): a bulk NoC copy
(contiguous), per-datum gather/scatter with the stream's index expression, runs of an affine index (`RUN_MODES`), a
computed value, or the reduction layout's walk over (output, reduce index) per datum. A plan whose reader image did
not fit its slot (`Plan.compact_reader`) gathers per datum instead of runs and walks, and calls its loaded-index
helpers instead of inlining them (templates/blocks/index_loads.c.j2): less code, no datum table.
"""
from __future__ import annotations

import math

from tt_backend.lowering.codegen.c_exprs import DRAM_LOAD, DRAM_STORE, TILE_LOAD, TILE_STORE
from tt_backend.lowering.codegen.l1 import STAGING_BYTES, aligned
from tt_backend.lowering.families.run_copies import copied_share, split_share
from tt_backend.lowering.families.tile_plan import ReducePlan, TilePlan, window_bytes
from tt_backend.lowering.index import render_c_nested
from tt_backend.lowering.plan import DTYPE_SIZE, ROW_STEP0_DATUMS, TILE_BYTES, TILE_ELEMS, TILE_NATIVE, Stream
from tt_backend.chip.errors import UnsupportedOp


def stream_ctx(plan: TilePlan, s: Stream, j: int | None, red: ReducePlan | None = None) -> dict:
    """The reader's (input j) or writer's (j None) context of stream s: how it moves, the C it uses per element."""
    if s.dtype not in DTYPE_SIZE:
        raise UnsupportedOp(f"{plan.name}: dtype {s.dtype} has no DRAM/tile conversion")
    esz, fmt = DTYPE_SIZE[s.dtype], s.tile_format
    if s.contiguous:
        # a bulk copy needs DRAM element size == tile element size; bool is widened/narrowed in place
        mode = "contiguous bool" if s.dtype == "bool" else "contiguous" if s.dtype in TILE_NATIVE else "contiguous convert"
    else:
        mode = "gather" if j is not None else "scatter"
    if red is not None:   # reduction layout (tile_plan.ReducePlan): the reader walks (output, reduce index) per datum
        if j is None and red.fused:   # one output tile per input tile (fused_reduce.py): a run, or per datum
            mode = "red tile" if s.contiguous else "red out"
        elif j is None: mode = "red scatter"
        elif j == red.mask_input: mode = "red mask"
        elif s.value is not None: mode = "red computed"
        elif s.contiguous: mode = "red contiguous"   # lowering/families/sfpu_reduce.py: 32 lanes, a tile is a run of the buffer
        elif red.fused and k_run(s, red): mode = "red k run"
        else: mode = "red gather"
    elif s.value is not None:
        mode = "computed"
    window = window_bytes(plan, f"in{j}")
    runs = _affine_runs(plan, s, window) if mode == "gather" and not plan.compact_reader else None
    if runs is not None:
        mode = runs["mode"]
        runs["head"] = HEAD_DATUMS if mode == "broadcast" and j in plan.head_inputs else None
    walk = _reduce_walk(plan, s, red, window) if mode == "red gather" and not plan.compact_reader else None
    if walk is not None:
        mode = "red affine"
    nest = (_reduce_nest(plan, s, red, window) if mode in ("red gather", "red computed") and red.k_dep[j]
            and not plan.compact_reader else None)
    if nest is not None:
        mode = f"{mode} nested"
    name = f"in{j}" if j is not None else "out"
    if mode in ("gather", "scatter", "red gather", "red affine", "red gather nested", "red scatter", "red out",
                *RUN_MODES) and f"stage_{name}" not in plan.l1:
        raise ValueError(f"{plan.name}: stream {name} is gathered but has no staging window (run allocate_l1)")
    return {
        "j": j, "buf": s.buf, "dtype": s.dtype, "fmt": fmt, "esz": esz, "mode": mode,
        "index_c": s.index_c, "valid_c": s.valid_c or "1", "value_c": s.value_c,
        "load_expr": DRAM_LOAD[s.dtype], "store_stmt": TILE_STORE[fmt],
        "tile_load": TILE_LOAD[fmt], "dram_store": DRAM_STORE[s.dtype],
        # reduction pads (k >= K) still read this stream (element k = 0): max pads, streams indexed by o only
        "pad_read": int(red is not None and j is not None and j != red.mask_input
                        and (red.pad_clamp or not red.k_dep[j])),
        "runs": runs, "walk": walk, "nest": nest,
        # a reduction-layout input that does not depend on the reduce ranges: one value per output cell
        "k_const": bool(red is not None and j is not None and j != red.mask_input and not red.k_dep[j]),
    }


# --- the elementwise reader's run paths -------------------------------------------------------------------------
# An input stream whose index is affine in the ranges and ungated (Stream.coef, no valid) is read in runs instead of
# per datum: the innermost ranges whose coefficients chain like one flattened range (coef[k] == stride * size of the
# ranges inside it; size-1 ranges always merge) form a run of `run` elements with index base + stride * q, where base
# is affine in the remaining outer ranges. Per run the reader does one of
#   broadcast (stride 0): fetch the one value, replicate it with plain stores (a CB slot that already holds the same
#                         value across the whole tile is not rewritten);
#   runs (stride 1):      one NoC read straight into the CB slot when DRAM and slot addresses are congruent mod 64 and
#                         the element sizes agree, else the run is brought into the staging window with one NoC read
#                         and copied/converted from there;
#   strided (any other):  walk the window with a constant byte step, no per-datum index evaluation;
#   columns (strided, short runs, next outer range contiguous: transposes): the whole runs of a tile form a block
#                         whose columns are contiguous in the buffer: one source segment per column, stored with a
#                         constant step of `run` datums; partial runs at the tile's edges go datum by datum. A tile
#                         holds only TILE_ELEMS / run rows of each column, so a buffer that is not resident keeps a
#                         segment of each column in the window (`column_bytes` each, from the 64-aligned address of the
#                         first datum asked for): the next tiles' rows of a column are read from there, and a column
#                         is read again (one NoC read per column, all of a row's misses waited for at once, none past
#                         the rows the core's tiles need) only when the walk leaves its segment; columns close
#                         together in the buffer are filled from one contiguous block read instead (COLUMN_BLOCK_BYTES).
#                         A transpose of a 224 x 13824 buffer (einsum's gradient) made about 450 NoC reads per tile,
#                         one per column plus one per datum of the partial runs. Its inverse (runs of 13824 at stride
#                         224: every datum of a tile in another column) made one window reload per ~36 datums.
# A buffer that fits the staging window is read into it once ("resident") and runs are then plain L1 reads; a larger
# one is reloaded per miss, a full window ahead when consecutive accesses are near, just the bytes needed when they are
# far apart (sparse), ending at the datum for descending walks.
# Gated (pad) and non-affine indices, and strided runs shorter than STRIDED_MIN_RUN, keep the per-datum gather.
RUN_MODES = ("broadcast", "runs", "strided", "columns")
# A broadcast input that only the SFPU program's setup reads (a uniform value hoisted out of the row loop,
# lowering/codegen/sfpu_codegen.py) is read at row step 0: datums 0..62 (row steps 0 and 1 are datums 0..63). The
# reader writes the tile's first HEAD_DATUMS datums and leaves the rest of the slot as it was (unpacked, never read).
HEAD_DATUMS = ROW_STEP0_DATUMS
DIRECT_MIN_BYTES = 64        # a run at least this long goes straight into the CB slot when congruent
STRIDED_MIN_RUN = 4          # shorter strided runs cost more per run (window check, chunking) than per-datum gather
STRIDED_MIN_RUN_RESIDENT = 2  # the same when the buffer is resident in the window (no window check per run)
COLUMNS_MAX_RUN = 48         # strided runs whose next outer range has coefficient 1 are walked by columns (a block of
                             # whole runs copied one contiguous source segment at a time) when shorter than this or
                             # when the buffer is not resident (a long strided run reloads the window many times)


def _u32(v: int) -> str:
    return f"{v & 0xFFFFFFFF}u"


# The window of a columns walk with segments grows (while L1 has room) to give each column COLUMN_SEGMENT_BYTES, at
# most COLUMN_WINDOW_MAX: a 224-column transpose then reads each column once per ~56 tiles instead of once per ~4. When
# that leaves no segments (many short columns: the inverse transpose, whose tiles lie inside one run), the window takes
# the least that gives each column one: a core then reads each column once instead of a window per few datums.
COLUMN_SEGMENT_BYTES = 1024
COLUMN_WINDOW_MAX = 256 * 1024
# Columns at most COLUMN_BLOCK_BYTES / 4 apart in the buffer are filled in blocks: one NoC read of COLUMN_BLOCK_BYTES
# contiguous bytes into a bounce area at the window's end, each missing column's segment copied from there (a NoC
# read costs far more, emulated and on the host, than copying a short segment).
COLUMN_BLOCK_BYTES = 32 * 1024
# The least window is taken only for columns more than SEGMENTS_MIN_STEP bytes apart (the staging window holds fewer
# than 64 rows of them); closer, the plain window's reloads cost less than the segments' bookkeeping (measured on one
# core: a.T of a 3000 x 20 fp32 buffer, 80 bytes apart, 1.86M reader cycles with segments, 1.45M per-datum gather).
SEGMENTS_MIN_STEP = STAGING_BYTES // 64


# A walk down grid columns (tile_grid) touches at most GRID_SLOTS columns between its tiles' reuses of a segment (a
# tile's TILE_ELEMS columns, a core's range crossing into the next grid column): the segments are GRID_SLOTS slots,
# column c in slot c mod GRID_SLOTS (a slot's bounds are DRAM addresses, so a column that finds another's segment there
# reads its own), each as long as GRID_WINDOW_MAX allows up to the column's datums of every row: a core then reads
# each of its columns about once (einsum's gradient transpose: 1.52M -> 1.07M cycles on 117 cores).
GRID_SLOTS = 2 * TILE_ELEMS
GRID_WINDOW_MAX = 768 * 1024


def column_slots(run: int, grid: bool) -> int:
    """The segments of a columns walk of runs of `run`: one per column, or GRID_SLOTS down grid columns."""
    return min(run, GRID_SLOTS) if grid else run


def column_windows(plan: TilePlan) -> dict[str, int]:
    """{staging window: bytes} of the inputs read by columns walks with segments (RUN_MODES), for allocate_l1."""
    out = {}
    for j, s in enumerate(plan.inputs):
        runs = None if s.contiguous else _affine_runs(plan, s, STAGING_BYTES)
        if runs is not None and runs["mode"] == "columns" and not runs["resident"]:
            run, table, slots, esz = runs["run"], runs["column_table"], runs["slots"], DTYPE_SIZE[s.dtype]
            least = table + slots * aligned(64 + esz * (TILE_ELEMS // run))
            big = min(COLUMN_WINDOW_MAX, table + run * COLUMN_SEGMENT_BYTES)
            if plan.tile_grid is not None:
                want = max(least, min(GRID_WINDOW_MAX, table + slots * aligned(64 + esz * (plan.n_elements // run))))
            else:
                want = max(least, big) if abs(runs["stride"]) * esz > SEGMENTS_MIN_STEP else big
            out[f"stage_in{j}"] = want + (COLUMN_BLOCK_BYTES if column_blocks(runs["stride"], s.dtype) else 0)
    return out


# A columns walk whose runs hold a tile or more (the inverse transpose: each datum of a tile in another column) reads,
# for one tile, one datum of TILE_ELEMS consecutive columns; the tiles below it in the output (the next runs) read the
# next datums of the same columns. Split into contiguous ranges of tiles, each core would take a few whole runs and so
# read every column of the buffer (einsum's gradient: 84 cores each read its 12.4 MB input). Instead the tiles are
# seen as a grid of rows of `lcm(run, TILE_ELEMS) / TILE_ELEMS` tiles (a whole number of runs per row) and walked
# column by column: a core's range of the walk is a band of whole columns, and each column's tiles read one block of
# the buffer's columns, their datums of consecutive rows adjacent (one segment each). Tiles past the last whole row of
# the grid follow in order.
def tile_grid(plan: TilePlan) -> tuple[int, int] | None:
    """(rows, columns) of the grid whose tiles a core walks column by column (above), or None (tiles in order)."""
    for s in plan.inputs:
        runs = None if s.contiguous else _affine_runs(plan, s, STAGING_BYTES)
        if runs is not None and runs["mode"] == "columns" and runs["run"] >= TILE_ELEMS:
            columns = math.lcm(runs["run"], TILE_ELEMS) // TILE_ELEMS
            rows = plan.n_tiles // columns
            return (rows, columns) if rows > 1 else None
    return None


def column_blocks(stride: int, dtype: str) -> bool:
    """Whether a columns walk of this stride fills its segments in blocks (COLUMN_BLOCK_BYTES; ascending columns)."""
    return 0 < stride * DTYPE_SIZE[dtype] <= COLUMN_BLOCK_BYTES // 4


def column_bytes(run: int, esz: int, window: int, slots: int) -> int:
    """The bytes of each of `slots` column segments in a window of `window` bytes (after the table of the segments'
    extents, two words per slot), a multiple of 64; 0 when that is too little to hold a tile's rows of a column from
    any alignment (a columns walk without segments)."""
    size = ((window - aligned(8 * slots)) // slots) & ~63
    return size if size >= 64 + esz * (TILE_ELEMS // run) else 0


def _affine_runs(plan: TilePlan, s: Stream, window: int) -> dict | None:
    """The run structure of an ungated affine elementwise input stream (see RUN_MODES) read through a staging window
    of `window` bytes, or None (per-datum gather)."""
    ranges = list(plan.ranges) or [1]
    if (s.coef is None or s.valid is not None or s.value is not None
            or len(s.coef) != len(ranges) + 1):
        return None
    a, const = list(s.coef[:-1]), s.coef[-1]
    k = len(ranges) - 1
    while k >= 0 and ranges[k] == 1:
        k -= 1
    stride, run, m = (a[k], ranges[k], k) if k >= 0 else (0, 1, 0)
    while m > 0 and (ranges[m - 1] == 1 or a[m - 1] == stride * run):
        m -= 1
        run *= ranges[m]
    esz = DTYPE_SIZE[s.dtype]
    # a buffer that fits the staging window is read into it once: no per-run reloads (one that fills it exactly needs a
    # 64-aligned DRAM address, as the bulk paths do: the reader checks)
    resident = plan.buffers[s.buf].nbytes <= STAGING_BYTES
    tight = plan.buffers[s.buf].nbytes > STAGING_BYTES - 64
    outer = [(ranges[i], a[i]) for i in range(m) if ranges[i] > 1]
    mode = "broadcast" if stride == 0 else "runs" if stride == 1 else "strided"
    if mode == "strided" and outer and outer[-1][1] == 1 and (run < COLUMNS_MAX_RUN or not resident):
        mode = "columns"   # a transpose-like walk: the next outer range is contiguous in the buffer
    elif mode == "strided" and run < (STRIDED_MIN_RUN_RESIDENT if resident else STRIDED_MIN_RUN):
        return None
    # staging-window reloads: a full window when the next access is near (dense), else only the bytes needed
    step = abs(stride) * esz if mode in ("strided", "columns") else abs(outer[-1][1]) * esz if outer else 0
    dense = step <= STAGING_BYTES // 4
    if mode in ("strided", "columns") and stride < 0 and dense:
        # walking down: the window ends just past the request (a column is at most a tile's bytes)
        back, span = STAGING_BYTES - (4 * TILE_ELEMS + 128 if mode == "columns" else 128), STAGING_BYTES
    else:
        back, span = 0, STAGING_BYTES if dense else 0
    # outer range o_i: decomposed from the run number once per tile, then advanced with a carry chain per run
    init = [f"uint32_t o{i} = o % {size}u; o /= {size}u;" for i, (size, _) in reversed(list(enumerate(outer)))]
    init.append("(void)o;")
    base = " + ".join([_u32(const)] + [f"{_u32(c)} * o{i}" for i, (_, c) in enumerate(outer)])

    def advance(i: int) -> str:   # outer ranges i, i-1, .., 0 (innermost first)
        return carry_chain([(f"o{m}", *outer[m]) for m in range(i, -1, -1)], "base")
    block = ""
    if mode == "columns":   # advance the innermost outer range by nb runs (nb <= what is left of it)
        i, (size, _) = len(outer) - 1, outer[-1]
        inner = advance(i - 1)
        block = (f"o{i} += nb; base += nb; if (o{i} == {size}u) {{ o{i} = 0; base -= {size}u;"
                 f"{' ' + inner if inner else ''} }}")
    # the bounce area of block fills is the window's last COLUMN_BLOCK_BYTES, when the rest still holds segments
    slots = column_slots(run, plan.tile_grid is not None)
    bounce = (COLUMN_BLOCK_BYTES if mode == "columns" and not resident and column_blocks(stride, s.dtype)
              and column_bytes(run, esz, window - COLUMN_BLOCK_BYTES, slots) else 0)
    doc = " + ".join([f"{c} * o{i}" for i, (_, c) in enumerate(outer)] + [f"{stride} * q", str(const)])
    tsz, direct_min = TILE_BYTES[s.tile_format] // TILE_ELEMS, max(1, DIRECT_MIN_BYTES // esz)
    direct = mode == "runs" and esz == tsz      # runs congruent mod 64 go straight into the CB slot
    return {"mode": mode, "run": run, "stride": stride, "stride_u": _u32(stride), "step": _u32(stride * esz),
            "neg": stride < 0, "direct_min": direct_min,
            "init": init, "base": base, "advance": advance(len(outer) - 1) or "(void)0;", "doc": doc,
            "back": back, "span": span, "outer": outer, "resident": resident, "tight": tight, "block": block,
            "last_outer": f"o{len(outer) - 1}", "last_size": outer[-1][0] if outer else 1,
            "column_bytes": column_bytes(run, esz, window - bounce, slots) if mode == "columns" and not resident else 0,
            "column_block": bounce,
            "column_table": aligned(8 * slots), "slots": slots, "slot_mask": slots - 1 if slots < run else None,
            "grid": plan.tile_grid is not None,   # the core walks its tiles down grid columns (tile_grid)
            "direct": direct,
            # the launch model's share of datums copied out of the window, not read straight into the slot
            "copied": copied_share(run, tuple(outer), const, plan.n_elements, esz, tsz, direct_min, direct)
            if mode == "runs" else 0.0,
            # of a halfword copy, the share in runs whose halfword parities differ (copied halfword by halfword)
            "split": split_share(run, tuple(outer), const, plan.n_elements) if mode == "runs" and esz == tsz == 2
            else 0.0}


# --- the reduction reader's affine walk ------------------------------------------------------------------------
# An ungated red gather whose index is affine (Stream.coef) is walked output cell by output cell: the cell's reduce
# indices k = tk * RED_KT + kk are consecutive, so its element index starts at the full index of (o, k) and then
# advances by the reduce ranges' coefficients with a carry chain; the datum each kk lands in comes from a table of the
# layout (args.h tt_red_datums). A buffer that fits the staging window is read into it once and addressed directly.

def _reduce_walk(plan: TilePlan, s: Stream, red: ReducePlan, window: int) -> dict | None:
    """The affine walk of a reduction-layout input stream, or None (per-datum gather: gated or not affine)."""
    ranges = list(plan.ranges)
    if s.coef is None or s.valid is not None or s.value is not None or len(s.coef) != len(ranges) + 1:
        return None
    n_out = len(red.out_sizes)
    # the reduce ranges, innermost first: (counter, size, coefficient)
    inner = [(f"q{i}", ranges[i], s.coef[i]) for i in reversed(range(n_out, len(ranges)))]
    return {"counters": [f"uint32_t q{i} = r[{i}];" for i in range(n_out, len(ranges))],
            "advance": carry_chain(inner, "e") or "(void)0;",
            "resident": plan.buffers[s.buf].nbytes <= window - 64}   # whole after aligning down


# --- the reduction reader's nested walk ------------------------------------------------------------------------
# A red gather that is not affine (pads, floor division and modulo of the ranges: the gradients of pooling and strided
# or padded convolutions) evaluates its index and validity per datum, a red computed stream its value. When each output cell's reduce indices all lie
# in one tile (one tile per group), the cell is walked by nested loops over the reduce ranges instead of a carry
# chain, and every sub-expression of the index and validity is computed once in the outermost loop it depends on
# (index.render_c_nested): a term of the output ranges once per cell, a term of the outer reduce ranges once per
# inner loop (modes "red gather nested", "red computed nested"). A buffer that fits the staging window is read once and addressed directly, its index checked against
# its size. Indices read from a buffer keep the per-datum walk.

def _reduce_nest(plan: TilePlan, s: Stream, red: ReducePlan, window: int) -> dict | None:
    """The nested walk of a reduction-layout input stream (above), or None (the per-datum carry-chain walk): a
    gathered stream's index and validity, or a computed stream's value (index math over the ranges: masks, aranges)."""
    if red.tiles_per_group != 1 or s.index_loads or (s.value is None and s.index is None):
        return None
    n_out, ranges = len(red.out_sizes), list(plan.ranges)
    level = {k: 0 if k < n_out else 1 + k - n_out for k in range(len(ranges))}
    exprs = [s.value] if s.value is not None else [s.index] if s.valid is None else [s.index, s.valid]
    decls, texts = render_c_nested(exprs, level, 1 + len(ranges) - n_out, "h")
    return {"out_ranges": [f"r{k}" for k in range(n_out)],
            "loops": [(f"r{k}", ranges[k]) for k in range(n_out, len(ranges))], "decls": decls,
            "value": texts[0] if s.value is not None else None,
            "index": texts[0], "valid": texts[1] if len(texts) > 1 else "1",
            # a buffer that fits the staging window is read once and addressed directly (index checked < n_elems)
            "resident": plan.buffers[s.buf].nbytes <= window - 64,
            "n_elems": plan.buffers[s.buf].nbytes // DTYPE_SIZE[s.dtype]}


def carry_chain(counters: list[tuple[str, int, int]], acc: str | None) -> str:
    """C that advances mixed-radix counters (innermost first: name, size, coefficient) by one and keeps
    acc = sum coefficient * counter in step (acc None: the counters alone)."""
    if not counters:
        return ""
    (q, size, c), rest = counters[0], counters[1:]
    inner = carry_chain(rest, acc)
    if acc is None:
        return f"if (++{q} == {size}u) {{ {q} = 0;{' ' + inner if inner else ''} }}"
    return (f"if (++{q} < {size}u) {acc} += {_u32(c)}; "
            f"else {{ {q} = 0; {acc} -= {_u32(c * (size - 1))};{' ' + inner if inner else ''} }}")


def k_run(s: Stream, red: ReducePlan) -> bool:
    """Whether s reads element k of its buffer at (o, k) (a gamma beside rows of x), so that with 32 lanes a tile's
    1024 consecutive k are one run of the buffer, the same for every output: one NoC read ("red k run", 64-byte
    aligned as every tile's first k is)."""
    n_out, c = len(red.out_sizes), s.coef
    if red.lanes != 32 or c is None or s.valid is not None or s.value is not None or s.dtype not in TILE_NATIVE:
        return False
    stride, chained = 1, True
    for coef, size in reversed(list(zip(c[n_out:-1], red.red_sizes))):
        chained &= coef == stride or size == 1
        stride *= size
    return chained and c[-1] == 0 and all(x == 0 or size == 1 for x, size in zip(c[:n_out], red.out_sizes))


def reduce_next_k(plan: TilePlan, red: ReducePlan) -> str:
    """C that advances the reduce ranges r[n_out..] of the reduction layout's walk to the next k (carry chain)."""
    n_out = len(red.out_sizes)
    return carry_chain([(f"r[{i}]", plan.ranges[i], 0) for i in reversed(range(n_out, len(plan.ranges)))], None)


def reduce_datums(red: ReducePlan) -> list[int]:
    """The datum of each (output cell c, kk) of a reduction tile, cell-major (read_gather.c.j2 reduce_affine): with 32
    lanes k follows the datum order; else row step (c // (32/lanes)) * steps + kk // lanes, lane (c % (32/lanes)) *
    lanes + kk % lanes, at SFPLOAD's datum 64(step>>1) + 16(lane>>3) + 2(lane&7) + (step&1)."""
    per = 32 // red.lanes
    out = []
    for c in range(red.cells):
        for kk in range(red.steps * red.lanes):
            if red.lanes == 32:
                out.append(kk)
                continue
            step, lane = (c // per) * red.steps + kk // red.lanes, (c % per) * red.lanes + kk % red.lanes
            out.append(64 * (step >> 1) + 16 * (lane >> 3) + 2 * (lane & 7) + (step & 1))
    return out


def reader_mode(plan: TilePlan, j: int, red: ReducePlan | None = None) -> str:
    """How the reader moves input stream j: contiguous | gather | broadcast | runs | strided | computed | red ..."""
    return stream_ctx(plan, plan.inputs[j], j, red)["mode"]
