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
(TT_CHECK=1: the float32 reference of a launched kernel from its real buffers, and the measured error, written into
report.json).
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from tt_backend.fpu_reduce_eval import fpu_sums
from tt_backend.lowering.dag import ValueDAG, VNode
from tt_backend.lowering.index import IndexExpr
from tt_backend.lowering.placement.choice import FpuOp, compile_split, split
from tt_backend.lowering.placement.placer import Placer
from tt_backend.lowering.placement.reference import SAMPLE_DISTS, reference, rel_error
from tt_backend.chip.numerics import formats as F
from tt_backend.chip.numerics import fpu_math as fm
from tt_backend.chip.numerics.dst import Dst
from tt_backend.chip.numerics.sfpu.functional import FunctionalSFPU
from tt_backend.chip.errors import TTError
from tt_backend.chip.isa import decode
from tt_backend import dump

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


def evaluate(dag: ValueDAG, choices: dict, inputs: list[np.ndarray], n_in: int,
             in_dtypes: list[str] | None = None) -> np.ndarray:
    """The kernel's output values under `choices` (node -> placement.Choice; absent = SFPU)."""
    in_dtypes = in_dtypes or _input_dtypes(dag, n_in)
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

def placer(budget: float | None = None, spec: str | None = None, seed: int = 0) -> Placer:
    """The placer ops_tt hands to lowering.select.lower: the budget, the TT_PLACE pins (`spec`), this module's
    evaluator and the FPU sums' error model, samples drawn like the user's data (TT_SAMPLE_DIST, default normal,
    uniform, positive; the worst counts)."""
    dists = tuple(d.strip() for d in os.environ.get("TT_SAMPLE_DIST", "").split(",") if d.strip()) or SAMPLE_DISTS
    if unknown := [d for d in dists if d not in SAMPLE_DISTS]:
        raise TTError(f"TT_SAMPLE_DIST: {', '.join(map(repr, unknown))} unknown; expected a comma list of "
                      f"{', '.join(SAMPLE_DISTS)}")
    return Placer(budget, spec, evaluator_for, fpu_sums, dists, seed)


# ------------------------------------------------------------------------------------------------ TT_CHECK

def check_meta(lk, pl) -> dict:
    """What TT_CHECK needs at launch time, JSON-able: the original graph and each stream's index expressions
    (IndexExpr.to_json; None where a stream has no validity or computed value)."""
    return {"dag": [[x.op, x.dtype, list(x.srcs), _json_arg(x.arg)] for x in lk.dag.nodes], "out": lk.dag.out,
            "ranges": list(lk.ranges),
            "inputs": [{"buf": lk.buf_index(s.slot), "dtype": s.dtype, "index": s.index.to_json(),
                        "valid": _expr_json(s.valid), "value": _expr_json(s.value)} for s in lk.inputs],
            "output": {"buf": lk.buf_index(lk.output.slot), "dtype": lk.output.dtype,
                       "index": lk.output.index.to_json()},
            "predicted_error": pl.predicted_error if pl is not None else None,
            "predicted_cycles": pl.cycles.get("kernel") if pl is not None else None,
            "budget": pl.budget if pl is not None else None}


def _expr_json(e: IndexExpr | None) -> list | None:
    return None if e is None else e.to_json()


def _expr(j: list | None) -> IndexExpr | None:
    return None if j is None else IndexExpr.from_json(j)


def _json_arg(a):
    if isinstance(a, float) and not np.isfinite(a):
        return {"float": repr(a)}
    return a


def _arg(a):
    return float(a["float"]) if isinstance(a, dict) and "float" in a else a


def dag_from_meta(m: dict) -> ValueDAG:
    return ValueDAG([VNode(i, op, dt, tuple(srcs), _arg(arg)) for i, (op, dt, srcs, arg) in enumerate(m["dag"])],
                    m["out"])


NP_OF = {"float32": np.float32, "int32": np.int32, "bool": np.bool_}
# the narrow dtypes: read at their width, widened to the 32-bit lane values the graph computes with
NARROW_NP = {"int8": np.int8, "uint8": np.uint8, "int16": np.int16, "uint16": np.uint16, "float16": np.float16}


def buffer_values(raw: bytes, dtype: str) -> np.ndarray:
    if dtype == "bfloat16":
        return (np.frombuffer(raw, np.uint16).astype(np.uint32) << 16).view(np.float32)
    if dtype in NARROW_NP:
        v = np.frombuffer(raw, NARROW_NP[dtype])
        return v.astype(np.float32 if v.dtype.kind == "f" else np.int32)
    return np.frombuffer(raw, NP_OF[dtype]).copy()


def gather(index: IndexExpr, valid: IndexExpr | None, ranges: list[int], src: np.ndarray) -> np.ndarray:
    """src read at every point of the iteration space (row-major), 0 where `valid` is false."""
    idx = index.flat(ranges).astype(np.int64)
    ok = valid.flat(ranges).astype(bool) if valid is not None else np.ones(idx.size, bool)
    return np.where(ok, src[np.where(ok, idx, 0)], np.zeros((), src.dtype))


def measured_cycles(stats: tuple | None) -> dict | None:
    """Per-core cycles of one launch from the emulator's cycle model (runtime/emu/cycles.py): stats after minus
    before; `max` = the slowest core (the kernel's time, RISC-V reader/writer included). A core's `cycles` are its
    retired instructions (cumulative) plus its stall cycles since its last release, so the stalls of the previous
    launch (`stall_cycles` before) are added back."""
    if not stats or not all(isinstance(s.get("cycles"), dict) for s in stats):
        return None
    a, b = stats
    stall0 = a.get("stall_cycles") or {}
    c = {k: int(v) - int(a["cycles"].get(k, 0)) + int(stall0.get(k, 0)) for k, v in b["cycles"].items()}
    return {**c, "max": max(c.values()) if c else None}


def record_cycles(meta: dict, stats: tuple | None) -> dict | None:
    """The emulated cycles of one launch into the kernel's report.json (TT_DUMP): `measured_cycles` per core and
    `emulated_cycles` (the slowest core) next to `predicted_cycles`."""
    mc = measured_cycles(stats)
    rep = meta.get("report")
    if mc is not None and rep and Path(rep).exists():
        r = json.loads(Path(rep).read_text())
        r["measured_cycles"], r["emulated_cycles"] = mc, mc["max"]
        dump.replace_text(Path(rep), json.dumps(r, indent=1))
        txt = Path(rep).with_suffix(".txt")
        if txt.exists():
            dump.replace_text(txt, txt.read_text() + cycles_line(mc, r.get("predicted_cycles")))
    return mc


def cycles_line(mc: dict, predicted=None) -> str:
    """report.txt's line (and DEBUG=2's, tt_backend/debug.py) for one launch's emulated cycles."""
    cores = ", ".join(f"{k} {v}" for k, v in mc.items() if k != "max")
    return (f"emulated cycles: {mc['max']} (slowest core; {cores})"
            + ("" if predicted is None else f"; predicted compute cycles {predicted}") + "\n")


def _stream_values(s: dict, ranges: list[int], buffers_before: list[bytes]) -> np.ndarray:
    if s["value"] is not None:     # a computed stream: the value is an expression of the ranges (argmax's k)
        return _expr(s["value"]).flat(ranges).astype(NP_OF.get(s["dtype"], np.float32))
    return gather(_expr(s["index"]), _expr(s["valid"]), ranges, buffer_values(buffers_before[s["buf"]], s["dtype"]))


def check(meta: dict, buffers_before: list[bytes], out_raw: bytes, stats: tuple | None = None) -> dict:
    """Measured error of one launch: the float32 reference of the original graph on the kernel's real inputs (read
    before the launch) vs the output the device wrote."""
    m = meta["check"]
    dag = dag_from_meta(m)
    ranges = m["ranges"]
    xs = [_stream_values(s, ranges, buffers_before) for s in m["inputs"]]
    ref = np.broadcast_to(reference(dag, xs, tuple(ranges) or None), (int(np.prod(ranges or [1])),))
    o = m["output"]
    out_all = buffer_values(out_raw, o["dtype"])
    got = gather(_expr(o["index"]), None, ranges, out_all)
    err, mx = rel_error(got, ref)
    res = {"kernel": meta["name"], "budget": m["budget"], "predicted_error": m["predicted_error"],
           "measured_error": err, "measured_max_rel": mx, "measured_cycles": measured_cycles(stats),
           "predicted_cycles": m.get("predicted_cycles")}
    CHECKS.append(res)
    rep = meta.get("report")
    if rep and Path(rep).exists():
        r = json.loads(Path(rep).read_text())
        r["measured_error"], r["measured_max_rel"] = err, mx
        r["measured_cycles"] = res["measured_cycles"]
        if res["measured_cycles"] is not None:
            r["emulated_cycles"] = res["measured_cycles"]["max"]
        r.setdefault("checks", []).append({"measured_error": err, "measured_max_rel": mx})
        dump.replace_text(Path(rep), json.dumps(r, indent=1))
        txt = Path(rep).with_suffix(".txt")
        if txt.exists():
            dump.replace_text(txt, txt.read_text() + f"measured error (TT_CHECK): {err:.3e} (max elementwise {mx:.3e})\n"
                           + (cycles_line(res["measured_cycles"], r.get("predicted_cycles"))
                              if res["measured_cycles"] else ""))
    return res
