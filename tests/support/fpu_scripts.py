"""Builders for the FPU differential tests: the script player's ELFs and the unpack -> FPU -> pack instruction lists of
docs/fpu_path.md §3, 8 and 9 (our own sequences, re-encoded with chip.isa), plus inputs biased to specials.

A case = three per-thread command lists (see player.c) + input tiles; `run_case(device, case)` returns the packed FP32
output bytes. The same case runs on EmuDevice and TtsimDevice and the bytes must be identical.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

import numpy as np

from tt_backend.chip.isa import encode

from tests.support import harness, programs
from tests.support.words import setc16

A_BASE, B_BASE, OUT_BASE = 0x20000, 0x30000, 0x40000
LISTS = (0x60000, 0x68000, 0x70000)
FLAG = 0x1F100
BF16, TF32, FP16, INT8 = "bf16", "tf32", "fp16", "int8"
# Src format -> (L1 in format, Src out format, cfg1 with an FP32/INT32 Dst, cfg1 with a 16-bit Dst or None)
# cfg1 = SrcA[20:17] | SrcB[24:21] | Dstacc[28:25] | Fp32_enabled[29] | INT8_math_enabled[31]
FORMATS = {BF16: (5, 5, 0x20AA0000, 0x0AAA0000), TF32: (0, 4, 0x20880000, 0x0A880000),
           FP16: (1, 1, 0x20220000, 0x02220000), INT8: (14, 14, 0xB1DC0000, None)}
PHASES = {"LoFi": 1, "HiFi2": 2, "HiFi3": 3, "HiFi4": 4}


# ---------------------------------------------------------------------------------------------------- ELFs
def player_elfs() -> dict[str, bytes]:
    return {f"trisc{i}": _compile_player(i) for i in range(3)}


def _compile_player(i: int) -> bytes:
    return programs.compile_prog("fpu/player.c", f"trisc{i}", defines={"PLAYER_CORE": i})


# ---------------------------------------------------------------------------------------------------- scripts
class Script:
    def __init__(self):
        self.w: list[int] = []

    def push(self, *words):
        for w in words:
            self.w += [1, w & 0xFFFFFFFF]
        return self

    def cfg(self, i, v):
        self.w += [2, i, v & 0xFFFFFFFF]
        return self

    def sync(self):
        self.w.append(3)
        return self

    def store(self, a, v):
        self.w += [4, a, v]
        return self

    def wait(self, a, v):
        self.w += [5, a, v]
        return self

    def blob(self) -> bytes:
        n_push = self.w.count(1)
        if n_push > 480:
            raise ValueError(f"{n_push} pushes: ttsim's pipe FIFO (512) could overflow")
        return struct.pack(f"<{len(self.w) + 1}I", *self.w, 0)


@dataclass
class Case:
    name: str
    fmt: str                                     # Src format of both operands
    math: list[int]                              # math thread words per tile (between ZEROACC and SEMPOST)
    a: np.ndarray                                # (n_tiles, 1024) L1 words: uint16 (bf16) or uint32 (tf32)
    b: np.ndarray
    math_setup: list[int] = field(default_factory=list)
    cfg_extra: dict[int, int] = field(default_factory=dict)
    dst16: bool = False                          # BF16 Dst (Fp32_enabled = 0), packed from Dst16b to BF16 L1

    @property
    def n_tiles(self) -> int:
        return len(self.a)


def scripts(case: Case, run_id: int) -> list[Script]:
    t0, t1, t2 = Script(), Script(), Script()
    in_fmt, out_fmt, cfg1, cfg1_16 = FORMATS[case.fmt]
    desc = 0x04000010 | in_fmt
    cfg = {1: cfg1, 2: 0,
           64: desc, 65: 0x00010001, 72: out_fmt, 73: 0xF, 76: A_BASE // 16 - 1, 84: 0x00400040, 86: 0x04000400,
           92: 0, 50: 0, 112: desc, 113: 0x00010001, 120: out_fmt, 121: 0xF, 124: B_BASE // 16 - 1, 59: 0,
           12: 0x00400004, 14: 0x10000000, 13: 0, 15: 0, 18: 1, 24: 0xFFFF, 28: 0x1000, 69: OUT_BASE // 16 - 1,
           70: 0x1, 180: 0}
    if case.dst16:      # Dstacc = BF16, Fp32_enabled = 0; packer BF16 -> BF16 from Dst16b (32 B per Dst row)
        cfg.update({1: cfg1_16, 12: 0x00200002, 14: 0x08000000, 18: 0, 70: 0x111 if case.fmt == FP16 else 0x551})
    if case.fmt == INT8:  # INT32 Dst packed as INT32
        cfg[70] = 0x881
    cfg.update(case.cfg_extra)
    for i, v in cfg.items():
        t0.cfg(i, v)
    t0.push(setc16(0, 0), encode("SEMINIT", sem_sel=1, init_value=0, max_value=8))
    t0.sync().store(FLAG, run_id)
    t0.push(setc16(5, 4), setc16(41, 0), 0x5160000A, 0x5460000F, 0x5E6FFC00)
    for _ in range(case.n_tiles):
        t0.push(0x420080C1, 0x428080C1)
    t0.sync()

    t1.wait(FLAG, run_id)
    t1.push(setc16(0, 0), setc16(7, 0), setc16(19, 0), setc16(35, 0), *case.math_setup)
    for t in range(case.n_tiles):
        t1.push(0xA6200006, setc16(1, 64 * t), 0x3700000F)
        t1.push(*[encode("ZEROACC", clear_mode=1, use_32_bit_mode=0 if case.dst16 else 1, addr_mode=7,
                         where=4 * t + f) for f in range(4)])
        t1.push(*case.math)
        t1.push(0xA2010010, 0xA4000004)
    t1.sync()

    t2.wait(FLAG, run_id)
    t2.push(setc16(0, 0), setc16(37, 0x0004), setc16(38, 0x0044), 0x5180000A, 0x5480000F, 0x5E803C00)
    for _ in range(case.n_tiles):
        t2.push(0xA6020005, *[0x41000000] * 15, 0x41008001, 0xA2010008, 0xA5000004)
    t2.sync()
    return [t0, t1, t2]


def run_case(device, case: Case, run_id: int = 1) -> bytes:
    n = case.n_tiles
    a = np.ascontiguousarray(case.a).reshape(-1)
    b = np.ascontiguousarray(case.b).reshape(-1)
    device.write_l1(A_BASE, a.tobytes())
    device.write_l1(B_BASE, b.tobytes())
    device.write_l1(OUT_BASE, bytes(4096 * n))
    device.write_l1(FLAG, bytes(4))
    for base, s in zip(LISTS, scripts(case, run_id)):
        device.write_l1(base, s.blob())
    harness.run_on(device, player_elfs(), list(LISTS), generation=run_id, step=5000, max_clocks=20_000_000)
    return device.read_l1(OUT_BASE, 4096 * n)


# ---------------------------------------------------------------------------------------------------- math words
def elwmul_words(n_phases: int, mod: int = 0) -> tuple[list[int], list[int]]:
    """docs/fpu_path.md §8.2 phases inner: per 8-row block (n-1) x ELWMUL slot 0 (phase += 1), 1 x slot 1 (next block,
    phase := 0); the last ELWMUL releases both banks."""
    setup = [setc16(12, 0x0000), setc16(28, 0x2000), setc16(13, 0x0808), setc16(29, 0x8008)]
    words = []
    for blk in range(8):
        words += [encode("ELWMUL", addr_mode=0, instr_mod19=mod)] * (n_phases - 1)
        words.append(encode("ELWMUL", addr_mode=1, instr_mod19=mod, clear_dvalid=3 if blk == 7 else 0))
    return setup, words


def elwmul_phases_outer_words(n_phases: int) -> tuple[list[int], list[int]]:
    """docs/fpu_path.md §8.2 phases outer: per phase 7 x slot 2 (next block) + slot 3 (back to the tile start, phase += 1);
    the very last uses slot 4 (all to 0) and releases the banks."""
    setup = [setc16(14, 0x0808), setc16(30, 0x0008), setc16(15, 0x8080), setc16(31, 0x2400),
             setc16(16, 0x8080), setc16(32, 0x8800)]
    words = []
    for p in range(n_phases):
        words += [encode("ELWMUL", addr_mode=2)] * 7
        last = p == n_phases - 1
        words.append(encode("ELWMUL", addr_mode=4 if last else 3, clear_dvalid=3 if last else 0))
    return setup, words


MVMUL_SETUP = [setc16(12, 0x0800), setc16(28, 0), setc16(13, 0x1800), setc16(29, 0), setc16(14, 0x1810),
               setc16(30, 0), setc16(15, 0x2810), setc16(31, 0), setc16(16, 0x8080), setc16(32, 0x2000)]
_MV_SLOTS = (0, 1, 0, 2, 0, 1, 0, 3, 0, 1, 0, 2, 0, 1, 0, 4)
_MV_DST = (0, 8, 32, 40, 16, 24, 48, 56) * 2


def mvmul_words(n_phases: int) -> tuple[list[int], list[int]]:
    """docs/fpu_path.md §8.5 / 9.3: 16 MVMULs per phase (k-face 0 then 1); slot 4 ends a phase (Src RWCs := 0, phase += 1)."""
    words = []
    for p in range(n_phases):
        for i in range(16):
            last = p == n_phases - 1 and i == 15
            words.append(encode("MVMUL", addr_mode=_MV_SLOTS[i], dst=_MV_DST[i], clear_dvalid=3 if last else 0))
    return MVMUL_SETUP, words


def elwadd_words(name: str, accum: int = 0, mod: int = 0) -> tuple[list[int], list[int]]:
    setup = [setc16(13, 0x0808), setc16(29, 0x8008)]
    words = [encode(name, addr_mode=1, dest_accum_en=accum, instr_mod19=mod, clear_dvalid=3 if blk == 7 else 0)
             for blk in range(8)]
    return setup, words


# ---------------------------------------------------------------------------------------------------- inputs
def special_f32(rng, n: int, wide: bool = True) -> np.ndarray:
    """fp32 bit patterns: mostly normal numbers with exponents around 1 (|e| <= 8), the rest biased to specials:
    +-0, denormals, Inf, NaN, max/min normal, full-range exponents, exact powers of two, all-ones mantissas."""
    sign = rng.integers(0, 2, n, dtype=np.uint32) << 31
    exp = rng.integers(127 - 8, 127 + 9, n).astype(np.uint32)
    man = rng.integers(0, 1 << 23, n, dtype=np.uint32)
    kind = rng.random(n)
    exp = np.where(kind < 0.06, 0, exp)                                          # zero / denormal
    man = np.where(kind < 0.03, 0, man)
    exp = np.where((kind >= 0.06) & (kind < 0.09), 255, exp)                     # Inf / NaN
    man = np.where((kind >= 0.06) & (kind < 0.075), 0, man)
    if wide:
        big = (kind >= 0.09) & (kind < 0.2)
        exp = np.where(big, rng.integers(1, 255, n).astype(np.uint32), exp)     # anywhere (overflow/underflow)
        exp = np.where((kind >= 0.2) & (kind < 0.23), rng.choice([1, 2, 254, 253], n).astype(np.uint32), exp)
    man = np.where((kind >= 0.23) & (kind < 0.27), 0, man)                       # powers of two
    man = np.where((kind >= 0.27) & (kind < 0.30), 0x7FFFFF, man)               # all-ones mantissa
    return (sign | (exp << 23) | man).astype(np.uint32)


def tile_inputs(rng, fmt: str, n_tiles: int, wide: bool = True) -> np.ndarray:
    x = special_f32(rng, 1024 * n_tiles, wide).reshape(n_tiles, 1024)
    if fmt == BF16:
        return (x >> 16).astype(np.uint16)
    if fmt == FP16:
        return fp16_specials(rng, x.shape)
    if fmt == INT8:
        return rng.integers(0, 256, x.shape).astype(np.uint8)
    # FP32 words into the TF32 path; most already TF32 (low 13 bits zero), some not (the unpacker truncates)
    keep = rng.random(x.shape) < 0.15
    return np.where(keep, x, x & 0xFFFFE000).astype(np.uint32)


def fp16_specials(rng, shape) -> np.ndarray:
    """FP16 bit patterns around 1 (exponents 15 +- 5), 15% specials: +-0, denormals, exponent 31 (a normal binade on
    Tensix), extreme exponents."""
    sign = rng.integers(0, 2, shape).astype(np.uint16) << 15
    exp = rng.integers(10, 21, shape).astype(np.uint16)
    man = rng.integers(0, 1024, shape).astype(np.uint16)
    kind = rng.random(shape)
    exp = np.where(kind < 0.05, 0, exp)
    man = np.where(kind < 0.025, 0, man)
    exp = np.where((kind >= 0.05) & (kind < 0.08), 31, exp)
    exp = np.where((kind >= 0.08) & (kind < 0.15), rng.choice([1, 2, 29, 30], shape), exp)
    return (sign | (exp.astype(np.uint16) << 10) | man).astype(np.uint16)


def inputs(sd, fmt, n_tiles=4, wide=True):
    """Two operands of n_tiles tiles each, biased to specials, from seed sd."""
    rng = np.random.default_rng(sd)
    return tile_inputs(rng, fmt, n_tiles, wide), tile_inputs(rng, fmt, n_tiles, wide)


def mild_inputs(sd, fmt, n_tiles=4):
    """Mostly normal data (1 in 64 special), so MVMUL dot products are finite and exercise the group alignment."""
    rng = np.random.default_rng(sd)
    out = []
    for _ in range(2):
        x = special_f32(rng, 1024 * n_tiles, wide=False)
        clean = rng.random(x.shape) < 63 / 64
        normal = ((rng.integers(0, 2, x.shape, dtype=np.uint32) << 31) |
                  (rng.integers(127 - 6, 127 + 7, x.shape).astype(np.uint32) << 23) |
                  rng.integers(0, 1 << 23, x.shape, dtype=np.uint32))
        x = np.where(clean, normal, x).reshape(n_tiles, 1024)
        out.append((x >> 16).astype(np.uint16) if fmt == BF16 else (x & 0xFFFFE000).astype(np.uint32))
    return out
