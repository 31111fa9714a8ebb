"""How the Tensix issues SFPU instructions to the Vector Unit (sfpu.py): the config words that set the SFPU's formats
(ALU_ACC_CTRL_SFPU_Fp32_enabled, the SrcB format MOD0_FMT_SRCB resolves by), the Dst base (DEST_TARGET_REG_CFG_MATH_
Offset + RWC.Dst), the strict checks the Tensix owns (never-written Dst rows, SFPADD / SFPMUL operands) and the RWC
update of SFPLOAD / SFPSTORE / SFPLOADMACRO's address modifier. Mixed into tensix.Tensix."""
from __future__ import annotations

from tt_backend.chip.errors import EmuError, EmuUnimplemented
from tt_backend.chip.isa import INSTRUCTIONS
from tt_backend.runtime.emu.accel.sfpu_native import traffic as sfpu_traffic

_SRCB_BF16_LIKE = {0, 4, 5, 6, 7, 15, 8, 9}   # FP32 TF32 BF16 BFP8 BFP4 BFP2 INT32 INT16: MOD0_FMT_SRCB -> BF16

def sfpu_format_flags(c0: int, c1: int) -> tuple[bool, bool]:
    """(ALU_ACC_CTRL_SFPU_Fp32_enabled, SrcB format is FP16-like) from config words 0 and 1. MOD0_FMT_SRCB resolves
    by the SrcB format (SFPLOAD.md): the override field wins over REG1_SrcB."""
    srcb_fmt = (c0 >> 5 & 0xF) if c0 >> 9 & 1 else (c1 >> 21 & 0xF)
    return bool(c1 >> 30 & 1), srcb_fmt not in _SRCB_BF16_LIKE

def resolve_sfpu_mode(c0: int, c1: int) -> int:
    """SFPLOAD/SFPSTORE Mod0 0 (MOD0_FMT_SRCB) resolved as the SFPU does (VectorUnitState.resolve_srcb)."""
    fp32, srcb16 = sfpu_format_flags(c0, c1)
    return 3 if fp32 else 1 if srcb16 else 2

class SfpuIssueMixin:
    def sfpu_handler(self, name: str):
        """The Tensix handler of SFPU instruction `name`: set the SFPU's formats from config, strict checks, execute
        at the issue cycle, then the RWC update of the memory instructions."""
        has_addr_mode = "sfpu_addr_mode" in {fl.name for fl in INSTRUCTIONS[name].fields}
        is_load = name in ("SFPLOAD", "SFPLOADMACRO")
        check_operands = name in ("SFPADD", "SFPMUL")

        def handler(t, f):
            sfpu = self.sfpu
            th = self.threads[t]
            dst_base = (th.cfg[1] & 0xFFF) + th.rwc["d"]
            sfpu.sfpu_fp32_enabled, sfpu.srcb_is_fp16 = sfpu_format_flags(self.cfg[0], self.cfg[1])
            if is_load and self.strict:
                self.check_dst_written(name, f, dst_base)
            elif check_operands and self.strict:
                self.check_sfpu_operands(name, f)
            self.execute_sfpu(name, f, dst_base, self.issue_t)
            if has_addr_mode:  # SFPLOAD/SFPSTORE/SFPLOADMACRO: RWCs move, the fidelity phase does not
                self.apply_addr_mod(t, f["sfpu_addr_mode"], fidelity=False)
        return handler

    def execute_sfpu(self, name: str, f: dict, dst_base: int, cycle: int) -> None:
        """SFPU.execute, its errors named after the thread and word (SFPU-side rules: macros, hazards)."""
        sfpu_traffic[name] += 1
        try:
            self.raw_sfpu.execute(name, f, dst_base, cycle)
        except EmuUnimplemented:
            raise
        except EmuError as e:
            if str(e).startswith("Tensix T"):
                raise
            raise type(e)(f"{self.where()}: {e}") from e

    def check_dst_written(self, name: str, f: dict, dst_base: int) -> None:
        """Dst.md: Dst has no reset value; reading rows no one wrote is undefined (strict mode)."""
        addr = (f["dest_reg_addr"] + dst_base) & 0x3FC
        mod0 = f["instr_mod0"]
        if mod0 in (11, 10):                       # ZERO reads nothing; INT32_ALL is not modelled anyway
            return
        if mod0 == 0:
            mod0 = 3 if self.sfpu.sfpu_fp32_enabled else 2
        if mod0 in (3, 4, 12):
            rows = range(addr & 0x1FF, (addr & 0x1FF) + 4)
        else:                                      # Dst16b row r lives in Dst32b row ((r >> 4) << 3) | (r & 7)
            rows = sorted({((r >> 4) << 3) | (r & 7) for r in range(addr, addr + 4)})
        written = self.dst.written
        for r in rows:
            if not written[r & 511]:
                raise self.undefined(f"reads Dst row {r} (Dst32b numbering) which was never written since reset "
                                     f"(Dst.md: Dst has no reset value)")

    def check_sfpu_operands(self, name: str, f: dict) -> None:
        """SFPADD.md: SFPMAD computing +-(1.0 * VB) +- VC, i.e. one multiplicand must be LReg[10]; SFPMUL.md: SFPMAD
        computing +-(VA * VB) +- 0, i.e. VC must be LReg[9] (ttsim: NonContractualBehavior otherwise)."""
        if name == "SFPADD" and f["lreg_src_a"] != 10 and f["lreg_src_b"] != 10:
            raise self.unspecified(f"SFPADD with VA={f['lreg_src_a']} and VB={f['lreg_src_b']}: one of them must be "
                                   f"LReg[10] (1.0) - use SFPMAD for a general multiply-add")
        if name == "SFPMUL" and f["lreg_src_c"] != 9:
            raise self.unspecified(f"SFPMUL with VC={f['lreg_src_c']}: the addend must be LReg[9] (0.0) - use SFPMAD")
