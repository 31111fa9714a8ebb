"""The fused reduction family: reductions and the elementwise that reads them, over the reductions' own elements, in
one launch.

With PCONTIG=2 tinygrad fuses a normalization into one kernel: RMSNorm-2048 is r_2048_2048, out[n] = x[n] *
rsqrt(mean_k(x[k]^2) + eps) * w[n], a REDUCE over k whose finished value an elementwise over n reads, n and k running
over the same elements. A row norm (x of shape (R, N) normalized over its last axis) is the same per row r; a layer
norm and a row softmax have two levels of reductions (mean, then the variance reading it; max, then the sum of
exp(x - max)) before their elementwise. The one-pass families refuse such a kernel (a value after the reduction reads
an input per reduce index) and the staged family would run it as two or three launches through a DRAM scratch.

Here the kernel is lowered with each such output range read as the reduce range (frontend.lower_ast `fuse`): its
loads at (r, n) are the reduction's at (r, k), one stream each, and the kernel is one pass structure over the
reductions' (output, k) space in the SFPU reduction's 32-lane layout (tile_plan.ReducePlan: a tile is 1024 consecutive
k of one output; sfpu_reduce.py's readers):
  * level 1: the reductions that read no other fold each row step into their accumulators; after a group's last tile
    the lane combine and lane_broadcast leave each result in every lane and row step of a Dst slot after the inputs
    (sfpu_reduce.plan_two_pass's first pass);
  * level 2 (optional): the reductions that read level 1's results, likewise into the next slots;
  * the elementwise: the kernel's value with each reduction read from its slot, run over the 32 row steps of every
    tile of the group once more, one output tile packed per input tile. It is placed as an elementwise kernel is
    (the placement search under the error budget, `elementwise_placement`): a product of two of its streams may run
    on the FPU (RMSNorm's x * gamma under TT_ERR_BUDGET=1e-2: an ELWMUL at HiFi3, as in the staged E_2048), issued
    by TRISC0's thread behind its operands' unpacks, and the SFPU program reads its result from Dst. The writer
    writes it as one run where the output is contiguous over (output, k) in 16-byte multiples ("red tile"), else
    ("red out") by runs of consecutive addresses, each run's NoC write not waited for: from each tile's first address
    where the index steps by a constant per k (`out_step`: step 1 one copied run per tile, a transposed output one
    write per datum), else through the output index per datum.
A group of at most CB_DEPTH tiles (`resident`) is read from DRAM once and stays in its CBs for every pass (each
stream waited for only in the passes that read it); a longer group is sent once per pass (RED_PASSES = levels + 1).
The reductions' sums are in Dst between passes, never in DRAM, and there is no second launch.

Refused (UnsupportedOp, the staged family then splits the kernel as before): several STOREs, an output range the
reductions do not depend on that is not one reduce range of the same size (a norm over several axes), a reduction
reading a level-2 result (three levels), reductions over different ranges, more than 3 reductions per level, programs
beyond the 8 Dst slots.

Candidate: one, priced by its launch (FusedReducePlan.launch_cycles), acceptable under any budget (the SFPU float32
reductions, the elementwise's FPU ops by the placement search's rule); `select.select` takes it unless the launch
model prices the staged hoist's launches lower.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np
from tinygrad.uop.ops import Ops, UOp

from tt_backend.chip.errors import UnsupportedOp
from tt_backend.chip.isa import decode, encode
from tt_backend.lowering.codegen.sfpu_codegen import MAX_SLOTS, compile_sfpu
from tt_backend.chip.sfpu_regs import sfpu_regs
from tt_backend.lowering.codegen import sfpu_ops as so
from tt_backend.lowering.codegen.sfpu_codegen import assemble, const_bits
from tt_backend.lowering.codegen.sfpu_schedule import pure, row_stalls
from tt_backend.lowering.dag import VNode
from tt_backend.lowering.families.family import Candidate, Family, Kernel, choose
from tt_backend.lowering.families.mover_cost import red_out_cycles, tile_write_cycles
from tt_backend.lowering.families.sfpu_reduce import (ACC, IDENTITY, SfpuReducePlan, bulk_read, compensated,
                                                      dedupe_streams, extract, finish_words, init_words, launch_price, masked_pres,
                                                      pass_program, reduce_shape, reduction_levels,
                                                      streams_unpack_cycles)
from tt_backend.lowering.families.staged import top_reductions
from tt_backend.lowering.families.tile_plan import CB_DEPTH, ReducePass, ReducePlan, allocate_l1
from tt_backend.lowering.families.tile_render import dst_passes, input_roles, render_tile_kernel, second_dst_group
from tt_backend.lowering.families.tile_streams import stream_ctx
from tt_backend.lowering.frontend import LoweredKernel, free_ranges, lower_ast, output_ranges
from tt_backend.lowering.graph import live_nodes
from tt_backend.lowering.placement.choice import FpuOp, compile_split
from tt_backend.lowering.placement.cost import fpu_op_cycles, pack_cycles, sfpu_program_cycles, unpack_cycles
from tt_backend.lowering.placement.placer import Placer
from tt_backend.lowering.rewrite import keep_uniform_reciprocals
from tt_backend.lowering.plan import DTYPE_SIZE, TILE_ELEMS, TILE_NATIVE, Plan, SfpuProgram, Stream

NAME = "fused_reduce"
GENERATOR = "lowering/families/fused_reduce.py"
LANES = STEPS = 32          # one output per tile group, a tile = 1024 consecutive k (the only layout planned here)
WRITE_ALIGN = 16            # a bulk write needs slot and DRAM address congruent mod 16 (writer.c.j2)
RECIPROCAL_ROUNDING = 2.0 ** -23   # x * (1/r) rounded twice against x / r once: within an ulp, relative 2^-23


@dataclass
class FusedReducePlan(SfpuReducePlan):
    """An SfpuReducePlan whose ReducePlan is `fused`: earlier passes reduce, the last one writes a tile per tile.
    `fpu_ops`: the FPU ops of the last pass (the elementwise's placement, `plan_fused`), issued by TRISC0's thread
    behind their operands' unpacks, before the last pass's SFPU program reads their results from Dst."""
    fpu_ops: list[FpuOp] = field(default_factory=list)

    def compute_cycles(self) -> dict:
        return fused_cycles(self)

    def sfpu_words(self) -> list[int]:
        p2 = self.reduce.pass2
        return super().sfpu_words() + ([] if p2 is None else p2.sfpu.setup + p2.sfpu.body + p2.acc_init + p2.finish)

    def render(self) -> dict[str, str]:
        return render_tile_kernel(self, GENERATOR, red=self.reduce, fpu_ops=self.fpu_ops)

    def write_cycles(self) -> float:
        """Per input tile: one output tile per tile of the last pass, one NoC write ("red tile") or, per output, by
        the writer's path (mover_cost.red_out_cycles: the index's step, the runs of consecutive addresses out_runs
        counts)."""
        rp = self.reduce
        if stream_ctx(self, self.output, None, rp)["mode"] == "red tile":
            valid = rp.n_red / (rp.tiles_per_group * TILE_ELEMS)
            return tile_write_cycles("contiguous", self.output.tile_format, valid=valid) / rp.passes
        datums, runs, first = out_runs(self.output, self.ranges, len(rp.out_sizes))
        esz = DTYPE_SIZE[self.output.dtype]
        out = red_out_cycles(rp.out_step, datums, runs, rp.tiles_per_group, esz, split=esz == 2 and first % 2 == 1)
        return out / (rp.tiles_per_group * rp.passes)

    def pipeline_cycles(self, tiles: int, read: float, compute: float, fill: float) -> dict:
        """A group sent once per pass (not `resident`) runs pass by pass: a pass needs the earlier passes' results, so
        the reader runs ahead by what the CBs hold only, and each pass goes at its own slower stage, not at the
        passes' average (RMSNorm of 5000 fp32, 5 tiles a pass: the first pass the reader's 1.2K a tile, the last the
        SFPU's 2.8K, TT_DUMP timeline); a resident group's tiles, read once, keep SfpuReducePlan's pipeline."""
        one = super().pipeline_cycles(tiles, read, compute, fill)
        rp = self.reduce
        if rp.resident or rp.passes == 1:
            return one
        cyc, write = self.compute_cycles(), self.write_cycles()
        group = rp.tiles_per_group * sum(max(read, c, write) for c in cyc["per_pass"]) + cyc["per_group"]
        return {**one, "total": round(fill + read + write + tiles // self.split_unit * group)}

    def launch_cycles(self, cores: int | None = None) -> dict:
        """SfpuReducePlan's pipeline, or where a scattered writer ("red out": RISC-V work per datum, not a bulk
        write's round trip, which overlaps) bounds the launch, the writer's own time: the pipeline spreads its work
        over every input tile, but its first output tile waits for the first group's earlier passes (the first tile
        through reader and compute, then (passes - 1) x tiles_per_group of the slower), and then it writes every
        output tile of the core's groups."""
        lc = super().launch_cycles(cores)
        rp, cores = self.reduce, self.cores if cores is None else cores
        if stream_ctx(self, self.output, None, rp)["mode"] != "red out":
            return lc
        read, fill = self.read_cycles(cores)
        cyc = self.compute_cycles()
        compute = cyc["total"] + cyc["per_group"] / self.split_unit
        first = fill + read + compute + (rp.passes - 1) * rp.tiles_per_group * max(read, compute)
        writes = -(-rp.groups // cores) * self.split_unit * self.write_cycles()
        total = round(first + writes)
        if total <= lc["total"]:
            return lc
        return {**lc, "total": total, "price": lc["price"] + total - lc["total"]}

    def out_bytes(self) -> int:
        return self.reduce.n_out * self.reduce.n_red * DTYPE_SIZE[self.output.dtype]


def out_step(out: Stream, ranges: tuple[int, ...], n_out_ranges: int) -> int | None:
    """The elements the output index steps per k, where the scattered writer can step from each tile's first address
    instead of evaluating the index per datum (templates/blocks/scatter.c.j2 fused_affine): an ungated index, affine
    in the reduce ranges as in one flattened range, of a dtype whose tile datums are its DRAM bytes; else None."""
    co = out.index.coefficients(len(ranges)) if out.valid is None and out.dtype in TILE_NATIVE else None
    red = [i for i in range(n_out_ranges, len(ranges)) if ranges[i] > 1]
    if co is None or not red:
        return None
    step, inner = co[red[-1]], 1
    for i in reversed(red):
        if co[i] != step * inner:
            return None
        inner *= ranges[i]
    return step


def out_runs(out: Stream, ranges: tuple[int, ...], n_out_ranges: int) -> tuple[int, int, int]:
    """(datums, runs, first index) the scattered writer writes for the first output: its valid elements over the
    reduce ranges in order, a run where an element's address follows the previous one's (the output index evaluated
    on the host, lowering/index.py). Every output's elements are laid out alike where the index is affine."""
    red = ranges[n_out_ranges:]
    axes = [np.zeros(1, np.int64)] * n_out_ranges + list(np.unravel_index(np.arange(math.prod(red)), red))
    at = np.broadcast_to(out.index.evaluate(axes), axes[-1].shape).astype(np.int64)
    if out.valid is not None:
        at = at[np.broadcast_to(out.valid.evaluate(axes), at.shape).astype(bool)]
    return len(at), int(np.count_nonzero(np.diff(at) != 1)) + (len(at) > 0), int(at[0]) if len(at) else 0


def fused_cycles(plan: FusedReducePlan) -> dict:
    """The compute's cycles per input tile (as sfpu_reduce.reduce_cycles): each pass's unpacks to Dst (the streams
    it reads there, tile_render.dst_passes; a bf16 one moved by ELWADDs), the last pass's FPU ops with their
    operands' unpacks, and each pass's SFPU program, averaged over the passes; the packs of the last pass's tiles;
    per group the accumulators' init and finish of the earlier passes. With two Dst groups
    (tile_render.second_dst_group) a tile's unpack and the previous one's pack run beside its SFPU program: per tile
    the slowest of the three, the first unpack and the last pack once per group."""
    rp = plan.reduce
    levels = [p for p in (rp.pass1, rp.pass2) if p is not None]
    progs = [p.sfpu for p in levels] + [rp.post]
    unpacks, fpus = [], []
    for p in range(rp.passes):
        u, f = streams_unpack_cycles([s for j, s in enumerate(plan.inputs)
                                      if dst_passes(rp, plan.fpu_ops, j) >> p & 1])
        unpacks.append(u)
        fpus.append(f)
    for o in plan.fpu_ops:
        unpacks[-1] += unpack_cycles(plan.inputs[o.a].tile_format) + unpack_cycles(plan.inputs[o.b].tile_format)
        fpus[-1] += fpu_op_cycles(o)
    sfpus = [sfpu_program_cycles(len(p.setup), len(p.body) + p.body_stalls) for p in progs]
    packs = [0.0] * (rp.passes - 1) + [pack_cycles(plan.output.tile_format)]
    unpack, fpu, sfpu, pack = (sum(c) / rp.passes for c in (unpacks, fpus, sfpus, packs))
    group = sum(len(p.acc_init) + len(p.finish) for p in levels)
    two = two_dst_groups(plan)
    if two:
        per_tile, group = max(unpack + fpu, sfpu, pack), group + unpack + fpu + pack
    else:
        per_tile = unpack + fpu + sfpu + pack
    per_pass = [max(u + f, s, k) if two else u + f + s + k for u, f, s, k in zip(unpacks, fpus, sfpus, packs)]
    return {"unpack": unpack, "fpu": fpu, "sfpu": sfpu, "pack": pack, "total": per_tile, "tiles": plan.n_tiles,
            "groups": rp.groups, "per_group": group, "kernel": plan.n_tiles * per_tile + rp.groups * group,
            "per_pass": per_pass}


def two_dst_groups(plan: FusedReducePlan) -> bool:
    """Whether the rendered kernel alternates two Dst groups (as render_tile_kernel decides it)."""
    inputs = [stream_ctx(plan, s, j, plan.reduce) for j, s in enumerate(plan.inputs)]
    input_roles(plan, inputs, None, False, plan.reduce, plan.fpu_ops)
    return second_dst_group(plan, inputs, plan.fpu_ops, plan.reduce) is not None


# ------------------------------------------------------------------------------------------------ the match

def fused_ranges(sink: UOp) -> dict[int, int] | None:
    """{output range id: reduce range id} when the kernel is one STORE of a value over its reductions' (output, k)
    space: the reductions' values depend on all output ranges but one, n, and they reduce over one range k of n's
    size (the first reduction's; the frontend aliases the others' onto it). None otherwise."""
    stores = [u for u in sink.toposort() if u.op is Ops.STORE]
    if len(stores) != 1: return None
    tops = top_reductions(stores[0].src[1])
    reds = [u for u in sink.toposort() if u.op is Ops.REDUCE]
    if not tops or len(reds[0].src) != 2: return None
    memo: dict[UOp, frozenset] = {}
    shared = frozenset().union(*(free_ranges(r, memo) for r in tops))
    rest = output_ranges(sink) - shared
    k = reds[0].src[1]
    if len(rest) != 1 or k.op is not Ops.RANGE: return None
    n = next(iter(rest))
    if n.src[0].op is not Ops.CONST or k.src[0].op is not Ops.CONST:    # a symbolic bound: the frontend refuses it
        return None
    return {n.arg[0]: k.arg[0]} if n.src[0].arg == k.src[0].arg else None


def match(kernel: Kernel) -> LoweredKernel | None:
    return kernel.shared(_lowered) if fused_ranges(kernel.sink) is not None else None


def _lowered(kernel: Kernel) -> LoweredKernel:
    return lower_ast(kernel.sink, kernel.name, fuse=fused_ranges(kernel.sink))


# ------------------------------------------------------------------------------------------------ the plan

def plan_fused(lk: LoweredKernel, placer: Placer | None = None) -> FusedReducePlan:
    """The fused plan of a kernel lowered over its reductions' (output, k) space (module docstring); `placer`: the
    error budget and the placement search for the elementwise (None: all on the SFPU, float32-faithful)."""
    budget = placer.budget if placer is not None else None
    lk = dedupe_streams(lk)
    dag = lk.dag
    reds, level1, level2 = reduction_levels(lk, "three levels) is not fused", "one level of a fused reduction")
    _, n_out_r, out_sizes, red_sizes = reduce_shape(lk, reds, "the elementwise")
    n_red = math.prod(red_sizes)
    streams = [replace(s, contiguous=bulk_read(s, LANES, n_red)) for s in map(lk.stream, lk.inputs)]
    k_dep = [any(r >= n_out_r for r in s.ranges) for s in lk.inputs]

    # pads (k >= K in a group's last tile): as plan_two_pass; the elementwise computes them and the writer skips them
    pres, leaf1, mask_input, pad_clamp = masked_pres(lk, streams, k_dep, level1, level2, n_red % TILE_ELEMS != 0)
    n = len(streams)
    slot1, slot2 = n, n + len(level1)             # level 1's results, then level 2's, each broadcast
    n_in = slot2 + len(level2)
    leaf2 = {r.id: VNode(-1, "LOAD", r.dtype, (), slot2 + i) for i, r in enumerate(level2)}
    if n_in + 1 > MAX_SLOTS:
        raise UnsupportedOp(f"{lk.name}: {n} input streams and {len(reds)} reductions do not fit the {MAX_SLOTS} Dst "
                            "slots of a fused reduction")
    post = extract(dag, dag.out, leaf1 | leaf2)
    out_dtype = dag.nodes[dag.out].dtype
    # each group is one output, so its results fill their slots: what the elementwise computes from them alone
    # (RMSNorm's rsqrt(mean + eps)) is hoisted into its setup, once per tile instead of per row step
    uniform = frozenset(range(slot1, n_in))
    early = [pres[:len(level1)], pres[len(level1):]]
    resident = -(-n_red // (STEPS * LANES)) <= CB_DEPTH     # ReducePlan.resident, below
    placement, sp, read = elementwise_placement(lk, placer, post, streams, level1 + level2, uniform, early, resident)
    if sp is not None:
        post_prog = compile_split(sp, out_dtype)
    else:
        # under an error budget that allows one more rounding, x * (1/r) stays a product
        # (rewrite.keep_uniform_reciprocals: the reciprocal hoisted too) instead of the correctly rounded quotient per
        # element
        if budget is not None and budget >= RECIPROCAL_ROUNDING:
            post = keep_uniform_reciprocals(post, uniform)
        post_prog = compile_sfpu(post, n_in, out_dtype, uniform=uniform)
    if post_prog.dst_slots > MAX_SLOTS:
        raise UnsupportedOp(f"{lk.name}: the fused elementwise needs more than {MAX_SLOTS} Dst slots")

    def level(group: list[VNode], group_pres: list, n_in_level: int, slot: int, later: list) -> ReducePass:
        ops = [(r.arg[0], r.dtype) for r in group]
        comp = compensated(*ops[0], group_pres[0], len(group))
        prog = without_scratch_store(pass_program(lk.name, group, group_pres, n_in_level, comp), range(slot, n_in))
        rows = rows_read(range(slot, slot + len(group)), later)
        return pipelined_fold(ReducePass(op="+".join(o for o, _ in ops), sfpu=prog, acc_init=init_words(ops, comp),
                                         finish=finish_words(ops, LANES, slot, broadcast=True, comp=comp, rows=rows),
                                         slot=slot, n_acc=len(group)), *ops[0])

    pass2 = level(level2, pres[len(level1):], slot2, slot2, [post_prog]) if level2 else None
    pass1 = level(level1, pres[:len(level1)], n, slot1, [post_prog] + ([pass2.sfpu] if pass2 else []))
    rp = ReducePlan(op=pass1.op, dtype=level1[0].dtype, out_sizes=out_sizes, red_sizes=red_sizes, lanes=LANES,
                    acc_reg=ACC, acc_init=[], finish=[], acc_slot=slot1, post=post_prog, k_dep=k_dep,
                    mask_input=mask_input, pad_clamp=pad_clamp, n_acc=0, steps=STEPS, pass1=pass1, fused=True,
                    pass2=pass2)
    rp.resident = resident
    rp.pass_inputs = read
    out = lk.stream(lk.output)
    bulk = out.contiguous and out.dtype in TILE_NATIVE and (n_red * DTYPE_SIZE[out.dtype]) % WRITE_ALIGN == 0
    rp.out_step = None if bulk else out_step(out, lk.ranges, n_out_r)
    return FusedReducePlan(name=lk.name, ranges=lk.ranges, buffers=lk.buffers, inputs=streams,
                           output=replace(out, contiguous=bulk), sfpu=post_prog, ops=lk.ops, reduce=rp,
                           placement=placement, fpu_ops=list(sp.fpu_ops) if sp is not None else [])


def pass_inputs(passes: list[list], n: int) -> tuple[int, ...]:
    """Per input stream the passes (bit p: pass p, each a list of value graphs) that load it."""
    return tuple(sum(1 << p for p, dags in enumerate(passes) if any(reads(g, j) for g in dags)) for j in range(n))


def elementwise_placement(lk: LoweredKernel, placer: Placer | None, post, streams: list, reds: list[VNode],
                          uniform: frozenset[int], early: list[list], resident: bool) -> tuple:
    """The last pass's elementwise placed by the placement search as an elementwise kernel's is (Placer.place_graph:
    the same budget rules and cost model; the input streams are L1 tiles, the reductions' results are in Dst, which
    only the SFPU reads): (the placement, its split with the FPU ops' results in Dst slots of their own, the passes
    that read each stream from Dst: ReducePlan.pass_inputs; an FPU op's operands come through the Src banks), or
    (None, None, those passes) where the search puts nothing on the FPU (the all-SFPU program is then compiled as
    before).
    An FPU op's result takes the slot of a stream no pass unpacks to Dst where one is free (RMSNorm: gamma's, fed to
    the FPU only; a group that is not `resident` in its CBs has every stream unpacked in the earlier passes,
    tile_render.dst_passes), so that the second Dst group still fits (tile_render.second_dst_group)."""
    n, n_in = len(streams), len(streams) + len(reds)
    pl = None if placer is None else placer.place_graph(
        lk.name, post, [s.dtype for s in streams] + [r.dtype for r in reds], math.prod(lk.ranges), uniform,
        frozenset(range(n)))
    if pl is None or not pl.split.fpu_ops:
        return None, None, pass_inputs([dags for dags in early if dags] + [[post]], n)
    sp = pl.split
    read = pass_inputs([dags for dags in early if dags] + [[sp.sfpu_dag]], n)
    free = [j for j in range(n) if not read[j]] if resident else []
    slots = {o.slot: (free + list(range(n_in, MAX_SLOTS)))[i] for i, o in enumerate(sp.fpu_ops)}
    nodes = [VNode(v.id, v.op, v.dtype, v.srcs, slots.get(v.arg, v.arg) if v.op == "LOAD" else v.arg)
             for v in sp.sfpu_dag.nodes]
    sp = replace(sp, fpu_ops=[replace(o, slot=slots[o.slot]) for o in sp.fpu_ops],
                 sfpu_dag=replace(sp.sfpu_dag, nodes=nodes), n_slots=max([n_in, *(s + 1 for s in slots.values())]))
    return pl, sp, read


def without_scratch_store(prog: SfpuProgram, dead: range) -> SfpuProgram:
    """A pass's row step without its last word where that is the store of the folded value into a slot of `dead`
    (its own or a later level's result slots: nothing reads them before that level's finish writes them) whose only
    use is to advance Dst's RWC (ADDR_MOD_DST_SEC1): the row step's last SFPLOAD advances it instead, after its own
    access, where no Dst access follows it. One word less per row step (RMSNorm's sum: 4 words -> 3)."""
    ins = [decode(w) for w in prog.body]
    loads = [i for i, (name, _) in enumerate(ins) if name == "SFPLOAD"]
    if not loads or ins[-1][0] != "SFPSTORE" or ins[-1][1]["sfpu_addr_mode"] != 1 \
            or ins[-1][1]["dest_reg_addr"] // 64 not in dead or ins[loads[-1]][1]["sfpu_addr_mode"] != 0 \
            or any(name in ("SFPLOAD", "SFPSTORE") for name, _ in ins[loads[-1] + 1:-1]):
        return prog
    body = ins[:-1]
    body[loads[-1]] = ("SFPLOAD", {**body[loads[-1]][1], "sfpu_addr_mode": 1})
    return replace(prog, body=[encode(name, **f) for name, f in body], body_stalls=row_stalls(body))


def pipelined_fold(p: ReducePass, op: str, dtype: str) -> ReducePass:
    """A pass whose row step ends with its value's producer and the fold of that value into the accumulator (the fold
    then waits for the producer: an automatic stall per row step) with the fold moved behind the row step's first
    instruction, where it folds the previous row step's value: the accumulator sees the same values in the same
    order, one row step later. The value register starts as the op's identity (acc_init: the first fold is a no-op)
    and the finish folds the last row step's value first. Only where it removes stalls, with one accumulator, pure
    instructions (no lane flags), a first instruction and a per-tile setup that touch neither the value nor the
    accumulator, and no other instruction touching the accumulator (RMSNorm's sum: 4 -> 3 cycles per row step)."""
    ins = [decode(w) for w in p.sfpu.body]
    if p.n_acc != 1 or len(ins) < 3 or not all(pure(*i) for i in ins):
        return p
    first, prod, fold = ins[0], ins[-2], ins[-1]
    written, acc = sfpu_regs(*prod)[2], 1 << ACC
    if written not in [1 << b for b in range(8)]:       # the producer writes one LReg: the value
        return p
    value, value_bits = written, written.bit_length() - 1
    fold_reads, _, fold_writes = sfpu_regs(*fold)
    touched = [sfpu_regs(*i) for i in [first] + [decode(w) for w in p.sfpu.setup]]
    if value == acc or fold_writes != acc or not fold_reads & value or fold_reads & 0xFF & ~(acc | value) \
            or any((r | w) & (acc | value) for r, _, w in touched[:1]) \
            or any(w & (acc | value) for _, _, w in touched) \
            or any((sfpu_regs(*i)[0] | sfpu_regs(*i)[2]) & acc for i in ins[1:-1]):
        return p
    body = [first, fold] + ins[1:-1]
    if row_stalls(body) >= row_stalls(ins):
        return p
    start = so.Emitter()
    start.loadi(value_bits, const_bits(IDENTITY[(op, dtype)], dtype))
    return replace(p, sfpu=replace(p.sfpu, body=[encode(n, **f) for n, f in body], body_stalls=row_stalls(body)),
                   acc_init=p.acc_init + assemble(start.ins), finish=[p.sfpu.body[-1]] + p.finish)


def rows_read(slots: range, later: list[SfpuProgram]) -> int:
    """The row steps of a level's result slots that the later passes' programs read: all (STEPS) where a body loads
    them, else 1 (a setup reads row step 0 only; RMSNorm's rsqrt(mean + eps)), so the finish stores 1 row step instead
    of 32."""
    for prog in later:
        if prog.macro is not None:      # an SFPLOADMACRO schedule: its loads are not looked into
            return STEPS
        for word in prog.body:
            name, f = decode(word)
            if name == "SFPLOAD" and f["dest_reg_addr"] // 64 in slots:
                return STEPS
    return 1


def reads(dag, j: int) -> bool:
    """Whether the graph's output depends on a LOAD of input j (a split's graph keeps the loads the FPU took, dead)."""
    return any(dag.nodes[i].op == "LOAD" and dag.nodes[i].arg == j for i in live_nodes(dag))


# ------------------------------------------------------------------------------------------------ the family

def candidates(kernel: Kernel, lk: LoweredKernel) -> list[Candidate]:
    """The fused plan, priced by its launch (sfpu_reduce.launch_price), acceptable under any budget (its elementwise's
    FPU ops by the placement search's rule)."""
    plan = plan_fused(lk, kernel.placer)
    pl = plan.placement
    return [Candidate(NAME, "FPU+SFPU" if plan.fpu_ops else "SFPU fp32", launch_price(plan),
                      None if pl is None else pl.predicted_error, True, lambda: built(plan))]


def built(plan: FusedReducePlan) -> FusedReducePlan:
    """The plan with its L1 placed; its placement report (the elementwise's, where it has FPU ops) priced as the
    whole launch's compute (fused_cycles), as the selector compared it."""
    plan = allocate_l1(plan, resident_windows=True)
    if plan.placement is not None:
        plan.placement.cycles = fused_cycles(plan)
    return plan


FAMILY = Family(NAME, match, candidates)


def fused(kernel: Kernel) -> Plan | None:
    """The kernel's fused plan (one launch), or None when it is not of the fused shape or this family refuses it (the
    selector's other families and the staged cuts then take it)."""
    if fused_ranges(kernel.sink) is None:
        return None
    try:
        return choose(kernel, (FAMILY,))
    except UnsupportedOp:
        return None
