"""Kernels with tinygrad Variables (tt_backend/bound_variables.py): a symbolic `start_pos` as a KV cache uses it, in
range sizes, index expressions and masks, on one chip and sharded over two. Lowered at launch once per bound value;
compared exactly with numpy (copies, pads and one fp32 multiply: nothing to round differently)."""
from __future__ import annotations

import numpy as np
import pytest

from tinygrad import Tensor, TinyJit, Variable
from tinygrad.uop.ops import UOp

rng = np.random.default_rng(7)
MAX_CONTEXT = 8

pytestmark = [pytest.mark.needs_cc, pytest.mark.usefixtures("serial_compile")]


def cache_update(cache: Tensor, new: Tensor, start_pos) -> Tensor:
    """The first start_pos rows of the cache (scaled), the new row after them, zeros to MAX_CONTEXT."""
    keys = (cache.shrink((None, (0, start_pos), None)) * 3).cat(new, dim=1).contiguous()
    return keys.pad((None, (0, MAX_CONTEXT - start_pos - 1), None)).contiguous()


def want(cache: np.ndarray, new: np.ndarray, pos: int) -> np.ndarray:
    out = np.zeros_like(cache)
    out[:, :pos], out[:, pos] = cache[:, :pos] * 3, new[:, 0]
    return out


@pytest.mark.parametrize("devices", [("TT:emu:5",), ("TT:emu:5", "TT:emu:6"),
                                     pytest.param(("TT:ttsim:5", "TT:ttsim:6"), marks=pytest.mark.ttsim)],
                         ids=["one chip", "sharded", "sharded on ttsim"])
def test_symbolic_start_pos_matches_numpy(monkeypatch, devices):
    from tt_backend import bound_variables
    bound, real = [], bound_variables.bind
    monkeypatch.setattr(bound_variables, "bind", lambda ast, values: bound.append(values) or real(ast, values))
    cache = rng.standard_normal((2, MAX_CONTEXT, 4)).astype(np.float32)
    new = rng.standard_normal((2, 1, 4)).astype(np.float32)
    step = TinyJit(lambda c, n, pos: cache_update(c, n, pos).realize())
    for pos in (3, 5, 3, 6):   # the JIT captures at the second call and replays the kernels with new values
        c, n = Tensor(cache, device=devices[0]), Tensor(new, device=devices[0])
        if len(devices) > 1: c, n = c.shard(devices, axis=0), n.shard(devices, axis=0)
        got = step(c.realize(), n.realize(), Variable("start_pos", 1, MAX_CONTEXT - 1).bind(pos)).numpy()
        np.testing.assert_array_equal(got, want(cache, new, pos))
    # two kernels with the variable, each lowered once per distinct value (3, 5, 6) for all chips: the repeated 3 is
    # not lowered again
    assert sorted(b["start_pos"] for b in bound) == [3, 3, 5, 5, 6, 6]


def test_bundle_round_trip_and_damage():
    from tt_backend import bound_variables
    from tt_backend.chip.errors import TTError
    pos = UOp.variable("start_pos", 1, 7, param=True)     # a Variable as a kernel's AST holds it
    sink = (pos * 2 + 1).sink()
    ast, names = bound_variables.unpack(bound_variables.pack(sink, ["start_pos"]))
    assert ast is sink and names == ["start_pos"]
    assert bound_variables.bind(ast, {"start_pos": 4}).simplify().src[0].arg == 9
    with pytest.raises(TTError, match="damaged"):
        bound_variables.unpack(bound_variables.BOUND_MAGIC + b"\x05\0\0\0{}")
