"""A kernel's rendered sources: the Jinja environment over the templates, the five core sources plus the generated
headers (`kernel_sources`), and their split into what runtime.compile takes (`split`).

The compute source is one text compiled three times (-DTRISC_UNPACK/-DTRISC_MATH/-DTRISC_PACK by runtime.compile).
"""
from __future__ import annotations

from tt_backend.chip import isa, layout
from tt_backend.templates.environment import environment

CORE_SOURCES = ("brisc", "ncrisc", "trisc0", "trisc1", "trisc2")
HEADERS = ("tt_isa.h", "tt_layout.h", "args.h")

_env = environment(keep_trailing_newline=True)


def kernel_sources(ctx: dict, reader: str, writer: str, compute: str, args_h: str,
                   programs: dict[str, str] | None = None) -> dict[str, str]:
    """{"brisc": reader, "ncrisc": writer, "trisc0"/"trisc1"/"trisc2": compute, "tt_isa.h", "tt_layout.h",
    "args.h"}: the templates rendered with `ctx` and the generated headers; `programs`: {core: source} of the cores
    that run a program shared by kernels (render_program) instead of their template's code."""
    programs = programs or {}
    compute_src = _env.get_template(compute).render(ctx)
    templates = {"brisc": reader, "ncrisc": writer}
    return {**{core: programs[core] if core in programs else _env.get_template(templates[core]).render(ctx)
               if core in templates else compute_src for core in CORE_SOURCES},
            "tt_isa.h": isa.c_header(), "tt_layout.h": layout.c_header(), "args.h": args_h}


def render_program(template: str, ctx: dict) -> str:
    """A program's source: a template rendered with constants that are the same for every kernel (`ctx`), never a
    kernel's context, so that its text and image are shared (lowering/families/shared_programs.py)."""
    return _env.get_template(template).render(ctx)


def split(rendered: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """(sources per core, generated headers) as tt_backend.runtime.compile.compile_kernel takes them."""
    return ({c: rendered[c] for c in CORE_SOURCES if c in rendered},
            {h: rendered[h] for h in HEADERS if h in rendered})
