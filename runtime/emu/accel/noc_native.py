"""The NoC time model's reservation in C (noc_native.c, a CPython extension module built by native.py).

noc.py's Fabric._reserve (with Busy.free_from and Busy.take) is the reference: tests/emu/test_noc_native.py pins the
cycles and the busy lists of both together on random resources. `NATIVE = False` (or TT_EMU_NOC_NATIVE=0) keeps the
Python path; without a host compiler or Python's headers it stays there too (`python -m tt_backend info` says which
runs, and why).
"""
from __future__ import annotations

import functools
import os
from pathlib import Path

from tt_backend.runtime.emu.accel import native

SOURCE = Path(__file__).with_name("noc_native.c")
NATIVE = os.environ.get("TT_EMU_NOC_NATIVE", "1") != "0"


@functools.lru_cache(maxsize=None)
def _load() -> tuple[object | None, str]:
    """(the module or None, what `info` says about it)."""
    try:
        mod, path = native.load_extension(SOURCE, "noc_native")
    except OSError as e:
        return None, f"Python: the C part is unavailable: {e}"
    return mod, f"C ({path})"


def reserve():
    """The C reserve(res, s0, d), or None when it is off or unavailable (read at each call: tests switch it)."""
    mod = _load()[0] if NATIVE else None
    return mod.reserve if mod is not None else None


def status() -> str:
    """Which path reserves the NoC's links, ports and banks, for `python -m tt_backend info`."""
    return _load()[1] if NATIVE else "Python: TT_EMU_NOC_NATIVE=0"
