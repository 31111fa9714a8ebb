"""Strict mode: every undefined behaviour the ISA pages name is an EmuError naming the thread, the instruction word
and the rule. One test per rule that triggers it (and, where cheap, the legal variant that must not)."""
from __future__ import annotations

import numpy as np
import pytest

from tt_backend.chip import isa, layout
from tt_backend.chip.errors import EmuError
from tt_backend.runtime.emu.bench import J_SELF, launch_words
from tt_backend.runtime.emu.tensix import Tensix

from tests.support.words import FP32, LUI_T0_PCBUF, LW_TTSYNC, loadmacro, macro_setup, seq_bits, sequence

E = isa.encode


def tensix():
    return Tensix(np.zeros(1536 * 1024, np.uint8), strict=True)


def sfpload(vd=0, addr=0):
    return E("SFPLOAD", lreg_ind=vd, instr_mod0=FP32, sfpu_addr_mode=0, dest_reg_addr=addr)


def push(tx, words, thread=1):
    for w in words:
        tx.push(thread, w)


def written(tx, rows=64):
    tx.dst.write_rows32(0, np.ones((rows, 16), np.uint32))


# ------------------------------------------------------------------------------------------------ Dst rules
def elwadd_ready(tx):
    """Make ELWADD issue at once: FP32 Dst, both Src banks owned by the FPU (format FP32)."""
    tx.cfg[1] |= 1 << 29                     # ALU_ACC_CTRL_Fp32_enabled
    tx.srca_valid[0] = tx.srcb_valid[0] = True


ELWADD = E("ELWADD", dst=0, addr_mode=0, instr_mod19=0, dest_accum_en=0, clear_dvalid=0)


def test_fpu_write_then_sfpload_within_three_instructions():
    tx = tensix()
    written(tx)
    elwadd_ready(tx)
    with pytest.raises(EmuError, match=r"T1: word 0x70.*only 2 instruction\(s\) after the FPU wrote them"):
        push(tx, [ELWADD, E("NOP"), E("NOP"), sfpload(addr=4)])


def test_fpu_write_then_sfpload_after_three_instructions_is_fine():
    tx = tensix()
    written(tx)
    elwadd_ready(tx)
    push(tx, [ELWADD, E("NOP"), E("NOP"), E("NOP"), sfpload(addr=4), sfpload(addr=8 * 2)])


def test_sfpload_of_never_written_dst_rows():
    tx = tensix()
    with pytest.raises(EmuError, match=r"T1: word 0x70.*Dst row 0 .*never written"):
        push(tx, [sfpload()])


# ------------------------------------------------------------------------------------------------ SFPU rules
def test_sfpadd_and_sfpmul_need_their_constant_operand():
    tx = tensix()
    push(tx, [E("SFPADD", lreg_src_a=10, lreg_src_b=1, lreg_src_c=2, lreg_dest=3, instr_mod1=0),
              E("SFPMUL", lreg_src_a=1, lreg_src_b=2, lreg_src_c=9, lreg_dest=3, instr_mod1=0)])
    with pytest.raises(EmuError, match=r"word 0x85.*SFPADD with VA=1 and VB=2"):
        push(tx, [E("SFPADD", lreg_src_a=1, lreg_src_b=2, lreg_src_c=3, lreg_dest=3, instr_mod1=0)])
    tx = tensix()
    with pytest.raises(EmuError, match=r"word 0x86.*SFPMUL with VC=3"):
        push(tx, [E("SFPMUL", lreg_src_a=1, lreg_src_b=2, lreg_src_c=3, lreg_dest=3, instr_mod1=0)])


def test_stall_blind_read_of_a_mad_result():
    """SFPMAD.md: SFPIADD reading VD is not seen by the auto-stall logic: reading it the next cycle is undefined."""
    tx = tensix()
    mad = E("SFPMAD", lreg_src_a=1, lreg_src_b=2, lreg_src_c=9, lreg_dest=3, instr_mod1=0)
    with pytest.raises(EmuError, match=r"SFPIADD reads LReg 3 .* auto-stall logic does not detect"):
        push(tx, [mad, E("SFPIADD", lreg_c=4, lreg_dest=3, instr_mod1=4, imm12_math=0)])
    tx = tensix()      # with an SFPNOP in between it is fine
    push(tx, [mad, E("SFPNOP"), E("SFPIADD", lreg_c=4, lreg_dest=3, instr_mod1=4, imm12_math=0)])


def test_macro_slot_collision():
    tx = tensix()
    written(tx)
    seq = sequence(simple=seq_bits(4, 0))
    words = macro_setup({0: E("SFPABS", lreg_dest=0, lreg_c=0, instr_mod1=1)}, {0: seq}, misc=0)
    with pytest.raises(EmuError, match=r"word 0x7D.*collides with an SFPLOADMACRO-scheduled instruction on the "
                                       r"Simple sub-unit"):
        push(tx, words + [loadmacro(0, 0), E("SFPABS", lreg_dest=1, lreg_c=2, instr_mod1=1)])


def test_macro_sfpswap_needs_a_nop_on_the_mad_sub_unit():
    tx = tensix()
    written(tx)
    tpl = {0: E("SFPSWAP", lreg_dest=0, lreg_src_c=1, instr_mod1=1)}
    bad = sequence(simple=seq_bits(4, 0))
    with pytest.raises(EmuError, match="SFPSWAP on the Simple sub-unit .* without SFPNOP"):
        push(tx, macro_setup(tpl, {0: bad}, misc=0) + [loadmacro(0, 0), E("SFPNOP"), E("SFPNOP")])
    tx = tensix()
    written(tx)
    good = sequence(simple=seq_bits(4, 0), mad=seq_bits(2, 0))      # SFPNOP on MAD in the same cycle
    push(tx, macro_setup(tpl, {0: good}, misc=0) + [loadmacro(0, 0), E("SFPNOP"), E("SFPNOP")])


def test_macro_after_sfpswap_simple_must_idle():
    tx = tensix()
    written(tx)
    tpl = {0: E("SFPSWAP", lreg_dest=0, lreg_src_c=1, instr_mod1=1), 1: E("SFPABS", lreg_dest=0, lreg_c=0,
                                                                        instr_mod1=1)}
    seqs = {0: sequence(simple=seq_bits(4, 0), mad=seq_bits(2, 0)), 1: sequence(simple=seq_bits(5, 0))}
    with pytest.raises(EmuError, match="the cycle after a scheduled SFPSWAP"):
        push(tx, macro_setup(tpl, seqs, misc=0) + [loadmacro(0, 0), loadmacro(1, 1), E("SFPNOP"), E("SFPNOP")])


def test_sfpswap_auto_stalls_the_next_instruction():
    """Regular SFPSWAP / SFPSHFT2 shuffles: the next cycle only accepts SFPNOP (hardware stalls anything else)."""
    tx = tensix()
    push(tx, [E("SFPSWAP", lreg_dest=0, lreg_src_c=1, instr_mod1=0), E("SFPABS", lreg_dest=2, lreg_c=3, instr_mod1=1)])
    a = tx.tm.clock[1]
    tx = tensix()
    push(tx, [E("SFPSWAP", lreg_dest=0, lreg_src_c=1, instr_mod1=0), E("SFPNOP")])
    b = tx.tm.clock[1]
    tx = tensix()
    push(tx, [E("SFPSHFT2", lreg_dest=0, lreg_src_c=1, instr_mod1=3, imm12_math=0),
              E("SFPABS", lreg_dest=2, lreg_c=3, instr_mod1=1)])
    c = tx.tm.clock[1]
    assert a == b + 1 and c == b + 1


# ------------------------------------------------------------------------------------------------ deadlock
def test_deadlock_is_detected_with_every_wait_reason(tile):
    semwait = E("SEMWAIT", sem_sel=1, wait_sem_cond=1, stall_res=0x1FF)    # waits while sem0 == 0: nobody posts
    trisc0 = [isa.ttinsn(semwait), isa.ttinsn(E("NOP")), LUI_T0_PCBUF, LW_TTSYNC, J_SELF]
    launch_words(tile, {"trisc0": trisc0})
    with pytest.raises(EmuError, match=r"(?s)deadlock.*trisc0: waiting at pc=0x0000900C: TTSync.*"
                                       r"tensix0: blocked: SEMWAIT sem0"):
        tile.run(100_000)


def test_blocked_thread_with_a_core_in_reset_is_not_a_deadlock(tile):
    semwait = E("SEMWAIT", sem_sel=1, wait_sem_cond=1, stall_res=0x1FF)
    launch_words(tile, {"trisc0": [isa.ttinsn(semwait), isa.ttinsn(E("NOP")), LUI_T0_PCBUF, LW_TTSYNC, J_SELF]})
    tile.write32(layout.SOFT_RESET_0, 1 << layout.SOFT_RESET_BIT["trisc1"])      # trisc1 could still post
    assert tile.run(100_000) < 1000
