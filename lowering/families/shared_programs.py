"""Programs shared by kernels: one reader (BRISC), writer (NCRISC), unpacker (TRISC0) and packer (TRISC2) for every
elementwise kernel they fit, instead of each kernel's own rendered and compiled for it.

Those cores' code differs between such kernels only in constants: how many inputs, each stream's buffer, element size
and circular buffer, the output's Dst slot and format, the second Dst group's offset. The constants travel in the
argument block instead (`table`, at TABLE_AT after the launch words), so each program is the same text for every
kernel (templates/stream_reader.c.j2, stream_writer.c.j2, tile_unpacker.c.j2, tile_packer.c.j2, rendered with
`program_ctx` alone): runtime.compile builds each once per compiler, like the device library, and a new kernel
compiles only what is its own, at least its math TRISC (issue #12: a new elementwise kernel's build). Each does what
the kernel's templates render for it (the reader's reads in flight, the writer's acked ring, the rotated walk of a
core's range; the unpacker's and packer's Tensix words the same, in the same order), looping over the streams where
the templates unroll them; the reader keeps one count for its inputs' CBs, which advance together.

Which cores take them (`programs`): the reader where every input is a plain contiguous stream; the writer where the
output is one (it walks the tiles as the kernel's reader does: `rotated`); the unpacker where every input
is a 32-bit (fp32-format) tile unpacked to Dst for every tile, with no FPU op; the packer always. None with a tile
grid walk or a launch too wide for the table; the reductions keep their own.
"""
from __future__ import annotations

import functools

from tt_backend import knobs
from tt_backend.chip import layout
from tt_backend.lowering.codegen.sources import render_program
from tt_backend.lowering.codegen.tensix import PACK_CFG, UNPACK_CFG, UNPACK_CFG_COMMON, tensix_words
from tt_backend.lowering.codegen.words import hex_u32
from tt_backend.lowering.families.tile_plan import CB_DEPTH, READ_AHEAD, WRITE_AHEAD, TilePlan
from tt_backend.lowering.families.tile_render import DST_GROUPS, dst_group, group_words, reads_ahead
from tt_backend.lowering.families.tile_streams import stream_ctx
from tt_backend.lowering.placement.choice import FpuOp
from tt_backend.lowering.plan import DTYPE_SIZE, TILE_BYTES, TILE_ELEMS

TEMPLATES = {"brisc": "stream_reader.c.j2", "ncrisc": "stream_writer.c.j2", "trisc0": "tile_unpacker.c.j2",
             "trisc2": "tile_packer.c.j2"}
TABLE_AT = 32       # argument word of the table: the launch words (n_tiles, n_elements, buffers, range) before it
MAX_INPUTS = 7      # the compute kernel's limit (tile_render._check): one Dst slot each
# the table's first words (program_args.h.j2); `rotated`: the reader walks a core's tiles from a rotated start (it keeps
# its reads in flight, templates/reader.c.j2), which the writer follows, else in order
HEAD = ("range", "n_inputs", "group", "out_slot", "out_format", "rotated")
STREAM_WORDS = 4    # then per stream: buffer index, log2 of its element bytes, CB base, CB slot bytes
FORMATS = ("fp32", "bf16")   # the output tile formats, by their code in the table's out_format


def _plain(ctx: dict, s) -> bool:
    """Stream s (its reader or writer context `ctx`) moves as one NoC transfer per tile, straight between DRAM and
    the CB slot, in its own format."""
    return ctx["mode"] == "contiguous" and DTYPE_SIZE[s.dtype] * TILE_ELEMS == TILE_BYTES[s.tile_format]


def programs(plan: TilePlan, fpu_ops: list[FpuOp], dst_inputs: list[int] | None) -> frozenset[str]:
    """The cores of elementwise kernel `plan` (its FPU ops and Dst inputs) that run a shared program (none with
    TT_SHARED_PROGRAMS=0, nor before its L1 is allocated: such a plan cannot be rendered)."""
    n = len(plan.inputs)
    fits = len(plan.buffers) + 4 <= TABLE_AT and TABLE_AT + len(HEAD) + STREAM_WORDS * (n + 1) <= layout.ARGS_SIZE // 4
    if not (knobs.shared_programs() and plan.l1 and plan.tile_grid is None and 1 <= n <= MAX_INPUTS and fits
            and plan.output.tile_format in FORMATS):
        return frozenset()
    reader = all(_plain(stream_ctx(plan, s, j), s) for j, s in enumerate(plan.inputs))
    writer = _plain(stream_ctx(plan, plan.output, None), plan.output)
    unpacker = (not fpu_ops and (dst_inputs is None or set(dst_inputs) == set(range(n))) and not plan.head_inputs
                and all(s.tile_format == "fp32" for s in plan.inputs))
    return frozenset(core for core, runs in (("brisc", reader), ("ncrisc", writer), ("trisc0", unpacker),
                                             ("trisc2", True)) if runs)


def table(plan: TilePlan, range_at: int, group: int | None) -> list[int]:
    """The argument words from TABLE_AT on (`range_at`: the argument word of tile_begin; `group`: the second Dst
    group's offset, None for one group in flight)."""
    assert range_at + 2 <= TABLE_AT, "the launch words run into the programs' table"
    words = [range_at, len(plan.inputs), group or 0, plan.sfpu.out_slot, FORMATS.index(plan.output.tile_format),
             int(reads_ahead([stream_ctx(plan, s, j) for j, s in enumerate(plan.inputs)]))]
    streams = [(s, plan.l1[f"cb_in{j}"]) for j, s in enumerate(plan.inputs)] + [(plan.output, plan.l1["cb_out"])]
    for s, cb in streams:
        words += [s.buf, DTYPE_SIZE[s.dtype].bit_length() - 1, cb, TILE_BYTES[s.tile_format]]
    return words


def with_table(plan: TilePlan, blocks: list[list[int]], fpu_ops: list[FpuOp],
               dst_inputs: list[int] | None) -> list[list[int]]:
    """The cores' argument blocks (each its range the last two words, all of one length), each followed by the table
    where a program runs: one table for all of them, the range's word the same in each."""
    if not programs(plan, fpu_ops, dst_inputs):
        return blocks
    n = len(blocks[0])
    tail = [*[0] * (TABLE_AT - n), *table(plan, n - 2, dst_group(plan, fpu_ops, dst_inputs))]
    return [[*words, *tail] for words in blocks]


def program_ctx() -> dict:
    """The programs' only rendering context: constants shared by every kernel (so their text is too)."""
    return {"table_at": TABLE_AT, "head": HEAD, "stream_words": STREAM_WORDS, "max_inputs": MAX_INPUTS,
            "sync_base": f"0x{layout.SYNC_BASE:X}u", "cb_offset": f"0x{layout.SYNC_CB_OFFSET:X}u",
            "cb_stride": f"{layout.SYNC_CB_STRIDE}u", "cb_depth": CB_DEPTH, "read_ahead": READ_AHEAD,
            "write_ahead": WRITE_AHEAD, "tile_elems": TILE_ELEMS, "dst_groups": DST_GROUPS,
            "w": tensix_words(), "two": group_words(1), "formats": list(enumerate(FORMATS)),
            "unpack_cfg": {i: hex_u32(v) for i, v in (UNPACK_CFG["fp32"] | UNPACK_CFG_COMMON).items()},
            "pack_cfg": {f: {i: hex_u32(v) for i, v in PACK_CFG[f].items()} for f in FORMATS}}


@functools.cache
def program(core: str) -> str:
    """The source of `core`'s program."""
    return render_program(TEMPLATES[core], program_ctx())


def sources(plan: TilePlan, fpu_ops: list[FpuOp], dst_inputs: list[int] | None) -> dict[str, str]:
    """{core: program source} of the cores that run one (`programs`), for kernel_sources."""
    return {core: program(core) for core in sorted(programs(plan, fpu_ops, dst_inputs))}
