"""KernelPlan: everything the templates need to render the five C99 sources of one kernel.

The frontend fills it from a tinygrad AST; `allocate_l1` places circular buffers and staging windows; the renderer
turns it into C; the runtime launches it with `arg_words`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from tt_backend.chip import layout
from tt_backend.lowering.index import IndexExpr, IndexTexts

TILE_ELEMS = 1024                       # a 32x32 tile; for elementwise kernels tile t holds flat elements 1024t..
TILE_BYTES = {"fp32": 4 * TILE_ELEMS, "bf16": 2 * TILE_ELEMS}
DTYPE_SIZE = {"float32": 4, "bfloat16": 2, "int32": 4, "bool": 1}
TILE_FORMAT_OF = {"float32": "fp32", "int32": "fp32", "bool": "fp32", "bfloat16": "bf16"}


@dataclass(frozen=True)
class Target:
    """Where a kernel will run, as far as code generation cares. ttsim does not implement SFPLOADMACRO (its SFPU
    stops on it), so schedules for it (directly, or under tt-umd's simulation device: umd-sim) must be macro-free;
    the emulator and the card take the macro schedules."""
    name: str               # emu | ttsim | umd-sim | hw
    macro_free: bool        # no SFPLOADMACRO in the SFPU program

    @property
    def schedule(self) -> str:
        return f"macro-free schedule ({self.name})" if self.macro_free else "SFPLOADMACRO allowed"


TARGETS = {"emu": Target("emu", False), "ttsim": Target("ttsim", True), "umd-sim": Target("umd-sim", True),
           "hw": Target("hw", False)}


@dataclass
class SfpuProgram:
    setup: list[int]        # Tensix words run once per tile before the row loop
    body: list[int]         # Tensix words for one 32-lane row step; the last is an SFPSTORE with sfpu_addr_mode=1
    dst_slots: int          # Dst32b tile slots used (inputs + output + spills), <= 8
    out_slot: int           # Dst slot the output tile is written to


@dataclass
class Buffer:
    slot: int               # tinygrad parameter position
    dtype: str
    nbytes: int


@dataclass
class Stream(IndexTexts):
    """One buffer access of a kernel; index_c, valid_c, value_c: the C text of its expressions (the templates')."""
    buf: int                # index into KernelPlan.buffers
    dtype: str              # element dtype in DRAM
    index: IndexExpr | None      # element index into the buffer over ranges r0..r{n-1}; None: the kernel family's
                                 # own reader/writer addresses the buffer (matmul)
    valid: IndexExpr | None = None   # false -> element reads as 0 (pads); never read out of bounds
    contiguous: bool = False     # index == flat iteration index, always valid: bulk NoC copy, no gather
    value: IndexExpr | None = None   # computed stream: the datum is this expression of the ranges (index math that
                                     # reaches the value part: arange, argmax's reversed index); no buffer is read
    coef: tuple[int, ...] | None = None  # index.coefficients(): affine coefficients (range 0..n-1, then the constant),
                                         # None when not affine or to force the per-datum gather: picks the reader's
                                         # run paths (lowering/render.py reader_mode)

    @property
    def tile_format(self) -> str:
        return TILE_FORMAT_OF[self.dtype]


@dataclass
class ReducePass:
    """The first pass of a two-pass reduction (lowering/reduce.py `plan_two_pass`): reductions whose values a later
    reduction's pre-op reads. Its program folds each row step into its accumulators like the final pass; after a
    group's last tile `finish` combines each output's lanes, broadcasts the result to all of the output's lanes and
    stores it to every row step of Dst slot `slot` + i (steps < 32: `group_store` does that per step group), where
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
    """A reduction kernel (lowering/reduce.py). The iteration space is `out_sizes` (outputs o, row-major) x
    `red_sizes` (reduce index k, row-major). Tile t = group g * tiles_per_group + tk; a tile is 32 row steps x 32 lanes
    and holds `cells` = 32 // lanes outputs (o = g * cells + j): output j owns lanes [j*lanes, (j+1)*lanes) of every
    row step, i.e. k = tk * 32 * lanes + step * lanes + lane % lanes. The phase-1 program (KernelPlan.sfpu) folds
    each row step into the accumulator LReg `acc_reg`; after a group's last tile `finish` combines the lanes of each
    output and stores the result at row step 0 of Dst slot `acc_slot`, then `post` (elementwise after the reduce, the
    reduced value being its input `acc_slot`) writes the output tile. Output j is datum `out_datum(j)` of that tile.
    Two-pass reductions (`pass1` set): each group's tiles stream twice (tile t: pass (t // tiles_per_group) % 2);
    pass 1 runs `pass1` (its results broadcast to Dst slots pass1.slot..), pass 2 is the plan above."""
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

    @property
    def passes(self) -> int:
        return 1 if self.pass1 is None else 2

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


def reduce_out_datum(lanes: int, j: int, steps: int = 32) -> int:
    """Datum of output j in a reduction's output tile: row step `steps` * (step group), the lane the lane combine
    leaves it in (SFPLOAD lane mapping: row step s, lane l <-> datum 64(s>>1) + 16(l>>3) + 2(l&7) + (s&1))."""
    per_group = 32 // lanes
    step, lane = steps * (j // per_group), (j % per_group) * lanes + min(lanes, 8) - 1
    return 64 * (step >> 1) + 16 * (lane >> 3) + 2 * (lane & 7) + (step & 1)


@dataclass
class KernelPlan:
    name: str
    ranges: tuple[int, ...]             # iteration space, outermost first; flat index = row-major over ranges
    buffers: list[Buffer]
    inputs: list[Stream]                # input j is unpacked into Dst32b slot j
    output: Stream
    sfpu: SfpuProgram
    ops: list[str] = field(default_factory=list)   # for reports
    l1: dict[str, int] = field(default_factory=dict)  # filled by allocate_l1
    target: Target = field(default_factory=lambda: TARGETS["emu"])   # set by for_target
    reduce: ReducePlan | None = None    # set for reduction kernels (lowering/reduce.py)
    # FPU placement (lowering/placement.py): FpuOps run before the SFPU program, each writing Dst slot op.slot;
    # dst_inputs = the input streams unpacked to Dst (None: all); placement = the report of lowering.placement.place
    fpu_ops: list = field(default_factory=list)
    dst_inputs: list[int] | None = None
    placement: object | None = None

    @property
    def n_elements(self) -> int:
        return math.prod(self.ranges) if self.ranges else 1

    def render(self) -> dict[str, str]:
        """The five C sources and headers (tt_backend.lowering.render; MatmulPlan has its own render)."""
        from tt_backend.lowering.render import render
        return render(self)

    @property
    def n_tiles(self) -> int:
        if self.reduce is not None:
            return self.reduce.groups * self.reduce.tiles_per_group * self.reduce.passes
        return max(1, -(-self.n_elements // TILE_ELEMS))

    # argument block: [n_tiles, n_elements, dram address of each buffer...]
    def arg_words(self, dram_addrs: list[int]) -> list[int]:
        if len(dram_addrs) != len(self.buffers):
            raise ValueError(f"{self.name}: {len(self.buffers)} buffers, got {len(dram_addrs)} addresses")
        return [self.n_tiles, self.n_elements, *dram_addrs]


def _map_sfpu_words(plan, f) -> None:
    """Apply f to every list of Tensix words the plan's SFPU programs are made of (elementwise and reduction)."""
    if (s := getattr(plan, "sfpu", None)) is not None:
        plan.sfpu = replace(s, setup=[f(w) for w in s.setup], body=[f(w) for w in s.body])
    if (r := getattr(plan, "reduce", None)) is not None:
        post = replace(r.post, setup=[f(w) for w in r.post.setup], body=[f(w) for w in r.post.body])
        p1 = r.pass1
        if p1 is not None:
            p1 = replace(p1, sfpu=replace(p1.sfpu, setup=[f(w) for w in p1.sfpu.setup], body=[f(w) for w in p1.sfpu.body]),
                         acc_init=[f(w) for w in p1.acc_init], finish=[f(w) for w in p1.finish],
                         group_store=[f(w) for w in p1.group_store])
        plan.reduce = replace(r, post=post, acc_init=[f(w) for w in r.acc_init], finish=[f(w) for w in r.finish],
                              group_store=[f(w) for w in r.group_store], pass1=p1)


def for_target(plan, target: Target | str):
    """Bind a plan to `target`: a macro-free target rejects SFPU programs that contain SFPLOADMACRO."""
    target = TARGETS[target] if isinstance(target, str) else target
    if target.macro_free:
        from tt_backend.chip import isa

        def no_macro(word: int) -> int:
            if isa.decode(word)[0] == "SFPLOADMACRO":
                from tt_backend.chip.errors import UnsupportedOp
                raise UnsupportedOp(f"{plan.name}: its SFPU program uses SFPLOADMACRO, which {target.name} does not "
                                    f"implement; lower it with a {target.schedule}")
            return word
        _map_sfpu_words(plan, no_macro)
    plan.target = target
    return plan


CB_DEPTH = 2                    # tiles per circular buffer (double buffering)
STAGING_BYTES = 32 * 1024       # per gathered stream: a window of the source buffer in L1


def allocate_l1(plan: KernelPlan) -> KernelPlan:
    """Place each stream's circular buffer (CB_DEPTH tiles) and, for gathered streams, a staging window."""
    addr = layout.DATA_BASE
    l1 = {}
    for name, s in [(f"in{j}", s) for j, s in enumerate(plan.inputs)] + [("out", plan.output)]:
        l1[f"cb_{name}"] = addr
        addr += CB_DEPTH * TILE_BYTES[s.tile_format]
        if not s.contiguous:
            l1[f"stage_{name}"] = addr
            addr += STAGING_BYTES
    if addr > layout.DATA_END:
        from tt_backend.chip.errors import UnsupportedOp
        raise UnsupportedOp(f"{plan.name}: {len(plan.inputs)} input streams need {addr - layout.DATA_BASE} bytes of "
                            f"L1, more than the {layout.DATA_END - layout.DATA_BASE} available")
    plan.l1 = l1
    return plan
