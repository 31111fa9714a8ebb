"""The per-thread state of the Tensix coprocessor: what each of its three threads (T0 unpack, T1 math, T2 pack) owns
in the frontend (instruction FIFO, MOP expander, replay buffer, Wait Gate latch) and in the backend units (ThreadConfig,
GPRs, ADCs, RWCs)."""
from __future__ import annotations

from collections import deque

THREAD_CFG_WORDS = 68    # ThreadConfig registers per thread (SETC16 indices 0..67)
N_GPR = 64


class Latch:
    """The Wait Gate's latched wait instruction (STALLWAIT or SEMWAIT): `block` is its block mask, `cond` its
    condition mask (STALLWAIT) or semaphore condition (SEMWAIT on the semaphores in `sems`)."""
    __slots__ = ("kind", "cond", "sems", "block", "word")

    def __init__(self, kind, cond, sems, block, word):
        self.kind, self.cond, self.sems, self.block, self.word = kind, cond, sems, block, word


class ThreadState:
    __slots__ = ("fifo", "mop_out", "ready", "replay_buf", "replay_load", "mask_hi", "mop_cfg", "latch", "blocked", "bank_wait",
                 "bank_state", "cfg", "gpr", "adc", "adc_cr", "rwc", "fifo_t", "tid", "batch_skip")

    def __init__(self, tid: int = 0):
        self.tid = tid
        self.fifo: deque[int] = deque()        # words as pushed (before the MOP expander)
        self.fifo_t: deque[int] = deque()      # the cycle each FIFO word was pushed (cycle model)
        self.mop_out: deque[int] = deque()     # MOP expander output not yet taken by the replay expander
        self.ready: deque[int] = deque()       # replay expander output, head = next instruction at the Wait Gate
        self.replay_buf = [0] * 32
        self.replay_load = None                # [next_index, remaining, exec] while a REPLAY load is recording
        self.mask_hi = 0                       # MOP_CFG's upper 16 mask bits
        self.mop_cfg = [0] * 9
        self.latch: Latch | None = None
        self.blocked: str | None = None
        self.bank_wait = False                 # `blocked` came from the handler (a Src bank), not the Wait Gate
        self.bank_state = None                 # then: Tensix.src_bank_state() when the handler blocked
        self.cfg = [0] * THREAD_CFG_WORDS      # ThreadConfig (SETC16), 16-bit values
        self.gpr = [0] * N_GPR
        # ADCs[set][channel][X, Y, Z, W] and the _Cr shadows; sets: unpacker 0, unpacker 1, packer
        self.adc = [[[0, 0, 0, 0], [0, 0, 0, 0]] for _ in range(3)]
        self.adc_cr = [[[0, 0, 0, 0], [0, 0, 0, 0]] for _ in range(3)]
        # RWCs: SrcA, SrcA_Cr, SrcB, SrcB_Cr, Dst, Dst_Cr, FidelityPhase
        self.rwc = {"a": 0, "a_cr": 0, "b": 0, "b_cr": 0, "d": 0, "d_cr": 0, "fid": 0}
        self.batch_skip = 0                    # the speed layer's: no batching attempt while len(ready) <= this
