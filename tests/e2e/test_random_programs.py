"""Random tinygrad programs (tests/e2e/random_programs.py: the grammar, the domains, the tolerances) on Device TT against
tinygrad's CPU device from the same numpy inputs, in this process. A program TT refuses (UnsupportedOp or any other
exception) is a crash, never a skip; a value outside its tolerance is a wrong result.

CI runs a fixed 50 (seeds CI_SEEDS at CI_SIZE: at most CI_STEPS steps over at most CI_NUMEL elements). Outside CI:

    python -m tests.e2e.test_random_programs 1000 --seed 0 [--jsonl out.jsonl]

prints one line per program, then a summary by cause (crash type and message; for a wrong result the op class of the
first step that differs when every step is realized on its own, or "fusion" when none does) and the replay line of
each failure (`python -m tests.e2e.test_random_programs --replay SEED` prints the program and checks it again).
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import Counter

import pytest
from tinygrad.helpers import Context

from tests.e2e.random_programs import OP_CLASS, SUPPORTED, Program, compare, dname, generate, magnitudes, run

CI_SEEDS = range(50)
CI_NUMEL, CI_STEPS = 256, 4          # small programs: the 50 compile ~100 kernels
TT = "TT:emu"


def first_line(e: BaseException) -> str:
    lines = [ln for ln in str(e).splitlines() if ln.strip()]
    return f"{type(e).__name__}: {lines[0] if lines else ''}"[:240]


def cause_key(msg: str) -> str:
    """A crash message with its numbers, names of values and kernel names blurred, so one cause counts once."""
    return re.sub(r"\b[Erv]_[\w]+|\d+", "#", msg)


def check(program: Program, device: str = TT, localize: bool = True) -> dict:
    """Run the program on the CPU device and on `device`; the verdict: ok, crash, wrong (or generator: the CPU
    device itself failed, fused and step by step; reference: the CPU device's fused result disagrees with its own
    step-by-step one, which `device` matches). An inexact float output the plain relative test rejects is measured
    again against its `magnitudes` (from the CPU device's step-by-step values), so a sum that cancels is judged by
    the rounding of its terms."""
    row = {"seed": program.seed, "steps": len(program.steps), "status": "ok", "cause": ""}
    fused_error = None            # why the CPU device failed the fused program, if it did
    with Context(PARALLEL=0):     # a few small kernels per program: in-process compiles are faster than workers
        try:
            ref = run(program, "CPU")
        except Exception as e:
            # tinygrad's CPU device can fail a fused program it runs step by step (seed 11395: a shift whose left
            # operand folds to a weakint constant fails its UOp verification): then the step-by-step values are
            # the reference, and the row says so
            try:
                ref = run(program, "CPU", every_step=True)
            except Exception:
                return {**row, "status": "generator", "cause": first_line(e)}
            fused_error = first_line(e)
            row["reference"] = f"step by step (fused: {fused_error})"
        try:
            got = run(program, device)
        except Exception as e:
            if first_line(e) != fused_error:
                return {**row, "status": "crash", "cause": first_line(e)}
            # the same failure on both devices is tinygrad's, before any backend (seed 40419: its scheduler's rewrite
            # leaves a WHERE a weakint condition): `device` runs the program step by step too, and is checked so
            try:
                got = run(program, device, every_step=True)
            except Exception as e2:
                return {**row, "status": "crash", "cause": f"step by step: {first_line(e2)}"}
            row["reference"] += f"; {device} step by step too (the same failure fused)"
        if not any(compare(got[o], ref[o], program.units[o]) for o in program.outputs):
            return row
        steps, steps_failed = (ref if "reference" in row else None), None     # the step-by-step run, once
        if steps is None:
            try:
                steps = run(program, "CPU", every_step=True)
            except Exception as e:
                steps_failed = f"the CPU device failed step by step: {first_line(e)}"
        scales = magnitudes(program, steps) if steps is not None else {}
        bad = {o: m for o in program.outputs if (m := compare(got[o], ref[o], program.units[o], scales.get(o)))}
        if not bad:
            return row
        row.update(status="wrong", cause="; ".join(f"{o}: {m}" for o, m in bad.items()))
        if steps_failed:
            row["first_wrong"] = steps_failed
        elif localize:
            row["first_wrong"] = first_wrong_step(program, device, steps, scales)
            if row["first_wrong"] == "fusion" and cpu_fusion_disagrees(program, got, ref, steps, list(bad), scales):
                row["status"] = "reference"
    return row


def cpu_fusion_disagrees(program: Program, got: dict, ref: dict, steps: dict, outputs: list[str],
                         scales: dict) -> bool:
    """The CPU device's fused program is the odd one out: on every differing output its result differs from its own
    step-by-step result `steps`, which `device` matches (tinygrad's CPU device has fusion bugs of its own, e.g. a clip
    folded away by wrong bounds of a cast chain: seed 7139)."""
    u = program.units
    return all(compare(ref[o], steps[o], u[o], scales[o]) and not compare(got[o], steps[o], u[o], scales[o])
               for o in outputs)


def first_wrong_step(program: Program, device: str, steps: dict, scales: dict) -> str:
    """The first step whose value differs from the CPU device's `steps` when every step is realized on its own (its
    op class and text), "fusion" when none does: the wrong result needs the steps fused."""
    try:
        got = run(program, device, every_step=True)
    except Exception as e:
        return f"crash when realized step by step: {first_line(e)}"
    for s in program.steps:
        if compare(got[s.out], steps[s.out], program.units[s.out], scales[s.out]):
            return f"{OP_CLASS[s.op]}: {s.text()}"
    return "fusion"


def test_compare_takes_a_scalar_output():
    """A whole-tensor reduction's 0-d result (seed 7408 crashed the oracle in its relative-error branch)."""
    import numpy as np
    assert compare(np.array(1.0, np.float32), np.array(2.0, np.float32), 2.0 ** -8)
    assert compare(np.array(1.0, np.float32), np.array(1.0, np.float32), 2.0 ** -8) is None


@pytest.mark.needs_cc
def test_outputs_that_tinygrad_leaves_as_views_are_read():
    """Seed 9675's ending: a permute of a realized flip over a size-1 axis has no buffer of its own in tinygrad, and
    .numpy() refuses it on every device; the harness reads it through a clone."""
    import numpy as np
    from tinygrad import Tensor
    from tests.e2e.random_programs import to_numpy
    x = np.array([[[[3, -1, 7]]]], np.int32)
    view = Tensor(x, device="CPU").contiguous().realize().flip(2).contiguous().realize().permute(0, 3, 2, 1)
    np.testing.assert_array_equal(to_numpy(view), x.transpose(0, 3, 2, 1))


@pytest.mark.needs_cc
def test_a_cpu_fusion_bug_is_not_counted_against_tt():
    """Seed 7139 (int16 sum, clip, float16): tinygrad's CPU device returns -10736 from clip(x, -10000, 10000) when
    the kernel is fused, -10000 step by step; TT gives -10000. The verdict names the reference, not TT."""
    row = check(generate(7139, 2048, None))
    assert row["status"] == "reference" and row["first_wrong"] == "fusion", row


@pytest.mark.needs_cc
@pytest.mark.parametrize("seed, stepwise", [(11395, True), (12030, False), (40419, True)])
def test_programs_the_cpu_device_fails_fused_are_still_checked(seed, stepwise):
    """Seed 11395: the CPU device's UOp verification refuses the fused program (a shift of a folded weakint 0), so its
    step-by-step values are the reference; seed 12030: clang refuses the CPU device's float16 vector cast, and the
    reference is run again without tinygrad's optimizations (no vectors); seed 40419: tinygrad's scheduler fails the
    fused program on every device alike (a WHERE left with a weakint condition), so TT runs it step by step too. All
    are checked, not written off."""
    row = check(generate(seed, 2048, None))
    assert row["status"] == "ok" and ("reference" in row) == stepwise, row
    assert (f"{TT} step by step too" in row.get("reference", "")) == (seed == 40419), row


@pytest.mark.needs_cc
def test_a_cancelling_sum_is_judged_by_the_rounding_of_its_terms():
    """Seed 11628: v10 sums a float16 layernorm row (7 terms of about 1) that cancels to ~1e-16; the CPU device gave
    -4.9e-4, TT 7.0e-5. Relative to the sum itself any rounding is an error of 100 %; relative to its terms' magnitudes
    a few float16 units pass while a wrong value still fails."""
    import numpy as np
    program = generate(11628, 2048, None)
    steps = run(program, "CPU", every_step=True)
    scale = magnitudes(program, steps)
    terms = float(np.abs(steps["v9"].astype(np.float64)).sum())
    assert float(scale["v10"]) >= terms > 1
    ref, unit = steps["v10"], program.units["v10"]
    rounded = (ref + np.float16(2 * unit * terms)).astype(ref.dtype)
    assert compare(rounded, ref, unit) and compare(rounded, ref, unit, scale["v10"]) is None
    assert compare((ref + np.float16(0.25)).astype(ref.dtype), ref, unit, scale["v10"])


@pytest.mark.needs_cc
def test_magnitudes_bound_every_value():
    """The scale has every value's shape and is finite wherever the value is (an infinite scale would let any value
    pass); it is never below |value| by construction (np.maximum in `magnitudes`)."""
    import numpy as np
    for seed in range(6):
        program = generate(seed, CI_NUMEL, CI_STEPS)
        steps = run(program, "CPU", every_step=True)
        scale = magnitudes(program, steps)
        for s in program.steps:
            y = np.abs(np.asarray(steps[s.out], np.float64))
            assert scale[s.out].shape == y.shape and np.isfinite(scale[s.out][np.isfinite(y)]).all(), s.text()


def test_generator_covers_the_backend_dtypes():
    """The generator draws exactly the dtypes the backend declares to tinygrad."""
    from tt_backend.ops_tt import TTRenderer
    from tinygrad import Tensor
    declared = {dname(Tensor.empty(1, dtype=d, device="CPU")) for d in TTRenderer.supported_dtypes(None)}
    assert declared == set(SUPPORTED)


def test_generator_covers_the_issue_list():
    """Issue #17's list: elementwise, movement, reductions, matmuls (float and integer), softmax/norm patterns, integer
    and float dtypes; each op class and input dtype is drawn within the first 100 seeds (generation only: nothing
    runs)."""
    programs = [generate(seed) for seed in range(100)]
    assert {OP_CLASS[s.op] for p in programs for s in p.steps} == set(OP_CLASS.values())
    assert {i.dtype for p in programs for i in p.inputs} == set(SUPPORTED)
    def int32_weight(p: Program, name: str) -> bool: return any(i.name == name and i.dtype == "int32" for i in p.inputs)
    assert any(s.op == "matmul" and int32_weight(p, s.args[1]) for p in programs for s in p.steps), "no int32 matmul"


def test_generator_is_deterministic():
    assert generate(12345, CI_NUMEL, CI_STEPS).text() == generate(12345, CI_NUMEL, CI_STEPS).text()


def test_compare_catches_wrong_values():
    """The oracle itself: a wrong element fails every class; float rounding noise passes only where allowed."""
    import numpy as np
    ref = np.linspace(-1, 1, 64, dtype=np.float32)
    off = ref.copy()
    off[5] += 0.01
    assert compare(off, ref, 2.0 ** -24) and compare(off, ref, 0.0)
    noisy = ref * np.float32(1 + 2 ** -22)
    assert compare(noisy, ref, 2.0 ** -24) is None and compare(noisy, ref, 0.0)
    assert compare(np.array([1, 2], np.int32), np.array([1, 3], np.int32), 0.0)
    assert compare(np.array([np.nan], np.float32), np.array([1.0], np.float32), 2.0 ** -24)


@pytest.mark.needs_cc
@pytest.mark.parametrize("seed", CI_SEEDS)
def test_random_program(seed):
    program = generate(seed, CI_NUMEL, CI_STEPS)
    row = check(program, localize=False)
    assert row["status"] == "ok", f"{row['status']}: {row['cause']}\n{program.text()}"


def summarize(rows: list[dict]) -> None:
    counts = Counter(r["status"] for r in rows)
    print(f"\n{len(rows)} programs: {counts['ok']} ok, {counts['crash']} crashes, {counts['wrong']} wrong results, "
          f"{counts['generator']} generator errors (the CPU device failed), {counts['reference']} where the CPU "
          "device's fused result disagrees with its own step-by-step one (which TT matches)")
    stepwise = [r for r in rows if "reference" in r]
    if stepwise:
        print(f"  {len(stepwise)} checked against the CPU device's step-by-step values (its fused program failed): "
              + ", ".join(f"seed {r['seed']} {r['status']}" for r in stepwise[:10]))
    for status in ("crash", "wrong", "generator", "reference"):
        by = {}
        for r in rows:
            if r["status"] == status:
                key = cause_key(r["cause"]) if status != "wrong" else r.get("first_wrong", "?").split(":")[0]
                by.setdefault(key, []).append(r)
        for key, rs in sorted(by.items(), key=lambda kv: -len(kv[1])):
            print(f"  {status}: {len(rs)} x {key}")
            for r in rs[:5]:
                print(f"      seed {r['seed']}: {r['cause'][:200]}"
                      + (f" | first wrong: {r['first_wrong']}" if "first_wrong" in r else ""))
            print("      replay: " + " ".join(f"python -m tests.e2e.test_random_programs --replay {r['seed']}"
                                            for r in rs[:3]))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("n", type=int, nargs="?", default=1000, help="programs to run (seeds S .. S+n-1)")
    ap.add_argument("--seed", type=int, default=0, help="first seed")
    ap.add_argument("--jsonl", help="one JSON line per program")
    ap.add_argument("--numel", type=int, default=2048, help="largest value, in elements")
    ap.add_argument("--steps", type=int, default=None, help="steps per program (default: 3-12, drawn per seed)")
    ap.add_argument("--device", default=TT)
    ap.add_argument("--replay", type=int, metavar="SEED", help="print the program of SEED and check it")
    ap.add_argument("--summarize", nargs="+", metavar="JSONL", help="only summarize the rows of earlier runs")
    a = ap.parse_args(argv)
    if a.summarize:
        summarize([json.loads(ln) for f in a.summarize for ln in open(f) if ln.strip()])
        return 0
    if a.replay is not None:
        program = generate(a.replay, a.numel, a.steps)
        print(program.text())
        row = check(program, a.device)
        print(json.dumps(row, indent=1))
        return 0 if row["status"] == "ok" else 1
    rows, t0 = [], time.time()
    sink = open(a.jsonl, "w") if a.jsonl else None
    for seed in range(a.seed, a.seed + a.n):
        t = time.time()
        program = generate(seed, a.numel, a.steps)
        row = {**check(program, a.device), "seconds": round(time.time() - t, 2)}
        rows.append(row)
        if sink:
            sink.write(json.dumps({**row, "text": program.text()}) + "\n")
            sink.flush()
        print(f"[{len(rows)}/{a.n} {time.time() - t0:.0f}s] seed {seed}: {row['status']} ({row['seconds']} s, "
              f"{row['steps']} steps){' ' + row['cause'][:160] if row['cause'] else ''}", flush=True)
    summarize(rows)
    return 0 if all(r["status"] == "ok" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
