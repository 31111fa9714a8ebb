"""tinygrad's own knobs that mean something else on the TT device, each answered with one line on stderr (once per
process) rather than silently. (tinygrad's DEBUG levels: tt_backend/debug.py.)

* `BEAM=n` (and `JITBEAM`): tinygrad's search times variants of a kernel that its own optimizer made (tilings,
  unrolls, upcasts). The TT device lowers each kernel whole in its own to_program hook, so there are no such variants
  and BEAM has nothing to search; the kernel is the same with or without it. It is a no-op with a notice rather than an
  error because BEAM is often set for a whole program, whose kernels on other devices (the CPU reference, say) still
  use it. The TT knob for the speed/precision trade-off is TT_ERR_BUDGET, explored by `python -m tt_backend tune`.
* tinygrad's per-device kernel buffer limit (`DEVICE_MAX_BUFS` in tinygrad/schedule/rangeify.py, the table its
  scheduler consults for METAL, WEBGPU and CPU): declared for TT as `KERNEL_BUFFERS`, so tinygrad itself splits a
  fusion that reads more input buffers than one SFPU program holds in Dst (it stores an intermediate and starts a new
  kernel), instead of handing the TT device a kernel it must refuse. `MAX_KERNEL_BUFFERS=n` still overrides it, as for
  every device.
* `VALIDATE_WITH_CPU=1`: works as on any device (tinygrad runs each kernel on its CPU device too and compares,
  elementwise, at rtol = atol = 1e-3). Under a TT_ERR_BUDGET the placement may use reduced-precision FPU paths whose
  elementwise error exceeds that tolerance by design; the notice says so, so that a mismatch is read as the budget at
  work and not as a bug.
* `PARALLEL` (tinygrad's compile worker pool; by default the CPU count divided by pytest-xdist's worker count): at
  `PARALLEL=1` the pool is one spawned process that lowers and compiles a schedule's kernels one after another while
  the caller waits, i.e. no parallelism, but a process start, tinygrad's and tt_backend's imports and cold per-process
  caches (compiler plans, templates) every 16 kernels (`BEAM_MAX_TASKS_PER_CHILD`), and every AST and program pickled
  across. Schedules with a TT kernel therefore compile in the calling process when PARALLEL is 1
  (`compile_in_process_at_one_worker`; docs/tinygrad.md §5 has the measurement). Other values are left to tinygrad.
"""
from __future__ import annotations

import sys

from tinygrad.helpers import PARALLEL, VALIDATE_WITH_CPU, Context
from tinygrad.uop.ops import Ops, UOp

from tt_backend import knobs

VALIDATE_TOLERANCE = 1e-3       # tinygrad 0.14 engine/realize.py exec_validate: assert_allclose(rtol=1e-3, atol=1e-3)
# = lowering.codegen.sfpu_codegen.MAX_SLOTS (not imported: this runs while tinygrad itself is being imported): an SFPU
# program holds at most MAX_SLOTS - 1 input tiles plus its output in Dst; tinygrad keeps a kernel's input buffers to
# KERNEL_BUFFERS - 1 (one slot is the output). tests/e2e/test_e2e.py checks that the two agree.
KERNEL_BUFFERS = 8
_said: set[str] = set()


def _notice(key: str, text: str) -> None:
    if key not in _said:
        _said.add(key)
        print(f"TT: {text}", file=sys.stderr)


def beam_notice(beam: int) -> None:
    """Called by the to_program hook with the kernel's BEAM width (tinygrad puts it in the kernel's KernelInfo)."""
    if beam:
        _notice("beam", f"BEAM={beam} is ignored for TT kernels: the TT backend lowers each kernel whole, so tinygrad's "
                        "search has no variants to time (kernels on other devices still use it). For speed vs "
                        "precision on TT use TT_ERR_BUDGET, e.g. `python -m tt_backend tune script.py`.")


def validate_notice() -> None:
    """Called when the TT device opens."""
    budget = knobs.err_budget()
    if VALIDATE_WITH_CPU and budget is not None:
        _notice("validate", f"VALIDATE_WITH_CPU compares each TT kernel with tinygrad's CPU device elementwise at "
                            f"rtol=atol={VALIDATE_TOLERANCE:g}; TT_ERR_BUDGET={budget:g} allows reduced-precision FPU "
                            "placements whose error can exceed that by design. Unset TT_ERR_BUDGET to validate the "
                            "float32-faithful kernels.")


def declare_kernel_limits() -> None:
    """Tell tinygrad's scheduler how many buffers one TT kernel may read (see the module doc). Called by the import hook
    as soon as tinygrad.engine.realize has executed, before the first schedule."""
    # lazy: tinygrad's scheduler module, loaded by tinygrad itself by now; importing it at this module's top would
    # pull the scheduler into the compile workers that only need the notices
    from tinygrad.schedule import rangeify
    if not isinstance(rangeify.DEVICE_MAX_BUFS, _WithTTDevices):
        rangeify.DEVICE_MAX_BUFS = _WithTTDevices(rangeify.DEVICE_MAX_BUFS)
    rangeify.DEVICE_MAX_BUFS.setdefault("TT", KERNEL_BUFFERS)


class _WithTTDevices(dict):
    """tinygrad's table, whose lookup also answers "TT:emu", "TT:1", ... with the "TT" entry (tinygrad looks a kernel's
    device up by its full name when it is one string; other devices' lookups are unchanged)."""

    def get(self, device, default=None):
        if isinstance(device, str) and device.startswith("TT:") and device not in self:
            device = "TT"
        return super().get(device, default)


def _on_tt(device) -> bool:
    names = device if isinstance(device, tuple) else (device,)
    return any(isinstance(d, str) and d.split(":", 1)[0] == "TT" for d in names)


def compile_in_process_at_one_worker() -> None:
    """Wrap tinygrad's lower_and_compile (engine/realize.py, called once per schedule by compile_linear): at
    PARALLEL=1 a schedule with a TT kernel is compiled in this process (see the module doc). Called by the import hook
    as soon as tinygrad.engine.realize has executed."""
    from tinygrad.engine import realize     # lazy: as in declare_kernel_limits
    inner = realize.lower_and_compile
    if getattr(inner, "__tt_one_worker__", False): return

    def lower_and_compile(linear: UOp) -> UOp:
        if PARALLEL.value != 1 or not any(c.op is Ops.CALL and _on_tt(c.device) for c in linear.src):
            return inner(linear)
        with Context(PARALLEL=0):           # get_worker_pool() answers None: the kernels compile here, in order
            return inner(linear)
    lower_and_compile.__tt_one_worker__ = True
    lower_and_compile.__wrapped__ = inner
    realize.lower_and_compile = lower_and_compile
