"""What tinygrad's DEBUG levels print for a TT kernel: the same kind of thing they print for any tinygrad device.

tinygrad 0.14 (engine/realize.py, codegen/__init__.py), for a device whose kernels it linearizes itself:
DEBUG=2 one timing line per kernel launch, 3 the optimizations applied to each kernel, 4 the rendered source, 5 the
kernel AST (`pyrender`) before lowering, 7 the disassembly. The TT device lowers whole kernels in its own to_program
hook (tt_backend/ops_tt.py), which skips the codegen steps that print 3 and 5, so this module prints their TT
counterparts at the same levels:

| DEBUG | tinygrad on other devices | on TT, in addition to tinygrad's own lines |
|---|---|---|
| 2 | `*** DEV n kernel ... tm` per launch (wall time) | the launch's emulated cycles per core (emulator only: the cycle model) |
| 3 | `<kernel> opts: (...)`: the optimizations chosen | the kernel's lowering decisions: streams, placement per node, SFPU size, L1 map (the report.txt of TT_DUMP) |
| 4 | the rendered source | the rendered C of every core (ops_tt) |
| 5 | the kernel AST as Python (`pyrender`) | the same AST, then the lowered tile graph (ops, operands, chains, FPU candidates) |
| 7 | the disassembly | every core's disassembly (ops_tt) |
"""
from __future__ import annotations

from tinygrad.helpers import DEBUG
from tinygrad.uop.ops import UOp
from tinygrad.uop.render import pyrender

from tt_backend import dump
from tt_backend.lowering.graph import describe, tile_graph
from tt_backend.placement_eval import cycles_line, measured_cycles


def before_lowering(ast: UOp) -> None:
    if DEBUG >= 5: print(pyrender(ast))


def after_lowering(plan, elfs: dict[str, bytes]) -> None:
    if DEBUG >= 3:
        print(dump.report_text(dump.report(plan, elfs)).rstrip())
    dag = getattr(getattr(plan, "placement", None), "dag", None)    # the value DAG that runs (matmuls have none)
    if DEBUG >= 5 and dag is not None:
        print(f"tile graph of {plan.name}:\n{describe(tile_graph(dag))}")


def after_launch(name: str, stats: tuple | None) -> None:
    """DEBUG>=2: the emulated cycles of one kernel (stats = the device's stats() before it and after each of its
    launches, placement_eval.measured_cycles; None on targets without a cycle model, where tinygrad's wall-time line
    is all there is)."""
    if DEBUG >= 2 and (mc := measured_cycles(stats)) is not None:
        print(f"    {name}: {cycles_line(mc).rstrip()}")
