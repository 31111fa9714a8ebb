"""Batched row steps of a MOP of identical REPLAYs (the speed layer's MOP path): when the frontend puts K repetitions
of one SFPU body in a thread's ready queue at once, run them as one numpy pass per body instruction over K x 32 lanes
(sfpu_batch.execute_batch), with the Dst addresses and RWCs of every repetition in closed form where the address
modifiers only add constants, and the cycle model advanced in closed form once it is periodic (batch_timing). Every
batch is provably equal to running the instructions one by one (tests/emu/test_emu_speed.py pins it); anything else is
refused and runs through the reference path. Mixed into tensix.Tensix."""
from __future__ import annotations

from itertools import islice

import numpy as np

from tt_backend.chip.errors import EmuError, EmuUnimplemented, EmuUnspecified
from tt_backend.runtime.emu.accel import batch_timing, deferral, sfpu_batch, sfpu_issue_native, sfpu_native
from tt_backend.runtime.emu.cycles import K_SFPU
from tt_backend.runtime.emu.tensix_sfpu import sfpu_format_flags
from tt_backend.runtime.emu.thread_state import ThreadState

BATCH_CLOSED_FORM = True  # tests turn it off: batch_sfpu then walks the RWCs and the cycle model row step by row step
BATCH_MIN_REPS = 4        # fewer repetitions are not worth the analysis
BATCH_MAX_WORDS = 4096


class MopBatchMixin:
    def _init_mop_batch(self) -> None:
        self._batch_plans: dict[tuple, object] = {}        # SFPU body -> _batch_plan() result
        self._batch_addr_cache: dict[tuple, object] = {}   # (body, k, start, steps) -> batch_addrs() result
        self._batch_bodies: dict[tuple, list] = {}         # (body, resolved modes) -> execute_batch's body list
        self._batch_timing: dict[tuple, tuple] = {}        # (body, k, batch_timing.key) -> batch_timing.memo()
        self._batch_programs: dict[tuple, tuple | None] = {}  # (body, resolved modes) -> _native_body() result
        self._batch_runs: dict[tuple, tuple] = {}   # (akey, resolved modes) -> the C part's whole program, its address

    @property
    def _batch_min_reps(self) -> int:
        """BATCH_MIN_REPS as batch_sfpu reads it, at each call (read by sfpu_issue_native.c's replay_push, which takes
        a REPLAY only where batch_sfpu would find no batch to try)."""
        return BATCH_MIN_REPS

    def batch_sfpu(self, t: int, th: ThreadState) -> int:
        """Execute K >= BATCH_MIN_REPS back-to-back repetitions of one SFPU body at the head of the ready queue (what a
        MOP of identical REPLAYs emits) with one numpy pass per body instruction over K x 32 lanes. Returns the
        number of instructions executed, or 0 (nothing changed) unless the batch is provably equivalent to running
        them one by one:
        * the body is SFPU only, from a whitelist of lane-wise instructions that neither read nor change lane flags,
          PRNG, LaneConfig or macro state (sfpu_batch.batchable), with no reserved bits and passing the strict SFPADD /
          SFPMUL operand rules; no LReg is read before the body writes it if the body writes it anywhere (no
          loop-carried LReg dependency: every repetition sees the same inputs as the first);
        * all lanes enabled, no LaneConfig bits, no SFPLOADMACRO work pending, no Wait Gate latch;
        * SFPLOAD/SFPSTORE in a 32-bit mode at even addresses below 512, where the RWC walk (the address modifiers
          simulated on a copy) never lets one repetition store to a Dst quad/column set another repetition touches
          (so instruction-major order equals row-major order), and (strict) every load reads written rows.
        Timing is not batched: every instruction gets its issue cycle from the cycle model in the original order
        (identical cycle counts, auto-stalls and hazard errors); only data errors are excluded up front.
        Where every memo below hits, the C part (sfpu_issue_native.batch_run) does the batch instead, exactly as this
        path would; it declines, with nothing changed, everywhere else (-1)."""
        run = sfpu_issue_native.batch_run() if BATCH_CLOSED_FORM else None
        if run is not None:
            n = run(self, t, th, BATCH_MIN_REPS, BATCH_MAX_WORDS, deferral.NATIVE_BATCH_MIN)
            if n > 0:
                sfpu_native.traffic["C"] += n
            if n >= 0:
                return n             # (0: fewer than BATCH_MIN_REPS repetitions, the first refusal below)
            if n < -1:
                raise EmuUnimplemented(f"sfpu_native.run: a kept MOP program's record {-2 - n} is not the C part's")
        ready = th.ready
        period = sfpu_issue_native.find_period()
        if period is not None:
            p, k = period(ready, BATCH_MAX_WORDS)
        else:
            p, k = find_period(list(islice(ready, BATCH_MAX_WORDS)))
        if k < BATCH_MIN_REPS:
            return 0
        body = tuple(islice(ready, p))
        plan = self._batch_plans.get(body)
        if plan is None:
            plan = self._batch_plans[body] = self._batch_plan(body)
        if not plan:
            return 0
        sfpu = self.sfpu                       # executes deferred work (deferral.py) first
        sfpu.enabled()
        if not sfpu.is_plain() or not sfpu.all_enabled:
            return 0
        entries, mems = plan
        fp32, srcb16 = sfpu_format_flags(self.cfg[0], self.cfg[1])
        resolved = []
        for (i, is_store, imm, amode, vd, mod0) in mems:
            m = mod0 or (3 if fp32 else 1 if srcb16 else 2)
            if m not in sfpu_native.DST32_MODES_OF[is_store] or th.cfg[47 + amode]:
                return 0
            resolved.append(m)
        # the Dst addresses of every repetition: the address modifiers applied to a copy of the RWCs (in closed form
        # when every modifier the body uses only adds constants: addr_mod_steps)
        base_cfg = th.cfg[1] & 0xFFF
        rwc = th.rwc
        steps = addr_mod_steps(th, [m[3] for m in mems]) if BATCH_CLOSED_FORM else None
        nm = len(mems)
        if steps is not None:
            # closed form: the addresses, the ownership test and the rows strict mode must find written depend
            # only on (body, k, start address, steps): analysed once (batch_addrs), cached
            akey = (body, k, base_cfg + rwc["d"], tuple(steps))
            an = self._batch_addr_cache.get(akey)
            if an is None:
                if len(self._batch_addr_cache) > 4096:
                    self._batch_addr_cache.clear()
                an = self._batch_addr_cache[akey] = batch_addrs(mems, steps, k, base_cfg + rwc["d"])
            if an is False:
                return 0
            addrs_np, need_rows, per_rep = an
            if self.strict and need_rows is not None and np.count_nonzero(self.dst.written[need_rows]) < need_rows.size:
                return 0
        else:
            akey = None
            th.rwc = sim = dict(rwc)
            addrs = []
            try:
                for _ in range(k):
                    for (i, is_store, imm, amode, vd, mod0) in mems:
                        addrs.append((imm + base_cfg + sim["d"]) & 0x3FF)
                        self.apply_addr_mod(t, amode, fidelity=False)
            except EmuError:
                return 0
            finally:
                th.rwc = rwc
            owner = {}
            store_pos = [m[1] for m in mems]
            for j, a in enumerate(addrs):
                if a & 1 or a >= 512:
                    return 0
                if store_pos[j % nm]:
                    if owner.setdefault(a, j // nm) != j // nm:
                        return 0
            if owner:
                for j, a in enumerate(addrs):
                    if owner.get(a, j // nm) != j // nm:
                        return 0
            if self.strict:
                # strict: every load reads written rows (per Dst quad: a 32-bit load/store covers rows a & ~3 .. +3)
                wq = self.dst.written.reshape(128, 4).all(axis=1).tolist()
                for j, a in enumerate(addrs):
                    q = (a & 0x1FC) >> 2
                    if store_pos[j % nm]:
                        wq[q] = True
                    elif not wq[q]:
                        return 0
            addrs_np = np.array(addrs, dtype=np.int64).reshape(k, nm)
        # commit: timing in the original order, then the data one instruction at a time over all repetitions
        tm = self.tm
        was_blocked = th.blocked is not None
        c = self.issue_t
        st = tm.sfpu
        prev = None
        r = 0
        # a body issued before from the same relative cycle-model state issues the same way again (batch_timing.key)
        tkey = batch_timing.key(tm, t, st) if steps is not None and not was_blocked else None
        if tkey is not None:
            tkey = (body, k, tkey, tm.rec is not None)     # a memo made while recording carries the timeline's gaps
            memo = self._batch_timing.get(tkey)
            if memo is not None:
                c = batch_timing.replay(tm, t, st, memo)
                rwc["a"] = (rwc["a"] + k * per_rep[0]) & 0x3F
                rwc["b"] = (rwc["b"] + k * per_rep[1]) & 0x3F
                rwc["d"] = (rwc["d"] + k * per_rep[2]) & 0x3FF
                last = entries[-1]
                self.current = (t, last[0], last[1])
                r = k
            else:
                entry = (batch_timing.base(tm, t), st.nop_only_cycle, st.mad_cycle, st.busy_until, tm.stalls[t],
                         tm.issued[t], (tm.rec.marks(t), tm.clock[t]) if tm.rec is not None else None)
        while r < k:
            for (w, name, fields, block, info, amode) in entries:
                self.current = (t, w, name)
                c = tm.issue(t, name, K_SFPU, info, fields, block, was_blocked)
                was_blocked = False
                if amode is not None:
                    self.apply_addr_mod(t, amode, fidelity=False)
            r += 1
            if steps is None or r >= k:
                continue
            snap = (tm.clock[t], st.nop_only_cycle, st.mad_cycle, st.mad_writes, st.mad_macro, st.busy_until,
                    tm.stalls[t], tm.rec.marks(t) if tm.rec is not None else None)
            if prev is not None and batch_timing.periodic(tm, t, prev, snap):
                c = batch_timing.skip(tm, t, st, prev, snap, k - r, len(entries))
                rem = k - r
                rwc["a"] = (rwc["a"] + rem * per_rep[0]) & 0x3F
                rwc["b"] = (rwc["b"] + rem * per_rep[1]) & 0x3F
                rwc["d"] = (rwc["d"] + rem * per_rep[2]) & 0x3FF
                break
            prev = snap
        if tkey is not None and memo is None:
            memo = batch_timing.memo(tm, t, st, entry)
            if memo is not None:
                if len(self._batch_timing) > 4096:
                    self._batch_timing.clear()
                self._batch_timing[tkey] = memo
        self.issue_t = c
        sfpu.sfpu_fp32_enabled, sfpu.srcb_is_fp16 = fp32, srcb16
        bkey = (body, tuple(resolved))
        ebody = self._batch_bodies.get(bkey)
        if ebody is None:
            mem_info = {i: (is_store, vd, m) for (i, is_store, imm, amode, vd, mod0), m in zip(mems, resolved)}
            ebody = self._batch_bodies[bkey] = [(e[1], e[2], mem_info.get(i)) for i, e in enumerate(entries)]
        native = None
        if k < deferral.NATIVE_BATCH_MIN and sfpu_native.available():
            native = self._batch_programs.get(bkey, False)
            if native is False:
                native = self._batch_programs[bkey] = _native_body(entries, mems, resolved)
        if native is None:
            sfpu_batch.execute_batch(sfpu, ebody, k, addrs_np, c)
        else:
            # the repetitions one after the other, each instruction as its handler would run it (the C part: the
            # reference order itself), the Dst addresses filled in from the RWC walk; in closed form the program
            # depends only on the address analysis' key and the modes: built once
            rkey = (akey, bkey[1]) if akey is not None else None
            kept = self._batch_runs.get(rkey)
            if kept is None:
                template, mem_rows = native
                program = np.tile(template, (k, 1))
                program[(np.arange(k)[:, None] * p + mem_rows).reshape(-1), -1] = addrs_np.reshape(-1)
                program.flags.writeable = False
                kept = program, program.ctypes.data
                if rkey is not None:
                    if len(self._batch_runs) > 512:
                        self._batch_runs.clear()
                    self._batch_runs[rkey] = kept
            sfpu.instructions += k * p
            sfpu_native.run_at(sfpu, kept[1], k * p, flags_kept=True)     # (_batch_plan: batchable, no flags)
            sfpu.cycle = c
        n = k * p
        if n == len(ready):
            ready.clear()
        else:
            for _ in range(n):
                ready.popleft()
        return n

    def _batch_plan(self, body: tuple):
        """Static part of batch_sfpu's equivalence argument for one body (cached per body): (entries, mems) or
        False."""
        entries, mems = [], []
        written = all_w = 0
        infos = []
        for i, w in enumerate(body):
            try:
                name, fields, handler, block, reserved, kind, info = self.decode(w)
            except EmuError:
                return False                      # raised in order by the one-by-one path
            if reserved or kind != K_SFPU or handler is None or not sfpu_batch.batchable(name, fields):
                return False
            if self.strict and name in ("SFPADD", "SFPMUL"):
                try:
                    self.check_sfpu_operands(name, fields)
                except EmuUnspecified:
                    return False                  # raised in order by the one-by-one path
            amode = fields["sfpu_addr_mode"] if name in ("SFPLOAD", "SFPSTORE") else None
            entries.append((w, name, fields, block, info, amode))
            if amode is not None:
                mems.append((i, name == "SFPSTORE", fields["dest_reg_addr"], amode, fields["lreg_ind"],
                             fields["instr_mod0"]))
            reads, writes = info[1], info[3]
            if name == "SFPLOADI" and fields["instr_mod0"] in (8, 10):   # keeps half of VD
                reads |= 1 << fields["lreg_ind"]
            infos.append((reads, writes))
            all_w |= writes
        for reads, writes in infos:
            if reads & all_w & ~written:
                return False                      # loop-carried: read before this repetition writes it
            written |= writes
        return entries, mems


def addr_mod_steps(th: ThreadState, modes: list) -> list | None:
    """Per address-modifier index in `modes`: its (SrcA, SrcB, Dst) RWC increments when every one of them only adds
    a constant (no Clear, no CR, no DestCToCR, no bias: FpuMixin.apply_addr_mod then is `rwc += incr` masked), else
    None."""
    cfg = th.cfg
    out = []
    for m in modes:
        ab, dm = cfg[12 + m], cfg[28 + m]
        if cfg[47 + m] or ab & 0xC0C0 or dm & 0x1C00:
            return None
        out.append((ab & 0x3F, ab >> 8 & 0x3F, dm & 0x3FF))
    return out


def batch_addrs(mems: list, steps: list, k: int, start: int):
    """The static Dst analysis of batch_sfpu for a body whose address modifiers only add constants, entered with
    Dst address base + RWC.Dst = `start`: False if refused (odd or >= 512 address; a repetition storing to a quad /
    column set another repetition touches), else ((k, n_mem) int64 addresses, the Dst32b rows strict mode must find
    written beforehand (int64 array, None if none), per-repetition (SrcA, SrcB, Dst) RWC increments)."""
    offs, off = [], start
    for (i, is_store, imm, amode, vd, mod0), st in zip(mems, steps):
        offs.append(imm + off)
        off += st[2]
    per_d = off - start
    addrs = [(o + r * per_d) & 0x3FF for r in range(k) for o in offs]
    nm = len(mems)
    store_pos = [m[1] for m in mems]
    owner = {}
    for j, a in enumerate(addrs):
        if a & 1 or a >= 512:
            return False
        if store_pos[j % nm]:
            if owner.setdefault(a, j // nm) != j // nm:
                return False
    if owner:
        for j, a in enumerate(addrs):
            if owner.get(a, j // nm) != j // nm:
                return False
    # strict: a load must find its quad written, by an earlier store of the batch or before the batch
    stored, need = set(), []
    for j, a in enumerate(addrs):
        q = (a & 0x1FC) >> 2
        if store_pos[j % nm]:
            stored.add(q)
        elif q not in stored and q not in need:
            need.append(q)
    need_rows = np.array([4 * q + i for q in need for i in range(4)], dtype=np.int64) if need else None
    per_rep = tuple(sum(st[j] for st in steps) for j in range(3))
    return np.array(addrs, dtype=np.int64).reshape(k, nm), need_rows, per_rep


def find_period(lst: list) -> tuple[int, int]:
    """(p, k): the body length p <= 32 whose k leading back-to-back repetitions cover most of `lst` (the reference of
    sfpu_issue_native.c's find_period, which batch_sfpu calls where it is built)."""
    best_p, best_k = 0, 0
    n = len(lst)
    for p in range(1, min(32, n // 2) + 1):
        head = lst[:p]
        if lst[p:2 * p] != head:
            continue
        k = 2
        while lst[k * p:(k + 1) * p] == head:
            k += 1
        if k * p > best_k * best_p:
            best_p, best_k = p, k
    return best_p, best_k


def _native_body(entries: list, mems: list, resolved: list) -> tuple | None:
    """The body as the C part's records (sfpu_native; loads and stores in their resolved mode at address 0) and the
    positions of its loads and stores, or None when the C part does not cover an instruction of it."""
    records = [sfpu_native.record(e[1], e[2]) for e in entries]
    if None in records:
        return None
    for (i, *_), mode in zip(mems, resolved):
        records[i] = sfpu_native.at_address(records[i], mode, 0)
    return np.array(records, dtype=np.int32), np.array([m[0] for m in mems], dtype=np.int64)
