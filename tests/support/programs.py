"""The one build of the bare-metal test programs in tests/programs.

Every program is `tests/programs/crt0.S` + its C source, linked with `tests/programs/link.ld` for one core: image at
layout.IMAGE_SLOT[core], stack at layout.STACK_TOP[core], status block at layout.status_addr(core). The include path is
tests/programs (tt.h) and the source's own folder (e.g. tile/tile_test.h). ELFs are cached by content hash.
Tests that build programs carry the `needs_program_cc` marker (tests/conftest.py skips them without the compiler).
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from tt_backend.chip import layout
from tt_backend.chip.errors import CompilerNotFound, TTError

from tests.support import REPO_ROOT

PROGRAMS = REPO_ROOT / "tests" / "programs"
CC = os.environ.get("TT_RISCV_CC", "riscv64-unknown-elf-gcc")
CFLAGS = ["-mabi=ilp32", "-nostdlib", "-ffreestanding", "-O2", "-Wall",
          "--param=min-pagesize=0"]  # GCC 12: low L1 addresses are not NULL-page accesses
_CACHE = Path(tempfile.gettempdir()) / f"tt_test_programs_{os.getuid()}"


def have_compiler() -> bool:
    return shutil.which(CC) is not None


def build(src: str, core: str = "brisc", *, defines: dict[str, object] | None = None, march: str = "rv32im") -> Path:
    """Path of the ELF of tests/programs/`src` for `core`, with `-Dk=v` for each of `defines` (`-Dk` for None)."""
    if not have_compiler():
        raise CompilerNotFound(f"{CC} not found (apt-get install gcc-riscv64-unknown-elf)")
    source = PROGRAMS / src
    srcs = [PROGRAMS / "crt0.S", source]
    headers = sorted({*PROGRAMS.glob("*.h"), *source.parent.glob("*.h")})
    syms = {"IMAGE_BASE": layout.IMAGE_SLOT[core], "IMAGE_SLOT_SIZE": layout.IMAGE_SLOT_SIZE,
            "__stack_top": layout.STACK_TOP[core], "__status": layout.status_addr(core)}
    defs = [f"-D{k}" if v is None else f"-D{k}={v}" for k, v in (defines or {}).items()]
    cmd = [CC, f"-march={march}", *CFLAGS, *defs, "-I", str(PROGRAMS), "-I", str(source.parent),
           "-T", str(PROGRAMS / "link.ld"), *[f"-Wl,--defsym={k}={v:#x}" for k, v in syms.items()],
           *map(str, srcs), "-lgcc"]
    h = hashlib.sha256(repr(cmd).encode())
    for dep in [*srcs, PROGRAMS / "link.ld", *headers]:
        h.update(dep.read_bytes())
    _CACHE.mkdir(exist_ok=True)
    out = _CACHE / f"{source.stem}-{core}-{h.hexdigest()[:16]}.elf"
    if not out.exists():
        tmp = out.with_name(f"{out.name}.{os.getpid()}.tmp")
        r = subprocess.run([*cmd, "-o", str(tmp)], capture_output=True, text=True)
        if r.returncode:
            raise TTError(f"compiling {src} for {core} failed:\n{r.stderr}")
        tmp.replace(out)
    return out


def compile_prog(src: str, core: str = "brisc", *, defines: dict[str, object] | None = None) -> bytes:
    """The ELF bytes of `build(src, core, defines=defines)` (what harness.run_on loads)."""
    return build(src, core, defines=defines).read_bytes()
