"""`python -m tt_backend bench <name> [args]`: every benchmark of the project, by name (`<name> -h` for its options).

The emulator's own speed benchmark keeps its fixed rows with the emulator (runtime/emu/bench.py: no tinygrad, no
compiler); `emu` adds whole-kernel rows from here (tt_backend/bench/emu.py), and the others run whole kernels through
the lowering and tinygrad. Each module has `main(argv) -> int`.
"""
from __future__ import annotations

import importlib

# name -> (module, what it measures). Modules are imported by name when chosen: the tinygrad-based ones import
# tinygrad and the lowering (~0.5 s measured on an idle core).
BENCHES = {
    "emu": ("tt_backend.bench.emu",
            "emulator speed: instructions per second on fixed kernels; whole kernels against ttsim on the same ELFs"),
    "sfpu-matmul": ("tt_backend.bench.sfpu_matmul",
                    "fp32 SFPU matmul per shape on emu/ttsim: plan, wall time, cycles, error vs bound, emu == ttsim"),
    "same-elf": ("tt_backend.bench.same_elf",
                 "emulator against ttsim on the same ELFs: a long-SFPU-body kernel, best of 3 warm launches"),
    "matmul-budget": ("tt_backend.bench.matmul_budget",
                      "matmul error against TT_ERR_BUDGET: fp32 and bf16 operands, relative L2 vs float64"),
    "kernels": ("tt_backend.bench.kernels",
                "predicted vs emulated cycles per kernel: bf16 matmul HiFi2/HiFi4, RMSNorm, the demo, elementwise"),
    "predictions": ("tt_backend.bench.predictions",
                    "predicted vs emulated cycles on every launch of a pytest selection (default tests/e2e)"),
    "build": ("tt_backend.bench.build",
              "kernel build latency: frontend, placement, render, five ELFs (uncached, cached) per elementwise kernel"),
}


def run(name: str, argv: list[str]) -> int:
    module, _ = BENCHES[name]
    return importlib.import_module(module).main(argv)
