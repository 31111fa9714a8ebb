"""Precision-aware placement (lowering/graph.py, lowering/placement/, tt_backend/placement_eval.py).

Unit level: tile graph, chains/branches, the product reassociation, pins, the evaluator against the documented FPU
facts (docs/fpu_path.md §10), the search (FPU when the budget allows, SFPU when not, bit-exact FPU moves by default).
End to end on the emulator (tinygrad, TT_CHECK): the measured error of FPU placements matches the prediction and
never exceeds the budget over a randomized suite; the RMSNorm second kernel x*(1/r)*w with bf16 x.
"""
from __future__ import annotations

import os

import numpy as np
import pytest

from tt_backend.lowering.dag import ValueDAG
from tt_backend.lowering.graph import (branches, chains, fpu_candidates, independent, reassociate_products, tile_graph)
from tt_backend.lowering.placement.choice import SFPU, Choice, options, split
from tt_backend.lowering.placement.pins import parse_pins
from tt_backend.lowering.placement.reference import bf16_round, reference
from tt_backend.lowering.placement.search import SAFETY, analytic_bound, place
from tt_backend.chip.numerics.fpu_math import FIDELITY_PHASES
from tt_backend import placement_eval as PE


def rms2_dag() -> tuple[ValueDAG, list[str]]:
    """RMSNorm's second kernel as tinygrad lowers it: (float(x) * (1/r)) * w, x bf16, r per row, w per column."""
    d = ValueDAG()
    x = d.add("LOAD", "bfloat16", (), 0)
    xf = d.add("CAST", "float32", (x,))
    r = d.add("LOAD", "float32", (), 1)
    inv = d.add("RECIPROCAL", "float32", (r,))
    m = d.add("MUL", "float32", (xf, inv))
    w = d.add("LOAD", "float32", (), 2)
    d.out = d.add("MUL", "float32", (m, w))
    return d, ["bfloat16", "float32", "float32"]


# ------------------------------------------------------------------------------------------------ graph

def test_tile_graph_chains_and_branches():
    d, _ = rms2_dag()
    g = tile_graph(d)
    assert g.nodes[0]["format"] == "bf16" and g.nodes[2]["format"] == "fp32" and g.nodes[4]["format"] == "fp32"
    assert g.nodes[1]["fpu_operand"] and not g.nodes[3]["fpu_operand"]          # CAST(bf16 LOAD) is an L1 tile
    assert g.edges[4, 6]["operand"] == (0,) and g.edges[5, 6]["operand"] == (1,)
    assert fpu_candidates(g) == []                   # x*(1/r): 1/r is computed, not an L1 tile
    assert [1, 4, 6] in chains(g) and [3] in chains(g)
    assert independent(g, 1, 3) and not independent(g, 3, 6)

    re = reassociate_products(d)                      # (x*(1/r))*w -> (x*w)*(1/r)
    g2 = tile_graph(re)
    (xw,) = fpu_candidates(g2)
    assert re.nodes[xw].op == "MUL" and {re.nodes[s].op for s in re.nodes[xw].srcs} == {"CAST", "LOAD"}
    exclusive = branches(g2, re.out)
    assert xw in exclusive[0] and any(re.nodes[v].op == "RECIPROCAL" for v in exclusive[1])
    assert not (exclusive[0] & exclusive[1])
    ref = [np.float32([1.5, -2.0]), np.float32([4.0, 0.5]), np.float32([3.0, 0.25])]
    np.testing.assert_allclose(reference(re, ref), reference(d, ref), rtol=1e-6)


def test_split_replaces_fpu_nodes_by_dst_slots():
    d, dts = rms2_dag()
    re = reassociate_products(d)
    (xw,) = fpu_candidates(tile_graph(re))
    sp = split(re, {xw: options(re, xw)[-1]}, 3)
    (o,) = sp.fpu_ops
    assert (o.kind, o.a, o.b, o.fmt_a, o.fmt_b, o.phases, o.slot) == ("ELWMUL", 0, 2, "bf16", "tf32", 4, 3)
    assert sp.dst_inputs == [1] and sp.n_slots == 4   # x and w only feed the FPU; 1/r still reads r from Dst


def test_pins_parse():
    pins = parse_pins("E_4_*:n5=FPU:HiFi2,n3=SFPU;other:MUL=FPU", "E_4_256")
    assert pins == {"5": Choice("FPU", "HiFi2"), "3": SFPU}
    assert parse_pins("MUL=FPU:HiFi4:bf16/tf32", "anything") == {"MUL": Choice("FPU", "HiFi4", ("bf16", "tf32"))}
    with pytest.raises(Exception):
        parse_pins("n1=GPU", "k")


# ------------------------------------------------------------------------------------------------ evaluator facts

def _bf16(rng, n):
    return bf16_round(rng.standard_normal(n).astype(np.float32) * 4)


def test_elwmul_hifi4_bf16_is_the_fp32_product_and_lofi_is_a5_b7():
    """docs/fpu_path.md §0/10: ELWMUL HiFi4 on bf16 x bf16 equals the IEEE fp32 product; LoFi = A5 * B7 (truncated)."""
    rng = np.random.default_rng(0)
    a, b = _bf16(rng, 4096), _bf16(rng, 4096)
    d = ValueDAG()
    x, y = d.add("LOAD", "bfloat16", (), 0), d.add("LOAD", "bfloat16", (), 1)
    d.out = d.add("MUL", "float32", (d.add("CAST", "float32", (x,)), d.add("CAST", "float32", (y,))))
    v = d.out
    hifi4 = PE.evaluate(d, {v: Choice("FPU", "HiFi4", ("bf16", "bf16"))}, [a, b], 2)
    np.testing.assert_array_equal(hifi4.view(np.uint32), (a * b).view(np.uint32))
    lofi = PE.evaluate(d, {v: Choice("FPU", "LoFi", ("bf16", "bf16"))}, [a, b], 2)
    a5 = (a.view(np.uint32) & np.uint32(0xFFF80000)).view(np.float32)
    b7 = (b.view(np.uint32) & np.uint32(0xFFFE0000)).view(np.float32)
    np.testing.assert_array_equal(lofi, a5 * b7)
    sfpu = PE.evaluate(d, {}, [a, b], 2)
    np.testing.assert_array_equal(sfpu, a * b)


def test_analytic_bound_holds_per_node():
    rng = np.random.default_rng(1)
    d, dts = rms2_dag()
    re = reassociate_products(d)
    (xw,) = fpu_candidates(tile_graph(re))
    xs = [_bf16(rng, 2048), rng.uniform(0.5, 2, 2048).astype(np.float32), rng.standard_normal(2048).astype(np.float32)]
    # the node alone: out = x*w (drop the 1/r factor to see the node's own error)
    one = ValueDAG(list(re.nodes[:xw + 1]), xw)
    for c in options(re, xw):
        sp = split(one, {xw: c}, 3)
        got = PE.evaluate(one, {xw: c}, xs, 3, dts)
        ref = reference(one, xs)
        rel = np.abs(got - ref) / np.abs(ref)
        assert rel.max() <= analytic_bound(sp.fpu_ops[0], dts) + 1e-7, c
        assert (np.abs(got) <= np.abs(ref)).all()      # truncation only: never larger in magnitude (docs/fpu_path.md §10.5)


# ------------------------------------------------------------------------------------------------ search

def test_evaluations_kept_by_content_change_no_placement():
    """The evaluator keeps its outputs by content (graph, choices, dtypes, sample bytes): placing a kernel again, or
    the same graph for another size, reuses them and gives the same placement and report as a fresh evaluation; other
    samples are evaluated anew."""
    d, dts = rms2_dag()
    ev = PE.evaluator_for(dts)
    PE.clear_evaluations()
    runs = dict(PE.EVAL_STATS)
    fresh = place("rms2", d, dts, "float32", 8192, ev, budget=1e-2).report()
    assert PE.EVAL_STATS["evaluated"] > runs["evaluated"]
    mid = dict(PE.EVAL_STATS)
    again = place("rms2", d, dts, "float32", 8192 * 4, ev, budget=1e-2).report()
    assert PE.EVAL_STATS["evaluated"] == mid["evaluated"] and PE.EVAL_STATS["reused"] > mid["reused"]
    cyc = ("predicted_cycles", "predicted_cycles_per_tile", "all_sfpu_cycles", "nodes")   # cycles scale with the size
    assert {k: v for k, v in again.items() if k not in cyc} == {k: v for k, v in fresh.items() if k not in cyc}
    assert [{k: v for k, v in n.items() if k != "cycles"} for n in again["nodes"]] == \
        [{k: v for k, v in n.items() if k != "cycles"} for n in fresh["nodes"]]
    PE.clear_evaluations()
    assert place("rms2", d, dts, "float32", 8192 * 4, ev, budget=1e-2).report() == again
    place("rms2", d, dts, "float32", 8192, ev, budget=1e-2, seed=5)
    assert PE.EVAL_STATS["evaluated"] > mid["evaluated"]


def test_kept_reciprocal_only_within_the_budget():
    """x * (1/s) with a uniform s: within a budget the placement keeps the product (the reciprocal computed once per
    tile, two roundings), its predicted error (against the correctly rounded quotient tinygrad's CPU device computes)
    within the budget; a budget below that rounding error, or no budget, keeps the division."""
    from tt_backend.lowering.rewrite import KEEP_RECIPROCAL, fuse_divide
    d, dts = ValueDAG(), ["float32", "float32"]
    x, s = d.add("LOAD", "float32", (), 0), d.add("LOAD", "float32", (), 1)
    d.out = d.add("MUL", "float32", (x, d.add("RECIPROCAL", "float32", (s,))))
    ev = PE.evaluator_for(dts)

    def kept(budget):
        pl = place("scale", d, dts, "float32", 8192, ev, budget=budget, uniform=frozenset({1}))
        return any(n.op == "MUL" and n.arg == KEEP_RECIPROCAL for n in fuse_divide(pl.dag).nodes), pl
    loose, pl = kept(1e-3)
    assert loose and pl.predicted_error <= SAFETY * 1e-3
    assert not kept(1e-9)[0] and not kept(None)[0]


def test_budget_moves_the_multiply_to_the_fpu_and_tight_budget_keeps_sfpu():
    d, dts = rms2_dag()
    ev = PE.evaluator_for(dts)
    loose = place("rms2", d, dts, "float32", 8192, ev, budget=1e-2)
    tight = place("rms2", d, dts, "float32", 8192, ev, budget=1e-5)
    faithful = place("rms2", d, dts, "float32", 8192, ev, budget=None)
    assert loose.reassociated and [c.engine for c in loose.choices.values()] == ["FPU"]
    assert loose.predicted_error <= SAFETY * 1e-2 and loose.cycles["kernel"] < loose.sfpu_cycles_all
    assert tight.choices == {} and tight.cycles["kernel"] == tight.sfpu_cycles_all
    assert faithful.choices == {} and faithful.predicted_error < 1e-6   # w is fp32: no exact FPU product
    mid = place("rms2", d, dts, "float32", 8192, ev, budget=2e-3)
    fid = [c.fidelity for c in mid.choices.values()]
    assert fid and FIDELITY_PHASES[fid[0]] > FIDELITY_PHASES[[c.fidelity for c in loose.choices.values()][0]]


def test_default_takes_bit_exact_fpu_products():
    """No budget: bf16 x bf16 at HiFi4 into an fp32 Dst is exact, so the FPU takes it (cheaper, same bits)."""
    d = ValueDAG()
    x, y = d.add("LOAD", "bfloat16", (), 0), d.add("LOAD", "bfloat16", (), 1)
    d.out = d.add("MUL", "bfloat16", (x, y))
    pl = place("bf16mul", d, ["bfloat16"] * 2, "bfloat16", 4096, PE.evaluator_for(["bfloat16"] * 2), None)
    assert [(c.engine, c.fidelity) for c in pl.choices.values()] == [("FPU", "HiFi4")]
    assert pl.predicted_error == 0.0 and pl.cycles["kernel"] < pl.sfpu_cycles_all


def test_deferred_prediction_places_without_evaluating_and_reports_the_same():
    """A float32-faithful kernel with no exact FPU product is placed all-SFPU without running the SFPU model on the
    samples (most of a placement's time); its report makes the prediction then, the same as the eager search's."""
    d, dts = rms2_dag()
    counted = []
    ev = lambda *a: counted.append(1) or PE.evaluator_for(dts)(*a)
    lazy = place("rms2", d, dts, "float32", 8192, ev, budget=None, defer=True)
    assert lazy.choices == {} and counted == [] and lazy.predicted_error is None
    eager = place("rms2", d, dts, "float32", 8192, PE.evaluator_for(dts), budget=None)
    assert lazy.report() == eager.report() and counted and lazy.predicted_error == eager.predicted_error < 1e-6
    # an exact FPU product (bf16 x bf16 at HiFi4) is decided on the samples, so it is predicted at once
    b = ValueDAG()
    x, y = b.add("LOAD", "bfloat16", (), 0), b.add("LOAD", "bfloat16", (), 1)
    b.out = b.add("MUL", "bfloat16", (x, y))
    pl = place("bf16mul", b, ["bfloat16"] * 2, "bfloat16", 4096, PE.evaluator_for(["bfloat16"] * 2), None, defer=True)
    assert pl.choices and pl.pending is None and pl.predicted_error == 0.0


def test_pins_override_the_search():
    d, dts = rms2_dag()
    pins = parse_pins("rms2:MUL=FPU:LoFi", "rms2")
    pl = place("rms2", d, dts, "float32", 1024, PE.evaluator_for(dts), budget=None, pins=pins)
    assert [(c.engine, c.fidelity) for c in pl.choices.values()] == [("FPU", "LoFi")]
    assert pl.predicted_error > 1e-2 and any(n["pinned"] for n in pl.nodes)


# ------------------------------------------------------------------------------------------------ end to end

@pytest.fixture
def tt_env(monkeypatch, tmp_path):
    """Set placement knobs for kernels compiled in this test. The knobs are part of tinygrad's program cache key
    (ops_tt._KnobsKey), so no cache clearing is needed between budgets."""
    monkeypatch.setenv("TT_CHECK", "1")
    monkeypatch.setenv("TT_DUMP", str(tmp_path))
    PE.CHECKS.clear()

    def set_budget(b):
        if b is None:
            monkeypatch.delenv("TT_ERR_BUDGET", raising=False)
        else:
            monkeypatch.setenv("TT_ERR_BUDGET", str(b))
    yield set_budget


@pytest.mark.needs_cc
def test_budget_change_recompiles_the_same_kernel(tt_env, monkeypatch):
    """One process, one matmul AST, budget 1e-2 with TT_BUDGET_SAMPLED=1 (the FPU may take the matmul), then 1e-2
    without it, 1e-4, none: each realize meets its own placement (a cache keyed on the AST alone would reuse the FPU
    program placed first)."""
    from tinygrad import Tensor
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((64, 64)).astype(np.float32), rng.standard_normal((64, 64)).astype(np.float32)
    ref = a.astype(np.float64) @ b
    errs = {}
    for budget, sampled in ((1e-2, "1"), (1e-2, "0"), (1e-4, "1"), (None, "1")):
        tt_env(budget)
        monkeypatch.setenv("TT_BUDGET_SAMPLED", sampled)
        out = (Tensor(a, device="TT") @ Tensor(b, device="TT")).numpy()
        errs[budget, sampled] = np.linalg.norm(out - ref) / np.linalg.norm(ref)
    assert 1e-6 < errs[1e-2, "1"] <= 1e-2, errs        # the FPU at some fidelity
    assert all(e <= 1e-6 for k, e in errs.items() if k != (1e-2, "1")), errs   # the fp32 SFPU matmul


def _tt(a, dt=None):
    from tinygrad import Tensor, dtypes
    t = Tensor(a, device="TT:emu")   # emulated cycles are compared: the emulator even when TT_SIMULATOR is set
    return t.cast(dtypes.bfloat16).realize() if dt == "bf16" else t.realize()   # a bf16 tile in L1, not a fused cast


def _last(name_prefix="E_"):
    return [c for c in PE.CHECKS if c["kernel"].startswith(name_prefix)][-1]


RANDOM_KERNELS = [   # (fn, input kinds) - elementwise kernels with FPU candidates among SFPU work
    (lambda a, b: a * b, ("f32", "f32")),
    (lambda a, b: a + b, ("f32", "f32")),
    (lambda a, b: a - b, ("f32", "f32")),
    (lambda a, b, c: (a * b).maximum(c), ("f32", "f32", "f32")),
    (lambda a, b, c: a.float() * b * c.reciprocal(), ("bf16", "f32", "pos")),
    (lambda a, b, c: (a * b).exp2() + c, ("f32", "f32", "f32")),
    (lambda a, b: a.float() * b.float() + 1.0, ("bf16", "bf16")),
    (lambda a, b, c: (a - b) * c, ("f32", "f32", "f32")),
]


@pytest.mark.needs_cc
def test_measured_error_within_budget_randomized(tt_env):
    """Randomized elementwise kernels under random budgets: the measured error (fresh inputs, real run on the
    emulator) never exceeds the budget and tracks the prediction."""
    rng = np.random.default_rng(7)
    ratios = []
    for k, (fn, kinds) in enumerate(RANDOM_KERNELS):
        budget = float(10 ** rng.uniform(-3.5, -1.5))
        tt_env(budget)
        shape = (32 + 32 * (k % 2), 64)
        arrays = [rng.uniform(0.5, 2, shape).astype(np.float32) if kd == "pos" else
                  rng.standard_normal(shape).astype(np.float32) for kd in kinds]
        fn(*[_tt(a, "bf16" if kd == "bf16" else None) for a, kd in zip(arrays, kinds)]).realize()
        c = _last()
        assert c["measured_error"] <= budget, (k, c)
        if c["predicted_error"] and c["predicted_error"] > 1e-6:
            ratios.append(c["measured_error"] / c["predicted_error"])
    print(f"\nworst measured/predicted over {len(ratios)} FPU placements: {max(ratios):.3f}")
    assert ratios and max(ratios) < 2.0


@pytest.mark.needs_cc
def test_predicted_equals_measured_bit_for_bit(tt_env, monkeypatch, target):
    """Same inputs into the evaluator and into a real run (each `target`: the emulator, and Tenstorrent's ttsim, also
    through tt-umd, when TT_SIMULATOR points at it): identical output bits at every fidelity (same numeric models,
    templates doing what they say)."""
    from tinygrad import Tensor, dtypes
    dev = f"TT:{target}"
    rng = np.random.default_rng(3)
    x = bf16_round(rng.standard_normal((32, 64)).astype(np.float32))
    w = rng.standard_normal((32, 64)).astype(np.float32)
    xt, wt = Tensor(x, device=dev).cast(dtypes.bfloat16).realize(), Tensor(w, device=dev).realize()
    d = ValueDAG()
    a = d.add("CAST", "float32", (d.add("LOAD", "bfloat16", (), 0),))
    d.out = d.add("MUL", "float32", (a, d.add("LOAD", "float32", (), 1)))
    dts = ["bfloat16", "float32"]
    for fid in FIDELITY_PHASES:
        tt_env(None)
        monkeypatch.setenv("TT_PLACE", f"MUL=FPU:{fid}")
        out = (xt.float() * wt).numpy()
        pl = place("k", d, dts, "float32", x.size, PE.evaluator_for(dts), None, parse_pins(f"MUL=FPU:{fid}", "k"))
        assert [c.fidelity for c in pl.choices.values()] == [fid]
        pred = PE.evaluate(d, pl.choices, [x.reshape(-1), w.reshape(-1)], 2, dts)
        np.testing.assert_array_equal(out.reshape(-1).view(np.uint32), pred.view(np.uint32), err_msg=fid)


@pytest.mark.needs_cc
def test_rmsnorm_second_kernel(tt_env, tmp_path):
    import json
    from pathlib import Path
    rng = np.random.default_rng(11)
    n, dim = 32, 128

    def run(sub):
        os.environ["TT_DUMP"] = str(tmp_path / sub)     # same AST under both budgets: one dump dir each
        xs = rng.standard_normal((n, dim)).astype(np.float32)
        r = np.sqrt((bf16_round(xs) ** 2).mean(-1, keepdims=True) + 1e-6).astype(np.float32)
        w = rng.standard_normal(dim).astype(np.float32)
        (_tt(xs, "bf16").float() * _tt(r).reciprocal() * _tt(w)).realize()
        return _last()

    tt_env(None)
    default = run("default")
    tt_env(1e-2)
    budget = run("budget")
    # float32-faithful: a few fp32 roundings per element (bf16 x widened exactly, 1/r and two products on the SFPU)
    assert default["measured_error"] <= 4 * 2.0 ** -24 and budget["measured_error"] <= 1e-2
    reports = [json.loads(p.read_text()) for p in Path(tmp_path).glob("*/*/report.json")]
    rms = [r for r in reports if len(r["nodes"]) >= 3 and any(x["op"] == "RECIPROCAL" for x in r["nodes"])]
    by_budget = {r["budget"]: r for r in rms}
    fast, slow = by_budget[1e-2], by_budget[None]
    assert any(x["engine"] == "FPU" and x["op"] == "MUL" for x in fast["nodes"])
    assert all(x["engine"] == "SFPU" for x in slow["nodes"])
    # never slower on the emulator; not faster either while the kernel's reader waits for its DRAM round trips
    # (docs/performance.md §8) longer than either placement computes
    assert fast["emulated_cycles"] <= slow["emulated_cycles"]
    assert fast["measured_error"] <= 1e-2 and slow["measured_error"] <= 4 * 2.0 ** -24
    for key in ("kernel", "budget", "predicted_error", "measured_error", "predicted_cycles", "nodes"):
        assert key in fast
    assert {"id", "op", "engine", "fidelity", "formats", "predicted_error", "cycles"} <= set(fast["nodes"][0])
    print(f"\nRMSNorm x*(1/r)*w: default {slow['emulated_cycles']} emulated cycles, error {slow['measured_error']:.2e}; "
          f"budget 1e-2 {fast['emulated_cycles']} emulated cycles, predicted {fast['predicted_error']:.2e}, "
          f"measured {fast['measured_error']:.2e}")


# ------------------------------------------------------------------------------------------------ tune CLI

def test_tune_parses_budgets_and_tabulates():
    from tt_backend import tune
    from tt_backend.chip.errors import TTError
    assert tune.parse_budgets("1e-4, 1e-2") == [None, 1e-4, 1e-2]
    assert tune.parse_budgets("none,1e-3") == [None, 1e-3]
    for bad in ("0", "fast"):
        with pytest.raises(TTError, match="positive relative error"):
            tune.parse_budgets(bad)
    rep = {"dir": "E_4_256_abcd", "predicted_error": 5e-3, "measured_error": 4e-3, "predicted_cycles": 900,
           "nodes": [{"id": 5, "op": "MUL", "engine": "FPU", "fidelity": "HiFi2",
                      "formats": {"srca": "bf16", "srcb": "tf32"}}]}
    text = tune.table({None: [dict(rep, nodes=[], predicted_cycles=1000)], 1e-2: [rep]})
    assert "kernel E_4_256_abcd" in text and "n5 MUL HiFi2 bf16xtf32" in text and "all SFPU" in text


@pytest.mark.needs_cc
def test_tune_cli_runs_a_script_per_budget(tmp_path):
    import subprocess
    import sys
    script = tmp_path / "prog.py"
    script.write_text("import numpy as np\nfrom tinygrad import Tensor\n"
                      "a = Tensor(np.random.default_rng(0).standard_normal((32, 32)).astype(np.float32), device='TT')\n"
                      "b = Tensor(np.random.default_rng(1).standard_normal((32, 32)).astype(np.float32), device='TT')\n"
                      "(a.realize() * b.realize()).realize()\n")
    env = {k: v for k, v in os.environ.items() if k not in ("TT_ERR_BUDGET", "TT_PLACE", "TT_DUMP", "TT_CHECK")}
    r = subprocess.run([sys.executable, "-m", "tt_backend", "tune", str(script), "--budgets", "1e-2",
                        "--out", str(tmp_path / "out")], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "none" in r.stdout and "0.01" in r.stdout and "MUL" in r.stdout, r.stdout
    assert (tmp_path / "out" / "budget_0.01").is_dir()
