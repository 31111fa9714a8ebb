"""Instruction words the tests build by hand: Tensix set-up words, the SFPLOADMACRO programming words (SFPCONFIG
through LReg0), and RISC-V words of programs assembled without a compiler (runtime.emu.bench.launch_words)."""
from __future__ import annotations

from tt_backend.chip import isa

E = isa.encode
FP32 = 3                # SFPLOAD / SFPSTORE / SFPLOADMACRO instr_mod0: FP32

# RISC-V words: lui x5, 0xFFE80 (the Tensix PC buffer page) and lw x6, 4(x5) (TTSync: waits until the thread is idle)
LUI_T0_PCBUF = (0xFFE80 << 12) | (5 << 7) | 0x37
LW_TTSYNC = (4 << 20) | (5 << 15) | (2 << 12) | (6 << 7) | 0x03


def setc16(reg, value):
    return E("SETC16", setc16_reg=reg, setc16_value=value)


def loadi32(vd, value):
    return [E("SFPLOADI", lreg_ind=vd, instr_mod0=8, imm16=value >> 16),
            E("SFPLOADI", lreg_ind=vd, instr_mod0=10, imm16=value & 0xFFFF)]


def sfpconfig_from_l0(dest, value):
    return loadi32(0, value) + [E("SFPCONFIG", config_dest=dest, instr_mod1=0, imm16_math=0)]


def macro_setup(templates: dict[int, int], sequences: dict[int, int], misc: int) -> list[int]:
    """SFPCONFIG words writing InstructionTemplate[i], Sequence[m] and Misc (through LReg0)."""
    words = []
    for i, w in templates.items():
        words += sfpconfig_from_l0(i, w)
    for m, seq in sequences.items():
        words += sfpconfig_from_l0(4 + m, seq)
    words.append(E("SFPCONFIG", config_dest=8, instr_mod1=1, imm16_math=misc))
    return words


def seq_bits(sel, delay=0, vd16=False, vb_is_vd=False):
    return sel | (delay << 3) | (0x40 if vd16 else 0) | (0x80 if vb_is_vd else 0)


KEEP = 7 << 3   # an unused sub-unit byte with Delay 7: a 0 byte would cancel what is due next cycle (the model
                # runs ForgetFutureInstructionWhoseDelayIs(Delay) before looking at the instruction selector)


def sequence(simple=KEEP, mad=KEEP, rnd=KEEP, store=KEEP):
    return simple | (mad << 8) | (rnd << 16) | (store << 24)


def loadmacro(macro, vd, imm10=0, mod0=FP32, addr_mode=0):
    return E("SFPLOADMACRO", lreg_ind=(macro << 2) | (vd & 3), instr_mod0=mod0, sfpu_addr_mode=addr_mode,
             dest_reg_addr=(imm10 & ~1) | (vd >> 2))
