"""TT_PREDICTIONS=file: the launch model's predicted cycles next to the emulated ones, one JSON line per launch.

The placement and the core-count choice act on `Plan.launch_cycles()` (lowering/families/mover_cost.py); this records,
for every launch a program makes on the emulator, what that model predicted and what the emulator's cycle model
counted (the slowest core of the launch, placement_eval.measured_cycles), so the model can be checked on whatever a
test suite or a script runs: `python -m tt_backend bench predictions` runs a pytest selection with it and prints
`summary`. Stdlib only: ops_tt imports it at start (it must stay cheap).

A row: {"kernel", "family" (the plan's class), "predicted" (launch total; None: the family has no launch model),
"emulated", "cores", "grid", "tiles", "reader_modes" (how the reader moves each input), "test" (pytest's current test,
when there is one)}. A launch measured L1 to L1 (TT_L1_RESIDENT=1) is predicted so where its family's model prices
that (the tile pipeline's `l1_resident`: the reader alone, then the compute and the writer).
"""
from __future__ import annotations

import json
import math
import os
from collections import defaultdict

WITHIN = 0.25       # issue #10: predicted within 25 % of emulated


def of_plan(plan) -> dict:
    """What a launch's bundle carries about its prediction (ops_tt.pack_bundle): the family and the launch model's
    total, cores and grid."""
    lc = plan.launch_cycles() or {}
    return {"family": type(plan).__name__, "predicted": lc.get("total"), "cores": lc.get("cores", plan.cores),
            "grid": lc.get("grid"), "tiles": plan.n_tiles, "reader_modes": plan.reader_modes(),
            "predicted_l1_resident": lc.get("l1_resident")}


def record(path: str, kernel: str, prediction: dict, emulated: int, l1_resident: bool = False) -> None:
    """Append one launch's row (`l1_resident`: the launch ran with its inputs resident in L1 first). One write of a
    whole line on a file opened for appending, so the rows of several processes (pytest workers) do not
    interleave."""
    prediction = dict(prediction)
    l1 = prediction.pop("predicted_l1_resident", None)
    if l1_resident and l1 is not None:
        prediction["predicted"] = l1
    row = {"kernel": kernel, **prediction, "emulated": emulated,
           "test": os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0] or None}
    with open(path, "a") as f:
        f.write(json.dumps(row) + "\n")


def load(path: str) -> list[dict]:
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def ratio(row: dict) -> float | None:
    """predicted / emulated, None when either is missing."""
    return row["predicted"] / row["emulated"] if row.get("predicted") and row.get("emulated") else None


def within(r: float) -> bool:
    return abs(r - 1) <= WITHIN


def summary(rows: list[dict], worst: int = 10) -> str:
    """Count, how many within 25 %, per family (count, within, median and extreme ratios) and the `worst` launches by
    |log(pred/emu)|. Launches of the same kernel in the same test with the same numbers count once."""
    distinct = list({(r.get("test"), r["kernel"], r["family"], r.get("predicted"), r["emulated"]): r
                     for r in rows}.values())
    priced = [(ratio(r), r) for r in distinct if ratio(r) is not None]
    n_ok = sum(within(x) for x, _ in priced)
    lines = [f"{len(distinct)} distinct launches ({len(rows)} rows), {len(priced)} priced: {n_ok} within "
             f"{WITHIN:.0%} ({n_ok / max(1, len(priced)):.1%}); {len(distinct) - len(priced)} without a launch model",
             "", f"{'family':<16} {'n':>5} {'within':>6} {'unpriced':>8} {'min':>6} {'median':>6} {'max':>6}"]
    fams = defaultdict(list)
    for r in distinct:
        fams[r["family"]].append(ratio(r))
    for fam, rs in sorted(fams.items()):
        xs = sorted(x for x in rs if x is not None)
        mid = f"{xs[len(xs) // 2]:6.2f}" if xs else f"{'-':>6}"
        lo, hi = (f"{xs[0]:6.2f}", f"{xs[-1]:6.2f}") if xs else (f"{'-':>6}",) * 2
        lines.append(f"{fam:<16} {len(rs):>5} {sum(within(x) for x in xs):>6} {len(rs) - len(xs):>8} {lo} {mid} {hi}")
    lines += ["", f"worst {worst}:", f"  {'pred/emu':>8} {'predicted':>10} {'emulated':>10} {'cores':>5}  "
                                      f"{'family':<16} kernel  (test)"]
    for x, r in sorted(priced, key=lambda p: -abs(math.log(p[0])))[:worst]:
        lines.append(f"  {x:8.2f} {r['predicted']:>10} {r['emulated']:>10} {r.get('cores') or '-':>5}  "
                     f"{r['family']:<16} {r['kernel']}  ({r.get('test') or '-'})")
    return "\n".join(lines)
