"""The plan: everything one kernel becomes before it is rendered, and the interface every kernel family's plan shares.

A family (lowering/families/) turns a kernel into a subclass of `Plan` carrying its own fields; the launcher
(tt_backend.ops_tt), the report (tt_backend.dump) and `for_target` use only what `Plan` declares: name, iteration
space, buffers, input/output streams, L1 map, target, tile count, element count, argument words, ops, the engine
report (`placement`) and `render()`.
"""
from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import KW_ONLY, dataclass, field, replace

from tt_backend.chip import isa
from tt_backend.chip.grid import Grid
from tt_backend.chip.errors import UnsupportedOp
from tt_backend.lowering.index import IndexExpr, IndexTexts

TILE_ELEMS = 1024                       # a 32x32 tile; for elementwise kernels tile t holds flat elements 1024t..
ROW_STEP0_DATUMS = 64     # an SFPLOAD at row step 0 reads datums 0, 2, .., 62 (row steps 0 and 1: datums 0..63)
TILE_BYTES = {"fp32": 4 * TILE_ELEMS, "bf16": 2 * TILE_ELEMS}
DTYPE_SIZE = {"float32": 4, "bfloat16": 2, "int32": 4, "uint32": 4, "bool": 1}
TILE_FORMAT_OF = {"float32": "fp32", "int32": "fp32", "uint32": "fp32", "bool": "fp32", "bfloat16": "bf16"}
# The narrow dtypes: stored at their own width in DRAM, widened by the reader to the 32-bit lane value the SFPU computes
# with (LANE_DTYPE: integers as int32; float16 is a value-DAG dtype of its own, a float32 lane value rounded to float16
# after every op as bfloat16 is, lowering/codegen/sfpu_ops.py round_f16) and narrowed back by the writer
# (lowering/codegen/c_exprs.py). The frontend keeps integer values in their dtype's range after every op that can leave
# it (two's complement wrap).
NARROW_DTYPE_SIZE = {"int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "float16": 2}
LANE_DTYPE = {"int8": "int32", "uint8": "int32", "int16": "int32", "uint16": "int32"}
DTYPE_SIZE.update(NARROW_DTYPE_SIZE)
TILE_FORMAT_OF.update({dt: "fp32" for dt in NARROW_DTYPE_SIZE})


def lane_dtype(name: str) -> str:
    """The value-DAG dtype of a buffer dtype's values (the narrow integers compute as int32)."""
    return LANE_DTYPE.get(name, name)


# dtypes whose DRAM element is the tile datum as is (a bulk copy moves them without conversion)
TILE_NATIVE = ("float32", "int32", "uint32", "bfloat16")


@dataclass(frozen=True)
class Target:
    """Where a kernel will run, as far as code generation cares. ttsim does not implement SFPLOADMACRO (its SFPU
    stops on it), so schedules for it (directly, or under tt-umd's simulation device: umd-sim) must be macro-free;
    the emulator and the card can take the macro schedules (the plugin asks for them under TT_SFPU_MACRO=1 only)."""
    name: str               # emu | ttsim | umd-sim | hw
    macro_free: bool        # no SFPLOADMACRO in the SFPU program
    tiles: int = 1          # Tensix tiles one kernel may be split over (the whole unharvested grid on emu and ttsim;
                            # the card path launches on its one surveyed tile)

    @property
    def schedule(self) -> str:
        return f"macro-free schedule ({self.name})" if self.macro_free else "SFPLOADMACRO allowed"


TARGETS = {"emu": Target("emu", False, len(Grid().tensix)), "ttsim": Target("ttsim", True, len(Grid().tensix)),
           "umd-sim": Target("umd-sim", True), "hw": Target("hw", False)}
# A plan not bound by for_target (bench rows, tests rendering directly) takes the emulator's default schedule, the
# macro-free one: what the plugin gives every target unless TT_SFPU_MACRO=1 asks for SFPLOADMACRO
# (tt_backend/ops_tt.py tt_target).
DEFAULT_TARGET = replace(TARGETS["emu"], macro_free=True)


@dataclass
class MacroSchedule:
    """The SFPLOADMACRO form of an SfpuProgram's row step (lowering/codegen/sfpu_macro.py): the same results, the
    body's last op and its store run by the macro's scheduled sub-units instead of being issued."""
    config: list[int]       # words run once per tile after the program's setup: the macro's template, sequence, misc
    body: list[int]         # Tensix words of one row step, one SFPLOADMACRO among them
    drain: list[int]        # words after the row steps of each MOP (or of the row loop): the issues the last row
                            # step's scheduled op and store wait for
    body_stalls: int        # auto-stall cycles of one row step: a row step costs len(body) + body_stalls cycles
    scheduled: str          # what the macro schedules, for reports ("SFPMAD + SFPSTORE")


@dataclass
class SfpuProgram:
    setup: list[int]        # Tensix words run before a tile's row loop (elementwise: the first tile's only, setup_once)
    body: list[int]         # Tensix words for one 32-lane row step; the last is an SFPSTORE with sfpu_addr_mode=1
    dst_slots: int          # Dst32b tile slots used (inputs + output + spills), <= 8
    out_slot: int           # Dst slot the output tile is written to
    setup_only: frozenset[int] = frozenset()   # inputs only the setup reads (hoisted uniform values: row step 0)
    body_stalls: int = 0    # auto-stall cycles of one row step (sfpu_schedule.row_stalls): a row step costs
                            # len(body) + body_stalls cycles
    macro: MacroSchedule | None = None   # the SFPLOADMACRO form, for targets that take it (Target.macro_free False)
    macro_note: str = ""    # why there is no SFPLOADMACRO form (sfpu_macro.macro_schedule), "" when there is one

    def issued(self, macro_free: bool) -> tuple[list[int], list[int], list[int]]:
        """(setup, row-step body, drain) as issued on a target that is `macro_free` or not (Target.macro_free)."""
        if self.macro is None or macro_free:
            return self.setup, self.body, []
        return self.setup + self.macro.config, self.macro.body, self.macro.drain

    def issue_counts(self, macro_free: bool = False) -> tuple[int, int]:
        """(setup and drain issues per tile, cycles of one row step) of the schedule issued on a target that is
        `macro_free` or not: what the cost model prices (by default the schedule of emu and hw; the drain counted
        once, as a body of up to 8 words, one MOP per tile, issues it)."""
        setup, body, drain = self.issued(macro_free)
        stalls = self.body_stalls if body is self.body else self.macro.body_stalls
        return len(setup) + len(drain), len(body) + stalls


@dataclass
class Buffer:
    slot: int               # tinygrad parameter position
    dtype: str
    nbytes: int


@dataclass
class Stream(IndexTexts):
    """One buffer access of a kernel; index_c, valid_c, value_c: the C text of its expressions (the templates')."""
    buf: int                # index into Plan.buffers
    dtype: str              # element dtype in DRAM
    index: IndexExpr | None      # element index into the buffer over ranges r0..r{n-1}; None: the kernel family's
                                 # own reader/writer addresses the buffer (matmul)
    valid: IndexExpr | None = None   # false -> element reads as 0 (pads); never read out of bounds
    contiguous: bool = False     # index == flat iteration index, always valid: bulk NoC copy, no gather
    value: IndexExpr | None = None   # computed stream: the datum is this expression of the ranges (index math that
                                     # reaches the value part: arange, argmax's reversed index); no buffer is read
    coef: tuple[int, ...] | None = None  # index.coefficients(): affine coefficients (range 0..n-1, then the constant),
                                         # None when not affine or to force the per-datum gather: picks the reader's
                                         # run paths (families/tile_streams.py reader_mode)

    @property
    def tile_format(self) -> str:
        return TILE_FORMAT_OF[self.dtype]


class Report(ABC):
    """A plan's account of where its ops run: report.json's placement part (per-node engine, fidelity, formats,
    predicted error and cycles) and, when `lowered` is set, what TT_CHECK re-evaluates after a launch."""
    kernel: str
    budget: float | None
    predicted_error: float | None
    nodes: list[dict]
    lowered: object | None = None       # the frontend's LoweredKernel TT_CHECK evaluates (None: not checked)

    @abstractmethod
    def report(self) -> dict:
        """report.json's keys: kernel, budget, predicted_error, predicted_max_rel, predicted_cycles,
        predicted_cycles_per_tile, all_sfpu_cycles, reassociated, evaluator_error, nodes."""


@dataclass
class Plan(ABC):
    name: str
    ranges: tuple[int, ...]             # iteration space, outermost first; flat index = row-major over ranges
    buffers: list[Buffer]               # in tinygrad slot order
    inputs: list[Stream]
    output: Stream
    _: KW_ONLY
    ops: list[str] = field(default_factory=list)   # for reports
    l1: dict[str, int] = field(default_factory=dict)  # L1 region -> address (lowering.codegen.l1)
    windows: dict[str, int] = field(default_factory=dict)   # staging window region -> bytes, where not STAGING_BYTES
    target: Target = DEFAULT_TARGET       # set by for_target
    placement: Report | None = None     # where the ops run and what that is predicted to cost
    cores: int = 1                      # Tensix tiles the kernel is split over (core_arg_words: one block each)
    # why the reader runs without its specialised paths (affine runs, the reduction walk and its datum table: every
    # gathered stream per datum; loaded-index helpers called, not inlined: a smaller image), "" while it has them: set when the specialised image did not fit
    # its L1 slot (tt_backend/ops_tt.py compile_stage)
    compact_reader: str = ""

    @property
    def n_elements(self) -> int:
        return math.prod(self.ranges) if self.ranges else 1

    @property
    @abstractmethod
    def n_tiles(self) -> int:
        """The tile count the kernel's cores loop over (argument word ARG_N_TILES)."""

    def arg_words(self, dram_addrs: list[int]) -> list[int]:
        """The argument block: [n_tiles, n_elements, DRAM address of each buffer...]."""
        if len(dram_addrs) != len(self.buffers):
            raise ValueError(f"{self.name}: {len(self.buffers)} buffers, got {len(dram_addrs)} addresses")
        return [self.n_tiles, self.n_elements, *dram_addrs]

    def use_cores(self, max_cores: int) -> None:
        """Choose how many of up to `max_cores` Tensix tiles the launch is split over (sets `cores`): a family
        that splits its work prices the options; the others stay on one core."""
        self.cores = 1

    def core_xys(self) -> list[tuple[int, int]] | None:
        """The Tensix tiles (translated coordinates) the `cores` argument blocks go to, in order; None: the first
        `cores` tiles of the target's launch order."""
        return None

    def core_arg_words(self, dram_addrs: list[int]) -> list[list[int]]:
        """The argument block of each of the `cores` tiles the kernel runs on (the same ELFs on every tile): a family
        that splits its work over several tiles says here which part each one takes."""
        return [self.arg_words(dram_addrs)]

    @abstractmethod
    def render(self) -> dict[str, str]:
        """The five core sources and the generated headers (lowering.codegen.sources.kernel_sources)."""

    @property
    def launches(self) -> list[Plan]:
        """The plans launched, in order, for one call of the kernel: the plan itself (the staged family: its stages)."""
        return [self]

    @property
    def out_slots(self) -> list[int]:
        """tinygrad slots of the buffers the kernel writes."""
        return [self.buffers[self.output.buf].slot]

    @property
    def in_slots(self) -> list[int]:
        """tinygrad slots of the buffers the kernel reads (a computed stream reads none)."""
        return sorted({self.buffers[s.buf].slot for s in self.inputs if s.value is None})

    def sfpu_program(self) -> SfpuProgram | None:
        """The per-row-step SFPU program the report counts (None: the kernel has none of its own)."""
        return None

    def sfpu_words(self) -> list[int]:
        """Every Tensix word of the plan's SFPU programs (a macro-free target rejects SFPLOADMACRO among them)."""
        return []

    def reader_modes(self) -> list[str | None]:
        """How the reader moves each input (None: the family's reader has one way)."""
        return [None] * len(self.inputs)

    def launch_cycles(self) -> dict | None:
        """The whole launch's predicted emulated cycles, reader / compute / writer / total (lowering/families/
        mover_cost.py), or None when the family has no model of its movers yet."""
        return None


def for_target(plan: Plan, target: Target | str) -> Plan:
    """Bind a plan to `target`: a macro-free target rejects SFPU programs that contain SFPLOADMACRO."""
    target = TARGETS[target] if isinstance(target, str) else target
    if target.macro_free and any(isa.decode(w)[0] == "SFPLOADMACRO" for w in plan.sfpu_words()):
        raise UnsupportedOp(f"{plan.name}: its SFPU program uses SFPLOADMACRO, which {target.name} does not "
                            f"implement; lower it with a {target.schedule}")
    plan.target = target
    return plan
