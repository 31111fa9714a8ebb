"""The example models (examples/gpt2_decoder.py, examples/cnn_adamw.py) at small sizes on DEVICE=TT (the emulator),
each against tinygrad's CPU device on the same weights and data, in a fresh subprocess as a user runs them.

Tolerances (the examples' own, stated in their docstrings): decoder logits within 1e-4 of the largest logit and the
loss within rtol 1e-4 (float32 everywhere, sums in another order, compounded over the blocks); CNN losses within rtol
1e-4 at every step and every parameter within 1e-5 after the AdamW steps (rounding-sized: Adam's steps are about lr
whatever the gradient's size, and the model has no parameter whose gradient is 0 up to rounding).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.support import REPO_ROOT

pytestmark = pytest.mark.needs_cc
KNOBS = ("TT_ERR_BUDGET", "TT_BUDGET_SAMPLED", "TT_PLACE", "TT_DUMP", "TT_CHECK", "DEV", "DEVICE", "TT_BACKEND", "TT_SIMULATOR")


def run_example(tmp_path, script: str, *args: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in KNOBS}
    env.update(PARALLEL="0")        # in-process compiles: faster than tinygrad's workers for small kernels
    out = tmp_path / "result.json"
    r = subprocess.run([sys.executable, str(REPO_ROOT / "examples" / script), *args, "--json", str(out)], env=env,
                       capture_output=True, text=True, timeout=900, cwd=REPO_ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(out.read_text())


def test_gpt2_decoder_forward(tmp_path):
    r = run_example(tmp_path, "gpt2_decoder.py", "--layers", "1", "--seq", "8", "--width", "16", "--heads", "2",
                    "--vocab", "32")
    assert r["logits_max_rel"] <= 1e-4 and r["loss_rel"] <= 1e-4, r


def test_cnn_adamw_steps(tmp_path):
    r = run_example(tmp_path, "cnn_adamw.py", "--steps", "2", "--batch", "2", "--size", "4", "--channels", "2",
                    "--classes", "3")
    assert len(r["losses"]) == 2 and r["loss_max_rel"] <= 1e-4 and r["param_max_abs"] <= 1e-5, r
