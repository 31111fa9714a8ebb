"""SFPLOADMACRO (SFPLOADMACRO.md): an SFPLOAD plus up to one instruction scheduled on each of the Vector Unit's
sub-units (Simple, MAD, Round, Store) from LoadMacroConfig's Sequence, InstructionTemplate and Misc, executed by
cycle (or by issued-instruction count) after the macro. Mixed into the emulator's SFPU (sfpu.py), which supplies
`cycle`, `timing` (the hazard model, cycles.SfpuTiming) and the functional handlers."""
from __future__ import annotations

import numpy as np

from tt_backend.chip import isa
from tt_backend.chip.errors import EmuUndefined, EmuUnimplemented
from tt_backend.chip.numerics.sfpu.lane_math import U32
from tt_backend.chip.numerics.sfpu.state import FLAG_WRITERS

# SFPLOADMACRO.md: which sub-unit executes which instruction (the columns of the table at the top of the page).
SUB_SIMPLE, SUB_MAD, SUB_ROUND, SUB_STORE, SUB_LOAD = 0, 1, 2, 3, 4
SUB_UNIT_NAMES = ("Simple", "MAD", "Round", "Store", "Load")
SIMPLE_OPS = frozenset({"SFPABS", "SFPAND", "SFPARECIP", "SFPCAST", "SFPCOMPC", "SFPCONFIG", "SFPDIVP2", "SFPENCC",
                        "SFPEXEXP", "SFPEXMAN", "SFPGT", "SFPIADD", "SFPLE", "SFPLZ", "SFPMOV", "SFPNOP", "SFPNOT",
                        "SFPOR", "SFPPOPC", "SFPPUSHC", "SFPSETCC", "SFPSETEXP", "SFPSETMAN", "SFPSETSGN", "SFPSHFT",
                        "SFPSWAP", "SFPTRANSP", "SFPXOR"})
MAD_OPS = frozenset({"SFPADD", "SFPADDI", "SFPLUT", "SFPLUTFP32", "SFPMAD", "SFPMUL", "SFPMULI", "SFPMUL24", "SFPNOP"})
ROUND_OPS = frozenset({"SFPNOP", "SFPSHFT2", "SFP_STOCH_RND"})
STORE_OPS = frozenset({"SFPSTORE"})
SUB_UNIT_OPS = (SIMPLE_OPS, MAD_OPS, ROUND_OPS, STORE_OPS)
LOAD_OPS = frozenset({"SFPLOAD", "SFPLOADI", "SFPLOADMACRO", "SFPNOP"})


def sfpu_sub_unit(name: str) -> int:
    """The sub-unit a regular SFPU instruction occupies (for SFPLOADMACRO slot collisions)."""
    if name in LOAD_OPS:
        return SUB_LOAD
    for i, ops in enumerate(SUB_UNIT_OPS):
        if name in ops:
            return i
    return SUB_LOAD


# Simple-unit instructions whose functional model reads VD as an input (`unsigned VB = VD;`): inside an
# SFPLOADMACRO sequence that input is the macro-chosen VB.
_VB_AS_VD_INPUT = frozenset({"SFPIADD", "SFPSHFT", "SFPAND", "SFPOR", "SFPXOR", "SFPSETEXP", "SFPSETMAN", "SFPSETSGN",
                             "SFPGT", "SFPLE", "SFPSWAP"})
_TEMPLATE_CACHE: dict[int, tuple[str, dict]] = {}


class Scheduled:
    """One instruction scheduled by SFPLOADMACRO on a sub-unit: executes at cycle `due`, or after `rem` more issued
    SFPU instructions while any outstanding one counts instructions (UnitDelayKind)."""
    __slots__ = ("sub", "name", "fields", "delay", "by_instr", "due", "rem", "vb", "vc", "vd", "vb_input")

    def __init__(self, sub, name, fields, delay, by_instr):
        self.sub, self.name, self.fields, self.delay, self.by_instr = sub, name, fields, delay, by_instr
        self.due, self.rem = None, 0
        self.vb = self.vc = self.vd = fields.get("lreg_ind", 0)
        self.vb_input = False


class MacroScheduler:
    """SFPLOADMACRO and the schedule of the instructions it starts."""

    def reset(self) -> None:
        super().reset()
        self.scheduled: list[Scheduled] = []                  # SFPLOADMACRO-scheduled instructions not yet run
        self.macro_ops = 0                                    # scheduled instructions executed
        self._last_ran = {}                                   # sub-unit -> last cycle a scheduled instruction ran
        self._swap_cycle = -10                                # cycle of the last scheduled SFPSWAP
        self._flags_after = None                              # flags a same-cycle scheduled instruction wrote

    def SFPLOADMACRO(self, f: dict, dst_base: int) -> None:
        """SFPLOADMACRO.md: an SFPLOAD into LReg[VD], then up to one instruction scheduled per sub-unit (Simple, MAD,
        Round, Store) from Sequence[MacroIndex], InstructionTemplate[0-3] and Misc."""
        lreg_ind, imm10 = f["lreg_ind"], f["dest_reg_addr"]
        macro, vd, mod0 = lreg_ind >> 2, ((imm10 & 1) << 2) | (lreg_ind & 3), f["instr_mod0"]
        addr = (imm10 + dst_base) & 0x3FE          # Imm10 bit 0 is VDHi; Dst address bit 0 is unused anyway
        self.SFPLOAD({"lreg_ind": vd, "instr_mod0": mod0, "dest_reg_addr": addr}, 0)
        seq, misc, templates = self._macro_config(macro)
        if not seq:
            return
        cycle = self.cycle
        for i in range(4):
            bits = (seq >> (8 * i)) & 0xFF
            delay = (bits >> 3) & 7
            if delay != 7:   # ForgetFutureInstructionWhoseDelayIs(Delay)
                due = cycle + 1 + delay
                self.scheduled = [e for e in self.scheduled if not (e.sub == i and e.due == due)]
            sel = bits & 7
            if sel == 0:
                continue
            if sel == 1:
                self.undefined(f"SFPLOADMACRO: Sequence[{macro}] selects 1 for the {SUB_UNIT_NAMES[i]} sub-unit")
                continue
            if sel == 2:
                name, tf = "SFPNOP", {}
            elif sel == 3:
                name, tf = "SFPSTORE", {"lreg_ind": 0}
            else:
                name, tf = self._template(int(templates[sel - 4]))
            if name not in SUB_UNIT_OPS[i]:
                if i == SUB_STORE:
                    self.undefined(f"SFPLOADMACRO: {name} scheduled on the Store sub-unit")
                    continue
                name, tf = "SFPNOP", {}
            e = Scheduled(i, name, dict(tf), delay, bool(misc >> (8 + i) & 1))
            if i != SUB_STORE:
                self._macro_operands(e, bits, vd)
            else:
                e.fields["lreg_ind"] = 16 if bits & 0x40 else tf.get("lreg_ind", 0) if bits & 0x80 else vd
                e.fields["instr_mod0"] = mod0 if misc >> (4 + macro) & 1 else misc & 15
                e.fields["dest_reg_addr"] = addr
                e.fields["sfpu_addr_mode"] = 0
                e.fields["_macro"] = True
            self._schedule(e, cycle)

    def _macro_config(self, macro: int) -> tuple[int, int, np.ndarray]:
        seq = self.macro_sequences[:, macro]
        if not (seq == seq[0]).all() or not (self.macro_misc == self.macro_misc[0]).all() or \
                not (self.macro_templates == self.macro_templates[0]).all():
            raise EmuUnimplemented("SFPLOADMACRO with LoadMacroConfig differing between lanes")
        return int(seq[0]), int(self.macro_misc[0]), self.macro_templates[0]

    def _template(self, word: int) -> tuple[str, dict]:
        d = _TEMPLATE_CACHE.get(word)
        if d is None:
            try:
                d = isa.decode(word)
            except Exception:
                d = ("?", {})
            _TEMPLATE_CACHE[word] = d
        return d

    @staticmethod
    def _macro_operands(e: Scheduled, bits: int, vd: int) -> None:
        """The VB / VC / VD overrides of SFPLOADMACRO.md's functional model (Simple, MAD and Round sub-units)."""
        name, f = e.name, e.fields
        if name == "SFPNOP":
            return
        vd_field = "lreg_ind" if name == "SFPLUT" else "lreg_dest"
        vc_field = "lreg_c" if "lreg_c" in f else "lreg_src_c" if "lreg_src_c" in f else None
        t_vd = f.get(vd_field, 0)
        t_vc = f[vc_field] if vc_field else None
        mod1 = f.get("instr_mod1", 0)
        if "lreg_src_b" in f:
            t_vb = f["lreg_src_b"]
        elif (name in ("SFPAND", "SFPOR") and mod1 & 1) or (name == "SFPSHFT2" and mod1 in (5, 6)) or \
                (name == "SFPARECIP" and mod1 == 1):
            t_vb = f.get("imm12_math", 0) & 15
        else:
            t_vb = None
        if bits & 0x80:
            vb, vc = vd, (t_vc if t_vc is not None else t_vd)
            if name == "SFPSHFT2" and mod1 in (5, 6):
                raise EmuUnimplemented("SFPLOADMACRO: SFPSHFT2 SHFT_LREG/SHFT_IMM template with VB := VD")
        else:
            vc, vb = vd, (t_vb if t_vb is not None else t_vd)
        e.vd = 16 if bits & 0x40 else vd
        e.vb, e.vc = vb, vc
        f[vd_field] = e.vd
        if vc_field:
            f[vc_field] = vc
        if "lreg_src_b" in f:
            f["lreg_src_b"] = vb
        if name in ("SFPADDI", "SFPMULI"):
            f["_vc"] = vc
        if name == "SFPARECIP" and mod1 == 1:
            f["imm12_math"] = (f.get("imm12_math", 0) & ~15) | vb
        # Simple-unit instructions that read "VD" as an input read VB instead (the usual VB = VD is skipped)
        e.vb_input = name in _VB_AS_VD_INPUT and not (name == "SFPIADD" and mod1 & 1) and \
            not (name in ("SFPSETEXP", "SFPSETMAN", "SFPSETSGN") and mod1 & 1) and \
            not (name == "SFPSHFT" and mod1 & 1 and mod1 & 4)
        if name in ("SFPAND", "SFPOR"):
            f["instr_mod1"] = mod1 & ~1        # VB is routed through the VD input below

    def _schedule(self, e: Scheduled, cycle: int) -> None:
        pend = self.scheduled
        was_instr = any(p.by_instr for p in pend)
        if e.delay == 0:
            e.due = cycle + 1
        elif e.by_instr or was_instr:
            e.due, e.rem = None, e.delay
        else:
            e.due = cycle + 1 + e.delay
        if e.by_instr and not was_instr:    # every outstanding counter now counts issued SFPU instructions
            for p in pend:
                if p.due is not None and p.due > cycle + 1:
                    p.rem, p.due = p.due - cycle - 1, None
        if self.strict and e.due is not None and e.name != "SFPNOP":
            for p in pend:
                if p.sub == e.sub and p.due == e.due and p.name != "SFPNOP":
                    raise EmuUndefined(f"SFPLOADMACRO at cycle {cycle}: two scheduled instructions ({p.name}, "
                                       f"{e.name}) on the {SUB_UNIT_NAMES[e.sub]} sub-unit in cycle {e.due}")
        pend.append(e)

    def _macro_tick(self, name: str, cycle: int) -> bool:
        """Before a regular instruction issued at `cycle`: run the scheduled instructions due by then, count this
        issue for instruction-counted delays. Returns True if the regular instruction is dropped (collision)."""
        # Everything in one cycle sees the state at the start of the cycle: the scheduled instructions run first
        # (latest pipeline stage first), and the regular one then still sees the lane flags of before.
        self.drain_macros(cycle - 1)
        if any(p.due == cycle for p in self.scheduled):
            lf, ul = self.lane_flags.copy(), self.use_lane_flags.copy()
            self.drain_macros(cycle)
            if not (np.array_equal(lf, self.lane_flags) and np.array_equal(ul, self.use_lane_flags)):
                self._flags_after = (self.lane_flags.copy(), self.use_lane_flags.copy())
                self.lane_flags[:], self.use_lane_flags[:] = lf, ul
                self.invalidate()
        dropped = False
        sub = sfpu_sub_unit(name)
        if sub != SUB_LOAD and self._last_ran.get(sub) == cycle:
            if self.strict:
                raise EmuUndefined(f"SFPU cycle {cycle}: {name} collides with an SFPLOADMACRO-scheduled instruction on "
                                   f"the {SUB_UNIT_NAMES[sub]} sub-unit (the regular instruction would be dropped)")
            dropped = True
        if self.scheduled and any(p.by_instr for p in self.scheduled):
            for p in self.scheduled:
                if p.due is None:
                    p.rem -= 1
                    if p.rem <= 0:
                        p.due = cycle + 1
        return dropped

    def drain_macros(self, upto: int | None = None) -> None:
        """Run every scheduled instruction due by cycle `upto` (all cycle-counted ones when None: time passes)."""
        pend = self.scheduled
        while pend:
            if not any(p.by_instr for p in pend):      # back to counting cycles
                for p in pend:
                    if p.due is None:
                        p.due = self.cycle + 1 + p.rem
            due = [p.due for p in pend if p.due is not None]
            if not due:
                return
            c = min(due)
            if upto is not None and c > upto:
                return
            now = sorted((p for p in pend if p.due == c), key=lambda p: -p.sub)
            self.scheduled = pend = [p for p in pend if p.due != c]
            self._run_cycle(c, now)

    def _run_cycle(self, c: int, now: list) -> None:
        by_sub = {p.sub: p for p in now}
        simple, mad, rnd = by_sub.get(SUB_SIMPLE), by_sub.get(SUB_MAD), by_sub.get(SUB_ROUND)
        if self.strict:
            if simple and rnd and simple.name != "SFPNOP" and rnd.name != "SFPNOP" and \
                    (simple.vd == 16) == (rnd.vd == 16):
                raise EmuUndefined(f"SFPLOADMACRO: Simple ({simple.name}) and Round ({rnd.name}) in cycle {c} need "
                                   f"exactly one of them with VD == 16")
            if simple and simple.name == "SFPSWAP" and not (mad and mad.name == "SFPNOP"):
                raise EmuUndefined(f"SFPLOADMACRO: SFPSWAP on the Simple sub-unit in cycle {c} without SFPNOP "
                                   f"scheduled on the MAD sub-unit for the same cycle")
            if self._swap_cycle == c - 1:
                for p in (simple, rnd):
                    if p and p.name != "SFPNOP":
                        raise EmuUndefined(f"SFPLOADMACRO: {p.name} on the {SUB_UNIT_NAMES[p.sub]} sub-unit in cycle "
                                           f"{c}, the cycle after a scheduled SFPSWAP (must be idle or SFPNOP)")
        for p in now:
            self._last_ran[p.sub] = c
            if p.name == "SFPSWAP":
                self._swap_cycle = c
            if p.name == "SFPNOP":
                continue
            self.timing.scheduled(c, p.name, p.fields, p.sub)
            self._exec_scheduled(p)
            self.macro_ops += 1

    def _exec_scheduled(self, p: Scheduled) -> None:
        handler = self.handlers[p.name]
        f = p.fields
        if p.vb_input and p.vb != p.vd:
            # The instruction reads its "VD" input from VB: run it on an extended register file whose VD row holds
            # VB's value (VC moved to a scratch row 17 when it aliases VD), then restore VD on disabled lanes.
            orig = self.lreg
            ext = np.empty((18, 32), dtype=U32)
            ext[:17] = orig
            vc_field = "lreg_c" if "lreg_c" in f else "lreg_src_c" if "lreg_src_c" in f else None
            f2 = dict(f)
            if vc_field and f[vc_field] == p.vd:
                ext[17] = orig[p.vd]
                f2[vc_field] = 17
            old_vd = orig[p.vd].copy()
            ext[p.vd] = orig[p.vb]
            self.lreg = ext
            try:
                handler(f2, 0)
            finally:
                self.lreg = orig
            en = self.enabled()
            if vc_field and f2[vc_field] == 17 and p.name == "SFPSWAP":
                ext[p.vd] = ext[17]
            orig[:] = ext[:17]
            if p.vd < 8 or p.vd == 16:
                orig[p.vd] = np.where(en, ext[p.vd], old_vd)
        else:
            handler(f, 0)
        if p.name in FLAG_WRITERS:
            self.invalidate()
