"""Helpers shared by the test modules (no tests here): building and launching the bare-metal programs of
tests/programs, the emulated tile launched by hand, instruction-word builders, the wolfpine oracle, a fake tt_umd."""
from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def ttsim_path() -> str | None:
    """The libttsim.so that TT_SIMULATOR points at, or None (tests marked `ttsim` are then skipped)."""
    lib = os.environ.get("TT_SIMULATOR", "")
    return lib if lib and os.path.isfile(lib) else None
