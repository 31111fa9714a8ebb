"""A failed schedule never leaves a buffer that reads as computed (installed by tt_backend._finder right after
tinygrad imports `tinygrad.engine.realize`; tinygrad's files are not patched).

How tinygrad 0.14 realizes (tensor.py `Tensor.realize`): `linear_with_vars` schedules the kernels and at once points
every tensor involved at the buffers the schedule will fill; then `run_linear` (engine/realize.py) compiles every
kernel and executes the calls (kernels and copies) in order. When a compile or a call fails, the tensors already point
at those buffers and tinygrad keeps no record that they were never filled: later reads return zeros or stale data.

Two wrappers close the gap:

* `run_linear`, through which every schedule runs: Tensor.realize, TinyJit, and Buffer.copy_from, which is how every
  host read happens (Tensor.numpy/data/tolist/item -> Buffer.as_memoryview -> copy_from). When it raises (any
  exception, Ctrl-C included) for a schedule that touches a TT device, every buffer its unfinished calls were to write
  is marked `NotFilled` (the failed kernel and the original cause), except the destination of a copy whose source the
  schedule did not write (an upload of host data): that one is marked `Reupload` and copied again when next used.
* `pm_exec.rewrite`, through which run_linear executes each call. Before a call runs, a `Reupload` on any of its
  buffers is carried out, and a `NotFilled` buffer it reads raises `NotComputed` naming the failed kernel and the
  cause. Writing a whole buffer clears its mark; a partial write into a not-filled buffer (an assign into a slice)
  raises too, since the rest of that buffer stays unknown.

Why nothing escapes: after a schedule, a buffer's contents can only be seen by a call of a later schedule (a kernel
input, a copy to the host or another device), and every call of every schedule goes through pm_exec. tinygrad 0.14 has
no other path to a buffer's contents: Buffer.as_memoryview without zero copy goes through copy_from, and zero-copy
views exist only for host-memory allocators and are taken inside calls (exec_copy). What tinygrad caches is safe:
the schedule cache and the program cache hold structure and compiled code, never results; a failed compile is not
cached, so rescheduling the same expression fails again with the same cause; tensors that point at a marked buffer
count as realized, which is why the marks sit on the buffers rather than on the tensors.

Marks live on tinygrad's base `Buffer`, weakly (they go when the buffer goes), as byte ranges of it, so a view of a
marked buffer is marked where it overlaps. Schedules without a TT buffer are never marked, so tinygrad behaves as
before on other devices; their reads of marked buffers (a CPU kernel reading a TT result copied to the CPU) are
checked like any other.
"""
from __future__ import annotations

import math
import sys
import weakref
from dataclasses import dataclass

import tinygrad.engine.realize as _realize
from tinygrad.device import Buffer, MultiBuffer
from tinygrad.dtype import DType
from tinygrad.uop.ops import Ops, ProgramInfo, UOp, buffers

from tt_backend.byte_ranges import RangeTags
from tt_backend.chip.errors import NotComputed

# --------------------------------------------------------------------------------------------------------- marks


@dataclass(frozen=True)
class Failure:
    """What went wrong, shared by every buffer one failed schedule left unfilled."""
    kernel: str          # the call that raised, or "compiling the schedule's kernels"
    cause: str           # "UnsupportedOp: E_12: integer XOR ..."

    @staticmethod
    def of(kernel: str, exc: BaseException) -> Failure:
        """The cause is the exception's first line: the user saw the whole of it when it was raised."""
        lines = str(exc).strip().splitlines()
        return Failure(kernel, f"{type(exc).__name__}: {lines[0] if lines else '(no message)'}")


@dataclass(frozen=True)
class NotFilled:
    failure: Failure
    writer: str | None   # the call that was to write the buffer; None: the device lost what the buffer held

    def error(self, buf: Buffer, refused: str) -> NotComputed:
        """`refused`: what cannot happen now ("they cannot be read", "kernel E_8 cannot use them", ...)."""
        if self.writer is None:
            why = f"The device restarted without its memory after {self.failure.kernel} failed"
        elif self.writer == self.failure.kernel:
            why = f"{self.writer} failed"
        else:
            why = f"{self.writer} did not run because {self.failure.kernel} failed"
        return NotComputed(f"{buf.size} {buf.dtype.name} values on {buf.device} were never computed, so {refused}. "
                           f"{why} with:\n  {self.failure.cause}\n"
                           f"Recompute the tensor from its inputs (a new expression) once that is fixed.", self.failure)


@dataclass(frozen=True)
class Reupload:
    """The destination of a copy the failed schedule did not (or not durably) carry out; its source is intact."""
    src: Buffer
    offset: int
    size: int
    dtype: DType


marks: weakref.WeakKeyDictionary[Buffer, RangeTags] = weakref.WeakKeyDictionary()   # base Buffer -> marked ranges


def _span(b: Buffer) -> tuple[Buffer, int, int]:
    return b.base, b.offset, b.offset + b.nbytes


def mark_of(b: Buffer) -> list:
    """The marks (NotFilled / Reupload) on the bytes of `b`."""
    base, lo, hi = _span(b)
    tags = marks.get(base)
    return [t for _, _, t in tags.overlapping(lo, hi)] if tags else []


def _mark(b: Buffer, tag) -> None:
    base, lo, hi = _span(b)
    marks.setdefault(base, RangeTags()).add(lo, hi, tag)


def _clear(b: Buffer) -> None:
    base, lo, hi = _span(b)
    if (tags := marks.get(base)) is not None:
        tags.remove(lo, hi)
        if not tags: del marks[base]


def mark_lost(device: str, failure: Failure) -> None:
    """Every allocated buffer of `device` lost its contents (its target was replaced without them). tinygrad's
    `buffers` registry holds every Buffer a UOp refers to: every buffer a tensor, a schedule or a TinyJit can reach."""
    seen: set[int] = set()
    for b in list(buffers.values()):
        for base in (x.base for x in (b.bufs if isinstance(b, MultiBuffer) else [b])):
            if base.device == device and base.is_allocated() and id(base) not in seen:
                seen.add(id(base))
                _mark(base, NotFilled(failure, None))


# ----------------------------------------------------------------------------------------------- calls and buffers

def _lanes(call: UOp, inputs) -> list[list[Buffer]]:
    """Per argument of the call, its device Buffers (one per device of a multi-device buffer)."""
    out = []
    for u in _realize.resolve_params(call, tuple(inputs)):
        b = u.buffer
        out.append(list(b.bufs) if isinstance(b, MultiBuffer) else [b])
    return out


def _io(call: UOp, nargs: int) -> tuple[set[int], set[int]]:
    """(arguments the call writes, arguments it reads). A compiled kernel says (ProgramInfo outs/ins); a kernel that
    has not been compiled yet (a schedule that failed compiling) says what it stores to; an opaque call (a graph of
    batched kernels) is taken to read and write everything."""
    ast, every = call.src[0], set(range(nargs))
    if ast.op is Ops.SINK:
        outs, ins = set(ProgramInfo.from_sink(ast).outs), set()
    else:
        o, i = _realize.get_call_outs_ins(call)
        if not o and not i: return every, every
        outs, ins = set(o), set(i)
    return outs, every - (outs - ins)          # everything but the pure outputs counts as read


def _store_bytes(sink: UOp, slot: int) -> int | None:
    """Bytes a kernel's stores to PARAM `slot` cover (iterations x element size), None if not a constant count."""
    total = 0
    for u in sink.toposort():
        if u.op is not Ops.STORE: continue
        idx = u.src[0].src[0] if u.src[0].op is Ops.CAST else u.src[0]
        if idx.op is not Ops.INDEX or (p := idx.src[0].buf_uop).op is not Ops.PARAM or p.arg.slot != slot: continue
        rngs = [r for r in idx.ranges if r.op is Ops.RANGE]
        if not all(r.src[0].op is Ops.CONST for r in rngs): return None
        total += math.prod(int(r.src[0].arg) for r in rngs) * p.dtype.itemsize
    return total


def _writes_whole(call: UOp, arg: int, b: Buffer) -> bool:
    """Does the call overwrite all of `b`? Copies do; a kernel does when its stores cover every byte (tinygrad's stores
    never write one element twice); anything else is taken as a partial write."""
    ast = call.src[0]
    if ast.op is Ops.COPY: return True
    sink = ast.src[0] if ast.op is Ops.PROGRAM else ast
    if sink.op is not Ops.SINK: return False
    got = _store_bytes(sink, arg)
    return got is not None and got >= b.nbytes


def _name(call: UOp, k: int = 0, n: int = 1) -> str:
    """How messages name a call: a compiled kernel by name; one that never compiled by its place in the schedule."""
    ast = call.src[0]
    if ast.op is Ops.PROGRAM: return f"kernel {ast.arg.name}"
    if ast.op is Ops.COPY: return f"the copy to {ast.arg}"
    return f"kernel {k + 1} of the {n} scheduled"


def _reading(call: UOp) -> str:
    ast = call.src[0]
    if ast.op is Ops.COPY:       # a copy to PYTHON is a host read (Tensor.numpy and friends)
        return "they cannot be read" if ast.arg == "PYTHON" else f"they cannot be copied to {ast.arg}"
    return f"{_name(call)} cannot use them"


def _touches_tt(lanes: list[list[list[Buffer]]]) -> bool:
    return any(b.device.split(":")[0] == "TT" for call in lanes for arg in call for b in arg)


# ------------------------------------------------------------------------------------------------- the wrappers

class _Run:
    """One run_linear in progress: the schedule as given and the calls finished so far (as executed: compiled)."""
    __slots__ = ("linear", "inputs", "done", "current")

    def __init__(self, linear: UOp, inputs):
        self.linear, self.inputs = linear, tuple(inputs)
        self.done: list[UOp] = []
        self.current: UOp | None = None


_runs: list[_Run] = []        # nested: carrying out a Reupload runs a copy schedule inside a call


def _before(call: UOp, inputs) -> None:
    lanes = _lanes(call, inputs)
    outs, reads = _io(call, len(lanes))
    for i, arg in enumerate(lanes):
        for b in arg:
            if not (tags := mark_of(b)): continue
            # an upload happens first when the call reads the buffer or writes only part of it
            for tag in tags:
                if isinstance(tag, Reupload) and (i in reads or not _writes_whole(call, i, b)): _reupload(b.base, tag)
            if not (filled := [t for t in mark_of(b) if isinstance(t, NotFilled)]): continue
            if i in reads: raise filled[0].error(b, _reading(call))
            if not _writes_whole(call, i, b): raise filled[0].error(b, f"{_name(call)} cannot write just part of them")


def _after(call: UOp, inputs) -> None:
    lanes = _lanes(call, inputs)
    outs, _ = _io(call, len(lanes))
    for i in outs:
        for b in lanes[i]: _clear(b)


def _reupload(base: Buffer, tag: Reupload) -> None:
    dest = base if tag.offset == 0 and tag.size * tag.dtype.itemsize == base.nbytes else \
        Buffer(base.device, tag.size, tag.dtype, base=base, offset=tag.offset)
    dest.ensure_allocated().copy_from(tag.src)        # a schedule of one copy: clears the mark when it succeeds


def _mark_unfinished(run: _Run, exc: BaseException) -> None:
    calls = run.linear.src
    lanes = [_lanes(c, run.inputs) for c in calls]
    if not _touches_tt(lanes): return
    # the executed calls are the compiled form of the schedule's calls, one for one and in order (compiling replaces
    # only a call's AST); if that does not hold (a debug mode rewrote the schedule), nothing counts as finished
    done = run.done
    finished = len(done) if len(done) <= len(calls) and all(d.src[1:] == c.src[1:] for d, c in zip(done, calls)) else 0
    if isinstance(exc, NotComputed) and isinstance(exc.failure, Failure):
        failure = exc.failure                 # keep naming the first failure, not the chain
    else:
        where = "compiling the schedule's kernels" if run.current is None else _name(run.current, finished, len(calls))
        failure = Failure.of(where, exc)
    io = [_io(c, len(lane)) for c, lane in zip(calls, lanes)]
    written: dict[Buffer, list[tuple[int, int, int]]] = {}    # base -> (lo, hi, call index) of this schedule's writes
    for k, (arg_bufs, (outs, _)) in enumerate(zip(lanes, io)):
        for i in outs:
            for b in arg_bufs[i]:
                base, lo, hi = _span(b)
                written.setdefault(base, []).append((lo, hi, k))

    def writers(b: Buffer) -> set[int]:
        base, lo, hi = _span(b)
        return {k for a, z, k in written.get(base, []) if a < hi and lo < z}

    for k, call in enumerate(calls):
        outs, _ = io[k]
        if call.src[0].op is Ops.COPY:
            pairs = list(zip(lanes[k][0], lanes[k][1]))
            if all(not writers(src) and writers(dst) == {k} for dst, src in pairs):
                for dst, src in pairs: _mark(dst, Reupload(src, dst.offset, dst.size, dst.dtype))
                continue
        if k < finished: continue
        for i in outs:
            for b in lanes[k][i]: _mark(b, NotFilled(failure, _name(call, k, len(calls))))


class _GuardedExec:
    """Stands in for realize.pm_exec: run_linear calls `pm_exec.rewrite(call, ctx)` once per call."""

    def __init__(self, inner): self.inner = inner

    def __getattr__(self, name): return getattr(self.inner, name)

    def rewrite(self, call: UOp, ctx=None):
        if not _runs: return self.inner.rewrite(call, ctx)        # time_call (BEAM timing): not a schedule
        run = _runs[-1]
        run.current = call
        if marks: _before(call, ctx.input_uops)
        ret = self.inner.rewrite(call, ctx)
        if marks: _after(call, ctx.input_uops)
        run.done.append(call)
        run.current = None
        return ret


def _guard(run_linear):
    def guarded_run_linear(linear: UOp, var_vals=None, input_uops=(), update_stats=True, jit=False, wait=False):
        run = _Run(linear, input_uops)
        _runs.append(run)
        try:
            return run_linear(linear, var_vals, input_uops, update_stats, jit, wait)
        except BaseException as e:
            _mark_unfinished(run, e)
            raise
        finally:
            _runs.pop()
    guarded_run_linear.__wrapped__ = run_linear
    guarded_run_linear.__tt_guard__ = True
    return guarded_run_linear


# modules that bind run_linear by name at import (`from tinygrad.engine.realize import run_linear`)
_BINDERS = ("tinygrad.tensor", "tinygrad.engine.jit")


def install() -> None:
    """Wrap realize.run_linear and realize.pm_exec (idempotent). Normally called the moment realize.py has executed,
    before any module copied the name; modules that already did (tinygrad imported before tt_backend) are updated."""
    current = _realize.run_linear
    if getattr(current, "__tt_guard__", False): return
    guarded = _guard(current)
    _realize.run_linear = guarded
    _realize.pm_exec = _GuardedExec(_realize.pm_exec)
    for name in _BINDERS:
        if getattr(sys.modules.get(name), "run_linear", None) is current: sys.modules[name].run_linear = guarded
