"""Fault injection: every fault a user can meet, what they see, and that the next kernel in the same process is right.

| fault | how it is injected |
|---|---|
| a kernel that hangs / traps (illegal instruction, misaligned jump, NoC alignment, L1 or DRAM out of range) | the  |
|   kernel's BRISC image is swapped for a small C program compiled by the project's own compiler path | |
| the compiler missing / failing / crashing | PATH without one; a stand-in compiler script that fails or dies |
| ttsim exiting mid-kernel (TT_SIMULATOR) | the simulator's process is killed from inside a launch |
| Ctrl-C during a launch | a real SIGINT sent from inside the emulator's advance(), and a KeyboardInterrupt raised there |
| a full disk writing the compile cache or a TT_DUMP | ENOSPC from the write, after half the bytes |
| DRAM exhaustion | buffers filling the DRAM arena, then a kernel whose output does not fit |
| two processes sharing one cache | two interpreters building the same kernels into one empty TT_CACHE_DIR |

Each case asserts the message (it names the kernel, the core and PC where the hardware model knows them), that what
the failed kernel was to compute reads as NotComputed, that a tensor computed before still reads right (its DRAM is
carried to the fresh target; when ttsim died it reads as lost), and that a new kernel gives right results.
"""
from __future__ import annotations

import errno
import gc
import itertools
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

from tinygrad import Device, Tensor

import tt_backend.ops_tt  # noqa: F401  (the device module: TTDevice)
from tt_backend import schedule_guard
from tt_backend.chip.errors import (CompilerNotFound, DeviceOutOfMemory, DeviceTimeout, EmuError, NotComputed, TTError,
                                    TTWarning)
from tt_backend.ops_tt import DramArena
from tt_backend.runtime import compile as cc
from tt_backend.runtime.driver import load_elf_segments

from tests.support import target_params

pytestmark = pytest.mark.needs_cc               # every case but the DRAM arena's compiles kernels
TARGETS = target_params("emu", "ttsim")      # the fault handling of the umd-sim card path: tests/runtime/test_umd*.py
_unique = itertools.count(1)


def fresh_scale() -> float:
    return 1.0 + next(_unique) / 1024


def fresh_expr(a: Tensor) -> Tensor:
    """An elementwise kernel no other test compiled (tinygrad caches programs by AST: a new constant, a new AST)."""
    return a * fresh_scale() + 0.5


def check_device_still_works(device: str, before: Tensor, before_want: np.ndarray, lost: bool | None = False) -> None:
    """What was computed before the fault reads right (or as lost, when the simulator died; None: either), and a new
    kernel is right."""
    if lost is None:
        lost = any(isinstance(m, schedule_guard.NotFilled) for m in schedule_guard.mark_of(before.uop.buffer))
    if lost:
        with pytest.raises(NotComputed, match="restarted without its memory"):
            before.numpy()
    else:
        np.testing.assert_array_equal(before.numpy(), before_want)
    x = np.arange(64, dtype=np.float32).reshape(8, 8)
    np.testing.assert_array_equal((Tensor(x, device=device) * 3 - 1).numpy(), x * 3 - 1)


@pytest.fixture
def inject(monkeypatch):
    """inject(core, C source): the next kernel compiled gets that program as `core`'s image."""
    def arm(core: str, src: str) -> None:
        real = cc.compile_kernel
        bad = real({core: src}, {}, "injected_fault")[core]

        def compile_kernel(sources, headers, name="kernel"):
            monkeypatch.setattr(cc, "compile_kernel", real)       # one shot
            return {**real(sources, headers, name), core: bad}
        monkeypatch.setattr(cc, "compile_kernel", compile_kernel)
    return arm


# -------------------------------------------------------------------------------------- kernels that hang or trap

NOC_READ = ("volatile unsigned *n = (volatile unsigned *)0xFFB20000u; unsigned me = n[0x148 / 4] & 0xFFF;"
            "while (n[0x40 / 4]) {} n[0x1C / 4] = 0x10; n[0x18 / 4] = 0; n[0] = SRC; n[1] = 0; n[2] = 18 | (12 << 6);"
            "n[3] = 0x20000; n[4] = 0; n[5] = me; n[0x20 / 4] = LEN; n[0x40 / 4] = 1; (void)n[0x40 / 4];"
            "for (volatile int i = 0; i < 100000; i++) {}")
# fault: (C body of kmain, what the emulator says, what ttsim says)
TRAPS = {
    "illegal instruction": ('__asm__ volatile(".word 0xffffffff");', r"illegal instruction \(word 0xffffffff\) at pc",
                            r"could not decode instruction inst=0xffffffff at pc=0x"),
    "misaligned jump": ("((void (*)(void))0x1052)();", r"instruction fetch from 0x00001052",
                        r"unaligned target_pc=0x1052"),
    "misaligned NoC access": (NOC_READ.replace("SRC", "0x20").replace("LEN", "64"),
                              r"alignment of src_addr=0x20 does not match dst_addr=0x20000",
                              r"alignment of src_addr=0x20 and dst_addr=0x20000 does not match"),
    "L1 out of range": ("*(volatile unsigned *)0x600000 = 5;", r"write at 0x00600000 is beyond L1", r"addr=0x600000"),
    "DRAM out of range": (NOC_READ.replace("SRC", "0xFFFFFFC0u").replace("LEN", "128"), r"DRAM read overrun",
                          r"DRAM read overrun"),
}


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("fault", list(TRAPS))
def test_a_trapping_kernel_is_named_with_core_and_pc(inject, target, fault):
    from tt_backend.runtime.ttsim_device import TtsimDied
    dev = f"TT:{target}"
    before = Tensor(np.arange(16, dtype=np.float32), device=dev) * 2
    before.realize()
    body, emu_says, ttsim_says = TRAPS[fault]
    inject("brisc", f"int kmain(void) {{ {body} return 0; }}")
    out = fresh_expr(Tensor(np.ones(16, np.float32), device=dev))
    if target == "emu":
        with pytest.raises(EmuError, match=emu_says + r".*\[brisc pc=0x[0-9A-F]{8}\]"):
            out.realize()
    else:               # ttsim ends its process on a trap: its ERROR line says what and where
        with pytest.raises(TtsimDied, match=ttsim_says):
            out.realize()
    with pytest.raises(NotComputed):
        out.numpy()
    check_device_still_works(dev, before, np.arange(16) * 2, lost=target == "ttsim")


@pytest.mark.parametrize("target", TARGETS)
def test_a_hanging_kernel_times_out_with_each_cores_state(inject, monkeypatch, target):
    dev = f"TT:{target}"
    before = (Tensor(np.arange(16, dtype=np.float32), device=dev) + 3).realize()
    monkeypatch.setenv("TT_TIMEOUT", "1")
    inject("brisc", "int kmain(void) { for (;;) {} return 0; }")
    out = fresh_expr(Tensor(np.ones(16, np.float32), device=dev))
    with pytest.raises(DeviceTimeout, match=r"(?s)did not finish within 1\.0 s.*brisc: running.*ncrisc: .*trisc2: "):
        out.realize()
    with pytest.raises(NotComputed, match=r"failed with:\n  DeviceTimeout"):
        out.numpy()
    monkeypatch.delenv("TT_TIMEOUT")
    check_device_still_works(dev, before, np.arange(16) + 3)


def test_a_wedged_tensix_does_not_outlive_the_kernel(inject):
    """A word the Tensix cannot decode wedges the emulated coprocessor; the next kernel runs on a fresh target."""
    before = (Tensor(np.arange(16, dtype=np.float32), device="TT:emu") + 4).realize()
    inject("brisc", 'int kmain(void) { __asm__ volatile(".word 0"); return 0; }')
    with pytest.raises(EmuError, match="Tensix: unknown opcode 0x00"):
        fresh_expr(Tensor(np.ones(16, np.float32), device="TT:emu")).realize()
    check_device_still_works("TT:emu", before, np.arange(16) + 4)


# ---------------------------------------------------------------------------------------------------- compiler

@pytest.fixture
def no_cached_compiler(monkeypatch):
    monkeypatch.setattr(cc, "_compiler", None)
    yield
    cc._compiler = None


def test_compiler_missing_says_what_to_install(monkeypatch, no_cached_compiler):
    before = (Tensor(np.arange(8, dtype=np.float32), device="TT") + 1).realize()
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("SFPI_ROOT", raising=False)
    monkeypatch.setitem(sys.modules, "ziglang", None)
    cc._compiler = None                                         # found again, under the new PATH
    if os.path.exists("/opt/tenstorrent/sfpi"):
        pytest.skip("an SFPI install in /opt/tenstorrent is found without PATH")
    out = fresh_expr(Tensor(np.ones(8, np.float32), device="TT"))
    with pytest.raises(CompilerNotFound, match="apt-get install gcc-riscv64-unknown-elf"):
        out.realize()
    with pytest.raises(NotComputed, match="CompilerNotFound"):
        out.numpy()
    monkeypatch.undo()
    cc._compiler = None
    check_device_still_works("TT", before, np.arange(8) + 1)


@pytest.mark.parametrize("how, says", [("echo 'fatal error: injected' >&2; exit 1", "fatal error: injected"),
                                       ("kill -SEGV $$", r"\(killed by signal 11\)")])
def test_compiler_failing_or_crashing_names_the_kernel(tmp_path, monkeypatch, no_cached_compiler, how, says):
    before = (Tensor(np.arange(8, dtype=np.float32), device="TT") + 2).realize()
    fake = tmp_path / "cc"
    fake.write_text(f"#!/bin/sh\n{how}\n")
    fake.chmod(0o755)
    monkeypatch.setattr(cc, "_compiler", cc.Compiler("gcc", [str(fake)], None, "stand-in 1.0"))
    out = fresh_expr(Tensor(np.ones(8, np.float32), device="TT"))
    with pytest.raises(TTError, match=rf"(?s)compiling kernel E_8 failed \(gcc: .*stand-in 1\.0\).*{says}"):
        out.realize()
    with pytest.raises(NotComputed, match="compiling kernel E_8 failed"):
        out.numpy()
    cc._compiler = None
    check_device_still_works("TT", before, np.arange(8) + 2)


# ----------------------------------------------------------------------------------------- ttsim exits mid-kernel

@pytest.mark.ttsim
def test_ttsim_exiting_mid_kernel_restarts_the_simulator(monkeypatch):
    from tt_backend.runtime.ttsim_device import TtsimDied
    dev = Device["TT:ttsim"]
    before = (Tensor(np.arange(16, dtype=np.float32), device="TT:ttsim") + 5).realize()
    x = np.arange(16, dtype=np.float32)
    inp = Tensor(x, device="TT:ttsim")              # uploaded by the schedule that fails
    target, calls = dev.target, []

    def advance(budget):
        calls.append(budget)
        if len(calls) == 1: os.kill(target.transport.child.proc.pid, signal.SIGKILL)
        return type(target).advance(target, budget)
    monkeypatch.setattr(target, "advance", advance)
    out = fresh_expr(inp)
    with pytest.raises(TtsimDied, match="killed by signal 9"):
        out.realize()
    assert dev.target is not target and dev.target.alive
    with pytest.raises(NotComputed, match="TtsimDied"):
        out.numpy()
    np.testing.assert_array_equal((inp * 2).numpy(), x * 2)        # uploaded again
    check_device_still_works("TT:ttsim", before, None, lost=True)


# ------------------------------------------------------------------------------------------ Ctrl-C during a launch

@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("how", ["SIGINT", "KeyboardInterrupt"])
def test_an_interrupted_launch_leaves_the_device_usable(monkeypatch, how, target):
    """On ttsim an interrupt inside a request abandons the simulator (its stream is mid-message): what was computed
    before then reads as lost, never as whatever bytes the stream held."""
    name = f"TT:{target}"
    dev = Device[name]
    before = (Tensor(np.arange(16, dtype=np.float32), device=name) * 7).realize()
    old, calls = dev.target, []

    def advance(budget):
        calls.append(budget)
        if len(calls) == 1:
            if how == "KeyboardInterrupt": raise KeyboardInterrupt
            # Python runs the handler at its next check for signals, which a collection's __del__ could be (the
            # interrupt would be printed and dropped there): no collection until the sleep, which the handler ends.
            # Sent to this thread: a process-directed kill may be taken by another thread (a compile pool's), which
            # leaves this sleep uninterrupted
            gc.disable()
            try:
                signal.pthread_kill(threading.get_ident(), signal.SIGINT)
                time.sleep(30)
            finally:
                gc.enable()
            raise AssertionError("the SIGINT sent to this process was not delivered within 30 s")
        return type(old).advance(old, budget)
    monkeypatch.setattr(old, "advance", advance)
    out = fresh_expr(Tensor(np.ones(16, np.float32), device=name))
    with pytest.raises(KeyboardInterrupt):
        out.realize()
    assert dev.target is not old                                  # the next kernel does not inherit half a launch
    with pytest.raises(NotComputed, match="KeyboardInterrupt"):
        out.numpy()
    check_device_still_works(name, before, np.arange(16) * 7, lost=None if target == "ttsim" else False)


# ---------------------------------------------------------------------------------------------------- full disk

def _enospc_after_half(real_write):
    def write(self, data, *a, **kw):
        real_write(self, data[:len(data) // 2], *a, **kw)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    return write


def test_full_disk_while_writing_the_cache_costs_one_warning(tmp_path, monkeypatch):
    cdir = tmp_path / "cache"
    monkeypatch.setenv("TT_CACHE_DIR", str(cdir))
    monkeypatch.setattr(cc, "_unusable_warned", False)
    real_fdopen = os.fdopen

    def fdopen(fd, *a, **kw):          # files opened in the cache directory fill the disk half way
        f = real_fdopen(fd, *a, **kw)
        if os.readlink(f"/proc/self/fd/{fd}").startswith(str(cdir)):
            f.write = _enospc_after_half(type(f).write).__get__(f)
        return f
    monkeypatch.setattr(os, "fdopen", fdopen)
    a = np.arange(8, dtype=np.float32)
    with pytest.warns(TTWarning, match="cannot be used .No space left on device.: kernels are compiled but not cached") \
            as rec:
        c = fresh_scale()
        got_np = (Tensor(a, device="TT") * c + 0.5).numpy()
    assert len([w for w in rec if issubclass(w.category, TTWarning)]) == 1
    assert not list(cdir.iterdir())                               # nothing half-written, no temporary left
    np.testing.assert_array_equal(got_np, a * np.float32(c) + np.float32(0.5))


def test_full_disk_while_writing_a_dump_costs_one_warning(tmp_path, monkeypatch):
    from tt_backend import dump
    root = tmp_path / "dump"
    monkeypatch.setenv("TT_DUMP", str(root))
    monkeypatch.setattr(dump, "_unwritable_warned", False)
    for name in ("write_text", "write_bytes"):
        real = getattr(Path, name)

        def write(self, data, *a, _real=real, **kw):
            if str(self).startswith(str(root)) and self.name.startswith("report"):   # the sources went through
                _real(self, data[:len(data) // 2], *a, **kw)
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return _real(self, data, *a, **kw)
        monkeypatch.setattr(Path, name, write)
    x = np.arange(8, dtype=np.float32)
    with pytest.warns(TTWarning, match="TT_DUMP=.* cannot be written .No space left on device.") as rec:
        out = (Tensor(x, device="TT") * 9 + 1).numpy()
    assert len([w for w in rec if issubclass(w.category, TTWarning)]) == 1
    assert list(root.iterdir()) == []                             # no half-written kernel directory
    np.testing.assert_array_equal(out, x * 9 + 1)


# --------------------------------------------------------------------------------------------- DRAM exhaustion

def test_dram_exhaustion_is_a_clear_error_and_frees_recover():
    from tinygrad.device import Buffer
    from tinygrad.dtype import dtypes
    dev = Device["TT"]
    before = (Tensor(np.arange(16, dtype=np.float32), device="TT") - 1).realize()
    arena = dev.allocator.arena
    dev.allocator.free_cache()
    fill = []
    while (room := max(n for _, n in arena.free_list)) > 1 << 20:   # leave less than 1 MiB anywhere
        fill.append(Buffer("TT", room - (1 << 19), dtypes.uint8).allocate())
    out = Tensor(np.ones(1 << 20, np.float32), device="TT") + 1      # 4 MiB: cannot fit
    with pytest.raises(DeviceOutOfMemory, match=r"TT DRAM exhausted: a buffer of 4\.00 MB does not fit \(in use: .*"
                                                r"largest free block .*\)\. Drop tensors you no longer need"):
        out.realize()
    del fill
    dev.allocator.free_cache()
    with pytest.raises(NotComputed, match="DeviceOutOfMemory"):
        out.numpy()
    check_device_still_works("TT", before, np.arange(16) - 1)


def test_the_dram_arena_never_hands_out_overlapping_blocks():
    rng = np.random.default_rng(3)
    arena = DramArena(0x10000, 0x10000 + (1 << 20))
    live: dict[int, int] = {}
    for _ in range(3000):
        if live and (rng.random() < 0.45 or len(live) > 40):
            addr = int(rng.choice(list(live)))
            arena.free(addr)
            del live[addr]
            continue
        size = int(rng.integers(1, 1 << 16))
        try:
            addr = arena.alloc(size)
        except DeviceOutOfMemory:
            assert max((n for _, n in arena.free_list), default=0) < size
            continue
        assert addr % 64 == 0 and 0x10000 <= addr and addr + size <= 0x10000 + (1 << 20)
        assert all(addr + size <= a or a + n <= addr for a, n in live.items()), "overlapping allocation"
        live[addr] = size
    for addr in list(live): arena.free(addr)
    assert arena.free_list == [[0x10000, 1 << 20]] and arena.bytes_used == 0


# ---------------------------------------------------------------------------------------------- the shared cache

CACHE_RACE = textwrap.dedent("""
    import hashlib, sys, time
    from pathlib import Path
    from tt_backend.runtime import compile as cc
    from tt_backend.runtime.driver import load_elf_segments
    flag = Path(sys.argv[1])
    while not flag.exists(): time.sleep(0.005)
    srcs = [{"brisc": f"int kmain(void) {{ return {i}; }}"} for i in range(4)]
    # builds differ in the temporary source path GCC records, so compare what is loaded
    images = [load_elf_segments(cc.compile_kernel(s, {}, f"race{i}")["brisc"]) for i, s in enumerate(srcs)]
    for _ in range(300):                          # keep reading while the other process writes
        for i, s in enumerate(srcs): assert load_elf_segments(cc.compile_kernel(s, {}, f"race{i}")["brisc"]) == images[i]
    print(" ".join(hashlib.sha256(repr(im).encode()).hexdigest() for im in images))
""")


@pytest.mark.slow
def test_two_processes_share_one_cache(tmp_path):
    env = dict(os.environ, TT_CACHE_DIR=str(tmp_path / "cache"), PYTHONWARNINGS="error::UserWarning")
    flag = tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, "-c", CACHE_RACE, str(flag)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    flag.touch()
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
    assert outs[0][0].split() == outs[1][0].split()                # the same images
    info = cc.cache_info(tmp_path / "cache")
    # the four images and the two objects they link (brisc's crt0, the device library)
    assert (info["entries"], info["unusable"], info["temporary"]) == (6, 0, 0)


def cache_of_images_only(monkeypatch, tmp_path: Path, src: dict) -> Path:
    """A cache directory, TT_CACHE_DIR from now on, into which builds write their images only: a process's first build
    also stores the objects its images link (crt0, the device library), so `src` is built once in another directory
    first and they are in memory (whichever tests this process ran before)."""
    monkeypatch.setenv("TT_CACHE_DIR", str(tmp_path / "warm"))
    cc.compile_kernel(src, {}, "warm")
    monkeypatch.setenv("TT_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_a_damaged_cache_entry_is_rebuilt_with_one_warning(tmp_path, monkeypatch):
    src = {"brisc": "int kmain(void) { return 7; }"}
    cdir = cache_of_images_only(monkeypatch, tmp_path, src)
    good = load_elf_segments(cc.compile_kernel(src, {}, "heal")["brisc"])
    (entry,) = cdir.glob("*.elf")
    for damage in (lambda b: b[:len(b) // 2], lambda b: b[:100] + bytes(len(b) - 100), lambda b: b""):
        entry.write_bytes(damage(entry.read_bytes()))
        with pytest.warns(TTWarning, match="is damaged .*discarded and rebuilt") as rec:
            rebuilt = cc.compile_kernel(src, {}, "heal")["brisc"]
        assert len(rec) == 1 and load_elf_segments(rebuilt) == good
        assert cc.entry_elf(entry.read_bytes()) == rebuilt                  # healed on disk
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        hits = cc.STATS["cache_hits"]
        assert cc.compile_kernel(src, {}, "heal")["brisc"] == rebuilt
        assert cc.STATS["cache_hits"] == hits + 1


def test_cache_command_reports_and_clears_only_its_own_files(tmp_path, monkeypatch, capsys):
    from tt_backend import __main__ as cli
    src = {"brisc": "int kmain(void) { return 3; }"}
    tmp_path = cache_of_images_only(monkeypatch, tmp_path, src)
    cc.compile_kernel(src, {}, "info")
    (entry,) = tmp_path.glob("*.elf")
    (tmp_path / f"{'a' * 64}.elf").write_bytes(entry.read_bytes()[:-1])            # damaged
    (tmp_path / f"{'b' * 64}.elf").write_bytes(b"\x7fELF an older layout")        # stale
    (tmp_path / f".{'c' * 64}.x1y2.tmp").write_bytes(b"half")                        # an interrupted write
    (tmp_path / "notes.txt").write_text("the user's own file")
    assert cli.main(["cache", "--info"]) == 0
    out = capsys.readouterr().out
    assert f"location   {tmp_path}" in out and "entries    1" in out
    assert "unusable   2" in out and "temporary  1" in out
    assert cli.main(["cache", "--clear"]) == 0
    assert "removed 4 files" in capsys.readouterr().out
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]


@pytest.mark.slow
def test_a_damaged_cache_heals_across_runs(tmp_path):
    """The issue's report: damaging cached ELFs made every later run die with ELFError. Now the next run rebuilds."""
    env = dict(os.environ, TT_CACHE_DIR=str(tmp_path), DEV="TT")
    env.pop("DEVICE", None)
    prog = ("from tinygrad import Tensor; import numpy as np; "
            "print(((Tensor(np.arange(8, dtype=np.float32)) * 5 + 2).numpy()).tolist())")
    first = subprocess.run([sys.executable, "-c", prog], env=env, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr
    for p in tmp_path.glob("*.elf"):
        p.write_bytes(p.read_bytes()[:64])
    second = subprocess.run([sys.executable, "-c", prog], env=env, capture_output=True, text=True, timeout=600)
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout) == [x * 5 + 2 for x in range(8)] == json.loads(first.stdout)
    assert "is damaged" in second.stderr and "ELFError" not in second.stderr
