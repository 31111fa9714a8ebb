"""The SFPU matmul family: fp32 matmul on the SFPU (float32-faithful), the matmul's engine when no FPU fidelity meets
the error budget or the FPU plan does not fit L1.

Why: the FPU multiplies tf32/bf16 (Src registers are 19 bits) and aligns products in groups, so an fp32 matmul within an
fp32 budget (no TT_ERR_BUDGET, or one tighter than ~3e-3 of sum|ab|) cannot use MVMUL; neither can bf16 operands with an
fp32 result under such a budget (exact products, but the group alignment loses up to ~1.5e-3). bf16 operands are
widened to fp32 by the reader (exact; an fp32 buffer cast to bf16 in the kernel is rounded to nearest even first).
Here every multiply-add is one SFPMAD in fp32 (one rounding per multiply-add, RNE; the product is kept wider than fp32
before the add), the operands reach Dst through the unpacker's fp32 -> Dst32b path (exact), and C accumulates in fp32
in Dst.

Lane layout (docs/isa.md §2/3): lane = 8*row + col; an SFPLOAD at address a reads Dst rows (a & ~3) .. +3, columns
0,2,..,14 (a bit 1 = 0) or 1,3,..,15 (bit 1 = 1). One C vector = 4 rows x 8 same-parity columns of one 16-column half h:
    lane (r, c) <-> C[4R + r][16h + 2c + p]                  (R = 0..7 row group, p = parity)
so a multiply-add needs an A vector constant along the 8 lanes of a lane row and a B vector constant along the 4 lane
rows:
* B (constant along lane rows): B rows k..k+3 sit in 4 consecutive Dst rows; SFPLOAD the same 4-row group into LReg0..3
  and SFPTRANSP: LReg q then holds B row k+q (columns 16h+2c+p) in all four lane rows. These 4 B vectors stay in
  registers while one MOP runs the body over the 8 row groups R. (SFPCONFIG would broadcast lanes 0-7 of LReg0 into
  LReg11..14 and so give 4 more B registers, but ttsim only implements SFPCONFIG when those 8 lanes are equal.)
* A (constant along the 8 lanes of a row): the reader lays A out replicated, A[i][k] in the 8 even columns and A[i][k+1]
  in the 8 odd columns of Dst row i of the chunk's pair k/2, so a plain SFPLOAD yields it (8x replication, done once per
  32-row panel of A and reused for every column tile of the group).
Body (10 words, one per 4-row group R, replayed 8 times by one MOP of REPLAYs, RWC.Dst += 4 per repetition; every
repetition reads and writes only its own rows, so the emulator runs the 8 repetitions batched):
    LOAD c;  4 x (LOAD a_q; MAD c += a_q * B_q);  STORE c
= 4 SFPMADs (128 multiply-adds) per 10 instructions; with the 5-word B setup per MOP (32 SFPMADs): 2.66 SFPU
instructions per SFPMAD. One input chunk (8 k) takes 8 passes (k half x column half x parity); TRISC1 re-records the
body in the replay buffer for each (its Dst offsets differ). Dst (32-bit rows): C tile 0..63 (row 32h + i holds
C[i][16h..16h+15]), two input buffers (A chunk of 8 k: 128 rows, B chunk of 8 k: 16 rows) at 64 and 208, so the
unpacker fills one while the SFPU works on the other.

Large K (issue #4): the replicated A panel takes 1 KiB of L1 per k, so above K ~ 1100 (less with a wide B) the whole
panel no longer fits. allocate_sfpu_matmul_l1 then splits K into blocks of kbc chunks (balanced; A blocks double-
buffered) and keeps B resident per column group (all of K, 128 bytes per k and column tile) while that leaves room for
>= 128 k of A, else streams B in the same K blocks with one column tile per group (any K). Per row tile and K block
the reader builds one replicated A block and TRISC0 unpacks it for every column tile of the group, so the C tiles of
a group are carried across K blocks as packed partials: TRISC2 packs a pass's C tile (fp32, exact) to L1_PART
(ntg x 4 KiB) unless it is the tile's last K block, and TRISC0, which then owns the FREE semaphore, unpacks it back to
Dst rows 0..63 (exact) before posting the pass's first chunk (TRISC1 zeroes C only in the first K block). Every C
tile still sees its SFPMADs in ascending k with the same operands, so the bits equal the one-block kernel's (tested).
Matrix-vector products (M = 1 after the matcher's transpose) and other M < 32: the MOP runs only the ceil(M/4) row
groups holding rows < M (1 instead of 8 for a vector), and with a single row tile the reader zeroes the rows past M
once per A slot instead of at every fill. Likewise N <= 16 (attention's scores over few keys): only the first column
half's 4 passes run (column_halves); the second half of C stays zero and the writer drops it. Batched matmuls split
their batches over cores (use_cores), each core running whole batches with the same ELFs.
Movers: the reader fetches as many of an operand's evenly spaced rows (columns) as its 16 KB staging area holds in one
NoC read (matmul_spec.stage_bytes: attention's 64 x 64 score rows of one batch are two reads instead of 64), and the
writer sends a 32-row block in one NoC write when its rows are one 16-byte-aligned run of the output (rows_joined): attention's small batches (64 x 16 scores) are a few transfers each, not one per row.

Error: each of the K steps rounds once (relative 2^-24), so |C - C_exact| <= K * 2^-24 * sum_k |a_ik b_kj| (to first
order; a sequential fp32 dot product on a CPU, fma or not, has essentially the same bound gamma_K, so the two may
differ by twice it; measured: ~3e-7 of sum|ab| at K = 512, i.e. ~5 ulp-sized units, far below the bound). Denormal inputs count as zero (SFPMAD), denormal results
flush to zero. The accumulation order is k = 0, 1, 2, ... (sequential), as in a naive CPU loop.

Candidate: one, priced in SFPU instructions, acceptable under any budget - it is the float32 reference's own
precision (the budget bounds the error against float32, and a CPU's fp32 dot product has the same bound).
"""
from __future__ import annotations

from dataclasses import dataclass

from tt_backend.lowering.codegen.l1 import place, room
from tt_backend.lowering.codegen.sources import kernel_sources
from tt_backend.lowering.codegen.tensix import (PACK_CFG, SEM_FREE, SEM_MATHDONE, SEM_UNPACKED, UNPACK_CFG,
                                                UNPACK_CFG_COMMON, alu_format_word, tensix_words)
from tt_backend.lowering.codegen.words import hex_u32, word_u32
from tt_backend.chip.grid import Grid
from tt_backend.lowering.families.family import Candidate, Family, Kernel
from tt_backend.lowering.families.matmul_match import kernel_matmul
from tt_backend.lowering.families.matmul_spec import (TILE, MatmulKernelPlan, MatmulSpec, matmul_args_header,
                                                      matmul_io, operand_ctx, out_pitch, stage_bytes)
from tt_backend.lowering.families.mover_cost import split_ranges
from tt_backend.lowering.families.sfpu_matmul_cost import sfpu_matmul_cycles
from tt_backend.lowering.plan import DTYPE_SIZE, Report
from tt_backend.chip import isa, layout
from tt_backend.chip.errors import UnsupportedOp

NAME = "sfpu_matmul"
GENERATOR = "lowering/families/sfpu_matmul.py"

KCH = 8                        # k values per unpack step (one A chunk = 8 faces, one B chunk = 1 face)
A_CHUNK_BYTES = 32 * KCH * 8 * 4   # 32 rows x 8 k x 8 copies, fp32 = 8 KiB (128 Dst rows)
B_CHUNK_BYTES = KCH * 32 * 4       # 8 k x 32 columns, fp32 = 1 KiB (16 Dst rows)
C_ROW = 0                      # Dst row of the C tile (64 rows)
C_TILE_BYTES = 32 * 32 * 4     # one packed fp32 C tile (a split-K partial in L1)
IN_ROW = (64, 208)             # Dst row of input buffer 0/1: A chunk (128 rows), then the B chunk (16 rows)
SEM_INFREE = 3                 # T1 -> T0: an input buffer may be overwritten (max 2)
PREDICTED_ERR_SFPU = 2.0 ** -24   # per unit of K, normalised by sum|ab| (see the module docstring)
# The batch split is not chosen by the launch model (sfpu_matmul_cost prices the split it is given): a core takes
# batches only while each keeps at least this many SFPU instructions (an assumption; split further, the emulator's
# host time per tile grows faster than the launch shrinks: test_ops' GQA attention took 3.4x its host time split as
# far as its batches go)
MIN_CORE_INSTRUCTIONS = 1000


def sfpu_err(K: int) -> float:
    return K * PREDICTED_ERR_SFPU


def chunks(spec: MatmulSpec) -> int:
    """Input chunks of KCH k."""
    return -(-spec.K // KCH)


def row_groups(spec: MatmulSpec) -> int:
    """4-row groups of the C tile the MOP runs: all 8, or only those holding rows < M when M < 32 (a row vector:
    1 group; the rows past M stay zero and the writer drops them)."""
    return min(8, -(-spec.M // 4))


def column_halves(spec: MatmulSpec) -> int:
    """16-column halves of the C tile the passes run: both, or only the first when N <= 16 (attention's scores over
    16 keys; the second half stays zero and the writer drops it)."""
    return 1 if spec.N <= 16 else 2


def instructions(spec: MatmulSpec) -> int:
    """SFPU instructions of the kernel: BODY_WORDS per 4 SFPMADs, plus the 5-word B setup per MOP."""
    mt, nt, _ = spec.tiles
    sfpmads = spec.n_batch * mt * nt * chunks(spec) * 4 * column_halves(spec) * row_groups(spec) * 4
    return sfpmads * BODY_WORDS // 4 + sfpmads // (4 * row_groups(spec)) * 5


@dataclass
class SfpuMatmulPlan(MatmulKernelPlan):
    predicted_err: float
    ng: int = 1                # column-tile groups (B resident per group; the A panel is rebuilt per group)
    a_depth: int = 1
    kbc: int = 0               # chunks of KCH k per K block (0: one block, all of K); see allocate_sfpu_matmul_l1
    b_stream: bool = False     # split K only: B streamed per (column tile, K block) instead of resident per group

    @property
    def kc(self) -> int: return chunks(self.spec)

    @property
    def ntg(self) -> int: return -(-self.tiles[1] // self.ng)

    @property
    def row_groups(self) -> int: return row_groups(self.spec)

    @property
    def kb_chunks(self) -> int: return self.kbc or self.kc     # chunks per (full) K block

    @property
    def nkb(self) -> int: return -(-self.kc // self.kb_chunks)   # K blocks

    @property
    def split_k(self) -> bool: return self.nkb > 1

    @property
    def rows_joined(self) -> bool:
        """Whether a row block's output rows are one run of the output buffer (rows contiguous, all N columns in one
        group) starting on 16-byte boundaries, so the writer stages them at their DRAM pitch and sends one NoC write
        (attention's 64 score rows of 16 columns: one write instead of 64)."""
        o, esz = self.spec.out, DTYPE_SIZE[self.spec.out.dtype]
        return (o.gather is None and o.cs == 1 and o.rs == self.spec.N and self.ng == 1
                and all(v * esz % 16 == 0 for v in (o.rs, o.offset, *o.bs)))

    def render(self) -> dict[str, str]:
        return render_sfpu_matmul(self)

    def launch_cycles(self, cores: int | None = None) -> dict:
        """The launch on `cores` cores (default: the plan's), each with whole batches (sfpu_matmul_cost.py)."""
        cores = self.cores if cores is None else cores
        modes = (operand_ctx(self.spec.a)["mode"], operand_ctx(self.spec.b)["mode"])
        return {**sfpu_matmul_cycles(self, modes, self.row_groups, column_halves(self.spec), cores),
                "grid": "x".join(map(str, Grid().shape(cores)))}

    def arg_words(self, dram_addrs: list[int]) -> list[int]:
        """One core's argument block: all batches (ARG_BATCH_BEGIN/END after the buffers)."""
        return [*super().arg_words(dram_addrs), 0, self.spec.n_batch]

    def core_arg_words(self, dram_addrs: list[int]) -> list[list[int]]:
        base = super().arg_words(dram_addrs)
        return [[*base, b, e] for b, e in split_ranges(self.spec.n_batch, self.cores)]

    def use_cores(self, max_cores: int) -> None:
        """Batches split over cores, each core running whole batches (no combine, no traffic between cores): as
        many cores as batches, at most `max_cores`, and only as many as keep at least MIN_CORE_INSTRUCTIONS of the
        SFPU instructions (a lower bound of the cycles) on each core."""
        worth = instructions(self.spec) // MIN_CORE_INSTRUCTIONS
        self.cores = max(1, min(max_cores, self.spec.n_batch, worth))


class SfpuMatmulReport(Report):
    """The report's view: one SFPU node (fp32 SFPMAD), its predicted error and instruction count."""

    def __init__(self, plan: SfpuMatmulPlan, budget: float | None):
        self.budget, self.predicted_error = budget, plan.predicted_err
        self.nodes = [{"id": 0, "op": "MATMUL", "engine": "SFPU", "fidelity": None, "pinned": False,
                       "formats": {"a": "fp32", "b": "fp32", "acc": "fp32"},
                       "predicted_error": plan.predicted_err, "bound": plan.predicted_err,
                       "cycles": instructions(plan.spec)}]
        self.kernel = plan.name

    def report(self) -> dict:
        return {"kernel": self.kernel, "budget": self.budget, "predicted_error": self.predicted_error,
                "predicted_max_rel": None, "predicted_cycles": self.nodes[0]["cycles"], "predicted_cycles_per_tile": {},
                "all_sfpu_cycles": self.nodes[0]["cycles"], "reassociated": False,
                "evaluator_error": "error model: K * 2^-24 of sum|ab| (one fp32 rounding per SFPMAD, sequential k)",
                "nodes": self.nodes}


def plan_sfpu_matmul(spec: MatmulSpec, name: str, err_budget: float | None = None) -> SfpuMatmulPlan:
    """The plan, L1 allocated; `err_budget` only goes into the report (the SFPU matmul is fp32-faithful)."""
    buffers, inputs, output = matmul_io(spec, name)
    if spec.a.tile != spec.b.tile:
        raise UnsupportedOp(f"{name}: operands of different precision ({spec.a.tile} x {spec.b.tile})")
    plan = SfpuMatmulPlan(name, spec.ranges, buffers, inputs, output, spec, sfpu_err(spec.K), ops=["MATMUL[fp32,SFPU]"])
    allocate_sfpu_matmul_l1(plan)
    plan.placement = SfpuMatmulReport(plan, err_budget)
    return plan


MIN_SPLIT_CHUNKS = 16          # B stays resident in a split-K plan only when the A blocks still hold >= 128 k
PREFER_SPLIT_DEPTH = 2         # with as many groups, split K rather than a single-buffered A panel (below this depth)


def allocate_sfpu_matmul_l1(plan: SfpuMatmulPlan) -> SfpuMatmulPlan:
    """L1 layout. The reader's cost is dominated by the 8x replication of A, done once per column group (ng times),
    so the fewest column groups win:
    1. one K block (the whole replicated A panel, reused for every column tile of its group), B resident per group:
       the fewest groups, preferring a double-buffered A panel;
    2. split K, B resident per group (all of K), A in double-buffered K blocks of kbc chunks, C tiles carried across
       K blocks as packed partials: the fewest groups whose A blocks hold >= MIN_SPLIT_CHUNKS chunks; taken when it
       needs fewer groups than 1, or as many and 1 only fits a single-buffered panel (or 1 does not fit);
    3. split K, B streamed in the same K blocks, one column tile per group (any K).
    Splitting K does not change the SFPMADs a C tile sees nor their order (ascending k), so the result is
    bit-identical to the one-block kernel."""
    s = plan.spec
    _, nt, _ = plan.tiles

    def one_block() -> tuple[int, int, dict] | None:
        for ng in range(1, nt + 1):
            for depth in (2, 1):
                plan.ng = ng
                l1 = place({"cb_b": plan.kc * plan.ntg * B_CHUNK_BYTES, "cb_a": depth * plan.kc * A_CHUNK_BYTES,
                           **fixed_l1(plan)})
                if l1 is not None: return ng, depth, l1
        return None

    def split_resident(min_chunks: int) -> tuple[int, int] | None:
        if plan.kc < 2: return None
        for ng in range(1, nt + 1):
            plan.ng = ng
            kbc = room({"cb_b": plan.kc * plan.ntg * B_CHUNK_BYTES, "part": plan.ntg * C_TILE_BYTES,
                        **fixed_l1(plan)}, 2) // (2 * A_CHUNK_BYTES)
            if kbc >= max(1, min(min_chunks, plan.kc - 1)): return ng, min(kbc, plan.kc - 1)
        return None

    plan.kbc, plan.b_stream = 0, False
    one, split = one_block(), split_resident(MIN_SPLIT_CHUNKS)
    if one is None and split is None: split = split_resident(1)
    if one is not None and (split is None or one[0] < split[0]
                            or (one[0] == split[0] and one[1] >= PREFER_SPLIT_DEPTH)):
        plan.ng, plan.a_depth, plan.l1 = one
        return plan
    plan.a_depth = 2
    if split is not None:
        plan.ng = split[0]
        cb_b, part = plan.kc * plan.ntg * B_CHUNK_BYTES, plan.ntg * C_TILE_BYTES
        return _split(plan, split[1], lambda kbc: {"cb_b": cb_b, "cb_a": 2 * kbc * A_CHUNK_BYTES, "part": part,
                                                   **fixed_l1(plan)})
    plan.ng, plan.b_stream = nt, True
    kbc = room({"part": C_TILE_BYTES, **fixed_l1(plan)}, 2) // (2 * (A_CHUNK_BYTES + B_CHUNK_BYTES))
    if kbc >= 1 and plan.kc >= 2:
        return _split(plan, min(kbc, plan.kc - 1), lambda kbc: {"cb_b": 2 * kbc * B_CHUNK_BYTES,
                                                                 "cb_a": 2 * kbc * A_CHUNK_BYTES,
                                                                 "part": C_TILE_BYTES, **fixed_l1(plan)})
    raise UnsupportedOp(f"{plan.name}: SFPU matmul {s.M}x{s.K} @ {s.K}x{s.N}: the staging lines and one K block of "
                        f"A and B do not fit in L1")


def fixed_l1(plan: SfpuMatmulPlan) -> dict[str, int]:
    """The L1 regions every blocking needs: the output's CB, the reader's staging area and stage_out, which holds one
    32-row panel of the column group."""
    s = plan.spec
    return {"cb_out": 2 * 4096, "stage_in": stage_bytes(s),
            "stage_out": TILE * out_pitch(min(s.N, TILE * plan.ntg), DTYPE_SIZE[s.out.dtype])}


def force_split_k(plan: SfpuMatmulPlan, kbc: int, b_stream: bool = False, ng: int | None = None) -> SfpuMatmulPlan:
    """Re-plan with K blocks of at most kbc chunks (tests: a split small enough to run fast; kbc < plan.kc)."""
    s = plan.spec
    _, nt, _ = plan.tiles
    plan.b_stream, plan.a_depth = b_stream, 2
    plan.ng = nt if b_stream else (ng or plan.ng)
    fixed = fixed_l1(plan)
    cb_b = plan.kc * plan.ntg * B_CHUNK_BYTES
    return _split(plan, kbc, lambda k: {"cb_b": cb_b if not b_stream else 2 * k * B_CHUNK_BYTES,
                                        "cb_a": 2 * k * A_CHUNK_BYTES, "part": plan.ntg * C_TILE_BYTES, **fixed})


def _split(plan: SfpuMatmulPlan, kbc: int, sizes) -> SfpuMatmulPlan:
    """K blocks of at most kbc chunks, balanced (the last is not much shorter)."""
    nkb = -(-plan.kc // kbc)
    plan.kbc = -(-plan.kc // nkb)
    l1 = place(sizes(plan.kbc))
    assert l1 is not None and plan.nkb == nkb > 1
    plan.l1 = l1
    return plan


# ------------------------------------------------------------------------------------------------------- rendering

def _sfp(name: str, **f) -> int: return isa.encode(name, **f)


FP32 = 3   # SFPLOAD/SFPSTORE instr_mod0: FP32 (bit copy)
ADDR_MOD = {0: 0, 1: 2, 2: 4}   # Dst RWC increment per SFPLOAD/SFPSTORE address-modifier slot (thread cfg 28 + slot)


def _load(vd: int, addr: int, mode: int = 0) -> int:
    return _sfp("SFPLOAD", lreg_ind=vd, instr_mod0=FP32, sfpu_addr_mode=mode, dest_reg_addr=addr)


def _store(vd: int, addr: int, mode: int = 0) -> int:
    return _sfp("SFPSTORE", lreg_ind=vd, instr_mod0=FP32, sfpu_addr_mode=mode, dest_reg_addr=addr)


def _mad(a: int, b: int, c: int, d: int) -> int:
    return _sfp("SFPMAD", lreg_src_a=a, lreg_src_b=b, lreg_src_c=c, lreg_dest=d, instr_mod1=0)


B_REGS = (0, 1, 2, 3)          # LRegs holding B rows k..k+3 (one column parity) after SFPTRANSP
BODY_WORDS = 10


def b_setup(buf: int, mh: int, h: int, p: int) -> list[int]:
    """B rows 4*mh..4*mh+3 of the chunk, column half h, parity p -> B_REGS, each constant along the lane rows."""
    g = IN_ROW[buf] + 128 + 8 * h + 4 * mh + 2 * p
    return [_load(q, g) for q in B_REGS] + [_sfp("SFPTRANSP", lreg_dest=0)]


def body(buf: int, mh: int, h: int, p: int) -> list[int]:
    """One C vector (rows 4R..4R+3, columns 16h + p + 2c) += A rows x B rows 4*mh..4*mh+3 of the chunk in buffer
    buf; the last word steps RWC.Dst to the next row group."""
    c = C_ROW + 32 * h + 2 * p
    w = [_load(4, c)]
    for q in range(4):
        kl = 4 * mh + q
        a = 5 + (q & 1)
        w += [_load(a, IN_ROW[buf] + 32 * (kl >> 1) + 2 * (kl & 1)), _mad(a, B_REGS[q], 4, 4)]
    w += [_store(4, c, mode=2)]
    assert len(w) == BODY_WORDS
    return w


def variant_words(buf: int, halves: int) -> list[dict]:
    """The (k half, column half, parity) passes over one input buffer, eight or, with one column half, four: TRISC1
    pushes the B setup, re-records the body in replay slots 0..9 and issues the MOP (8 x REPLAY, one per row
    group)."""
    out = []
    for mh in range(2):
        for h in range(halves):
            for p in range(2):
                out.append({"mh": mh, "h": h, "p": p, "bsetup": [hex_u32(x) for x in b_setup(buf, mh, h, p)],
                            "body": [hex_u32(x) for x in body(buf, mh, h, p)]})
    return out


def args_header_sfpu_mm(plan: SfpuMatmulPlan) -> str:
    return matmul_args_header(plan, GENERATOR, [
        f"#define STAGE_ROWS_BYTES {stage_bytes(plan.spec)}u  /* L1_STAGE_IN's size (fetch_lines) */",
        f"#define MM_KC {plan.kc}u  /* chunks of {KCH} k */",
        f"#define MM_NG {plan.ng}u", f"#define MM_NTG {plan.ntg}u  /* column tiles per group */",
        f"#define MM_A_DEPTH {plan.a_depth}u",
        f"#define MM_ROWS_RUN {4 * plan.row_groups}u  /* rows of a C tile the MOP computes */",
        f"#define MM_NKB {plan.nkb}u  /* K blocks */",
        f"#define MM_KBC {plan.kb_chunks}u  /* chunks per K block */",
        f"#define MM_B_STREAM {int(plan.b_stream)}u  /* B per (column tile, K block), else resident per group */",
        f"#define MM_A_SLOT {plan.kb_chunks * A_CHUNK_BYTES}u",
        f"#define MM_B_SLOT {(plan.kb_chunks if plan.b_stream else plan.kc * plan.ntg) * B_CHUNK_BYTES}u",
        f"#define MM_B_DEPTH {2 if plan.b_stream else 1}u",
        f"#define A_CHUNK_BYTES {A_CHUNK_BYTES}u", f"#define B_CHUNK_BYTES {B_CHUNK_BYTES}u",
        f"#define SEM_INFREE {SEM_INFREE}u",
        f"#define ARG_BATCH_BEGIN ARG_BUF({len(plan.buffers)})",
        f"#define ARG_BATCH_END ARG_BUF({len(plan.buffers) + 1})"],
        min(plan.spec.N, TILE * plan.ntg), "  /* one group */")


def render_sfpu_matmul(plan: SfpuMatmulPlan) -> dict[str, str]:
    s = plan.spec
    w = tensix_words()
    nop = isa.encode("NOP")
    replay = isa.encode("REPLAY", load_mode=0, execute_while_loading=0, len=BODY_WORDS, start_idx=0)
    w.update({
        "seminit_unpacked2": word_u32("SEMINIT", max_value=2, init_value=0, sem_sel=1 << SEM_UNPACKED),
        "seminit_infree": word_u32("SEMINIT", max_value=2, init_value=2, sem_sel=1 << SEM_INFREE),
        "seminit_mathdone": word_u32("SEMINIT", max_value=1, init_value=0, sem_sel=1 << SEM_MATHDONE),
        "seminit_free": word_u32("SEMINIT", max_value=1, init_value=1, sem_sel=1 << SEM_FREE),
        "sempost_infree": word_u32("SEMPOST", sem_sel=1 << SEM_INFREE),
        "stall_sync_sfpu": word_u32("STALLWAIT", stall_res=0x2, wait_res=0x810),      # B1 sync; C4 FPU | C11 SFPU
        "addr_mods": [(word_u32("SETC16", setc16_reg=12 + k, setc16_value=0),
                       word_u32("SETC16", setc16_reg=28 + k, setc16_value=v))
                      for k, v in ADDR_MOD.items()],
        "zero_c": hex_u32(_store(9, C_ROW, mode=1)),
        "replay_record": word_u32("REPLAY", load_mode=1, execute_while_loading=0, len=BODY_WORDS, start_idx=0),
        "mop": word_u32("MOP", mop_type=1, loop_count=0, zmask_lo16_or_loop_count=0),
    })
    unp = dict(UNPACK_CFG["fp32"]) | UNPACK_CFG_COMMON
    ctx = {
        "name": plan.name, "spec": s, "a": operand_ctx(s.a, "a"), "b": operand_ctx(s.b, "b"), "out": operand_ctx(s.out),
        "out_bf16": s.out.dtype == "bfloat16", "rows_joined": plan.rows_joined, "w": w,
        "unp": {i: hex_u32(v) for i, v in unp.items()},
        "alu_format": hex_u32(alu_format_word(["fp32"], "fp32")),
        "pck": {i: hex_u32(v) for i, v in PACK_CFG["fp32"].items()},
        "variants": [variant_words(0, column_halves(s)), variant_words(1, column_halves(s))],
        "mop_cfg_base": hex_u32(layout.MOP_CFG_BASE),
        "mop_cfg": [hex_u32(v) for v in (1, plan.row_groups, nop, nop, nop, replay, nop, replay, replay)],
        "a_dst": [hex_u32(64 + 16 * IN_ROW[b]) for b in range(2)],            # unpacker Dst address (+ the 4-row bias)
        "b_dst": [hex_u32(64 + 16 * (IN_ROW[b] + 128)) for b in range(2)],
        "c_dst": hex_u32(64 + 16 * C_ROW), "split": plan.split_k,
    }
    return kernel_sources(ctx, "sfpu_matmul_reader.c.j2", "sfpu_matmul_writer.c.j2", "sfpu_matmul_compute.c.j2",
                          args_header_sfpu_mm(plan))


def match(kernel: Kernel) -> MatmulSpec | None:
    return kernel.shared(kernel_matmul)


def candidates(kernel: Kernel, spec: MatmulSpec) -> list[Candidate]:
    """The one SFPU matmul: acceptable under any budget (fp32-faithful); the build fails for operands of different
    precision, an output with a column stride, or when not even one K block fits L1."""
    return [Candidate(NAME, "SFPU fp32", instructions(spec), sfpu_err(spec.K), True,
                      lambda: plan_sfpu_matmul(spec, kernel.name, kernel.budget))]


FAMILY = Family(NAME, match, candidates)
