"""The speed layer's compiled part: C sources beside this module, built once with the host C compiler (cc, or $CC)
into the cache directory, keyed by the content of the source and the local files it includes, the compiler and the
flags, and loaded with ctypes or, built against Python's headers, as a CPython extension module (load_extension: a
call without ctypes' per-call cost, for the parts called once per instruction).

Only where a measurement showed numpy cannot reach the speed: MVMUL runs (mvmul_native.c, fpu_math.mvmul19_batch's
numerics in C, 25 % of a bf16 256^3 matmul's host time in numpy). The Python path stays and is the reference: the
equality tests pin the compiled one against it bit for bit, and without a host compiler the emulator runs the Python
path (`python -m tt_backend info` says which runs, and why). `scripts/install.sh` builds it at install time.
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import importlib.machinery
import importlib.util
import os
import re
import shutil
import subprocess
import sysconfig
import tempfile
from pathlib import Path

import numpy as np

from tt_backend.chip.errors import EmuUndefined, EmuUnimplemented
from tt_backend.chip.numerics import fpu_math as fm
from tt_backend.templates.environment import cache_dir

SOURCE = Path(__file__).with_name("mvmul_native.c")
FLAGS = ("-O3", "-shared", "-fPIC", "-std=c99")


def host_compiler() -> str | None:
    """$CC if set, else the first of cc, clang, gcc on PATH."""
    if os.environ.get("CC"):
        return shutil.which(os.environ["CC"])
    return next((p for p in map(shutil.which, ("cc", "clang", "gcc")) if p), None)


def _flags(include: tuple[str, ...]) -> tuple[str, ...]:
    return FLAGS + tuple(f"-I{d}" for d in include)


def _text_with_includes(source: Path) -> bytes:
    """The source and the local files it includes (`#include "name"`, beside it), for the cache key."""
    text = source.read_bytes()
    return text + b"".join(_text_with_includes(source.with_name(name.decode()))
                           for name in re.findall(rb'^#include "([^"]+)"', text, re.M))


def library_path(cc: str, source: Path = SOURCE, include: tuple[str, ...] = ()) -> Path:
    key = hashlib.sha256(_text_with_includes(source) + cc.encode() + " ".join(_flags(include)).encode()
                         ).hexdigest()[:20]
    return cache_dir() / "native" / f"{source.stem.removesuffix('_native')}_{key}.so"


def build(source: Path = SOURCE, include: tuple[str, ...] = ()) -> Path:
    """The library for `source` (a C file beside this module) and the host compiler, compiled unless the cache has it;
    `include`: header directories (a CPython extension module's: Python's own). Raises OSError naming the reason."""
    cc = host_compiler()
    if cc is None:
        raise OSError("no host C compiler (cc, clang or gcc; or set CC)")
    out = library_path(cc, source, include)
    if out.is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=f".{out.stem}.", suffix=".so")
    os.close(fd)
    try:
        try:
            r = subprocess.run([cc, *_flags(include), "-o", tmp, str(source)], capture_output=True, text=True,
                               timeout=120)
        except subprocess.TimeoutExpired:
            raise OSError(f"{cc} did not finish {source.name} in 120 s") from None
        if r.returncode:
            raise OSError(f"{cc} failed on {source.name}: {r.stderr.strip()[:500]}")
        os.replace(tmp, out)            # atomic: concurrent builders publish the same bytes
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return out


def load_extension(source: Path, name: str):
    """The CPython extension module `name` built from `source` (a C file beside this module) against this Python's
    headers: (the module, its path). Raises OSError naming the reason it cannot be built."""
    include = sysconfig.get_paths()["include"]
    if not os.path.isfile(os.path.join(include, "Python.h")):
        raise OSError(f"no Python.h in {include} to build the C part against")
    path = build(source, (include,))
    loader = importlib.machinery.ExtensionFileLoader(name, str(path))
    try:
        mod = importlib.util.module_from_spec(importlib.util.spec_from_file_location(name, path, loader=loader))
        loader.exec_module(mod)
    except ImportError as e:    # built but not loadable here (an unresolved symbol, an unsupported ifunc): the fallback
        raise OSError(f"{path} does not load: {e}") from e
    return mod, path


@functools.lru_cache(maxsize=None)
def _load() -> tuple[object | None, str]:
    """(the mvmul_steps function or None, what `info` says about it)."""
    try:
        path = build()
        fn = ctypes.CDLL(str(path)).mvmul_steps
    except (OSError, AttributeError) as e:       # AttributeError: built, but without the exported mvmul_steps
        return None, f"Python (numpy) path: the C part is unavailable: {e}"
    fn.restype = None
    ptr, u32, i32 = ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int32
    fn.argtypes = [ptr, ptr, u32, u32, ptr, ptr, i32, ptr]     # srca, srcb, mask_a, mask_b, phase, slot, steps, dst
    return fn, f"C ({path})"


def status() -> str:
    """Which MVMUL path the emulator runs, for `python -m tt_backend info`."""
    return _load()[1]


def mvmul_steps(srca: np.ndarray, srcb: np.ndarray, fa: int, fb: int, phases, slots,
                dst: np.ndarray) -> np.ndarray | None:
    """fpu_math.mvmul19_batch(src19(srca, fa), src19(srcb, fb), phases, slots, dst) with fp32_acc and exp8 in C, as
    plain uint32 words (srca (S, 16, 16) and srcb (S, 8, 16) Src words, dst (U, 8, 16)); None when the C part is
    unavailable. Formats read with a 5-bit exponent are the numpy path's (the C part has the 8-bit exponent rules)."""
    fn = _load()[0]
    if fn is None:
        return None
    if fa in fm.FMT_5BIT_EXP or fb in fm.FMT_5BIT_EXP:
        raise EmuUnimplemented(f"mvmul_steps: Src formats {fa}, {fb}: the C part computes 8-bit-exponent products "
                               "only")
    a = np.ascontiguousarray(srca, np.uint32)
    b = np.ascontiguousarray(srcb, np.uint32)
    p = np.ascontiguousarray(phases, np.int32)
    s = np.ascontiguousarray(slots, np.int32)
    out = np.array(dst, np.uint32, order="C")
    if a.shape[1:] != (16, 16) or b.shape[1:] != (8, 16) or out.shape[1:] != (8, 16) or not (
            a.shape[0] == b.shape[0] == p.size == s.size) or (s.size and not 0 <= s.min() <= s.max() < out.shape[0]):
        raise EmuUndefined(f"mvmul_steps: shapes a {a.shape}, b {b.shape}, dst {out.shape}, {p.size} phases, "
                         f"{s.size} slots do not fit")
    fn(a.ctypes.data, b.ctypes.data, fm.src19_mask(fa), fm.src19_mask(fb), p.ctypes.data, s.ctypes.data, s.size,
       out.ctypes.data)
    return out
