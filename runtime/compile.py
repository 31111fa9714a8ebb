"""Build one ELF per core from rendered C99 sources: find a RISC-V compiler, compile, size-gate, cache.

`compile_kernel(sources, headers, name) -> {core: elf bytes}`. Every core is linked into its own
layout.IMAGE_SLOT with crt0.S and the device library (templates/device/*.h); the TRISC sources get
-DTRISC_UNPACK/-DTRISC_MATH/-DTRISC_PACK. Results are cached by a content hash of everything that goes into the
build (compiler identity, flags, sources, headers, library, crt0, linker script) as the compiler sees it: comments
and the args.h definitions a core cannot reach are left out, so kernels differing only there (other names, other
sizes that travel as runtime arguments) share images. The cache lives under $TT_CACHE_DIR or ~/.cache/tt_backend.
crt0 and the device library's functions (templates/device/*.c) are compiled once per compiler (kept in memory and in
the cache) and linked as objects, and shared programs (sources marked TT_SHARED_PROGRAM: one image for every kernel
that runs it, lowering/families/shared_programs.py) are built once per compiler and kept likewise; the cores are
built in parallel, at most one compiler process per CPU, in a scratch directory in memory where there is one
(/dev/shm). With Debian's GCC a core's build runs cc1, as and ld directly, as
its driver would run them (runtime/gcc_steps.py).

The cache heals and never blocks a build: an entry is `<key>.elf`, the ELF followed by a trailer (magic, length,
SHA-256 of the ELF; tools that read ELF files ignore trailing bytes). An entry whose trailer does not match (truncated,
overwritten, half-copied) is discarded with one warning and rebuilt. Entries are written to a unique temporary file
and renamed into place, so processes building the same kernel at once never see a partial file. A cache that cannot
be written (full disk, read-only, TT_CACHE_DIR naming a file) costs one warning; kernels still compile.
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import io
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from elftools.elf.constants import SH_FLAGS
from elftools.elf.elffile import ELFFile

from tt_backend.chip import isa, layout
from tt_backend.chip.errors import CompilerNotFound, KernelTooLarge, TTError, TTWarning
from tt_backend.runtime.driver import load_elf_segments
from tt_backend.runtime.gcc_steps import driver_steps
from tt_backend.templates import DEVICE_LIB_DIR, TEMPLATE_DIR
from tt_backend.templates.environment import cache_dir, environment

CORE_DEFINES = {"trisc0": ["-DTRISC_UNPACK"], "trisc1": ["-DTRISC_MATH"], "trisc2": ["-DTRISC_PACK"]}
COMMON_FLAGS = ["-march=rv32im", "-mabi=ilp32", "-nostdlib", "-ffreestanding", "-O2", "-std=c99",
                # no calls the kernels did not ask for, no gp-relative addressing the loader does not set up
                "-fno-tree-loop-distribute-patterns", "-fno-pic", "-Wall", "-Wno-unused-function",
                # GCC 12 treats constant addresses below 4 KiB (our L1 status/args words) as a null page
                "-Wno-array-bounds"]


@dataclass
class Compiler:
    kind: str                  # "sfpi" | "gcc" | "clang" | "zig"
    cc: list[str]              # argv prefix that compiles+links
    objdump: str | None
    version: str
    extra: list[str] = field(default_factory=list)   # flags after the inputs (e.g. -lgcc)

    def describe(self) -> str:
        return f"{self.kind}: {' '.join(self.cc)} ({self.version})"


def _version(argv: list[str]) -> str:
    try:
        out = subprocess.run(argv + ["--version"], capture_output=True, text=True, timeout=60)
        return (out.stdout or out.stderr).splitlines()[0].strip() if (out.stdout or out.stderr) else "unknown"
    except (OSError, subprocess.SubprocessError):
        return ""


def _find_sfpi() -> Compiler | None:
    roots = [os.environ.get("SFPI_ROOT"), "/opt/tenstorrent/sfpi"]
    for root in filter(None, roots):
        for name in ("riscv-tt-elf-gcc", "riscv32-tt-elf-gcc"):
            gcc = Path(root) / "compiler" / "bin" / name
            if gcc.exists():
                objdump = gcc.with_name(name.replace("gcc", "objdump"))
                return Compiler("sfpi", [str(gcc)], str(objdump) if objdump.exists() else None,
                                _version([str(gcc)]), ["-lgcc"])
    return None


def find_compiler() -> Compiler:
    """SFPI, then Debian's riscv64-unknown-elf-gcc, then clang + ld.lld, then the ziglang wheel."""
    c = _find_sfpi()
    if c:
        return c
    gcc = shutil.which("riscv64-unknown-elf-gcc")
    if gcc:
        # the single RWX image segment is intended (code, data and bss share the core's slot)
        return Compiler("gcc", [gcc], shutil.which("riscv64-unknown-elf-objdump"), _version([gcc]),
                        ["-lgcc", "-Wl,--no-warn-rwx-segments"])
    clang, lld = shutil.which("clang"), shutil.which("ld.lld")
    if clang and lld:
        return Compiler("clang", [clang, "--target=riscv32-unknown-elf", "-fuse-ld=lld"],
                        shutil.which("llvm-objdump"), _version([clang]))
    if importlib.util.find_spec("ziglang") is not None:     # the ziglang wheel (run as a program, never imported)
        zig = [sys.executable, "-m", "ziglang", "cc", "-target", "riscv32-freestanding-none", "-mcpu=generic_rv32+m"]
        return Compiler("zig", zig, shutil.which("llvm-objdump"), _version(zig))
    raise CompilerNotFound(
        "no RISC-V compiler for the Tensix cores found. Install one of: SFPI (set $SFPI_ROOT), "
        "`apt-get install gcc-riscv64-unknown-elf`, `apt-get install clang lld`, or `pip install ziglang`")


_compiler: Compiler | None = None


def compiler() -> Compiler:
    global _compiler
    if _compiler is None:
        _compiler = find_compiler()
    return _compiler


# --- cache entries ---------------------------------------------------------------------------------------------------
ENTRY_FORMAT = "elf+trailer v1"            # part of every key: entries of an older layout are never looked up
TRAILER = struct.Struct("<8sQ32s")         # magic, ELF length, SHA-256 of the ELF
TRAILER_MAGIC = b"TTCACHE1"
ENTRY_NAME = re.compile(r"[0-9a-f]{64}\.elf")
# leftovers of interrupted writes: ours, and those of the layout before entries had a trailer
TEMP_NAME = re.compile(r"(\.[0-9a-f]{64}\..*\.tmp|[0-9a-f]{64}\.elf\.tmp\d+)")
TEMPLATE_NAME = re.compile(r"\.?[0-9a-f]{40}\.(jinja|.*\.tmp)")    # a compiled template, or one being written
_unusable_warned = False                   # a cache that cannot be read or written: one warning per process


def entry_bytes(elf: bytes) -> bytes:
    return elf + TRAILER.pack(TRAILER_MAGIC, len(elf), hashlib.sha256(elf).digest())


def entry_elf(data: bytes) -> bytes | None:
    """The ELF of an entry, or None when the entry is damaged."""
    if len(data) < TRAILER.size: return None
    magic, n, digest = TRAILER.unpack_from(data, len(data) - TRAILER.size)
    elf = data[:-TRAILER.size]
    return elf if magic == TRAILER_MAGIC and n == len(elf) and hashlib.sha256(elf).digest() == digest else None


def read_entry(path: Path) -> bytes | None:
    """A cached ELF, or None (a miss). A damaged entry is removed with a warning, so the build that follows heals it."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as e:
        _unusable(path.parent, e)
        return None
    if (elf := entry_elf(data)) is not None: return elf
    warnings.warn(f"TT compile cache: {path} is damaged (its length or checksum does not match); discarded and "
                  f"rebuilt", TTWarning)
    with contextlib.suppress(OSError):
        path.unlink()
    return None


def write_entry(cdir: Path, key: str, elf: bytes) -> None:
    """Atomically publish an entry: a unique temporary file in the cache directory, renamed over `<key>.elf`. On any
    OSError nothing is left behind and the build goes on uncached."""
    tmp = None
    try:
        cdir.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=cdir, prefix=f".{key}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(entry_bytes(elf))
        os.replace(tmp, cdir / f"{key}.elf")
    except OSError as e:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        _unusable(cdir, e)


def _unusable(cdir: Path, e: OSError) -> None:
    global _unusable_warned
    if not _unusable_warned:
        _unusable_warned = True
        warnings.warn(f"TT compile cache {cdir} cannot be used ({e.strerror or e}): kernels are compiled but not "
                      f"cached. Free space there, or point TT_CACHE_DIR at a writable directory", TTWarning)


def cache_info(cdir: Path | None = None) -> dict:
    """What `python -m tt_backend cache --info` prints: location, valid entries, unusable ones (damaged, or of the
    layout before entries had a trailer: never used, rebuilt when needed), bytes, leftovers of interrupted writes."""
    cdir = cdir or cache_dir()
    info = {"dir": str(cdir), "exists": cdir.is_dir(), "entries": 0, "unusable": 0, "bytes": 0, "temporary": 0}
    if not info["exists"]: return info
    for p in cdir.iterdir():
        if ENTRY_NAME.fullmatch(p.name):
            data = p.read_bytes()
            info["bytes"] += len(data)
            info["entries" if entry_elf(data) is not None else "unusable"] += 1
        elif TEMP_NAME.fullmatch(p.name):
            info["temporary"] += 1
    return info


def clear_cache(cdir: Path | None = None) -> int:
    """Remove the cache's entries, the compiled templates (templates/environment.py) and leftover temporary files
    (nothing else: TT_CACHE_DIR may name a directory that holds other files). Returns how many files went."""
    cdir = cdir or cache_dir()
    if not cdir.is_dir(): return 0
    n = 0
    for p in cdir.iterdir():
        if ENTRY_NAME.fullmatch(p.name) or TEMP_NAME.fullmatch(p.name) or TEMPLATE_NAME.fullmatch(p.name):
            with contextlib.suppress(FileNotFoundError):
                p.unlink()
                n += 1
    return n


def _common_flags(c: Compiler) -> list[str]:
    """The flags of every compile, whatever the core (the device library's objects are built with these alone)."""
    flags = list(COMMON_FLAGS)
    if c.kind in ("clang", "zig"):
        flags = [f for f in flags if f not in ("-march=rv32im", "-mabi=ilp32", "-fno-tree-loop-distribute-patterns")]
        flags += ["-march=rv32im", "-mabi=ilp32", "-fno-builtin"] if c.kind == "clang" else ["-fno-builtin"]
    return flags


def _flags(c: Compiler, core: str) -> list[str]:
    status = layout.status_addr(core)
    return _common_flags(c) + [
        f"-DTT_CORE_INDEX={layout.CORES.index(core)}", f"-DTT_STACK_TOP=0x{layout.STACK_TOP[core]:X}",
        f"-DTT_STATUS_ADDR=0x{status:X}", f"-DTT_GEN_ADDR=0x{layout.LAUNCH_GENERATION:X}", *CORE_DEFINES.get(core, [])]


_ld_env = environment()


def _linker_script(core: str) -> str:
    origin = layout.IMAGE_SLOT[core]
    # region = the rest of L1 so an oversized image still links and the size gate can report its sizes
    return _ld_env.get_template("link.ld.j2").render(origin=origin, length=layout.L1_SIZE - origin)


def _library_files() -> dict[str, str]:
    """The device library (headers and the sources of its linked functions) and crt0.S, by file name."""
    files = {p.name: p.read_text() for p in sorted([*DEVICE_LIB_DIR.glob("*.h"), *DEVICE_LIB_DIR.glob("*.c")])}
    files["crt0.S"] = (TEMPLATE_DIR / "crt0.S").read_text()
    return files


# --- size gate -------------------------------------------------------------------------------------------------------
def section_sizes(elf: bytes) -> dict[str, int]:
    """text (code + read-only data), data, bss bytes of the allocated sections."""
    sizes = {"text": 0, "data": 0, "bss": 0}
    for sec in ELFFile(io.BytesIO(elf)).iter_sections():
        flags = sec["sh_flags"]
        if not flags & SH_FLAGS.SHF_ALLOC:
            continue
        if sec["sh_type"] == "SHT_NOBITS":
            sizes["bss"] += sec["sh_size"]
        elif flags & SH_FLAGS.SHF_WRITE:
            sizes["data"] += sec["sh_size"]
        else:
            sizes["text"] += sec["sh_size"]
    return sizes


def image_size(elf: bytes) -> int:
    return sum(len(seg.data) for seg in load_elf_segments(elf).segments)


def check_size(core: str, elf: bytes, name: str = "") -> None:
    """Refuse an image larger than its slot or with any loadable byte outside it (KernelTooLarge)."""
    lo, limit = layout.IMAGE_SLOT[core], layout.IMAGE_SLOT_SIZE
    segments = load_elf_segments(elf).segments
    total = sum(len(seg.data) for seg in segments)
    outside = [seg for seg in segments if not (lo <= seg.paddr and seg.paddr + len(seg.data) <= lo + limit)]
    if total > limit or outside:
        s = section_sizes(elf)
        raise KernelTooLarge(
            f"kernel {name or '?'}: the {core} image needs {total} bytes (text {s['text']}, data {s['data']}, "
            f"bss {s['bss']}) but its L1 slot 0x{lo:X} holds {limit} bytes; simplify the kernel (fewer fused ops or "
            f"streams) or split it")


# --- what an image depends on ----------------------------------------------------------------------------------------
# A core's cache key covers its source and args.h as the compiler sees them, not as they are spelled: comments go
# (they name the kernel: `E_64_64`), and of args.h only the definitions the core can reach by name are kept (a reader
# that never calls tt_iter_set does not depend on tt_ranges, nor on a buffer size it never names). A macro never
# expanded, a static function never called and a static object never read leave no trace in the object (at -O2, as
# every compile here), so kernels that differ only there get the same image: the reader, writer and compute kernel of
# kernels of other shapes and names, whose sizes travel in the runtime arguments (n_tiles, n_elements, addresses), are
# cache hits. Anything in args.h not of the
# forms below (#define, static [inline|const] definitions) is kept whatever it says, and so are reserved names (_X),
# which system headers may test.
_COMMENT_OR_LITERAL = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
_IDENT = re.compile(r"[A-Za-z_]\w*")
_DEFINE = re.compile(r"#define\s+([A-Za-z_]\w*)")
_STATIC = re.compile(r"static\s+(?:inline\s+|const\s+)*[A-Za-z_]\w*\s*\**\s*([A-Za-z_]\w*)\s*[\[(]")


@functools.lru_cache(maxsize=256)
def without_comments(text: str) -> str:
    """C text with every comment replaced by a space or its newlines (line numbers kept); literals untouched."""
    def repl(m: re.Match) -> str:
        s = m.group(0)
        return s if s[0] in "\"'" else ("\n" * s.count("\n") or " ")
    return _COMMENT_OR_LITERAL.sub(repl, text)


def _items(header: str) -> list[tuple[str | None, str]]:
    """args.h (comments removed) as top-level items: (the name it defines, or None: always kept; its text). A
    #define with its continuation lines, a static definition up to its closing brace or semicolon, any other line."""
    items, lines, k = [], header.split("\n"), 0
    while k < len(lines):
        line = lines[k]
        start = k
        if line.lstrip().startswith("#"):
            while lines[k].rstrip().endswith("\\") and k + 1 < len(lines):
                k += 1
            m = _DEFINE.match(line.lstrip())
            items.append((m.group(1) if m else None, "\n".join(lines[start:k + 1])))
        elif m := _STATIC.match(line.lstrip()):
            depth, seen_brace = 0, False
            while True:
                depth += lines[k].count("{") - lines[k].count("}")
                seen_brace |= "{" in lines[k]
                if depth == 0 and (seen_brace or lines[k].rstrip().endswith(";")) or k + 1 == len(lines):
                    break
                k += 1
            items.append((m.group(1), "\n".join(lines[start:k + 1])))
        elif line.strip():
            items.append((None, line))
        k += 1
    return items


@functools.lru_cache(maxsize=256)
def _names(text: str) -> frozenset[str]:
    """The identifiers of a text (kept: the library's and the fixed headers' texts come back with every build)."""
    return frozenset(_IDENT.findall(text))


@functools.lru_cache(maxsize=64)
def _parsed_args(args_h: str) -> tuple[tuple[str | None, str, frozenset[str]], ...]:
    return tuple((name, text, frozenset(_IDENT.findall(text))) for name, text in _items(without_comments(args_h)))


def reachable_args(args_h: str, roots: list[frozenset[str]]) -> str:
    """The args.h items reachable by name from the identifier sets `roots` (the core's source, the library, the other
    headers), transitively, in their order."""
    items = _parsed_args(args_h)
    names: set[str] = set()
    kept = [False] * len(items)
    changed = True
    while changed:
        changed = False
        for k, (name, _, ids) in enumerate(items):
            if not kept[k] and (name is None or name[0] == "_" or name in names or any(name in r for r in roots)):
                kept[k] = changed = True
                names |= ids
    return "\n".join(text for (_, text, _), keep in zip(items, kept) if keep)


# --- compile ---------------------------------------------------------------------------------------------------------
STATS = {"compiled": 0, "cache_hits": 0, "crt0_reused": 0, "programs_reused": 0}
COMPILE_TIMEOUT_S = 300          # one core's compile: a hung compiler fails the kernel instead of the whole program

# Objects every image links, built once per compiler, flags and source (kept in this process and in the disk cache,
# so a new process finds them there), then linked instead of compiled again:
#   * crt0.S per core (its defines are the core's): the preprocess + assemble of every core's build.
#   * the device library's functions (templates/device/*.c), with the flags common to all cores: each core's compile
#     used to carry them as part of its translation unit (measured: 5-10 ms of a 25-40 ms cc1 per core).
# Linked in the order crt0, library, kernel (the linker script puts crt0's .text.start first, then each input's .text
# in command-line order). The kernel's translation unit used to emit memset/memcpy among its own functions, mostly
# first: most images are unchanged, the others hold the same functions in another order (helpers GCC emitted out of
# line ahead of memset, e.g. tt_fail, now follow it), with the same emulated cycles. REUSE_CRT0 = False links
# crt0.S every time (the reference the tests compare the object path with).
REUSE_CRT0 = True
# Debian GCC's compile + link of a core run as cc1, as and ld directly (runtime/gcc_steps.py): the same bytes from
# three processes instead of five. DIRECT_STEPS = False runs the driver (the reference the tests compare with).
DIRECT_STEPS = True
# The order the cores' builds are handed to the pool. Their costs differ by 2-3x (median CPU ms of a core's cc1 + as +
# ld over 25 kernels: brisc 50, ncrisc 37, trisc0 27, trisc2 26, trisc1 22; the reader's cc1 inlines the NoC helpers
# into its loops), and with fewer CPUs than cores the order decides when the last build ends. On 2 CPUs this order
# runs the reader beside the two cheapest builds, then the writer and the unpacker on whichever CPU frees first: the
# best of the 120 orders for 21 of the 25 kernels (elementwise, matmul, reductions), 0.5 % above each kernel's best
# order on average against 8 % for the cores' own order (docs/performance.md §9).
BUILD_ORDER = ("brisc", "trisc1", "trisc2", "ncrisc", "trisc0")
SHM_DIR = "/dev/shm"             # where builds keep their scratch files when they can (_build_root)
SHM_MIN_FREE = 16 << 20          # ... and have room to spare: a build writes well under 1 MB (sources, assembly, objects)
_objects: dict[tuple, bytes] = {}
# Programs: images shared by kernels (lowering/families/shared_programs.py: the stream reader and writer, the unpacker
# and the packer of elementwise kernels, which take their kernel's streams from the argument block). A program's
# source says so (`#define TT_SHARED_PROGRAM`) and includes no kernel's args.h, so its image is the same for every
# kernel that runs it: like the objects above it is built once per compiler and kept in this process (by its content
# key, in which the kernel's headers have no part) as well as in the disk cache.
_programs: dict[str, bytes] = {}
_PROGRAM_MARK = re.compile(r"^\s*#\s*define\s+TT_SHARED_PROGRAM\b", re.M)
_ARGS_INCLUDE = re.compile(r'^\s*#\s*include\s*"args\.h"', re.M)


def is_program(source: str) -> bool:
    """Whether `source` is a shared program (see _programs)."""
    if "TT_SHARED_PROGRAM" not in source or not _PROGRAM_MARK.search(source):   # (the substring test: fast)
        return False
    if _ARGS_INCLUDE.search(source):
        raise ValueError("a shared program includes args.h: its image would depend on the kernel")
    return True


@dataclass
class _Job:
    label: str                 # what the error message and `timings` call it: a core, or the object's source
    commands: list[list[str]]  # run in order, each only if the one before succeeded
    output: Path


def _run_jobs(jobs: list[_Job], timings: dict[str, float] | None) -> list[str]:
    """Run the jobs (each its commands in order), at most one per CPU at a time; the failures' logs (the failing
    command's argv and output)."""
    def run_one(argv: list[str]) -> tuple[str, int]:
        try:
            r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               timeout=COMPILE_TIMEOUT_S)
            return r.stdout, r.returncode
        except subprocess.TimeoutExpired as e:
            out = e.output.decode(errors="replace") if isinstance(e.output, bytes) else e.output or ""
            return out + f"\n(killed: no result within {COMPILE_TIMEOUT_S} s)", -9

    def run(job: _Job) -> str | None:
        start = time.perf_counter()
        for argv in job.commands:
            log, code = run_one(argv)
            if code != 0: break
        if timings is not None:
            timings[job.label] = 1e3 * (time.perf_counter() - start)
        if code == 0: return None
        how = f"killed by signal {-code}" if code < 0 else f"exit status {code}"
        return f"--- {job.label} ({how}): {' '.join(argv)}\n{log}"
    if not jobs: return []
    with ThreadPoolExecutor(max_workers=min(len(jobs), os.cpu_count() or 1)) as pool:
        return [e for e in pool.map(run, jobs) if e is not None]


_QUOTED_INCLUDE = re.compile(r'^\s*#\s*include\s*"', re.M)


def _object_key(key: tuple) -> str:
    """An object's disk-cache key: compiler, flags, file name and source (crt0.S and the library's .c files include
    only the compiler's own headers, so nothing else reaches the object)."""
    if _QUOTED_INCLUDE.search(key[3]):
        raise ValueError(f"{key[2]} includes a project header: its text would have to be part of the object's key")
    h = hashlib.sha256()
    for part in [ENTRY_FORMAT, "object", key[0], " ".join(key[1]), *key[2:]]:
        h.update(part.encode())
        h.update(b"\0\1")
    return h.hexdigest()


def _link_objects(c: Compiler, cores: list[str], lib: dict[str, str], d: Path,
                  timings: dict[str, float] | None) -> tuple[dict[str, list[Path]], list[str]]:
    """({core: the objects its image links before the kernel, in `d`}, failed builds' logs): crt0 (the core's) and
    the device library's, built by this process before (kept by compiler, flags and source) or now, in parallel."""
    per_core = {core: ([(f"crt0_{core}.o", "crt0.S", tuple(_flags(c, core)))] if REUSE_CRT0 else [])
                + [(f"{Path(f).stem}.o", f, tuple(_common_flags(c))) for f in sorted(lib) if f.endswith(".c")]
                for core in cores}
    jobs, keys, cdir = [], {}, cache_dir()
    for oname, src, flags in dict.fromkeys(o for objs in per_core.values() for o in objs):
        keys[oname] = key = (c.describe(), flags, src, lib[src])
        obj = _objects.get(key)
        if obj is None and (obj := read_entry(cdir / f"{_object_key(key)}.elf")) is not None:
            _objects[key] = obj
        if obj is not None:
            (d / oname).write_bytes(obj)
            STATS["crt0_reused"] += src == "crt0.S"
        else:
            jobs.append(_Job(oname, [[*c.cc, *flags, "-I", str(d), "-c", str(d / src), "-o", str(d / oname)]],
                             d / oname))
    if errors := _run_jobs(jobs, timings):
        return {}, errors
    for job in jobs:
        _objects[keys[job.label]] = obj = job.output.read_bytes()
        write_entry(cdir, _object_key(keys[job.label]), obj)
    return {core: [d / oname for oname, _, _ in objs] for core, objs in per_core.items()}, []


# The compute source is one text for the three TRISCs, its parts selected by `#if defined(TRISC_UNPACK)` ... `#elif
# defined(TRISC_PACK)`. What the compiler sees of it for one TRISC is that TRISC's part only, so the key keeps that
# part: elementwise kernels that differ only in their math share their unpack and pack images (two of five ELFs).
# Decided here only for conditionals that test nothing but the TRISC defines of the command line (every condition of
# the #if/#elif chain is `defined(X)`, `defined X`, `#ifdef X` or `#ifndef X` for such an X); any other conditional
# is kept as written. Dropped lines leave nothing, so the kept text's line numbers differ from the file's: a text
# that could observe them (__LINE__) or redefine a TRISC define is kept whole.
TRISC_DEFINES = frozenset(f[2:] for flags in CORE_DEFINES.values() for f in flags)
_DIRECTIVE = re.compile(r"\s*#\s*(if|ifdef|ifndef|elif|else|endif)\b(.*)")
_DEFINED = re.compile(r"!?\s*defined\s*(?:\(\s*(\w+)\s*\)|(\w+))")


def _condition(kind: str, expr: str, defines: frozenset[str]) -> bool | None:
    """The value of one #if/#ifdef/#ifndef/#elif condition when it tests a TRISC define alone, else None."""
    expr = expr.strip()
    if kind in ("ifdef", "ifndef"):
        return (expr in defines) == (kind == "ifdef") if expr in TRISC_DEFINES else None
    m = _DEFINED.fullmatch(expr)
    name = m and (m.group(1) or m.group(2))
    return (name in defines) != expr.startswith("!") if name in TRISC_DEFINES else None


def core_view(source: str, core: str) -> str:
    """`source` (comments removed) as the compiler sees it for `core`: the branches of TRISC-define conditionals
    that the core's defines do not take are dropped (see TRISC_DEFINES)."""
    if "__LINE__" in source or re.search(r"#\s*(define|undef)\s+TRISC_", source):
        return source
    defines = frozenset(f[2:] for f in CORE_DEFINES.get(core, []))
    lines = source.split("\n")
    # each conditional chain: decided (all its conditions are TRISC tests) or not, found before emitting
    chains, stack = {}, []                      # line of the #if -> [line of each directive of its chain]
    for k, line in enumerate(lines):
        m = _DIRECTIVE.match(line)
        if not m: continue
        if m.group(1) in ("if", "ifdef", "ifndef"):
            stack.append(k)
            chains[k] = [k]
        elif stack:
            chains[stack[-1]].append(k)
            if m.group(1) == "endif": stack.pop()
    if stack: return source                     # unbalanced: the compiler will say so; keep the text whole
    decided, branch_of = {}, {}                 # directive line -> (taken?) for the chains fully decided
    for chain in chains.values():
        values = [_condition(*_DIRECTIVE.match(lines[k]).groups(), defines) for k in chain[:-1]
                  if _DIRECTIVE.match(lines[k]).group(1) != "else"]
        if any(v is None for v in values): continue
        taken = False
        for k in chain[:-1]:
            kind, expr = _DIRECTIVE.match(lines[k]).groups()
            v = (not taken) if kind == "else" else (not taken and _condition(kind, expr, defines))
            taken |= v
            decided[k] = v
        decided[chain[-1]] = True               # after #endif: the enclosing text again
        branch_of.update(dict.fromkeys(chain))
    out, active = [], [True]                    # active: the current decided branch (and all enclosing ones) taken
    for k, line in enumerate(lines):
        if k in branch_of:
            kind = _DIRECTIVE.match(line).group(1)
            if kind in ("if", "ifdef", "ifndef"):
                active.append(active[-1] and decided[k])
            elif kind == "endif":
                active.pop()
            else:
                active[-1] = active[-2] and decided[k]
        elif active[-1]:
            out.append(line)
    return "\n".join(out)


def _key(c: Compiler, core: str, source: str, headers: dict[str, str], lib: dict[str, str], ld: str) -> str:
    """The image's content key: everything the compiler sees of it (see `core_view`, `reachable_args`)."""
    program = is_program(source)
    source = core_view(without_comments(source), core)
    fixed = {k: v for k, v in headers.items() if k != "args.h"}
    if "args.h" in headers and not program:
        roots = [_names(source), *(_names(t) for t in [*fixed.values(), *lib.values()])]
        fixed["args.h"] = reachable_args(headers["args.h"], roots)
    h = hashlib.sha256()
    for part in [ENTRY_FORMAT, c.describe(), " ".join(_flags(c, core) + c.extra), core, source, ld,
                 *(f"{k}\0{v}" for k, v in sorted(fixed.items())), *(f"{k}\0{v}" for k, v in sorted(lib.items()))]:
        h.update(part.encode())
        h.update(b"\0\1")
    return h.hexdigest()


def _core_job(c: Compiler, core: str, d: Path, source: str, ld: str, objects: list[Path]) -> _Job:
    """One core's compile + link in `d`: crt0 (object, or crt0.S without REUSE_CRT0), the library objects, the
    kernel. Debian's GCC driver's run is replaced by its tools' (runtime/gcc_steps.py) when DIRECT_STEPS and the
    driver's plan allows; SFPI's GCC (not installed on the machines that measured and tested this), clang and zig
    run their driver."""
    (d / f"{core}.c").write_text(source)
    (d / f"{core}.ld").write_text(ld)
    inputs = [p.name for p in objects] if REUSE_CRT0 else ["crt0.S", *(p.name for p in objects)]
    steps = driver_steps(tuple(c.cc), tuple(_flags(c, core)), tuple(inputs), tuple(c.extra)) \
        if DIRECT_STEPS and c.kind == "gcc" else None
    if steps is not None:
        return _Job(core, steps.commands(d, core), d / f"{core}.elf")
    return _Job(core, [[*c.cc, *_flags(c, core), "-I", str(d), "-T", str(d / f"{core}.ld"),
                        *(str(d / f) for f in inputs), str(d / f"{core}.c"), "-o", str(d / f"{core}.elf"), *c.extra]],
                d / f"{core}.elf")


def _build_root() -> str | None:
    """Where a build's scratch directory goes: /dev/shm (memory) when it is writable and TMPDIR names no other place,
    else the system's temporary directory. A build writes and removes about 40 small files (sources, headers,
    objects, assembly, ELFs); on the disk-backed /tmp of the 2-core machine each costs about 0.3 ms of wall time
    (journaled create and unlink), in memory 0.03 ms (docs/performance.md §9)."""
    if "TMPDIR" not in os.environ and os.path.isdir(SHM_DIR) and os.access(SHM_DIR, os.W_OK | os.X_OK):
        with contextlib.suppress(OSError):
            st = os.statvfs(SHM_DIR)
            if st.f_bavail * st.f_frsize >= SHM_MIN_FREE:
                return SHM_DIR
    return None


def _scratch(name: str) -> tempfile.TemporaryDirectory:
    """A build's scratch directory: in _build_root's place, or the system's temporary directory where that fails."""
    if (root := _build_root()) is not None:
        with contextlib.suppress(OSError):
            return tempfile.TemporaryDirectory(prefix=f"tt_{name}_", dir=root)
    return tempfile.TemporaryDirectory(prefix=f"tt_{name}_")


def compile_kernel(sources: dict[str, str], headers: dict[str, str], name: str = "kernel",
                   timings: dict[str, float] | None = None) -> dict[str, bytes]:
    """{core: C source} + {header name: text} -> {core: ELF bytes}. Cached; raises KernelTooLarge, TTError.
    `timings`, when given, receives each compiler process's wall milliseconds by core or object (`bench build`)."""
    c = compiler()
    lib = _library_files()
    out: dict[str, bytes] = {}
    todo: dict[str, tuple[str, str]] = {}
    cdir = cache_dir()
    for core, src in sources.items():
        if core not in layout.IMAGE_SLOT:
            raise ValueError(f"unknown core {core!r}; expected one of {layout.CORES}")
        ld = _linker_script(core)
        key = _key(c, core, src, headers, lib, ld)
        if (elf := _programs.get(key)) is not None:
            STATS["programs_reused"] += 1
            out[core] = elf
        elif (elf := read_entry(cdir / f"{key}.elf")) is not None:
            STATS["cache_hits"] += 1
            out[core] = elf
            if is_program(src):
                _programs[key] = elf
        else:
            todo[core] = (key, ld)
    if todo:
        with _scratch(name) as tmp:
            d = Path(tmp)
            for fname, text in {**lib, **headers}.items():
                (d / fname).write_text(text)
            objects, errors = _link_objects(c, list(todo), lib, d, timings)
            jobs = [] if errors else [_core_job(c, core, d, sources[core], todo[core][1], objects[core])
                                      for core in sorted(todo, key=BUILD_ORDER.index)]
            if errors := errors or _run_jobs(jobs, timings):
                raise TTError(f"compiling kernel {name} failed ({c.describe()}):\n" + "\n".join(errors))
            for job in jobs:
                elf = job.output.read_bytes()
                STATS["compiled"] += 1
                write_entry(cdir, todo[job.label][0], elf)
                if is_program(sources[job.label]):
                    _programs[todo[job.label][0]] = elf
                out[job.label] = elf
    for core in sources:
        check_size(core, out[core], name)
    return {core: out[core] for core in sources}


# --- disassembly -----------------------------------------------------------------------------------------------------
def _ttinsn_words(elf: bytes) -> list[tuple[int, int]]:
    """(address, Tensix word) of every .ttinsn in the executable sections: words whose low two bits are not 11."""
    found = []
    for sec in ELFFile(io.BytesIO(elf)).iter_sections():
        if sec["sh_type"] != "SHT_PROGBITS" or not sec["sh_flags"] & SH_FLAGS.SHF_EXECINSTR:
            continue
        data, base = sec.data(), sec["sh_addr"]
        for off in range(0, len(data) - 3, 4):
            word = int.from_bytes(data[off:off + 4], "little")
            if word & 3 != 3 and word != 0:
                found.append((base + off, isa.from_ttinsn(word)))
    return found


def disassemble(elf: bytes) -> str:
    """objdump -d output when available, followed by the decoded .ttinsn words."""
    parts = []
    objdump = (_compiler.objdump if _compiler else None) or shutil.which("riscv64-unknown-elf-objdump")
    if objdump:
        with tempfile.NamedTemporaryFile(suffix=".elf") as f:
            f.write(elf)
            f.flush()
            r = subprocess.run([objdump, "-d", f.name], capture_output=True, text=True)
            parts.append(r.stdout if r.returncode == 0 else r.stderr)
    parts.append("Tensix instructions (.ttinsn):")
    for addr, word in _ttinsn_words(elf):
        parts.append(f"  {addr:08x}:  {word:08x}  {isa.disasm(word)}")
    return "\n".join(parts) + "\n"
