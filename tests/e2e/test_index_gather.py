"""Gathers by loaded indices (lowering/index.py LOAD; lowering/frontend.py lower_ast's load collapse): indexing a tensor
with tensors (`x[i, j]`, `gather`, an embedding lookup) reaches the backend as a sum over the indexed axis of
(index == arange) * x; the frontend collapses it as tinygrad's codegen does, so the reader fetches each element once at
the loaded index (out-of-range indices read 0, as tinygrad's gate says) instead of a reduction over the whole axis.

Per case: the kernel that reads the indexed tensor is an elementwise kernel whose stream loads its index from the
index buffer (not a reduction), and the program on TT equals tinygrad's CPU device bit for bit (only moves: no
rounding), on random data and random indices (negative ones wrap, as __getitem__ defines).
"""
from __future__ import annotations

import json

import numpy as np
import pytest

from tinygrad import Tensor, dtypes
from tinygrad.uop.ops import Ops

from tt_backend.lowering.families.elementwise import ElementwisePlan
from tt_backend.lowering.select import lower

rng = np.random.default_rng(5)
REF = "CPU"


def _idx(lo, hi, shape, dt=np.int32):
    return rng.integers(lo, hi, shape).astype(dt)


# name, fn(x, *indices), x shape, index arrays
CASES = [
    ("getitem_2d", lambda x, i, j: x[i, j], (7, 9), [_idx(-7, 7, (5, 1)), _idx(-9, 9, (1, 4))]),
    ("getitem_rows", lambda x, i: x[i], (40, 33), [_idx(0, 40, (70,))]),                     # embedding-like
    ("getitem_mid", lambda x, i: x[:, i, 1:], (3, 6, 5), [_idx(-6, 6, (2, 3))]),
    ("gather", lambda x, i: x.gather(1, i), (6, 50), [_idx(0, 50, (6, 37))]),
    ("int8_index", lambda x, i: x[i.cast(dtypes.int8)], (20, 3), [_idx(-20, 20, (11,))]),
]
IDS = [c[0] for c in CASES]


@pytest.mark.parametrize("name,fn,shape,indices", CASES, ids=IDS)
def test_lowered_as_gather(name, fn, shape, indices):
    x = Tensor(rng.standard_normal(shape).astype(np.float32), device=REF).realize()
    ins = [Tensor(i, device=REF).realize() for i in indices]
    plans = [lower(c.src[0], f"k{n}") for n, c in enumerate(fn(x, *ins).schedule_linear().src)
             if c.op is Ops.CALL and c.src[0].op is Ops.SINK]
    loaded = [p for p in plans if any(s.index_loads for s in p.inputs)]
    assert loaded, f"{name}: no kernel gathers by a loaded index ({[type(p).__name__ for p in plans]})"
    assert all(isinstance(p, ElementwisePlan) for p in loaded)
    for p in loaded:
        src = p.render()["brisc"]
        for slot in {slot for s in p.inputs for slot in s.index_loads}:
            assert f"static inline uint32_t tt_ld{slot}(uint32_t e)" in src


@pytest.mark.needs_cc
@pytest.mark.parametrize("name,fn,shape,indices", CASES, ids=IDS)
def test_matches_cpu(name, fn, shape, indices, serial_compile):
    data = rng.standard_normal(shape).astype(np.float32)
    got = fn(Tensor(data, device="TT"), *[Tensor(i, device="TT") for i in indices]).numpy()
    ref = fn(Tensor(data, device=REF), *[Tensor(i, device=REF) for i in indices]).numpy()
    assert got.shape == ref.shape
    np.testing.assert_array_equal(got.view(np.uint32), ref.view(np.uint32), err_msg=name)


@pytest.mark.needs_cc
def test_reader_too_large_for_its_slot_is_rebuilt_compact(serial_compile, monkeypatch, tmp_path):
    """tinygrad's test_slice_fancy_indexing_dim_inject_and_collapse case x[None, j, 2, o, None]: its reduction reader
    (the reduction walk's datum table, every loaded-index helper inlined at each of its ~100 calls in the index math)
    was ~18.4 kB, over the 16 kB brisc slot. The readers have shrunk since (14,796 B, the compact one 12,504 B), so
    the slot is narrowed to 13,600 B, between the two: tt_backend/ops_tt.py compile_stage rebuilds the reader compact, the
    kernel's report says so, and the result is still tinygrad's CPU device's, bit for bit."""
    from tt_backend.chip import layout
    monkeypatch.setattr(layout, "IMAGE_SLOT_SIZE", 13_600)
    data = rng.standard_normal((2, 5, 6, 5, 3, 4)).astype(np.float32)
    j, o = _idx(0, 1, (1, 3, 1, 1, 1, 1)), _idx(0, 4, (2, 1, 1, 5, 1, 1))
    fn = lambda x, j, o: x[None, j, 2, o, None]
    monkeypatch.setenv("TT_DUMP", str(tmp_path))
    got = fn(*(Tensor(a, device="TT") for a in (data, j, o))).numpy()
    monkeypatch.delenv("TT_DUMP")
    ref = fn(*(Tensor(a, device=REF) for a in (data, j, o))).numpy()
    np.testing.assert_array_equal(got.view(np.uint32), ref.view(np.uint32))
    reports = [json.loads(p.read_text()) for p in tmp_path.glob("*/report.json")]
    compact = [r for r in reports if r.get("compact_reader")]
    assert len(compact) == 1 and "brisc image needs" in compact[0]["compact_reader"]
