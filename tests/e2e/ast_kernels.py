"""Hand-built kernel ASTs run on Device TT: what tinygrad's scheduler does not emit today (several STOREs in one kernel,
a STORE gated by loaded data) but a backend must still take."""
from types import SimpleNamespace

import numpy as np
from tinygrad import Device
from tinygrad.uop.ops import UOp


def run_ast(ast: UOp, arrays: list[np.ndarray], device: str) -> list[np.ndarray]:
    """Lower, compile and launch one kernel AST on `device` with the given buffers (tinygrad slot k holds arrays[k]);
    their contents after."""
    from tt_backend.ops_tt import TTProgram, tt_to_program
    dev = Device[device]
    prg = tt_to_program(ast, dev.renderer)
    bufs = []
    for a in arrays:
        b = dev.allocator.alloc(a.nbytes)
        dev.allocator._copyin(b, memoryview(a.tobytes()))
        bufs.append(b)
    TTProgram(dev, SimpleNamespace(name="k", lib=prg.src[-1].arg, profile_key=None))(*bufs)
    out = []
    for a, b in zip(arrays, bufs):
        mv = memoryview(bytearray(a.nbytes))
        dev.allocator._copyout(mv, b)
        out.append(np.frombuffer(mv, a.dtype).copy().reshape(a.shape))
        dev.allocator.free(b, a.nbytes)
    return out
