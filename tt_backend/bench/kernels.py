"""Emulated against predicted cycles for the kernels issue 10 measures, one core, DRAM to DRAM.

    python -m tt_backend bench kernels                      # every row at its full size, emu only
    python -m tt_backend bench kernels --rows matmul-hifi2,demo --scale 4    # sizes divided by 4 (quick look)
    python -m tt_backend bench kernels --ttsim              # each row also on ttsim: outputs bit-identical?
    python -m tt_backend bench kernels --rows grid          # a*b+a at 2048x2048 on 1, 8 and 64 cores
    python -m tt_backend bench kernels --rows demo-grid     # the README demo expression likewise (compute-bound)
    python -m tt_backend bench kernels --rows matmul-grid   # bf16 1024^3 HiFi2 matmul on 1, 8 and 64 cores
    python -m tt_backend bench kernels --rows softmax-grid  # a row softmax at 2048x2048, TT_CORES 1, 8 and 64
    python -m tt_backend bench kernels --rows sum-grid      # x.sum() at 2048x2048 (partials, then a combine)

Columns: the placement's compute cycles (what the selector prices), the whole launch predicted by
lowering/families/mover_cost.py (reader, compute and writer as a pipeline), the emulated cycles and their ratio, ...;
two spans of a program row's launch, each from the first unpack to the end of the last pack (trace.json's
compute_span_cycles): `stream` in the normal, streamed launch (it includes the compute's waits for the reader's later
tiles), `L1-res` with TT_L1_RESIDENT=1 (the reader runs to its end before the compute cores start: every input tile
already in L1, the compute part L1 to L1 as issue 10 measures it; '-' where the reader cannot end alone, its inputs
needing more slots than its circular buffers hold; docs/performance.md §8.5). The L1-resident run's output must be
the streamed run's bit for bit (and ttsim's, with --ttsim).
Rows: bf16 matmul (M = K = N = 512) on the FPU at HiFi2 and HiFi4 (planned directly with that fidelity: the selector
would pick HiFi3 for HiFi4's error), a bf16 256^3 matmul through tinygrad at TT_ERR_BUDGET=1e-2 and
TT_BUDGET_SAMPLED=1 (the selector's fidelity; without the opt-in a matmul stays on the SFPU, docs/placement.md §3),
RMSNorm-2048 (bf16 x, fp32 gamma, TT_ERR_BUDGET=1e-2: x*gamma on the FPU; `rmsnorm-fused` the same program under
PCONTIG=2, one kernel, x*gamma on the FPU there too: lowering/families/fused_reduce.py; a program row's kernel column
names the ops its placement puts on the FPU, "MUL:FPU-HiFi3"), the README demo expression at 512x512 and
an fp32 elementwise a*b+a at 2048x2048; `grid`: the same a*b+a planned directly (macro-free, so that the same ELFs
run on ttsim) and launched split over 1, 8 and 64 cores (the split forced, not the launch model's choice), with each
run's speed-up over one core and host wall time (DRAM-bound at 64 cores); `demo-grid`: the demo expression likewise
(SFPU-bound: about 4,200 cycles per tile on one core against a*b+a's 315, for the same bytes); `matmul-grid`: the
bf16 1024^3 HiFi2 matmul on at most 1, 8 and 64 cores, the grid shape and B's layout the launch model's choice
(FpuMatmulPlan.use_cores; kernel column: grid, tiles per core, B's layout); `softmax-grid`: x.softmax(-1) at
2048x2048 through tinygrad with
TT_CORES = 1, 8 and 64 (the launch model picks each kernel's count up to the cap; the kernel column lists them), its
three kernels' cycles summed; `sum-grid`: x.sum() at 2048x2048 likewise (tinygrad splits it into per-row partial
sums and their sum: two launches). Emulated cycles: the slowest core of the launch (the slowest
tile's). `banks`: the launch model's floor for the launch's DRAM bytes on the eight banks (mover_cost.py,
DRAM_BYTES_PER_CYCLE: the p150a's published 512 GB/s), so emulated / banks near 1 means DRAM-bound and the one-core
cycles over `banks` bound every speed-up; `GB/s`: the DRAM traffic of the emulated run at 1.35 GHz (published peak
512 GB/s; a third party measured about 300 GB/s from 118 cores on silicon, docs/performance.md §3).
The program rows run through tinygrad (DEVICE=TT) in a subprocess with TT_DUMP and read each kernel's
report.json; the matmul rows launch the plan on the emulator directly.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from tinygrad import Tensor, dtypes
from tinygrad.uop.ops import Ops

from tt_backend.__main__ import DEMO
from tt_backend.chip.interleave import BUFFER_ALIGN
from tt_backend.lowering.codegen.sources import split
from tt_backend.lowering.families.fpu_matmul import FpuMatmulPlan, plan_matmul
from tt_backend.lowering.families.mover_cost import DRAM_BYTES_PER_CYCLE
from tt_backend.lowering.families.matmul_spec import match_matmul
from tt_backend.lowering.plan import for_target
from tt_backend.lowering.select import lower
from tt_backend.placement_eval import measured_cycles, placer
from tt_backend.runtime.compile import compile_kernel
from tt_backend.runtime.driver import launch
from tt_backend.runtime.emu.device import EmuDevice
from tt_backend.runtime.hw_device import AICLK_HZ
from tt_backend.runtime.ttsim_device import TtsimDevice
from tt_backend.trace import TRACE_NAME


@dataclass(frozen=True)
class MatmulRow:
    """bf16 (n x n) @ (n x n) -> bf16 on the FPU at a fixed fidelity."""
    n: int
    fidelity: str


@dataclass(frozen=True)
class MatmulGridRow:
    """bf16 (n x n) @ (n x n) -> bf16 on the FPU at `fidelity`, on at most each core count of `cores`."""
    n: int
    fidelity: str
    cores: tuple[int, ...]


@dataclass(frozen=True)
class GridRow:
    """An fp32 elementwise expression `expr` of a and b (n x n, one kernel) launched split over each core count of
    `cores`."""
    n: int
    cores: tuple[int, ...]
    expr: str


@dataclass(frozen=True)
class GridProgramRow:
    """A tinygrad program (as ProgramRow) run with TT_CORES at each count of `cores` (a cap: the launch model picks
    each kernel's count up to it): its kernels' cycles summed, and the speed-up over the first count."""
    n: int
    code: str
    cores: tuple[int, ...]


@dataclass(frozen=True)
class ProgramRow:
    """A tinygrad program (code run with `python -c`; it leaves its result in `out`), sizes given by `n`."""
    n: int
    code: str
    env: dict = field(default_factory=dict)


_SAVE = "\nimport numpy as _np, os as _os; _np.save(_os.environ['BENCH_OUT'], out.numpy())\n"
_RAND = "import numpy as np\nfrom tinygrad import Tensor, dtypes\nrng = np.random.default_rng(0)\n"
_RMSNORM = (_RAND + "xb = (rng.standard_normal({n}).astype(np.float32).view(np.uint32) & 0xFFFF0000)"
            ".view(np.float32)\nx = Tensor(xb.tolist(), dtype=dtypes.bfloat16).realize()\n"
            "w = Tensor(rng.standard_normal({n}).astype(np.float32)).realize()\n"
            "xf = x.float()\nout = (xf * (xf.square().mean(-1, keepdim=True) + 1e-5).rsqrt() * w).realize()")
ROWS = {
    "matmul-hifi2": MatmulRow(512, "HiFi2"),
    "matmul-hifi4": MatmulRow(512, "HiFi4"),
    "matmul-tinygrad": ProgramRow(256, _RAND + (
        "a = Tensor(rng.standard_normal(({n}, {n})).astype(np.float32), dtype=dtypes.bfloat16).realize()\n"
        "b = Tensor(rng.standard_normal(({n}, {n})).astype(np.float32), dtype=dtypes.bfloat16).realize()\n"
        "out = (a @ b).realize()"), {"TT_ERR_BUDGET": "1e-2", "TT_BUDGET_SAMPLED": "1"}),
    "rmsnorm": ProgramRow(2048, _RMSNORM, {"TT_ERR_BUDGET": "1e-2"}),
    # the same program with tinygrad's partial-contiguous fusion: one kernel r_2048_2048 (fused_reduce.py), x*gamma on
    # the FPU (the elementwise pass's placement)
    "rmsnorm-fused": ProgramRow(2048, _RMSNORM, {"TT_ERR_BUDGET": "1e-2", "PCONTIG": "2"}),
    "demo": ProgramRow(512, _RAND + (
        "a = Tensor(rng.standard_normal(({n}, {n})).astype(np.float32)).realize()\n"
        "b = Tensor(rng.uniform(0.5, 2, ({n}, {n})).astype(np.float32)).realize()\n"
        f"out = {DEMO}.realize()")),
    "elementwise": ProgramRow(2048, _RAND + (
        "a = Tensor(rng.standard_normal(({n}, {n})).astype(np.float32)).realize()\n"
        "b = Tensor(rng.standard_normal(({n}, {n})).astype(np.float32)).realize()\n"
        "out = (a * b + a).realize()")),
    "grid": GridRow(2048, (1, 8, 64), "a * b + a"),
    "demo-grid": GridRow(2048, (1, 8, 64), DEMO),
    "matmul-grid": MatmulGridRow(1024, "HiFi2", (1, 8, 64)),
    "softmax-grid": GridProgramRow(2048, _RAND + (
        "x = Tensor(rng.standard_normal(({n}, {n})).astype(np.float32)).realize()\n"
        "out = x.softmax(-1).realize()"), (1, 8, 64)),
    "sum-grid": GridProgramRow(2048, _RAND + (
        "x = Tensor(rng.standard_normal(({n}, {n})).astype(np.float32)).realize()\n"
        "out = x.sum().realize()"), (1, 8, 64)),
}


@dataclass
class Measured:
    row: str
    kernel: str
    compute: int | None       # the placement's compute cycles (the selector's price)
    predicted: int | None     # the whole launch (Plan.launch_cycles: movers included)
    emulated: int | None
    seconds: float
    same_on_ttsim: bool | None = None     # None: not run on ttsim
    cores: int | None = None              # grid rows: the cores the launch was split over, and the speed-up over one
    speedup: float | None = None
    bank: int | None = None               # the DRAM banks' time for the launch's bytes (the launch model's floor)
    streamed_span: int | None = None      # program rows: first unpack to last pack in the streamed launch
    l1_span: int | None = None            # the same with the inputs resident in L1 first (TT_L1_RESIDENT=1)

    @property
    def dram_gbs(self) -> float | None:
        """The DRAM traffic per second of the emulated run at AICLK (the banks' floor is DRAM_BYTES_PER_CYCLE)."""
        if not (self.bank and self.emulated): return None
        return self.bank * DRAM_BYTES_PER_CYCLE / self.emulated * AICLK_HZ / 1e9


def matmul_plan(n: int, fidelity: str) -> FpuMatmulPlan:
    a = Tensor.empty(n, n, device="CPU", dtype=dtypes.bfloat16)
    b = Tensor.empty(n, n, device="CPU", dtype=dtypes.bfloat16)
    call = [c for c in (a @ b).schedule_linear().src if c.op is Ops.CALL][-1]
    spec = match_matmul(call.src[0])
    assert spec is not None, "bf16 a @ b is a plain matmul"
    return plan_matmul(spec, f"bench_mm_{n}_{fidelity}", fidelity)


def launch_plan(dev, plan, arrays: dict[int, np.ndarray], elfs) -> tuple[bytes, float]:
    """Inputs (buffer slot -> array) into DRAM, other buffers poisoned, one launch; (the output's bytes, seconds)."""
    addrs, addr = [], BUFFER_ALIGN
    for buf in plan.buffers:            # laid out as the allocator would: each buffer's page i in bank i mod 8
        addrs.append(addr)
        dev.write_dram(addr, arrays[buf.slot].tobytes() if buf.slot in arrays else b"\xAB" * buf.nbytes)
        addr += -(-buf.nbytes // BUFFER_ALIGN) * BUFFER_ALIGN
    t0 = time.perf_counter()
    launch(dev, elfs, plan.arg_words(addrs), timeout_s=3600,
           per_tile=plan.core_arg_words(addrs) if plan.cores > 1 else None,
           tile_xys=plan.core_xys() if plan.cores > 1 else None)
    secs = time.perf_counter() - t0
    return dev.read_dram(addrs[plan.output.buf], plan.buffers[plan.output.buf].nbytes), secs


def matmul_arrays(plan: FpuMatmulPlan) -> dict[int, np.ndarray]:
    rng = np.random.default_rng(0)
    bf16 = lambda o: (rng.standard_normal(o.nbytes // 2).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    return {plan.spec.a.slot: bf16(plan.spec.a), plan.spec.b.slot: bf16(plan.spec.b)}


def run_matmul(name: str, row: MatmulRow, ttsim_lib: str | None) -> list[Measured]:
    plan = matmul_plan(row.n, row.fidelity)
    arrays = matmul_arrays(plan)
    elfs = compile_kernel(*split(plan.render()), plan.name)
    dev = EmuDevice()
    got, secs = launch_plan(dev, plan, arrays, elfs)
    m = Measured(name, plan.name, plan.placement.report()["predicted_cycles"], plan.launch_cycles()["total"],
                 max(dev.stats()["cycles"].values()), secs)
    if ttsim_lib:
        with TtsimDevice(ttsim_lib) as sim:
            m.same_on_ttsim = launch_plan(sim, plan, arrays, elfs)[0] == got
    return [m]


def run_matmul_grid(name: str, row: MatmulGridRow, ttsim_lib: str | None) -> list[Measured]:
    """The grid and B's layout use_cores picks for at most each core count (the ELFs rendered for that choice);
    outputs compared bit for bit with the one-core run's (and with ttsim's)."""
    plan = matmul_plan(row.n, row.fidelity)
    arrays = matmul_arrays(plan)
    out, first = [], None
    for cores in row.cores:
        plan.use_cores(cores)
        elfs = compile_kernel(*split(plan.render()), plan.name)
        dev = EmuDevice()
        before = dev.stats()
        got, secs = launch_plan(dev, plan, arrays, elfs)
        lc = plan.launch_cycles()
        first = same_as_first(got, first, f"{name} on grid {lc['grid']}")
        m = Measured(f"{name}-{cores}", f"{plan.name} {lc['grid']}x{lc['tiles_per_core']}t {plan.b_layout}",
                     plan.placement.report()["predicted_cycles"], lc["total"],
                     measured_cycles((before, dev.stats()))["max"], secs, cores=plan.cores, bank=lc.get("bank"))
        m.speedup = out[0].emulated / m.emulated if out else 1.0
        m.same_on_ttsim = same_on_ttsim(ttsim_lib, plan, arrays, elfs, got)
        out.append(m)
    return out


def same_as_first(got: bytes, first: bytes | None, what: str) -> bytes:
    """The first split's output bytes, once `got` (the output of `what`) is known to equal them: every split of a grid
    row computes the same bits from the same inputs (the same ELFs; the matmul's B layouts are bit-identical on data
    without NaN), so any difference is a bug, not noise."""
    if first is not None and got != first:
        raise SystemExit(f"bench kernels: {what} differs from the first split's output")
    return got if first is None else first


def same_on_ttsim(ttsim_lib: str | None, plan, arrays: dict[int, np.ndarray], elfs, got: bytes) -> bool | None:
    """The same launch on ttsim gives the emulator's output bytes `got` (None without ttsim)."""
    if not ttsim_lib:
        return None
    with TtsimDevice(ttsim_lib) as sim:
        return launch_plan(sim, plan, arrays, elfs)[0] == got


def run_grid(name: str, row: GridRow, ttsim_lib: str | None) -> list[Measured]:
    a = Tensor.empty(row.n, row.n, device="CPU")
    b = Tensor.empty(row.n, row.n, device="CPU")
    calls = [c for c in eval(row.expr, {}, {"a": a, "b": b}).schedule_linear().src if c.op is Ops.CALL]
    assert len(calls) == 1, f"{row.expr} is one kernel"
    plan = for_target(lower(calls[0].src[0], f"bench_{name.replace('-', '_')}_{row.n}", placer()), "ttsim")
    rng = np.random.default_rng(0)
    arrays = {buf.slot: rng.standard_normal(buf.nbytes // 4).astype(np.float32) for k, buf in enumerate(plan.buffers)
              if k != plan.output.buf}
    elfs = compile_kernel(*split(plan.render()), plan.name)
    out, first = [], None
    for cores in row.cores:
        plan.cores = cores
        dev = EmuDevice()
        before = dev.stats()
        got, secs = launch_plan(dev, plan, arrays, elfs)
        first = same_as_first(got, first, f"{name} on {cores} cores")
        lc = plan.launch_cycles()
        m = Measured(f"{name}-{cores}", plan.name, plan.placement.report()["predicted_cycles"],
                     lc["total"], measured_cycles((before, dev.stats()))["max"], secs, cores=cores, bank=lc["bank"])
        m.speedup = out[0].emulated / m.emulated if out else 1.0
        m.same_on_ttsim = same_on_ttsim(ttsim_lib, plan, arrays, elfs, got)
        out.append(m)
    return out


BENCH_TIMEOUT_S = 4 * 3600     # TT_TIMEOUT for the program rows' launches, unless the caller sets one


def _run_program(code: str, env: dict, out: Path) -> float:
    # the program's device is DEVICE=TT: without the DEV tinygrad writes into this process's environment once it has
    # picked a default device (which the backend would refuse as a disagreement)
    parent = {k: v for k, v in os.environ.items() if k != "DEV"}
    # a full-size row's launch may take far longer than the driver's default TT_TIMEOUT (600 s) of host time on a
    # loaded machine (the 64-core 2048^2 softmax did, and the row's finished runs were lost with it)
    parent.setdefault("TT_TIMEOUT", str(BENCH_TIMEOUT_S))
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", code + _SAVE], env={**parent, **env, "BENCH_OUT": str(out)},
                       capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(f"bench kernels: the program failed:\n{r.stderr[-3000:]}")
    return time.perf_counter() - t0


def compute_spans(dump: Path) -> dict[str, int | None]:
    """Kernel directory name -> its last launch's compute span (trace.json), for every kernel TT_DUMP wrote."""
    spans = {}
    for rep in sorted(dump.glob("*/report.json")):
        trace = rep.parent / TRACE_NAME
        spans[rep.parent.name] = json.loads(trace.read_text())["otherData"].get("compute_span_cycles") \
            if trace.exists() else None
    return spans


def run_l1_resident(code: str, env: dict, tmp: Path, streamed: bytes) -> dict[str, int | None]:
    """The program again with every launch's inputs resident in L1 before its compute starts (TT_L1_RESIDENT=1): the
    spans per kernel directory, or {} where a launch's reader cannot end alone (the driver refuses it by name). Any
    other failure, or a result that is not the streamed run's bit for bit, ends the bench."""
    parent = {k: v for k, v in os.environ.items() if k != "DEV"}
    dump = tmp / "dump_l1"
    r = subprocess.run([sys.executable, "-c", code + _SAVE], capture_output=True, text=True,
                       env={"TT_TIMEOUT": str(BENCH_TIMEOUT_S), **parent, **env, "TT_BACKEND": "emu",
                            "TT_L1_RESIDENT": "1", "TT_DUMP": str(dump), "BENCH_OUT": str(tmp / "emu_l1.npy")})
    if r.returncode and "no L1-resident launch" in r.stderr:
        return {}
    if r.returncode:
        raise SystemExit(f"bench kernels: the L1-resident program failed:\n{r.stderr[-3000:]}")
    if np.load(tmp / "emu_l1.npy").tobytes() != streamed:
        raise SystemExit("bench kernels: the L1-resident run's output differs from the streamed run's")
    return compute_spans(dump)


def placed_name(report: dict) -> str:
    """A program row's kernel as the table names it: with the ops its placement puts on the FPU and their fidelity
    (report.json's nodes), e.g. "r_2048_2048 MUL:FPU-HiFi3" where x * gamma runs on the FPU."""
    fpu = [f"{n['op']}:FPU-{n['fidelity'] or 'x'}" for n in report.get("nodes") or [] if n["engine"] == "FPU"]
    return " ".join([report["kernel"], *fpu])


def run_program(name: str, row: ProgramRow, ttsim_lib: str | None) -> list[Measured]:
    code = row.code.format(n=row.n)
    with tempfile.TemporaryDirectory(prefix="tt_bench_kernels_") as tmp:
        tmp = Path(tmp)
        dump, base = tmp / "dump", {"DEVICE": "TT", **row.env}
        secs = _run_program(code, {**base, "TT_BACKEND": "emu", "TT_DUMP": str(dump)}, tmp / "emu.npy")
        streamed = np.load(tmp / "emu.npy").tobytes()
        l1_spans, spans = run_l1_resident(code, base, tmp, streamed), compute_spans(dump)
        out = []
        for rep in sorted(dump.glob("*/report.json")):
            r = json.loads(rep.read_text())
            launch = r.get("predicted_launch_cycles") or {}
            out.append(Measured(name, placed_name(r), r.get("predicted_cycles"), launch.get("total"),
                                r.get("emulated_cycles"), secs, cores=launch.get("cores"), bank=launch.get("bank"),
                                streamed_span=spans[rep.parent.name],
                                l1_span=l1_spans.get(rep.parent.name)))
        if ttsim_lib:
            sim = {**base, "TT_BACKEND": "ttsim", "TT_SIMULATOR": ttsim_lib}
            _run_program(code, sim, tmp / "sim.npy")
            same = np.load(tmp / "sim.npy").tobytes() == streamed
            if l1_spans:     # the L1-resident launches on ttsim too: the same bits
                _run_program(code, {**sim, "TT_L1_RESIDENT": "1"}, tmp / "sim_l1.npy")
                same = same and np.load(tmp / "sim_l1.npy").tobytes() == streamed
            for m in out: m.same_on_ttsim = same
    return out


def run_grid_program(name: str, row: GridProgramRow, ttsim_lib: str | None) -> list[Measured]:
    code, out = row.code.format(n=row.n), []
    for cores in row.cores:
        with tempfile.TemporaryDirectory(prefix="tt_bench_kernels_") as tmp:
            dump, base = Path(tmp) / "dump", {"DEVICE": "TT", "TT_CORES": str(cores)}
            secs = _run_program(code, {**base, "TT_BACKEND": "emu", "TT_DUMP": str(dump)}, Path(tmp) / "emu.npy")
            reps = [json.loads(p.read_text()) for p in sorted(dump.glob("*/report.json"))]
            launches = [r.get("predicted_launch_cycles") or {} for r in reps]
            total = lambda vals: sum(vals) if vals and None not in vals else None
            m = Measured(f"{name}-{cores}", f"{len(reps)} kernels, cores {'/'.join(str(l.get('cores', 1)) for l in launches)}",
                         total([r.get("predicted_cycles") for r in reps]), total([l.get("total") for l in launches]),
                         total([r.get("emulated_cycles") for r in reps]), secs, cores=cores,
                         bank=total([l.get("bank") for l in launches]))
            m.speedup = out[0].emulated / m.emulated if out and m.emulated and out[0].emulated else 1.0
            if ttsim_lib:
                _run_program(code, {**base, "TT_BACKEND": "ttsim", "TT_SIMULATOR": ttsim_lib}, Path(tmp) / "sim.npy")
                m.same_on_ttsim = np.load(Path(tmp) / "emu.npy").tobytes() == np.load(Path(tmp) / "sim.npy").tobytes()
        out.append(m)
    return out


def scaled(row, scale: int):
    n = max(32, row.n // scale)
    if isinstance(row, GridRow):
        return GridRow(n, row.cores, row.expr)
    if isinstance(row, MatmulGridRow):
        return MatmulGridRow(n, row.fidelity, row.cores)
    if isinstance(row, GridProgramRow):
        return GridProgramRow(n, row.code, row.cores)
    return MatmulRow(n, row.fidelity) if isinstance(row, MatmulRow) else ProgramRow(n, row.code, row.env)


def table(results: list[Measured]) -> str:
    lines = [f"{'row':<16} {'kernel':<30} {'compute':>9} {'predicted':>10} {'emulated':>10} {'pred/emu':>8} "
             f"{'cores':>5} {'speed-up':>8} {'banks':>8} {'GB/s':>5} {'host s':>7} {'stream':>7} {'L1-res':>7} "
             f"{'ttsim':>9}"]
    for m in results:
        ratio = f"{m.predicted / m.emulated:.2f}" if m.predicted and m.emulated else "-"
        same = {None: "-", True: "identical", False: "DIFFER"}[m.same_on_ttsim]
        speed = f"{m.speedup:.2f}" if m.speedup else "-"
        gbs = f"{m.dram_gbs:.0f}" if m.dram_gbs else "-"
        lines.append(f"{m.row:<16} {m.kernel:<30} {m.compute or '-':>9} {m.predicted or '-':>10} "
                     f"{m.emulated or '-':>10} {ratio:>8} {m.cores or '-':>5} {speed:>8} {m.bank or '-':>8} {gbs:>5} "
                     f"{m.seconds:>7.1f} {m.streamed_span or '-':>7} {m.l1_span or '-':>7} {same:>9}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tt_backend bench kernels", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", default=",".join(ROWS), help=f"comma-separated subset of {', '.join(ROWS)}")
    ap.add_argument("--scale", type=int, default=1, help="divide every row's size by this (at least 32)")
    ap.add_argument("--ttsim", action="store_true", help="also run each row on ttsim and compare the output bits")
    ap.add_argument("--lib", default=os.environ.get("TT_SIMULATOR"), help="libttsim.so (default: $TT_SIMULATOR)")
    args = ap.parse_args(argv)
    names = [r.strip() for r in args.rows.split(",") if r.strip()]
    if unknown := [r for r in names if r not in ROWS]:
        ap.error(f"unknown row(s) {', '.join(unknown)}: choose from {', '.join(ROWS)}")
    if args.ttsim and not args.lib:
        ap.error("--ttsim needs libttsim.so: set TT_SIMULATOR or pass --lib")
    results = []
    print(table([]), flush=True)
    for name in names:
        n0 = len(results)
        row = scaled(ROWS[name], args.scale)
        run = {MatmulRow: run_matmul, GridRow: run_grid, MatmulGridRow: run_matmul_grid,
               GridProgramRow: run_grid_program}.get(type(row), run_program)
        results += run(name, row, args.lib if args.ttsim else None)
        print("\n".join(table(results[-k:]).splitlines()[1:]) if (k := len(results) - n0) else "", flush=True)
    print("\n" + table(results))
    return 0
