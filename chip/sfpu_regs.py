"""Which LRegs each SFPU instruction reads and writes, as the hardware's auto-stall logic sees them and as it really
does: the facts both the code generator's scheduler (lowering/codegen/sfpu_schedule.py) and the emulator's cycle model
(runtime/emu/cycles.py) rely on.

Sources (tt-isa-documentation): BH VectorUnit.md (SFPU latency/IPC table), SFPMAD.md (auto-stall and its stall-blind
cases), SFPSWAP.md / SFPSHFT2.md (next cycle only SFPNOP).
"""
from __future__ import annotations

# VectorUnit.md: these have IPC 1 and a latency of 2 cycles; BH hardware stalls the next instruction 1 cycle when it
# reads the result (SFPMAD.md "Instruction scheduling").
SFPU_MAD_CLASS = frozenset({"SFPMAD", "SFPADD", "SFPMUL", "SFPADDI", "SFPMULI", "SFPLUT", "SFPLUTFP32", "SFPMUL24"})
# SFPSWAP (all modes) and SFPSHFT2 in these Mod1 modes: "on the next cycle the only instruction the Vector Unit can
# accept is SFPNOP" (auto stall of one cycle for anything else).
SFPSHFT2_TWO_CYCLE_MODES = frozenset({2, 3, 4})
# SFPCONFIG latency is "<= 2 cycles" (VectorUnit.md); the doc names no interlock beyond the DISABLE_BACKDOOR_LOAD note.

ALL_LREGS = (1 << 17) - 1


def _m(*regs) -> int:
    out = 0
    for r in regs:
        out |= 1 << r
    return out


def sfpu_regs(name: str, f: dict) -> tuple[int, int, int]:
    """(LRegs actually read, LRegs the BH auto-stall logic believes are read, LRegs written) as bitmasks, from the
    instruction pages' functional models and the list of stall-blind cases in SFPMAD.md. A field missing from `f`
    is 0, as the encoder writes it (the code generator's instruction lists leave zero fields out)."""
    g = f.get
    vd = g("lreg_ind" if name in ("SFPLOAD", "SFPLOADI", "SFPSTORE", "SFPLUT") else "lreg_dest", 0)
    vc = g("lreg_c", g("lreg_src_c", 0))
    mod1 = g("instr_mod1", 0)
    if name in ("SFPMAD", "SFPADD", "SFPMUL", "SFPMUL24"):
        r = ALL_LREGS if mod1 & 4 else _m(g("lreg_src_a", 0), g("lreg_src_b", 0), vc)
        return r, r, ALL_LREGS if mod1 & 8 else _m(vd)
    if name in ("SFPADDI", "SFPMULI"):
        return _m(vd), _m(vd), ALL_LREGS if mod1 & 8 else _m(vd)
    if name == "SFPLUT":
        return _m(0, 1, 2, 3), _m(0, 1, 2, 3), ALL_LREGS if g("instr_mod0", 0) & 8 else _m(vd)
    if name == "SFPLUTFP32":
        return _m(0, 1, 2, 3, 4, 5, 6), _m(0, 1, 2, 3, 4, 5, 6), ALL_LREGS if mod1 & 8 else _m(vd)
    if name in ("SFPLOAD", "SFPLOADMACRO"):
        return 0, 0, _m(vd & 7 if name == "SFPLOAD" else ((g("dest_reg_addr", 0) & 1) << 2) | (vd & 3))
    if name == "SFPLOADI":
        return 0, 0, _m(vd)
    if name == "SFPSTORE":
        return _m(vd), _m(vd), 0
    if name in ("SFPNOP", "SFPENCC", "SFPPUSHC", "SFPPOPC", "SFPCOMPC"):
        return 0, 0, 0
    if name == "SFPCONFIG":   # stall-blind: the stall logic does not know SFPCONFIG reads LReg[0]
        return _m(0), 0, 0
    if name == "SFPTRANSP":
        return _m(*range(8)), _m(*range(8)), _m(*range(8))
    if name == "SFPIADD":     # stall-blind: VD read not seen
        return (_m(vc) if mod1 & 1 else _m(vc, vd)), _m(vc), _m(vd)
    if name == "SFPSHFT":     # stall-blind: VD read not seen
        return (_m(vc) if mod1 & 1 and mod1 & 4 else _m(vc, vd)), _m(vc), _m(vd)
    if name in ("SFPAND", "SFPOR"):   # stall-blind: USE_VB ignored, the logic thinks VD is read
        vb = g("imm12_math", 0) & 15 if mod1 & 1 else vd
        return _m(vb, vc), _m(vd, vc), _m(vd)
    if name in ("SFPXOR", "SFPGT", "SFPLE"):
        return _m(vc, vd), _m(vc, vd), _m(vd)
    if name in ("SFPSETEXP", "SFPSETMAN", "SFPSETSGN"):
        r = _m(vc) if mod1 & 1 else _m(vc, vd)
        return r, r, _m(vd)
    if name == "SFPSWAP":     # stall-blind in every mode but SWAP: the first-cycle compare reads are not seen
        return _m(vc, vd), (_m(vc, vd) if mod1 == 0 else 0), _m(vc, vd)
    if name == "SFPSHFT2":
        if mod1 in (0, 1, 2):
            r = _m(0, 1, 2, 3, vc)
            return r, (_m(0, 1, 2, 3) if mod1 != 2 else 0), _m(0, 1, 2, 3)
        if mod1 in (3, 4):    # stall-blind: the logic does not realise these read anything
            return _m(vc), 0, _m(vd)
        vb = g("imm12_math", 0) & 15
        if mod1 == 5:         # stall logic thinks VD is read instead of VB
            return _m(vb, vc), _m(vd, vc), _m(vd)
        return _m(vb), _m(vd), _m(vd)
    if name == "SFP_STOCH_RND":   # VB is read only by the int->int modes that shift by a register
        r = _m(vc, g("lreg_src_b", 0)) if mod1 & 7 in (4, 5) and not mod1 & 8 else _m(vc)
        return r, _m(vc, g("lreg_src_b", 0)), _m(vd)
    if name == "SFPARECIP":
        r = _m(vc, g("imm12_math", 0) & 15) if mod1 == 1 else _m(vc)
        return r, r, _m(vd)
    # SFPMOV SFPABS SFPNOT SFPLZ SFPEXEXP SFPEXMAN SFPDIVP2 SFPSETCC SFPCAST: read VC, write VD
    return _m(vc), _m(vc), _m(vd)


def sfpu_indirect(name: str, f: dict) -> bool:
    """INDIRECT_VA / INDIRECT_VD modes: the stall logic treats them conservatively (SFPMAD.md)."""
    if name == "SFPLUT":
        return bool(f.get("instr_mod0", 0) & 8)
    return name in SFPU_MAD_CLASS and bool(f.get("instr_mod1", 0) & 12)


def two_cycle(name: str, f: dict) -> bool:
    """SFPSWAP / SFPSHFT2 in a two-cycle mode: the next instruction, unless SFPNOP, is stalled one cycle."""
    return name == "SFPSWAP" or (name == "SFPSHFT2" and f.get("instr_mod1", 0) in SFPSHFT2_TWO_CYCLE_MODES)


def auto_stall(prev: tuple[str, dict], cur: tuple[str, dict]) -> int:
    """Cycles the hardware stalls instruction `cur` issued right after `prev` (both regular, not SFPLOADMACRO-
    scheduled): one after a two-cycle instruction, one when `prev` is MAD-class and the stall logic sees `cur` read its
    result (or either is in an INDIRECT mode). Reads the logic misses are not stalls but hazards (the code generator
    puts an SFPNOP there)."""
    (pname, pf), (name, f) = prev, cur
    if two_cycle(pname, pf):
        return int(name != "SFPNOP")
    if pname not in SFPU_MAD_CLASS:
        return 0
    writes = sfpu_regs(pname, pf)[2]
    reads, seen, _ = sfpu_regs(name, f)
    return int(bool(sfpu_indirect(name, f) or writes == ALL_LREGS and reads or seen & writes))
