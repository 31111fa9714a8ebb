"""The emulated chip (runtime/emu/chip.py, noc.Fabric, chip/grid.py): the grid and its harvesting, DRAM banks behind
their coordinates, the NoC time model, one kernel launched on several tiles by the driver, deadlocks named across
tiles, and (with TT_SIMULATOR) the same many-tile launch on ttsim, bit for bit."""
from __future__ import annotations

import time

import numpy as np
import pytest

from tt_backend.chip import layout
from tt_backend.chip.errors import EmuDeadlock, TTError
from tt_backend.chip.grid import Grid, dram_bank, route
from tt_backend.runtime import driver
from tt_backend.runtime.emu import cycles
from tt_backend.runtime.emu.chip import Chip
from tt_backend.runtime.emu.device import EmuDevice
from tt_backend.runtime.emu import noc
from tt_backend.runtime.emu.noc import DRAM_BANK_BYTES_PER_CYCLE, Busy, Fabric
from tt_backend.runtime.emu.tile import Tile
from tt_backend.runtime.ttsim_device import TtsimDevice

from tests.support import programs
from tests.support.harness import DRAM_XY
from tests.support.tile import build


def test_grid_facts_and_harvesting():
    g = Grid()
    assert len(g.tensix) == 140 and g.tensix[0] == layout.TILE_XY and g.physical(16, 11) == (16, 11)
    h = Grid((3, 12))                                   # two harvested columns: 12 x 10, translated columns 1..14
    assert len(h.tensix) == 120 and {x for x, _ in h.tensix} == {1, 2, 3, 4, 5, 6, 7, 10, 11, 12, 13, 14}
    assert h.physical(3, 2) == (4, 2) and h.physical(14, 5) == (16, 5) and not h.is_tensix(15, 5)
    assert h.shape(8) == (8, 1) and h.shape(64) == (12, 6)
    assert {dram_bank(17, y) for y in range(12, 24)} == {0, 1, 2, 3} and dram_bank(18, 12) == dram_bank(18, 14) == 4
    with pytest.raises(ValueError, match="Tensix columns"):
        Grid((8,))
    # NoC0: +x then +y; NoC1: -y then -x; both wrap around
    assert route(0, (15, 2), (1, 3)) == [(0, 15, 2, "x"), (0, 16, 2, "x"), (0, 0, 2, "x"), (0, 1, 2, "y")]
    assert route(1, (1, 3), (15, 2)) == [(1, 1, 3, "y"), (1, 1, 2, "x"), (1, 0, 2, "x"), (1, 16, 2, "x")]


def test_fabric_latency_hops_and_occupancy():
    f = Fabric(Grid())
    n = 4096
    near = f.transfer(0, "read", (1, 2), (2, 2), n, 0, None)
    hops = len(route(0, (2, 2), (1, 2))) + len(route(0, (1, 2), (2, 2)))
    assert near == cycles.noc_cycles(n, hops)                       # uncontended: the documented latency
    f2 = Fabric(Grid())
    far = f2.transfer(0, "read", (1, 2), (16, 11), n, 0, None)
    assert far > near                                               # more hops, more cycles
    # two tiles reading the same DRAM bank at the same cycle: the second waits for the bank (47 B/cycle)
    f3 = Fabric(Grid())
    a = f3.transfer(0, "read", (1, 2), layout.DRAM_XY, n, 0, 4)
    b = f3.transfer(0, "read", (2, 2), layout.DRAM_XY, n, 0, 4)
    assert b - a >= -(-n // DRAM_BANK_BYTES_PER_CYCLE) - 2 * cycles.NOC_HOP_LATENCY and f3.stats()["wait_cycles"] > 0
    # a request issued earlier in emulated time but reserved later still uses the gap before the other's packet
    f4 = Fabric(Grid())
    late = f4.transfer(0, "write", (1, 2), (5, 2), n, 10_000, None)
    early = f4.transfer(0, "write", (1, 2), (5, 2), n, 0, None)
    assert early == cycles.noc_cycles(n, len(route(0, (1, 2), (5, 2))) + len(route(0, (5, 2), (1, 2)))) < late


def test_busy_intervals_match_a_cycle_by_cycle_reference():
    """noc.Busy's gap search and reservation (shortcuts for a request after every interval included) against a
    boolean per cycle: random requests, in and out of time order, touching and overlapping."""
    rng = np.random.default_rng(11)
    for _ in range(20):
        busy, taken = Busy(), np.zeros(4000, bool)
        t = 0
        for _ in range(60):
            t = max(0, t + int(rng.integers(-40, 60)))
            d = int(rng.integers(1, 30))
            s = busy.free_from(t, d)
            want = next(c for c in range(t, 4000) if not taken[c:c + d].any())
            assert s == want
            busy.take(s, d)
            taken[s:s + d] = True
            edges = np.flatnonzero(np.diff(np.concatenate(([0], taken.astype(np.int8), [0]))))
            assert list(zip(busy.starts, busy.ends)) == list(zip(edges[::2], edges[1::2]))   # merged, sorted


def test_fabric_reservation_is_the_first_cycle_every_resource_is_free():
    """Fabric._reserve against a search cycle by cycle: random busy intervals on a few resources, random offsets and
    lengths; the packet starts at the first s >= s0 with every [s + offset, + d) free, and takes them there."""
    rng = np.random.default_rng(13)
    for _ in range(300):
        res = []
        for _ in range(int(rng.integers(1, 6))):
            busy = Busy()
            for _ in range(int(rng.integers(0, 8))):
                a, n = int(rng.integers(0, 800)), int(rng.integers(1, 60))
                busy.take(busy.free_from(a, n), n)
            res.append((busy, int(rng.integers(0, 40))))
        before = [list(zip(b.starts, b.ends)) for b, _ in res]
        s0, d = int(rng.integers(0, 900)), int(rng.integers(1, 50))

        def free(s):
            return all(e <= s + off or s + off + d <= st for iv, (_, off) in zip(before, res) for st, e in iv)
        want = next(s for s in range(s0, 3000) if free(s))
        assert Fabric(Grid())._reserve(res, s0, d) == want
        for b, off in res:
            assert any(st <= want + off and want + off + d <= e for st, e in zip(b.starts, b.ends))


def test_fabric_route_cache_matches_the_reference(monkeypatch):
    """Fabric.transfer with each route's resources kept (noc.ROUTE_CACHE) and derived again per transfer: the same
    completion cycles and waits over random reads, writes and atomics between Tensix tiles and DRAM banks, with
    multicasts among them, issued out of time order."""
    grid = Grid()
    tiles, drams = list(grid.tensix[:12]), [(17, 12), (18, 12), (17, 15), (18, 19)]
    rng = np.random.default_rng(5)
    calls = []
    for _ in range(400):
        a = tiles[int(rng.integers(len(tiles)))]
        t = int(rng.integers(0, 20_000))
        if rng.random() < 0.1:
            calls.append(("multicast", (int(rng.integers(2)), a, tuple(tiles[:int(rng.integers(1, 6))]),
                                        int(rng.integers(1, 4096)), t)))
            continue
        kind = ["read", "write", "atomic"][int(rng.integers(3))]
        peer = drams[int(rng.integers(len(drams)))] if kind != "atomic" and rng.random() < 0.6 else \
            tiles[int(rng.integers(len(tiles)))]
        bank = dram_bank(*peer) if peer in drams else None
        calls.append(("transfer", (int(rng.integers(2)), kind, a, peer, int(rng.integers(1, 16384)), t, bank)))
    runs = []
    for cached in (True, False):
        monkeypatch.setattr(noc, "ROUTE_CACHE", cached)
        f = Fabric(grid)
        runs.append(([getattr(f, name)(*args) for name, args in calls], f.stats()))
    assert runs[0] == runs[1] and runs[0][1]["wait_cycles"] > 0


def _copy_on_tiles(dev, n_tiles: int, data: np.ndarray, chunk: int):
    """dram_copy.c on BRISC of n tiles, tile i copying chunk i of `data` (transformed) to the output buffer."""
    src, dst = 0x100_0000, 0x200_0000
    dev.write_bank(layout.DRAM_XY, src, data.tobytes())
    per_tile = [[src + i * chunk, 0x80040 - 0x40, chunk, dst + i * chunk, DRAM_XY] for i in range(n_tiles)]
    res = driver.launch(dev, {"brisc": programs.compile_prog("device/dram_copy.c")}, [], timeout_s=120,
                        per_tile=per_tile)
    return res, np.frombuffer(dev.read_bank(layout.DRAM_XY, dst, n_tiles * chunk), np.uint32)


def _transform(w: np.ndarray) -> np.ndarray:
    return (w * np.uint32(2654435761)) ^ (w >> np.uint32(7))


@pytest.mark.needs_program_cc
def test_driver_launches_one_kernel_on_several_tiles():
    dev = EmuDevice()
    data = np.random.default_rng(1).integers(0, 2 ** 32, 6 * 1024, dtype=np.uint32)
    res, out = _copy_on_tiles(dev, 6, data, 4096)
    assert res.tiles == 6 and np.array_equal(out, _transform(data))
    assert len(dev.chip.tiles) == 6 and set(dev.chip.tiles) == set(dev.tile_xys()[:6])
    per_tile = dev.stats()["tiles"]
    assert all(t["instructions"]["brisc"] > 0 for t in per_tile.values())
    assert dev.stats()["fabric"]["transfers"] >= 12
    # tiles released together start at the same cycle: their brisc cycle counts are close (same work, other routes)
    cyc = [t["cycles"]["brisc"] for t in per_tile.values()]
    assert max(cyc) < 1.5 * min(cyc)
    with pytest.raises(TTError, match="split over 141 Tensix tiles, but emu launches on 140"):
        driver.launch(dev, {"brisc": programs.compile_prog("device/dram_copy.c")}, [], per_tile=[[0]] * 141)


@pytest.mark.needs_program_cc
def test_contention_on_one_dram_bank_shows_in_the_cycles():
    """Eight tiles copying through the one DRAM bank at once wait longer for their NoC requests than one tile alone:
    the slowest waits about for the other seven's packets through the bank (47 bytes per cycle)."""
    data = np.arange(8 * 8192, dtype=np.uint32)
    one, eight = EmuDevice(), EmuDevice()
    _copy_on_tiles(one, 1, data[:8192], 32768)
    _copy_on_tiles(eight, 8, data, 32768)
    s1 = one.stats()["stall_cycles"]["brisc"]
    s8 = max(t["stall_cycles"]["brisc"] for t in eight.stats()["tiles"].values())
    assert s8 - s1 > 6 * 32768 // DRAM_BANK_BYTES_PER_CYCLE, (s1, s8)


@pytest.mark.needs_program_cc
def test_each_slice_goes_to_the_least_advanced_tile(monkeypatch):
    """Chip.run's rule, checked on eight tiles contending for one DRAM bank: every slice goes to the tile with the
    least (clock, xy) among the tiles still in the round (those that get another slice later in the same run)."""
    rounds: list[list] = []
    chip_run, tile_run = Chip.run, Tile.run

    def run_round(chip, budget):
        rounds.append([])
        return chip_run(chip, budget)

    def run_slice(tile, budget):
        rounds[-1].append((tile.xy, {xy: (t.clock, xy) for xy, t in tile.chip.tiles.items()}))
        return tile_run(tile, budget)

    monkeypatch.setattr(Chip, "run", run_round)
    monkeypatch.setattr(Tile, "run", run_slice)
    data = np.arange(8 * 2048, dtype=np.uint32)
    _, out = _copy_on_tiles(EmuDevice(), 8, data, 8192)
    assert np.array_equal(out, _transform(data))
    slices = 0
    for slices_of_round in rounds:
        for i, (xy, keys) in enumerate(slices_of_round):
            later = {x for x, _ in slices_of_round[i + 1:]}
            assert all(keys[xy] <= keys[x] for x in later), (xy, keys)
            slices += 1
    assert slices > 8 * len(rounds)         # several slices per tile and round: the rule had choices to make


@pytest.mark.needs_program_cc
def test_idle_tiles_cost_no_host_time():
    """Tiles created by an earlier launch and parked since are not emulated again: a one-tile launch after a
    64-tile one costs about what it costs on a fresh chip."""
    elf = programs.compile_prog("device/dram_copy.c")
    args = [0x100_0000, 0x80000, 4096, 0x200_0000, DRAM_XY]

    def one_tile(dev) -> float:
        t0 = time.perf_counter()
        for _ in range(5):
            driver.launch(dev, {"brisc": elf}, args)
        return time.perf_counter() - t0
    fresh = one_tile(EmuDevice())
    busy = EmuDevice()
    driver.launch(busy, {"brisc": elf}, [], per_tile=[args] * 64)
    assert one_tile(busy) < 3 * fresh + 0.05


@pytest.mark.needs_program_cc
def test_deadlock_names_the_waiting_cores_of_every_tile():
    dev = EmuDevice()
    elfs = {c: build("store_word.c", c, CORE_ID=i).read_bytes() for i, c in enumerate(layout.CORES)}
    elfs["trisc0"] = build("mailbox_wait.c", "trisc0", ROLE=1, FROM=3).read_bytes()   # waits for T2 -> T0: never sent
    with pytest.raises(EmuDeadlock) as e:
        driver.launch(dev, elfs, [], per_tile=[[]] * 2)
    msg = str(e.value)
    assert "tile (1, 2)" in msg and "tile (2, 2)" in msg and msg.count("mailbox read: T2 to T0") == 2, msg


@pytest.mark.ttsim
@pytest.mark.needs_program_cc
def test_many_tile_launch_is_bit_identical_on_ttsim(ttsim_lib):
    data = np.random.default_rng(2).integers(0, 2 ** 32, 4 * 1024, dtype=np.uint32)
    _, emu = _copy_on_tiles(EmuDevice(), 4, data, 4096)
    with TtsimDevice(ttsim_lib) as sim:
        _, ref = _copy_on_tiles(sim, 4, data, 4096)
    assert np.array_equal(emu, ref) and np.array_equal(ref, _transform(data))


def _multicast(niu, src: int, dst: int, n: int, rect: tuple[int, int, int, int], ctrl: int = 0x132) -> None:
    """Drive NIU command buffer 0 as a kernel does: a multicast write of L1 [src, src + n) to dst of rectangle
    (start_x, start_y, end_x, end_y) (docs/launch_noc.md §5.6)."""
    sx, sy, ex, ey = rect
    x, y = niu.tile_xy
    for off, v in ((0x1C, ctrl), (0x00, src), (0x04, 0), (0x08, x | y << 6), (0x0C, dst), (0x10, 0),
                   (0x14, ex | ey << 6 | sx << 12 | sy << 18), (0x20, n), (0x40, 1)):
        niu.store(off, v)


def test_multicast_write_reaches_the_rectangles_tensix_tiles():
    chip = EmuDevice().chip
    sender = chip.tile((2, 3))
    data = np.arange(64, dtype=np.uint8)
    sender.l1_array[0x20000:0x20040] = data
    niu = sender.nius[0]
    acks = niu.load(0x204)
    # NoC0, x 1..10 on row 3: columns 8 and 9 are DRAM/non-Tensix, skipped; the sender is excluded
    _multicast(niu, 0x20000, 0x30000, 64, (1, 3, 10, 3))
    reached = [(x, 3) for x in (1, 3, 4, 5, 6, 7, 10)]
    for xy in reached:
        assert bytes(chip.tile(xy).l1_array[0x30000:0x30040]) == data.tobytes(), xy
    assert not sender.l1_array[0x30000:0x30040].any()
    assert niu.load(0x204) - acks == len(reached)                        # one ack per receiver
    assert niu.sent[-1][0] == "multicast" and set(niu.sent[-1][1]) == set(reached)
    # BRCST_SRC_INCLUDE writes the sender too; a 2-row rectangle reaches both rows
    _multicast(niu, 0x20000, 0x31000, 16, (2, 3, 3, 4), ctrl=0x20132)
    assert all(chip.tile(xy).l1_array[0x31000:0x31010].tobytes() == data[:16].tobytes()
               for xy in ((2, 3), (3, 3), (2, 4), (3, 4)))
    # NoC1 takes the rectangle swapped (start > end)
    _multicast(sender.nius[1], 0x20000, 0x32000, 16, (4, 4, 3, 3))
    assert all(chip.tile(xy).l1_array[0x32000:0x32010].tobytes() == data[:16].tobytes()
               for xy in ((3, 3), (4, 3), (3, 4), (4, 4)))


@pytest.mark.parametrize("ctrl, rect, why", [(0x32, (1, 3, 4, 3), "path reserve"), (0x132, (4, 3, 1, 3), "start"),
                                             (0x132, (0, 3, 4, 3), "corner")])
def test_multicast_misuse_is_refused_like_ttsim(ctrl, rect, why):
    sender = EmuDevice().chip.tile((2, 3))
    with pytest.raises(TTError, match=why):
        _multicast(sender.nius[0], 0x20000, 0x30000, 64, rect, ctrl)


def test_fabric_multicast_costs_one_packet_to_the_farthest_receiver():
    f = Fabric(Grid())
    row = tuple((x, 2) for x in range(2, 8))
    t = f.multicast(0, (1, 2), row, 2048, 0)
    far = len(route(0, (1, 2), (7, 2))) + len(route(0, (7, 2), (1, 2)))
    assert t == cycles.noc_cycles(2048, far)
    unicast = Fabric(Grid())
    assert max(unicast.transfer(0, "write", (1, 2), xy, 2048, 0, None) for xy in row) > t   # six packets queue
