"""A GCC driver's compile-and-link of one image, run as its three tools (cc1, as, ld) without the driver.

`gcc FLAGS -T core.ld OBJS core.c -o core.elf` runs five processes: the driver, cc1, as, collect2 and ld (collect2
starts ld, which loads the LTO plugin). All the driver does is turn the command line into the tools' command lines,
and for one compiler and one core's flags it does the same for every kernel. `driver_steps` asks the driver once
(`-###`: print the commands, run nothing), with placeholder paths, and `DriverSteps.commands` puts a build's paths in:
the same cc1, as and ld arguments as the driver's own run, so the same ELF bytes (tests/runtime/test_compile.py
compares them), from three processes instead of five. The plugin arguments are left out: the plugin acts on LTO
objects only and none are linked here. Measured in docs/performance.md §9.

A driver whose `-###` output does not have that shape (cc1, then as on cc1's assembly, then collect2 on as's object)
gets None, and the caller runs the driver itself.
"""
from __future__ import annotations

import functools
import os
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

# what the driver is shown in place of a build's directory and core name (the file names it derives from them,
# -dumpbase and -dumpdir, are replaced with the rest)
_DIR, _STEM = "/tt-build-dir-placeholder", "tt-core-placeholder"


@dataclass(frozen=True)
class DriverSteps:
    cc1: tuple[str, ...]       # argv with placeholder paths; writes ASM
    as_: tuple[str, ...]       # reads ASM, writes OBJ
    ld: tuple[str, ...]        # reads OBJ

    ASM, OBJ = "@asm@", "@obj@"

    def commands(self, d: Path, stem: str) -> list[list[str]]:
        """The three argvs for sources and outputs in `d` named after `stem` (stem.c -> stem.s -> stem.o -> the
        output named on the driver's command line)."""
        def fill(arg: str) -> str:
            if arg == self.ASM: return str(d / f"{stem}.s")
            if arg == self.OBJ: return str(d / f"{stem}.o")
            return arg.replace(_DIR, str(d)).replace(_STEM, stem)
        return [[fill(a) for a in argv] for argv in (self.cc1, self.as_, self.ld)]


def _option_value(argv: list[str], option: str) -> str | None:
    return argv[argv.index(option) + 1] if option in argv[:-1] else None


def _without_plugin(argv: list[str]) -> list[str]:
    out, skip = [], False
    for a in argv:
        if skip or a.startswith("-plugin-opt="):
            skip = False
            continue
        skip = a == "-plugin"
        if not skip: out.append(a)
    return out


@functools.lru_cache(maxsize=8)
def _linker(driver: tuple[str, ...]) -> str | None:
    """The ld the driver's collect2 runs (the driver searches its program directories the way collect2 does)."""
    try:
        r = subprocess.run([*driver, "-print-prog-name=ld"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    path = r.stdout.strip() if r.returncode == 0 else ""
    # a driver that finds no ld of its own prints the bare name (the host's ld, for another machine): not ours
    return path if os.path.isabs(path) and os.access(path, os.X_OK) else None


@functools.lru_cache(maxsize=32)
def driver_steps(driver: tuple[str, ...], flags: tuple[str, ...], link: tuple[str, ...],
                 extra: tuple[str, ...]) -> DriverSteps | None:
    """The steps of `driver FLAGS -I DIR -T DIR/STEM.ld LINK DIR/STEM.c -o DIR/STEM.elf EXTRA` (`link`: the object
    file names linked before the source, found in DIR), or None when the driver's plan is not cc1 -> as -> collect2."""
    d = Path(_DIR)
    argv = [*driver, *flags, "-I", _DIR, "-T", str(d / f"{_STEM}.ld"), *(str(d / o) for o in link),
            str(d / f"{_STEM}.c"), "-o", str(d / f"{_STEM}.elf"), *extra, "-###"]
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    ld = _linker(driver)
    if r.returncode != 0 or ld is None: return None
    cmds = [shlex.split(line) for line in r.stderr.splitlines() if line.startswith(" ")]
    if len(cmds) != 3 or [Path(c[0]).name for c in cmds] != ["cc1", "as", "collect2"]: return None
    cc1, as_, collect2 = cmds
    asm, obj = _option_value(cc1, "-o"), _option_value(as_, "-o")
    if asm is None or obj is None or as_[-1] != asm or collect2.count(obj) != 1: return None
    swap = {asm: DriverSteps.ASM, obj: DriverSteps.OBJ}
    cc1, as_ = ([swap.get(a, a) for a in c] for c in (cc1, as_))
    link_argv = [ld, *(swap.get(a, a) for a in _without_plugin(collect2[1:]))]
    return DriverSteps(tuple(cc1), tuple(as_), tuple(link_argv))
