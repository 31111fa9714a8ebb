"""Benchmark of the fp32 SFPU matmul (lowering/sfpu_matmul.py) on the emulator and/or ttsim.

    /work/venv/bin/python scripts/bench_sfpu_matmul.py 64 128 256 [--targets emu,ttsim] [--lib path/to/libttsim.so]

Per cube size n: wall time of the launch, the slowest core's emulated cycles (emu) or the clocks advanced (ttsim, a
coarse upper bound: the host clocks in slices), the max normalised error |C - C64| / (|A| @ |B|) against the bound
K * 2^-24, and whether emu and ttsim produced the same bits."""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from tinygrad import Tensor, dtypes  # noqa: E402
from tinygrad.uop.ops import Ops  # noqa: E402

from lowering.matmul import lower_matmul  # noqa: E402
from lowering.render import split  # noqa: E402
from lowering.sfpu_matmul import SfpuMatmulPlan  # noqa: E402
from runtime.compile import compile_kernel  # noqa: E402
from runtime.driver import launch  # noqa: E402


def plan_for(M, K, N):
    out = Tensor.empty(M, K, device="CPU", dtype=dtypes.float32) @ Tensor.empty(K, N, device="CPU", dtype=dtypes.float32)
    ast = [c for c in out.schedule_linear().src if c.op is Ops.CALL][0].src[0]
    plan = lower_matmul(ast, f"bench_smm_{M}_{K}_{N}")
    assert isinstance(plan, SfpuMatmulPlan)
    return plan


def run(dev, plan, a, b):
    elfs = compile_kernel(*split(plan.render()), plan.name)
    addrs, addr = [], 0x100000
    arrays = {plan.spec.a.slot: a, plan.spec.b.slot: b}
    for buf in plan.buffers:
        addrs.append(addr)
        dev.write_dram(addr, b"\xAB" * buf.nbytes if buf.slot not in arrays else arrays[buf.slot].tobytes())
        addr += -(-buf.nbytes // 64) * 64 + 4096
    t0 = time.perf_counter()
    launch(dev, elfs, plan.arg_words(addrs), timeout_s=3600)
    secs = time.perf_counter() - t0
    out = np.frombuffer(dev.read_dram(addrs[plan.output.buf], plan.buffers[plan.output.buf].nbytes), np.float32)
    return out.reshape(plan.spec.M, plan.spec.N), secs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("sizes", type=int, nargs="+")
    ap.add_argument("--targets", default="emu,ttsim")
    ap.add_argument("--lib", default=os.environ.get("TT_SIMULATOR", "/work/ttsim/src/_out/release_bh/libttsim.so"))
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    for n in args.sizes:
        plan = plan_for(n, n, n)
        a = rng.standard_normal((n, n)).astype(np.float32)
        b = rng.standard_normal((n, n)).astype(np.float32)
        ref = a.astype(np.float64) @ b.astype(np.float64)
        scale = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64)
        results = {}
        for target in args.targets.split(","):
            if target == "emu":
                from runtime.emu.device import EmuDevice
                dev = EmuDevice()
                got, secs = run(dev, plan, a, b)
                cyc = max(dev.stats()["cycles"].values())
                what = f"emulated cycles {cyc}"
            else:
                from runtime.ttsim_device import TtsimDevice
                with TtsimDevice(args.lib) as dev:
                    c0 = dev.clocks
                    got, secs = run(dev, plan, a, b)
                    what = f"clocks advanced <= {dev.clocks - c0}"
            err = (np.abs(got - ref) / scale).max()
            results[target] = got
            print(f"{n}^3 fp32 SFPU matmul on {target}: {secs:.2f} s, {what}, max normalised error {err:.3g} "
                  f"(bound {n * 2.0 ** -24:.3g}), column groups {plan.ng}", flush=True)
        if len(results) == 2:
            x, y = results.values()
            print(f"{n}^3: emu and ttsim bits {'identical' if np.array_equal(x.view(np.uint32), y.view(np.uint32)) else 'DIFFER'}")


if __name__ == "__main__":
    main()
