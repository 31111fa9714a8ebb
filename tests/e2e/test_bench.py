"""`python -m tt_backend bench`: every registered benchmark imports and has its entry point, the SFPU matmul
benchmark runs one small shape on the emulator with its error within the bound it prints (K * 2^-24), and `bench
kernels`' launch model predicts small kernels' emulated cycles (matmul, reader modes) within 25 %, `bench emu`'s
whole-kernel rows give ttsim's bits and its fixed rows are timed warm, best of 3."""
import importlib
import re

import pytest

from tt_backend import bench
from tt_backend.bench import emu as emu_bench
from tt_backend.bench import kernels
from tt_backend.runtime.emu import bench as fixed_rows


@pytest.mark.parametrize("name", list(bench.BENCHES))
def test_registered_benchmark_has_main(name):
    module, what = bench.BENCHES[name]
    assert callable(importlib.import_module(module).main) and what


@pytest.mark.needs_cc
def test_sfpu_matmul_benchmark_on_the_emulator(capsys):
    assert bench.run("sfpu-matmul", ["32x40x32", "--targets", "emu"]) == 0
    out = capsys.readouterr().out
    assert "32x40x32: SFPU matmul" in out
    err, bound = map(float, re.search(r"max normalised error (\S+) \(bound (\S+)\)", out).groups())
    assert 0 < err <= bound and bound == pytest.approx(40 * 2.0 ** -24, rel=1e-2)    # printed with 3 digits


def _row(out: str, name: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith(name)][-1].split()


@pytest.mark.needs_cc
def test_kernels_benchmark_predicts_the_matmul_launch(capsys):
    """bf16 128^3 at HiFi2: the launch model (lowering/families/mover_cost.py) within 25 % of the emulated cycles, where
    the compute-only price is under a tenth of them (the reader and the writer's rounding dominate). Not 64^3 any
    more: since the emulator runs a tile's least advanced core first, a core that polls a CB is carried to the most
    advanced core's cycle (Tile._catch_up), up to a quantum late, which is about a quarter of a 64^3 launch (0.73)."""
    assert bench.run("kernels", ["--rows", "matmul-hifi2", "--scale", "4"]) == 0
    compute, predicted, emulated = map(int, _row(capsys.readouterr().out, "matmul-hifi2")[2:5])
    assert 0.75 <= predicted / emulated <= 1.25
    assert compute < emulated / 10


@pytest.mark.needs_cc
def test_kernels_benchmark_grid_rows_respect_the_dram_banks(capsys):
    """a*b+a at 128x128 on 1, 8 and 64 cores: no emulated launch beats the eight banks' floor for its bytes, so its
    DRAM rate stays under the 512 GB/s the banks are modelled at; one core is compute-bound far below it."""
    assert bench.run("kernels", ["--rows", "grid", "--scale", "16"]) == 0
    out = capsys.readouterr().out
    for cores in (1, 8, 64):
        emulated, banks, gbs = (float(_row(out, f"grid-{cores}")[k]) for k in (4, 8, 9))
        assert banks <= emulated and gbs <= 512
    assert float(_row(out, "grid-1")[9]) < 100


@pytest.mark.needs_cc
def test_kernels_benchmark_compute_bound_grid_row_scales(capsys):
    """The demo expression at 128x128 (16 tiles, SFPU-bound): split over 8 cores at least 0.8 x 8 faster than on one,
    the same ELFs giving the same bytes on every split (run_grid compares them)."""
    assert bench.run("kernels", ["--rows", "demo-grid", "--scale", "16"]) == 0
    out = capsys.readouterr().out
    assert float(_row(out, "demo-grid-8")[7]) >= 0.8 * 8


def test_kernels_benchmark_matmul_bits_on_ttsim(ttsim_lib, capsys):
    """The same matmul on the emulator and on ttsim: the writer's untilize (bf16 rounding, two per word) gives the
    same bytes."""
    assert bench.run("kernels", ["--rows", "matmul-hifi4", "--scale", "16", "--ttsim", "--lib", ttsim_lib]) == 0
    assert _row(capsys.readouterr().out, "matmul-hifi4")[-1] == "identical"


@pytest.mark.needs_cc
def test_launch_model_of_the_reader_modes():
    """Reader-bound elementwise kernels at 64x64 fp32 (the buffers fit the staging window): a transpose (columns), a
    reversed row (strided), a row broadcast (runs) next to a contiguous stream, and an SFPU-bound exp2; predicted launch
    within 25 % of the emulated cycles."""
    code = (kernels._RAND + "a = Tensor(rng.standard_normal((64, 64)).astype(np.float32)).realize()\n"
            "b = Tensor(rng.standard_normal((64, 64)).astype(np.float32)).realize()\n"
            "(a.T + b).realize(); (a.flip(1) + 1).realize(); (a + b[0]).realize()\nout = (a * b).exp2().realize()")
    got = kernels.run_program("modes", kernels.ProgramRow(64, code, {"TT_CORES": "1"}), None)   # one core's movers
    assert len(got) == 4
    for m in got:
        assert 0.75 <= m.predicted / m.emulated <= 1.25, m
        assert 0 < m.streamed_span < m.emulated, m    # the compute part, first unpack to last pack, inside the launch


def test_emu_bench_kernel_rows_same_bits_as_ttsim(ttsim_lib, monkeypatch, capsys):
    """`bench emu`'s whole-kernel rows at their quick sizes: launched on the same ELFs on both targets, the output
    bytes agree and both times are measured."""
    monkeypatch.setenv("TT_SIMULATOR", ttsim_lib)
    monkeypatch.setattr(emu_bench, "REPEAT", 1)
    assert bench.run("emu", ["--quick", "elementwise512", "matmul256"]) == 0
    out = capsys.readouterr().out
    for name in ("elementwise512", "matmul256"):
        emu_s, sim_s = map(float, _row(out, name)[2:4])
        assert emu_s > 0 and sim_s > 0 and _row(out, name)[-1] == "identical"


@pytest.mark.needs_cc
def test_build_benchmark_times_every_stage(capsys):
    """`bench build` on its first two kernels (a+b, a*b at 64x64 fp32): every stage has a row, both kernels run the
    four shared programs (reader, writer, unpacker, packer: lowering/families/shared_programs.py) the process built
    for its warm-up kernel, so only their math TRISC is compiled and nothing comes from the cache, and placing these
    float32-faithful kernels runs no sample evaluation (the prediction is deferred to a report,
    lowering/placement/search.py)."""
    from tt_backend.placement_eval import EVAL_STATS
    evaluated = EVAL_STATS["evaluated"]          # the process's count: earlier tests in this worker placed kernels too
    assert bench.run("build", ["--kernels", "2", "--per-kernel"]) == 0
    out = capsys.readouterr().out
    for stage in ("frontend", "lower", "placement", "reshaped", "render", "compile", "build", "cached"):
        assert len(_row(out, stage)) == 5 and all(float(x) >= 0 for x in _row(out, stage)[1:]), stage
    assert [(int(_row(out, k)[9]), int(_row(out, k)[10])) for k in ("a+b", "a*b")] == [(0, 4), (0, 4)]
    assert EVAL_STATS["evaluated"] == evaluated


def test_fixed_rows_timed_warm_best_of_three():
    """`bench emu`'s fixed rows (runtime/emu/bench.py best_of): one untimed call, then the fastest of three, whose
    results but the times must agree; a row whose calls differ otherwise is an error, not a figure. Run on the
    quick sfpu_long row, then on a stand-in row whose cycles change from call to call."""
    calls = []
    row = lambda: calls.append(1) or fixed_rows.bench_sfpu_long(1)
    best = fixed_rows.best_of(row)
    assert len(calls) == 1 + fixed_rows.REPEAT and best["kernel"] == "sfpu_long" and best["cycles"] > 0
    seconds = iter([0.05, 0.2, 0.1, 0.4])
    timed = fixed_rows.best_of(lambda: {"kernel": "k", "cycles": 7, "seconds": next(seconds)})
    assert timed["seconds"] == 0.1                 # (0.05: the warm-up call's, not counted)
    cycles = iter(range(10))
    with pytest.raises(RuntimeError, match="repeated calls differ"):
        fixed_rows.best_of(lambda: {"kernel": "k", "cycles": next(cycles), "seconds": 1.0})
