"""Registers the TT device with tinygrad without touching tinygrad's files.

tinygrad finds a device `X` by importing `tinygrad.runtime.ops_x`. This meta-path finder answers exactly that one name,
`tinygrad.runtime.ops_tt`, with this project's `tt_backend.ops_tt` (the same module object under both names, so the
classes are identical however they are reached). It is installed at interpreter start by the one-line
`tt_backend.pth` in site-packages, which also maps `DEVICE=TT` to tinygrad's `DEV=TT`.

It also watches one tinygrad module, `tinygrad.engine.realize`: the moment that module has executed,
`tt_backend.schedule_guard` wraps its `run_linear` (a failed schedule never leaves buffers that read as computed) and
`tt_backend.tinygrad_knobs` declares the TT kernel's buffer limit to tinygrad's scheduler and, at PARALLEL=1, has
schedules with a TT kernel compiled in the calling process (tinygrad_knobs module doc).
That has to happen before the first schedule runs and before tinygrad.tensor copies the name, which is long before
tinygrad opens the TT device (the first schedule already runs when tinygrad first imports ops_tt).

Stdlib only, and it must not import tinygrad: it runs in every interpreter of the environment (pip included), so it
has to be cheap and must never make an unrelated program fail. The one error it raises, a DEVICE/DEV conflict, is
deferred to the moment the program imports tinygrad.
"""
from __future__ import annotations

import importlib
import os
import sys
from importlib.machinery import ModuleSpec

from tt_backend import knobs
from tt_backend.chip.errors import TTError

ALIAS = "tinygrad.runtime.ops_tt"
REAL = "tt_backend.ops_tt"
GUARDED = "tinygrad.engine.realize"

pending_error: str | None = None     # a DEVICE/DEV conflict found at start-up, raised when tinygrad is imported


class _AliasLoader:
    """Loads the alias by importing the real module and handing back that very object."""

    def create_module(self, spec):
        module = importlib.import_module(REAL)
        self.real_spec = module.__spec__
        return module

    def exec_module(self, module) -> None:
        # importlib stamped the alias spec onto the module; keep the module's own identity (name, file, spec)
        module.__spec__ = self.real_spec


class _GuardAfterExec:
    """The real loader of tinygrad.engine.realize, followed by installing the schedule guard."""

    def __init__(self, loader):
        self.loader = loader

    def __getattr__(self, name):         # get_source, is_package, ...: the real loader's
        return getattr(self.loader, name)

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module) -> None:
        self.loader.exec_module(module)
        # lazy: these import tinygrad, which this start-up hook must never do
        from tt_backend import schedule_guard, tinygrad_knobs
        schedule_guard.install()
        tinygrad_knobs.declare_kernel_limits()
        tinygrad_knobs.compile_in_process_at_one_worker()


class TTFinder:
    """A meta-path finder (duck-typed: importlib.abc costs start-up time) for the names tinygrad asks for."""

    def find_spec(self, fullname: str, path=None, target=None):
        if fullname == "tinygrad" and pending_error is not None:
            raise TTError(pending_error)
        if fullname == GUARDED:
            return self._guarded_spec(fullname, path, target)
        if fullname != ALIAS:
            return None
        return ModuleSpec(ALIAS, _AliasLoader())

    def _guarded_spec(self, fullname: str, path, target):
        """The spec the other finders give, with its loader wrapped (None: let the import fail as it would)."""
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _GuardAfterExec(spec.loader)
                return spec
        return None

    def invalidate_caches(self) -> None:
        pass


def install() -> None:
    """Put the finder first on sys.meta_path (idempotent). First, so the DEVICE/DEV check sees `import tinygrad`."""
    if not any(isinstance(f, TTFinder) or type(f).__name__ == "TTFinder" for f in sys.meta_path):
        sys.meta_path.insert(0, TTFinder())


def startup() -> None:
    """The .pth hook: install the finder and map DEVICE=TT -> DEV=TT. Never raises (site.py would only print it)."""
    global pending_error
    try:
        install()
        pending_error = knobs.map_device_env()
        helpers = sys.modules.get("tinygrad.helpers")
        if helpers is not None and pending_error is None:
            _late_map(helpers)
        if GUARDED in sys.modules:            # tinygrad was imported before us: guard its schedules now
            # lazy: schedule_guard imports tinygrad (here tinygrad is already imported)
            from tt_backend import schedule_guard
            schedule_guard.install()
    except Exception as e:  # a broken install must not break every interpreter of the environment
        print(f"tt_backend: start-up hook failed: {e!r}", file=sys.stderr)


def _late_map(helpers) -> None:
    """tinygrad was imported before us (a source checkout imported late): its DEV context was already read from the
    environment, so carry a DEVICE=TT mapping into it directly."""
    dev = getattr(helpers, "DEV", None)
    if dev is not None and os.environ.get("DEV") and not repr(dev):
        dev.value = os.environ["DEV"]
