"""Elementwise kernels split over several Tensix cores (lowering/families/elementwise.py `use_cores`): tinygrad programs
on TT against tinygrad's CPU device, on 1, 2, 4 and 5 cores (TT_CORES caps the count; the kernel's report says how
many it used), with shapes that are not multiples of 32 and tile counts the cores do not divide evenly; on ttsim the
same many-core kernels give the same bits as on the emulator."""
import json
from pathlib import Path

import numpy as np
import pytest
from tinygrad import Device, Tensor

from tests.support import target_params
from tests.support.ulp import ulp_distance

pytestmark = [pytest.mark.needs_cc, pytest.mark.usefixtures("serial_compile")]

# (TT_CORES, shape): 4, 5, 10 and 19 fp32 tiles, so 2, 4 and 5 cores get unequal ranges, and one core fewer would
# need one more tile per core (so the launch model's fastest count is the cap)
CASES = [(1, (45, 77)), (2, (33, 150)), (4, (50, 200)), (5, (48, 400))]


def _reports(dump: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(dump.glob("*/report.json"))]


def _run(device: str, fn, arrays, monkeypatch, tmp_path: Path, cores: int, tag: str):
    dump = tmp_path / f"dump_{tag}"
    monkeypatch.setenv("TT_CORES", str(cores))
    monkeypatch.setenv("TT_DUMP", str(dump))
    out = fn(*(Tensor(a, device=device) for a in arrays)).numpy()
    monkeypatch.delenv("TT_DUMP")
    return out, _reports(dump)


@pytest.mark.parametrize("target", target_params("emu", "ttsim"))
@pytest.mark.parametrize("cores, shape", CASES, ids=[f"{c}cores" for c, _ in CASES])
def test_split_elementwise_matches_cpu(target, cores, shape, monkeypatch, tmp_path):
    rng = np.random.default_rng(cores)
    a, b = (rng.standard_normal(shape).astype(np.float32) for _ in range(2))
    # SFPU-bound (exp2), so that the launch model's fastest count is the cap
    fn = lambda x, y: (x * y).exp2()
    got, reports = _run(f"TT:{target}", fn, (a, b), monkeypatch, tmp_path, cores, target)
    ref = fn(Tensor(a, device="CPU"), Tensor(b, device="CPU")).numpy()
    assert ulp_distance(got, ref).max() <= 2            # mul exact, exp2 within 2 ulps (tests/e2e/test_e2e.py ULP)
    (lc,) = [r["predicted_launch_cycles"] for r in reports]
    n_tiles = -(-a.size // 1024)
    assert lc["cores"] == cores and lc["tiles_per_core"] == -(-n_tiles // cores), lc


@pytest.mark.parametrize("target", target_params("emu"))
def test_transposed_reads_and_the_default_split(target, monkeypatch, tmp_path):
    """Without TT_CORES the launch model picks the count (more than one for 32 tiles); strided (a.T) and broadcast
    (b[0]) reads take each core's range of output tiles like the bulk reads do."""
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((256, 128)).astype(np.float32), rng.standard_normal((128, 256)).astype(np.float32)
    dump = tmp_path / "dump"
    monkeypatch.setenv("TT_DUMP", str(dump))
    got = (Tensor(a, device=f"TT:{target}").T + Tensor(b, device=f"TT:{target}")[0]).numpy()
    np.testing.assert_array_equal(got, a.T + b[0])      # fp32 adds: exact on the SFPU
    (r,) = _reports(dump)
    assert r["predicted_launch_cycles"]["cores"] > 1 and r["emulated_cycles"] > 0


@pytest.mark.ttsim
def test_many_core_kernel_is_bit_identical_on_emu_and_ttsim(monkeypatch, tmp_path):
    rng = np.random.default_rng(9)
    a = rng.standard_normal((64, 200)).astype(np.float32)
    fn = lambda x: (x * 1.5).exp2() + x
    emu, r_emu = _run("TT:emu", fn, (a,), monkeypatch, tmp_path, 5, "emu")
    sim, r_sim = _run("TT:ttsim", fn, (a,), monkeypatch, tmp_path, 5, "ttsim")
    assert r_emu[0]["predicted_launch_cycles"]["cores"] == r_sim[0]["predicted_launch_cycles"]["cores"] == 5
    assert emu.tobytes() == sim.tobytes()
    assert Device["TT:ttsim"].target.alive


def _softmax_reduce_cores(reports: list[dict]) -> list[int]:
    return [r["predicted_launch_cycles"]["cores"] for r in reports if r["kernel"].startswith("r_")]


@pytest.mark.parametrize("target", target_params("emu"))
def test_row_softmax_splits_its_rows_over_cores(target, monkeypatch, tmp_path):
    """The row reductions of a softmax (max, then the sum of exp) give each core whole output groups (32 rows), so no
    combine step: 224 rows are 7 groups over 4 cores (ranges of 2, 2, 2, 1 groups; 3 cores would take 3 each)."""
    rng = np.random.default_rng(11)
    a = rng.standard_normal((224, 96)).astype(np.float32)
    got, reports = _run(f"TT:{target}", lambda x: x.softmax(-1), (a,), monkeypatch, tmp_path, 4, target)
    ref = Tensor(a, device="CPU").softmax(-1).numpy()
    np.testing.assert_allclose(got, ref, rtol=2e-6, atol=1e-7)
    assert _softmax_reduce_cores(reports) == [4, 4], [r["predicted_launch_cycles"] for r in reports]


@pytest.mark.ttsim
def test_many_core_softmax_is_bit_identical_on_emu_and_ttsim(monkeypatch, tmp_path):
    a = np.random.default_rng(12).standard_normal((256, 256)).astype(np.float32)
    emu, r_emu = _run("TT:emu", lambda x: x.softmax(-1), (a,), monkeypatch, tmp_path, 4, "emu")
    sim, r_sim = _run("TT:ttsim", lambda x: x.softmax(-1), (a,), monkeypatch, tmp_path, 4, "ttsim")
    assert _softmax_reduce_cores(r_emu) == _softmax_reduce_cores(r_sim) == [4, 4]
    assert emu.tobytes() == sim.tobytes()


@pytest.mark.ttsim
def test_whole_tensor_sum_partials_on_cores_then_a_combine(monkeypatch, tmp_path):
    """x.sum() over 32 x 1024: tinygrad splits it (its split_reduceop) into 32 per-row partial sums and a sum of
    those, two launches; each partial is a whole 32-lane output group (a tile read per NoC request), so the first
    launch goes to the cores the launch model picks (several) and the combine to one. Same bits on emu and ttsim,
    within a compensated float32 sum of numpy's float64 sum."""
    a = np.random.default_rng(13).standard_normal((32, 1024)).astype(np.float32)
    emu, r_emu = _run("TT:emu", lambda x: x.sum(), (a,), monkeypatch, tmp_path, 64, "emu")
    sim, r_sim = _run("TT:ttsim", lambda x: x.sum(), (a,), monkeypatch, tmp_path, 64, "ttsim")
    cores = [r["predicted_launch_cycles"]["cores"] for r in r_emu]
    assert len(cores) == 2 and max(cores) > 1 and min(cores) == 1, cores
    assert cores == [r["predicted_launch_cycles"]["cores"] for r in r_sim]
    assert emu.tobytes() == sim.tobytes()
    assert abs(float(emu) - a.astype(np.float64).sum()) <= 4 * np.finfo(np.float32).eps * np.abs(a).sum()
