"""RV32Core tests: hand-assembled words per opcode group (expected values from independent Python references),
small C programs compiled with riscv64-unknown-elf-gcc, Tensix pushes, Stall/retry, and a speed measurement."""
from __future__ import annotations

import math
import struct
import time
import zlib
from fractions import Fraction
from pathlib import Path

import pytest

from tt_backend.runtime.emu.rv32 import L1_SIZE, LOCAL_BASE, RV32Core, Stall, SHARED_BLOCKS
from tt_backend.chip import layout
from tt_backend.chip.errors import EmuError, EmuUnimplemented
from tt_backend.chip.isa import ttinsn

from tests.support import programs
from tests.support.harness import load_segments

M32 = 0xFFFFFFFF
CODE = 0x1000
CORE = "trisc0"                                 # the C programs run as TRISC0 (its image slot, stack and status block)
RESULT_ADDR = layout.status_addr(CORE, 1)       # crt0.S stores main's return value in the status error word


# ---------------------------------------------------------------- a test bus

class RecordingBus:
    """L1 + local RAM as bytearrays; MMIO is a dict of registers; Tensix pushes and INSTRN_BUF stores are recorded in
    one ordered list. Optionally raises Stall on the first `stall_pushes` pushes / `stall_mmio` MMIO accesses."""

    INSTRN_BUF = 0xFFE40000

    def __init__(self, local_size: int = 4096, stall_pushes: int = 0, stall_mmio: int = 0):
        self.l1 = memoryview(bytearray(L1_SIZE))
        self._local = memoryview(bytearray(local_size))
        self.mmio: dict[int, int] = {}
        self.accesses: list[tuple] = []     # ("load"|"store", addr, size[, value]) for MMIO, in order
        self.tensix: list[int] = []         # words pushed (by .ttinsn or sw to INSTRN_BUF), in order
        self.stall_pushes = stall_pushes
        self.stall_mmio = stall_mmio
        self.stalls = 0

    def local_ram(self, core: str) -> memoryview:
        return self._local

    def _maybe_stall(self, attr: str) -> None:
        if getattr(self, attr) > 0:
            setattr(self, attr, getattr(self, attr) - 1)
            self.stalls += 1
            raise Stall()

    def mmio_load(self, core: str, addr: int, size: int) -> int:
        self._maybe_stall("stall_mmio")
        self.accesses.append(("load", addr, size))
        return self.mmio.get(addr, 0)

    def mmio_store(self, core: str, addr: int, size: int, value: int) -> None:
        if addr == self.INSTRN_BUF and size == 4:
            self.push_tensix(core, value)
            return
        self._maybe_stall("stall_mmio")
        self.accesses.append(("store", addr, size, value))
        self.mmio[addr] = value

    def push_tensix(self, core: str, word: int) -> None:
        self._maybe_stall("stall_pushes")
        self.tensix.append(word)


# ---------------------------------------------------------------- a tiny assembler (encodings from the RV spec)

def r_type(f7, rs2, rs1, f3, rd, op=0x33):
    return (f7 << 25) | (rs2 << 20) | (rs1 << 15) | (f3 << 12) | (rd << 7) | op


def i_type(imm, rs1, f3, rd, op=0x13):
    return ((imm & 0xFFF) << 20) | (rs1 << 15) | (f3 << 12) | (rd << 7) | op


def s_type(imm, rs2, rs1, f3, op=0x23):
    imm &= 0xFFF
    return ((imm >> 5) << 25) | (rs2 << 20) | (rs1 << 15) | (f3 << 12) | ((imm & 31) << 7) | op


def b_type(imm, rs2, rs1, f3, op=0x63):
    imm &= 0x1FFF
    return (((imm >> 12) & 1) << 31) | (((imm >> 5) & 0x3F) << 25) | (rs2 << 20) | (rs1 << 15) | (f3 << 12) \
        | (((imm >> 1) & 0xF) << 8) | (((imm >> 11) & 1) << 7) | op


def u_type(imm20, rd, op):
    return ((imm20 & 0xFFFFF) << 12) | (rd << 7) | op


def jal(rd, imm):
    imm &= 0x1FFFFF
    return (((imm >> 20) & 1) << 31) | (((imm >> 1) & 0x3FF) << 21) | (((imm >> 11) & 1) << 20) \
        | (((imm >> 12) & 0xFF) << 12) | (rd << 7) | 0x6F


PARK = jal(0, 0)                         # j .
NOP = i_type(0, 0, 0, 0)


def make_core(words, regs=None, bus=None, name="trisc0"):
    bus = bus or RecordingBus()
    for i, w in enumerate(words):
        struct.pack_into("<I", bus.l1, CODE + 4 * i, w)
    core = RV32Core(name, bus, CODE)
    for reg, value in (regs or {}).items():
        core.x[reg] = value & M32
    return core, bus


def run_to_park(core, limit=10_000_000):
    total = 0
    while not core.parked:
        total += core.run(100_000)
        assert total < limit, "program did not park"
    return total


def run_words(words, regs=None, bus=None):
    core, bus = make_core(list(words) + [PARK], regs, bus)
    run_to_park(core)
    return core, bus


# ---------------------------------------------------------------- independent reference semantics

def sx(v):
    return v - (1 << 32) if v & 0x80000000 else v


def bits(v):
    return f"{v & M32:032b}"


def rot_left(v, n):
    s = bits(v)
    n %= 32
    return int(s[n:] + s[:n], 2)


def ref_div(a, b):
    if b == 0:
        return M32
    if sx(a) == -2**31 and sx(b) == -1:
        return a
    return math.trunc(Fraction(sx(a), sx(b))) & M32


def ref_rem(a, b):
    if b == 0:
        return a
    if sx(a) == -2**31 and sx(b) == -1:
        return 0
    return (sx(a) - sx(b) * math.trunc(Fraction(sx(a), sx(b)))) & M32


def ref_orcb(a):
    return int.from_bytes(bytes(0xFF if byte else 0 for byte in a.to_bytes(4, "little")), "little")


OPERANDS = [0, 1, 2, 5, 31, 32, 33, 0x7FFFFFFF, 0x80000000, 0x80000001, 0xFFFFFFFF, 0xFFFFFFFE, 0x12345678,
            0xDEADBEEF, 0x00FF00FF, 0x8000, 0xFFFF8000]

R_OPS = {  # name: (funct7, funct3, reference)
    "add": (0x00, 0, lambda a, b: (a + b) & M32),
    "sub": (0x20, 0, lambda a, b: (a - b) & M32),
    "sll": (0x00, 1, lambda a, b: int(bits(a)[b % 32:] + "0" * (b % 32), 2)),
    "slt": (0x00, 2, lambda a, b: int(sx(a) < sx(b))),
    "sltu": (0x00, 3, lambda a, b: int(a < b)),
    "xor": (0x00, 4, lambda a, b: a ^ b),
    "srl": (0x00, 5, lambda a, b: int("0" * (b % 32) + bits(a)[:32 - b % 32], 2)),
    "sra": (0x20, 5, lambda a, b: int(bits(a)[0] * (b % 32) + bits(a)[:32 - b % 32], 2)),
    "or": (0x00, 6, lambda a, b: a | b),
    "and": (0x00, 7, lambda a, b: a & b),
    "mul": (0x01, 0, lambda a, b: (a * b) % 2**32),
    "mulh": (0x01, 1, lambda a, b: ((sx(a) * sx(b)) // 2**32) % 2**32),
    "mulhsu": (0x01, 2, lambda a, b: ((sx(a) * b) // 2**32) % 2**32),
    "mulhu": (0x01, 3, lambda a, b: (a * b) // 2**32),
    "div": (0x01, 4, ref_div),
    "divu": (0x01, 5, lambda a, b: a // b if b else M32),
    "rem": (0x01, 6, ref_rem),
    "remu": (0x01, 7, lambda a, b: a % b if b else a),
    "sh1add": (0x10, 2, lambda a, b: (2 * a + b) % 2**32),
    "sh2add": (0x10, 4, lambda a, b: (4 * a + b) % 2**32),
    "sh3add": (0x10, 6, lambda a, b: (8 * a + b) % 2**32),
    "andn": (0x20, 7, lambda a, b: a & ~b & M32),
    "orn": (0x20, 6, lambda a, b: (a | ~b) & M32),
    "xnor": (0x20, 4, lambda a, b: ~(a ^ b) & M32),
    "min": (0x05, 4, lambda a, b: min(sx(a), sx(b)) & M32),
    "minu": (0x05, 5, min),
    "max": (0x05, 6, lambda a, b: max(sx(a), sx(b)) & M32),
    "maxu": (0x05, 7, max),
    "rol": (0x30, 1, lambda a, b: rot_left(a, b % 32)),
    "ror": (0x30, 5, lambda a, b: rot_left(a, 32 - b % 32)),
    "pack": (0x04, 4, lambda a, b: (a & 0xFFFF) + ((b & 0xFFFF) << 16)),
}


@pytest.mark.parametrize("name", R_OPS)
def test_r_type(name):
    f7, f3, ref = R_OPS[name]
    for a in OPERANDS:
        for b in OPERANDS[::3] + [0xFFFFFFFF, 0]:
            core, _ = run_words([r_type(f7, 6, 5, f3, 7)], {5: a, 6: b})
            assert core.x[7] == ref(a, b), f"{name}(0x{a:x}, 0x{b:x})"


def test_r_type_same_register_and_x0():
    core, _ = run_words([r_type(0, 5, 5, 0, 5), r_type(0, 5, 5, 0, 0)], {5: 0x40000001})
    assert core.x[5] == 0x80000002 and core.x[0] == 0


I_OPS = {  # name: (funct3, reference over (a, sign-extended imm))
    "addi": (0, lambda a, i: (a + i) % 2**32),
    "slti": (2, lambda a, i: int(sx(a) < i)),
    "sltiu": (3, lambda a, i: int(a < i % 2**32)),
    "xori": (4, lambda a, i: a ^ (i % 2**32)),
    "ori": (6, lambda a, i: a | (i % 2**32)),
    "andi": (7, lambda a, i: a & (i % 2**32)),
}


@pytest.mark.parametrize("name", I_OPS)
def test_i_type(name):
    f3, ref = I_OPS[name]
    for a in OPERANDS:
        for imm in (0, 1, -1, 2047, -2048, 0x555, -0x556):
            core, _ = run_words([i_type(imm, 5, f3, 7)], {5: a})
            assert core.x[7] == ref(a, imm), f"{name}(0x{a:x}, {imm})"


SHIFT_I = {  # name: (funct3, funct7, reference over (a, shamt))
    "slli": (1, 0x00, lambda a, s: int(bits(a)[s:] + "0" * s, 2)),
    "srli": (5, 0x00, lambda a, s: int("0" * s + bits(a)[:32 - s], 2)),
    "srai": (5, 0x20, lambda a, s: int(bits(a)[0] * s + bits(a)[:32 - s], 2)),
    "rori": (5, 0x30, lambda a, s: rot_left(a, 32 - s)),
}


@pytest.mark.parametrize("name", SHIFT_I)
def test_shift_immediate(name):
    f3, f7, ref = SHIFT_I[name]
    for a in OPERANDS:
        for s in (0, 1, 7, 16, 31):
            core, _ = run_words([r_type(f7, s, 5, f3, 7, op=0x13)], {5: a})
            assert core.x[7] == ref(a, s), f"{name}(0x{a:x}, {s})"


UNARY = {  # name: (funct3, imm12, reference)
    "clz": (1, 0x600, lambda a: len(bits(a)) - len(bits(a).lstrip("0"))),
    "ctz": (1, 0x601, lambda a: len(bits(a)) - len(bits(a).rstrip("0"))),
    "cpop": (1, 0x602, lambda a: bits(a).count("1")),
    "sext.b": (1, 0x604, lambda a: struct.unpack("<b", bytes([a & 0xFF]))[0] & M32),
    "sext.h": (1, 0x605, lambda a: struct.unpack("<h", (a & 0xFFFF).to_bytes(2, "little"))[0] & M32),
    "rev8": (5, 0x698, lambda a: int.from_bytes(a.to_bytes(4, "little"), "big")),
    "brev8": (5, 0x687, lambda a: int.from_bytes(bytes(int(f"{b:08b}"[::-1], 2) for b in a.to_bytes(4, "little")),
                                                 "little")),
    "orc.b": (5, 0x287, ref_orcb),
}


@pytest.mark.parametrize("name", UNARY)
def test_unary_bitmanip(name):
    f3, imm, ref = UNARY[name]
    for a in OPERANDS + [0x00010000, 0x01000000, 0x00000100]:
        core, _ = run_words([i_type(imm, 5, f3, 7)], {5: a})
        assert core.x[7] == ref(a), f"{name}(0x{a:x})"


def test_zext_h_is_pack_with_x0():
    core, _ = run_words([r_type(0x04, 0, 5, 4, 7)], {5: 0xABCD1234})
    assert core.x[7] == 0x1234


def test_random_straight_line_programs():
    """Long blocks mixing R/I ops, x0 and word loads/stores on the stack RAM, checked against a Python model; this
    exercises the register locals' load/flush bookkeeping that single-instruction tests cannot."""
    import random
    rng = random.Random(1234)
    r_names, i_names = list(R_OPS), list(I_OPS)
    for trial in range(40):
        regs = [0] + [rng.choice(OPERANDS + [rng.getrandbits(32)]) for _ in range(1, 32)]
        regs[31] = LOCAL_BASE
        mem = {off: 0 for off in range(0, 64, 4)}
        init, words = list(regs), []
        for _ in range(rng.randrange(1, 150)):
            rd, rs1, rs2 = rng.randrange(0, 9), rng.randrange(0, 9), rng.randrange(0, 9)
            kind = rng.random()
            if kind < 0.5:
                name = rng.choice(r_names)
                f7, f3, ref = R_OPS[name]
                words.append(r_type(f7, rs2, rs1, f3, rd))
                value = ref(regs[rs1], regs[rs2])
            elif kind < 0.8:
                name, imm = rng.choice(i_names), rng.randrange(-2048, 2048)
                f3, ref = I_OPS[name]
                words.append(i_type(imm, rs1, f3, rd))
                value = ref(regs[rs1], imm)
            elif kind < 0.9:
                off = rng.randrange(0, 64, 4)
                words.append(s_type(off, rs2, 31, 2))
                mem[off] = regs[rs2]
                continue
            else:
                off = rng.randrange(0, 64, 4)
                words.append(i_type(off, 31, 2, rd, op=0x03))
                value = mem[off]
            if rd:
                regs[rd] = value
        bus = RecordingBus()
        core, _ = run_words(words, dict(enumerate(init)), bus)
        assert core.x == regs, f"trial {trial}"
        assert [struct.unpack_from("<I", bus.local_ram("t"), off)[0] for off in mem] == list(mem.values())


def test_lui_auipc_jal_jalr():
    words = [
        u_type(0xFFFFF, 5, 0x37),          # 0x1000 lui x5, 0xFFFFF
        u_type(0x80000, 6, 0x17),          # 0x1004 auipc x6, 0x80000
        jal(1, 12),                        # 0x1008 jal ra, 0x1014
        PARK,                              # 0x100c
        PARK,                              # 0x1010
        i_type(0x25, 11, 0, 9),            # 0x1014 addi x9, x11, 0x25 -> 0x1025 (odd: jalr clears bit 0)
        i_type(0x7FF, 0, 0, 0),            # 0x1018 addi x0, x0, 0x7ff (no effect)
        i_type(0, 9, 0, 9, op=0x67),       # 0x101c jalr x9, 0(x9): rd == rs1, target read before the link write
        PARK,                              # 0x1020
        i_type(0x77, 0, 0, 10),            # 0x1024 li x10, 0x77
        PARK,                              # 0x1028
    ]
    core, _ = make_core(words, {11: 0x1000})
    run_to_park(core)
    assert core.x[5] == 0xFFFFF000
    assert core.x[6] == (0x1004 + 0x80000000) & M32
    assert core.x[1] == 0x100C
    assert core.x[9] == 0x1020 and core.x[10] == 0x77 and core.x[0] == 0
    assert core.pc == 0x1028 and core.parked
    assert core.instret == 8   # lui auipc jal li addi jalr li j.


BRANCHES = {  # name: (funct3, reference)
    "beq": (0, lambda a, b: a == b), "bne": (1, lambda a, b: a != b),
    "blt": (4, lambda a, b: sx(a) < sx(b)), "bge": (5, lambda a, b: sx(a) >= sx(b)),
    "bltu": (6, lambda a, b: a < b), "bgeu": (7, lambda a, b: a >= b),
}


@pytest.mark.parametrize("name", BRANCHES)
def test_branches(name):
    f3, ref = BRANCHES[name]
    words = [b_type(12, 6, 5, f3), i_type(1, 0, 0, 7), PARK, i_type(2, 0, 0, 7), PARK]
    for a in (0, 1, 0x7FFFFFFF, 0x80000000, M32):
        for b in (0, 1, 0x7FFFFFFF, 0x80000000, M32):
            core, _ = make_core(words, {5: a, 6: b})
            run_to_park(core)
            taken = ref(a, b)
            assert core.x[7] == (2 if taken else 1), f"{name}(0x{a:x}, 0x{b:x})"
            assert core.pc == (0x1010 if taken else 0x1008)


def test_backward_branch_loop():
    # x5 = 10; loop: x6 += x5; x5 -= 1; bne x5, x0, loop
    words = [i_type(10, 0, 0, 5), r_type(0, 5, 6, 0, 6), i_type(-1, 5, 0, 5), b_type(-8, 0, 5, 1)]
    core, _ = run_words(words)
    assert core.x[6] == 55 and core.x[5] == 0
    assert core.instret == 1 + 3 * 10 + 1


def test_loads_signed_unsigned_and_regions():
    bus = RecordingBus()
    pattern = bytes([0x80, 0xFF, 0x7F, 0x01, 0xFE, 0x80, 0x34, 0x12])
    bus.l1[0x2000:0x2008] = pattern
    bus.local_ram("trisc0")[0x10:0x18] = pattern
    bus.mmio[0xFFB12000] = 0xFFFF_8081     # MMIO loads: the bus value is truncated to the access size
    loads = {"lb": (0, 1, True), "lh": (1, 2, True), "lw": (2, 4, True), "lbu": (4, 1, False), "lhu": (5, 2, False)}
    for base in (0x2000, LOCAL_BASE + 0x10):
        for name, (f3, size, signed) in loads.items():
            for off in range(0, 8 - size + 1):    # includes misaligned offsets
                core, _ = run_words([i_type(off, 5, f3, 7, op=0x03)], {5: base}, bus)
                expect = int.from_bytes(pattern[off:off + size], "little", signed=signed) & M32
                assert core.x[7] == expect, f"{name} at 0x{base + off:x}"
    for name, (f3, size, signed) in loads.items():
        bus.accesses.clear()
        core, _ = run_words([i_type(-0x10, 5, f3, 7, op=0x03)], {5: 0xFFB12010}, bus)
        assert bus.accesses == [("load", 0xFFB12000, size)]
        raw = 0xFFFF8081 & ((1 << 8 * size) - 1)
        assert core.x[7] == (int.from_bytes(raw.to_bytes(size, "little"), "little", signed=signed) & M32), name


def test_load_to_x0_still_reads_mmio():
    core, bus = run_words([i_type(0, 5, 2, 0, op=0x03)], {5: 0xFFB12000})
    assert bus.accesses == [("load", 0xFFB12000, 4)] and core.x[0] == 0


def test_stores_regions_misaligned_and_mmio():
    value = 0x89ABCDEF
    stores = {"sb": (0, 1), "sh": (1, 2), "sw": (2, 4)}
    for base, view in ((0x3000, lambda b: b.l1[0x3000:0x3010]),
                       (LOCAL_BASE + 0x20, lambda b: b.local_ram("trisc0")[0x20:0x30])):
        for name, (f3, size) in stores.items():
            for off in range(0, 6):
                core, bus = run_words([s_type(off, 6, 5, f3)], {5: base, 6: value})
                expect = bytearray(16)
                expect[off:off + size] = value.to_bytes(4, "little")[:size]
                assert bytes(view(bus)) == bytes(expect), f"{name} at +{off}"
    for name, (f3, size) in stores.items():
        core, bus = run_words([s_type(4, 6, 5, f3)], {5: 0xFFB11FFC, 6: value})
        assert bus.accesses == [("store", 0xFFB12000, size, value & ((1 << 8 * size) - 1))]


def test_access_crossing_region_end_is_an_error():
    with pytest.raises(EmuError, match="crosses"):
        run_words([i_type(-2, 5, 2, 7, op=0x03)], {5: L1_SIZE})


def test_csr_counters_and_cfg0():
    csrrs = lambda rd, csr: i_type(csr, 0, 2, rd, op=0x73)                      # noqa: E731
    words = [NOP, NOP, NOP, csrrs(5, 0xC02), csrrs(6, 0xB00), csrrs(7, 0xC82),
             i_type(0x7C0, 8, 1, 0, op=0x73),          # csrw cfg0, x8 (accepted, no effect)
             i_type(0x7C0, 0, 2, 9, op=0x73),          # csrr x9, cfg0
             i_type(0xF14, 0, 2, 10, op=0x73)]         # csrr x10, mhartid
    core, _ = run_words(words, {8: 0x1234, 10: 99})
    assert (core.x[5], core.x[6], core.x[7]) == (3, 4, 0)
    assert core.x[9] == 0x1234 and core.x[10] == 0
    core, _ = make_core([csrrs(5, 0xC02), PARK])
    core.instret = 0x1_0000_0005
    core.run(10)
    assert core.x[5] == 5
    with pytest.raises(EmuUnimplemented, match="0xbc0"):
        run_words([csrrs(5, 0xBC0)])


def test_fence_is_noop_and_x0_stays_zero():
    core, _ = run_words([0x0FF0000F, i_type(5, 0, 0, 0), u_type(1, 0, 0x37)])
    assert core.x[0] == 0 and core.instret == 4


@pytest.mark.parametrize("word,what", [(0x00000073, "ecall"), (0x00100073, "ebreak"), (0x0000100F, "fence.i"),
                                       (0xFFFFFFFF, "illegal"), (r_type(0x02, 1, 1, 0, 1), "illegal")])
def test_faults_name_core_pc_word(word, what):
    core, _ = make_core([NOP, NOP, word, PARK], {})
    with pytest.raises(EmuError) as err:
        core.run(100)
    msg = str(err.value)
    assert what in msg and "trisc0" in msg and "0x00001008" in msg and f"0x{word:08x}" in msg
    assert core.pc == 0x1008 and core.instret == 2


def test_unmodelled_extension_is_named():
    with pytest.raises(EmuUnimplemented, match="F extension"):
        run_words([0x00000053])     # fadd.s f0, f0, f0


def test_illegal_word_not_executed_is_harmless():
    core, _ = run_words([jal(0, 8), 0xFFFFFFFF, i_type(3, 0, 0, 5)])
    assert core.x[5] == 3


def test_fetch_outside_l1_is_an_error():
    core, _ = make_core([i_type(0, 5, 0, 0, op=0x67)], {5: LOCAL_BASE})
    with pytest.raises(EmuError, match="fetch"):
        core.run(100)
    assert core.pc == LOCAL_BASE and core.instret == 1


def test_misaligned_jump_target_is_an_error():
    core, _ = make_core([b_type(6, 0, 0, 0), NOP, PARK])          # beq x0, x0, +6
    with pytest.raises(EmuError, match="0x00001006"):
        core.run(100)


def test_block_source_is_python():
    core, _ = make_core([i_type(1, 5, 0, 5), s_type(0, 5, 2, 2), PARK])
    name, source, count, pure = core.block_source(CODE)
    assert count == 3 and source.startswith(f"def {name}(done):") and "LCW[" in source
    compile(source, "block", "exec")


def test_amo_on_l1():
    bus = RecordingBus()
    struct.pack_into("<I", bus.l1, 0x4000, 0xFFFFFFFE)
    amo = lambda f5, rd: r_type(f5 << 2, 6, 5, 2, rd, op=0x2F)                 # noqa: E731
    core, _ = run_words([amo(0x00, 7), amo(0x10, 8), amo(0x18, 9)], {5: 0x4000, 6: 5}, bus)
    # amoadd: old -2 -> 3; amomin(3, 5) -> 3; amominu(3, 5) -> 3
    assert (core.x[7], core.x[8], core.x[9]) == (0xFFFFFFFE, 3, 3)
    assert struct.unpack_from("<I", bus.l1, 0x4000)[0] == 3


def test_run_budget_park_and_reset():
    core, bus = make_core([i_type(1, 5, 0, 5), jal(0, -4)])           # infinite counting loop
    n = core.run(1000)
    assert 1000 <= n <= 1000 + 64 and core.x[5] == n // 2 and not core.parked
    struct.pack_into("<II", bus.l1, CODE, i_type(7, 0, 0, 5), PARK)  # new code at the same address
    core.reset(CODE)
    assert core.run(1000) == 2 and core.parked and core.x[5] == 7
    assert core.run(1000) == 0


def test_tensix_push_words():
    words = [ttinsn(0x02000012), ttinsn(0x12345678), ttinsn(0x40000001), ttinsn(0xBFFFFFFF)]
    core, bus = run_words(words)
    assert bus.tensix == [0x02000012, 0x12345678, 0x40000001, 0xBFFFFFFF]


def test_stall_mid_block_retries_without_side_effects():
    # x5 += 1; lw x6, 0(x7) [MMIO, stalls twice]; x8 = x6 + x5; push; x9 = 1
    words = [i_type(1, 5, 0, 5), i_type(0, 7, 2, 6, op=0x03), r_type(0, 5, 6, 0, 8), ttinsn(0x777), i_type(1, 0, 0, 9)]
    bus = RecordingBus(stall_mmio=2, stall_pushes=1)
    bus.mmio[0xFFB12000] = 40
    core, _ = make_core(words + [PARK], {5: 1, 7: 0xFFB12000}, bus)
    assert core.run(100) == 1 and core.pc == 0x1004 and core.x[5] == 2 and core.x[6] == 0
    assert core.run(100) == 0 and core.pc == 0x1004
    assert core.run(100) == 2 and core.pc == 0x100C and core.x[8] == 42 and bus.tensix == []
    assert core.run(100) == 3 and core.parked and bus.tensix == [0x777] and core.x[9] == 1
    assert core.instret == 6 and bus.accesses == [("load", 0xFFB12000, 4)]


# ---------------------------------------------------------------- compiled C programs

@pytest.fixture
def build():
    """tests/programs/rv32/<name>.c built for CORE with `march`."""
    def compile_prog(name: str, march: str = "rv32im_zba_zbb") -> Path:
        return programs.build(f"rv32/{name}.c", CORE, march=march)
    return compile_prog


def load_elf(path: Path, bus) -> int:
    entry, segs = load_segments(path.read_bytes())
    for addr, data, memsz in segs:
        assert addr + memsz <= L1_SIZE
        bus.l1[addr:addr + len(data)] = data
        bus.l1[addr + len(data):addr + memsz] = bytes(memsz - len(data))
    return entry


def run_program(elf: Path, bus=None, quantum=100_000):
    bus = bus or RecordingBus()
    core = RV32Core("trisc0", bus, load_elf(elf, bus))
    run_to_park(core)
    return struct.unpack_from("<I", bus.l1, RESULT_ADDR)[0], core, bus


@pytest.mark.needs_program_cc
@pytest.mark.parametrize("march", ["rv32im", "rv32im_zba_zbb"])
def test_c_sort(build, march):
    result, core, bus = run_program(build("sort", march))
    s, data = 12345, []
    for _ in range(200):
        s = (s * 1103515245 + 12345) & M32
        data.append(sx(s) >> 3)
    assert result == 200
    assert list(struct.unpack_from("<200i", bus.l1, 0x400)) == sorted(data)


@pytest.mark.needs_program_cc
@pytest.mark.parametrize("march", ["rv32im", "rv32im_zba_zbb"])
def test_c_crc32(build, march):
    result, _, _ = run_program(build("crc32", march))
    assert result == zlib.crc32(bytes((i * 7 + 3) & 0xFF for i in range(1000)))


@pytest.mark.needs_program_cc
def test_c_muldiv(build):
    result, _, _ = run_program(build("muldiv"))
    sb, sh = [-128, -1, 5, 127], [-32768, -2, 300, 32767]
    acc, s = 1, 99
    for i in range(1, 301):
        s = (s * 1664525 + 1013904223) & M32
        a, b = sx(s), sx(((s >> 7) - 0x100000) & M32)
        if i & 15 == 0:
            b = 0
        if i & 31 == 1:
            a, b = -2**31, -1
        au, bu = a & M32, b & M32
        q, r = ref_div(au, bu), ref_rem(au, bu)
        qu, ru = (au // bu, au % bu) if bu else (M32, au)
        p, pu = a * b, au * bu
        acc = (acc * 31 + q) & M32
        acc = (acc * 31 + r) & M32
        acc = (acc * 31 + qu + ru) & M32
        acc ^= ((p >> 32) + (pu >> 32) + p) & M32
        acc = (acc + sb[i & 3] * sh[(i >> 2) & 3]) & M32
    assert result == acc


def _expected_pushes():
    words, acc = [], 0
    for i in range(5):
        acc = acc * 3 + i + 7
        words += [0x02000012, 0x01000000 + i, 0x12345678]
    return words, acc


@pytest.mark.needs_program_cc
def test_c_tensix_pushes(build):
    result, _, bus = run_program(build("ttpush"))
    words, acc = _expected_pushes()
    assert bus.tensix == words and result == acc


@pytest.mark.needs_program_cc
@pytest.mark.parametrize("stalls", [1, 4, 9])
def test_c_tensix_pushes_with_stalls(build, stalls):
    bus = RecordingBus(stall_pushes=stalls)
    result, core, _ = run_program(build("ttpush"), bus)
    words, acc = _expected_pushes()
    assert bus.stalls == stalls and bus.tensix == words and result == acc
    clean = run_program(build("ttpush"))[1]
    assert core.instret == clean.instret


@pytest.mark.needs_program_cc
def test_speed(build):
    """Prints instructions/second on a compiled loop (run with -s); asserts only a loose floor."""
    elf = build("bench")
    result, core, _ = run_program(elf)                    # warm: translation included
    bus = RecordingBus()
    core = RV32Core("trisc0", bus, load_elf(elf, bus))
    t0 = time.perf_counter()
    run_to_park(core)
    dt = time.perf_counter() - t0
    rate = core.instret / dt
    print(f"\nrv32 speed: {core.instret} instructions in {dt:.3f} s = {rate / 1e6:.2f} M instr/s")
    h, a = 1, [0] * 256
    for _ in range(200):
        for i in range(256):
            h = ((h ^ a[i]) * 16777619 + i) & M32
            a[i] = h >> 3
    assert struct.unpack_from("<I", bus.l1, RESULT_ADDR)[0] == h
    assert rate > 300_000


def test_shared_translation_keyed_by_content():
    """A different program at the same address (and the same program in a core with another local RAM size) gets its
    own translation: the results are the new program's (independent reference: the sums computed here)."""
    for imm in (5, 7, 5):
        core, _ = make_core([i_type(imm, 0, 0, 6), i_type(imm * 3, 6, 0, 7), PARK])
        run_to_park(core)
        assert (core.x[6], core.x[7]) == (imm, imm * 4)
    # a store just past a 4 KiB local RAM: MMIO there, local RAM in a core with 8 KiB (the generated bounds differ)
    for local_size in (8192, 4096, 8192):
        bus = RecordingBus(local_size=local_size)
        core, _ = make_core([u_type((LOCAL_BASE + 0x1000) >> 12, 5, 0x37), i_type(42, 0, 0, 6), s_type(0, 6, 5, 2),
                             PARK], bus=bus)
        run_to_park(core)
        in_local = struct.unpack_from("<I", bus.local_ram("trisc0"), 0x1000)[0] if local_size > 0x1000 else None
        assert (in_local, bus.mmio.get(LOCAL_BASE + 0x1000)) == ((42, None) if local_size == 8192 else (None, 42))
    keys = [k for k in SHARED_BLOCKS if k[0] == CODE]
    assert len({k[4] for k in keys}) >= 3 and {k[1] for k in keys} >= {4096, 8192}


def test_spin_probe_makes_no_bus_store():
    """A semaphore take (poll an MMIO word until non-zero, then store to it): once the post lands, the probe's turn of
    the stopped loop leaves it and reaches the take's store. The probe must stop there without the store (it was
    made, so the core took the semaphore twice: a lost post that hung a kernel), and tell no wait loop (None)."""
    sem = 0xFFB12000
    words = [i_type(0, 21, 2, 5, op=0x03),            # lw x5, 0(x21)
             b_type(-4, 0, 5, 0),                     # beq x5, x0, back to the load
             s_type(0, 6, 21, 2),                     # sw x6, 0(x21): the take
             PARK]
    bus = RecordingBus()
    bus.peek = lambda _who, addr: bus.mmio.get(addr, 0)
    for i, w in enumerate(words):
        struct.pack_into("<I", bus.l1, CODE + 4 * i, w)
    core = RV32Core("trisc1", bus, CODE)
    core.x[21], core.x[6] = sem, 1
    core.run(100)
    assert core.spinning and core.spin_reads() == ([(sem, 4)], None)     # polls the word: a wait loop
    bus.mmio[sem] = 1                                                   # the post lands
    stores = [a for a in bus.accesses if a[0] == "store"]
    assert core.spin_reads() is None
    assert [a for a in bus.accesses if a[0] == "store"] == stores and bus.mmio[sem] == 1
    core.run(100)                                                       # the core itself takes it, once
    assert core.parked and [a for a in bus.accesses if a[0] == "store"] == [("store", sem, 4, 1)]
