"""Emulator speed against ttsim on the same ELFs: a long-SFPU-body kernel (sqrt(sin(a)*exp2(a)+log2(a)), 256x256,
171-word body pushed word by word), best of 3 warm launches through tinygrad.

    TT_BACKEND=emu DEVICE=TT python scripts/same_elf_speed.py
    TT_BACKEND=ttsim TT_SIMULATOR=/path/libttsim.so DEVICE=TT python scripts/same_elf_speed.py
"""
import os
import time

import numpy as np
from tinygrad import Tensor

a = np.random.default_rng(0).random((256, 256), dtype=np.float32) + 0.5


def run():
    t = Tensor(a, device="TT")
    return ((t.sin() * t.exp2() + t.log2()).sqrt()).numpy()


run()                                   # compile and warm up
times = []
for _ in range(3):
    t0 = time.perf_counter()
    run()
    times.append(time.perf_counter() - t0)
print(f"{os.environ.get('TT_BACKEND', 'emu')}: best of 3 {min(times):.3f} s")
