"""Seeing what the chip does: `tune`'s plot and summary, the progress line of long launches, per-launch traces under
TT_DUMP, and tinygrad's own knobs (DEBUG levels, BEAM, VALIDATE_WITH_CPU) on the TT device.

The programs run in subprocesses (as a user runs them) on the emulator, small enough to take seconds each.
"""
import io
import json
import os
import pty
import re
import subprocess
import sys

import numpy as np
import pytest

from tt_backend import predictions
from tt_backend.chip import layout

from tests.support import REPO_ROOT
from tests.support.timelines import check_lanes

KNOBS = ("TT_ERR_BUDGET", "TT_BUDGET_SAMPLED", "TT_PLACE", "TT_DUMP", "TT_CHECK", "TT_SAMPLE_DIST", "DEV", "DEVICE",
         "TT_BACKEND", "TT_SIMULATOR", "TT_CORES", "DEBUG", "BEAM", "VALIDATE_WITH_CPU")


# Two kernels: E (a*b, a loads-only product: on the FPU under TT_ERR_BUDGET=1e-2) and E' (exp2(x)*a + 1, SFPU only).
TWO_KERNELS = """
import numpy as np
from tinygrad import Tensor
rng = np.random.default_rng(0)
a = Tensor(rng.standard_normal((32, 64)).astype(np.float32), device='TT').realize()
b = Tensor(rng.standard_normal((32, 64)).astype(np.float32), device='TT').realize()
x = (a * b).realize()
(x.exp2() * a + 1).realize()
"""


def _env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in KNOBS and k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(REPO_ROOT)
    env.update(extra)
    return env


def _python(code: str, timeout=600, **env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], env=_env(**env), capture_output=True, text=True,
                          timeout=timeout, cwd="/")


# ------------------------------------------------------------------------------------------------------------ tune

@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    out = tmp_path_factory.mktemp("tune")
    r = subprocess.run([sys.executable, "-m", "tt_backend", "tune", "-c", TWO_KERNELS, "--budgets", "1e-2",
                        "--out", str(out)], env=_env(), capture_output=True, text=True, timeout=900, cwd="/")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    return out, r.stdout


@pytest.mark.needs_cc
def test_tune_png_is_a_real_plot(tuned):
    from matplotlib.image import imread
    out, stdout = tuned
    png = out / "tune.png"
    assert f"plot {png}" in stdout
    img = imread(png)                                    # decodes the PNG (a broken file raises)
    h, w = img.shape[:2]
    assert 300 <= h <= 2000 and 600 <= w <= 3000, img.shape
    rgb = img[..., :3].reshape(-1, 3)
    colours = np.unique((rgb * 255).astype(np.uint8), axis=0)
    assert len(colours) > 50, len(colours)               # text, lines, markers: not a blank or flat image
    ink = (rgb.max(axis=1) < 0.6).mean()                 # dark pixels: axes, ticks, labels
    assert 0.005 < ink < 0.5, ink
    saturated = ((rgb.max(axis=1) - rgb.min(axis=1)) > 0.4).mean()   # the coloured series and their markers
    assert saturated > 0.0005, saturated
    # both panels have content: coloured pixels in the left and in the right half
    sat = (img[..., :3].max(axis=2) - img[..., :3].min(axis=2)) > 0.4
    assert sat[:, : w // 2].any() and sat[:, w // 2:].any()


@pytest.mark.needs_cc
def test_tune_summary_shows_placements_side_by_side(tuned):
    out, stdout = tuned
    md = (out / "tune.md").read_text()
    assert f"summary {out / 'tune.md'}" in stdout
    assert "![error vs cycles](tune.png)" in md and "## Whole program" in md
    reports = {b: {p.parent.name: json.loads(p.read_text()) for p in (out / f"budget_{b}").glob("*/report.json")}
               for b in ("none", "0.01")}
    assert len(reports["none"]) == 2 and reports["none"].keys() == reports["0.01"].keys()
    fpu_seen = False
    for kernel in reports["none"]:
        section = md[md.index(f"## Kernel `{kernel}`"):].split("\n## ")[0]
        rows = {line.split(" | ")[0].strip("| "): [c.strip() for c in line.strip("| ").split(" | ")[1:]]
                for line in section.splitlines() if line.startswith("| ")}
        assert rows["node"] == ["none", "0.01"]
        for b_i, b in enumerate(("none", "0.01")):
            rep = reports[b][kernel]
            for n in rep["nodes"]:                       # every node's engine (and FPU precision) as report.json has it
                cell = rows[f"n{n['id']} {n['op']}"][b_i].strip("*")
                if n["engine"] == "FPU":
                    fpu_seen = True
                    assert cell == f"FPU {n['fidelity']} {n['formats']['srca']}x{n['formats']['srcb']}", (cell, n)
                else:
                    assert cell == "SFPU", (cell, n)
            assert rows["emulated cycles"][b_i] == str(rep["measured_cycles"]["max"])
            assert rows["measured error"][b_i] == f"{rep['measured_error']:.2e}"
    assert fpu_seen, "the 1e-2 budget put no node on the FPU: the comparison shows nothing"
    assert "**FPU" in md                                 # a placement that differs from float32-faithful is marked


@pytest.mark.needs_cc
def test_tune_runs_a_module_with_its_arguments(tmp_path):
    pkg = tmp_path / "tunepkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "prog.py").write_text("import sys\nimport numpy as np\nfrom tinygrad import Tensor\n"
                                 "n = int(sys.argv[1])\n"
                                 "(Tensor(np.arange(n, dtype=np.float32), device='TT').realize() * 2 + 1).realize()\n")
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, "-m", "tt_backend", "tune", "-m", "tunepkg.prog", "48", "--budgets", "none",
                        "--out", str(out)], env=_env(), capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    (rep,) = (out / "budget_none").glob("*/report.json")
    assert json.loads(rep.read_text())["ranges"] == [48]          # the program got its argument
    assert (out / "tune.png").stat().st_size > 0 and "-m tunepkg.prog 48" in (out / "tune.md").read_text()


def test_tune_refuses_two_programs():
    r = subprocess.run([sys.executable, "-m", "tt_backend", "tune", "-m", "a.b", "-c", "pass"], env=_env(),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "not allowed with" in r.stderr
    r = subprocess.run([sys.executable, "-m", "tt_backend", "tune"], env=_env(), capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 2 and "one program" in r.stderr


# -------------------------------------------------------------------------------------------------------- progress

class _Status:
    def __init__(self, progress): self.progress = progress


class _FakeEmu:
    """stats() as the emulator reports them: the tile clock and per-core instruction counts grow with each call."""
    def __init__(self): self.calls = 0

    def stats(self):
        self.calls += 1
        k = self.calls
        return {"clock": 1000 * k, "instructions": {c: 100 * k for c in layout.CORES},
                "tensix_instructions": [10 * k, 0, 0]}


def test_progress_line_waits_then_reports(monkeypatch):
    from tt_backend.runtime import progress as P
    monkeypatch.setattr(P, "AFTER_S", 2.0)
    monkeypatch.setattr(P, "EVERY_S", 0.5)
    t = [0.0]
    stream, dev = io.StringIO(), _FakeEmu()
    p = P.LaunchProgress(stream, dev, "E_4", clock=lambda: t[0])
    status = {"ncrisc": _Status(3)}
    for t[0] in (0.5, 1.0, 1.99):
        p.poll(status)
    assert stream.getvalue() == "" and dev.calls == 1            # quiet (only the baseline) for the first 2 s
    t[0] = 3.0
    p.poll(status)
    line = stream.getvalue()
    # one stats() call after the baseline: 1000 cycles, 5 x 100 RISC-V and 10 Tensix instructions in 3 s
    assert line == "\rTT E_4: 3.0 s | writer 3 | 1k cycles | RISC-V 167 instr/s, Tensix 3 instr/s\x1b[K"
    t[0] = 3.25
    p.poll(status)
    assert stream.getvalue() == line                              # not redrawn faster than EVERY_S
    t[0] = 4.0
    p.poll(status)
    assert stream.getvalue().count("\rTT E_4") == 2 and "4.0 s" in stream.getvalue()
    p.close()
    assert stream.getvalue().endswith("\r\x1b[K")                # the line is cleared at the end


def test_progress_is_silent_off_a_terminal():
    from tt_backend.runtime import progress as P
    assert isinstance(P.for_terminal(_FakeEmu(), "x", io.StringIO()), P.NoProgress)


PROGRESS_PROG = ("import tt_backend.runtime.progress as p\n"
                 "p.AFTER_S, p.EVERY_S = 0.0, 0.0      # the real thresholds are seconds: show every poll of a short kernel\n"
                 "import numpy as np\nfrom tinygrad import Tensor\n"
                 "a = Tensor(np.ones((64, 64), np.float32), device='TT').realize()\n"
                 "print(float((a * 2 + 1).exp2().sum(1).numpy()[0]))\n")


@pytest.mark.needs_cc
def test_progress_on_a_terminal_and_not_in_a_pipe():
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-c", PROGRESS_PROG], env=_env(), stdin=subprocess.DEVNULL, text=True,
                            stdout=subprocess.PIPE, stderr=slave, cwd="/")
    os.close(slave)
    seen = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:                      # the child closed the terminal
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    assert proc.wait(timeout=600) == 0
    assert proc.stdout.read().strip() == str(64 * 8.0)
    text = seen.decode()
    # the plugin's launch reports no cycles, so it runs in the emulator's functional mode: the line has none
    lines = re.findall(r"\rTT r_64_64: ([\d.]+) s \| writer (\d+) \| RISC-V \S+ instr/s, "
                       r"Tensix \S+ instr/s\x1b\[K", text)
    assert len(lines) >= 2, repr(text[-2000:])
    assert text.endswith("\r\x1b[K")                              # cleared when the launch ended
    writer = [int(w) for _, w in lines]
    assert writer == sorted(writer)                               # the writer's progress word only grows
    piped = _python(PROGRESS_PROG)
    assert piped.returncode == 0 and piped.stdout.strip() == str(64 * 8.0)
    assert "cycles" not in piped.stderr and "\r" not in piped.stderr


# ----------------------------------------------------------------------------------------------------------- trace

def test_chrome_trace_of_a_timeline():
    """The trace file format: lanes become threads (cores, then Tensix threads, then units), stalls keep their
    reason."""
    from tt_backend import trace as T
    tl = T.Timeline("E_1", "emu", True, [T.Interval("trisc1", 0, 40), T.Interval("fpu", 10, 30),
                                         T.Interval("trisc1", 40, 55, "stall", "SrcA not valid"),
                                         T.Interval("brisc", 0, 20)], "test", totals_only=False)
    assert tl.compute_span() is None                   # nothing unpacked nor packed
    tl.intervals += [T.Interval("unpack1", 7, 9), T.Interval("unpack0", 5, 8), T.Interval("pack", 31, 40),
                     T.Interval("pack", 40, 44, "stall", "L1 port")]
    assert tl.compute_span() == 40 - 5                 # first unpack to the last pack's end (busy intervals only)
    tr = T.chrome_trace(tl)
    names = {e["tid"]: e["args"]["name"] for e in tr["traceEvents"] if e["name"] == "thread_name"}
    # cores in layout order, then units
    assert list(names.values()) == ["brisc", "trisc1", "unpack0", "unpack1", "fpu", "pack"]
    spans = [(names[e["tid"]], e["ts"], e["dur"], e["name"]) for e in tr["traceEvents"] if e["ph"] == "X"]
    assert ("trisc1", 40, 15, "stall: SrcA not valid") in spans and ("fpu", 10, 20, "busy") in spans
    assert tl.busy_cycles() == {"trisc1": 40, "fpu": 20, "brisc": 20, "unpack0": 3, "unpack1": 2, "pack": 9}
    assert tr["otherData"]["time_unit"] == T.CYCLES_UNIT and tr["otherData"]["compute_span_cycles"] == 35
    none = T.chrome_trace(T.without_cycle_model("E_1", "ttsim", 0.25))
    assert none["otherData"]["cycle_model"] is False and "no cycle model" in none["otherData"]["note"]
    assert [e["dur"] for e in none["traceEvents"] if e["ph"] == "X"] == [250000.0]   # host wall time only


@pytest.mark.needs_cc
def test_trace_under_tt_dump_matches_the_report(tmp_path):
    """trace.json of each launch: lanes never overlap and stay inside the launch; per core, busy cycles = retired
    instructions and busy + stalled = report.json's measured cycles; per Tensix thread, busy = issued instructions.
    One tile (TT_CORES=1): a split launch's trace records its first tile, its report the slowest tile."""
    r = _python(TWO_KERNELS, DEVICE="TT", TT_DUMP=str(tmp_path), TT_CORES="1")
    assert r.returncode == 0, r.stderr[-3000:]
    dirs = sorted(p.parent for p in tmp_path.glob("*/report.json"))
    assert len(dirs) == 2
    for d in dirs:
        rep = json.loads((d / "report.json").read_text())
        tr = json.loads((d / "trace.json").read_text())
        meta = tr["otherData"]
        assert meta["kernel"] == rep["name"] and meta["cycle_model"] is True and meta["totals_only"] is False
        lanes = {e["tid"]: e["args"]["name"] for e in tr["traceEvents"] if e["name"] == "thread_name"}
        spans = [(lanes[e["tid"]], e["ts"], e["ts"] + e["dur"], e["cat"]) for e in tr["traceEvents"] if e["ph"] == "X"]
        counts = meta["counts"]
        totals = check_lanes(spans, counts["window cycles"])
        assert list(lanes.values())[:5] == list(layout.CORES)          # cores first, in layout order
        assert {"thread0", "thread1", "thread2", "unpack0", "sfpu", "pack", "noc0"} <= set(lanes.values())
        for core in layout.CORES:
            t = totals[core]
            assert t["busy"] == counts["instructions retired"][core], core
            assert t["busy"] + t["stall"] + t["idle"] == rep["measured_cycles"][core], core
        for i, issued in enumerate(counts["tensix instructions issued"]):
            assert totals[f"thread{i}"]["busy"] == issued, i
        stalls = {e["name"] for e in tr["traceEvents"] if e["ph"] == "X" and e["cat"] == "stall"}
        assert stalls and all(n.startswith("stall: ") and len(n) > 10 for n in stalls)   # each names its cause
        unpacked = [a for lane, a, _, cat in spans if lane.startswith("unpack") and cat == "busy"]
        packed = [b for lane, _, b, cat in spans if lane == "pack" and cat == "busy"]
        assert meta["compute_span_cycles"] == max(packed) - min(unpacked) > 0


# A reduction feeding another over other elements: tinygrad fuses it into one kernel that no one-pass family lowers,
# so the TT device runs it as two launches in one call (lowering/families/staged.py).
STAGED = """
import numpy as np
from tinygrad import Tensor
x = Tensor(np.random.default_rng(3).standard_normal((8, 40)).astype(np.float32), device='TT').realize()
(x - x.mean()).square().sum(0).realize()
"""


def test_staged_kernel_cycles_are_its_launches_in_sequence(tmp_path):
    """A staged kernel's launches run one after another: report.json's emulated cycles (and DEBUG=2's line) are the
    sum of each launch's slowest core (each launch's own row of TT_PREDICTIONS, and its stage's report.json), which is
    also the length of the kernel's trace window."""
    rows = tmp_path / "predictions.jsonl"
    r = _python(STAGED, DEVICE="TT", TT_DUMP=str(tmp_path / "dump"), TT_CORES="1", TT_PREDICTIONS=str(rows), DEBUG="2")
    assert r.returncode == 0, r.stderr[-3000:]
    (rep_path,) = [p for p in (tmp_path / "dump").glob("*/report.json") if json.loads(p.read_text()).get("staged")]
    rep = json.loads(rep_path.read_text())
    stages = [s["kernel"] for s in rep["stages"]]
    launches = [row["emulated"] for row in predictions.load(str(rows)) if row["kernel"] in stages]
    assert len(stages) >= 2 and len(launches) == len(stages)
    assert rep["emulated_cycles"] == rep["measured_cycles"]["max"] == sum(launches)
    stage_reps = {json.loads(p.read_text())["name"]: json.loads(p.read_text()) for p in rep_path.parent.parent.glob(
        f"{rep['name']}_s*/report.json")}
    assert [stage_reps[k]["emulated_cycles"] for k in stages] == launches
    window = json.loads((rep_path.parent / "trace.json").read_text())["otherData"]["counts"]["window cycles"]
    assert rep["emulated_cycles"] == window
    assert f"{rep['name']}: emulated cycles: {sum(launches)} " in r.stdout


# ----------------------------------------------------------------------------------------------- tinygrad's knobs

ONE_KERNEL = ("import numpy as np\nfrom tinygrad import Tensor\n"
              "a = Tensor(np.linspace(-1, 1, 96 * 32, dtype=np.float32).reshape(96, 32), device='TT').realize()\n"
              "print('RESULT', float(((a * 3 + 1).exp2()).sum().numpy()))\n")
ONE_KERNEL_REF = float(np.exp2(np.linspace(-1, 1, 96 * 32, dtype=np.float32).astype(np.float64) * 3 + 1).sum())


def _result(stdout: str) -> float:
    return float(next(line.split()[1] for line in stdout.splitlines() if line.startswith("RESULT")))


@pytest.mark.needs_cc
def test_debug_levels_and_beam():
    """DEBUG=2 (with BEAM=2: a no-op on TT with one notice) and DEBUG=5 show what tinygrad shows at those levels."""
    lo, hi = _python(ONE_KERNEL, DEVICE="TT", DEBUG="2", BEAM="2"), _python(ONE_KERNEL, DEVICE="TT", DEBUG="5")
    assert lo.stderr.count("BEAM=2 is ignored for TT kernels") == 1 and "BEAM" not in hi.stderr
    for r in (lo, hi):
        assert r.returncode == 0, r.stderr[-3000:]
        assert _result(r.stdout) == pytest.approx(ONE_KERNEL_REF, rel=1e-5)
        assert re.search(r"\*\*\* TT .*tm ", r.stdout)                       # tinygrad's own timing line (2)
        m = re.search(r"emulated cycles: (\d+) \(slowest core; brisc \d+", r.stdout)   # TT: cycles per launch (2)
        assert m and int(m.group(1)) > 0
    assert "placement (error budget" not in lo.stdout and "ast = " not in lo.stdout and "// =====" not in lo.stdout
    out = hi.stdout
    ast, report, graph, source = (out.index(s) for s in ("ast = ", "placement (error budget", "tile graph of",
                                                         "// ===== brisc ====="))
    assert ast < report < graph < source          # 5: the AST first, then 3: lowering decisions, 5: graph, 4: source
    assert re.search(r"n\d+ EXP2 float32 <- n\d+", out[graph:source])


MATMUL = ("import numpy as np\nfrom tinygrad import Tensor\nrng = np.random.default_rng(0)\n"
          "a = Tensor(rng.standard_normal((64, 64)).astype(np.float32), device='TT')\n"
          "b = Tensor(rng.standard_normal((64, 64)).astype(np.float32), device='TT')\n"
          "print('RESULT', float((a @ b).numpy()[0, 0]))\n")


@pytest.mark.needs_cc
def test_validate_with_cpu_checks_tt_kernels():
    """float32-faithful kernels pass tinygrad's CPU validation; a matmul under a loose budget (reduced-precision FPU)
    is caught by it, which shows the validation really compares, and the notice explains why."""
    ok = _python(MATMUL, DEVICE="TT", VALIDATE_WITH_CPU="1")
    assert ok.returncode == 0, ok.stderr[-3000:]
    assert "VALIDATE_WITH_CPU compares" not in ok.stderr
    loose = _python(MATMUL, DEVICE="TT", VALIDATE_WITH_CPU="1", TT_ERR_BUDGET="1e-1", TT_BUDGET_SAMPLED="1")
    assert loose.returncode != 0 and "AssertionError" in loose.stderr and "Mismatched elements" in loose.stderr
    assert "VALIDATE_WITH_CPU compares each TT kernel" in loose.stderr and "TT_ERR_BUDGET=0.1" in loose.stderr


@pytest.mark.needs_cc
def test_profile_events_for_tinygrads_viewer(tmp_path):
    """PROFILE=1: each TT launch is a range on the TT row (host time, named with its emulated cycles) and its lanes
    are rows of their own whose busy cycles match trace.json's; tinygrad's VIZ lays the profile out."""
    import pickle
    from decimal import Decimal
    r = _python(TWO_KERNELS, DEVICE="TT", PROFILE="1", TMPDIR=str(tmp_path), TT_DUMP=str(tmp_path / "dump"))
    assert r.returncode == 0, r.stderr[-3000:]
    from tinygrad.helpers import ProfileRangeEvent
    from tinygrad.viz.serve import VizData, get_profile
    events = pickle.loads(next(tmp_path.glob("profile.pkl*")).read_bytes())
    launches = [e for e in events if isinstance(e, ProfileRangeEvent) and e.device == "TT"]
    assert len(launches) == 2 and all(re.search(r" \(\d+ emulated cycles\)$", e.name) for e in launches)
    lanes = [e for e in events if isinstance(e, ProfileRangeEvent) and e.device.startswith("TT ")]
    rows = {e.device for e in lanes}
    assert {f"TT core {c}" for c in layout.CORES} | {"TT thread1", "TT unit sfpu"} <= rows
    busy = {}
    for e in lanes:
        assert e.en > e.st
        if e.name == "busy":
            busy[e.device] = busy.get(e.device, Decimal(0)) + e.en - e.st
    traces = [json.loads(p.read_text()) for p in (tmp_path / "dump").glob("*/trace.json")]
    want = {}
    for tr in traces:
        names = {e["tid"]: e["args"]["name"] for e in tr["traceEvents"] if e["name"] == "thread_name"}
        for e in tr["traceEvents"]:
            if e["ph"] == "X" and e["cat"] == "busy" and names[e["tid"]] == "trisc1":
                want["TT core trisc1"] = want.get("TT core trisc1", 0) + e["dur"]
    assert busy["TT core trisc1"] == want["TT core trisc1"]          # 1 display microsecond = 1 emulated cycle
    layout_bytes = get_profile(VizData(), events)
    assert layout_bytes and b"TT core trisc1" in layout_bytes
