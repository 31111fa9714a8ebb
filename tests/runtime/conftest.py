"""Fixtures of the runtime tests."""
from __future__ import annotations

import sys

import pytest

from tt_backend.runtime.hw_device import HwDevice

from tests.support import fake_tt_umd


@pytest.fixture
def card(monkeypatch, tmp_path):
    """The fake tt_umd (tests/support/fake_tt_umd.py) with one Blackhole card, its lock files under tmp_path;
    `card(...)` opens an `HwDevice` on it (closed again after the test)."""
    fake_tt_umd.reset()
    monkeypatch.setitem(sys.modules, "tt_umd", fake_tt_umd)
    monkeypatch.setattr(fake_tt_umd, "LOCK_DIR", str(tmp_path))
    made = []

    def open_card(*a, **kw):
        made.append(HwDevice(*a, **kw))
        return made[-1]
    yield open_card
    for d in made:
        d.close()
