"""Predicted against emulated cycles on every launch of a pytest selection (default: the e2e suite on the emulator).

    python -m tt_backend bench predictions                                   # tests/e2e, one worker
    python -m tt_backend bench predictions tests/e2e/test_reduce.py -k sum   # a selection (pytest's own arguments)
    python -m tt_backend bench predictions --out rows.jsonl -n 2             # keep the rows; two pytest workers
    python -m tt_backend bench predictions --rows rows.jsonl                 # the table of rows recorded before

Runs pytest with TT_PREDICTIONS (tt_backend/predictions.py: one JSON line per launch, the launch model's prediction
and the emulated cycles of the slowest core) and prints the summary: launches within 25 %, per family, the worst.
Tests marked ttsim are left out (they run on ttsim, which has no cycle model). Kernels that tests launch from a plan
directly (not through tinygrad's DEVICE=TT) are not recorded. With TT_PREDICTIONS every launch runs the emulator's
cycle model, so the two e2e tests that check launches run untimed when nothing reports (test_functional_mode) or
that time a terminal's progress line (test_observe) fail under it.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

from tt_backend import predictions


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m tt_backend bench predictions", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="the JSON-lines file to write (default: a temporary file, removed after)")
    ap.add_argument("--rows", help="summarise this file of rows recorded before; run nothing")
    ap.add_argument("-n", type=int, default=1, help="pytest workers (pytest-xdist), default 1")
    ap.add_argument("--worst", type=int, default=10, help="how many of the worst launches to list")
    args, pytest_args = ap.parse_known_args(argv)
    if args.rows:
        print(predictions.summary(predictions.load(args.rows), args.worst))
        return 0
    if args.out is None:
        fd, out = tempfile.mkstemp(prefix="tt_predictions_", suffix=".jsonl")
        os.close(fd)
    else:
        out = args.out
    if os.path.exists(out):
        os.remove(out)       # rows are appended: start from none
    env = {k: v for k, v in os.environ.items() if k not in ("TT_SIMULATOR", "TT_BACKEND")} | {"TT_PREDICTIONS": out}
    cmd = [sys.executable, "-m", "pytest", "-q", "-n", str(args.n), "-m", "not ttsim", "-p", "no:cacheprovider",
           *(pytest_args or ["tests/e2e"])]
    rc = subprocess.run(cmd, env=env).returncode
    if not os.path.exists(out):
        print(f"no launch was recorded (pytest exit {rc})")
        return rc or 1
    print(predictions.summary(predictions.load(out), args.worst))
    if args.out is None:
        os.remove(out)
    return rc
