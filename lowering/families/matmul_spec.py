"""What both matmul families share: recognising tinygrad's matmul AST (`match_matmul` -> `MatmulSpec`: sizes and
per-operand strides), the plan base (`MatmulKernelPlan`), the buffers and streams (`matmul_io`), the reader/writer's
operand and line geometry, and args.h.

tinygrad writes `C[b, m, n] = sum_k A[b, m, k] * B[b, k, n]` as `STORE(INDEX(out, io), [CAST] REDUCE(ADD,
[CAST] MUL(INDEX(a, ia), INDEX(b, ib)), k))` with affine index expressions; transposes and batches are only different
coefficients. The FPU runs it with MVMUL when the error budget allows (fpu_matmul), the SFPU in fp32 otherwise
(sfpu_matmul).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from tinygrad.dtype import dtypes
from tinygrad.uop.ops import AxisType, Ops, UOp

from tt_backend.lowering.codegen.args_header import ArgsHeader
from tt_backend.lowering.families.gathered_operand import Gather
from tt_backend.lowering.families.mover_cost import MM_STAGE_ROWS_BYTES
from tt_backend.lowering.frontend import DTYPE_NAME, affine, strip_invalid, strip_ops
from tt_backend.lowering.plan import DTYPE_SIZE, Buffer, Plan, Stream
from tt_backend.chip.errors import UnsupportedOp

TILE = 32


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
    gather: Gather | None = None   # gathered element by element (gathered_operand; offset and strides then unused)

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
    def gathered(self) -> bool:   # an operand the reader gathers by its index expression (gathered_matmul)
        return self.a.gather is not None or self.b.gather is not None

    @property
    def out_bf16(self) -> bool:   # the result is rounded to bf16 (the output's precision hides the FPU's error)
        return self.out.dtype == "bfloat16" or self.round_bf16

    @property
    def n_batch(self) -> int:
        return math.prod(self.batch) if self.batch else 1

    @property
    def ranges(self) -> tuple[int, ...]:      # the kernel's iteration space: one point per output element
        return (*self.batch, self.M, self.N)

    @property
    def tiles(self) -> tuple[int, int, int]:  # 32 x 32 tiles along M, N, K
        return -(-self.M // TILE), -(-self.N // TILE), -(-self.K // TILE)



def k_order(rks, co: dict) -> list[UOp]:
    """The reduce ranges `rks` outermost first as an operand (affine index coefficients `co`) walks them: by falling
    stride, then by range number (GQA's key gradient sums over the query (r4, stride 64) inside the head group (r5,
    stride 1024): one K of 64 x 4 with r5 outermost, though r5 is the later range)."""
    return sorted(rks, key=lambda r: (-abs(co.get(r, 0)), r.arg[0]))


def k_chained(co: dict, rks: list[UOp]) -> bool:
    """Whether an operand (affine index coefficients `co`) walks the reduce ranges `rks` (outermost first) as one
    range of their product: each one's stride is the next one's times its size (einsum's 'pqrs,tuqvr->pstuv' sums
    over q and r; a single range always is)."""
    return all(co.get(a, 0) == co.get(b, 0) * int(b.src[0].arg) for a, b in zip(rks, rks[1:]))


def chained_run(inner: UOp | None, exclusive: set, co: dict, oco: dict, size: dict) -> list[UOp]:
    """The rows (columns) of an operand as one flat range, innermost first: `inner`, then each of the operand's other
    exclusive ranges whose stride is the run's stride times its size both in the operand (affine coefficients co) and
    in the output (oco). GQA's scores q[b, 4h + g, m, d] k[b, h, n, d]: the key ignores the group range g, which
    follows m in q and in the output, so the rows are (g, m), M = 4 x 16, where a batch of 4 would each hold 16."""
    if inner is None: return []
    run, step, ostep = [inner], co[inner] * size[inner], oco[inner] * size[inner]
    while (r := next((r for r in exclusive - set(run) if co.get(r) == step and oco.get(r) == ostep), None)) is not None:
        run.append(r)
        step, ostep = step * size[r], ostep * size[r]
    return run


MATMUL_DTYPES = (dtypes.float32, dtypes.bfloat16)


def stored_sum_of_products(sink: UOp) -> tuple[list[UOp], UOp, UOp, UOp, list] | None:
    """(toposort, STORE, REDUCE, MUL, the dtypes cast through between the sum and the store) of a kernel whose one
    STORE writes one REDUCE(ADD) of a product through float32/bfloat16 casts (what both matmul matchers start from),
    else None."""
    if sink.op is not Ops.SINK: return None
    topo = sink.toposort()
    stores = [u for u in topo if u.op is Ops.STORE]
    reduces = [u for u in topo if u.op is Ops.REDUCE]
    if len(stores) != 1 or len(reduces) != 1: return None
    store, red = stores[0], reduces[0]
    if red.arg[0] is not Ops.ADD or len(store.src) != 2 or strip_ops(store.src[1], Ops.CAST) is not red: return None
    chain, u = [], store.src[1]
    while u.op is Ops.CAST: chain.append(u.dtype); u = u.src[0]
    if any(dt not in MATMUL_DTYPES for dt in chain): return None
    mul = strip_ops(red.src[0], Ops.CAST)
    return (topo, store, red, mul, chain) if mul.op is Ops.MUL else None


def match_matmul(sink: UOp) -> MatmulSpec | None:
    """The spec of a plain (batched, transposed) matmul kernel, or None when the AST is not one."""
    if (found := stored_sum_of_products(sink)) is None: return None
    topo, store, red, mul, chain = found
    round_bf16 = dtypes.bfloat16 in chain          # e.g. (a @ b).float() with bf16 a, b: C is rounded to bf16 first
    rks = list(red.src[1:])
    if not rks or any(r.op is not Ops.RANGE for r in rks): return None
    loads, tiles = [], []
    for x in mul.src:
        casts = []
        while x.op is Ops.CAST: casts.append(x.dtype); x = x.src[0]
        x = strip_ops(x, Ops.LOAD)
        if x.op is not Ops.INDEX: return None
        if any(dt not in MATMUL_DTYPES for dt in casts): return None
        # the operand's precision: bf16 if it was loaded as bf16 or went through a cast to bf16 (x.cast(bf16) @ ..:
        # the reader rounds fp32 to bf16, nearest even, as tinygrad does; the unpacker would truncate)
        loads.append(x)
        tiles.append("bf16" if x.dtype == dtypes.bfloat16 or dtypes.bfloat16 in casts else "fp32")
    if tiles[0] != tiles[1]: return None          # bf16 x fp32: not one Src format
    out_idx = strip_ops(store.src[0], Ops.CAST)
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
        if dt not in MATMUL_DTYPES: return None
        return buf, co, DTYPE_NAME[dt]

    acc = [access(x) for x in loads]
    oacc = access(out_idx)
    if None in acc or oacc is None: return None
    rks = k_order(rks, acc[0][1])
    rk = rks[-1]                      # the innermost of the reduce ranges: their strides are rk's (k_chained)
    rngs = {u for u in topo if u.op is Ops.RANGE}
    if any(r.src[0].op is not Ops.CONST for r in rngs): return None
    if any(r.arg[-1] not in (AxisType.REDUCE, AxisType.GROUP_REDUCE) for r in rks): return None
    r0 = {r for r in acc[0][1] if r is not None and acc[0][1][r] != 0}
    r1 = {r for r in acc[1][1] if r is not None and acc[1][1][r] != 0}
    ro = {r for r in oacc[1] if r is not None and oacc[1][r] != 0}
    if not all(r in r0 and r in r1 and r not in ro for r in rks): return None
    if any(r.arg[-1] in (AxisType.REDUCE, AxisType.GROUP_REDUCE) for r in rngs - set(rks)): return None
    only0, only1, both = (r0 - r1) - set(rks), (r1 - r0) - set(rks), (r0 & r1) - set(rks)
    size = {r: int(r.src[0].arg) for r in rngs}
    if not (k_chained(acc[0][1], rks) and k_chained(acc[1][1], rks)): return None
    if not (only0 | only1 | both) <= ro: return None                # an operand range missing from the output
    # m (n) is the operand's exclusive range that is innermost in the output, with the exclusive ranges chained to it
    # (chained_run); its other exclusive ranges, the shared ones and output-only ones are batch ranges (a batched
    # operand times a broadcast one: B's batch stride is 0)
    def inner(rs): return min(rs, key=lambda r: abs(oacc[1][r])) if rs else None
    rm0, rn1 = inner(only0), inner(only1)
    if rm0 is None and rn1 is None: return None                    # (batched) dot products: a plain reduction
    # the side whose exclusive range is contiguous in the output is B (n): C rows come out of the writer as lines
    if rm0 is not None and oacc[1].get(rm0) == 1 and (rn1 is None or oacc[1].get(rn1) != 1):
        acc, (rm0, rn1), (only0, only1) = acc[::-1], (rn1, rm0), (only1, only0)
        tiles = tiles[::-1]
    (abuf, aco, adt), (bbuf, bco, bdt), (obuf, oco, odt) = acc[0], acc[1], oacc
    m_run, n_run = chained_run(rm0, only0, aco, oco, size), chained_run(rn1, only1, bco, oco, size)
    batch = sorted(ro - set(m_run) - set(n_run), key=lambda r: -abs(oco.get(r, 0)))

    def g(co, r): return co.get(r, 0) if r is not None else 0

    def operand(buf, co, dt, rr, rc, tile):
        return Operand(buf.arg.slot, dt, co.get(None, 0), g(co, rr), g(co, rc), tuple(g(co, r) for r in batch),
                       int(buf.src[0].arg) * DTYPE_SIZE[dt], tile)
    return MatmulSpec(M=math.prod(size[r] for r in m_run), N=math.prod(size[r] for r in n_run),
                      K=math.prod(size[r] for r in rks),
                      batch=tuple(size[r] for r in batch), round_bf16=round_bf16 and odt == "float32",
                      a=operand(abuf, aco, adt, rm0, rk, tiles[0]), b=operand(bbuf, bco, bdt, rk, rn1, tiles[1]),
                      out=operand(obuf, oco, odt, rm0, rn1, "fp32"))


@dataclass
class MatmulKernelPlan(Plan):
    """What both matmul families' plans (fpu_matmul.FpuMatmulPlan, sfpu_matmul.SfpuMatmulPlan) share: the spec, the
    tile counts, and the argument block's element count (all multiply-adds)."""
    spec: MatmulSpec

    @property
    def n_elements(self) -> int: return self.spec.n_batch * self.spec.M * self.spec.N * self.spec.K

    @property
    def tiles(self) -> tuple[int, int, int]: return self.spec.tiles

    @property
    def n_tiles(self) -> int:
        mt, nt, _ = self.tiles
        return self.spec.n_batch * mt * nt


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


def line_bytes(n: int, esz: int) -> int:
    """The reader's staging line for n elements of esz bytes: 64 bytes of slack, rounded up to 64."""
    return (n * esz + 64 + 63) & ~63


def stage_in_bytes(spec: MatmulSpec) -> int:
    """STAGE_IN_BYTES: one staging line of the longest operand row (a tile's more), the gathers' window."""
    esz_in = max(DTYPE_SIZE[spec.a.dtype], DTYPE_SIZE[spec.b.dtype])
    return line_bytes(max(spec.K, spec.N, TILE) + TILE, esz_in)


def stage_bytes(spec: MatmulSpec) -> int:
    """Both matmul families' reader staging area (and the FPU matmul's splitting writer's): MM_STAGE_ROWS_BYTES, so
    several operand lines go in one NoC read (fetch_lines) or wait, and at least one line of the longest operand
    row."""
    return max(MM_STAGE_ROWS_BYTES, stage_in_bytes(spec))


PACKED_ROW_ALIGN = 8   # elements: a bf16 output row that starts on a 16-byte boundary in DRAM


def out_packed_rows(spec: MatmulSpec) -> bool:
    """Whether the packer writes the FPU matmul's output row-major into a 32-row panel in L1 (one PACR stream per face
    row, placed by the packer's ch1.Y: docs/fpu_path.md §8.6, tests/diff/test_diff_pack_ttsim.py "untilize") and the
    writer only sends the panel's rows, with no untilize on a RISC-V: a bf16 output whose rows are contiguous and
    start on 16-byte boundaries (a packer stream starts on one, a NoC write wants the same address mod 16 at both
    ends)."""
    o = spec.out
    return (o.dtype == "bfloat16" and o.gather is None and o.cs == 1
            and all(v % PACKED_ROW_ALIGN == 0 for v in (o.rs, o.offset, *o.bs)))


def out_pitch(n: int, esz: int) -> int:
    """The writer's staging row pitch for n output elements: 16-byte aligned, plus 16 bytes of slack."""
    return ((n * esz + 15) & ~15) + 16


def _batch_c(spec: MatmulSpec) -> str:
    """C: element offsets of A, B, C for flat batch index b (decomposed over the batch ranges, innermost last); a
    gathered operand's 'offset' is b itself (its element function decomposes it)."""
    lines = ["static inline void batch_offsets(uint32_t b, int32_t *oa, int32_t *ob, int32_t *oo)", "{",
             f"    int32_t a = {spec.a.offset}, bb = {spec.b.offset}, o = {spec.out.offset};"]
    if spec.gathered: lines.append("    const int32_t flat = (int32_t)b;")
    for k in reversed(range(len(spec.batch))):
        lines += ["    {", f"        int32_t i = (int32_t)(b % {spec.batch[k]}u); b /= {spec.batch[k]}u;",
                  f"        a += {spec.a.bs[k]} * i; bb += {spec.b.bs[k]} * i; o += {spec.out.bs[k]} * i;", "    }"]
    oa, ob = ("flat" if o.gather is not None else v for o, v in ((spec.a, "a"), (spec.b, "bb")))
    lines += ["    (void)b;" + (" (void)flat;" if spec.gathered else ""), f"    *oa = {oa}; *ob = {ob}; *oo = o;", "}"]
    return "\n".join(lines)


def operand_ctx(o: Operand, name: str = "") -> dict:
    """How the reader walks an operand (rows / cols / gather by strides / indexed: by its index expression, the C
    function `name`_index) and what it converts per element."""
    mode = "indexed" if o.gather is not None else "rows" if o.cs == 1 else "cols" if o.rs == 1 else "gather"
    return {"rs": o.rs, "cs": o.cs, "esz": DTYPE_SIZE[o.dtype], "mode": mode, "dtype": o.dtype,
            "round": o.dtype == "float32" and o.tile == "bf16",
            "index_fn": o.gather.render_c(f"{name}_index") if o.gather is not None else "",
            "n_ranges": len(o.gather.sizes) if o.gather is not None else 0}


def matmul_args_header(plan: MatmulKernelPlan, generator: str, family: list[str], out_cols: int,
                       out_note: str = "") -> str:
    """args.h of both matmul families: the shared launch/shape/buffer/L1 defines around the family's own `family`
    lines; OUT_PITCH for `out_cols` output columns (the writer's staging row)."""
    s = plan.spec
    mt, nt, _ = plan.tiles
    h = ArgsHeader(generator, plan.name)
    h.add("#define CB_A 0u", "#define CB_B 1u", "#define CB_OUT 2u",
          f"#define MM_M {s.M}u", f"#define MM_N {s.N}u", f"#define MM_K {s.K}u", f"#define MM_BATCH {s.n_batch}u",
          f"#define MM_MT {mt}u", f"#define MM_NT {nt}u", *family,
          f"#define MM_A_BUF {plan.inputs[0].buf}u", f"#define MM_B_BUF {plan.inputs[1].buf}u",
          f"#define MM_OUT_BUF {plan.output.buf}u",
          f"#define MM_A_NBYTES {s.a.nbytes}u", f"#define MM_B_NBYTES {s.b.nbytes}u",
          f"#define MM_OUT_NBYTES {s.out.nbytes}u").buffers(plan.buffers).l1(plan.l1)
    return h.add(f"#define STAGE_IN_BYTES {stage_in_bytes(s)}u",
                 f"#define OUT_PITCH {out_pitch(out_cols, DTYPE_SIZE[s.out.dtype])}u{out_note}",
                 "", _batch_c(s)).text()
