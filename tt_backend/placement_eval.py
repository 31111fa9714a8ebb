"""The evaluator injected into lowering.placement (lowering never imports runtime): computes a kernel's output under
a placement with the emulator's bit-exact numeric models, exactly along the path the templates run:

  * input tiles reach Dst as the unpackers put them there: fp32/int32/bool bit for bit, bf16 through SrcA + ELWADD
    with a zeroed SrcB (chip.numerics.fpu_math.elwadd);
  * FPU nodes: operands converted by the unpacker (chip.numerics.formats: bf16 exact, fp32 -> tf32/bf16 truncation),
    then ELWMUL phase by phase into a zeroed fp32 Dst (fpu_math.elwmul) or ELWADD/ELWSUB (fpu_math.elwadd);
  * the rest: the SFPU program lowering.placement.choice.split/compile_split produces, run on the functional SFPU
    over Dst;
  * the output through the packer (fp32 copy, or the early fp32 -> bf16 rounding).

Also here: `placer(...)` (the lowering.placement.placer.Placer ops_tt hands to lowering.select.lower) and `check(...)`
(TT_CHECK=1: the measured error of a launched kernel against tinygrad's CPU device running the same AST on the same
input bytes (tt_backend.cpu_reference), written into report.json). The evaluator above is the placer's predictor
only; it never serves as the reference a prediction is checked against.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np

from tt_backend.chip import layout
from tt_backend.fpu_reduce_eval import fpu_matmul, fpu_sums
from tt_backend.lowering.dag import ValueDAG
from tt_backend.lowering.placement.choice import FpuOp, compile_split, split
from tt_backend.lowering.placement.placer import Placer
from tt_backend.lowering.placement.reference import SAMPLE_DISTS, rel_error
from tt_backend.chip.numerics import formats as F
from tt_backend.chip.numerics import fpu_math as fm
from tt_backend.chip.numerics.dst import Dst
from tt_backend.chip.numerics.sfpu.functional import FunctionalSFPU
from tt_backend.chip.errors import TTError
from tt_backend.chip.isa import decode
from tt_backend import cpu_reference, dump

TILE = 1024
SRC_CODE = {"bf16": fm.BF16, "tf32": fm.TF32}
CHECKS: list[dict] = []          # every TT_CHECK result of this process (tests and `tune` read it)


# ------------------------------------------------------------------------------------------------ value <-> tile bits

def to_bits(x: np.ndarray, dtype: str) -> np.ndarray:
    """A stream's values -> the 32-bit words of its tile in L1 (bf16: the fp32 pattern of the bf16 value)."""
    x = np.asarray(x)
    if dtype in ("float32", "bfloat16"):
        b = x.astype(np.float32).view(np.uint32)
        return (b & np.uint32(0xFFFF0000)) if dtype == "bfloat16" else b.copy()
    if dtype == "int32":
        return x.astype(np.int32).view(np.uint32).copy()
    return (x != 0).astype(np.uint32)


def from_bits(b: np.ndarray, dtype: str) -> np.ndarray:
    """Output tile words -> values as the writer stores them (bf16 through the packer's rounding)."""
    b = np.asarray(b, np.uint32)
    if dtype == "float32":
        return b.view(np.float32).copy()
    if dtype == "bfloat16":
        return (F.early_fp32_to_bf16(b).astype(np.uint32) << 16).view(np.float32)
    if dtype == "int32":
        return b.view(np.int32).copy()
    return b != 0


def dst_input(bits: np.ndarray, dtype: str) -> np.ndarray:
    """What input tile words look like in Dst after the unpack path of the templates."""
    if dtype == "bfloat16":
        zero = np.zeros_like(bits)
        return fm.elwadd(bits, zero, zero, (fm.BF16, fm.BF16)).astype(np.uint32)
    return bits


def src_operand(bits: np.ndarray, dtype: str, fmt: str) -> np.ndarray:
    """The Src word the unpacker writes for an L1 tile of `dtype` unpacked as `fmt`."""
    if dtype == "bfloat16":
        return bits & np.uint32(0xFFFF0000)
    return F.unp_fp32_to_tf32(bits) if fmt == "tf32" else F.unp_fp32_to_bf16(bits)


def fpu_op(o: FpuOp, a_bits: np.ndarray, b_bits: np.ndarray, in_dtypes: list[str]) -> np.ndarray:
    a = src_operand(a_bits, in_dtypes[o.a], o.fmt_a)
    b = src_operand(b_bits, in_dtypes[o.b], o.fmt_b)
    fmts = (SRC_CODE[o.fmt_a], SRC_CODE[o.fmt_b])
    zero = np.zeros(a.shape, np.uint32)
    if o.kind == "ELWMUL":      # ZEROACC, then one accumulating ELWMUL per phase
        return fm.fidelity_product(a, b, zero, range(o.phases), "elwmul", fmts).astype(np.uint32)
    return fm.elwadd(a, b, zero, fmts, sub=o.kind == "ELWSUB").astype(np.uint32)


# ------------------------------------------------------------------------------------------------ SFPU runner

_PROGRAMS: dict[tuple, object] = {}


def run_sfpu(program, slots: dict[int, np.ndarray], n: int) -> np.ndarray:
    """Run an SfpuProgram over ceil(n/1024) tiles: slot j of each tile from slots[j], returns the output slot's words."""
    setup = [decode(w) for w in program.setup]
    body = [decode(w) for w in program.body]
    out = np.zeros(-(-n // TILE) * TILE, np.uint32)
    for t in range(-(-n // TILE)):
        dst = Dst()
        sfpu = FunctionalSFPU(dst)
        for j, v in slots.items():
            tile = np.zeros(TILE, np.uint32)
            chunk = v[t * TILE:(t + 1) * TILE]
            tile[:chunk.size] = chunk
            dst.write_rows32(64 * j, tile.reshape(64, 16))
        for name, f in setup:
            sfpu.execute(name, f, 0)
        rwc = 0
        for _ in range(32):
            for name, f in body:
                sfpu.execute(name, f, rwc)
            rwc += 2          # the body's last SFPSTORE uses ADDR_MOD_DST_SEC1: Dst RWC += 2
        out[t * TILE:(t + 1) * TILE] = dst.rows32[64 * program.out_slot:64 * program.out_slot + 64].reshape(-1)
    return out[:n]


# Evaluations by content: the same graph, choices, input dtypes and sample bytes give the same output, whatever the
# kernel's shape or name (the samples depend on the dtypes and the placer's seed and distributions only). A program
# places the same ops on many shapes; its kernels after the first one skip the SFPU model, which is most of the
# placement's time. Bounded: the oldest entries go first.
_EVALUATIONS: dict[tuple, np.ndarray] = {}
EVALUATIONS_KEPT = 512
EVAL_STATS = {"evaluated": 0, "reused": 0}


def clear_evaluations() -> None:
    """Forget every kept evaluation (`bench build` measures placements of kernels never seen)."""
    _EVALUATIONS.clear()


def _content_key(dag: ValueDAG, choices: dict, inputs: list[np.ndarray], n_in: int, in_dtypes: list[str]) -> tuple:
    arrays = [np.ascontiguousarray(x) for x in inputs]
    digest = hashlib.sha256(b"".join(f"{a.dtype.str}{a.shape}".encode() + a.tobytes() for a in arrays)).digest()
    return (tuple((x.op, x.dtype, x.srcs, repr(x.arg)) for x in dag.nodes), dag.out,
            tuple(sorted(choices.items(), key=lambda kv: kv[0])), n_in, tuple(in_dtypes), digest)


def evaluate(dag: ValueDAG, choices: dict, inputs: list[np.ndarray], n_in: int,
             in_dtypes: list[str] | None = None) -> np.ndarray:
    """The kernel's output values under `choices` (node -> placement.Choice; absent = SFPU). Read-only: the array
    may be handed out again for an evaluation of the same content."""
    in_dtypes = in_dtypes or _input_dtypes(dag, n_in)
    key = _content_key(dag, choices, inputs, n_in, in_dtypes)
    if (out := _EVALUATIONS.get(key)) is not None:
        EVAL_STATS["reused"] += 1
        return out
    out = _evaluate(dag, choices, inputs, n_in, in_dtypes)
    out.flags.writeable = False
    if len(_EVALUATIONS) >= EVALUATIONS_KEPT:
        del _EVALUATIONS[next(iter(_EVALUATIONS))]
    _EVALUATIONS[key] = out
    EVAL_STATS["evaluated"] += 1
    return out


def _evaluate(dag: ValueDAG, choices: dict, inputs: list[np.ndarray], n_in: int, in_dtypes: list[str]) -> np.ndarray:
    out_dtype = dag.nodes[dag.out].dtype
    n = max(np.asarray(x).size for x in inputs)
    bits = [to_bits(np.broadcast_to(np.asarray(x), (n,)), dt) for x, dt in zip(inputs, in_dtypes)]
    sp = split(dag, choices, n_in)
    slots = {j: dst_input(bits[j], in_dtypes[j]) for j in sp.dst_inputs}
    for o in sp.fpu_ops:
        slots[o.slot] = fpu_op(o, bits[o.a], bits[o.b], in_dtypes)
    key = (tuple((x.op, x.dtype, x.srcs, repr(x.arg)) for x in sp.sfpu_dag.nodes), sp.sfpu_dag.out, sp.n_slots)
    if key not in _PROGRAMS:
        _PROGRAMS[key] = compile_split(sp, out_dtype)
    return from_bits(run_sfpu(_PROGRAMS[key], slots, n), out_dtype)


def _input_dtypes(dag: ValueDAG, n_in: int) -> list[str]:
    dts = ["float32"] * n_in
    for x in dag.nodes:
        if x.op == "LOAD" and x.arg < n_in:
            dts[x.arg] = x.dtype
    return dts


def evaluator_for(in_dtypes: list[str]):
    """The evaluator tt_backend.lowering.placement.search.place expects: (dag, choices, inputs, n_in) -> outputs."""
    return lambda dag, choices, inputs, n_in: evaluate(dag, choices, inputs, n_in, in_dtypes)


# ------------------------------------------------------------------------------------------------ placer (ops_tt)

def placer(budget: float | None = None, spec: str | None = None, seed: int = 0, sampled: bool = False) -> Placer:
    """The placer ops_tt hands to lowering.select.lower: the budget, the TT_PLACE pins (`spec`), this module's
    evaluator and the FPU sums' and matmuls' error models, samples drawn like the user's data (TT_SAMPLE_DIST, default normal,
    uniform, positive; the worst counts); `sampled` (TT_BUDGET_SAMPLED) lets FPU sums and matmuls in on those samples
    alone."""
    dists = tuple(d.strip() for d in os.environ.get("TT_SAMPLE_DIST", "").split(",") if d.strip()) or SAMPLE_DISTS
    if unknown := [d for d in dists if d not in SAMPLE_DISTS]:
        raise TTError(f"TT_SAMPLE_DIST: {', '.join(map(repr, unknown))} unknown; expected a comma list of "
                      f"{', '.join(SAMPLE_DISTS)}")
    return Placer(budget, spec, evaluator_for, fpu_sums, dists, seed, fpu_matmul, sampled)


# ------------------------------------------------------------------------------------------------ TT_CHECK

def check_meta(ast, pl, budget: float | None) -> dict:
    """What TT_CHECK needs at launch time, JSON-able: the kernel's tinygrad AST (run again on tinygrad's CPU device,
    tt_backend.cpu_reference), the placement's predictions and the engines its ops run on."""
    r = pl.report() if pl is not None else {}
    return {"ast": cpu_reference.pack_ast(ast), "predicted_error": r.get("predicted_error"),
            "predicted_cycles": r.get("predicted_cycles"), "budget": budget,
            "engines": sorted({n["engine"] for n in r.get("nodes", []) if n.get("engine")})}


def measured_cycles(stats: tuple | None) -> dict | None:
    """Per-core cycles of a kernel from the emulator's cycle model (runtime/emu/cycles.py). stats = stats() before the
    kernel's first launch and after each of its launches (one launch: before and after; a staged kernel,
    lowering/families/staged.py: one more per stage). Its launches run one after another, so a core's cycles are the
    sum over the launches and `max` (the kernel's time, RISC-V reader/writer included) the sum of each launch's
    slowest core."""
    if not stats or len(stats) < 2 or not all(isinstance(s.get("cycles"), dict) for s in stats):
        return None
    total: dict[str, int] = {}
    slowest = 0
    for a, b in zip(stats, stats[1:]):
        one = _launch_cycles(a, b)
        for k, v in one.items():
            total[k] = total.get(k, 0) + v
        slowest += max(one.values(), default=0)
    return {**total, "max": slowest if total else None}


def _launch_cycles(a: dict, b: dict) -> dict[str, int]:
    """One launch's cycles per core: stats after minus before, over several tiles the slowest tile's."""
    c: dict[str, int] = {}
    for one in _tile_cycles(a, b).values():
        for k, v in one.items():
            c[k] = max(c.get(k, 0), v)
    return c


def _tile_cycles(a: dict, b: dict) -> dict[str, dict[str, int]]:
    """One launch's cycles per tile ("x,y") and core: stats after minus before. A core's `cycles` are its retired
    instructions (cumulative) plus its stall cycles since its last release, so the stalls of the previous launch
    (`stall_cycles` before) are added back."""
    # a launch over several tiles (the emulated chip's `tiles`): the tiles that ran; the stats before the chip's first
    # many-tile launch are the device's own tile's alone
    own = f"{layout.TILE_XY[0]},{layout.TILE_XY[1]}"
    before = a.get("tiles") or {own: a}
    pairs = [(k, before.get(k, {}), t) for k, t in b["tiles"].items()] if "tiles" in b else [(own, a, b)]
    out: dict[str, dict[str, int]] = {}
    for xy, ta, tb in pairs:
        if ta and ta.get("instructions") == tb.get("instructions"):
            continue                                     # a tile this launch did not use
        stall0 = ta.get("stall_cycles") or {}
        out[xy] = {k: int(v) - int(ta.get("cycles", {}).get(k, 0)) + int(stall0.get(k, 0))
                   for k, v in tb["cycles"].items()}
    return out


def tile_cycles(stats: tuple | None) -> dict[str, dict[str, int]] | None:
    """Per tile ("x,y") of a launch over several tiles, each core's cycles from its release to its last instruction
    (summed over a staged kernel's launches, as measured_cycles): which tile and core finished last. TT_DUMP's
    trace.json records the device's first tile only; None for a one-tile kernel or without a cycle model."""
    if not stats or len(stats) < 2 or not all(isinstance(s.get("cycles"), dict) for s in stats):
        return None
    total: dict[str, dict[str, int]] = {}
    for a, b in zip(stats, stats[1:]):
        for xy, one in _tile_cycles(a, b).items():
            t = total.setdefault(xy, {})
            for k, v in one.items():
                t[k] = t.get(k, 0) + v
    return total if len(total) > 1 else None


def record_cycles(meta: dict, stats: tuple | None) -> dict | None:
    """The emulated cycles of one launch into the kernel's report.json (TT_DUMP): `measured_cycles` per core and
    `emulated_cycles` (the slowest core) next to `predicted_cycles`."""
    mc = measured_cycles(stats)
    rep = meta.get("report")
    if mc is not None and rep and Path(rep).exists():
        r = json.loads(Path(rep).read_text())
        r["measured_cycles"], r["emulated_cycles"] = mc, mc["max"]
        if (tiles := tile_cycles(stats)) is not None:
            r["tile_cycles"] = tiles
        dump.replace_text(Path(rep), json.dumps(r, indent=1))
        txt = Path(rep).with_suffix(".txt")
        if txt.exists():
            dump.replace_text(txt, txt.read_text() + cycles_line(mc, r.get("predicted_cycles"))
                              + (tiles_line(tiles) if tiles is not None else ""))
    return mc


def cycles_line(mc: dict, predicted=None) -> str:
    """report.txt's line (and DEBUG=2's, tt_backend/debug.py) for one launch's emulated cycles."""
    cores = ", ".join(f"{k} {v}" for k, v in mc.items() if k != "max")
    return (f"emulated cycles: {mc['max']} (slowest core; {cores})"
            + ("" if predicted is None else f"; predicted compute cycles {predicted}") + "\n")


def tiles_line(tiles: dict[str, dict[str, int]]) -> str:
    """report.txt's line for a launch over several tiles: each tile's last core to finish, slowest tile first."""
    ends = sorted(((max(c.values()), xy, max(c, key=c.get)) for xy, c in tiles.items()), reverse=True)
    return "per tile (cycles to its last core's end): " + ", ".join(f"{xy} {n} {core}" for n, xy, core in ends) + "\n"


def check(meta: dict, buffers_before: list[bytes], buffers_after: list[bytes], stats: tuple | None = None) -> dict:
    """Measured error of one launch: the kernel's AST run by tinygrad's CPU device on the bytes the TT kernel read
    (`buffers_before`, plan buffer order = ascending slot), vs what the device wrote (`buffers_after`), relative L2
    over every output buffer: `measured_error` against the program in float32 with correctly rounded sums
    (cpu_reference.exact_sums; what TT_ERR_BUDGET is defined against), `measured_error_cpu32` against tinygrad's own
    float32 program (its summation order), `measured_error_f64` against the program widened to float64 (None when
    tinygrad cannot widen it). `float32_error_f64`: tinygrad's float32 program's own error against float64."""
    m = meta["check"]
    ast = cpu_reference.unpack_ast(m["ast"])
    dts = cpu_reference.params(ast)
    k_of = {b["slot"]: k for k, b in enumerate(meta["buffers"])}
    raw = {slot: buffers_before[k_of[slot]] for slot in dts}
    outs = sorted(meta["outs"])
    got = np.concatenate([cpu_reference.values(buffers_after[k_of[s]], dts[s]).astype(np.float64) for s in outs])

    def reference(a) -> np.ndarray | None:
        if a is None:
            return None
        ref = cpu_reference.run(a, raw, dts)
        return np.concatenate([ref[s].astype(np.float64) for s in outs])

    in32 = cpu_reference.round_bf16_casts(ast)
    ref, ref32, ref64 = (reference(a) for a in (cpu_reference.exact_sums(in32), in32, cpu_reference.widen(ast)))
    err, mx = rel_error(got, ref)
    err32 = rel_error(got, ref32)[0]
    err64 = rel_error(got, ref64)[0] if ref64 is not None else None
    # how far float32 itself is from the float64 result on these data: large under cancellation, where no engine's
    # float32 arithmetic can meet a budget below it
    ref_err = rel_error(ref32, ref64)[0] if ref64 is not None else None
    res = {"kernel": meta["name"], "budget": m["budget"], "predicted_error": m["predicted_error"],
           "measured_error": err, "measured_max_rel": mx, "measured_error_cpu32": err32, "measured_error_f64": err64,
           "float32_error_f64": ref_err,
           "measured_cycles": measured_cycles(stats), "predicted_cycles": m.get("predicted_cycles"),
           "engines": m.get("engines")}
    CHECKS.append(res)
    rep = meta.get("report")
    if rep and Path(rep).exists():
        r = json.loads(Path(rep).read_text())
        r["measured_error"], r["measured_max_rel"], r["measured_error_f64"] = err, mx, err64
        r["measured_cycles"] = res["measured_cycles"]
        if res["measured_cycles"] is not None:
            r["emulated_cycles"] = res["measured_cycles"]["max"]
        r.setdefault("checks", []).append({"measured_error": err, "measured_max_rel": mx, "measured_error_f64": err64})
        dump.replace_text(Path(rep), json.dumps(r, indent=1))
        txt = Path(rep).with_suffix(".txt")
        if txt.exists():
            f64 = "" if err64 is None else f", {err64:.3e} against float64"
            dump.replace_text(txt, txt.read_text() + f"measured error (TT_CHECK, tinygrad CPU reference): {err:.3e} "
                              f"(max elementwise {mx:.3e}){f64}\n"
                              + (cycles_line(res["measured_cycles"], r.get("predicted_cycles"))
                                 if res["measured_cycles"] else ""))
    return res
