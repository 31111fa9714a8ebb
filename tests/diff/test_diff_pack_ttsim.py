"""Differential format tests: the unpackers and the packer of the emulator against ttsim, bit for bit.

One TRISC0 kernel (tests/programs/pack/pack.c) runs a host-chosen list of Tensix words per tile; the host picks the
formats through the argument block. Three groups, each comparing the whole L1 output region (data, BFP exponent
section, padding, and for L1 accumulation the prior contents):
* CASES: L1 FP32/INT32 -> Dst32b (bit exact) -> PACR with every Read_32b_data=1 conversion ttsim implements, plus
  ReLU, edge masks / row-set mapping, L1 accumulation and packer untilize (per-row streams placed by ch1.Y).
* UNPACK_CASES: unpacker 0/1 -> SrcA/SrcB (BF16, BFP8/4/2 with exponent section or forced exponent, FP32 -> BF16 /
  TF32), observed through ELWADD (x + 0) into Dst32b and an FP32 pack; FP32/TF32 -> Dst; Tileize_mode.
* DST16_CASES: unpacker -> SrcA -> MOVA2D -> Dst16b -> PACR with Read_32b_data=0 (BF16/E8M6/FP16/E5M6 modes), and
  the FP16-overlay unpacker conversions (FP32 -> FP16, FP8 E5M2/E4M3, INT8/UINT8).
Inputs are random bit patterns biased to specials (zeros, denormals, Inf/NaN, rounding ties, FP16/FP8 range
edges, BFP blocks with close exponents, BFP exponents that wrap).

Skipped unless TT_SIMULATOR points at libttsim.so. TT_PACK_TILES (default 32) tiles per case; 1024 gives the
"1000 tiles per format pair" run.
"""
from __future__ import annotations

import os

import numpy as np
import pytest

from tt_backend.runtime.emu.device import EmuDevice
from tt_backend.runtime.ttsim_device import TtsimDevice

from tests.support import ttsim_path
from tests.support.pack_cases import (CASES, DST16_CASES, GEN32, TILE, TILIZE_CASE, UNPACK_CASES, compile_pack,
                                      gen_patterns, launch, tilized_bf16)

LIB = ttsim_path()
pytestmark = [pytest.mark.ttsim, pytest.mark.needs_program_cc]

N_TILES = int(os.environ.get("TT_PACK_TILES", "32"))
TILES_PER_LAUNCH = 128


def _mismatch_report(got: bytes, want: bytes, limit: int = 6) -> str:
    g, w = np.frombuffer(got, np.uint8), np.frombuffer(want, np.uint8)
    bad = np.flatnonzero(g != w)
    rows = [f"+{int(o):#x}: emu {g[o & ~3:(o & ~3) + 4].tobytes().hex()} ttsim {w[o & ~3:(o & ~3) + 4].tobytes().hex()}"
            for o in bad[:limit]]
    return f"{bad.size} bytes differ; " + "; ".join(rows)


def _run_case(name, setup, words, gen, devices):
    emu, sim = devices
    elf = compile_pack()
    rng = np.random.default_rng(sum(map(ord, name)) * 7919)
    done = 0
    while done < N_TILES:
        n = min(TILES_PER_LAUNCH, N_TILES - done)
        inputs = gen(rng, n)
        prior = gen_patterns(rng, n * 1024).tobytes()        # L1 accumulation reads this
        want = launch(sim, elf, setup, words, inputs, prior, n)
        got = launch(emu, elf, setup, words, inputs, prior, n)
        assert got == want, f"{name}, tiles {done}..{done + n - 1}: {_mismatch_report(got, want)}"
        done += n


@pytest.fixture(scope="module")
def devices():
    sim = TtsimDevice(LIB)
    try:
        yield EmuDevice(), sim
    finally:
        sim.close()


@pytest.mark.parametrize("name", list(CASES))
def test_pack_format_matches_ttsim(name, devices):
    setup, words = CASES[name]
    _run_case(name, setup, words, GEN32, devices)


@pytest.mark.parametrize("name", list(UNPACK_CASES))
def test_unpack_format_matches_ttsim(name, devices):
    (setup, words), gen = UNPACK_CASES[name]
    _run_case(name, setup, words, gen, devices)


@pytest.mark.parametrize("name", list(DST16_CASES))
def test_pack_from_dst16_matches_ttsim(name, devices):
    (setup, words), gen = DST16_CASES[name]
    _run_case(name, setup, words, gen, devices)


def test_tilize_on_the_tensix_matches_ttsim_and_numpy(devices):
    """A row-major bf16 tile through unpacker 0's face-row walk, MOVA2D and a Dst16b pack: the same bits on ttsim,
    and numpy's tilize of the tile with the special values mapped as pack_cases.tilized_bf16 says."""
    (setup, words), gen = TILIZE_CASE
    _run_case("tilize bf16 rows", setup, words, gen, devices)
    rng = np.random.default_rng(29)
    inputs = gen(rng, 8)
    got = launch(devices[0], compile_pack(), setup, words, inputs, bytes(8 * TILE), 8)
    for t in range(8):
        tile = np.frombuffer(inputs[t * TILE:t * TILE + 2048], "<u2").reshape(32, 32)
        assert np.array_equal(np.frombuffer(got[t * TILE:t * TILE + 2048], "<u2"), tilized_bf16(tile)), t
