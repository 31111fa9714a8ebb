"""The lowering's SFPLOADMACRO schedules (lowering/codegen/sfpu_macro.py) on the emulator, strict mode (a scheduled
instruction meeting a regular one on its sub-unit, or reading a MAD result a cycle early, is an error): for each body
shape the pass takes, the macro schedule's output is bit-identical to the macro-free schedule's on random data with
special values, and a row step costs the cycles the cost model prices (SfpuProgram.issue_counts), fewer than the
macro-free one's. Bodies whose last op cannot be scheduled keep their macro-free form and say why."""
from __future__ import annotations

import numpy as np
import pytest
from tinygrad import Tensor, dtypes

from tt_backend.chip import isa, layout
from tt_backend.lowering.codegen.replay import REPLAY_WORDS
from tt_backend.lowering.codegen.sfpu_codegen import compile_sfpu
from tt_backend.lowering.codegen.sfpu_macro import macro_schedule
from tt_backend.lowering.dag import ValueDAG
from tt_backend.runtime.emu.tensix import Tensix

from tests.support.tensix_runs import mop_run

E = isa.encode
F = "float32"
SPECIALS = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -1e-40, 3.4e38, -1.0, 1.0], np.float32)


def _dag(n_inputs: int, build) -> ValueDAG:
    d = ValueDAG()
    x = [d.add("LOAD", F, (), j) for j in range(n_inputs)]
    const = lambda v: d.add("CONST", F, (), v)
    d.out = build(d, x, const)
    return d


def _demo(d, x, c):
    """The README's demo: ((a*b+1).maximum(0.5) - (a<0).where(a.exp2(), b.reciprocal())); last op SUB."""
    a, b = x
    left = d.add("MAX", F, (d.add("ADD", F, (d.add("MUL", F, (a, b)), c(1.0))), c(0.5)))
    right = d.add("WHERE", F, (d.add("CMPLT", "bool", (a, c(0.0))), d.add("EXP2", F, (a,)),
                                d.add("RECIPROCAL", F, (b,))))
    return d.add("SUB", F, (left, right))


# body shape -> (inputs, DAG, the scheduled op)
FITS = {
    "a*b+a": (2, lambda d, x, c: d.add("ADD", F, (d.add("MUL", F, (x[0], x[1])), x[0])), "SFPMAD"),
    "a*b+c": (3, lambda d, x, c: d.add("ADD", F, (d.add("MUL", F, (x[0], x[1])), x[2])), "SFPMAD"),
    "a*b": (2, lambda d, x, c: d.add("MUL", F, (x[0], x[1])), "SFPMAD"),
    "a+b": (2, lambda d, x, c: d.add("ADD", F, (x[0], x[1])), "SFPADD"),
    "a-b": (2, lambda d, x, c: d.add("SUB", F, (x[0], x[1])), "SFPADD"),
    "x*3.5": (1, lambda d, x, c: d.add("MUL", F, (x[0], c(3.5))), "SFPMAD"),
    "x+0.25": (1, lambda d, x, c: d.add("ADD", F, (x[0], c(0.25))), "SFPADD"),
    "(a*b).max(a)*b+a": (2, lambda d, x, c: d.add("ADD", F, (d.add("MUL", F, (
        d.add("MAX", F, (d.add("MUL", F, (x[0], x[1])), x[0])), x[1])), x[0])), "SFPMAD"),
    "demo": (2, _demo, "SFPADD"),
}
# body shape -> why it keeps the macro-free form
MACRO_FREE = {
    "where": (2, lambda d, x, c: d.add("WHERE", F, (d.add("CMPLT", "bool", (x[0], x[1])), x[0], x[1])), "SFPMOV"),
    "max": (2, lambda d, x, c: d.add("MAX", F, (x[0], x[1])), "SFPMOV"),
}


def _data(n_slots: int, seed: int) -> np.ndarray:
    """Dst rows: each input slot random values over a wide exponent range, one datum in eight a special value."""
    rng = np.random.default_rng(seed)
    v = (rng.standard_normal(512 * 16) * 2.0 ** rng.integers(-30, 30, 512 * 16)).astype(np.float32)
    special = rng.random(v.size) < 0.125
    v[special] = rng.choice(SPECIALS, special.sum())
    return v.view(np.uint32).reshape(512, 16)


def _run(prog, macro: bool, data: np.ndarray, reps: int = 32):
    """Two tiles of `reps` row steps, as the compute template issues them: replayed by a MOP when the body fits the
    replay buffer, else pushed word by word; the drain after each tile's row steps."""
    setup, body, drain = prog.issued(macro_free=not macro)
    if len(body) <= REPLAY_WORDS:
        tx = mop_run(body, reps=reps, tiles=2, setup=setup, data=data, drain=drain)
    else:
        tx = Tensix(np.zeros(layout.L1_SIZE, np.uint8), strict=True)
        tx.dst.write_rows32(0, data)
        reset = E("SETRWC", rwc_cr=0, rwc_d=0, rwc_b=0, rwc_a=0, bit_mask=4, clear_ab_vld=0)
        for w in [E("SETC16", setc16_reg=29, setc16_value=2), *setup] + ([reset] + body * reps + drain) * 2:
            tx.push(1, w)
    tx.settle()
    return tx


def _row_cycles(prog, macro: bool, data: np.ndarray) -> float:
    """Cycles of one row step: the span of 32 row steps minus that of 16, over 16."""
    spans = []
    for reps in (16, 32):
        tm = _run(prog, macro, data, reps).tm
        spans.append(tm.sfpu_busy() - tm.first[1])
    return (spans[1] - spans[0]) / (2 * 16)       # two tiles each


@pytest.mark.parametrize("shape", list(FITS))
def test_macro_schedule_bit_identical_and_faster(shape):
    n, build, op = FITS[shape]
    prog = compile_sfpu(_dag(n, build), n)
    prog.macro, note = macro_schedule(prog)
    assert prog.macro is not None, note
    assert prog.macro.scheduled == f"{op} + SFPSTORE"
    out = slice(64 * prog.out_slot, 64 * prog.out_slot + 64)
    for seed in (1, 2):
        data = _data(prog.dst_slots, seed)
        free = _run(prog, False, data).dst.rows32[out].copy()
        got = _run(prog, True, data).dst.rows32[out].copy()
        assert not np.array_equal(free, data[out]), "the output slot was not written"
        assert np.array_equal(got, free), f"{shape}: {np.sum(got != free)} datums differ"
    data = _data(prog.dst_slots, 3)
    free_cycles, macro_cycles = _row_cycles(prog, False, data), _row_cycles(prog, True, data)
    print(f"\n{shape}: {free_cycles:g} -> {macro_cycles:g} cycles per row step")
    assert free_cycles == prog.issue_counts(macro_free=True)[1]
    assert macro_cycles == prog.issue_counts()[1]
    assert macro_cycles < free_cycles


# programs through tinygrad's frontend and the elementwise family (the program a plan carries) -> whether the pass
# takes them. Float modulo's body ends in an SFPMAD whose addend was loaded long before a flag setter that names the
# same register (sfpu_regs counts it as a write): it must not be taken for that register's writer. The float16 log
# (random program seed 12030) ends in an SFPMAD by ln 2, placed by an SFPLOADI pair: the macro goes before the pair.
PROGRAMS = {"a % b": (lambda a, b: a % b, False),
            "(a<b).where(a, b) * b + a": (lambda a, b: (a < b).where(a, b) * b + a, True),
            "a.exp2() * 3": (lambda a, b: a.exp2() * 3, True),
            "(a * b).sqrt() - b": (lambda a, b: (a * b).sqrt() - b, True),
            # the last op's operand is a 32-bit constant placed by two SFPLOADIs, each writing one half
            "(a.half().abs() + 0.5).log()": (lambda a, b: (a.cast(dtypes.float16).abs() + 0.5).log(), True)}


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_program_bodies_bit_identical(name):
    from tinygrad.uop.ops import Ops
    from tt_backend.lowering.select import lower
    ins = [Tensor.empty(40, 50, device="CPU") for _ in range(2)]
    fn, taken = PROGRAMS[name]
    calls = [c for c in fn(*ins).schedule_linear().src if c.op is Ops.CALL]
    prog = lower(calls[-1].src[0], "k", None).sfpu
    assert (prog.macro is not None) == taken, prog.macro_note
    out = slice(64 * prog.out_slot, 64 * prog.out_slot + 64)
    data = _data(prog.dst_slots, 4)
    free = _run(prog, False, data).dst.rows32[out].copy()
    assert np.array_equal(_run(prog, True, data).dst.rows32[out], free), prog.macro_note


@pytest.mark.parametrize("shape", list(MACRO_FREE))
def test_bodies_that_do_not_fit_keep_the_macro_free_form(shape):
    n, build, last = MACRO_FREE[shape]
    prog = compile_sfpu(_dag(n, build), n)
    macro, note = macro_schedule(prog)
    assert macro is None and last in note
    assert prog.issued(macro_free=False) == prog.issued(macro_free=True)
