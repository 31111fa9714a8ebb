"""runtime/emu/accel/inline.py: a function recompiled with a rule's calls expanded in place computes what the calls
computed (the equality tests of test_emu_speed.py pin the real use, Tensix.push / push_many), and really has no call
of the rule left."""
from __future__ import annotations

import pytest

from tt_backend.runtime.emu.accel.inline import inline_calls

LIMIT = 10


class Counter:
    def __init__(self):
        self.n = 0
        self.log = []

    def bump(self, k, why):
        """Add k, clipped at LIMIT; returns the new count."""
        n = self.n + k
        if n > LIMIT:
            n = LIMIT
        self.n = n
        self.log.append(why)
        return n


def run(counter, ks):
    total = 0
    for k in ks:
        got = counter.bump(k, f"k={k}")       # an assignment
        total += got
        counter.bump(0, "noop")               # an expression statement
    n = last = counter.bump(ks[0] * 2, "twice")   # several targets, an argument that is an expression
    return total, n, last


def test_inlined_equals_called():
    fast = inline_calls(run, {"bump": Counter.bump})
    for ks in ([1, 2, 3], [4, 5, 6, 7], [0]):
        a, b = Counter(), Counter()
        assert run(a, ks) == fast(b, ks)
        assert (a.n, a.log) == (b.n, b.log)
    assert "bump" not in fast.__code__.co_names        # no call left
    assert fast.__qualname__ == run.__qualname__ and fast.__code__.co_filename == run.__code__.co_filename


class Holder:
    def rule(self, x):
        if x:
            return 1
        return 2


def uses_rule(h):
    y = h.rule(1)
    return y


def test_refuses_callee_with_early_return_and_missing_call():
    with pytest.raises(ValueError, match="only a final return"):
        inline_calls(uses_rule, {"rule": Holder.rule})
    with pytest.raises(ValueError, match="no call"):
        inline_calls(run, {"rule": Counter.bump})
