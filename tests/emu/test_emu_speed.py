"""Emulator speed work must not change results: the float64 FMA formulation (chip/numerics/fma.py `_fma_fast`) against
the integer model `_fma_exact`, lane by lane, on random, exponent-gap, near-cancellation, tie-shaped, zero and
special operands. CI runs a few hundred thousand lanes; `TT_FMA_PROOF_LANES=10000000` runs the full proof."""
from __future__ import annotations

import os
from functools import partial

import numpy as np
import pytest

from tt_backend.chip.numerics.fma import _fma_exact, _fma_fast, fma_bh_stacked

from tests.support import REPO_ROOT
from tests.support.tensix_runs import mop_run
from tests.support.timelines import recorded_spans

LANES = int(os.environ.get("TT_FMA_PROOF_LANES", "300000"))


def _bits(sign, exp, man) -> np.ndarray:
    return ((sign.astype(np.uint64) << 31) | (exp.astype(np.uint64) << 23) | man.astype(np.uint64)).astype(np.uint32)


def _cases(rng, n: int) -> dict[str, np.ndarray]:
    s = lambda: rng.integers(0, 2, n)
    man = lambda: rng.integers(0, 1 << 23, n)
    out = {}
    out["wide"] = np.stack([_bits(s(), rng.integers(1, 255, n), man()) for _ in range(3)])
    ex, ey = rng.integers(100, 155, n), rng.integers(100, 155, n)
    ez = np.clip(ex + ey - 127 + rng.integers(-31, 32, n), 1, 254)          # exponent gaps 0..31 both ways
    out["gap"] = np.stack([_bits(s(), ex, man()), _bits(s(), ey, man()), _bits(s(), ez, man())])
    x, y = _bits(s(), rng.integers(110, 145, n), man()), _bits(s(), rng.integers(110, 145, n), man())
    p = x.view(np.float32).astype(np.float64) * y.view(np.float32)
    z = (-p).astype(np.float32).view(np.uint32).astype(np.int64) + rng.integers(-4, 5, n)
    out["cancel"] = np.stack([x, y, z.astype(np.uint32)])                     # near (and exact) cancellation
    few = lambda: (rng.integers(0, 1 << 6, n) << rng.integers(0, 18, n)) & 0x7FFFFF
    ex, ey = rng.integers(110, 145, n), rng.integers(110, 145, n)
    ez = np.clip(ex + ey - 127 + rng.integers(-27, 28, n), 1, 254)
    out["ties"] = np.stack([_bits(s(), ex, few()), _bits(s(), ey, few()), _bits(s(), ez, few())])
    a = out["gap"].copy()
    for i in range(3):
        m = rng.random(n) < 0.15
        a[i, m] = rng.choice(np.array([0, 0x80000000], np.uint32), int(m.sum()))
    out["zeros"] = a
    sp = np.array([0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000, 0x7F800001, 0, 0x80000000], np.uint32)
    a = out["wide"].copy()
    for i in range(3):
        m = rng.random(n) < 0.12
        a[i, m] = rng.choice(sp, int(m.sum()))
    out["special"] = a
    return out


@pytest.mark.parametrize("seed", [0, 1])
def test_fma_fast_matches_exact(seed):
    rng = np.random.default_rng(seed)
    per = max(LANES // 12, 1000)
    done = 0
    while done < per:
        n = min(per - done, 200_000)
        for name, xyz in _cases(rng, n).items():
            xa = xyz & 0x7FFFFFFF
            xyz = np.ascontiguousarray(xyz[:, ~((xa - 1) < 0x7FFFFF).any(axis=0)])   # denormals: exact path only
            with np.errstate(all="ignore"):
                got, ok = _fma_fast(xyz, xyz & 0x7FFFFFFF)
            want = _fma_exact(xyz.astype(np.int64))
            bad = np.flatnonzero(ok & (got != want))
            assert bad.size == 0, (name, [tuple(hex(int(v)) for v in (*xyz[:, i], got[i], want[i])) for i in bad[:5]])
            if name in ("gap", "cancel", "ties", "zeros"):
                assert ok.mean() > 0.99, (name, ok.mean())        # the fast path really covers ordinary data
        done += n


def test_fma_bh_stacked_vectors():
    """The dispatcher on 32-lane vectors (fast, special-patched and exact fallbacks) equals the exact model."""
    rng = np.random.default_rng(5)
    for name, xyz in _cases(rng, 32 * 200).items():
        for v in np.split(xyz, 200, axis=1):
            v = np.ascontiguousarray(v)
            assert np.array_equal(fma_bh_stacked(v), _fma_exact(v.astype(np.int64))), name
        wide = np.ascontiguousarray(xyz[:, :3000])                    # batched widths: uncovered lanes patched
        assert np.array_equal(fma_bh_stacked(wide), _fma_exact(wide.astype(np.int64))), name
        wide = wide.reshape(3, 30, 100)
        assert np.array_equal(fma_bh_stacked(wide), _fma_exact(wide.reshape(3, -1).astype(np.int64))
                              .reshape(30, 100)), name
    den = np.array([[1, 0x3F800000], [0x3F800000, 0x3F800000], [0, 0x80000001]], np.uint32)
    wide = np.concatenate([den.repeat(50, axis=1), _cases(rng, 300)["gap"]], axis=1)
    assert np.array_equal(fma_bh_stacked(wide), _fma_exact(wide.astype(np.int64)))
    assert np.array_equal(fma_bh_stacked(den), _fma_exact(den.astype(np.int64)))


# --- batched row steps (Tensix.batch_sfpu, accel/mop_batch.py): identical to one-by-one execution ----------------------------------
from tt_backend.chip import isa, layout  # noqa: E402
from tt_backend.chip.errors import EmuError  # noqa: E402
from tt_backend.runtime.emu import bench, tensix  # noqa: E402
from tt_backend.runtime.emu.accel import batch_timing, deferral, mop_batch, sfpu_batch, sfpu_native  # noqa: E402

E = isa.encode
MAD = lambda a, b, c, d: E("SFPMAD", lreg_src_a=a, lreg_src_b=b, lreg_src_c=c, lreg_dest=d, instr_mod1=0)
LOAD = lambda vd, addr, am=0: E("SFPLOAD", lreg_ind=vd, instr_mod0=3, sfpu_addr_mode=am, dest_reg_addr=addr)
STORE = lambda vd, addr, am=0: E("SFPSTORE", lreg_ind=vd, instr_mod0=3, sfpu_addr_mode=am, dest_reg_addr=addr)


@pytest.fixture(autouse=True)
def batch_any_length(monkeypatch):
    """The batching paths under test take every repetition count (deferral.NATIVE_BATCH_MIN: with the C part, short
    runs would otherwise go one by one in C; tests/emu/test_native_sfpu.py pins that path)."""
    monkeypatch.setattr(deferral, "NATIVE_BATCH_MIN", 2)


@pytest.fixture
def batch_counter(monkeypatch):
    """Counts instructions run by batch_sfpu; `off()` disables batching."""
    orig = tensix.Tensix.batch_sfpu
    state = {"n": 0, "on": True}

    def wrapped(self, t, th):
        if not state["on"]:
            return 0
        n = orig(self, t, th)
        state["n"] += n
        return n
    monkeypatch.setattr(tensix.Tensix, "batch_sfpu", wrapped)
    return state


def _state(tx):
    spans = recorded_spans(tx)[0] if getattr(tx, "rec", None) is not None else None
    return (tx.dst.rows32.copy(), tx.dst.written.copy(), tx.sfpu.lreg.copy(), tx.tm.stats(), list(tx.instructions),
            tx.sfpu.instructions, tx.sfpu.cycle, dict(tx.threads[1].rwc), spans)


def _same(a, b):
    for x, y in zip(a, b):
        if isinstance(x, np.ndarray):
            assert np.array_equal(x, y)
        else:
            assert x == y


EXP2_BODY = bench.exp2_body()
BODIES = {
    "exp2": EXP2_BODY,
    # two inputs, a spill slot written and read back in the same row step, output to slot 3
    "spill": [LOAD(0, 0), LOAD(1, 64), MAD(0, 1, 9, 2), STORE(2, 128), LOAD(4, 128), MAD(4, 0, 1, 5),
              E("SFPEXMAN", lreg_c=5, lreg_dest=6, instr_mod1=0), E("SFPABS", lreg_c=6, lreg_dest=6, instr_mod1=1),
              E("SFPADD", lreg_src_a=10, lreg_src_b=5, lreg_src_c=6, lreg_dest=7, instr_mod1=2),
              STORE(7, 192, 1)],
    # the matmul epilogue's store: HI16, the word as is in Dst's storage (matmul_epilogue.py "dst16")
    "hi16": [LOAD(0, 0), MAD(0, 0, 9, 1), E("SFPSTORE", lreg_ind=1, instr_mod0=7, sfpu_addr_mode=1, dest_reg_addr=64)],
}


@pytest.mark.parametrize("name", sorted(BODIES))
def test_batch_equals_one_by_one(name, batch_counter):
    a = _state(mop_run(BODIES[name]))
    assert batch_counter["n"] == 2 * 32 * len(BODIES[name])
    batch_counter["on"] = False
    _same(a, _state(mop_run(BODIES[name])))


def test_batch_refuses_loop_carried_and_flags(batch_counter):
    acc = [LOAD(0, 0), MAD(0, 10, 3, 3), STORE(3, 64, 1)]           # LReg3 accumulates across row steps
    flags = [LOAD(0, 0), E("SFPSETCC", lreg_c=0, instr_mod1=0, imm12_math=0), MAD(0, 0, 9, 1),
             E("SFPENCC", instr_mod1=0, imm12_math=0), STORE(1, 64, 1)]
    overlap = [LOAD(0, 2), MAD(0, 0, 9, 1), STORE(1, 0, 1)]          # row step r reads what step r + 1 stores
    for body in (acc, flags, overlap):
        batch_counter["on"] = True
        batch_counter["n"] = 0
        a = _state(mop_run(body, setup=[E("SFPLOADI", lreg_ind=3, instr_mod0=0, imm16=0x3F80)]))
        assert batch_counter["n"] == 0
        batch_counter["on"] = False
        _same(a, _state(mop_run(body, setup=[E("SFPLOADI", lreg_ind=3, instr_mod0=0, imm16=0x3F80)])))


def test_batch_keeps_strict_errors(batch_counter):
    """Reading never-written Dst rows: the batch refuses, the one-by-one path raises the usual error."""
    with pytest.raises(EmuError, match="never written"):
        mop_run(EXP2_BODY, dst_rows=40)
    assert batch_counter["n"] == 0


def test_bench_tile_batched_identical(batch_counter):
    r1 = bench.bench_tile(4)
    assert batch_counter["n"] > 0
    batch_counter["on"] = False
    r2 = bench.bench_tile(4)
    for k in ("sfpu_instructions", "riscv_instructions", "cycles", "tensix_cycles"):
        assert r1[k] == r2[k]


_E2E = """
import json, sys
import numpy as np
from tt_backend.runtime.emu import tensix
from tt_backend.runtime.emu.accel import deferral, sfpu_batch
from tt_backend.runtime.emu.device import EmuDevice
count = [0, 0]
orig = tensix.Tensix.batch_sfpu
def batch(self, t, th):
    n = orig(self, t, th) if sys.argv[1] == "on" else 0
    count[0] += n
    return n
tensix.Tensix.batch_sfpu = batch
deferral.DEFER_SFPU = sys.argv[1] == "on"
deferral.NATIVE_BATCH_MIN = 2          # (batch_any_length)
eb = sfpu_batch.execute_batch
def ebatch(sfpu, body, k, addrs, cycle):
    count[1] += k * len(body)
    return eb(sfpu, body, k, addrs, cycle)
sfpu_batch.execute_batch = ebatch
devs = []
adv = EmuDevice.advance
def advance(self, budget):
    devs.append(self)
    return adv(self, budget)
EmuDevice.advance = advance
from tinygrad import Tensor
rng = np.random.default_rng(7)
a, b = rng.uniform(-30, 30, 5000).astype(np.float32), rng.uniform(-3, 3, 5000).astype(np.float32)
ta, tb = Tensor(a, device="TT:emu"), Tensor(b, device="TT:emu")
tc = Tensor(rng.uniform(0.5, 2, 5000).astype(np.float32), device="TT:emu")
outs = [(ta * tb + 1), ta.maximum(tb), (ta < tb).where(ta, tb * 3), (ta * ta - tb).exp2(),
        ((tb.sin() * tc.exp2() + tc.log2()).sqrt())]
bits = [o.numpy().view(np.uint32).tolist() for o in outs]
print(json.dumps({"bits": bits, "stats": devs[-1].stats(), "batched": count[0], "all_batched": count[1]},
                 default=str))
"""


def test_e2e_kernels_batched_identical(tmp_path):
    """Whole kernels through tinygrad on TT:emu (MOP + REPLAY issue of short SFPU bodies; the exp2 body and the
    predicated sqrt(sin * exp2 + log2) body are longer than the replay buffer and keep the TTI loop, batched through
    the deferral): the same bits, cycle-model statistics and recorded timelines (TT_DUMP's trace.json) with and
    without batching (fresh processes: the device's statistics accumulate). Macro-free schedules (TT_SFPU_MACRO=0):
    the batched paths do not take SFPLOADMACRO work."""
    pytest.importorskip("tinygrad")
    import json
    import subprocess
    import sys
    res = {}
    for mode in ("on", "off"):
        out = subprocess.run([sys.executable, "-c", _E2E, mode], cwd=REPO_ROOT, capture_output=True, text=True,
                             env={**os.environ, "PYTHONPATH": str(REPO_ROOT), "TT_DUMP": str(tmp_path / mode),
                                  "TT_SFPU_MACRO": "0"},
                             timeout=300)
        assert out.returncode == 0, out.stderr[-3000:]
        res[mode] = json.loads(out.stdout.strip().splitlines()[-1])
    assert res["on"]["batched"] > 0 and res["off"]["batched"] == 0
    assert res["on"]["all_batched"] > res["on"]["batched"] and res["off"]["all_batched"] == 0
    assert res["on"]["bits"] == res["off"]["bits"]
    assert res["on"]["stats"] == res["off"]["stats"]
    traces = {mode: {p.parent.name: json.loads(p.read_text()) for p in (tmp_path / mode).glob("*/trace.json")}
              for mode in ("on", "off")}
    assert len(traces["on"]) == 5 and traces["on"].keys() == traces["off"].keys()
    for name, tr in traces["on"].items():
        other = traces["off"][name]
        assert tr["otherData"]["totals_only"] is False
        assert tr["traceEvents"] == other["traceEvents"] and tr["otherData"]["counts"] == other["otherData"]["counts"]


def test_batch_refuses_dropped_write_to_constant(batch_counter):
    """SFPLOAD to LReg 8 writes nothing: LReg0 is still read before the body writes it (loop-carried)."""
    body = [LOAD(8, 0), MAD(0, 10, 9, 1), E("SFPMOV", lreg_c=1, lreg_dest=0, instr_mod1=0), STORE(1, 64, 1)]
    a = _state(mop_run(body))
    assert batch_counter["n"] == 0
    batch_counter["on"] = False
    _same(a, _state(mop_run(body)))


def _random_body(rng, clean: bool):
    """A random whitelisted body; `clean`: every LReg read is a constant or written earlier in the body (so it
    batches unless Dst or timing rules refuse), else reads are arbitrary (often loop-carried: must be refused)."""
    defined = set()

    def r():                         # a destination (also marks it defined)
        v = int(rng.integers(0, 8))
        defined.add(v)
        return v

    def c():                         # a source
        pool = sorted(defined) + [8, 9, 10, 11] if clean else list(range(12))
        return int(rng.choice(pool))

    def rd():                        # a destination the instruction also reads
        v = int(rng.choice(sorted(defined))) if clean else int(rng.integers(0, 8))
        defined.add(v)
        return v
    ops = [
        lambda: MAD(c(), c(), c(), r()),
        lambda: E("SFPMAD", lreg_src_a=c(), lreg_src_b=c(), lreg_src_c=c(), lreg_dest=r(),
                  instr_mod1=int(rng.integers(0, 4))),
        lambda: E("SFPADD", lreg_src_a=10, lreg_src_b=c(), lreg_src_c=c(), lreg_dest=r(), instr_mod1=0),
        lambda: E("SFPMUL", lreg_src_a=c(), lreg_src_b=c(), lreg_src_c=9, lreg_dest=r(), instr_mod1=0),
        lambda: E("SFPEXEXP", lreg_c=c(), lreg_dest=r(), instr_mod1=int(rng.choice([0, 1]))),
        lambda: E("SFPEXMAN", lreg_c=c(), lreg_dest=r(), instr_mod1=int(rng.integers(0, 2))),
        lambda: E("SFPSETEXP", lreg_c=c(), lreg_dest=rd(), instr_mod1=int(rng.integers(0, 3)),
                  imm12_math=int(rng.integers(0, 256))),
        lambda: E("SFPSETSGN", lreg_c=c(), lreg_dest=rd(), instr_mod1=int(rng.integers(0, 2)), imm12_math=1),
        lambda: E("SFPABS", lreg_c=c(), lreg_dest=r(), instr_mod1=int(rng.integers(0, 2))),
        lambda: E("SFPAND", lreg_c=c(), lreg_dest=rd(), instr_mod1=0),
        lambda: E("SFPXOR", lreg_c=c(), lreg_dest=rd()),
        lambda: E("SFPMOV", lreg_c=c(), lreg_dest=r(), instr_mod1=int(rng.integers(0, 2))),
        lambda: E("SFPLOADI", lreg_ind=r(), instr_mod0=int(rng.choice([0, 2, 4])), imm16=int(rng.integers(0, 65536))),
        lambda: E("SFPLOADI", lreg_ind=rd(), instr_mod0=int(rng.choice([8, 10])), imm16=int(rng.integers(0, 65536))),
        lambda: E("SFPDIVP2", lreg_c=c(), lreg_dest=r(), instr_mod1=int(rng.integers(0, 2)),
                  imm12_math=int(rng.integers(0, 256))),
        lambda: E("SFPSHFT", lreg_c=c(), lreg_dest=rd(), instr_mod1=int(rng.choice([0, 1, 3, 5])),
                  imm12_math=int(rng.integers(0, 4096))),
        lambda: E("SFPCAST", lreg_src_c=c(), lreg_dest=r(), instr_mod1=int(rng.choice([0, 2, 3]))),
        lambda: E("SFPLZ", lreg_c=c(), lreg_dest=r(), instr_mod1=int(rng.choice([0, 4]))),
        lambda: E("SFPIADD", lreg_c=c(), lreg_dest=rd(), instr_mod1=int(rng.choice([4, 5, 6])),
                  imm12_math=int(rng.integers(0, 4096))),
        lambda: LOAD(r(), 64 * int(rng.integers(0, 6))),
        lambda: STORE(c(), 64 * int(rng.integers(4, 8))),
    ]
    body = [LOAD(r(), 0), LOAD(r(), 64)]
    body += [ops[int(rng.integers(0, len(ops)))]() for _ in range(int(rng.integers(1, 12)))]
    return body + [STORE(c(), 64 * int(rng.integers(4, 8)), 1)]


@pytest.mark.parametrize("seed", range(40))
def test_batch_random_bodies(seed, batch_counter):
    """Random whitelisted bodies (loop-carried or not, spills, flag-neutral modes; NOPs between where the strict
    stall-blind rule would trip): batched and one-by-one runs leave identical state, or raise the same error."""
    rng = np.random.default_rng(100 + seed)
    body = _random_body(rng, clean=seed % 4 < 3)
    body = [w for x in body for w in (x, E("SFPNOP"))] if seed % 2 else body
    data_seed = int(rng.integers(0, 1 << 30))

    def go():      # every third seed records timelines (they must be equal too)
        try:
            return _state(mop_run(body, reps=16, setup=[E("SFPLOADI", lreg_ind=i, instr_mod0=0, imm16=0x3F80 + i)
                                                          for i in range(8)], record=seed % 3 == 0))
        except EmuError as e:
            return str(e)
    np.random.seed(data_seed)
    a = go()
    batched = batch_counter["n"]
    batch_counter["on"] = False
    b = go()
    if isinstance(a, str) or isinstance(b, str):
        assert a == b
    else:
        _same(a, b)
    _RANDOM_BATCHED.append(batched > 0)


_RANDOM_BATCHED: list = []


def test_batch_random_bodies_mostly_batched():
    """The random bodies above really exercise the batched path (most are batchable)."""
    if len(_RANDOM_BATCHED) < 40:
        pytest.skip("run together with test_batch_random_bodies")
    assert sum(_RANDOM_BATCHED) >= 10, _RANDOM_BATCHED


# --- deferred SFPU work (Tensix.defer / flush_deferred): bodies pushed one word at a time ---------------------------------
# Bodies longer than the replay buffer are pushed by TRISC1 word by word (templates/compute.c.j2); the Tensix issues
# each at once (timing, RWCs, strict checks) but executes the data later, batching repeated bodies. Everything must be
# bit-identical to running each instruction as it arrives (deferral.DEFER_SFPU = False).


@pytest.fixture
def batch_spy(monkeypatch):
    """Counts instructions run through sfpu_batch.execute_batch (by either batching path)."""
    orig = sfpu_batch.execute_batch
    state = {"n": 0}

    def wrapped(sfpu, body, k, addrs, cycle):
        state["n"] += k * len(body)
        return orig(sfpu, body, k, addrs, cycle)
    monkeypatch.setattr(sfpu_batch, "execute_batch", wrapped)
    return state


def _full_state(tx):
    s = tx.sfpu           # (the property executes deferred work first)
    return _state(tx) + (s.lane_flags.copy(), s.use_lane_flags.copy(), s.stack_depth, s.sfpu_fp32_enabled,
                         s.srcb_is_fp16, tx.issue_t)


def _tti_run(body, setup=(), tiles=2, rows=32, dst_rows=512, cfg1=None, seed=3, strict=True, mid=None):
    """Push `setup` + `rows` x `body` word by word into thread 1 per tile (the long-body shape of the compute
    template); `mid(tx)` runs between the tiles."""
    tx = tensix.Tensix(np.zeros(layout.L1_SIZE, np.uint8), strict=strict)
    data = np.random.default_rng(seed).standard_normal((dst_rows, 16)).astype(np.float32).view(np.uint32)
    tx.dst.write_rows32(0, data)
    if cfg1 is not None:
        tx.cfg_write(1, cfg1)
    tx.push(1, E("SETC16", setc16_reg=29, setc16_value=2))
    reset = E("SETRWC", rwc_cr=0, rwc_d=0, rwc_b=0, rwc_a=0, bit_mask=4, clear_ab_vld=0)
    for i in range(tiles):
        tx.push(1, reset)
        for w in list(setup) + list(body) * rows:
            tx.push(1, w)
        if mid is not None and i + 1 < tiles:
            mid(tx)
    return tx


def _both(run, monkeypatch):
    """run() with deferral on and off: (state or error text) of each."""
    out = []
    for on in (True, False):
        monkeypatch.setattr(deferral, "DEFER_SFPU", on)
        try:
            out.append(_full_state(run()))
        except EmuError as e:
            out.append(str(e))
    return out


def _same_or_same_error(a, b):
    if isinstance(a, str) or isinstance(b, str):
        assert a == b
    else:
        _same(a, b)


def test_defer_long_body_equals_one_by_one(monkeypatch, batch_spy):
    """The real 171-word body (predicated: SFPSETCC/SFPGT/SFPLE/SFPENCC) with its 14 setup words: batched through
    the deferral, identical Dst, LRegs, flags, cycle model and counters."""
    run = lambda: _tti_run(bench.LONG_BODY, setup=bench.LONG_SETUP, cfg1=bench.LONG_CFG1, tiles=3)
    a, b = _both(run, monkeypatch)
    assert batch_spy["n"] == 3 * 32 * len(bench.LONG_BODY)
    _same(a, b)


@pytest.mark.parametrize("seed", range(4))
def test_deferred_sfpconfig_identical(seed, monkeypatch):
    """SFPCONFIG into the programmable constants (sfpu_batch.queue_only: deferred, run in order, never in a batch) in
    random predicated bodies, next to SFPMADs that read those constants: with the deferral on and off and the C part
    on and off (off, every body that repeats is tried as a batch, which must not take one holding an SFPCONFIG), the
    same state, cycles and errors; with both on, no SFPCONFIG runs through Python."""
    rng = np.random.default_rng(50 + seed)
    body = _random_pred_body(rng, clean=True)
    for _ in range(3):
        body.insert(int(rng.integers(0, len(body) + 1)),
                    E("SFPCONFIG", config_dest=int(rng.integers(9, 15)), instr_mod1=int(rng.choice([0, 1, 8, 9])),
                      imm16_math=int(rng.integers(0, 1 << 16))))
        body.insert(int(rng.integers(0, len(body) + 1)),
                    E("SFPMAD", lreg_src_a=int(rng.integers(0, 8)), lreg_src_b=int(rng.integers(11, 15)),
                      lreg_src_c=int(rng.integers(0, 8)), lreg_dest=int(rng.integers(0, 8)), instr_mod1=0))
    results = []
    for native in (True, False):
        monkeypatch.setattr(sfpu_native, "NATIVE_SFPU", native)
        before = sfpu_native.traffic["SFPCONFIG"]
        results += _both(lambda: _tti_run(body, rows=32, strict=False), monkeypatch)
        if native:
            assert sfpu_native.traffic["SFPCONFIG"] - before == 2 * 32 * 3       # (all of them: deferral off)
    for r in results[1:]:
        _same_or_same_error(results[0], r)


def test_no_batch_plan_holds_an_sfpconfig():
    """deferral._dq_plan refuses a body holding an SFPCONFIG (sfpu_batch.queue_only) also where the body gives the
    lane flags back as it found them (an SFPENCC after it), and plans the same body with an SFPNOP in its place."""
    tx = tensix.Tensix(np.zeros(layout.L1_SIZE, np.uint8), strict=False)
    cfg, nop = E("SFPCONFIG", config_dest=12, instr_mod1=0, imm16_math=0), E("SFPNOP")
    encc = E("SFPENCC", lreg_dest=0, instr_mod1=10, imm12_math=0)         # LaneFlags := 0, UseLaneFlags := 0
    for w in (cfg, nop, encc):
        tx._fast_info(w)
    assert tx._dq_plan((cfg, encc), 0, 0) is False
    assert tx._dq_plan((nop, encc), 0, 0)


def test_defer_bench_kernels_identical(monkeypatch, batch_spy):
    for on in (True, False):
        monkeypatch.setattr(deferral, "DEFER_SFPU", on)
        r = [bench.bench_sfpu_long(2), bench.bench_tile_long(2)]
        if on:
            assert batch_spy["n"] >= 2 * 2 * 32 * len(bench.LONG_BODY)
            first = r
    for x, y in zip(first, r):
        for k in ("sfpu_instructions", "cycles", "checksum", "tensix_cycles", "tensix_instructions",
                  "riscv_instructions"):
            assert x.get(k) == y.get(k), k


def test_defer_exp2_and_spill_bodies(monkeypatch, batch_spy):
    for name, body in sorted(BODIES.items()):
        batch_spy["n"] = 0
        a, b = _both(lambda: _tti_run(body), monkeypatch)
        assert batch_spy["n"] == 2 * 32 * len(body), name
        _same(a, b)


def test_defer_observers_see_executed_work(monkeypatch):
    """Reading Dst/LRegs from outside (here between tiles, and a pack-side Dst read through tx.dst) sees the
    deferred work done; a new tile's SETRWC flushes the previous one."""
    seen = []

    def mid(tx):
        seen.append((tx.dst.rows32[192:256].copy(), tx.sfpu.lreg[:8].copy()))
    res = []
    for on in (True, False):
        monkeypatch.setattr(deferral, "DEFER_SFPU", on)
        seen.clear()
        tx = _tti_run(BODIES["spill"], tiles=3, mid=mid)
        res.append([x for pair in seen for x in pair] + [tx.dst.rows32.copy()])
    for x, y in zip(*res):
        assert np.array_equal(x, y)


def test_defer_keeps_strict_errors(monkeypatch):
    """Never-written Dst rows, a stall-blind read after a MAD, an SFPADD without LReg[10], an odd Dst address: the
    same error at the same instruction with and without deferral."""
    cases = [
        lambda: _tti_run(EXP2_BODY, dst_rows=40),
        lambda: _tti_run([LOAD(0, 0), MAD(0, 0, 9, 1), E("SFPIADD", lreg_c=0, lreg_dest=1, instr_mod1=4,
                                                              imm12_math=0), STORE(1, 64, 1)]),
        lambda: _tti_run([LOAD(0, 0), E("SFPADD", lreg_src_a=0, lreg_src_b=0, lreg_src_c=9, lreg_dest=1,
                                        instr_mod1=0), STORE(1, 64, 1)]),
        lambda: _tti_run([LOAD(0, 0), MAD(0, 0, 9, 1), STORE(1, 65, 1)]),
    ]
    for run in cases:
        a, b = _both(run, monkeypatch)
        assert isinstance(a, str) and a == b, (a, b)


def test_defer_predicated_store_then_load(monkeypatch, batch_spy):
    """A store on some lanes only (rows partly written) followed by a load of those rows: the strict check must see
    exactly what the one-by-one path sees (deferred work executed first)."""
    pred = [E("SFPENCC", instr_mod1=10, imm12_math=3),                      # UseLaneFlags := 1, LaneFlags := 1
            LOAD(0, 0), E("SFPSETCC", lreg_c=0, instr_mod1=0, imm12_math=0),   # lanes with x < 0
            STORE(0, 256), E("SFPENCC", instr_mod1=0, imm12_math=0),
            LOAD(1, 256), MAD(1, 10, 9, 2), STORE(2, 320, 1)]
    for rows, dst_rows in ((32, 512), (8, 256)):
        a, b = _both(lambda: _tti_run(pred, rows=rows, dst_rows=dst_rows), monkeypatch)
        _same_or_same_error(a, b)


def _random_pred_body(rng, clean: bool):
    """_random_body plus lane-flag instructions (SFPSETCC, SFPENCC, SFPGT/SFPLE, flag-setting SFPIADD/SFPEXEXP/SFPLZ)
    and SFPADDI/SFPMULI; with `clean` the body usually ends with an SFPENCC restoring the entry flag state."""
    body = _random_body(rng, clean)
    flag_ops = [
        lambda: E("SFPSETCC", lreg_c=int(rng.integers(0, 8)), instr_mod1=int(rng.choice([0, 1, 2, 4, 6, 8])),
                  imm12_math=int(rng.integers(0, 2))),
        lambda: E("SFPENCC", instr_mod1=int(rng.choice([0, 1, 2, 8, 10])), imm12_math=int(rng.integers(0, 4))),
        lambda: E("SFPGT", lreg_c=int(rng.integers(0, 12)), lreg_dest=int(rng.integers(0, 8)),
                  instr_mod1=int(rng.choice([0, 1, 8, 9]))),
        lambda: E("SFPLE", lreg_c=int(rng.integers(0, 12)), lreg_dest=int(rng.integers(0, 8)),
                  instr_mod1=int(rng.choice([0, 1, 8, 9]))),
        lambda: E("SFPIADD", lreg_c=int(rng.integers(0, 12)), lreg_dest=int(rng.integers(0, 8)),
                  instr_mod1=int(rng.integers(0, 16)), imm12_math=int(rng.integers(0, 4096))),
        lambda: E("SFPEXEXP", lreg_c=int(rng.integers(0, 12)), lreg_dest=int(rng.integers(0, 8)),
                  instr_mod1=int(rng.integers(0, 16))),
        lambda: E("SFPLZ", lreg_c=int(rng.integers(0, 12)), lreg_dest=int(rng.integers(0, 8)),
                  instr_mod1=int(rng.integers(0, 16))),
        lambda: E("SFPADDI", lreg_dest=int(rng.integers(0, 8)), instr_mod1=int(rng.choice([0, 2])),
                  imm16_math=int(rng.integers(0, 65536))),
        lambda: E("SFPMULI", lreg_dest=int(rng.integers(0, 8)), instr_mod1=int(rng.choice([0, 2])),
                  imm16_math=int(rng.integers(0, 65536))),
    ]
    if not clean:
        for _ in range(int(rng.integers(1, 6))):
            at = int(rng.integers(1, len(body)))
            body.insert(at, flag_ops[int(rng.integers(0, len(flag_ops)))]())
        return body
    # codegen-shaped conditional blocks: condition on defined LRegs, predicated writes to defined LRegs, SFPENCC
    for _ in range(int(rng.integers(1, 3))):
        at = int(rng.integers(2, len(body)))
        written = 0
        for w in body[:at]:
            written |= sfpu_batch.batch_regs(*isa.decode(w))[1]
        d = [r for r in range(8) if written >> r & 1]
        pick = lambda: int(rng.choice(d))
        cond = [lambda: E("SFPSETCC", lreg_c=pick(), instr_mod1=int(rng.choice([0, 2, 4, 6])), imm12_math=0),
                lambda: E("SFPGT", lreg_c=pick(), lreg_dest=pick(), instr_mod1=1),
                lambda: E("SFPLE", lreg_c=pick(), lreg_dest=pick(), instr_mod1=int(rng.choice([1, 9]))),
                lambda: E("SFPIADD", lreg_c=pick(), lreg_dest=pick(), instr_mod1=1,
                          imm12_math=int(rng.integers(0, 4096))),
                lambda: E("SFPEXEXP", lreg_c=pick(), lreg_dest=pick(), instr_mod1=2)]
        then = [lambda: E("SFPMOV", lreg_c=pick(), lreg_dest=pick(), instr_mod1=0),
                lambda: E("SFPLOADI", lreg_ind=pick(), instr_mod0=0, imm16=int(rng.integers(0, 65536))),
                lambda: E("SFPMULI", lreg_dest=pick(), instr_mod1=0, imm16_math=int(rng.integers(0, 65536))),
                lambda: MAD(pick(), pick(), pick(), pick())]
        block = [cond[int(rng.integers(0, len(cond)))]()]
        block += [then[int(rng.integers(0, len(then)))]() for _ in range(int(rng.integers(1, 3)))]
        body[at:at] = block + [E("SFPENCC", instr_mod1=0, imm12_math=0)]
    return body


_PRED_BATCHED: list = []


@pytest.mark.parametrize("seed", range(40))
def test_defer_random_predicated_bodies(seed, monkeypatch, batch_spy):
    """Random bodies with lane-flag instructions pushed word by word: deferral on and off leave identical state
    (LRegs, flags, Dst, written rows, cycle model, counters) or raise the same error."""
    rng = np.random.default_rng(500 + seed)
    body = _random_pred_body(rng, clean=seed % 4 < 3)
    body = [w for x in body for w in (x, E("SFPNOP"))] if seed % 2 else body
    setup = [E("SFPLOADI", lreg_ind=i, instr_mod0=0, imm16=0x3F80 + 3 * i) for i in range(8)]
    if seed % 3:
        setup.append(E("SFPENCC", instr_mod1=10, imm12_math=3))
    a, b = _both(lambda: _tti_run(body, setup=setup, rows=16, seed=seed), monkeypatch)
    _same_or_same_error(a, b)
    _PRED_BATCHED.append(batch_spy["n"] > 0)


def test_defer_random_predicated_mostly_batched():
    if len(_PRED_BATCHED) < 40:
        pytest.skip("run together with test_defer_random_predicated_bodies")
    assert sum(_PRED_BATCHED) >= 10, _PRED_BATCHED


# A body that also adds each row's value into a running sum (tinygrad's einsum / sum kernels on the SFPU: the product is
# stored and accumulated into L7): everything but the accumulation runs batched, the accumulation row after row.
RUNNING_SUM = [LOAD(0, 0), LOAD(1, 64), E("SFPMAD", lreg_src_a=0, lreg_src_b=1, lreg_src_c=9, lreg_dest=0, instr_mod1=2),
               STORE(0, 128, 1), E("SFPADD", lreg_src_a=10, lreg_src_b=7, lreg_src_c=0, lreg_dest=7, instr_mod1=0)]


def test_defer_running_sum_splits_off_the_chain(monkeypatch, batch_spy):
    """The running-sum body: deferral on and off leave identical state, with the four per-row instructions batched
    and only the accumulation (reading the previous row's sum) run one repetition at a time."""
    setup = [E("SFPLOADI", lreg_ind=7, instr_mod0=0, imm16=0)]
    a, b = _both(lambda: _tti_run(RUNNING_SUM, setup=setup, tiles=3, rows=32), monkeypatch)
    assert batch_spy["n"] == 3 * 32 * 4
    _same(a, b)


# Running minimum / maximum and 23-bit integer products (tinygrad's cummax / cummin and index kernels): SFPSWAP and
# SFPMUL24 are deferred too; a row step's minimum-so-far (L2) is carried to the next row step. The carried SFPSWAP also
# writes the row's L1, which the next row step loads before reading: the rest hands L1 over to the chain.
RUNNING_MIN = [LOAD(1, 0), LOAD(3, 64),
               E("SFPMUL24", lreg_src_a=1, lreg_src_b=3, lreg_src_c=1, lreg_dest=4, instr_mod1=0),
               E("SFPMUL24", lreg_src_a=3, lreg_src_b=4, lreg_src_c=3, lreg_dest=5, instr_mod1=1), E("SFPNOP"),
               E("SFPSWAP", lreg_src_c=4, lreg_dest=5, instr_mod1=3), E("SFPNOP"), STORE(5, 128), STORE(4, 192, 1),
               E("SFPSWAP", lreg_src_c=1, lreg_dest=2, instr_mod1=1)]


@pytest.mark.parametrize("swap_mod1", [0, 1, 5, 12])
def test_defer_running_min_and_mul24(swap_mod1, monkeypatch, batch_spy):
    """SFPSWAP (swap, or min / max by lane pattern) and SFPMUL24 (low and UPPER) deferred and batched: deferral on
    and off leave identical Dst, LRegs, flags, cycle model and counters; the per-row part runs batched, the carried
    SFPSWAP row after row."""
    body = RUNNING_MIN[:5] + [E("SFPSWAP", lreg_src_c=4, lreg_dest=5, instr_mod1=swap_mod1)] + RUNNING_MIN[6:]
    setup = [E("SFPLOADI", lreg_ind=2, instr_mod0=0, imm16=0x7F80)]
    a, b = _both(lambda: _tti_run(body, setup=setup, tiles=2, rows=32), monkeypatch)
    assert batch_spy["n"] == 2 * 32 * (len(body) - 1)
    _same(a, b)


def test_defer_transpose_body(monkeypatch, batch_spy):
    """SFPTRANSP (the SFPU matmul's operand transpose) deferred and batched: every LReg it reads is written earlier in
    the row step; deferral on and off leave identical state."""
    body = [LOAD(0, 0), LOAD(1, 64), E("SFPMOV", lreg_c=0, lreg_dest=2, instr_mod1=1),
            E("SFPMOV", lreg_c=1, lreg_dest=3, instr_mod1=0)]
    body += [MAD(i % 2, (i + 1) % 4, 9, 4 + i) for i in range(4)]
    body += [E("SFPTRANSP"), STORE(0, 128), STORE(5, 192, 1)]
    a, b = _both(lambda: _tti_run(body, tiles=2, rows=32), monkeypatch)
    assert batch_spy["n"] == 2 * 32 * len(body)
    _same(a, b)


@pytest.mark.parametrize("acc0,mod1,fast", [(0x0000, 0, True), (0x4000, 2, True), (0x0001, 0, False),
                                             (0x7F80, 0, False)])
def test_defer_running_sum_as_float32_accumulate(acc0, mod1, fast, monkeypatch):
    """The accumulation chain as one float32 np.add.accumulate (sfpu_batch.running_sum): deferral on and off leave
    identical state; it is taken for ordinary sums (also acc - x), refused (the chain then runs repetition by
    repetition) when the start value is a denormal or infinite."""
    body = RUNNING_SUM[:-1] + [E("SFPADD", lreg_src_a=10, lreg_src_b=7, lreg_src_c=0, lreg_dest=7, instr_mod1=mod1)]
    setup = [E("SFPLOADI", lreg_ind=7, instr_mod0=0, imm16=acc0)]
    orig, used = sfpu_batch.running_sum, []
    monkeypatch.setattr(sfpu_batch, "running_sum", lambda *a: used.append(orig(*a)) or used[-1])
    a, b = _both(lambda: _tti_run(body, setup=setup, tiles=2, rows=32), monkeypatch)
    _same(a, b)
    assert used and all(used) == fast


def test_fma_add_is_the_float32_sum():
    """What running_sum relies on: the Blackhole FMA of 1.0 * a + c equals the IEEE float32 sum when a, c and the sum
    are finite normals or zeros (close and distant exponents, the 24..27-bit shift-out boundary, near-cancellation,
    random bits)."""
    rng = np.random.default_rng(5)
    n = 1 << 15
    a = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    near = a.astype(np.int64)
    c = np.concatenate([
        (near + rng.integers(-(1 << 26), 1 << 26, n)).astype(np.uint32) ^ (rng.integers(0, 2, n).astype(np.uint32) << 31),
        (a ^ np.uint32(1 << 31)) + rng.integers(-40, 40, n).astype(np.uint32),
        (near - (rng.integers(20, 32, n) << 23) + rng.integers(0, 1 << 23, n)).astype(np.uint32),
        rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)])
    a = np.tile(a, 4)
    with np.errstate(all="ignore"):
        ieee = (a.view(np.float32) + c.view(np.float32)).view(np.uint32)
    keep = np.ones(a.shape, bool)
    for v in (a, c, ieee):
        e = v & 0x7F800000
        keep &= ((e != 0) & (e != 0x7F800000)) | ((v & 0x7FFFFFFF) == 0)
    assert keep.sum() > 3 * n
    bh = fma_bh_stacked(np.stack([np.full(keep.sum(), 0x3F800000, np.uint32), a[keep], c[keep]]))
    np.testing.assert_array_equal(bh, ieee[keep])


def test_dq_chain_rules():
    """_dq_chain's decisions on (reads, writes, is_mem) bodies: the running sum splits off its accumulation, and an
    instruction using the sum joins it; a chain that stores, and a value of the rest the chain reads before the rest
    writes it (or that the rest rewrites after the chain read it) refuse; an LReg the rest hands over to the chain."""
    L = lambda *r: sum(1 << x for x in r)
    load0, load1, mad, store0 = (0, L(0), True), (0, L(1), True), (L(0, 1), L(0), False), (L(0), 0, True)
    acc = (L(0, 7), L(7), False)
    assert deferral._dq_chain([load0, load1, mad, store0, acc]) == (4,)
    assert deferral._dq_chain([load0, load1, mad, store0]) == ()
    assert deferral._dq_chain([load0, load1, mad, acc, (L(7), 0, True)]) is None           # the sum is stored
    assert deferral._dq_chain([load0, acc, (L(7), L(2), False), store0]) == (1, 2)
    assert deferral._dq_chain([acc, load0, load1, mad, store0]) is None                    # L0 of the previous row
    assert deferral._dq_chain([load0, acc, (0, L(0), False), store0]) is None              # L0 rewritten after
    # a running minimum whose SFPSWAP also writes the row's L1: handed over when the rest loads L1 first and is done
    # with it before the swap (what reads the swap's L1 joins the chain); not when the rest reads L1 before (re)loading
    # it, or stores what the swap wrote
    load1, use1, swap = (0, L(1), True), (L(1), L(4), False), (L(1, 2), L(1, 2), False)
    assert deferral._dq_chain([load1, use1, swap]) == (2,)
    assert deferral._dq_chain([load1, swap, use1]) == (1, 2)
    assert deferral._dq_chain([load1, swap, (L(1), 0, True)]) is None
    assert deferral._dq_chain([use1, load1, swap]) is None
    assert deferral._dq_chain([(L(1), L(1), True), use1, swap]) is None                     # a masked load of L1
    # a compensated sum (Kahan): y = x - c, t = s + y, c = (t - s) - y, s = t; only s and c are carried, the row's
    # load and its product stay batched; L1 (the row's value) is read by the chain before it rewrites it
    x, y = (0, L(1), True), (L(1, 7), L(2), False)
    kahan = [x, (L(1), L(1), False), y, (L(2, 6), L(3), False), (L(3, 6), L(4), False), (L(4, 2), L(7), False),
             (L(3), L(6), False)]
    assert deferral._dq_chain(kahan) == (2, 3, 4, 5, 6)
    assert deferral._dq_chain(kahan[:2] + [(L(1, 7), L(1), False)] + kahan[3:]) == (2, 3, 4, 5, 6)


_CARRIED_SPLIT: list = []


@pytest.mark.parametrize("seed", range(30))
def test_defer_random_carried_bodies(seed, monkeypatch):
    """Random bodies whose reads are often loop-carried, pushed word by word: deferral on and off leave identical
    state or raise the same error (the chain split where it applies, refusal elsewhere)."""
    rng = np.random.default_rng(900 + seed)
    body = _random_body(rng, clean=seed % 3 != 0)
    used = 0
    for w in body:
        ins = isa.OPCODES[w >> 24]
        reads, writes = sfpu_batch.batch_regs(ins.name, ins.decode(w))
        used |= reads | writes
    free = [r for r in range(8) if not used >> r & 1] or [7]
    loaded = [isa.OPCODES[w >> 24].decode(w)["lreg_ind"] for w in body[:2]]
    for _ in range(int(rng.integers(1, 3))):        # accumulations into an LReg the body leaves alone, if any
        acc, x = int(rng.choice(free)), int(rng.choice(loaded + list(range(8))[:2 + seed % 7]))
        body.insert(int(rng.integers(2, len(body))), E("SFPADD", lreg_src_a=10, lreg_src_b=acc, lreg_src_c=x,
                                                         lreg_dest=acc, instr_mod1=0))
    setup = [E("SFPLOADI", lreg_ind=i, instr_mod0=0, imm16=0x3F80 + 3 * i) for i in range(8)]
    orig, split = deferral._dq_chain, []
    monkeypatch.setattr(deferral, "_dq_chain", lambda infos: split.append(orig(infos)) or split[-1])
    a, b = _both(lambda: _tti_run(body, setup=setup, rows=16, seed=seed), monkeypatch)
    _same_or_same_error(a, b)
    _CARRIED_SPLIT.append(any(split))


def test_defer_random_carried_bodies_split_some():
    if len(_CARRIED_SPLIT) < 30:
        pytest.skip("run together with test_defer_random_carried_bodies")
    assert sum(_CARRIED_SPLIT) >= 5, _CARRIED_SPLIT


def test_defer_small_queue_limit(monkeypatch, batch_spy):
    """A full queue is executed mid-body (DQ_MAX): the rest still batches, results identical."""
    monkeypatch.setattr(deferral, "DQ_MAX", 2000)
    run = lambda: _tti_run(bench.LONG_BODY, setup=bench.LONG_SETUP, cfg1=bench.LONG_CFG1, tiles=2)
    a, b = _both(run, monkeypatch)
    assert batch_spy["n"] > 0.6 * 2 * 32 * len(bench.LONG_BODY)
    _same(a, b)


def test_defer_mop_of_replay_predicated_body(monkeypatch, batch_spy):
    """A predicated body issued as MOP -> REPLAY (which batch_sfpu refuses: lane flags) is batched through the
    deferral instead; identical to one by one."""
    body = [LOAD(0, 0), E("SFPSETCC", lreg_c=0, instr_mod1=0, imm12_math=0), MAD(0, 0, 9, 0),
            E("SFPENCC", instr_mod1=0, imm12_math=0), STORE(0, 64, 1)]
    setup = [E("SFPENCC", instr_mod1=10, imm12_math=3)]
    res = []
    for on in (True, False):
        monkeypatch.setattr(deferral, "DEFER_SFPU", on)
        res.append(_full_state(mop_run(body, setup=setup)))
    assert batch_spy["n"] == 2 * 32 * len(body)
    _same(*res)


def test_defer_kept_dst_reference_sees_work(monkeypatch):
    """A reference to tx.dst taken before the pushes (as the tile's RISC-V Dst window keeps one) reads Dst with the
    deferred work done."""
    res = []
    for on in (True, False):
        monkeypatch.setattr(deferral, "DEFER_SFPU", on)
        tx = tensix.Tensix(np.zeros(layout.L1_SIZE, np.uint8), strict=True)
        d = tx.dst
        d.write_rows32(0, np.random.default_rng(1).standard_normal((512, 16)).astype(np.float32).view(np.uint32))
        tx.push(1, E("SETC16", setc16_reg=29, setc16_value=2))
        for w in EXP2_BODY * 32:
            tx.push(1, w)
        if on:
            assert tx.deferred                     # really deferred at this point
        res.append((d.rows32.copy(), d.written.copy()))
    assert np.array_equal(res[0][0], res[1][0]) and np.array_equal(res[0][1], res[1][1])


# --- closed-form row-step bookkeeping and the shortened push paths (issue #3, second round) ---------------------------
# batch_sfpu computes the Dst addresses of a batched body in closed form when every address modifier it uses only
# adds constants (addr_mod_steps), and issues only until the cycle model is provably periodic (batch_timing.periodic),
# then advances it by n repetitions at once (batch_timing.skip). mop_batch.BATCH_CLOSED_FORM = False walks every row
# step.
# The push paths (Tensix.push, drain_deferrable, the tile's per-core pusher) use the cycle model's SFPU issue rule.

MM_BODY = [LOAD(4, 0), LOAD(5, 0x40), MAD(5, 0, 4, 4), LOAD(6, 0x42), MAD(6, 1, 4, 4), LOAD(5, 0x60),
           MAD(5, 2, 4, 4), LOAD(6, 0x62), MAD(6, 3, 4, 4), STORE(4, 0, 2)]     # the fp32 SFPU matmul's shape
CLOSED_BODIES = {
    **BODIES,
    "matmul": MM_BODY,
    "mad_chain": [LOAD(0, 0), MAD(0, 0, 9, 1), MAD(1, 1, 0, 2), MAD(2, 10, 1, 3), E("SFPNOP"), STORE(3, 64, 1)],
    "no_mad": [LOAD(0, 0), E("SFPABS", lreg_c=0, lreg_dest=1, instr_mod1=1), STORE(1, 64, 1)],
}
# ADDR_MOD_DST_SEC2 (thread cfg 30): Dst += 4, as the matmul template sets it
MM_SETUP = [E("SETC16", setc16_reg=30, setc16_value=4)] + [E("SFPLOADI", lreg_ind=i, instr_mod0=0, imm16=0x3F80 + i)
                                                           for i in range(4)]


@pytest.fixture
def skip_counter(monkeypatch):
    """Counts repetitions advanced in closed form (batch_timing.skip)."""
    orig = batch_timing.skip
    state = {"n": 0}

    def wrapped(tm, t, st, s1, s2, n, p):
        state["n"] += n
        return orig(tm, t, st, s1, s2, n, p)
    monkeypatch.setattr(batch_timing, "skip", wrapped)
    return state


def _closed_both(run, monkeypatch):
    out = []
    for on in (True, False):
        monkeypatch.setattr(mop_batch, "BATCH_CLOSED_FORM", on)
        try:
            out.append(_full_state(run()))
        except EmuError as e:
            out.append(str(e))
    return out


@pytest.mark.parametrize("name", sorted(CLOSED_BODIES))
@pytest.mark.parametrize("reps", [4, 8, 16])
def test_closed_form_batch_identical(name, reps, monkeypatch, batch_counter, skip_counter):
    """Dst, LRegs, flags, RWCs, cycle statistics and counters are identical with and without the closed form, and
    the closed form really skips repetitions."""
    body = CLOSED_BODIES[name]
    run = lambda: mop_run(body, reps=reps, setup=MM_SETUP, tiles=3)
    a, b = _closed_both(run, monkeypatch)
    _same_or_same_error(a, b)
    assert batch_counter["n"] > 0
    assert skip_counter["n"] > 0


def test_closed_form_refused_for_cr_modifiers(monkeypatch, batch_counter, skip_counter):
    """A body whose store uses an address modifier with CR set (Dst_Cr += 2, Dst := Dst_Cr): the RWC walk is not a
    constant step, so the closed form is not used; the result is unchanged."""
    body = [LOAD(0, 0), MAD(0, 0, 9, 1), STORE(1, 64, 3)]
    setup = [E("SETC16", setc16_reg=31, setc16_value=2 | 1 << 10)]   # ADDR_MOD_DST_SEC3: incr 2, CR
    run = lambda: mop_run(body, reps=16, setup=setup)
    a, b = _closed_both(run, monkeypatch)
    _same_or_same_error(a, b)
    assert skip_counter["n"] == 0


@pytest.mark.parametrize("seed", range(24))
def test_closed_form_random_bodies(seed, monkeypatch, batch_counter):
    """The random whitelisted bodies of test_batch_random_bodies, with NOP padding and Dst += 2/4 modifiers:
    identical state or identical error with and without the closed form."""
    rng = np.random.default_rng(500 + seed)
    body = _random_body(rng, clean=seed % 4 < 3)
    body = [w for x in body for w in (x, E("SFPNOP"))] if seed % 3 == 1 else body
    setup = [E("SETC16", setc16_reg=30, setc16_value=4)] + [E("SFPLOADI", lreg_ind=i, instr_mod0=0,
                                                               imm16=0x3F80 + i) for i in range(8)]
    data_seed = int(rng.integers(0, 1 << 30))
    reps = int(rng.choice([4, 9, 16]))

    def run():
        np.random.seed(data_seed)
        return mop_run(body, reps=reps, setup=setup, tiles=2)
    a, b = _closed_both(run, monkeypatch)
    _same_or_same_error(a, b)


def test_closed_form_after_fpu_write_and_gate(monkeypatch, batch_counter, skip_counter):
    """A batch issued while an FPU write to a Dst block is recent (the SFPLOAD hazard window) and the Wait Gate
    still holds the SFPU (release in the future): the closed form only starts once both are in the past; the same
    state either way (cycle-model state set directly: an FPU write to an untouched block, a gate release)."""
    def run():
        tx = tensix.Tensix(np.zeros(layout.L1_SIZE, np.uint8), strict=True)
        tx.dst.write_rows32(0, np.random.default_rng(5).standard_normal((512, 16)).astype(np.float32).view(np.uint32))
        body = MM_BODY
        replay = E("REPLAY", load_mode=0, execute_while_loading=0, len=len(body), start_idx=0)
        nop = E("NOP")
        for i, v in enumerate([1, 16, nop, nop, nop, replay, nop, replay, replay]):
            tx.mop_cfg_write(1, i, v)
        for w in MM_SETUP + [E("REPLAY", load_mode=1, execute_while_loading=0, len=len(body), start_idx=0), *body]:
            tx.push(1, w)
        tx.tm.dst_fpu_write[40] = tx.tm.clock[1] + 40        # rows 320..327: not read by the body
        tx.tm.gate[1] = (1 << 8, tx.tm.clock[1] + 25)         # B8 (SFPU) blocked until then
        tx.push(1, E("MOP", mop_type=1, loop_count=0, zmask_lo16_or_loop_count=0))
        return tx
    a, b = _closed_both(run, monkeypatch)
    assert not isinstance(a, str)
    _same(a, b)
    assert 0 < skip_counter["n"] < 15


def test_replay_pushed_rows_identical(monkeypatch, batch_spy):
    """bench_sfpu's shape (a 3-row REPLAY pushed from the host: drain_deferrable) with deferral on and off."""
    for on in (True, False):
        monkeypatch.setattr(deferral, "DEFER_SFPU", on)
        r = bench.bench_sfpu(256)
        if on:
            first = r
    for k in ("sfpu_instructions", "cycles"):
        assert first[k] == r[k], k


def _spy_issue(monkeypatch):
    """Every new Tensix gets an instance override of tm.issue (as test_cycles' spy): the general method then runs
    where push() / drain_deferrable would call TensixTiming.issue_sfpu."""
    orig_init = tensix.Tensix.__init__

    def init(self, *a, **k):
        orig_init(self, *a, **k)
        issue = self.tm.issue
        self.tm.issue = lambda *x, **y: issue(*x, **y)
    monkeypatch.setattr(tensix.Tensix, "__init__", init)


def test_push_inline_issue_matches_issue(monkeypatch):
    """Tensix.push and drain_deferrable issue SFPU words without Dst access through TensixTiming.issue_sfpu:
    identical state to the general method (the long TTI body; host-pushed MOP/REPLAY shapes)."""
    runs = [lambda: _tti_run(bench.LONG_BODY, setup=bench.LONG_SETUP, cfg1=bench.LONG_CFG1, tiles=2),
            lambda: mop_run(EXP2_BODY, reps=3, setup=MM_SETUP),
            lambda: mop_run(MM_BODY, reps=3, setup=MM_SETUP)]
    plain = [_full_state(run()) for run in runs]
    _spy_issue(monkeypatch)
    for a, run in zip(plain, runs):
        _same(a, _full_state(run()))


def test_tile_pusher_matches_generic_push(monkeypatch):
    """The tile's per-core `.ttinsn` pusher (PUSHP, position passed by the generated code) against the generic
    bus.push_tensix path (PUSH with C.pos): same cycles, counts and Dst."""
    from tt_backend.runtime.emu import tile as tile_mod
    a = [bench.bench_tile_long(2), bench.bench_tile(4)]
    init = tile_mod.Tile.__init__

    def init2(self, *x, **k):
        init(self, *x, **k)
        for c in self.cores.values():
            c.set_pusher("PUSHP", None)
            c.set_pusher("PUSHM", None)
    monkeypatch.setattr(tile_mod.Tile, "__init__", init2)
    b = [bench.bench_tile_long(2), bench.bench_tile(4)]
    for x, y in zip(a, b):
        for k in ("sfpu_instructions", "riscv_instructions", "cycles", "tensix_cycles", "checksum"):
            assert x.get(k) == y.get(k), k


def test_batch_timing_memo_identical(monkeypatch, batch_counter):
    """A batch entered from the same relative cycle-model state as an earlier one replays its recorded timing
    (batch_timing.replay); identical state to the row-step walk, and the memo is really used."""
    hits = {"n": 0}
    orig = batch_timing.replay

    def wrapped(*a):
        hits["n"] += 1
        return orig(*a)
    monkeypatch.setattr(batch_timing, "replay", wrapped)
    for name in ("matmul", "exp2", "mad_chain"):
        hits["n"] = 0
        run = lambda: mop_run(CLOSED_BODIES[name], reps=8, setup=MM_SETUP, tiles=4)
        a, b = _closed_both(run, monkeypatch)
        assert not isinstance(a, str)
        _same(a, b)
        assert hits["n"] >= 2, name


# ---------------------------------------------------------------- runs of `.ttinsn` words pushed in one call (PUSHM)

def _no_pushm(monkeypatch):
    """Tiles built from now on translate `.ttinsn` words one PUSHP call each (the reference for PUSHM)."""
    from tt_backend.runtime.emu import tile as tile_mod
    init = tile_mod.Tile.__init__

    def init2(self, *x, **k):
        init(self, *x, **k)
        for c in self.cores.values():
            c.set_pusher("PUSHM", None)
    monkeypatch.setattr(tile_mod.Tile, "__init__", init2)


def test_push_many_equals_single_pushes(monkeypatch):
    """Tensix.push_many against push() word by word with t_{j+1} = accepted_j + 1: the long body (inlined path),
    MOP/REPLAY words and a SEMWAIT-blocked thread (push() fallback, FIFO full in modelled time, then a real Stall
    in the middle of a run with (pm_done, pm_t) where the single pushes stopped)."""
    from tt_backend.runtime.emu.rv32 import Stall
    sem = [E("SEMINIT", sem_sel=1, init_value=0, max_value=15)]
    wait = [E("SEMWAIT", sem_sel=1, wait_sem_cond=1, stall_res=1 << 8)]
    words = ([E("SETC16", setc16_reg=29, setc16_value=2), *bench.LONG_SETUP]
             + list(bench.LONG_BODY) * 3 + wait + list(bench.LONG_BODY))

    def run(many: bool, spy: bool):
        tx = tensix.Tensix(np.zeros(layout.L1_SIZE, np.uint8), strict=True)
        if spy:
            issue = tx.tm.issue
            tx.tm.issue = lambda *x, **y: issue(*x, **y)
        tx.dst.write_rows32(0, bench.long_inputs())
        tx.cfg_write(1, bench.LONG_CFG1)
        tx.push(0, sem[0])
        t, out = 5, None
        for lo in range(0, len(words), 37):              # chunks of 37 words, a gap of 3 cycles between them
            chunk = tuple(words[lo:lo + 37])
            try:
                if many:
                    t = tx.push_many(1, chunk, t)
                else:
                    j = 0
                    for w in chunk:
                        t = tx.push(1, w, t) + 1
                        j += 1
            except Stall:
                out = (lo + (tx.pm_done if many else j), tx.pm_t if many else t)
                break
            t += 3
        return out, _full_state(tx), (list(tx.tm.taken[1]), list(tx.tm.fe), list(tx.threads[1].fifo),
                                      list(tx.threads[1].fifo_t))
    for spy in (False, True):
        a, b = run(False, spy), run(True, spy)
        assert a[0] == b[0] and a[0] is not None and a[0][0] > len(words) - len(bench.LONG_BODY)
        _same(a[1], b[1])
        assert a[2] == b[2]


def test_sfpu_long_row_equals_single_pushes():
    """bench emu's sfpu_long row pushes each basic block of tile_long's loop in one push_many call: the same Dst, cycles
    and instruction count as a push() per word at cycle 0 (the row before), on two tiles."""
    row = bench.bench_sfpu_long(2)
    tx = tensix.Tensix(np.zeros(layout.L1_SIZE, np.uint8), strict=True)
    tx.dst.write_rows32(0, bench.long_inputs())
    tx.cfg_write(1, bench.LONG_CFG1)
    tx.push(1, 0xB21D0002)
    n0 = tx.instructions[1]
    for _ in range(2):
        for w in bench.LONG_PROLOGUE + bench.LONG_SETUP + bench.LONG_BODY * 32 + bench.LONG_EPILOGUE:
            tx.push(1, w)
    tx.settle()
    n = tx.instructions[1] - n0 - 2 * (len(bench.LONG_PROLOGUE) + len(bench.LONG_EPILOGUE))
    assert (row["sfpu_instructions"], row["cycles"], row["checksum"]) == \
        (n, tx.tm.clock[1] - (tx.tm.first[1] or 0), int(tx.dst.rows32[192:256].astype(np.uint64).sum()))


def _stall_program(body_words: list[int], post_delay: int):
    """TRISC1: SEMWAIT on semaphore 1, then `body_words` straight-line (the FIFO fills: Stall mid-run), TTSync, park.
    TRISC0: SEMINIT, a delay loop of `post_delay` iterations, SEMPOST, park."""
    r = bench.ttinsn
    t1 = bench.li(7, layout.TENSIX_CFG_BASE) + bench.li(8, bench.LONG_CFG1) + [bench.sw(8, 7, 4)]
    t1 += [r(E("SEMWAIT", sem_sel=1, wait_sem_cond=1, stall_res=1 << 8))] + [r(w) for w in body_words]
    t1 += bench.li(9, layout.TENSIX_SYNC) + [bench.sw(0, 9, 0), bench.i_type(0, 9, 2, 10, 0x03), bench.J_SELF]
    t0 = [r(E("SEMINIT", sem_sel=1, init_value=0, max_value=15))] + bench.li(5, post_delay)
    t0 += [bench.i_type(-1, 5, 0, 5, 0x13), bench.b_type(-4, 0, 5, 1), r(E("SEMPOST", sem_sel=1)), bench.J_SELF]
    return {"trisc1": t1, "trisc0": t0}


def _tile_trace(programs, dst: bool, budget: int = 700):
    """Run a tile in small steps; per step the cores' architectural state, cycles, waits and stats; then the
    final Dst / LRegs (or the error text)."""
    from tt_backend.runtime.emu.tile import Tile
    tile = Tile(quantum=40)                               # the cores take turns: TRISC1 runs while TRISC0 waits
    if dst:
        tile.tensix.dst.write_rows32(0, bench.long_inputs())
    bench.launch_words(tile, programs)
    trace, mid_run = [], 0
    try:
        for _ in range(400):
            n = tile.run(budget)
            c = tile.cores["trisc1"]
            if "FIFO full" in tile._wait["trisc1"] and tile.read32(c.pc - 4) & 3 != 3:
                mid_run += 1                              # stopped after a `.ttinsn` word: inside a run
            trace.append((n, {k: (v.pc, v.instret, list(v.x)) for k, v in tile.cores.items()}, dict(tile._wait),
                          dict(tile._stall), tile.stats()))
            if n < budget or all(not tile.running(k) for k in layout.CORES):
                break
    except EmuError as e:
        c = tile.cores["trisc1"]
        return trace, mid_run, (str(e), c.pc, c.instret, tile.stats())
    tx = tile.tensix
    return trace, mid_run, (tx.dst.rows32.copy(), tx.sfpu.lreg.copy(), tile.stats())


def test_tile_pushm_stall_mid_run_identical(monkeypatch):
    """A TRISC whose straight-line `.ttinsn` runs hit a full Tensix FIFO (thread blocked in SEMWAIT) in the middle
    of a run: with PUSHM the core stops at the same word with the same registers, pc, instret, stall cycles, waits
    and tile.stats() at every step as with one PUSHP per word, resumes there, and ends with the same Dst/LRegs."""
    progs = _stall_program(list(bench.LONG_SETUP) + list(bench.LONG_BODY) * 2, post_delay=1500)
    a = _tile_trace(progs, dst=True)
    _no_pushm(monkeypatch)
    b = _tile_trace(progs, dst=True)
    assert a[1] > 0 and a[1] == b[1]                      # really stalled mid-run
    assert len(a[0]) == len(b[0])
    for x, y in zip(a[0], b[0]):
        assert x == y
    _same(a[2], b[2])


def test_tile_pushm_strict_error_identical(monkeypatch):
    """A strict error raised by a word in the middle of a run (SFPLOAD of never-written Dst rows): same message,
    same culprit pc and instret, same stats as with one PUSHP per word."""
    progs = _stall_program(list(bench.LONG_SETUP) + list(bench.LONG_BODY), post_delay=5)
    a = _tile_trace(progs, dst=False)
    _no_pushm(monkeypatch)
    b = _tile_trace(progs, dst=False)
    assert isinstance(a[2][0], str) and "SFPLOAD" in a[2][0]
    at = (a[2][1] - layout.IMAGE_SLOT["trisc1"]) >> 2
    assert progs["trisc1"][at - 1] & 3 != 3 and progs["trisc1"][at + 1] & 3 != 3   # the culprit is inside a run
    assert a[2] == b[2] and a[0] == b[0]


def test_tile_pushm_bench_kernels_identical(monkeypatch):
    """bench_tile_long / bench_tile with PUSHM and with one PUSHP per word: same cycles, counts and Dst."""
    a = [bench.bench_tile_long(2), bench.bench_tile(4)]
    _no_pushm(monkeypatch)
    b = [bench.bench_tile_long(2), bench.bench_tile(4)]
    for x, y in zip(a, b):
        for k in ("sfpu_instructions", "riscv_instructions", "cycles", "tensix_cycles", "tensix_instructions",
                  "checksum"):
            assert x.get(k) == y.get(k), k


# ---------------------------------------------------------------- translations shared across cores and launches

_BENCH_KEYS = ("sfpu_instructions", "riscv_instructions", "cycles", "tensix_cycles", "tensix_instructions", "checksum")


def test_sharedSHARED_BLOCKS_identical(monkeypatch):
    """bench_tile_long / bench_tile / bench_riscv with each block's code object shared (second launch: every block
    from the table, none compiled) and with every block translated afresh: same cycles, counts and Dst."""
    from tt_backend.runtime.emu import rv32
    monkeypatch.setenv("TT_RV32_NATIVE", "0")     # the Python blocks (the C part makes these kernels' bus calls itself)
    compiled = []
    real_compile = compile
    monkeypatch.setattr(rv32, "compile", lambda *a: compiled.append(1) or real_compile(*a), raising=False)
    rv32.SHARED_BLOCKS.clear()
    kernels = lambda: [bench.bench_tile_long(2), bench.bench_tile(4), bench.bench_riscv(20_000)]
    first = kernels()
    n_first = len(compiled)
    shared = kernels()
    assert n_first > 0 and len(compiled) == n_first, "the second launch compiled blocks again"
    monkeypatch.setattr(rv32, "SHARE_TRANSLATIONS", False)
    fresh = kernels()
    assert len(compiled) > n_first
    for x, y, z in zip(first, shared, fresh):
        for k in _BENCH_KEYS:
            assert x.get(k) == y.get(k) == z.get(k), k



def _same_facts(shared: dict, own: dict) -> None:
    """_facts_of a Tensix that shared facts against one that derived its own: the same facts for every word the latter
    met; the former may hold more (adopted from other Tensixes of its setting: deferral._adopt_facts)."""
    for kind, mine in own.items():
        assert mine.keys() <= shared[kind].keys(), kind
        assert {w: shared[kind][w] for w in mine} == mine, kind


def _facts_of(tx) -> dict:
    """A Tensix's per-word deferral facts and records as plain values (flag_transfer partials by what they call)."""
    def plain(v):
        if isinstance(v, partial):
            return ("partial", v.func, v.args)
        if isinstance(v, tuple):
            return tuple(plain(x) for x in v)
        return {k: plain(x) for k, x in v.items()} if isinstance(v, dict) else v
    return {"fast": plain(tx._fast), "cword": plain(tx._cword), "records": plain(tx._records),
            "defer": plain(tx._defer_info)}


@pytest.mark.parametrize("seed", [0, 1])
def test_shared_facts_identical(seed, monkeypatch):
    """Per-word deferral facts and records shared by every Tensix (deferral.SHARED_FACTS, TT_EMU_SHARED_FACTS): three
    Tensixes one after another (strict: the long body; not strict: a random predicated body and an SFPADD without
    LReg[10], which strict does not defer; strict: both again, the SFPADD then an error) give the same state, cycles,
    errors and facts as each deriving its own, and the third takes the long body's facts from the first's."""
    rng = np.random.default_rng(seed)
    body = _random_pred_body(rng, clean=True)
    bad_add = E("SFPADD", lreg_src_a=0, lreg_src_b=1, lreg_src_c=9, lreg_dest=2, instr_mod1=0)
    runs = [(True, bench.LONG_BODY), (False, body + [bad_add]), (True, bench.LONG_BODY + body + [bad_add])]

    def one(strict: bool, words: list, k: int) -> tuple:
        tx = tensix.Tensix(np.zeros(layout.L1_SIZE, np.uint8), strict=strict)
        tx.dst.write_rows32(0, np.random.default_rng(seed + k).standard_normal((512, 16)).astype(np.float32)
                            .view(np.uint32))
        tx.cfg_write(1, bench.LONG_CFG1)
        tx.push(1, E("SETC16", setc16_reg=29, setc16_value=2))
        try:
            for w in list(bench.LONG_SETUP) + list(words) * 4:
                tx.push(1, w)
            return tx, _full_state(tx)
        except EmuError as e:
            return tx, str(e)

    def results(shared: bool) -> tuple:
        monkeypatch.setattr(deferral, "SHARED_FACTS", shared)
        monkeypatch.setattr(deferral, "_SHARED_FAST", {})
        monkeypatch.setattr(deferral, "_SHARED_TABLES", {})
        monkeypatch.setattr(deferral, "_SHARED_RECORDS", {})
        out, txs = [], []
        for k, (strict, words) in enumerate(runs):
            tx, state = one(strict, words, k)
            out += [state, _facts_of(tx)]
            txs.append(tx)
        return out, txs

    (a, txs), (b, _) = results(True), results(False)
    assert isinstance(a[4], str) and "SFPADD" in a[4]          # (the third run's strict refusal)
    for x, y in zip(a, b):
        if isinstance(x, dict):
            _same_facts(x, y)
        else:
            _same_or_same_error(x, y)
    first, third = txs[0], txs[2]
    assert any(third._fast[w] is first._fast[w] for w in bench.LONG_BODY if first._fast.get(w) is not None)


def test_adopted_facts(monkeypatch):
    """A new Tensix takes, at its first word without facts, the facts and records every Tensix of its setting derived
    (deferral._adopt_facts, _SHARED_TABLES; TT_EMU_SHARED_FACTS): after a strict Tensix ran the long body and a
    non-strict one a random predicated body and an SFPADD without LReg[10] (deferred there; refused by strict), a
    strict Tensix that pushes only the setup and a few body words holds the first's facts objects for the whole body,
    none of the second's words, and then runs the body, the random body and the SFPADD (an error under strict) with
    the same state, cycles, error and facts as when every Tensix derives its own."""
    rng = np.random.default_rng(5)
    body = _random_pred_body(rng, clean=True)
    bad_add = E("SFPADD", lreg_src_a=0, lreg_src_b=1, lreg_src_c=9, lreg_dest=2, instr_mod1=0)
    only_second = [w for w in body + [bad_add] if w not in bench.LONG_BODY and w not in bench.LONG_SETUP]

    def tensix_with(strict: bool, k: int):
        tx = tensix.Tensix(np.zeros(layout.L1_SIZE, np.uint8), strict=strict)
        tx.dst.write_rows32(0, np.random.default_rng(k).standard_normal((512, 16)).astype(np.float32)
                            .view(np.uint32))
        tx.cfg_write(1, bench.LONG_CFG1)
        tx.push(1, E("SETC16", setc16_reg=29, setc16_value=2))
        return tx

    def run(shared: bool) -> tuple:
        monkeypatch.setattr(deferral, "SHARED_FACTS", shared)
        monkeypatch.setattr(deferral, "_SHARED_FAST", {})
        monkeypatch.setattr(deferral, "_SHARED_RECORDS", {})
        monkeypatch.setattr(deferral, "_SHARED_TABLES", {})
        first = tensix_with(True, 0)
        first.push_many(1, tuple(bench.LONG_SETUP + bench.LONG_BODY * 2), 0)
        first.settle()
        second = tensix_with(False, 1)
        for w in body * 3 + [bad_add]:
            second.push(1, w)
        second.settle()
        third = tensix_with(True, 2)
        third.push_many(1, tuple(bench.LONG_SETUP + bench.LONG_BODY[:5]), 0)
        early = dict(third._fast)
        try:
            third.push_many(1, tuple(bench.LONG_BODY * 2 + body), 100_000)
            for w in [bad_add] + body:
                third.push(1, w)
            third.settle()
            out = _full_state(third)
        except EmuError as e:
            out = str(e)
        return first, early, out, _facts_of(third)

    first, early, out, facts = run(True)
    body_facts = [w for w in bench.LONG_BODY if first._fast.get(w) is not None]
    assert body_facts and all(early.get(w) is first._fast[w] for w in body_facts)
    assert only_second and not any(w in early for w in only_second)
    assert isinstance(out, str) and "SFPADD" in out                # (the strict refusal)
    _, early_own, out_own, facts_own = run(False)
    assert not any(w in early_own for w in bench.LONG_BODY[5:] if w not in bench.LONG_BODY[:5] + bench.LONG_SETUP)
    _same_or_same_error(out, out_own)
    _same_facts(facts, facts_own)


def test_adopted_facts_bounded(monkeypatch):
    """The shared tables take the first deferral.TABLE_WORDS words a setting meets and no more (a new Tensix copies
    them whole); a Tensix that adopted a full table derives the other words itself, with the same state as when
    nothing is shared."""
    def run(shared: bool, words_max: int) -> tuple:
        monkeypatch.setattr(deferral, "SHARED_FACTS", shared)
        monkeypatch.setattr(deferral, "TABLE_WORDS", words_max)
        for name in ("_SHARED_FAST", "_SHARED_RECORDS", "_SHARED_TABLES"):
            monkeypatch.setattr(deferral, name, {})
        states = [_full_state(_tti_run(bench.LONG_BODY, setup=bench.LONG_SETUP, cfg1=bench.LONG_CFG1, tiles=1,
                                       rows=2, seed=k)) for k in range(2)]
        return states, [len(t) for table in deferral._SHARED_TABLES.values() for t in table]
    (bounded, sizes), (own, _) = run(True, 10), run(False, 10)
    assert sizes and max(sizes) == 10
    for x, y in zip(bounded, own):
        _same(x, y)


def test_shared_facts_follow_an_instance_override(monkeypatch):
    """A Tensix whose instance overrides deferral_of (a test's spy) gets what its override says, not the facts other
    Tensixes shared (deferral.SHARED_FACTS)."""
    monkeypatch.setattr(deferral, "SHARED_FACTS", True)
    monkeypatch.setattr(deferral, "_SHARED_FAST", {})
    monkeypatch.setattr(deferral, "_SHARED_TABLES", {})
    _tti_run(bench.LONG_BODY, setup=bench.LONG_SETUP, cfg1=bench.LONG_CFG1, tiles=1, rows=2)
    assert deferral._SHARED_FAST
    tx = tensix.Tensix(np.zeros(layout.L1_SIZE, np.uint8), strict=True)
    tx.deferral_of = lambda *args: None                      # nothing deferred
    tx.dst.write_rows32(0, np.random.default_rng(0).standard_normal((512, 16)).astype(np.float32).view(np.uint32))
    tx.cfg_write(1, bench.LONG_CFG1)
    tx.push(1, E("SETC16", setc16_reg=29, setc16_value=2))
    for w in list(bench.LONG_SETUP) + list(bench.LONG_BODY):
        tx.push(1, w)
    tx.settle()
    assert tx._fast and all(v is None for v in tx._fast.values()) and not tx._cword


def test_shared_facts_need_the_same_decode(monkeypatch):
    """Where each Tensix decodes its own words (TT_EMU_SHARED_DECODE=0: equal fields dicts, not the same objects), a
    Tensix derives its own deferral facts rather than taking another's (deferral._fast_info's decode check), with the
    same state as when nothing is shared."""
    monkeypatch.setattr(tensix, "SHARED_DECODE", False)

    def two(shared: bool) -> tuple:
        monkeypatch.setattr(deferral, "SHARED_FACTS", shared)
        monkeypatch.setattr(deferral, "_SHARED_FAST", {})
        monkeypatch.setattr(deferral, "_SHARED_TABLES", {})
        monkeypatch.setattr(deferral, "_SHARED_RECORDS", {})
        txs = []
        for k in range(2):
            tx = tensix.Tensix(np.zeros(layout.L1_SIZE, np.uint8), strict=True)
            tx.dst.write_rows32(0, np.random.default_rng(k).standard_normal((512, 16)).astype(np.float32)
                                .view(np.uint32))
            tx.cfg_write(1, bench.LONG_CFG1)
            tx.push(1, E("SETC16", setc16_reg=29, setc16_value=2))
            for w in list(bench.LONG_SETUP) + list(bench.LONG_BODY) * 2:
                tx.push(1, w)
            tx.settle()
            txs.append(tx)
        return txs

    a = two(True)
    shared_facts = deferral._SHARED_FAST
    b = two(False)
    for x, y in zip(a, b):
        _same(_full_state(x), _full_state(y))
        assert _facts_of(x) == _facts_of(y)
    body = [w for w in bench.LONG_BODY if a[0]._fast.get(w) is not None]
    assert body and shared_facts                            # (facts were offered: the check below is not vacuous)
    assert all(a[1]._fast[w] is not a[0]._fast[w] for w in body)
