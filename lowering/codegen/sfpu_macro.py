"""SFPLOADMACRO schedules for elementwise row steps: the row step's last op F (an SFPMAD-family instruction) and the
output store run on the MAD and Store sub-units, scheduled by one SFPLOADMACRO, instead of being issued.

SFPLOADMACRO (docs/isa.md §3.10, ISA BH SFPLOADMACRO.md) is an SFPLOAD into LReg[X] that also schedules up to one
instruction per sub-unit; a scheduled instruction takes LReg[X] as its VB or VC operand and can write LReg16, and a
scheduled SFPSTORE writes to the Dst address the macro loaded from. The output slot holds nothing to load, so the
macro loads it in MOD0_FMT_ZERO mode (X := 0, only its address matters) right before the regular instruction W that
writes F's operand into X; F, with X as its overridden operand and LReg16 as its result, and the store of LReg16 are
scheduled to run after the row step's last regular issue. A row step then issues its regular part and the macro:
len(body) - 1 issues instead of len(body) + 1 plus the stall between F and the store (a*b+a: 3 cycles per row step
instead of 5). The same instructions compute the same bits; only when they run changes.

Timing, counted in SFPU issues (Misc.UnitDelayKind = instructions), so a stall or a gap in issue delays the scheduled
work with the regular one: with the macro at position m of an N-issue row step, F has delay N-1-m (it runs the cycle
after issue N-1, i.e. with the next row step's first issue) and the store delay N-1-m+lat(F) (after F's latency).
What the schedule relies on, checked here, else the program keeps its macro-free form (`macro_note` says why):
  * F writes the stored register, is an SFPMAD, SFPADD or SFPMUL in a part of the body where
    every lane is enabled (it runs at the next row step's start, in the base state), and what follows it up to the
    store neither reads nor writes its operands or result;
  * one of F's overridable operands (VB, VC; VA after swapping the factors, exact: the product commutes) is a register
    X the body writes; W, the first of the writes that give X its final value (an SFPLOADI pair writes one half
    each), really writes it (not a flag setter) and does not read it;
  * F's operands are ready when it runs: a MAD-class writer at least two issues before the row step's end (else
    SFPNOPs are appended), since nothing stalls a scheduled consumer;
  * no collision (SFPLOADMACRO.md: a regular instruction meeting a scheduled one on its sub-unit is dropped): the
    regular issue F runs with is not on the MAD sub-unit (nor changes the lane flags, nor follows a two-cycle op),
    the one the store runs with is not an SFPSTORE;
  * delays fit the 3-bit field (<= 7).
The last row step's F and store wait for `drain` (SFPNOPs) after the row steps, which the compute template issues
after each MOP (templates/blocks/sfpu.c.j2 replay_rows), so nothing scheduled is left waiting for issues while the
thread waits to drain between MOPs.
A scheduled F reads its operands in the cycle the next row step's first regular issue writes its own result, as
tt-llk's in-place `where` does (its scheduled SFPSETCC reads the register the next row's SFPLOADMACRO loads in the
same cycle: docs/sfpu_path.md §5.4).
"""
from __future__ import annotations

from tt_backend.chip.isa import decode, encode
from tt_backend.chip.sfpu_regs import SFPU_MAD_CLASS, sfpu_indirect, sfpu_regs, two_cycle
from tt_backend.lowering.codegen.sfpu_codegen import insert_nops
from tt_backend.lowering.codegen.sfpu_schedule import all_lanes_enabled, pure, row_stalls
from tt_backend.lowering.plan import MacroSchedule, SfpuProgram

Ins = tuple[str, dict[str, int]]
MAX_DELAY = 7                   # Sequence delay field: 3 bits
MOD0_ZERO = 11                  # SFPLOAD MOD0_FMT_ZERO: LReg := 0, Dst not read
# Sequence byte (SFPLOADMACRO.md): bits 0-2 select (3 = SFPSTORE, 4 = InstructionTemplate[0]), 3-5 the delay,
# 0x40 the result (or the stored register) is LReg16, 0x80 the loaded register is VB (else VC)
SEL_STORE, SEL_TEMPLATE0 = 3, 4
VD16, VB_IS_LOADED = 0x40, 0x80
KEEP = 7 << 3                   # an unused sub-unit: nothing scheduled, and delay 7 forgets nothing already scheduled
MAD, ROUND, STORE = 1, 2, 3      # their bytes in a Sequence word (the Simple sub-unit's is byte 0)
DELAY_BY_INSTRUCTIONS = 0xF << 8  # Misc.UnitDelayKind, one bit per sub-unit: count issued SFPU instructions
# F's operands the macro can override: field -> whether it is VB (Sequence bit 0x80) rather than VC (SFPMUL's VC is
# its LReg9 zero addend)
OVERRIDABLE = {"SFPMAD": {"lreg_src_b": True, "lreg_src_c": False}, "SFPADD": {"lreg_src_b": True, "lreg_src_c": False},
               "SFPMUL": {"lreg_src_b": True}}
FACTORS = ("lreg_src_a", "lreg_src_b")   # SFPMAD-family factors: swapping them is exact (NEGATE_VB negates the product)


def _reads(ins: Ins) -> int:
    return sfpu_regs(*ins)[0]


def _writes(ins: Ins) -> int:
    return sfpu_regs(*ins)[2]


def _latency(ins: Ins) -> int:
    return 2 if ins[0] in SFPU_MAD_CLASS else 1


# SFPLOADI.md / SFPLOAD.md: modes that write one half of VD and keep the other -> the half written (1 low, 2 high);
# every other instruction that writes an LReg writes all of it (3)
HALF_WRITES = {("SFPLOADI", 8): 2, ("SFPLOADI", 10): 1, ("SFPLOAD", 15): 2, ("SFPLOAD", 14): 1}


def _write_start(rest: list[Ins], x: int) -> int | None:
    """The position of the first instruction of the writes that give X its final value in the row step (a full write,
    or half writes that together cover it, with nothing reading X in between), if that instruction really writes X
    (not a flag setter, which sfpu_regs counts as writing its VD field: safe for ordering, not here) and does not read
    it; else None."""
    writers = [i for i, ins in enumerate(rest) if _writes(ins) >> x & 1]
    covered, k = 0, len(writers)
    while covered != 3 and k:
        k -= 1
        w = writers[k]
        if k + 1 < len(writers) and any(_reads(ins) >> x & 1 for ins in rest[w + 1:writers[k + 1]]):
            return None
        covered |= HALF_WRITES.get((rest[w][0], rest[w][1].get("instr_mod0", 0)), 3)
    if covered != 3 or not pure(*rest[w]) or _reads(rest[w]) >> x & 1:
        return None
    return w


def _dst_access(ins: Ins) -> bool:
    return ins[0] in ("SFPLOAD", "SFPSTORE", "SFPLOADMACRO")


def _sequence(mad: int, store: int) -> int:
    return KEEP | mad << 8 * MAD | KEEP << 8 * ROUND | store << 8 * STORE


def _config_words(template: int, sequence: int, misc: int) -> list[Ins]:
    """SFPCONFIG writes InstructionTemplate[0] and Sequence[0] from LReg0 (placed with SFPLOADI), Misc from its
    immediate (SFPCONFIG.md)."""
    out: list[Ins] = []
    for dest, value in ((0, template), (4, sequence)):
        out += [("SFPLOADI", {"lreg_ind": 0, "instr_mod0": 8, "imm16": value >> 16}),
                ("SFPLOADI", {"lreg_ind": 0, "instr_mod0": 10, "imm16": value & 0xFFFF}),
                ("SFPCONFIG", {"config_dest": dest, "instr_mod1": 0, "imm16_math": 0})]
    return out + [("SFPCONFIG", {"config_dest": 8, "instr_mod1": 1, "imm16_math": misc})]


def _operand_choices(f_ins: Ins) -> list[tuple[dict[str, int], str, bool]]:
    """(F's fields, overridden field, is VB) for each way the macro can supply one of F's operands."""
    name, f = f_ins
    forms = [dict(f)]
    if f.get(FACTORS[0], 0) != f.get(FACTORS[1], 0):
        forms.append(f | {FACTORS[0]: f.get(FACTORS[1], 0), FACTORS[1]: f.get(FACTORS[0], 0)})
    return [(g, field, vb) for g in forms for field, vb in OVERRIDABLE[name].items() if g.get(field, 0) < 8]


def macro_schedule(prog: SfpuProgram) -> tuple[MacroSchedule | None, str]:
    """The SFPLOADMACRO form of `prog`'s row step, or None and why it has none (module docstring)."""
    body = [decode(w) for w in prog.body]
    store = body[-1]
    if store[0] != "SFPSTORE" or store[1].get("sfpu_addr_mode", 0) != 1 or \
            store[1].get("dest_reg_addr", 0) != 64 * prog.out_slot:
        return None, "the row step does not end with its output store"
    out_reg = store[1].get("lreg_ind", 0)
    fi = max(i for i, ins in enumerate(body[:-1]) if _writes(ins) >> out_reg & 1) \
        if any(_writes(ins) >> out_reg & 1 for ins in body[:-1]) else None
    if fi is None:
        return None, "the stored value is not computed in the row step"
    f_ins = body[fi]
    if f_ins[0] not in OVERRIDABLE or sfpu_indirect(*f_ins):
        return None, f"its last op is {f_ins[0]}, not an SFPMAD-family instruction the MAD sub-unit can be given"
    lanes = all_lanes_enabled(body)
    if not lanes[fi] or not lanes[-1]:
        return None, f"its last op ({f_ins[0]}) runs with lanes disabled"
    f_regs = _reads(f_ins) | _writes(f_ins)
    if any(not pure(*ins) or (_reads(ins) | _writes(ins)) & f_regs for ins in body[fi + 1:-1]):
        return None, f"the instructions between its last op ({f_ins[0]}) and the store depend on it"
    rest = body[:fi] + body[fi + 1:-1]
    if any(_dst_access(ins) and ins[1].get("sfpu_addr_mode", 0) for ins in rest):
        return None, "a load before the store advances the Dst counter"
    best = None
    for fields, field, vb in _operand_choices(f_ins):
        x = fields.get(field, 0)
        w = _write_start(rest, x)
        if w is not None and (best is None or w > best[0]):
            best = (w, x, fields, vb)
    if best is None:
        return None, f"none of its last op's ({f_ins[0]}) overridable operands is written in the row step"
    w, x, fields, vb = best
    macro = ("SFPLOADMACRO", {"lreg_ind": x & 3, "instr_mod0": MOD0_ZERO, "sfpu_addr_mode": 0,
                              "dest_reg_addr": 64 * prog.out_slot | x >> 2})
    row = insert_nops(rest[:w] + [macro] + rest[w:], 64 * (prog.out_slot + 1))
    # F's operands ready when it runs (the cycle after the last issue): nothing stalls a scheduled consumer
    while any(_writes(ins) & _reads(f_ins) and i + _latency(ins) > len(row) for i, ins in enumerate(row)):
        row.append(("SFPNOP", {}))
    last_dst = max(i for i, ins in enumerate(row) if _dst_access(ins))     # it advances the Dst counter instead
    row[last_dst] = (row[last_dst][0], row[last_dst][1] | {"sfpu_addr_mode": 1})
    n, m, lat = len(row), next(i for i, ins in enumerate(row) if ins[0] == "SFPLOADMACRO"), _latency(f_ins)
    f_delay, store_delay = n - 1 - m, n - 1 - m + lat
    if store_delay > MAX_DELAY:
        return None, f"its last op would wait {store_delay} issues for its operands (at most {MAX_DELAY})"
    # the next row step's first issues run beside the scheduled op (issue 0) and before the scheduled store (issue
    # lat % n), which both take the lane flags as those issues leave them: none may touch the flags
    meets = row[:max(1, lat % n)]
    if (row[0][0] in SFPU_MAD_CLASS or any(not (pure(*ins) or ins[0] == "SFPLOADMACRO") for ins in meets)
            or two_cycle(*row[-1])):
        return None, "the row step's first issues meet the scheduled op or store (MAD sub-unit, lane flags or a " \
                     "two-cycle op)"
    if row[lat % n][0] == "SFPSTORE":
        return None, "a spill store meets the scheduled store on the Store sub-unit"
    template = encode(f_ins[0], **(fields | {"lreg_dest": 0}))
    sequence = _sequence(SEL_TEMPLATE0 | f_delay << 3 | VD16 | (VB_IS_LOADED if vb else 0),
                         SEL_STORE | store_delay << 3 | VD16)
    misc = store[1].get("instr_mod0", 0) | DELAY_BY_INSTRUCTIONS
    drain = [("SFPNOP", {})] * (lat + 1)
    return MacroSchedule(config=[encode(nm, **f) for nm, f in _config_words(template, sequence, misc)],
                         body=[encode(nm, **f) for nm, f in row], drain=[encode(nm, **f) for nm, f in drain],
                         body_stalls=row_stalls(row), scheduled=f"{f_ins[0]} + SFPSTORE"), ""


def with_macro_schedule(prog: SfpuProgram) -> SfpuProgram:
    """`prog` with its SFPLOADMACRO form (or the reason it has none) filled in."""
    prog.macro, prog.macro_note = macro_schedule(prog)
    return prog
