"""Precision-aware placement (DESIGN data flow step 4): each tile op of a kernel runs on the SFPU (fp32) or on the FPU
(ELWMUL with 1-4 fidelity phases, ELWADD/ELWSUB; bf16 or tf32 operands straight from the unpackers), chosen as the
cheapest placement (cycle model below) whose predicted relative error stays within the budget.

Pieces, each a plain function:
  * `options(g, v)`: the FPU choices of one candidate node (formats the unpackers can produce from its L1 operands,
    fidelities); dominated choices are not listed (fp32 -> bf16 costs what fp32 -> tf32 costs and is never better).
  * `split(dag, choices, n_inputs)`: a placement as the hardware runs it - FPU ops (operands unpacked to SrcA/SrcB,
    result in a Dst slot after the inputs) and the SFPU DAG that reads those slots as LOADs. The evaluator and the
    KernelPlan both use this one split, so what is predicted is what runs.
  * `cycles(...)`: the cost model (per tile; units: Tensix cycles).
  * `reference(dag, inputs)`: the same graph in float32 with numpy (bfloat16 ops round to nearest even once).
  * `place(...)`: the search. The predicted error comes from an injected `evaluator(dag, choices, inputs) -> output`
    (tt_backend.placement_eval: the bit-exact FPU/SFPU models; `lowering` never imports `runtime`).
No budget -> the float32-faithful placement: an FPU choice is taken only if it reproduces the all-SFPU result bit for
bit on the samples (bf16 x bf16 at HiFi4 into an fp32 Dst is exact) and is cheaper.
"""
from __future__ import annotations

import fnmatch
import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from tt_backend.lowering.dag import ValueDAG, VNode
from tt_backend.lowering.graph import (FPU_BINARY, fold_negated_add, fpu_candidates, l1_source, live_nodes,
                            reassociate_products, renumber, tile_graph)
from tt_backend.chip.errors import UnsupportedOp
from tt_backend.chip.numerics.fpu_math import FIDELITY_PHASES

SAFETY = 0.8            # accept a placement when predicted <= SAFETY * budget: margin for data unlike the samples
SAMPLE_ELEMENTS = 1024  # one tile of samples per distribution and evaluation
# Sample distributions: the real data is unknown when tinygrad compiles a kernel, and the relative L2 error of heavy-
# tailed outputs (1/x of N(0,1) data) rests on a few elements, so the prediction is the worst over a few shapes of data.
SAMPLE_DISTS = ("normal", "uniform", "positive")


@dataclass(frozen=True)
class Choice:
    engine: str                              # "SFPU" | "FPU"
    fidelity: str | None = None              # FPU MUL: LoFi/HiFi2/HiFi3/HiFi4; None for ELWADD/ELWSUB and the SFPU
    formats: tuple[str, str] | None = None   # (SrcA, SrcB) formats: "bf16" | "tf32"
    swap: bool = False                       # operand 1 goes to SrcA (MUL/ADD are commutative)

    def label(self) -> str:
        if self.engine == "SFPU":
            return "SFPU fp32"
        return f"FPU {self.fidelity or '-'} {self.formats[0]}x{self.formats[1]}"


SFPU = Choice("SFPU")


@dataclass
class FpuOp:
    """One FPU elementwise op as the templates run it: input streams a -> SrcA, b -> SrcB (unpacked in the given
    formats), `kind` (ELWMUL/ELWADD/ELWSUB) with `phases` fidelity phases into Dst slot `slot` (fp32)."""
    node: int
    kind: str
    a: int
    b: int
    fmt_a: str
    fmt_b: str
    phases: int
    slot: int


@dataclass
class Split:
    fpu_ops: list[FpuOp]
    sfpu_dag: ValueDAG          # LOAD arg j < n_inputs: input stream j in Dst slot j; arg >= n_inputs: an FPU result
    n_slots: int                # Dst slots holding inputs and FPU results (the SFPU output goes to slot n_slots)
    dst_inputs: list[int]       # input streams the SFPU reads from Dst (the others feed the FPU only)


@dataclass
class Placement:
    kernel: str
    budget: float | None
    dag: ValueDAG                              # the graph that is run (possibly reassociated)
    choices: dict[int, Choice]                 # FPU nodes only; every other op node runs on the SFPU
    split: Split
    predicted_error: float = 0.0               # ||out - ref||_2 / ||ref||_2 on the samples
    predicted_max_rel: float = 0.0
    cycles: dict = field(default_factory=dict)  # per tile: unpack, fpu, sfpu, pack, total; "kernel": total * tiles
    sfpu_cycles_all: int = 0                   # the all-SFPU placement's cycles per kernel (for comparison)
    nodes: list[dict] = field(default_factory=list)
    reassociated: bool = False
    pinned: dict[int, Choice] = field(default_factory=dict)
    lowered: object = None                     # the LoweredKernel (set by plan_placed)
    evaluator_error: str | None = None         # why the error could not be predicted (then: no FPU moves)

    def report(self) -> dict:
        return {"kernel": self.kernel, "budget": self.budget, "predicted_error": self.predicted_error,
                "predicted_max_rel": self.predicted_max_rel, "predicted_cycles": self.cycles.get("kernel"),
                "predicted_cycles_per_tile": self.cycles, "all_sfpu_cycles": self.sfpu_cycles_all,
                "reassociated": self.reassociated, "evaluator_error": self.evaluator_error, "nodes": self.nodes}


# ------------------------------------------------------------------------------------------------ choices

def _l1_format(dag: ValueDAG, i: int) -> str:
    return "bf16" if l1_source(dag, i).dtype == "bfloat16" else "fp32"


def options(dag: ValueDAG, v: int) -> list[Choice]:
    """FPU choices for candidate node v. Operand formats: a bf16 tile unpacks as bf16 only (bf16 -> tf32 is refused by
    the unpacker); an fp32 tile is truncated to tf32 (fp32 -> bf16 costs the same and is never more accurate).
    MUL puts the operand with fewer significant bits in SrcA: SrcA drops its 10th mantissa bit, SrcB keeps all 11."""
    n = dag.nodes[v]
    fa, fb = (_l1_format(dag, s) for s in n.srcs)
    swap = n.op in ("MUL", "ADD") and fa == "fp32" and fb == "bf16"
    if swap:
        fa, fb = fb, fa
    src = tuple("bf16" if f == "bf16" else "tf32" for f in (fa, fb))
    if n.op == "MUL":
        return [Choice("FPU", fid, src, swap) for fid in FIDELITY_PHASES]
    return [Choice("FPU", None, src, swap)]


def split(dag: ValueDAG, choices: dict[int, Choice], n_inputs: int) -> Split:
    """Replace every FPU node by a LOAD of its Dst slot (a bf16 node by a bf16 CAST of that LOAD: the FPU result is
    fp32 and the graph rounds it once, like the SFPU would); inputs only the FPU reads are not unpacked to Dst."""
    fpu: list[FpuOp] = []
    nodes = list(dag.nodes)
    extra: list[VNode] = []
    remap: dict[int, int] = {}
    for v in sorted(choices):
        c = choices[v]
        if c.engine != "FPU":
            continue
        n = dag.nodes[v]
        if n.op not in FPU_BINARY or len(n.srcs) != 2 or any(l1_source(dag, s) is None for s in n.srcs):
            raise UnsupportedOp(f"node n{v} ({n.op}) cannot run on the FPU: its operands are not L1 tiles")
        a, b = (l1_source(dag, s).arg for s in n.srcs)
        if c.swap:
            a, b = b, a
        slot = n_inputs + len(fpu)
        fpu.append(FpuOp(v, FPU_BINARY[n.op], a, b, c.formats[0], c.formats[1],
                         FIDELITY_PHASES[c.fidelity] if c.fidelity else 1, slot))
        nodes[v] = VNode(v, "LOAD", "float32", (), slot)
        if n.dtype == "bfloat16":
            k = len(nodes) + len(extra)
            extra.append(VNode(k, "CAST", "bfloat16", (v,)))
            remap[v] = k
    if remap:   # users of a bf16 FPU node read its rounding CAST (the CASTs themselves are in `extra`)
        nodes = [VNode(n.id, n.op, n.dtype, tuple(remap.get(s, s) for s in n.srcs), n.arg) for n in nodes]
    all_nodes = nodes + extra
    out = remap.get(dag.out, dag.out)
    sfpu_dag = renumber(all_nodes, out)
    live = live_nodes(sfpu_dag)
    live_loads = {sfpu_dag.nodes[i].arg for i in live if sfpu_dag.nodes[i].op == "LOAD"}
    fpu_only = ({o.a for o in fpu} | {o.b for o in fpu}) - live_loads
    dst_inputs = [j for j in range(n_inputs) if j not in fpu_only]
    return Split(fpu, sfpu_dag, n_inputs + len(fpu), dst_inputs)


# ------------------------------------------------------------------------------------------------ cost model
# Per 32x32 tile, in Tensix cycles. Documented (isa-digest 1(d), simulators.md): SFPU issues 1 instruction/cycle
# (SFPMAD latency 2, auto-stalled or NOP-padded by the code generator, so instruction count = cycles); FPU
# ELWMUL/MVMUL 1 cycle per 8x16 block per fidelity phase, ELWADD/ELWSUB 1 per block, latency 5; ZEROACC/SETRWC 1.
# L1 bandwidth (WH L1.md, the numbers runtime/emu/cycles.py uses): an unpacker reads 64 B per cycle, the packer writes
# 16 B per cycle. The current templates keep one Dst group in flight, so unpack, math and pack of a tile do not
# overlap: the per-tile cost is their sum. RISC-V/NoC time (reader, writer) is the same for every placement and left out.
COST = {"sfpu_per_instruction": 1, "fpu_per_block_phase": 1, "fpu_latency": 5, "fpu_setrwc": 1, "zeroacc": 1,
        "unpack_bytes_per_cycle": 64, "pack_bytes_per_cycle": 16, "blocks_per_tile": 8, "faces_per_tile": 4,
        "rows_per_tile": 32}
TILE_BYTES = {"fp32": 4096, "bf16": 2048}


def sfpu_program_cycles(setup: int, body: int) -> int:
    return COST["sfpu_per_instruction"] * (setup + COST["rows_per_tile"] * body)


def fpu_op_cycles(op: FpuOp) -> int:
    c = COST["blocks_per_tile"] * COST["fpu_per_block_phase"] * op.phases + COST["fpu_latency"]
    c += COST["faces_per_tile"] * COST["fpu_setrwc"]
    if op.kind == "ELWMUL":          # ELWMUL accumulates: the result slot is zeroed first (one ZEROACC per face)
        c += COST["faces_per_tile"] * COST["zeroacc"]
    return c


def unpack_cycles(fmt: str) -> int:
    return TILE_BYTES[fmt] // COST["unpack_bytes_per_cycle"]


def pack_cycles(fmt: str) -> int:
    return TILE_BYTES[fmt] // COST["pack_bytes_per_cycle"]


def cycles(sp: Split, in_formats: list[str], out_format: str, n_tiles: int, sfpu_counts: tuple[int, int]) -> dict:
    """Per-tile cost of a split; `sfpu_counts` = (setup, body) instruction counts of its compiled SFPU program."""
    unpack = sum(unpack_cycles(in_formats[j]) for j in sp.dst_inputs)
    unpack += sum(unpack_cycles(in_formats[o.a]) + unpack_cycles(in_formats[o.b]) for o in sp.fpu_ops)
    # a bf16 input reaches Dst through SrcA + ELWADD (unpack-sfpu-pack.md 5.2)
    fpu = sum(COST["blocks_per_tile"] + COST["fpu_latency"] + COST["faces_per_tile"] * COST["fpu_setrwc"]
              for j in sp.dst_inputs if in_formats[j] == "bf16")
    fpu += sum(fpu_op_cycles(o) for o in sp.fpu_ops)
    sfpu = sfpu_program_cycles(*sfpu_counts)
    pack = pack_cycles(out_format)
    total = unpack + fpu + sfpu + pack
    return {"unpack": unpack, "fpu": fpu, "sfpu": sfpu, "pack": pack, "total": total, "tiles": n_tiles,
            "kernel": total * n_tiles}


def compile_split(sp: Split, out_dtype: str):
    from tt_backend.lowering.sfpu_codegen import compile_sfpu     # late: keeps graph/placement importable on their own
    return compile_sfpu(sp.sfpu_dag, sp.n_slots, out_dtype)


_OP_CYCLES: dict[tuple, int] = {}


def sfpu_op_cycles(n: VNode, src_dtypes: tuple[str, ...]) -> int:
    """Cycles per tile of one op on the SFPU: its instruction sequence (compiled alone, loads/store not counted)."""
    key = (n.op, n.dtype, src_dtypes)
    if key not in _OP_CYCLES:
        from tt_backend.lowering.sfpu_codegen import compile_sfpu
        d = ValueDAG()
        srcs = tuple(d.add("LOAD", dt, (), j) for j, dt in enumerate(src_dtypes))
        d.out = d.add(n.op, n.dtype, srcs, n.arg)
        try:
            p = compile_sfpu(d, len(srcs), n.dtype)
            _OP_CYCLES[key] = sfpu_program_cycles(0, max(0, len(p.body) - len(srcs) - 1))
        except Exception:
            _OP_CYCLES[key] = 0
    return _OP_CYCLES[key]


# ------------------------------------------------------------------------------------------------ numerics

def bf16_round(x: np.ndarray) -> np.ndarray:
    """float32 -> nearest-even bfloat16 as float32 (tinygrad's cast; NaN stays NaN)."""
    b = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    nan_bit = ((b & 0xFFFF) != 0).astype(np.uint64) << np.uint64(16)
    r = np.where((b & 0x7F800000) == 0x7F800000, b | nan_bit, b + 0x7FFF + ((b >> 16) & 1))
    return (r & 0xFFFF0000).astype(np.uint32).view(np.float32)


NP = {"float32": np.float32, "bfloat16": np.float32, "int32": np.int32, "bool": np.bool_}


def _cast(x: np.ndarray, dt: str) -> np.ndarray:
    if dt == "bfloat16":
        return bf16_round(x.astype(np.float32))
    if dt == "bool":
        return x != 0
    if dt == "int32" and x.dtype.kind == "f":
        return np.trunc(np.nan_to_num(x)).astype(np.int64).astype(np.int32)
    return x.astype(NP[dt])


_REF = {"ADD": np.add, "MUL": np.multiply, "SUB": np.subtract, "NEG": np.negative, "MAX": np.maximum,
        "RECIPROCAL": lambda a: np.float32(1) / a, "EXP2": np.exp2, "LOG2": np.log2, "SQRT": np.sqrt, "SIN": np.sin,
        "TRUNC": np.trunc, "MULADD": lambda a, b, c: a * b + c, "MULSUB": lambda a, b, c: a * b - c,
        "NMULADD": lambda a, b, c: c - a * b}


def reduce_exact(op: str, v: np.ndarray, axes: tuple[int, ...], dtype: str) -> np.ndarray:
    """REDUCE of the float32 reference: float sums/products accumulated in float64, rounded once (keepdims)."""
    if op == "MAX":
        return v.max(axis=axes, keepdims=True)
    if dtype in ("float32", "bfloat16"):
        f = np.sum if op == "ADD" else np.prod
        return _cast(f(v.astype(np.float64), axis=axes, keepdims=True), dtype)
    f = np.sum if op == "ADD" else np.prod
    return f(v, axis=axes, keepdims=True).astype(NP[dtype]) if dtype != "bool" else v.any(axis=axes, keepdims=True)


def reduce_in_lanes(lanes: int):
    """REDUCE as lowering/reduce.py runs it: lane c of an output accumulates reduce indices k = c (mod lanes) in order
    (one fp32 rounding per element), then the lanes combine pairwise. MAX and integer reductions are exact."""
    def red(op: str, v: np.ndarray, axes: tuple[int, ...], dtype: str) -> np.ndarray:
        if op == "MAX" or dtype not in ("float32", "bfloat16"):
            return reduce_exact(op, v, axes, dtype)
        keep = [a for a in range(v.ndim) if a not in axes]
        out_shape = [v.shape[a] if a in keep else 1 for a in range(v.ndim)]
        x = np.transpose(v, keep + list(axes)).reshape(-1, int(np.prod([v.shape[a] for a in axes])))
        k = x.shape[1]
        pad = -k % lanes
        ident = np.float32(0 if op == "ADD" else 1)
        x = np.concatenate([x.astype(np.float32), np.full((x.shape[0], pad), ident, np.float32)], 1)
        x = x.reshape(x.shape[0], -1, lanes)
        acc = (np.cumsum if op == "ADD" else np.cumprod)(x, axis=1, dtype=np.float32)[:, -1, :]
        while acc.shape[1] > 1:
            acc = acc[:, 0::2] + acc[:, 1::2] if op == "ADD" else acc[:, 0::2] * acc[:, 1::2]
        return _cast(acc.reshape(out_shape), dtype)
    return red


def reference(dag: ValueDAG, inputs: list[np.ndarray], ranges: tuple[int, ...] | None = None,
              reduce=reduce_exact) -> np.ndarray:
    """The graph in float32 (numpy, per-op rounding; bfloat16 results rounded to nearest even). With REDUCE nodes,
    `ranges` gives the iteration space the inputs were gathered over (flat, row-major); a REDUCE reduces its axes
    (`reduce`: exact float64 accumulation by default) and the result is broadcast back over the whole space."""
    vals: dict[int, np.ndarray] = {}
    shaped = ranges is not None and any(n.op == "REDUCE" for n in dag.nodes)
    with np.errstate(all="ignore"):
        for i in live_nodes(dag):
            n = dag.nodes[i]
            s = [vals[k] for k in n.srcs]
            if n.op == "LOAD":
                v = np.asarray(inputs[n.arg])
                if shaped:
                    v = np.broadcast_to(v.reshape(-1), (int(np.prod(ranges)),)).reshape(ranges)
            elif n.op == "REDUCE":
                if not shaped:
                    raise UnsupportedOp("reference: a REDUCE needs the kernel's ranges")
                v = reduce(n.arg[0], np.broadcast_to(s[0], ranges), tuple(n.arg[1]), n.dtype)
            elif n.op == "CONST":
                v = np.array(n.arg, NP[n.dtype])
            elif n.op == "CAST":
                v = _cast(s[0], n.dtype)
            elif n.op == "WHERE":
                v = np.where(s[0], s[1], s[2])
            elif n.op in ("CMPLT", "CMPNE"):
                v = (s[0] < s[1]) if n.op == "CMPLT" else (s[0] != s[1])
            else:
                v = _REF[n.op](*s)
                if n.dtype == "bfloat16":
                    v = bf16_round(v)
                v = np.asarray(v).astype(NP[n.dtype])
            vals[i] = v
    if shaped:
        return np.broadcast_to(vals[dag.out], ranges).reshape(-1)
    return vals[dag.out]


def rel_error(out: np.ndarray, ref: np.ndarray) -> tuple[float, float]:
    """(||out - ref||_2 / ||ref||_2, max_i |out_i - ref_i| / |ref_i| over ref_i != 0); non-finite reference entries are
    left out (both sides), a non-finite output where the reference is finite counts as infinite error."""
    o, r = np.asarray(out, np.float64).reshape(-1), np.asarray(ref, np.float64).reshape(-1)
    o, r = np.broadcast_arrays(o, r)
    keep = np.isfinite(r)
    o, r = o[keep], r[keep]
    if not np.isfinite(o).all():
        return math.inf, math.inf
    d = np.abs(o - r)
    nr = float(np.linalg.norm(r))
    l2 = float(np.linalg.norm(d)) / nr if nr > 0 else float(np.linalg.norm(d) > 0) * math.inf
    nz = r != 0
    mx = float((d[nz] / np.abs(r[nz])).max()) if nz.any() else 0.0
    if (~nz).any() and (d[~nz] > 0).any():
        mx = math.inf
    return l2, mx


def sample_sets(dtypes: list[str], n: int = SAMPLE_ELEMENTS, seed: int = 0, dists=SAMPLE_DISTS) -> list[list]:
    return [sample_inputs(dtypes, n, seed + k, dist) for k, dist in enumerate(dists)]


def concat_sets(sets: list[list[np.ndarray]]) -> tuple[list[np.ndarray], list[int]]:
    """Sample sets -> one input list (the evaluator runs them in one go) and the size of each set."""
    sizes = [max(np.asarray(x).size for x in st) for st in sets]
    xs = [np.concatenate([np.broadcast_to(np.asarray(st[j]), (n,)) for st, n in zip(sets, sizes)])
          for j in range(len(sets[0]))]
    return xs, sizes


def worst_error(out: np.ndarray, ref: np.ndarray, sizes: list[int]) -> tuple[float, float]:
    """rel_error per sample set; the worst of each metric."""
    o = np.broadcast_to(np.asarray(out).reshape(-1), (sum(sizes),))
    r = np.broadcast_to(np.asarray(ref).reshape(-1), (sum(sizes),))
    errs, k = [], 0
    for n in sizes:
        errs.append(rel_error(o[k:k + n], r[k:k + n]))
        k += n
    return max(e[0] for e in errs), max(e[1] for e in errs)


def sample_inputs(dtypes: list[str], n: int, seed: int = 0, dist: str = "normal") -> list[np.ndarray]:
    """Samples drawn like typical user data (the real data is not known when tinygrad compiles a kernel): N(0,1)
    (or U(-1,1) / U(0.5,2)) in the stream's dtype; int32 small integers; bool fair coins."""
    rng = np.random.default_rng(seed)
    out = []
    for dt in dtypes:
        if dt in ("float32", "bfloat16"):
            x = {"normal": lambda: rng.standard_normal(n), "uniform": lambda: rng.uniform(-1, 1, n),
                 "positive": lambda: rng.uniform(0.5, 2, n)}[dist]().astype(np.float32)
            out.append(bf16_round(x) if dt == "bfloat16" else x)
        elif dt == "int32":
            out.append(rng.integers(-100, 100, n).astype(np.int32))
        else:
            out.append(rng.integers(0, 2, n).astype(bool))
    return out


# ------------------------------------------------------------------------------------------------ pins (TT_PLACE)

def parse_choice(text: str) -> Choice:
    """'SFPU' | 'FPU' | 'FPU:HiFi2' | 'FPU:HiFi4:bf16/tf32' (SrcA/SrcB formats)."""
    parts = text.strip().split(":")
    eng = parts[0].upper()
    if eng == "SFPU":
        return SFPU
    if eng != "FPU":
        raise UnsupportedOp(f"TT_PLACE: engine {parts[0]!r} is not SFPU or FPU")
    fid = None
    fmts = None
    for p in parts[1:]:
        if p in FIDELITY_PHASES:
            fid = p
        elif "/" in p:
            fmts = tuple(p.split("/"))
            if any(f not in ("bf16", "tf32") for f in fmts):
                raise UnsupportedOp(f"TT_PLACE: formats {p!r}: expected bf16/tf32 pairs like bf16/tf32")
        else:
            raise UnsupportedOp(f"TT_PLACE: {p!r} is neither a fidelity ({', '.join(FIDELITY_PHASES)}) nor formats")
    return Choice("FPU", fid, fmts)


def parse_pins(spec: str | None, kernel: str) -> dict[str, Choice]:
    """TT_PLACE="E_4_256:n5=FPU:HiFi2,n3=SFPU;E_*:MUL=FPU:HiFi4" -> {node or op name: Choice} for this kernel
    (kernel names are shell patterns; later groups override earlier ones)."""
    pins: dict[str, Choice] = {}
    for group in (spec or "").split(";"):
        group = group.strip()
        if not group:
            continue
        pat, _, body = group.partition(":") if ":" in group.split("=")[0] else ("*", "", group)
        if not fnmatch.fnmatchcase(kernel, pat.strip()):
            continue
        for item in body.split(","):
            if not item.strip():
                continue
            key, eq, val = item.partition("=")
            if not eq:
                raise UnsupportedOp(f"TT_PLACE: {item!r} is not node=ENGINE[:fidelity]")
            pins[key.strip().lstrip("n") if key.strip()[1:].isdigit() else key.strip()] = parse_choice(val)
    return pins


def _resolve(pins: dict[str, Choice], dag: ValueDAG, cands: list[int]) -> dict[int, Choice] | None:
    """Pins for this graph: node ids and op names -> {node: Choice}; None if an FPU pin names a non-candidate."""
    out: dict[int, Choice] = {}
    for key, c in pins.items():
        if key.isdigit():
            targets = [int(key)]
        else:   # an op name pins every node of that op the engine can take (kernels without one are unaffected)
            targets = [v for v in live_nodes(dag) if dag.nodes[v].op == key.upper()
                       and (c.engine != "FPU" or v in cands)]
        for v in targets:
            if c.engine == "FPU":
                if v not in cands:
                    return None
                base = options(dag, v)
                pick = [o for o in base if (c.fidelity is None or o.fidelity == c.fidelity or o.fidelity is None)]
                o = pick[-1] if pick else base[-1]
                if c.formats is not None:
                    o = Choice("FPU", o.fidelity, c.formats, o.swap)
                out[v] = o
            else:
                out[v] = SFPU
    return out


# ------------------------------------------------------------------------------------------------ search

Evaluator = Callable[[ValueDAG, dict, list, int], np.ndarray]


@dataclass
class _Scored:
    choices: dict[int, Choice]
    sp: Split
    err: float
    maxrel: float
    cyc: dict
    out: np.ndarray


def place(kernel: str, dag: ValueDAG, in_dtypes: list[str], out_dtype: str, n_elements: int,
          evaluator: Evaluator | None, budget: float | None = None, pins: dict[str, Choice] | None = None,
          samples: list | None = None, seed: int = 0) -> Placement:
    """The cheapest placement whose predicted error <= SAFETY * budget (no budget: the float32-faithful one).
    Without an evaluator only the all-SFPU placement (and pins) can be priced, not checked: pins are then trusted."""
    n_in = len(in_dtypes)
    in_formats = ["bf16" if d == "bfloat16" else "fp32" for d in in_dtypes]
    out_format = "bf16" if out_dtype == "bfloat16" else "fp32"
    n_tiles = max(1, -(-n_elements // 1024))
    # samples: a list of sample sets (each one array per input), or one set
    sets = samples if samples is not None else sample_sets(in_dtypes, SAMPLE_ELEMENTS, seed)
    if sets and not isinstance(sets[0], (list, tuple)):
        sets = [sets]
    xs, sizes = concat_sets(sets)
    ref = reference(dag, xs)
    pins = pins or {}
    cache: dict[tuple, _Scored] = {}
    failed: list[str] = []           # the evaluator's error, if it could not run this kernel

    def score(d: ValueDAG, tag: int, choices: dict[int, Choice]) -> _Scored:
        key = (tag, tuple(sorted(choices.items(), key=lambda kv: kv[0])))
        if key not in cache:
            sp = split(d, choices, n_in)
            prog = compile_split(sp, out_dtype)
            cyc = cycles(sp, in_formats, out_format, n_tiles, (len(prog.setup), len(prog.body)))
            out, err, mx = None, math.nan, math.nan
            if evaluator is not None and not failed:
                try:
                    out = evaluator(d, choices, xs, n_in)
                    err, mx = worst_error(out, ref, sizes)
                except Exception as e:      # a model gap must not fail the kernel: price it, trust no FPU move
                    failed.append(f"{type(e).__name__}: {e}")
                    out = None
            cache[key] = _Scored(dict(choices), sp, err, mx, cyc, out)
        return cache[key]

    # graph variants the FPU may prefer: exact rewrites (x + y*-1 -> x - y) and the product reassociation
    def shape(v: ValueDAG) -> tuple:
        return tuple((n.op, n.srcs, repr(n.arg)) for n in v.nodes), v.out
    variants, seen = [], set()
    for v in (dag, fold_negated_add(dag), reassociate_products(dag), reassociate_products(fold_negated_add(dag))):
        if shape(v) not in seen:
            seen.add(shape(v))
            variants.append((v, shape(v) != shape(dag)))     # (graph, rewritten)

    base = score(dag, 0, {})
    best: tuple[_Scored, ValueDAG, bool, dict] | None = None
    for tag, (d, reassoc) in enumerate(variants):
        cands = fpu_candidates(tile_graph(d))
        pinned = _resolve(pins, d, cands)
        if pinned is None:
            continue
        cur = {v: c for v, c in pinned.items() if c.engine == "FPU"}
        free = [v for v in cands if v not in pinned]
        s_cur = score(d, tag, cur)
        sfpu_ref = score(d, tag, {}).out if evaluator is not None else None

        def acceptable(s: _Scored) -> bool:
            if evaluator is None or failed or s.out is None:
                return False
            if budget is None:   # faithful: bit-identical to the all-SFPU result on every sample
                return s.out is not None and np.array_equal(np.asarray(s.out).view(np.uint8),
                                                            np.asarray(sfpu_ref).view(np.uint8))
            return s.err <= SAFETY * budget

        while free:   # greedy: take the single move that saves the most cycles and stays acceptable
            moves = []
            for v in free:
                for o in options(d, v):
                    try:
                        s = score(d, tag, {**cur, v: o})
                    except UnsupportedOp:    # e.g. the FPU result slots leave no Dst room for the SFPU program
                        continue
                    if s.cyc["kernel"] < s_cur.cyc["kernel"] and acceptable(s):
                        moves.append((s.cyc["kernel"], s.err, v, o, s))
            if not moves:
                break
            _, _, v, o, s_cur = min(moves, key=lambda m: (m[0], m[1]))
            cur[v] = o
            free.remove(v)
        if best is None or s_cur.cyc["kernel"] < best[0].cyc["kernel"]:
            best = (s_cur, d, reassoc, pinned)
    if best is None:
        raise UnsupportedOp(f"{kernel}: TT_PLACE pins an FPU placement on a node that cannot run on the FPU "
                            f"(FPU candidates are float MUL/ADD/SUB of two L1 tiles)")
    s, d, reassoc, pinned = best
    pl = Placement(kernel, budget, d, s.choices, s.sp, s.err, s.maxrel, s.cyc, base.cyc["kernel"],
                   reassociated=reassoc, pinned={v: c for v, c in pinned.items()})
    pl.evaluator_error = failed[0] if failed else None
    pl.nodes = node_reports(pl, d, xs, sizes, None if failed else evaluator, n_in, in_dtypes)
    return pl


def node_reports(pl: Placement, d: ValueDAG, xs, sizes, evaluator, n_in: int, in_dtypes: list[str]) -> list[dict]:
    """Per op node: engine, fidelity, formats, its own predicted error (the graph with only this node's choice vs the
    float32 reference) and cycles per kernel."""
    ref = reference(d, xs)
    fpu_by_node = {o.node: o for o in pl.split.fpu_ops}
    rows = []
    for i in live_nodes(d):
        n = d.nodes[i]
        if n.op in ("LOAD", "CONST"):
            continue
        c = pl.choices.get(i, SFPU)
        row = {"id": i, "op": n.op, "dtype": n.dtype, "srcs": list(n.srcs), "engine": c.engine,
               "fidelity": c.fidelity, "pinned": i in pl.pinned}
        if c.engine == "FPU":
            o = fpu_by_node[i]
            row["formats"] = {"srca": o.fmt_a, "srcb": o.fmt_b, "dst": "fp32",
                              "l1": [in_dtypes[o.a], in_dtypes[o.b]]}
            row["instruction"] = o.kind
            row["cycles"] = fpu_op_cycles(o) * pl.cycles.get("tiles", 1)
            row["bound"] = analytic_bound(o, in_dtypes)
            if evaluator is not None:
                row["predicted_error"] = worst_error(evaluator(d, {i: c}, xs, n_in), ref, sizes)[0]
        else:
            row["formats"] = {"lreg": "fp32"}
            row["cycles"] = sfpu_op_cycles(n, tuple(d.nodes[s].dtype for s in n.srcs)) * pl.cycles.get("tiles", 1)
            row["predicted_error"] = 0.0 if evaluator is not None else None
        rows.append(row)
    return rows


# worst relative error of one ELWMUL product per fidelity phase count, over all significand pairs (fpu-path.md 10.5,
# "worst case (the bit model)"): bf16 x bf16, and tf32 operands (an upper bound for mixed bf16 x tf32)
ELWMUL_WORST = {"bf16": {1: 5.920e-2, 2: 7.752e-3, 3: 4.020e-4, 4: 0.0},
                "tf32": {1: 7.156e-2, 2: 1.540e-2, 3: 1.743e-3, 4: 9.756e-4}}
UNPACK_TRUNC = {("float32", "tf32"): 2.0 ** -10, ("float32", "bf16"): 2.0 ** -7, ("bfloat16", "bf16"): 0.0}


def analytic_bound(o: FpuOp, in_dtypes: list[str]) -> float | None:
    """Max relative error of the node's own result for normal inputs: operand truncation by the unpacker plus the
    bits the chosen phases drop. Every step truncates toward zero, so the errors add up one-sidedly (bound = sum).
    None for ELWADD/ELWSUB: cancelling operands have no relative bound."""
    if o.kind != "ELWMUL":
        return None
    fid = ELWMUL_WORST["tf32" if "tf32" in (o.fmt_a, o.fmt_b) else "bf16"][o.phases]
    return UNPACK_TRUNC[(in_dtypes[o.a], o.fmt_a)] + UNPACK_TRUNC[(in_dtypes[o.b], o.fmt_b)] + fid


# ------------------------------------------------------------------------------------------------ KernelPlan

def plan_placed(lk, pl: Placement):
    """LoweredKernel + Placement -> KernelPlan (L1 not yet allocated): the SFPU program of the split, the FPU ops,
    and which inputs still go to Dst."""
    from tt_backend.lowering.plan import KernelPlan
    out_dtype = pl.dag.nodes[pl.dag.out].dtype
    sp = split(pl.dag, pl.choices, len(lk.inputs)) if pl.split is None else pl.split
    sfpu = compile_split(sp, out_dtype)
    pl.lowered = lk          # TT_CHECK evaluates the original graph on the kernel's real streams
    ops = lk.ops if not pl.reassociated else [n.op if n.op != "CAST" else f"CAST->{n.dtype}" for n in
                                              (pl.dag.nodes[i] for i in live_nodes(pl.dag)) if n.op not in ("LOAD", "CONST")]
    return KernelPlan(name=lk.name, ranges=lk.ranges, buffers=lk.buffers, inputs=[lk.stream(s) for s in lk.inputs],
                      output=lk.stream(lk.output), sfpu=sfpu, ops=ops, fpu_ops=list(sp.fpu_ops),
                      dst_inputs=list(sp.dst_inputs), placement=pl)


# ------------------------------------------------------------------------------------------------ reductions

REDUCE_SAMPLE_MAX = 1 << 16     # sample points per distribution for a reduction's prediction (one output's K, capped)


def reduce_cycles(plan) -> dict:
    """Cost of a reduction kernel (lowering/reduce.py; same units and rules as `cycles`): per input tile the streams'
    unpack (+ the SrcA/ELWADD pass of a bf16 stream) and the phase-1 SFPU program; per output group the accumulator
    init, the lane combine (`finish`), the post program (once per step group) and the output tile's pack."""
    rp = plan.reduce
    fmts = [s.tile_format for s in plan.inputs]
    unpack = sum(unpack_cycles(f) for f in fmts)
    fpu = sum(COST["blocks_per_tile"] + COST["fpu_latency"] + COST["faces_per_tile"] * COST["fpu_setrwc"]
              for f in fmts if f == "bf16")
    sfpu = sfpu_program_cycles(len(plan.sfpu.setup), len(plan.sfpu.body))
    runs = 1 if rp.steps >= 32 else 32 // rp.steps
    group = (len(rp.acc_init) + len(rp.finish) + runs * (len(rp.post.setup) + len(rp.post.body)
                                                          + len(rp.group_store) + len(rp.post_skip)))
    pack = pack_cycles(plan.output.tile_format)
    tiles, groups = plan.n_tiles, rp.groups
    per_tile = unpack + fpu + sfpu
    return {"unpack": unpack, "fpu": fpu, "sfpu": sfpu, "pack": pack, "total": per_tile, "tiles": tiles,
            "groups": groups, "per_group": group + pack, "kernel": tiles * per_tile + groups * (group + pack)}


def reduce_placement(lk, plan, budget: float | None = None, seed: int = 0, dists=SAMPLE_DISTS) -> Placement:
    """The placement of a reduction kernel on the SFPU (a plain sum may instead go to the FPU: lowering/fpu_reduce.py
    prices it against this one and records the FPU options in the report), with the
    cost of `reduce_cycles` and a predicted error from the accumulation-order model (`reduce_in_lanes`: fp32 lane
    partial sums, then the lane combine) against the exact reduction, on sample data: one output's full reduce range
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
            errs.append(rel_error(reference(dag, xs, ranges, reduce_in_lanes(rp.lanes)), reference(dag, xs, ranges)))
        err, mx = max(e[0] for e in errs), max(e[1] for e in errs)
    cyc = reduce_cycles(plan)
    n = len(lk.inputs)
    pl = Placement(lk.name, budget, dag, {}, Split([], dag, n, list(range(n))), err, mx, cyc, cyc["kernel"])
    pl.lowered = lk
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
            row.update(reduce=nd.arg[0], lanes=rp.lanes, predicted_error=err, cycles=COST["rows_per_tile"] * cyc["tiles"])
        else:
            per_tile = sfpu_op_cycles(nd, tuple(dag.nodes[s].dtype for s in nd.srcs))
            runs = 1 if rp.steps >= 32 else 32 // rp.steps       # post: one row step per step group
            row["cycles"] = (-(-per_tile // COST["rows_per_tile"]) * runs * cyc["groups"] if i in after
                             else per_tile * cyc["tiles"])
        pl.nodes.append(row)
    return pl
