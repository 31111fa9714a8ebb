"""The elementwise reader's run paths (lowering/families/tile_streams.py RUN_MODES): broadcast, runs, strided, columns.

Per case: the renderer picks the expected mode for the stream it is meant for (gated streams keep the per-datum
gather); the program on TT is bit-identical to tinygrad's reference (PYTHON) device (only exact ops: add, mul by 2, neg, select,
int/bool); and at the plan level the kernel with its run paths writes exactly the bytes the same kernel writes when
every stream is gathered per datum (Stream.coef dropped), on the same random DRAM contents, in fewer reader cycles.
Shapes are mostly not multiples of 32 (partial last tiles, runs that straddle tiles, odd bf16 offsets); buffers both
small enough to stay resident in the staging window and larger (window reloads: dense, sparse, descending; a
transpose's column segments, also with its tiles split over cores; an inverse transpose's, filled in blocks).
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from tinygrad import Tensor, dtypes
from tinygrad.uop.ops import Ops

from tt_backend.lowering.codegen.sources import split
from tt_backend.lowering.families.elementwise import ElementwisePlan
from tt_backend.lowering.families.tile_streams import RUN_MODES, reader_mode
from tt_backend.lowering.select import lower

rng = np.random.default_rng(11)

F32, BF16, I32, BOOL = dtypes.float32, dtypes.bfloat16, dtypes.int32, dtypes.bool
REF = "PYTHON"   # tinygrad's interpreter: the reference (the CPU device's compiler may lack __bf16)


def _data(shape, dt):
    if dt == BOOL:
        return rng.integers(0, 2, shape).astype(np.bool_)
    if dt == I32:
        return rng.integers(-1000, 1000, shape).astype(np.int32)
    x = rng.uniform(-4, 4, shape).astype(np.float32)
    if dt == BF16:   # bf16-exact values, so the host conversion is exact on both devices
        x = (x.view(np.uint32) & 0xFFFF0000).view(np.float32)
    return x


# name, fn, inputs [(shape, dtype)], modes that must appear among the kernel's input streams
CASES = [
    ("col_broadcast", lambda a, b: a + b, [((37, 45), F32), ((37, 1), F32)], {"broadcast", "contiguous"}),
    ("scalar_broadcast", lambda a, b: a * b, [((3100,), F32), ((1,), F32)], {"broadcast"}),   # 4 tiles: slot reuse
    ("row_broadcast", lambda a, b: a - b, [((37, 45), F32), ((1, 45), F32)], {"runs"}),
    ("mid_broadcast", lambda a, b: a + b, [((5, 7, 33), F32), ((5, 1, 33), F32)], {"runs"}),
    ("inner_broadcast_3d", lambda a, b: a + b, [((6, 40, 9), F32), ((6, 40, 1), F32)], {"broadcast"}),
    ("bf16_broadcast", lambda a, b: a + b, [((37, 45), BF16), ((37, 1), BF16)], {"broadcast"}),
    ("slice_unaligned", lambda a: a[:, 3:50] * 2, [((40, 70), F32)], {"runs"}),
    ("slice_congruent", lambda a: a[:, 16:80] * 2, [((48, 80), F32)], {"runs"}),      # straight into the CB slot
    ("slice_1d", lambda a: a[5:2905] + 1.0, [((3000,), F32)], {"runs"}),
    ("bf16_slice", lambda a: -a[:, 1:40], [((37, 45), BF16)], {"runs"}),                # both halfword parities
    ("transpose", lambda a: a.T * 2, [((33, 70), F32)], {"columns"}),
    ("transpose_long_runs", lambda a: a.T * 2, [((50, 60), F32)], {"strided"}),       # runs of 50: strided, resident
    ("transpose_big", lambda a: a.T + 1.0, [((48, 300), F32)], {"columns"}),          # 57600 B > staging window
    ("strided_big", lambda a: a[:, ::2].T + 1.0, [((60, 300), F32)], {"strided"}),    # runs of 60, window reloads
    ("transpose_sparse", lambda a: a.T * 2, [((6, 3000), F32)], {"columns"}),         # 12000-byte step: exact reads
    ("columns_big", lambda a: a.T + 1.0, [((40, 300), F32)], {"columns"}),            # 48000 B: window reloads
    ("columns_descending", lambda a: a.T.flip(1) * 2, [((30, 70), F32)], {"columns"}),
    ("columns_descending_big", lambda a: a.T.flip(1) * 2, [((30, 400), F32)], {"columns"}),
    ("permute_rows", lambda a: a.permute(1, 0, 2) * 2, [((4, 40, 60), F32)], {"runs"}),  # 9600-byte step: exact
    ("flip_big", lambda a: a.flip(0) * 2, [((10000,), F32)], {"strided"}),            # descending, window reloads
    ("step_slice", lambda a: a[::3] * 2, [((3001,), F32)], {"strided"}),
    ("bf16_transpose", lambda a: -a.T, [((21, 50), BF16)], {"columns"}),
    ("int_broadcast", lambda a, b: a + b, [((37, 45), I32), ((37, 1), I32)], {"broadcast"}),
    ("int_transpose", lambda a: a.T + 7, [((20, 41), I32)], {"columns"}),
    ("bool_broadcast", lambda m, a: m.where(a, 0.0), [((37, 1), BOOL), ((37, 45), F32)], {"broadcast"}),
    ("bool_slice", lambda m, a, b: m[:, 2:47].where(a, b), [((30, 50), BOOL), ((30, 45), F32), ((30, 45), F32)],
     {"runs"}),
    ("bool_transpose", lambda m, a: m.T.where(a, -a), [((19, 35), BOOL), ((35, 19), F32)], {"columns"}),
    ("bool_strided", lambda m, a: m[:, ::2].T.where(a, -a), [((60, 70), BOOL), ((35, 60), F32)], {"strided"}),
    ("sparse_broadcast", lambda a, b: a[:, :1] + b, [((20, 3000), F32), ((20, 50), F32)], {"broadcast"}),
    ("pad_stays_gather", lambda a: a.pad(((0, 0), (1, 2))) + 1.0, [((9, 40), F32)], {"gather"}),
    ("short_strided_stays_gather", lambda a: a[:, ::2].T * 2, [((3, 8000), F32)], {"gather"}),  # runs of 3, reloads
    ("short_strided_resident", lambda a: a[:, ::2].T * 2, [((3, 100), F32)], {"strided"}),      # resident buffer
    ("short_columns", lambda a: a.T * 2, [((3, 4000), F32)], {"columns"}),
    # not resident: each column's segment kept in the (grown) window across tiles (column_windows)
    ("permute_columns", lambda a: a.permute(2, 3, 0, 1) * 2, [((5, 7, 12, 40), F32)], {"columns"}),   # runs of 35
    ("bf16_columns_big", lambda a: -a.T, [((64, 600), BF16)], {"columns"}),
    ("int_columns_big", lambda a: a.T + 7, [((40, 500), I32)], {"columns"}),
    ("bool_columns_big", lambda m, a: m.T.where(a, -a), [((60, 700), BOOL), ((700, 60), F32)], {"columns"}),
    # inverse transposes: a tile lies inside one long run, every datum in another column (input row); the segments
    # are filled from contiguous blocks of rows (COLUMN_BLOCK_BYTES)
    # (rows more than SEGMENTS_MIN_STEP bytes long)
    ("inverse_transpose", lambda a: a.T * 2, [((1100, 150), F32)], {"columns"}),
    ("inverse_permute", lambda a: a.permute(3, 4, 0, 1, 2) * 2, [((4, 5, 15, 10, 16), F32)], {"columns"}),
    ("bf16_inverse_transpose", lambda a: -a.T, [((300, 300), BF16)], {"columns"}),
    ("int_inverse_transpose", lambda a: a.T + 7, [((300, 150), I32)], {"columns"}),
    ("bool_inverse_transpose", lambda m, a: m.T.where(a, -a), [((300, 520), BOOL), ((1,), F32)], {"columns"}),
    # an inverse permute of a larger buffer: its tiles walked down a grid's columns (tile_streams.tile_grid)
    ("grid_inverse_permute", lambda a: a.permute(3, 0, 1, 2) + 7, [((4, 16, 16, 40), I32)], {"columns"}),
    ("slice_big_unaligned", lambda a: a[:, 3:50] * 2, [((200, 70), F32)], {"runs"}),    # 56000 B: window reloads
    ("broadcast_big", lambda a, b: a + b, [((9000, 1), F32), ((9000, 3), F32)], {"broadcast"}),
    ("short_broadcast", lambda a, b: a + b, [((300, 2), F32), ((300, 1), F32)], {"broadcast"}),
    # a value of the scalar alone is computed once per tile in the SFPU setup, the scalar's tile then only 64 datums
    # (HEAD_DATUMS); not where the last tile's row step 0 has pads (3100 = 3 * 1024 + 28)
    ("scalar_hoisted", lambda a, b: a + (b + 1.0).maximum(0.5), [((3000,), F32), ((1,), F32)], {"broadcast"}),
    ("scalar_hoisted_2d", lambda a, b: a + (b + 1.0).maximum(0.5), [((37, 45), F32), ((1, 1), F32)], {"broadcast"}),
    ("scalar_short_tail", lambda a, b: a + (b + 1.0).maximum(0.5), [((3100,), F32), ((1,), F32)], {"broadcast"}),
    # a bf16 head reaches Dst through the math thread's ELWADDs on every tile: it is sent and unpacked per tile
    ("scalar_hoisted_bf16", lambda a, b: a + (b + 1.0).maximum(0.5), [((3000,), BF16), ((1,), BF16)], {"broadcast"}),
    # one element of a 160-byte buffer: a head whose window load is more than one NoC flit
    ("element_hoisted", lambda a, b: a + (b[5] + 1.0).maximum(0.5), [((3000,), F32), ((40,), F32)], {"broadcast"}),
]
IDS = [c[0] for c in CASES]


def _tensors(specs, arrays, device):
    return [Tensor(x, device=device) if dt != BF16 else Tensor(x, device=device).cast(BF16).realize()
            for x, (_, dt) in zip(arrays, specs)]


def _plans(fn, specs) -> list[ElementwisePlan]:
    """The elementwise plans tinygrad schedules for fn (all-SFPU lowering: the reader does not depend on it)."""
    ins = [t.realize() for t in _tensors(specs, [_data(s, dt) for s, dt in specs], REF)]
    out = []
    for i, call in enumerate(c for c in fn(*ins).schedule_linear().src if c.op is Ops.CALL):
        if call.src[0].op is Ops.SINK:
            plan = lower(call.src[0], f"k{i}")
            if isinstance(plan, ElementwisePlan):
                out.append(plan)
    return out


@pytest.mark.parametrize("name,fn,specs,modes", CASES, ids=IDS)
def test_mode_chosen(name, fn, specs, modes):
    plans = _plans(fn, specs)
    assert plans, "no elementwise kernel"
    got = {reader_mode(p, j) for p in plans for j in range(len(p.inputs))}
    assert modes <= got, f"{name}: modes {got}, expected {modes}"
    for p in plans:
        src = p.render()["brisc"]
        for j in range(len(p.inputs)):
            assert f"{reader_mode(p, j)} */" in src.split(f"/* input {j}:")[1].split("\n")[0]


@pytest.mark.needs_cc
@pytest.mark.parametrize("name,fn,specs,modes", CASES, ids=IDS)
def test_bit_identical_to_cpu(name, fn, specs, modes, target):
    arrays = [_data(s, dt) for s, dt in specs]
    got = fn(*_tensors(specs, arrays, f"TT:{target}"))
    ref = fn(*_tensors(specs, arrays, REF))
    if got.dtype == BF16:
        got, ref = got.cast(F32), ref.cast(F32)
    g, r = got.numpy(), ref.numpy()
    assert g.shape == r.shape and g.dtype == r.dtype
    np.testing.assert_array_equal(g.view(np.uint8), r.view(np.uint8), err_msg=name)


@pytest.mark.parametrize("name,head", [("scalar_hoisted", True), ("scalar_hoisted_2d", True),
                                       ("scalar_short_tail", False), ("scalar_broadcast", False),
                                       ("scalar_hoisted_bf16", True), ("element_hoisted", True)])
def test_broadcast_head(name, head):
    """The scalar's stream is read as a 64-datum head exactly where its value is hoisted and the body never loads it;
    beside it the contiguous input's reads stay in flight (mover_cost.reads_in_flight), and its resident window's
    load is issued before the first tile's reads where it is one NoC flit (head_first: the first head fill then waits
    for it alone), after them where it is larger (it would delay them). The
    head (a scalar of the whole kernel) is sent and unpacked, and the SFPU setup run, for the core's first tile only
    (CASES: 2 and 3 tiles against the CPU)."""
    _, fn, specs, _ = CASES[IDS.index(name)]
    (plan,) = _plans(fn, specs)
    assert bool(plan.head_inputs) == head and (len(plan.sfpu.setup) > 1 + 2) == head
    src = plan.render()["brisc"]
    assert ("only the SFPU setup reads this tile" in src) == head
    assert ("tt_noc_read_wait_mark" in src) == head
    kmain = src.split("int kmain(void)")[1]
    assert ("tt_window_span_issue(" in kmain) == head
    if head:
        loop = kmain.split("for (uint32_t t = ")[1]
        window, reads = loop.index("tt_window_span_issue("), loop.index("read_issue")
        assert max(window, reads) < loop.index("issued[put]")
        (j,) = plan.head_inputs
        assert (window < reads) == (plan.buffers[plan.inputs[j].buf].nbytes <= 64)
    once = head and BF16 not in [dt for _, dt in specs]     # a bf16 head is moved to Dst per tile by the FPU
    assert ("sent for the first one only" in src) == once
    compute = plan.render()["trisc1"]
    # a setup of constants or scalars (more than the lane-enable reset) runs once
    assert ("kept in LReg11-14 (setup_once)" in compute) == (len(plan.sfpu.setup) > 1)
    assert ("sent and unpacked once (setup_once)" in compute) == once


@pytest.mark.needs_cc
@pytest.mark.parametrize("name", ["scalar_hoisted", "scalar_hoisted_bf16"])
def test_head_on_one_core(name, monkeypatch):
    """Several tiles on one core with a head beside a hoisted setup, two Dst groups in flight (tile_render
    second_dst_group): an fp32 head is unpacked once into the first tile's group, and the second group's slots meet
    neither the first group's per-tile slots nor the once-sent head's; a bf16 head reaches Dst every tile (it hung
    when the head was sent once but the math thread still waited for it per tile). Bit-identical to the reference."""
    monkeypatch.setenv("TT_CORES", "1")
    _, fn, specs, _ = CASES[IDS.index(name)]
    (plan,) = _plans(fn, specs)
    plan.cores = 1
    assert "two Dst groups in flight" in plan.render()["trisc1"]
    arrays = [_data(s, dt) for s, dt in specs]
    got, ref = (fn(*_tensors(specs, arrays, dev)).cast(F32).numpy() for dev in ("TT:emu", REF))
    np.testing.assert_array_equal(got.view(np.uint8), ref.view(np.uint8))


def test_column_segments_where_not_resident():
    """A columns walk over a buffer larger than the staging window keeps a segment of each column in a window grown
    for it (tile_streams.column_windows), filled in blocks where the columns are close; one over a resident buffer
    reads the buffer once, as before."""
    for name, segments, blocks in [("permute_columns", True, True), ("transpose_big", True, True),
                                   ("transpose", False, False), ("columns_descending", False, False),
                                   ("inverse_transpose", True, True), ("inverse_permute", True, True)]:
        _, fn, specs, _ = CASES[IDS.index(name)]
        (plan,) = _plans(fn, specs)
        src = plan.render()["brisc"]
        assert ("in0_column(" in src) == segments and bool(plan.windows) == segments, name
        assert ("into the bounce area" in src) == blocks, name


# --------------------------------------------------------------------------- plan level: run paths vs per-datum gather
def _launch(plan: ElementwisePlan, data: dict[int, bytes]) -> tuple[bytes, int]:
    from tt_backend.runtime import compile as C
    from tt_backend.runtime import driver
    from tt_backend.runtime.emu.device import EmuDevice
    dev = EmuDevice()
    addrs, addr = [], 0x40000
    for k, b in enumerate(plan.buffers):
        addrs.append(addr)
        dev.write_dram(addr, data.get(k, bytes(b.nbytes)))
        addr += (b.nbytes + 0xFFF) & ~0xFFF
    sources, headers = split(plan.render())
    res = driver.launch(dev, C.compile_kernel(sources, headers, plan.name), plan.arg_words(addrs), timeout_s=300)
    assert all(c.error == 0 for c in res.cores.values())
    out = plan.output.buf
    return dev.read_dram(addrs[out], plan.buffers[out].nbytes), dev.stats()["cycles"]["brisc"]


def _random_bytes(dtype: str, nbytes: int) -> bytes:
    if dtype == "bool":
        return rng.integers(0, 2, nbytes).astype(np.uint8).tobytes()
    if dtype == "int32":
        return rng.integers(-1000, 1000, nbytes // 4).astype(np.int32).tobytes()
    x = rng.uniform(-4, 4, nbytes // 4 if dtype == "float32" else nbytes // 2).astype(np.float32)
    return x.tobytes() if dtype == "float32" else (x.view(np.uint32) >> 16).astype(np.uint16).tobytes()


@pytest.mark.needs_cc
@pytest.mark.parametrize("name,fn,specs,modes", [c for c in CASES if c[3] & set(RUN_MODES)],
                         ids=[c[0] for c in CASES if c[3] & set(RUN_MODES)])
def test_same_bytes_as_gather(name, fn, specs, modes):
    for plan in _plans(fn, specs):
        if not any(reader_mode(plan, j) in RUN_MODES for j in range(len(plan.inputs))):
            continue
        gather = replace(plan, inputs=[replace(s, coef=None) for s in plan.inputs])
        assert all(reader_mode(gather, j) in ("gather", "contiguous", "contiguous bool") for j in range(len(plan.inputs)))
        data = {k: _random_bytes(b.dtype, b.nbytes) for k, b in enumerate(plan.buffers) if k != plan.output.buf}
        fast, fast_cycles = _launch(plan, data)
        slow, slow_cycles = _launch(gather, data)
        assert fast == slow, f"{name}: run paths and gather differ"
        assert fast_cycles < slow_cycles, f"{name}: reader {fast_cycles} cycles, gather {slow_cycles}"


@pytest.mark.needs_cc
@pytest.mark.parametrize("name,perm,cores", [("permute_columns", (2, 3, 0, 1), 3),
                                             ("permute_columns", (2, 3, 0, 1), 7),
                                             ("inverse_permute", (3, 4, 0, 1, 2), 5)])
def test_column_segments_split_over_cores(name, perm, cores):
    """The transposing reader's segments stop where a core's tiles do: a permute split over several cores gives the
    one-core bytes."""
    from tt_backend.bench.kernels import launch_plan
    from tt_backend.runtime.compile import compile_kernel
    from tt_backend.runtime.emu.device import EmuDevice
    _, fn, specs, _ = CASES[IDS.index(name)]
    (plan,) = _plans(fn, specs)
    x = _data(specs[0][0], F32)
    elfs = compile_kernel(*split(plan.render()), plan.name)
    one, _ = launch_plan(EmuDevice(), plan, {1: x}, elfs)
    plan.cores = cores
    assert launch_plan(EmuDevice(), plan, {1: x}, elfs)[0] == one
    np.testing.assert_array_equal(np.frombuffer(one, np.float32), (x.transpose(*perm) * 2).ravel())


# inverse permutes (the last axis first: runs of the other axes' product, at least a tile) of every rank, split over
# several cores: their tiles are walked down the columns of a grid (tile_streams.tile_grid), the tiles past it in order;
# element counts not multiples of a tile (partial last tiles), dtypes of 4, 2 and 1 bytes; the reference works on
# the DRAM contents (bf16: the high halves)
GRID_CASES = [
    ("rank2_f32", (1536, 41), F32, lambda a: a.T * 2, lambda x: x.T * 2, 7),
    ("rank3_bf16", (1536, 5, 7), BF16, lambda a: -a.permute(2, 0, 1), lambda h: h.transpose(2, 0, 1) ^ np.uint16(0x8000), 5),
    ("rank4_i32", (6, 16, 16, 9), I32, lambda a: a.permute(3, 0, 1, 2) + 7, lambda x: x.transpose(3, 0, 1, 2) + 7, 3),
    ("rank5_bool", (4, 8, 8, 16, 20), BOOL, lambda m: m.permute(4, 0, 1, 2, 3).logical_not(),
     lambda x: ~x.transpose(4, 0, 1, 2, 3), 6),
    ("rank5_f32", (3, 24, 24, 32, 7), F32, lambda a: a.permute(3, 4, 0, 1, 2) * 2,
     lambda x: x.transpose(3, 4, 0, 1, 2) * 2, 9),
]


@pytest.mark.needs_cc
@pytest.mark.parametrize("name,shape,dt,fn,ref,cores", GRID_CASES, ids=[c[0] for c in GRID_CASES])
def test_grid_walk_split_over_cores(name, shape, dt, fn, ref, cores):
    """An inverse permute split over cores walks its tiles down grid columns and gives numpy's bytes exactly."""
    from tt_backend.bench.kernels import launch_plan
    from tt_backend.runtime.compile import compile_kernel
    from tt_backend.runtime.emu.device import EmuDevice
    (plan,) = _plans(fn, [(shape, dt)])
    assert plan.tile_grid is not None and reader_mode(plan, 0) == "columns", name
    rows, columns = plan.tile_grid
    assert rows * columns <= plan.n_tiles and rows > 1
    x = _data(shape, dt)
    host = (x.view(np.uint32) >> 16).astype(np.uint16) if dt == BF16 else x   # bf16 in DRAM: the high halves
    plan.cores = cores
    got, _ = launch_plan(EmuDevice(), plan, {1: host}, compile_kernel(*split(plan.render()), plan.name))
    assert got == np.ascontiguousarray(ref(host)).tobytes(), name
