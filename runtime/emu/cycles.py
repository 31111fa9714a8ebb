"""The emulator's cycle model: latency/throughput tables as data, and the per-instruction timing rules the Tensix
frontends (tensix.py), the Vector Unit (sfpu.py) and the tile scheduler (tile.py) apply.

Time is counted in AICLK cycles (1.35 GHz on Blackhole) on one tile-wide time base. Functional execution stays as it
was (an instruction executes when it passes the Wait Gate); every Tensix instruction additionally gets an *issue
cycle*:  issue = max(previous issue on the thread + 1, when the frontend can deliver it, auto-stalls of its unit,
Wait Gate release).  RISC-V cores retire one instruction per cycle; their time is instret plus the cycles they spent
stalled (Tensix FIFO full, TTSync, slow MMIO loads).

Sources (tt-isa-documentation): BH VectorUnit.md (SFPU latency/IPC table), SFPMAD.md (auto-stall and its stall-blind
cases), SFPSWAP.md / SFPSHFT2.md (next cycle only SFPNOP), SFPLOADMACRO.md (sub-units, no auto-stalls), Dst.md (FPU
write -> read hazards), STALLWAIT.md (one-cycle lag), WH MatrixUnit.md (FPU latencies), WH MOPExpander.md /
REPLAY.md (frontend rates and the MOP transition penalty), WH L1.md (unpacker/packer L1 bandwidth), BH NoC/README.md
(NoC flit rate and hop latency), BH BabyRISCV/README.md (RISC-V load latencies).
"""
from __future__ import annotations

from collections import deque

from tt_backend.chip.errors import EmuUndefined
from tt_backend.chip.numerics.formats import element_bits
from tt_backend.chip.sfpu_regs import ALL_LREGS, SFPU_MAD_CLASS, sfpu_indirect, sfpu_regs, two_cycle
from tt_backend.runtime.emu import timeline as tl
from tt_backend.runtime.emu.sfpu_macro import SUB_MAD, SUB_UNIT_NAMES

# ---------------------------------------------------------------------------------------------------- SFPU tables
# Dst.md / SFPLOAD.md: Dst reads the FPU's writes do not interlock with (FPU_TO_SFPLOAD_GAP).
SFPU_DST_READERS = frozenset({"SFPLOAD", "SFPLOADMACRO"})


# ---------------------------------------------------------------------------------------------------- FPU tables
# WH MatrixUnit.md "Instruction latency and throughput" (BH: "similar"): (latency, cycles the FPU is occupied).
FPU_TIMING = {
    **{n: (5, 1) for n in ("MVMUL", "DOTPV", "GAPOOL", "ELWMUL", "GMPOOL", "ELWADD", "ELWSUB")},
    **{n: (1, 1) for n in ("SETRWC", "INCRWC", "CLEARDVALID", "CLREXPHIST", "GATESRCRST", "SHIFTXA", "ZEROACC",
                           "ZEROSRC", "TRNSPSRCB")},
    "SHIFTXB": (2, 2),
    "MOVD2A": (2, 1),
    **{n: (4, 1) for n in ("MOVA2D", "MOVDBGA2D", "MOVB2D", "MOVB2A")},
    "MOVD2B": (4, 1),
}
# FPU instructions that write or accumulate onto Dst through a `dst` row field (Dst.md hazard bookkeeping).
FPU_DST_WRITERS = frozenset({"MVMUL", "DOTPV", "GAPOOL", "ELWMUL", "GMPOOL", "ELWADD", "ELWSUB", "MOVA2D",
                             "MOVDBGA2D", "MOVB2D"})
# the FPU instructions timed on their Src banks' unpacked data (src_ready; MOVA2D and friends are not)
SRC_READERS = FPU_DST_WRITERS - {"MOVA2D", "MOVDBGA2D", "MOVB2D"}
FPU_DST_READ_LATENCY = 5       # Dst.md: a written 8x16 block cannot be read for the next four cycles
FPU_TO_SFPLOAD_GAP = 4         # Dst.md / SFPLOAD.md: >= 3 unrelated instructions between (issue cycles differ by >= 4)

# ---------------------------------------------------------------------------------------------------- frontend
MOP_TRANSITION_PENALTY = 1     # MOPExpander.md: one idle cycle after a MOP unless its expansion holds a long REPLAY
STALLWAIT_LAG = 1              # STALLWAIT.md: one cycle between conditions met and the block mask removed
FIFO_EFFECTIVE_DEPTH = 28      # PushTensixInstruction.md: 32 entries, effectively 28

# ---------------------------------------------------------------------------------------------------- data movement
# WH L1.md: one unpacker reads four 128-bit words (64 B) per cycle; a packer writes one 128-bit word (16 B) per cycle.
# WH UNPACR_Regular.md "Performance": past two cycles of address set-up, fetching the bytes from L1 is the bottleneck,
# up to 64 B per cycle at x4 speed; so an unpack is charged the bytes of its input format (a bf16 datum 2 B).
UNPACK_BYTES_PER_CYCLE = 64
PACK_BYTES_PER_CYCLE = 16
# BH NoC/README.md: one 512-bit flit per cycle; NIU -> router ~5 cycles, router -> router 9 cycles per hop,
# router -> NIU ~5 cycles. The DRAM controller's own latency is not documented: DRAM_LATENCY is an assumption.
NOC_BYTES_PER_CYCLE = 64
NOC_NIU_LATENCY = 5
NOC_HOP_LATENCY = 9
DRAM_LATENCY = 100
# BH BabyRISCV/README.md load latencies (a 1-cycle instruction already counted): MMIO regions -> extra cycles.
RISCV_MMIO_EXTRA = (
    (0xFFB20000, 0xFFB80000, 6),     # NoC NIU / overlay registers: >= 7 cycles
    (0xFFE00000, 0xFFE01000, 3),     # Tensix GPRs: >= 4
    (0xFFEF0000, 0xFFF00000, 3),     # Tensix config: >= 4
    (0xFFE80000, 0xFFE90000, 2),     # PC buffer / semaphores: >= 3
    (0xFFEC0000, 0xFFEC4000, 2),     # mailboxes: >= 3
)


def riscv_mmio_extra(addr: int) -> int:
    for lo, hi, extra in RISCV_MMIO_EXTRA:
        if lo <= addr < hi:
            return extra
    return 0


def unpack_cycles(datums: int, bits_per_datum: int = 32) -> int:
    return max(1, -(-datums * bits_per_datum // (8 * UNPACK_BYTES_PER_CYCLE)))


def pack_cycles(datums: int, bytes_per_datum: int = 4) -> int:
    return max(1, -(-datums * bytes_per_datum // PACK_BYTES_PER_CYCLE))


def noc_cycles(nbytes: int, hops: int = 1, dram: bool = False) -> int:
    """Latency of one NoC request of `nbytes` (request + data flits), from the NoC/README.md figures."""
    return (2 * NOC_NIU_LATENCY + NOC_HOP_LATENCY * max(hops, 1) + -(-nbytes // NOC_BYTES_PER_CYCLE)
            + (DRAM_LATENCY if dram else 0))


# ---------------------------------------------------------------------------------------------------- SFPU hazards
class SfpuTimingRules:
    """Auto-stall and strict hazard rules of the Vector Unit, shared by regular instructions (via the Tensix) and
    SFPLOADMACRO-scheduled ones (via the SFPU). `where()` names the instruction for error messages. The rules of
    SfpuTiming (its state in __slots__) and of sfpu_issue_native.sfpu_timing_class()'s class (the same state, the
    fields the C issue reads on every word held as C members)."""

    __slots__ = ()

    def __init__(self, strict: bool = True):
        self.strict = strict
        self.mad_cycle = -10        # issue cycle of the last MAD-class instruction
        self.mad_writes = 0         # its destination LRegs
        self.mad_macro = False      # it was scheduled by SFPLOADMACRO (no auto-stall protects its consumer)
        self.nop_only_cycle = -10   # the cycle on which only SFPNOP may be accepted (after SFPSWAP / SFPSHFT2)
        self.busy_until = 0         # the cycle after which the SFPU has no work left (STALLWAIT C11)
        self.where = lambda: "SFPU"
        self.rec = None             # a timeline.TimelineRecorder while one is attached (Tile.timeline_begin)

    def err(self, rule: str) -> EmuUndefined:
        """A hazard the hardware does not interlock: the result read is not defined."""
        return EmuUndefined(f"{self.where()}: {rule}")

    def regular(self, t: int, info) -> int:
        """Issue cycle of a regular SFPU instruction presented at cycle `t` (auto-stalls applied); records its
        effects. `info` = sfpu_info()."""
        name, reads, seen, writes, mad, two_cycle, indirect, _ = info
        if t == self.nop_only_cycle and name != "SFPNOP":
            t += 1                                               # SFPSWAP/SFPSHFT2: auto stall
        if t == self.mad_cycle + 1:
            if self.mad_macro:
                if reads & self.mad_writes and self.strict:
                    raise self.err(f"{name} reads LReg {_regs(reads & self.mad_writes)} one cycle after an "
                                   f"SFPLOADMACRO-scheduled MAD wrote it (no auto-stall inside macro sequences)")
            elif indirect or self.mad_writes == ALL_LREGS and reads:
                t += 1                                           # INDIRECT modes: the logic stalls on everything
            elif seen & self.mad_writes:
                t += 1                                           # BH auto-stall
            elif reads & self.mad_writes and self.strict:
                raise self.err(f"{name} reads LReg {_regs(reads & self.mad_writes)} written by the MAD-class "
                               f"instruction of the previous cycle, a case the auto-stall logic does not detect "
                               f"(SFPMAD.md): insert an SFPNOP")
        if mad:
            self.mad_cycle, self.mad_writes, self.mad_macro = t, writes, False
        if two_cycle:
            self.nop_only_cycle = t + 1
        done = t + (2 if mad or two_cycle else 1)
        if done > self.busy_until:
            if t > self.busy_until and self.rec is not None:
                self.rec.sfpu_idle.append((self.busy_until, t))
            self.busy_until = done
        return t

    def scheduled(self, t: int, name: str, f: dict, sub: int) -> None:
        """A SFPLOADMACRO-scheduled instruction executing at cycle `t` on sub-unit `sub` (no auto-stalls: only strict
        checks)."""
        reads, _, writes = sfpu_regs(name, f)
        if t == self.mad_cycle + 1 and reads & self.mad_writes and self.strict:
            raise self.err(f"macro-scheduled {name} ({SUB_UNIT_NAMES[sub]} sub-unit) at cycle {t} reads LReg "
                           f"{_regs(reads & self.mad_writes)} one cycle after a MAD wrote it (no auto-stall inside "
                           f"SFPLOADMACRO sequences: leave a gap of one cycle)")
        if sub == SUB_MAD and name != "SFPNOP":
            self.mad_cycle, self.mad_writes, self.mad_macro = t, writes, True
        done = t + (2 if sub == SUB_MAD else 1)
        if done > self.busy_until:
            if t > self.busy_until and self.rec is not None:
                self.rec.sfpu_idle.append((self.busy_until, t))
            self.busy_until = done


class SfpuTiming(SfpuTimingRules):
    """The Vector Unit's timing state in __slots__ (the reference: TT_EMU_TIMING_NATIVE=0)."""
    __slots__ = ("strict", "mad_cycle", "mad_writes", "mad_macro", "nop_only_cycle", "busy_until", "where", "rec")


def _regs(mask: int) -> str:
    return ",".join(str(i) for i in range(17) if mask >> i & 1)


def sfpu_info(name: str, f: dict) -> tuple:
    """Static per-word timing facts of an SFPU instruction (computed once per distinct word): (name, LRegs read, LRegs
    the stall logic sees read, LRegs written, MAD class, two-cycle, INDIRECT mode, reads Dst)."""
    reads, seen, writes = sfpu_regs(name, f)
    return (name, reads, seen, writes, name in SFPU_MAD_CLASS, two_cycle(name, f), sfpu_indirect(name, f),
            name in SFPU_DST_READERS)


# ---------------------------------------------------------------------------------------------------- Tensix timing
# Instruction kinds (precomputed per decoded word by `instr_kind`).
K_PLAIN, K_SFPU, K_FPU, K_UNPACK, K_PACK, K_WAIT, K_SYNC = range(7)
_SYNC_EVENTS = frozenset({"SEMPOST", "SEMGET", "SEMINIT", "ATGETM", "ATRELM"})


def instr_kind(name: str, unit: str, f: dict):
    """(kind, static info) for a decoded Tensix word."""
    if unit == "sfpu":
        return K_SFPU, sfpu_info(name, f)
    if unit == "fpu":
        return K_FPU, FPU_TIMING.get(name, (1, 1))
    if name == "UNPACR":
        return K_UNPACK, f.get("unpack_block_selection", 0)
    if name == "PACR":
        return K_PACK, None
    if name in ("STALLWAIT", "SEMWAIT"):
        return K_WAIT, None
    if name in _SYNC_EVENTS:
        return K_SYNC, None
    return K_PLAIN, None


class TensixTiming:
    """Issue cycles of the three Tensix threads and the busy-until times of the backend units they share."""

    # attributes bound once in __init__ and afterwards only mutated in place: a hot caller may load them once
    FIXED = frozenset({"clock", "fe", "gate", "issued", "stalls", "first", "after_mop", "taken", "sfpu", "work_done"})
    GAP_REASON = {K_PLAIN: tl.UNIT_WAIT["plain"], K_SFPU: tl.SFPU_AUTO_STALL, K_FPU: tl.UNIT_WAIT["fpu"],
                  K_UNPACK: tl.UNIT_WAIT["unpack"], K_PACK: tl.UNIT_WAIT["pack"], K_WAIT: tl.WAIT_GATE,
                  K_SYNC: tl.UNIT_WAIT["sync"]}

    def __init__(self, tensix):
        self.tx = tensix
        # where the state the C issue reads on every word lives: this class, Python lists and ints; the class
        # sfpu_issue_native.tensix_timing_class() makes (timing_state.c's C struct under this class), C: its rows()
        # are views with these lists' semantics, its ints C members, SFPU_TIMING the SfpuTiming class with C members
        rows = getattr(self, "rows", None)
        self.sfpu = (SfpuTiming if rows is None else self.SFPU_TIMING)(tensix.strict)   # the Vector Unit's hazards
        self.clock = [0, 0, 0]           # issue cycle of each thread's latest instruction
        self.fe = [0, 0, 0]              # earliest cycle the frontend can deliver the next instruction
        self.gate = [(0, 0), (0, 0), (0, 0)]   # (block mask, first cycle it no longer blocks) of the Wait Gate
        self.issued = [0, 0, 0]          # instructions issued (frontend penalties excluded)
        self.stalls = [0, 0, 0]          # cycles lost to stalls/waits between issues
        self.first = [None, None, None]  # first issue cycle per thread
        self.after_mop = [False, False, False]
        self.taken = [deque(maxlen=FIFO_EFFECTIVE_DEPTH) for _ in range(3)]   # when recent words left each FIFO
        self.event_t = 0                 # latest cycle a semaphore / Src bank / mutex changed (wakes blocked threads)
        self.unpack_busy = [0, 0]
        self.pack_busy = 0
        self.fpu_busy = 0
        self.work_done = [0, 0, 0]       # per thread: when its FPU / unpacker / packer instructions have finished
        self.executed = [0, 0, 0]        # the Tensix's instructions executed per thread (its `instructions`)
        self.issue_t = 0                 # the Tensix's issue cycle of the instruction being executed (its `issue_t`)
        if rows is not None:             # the same state held in C, seen through views with these lists' semantics
            (self.clock, self.fe, self.gate, self.after_mop, self.first, self.stalls, self.issued, self.taken,
             self.unpack_busy, self.work_done, self.executed) = rows()
        self.macro_threads = 0           # bit t: thread t has issued an SFPLOADMACRO (done(): its SFPU part)
        self.src_ready = {}              # ("a"|"b", bank) -> cycle the unpacked data is there
        self.bank_read = {}              # ("a"|"b", bank) -> issue cycle of the last FPU instruction that held it
        self.nop_t = 0                   # issue cycle of the latest UNPACR_NOP (a bank handed over without data)
        self.dst_fpu_write = {}          # Dst32b 8-row block -> issue cycle of the last FPU write
        self.rec = None                  # a timeline.TimelineRecorder while one is attached (Tile.timeline_begin)

    # --- frontend ------------------------------------------------------------------------------------------
    def accept(self, t: int, push_t: int) -> int:
        """Cycle a push at `push_t` enters thread t's FIFO: if the last FIFO_EFFECTIVE_DEPTH words taken from the
        FIFO all left after `push_t`, the FIFO was full then and the pushing core waits for the oldest to leave."""
        q = self.taken[t]
        if len(q) == FIFO_EFFECTIVE_DEPTH and q[0] > push_t:
            if self.rec is not None:
                self.rec.fifo_full(t, push_t, q[0])
            return q[0]
        return push_t

    def take(self, t: int, push_t: int, is_mop: bool) -> None:
        """The MOP expander takes a word pushed at `push_t` from thread t's FIFO."""
        self.taken[t].append(max(push_t, self.clock[t]))
        fe = self.fe[t]
        if self.after_mop[t] and not is_mop:      # MOPExpander.md: transition penalty after a MOP
            fe = max(fe, self.clock[t] + 1) + MOP_TRANSITION_PENALTY
        self.after_mop[t] = is_mop
        self.fe[t] = push_t if push_t > fe else fe

    def accept_take(self, t: int, push_t: int) -> int:
        """accept() then take() of a non-MOP word pushed on an empty FIFO (the Tensix's per-word fast path): the
        cycle the push is accepted."""
        q = self.taken[t]
        if len(q) == FIFO_EFFECTIVE_DEPTH and q[0] > push_t:
            a = q[0]
            if self.rec is not None:
                self.rec.fifo_full(t, push_t, a)
        else:
            a = push_t
        c = self.clock[t]
        q.append(a if a > c else c)
        fe = self.fe[t]
        if self.after_mop[t]:
            fe = max(fe, c + 1) + MOP_TRANSITION_PENALTY
            self.after_mop[t] = False
        self.fe[t] = a if a > fe else fe
        return a

    def frontend_cycles(self, t: int, n: int) -> None:
        """Cycles the frontend spends ingesting words that emit nothing (REPLAY load without Exec, MOP_CFG)."""
        self.fe[t] = max(self.fe[t], self.clock[t] + 1) + n

    def long_replay_in_mop(self, t: int) -> None:
        """A MOP emitted a REPLAY expanding to >= 2 instructions: no transition penalty (MOPExpander.md)."""
        self.after_mop[t] = False

    # --- issue ----------------------------------------------------------------------------------------------
    def pre(self, t: int, kind: int, name: str, f: dict):
        """State an FPU / unpacker instruction's timing needs from before its handler ran (RWCs, banks)."""
        tx = self.tx
        if kind == K_FPU:
            r = tx.threads[t]
            return (((r.cfg[1] & 0xFFF) + r.rwc["d"] + f.get("dst", 0)) & 0x1FF, tx.srca_matrix_bank,
                    tx.srcb_matrix_bank)
        if kind == K_UNPACK:
            return tx.srcb_unpack_bank if f.get("unpack_block_selection", 0) else tx.srca_unpack_bank
        return None

    def issue(self, t: int, name: str, kind: int, info, f: dict, block: int, was_blocked: bool, pre=None,
              bank_wait: bool = False) -> int:
        """Issue cycle of the instruction at the head of thread t (`info`: instr_kind's static facts, `pre`: the
        state pre() took before its handler ran); records its effects on the thread and the units. A blocked
        instruction is woken by the latest event (event_t), except one that waited for its Src bank (bank_wait: its
        handler blocked it): an UNPACR issues after the FPU instruction that last held that bank (the release), an
        FPU instruction reading Src once its banks' data is unpacked (src_ready) or handed over (UNPACR_NOP). Other
        threads' later, unrelated events (a packer thread's semaphore posts and SFPU work, an unpack into the other
        bank) do not delay it."""
        if kind == K_SFPU:
            return self.issue_sfpu(t, info, f, block, was_blocked)
        c = self.clock[t] + 1
        if self.fe[t] > c:
            c = self.fe[t]
        mask, until = self.gate[t]
        if until > c and (block & mask if block != -1 else mask == 0x1FF):
            c = until
        if was_blocked:
            if bank_wait and kind == K_UNPACK and name == "UNPACR" and pre is not None:
                woken = self.bank_read.get(("b" if info else "a", pre), 0)
            elif bank_wait and kind == K_FPU and name in SRC_READERS and pre is not None:
                woken = max(self.src_ready.get(("a", pre[1]), 0), self.src_ready.get(("b", pre[2]), 0), self.nop_t)
            else:
                woken = self.event_t
            if woken + 1 > c:
                c = woken + 1
        if kind == K_FPU:
            lat, occ = info
            if name in FPU_DST_WRITERS and pre is not None:
                row, bank_a, bank_b = pre
                block_i = row >> 3
                w = self.dst_fpu_write.get(block_i)
                if w is not None and c < w + FPU_DST_READ_LATENCY:
                    c = w + FPU_DST_READ_LATENCY      # Dst.md: FPU readers of a fresh block are auto-stalled
                if name in SRC_READERS:
                    c = max(c, self.src_ready.get(("a", bank_a), 0), self.src_ready.get(("b", bank_b), 0))
                self.dst_fpu_write[block_i] = c
            if pre is not None:              # (any FPU instruction may release the banks it holds: clear_dvalid)
                self.bank_read[("a", pre[1])] = self.bank_read[("b", pre[2])] = c
            self._run_scheduled_sfpu(c)
            self.fpu_busy = max(self.fpu_busy, c + lat)
            self.work_done[t] = max(self.work_done[t], self.fpu_busy)
            self.event_t = max(self.event_t, c)   # clear_dvalid hands banks back to the unpackers
            if self.rec is not None:
                self.rec.busy("fpu", c, c + occ)
        elif kind == K_UNPACK:
            sel = info
            c = max(c, self.unpack_busy[sel])
            bank = pre if pre is not None else 0
            n = self._adc_count(t, sel)
            done = c + unpack_cycles(n, self._unpack_in_bits(sel))
            self.unpack_busy[sel] = done
            self.work_done[t] = max(self.work_done[t], done)
            if self.rec is not None:
                self.rec.busy("unpack1" if sel else "unpack0", c, done)
            self.src_ready[("b" if sel else "a", bank)] = done
            self.event_t = max(self.event_t, done)
        elif kind == K_PACK:
            self._run_scheduled_sfpu(c)
            c = max(c, self.pack_busy)
            self.pack_busy = c + pack_cycles(self._adc_count(t, 2))
            self.work_done[t] = max(self.work_done[t], self.pack_busy)
            if self.rec is not None:
                self.rec.busy("pack", c, self.pack_busy)
        elif name == "UNPACR_NOP":
            self.nop_t = c
        elif kind == K_SYNC:
            self.event_t = max(self.event_t, c)
            if name == "SEMPOST":
                self.tx.stamp_posts(f["sem_sel"], c)
        gap = c - self.clock[t] - 1
        if gap > 0 and self.first[t] is not None:
            self.stalls[t] += gap
            if self.rec is not None:
                self.rec.thread_gaps[t].append((c - gap, c, self.gap_reason(t, c, kind, block, was_blocked)))
        if self.first[t] is None:
            self.first[t] = c
        self.clock[t] = c
        self.issued[t] += 1
        return c

    def issue_sfpu(self, t: int, info: tuple, f: dict, block: int, was_blocked: bool) -> int:
        """The SFPU issue rule: issue cycle of SFPU instruction `info` (sfpu_info) at the head of thread t; records
        its effects. The one definition every path uses (issue(), the Tensix's push and deferral paths)."""
        last = self.clock[t]
        c = last + 1
        fe = self.fe[t]
        if fe > c:
            c = fe
        mask, until = self.gate[t]
        if until > c and (block & mask if block != -1 else mask == 0x1FF):
            c = until                             # the Wait Gate holds it until the release
        if was_blocked and self.event_t + 1 > c:
            c = self.event_t + 1                  # woken by the event that unblocked the thread
        if info[7]:
            self.sfpload_hazard(t, c, info[0], f)
            if info[0] == "SFPLOADMACRO":
                self.macro_threads |= 1 << t
        st = self.sfpu
        if c == st.nop_only_cycle or c == st.mad_cycle + 1 or info[5]:
            c = st.regular(c, info)               # an auto-stall may apply
        elif info[4]:                             # SfpuTiming.regular for a MAD meeting no auto-stall ...
            st.mad_cycle, st.mad_writes, st.mad_macro = c, info[3], False
            if c + 2 > st.busy_until:
                if c > st.busy_until and st.rec is not None:
                    st.rec.sfpu_idle.append((st.busy_until, c))
                st.busy_until = c + 2
        elif c >= st.busy_until:                  # ... and for a 1-cycle instruction
            if c > st.busy_until and st.rec is not None:
                st.rec.sfpu_idle.append((st.busy_until, c))
            st.busy_until = c + 1
        if self.first[t] is None:
            self.first[t] = c
        elif c - last > 1:
            self.stalls[t] += c - last - 1
            if self.rec is not None:
                self.rec.thread_gaps[t].append((last + 1, c, self.gap_reason(t, c, K_SFPU, block, was_blocked)))
        self.clock[t] = c
        self.issued[t] += 1
        return c

    def gap_reason(self, t: int, c: int, kind: int, block: int, was_blocked: bool) -> str:
        """Timelines: which constraint of the issue rule set issue cycle c after a gap (the first that binds)."""
        if self.fe[t] == c:
            return tl.IDLE_FRONTEND
        mask, until = self.gate[t]
        if until == c and (block & mask if block != -1 else mask == 0x1FF):
            return tl.WAIT_GATE
        if was_blocked:
            return tl.BLOCKED
        return self.GAP_REASON[kind]

    def _run_scheduled_sfpu(self, c: int) -> None:
        """SFPLOADMACRO-scheduled SFPU work due by cycle c runs before an FPU / packer instruction issued at c."""
        s = self.tx.raw_sfpu
        if s is not None and s.scheduled:
            s.drain_macros(c)

    def waited(self, t: int, c: int, cond: int, block: int) -> None:
        """STALLWAIT / SEMWAIT issued at cycle c: the unit-busy conditions it selects hold until their units are
        idle; the block mask lifts one cycle after (STALLWAIT.md)."""
        release = c + 1
        if cond & 0b110:
            release = max(release, *(self.unpack_busy[i] for i in (0, 1) if cond >> (i + 1) & 1))
        if cond & (1 << 3):
            release = max(release, self.pack_busy)
        if cond & (1 << 4):
            release = max(release, self.fpu_busy)
        if cond & (1 << 11):
            release = max(release, self.sfpu_busy())
        self.gate[t] = (block, release + STALLWAIT_LAG)

    def sfpu_busy(self) -> int:
        s = self.tx.raw_sfpu   # timing state is eager: no deferred-data flush needed
        return 0 if s is None else s.busy_until()

    def done(self, t: int) -> int:
        """Cycle by which thread t's issued instructions have finished: what its TTSync read (CoprocessorDoneCheck)
        waits for. ManualTTSync.md: the read waits while the coprocessor has in-flight instructions *from thread t*;
        other threads' work on the units t shares does not hold it. work_done[t] is the busy-until time of each unit
        right after t's last instruction on it (a unit runs its instructions in order, so t's work on it ends then).
        The SFPU part is a bound rather than a record: a regular SFPU instruction ends at most 2 cycles after its
        issue (MAD class), so t's ends by min(SFPU busy-until, clock[t] + 2), at most one cycle late when another
        thread's SFPU work ends later. A thread that has issued an SFPLOADMACRO waits for the whole SFPU (the
        conservative rule, for that unit only): the instructions it schedules run on cycles set by later SFPU
        instructions of any thread, so their end is not known at its issue."""
        clock = self.clock[t]
        sfpu = self.sfpu_busy() if self.macro_threads >> t & 1 else min(self.sfpu.busy_until, clock + 2)
        return max(clock + 1, self.work_done[t], sfpu)

    def _unpack_in_bits(self, sel: int) -> int:
        """L1 bits per datum of unpacker `sel`'s input format (its TileDescriptor, cfg 64 / 112, bits [3:0])."""
        try:
            return element_bits(self.tx.cfg[112 if sel else 64] & 0xF) or 32
        except (IndexError, AttributeError):
            return 32

    def _adc_count(self, t: int, s: int) -> int:
        try:
            adc = self.tx.threads[t].adc[s]
            n = adc[1][0] - adc[0][0] + 1
            return n if n > 0 else 16
        except (IndexError, AttributeError):
            return 256

    def sfpload_hazard(self, t: int, c: int, name: str, f: dict) -> None:
        """Strict: an SFPLOAD / SFPLOADMACRO issued at cycle c reads Dst rows the FPU wrote too recently (Dst.md)."""
        tx = self.tx
        th = tx.threads[t]
        addr = (f["dest_reg_addr"] + (th.cfg[1] & 0xFFF) + th.rwc["d"]) & 0x3FC
        w = self.dst_fpu_write.get((addr & 0x1FF) >> 3)
        if w is not None and c - w < FPU_TO_SFPLOAD_GAP and tx.strict:
            raise tx.undefined(f"reads Dst rows {addr & 0x1FF}..{(addr & 0x1FF) + 3} at cycle {c}, only {c - w - 1} "
                               f"instruction(s) after the FPU wrote them at cycle {w} (Dst.md / {name}.md: at least "
                               f"three unrelated instructions are needed; not interlocked)")

    # --- reporting -------------------------------------------------------------------------------------------
    def stats(self) -> dict:
        return {"issue_cycle": list(self.clock), "first_issue": list(self.first), "issued": list(self.issued),
                "stall_cycles": list(self.stalls), "done": [self.done(t) for t in range(3)],
                "unpack_busy": list(self.unpack_busy), "pack_busy": self.pack_busy, "fpu_busy": self.fpu_busy,
                "sfpu_busy": self.sfpu_busy(), "work_done": list(self.work_done)}
