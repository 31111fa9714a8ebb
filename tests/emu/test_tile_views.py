"""The RISC-V MMIO views of the tile that issue #3 lists beside config and semaphores: the TRISCs' direct Dst window
(Dst.md "RISCV access to Dst"), the 16 B/T0/T1/T2 mailboxes (BabyRISCV/Mailboxes.md), and BRISC's view of the
GPRs of all three threads (ScalarUnit.md "RISCV access to GPRs").

C programs from tests/programs/tile (tests/support/tile.py; skipped cleanly without a RISC-V GCC) exercise each
view; the rules are also checked directly through Tile.mmio_load/mmio_store. With TT_SIMULATOR set, the mailbox and
GPR programs also run on ttsim and the L1 results are compared.
"""
from __future__ import annotations

import struct

import numpy as np
import pytest

from tt_backend.chip import isa, layout
from tt_backend.chip.errors import EmuError, EmuUnimplemented
from tt_backend.runtime.emu.device import EmuDevice
from tt_backend.runtime.emu.riscv_dst import cpu_to_dst32
from tt_backend.runtime.emu.rv32 import Stall
from tt_backend.runtime.emu.tile import Tile
from tt_backend.runtime.ttsim_device import TtsimDevice

from tests.support import harness, programs
from tests.support.tile import build, launch, load_elf

ROLE = {"brisc": 0, "trisc0": 1, "trisc1": 2, "trisc2": 3}
MB = 0xFFEC0000
DST = 0xFFBD8000
CFG3 = layout.TENSIX_CFG_BASE + 12
RESULTS = 0x30000


def words(tile, addr, n):
    return list(struct.unpack(f"<{n}I", tile.read_l1(addr, 4 * n)))


def ctrl(t, fmt, no_swizzle=0, unsigned_int=0):
    return (no_swizzle | unsigned_int << 1 | fmt << 2) << (14 + 5 * t)


def f32(x):
    return int(np.float32(x).view(np.uint32))


# ---------------------------------------------------------------------------------------------- mailboxes

def mailbox_images(**defines):
    return {c: build("mailbox.c", c, ROLE=r, **defines) for c, r in ROLE.items()}


def check_mailbox_results(res):
    # B -> Ti (0x1110 + i - 1), Ti -> B (+ 0x100 * i), ring 0xA0 + 1 per hop
    assert res[1:4] == [0x1110, 0x1111, 0x1112]
    assert res[5:8] == [0x1110 + 0x100, 0x1111 + 0x200, 0x1112 + 0x300]
    assert res[10:13] == [0xA0, 0xA1, 0xA2] and res[8] == 0xA3


@pytest.mark.needs_program_cc
@pytest.mark.parametrize("query", [0, 1])
def test_mailbox_exchange_and_ring(tile, query):
    launch(tile, mailbox_images(QUERY=query))
    tile.run(100_000)
    state = tile.state()
    assert all("parked" in state[c] for c in ROLE), state
    res = words(tile, RESULTS, 13)
    check_mailbox_results(res)
    if query:
        assert words(tile, RESULTS + 60, 1) == [0x10]    # both queries after the pops: 0
    assert not tile.mailboxes.state()


@pytest.mark.needs_program_cc
def test_mailbox_depth_four_then_writer_stalls(tile):
    launch(tile, {"brisc": build("mailbox_depth.c", "brisc", ROLE=0, N0=6, N1=0)})
    tile.run(100_000)                                     # T0 held in reset: not a deadlock
    assert words(tile, RESULTS, 1) == [4]                 # four pushes accepted, the fifth waits
    state = tile.state()["brisc"]
    assert "waiting" in state and "mailbox B to T0 full (4 values)" in state, state
    assert tile.mailboxes.state() == {"B to T0": [0x100, 0x101, 0x102, 0x103]}
    t0 = build("mailbox_depth.c", "trisc0", ROLE=1, N0=6, N1=0)
    tile.write32(layout.TRISC_RESET_PC[0], load_elf(tile, t0))
    tile.write32(layout.SOFT_RESET_0, tile.read32(layout.SOFT_RESET_0) & ~(1 << layout.SOFT_RESET_BIT["trisc0"]))
    tile.run(100_000)
    assert words(tile, RESULTS + 0x100, 6) == [0x100 + k for k in range(6)]
    assert words(tile, RESULTS, 1) == [6] and "parked" in tile.state()["brisc"]


@pytest.mark.needs_program_cc
def test_mailbox_aggregate_limit_over_a_writers_four_mailboxes(tile):
    launch(tile, {"brisc": build("mailbox_depth.c", "brisc", ROLE=0, N0=3, N1=2)})
    tile.run(100_000)
    assert words(tile, RESULTS, 1) == [4]                 # 3 to T0 + 1 to T1: four in aggregate
    assert "hold 4 values in aggregate" in tile.state()["brisc"], tile.state()
    images = {"trisc0": build("mailbox_depth.c", "trisc0", ROLE=1, N0=3, N1=2),
              "trisc1": build("mailbox_depth.c", "trisc1", ROLE=2, N0=3, N1=2)}
    held = tile.read32(layout.SOFT_RESET_0)
    for c, img in images.items():
        tile.write32(layout.TRISC_RESET_PC[ROLE[c] - 1], load_elf(tile, img))
        held &= ~(1 << layout.SOFT_RESET_BIT[c])
    tile.write32(layout.SOFT_RESET_0, held)
    tile.run(100_000)
    assert words(tile, RESULTS + 0x100, 3) == [0x100, 0x101, 0x102]
    assert words(tile, RESULTS + 0x200, 2) == [0x200, 0x201]


@pytest.mark.needs_program_cc
def test_blocked_mailbox_read_shows_in_state_then_completes(tile):
    launch(tile, {"trisc1": build("mailbox_wait.c", "trisc1", ROLE=2, FROM=0)})
    ran = tile.run(1_000_000)
    assert ran < 100
    state = tile.state()["trisc1"]
    assert state.startswith("waiting at pc=0x0000") and "mailbox read: B to T1 mailbox (0xFFEC0000) is empty" \
        in state, state
    assert tile.mmio_load("trisc1", MB + 4, 4) == 0        # T1's query of B -> T1: empty
    tile.mmio_store("brisc", MB + 0x2000, 4, 41)          # as if BRISC had pushed 41 to T1
    tile.run(10_000)
    assert "parked" in tile.state()["trisc1"] and words(tile, RESULTS + 8, 1) == [42]


@pytest.mark.needs_program_cc
def test_blocked_mailbox_read_is_named_in_the_deadlock_error(tile):
    images = {c: build("store_word.c", c, CORE_ID=i) for i, c in enumerate(layout.CORES)}
    images["trisc0"] = build("mailbox_wait.c", "trisc0", ROLE=1, FROM=3)     # waits for T2 -> T0
    launch(tile, images)
    with pytest.raises(EmuError, match=r"deadlock(.|\n)*trisc0: waiting at pc=0x[0-9A-F]+: mailbox read: T2 to T0 "
                                       r"mailbox \(0xFFEC3000\) is empty"):
        tile.run(100_000)
    assert "mailbox read: T2 to T0" in tile.state()["trisc0"]


@pytest.mark.needs_program_cc
def test_entering_reset_discards_the_mailboxes_a_core_writes(tile):
    launch(tile, {"brisc": build("mailbox_depth.c", "brisc", ROLE=0, N0=2, N1=1)})
    tile.run(100_000)
    assert "parked" in tile.state()["brisc"] and tile.mailboxes.held_by("brisc") == 3
    tile.mailboxes.write("trisc0", MB + 0x2000, 7, 0)      # T0 -> T1: not BRISC's, survives
    tile.write32(layout.SOFT_RESET_0, layout.ALL_CORES_RESET)   # SoftReset.md: B's writable mailboxes discarded
    assert tile.mailboxes.state() == {"T0 to T1": [7]}


def test_mailbox_rules_without_a_compiler(tile):
    with pytest.raises(EmuError, match="ncrisc has no mailboxes"):
        tile.mmio_store("ncrisc", MB + 0x1000, 4, 1)
    with pytest.raises(EmuError, match="NoC .* cannot reach mailboxes"):
        tile.write32(MB + 0x1000, 1)
    with pytest.raises(EmuError, match="only 32-bit accesses"):
        tile.mmio_load("trisc0", MB, 2)
    with pytest.raises(EmuUnimplemented, match="read from the future"):
        tile.mmio_load("brisc", MB, 4)                    # B -> B, empty: only B itself could fill it
    tile.mmio_store("brisc", MB, 4, 5)                    # B -> B
    assert tile.mmio_load("brisc", MB + 4, 4) == 1
    assert tile.mmio_load("brisc", MB + 0xFF8, 4) == 5   # any address with address & 4 == 0 pops
    tile.mmio_store("trisc2", MB + 0x1FF0, 4, 9)          # any address in the range: T2 -> T0
    assert tile.mmio_load("trisc0", MB + 0x3FFC, 4) == 1  # query (address & 4) from T0 of T2 -> T0
    with pytest.raises(Stall):
        tile.mmio_load("trisc0", MB + 0x2000, 4)          # T1 -> T0 empty: blocks
    assert tile.mmio_load("trisc0", MB + 0x3000, 4) == 9
    for k in range(4):
        tile.mmio_store("trisc1", MB + 0x3000, 4, k)      # T1 -> T2
    with pytest.raises(Stall):
        tile.mmio_store("trisc1", MB, 4, 99)              # aggregate of T1's four mailboxes is full
    assert tile.mailboxes.state() == {"T1 to T2": [0, 1, 2, 3]}


# ---------------------------------------------------------------------------------------------- Dst

def test_dst_view_formats_without_a_compiler(tile):
    if not hasattr(tile.tensix, "dst"):
        pytest.skip("needs tt_backend.runtime.emu.tensix")
    dst = tile.tensix.dst
    st = lambda who, off, size, v: tile.mmio_store(who, DST + off, size, v)   # noqa: E731
    ld = lambda who, off, size: tile.mmio_load(who, DST + off, size)         # noqa: E731
    tile.write32(CFG3, ctrl(0, 0))
    st("trisc0", 4 * 17, 4, f32(-2.75))                   # Dst32b[1][1]
    assert dst.rows32[1, 1] == f32(-2.75) and ld("trisc0", 4 * 17, 4) == f32(-2.75)
    tile.write32(CFG3, ctrl(0, 0, no_swizzle=1))
    raw = ld("trisc0", 4 * 17, 4)
    assert raw == cpu_to_dst32(f32(-2.75))
    st("trisc0", 4 * 18, 4, raw)                          # raw bits back in: same value
    assert dst.rows32[1, 2] == f32(-2.75)
    tile.write32(CFG3, ctrl(0, 3))                        # bf16 view of Dst16b row 1 = high halves of Dst32b row 1
    assert ld("trisc0", 2 * 17, 2) == f32(-2.75) >> 16
    tile.write32(CFG3, ctrl(1, 3))                        # the field of T1 only: T0 is back to fmt 0
    with pytest.raises(EmuError, match="16-bit Dst access .* fmt=0 .* narrower than the element"):
        ld("trisc0", 4 * 16, 2)
    assert ld("trisc1", 2 * 17, 2) == f32(-2.75) >> 16
    # wider/narrower accesses, reserved formats, who may access
    tile.write32(CFG3, ctrl(0, 3))
    with pytest.raises(EmuError, match="RISCV T0/T1 access one element at a time"):
        ld("trisc0", 0, 4)
    st("trisc0", 2 * 16, 2, 0x4049)                       # bf16 3.140625 into Dst16b[1][0]: Dst32b[1][0] high half
    tile.write32(CFG3, ctrl(2, 3))
    assert ld("trisc2", 2 * 16, 4) == (f32(-2.75) >> 16) << 16 | 0x4049   # TRISC2: two elements in one access
    tile.write32(CFG3, ctrl(2, 0))
    with pytest.raises(EmuError, match="narrower than the element"):
        ld("trisc2", 4 * 17, 2)
    tile.write32(CFG3, ctrl(0, 6))
    with pytest.raises(EmuError, match="fmt=6: reserved"):
        ld("trisc0", 0, 4)
    with pytest.raises(EmuError, match="not mapped for brisc"):
        tile.mmio_load("brisc", DST, 4)
    with pytest.raises(EmuError, match="not mapped for host"):
        tile.read32(DST)
    tile.write32(CFG3, ctrl(0, 5))
    with pytest.raises(EmuError, match="beyond Dst16b"):
        ld("trisc0", 0x4000, 1)
    tile.write32(CFG3, ctrl(0, 0))
    with pytest.raises(EmuError, match="never written since reset"):
        ld("trisc0", 4 * 16 * 100, 4)
    tile.write32(layout.TENSIX_CFG_BASE + 4 * 220, 2)
    with pytest.raises(EmuUnimplemented, match="remap_addrs"):
        ld("trisc0", 4 * 17, 4)


def sfpu_words():
    enc = isa.encode
    return {"WORD_LOAD0": enc("SFPLOAD", lreg_ind=0, instr_mod0=3, dest_reg_addr=0),
            "WORD_LOAD2": enc("SFPLOAD", lreg_ind=0, instr_mod0=3, dest_reg_addr=2),
            "WORD_MAD": enc("SFPMAD", lreg_src_a=0, lreg_src_b=10, lreg_src_c=0, lreg_dest=1),   # x * 1.0 + x
            "WORD_STORE4": enc("SFPSTORE", lreg_ind=1, instr_mod0=3, dest_reg_addr=4),
            "WORD_STORE6": enc("SFPSTORE", lreg_ind=1, instr_mod0=3, dest_reg_addr=6)}


def dst_view_run(core):
    tile = Tile()
    if not hasattr(tile.tensix, "dst"):
        pytest.skip("needs tt_backend.runtime.emu.tensix")
    x = np.random.default_rng(7).uniform(-100, 100, 64).astype(np.float32)
    tile.write_l1(0x31000, x.tobytes())
    launch(tile, {core: build("dst_view.c", core, ROLE=ROLE[core], MULTI=int(core == "trisc2"), **sfpu_words())})
    tile.run(200_000)
    assert "parked" in tile.state()[core], tile.state()
    return tile, x, words(tile, 0x32000, 142)


@pytest.mark.needs_program_cc
@pytest.mark.parametrize("core", ["trisc0", "trisc1", "trisc2"])
def test_dst_view_riscv_write_sfpu_roundtrip_and_formats(core):
    tile, x, out = dst_view_run(core)
    y = (x * np.float32(2)).view(np.uint32)
    assert out[0:64] == y.tolist()                        # RISC-V -> SFPLOAD -> SFPMAD -> SFPSTORE -> RISC-V
    assert out[64:128] == (y >> 16).tolist()              # bf16 view: the high halves
    assert out[128] == cpu_to_dst32(int(y[0]))            # no_swizzle: raw Dst32b bits
    assert out[129:133] == [0xFFFFFFFB, 0x80000001, 0x80000005, 0xFFFFFFFF]     # int32 <-> sign-magnitude
    assert out[133:135] == [0x3E00, 0x400F]               # fp16 1.5, raw Sign,Man10,Exp5
    assert out[135:137] == [0xFFFFFFF9, 0x8007]           # int16 -7
    assert out[137:141] == [0xFFFFFFFD, 100, 0x83, 0x9070]   # int8 -3 (Dst.md's Store8 quirk) and 100
    if core == "trisc2":
        assert out[141] == int(y[1] >> 16) << 16 | int(y[0] >> 16)
    assert tile.tensix.dst.rows32[4:8].reshape(-1).tolist() == y.tolist()


@pytest.mark.needs_program_cc
def test_dst_view_reads_an_fpu_result(tile):
    tx = getattr(tile, "tensix", None)
    if not hasattr(tx, "srca"):
        pytest.skip("needs tt_backend.runtime.emu.tensix with the FPU")
    a = [f32(v) for v in (1.0, 2.0, 3.5, -1.0, 0.25, 100.0, -7.5, 0.0) * 2]
    b = [f32(v) for v in (1.0, 0.5, 0.25, 4.0, 0.25, -100.0, 2.5, 3.0) * 2]
    tile.write32(layout.TENSIX_CFG_BASE + 4, 0x60AA0000)      # ALU formats as tests/emu/test_tensix.py _elw
    tx.srca[0, 0, :16] = a
    tx.srcb[0, 0, :16] = b
    tx.srca_valid[0] = tx.srcb_valid[0] = True
    tx.srca_format[0] = tx.srcb_format[0] = 5
    launch(tile, {"trisc1": build("dst_fpu.c", "trisc1", WORD=isa.encode("ELWADD"))})
    tile.run(100_000)
    assert "parked" in tile.state()["trisc1"], tile.state()
    want = (np.array(a, np.uint32).view(np.float32) + np.array(b, np.uint32).view(np.float32)).view(np.uint32)
    out = words(tile, 0x32000, 32)
    assert out[:16] == want.tolist() and out[16:] == (want >> 16).tolist()


def test_dst_view_riscv_writes_are_packed(tile):
    """TRISC2 fills a fp32 Dst tile through its window (fmt 0), then pushes the fp32 packer program of
    tests/emu/test_tensix.py fp32_programs (one tile, Dst slot 0): L1 receives the values as written."""
    if not hasattr(tile.tensix, "dst"):
        pytest.skip("needs tt_backend.runtime.emu.tensix")
    out = 0x40000
    x = np.random.default_rng(3).uniform(-5, 5, 1024).astype(np.float32).view(np.uint32)
    tile.write32(CFG3, 0)
    for i, v in enumerate(x):
        tile.mmio_store("trisc2", DST + 4 * i, 4, int(v))
    for i, v in ((12, 0x00400004), (13, 0x10000400), (18, 1), (24, 0xFFFF), (20, 0), (28, 0x1000), (68, 0),
                 (70, 0x001), (71, 0)):
        tile.write32(layout.TENSIX_CFG_BASE + 4 * i, v)
    gpr4 = out // 16 - 1
    setdma = [isa.encode("SETDMAREG", reg_index_16b=r, payload=p) for r, p in
              ((8, gpr4 & 0xFFFF), (9, gpr4 >> 16), (10, 0), (11, 0))]
    prog = [0xB2250004, 0xB2261020, 0xB2272020, 0x5180000B, 0x5480000F, 0x5E803C00, *setdma, 0xA2400009,
            0xB0040045, 0xB00500B4] + ([0x41000000] * 3 + [0x41008000]) * 3 + [0x41000000] * 3 + [0x41010001]
    for w in prog:
        tile.push_tensix("trisc2", w)
    tile.run(1000)
    assert np.array_equal(np.frombuffer(tile.read_l1(out, 4096), np.uint32), x)


def test_dst_view_race_with_unfinished_fpu_write_is_an_error(tile):
    tx = tile.tensix
    if not hasattr(tx, "tm"):
        pytest.skip("needs the timed Tensix model")
    tile.write32(CFG3, 0)
    tx.dst.write_rows32(0, np.zeros(16, np.uint32))
    tx.tm.dst_fpu_write[0] = 10                            # an FPU write to rows 0-7 issued at cycle 10
    with pytest.raises(EmuError, match="written by the FPU at cycle 10 .* cannot be read for 4 cycles"):
        tile.mmio_load("trisc0", DST, 4)
    tx.dst.write_rows32(8, np.full(16, 7, np.uint32))
    assert tile.mmio_load("trisc0", DST + 4 * 16 * 8, 4) == 7     # another 8-row block: no rule
    tile.push_tensix("trisc1", isa.encode("NOP"))         # issues after the core's current cycle
    with pytest.raises(EmuError, match="thread 1 still issues instructions this core pushed"):
        tile.mmio_store("trisc1", DST + 4 * 16 * 8, 4, 0)


# ---------------------------------------------------------------------------------------------- GPRs

def gpr_images(alias=256):
    w0, w1 = (isa.encode("SETDMAREG", reg_index_16b=2 * 5 + k, payload=p) for k, p in ((0, 0x1234), (1, 0xCAFE)))
    return {c: build("gpr_view.c", c, ROLE=ROLE[c], WORD0=w0, WORD1=w1, ALIAS=alias)
            for c in ("brisc", "trisc1", "trisc2")}


@pytest.mark.needs_program_cc
def test_brisc_sees_the_gprs_of_all_three_threads(tile):
    if not hasattr(tile.tensix, "threads"):
        pytest.skip("needs tt_backend.runtime.emu.tensix (SETDMAREG)")
    launch(tile, gpr_images())
    tile.run(100_000)
    assert all("parked" in tile.state()[c] for c in ("brisc", "trisc1", "trisc2")), tile.state()
    assert words(tile, RESULTS, 4) == [0xCAFE1234, 0x77, 0xCAFE1234, 0x5A5A0009]
    assert tile.tensix.gpr_read(2, 9) == 0x5A5A0009 and tile.tensix.gpr_read(1, 7) == 0x77


def test_gpr_views_without_a_compiler(tile):
    tile.mmio_store("brisc", layout.REGFILE_BASE + 4 * (64 * 2 + 63), 4, 0xAB)   # GPRs[2][63]
    assert tile.mmio_load("trisc2", layout.REGFILE_BASE + 4 * 63, 4) == 0xAB
    assert tile.mmio_load("trisc2", layout.REGFILE_BASE + 0xF00 + 4 * 63, 4) == 0xAB   # aliases every 256 bytes
    tile.mmio_store("trisc0", layout.REGFILE_BASE + 0x100, 4, 0x11)          # T0's GPR 0 through an alias
    assert tile.mmio_load("brisc", layout.REGFILE_BASE, 4) == 0x11
    with pytest.raises(EmuError, match="beyond GPRs\\[3\\]\\[64\\]"):
        tile.mmio_load("brisc", layout.REGFILE_BASE + 0x300, 4)
    with pytest.raises(EmuError, match="not mapped for ncrisc"):
        tile.mmio_load("ncrisc", layout.REGFILE_BASE, 4)


# ---------------------------------------------------------------------------------------------- ttsim differential

@pytest.mark.needs_program_cc
def test_mailbox_program_agrees_with_ttsim(ttsim_lib):
    """The same ELFs (tests/programs crt0: status words, launch protocol) on ttsim and on the emulator: B -> Ti,
    Ti -> B, then the ring B -> T0 -> T1 -> T2 -> B, with blocking pops on every core. ttsim has one slot per
    mailbox and no query reads, so the program keeps one value per mailbox and does not query (QUERY=0). ttsim does
    not implement the Dst window (UnimplementedFunctionality tensix_dst) nor BRISC's GPR view (trisc_pipe
    riscv_id=0), and calls a TRISC GPR alias at +0x100 UndefinedBehavior: those views have no differential test."""
    elfs = {c: programs.compile_prog("tile/mailbox.c", c, defines={"ROLE": r, "QUERY": 0})
            for c, r in ROLE.items()}
    out = {}
    for name, make in (("emu", EmuDevice), ("ttsim", lambda: TtsimDevice(ttsim_lib))):
        dev = make()
        dev.write_l1(RESULTS, bytes(64))
        harness.run_on(dev, elfs, max_clocks=1_000_000)
        out[name] = dev.read_l1(RESULTS, 64)
        if hasattr(dev, "close"):
            dev.close()
    assert out["emu"] == out["ttsim"], (out["emu"].hex(), out["ttsim"].hex())
    check_mailbox_results(list(struct.unpack("<16I", out["emu"])))
