"""The SFPU reduction family: reduction kernels (REDUCE ADD / MUL / MAX over any set of axes) on the SFPU.

(A plain sum - x.sum(axes), x.float().sum(axes) of bf16, x.mean(axes) - may run on the FPU instead: MVMUL against a
ones tile, lowering/families/fpu_reduce.py, which prices its options against this family's plan.)

The frontend gives one ValueDAG with a REDUCE node. It is split there: the *pre* DAG (per (output o, reduce index k)
element, e.g. x*x) and the *post* DAG (per output, e.g. sqrt(acc/n + eps)), in which the REDUCE becomes a LOAD of the
Dst slot the reduced values are left in.

Layout (tile_plan.ReducePlan): a tile is 32 row steps x 32 lanes. Output j of a tile owns `lanes` consecutive lanes (1,
2, 4, 8 or all 32) of every row step, so a tile carries 32*lanes reduce indices of 32/lanes outputs, and a group of
`tiles_per_group` tiles carries all K of them. The reader gathers (o, k) into that layout, so any axis set and any
index expression (permutes, broadcasts, pads) is the reader's scalar index math, never the SFPU's. With 32 lanes a
tile is 1024 consecutive reduce indices of one output, so an input contiguous over (output, k) is one NoC read per
tile; `plan_reduce` plans that layout beside the one streaming the fewest tiles (`choose_layout`) and keeps the one
whose one-core launch the launch model prices lower (`launch_price`: the readers' per-datum walks usually decide).

SFPU work:
  * phase 1, every row step of every tile: f = pre(x) with the elementwise code generator, then acc = acc (+|max) f
    in LReg `ACC`, which the code generator is told never to touch (so it survives row steps and tiles);
  * after a group's last tile (`finish`): combine the lanes of each output - rotations within the 8-lane rows
    (SFPSHFT2 SUBVEC_SHFLROR1) for 2/4/8 lanes, plus an SFPTRANSP and three combines across the 4 rows for 32 -
    and store row step 0 to Dst slot `acc_slot`;
  * post: the post DAG once (row step 0) from that slot, output tile packed as usual; the writer picks the outputs.
So a long reduction (RMSNorm: 1 output, K = 2048) is K/1024 tiles of 32 row steps, not K tiles. A short one
(K <= 16) uses `steps` < 32 row steps per output: 32/steps step groups per tile, each lane one output per group, the
accumulator stored after each group (row step steps*group) and post run once per group (INCRWC between runs).

Several REDUCEs over the same axes (x.sum(1) + x.max(1); the frontend aliases their ranges) get one accumulator each
(ACCS) and their phase-1 programs run back to back per row step; REDUCE(op, REDUCE(op, f, k1), k2) is merged by the
frontend into one reduction over (k1, k2).

Two passes (`plan_two_pass`): a reduction whose pre-op reads another's finished value over the same (output, k)
space - tinygrad fuses x.argmax(), x.logsumexp(), (x - x.max()).exp().sum(), (x - x.mean()).abs().sum() with no axis
into one kernel; the frontend aliases the dependent reduction's ranges onto its source's - runs as two passes over
each group's tiles (the reader sends them twice, RED_PASSES = 2): pass 1 reduces the independent reductions, its
finish leaves each output's result in every lane it owns (lane_broadcast: bit-identical copies of the result lane)
at every row step of a Dst slot after the inputs; pass 2 reads that slot as an extra input in the dependent
reductions' pre-ops, then finish and post as usual. Only 1, 8 or 32 lanes per output (whole 8-lane rows) and the
short step groups are used there. Still refused: a reduction feeding one over other elements (x.max() feeding
per-row sums), three dependent levels, more than 3 reductions per pass, programs beyond the 8 Dst slots.

Padding: reduce indices past K in a group's last tile are pads. MAX reads element k = 0 of the same output there (max
is idempotent); ADD reads 0 when pre(0...) == 0 is known structurally (x, x*y, casts, ...), otherwise the reader adds
a validity-mask stream and the pre DAG becomes where(mask, pre, 0).

Accuracy: a float32 sum whose terms can have either sign is compensated (`compensated`; lane_combine.two_sum): each
lane keeps its partial sum s in ACC and the exact rounding errors of its additions summed in COMP, the lane combine
adds pairs the same way, and s + COMP is rounded once; its error is about one rounding of the result plus
(K/lanes + log2(lanes))^2 eps^2 sum|x| (docs/placement.md §5), so a sum that cancels keeps its relative accuracy
against the correctly rounded sum. Sums of provably non-negative terms (x*x, exp2, sqrt, bool casts: `non_negative`)
and sibling reductions (no LReg left for COMP) accumulate plainly in fp32: |error| <= (K/lanes + log2(lanes)) * eps
* sum|x|, which for non-negative terms is relative to the result; measured |tt - exact|/sum|x| <= 2.4e-7 (~2 eps)
for K up to 65536 (tinygrad's CPU: up to 3.8e-7). MAX is exact (SFPSWAP orders like the float total order: -0 < +0,
and a -NaN loses where the CPU's compare may keep it).

Candidate: one, priced by its whole launch (`launch_price`: the readers by mover_cost next to `reduce_cycles`'
compute, the compensated sum's longer phase 1 included), acceptable under any budget
(the float32 reduction, the error above). A kernel that is a matmul (matmul_match.kernel_matmul: a convolution
too) is offered unpriced (math.inf), so it runs here only when neither matmul family can plan it: the cost model
leaves out the reader, and this family's reader gathers every (m, n, k) product operand per datum, which the matmul
readers do not.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, replace

from tt_backend.lowering.codegen import sfpu_ops as so
from tt_backend.lowering.codegen.lane_combine import COMBINE, lane_broadcast, lane_combine, two_sum
from tt_backend.lowering.codegen.sfpu_codegen import DST_READ_GAP, MAX_SLOTS, assemble, compile_sfpu, const_bits
from tt_backend.lowering.dag import ValueDAG, VNode
from tt_backend.lowering.families.family import Candidate, Family, Kernel
from tt_backend.lowering.families.matmul_match import kernel_matmul
from tt_backend.lowering.families.tile_plan import ReducePass, ReducePlan, TilePlan, allocate_l1
from tt_backend.lowering.families.tile_render import render_tile_kernel
from tt_backend.lowering.families.mover_cost import (NOC_ROUND_TRIP, RED_PER_DATUM, RED_WALK_MIN_SLOTS,
                                                     group_write_cycles, l1_resident_cycles, on_grid, pad_fill_cycles,
                                                     pipeline,
                                                     red_datum_read_cycles, red_datum_math_cycles, reduce_walk_cycles,
                                                     stream_datum_cycles,
                                                     tile_read_cycles, window_load_cycles)
from tt_backend.lowering.families.tile_streams import reader_mode, stream_ctx
from tt_backend.lowering.frontend import LoweredKernel
from tt_backend.lowering.graph import live_nodes
from tt_backend.lowering.index import IndexExpr
from tt_backend.lowering.placement.choice import Split
from tt_backend.lowering.placement.cost import COST, pack_cycles, sfpu_op_cycles, sfpu_program_cycles, unpack_cycles
from tt_backend.lowering.placement.reference import (SAMPLE_DISTS, reduce_in_lanes, reference, rel_error,
                                                     sample_inputs)
from tt_backend.lowering.placement.report import Placement
from tt_backend.lowering.plan import DTYPE_SIZE, TILE_ELEMS, TILE_NATIVE, SfpuProgram, Stream
from tt_backend.chip.errors import UnsupportedOp
from tt_backend.chip.grid import Grid
from tt_backend.chip.isa import decode, encode

NAME = "sfpu_reduce"
GENERATOR = "lowering/families/sfpu_reduce.py"

ACC = 7                                   # accumulator LReg (not 0: the program setup loads constants through LReg0)
ACCS = (7, 6, 5)                          # accumulators of sibling reductions (x.sum(1) + x.max(1)); ACCS[0] = ACC
COMP = 6                                  # a compensated sum's error part (one reduction per pass: ACCS[1] is free)
LANE_CHOICES = (1, 2, 4, 8, 32)
SHORT_STEPS = (2, 4, 8, 16)               # row steps per output for short reductions (K <= steps)
IDENTITY = {("ADD", "float32"): 0.0, ("ADD", "int32"): 0, ("ADD", "bool"): False, ("MUL", "float32"): 1.0,
            ("MAX", "float32"): float("-inf"), ("MAX", "bfloat16"): float("-inf"), ("MAX", "int32"): -2**31,
            ("MAX", "bool"): False, ("MUL", "bool"): True, ("MUL", "int32"): 1, ("ADD", "uint32"): 0,
            ("MUL", "uint32"): 1, ("MAX", "uint32"): 0, ("MAX", "float16"): float("-inf")}
GROUP_COST = 0.25                         # a group's finish + post + output tile, relative to one input tile


@dataclass
class SfpuReducePlan(TilePlan):
    reduce: ReducePlan                  # layout and the accumulator programs (`sfpu` is the per-row-step phase 1)

    @property
    def n_tiles(self) -> int:
        return self.reduce.groups * self.reduce.tiles_per_group * self.reduce.passes

    def sfpu_words(self) -> list[int]:
        r, p1 = self.reduce, self.reduce.pass1
        words = super().sfpu_words() + r.post.setup + r.post.body + r.acc_init + r.finish + r.group_store
        if p1 is not None:
            words += p1.sfpu.setup + p1.sfpu.body + p1.acc_init + p1.finish + p1.group_store
        return words

    def reader_modes(self) -> list[str | None]:
        return [reader_mode(self, j, self.reduce) for j in range(len(self.inputs))]

    @property
    def split_unit(self) -> int:
        """One output group's input tiles (streamed `passes` times): each core owns whole groups, so whole outputs,
        and no combine step is needed."""
        return self.reduce.tiles_per_group * self.reduce.passes

    def launch_cycles(self, cores: int | None = None) -> dict:
        """The reduction's launch on `cores` cores (default: the plan's): per input tile the readers (mover_cost by
        mode; an affine walk over a resident buffer by the tile's share of datums, its window read once before the
        first tile) next to the placement's compute (its per-group work spread over the group's tiles) and the
        writer's per-group scatter, as a pipeline over the largest core's groups; DRAM bytes: the k-dependent inputs'
        tiles as the reader sends them (a resident group's once, not once per pass) and the outputs."""
        cyc = self.compute_cycles()
        cores, rp, unit = self.cores if cores is None else cores, self.reduce, self.split_unit
        per_core = -(-rp.groups // cores) * unit
        read, fill = self.read_cycles(cores)
        compute = cyc["total"] + cyc["per_group"] / unit
        one = {**self.pipeline_cycles(per_core, read, compute, fill),
               "l1_resident": round(l1_resident_cycles(per_core, read, compute, self.write_cycles(), fill))}
        dram = sum(DTYPE_SIZE[s.dtype] for s, dep in zip(self.inputs, rp.k_dep) if s.value is None and dep)
        out = on_grid(one, cores, per_core, self.n_tiles * rp.sends // rp.passes * TILE_ELEMS * dram + self.out_bytes())
        return {**out, "grid": "x".join(map(str, Grid().shape(cores)))}

    def pipeline_cycles(self, tiles: int, read: float, compute: float, fill: float) -> dict:
        """One core's `tiles` input tiles through reader, compute and writer at their per-tile averages."""
        return pipeline(tiles, read, compute, self.write_cycles(), fill)

    def compute_cycles(self) -> dict:
        """The compute's cycles (reduce_cycles' keys): the placement report's, or for a plan without one (two passes,
        or a model gap when it was placed) reduce_cycles directly."""
        return reduce_cycles(self) if self.placement is None else self.placement.cycles

    def write_cycles(self) -> float:
        """The writer's cycles per input tile: each group's outputs scattered once (the writer stops at the last)."""
        rp = self.reduce
        return group_write_cycles(min(rp.cells, rp.n_out)) / self.split_unit

    def out_bytes(self) -> int:
        return self.reduce.n_out * DTYPE_SIZE[self.output.dtype]

    def datum_walk_cycles(self, s, mode: str, cores: int) -> float:
        """A carry-chain walk's reader cycles per tile ("red gather", "red computed": mover_cost.RED_PER_DATUM) on
        the slowest of `cores` cores, each with whole groups: its datums (the last group's empty cells are on the
        last core) and the share of them its validity reaches (a conv gradient's outputs at the image's edges have
        fewer), in a tile of the largest core's."""
        rp = self.reduce
        per_core = -(-rp.groups // cores)
        # use_cores prices every core count, and many counts give the same whole groups a core: priced once each
        key = (id(s), mode, per_core, rp.groups, rp.cells, rp.n_out, rp.n_red, rp.tiles_per_group, self.ranges)
        memo = self.__dict__.setdefault("_walk_memo", {})
        hit = memo.get(key)
        if hit is None or hit[0] is not s:
            memo[key] = hit = (s, self._datum_walk_cycles(s, mode, per_core))
        return hit[1]

    def _datum_walk_cycles(self, s, mode: str, per_core: int) -> float:
        rp = self.reduce
        if per_core == rp.groups:
            valid = rp.n_out * rp.n_red / (rp.groups * rp.tiles_per_group * TILE_ELEMS)
            return red_datum_read_cycles(mode, valid, red_datum_math_cycles(s, self.ranges))
        slowest = 0.0
        for g0 in range(0, rp.groups, per_core):
            o0, o1 = g0 * rp.cells, min(rp.n_out, (g0 + per_core) * rp.cells)
            tiles = (min(rp.groups, g0 + per_core) - g0) * rp.tiles_per_group
            extra = red_datum_math_cycles(s, self.ranges, (o0 * rp.n_red, o1 * rp.n_red))
            valid = (o1 - o0) * rp.n_red / (tiles * TILE_ELEMS)
            slowest = max(slowest, red_datum_read_cycles(mode, valid, extra) * tiles)
        return slowest / (per_core * rp.tiles_per_group)

    def read_cycles(self, cores: int = 1) -> tuple[float, float]:
        """(the readers' cycles per input tile, their work before the first tile); the carry-chain walks on the
        slowest of `cores` cores (datum_walk_cycles)."""
        rp = self.reduce
        valid = rp.n_out * rp.n_red * rp.passes / (self.n_tiles * TILE_ELEMS)
        const = "red fill" if rp.lanes == 32 else "red const"      # a stream of one value per output cell
        read, fill, modes = 0.0, 0.0, []
        for j, s in enumerate(self.inputs):
            c = stream_ctx(self, s, j, rp)
            modes.append(c["mode"])
            if c["k_const"]:
                read += tile_read_cycles(const, s.tile_format, c["runs"])
            elif c["walk"] is not None and c["walk"]["resident"]:     # every tile of a group visits its outputs
                slots = rp.steps * rp.lanes
                priced = slots >= RED_WALK_MIN_SLOTS        # where the per-output figures were measured
                visits = rp.n_out * rp.tiles_per_group * rp.passes / self.n_tiles if priced else 0
                pads = rp.n_out * rp.passes / self.n_tiles if priced and c["pad_read"] and rp.n_red % slots else 0
                read += reduce_walk_cycles(valid, visits, len(self.ranges), pads)
            elif c["mode"] in ("red gather", "red computed"):
                read += self.datum_walk_cycles(s, c["mode"], cores)
            elif c["mode"] in RED_PER_DATUM:
                read += red_datum_read_cycles(c["mode"], valid, stream_datum_cycles(s, gather_ranges=0))
            else:
                read += tile_read_cycles(c["mode"], s.tile_format, c["runs"])
                if c["mode"] in ("red contiguous", "red k run"):
                    read += pad_fill_cycles((1 - valid) * TILE_ELEMS, s.tile_format)
            if f"stage_in{j}" in self.windows:
                fill += window_load_cycles(self.buffers[s.buf].nbytes)
        if rp.reads_in_flight(modes):
            read, fill = read - NOC_ROUND_TRIP * len(modes), fill + NOC_ROUND_TRIP
        return read * rp.sends / rp.passes, fill

    def render(self) -> dict[str, str]:
        return render_tile_kernel(self, GENERATOR, red=self.reduce)


# ------------------------------------------------------------------------------------------------ DAG split

def extract(dag: ValueDAG, root: int, leaf: dict[int, VNode]) -> ValueDAG:
    """The sub-DAG reaching `root`, renumbered; nodes in `leaf` are replaced by the given (source-less) node."""
    out, new = ValueDAG(), {}

    def go(i: int) -> int:
        if i in new: return new[i]
        n = dag.nodes[i]
        if i in leaf:
            m = leaf[i]
            new[i] = out.add(m.op, m.dtype, (), m.arg)
        elif n.op == "REDUCE":
            raise UnsupportedOp("a reduction of a reduction in one kernel (nested REDUCE) is not one SFPU pass "
                                "(the staged family splits it)")
        else:
            srcs = tuple(go(s) for s in n.srcs)
            new[i] = out.add(n.op, n.dtype, srcs, n.arg)
        return new[i]

    stack = [(root, False)]                 # iterative post-order: DAGs can be deep
    while stack:
        i, ready = stack.pop()
        if i in new: continue
        if ready or i in leaf or not dag.nodes[i].srcs:
            go(i)
            continue
        stack.append((i, True))
        stack.extend((s, False) for s in dag.nodes[i].srcs if s not in new)
    out.out = new[root]
    return out


# ops that give a finite value on finite operands (overflow aside): a product with a zero factor is then zero
FINITE_OPS = frozenset({"ADD", "SUB", "MUL", "NEG", "MAX", "WHERE", "CAST", "TRUNC", "CMPLT", "CMPNE"})


def zero_preserving(dag: ValueDAG, padded: set[int]) -> bool:
    """True when the DAG's value is (+-)0 whenever the loads in `padded` (input indices) read 0: then pads need no
    mask for a sum. Structural and conservative: products with a zero factor whose other factor stays finite at pads
    (0 * inf is NaN: a pad reading 0 into a reciprocal, as in a layer norm's scale, must not reach the sum), sums/max/
    where of zero operands, a where whose condition is False (zero) at pads and whose other side is zero, bit ANDs
    with a zero operand and comparisons of zeros that are False (0 != 0, 0 < 0: a packed predicate, lowering/
    bool_pack.py)."""
    z: list[bool] = []
    finite: list[bool] = []       # finite at pads: built of loads and finite constants by FINITE_OPS only
    for n in dag.nodes:
        s = [z[i] for i in n.srcs]
        f = [finite[i] for i in n.srcs]
        if n.op == "LOAD": v = n.arg in padded
        elif n.op == "CONST": v = n.arg == 0
        elif n.op == "MUL": v = (s[0] and f[1]) or (s[1] and f[0])
        elif n.op in ("ADD", "SUB", "MAX", "CMPNE", "CMPLT"): v = s[0] and s[1]
        elif n.op in ("NEG", "CAST", "SQRT", "TRUNC"): v = s[0]
        elif n.op == "AND": v = s[0] or s[1]
        elif n.op == "WHERE": v = s[2] and (s[0] or s[1])
        else: v = False
        z.append(v)
        finite.append(math.isfinite(n.arg) if n.op == "CONST" and isinstance(n.arg, float)
                      else n.op in ("LOAD", "CONST") or (n.op in FINITE_OPS and all(f)))
    return z[dag.out]


def non_negative(dag: ValueDAG) -> bool:
    """True when the DAG's value is >= 0 (or NaN) for every input: then a sum of it cannot cancel and plain fp32
    accumulation is accurate relative to the result. Structural and conservative: squares (x*x), exp2, square roots,
    bool and unsigned loads and casts from them, non-negative constants, and sums/products/max/min/where of such."""
    nn: list[bool] = []
    for n in dag.nodes:
        s = [nn[i] for i in n.srcs]
        if n.op == "LOAD": v = n.dtype in ("bool", "uint32")
        elif n.op == "CONST": v = isinstance(n.arg, (bool, int, float)) and n.arg >= 0
        elif n.op == "MUL": v = (s[0] and s[1]) or n.srcs[0] == n.srcs[1]
        elif n.op in ("ADD", "RECIPROCAL", "SQRT", "EXP2"): v = n.op in ("SQRT", "EXP2") or all(s)
        elif n.op == "MAX": v = s[0] or s[1]
        elif n.op == "CAST": v = s[0] or dag.nodes[n.srcs[0]].dtype in ("bool", "uint32")
        elif n.op == "WHERE": v = s[1] and s[2]
        else: v = False
        nn.append(v)
    return nn[dag.out]


def compensated(op: str, dtype: str, pre: ValueDAG, n_acc: int) -> bool:
    """Whether a reduction accumulates as a compensated sum (module docstring, Accuracy): a float32 sum of terms of
    either sign, alone in its pass (COMP is a sibling's accumulator otherwise)."""
    return (op, dtype) == ("ADD", "float32") and n_acc == 1 and not non_negative(pre)


def fold_into(op: str, dtype: str, acc: int, comp: bool):
    """The phase-1 epilogue folding the row step's value x into accumulator `acc` (compensated: into (acc, COMP))."""
    if comp:
        return lambda em, x, free: two_sum(em, acc, COMP, x, tuple(free[:2]))
    comb = COMBINE[(op, dtype)]
    return lambda em, x, free: comb(em, acc, x, free[:2])


def init_words(ops: list[tuple[str, str]], comp: bool) -> list[int]:
    """Accumulators := the ops' identities (and a compensated sum's COMP := 0), at the start of each group."""
    init = so.Emitter()
    for (op, dtype), a in zip(ops, ACCS):
        init.loadi(a, const_bits(IDENTITY[(op, dtype)], dtype))
    if comp:
        init.loadi(COMP, 0)
    return assemble(init.ins)


def finish_words(ops: list[tuple[str, str]], lanes: int, acc_slot: int, broadcast: bool = False,
                 comp: bool = False, rows: int = 32) -> list[int]:
    """After a group's last tile: combine each output's lanes of accumulator i (LReg ACCS[i], op/dtype ops[i]) and
    store row step 0 of Dst slot acc_slot + i. With several accumulators they are parked in their slots first (the
    32-lane combine's SFPTRANSP permutes LReg4-7) and reloaded one at a time. `broadcast` (the first pass of a
    two-pass reduction): every lane of each output gets its result (lane_broadcast), stored to all 32 row steps of
    the slot, so the second pass's pre-op reads it at any (row step, lane) of the output. `comp`: the one accumulator
    is a compensated sum (ACC, COMP). `rows`: the row steps a broadcast is stored to (1 where only setups, which
    read row step 0, read it)."""
    fin = so.Emitter()
    fin.i("SFPNOP")                               # the last phase-1 combine may still be in flight
    gap = [("SFPNOP", {})] * DST_READ_GAP         # a written Dst block is unreadable for 4 cycles
    if len(ops) > 1:
        for i in range(len(ops)):
            fin.store(ACCS[i], 64 * (acc_slot + i))
        fin.ins.extend(gap)
    for i, (op, dtype) in enumerate(ops):
        if len(ops) > 1:
            fin.load(ACC, 64 * (acc_slot + i), so.LOAD_INT32)
        res = lane_combine(fin, op, dtype, lanes, ACC, 0, COMP if comp else None)
        if broadcast:
            res = lane_broadcast(fin, lanes, res)
            for step in range(rows):
                fin.store(res, 64 * (acc_slot + i) + 2 * step)
        else:
            fin.store(res, 64 * (acc_slot + i))
        fin.ins.extend(gap)
    return assemble(fin.ins)


def choose_layout(n_out: int, n_red: int, lane_choices: tuple[int, ...] = LANE_CHOICES) -> tuple[int, int]:
    """(lanes, steps) per output minimising the tiles streamed (plus a little per group for finish/post/pack/write).
    steps < 32 (short reductions: 32/steps outputs per lane, one tile per group) only with lanes = 1 and K <= steps."""
    def cost(lg: int, st: int) -> float:
        groups = -(-n_out // ((32 // st) * (32 // lg)))
        return groups * -(-n_red // (st * lg)) + GROUP_COST * groups
    cands = [(lg, 32) for lg in lane_choices] + [(1, st) for st in SHORT_STEPS if n_red <= st]
    return min(cands, key=lambda c: (cost(*c), -c[1], c[0]))



# ------------------------------------------------------------------------------------------------ the plan

def reduce_shape(lk: LoweredKernel, reds: list[VNode], feeding: str) -> tuple:
    """(axes, number of output ranges, output range sizes, reduce range sizes) of reductions that run over one
    (output, k) space; UnsupportedOp for different reduce ranges, non-innermost ones or an op without a combine."""
    axes = reds[0].arg[1]
    if any(r.arg[1] != axes for r in reds):
        raise UnsupportedOp(f"{lk.name}: reductions over different ranges in one kernel (one reduction feeding "
                            f"{feeding}, e.g. a fused softmax/cross-entropy) are not one SFPU pass (the staged "
                            "family splits the kernel)")
    n_ranges = len(lk.ranges)
    n_out_r = n_ranges - len(axes)
    if tuple(axes) != tuple(range(n_out_r, n_ranges)):
        raise UnsupportedOp(f"{lk.name}: reduce ranges {axes} are not the innermost of {n_ranges} (frontend order)")
    for r in reds:
        if (r.arg[0], r.dtype) not in COMBINE:
            raise UnsupportedOp(f"{lk.name}: REDUCE {r.arg[0]} in {r.dtype} (lowered: float32 sum/prod/max, "
                                "bfloat16 max, int32 and uint32 sum/prod/max, bool any/all)")
    return axes, n_out_r, tuple(lk.ranges[:n_out_r]), tuple(lk.ranges[n_out_r:])


def plan_reduce(lk: LoweredKernel, budget: float | None = None) -> SfpuReducePlan:
    """LoweredKernel (frontend) with REDUCE nodes -> SfpuReducePlan (L1 not yet allocated), its placement report
    predicted for `budget`. Several reductions over the same axes (x.sum(1) + x.max(1): the frontend aliases their
    ranges) get one accumulator each and share the input streams; a reduction that feeds another one over the same
    elements (x.argmax(), x.logsumexp() with no axis) is planned in two passes (plan_two_pass)."""
    dag = lk.dag
    reds = [n for n in dag.nodes if n.op == "REDUCE"]
    if any(reduce_deps(dag, r) for r in reds):
        return plan_two_pass(lk, reds)
    if not 1 <= len(reds) <= len(ACCS):
        raise UnsupportedOp(f"{lk.name}: {len(reds)} reductions in one kernel (at most {len(ACCS)} are lowered)")
    axes, n_out_r, out_sizes, red_sizes = reduce_shape(lk, reds, "another")
    n_out, n_red = math.prod(out_sizes), math.prod(red_sizes)
    streams = [lk.stream(s) for s in lk.inputs]
    k_dep = [any(r >= n_out_r for r in s.ranges) for s in lk.inputs]
    layouts = [choose_layout(n_out, n_red)]
    if layouts[0] != (32, 32) and any(d and bulk_read(s, 32, n_red) for s, d in zip(streams, k_dep)):
        layouts.append((32, 32))
    plans = []
    for i, layout in enumerate(layouts):
        try:
            plans.append(_plan_layout(lk, budget, reds, streams, k_dep, out_sizes, red_sizes, *layout))
        except UnsupportedOp:
            if i == 0: raise          # the 32-lane alternative may not fit (its pads' mask stream): the first stays
    return plans[0] if len(plans) == 1 else min(plans, key=launch_price)


def bulk_read(s: Stream, lanes: int, n_red: int) -> bool:
    """Whether input stream s is read with one NoC transaction per tile ("red contiguous"): the reduce layout is
    gathered, except with 32 lanes, where a tile is 1024 consecutive k of one output, so a stream contiguous over
    (output, k) is one run of the buffer per tile (bulk reads keep DRAM and L1 congruent mod 64, so each output's run
    of K elements must start 64-aligned)."""
    return s.contiguous and lanes == 32 and s.dtype in TILE_NATIVE and (n_red * DTYPE_SIZE[s.dtype]) % 64 == 0


def _plan_layout(lk: LoweredKernel, budget: float | None, reds: list[VNode], streams: list[Stream], k_dep: list[bool],
                 out_sizes: tuple, red_sizes: tuple, lanes: int, steps: int) -> SfpuReducePlan:
    """plan_reduce for one layout (lanes and row steps per output)."""
    dag, n_red = lk.dag, math.prod(red_sizes)
    streams = [replace(s, contiguous=bulk_read(s, lanes, n_red)) for s in streams]
    k_dep = list(k_dep)

    # one level: pads masked where needed (pad_clamp: a MAX among them, then pads read real elements for every stream)
    pres, _, mask_input, pad_clamp = masked_pres(lk, streams, k_dep, reds, [], n_red % (steps * lanes) != 0)
    n, n_acc = len(streams), len(reds)
    if n + n_acc + 1 > MAX_SLOTS:
        raise UnsupportedOp(f"{lk.name}: {n} input streams and {n_acc} reductions do not fit the {MAX_SLOTS} Dst slots")

    acc_slot = n              # phase 1's scratch output slot; after the lane combine, reduction i is in slot n + i
    post = extract(dag, dag.out, {r.id: VNode(-1, "LOAD", r.dtype, (), acc_slot + i) for i, r in enumerate(reds)})
    for nd in post.nodes:
        if nd.op == "LOAD" and nd.arg < n and k_dep[nd.arg]:
            raise UnsupportedOp(f"{lk.name}: a value after the reduction reads input {nd.arg} per reduce index")

    accs = ACCS[:n_acc]
    ops = [(r.arg[0], r.dtype) for r in reds]
    comp = compensated(*ops[0], pres[0], n_acc)
    progs = [compile_sfpu(pre, n, r.dtype, reserve=accs + ((COMP,) if comp else ()),
                          epilogue=fold_into(*ops[i], accs[i], comp))
             for i, (r, pre) in enumerate(zip(reds, pres))]
    phase1 = progs[0] if n_acc == 1 else chain_programs(progs)
    post_prog = compile_sfpu(post, n + n_acc, lk.dag.nodes[dag.out].dtype)
    if post_prog.dst_slots > MAX_SLOTS or phase1.dst_slots > MAX_SLOTS:
        raise UnsupportedOp(f"{lk.name}: the reduction's SFPU programs need more than {MAX_SLOTS} Dst slots")

    group_store, post_skip = [], []
    if steps < 32:
        # step group g ends with Dst RWC = 2*steps*(g+1): its results go to row step steps*g of slot acc_slot + i;
        # the lanes need no combine (lanes = 1), so finish is only the Dst read gap before post loads them
        gs = so.Emitter()
        gs.i("SFPNOP")                            # the last combine may still be in flight
        if comp:
            gs.fadd(ACC, ACC, COMP)
        for i, a in enumerate(accs):
            gs.store(a, 64 * (acc_slot + i) - 2 * steps)
        group_store = assemble(gs.ins)
        finish = [encode("SFPNOP")] * DST_READ_GAP
        skip = 2 * steps - 2                      # post's own final store adds 2
        while skip:
            post_skip.append(encode("INCRWC", rwc_d=min(skip, 15)))
            skip -= min(skip, 15)
    else:
        finish = finish_words(ops, lanes, acc_slot, comp=comp)
    rp = ReducePlan(op="+".join(o for o, _ in ops), dtype=reds[0].dtype, out_sizes=out_sizes, red_sizes=red_sizes,
                    lanes=lanes, acc_reg=ACC, acc_init=init_words(ops, comp), finish=finish,
                    acc_slot=acc_slot, post=post_prog, k_dep=k_dep, mask_input=mask_input, pad_clamp=pad_clamp,
                    n_acc=n_acc, steps=steps, group_store=group_store, post_skip=post_skip, compensated=comp)
    output = replace(lk.stream(lk.output), contiguous=False)
    plan = SfpuReducePlan(name=lk.name, ranges=lk.ranges, buffers=lk.buffers, inputs=streams, output=output,
                          sfpu=phase1, ops=lk.ops, reduce=rp)
    try:      # the report's placement (all SFPU), cost and predicted error; TT_CHECK measures it
        plan.placement = reduce_placement(lk, plan, budget)
    except Exception as e:      # a model gap must not fail the kernel: it is then reported without a placement
        warnings.warn(f"{lk.name}: no placement report for this reduction ({type(e).__name__}: {e})")
    return plan


def chain_programs(progs: list[SfpuProgram]) -> SfpuProgram:
    """One row step running several phase-1 programs: each one's setup (its pooled constants differ) and body; only
    the last keeps the Dst-advancing final store (ADDR_MOD_DST_SEC1), the others store with address mode 0."""
    body: list[int] = []
    for i, p in enumerate(progs):
        words = list(p.body)
        if i < len(progs) - 1:
            for k, w in enumerate(words):
                name, f = decode(w)
                if name == "SFPSTORE" and f["sfpu_addr_mode"] == 1:
                    words[k] = encode(name, **{**f, "sfpu_addr_mode": 0})
        body += p.setup + words + [encode("SFPNOP")]       # the combine (an SFPMAD) may still be in flight
    return SfpuProgram(setup=[], body=body, dst_slots=max(p.dst_slots for p in progs), out_slot=progs[0].out_slot)


# ------------------------------------------------------------------------------------------------ two passes

def pass_program(name: str, group: list[VNode], pres: list[ValueDAG], n_in: int, comp: bool) -> SfpuProgram:
    """The per-row-step program of one pass: each reduction's pre-op (reading inputs 0..n_in-1) folded into its
    accumulator ACCS[i] (comp: the one reduction a compensated sum), chained when there are several."""
    accs = ACCS[:len(group)]
    progs = [compile_sfpu(pre, n_in, r.dtype, reserve=accs + ((COMP,) if comp else ()),
                          epilogue=fold_into(r.arg[0], r.dtype, accs[i], comp))
             for i, (r, pre) in enumerate(zip(group, pres))]
    prog = progs[0] if len(progs) == 1 else chain_programs(progs)
    if prog.dst_slots > MAX_SLOTS:
        raise UnsupportedOp(f"{name}: the reduction's SFPU programs need more than {MAX_SLOTS} Dst slots")
    return prog


def reduce_deps(dag: ValueDAG, r: VNode) -> set[int]:
    """Ids of the REDUCE nodes r's pre-op reads (the finished value of another reduction)."""
    seen, todo, out = set(), list(r.srcs), set()
    while todo:
        i = todo.pop()
        if i in seen: continue
        seen.add(i)
        if dag.nodes[i].op == "REDUCE":
            out.add(i)
        else:
            todo.extend(dag.nodes[i].srcs)
    return out


def dedupe_streams(lk: LoweredKernel) -> LoweredKernel:
    """The frontend gives each REDUCE's loads their own streams; with the ranges aliased (a dependent reduction over
    the same elements) several are the same (buffer, index, gate, value): keep one, the DAG's LOADs renumbered and
    merged."""
    keys, first, remap = {}, [], {}
    for j, s in enumerate(lk.inputs):
        key = (s.slot, s.dtype, s.index_c, s.valid_c, s.value_c)
        if key not in keys:
            keys[key] = len(first)
            first.append(s)
        remap[j] = keys[key]
    if len(first) == len(lk.inputs):
        return lk
    dag, ids, loads = ValueDAG(), {}, {}
    for n in lk.dag.nodes:
        if n.op == "LOAD":
            a = remap[n.arg]
            if a not in loads:
                loads[a] = dag.add("LOAD", n.dtype, (), a)
            ids[n.id] = loads[a]
        else:
            ids[n.id] = dag.add(n.op, n.dtype, tuple(ids[x] for x in n.srcs), n.arg)
    dag.out = ids[lk.dag.out]
    return replace(lk, inputs=first, dag=dag)


TWO_PASS_LANES = (1, 8, 32)     # lane_broadcast needs each output's lanes to be whole 8-lane rows (or one lane)


def reduction_levels(lk: LoweredKernel, third_level: str, per_level: str) -> tuple[list, list, list]:
    """(the kernel's REDUCE nodes, those reading no other: level 1, those reading level 1's results: level 2).
    Refused with UnsupportedOp, the messages completed by the caller's form: a reduction reading a level-2 one (a
    third level), more than len(ACCS) reductions in a level."""
    dag = lk.dag
    reds = [n for n in dag.nodes if n.op == "REDUCE"]
    deps = {r.id: reduce_deps(dag, r) for r in reds}
    p1 = [r for r in reds if not deps[r.id]]
    p2 = [r for r in reds if deps[r.id]]
    p1_ids = {r.id for r in p1}
    if any(not deps[r.id] <= p1_ids for r in p2):
        raise UnsupportedOp(f"{lk.name}: a reduction reading a reduction that reads another one ({third_level} "
                            "(the staged family splits the kernel)")
    if len(p1) > len(ACCS) or len(p2) > len(ACCS):
        raise UnsupportedOp(f"{lk.name}: more than {len(ACCS)} reductions in {per_level}")
    return reds, p1, p2


def masked_pres(lk: LoweredKernel, streams: list[Stream], k_dep: list[bool], p1: list, p2: list,
                has_pads: bool) -> tuple[list, dict, int | None, bool]:
    """The pre-ops of one or two reduction levels (reduction_levels; p2 empty: one), level 2's reading level 1's
    results broadcast in the Dst slots after the streams (slot len(streams) + i). Where a group's last tile has pads (`has_pads`) and a pre-op
    is not known to give its reduction's identity there (MAX reads element 0 instead; zero_preserving ADDs read 0), a
    validity-mask stream is appended to `streams` and `k_dep` and the pre-op becomes where(mask, pre, identity).
    Returns (the pre-ops of p1 + p2, level 1's results as Dst leaves by reduction id, the mask's stream or None,
    whether pads read real elements: a MAX among the reductions, `pad_clamp`)."""
    dag, reds = lk.dag, p1 + p2
    pad_clamp = any(r.arg[0] == "MAX" for r in reds)
    padded = {j for j, d in enumerate(k_dep) if d}
    probe = {r.id: VNode(-1, "LOAD", r.dtype, (), 1 << 20) for r in p1}    # (the slots are known after the mask)
    pres = [extract(dag, r.srcs[0], {} if r in p1 else probe) for r in reds]
    masked = [has_pads and r.arg[0] != "MAX" and (pad_clamp or r.arg[0] != "ADD" or not zero_preserving(pre, padded))
              for r, pre in zip(reds, pres)]
    mask_input = None
    if any(masked):
        mask_input = len(streams)
        streams.append(Stream(lk.buf_index(lk.output.slot), "bool", IndexExpr.const(0)))
        k_dep.append(True)
    leaf1 = {r.id: VNode(-1, "LOAD", r.dtype, (), len(streams) + i) for i, r in enumerate(p1)}
    pres = pres[:len(p1)] + [extract(dag, r.srcs[0], leaf1) for r in p2]     # level 2's with level 1's real slots
    for r, pre, m in zip(reds, pres, masked):
        if m:
            ld = pre.add("LOAD", "bool", (), mask_input)
            ident = pre.add("CONST", r.dtype, (), IDENTITY[(r.arg[0], r.dtype)])
            pre.out = pre.add("WHERE", r.dtype, (ld, pre.out, ident))
    return pres, leaf1, mask_input, pad_clamp


def plan_two_pass(lk: LoweredKernel, reds: list[VNode]) -> SfpuReducePlan:
    """Reductions where one reads another's finished value in its pre-op (x.argmax(): max, then a max over
    (x == max) * reversed index; (x - x.max()).exp().sum(); (x - x.mean()).abs().sum()): two passes over each
    group's tiles in one kernel, the reader sending them twice.
      pass 1: the reductions that read no other (P1) fold into their accumulators as usual; after the group's last
              tile the lane combine, then lane_broadcast and 32 stores leave each output's result in every lane it
              owns, at every row step of Dst slot n + i (n input streams; steps < 32: per step group, the `steps`
              row steps of the group), where nothing else writes until the group is done;
      pass 2: the reductions reading P1 values (P2) run with those slots as extra inputs (LOAD n + i), their own
              accumulators (the P1 LRegs are free again), finish and post as a one-pass reduction; the post may
              read P1 values (slot n + i) and P2 values (slot n + len(P1) + i).
    Both passes reduce over the same (output, k) space (the frontend aliases their ranges). Refused with
    UnsupportedOp: a reduction reading a P2 value (three passes), more than len(ACCS) reductions in one pass,
    reductions over different ranges, and programs that need more Dst slots than there are."""
    lk = dedupe_streams(lk)
    dag = lk.dag
    reds, p1, p2 = reduction_levels(lk, "three passes over the data) is not a two-pass reduction",
                                    "one pass of a two-pass reduction")
    axes, n_out_r, out_sizes, red_sizes = reduce_shape(lk, reds, "another over other elements")
    n_out, n_red = math.prod(out_sizes), math.prod(red_sizes)
    lanes, steps = choose_layout(n_out, n_red, TWO_PASS_LANES)

    streams = [replace(s, contiguous=bulk_read(s, lanes, n_red)) for s in map(lk.stream, lk.inputs)]
    k_dep = [any(r >= n_out_r for r in s.ranges) for s in lk.inputs]

    pres, leaf1, mask_input, pad_clamp = masked_pres(lk, streams, k_dep, p1, p2, n_red % (steps * lanes) != 0)
    pres1, pres2 = pres[:len(p1)], pres[len(p1):]
    n = len(streams)
    slot1, slot2 = n, n + len(p1)          # P1 results (broadcast), then P2 results (finish, row 0)
    if slot2 + len(p2) + 1 > MAX_SLOTS:
        raise UnsupportedOp(f"{lk.name}: {n} input streams and {len(reds)} reductions in two passes do not fit the "
                            f"{MAX_SLOTS} Dst slots")
    leaf = dict(leaf1)
    leaf.update({r.id: VNode(-1, "LOAD", r.dtype, (), slot2 + i) for i, r in enumerate(p2)})
    post = extract(dag, dag.out, leaf)
    for nd in post.nodes:
        if nd.op == "LOAD" and nd.arg < n and k_dep[nd.arg]:
            raise UnsupportedOp(f"{lk.name}: a value after the reduction reads input {nd.arg} per reduce index")

    ops1 = [(r.arg[0], r.dtype) for r in p1]
    ops2 = [(r.arg[0], r.dtype) for r in p2]
    comp1, comp2 = compensated(*ops1[0], pres1[0], len(p1)), compensated(*ops2[0], pres2[0], len(p2))

    prog1 = pass_program(lk.name, p1, pres1, n, comp1)
    prog2 = pass_program(lk.name, p2, pres2, slot2, comp2)
    post_prog = compile_sfpu(post, slot2 + len(p2), lk.dag.nodes[dag.out].dtype)
    if post_prog.dst_slots > MAX_SLOTS:
        raise UnsupportedOp(f"{lk.name}: the reduction's SFPU programs need more than {MAX_SLOTS} Dst slots")
    group_store1, group_store2, post_skip = [], [], []
    if steps < 32:
        # step group g ends with Dst RWC = 2*steps*(g+1); P1 results go to all `steps` row steps of the group, P2
        # results to its first row step (as plan_reduce); lanes = 1: no combine, no broadcast
        for group, dest, out, comp in ((p1, slot1, group_store1, comp1), (p2, slot2, group_store2, comp2)):
            gs = so.Emitter()
            gs.i("SFPNOP")
            if comp:
                gs.fadd(ACC, ACC, COMP)
            for i, a in enumerate(ACCS[:len(group)]):
                for row in range(steps if group is p1 else 1):
                    gs.store(a, 64 * (dest + i) - 2 * steps + 2 * row)
            out.extend(assemble(gs.ins))
        finish1 = [encode("SFPNOP")] * DST_READ_GAP
        finish2 = [encode("SFPNOP")] * DST_READ_GAP
        skip = 2 * steps - 2
        while skip:
            post_skip.append(encode("INCRWC", rwc_d=min(skip, 15)))
            skip -= min(skip, 15)
    else:
        finish1 = finish_words(ops1, lanes, slot1, broadcast=True, comp=comp1)
        finish2 = finish_words(ops2, lanes, slot2, comp=comp2)
    pass1 = ReducePass(op="+".join(o for o, _ in ops1), sfpu=prog1, acc_init=init_words(ops1, comp1), finish=finish1,
                       slot=slot1, n_acc=len(p1), group_store=group_store1)
    rp = ReducePlan(op="+".join(o for o, _ in ops2), dtype=p2[0].dtype, out_sizes=out_sizes, red_sizes=red_sizes,
                    lanes=lanes, acc_reg=ACC, acc_init=init_words(ops2, comp2), finish=finish2,
                    acc_slot=slot2, post=post_prog, k_dep=k_dep, mask_input=mask_input, pad_clamp=pad_clamp,
                    n_acc=len(p2), steps=steps, group_store=group_store2, post_skip=post_skip, pass1=pass1,
                    compensated=comp2)
    output = replace(lk.stream(lk.output), contiguous=False)
    # (no placement report, no FPU option: the accumulation-order model and the FPU sum cover one pass)
    return SfpuReducePlan(name=lk.name, ranges=lk.ranges, buffers=lk.buffers, inputs=streams, output=output,
                          sfpu=prog2, ops=lk.ops, reduce=rp)


# ------------------------------------------------------------------------------------------------ cost and report

REDUCE_SAMPLE_MAX = 1 << 16     # sample points per distribution for a reduction's prediction (one output's K, capped)


def streams_unpack_cycles(streams: list[Stream]) -> tuple[float, float]:
    """(unpack, FPU) cycles per tile of the input streams: each unpacked, a bf16 one moved to Dst by ELWADDs."""
    fmts = [s.tile_format for s in streams]
    fpu = sum(COST["blocks_per_tile"] + COST["fpu_latency"] + COST["faces_per_tile"] * COST["fpu_setrwc"]
              for f in fmts if f == "bf16")
    return sum(unpack_cycles(f) for f in fmts), fpu


def reduce_cycles(plan: SfpuReducePlan) -> dict:
    """Cost of a reduction kernel (same units and rules as lowering.placement.cost.cycles): per input tile the streams'
    unpack (+ the SrcA/ELWADD pass of a bf16 stream) and the phase-1 SFPU program; per output group the accumulator
    init, the lane combine (`finish`), the post program (once per step group) and the output tile's pack."""
    rp = plan.reduce
    unpack, fpu = streams_unpack_cycles(plan.inputs)
    sfpu = sfpu_program_cycles(len(plan.sfpu.setup), len(plan.sfpu.body) + plan.sfpu.body_stalls)
    runs = 1 if rp.steps >= 32 else 32 // rp.steps
    group = (len(rp.acc_init) + len(rp.finish) + runs * (len(rp.post.setup) + len(rp.post.body)
                                                          + len(rp.group_store) + len(rp.post_skip)))
    if (p1 := rp.pass1) is not None:     # each group's tiles streamed once per pass, the first pass's program once
        sfpu = (sfpu * (rp.passes - 1)
                + sfpu_program_cycles(len(p1.sfpu.setup), len(p1.sfpu.body) + p1.sfpu.body_stalls)) / rp.passes
        group += len(p1.acc_init) + len(p1.finish) + runs * len(p1.group_store)
    pack = pack_cycles(plan.output.tile_format)
    tiles, groups = plan.n_tiles, rp.groups
    per_tile = unpack + fpu + sfpu
    return {"unpack": unpack, "fpu": fpu, "sfpu": sfpu, "pack": pack, "total": per_tile, "tiles": tiles,
            "groups": groups, "per_group": group + pack, "kernel": tiles * per_tile + groups * (group + pack)}


def reduce_placement(lk: LoweredKernel, plan: SfpuReducePlan, budget: float | None = None, seed: int = 0,
                     dists=SAMPLE_DISTS) -> Placement:
    """The placement of a reduction kernel on the SFPU (a plain sum may instead go to the FPU:
    lowering/families/fpu_reduce.py prices it against this one and records the FPU options in the report), with the
    cost of `reduce_cycles` and a predicted error from the accumulation-order model (`reduce_in_lanes`: fp32 lane
    partial sums, plain or compensated, then the lane combine) against the exact reduction, on sample data: one output's full reduce range
    (capped at REDUCE_SAMPLE_MAX points), worst over the sample distributions. Other ops are modelled in float32
    (the SFPU sequences are within 1-2 ulp of it: a slight underestimate)."""
    dag, rp = lk.dag, plan.reduce
    n_out_r = len(lk.ranges) - len(rp.red_sizes)
    ranges = (1,) * n_out_r + tuple(rp.red_sizes)
    err = mx = None
    if math.prod(ranges) <= REDUCE_SAMPLE_MAX:
        dts = [s.dtype for s in lk.inputs]
        errs = []
        for k, dist in enumerate(dists):
            xs = sample_inputs(dts, math.prod(ranges), seed + k, dist)
            model = reduce_in_lanes(rp.lanes, rp.compensated)
            errs.append(rel_error(reference(dag, xs, ranges, model), reference(dag, xs, ranges)))
        err, mx = max(e[0] for e in errs), max(e[1] for e in errs)
    cyc = reduce_cycles(plan)
    n = len(lk.inputs)
    pl = Placement(lk.name, budget, dag, {}, Split([], dag, n, list(range(n))), err, mx, cyc, cyc["kernel"])
    after: set[int] = set()        # ops after the reduction run once per output group, not per tile
    for i in live_nodes(dag):
        nd = dag.nodes[i]
        if any(dag.nodes[s].op == "REDUCE" or s in after for s in nd.srcs):
            after.add(i)
        if nd.op in ("LOAD", "CONST"):
            continue
        row = {"id": i, "op": nd.op, "dtype": nd.dtype, "srcs": list(nd.srcs), "engine": "SFPU", "fidelity": None,
               "pinned": False, "formats": {"lreg": "fp32"}, "predicted_error": 0.0}
        if nd.op == "REDUCE":     # the accumulation order is where the kernel's error comes from
            row.update(reduce=nd.arg[0], lanes=rp.lanes, compensated=rp.compensated, predicted_error=err,
                       cycles=COST["rows_per_tile"] * cyc["tiles"])
        else:
            per_tile = sfpu_op_cycles(nd, tuple(dag.nodes[s].dtype for s in nd.srcs))
            runs = 1 if rp.steps >= 32 else 32 // rp.steps       # post: one row step per step group
            row["cycles"] = (-(-per_tile // COST["rows_per_tile"]) * runs * cyc["groups"] if i in after
                             else per_tile * cyc["tiles"])
        pl.nodes.append(row)
    return pl


# ------------------------------------------------------------------------------------------------ the family

def baseline(kernel: Kernel) -> SfpuReducePlan:
    """The kernel's SFPU reduction plan (L1 not allocated), planned once per kernel: the FPU sum prices itself
    against it and records its options in its report."""
    return kernel.shared(_plan_kernel)


def _plan_kernel(kernel: Kernel) -> SfpuReducePlan:
    return plan_reduce(kernel.lowered, kernel.budget)


def match(kernel: Kernel) -> LoweredKernel | None:
    lk = kernel.lowered
    return lk if any(n.op == "REDUCE" for n in lk.dag.nodes) else None


def launch_price(plan: SfpuReducePlan) -> float:
    """What the selector compares: the plan's whole launch on one core (readers, compute, writer: launch_cycles; the
    core count is chosen after the family); math.inf when its L1 does not fit (the build then fails and says why)."""
    try:
        return allocate_l1(plan, resident_windows=True).launch_cycles(1)["total"]
    except UnsupportedOp:
        return math.inf


def candidates(kernel: Kernel, lk: LoweredKernel) -> list[Candidate]:
    """The SFPU reduction, acceptable under any budget, priced by its whole launch (`launch_price`); unpriced for a
    plain matmul (module docstring)."""
    if kernel.shared(kernel_matmul) is not None:
        return [Candidate(NAME, "SFPU fp32", math.inf, None, True, lambda: allocate_l1(baseline(kernel), resident_windows=True))]
    plan = baseline(kernel)
    err = plan.placement.predicted_error if plan.placement is not None else None
    return [Candidate(NAME, "SFPU fp32", launch_price(plan), err, True, lambda: allocate_l1(plan, resident_windows=True))]


FAMILY = Family(NAME, match, candidates)
