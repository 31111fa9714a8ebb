"""TT_DUMP=dir: everything one kernel became, so a user can read it, rebuild it and see where each op ran.

Per kernel, in `dir/<name>_<ast hash>/`: the rendered C sources and generated headers, one ELF and its disassembly per
core, `report.json` (machine-readable) and `report.txt` (the same for people): ops, placement, streams, L1 map,
instruction counts.

A dump is never half-written: a kernel's directory is filled under a temporary name and renamed into place, and the
reports updated after a launch (measured cycles, TT_CHECK's error) are replaced whole. A dump that cannot be written
(full disk, no permission) costs one warning; the kernels run without it.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import warnings
from pathlib import Path

from tt_backend.chip.errors import TTWarning
from tt_backend import knobs
from tt_backend.lowering.families import shared_programs
from tt_backend.lowering.families.elementwise import ElementwisePlan
from tt_backend.lowering.families.staged import StagedPlan
from tt_backend.lowering.plan import TARGETS, TILE_ELEMS, Plan
from tt_backend.runtime.compile import disassemble, section_sizes

ROWS_PER_TILE = 32          # the SFPU body runs once per 32-lane row step, 32 steps per 32x32 tile


def placement(plan: Plan) -> list[dict]:
    """Engine and precision per op (plan.placement); plans built without a placement run all on the SFPU."""
    pl = plan.placement
    if pl is None:
        return [{"op": op, "engine": "SFPU", "precision": "fp32"} for op in plan.ops]
    return [{"op": n["op"], "engine": n["engine"],
             "precision": "fp32" if n["engine"] == "SFPU" else f"{n['fidelity'] or '-'} "
             f"{n['formats']['srca']}x{n['formats']['srcb']}"} for n in pl.nodes]


def placement_report(plan: Plan) -> dict:
    """The placement's own report: kernel, budget, predicted error and cycles, per-node engine/fidelity/formats/error/
    cycles; measured_error stays None until TT_CHECK=1 runs the kernel (tt_backend.placement_eval.check fills it),
    emulated_cycles (the slowest core of the last launch, emulator cycle model) until the kernel runs on `emu`."""
    pl = plan.placement
    if pl is None:
        return {"kernel": plan.name, "budget": knobs.err_budget(), "predicted_error": None, "measured_error": None,
                "predicted_cycles": None, "predicted_launch_cycles": plan.launch_cycles(), "emulated_cycles": None,
                "nodes": []}
    return {**pl.report(), "predicted_launch_cycles": plan.launch_cycles(), "measured_error": None,
            "emulated_cycles": None}


def instruction_counts(plan: Plan, elfs: dict[str, bytes]) -> dict:
    prog = plan.sfpu_program()
    setup, body, stalls = 0, 0, 0
    if prog is not None:      # the schedule the plan's target issues (with SFPLOADMACRO unless macro-free)
        setup, row = prog.issue_counts(plan.target.macro_free)
        body = len(prog.issued(plan.target.macro_free)[1])
        stalls = row - body
    per_tile = setup + ROWS_PER_TILE * body
    counts = {"sfpu_setup": setup, "sfpu_body": body, "sfpu_body_stalls": stalls, "sfpu_per_tile": per_tile,
              "sfpu_schedule": sfpu_schedule(plan), "tiles": plan.n_tiles,
              "sfpu_total": per_tile * plan.n_tiles, "riscv_text_bytes": {}}
    try:
        for core, elf in elfs.items():
            sizes = section_sizes(elf)
            counts["riscv_text_bytes"][core] = sizes.get("text", sum(sizes.values()))
    except Exception as e:      # a report must not fail the kernel
        counts["riscv_text_bytes"] = f"unavailable: {e!r}"
    return counts


def sfpu_schedule(plan: Plan) -> str:
    """Which SFPU schedule the kernel got: SFPLOADMACRO (and what it schedules) or macro-free, and why."""
    prog = plan.sfpu_program()
    if prog is None:
        return "none"
    if prog.macro is None:
        return f"macro-free: {prog.macro_note or 'no SFPLOADMACRO form for this family'}"
    if plan.target.macro_free:
        if TARGETS[plan.target.name].macro_free:
            return f"macro-free: target {plan.target.name} does not implement SFPLOADMACRO"
        return f"macro-free: the default on target {plan.target.name} (TT_SFPU_MACRO=1 asks for SFPLOADMACRO)"
    return f"SFPLOADMACRO: {prog.macro.scheduled} scheduled on the MAD and Store sub-units"


def report(plan: Plan, elfs: dict[str, bytes]) -> dict:
    def stream(s, mode=None):
        return {"buffer_slot": plan.buffers[s.buf].slot, "dtype": s.dtype, "tile_format": s.tile_format,
                "index_c": s.index_c, "valid_c": s.valid_c, "contiguous": s.contiguous, "reader_mode": mode}
    modes = plan.reader_modes()
    prog = plan.sfpu_program()
    return {
        "name": plan.name, "ranges": list(plan.ranges), "n_elements": plan.n_elements, "n_tiles": plan.n_tiles,
        "tile_elements": TILE_ELEMS,
        "buffers": [{"slot": b.slot, "dtype": b.dtype, "nbytes": b.nbytes} for b in plan.buffers],
        "inputs": [stream(s, m) for s, m in zip(plan.inputs, modes)], "output": stream(plan.output),
        "ops": list(plan.ops), "placement": placement(plan),
        "target": plan.target.name, "schedule": plan.target.schedule,
        "err_budget": knobs.err_budget(), "cores": 1,
        "dst_slots": prog.dst_slots if prog is not None else 0, "out_slot": prog.out_slot if prog is not None else 0,
        "l1": {k: f"0x{v:X}" for k, v in plan.l1.items()},
        "instructions": instruction_counts(plan, elfs),
        "compact_reader": plan.compact_reader or None,
        "shared_programs": programs_report(plan),
        **placement_report(plan),
    }


def programs_report(plan: Plan) -> dict | None:
    """The cores that run a program shared by kernels and the table they read (argument words from TABLE_AT: buffer
    indices, not addresses, so the same for every launch of the kernel; a split launch's cores differ only in the range
    words it points at), None where no core does (lowering/families/shared_programs.py)."""
    cores = shared_programs.programs(plan, plan.fpu_ops, plan.dst_inputs) if isinstance(plan, ElementwisePlan) else None
    if not cores:
        return None
    return {"cores": sorted(cores), "table_at": shared_programs.TABLE_AT,
            "table": plan.arg_words([0] * len(plan.buffers))[shared_programs.TABLE_AT:]}


def report_text(r: dict) -> str:
    lines = [f"kernel {r['name']}: ranges {r['ranges']} = {r['n_elements']} elements, {r['n_tiles']} tile(s)",
             f"target {r.get('target', 'emu')}: {r.get('schedule', '')}", "", "streams:"]
    for j, s in enumerate(r["inputs"]):
        mode = s.get("reader_mode") or ("contiguous" if s["contiguous"] else "gather")
        how = mode if mode == "contiguous" else f"{mode} [{s['index_c']}]" + (f" if ({s['valid_c']})" if s["valid_c"] else "")
        lines.append(f"  in{j}: buffer slot {s['buffer_slot']} {s['dtype']} ({s['tile_format']}) {how}")
    if r.get("compact_reader"):
        lines.append(f"  (compact reader: {r['compact_reader']})")
    o = r["output"]
    lines.append(f"  out: buffer slot {o['buffer_slot']} {o['dtype']} ({o['tile_format']}) "
                 + ("contiguous" if o["contiguous"] else f"scatter [{o['index_c']}]"))
    budget = r["err_budget"]
    lines += ["", "placement (error budget " + (f"{budget:g}" if budget else "none: float32-faithful") + "):"]
    if r.get("nodes"):
        lines += [placement_table(r)]
    else:
        lines += [f"  {p['op']:<20} {p['engine']:<5} {p['precision']}" for p in r["placement"]] or ["  (no ALU ops: copy)"]
    i = r["instructions"]
    lines += ["", f"SFPU: {i['sfpu_setup']} setup + {i['sfpu_body']} body instructions per row step "
                  f"(+ {i['sfpu_body_stalls']} auto-stall cycles) = {i['sfpu_per_tile']} instructions per tile, "
                  f"{i['sfpu_total']} in total ({r['dst_slots']} Dst slots)", f"SFPU schedule: {i['sfpu_schedule']}"]
    if isinstance(i["riscv_text_bytes"], dict):
        lines.append("RISC-V .text: " + ", ".join(f"{c} {n} B" for c, n in i["riscv_text_bytes"].items()))
    if r.get("shared_programs"):
        sp = r["shared_programs"]
        lines.append(f"shared programs on {', '.join(sp['cores'])}: table from argument word {sp['table_at']} "
                     f"{sp['table']}")
    lines += ["", "L1: " + ", ".join(f"{k} {v}" for k, v in r["l1"].items()), ""]
    return "\n".join(lines)


def _e(x) -> str:
    return "-" if x is None else f"{x:.2e}"


def placement_table(r: dict) -> str:
    """The per-node placement table of report.txt (and of `python -m tt_backend tune`)."""
    rows = [f"  {'node':<6} {'op':<11} {'engine':<6} {'fidelity':<8} {'formats':<13} {'pred.err':>9} {'bound':>9} "
            f"{'cycles':>8}"]
    for n in r["nodes"]:
        f = n.get("formats") or {}
        fmts = f"{f['srca']}x{f['srcb']}" if "srca" in f else "fp32"
        rows.append(f"  n{n['id']:<5} {n['op']:<11} {n['engine']:<6} {n['fidelity'] or '-':<8} {fmts:<13} "
                    f"{_e(n.get('predicted_error')):>9} {_e(n.get('bound')):>9} {n.get('cycles', 0):>8}"
                    + ("  (pinned)" if n.get("pinned") else ""))
    c = r.get("predicted_cycles_per_tile") or {}
    rows.append(f"  predicted error {_e(r.get('predicted_error'))} (max elementwise {_e(r.get('predicted_max_rel'))}), "
                f"measured {_e(r.get('measured_error'))}; predicted cycles {r.get('predicted_cycles')} "
                f"(per tile: unpack {c.get('unpack')}, fpu {c.get('fpu')}, sfpu {c.get('sfpu')}, pack {c.get('pack')}; "
                f"all-SFPU {r.get('all_sfpu_cycles')})" + ("; products reassociated" if r.get("reassociated") else ""))
    if (lc := r.get("predicted_launch_cycles")) is not None:
        rows.append(f"  predicted launch cycles {lc['total']} (reader {lc['reader']}, compute {lc['compute']}, "
                    f"writer {lc['writer']}: lowering/families/mover_cost.py)"
                    + (f"; {lc['cores']} cores (grid {lc['grid']}, {lc['tiles_per_core']} tiles per core)"
                       if "cores" in lc else ""))
    return "\n".join(rows)


_unwritable_warned = False      # one warning per process for a dump directory that cannot be written


def _unwritable(root: Path, e: OSError) -> None:
    global _unwritable_warned
    if not _unwritable_warned:
        _unwritable_warned = True
        warnings.warn(f"TT_DUMP={str(root)!r} cannot be written ({e.strerror or e}): kernels run without their dumps. "
                      "Free space there or point TT_DUMP elsewhere", TTWarning)


def write_kernel(root: str | os.PathLike, plan: Plan, sources: dict[str, str], headers: dict[str, str],
                 elfs: dict[str, bytes], key: str = "") -> Path:
    """The kernel's dump directory (absent when it could not be written)."""
    root = Path(root)
    d = root / (f"{plan.name}_{key}" if key else plan.name)
    tmp = None
    try:
        root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{d.name}.", dir=root))
        _write_files(tmp, plan, sources, headers, elfs)
        if d.exists():                      # the same kernel dumped by an earlier run: this one replaces it
            shutil.rmtree(d)
        os.replace(tmp, d)
    except OSError as e:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        _unwritable(root, e)
    return d


def write_staged(root: str | os.PathLike, plan: StagedPlan, key: str = "") -> Path:
    """A staged kernel's directory (lowering/families/staged.py): report.json/.txt list its stages (each dumped as a
    kernel of its own, `<stage name>_<key>`) and where each intermediate lives."""
    root = Path(root)
    d = root / (f"{plan.name}_{key}" if key else plan.name)
    r = {"name": plan.name, "staged": True, "stages": plan.where(),
         "scratch": [{"buffer": f"scratch {j}", "dtype": b.dtype, "nbytes": b.nbytes, "lives_in": "DRAM"}
                     for j, b in enumerate(plan.scratch)], **placement_report(plan)}
    lines = [f"kernel {plan.name}: {len(plan.stages)} stages, launched in order in one call", ""]
    lines += [f"  {s['kernel']:<24} {s['family']:<18} ranges {s['ranges']}: reads {', '.join(s['reads']) or '-'}; "
              f"writes {s['writes']}" for s in r["stages"]]
    lines += ["", "intermediates:"] + [f"  {x['buffer']}: {x['dtype']}, {x['nbytes']} bytes in {x['lives_in']}"
                                        for x in r["scratch"]] + [""]
    try:
        d.mkdir(parents=True, exist_ok=True)
        (d / "report.json").write_text(json.dumps(r, indent=1))
        (d / "report.txt").write_text("\n".join(lines))
    except OSError as e:
        _unwritable(root, e)
    return d


def _write_files(d: Path, plan: KernelPlan, sources: dict[str, str], headers: dict[str, str],
                 elfs: dict[str, bytes]) -> None:
    for core, src in sources.items():
        (d / f"{core}.c").write_text(src)
    for name, text in headers.items():
        (d / name).write_text(text)
    for core, elf in elfs.items():
        (d / f"{core}.elf").write_bytes(elf)
        try:
            (d / f"{core}.dis").write_text(disassemble(elf))
        except Exception as e:   # no objdump: the ELF is still there
            (d / f"{core}.dis").write_text(f"disassembly unavailable: {e!r}\n")
    r = report(plan, elfs)
    (d / "report.json").write_text(json.dumps(r, indent=1))
    (d / "report.txt").write_text(report_text(r))


def replace_text(path: Path, text: str) -> None:
    """Replace a report file whole (a temporary file renamed over it); on a full disk the old one stays, one warning."""
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError as e:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        _unwritable(path.parent.parent, e)
