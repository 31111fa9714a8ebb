"""Tensix coprocessor model driven directly by pushing instruction words (no RISC-V): the fp32 and bf16 tile paths
of docs/sfpu_path.md §10, packer rounding, semaphore ordering, strict-mode errors."""
from __future__ import annotations

import numpy as np
import pytest

from tt_backend.runtime.emu.rv32 import Stall
from tt_backend.runtime.emu.tensix import Tensix
from tt_backend.chip.errors import EmuError, EmuUnimplemented
from tt_backend.chip.isa import encode

L1_SIZE = 1536 * 1024
IN, OUT = 0x20000, 0x40000

try:
    import tt_backend.runtime.emu.sfpu  # noqa: F401
    HAVE_SFPU = True
except ImportError:
    HAVE_SFPU = False


class StandInSFPU:
    """Just SFPLOADI (bf16 immediate), SFPLOAD/SFPSTORE (FP32) and SFPMAD, for when tt_backend.runtime.emu.sfpu is absent."""

    def __init__(self, dst):
        self.dst = dst
        self.lreg = np.zeros((17, 32), np.uint32)
        self.sfpu_fp32_enabled = False

    def _lanes(self, addr):
        rows = (addr & ~3) + np.arange(32) // 8
        cols = 2 * (np.arange(32) % 8) + ((addr >> 1) & 1)
        return rows, cols

    def execute(self, name, f, dst_base):
        if name == "SFPLOADI":
            assert f["instr_mod0"] == 0
            self.lreg[f["lreg_ind"]] = f["imm16"] << 16
        elif name == "SFPLOAD":
            assert f["instr_mod0"] == 3
            self.lreg[f["lreg_ind"]] = self.dst.rows32[self._lanes(f["dest_reg_addr"] + dst_base)]
        elif name == "SFPSTORE":
            assert f["instr_mod0"] == 3
            r, c = self._lanes(f["dest_reg_addr"] + dst_base)
            self.dst.rows32[r, c] = self.lreg[f["lreg_ind"]]
            self.dst.written[r] = True
        elif name == "SFPMAD":
            a, b, c = (self.lreg[f[k]].view(np.float32) for k in ("lreg_src_a", "lreg_src_b", "lreg_src_c"))
            with np.errstate(all="ignore"):
                self.lreg[f["lreg_dest"]] = (a * b + c).astype(np.float32).view(np.uint32)
        else:
            raise EmuUnimplemented(name)


def make_tensix(strict=True):
    l1 = np.zeros(L1_SIZE, np.uint8)
    tx = Tensix(l1, strict=strict)
    if tx.sfpu is None:
        tx.sfpu = StandInSFPU(tx.dst)
    return tx, l1


def run(tx, progs, max_rounds=100000):
    """Feed three per-thread programs. Items are words (pushed; a full FIFO is retried) or callables standing for
    RISC-V actions that return False while they must wait. Raises on deadlock with the blocked reasons."""
    pos = [0, 0, 0]
    for _ in range(max_rounds):
        moved = False
        for t in range(3):
            while pos[t] < len(progs[t]):
                item = progs[t][pos[t]]
                if callable(item):
                    if not item(tx):
                        break
                else:
                    try:
                        tx.push(t, item)
                    except Stall:
                        break
                pos[t] += 1
                moved = True
        n = tx.step()
        if all(pos[t] == len(progs[t]) and tx.thread_idle(t) for t in range(3)):
            return
        if not moved and n == 0:
            raise AssertionError(f"deadlock: {[tx.blocked_reason(t) for t in range(3)]} at {pos}")
    raise AssertionError("did not finish")


def cfg(index, value):
    def act(tx):
        tx.cfg_write(index, value)
        return True
    return act


def take_sem(i):
    """RISC-V: wait until sem i > 0, then decrement it through the MMIO window."""
    def act(tx):
        if tx.sem_read(i) == 0:
            return False
        tx.sem_mmio_write(i, 1)
        return True
    return act


def setdmareg(gpr, value):
    return [encode("SETDMAREG", reg_index_16b=2 * gpr, payload=value & 0xFFFF),
            encode("SETDMAREG", reg_index_16b=2 * gpr + 1, payload=value >> 16)]


def fp32_programs(n_tiles):
    """docs/sfpu_path.md §10: y = 2x + 1 on fp32 tiles, Dst slots alternating 0/1."""
    t0 = [cfg(64, 0x01000010), cfg(65, 0x00040001), cfg(72, 0x20), cfg(73, 0x1F), cfg(57, 0x400),
          cfg(86, 0x01000100), cfg(92, 0),
          0xA3200004, 0xA3200008, 0xA3220010, 0x5120000B, 0x5420000F, 0x5E23FC00]
    t1 = [cfg(1, 0x60000000), 0xB21D0002, 0xB21F0004, 0x71204000, 0x71303F80]
    t2 = [cfg(12, 0x00400004), cfg(13, 0x10000400), cfg(18, 1), cfg(24, 0xFFFF), cfg(20, 0), cfg(28, 0x1000),
          cfg(68, 0), cfg(70, 0x001), cfg(71, 0),
          0xB2250004, 0xB2261020, 0xB2272020, 0x5180000B, 0x5480000F, 0x5E803C00]
    for k in range(n_tiles):
        slot = k % 2
        t0 += [take_sem(2), *setdmareg(4, (IN + 4096 * k) // 16 - 1), *setdmareg(5, 64 + 16 * 64 * slot),
               0xA2400003, 0xB004004C, 0xB0050054, 0x54200005] + [0x42088081] * 4 + [0xA2010002, 0xA4000004]
        t1 += [0xA6FF8005, 0xA5000004, encode("SETC16", setc16_reg=1, setc16_value=64 * slot), 0x37000007]
        t1 += [0x70030000, 0x84002310, 0x72132000] * 32 + [0xA2010810, 0xA4000008]
        t2 += [0xA6FF8009, 0xA5000008, *setdmareg(4, (OUT + 4096 * k) // 16 - 1), *setdmareg(5, 64 * slot),
               0xA2400009, 0xB0040045, 0xB00500B4]
        t2 += ([0x41000000] * 3 + [0x41008000]) * 3 + [0x41000000] * 3 + [0x41010001] + [0xA2010008, 0xA4000010]
    return [t0, t1, t2]


def random_fp32(rng, n):
    # normal numbers with moderate exponents: 2x+1 stays normal, no denormal/NaN special cases
    sign = rng.integers(0, 2, n, dtype=np.uint32) << 31
    exp = rng.integers(127 - 20, 127 + 20, n, dtype=np.uint32) << 23
    man = rng.integers(0, 1 << 23, n, dtype=np.uint32)
    return sign | exp | man


@pytest.mark.parametrize("n_tiles", [1, 4])
def test_fp32_tile_sequence(n_tiles):
    tx, l1 = make_tensix()
    rng = np.random.default_rng(n_tiles)
    x = random_fp32(rng, 1024 * n_tiles)
    l1[IN:IN + 4096 * n_tiles] = x.view(np.uint8)
    run(tx, fp32_programs(n_tiles))
    got = l1[OUT:OUT + 4096 * n_tiles].view(np.uint32)
    want = (x.view(np.float32) * np.float32(2) + np.float32(1)).view(np.uint32)
    assert np.array_equal(got, want)
    assert tx.sem_value == [0, 0, 2, 0, 0, 0, 0, 0]
    assert all(tx.thread_idle(t) for t in range(3))


def test_fp32_unpack_pack_is_bit_exact_for_specials():
    """UNPACR FP32 -> Dst32b and PACR Dst32b -> FP32 keep denormals and NaN payloads (no SFPU pass)."""
    tx, l1 = make_tensix()
    x = np.random.default_rng(7).integers(0, 1 << 32, 1024, dtype=np.uint64).astype(np.uint32)
    x[:6] = [0x00000001, 0x807FFFFF, 0x7FC00001, 0xFF800001, 0x80000000, 0x7F800000]
    l1[IN:IN + 4096] = x.view(np.uint8)
    progs = fp32_programs(1)
    progs[1] = [cfg(1, 0x60000000), 0xA6FF8005, 0xA5000004, 0xA4000008]   # math: just pass the tile on
    run(tx, progs)
    assert np.array_equal(l1[OUT:OUT + 4096].view(np.uint32), x)


def test_unpack_layout_in_dst():
    """Datum i of a tile unpacked to slot 1 lands in Dst32b[64 + i//16][i%16]."""
    tx, l1 = make_tensix()
    x = np.arange(1024, dtype=np.uint32) + 0x1000
    l1[IN:IN + 4096] = x.view(np.uint8)
    for i, v in ((64, 0x01000010), (65, 0x00040001), (72, 0x20), (73, 0x1F), (57, 0x400), (86, 0x01000100)):
        tx.cfg_write(i, v)
    for w in [0x5120000B, 0x5420000F, 0x5E23FC00, *setdmareg(4, IN // 16 - 1), *setdmareg(5, 64 + 1024),
              0xB004004C, 0xB0050054] + [0x42088081] * 4:
        tx.push(0, w)
    assert np.array_equal(tx.dst.rows32[64:128].reshape(-1), x)
    assert tx.dst.written[64:128].all() and not tx.dst.written[:64].any()
    assert tx.threads[0].adc[0][0][2] == 4 and tx.threads[0].adc[0][1][2] == 4   # ch0 Z, ch1 Z stepped per face


# ---------------------------------------------------------------------------------------------------- bf16 path
def bf16_programs(n_tiles, out_bf16):
    """bf16 tile -> SrcA (+ zeroed SrcB) -> ELWADD -> Dst32b -> [SFPU y = 2x+1] -> packer (fp32 or bf16 out)."""
    t0 = [cfg(64, 0x01000015), cfg(65, 0x00040001), cfg(72, 0x25), cfg(73, 0x0F), cfg(57, 0), cfg(86, 0x01000100),
          cfg(92, 0), cfg(84, 64), cfg(120, 5),
          0xA3200004, 0xA3200008, 0xA3220010, 0xB2050004, 0x5120000B, 0x5420000F, 0x5E23FC00]
    t1 = [cfg(1, 0x6AAA0000 if out_bf16 else 0x60AA0000), 0xB21D0002, 0xB20E0008, 0xB21E0008, 0x71204000,
          0x71303F80]
    pack_cfg = ((12, 0x00200002), (13, 0x08000200), (70, 0x551)) if out_bf16 else \
        ((12, 0x00400004), (13, 0x10000400), (70, 0x001))
    t2 = [*(cfg(i, v) for i, v in pack_cfg), cfg(18, 1), cfg(24, 0xFFFF), cfg(28, 0x1000),
          0xB2250004, 0xB2261020, 0xB2272020, 0x5180000B, 0x5480000F, 0x5E803C00]
    for k in range(n_tiles):
        slot = k % 2
        t0 += [*setdmareg(4, (IN + 2048 * k) // 16 - 1), 0xA2400003, 0xB004004C, 0x54200005]
        t0 += [0x420080C1, 0x43800101] * 4
        t1 += [0xA6FF8011, 0xA5000010, encode("SETC16", setc16_reg=1, setc16_value=64 * slot), 0x37000007]
        t1 += [0x28008000, 0x28008000, 0x37C00003] * 4 + [0x37000004]
        t1 += [0x70030000, 0x84002310, 0x72132000] * 32 + [0xA2010810, 0xA4000008]
        out_size = 2048 if out_bf16 else 4096
        t2 += [0xA6FF8009, 0xA5000008, *setdmareg(4, (OUT + out_size * k) // 16 - 1), *setdmareg(5, 64 * slot),
               0xA2400009, 0xB0040045, 0xB00500B4]
        t2 += ([0x41000000] * 3 + [0x41008000]) * 3 + [0x41000000] * 3 + [0x41010001] + [0xA2010008, 0xA4000010]
    return [t0, t1, t2]


def bf16_round_packer(x):
    x = x.astype(np.uint32)
    x = np.where((x & 0x7FFFFFFF) > 0x7F800000, (x & 0x80000000) | 0x7F800000, x)
    r = (x.astype(np.uint64) + 0x8000) >> 16
    return np.where((r & 0x7FFF) < 0x80, 0, r).astype(np.uint16)


@pytest.mark.parametrize("out_bf16", [False, True])
def test_bf16_tile_sequence(out_bf16):
    tx, l1 = make_tensix()
    n = 4
    b = (random_fp32(np.random.default_rng(3), 1024 * n) >> 16).astype(np.uint16)
    l1[IN:IN + 2048 * n] = b.view(np.uint8)
    run(tx, bf16_programs(n, out_bf16))
    y = ((b.astype(np.uint32) << 16).view(np.float32) * np.float32(2) + np.float32(1)).view(np.uint32)
    if out_bf16:
        got = l1[OUT:OUT + 2048 * n].view(np.uint16)
        assert np.array_equal(got, bf16_round_packer(y))
    else:
        assert np.array_equal(l1[OUT:OUT + 4096 * n].view(np.uint32), y)


def bf16_identity_programs(x_fp32_words=None):
    """bf16 -> SrcA -> ELWADD -> Dst32b -> pack fp32 (no SFPU), one tile."""
    progs = bf16_programs(1, out_bf16=False)
    t1 = [w for w in progs[1] if callable(w) or w not in (0x70030000, 0x84002310, 0x72132000, 0x71204000,
                                                           0x71303F80)]
    progs[1] = t1
    return progs


def test_bf16_elwadd_specials():
    """docs/sfpu_path.md §8: normals exact, +-0 and denormals -> +0, NaN -> Inf of the same sign, Inf kept."""
    tx, l1 = make_tensix()
    b = np.full(1024, 0x3F80, np.uint16)
    specials = {0x0000: 0, 0x8000: 0, 0x0001: 0, 0x807F: 0, 0x7FC0: 0x7F800000, 0xFFC1: 0xFF800000,
                0x7F80: 0x7F800000, 0xFF80: 0xFF800000, 0x7F7F: 0x7F7F0000, 0x0080: 0x00800000, 0xC049: 0xC0490000}
    b[:len(specials)] = list(specials)
    l1[IN:IN + 2048] = b.view(np.uint8)
    run(tx, bf16_identity_programs())
    got = l1[OUT:OUT + 4096].view(np.uint32)
    assert list(got[:len(specials)]) == list(specials.values())
    assert np.all(got[len(specials):] == 0x3F800000)


def test_packer_bf16_rounding():
    """Dst32b -> bf16 through the packer: ties away from zero, NaN -> Inf, exponent-0 -> +0 (section 8)."""
    tx, l1 = make_tensix()
    cases = {0x3F808000: 0x3F81, 0xBF808000: 0xBF81, 0x3F818000: 0x3F82, 0x3F807FFF: 0x3F80, 0x7FC00001: 0x7F80,
             0xFFC00000: 0xFF80, 0x7F7FFFFF: 0x7F80, 0x80000000: 0x0000, 0x00400000: 0x0000, 0x007FFFFF: 0x0080,
             0x807FFFFF: 0x8080, 0xFF800000: 0xFF80, 0x40490FDB: 0x4049}
    x = np.random.default_rng(11).integers(0, 1 << 32, 1024, dtype=np.uint64).astype(np.uint32)
    x[:len(cases)] = list(cases)
    tx.dst.rows32[64:128] = x.reshape(64, 16)
    for i, v in ((1, 0x0A000000), (12, 0x00200002), (13, 0x08000200), (70, 0x551), (18, 1), (24, 0xFFFF),
                 (28, 0x1000), (69, OUT // 16 - 1), (180, 64)):
        tx.cfg_write(i, v)
    for w in [0xB2250004, 0xB2261020, 0xB2272020, 0x5180000B, 0x5480000F, 0x5E803C00]:
        tx.push(2, w)
    for w in ([0x41000000] * 3 + [0x41008000]) * 3 + [0x41000000] * 3 + [0x41010001]:
        tx.push(2, w)
    got = l1[OUT:OUT + 2048].view(np.uint16)
    assert list(got[:len(cases)]) == list(cases.values())
    assert np.array_equal(got, bf16_round_packer(x))
    assert tx.packer_open is False


# ---------------------------------------------------------------------------------------------------- sync
def test_semaphore_blocking_order():
    """T1 pushed first still waits on SEMWAIT until T0 posts; the reason names the semaphore."""
    tx, _ = make_tensix()
    tx.push(0, 0xA3200004)                     # SEMINIT sem0 max 2 value 0
    tx.push(1, 0xA6FF8005)                     # SEMWAIT while sem0 == 0
    tx.push(1, 0xA5000004)                     # SEMGET sem0
    tx.push(1, 0xB2010040)                     # SETC16 MATH_Offset := 64 (marker)
    assert tx.blocked_reason(1).startswith("SEMWAIT sem0 (value 0)")
    assert tx.thread_cfg(1, 1) == 0 and not tx.thread_idle(1)
    assert tx.step() == 0
    tx.push(0, 0xA4000004)                     # SEMPOST sem0
    assert tx.step() == 2
    assert tx.thread_cfg(1, 1) == 64 and tx.sem_value[0] == 0 and tx.thread_idle(1)
    assert tx.blocked_reason(1) is None


def test_semwait_block_mask_lets_other_units_through():
    """SEMWAIT with block mask B6 (FPU) only blocks FPU instructions; a config instruction passes (SEMWAIT.md)."""
    tx, _ = make_tensix()
    tx.push(0, 0xA3200004)
    tx.push(1, 0xA6200006 & ~0x3 | 1)         # SEMWAIT stall_res=B6, sem0, while value == 0
    tx.push(1, 0xB2010040)                     # SETC16: config unit, not blocked
    tx.push(1, 0x37000004)                     # SETRWC: FPU, blocked
    assert tx.thread_cfg(1, 1) == 64
    assert "SEMWAIT sem0" in tx.blocked_reason(1)
    tx.sem_mmio_write(0, 0)                    # RISC-V SEMPOST
    assert tx.step() == 1


def test_fifo_full_raises_stall():
    tx, _ = make_tensix()
    tx.push(1, 0xA6FF8005)                     # blocks forever (sem0 value 0)
    for _ in range(33):                        # 32 in the FIFO + the one waiting at the Wait Gate
        tx.push(1, 0x02000000)
    with pytest.raises(Stall):
        tx.push(1, 0x02000000)
    assert tx.blocked_reason(1).startswith("SEMWAIT sem0")


def test_elwadd_waits_for_banks_and_unpacker_waits_for_release():
    tx, l1 = make_tensix()
    for i, v in ((64, 0x01000015), (65, 0x00040001), (72, 0x25), (73, 0x0F), (86, 0x01000100), (84, 64),
                 (120, 5), (1, 0x60AA0000), (76, IN // 16 - 1)):
        tx.cfg_write(i, v)
    tx.push(1, 0x37000007)
    tx.push(1, 0x28008000)                     # ELWADD: no valid banks yet
    assert tx.blocked_reason(1) == "ELWADD: SrcA bank 0 not valid (waiting for the unpacker)"
    for w in (0xB2050004, 0x5120000B, 0x5420000F, 0x5E23FC00, 0x420080C1, 0x420080C1):
        tx.push(0, w)
    tx.push(0, 0x420080C1)                     # third face: both SrcA banks are owned by the FPU
    assert tx.blocked_reason(0) == "UNPACR: SrcA bank 0 still valid (owned by the FPU)"
    assert tx.step() == 0
    assert tx.blocked_reason(1) == "ELWADD: SrcB bank 0 not valid (waiting for the unpacker)"
    tx.push(1, 0x37C00003)                     # release both banks (queued behind the ELWADD)
    tx.push(2, 0x43800101)                     # any thread may drive unpacker 1: zeroed SrcB bank 0 valid
    assert tx.step() == 3                      # ELWADD, SETRWC release, then the third UNPACR
    assert tx.srca_valid == [True, True] and tx.srca_matrix_bank == 1 and tx.srcb_matrix_bank == 1
    assert all(tx.thread_idle(t) for t in range(3))


def test_stallwait_c7_waits_for_srca():
    tx, _ = make_tensix()
    tx.push(1, encode("STALLWAIT", stall_res=0x80, wait_res=1 << 7))   # block config until SrcA owned by FPU
    tx.push(1, 0xB2010040)
    assert tx.blocked_reason(1).startswith("STALLWAIT C7")
    tx.srca_valid[0] = True
    assert tx.step() == 1


def test_replay_and_mop():
    tx, _ = make_tensix()
    sc = [encode("SETC16", setc16_reg=1, setc16_value=v) for v in (1, 2)]
    tx.push(0, encode("REPLAY", load_mode=1, execute_while_loading=0, len=2, start_idx=3))
    tx.push(0, sc[0])
    tx.push(0, sc[1])
    assert tx.thread_cfg(0, 1) == 0 and tx.instructions[0] == 0
    tx.push(0, encode("REPLAY", start_idx=3, len=1))
    assert tx.thread_cfg(0, 1) == 1
    tx.push(0, encode("REPLAY", start_idx=3, len=2))
    assert tx.thread_cfg(0, 1) == 2 and tx.instructions[0] == 3
    # MOP template 0: 3 iterations of InsnA0 (+ InsnB), mask bit 1 selects SkipA0
    incr = encode("INCADCXY", cnt_set_mask=1, ch0_y=1)
    skip = encode("INCADCXY", cnt_set_mask=1, ch1_y=1)
    for i, v in ((1, 0), (3, incr), (7, skip)):
        tx.mop_cfg_write(0, i, v)
    tx.push(0, encode("MOP", mop_type=0, loop_count=2, zmask_lo16_or_loop_count=0b010))
    assert tx.threads[0].adc[0][0][1] == 2 and tx.threads[0].adc[0][1][1] == 1


def test_wrcfg_rdcfg_rmwcib_setdmareg():
    tx, _ = make_tensix()
    for w in setdmareg(7, 0x12345678):
        tx.push(2, w)
    assert tx.gpr_read(2, 7) == 0x12345678
    tx.push(2, encode("WRCFG", gpr_address=7, cfg_reg=69))
    assert tx.cfg_read(69) == 0x12345678
    tx.push(2, encode("RMWCIB2", cfg_reg_addr=69, data=0xAB, mask=0xF0))
    assert tx.cfg_read(69) == 0x12A45678
    tx.push(2, encode("RDCFG", gpr_address=1, cfg_reg=69))
    assert tx.gpr_read(2, 1) == 0x12A45678
    for g in range(4):
        tx.gpr_write(2, 8 + g, 100 + g)
    tx.push(2, encode("WRCFG", gpr_address=8, wr128b=1, cfg_reg=66))
    assert [tx.cfg_read(i) for i in range(64, 68)] == [100, 101, 102, 103]


def test_setrwc_incrwc_and_addr_mod():
    tx, _ = make_tensix()
    tx.push(1, encode("SETRWC", bit_mask=7, rwc_a=3, rwc_b=5, rwc_d=9))
    r = tx.threads[1].rwc
    assert (r["a"], r["b"], r["d"]) == (3, 5, 9)
    tx.push(1, encode("INCRWC", rwc_a=1, rwc_b=2, rwc_d=4, rwc_cr=4))
    assert (r["a"], r["b"], r["d"], r["d_cr"]) == (4, 7, 13, 13)
    tx.push(1, encode("SETC16", setc16_reg=30, setc16_value=0x1000 | 6))   # DST_SEC2: CToCR, +6
    tx.apply_addr_mod(1, 2)
    assert (r["d"], r["d_cr"]) == (19, 19)


# ---------------------------------------------------------------------------------------------------- strict mode
def _fp32_unpack_setup(tx, dest=64):
    for i, v in ((64, 0x01000010), (65, 0x00040001), (72, 0x20), (73, 0x1F), (57, 0x400), (86, 0x01000100),
                 (76, IN // 16 - 1), (84, dest)):
        tx.cfg_write(i, v)
    for w in (0x5120000B, 0x5420000F, 0x5E23FC00):
        tx.push(0, w)


def test_strict_sempost_over_max():
    tx, _ = make_tensix()
    tx.push(0, 0xA3220010)                     # sem2 value 2 max 2
    with pytest.raises(EmuError, match=r"T0: word 0xA4000010 \(SEMPOST\).*Max 2"):
        tx.push(0, 0xA4000010)


def test_strict_semget_under_zero():
    tx, _ = make_tensix()
    with pytest.raises(EmuError, match=r"SEMGET on semaphore 0 at Value 0"):
        tx.push(1, 0xA5000004)
    with pytest.raises(EmuError, match="RISC-V"):
        tx.sem_mmio_write(3, 1)


def test_nonstrict_semaphores_saturate():
    tx, _ = make_tensix(strict=False)
    tx.push(0, 0xA5000004)
    tx.push(0, 0xA4000004)
    assert tx.sem_value[0] == 1


def test_strict_unpacr_without_ovrd_thread_id_or_last():
    tx, _ = make_tensix()
    _fp32_unpack_setup(tx)
    with pytest.raises(EmuError, match=r"0x42088001 \(UNPACR\).*ovrd_thread_id=0"):
        tx.push(0, 0x42088001)
    tx, _ = make_tensix()
    _fp32_unpack_setup(tx)
    with pytest.raises(EmuError, match="last=0"):
        tx.push(0, 0x42088080)


def test_strict_unpack_to_dst_without_bias():
    tx, _ = make_tensix()
    _fp32_unpack_setup(tx, dest=0)
    with pytest.raises(EmuError, match=r"\+64"):
        tx.push(0, 0x42088081)


def test_strict_reserved_bits():
    tx, _ = make_tensix()
    with pytest.raises(EmuError, match=r"T2: word 0xA2401003 \(STALLWAIT\): reserved bits 0x00001000"):
        tx.push(2, 0xA2401003)                 # C12 is not encodable on BH (ttsim pf07)


def test_strict_pacr_x_range_255():
    tx, _ = make_tensix()
    for i, v in ((1, 0), (12, 0x00400004), (13, 0x10000400), (70, 1), (18, 1), (24, 0xFFFF), (28, 0x1000)):
        tx.cfg_write(i, v)
    tx.push(2, encode("SETADCXX", cnt_set_mask=4, x_start=0, x_end2=255))
    with pytest.raises(EmuError, match="X range 0..255"):
        tx.push(2, 0x41000000)


def test_unimplemented_is_named():
    tx, l1 = make_tensix()
    _fp32_unpack_setup(tx)
    tx.cfg_write(64, 0x01000015)               # BF16 in, straight to Dst (ttsim pf01)
    with pytest.raises(EmuUnimplemented, match=r"in format 5 \(BF16\)"):
        tx.push(0, 0x42088081)
    with pytest.raises(EmuUnimplemented, match="DOTPV"):
        tx.push(1, encode("DOTPV", dest_accum_en=1))


def test_whole_tile_unpack_to_srca_and_srcb():
    """docs/fpu_path.md §5: one UNPACR per operand moves 1024 bf16 datums; element i -> Src row i//16, col i%16."""
    tx, l1 = make_tensix()
    a = (random_fp32(np.random.default_rng(5), 1024) >> 16).astype(np.uint16)
    b = (random_fp32(np.random.default_rng(6), 1024) >> 16).astype(np.uint16)
    l1[0x20000:0x20800] = a.view(np.uint8)
    l1[0x30000:0x30800] = b.view(np.uint8)
    for i, v in ((1, 0x20AA0000), (64, 0x04000015), (65, 0x00010001), (72, 5), (73, 0xF), (76, 0x1FFF),
                 (84, 0x00400040), (86, 0x04000400), (112, 0x04000015), (113, 0x00010001), (120, 5), (121, 0xF),
                 (124, 0x2FFF)):
        tx.cfg_write(i, v)
    for w in (0xB2050004, 0x5160000A, 0x5460000F, 0x5E6FFC00, 0x420080C1, 0x428080C1):
        tx.push(0, w)
    assert np.array_equal(tx.srca[0].reshape(-1), a.astype(np.uint32) << 16)
    assert np.array_equal(tx.srcb[0].reshape(-1), b.astype(np.uint32) << 16)
    assert tx.srca_valid == [True, False] and tx.srcb_valid == [True, False] and tx.srca_format[0] == 5
    tx.push(1, 0x37000007)
    tx.push(1, 0x28000000)                     # ELWADD rows 0-7: a + b
    fa, fb = ((v.astype(np.uint32) << 16).view(np.float32)[:128] for v in (a, b))
    ea, eb = (v[:128].astype(np.int64) >> 7 & 0xFF for v in (a, b))
    close = np.abs(ea - eb) <= 3               # aligned exactly on the 11-bit grid: sum is the exact fp32 sum
    got = tx.dst.rows32[0:8].reshape(-1)
    assert close.sum() > 10
    assert np.array_equal(got[close], (fa + fb).view(np.uint32)[close])


def test_zeroacc_fp32_face_and_all():
    tx, _ = make_tensix()
    tx.dst.rows32[:] = 0xFFFFFFFF
    tx.push(1, encode("ZEROACC", clear_mode=1, use_32_bit_mode=1, addr_mode=7, where=1))
    assert not tx.dst.rows32[16:32].any() and tx.dst.rows32[15].all() and tx.dst.rows32[32].all()
    tx.push(1, encode("SETC16", setc16_reg=1, setc16_value=256))     # upper Dst half: Imm is relative to it
    tx.push(1, encode("ZEROACC", clear_mode=1, use_32_bit_mode=1, addr_mode=7, where=0))
    assert not tx.dst.rows32[256:272].any() and tx.dst.rows32[0:16].all()
    tx.push(1, encode("ZEROACC", clear_mode=3, use_32_bit_mode=1, addr_mode=7))
    assert not tx.dst.rows32.any()


def test_packer_row_by_row_and_edge_mask():
    """read_intf_sel=1 moves one Dst row per PACR; edge-mask columns that are 0 pack as zero."""
    tx, l1 = make_tensix()
    x = np.arange(1, 1025, dtype=np.uint32)
    tx.dst.rows32[0:64] = x.reshape(64, 16)
    for i, v in ((1, 0), (12, 0x00400004), (13, 0x10000400), (70, 1), (18, 1), (24, 0x7FFF), (28, 0x1000),
                 (69, OUT // 16 - 1)):
        tx.cfg_write(i, v)
    for w in (0xB2250001, 0xB2261020, 0xB2272020, 0x5180000B, 0x5480000F, 0x5E803C00):
        tx.push(2, w)
    for face in range(4):
        for r in range(15):
            tx.push(2, 0x41000100)
        tx.push(2, 0x41010101 if face == 3 else 0x41008100)
    got = l1[OUT:OUT + 4096].view(np.uint32).reshape(64, 16)
    want = x.reshape(64, 16).copy()
    want[:, 15] = 0
    assert np.array_equal(got, want)


@pytest.mark.parametrize("fmt", [0, 8])                  # FP32, INT32: the packs that copy Dst as it is
def test_packer_plain_copy_matches_the_conversion_path(fmt, monkeypatch):
    """PACR's plain copy (unpack_pack.PACK_PLAIN_COPY) against the early/late conversion path on random Dst words
    (NaN payloads, denormals, -0 included): every read interface selection, streams of one and of several PACRs,
    edge masks that keep everything and that drop a column; the same L1, packer ADCs and stream state. (The C datum
    moves, which take these packs first, are off: tests/emu/test_tile_native.py pins them.)"""
    from tt_backend.runtime.emu import unpack_pack
    from tt_backend.runtime.emu.accel import tile_native
    monkeypatch.setattr(tile_native, "NATIVE", False)
    rng = np.random.default_rng(fmt)
    x = rng.integers(0, 1 << 32, (64, 16), dtype=np.uint64).astype(np.uint32)
    x[0, :4] = [0x00000001, 0x7FC00001, 0x80000000, 0xFF800001]
    for sel in (0, 1, 3, 5, 10):
        more, last = encode("PACR", read_intf_sel=sel, addr_mode=1), encode("PACR", read_intf_sel=sel, addr_mode=2,
                                                                             last=1)
        for mask in (0xFFFF, 0x7FFF):
            runs = []
            for plain in (True, False):
                monkeypatch.setattr(unpack_pack, "PACK_PLAIN_COPY", plain)
                tx, l1 = make_tensix()
                tx.dst.rows32[0:64] = x
                l1[OUT:OUT + 8192] = 0xA5
                for i, v in ((1, fmt << 25), (12, 0x00400004), (13, 0x10000400), (18, 1), (24, mask), (28, 0x1000),
                             (69, OUT // 16 - 1), (70, 1 | fmt << 8 | fmt << 4)):
                    tx.cfg_write(i, v)
                x_end = 7 if sel == 1 and mask == 0x7FFF else 15
                for w in (0xB2250001, 0xB2261020, 0xB2272020, 0x5180000B, 0x5480000F,
                          encode("SETADCXX", cnt_set_mask=4, x_end2=x_end)):
                    tx.push(2, w)
                early = []
                monkeypatch.setattr(tx, "_pack_early", lambda *a, _f=tx._pack_early: early.append(1) or _f(*a))
                for k in range(7):
                    tx.push(2, last if k in (2, 6) else more)
                all_kept = mask == 0xFFFF or x_end == 7                  # (8 datums per interface: column 15 unread)
                assert len(early) == (0 if plain and all_kept else 7)          # the path under test ran
                runs.append((l1[OUT:OUT + 8192].tobytes(), tx.threads[2].adc, tx.packer_addr, tx.packer_open))
            assert runs[0] == runs[1] and runs[0][0] != bytes([0xA5]) * 8192, (sel, mask)


def test_mop_template1_loops():
    tx, _ = make_tensix()
    inc_y0 = encode("INCADCXY", cnt_set_mask=1, ch0_y=1)
    inc_y1 = encode("INCADCXY", cnt_set_mask=1, ch1_y=1)
    inc_x1 = encode("INCADCXY", cnt_set_mask=1, ch1_x=1)
    nop = encode("NOP")
    # outer 3 x (start, inner 2 x loop (last replaced), end0): start=NOP skipped
    for i, v in enumerate((3, 2, nop, inc_x1, nop, inc_y0, nop, inc_y1, inc_y1)):
        tx.mop_cfg_write(1, i, v)
    tx.push(1, encode("MOP", mop_type=1))
    adc = tx.threads[1].adc[0]
    assert (adc[0][1], adc[1][1], adc[1][0]) == (3, 3, 3)
    assert tx.instructions[1] == 9


def _elw(tx, a_words, b_words, word=0x28000000, dst=None):
    """Run one ELWADD/ELWSUB on hand-filled banks (fp32-layout Src words, row 0 cols 0..n-1)."""
    tx.cfg_write(1, 0x60AA0000)
    for bank, words in ((tx.srca, a_words), (tx.srcb, b_words)):
        bank[0, 0, :len(words)] = words
    tx.srca_valid[0] = tx.srcb_valid[0] = True
    tx.srca_format[0] = tx.srcb_format[0] = 5
    if dst is not None:
        tx.dst.rows32[0, :len(dst)] = dst
    tx.push(1, word)
    return [int(v) for v in tx.dst.rows32[0, :len(a_words)]]


def test_elwadd_alignment_and_specials():
    tx, _ = make_tensix()
    one, m_one = 0x3F800000, 0xBF800000
    a = [one, one, one, m_one, 0x3FC00000, 0x7F7F0000, 0x7F800000, 0x7F800000, 0x00010000, 0x40400000]
    b = [one, 0x3A000000, 0x39800000, 0x3A000000, 0xBFC00000, 0x7F7F0000, one, 0xFF800000, one, one]
    want = [0x40000000,   # 1 + 1
            0x3F802000,   # 1 + 2^-11: b rounds half up onto the 11-bit grid -> 1 + 2^-10
            one,          # 1 + 2^-12: 12 bits apart -> b vanishes
            0xBF7FC000,   # -1 + 2^-11 -> -(1 - 2^-10)
            0,            # 1.5 - 1.5 -> +0
            0x7F800000,   # max + max overflows to Inf
            0x7F800000,   # Inf + 1
            0,            # Inf + -Inf: equal magnitudes cancel -> +0
            one,          # denormal + 1: denormal flushed
            0x40800000]   # 3 + 1
    assert _elw(tx, a, b) == want


def test_elwsub_and_accumulate():
    tx, _ = make_tensix()
    assert _elw(tx, [0x40400000, 0x3F800000], [0x3F800000, 0x3F800000], word=encode("ELWSUB")) == [0x40000000, 0]
    tx, _ = make_tensix()
    got = _elw(tx, [0x3F800000, 0x40000000], [0, 0], word=encode("ELWADD", dest_accum_en=1),
               dst=[0x3F800000, 0x33800000])   # Dst 1.0 and 2^-24
    assert got == [0x40000000, 0x40000000]   # 1 + 1; 2 + 2^-24 aligned away


@pytest.mark.skipif(not HAVE_SFPU, reason="needs tt_backend.runtime.emu.sfpu")
def test_fp32_tile_sequence_specials_real_sfpu():
    """The documented exceptions to float32(2x+1) (docs/sfpu_path.md §5.3): denormal inputs read as zero, NaN gives
    the canonical 0x7FC00000, +-Inf stays +-Inf."""
    tx, l1 = make_tensix()
    x = random_fp32(np.random.default_rng(9), 1024)
    special = {0x00000001: 0x3F800000, 0x807FFFFF: 0x3F800000, 0x7FC00001: 0x7FC00000, 0xFFFFFFFF: 0x7FC00000,
               0x7F800000: 0x7F800000, 0xFF800000: 0xFF800000}
    x[:len(special)] = list(special)
    l1[IN:IN + 4096] = x.view(np.uint8)
    run(tx, fp32_programs(1))
    got = l1[OUT:OUT + 4096].view(np.uint32)
    assert list(got[:len(special)]) == list(special.values())
    want = (x.view(np.float32) * np.float32(2) + np.float32(1)).view(np.uint32)
    assert np.array_equal(got[len(special):], want[len(special):])


def test_mutexes():
    tx, _ = make_tensix()
    tx.push(0, encode("ATGETM", mutex_index=2))
    tx.push(1, encode("ATGETM", mutex_index=2))
    tx.push(1, encode("SETC16", setc16_reg=1, setc16_value=8))
    assert tx.blocked_reason(1) == "ATGETM mutex 2 held by T0" and tx.thread_cfg(1, 1) == 0
    tx.push(1, encode("ATRELM", mutex_index=2))              # queued; T1 does not hold it yet
    tx.push(0, encode("ATRELM", mutex_index=2))
    assert tx.step() == 3 and tx.mutex_holder[2] is None and tx.thread_cfg(1, 1) == 8
    with pytest.raises(EmuError, match="mutex index 1"):
        tx.push(2, encode("ATGETM", mutex_index=1))


def test_shared_decode_identical(monkeypatch):
    """decode() with its per-word part shared by every Tensix (tensix.SHARED_DECODE, TT_EMU_SHARED_DECODE): for random
    words of every opcode (and unknown ones), a second Tensix gets from the shared table what a Tensix decoding its
    own words gets: the same name, fields, Wait Gate class, reserved bits and timing, its own handler, the same error
    for an unknown opcode."""
    import random
    from tt_backend.chip import layout
    from tt_backend.chip.isa import OPCODES
    from tt_backend.runtime.emu import tensix

    rng = random.Random(3)
    words = [op << 24 | rng.randrange(1 << 24) for op in range(256) for _ in range(3)]

    def decoded(shared: bool) -> list:
        monkeypatch.setattr(tensix, "SHARED_DECODE", shared)
        monkeypatch.setattr(tensix, "_STATIC_DECODE", {})
        out = []
        for k in range(2):                         # (the second Tensix: from the shared table, where it is on)
            tx = Tensix(np.zeros(layout.L1_SIZE, np.uint8))
            for w in words:
                try:
                    name, fields, handler, *rest = tx.decode(w)
                except EmuError as e:
                    out.append((w, type(e), str(e)))
                    continue
                assert handler is tx._handlers.get(name)       # (the instance's own)
                out.append((w, name, dict(fields), handler is None, *rest))
        assert len(tensix._STATIC_DECODE) == (sum(w >> 24 in OPCODES for w in words) if shared else 0)
        return out
    assert decoded(True) == decoded(False)
