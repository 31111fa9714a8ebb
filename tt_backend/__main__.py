"""`python -m tt_backend info` (what is installed and found), `python -m tt_backend demo` (the README expression on
the TT device against tinygrad's CPU device, with the per-kernel placement report), `python -m tt_backend tune
(script.py | -m module | -c code) [--budgets 1e-4,1e-3,1e-2]` (tt_backend/tune.py: placements, error and cycles per
kernel and budget, as a table, a plot and a summary), `python -m tt_backend bench <name>` (tt_backend/bench: every
benchmark, by name) and `python -m tt_backend cache --info | --clear` (the compile cache: where, how many entries,
how big; or empty it).

Errors a user can act on (TTError) end the command with their message and exit status 2, never a traceback."""
from __future__ import annotations

import argparse
import os
import site
import sys
import tempfile
from importlib.metadata import version
from pathlib import Path

import numpy as np
from tinygrad import Device, Tensor
from tinygrad.helpers import size_to_str

import tt_backend
from tt_backend import _finder, bench, knobs
from tt_backend.chip import interleave, layout
from tt_backend.chip.grid import N_BANKS, TENSIX_ROWS, Grid
from tt_backend.chip.errors import TTError
from tt_backend.runtime.compile import cache_dir, cache_info, clear_cache, compiler
from tt_backend.runtime.emu.accel import (direct_issue, native, noc_native, rv32_native, sfpu_issue_native,
                                          sfpu_native, tile_native)
from tt_backend.runtime.emu.dram import Dram
from tt_backend.runtime.targets import available_targets

DEMO = "((a*b+1).maximum(0.5) - (a<0).where(a.exp2(), b.reciprocal()))"


def _version(mod: str) -> str:
    try:
        return version(mod)
    except Exception:
        return "not installed"


def _pth_files() -> list[str]:
    dirs = [*site.getsitepackages(), site.getusersitepackages()]
    return [str(Path(d) / "tt_backend.pth") for d in dirs if (Path(d) / "tt_backend.pth").exists()]


def _kib(n: int) -> str:
    return f"{n // 1024} KiB" if n < 1 << 30 else f"{n / (1 << 30):g} GiB"


def chip_model_rows() -> list[tuple[str, str]]:
    """The chip the emulator models, from the layout the kernels are built against and the emulator's own memories."""
    local = ", ".join(f"{c} {_kib(layout.LOCAL_RAM_SIZE[c])}" for c in layout.CORES)
    grid = Grid()
    return [("chip model", f"Blackhole, {len(grid.tensix)} Tensix tiles ({grid.columns} x {len(TENSIX_ROWS)}; "
                           f"emu and ttsim split elementwise kernels over them, TT_CORES caps the count; the card "
                           f"path uses the tile at NoC ({layout.TILE_XY[0]}, {layout.TILE_XY[1]})); cycle model: emu "
                           f"only (ttsim and cards have none)"),
            ("tile cores", f"{len(layout.CORES)} RISC-V ({local} local RAM) + the Tensix coprocessor"),
            ("L1", f"{_kib(layout.L1_SIZE)} per tile (kernel data 0x{layout.DATA_BASE:X}..0x{layout.DATA_END:X})"),
            ("DRAM", f"{N_BANKS} banks of {_kib(Dram().size)}; buffers interleaved over them in "
                     f"{_kib(interleave.PAGE_BYTES)} pages (page i of a buffer in bank i mod {N_BANKS})")]


def compile_cache_row() -> tuple[str, str]:
    d = cache_dir()
    n = sum(1 for _ in d.glob("*.elf")) if d.is_dir() else 0
    return ("compile cache", f"{d} ({n} ELFs)" if d.is_dir() else f"{d} (not created yet)")


def info() -> int:
    rows = [("python", f"{sys.version.split()[0]} ({sys.executable})"),
            ("tt_backend", f"{tt_backend.__version__} ({Path(tt_backend.__file__).parent})"),
            ("import hook", ", ".join(_pth_files()) or "no tt_backend.pth in site-packages (source checkout?)"),
            ("finder active", str(any(type(f).__name__ == "TTFinder" for f in sys.meta_path)))]
    for dist in ("tinygrad", "numpy", "networkx", "jinja2", "pyelftools", "matplotlib", "tt-umd"):
        rows.append((dist, _version(dist)))
    rows.append(("DEVICE / DEV", f"{os.environ.get('DEVICE', '-')} / {os.environ.get('DEV', '-')}"))
    try:
        rows.append(("TT_BACKEND", knobs.backend()))
    except Exception as e:
        rows.append(("TT_BACKEND", f"error: {e}"))
    try:
        c = compiler()
        rows.append(("RISC-V compiler", c.describe()))
    except Exception as e:
        rows.append(("RISC-V compiler", f"NOT FOUND: {e}"))
    for t in available_targets():
        rows.append((f"target {t.name}", ("available: " if t.available else "unavailable: ") + t.detail))
    rows.append(("TT_DUMP", os.environ.get("TT_DUMP", "-")))
    rows += chip_model_rows() + [("emulator MVMUL runs", native.status()),
                                 ("emulator SFPU, one at a time", sfpu_native.status()),
                                 ("emulator SFPU words pushed one by one", sfpu_issue_native.status()),
                                 ("emulator other words pushed one by one", sfpu_issue_native.plain_status()),
                                 ("emulator MOP batches (memo hits)", sfpu_issue_native.batch_status()),
                                 ("emulator MOPs pushed to an idle thread", sfpu_issue_native.mop_push_status()),
                                 ("emulator REPLAYs pushed one by one", sfpu_issue_native.replay_status()),
                                 ("emulator UNPACR/PACR/MVMUL/ELW data", tile_native.status()),
                                 ("emulator tile, wait and semaphore handlers", direct_issue.tile_handlers_status()),
                                 ("emulator RISC-V cores", rv32_native.status()),
                                 ("emulator NoC reservations", noc_native.status()), compile_cache_row()]
    w = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k:<{w}}  {v}")
    return 0


def _reference_device() -> str:
    """tinygrad's CPU device when it works here (it needs clang), else its pure-Python interpreter."""
    for dev in ("CPU", "PYTHON"):
        try:
            (Tensor([1.0], device=dev) + 1).numpy()
            return dev
        except Exception:
            continue
    raise RuntimeError("neither tinygrad's CPU nor PYTHON device works")


def demo(seed: int = 1) -> int:
    dump = os.environ.get("TT_DUMP") or tempfile.mkdtemp(prefix="tt_demo_")
    os.environ["TT_DUMP"] = dump          # read when the kernels compile: gives us the placement reports
    if Device.DEFAULT != "TT":
        print(f"note: the default device is {Device.DEFAULT} (set DEVICE=TT to make TT the default); "
              "the demo runs on TT explicitly")
    rng = np.random.default_rng(seed)
    an, bn = rng.standard_normal((64, 128)).astype(np.float32), rng.standard_normal(128).astype(np.float32)

    def f(a, b): return ((a * b + 1).maximum(0.5) - (a < 0).where(a.exp2(), b.reciprocal()))
    print(f"demo: {DEMO} with a{an.shape}, b{bn.shape}")
    tt = f(Tensor(an, device="TT"), Tensor(bn, device="TT")).numpy()
    ref_dev = _reference_device()
    ref = f(Tensor(an, device=ref_dev), Tensor(bn, device=ref_dev)).numpy()
    with np.errstate(all="ignore"):
        npref = np.maximum(an * bn + 1, np.float32(0.5)) - np.where(an < 0, np.exp2(an), np.float32(1) / bn)
    err = float(np.abs(tt - ref).max())
    rel = err / float(np.abs(ref).max())
    print(f"max abs error vs tinygrad {ref_dev}: {err:.3g} (relative to max |ref|: {rel:.3g}); "
          f"vs numpy: {float(np.abs(tt - npref).max()):.3g}")
    for rep in sorted(Path(dump).glob("*/report.txt")):
        print(f"\n--- {rep.parent.name} ({rep.parent}) ---")
        print(rep.read_text().rstrip())
    ok = rel < 1e-6
    print("\nOK" if ok else "\nMISMATCH")
    return 0 if ok else 1


def cache(clear: bool) -> int:
    if clear:
        n = clear_cache()
        print(f"removed {n} files from {cache_info()['dir']}")
        return 0
    i = cache_info()
    if not i["exists"]:
        print(f"location   {i['dir']} (not created yet)")
        return 0
    print(f"location   {i['dir']}")
    print(f"entries    {i['entries']}")
    print(f"size       {size_to_str(i['bytes'])} ({i['bytes']} bytes)")
    for k, what in (("unusable", "entries damaged or of an older version (rebuilt when needed)"),
                    ("temporary", "files of interrupted writes")):
        if i[k]: print(f"{k:<10} {i[k]} {what}; cache --clear removes them")
    return 0


def _check_tune_paths(p: argparse.ArgumentParser, args, program) -> None:
    """Refuse what would only fail later, after minutes of runs: a missing script, an output path that cannot be."""
    if program.script is not None and not Path(program.script).is_file():
        p.error(f"tune: script {program.script!r} not found")
    if args.out is not None and Path(args.out).exists() and not Path(args.out).is_dir():
        p.error(f"tune: --out {args.out!r} is a file; give a directory (created if missing)")
    if args.png is not None and not Path(args.png).resolve().parent.is_dir():
        p.error(f"tune: --png {args.png!r}: directory {str(Path(args.png).resolve().parent)!r} does not exist")


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(argv)
    except TTError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


def _main(argv: list[str] | None) -> int:
    p = argparse.ArgumentParser(prog="python -m tt_backend", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("info", help="versions, compiler, targets, import hook")
    d = sub.add_parser("demo", help="the README expression on TT vs CPU, with the placement report")
    d.add_argument("--seed", type=int, default=1)
    tu = sub.add_parser("tune", help="run a program under several TT_ERR_BUDGETs: placements, error, cycles per "
                        "kernel (table, tune.png, tune.md)")
    tu.add_argument("script", nargs="?", help="the program's script (or -m / -c); arguments after it go to the program")
    what = tu.add_mutually_exclusive_group()
    what.add_argument("-m", dest="module", metavar="MODULE", help="run a module as `python -m MODULE` does")
    what.add_argument("-c", dest="code", metavar="CODE", help="run a code string as `python -c CODE` does")
    tu.add_argument("--budgets", default="1e-4,1e-3,1e-2", help="comma list (a run without a budget is always added)")
    tu.add_argument("--out", default=None, help="directory for the per-budget dumps (default: a temp dir)")
    tu.add_argument("--png", default=None, help="plot path (default: <out>/tune.png); the summary goes next to it "
                    "as .md")
    b = sub.add_parser("bench", help="benchmarks by name (bench <name> -h for a benchmark's options)",
                       description="\n".join(f"{name}: {what}" for name, (_, what) in bench.BENCHES.items()),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    b.add_argument("name", choices=list(bench.BENCHES), help="which benchmark")
    b.add_argument("args", nargs=argparse.REMAINDER, help="the benchmark's own options (-h included)")
    c = sub.add_parser("cache", help="the compile cache: --info (location, entries, size) or --clear")
    what = c.add_mutually_exclusive_group(required=True)
    what.add_argument("--info", action="store_true", help="where the cache is, its entries and size")
    what.add_argument("--clear", action="store_true", help="remove every cache entry (nothing else in the directory)")
    args, rest = p.parse_known_args(argv)      # tune: everything else goes to the script
    if args.cmd == "bench":
        return bench.run(args.name, args.args)
    if rest and args.cmd != "tune":
        p.error(f"unrecognized arguments: {' '.join(rest)}")
    if args.cmd == "info": return info()
    if args.cmd == "cache": return cache(args.clear)
    if args.cmd == "tune":
        # lazy: tune's plotting (matplotlib) costs ~0.4 s of imports (python -X importtime) the other commands skip
        from tt_backend.tune import Program, parse_budgets, tune
        # with -m / -c, a positional argument is the program's first argument (as for python itself)
        prog_args = ([args.script] if args.script is not None and (args.module or args.code) else []) + rest
        try:
            budgets = parse_budgets(args.budgets)
            program = Program(None if args.module or args.code else args.script, args.module, args.code,
                              tuple(prog_args))
        except TTError as e:
            p.error(str(e))
        _check_tune_paths(p, args, program)
        return tune(program, budgets, args.out, args.png)
    return demo(args.seed)


if __name__ == "__main__":
    sys.exit(main())
