"""The recorded ttsim verdicts (tests/verdicts/data/corpus.npz, written by `python -m tests.verdicts.record`) replayed
on the emulator: every session's reads must return the bytes ttsim returned, so CI (no ttsim) guards bit-exactness.
With TT_SIMULATOR set, the corpus is also replayed on ttsim (the recording is still what ttsim does).

Coverage is checked against the project's own lists: every (instruction, mode) key of the SFPU sweep, every
fidelity of the FPU multiplies, every pack / unpack format case, every registered kernel family. A new key or family
fails here until the corpus is re-recorded.
"""
from __future__ import annotations

import copy

import pytest

from tt_backend.lowering.families.registry import REGISTRY
from tt_backend.runtime.emu.device import EmuDevice
from tt_backend.runtime.ttsim_device import TtsimDevice

from tests.support import fpu_scripts, pack_cases, sfpu_gen, ttsim_path
from tests.support.device_diff import CASES, execute
from tests.support.verdicts import Corpus, Recorder, replay
from tests.verdicts.record import CORPUS, coverage

CATEGORIES = ("sfpu", "fpu", "pack", "device", "family")


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    return Corpus.load(CORPUS)


def _replay_all(corpus: Corpus, sessions: list[dict], make_device) -> list[str]:
    out = []
    for s in sessions:
        dev = make_device()
        try:
            out += [f"{s['name']}: {d}" for d in replay(s, dev, corpus)[:3]]
        finally:
            getattr(dev, "close", lambda: None)()
    return out


@pytest.mark.parametrize("category", CATEGORIES)
def test_emulator_matches_recorded_ttsim(corpus, category):
    sessions = [s for s in corpus.sessions if s["category"] == category]
    assert sessions, f"no {category} sessions in {CORPUS}"
    diffs = _replay_all(corpus, sessions, EmuDevice)
    assert not diffs, f"{len(diffs)} difference(s) from ttsim's recorded bytes:\n" + "\n".join(diffs[:20])


def functional_emu() -> EmuDevice:
    dev = EmuDevice()
    dev.set_timed(False)
    return dev


@pytest.mark.parametrize("category", ["device", "family"])
def test_functional_mode_matches_recorded_ttsim(corpus, category):
    """The emulator's functional mode (no MMIO latencies, no NoC time: what the plugin runs when no one reads cycles)
    on the sessions whose cores move data by NoC: the same bytes."""
    sessions = [s for s in corpus.sessions if s["category"] == category]
    diffs = _replay_all(corpus, sessions, functional_emu)
    assert not diffs, f"{len(diffs)} difference(s) from ttsim's recorded bytes:\n" + "\n".join(diffs[:20])


@pytest.mark.ttsim
@pytest.mark.parametrize("category", CATEGORIES)
def test_ttsim_still_gives_the_recorded_bytes(corpus, category):
    sessions = [s for s in corpus.sessions if s["category"] == category]
    diffs = _replay_all(corpus, sessions, lambda: TtsimDevice(ttsim_path()))
    assert not diffs, "ttsim no longer gives the recorded bytes (re-record with python -m tests.verdicts.record):\n" \
        + "\n".join(diffs[:20])


def test_every_session_launches_and_reads_back(corpus):
    """Each session runs a kernel and reads something it produced afterwards (the replay compares results)."""
    for s in corpus.sessions:
        kinds = [e[0] for e in s["events"]]
        assert "run" in kinds, s["name"]
        assert any(k.startswith("read") for k in kinds[kinds.index("run"):]), s["name"]


def test_corpus_covers_every_key(corpus):
    cov = coverage(corpus)
    assert set(sfpu_gen.generators()) <= set(cov["sfpu"]), "SFPU keys without a recorded verdict: " \
        f"{sorted(set(sfpu_gen.generators()) - set(cov['sfpu']))}"
    for op in ("ELWMUL", "MVMUL"):
        for fid in fpu_scripts.PHASES:
            for fmt in (fpu_scripts.BF16, fpu_scripts.TF32):
                assert f"{op} {fid} {fmt}" in cov["fpu"]
        for fmt in (fpu_scripts.FP16, fpu_scripts.INT8):
            assert any(k.startswith(op) and fmt in k for k in cov["fpu"]), (op, fmt)
    assert any("Dst16" in k for k in cov["fpu"])
    tables = {"pack": pack_cases.CASES, "unpack": pack_cases.UNPACK_CASES, "dst16": pack_cases.DST16_CASES}
    assert {f"{g}: {n}" for g, t in tables.items() for n in t} == set(cov["pack"])
    families = {k.split(":")[0].split("/")[0] for k in cov["family"]}
    assert {f.name for f in REGISTRY} <= families, f"families without a recorded kernel: {families}"


def test_one_flipped_output_byte_fails_the_replay(corpus):
    """The replay compares every byte: flip one byte of the output ttsim returned in one session and it is caught
    (at that read, and only there)."""
    session = next(s for s in corpus.sessions if s["name"].startswith("fpu MVMUL HiFi4"))
    reads = [i for i, e in enumerate(session["events"]) if e[0] == "read_l1"]
    i = reads[-1]
    bad = copy.copy(corpus)
    bad.blobs = list(corpus.blobs)
    blob = bytearray(bad.blobs[session["events"][i][2]])
    at = len(blob) // 2 + 1
    blob[at] ^= 0x10
    bad.blobs.append(bytes(blob))
    events = [list(e) for e in session["events"]]
    events[i][2] = len(bad.blobs) - 1
    assert replay(session, EmuDevice(), corpus) == []
    diffs = replay({**session, "events": events}, EmuDevice(), bad)
    assert len(diffs) == 1 and diffs[0].startswith(f"event {i} read_l1"), diffs
    assert f"+{at & ~3:#x}: emu" in diffs[0] and "; " not in diffs[0], diffs      # one word differs, that one


@pytest.mark.needs_program_cc
def test_recorder_folds_the_launch_wait_into_one_run():
    """A launch recorded on the emulator: the status polls of the wait become one "run" event, the result read stays
    a verdict, and the trace replays on a fresh emulator."""
    case = next(c for c in CASES if c.name == "compute")
    corpus = Corpus()
    rec = Recorder(EmuDevice(), corpus)
    execute(rec, case)
    events = rec.finish()
    assert [e[0] for e in events].count("run") == 1
    run = next(e for e in events if e[0] == "run")
    assert run[1:3] == [["brisc"], 1] and run[3] > 0
    assert any(e[0] == "read_l1" and e[1] == case.l1_out[0][0] for e in events)
    assert replay({"events": events}, EmuDevice(), corpus) == []
