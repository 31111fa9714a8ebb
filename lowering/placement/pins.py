"""TT_PLACE: the user's pins of ops to engines, `kernel-pattern:node-or-op=ENGINE[:fidelity][:formats]` groups
(`parse_pins`), and their meaning for one graph (`resolve_pins`)."""
from __future__ import annotations

import fnmatch

from tt_backend.lowering.dag import ValueDAG
from tt_backend.lowering.graph import live_nodes
from tt_backend.lowering.placement.choice import SFPU, Choice, options
from tt_backend.chip.errors import UnsupportedOp
from tt_backend.chip.numerics.fpu_math import FIDELITY_PHASES


def parse_choice(text: str) -> Choice:
    """'SFPU' | 'FPU' | 'FPU:HiFi2' | 'FPU:HiFi4:bf16/tf32' (SrcA/SrcB formats)."""
    parts = text.strip().split(":")
    eng = parts[0].upper()
    if eng == "SFPU":
        return SFPU
    if eng != "FPU":
        raise UnsupportedOp(f"TT_PLACE: engine {parts[0]!r} is not SFPU or FPU")
    fid = None
    fmts = None
    for p in parts[1:]:
        if p in FIDELITY_PHASES:
            fid = p
        elif "/" in p:
            fmts = tuple(p.split("/"))
            if any(f not in ("bf16", "tf32") for f in fmts):
                raise UnsupportedOp(f"TT_PLACE: formats {p!r}: expected bf16/tf32 pairs like bf16/tf32")
        else:
            raise UnsupportedOp(f"TT_PLACE: {p!r} is neither a fidelity ({', '.join(FIDELITY_PHASES)}) nor formats")
    return Choice("FPU", fid, fmts)


def parse_pins(spec: str | None, kernel: str) -> dict[str, Choice]:
    """TT_PLACE="E_4_256:n5=FPU:HiFi2,n3=SFPU;E_*:MUL=FPU:HiFi4" -> {node or op name: Choice} for this kernel
    (kernel names are shell patterns; later groups override earlier ones)."""
    pins: dict[str, Choice] = {}
    for group in (spec or "").split(";"):
        group = group.strip()
        if not group:
            continue
        pat, _, body = group.partition(":") if ":" in group.split("=")[0] else ("*", "", group)
        if not fnmatch.fnmatchcase(kernel, pat.strip()):
            continue
        for item in body.split(","):
            if not item.strip():
                continue
            key, eq, val = item.partition("=")
            if not eq:
                raise UnsupportedOp(f"TT_PLACE: {item!r} is not node=ENGINE[:fidelity]")
            pins[key.strip().lstrip("n") if key.strip()[1:].isdigit() else key.strip()] = parse_choice(val)
    return pins


def resolve_pins(pins: dict[str, Choice], dag: ValueDAG, cands: list[int]) -> dict[int, Choice] | None:
    """Pins for this graph: node ids and op names -> {node: Choice}; None if an FPU pin names a non-candidate."""
    out: dict[int, Choice] = {}
    for key, c in pins.items():
        if key.isdigit():
            targets = [int(key)]
        else:   # an op name pins every node of that op the engine can take (kernels without one are unaffected)
            targets = [v for v in live_nodes(dag) if dag.nodes[v].op == key.upper()
                       and (c.engine != "FPU" or v in cands)]
        for v in targets:
            if c.engine == "FPU":
                if v not in cands:
                    return None
                base = options(dag, v)
                pick = [o for o in base if (c.fidelity is None or o.fidelity == c.fidelity or o.fidelity is None)]
                o = pick[-1] if pick else base[-1]
                if c.formats is not None:
                    o = Choice("FPU", o.fidelity, c.formats, o.swap)
                out[v] = o
            else:
                out[v] = SFPU
    return out
