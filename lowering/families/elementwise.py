"""The elementwise family: kernels without a reduction, one output element per iteration point, run on the tile
pipeline (tile_plan): the reader streams each input's tiles into Dst, the value DAG runs per 32-lane row step on the
SFPU, or partly on the FPU (ELWMUL/ELWADD/ELWSUB straight from the unpackers) where the placement search
(lowering/placement) finds that cheaper within the error budget, and the writer takes the output tile.

Its one candidate is the placement search's answer (without a placer: all on the SFPU in float32, no report).

On a grid: the output tiles are split into contiguous ranges, one per core (tile_plan.TilePlan; of a column-by-column
walk for inverse transposes, tile_streams.tile_grid), priced by mover_cost.grid_pipeline_cycles.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from tt_backend.lowering.codegen.sfpu_codegen import compile_sfpu
from tt_backend.lowering.codegen.sfpu_macro import with_macro_schedule
from tt_backend.chip.grid import Grid
from tt_backend.lowering.families import shared_programs
from tt_backend.lowering.families.family import Candidate, Family, Kernel
from tt_backend.lowering.families.index_cost import inlined_loads
from tt_backend.lowering.families.tile_plan import READ_AHEAD, TilePlan, allocate_l1, window_bytes
from tt_backend.lowering.families.tile_render import dst_overlap, render_tile_kernel
from tt_backend.lowering.families.mover_cost import (NOC_ROUND_TRIP, WALK_HALFWORD_PER_DATUM, WALK_WIDEN_PER_DATUM,
                                                     column_fill_cycles, column_walk_cycles, compute_stage,
                                                     gather_reload_cycles, grid_pipeline_cycles, head_broadcast,
                                                     reads_in_flight, stream_datum_cycles, window_load_cycles)
from tt_backend.lowering.families.tile_streams import column_windows, reader_mode, stream_ctx, tile_grid
from tt_backend.lowering.families.window_walk import tile_window_loads
from tt_backend.lowering.frontend import LoweredKernel
from tt_backend.lowering.graph import live_nodes
from tt_backend.lowering.placement.choice import FpuOp, compile_split, split
from tt_backend.lowering.placement.report import Placement
from tt_backend.lowering.plan import DTYPE_SIZE, TILE_BYTES, TILE_ELEMS

NAME = "elementwise"
GENERATOR = "lowering/families/elementwise.py"


@dataclass
class ElementwisePlan(TilePlan):
    # FPU placement: FpuOps run before the SFPU program, each writing Dst slot op.slot; dst_inputs = the input
    # streams unpacked to Dst (None: all)
    fpu_ops: list[FpuOp] = field(default_factory=list)
    dst_inputs: list[int] | None = None

    @property
    def n_tiles(self) -> int:
        return max(1, -(-self.n_elements // TILE_ELEMS))

    def arg_words(self, dram_addrs: list[int]) -> list[int]:
        return shared_programs.with_table(self, [super().arg_words(dram_addrs)], self.fpu_ops, self.dst_inputs)[0]

    def core_arg_words(self, dram_addrs: list[int]) -> list[list[int]]:
        return shared_programs.with_table(self, super().core_arg_words(dram_addrs), self.fpu_ops, self.dst_inputs)

    def reader_modes(self) -> list[str | None]:
        return [reader_mode(self, j) for j in range(len(self.inputs))]

    def render(self) -> dict[str, str]:
        return render_tile_kernel(self, GENERATOR, fpu_ops=self.fpu_ops, dst_inputs=self.dst_inputs,
                                  programs=shared_programs.sources(self, self.fpu_ops, self.dst_inputs))

    def launch_cycles(self, cores: int | None = None) -> dict | None:
        """The placement's compute per tile next to the reader's and writer's (lowering/families/mover_cost.py), on
        `cores` cores (default: the plan's), with the grid shape they occupy."""
        if self.placement is None or "total" not in self.placement.cycles:
            return None
        cores = self.cores if cores is None else cores
        reads, reloaded, before = self._reads()
        write = (stream_ctx(self, self.output, None)["mode"], self.output.tile_format,
                 stream_datum_cycles(self.output, writer=True))
        dram = sum(DTYPE_SIZE[s.dtype] for s in self.inputs if s.value is None) + DTYPE_SIZE[self.output.dtype]
        dst = range(len(self.inputs)) if self.dst_inputs is None else self.dst_inputs
        fpu_ops = len(self.fpu_ops) + sum(self.inputs[j].tile_format == "bf16" for j in dst)
        compute = compute_stage(self.placement.cycles, fpu_ops,
                                dst_overlap(self, self.fpu_ops, self.dst_inputs, cores))
        if self.tile_grid is None:    # the slowest core's columns walks, replayed tile by tile
            reads = [(m, f, {**runs, "walk_cycles": column_walk_cycles(runs, self.n_elements, cores)}, *rest)
                     if m == "columns" and runs.get("column_bytes") else (m, f, runs, *rest)
                     for m, f, runs, *rest in reads]
        fills = [column_fill_cycles(r[2], DTYPE_SIZE[s.dtype], -(-self.n_tiles // cores),
                                    self.tile_grid[0] if self.tile_grid else None)
                 for s, r in zip(self.inputs, reads) if r[0] == "columns" and r[2].get("column_bytes")]
        out = grid_pipeline_cycles(self.n_tiles, reads, write, compute, cores, dram * TILE_ELEMS + reloaded,
                                   self.n_elements / (self.n_tiles * TILE_ELEMS), before + sum(c for c, _, _ in fills),
                                   DTYPE_SIZE[self.output.dtype] * TILE_ELEMS, READ_AHEAD,
                                   sum(b for _, b, _ in fills), sum(f for _, _, f in fills))
        return {**out, "grid": "x".join(map(str, Grid().shape(cores)))}

    def _reads(self) -> tuple[list[tuple], int, float]:
        """The launch model's input streams (mover_cost.tile_pipeline_cycles: mode, tile format, runs, cycles per datum
        beyond the mode's figure, the kernel's ranges, whether its index math loads), the bytes per tile the gathers'
        window reloads move (window_walk): the reloads are priced per datum of the tile, and their bytes go to the DRAM
        banks with the tiles'; and the loads of the windows that hold their buffer whole (resident), once per core
        before its first tile (a head broadcast's waited for with the first tile's reads where those are in flight: its
        bytes only)."""
        reads, reloaded, windows = [], 0, []
        datums = min(TILE_ELEMS, self.n_elements)
        inlined = inlined_loads([e for s in self.inputs for e in (s.index, s.valid)])
        for j, s in enumerate(self.inputs):
            c = stream_ctx(self, s, j)
            extra = stream_datum_cycles(s, gather_ranges=len(self.ranges) if c["mode"] == "gather" else None,
                                        inlined=inlined)
            if c["mode"] in ("strided", "columns") and c["esz"] != TILE_BYTES[s.tile_format] // TILE_ELEMS:
                extra += WALK_WIDEN_PER_DATUM        # every datum converted on its way into the slot
            elif c["mode"] in ("strided", "columns") and s.tile_format == "bf16":
                extra += WALK_HALFWORD_PER_DATUM     # every halfword zero-extended on its way into the slot
            if c["mode"] == "gather":
                loads, moved = tile_window_loads(s.index, s.valid, tuple(self.ranges), datums, c["esz"],
                                                 self.buffers[s.buf].nbytes, window_bytes(self, f"in{j}"))
                extra += gather_reload_cycles(loads, moved) / datums
                reloaded += moved
            nbytes = self.buffers[s.buf].nbytes
            if (c["runs"] or {}).get("resident") or (c["mode"] == "gather" and nbytes <= window_bytes(self, f"in{j}")):
                windows.append((window_load_cycles(nbytes), head_broadcast(c["mode"], c["runs"])))
            loaded = any(e is not None and e.loads() for e in (s.index, s.valid))
            reads.append((c["mode"], s.tile_format, c["runs"], extra, len(self.ranges), loaded))
        overlapped = NOC_ROUND_TRIP if reads_in_flight(reads) else 0.0
        return reads, reloaded, sum(load - (overlapped if head else 0) for load, head in windows)


def plan_sfpu(lk: LoweredKernel) -> ElementwisePlan:
    """Everything on the SFPU in float32 (L1 not yet allocated)."""
    sfpu = with_macro_schedule(compile_sfpu(lk.dag, len(lk.inputs), lk.dag.nodes[lk.dag.out].dtype,
                                            uniform=lk.uniform_inputs))
    return ElementwisePlan(name=lk.name, ranges=lk.ranges, buffers=lk.buffers,
                           inputs=[lk.stream(s) for s in lk.inputs], output=lk.stream(lk.output), sfpu=sfpu,
                           ops=lk.ops, head_inputs=sfpu.setup_only)


def plan_placed(lk: LoweredKernel, pl: Placement) -> ElementwisePlan:
    """LoweredKernel + Placement -> plan (L1 not yet allocated): the SFPU program of the split, the FPU ops, and which
    inputs still go to Dst."""
    out_dtype = pl.dag.nodes[pl.dag.out].dtype
    sp = split(pl.dag, pl.choices, len(lk.inputs), lk.uniform_inputs) if pl.split is None else pl.split
    sfpu = with_macro_schedule(compile_split(sp, out_dtype))
    ops = lk.ops if not pl.reassociated else [n.op if n.op != "CAST" else f"CAST->{n.dtype}" for n in
                                              (pl.dag.nodes[i] for i in live_nodes(pl.dag)) if n.op not in ("LOAD", "CONST")]
    return ElementwisePlan(name=lk.name, ranges=lk.ranges, buffers=lk.buffers,
                           inputs=[lk.stream(s) for s in lk.inputs], output=lk.stream(lk.output), sfpu=sfpu,
                           ops=ops, fpu_ops=list(sp.fpu_ops), dst_inputs=list(sp.dst_inputs), placement=pl,
                           head_inputs=sfpu.setup_only - {j for o in sp.fpu_ops for j in (o.a, o.b)})


def allocated(plan: ElementwisePlan) -> ElementwisePlan:
    """The plan with its L1 placed, transposing readers' windows grown (tile_streams.column_windows) and their tiles
    walked in the order that keeps each core's reads in one block of columns (tile_streams.tile_grid)."""
    plan.tile_grid = tile_grid(plan)
    return allocate_l1(plan, windows=column_windows(plan))


def match(kernel: Kernel) -> LoweredKernel | None:
    lk = kernel.lowered
    return None if any(n.op == "REDUCE" for n in lk.dag.nodes) else lk


def candidates(kernel: Kernel, lk: LoweredKernel) -> list[Candidate]:
    """The placement search's answer: the cheapest placement within the budget (the search's own rule: predicted
    error <= SAFETY x budget, or bit-identical to all-SFPU without one), so acceptable by construction. Without a
    placer the all-SFPU plan, unpriced (it is the only candidate there is)."""
    if kernel.placer is None:
        return [Candidate(NAME, "SFPU fp32", math.inf, None, True, lambda: allocated(plan_sfpu(lk)))]
    pl = kernel.placer.place(lk)
    label = "SFPU fp32" if not pl.choices else "FPU+SFPU"
    return [Candidate(NAME, label, pl.cycles["kernel"], pl.predicted_error, True,
                      lambda: allocated(plan_placed(lk, pl)))]


FAMILY = Family(NAME, match, candidates)
