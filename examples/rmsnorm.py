"""RMSNorm on DEVICE=TT: the seed's program, end to end through tinygrad.

    y = x.float() * rsqrt(mean(x.float()^2) + eps) * w        x: (dim,) bfloat16, w: (dim,) float32, eps = 1e-5

tinygrad schedules it as two kernels: r_2048 (sum of squares, mean, + eps, sqrt: the reduction on the SFPU) and
E_2048 (x * (1/r) * w, where placement may move the loads-only product x*w to the FPU under TT_ERR_BUDGET).

Run it with the knobs (they are part of tinygrad's program cache key, so they may also change within a process):
    DEVICE=TT python examples/rmsnorm.py                                  # float32-faithful placement
    DEVICE=TT TT_ERR_BUDGET=1e-2 TT_CHECK=1 TT_DUMP=/tmp/rms python examples/rmsnorm.py
    python -m tt_backend tune examples/rmsnorm.py --budgets 1e-4,1e-3,1e-2
Options: --dim N (default 2048), --weight ones|random (default random), --seed S (fresh inputs per seed),
--json PATH (the result check as JSON).
The result is checked against tinygrad's CPU device on the same program in float32 (relative L2 error, the metric of
TT_ERR_BUDGET); the script prints it, the placement of each kernel and where TT_DUMP wrote the reports, and exits 1
when the error exceeds the budget (1e-3 without TT_ERR_BUDGET).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

EPS = 1e-5


def rms_norm(x, w):
    xf = x.float()
    return xf * (xf.square().mean(-1, keepdim=True) + EPS).rsqrt() * w


def inputs(dim: int, weight: str, seed: int):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(dim).astype(np.float32)
    w = np.ones(dim, np.float32) if weight == "ones" else rng.standard_normal(dim).astype(np.float32)
    return x, w


def bf16_round(x: np.ndarray) -> np.ndarray:
    """float32 -> the nearest-even bfloat16 value, as float32."""
    b = x.astype(np.float32).view(np.uint32)
    return ((b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000).astype(np.uint32).view(np.float32)


def run_tt(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The program on TT: x is created as a bfloat16 tensor from bf16-exact values (host conversion, no cast kernel),
    so the two kernels tinygrad runs are exactly RMSNorm's."""
    from tinygrad import Tensor, dtypes
    xt = Tensor(bf16_round(x).tolist(), dtype=dtypes.bfloat16, device="TT").realize()
    wt = Tensor(w, device="TT").realize()
    return rms_norm(xt, wt).numpy()


def run_reference(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """float32 reference: the same program on tinygrad's CPU device on x.float() (the bf16 values as float32)."""
    from tinygrad import Tensor
    xf, wt = Tensor(bf16_round(x), device="CPU"), Tensor(w, device="CPU")
    return (xf * (xf.square().mean(-1, keepdim=True) + EPS).rsqrt() * wt).numpy()


def rel_error(got: np.ndarray, ref: np.ndarray) -> float:
    got, ref = got.astype(np.float64), ref.astype(np.float64)
    return float(np.linalg.norm(got - ref) / np.linalg.norm(ref))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dim", type=int, default=2048)
    ap.add_argument("--weight", choices=("ones", "random"), default="random")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None, help="also write the result check (and the kernel reports) to this file")
    a = ap.parse_args(argv)
    x, w = inputs(a.dim, a.weight, a.seed)
    got = run_tt(x, w)
    ref = run_reference(x, w)
    err = rel_error(got, ref)
    budget = float(os.environ["TT_ERR_BUDGET"]) if os.environ.get("TT_ERR_BUDGET") else None
    limit = budget if budget is not None else 1e-3
    ok = err <= limit
    print(f"rmsnorm dim={a.dim} weight={a.weight} seed={a.seed} budget={budget}: relative error vs float32 "
          f"{err:.3e} (max |diff| {np.abs(got - ref).max():.3e}) {'<=' if ok else '>'} {limit:g}: "
          f"{'OK' if ok else 'FAIL'}")
    result = {"dim": a.dim, "weight": a.weight, "seed": a.seed, "budget": budget, "error": err, "limit": limit,
              "max_abs_diff": float(np.abs(got - ref).max()), "ok": ok, "dump": os.environ.get("TT_DUMP"),
              "reports": []}
    if (d := os.environ.get("TT_DUMP")):
        for rep in sorted(Path(d).glob("*/report.json")):
            r = json.loads(rep.read_text())
            result["reports"].append(str(rep))
            fpu = [f"n{n['id']} {n['op']} {n['fidelity'] or ''} {n['formats']['srca']}x{n['formats']['srcb']}"
                   for n in r.get("nodes", []) if n.get("engine") == "FPU"]
            emu = (r.get("measured_cycles") or {}).get("max")
            print(f"  {r['name']}: {', '.join(fpu) or 'all SFPU'}; predicted error {r.get('predicted_error')}, "
                  f"measured {r.get('measured_error')}; predicted cycles {r.get('predicted_cycles')}, "
                  f"emulated {emu}")
        print(f"dump: {d} (per kernel: report.json, report.txt, C sources, ELFs, disassembly)")
    if a.json:
        Path(a.json).write_text(json.dumps(result, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
