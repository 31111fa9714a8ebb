"""Record the ttsim verdict corpus (tests/verdicts/data/corpus.npz) from a local ttsim build:

    TT_SIMULATOR=/path/to/libttsim.so python -m tests.verdicts.record

Every session runs the project's own programs on a fresh ttsim device wrapped in a `Recorder`
(tests/support/verdicts.py) and keeps the trace: inputs, ELF images, launches and the bytes ttsim returned. Nothing
of ttsim itself is stored. Categories (the session name says which case; `keys` what it covers):

* sfpu: every (instruction, mode) key of the SFPU sweep (tests/support/sfpu_gen.py), CASES_PER_KEY cases each, one
  session per launch of tests/programs/sfpu/sfpu_diff.c
* fpu: ELWMUL / MVMUL at every fidelity (LoFi, HiFi2-4) with BF16, TF32, FP16 and INT8 sources, ELWADD / ELWSUB,
  FP32 and 16-bit Dst (tests/support/fpu_scripts.py)
* pack: every pack / unpack / Dst16 format case (tests/support/pack_cases.py), one tile each
* device: the hand-written device programs (RISC-V cores, NoC, DRAM; tests/support/device_diff.py)
* family: small tinygrad programs on TT:ttsim, every kernel of each (keys: the family of each kernel, with the
  fidelity where it runs on the FPU: e.g. sfpu_reduce, fpu_matmul:HiFi3, elementwise/FPU ELWMUL HiFi2)

Prints the corpus size, the sessions per category and the keys covered. `--verify` replays the stored corpus on ttsim
instead (what tests/verdicts/test_verdicts.py does when TT_SIMULATOR is set).
"""
from __future__ import annotations

import collections
import contextlib
import os
import random
import sys
import time
from pathlib import Path

import numpy as np
from tinygrad import Device, Tensor, dtypes
from tinygrad.helpers import Context

import tt_backend.lowering.select as sel
from tt_backend.runtime.emu.device import EmuDevice
from tt_backend.runtime.targets import make_device
from tt_backend.runtime.ttsim_device import TtsimDevice

from tests.support import device_diff, fpu_scripts as fs, pack_cases, sfpu_gen, ttsim_path
from tests.support.elementwise import BINARY, UNARY
from tests.support.sfpu_launch import Runner, build_elfs, cases_by_config
from tests.support.verdicts import Corpus, Recorder, replay

CORPUS = Path(__file__).resolve().parent / "data" / "corpus.npz"
SEED = 20261202
CASES_PER_KEY = 3


@contextlib.contextmanager
def session(corpus: Corpus, name: str, category: str, keys):
    """A fresh ttsim device wrapped in a Recorder; its trace becomes a session of `corpus`."""
    sim = TtsimDevice(ttsim_path())
    rec = Recorder(sim, corpus)
    try:
        yield rec
    finally:
        sim.close()
    corpus.sessions.append({"name": name, "category": category, "keys": sorted(set(keys)), "events": rec.finish()})


def record_sfpu(corpus: Corpus) -> None:
    r, nrng = random.Random(SEED), np.random.default_rng(SEED)
    elfs = build_elfs()
    for cfg, cases in cases_by_config(r, CASES_PER_KEY).items():
        for k, batch in enumerate(sfpu_gen.pack(cases)):
            img, words = sfpu_gen.launch_image(batch, nrng)
            keys = [key for c in batch for key in (c.key, *c.counts)]
            with session(corpus, f"sfpu {cfg} launch {k}", "sfpu", keys) as rec:
                Runner(rec, elfs).run(img, words, sfpu_gen.ALU_CFG[cfg])


def fpu_cases() -> list[fs.Case]:
    """One-tile cases: the fidelity paths of both FPU multiplies per source format, the adds, both Dst widths."""
    cases = []
    for fid, phases in fs.PHASES.items():
        for fmt in (fs.BF16, fs.TF32):
            setup, words = fs.elwmul_words(phases)
            a, b = fs.inputs(len(cases), fmt, 1)
            cases.append(fs.Case(f"ELWMUL {fid} {fmt}", fmt, words, a, b, setup))
            setup, words = fs.mvmul_words(phases)
            a, b = fs.mild_inputs(len(cases), fmt, 1)
            cases.append(fs.Case(f"MVMUL {fid} {fmt}", fmt, words, a, b, setup))
    for fid in ("LoFi", "HiFi4"):
        for op, words_of in (("ELWMUL", fs.elwmul_words), ("MVMUL", fs.mvmul_words)):
            setup, words = words_of(fs.PHASES[fid])
            for fmt, dst16 in ((fs.FP16, False), (fs.FP16, True), (fs.BF16, True), (fs.INT8, False)):
                # MVMUL sums 16 products: BF16 data mostly normal (mild) keeps the sums finite
                mild = op == "MVMUL" and fmt == fs.BF16
                a, b = (fs.mild_inputs if mild else fs.inputs)(len(cases), fmt, 1)
                cases.append(fs.Case(f"{op} {fid} {fmt} {'Dst16' if dst16 else 'Dst32'}", fmt, words, a, b, setup,
                                     dst16=dst16))
    for name in ("ELWADD", "ELWSUB"):
        for fmt, dst16 in ((fs.BF16, False), (fs.TF32, False), (fs.FP16, True), (fs.INT8, False)):
            setup, words = fs.elwadd_words(name, 0, 0)
            a, b = fs.inputs(len(cases), fmt, 1)
            cases.append(fs.Case(f"{name} {fmt} {'Dst16' if dst16 else 'Dst32'}", fmt, words, a, b, setup,
                                 dst16=dst16))
    return cases


def record_fpu(corpus: Corpus) -> None:
    for case in fpu_cases():
        with session(corpus, f"fpu {case.name}", "fpu", [case.name]) as rec:
            fs.run_case(rec, case)


def record_pack(corpus: Corpus) -> None:
    elf = pack_cases.compile_pack()
    tables = {"pack": {n: (c, pack_cases.GEN32) for n, c in pack_cases.CASES.items()},
              "unpack": pack_cases.UNPACK_CASES, "dst16": pack_cases.DST16_CASES}
    for group, table in tables.items():
        for name, ((setup, words), gen) in table.items():
            rng = np.random.default_rng(sum(map(ord, name)) * 7919)
            inputs, prior = gen(rng, 1), pack_cases.gen_patterns(rng, 1024).tobytes()
            with session(corpus, f"{group} {name}", "pack", [f"{group}: {name}"]) as rec:
                pack_cases.launch(rec, elf, setup, words, inputs, prior, 1)


def record_device(corpus: Corpus) -> None:
    for case in device_diff.CASES:
        with session(corpus, f"device {case.name}", "device", [case.name]) as rec:
            device_diff.execute(rec, case)


_prng = np.random.default_rng(SEED)


def _r(*shape, lo=-4.0, hi=4.0):
    return _prng.uniform(lo, hi, size=shape).astype(np.float32)


# FPU sums and matmuls under a budget need the opt-in to sample-data placements (lowering/placement/guarantee.py)
SAMPLED = {"TT_BUDGET_SAMPLED": "1"}


def tinygrad_programs():
    """(name, environment, fn, input arrays): small programs whose kernels span every kernel family, the FPU at
    each fidelity the selector picks under a budget (TT_ERR_BUDGET) or a pin (TT_PLACE)."""
    bf16 = lambda t: t.cast(dtypes.bfloat16)     # noqa: E731
    progs = [(f"{op}[5,33]", {}, f, (_r(5, 33), _r(5, 33))) for op, f in BINARY.items()]
    progs += [(f"{op}[3,50]", {}, f, (_r(3, 50, lo=lo, hi=hi),)) for op, (f, (lo, hi)) in UNARY.items()]
    progs += [
        ("where_lt", {}, lambda x, y: (x < y).where(x, y * 2), (_r(7, 20), _r(7, 20))),
        ("broadcast_permute", {}, lambda x, y, z: x * y + z.T, (_r(32, 1), _r(1, 24), _r(24, 32))),
        ("pad_shrink", {}, lambda x: x.pad(((1, 2), (0, 3)))[1:, ::2] + 1.0, (_r(5, 33),)),
        ("bf16_arith", {}, lambda x, y: (bf16(x) * bf16(y) + 1).cast(dtypes.float32), (_r(9, 70), _r(9, 70))),
        ("cast_int", {}, lambda x: x.cast(dtypes.int32).cast(dtypes.float32), (_r(3, 77, lo=-1000, hi=1000),)),
        ("mul_budget", {"TT_ERR_BUDGET": "1e-1"}, lambda x, y: x * y, (_r(128, 128), _r(128, 128))),
        ("sum_rows", {}, lambda x: (x * 3).sum(1), (_r(8, 100),)),
        ("max_cols", {}, lambda x: (x * 2).max(0), (_r(9, 40),)),
        ("long_sum", {}, lambda x: x.sum(), (_r(4, 3000),)),
        ("softmax_rows_32_lanes", {}, lambda x: x.softmax(-1), (_r(3, 1024),)),
        ("argmax", {}, lambda x: x.argmax(), (_r(40, 50),)),
        ("staged_reduction_of_reduction", {}, lambda x: (x - x.mean()).square().sum(0), (_r(8, 40),)),
        ("sum_budget_1e-2", {"TT_ERR_BUDGET": "1e-2", **SAMPLED}, lambda x: x.sum(1), (_r(64, 500),)),
        ("sum_budget_3e-3", {"TT_ERR_BUDGET": "3e-3", **SAMPLED}, lambda x: x.sum(1), (_r(64, 500),)),
        ("sum_cols_budget", {"TT_ERR_BUDGET": "1e-2", **SAMPLED}, lambda x: x.sum(0), (_r(256, 64),)),
        ("matmul_fp32", {}, lambda a, b: a @ b, (_r(16, 32), _r(32, 24))),
        ("matmul_bf16", {}, lambda a, b: (bf16(a) @ bf16(b)).float(), (_r(8, 64), _r(64, 16))),
        ("matmul_bf16_budget", {"TT_ERR_BUDGET": "2e-3", **SAMPLED}, lambda a, b: (bf16(a) @ bf16(b)).float(),
         (_r(32, 64), _r(64, 32))),
    ]
    # kernel shapes of the later families: a conv as a gathered matmul, a matmul cut out of a fused kernel (staged),
    # a bf16 FPU matmul on whole tiles (B row-major / tilized by the Tensix), a prefix op split into blocks,
    # range-predicate masks (folded and packed), a transposing reader over a buffer larger than its window
    progs += [
        ("conv2d_gathered_matmul", {}, lambda x, w: x.conv2d(w, padding=1), (_r(1, 4, 9, 9), _r(5, 4, 3, 3))),
        ("attention_scores_staged", {}, lambda q, k: (q @ k.T * 0.25).softmax(-1), (_r(32, 16), _r(40, 16))),
        ("matmul_bf16_tiles_budget", {"TT_ERR_BUDGET": "1e-2", **SAMPLED},
         lambda a, b: (bf16(a) @ bf16(b)).float(), (_r(64, 96), _r(96, 64))),
        ("cumsum_prefix_split", {}, lambda x: x.cumsum(1), (_r(3, 400),)),
        ("tril_triu_masks", {}, lambda x: x.tril(1) * 2 + x.triu(3), (_r(37, 45),)),
        ("transpose_wide", {}, lambda x: x.T + 1.0, (_r(40, 4000),)),
    ]
    progs += [(f"matmul_budget_{b}", {"TT_ERR_BUDGET": b, **SAMPLED}, lambda a, b: a @ b, (_r(48, 64), _r(64, 40)))
              for b in ("3e-1", "2e-2", "5e-3", "1e-4")]
    progs += [(f"mul_add_pinned_{fid}", {"TT_PLACE": f"*:MUL=FPU:{fid},ADD=FPU:{fid}"}, lambda x, y: x * y + y,
               (_r(64, 64), _r(64, 64))) for fid in ("LoFi", "HiFi2", "HiFi3", "HiFi4")]
    return progs


def plan_keys(plan) -> list[str]:
    """What a selected plan covers: family[:fidelity] (its family module's name) and, per elementwise node placed on
    the FPU, family/FPU <instruction> <fidelity>."""
    family = type(plan).__module__.rsplit(".", 1)[-1]
    if fidelity := getattr(plan, "fidelity", None):
        return [f"{family}:{fidelity}"]
    nodes = plan.placement.nodes if plan.placement else []
    return [family] + [
        f"{family}/FPU {n.get('instruction', n['op'])} {n['fidelity']}" for n in nodes if n.get("engine") == "FPU"]


def record_families(corpus: Corpus) -> None:
    """Each program on TT:ttsim with a fresh ttsim behind a Recorder as its target; the selector is watched to
    label the session with the plans its kernels got."""
    selected, real_select = [], sel.select

    def watched_select(kernel, *args, **kwargs):        # select's own arguments passed on (max_cores)
        plan = real_select(kernel, *args, **kwargs)
        selected.extend(plan_keys(plan))
        return plan

    dev = Device["TT:ttsim"]
    sel.select, own_target = watched_select, dev.target
    try:
        for name, env, fn, arrays in tinygrad_programs():
            selected.clear()
            dev.target = rec = Recorder(make_device("ttsim"), corpus)
            try:
                with Context(PARALLEL=0), _env(env):      # in-process compiles: the watched selector sees them
                    fn(*[Tensor(a, device="TT:ttsim") for a in arrays]).numpy()
            finally:
                rec.inner.close()
            corpus.sessions.append({"name": f"tinygrad {name}", "category": "family", "keys": sorted(set(selected)),
                                    "env": env, "events": rec.finish()})
    finally:
        sel.select, dev.target = real_select, own_target


@contextlib.contextmanager
def _env(env: dict[str, str]):
    """Exactly these of the knobs a program's lowering reads are set (a caller's TT_ERR_BUDGET does not leak in);
    kernels stay on one tile (TT_CORES=1): the Recorder traces the device protocol of one tile."""
    old = {k: os.environ.pop(k, None) for k in ("TT_ERR_BUDGET", "TT_BUDGET_SAMPLED", "TT_PLACE", "TT_CORES")}
    os.environ.update({"TT_CORES": "1", **env})
    try:
        yield
    finally:
        for k, v in old.items():
            os.environ.pop(k, None)
            if v is not None:
                os.environ[k] = v


RECORDERS = {"sfpu": record_sfpu, "fpu": record_fpu, "pack": record_pack, "device": record_device,
             "family": record_families}


def coverage(corpus: Corpus) -> dict[str, collections.Counter]:
    """category -> key -> sessions covering it."""
    out: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for s in corpus.sessions:
        out[s["category"]].update(s["keys"])
    return out


def summary(corpus: Corpus, path: Path) -> str:
    cats = collections.Counter(s["category"] for s in corpus.sessions)
    lines = [f"{path}: {path.stat().st_size / 1e6:.2f} MB, {len(corpus.sessions)} sessions, {len(corpus.blobs)} blobs "
             f"({sum(map(len, corpus.blobs)) / 1e6:.1f} MB uncompressed)",
             "sessions per category: " + ", ".join(f"{c} {n}" for c, n in sorted(cats.items()))]
    for cat, keys in sorted(coverage(corpus).items()):
        lines.append(f"{cat}: {len(keys)} keys: " + ", ".join(sorted(keys)))
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if not ttsim_path():
        print("set TT_SIMULATOR=/path/to/libttsim.so (recording and verifying need ttsim)", file=sys.stderr)
        return 2
    if argv[:1] == ["--verify"]:
        corpus, t0, bad = Corpus.load(CORPUS), time.perf_counter(), 0
        for s in corpus.sessions:
            dev = TtsimDevice(ttsim_path())
            try:
                diffs = replay(s, dev, corpus)
            finally:
                dev.close()
            bad += bool(diffs)
            for d in diffs[:3]:
                print(f"{s['name']}: {d}")
        print(f"{len(corpus.sessions)} sessions replayed on ttsim in {time.perf_counter() - t0:.1f} s, {bad} differ")
        return int(bad > 0)
    corpus = Corpus()
    for cat, record in RECORDERS.items():
        t0 = time.perf_counter()
        record(corpus)
        print(f"recorded {cat} in {time.perf_counter() - t0:.1f} s", flush=True)
    t0, bad = time.perf_counter(), 0
    for s in corpus.sessions:          # the emulator must agree before the corpus is written
        diffs = replay(s, EmuDevice(), corpus)
        bad += bool(diffs)
        for d in diffs[:3]:
            print(f"EMULATOR DIFFERS: {s['name']}: {d}")
    print(f"replayed on the emulator in {time.perf_counter() - t0:.1f} s: {bad} session(s) differ")
    CORPUS.parent.mkdir(exist_ok=True)
    corpus.save(CORPUS)
    print(summary(corpus, CORPUS))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
