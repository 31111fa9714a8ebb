"""The tile's L1 map, core identities and MMIO addresses: one source for the driver, the emulator and the C headers.

Leaf module (stdlib and the leaf chip/interleave.py only). `c_header()` renders these constants into `tt_layout.h` for the kernels.
"""
from __future__ import annotations

from tt_backend.chip import interleave

L1_SIZE = 1536 * 1024

# cores in the order used everywhere (status words, reset bits, images)
CORES = ("brisc", "ncrisc", "trisc0", "trisc1", "trisc2")
SOFT_RESET_BIT = {"brisc": 11, "trisc0": 12, "trisc1": 13, "trisc2": 14, "ncrisc": 18}
ALL_CORES_RESET = sum(1 << b for b in SOFT_RESET_BIT.values())  # 0x47800, the power-on value
LOCAL_RAM_SIZE = {"brisc": 8192, "ncrisc": 8192, "trisc0": 4096, "trisc1": 4096, "trisc2": 4096}
STACK_TOP = {c: 0xFFB00000 + LOCAL_RAM_SIZE[c] for c in CORES}
DEFAULT_RESET_PC = {"brisc": 0x0, "trisc0": 0x6000, "trisc1": 0xA000, "trisc2": 0xE000, "ncrisc": 0x12000}

# L1 map
BRISC_VECTOR = 0x00000
LAUNCH_BLOCK = 0x00010          # +0 generation, +4 stop
LAUNCH_GENERATION = LAUNCH_BLOCK + 0
LAUNCH_STOP = LAUNCH_BLOCK + 4
STATUS_BASE = 0x00040           # per core 16 bytes: done, error, progress, spare
STATUS_STRIDE = 16
ARGS_BASE = 0x00100
ARGS_SIZE = 0x00F00
IMAGE_SLOT = {"brisc": 0x01000, "ncrisc": 0x05000, "trisc0": 0x09000, "trisc1": 0x0D000, "trisc2": 0x11000}
IMAGE_SLOT_SIZE = 0x4000
# Shared words between the cores of one kernel: +16*core start-up "ready" words (= generation), +0x100 + 64*k the
# control block (pushed/popped counters, one 16-byte line each) of circular buffer k (inputs 0..n-1, output n)
SYNC_BASE = IMAGE_SLOT["trisc2"] + IMAGE_SLOT_SIZE
SYNC_CB_OFFSET = 0x100
SYNC_CB_STRIDE = 64
MAX_CBS = 9
DATA_BASE = 0x20000             # circular buffers and staging windows from here up to L1_SIZE
DATA_END = L1_SIZE
assert SYNC_BASE + SYNC_CB_OFFSET + MAX_CBS * SYNC_CB_STRIDE <= DATA_BASE

# tile MMIO (RISC-V view; the host sees the same addresses)
MEM_LOCAL_BASE = 0xFFB00000
SOFT_RESET_0 = 0xFFB121B0
TRISC_RESET_PC = (0xFFB12228, 0xFFB1222C, 0xFFB12230)
TRISC_RESET_PC_OVERRIDE = 0xFFB12234
NCRISC_RESET_PC = 0xFFB12238
NCRISC_RESET_PC_OVERRIDE = 0xFFB1223C
WALL_CLOCK_LO = 0xFFB121F0
WALL_CLOCK_HI = 0xFFB121F4
NOC_BASE = (0xFFB20000, 0xFFB30000)
INSTRN_BUF_BASE = 0xFFE40000
MOP_CFG_BASE = 0xFFB80000       # the own thread's 9 MopCfg words (write-only)
MOP_CFG_WORDS = 9
PC_BUF_BASE = 0xFFE80000
TENSIX_SYNC = 0xFFE80004        # load: wait until this core's Tensix thread is idle
SEMAPHORE_BASE = 0xFFE80020     # + 4*i
TENSIX_CFG_BASE = 0xFFEF0000    # + 4*i config word i
REGFILE_BASE = 0xFFE00000       # Tensix GPRs (per thread, 64 x u32)
MAILBOX_BASE = 0xFFEC0000

# NoC coordinates (translated): this tile, and the DRAM bank that device programs addressing one bank themselves (the
# runtime's tests) use; kernels and buffers address every bank (chip/interleave.py)
TILE_XY = (1, 2)
DRAM_XY = (18, 12)
DRAM_BANK_SIZE = 1 << 32


def status_addr(core: str, word: int = 0) -> int:
    return STATUS_BASE + STATUS_STRIDE * CORES.index(core) + 4 * word


def c_header() -> str:
    names = {
        "L1_SIZE": L1_SIZE, "LAUNCH_GENERATION": LAUNCH_GENERATION, "LAUNCH_STOP": LAUNCH_STOP,
        "STATUS_BASE": STATUS_BASE, "STATUS_STRIDE": STATUS_STRIDE, "ARGS_BASE": ARGS_BASE, "ARGS_SIZE": ARGS_SIZE,
        "DATA_BASE": DATA_BASE, "DATA_END": DATA_END, "SOFT_RESET_0": SOFT_RESET_0,
        "INSTRN_BUF_BASE": INSTRN_BUF_BASE, "TENSIX_SYNC": TENSIX_SYNC, "SEMAPHORE_BASE": SEMAPHORE_BASE,
        "TENSIX_CFG_BASE": TENSIX_CFG_BASE, "REGFILE_BASE": REGFILE_BASE, "NOC0_BASE": NOC_BASE[0],
        "NOC1_BASE": NOC_BASE[1], "WALL_CLOCK_LO": WALL_CLOCK_LO, "TILE_X": TILE_XY[0], "TILE_Y": TILE_XY[1],
        **interleave.c_defines(),
    }
    lines = ["/* Generated from chip/layout.py: do not edit. */", "#ifndef TT_LAYOUT_H", "#define TT_LAYOUT_H"]
    lines += [f"#define TT_{k} 0x{v:X}u" for k, v in names.items()]
    for i, c in enumerate(CORES):
        lines.append(f"#define TT_CORE_{c.upper()} {i}")
    lines += ["#endif", ""]
    return "\n".join(lines)
