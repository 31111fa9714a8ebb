"""`python -m tt_backend tune (script.py | -m pkg.mod | -c CODE) [--budgets 1e-4,1e-3,1e-2]`: the precision/speed
trade-off of a program.

Runs the program once per budget (plus once without one: the float32-faithful placement), each in its own subprocess
with TT_ERR_BUDGET, TT_CHECK=1 and a fresh TT_DUMP, then reads every kernel's report.json and gives, per kernel and
budget: the FPU placements, predicted vs measured relative error, predicted compute cycles (lowering/placement/'s
model: unpack + FPU + SFPU + pack per tile) and the emulator's cycles of the whole launch (RISC-V reader and writer
included, when the target has a cycle model). Three outputs:

* a table on stdout;
* `tune.png`: error against cycles, one point per budget, per kernel (left) and for the whole program (right; its
  cycles are the kernels' sum, its error the worst kernel's), each point labelled with its budget and the placement
  chosen under it (drawn with matplotlib's Agg renderer: no display needed);
* `tune.md` next to the PNG: the per-node placements of each kernel side by side across the budgets, with errors and
  cycles, and the plot.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from tt_backend.chip.errors import TTError

ZERO_AT = 1e-10        # where an error of exactly 0 is drawn on the plot's log axis


@dataclass(frozen=True)
class Program:
    """What tune runs, as `python` would: a script path, a module (`-m`) or a code string (`-c`), and its arguments."""
    script: str | None = None
    module: str | None = None
    code: str | None = None
    args: tuple[str, ...] = ()

    def __post_init__(self):
        if sum(x is not None for x in (self.script, self.module, self.code)) != 1:
            raise TTError("tune runs one program: a script path, -m module or -c code")

    def argv(self) -> list[str]:
        head = [self.script] if self.script is not None else ["-m", self.module] if self.module is not None \
            else ["-c", self.code]
        return [sys.executable, *head, *self.args]

    def describe(self) -> str:
        code = "; ".join(line.strip() for line in (self.code or "").splitlines() if line.strip())
        head = self.script if self.script is not None else f"-m {self.module}" if self.module is not None \
            else f"-c {code if len(code) <= 60 else code[:57] + '...'!r}"
        return " ".join([head, *self.args])


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


def budget_label(b: float | None) -> str:
    return "none" if b is None else f"{b:g}"


def run_one(program: Program, budget: float | None, dump: Path, extra_env: dict | None = None,
            timeout: float | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, TT_CHECK="1", TT_DUMP=str(dump), **(extra_env or {}))
    env.pop("TT_ERR_BUDGET", None)
    if budget is not None:
        env["TT_ERR_BUDGET"] = repr(budget)
    return subprocess.run(program.argv(), env=env, capture_output=True, text=True, timeout=timeout)


def collect(dump: Path) -> list[dict]:
    """Every kernel report of one run (a kernel launched several times keeps its last measured error)."""
    out = []
    for rep in sorted(dump.glob("*/report.json")):
        r = json.loads(rep.read_text())
        r["dir"] = rep.parent.name
        out.append(r)
    return out


def fpu_precision(n: dict) -> str:
    """An FPU node's fidelity and operand formats: 'HiFi2 bf16xtf32'."""
    f = n.get("formats") or {}
    return " ".join(x for x in (n.get("fidelity"), f"{f.get('srca')}x{f.get('srcb')}" if f else None) if x)


def node_placement(n: dict) -> str:
    """One node's engine and precision: 'SFPU' (float32) or 'FPU HiFi2 bf16xtf32'."""
    return f"FPU {fpu_precision(n)}" if n.get("engine") == "FPU" else "SFPU"


def placement_summary(r: dict) -> str:
    fpu = [f"n{n['id']} {n['op']} {fpu_precision(n)}" for n in r.get("nodes", []) if n.get("engine") == "FPU"]
    return ", ".join(fpu) if fpu else "all SFPU"


def _e(x) -> str:
    return "-" if x is None else f"{x:.2e}"


def _by_budget(results: dict) -> list:
    """(budget, reports) with the float32-faithful run first, then by increasing budget."""
    return sorted(results.items(), key=lambda kv: (kv[0] is not None, kv[0] or 0))


def per_kernel(results: dict) -> dict[str, dict]:
    """kernel (dump dir = name + AST hash) -> budget -> report, budgets in _by_budget order."""
    kernels: dict[str, dict] = {}
    for budget, reps in _by_budget(results):
        for r in reps:
            kernels.setdefault(r["dir"], {})[budget] = r
    return kernels


def emulated(r: dict):
    return (r.get("measured_cycles") or {}).get("max")


def error(r: dict):
    """The measured error (TT_CHECK) where the kernel has a reference, else the predicted one."""
    return r.get("measured_error") if r.get("measured_error") is not None else r.get("predicted_error")


def program_row(reps: list[dict]) -> tuple:
    """(predicted cycles, emulated cycles, worst kernel error) of one run; a sum is None if a kernel lacks its part."""
    pc = [r.get("predicted_cycles") for r in reps]
    ec = [emulated(r) for r in reps]
    errs = [e for e in map(error, reps) if e is not None]
    return (sum(pc) if None not in pc else None, sum(ec) if None not in ec and ec else None,
            max(errs) if errs else None)


def table(results: dict) -> str:
    """results: budget -> [report]. One block per kernel, one row per budget; then the whole program."""
    kernels = per_kernel(results)
    lines = []
    for k, per in kernels.items():
        lines.append(f"kernel {k}")
        lines.append(f"  {'budget':>8}  {'predicted':>9}  {'measured':>9}  {'cycles':>8}  {'emu cyc':>9}  placement")
        for budget, r in per.items():
            lines.append(f"  {budget_label(budget):>8}  {_e(r.get('predicted_error')):>9}  "
                         f"{_e(r.get('measured_error')):>9}  {str(r.get('predicted_cycles')):>8}  "
                         f"{str(emulated(r) or '-'):>9}  {placement_summary(r)}")
    if len(kernels) > 1:
        lines.append("program (all kernels)")
        lines.append(f"  {'budget':>8}  {'cycles':>8}  {'emu cyc':>9}  worst kernel error")
        for budget, reps in _by_budget(results):
            pc, ec, worst = program_row(reps)
            lines.append(f"  {budget_label(budget):>8}  {'-' if pc is None else pc:>8}  {'-' if ec is None else ec:>9}"
                         f"  {_e(worst)}")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------------------ plot

def _cycles_source(results: dict) -> tuple[str, str]:
    """Which cycles the plot shows: the emulator's (whole launch, slowest core) when every kernel has them, else the
    placement model's prediction. (key function name, axis label)"""
    reps = [r for rs in results.values() for r in rs]
    if reps and all(emulated(r) is not None for r in reps):
        return "emulated", "emulated cycles (whole launch, slowest core)"
    return "predicted", "predicted compute cycles (placement model)"


def _short(text: str, n: int = 48) -> str:
    return text if len(text) <= n else text[:n - 3] + "..."


def _draw(ax, series: list[tuple[list, str]], ylabel: str, xlabel: str, title: str) -> None:
    """series: (points, legend name); point = (error, cycles, budget, placement, uses FPU), in budget order. Budgets
    that chose the same placement share one label, at the first of their points."""
    zero = False
    for pts, name in series:
        xs = [max(p[0], ZERO_AT) for p in pts]
        zero |= any(p[0] <= 0 for p in pts)
        line, = ax.plot(xs, [p[1] for p in pts], "-", alpha=0.6, label=name)
        for x, p in zip(xs, pts):
            ax.plot([x], [p[1]], "^" if p[4] else "o", color=line.get_color(), markersize=7)
        groups: dict[str, list] = {}
        for x, p in zip(xs, pts):
            groups.setdefault(p[3], []).append((x, p[1], p[2]))
        for placement, members in groups.items():
            x, y, _ = members[0]
            ax.annotate(f"{', '.join(m[2] for m in members)}: {_short(placement)}", (x, y),
                        textcoords="offset points", xytext=(6, 4), fontsize=7)
    ax.set_xscale("log")
    ax.set_xlabel(xlabel + (f"; 0 drawn at {ZERO_AT:g}" if zero else ""), fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="major", alpha=0.3)


def _uses_fpu(r: dict) -> bool:
    return any(n.get("engine") == "FPU" for n in r.get("nodes", []))


def plot(results: dict, path: Path) -> Path:
    """Error vs cycles, one point per budget: per kernel (left), the whole program (right). Markers: circle = all on
    the SFPU (float32), triangle = some nodes on the FPU; labels = the budgets and the placement they chose."""
    key, ylabel = _cycles_source(results)
    cyc = emulated if key == "emulated" else (lambda r: r.get("predicted_cycles"))
    kernel_series = []
    for k, per in per_kernel(results).items():
        pts = [(error(r) or 0.0, cyc(r), budget_label(b), placement_summary(r), _uses_fpu(r))
               for b, r in per.items() if cyc(r) is not None]
        if pts:
            kernel_series.append((pts, k))
    prog = []
    for b, reps in _by_budget(results):
        pc, ec, worst = program_row(reps)
        c = ec if key == "emulated" else pc
        if c is not None:
            fpu = [placement_summary(r) for r in reps if _uses_fpu(r)]
            prog.append((worst or 0.0, c, budget_label(b), "; ".join(fpu) or "all SFPU", bool(fpu)))
    fig = Figure(figsize=(13, 5))
    FigureCanvasAgg(fig)
    left, right = fig.subplots(1, 2)
    xlabel = "relative error vs float32 (measured with TT_CHECK; predicted where no reference)"
    _draw(left, kernel_series, ylabel, xlabel, "per kernel: error vs cycles under each TT_ERR_BUDGET")
    _draw(right, [(prog, "program")] if prog else [], ylabel, xlabel,
          "whole program: summed cycles vs worst kernel error")
    if kernel_series:
        left.legend(fontsize=7, loc="best", title="o all SFPU, ^ FPU used", title_fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return path


# --------------------------------------------------------------------------------------------------------- summary

def _md_row(cells) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def summary_markdown(program: Program, results: dict, png: Path, root: Path) -> str:
    """tune.md: the plot, the whole program per budget, and per kernel its nodes' placements side by side (a
    placement that differs from the float32-faithful run in bold), errors and cycles."""
    budgets = [b for b, _ in _by_budget(results)]
    heads = [budget_label(b) for b in budgets]
    out = [f"# tune: `{program.describe()}`", "",
           f"Budgets (TT_ERR_BUDGET): {', '.join(heads)} (none = float32-faithful placement). Reports: `{root}`, "
           "one `budget_<b>/<kernel>/report.json` per run.", "",
           "Error: relative L2 error vs float32, measured on the kernel's real inputs (TT_CHECK) where the kernel has "
           "a reference, else predicted. Emulated cycles: the whole launch on the emulator's cycle model (slowest "
           "core); predicted: the placement model's compute cycles.", "",
           f"![error vs cycles]({png.name})", "", "## Whole program", "",
           _md_row(["budget", "predicted cycles", "emulated cycles", "worst kernel error"]), _md_row(["---"] * 4)]
    for b, reps in _by_budget(results):
        pc, ec, worst = program_row(reps)
        out.append(_md_row([budget_label(b), pc if pc is not None else "-", ec if ec is not None else "-", _e(worst)]))
    for k, per in per_kernel(results).items():
        out += ["", f"## Kernel `{k}`", "", _md_row(["node", *heads]), _md_row(["---"] * (len(heads) + 1))]
        rows: dict[tuple, dict] = {}          # (node id, op) -> budget -> placement (reassociation may renumber)
        for b, r in per.items():
            for n in r.get("nodes", []):
                rows.setdefault((n["id"], n["op"]), {})[b] = node_placement(n)
        for (nid, op), cells in sorted(rows.items()):
            base = cells.get(None)
            out.append(_md_row([f"n{nid} {op}", *(("-" if b not in cells else cells[b] if cells[b] == base
                                                   else f"**{cells[b]}**") for b in budgets)]))
        if not rows:
            out.append(_md_row(["placement", *(placement_summary(per[b]) if b in per else "-" for b in budgets)]))
        for name, get in (("predicted error", lambda r: _e(r.get("predicted_error"))),
                          ("measured error", lambda r: _e(r.get("measured_error"))),
                          ("predicted cycles", lambda r: r.get("predicted_cycles") or "-"),
                          ("emulated cycles", lambda r: emulated(r) or "-")):
            out.append(_md_row([name, *(get(per[b]) if b in per else "-" for b in budgets)]))
    return "\n".join(out) + "\n"


def tune(program: Program, budgets: list[float | None], out_dir: str | None = None, png: str | None = None,
         timeout: float | None = None) -> int:
    root = Path(out_dir or tempfile.mkdtemp(prefix="tt_tune_"))
    results: dict = {}
    for b in budgets:
        dump = root / f"budget_{budget_label(b)}"
        r = run_one(program, b, dump, timeout=timeout)
        if r.returncode != 0:
            print(f"budget {budget_label(b)}: {program.describe()} failed (exit {r.returncode}):\n{r.stderr[-2000:]}",
                  file=sys.stderr)
            return r.returncode
        results[b] = collect(dump)
    if not any(results.values()):
        print(f"{program.describe()} ran no TT kernel (is DEVICE=TT set, or does it use device='TT'?)", file=sys.stderr)
        return 1
    print(table(results))
    path = plot(results, Path(png) if png else root / "tune.png")
    md = path.with_suffix(".md")
    md.write_text(summary_markdown(program, results, path, root))
    print(f"\nreports under {root}; plot {path}; summary {md}")
    return 0
