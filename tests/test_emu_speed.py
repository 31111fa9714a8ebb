"""Emulator speed work must not change results: the float64 FMA formulation (runtime/emu/fma.py `_fma_fast`) against
the integer model `_fma_exact`, lane by lane, on random, exponent-gap, near-cancellation, tie-shaped, zero and
special operands. CI runs a few hundred thousand lanes; `TT_FMA_PROOF_LANES=10000000` runs the full proof."""
from __future__ import annotations

import os

import numpy as np
import pytest

from runtime.emu.fma import _fma_exact, _fma_fast, fma_bh_stacked

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


# --- batched row steps (Tensix._sfpu_batch): identical to one-by-one execution ----------------------------------
from templates import isa, layout  # noqa: E402
from templates.errors import EmuError  # noqa: E402
from runtime.emu import bench, tensix  # noqa: E402

E = isa.encode
MAD = lambda a, b, c, d: E("SFPMAD", lreg_src_a=a, lreg_src_b=b, lreg_src_c=c, lreg_dest=d, instr_mod1=0)
LOAD = lambda vd, addr, am=0: E("SFPLOAD", lreg_ind=vd, instr_mod0=3, sfpu_addr_mode=am, dest_reg_addr=addr)
STORE = lambda vd, addr, am=0: E("SFPSTORE", lreg_ind=vd, instr_mod0=3, sfpu_addr_mode=am, dest_reg_addr=addr)


@pytest.fixture
def batch_counter(monkeypatch):
    """Counts instructions run by _sfpu_batch; `off()` disables batching."""
    orig = tensix.Tensix._sfpu_batch
    state = {"n": 0, "on": True}

    def wrapped(self, t, th):
        if not state["on"]:
            return 0
        n = orig(self, t, th)
        state["n"] += n
        return n
    monkeypatch.setattr(tensix.Tensix, "_sfpu_batch", wrapped)
    return state


def _mop_run(body, reps=32, strict=True, dst_rows=512, tiles=2, setup=()):
    """Push `body` as MOP(template 1: reps x REPLAY) straight into thread 1, `tiles` times; returns the Tensix."""
    tx = tensix.Tensix(np.zeros(layout.L1_SIZE, np.uint8), strict=strict)
    data = np.random.default_rng(3).standard_normal((dst_rows, 16)).astype(np.float32).view(np.uint32)
    tx.dst.write_rows32(0, data)
    replay = E("REPLAY", load_mode=0, execute_while_loading=0, len=len(body), start_idx=0)
    nop = E("NOP")
    for i, v in enumerate([1, reps, nop, nop, nop, replay, nop, replay, replay]):
        tx.mop_cfg_write(1, i, v)
    words = [E("SETC16", setc16_reg=29, setc16_value=2), *setup,
             E("REPLAY", load_mode=1, execute_while_loading=0, len=len(body), start_idx=0), *body]
    reset = E("SETRWC", rwc_cr=0, rwc_d=0, rwc_b=0, rwc_a=0, bit_mask=4, clear_ab_vld=0)
    for w in words:
        tx.push(1, w)
    for _ in range(tiles):
        tx.push(1, reset)
        tx.push(1, E("MOP", mop_type=1, loop_count=0, zmask_lo16_or_loop_count=0))
    return tx


def _state(tx):
    return (tx.dst.rows32.copy(), tx.dst.written.copy(), tx.sfpu.lreg.copy(), tx.tm.stats(), list(tx.instructions),
            tx.sfpu.instructions, tx.sfpu.cycle, dict(tx.threads[1].rwc))


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
}


@pytest.mark.parametrize("name", sorted(BODIES))
def test_batch_equals_one_by_one(name, batch_counter):
    a = _state(_mop_run(BODIES[name]))
    assert batch_counter["n"] == 2 * 32 * len(BODIES[name])
    batch_counter["on"] = False
    _same(a, _state(_mop_run(BODIES[name])))


def test_batch_refuses_loop_carried_and_flags(batch_counter):
    acc = [LOAD(0, 0), MAD(0, 10, 3, 3), STORE(3, 64, 1)]           # LReg3 accumulates across row steps
    flags = [LOAD(0, 0), E("SFPSETCC", lreg_c=0, instr_mod1=0, imm12_math=0), MAD(0, 0, 9, 1),
             E("SFPENCC", instr_mod1=0, imm12_math=0), STORE(1, 64, 1)]
    overlap = [LOAD(0, 2), MAD(0, 0, 9, 1), STORE(1, 0, 1)]          # row step r reads what step r + 1 stores
    for body in (acc, flags, overlap):
        batch_counter["on"] = True
        batch_counter["n"] = 0
        a = _state(_mop_run(body, setup=[E("SFPLOADI", lreg_ind=3, instr_mod0=0, imm16=0x3F80)]))
        assert batch_counter["n"] == 0
        batch_counter["on"] = False
        _same(a, _state(_mop_run(body, setup=[E("SFPLOADI", lreg_ind=3, instr_mod0=0, imm16=0x3F80)])))


def test_batch_keeps_strict_errors(batch_counter):
    """Reading never-written Dst rows: the batch refuses, the one-by-one path raises the usual error."""
    with pytest.raises(EmuError, match="never written"):
        _mop_run(EXP2_BODY, dst_rows=40)
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
from runtime.emu import tensix
from runtime.emu.device import EmuDevice
count = [0]
orig = tensix.Tensix._sfpu_batch
def batch(self, t, th):
    n = orig(self, t, th) if sys.argv[1] == "on" else 0
    count[0] += n
    return n
tensix.Tensix._sfpu_batch = batch
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
outs = [(ta * tb + 1), ta.maximum(tb), (ta < tb).where(ta, tb * 3), (ta * ta - tb).exp2()]
bits = [o.numpy().view(np.uint32).tolist() for o in outs]
print(json.dumps({"bits": bits, "stats": devs[-1].stats(), "batched": count[0]}, default=str))
"""


def test_e2e_kernels_batched_identical():
    """Whole kernels through tinygrad on TT:emu (MOP + REPLAY issue of short SFPU bodies; the exp2 body is longer
    than the replay buffer and keeps the TTI loop): the same bits and cycle-model statistics with and without
    batching (fresh processes: the device's statistics accumulate)."""
    pytest.importorskip("tinygrad")
    import json
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    res = {}
    for mode in ("on", "off"):
        out = subprocess.run([sys.executable, "-c", _E2E, mode], cwd=root, capture_output=True, text=True,
                             env={**os.environ, "PYTHONPATH": root}, timeout=300)
        assert out.returncode == 0, out.stderr[-3000:]
        res[mode] = json.loads(out.stdout.strip().splitlines()[-1])
    assert res["on"]["batched"] > 0 and res["off"]["batched"] == 0
    assert res["on"]["bits"] == res["off"]["bits"]
    assert res["on"]["stats"] == res["off"]["stats"]


def test_batch_refuses_dropped_write_to_constant(batch_counter):
    """SFPLOAD to LReg 8 writes nothing: LReg0 is still read before the body writes it (loop-carried)."""
    body = [LOAD(8, 0), MAD(0, 10, 9, 1), E("SFPMOV", lreg_c=1, lreg_dest=0, instr_mod1=0), STORE(1, 64, 1)]
    a = _state(_mop_run(body))
    assert batch_counter["n"] == 0
    batch_counter["on"] = False
    _same(a, _state(_mop_run(body)))


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

    def go():
        try:
            return _state(_mop_run(body, reps=16, setup=[E("SFPLOADI", lreg_ind=i, instr_mod0=0, imm16=0x3F80 + i)
                                                          for i in range(8)]))
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
