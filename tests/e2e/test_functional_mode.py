"""The emulator's functional mode (EmuDevice.set_timed(False): no MMIO latencies, no NoC time model) against its cycle
model on whole compiled kernels: the same output bytes on one tile and on a grid (NoC multicast), and the plugin
choosing it only for launches whose cycles nobody reads (no TT_DUMP / TT_CHECK / DEBUG>=2 / PROFILE)."""
import numpy as np
import pytest
from tinygrad import Tensor

from tt_backend.bench.emu import elementwise_inputs, elementwise_plan
from tt_backend.bench.kernels import launch_plan, matmul_arrays, matmul_plan
from tt_backend.lowering.codegen.sources import split
from tt_backend.runtime.compile import compile_kernel
from tt_backend.runtime.emu.device import EmuDevice


def both_modes(plan, arrays) -> dict[bool, list[bytes]]:
    """{timed: [output bytes of two launches on one device]}: a warm device relaunched, as a program does."""
    elfs = compile_kernel(*split(plan.render()), plan.name)
    out = {}
    for timed in (True, False):
        dev = EmuDevice()
        dev.set_timed(timed)
        out[timed] = [launch_plan(dev, plan, arrays, elfs)[0] for _ in range(2)]
        assert dev.stats()["timed"] is timed
    return out


@pytest.mark.needs_cc
def test_elementwise_gives_the_timed_bytes():
    plan = elementwise_plan(128)
    out = both_modes(plan, elementwise_inputs(plan, np.random.default_rng(1)))
    assert out[False] == out[True] and out[True][0] == out[True][1]


@pytest.mark.needs_cc
@pytest.mark.parametrize("cores", [1, 4])
def test_matmul_gives_the_timed_bytes(cores):
    """bf16 128^3 on the FPU; on four cores (a 2x2 grid) the operands travel by NoC multicast between the tiles."""
    plan = matmul_plan(128, "HiFi2")
    plan.use_cores(cores)
    assert plan.cores == cores
    out = both_modes(plan, matmul_arrays(plan))
    assert out[False] == out[True]


@pytest.mark.needs_cc
def test_the_plugin_times_only_launches_that_report(tmp_path, monkeypatch):
    """A plain launch runs in the functional mode, one under TT_DUMP on the cycle model; both give the same values."""
    modes = []
    real = EmuDevice.set_timed
    monkeypatch.setattr(EmuDevice, "set_timed", lambda self, timed: modes.append(timed) or real(self, timed))
    a = np.random.default_rng(2).standard_normal((64, 64)).astype(np.float32)
    plain = (Tensor(a, device="TT:emu") * 3 + 1).numpy()
    assert modes and not any(modes)
    modes.clear()
    monkeypatch.setenv("TT_DUMP", str(tmp_path / "dump"))
    dumped = (Tensor(a, device="TT:emu") * 3 + 1).numpy()
    assert modes and all(modes)
    np.testing.assert_array_equal(plain, dumped)
    np.testing.assert_allclose(plain, a * 3 + 1, rtol=1e-6, atol=1e-6)   # one rounding on the device (FMA)
