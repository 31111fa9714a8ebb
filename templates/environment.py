"""The one Jinja environment over the templates, and the directory the backend caches build products in.

Compiling the templates (Jinja source -> Python code) cost about 0.5 s of CPU per process (the first kernel's render:
488 ms, 14-20 ms with the compiled templates loaded; issue 12); every test worker and every program paid it. The
compiled code is kept on disk in the compile cache's directory (`<key>.jinja` beside the `<key>.elf` images) and
loaded from there by later processes. Jinja checks what it loads: the file names the Python version and Jinja's
bytecode format, and carries the template source's checksum, so an edited template or another Python recompiles. A damaged or unreadable file is a miss; a directory that cannot be written costs nothing
here (the compile cache in the same directory reports it once, runtime/compile.py).
"""
from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

import jinja2

from tt_backend.templates import TEMPLATE_DIR


def cache_dir() -> Path:
    """$TT_CACHE_DIR, or ~/.cache/tt_backend: compiled images (runtime/compile.py) and compiled templates."""
    return Path(os.environ.get("TT_CACHE_DIR") or Path.home() / ".cache" / "tt_backend")


class TemplateBytecodeCache(jinja2.BytecodeCache):
    """Compiled templates as files `<jinja's key>.jinja`, resolved under cache_dir() at each access (TT_CACHE_DIR may
    change while a process runs), written atomically (a unique temporary file renamed into place)."""

    def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        try:
            data = (cache_dir() / f"{bucket.key}.jinja").read_bytes()
        except OSError:
            return
        try:
            bucket.bytecode_from_string(data)      # rejects another format, Python or source checksum itself
        except Exception:                          # truncated or overwritten: compile the template again
            bucket.reset()

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        tmp = None
        try:
            d = cache_dir()
            d.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=d, prefix=f".{bucket.key}.", suffix=".tmp")
            with os.fdopen(fd, "wb") as f:
                f.write(bucket.bytecode_to_string())
            os.replace(tmp, d / f"{bucket.key}.jinja")
        except OSError:
            if tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)


def environment(**options) -> jinja2.Environment:
    """A Jinja environment over TEMPLATE_DIR, strict about undefined names, with the on-disk template cache."""
    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATE_DIR)), undefined=jinja2.StrictUndefined,
                              bytecode_cache=TemplateBytecodeCache(), **options)
