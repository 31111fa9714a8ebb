"""Registration: the import hook, DEVICE/DEV mapping, the spawn-worker trap, and real installs into fresh venvs.

The install tests (`slow`) copy the project to a temp dir, create a fresh venv, make this interpreter's dependencies
visible to it (a venv made from a venv does not see the parent's site-packages, even with --system-site-packages), run
`pip install .` or `pip install -e .`, and check in fresh interpreters that `DEVICE=TT` and `DEV=TT` select the TT
device and that the finder serves `tinygrad.runtime.ops_tt`.
"""
import os
import pickle
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import REPO_ROOT

SHOW_DEFAULT = "from tinygrad import Device; print(Device.DEFAULT)"


def run_py(python, code, env_extra=None, drop=("DEV", "DEVICE"), pythonpath=None, cwd=None):
    env = {k: v for k, v in os.environ.items() if k not in drop and k != "PYTHONPATH"}
    if pythonpath: env["PYTHONPATH"] = str(pythonpath)
    env.update(env_extra or {})
    return subprocess.run([str(python), "-c", code], env=env, capture_output=True, text=True, timeout=300,
                          cwd=cwd or "/")


# --------------------------------------------------------------------------------- knobs (no subprocess needed)

def test_device_env_mapping():
    from tt_backend import knobs
    env = {"DEVICE": "TT"}
    assert knobs.map_device_env(env) is None and env["DEV"] == "TT"
    env = {"DEVICE": "tt", "DEV": "TT:XYZ"}
    assert knobs.map_device_env(env) is None and env["DEV"] == "TT:XYZ"       # same device, DEV kept
    env = {"DEVICE": "TT", "DEV": "CPU"}
    assert "disagree" in knobs.map_device_env(env) and env["DEV"] == "CPU"
    env = {"DEVICE": "cuda", "DEV": "CPU"}
    assert knobs.map_device_env(env) is None and env["DEV"] == "CPU"          # not ours: DEVICE means something else
    env = {"DEVICE": "cuda"}
    assert knobs.map_device_env(env) is None and "DEV" not in env


def test_backend_knob():
    from tt_backend.chip.errors import TTError
    from tt_backend import knobs
    assert knobs.backend({}) == "emu"
    assert knobs.backend({"TT_SIMULATOR": "/x/libttsim.so"}) == "ttsim"
    assert knobs.backend({"TT_BACKEND": "HW"}) == "hw"
    with pytest.raises(TTError, match="not one of"):
        knobs.backend({"TT_BACKEND": "gpu"})
    with pytest.raises(TTError):
        knobs.err_budget({"TT_ERR_BUDGET": "-1"})
    assert knobs.err_budget({"TT_ERR_BUDGET": "1e-3"}) == 1e-3 and knobs.cores({"TT_CORES": "4"}) == 4


def test_dram_arena_merges_and_aligns():
    from tt_backend.ops_tt import BUFFER_ALIGN, DramArena
    assert BUFFER_ALIGN == 8 * 4096                       # a buffer starts on a page of bank 0 (chip/interleave.py)
    a = DramArena(0x8000, 0x8000 + 4 * 0x8000)
    x, y, z = a.alloc(1), a.alloc(0x8001), a.alloc(64)
    assert (x, y, z) == (0x8000, 0x10000, 0x20000) and all(v % BUFFER_ALIGN == 0 for v in (x, y, z))
    a.free(y)
    assert a.alloc(0x10000) == 0x10000                    # first fit reuses the hole
    a.free(x); a.free(0x10000); a.free(z)
    assert a.free_list == [[0x8000, 0x20000]] and a.bytes_used == 0
    with pytest.raises(MemoryError):
        a.alloc(0x20001)


def test_bundle_roundtrip():
    from tt_backend.lowering.index import IndexExpr
    from tt_backend.lowering.families.elementwise import ElementwisePlan
    from tt_backend.lowering.plan import Buffer, SfpuProgram, Stream
    from tt_backend.ops_tt import pack_bundle, unpack_bundle
    plan = ElementwisePlan("E_4", (4,), [Buffer(0, "float32", 16), Buffer(1, "float32", 16)],
                      [Stream(1, "float32", IndexExpr.range_var(0), None, True)],
                      Stream(0, "float32", IndexExpr.range_var(0), None, True),
                      SfpuProgram([], [1], 2, 1))
    meta, elfs = unpack_bundle(pack_bundle(plan, [{"brisc": b"\x7fELF-a", "ncrisc": b"\x7fELF-bb"}]))
    assert elfs == [{"brisc": b"\x7fELF-a", "ncrisc": b"\x7fELF-bb"}]
    head = [plan.n_tiles, plan.n_elements, {"buf": 0}, {"buf": 1}]
    assert meta["launches"][0]["args"] == head + [0, 1] and "tile_args" not in meta["launches"][0]   # all tiles
    assert meta["scratch"] == [] and meta["outs"] == [0]
    plan.cores = 2                                       # split: one argument block per tile
    meta, _ = unpack_bundle(pack_bundle(plan, [{"brisc": b"\x7fELF-a"}]))
    assert meta["launches"][0]["tile_args"] == [head + [0, 1], head + [1, 1]]
    assert [b["slot"] for b in meta["buffers"]] == [0, 1]


# ------------------------------------------------------------------------------ the hook from a source checkout

def test_source_checkout_device_selection():
    code = "import tt_backend\n" + SHOW_DEFAULT + "\nprint(Device.get_class('TT').__module__)"
    for var in ("DEVICE", "DEV"):
        r = run_py(sys.executable, code, {var: "TT"}, pythonpath=REPO_ROOT)
        assert r.returncode == 0, r.stderr
        assert r.stdout.split() == ["TT", "tt_backend.ops_tt"]


def test_conflicting_device_vars_raise_on_import():
    r = run_py(sys.executable, "import tt_backend\nimport tinygrad", {"DEVICE": "TT", "DEV": "CPU"},
               pythonpath=REPO_ROOT)
    assert r.returncode != 0 and "TTError" in r.stderr and "disagree" in r.stderr


def test_spawned_worker_gets_the_hook():
    """tinygrad pickles the renderer into spawn workers: unpickling alone must install the to_program hook."""
    import tt_backend.ops_tt as ops_tt
    from tinygrad.helpers import Target
    blob = pickle.dumps(ops_tt.TTRenderer(Target(device="TT")))
    code = ("import pickle, sys\nr = pickle.loads(sys.stdin.buffer.read())\nimport tinygrad.codegen as c\n"
            "print(type(r).__name__, getattr(c.do_to_program, '__tt_hook__', False))")
    env = {k: v for k, v in os.environ.items() if k not in ("DEV", "DEVICE")}
    env["PYTHONPATH"] = str(REPO_ROOT)
    r = subprocess.run([sys.executable, "-c", code], input=blob, env=env, capture_output=True, timeout=120, cwd="/")
    assert r.returncode == 0, r.stderr.decode()
    assert r.stdout.decode().split() == ["TTRenderer", "True"]


def test_hook_leaves_other_renderers_alone():
    import tinygrad.codegen as c
    import tt_backend.ops_tt  # noqa: F401
    assert c.do_to_program.__tt_hook__ and not getattr(c.do_to_program.__wrapped__, "__tt_hook__", False)


def test_unavailable_backends_are_clear_errors():
    code = "from tinygrad import Device\nDevice['TT']"
    r = run_py(sys.executable, "import tt_backend\n" + code, {"DEV": "TT", "TT_BACKEND": "hw"}, pythonpath=REPO_ROOT)
    # no tt-umd here (or no card): the error says what to install / what is missing
    assert r.returncode != 0 and "TTError" in r.stderr
    assert "pip install tt-umd" in r.stderr or "no Blackhole card found" in r.stderr


# ------------------------------------------------------------------------------------- real installs (slow)

def _install_requires() -> list[str]:
    """setup.cfg's install_requires (the source of truth, whatever this interpreter has installed)."""
    import configparser
    cfg = configparser.ConfigParser()
    cfg.read(REPO_ROOT / "setup.cfg")
    return [line for line in cfg["options"]["install_requires"].splitlines() if line.strip()]


def _deps_dir(tmp: Path) -> Path:
    """A directory of symlinks to the installed files of every distribution the project requires (transitively, from
    this interpreter's installs): exactly the dependencies, and not this project's own (editable) install or the pip
    and setuptools that share their site directory."""
    import importlib.metadata as md
    from packaging.requirements import Requirement
    todo, dists = [Requirement(r).name for r in _install_requires()], {}
    while todo:
        name = todo.pop()
        if name.lower() in dists:
            continue
        dist = dists[name.lower()] = md.distribution(name)
        for r in map(Requirement, dist.requires or []):
            if r.marker is None or r.marker.evaluate({"extra": ""}):
                todo.append(r.name)
    out = tmp / "deps"
    out.mkdir()
    for dist in dists.values():
        tops = {f.parts[0] for f in dist.files or [] if f.parts[0] != ".."}
        for top in tops:
            src = Path(dist.locate_file(top))
            if src.exists() and not (out / top).exists():
                (out / top).symlink_to(src)
    return out


def _fresh_venv(tmp: Path) -> Path:
    # An isolated venv (no --system-site-packages: a tt_backend.pth installed system-wide would be processed there and
    # hide what this install does). The dependencies come in as a plain path entry: a .pth listing a directory adds it
    # to sys.path without processing the .pth files inside it.
    subprocess.run([sys.executable, "-m", "venv", str(tmp / "venv")], check=True, timeout=300)
    py = tmp / "venv" / "bin" / "python"
    site = run_py(py, "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip()
    (Path(site) / "_tt_test_deps.pth").write_text(f"{_deps_dir(tmp)}\n")
    assert run_py(py, "import tinygrad, numpy, matplotlib").returncode == 0, "dependencies not visible in the fresh venv"
    return py


def _project_copy(tmp: Path) -> Path:
    src = tmp / "src"
    shutil.copytree(REPO_ROOT, src, ignore=shutil.ignore_patterns(".git", "build", "*.egg-info", "__pycache__",
                                                                  "tt_dump", ".pytest_cache", "tests"))
    return src


@pytest.mark.slow
@pytest.mark.parametrize("editable", [False, True], ids=["install", "editable"])
def test_pip_install_registers_device(tmp_path, editable):
    py, src = _fresh_venv(tmp_path), _project_copy(tmp_path)
    cmd = [str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check"] + (["-e"] if editable else []) + [str(src)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    site = Path(run_py(py, "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip())
    assert (site / "tt_backend.pth").read_text() == (REPO_ROOT / "tt_backend" / "tt_backend.pth").read_text()

    for var in ("DEVICE", "DEV"):
        r = run_py(py, SHOW_DEFAULT, {var: "TT"})
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip() == "TT", (var, r.stdout, r.stderr)
    where = run_py(py, "import tinygrad.runtime.ops_tt as m, tt_backend; print(m.__name__, m.TTDevice.__module__, "
                       "tt_backend.__file__)", {"DEV": "TT"})
    assert where.returncode == 0, where.stderr
    name, module, file = where.stdout.split()
    assert (name, module) == ("tt_backend.ops_tt", "tt_backend.ops_tt")
    assert Path(file).resolve().is_relative_to((src if editable else site).resolve())
    # installed package data: the ISA table and every template (kernel templates and the blocks they import) come along
    r = run_py(py, "from tt_backend.chip import isa; import tt_backend.templates as r; print(len(isa.INSTRUCTIONS) > 0, "
                   "*sorted(p.relative_to(r.TEMPLATE_DIR).as_posix() for p in r.TEMPLATE_DIR.rglob('*.j2')))")
    assert r.stdout.split() == ["True", *sorted(p.relative_to(REPO_ROOT / "templates").as_posix()
                                                for p in (REPO_ROOT / "templates").rglob("*.j2"))], r.stderr
    if editable:   # a source tree removed without uninstalling: other programs start without a traceback from our hook
        src.rename(tmp_path / "moved")
        r = run_py(py, "print('started')")
        assert (r.returncode, r.stdout.strip(), r.stderr) == (0, "started", ""), r.stderr
        (tmp_path / "moved").rename(src)
    # the conflict check, and a clean uninstall
    r = run_py(py, "import tinygrad", {"DEVICE": "TT", "DEV": "CPU"})
    assert r.returncode != 0 and "disagree" in r.stderr
    r = subprocess.run([str(py), "-m", "pip", "uninstall", "-y", "-q", "tt-backend"], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    assert not (site / "tt_backend.pth").exists()
    assert run_py(py, SHOW_DEFAULT, {"DEVICE": "TT"}).stdout.strip() != "TT"


# ------------------------------------------------------------------------------ the device itself (needs a compiler)

@pytest.mark.needs_cc
def test_device_debug_output_dump_and_errors(tmp_path):
    code = ("import tt_backend, numpy as np\nfrom tinygrad import Tensor, dtypes\n"
            "x = np.linspace(-2, 2, 300, dtype=np.float32).reshape(3, 100)\n"
            "y = ((Tensor(x) * 3 + 1).maximum(0.5)).numpy()\n"
            "assert np.array_equal(y, np.maximum((x.astype(np.float64) * 3 + 1).astype(np.float32), np.float32(0.5))), 'wrong result (x*3+1 is one fused multiply-add)'\n"
            "try:\n  Tensor(x).half().bitcast(dtypes.short).numpy()\nexcept Exception as e:\n  print('RAISED', type(e).__name__, e)\n")
    r = run_py(sys.executable, code, {"DEV": "TT", "DEBUG": "4", "TT_DUMP": str(tmp_path)}, pythonpath=REPO_ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "// ===== brisc =====" in r.stdout                      # DEBUG=4: the rendered C
    assert any("*** TT" in l and "E_3_100" in l and " tm " in l for l in r.stdout.splitlines())  # DEBUG=2: timing
    assert "RAISED UnsupportedOp" in r.stdout and "BITCAST" in r.stdout   # no silent CPU fallback
    (d,) = [p for p in tmp_path.iterdir() if p.name.startswith("E_3_100")]
    names = {p.name for p in d.iterdir()}
    assert {"report.json", "report.txt", "brisc.c", "brisc.elf", "brisc.dis", "trisc1.elf", "args.h"} <= names
    import json
    rep = json.loads((d / "report.json").read_text())
    assert [p["engine"] for p in rep["placement"]] == ["SFPU"] * len(rep["ops"]) and rep["ops"][:3] == ["MUL", "ADD", "MAX"]
    assert rep["instructions"]["sfpu_total"] > 0


def test_cli_info():
    r = subprocess.run([sys.executable, "-m", "tt_backend", "info"], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(REPO_ROOT)}, cwd="/")
    assert r.returncode == 0, r.stderr
    assert "tinygrad" in r.stdout and "0.14.0" in r.stdout and "RISC-V compiler" in r.stdout


@pytest.mark.needs_cc
def test_cli_demo(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DEV", "DEVICE")}
    env.update(PYTHONPATH=str(REPO_ROOT), DEVICE="TT", TT_DUMP=str(tmp_path))
    r = subprocess.run([sys.executable, "-m", "tt_backend", "demo"], capture_output=True, text=True, timeout=900,
                       env=env, cwd="/")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "max abs error" in r.stdout and "placement (" in r.stdout and r.stdout.rstrip().endswith("OK")


TUNE_SNIPPET = ("import numpy as np\nfrom tinygrad import Tensor\n"
                "a = Tensor(np.linspace(-1, 1, 2048, dtype=np.float32), device='TT').realize()\n"
                "(a * a + 1).realize()\n")


@pytest.mark.slow
@pytest.mark.needs_cc
def test_wheel_runs_outside_the_source_tree(tmp_path):
    """A wheel (what `pip install tt-backend` would get) installed into a fresh venv: info, the demo and tune's plot
    work from another directory with no PYTHONPATH and a fresh compile cache, i.e. from the installed files alone."""
    import zipfile
    py, src = _fresh_venv(tmp_path), _project_copy(tmp_path)
    wheels = tmp_path / "wheels"
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(src)],
                       capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    (whl,) = wheels.glob("tt_backend-*.whl")
    with zipfile.ZipFile(whl) as z:
        names = set(z.namelist())
        meta = z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "tt_backend.pth" in names and "tt_backend/templates/blocks/cb.c.j2" in names
    # one import namespace: nothing but tt_backend (and the hook) at the top of site-packages
    assert {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")} == {"tt_backend", "tt_backend.pth"}
    assert {"tt_backend/lowering/select.py", "tt_backend/runtime/emu/tile.py", "tt_backend/chip/isa/tensix_isa.json",
            "tt_backend/templates/device/tt_kernel.h", "tt_backend/templates/crt0.S"} <= names
    assert "Requires-Dist: matplotlib" in meta           # tune's plot comes with the default install
    r = subprocess.run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(whl)],
                       capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]

    away = tmp_path / "elsewhere"
    away.mkdir()

    def cli(*args):
        env = {k: v for k, v in os.environ.items() if k not in ("DEV", "DEVICE", "PYTHONPATH", "TT_DUMP")}
        env.update(DEVICE="TT", TT_CACHE_DIR=str(tmp_path / "cache"))
        r = subprocess.run([str(py), "-m", "tt_backend", *args], capture_output=True, text=True, timeout=900,
                           cwd=away, env=env)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        return r.stdout

    info = dict(re.split(r"\s{2,}", line, maxsplit=1) for line in cli("info").splitlines() if line.strip())
    site = run_py(py, "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip()
    assert info["tt_backend"].endswith(f"({Path(site) / 'tt_backend'})"), info["tt_backend"]
    assert info["compile cache"].startswith(str(tmp_path / "cache"))
    from tt_backend.chip import layout
    assert info["L1"].startswith(f"{layout.L1_SIZE // 1024} KiB per tile") and "140 Tensix tiles (14 x 10" in \
        info["chip model"]
    assert info["DRAM"].startswith(f"8 banks of {layout.DRAM_BANK_SIZE / 2**30:g} GiB")
    demo = cli("demo")
    assert "max abs error" in demo and demo.rstrip().endswith("OK")
    assert any((tmp_path / "cache").glob("*.elf"))      # compiled here, from the installed templates
    cli("tune", "-c", TUNE_SNIPPET, "--budgets", "none", "--out", str(away / "tune"))
    assert (away / "tune" / "tune.png").stat().st_size > 10_000 and (away / "tune" / "tune.md").exists()
