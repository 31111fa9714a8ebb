"""Kernels with tinygrad Variables (a symbolic `start_pos`, a bound `Variable("i", lo, hi).bind(v)`).

tinygrad compiles a kernel that uses a Variable once and passes the variable's value at each launch (`vals`, in the
order of `ProgramInfo.vars`). TT kernels take their shapes and index expressions as compile-time constants (tile
counts, L1 layout, the per-core split and the reader's runs all follow from them), so such a kernel is lowered at
launch, once per distinct tuple of values, with each variable replaced by its value; the specialised programs are kept
per compiled kernel, so a JIT replaying the same positions compiles nothing again (and the ELFs of a position seen
before come from the compile cache).

The BINARY of such a kernel carries its AST: BOUND_MAGIC, u32 length of the JSON header (the variables' names in
`vals` order), the header, then the AST pickled (the only serialisation tinygrad's UOps have; tinygrad itself pickles
them to its compile workers).
"""
from __future__ import annotations

import json
import pickle
import struct

from tinygrad.uop.ops import AddrSpace, AxisType, Ops, UOp

from tt_backend.chip.errors import TTError

BOUND_MAGIC = b"TTBVAR1\0"
DEVICE_NUM = "_device_num"    # tinygrad's variable for a DEVICE axis (UOp.variables)


def has_variables(ast: UOp) -> bool:
    """True when the kernel reads a tinygrad Variable other than the chip position (ops_tt.device_variants takes a
    kernel whose only variable is that one ahead of time)."""
    return any(u.op is Ops.PARAM and u.arg.addrspace is AddrSpace.ALU for u in ast.toposort())


def bind(ast: UOp, values: dict[str, int]) -> UOp:
    """The kernel with each Variable (and a DEVICE axis, named DEVICE_NUM) replaced by its value."""
    subs = {}
    for u in ast.toposort():
        if u.op is Ops.PARAM and u.arg.addrspace is AddrSpace.ALU: subs[u] = u.const_like(values[u.expr])
        elif u.op is Ops.RANGE and u.arg[-1] is AxisType.DEVICE: subs[u] = u.const_like(values[DEVICE_NUM])
    bound = ast.substitute(subs)
    # a range's size that depended on a variable (`start_pos + 1`) is now constant arithmetic: fold it, as the
    # lowering reads sizes as constants before tinygrad's symbolic rewrites run (lowering/frontend.py lower_ast)
    sizes = {r: r.replace(src=(r.src[0].simplify(), *r.src[1:])) for r in bound.toposort()
             if r.op is Ops.RANGE and r.src[0].op is not Ops.CONST}
    return bound.substitute(sizes) if sizes else bound


def pack(ast: UOp, names: list[str]) -> bytes:
    head = json.dumps({"vars": names}).encode()
    return BOUND_MAGIC + struct.pack("<I", len(head)) + head + pickle.dumps(ast)


def unpack(lib: bytes) -> tuple[UOp, list[str]]:
    """(the AST, the variables' names in `vals` order)."""
    try:
        (n,) = struct.unpack_from("<I", lib, len(BOUND_MAGIC))
        start = len(BOUND_MAGIC) + 4
        names = json.loads(lib[start:start + n])["vars"]
        ast = pickle.loads(lib[start + n:])
    except (struct.error, ValueError, KeyError, TypeError, pickle.UnpicklingError, EOFError) as e:
        raise TTError(f"damaged TT kernel with variables ({type(e).__name__}: {e}); compile the kernel again") from e
    if not isinstance(ast, UOp) or ast.op is not Ops.SINK or not isinstance(names, list):
        raise TTError("damaged TT kernel with variables (no SINK AST); compile the kernel again")
    return ast, names
