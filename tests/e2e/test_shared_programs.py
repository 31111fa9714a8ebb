"""The programs shared by elementwise kernels (lowering/families/shared_programs.py: one reader, writer, unpacker and
packer whose kernel comes from the argument block) against each kernel's own rendered code (TT_SHARED_PROGRAMS=0,
the reference): the same output bits on random kernels of 1-7 inputs, float32, bfloat16 and int32 streams, partial
last tiles, one and several cores, one and two Dst groups, a broadcast row (the kernel's own reader, the writer in
plain order); one text and one build for every kernel."""
from __future__ import annotations

import numpy as np
import pytest
from tinygrad import Tensor, dtypes
from tinygrad.uop.ops import Ops

from tt_backend import knobs
from tt_backend.chip.errors import TTError
from tt_backend.chip.interleave import BUFFER_ALIGN
from tt_backend.lowering.codegen.sources import split
from tt_backend.lowering.families import shared_programs
from tt_backend.lowering.families.tile_render import dst_group
from tt_backend.lowering.plan import DTYPE_SIZE, TILE_BYTES, for_target
from tt_backend.lowering.select import lower
from tt_backend.ops_tt import kernel_name
from tt_backend.runtime import compile as C
from tt_backend.runtime.driver import launch
from tt_backend.runtime.emu.device import EmuDevice

NUMPY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "maximum": np.maximum}
OPS = {"float32": ("add", "sub", "mul", "maximum"), "int32": ("add", "sub", "mul", "maximum"),
       "bfloat16": ("add", "mul", "maximum")}


def random_kernel(seed: int) -> tuple[str, tuple[int, ...], int, list[str], int, bool]:
    """(dtype, shape, inputs, op chain, cores, whether the last input is one row broadcast over the rows) of a random
    elementwise kernel: a left fold of its inputs."""
    rng = np.random.default_rng(seed)
    dtype = ["float32", "bfloat16", "int32"][seed % 3]
    row = seed % 4 == 3      # several tiles on several cores: the writer's order differs from the rotated one
    n_in = int(rng.choice([1, 2, 2, 3, 3, 4, 5, 7])) if not row else int(rng.integers(2, 5))   # few: a second Dst group
    shape = (int(rng.integers(64 if row else 1, 130)), int(rng.integers(40 if row else 1, 70)))   # mostly partial
    ops = [str(rng.choice(OPS[dtype])) for _ in range(n_in - 1)]
    return dtype, shape, n_in, ops, int(rng.integers(2 if row else 1, 4)), row


def kernel_ast(dtype: str, shape: tuple[int, ...], n_in: int, ops: list[str], row: bool = False):
    shapes = [shape] * (n_in - 1) + [(1, shape[1]) if row else shape]
    ins = [Tensor.empty(*s, device="CPU", dtype=getattr(dtypes, dtype)) for s in shapes]
    out = ins[0] if n_in > 1 else ins[0] * 3 + 1
    for op, x in zip(ops, ins[1:]):
        out = getattr(out, op)(x)
    (ast,) = [k.src[0] for k in out.schedule_linear().src if k.op is Ops.CALL and k.src[0].op is Ops.SINK]
    return ast


def inputs(plan, seed: int) -> dict[int, bytes]:
    """Random bytes of each input buffer (bfloat16: the upper halves of float32 normals), by tinygrad slot."""
    rng = np.random.default_rng(1000 + seed)
    out = {}
    for s in plan.inputs:
        b = plan.buffers[s.buf]
        n = b.nbytes // DTYPE_SIZE[b.dtype]
        if b.dtype == "int32":
            out[b.slot] = rng.integers(-1000, 1000, n).astype(np.int32).tobytes()
        else:
            x = rng.standard_normal(n).astype(np.float32)
            out[b.slot] = (x.view(np.uint32) >> 16).astype(np.uint16).tobytes() if b.dtype == "bfloat16" else \
                x.tobytes()
    return out


def run(plan, arrays: dict[int, bytes]) -> bytes:
    """One emulated launch (every core's argument block), the output buffer's bytes."""
    dev, addrs, addr = EmuDevice(), [], BUFFER_ALIGN
    for b in plan.buffers:
        addrs.append(addr)
        dev.write_dram(addr, arrays.get(b.slot, b"\xAB" * b.nbytes))
        addr += -(-b.nbytes // BUFFER_ALIGN) * BUFFER_ALIGN
    elfs = C.compile_kernel(*split(plan.render()), plan.name)
    launch(dev, elfs, plan.arg_words(addrs), timeout_s=600,
           per_tile=plan.core_arg_words(addrs) if plan.cores > 1 else None,
           tile_xys=plan.core_xys() if plan.cores > 1 else None)
    return dev.read_dram(addrs[plan.output.buf], plan.buffers[plan.output.buf].nbytes)


def planned(ast, cores: int):
    """The kernel's plan for the emulator, split over `cores` cores (as many as it has tiles at most)."""
    plan = for_target(lower(ast, kernel_name(ast)), "emu")
    plan.cores = min(cores, plan.n_tiles)
    return plan


@pytest.mark.needs_cc
@pytest.mark.parametrize("seed", range(15))
def test_programs_give_the_kernels_own_bits(seed, monkeypatch):
    """A random kernel's output bytes with the shared programs equal those of its own code (TT_SHARED_PROGRAMS=0),
    on the cores the programs fit."""
    dtype, shape, n_in, ops, cores, row = random_kernel(seed)
    ast = kernel_ast(dtype, shape, n_in, ops, row)
    got = {}
    for flag in ("0", "1"):
        monkeypatch.setenv("TT_SHARED_PROGRAMS", flag)
        plan = planned(ast, cores)
        shared = shared_programs.programs(plan, plan.fpu_ops, plan.dst_inputs)
        # the packer and the writer (a plain output) always; the reader where all inputs are plain contiguous streams
        # (not a broadcast row); the unpacker where all go to Dst as fp32
        fp32_dst = dtype != "bfloat16" and not plan.fpu_ops and not plan.head_inputs
        expect = {"ncrisc", "trisc2"} | ({"brisc"} if not row else set()) | ({"trisc0"} if fp32_dst else set())
        assert shared == (expect if flag == "1" else set()), (flag, shared, plan.fpu_ops)
        got[flag] = run(plan, inputs(plan, seed))
    assert got["1"] == got["0"], f"{dtype} {shape} {n_in} inputs {ops}, {plan.cores} core(s)"
    if dtype == "int32":    # and both are the kernel's values (the integer ops are exact)
        xs = [np.frombuffer(inputs(plan, seed)[plan.buffers[s.buf].slot], np.int32) for s in plan.inputs]
        if row:
            xs[-1] = np.broadcast_to(xs[-1].reshape(1, -1), shape).reshape(-1)
        ref = xs[0] if n_in > 1 else xs[0] * 3 + 1
        for op, x in zip(ops, xs[1:]):
            ref = NUMPY[op](ref, x)
        assert np.array_equal(np.frombuffer(got["1"], np.int32), ref.astype(np.int32))


def test_programs_are_one_text_for_every_kernel(monkeypatch):
    """Distinct kernels render the same program sources (which read no args.h), and their argument blocks carry
    their own streams in the table."""
    monkeypatch.setenv("TT_SHARED_PROGRAMS", "1")
    texts = {}
    for seed in range(6):
        dtype, shape, n_in, ops, cores, row = random_kernel(seed)
        plan = planned(kernel_ast(dtype, shape, n_in, ops, row), cores)
        sources = plan.render()
        for core in shared_programs.programs(plan, plan.fpu_ops, plan.dst_inputs):
            assert texts.setdefault(core, sources[core]) == sources[core] and C.is_program(sources[core])
        words = plan.core_arg_words([0x100000 * (k + 1) for k in range(len(plan.buffers))])
        for block in words:
            head = dict(zip(shared_programs.HEAD, block[shared_programs.TABLE_AT:]))
            assert (head["range"], head["n_inputs"], head["out_slot"]) == (2 + len(plan.buffers), n_in,
                                                                           plan.sfpu.out_slot)
            assert head["group"] == (dst_group(plan, plan.fpu_ops, plan.dst_inputs) or 0)
            assert shared_programs.FORMATS[head["out_format"]] == plan.output.tile_format
            assert head["rotated"] == (not row)     # a broadcast row's reader keeps no reads in flight
            at, per = shared_programs.TABLE_AT + len(shared_programs.HEAD), shared_programs.STREAM_WORDS
            for k, s in enumerate([*plan.inputs, plan.output]):
                buf, shift, cb, slot_bytes = block[at + per * k:at + per * (k + 1)]
                assert (buf, 1 << shift, slot_bytes) == (s.buf, DTYPE_SIZE[s.dtype], TILE_BYTES[s.tile_format])
                assert cb == plan.l1[f"cb_in{k}" if k < n_in else "cb_out"]
    assert set(texts) == {"brisc", "ncrisc", "trisc0", "trisc2"}


@pytest.mark.needs_cc
def test_a_program_is_built_once_per_process(tmp_path, monkeypatch):
    """A second kernel on an empty disk cache finds the first one's programs in the process: only its math TRISC is
    compiled."""
    monkeypatch.setenv("TT_SHARED_PROGRAMS", "1")
    monkeypatch.setattr(C, "_programs", {})
    built = []
    for seed, k in ((0, "first"), (6, "second")):      # two float32 kernels of other inputs, shapes and ops
        monkeypatch.setenv("TT_CACHE_DIR", str(tmp_path / k))
        dtype, shape, n_in, ops, cores, row = random_kernel(seed)
        plan = planned(kernel_ast(dtype, shape, n_in, ops, row), cores)
        before = dict(C.STATS)
        C.compile_kernel(*split(plan.render()), plan.name)
        built.append((C.STATS["compiled"] - before["compiled"], C.STATS["programs_reused"] - before["programs_reused"]))
    assert built == [(5, 0), (1, 4)]


def test_the_knob_is_on_by_default_and_refuses_other_words():
    assert knobs.shared_programs({}) is True and knobs.shared_programs({"TT_SHARED_PROGRAMS": "0"}) is False
    with pytest.raises(TTError, match="TT_SHARED_PROGRAMS='2': expected 1"):
        knobs.validate({"TT_SHARED_PROGRAMS": "2"})
