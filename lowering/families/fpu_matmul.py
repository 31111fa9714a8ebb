"""The FPU matmul family: a matched matmul (matmul_spec.MatmulSpec) with MVMUL. `plan_matmul` turns the spec into an
`FpuMatmulPlan` (fidelity, source format, L1 allocation) and `render_matmul` into the reader / compute / writer sources.

Data flow (one Tensix core, docs/fpu_path.md §5-9):
* reader (BRISC): per batch, all of B tilized into L1 (face layout, zero padded, K/32 x N/32 tiles); per row block of
  A, one panel of K/32 tiles (double buffered). DRAM lines are fetched with NoC reads into a staging line and
  scattered into faces by the RISC-V (word copies for row-contiguous operands, element copies for transposed ones).
* TRISC0: per output tile and K block, unpacker 0 takes B's tile (in1, K x N) to SrcA and unpacker 1 A's tile
  (in0, M x K) to SrcB, whole tiles (1024 datums): bf16 stays bf16, fp32 is truncated to tf32 by the unpacker.
* TRISC1: ZEROACC the fp32 Dst tile, then per K block `fidelity` phases of 16 MVMULs (`Dst += SrcB @ SrcA`), the
  last one releasing both banks. The C tile accumulates in fp32 Dst over all K blocks.
* TRISC2: packs the fp32 tile (64 Dst rows) to the output CB.
* writer (NCRISC): untilizes 32-row panels of C (rounding fp32 -> bf16 to nearest even for bf16 outputs), masks the
  edges and writes each output row with one NoC write.

Precision: bf16 x bf16 at HiFi4 is exact per product, but the fp32 accumulation aligns each group of 8 products to
its largest (docs/fpu_path.md §10.3), and fp32 inputs go through tf32: neither is fp32-faithful, so the FPU runs a matmul
only when the caller passes an error budget that allows it; otherwise the fp32 SFPU matmul
(lowering/families/sfpu_matmul.py) is the one acceptable candidate and plan_matmul raises UnsupportedOp.

Candidates: one per fidelity, priced in MVMULs (16 per K block and phase per output tile), predicted error
PREDICTED_ERR, acceptable when that is <= the budget (no budget: none is).
"""
from __future__ import annotations

from dataclasses import dataclass

from tt_backend.lowering.codegen.l1 import CAPACITY, l1_bytes, place
from tt_backend.lowering.codegen.mvmul import ALU_FORMAT_MM, UNPACK_CFG_MM, UNPACK_CFG_MM_COMMON, matmul_words
from tt_backend.lowering.codegen.sources import kernel_sources
from tt_backend.lowering.codegen.tensix import PACK_CFG
from tt_backend.lowering.codegen.words import hex_u32
from tt_backend.lowering.families.family import Candidate, Family, Kernel
from tt_backend.lowering.families.matmul_spec import (TILE, MatmulKernelPlan, MatmulSpec, kernel_matmul, line_bytes,
                                                      matmul_args_header, matmul_io, operand_ctx, out_pitch)
from tt_backend.lowering.families.mover_cost import matmul_cycles
from tt_backend.lowering.plan import DTYPE_SIZE, Report
from tt_backend.chip.errors import UnsupportedOp
from tt_backend.chip.numerics.fpu_math import FIDELITY_PHASES

NAME = "fpu_matmul"
GENERATOR = "lowering/families/fpu_matmul.py"

# Predicted worst-case error of one output, normalised by sum_k |a_mk b_kn|, per source format and fidelity
# (docs/fpu_path.md §10.5, MVMUL max err/sum|ab| with some headroom; fp32 inputs add the unpacker's tf32 truncation).
PREDICTED_ERR = {
    "bf16": {"LoFi": 6e-2, "HiFi2": 1e-2, "HiFi3": 1.5e-3, "HiFi4": 1.5e-3},
    "tf32": {"LoFi": 8e-2, "HiFi2": 2e-2, "HiFi3": 4e-3, "HiFi4": 3e-3},
}


@dataclass
class FpuMatmulPlan(MatmulKernelPlan):
    fidelity: str              # LoFi | HiFi2 | HiFi3 | HiFi4
    src_format: str            # bf16 | tf32 (what the multiplier sees)
    predicted_err: float

    @property
    def phases(self) -> int: return FIDELITY_PHASES[self.fidelity]

    def render(self) -> dict[str, str]:
        return render_matmul(self)

    def launch_cycles(self) -> dict:
        modes = operand_ctx(self.spec.a)["mode"], operand_ctx(self.spec.b)["mode"]
        return matmul_cycles(self.spec, self.phases, modes)


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
        self.kernel = plan.name

    def report(self) -> dict:
        return {"kernel": self.kernel, "budget": self.budget, "predicted_error": self.predicted_error,
                "predicted_max_rel": None, "predicted_cycles": self.nodes[0]["cycles"], "predicted_cycles_per_tile": {},
                "all_sfpu_cycles": None, "reassociated": False, "evaluator_error": "error model: docs/fpu_path.md §10.5 "
                "(max error / sum|ab| of MVMUL per fidelity, with headroom)", "nodes": self.nodes}


def choose_fidelity(src_format: str, err_budget: float | None, out_bf16: bool = True) -> str | None:
    """The cheapest fidelity whose predicted error fits the budget. No budget (float32-faithful) -> None, the fp32 SFPU
    matmul, also for bf16 x bf16 -> bf16: HiFi4's products are exact, but MVMUL aligns each group of products to its
    largest, an error of up to ~1.5e-3 of sum|ab|, which on zero-mean data is about one bf16 ulp of the result, not
    below it. Measured (bit-exact model = ttsim) on N(0,1) data, K 256..2048: relative L2 error 1.0e-3..1.2e-3 against
    the exactly rounded bf16 result, ~1e-5 for the SFPU matmul. `out_bf16` is kept for callers that report it."""
    if err_budget is None:
        return None
    for fid in ("LoFi", "HiFi2", "HiFi3", "HiFi4"):
        if PREDICTED_ERR[src_format][fid] <= err_budget: return fid
    return None


def plan_matmul(spec: MatmulSpec, name: str, err_budget: float | None = None,
                fidelity: str | None = None) -> FpuMatmulPlan:
    src_format = src_format_of(spec)
    if fidelity is None:
        fidelity = choose_fidelity(src_format, err_budget, spec.out_bf16)
        if fidelity is None:
            if err_budget is None:
                raise UnsupportedOp(f"{name}: matmul within the default (fp32-faithful) budget: the FPU multiplies "
                                    f"{src_format} and aligns products in groups of 8 (error up to "
                                    f"{PREDICTED_ERR[src_format]['HiFi4']:g} of sum|ab|); set an error budget >= that "
                                    "(TT_ERR_BUDGET) to run it on the FPU")
            raise UnsupportedOp(f"{name}: no FPU fidelity meets the error budget {err_budget:g} for a {src_format} matmul "
                                f"(best: HiFi4 ~{PREDICTED_ERR[src_format]['HiFi4']:g})")
    if fidelity not in FIDELITY_PHASES:
        raise UnsupportedOp(f"{name}: unknown fidelity {fidelity!r} (one of {', '.join(FIDELITY_PHASES)})")
    plan = FpuMatmulPlan(name, spec.ranges, *matmul_io(spec, name), spec, fidelity, src_format,
                         PREDICTED_ERR[src_format][fidelity], ops=[f"MATMUL[{src_format},{fidelity}]"])
    allocate_matmul_l1(plan)
    plan.placement = FpuMatmulReport(plan)
    return plan


def allocate_matmul_l1(plan: FpuMatmulPlan) -> FpuMatmulPlan:
    s = plan.spec
    mt, nt, kt = plan.tiles
    tb = 2 * 1024 if plan.src_format == "bf16" else 4 * 1024
    esz_in = max(DTYPE_SIZE[s.a.dtype], DTYPE_SIZE[s.b.dtype])
    esz_out = DTYPE_SIZE[s.out.dtype]
    sizes = {
        "cb_b": kt * nt * tb,                                    # all of B (one batch), depth 1
        "cb_a": 2 * kt * tb,                                     # A panels, depth 2
        "cb_out": 2 * 4096,                                      # fp32 C tiles, depth 2
        "stage_in": line_bytes(max(s.K, s.N, TILE) + TILE, esz_in),
        "stage_out": TILE * out_pitch(s.N, esz_out),
    }
    l1 = place(sizes)
    if l1 is None:
        raise UnsupportedOp(f"{plan.name}: matmul {s.M}x{s.K} @ {s.K}x{s.N} needs {l1_bytes(sizes)} bytes of L1 "
                            f"(B resident: {sizes['cb_b']}), more than the {CAPACITY} available")
    plan.l1 = l1
    return plan


def args_header_mm(plan: FpuMatmulPlan) -> str:
    tb = 2048 if plan.src_format == "bf16" else 4096
    return matmul_args_header(plan, GENERATOR, [
        f"#define MM_KT {plan.tiles[2]}u", f"#define MM_TILE_BYTES {tb}u  /* {plan.src_format} tile in L1 */"],
        plan.spec.N)


def render_matmul(plan: FpuMatmulPlan) -> dict[str, str]:
    s = plan.spec
    w = matmul_words(plan.phases)
    unp = dict(UNPACK_CFG_MM[plan.src_format]) | UNPACK_CFG_MM_COMMON
    ctx = {
        "name": plan.name, "spec": s, "fidelity": plan.fidelity, "phases": plan.phases, "src_format": plan.src_format,
        "a": operand_ctx(s.a), "b": operand_ctx(s.b), "out": operand_ctx(s.out),
        "in_bf16": plan.src_format == "bf16", "out_bf16": s.out.dtype == "bfloat16",
        "w": w, "unp": {i: hex_u32(v) for i, v in unp.items()}, "alu_format": hex_u32(ALU_FORMAT_MM[plan.src_format]),
        "pck": {i: hex_u32(v) for i, v in PACK_CFG["fp32"].items()},
    }
    return kernel_sources(ctx, "matmul_reader.c.j2", "matmul_writer.c.j2", "matmul_compute.c.j2",
                          args_header_mm(plan))


def match(kernel: Kernel) -> MatmulSpec | None:
    return kernel.shared(kernel_matmul)


def candidates(kernel: Kernel, spec: MatmulSpec) -> list[Candidate]:
    """One per fidelity (cheapest first): acceptable when its predicted error is within the budget, never without
    one (not float32-faithful). Built only if chosen; the build fails when all of B does not fit L1."""
    fmt, budget = src_format_of(spec), kernel.budget

    def option(fid: str) -> Candidate:
        err = PREDICTED_ERR[fmt][fid]
        return Candidate(NAME, f"FPU {fid}", mvmul_count(spec, FIDELITY_PHASES[fid]), err,
                         budget is not None and err <= budget,
                         lambda: plan_matmul(spec, kernel.name, err_budget=budget, fidelity=fid))
    return [option(fid) for fid in PREDICTED_ERR[fmt]]


FAMILY = Family(NAME, match, candidates)
