"""`python -m tt_backend tune script.py [--budgets 1e-4,1e-3,1e-2]`: the precision/speed trade-off of a program.

Runs `script.py` once per budget (plus once without one: the float32-faithful placement), each in its own subprocess
with TT_ERR_BUDGET, TT_CHECK=1 and a fresh TT_DUMP, then reads every kernel's report.json and prints, per kernel and
budget: the FPU placements, predicted vs measured relative error, predicted compute cycles (lowering/placement/'s
model: unpack + FPU + SFPU + pack per tile) and the emulator's measured cycles of the whole launch (RISC-V reader and
writer included, when the target has a cycle model). With matplotlib installed it
also writes a PNG of predicted cycles against measured error (one line per kernel through its budgets).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from tt_backend.chip.errors import TTError


def parse_budgets(text: str) -> list[float | None]:
    """The default placement (no budget) always runs first; "none" in the list is accepted and means the same."""
    out: list[float | None] = [None]
    for part in text.split(","):
        part = part.strip()
        if not part or part.lower() == "none":
            continue
        try:
            b = float(part)
        except ValueError:
            b = -1.0
        if not b > 0:
            raise TTError(f"--budgets: {part!r} is not a positive relative error (e.g. 1e-3) or 'none'")
        out.append(b)
    return out


def run_one(script: str, args: list[str], budget: float | None, dump: Path, extra_env: dict | None = None,
            timeout: float | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, TT_CHECK="1", TT_DUMP=str(dump), **(extra_env or {}))
    env.pop("TT_ERR_BUDGET", None)
    if budget is not None:
        env["TT_ERR_BUDGET"] = repr(budget)
    return subprocess.run([sys.executable, script, *args], env=env, capture_output=True, text=True, timeout=timeout)


def collect(dump: Path) -> list[dict]:
    """Every kernel report of one run (a kernel launched several times keeps its last measured error)."""
    out = []
    for rep in sorted(dump.glob("*/report.json")):
        r = json.loads(rep.read_text())
        r["dir"] = rep.parent.name
        out.append(r)
    return out


def placement_summary(r: dict) -> str:
    fpu = [f"n{n['id']} {n['op']} {n['fidelity'] or ''} {n['formats']['srca']}x{n['formats']['srcb']}".replace("  ", " ")
           for n in r.get("nodes", []) if n.get("engine") == "FPU"]
    return ", ".join(fpu) if fpu else "all SFPU"


def _e(x) -> str:
    return "-" if x is None else f"{x:.2e}"


def table(results: dict) -> str:
    """results: budget -> [report]. One block per kernel (by dump dir = name + AST hash), one row per budget."""
    kernels: dict[str, dict] = {}
    for budget, reps in results.items():
        for r in reps:
            kernels.setdefault(r["dir"], {})[budget] = r
    lines = []
    for k, per in kernels.items():
        lines.append(f"kernel {k}")
        lines.append(f"  {'budget':>8}  {'predicted':>9}  {'measured':>9}  {'cycles':>8}  {'emu cyc':>9}  placement")
        for budget, r in sorted(per.items(), key=lambda kv: (kv[0] is not None, kv[0] or 0)):
            emu = (r.get("measured_cycles") or {}).get("max")
            lines.append(f"  {'none' if budget is None else f'{budget:g}':>8}  {_e(r.get('predicted_error')):>9}  "
                         f"{_e(r.get('measured_error')):>9}  {str(r.get('predicted_cycles')):>8}  {str(emu or '-'):>9}  "
                         f"{placement_summary(r)}")
    if len(kernels) > 1:        # the whole program: every kernel of one run, per budget
        lines.append("program (all kernels)")
        lines.append(f"  {'budget':>8}  {'cycles':>8}  {'emu cyc':>9}  worst measured")
        for budget, reps in sorted(results.items(), key=lambda kv: (kv[0] is not None, kv[0] or 0)):
            pc = [r.get("predicted_cycles") for r in reps]
            ec = [(r.get("measured_cycles") or {}).get("max") for r in reps]
            me = [r.get("measured_error") for r in reps if r.get("measured_error") is not None]
            lines.append(f"  {'none' if budget is None else f'{budget:g}':>8}  "
                         f"{sum(pc) if None not in pc else '-':>8}  {sum(ec) if None not in ec else '-':>9}  "
                         f"{_e(max(me) if me else None)}")
    return "\n".join(lines)


def plot(results: dict, path: Path) -> Path | None:
    try:        # optional: matplotlib is not a dependency, so it is looked for only when a plot is asked for
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    kernels: dict[str, list] = {}
    for budget, reps in results.items():
        for r in reps:
            if r.get("predicted_cycles") is None:
                continue
            err = r.get("measured_error") if r.get("measured_error") is not None else r.get("predicted_error")
            kernels.setdefault(r["dir"], []).append((max(err or 0.0, 1e-9), r["predicted_cycles"]))
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for k, pts in kernels.items():
        pts.sort(key=lambda p: (p[0], p[1]))
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", label=k)
    ax.set_xscale("log")
    ax.set_xlabel("measured relative error (TT_CHECK; predicted if not run)")
    ax.set_ylabel("predicted cycles")
    ax.set_title("cycles vs error per kernel across TT_ERR_BUDGET")
    if kernels:
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def tune(script: str, args: list[str], budgets: list[float | None], out_dir: str | None = None,
         png: str | None = None, timeout: float | None = None) -> int:
    root = Path(out_dir or tempfile.mkdtemp(prefix="tt_tune_"))
    results: dict = {}
    for b in budgets:
        dump = root / ("budget_none" if b is None else f"budget_{b:g}")
        r = run_one(script, args, b, dump, timeout=timeout)
        if r.returncode != 0:
            print(f"budget {b}: {script} failed (exit {r.returncode}):\n{r.stderr[-2000:]}", file=sys.stderr)
            return r.returncode
        results[b] = collect(dump)
    print(table(results))
    path = plot(results, Path(png) if png else root / "tune.png")
    print(f"\nreports under {root}" + (f"; plot {path}" if path else "; no plot (pip install matplotlib)"))
    return 0
