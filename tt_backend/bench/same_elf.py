"""Emulator speed against ttsim on the same ELFs: a long-SFPU-body kernel (sqrt(sin(a)*exp2(a)+log2(a)), 256x256,
171-word body pushed word by word), best of 3 warm launches through tinygrad per target.

    python -m tt_backend bench same-elf                      # emu and ttsim (TT_SIMULATOR=/path/libttsim.so)
    python -m tt_backend bench same-elf --targets emu
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np
from tinygrad import Tensor


def best_of(device: str, a: np.ndarray, repeat: int) -> float:
    def run():
        t = Tensor(a, device=device)
        return ((t.sin() * t.exp2() + t.log2()).sqrt()).numpy()

    run()                                   # compile and warm up
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    return min(times)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tt_backend bench same-elf", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--targets", default="emu,ttsim", help="comma list of TT targets (default: emu,ttsim)")
    ap.add_argument("--repeat", type=int, default=3, help="warm launches per target; the best counts")
    args = ap.parse_args(argv)
    targets = args.targets.split(",")
    if "ttsim" in targets and not os.environ.get("TT_SIMULATOR"):
        ap.error("the ttsim target needs TT_SIMULATOR=/path/to/libttsim.so (or use --targets emu)")
    a = np.random.default_rng(0).random((256, 256), dtype=np.float32) + 0.5
    best = {}
    for target in targets:
        best[target] = best_of(f"TT:{target}", a, args.repeat)
        print(f"{target}: best of {args.repeat} {best[target]:.3f} s", flush=True)
    if {"emu", "ttsim"} <= best.keys():
        print(f"emu / ttsim wall time: {best['emu'] / best['ttsim']:.2f}")
    return 0
