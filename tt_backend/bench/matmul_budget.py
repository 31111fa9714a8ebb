"""Matmul error against its budget through tinygrad: fp32 and bf16 operands, budgets 1e-4/1e-3/1e-2, relative L2
error vs float64 (bf16: vs the exactly rounded bf16 result, since the output is bf16). Fast on ttsim:

    TT_SIMULATOR=/path/libttsim.so python -m tt_backend bench matmul-budget        # --target emu|ttsim
"""
from __future__ import annotations

import argparse
import os

import numpy as np
from tinygrad import Tensor, dtypes

from tt_backend import knobs


def bf16(x):
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    u = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
    return u.astype(np.uint32).view(np.float32)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tt_backend bench matmul-budget", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", choices=knobs.BACKENDS, default=None,
                    help="TT target (default: TT_BACKEND, else ttsim when TT_SIMULATOR is set, else emu)")
    args = ap.parse_args(argv)
    device = f"TT:{args.target or knobs.backend()}"
    rng = np.random.default_rng(3)
    for n, K in ((512, 512), (64, 2048), (256, 1024)):
        a = rng.standard_normal((n, K)).astype(np.float32)
        b = rng.standard_normal((K, n)).astype(np.float32)
        for dt in ("fp32", "bf16"):
            for budget in ("1e-4", "1e-3", "1e-2"):
                os.environ["TT_ERR_BUDGET"] = budget
                ta, tb = Tensor(a, device=device), Tensor(b, device=device)
                if dt == "bf16":
                    ta, tb = ta.cast(dtypes.bfloat16).realize(), tb.cast(dtypes.bfloat16).realize()
                    ref = bf16((bf16(a).astype(np.float64) @ bf16(b)).astype(np.float32)).astype(np.float64)
                else:
                    ref = a.astype(np.float64) @ b
                out = (ta @ tb).float().numpy()
                e = np.linalg.norm(out - ref) / np.linalg.norm(ref)
                print(f"{n}x{K}x{n} {dt} budget {budget}: relative L2 {e:.2e} {'OK' if e <= float(budget) else 'OVER'}",
                      flush=True)
    return 0
