"""List scheduling of one SFPU row step: the same instructions, on the same registers, in an order in which an
instruction rarely directly follows the MAD-class instruction whose result it reads (on Blackhole the Vector Unit
stalls it one cycle: SFPMAD.md "Instruction scheduling", docs/isa.md §3.2).

The register allocation is done before (sfpu_codegen), so an order only has to keep every dependence:
  * LRegs: read after write, write after read, write after write (chip.sfpu_regs gives what each instruction really
    reads and writes);
  * Dst: an SFPSTORE stays ordered with every SFPLOAD and SFPSTORE (loads may pass each other);
  * lane predication: instructions that change the lane flags, or whose effects are not modelled here (`_barrier`),
    keep their order and split the body into regions. An instruction of a predicated region stays in it. One of a
    region in which every lane is enabled (the base state the body starts in, restored by an SFPENCC that sets the
    lane flags) computes the same in any such region, so it may move to another one: it must then come before the
    region boundary that precedes its first dependent instruction that cannot move with it (its deadline).
The greedy choice at each step: the ready instruction that costs no stall or hazard SFPNOP after the previous one,
then the one heading the longest latency path, then the earliest in the original order.
"""
from __future__ import annotations

from tt_backend.chip.sfpu_regs import SFPU_MAD_CLASS, auto_stall, sfpu_indirect, sfpu_regs

Ins = tuple[str, dict[str, int]]
_DST = 1 << 20                    # the Dst bit in the register masks below (LRegs are bits 0-16)
_EVERYTHING = (1 << 21) - 1

# instructions that never touch the lane flags or hidden state: (name -> predicate on the fields that keeps it so)
_PURE = {
    **{n: lambda f: True for n in ("SFPLOAD", "SFPLOADI", "SFPMAD", "SFPADD", "SFPMUL", "SFPADDI", "SFPMULI",
                                    "SFPMUL24", "SFPAND", "SFPOR", "SFPXOR", "SFPNOT", "SFPABS", "SFPSETEXP",
                                    "SFPSETMAN", "SFPSETSGN", "SFPDIVP2", "SFPEXMAN", "SFPSHFT", "SFPARECIP",
                                    "SFPSWAP", "SFPLUT", "SFPLUTFP32")},
    "SFPSTORE": lambda f: not f.get("sfpu_addr_mode", 0),          # addressing mode 1 advances the Dst counter
    "SFPIADD": lambda f: bool(f.get("instr_mod1", 0) & 4),         # CC_NONE
    "SFPEXEXP": lambda f: not f.get("instr_mod1", 0) & 10,         # SET_CC_SGN_EXP / SET_CC_COMP_EXP
    "SFPLZ": lambda f: not f.get("instr_mod1", 0) & 10,            # CC_NE0 / CC_COMP
    "SFPMOV": lambda f: not f.get("instr_mod1", 0) & 8,            # FROM_SPECIAL reads the PRNG / config
    "SFPCAST": lambda f: f.get("instr_mod1", 0) & 3 != 1,          # stochastic rounding draws from the PRNG
}
# barriers whose only hidden effect is on the lane flags (their LReg use is modelled); any other barrier is assumed
# to read and write everything
_FLAG_SETTERS = frozenset({"SFPSETCC", "SFPENCC", "SFPPUSHC", "SFPPOPC", "SFPCOMPC", "SFPGT", "SFPLE", "SFPIADD",
                           "SFPEXEXP", "SFPLZ", "SFPNOP"})


def _barrier(name: str, f: dict[str, int]) -> bool:
    pure = _PURE.get(name)
    return pure is None or not pure(f) or sfpu_indirect(name, f)


def _all_lanes_after(name: str, f: dict[str, int], before: bool) -> bool:
    """Whether every lane is enabled after barrier `name` (given whether it was before): an SFPENCC that sets
    LaneFlags (RI clear: true; RI set: Imm bit 1) enables all; SFPNOP and an addressing-mode store change nothing."""
    if name == "SFPENCC":
        return not f.get("instr_mod1", 0) & 8 or bool(f.get("imm12_math", 0) & 2)
    return before and (name == "SFPNOP" or name == "SFPSTORE")


def pure(name: str, f: dict[str, int]) -> bool:
    """Whether the instruction neither touches the lane flags nor has effects beyond the LRegs it reads and writes
    (and Dst): one that may move, or run at another time, with the same result wherever every lane is enabled."""
    return not _barrier(name, f)


def all_lanes_enabled(ins: list[Ins]) -> list[bool]:
    """Per instruction, whether every lane is enabled when it runs, and (one more entry) after the last one, for a
    body that starts in the base state (every lane enabled). Conservative: False when it cannot tell."""
    state, out = True, []
    for name, f in ins:
        out.append(state)
        if _barrier(name, f):
            state = _all_lanes_after(name, f, state)
    return out + [state]


def _uses(name: str, f: dict[str, int]) -> tuple[int, int]:
    """(read mask, write mask) over LRegs and Dst."""
    if _barrier(name, f) and name not in _FLAG_SETTERS and name != "SFPSTORE":
        return _EVERYTHING, _EVERYTHING
    reads, _, writes = sfpu_regs(name, f)
    if name == "SFPLOAD":
        reads |= _DST
    if name == "SFPSTORE":
        writes |= _DST
    return reads, writes


# instructions whose register reads the auto-stall logic does not see: (name -> fields read)
STALL_BLIND = {"SFPIADD": ("lreg_c", "lreg_dest"), "SFPSHFT": ("lreg_c", "lreg_dest"),
               "SFPAND": ("imm12_math", "lreg_c", "lreg_dest"), "SFPOR": ("imm12_math", "lreg_c", "lreg_dest"),
               "SFPSWAP": ("lreg_src_c", "lreg_dest"), "SFPSHFT2": ("lreg_src_c", "lreg_dest", "imm12_math"),
               "SFPCONFIG": ()}


def _writes(name: str, f: dict[str, int]) -> int:
    return f.get("lreg_ind" if name in ("SFPLOAD", "SFPLOADI") else "lreg_dest", 0)   # an omitted field encodes 0


def hazard_nop(prev: Ins, cur: Ins) -> bool:
    """Whether an SFPNOP must separate `prev` and `cur`: an SFPMAD-class result read by an instruction whose read the
    auto-stall misses (STALL_BLIND, conservatively by field), or overwritten by a one-cycle instruction that does not
    read it (so is not stalled)."""
    (pname, pf), (name, f) = prev, cur
    if pname not in SFPU_MAD_CLASS:
        return False
    dest = pf.get("lreg_dest", 0)       # a field the code generator leaves out is encoded as 0 (chip.sfpu_regs)
    blind = name in STALL_BLIND and (name == "SFPCONFIG" or any(f.get(k, 0) == dest for k in STALL_BLIND[name]))
    waw = name not in SFPU_MAD_CLASS and _writes(name, f) == dest and not any(
        f.get(k, 0) == dest for k in ("lreg_c", "lreg_src_a", "lreg_src_b", "lreg_src_c"))
    return blind or waw


def schedule_body(ins: list[Ins], spill_base: int, dst_read_gap: int) -> list[Ins]:
    """`ins` reordered (see the module docstring); `spill_base`/`dst_read_gap`: a reload of spill space is kept at
    least `dst_read_gap` instructions after the spill store when other work allows (else insert_nops pads it)."""
    n = len(ins)
    uses = [_uses(nm, f) for nm, f in ins]
    preds: list[set[int]] = [set() for _ in range(n)]
    last_write: dict[int, int] = {}
    reads_since: dict[int, list[int]] = {}
    for i, (r, w) in enumerate(uses):
        for b in _bits(r):
            if b in last_write:
                preds[i].add(last_write[b])
            reads_since.setdefault(b, []).append(i)
        for b in _bits(w):
            if b in last_write:
                preds[i].add(last_write[b])
            preds[i].update(j for j in reads_since.get(b, ()) if j != i)
            last_write[b], reads_since[b] = i, []
    # regions between barriers; movable = pure and in a region where every lane is enabled
    region, barrier, all_lanes = [0] * n, [False] * n, [True]
    for i, (nm, f) in enumerate(ins):
        region[i] = len(all_lanes) - 1
        if _barrier(nm, f):
            barrier[i] = True
            all_lanes.append(_all_lanes_after(nm, f, all_lanes[-1]))
    movable = [not barrier[i] and all_lanes[region[i]] for i in range(n)]
    succs: list[list[int]] = [[] for _ in range(n)]
    for i in range(n):
        for p in preds[i]:
            succs[p].append(i)
    deadline = [0] * n          # the last region a movable instruction may be placed in
    height = [0] * n            # longest latency path to the end
    for i in reversed(range(n)):
        lat = 2 if ins[i][0] in SFPU_MAD_CLASS else 1
        height[i] = lat + max((height[s] for s in succs[i]), default=0)
        if movable[i]:
            # nothing depends on it: it stays in or before its own region (the body's last instruction, the output
            # store, stays last)
            bound = min((deadline[s] if movable[s] else region[s] if barrier[s] else region[s] - 1
                         for s in succs[i]), default=region[i])
            deadline[i] = max(k for k in range(bound + 1) if all_lanes[k])
    fixed_left = [0] * len(all_lanes)      # per region: its fixed instructions not yet placed
    due = [0] * len(all_lanes)             # per region: movable instructions not yet placed whose deadline it is
    for i in range(n):
        if movable[i]:
            due[deadline[i]] += 1
        elif not barrier[i]:
            fixed_left[region[i]] += 1
    waiting = [len(preds[i]) for i in range(n)]
    ready = {i for i in range(n) if not waiting[i]}       # all dependences placed
    out: list[Ins] = []
    cur = 0                    # the current region
    last_spill_store = -(1 << 30)
    while len(out) < n:
        def eligible(i: int) -> bool:
            if movable[i]:
                return all_lanes[cur]
            if not barrier[i]:
                return region[i] == cur
            return region[i] == cur and not fixed_left[cur] and not due[cur]

        def penalty(i: int) -> int:
            p = 0
            if out:
                p = auto_stall(out[-1], ins[i]) + hazard_nop(out[-1], ins[i])
            nm, f = ins[i]
            if nm == "SFPLOAD" and f.get("dest_reg_addr", 0) >= spill_base:
                p += max(0, dst_read_gap + 1 - (len(out) - last_spill_store))
            return p
        i = min((j for j in ready if eligible(j)), key=lambda j: (penalty(j), -height[j], j))
        ready.remove(i)
        nm, f = ins[i]
        if nm == "SFPSTORE" and f.get("dest_reg_addr", 0) >= spill_base:
            last_spill_store = len(out)
        out.append(ins[i])
        for s in succs[i]:
            waiting[s] -= 1
            if not waiting[s]:
                ready.add(s)
        if movable[i]:
            due[deadline[i]] -= 1
        elif not barrier[i]:
            fixed_left[cur] -= 1
        if barrier[i]:
            cur += 1
    return out


def _bits(mask: int):
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


def row_stalls(ins: list[Ins]) -> int:
    """Auto-stall cycles of one row step run after the previous one (the last instruction precedes the first)."""
    return sum(auto_stall(a, b) for a, b in zip(ins[-1:] + ins[:-1], ins)) if ins else 0
