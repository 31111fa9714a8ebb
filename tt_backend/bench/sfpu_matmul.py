"""The fp32 SFPU matmul (lowering/families/sfpu_matmul.py) on the emulator and/or ttsim: plan, time, cycles, error.

    python -m tt_backend bench sfpu-matmul 64 128 256 [--targets emu,ttsim] [--lib path/to/libttsim.so]
    python -m tt_backend bench sfpu-matmul 64x4096x64 32x8192x32 4x64x2048x64   # MxKxN, BxMxKxN
    python -m tt_backend bench sfpu-matmul --sweep       # the dispatch decision for a sweep of shapes

Per shape (a cube size n, MxKxN, or BxMxKxN for a batched matmul): the plan (column groups, K blocks), wall time
of the launch, the slowest core's emulated cycles (emu) or the clocks advanced (ttsim, a coarse upper bound: the host
clocks in slices), the max normalised error |C - C64| / (|A| @ |B|) against the bound
K * 2^-24, and whether emu and ttsim produced the same bits."""
from __future__ import annotations

import argparse
import os
import time

import numpy as np
from tinygrad import Tensor, dtypes
from tinygrad.uop.ops import Ops

from tt_backend.lowering.codegen.sources import split
from tt_backend.lowering.families.fpu_matmul import FpuMatmulPlan
from tt_backend.lowering.families.matmul_spec import match_matmul
from tt_backend.lowering.families.sfpu_matmul import SfpuMatmulPlan
from tt_backend.lowering.select import lower
from tt_backend.runtime.compile import compile_kernel
from tt_backend.runtime.driver import launch
from tt_backend.runtime.emu.device import EmuDevice
from tt_backend.runtime.ttsim_device import TtsimDevice


def matmul_ast(sa, sb):
    out = Tensor.empty(*sa, device="CPU", dtype=dtypes.float32) @ Tensor.empty(*sb, device="CPU", dtype=dtypes.float32)
    calls = [c for c in out.schedule_linear().src if c.op is Ops.CALL]
    return calls[-1].src[0], len(calls)


def plan_for(M, K, N, B=0):
    ast, _ = matmul_ast(((B,) if B else ()) + (M, K), ((B,) if B else ()) + (K, N))
    plan = lower(ast, f"bench_smm_{B}_{M}_{K}_{N}")
    assert isinstance(plan, SfpuMatmulPlan)
    return plan


def describe(plan) -> str:
    if isinstance(plan, FpuMatmulPlan): return f"FPU {plan.fidelity}"
    if not isinstance(plan, SfpuMatmulPlan): return "generic path"
    split = (f", K in {plan.nkb} blocks of {8 * plan.kb_chunks} k, B {'streamed' if plan.b_stream else 'resident'}"
             if plan.split_k else "")
    return f"SFPU matmul, {plan.ng} column group(s) of {plan.ntg} tiles, A depth {plan.a_depth}{split}"


def sweep():
    """The dispatch decision (no budget: fp32-faithful) for fp32 matmuls of many shapes, incl. vectors and edges."""
    shapes = [((M, K), (K, N)) for M in (1, 7, 33, 64, 256) for N in (1, 5, 64, 100, 4096)
              for K in (1, 3, 100, 1024, 1200, 4096, 8192, 20000)]
    shapes += [((64,), (64, 32)), ((64, 32), (32,)), ((4096,), (4096, 64)), ((8, 64, 4096), (8, 4096, 64)),
               ((4, 64, 2048), (2048, 64)), ((7,), (7,))]
    for sa, sb in shapes:
        ast, n = matmul_ast(sa, sb)
        K = sa[-1]
        why = ("" if match_matmul(ast) is not None else " (K = 1: an elementwise outer product, no reduction)" if K == 1
               else " (a dot product: one SFPU reduction over K)")
        print(f"{str(sa):>14} @ {str(sb):<14} {n} kernel(s): {describe(lower(ast, 'sweep'))}{why}")


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
    return out.reshape(*plan.spec.batch, plan.spec.M, plan.spec.N), secs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tt_backend bench sfpu-matmul", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sizes", nargs="*", help="n (a cube), MxKxN or BxMxKxN")
    ap.add_argument("--sweep", action="store_true", help="print the dispatch decision for a sweep of shapes")
    ap.add_argument("--targets", default="emu,ttsim")
    ap.add_argument("--lib", default=os.environ.get("TT_SIMULATOR"), help="libttsim.so (default: $TT_SIMULATOR)")
    args = ap.parse_args(argv)
    if args.sizes and "ttsim" in args.targets.split(",") and not args.lib:
        ap.error("the ttsim target needs libttsim.so: set TT_SIMULATOR or pass --lib (or use --targets emu)")
    if args.sweep:
        sweep()
    rng = np.random.default_rng(0)
    for size in args.sizes:
        dims = [int(x) for x in size.split("x")]
        B, (M, K, N) = (dims[0], dims[1:]) if len(dims) == 4 else (0, dims * 3 if len(dims) == 1 else dims)
        n = f"{B}x{M}x{K}x{N}" if B else f"{M}x{K}x{N}"
        plan = plan_for(M, K, N, B)
        print(f"{n}: {describe(plan)}", flush=True)
        bt = (B,) if B else ()
        a = rng.standard_normal(bt + (M, K)).astype(np.float32)
        b = rng.standard_normal(bt + (K, N)).astype(np.float32)
        ref = a.astype(np.float64) @ b.astype(np.float64)
        scale = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64)
        results = {}
        for target in args.targets.split(","):
            if target == "emu":
                dev = EmuDevice()
                got, secs = run(dev, plan, a, b)
                cyc = max(dev.stats()["cycles"].values())
                what = f"emulated cycles {cyc}"
            else:
                with TtsimDevice(args.lib) as dev:
                    c0 = dev.clocks
                    got, secs = run(dev, plan, a, b)
                    what = f"clocks advanced <= {dev.clocks - c0}"
            err = (np.abs(got - ref) / scale).max()
            results[target] = got
            print(f"{n} fp32 SFPU matmul on {target}: {secs:.2f} s, {what}, max normalised error {err:.3g} "
                  f"(bound {K * 2.0 ** -24:.3g})", flush=True)
        if len(results) == 2:
            x, y = results.values()
            same = np.array_equal(x.view(np.uint32), y.view(np.uint32))
            print(f"{n}: emu and ttsim bits {'identical' if same else 'DIFFER'}")
    return 0
