"""Build hooks (setup.cfg cmdclass): put `tt_backend.pth` at the root of site-packages, for both kinds of install.

A .pth file only runs at interpreter start when it sits directly in a site directory, so it must be at the root of
the wheel; setuptools' `data_files` would put it under the environment prefix instead. So:

* `pip install .`: `build_py` copies it to the root of build_lib, and everything in build_lib is the wheel's root.
* `pip install -e .`: the PEP 660 editable wheel does not contain build_lib; `editable_wheel` adds the file to the
  wheel next to setuptools' own `__editable__.*.pth` (which sorts first, so the source tree is importable by the time
  our line runs).

Only imported by setuptools while building (it imports setuptools, never tinygrad).
"""
from __future__ import annotations

from pathlib import Path

from setuptools.command.build_py import build_py as _build_py
from setuptools.command.editable_wheel import editable_wheel as _editable_wheel

PTH_NAME = "tt_backend.pth"
PTH_SOURCE = Path(__file__).resolve().parent / PTH_NAME


class build_py(_build_py):
    def run(self):
        super().run()
        target = Path(self.build_lib) / PTH_NAME
        self.copy_file(str(PTH_SOURCE), str(target))

    def get_outputs(self, include_bytecode=1):
        return [*super().get_outputs(include_bytecode), str(Path(self.build_lib) / PTH_NAME)]


class _WithPth:
    """Wraps setuptools' editable strategy: whatever it writes, the wheel also gets our .pth at its root."""

    def __init__(self, strategy):
        self.strategy = strategy

    def __call__(self, wheel, files, mapping):
        self.strategy(wheel, files, mapping)
        wheel.writestr(PTH_NAME, PTH_SOURCE.read_bytes())

    def __enter__(self):
        self.strategy.__enter__()
        return self

    def __exit__(self, *exc):
        return self.strategy.__exit__(*exc)


class editable_wheel(_editable_wheel):
    def _select_strategy(self, *args, **kwargs):
        return _WithPth(super()._select_strategy(*args, **kwargs))
