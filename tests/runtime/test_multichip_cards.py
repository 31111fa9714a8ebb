"""Several cards through tinygrad: `TT:hw:<n>` is card n, opened under its own lock, with its own tile and DRAM; a
sharded program (its allreduce and the copies between the cards included) runs on two fake cards (the fake tt-umd of
tests/support, one emulated tile per card) and matches numpy. Tolerance: float32 sums within 4 * eps32 * K * sum|x|
(K summed elements: the cards and numpy add in different orders)."""
from __future__ import annotations

import numpy as np
import pytest

from tests.support import fake_tt_umd

EPS32 = 2.0 ** -23


@pytest.mark.needs_cc
def test_tinygrad_shards_over_two_cards(card):
    from tinygrad import Device, Tensor
    fake_tt_umd.reset((fake_tt_umd.ARCH.BLACKHOLE,) * 5)     # cards 3 and 4: numbers no other test opens
    x = np.random.default_rng(3).standard_normal((16, 24)).astype(np.float32)
    t = Tensor(x).shard(("TT:hw:3", "TT:hw:4"), axis=0)
    np.testing.assert_array_equal((t * 2 + 1).numpy(), x * 2 + 1)
    total = (t * 2).sum().numpy()
    assert abs(float(total) - 2 * x.astype(np.float64).sum()) <= 4 * EPS32 * x.size * 2 * np.abs(x).sum()
    three, four = Device["TT:hw:3"].target, Device["TT:hw:4"].target
    assert (three.device_number, four.device_number) == (3, 4)
    assert fake_tt_umd.tiles[3] is not fake_tt_umd.tiles[4]
    for n in (3, 4):      # each card is held under its own lock while its device is open
        assert fake_tt_umd.RobustMutex(f"CHIP_IN_USE_{n}_PCIe").probe_lock() is not None
