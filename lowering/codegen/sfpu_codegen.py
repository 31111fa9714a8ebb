"""ValueDAG -> SfpuProgram: the per-row SFPU instruction stream of one elementwise kernel.

`compile_sfpu(dag, n_inputs, out_dtype)`:
  * setup: one SFPENCC (UseLaneFlagsForLaneEnable = true, LaneFlags = true) - the base predication state every
    op sequence (`sfpu_ops`) starts from and returns to - and up to 4 constants (the ones whose per-row SFPLOADIs
    cost most) placed in LReg11-14 with SFPLOADI + SFPCONFIG; the body only reads them.
  * body (one 32-lane row step): live nodes are lowered in depth-first order from the output (`schedule`). LOAD
    and CONST values are materialised lazily at their first use (SFPLOAD from Dst slot j / SFPLOADI, or the
    constant LRegs 9 = 0 and 10 = 1.0) and are re-materialised instead of spilled. Other values live in LReg0-7;
    when an op needs more registers than are free, the live value used furthest in the future is spilled to Dst
    (SFPSTORE, raw 32 bits, packed 2 address units apart after the output slot, see `_Alloc`) and reloaded
    (SFPLOAD) before its next use. The result is stored raw (INT32 mode: no denormal flush) to `out_slot` =
    n_inputs with sfpu_addr_mode=1 as the last instruction; `dst_slots` covers inputs, output and spill space.
  * uniform inputs (`uniform`: input streams holding one value in every datum of a tile, e.g. a broadcast scalar):
    the largest values computed from them alone (`_hoistable`) are computed once per tile in the setup from row step
    0 of their Dst slots and kept in LReg11-14 like the pooled constants (they take those LRegs first); the body reads
    them. The same instruction sequences run on the same values, so the results are the per-row ones bit for bit.
    SFPCONFIG gives lane L the value of lane L & 7, and ttsim refuses it unless all 32 lanes agree: row step 0
    (datums 0, 2, .., 62) must hold no pads, which LoweredKernel.uniform_inputs ensures.
  * the allocated body is reordered so that few instructions directly follow the SFPMAD-class instruction whose
    result they read (`sfpu_schedule.schedule_body`: the same instructions on the same registers); the auto-stalls
    left are the program's `body_stalls`, which the placement's cost counts.
  * a final pass inserts SFPNOP where an SFPMAD-class result is read by an instruction whose read the hardware's
    auto-stall misses (SFPIADD/SFPSHFT VD, SFPAND/SFPOR VB, SFPSWAP, SFPSHFT2, SFPCONFIG) or is overwritten by the
    next instruction, and between a spill SFPSTORE and a spill SFPLOAD closer than 4 instructions (Dst.md).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tt_backend.lowering.codegen import sfpu_ops as so
from tt_backend.lowering.codegen.sfpu_schedule import hazard_nop, row_stalls, schedule_body
from tt_backend.lowering.dag import ValueDAG, VNode
from tt_backend.lowering.plan import SfpuProgram
from tt_backend.lowering.rewrite import (WORD_CONDITIONS, fuse_divide, fuse_multiply_add, scale_denormal_constants,
                                         uniform_nodes, where_on_integer)
from tt_backend.chip.errors import UnsupportedOp
from tt_backend.chip.isa import disasm, encode

MAX_SLOTS = 8
DST_READ_GAP = 4                  # Dst.md: a written 8x16 block is unreadable for 4 cycles (SFPLOAD: not interlocked)
SETUP = [("SFPENCC", {"imm12_math": 3, "lreg_dest": 0, "instr_mod1": 10})]   # EI|RI with E=R=1
POOL_REGS = (11, 12, 13, 14)            # programmable constant LRegs, written by SFPCONFIG in the setup
POOLED = "POOLED"                       # a hoisted value's node in the body: a leaf read from LReg `arg` (11..14)


def insert_nops(ins: list[tuple[str, dict[str, int]]], spill_base: int) -> list[tuple[str, dict[str, int]]]:
    """SFPNOPs for the hazards the hardware does not interlock: an SFPMAD-class result read by a stall-blind
    instruction (or overwritten by the next one), and an SFPLOAD of spill space within DST_READ_GAP instructions
    of an SFPSTORE to spill space (a reload always follows its own store in the same row step)."""
    out: list[tuple[str, dict[str, int]]] = []
    last_spill_store = -(1 << 30)
    for name, f in ins:
        if out and hazard_nop(out[-1], (name, f)):
            out.append(("SFPNOP", {}))
        if name == "SFPLOAD" and f["dest_reg_addr"] >= spill_base:
            while len(out) - last_spill_store <= DST_READ_GAP:
                out.append(("SFPNOP", {}))
        if name == "SFPSTORE" and f["dest_reg_addr"] >= spill_base:
            last_spill_store = len(out)
        out.append((name, f))
    return out


def pool_setup(pool: dict[int, int], hoisted: list[list[tuple[str, dict[str, int]]]] = ()) -> list[int]:
    """The words run once before a body: SETUP, each hoisted value's instructions (ending with SFPCONFIG into its
    LReg), then each pooled constant (bits -> LReg 11..14) placed with SFPLOADI into LReg0 and SFPCONFIG."""
    setup = so.Emitter()
    setup.ins.extend(SETUP)
    for ins in hoisted:
        setup.ins.extend(ins)
    for bits, reg in pool.items():      # SFPCONFIG broadcasts lanes 0-7 of LReg0 into LReg11-14
        setup.loadi(0, bits)
        setup.i("SFPCONFIG", imm16_math=0, config_dest=reg, instr_mod1=0)
    if pool or hoisted:
        setup.i("SFPNOP")
    return [encode(nm, **f) for nm, f in insert_nops(setup.ins, 1 << 20)]


def assemble(ins: list[tuple[str, dict[str, int]]]) -> list[int]:
    """The words of an instruction list emitted outside compile_sfpu (a reduction's accumulator init, lane combine,
    finish): the hazard NOPs inserted (`insert_nops`; these lists use no spill space)."""
    return [encode(nm, **f) for nm, f in insert_nops(ins, 1 << 20)]


# ------------------------------------------------------------------------------------------------ constants

def _bf16_round_bits(b: int) -> int:
    """tinygrad cast_float_to_bf16 on fp32 bits, result as fp32 bits (low half zero)."""
    if (-b & 0x7F800000) != 0:
        b = (b + ((b >> 16) & 1) + 0x7FFF) & 0xFFFFFFFF
    elif b & 0xFFFF:
        b |= 0x10000
    return b & 0xFFFF0000


def const_bits(value, dtype: str) -> int:
    if dtype in ("float32", "bfloat16"):
        with np.errstate(over="ignore"):
            b = int(np.array(float(value), dtype=np.float32).view(np.uint32))
        return _bf16_round_bits(b) if dtype == "bfloat16" else b
    if dtype == "float16":   # the float16 value's float32 bits (the frontend gives float16 values already)
        with np.errstate(over="ignore"):
            return int(np.array(float(value), np.float16).astype(np.float32).view(np.uint32))
    if dtype in ("int32", "uint32"):
        v = int(value)
        if not -2**31 <= v < 2**32:
            raise UnsupportedOp(f"CONST {value!r} does not fit int32")
        return v & 0xFFFFFFFF
    if dtype == "bool":
        return 1 if value else 0
    raise UnsupportedOp(f"CONST of dtype {dtype}")


# ------------------------------------------------------------------------------------------------ allocator

@dataclass
class _Val:
    node: VNode
    uses: list[int]                 # schedule positions of the consumers, ascending; end marker for the output
    reg: int | None = None
    slot: int | None = None         # spill address (Imm10); never for LOAD/CONST: re-materialised


class _Alloc:
    """Values -> LReg0-7, spilling to Dst. A spilled value only has to survive within its own row step, and row step
    k addresses Imm10 + 2k, so spill i lives at Imm10 = base + 2*i (base = first Dst slot after the inputs): row step
    k's spills occupy addresses base+2k, base+2k+2, ... which later row steps overwrite only after they are dead."""

    def __init__(self, base: int, em: so.Emitter, regs: tuple[int, ...] = so.GP_REGS):
        self.em = em
        self.regs = regs                         # LRegs this program may allocate (a reduction keeps its acc out)
        self.vals: dict[int, _Val] = {}
        self.owner: dict[int, int] = {}          # LReg -> value id
        self.free_slots: list[int] = []
        self.base = base
        self.n_spill = 0                         # spill locations handed out
        self.borrowed: dict[int, int] = {}       # reserved LReg lent to the current op -> where its value waits

    def next_use(self, vid: int, pos: int) -> int:
        return next((u for u in self.vals[vid].uses if u >= pos), 1 << 30)

    def const_reg(self, v: _Val) -> int | None:
        if v.node.op == POOLED:
            return v.node.arg
        if v.node.op != "CONST":
            return None
        bits = const_bits(v.node.arg, v.node.dtype)
        return {0: so.ZERO, 0x3F800000: so.ONE}.get(bits) if v.node.dtype in ("float32", "bfloat16") \
            else (so.ZERO if bits == 0 else None)

    def take(self, pos: int, pinned: set[int], borrow: bool = False) -> int:
        """A free LReg, spilling the live value with the furthest next use if none is free. With `borrow` (an op's
        temporaries) and every allocatable LReg pinned, a reserved LReg is saved to spill space and lent for the op
        (`give_back` restores it): a reduction's accumulators leave too few LRegs for a division's sources,
        destination and four temporaries."""
        for r in self.regs:
            if r not in self.owner and r not in pinned:
                return r
        cands = [r for r in self.owner if r not in pinned]
        if not cands and borrow:
            lendable = [r for r in so.GP_REGS if r not in self.regs and r not in pinned and r not in self.borrowed]
            if lendable:
                r = lendable[0]
                self.borrowed[r] = self.alloc_slot()
                self.em.store(r, self.borrowed[r])
                return r
        if not cands:
            raise UnsupportedOp(f"SFPU lowering: an op needs more than {len(so.GP_REGS)} registers")
        r = max(cands, key=lambda r: self.next_use(self.owner[r], pos))
        v = self.vals[self.owner.pop(r)]
        v.reg = None
        if v.node.op not in ("LOAD", "CONST") and v.slot is None:
            v.slot = self.alloc_slot()
            self.em.store(r, v.slot)
        return r

    def alloc_slot(self) -> int:
        """Imm10 address of a free spill location."""
        if self.free_slots:
            return self.free_slots.pop()
        addr = self.base + 2 * self.n_spill
        if addr + 62 > 64 * MAX_SLOTS - 1:      # row step 31 adds 62
            raise UnsupportedOp(f"SFPU lowering: spills need more than the {MAX_SLOTS} Dst slots (64 rows each)")
        self.n_spill += 1
        return addr

    @property
    def dst_slots(self) -> int:
        if not self.n_spill:
            return self.base // 64
        last_row = ((self.base + 2 * (self.n_spill - 1) + 62) & ~3) + 3
        return last_row // 64 + 1

    def materialize(self, vid: int, pos: int, pinned: set[int]) -> int:
        v = self.vals[vid]
        if v.reg is not None:
            return v.reg
        c = self.const_reg(v)
        if c is not None:
            return c
        r = self.take(pos, pinned)
        n = v.node
        if n.op == "LOAD":
            self.em.load(r, 64 * n.arg, so.LOAD_INT32 if n.dtype in ("int32", "uint32", "bool") else so.LOAD_FP32)
        elif n.op == "CONST":
            self.em.loadi(r, const_bits(n.arg, n.dtype))
        else:
            assert v.slot is not None, f"value {vid} lost"
            self.em.load(r, v.slot, so.LOAD_INT32)
        v.reg = r
        self.owner[r] = vid
        return r

    def give_back(self) -> None:
        """Restore the reserved LRegs lent to the op just emitted."""
        for r, slot in self.borrowed.items():
            self.em.load(r, slot, so.LOAD_INT32)
            self.free_slots.append(slot)
        self.borrowed.clear()

    def release_if_dead(self, vid: int, pos: int) -> None:
        v = self.vals[vid]
        if self.next_use(vid, pos + 1) < (1 << 30):
            return
        if v.reg is not None and self.owner.get(v.reg) == vid:
            del self.owner[v.reg]
        v.reg = None
        if v.slot is not None:
            self.free_slots.append(v.slot)
            v.slot = None


# ------------------------------------------------------------------------------------------------ lowering

def _seq_for(n: VNode, src_dtypes: list[str]) -> so.Seq | None:
    if n.op == "WHERE":
        if src_dtypes[0] != "bool" and src_dtypes[0] not in WORD_CONDITIONS:   # (word conditions: where_on_integer)
            raise UnsupportedOp(f"WHERE with a {src_dtypes[0]} condition")
        return so.WHERE_SEQ
    if n.op == "CAST":
        key = (src_dtypes[0], n.dtype)
        if key not in so.CASTS:
            raise UnsupportedOp(f"CAST {key[0]} -> {key[1]}")
        return so.CASTS[key]
    cls = so.CLASS[src_dtypes[0]] if src_dtypes else None
    seq = so.SEQS.get((n.op, cls))
    if seq is None:
        raise UnsupportedOp(f"SFPU lowering: op {n.op} on dtype {src_dtypes[0] if src_dtypes else n.dtype}")
    return seq


def _immediate(n: VNode, nodes: list[VNode], srcs: list[int]) -> int | None:
    """The constant second operand of n as an immediate (so.IMM_SEQS), or None when n takes it from a register."""
    if len(srcs) != 2 or nodes[srcs[1]].op != "CONST" or (n.op, so.CLASS.get(n.dtype)) not in so.IMM_SEQS:
        return None
    fits, _ = so.IMM_SEQS[(n.op, so.CLASS[n.dtype])]
    v = const_bits(nodes[srcs[1]].arg, nodes[srcs[1]].dtype)
    return v if fits(v) else None


def schedule(nodes: list[VNode], canon: dict[int, int], out: int) -> list[int]:
    """Evaluation order of the live values (those the output depends on): depth-first from the output, the source
    needing the most registers first (Sethi-Ullman numbers, sharing ignored), so few values are live at once."""
    need: dict[int, int] = {}
    for n in nodes:                                         # topological: sources first
        if canon[n.id] != n.id:
            continue
        if n.op in ("LOAD", "CONST"):
            need[n.id] = 1
        else:
            ns = sorted((need[canon[s]] for s in n.srcs), reverse=True)
            need[n.id] = max([x + j for j, x in enumerate(ns)] + [1])
    order: list[int] = []
    seen: set[int] = set()
    stack: list[tuple[int, bool]] = [(out, False)]
    while stack:
        i, expanded = stack.pop()
        if expanded:
            order.append(i)
            continue
        if i in seen:
            continue
        seen.add(i)
        stack.append((i, True))
        srcs = sorted({canon[s] for s in nodes[i].srcs}, key=lambda s: need[s])   # highest need popped first
        stack.extend((s, False) for s in srcs if s not in seen)
    return order


def compile_sfpu(dag, n_inputs: int, out_dtype=None, fuse_mad: bool = True, reserve: tuple[int, ...] = (),
                 epilogue=None, uniform: frozenset[int] = frozenset()) -> SfpuProgram:
    """Lower the value DAG to an SfpuProgram. `dag` is a ValueDAG (or a node list, then `out_dtype` may be the output
    node id as in docs/ARCHITECTURE.md). If `out_dtype` names a dtype other than the output node's, a CAST is added.
    `fuse_mad=False` keeps float32 a*b+c as two roundings (tests that compare with unfused numpy use it).
    `reserve`: LRegs the program must not touch (a reduction's accumulator lives there across row steps and tiles);
    `epilogue(em, r, free)`: emits words after the final store, with the output value in LReg r and the LRegs in
    `free` (neither r nor reserved) dead - lowering/families/sfpu_reduce.py folds r into its accumulator there.
    `uniform`: the inputs (LOAD args) that hold one value in every datum of a tile; what is computed from them alone
    is hoisted into the setup (module docstring)."""
    if not isinstance(dag, ValueDAG):
        dag = ValueDAG(list(dag), out_dtype if isinstance(out_dtype, int) else len(dag) - 1)
        out_dtype = None
    dag = scale_denormal_constants(dag)
    dag = fuse_divide(dag)              # first: a quotient is never taken into an SFPMAD (lowering/rewrite.py)
    dag = where_on_integer(dag)
    if fuse_mad:
        dag = fuse_multiply_add(dag)
    nodes = list(dag.nodes)
    out = dag.out if dag.out >= 0 else len(nodes) - 1
    if out_dtype is not None and out_dtype != nodes[out].dtype:
        nodes.append(VNode(len(nodes), "CAST", out_dtype, (out,)))
        out = len(nodes) - 1

    for n in nodes:
        if n.op == "LOAD" and not 0 <= int(n.arg) < n_inputs:
            raise ValueError(f"LOAD of input {n.arg} but n_inputs = {n_inputs}")
        if n.dtype not in so.CLASS:
            raise UnsupportedOp(f"SFPU lowering: dtype {n.dtype}")

    # value numbering: identity CASTs and BITCASTs (stores are raw 32 bits) share their source's value
    canon: dict[int, int] = {}
    for n in nodes:
        canon[n.id] = n.id
        if n.op == "CAST" and so.CASTS.get((nodes[n.srcs[0]].dtype, n.dtype), 0) is None or n.op == "BITCAST":
            canon[n.id] = canon[n.srcs[0]]
    if n_inputs >= MAX_SLOTS:
        raise UnsupportedOp(f"SFPU lowering: {n_inputs} inputs leave no Dst slot for the output (max {MAX_SLOTS - 1})")
    out_slot = n_inputs                 # own slot: stores never touch a block that is loaded in the next row step
    regs = tuple(r for r in so.GP_REGS if r not in reserve)
    hoisted = []            # the setup's instructions per hoisted value; the body reads it as a POOLED leaf
    for f in _hoistable(nodes, canon, canon[out], uniform) if 0 in regs else ():
        reg = POOL_REGS[len(hoisted)]
        to_pool = lambda em, r, free, reg=reg: (em.mov(0, r), em.i("SFPCONFIG", imm16_math=0, config_dest=reg,
                                                                     instr_mod1=0))
        hem, hal = _emit(nodes, canon, f, out_slot, {}, regs, to_pool, store=False)
        if hal.n_spill == 0:    # its spill space would be the body's: such a value stays in the body
            hoisted.append(hem.ins)
            nodes[f] = VNode(f, POOLED, nodes[f].dtype, (), reg)
    # pass 1 finds the constants worth keeping in the LRegs left; pass 2 (same allocation) reads them from there
    em, al = _emit(nodes, canon, canon[out], out_slot, {}, regs, epilogue)
    best = sorted(em.wanted.items(), key=lambda kv: -kv[1])[:len(POOL_REGS) - len(hoisted)]
    pool = {bits: POOL_REGS[len(hoisted) + i] for i, (bits, _) in enumerate(best)}
    if pool:
        em, al = _emit(nodes, canon, canon[out], out_slot, pool, regs, epilogue)
    body = insert_nops(schedule_body(em.ins, al.base, DST_READ_GAP), al.base)
    body_loads = {nodes[i].arg for i in schedule(nodes, canon, canon[out]) if nodes[i].op == "LOAD"}
    return SfpuProgram(setup=pool_setup(pool, hoisted), body=[encode(nm, **f) for nm, f in body],
                       dst_slots=al.dst_slots, out_slot=out_slot, body_stalls=row_stalls(body),
                       setup_only=frozenset(uniform) - body_loads if hoisted else frozenset())


def _hoistable(nodes: list[VNode], canon: dict[int, int], out: int, uniform: frozenset[int]) -> list[int]:
    """The values worth computing once per tile: ops whose every source is a uniform input, a constant or such an op,
    read by an op that is not (or by the output, which itself stays in the body), at most one per LReg11-14, those
    with the most ops behind them first."""
    live = schedule(nodes, canon, out)
    uni = uniform_nodes(nodes, uniform)
    leaf = lambda i: nodes[i].op in ("LOAD", "CONST")
    frontier = {canon[s] for j in live if j not in uni or j == out for s in nodes[j].srcs
                if canon[s] in uni and not leaf(canon[s])}

    def cone(i: int, seen: set[int]) -> set[int]:
        if i not in seen and not leaf(i):
            seen.add(i)
            for s in nodes[i].srcs:
                cone(canon[s], seen)
        return seen
    return sorted(frontier, key=lambda i: (-len(cone(i, set())), i))[:len(POOL_REGS)]


def _emit(nodes: list[VNode], canon: dict[int, int], out: int, out_slot: int, pool: dict[int, int],
          alloc_regs: tuple[int, ...] = so.GP_REGS, epilogue=None, store: bool = True):
    """Schedule, allocate and emit the body (without the hazard NOPs); `store=False`: the output stays in a register
    for `epilogue` (a hoisted value)."""
    sched = schedule(nodes, canon, out)
    em = so.Emitter(pool)
    al = _Alloc(64 * (out_slot + 1), em, alloc_regs)
    end = len(sched)
    for i in sched:
        al.vals[i] = _Val(nodes[i], [])
    for k, i in enumerate(sched):
        if nodes[i].op not in ("LOAD", "CONST"):
            srcs = [canon[s] for s in nodes[i].srcs]
            for s in srcs[:1] if _immediate(nodes[i], nodes, srcs) is not None else srcs:
                al.vals[s].uses.append(k)
    al.vals[out].uses.append(end)

    for k, i in enumerate(sched):
        n = nodes[i]
        if n.op in ("LOAD", "CONST", POOLED):
            continue
        seq = _seq_for(n, [nodes[s].dtype for s in n.srcs])
        srcs = [canon[s] for s in n.srcs]
        imm = _immediate(n, nodes, srcs)
        if imm is not None:
            seq, srcs = so.IMM_SEQS[(n.op, so.CLASS[n.dtype])][1], srcs[:1]
        pinned: set[int] = set()
        regs = []
        for s in srcs:
            r = al.materialize(s, k, pinned)
            regs.append(r)
            pinned.add(r)
        dying = {s for s in srcs if al.next_use(s, k + 1) >= (1 << 30)}
        # destination: a dying source register the sequence allows, else a fresh one
        d = None
        for ai in seq.alias:
            s = srcs[ai]
            if s in dying and regs[ai] in al.regs and al.owner.get(regs[ai]) == s \
                    and all(srcs[j] != s for j in range(len(srcs)) if j != ai):
                d = regs[ai]
                break
        if d is None:
            d = al.take(k, pinned)
        pinned.add(d)
        rnd = so.rounder(n.op, n.dtype, seq)
        ntmp = max(seq.tmps, so.ROUND_TMPS if rnd else 0)
        tmps = []
        for _ in range(ntmp):
            t = al.take(k, pinned, borrow=True)
            tmps.append(t)
            pinned.add(t)
        seq.fn(em, d, regs, tmps, *(() if imm is None else (imm,)))
        if rnd:
            rnd(em, d, tmps)
        al.give_back()
        for s in set(srcs):
            al.release_if_dead(s, k)
        if d in al.owner:                       # d took over a dying source's register
            del al.owner[d]
        al.owner[d] = n.id
        al.vals[n.id].reg = d

    r = al.materialize(out, end, set())
    if store:
        em.store(r, 64 * out_slot, addr_mode=1)
    if epilogue is not None:
        epilogue(em, r, [x for x in alloc_regs if x != r])
    return em, al


def disassemble(program: SfpuProgram) -> str:
    lines = [f"; SFPU program: {program.dst_slots} Dst slots, output slot {program.out_slot}, "
             f"{len(program.setup)} setup + {len(program.body)} body instructions", "setup:"]
    lines += [f"  {disasm(w)}" for w in program.setup]
    lines += ["body:"] + [f"  {disasm(w)}" for w in program.body]
    return "\n".join(lines)
