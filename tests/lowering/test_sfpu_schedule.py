"""SFPU body scheduling (lowering/codegen/sfpu_schedule.py): the scheduled body is the unscheduled one reordered, gives
the same output bits on the bit-exact SFPU model (random DAGs, random inputs with special values), stalls less, and
its `body_stalls` is what the emulator's cycle model charges."""
from __future__ import annotations

from collections import Counter

import numpy as np

from tests.lowering.test_sfpu_codegen import rand_i32, rand_mixed_f32, run
from tt_backend.chip.isa import decode
from tt_backend.lowering.codegen import sfpu_codegen
from tt_backend.lowering.codegen.sfpu_codegen import compile_sfpu
from tt_backend.lowering.dag import ValueDAG
from tt_backend.runtime.emu.cycles import SfpuTiming, sfpu_info

F_BINARY = ("ADD", "SUB", "MUL", "MAX", "DIV")
F_UNARY = ("EXP2", "LOG2", "SQRT", "RECIPROCAL", "NEG", "SIN", "TRUNC")
I_BINARY = ("ADD", "SUB", "MUL", "AND", "OR", "XOR", "MAX")


def random_dag(seed: int, n_ops: int = 14) -> ValueDAG:
    """Float32 and int32 values mixed through CMPLT/WHERE and CASTs; inputs 0, 1 float32, 2 int32."""
    rng = np.random.default_rng(seed)
    d = ValueDAG()
    fs = [d.add("LOAD", "float32", (), 0), d.add("LOAD", "float32", (), 1), d.add("CONST", "float32", (), 0.75)]
    ints = [d.add("LOAD", "int32", (), 2), d.add("CONST", "int32", (), 3)]
    pick = lambda vals: vals[int(rng.integers(len(vals)))]
    for _ in range(n_ops):
        kind = rng.integers(6)
        if kind < 2:
            fs.append(d.add(str(rng.choice(F_BINARY)), "float32", (pick(fs), pick(fs))))
        elif kind == 2:
            fs.append(d.add(str(rng.choice(F_UNARY)), "float32", (pick(fs),)))
        elif kind == 3:
            cond = d.add("CMPLT", "bool", (pick(fs), pick(fs)))
            fs.append(d.add("WHERE", "float32", (cond, pick(fs), pick(fs))))
        elif kind == 4:
            ints.append(d.add(str(rng.choice(I_BINARY)), "int32", (pick(ints), pick(ints))))
        else:
            fs.append(d.add("CAST", "float32", (pick(ints),)))
    d.out = d.add("ADD", "float32", (fs[-1], d.add("CAST", "float32", (ints[-1],))))
    return d


def emulated_stalls(words: list[int], steps: int) -> int:
    """Stall cycles of `steps` row steps run back to back under the emulator's SFPU timing."""
    timing, t = SfpuTiming(strict=True), -1
    for w in words * steps:
        t = timing.regular(t + 1, sfpu_info(*decode(w)))
    return t + 1 - steps * len(words)


def unscheduled(monkeypatch, d: ValueDAG, n_inputs: int):
    with monkeypatch.context() as m:
        m.setattr(sfpu_codegen, "schedule_body", lambda ins, *_: ins)
        return compile_sfpu(d, n_inputs, "float32")


def real_instructions(words: list[int]) -> Counter:
    return Counter(w for w in words if decode(w)[0] != "SFPNOP")


def check(monkeypatch, d: ValueDAG, inputs: list[np.ndarray]) -> tuple[int, int]:
    """Scheduled against unscheduled: same instructions, same output bits, `body_stalls` = the emulator's stalls of a
    row step after another; returns both programs' stall counts."""
    prog, plain = compile_sfpu(d, len(inputs), "float32"), unscheduled(monkeypatch, d, len(inputs))
    assert real_instructions(prog.body) == real_instructions(plain.body)
    assert (run(prog, inputs) == run(plain, inputs)).all()
    assert prog.body_stalls == emulated_stalls(prog.body, 3) - emulated_stalls(prog.body, 2)
    return prog.body_stalls, plain.body_stalls


def test_random_dags_keep_their_bits(monkeypatch):
    rng = np.random.default_rng(70)
    inputs = [rand_mixed_f32(rng), rand_mixed_f32(rng), rand_i32(rng).view(np.float32)]
    stalls = [check(monkeypatch, random_dag(seed), inputs) for seed in range(12)]
    assert sum(s for s, _ in stalls) < sum(p for _, p in stalls)


def test_spilling_body_keeps_its_bits(monkeypatch):
    """More live values than LRegs: spill stores and reloads move with the rest and stay apart (run() checks the
    Dst gap)."""
    d = ValueDAG()
    x, y = d.add("LOAD", "float32", (), 0), d.add("LOAD", "float32", (), 1)
    terms = [d.add("MUL", "float32", (d.add("ADD", "float32", (x, d.add("CONST", "float32", (), k + 2.0))), y))
             for k in range(12)]
    s, p = terms[0], terms[-1]
    for t in terms[1:]:
        s = d.add("ADD", "float32", (s, t))
    for t in terms[-2::-1]:
        p = d.add("MUL", "float32", (p, t))
    d.out = d.add("SUB", "float32", (s, p))
    rng = np.random.default_rng(71)
    check(monkeypatch, d, [rand_mixed_f32(rng), rand_mixed_f32(rng)])


def test_readme_demo_runs_near_one_instruction_per_cycle(monkeypatch):
    """((a*b+1).maximum(0.5) - (a<0).where(exp2(a), 1/b)): the exp2 and reciprocal chains interleave."""
    d = ValueDAG()
    a, b = d.add("LOAD", "float32", (), 0), d.add("LOAD", "float32", (), 1)
    m = d.add("MAX", "float32", (d.add("ADD", "float32", (d.add("MUL", "float32", (a, b)),
                                                          d.add("CONST", "float32", (), 1.0))),
                                 d.add("CONST", "float32", (), 0.5)))
    w = d.add("WHERE", "float32", (d.add("CMPLT", "bool", (a, d.add("CONST", "float32", (), 0.0))),
                                   d.add("EXP2", "float32", (a,)), d.add("RECIPROCAL", "float32", (b,))))
    d.out = d.add("SUB", "float32", (m, w))
    rng = np.random.default_rng(72)
    stalls, before = check(monkeypatch, d, [rand_mixed_f32(rng), rand_mixed_f32(rng)])
    assert stalls * 4 < before and stalls * 20 < len(compile_sfpu(d, 2, "float32").body)
