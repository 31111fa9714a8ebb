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


def kernel_sources(ctx: dict, reader: str, writer: str, compute: str, args_h: str) -> dict[str, str]:
    """{"brisc": reader, "ncrisc": writer, "trisc0"/"trisc1"/"trisc2": compute, "tt_isa.h", "tt_layout.h",
    "args.h"}: the templates rendered with `ctx` and the generated headers."""
    compute_src = _env.get_template(compute).render(ctx)
    return {
        "brisc": _env.get_template(reader).render(ctx),
        "ncrisc": _env.get_template(writer).render(ctx),
        "trisc0": compute_src, "trisc1": compute_src, "trisc2": compute_src,
        "tt_isa.h": isa.c_header(), "tt_layout.h": layout.c_header(), "args.h": args_h,
    }


def split(rendered: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """(sources per core, generated headers) as tt_backend.runtime.compile.compile_kernel takes them."""
    return ({c: rendered[c] for c in CORE_SOURCES if c in rendered},
            {h: rendered[h] for h in HEADERS if h in rendered})
