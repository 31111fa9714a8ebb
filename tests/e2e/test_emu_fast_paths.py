"""The emulator's speed layer on whole compiled kernels: each fast path on and off (its switch), the same output bytes
and the same emulated cycles of every core and Tensix thread (EmuDevice.stats()), and the fast path really taken."""
import numpy as np
import pytest

from tt_backend.bench.emu import elementwise_inputs, elementwise_plan
from tt_backend.bench.kernels import launch_plan, matmul_arrays, matmul_plan
from tt_backend.chip.numerics import fpu_math as fm
from tt_backend.lowering.codegen.sources import split
from tt_backend.runtime.compile import compile_kernel
from tt_backend.runtime.emu import noc, tile, unpack_pack
from tt_backend.runtime.emu.accel import fpu_batch, native, rv32_native, tile_native
from tt_backend.runtime.emu.device import EmuDevice


def _launch(plan, arrays, elfs, dev=None):
    dev = dev or EmuDevice()
    out = [launch_plan(dev, plan, arrays, elfs)[0] for _ in range(2)]    # a second launch on the warm device too
    return out, dev.stats()


@pytest.mark.needs_cc
@pytest.mark.parametrize("fidelity", ["LoFi", "HiFi4"])
def test_mvmul_runs_identical(fidelity, monkeypatch):
    """bf16 64^3 FPU matmul: each MVMUL's numerics in C as it executes (accel/tile_native.py), MVMUL runs executed at
    once (accel/fpu_batch.py) with their numerics in C (accel/native.py) and in numpy (fpu_math.mvmul19_batch),
    against the per-instruction handler."""
    monkeypatch.setattr(tile_native, "HANDLERS_NATIVE", False)     # (the Python handler's paths, counted)
    plan = matmul_plan(64, fidelity)
    rng = np.random.default_rng(3)
    bf16 = lambda: (rng.standard_normal((64, 64)).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    arrays = {plan.spec.a.slot: bf16(), plan.spec.b.slot: bf16()}
    elfs = compile_kernel(*split(plan.render()), plan.name)
    steps = {"C": [], "numpy": []}
    for path, mod, name, slots_arg in (("C", native, "mvmul_steps", 5), ("numpy", fm, "mvmul19_batch", 3)):
        fn = getattr(mod, name)
        monkeypatch.setattr(mod, name,
                            lambda *a, _fn=fn, _s=steps[path], _i=slots_arg: _s.append(len(a[_i])) or _fn(*a))
    expected = 2 * 2 * 2 * 2 * 16 * fm.FIDELITY_PHASES[fidelity]    # launches x tiles x K x 16/phase
    direct = []
    real = tile_native.module()

    class Counted:
        def __getattr__(self, name):
            return (lambda *a: direct.append(1) or real.mvmul(*a)) if name == "mvmul" else getattr(real, name)

    monkeypatch.setattr(tile_native, "module", Counted)
    runs = {"direct C": _launch(plan, arrays, elfs)}
    assert len(direct) == expected and not steps["C"]                  # every MVMUL ran alone in C
    monkeypatch.setattr(tile_native, "module", lambda: None)
    for path, switch in (("C", None), ("numpy", "NATIVE_MVMUL"), ("reference", "BATCH_MVMUL")):
        if switch:
            monkeypatch.setattr(fpu_batch, switch, False)
        runs[path] = _launch(plan, arrays, elfs)
        if path in steps:
            assert sum(steps[path]) == expected and max(steps[path]) >= 16     # this path ran every MVMUL
    assert sum(steps["C"]) == expected and sum(steps["numpy"]) == expected  # (and no other run used them)
    assert runs["direct C"] == runs["C"] == runs["numpy"] == runs["reference"]


@pytest.mark.needs_cc
def test_unpack_setup_cache_identical_on_src_banks(monkeypatch):
    """bf16 64^3 FPU matmul (both unpackers into SrcA/SrcB, face by face): UNPACR's cached checks
    (unpack_pack.UNPACK_SETUP_CACHE) against the reference handler, which checks every UNPACR's configuration."""
    plan = matmul_plan(64, "HiFi2")
    rng = np.random.default_rng(5)
    bf16 = lambda: (rng.standard_normal((64, 64)).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    arrays = {plan.spec.a.slot: bf16(), plan.spec.b.slot: bf16()}
    elfs = compile_kernel(*split(plan.render()), plan.name)
    calls = {"UNPACR": 0, "_unpack_setup": 0}
    monkeypatch.setattr(tile_native, "HANDLERS_NATIVE", False)     # (the Python handler's cache, counted)
    for name in calls:
        orig = getattr(unpack_pack.UnpackPackMixin, name)
        monkeypatch.setattr(unpack_pack.UnpackPackMixin, name,
                            lambda self, *a, _o=orig, _n=name: calls.__setitem__(_n, calls[_n] + 1) or _o(self, *a))
    fast = _launch(plan, arrays, elfs)
    assert 0 < calls["_unpack_setup"] < calls["UNPACR"] / 4                   # the cache answered
    monkeypatch.setattr(unpack_pack, "UNPACK_SETUP_CACHE", False)
    assert _launch(plan, arrays, elfs) == fast


@pytest.mark.needs_cc
@pytest.mark.parametrize("n", [64, 40])
@pytest.mark.parametrize("switch", ["PACK_SETUP_CACHE", "UNPACK_SETUP_CACHE", "UNPACK_CONTIGUOUS", "PACK_PLAIN_COPY"])
def test_unpack_pack_fast_paths_identical(n, switch, monkeypatch):
    """fp32 a * b + a (40x40: partial tiles, the packer's edge masks): PACR's cached checks and edge masks
    (unpack_pack.PACK_SETUP_CACHE), UNPACR's cached checks (UNPACK_SETUP_CACHE), contiguous unpacks read as one L1
    slice (UNPACK_CONTIGUOUS), PACR's plain copy of fp32 Dst rows (PACK_PLAIN_COPY), each against the reference
    handler. (The Python path's fast paths: the C datum moves, tests/emu/test_tile_native.py, are off.)"""
    monkeypatch.setattr(tile_native, "NATIVE", False)
    plan = elementwise_plan(n)
    arrays = elementwise_inputs(plan, np.random.default_rng(n))
    elfs = compile_kernel(*split(plan.render()), plan.name)
    calls = {"PACR": 0, "_pack_setup": 0, "UNPACR": 0, "_unpack_setup": 0, "_l1_datums": 0, "_pack_early": 0}
    for name in calls:
        orig = getattr(unpack_pack.UnpackPackMixin, name)
        monkeypatch.setattr(unpack_pack.UnpackPackMixin, name,
                            lambda self, *a, _o=orig, _n=name: calls.__setitem__(_n, calls[_n] + 1) or _o(self, *a))
    fast = _launch(plan, arrays, elfs)
    assert calls["_l1_datums"] > 0 and 0 < calls["_pack_setup"] < calls["PACR"] / 4     # the fast paths ran
    assert 0 < calls["_unpack_setup"] < calls["UNPACR"] / 4
    assert calls["_pack_early"] < calls["PACR"]                                         # plain copies
    monkeypatch.setattr(unpack_pack, switch, False)
    assert _launch(plan, arrays, elfs) == fast
    x, y = (arrays[s].astype(np.float64) for s in sorted(arrays))
    got = np.frombuffer(fast[0][0], np.float32)
    # (which buffer slot is `a` is the scheduler's business; fp32 with a possibly fused multiply-add: 1e-6)
    assert min(np.abs(got - (u * v + u)).max() for u, v in ((x, y), (y, x))) <= 1e-6 * np.abs(x * y + x).max()


@pytest.mark.needs_cc
@pytest.mark.parametrize("module, switch", [(noc, "ROUTE_CACHE"), (rv32_native, "NIU_STORES"), (noc, "FORGET_PAST")])
def test_data_movement_fast_paths_identical(module, switch, monkeypatch):
    """bf16 64^3 matmul on a 2x2 grid (DRAM reads on both NoCs, multicasts, semaphores between tiles): the NoC time
    model's kept route resources (noc.ROUTE_CACHE), the NIU command registers filled in C (rv32_native.NIU_STORES)
    and the busy intervals dropped at a launch's start (noc.FORGET_PAST) against their reference paths: the same bytes,
    cycles and NoC statistics of every tile (two launches: the second one meets the first one's intervals)."""
    plan = matmul_plan(64, "HiFi2")
    plan.use_cores(4)
    elfs = compile_kernel(*split(plan.render()), plan.name)
    devs = EmuDevice(), EmuDevice()
    fast = _launch(plan, matmul_arrays(plan), elfs, devs[0])
    assert fast[1]["fabric"]["transfers"] > 0
    monkeypatch.setattr(module, switch, False)
    assert _launch(plan, matmul_arrays(plan), elfs, devs[1]) == fast
    if switch == "FORGET_PAST":
        intervals = [max(len(b.ends) for b in dev.chip.fabric.busy.values()) for dev in devs]   # the longest list
        assert intervals[0] < intervals[1]             # the second launch starts with the first one's forgotten


@pytest.mark.needs_cc
@pytest.mark.parametrize("kernel", ["elementwise", "matmul"])
def test_cycles_do_not_depend_on_the_quantum(kernel, monkeypatch):
    """fp32 a * b + a and a bf16 HiFi2 matmul at 64x64 on one core, the cores given 20, 100 and 2000 instructions per
    turn (tile.QUANTUM, a host-side choice like the fast paths): the same bytes, and emulated cycles within 1 % of each
    other (the causal-load rule, tile.CAUSAL_LOADS: a core reads L1 as it was at its own cycle; without it a reader
    that finished in one turn let its consumers run ahead, 5.6 % apart on the first). Not exact: docs/ARCHITECTURE.md
    lists the writes the rule does not see."""
    plan = elementwise_plan(64) if kernel == "elementwise" else matmul_plan(64, "HiFi2")
    arrays = elementwise_inputs(plan, np.random.default_rng(1)) if kernel == "elementwise" else matmul_arrays(plan)
    elfs = compile_kernel(*split(plan.render()), plan.name)
    outputs, cycles = set(), []
    for quantum in (20, 100, 2000):
        monkeypatch.setattr(tile, "QUANTUM", quantum)
        dev = EmuDevice()
        outputs.add(launch_plan(dev, plan, arrays, elfs)[0])
        cycles.append(max(dev.stats()["cycles"].values()))
    assert len(outputs) == 1
    assert max(cycles) - min(cycles) <= 0.01 * min(cycles), cycles
