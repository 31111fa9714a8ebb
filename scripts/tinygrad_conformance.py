"""Run a copy of tinygrad's own test file (test/backend/test_ops.py, test_multitensor.py) on DEV=TT and count.

tinygrad's tests are not part of this repository: fetch them from tinygrad's public repository at the commit nearest
the pinned wheel (0.14.0) into a folder of your own, next to tinygrad's root conftest.py (it implements the per-test
time limit, TEST_TIMEOUT, by aborting the worker), and point this script at the file:

    python scripts/tinygrad_conformance.py /path/to/test_ops.py --forward-only
    python scripts/tinygrad_conformance.py /path/to/test_ops.py -k 'conv2d' --timeout 60

It runs pytest the way the project's closing notes count (pytest-xdist `-n 2`, the per-test limit, DEV=TT), reads
the JUnit report pytest writes, and prints passed / failed / skipped, the failures grouped by their first error line,
and the slowest tests. A test that exceeded the limit shows up as a failure whose worker crashed; tests collected but
never run (a run that ended early) are counted and named.
torch (tinygrad's reference in these tests) and pytest-xdist must be installed.
"""
from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path


# Every test over the time limit aborts its worker; pytest-xdist's default (4 restarts per worker) would end the whole
# run after the 8th such test on two workers, and the tests not yet run would not be counted at all.
MAX_WORKER_RESTARTS = 100_000


def pytest_env(args: argparse.Namespace) -> dict[str, str]:
    env = dict(os.environ, DEV=args.device, TEST_TIMEOUT=str(args.timeout))
    if args.forward_only: env["FORWARD_ONLY"] = "1"
    return env


def collect(test_file: Path, args: argparse.Namespace) -> list[str]:
    """The test ids pytest selects, named as the JUnit report names them (module.Class::test)."""
    cmd = [sys.executable, "-m", "pytest", test_file.name, "--collect-only", "-q", "-p", "no:cacheprovider"]
    if args.k: cmd += ["-k", args.k]
    out = subprocess.run(cmd, cwd=test_file.parent, env=pytest_env(args), capture_output=True, text=True).stdout
    return [junit_name(line) for line in out.splitlines() if "::" in line and not line.startswith(" ")]


def junit_name(node_id: str) -> str:
    *owners, test = node_id.split("::")
    return ".".join([owners[0].removesuffix(".py").replace("/", "."), *owners[1:]]) + "::" + test


def run_pytest(test_file: Path, args: argparse.Namespace, junit: Path) -> int:
    env = pytest_env(args)
    cmd = [sys.executable, "-m", "pytest", test_file.name, "-q", "--tb=short", "-p", "no:cacheprovider", f"--junitxml={junit}",
           "-o", "junit_family=xunit2"]
    if args.workers > 0: cmd += ["-n", str(args.workers), f"--max-worker-restart={MAX_WORKER_RESTARTS}"]
    if args.k: cmd += ["-k", args.k]
    print("running:", " ".join(cmd), f"(in {test_file.parent}; DEV={args.device} TEST_TIMEOUT={args.timeout}"
          f"{' FORWARD_ONLY=1' if args.forward_only else ''})", flush=True)
    return subprocess.run(cmd, cwd=test_file.parent, env=env).returncode


def read_junit(junit: Path) -> list[tuple[str, str, float, str]]:
    """(test id, outcome, seconds, first message line) per test case."""
    rows = []
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = f"{case.get('classname', '')}::{case.get('name', '')}"
        outcome, msg = "passed", ""
        for child in case:
            if child.tag in ("failure", "error"):
                outcome = "failed"
                msg = (child.get("message") or child.text or "").strip().splitlines()[0:1]
                msg = msg[0] if msg else child.tag
            elif child.tag == "skipped":
                outcome, msg = "skipped", (child.get("message") or "").strip()
        rows.append((name, outcome, float(case.get("time") or 0.0), msg))
    return rows


def report(rows: list[tuple[str, str, float, str]], slowest: int, collected: list[str] | None = None) -> str:
    counts = collections.Counter(outcome for _, outcome, _, _ in rows)
    ran = counts["passed"] + counts["failed"]
    lines = [f"{counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped"
             + (f" ({100 * counts['passed'] / ran:.1f} % of the {ran} tests that ran)" if ran else "")]
    reported = {name for name, _, _, _ in rows}
    never_ran = [name for name in collected or () if name not in reported]
    if never_ran:
        lines.append(f"{len(never_ran)} of the {len(collected)} collected tests never ran (the run ended early): "
                     + ", ".join(name.rsplit("::", 1)[-1] for name in never_ran))
    by_cause: dict[str, list[str]] = collections.defaultdict(list)
    for name, outcome, _, msg in rows:
        if outcome == "failed": by_cause[msg[:160]].append(name.rsplit("::", 1)[-1])
    if by_cause:
        lines.append("\nfailures by cause:")
        for cause, names in sorted(by_cause.items(), key=lambda kv: -len(kv[1])):
            lines.append(f"  {len(names):4d}  {cause}\n        {', '.join(sorted(names))}")
    timed = sorted((r for r in rows if r[1] != "skipped"), key=lambda r: -r[2])[:slowest]
    if timed:
        lines.append(f"\nslowest {len(timed)}:")
        lines += [f"  {sec:7.1f} s  {outcome:7s} {name}" for name, outcome, sec, _ in timed]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("test_file", type=Path, help="a copy of tinygrad's test file, next to tinygrad's conftest.py")
    ap.add_argument("--forward-only", action="store_true", help="FORWARD_ONLY=1: skip the backward passes")
    ap.add_argument("--timeout", type=int, default=60, help="per-test limit in seconds (TEST_TIMEOUT; default 60)")
    ap.add_argument("-n", "--workers", type=int, default=2, help="pytest-xdist workers (default 2; 0: no xdist)")
    ap.add_argument("-k", help="pytest -k expression selecting a subset")
    ap.add_argument("--device", default="TT", help="DEV= value (default TT; the target follows TT_BACKEND as usual)")
    ap.add_argument("--slowest", type=int, default=10, help="list this many slowest tests (default 10)")
    args = ap.parse_args(argv)
    test_file = args.test_file.resolve()
    if not test_file.is_file(): ap.error(f"{test_file}: no such file")
    if not (test_file.parent / "conftest.py").is_file():
        print(f"warning: no conftest.py next to {test_file.name}: tinygrad's per-test time limit is not in force",
              file=sys.stderr)
    with tempfile.TemporaryDirectory() as tmp:
        junit = Path(tmp) / "junit.xml"
        collected = collect(test_file, args)
        rc = run_pytest(test_file, args, junit)
        if not junit.exists():
            print(f"pytest wrote no report (exit status {rc})", file=sys.stderr)
            return rc or 1
        print(report(read_junit(junit), args.slowest, collected))
    return rc


if __name__ == "__main__":
    sys.exit(main())
