"""The FPU sum family: REDUCE(ADD) as a matrix product against a tile of ones (MVMUL), accumulated in an fp32 Dst tile.

Which reductions (`match_sum`): one REDUCE(ADD) in float32 whose pre-op is a plain load of a float32 stream or an exact
bf16 -> fp32 cast of a bf16 one (x.sum(axes), x.float().sum(axes), x.mean(axes)), any axis set. The post-op (mean's
multiply, a bf16 cast, RMSNorm's rsqrt, ...) runs on the SFPU over the accumulated Dst tile, once per output tile;
it may read nothing but the reduced value and constants (a post-op reading another input per output stays on the
SFPU path, lowering/families/sfpu_reduce.py).

Layout (FpuReducePlan): the outputs o x reduce index k are cut into 32 x 32 blocks; block (ot, kt) is one L1 tile in
face layout (4 faces of 16x16, row-major inside a face), zero padded past O and K. `side` says which source register
the data goes to:
  * "srcb": data tile element (r, c) = x[o = 32ot + r, k = 32kt + c] in SrcB (M x K), a ones tile in SrcA (K x N):
    Dst[m, n] += sum_k x[m, k] for every n; output o is Dst element (o % 32, 0);
  * "srca": data tile element (r, c) = x[o = 32ot + c, k = 32kt + r] in SrcA (K x N), ones in SrcB (M x K):
    Dst[m, n] += sum_k x[k, n] for every m; output o is Dst element (0, o % 32).
  * "srca" with fewer outputs than 32 (`cells` = 8, 4, 2 or 1 outputs per tile, `choose_cells`): output j owns
    32 // cells columns (`column_of`), so a tile carries 32 * 32 // cells reduce indices of each output; the Dst row
    0 holds per-column partial sums, which the SFPU adds up (`finish_words`: four row steps, then the lanes) into
    row step 0 before the post program. A full reduction (x.sum()) is then 1024 elements per tile, not 32.
Per output tile: ZEROACC, then per k tile the unpackers bring both tiles (whole 1024-datum unpacks, the matmul's
unpacker configuration) and `phases` x 16 MVMULs (lowering.codegen.mvmul.mvmul_words) add them into Dst; then the SFPU
post program (Dst slot 0 -> its output slot) and the packer (fp32); the writer picks the 32 outputs.

Precision (docs/fpu_path.md §10.1-10.3, the bit models of chip.numerics.fpu_math): a fidelity phase multiplies a slice of the
SrcA significand by a slice of SrcB's. The ones tile has an empty low slice, so only the data's slices count:
  * data in SrcB: phase 0 takes its top 7 significand bits, phase 2 the low 4 (phase 1 adds 0): LoFi keeps 7 bits,
    HiFi3 all 11 (tf32) - bf16 (8 bits) is exact at HiFi3;
  * data in SrcA: phase 0 its top 5 bits, phase 1 bits 5..1: HiFi2 keeps 10 bits - bf16 exact, tf32 loses one bit.
So the options are (srcb, LoFi), (srca, HiFi2), (srcb, HiFi3); the others are dominated. fp32 data is truncated to
tf32 by the unpacker (up to 2^-10 relative per element, one-sided), bf16 data is exact in Src; the accumulation adds
each group of 8 products aligned to its largest (one rounding near 2^-24 of the group's largest term) and rounds the
Dst sum to fp32 once per MVMUL. The candidates (`candidates`) carry the kernel's relative L2 error predicted on sample
data with those bit models (an evaluator injected by tt_backend, `lowering` never imports `runtime`) and the cost
model's cycles; the selector takes the cheapest of the SFPU reduction and the acceptable FPU options.

Acceptable (lowering.placement.guarantee.acceptable): an error bound relative to float32 that holds for every input
and meets the budget - which no FPU sum of loaded values has (the data can cancel; guarantee.py says why per option,
the report's `bound_reason`), so by default an unpinned sum stays on the SFPU - and the predicted error <= SAFETY x
budget (no budget: <= FAITHFUL_FACTOR x the SFPU reduction's on the same samples). With TT_BUDGET_SAMPLED=1 the
prediction alone decides (a promise for data like the samples). The prediction is made when the choice depends on it
(guarantee.prediction_decides: TT_BUDGET_SAMPLED, or an all-data bound within the budget), else when the report asks
(Placement.predict: TT_DUMP, TT_CHECK, DEBUG, `fpu_options`): by default it decides nothing, and it was 3.5 s of the
32 s of tinygrad's test_ops avg_pool2d, argmax and atan tests. Not offered: without a placer (no error model), when
the post-op does not compile, or when TT_PLACE pins the REDUCE to the SFPU. Pinned to the FPU (TT_PLACE REDUCE=FPU[:fidelity]):
one pinned candidate, the cheapest acceptable option of that fidelity, else the most accurate one - the user's pin
is taken over the SFPU reduction whatever the cost model says.
"""
from __future__ import annotations

import functools
import math
import warnings
from dataclasses import dataclass

import numpy as np

from tt_backend.lowering.codegen import sfpu_ops as so
from tt_backend.lowering.codegen.args_header import ArgsHeader
from tt_backend.lowering.codegen.c_exprs import DRAM_LOAD, DRAM_STORE
from tt_backend.lowering.codegen.l1 import MAX_RESIDENT_WINDOW, STAGING_BYTES, grow_window, l1_bytes, place
from tt_backend.lowering.codegen.lane_combine import lane_combine
from tt_backend.lowering.codegen.mvmul import (ALU_FORMAT_MM, MVMUL_SLOTS, UNPACK_CFG_MM, UNPACK_CFG_MM_COMMON,
                                               matmul_words)
from tt_backend.lowering.codegen.sfpu_codegen import DST_READ_GAP, MAX_SLOTS, assemble, compile_sfpu
from tt_backend.lowering.codegen.sources import kernel_sources
from tt_backend.lowering.codegen.tensix import PACK_CFG
from tt_backend.lowering.codegen.words import hex_u32, word_u32
from tt_backend.lowering.dag import ValueDAG, VNode
from tt_backend.lowering.families.family import Candidate, Family, Kernel
from tt_backend.lowering.families.mover_cost import (FPU_REDUCE_ONES, FPU_REDUCE_READ_PER_SLOT, group_write_cycles,
                                                     pipeline, window_load_cycles)
from tt_backend.lowering.families.sfpu_reduce import baseline, extract, launch_price, reduce_cycles
from tt_backend.lowering.frontend import LoweredKernel
from tt_backend.lowering.placement.choice import Choice, Split
from tt_backend.lowering.placement.guarantee import acceptable, fpu_reduction_guarantee, prediction_decides
from tt_backend.lowering.placement.cost import COST, pack_cycles, sfpu_op_cycles, unpack_cycles
from tt_backend.lowering.placement.placer import Placer, ReduceEvaluator
from tt_backend.lowering.placement.reference import (SAMPLE_DISTS, reduce_exact, reduce_in_lanes, reference,
                                                     rel_error, sample_inputs)
from tt_backend.lowering.placement.report import Placement
from tt_backend.lowering.placement.search import SAFETY
from tt_backend.lowering.plan import DTYPE_SIZE, Plan, SfpuProgram, Stream
from tt_backend.chip.errors import UnsupportedOp
from tt_backend.chip.isa import encode
from tt_backend.chip.numerics.fpu_math import FIDELITY_PHASES

NAME = "fpu_reduce"
GENERATOR = "lowering/families/fpu_reduce.py"
TILE = 32
# (side, fidelity): the undominated choices (module docstring), cheapest first
OPTIONS = (("srcb", "LoFi"), ("srca", "HiFi2"), ("srcb", "HiFi3"))
FAITHFUL_FACTOR = 2.0         # no budget: the FPU only if its predicted error <= this x the SFPU's (fp32-faithful)
SAMPLE_MAX = 1 << 16          # sample points per distribution (outputs x K)
SAMPLE_OUTPUTS = 64           # sums per sample set (grouped like the kernel's outputs: group_error)
GROUP_QUANTILE = 0.9
GROUPS_MIN = 10               # sample sets of the kernel's output count, so the quantile is over at least this many


# ------------------------------------------------------------------------------------------------ recognise

@dataclass(frozen=True)
class FpuReduceSpec:
    red: int                  # REDUCE node id
    src_dtype: str            # "float32" | "bfloat16" (the stream's dtype in DRAM)
    post: ValueDAG            # after the reduce: LOAD arg 0 = the reduced value (Dst slot 0)
    out_dtype: str

    @property
    def src_format(self) -> str:      # what the multiplier sees
        return "bf16" if self.src_dtype == "bfloat16" else "tf32"


def match_sum(lk: LoweredKernel) -> FpuReduceSpec | None:
    """The spec when the kernel is a plain sum the FPU can take, else None (the reason is not needed: SFPU)."""
    dag = lk.dag
    reds = [n for n in dag.nodes if n.op == "REDUCE"]
    if len(reds) != 1 or len(lk.inputs) != 1: return None
    r = reds[0]
    if r.arg[0] != "ADD" or r.dtype != "float32": return None
    n_ranges = len(lk.ranges)
    axes = tuple(r.arg[1])
    if axes != tuple(range(n_ranges - len(axes), n_ranges)): return None
    x = dag.nodes[r.srcs[0]]
    if x.op == "CAST" and x.dtype == "float32" and dag.nodes[x.srcs[0]].dtype == "bfloat16":
        x = dag.nodes[x.srcs[0]]
    if x.op != "LOAD" or x.dtype not in ("float32", "bfloat16") or x.arg != 0: return None
    s = lk.stream(lk.inputs[0])
    if s.value is not None or s.dtype != x.dtype or s.index_loads: return None   # loaded indices: tile pipeline only
    out_dtype = dag.nodes[dag.out].dtype
    if out_dtype not in ("float32", "bfloat16"): return None
    post = extract(dag, dag.out, {r.id: VNode(-1, "LOAD", "float32", (), 0)})
    if any(n.op == "LOAD" and n.arg != 0 for n in post.nodes): return None
    if any(n.op == "REDUCE" for n in post.nodes): return None
    return FpuReduceSpec(r.id, x.dtype, post, out_dtype)


# ------------------------------------------------------------------------------------------------ the plan

@dataclass
class FpuReducePlan(Plan):
    out_sizes: tuple[int, ...]
    red_sizes: tuple[int, ...]
    side: str                          # "srcb" | "srca"
    fidelity: str
    src_format: str                    # "bf16" | "tf32"
    post: SfpuProgram | None           # None: the sum is the output (packed from slot 0)
    cells: int = 32                    # outputs per tile (< 32: "srca" only, each output owns 32 // cells columns)

    def sfpu_program(self) -> SfpuProgram | None:
        return self.post

    def sfpu_words(self) -> list[int]:
        return [] if self.post is None else self.post.setup + self.post.body

    @property
    def phases(self) -> int: return FIDELITY_PHASES[self.fidelity]

    @property
    def n_out(self) -> int: return math.prod(self.out_sizes)

    @property
    def n_red(self) -> int: return math.prod(self.red_sizes)

    @property
    def tiles(self) -> tuple[int, int]:
        return tile_counts(self.n_out, self.n_red, self.cells)

    @property
    def n_tiles(self) -> int:
        ot, kt = self.tiles
        return ot * kt

    @property
    def out_slot(self) -> int: return self.post.out_slot if self.post is not None else 0

    def launch_cycles(self) -> dict | None:
        if self.placement is None:
            return None
        return fpu_launch(self.placement.cycles, self.n_out, self.n_red, self.side, self.cells,
                          bool(self.inputs[0].contiguous), self.buffers[self.inputs[0].buf].nbytes)

    def render(self) -> dict[str, str]:
        return render_fpu_reduce(self)


# Dst row steps (SFPLOAD address a: lanes = Dst32b rows (a & ~3) + l // 8, column 2 (l % 8) + ((a >> 1) & 1)) that
# hold the 32 outputs of a tile: "srcb" column 0 of rows 0-15 (face 0) and 32-47 (face 2); "srca" row 0 of face 0
# (Dst row 0) and of face 1 (Dst row 16), all 16 columns. The post program runs on these row steps only.
POST_STEPS = {"srcb": (0, 4, 8, 12, 32, 36, 40, 44), "srca": (0, 2, 16, 18)}
CELL_CHOICES = (32, 8, 4, 2, 1)
# Few outputs ("srca", cells <= 8): output j of a tile owns the L = 8 // cells lanes j*L .. j*L+L-1 of row 0 of the
# four row steps 0, 2, 16, 18, i.e. Dst row 0 columns {2l, 2l+1, 16+2l, 17+2l} for its lanes l: 4L = 32 // cells
# columns, column q of its list holds k = kt * 32 * (32 // cells) + 32 q + r (r = SrcA row). After the k tiles the
# SFPU adds the four row steps lane by lane ((a0 + a2) + a16) + a18, combines each output's L lanes pairwise
# (lowering.codegen.lane_combine) and stores row step 0 of slot 0, where the post program (one row step) reads it.
FINISH_STEPS = (0, 2, 16, 18)


def tile_counts(n_out: int, n_red: int, cells: int) -> tuple[int, int]:
    """(output tiles, k tiles per output tile) of the layout with `cells` outputs per tile."""
    return -(-n_out // cells), -(-n_red // (TILE * (TILE // cells)))


def choose_cells(n_out: int, n_red: int, side: str) -> int:
    if side != "srca":
        return 32
    return min(CELL_CHOICES, key=lambda c: (math.prod(tile_counts(n_out, n_red, c)) + 0.25 * tile_counts(n_out, n_red, c)[0], -c))


def column_of(cells: int, j: int, q: int) -> int:
    """Tile column of column q of output j (cells <= 8)."""
    lanes = 8 // cells
    l, which = j * lanes + q // 4, q % 4
    return (16 if which >= 2 else 0) + 2 * l + (which & 1)


def finish_words(cells: int) -> list[int]:
    """cells <= 8: combine each output's 4L column partials into lane j*L + L-1 of row step 0 of slot 0."""
    em = so.Emitter()
    for r, a in enumerate(FINISH_STEPS):
        em.load(r, a, so.LOAD_INT32)
    for r in (1, 2, 3):
        em.fadd(0, 0, r)
    res = lane_combine(em, "ADD", "float32", 8 // cells, 0, 7)
    em.i("SFPNOP")
    em.store(res, 0)
    em.ins.extend([("SFPNOP", {})] * DST_READ_GAP)
    return assemble(em.ins)


def out_datum(side: str, cells: int, j: int) -> int:
    """Datum (packed tile, face layout) of output j of a tile."""
    if cells < 32:
        return 2 * (j * (8 // cells) + 8 // cells - 1)          # row step 0, lane j*L + L-1 (plan.reduce_out_datum)
    return ((j >> 4) << 9) + ((j & 15) << 4) if side == "srcb" else ((j >> 4) << 8) + (j & 15)


def post_steps(side: str, cells: int = 32) -> list[list[int]]:
    """Per post run: the INCRWC words that move Dst RWC to its row step (the body's last store adds 2)."""
    out, cur = [], 0
    for a in (POST_STEPS[side] if cells == 32 else (0,)):
        skip, words = a - cur, []
        while skip:
            words.append(encode("INCRWC", rwc_d=min(skip, 15)))
            skip -= min(skip, 15)
        out.append(words)
        cur = a + 2
    return out


def fpu_cycles(n_out: int, n_red: int, src_format: str, phases: int, post: SfpuProgram | None,
               side: str = "srcb", cells: int = 32) -> dict:
    """The cost model of lowering.placement.cost (Tensix cycles): per k tile both unpacks (data + ones, 64 B/cycle)
    and 16 MVMULs per phase (one issue cycle each, docs/isa.md §4); per output tile ZEROACC, the FPU latency, the
    post program (setup + 32 row steps) and the fp32 pack (16 B/cycle)."""
    fmt = "bf16" if src_format == "bf16" else "fp32"
    ot, kt = tile_counts(n_out, n_red, cells)
    steps = len(POST_STEPS[side]) if cells == 32 else 1
    unpack = 2 * unpack_cycles(fmt)
    fpu = 16 * phases * COST["fpu_per_block_phase"]
    per_group = (COST["faces_per_tile"] * COST["zeroacc"] + COST["fpu_latency"] + pack_cycles("fp32")
                 + (len(finish_words(cells)) if cells < 32 else 0)
                 + (COST["faces_per_tile"] * COST["zeroacc"] + len(post.setup)
                    + sum(len(w) for w in post_steps(side, cells)) + steps * len(post.body) if post is not None else 0))
    return {"unpack": unpack, "fpu": fpu, "sfpu": 0, "pack": pack_cycles("fp32"), "total": unpack + fpu,
            "tiles": ot * kt, "groups": ot, "per_group": per_group, "kernel": ot * kt * (unpack + fpu) + ot * per_group}



def fpu_launch(cyc: dict, n_out: int, n_red: int, side: str, cells: int, contiguous: bool, nbytes: int) -> dict:
    """The whole launch on one core (mover_cost): the reader tilizes each tile (FPU_REDUCE_READ_PER_SLOT: data to SrcB
    from contiguous lines by whole lines, else slot by slot) after writing the ones tile and reading the input into
    its window (whole when it fits: l1.grow_window); the compute (`fpu_cycles`, its per-output-tile work spread over
    the k tiles) and the writer's scatter of each output tile's `cells` outputs run next to it, a pipeline over the
    tiles. An input larger than l1.MAX_RESIDENT_WINDOW is priced as if it were read once (its window reloads are not
    measured yet)."""
    tiles, kt = cyc["tiles"], cyc["tiles"] // cyc["groups"]
    per_slot = FPU_REDUCE_READ_PER_SLOT
    if not contiguous:
        slots = per_slot["gather"] * tiles * TILE * TILE
    elif side == "srca":
        slots = per_slot["srca"] * tiles * TILE * TILE
    else:                  # lines of 32 k of one output: n_out per k tile, full ones where K reaches past them
        full, partial = n_out * (n_red // TILE), n_out * (n_red % TILE > 0)
        slots = TILE * (per_slot["full line"] * full + per_slot["line"] * partial
                        + per_slot["empty line"] * (tiles * TILE - full - partial))
    fill = FPU_REDUCE_ONES + window_load_cycles(min(nbytes, MAX_RESIDENT_WINDOW))
    return pipeline(tiles, slots / tiles, cyc["total"] + cyc["per_group"] / kt, group_write_cycles(cells) / kt, fill)


def compile_post(spec: FpuReduceSpec) -> SfpuProgram | None:
    if spec.post.nodes[spec.post.out].op == "LOAD":
        return None                                    # the fp32 sum is the output
    p = compile_sfpu(spec.post, 1, spec.out_dtype)
    if p.dst_slots > MAX_SLOTS:
        raise UnsupportedOp("post-reduce program needs too many Dst slots")
    return p


def plan_fpu_reduce(lk: LoweredKernel, spec: FpuReduceSpec, side: str, fidelity: str,
                    placement: Placement | None = None, cells: int = 32) -> FpuReducePlan:
    n_out_r = len(lk.ranges) - len(lk.dag.nodes[spec.red].arg[1])
    s = lk.stream(lk.inputs[0])      # contiguous: element (o, k) at o * K + k (the reader copies runs of 32 k)
    s = Stream(s.buf, s.dtype, s.index, s.valid, s.contiguous, None)
    out = lk.stream(lk.output)
    out = Stream(out.buf, out.dtype, out.index, out.valid, False, None)
    plan = FpuReducePlan(lk.name, tuple(lk.ranges), lk.buffers, [s], out, tuple(lk.ranges[:n_out_r]),
                         tuple(lk.ranges[n_out_r:]), side, fidelity, spec.src_format, compile_post(spec),
                         ops=[f"REDUCE_ADD[FPU MVMUL {spec.src_format} {fidelity} data->{side}]"] +
                             [n.op for n in spec.post.nodes if n.op not in ("LOAD", "CONST")],
                         placement=placement, cells=cells)
    return allocate_fpu_reduce_l1(plan)


def allocate_fpu_reduce_l1(plan: FpuReducePlan) -> FpuReducePlan:
    tb = 2048 if plan.src_format == "bf16" else 4096
    sizes = {"cb_in": 2 * tb, "ones": tb, "cb_out": 2 * 4096, "stage_out": STAGING_BYTES, "stage_in": STAGING_BYTES}
    # the reader's tiles walk 32 outputs' lines (or its gathers any order): a window that holds the input whole is
    # read once (l1.grow_window)
    size = grow_window(sizes, "stage_in", plan.buffers[plan.inputs[0].buf].nbytes)
    plan.windows = {"stage_in": size} if size else {}
    l1 = place(sizes)
    if l1 is None:
        raise UnsupportedOp(f"{plan.name}: FPU reduction needs {l1_bytes(sizes)} bytes of L1")
    plan.l1 = l1
    return plan


# ------------------------------------------------------------------------------------------------ placement

def predict(lk: LoweredKernel, spec: FpuReduceSpec, options, evaluator: ReduceEvaluator, lanes: int,
            compensated: bool = False, seed: int = 0, dists=None) -> dict:
    """Predicted relative L2 error (worst over the sample distributions) of the kernel's output over up to
    SAMPLE_OUTPUTS sums of K sample values each: the SFPU reduction (lowering.placement.reduce_in_lanes: lane
    partial sums in fp32, compensated as the SFPU plan says, then the lane combine) and each FPU option (`evaluator(x (n, K) float32, src_format,
    side, phases, cells) -> fp32 sum words`), against the exact sum rounded to fp32; then the post-op in float32 (per-op
    rounding, bf16 results rounded once) for all. The pre-op is a load or an exact cast (`match`), so the sample
    values are the reduce's inputs."""
    dists = dists or SAMPLE_DISTS
    n_out_r = len(lk.ranges) - len(lk.dag.nodes[spec.red].arg[1])
    k = math.prod(lk.ranges[n_out_r:])
    if k > SAMPLE_MAX:
        return {}
    n_out = math.prod(lk.ranges[:n_out_r])
    # enough sums for GROUPS_MIN groups of the kernel's output count where K allows: with one group, a kernel of a
    # few dozen short sums was promised on one draw, and its measured error varied past the budget between draws
    n = max(1, min(max(SAMPLE_OUTPUTS, GROUPS_MIN * n_out), SAMPLE_MAX // k))
    keys = ["SFPU", *options]
    errs: dict = {key: [] for key in keys}
    for i, dist in enumerate(dists):
        x = sample_inputs([spec.src_dtype], n * k, seed + i, dist)[0].astype(np.float32).reshape(n, k)
        sums = {"exact": reduce_exact("ADD", x, (1,), "float32").reshape(-1),
                "SFPU": reduce_in_lanes(lanes, compensated)("ADD", x, (1,), "float32").reshape(-1)}
        for o in options:
            sums[o] = np.asarray(evaluator(x, spec.src_format, o[0], FIDELITY_PHASES[o[1]],
                                           choose_cells(n_out, k, o[0])), np.uint32).view(np.float32).reshape(-1)
        ref = np.broadcast_to(np.asarray(reference(spec.post, [sums["exact"]]), np.float64), (n,))
        for key in keys:
            out = np.broadcast_to(np.asarray(reference(spec.post, [sums[key]]), np.float64), (n,))
            errs[key].append((group_error(out, ref, min(n_out, n)), rel_error(out, ref)[1]))
    return {key: (max(e[0] for e in v), max(e[1] for e in v)) for key, v in errs.items()}


def group_error(out: np.ndarray, ref: np.ndarray, g: int) -> float:
    """The relative L2 error a tensor of g outputs sees, as the GROUP_QUANTILE over groups of g sample sums: with few
    outputs one cancelled sum (|sum| << sqrt(sum x^2)) dominates, so the typical L2 over many sums would promise
    too little (a 1-D sum: the 90th percentile of single-sum relative errors)."""
    m = len(out) // g
    errs = [rel_error(out[i * g:(i + 1) * g], ref[i * g:(i + 1) * g])[0] for i in range(m)]
    return float(np.quantile(errs, GROUP_QUANTILE)) if m > 1 else float(errs[0])


def _pin(placer: Placer, lk: LoweredKernel, red: int) -> Choice | None:
    pins = placer.pins_for(lk.name)
    return pins.get(str(red), pins.get("REDUCE"))


def match(kernel: Kernel) -> FpuReduceSpec | None:
    """A plain sum, when there is a placer (the FPU's error needs its model)."""
    return None if kernel.placer is None else match_sum(kernel.lowered)


def candidates(kernel: Kernel, spec: FpuReduceSpec) -> list[Candidate]:
    """The FPU options priced against the kernel's SFPU reduction (sfpu_reduce.baseline), whose report records them
    (`fpu_options`). Each is acceptable by guarantee.acceptable: an all-data bound within the budget (none exists:
    see guarantee.py) unless the placer allows sample-data placements, and its predicted error within SAFETY x budget
    (no budget: within FAITHFUL_FACTOR x the SFPU's); the errors are predicted here only where that decides
    something, else for the report (module docstring). TT_PLACE REDUCE=FPU[:fidelity] or
    n<id>=... pins the choice: one pinned candidate, the cheapest acceptable option, else the most accurate one
    (SFPU keeps the SFPU: no candidate)."""
    lk, placer, budget = kernel.lowered, kernel.placer, kernel.budget
    pin = _pin(placer, lk, spec.red)
    if pin is not None and pin.engine == "SFPU":
        return []
    try:
        post = compile_post(spec)
    except UnsupportedOp:
        return []
    sfpu_plan = baseline(kernel)
    n_out_r = len(lk.ranges) - len(lk.dag.nodes[spec.red].arg[1])
    n_out, n_red = math.prod(lk.ranges[:n_out_r]), math.prod(lk.ranges[n_out_r:])
    opts = [o for o in OPTIONS if pin is None or pin.fidelity is None or o[1] == pin.fidelity] or list(OPTIONS)
    guarantees = {o: fpu_reduction_guarantee("sum", spec.src_format, o[1], o[0]) for o in opts}

    @functools.cache
    def predicted() -> dict:
        if placer.reduce_evaluator is None:
            return {}
        try:
            return predict(lk, spec, opts, placer.reduce_evaluator, sfpu_plan.reduce.lanes,
                           sfpu_plan.reduce.compensated)
        except Exception as e:       # a model gap must not fail the kernel: no prediction, no FPU move
            warnings.warn(f"{lk.name}: FPU reduction error model failed ({type(e).__name__}: {e})")
            return {}
    # the prediction is made here only when an option's acceptability depends on it; else (no all-data bound, no
    # TT_BUDGET_SAMPLED: every option is unacceptable whatever it predicts) when the report asks (Placement.predict)
    decides = any(prediction_decides(g, budget, placer.sampled) for g in guarantees.values())
    pred = predicted() if decides else {}
    sfpu_cyc = reduce_cycles(sfpu_plan)["kernel"]
    sfpu_launch = launch_price(sfpu_plan)
    src = lk.stream(lk.inputs[0])
    contiguous, nbytes = bool(src.contiguous), lk.buffers[src.buf].nbytes
    sfpu_err = pred.get("SFPU", (None, None))[0]
    rows = []
    for o in opts:
        cells = choose_cells(n_out, n_red, o[0])
        cyc = fpu_cycles(n_out, n_red, spec.src_format, FIDELITY_PHASES[o[1]], post, o[0], cells)
        launch = fpu_launch(cyc, n_out, n_red, o[0], cells, contiguous, nbytes)["total"]
        err = pred.get(o, (None, None))
        g = guarantees[o]
        limit = SAFETY * budget if budget is not None else (None if sfpu_err is None else FAITHFUL_FACTOR * sfpu_err)
        rows.append({"side": o[0], "fidelity": o[1], "cells": cells, "cycles": cyc, "launch_cycles": launch,
                     "sfpu_launch_cycles": sfpu_launch, "predicted_error": err[0],
                     "predicted_max_rel": err[1], "bound_all_data": g.bound, "bound_reason": g.reason,
                     "acceptable": acceptable(g, err[0], limit, budget, placer.sampled)})

    def errors() -> float | None:
        """The rows' predicted errors (made now if deferred: `acceptable` stays as decided, the prediction could not
        change it); the SFPU reduction's on the same samples."""
        full = predicted()
        for r in rows:
            r["predicted_error"], r["predicted_max_rel"] = full.get((r["side"], r["fidelity"]), (None, None))
        return full.get("SFPU", (None, None))[0]
    _annotate(sfpu_plan.placement, rows, None)     # the report's rows now (the FPU plan's copies them), errors below
    _defer(sfpu_plan.placement, lambda pl: _annotate(pl, rows, errors()), decides)

    def candidate(r: dict, pinned: bool) -> Candidate:
        def build() -> FpuReducePlan:
            pl = fpu_placement(lk, spec, sfpu_plan.placement, r, post, sfpu_cyc, budget, pinned)
            _defer(pl, lambda pl: _fpu_errors(pl, r, rows, errors()), decides)
            return plan_fpu_reduce(lk, spec, r["side"], r["fidelity"], placement=pl, cells=r["cells"])
        return Candidate(NAME, f"FPU {r['side']} {r['fidelity']}", r["launch_cycles"], r["predicted_error"],
                         r["acceptable"], build, pinned)
    if pin is not None:
        return [candidate(min([r for r in rows if r["acceptable"]] or rows[-1:], key=lambda r: r["launch_cycles"]),
                          True)]
    return [candidate(r, False) for r in rows]


def _defer(pl: Placement | None, complete, now: bool) -> None:
    """`complete(pl)` fills in the report's predicted errors: now when the choice made the prediction, else when the
    report asks for it (Placement.predict)."""
    if pl is None:
        return
    pl.pending = complete
    if now:
        pl.predict()


def _options_report(rows: list[dict]) -> list[dict]:
    return [{k: (v["kernel"] if k == "cycles" else v) for k, v in r.items()} for r in rows]


def _annotate(pl: Placement | None, rows: list[dict], sfpu_err: float | None) -> None:
    """The SFPU plan's report records the FPU options that were priced (and why they lost)."""
    if pl is None:
        return
    pl.priced_options = _options_report(rows)
    for n in pl.nodes:
        if n["op"] == "REDUCE":
            n["fpu_options"] = pl.priced_options
            if sfpu_err is not None:
                n["predicted_error"] = sfpu_err


def _fpu_errors(pl: Placement, pick: dict, rows: list[dict], sfpu_err: float | None) -> None:
    """The FPU plan's report: its predicted error (the picked option's), the options priced, the SFPU's error."""
    pl.predicted_error, pl.predicted_max_rel = pick["predicted_error"], pick["predicted_max_rel"]
    pl.priced_options = _options_report(rows)
    for n in pl.nodes:
        if n["op"] == "REDUCE":
            n.update(predicted_error=pick["predicted_error"], sfpu_predicted_error=sfpu_err,
                     fpu_options=pl.priced_options)


def fpu_placement(lk: LoweredKernel, spec: FpuReduceSpec, sfpu_pl: Placement | None, pick: dict,
                  post: SfpuProgram | None, sfpu_cyc: int, budget: float | None, pinned: bool) -> Placement:
    """A lowering.placement.report.Placement for reports and TT_CHECK: the REDUCE node on the FPU (MVMUL against
    ones, fidelity, formats), the post-ops on the SFPU once per output tile. The predicted errors are filled in by
    `_fpu_errors`."""
    dag = lk.dag
    cyc = dict(pick["cycles"])
    pl = Placement(lk.name, budget, dag, {}, Split([], dag, 1, [0]), None, None, cyc, sfpu_cyc,
                   bound=pick["bound_all_data"], bound_reason=pick["bound_reason"])
    groups = cyc["groups"]
    for n in (sfpu_pl.nodes if sfpu_pl is not None else []):
        row = dict(n)
        if n["op"] == "REDUCE":
            fmt = spec.src_format
            row.update(engine="FPU", fidelity=pick["fidelity"], pinned=pinned, instruction="MVMUL",
                       formats={"srca": fmt, "srcb": fmt, "dst": "fp32", "l1": [spec.src_dtype],
                                "ones": "srcb" if pick["side"] == "srca" else "srca"},
                       data_side=pick["side"], outputs_per_tile=pick["cells"], predicted_error=None,
                       sfpu_predicted_error=None, cycles=cyc["tiles"] * cyc["fpu"] + groups * 9, fpu_options=None)
        elif n["id"] < spec.red:         # the pre-op (an exact bf16 -> fp32 cast): the unpacker's format conversion
            row.update(engine="FPU", fidelity=None, formats={"srca": "bf16", "srcb": "bf16"}, cycles=0,
                       note="bf16 stays bf16 in Src (exact)")
        else:                            # post-ops: the SFPU, on the outputs' row steps once per output tile
            nd = dag.nodes[n["id"]]
            per_step = -(-sfpu_op_cycles(nd, tuple(dag.nodes[x].dtype for x in nd.srcs)) // 32)
            row["cycles"] = per_step * (len(POST_STEPS[pick["side"]]) if pick["cells"] == 32 else 1) * groups
        pl.nodes.append(row)
    return pl


# ------------------------------------------------------------------------------------------------ rendering

def args_header(plan: FpuReducePlan) -> str:
    ot, kt = plan.tiles
    n_out_r = len(plan.out_sizes)
    ranges = list(plan.ranges) or [1]
    h = ArgsHeader(GENERATOR, plan.name)
    lines = ["#define CB_IN 0u", "#define CB_OUT 1u",
             f"#define RED_O {plan.n_out}u", f"#define RED_K {plan.n_red}u",
             f"#define RED_OT {ot}u", f"#define RED_KT {kt}u",
             f"#define DATA_SRCB {1 if plan.side == 'srcb' else 0}u",
             f"#define RED_CELLS {plan.cells}u  /* outputs per tile */",
             f"#define RED_C {TILE // plan.cells}u  /* tile columns per output */",
             f"#define IN_TILE_BYTES {2048 if plan.src_format == 'bf16' else 4096}u",
             f"#define IN_BUF {plan.inputs[0].buf}u", f"#define OUT_BUF {plan.output.buf}u",
             f"#define IN_NBYTES {plan.buffers[plan.inputs[0].buf].nbytes}u",
             f"#define OUT_NBYTES {plan.buffers[plan.output.buf].nbytes}u",
             f"#define STAGE_BYTES {STAGING_BYTES}u",
             f"#define IN_STAGE_BYTES {plan.windows.get('stage_in', STAGING_BYTES)}u"]
    h.add(*lines).buffers(plan.buffers).l1(plan.l1)
    h.add(f"#define TT_N_RANGES {len(ranges)}", "static inline void tt_red_set(uint32_t *r, uint32_t o, uint32_t k)",
          "{")
    for i in range(len(plan.ranges) - 1, -1, -1):
        v = "o" if i < n_out_r else "k"
        h.add(f"    r[{i}] = {v} % {plan.ranges[i]}u; {v} /= {plan.ranges[i]}u;")
    return h.add("    (void)o; (void)k;", "}").text()


def render_fpu_reduce(plan: FpuReducePlan) -> dict[str, str]:
    if not plan.l1:
        raise ValueError(f"{plan.name}: plan has no L1 allocation")
    w = matmul_words(plan.phases)          # the matmul's unpack/MVMUL/pack words
    w["stall_sfpu_after_fpu"] = word_u32("STALLWAIT", stall_res=0x100, wait_res=0x10)    # B8 SFPU; C4 FPU
    w["stall_sync_math"] = word_u32("STALLWAIT", stall_res=0x2, wait_res=0x810)           # B1 sync; C4 FPU | C11 SFPU
    w["setrwc_dst"] = word_u32("SETRWC", bit_mask=0x4)
    # ADDR_MOD slot 1: the MVMULs' (SrcA += 16 ...), the SFPU body's last SFPSTORE needs Dst += 2: swapped around post
    ab1, d1 = MVMUL_SLOTS[1]
    w["slot1_sfpu"] = [word_u32("SETC16", setc16_reg=13, setc16_value=0),
                       word_u32("SETC16", setc16_reg=29, setc16_value=2)]
    w["slot1_mvmul"] = [word_u32("SETC16", setc16_reg=13, setc16_value=ab1),
                        word_u32("SETC16", setc16_reg=29, setc16_value=d1)]
    unp = dict(UNPACK_CFG_MM[plan.src_format]) | UNPACK_CFG_MM_COMMON
    alu = ALU_FORMAT_MM[plan.src_format] | (1 << 30)     # + SFPU_Fp32_enabled for the post program
    s, o = plan.inputs[0], plan.output
    ctx = {"name": plan.name, "side": plan.side, "fidelity": plan.fidelity, "phases": plan.phases,
           "src_format": plan.src_format, "in_bf16": plan.src_format == "bf16",
           "in": {"dtype": s.dtype, "esz": DTYPE_SIZE[s.dtype], "index_c": s.index_c, "valid_c": s.valid_c or "1",
                  "contiguous": bool(s.contiguous),
                  "load_expr": DRAM_LOAD[s.dtype]},
           "out": {"dtype": o.dtype, "esz": DTYPE_SIZE[o.dtype], "index_c": o.index_c, "valid_c": o.valid_c or "1",
                   "dram_store": DRAM_STORE[o.dtype], "bf16": o.dtype == "bfloat16"},
           "r_params": ", ".join(f"uint32_t r{k}" for k in range(len(plan.ranges) or 1)),
           "r_unused": "".join(f"(void)r{k}; " for k in range(len(plan.ranges) or 1)),
           "r_args": ", ".join(f"r[{k}]" for k in range(len(plan.ranges) or 1)),
           "w": w, "unp": {i: hex_u32(v) for i, v in unp.items()}, "alu_format": hex_u32(alu),
           "pck": {i: hex_u32(v) for i, v in PACK_CFG["fp32"].items()}, "out_slot": plan.out_slot,
           "post": None if plan.post is None else {
               "setup": [hex_u32(x) for x in plan.post.setup], "body": [hex_u32(x) for x in plan.post.body],
               "steps": [[hex_u32(x) for x in ws] for ws in post_steps(plan.side, plan.cells)],
               "rows": POST_STEPS[plan.side] if plan.cells == 32 else (0,),
               "zero_out": [word_u32("ZEROACC", clear_mode=1, use_32_bit_mode=1, addr_mode=7,
                                     where=4 * plan.out_slot + f)
                            for f in range(4)]}}
    ctx["cells"] = plan.cells
    ctx["finish"] = [hex_u32(x) for x in finish_words(plan.cells)] if plan.cells < 32 else []
    ctx["datums"] = [out_datum(plan.side, plan.cells, j) for j in range(plan.cells)]
    # cells <= 8: tile column -> (output j, column q of its list)
    cmap = {column_of(plan.cells, j, q): (j, q) for j in range(plan.cells) for q in range(TILE // plan.cells)}
    ctx["col_out"] = [cmap[c][0] for c in range(TILE)] if plan.cells < 32 else []
    ctx["col_q"] = [cmap[c][1] for c in range(TILE)] if plan.cells < 32 else []
    return kernel_sources(ctx, "fpu_reduce_reader.c.j2", "fpu_reduce_writer.c.j2", "fpu_reduce_compute.c.j2",
                          args_header(plan))


FAMILY = Family(NAME, match, candidates)
