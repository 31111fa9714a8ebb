"""TT_DUMP=dir: everything one kernel became, so a user can read it, rebuild it and see where each op ran.

Per kernel, in `dir/<name>_<ast hash>/`: the rendered C sources and generated headers, one ELF and its disassembly per
core, `report.json` (machine-readable) and `report.txt` (the same for people): ops, placement, streams, L1 map,
instruction counts.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from lowering.plan import TILE_ELEMS, KernelPlan
from tt_backend import knobs

ROWS_PER_TILE = 32          # the SFPU body runs once per 32-lane row step, 32 steps per 32x32 tile


def placement(plan: KernelPlan) -> list[dict]:
    """Engine and precision per op. The FPU path and the error-budget search do not exist yet: all SFPU float32."""
    return [{"op": op, "engine": "SFPU", "precision": "fp32"} for op in plan.ops]


def instruction_counts(plan: KernelPlan, elfs: dict[str, bytes]) -> dict:
    setup, body = len(plan.sfpu.setup), len(plan.sfpu.body)
    per_tile = setup + ROWS_PER_TILE * body
    counts = {"sfpu_setup": setup, "sfpu_body": body, "sfpu_per_tile": per_tile, "tiles": plan.n_tiles,
              "sfpu_total": per_tile * plan.n_tiles, "riscv_text_bytes": {}}
    try:
        from runtime.compile import section_sizes
        for core, elf in elfs.items():
            sizes = section_sizes(elf)
            counts["riscv_text_bytes"][core] = sizes.get("text", sum(sizes.values()))
    except Exception as e:      # a report must not fail the kernel
        counts["riscv_text_bytes"] = f"unavailable: {e!r}"
    return counts


def report(plan: KernelPlan, elfs: dict[str, bytes]) -> dict:
    def stream(s):
        return {"buffer_slot": plan.buffers[s.buf].slot, "dtype": s.dtype, "tile_format": s.tile_format,
                "index_c": s.index_c, "valid_c": s.valid_c, "contiguous": s.contiguous}
    return {
        "name": plan.name, "ranges": list(plan.ranges), "n_elements": plan.n_elements, "n_tiles": plan.n_tiles,
        "tile_elements": TILE_ELEMS,
        "buffers": [{"slot": b.slot, "dtype": b.dtype, "nbytes": b.nbytes} for b in plan.buffers],
        "inputs": [stream(s) for s in plan.inputs], "output": stream(plan.output),
        "ops": list(plan.ops), "placement": placement(plan),
        "err_budget": knobs.err_budget(), "cores": 1,   # the budget is recorded; placement does not use it yet
        "dst_slots": getattr(plan.sfpu, "dst_slots", None), "out_slot": getattr(plan.sfpu, "out_slot", None),
        "l1": {k: f"0x{v:X}" for k, v in plan.l1.items()},
        "instructions": instruction_counts(plan, elfs),
    }


def report_text(r: dict) -> str:
    lines = [f"kernel {r['name']}: ranges {r['ranges']} = {r['n_elements']} elements, {r['n_tiles']} tile(s)", "",
             "streams:"]
    for j, s in enumerate(r["inputs"]):
        how = "contiguous" if s["contiguous"] else f"gather [{s['index_c']}]" + (f" if ({s['valid_c']})" if s["valid_c"] else "")
        lines.append(f"  in{j}: buffer slot {s['buffer_slot']} {s['dtype']} ({s['tile_format']}) {how}")
    o = r["output"]
    lines.append(f"  out: buffer slot {o['buffer_slot']} {o['dtype']} ({o['tile_format']}) "
                 + ("contiguous" if o["contiguous"] else f"scatter [{o['index_c']}]"))
    budget = r["err_budget"]
    lines += ["", "placement (error budget " + (f"{budget:g}" if budget else "none: float32-faithful") + "):"]
    lines += [f"  {p['op']:<20} {p['engine']:<5} {p['precision']}" for p in r["placement"]] or ["  (no ALU ops: copy)"]
    i = r["instructions"]
    lines += ["", f"SFPU: {i['sfpu_setup']} setup + {i['sfpu_body']} body instructions per row step "
                  f"= {i['sfpu_per_tile']} per tile, {i['sfpu_total']} in total ({r['dst_slots']} Dst slots)"]
    if isinstance(i["riscv_text_bytes"], dict):
        lines.append("RISC-V .text: " + ", ".join(f"{c} {n} B" for c, n in i["riscv_text_bytes"].items()))
    lines += ["", "L1: " + ", ".join(f"{k} {v}" for k, v in r["l1"].items()), ""]
    return "\n".join(lines)


def write_kernel(root: str | os.PathLike, plan: KernelPlan, sources: dict[str, str], headers: dict[str, str],
                 elfs: dict[str, bytes], key: str = "") -> Path:
    d = Path(root) / (f"{plan.name}_{key}" if key else plan.name)
    d.mkdir(parents=True, exist_ok=True)
    for core, src in sources.items():
        (d / f"{core}.c").write_text(src)
    for name, text in headers.items():
        (d / name).write_text(text)
    from runtime.compile import disassemble
    for core, elf in elfs.items():
        (d / f"{core}.elf").write_bytes(elf)
        try:
            (d / f"{core}.dis").write_text(disassemble(elf))
        except Exception as e:   # no objdump: the ELF is still there
            (d / f"{core}.dis").write_text(f"disassembly unavailable: {e!r}\n")
    r = report(plan, elfs)
    (d / "report.json").write_text(json.dumps(r, indent=1))
    (d / "report.txt").write_text(report_text(r))
    return d
