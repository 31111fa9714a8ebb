"""Reduction kernels on one core: the placement's compute price, the predicted whole launch (mover_cost), the
emulated cycles and their ratio, per engine (TT_PLACE REDUCE=SFPU / FPU:<fidelity>) and as the selector picks ("auto")
under TT_ERR_BUDGET=1e-2 with TT_BUDGET_SAMPLED=1. A long run, not part of the suite:

    python -m tests.e2e.reduce_launch_ratios                    # SFPU, FPU:LoFi, FPU:HiFi3 and auto
    python -m tests.e2e.reduce_launch_ratios SFPU,FPU:HiFi2
"""
import glob
import json
import os
import sys
import tempfile

os.environ["TT_CORES"] = "1"
import numpy as np
from tinygrad import Tensor
import tinygrad.codegen as cg
from tinygrad.helpers import Context

rng = np.random.default_rng(0)
CASES = [
    ("sum1 64x512", (64, 512), lambda t: t.sum(1)),
    ("sum0 64x512", (64, 512), lambda t: t.sum(0)),
    ("mean1 256x256", (256, 256), lambda t: t.mean(1)),
    ("sum_all 4096", (4096,), lambda t: t.sum()),
    ("sumT 300x40", (300, 40), lambda t: t.T.sum(1)),
    ("sum1 40x70", (40, 70), lambda t: t.sum(1)),
    ("max1 64x512", (64, 512), lambda t: t.max(1)),
    ("sqsum1 128x256", (128, 256), lambda t: (t * t).sum(1)),
]


def main(pins: list[str]) -> None:
    os.environ["TT_ERR_BUDGET"], os.environ["TT_BUDGET_SAMPLED"] = "1e-2", "1"
    for name, shape, fn in CASES:
        x = rng.standard_normal(shape).astype(np.float32)
        for pin in pins + ["auto"]:
            d = tempfile.mkdtemp()
            os.environ["TT_DUMP"] = d
            if pin == "auto":
                os.environ.pop("TT_PLACE", None)
            else:
                os.environ["TT_PLACE"] = f"REDUCE={pin}"
            cg.to_program_cache.clear()
            with Context(PARALLEL=0):
                fn(Tensor(x, device="TT")).numpy()
            for p in glob.glob(f"{d}/*/report.json"):
                r = json.load(open(p))
                red = [n for n in r.get("nodes", []) if n["op"] == "REDUCE"]
                if not red:
                    continue
                launch, emu = (r.get("predicted_launch_cycles") or {}).get("total"), r.get("emulated_cycles")
                print(f"{name:16s} {pin:10s} {red[0]['engine']:4s} {str(red[0].get('fidelity')):6s} "
                      f"compute={r['predicted_cycles']:>9} launch={launch:>9} emulated={emu:>9} "
                      f"ratio={launch / emu:.2f}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1].split(",") if len(sys.argv) > 1 else ["SFPU", "FPU:LoFi", "FPU:HiFi3"])
