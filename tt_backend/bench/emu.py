"""`python -m tt_backend bench emu`: the emulator's fixed rows (runtime/emu/bench.py: hand-assembled programs, no
compiler) plus whole kernels the lowering builds, each launched on the same ELFs on the emulator and, with
TT_SIMULATOR set, on ttsim in the same run (warm, best of 3 launches per target).

Kernel rows:
* `elementwise512` - float32 a * b + a at 512x512, planned as the plugin plans it (default error budget).
* `matmul256`      - bf16 (256 x 256) @ (256 x 256) -> bf16 on the FPU at HiFi2 (tt_backend/bench/kernels.py's plan).

The `vs ttsim` columns of a kernel row are ttsim's best launch time over the emulator's (>= 1: the emulator is at
least as fast), in wall time and in CPU time (this process plus its children, ttsim's process included: the figure
that holds on a machine shared with other work; /proc's 10 ms ticks); `identical` says whether both targets wrote the
same output bytes. With TT_SIMULATOR set the fixed rows are measured against ttsim in the same run too, on the
whole-tile program of their work (runtime/emu/bench_side.py: `vs ttsim` there, their `vs ref` column the rate over
ttsim's stored reference rate).
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
from tinygrad import Tensor
from tinygrad.uop.ops import Ops

from tt_backend import knobs
from tt_backend.bench.kernels import launch_plan, matmul_plan
from tt_backend.lowering.codegen.sources import split
from tt_backend.lowering.plan import for_target
from tt_backend.lowering.select import lower
from tt_backend.placement_eval import placer
from tt_backend.runtime.compile import compile_kernel
from tt_backend.runtime.emu import bench as fixed
from tt_backend.runtime.emu.bench_side import add_ttsim, cpu_since, cpu_start
from tt_backend.runtime.emu.device import EmuDevice
from tt_backend.runtime.ttsim_device import TtsimDevice


def elementwise_plan(n: int):
    """float32 a * b + a over (n, n), lowered as the plugin lowers it (placement under the default error budget)."""
    a, b = Tensor.empty(n, n, device="CPU"), Tensor.empty(n, n, device="CPU")
    call = [c for c in (a * b + a).schedule_linear().src if c.op is Ops.CALL][-1]
    return lower(call.src[0], f"bench_ew_{n}", placer(knobs.err_budget(), knobs.place_spec()))


def elementwise_inputs(plan, rng) -> dict[int, np.ndarray]:
    out = plan.output.buf
    return {buf.slot: rng.standard_normal(buf.nbytes // 4).astype(np.float32)
            for i, buf in enumerate(plan.buffers) if i != out}


def matmul_inputs(plan, rng) -> dict[int, np.ndarray]:
    n = int(round((plan.buffers[plan.output.buf].nbytes // 2) ** 0.5))
    bf16 = lambda: (rng.standard_normal((n, n)).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    return {plan.spec.a.slot: bf16(), plan.spec.b.slot: bf16()}


@dataclass(frozen=True)
class KernelRow:
    build: object        # () -> plan
    inputs: object       # (plan, rng) -> {buffer slot: array}


KERNEL_ROWS = {
    "elementwise512": KernelRow(lambda: elementwise_plan(512), elementwise_inputs),
    "matmul256": KernelRow(lambda: matmul_plan(256, "HiFi2"), matmul_inputs),
}
QUICK_ROWS = {"elementwise512": KernelRow(lambda: elementwise_plan(128), elementwise_inputs),
              "matmul256": KernelRow(lambda: matmul_plan(64, "HiFi2"), matmul_inputs)}


REPEAT = 3     # warm launches per target; the best wall time and the mean CPU time count


def best_launch(dev, plan, arrays, elfs, repeat: int) -> tuple[bytes, float, float]:
    """One warm-up launch, then `repeat`: (the output bytes, the best wall seconds, the mean CPU seconds: ttsim's CPU
    comes from /proc's 10 ms ticks, whose best of a few ~20 ms launches would be its luckiest rounding)."""
    out, _ = launch_plan(dev, plan, arrays, elfs)
    walls, cpus = [], []
    for _ in range(repeat):
        c0 = cpu_start()
        walls.append(launch_plan(dev, plan, arrays, elfs)[1])
        cpus.append(cpu_since(c0))
    return out, min(walls), sum(cpus) / len(cpus)


def run_kernel_row(name: str, row: KernelRow, ttsim_lib: str | None, repeat: int) -> dict:
    plan = row.build()
    arrays = row.inputs(plan, np.random.default_rng(0))
    # the same ELFs on both targets: the macro-free schedule ttsim takes (lowering.plan.Target.macro_free)
    elfs = compile_kernel(*split(for_target(plan, "ttsim").render()), plan.name)
    emu = EmuDevice()
    got, emu_s, emu_cpu = best_launch(emu, plan, arrays, elfs, repeat)
    r = {"kernel": name, "plan": plan.name, "seconds": emu_s, "cpu_seconds": emu_cpu,
         "cycles": max(emu.stats()["cycles"].values())}
    if ttsim_lib:
        with TtsimDevice(ttsim_lib) as sim:
            sim_out, sim_s, sim_cpu = best_launch(sim, plan, arrays, elfs, repeat)
        r.update(ttsim_seconds=sim_s, ttsim_cpu_seconds=sim_cpu, vs_ttsim=sim_s / emu_s,
                 vs_ttsim_cpu=sim_cpu / emu_cpu, identical=sim_out == got)
    return r


def main(argv: list[str] | None = None) -> int:
    lib = os.environ.get("TT_SIMULATOR")

    def row(name: str):
        return lambda quick: run_kernel_row(name, (QUICK_ROWS if quick else KERNEL_ROWS)[name], lib, REPEAT)

    return fixed.main(argv, extra_rows={name: row(name) for name in KERNEL_ROWS}, side=add_ttsim)


if __name__ == "__main__":
    raise SystemExit(main())
