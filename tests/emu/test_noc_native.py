"""The NoC time model's reservation in C (runtime/emu/accel/noc_native.c) against noc.py's Fabric._reserve_in_python
(Busy.free_from and Busy.take), the reference: random busy lists (gaps, touching and nested candidates, intervals
already in the past), resources that repeat in one transfer, offsets and lengths; the same cycle and the same busy
lists after each of a run of reservations. And compiled kernels with the C part on and off: the same bytes and the
same emulated cycles, the C part really taken."""
import copy
import hashlib
import random

import numpy as np
import pytest

from tt_backend.bench.emu import elementwise_inputs, elementwise_plan
from tt_backend.bench.kernels import launch_plan, matmul_arrays, matmul_plan
from tt_backend.lowering.codegen.sources import split
from tt_backend.runtime.compile import compile_kernel
from tt_backend.runtime.emu.accel import noc_native
from tt_backend.runtime.emu.device import EmuDevice
from tt_backend.chip import layout
from tt_backend.chip.errors import EmuError
from tt_backend.chip.grid import dram_bank, is_dram_xy
from tt_backend.runtime.emu.dram import PAGE_SIZE, Dram
from tt_backend.runtime.emu.noc import CMD_CTRL, INITIATOR_STRIDE, Busy, Fabric, Niu, xy_word
from tt_backend.runtime.emu.tile import Tile

pytestmark = pytest.mark.skipif(noc_native.reserve() is None, reason=noc_native.status())


def _busy(rng: random.Random) -> Busy:
    b, t = Busy(), rng.randrange(0, 50)
    for _ in range(rng.choice([0, 0, 1, 3, 12])):
        s = t + rng.choice([0, 1, 2, 5, 40])            # touching the previous one now and then (merged by take)
        b.take(s, rng.choice([1, 2, 8, 30]))
        t = b.ends[-1]
    return b


def _lists(res) -> list:
    return [(b.starts[:], b.ends[:]) for b, _ in res]


@pytest.mark.parametrize("seed", range(4))
def test_reserve_matches_python(seed):
    rng = random.Random(seed)
    fast, waited, shared = noc_native.reserve(), 0, 0
    for _ in range(300):
        pool = [_busy(rng) for _ in range(rng.randrange(1, 8))]
        res = [(rng.choice(pool), rng.choice([0, 0, 5, 14, 23, 100])) for _ in range(rng.randrange(1, 16))]
        shared += len({id(b) for b, _ in res}) < len(res)
        ref = copy.deepcopy(res)                       # (the copies share Busy objects as res does)
        for _ in range(rng.randrange(1, 6)):
            s0, d = rng.randrange(0, 400), rng.choice([1, 2, 16, 64, 257])
            want = Fabric._reserve_in_python(ref, s0, d)
            assert fast(res, s0, d) == want
            assert _lists(res) == _lists(ref)
            waited += want > s0
    assert waited > 300 and shared > 100


def test_reserve_refuses_what_is_no_busy_list():
    fast = noc_native.reserve()
    with pytest.raises(TypeError):
        fast([(Busy(), 0, 1)], 0, 1)
    with pytest.raises(AttributeError):
        fast([(object(), 0)], 0, 1)
    unset = Busy()
    del unset.starts                                   # (an empty slot: read through its descriptor, which raises)
    with pytest.raises(AttributeError):
        fast([(Busy(), 0), (unset, 0)], 0, 1)


def test_reserve_reads_other_types_by_name():
    """A Busy's lists are read from its slots; another type's (a subclass with a __dict__) by attribute look-up:
    the same reservation either way."""
    class Named(Busy):
        pass
    fast = noc_native.reserve()
    res = [(Busy(), 0), (Named(), 2), (Named(), 5)]
    for b, _ in res:
        b.take(3, 5), b.take(20, 4)
    ref = copy.deepcopy(res)
    for s0, d in ((0, 6), (1, 3), (9, 12)):
        assert fast(res, s0, d) == Fabric._reserve_in_python(ref, s0, d)
        assert _lists(res) == _lists(ref)


def _pairs(b) -> list:
    return list(zip(b.starts, b.ends))


@pytest.mark.parametrize("seed", range(4))
def test_c_busy_matches_python(seed):
    """noc_native.Busy against noc.py's Busy: random takes (free spans, spans touching or overlapping several
    intervals, before the first one), gap searches and forgets; the same answers and the same intervals after each."""
    rng, kinds = random.Random(seed), {"merged": 0, "inserted": 0}
    for _ in range(60):
        ref, fast = Busy(), noc_native.busy_class()()
        for _ in range(rng.randrange(1, 80)):
            t, d = rng.randrange(0, 600), rng.choice([1, 2, 5, 16, 40])
            op = rng.random()
            if op < 0.45:
                s = ref.free_from(t, d) if rng.random() < 0.5 else t      # (a busy span too: take merges it)
                n = len(ref.starts)
                ref.take(s, d), fast.take(s, d)
                kinds["merged" if len(ref.starts) <= n else "inserted"] += 1
            elif op < 0.9:
                assert fast.free_from(t, d) == ref.free_from(t, d)
            elif op < 0.95:
                ref.forget_before(t), fast.forget_before(t)
            assert _pairs(fast) == _pairs(ref)
    assert min(kinds.values()) > 200, kinds


def _c_copy(b: Busy):
    """A C Busy with b's intervals."""
    c = noc_native.busy_class()()
    for s, e in zip(b.starts, b.ends):
        c.take(s, e - s)
    return c


@pytest.mark.parametrize("seed", range(3))
def test_reserve_on_c_busy_matches_python(seed):
    """reserve over C Busy objects (some resources noc.py's Busy: a Fabric made before the switch changed) against
    the Python reservation over noc.py's Busy: the same cycles and intervals."""
    rng = random.Random(100 + seed)
    fast, waited = noc_native.reserve(), 0
    for _ in range(200):
        pool = [_busy(rng) for _ in range(rng.randrange(1, 8))]
        mine = {id(b): _c_copy(b) if rng.random() < 0.8 else copy.deepcopy(b) for b in pool}
        ref = [(rng.choice(pool), rng.choice([0, 0, 5, 14, 23, 100])) for _ in range(rng.randrange(1, 20))]
        res = [(mine[id(b)], off) for b, off in ref]
        for _ in range(rng.randrange(1, 6)):
            s0, d = rng.randrange(0, 400), rng.choice([1, 2, 16, 64, 257])
            want = Fabric._reserve_in_python(ref, s0, d)
            assert fast(res, s0, d) == want
            assert [_pairs(b) for b, _ in res] == [_pairs(b) for b, _ in ref]
            waited += want > s0
    assert waited > 200


def test_fabric_makes_c_busy_while_switched_on(monkeypatch):
    """Fabric makes the C Busy while the reservation and BUSY_NATIVE are on, noc.py's otherwise."""
    for native, busy, want in ((True, True, noc_native.busy_class()), (True, False, Busy), (False, True, Busy)):
        monkeypatch.setattr(noc_native, "NATIVE", native)
        monkeypatch.setattr(noc_native, "BUSY_NATIVE", busy)
        assert type(Fabric(None)._res(("port", 0, 1, 2))) is want


@pytest.mark.needs_cc
def test_kernels_identical(monkeypatch):
    """An elementwise kernel's DRAM reads and writes and a 2x2 matmul grid's multicasts: the same bytes and cycles of
    every core with the C part (reservations and sends) on and off, and C reserved the transfers and made most
    sends."""
    grid = matmul_plan(64, "HiFi2")
    grid.use_cores(4)
    ew = elementwise_plan(40)
    calls = {True: 0, False: 0}
    python = Fabric._reserve_in_python

    def counted(res, s0, d):
        calls[noc_native.NATIVE] += 1
        return python(res, s0, d)
    monkeypatch.setattr(Fabric, "_reserve_in_python", staticmethod(counted))
    sends, send = {True: 0, False: 0}, Niu._send_in_python

    def counted_send(self, buf):
        sends[noc_native.SEND_NATIVE] += 1
        return send(self, buf)
    monkeypatch.setattr(Niu, "_send_in_python", counted_send)
    for plan, arrays in ((ew, elementwise_inputs(ew, np.random.default_rng(40))), (grid, matmul_arrays(grid))):
        elfs = compile_kernel(*split(plan.render()), plan.name)
        runs = []
        for on in (True, False):
            monkeypatch.setattr(noc_native, "NATIVE", on)
            monkeypatch.setattr(noc_native, "SEND_NATIVE", on)
            dev = EmuDevice()
            runs.append(([launch_plan(dev, plan, arrays, elfs)[0] for _ in range(2)], dev.stats()))
        assert runs[0] == runs[1]
    assert calls[True] == 0 and calls[False] > 50, calls
    assert sends[True] < sends[False] / 4, sends


class _Tile:
    """What an NIU reaches at a Tensix tile (noc.NocTarget): its L1 and a register read and write that note the call."""

    def __init__(self, seed: int):
        self.l1_array = np.random.default_rng(seed).integers(0, 256, layout.L1_SIZE, dtype=np.uint8)
        self.mmio: list = []

    def noc_mmio_read32(self, addr: int) -> int:
        self.mmio.append(("read", addr))
        return addr & 0xFFFF

    def noc_mmio_write32(self, addr: int, value: int) -> None:
        self.mmio.append(("write", addr, value))


def _world(index: int) -> tuple[Niu, dict, list]:
    """An NIU at layout.TILE_XY, a second tile at (2, 2), the 8 DRAM banks (pages written before and not), nothing
    at (3, 2)."""
    own, other = _Tile(1), _Tile(2)
    banks = [Dram() for _ in range(8)]
    for b, bank in enumerate(banks):
        bank.write(b * PAGE_SIZE + PAGE_SIZE - 4096, np.arange(8192, dtype=np.uint8))       # two pages, one boundary
    peers = {layout.TILE_XY: own, (2, 2): other}

    def peer(x: int, y: int):
        return banks[dram_bank(x, y)] if is_dram_xy(x, y) else peers.get((x, y))
    return Niu(index, own, peer), peers, banks


def _command(rng: random.Random, niu: Niu) -> list[int]:
    """NIU registers 0x00..0x2C of one initiator for a random request: mostly unicast reads and writes that succeed
    (DRAM pages crossed, present and absent, L1 to L1 on the own tile and another), else one with a defect of every
    kind a request may have (Python's checks, MMIO, requests C leaves to Python)."""
    own, bank = niu.own, rng.randrange(8)
    peer = rng.choice([xy_word(rng.choice((17, 18)), rng.randrange(12, 24))] * 4 + [own, xy_word(2, 2)])
    kind = rng.choice((0x10, 0x2, 0x12))
    n = rng.choice([1, 4, 16, 64, 2048, 4096, 16384])
    far = rng.choice([bank * PAGE_SIZE + PAGE_SIZE - 4096 + 64 * rng.randrange(100), 64 * rng.randrange(1 << 14),
                      7 * PAGE_SIZE + 64 * rng.randrange(1 << 14)])
    if peer >> 6 == 2:                                         # a tile: an L1 address
        far %= layout.L1_SIZE - 16384
    near = 64 * rng.randrange(layout.L1_SIZE // 64 - 300)
    defect = rng.randrange(12) if rng.random() < 0.3 else None
    if defect == 0:
        peer = rng.choice((xy_word(3, 2), xy_word(0, 12), 1 << 12))        # nothing there, physical DRAM, bad word
    elif defect == 1:
        kind = rng.choice((0x0, 0x1, 0x3, 0x12 | 0x8, 0x10 | 0x8, 0x12 | 0x20, 0x12 | 0x100, 0x12 | 0x200))
    elif defect == 2:
        n = rng.choice((0, 16385))
    elif defect == 3:
        far = rng.choice((layout.DRAM_BANK_SIZE - 64 * rng.randrange(300), 1 << 33,
                          (1 << 64) - 16 * rng.randrange(1, 300)))   # (the last: + n wraps past 2^64)
    elif defect == 4:
        near = rng.choice((layout.L1_SIZE - 16 * rng.randrange(300), (1 << 64) - 16 * rng.randrange(1, 300)))
    elif defect == 5:
        near = 0xFF000000 + 16 * rng.randrange(4)
        n = rng.choice((4, 8))
    elif defect == 6:
        near += rng.choice((8, 16, 32, 48))                    # congruent mod 16 or not, mod 64 or not
    targ, ret = (far, near) if kind & 3 == 0 else (near, far)
    regs = [0] * 12
    regs[0], regs[1], regs[3], regs[4] = targ & 0xFFFFFFFF, targ >> 32, ret & 0xFFFFFFFF, ret >> 32
    regs[2], regs[5] = (peer, own) if kind & 3 == 0 else (own, peer)
    if defect == 7:
        regs[2 if kind & 3 == 0 else 5] = peer                # RET_HI / TARG_HI not the own tile
    regs[7], regs[8] = kind, n
    return regs


def _state(niu: Niu, peers: dict, banks: list) -> tuple:
    digest = lambda a: hashlib.sha1(a.tobytes()).hexdigest()
    return (dict(niu.counters), dict(niu.requests), dict(niu.bytes), [digest(t.l1_array) for t in peers.values()],
            [t.mmio[:] for t in peers.values()], [{p: digest(a) for p, a in b.pages.items()} for b in banks])


@pytest.mark.parametrize("index", (0, 1))
def test_send_matches_python(index, monkeypatch):
    """Niu._send in C (noc_native.send) against _send_in_python, the reference: two NIUs in twin worlds given the same
    random commands, one with the C send, one without; the same state (counters, tallies, the sent records, every L1
    and DRAM page, register traffic) and the same errors after each, and C took most of them."""
    rng = random.Random(5 + index)
    worlds = [_world(index) for _ in range(2)]
    taken, python = 0, Niu._send_in_python

    def counted(self, buf):
        if noc_native.SEND_NATIVE:
            counted.left += 1
        return python(self, buf)
    counted.left = 0
    monkeypatch.setattr(Niu, "_send_in_python", counted)
    for step in range(500):
        buf, regs = rng.randrange(4), _command(rng, worlds[0][0])
        outcome = []
        for on, (niu, peers, banks) in zip((True, False), worlds):
            monkeypatch.setattr(noc_native, "SEND_NATIVE", on)
            niu.regs[buf] = regs
            try:
                niu.store(buf * INITIATOR_STRIDE + CMD_CTRL, 1)
                outcome.append(("ok", niu.sent[:], niu.counters.copy()))
            except EmuError as e:
                outcome.append((type(e), str(e), niu.counters.copy()))
            niu.sent.clear()
        assert outcome[0] == outcome[1], (step, regs)
        if step % 100 == 0:
            assert _state(*worlds[0]) == _state(*worlds[1]), step
        taken += outcome[0][0] == "ok"
    assert _state(*worlds[0]) == _state(*worlds[1])
    assert taken > 250 and taken - counted.left > 200, (taken, counted.left)


def _timed_state(tile: Tile, index: int) -> tuple:
    """What a timed send leaves on a tile and its chip: the NIU's tallies, the due completions, the busy ends, the
    fabric's busy lists and counts, and the L1, the line stamps and the DRAM pages of the chip."""
    digest = lambda a: hashlib.sha1(a.tobytes()).hexdigest()
    niu, chip = tile.nius[index], tile.chip
    return (dict(niu.counters), dict(niu.requests), dict(niu.bytes), repr(tile._niu_due), tile._niu_busy[:],
            {k: (b.starts[:], b.ends[:]) for k, b in chip.fabric.busy.items()}, chip.fabric.stats(),
            {xy: (digest(t.l1_array), digest(t.l1_stamp)) for xy, t in chip.tiles.items()},
            [{p: digest(a) for p, a in b.pages.items()} for b in chip.banks])


@pytest.mark.parametrize("index", (0, 1))
def test_issue_matches_python(index, monkeypatch):
    """A send with its time in C (noc_native.issue, from Tile._niu_store) against the reference (Niu.store and
    Fabric.transfer, the peer's stamps, the due completion and busy end in Python): two tiles in twin chips given the
    same random commands issued at random cycles; the same errors, tallies, due completions, busy lists, stamps, L1
    and DRAM after each, and C timed most of them."""
    rng = random.Random(11 + index)
    tiles = []
    for on in (True, False):
        monkeypatch.setattr(noc_native, "ISSUE_NATIVE", on)
        tiles.append(Tile())
    assert tiles[0]._issue is not None and tiles[1]._issue is None
    for tile in tiles:
        tile.chip.tile((2, 2)).write_l1(0, np.random.default_rng(2).integers(0, 256, layout.L1_SIZE, dtype=np.uint8))
        for b, bank in enumerate(tile.chip.banks):
            bank.write(b * PAGE_SIZE + PAGE_SIZE - 4096, np.arange(8192, dtype=np.uint8))
    timed, transfer = {True: 0, False: 0}, Fabric.transfer

    def counted(self, *a):
        timed[self is tiles[0].chip.fabric] += 1
        return transfer(self, *a)
    monkeypatch.setattr(Fabric, "transfer", counted)
    made = 0
    for step in range(400):
        buf, regs, start = rng.randrange(4), _command(rng, tiles[0].nius[index]), rng.randrange(0, 60_000)
        outcome = []
        for tile in tiles:
            tile._stall["brisc"] = start
            tile.nius[index].regs[buf] = regs
            try:
                tile._niu_store(index, "brisc", layout.NOC_BASE[index] + buf * INITIATOR_STRIDE + CMD_CTRL, 1)
                outcome.append("ok")
            except EmuError as e:
                outcome.append((type(e), str(e)))
        assert outcome[0] == outcome[1], (step, regs)
        if step % 50 == 0:
            assert _timed_state(tiles[0], index) == _timed_state(tiles[1], index), step
        made += outcome[0] == "ok"
    assert _timed_state(tiles[0], index) == _timed_state(tiles[1], index)
    assert made > 200 and timed[False] == made and timed[True] < made / 4, (made, timed)
