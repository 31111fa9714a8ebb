"""The NoC time model's reservation and an NIU's common send in C (noc_native.c, a CPython extension module built by
native.py).

noc.py's Fabric._reserve (with Busy.free_from and Busy.take) is the reference of reserve: tests/emu/test_noc_native.py
pins the cycles and the busy lists of both together on random resources. `NATIVE = False` (or TT_EMU_NOC_NATIVE=0)
keeps the Python path; without a host compiler or Python's headers it stays there too (`python -m tt_backend info` says
which runs, and why). Niu._send_in_python is the reference of send (a unicast read or write between L1 and a DRAM bank
or L1): the same test file pins the NIUs' state after random commands; `SEND_NATIVE = False` (or
TT_EMU_NIU_SEND_NATIVE=0) keeps every send in Python. tile.py Tile._niu_store's timed part (the send, Fabric.transfer,
the peer's L1 stamps, the completion due on the response counter, the NIU's busy end) is the reference of issue, which
a core's NOC_CMD_CTRL store reaches from rv32_native.c without the bus call (tests/emu/test_noc_native.py and
test_rv32_native.py pin both); `ISSUE_NATIVE = False` (or TT_EMU_NOC_ISSUE_NATIVE=0, read when a tile is built) keeps
the Python path; it needs the reservation and the send in C too. noc.py's Busy is the reference of the C Busy (its
intervals as C integers, `starts` and `ends` new lists on each read), which Fabric makes while the reservation is in C:
the same test file pins both on random takes, gap searches, forgets and reservations; `BUSY_NATIVE = False` (or
TT_EMU_NOC_BUSY_NATIVE=0, read when a resource is first used) keeps noc.py's Busy.
"""
from __future__ import annotations

import functools
import os
from pathlib import Path

from tt_backend.runtime.emu.accel import native

SOURCE = Path(__file__).with_name("noc_native.c")
NATIVE = os.environ.get("TT_EMU_NOC_NATIVE", "1") != "0"
SEND_NATIVE = os.environ.get("TT_EMU_NIU_SEND_NATIVE", "1") != "0"
ISSUE_NATIVE = os.environ.get("TT_EMU_NOC_ISSUE_NATIVE", "1") != "0"
BUSY_NATIVE = os.environ.get("TT_EMU_NOC_BUSY_NATIVE", "1") != "0"


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


def busy_class():
    """The C Busy type, or None when it or the reservation is off or the C part is unavailable (asked when Fabric
    makes a resource's Busy)."""
    mod = _load()[0] if NATIVE and BUSY_NATIVE else None
    return mod.Busy if mod is not None else None


def send():
    """The C send(NIU context, initiator), or None when it is off or unavailable (read at each call: tests switch
    it)."""
    mod = _load()[0] if SEND_NATIVE else None
    return mod.send if mod is not None else None


def issue():
    """(the C issue(NIU context, initiator, timing context, start), its capsule for rv32_native.c), or None when it,
    the reservation or the send is off or the C part is unavailable (asked when a tile is built)."""
    mod = _load()[0] if NATIVE and SEND_NATIVE and ISSUE_NATIVE else None
    return (mod.issue, mod.issue_entry) if mod is not None else None


def status() -> str:
    """Which path reserves the NoC's links, ports and banks, for `python -m tt_backend info`."""
    why = _load()[1] if NATIVE else "Python: TT_EMU_NOC_NATIVE=0"
    if NATIVE and not SEND_NATIVE:
        return f"{why}; sends in Python (TT_EMU_NIU_SEND_NATIVE=0)"
    if NATIVE and not BUSY_NATIVE:
        why += "; noc.py's Busy lists (TT_EMU_NOC_BUSY_NATIVE=0)"
    return why if ISSUE_NATIVE or not NATIVE else f"{why}; the sends' time in Python (TT_EMU_NOC_ISSUE_NATIVE=0)"
