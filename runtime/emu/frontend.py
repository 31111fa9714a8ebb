"""The Tensix frontend of each thread (WH/BH PushTensixInstruction.md, MOPExpander.md, REPLAY.md, STALLWAIT.md): the
instruction FIFO a RISC-V core pushes into, the MOP expander (templates 0 and 1), the replay expander with its
32-entry buffer, and the Wait Gate's block classes (which latched wait blocks which instruction).

Mixed into tensix.Tensix. `push` is the reference path: a word enters the FIFO and the thread drains (tensix.py);
the speed layer (accel/) overrides it for SFPU words reaching an empty thread.
"""
from __future__ import annotations

from tt_backend.chip.errors import EmuUndefined, EmuUnimplemented, EmuUnspecified
from tt_backend.chip.isa import INSTRUCTIONS
from tt_backend.runtime.emu.rv32 import Stall
from tt_backend.runtime.emu.thread_state import ThreadState

FIFO_DEPTH = 32          # first instruction FIFO per thread [BH PushTensixInstruction.md]

# Wait Gate block-mask classes (STALLWAIT.md table): which B bits stop which instruction from starting.
B0, B1, B2, B3, B4, B5, B6, B7, B8 = (1 << i for i in range(9))
_BLOCK_BY_NAME = {
    **{n: B0 | B5 for n in ("ADDDMAREG", "ATCAS", "ATINCGET", "ATINCGETPTR", "ATSWAP", "BITWOPDMAREG", "CMPDMAREG",
                            "DMANOP", "FLUSHDMA", "LOADIND", "LOADREG", "MULDMAREG", "REG2FLOP", "SETDMAREG",
                            "SHIFTDMAREG", "STOREIND", "STOREREG", "SUBDMAREG")},
    **{n: B0 for n in ("ADDRCRXY", "ADDRCRZW", "INCADCXY", "INCADCZW", "RSTDMA", "SETADC", "SETADCXX", "SETADCXY",
                       "SETADCZW", "SETDVALID")},
    **{n: B1 for n in ("ATGETM", "ATRELM", "SEMGET", "SEMINIT", "SEMPOST")},
    **{n: 0x1FF for n in ("SEMWAIT", "STALLWAIT", "STREAMWAIT")},
    **{n: B7 for n in ("CFGSHIFTMASK", "RDCFG", "RMWCIB0", "RMWCIB1", "RMWCIB2", "RMWCIB3", "SETC16", "STREAMWRCFG",
                       "WRCFG")},
    **{n: B0 | B2 for n in ("PACR", "PACR_SETREG")},
    **{n: B0 | B3 for n in ("UNPACR", "UNPACR_NOP")},
    "XMOV": B0 | B4,
}
_BLOCK_BY_UNIT = {"sfpu": B8, "fpu": B6, "sync": B1, "config": B7, "thcon": B0 | B5, "pack_unpack": B0,
                  "frontend": 0}
NOP_BLOCK = -1  # NOP is blocked only when all nine block bits are set


def block_bits(name: str) -> int:
    """The Wait Gate block class of instruction `name` (NOP_BLOCK for NOP)."""
    if name == "NOP":
        return NOP_BLOCK
    return _BLOCK_BY_NAME.get(name, _BLOCK_BY_UNIT[INSTRUCTIONS[name].unit])


def _opcode(name: str) -> int:
    return INSTRUCTIONS[name].opcode


_OP_MOP, _OP_MOP_CFG, _OP_REPLAY, _OP_NOP = _opcode("MOP"), _opcode("MOP_CFG"), _opcode("REPLAY"), _opcode("NOP")
_REPLAY_FIELDS: dict[int, dict] = {}      # REPLAY word -> decoded fields (read only)
_MOP_EXPANSIONS: dict[tuple, tuple] = {}  # (MOP word, mask_hi, *MopCfg) -> mop_expansion() (read only)
MOP_EXPANDER_OPS = frozenset({_OP_MOP, _OP_MOP_CFG})   # opcodes the MOP expander consumes: never recorded for replay
_USED_BITS = {n: INSTRUCTIONS[n].used_bits() for n in ("MOP", "MOP_CFG", "REPLAY")}    # the words the expanders check


def replay_executes(th: ThreadState, word: int) -> bool:
    """Whether a word pushed now is recorded by a REPLAY load under way and executed as well (execute_while_loading;
    a word the MOP expander passes on)."""
    load = th.replay_load
    return load is not None and load[2] and (word >> 24) & 0xFF not in MOP_EXPANDER_OPS


class FrontendMixin:
    def push(self, thread: int, word: int, t: int = 0) -> int:
        """Push `word` on a thread's FIFO at cycle `t` (the pushing core's time). Returns the cycle the push is
        accepted: later than `t` when, in modelled time, the FIFO still holds its effective 28 words then."""
        th = self.threads[thread]
        if len(th.fifo) >= FIFO_DEPTH:
            raise Stall(f"Tensix T{thread} instruction FIFO full")
        t = self.tm.accept(thread, t)
        th.fifo.append(word & 0xFFFFFFFF)
        th.fifo_t.append(t)
        self.drain(thread)
        return t

    def push_many(self, thread: int, words: tuple, t: int) -> int:
        """push() of each word in turn, the next one pushed the cycle after the previous one was accepted (a core
        pushing consecutive `.ttinsn` words): push(thread, words[j], t_j) with t_0 = t, t_{j+1} = accepted_j + 1.
        Returns t_n. If push j raises (Stall, EmuError, ...), words 0..j-1 have been pushed exactly as by the single
        calls and `self.pm_done, self.pm_t` hold (j, t_j) before the exception propagates."""
        j = 0
        try:
            for word in words:
                t = self.push(thread, word, t) + 1
                j += 1
            return t
        except BaseException:
            self.pm_done, self.pm_t = j, t
            raise

    def thread_idle(self, thread: int) -> bool:
        th = self.threads[thread]
        return not (th.fifo or th.mop_out or th.ready)

    def blocked_reason(self, thread: int) -> str | None:
        th = self.threads[thread]
        if not th.ready and not th.fifo and not th.mop_out:
            return None
        return th.blocked

    def mop_cfg_write(self, thread: int, index: int, value: int) -> None:
        if not 0 <= index < 9:
            raise EmuUndefined(f"MOP config index {index} out of range (0..8)")
        self.threads[thread].mop_cfg[index] = value & 0xFFFFFFFF

    def next_instruction(self, th: ThreadState) -> int | None:
        """Head instruction at the Wait Gate after MOP and replay expansion, or None if nothing is queued."""
        ready = th.ready
        tm = self.tm
        if not ready:
            th.batch_skip = 0
        while not ready:
            from_mop = bool(th.mop_out)
            if from_mop:
                w = th.mop_out.popleft()
            elif th.fifo:
                w = th.fifo.popleft()
                op = w >> 24
                tm.take(th.tid, th.fifo_t.popleft(), op == _OP_MOP)
                if op == _OP_MOP:
                    self._expand_mop(th, w)
                    continue
                if op == _OP_MOP_CFG:
                    self._check_reserved_word(w, "MOP_CFG")
                    th.mask_hi = w & 0xFFFF
                    tm.frontend_cycles(th.tid, 1)      # ingested, emits nothing
                    continue
            else:
                return None
            # replay expander
            if th.replay_load is not None:
                if self.replay_record(th, w):
                    ready.append(w)
                continue
            if w >> 24 == _OP_REPLAY:
                self._check_reserved_word(w, "REPLAY")
                f = _REPLAY_FIELDS.get(w)
                if f is None:
                    f = _REPLAY_FIELDS[w] = INSTRUCTIONS["REPLAY"].decode(w)
                count = f["len"]
                if count == 0:
                    # WH doc: 0 means 64, but the BH buffer has 32 entries and ttsim refuses it: do not guess
                    raise EmuUnimplemented(f"Tensix: REPLAY word 0x{w:08X} with len=0")
                if f["load_mode"]:
                    th.replay_load = [f["start_idx"], count, f["execute_while_loading"]]
                    tm.frontend_cycles(th.tid, 1)          # the REPLAY word itself is ingested without emitting
                elif f["execute_while_loading"]:
                    raise EmuUnimplemented(f"Tensix: REPLAY word 0x{w:08X}: execute_while_loading without load_mode")
                else:
                    start = f["start_idx"]
                    rb = th.replay_buf
                    seq = rb[start:start + count] if start + count <= 32 else \
                        [rb[(start + i) % 32] for i in range(count)]
                    ready.extend(seq)
                    if from_mop and count >= 2:
                        tm.long_replay_in_mop(th.tid)
                    if from_mop:
                        # Identical REPLAYs right behind in the MOP output expand now too (_sfpu_batch can then
                        # see all row steps). Equivalent: nothing reads mop_out in between, and the only frontend
                        # timing of a MOP-emitted REPLAY is the idempotent long_replay_in_mop above.
                        mo = th.mop_out
                        if mo and mo[-1] == w and mo.count(w) == len(mo):   # (all of them: one extend)
                            ready.extend(seq * len(mo))
                            mo.clear()
                        while mo and mo[0] == w:
                            mo.popleft()
                            ready.extend(seq)
                continue
            ready.append(w)
        return ready[0]

    def replay_record(self, th: ThreadState, w: int) -> bool:
        """The replay expander while a REPLAY load records: word w goes to the buffer; True when it is also to be
        executed (execute_while_loading), else the frontend spends the cycle recording it."""
        idx, remaining, exe = th.replay_load
        th.replay_buf[idx % 32] = w
        th.replay_load = [idx + 1, remaining - 1, exe] if remaining > 1 else None
        if not exe:
            self.tm.frontend_cycles(th.tid, 1)      # REPLAY.md: recorded at one per cycle, nothing emitted
        return exe

    def _expand_mop(self, th: ThreadState, w: int) -> None:
        """The MOP expander: MOP word w's output (mop_expansion, cached: a pure function of the word, the mask's upper
        half and the MOP config) appended to th.mop_out."""
        self._check_reserved_word(w, "MOP")
        key = (w, th.mask_hi, *th.mop_cfg)
        words = _MOP_EXPANSIONS.get(key)
        if words is None:
            words = mop_expansion(w, th.mask_hi, th.mop_cfg)
            if len(_MOP_EXPANSIONS) >= 4096:
                _MOP_EXPANSIONS.clear()
            _MOP_EXPANSIONS[key] = words
        th.mop_out.extend(words)

    def _check_reserved_word(self, w: int, name: str) -> None:
        reserved = w & ~_USED_BITS[name] & 0xFFFFFFFF
        if self.strict and reserved:
            raise EmuUnspecified(f"Tensix: word 0x{w:08X} ({name}) sets reserved bits 0x{reserved:08X}")


def mop_expansion(w: int, mask_hi: int, cfg: list) -> tuple:
    """The words the MOP expander emits for MOP word w with MOP_CFG's upper mask bits `mask_hi` and the MOP config
    `cfg` (templates 0 and 1, MOPExpander.md), or EmuUnimplemented outside ttsim's supported subset."""
    f = INSTRUCTIONS["MOP"].decode(w)
    out = []
    if f["mop_type"] == 0:
        if f["loop_count"] > 31 or cfg[1] > 3:
            # ttsim (the verified model) supports only a 32-bit mask walk and the two flag bits
            raise EmuUnimplemented(f"Tensix: MOP template 0 word 0x{w:08X} with loop_count={f['loop_count']}, "
                                   f"MopCfg[1]=0x{cfg[1]:X}")
        mask = (mask_hi << 16) | f["zmask_lo16_or_loop_count"]
        has_b, has_a123 = cfg[1] & 1, cfg[1] & 2
        for _ in range(f["loop_count"] + 1):
            if mask & 1 == 0:
                out.append(cfg[3])
                if has_a123:
                    out.extend(cfg[4:7])
                if has_b:
                    out.append(cfg[2])
            else:
                out.append(cfg[7])
                if has_b:
                    out.append(cfg[8])
            mask >>= 1
        return tuple(out)
    outer, inner = cfg[0], cfg[1]
    if f["zmask_lo16_or_loop_count"] or f["loop_count"] or not 1 <= outer <= 32 or not 1 <= inner <= 64:
        # ttsim's supported subset of template 1 (it does not model the OuterCount==1/InnerCount==0 bug)
        raise EmuUnimplemented(f"Tensix: MOP template 1 word 0x{w:08X} with OuterCount={outer}, "
                               f"InnerCount={inner} (supported: 1..32, 1..64, count/mask fields 0)")
    start, end0, end1, loop, loop1, last0, last1 = cfg[2], cfg[3], cfg[4], cfg[5], cfg[6], cfg[7], cfg[8]

    def is_nop(x):
        return x >> 24 == _OP_NOP

    flip = 0
    if not is_nop(loop1):
        flip = loop ^ loop1
        inner *= 2
    for j in range(outer):
        if not is_nop(start):
            out.append(start)
        for i in range(inner):
            out.append(loop if i != inner - 1 else (last1 if j != outer - 1 else last0))
            loop ^= flip
        if not is_nop(end0):
            out.append(end0)
            if not is_nop(end1):
                out.append(end1)
    return tuple(out)
