"""Fused reductions (lowering/families/fused_reduce.py): with PCONTIG=2 tinygrad fuses a normalization into one kernel,
a reduction and the elementwise over the same elements (RMSNorm, a layer norm's two levels, a row softmax's two
levels), which runs as one launch: each group's tiles are reduced level by level, the results broadcast in Dst, then
the elementwise packs one output tile per input tile.

Each case checks that tinygrad's schedule has one kernel of that shape, that it is planned as one fused launch, and its
result against float64 numpy on x as the device holds it (bf16 x rounded first). Tolerances: every level is a float32
sum in lanes (error about sqrt(K) ulps of the sum) and the elementwise a few SFPU roundings on top: rtol 2e-5 of the
largest |value|; ttsim runs the same ELFs and must give the emulator's bits.
"""
import numpy as np
import pytest
from tinygrad import Tensor, dtypes
from tinygrad.helpers import Context
from tinygrad.uop.ops import Ops

from tt_backend.lowering.families.fused_reduce import FusedReducePlan, out_runs
from tt_backend.lowering.families.mover_cost import pipeline, red_out_cycles
from tt_backend.lowering.families.staged import StagedPlan
from tt_backend.lowering.families.tile_streams import stream_ctx
from tt_backend.lowering.select import lower

pytestmark = [pytest.mark.needs_cc, pytest.mark.usefixtures("serial_compile")]
rng = np.random.default_rng(10)
EPS = 1e-5


def rms(x, w, b): return x * (x.square().mean(-1, keepdim=True) + EPS).rsqrt() * w
def layer(x, w, b): return x.layernorm(eps=EPS) * w + b
def softmax(x, w, b): return x.softmax(-1)
def rms_transposed(x, w, b): return rms(x, w, b).T.contiguous()    # the writer's per-element path ("red out")


def reference(name: str, x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    if name == "rms": return x / np.sqrt((x * x).mean(-1, keepdims=True) + EPS) * w
    if name == "layer":
        d = x - x.mean(-1, keepdims=True)
        return d / np.sqrt((d * d).mean(-1, keepdims=True) + EPS) * w + b
    if name == "rms_transposed": return reference("rms", x, w, b).T
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


FNS = {"rms": rms, "layer": layer, "softmax": softmax, "rms_transposed": rms_transposed}
CASES = [("rms", (2048,), "float32"), ("rms", (1000,), "bfloat16"), ("rms", (3, 700), "float32"),
         ("rms", (3, 700), "bfloat16"), ("layer", (2048,), "float32"), ("layer", (3, 700), "bfloat16"),
         ("softmax", (3, 700), "float32"), ("rms_transposed", (3, 700), "float32"),
         ("rms", (5000,), "float32"),     # a group of 5 tiles, more than the CBs hold: sent once per pass
         ("rms", (4, 2048), "bfloat16"),  # two Dst groups over several outputs, the next output's reads in flight
         ("rms", (3, 701), "float32"),    # rows of 2,804 bytes: no bulk write, one run per row ("red out")
         ("rms_transposed", (5, 333), "bfloat16"), ("rms_transposed", (6, 1100), "float32")]   # runs of one datum


def inputs(shape, dtype):
    x = rng.standard_normal(shape).astype(np.float32)
    if dtype == "bfloat16":
        x = (x.view(np.uint32) & 0xFFFF0000).view(np.float32)     # exact in bf16
    n = shape[-1]
    return x, rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)


def program(name, arrays, dtype, device):
    x, w, b = arrays
    xt = Tensor(x.tolist(), dtype=getattr(dtypes, dtype), device=device).realize()   # bf16: exact, x is
    return FNS[name](xt.float(), Tensor(w, device=device), Tensor(b, device=device))


def fused_launches(name, shape, dtype) -> int:
    """The launches of the program's reduction kernels under PCONTIG=2 (scheduled for the CPU device, lowered for
    TT), each of which must be a fused plan."""
    with Context(PCONTIG=2):
        x = Tensor.empty(*shape, dtype=getattr(dtypes, dtype), device="CPU")
        out = FNS[name](x.float(), Tensor.empty(shape[-1], device="CPU"), Tensor.empty(shape[-1], device="CPU"))
        sched = out.schedule_linear()
    sinks = [c.src[0] for c in sched.src if c.op is Ops.CALL and c.src[0].op is Ops.SINK]
    plans = [lower(k, "k") for k in sinks if any(u.op is Ops.REDUCE for u in k.toposort())]
    assert plans and all(isinstance(p, FusedReducePlan) for p in plans), [type(p).__name__ for p in plans]
    return sum(len(p.launches) for p in plans)


@pytest.mark.parametrize("name,shape,dtype", CASES, ids=lambda v: "x".join(map(str, v)) if isinstance(v, tuple) else v)
def test_fused_matches_numpy(name, shape, dtype):
    arrays = inputs(shape, dtype)
    # one launch per reduction kernel: tinygrad makes one such kernel (a 1-D layer norm two: the mean's, then x - mean
    # and its variance)
    assert fused_launches(name, shape, dtype) == (2 if name == "layer" and len(shape) == 1 else 1)
    with Context(PCONTIG=2):
        got = program(name, arrays, dtype, "TT").numpy()
    ref = reference(name, *arrays)
    np.testing.assert_allclose(got, ref, rtol=2e-5, atol=2e-5 * np.abs(ref).max())


def test_softmax_rows_of_1024():
    """The brief's row softmax (8 x 1024, tinygrad's r_1024_1024_1024_8_1024): one launch in reasonable time."""
    arrays = inputs((8, 1024), "float32")
    assert fused_launches("softmax", (8, 1024), "float32") == 1
    with Context(PCONTIG=2):
        got = program("softmax", arrays, "float32", "TT").numpy()
    ref = reference("softmax", *arrays)
    np.testing.assert_allclose(got, ref, rtol=2e-5, atol=2e-5 * np.abs(ref).max())


def test_three_levels_are_staged():
    """A reduction reading one that reads another (three levels before the elementwise) is refused by the fused
    family and staged as before, with the right result."""
    x = rng.standard_normal((3, 40)).astype(np.float32)
    def fn(t):
        var = (t - t.mean(-1, keepdim=True)).square().mean(-1, keepdim=True)
        return t * (t - var).square().mean(-1, keepdim=True)
    with Context(PCONTIG=2):
        (sink,) = [c.src[0] for c in fn(Tensor.empty(3, 40, device="CPU")).schedule_linear().src
                   if c.op is Ops.CALL and c.src[0].op is Ops.SINK]
        got = fn(Tensor(x, device="TT")).numpy()
    assert isinstance(lower(sink, "k"), StagedPlan)
    x64 = x.astype(np.float64)
    var = ((x64 - x64.mean(-1, keepdims=True)) ** 2).mean(-1, keepdims=True)
    ref = x64 * ((x64 - var) ** 2).mean(-1, keepdims=True)
    np.testing.assert_allclose(got, ref, rtol=2e-5, atol=2e-5 * np.abs(ref).max())


@pytest.mark.ttsim
@pytest.mark.parametrize("name,shape,dtype", [("rms", (3, 700), "bfloat16"), ("layer", (1000,), "float32"),
                                              ("softmax", (3, 700), "float32"), ("rms_transposed", (3, 700), "float32"),
                                              ("rms_transposed", (5, 333), "bfloat16"), ("rms", (3, 701), "float32"),
                                              ("rms", (8, 1024), "float32"), ("rms", (4, 2048), "bfloat16")],
                         ids=str)
def test_fused_same_bits_on_ttsim(name, shape, dtype):
    arrays = inputs(shape, dtype)
    with Context(PCONTIG=2):
        sim = program(name, arrays, dtype, "TT:ttsim").numpy()
        emu = program(name, arrays, dtype, "TT:emu").numpy()
    assert sim.tobytes() == emu.tobytes()


def fused_plan(name, shape, dtype) -> FusedReducePlan:
    with Context(PCONTIG=2):
        x = Tensor.empty(*shape, dtype=getattr(dtypes, dtype), device="CPU")
        out = FNS[name](x.float(), Tensor.empty(shape[-1], device="CPU"), Tensor.empty(shape[-1], device="CPU"))
        sinks = [c.src[0] for c in out.schedule_linear().src if c.op is Ops.CALL and c.src[0].op is Ops.SINK]
    (plan,) = [p for p in (lower(k, "k") for k in sinks) if isinstance(p, FusedReducePlan)]
    return plan


@pytest.mark.parametrize("shape,dtype,cores,two_groups", [
    ((3, 700), "float32", 3, True),      # one group of tiles per core
    ((3, 700), "float32", 1, False),     # three on one core, 1 tile before a group's outputs (odd)
    ((2, 2500), "float32", 1, False),    # two on one core, 3 tiles before a group's outputs (odd)
    ((4, 2048), "bfloat16", 1, True)])   # four on one core, 2 tiles before a group's outputs (even)
def test_two_dst_groups_only_where_a_freed_group_holds_no_unpacked_output(shape, dtype, cores, two_groups):
    """FREE counts both Dst groups and a tile without output posts it from TRISC1, so on a core with several groups
    of tiles a later tile can enter the Dst group whose output the packer still holds (tile_render.second_dst_group):
    kept only where no such tile writes an output."""
    plan = fused_plan("rms", shape, dtype)
    plan.cores = cores
    compute = "".join(plan.render().values())
    assert ("(t - " in compute and "& 1u;   /* this tile's Dst group */" in compute) == two_groups


# ---------------------------------------------------------------------------------------------- the FPU under a budget

BUDGET = 1e-2     # bench kernels' rmsnorm rows: the staged E_2048 takes x * gamma on the FPU under it


def sinks(name, shape, xdtype, wdtype, pcontig):
    with Context(PCONTIG=pcontig, SCACHE=0):     # tinygrad's schedule cache does not key on PCONTIG
        x = Tensor.empty(*shape, dtype=getattr(dtypes, xdtype), device="CPU")
        w = Tensor.empty(shape[-1], dtype=getattr(dtypes, wdtype), device="CPU")
        out = FNS[name](x.float(), w.float(), Tensor.empty(shape[-1], device="CPU"))
        return [c.src[0] for c in out.schedule_linear().src if c.op is Ops.CALL and c.src[0].op is Ops.SINK]


def fpu_nodes(plan) -> list[dict]:
    from tt_backend.dump import placement_report
    return [n for n in placement_report(plan)["nodes"] if n["engine"] == "FPU"]


def test_fused_rmsnorm_places_x_gamma_on_the_fpu_where_the_staged_kernel_does(monkeypatch):
    """RMSNorm-2048 (bf16 x, fp32 gamma, the bench row): under TT_ERR_BUDGET=1e-2 the staged program's E_2048 puts
    x * gamma on the FPU; the fused kernel's elementwise pass, placed by the same search, does too (the same op,
    fidelity and formats), as one ELWMUL of the two streams that TRISC0's thread issues in the last pass, and the
    report says so; without a budget neither does (gamma is fp32: no exact FPU product)."""
    from tt_backend.placement_eval import placer
    monkeypatch.setenv("TT_CORES", "1")   # the bench row: one core (on more, without a budget the staged pair wins)
    reduces = lambda s: any(u.op is Ops.REDUCE for u in s.toposort())
    (ew,) = [s for s in sinks("rms", (2048,), "bfloat16", "float32", 0) if not reduces(s)]
    (fused,) = [s for s in sinks("rms", (2048,), "bfloat16", "float32", 2) if reduces(s)]
    for budget, on_fpu in ((BUDGET, True), (None, False)):
        e, f = lower(ew, "E", placer(budget)), lower(fused, "r", placer(budget))
        assert isinstance(f, FusedReducePlan)
        assert bool(fpu_nodes(e)) == on_fpu and bool(fpu_nodes(f)) == on_fpu, (budget, fpu_nodes(e), fpu_nodes(f))
        if on_fpu:
            (a,), (b,) = fpu_nodes(e), fpu_nodes(f)
            assert (a["op"], a["fidelity"], a["formats"]) == (b["op"], b["fidelity"], b["formats"]) == (
                "MUL", "HiFi3", {"srca": "bf16", "srcb": "tf32", "dst": "fp32", "l1": ["bfloat16", "float32"]})
            (op,) = f.fpu_ops
            assert (op.kind, {op.a, op.b}) == ("ELWMUL", {0, 1})       # x and gamma, the kernel's two streams
            trisc0 = f.render()["trisc0"].split("#elif defined(TRISC_MATH)")[0]
            assert "the last pass's FPU ops (fused_fpu)" in trisc0 and "ELWMUL, 3 fidelity phase(s)" in trisc0


FPU_CASES = [("rms", (2048,), "bfloat16", "float32"),     # the bench row: two Dst groups
             ("rms", (3, 700), "bfloat16", "bfloat16"),    # several rows, odd length, bf16 gamma: one Dst group
             ("rms", (2, 1500), "float32", "float32"),     # fp32 x: both operands tf32, two Dst groups, two rows
             ("rms", (5000,), "bfloat16", "float32"),      # a group of 5 tiles, more than the CBs hold
             ("layer", (3, 700), "bfloat16", "float32")]   # layer norm with a bias (no product of two streams)


def budget_inputs(shape, xdtype, wdtype):
    x, w, b = inputs(shape, xdtype)
    return x, (w.view(np.uint32) & 0xFFFF0000).view(np.float32) if wdtype == "bfloat16" else w, b


def run_budgeted(name, arrays, xdtype, wdtype, device, monkeypatch):
    """(the program's result on `device` under TT_ERR_BUDGET=BUDGET, the fused plans lowered, its reference)."""
    import tt_backend.lowering.select as sel
    monkeypatch.setenv("TT_ERR_BUDGET", repr(BUDGET))
    monkeypatch.setenv("TT_CORES", "1")     # a core's several rows: (2, 1500) alternates two Dst groups over them
    planned, real = [], sel.lower
    monkeypatch.setattr(sel, "lower", lambda *args, **kw: planned.append(real(*args, **kw)) or planned[-1])
    x, w, b = arrays
    with Context(PCONTIG=2):
        xt = Tensor(x.tolist(), dtype=getattr(dtypes, xdtype), device=device).realize()
        wt = Tensor(w.tolist(), dtype=getattr(dtypes, wdtype), device=device).realize()
        got = FNS[name](xt.float(), wt.float(), Tensor(b, device=device)).numpy()
    return got, [p for p in planned if isinstance(p, FusedReducePlan)], reference(name, x, w, b)


@pytest.mark.parametrize("name,shape,xdtype,wdtype", FPU_CASES, ids=str)
def test_fused_under_a_budget_matches_numpy(name, shape, xdtype, wdtype, monkeypatch):
    """Every element within the placement's all-data bound (each FPU product's operand truncation and dropped
    fidelity bits, carried through the products: search.data_independent_bound) of numpy's float64 result, plus the
    float32 tolerance of the cases above; RMSNorm's x * gamma on the FPU."""
    got, plans, ref = run_budgeted(name, budget_inputs(shape, xdtype, wdtype), xdtype, wdtype, "TT", monkeypatch)
    assert plans
    bound = max((p.placement.bound or 0.0) if p.placement is not None else 0.0 for p in plans)
    assert bool(fpu_nodes(plans[-1])) == (name == "rms") and bound <= BUDGET
    np.testing.assert_array_less(np.abs(got - ref), (bound + 2e-5) * np.abs(ref) + 2e-5 * np.abs(ref).max())
    assert np.linalg.norm(got - ref) / np.linalg.norm(ref) <= BUDGET


@pytest.mark.ttsim
@pytest.mark.parametrize("name,shape,xdtype,wdtype", FPU_CASES[:4], ids=str)
def test_fused_fpu_same_bits_on_ttsim(name, shape, xdtype, wdtype, monkeypatch):
    arrays = budget_inputs(shape, xdtype, wdtype)
    sim, plans, _ = run_budgeted(name, arrays, xdtype, wdtype, "TT:ttsim", monkeypatch)
    emu, _, _ = run_budgeted(name, arrays, xdtype, wdtype, "TT:emu", monkeypatch)
    assert fpu_nodes(plans[-1]) and sim.tobytes() == emu.tobytes()


def test_group_sent_once_per_pass_priced_pass_by_pass():
    """A group of more tiles than the CBs hold (RMSNorm of 5000 fp32: 5 tiles) is sent once per pass, and a pass waits
    for the earlier passes' results: the launch goes at each pass's slower stage (the reader's in the sum of squares'
    pass, the SFPU's in the elementwise's), above the pipeline at the passes' average (0.74 of emulated, now 0.98);
    a resident group (2048: 2 tiles, read once) keeps the averaged pipeline."""
    plan = fused_plan("rms", (5000,), "float32")
    rp, cyc = plan.reduce, plan.compute_cycles()
    read, fill = plan.read_cycles()
    first, last = cyc["per_pass"]
    assert not rp.resident and (rp.tiles_per_group, rp.passes) == (5, 2) and first < read < last
    averaged = pipeline(plan.n_tiles, read, cyc["total"] + cyc["per_group"] / plan.split_unit, plan.write_cycles(),
                        fill)
    assert plan.launch_cycles(1)["total"] >= fill + rp.tiles_per_group * (read + last) > averaged["total"]
    resident = fused_plan("rms", (2048,), "float32")
    read, fill = resident.read_cycles()
    cyc = resident.compute_cycles()
    compute = cyc["total"] + cyc["per_group"] / resident.split_unit
    assert resident.reduce.resident and resident.launch_cycles(1)["total"] == pipeline(
        resident.n_tiles, read, compute, resident.write_cycles(), fill)["total"]


@pytest.mark.parametrize("name,shape,step,runs", [("rms_transposed", (3, 700), 3, 700), ("rms", (3, 701), 1, 1),
                                                  ("rms", (3, 700), None, None)])
def test_scattered_output_priced_by_its_path(name, shape, step, runs):
    """An output that is not one bulk write per tile ("red out") whose index steps by a constant per k is written from
    each tile's first address (ReducePlan.out_step): step 1 copies the tile as one run, another step writes each
    datum with a NoC write of its own; the launch model prices the writer by that path and the runs of the first
    output (out_runs, mover_cost.red_out_cycles). A row of 2,800 bytes is one bulk write per tile ("red tile")."""
    plan = fused_plan(name, shape, "float32")
    rp = plan.reduce
    assert stream_ctx(plan, plan.output, None, rp)["mode"] == ("red tile" if runs is None else "red out")
    assert rp.out_step == step
    if runs is not None:
        assert out_runs(plan.output, plan.ranges, len(rp.out_sizes))[:2] == (shape[1], runs)
        per_output = plan.write_cycles() * rp.tiles_per_group * rp.passes
        assert per_output == pytest.approx(red_out_cycles(step, shape[1], runs, rp.tiles_per_group, 4))


@pytest.mark.ttsim
def test_scattered_output_by_index_same_bits_on_ttsim():
    """The writer's per-datum path (an output index that does not step by a constant per k, each datum a NoC write
    not waited for): conv_transpose2d's weight gradient on tests/e2e/test_quotient_split.py's seed-1 shapes
    (r_2_4_4_2_2_3_3, fused, its output index constant over two of its three reduce ranges), on ttsim."""
    g = np.random.default_rng(1)
    cin, cout, k = int(g.integers(1, 4)), int(g.integers(1, 4)), int(g.integers(2, 4))
    x = (g.integers(-16, 16, (int(g.integers(1, 3)), cin, *g.integers(3, 7, 2))) / 8).astype(np.float32)
    w = (g.integers(-16, 16, (cin, cout, k, k)) / 8).astype(np.float32)

    def grads(device: str) -> list[bytes]:
        xt, wt = Tensor(x, device=device), Tensor(w, device=device)
        return [t.numpy().tobytes() for t in xt.conv_transpose2d(wt).sum().gradient(xt, wt)]
    assert grads("TT:ttsim") == grads("TT:emu")


def test_fused_or_staged_chosen_at_the_targets_core_count(monkeypatch):
    """select prices the fused launch and the staged pair split over the cores the driver gives them on its target
    (ops_tt passes max_cores: a card's target has one tile): RMSNorm-2048 without a budget is one fused launch on one
    core and two staged launches where more cores split the elementwise; the plans it priced keep no core count."""
    from tt_backend.placement_eval import placer
    monkeypatch.delenv("TT_CORES", raising=False)
    (sink,) = [s for s in sinks("rms", (2048,), "bfloat16", "float32", 2) if any(u.op is Ops.REDUCE for u in
                                                                                 s.toposort())]
    one, many = lower(sink, "r", placer(None), max_cores=1), lower(sink, "r", placer(None), max_cores=120)
    assert isinstance(one, FusedReducePlan) and isinstance(many, StagedPlan)
    assert all(p.cores == 1 for plan in (one, many) for p in plan.launches)
