"""Bad input at every user-facing surface gets one actionable message: knobs (checked when the TT device opens, or
when a kernel that reads them compiles), the command line (`python -m tt_backend ...`: the message and exit status 2,
no traceback) and kernel bundles that are damaged or were made by something else. Each table row is a bad input and
the message it must get."""
from __future__ import annotations

import itertools
import json
import re
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tinygrad import Tensor
from tinygrad.device import TinyELF

from tt_backend import __main__ as cli
from tt_backend.chip.errors import TTError, TTWarning
from tt_backend.ops_tt import MAGIC, TTDevice, TTProgram
from tt_backend.runtime import compile as cc

KNOBS = ("TT_ERR_BUDGET", "TT_BUDGET_SAMPLED", "TT_CORES", "TT_BACKEND", "TT_TIMEOUT", "TT_CHECK", "TT_DUMP", "TT_SIMULATOR",
         "TT_METAL_SIMULATOR", "TT_PLACE", "TT_SAMPLE_DIST", "DEV", "DEVICE", "TT_CACHE_DIR", "TT_SFPU_MACRO")
NOT_TTSIM = "int x;\n"          # compiled to a shared library that is not ttsim


@pytest.fixture
def files(tmp_path):
    """Paths the rows name: {file} an ordinary file, {dir} a directory, {so} a shared library that is not ttsim."""
    (tmp_path / "file").write_text("not a directory\n")
    (tmp_path / "dir").mkdir()
    so = tmp_path / "other.so"
    src = tmp_path / "other.c"
    src.write_text(NOT_TTSIM)
    built = subprocess.run(["cc", "-shared", "-o", str(so), str(src)], capture_output=True).returncode == 0
    (tmp_path / "script.py").write_text("print('ok')\n")
    return {"file": str(tmp_path / "file"), "dir": str(tmp_path / "dir"), "so": str(so) if built else None,
            "script": str(tmp_path / "script.py"), "tmp": str(tmp_path)}


@pytest.fixture
def clean_env(monkeypatch):
    for k in KNOBS:
        monkeypatch.delenv(k, raising=False)
    return monkeypatch


# ---------------------------------------------------------------------------------- knobs at device open
# (environment, device string, what the message says)
OPEN_ROWS = [
    ({"TT_ERR_BUDGET": "abc"}, "TT", r"TT_ERR_BUDGET='abc': expected a positive relative error such as 1e-3"),
    ({"TT_ERR_BUDGET": "-1"}, "TT", r"TT_ERR_BUDGET='-1': expected a positive relative error"),
    ({"TT_ERR_BUDGET": "0"}, "TT", r"TT_ERR_BUDGET='0': expected a positive relative error"),
    ({"TT_ERR_BUDGET": "inf"}, "TT", r"TT_ERR_BUDGET='inf': expected a positive relative error"),
    ({"TT_ERR_BUDGET": "nan"}, "TT", r"TT_ERR_BUDGET='nan': expected a positive relative error"),
    ({"TT_BUDGET_SAMPLED": "maybe"}, "TT", r"TT_BUDGET_SAMPLED='maybe': expected 1"),
    ({"TT_SFPU_MACRO": "2"}, "TT", r"TT_SFPU_MACRO='2': expected 1 \(SFPLOADMACRO schedules"),
    ({"TT_CORES": "0"}, "TT", r"TT_CORES='0': expected a positive integer"),
    ({"TT_CORES": "-3"}, "TT", r"TT_CORES='-3': expected a positive integer"),
    ({"TT_CORES": "two"}, "TT", r"TT_CORES='two': expected a positive integer"),
    ({"TT_BACKEND": "nope"}, "TT", r"TT_BACKEND='nope' is not one of emu, ttsim, umd-sim, hw"),
    ({"TT_TIMEOUT": "abc"}, "TT", r"TT_TIMEOUT='abc': expected a positive number of seconds"),
    ({"TT_TIMEOUT": "0"}, "TT", r"TT_TIMEOUT='0': expected a positive number of seconds"),
    ({"TT_TIMEOUT": "-5"}, "TT", r"TT_TIMEOUT='-5': expected a positive number of seconds"),
    ({"TT_CHECK": "maybe"}, "TT", r"TT_CHECK='maybe': expected 1 \(measure each kernel's error against float32\) or 0"),
    ({"TT_DUMP": "{file}"}, "TT", r"TT_DUMP='.*/file' is a file; it must name a directory"),
    ({"DEVICE": "TT", "DEV": "CPU"}, "TT", r"DEVICE=TT and DEV=CPU disagree.*Unset one of them"),
    ({}, "TT:nope", r"device 'TT:nope': expected TT, TT:<n>, TT:<target> or TT:<target>:<n> with a target of emu, ttsim, umd-sim, hw"),
    ({"TT_BACKEND": "ttsim"}, "TT", r"TT_BACKEND=ttsim needs TT_SIMULATOR=/path/to/libttsim.so"),
    ({"TT_SIMULATOR": "/nonexistent/libttsim.so"}, "TT",
     r"ttsim library '/nonexistent/libttsim.so' does not exist: build tenstorrent/ttsim"),
    ({"TT_SIMULATOR": "{dir}"}, "TT", r"ttsim library '.*/dir' is a directory: build tenstorrent/ttsim"),
    ({"TT_SIMULATOR": "{file}"}, "TT", r"cannot start ttsim from .*/file: .*not a ttsim library: .*file too short\. "
                                       r"TT_SIMULATOR must name a Blackhole build"),
    ({"TT_SIMULATOR": "{so}"}, "TT", r"cannot start ttsim from .*other\.so: .*undefined symbol: libttsim_init\. "
                                     r"TT_SIMULATOR must name a Blackhole build"),
]


def _fill(value: str, files: dict) -> str:
    return value.format(**files)


@pytest.mark.parametrize("env, device, says", OPEN_ROWS, ids=[f"{d} {e}" for e, d, _ in OPEN_ROWS])
def test_bad_knob_at_device_open(clean_env, files, env, device, says):
    if "{so}" in env.values() and files["so"] is None:
        pytest.skip("no host C compiler to build a non-ttsim shared library")
    for k, v in env.items():
        clean_env.setenv(k, _fill(v, files))
    with pytest.raises(TTError, match=says):
        TTDevice(device)


# ------------------------------------------------------------------------------- knobs read by a kernel's compile
_n = itertools.count(1)

COMPILE_ROWS = [
    ({"TT_PLACE": "n99=SFPU"}, r"TT_PLACE pins n99 but kernel E_4_8 has no such op node \(its op nodes: n\d"),
    ({"TT_PLACE": "n2=GPU"}, r"TT_PLACE: engine 'GPU' is not SFPU or FPU"),
    ({"TT_PLACE": "nonsense"}, r"TT_PLACE: 'nonsense' is not node=ENGINE\[:fidelity\]"),
    ({"TT_PLACE": "MUL=FPU:HiFi9"}, r"TT_PLACE: 'HiFi9' is neither a fidelity \(LoFi, HiFi2, HiFi3, HiFi4\) nor formats"),
    ({"TT_SAMPLE_DIST": "gauss"}, r"TT_SAMPLE_DIST: 'gauss' unknown; expected a comma list of normal, uniform, positive"),
]


@pytest.mark.needs_cc
@pytest.mark.parametrize("env, says", COMPILE_ROWS, ids=[str(e) for e, _ in COMPILE_ROWS])
def test_bad_knob_at_kernel_compile(clean_env, env, says):
    a = Tensor(np.ones((4, 8), np.float32), device="TT")
    for k, v in env.items():
        clean_env.setenv(k, v)
    with pytest.raises(TTError, match=says):
        (a * a + next(_n)).realize()          # a new constant: a kernel tinygrad has not compiled yet


@pytest.mark.needs_cc
def test_cache_dir_naming_a_file_costs_one_warning(clean_env, files):
    clean_env.setenv("TT_CACHE_DIR", files["file"])
    clean_env.setattr(cc, "_unusable_warned", False)
    x, k = np.arange(8, dtype=np.float32), next(_n)
    with pytest.warns(TTWarning, match=r"TT compile cache .*/file cannot be used \(Not a directory\): kernels are "
                                       r"compiled but not cached") as rec:
        got = (Tensor(x, device="TT") * 3 + k).numpy()
    # (counted among the backend's own warnings: another test's object collected inside the block may add its own)
    seen = [f"{w.category.__name__}: {w.message}" for w in rec]
    assert sum(issubclass(w.category, TTWarning) for w in rec) == 1, seen
    np.testing.assert_array_equal(got, x * 3 + k)
    assert Path(files["file"]).read_text() == "not a directory\n"


# -------------------------------------------------------------------------------------------- the command line
# (arguments, what stderr says)
CLI_ROWS = [
    ([], r"the following arguments are required: cmd"),
    (["frobnicate"], r"invalid choice: 'frobnicate'"),
    (["info", "extra"], r"unrecognized arguments: extra"),
    (["demo", "--seed", "abc"], r"argument --seed: invalid int value: 'abc'"),
    (["tune", "{tmp}/missing.py"], r"tune: script '.*/missing\.py' not found"),
    (["tune", "{script}", "--budgets", "abc"], r"--budgets: 'abc' is not a positive relative error \(e\.g\. 1e-3\)"),
    (["tune", "{script}", "--budgets", "1e-3,-1"], r"--budgets: '-1' is not a positive relative error"),
    (["tune", "{script}", "--out", "{file}"], r"tune: --out '.*/file' is a file; give a directory"),
    (["tune", "{script}", "--png", "{tmp}/no/such/dir/p.png"], r"tune: --png .*: directory '.*/no/such/dir' does not exist"),
    (["bench", "gpu"], r"argument name: invalid choice: 'gpu' \(choose from 'emu', 'sfpu-matmul', 'same-elf', "
                       r"'matmul-budget', 'kernels', 'predictions', 'build'\)"),
    (["bench", "emu", "nope"], r"unknown kernel\(s\) nope: choose from riscv, sfpu, "),
    (["bench", "same-elf", "--repeat", "x"], r"bench same-elf: error: argument --repeat: invalid int value: 'x'"),
    (["cache"], r"one of the arguments --info --clear is required"),
    (["cache", "--info", "--clear"], r"argument --clear: not allowed with argument --info"),
]


@pytest.mark.parametrize("argv, says", CLI_ROWS, ids=[" ".join(a) or "(none)" for a, _ in CLI_ROWS])
def test_bad_command_line(capsys, files, argv, says):
    with pytest.raises(SystemExit) as e:
        cli.main([_fill(a, files) for a in argv])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "Traceback" not in err
    assert len([ln for ln in err.splitlines() if ln.strip() and not ln.startswith(("usage:", " "))]) == 1, err
    assert re.search(says, err), err


def test_a_tterror_in_a_command_is_its_message_and_status_2(clean_env, capsys):
    clean_env.setenv("TT_ERR_BUDGET", "abc")
    assert cli.main(["demo"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: TT_ERR_BUDGET='abc'") and "Traceback" not in err


def test_no_traceback_from_a_real_process(files):
    r = subprocess.run([sys.executable, "-m", "tt_backend", "tune", "nope.py"], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr and "tune: script 'nope.py' not found" in r.stderr


# ----------------------------------------------------------------------------------------------------- bundles

def _bundle(meta, body: bytes = b"") -> bytes:
    head = meta if isinstance(meta, bytes) else json.dumps(meta).encode()
    return MAGIC + struct.pack("<I", len(head)) + head + body


LAUNCH = {"name": "k", "args": [{"buf": 0}, 7], "cores": {"brisc": [0, 4]}}
GOOD = {"name": "k", "launches": [LAUNCH], "outs": [0], "scratch": [],
        "buffers": [{"slot": 0, "dtype": "float32", "nbytes": 64}]}


def _launch(**kw) -> dict:
    """GOOD with its one launch changed (None: the key dropped)."""
    launch = {k: v for k, v in {**LAUNCH, **kw}.items() if v is not None}
    return {**GOOD, "launches": [launch]}


BUNDLE_ROWS = [
    (b"\x7fELF....", r"not a TT kernel bundle \(was this PROGRAM compiled by the TT backend\?\)"),
    (MAGIC + b"\x01", r"damaged TT kernel bundle \(error: unpack_from requires a buffer"),
    (_bundle(b"{not json"), r"damaged TT kernel bundle \(JSONDecodeError"),
    (_bundle([1, 2]), r"damaged TT kernel bundle \(TypeError: list indices must be integers"),
    (_bundle(_launch(cores=None)), r"damaged TT kernel bundle \(KeyError: 'cores'\)"),
    (_bundle(_launch(cores=[[0, 4]]), b"\0" * 4), r"damaged TT kernel bundle \(AttributeError: 'list' object"),
    (_bundle({**GOOD, "outs": 0}, b"\0" * 4), r"damaged TT kernel bundle \('outs' missing or not a list\)"),
    (_bundle({**GOOD, "launches": []}), r"damaged TT kernel bundle \(no launch\)"),
    (_bundle(_launch(cores={"gpu": [0, 4]}), b"\0" * 4), r"cores \['gpu'\] are not a subset of"),
    (_bundle(GOOD, b"\0\0"), r"damaged TT kernel bundle \(an ELF is cut short\)"),
    (_bundle(_launch(args=[{"buf": 3}]), b"\0" * 4), r"an argument is neither a word nor a buffer or scratch index"),
    (_bundle(_launch(args=[{"scratch": 0}]), b"\0" * 4), r"an argument is neither a word nor a buffer or scratch index"),
    (_bundle({**GOOD, "scratch": [0]}, b"\0" * 4), r"a scratch size is not a positive int"),
    (_bundle(_launch(tile_args=[7, 8]), b"\0" * 4), r"damaged TT kernel bundle \(bad 'tile_args'\)"),
    (_bundle(_launch(tile_args=[[7], [{"buf": 2}]]), b"\0" * 4), r"an argument is neither a word nor a buffer"),
    (_bundle({**GOOD, "buffers": [{"dtype": "float32"}]}, b"\0" * 4), r"a buffer lacks its slot or size"),
]


@pytest.mark.parametrize("lib, says", BUNDLE_ROWS, ids=[f"bundle{i}" for i in range(len(BUNDLE_ROWS))])
def test_bad_bundle(lib, says):
    from tinygrad import Device
    with pytest.raises(TTError, match=says) as e:
        TTProgram(Device["TT"], TinyELF(lib, "E_bad", Device["TT"].renderer.target, ()))
    if "damaged" in says:
        assert "Compile the kernel again" in str(e.value)


def test_a_bundle_whose_elf_is_garbage_fails_at_launch_with_a_message():
    from tinygrad import Device
    from tinygrad.device import Buffer
    from tinygrad.dtype import dtypes
    prg = TTProgram(Device["TT"], TinyELF(_bundle(GOOD, b"\x7fEL\x01"), "E_bad", Device["TT"].renderer.target, ()))
    buf = Buffer("TT", 16, dtypes.float32).ensure_allocated()
    with pytest.raises(TTError, match=r"not a loadable ELF image .*the kernel bundle is damaged; recompile the kernel"):
        prg(buf._buf)
