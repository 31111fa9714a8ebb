"""Helpers shared by the test modules (no tests here): building and launching the bare-metal programs of
tests/programs, the emulated tile launched by hand, instruction-word builders, the wolfpine oracle, a fake tt_umd, the
device differential cases; here: the repository root, the simulator and host compiler found, the targets."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]

# a host C compiler (tests compiling the C forms of index expressions and tiny shared libraries), or None
HOST_CC = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")

# what each execution target needs, as the markers tests/conftest.py skips on (emu needs nothing)
TARGET_NEEDS = {"emu": (), "ttsim": ("ttsim",), "umd-sim": ("ttsim", "needs_tt_umd")}


def ttsim_path() -> str | None:
    """The libttsim.so that TT_SIMULATOR points at, or None (tests marked `ttsim` are then skipped)."""
    lib = os.environ.get("TT_SIMULATOR", "")
    return lib if lib and os.path.isfile(lib) else None


def target_params(*names: str) -> list:
    """Parameters for the targets `names`, each marked with what it needs (for tests that run on a subset of the
    `target` fixture's targets: `@pytest.mark.parametrize("target", target_params("emu", "ttsim"))`)."""
    return [pytest.param(n, marks=[getattr(pytest.mark, m) for m in TARGET_NEEDS[n]]) for n in names]
