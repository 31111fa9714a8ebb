"""KernelPlan: everything the templates need to render the five C99 sources of one kernel.

The frontend fills it from a tinygrad AST; `allocate_l1` places circular buffers and staging windows; the renderer
turns it into C; the runtime launches it with `arg_words`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from templates import layout

TILE_ELEMS = 1024                       # a 32x32 tile; for elementwise kernels tile t holds flat elements 1024t..
TILE_BYTES = {"fp32": 4 * TILE_ELEMS, "bf16": 2 * TILE_ELEMS}
DTYPE_SIZE = {"float32": 4, "bfloat16": 2, "int32": 4, "bool": 1}
TILE_FORMAT_OF = {"float32": "fp32", "int32": "fp32", "bool": "fp32", "bfloat16": "bf16"}


@dataclass
class SfpuProgram:
    setup: list[int]        # Tensix words run once per tile before the row loop
    body: list[int]         # Tensix words for one 32-lane row step; the last is an SFPSTORE with sfpu_addr_mode=1
    dst_slots: int          # Dst32b tile slots used (inputs + output + spills), <= 8
    out_slot: int           # Dst slot the output tile is written to


@dataclass
class Buffer:
    slot: int               # tinygrad parameter position
    dtype: str
    nbytes: int


@dataclass
class Stream:
    buf: int                # index into KernelPlan.buffers
    dtype: str              # element dtype in DRAM
    index_c: str            # C expression over uint32 r0..r{n-1}: element index into the buffer
    valid_c: str | None = None   # C expression, false -> element reads as 0 (pads); never read out of bounds
    contiguous: bool = False     # index == flat iteration index, always valid: bulk NoC copy, no gather

    @property
    def tile_format(self) -> str:
        return TILE_FORMAT_OF[self.dtype]


@dataclass
class KernelPlan:
    name: str
    ranges: tuple[int, ...]             # iteration space, outermost first; flat index = row-major over ranges
    buffers: list[Buffer]
    inputs: list[Stream]                # input j is unpacked into Dst32b slot j
    output: Stream
    sfpu: SfpuProgram
    ops: list[str] = field(default_factory=list)   # for reports
    l1: dict[str, int] = field(default_factory=dict)  # filled by allocate_l1

    @property
    def n_elements(self) -> int:
        return math.prod(self.ranges) if self.ranges else 1

    @property
    def n_tiles(self) -> int:
        return max(1, -(-self.n_elements // TILE_ELEMS))

    # argument block: [n_tiles, n_elements, dram address of each buffer...]
    def arg_words(self, dram_addrs: list[int]) -> list[int]:
        if len(dram_addrs) != len(self.buffers):
            raise ValueError(f"{self.name}: {len(self.buffers)} buffers, got {len(dram_addrs)} addresses")
        return [self.n_tiles, self.n_elements, *dram_addrs]


CB_DEPTH = 2                    # tiles per circular buffer (double buffering)
STAGING_BYTES = 32 * 1024       # per gathered stream: a window of the source buffer in L1


def allocate_l1(plan: KernelPlan) -> KernelPlan:
    """Place each stream's circular buffer (CB_DEPTH tiles) and, for gathered streams, a staging window."""
    addr = layout.DATA_BASE
    l1 = {}
    for name, s in [(f"in{j}", s) for j, s in enumerate(plan.inputs)] + [("out", plan.output)]:
        l1[f"cb_{name}"] = addr
        addr += CB_DEPTH * TILE_BYTES[s.tile_format]
        if not s.contiguous:
            l1[f"stage_{name}"] = addr
            addr += STAGING_BYTES
    if addr > layout.DATA_END:
        from templates.errors import UnsupportedOp
        raise UnsupportedOp(f"{plan.name}: {len(plan.inputs)} input streams need {addr - layout.DATA_BASE} bytes of "
                            f"L1, more than the {layout.DATA_END - layout.DATA_BASE} available")
    plan.l1 = l1
    return plan
