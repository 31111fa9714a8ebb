"""TT_CHECK's independent reference: the kernel's own tinygrad AST, compiled and run by tinygrad's CPU device on the
bytes the TT kernel read (nothing of the lowering: not its value DAG, not its index expressions, so a lowering bug
shows as an error instead of being reproduced by the reference).

References per launch: `run(exact_sums(round_bf16_casts(ast)), ...)`, the program in float32 with every float sum
correctly rounded (the reference TT_ERR_BUDGET is defined against, docs/placement.md §1: bfloat16 through tinygrad's
emulation, the program's explicit casts to bfloat16 rounded, sums accumulated in float64 and rounded once, as the
placer's own reference lowering.placement.reference.reduce_exact does); `run(round_bf16_casts(ast), ...)`, the same
with tinygrad's own float32 summation order (one order among many: under cancellation it is itself far from the
correctly rounded sum); and `run(widen(ast), ...)`, every float of the program in float64 (inputs converted exactly),
where tinygrad's CPU device renders it (`widen` returns None for ASTs with a BITCAST, whose meaning depends on the
width).
"""
from __future__ import annotations

import base64
import pickle
from dataclasses import replace

import numpy as np
from tinygrad.codegen import to_program
from tinygrad.device import Buffer, Device
from tinygrad.dtype import DType, dtypes
from tinygrad.engine.realize import get_runtime
from tinygrad.helpers import Context
from tinygrad.uop.ops import Ops, UOp

WIDENED = (dtypes.float32, dtypes.bfloat16, dtypes.float16)


def pack_ast(ast: UOp) -> str:
    """The SINK AST as text for the kernel bundle's JSON head (tinygrad's compile workers make the bundle, the launch
    reads it in the main process)."""
    return base64.b64encode(pickle.dumps(ast)).decode()


def unpack_ast(text: str) -> UOp:
    return pickle.loads(base64.b64decode(text))


def params(ast: UOp) -> dict[int, DType]:
    """slot -> element dtype of each buffer the kernel takes."""
    return {u.arg.slot: u.arg.dtype for u in ast.toposort() if u.op is Ops.PARAM}


def widen(ast: UOp) -> UOp | None:
    """The same AST with float32/bfloat16/float16 values, buffers and constants in float64, the program's explicit
    casts to bfloat16 still rounding (through float32: `bf16_rne`); None when it has a BITCAST (reinterpreting bits is
    width-dependent)."""
    if any(u.op is Ops.BITCAST for u in ast.toposort()):
        return None
    new: dict[UOp, UOp] = {}
    for u in ast.toposort():
        arg = u.arg
        if u.op is Ops.PARAM and arg.dtype in WIDENED:
            arg = replace(arg, dtype=dtypes.float64)
        v = u.replace(dtype=dtypes.float64 if u.dtype in WIDENED else u.dtype, arg=arg,
                      src=tuple(new[s] for s in u.src))
        if u.op is Ops.CAST and u.dtype == dtypes.bfloat16:
            v = bf16_rne(v.src[0]).cast(dtypes.float64)
        new[u] = v
    return new[ast]


def exact_sums(ast: UOp) -> UOp:
    """The AST with every float sum (REDUCE ADD of a float32/bfloat16/float16 value) accumulated in float64 and cast
    back to its dtype: the correctly rounded sum (up to float64's own rounding, 2^-29 of a float32 ulp per term of
    the sum's magnitude), whatever the order; other ops keep their dtype."""
    new: dict[UOp, UOp] = {}
    for u in ast.toposort():
        v = u.replace(src=tuple(new[s] for s in u.src))
        if u.op is Ops.REDUCE and u.arg[0] is Ops.ADD and u.dtype in WIDENED:
            v = v.replace(dtype=dtypes.float64, src=(v.src[0].cast(dtypes.float64), *v.src[1:])).cast(u.dtype)
        new[u] = v
    return new[ast]


def bf16_rne(x: UOp) -> UOp:
    """x rounded to the nearest bfloat16 (ties to even), as a float32 UOp: integer ops on its float32 bits; NaN and
    infinity pass unchanged."""
    bits = x.cast(dtypes.float32).bitcast(dtypes.uint32)
    up = bits + (((bits >> 16) & 1) + 0x7FFF)
    return (bits & 0x7F800000).ne(0x7F800000).where(up, bits).bitwise_and(0xFFFF0000).bitcast(dtypes.float32)


def round_bf16_casts(ast: UOp) -> UOp:
    """The AST with every explicit CAST to bfloat16 rounded to nearest even (`bf16_rne`), so the float32 reference
    keeps the roundings the program asks for. Other bfloat16-typed results (tinygrad types the
    products of a bf16 matmul bf16) stay in float32, as tinygrad's bfloat16 emulation keeps them, rounded only when
    stored: the reference is the program computed in float32, what TT_ERR_BUDGET is defined against."""
    new: dict[UOp, UOp] = {}
    for u in ast.toposort():
        v = u.replace(src=tuple(new[s] for s in u.src))
        if u.op is Ops.CAST and u.dtype == dtypes.bfloat16:
            v = bf16_rne(v.src[0]).cast(dtypes.bfloat16)
        new[u] = v
    return new[ast]


def values(raw: bytes, dt: DType) -> np.ndarray:
    """Buffer bytes -> numpy values (bfloat16 as the float32 it is exactly)."""
    if dt == dtypes.bfloat16:
        return (np.frombuffer(raw, np.uint16).astype(np.uint32) << 16).view(np.float32)
    return np.frombuffer(raw, np.dtype(dt.fmt)).copy()


def run(ast: UOp, raw: dict[int, bytes], source_dtypes: dict[int, DType]) -> dict[int, np.ndarray]:
    """Run `ast` on tinygrad's CPU device with each slot's buffer filled from `raw` (bytes in `source_dtypes`,
    converted when the AST's dtype differs, i.e. a widened AST); returns every buffer's values after the run."""
    want = params(ast)
    bufs = {}
    for slot, dt in want.items():
        v = values(raw[slot], source_dtypes[slot])
        with np.errstate(invalid="ignore"):   # signalling-NaN patterns (an output's stale bytes) convert quietly
            init = v.astype(np.dtype(dt.fmt)).tobytes() if dt != source_dtypes[slot] else raw[slot]
        bufs[slot] = Buffer("CPU", v.size, dt, initial_value=init).ensure_allocated()
    # bfloat16 through tinygrad's own float emulation: the host's clang may have no __bf16 for tinygrad's CPU target
    with Context(EMULATED_DTYPES="bfloat16"):
        prg = to_program(ast, Device["CPU"].renderer)
    global_size, local_size = prg.arg.launch_dims({})
    get_runtime("CPU", prg)(*[bufs[s]._buf for s in prg.arg.globals], global_size=global_size,
                            local_size=local_size, vals=prg.arg.vals({}))
    Device["CPU"].synchronize()
    return {s: values(bytes(b.as_memoryview()), want[s]) for s, b in bufs.items()}
