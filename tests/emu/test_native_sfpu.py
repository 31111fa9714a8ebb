"""The C part's SFPU instructions (runtime/emu/accel/sfpu_native.c) against their reference, the functional model in
chip/numerics/sfpu: the Blackhole FMA bit for bit against fma._fma_exact on edge-crowded operands; random programs of
every covered instruction over random LRegs, lane flags and Dst give the same state; deferred kernel bodies give the
same Dst, LRegs, flags and cycles with the C part on and off."""
import math
import platform

import numpy as np
import pytest

from tt_backend.chip import isa
from tt_backend.chip.errors import EmuUnimplemented
from tt_backend.chip.numerics.dst import Dst
from tt_backend.chip.numerics.fma import _fma_exact
from tt_backend.chip.numerics.sfpu.functional import FunctionalSFPU
from tt_backend.runtime.emu import bench
from tt_backend.runtime.emu.accel import deferral, native, sfpu_native

from tests.emu.test_emu_speed import BODIES, CLOSED_BODIES, MM_SETUP, _full_state, _same, _tti_run
from tests.support.tensix_runs import mop_run

pytestmark = pytest.mark.skipif(native.host_compiler() is None, reason="no host C compiler (cc, clang or gcc)")


def _operands(rng, n: int) -> np.ndarray:
    """FP32 words whose exponent crowds the edges (0 = zero/denormal, tiny, where products underflow, mid, where they
    overflow, 254-255 = Inf/NaN) and whose mantissa is often all zeros or all ones."""
    words = rng.integers(0, 1 << 32, n, dtype=np.uint64)
    exps = [np.zeros(n, np.int64), rng.integers(1, 4, n), rng.integers(55, 72, n), rng.integers(118, 137, n),
            rng.integers(183, 195, n), rng.integers(250, 256, n), rng.integers(0, 256, n)]
    exp = np.choose(rng.integers(0, len(exps), n), exps).astype(np.uint64)
    man = np.choose(rng.integers(0, 4, n), [words, words & ~np.uint64(0x7FFFFF), words | np.uint64(0x7FFFFF),
                                            words & ~np.uint64(0xFFFF)])
    return ((man & ~np.uint64(0x7F800000)) | (exp << np.uint64(23))).astype(np.uint32)


@pytest.mark.parametrize("seed", range(2))
def test_c_fma_matches_exact_model(seed):
    """150k edge-crowded triples plus 50k cancelling ones (z = -(x*y) rounded, a few ulps off) per seed (seed 1: 3
    more, so that the C part's last 8-lane group is a partial one)."""
    assert sfpu_native.available(), sfpu_native.status()
    rng = np.random.default_rng(seed)
    x, y, z = (_operands(rng, 150_000 + 3 * seed) for _ in range(3))
    cx, cy = (np.ldexp(rng.standard_normal(50_000), rng.integers(-60, 60, 50_000)).astype(np.float32)
              for _ in range(2))
    cz = (-(cx * cy)).view(np.uint32) + rng.integers(-3, 4, 50_000).astype(np.uint32)
    x, y, z = (np.concatenate([a, b.view(np.uint32)]) for a, b in ((x, cx), (y, cy), (z, cz)))
    want = _fma_exact(np.stack([x, y, z]).astype(np.int64))
    got = sfpu_native.fma(x, y, z)
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, [(hex(x[i]), hex(y[i]), hex(z[i]), hex(want[i]), hex(got[i])) for i in bad[:5]]


def _ordinary_operands(rng, n: int) -> tuple:
    """x, y, z FP32 words the float64 form mostly takes (normal, exponents where nothing overflows or underflows), a
    third of the z cancelling x * y to within a few ulps, an eighth of x exactly zero (a zero product), some z zero;
    a few lanes at the edges where it must decline (results near FP32's smallest normal, products that overflow)."""
    x, y, z = (np.ldexp(rng.standard_normal(n), rng.integers(-40, 40, n)).astype(np.float32) for _ in range(3))
    z[::3] = -(x[::3] * y[::3])
    z = z.view(np.uint32).copy()
    z[::3] += rng.integers(-3, 4, len(z[::3])).astype(np.uint32)
    x[::8] = 0.0
    z[5::16] = 0
    tiny = slice(10, None, 64)      # products near 2^-126, FP32's smallest normal, beside zero or tiny z (a group of
                                    # their own: the huge lanes' group is declined whole)
    k = len(x[tiny])
    x[tiny] = rng.uniform(1, 2, k).astype(np.float32) * np.float32(2.0 ** -63)
    y[tiny] = rng.uniform(0.5, 2, k).astype(np.float32) * np.float32(2.0 ** -63)
    z[tiny] = np.where(rng.random(k) < 0.5, 0, z[tiny] & 0x807FFFFF | 0x00800000)
    huge = slice(3, None, 64)       # products of 2^128 and more (Inf on the FMA datapath) that z nearly cancels
    x[huge] = np.float32(2.0 ** 64)
    y[huge] = rng.uniform(1, 1.5, len(x[huge])).astype(np.float32) * np.float32(2.0 ** 64)
    z[huge] = 0xFF7FFFFF
    return x.view(np.uint32), y.view(np.uint32), z


@pytest.mark.parametrize("seed", range(3))
def test_fma_float64_form_matches_integer_form(seed):
    """The float64 form (TT_EMU_FMA_F64_NATIVE) against the integer form and fma._fma_exact, bit for bit: on ordinary
    operands, where it must take almost every group (else this would not test it), and on edge-crowded ones, where it
    declines the groups it cannot do."""
    rng = np.random.default_rng(100 + seed)
    ordinary = _ordinary_operands(rng, 120_000)
    edges = tuple(np.repeat(_operands(rng, 5_000), 8) for _ in range(3))   # (a case a whole 8-lane group: the
                                                                           # float form decides each on its own)
    try:
        for x, y, z in (ordinary, edges):
            sfpu_native.set_fma_f64(True)
            before = sfpu_native.fma_f64_counts()
            fast = sfpu_native.fma(x, y, z)
            groups, declined = np.subtract(sfpu_native.fma_f64_counts(), before)
            sfpu_native.set_fma_f64(False)
            reference = sfpu_native.fma(x, y, z)
            want = _fma_exact(np.stack([x, y, z]).astype(np.int64))
            bad = np.flatnonzero(fast != want)
            assert bad.size == 0, [(hex(x[i]), hex(y[i]), hex(z[i]), hex(want[i]), hex(fast[i])) for i in bad[:5]]
            assert np.array_equal(reference, want)
            if x is ordinary[0] and sfpu_native.FMA_F64:
                assert groups >= len(x) // 8 and declined < groups // 4, (groups, declined)   # it ran on > 3/4
            if x is edges[0] and sfpu_native.FMA_F64:
                assert groups - declined >= 100, (groups, declined)      # (edge cases it took: compared above)
    finally:
        sfpu_native.set_fma_f64(sfpu_native.FMA_F64)


def _random_instruction(rng) -> tuple[str, dict, tuple | None]:
    """(name, fields, mem) of a random covered instruction: random field values, redrawn until the C part covers
    them; SFPLOAD / SFPSTORE get a 32-bit mode and an even address below 512 (mem = (mode, address))."""
    names = sfpu_native.OPS + ("SFPADD", "SFPMUL")
    while True:
        name = str(rng.choice(names))
        fields = {f.name: int(rng.integers(0, 1 << (f.hi - f.lo + 1))) for f in isa.INSTRUCTIONS[name].fields}
        if name in ("SFPLOAD", "SFPSTORE"):
            fields["instr_mod0"] = int(rng.choice(sfpu_native.DST32_STORE_MODES if name == "SFPSTORE"
                                                  else sfpu_native.DST32_MODES))
            fields["dest_reg_addr"] = int(rng.integers(0, 256)) * 2
        fields = isa.decode(isa.encode(name, **fields))[1]
        if sfpu_native.record(name, fields) is not None:
            mem = (fields["instr_mod0"], fields["dest_reg_addr"]) if name in ("SFPLOAD", "SFPSTORE") else None
            return name, fields, mem


def _random_state(rng, all_on: bool = False) -> FunctionalSFPU:
    """`all_on`: every lane enabled (all lane flags set), the C part's unmasked loops."""
    s = FunctionalSFPU(Dst())
    s.lreg[:] = _operands(rng, 17 * 32).reshape(17, 32)
    s.lane_flags[:] = True if all_on else rng.integers(0, 2, 32)
    s.use_lane_flags[:] = rng.integers(0, 4, 32) > 0
    s.dst.rows32[:] = _operands(rng, 512 * 16).reshape(512, 16)
    s.dst.written[:] = rng.integers(0, 2, 512)
    s.invalidate()
    return s


def _copy(s: FunctionalSFPU) -> FunctionalSFPU:
    c = FunctionalSFPU(Dst())
    for name in ("lreg", "lane_flags", "use_lane_flags"):
        getattr(c, name)[:] = getattr(s, name)
    c.dst.rows32[:], c.dst.written[:] = s.dst.rows32, s.dst.written
    c.invalidate()
    return c


def _snapshot(s: FunctionalSFPU) -> tuple:
    return s.lreg.copy(), s.lane_flags.copy(), s.use_lane_flags.copy(), s.dst.rows32.copy(), s.dst.written.copy()


@pytest.mark.parametrize("seed", range(6))
def test_c_random_programs_match_functional_model(seed):
    """60 random programs of 1-40 covered instructions per seed, each from a random state (every other one with all
    lanes enabled): the same LRegs, lane flags, Dst words and written rows after the C part as after the functional
    model's handlers."""
    rng = np.random.default_rng(100 + seed)
    seen = set()
    for i in range(60):
        ref = _random_state(rng, all_on=i % 2 == 1)
        c = _copy(ref)
        program = [_random_instruction(rng) for _ in range(int(rng.integers(1, 41)))]
        records = []
        for name, fields, mem in program:
            ref.execute(name, fields, 0)
            r = sfpu_native.record(name, fields)
            records.append(r if mem is None else (r[0], mem[0]) + r[2:7] + (mem[1],))
            seen.add(name)
        sfpu_native.run(c, records)
        for got, want, what in zip(_snapshot(c), _snapshot(ref), ("lreg", "lane_flags", "use", "dst", "written")):
            assert np.array_equal(got, want), (what, [(n, f) for n, f, _ in program])
    assert len(seen) >= 25          # (nearly) every covered instruction drawn


@pytest.mark.parametrize("all_on", [False, True])
@pytest.mark.parametrize("name", ["SFPMUL24", "SFPSWAP", "SFPTRANSP", "SFPLOADI", "SFPSETCC", "SFPCONFIG"])
def test_c_single_instructions_match_functional_model(name, all_on):
    """Every covered mode of one instruction, 400 times from a random state each (all_on: every lane enabled, the
    whole-row paths): the same state after the C part as after the functional model (the random programs above draw
    each of them only a few dozen times)."""
    rng = np.random.default_rng(7)
    fields_of = isa.INSTRUCTIONS[name].fields
    ran = 0
    while ran < 400:
        fields = isa.decode(isa.encode(name, **{f.name: int(rng.integers(0, 1 << (f.hi - f.lo + 1)))
                                                for f in fields_of}))[1]
        r = sfpu_native.record(name, fields)
        if r is None:
            continue
        ref = _random_state(rng, all_on)
        c = _copy(ref)
        ref.execute(name, fields, 0)
        sfpu_native.run(c, [r])
        for got, want, what in zip(_snapshot(c), _snapshot(ref), ("lreg", "lane_flags", "use", "dst", "written")):
            assert np.array_equal(got, want), (what, fields)
        ran += 1


def _native_both(run, monkeypatch) -> tuple:
    """run() with the C part on and off (deferral on): (full state of each, the SFPU traffic of the first)."""
    out = []
    for on in (True, False):
        monkeypatch.setattr(sfpu_native, "NATIVE_SFPU", on)
        before = sfpu_native.traffic.copy()
        out.append((_full_state(run()), sfpu_native.traffic - before))
    (a, traffic), (b, traffic_off) = out
    assert traffic_off["C"] == 0
    return a, b, traffic


@pytest.mark.parametrize("python_op", [None, "SFPMAD"])
def test_deferred_bodies_identical_with_c_part(python_op, monkeypatch):
    """The deferred long bodies (the 171-word predicated one, exp2, spill) with the deferral's batching off, so every
    instruction runs one at a time, with the C part on and off: the same Dst, LRegs, lane flags, cycle model and
    counters, and the C part ran them. With `python_op` taken from the C part's coverage, those instructions end the
    C runs and go through the functional model in between (counted by name)."""
    monkeypatch.setattr(deferral, "DEFER_SFPU", True)
    if python_op:
        record = sfpu_native.record
        monkeypatch.setattr(sfpu_native, "record", lambda name, f: None if name == python_op else record(name, f))
    monkeypatch.setattr(deferral, "_dq_words", lambda dq: (lambda i, n: (0, 0), None))     # no batch attempt
    runs = [lambda: _tti_run(bench.LONG_BODY, setup=bench.LONG_SETUP, cfg1=bench.LONG_CFG1, tiles=2)]
    runs += [lambda body=body: _tti_run(body) for _, body in sorted(BODIES.items())]
    for run in runs:
        a, b, traffic = _native_both(run, monkeypatch)
        assert traffic["C"] > 0 and (python_op is None or traffic[python_op] > 0)
        _same(a, b)


@pytest.mark.skipif(platform.machine() != "x86_64", reason="x86-64's rounding-mode constants")
def test_fma_float64_form_declines_outside_round_to_nearest():
    """The float64 form's last rounding is the FPU's: under another rounding mode (fesetround, as a library in the
    process could leave it) it stands aside and the integer form gives the same bits."""
    import ctypes
    libm = ctypes.CDLL(None)
    x, y, z = _ordinary_operands(np.random.default_rng(7), 8_000)
    want = _fma_exact(np.stack([x, y, z]).astype(np.int64))
    before = sfpu_native.fma_f64_counts()
    assert libm.fesetround(0xC00) == 0              # FE_TOWARDZERO
    try:
        got = sfpu_native.fma(x, y, z)
    finally:
        libm.fesetround(0)                          # FE_TONEAREST
    assert sfpu_native.fma_f64_counts() == before
    assert np.array_equal(got, want)


def test_fma_float64_switch_keeps_the_integer_form():
    """TT_EMU_FMA_F64_NATIVE=0 (read when the library loads, in a fresh process): no group reaches the float64 form."""
    import os
    import subprocess
    import sys
    code = ("import numpy as np; from tt_backend.runtime.emu.accel import sfpu_native as s; "
            "x = np.full(64, 0x3FC00000, np.uint32); s.fma(x, x, x); print(*s.fma_f64_counts())")
    try:
        host_has_it = sfpu_native.set_fma_f64(True)
    finally:
        sfpu_native.set_fma_f64(sfpu_native.FMA_F64)
    for value, used in (("0", False), ("1", host_has_it)):
        env = dict(os.environ, TT_EMU_FMA_F64_NATIVE=value)
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
        groups, declined = map(int, out.split())
        assert declined == 0 and (groups > 0) == used, (value, groups)


def test_deferred_bodies_identical_with_fma_float64():
    """The deferred long bodies (the 171-word predicated one, exp2, spill) with the C part's FMA in float64 and in
    integers only (TT_EMU_FMA_F64_NATIVE): the same Dst, LRegs, lane flags, cycle model and counters, and the float64
    form ran on the long body's FMAs."""
    runs = [lambda: _tti_run(bench.LONG_BODY, setup=bench.LONG_SETUP, cfg1=bench.LONG_CFG1, tiles=2)]
    runs += [lambda body=body: _tti_run(body) for _, body in sorted(BODIES.items())]
    try:
        for i, run in enumerate(runs):
            states = []
            for on in (True, False):
                sfpu_native.set_fma_f64(on)
                ran, before = sfpu_native.traffic["C"], sfpu_native.fma_f64_counts()
                states.append(_full_state(run()))
                groups, declined = np.subtract(sfpu_native.fma_f64_counts(), before)
                assert sfpu_native.traffic["C"] > ran
                if on and i == 0 and sfpu_native.FMA_F64:   # the long body's FMAs: most took the float64 form
                    assert declined < groups // 2, (groups, declined)
            _same(*states)
    finally:
        sfpu_native.set_fma_f64(sfpu_native.FMA_F64)


@pytest.mark.parametrize("name", sorted(CLOSED_BODIES))
def test_mop_batches_in_c_identical(name, monkeypatch):
    """MOP batches (accel/mop_batch.py) of fewer than deferral.NATIVE_BATCH_MIN repetitions run one repetition after
    the other in C: the same Dst, LRegs, flags, cycle model and counters as the numpy batch (the C part off) and as
    no batching at all (every instruction through its handler), and the C part ran the batches."""
    from tt_backend.runtime.emu.tensix import Tensix
    batched = {"n": 0}
    batch_sfpu = Tensix.batch_sfpu

    def counted(self, t, th, on=True):
        n = batch_sfpu(self, t, th) if on else 0
        batched["n"] += n
        return n
    run = lambda: mop_run(CLOSED_BODIES[name], reps=16, setup=MM_SETUP, tiles=3)
    monkeypatch.setattr(Tensix, "batch_sfpu", counted)
    before = sfpu_native.traffic.copy()
    c = _full_state(run())
    assert (sfpu_native.traffic - before)["C"] >= batched["n"] > 0
    monkeypatch.setattr(sfpu_native, "NATIVE_SFPU", False)
    numpy_batch = _full_state(run())
    monkeypatch.setattr(Tensix, "batch_sfpu", lambda self, t, th: counted(self, t, th, on=False))
    monkeypatch.setattr(deferral, "DEFER_SFPU", False)
    _same(c, numpy_batch)
    _same(c, _full_state(run()))


def _kernel_plan(expr, name: str):
    """The last kernel tinygrad schedules for expr(a, b) on (32, 24) float32 inputs, lowered as the plugin lowers it
    but without the block split of cumulative ops (lowering/prefix_split.py would stage them: these tests want the
    one-pass kernel's running chain)."""
    from tinygrad import Tensor
    from tinygrad.uop.ops import Ops

    from tt_backend import knobs
    from tt_backend.lowering import prefix_split
    from tt_backend.lowering.select import lower
    from tt_backend.placement_eval import placer
    a, b = Tensor.empty(32, 24, device="CPU"), Tensor.empty(32, 24, device="CPU")
    call = [c for c in expr(a, b).schedule_linear().src if c.op is Ops.CALL][-1]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(prefix_split, "MIN_GAIN", math.inf)
        return lower(call.src[0], name, placer(knobs.err_budget(), knobs.place_spec()))


KERNELS = {"cumsum": lambda a, b: a.cumsum(1), "where_exp": lambda a, b: (a < b).where(a.exp(), b * 3),
           "cummax": lambda a, b: a.cummax(1)[0], "cummax_index": lambda a, b: a.cummax(1)[1],
           "signed_sum": lambda a, b: (a - b).sum(1)}


def _kernel_both(kernel: str, module, switch: str, monkeypatch) -> dict:
    """KERNELS[kernel] on a fresh EmuDevice with module.switch on and off: {on: (output bytes, stats(), SFPU traffic:
    the C part's instructions and, by name, the functional model's)}."""
    pytest.importorskip("tinygrad")
    from tt_backend.bench.emu import elementwise_inputs
    from tt_backend.bench.kernels import launch_plan
    from tt_backend.lowering.codegen.sources import split
    from tt_backend.runtime.compile import compile_kernel
    from tt_backend.runtime.emu.device import EmuDevice
    plan = _kernel_plan(KERNELS[kernel], f"native_sfpu_{kernel}")
    arrays = elementwise_inputs(plan, np.random.default_rng(11))
    elfs = compile_kernel(*split(plan.render()), plan.name)
    runs = {}
    for on in (True, False):
        monkeypatch.setattr(module, switch, on)
        before = sfpu_native.traffic.copy()
        dev = EmuDevice()
        out = launch_plan(dev, plan, arrays, elfs)[0]
        runs[on] = (out, dev.stats(), sfpu_native.traffic - before)
    return runs


@pytest.mark.needs_cc
@pytest.mark.parametrize("kernel", sorted(KERNELS))
def test_kernels_identical_with_c_part(kernel, monkeypatch):
    """Real kernels whose deferred SFPU work runs partly one instruction at a time (a running sum: cumsum's chain; a
    running maximum: cummax's SFPSWAP chain; a compensated sum; a predicated exp body entered mid-body; with the C
    part, their short repeated bodies one by one in C, without it as numpy batches: deferral.NATIVE_BATCH_MIN): the
    same output bytes and the same emulated cycles of every core and Tensix thread (EmuDevice.stats()) with the C part
    on and off, and the C part ran."""
    runs = _kernel_both(kernel, sfpu_native, "NATIVE_SFPU", monkeypatch)
    assert runs[True][2]["C"] > 0 and runs[False][2]["C"] == 0
    assert runs[True][:2] == runs[False][:2]


@pytest.mark.needs_cc
@pytest.mark.parametrize("batch_min", [2, deferral.NATIVE_BATCH_MIN])
@pytest.mark.parametrize("kernel,ops,chain", [("cummax", ("SFPSWAP",), 1), ("cummax_index", ("SFPMUL24",), 0),
                                              ("signed_sum", (), 2)])
def test_kernels_identical_with_deferral(kernel, ops, chain, batch_min, monkeypatch):
    """Kernels with the deferral on and off: the same output bytes and emulated cycles of every core and Tensix
    thread. cummax's (values: SFPSWAP among their SFPU words; indices: SFPMUL24) have those instructions run by the C
    part with the deferral on (off, every SFPU word runs through its handler as it arrives). With batches of any
    length (batch_min 2), a running maximum and a compensated sum (its running sum and error, 8 instructions) split
    off as a chain of at least `chain` instructions; by default these short runs go one by one in C."""
    monkeypatch.setattr(deferral, "NATIVE_BATCH_MIN", batch_min)
    split, orig = [], deferral._dq_chain
    monkeypatch.setattr(deferral, "_dq_chain", lambda infos: split.append(orig(infos)) or split[-1])
    runs = _kernel_both(kernel, deferral, "DEFER_SFPU", monkeypatch)
    on, off = runs[True][2], runs[False][2]
    assert on["C"] > 0 and off["C"] == 0
    assert all(off[op] > 0 and on[op] == 0 for op in ops), (on, off)
    assert max([len(c or ()) for c in split], default=0) >= (chain if batch_min == 2 else 0)
    assert runs[True][:2] == runs[False][:2]


@pytest.mark.skipif(native.host_compiler() is None, reason="no host C compiler (cc, clang or gcc)")
def test_run_at_takes_bytes_or_an_address_and_names_an_unknown_op():
    """run_at on packed bytes and on a kept array's address: the same state as run(); an op code the C part does not
    know stops the run there and is named (read back from the bytes or from the address)."""
    rng = np.random.default_rng(3)
    program = [_random_instruction(rng) for _ in range(30)]
    records = [sfpu_native.record(n, f) if m is None else sfpu_native.at_address(sfpu_native.record(n, f), *m)
               for n, f, m in program]
    ref = _random_state(rng, all_on=True)
    by_bytes, by_address = _copy(ref), _copy(ref)
    sfpu_native.run(ref, records)
    prog = np.array(records, dtype=np.int32)
    sfpu_native.run_at(by_bytes, prog.tobytes(), len(prog))
    sfpu_native.run_at(by_address, prog.ctypes.data, len(prog))
    for state in (by_bytes, by_address):
        for got, want in zip(_snapshot(state), _snapshot(ref)):
            assert np.array_equal(got, want)
    bad = np.array(records[:2] + [(99,) + (0,) * 7], dtype=np.int32)
    for where in (bad.tobytes(), bad.ctypes.data):
        with pytest.raises(EmuUnimplemented, match="op code 99 is not the C part's"):
            sfpu_native.run_at(_copy(ref), where, len(bad))
