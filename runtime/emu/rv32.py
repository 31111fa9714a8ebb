"""Interpreter for the Blackhole "baby" RISC-V cores: RV32IM + Zicsr + Zba + Zbb (+ Zaamo, Zbkb pack/brev8, grevi).

Speed comes from translating each basic block (a straight run of instructions ending at a branch/jump, at most
MAX_BLOCK long) once into a generated Python function, cached by start pc:

* registers live in Python locals `r1..r31` inside a block: the ones the block reads are loaded from `self.x` on entry,
  the ones it wrote are stored back on exit; x0 is the literal 0;
* all values are unsigned 32-bit ints; signed views are made with `(v ^ 0x80000000) - 0x80000000`;
* aligned loads/stores to L1 and to the core-local RAM index typed memoryviews directly (fast path); misaligned
  accesses and everything else go through Python helpers, and MMIO goes to `bus.mmio_load/mmio_store`;
* the block records in local `k` the index of any instruction that may raise (MMIO, Tensix push, CSR, illegal word);
  a handler around the body then stores the registers as they were *before* that instruction and points `pc` at it,
  so a `Stall` can simply be retried by the next `run()` (the instructions before it have retired).

`.ttinsn`: any word with `word & 3 != 3` pushes `rotr32(word, 2)` to the Tensix coprocessor via `bus.push_tensix`.
When the bus provides `PUSHM(pos, words)`, a run of consecutive `.ttinsn` words in a block is one call; if word j of
the run raises, the bus sets `core.sub = j` and the handler resumes/blames that word (k += C.sub).
`jal x0, 0` (`j .`) parks the core.
"""
from __future__ import annotations

import sys
from types import CodeType
from typing import Callable, Protocol

import numpy as np

from tt_backend.chip.errors import EmuUndefined, EmuUnimplemented, EmuUnspecified
from tt_backend.chip.isa import from_ttinsn

M32 = 0xFFFFFFFF
SIGN = 0x80000000
L1_SIZE = 0x180000          # L1 is mapped at [0, L1_SIZE) in every core's address space
LOCAL_BASE = 0xFFB00000     # core-private RAM
MAX_BLOCK = 64              # cap on instructions per translated block (bounds the run() overshoot and compile cost)
SPIN_CHAIN = 16             # pure blocks followed from one spin snapshot before taking a fresh one
STAMP_SHIFT = 4             # L1 store records (set_stamper) per 16-byte line: the size of a CB counter's or semaphore's
#                             own line (templates/device/tt_cb.h), so a poll's line is not stamped by its neighbours

# Translations shared by every core and launch: a block's generated source depends only on its start pc, the words
# from there (at most MAX_BLOCK of them), the core's local RAM size and which pushers the bus gave, so the compiled
# code object for that key is reused instead of compiling the same source again (each launch resets its cores, and
# compile() was most of a small kernel's host time). SHARE_TRANSLATIONS = False translates every block afresh (the
# reference the equality tests compare with).
SHARE_TRANSLATIONS = True
TRANSLATIONS_KEPT = 8192    # bound on the shared table (a few KB per entry); it starts afresh when full
SHARED_BLOCKS: dict[tuple, tuple[str, CodeType, int, bool, tuple[int, ...], tuple[int, ...]]] = {}

if sys.byteorder != "little":  # the typed memoryviews below rely on host byte order == RISC-V byte order
    raise ImportError("tt_backend.runtime.emu.rv32 needs a little-endian host")


class Stall(Exception):
    """Raised by the bus when an access must be retried later (full FIFO, blocking MMIO read). No side effect done."""


class _Parked(Exception):
    """Internal: the block reached `jal x0, 0`."""


class Bus(Protocol):
    l1: memoryview

    def local_ram(self, core: str) -> memoryview: ...
    def mmio_load(self, core: str, addr: int, size: int) -> int: ...
    def mmio_store(self, core: str, addr: int, size: int, value: int) -> None: ...
    def push_tensix(self, core: str, word: int) -> None: ...


def _sx(v: int) -> int:
    return (v ^ SIGN) - SIGN


def _sext(v: int, bits: int) -> int:
    sign = 1 << (bits - 1)
    return (v & ((sign << 1) - 1) ^ sign) - sign


# ---------------------------------------------------------------- helpers called from generated code (rare ops)

def _div(a: int, b: int) -> int:
    if b == 0:
        return M32
    sa, sb = _sx(a), _sx(b)
    if sa == -SIGN and sb == -1:
        return a                                # overflow: INT_MIN
    q = abs(sa) // abs(sb)
    return (-q if (sa < 0) != (sb < 0) else q) & M32


def _rem(a: int, b: int) -> int:
    if b == 0:
        return a
    sa, sb = _sx(a), _sx(b)
    if sa == -SIGN and sb == -1:
        return 0
    r = abs(sa) % abs(sb)
    return (-r if sa < 0 else r) & M32          # remainder takes the dividend's sign


def _divu(a: int, b: int) -> int:
    return a // b if b else M32


def _remu(a: int, b: int) -> int:
    return a % b if b else a


# generalized reverse (Bitmanip 0.94 grevi): stage i swaps adjacent blocks of 2**i bits when bit i of k is set
_GREV_STAGES = [(1, 0x55555555), (2, 0x33333333), (4, 0x0F0F0F0F), (8, 0x00FF00FF), (16, 0x0000FFFF)]


def _grev(v: int, k: int) -> int:
    for i, (shift, mask) in enumerate(_GREV_STAGES):
        if k >> i & 1:
            v = ((v & mask) << shift) | ((v >> shift) & mask)
    return v


def _orcb(v: int) -> int:
    return sum(0xFF << s for s in (0, 8, 16, 24) if v >> s & 0xFF)


def _ctz(v: int) -> int:
    return (v & -v).bit_length() - 1 if v else 32


# ---------------------------------------------------------------- instruction tables: (funct7, funct3) -> expression

# R-type (opcode 0x33) over operands {a}, {b} (register locals or "0"); division edge cases live in helpers
_OP_R = {
    (0x00, 0): "({a} + {b}) & 0xFFFFFFFF",                         # add
    (0x20, 0): "({a} - {b}) & 0xFFFFFFFF",                         # sub
    (0x00, 1): "({a} << ({b} & 31)) & 0xFFFFFFFF",                 # sll
    (0x00, 2): "1 if ({a} ^ 0x80000000) < ({b} ^ 0x80000000) else 0",  # slt
    (0x00, 3): "1 if {a} < {b} else 0",                            # sltu
    (0x00, 4): "{a} ^ {b}",                                        # xor
    (0x00, 5): "{a} >> ({b} & 31)",                                # srl
    (0x20, 5): "((({a} ^ 0x80000000) - 0x80000000) >> ({b} & 31)) & 0xFFFFFFFF",  # sra
    (0x00, 6): "{a} | {b}",                                        # or
    (0x00, 7): "{a} & {b}",                                        # and
    # M
    (0x01, 0): "({a} * {b}) & 0xFFFFFFFF",                                                      # mul
    (0x01, 1): "((({a} ^ 0x80000000) - 0x80000000) * (({b} ^ 0x80000000) - 0x80000000) >> 32) & 0xFFFFFFFF",  # mulh
    (0x01, 2): "((({a} ^ 0x80000000) - 0x80000000) * {b} >> 32) & 0xFFFFFFFF",               # mulhsu
    (0x01, 3): "({a} * {b}) >> 32",                                                             # mulhu
    (0x01, 4): "DIV({a}, {b})",
    (0x01, 5): "DIVU({a}, {b})",
    (0x01, 6): "REM({a}, {b})",
    (0x01, 7): "REMU({a}, {b})",
    # Zba
    (0x10, 2): "(({a} << 1) + {b}) & 0xFFFFFFFF",                  # sh1add
    (0x10, 4): "(({a} << 2) + {b}) & 0xFFFFFFFF",                  # sh2add
    (0x10, 6): "(({a} << 3) + {b}) & 0xFFFFFFFF",                  # sh3add
    # Zbb
    (0x20, 7): "{a} & ({b} ^ 0xFFFFFFFF)",                         # andn
    (0x20, 6): "{a} | ({b} ^ 0xFFFFFFFF)",                         # orn
    (0x20, 4): "{a} ^ {b} ^ 0xFFFFFFFF",                           # xnor
    (0x05, 4): "{a} if ({a} ^ 0x80000000) < ({b} ^ 0x80000000) else {b}",  # min
    (0x05, 5): "{a} if {a} < {b} else {b}",                        # minu
    (0x05, 6): "{a} if ({a} ^ 0x80000000) > ({b} ^ 0x80000000) else {b}",  # max
    (0x05, 7): "{a} if {a} > {b} else {b}",                        # maxu
    (0x30, 1): "(({a} << ({b} & 31)) | ({a} >> (32 - ({b} & 31)))) & 0xFFFFFFFF",  # rol
    (0x30, 5): "(({a} >> ({b} & 31)) | ({a} << (32 - ({b} & 31)))) & 0xFFFFFFFF",  # ror
    # Zbkb pack (zext.h is pack rd, rs1, x0)
    (0x04, 4): "({a} & 0xFFFF) | (({b} & 0xFFFF) << 16)",
}

# I-type ALU (opcode 0x13), funct3 -> expression over {a} and the immediate {i} (sign-extended) / {u} (i & M32)
_OP_I = {
    0: "({a} + {i}) & 0xFFFFFFFF",                                 # addi
    2: "1 if ({a} ^ 0x80000000) < ({u} ^ 0x80000000) else 0",      # slti
    3: "1 if {a} < {u} else 0",                                    # sltiu
    4: "{a} ^ {u}",                                                # xori
    6: "{a} | {u}",                                                # ori
    7: "{a} & {u}",                                                # andi
}

# shift-immediate group: (funct3, funct7) -> expression over {a}, {s} (shamt)
_OP_SHIFT_I = {
    (1, 0x00): "({a} << {s}) & 0xFFFFFFFF",                        # slli
    (5, 0x00): "{a} >> {s}",                                       # srli
    (5, 0x20): "((({a} ^ 0x80000000) - 0x80000000) >> {s}) & 0xFFFFFFFF",  # srai
    (5, 0x30): "(({a} >> {s}) | ({a} << (32 - {s}))) & 0xFFFFFFFF",       # rori
    (5, 0x34): "GREV({a}, {s})",                                   # grevi (rev8 = 24, brev8 = 7)
}

# unary Zbb ops encoded as funct3 1/5 with a full 12-bit immediate
_OP_UNARY = {
    (1, 0x600): "32 - ({a}).bit_length()",                         # clz ({a} may be the literal 0: parenthesised)
    (1, 0x601): "CTZ({a})",                                        # ctz
    (1, 0x602): "({a}).bit_count()",                               # cpop
    (1, 0x604): "((({a} & 0xFF) ^ 0x80) - 0x80) & 0xFFFFFFFF",     # sext.b
    (1, 0x605): "((({a} & 0xFFFF) ^ 0x8000) - 0x8000) & 0xFFFFFFFF",  # sext.h
    (5, 0x287): "ORCB({a})",                                       # orc.b
}

_BRANCH = {
    0: "{a} == {b}",
    1: "{a} != {b}",
    4: "({a} ^ 0x80000000) < ({b} ^ 0x80000000)",
    5: "({a} ^ 0x80000000) >= ({b} ^ 0x80000000)",
    6: "{a} < {b}",
    7: "{a} >= {b}",
}

# loads: funct3 -> (size, signed, fast-path view suffix, fix-up); signed views yield negative ints: mask them
_LOADS = {0: (1, True, "b", " & 0xFFFFFFFF"), 1: (2, True, "h", " & 0xFFFFFFFF"), 2: (4, False, "W", ""),
          4: (1, False, "B", ""), 5: (2, False, "H", "")}
_STORES = {0: (1, "B", " & 0xFF"), 1: (2, "H", " & 0xFFFF"), 2: (4, "W", "")}

# Zaamo funct5 -> name (all .w, funct3 = 2); lr.w/sc.w (Zalrsc) are not implemented by the hardware
_AMO = {0x00: "amoadd", 0x01: "amoswap", 0x04: "amoxor", 0x0C: "amoand", 0x08: "amoor",
        0x10: "amomin", 0x14: "amomax", 0x18: "amominu", 0x1C: "amomaxu"}

# opcode groups the hardware has but this emulator does not model: raise EmuUnimplemented by name when executed
_UNMODELLED = {0x07: "F/V load (flw/vle)", 0x27: "F/V store (fsw/vse)", 0x43: "fmadd", 0x47: "fmsub",
               0x4B: "fnmsub", 0x4F: "fnmadd", 0x53: "F extension op", 0x57: "V extension op"}

# CSRs: counters read the core's retired-instruction count (no cycle model: cycle == instret)
_COUNTERS = {0xC00: 0, 0xB00: 0, 0xC02: 0, 0xB02: 0, 0xC80: 32, 0xB80: 32, 0xC82: 32, 0xB82: 32}
_CSR_READ_ONLY = {0x300: 0x80006600, 0x301: 0x40201123, 0xF14: 0}   # mstatus, misa, mhartid (writes ignored)
_CSR_SCRATCH_RESET = {0x7C0: 16 << 13, 0x7C1: 0, 0x7C2: 0, 0x7C3: 0, 0x7C4: 0, 0x7C5: 0, 0x7C6: 0, 0x320: 0}


def _imm_i(w: int) -> int:
    return _sext(w >> 20, 12)


def _imm_s(w: int) -> int:
    return _sext(((w >> 25) << 5) | ((w >> 7) & 31), 12)


def _imm_b(w: int) -> int:
    return _sext(((w >> 31) << 12) | (((w >> 7) & 1) << 11) | (((w >> 25) & 0x3F) << 5) | (((w >> 8) & 0xF) << 1), 13)


def _imm_j(w: int) -> int:
    return _sext(((w >> 31) << 20) | (((w >> 12) & 0xFF) << 12) | (((w >> 20) & 1) << 11)
                 | (((w >> 21) & 0x3FF) << 1), 21)


class _BlockWriter:
    """Generates the Python source of one basic block, tracking which register locals are loaded and dirty."""

    def __init__(self, start: int):
        self.start = start
        self.body: list[str] = []
        self.loaded: set[int] = set()      # registers read before being written: loaded from x on entry
        self.dirty: list[int] = []         # registers written so far, in first-write order
        self.risky: dict[int, list[int]] = {}   # instruction index -> dirty registers just before it
        self.count = 0                     # instructions emitted so far
        self.ended = False
        self.pure = True                   # no store, push, CSR write or atomic: re-running it changes only registers
        self.runs: list[int] = []          # indices of PUSHM calls (a run of `.ttinsn` words: C.sub = words done)

    def r(self, reg: int) -> str:
        if reg == 0:
            return "0"
        if reg not in self.dirty:
            self.loaded.add(reg)
        return f"r{reg}"

    def w(self, reg: int) -> str:
        if reg not in self.dirty:
            self.dirty.append(reg)
        return f"r{reg}"

    def emit(self, line: str) -> None:
        self.body.append(line)

    def may_raise(self) -> str:
        """Mark the current instruction as one that may raise; returns the statement recording its index."""
        self.risky[self.count] = list(self.dirty)
        return f"k = {self.count}; C.pos = done + {self.count}"

    def flush(self) -> str:
        return "; ".join(f"x[{reg}] = r{reg}" for reg in self.dirty) or "pass"

    def source(self, name: str) -> str:
        lines = [f"def {name}(done):"]
        lines += [f"    r{reg} = x[{reg}]" for reg in sorted(self.loaded)]
        lines.append("    k = 0")
        lines.append("    try:")
        lines += [f"        {line}" for line in self.body]
        lines.append("    except BaseException:")
        if self.runs:
            lines.append(f"        if k in {tuple(self.runs) if len(self.runs) > 1 else f'({self.runs[0]},)'}: k += C.sub")
        for i, (idx, dirty) in enumerate(sorted(self.risky.items())):
            stores = "; ".join(f"x[{reg}] = r{reg}" for reg in dirty) or "pass"
            lines.append(f"        {'if' if i == 0 else 'elif'} k == {idx}: {stores}")
        lines.append(f"        C.pc = {self.start:#x} + 4 * k")
        lines.append("        raise")
        return "\n".join(lines) + "\n"


class _OtherRead(Exception):
    """Internal: spin_reads met something other than an aligned L1 / local RAM load or a peekable register (`addr`:
    a load's address)."""

    def __init__(self, addr: int | None):
        self.addr = addr


def _probe_stop(*_args) -> None:
    raise _OtherRead(None)


def _no_wait(*_args) -> None:
    """spin_reads' SWAIT: a probe's reads take no time."""


class _ProbeCore:
    """What spin_reads' blocks see as `C`: somewhere to put pc / pos / sub without touching the core."""
    pc = pos = sub = 0


class _LoggedView:
    """An L1 view for spin_reads: reads are the real view's, each logged as (byte address, size)."""

    def __init__(self, view: memoryview, size: int, log: list[tuple[int, int]]):
        self.view, self.size, self.log = view, size, log

    def __getitem__(self, i: int) -> int:
        self.log.append((i * self.size, self.size))
        return self.view[i]

    def __setitem__(self, i: int, _value: int) -> None:
        # the turn left the loop for a store (its reads can differ from the core's under the causal-load rule,
        # where the core saw a word as it was at its cycle; pushes stop it likewise): not a wait loop spin_reads
        # can describe
        raise _OtherRead(None)


class RV32Core:
    """One baby RISC-V core. `x` is mutated in place (generated code holds a reference to it)."""
    # the state rv32_native.c's round loop and bus calls read and write on every quantum, as members at fixed offsets
    # (rv32_native.c slot_at); the rest in the instance dict
    __slots__ = ("pc", "instret", "pos", "sub", "parked", "spinning", "__dict__", "__weakref__")

    def __init__(self, name: str, bus: Bus, reset_pc: int = 0):
        self.name = name
        self.bus = bus
        self.x: list[int] = [0] * 32
        self.pc = reset_pc
        self.instret = 0
        self.pos = 0            # during run(): instructions retired in this run before the access now on the bus
        self.sub = 0            # set by the bus's PUSHM when word `sub` of a pushed run raised
        self.parked = False
        self.spinning = False   # the last run() stopped in a loop that cannot progress until memory/MMIO changes
        self.csr: dict[int, int] = dict(_CSR_SCRATCH_RESET)
        l1 = bus.l1
        local = bus.local_ram(name)
        self.local_size = len(local)
        self._l1 = l1
        self._local = local
        self._blocks: dict[int, tuple[Callable[[int], int], int, bool]] = {}   # pc -> (fn, count, pure)
        # (pc, n) -> (fn, registers read, registers written): n instructions translated alone (piece())
        self._pieces: dict[tuple[int, int], tuple[Callable[[int], int], tuple[int, ...], tuple[int, ...]]] = {}
        self.native = None      # an accel/rv32_native.py runner that run() hands over to, when attached
        # stamp(addr, pos): the bus's record of this core's L1 store at `addr`, `pos` instructions into the quantum
        # (set_stamper; the tile keeps when each L1 line was last written, for the cores polling it)
        self.stamper: Callable[[int, int], None] | None = None
        self.stamps: np.ndarray | None = None
        self.stamp_base: Callable[[], int] | None = None
        # the tile's L1 write log (a ring of (line, cycle, word address, the word replaced) and its count), which
        # the native runner's stores append to as the stamper does (set_stamper)
        self.write_log: tuple[np.ndarray, ...] | None = None
        self._probe: tuple[dict, list] | None = None     # spin_reads' namespace and read log, built on first use
        self._probe_blocks: dict[int, Callable[[int], int]] = {}
        # namespace of the generated functions: register file, memory views, helpers
        self._ns = {
            "x": self.x, "C": self,
            "L1B": l1, "L1b": l1.cast("b"), "L1H": l1.cast("H"), "L1h": l1.cast("h"), "L1W": l1.cast("I"),
            "LCB": local, "LCb": local.cast("b"), "LCH": local.cast("H"), "LCh": local.cast("h"),
            "LCW": local.cast("I"),
            "LOAD": self._slow_load, "STORE": self._slow_store, "PUSH": bus.push_tensix, "NAME": name,
            "CSR": self._csr_op, "AMO": self._amo, "FAIL": self._fail, "Parked": _Parked,
            "DIV": _div, "DIVU": _divu, "REM": _rem, "REMU": _remu, "GREV": _grev, "ORCB": _orcb, "CTZ": _ctz,
        }

    # ------------------------------------------------------------------ public API

    def set_pusher(self, kind: str, fn) -> None:
        """Give the generated code a bus pusher specialised for this core: "PUSHP" (one `.ttinsn` word, its position
        passed) or "PUSHM" (a run of words); None takes it away (the generic bus.push_tensix path again). Blocks
        already translated keep what they were translated with."""
        if fn is None:
            self._ns.pop(kind, None)
        else:
            self._ns[kind] = fn
        self._drop_bus_calls()

    def _drop_bus_calls(self) -> None:
        """The native runner's bus-call tuple names the pushers and the stamp base: rebuilt at its next run()."""
        if self.native is not None:
            self.native.calls = None

    def set_stamper(self, fn: Callable[[int, int], None], stamps: np.ndarray, base: Callable[[], int],
                    write_log: tuple[np.ndarray, ...] | None = None) -> None:
        """Report every store to L1 (and atomic) to `fn(addr, pos)` from now on. The native runner writes the same
        record itself: `stamps[addr >> STAMP_SHIFT] = base() + pos` (`base()`: the core's cycle at position 0 of the
        running quantum, stalls so far included), and appends (line, that cycle, word address, the word it replaces)
        to `write_log` (a ring of such uint64 quadruples, its count, and its index by line: causal_log.h log_index)
        as `fn` does, before the store lands. Blocks
        already translated keep what they were translated with."""
        self.stamper, self.stamps, self.stamp_base, self.write_log = fn, stamps, base, write_log
        self._ns["STAMP"] = fn
        self._drop_bus_calls()

    def set_stamp_wait(self, past: Callable[..., int], wait: Callable[[int, int], None]) -> None:
        """The causal-load rule (after set_stamper): an aligned L1 load of a line stamped later than the core's cycle
        takes its value from `past(addr, size, signed, pos, waits=True)` (the bus's record of what the load would have
        read at the core's cycle; waits=False: a probe's read, which must not move the core's time); an atomic or a
        misaligned load there calls `wait(addr, pos)` (the core waits for the write) instead. The translated blocks
        test the stamp inline against SBASE, a lower bound of the core's cycle at position 0, so that most loads make
        no call; the native runner hands such a load back to them. Blocks already translated keep what they were
        translated with."""
        self._ns.update(PAST=past, SWAIT=wait, STAMPS=self.stamps, SBASE=0)

    def reset(self, pc: int) -> None:
        self.pc = pc
        self.parked = False
        self._blocks.clear()
        self._pieces.clear()
        self._probe_blocks.clear()

    def run(self, budget: int) -> int:
        """Execute about `budget` instructions (may overshoot by one block); returns how many retired. Returns early
        with `spinning` set once the core is seen in a wait loop that nothing but another agent can end."""
        if self.native is not None:
            return self.native.run(budget)
        return self.run_blocks(budget)

    def run_blocks(self, budget: int) -> int:
        """run() on the translated Python blocks (the reference; the native runner also takes it where it is faster)."""
        if self.parked:
            return 0
        blocks = self._blocks
        pc = self.pc
        done = 0
        x = self.x
        self.spinning = False
        if "PAST" in self._ns:
            self._ns["SBASE"] = self.stamp_base()
        spin_pc, spin_x, chain = -1, None, 0
        try:
            while done < budget:
                block = blocks.get(pc)
                if block is None:
                    block = self._translate(pc)
                fn, n, pure = block
                # spin detection: a chain of pure blocks that comes back to where it started with every register
                # unchanged will repeat forever until some other agent writes memory or MMIO state
                if not pure:
                    spin_pc = -1
                elif pc == spin_pc and x == spin_x:
                    self.spinning = True
                    break
                elif spin_pc < 0 or chain > SPIN_CHAIN or pc == spin_pc:
                    spin_pc, spin_x, chain = pc, x[:], 0
                else:
                    chain += 1
                pc = fn(done)          # on an exception pc still names the block's start, self.pc the culprit
                done += n
        except Stall:
            done += (self.pc - pc) >> 2
            pc = self.pc
        except _Parked:
            done += ((self.pc - pc) >> 2) + 1    # the `j .` itself retires once
            pc = self.pc
            self.parked = True
        except BaseException:
            self.instret += done + ((self.pc - pc) >> 2)
            self.pos = 0
            raise
        self.pc = pc
        self.instret += done
        self.pos = 0
        return done

    def spin_reads(self, seen_at: int | None = None) -> tuple | None:
        """What one turn of the wait loop at `pc` reads, for a core that run() stopped there `spinning`: the loop's
        pure blocks run again on a copy of the registers, with L1 views that log each read and the bus's `peek` (a
        register read without effect, None where a read has one) for other loads. Returns (the words read, as
        (address, size), in order: L1 words, and registers the bus could peek; the first address it could not, None
        if none: the turn stops there), or None when the loop does not come back to `pc` with the same registers
        within SPIN_CHAIN + 2 blocks or does something else (a misaligned access, a CSR, an illegal word).
        Local RAM reads are not listed (only the core itself writes its local RAM). With `seen_at` (a cycle: tile.py
        _freeze under the causal-load rule) the C probe may add a third item to a turn that comes back: the words
        read as they were at that cycle (tile.py _peek_words' answer, in the same call)."""
        if self._probe is None:
            log: list[tuple[int, int]] = []
            peek = getattr(self.bus, "peek", None)

            def load(addr: int, size: int, _signed: bool) -> int:
                value = peek(self.name, addr) if peek is not None and self._region(addr, size) is None else None
                if value is None:
                    raise _OtherRead(addr)
                log.append((addr, size))
                return value
            # a store the turn reaches through the bus (MMIO: a semaphore's SEMGET, an NIU command) stops it like a
            # push: the probe must not act (a turn that leaves the loop because a post landed would take it twice)
            ns = dict(self._ns, x=[0] * 32, C=_ProbeCore(), LOAD=load, FAIL=_probe_stop, AMO=_probe_stop,
                      CSR=_probe_stop, SWAIT=_no_wait, PUSH=_probe_stop, PUSHP=_probe_stop, PUSHM=_probe_stop,
                      STORE=_probe_stop)
            if "PAST" in ns:      # the loop's reads see what the core's saw, and take no time
                ns["PAST"] = lambda addr, size, signed, pos, _past=ns["PAST"]: _past(addr, size, signed, pos, False)
            for name, size in (("L1B", 1), ("L1b", 1), ("L1H", 2), ("L1h", 2), ("L1W", 4)):
                ns[name] = _LoggedView(self._ns[name], size, log)
            self._probe = ns, log
        ns, log = self._probe
        if self.native is not None:
            answer = self.native.spin_reads(ns.get("SBASE"), seen_at)
            if answer is not NotImplemented:
                return answer
        regs = ns["x"]
        regs[:] = self.x
        log.clear()
        pc = self.pc
        try:
            for _ in range(SPIN_CHAIN + 2):
                fn = self._probe_blocks.get(pc)
                if fn is None:
                    fn = self._probe_blocks[pc] = self._compiled(pc, MAX_BLOCK, ns)[0]
                pc = fn(0)
                if pc == self.pc and regs == self.x:
                    return list(dict.fromkeys(log)), None
        except _OtherRead as e:
            if e.addr is not None and self._region(e.addr, 1) is None:
                return list(dict.fromkeys(log)), e.addr
        return None

    # ------------------------------------------------------------------ slow paths (called from generated code)

    def _region(self, addr: int, size: int) -> tuple[memoryview, int] | None:
        """(memory, offset) if [addr, addr+size) lies in L1 or local RAM; None for MMIO; EmuUndefined if it straddles."""
        if addr < L1_SIZE:
            if addr + size <= L1_SIZE:
                return self._l1, addr
        elif LOCAL_BASE <= addr < LOCAL_BASE + self.local_size:
            if addr + size <= LOCAL_BASE + self.local_size:
                return self._local, addr - LOCAL_BASE
        else:
            return None
        raise EmuUndefined(f"{self.name}: {size}-byte access at 0x{addr:08x} crosses the end of its memory region")

    def _slow_load(self, addr: int, size: int, signed: bool) -> int:
        region = self._region(addr, size)
        if region is None:
            value = self.bus.mmio_load(self.name, addr, size) & ((1 << (8 * size)) - 1)
        else:
            mem, off = region
            value = int.from_bytes(mem[off:off + size], "little")
            if mem is self._l1 and "SWAIT" in self._ns:
                self._ns["SWAIT"](addr, self.pos)
        return _sext(value, 8 * size) & M32 if signed else value

    def _slow_store(self, addr: int, size: int, value: int) -> None:
        value &= (1 << (8 * size)) - 1
        region = self._region(addr, size)
        if region is None:
            self.bus.mmio_store(self.name, addr, size, value)
        else:
            mem, off = region
            if mem is self._l1 and self.stamper is not None:
                self.stamper(addr, self.pos)
            mem[off:off + size] = value.to_bytes(size, "little")

    def _amo(self, funct5: int, addr: int, src: int) -> int:
        name = _AMO[funct5]
        if addr & 3 or addr >= L1_SIZE:
            raise EmuUnspecified(f"{self.name}: {name}.w at 0x{addr:08x}: atomics need an aligned L1 address")
        words = self._ns["L1W"]
        old = words[addr >> 2]
        if "SWAIT" in self._ns:
            self._ns["SWAIT"](addr, self.pos)
        if name == "amoadd":
            new = (old + src) & M32
        elif name == "amoswap":
            new = src
        elif name == "amoxor":
            new = old ^ src
        elif name == "amoand":
            new = old & src
        elif name == "amoor":
            new = old | src
        elif name in ("amomin", "amomax"):
            pick_min = name == "amomin"
            new = old if ((_sx(old) < _sx(src)) == pick_min) else src
        else:
            pick_min = name == "amominu"
            new = old if ((old < src) == pick_min) else src
        if self.stamper is not None:
            self.stamper(addr, self.pos)
        words[addr >> 2] = new
        return old

    def _csr_op(self, funct3: int, csr: int, src: int, reads: bool, writes: bool, retired: int) -> int:
        """csrrw/csrrs/csrrc (+ immediate forms). `retired` = instructions this run() retired before this one."""
        old = 0
        if reads:
            if csr in _COUNTERS:
                old = ((self.instret + retired) >> _COUNTERS[csr]) & M32
            elif csr in _CSR_READ_ONLY:
                old = _CSR_READ_ONLY[csr]
            elif csr in self.csr:
                old = self.csr[csr]
            else:
                raise EmuUnimplemented(f"{self.name}: read of CSR 0x{csr:03x} is not modelled")
        if writes:
            op = funct3 & 3
            new = src if op == 1 else (old | src) if op == 2 else (old & ~src & M32)
            if csr in self.csr:
                self.csr[csr] = new       # cfg0 (0x7C0) and scratch CSRs: stored, no effect on execution
            elif csr not in _CSR_READ_ONLY:
                raise EmuUnimplemented(f"{self.name}: write of CSR 0x{csr:03x} is not modelled")
        return old

    def _fail(self, pc: int, word: int, what: str, unimplemented: bool = False) -> None:
        kind = EmuUnimplemented if unimplemented else EmuUndefined
        raise kind(f"{self.name}: {what} (word 0x{word:08x}) at pc 0x{pc:08x}")

    # ------------------------------------------------------------------ translation

    def _translate(self, pc: int) -> tuple[Callable[[int], int], int, bool]:
        fn, count, pure, _, _ = self._compiled(pc, MAX_BLOCK)
        block = self._blocks[pc] = (fn, count, pure)
        return block

    def piece(self, pc: int, n: int) -> tuple[Callable[[int], int], tuple[int, ...], tuple[int, ...]]:
        """The n instructions at `pc` translated alone, as the native runner hands them back (accel/rv32_native.py):
        (function(done) -> next pc, the registers it reads from `x`, the registers it writes there). n > 1 only for
        a run of `.ttinsn` words, which the function pushes as the block would (one PUSHM call)."""
        piece = self._pieces.get((pc, n))
        if piece is None:
            fn, _, _, loaded, dirty = self._compiled(pc, n)
            piece = self._pieces[(pc, n)] = (fn, loaded, dirty)
        return piece

    def _compiled(self, pc: int, limit: int, ns: dict | None = None) -> tuple[Callable[[int], int], int, bool,
                                                                          tuple[int, ...], tuple[int, ...]]:
        """The translation of at most `limit` instructions from `pc` (a block ends sooner at a branch or jump):
        (function, instruction count, pure, registers read, registers written); the function's globals are `ns`
        (default: the core's namespace)."""
        key = None
        if SHARE_TRANSLATIONS and 0 <= pc < L1_SIZE:
            key = (pc, self.local_size, "PUSHM" in self._ns, "PUSHP" in self._ns,
                   self._l1[pc:min(pc + 4 * limit, L1_SIZE)].tobytes(), limit, "STAMP" in self._ns,
                   "SWAIT" in self._ns)
        shared = SHARED_BLOCKS.get(key) if key is not None else None
        if shared is None:
            name, bw = self._written(pc, limit)
            shared = (name, compile(bw.source(name), f"<{name}>", "exec"), bw.count, bw.pure, tuple(sorted(bw.loaded)),
                      tuple(bw.dirty))
            if key is not None:
                if len(SHARED_BLOCKS) >= TRANSLATIONS_KEPT:
                    SHARED_BLOCKS.clear()
                SHARED_BLOCKS[key] = shared
        name, code, count, pure, loaded, dirty = shared
        ns = self._ns if ns is None else ns
        exec(code, ns)
        return ns.pop(name), count, pure, loaded, dirty

    def block_source(self, pc: int) -> tuple[str, str, int, bool]:
        """(function name, generated Python source, instruction count, pure) of the block starting at `pc`; pure: the
        block stores nothing, pushes nothing, writes no CSR (debug aid and spin detection)."""
        name, bw = self._written(pc, MAX_BLOCK)
        return name, bw.source(name), bw.count, bw.pure

    def _written(self, pc: int, limit: int) -> tuple[str, _BlockWriter]:
        """The function name and the filled _BlockWriter of at most `limit` instructions from `pc`."""
        if pc & 3 or not 0 <= pc < L1_SIZE:
            self.pc = pc
            raise EmuUndefined(f"{self.name}: instruction fetch from 0x{pc:08x} (only aligned L1 addresses are "
                               f"executable)")
        words = self._ns["L1W"]
        bw = _BlockWriter(pc)
        addr = pc
        multi = "PUSHM" in self._ns
        while not bw.ended and bw.count < limit and addr < L1_SIZE:
            if multi:                          # a run of `.ttinsn` words: one PUSHM call pushing them in order
                end = addr
                while end < L1_SIZE and (end - pc) >> 2 < limit and words[end >> 2] & 3 != 3:
                    end += 4
                n = (end - addr) >> 2
                if n > 1:
                    bw.pure = False
                    for i in range(n):         # a word of the run that raises: registers as before the run
                        bw.risky[bw.count + i] = list(bw.dirty)
                    bw.runs.append(bw.count)
                    run = ", ".join(f"{from_ttinsn(words[a >> 2]):#x}" for a in range(addr, end, 4))
                    bw.emit(f"k = {bw.count}; PUSHM(done + {bw.count}, ({run}))")
                    bw.count += n
                    addr = end
                    continue
            self._emit(bw, addr, words[addr >> 2])
            bw.count += 1
            addr += 4
        if not bw.ended:                       # hit the length cap or the end of L1: continue at the next block
            bw.emit(bw.flush())
            bw.emit(f"return {addr:#x}")
        return f"block_{pc:05x}", bw

    def _emit(self, bw: _BlockWriter, pc: int, w: int) -> None:
        """Append the Python source for instruction word `w` at `pc`."""
        op = w & 0x7F
        rd, f3, rs1, rs2, f7 = (w >> 7) & 31, (w >> 12) & 7, (w >> 15) & 31, (w >> 20) & 31, w >> 25
        emit = bw.emit

        def fail(what: str, unimplemented: bool = False) -> None:
            emit(f"{bw.may_raise()}; FAIL({pc:#x}, {w:#x}, {what!r}, {unimplemented})")
            bw.ended = True

        if w & 3 != 3:                                           # .ttinsn: push a Tensix instruction
            bw.pure = False
            mark = bw.may_raise()
            if "PUSHP" in self._ns:       # the bus's per-core pusher takes the position instead of reading C.pos
                emit(f"k = {bw.count}; PUSHP(done + {bw.count}, {from_ttinsn(w):#x})")
            else:
                emit(f"{mark}; PUSH(NAME, {from_ttinsn(w):#x})")
        elif op == 0x33:                                         # R-type ALU / M / Zba / Zbb
            expr = _OP_R.get((f7, f3))
            if expr is None:
                return fail("illegal instruction")
            a, b = bw.r(rs1), bw.r(rs2)
            if rd:
                emit(f"{bw.w(rd)} = {expr.format(a=a, b=b)}")
        elif op == 0x13:                                         # I-type ALU
            imm = _imm_i(w)
            if f3 in _OP_I:
                a = bw.r(rs1)
                if not rd:
                    return
                if f3 == 0 and imm == 0:
                    emit(f"{bw.w(rd)} = {a}")                    # mv
                else:
                    emit(f"{bw.w(rd)} = {_OP_I[f3].format(a=a, i=imm, u=imm & M32)}")
            else:
                expr = _OP_SHIFT_I.get((f3, f7))
                if expr is not None:
                    text = expr.format(a=bw.r(rs1), s=rs2)
                else:
                    expr = _OP_UNARY.get((f3, w >> 20))
                    if expr is None:
                        return fail("illegal instruction")
                    text = expr.format(a=bw.r(rs1))
                if rd:
                    emit(f"{bw.w(rd)} = {text}")
        elif op == 0x03:                                         # loads
            if f3 not in _LOADS:
                return fail("illegal load")
            size, signed, view, fix = _LOADS[f3]
            a = bw.r(rs1)
            mark = bw.may_raise()                  # before rd becomes dirty: a stalled load leaves rd untouched
            dest = bw.w(rd) if rd else "_"
            # the causal-load rule (set_stamp_wait): an L1 line written later than the core's cycle reads as it was
            k = bw.count
            past = (f"; {dest} = PAST(a, {size}, {signed}, done + {k}) if STAMPS[a >> {STAMP_SHIFT}] > SBASE + done"
                    f" + {k} else {dest}" if "PAST" in self._ns else "")
            self._emit_access(bw, a, _imm_i(w), size, mark,
                              fast=lambda mem, idx: f"{dest} = {mem}{view}[{idx}]{fix}" + (past if mem == "L1" else ""),
                              slow=f"{dest} = LOAD(a, {size}, {signed})", stack=rs1 in (2, 8))
        elif op == 0x23:                                         # stores
            if f3 not in _STORES:
                return fail("illegal store")
            size, view, mask = _STORES[f3]
            bw.pure = False
            val = bw.r(rs2)
            # stamped before the store: the bus's write log keeps the word it replaces (set_stamper)
            stamp = f"STAMP(a, done + {bw.count}); " if "STAMP" in self._ns else ""
            self._emit_access(bw, bw.r(rs1), _imm_s(w), size, bw.may_raise(),
                              fast=lambda mem, idx: (stamp if mem == "L1" else "")
                                                    + f"{mem}{view}[{idx}] = {val}{mask if val != '0' else ''}",
                              slow=f"STORE(a, {size}, {val})", stack=rs1 in (2, 8))
        elif op == 0x37:                                         # lui
            if rd:
                emit(f"{bw.w(rd)} = {w & 0xFFFFF000:#x}")
        elif op == 0x17:                                         # auipc
            if rd:
                emit(f"{bw.w(rd)} = {(pc + (w & 0xFFFFF000)) & M32:#x}")
        elif op == 0x63:                                         # branches
            if f3 not in _BRANCH:
                return fail("illegal branch")
            target = (pc + _imm_b(w)) & M32
            cond = _BRANCH[f3].format(a=bw.r(rs1), b=bw.r(rs2))
            emit(bw.flush())
            emit(f"return {target:#x} if {cond} else {pc + 4:#x}")
            bw.ended = True
        elif op == 0x6F:                                         # jal
            target = (pc + _imm_j(w)) & M32
            if target == pc and rd == 0:                         # `j .`: park
                emit(bw.flush())
                emit(f"k = {bw.count}; raise Parked")
                bw.risky[bw.count] = list(bw.dirty)
            else:
                if rd:
                    emit(f"{bw.w(rd)} = {pc + 4:#x}")
                emit(bw.flush())
                emit(f"return {target:#x}")
            bw.ended = True
        elif op == 0x67 and f3 == 0:                             # jalr (target read before the link write)
            emit(f"t = ({bw.r(rs1)} + {_imm_i(w)}) & 0xFFFFFFFE")
            if rd:
                emit(f"{bw.w(rd)} = {pc + 4:#x}")
            emit(bw.flush())
            emit("return t")
            bw.ended = True
        elif op == 0x0F:                                         # fence (no-op) / fence.i
            if f3 == 0:
                emit("pass")
            elif f3 == 1:
                return fail("fence.i is not supported (code in L1 is translated once per reset)")
            else:
                return fail("illegal MISC-MEM instruction")
        elif op == 0x73:                                         # SYSTEM: CSRs, ecall/ebreak/mret
            if f3 in (1, 2, 3, 5, 6, 7):
                csr = w >> 20
                src = str(rs1) if f3 >= 5 else bw.r(rs1)
                writes = f3 in (1, 5) or rs1 != 0                # csrrs/csrrc with x0 / zero immediate only read
                reads = f3 not in (1, 5) or rd != 0              # csrrw with rd = x0 does not read
                bw.pure = bw.pure and not writes
                mark = bw.may_raise()
                target = bw.w(rd) if rd else "_"
                emit(f"{mark}; {target} = CSR({f3}, {csr:#x}, {src}, {reads}, {writes}, done + {bw.count})")
            else:
                if w == 0x30200073:
                    return fail("mret (interrupts are not modelled)", unimplemented=True)
                names = {0x00000073: "ecall", 0x00100073: "ebreak"}
                return fail(f"{names.get(w, 'illegal SYSTEM instruction')} is not supported", unimplemented=w in names)
        elif op == 0x2F and f3 == 2 and (w >> 27) in _AMO:      # Zaamo
            src, addr = bw.r(rs2), bw.r(rs1)
            bw.pure = False
            mark = bw.may_raise()
            target = bw.w(rd) if rd else "_"
            emit(f"{mark}; {target} = AMO({w >> 27}, {addr}, {src})")
        elif op in _UNMODELLED:
            return fail(f"{_UNMODELLED[op]} is not modelled", unimplemented=True)
        else:
            return fail("illegal instruction")

    def _emit_access(self, bw: _BlockWriter, b: str, imm: int, size: int, mark: str,
                     fast: Callable[[str, str], str], slow: str, stack: bool) -> None:
        """Address computation + L1/local fast paths (aligned only) + slow path (misaligned, MMIO)."""
        bw.emit(f"a = ({b} + {imm}) & 0xFFFFFFFF" if imm else f"a = {b}")
        shift = {1: 0, 2: 1, 4: 2}[size]
        aligned = f" and not a & {size - 1}" if size > 1 else ""
        l1_idx = f"a >> {shift}" if shift else "a"
        local_idx = f"(a - {LOCAL_BASE:#x}) >> {shift}" if shift else f"a - {LOCAL_BASE:#x}"
        l1_test = f"if a < {L1_SIZE:#x}{aligned}: {fast('L1', l1_idx)}"
        local_test = f"if {LOCAL_BASE:#x} <= a < {LOCAL_BASE + self.local_size:#x}{aligned}: {fast('LC', local_idx)}"
        # sp/fp-relative accesses are almost always to the stack in local RAM: test that first
        first, second = (local_test, l1_test) if stack else (l1_test, local_test)
        bw.emit(first)
        bw.emit("el" + second)
        bw.emit(f"else: {mark}; {slow}")
