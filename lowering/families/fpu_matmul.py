"""The FPU matmul family: a matched matmul (matmul_spec.MatmulSpec) with MVMUL. `plan_matmul` turns the spec into an
`FpuMatmulPlan` (fidelity, source format, L1 allocation) and `render_matmul` into the reader / compute / writer sources.

Data flow (one Tensix core, docs/fpu_path.md §5-9):
* reader (BRISC): per batch and per block of B's columns (MM_NB column tiles: as many as L1 holds), that block of B
  tilized into L1 (face layout, zero padded, K/32 x MM_NB tiles); per row block of A, one panel of K/32 tiles (double
  buffered; the block's first panel started before B's tilize, its NoC reads landing meanwhile). DRAM lines are
  fetched with NoC reads into a staging line and scattered into faces by the RISC-V (word copies for row-contiguous
  operands, element copies for transposed ones),
  except A's panels when `a_panel_rows` and B's blocks when the plan's `b_layout` is not "tiles" (b_panel_rows and
  the launch model predicts it faster, choose_b_layout): those stay row-major (one NoC read per row straight into the
  slot; B's block of ct column tiles with rows of 64 ct bytes; for "tensix" into L1_B_ROWS, the reader and the
  writer half each, and the pack thread's token (CB_B_TILED) tells the reader when the Tensix has tilized them into
  the slot, before the share).
* TRISC0: the output tiles go in groups of `dst_group` (4 with an epilogue, else 1) column tiles. Per group and K
  block, unpacker 1 takes A's tile (in0, M x K) to SrcB once and unpacker 0 the group's B tiles (in1, K x N) to SrcA
  one after another (consecutive in L1: each UNPACR steps the Z counter by a tile), whole tiles (1024 datums): bf16
  stays bf16, fp32 is truncated to tf32 by the unpacker. A row-major A panel is unpacked face row by face row (64
  UNPACRs of 16 datums, codegen/mvmul.face_row_words), the next K block's faces issued between the group's B tiles;
  a row-major B block ("rows") likewise by unpacker 0, every B tile of every product (the group's tiles side by side
  from one base: their columns as ADC x offsets), which makes thread 0 the pace-setter (about 93 cycles per tile
  product) in exchange for no RISC-V tilize of B before the first product. "tensix": per block, first the tilize
  pass over this core's share of B: thread 0 walks each tile into SrcA, TRISC1 copies it into Dst's 16-bit rows (8
  MOVA2Ds; cfg 1 switched for the pass), TRISC2 packs it in face layout into CB_B's slot (the packer reconfigured
  around the pass), the Dst sets alternating by FREE / MATHDONE; then the products on whole tiles as for "tiles"
  (docs/performance.md §8.3).
* TRISC1: ZEROACC the group's fp32 Dst tiles (without an epilogue slot 0; with one the group's set of DST_SET slots,
  groups alternating between slots 0-3 and 4-7), then per K block and output tile `fidelity` phases of 16 MVMULs
  (`Dst += SrcB @ SrcA`), the last one releasing SrcA's bank (the group's last tile: SrcB's too). The C tiles
  accumulate in fp32 Dst over all K blocks; MATHDONE hands the group (set) to TRISC2, FREE hands the set back.
* TRISC2, for a bf16-rounded result: the SFPU epilogue (matmul_epilogue.py) rounds each tile of the group to bf16
  (nearest even) in place while TRISC1's MVMULs fill the other set, then the packer takes the tile: a bf16 output with
  16-byte aligned rows (matmul_spec.out_packed_rows) as bf16 rows straight into a row-major panel of the row block's
  output (one PACR stream per face row, codegen/mvmul.packed_rows_words), else the fp32 tile to the output CB (a bf16
  output's columns paired two to a 32-bit word). Without an epilogue it packs the fp32 tile from slot 0.
* writer (NCRISC): a packed panel's rows, one NoC write per row. Otherwise the writer and the reader (BRISC)
  untilize each 32-row panel of C (word copies: the rounding is done), the reader rows
  0..15 of every tile and the writer rows 16..31 (blocks/matmul_out.c.j2: the reader reads CB_OUT through its own
  view and hands each tile on with a CB_OUT_UPPER token), each masking the edges and writing its rows with one NoC
  write per row. The reader does a row block's upper rows after reading the next A panel, so the untilize (about
  1.3 RISC-V cycles per output) is split over two cores, not added to one; on a grid too (bf16 1024^3 on 8 x 8 cores:
  82,115 emulated cycles with the split, 90,566 with the writer alone: the reader's shares wait less for it than the
  writer's untilize holds up the packer).

Precision: bf16 x bf16 at HiFi4 is exact per product, but the fp32 accumulation aligns each group of 8 products to
its largest (docs/fpu_path.md §10.3), and fp32 inputs go through tf32: neither is fp32-faithful, so the FPU runs a matmul
only when the caller passes an error budget that allows it; otherwise the fp32 SFPU matmul
(lowering/families/sfpu_matmul.py) is the one acceptable candidate.

On a grid (`use_cores`): the output tiles are 2D-blocked, the core grid's rows splitting the row blocks and its
columns splitting the column tiles (argument words after the buffers: this core's row blocks [MT0, MT1) and column
tiles [NT0, NT1), its grid position, core_arg_words); core (i, j) runs on the chip's Tensix tile of row i and column
j (core_xys). Every core runs the same ELFs: it tilizes its share of the K tiles of each A panel (of a row-major
panel: reads its share of the rows, whole rows of A) and multicasts it along its grid row, and its share of each B
block down its grid column (reader and writer each the half they tilized or read, over NoC0 and NoC1:
templates/blocks/matmul_share.c.j2), with semaphores per CB slot (docs/performance.md §8.1). The grid shape is the
one the launch model (mover_cost.matmul_cycles) predicts fastest.

Candidates: one per fidelity, priced in MVMULs (16 per K block and phase per output tile). Their error is the metric
TT_ERR_BUDGET is defined in: the relative L2 error against float32 (`predicted_errors`), predicted by running the
kernel's arithmetic (the injected bit-exact MVMUL model, Placer.matmul_evaluator) on sample operands of the kernel's K
drawn from every sample distribution (the worst counts). Acceptable when that is <= SAFETY x the budget and the
error has a bound for all data within the budget (lowering.placement.guarantee: a matmul of loaded operands has none,
its dot products can cancel), or the user opted into sample-data placements (TT_BUDGET_SAMPLED=1); without a budget
or without the model, none is. Callers of `plan_matmul` (tests, `bench kernels`) choose a fidelity explicitly.
"""
from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

import numpy as np

from tt_backend.lowering.codegen.l1 import CAPACITY, l1_bytes, place
from tt_backend.lowering.codegen.mvmul import (ALU_FORMAT_MM, ALU_FORMAT_TILIZE, PACK_CFG_TILIZE, PACKED_ROWS_DSTACC,
                                              UNP0_DESC1, UNP0_X_DIM, UNP0_X_DIM_HIGH, UNPACK_CFG_MM,
                                              UNPACK_CFG_MM_COMMON, dst_token_words, face_row_cfg, face_row_words,
                                              matmul_words, packed_rows_cfg, packed_rows_words, tilize_pass_words)
from tt_backend.lowering.codegen.sources import kernel_sources
from tt_backend.lowering.codegen.tensix import PACK_CFG, tensix_words
from tt_backend.lowering.codegen.words import hex_u32, word_u32
from tt_backend.lowering.families.family import Candidate, Family, Kernel
from tt_backend.lowering.families.matmul_match import kernel_matmul
from tt_backend.lowering.families.matmul_epilogue import epilogue_ctx, epilogue_mode, epilogue_tile_cycles
from tt_backend.lowering.families.matmul_spec import (TILE, MatmulKernelPlan, MatmulSpec, matmul_args_header,
                                                      matmul_io, operand_ctx, out_packed_rows, out_pitch, stage_bytes)
from tt_backend.lowering.families.mover_cost import MM_SHARE_PIECE, matmul_cycles, split_ranges
from tt_backend.lowering.placement.guarantee import acceptable, fpu_reduction_guarantee
from tt_backend.lowering.placement.reference import bf16_round, rel_error, sample_inputs
from tt_backend.lowering.placement.search import BF16_ULP, ELWMUL_WORST, SAFETY, UNPACK_TRUNC
from tt_backend.lowering.plan import DTYPE_SIZE, Report
from tt_backend.chip.grid import TENSIX_COLUMNS, TENSIX_ROWS, Grid
from tt_backend.chip.errors import UnsupportedOp
from tt_backend.chip.numerics.fpu_math import FIDELITY_PHASES

NAME = "fpu_matmul"
GENERATOR = "lowering/families/fpu_matmul.py"

SAMPLE_OUTPUTS = 16   # sample rows and columns per distribution: 16 x 16 outputs, each a dot product of the kernel's K


@dataclass
class FpuMatmulPlan(MatmulKernelPlan):
    fidelity: str              # LoFi | HiFi2 | HiFi3 | HiFi4
    src_format: str            # bf16 | tf32 (what the multiplier sees)
    predicted_err: float | None   # relative L2 against float32 on the samples (None: no error model was given)
    block_cols: int = 0        # MM_NB: B's column tiles resident in L1 at once (allocate_matmul_l1)
    grid: tuple[int, int] = (1, 1)   # (rows, columns) of the core grid the output tiles are blocked over
    b_layout: str = "tiles"    # how B reaches SrcA (B_LAYOUTS; choose_b_layout)

    @property
    def phases(self) -> int: return FIDELITY_PHASES[self.fidelity]

    def render(self) -> dict[str, str]:
        return render_matmul(self)

    @property
    def b_rows(self) -> bool:
        """Whether B's blocks reach L1 row-major (read, not tilized by the movers)."""
        return self.b_layout != "tiles"

    @property
    def b_split(self) -> bool:
        """Whether the reader and the writer tilize B together (b_split; a row-major B is read, not tilized)."""
        return b_split(self.spec) and not self.b_rows

    def launch_cycles(self, grid: tuple[int, int] | None = None) -> dict:
        """The launch on `grid` (rows, columns; default: the plan's), with its shape and tiles per core."""
        grid = self.grid if grid is None else grid
        modes = ("panel" if a_panel_rows(self.spec) else operand_ctx(self.spec.a)["mode"],
                 {"tiles": operand_ctx(self.spec.b)["mode"], "rows": "panel", "tensix": "tensix"}[self.b_layout])
        return matmul_cycles(self.spec, self.phases, modes, epilogue_tile_cycles(self.spec), self.b_split,
                             self.block_cols, grid, dst_group(self.spec), out_packed_rows(self.spec))

    def with_b_layout(self, layout: str) -> FpuMatmulPlan | None:
        """A copy with B in `layout` and its L1 allocated, or None when it does not fit."""
        plan = dataclasses.replace(self, b_layout=layout)
        try:
            return allocate_matmul_l1(plan)
        except UnsupportedOp:
            return None

    def choose_b_layout(self, max_cores: int | None = None) -> None:
        """B's layout and the grid (of at most `max_cores` cores; default: the plan's grid) the launch model predicts
        fastest, each extra core priced at CORE_LAUNCH_CYCLES (the smaller of equally fast grids): B tilized by the
        movers once per block, row-major with unpacker 0 walking its face rows on every tile product, or row-major
        and tilized by the Tensix once per block (B_LAYOUTS, docs/performance.md §8.3)."""
        options = [(p, g) for p in filter(None, map(self.with_b_layout, b_layouts(self.spec)))
                   for g in (grid_options(self.tiles, max_cores, p.block_cols) if max_cores else [self.grid])]
        best, self.grid = min(options, key=lambda o: (o[0].launch_cycles(o[1])["price"], o[1][0] * o[1][1],
                                                      o[1], B_LAYOUTS.index(o[0].b_layout)))
        self.b_layout, self.l1, self.block_cols = best.b_layout, best.l1, best.block_cols
        self.cores = self.grid[0] * self.grid[1]

    def blocks(self, grid: tuple[int, int] | None = None) -> list[tuple[int, int, int, int]]:
        """Each core's (MT0, MT1, NT0, NT1): row blocks and column tiles, row-major over the grid."""
        gr, gc = self.grid if grid is None else grid
        mt, nt, _ = self.tiles
        return [(*r, *c) for r in split_ranges(mt, gr) for c in split_ranges(nt, gc)]

    def arg_words(self, dram_addrs: list[int]) -> list[int]:
        """One core's argument block: all the output tiles."""
        return self.core_arg_words(dram_addrs, (1, 1))[0]

    def core_xys(self, grid: tuple[int, int] | None = None) -> list[tuple[int, int]]:
        """Core (i, j) of the grid on the Tensix tile of the chip's i-th row and j-th column (translated
        coordinates), so that every grid row and column is a rectangle of the NoC: one multicast reaches it."""
        gr, gc = self.grid if grid is None else grid
        return [(TENSIX_COLUMNS[j], TENSIX_ROWS[i]) for i in range(gr) for j in range(gc)]

    def core_arg_words(self, dram_addrs: list[int], grid: tuple[int, int] | None = None) -> list[list[int]]:
        """Per core of the grid (row-major, on the tiles of core_xys): its block, its grid row and column (size, own
        index, multicast rectangle, the peers' NoC coordinates) and the zeroed semaphores of the operand sharing
        (args_header_mm)."""
        gr, gc = self.grid if grid is None else grid
        base = super().arg_words(dram_addrs)
        xys = self.core_xys((gr, gc))
        words = [x | (y << 6) for x, y in xys]
        out = []
        for k, block in enumerate(self.blocks((gr, gc))):
            i, j = divmod(k, gc)
            row, col = xys[i * gc:(i + 1) * gc], xys[j::gc]
            args = [*base, *block, gc, j, gr, i, mcast_rect(row), mcast_rect(col)]
            args += [0] * (sem_word(self) - len(args) + 4 * len(SEMAPHORES))
            out.append(args + words[i * gc:(i + 1) * gc] + words[j::gc])
        return out

    def use_cores(self, max_cores: int) -> None:
        """The grid of at most `max_cores` cores and B's layout the launch model predicts fastest
        (choose_b_layout)."""
        self.choose_b_layout(max_cores)


def mcast_rect(xys: list[tuple[int, int]]) -> int:
    """The NoC0 multicast coordinate word (end_x | end_y << 6 | start_x << 12 | start_y << 18) of the rectangle from
    the first to the last of `xys` (a grid row or column on core_xys' tiles), 0 for a single tile."""
    (sx, sy), (ex, ey) = xys[0], xys[-1]
    return 0 if len(xys) == 1 else ex | ey << 6 | sx << 12 | sy << 18


def grid_options(tiles: tuple[int, int, int], max_cores: int, block_cols: int) -> list[tuple[int, int]]:
    """Every (rows, columns) grid of at most `max_cores` cores with at least one row block and one column tile each,
    at most the chip's columns wide and rows high (a grid row shares A's panels, so its cores must walk as many blocks
    of `block_cols` column tiles: equal block counts)."""
    mt, nt, _ = tiles
    rows, cols = len(TENSIX_ROWS), Grid().columns

    def same_blocks(c: int) -> bool:
        return len({-(-(e - b) // block_cols) for b, e in split_ranges(nt, c)}) == 1
    return [(r, c) for r in range(1, min(mt, max_cores, rows) + 1)
            for c in range(1, min(nt, max_cores // r, cols) + 1) if same_blocks(c)]


def src_format_of(spec: MatmulSpec) -> str:
    """What the multiplier sees: bf16 operands stay bf16, fp32 ones are truncated to tf32 by the unpacker."""
    return "bf16" if spec.a.tile == "bf16" else "tf32"


def mvmul_count(spec: MatmulSpec, phases: int) -> int:
    """MVMULs of the kernel: 16 per fidelity phase per (output tile, K block)."""
    mt, nt, kt = spec.tiles
    return spec.n_batch * mt * nt * kt * 16 * phases


class FpuMatmulReport(Report):
    """The matmul's placement for reports: one FPU node, its fidelity, formats and predicted error."""

    def __init__(self, plan: FpuMatmulPlan):
        mvmuls = mvmul_count(plan.spec, plan.phases)
        self.budget, self.predicted_error = None, plan.predicted_err
        self.nodes = [{"id": 0, "op": "MATMUL", "engine": "FPU", "fidelity": plan.fidelity, "pinned": False,
                       "formats": {"srca": plan.src_format, "srcb": plan.src_format},
                       "predicted_error": plan.predicted_err, "bound": plan.predicted_err, "cycles": mvmuls}]
        self.kernel, self.src_format = plan.name, plan.src_format

    def report(self) -> dict:
        return {"kernel": self.kernel, "budget": self.budget, "predicted_error": self.predicted_error,
                "predicted_max_rel": None, "predicted_cycles": self.nodes[0]["cycles"], "predicted_cycles_per_tile": {},
                "all_sfpu_cycles": None, "reassociated": False, "evaluator_error": "relative L2 against float32 of the "
                "bit-exact MVMUL model on sample operands of the kernel's K (worst sample distribution)",
                "bound_all_data": None, "bound_reason": fpu_reduction_guarantee("matmul", self.src_format,
                                                                                self.nodes[0]["fidelity"]).reason,
                "nodes": self.nodes}


def predicted_errors(kernel: Kernel, spec: MatmulSpec) -> dict[str, float] | None:
    """fidelity -> predicted relative L2 error of the kernel's output against float32 (None without an error model)."""
    pl = kernel.placer
    if pl is None or pl.matmul_evaluator is None:
        return None
    return sample_errors(pl.matmul_evaluator, src_format_of(spec), spec.K, spec.out_bf16, pl.sample_dists, pl.seed)


@functools.lru_cache(maxsize=64)
def sample_errors(evaluator, src_format: str, K: int, out_bf16: bool, dists: tuple[str, ...],
                  seed: int) -> dict[str, float]:
    """Per fidelity, the worst over `dists` of the relative L2 error of SAMPLE_OUTPUTS^2 outputs: `evaluator` (a, b,
    src_format, phases) -> fp32 Dst words, rounded to bf16 (nearest even, as the writer does) for bf16 outputs, against
    the float32 product (accumulated in float64, rounded once; bf16-rounded for bf16 outputs); at least
    `dominant_product_bound` (the heavy-tailed limit). Data whose sums cancel more than the samples' can exceed it."""
    n = SAMPLE_OUTPUTS
    dt = "bfloat16" if src_format == "bf16" else "float32"
    errs = dict.fromkeys(FIDELITY_PHASES, 0.0)
    for i, dist in enumerate(dists):
        a, b = (x.reshape(shape) for x, shape in zip(sample_inputs([dt, dt], n * K, seed + i, dist), ((n, K), (K, n))))
        ref = (a.astype(np.float64) @ b).astype(np.float32)
        for fid, phases in FIDELITY_PHASES.items():
            out = evaluator(a, b, src_format, phases).view(np.float32)
            err = rel_error(bf16_round(out), bf16_round(ref))[0] if out_bf16 else rel_error(out, ref)[0]
            errs[fid] = max(errs[fid], err)
    return {fid: max(e, dominant_product_bound(src_format, FIDELITY_PHASES[fid], out_bf16)) for fid, e in errs.items()}


def dominant_product_bound(src_format: str, phases: int, out_bf16: bool) -> float:
    """The relative error of an output that one product dominates (heavy-tailed data, unlike the samples): that
    product's worst relative error (operand truncation by the unpacker plus the bits the phases drop, the elementwise
    multiplier's bound: search.ELWMUL_WORST, UNPACK_TRUNC), and a possible flip of the bf16 output rounding."""
    dt = "bfloat16" if src_format == "bf16" else "float32"
    e = ELWMUL_WORST[src_format][phases] + 2 * UNPACK_TRUNC[(dt, src_format)]
    return (1 + e) * (1 + BF16_ULP) - 1 if out_bf16 and e > 0 else e


def plan_matmul(spec: MatmulSpec, name: str, fidelity: str, predicted_err: float | None = None) -> FpuMatmulPlan:
    src_format = src_format_of(spec)
    if fidelity not in FIDELITY_PHASES:
        raise UnsupportedOp(f"{name}: unknown fidelity {fidelity!r} (one of {', '.join(FIDELITY_PHASES)})")
    plan = FpuMatmulPlan(name, spec.ranges, *matmul_io(spec, name), spec, fidelity, src_format, predicted_err,
                         ops=[f"MATMUL[{src_format},{fidelity}]"])
    allocate_matmul_l1(plan)
    plan.choose_b_layout()
    plan.placement = FpuMatmulReport(plan)
    return plan


def allocate_matmul_l1(plan: FpuMatmulPlan) -> FpuMatmulPlan:
    """L1 for the widest block of B's columns that fits (all of them when B fits: `block_cols`; with the packer
    writing the output panel, at most PACKED_MAX_NB: its row offsets are a 13-bit counter, packed_rows_words)."""
    widest = min(plan.tiles[1], PACKED_MAX_NB) if out_packed_rows(plan.spec) else plan.tiles[1]
    for nb in range(widest, 0, -1):
        sizes = matmul_l1_sizes(plan, nb)
        if (l1 := place(sizes)) is not None:
            plan.l1, plan.block_cols = l1, nb
            return plan
    s = plan.spec
    raise UnsupportedOp(f"{plan.name}: matmul {s.M}x{s.K} @ {s.K}x{s.N} needs {l1_bytes(sizes)} bytes of L1 "
                        f"(one column tile of B resident: {sizes['cb_b']}), more than the {CAPACITY} available")


PACKED_MAX_NB = 128   # column tiles of a packed output panel (ch1.Y up to 31 * 64 * 128 / 32 + 1 < 2^13)


def panel_pitch(nb: int) -> int:
    """Bytes per row of the packer's output panel (out_packed_rows): nb column tiles of bf16."""
    return 2 * TILE * nb


def matmul_l1_sizes(plan: FpuMatmulPlan, nb: int) -> dict[str, int]:
    """The L1 regions with `nb` of B's column tiles resident."""
    s = plan.spec
    kt = plan.tiles[2]
    tb = 2 * 1024 if plan.src_format == "bf16" else 4 * 1024
    sizes = {
        "cb_b": kt * nb * tb,                                    # a block of B's columns (one batch), depth 1
        "cb_a": A_SLOTS * kt * tb,                               # A panels, depth A_SLOTS
        "stage_in": stage_bytes(s),
    }
    if out_packed_rows(s):
        sizes["cb_out"] = 2 * TILE * panel_pitch(nb)             # the packer's output panels, depth 2
    else:
        sizes["cb_out"] = 2 * 4096                               # fp32 C tiles, depth 2
        sizes["stage_out"] = TILE * out_pitch(min(s.N, TILE * nb), DTYPE_SIZE[s.out.dtype])
    if plan.b_layout == "tensix":
        sizes["b_rows"] = sizes["cb_b"]                          # B's rows before the Tensix tilizes them into CB_B
    if plan.b_split:
        sizes["stage_in_w"] = sizes["stage_in"]                 # the writer's staging line for B's lower rows
    return sizes


def b_split(spec: MatmulSpec) -> bool:
    """Whether the reader and the writer tilize B together (the reader its upper tile rows, the writer the lower ones,
    at the same time: B is the launch's fill, when the writer has nothing to write yet). Only for the line-by-line
    modes: an element gather reads through the reader's own staging window."""
    return operand_ctx(spec.b)["mode"] in ("rows", "cols")


def a_panel_rows(spec: MatmulSpec) -> bool:
    """Whether A's panels stay row-major in L1 (32 rows of K elements, one NoC read per row, no RISC-V tilize) and
    unpacker 1 walks each tile's face rows out of the panel (codegen/mvmul.face_row_words): bf16 rows contiguous in
    DRAM whose every tile row starts on a 64-byte line (K, the row and batch strides and the offset multiples of
    32 elements: a NoC read wants the same address mod 64 at both ends) and a K that fits the tile descriptor's
    16-bit row length. Other operands are tilized by the reader."""
    return rows_walkable(spec.a, spec.K, (spec.K,))


def rows_walkable(op, row_datums: int, dims: tuple[int, ...]) -> bool:
    """The row-major condition a_panel_rows and b_panel_rows share: operand `op` bf16 with contiguous rows, a row
    the unpacker walks of `row_datums` (within the tile descriptor's 16-bit x_dim), and `dims`, the row and batch
    strides and the offset multiples of 32 elements (every tile row on a 64-byte line)."""
    return (op.dtype == "bfloat16" and op.tile == "bf16" and op.cs == 1 and row_datums < 1 << 16
            and all(v % TILE == 0 for v in (*dims, op.rs, op.offset, *op.bs)))


BLOCK_WORDS = ("MT0", "MT1", "NT0", "NT1", "ROW_N", "ROW_IDX", "COL_N", "COL_IDX", "ROW_RECT", "COL_RECT")
# CB_A's slots: a grid row shares each A panel in lockstep (a core sends panel p once every peer has freed its slot,
# i.e. finished panel p - A_SLOTS), so with two slots each panel's reads and shares started only after the slowest
# peer's previous row block and the products waited for them between row blocks (bf16 1024^3 on 8 x 8: 45,758
# emulated cycles with 2 slots, see docs/performance.md §8.1 for 3)
A_SLOTS = 3
SEMAPHORES = (*(f"A_FREE{i or ''}" for i in range(A_SLOTS)), *(f"A_FILLED{i or ''}" for i in range(A_SLOTS)),
              "B_FREE", "B_FILLED", "RET")   # 16 bytes each; per slot of CB_A a FREE and a FILLED


B_LAYOUTS = ("tiles", "rows", "tensix")


def b_layouts(spec: MatmulSpec) -> tuple[str, ...]:
    """B's possible layouts: tilized by the movers always; row-major when b_panel_rows, walked by unpacker 0 on
    every product, or tilized by the Tensix once per block when the packer writes the output's rows (the pass
    reconfigures the packer around it: codegen/mvmul.PACK_CFG_TILIZE)."""
    if not b_panel_rows(spec):
        return B_LAYOUTS[:1]
    return B_LAYOUTS if out_packed_rows(spec) else B_LAYOUTS[:2]


def b_panel_rows(spec: MatmulSpec) -> bool:
    """Whether B's blocks may stay row-major in L1 (row r of a block of ct column tiles at r * 64 ct bytes, one NoC
    read per row, no RISC-V tilize) with unpacker 0 walking each tile's face rows (codegen/mvmul.face_row_words):
    bf16 rows contiguous in DRAM, every tile row on a 64-byte line (N, K, the row and batch strides and the offset
    multiples of 32 elements: whole tiles, no padding) and a block row that fits unpacker 0's 16-bit x_dim."""
    return rows_walkable(spec.b, spec.N, (spec.K, spec.N))


def block_words(plan: FpuMatmulPlan) -> int:
    """Argument words before the semaphores: n_tiles, n_elements, the buffers, the block (4), the grid position (4),
    the multicast rectangles (2)."""
    return 2 + len(plan.buffers) + len(BLOCK_WORDS)


def sem_word(plan: FpuMatmulPlan) -> int:
    """The first semaphore's argument word (16-byte aligned: NoC atomics want it)."""
    return -(-block_words(plan) // 4) * 4


def args_header_mm(plan: FpuMatmulPlan) -> str:
    tb = 2048 if plan.src_format == "bf16" else 4096
    split = ["#define CB_B_LOWER 3u"] if plan.b_split else []
    if plan.b_layout == "tensix":   # the tilize pass's tokens (blocks/cb.c.j2)
        split = ["#define CB_B_TILED 3u", "#define CB_B_ROWS 5u", "#define CB_B_ROWS_LOWER 6u", "#define CB_B_LOWER 7u",
                 "#define CB_B_TILED_W 8u"]
    upper = ["#define CB_OUT_UPPER 4u  /* reader -> writer: a C tile's upper rows untilized (blocks/matmul_out) */"]
    if out_packed_rows(plan.spec):
        upper += [f"#define MM_PANEL_PITCH {panel_pitch(plan.block_cols)}u  /* the packer's output panel: row r at "
                  "slot + r * pitch */"]
    panel_rows = [f"#define MM_A_PITCH {2 * plan.spec.K}u  /* A's panels row-major: row r at slot + r * pitch */"
                  ] if a_panel_rows(plan.spec) else []
    n, sem = len(plan.buffers), sem_word(plan)
    block = ["/* this core's row blocks [MT0, MT1) and column tiles [NT0, NT1), its grid row's size and its index there,",
             " * its grid column's alike, the row's and the column's multicast rectangles (0: none), the semaphores",
             " * (zeroed words), the row's then the column's NoC coordinates (x | y << 6): the argument words after",
             " * the buffers (plan.core_arg_words) */",
             *(f"#define ARG_MM_{w} ARG_BUF({n + i})" for i, w in enumerate(BLOCK_WORDS)),
             f"#define MM_SEM_WORD {sem}u",
             *(f"#define MM_SEM_{name} {i}u" for i, name in enumerate(SEMAPHORES) if not name[-1].isdigit()),
             "#define MM_SEM(i) (TT_ARGS_BASE + 4u * MM_SEM_WORD + 16u * (i))",
             f"#define ARG_MM_PEERS {sem + 4 * len(SEMAPHORES)}u",
             "/* the first of `total` parts (K tiles, panel rows) that the i-th of n cores takes (the first total % n",
             " * cores one more) */",
             "#define MM_SHARE_BEGIN(total, i, n) \\",
             "    ((i) * ((total) / (n)) + ((i) < (total) % (n) ? (i) : (total) % (n)))",
             "#define MM_K_BEGIN(i, n) MM_SHARE_BEGIN(MM_KT, i, n)"]
    return matmul_args_header(plan, GENERATOR, [
        f"#define MM_KT {plan.tiles[2]}u", f"#define MM_A_SLOTS {A_SLOTS}u  /* CB_A's depth */",
        f"#define MM_TILE_BYTES {tb}u  /* {plan.src_format} tile in L1 */",
        f"#define MM_NB {plan.block_cols}u  /* B's column tiles resident at once */",
        f"#define MM_GROUP {dst_group(plan.spec)}u  /* output tiles per A tile in SrcB (dst_group) */",
        f"#define MM_STAGE_BYTES {stage_bytes(plan.spec)}u",
        f"#define MM_SHARE_PIECE {MM_SHARE_PIECE}u  /* bytes per multicast of an operand share */",
        *split, *upper, *panel_rows, *block],
        min(plan.spec.N, TILE * plan.block_cols))


DST_GROUP = 4   # output tiles per A tile in SrcB
DST_SET = 4     # with an epilogue, group g accumulates in Dst slots 4 (g % 2) .. 4 (g % 2) + 3: the packer's thread
                # rounds and packs one set while the math thread's MVMULs fill the other


def dst_group(spec: MatmulSpec) -> int:
    """Output tiles computed together, each A tile unpacked once into SrcB for all of them (B's tiles go to SrcA one
    after another): DST_GROUP with an epilogue, which the packer's thread runs on one set of Dst slots while the
    next group accumulates in the other (DST_SET); 1 without (the packer reads the accumulator itself)."""
    return DST_GROUP if epilogue_mode(spec) else 1


STALL_PACK_AFTER_SFPU = word_u32("STALLWAIT", stall_res=0x4, wait_res=0x800)   # B2 packer; C11 SFPU


def render_matmul(plan: FpuMatmulPlan) -> dict[str, str]:
    s = plan.spec
    w = matmul_words(plan.phases)
    unp = dict(UNPACK_CFG_MM[plan.src_format]) | UNPACK_CFG_MM_COMMON
    a_rows = a_panel_rows(s)
    group, epi = dst_group(s), epilogue_ctx(s)
    packed = out_packed_rows(s)
    if epi:
        w |= dst_token_words(2) | {"stall_pack_after_sfpu": STALL_PACK_AFTER_SFPU}
    pck, alu = PACK_CFG["fp32"], ALU_FORMAT_MM[plan.src_format]
    if a_rows:
        w["walk_a"] = face_row_words(1)
        unp |= face_row_cfg(1, s.K)
    if plan.b_rows:
        w["walk_b"] = face_row_words(0, dst_group(s))
        unp |= face_row_cfg(0, TILE * plan.block_cols)
    if plan.b_layout == "tensix":
        w |= tilize_pass_words() | {"pack_sec0_tiles": tensix_words()["pack_sec0"]}
    if packed:
        w |= packed_rows_words(panel_pitch(plan.block_cols))
        pck, alu = packed_rows_cfg(PACK_CFG["bf16"]), alu | PACKED_ROWS_DSTACC
    ctx = {
        "name": plan.name, "spec": s, "fidelity": plan.fidelity, "phases": plan.phases, "src_format": plan.src_format,
        "a": operand_ctx(s.a), "b": operand_ctx(s.b), "out": operand_ctx(s.out),
        "in_bf16": plan.src_format == "bf16", "out_bf16": s.out.dtype == "bfloat16",
        "w": w, "unp": {i: hex_u32(v) for i, v in unp.items()}, "alu_format": hex_u32(alu),
        "pck": {i: hex_u32(v) for i, v in pck.items()}, "epi": epi, "b_split": plan.b_split,
        "a_rows": a_rows, "b_rows": plan.b_rows, "b_walk": plan.b_layout == "rows",
        "b_tensix": plan.b_layout == "tensix", "unp0_x_dim": (UNP0_X_DIM, hex_u32(UNP0_X_DIM_HIGH)),
        # the words switched around the Tensix tilize pass: the pass's, then the products' (b_tensix)
        "tilize_cfg": {"alu": hex_u32(ALU_FORMAT_TILIZE), "alu_mm": hex_u32(alu),
                       "unp_pass": {UNP0_DESC1: hex_u32(unp[UNP0_DESC1])} if plan.b_rows else {},
                       "unp_tiles": {i: hex_u32(UNPACK_CFG_MM_COMMON[i]) for i in (UNP0_X_DIM, UNP0_DESC1)},
                       "pack_pass": {i: hex_u32(v) for i, v in PACK_CFG_TILIZE.items()},
                       "pack_out": {i: hex_u32(pck[i]) for i in PACK_CFG_TILIZE} if packed else {}},
        "packed": packed, "group": group, "DST_SET": DST_SET,
    }
    return kernel_sources(ctx, "matmul_reader.c.j2", "matmul_writer.c.j2", "matmul_compute.c.j2",
                          args_header_mm(plan))


def match(kernel: Kernel) -> MatmulSpec | None:
    """A matched matmul whose operands the reader walks by strides (a gathered one, a convolution, is the SFPU
    matmul's: this reader has no element-by-element index walk)."""
    spec = kernel.shared(kernel_matmul)
    return spec if spec is not None and not spec.gathered else None


def candidates(kernel: Kernel, spec: MatmulSpec) -> list[Candidate]:
    """One per fidelity (cheapest first): acceptable (lowering.placement.guarantee.acceptable) when an all-data error
    bound meets the budget - none exists for a matmul of loaded operands (a dot product can cancel), so only with
    TT_BUDGET_SAMPLED=1 (Placer.sampled) - and its predicted relative L2 error is within SAFETY x the budget; never
    without a budget (float32-faithful: bf16 x bf16 at HiFi4 has exact products, but MVMUL aligns each
    group of products to its largest, about one bf16 ulp of the result on zero-mean data, not below it) nor without an
    error model. Built only if chosen; the build fails when all of B does not fit L1."""
    budget = kernel.budget
    errors = predicted_errors(kernel, spec) if budget is not None else None
    sampled = kernel.placer is not None and kernel.placer.sampled

    def option(fid: str) -> Candidate:
        err = errors[fid] if errors is not None else None
        g = fpu_reduction_guarantee("matmul", src_format_of(spec), fid)
        ok = budget is not None and acceptable(g, err, SAFETY * budget, budget, sampled)
        return Candidate(NAME, f"FPU {fid}", mvmul_count(spec, FIDELITY_PHASES[fid]), err, ok,
                         lambda: plan_matmul(spec, kernel.name, fid, err))
    return [option(fid) for fid in FIDELITY_PHASES]


FAMILY = Family(NAME, match, candidates)
