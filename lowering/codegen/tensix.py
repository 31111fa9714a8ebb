"""The Tensix configuration every tile pipeline shares: the semaphores between the three TRISC threads, the words
each thread pushes (`tensix_words`: unpacker 0 to Dst or SrcA, the SFPU section, the packer), the unpacker and packer
configuration per tile format and the ALU format word.

Every word is built with isa.encode by field name (checked against the ISA's documented words by
tests/lowering/test_templates.py), so the templates contain no magic numbers.
"""
from __future__ import annotations

from tt_backend.lowering.codegen.words import word_u32

# --- Tensix words (docs/sfpu_path.md §3-7, 10) -------------------------------------------------------
SEM_UNPACKED, SEM_MATHDONE, SEM_FREE, SEM_UNPACK_READ = 0, 1, 2, 3


def tensix_words() -> dict:
    w = {
        # TRISC0: semaphores (one Dst group in flight: every max is 1), unpacker 0 ADCs, per-tile config, UNPACR
        "seminit_unpacked": word_u32("SEMINIT", max_value=1, init_value=0, sem_sel=1 << SEM_UNPACKED),
        "seminit_mathdone": word_u32("SEMINIT", max_value=1, init_value=0, sem_sel=1 << SEM_MATHDONE),
        "seminit_free": word_u32("SEMINIT", max_value=1, init_value=1, sem_sel=1 << SEM_FREE),
        "unp_adcxy_reset": word_u32("SETADCXY", cnt_set_mask=1, bit_mask=0xB),   # keep ch1.X (the x end)
        "unp_adczw_reset": word_u32("SETADCZW", cnt_set_mask=1, bit_mask=0xF),
        "unp_adcxx_face": word_u32("SETADCXX", cnt_set_mask=1, x_end2=255, x_start=0),
        "unp_adczw_tile": word_u32("SETADCZW", cnt_set_mask=1, bit_mask=0x5),
        "stall_cfg_unpack": word_u32("STALLWAIT", stall_res=0x80, wait_res=0x3),  # B7 config; C0 ThCon | C1 unpacker0
        "wrcfg_unp_base": word_u32("WRCFG", gpr_address=4, cfg_reg=76),
        "wrcfg_unp_dest": word_u32("WRCFG", gpr_address=5, cfg_reg=84),
        "wrcfg_gpr6_cfg64": word_u32("WRCFG", gpr_address=6, cfg_reg=64),
        "wrcfg_gpr7_cfg72": word_u32("WRCFG", gpr_address=7, cfg_reg=72),
        "wrcfg_gpr8_cfg73": word_u32("WRCFG", gpr_address=8, cfg_reg=73),
        "wrcfg_gpr9_cfg57": word_u32("WRCFG", gpr_address=9, cfg_reg=57),
        "unpacr_dst_face": word_u32("UNPACR", addr_mode=0x11, ovrd_thread_id=1, last=1),
        "unpacr_srca_face": word_u32("UNPACR", addr_mode=0x01, ovrd_thread_id=1, set_dat_valid=1, last=1),
        "unpacr_nop_zero_srcb": word_u32("UNPACR_NOP", unpacker_select=1, set_dvalid=1, unpack_pop=1),
        "srca_ovrd_on": word_u32("SETC16", setc16_reg=5, setc16_value=4),
        "srca_ovrd_off": word_u32("SETC16", setc16_reg=5, setc16_value=0),
        "stall_sync_unpack": word_u32("STALLWAIT", stall_res=0x2, wait_res=0x2),   # B1 sync; C1 unpacker0
        "sempost_unpacked": word_u32("SEMPOST", sem_sel=1 << SEM_UNPACKED),
        # TRISC1
        "dst_sec1_incr2": word_u32("SETC16", setc16_reg=29, setc16_value=2),
        "ab_sec2_srca8": word_u32("SETC16", setc16_reg=14, setc16_value=8),
        "dst_sec2_incr8": word_u32("SETC16", setc16_reg=30, setc16_value=8),
        "math_offset": [word_u32("SETC16", setc16_reg=1, setc16_value=64 * s) for s in range(8)],
        "setrwc_all": word_u32("SETRWC", bit_mask=0x7),
        "elwadd8": word_u32("ELWADD", addr_mode=2, dst=0),
        "setrwc_release": word_u32("SETRWC", clear_ab_vld=3, bit_mask=0x3),
        "setrwc_dst": word_u32("SETRWC", bit_mask=0x4),
        "stall_sfpu_after_fpu": word_u32("STALLWAIT", stall_res=0x100, wait_res=0x10),  # B8 SFPU; C4 FPU
        "stall_sync_math": word_u32("STALLWAIT", stall_res=0x2, wait_res=0x810),        # B1 sync; C4 FPU | C11 SFPU
        "sempost_mathdone": word_u32("SEMPOST", sem_sel=1 << SEM_MATHDONE),
        # TRISC2
        "pack_sec0": word_u32("SETC16", setc16_reg=37, setc16_value=4),
        "pack_sec1": word_u32("SETC16", setc16_reg=38, setc16_value=0x1020),
        "pack_sec2": word_u32("SETC16", setc16_reg=39, setc16_value=0x2020),
        "pck_adcxy_reset": word_u32("SETADCXY", cnt_set_mask=4, bit_mask=0xB),
        "pck_adczw_reset": word_u32("SETADCZW", cnt_set_mask=4, bit_mask=0xF),
        "pck_adcxx_row": word_u32("SETADCXX", cnt_set_mask=4, x_end2=15, x_start=0),
        "stall_cfg_pack": word_u32("STALLWAIT", stall_res=0x80, wait_res=0x9),     # B7 config; C0 ThCon | C3 packer
        "wrcfg_pck_dest": word_u32("WRCFG", gpr_address=4, cfg_reg=69),
        "wrcfg_pck_offset": word_u32("WRCFG", gpr_address=5, cfg_reg=180),
        "pacr_rows": word_u32("PACR", addr_mode=0),
        "pacr_next_face": word_u32("PACR", addr_mode=1),
        "pacr_last": word_u32("PACR", addr_mode=2, last=1),
        "stall_sync_pack": word_u32("STALLWAIT", stall_res=0x2, wait_res=0x8),      # B1 sync; C3 packer
        "sempost_free": word_u32("SEMPOST", sem_sel=1 << SEM_FREE),
    }
    return w


# unpacker 0 config words per path (section 3.1): index -> value
UNPACK_CFG = {
    "fp32": {64: 0x01000010, 72: 0x00000020, 73: 0x0000001F, 57: 0x00000400},   # L1 fp32 -> Dst32b
    "bf16": {64: 0x01000015, 72: 0x00000025, 73: 0x0000000F, 57: 0x00000000},   # L1 bf16 -> SrcA
}
UNPACK_CFG_COMMON = {65: 0x00040001, 86: 0x01000100, 92: 0}
# packer config per output format (section 6.1)
PACK_CFG = {
    "fp32": {12: 0x00400004, 13: 0x10000400, 18: 0x1, 20: 0, 24: 0xFFFF, 28: 0x1000, 68: 0, 70: 0x001, 71: 0},
    "bf16": {12: 0x00200002, 13: 0x08000200, 18: 0x1, 20: 0, 24: 0xFFFF, 28: 0x1000, 68: 0, 70: 0x551, 71: 0},
}
FORMAT_CODE = {"fp32": 0, "bf16": 5}


def alu_format_word(input_formats: list[str], out_format: str) -> int:
    """cfg 1 (section 5.1): SrcA/SrcB = bf16 when any input takes the FPU path, Dstacc = output format (read by the
    packer), Fp32_enabled (ELWADD writes Dst32b) and SFPU_Fp32_enabled always on."""
    src = FORMAT_CODE["bf16"] if "bf16" in input_formats else 0
    return (src << 17) | (src << 21) | (FORMAT_CODE[out_format] << 25) | (1 << 29) | (1 << 30)
