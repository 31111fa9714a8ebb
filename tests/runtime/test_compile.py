"""runtime.compile (compiler discovery, size gate, cache, disassembly) and runtime.driver, ending with whole kernels
rendered from hand-made ElementwisePlans, compiled for real and run on the emulator against numpy."""
from __future__ import annotations

import io
import shutil
import subprocess

import numpy as np
import pytest
from elftools.elf.elffile import ELFFile

from tt_backend.lowering.codegen.sources import split
from tt_backend.lowering.families.elementwise import ElementwisePlan
from tt_backend.lowering.families.tile_plan import allocate_l1
from tt_backend.lowering.index import IndexExpr
from tt_backend.lowering.plan import Buffer, SfpuProgram, Stream
from tt_backend.runtime import compile as C
from tt_backend.runtime import driver, gcc_steps
from tt_backend.chip import isa, layout
from tt_backend.chip.errors import CompilerNotFound, DeviceTimeout, KernelTooLarge, TTError

r0, r1 = IndexExpr.range_var(0), IndexExpr.range_var(1)   # the iteration ranges of the hand-made plans


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    """An empty disk cache, and no shared program (C._programs) an earlier test of this process built: each test
    counts the builds of its own kernels."""
    monkeypatch.setenv("TT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(C, "_programs", {})


def found() -> int:
    """Images found instead of built so far: in the disk cache, or shared programs this process built."""
    return C.STATS["cache_hits"] + C.STATS["programs_reused"]


# --- SFPU programs assembled by hand ---------------------------------------------------------------------------------
def sfpu_add(n_in=2, out_slot=2) -> SfpuProgram:
    """out = in0 + in1 (fp32): SFPADD computes 1.0 * b + c."""
    body = [isa.encode("SFPLOAD", lreg_ind=0, instr_mod0=3, dest_reg_addr=0),
            isa.encode("SFPLOAD", lreg_ind=1, instr_mod0=3, dest_reg_addr=64),
            isa.encode("SFPADD", lreg_src_a=10, lreg_src_b=0, lreg_src_c=1, lreg_dest=2),
            isa.encode("SFPSTORE", lreg_ind=2, instr_mod0=3, sfpu_addr_mode=1, dest_reg_addr=64 * out_slot)]
    return SfpuProgram(setup=[], body=body, dst_slots=3, out_slot=out_slot)


def sfpu_copy(src_slot: int, out_slot: int, mod0: int = 4) -> SfpuProgram:
    """out = input src_slot, raw 32-bit (INT32 mode) so integers and bools pass unchanged."""
    body = [isa.encode("SFPLOAD", lreg_ind=0, instr_mod0=mod0, dest_reg_addr=64 * src_slot),
            isa.encode("SFPSTORE", lreg_ind=0, instr_mod0=mod0, sfpu_addr_mode=1, dest_reg_addr=64 * out_slot)]
    return SfpuProgram(setup=[], body=body, dst_slots=max(src_slot, out_slot) + 1, out_slot=out_slot)


def sfpu_axpb(out_slot=1) -> SfpuProgram:
    """y = 2x + 1 on input 0 (the reference sequence of docs/sfpu_path.md §10), with setup words."""
    setup = [isa.encode("SFPLOADI", lreg_ind=2, instr_mod0=0, imm16=0x4000),
             isa.encode("SFPLOADI", lreg_ind=3, instr_mod0=0, imm16=0x3F80)]
    body = [isa.encode("SFPLOAD", lreg_ind=0, instr_mod0=3, dest_reg_addr=0),
            isa.encode("SFPMAD", lreg_src_a=0, lreg_src_b=2, lreg_src_c=3, lreg_dest=1),
            isa.encode("SFPSTORE", lreg_ind=1, instr_mod0=3, sfpu_addr_mode=1, dest_reg_addr=64 * out_slot)]
    return SfpuProgram(setup=setup, body=body, dst_slots=2, out_slot=out_slot)


ESZ = {"float32": 4, "bfloat16": 2, "int32": 4, "bool": 1}


def make_plan(name, ranges, buffers, inputs, output, prog) -> ElementwisePlan:
    """buffers: [(dtype, n_elements)], inputs/output: Stream. Buffer k is tinygrad slot k."""
    bufs = [Buffer(k, dt, n * ESZ[dt]) for k, (dt, n) in enumerate(buffers)]
    return allocate_l1(ElementwisePlan(name, tuple(ranges), bufs, inputs, output, prog))


def plan_add(n=3000, gather=True, out_dtype="bfloat16", b_dtype="float32"):
    """out[r0,r1] = a[r0,r1] + b[r1,r0] (b stored transposed) over (n/100, 100)."""
    rows = n // 100
    b_idx = r1 * rows + r0 if gather else r0 * 100 + r1
    return make_plan("add_t", (rows, 100), [(out_dtype, n), ("float32", n), (b_dtype, n)],
                     [Stream(1, "float32", r0 * 100 + r1, contiguous=True),
                      Stream(2, b_dtype, b_idx, contiguous=not gather)],
                     Stream(0, out_dtype, r0 * 100 + r1, contiguous=True), sfpu_add())


def compile_plan(plan):
    sources, headers = split(plan.render())
    return C.compile_kernel(sources, headers, plan.name)


# --- compiler discovery ----------------------------------------------------------------------------------------------
def test_compiler_not_found_says_what_to_install(monkeypatch):
    monkeypatch.delenv("SFPI_ROOT", raising=False)
    monkeypatch.setattr(C, "_find_sfpi", lambda: None)
    monkeypatch.setattr(C.shutil, "which", lambda name: None)
    monkeypatch.setitem(__import__("sys").modules, "ziglang", None)   # import ziglang -> ImportError
    with pytest.raises(CompilerNotFound) as e:
        C.find_compiler()
    assert "gcc-riscv64-unknown-elf" in str(e.value) and "pip install ziglang" in str(e.value)


@pytest.mark.skipif(shutil.which("riscv64-unknown-elf-gcc") is None and C._find_sfpi() is None,
                    reason="needs riscv64-unknown-elf-gcc or SFPI (the compilers preferred over clang)")
def test_find_compiler_prefers_gcc_over_clang():
    c = C.find_compiler()
    assert c.kind in ("sfpi", "gcc") and c.version


# --- compile, size gate, cache ---------------------------------------------------------------------------------------
@pytest.mark.needs_cc
@pytest.mark.parametrize("kw", [dict(), dict(gather=False, out_dtype="float32"), dict(b_dtype="bfloat16")])
def test_all_five_compile_and_fit_their_slots(kw):
    elfs = compile_plan(plan_add(**kw))
    assert set(elfs) == set(layout.CORES)
    for core, elf in elfs.items():
        img = driver.load_elf_segments(elf)
        lo = layout.IMAGE_SLOT[core]
        assert img.entry == lo, core           # crt0 first in the slot
        size = C.image_size(elf)
        assert 0 < size <= layout.IMAGE_SLOT_SIZE, (core, size)
        # the loader's struct reading of the headers against pyelftools' (an independent ELF reader)
        ref = ELFFile(io.BytesIO(elf))
        assert img.entry == ref["e_entry"]
        assert [(seg.paddr, seg.data) for seg in img.segments] == [
            (p["p_paddr"], p.data() + bytes(p["p_memsz"] - p["p_filesz"])) for p in ref.iter_segments()
            if p["p_type"] == "PT_LOAD" and p["p_memsz"]]
        with pytest.raises(TTError, match="not a loadable ELF"):
            driver.load_elf_segments(elf[:40])
        for seg in img.segments:
            assert lo <= seg.paddr and seg.paddr + len(seg.data) <= lo + layout.IMAGE_SLOT_SIZE


@pytest.mark.needs_cc
def test_tensix_words_of_the_reference_sequence_are_in_the_elfs():
    plan = plan_add(out_dtype="float32", b_dtype="bfloat16")
    plan.cores = plan.n_tiles     # one tile per core: one Dst group, TRISC1 moving the bf16 input as §10 lists it
    elfs = compile_plan(plan)
    words = {core: {w for _, w in C._ttinsn_words(elfs[core])} for core in ("trisc0", "trisc1", "trisc2")}
    # docs/sfpu_path.md §10 (semaphore max differs: one Dst group in flight)
    assert {0x5120000B, 0x5420000F, 0x5E23FC00, 0xA2400003, 0xB004004C, 0xB0050054, 0x54200005, 0x42088081,
            0xA2010002, 0xA4000004, 0x420080C1, 0x43800101, 0xB2050004} <= words["trisc0"]
    assert {0xB21D0002, 0xB2010000, 0xA2010810, 0xA4000008, 0xB20E0008, 0xB21E0008, 0x28008000, 0x37C00003,
            0x37000007} <= words["trisc1"]
    assert {0xB2250004, 0xB2261020, 0xB2272020, 0x5180000B, 0x5480000F, 0x5E803C00, 0xA2400009, 0xB0040045,
            0xB00500B4, 0x41000000, 0x41008000, 0x41010001, 0xA2010008, 0xA4000010} <= words["trisc2"]
    text = C.disassemble(elfs["trisc0"])
    assert "UNPACR" in text and "SEMINIT" in text


# kernels lowered from tinygrad: two Dst groups with bf16 inputs and an fp32 or bf16 head (one core, 3 tiles), and an
# SFPU reduction (its writer scatters the outputs)
WARNING_FREE = [("head_bf16", lambda a, b: a + (b + 1.0).maximum(0.5), [(3000,), (1,)], "bfloat16"),
                ("head_fp32", lambda a, b: a + (b + 1.0).maximum(0.5), [(3000,), (1,)], "float32"),
                ("reduce", lambda a, b: (a - b).exp().sum(axis=1), [(64, 100), (64, 100)], "float32")]


@pytest.mark.needs_cc
@pytest.mark.parametrize("name,fn,shapes,dtype", WARNING_FREE, ids=[c[0] for c in WARNING_FREE])
def test_generated_sources_compile_without_warnings(name, fn, shapes, dtype, tmp_path):
    """Each core's source, with the flags of its build (-Wall), draws no compiler diagnostic."""
    from tinygrad import Tensor
    from tinygrad.uop.ops import Ops
    from tt_backend.lowering.select import lower
    ins = [Tensor(np.ones(s, np.float32), device="PYTHON").cast(dtype).realize() for s in shapes]
    calls = [c for c in fn(*ins).schedule_linear().src if c.op is Ops.CALL and c.src[0].op is Ops.SINK]
    c, lib = C.compiler(), C._library_files()
    for i, call in enumerate(calls):
        plan = lower(call.src[0], f"k{i}")
        plan.cores = 1
        sources, headers = split(plan.render())
        for fname, text in {**lib, **headers}.items():
            (tmp_path / fname).write_text(text)
        for core, src in sources.items():
            (tmp_path / f"{core}.c").write_text(src)
            r = subprocess.run(c.cc + C._flags(c, core) + ["-fsyntax-only", str(tmp_path / f"{core}.c")],
                               capture_output=True, text=True, cwd=tmp_path)
            assert r.returncode == 0 and not r.stderr.strip(), f"{name} {plan.name} {core}:\n{r.stderr}"


@pytest.mark.needs_cc
def test_cache_hit_on_unchanged_kernel(monkeypatch):
    plan = plan_add()
    started, run_jobs = [], C._run_jobs
    monkeypatch.setattr(C, "_run_jobs", lambda jobs, timings: started.extend(j.label for j in jobs) or
                        run_jobs(jobs, timings))
    before = dict(C.STATS)
    first = compile_plan(plan)
    mid = dict(C.STATS)
    second = compile_plan(plan)
    assert mid["compiled"] - before["compiled"] == 5
    # the five builds were handed to the pool in C.BUILD_ORDER (which names every core)
    assert sorted(C.BUILD_ORDER) == sorted(layout.CORES)
    assert [label for label in started if label in layout.CORES] == list(C.BUILD_ORDER)
    assert C.STATS["compiled"] == mid["compiled"] and found() - mid["cache_hits"] - mid["programs_reused"] == 5
    assert first == second
    # another size: only the reader is rebuilt (its gather walks the iteration ranges, compile-time constants of
    # args.h); the writer and the compute kernel read none of what changed
    plan2 = plan_add(n=2000)
    compile_plan(plan2)
    assert C.STATS["compiled"] - mid["compiled"] == 1


@pytest.mark.needs_cc
def test_reused_crt0_object_gives_the_same_images(tmp_path, monkeypatch):
    """Kernels built with crt0.S assembled once per core and reused as an object load the same bytes as kernels
    built from crt0.S each time (the reference), and a later build in the process does reuse the object."""
    monkeypatch.setattr(C, "_objects", {})
    built = {}
    for reuse in (True, False):
        monkeypatch.setattr(C, "REUSE_CRT0", reuse)
        reused = C.STATS["crt0_reused"]
        built[reuse] = []
        for n in (3000, 2000):      # each on an empty cache: the second kernel's images would be hits (reader aside)
            monkeypatch.setenv("TT_CACHE_DIR", str(tmp_path / f"{reuse}{n}"))
            monkeypatch.setattr(C, "_programs", {})
            built[reuse].append(compile_plan(plan_add(n)))
        assert C.STATS["crt0_reused"] - reused == (5 if reuse else 0)     # the second kernel's five cores
    for with_obj, reference in zip(built[True], built[False]):
        assert {k: driver.load_elf_segments(v) for k, v in with_obj.items()} == \
            {k: driver.load_elf_segments(v) for k, v in reference.items()}


@pytest.mark.needs_cc
def test_direct_tool_steps_link_the_drivers_bytes(tmp_path, monkeypatch):
    """With Debian's GCC a core's image is built by cc1, as and ld run directly (runtime/gcc_steps.py): the ELFs are
    the driver's own, byte for byte. A command line whose plan is not cc1 -> as -> collect2 (crt0.S among the inputs:
    a second assembly) gets no steps, and the driver runs."""
    c = C.compiler()
    if c.kind != "gcc": pytest.skip("direct steps apply to Debian's GCC only")
    flags = tuple(C._flags(c, "brisc"))
    assert gcc_steps.driver_steps(tuple(c.cc), flags, ("crt0_brisc.o",), tuple(c.extra)) is not None
    assert gcc_steps.driver_steps(tuple(c.cc), flags, ("crt0.S",), tuple(c.extra)) is None
    built = {}
    for direct in (True, False):
        monkeypatch.setattr(C, "DIRECT_STEPS", direct)
        monkeypatch.setenv("TT_CACHE_DIR", str(tmp_path / str(direct)))
        built[direct] = compile_plan(plan_add(2000))
    assert built[True] == built[False]


@pytest.mark.needs_cc
def test_device_library_is_compiled_once_and_linked_from_its_object(tmp_path, monkeypatch):
    """templates/device/tt_libc.c is compiled by the first build of the process only; every image carries its
    memset/memcpy once, byte for byte the object's code, right after crt0."""
    monkeypatch.setattr(C, "_objects", {})
    first, second = {}, {}
    monkeypatch.setenv("TT_CACHE_DIR", str(tmp_path / "first"))       # no object from an earlier build on disk
    C.compile_kernel(*split(plan_add(3000).render()), "first", timings=first)
    monkeypatch.setenv("TT_CACHE_DIR", str(tmp_path / "second"))      # an empty cache: all five cores are built
    monkeypatch.setattr(C, "_programs", {})
    elfs = C.compile_kernel(*split(plan_add(2000).render()), "second", timings=second)
    assert "tt_libc.o" in first and "tt_libc.o" not in second and set(second) == set(layout.CORES)
    (obj,) = [v for k, v in C._objects.items() if k[2] == "tt_libc.c"]
    code = ELFFile(io.BytesIO(obj)).get_section_by_name(".text").data()
    for core, elf in elfs.items():
        f = ELFFile(io.BytesIO(elf))
        syms = {s.name: s["st_value"] for s in f.get_section_by_name(".symtab").iter_symbols()}
        text = f.get_section_by_name(".text")
        at = syms["memset"] - text["sh_addr"]
        assert text.data()[at:at + len(code)] == code and min(syms["memset"], syms["memcpy"]) == syms["memset"], core
        assert syms["_start"] < syms["memset"] < syms["kmain"], core


@pytest.mark.needs_cc
def test_a_new_process_links_the_library_objects_from_the_disk_cache(tmp_path, monkeypatch):
    """crt0 and the device library's objects go to the cache with the images: a process that has built none finds
    them there (no compiler process for them) and links the same images as the process that compiled them."""
    monkeypatch.setenv("TT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(C, "_objects", {})
    sources, headers = split(plan_add(3000).render())
    first, second = {}, {}
    built = C.compile_kernel(sources, headers, "first", timings=first)
    assert {"tt_libc.o", "crt0_brisc.o"} <= set(first)
    monkeypatch.setattr(C, "_objects", {})                              # a new process
    monkeypatch.setattr(C, "_programs", {})
    for p in (tmp_path / "cache").iterdir():                            # the images go, the objects stay
        if p.suffix == ".elf" and ELFFile(io.BytesIO(C.entry_elf(p.read_bytes()))).header.e_type == "ET_EXEC":
            p.unlink()
    again = C.compile_kernel(sources, headers, "again", timings=second)
    assert set(second) == set(layout.CORES) and again == built


CHAINS = """top
#if defined(TRISC_UNPACK)
unpack
#if N > 1
unpack loop
#endif
#elif defined TRISC_MATH
math
#else
other
#endif
#ifndef TRISC_PACK
not pack
#endif
#if N > 1
#ifdef TRISC_MATH
math loop
#endif
#elif defined(TRISC_PACK)
pack or N <= 1
#endif
end"""


def test_core_view_keeps_what_the_core_compiles():
    """A chain testing only TRISC defines keeps the core's branch; one testing anything else stays as written, the
    TRISC chains inside it decided."""
    view = {core: C.core_view(CHAINS, core).split("\n") for core in ("trisc0", "trisc1", "trisc2", "brisc")}
    opaque = ["#if N > 1", "#elif defined(TRISC_PACK)", "pack or N <= 1", "#endif"]
    assert view["trisc0"] == ["top", "unpack", "#if N > 1", "unpack loop", "#endif", "not pack", *opaque, "end"]
    assert view["trisc1"] == ["top", "math", "not pack", "#if N > 1", "math loop", *opaque[1:], "end"]
    assert view["trisc2"] == ["top", "other", *opaque, "end"]
    assert view["brisc"] == ["top", "other", "not pack", *opaque, "end"]
    for whole in (CHAINS + "\nint line = __LINE__;", "#define TRISC_MATH\n" + CHAINS, CHAINS + "\n#if X"):
        assert C.core_view(whole, "trisc0") == whole


@pytest.mark.needs_cc
def test_kernels_differing_in_their_math_share_the_unpack_and_pack_images(tmp_path, monkeypatch):
    """a + b and b + a (another SFPU word, the same streams) differ in TRISC1's part of the compute source only: the
    TRISC0 and TRISC2 images are cache hits, and they are the images each kernel's own build gives (the kernels'
    own code, not the shared programs that otherwise run on those cores)."""
    monkeypatch.setenv("TT_SHARED_PROGRAMS", "0")
    swapped = sfpu_add()
    swapped.body[2] = isa.encode("SFPADD", lreg_src_a=10, lreg_src_b=1, lreg_src_c=0, lreg_dest=2)
    rows = r0 * 100 + r1
    streams = ([Stream(1, "float32", rows, contiguous=True), Stream(2, "float32", rows, contiguous=True)],
               Stream(0, "float32", rows, contiguous=True))
    plans = [make_plan(name, (30, 100), [("float32", 3000)] * 3, *streams, prog)
             for name, prog in (("add", sfpu_add()), ("add_swapped", swapped))]
    sources = [split(p.render()) for p in plans]
    assert sources[0][0]["trisc0"] != sources[1][0]["trisc0"]
    first = C.compile_kernel(*sources[0], "first")
    hits = C.STATS["cache_hits"]
    second = C.compile_kernel(*sources[1], "second")
    assert C.STATS["cache_hits"] - hits == 4 and second["trisc1"] != first["trisc1"]   # brisc, ncrisc, trisc0, trisc2
    monkeypatch.setenv("TT_CACHE_DIR", str(tmp_path / "alone"))
    alone = C.compile_kernel(*sources[1], "alone")
    for core in ("trisc0", "trisc2"):
        assert driver.load_elf_segments(alone[core]) == driver.load_elf_segments(second[core]), core


def test_key_ignores_comments_and_unreached_args():
    """Two args.h that differ in comments, a buffer size no one names and the ranges of an iteration helper no one
    calls give one key; naming the size, or calling the helper, makes the difference count again."""
    c, lib = C.compiler(), C._library_files()

    def args(n: int) -> str:
        return (f"/* kernel E_{n} */\n#ifndef TT_ARGS_H\n#define TT_ARGS_H\n#include <stdint.h>\n"
                "#define ARG_N_TILES 0\n"
                f"#define BUF0_NBYTES {4 * n}u  /* float32 */\nstatic const uint32_t tt_ranges[1] = {{{n}u}};\n"
                "static inline uint32_t tt_first_range(void)\n{\n    return tt_ranges[0];\n}\n#endif\n")
    src = '#include "args.h"\n/* kernel E_64 */\nint kmain(void) { return ARG_N_TILES; }\n'

    def key(source: str, n: int) -> str:
        return C._key(c, "brisc", source, {"args.h": args(n)}, lib, "ld")
    assert key(src, 64) == key(src.replace("E_64", "E_32"), 32)
    assert key(src.replace("ARG_N_TILES;", "BUF0_NBYTES;"), 64) != key(src.replace("ARG_N_TILES;", "BUF0_NBYTES;"), 32)
    assert key(src.replace("ARG_N_TILES;", "tt_first_range();"), 64) != \
        key(src.replace("ARG_N_TILES;", "tt_first_range();"), 32)
    assert key('#include "args.h"\nint kmain(void) { return 0; } /* "E_64" */\n', 64) != \
        key('#include "args.h"\nconst char *s = "/* E_64 */"; int kmain(void) { return 0; }\n', 64)


@pytest.mark.needs_cc
def test_kernels_of_other_shapes_share_images(tmp_path, monkeypatch):
    """The same contiguous kernel at another size: its sources and args.h differ only in comments and in sizes no
    core reads at compile time (they are runtime arguments), so all five images come from the cache, and they load
    what a build of that kernel on an empty cache loads."""
    compile_plan(plan_add(3000, gather=False, out_dtype="float32"))
    hits = found()
    other = plan_add(2000, gather=False, out_dtype="float32")
    other.name = "add_2000"
    shared = compile_plan(other)
    assert found() - hits == 5
    monkeypatch.setenv("TT_CACHE_DIR", str(tmp_path / "empty"))
    monkeypatch.setattr(C, "_programs", {})
    alone = compile_plan(other)
    assert {k: driver.load_elf_segments(v) for k, v in shared.items()} == \
        {k: driver.load_elf_segments(v) for k, v in alone.items()}


@pytest.mark.needs_cc
def test_size_gate_refuses_an_oversized_image():
    sources, headers = split(plan_add().render())
    sources = {"ncrisc": sources["ncrisc"].replace(
        "int kmain(void)", "static volatile uint32_t big[5000];\nint kmain(void)").replace(
        "tt_noc_init(&noc, TT_NOC1_BASE);", "tt_noc_init(&noc, TT_NOC1_BASE); big[4999] = 1;")}
    with pytest.raises(KernelTooLarge) as e:
        C.compile_kernel(sources, headers, "too_big")
    msg = str(e.value)
    assert "ncrisc" in msg and "bss 2000" in msg and str(layout.IMAGE_SLOT_SIZE) in msg and "text" in msg


@pytest.mark.needs_cc
def test_compile_error_names_the_core():
    sources, headers = split(plan_add().render())
    with pytest.raises(TTError, match="trisc1"):
        C.compile_kernel({"trisc1": sources["trisc1"] + "\nthis is not C;\n"}, headers, "broken")


# --- driver pieces -----------------------------------------------------------------------------------------------------
def test_jal_encoding():
    assert driver.jal_x0(0x4000) == 0x0000406F          # docs/launch_noc.md §3.1
    assert driver.jal_x0(0x1000) == 0x0000106F
    assert driver.jal_x0(-4) == 0xFFDFF06F


# --- end to end on the emulator --------------------------------------------------------------------------------------
def _iter_indices(ranges):
    grids = np.meshgrid(*[np.arange(r, dtype=np.int64) for r in ranges], indexing="ij")
    return [g.reshape(-1) for g in grids]


def to_dram(values: np.ndarray, dtype: str) -> bytes:
    if dtype == "bfloat16":
        return (np.asarray(values, np.float32).view(np.uint32) >> 16).astype(np.uint16).tobytes()
    return np.asarray(values, {"float32": np.float32, "int32": np.int32, "bool": np.uint8}[dtype]).tobytes()


def from_dram(raw: bytes, dtype: str) -> np.ndarray:
    if dtype == "bfloat16":
        return (np.frombuffer(raw, np.uint16).astype(np.uint32) << 16).view(np.float32)
    return np.frombuffer(raw, {"float32": np.float32, "int32": np.int32, "bool": np.uint8}[dtype])


def packer_bf16(x: np.ndarray) -> np.ndarray:
    """fp32 -> bf16 as the packer rounds (round half away from zero on the magnitude; normal inputs only)."""
    u = np.asarray(x, np.float32).view(np.uint32)
    return (((u + 0x8000) >> 16) << 16).astype(np.uint32).view(np.float32)


def run_plan(dev, plan, data: dict[int, np.ndarray], out_init=None):
    """Place each buffer at a 64-aligned DRAM address, launch, return the output buffer."""
    addrs, addr = [], 0x40000
    for k, b in enumerate(plan.buffers):
        addrs.append(addr)
        if k in data:
            dev.write_dram(addr, to_dram(data[k], b.dtype))
        addr += (b.nbytes + 0xFFF) & ~0xFFF
    out = plan.output.buf
    if out_init is not None:
        dev.write_dram(addrs[out], to_dram(out_init, plan.buffers[out].dtype))
    elfs = compile_plan(plan)
    res = driver.launch(dev, elfs, plan.arg_words(addrs), timeout_s=120)
    assert all(c.done == res.generation and c.error == 0 for c in res.cores.values())
    assert {c.progress for c in res.cores.values()} == {plan.n_tiles}
    return from_dram(dev.read_dram(addrs[out], plan.buffers[out].nbytes), plan.buffers[out].dtype)


rng = np.random.default_rng(1)


@pytest.mark.needs_cc
@pytest.mark.parametrize("gather,out_dtype,b_dtype", [(False, "float32", "float32"), (True, "float32", "float32"),
                                                      (True, "bfloat16", "float32"), (False, "float32", "bfloat16"),
                                                      (True, "bfloat16", "bfloat16")])
def test_add_end_to_end(new_device, gather, out_dtype, b_dtype):
    n = 3000                                   # 3 tiles, the last one partial
    plan = plan_add(n, gather=gather, out_dtype=out_dtype, b_dtype=b_dtype)
    a = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    if b_dtype == "bfloat16":
        b = (b.view(np.uint32) & 0xFFFF0000).view(np.float32)
    got = run_plan(new_device(), plan, {1: a, 2: b})
    bt = b.reshape(100, n // 100).T.reshape(-1) if gather else b
    ref = a + bt
    if out_dtype == "bfloat16":
        ref = packer_bf16(ref)
    np.testing.assert_array_equal(got, ref)


@pytest.mark.needs_cc
def test_window_reloads_and_scattered_output(new_device):
    """A transposed read of a buffer larger than the staging window (reloads) and a transposed (scattered) write."""
    R0, R1 = 48, 300                            # 14400 elements, 57600-byte buffers > STAGING_BYTES
    n = R0 * R1
    plan = make_plan("transpose_add", (R0, R1), [("float32", n), ("float32", n), ("float32", n)],
                     [Stream(1, "float32", r0 * R1 + r1, contiguous=True),
                      Stream(2, "float32", r1 * R0 + r0)],
                     Stream(0, "float32", r1 * R0 + r0), sfpu_add())
    a = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    got = run_plan(new_device(), plan, {1: a, 2: b})
    ref = (a.reshape(R0, R1) + b.reshape(R1, R0).T).T.reshape(-1)
    np.testing.assert_array_equal(got, ref)


@pytest.mark.needs_cc
def test_padded_gather_reads_zero_outside_valid(new_device):
    """out[r0, r1] = 2 * (r1 < 32 ? x[r0, r1] : 0) + 1 over (10, 40): a pad, and an SFPU setup block."""
    plan = make_plan("pad", (10, 40), [("float32", 400), ("float32", 320)],
                     [Stream(1, "float32", r0 * 32 + r1, valid=r1.lt(32))],
                     Stream(0, "float32", r0 * 40 + r1, contiguous=True), sfpu_axpb())
    x = rng.standard_normal(320).astype(np.float32)
    got = run_plan(new_device(), plan, {1: x})
    padded = np.zeros((10, 40), np.float32)
    padded[:, :32] = x.reshape(10, 32)
    np.testing.assert_array_equal(got, (padded * 2 + 1).reshape(-1))


@pytest.mark.needs_cc
@pytest.mark.parametrize("in_dtype,in_contig,out_dtype,out_contig", [
    ("bool", True, "bool", True), ("bool", False, "int32", True), ("int32", True, "bool", False),
    ("int32", False, "int32", False)])
def test_integer_and_bool_streams(new_device, in_dtype, in_contig, out_dtype, out_contig):
    """Raw 32-bit copy through the SFPU (INT32 mode): bool bytes widen to u32 0/1 and narrow back to bytes."""
    n = 2500
    idx = r0 if in_contig else (n - 1) - r0
    out_idx = r0 if out_contig else (n - 1) - r0
    plan = make_plan("copy", (n,), [(out_dtype, n), (in_dtype, n), ("float32", n)],
                     [Stream(2, "float32", r0, contiguous=True), Stream(1, in_dtype, idx, contiguous=in_contig)],
                     Stream(0, out_dtype, out_idx, contiguous=out_contig), sfpu_copy(src_slot=1, out_slot=2))
    if in_dtype == "bool":
        x = rng.integers(0, 2, n).astype(np.uint8) * rng.integers(1, 255, n).astype(np.uint8)  # any nonzero = True
    else:
        x = rng.integers(-5, 5, n).astype(np.int32)
    got = run_plan(new_device(), plan, {1: x, 2: np.zeros(n, np.float32)})
    v = x.astype(np.int64)
    if in_dtype == "bool":
        v = (v != 0).astype(np.int64)
    if not in_contig:
        v = v[::-1]
    if out_dtype == "bool":
        v = (v != 0).astype(np.int64)
    if not out_contig:
        v = v[::-1]
    np.testing.assert_array_equal(got.astype(np.int64), v)


@pytest.mark.needs_cc
def test_relaunch_on_the_same_device_and_single_element(new_device):
    """Stale L1 state (CB counters, ready words, semaphores, NIU counters) from a previous launch must not leak."""
    dev = new_device()
    plan = plan_add(3000, gather=True, out_dtype="float32")
    for _ in range(2):
        a = rng.standard_normal(3000).astype(np.float32)
        b = rng.standard_normal(3000).astype(np.float32)
        got = run_plan(dev, plan, {1: a, 2: b})
        np.testing.assert_array_equal(got, a + b.reshape(100, 30).T.reshape(-1))
    zero = IndexExpr.const(0)
    one = make_plan("one", (), [("float32", 1), ("float32", 1)], [Stream(1, "float32", zero, contiguous=True)],
                    Stream(0, "float32", zero, contiguous=True), sfpu_axpb())
    got = run_plan(dev, one, {1: np.array([3.0], np.float32)})
    assert got.tolist() == [7.0]


@pytest.mark.needs_cc
def test_timeout_sets_stop_and_reports_every_core(new_device):
    """Only the writer is launched: it waits for a tile nobody produces, retires on the stop flag, and the
    DeviceTimeout names its status and the emulator's core states."""
    dev = new_device()
    plan = plan_add()
    elfs = compile_plan(plan)
    with pytest.raises(DeviceTimeout) as e:
        driver.launch(dev, {"ncrisc": elfs["ncrisc"]}, plan.arg_words([0x40000, 0x80000, 0xC0000]),
                      timeout_s=0.3)
    msg = str(e.value)
    assert "ncrisc: error 1 (stopped by the host)" in msg
    # the device stays usable: the next launch works
    a = rng.standard_normal(3000).astype(np.float32)
    b = rng.standard_normal(3000).astype(np.float32)
    got = run_plan(dev, plan_add(out_dtype="float32"), {1: a, 2: b})
    np.testing.assert_array_equal(got, a + b.reshape(100, 30).T.reshape(-1))
