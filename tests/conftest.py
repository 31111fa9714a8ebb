"""Markers and fixtures shared by every test folder (tests/README.md lists them).

Markers say what a test needs; a test whose need is missing is skipped here, with the reason, so no module has to
check for compilers or simulators itself:
  needs_cc          the RISC-V compiler the backend compiles kernels with (runtime/compile.py's discovery)
  needs_program_cc  the GCC that builds the bare-metal programs of tests/programs (riscv64-unknown-elf-gcc, or
                    $TT_RISCV_CC; tests/support/programs.py)
  needs_host_cc     a host C compiler (cc, gcc or clang)
  needs_tt_umd      the tt-umd package (pip install tt-umd): the umd-sim target
  ttsim             Tenstorrent's simulator: TT_SIMULATOR=/path/to/libttsim.so (added to every test that uses the
                    `ttsim_lib` fixture or the ttsim / umd-sim side of `target`)
"""
from __future__ import annotations

import functools
import importlib.util
import zlib

import numpy as np
import pytest

from tt_backend.chip.errors import CompilerNotFound
from tt_backend.runtime.compile import find_compiler
from tt_backend.runtime.emu.tile import Tile
from tt_backend.runtime.targets import make_device

from tests.support import HOST_CC, programs, target_params, ttsim_path

MARKERS = {
    "needs_cc": "needs a RISC-V compiler for the kernels; skipped when runtime/compile.py finds none",
    "needs_program_cc": "builds tests/programs (riscv64-unknown-elf-gcc or $TT_RISCV_CC); skipped without it",
    "needs_host_cc": "needs a host C compiler (cc, gcc or clang); skipped without one",
    "needs_tt_umd": "needs tt-umd (pip install tt-umd) for the umd-sim target; skipped when not installed",
    "ttsim": "needs TT_SIMULATOR=/path/to/libttsim.so (Tenstorrent's simulator); skipped when unset",
}


def pytest_configure(config):
    for name, text in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {text}")


@functools.cache
def missing() -> dict[str, str | None]:
    """Marker -> why its tests cannot run here (None: they can)."""
    try:
        find_compiler()
        cc = None
    except CompilerNotFound as e:
        cc = str(e)
    return {"needs_cc": cc,
            "needs_program_cc": None if programs.have_compiler() else
            f"{programs.CC} not found (apt-get install gcc-riscv64-unknown-elf)",
            "needs_host_cc": None if HOST_CC else "no host C compiler (cc, gcc or clang)",
            "needs_tt_umd": None if importlib.util.find_spec("tt_umd") else
            "tt-umd is not installed (pip install tt-umd)",
            "ttsim": None if ttsim_path() else "TT_SIMULATOR does not point at a libttsim.so"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "ttsim_lib" in item.fixturenames:
            item.add_marker(pytest.mark.ttsim)
        for marker, reason in missing().items():
            if reason and item.get_closest_marker(marker):
                item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(autouse=True)
def module_rng_per_test(request):
    """Reseed a module's shared generator (`rng = np.random.default_rng(...)` at module level) for each test from
    the test's own id, so a test's inputs do not depend on which tests one worker ran before it: a failure seen
    under `-n 2` comes back when the test is run alone (`pytest path::name`)."""
    module = getattr(request, "module", None)
    if isinstance(getattr(module, "rng", None), np.random.Generator):
        module.rng = np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


@pytest.fixture
def ttsim_lib() -> str:
    """The path of libttsim.so (TT_SIMULATOR); tests using it are marked `ttsim`."""
    lib = ttsim_path()
    if lib is None:
        pytest.skip(missing()["ttsim"])
    return lib


@pytest.fixture(params=target_params("emu", "ttsim", "umd-sim"))
def target(request) -> str:
    """Run the test on each target: the project's emulator, ttsim (marked `ttsim`) and the card path through tt-umd's
    simulation device on ttsim (marked `ttsim` and `needs_tt_umd`)."""
    return request.param


@pytest.fixture
def new_device(target):
    """Factory of fresh devices of `target`, closed after the test."""
    made = []

    def make():
        made.append(make_device(target, lib_path=ttsim_path()))
        return made[-1]
    yield make
    for d in made:
        if hasattr(d, "close"):
            d.close()


@pytest.fixture
def tile() -> Tile:
    """A fresh emulated tile (five RISC-V cores, the Tensix coprocessor, NoC, DRAM), all cores held in reset."""
    return Tile()
