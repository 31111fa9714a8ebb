"""The cycle model's rules, one test each (runtime/emu/cycles.py): issue rate, MOP / REPLAY frontend rates and the
MOP transition penalty, SFPMAD auto-stall, FPU Dst read latency, STALLWAIT on a busy unit, SEMWAIT across threads, a
Src bank wait woken by the bank, what a thread's TTSync waits for (its own instructions only), RISC-V cycles and
TTSync stalls at tile level, and the per-core / per-thread report."""
from __future__ import annotations

import numpy as np

from tt_backend.chip import isa, layout
from tt_backend.runtime.emu import cycles
from tt_backend.runtime.emu.bench import J_SELF, launch_words
from tt_backend.runtime.emu.tensix import Tensix

from tests.support.words import LUI_T0_PCBUF, LW_TTSYNC

E = isa.encode
NOP = E("SFPNOP")


def tensix():
    return Tensix(np.zeros(1536 * 1024, np.uint8), strict=True)


def push(tx, words, thread=1):
    for w in words:
        tx.push(thread, w)


def issue_cycles(tx, words, thread=1):
    """Issue cycle of each instruction of `words` (pushed at cycle 0)."""
    seen = []
    orig = tx.tm.issue

    def spy(*a, **k):
        c = orig(*a, **k)
        seen.append(c)
        return c
    tx.tm.issue = spy
    push(tx, words, thread)
    return seen


def test_one_instruction_per_cycle():
    c = issue_cycles(tensix(), [NOP] * 5)
    assert c == [1, 2, 3, 4, 5]


def test_mad_result_read_next_cycle_auto_stalls_one_cycle():
    mad = E("SFPMAD", lreg_src_a=1, lreg_src_b=2, lreg_src_c=9, lreg_dest=3, instr_mod1=0)
    use = E("SFPMAD", lreg_src_a=3, lreg_src_b=2, lreg_src_c=9, lreg_dest=4, instr_mod1=0)
    other = E("SFPMAD", lreg_src_a=1, lreg_src_b=2, lreg_src_c=9, lreg_dest=4, instr_mod1=0)
    assert issue_cycles(tensix(), [mad, use]) == [1, 3]
    assert issue_cycles(tensix(), [mad, other]) == [1, 2]
    assert issue_cycles(tensix(), [mad, NOP, use]) == [1, 2, 3]


def test_mop_emits_one_per_cycle_then_a_transition_penalty():
    tx = tensix()
    # MOP template 1: OuterCount 1, InnerCount 4 of SFPNOP; MopCfg written directly (as a TRISC would via MMIO)
    for i, v in enumerate([1, 4, E("NOP"), E("NOP"), E("NOP"), NOP, E("NOP"), NOP, NOP]):
        tx.mop_cfg_write(1, i, v)
    c = issue_cycles(tx, [E("MOP", mop_type=1, loop_count=0, zmask_lo16_or_loop_count=0), NOP])
    # docs/performance.md §6 (ISA MOPExpander.md): one idle cycle after a MOP that expands no long REPLAY
    assert c[:4] == [1, 2, 3, 4] and c[4] == 4 + 1 + 1


def test_replay_issues_without_redispatch_cost():
    tx = tensix()
    body = [NOP] * 4
    words = ([E("REPLAY", load_mode=1, execute_while_loading=0, len=4, start_idx=0)] + body
             + [E("REPLAY", load_mode=0, execute_while_loading=0, len=4, start_idx=0)] * 2 + [NOP])
    c = issue_cycles(tx, words)
    # recording 4 words without executing costs the REPLAY word + 4 cycles; then 9 back-to-back issues
    assert c == list(range(6, 15))


def fpu_ready(tx):
    tx.cfg[1] |= 1 << 29
    tx.srca_valid[0] = tx.srcb_valid[0] = True
    tx.dst.write_rows32(0, np.zeros((64, 16), np.uint32))


def test_fpu_accumulate_into_a_fresh_block_waits_for_the_latency():
    acc = E("ELWADD", dst=0, addr_mode=0, instr_mod19=0, dest_accum_en=1, clear_dvalid=0)
    other = E("ELWADD", dst=8, addr_mode=0, instr_mod19=0, dest_accum_en=1, clear_dvalid=0)
    tx = tensix()
    fpu_ready(tx)
    # docs/performance.md §6 (ISA Dst.md): a written 8x16 block is unreadable for the next 4 cycles -> issue at 1 + 5
    assert issue_cycles(tx, [acc, acc]) == [1, 1 + 5]
    tx = tensix()
    fpu_ready(tx)
    assert issue_cycles(tx, [acc, other]) == [1, 2]


def test_stallwait_on_sfpu_busy_waits_for_scheduled_work():
    """STALLWAIT(B6 FPU, C11 SFPU busy) after a SFPMAD: the FPU instruction waits until the SFPU is done, + 1 lag."""
    tx = tensix()
    fpu_ready(tx)
    mad = E("SFPMAD", lreg_src_a=1, lreg_src_b=2, lreg_src_c=9, lreg_dest=3, instr_mod1=0)
    sw = E("STALLWAIT", stall_res=1 << 6, wait_res=1 << 11)
    add = E("ELWADD", dst=0, addr_mode=0, instr_mod19=0, dest_accum_en=0, clear_dvalid=0)
    c = issue_cycles(tx, [mad, sw, add])
    # SFPMAD done at 1 + 2 (latency 2); docs/performance.md §6 (ISA STALLWAIT.md): one cycle until the block lifts
    assert c[:2] == [1, 2] and c[2] == (1 + 2) + 1


def test_semwait_resumes_after_the_post_on_another_thread():
    tx = tensix()
    push(tx, [E("SEMINIT", sem_sel=1, init_value=0, max_value=15)], thread=0)
    push(tx, [E("SEMWAIT", sem_sel=1, wait_sem_cond=1, stall_res=1 << 8), NOP], thread=1)
    assert tx.blocked_reason(1).startswith("SEMWAIT")
    push(tx, [E("NOP")] * 20 + [E("SEMPOST", sem_sel=1)], thread=0)
    tx.step()
    assert tx.thread_idle(1)
    post = tx.tm.clock[0]
    assert tx.tm.clock[1] == post + 1


def test_bank_wait_wakes_at_the_bank_not_at_another_threads_later_event():
    """An FPU instruction waiting for its SrcA bank issues once the bank is handed over (here by thread 0's
    UNPACR_NOP at cycle 1), not after thread 2's unrelated SEMPOST at cycle 202; a semaphore wait still wakes at the
    latest event (test_semwait_resumes_after_the_post_on_another_thread)."""
    tx = tensix()
    tx.cfg[1] |= 1 << 29
    tx.srcb_valid[0] = True
    tx.dst.write_rows32(0, np.zeros((64, 16), np.uint32))
    push(tx, [E("ELWADD", dst=0, addr_mode=0, instr_mod19=0, dest_accum_en=0, clear_dvalid=0)], thread=1)
    assert tx.blocked_reason(1).startswith("ELWADD: SrcA bank 0 not valid")
    push(tx, [E("SEMINIT", sem_sel=4, init_value=0, max_value=15)] + [E("NOP")] * 200 + [E("SEMPOST", sem_sel=4)],
         thread=2)
    push(tx, [E("UNPACR_NOP", unpacker_select=0, set_dvalid=1, unpack_pop=1)], thread=0)
    tx.step()
    assert tx.thread_idle(1) and tx.tm.clock[2] == 202
    assert tx.tm.clock[1] == tx.tm.clock[0] + 1


def test_tile_reports_cycles_per_core_and_thread_and_ttsync_waits_for_tensix(tile):
    """TRISC1 pushes 1 MOP expanding to 200 SFPNOPs, then reads TTSync: its cycles include waiting for the thread."""
    for i, v in enumerate([4, 50, E("NOP"), E("NOP"), E("NOP"), NOP, E("NOP"), NOP, NOP]):
        tile.tensix.mop_cfg_write(1, i, v)
    mop = E("MOP", mop_type=1, loop_count=0, zmask_lo16_or_loop_count=0)
    launch_words(tile, {"trisc1": [isa.ttinsn(mop), LUI_T0_PCBUF, LW_TTSYNC, J_SELF]})
    tile.run(100_000)
    st = tile.stats()
    assert st["tensix_instructions"][1] == 200
    th = st["tensix_cycles"]
    assert th["issued"][1] == 200 and th["issue_cycle"][1] - th["first_issue"][1] == 199
    cyc = st["cycles"]["trisc1"]
    assert 200 <= cyc <= 200 + 10, cyc               # 4 instructions + waiting for 200 Tensix cycles
    assert st["cycles"]["brisc"] <= 2 and st["clock"] >= 200
    assert set(st["cycles"]) == set(layout.CORES)


def _units_busy_from_three_threads():
    """Thread 0 unpacks 256 FP32 datums (16 cycles), thread 2 packs 1024 (256 cycles), thread 1 issues an ELWADD
    (latency 5): each thread's one instruction issues at cycle 1 or 2. Returns the cycle model and the issue cycles."""
    tx = tensix()
    tx.threads[0].adc[0][1][0] = 255             # ADC x end: datums - 1 (TensixTiming._adc_count)
    tx.threads[2].adc[2][1][0] = 1023
    tm = tx.tm
    unpack = tm.issue(0, "UNPACR", cycles.K_UNPACK, 0, {}, 0, False, pre=0)
    pack = tm.issue(2, "PACR", cycles.K_PACK, None, {}, 0, False)
    fpu = tm.issue(1, "ELWADD", cycles.K_FPU, cycles.FPU_TIMING["ELWADD"], {}, 0, False, pre=(0, 0, 0))
    return tm, unpack, pack, fpu


def test_ttsync_does_not_wait_for_another_threads_units():
    """ManualTTSync.md: a TTSync read waits while the coprocessor has in-flight instructions from its own thread, so
    thread 0's is not held by thread 2's long pack or thread 1's FPU work, though the units are busy."""
    tm, unpack, pack, fpu = _units_busy_from_three_threads()
    assert tm.pack_busy == pack + 256 and tm.fpu_busy == fpu + 5
    assert tm.done(0) == unpack + 16 < tm.pack_busy
    assert tm.done(1) == fpu + 5 and tm.done(2) == pack + 256


def test_ttsync_waits_for_its_own_sfpu_work_not_another_threads():
    """A MAD-class SFPU instruction ends 2 cycles after its issue; another thread's later SFPU run keeps the SFPU
    busy but does not hold thread 0's TTSync."""
    tx = tensix()
    mad = E("SFPMAD", lreg_src_a=1, lreg_src_b=2, lreg_src_c=9, lreg_dest=3, instr_mod1=0)
    push(tx, [mad], thread=0)
    assert tx.tm.done(0) == tx.tm.clock[0] + 2
    push(tx, [mad] * 20, thread=1)
    assert tx.tm.sfpu.busy_until == tx.tm.clock[1] + 2 > 20
    assert tx.tm.done(0) == tx.tm.clock[0] + 2


def test_ttsync_waits_for_its_own_unpack():
    tm, unpack, _, _ = _units_busy_from_three_threads()
    assert tm.done(0) == tm.unpack_busy[0] == unpack + 16 > tm.clock[0] + 1
    tm.issue(0, "NOP", cycles.K_PLAIN, None, {}, 0, False)       # a later instruction does not hide it
    assert tm.done(0) == unpack + 16


def test_risc_v_mmio_load_latency_is_counted():
    assert cycles.riscv_mmio_extra(0xFFB20000) == 6 and cycles.riscv_mmio_extra(0xFFE80020) == 2
    assert cycles.riscv_mmio_extra(0x1000) == 0


def test_data_movement_costs_follow_the_published_rates():
    assert cycles.unpack_cycles(256) == 16            # 1 KiB of FP32 at 64 B/cycle
    assert cycles.pack_cycles(256) == 64              # 16 B/cycle
    assert cycles.noc_cycles(4096) == 2 * 5 + 9 + 64


def test_pushing_core_stalls_while_the_fifo_is_full_in_modelled_time(tile):
    """TRISC1 pushes a MOP of 200 SFPNOPs then 40 NOPs and parks: the FIFO (effectively 28 deep) fills behind the MOP,
    so the core's pushes wait for the thread (no TTSync involved)."""
    for i, v in enumerate([4, 50, E("NOP"), E("NOP"), E("NOP"), NOP, E("NOP"), NOP, NOP]):
        tile.tensix.mop_cfg_write(1, i, v)
    mop = E("MOP", mop_type=1, loop_count=0, zmask_lo16_or_loop_count=0)
    launch_words(tile, {"trisc1": [isa.ttinsn(mop)] + [isa.ttinsn(E("NOP"))] * 40 + [J_SELF]})
    tile.run(100_000)
    st = tile.stats()
    assert st["tensix_instructions"][1] == 240
    assert 200 <= st["cycles"]["trisc1"] <= 200 + 45, st["cycles"]
