"""Matmul on the FPU: recognise tinygrad's matmul AST, plan it, render its five C99 sources.

tinygrad writes `C[b, m, n] = sum_k A[b, m, k] * B[b, k, n]` as `STORE(INDEX(out, io), [CAST] REDUCE(ADD,
[CAST] MUL(INDEX(a, ia), INDEX(b, ib)), k))` with affine index expressions; transposes and batches are only different
coefficients. `match_matmul` turns that into a `MatmulSpec` (sizes and per-operand strides), `plan_matmul` into a
`MatmulPlan` (fidelity, source format, L1 allocation) and `render_matmul` into the reader / compute / writer sources.

Data flow (one Tensix core, fpu-path.md sections 5-9):
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
its largest (fpu-path.md 10.3), and fp32 inputs go through tf32: neither is fp32-faithful, so the FPU runs a matmul
only when the caller passes an error budget that allows it; otherwise lower_matmul plans the fp32 SFPU matmul
(lowering/sfpu_matmul.py) and plan_matmul raises UnsupportedOp.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from tt_backend.lowering.plan import DTYPE_SIZE, Buffer, SfpuProgram, Stream
from tt_backend.chip import isa, layout
from tt_backend.chip.errors import UnsupportedOp
from tt_backend.chip.numerics.fpu_math import FIDELITY_PHASES

# Predicted worst-case error of one output, normalised by sum_k |a_mk b_kn|, per source format and fidelity
# (fpu-path.md 10.5, MVMUL max err/sum|ab| with some headroom; fp32 inputs add the unpacker's tf32 truncation).
PREDICTED_ERR = {
    "bf16": {"LoFi": 6e-2, "HiFi2": 1e-2, "HiFi3": 1.5e-3, "HiFi4": 1.5e-3},
    "tf32": {"LoFi": 8e-2, "HiFi2": 2e-2, "HiFi3": 4e-3, "HiFi4": 3e-3},
}
TILE = 32


# ------------------------------------------------------------------------------------------------------- the spec

@dataclass(frozen=True)
class Operand:
    slot: int                  # tinygrad parameter slot
    dtype: str                 # "float32" | "bfloat16" (in DRAM)
    offset: int                # element offset (the index expression's constant)
    rs: int                    # element stride along rows (A: m, B: k, out: m)
    cs: int                    # element stride along columns (A: k, B: n, out: n)
    bs: tuple[int, ...]        # element stride per batch range (outermost first)
    nbytes: int
    tile: str = ""             # tile format the FPU sees: "bf16" | "fp32" (fp32 DRAM + "bf16": rounded by the reader)

    @property
    def transposed(self) -> bool:
        return self.cs != 1 and self.rs == 1


@dataclass(frozen=True)
class MatmulSpec:
    M: int
    N: int
    K: int
    batch: tuple[int, ...]     # sizes of the batch ranges, outermost first (empty: no batch)
    a: Operand                 # M x K (in0, unpacked to SrcB)
    b: Operand                 # K x N (in1, unpacked to SrcA)
    out: Operand               # M x N
    round_bf16: bool = False   # fp32 output of a bf16-rounded result (a cast chain through bf16)

    @property
    def out_bf16(self) -> bool:   # the result is rounded to bf16 (the output's precision hides the FPU's error)
        return self.out.dtype == "bfloat16" or self.round_bf16

    @property
    def n_batch(self) -> int:
        return math.prod(self.batch) if self.batch else 1


def _strip(u, *ops):
    while u.op in ops: u = u.src[0]
    return u


def match_matmul(sink) -> MatmulSpec | None:
    """The spec of a plain (batched, transposed) matmul kernel, or None when the AST is not one."""
    from tinygrad.dtype import dtypes
    from tinygrad.uop.ops import AxisType, Ops

    from tt_backend.lowering.frontend import DTYPE_NAME, affine, strip_invalid

    if sink.op is not Ops.SINK: return None
    topo = sink.toposort()
    stores = [u for u in topo if u.op is Ops.STORE]
    reduces = [u for u in topo if u.op is Ops.REDUCE]
    if len(stores) != 1 or len(reduces) != 1: return None
    store, red = stores[0], reduces[0]
    if red.arg[0] is not Ops.ADD or len(store.src) != 2: return None
    if _strip(store.src[1], Ops.CAST) is not red: return None
    chain, u = [], store.src[1]
    while u.op is Ops.CAST: chain.append(u.dtype); u = u.src[0]
    if any(dt not in (dtypes.float32, dtypes.bfloat16) for dt in chain): return None
    round_bf16 = dtypes.bfloat16 in chain          # e.g. (a @ b).float() with bf16 a, b: C is rounded to bf16 first
    rk = red.src[1:]
    if len(rk) != 1 or rk[0].op is not Ops.RANGE: return None
    rk = rk[0]
    mul = _strip(red.src[0], Ops.CAST)
    if mul.op is not Ops.MUL: return None
    loads, tiles = [], []
    for x in mul.src:
        casts = []
        while x.op is Ops.CAST: casts.append(x.dtype); x = x.src[0]
        x = _strip(x, Ops.LOAD)
        if x.op is not Ops.INDEX: return None
        if any(dt not in (dtypes.float32, dtypes.bfloat16) for dt in casts): return None
        # the operand's precision: bf16 if it was loaded as bf16 or went through a cast to bf16 (x.cast(bf16) @ ..:
        # the reader rounds fp32 to bf16, nearest even, as tinygrad does; the unpacker would truncate)
        loads.append(x)
        tiles.append("bf16" if x.dtype == dtypes.bfloat16 or dtypes.bfloat16 in casts else "fp32")
    if tiles[0] != tiles[1]: return None          # bf16 x fp32: not one Src format
    out_idx = _strip(store.src[0], Ops.CAST)
    if out_idx.op is not Ops.INDEX: return None

    def access(idx):
        buf = idx.src[0]
        while buf.op is not Ops.PARAM:
            if not buf.src: return None
            buf = buf.src[0]
        conds, plain = strip_invalid(idx.src[1])
        if conds or len(idx.src) > 2: return None          # pads: not a plain matmul
        co = affine(plain)
        if co is None: return None
        dt = buf.dtype.base if hasattr(buf.dtype, "base") else buf.dtype
        if dt not in (dtypes.float32, dtypes.bfloat16): return None
        return buf, co, DTYPE_NAME[dt]

    acc = [access(x) for x in loads]
    oacc = access(out_idx)
    if None in acc or oacc is None: return None
    rngs = {u for u in topo if u.op is Ops.RANGE}
    if any(r.src[0].op is not Ops.CONST for r in rngs): return None
    if rk.arg[-1] not in (AxisType.REDUCE, AxisType.GROUP_REDUCE): return None
    r0 = {r for r in acc[0][1] if r is not None and acc[0][1][r] != 0}
    r1 = {r for r in acc[1][1] if r is not None and acc[1][1][r] != 0}
    ro = {r for r in oacc[1] if r is not None and oacc[1][r] != 0}
    if rk not in r0 or rk not in r1 or rk in ro: return None
    if any(r.arg[-1] in (AxisType.REDUCE, AxisType.GROUP_REDUCE) for r in rngs - {rk}): return None
    only0, only1, both = (r0 - r1) - {rk}, (r1 - r0) - {rk}, (r0 & r1) - {rk}
    size = {r: int(r.src[0].arg) for r in rngs}
    if not (only0 | only1 | both) <= ro: return None                # an operand range missing from the output
    # m (n) is the operand's exclusive range that is innermost in the output; its other exclusive ranges, the shared
    # ones and output-only ones are batch ranges (a batched operand times a broadcast one: B's batch stride is 0)
    def inner(rs): return min(rs, key=lambda r: abs(oacc[1][r])) if rs else None
    rm0, rn1 = inner(only0), inner(only1)
    if rm0 is None and rn1 is None: return None                    # (batched) dot products: a plain reduction
    batch = sorted(ro - {rm0, rn1}, key=lambda r: -abs(oacc[1].get(r, 0)))
    # the side whose exclusive range is contiguous in the output is B (n): C rows come out of the writer as lines
    if rm0 is not None and oacc[1].get(rm0) == 1 and (rn1 is None or oacc[1].get(rn1) != 1):
        acc, (rm0, rn1) = acc[::-1], (rn1, rm0)
        tiles = tiles[::-1]
    (abuf, aco, adt), (bbuf, bco, bdt), (obuf, oco, odt) = acc[0], acc[1], oacc

    def g(co, r): return co.get(r, 0) if r is not None else 0

    def operand(buf, co, dt, rr, rc, tile):
        return Operand(buf.arg.slot, dt, co.get(None, 0), g(co, rr), g(co, rc), tuple(g(co, r) for r in batch),
                       int(buf.src[0].arg) * DTYPE_SIZE[dt], tile)
    return MatmulSpec(M=size[rm0] if rm0 is not None else 1, N=size[rn1] if rn1 is not None else 1, K=size[rk],
                      batch=tuple(size[r] for r in batch), round_bf16=round_bf16 and odt == "float32",
                      a=operand(abuf, aco, adt, rm0, rk, tiles[0]), b=operand(bbuf, bco, bdt, rk, rn1, tiles[1]),
                      out=operand(obuf, oco, odt, rm0, rn1, "fp32"))


# -------------------------------------------------------------------------------------------------------- the plan

class MatmulShape:
    """The iteration space and argument block both matmul kernel families (MatmulPlan, sfpu_matmul.SfpuMatmulPlan)
    launch with; the plan provides `name`, `spec` and `buffers`."""
    @property
    def ranges(self) -> tuple[int, ...]: return (*self.spec.batch, self.spec.M, self.spec.N)

    @property
    def n_elements(self) -> int: return self.spec.n_batch * self.spec.M * self.spec.N * self.spec.K

    @property
    def tiles(self) -> tuple[int, int, int]:
        s = self.spec
        return -(-s.M // TILE), -(-s.N // TILE), -(-s.K // TILE)

    @property
    def n_tiles(self) -> int:
        mt, nt, _ = self.tiles
        return self.spec.n_batch * mt * nt

    def arg_words(self, dram_addrs: list[int]) -> list[int]:
        if len(dram_addrs) != len(self.buffers):
            raise ValueError(f"{self.name}: {len(self.buffers)} buffers, got {len(dram_addrs)} addresses")
        return [self.n_tiles, self.n_elements, *dram_addrs]


@dataclass
class MatmulPlan(MatmulShape):
    """Same interface as KernelPlan for ops_tt (name, buffers, inputs, output, arg_words, ops, l1, n_elements)."""
    name: str
    spec: MatmulSpec
    fidelity: str              # LoFi | HiFi2 | HiFi3 | HiFi4
    src_format: str            # bf16 | tf32 (what the multiplier sees)
    buffers: list[Buffer]
    inputs: list[Stream]
    output: Stream
    predicted_err: float
    l1: dict[str, int] = field(default_factory=dict)
    kind: str = "matmul"
    # no SFPU program (KernelPlan consumers such as lowering.plan.for_target and tt_backend.dump look at it)
    sfpu: SfpuProgram = field(default_factory=lambda: SfpuProgram([], [], 0, 0))

    @property
    def phases(self) -> int: return FIDELITY_PHASES[self.fidelity]

    @property
    def ops(self) -> list[str]: return [f"MATMUL[{self.src_format},{self.fidelity}]"]


    @property
    def placement(self) -> MatmulPlacement:   # what tt_backend.dump reports (duck-types lowering.placement.Placement)
        return MatmulPlacement(self)

    def render(self) -> dict[str, str]:
        return render_matmul(self)


class MatmulPlacement:
    """The matmul's placement for reports: one FPU node, its fidelity, formats and predicted error."""

    def __init__(self, plan: MatmulPlan):
        s = plan.spec
        mt, nt, kt = plan.tiles
        mvmuls = s.n_batch * mt * nt * kt * 16 * plan.phases
        self.budget, self.predicted_error = None, plan.predicted_err
        self.nodes = [{"id": 0, "op": "MATMUL", "engine": "FPU", "fidelity": plan.fidelity, "pinned": False,
                       "formats": {"srca": plan.src_format, "srcb": plan.src_format},
                       "predicted_error": plan.predicted_err, "bound": plan.predicted_err, "cycles": mvmuls}]
        self.kernel = plan.name

    def report(self) -> dict:
        return {"kernel": self.kernel, "budget": self.budget, "predicted_error": self.predicted_error,
                "predicted_max_rel": None, "predicted_cycles": self.nodes[0]["cycles"], "predicted_cycles_per_tile": {},
                "all_sfpu_cycles": None, "reassociated": False, "evaluator_error": "error model: fpu-path.md 10.5 "
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


def plan_matmul(spec: MatmulSpec, name: str, err_budget: float | None = None, fidelity: str | None = None) -> MatmulPlan:
    src_format = "bf16" if spec.a.tile == "bf16" else "tf32"
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
    plan = MatmulPlan(name, spec, fidelity, src_format, *matmul_io(spec, name), PREDICTED_ERR[src_format][fidelity])
    return allocate_matmul_l1(plan)


def matmul_io(spec: MatmulSpec, name: str) -> tuple[list[Buffer], list[Stream], Stream]:
    """(buffers, [in0 = A, in1 = B], out) of a matmul kernel, either family; both writers want output rows
    contiguous."""
    if spec.out.cs != 1 and spec.N > 1:
        raise UnsupportedOp(f"{name}: matmul output with column stride {spec.out.cs} (the writer wants rows contiguous)")
    slots = sorted({spec.a.slot, spec.b.slot, spec.out.slot})
    nbytes = {o.slot: (o.dtype, o.nbytes) for o in (spec.a, spec.b, spec.out)}
    buffers = [Buffer(s, *nbytes[s]) for s in slots]
    idx = {s: i for i, s in enumerate(slots)}
    inputs = [Stream(idx[spec.a.slot], spec.a.dtype, None), Stream(idx[spec.b.slot], spec.b.dtype, None)]
    return buffers, inputs, Stream(idx[spec.out.slot], spec.out.dtype, None)   # the matmul reader/writer address them


def _line_bytes(n: int, esz: int) -> int:
    return (n * esz + 64 + 63) & ~63


def allocate_matmul_l1(plan: MatmulPlan) -> MatmulPlan:
    s = plan.spec
    mt, nt, kt = plan.tiles
    tb = 2 * 1024 if plan.src_format == "bf16" else 4 * 1024
    esz_in = max(DTYPE_SIZE[s.a.dtype], DTYPE_SIZE[s.b.dtype])
    esz_out = DTYPE_SIZE[s.out.dtype]
    sizes = {
        "cb_b": kt * nt * tb,                                    # all of B (one batch), depth 1
        "cb_a": 2 * kt * tb,                                     # A panels, depth 2
        "cb_out": 2 * 4096,                                      # fp32 C tiles, depth 2
        "stage_in": _line_bytes(max(s.K, s.N, TILE) + TILE, esz_in),
        "stage_out": TILE * _out_pitch(s.N, esz_out),
    }
    addr, l1 = layout.DATA_BASE, {}
    for k, n in sizes.items():
        l1[k] = addr
        addr += (n + 63) & ~63
    if addr > layout.DATA_END:
        raise UnsupportedOp(f"{plan.name}: matmul {s.M}x{s.K} @ {s.K}x{s.N} needs {addr - layout.DATA_BASE} bytes of L1 "
                            f"(B resident: {sizes['cb_b']}), more than the {layout.DATA_END - layout.DATA_BASE} available")
    plan.l1 = l1
    return plan


def _out_pitch(n: int, esz: int) -> int:
    return ((n * esz + 15) & ~15) + 16


# ------------------------------------------------------------------------------------------------------- rendering

def _hex(v: int) -> str: return f"0x{v:08X}u"


def _w(name: str, **f) -> str: return _hex(isa.encode(name, **f))


UNPACK_CFG_MM = {   # fpu-path.md section 3 (whole-tile unpacks, both unpackers)
    "bf16": {64: 0x04000015, 72: 5, 112: 0x04000015, 120: 5},
    "tf32": {64: 0x04000010, 72: 4, 112: 0x04000010, 120: 4},
}
UNPACK_CFG_MM_COMMON = {65: 0x00010001, 73: 0xF, 84: 0x00400040, 86: 0x04000400, 92: 0, 50: 0,
                        113: 0x00010001, 121: 0xF, 59: 0}
ALU_FORMAT_MM = {"bf16": 0x20AA0000, "tf32": 0x20880000}   # SrcA/SrcB format, Dstacc fp32, Fp32_enabled
# MVMUL address-modifier slots (fpu-path.md section 7): (AB value, DST value)
MVMUL_SLOTS = {0: (0x0800, 0), 1: (0x1800, 0), 2: (0x1810, 0), 3: (0x2810, 0), 4: (0x8080, 0x2000),
               5: (0x8080, 0x8000), 7: (0, 0)}
# one phase of a 32x32x32 MVMUL (section 8.5): (slot, dst row)
MVMUL_PHASE = [(0, 0), (1, 8), (0, 32), (2, 40), (0, 16), (1, 24), (0, 48), (3, 56),
               (0, 0), (1, 8), (0, 32), (2, 40), (0, 16), (1, 24), (0, 48), (4, 56)]


def mvmul_words(phases: int) -> list[str]:
    """All MVMULs of one K block: `phases` x 16; the very last uses slot 5 (Src RWCs and the phase to 0) and
    releases both Src banks."""
    words = []
    for p in range(phases):
        for i, (slot, dst) in enumerate(MVMUL_PHASE):
            last = p == phases - 1 and i == 15
            words.append(_w("MVMUL", addr_mode=5 if last else slot, dst=dst, clear_dvalid=3 if last else 0))
    return words


def matmul_words(plan: MatmulPlan) -> dict:
    from tt_backend.lowering.render import SEM_FREE, SEM_MATHDONE, tensix_words
    w = tensix_words()   # the packer words are the elementwise kernels' (fp32 Dst tile at row 0)
    w.update({
        "seminit_mathdone": _w("SEMINIT", max_value=1, init_value=0, sem_sel=1 << SEM_MATHDONE),
        "seminit_free": _w("SEMINIT", max_value=1, init_value=1, sem_sel=1 << SEM_FREE),
        "srca_ovrd_on": _w("SETC16", setc16_reg=5, setc16_value=4),
        "unpack_misc": _w("SETC16", setc16_reg=41, setc16_value=0),
        "unp_adcxy_reset": _w("SETADCXY", cnt_set_mask=3, bit_mask=0xA),
        "unp_adczw_reset": _w("SETADCZW", cnt_set_mask=3, bit_mask=0xF),
        "unp_adcxx_tile": _w("SETADCXX", cnt_set_mask=3, x_end2=1023, x_start=0),
        "stall_cfg_unpack": _w("STALLWAIT", stall_res=0x80, wait_res=0x7),    # B7 config; C0 ThCon | C1/C2 unpackers
        "wrcfg_unp0_base": _w("WRCFG", gpr_address=4, cfg_reg=76),
        "wrcfg_unp1_base": _w("WRCFG", gpr_address=5, cfg_reg=124),
        "unpacr_srca": _w("UNPACR", unpack_block_selection=0, addr_mode=1, ovrd_thread_id=1, set_dat_valid=1, last=1),
        "unpacr_srcb": _w("UNPACR", unpack_block_selection=1, addr_mode=1, ovrd_thread_id=1, set_dat_valid=1, last=1),
        "clr_dvalid_enable": _w("SETC16", setc16_reg=7, setc16_value=0),
        "math_offset0": _w("SETC16", setc16_reg=1, setc16_value=0),
        "setrwc_all": _w("SETRWC", bit_mask=0xF),
        "zeroacc": [_w("ZEROACC", clear_mode=1, use_32_bit_mode=1, addr_mode=7, where=f) for f in range(4)],
        "stall_sync_math_fpu": _w("STALLWAIT", stall_res=0x2, wait_res=0x10),   # B1 sync; C4 FPU
        "sempost_mathdone": _w("SEMPOST", sem_sel=1 << SEM_MATHDONE),
        "slots": [(_w("SETC16", setc16_reg=12 + k, setc16_value=ab), _w("SETC16", setc16_reg=28 + k, setc16_value=d))
                  for k, (ab, d) in MVMUL_SLOTS.items()],
        "mvmul": mvmul_words(plan.phases),
    })
    return w


def _batch_c(spec: MatmulSpec) -> str:
    """C: element offsets of A, B, C for flat batch index b (decomposed over the batch ranges, innermost last)."""
    lines = ["static inline void batch_offsets(uint32_t b, int32_t *oa, int32_t *ob, int32_t *oo)", "{",
             f"    int32_t a = {spec.a.offset}, bb = {spec.b.offset}, o = {spec.out.offset};"]
    for k in reversed(range(len(spec.batch))):
        lines += ["    {", f"        int32_t i = (int32_t)(b % {spec.batch[k]}u); b /= {spec.batch[k]}u;",
                  f"        a += {spec.a.bs[k]} * i; bb += {spec.b.bs[k]} * i; o += {spec.out.bs[k]} * i;", "    }"]
    lines += ["    (void)b;", "    *oa = a; *ob = bb; *oo = o;", "}"]
    return "\n".join(lines)


def _operand_ctx(o: Operand) -> dict:
    mode = "rows" if o.cs == 1 else "cols" if o.rs == 1 else "gather"
    return {"rs": o.rs, "cs": o.cs, "esz": DTYPE_SIZE[o.dtype], "mode": mode, "dtype": o.dtype,
            "round": o.dtype == "float32" and o.tile == "bf16"}


def matmul_args_header(plan, generator: str, family: list[str], out_cols: int, out_note: str = "") -> str:
    """args.h of both matmul families: the shared launch/shape/buffer/L1 defines around the family's own `family`
    lines; OUT_PITCH for `out_cols` output columns (the writer's staging row)."""
    from tt_backend.lowering.render import SYNC_BASE, SYNC_CB_OFFSET, SYNC_CB_STRIDE
    s = plan.spec
    mt, nt, _ = plan.tiles
    lines = [f"/* Generated by {generator} for kernel {plan.name}: do not edit. */",
             "#ifndef TT_ARGS_H", "#define TT_ARGS_H", "#include <stdint.h>", "",
             "#define ARG_N_TILES 0", "#define ARG_N_ELEMENTS 1", "#define ARG_BUF(k) (2 + (k))",
             f"#define TT_SYNC_BASE 0x{SYNC_BASE:X}u",
             f"#define TT_CB_CTRL(k) (TT_SYNC_BASE + 0x{SYNC_CB_OFFSET:X}u + {SYNC_CB_STRIDE}u * (k))",
             "#define CB_A 0u", "#define CB_B 1u", "#define CB_OUT 2u",
             f"#define MM_M {s.M}u", f"#define MM_N {s.N}u", f"#define MM_K {s.K}u", f"#define MM_BATCH {s.n_batch}u",
             f"#define MM_MT {mt}u", f"#define MM_NT {nt}u", *family,
             f"#define MM_A_BUF {plan.inputs[0].buf}u", f"#define MM_B_BUF {plan.inputs[1].buf}u",
             f"#define MM_OUT_BUF {plan.output.buf}u",
             f"#define MM_A_NBYTES {s.a.nbytes}u", f"#define MM_B_NBYTES {s.b.nbytes}u",
             f"#define MM_OUT_NBYTES {s.out.nbytes}u"]
    for k, b in enumerate(plan.buffers):
        lines.append(f"#define BUF{k}_NBYTES {b.nbytes}u  /* {b.dtype}, tinygrad slot {b.slot} */")
    for k, v in plan.l1.items():
        lines.append(f"#define L1_{k.upper()} 0x{v:X}u")
    esz_in = max(DTYPE_SIZE[s.a.dtype], DTYPE_SIZE[s.b.dtype])
    lines += [f"#define STAGE_IN_BYTES {_line_bytes(max(s.K, s.N, TILE) + TILE, esz_in)}u",
              f"#define OUT_PITCH {_out_pitch(out_cols, DTYPE_SIZE[s.out.dtype])}u{out_note}",
              "", _batch_c(s), "#endif", ""]
    return "\n".join(lines)


def args_header_mm(plan: MatmulPlan) -> str:
    tb = 2048 if plan.src_format == "bf16" else 4096
    return matmul_args_header(plan, "lowering/matmul.py", [
        f"#define MM_KT {plan.tiles[2]}u", f"#define MM_TILE_BYTES {tb}u  /* {plan.src_format} tile in L1 */"],
        plan.spec.N)


def render_matmul(plan: MatmulPlan) -> dict[str, str]:
    from tt_backend.lowering.render import PACK_CFG, kernel_sources
    s = plan.spec
    w = matmul_words(plan)
    unp = dict(UNPACK_CFG_MM[plan.src_format]) | UNPACK_CFG_MM_COMMON
    ctx = {
        "name": plan.name, "spec": s, "fidelity": plan.fidelity, "phases": plan.phases, "src_format": plan.src_format,
        "a": _operand_ctx(s.a), "b": _operand_ctx(s.b), "out": _operand_ctx(s.out),
        "in_bf16": plan.src_format == "bf16", "out_bf16": s.out.dtype == "bfloat16",
        "w": w, "unp": {i: _hex(v) for i, v in unp.items()}, "alu_format": _hex(ALU_FORMAT_MM[plan.src_format]),
        "pck": {i: _hex(v) for i, v in PACK_CFG["fp32"].items()},
    }
    return kernel_sources(ctx, "matmul_reader.c.j2", "matmul_writer.c.j2", "matmul_compute.c.j2",
                          args_header_mm(plan))


def lower_matmul(sink, name: str, err_budget: float | None = None) -> MatmulPlan | None:
    """The frontend's dispatch: a MatmulPlan when `sink` is a matmul, else None (the elementwise/reduce path)."""
    try:
        spec = match_matmul(sink)
    except UnsupportedOp:      # index forms the matcher cannot read: let the generic path name the problem
        return None
    if spec is None: return None
    src_format = "bf16" if spec.a.tile == "bf16" else "tf32"
    if choose_fidelity(src_format, err_budget, spec.out_bf16) is None:
        # fp32 within an fp32-faithful budget (or one tighter than tf32 allows): not the FPU's job. fp32 operands take
        # the SFPU tile matmul (lowering/sfpu_matmul.py: fp32 SFPMADs; bf16 operands widen exactly), the most precise
        # engine there is, so no budget check. It splits K and N to fit L1 (any K); what it cannot plan (an output
        # with a column stride) goes to the generic path (an SFPU reduction).
        from tt_backend.lowering.sfpu_matmul import plan_sfpu_matmul
        try:
            return plan_sfpu_matmul(spec, name, err_budget)
        except UnsupportedOp:
            return None
    try:
        return plan_matmul(spec, name, err_budget=err_budget)
    except UnsupportedOp as fpu_error:
        # the FPU plan keeps all of B in L1: when that does not fit, the SFPU matmul (K and N split, fp32 products
        # and accumulation, so within any budget the FPU would meet) runs it rather than failing the kernel
        from tt_backend.lowering.sfpu_matmul import plan_sfpu_matmul
        try:
            return plan_sfpu_matmul(spec, name, err_budget)
        except UnsupportedOp:
            raise fpu_error from None
