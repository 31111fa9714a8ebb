"""The TT device for tinygrad 0.14 (served as `tinygrad.runtime.ops_tt` by tt_backend._finder).

tinygrad's own codegen linearizes a kernel into scalar loops before a renderer sees it; the TT backend wants whole
kernels (tile ops over an iteration space). So this module wraps `tinygrad.codegen.do_to_program`: for a TT renderer
it lowers the kernel's SINK AST itself (lowering.select -> plan.render -> runtime.compile) and returns a finished
PROGRAM whose SOURCE is the rendered C (DEBUG=4 shows it) and whose BINARY is a bundle of one ELF per core plus the
launch metadata. Every other renderer goes through tinygrad unchanged.

Importing this module installs the wrapper. That matters: tinygrad compiles kernels in spawned worker processes that
import the renderer class by its module, with device access disabled, so the module must install the hook itself,
be cheap to import and never open the device: the lowering, the compiler driver and the precision evaluators
(about 1.4 s of imports, `python -X importtime`) are imported where a kernel is first lowered (`lazy:` comments).
"""
from __future__ import annotations

import contextlib
import json
import struct
from dataclasses import replace
from pathlib import Path

import tinygrad.codegen as _codegen
from tinygrad.device import Compiled, Compiler, LRUAllocator, Program, TinyELF
from tinygrad.helpers import DEBUG, perf_counter_us, size_to_str
from tinygrad.renderer import Estimates, Renderer
from tinygrad.uop.ops import AddrSpace, AxisType, Ops, ProgramInfo, UOp

from tt_backend.chip import interleave, layout
from tt_backend.chip.errors import DeviceOutOfMemory, TTError, UnsupportedOp
from tt_backend import bound_variables, knobs, predictions, profiler, schedule_guard, tinygrad_knobs
from tt_backend.runtime import driver
from tt_backend.runtime.targets import make_device


# --------------------------------------------------------------------------------------------------------- bundle
# BINARY = MAGIC, u32 length of the JSON header, JSON header, then the ELFs back to back. JSON (not pickle) so a
# bundle is inspectable and does not depend on Python class layout. A kernel is one launch or, staged
# (lowering/families/staged.py), several in order: "launches" holds each one's name, argument words and ELF table
# (a launch split over several Tensix tiles: "tile_args", one argument block per tile, Plan.core_arg_words, and
# "tile_xys" when the plan places them, Plan.core_xys);
# "scratch" the sizes of the DRAM buffers its stages pass intermediates through (allocated per call).
MAGIC = b"TTBNDL2\0"


class _Addr:
    """Placeholder for 'DRAM address of plan buffer k' while recording the plan's argument layout."""
    def __init__(self, k: int): self.k = k


def pack_bundle(plan, elfs: list[dict[str, bytes]], extra: dict | None = None) -> bytes:
    """plan.launches with their ELFs (one dict per launch). A launch's buffer of slot s is the kernel's buffer s or,
    past the kernel's, scratch buffer s - len(plan.buffers)."""
    n = len(plan.buffers)
    launches, blobs, off = [], [], 0
    for stage, stage_elfs in zip(plan.launches, elfs, strict=True):
        slot = [b.slot for b in stage.buffers]
        blocks = [[int(a) if not isinstance(a, _Addr) else {"buf": slot[a.k]} if slot[a.k] < n else
                   {"scratch": slot[a.k] - n} for a in template]
                  for template in stage.core_arg_words([_Addr(k) for k in range(len(stage.buffers))])]
        cores = {}
        for core, elf in stage_elfs.items():
            cores[core] = [off, len(elf)]
            blobs.append(elf)
            off += len(elf)
        xys = stage.core_xys() if len(blocks) > 1 else None
        launches.append({"name": stage.name, "args": blocks[0], "cores": cores,
                         "prediction": predictions.of_plan(stage)}
                        | ({"tile_args": blocks} if len(blocks) > 1 else {})
                        | ({"tile_xys": [list(xy) for xy in xys]} if xys else {}))
    meta = {"name": plan.name, "launches": launches, "outs": plan.out_slots,
            "scratch": [b.nbytes for b in getattr(plan, "scratch", [])],
            "buffers": [{"slot": b.slot, "dtype": b.dtype, "nbytes": b.nbytes} for b in plan.buffers]}
    # "report": report.json path (TT_DUMP; "stage_reports" a staged kernel's stages' ones), "check": TT_CHECK's
    # reference (placement_eval)
    meta.update(extra or {})
    head = json.dumps(meta, sort_keys=True).encode()
    return MAGIC + struct.pack("<I", len(head)) + head + b"".join(blobs)


def unpack_bundle(lib: bytes) -> tuple[dict, list[dict[str, bytes]]]:
    """(the header, per launch its ELF per core)."""
    if not lib.startswith(MAGIC):
        raise TTError("not a TT kernel bundle (was this PROGRAM compiled by the TT backend?)")
    (n,) = struct.unpack_from("<I", lib, len(MAGIC))
    start = len(MAGIC) + 4
    meta = json.loads(lib[start:start + n])
    body = lib[start + n:]
    return meta, [{core: body[o:o + size] for core, (o, size) in launch["cores"].items()} for launch in meta["launches"]]


# A kernel indexed by tinygrad's DEVICE axis is one bundle per chip position: VARIANTS_MAGIC, u32 count, u32 length of
# each bundle, then the bundles (see device_variants).
VARIANTS_MAGIC = b"TTVRNT1\0"


def pack_variants(bundles: list[bytes]) -> bytes:
    return VARIANTS_MAGIC + struct.pack(f"<{1 + len(bundles)}I", len(bundles), *map(len, bundles)) + b"".join(bundles)


def unpack_variants(lib: bytes) -> list[bytes]:
    """The bundles of a BINARY: one per chip position for a DEVICE-axis kernel, else the BINARY itself."""
    if not lib.startswith(VARIANTS_MAGIC): return [lib]
    (n,) = struct.unpack_from("<I", lib, len(VARIANTS_MAGIC))
    sizes = struct.unpack_from(f"<{n}I", lib, len(VARIANTS_MAGIC) + 4)
    starts = [len(VARIANTS_MAGIC) + 4 * (n + 1) + sum(sizes[:j]) for j in range(n)]
    return [lib[s:s + size] for s, size in zip(starts, sizes)]


# ------------------------------------------------------------------------------------------- renderer + compiler

class TTCompiler(Compiler):
    """Compilation happens per kernel in the to_program hook (five sources -> five ELFs); this only disassembles."""

    def __init__(self): super().__init__(None)

    def compile(self, src: str) -> bytes:
        raise TTError("the TT backend compiles whole kernels in its to_program hook; tinygrad's linearized path "
                      "reached TTCompiler.compile, which means the hook in tt_backend.ops_tt is not installed")

    def disassemble(self, lib: bytes):
        # lazy: see the module doc (compile workers import this module)
        from tt_backend.runtime.compile import disassemble
        if lib.startswith(bound_variables.BOUND_MAGIC):
            print("// a kernel with variables: lowered and compiled at launch (DEBUG>=7 there shows each one)")
            return
        for bundle in unpack_variants(lib):
            meta, launches = unpack_bundle(bundle)
            for launch, elfs in zip(meta["launches"], launches):
                for core, elf in elfs.items():
                    print(f"// ===== {launch['name']} {core} =====")
                print(disassemble(elf))


class TTRenderer(Renderer):
    # what tinygrad's codegen would look at; it never runs for TT (the hook takes whole kernels), but keep it honest
    device = "TT"
    suffix = "TT"
    has_local = False          # no local/workgroup dims: also stops tinygrad's local-size search from launching us
    has_shared = False
    supports_float4 = False
    global_max = None
    local_max = None
    compiler = TTCompiler()

    def render(self, uops) -> str:
        raise TTError("linearized UOps reached the TT renderer: the to_program hook in tt_backend.ops_tt is missing")

    @property
    def tt_target(self):
        """The execution target code is generated for. It travels in tinygrad's Target.arch (TTDevice sets it), so it
        reaches compile workers (renderers are pickled as their Target) and is part of tinygrad's program cache key."""
        # lazy: see the module doc (compile workers import this module)
        from tt_backend.lowering.plan import TARGETS
        name = self.target.arch or knobs.backend()
        if name not in TARGETS:
            raise TTError(f"TT renderer arch {name!r} is not a TT target ({', '.join(TARGETS)})")
        # the macro-free schedules on a target that implements SFPLOADMACRO too, unless TT_SFPU_MACRO=1 asks for them
        return TARGETS[name] if knobs.sfpu_macro() else replace(TARGETS[name], macro_free=True)

    def supported_dtypes(self):
        """tinygrad's dtype-support declaration (tests and tinygrad's own dtype choices consult it): the dtypes the
        lowering takes (lowering/frontend.py DTYPE_NAME). int64, uint64, float64 and the fp8s are left out: the SFPU
        has 32-bit lanes and they are not emulated, so a kernel using them is refused with UnsupportedOp."""
        # lazy: see the module doc (compile workers import this module)
        from tt_backend.lowering.frontend import DTYPE_NAME
        return set(DTYPE_NAME)


def kernel_name(ast: UOp) -> str:
    """tinygrad-style: E_ (elementwise; r_ with a reduction) and the iteration space, e.g. E_64_128."""
    rngs = sorted({u for u in ast.toposort() if u.op is Ops.RANGE}, key=lambda r: r.arg[0])
    sizes = [str(r.src[0].arg) if r.src[0].op is Ops.CONST else "n" for r in rngs]
    prefix = "r" if any(u.op is Ops.REDUCE for u in ast.toposort()) else "E"
    return "_".join([prefix, *sizes]) if sizes else f"{prefix}_1"


def format_source(sources: dict[str, str], headers: dict[str, str]) -> str:
    """One readable text for DEBUG=4: each distinct source once (the three TRISCs share the compute kernel)."""
    parts, seen = [], {}
    for core, src in sources.items():
        if src in seen:
            seen[src].append(core)
            continue
        seen[src] = [core]
    for src, cores in seen.items():
        parts.append(f"// ===== {'/'.join(cores)} =====\n{src}")
    if "args.h" in headers:
        parts.append(f"// ===== args.h =====\n{headers['args.h']}")
    return "\n".join(parts)


def tt_to_program(ast: UOp, renderer: TTRenderer) -> UOp:
    """SINK AST -> finished PROGRAM(SINK', LINEAR(params), SOURCE, BINARY). Raises UnsupportedOp naming the op. A kernel
    with tinygrad Variables is lowered at launch instead, once per bound value (tt_backend/bound_variables.py)."""
    if ast.op is Ops.PROGRAM:
        if isinstance(ast.arg, ProgramInfo) and ast.src[-1].op is Ops.BINARY: return ast
        ast = ast.src[0]
    if ast.op is not Ops.SINK: raise UnsupportedOp(f"cannot lower a {ast.op.name} for TT")
    # lazy: see the module doc (tinygrad's spawned compile workers import this module and must stay cheap)
    from tt_backend import debug
    tinygrad_knobs.beam_notice(ast.arg.beam)
    debug.before_lowering(ast)
    name = kernel_name(ast)
    params = sorted((u for u in ast.toposort() if u.op is Ops.PARAM and u.arg.addrspace is not AddrSpace.ALU),
                    key=lambda u: u.arg.slot)
    variables = tuple(ast.variables())
    if bound_variables.has_variables(ast):
        source = f"// {name}: lowered at launch for each value of {', '.join(v.expr for v in variables)}"
        binary = bound_variables.pack(ast, [v.expr for v in variables])
        scan = ProgramInfo.from_sink(ast)     # tinygrad's own reading of outs and ins: the STOREd and LOADed buffers
        est, outs, ins = Estimates(), scan.outs, scan.ins
    else:
        variants = device_variants(ast)
        built = [build_bundle(v, name, renderer.tt_target) for v in variants]
        plan, source, binary = built[0]
        if len(built) > 1:
            source = "\n".join(f"// ===== chip position {j} =====\n{src}" for j, (_, src, _) in enumerate(built))
            binary = pack_variants([b for *_, b in built])
        nbytes = sum(b.nbytes for b in plan.buffers)
        est = Estimates(ops=plan.n_elements * max(1, len(plan.ops)), lds=nbytes, mem=nbytes)
        outs, ins = plan.out_slots, plan.in_slots
    if DEBUG >= 7: renderer.compiler.disassemble(binary)
    sink = ast.replace(arg=replace(ast.arg, name=name, estimates=est))   # not `ast` itself: that would be a cycle
    info = ProgramInfo(name=name, global_size=(1, 1, 1), local_size=(1, 1, 1), vars=variables,
                       globals=tuple(p.arg.slot for p in params), outs=tuple(outs), ins=tuple(ins),
                       target=renderer.target)
    return UOp(Ops.PROGRAM, src=(sink, UOp(Ops.LINEAR, src=tuple(params)), UOp(Ops.SOURCE, arg=source),
                                 UOp(Ops.BINARY, arg=binary)), arg=info)


def build_bundle(variant: UOp, name: str, tt_target) -> tuple:
    """(plan, rendered source, BINARY bundle) of one kernel AST without variables, for `tt_target`
    (lowering.plan.TARGETS)."""
    # lazy: see the module doc
    from tt_backend import debug, dump
    from tt_backend.lowering.plan import for_target
    from tt_backend.lowering.select import lower
    from tt_backend.placement_eval import check_meta, placer   # placement under TT_ERR_BUDGET(_SAMPLED), TT_PLACE; TT_CHECK
    max_cores = min(knobs.cores() or tt_target.tiles, tt_target.tiles)      # a card's target has one tile
    plan = lower(variant, name, placer(knobs.err_budget(), knobs.place_spec(), sampled=knobs.budget_sampled()),
                 max_cores)
    d, key, texts, elf_sets, stage_reports = knobs.dump_dir(), variant.key.hex()[:8], [], [], []
    for stage in plan.launches:     # a staged plan (lowering/families/staged.py): each stage is a kernel of its own
        for_target(stage, tt_target)
        stage.use_cores(max_cores)
        sources, headers, elfs = compile_stage(stage)
        elf_sets.append(elfs)
        texts.append(format_source(sources, headers))
        if d is not None:
            stage_dir = dump.write_kernel(d, stage, sources, headers, elfs, key=key)
            stage_reports.append(str(stage_dir / "report.json"))
        debug.after_lowering(stage, elfs)
    source = "\n".join(texts)
    extra = {}
    if d is not None:
        extra["report"] = str((stage_dir if len(plan.launches) == 1 else dump.write_staged(d, plan, key))
                              / "report.json")
        if len(plan.launches) > 1:
            extra["stage_reports"] = stage_reports     # each launch's own cycles go into its stage's report
    if knobs.check():
        extra["check"] = check_meta(variant, plan.placement, knobs.err_budget())
    if DEBUG >= 4: print(source)
    return plan, source, pack_bundle(plan, elf_sets, extra)


def compile_stage(stage) -> tuple[dict[str, str], dict[str, str], dict[str, bytes]]:
    """(sources, headers, ELF images) of one launch. A reader image too large for its slot is rebuilt once with the
    compact reader (lowering/plan.py `Plan.compact_reader`: per-datum gathers, no specialised runs or walks), which the
    kernel's report names with the first image's size; a family whose sources the compact reader leaves as they were, or a compact image
    still too large, is refused with both sizes."""
    # lazy: see the module doc
    from tt_backend.chip.errors import KernelTooLarge
    from tt_backend.lowering.codegen.sources import split
    from tt_backend.runtime.compile import compile_kernel
    sources, headers = split(stage.render())
    try:
        return sources, headers, compile_kernel(sources, headers, stage.name)
    except KernelTooLarge as e:
        if stage.compact_reader:
            raise
        stage.compact_reader = f"the specialised reader did not fit: {e}"
        compact, compact_headers = split(stage.render())
        if compact == sources:
            stage.compact_reader = ""
            raise
        try:
            return compact, compact_headers, compile_kernel(compact, compact_headers, stage.name)
        except KernelTooLarge as e2:
            raise KernelTooLarge(f"{e2} (with the compact reader; the specialised one: {e})") from e


def device_variants(ast: UOp) -> list[UOp]:
    """A kernel of a multi-device tensor may index by its chip's position in the tensor's device tuple (a RANGE of
    AxisType.DEVICE, which tinygrad binds per chip at launch as the `_device_num` variable: 2D sharding, sharded
    embeddings). TT kernels take no runtime index variables, so such a kernel is lowered once per position with the
    range replaced by that constant (DeviceAxisProgram picks the variant at launch); [ast] without a DEVICE axis."""
    axes = {u for u in ast.toposort() if u.op is Ops.RANGE and u.arg[-1] is AxisType.DEVICE}
    if not axes: return [ast]
    if any(r.src[0].op is not Ops.CONST for r in axes):
        raise UnsupportedOp(f"kernel {kernel_name(ast)}: a DEVICE axis of symbolic size")
    return [ast.substitute({r: r.const_like(j) for r in axes}) for j in range(max(r.src[0].arg for r in axes))]


class _KnobsKey:
    """The knobs that change what a kernel compiles to (placement budget and pins, TT_CHECK's reference, TT_DUMP's
    files, TT_SFPU_MACRO's schedule). tinygrad keys its in-process program cache on the AST, the renderer's target and `to_program_config`'s
    values; this joins that tuple, so changing TT_ERR_BUDGET between two realizes of the same kernel re-lowers it
    instead of reusing the program placed under the old budget."""
    @property
    def value(self) -> tuple:
        return (knobs.err_budget(), knobs.budget_sampled(), knobs.place_spec(), knobs.check(), knobs.dump_dir(),
                knobs.sfpu_macro())


def install_hook() -> None:
    """Wrap tinygrad.codegen.do_to_program once: TT renderers take the whole-kernel path, everyone else is untouched.
    Also adds the TT knobs to tinygrad's program cache key (see _KnobsKey)."""
    current = _codegen.do_to_program
    if getattr(current, "__tt_hook__", False): return
    _codegen.to_program_config = (*_codegen.to_program_config, _KnobsKey())

    def do_to_program(ast: UOp, renderer: Renderer) -> UOp:
        if isinstance(renderer, TTRenderer): return tt_to_program(ast, renderer)
        return current(ast, renderer)
    do_to_program.__tt_hook__ = True
    do_to_program.__wrapped__ = current
    _codegen.do_to_program = do_to_program


install_hook()


# ------------------------------------------------------------------------------------------------------ allocator

DRAM_BASE = interleave.BUFFER_ALIGN    # keep address 0 free: a zero address in an argument block is always a bug
DRAM_ALIGN = 64              # NoC transfers want 64-byte aligned DRAM addresses (a sub-buffer view's offset too)
BUFFER_ALIGN = interleave.BUFFER_ALIGN   # every buffer starts in bank 0: its page i is in bank i mod 8


class TTBuffer:
    __slots__ = ("addr", "size", "base")

    def __init__(self, addr: int, size: int, base: TTBuffer | None = None):
        self.addr, self.size, self.base = addr, size, base

    def __repr__(self): return f"TTBuffer(0x{self.addr:X}, {self.size})"


class DramArena:
    """First-fit free list over the interleaved DRAM space (chip/interleave.py), buffers aligned to BUFFER_ALIGN (eight
    pages), neighbours merged on free."""

    def __init__(self, base: int, end: int):
        self.free_list: list[list[int]] = [[base, end - base]]   # sorted [addr, size]
        self.used: dict[int, int] = {}
        self.capacity = end - base

    def alloc(self, size: int) -> int:
        size = max(BUFFER_ALIGN, -(-size // BUFFER_ALIGN) * BUFFER_ALIGN)
        for i, (addr, n) in enumerate(self.free_list):
            if n >= size:
                if n == size: self.free_list.pop(i)
                else: self.free_list[i] = [addr + size, n - size]
                self.used[addr] = size
                return addr
        largest = max((n for _, n in self.free_list), default=0)
        raise DeviceOutOfMemory(
            f"TT DRAM exhausted: a buffer of {size_to_str(size)} does not fit (in use: {size_to_str(self.bytes_used)} of "
            f"{size_to_str(self.capacity)} in {len(self.used)} buffers; largest free block {size_to_str(largest)}). "
            f"Drop tensors you no longer need (del t), or work on smaller pieces")

    def free(self, addr: int) -> None:
        size = self.used.pop(addr)
        fl = self.free_list
        i = next((k for k, (a, _) in enumerate(fl) if a > addr), len(fl))
        fl.insert(i, [addr, size])
        if i + 1 < len(fl) and fl[i][0] + fl[i][1] == fl[i + 1][0]:          # merge with the next block
            fl[i][1] += fl.pop(i + 1)[1]
        if i > 0 and fl[i - 1][0] + fl[i - 1][1] == fl[i][0]:                # and with the previous one
            fl[i - 1][1] += fl.pop(i)[1]

    @property
    def bytes_used(self) -> int: return sum(self.used.values())


class TTAllocator(LRUAllocator):
    def __init__(self, dev: TTDevice):
        bank = getattr(dev.target, "dram_size", layout.DRAM_BANK_SIZE)           # a card has less than ttsim
        self.arena = DramArena(DRAM_BASE, interleave.size_limit(bank))   # addresses travel as u32 args
        super().__init__(dev, supports_copy_from_disk=False, supports_transfer=True)

    def alloc(self, size: int, options=None):
        # tinygrad's Allocator.alloc re-raises any MemoryError as its own "Allocation of X failed" with ours as the
        # cause; the user gets ours, which says how full the DRAM is and what to do
        try:
            return super().alloc(size, options)
        except MemoryError as e:
            if isinstance(e.__cause__, DeviceOutOfMemory): raise e.__cause__ from None
            raise

    def _alloc(self, size: int, options) -> TTBuffer:
        return TTBuffer(self.arena.alloc(size), size)

    def _free(self, opaque: TTBuffer, options) -> None:
        if opaque.base is None: self.arena.free(opaque.addr)

    def _copyin(self, dest: TTBuffer, src: memoryview) -> None:
        with self.dev.recovering(f"the copy of {src.nbytes} bytes to TT"):
            self.dev.target.write_dram(dest.addr, bytes(src))

    def _copyout(self, dest: memoryview, src: TTBuffer) -> None:
        dest = dest.cast("B") if dest.format != "B" or dest.ndim != 1 else dest
        with self.dev.recovering(f"the copy of {dest.nbytes} bytes from TT"):
            dest[:] = self.dev.target.read_dram(src.addr, dest.nbytes)

    def _transfer(self, dest: TTBuffer, src: TTBuffer, sz: int, src_dev: TTDevice, dest_dev: TTDevice) -> None:
        """A copy between two TT devices (tinygrad calls it for TT:a -> TT:b; each is its own chip). There is no
        chip-to-chip link on any target here, so the bytes go through the host: one DRAM read on the source chip,
        one DRAM write on the destination (without this, tinygrad would stage them in an extra host buffer)."""
        with src_dev.recovering(f"the copy of {sz} bytes from {src_dev.device} to {dest_dev.device}"):
            data = src_dev.target.read_dram(src.addr, sz)
        with dest_dev.recovering(f"the copy of {sz} bytes from {src_dev.device} to {dest_dev.device}"):
            dest_dev.target.write_dram(dest.addr, data)

    def _offset(self, buf: TTBuffer, size: int, offset: int) -> TTBuffer:
        return TTBuffer(buf.addr + offset, size, base=buf.base or buf)


# -------------------------------------------------------------------------------------------------------- program

def _bundle_problem(meta: dict, launches: list[dict[str, bytes]]) -> str | None:
    """What is wrong with an unpacked bundle's launch metadata (its header and core tables parsed), or None."""
    for key, kind in (("launches", list), ("outs", list), ("buffers", list), ("scratch", list)):
        if not isinstance(meta.get(key), kind): return f"{key!r} missing or not a {kind.__name__}"
    if not meta["launches"]: return "no launch"
    if not all(isinstance(b, dict) and isinstance(b.get("slot"), int) and isinstance(b.get("nbytes"), int)
               for b in meta["buffers"]): return "a buffer lacks its slot or size"
    if not all(isinstance(n, int) and n > 0 for n in meta["scratch"]): return "a scratch size is not a positive int"
    ref = {"buf": range(len(meta["buffers"])), "scratch": range(len(meta["scratch"]))}
    for launch, elfs in zip(meta["launches"], launches):
        if not isinstance(launch.get("args"), list): return "a launch's 'args' missing or not a list"
        if not launch["cores"] or set(launch["cores"]) - set(layout.CORES):
            return f"cores {sorted(launch['cores'])} are not a subset of {layout.CORES}"
        if any(len(elfs[c]) != size for c, (_, size) in launch["cores"].items()): return "an ELF is cut short"
        blocks = launch.get("tile_args", [launch["args"]])
        if not isinstance(blocks, list) or not all(isinstance(b, list) for b in blocks): return "bad 'tile_args'"
        xys = launch.get("tile_xys", [[0, 0]] * len(blocks))
        if not isinstance(xys, list) or len(xys) != len(blocks) or not all(
                isinstance(xy, list) and len(xy) == 2 and all(isinstance(c, int) for c in xy) for xy in xys):
            return "bad 'tile_xys'"
        if not all(isinstance(a, int) or (isinstance(a, dict) and len(a) == 1 and
                                          all(v in ref.get(k, ()) for k, v in a.items())) for b in blocks for a in b):
            return "an argument is neither a word nor a buffer or scratch index"
    return None


def _arg_word(a: int | dict, where: dict[str, list[int]]) -> int:
    """A launch's argument word: a constant, or {"buf"|"scratch": k} -> that buffer's DRAM address."""
    if isinstance(a, int): return a
    ((kind, k),) = a.items()
    return where[kind][k]


class TTProgram(Program):
    def __init__(self, dev: TTDevice, obj: TinyELF):
        self.dev, self.name, self.profile_key = dev, obj.name, obj.profile_key
        try:
            self.meta, self.elfs = unpack_bundle(obj.lib)
            problem = _bundle_problem(self.meta, self.elfs)
        except (struct.error, ValueError, TypeError, KeyError, AttributeError) as e:  # short, not JSON, wrong shapes
            problem = f"{type(e).__name__}: {e}"
        if problem is not None:
            raise TTError(f"kernel {obj.name}: damaged TT kernel bundle ({problem}); it was not made by this "
                          f"tt_backend. Compile the kernel again (drop saved TinyJit or program caches that hold it)")
        self.slots = [b["slot"] for b in self.meta["buffers"]]
        self.outs = set(self.meta["outs"])

    def __call__(self, *bufs, global_size=(1, 1, 1), local_size=(1, 1, 1), vals=(), wait=False, timeout=None, **kw):
        if len(bufs) != len(self.slots):
            raise TTError(f"{self.name}: expects {len(self.slots)} buffers (slots {self.slots}), got {len(bufs)}")
        if vals: raise UnsupportedOp(f"{self.name}: symbolic variables {vals}")
        # bufs arrive in ProgramInfo.globals order = ascending slot = the plan's buffer order
        target, arena = self.dev.target, self.dev.allocator.arena
        addrs, bounce, scratch = [b.addr for b in bufs], [], []
        for k, (b, desc) in enumerate(zip(bufs, self.meta["buffers"])):
            if b.addr % DRAM_ALIGN:
                # a sub-buffer view at an unaligned offset: the NoC needs aligned DRAM addresses and the kernels take
                # no base offset yet, so stage it through an aligned scratch copy (DRAM -> DRAM, no host compute)
                copy = arena.alloc(desc["nbytes"])
                target.write_dram(copy, target.read_dram(b.addr, desc["nbytes"]))
                bounce.append((k, copy))
                addrs[k] = copy
        t = knobs.timeout_s() if timeout is None else timeout / 1000   # tinygrad's timeouts are milliseconds
        before = [target.read_dram(addrs[k], d["nbytes"]) for k, d in enumerate(self.meta["buffers"])] \
            if "check" in self.meta else None          # TT_CHECK: the inputs as the kernel sees them
        # the emulated cycles of this launch go into report.json and trace.json (TT_DUMP), TT_CHECK's result, DEBUG>=2,
        # each launch's row of TT_PREDICTIONS
        record_to = knobs.predictions_file() if hasattr(target, "stats") else None
        if reports := (before is not None or "report" in self.meta or DEBUG >= 2 or profiler.enabled()
                       or record_to is not None):
            # lazy: see the module doc; only launches that report (TT_CHECK, TT_DUMP, DEBUG>=2, PROFILE,
            # TT_PREDICTIONS) need these
            from tt_backend import debug, trace
            from tt_backend.placement_eval import check, measured_cycles, record_cycles
        if hasattr(target, "set_timed"):   # the emulator: its cycle model only when this launch reports cycles or
            # measures its compute part L1 to L1 (whose refusal of a waiting reader needs the cycle model's spin check)
            target.set_timed(bool(reports) or knobs.l1_resident())
        # the stats before the first launch and after each one: a staged kernel's launches run one after another
        snaps = [target.stats()] if reports and hasattr(target, "stats") else None
        # per-lane timelines: for trace.json (TT_DUMP) and tinygrad's profiler (PROFILE=1 / VIZ=1)
        if timeline := ("report" in self.meta or profiler.enabled()):
            recording = hasattr(target, "timeline_begin")
            if recording: target.timeline_begin()
            host_st = perf_counter_us()
        try:
            # a staged kernel's intermediates: DRAM for this call only (sizes in the bundle, lowering/families/staged.py)
            for n in self.meta["scratch"]: scratch.append(arena.alloc(n))
            where = {"buf": addrs, "scratch": scratch}
            seconds = 0.0
            try:
                for launch, elfs in zip(self.meta["launches"], self.elfs):
                    args = [_arg_word(a, where) for a in launch["args"]]
                    per_tile = [[_arg_word(a, where) for a in b] for b in launch["tile_args"]] \
                        if "tile_args" in launch else None
                    with self.dev.recovering(f"kernel {launch['name']}"):
                        seconds += driver.launch(target, elfs, args, timeout_s=t, label=launch["name"],
                                                 per_tile=per_tile, tile_xys=launch.get("tile_xys"),
                                                 l1_resident=knobs.l1_resident()).seconds
                    if snaps is not None:
                        snaps.append(target.stats())
                        if record_to is not None and (mc := measured_cycles(tuple(snaps[-2:]))):
                            predictions.record(record_to, launch["name"], launch["prediction"], mc["max"],
                                               knobs.l1_resident())
            finally:
                recorded = target.timeline_end() if timeline and recording else None
            stats = tuple(snaps) if snaps is not None else None
            if before is not None:
                check(self.meta, before, [target.read_dram(a, d["nbytes"]) for a, d in zip(addrs, self.meta["buffers"])],
                      stats)
            elif stats is not None:
                record_cycles(self.meta, stats)
            for i, rep in enumerate(self.meta.get("stage_reports", []) if stats is not None else []):
                record_cycles({"report": rep}, stats[i:i + 2])
            if timeline:
                tl = trace.from_launch(self.name, target.name, stats, seconds, recorded)
                if "report" in self.meta: trace.write(tl, Path(self.meta["report"]).parent)
                if profiler.enabled():
                    profiler.add_launch(self.dev.device, tl, host_st, perf_counter_us(), self.profile_key)
            if DEBUG >= 2:
                debug.after_launch(self.name, stats)
            for k, copy in bounce:
                if self.meta["buffers"][k]["slot"] in self.outs:
                    target.write_dram(bufs[k].addr, target.read_dram(copy, self.meta["buffers"][k]["nbytes"]))
        finally:
            for addr in [a for _, a in bounce] + scratch: arena.free(addr)
        return seconds if wait else None


class DeviceAxisProgram:
    """A DEVICE-axis kernel (device_variants): one TTProgram per chip position; tinygrad passes the position of the
    chip it launches on as the kernel's one variable (`_device_num`)."""
    def __init__(self, dev: TTDevice, obj: TinyELF):
        self.variants = [TTProgram(dev, replace(obj, lib=b)) for b in unpack_variants(obj.lib)]

    def __call__(self, *bufs, vals=(), **kw):
        (position,) = vals
        return self.variants[position](*bufs, **kw)


class BoundVariablesProgram:
    """A kernel with tinygrad Variables (tt_backend/bound_variables.py): lowered for the values tinygrad passes at
    launch (`vals`, in ProgramInfo.vars order), one TTProgram per distinct tuple of values, kept for the next launch.
    The bundles are shared between the chips of a sharded tensor (each chip has a program of its own, the same
    kernel): keyed by the kernel, the values, the target, TT_CORES and the knobs that change a kernel (_KnobsKey)."""
    bundles: dict[tuple, bytes] = {}

    def __init__(self, dev: TTDevice, obj: TinyELF):
        self.dev, self.obj = dev, obj
        self.ast, self.names = bound_variables.unpack(obj.lib)
        self.programs: dict[tuple[int, ...], TTProgram] = {}

    def __call__(self, *bufs, vals=(), **kw):
        key = tuple(vals)
        if key not in self.programs:
            target = self.dev.renderer.tt_target
            shared = (self.ast.key, key, target.name, knobs.cores(), _KnobsKey().value)
            if shared not in self.bundles:
                variant = bound_variables.bind(self.ast, dict(zip(self.names, key, strict=True)))
                self.bundles[shared] = build_bundle(variant, self.obj.name, target)[-1]
            self.programs[key] = TTProgram(self.dev, replace(self.obj, lib=self.bundles[shared]))
        return self.programs[key](*bufs, **kw)


# --------------------------------------------------------------------------------------------------------- device

class TTDevice(Compiled):
    def __init__(self, device: str):
        if (conflict := knobs.device_env_conflict()) is not None: raise TTError(conflict)
        # "TT:ttsim" / "TT:emu" / "TT:hw" name the target explicitly (two targets side by side in one process);
        # plain "TT" follows TT_BACKEND / TT_SIMULATOR. "TT:<n>" / "TT:<target>:<n>" is chip n: every device is its own
        # chip (its own emulator or ttsim instance, or card n), which is what tinygrad's multi-device path
        # (Tensor.shard, its allreduce, copies between devices) runs on
        named, self.device_number = knobs.parse_device(device)
        backend = named or knobs.backend()
        knobs.validate()                         # a typo in a knob is an error now, not a silent default later
        tinygrad_knobs.validate_notice()
        self.backend = backend
        self.target = make_device(backend, device_number=self.device_number)
        super().__init__(device, TTAllocator(self), [TTRenderer], TTProgram, None, arch=backend)
        if (arch := self.renderer.target.arch) != backend:   # DEV=TT::<arch> would generate code for another target
            raise TTError(f"DEV asks for TT arch {arch!r} but the device runs on {backend!r}; drop the arch from DEV")

    def runtime(self, obj: TinyELF) -> Program:
        if obj.lib.startswith(bound_variables.BOUND_MAGIC): return BoundVariablesProgram(self, obj)
        return (DeviceAxisProgram if obj.lib.startswith(VARIANTS_MAGIC) else TTProgram)(self, obj)

    @contextlib.contextmanager
    def recovering(self, what: str):
        """Run one access to the target; if it fails (an error, a timeout, the simulator dying, Ctrl-C), the device
        continues on a fresh target before the error propagates: a failed launch leaves cores, Tensix queues and
        semaphores in a state the next kernel must not inherit."""
        try:
            yield
        except BaseException as e:
            self.replace_target(what, e)
            raise

    def replace_target(self, what: str, cause: BaseException) -> None:
        """A fresh target with the live DRAM contents carried over; when the old target cannot give them back (ttsim
        died), every buffer on this device is marked lost with the cause. A card is not replaced (hw_device retires
        its cores itself and a card has no fresh copy)."""
        if self.backend == "hw": return
        old, arena = self.target, self.allocator.arena
        self.allocator.free_cache()             # cached free blocks hold nothing worth carrying
        self.target = make_device(self.backend, device_number=self.device_number)
        try:
            for addr, size in sorted(arena.used.items()):
                self.target.write_dram(addr, old.read_dram(addr, size))
        except BaseException as e:       # the old target died with its memory (or Ctrl-C cut the copy short)
            schedule_guard.mark_lost(self.device, schedule_guard.Failure.of(what, cause))
            if not isinstance(e, TTError): raise
        finally:
            if hasattr(old, "close"): old.close()
