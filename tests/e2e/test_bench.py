"""`python -m tt_backend bench`: every registered benchmark imports and has its entry point, and the SFPU matmul
benchmark runs one small shape on the emulator with its error within the bound it prints (K * 2^-24)."""
import importlib
import re

import pytest

from tt_backend import bench


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
