"""Kernel build latency (issue 12): how long a new elementwise kernel takes from tinygrad's AST to its five ELFs.

    python -m tt_backend bench build                 # 20 distinct small elementwise kernels, a fresh compile cache
    python -m tt_backend bench build --repeat 3      # three passes (each with its own fresh cache): per-kernel median
    python -m tt_backend bench build --per-kernel    # also one line per kernel
    python -m tt_backend bench build --isolated      # every kernel on an empty cache of its own

Each kernel goes the plugin's way (tt_backend.ops_tt.tt_to_program, without tinygrad around it): tinygrad's name for
it, `lowering.select.lower` with the plugin's placer, `for_target` + `render` (Jinja), `runtime.compile.compile_kernel`.
Stages, each timed alone (wall milliseconds, and CPU milliseconds of this process plus every compiler process it ran):

  * frontend   - `lowering.frontend.lower_ast` (AST -> index expressions + value DAG), called once more on its own
  * lower      - `lower` as the plugin calls it: frontend, every family's candidates (placement included), the plan
  * placement  - `Placer.place` on that lowered kernel, called once more on its own with the placer's kept
                 evaluations forgotten (tt_backend.placement_eval keeps them by content): the sample evaluation
  * reshaped   - `Placer.place` right after, on the same expression at twice the rows: a kernel new only by its
                 shape, whose evaluations the placer finds by content
  * render     - `for_target` + `Plan.render` + `split`: the five sources and the generated headers
  * compile    - `compile_kernel` on an empty cache: five ELFs, the shared programs among them taken from memory (per
                 ELF built: the compiler process's wall time)
  * build      - render + compile: what issue 12 calls building a kernel ("render + five ELFs")
  * cached     - `compile_kernel` again on the same sources: five disk-cache hits

The first kernel of a process also loads the Jinja templates and builds the per-process objects (crt0, the device
library) and the shared programs (lowering/families/shared_programs.py: the reader, writer, unpacker and packer that
elementwise kernels share, the same image for every kernel); it is built once before the measured kernels and
reported on its own line. Kernels are distinct by their compute. By default a pass builds them into one compile
cache, as a program does: a kernel whose reader or writer another kernel already built (same input count and dtypes,
any size), or whose unpack or pack part of the compute kernel (TRISC0, TRISC2: same streams and formats, other math)
does, finds it there, which the `from cache` column counts; `--isolated` gives each kernel an empty cache, so every
ELF that is its own is built. In both modes crt0, the device library and the shared programs are built once by the
process (for the warm-up kernel) and taken from memory (the `programs` column), and the compiler's plan of each
core's command lines (runtime/gcc_steps.py) is asked for once per process: none is part of a kernel's figure
(TT_SHARED_PROGRAMS=0: every kernel's own cores, all five built under --isolated). docs/performance.md §9 says where
the time goes.
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field

from tinygrad import Tensor, dtypes
from tinygrad.uop.ops import Ops

from tt_backend.lowering.codegen.sources import split
from tt_backend.lowering.frontend import lower_ast
from tt_backend.lowering.plan import for_target
from tt_backend.lowering.select import lower
from tt_backend.ops_tt import kernel_name
from tt_backend.placement_eval import EVAL_STATS, clear_evaluations, placer
from tt_backend.runtime import compile as C

# (label, shape, dtype, expression of inputs a, b, c): small elementwise kernels, each compute distinct
KERNELS = [
    ("a+b", (64, 64), "float32", lambda a, b, c: a + b),
    ("a*b", (64, 64), "float32", lambda a, b, c: a * b),
    ("a-b", (64, 64), "float32", lambda a, b, c: a - b),
    ("a*2+1", (64, 64), "float32", lambda a, b, c: a * 2 + 1),
    ("a*b+a", (64, 64), "float32", lambda a, b, c: a * b + a),
    ("exp", (64, 64), "float32", lambda a, b, c: a.exp()),
    ("sqrt", (64, 64), "float32", lambda a, b, c: a.sqrt()),
    ("relu", (64, 64), "float32", lambda a, b, c: a.relu()),
    ("max(a,b)", (64, 64), "float32", lambda a, b, c: a.maximum(b)),
    ("a/b", (64, 64), "float32", lambda a, b, c: a / b),
    ("sigmoid", (64, 64), "float32", lambda a, b, c: a.sigmoid()),
    ("log", (64, 64), "float32", lambda a, b, c: a.log()),
    ("abs", (64, 64), "float32", lambda a, b, c: a.abs()),
    ("a*b*c", (64, 64), "float32", lambda a, b, c: a * b * c),
    ("where(a<b,a,c)", (64, 64), "float32", lambda a, b, c: (a < b).where(a, c)),
    ("(a-b)^2", (32, 96), "float32", lambda a, b, c: (a - b).square()),
    ("a+b bf16", (64, 64), "bfloat16", lambda a, b, c: a + b),
    ("a*b bf16", (64, 64), "bfloat16", lambda a, b, c: a * b),
    ("-a", (128, 32), "float32", lambda a, b, c: -a),
    ("(a+1)/(b*b+1)", (96, 32), "float32", lambda a, b, c: (a + 1) / (b * b + 1)),
]
WARMUP = ("a+1 (warm-up)", (32, 32), "float32", lambda a, b, c: a + 1)
STAGES = ("frontend", "lower", "placement", "reshaped", "render", "compile", "build", "cached")


def kernel_ast(shape, dtype, fn):
    dt = getattr(dtypes, dtype)
    a, b, c = (Tensor.empty(*shape, device="CPU", dtype=dt) for _ in range(3))
    (ast,) = [k.src[0] for k in fn(a, b, c).schedule_linear().src if k.op is Ops.CALL and k.src[0].op is Ops.SINK]
    return ast


def cpu_s() -> float:
    """CPU seconds of this process and of its reaped children (the compiler processes and theirs)."""
    s, ch = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + ch.ru_utime + ch.ru_stime


@dataclass
class Timed:
    wall: dict = field(default_factory=dict)     # stage -> ms
    cpu: dict = field(default_factory=dict)      # stage -> ms
    elf_ms: dict = field(default_factory=dict)   # compiler process -> wall ms
    from_cache: int = 0                          # ELFs of the uncached build found in the cache
    programs: int = 0                            # ... that are shared programs this process built (shared_programs.py)

    @contextmanager
    def stage(self, name: str):
        w, c = time.perf_counter(), cpu_s()
        yield
        self.wall[name], self.cpu[name] = 1e3 * (time.perf_counter() - w), 1e3 * (cpu_s() - c)


def build_one(shape, dtype, fn, target: str = "emu") -> Timed:
    """One kernel through the plugin's build path, every stage timed (the compile cache is the caller's)."""
    ast = kernel_ast(shape, dtype, fn)
    name, pl, t = kernel_name(ast), placer(None, None), Timed()
    with t.stage("frontend"):
        lk = lower_ast(ast, name)
    with t.stage("lower"):
        plan = lower(ast, name, pl)
    clear_evaluations()         # the placement alone, as new as in `lower`
    with t.stage("placement"):
        pl.place(lk)
    other = kernel_ast((2 * shape[0], *shape[1:]), dtype, fn)     # the same expression at twice the rows
    lk_other = lower_ast(other, kernel_name(other))
    with t.stage("reshaped"):
        pl.place(lk_other)
    with t.stage("render"):
        sources, headers = split(for_target(plan, target).render())
    hits, programs = C.STATS["cache_hits"], C.STATS["programs_reused"]
    with t.stage("compile"):
        C.compile_kernel(sources, headers, name, timings=t.elf_ms)
    t.from_cache, t.programs = C.STATS["cache_hits"] - hits, C.STATS["programs_reused"] - programs
    with t.stage("cached"):
        C.compile_kernel(sources, headers, name)
    for d in (t.wall, t.cpu):
        d["build"] = d["render"] + d["compile"]
    return t


def percentile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tt_backend bench build", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=1, help="passes over the kernels, each on a fresh compile cache; "
                                                          "a kernel's figure is its median over the passes")
    ap.add_argument("--kernels", type=int, default=len(KERNELS), help=f"the first N of the {len(KERNELS)} kernels")
    ap.add_argument("--per-kernel", action="store_true", help="one line per kernel as well")
    ap.add_argument("--isolated", action="store_true", help="each kernel on an empty compile cache of its own (its "
                                                             "own ELFs all built), instead of one cache per pass")
    args = ap.parse_args(argv)
    kernels = KERNELS[:max(1, args.kernels)]
    old = os.environ.get("TT_CACHE_DIR")
    try:
        with tempfile.TemporaryDirectory(prefix="tt_bench_build_") as tmp:
            os.environ["TT_CACHE_DIR"] = os.path.join(tmp, "warm-up")
            first = build_one(*WARMUP[1:])
            passes = []
            for p in range(args.repeat):
                clear_evaluations()
                passes.append([])
                for k, kernel in enumerate(kernels):
                    os.environ["TT_CACHE_DIR"] = os.path.join(tmp, f"pass{p}" + (f"-{k}" if args.isolated else ""))
                    passes[-1].append(build_one(*kernel[1:]))
    finally:
        if old is None: os.environ.pop("TT_CACHE_DIR", None)
        else: os.environ["TT_CACHE_DIR"] = old
    print(f"compiler: {C.compiler().describe()}; CPUs: {os.cpu_count()}; {len(kernels)} kernels x {args.repeat} "
          f"pass(es), an empty compile cache per {'kernel' if args.isolated else 'pass'}")
    print(f"first kernel of the process (templates loaded, per-process objects built): build "
          f"{first.wall['build']:.1f} ms wall / {first.cpu['build']:.1f} ms CPU")

    def med(k: int, what: str, stage: str) -> float:
        return statistics.median(getattr(ps[k], what)[stage] for ps in passes)
    if args.per_kernel:
        print(f"{'kernel':18s} " + " ".join(f"{s:>9s}" for s in STAGES) + "  from cache  programs  ELF wall ms")
        for k, (label, *_) in enumerate(kernels):
            elfs = " ".join(f"{c}={v:.0f}" for c, v in sorted(passes[0][k].elf_ms.items()))
            print(f"{label:18s} " + " ".join(f"{med(k, 'wall', s):9.1f}" for s in STAGES)
                  + f"  {passes[0][k].from_cache:10d}  {passes[0][k].programs:8d}  {elfs}")
    print(f"{'stage (ms)':12s} {'wall median':>12s} {'wall p90':>9s} {'CPU median':>11s} {'CPU p90':>8s}")
    for s in STAGES:
        w = [med(k, "wall", s) for k in range(len(kernels))]
        c = [med(k, "cpu", s) for k in range(len(kernels))]
        print(f"{s:12s} {statistics.median(w):12.1f} {percentile(w, 0.9):9.1f} {statistics.median(c):11.1f} "
              f"{percentile(c, 0.9):8.1f}")
    print(f"placer evaluations in this process: {EVAL_STATS['evaluated']} run, {EVAL_STATS['reused']} reused by "
          f"content")
    hits = [p[k].from_cache for p in passes for k in range(len(kernels))]
    shared = [p[k].programs for p in passes for k in range(len(kernels))]
    print(f"ELFs of the kernels that are shared programs (built once by this process, like the device library): "
          f"{sum(shared)} of {5 * len(shared)}")
    print(f"ELFs of the kernels found in the cache (another kernel's reader/writer/unpack/pack): "
          f"{sum(hits)} of {5 * len(hits)}")
    return 0
