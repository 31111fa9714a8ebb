"""Per-lane timelines recorded by the cycle model (runtime/emu/timeline.py): the lanes never overlap and stay inside
the launch, a core's busy cycles are its retired instructions and busy + stalled its cycle count, a Tensix thread's
busy cycles are its issued instructions, recording changes no cycle, and the speed layer's closed forms (periodic
skip, memoised replay) record exactly the intervals one-by-one issue records."""
from __future__ import annotations

import pytest

from tt_backend.chip import isa, layout
from tt_backend.runtime.emu import bench, timeline
from tt_backend.runtime.emu import tensix as tensix_mod
from tt_backend.runtime.emu.accel import batch_timing, deferral
from tt_backend.runtime.emu.tile import Tile

from tests.support.tensix_runs import mop_run
from tests.support.timelines import check_lanes, recorded_spans

E = isa.encode
MAD = lambda a, b, c, d: E("SFPMAD", lreg_src_a=a, lreg_src_b=b, lreg_src_c=c, lreg_dest=d, instr_mod1=0)
LOAD = lambda vd, addr, am=0: E("SFPLOAD", lreg_ind=vd, instr_mod0=3, sfpu_addr_mode=am, dest_reg_addr=addr)
STORE = lambda vd, addr, am=0: E("SFPSTORE", lreg_ind=vd, instr_mod0=3, sfpu_addr_mode=am, dest_reg_addr=addr)

BODIES = {
    "exp2": bench.exp2_body(),
    # MAD -> dependent MAD -> dependent STORE: two SFPU auto-stalls per row step (gaps in thread1 and the SFPU lane)
    "chain": [LOAD(0, 0), MAD(0, 0, 9, 1), MAD(1, 1, 9, 2), STORE(2, 64, 1)],
}


@pytest.mark.parametrize("name", sorted(BODIES))
def test_batched_closed_forms_record_what_one_by_one_issue_records(name, monkeypatch):
    used = {"skip": 0, "replay": 0}
    for fn in used:
        orig = getattr(batch_timing, fn)

        def spy(*a, _orig=orig, _fn=fn, **k):
            used[_fn] += 1
            return _orig(*a, **k)
        monkeypatch.setattr(batch_timing, fn, spy)
    tx = mop_run(BODIES[name], tiles=4, record=True)
    batched, end = recorded_spans(tx)
    assert used["skip"] > 0 and used["replay"] > 0          # both closed forms ran while recording
    stats = tx.tm.stats()

    monkeypatch.setattr(tensix_mod.Tensix, "batch_sfpu", lambda self, t, th: 0)
    monkeypatch.setattr(deferral, "DEFER_SFPU", False)
    tx1 = mop_run(BODIES[name], tiles=4, record=True)
    one_by_one, end1 = recorded_spans(tx1)
    assert tx1.tm.stats() == stats and end1 == end
    assert batched == one_by_one

    totals = check_lanes([s[:4] for s in batched], end)
    assert totals["thread1"]["busy"] == tx.tm.issued[1]      # one issue per busy cycle
    assert totals["thread1"]["stall"] + totals["thread1"]["idle"] == stats["stall_cycles"][1]
    if name == "chain":
        reasons = {s[4] for s in batched if s[0] == "thread1" and s[3] == "stall"}
        assert timeline.SFPU_AUTO_STALL in reasons
        assert totals["sfpu"]["idle"] > 0


def _tile_long(record: bool, tiles: int = 2):
    """bench's tile_long kernel (TRISC1 pushes a long SFPU body word by word, TTSync per tile; the other cores park),
    optionally recorded."""
    tile = Tile()
    if record:
        tile.timeline_begin()
    bench.launch_tile_long(tile, tiles)
    bench.run_tile(tile, 10_000_000)
    return tile


def test_tile_lanes_add_up_to_the_cycle_model():
    plain = _tile_long(False).stats()
    tile = _tile_long(True)
    st = tile.stats()
    rec = tile.timeline_end()
    assert st == plain                                      # recording changes no cycle and no count
    spans = rec["spans"]
    totals = check_lanes([(s.lane, s.start, s.end, s.state) for s in spans], rec["cycles"])
    for core in layout.CORES:                               # every core was released (the others park at once)
        t = totals[core]
        assert t["busy"] == st["instructions"][core], core
        assert t["busy"] + t["stall"] + t["idle"] == st["cycles"][core], core
    assert totals["thread1"]["busy"] == st["tensix_cycles"]["issued"][1]
    reasons = {(s.lane, s.reason) for s in spans if s.state != "busy"}
    assert ("trisc1", timeline.TTSYNC) in reasons and ("thread1", timeline.SFPU_AUTO_STALL) in reasons
    assert totals["sfpu"]["busy"] > 0
    assert tile.timeline_end() is None                      # nothing records any more


def test_detached_recorder_is_gone_from_every_hook():
    tile = Tile()
    tile.timeline_begin()
    tile.timeline_end()
    tm = tile.tensix.tm
    assert tile.rec is None and tm.rec is None and tm.sfpu.rec is None


def test_deferred_long_body_records_what_one_by_one_issue_records(monkeypatch):
    """tile_long pushes a body longer than the replay buffer word by word: the deferral issues it at once with the
    issue rule expanded in place (accel/inline.py) and batches its data; recorded timelines equal the reference
    path's."""
    fast = _tile_long(True)
    a = fast.timeline_end()
    monkeypatch.setattr(tensix_mod.Tensix, "batch_sfpu", lambda self, t, th: 0)
    monkeypatch.setattr(deferral, "DEFER_SFPU", False)
    ref = _tile_long(True)
    b = ref.timeline_end()
    assert fast.stats() == ref.stats()
    assert a == b and len(a["spans"]) > 100
