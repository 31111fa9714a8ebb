"""The tile pipeline's plans: kernels whose reader streams tiles into Dst (one input stream per Dst slot), whose SFPU
program runs per 32-lane row step, and whose writer takes the output tile (templates reader.c.j2, compute.c.j2,
writer.c.j2). Two families run on it: elementwise kernels, and SFPU reductions, whose `ReducePlan` (layout, the
accumulator's programs) the templates' `red` branch reads. `allocate_l1` lays out its circular buffers.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from tt_backend.lowering.codegen.l1 import CAPACITY, STAGING_BYTES, aligned, grow_window, l1_bytes, place, room
from tt_backend.lowering.families.mover_cost import split_ranges
from tt_backend.lowering.plan import TILE_BYTES, Plan, SfpuProgram
from tt_backend.chip.errors import UnsupportedOp

CB_DEPTH = 4                    # tiles per circular buffer
# tiles whose reads a reader keeps in flight beyond the one it waits for (templates/reader.c.j2): the CB's other
# slots hold a tile the unpacker works on and one pushed, so that neither side waits on the other
READ_AHEAD = CB_DEPTH - 2
# output tiles whose writes the writer keeps in flight beyond the one it waits for (templates/writer.c.j2), likewise
WRITE_AHEAD = CB_DEPTH - 2


@dataclass
class TilePlan(Plan):
    """A kernel on the tile pipeline (reader -> unpack / math / pack -> writer). On a grid its tiles are split into
    contiguous ranges of whole `split_unit`s (of the walk `tile_grid` orders, if set), one range per core, every core
    running the same ELFs on its range (argument words ARG_TILE_BEGIN/END after the buffers); `use_cores(max_cores)`
    picks the count the family's launch model (`launch_cycles(cores)`, mover_cost) prices lowest, at most `max_cores`
    (the target's tiles, capped by TT_CORES)."""
    sfpu: SfpuProgram                   # per row step; input stream j is unpacked into Dst32b slot j
    head_inputs: frozenset[int] = field(default=frozenset(), kw_only=True)   # broadcast inputs only the SFPU setup reads, at row step 0: the
                                    # reader writes just the datums it reads (tile_streams.HEAD_DATUMS)
    # (rows, columns): the cores' ranges walk a grid of the tiles column by column (tile_streams.tile_grid); None:
    # in order
    tile_grid: tuple[int, int] | None = field(default=None, kw_only=True)

    @property
    def split_unit(self) -> int:
        """Tiles that go to one core together (a reduction's output group: no combine step across cores)."""
        return 1

    def arg_words(self, dram_addrs: list[int]) -> list[int]:
        """One core's argument block: all tiles."""
        return [*super().arg_words(dram_addrs), 0, self.n_tiles]

    def core_arg_words(self, dram_addrs: list[int]) -> list[list[int]]:
        base, unit = super().arg_words(dram_addrs), self.split_unit
        return [[*base, b * unit, e * unit] for b, e in split_ranges(self.n_tiles // unit, self.cores)]

    def launch_cycles(self, cores: int | None = None) -> dict | None:
        """The launch on `cores` cores (default: the plan's): mover_cost's pipeline of the largest range, `price` for
        the choice of the count; None without a per-tile price."""
        return None

    def use_cores(self, max_cores: int) -> None:
        """Split over the count of at most `max_cores` cores that the launch model predicts fastest (the fewest of
        equally fast ones); without a model (no per-tile price) one core."""
        if self.launch_cycles(1) is None:
            self.cores = 1
            return
        options = range(1, min(max_cores, self.n_tiles // self.split_unit) + 1)
        self.cores = min(options, key=lambda n: (self.launch_cycles(n)["price"], n))

    def sfpu_program(self) -> SfpuProgram:
        return self.sfpu

    def sfpu_words(self) -> list[int]:
        return self.sfpu.setup + self.sfpu.body


@dataclass
class ReducePass:
    """The first pass of a two-pass reduction (lowering/families/sfpu_reduce.py `plan_two_pass`): reductions whose
    values a later reduction's pre-op reads. Its program folds each row step into its accumulators like the final pass;
    after a group's last tile `finish` combines each output's lanes, broadcasts the result to all of the output's lanes
    and stores it to every row step of Dst slot `slot` + i (steps < 32: `group_store` does that per step group), where
    the final pass's pre-op and the post read it."""
    op: str                         # "MAX", "ADD+MAX", ...
    sfpu: SfpuProgram               # the first pass's per-row-step program (setup run per tile)
    acc_init: list[int]
    finish: list[int]
    slot: int                       # first Dst slot of the first pass's results
    n_acc: int = 1
    group_store: list[int] = field(default_factory=list)


@dataclass
class ReducePlan:
    """The reduction of an SFPU reduction kernel (lowering/families/sfpu_reduce.py). The iteration space is
    `out_sizes` (outputs o, row-major) x `red_sizes` (reduce index k, row-major). Tile t = group g * tiles_per_group +
    tk; a tile is 32 row steps x 32 lanes and holds `cells` = 32 // lanes outputs (o = g * cells + j): output j owns
    lanes [j*lanes, (j+1)*lanes) of every row step, i.e. k = tk * 32 * lanes + step * lanes + lane % lanes. The phase-1
    program (the plan's `sfpu`) folds each row step into the accumulator LReg `acc_reg`; after a group's last tile
    `finish` combines the lanes of each output and stores the result at row step 0 of Dst slot `acc_slot`, then `post`
    (elementwise after the reduce, the reduced value being its input `acc_slot`) writes the output tile. Output j is
    datum `out_datum(j)` of that tile. Two-pass reductions (`pass1` set): each group's tiles stream twice (tile t: pass
    (t // tiles_per_group) % 2); pass 1 runs `pass1` (its results broadcast to Dst slots pass1.slot..), pass 2 is the
    rest of this."""
    op: str                         # "ADD" | "MAX"
    dtype: str                      # accumulator dtype
    out_sizes: tuple[int, ...]
    red_sizes: tuple[int, ...]
    lanes: int                      # lanes per output: 1, 2, 4, 8 or 32
    acc_reg: int
    acc_init: list[int]             # Tensix words: acc := identity (first tile of a group)
    finish: list[int]               # Tensix words: lane combine + store to acc_slot
    acc_slot: int
    post: SfpuProgram
    k_dep: list[bool]               # per input stream: its index depends on the reduce ranges
    mask_input: int | None = None   # input stream that is the reader's validity mask (1.0 real element, 0 pad)
    pad_clamp: bool = False         # pads read element k = 0 of the same output (max is idempotent)
    n_acc: int = 1                  # sibling reductions over the same axes: reduction i ends in slot acc_slot + i
    steps: int = 32                 # row steps per output: < 32 (lanes 1, one tile per group) for short reductions,
                                    # then 32 // steps step groups per tile, outputs j = group * 32 + lane
    group_store: list[int] = field(default_factory=list)   # steps < 32: words after each step group (store accs)
    post_skip: list[int] = field(default_factory=list)     # steps < 32: INCRWC to the next group's result row
    pass1: ReducePass | None = None  # two-pass reductions: the first pass (each group's tiles stream twice)
    compensated: bool = False       # a float32 sum kept as (sum, rounding errors) (sfpu_reduce.compensated)
    # a reduction and the elementwise that reads it (lowering/families/fused_reduce.py): the last pass is `post` run
    # over every row step of every tile, one output tile per input tile; `pass2` a second level of reductions before
    # it (results broadcast like pass1's); no accumulator of this plan's own
    fused: bool = False
    pass2: ReducePass | None = None
    # a group's tiles stay in the input CBs for all its passes (the reader sends them once, the unpacker re-reads
    # them and pops them after the last pass): fused reductions whose group fits the CBs
    resident: bool = False
    # per input stream of a fused reduction: the passes that read it from Dst (bit p: pass p; an FPU op's operands
    # come through the Src banks); a resident group's stream is unpacked to Dst in those only (tile_render.dst_passes)
    pass_inputs: tuple[int, ...] = ()
    # a fused reduction's output written per datum ("red out") whose index steps by this many elements per k: the
    # writer steps from each tile's first address (templates/blocks/scatter.c.j2 fused_affine); None: by the index
    out_step: int | None = None

    @property
    def passes(self) -> int:
        return 1 + (self.pass1 is not None) + (self.pass2 is not None)

    @property
    def n_out(self) -> int:
        return math.prod(self.out_sizes)

    @property
    def n_red(self) -> int:
        return math.prod(self.red_sizes)

    @property
    def cells(self) -> int:
        return (32 // self.steps) * (32 // self.lanes)

    @property
    def tiles_per_group(self) -> int:
        return -(-self.n_red // (self.steps * self.lanes))

    @property
    def groups(self) -> int:
        return -(-self.n_out // self.cells)

    def out_datum(self, j: int) -> int:
        return reduce_out_datum(self.lanes, j, self.steps)

    @property
    def sends(self) -> int:
        """How many times the reader sends each tile: once per pass, or once for a resident group."""
        return 1 if self.resident else self.passes

    def reads_in_flight(self, modes: list[str]) -> bool:
        """Whether the reader keeps reads in flight (templates/reader.c.j2): every input one NoC read per tile
        ("red contiguous", "red k run"), each tile sent once, and a resident group leaving READ_AHEAD slots of each
        CB for the next group's reads (else the reader could wait for a slot the group holds while the group's last
        tile is still in flight)."""
        fits = self.pass1 is None or self.tiles_per_group <= CB_DEPTH - READ_AHEAD
        return self.sends == 1 and fits and all(m in ("red contiguous", "red k run") for m in modes)


def reduce_out_datum(lanes: int, j: int, steps: int = 32) -> int:
    """Datum of output j in a reduction's output tile: row step `steps` * (step group), the lane the lane combine
    leaves it in (SFPLOAD lane mapping: row step s, lane l <-> datum 64(s>>1) + 16(l>>3) + 2(l&7) + (s&1))."""
    per_group = 32 // lanes
    step, lane = steps * (j // per_group), (j % per_group) * lanes + min(lanes, 8) - 1
    return 64 * (step >> 1) + 16 * (lane >> 3) + 2 * (lane & 7) + (step & 1)


def index_load_buffers(plan: Plan) -> list[int]:
    """Positions in plan.buffers of the buffers the input streams' indices load from (lowering/index.py LOAD): the
    reader reads each through a staging window of its own (templates/blocks/index_loads.c.j2)."""
    slots = frozenset().union(*(s.index_loads for s in plan.inputs))
    return [k for k, b in enumerate(plan.buffers) if b.slot in slots]


def window_bytes(plan: Plan, name: str) -> int:
    """The size of stream `name`'s (in<j>, out) staging window."""
    return plan.windows.get(f"stage_{name}", STAGING_BYTES)


def allocate_l1(plan: TilePlan, resident_windows: bool = False, windows: dict[str, int] | None = None) -> TilePlan:
    """Place each stream's circular buffer (CB_DEPTH tiles) and, for gathered streams, a staging window; one more
    window per buffer the gathers' indices load from. `resident_windows` (the reduction layout's readers): a gathered
    input buffer larger than its window gets a window that holds it whole while L1 has room (l1.grow_window).
    `windows`: larger sizes some windows would like (tile_streams.column_windows), each taken while L1 has room."""
    sizes = {}
    for name, s in [(f"in{j}", s) for j, s in enumerate(plan.inputs)] + [("out", plan.output)]:
        sizes[f"cb_{name}"] = CB_DEPTH * TILE_BYTES[s.tile_format]
        if not s.contiguous:
            sizes[f"stage_{name}"] = STAGING_BYTES
    for k in index_load_buffers(plan):
        sizes[f"stage_ld{k}"] = STAGING_BYTES
    plan.windows = {}
    for j, s in enumerate(plan.inputs) if resident_windows else ():
        name = f"stage_in{j}"
        if name in sizes and s.value is None and (size := grow_window(sizes, name, plan.buffers[s.buf].nbytes)):
            plan.windows[name] = size
    for name, want in (windows or {}).items():
        if sizes[name] < want and room(sizes) >= aligned(want) - aligned(sizes[name]):
            sizes[name] = plan.windows[name] = want
    l1 = place(sizes)
    if l1 is None:
        raise UnsupportedOp(f"{plan.name}: {len(plan.inputs)} input streams need {l1_bytes(sizes)} bytes of L1, more "
                            f"than the {CAPACITY} available")
    plan.l1 = l1
    return plan
