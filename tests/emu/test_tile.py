"""The emulated tile: launch sequence (docs/launch_noc.md §3.2) done by hand, NoC transfers, MMIO routing, scheduler.

C programs in tests/programs/tile/ are compiled with the stock RISC-V GCC (skipped cleanly when none is installed); the
NIU rules are also checked directly by programming the NIU from the host, which needs no compiler.
"""
from __future__ import annotations

import time

import numpy as np
import pytest

from tt_backend.runtime.driver import jal_x0
from tt_backend.chip import isa, layout
from tt_backend.chip.errors import EmuError, EmuUnimplemented
from tt_backend.runtime.emu.device import EmuDevice
from tt_backend.runtime.emu.dram import Dram
from tt_backend.runtime.emu.rv32 import Stall
from tt_backend.runtime.emu.tile import Tile

from tests.support.tile import FLAG, build, launch, load_elf


class StandInTensix:
    """A minimal Tensix for a tile in a chosen state (see Busy below): SEMINIT/SEMPOST/NOP, executed at push time."""

    def __init__(self, l1):
        self.sem = [0] * 8
        self.instructions = [0, 0, 0]
        self.cfg = {}

    def push(self, thread, word):
        name, f = isa.decode(word)
        if name == "SEMINIT":
            for i in range(8):
                if f["sem_sel"] >> i & 1:
                    self.sem[i] = f["init_value"]
        elif name == "SEMPOST":
            for i in range(8):
                if f["sem_sel"] >> i & 1:
                    self.sem[i] = min(15, self.sem[i] + 1)
        elif name != "NOP":
            raise EmuUnimplemented(f"stand-in Tensix: {name}")
        self.instructions[thread] += 1

    def step(self):
        return 0

    def thread_idle(self, t):
        return True

    def blocked_reason(self, t):
        return None

    def sem_read(self, i):
        return self.sem[i]

    def sem_mmio_write(self, i, value):
        self.sem[i] = max(0, self.sem[i] - 1) if value & 1 else min(15, self.sem[i] + 1)

    def cfg_read(self, i):
        return self.cfg.get(i, 0)

    def cfg_write(self, i, v):
        self.cfg[i] = v

    def gpr_read(self, t, i):
        return 0

    def gpr_write(self, t, i, v):
        pass

    def mop_cfg_write(self, t, i, v):
        pass


# ---------------------------------------------------------------------------------------------- helpers

def word(tile: Tile, addr: int) -> int:
    return tile.read32(addr)


# ---------------------------------------------------------------------------------------------- (a)..(f)

@pytest.mark.needs_program_cc
def test_five_cores_write_distinct_words_and_park(tile):
    launch(tile, {c: build("store_word.c", c, CORE_ID=i) for i, c in enumerate(layout.CORES)})
    tile.run(100_000)
    for i, _ in enumerate(layout.CORES):
        assert word(tile, FLAG + 4 * i) == 0xC0DE0000 + i
    state = tile.state()
    assert all("parked" in state[c] for c in layout.CORES), state
    assert all(tile.instructions[c] > 0 for c in layout.CORES)


@pytest.mark.needs_program_cc
def test_reader_writer_dram_roundtrip_over_both_nocs(tile):
    data = np.random.default_rng(1).integers(0, 256, 4096, dtype=np.uint8)
    tile.dram.write(0, data)
    launch(tile, {"brisc": build("reader.c", "brisc"), "ncrisc": build("writer.c", "ncrisc")})
    tile.run(200_000)
    assert word(tile, FLAG) == 1 and word(tile, FLAG + 4) == 2, tile.state()
    np.testing.assert_array_equal(np.frombuffer(tile.read_l1(0x100000, 4096), np.uint8), data)
    np.testing.assert_array_equal(tile.dram.read(0x200000, 4096), data)
    n0, n1 = tile.nius[0].stats(), tile.nius[1].stats()
    assert n0["requests"]["read"] == 2 and n0["bytes"]["read"] == 4096
    assert n1["requests"]["write"] == 1 and n1["bytes"]["write"] == 4096
    assert n0["counters"]["RD_RESP_RECEIVED"] == 2 and n1["counters"]["WR_ACK_RECEIVED"] == 1
    assert n1["counters"]["NONPOSTED_WR_REQ_SENT"] == 1


@pytest.mark.needs_program_cc
def test_misaligned_dram_read_is_an_error_with_reason(tile):
    launch(tile, {"brisc": build("misaligned.c", "brisc")})
    with pytest.raises(EmuError, match=r"alignment of src_addr=0x20 .*mod 64.*\[brisc pc=0x"):
        tile.run(10_000)
    assert tile.state()["brisc"].startswith("faulted at pc=0x0000") and tile.run(1000) == 0
    launch(tile, {"brisc": build("counter.c", "brisc")})       # a fresh release clears the fault
    tile.run(10_000)
    assert word(tile, FLAG) == 1


@pytest.mark.needs_program_cc
def test_trisc0_pushes_semaphore_instructions_and_reads_back(tile):
    seminit = isa.encode("SEMINIT", sem_sel=1 << 2, init_value=3, max_value=15)
    sempost = isa.encode("SEMPOST", sem_sel=1 << 2)
    nop = isa.encode("NOP")
    launch(tile, {"trisc0": build("tensix_sem.c", "trisc0", WORD0=seminit, WORD1=sempost, WORD2=nop)})
    tile.run(10_000)
    assert "parked" in tile.state()["trisc0"], tile.state()
    assert word(tile, FLAG) == 4
    assert tile.tensix_pushes[0] == 3 and tile.tensix.instructions[0] == 3


@pytest.mark.needs_program_cc
def test_blocked_tensix_thread_is_reported_then_released_by_another_trisc(tile):
    if not hasattr(tile.tensix, "threads"):
        pytest.skip("needs tt_backend.runtime.emu.tensix (SEMWAIT)")
    seminit = isa.encode("SEMINIT", sem_sel=1 << 2, init_value=0, max_value=15)
    semwait = isa.encode("SEMWAIT", sem_sel=1 << 2, wait_sem_cond=1, stall_res=0x1FF)   # wait while value == 0
    nop = isa.encode("NOP")
    launch(tile, {"trisc0": build("tensix_sem.c", "trisc0", WORD0=seminit, WORD1=semwait, WORD2=nop)})
    ran = tile.run(1_000_000)
    assert ran < 1000                                    # nothing can progress: run() returns early
    state = tile.state()
    assert "waiting" in state["trisc0"] and "TTSync" in state["trisc0"], state
    assert "SEMWAIT sem2" in state["tensix0"], state
    entry = load_elf(tile, build("sem_post.c", "trisc1"))
    tile.write32(layout.TRISC_RESET_PC[1], entry)
    tile.write32(layout.SOFT_RESET_0, tile.read32(layout.SOFT_RESET_0) & ~(1 << layout.SOFT_RESET_BIT["trisc1"]))
    tile.run(10_000)
    state = tile.state()
    assert "parked" in state["trisc0"] and "parked" in state["trisc1"] and state["tensix0"] == "idle", state
    assert word(tile, FLAG) == 1


@pytest.mark.needs_program_cc
def test_relaunch_without_reload_restarts_at_reset_pc(tile):
    launch(tile, {"ncrisc": build("counter.c", "ncrisc")})
    tile.run(10_000)
    assert word(tile, FLAG) == 1
    only_ncrisc = layout.ALL_CORES_RESET & ~(1 << layout.SOFT_RESET_BIT["ncrisc"])
    tile.write32(layout.SOFT_RESET_0, only_ncrisc)   # already released: writing 0 again does not restart
    tile.run(10_000)
    assert word(tile, FLAG) == 1
    tile.write32(layout.SOFT_RESET_0, layout.ALL_CORES_RESET)
    assert "in reset" in tile.state()["ncrisc"]
    tile.write32(layout.SOFT_RESET_0, only_ncrisc)   # 1 -> 0 edge: start again at NCRISC_RESET_PC
    tile.run(10_000)
    assert word(tile, FLAG) == 2
    assert "parked" in tile.state()["ncrisc"]


@pytest.mark.needs_program_cc
def test_spinning_core_returns_at_budget_and_shows_pc(tile):
    launch(tile, {"brisc": build("spin.c", "brisc")})
    ran = tile.run(50_000)
    assert 50_000 <= ran < 50_000 + 100
    state = tile.state()["brisc"]
    assert state.startswith("running at pc=0x0000") and tile.running("brisc"), state
    pc = tile.cores["brisc"].pc
    assert layout.IMAGE_SLOT["brisc"] <= pc < layout.IMAGE_SLOT["brisc"] + layout.IMAGE_SLOT_SIZE
    count = word(tile, FLAG)
    assert count > 1000
    tile.write32(layout.SOFT_RESET_0, layout.ALL_CORES_RESET)   # asserting reset stops it at once
    tile.run(10_000)
    assert word(tile, FLAG) == count
    assert tile.clock > 0 and tile.read32(layout.WALL_CLOCK_LO) == tile.clock


@pytest.mark.needs_program_cc
def test_emulated_instructions_per_second(tile, capsys):
    launch(tile, {"brisc": build("loop.c", "brisc", ITERS=200_000)})
    t0 = time.perf_counter()
    ran = tile.run(50_000_000)
    dt = time.perf_counter() - t0
    assert word(tile, FLAG + 4) == 1 and "parked" in tile.state()["brisc"]
    x, acc = 1, 0
    for i in range(200_000):
        x ^= (x << 13) & 0xFFFFFFFF
        x ^= x >> 17
        x ^= (x << 5) & 0xFFFFFFFF
        acc = (acc + x * 3 + (i & 7)) & 0xFFFFFFFF
    assert word(tile, FLAG) == acc
    with capsys.disabled():
        print(f"\n[tile] {ran} RISC-V instructions in {dt:.2f} s = {ran / dt / 1e6:.2f} M instr/s through the tile")


@pytest.mark.needs_program_cc
def test_noc_request_rate_and_monotonic_counters(tile, capsys):
    image = build("noc_loop.c", "brisc", COUNT=500, CHUNK=4096)
    for launch_no in (1, 2):                       # counters keep counting across launches
        launch(tile, {"brisc": image})
        t0 = time.perf_counter()
        tile.run(10_000_000)
        dt = time.perf_counter() - t0
        assert word(tile, FLAG + 4) == 1
        assert tile.read32(0xFFB20208) == 500 * launch_no
    assert tile.nius[0].bytes["read"] == 2 * 500 * 4096
    with capsys.disabled():
        print(f"\n[tile] NoC0 4 KiB reads: {500 / dt:.0f} requests/s ({500 * 4096 / dt / 2**20:.0f} MiB/s)")


@pytest.mark.needs_program_cc
def test_device_protocol_runs_a_launch():
    dev = EmuDevice(Tile())
    launch(dev.tile, {"brisc": build("counter.c", "brisc")})
    dev.advance(10_000)
    assert dev.read32(FLAG) == 1
    assert "parked" in dev.core_state()["brisc"]
    assert dev.stats()["instructions"]["brisc"] > 0


# ---------------------------------------------------------------------------------------------- no compiler needed

def test_dram_is_sparse_and_bounded():
    d = Dram()
    assert d.read(0xFFFF0000, 8).tolist() == [0] * 8 and not d.pages
    d.write((1 << 20) - 2, b"\x01\x02\x03\x04")                 # spans two pages
    assert d.read((1 << 20) - 2, 4).tobytes() == b"\x01\x02\x03\x04" and len(d.pages) == 2
    d.write(0xFFFFFFFC, b"\xff" * 4)
    with pytest.raises(EmuError, match="overrun"):
        d.read(0xFFFFFFFE, 4)


def test_device_dram_and_l1_host_access():
    dev = EmuDevice(Tile())
    assert dev.name == "emu"
    dev.write_dram(0x1234, b"hello")
    assert dev.read_dram(0x1234, 5) == b"hello"
    dev.write_l1(0x20000, b"\x01\x02\x03\x04")
    assert dev.read32(0x20000) == 0x04030201
    with pytest.raises(EmuError, match="beyond L1"):
        dev.read_l1(layout.L1_SIZE - 2, 4)


def niu_request(tile: Tile, noc: int, ctrl: int, targ: int, targ_hi: int, ret: int, ret_hi: int, length: int,
                buf: int = 0, data: int = 0) -> None:
    b = layout.NOC_BASE[noc] + 0x800 * buf
    for off, v in ((0x1C, ctrl), (0x18, 0), (0x00, targ), (0x04, 0), (0x08, targ_hi), (0x0C, ret), (0x10, 0),
                   (0x14, ret_hi), (0x20, length), (0x28, data)):
        tile.write32(b + off, v)
    tile.write32(b + 0x40, 1)


ME = 1 | (2 << 6)
DRAM = 18 | (12 << 6)


def test_niu_identity_registers(tile):
    assert tile.read32(0xFFB20044) == 0x10611081 and tile.read32(0xFFB30044) == 0x0061124F
    assert tile.read32(0xFFB20148) == tile.read32(0xFFB31948) == 0x081
    assert tile.read32(0xFFB20108) == 0x301 and tile.read32(0xFFB20110) == 0x3
    with pytest.raises(EmuError, match="0x210"):
        tile.read32(0xFFB20210)                                 # CMD_ACCEPTED: not modelled (fatal in ttsim)


def test_niu_transfers_and_counters(tile):
    tile.dram.write(0x40, bytes(range(64)))
    niu_request(tile, 0, 0x10, 0x40, 18 | (14 << 6), 0x1040, ME, 64)      # another endpoint of the same bank
    assert tile.read_l1(0x1040, 64) == bytes(range(64))
    niu_request(tile, 0, 0x10, 0x40, 17 | (20 << 6), 0x1080, ME, 64)      # another bank: never written, zeros
    assert tile.read_l1(0x1080, 64) == bytes(64)
    niu_request(tile, 1, 0x02, 0x1040, ME, 0x9000, DRAM, 32, buf=3)       # posted write, initiator 3
    assert tile.dram.read(0x9000, 32).tobytes() == bytes(range(32))
    niu_request(tile, 0, 0x10, 0x1040, ME, 0x2050, ME, 16)                # own L1 -> L1
    assert tile.read_l1(0x2050, 16) == bytes(range(16))
    tile.write32(0x3000, 41)
    niu_request(tile, 0, 0x11, 0x3000, ME, 0x3010, ME, 0x107C, data=5)    # atomic increment
    assert tile.read32(0x3000) == 46 and tile.read32(0x3010) == 41
    assert tile.read32(0xFFB20208) == 3 and tile.read32(0xFFB3022C) == 1 and tile.read32(0xFFB20200) == 1
    assert tile.read32(0xFFB20040) == 0 and tile.read32(0xFFB20000) == 0x3000   # registers are kept
    # inline write to own MMIO (TRISC0_RESET_PC)
    niu_request(tile, 0, 0x1A, layout.TRISC_RESET_PC[0], ME, 0, ME, 0xF, data=0x12340)
    assert tile.read32(layout.TRISC_RESET_PC[0]) == 0x12340


@pytest.mark.parametrize("args, reason", [
    ((0, 0x10, 0x20, DRAM, 0x100000, ME, 64), r"alignment .* mod 64"),
    ((0, 0x10, 0x1004, ME, 0x2008, ME, 16), r"alignment .* mod 16"),
    ((1, 0x12, 0x1000, ME, 0x2008, DRAM, 16), r"alignment .* mod 16"),
    ((0, 0x10, 0x0, DRAM, 0x1000, ME, 0), r"length must be 1\.\.16384"),
    ((0, 0x10, 0x0, DRAM, 0x1000, ME, 16448), r"length must be 1\.\.16384"),
    ((0, 0x00, 0x0, DRAM, 0x1000, ME, 64), "read should not be posted"),
    ((0, 0x10, 0x0, 5 | (30 << 6), 0x1000, ME, 64), "not a DRAM endpoint or a usable Tensix tile"),
    ((0, 0x10, 0x0, 0 | (5 << 6), 0x1000, ME, 64), "physical DRAM coordinate"),
    ((0, 0x10, 0x0, DRAM, 0x1000, 15 | (9 << 6), 64), "RET_HI must be this tile"),
    ((0, 0x10, 0x0, DRAM, 0x17FFC0, ME, 128), "beyond L1"),
    ((0, 0x12, 0x0, DRAM, 0x0, DRAM, 64), "TARG_HI=.* must be this tile"),
    ((0, 0x112, 0x1000, ME, 0x0, DRAM, 64), "path reserve"),
    ((0, 0x16, 0x1000, ME, 0x0, DRAM, 64), "fatal NOC_CTRL bits"),
    ((0, 0x11, 0x3000, DRAM, 0x3010, ME, 0x107C), "atomics on DRAM"),
    ((0, 0x11, 0x3000, ME, 0x3010, ME, 0x107D), "noc_at_len_be=0x107D"),
    ((0, 0x1A, 0x1000, ME, 0, ME, 0xF), "inline write to an L1 address"),
])
def test_niu_rules(args, reason):
    with pytest.raises(EmuError, match=reason):
        niu_request(Tile(), *args)


def test_niu_reaches_other_tiles_of_the_chip():
    tile = Tile()
    other = tile.chip.tile((16, 11))                       # created when first addressed
    other.write_l1(0x4000, bytes(range(64)))
    far = 16 | (11 << 6)
    niu_request(tile, 0, 0x10, 0x4000, far, 0x1000, ME, 64)                  # read another tile's L1
    assert tile.read_l1(0x1000, 64) == bytes(range(64))
    niu_request(tile, 1, 0x12, 0x1000, ME, 0x8010, far, 32)                  # acked write into it
    assert other.read_l1(0x8010, 32) == bytes(range(32))
    other.write32(0x3000, 7)
    niu_request(tile, 0, 0x11, 0x3000, far, 0x3010, ME, 0x107C, data=2)      # atomic increment over there
    assert other.read32(0x3000) == 9 and tile.read32(0x3010) == 7
    with pytest.raises(EmuUnimplemented, match="not a DRAM endpoint or a usable Tensix tile"):
        niu_request(tile, 0, 0x10, 0x0, 8 | (2 << 6), 0x1000, ME, 64)       # column 8 has no Tensix
    # a multicast write to x 1..4, y 3..4 (docs/launch_noc.md §5.6) lands on those 8 tiles
    tile.write_l1(0x4000, bytes(range(64)))
    niu_request(tile, 0, 0x132, 0x4000, ME, 0x5000, 0x0C1104, 64)
    assert all(tile.chip.tile((x, y)).read_l1(0x5000, 64) == bytes(range(64)) for x in range(1, 5) for y in (3, 4))


def test_soft_reset_and_reset_pc_registers(tile):
    assert tile.read32(layout.SOFT_RESET_0) == layout.ALL_CORES_RESET
    with pytest.raises(EmuError, match="SOFT_RESET_0=0x47fff"):
        tile.write32(layout.SOFT_RESET_0, 0x47FFF)
    tile.write32(layout.SOFT_RESET_0, layout.ALL_CORES_RESET | (1 << 31))      # bit 31 ignored
    with pytest.raises(EmuError, match="write-only"):
        tile.read32(layout.NCRISC_RESET_PC)
    with pytest.raises(EmuError, match="DISABLE_RESET"):
        tile.write32(0xFFB12224, 0)
    tile.write32(layout.TRISC_RESET_PC[1], 0xD000)
    assert tile.reset_pc("trisc1") == layout.DEFAULT_RESET_PC["trisc1"]
    tile.write32(layout.TRISC_RESET_PC_OVERRIDE, 2)
    assert tile.reset_pc("trisc1") == 0xD000 and tile.reset_pc("brisc") == 0


def test_core_mmio_rules(tile):
    with pytest.raises(EmuError, match="brisc: 8-bit MMIO read at 0xFFB121B0"):
        tile.mmio_load("brisc", layout.SOFT_RESET_0, 1)
    with pytest.raises(EmuError, match="trisc0: 4-byte read at 0xFFB40000: address not mapped"):
        tile.mmio_load("trisc0", 0xFFB40000, 4)
    with pytest.raises(EmuError, match="beyond L1"):
        tile.mmio_store("brisc", 0x180000, 4, 0)
    with pytest.raises(EmuError, match="cannot push Tensix"):
        tile.push_tensix("ncrisc", 0x02000000)
    with pytest.raises(EmuError, match="only BRISC may push"):
        tile.mmio_store("trisc1", 0xFFE50000, 4, 0x02000000)
    with pytest.raises(EmuError, match="write-only"):
        tile.mmio_load("trisc0", 0xFFB80000, 4)
    with pytest.raises(EmuError, match="only reachable from a RISC-V core"):
        tile.write32(0xFFE40000, 0x02000000)
    # the slow alias of TRISC1's 4 KiB local RAM appears twice in its 8 KiB slot
    tile.mmio_store("brisc", 0xFFB1A010, 2, 0xBEEF)
    assert tile.local["trisc1"][0x10:0x12].tobytes() == b"\xef\xbe"
    assert tile.mmio_load("ncrisc", 0xFFB1B010, 4) == 0xBEEF


def test_ttsync_stalls_while_thread_busy():
    class Busy(StandInTensix):
        idle = False

        def thread_idle(self, t):
            return self.idle

    tile = Tile(tensix_factory=Busy)
    with pytest.raises(Stall):
        tile.mmio_load("trisc2", layout.TENSIX_SYNC, 4)
    assert "TTSync" in tile.state()["trisc2"] or "in reset" in tile.state()["trisc2"]
    tile.tensix.idle = True
    assert tile.mmio_load("trisc2", layout.TENSIX_SYNC, 4) == 0


@pytest.mark.needs_program_cc
def test_brisc_releases_ncrisc_then_resets_itself(tile):
    launch(tile, {"ncrisc": build("counter.c", "ncrisc")}, release=False)
    launch_brisc = build("self_reset.c", "brisc", NC_ENTRY=layout.IMAGE_SLOT["ncrisc"])
    tile.write32(0, jal_x0(load_elf(tile, launch_brisc)))
    tile.write32(layout.SOFT_RESET_0, layout.ALL_CORES_RESET & ~(1 << layout.SOFT_RESET_BIT["brisc"]))
    tile.run(10_000)
    assert word(tile, FLAG) == 1 and word(tile, FLAG + 8) == 0
    state = tile.state()
    assert "in reset" in state["brisc"] and "parked" in state["ncrisc"], state
    assert tile.read32(layout.SOFT_RESET_0) == 0x7800


def test_local_ram_bounds_and_privacy(tile):
    with pytest.raises(EmuError, match="beyond its 4 KiB local RAM"):
        tile.mmio_store("trisc0", 0xFFB01FFC, 4, 0)
    with pytest.raises(EmuError, match="private"):
        tile.read32(0xFFB00000)


@pytest.mark.needs_program_cc
def test_spinning_core_is_detected_and_keeps_time_with_the_worker(tile):
    """A core polling a word nobody has written stops after an iteration or two per round (rv32 spin detection)
    instead of burning its quantum, yet its time keeps up with the core doing the work, and it sees the write."""
    launch(tile, {"brisc": build("wait_flag.c", "brisc", WORK=0), "ncrisc": build("wait_flag.c", "ncrisc",
                                                                                   WORK=20_000)})
    tile.run(10_000_000)
    assert "parked" in tile.state()["brisc"] and "parked" in tile.state()["ncrisc"]
    assert word(tile, FLAG + 8) == 2
    worker, waiter = tile.instructions["ncrisc"], tile.instructions["brisc"]
    assert worker > 100_000 and waiter < worker / 20, (worker, waiter)     # no quantum-long polling
    stats = tile.stats()["cycles"]
    assert stats["brisc"] >= stats["ncrisc"] - 2 * tile.quantum, stats      # waited as long as the worker worked


@pytest.mark.needs_program_cc
def test_a_core_polling_l1_resumes_at_the_cycle_of_the_store_it_waits_for(tile):
    """The waiter is frozen on the word its loop reads (not run again while it is unchanged) and resumes at the
    cycle the worker stored it (its L1 line's stamp), not at the end of the worker's quantum or of its work."""
    launch(tile, {"brisc": build("wait_flag.c", "brisc", WORK=0),
                  "ncrisc": build("wait_flag.c", "ncrisc", WORK=3_000, POST=20_000)})
    tile.run(10_000_000)
    assert word(tile, FLAG + 8) == 2
    stored, end = int(tile.l1_stamp[(FLAG + 4) >> 4]), {c: tile.cycles(c) for c in ("brisc", "ncrisc")}
    assert end["ncrisc"] - end["brisc"] > 10 * tile.quantum, end      # the waiter did not wait for the POST work
    assert 0 <= end["brisc"] - stored < 100, (end, stored)            # it resumed when the flag was stored
    assert tile.instructions["brisc"] < 100                             # and polled once or twice, not each round


@pytest.mark.needs_program_cc
def test_a_poller_that_misses_a_store_landing_inside_its_last_turn_polls_again():
    """The worker runs first in host order and raises the flag at a cycle inside the waiter's last loop turn: the
    waiter's reads saw the flag unraised, its spin detection stopped it just after the store's cycle, and its probe
    (as of that cycle) sees the flag and finds no turn back. It polls once more and leaves at its own cycle; it was
    carried to the worker's cycle at the end of its quantum (about 2,000 cycles instead of ~60). The store's cycle is
    moved across the loop's turns by DELAY nops."""
    for delay in range(20, 64, 2):
        tile = Tile()
        launch(tile, {"ncrisc": build("wait_flag.c", "ncrisc", WORK=0, ABORT=1),
                      "brisc": build("wait_flag.c", "brisc", WORK=1, DELAY=delay, POST=20_000)})
        tile.run(10_000_000)
        assert word(tile, FLAG + 8) == 2
        assert tile.cycles("ncrisc") < 150, (delay, tile.cycles("ncrisc"), tile.cycles("brisc"))


def test_a_noc_write_stamps_the_lines_it_lands_in_with_its_completion():
    chip = EmuDevice().chip
    sender, peer = chip.tile((2, 3)), chip.tile((3, 3))
    noc = layout.NOC_BASE[0]
    sender.l1_array[0x20000:0x20040] = 7
    x, y = peer.xy
    # a non-posted unicast write of 64 bytes from the sender's L1 0x20000 to the peer's 0x30010
    for off, v in ((0x1C, 0x12), (0x00, 0x20000), (0x04, 0), (0x08, 2 | 3 << 6), (0x0C, 0x30010), (0x10, 0),
                   (0x14, x | y << 6), (0x20, 64), (0x40, 1)):
        sender.mmio_store("brisc", noc + off, 4, v)
    due = sender._niu_due[0][1]                           # WR_ACK_RECEIVED: the write's completion
    lines = peer.l1_stamp[0x30000 >> 4:0x30080 >> 4]
    assert due and list(lines) == [0] + [due[-1]] * 4 + [0] * 3
    assert not sender.l1_stamp.any()


@pytest.mark.needs_program_cc
def test_core_spinning_on_the_host_returns_early_without_a_deadlock(tile):
    launch(tile, {"brisc": build("wait_flag.c", "brisc", WORK=0)})
    ran = tile.run(1_000_000)
    assert ran < 1000 and tile.state()["brisc"].startswith("waiting at pc=0x0000") and "spinning" in \
        tile.state()["brisc"]
    tile.write32(FLAG + 4, 5)                         # the host provides what it waits for
    tile.run(1_000_000)
    assert "parked" in tile.state()["brisc"] and word(tile, FLAG + 8) == 6
