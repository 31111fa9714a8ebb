"""The compute part measured L1 to L1 (TT_L1_RESIDENT=1, runtime/driver.py, docs/performance.md §8.5): each launch's
reader runs to its end before the compute cores and the writer start. On one core with three tiles per launch (an odd
count, within the CBs' four slots), RMSNorm-3072 (bf16 x, x*w on the FPU) and an fp32 a*b+a give the streamed run's
bytes, numpy's values, ttsim's bytes, and a span (first unpack to last pack) that starts after the reader's last
instruction; a launch whose inputs need more slots than its CBs hold is refused by name.

The programs run in subprocesses (as bench kernels runs them), on the emulator unless a test asks for ttsim.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.support import REPO_ROOT

pytestmark = pytest.mark.needs_cc
KNOBS = ("TT_ERR_BUDGET", "TT_BUDGET_SAMPLED", "TT_PLACE", "TT_DUMP", "TT_CHECK", "DEV", "DEVICE", "TT_BACKEND",
         "TT_SIMULATOR", "TT_CORES", "TT_L1_RESIDENT")

_HEAD = "import os, numpy as np\nfrom tinygrad import Tensor, dtypes\nrng = np.random.default_rng(0)\n"
_SAVE = "\nnp.save(os.environ['OUT'], out.numpy())\n"
# name -> (program, its knobs, the relative L2 error allowed against reference(name))
PROGRAMS = {
    "rmsnorm": (_HEAD + (
        "xb = (rng.standard_normal(3072).astype(np.float32).view(np.uint32) & 0xFFFF0000).view(np.float32)\n"
        "x = Tensor(xb.tolist(), dtype=dtypes.bfloat16).realize()\n"
        "w = Tensor(rng.standard_normal(3072).astype(np.float32)).realize()\n"
        "xf = x.float()\nout = (xf * (xf.square().mean(-1, keepdim=True) + 1e-5).rsqrt() * w).realize()"),
        {"TT_ERR_BUDGET": "1e-2"}, 1e-2),
    "a*b+a": (_HEAD + (
        "a = Tensor(rng.standard_normal((96, 32)).astype(np.float32)).realize()\n"
        "b = Tensor(rng.standard_normal((96, 32)).astype(np.float32)).realize()\n"
        "out = (a * b + a).realize()"), {}, 1e-6),
}


def reference(name: str) -> np.ndarray:
    """The program's result in float64 from the same inputs."""
    rng = np.random.default_rng(0)
    if name == "rmsnorm":
        x = (rng.standard_normal(3072).astype(np.float32).view(np.uint32) & 0xFFFF0000).view(np.float32)
        w = rng.standard_normal(3072).astype(np.float32).astype(np.float64)
        x = x.astype(np.float64)
        return x / np.sqrt(np.mean(x * x) + 1e-5) * w
    a = rng.standard_normal((96, 32)).astype(np.float32).astype(np.float64)
    b = rng.standard_normal((96, 32)).astype(np.float32).astype(np.float64)
    return a * b + a


def run(name: str, tmp: Path, tag: str, **knobs) -> tuple[np.ndarray, Path]:
    code, env_knobs, _ = PROGRAMS[name]
    env = {k: v for k, v in os.environ.items() if k not in KNOBS}
    out, dump = tmp / f"{tag}.npy", tmp / tag
    env.update(PYTHONPATH=str(REPO_ROOT), DEVICE="TT", TT_CORES="1", TT_DUMP=str(dump), OUT=str(out), **env_knobs,
               **knobs)
    r = subprocess.run([sys.executable, "-c", code + _SAVE], env=env, capture_output=True, text=True, timeout=600,
                       cwd="/")
    assert r.returncode == 0, f"{name} {tag}:\n{r.stderr[-3000:]}"
    return np.load(out), dump


def lanes(trace: Path) -> tuple[dict, dict[str, list[tuple[int, int]]]]:
    """(otherData, lane -> its busy intervals) of a launch's trace.json."""
    tr = json.loads(trace.read_text())
    names = {e["tid"]: e["args"]["name"] for e in tr["traceEvents"] if e["name"] == "thread_name"}
    busy: dict[str, list[tuple[int, int]]] = {}
    for e in tr["traceEvents"]:
        if e["ph"] == "X" and e["cat"] == "busy":
            busy.setdefault(names[e["tid"]], []).append((e["ts"], e["ts"] + e["dur"]))
    return tr["otherData"], busy


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_l1_resident_same_bits_and_span(name, tmp_path):
    streamed, d0 = run(name, tmp_path, "streamed")
    resident, d1 = run(name, tmp_path, "resident", TT_L1_RESIDENT="1")
    assert resident.tobytes() == streamed.tobytes()
    ref = reference(name)       # relative L2 error: x*w in bf16 on the FPU under the 1e-2 budget; a*b+a in fp32
    assert np.linalg.norm(resident - ref) <= PROGRAMS[name][2] * np.linalg.norm(ref)
    traces = sorted(d1.glob("*/trace.json"))
    assert {t.parent.name.split("_")[0] for t in traces} == ({"r", "E"} if name == "rmsnorm" else {"E"})
    for t in traces:
        meta, busy = lanes(t)
        first_unpack = min(a for lane, iv in busy.items() if lane.startswith("unpack") for a, _ in iv)
        last_pack = max(b for a, b in busy["pack"])
        assert meta["compute_span_cycles"] == last_pack - first_unpack > 0
        # the reader had finished (every input tile in its CB) before any compute core ran an instruction
        reader_end = max(b for _, b in busy["brisc"])
        assert reader_end <= min(a for c in ("trisc0", "trisc1", "trisc2") for a, _ in busy[c])
        streamed_meta, _ = lanes(d0 / t.parent.name / "trace.json")
        assert streamed_meta["compute_span_cycles"] > 0


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_l1_resident_same_bits_on_ttsim(name, tmp_path, ttsim_lib):
    emu, _ = run(name, tmp_path, "emu", TT_L1_RESIDENT="1")
    sim, _ = run(name, tmp_path, "sim", TT_L1_RESIDENT="1", TT_BACKEND="ttsim", TT_SIMULATOR=ttsim_lib)
    assert sim.tobytes() == emu.tobytes()


def test_l1_resident_refuses_more_tiles_than_cb_slots(tmp_path):
    """a*b+a over 5 tiles on one core: the reader fills its CBs' four slots and waits for the compute it holds back."""
    code = PROGRAMS["a*b+a"][0].replace("(96, 32)", "(160, 32)")
    env = {k: v for k, v in os.environ.items() if k not in KNOBS}
    env.update(PYTHONPATH=str(REPO_ROOT), DEVICE="TT", TT_CORES="1", TT_L1_RESIDENT="1", OUT=str(tmp_path / "o.npy"))
    r = subprocess.run([sys.executable, "-c", code + _SAVE], env=env, capture_output=True, text=True, timeout=600,
                       cwd="/")
    assert r.returncode != 0
    assert "no L1-resident launch: the reader waits with the compute cores held" in r.stderr, r.stderr[-3000:]
    assert "brisc:" in r.stderr       # the reader's state, as the driver reports a stopped launch
