"""bench emu's fixed rows side by side with ttsim (runtime/emu/bench_side.py): the programs' completion signal and
Dst fill on the emulator, and on ttsim (marked `ttsim`) the same programs ending in the same state as on the
emulator, and the rows' measured keys."""
from __future__ import annotations

import json

import numpy as np
import pytest

from tt_backend.chip import layout
from tt_backend.runtime.emu import bench, bench_side
from tt_backend.runtime.emu.device import EmuDevice
from tt_backend.runtime.emu.tile import Tile
from tt_backend.runtime.ttsim_device import TtsimDevice


def _emu_device() -> tuple[Tile, EmuDevice]:
    tile = Tile()
    tile.tensix.dst.write_rows32(0, np.zeros((512, 16), np.uint32))
    return tile, EmuDevice(tile)


@pytest.mark.parametrize("name,size,done", [("riscv", 5000, 5000), ("tile", 2, layout.TENSIX_SYNC - 4),
                                            ("tile_long", 1, layout.TENSIX_SYNC)])
def test_done_word_is_stored_at_the_end(name, size, done):
    """The program stores its done word (riscv: BRISC's count, the loop's result) only once its work is over: not
    after part of the budget, and the polled launch ends with the core parked, the word set."""
    prog = bench_side.side_program(name, size)
    tile, dev = _emu_device()
    bench.load_words(dev, {prog.core: prog.words})
    dev.write32(layout.SOFT_RESET_0, 0)
    dev.advance(200)
    assert dev.read32(bench.done_addr(prog.core)) == 0            # 200 instructions in: not done yet
    _, _, clocks = bench_side.launch_polled(dev, prog, 0, 1 << 30)
    assert dev.read32(bench.done_addr(prog.core)) == done
    dev.advance(10)
    assert not tile.running(prog.core)                          # parked on `j .` right after the store


def test_polled_launch_refuses_a_program_without_its_done_word():
    prog = bench_side.side_program("riscv", 100)
    silent = bench_side.SideProgram("silent", "brisc", prog.words[:-2] + [bench.J_SELF], prog.count, 0)
    _, dev = _emu_device()
    with pytest.raises(RuntimeError, match="did not store its done word"):
        bench_side.launch_polled(dev, silent, 0, 5000)


def test_dst_fill_writes_one_value_per_row_step():
    """dst_fill: row step k (Dst address 2k) holds bf16 0x3F80 + k as float32 in rows 4 (k // 2) .. + 3, the
    columns of k's parity; rows 192.. untouched."""
    fill = bench.dst_fill()
    words = [bench.ttinsn(w) for w in fill] + [bench.lui(9, 0xFFE80), bench.i_type(4, 9, 2, 10, 0x03),
                                               bench.done_store(9, "trisc1"), bench.J_SELF]
    tile, dev = _emu_device()
    bench_side.launch_polled(dev, bench_side.SideProgram("fill", "trisc1", words, len, 0), 0, 1 << 30)
    rows = tile.tensix.dst.rows32
    k = 2 * (np.arange(192)[:, None] // 4) + np.arange(16)[None, :] % 2
    assert np.array_equal(rows[:192], ((0x3F80 + k) << 16).astype(np.uint32))
    assert not rows[192:].any()


def test_side_programs_are_the_rows_words():
    """The ttsim programs are the rows' own words, behind the fill where they read Dst."""
    fill = [bench.ttinsn(w) for w in bench.dst_fill()]
    assert bench_side.side_program("riscv", 7).words == bench.riscv_program(7)
    assert bench_side.side_program("tile", 3).words == fill + bench.tile_program(3)
    long_words, row_words = bench_side.side_program("tile_long", 2).words, bench.tile_long_program(2)
    assert long_words == row_words[:5] + fill + row_words[5:]     # after the config write (li, li, sw)


def test_rows_keep_their_keys_without_ttsim(monkeypatch, capsys):
    monkeypatch.delenv("TT_SIMULATOR", raising=False)
    assert bench.main(["--quick", "--json", "riscv", "tile_long"], side=bench_side.add_ttsim) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["kernel"] for r in rows] == ["riscv", "tile_long"]
    for r in rows:
        assert {"seconds", "cpu_seconds", "per_second", "vs_ttsim", "cycles"} <= r.keys()
        assert "vs_ttsim_same_run" not in r
    assert rows[0]["riscv_instructions"] == 3 * 200_000 + 6


@pytest.mark.parametrize("name,size", [("riscv", 3000), ("tile", 2), ("tile_long", 1)])
def test_ttsim_ends_in_the_emulators_state(ttsim_lib, name, size):
    """The same program on ttsim: its done word and Dst rows (the debug array read) equal the emulator's; a Dst that
    differs in one bit is told apart."""
    prog = bench_side.side_program(name, size)
    emu_state, _, cycles = bench_side.on_emulator(prog)
    with TtsimDevice(ttsim_lib) as sim:
        timing, sim_state = bench_side.on_ttsim(sim, prog, cycles)
    assert bench_side.same_state(emu_state, sim_state)
    assert timing["launches"] >= bench_side.REPEAT and timing["seconds"] > 0
    if prog.dst_rows:
        assert len(np.unique(sim_state["dst"])) > 8               # the fill's values and what the body made of them
        flipped = sim_state["dst"].copy()
        flipped[prog.dst_rows - 1, 15] ^= 1
        assert not bench_side.same_state(emu_state, dict(sim_state, dst=flipped))


def test_bench_emu_measures_fixed_rows_on_ttsim(ttsim_lib, monkeypatch, capsys):
    monkeypatch.setenv("TT_SIMULATOR", ttsim_lib)
    assert bench.main(["--quick", "--json", "sfpu", "sfpu_long", "riscv"], side=bench_side.add_ttsim) == 0
    rows = {r["kernel"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["sfpu"]["ttsim_program"] == "tile" and rows["sfpu_long"]["ttsim_program"] == "tile_long"
    for r in rows.values():
        assert r["identical"] is True
        assert r["vs_ttsim_same_run"] == pytest.approx(r["per_second"] / r["ttsim_per_second"])
    assert rows["riscv"]["ttsim_instructions"] == rows["riscv"]["riscv_instructions"]
    assert rows["riscv"]["same_work"] and not rows["sfpu"]["same_work"] and not rows["sfpu_long"]["same_work"]


def test_no_ratio_where_the_end_states_differ(monkeypatch):
    """add_ttsim leaves the ratios out (None) of a row whose counterpart ended differently on ttsim."""
    sim = {"ttsim_program": "tile", "ttsim_per_second": 5e6, "ttsim_cpu_per_second": 5e6}
    monkeypatch.setattr(bench_side, "measure", lambda rows, size, lib: {
        "tile": dict(sim, identical=False), "sfpu": dict(sim, identical=True)})
    rows = [{"kernel": "tile", "sfpu_instructions": 100, "per_second": 1e7, "cpu_seconds": 1e-5},
            {"kernel": "sfpu", "sfpu_instructions": 100, "per_second": 1e7, "cpu_seconds": 1e-5}]
    bench_side.add_ttsim(rows, {}, "unused")
    assert rows[0]["vs_ttsim_same_run"] is None and rows[0]["vs_ttsim_same_run_cpu"] is None
    assert rows[0]["same_work"] and not rows[1]["same_work"]
    assert rows[1]["vs_ttsim_same_run"] == pytest.approx(2.0) and rows[1]["vs_ttsim_same_run_cpu"] == pytest.approx(2.0)


def test_best_of_keeps_the_fastest_call_with_the_mean_cpu():
    """best_of: the fastest call's figures, CPU the mean of the timed calls (ttsim's side is a mean as well)."""
    calls = iter([(9.0, 9.0), (0.3, 0.3), (0.1, 0.2), (0.2, 0.4)])          # (seconds, cpu_seconds); first untimed
    row = lambda: dict(zip(("seconds", "cpu_seconds"), next(calls)), kernel="k", cycles=1)
    best = bench.best_of(row)
    assert best["seconds"] == 0.1 and best["cpu_seconds"] == pytest.approx(0.3)
