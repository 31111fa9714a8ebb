"""Configuration state of the Tensix and the instructions that write it: the backend config words (one state bank;
WRCFG.md, RDCFG.md, RMWCIB.md, also reachable from RISC-V through MMIO), each thread's ThreadConfig (SETC16.md), and
the thread controller's (ThCon) GPRs (SETDMAREG.md) and address counters (ADCs: SETADC*.md, INCADC*.md, ADDRCR*.md).
Mixed into tensix.Tensix."""
from __future__ import annotations

from tt_backend.chip.errors import EmuUndefined
from tt_backend.runtime.emu.thread_state import THREAD_CFG_WORDS

CFG_WORDS = 224          # backend config words per state bank (indices 0..222 named in tensix_regs.json)
# ADC counter widths (ttsim: X 18 bits, Y 13, Z 8, W 8)
ADC_MASK = (0x3FFFF, 0x1FFF, 0xFF, 0xFF)
UNP0, UNP1, PACK = 0, 1, 2


class ConfigMixin:
    def _init_config(self) -> None:
        self.cfg = [0] * CFG_WORDS                 # one state bank (CFG_STATE_ID_StateID must stay 0)

    def _cfg_index(self, index: int) -> int:
        if not 0 <= index < CFG_WORDS:
            raise EmuUndefined(f"Tensix config index {index} out of range (0..{CFG_WORDS - 1})")
        return index

    def cfg_read(self, index: int) -> int:
        return self.cfg[self._cfg_index(index)]

    def cfg_write(self, index: int, value: int) -> None:
        # RISC-V stores land in state bank 0 and take effect at once (ttsim); ordering against queued
        # instructions is the kernel's business (in-stream WRCFG or a TENSIX_SYNC read first).
        self.cfg[self._cfg_index(index)] = value & 0xFFFFFFFF

    def thread_cfg(self, thread: int, index: int) -> int:
        """ThreadConfig register (read-only helper for tests/debugging)."""
        return self.threads[thread].cfg[index]

    def gpr_read(self, thread: int, index: int) -> int:
        return self.threads[thread].gpr[index]

    def gpr_write(self, thread: int, index: int, value: int) -> None:
        self.threads[thread].gpr[index] = value & 0xFFFFFFFF

    # ------------------------------------------------------------------------------------------------ config unit
    def check_state_bank(self, t: int) -> None:
        if self.threads[t].cfg[0] & 1:
            raise self.unimpl("config state bank 1 (CFG_STATE_ID_StateID=1)")

    def SETC16(self, t, f):
        reg = f["setc16_reg"]
        if reg >= THREAD_CFG_WORDS:
            raise self.undefined(f"SETC16 register {reg} out of range (ThreadConfig has {THREAD_CFG_WORDS})")
        self.threads[t].cfg[reg] = f["setc16_value"]

    def WRCFG(self, t, f):
        self.check_state_bank(t)
        idx, g = f["cfg_reg"], f["gpr_address"]
        gpr = self.threads[t].gpr
        if f["wr128b"]:
            base = idx & ~3
            if base + 4 > CFG_WORDS:
                raise self.undefined(f"WRCFG 128-bit to config index {idx} out of range")
            self.cfg[base:base + 4] = gpr[g & ~3:(g & ~3) + 4]
        else:
            if idx >= CFG_WORDS:
                raise self.undefined(f"WRCFG to config index {idx} out of range")
            self.cfg[idx] = gpr[g]

    def RDCFG(self, t, f):
        self.check_state_bank(t)
        idx = f["cfg_reg"]
        if idx >= CFG_WORDS:
            raise self.undefined(f"RDCFG from config index {idx} out of range")
        self.threads[t].gpr[f["gpr_address"]] = self.cfg[idx]

    def _rmwcib(self, t, f, byte):
        self.check_state_bank(t)
        idx = f["cfg_reg_addr"]
        if idx >= CFG_WORDS:
            raise self.undefined(f"RMWCIB to config index {idx} out of range")
        old = self.cfg[idx]
        ob = (old >> (8 * byte)) & 0xFF
        nb = (f["data"] & f["mask"]) | (ob & ~f["mask"] & 0xFF)
        self.cfg[idx] = (old & ~(0xFF << (8 * byte))) | (nb << (8 * byte))

    def RMWCIB0(self, t, f):
        self._rmwcib(t, f, 0)

    def RMWCIB1(self, t, f):
        self._rmwcib(t, f, 1)

    def RMWCIB2(self, t, f):
        self._rmwcib(t, f, 2)

    def RMWCIB3(self, t, f):
        self._rmwcib(t, f, 3)

    # ------------------------------------------------------------------------------------------------ ThCon: GPRs
    def SETDMAREG(self, t, f):
        if f["set_signals_mode"]:
            raise self.unimpl("SETDMAREG special (set_signals_mode=1) form")
        r = f["reg_index_16b"]
        gpr = self.threads[t].gpr
        g, hi = r >> 1, r & 1
        if hi:
            gpr[g] = (gpr[g] & 0x0000FFFF) | (f["payload"] << 16)
        else:
            gpr[g] = (gpr[g] & 0xFFFF0000) | f["payload"]

    # ------------------------------------------------------------------------------------------------ ThCon: ADCs
    def _adc_sets(self, t: int, f) -> list[int]:
        m = f["cnt_set_mask"]
        return [s for s in (UNP0, UNP1, PACK) if m >> s & 1]

    def _adc_set_fields(self, t, f, dims):
        # SETADCXY / SETADCZW: bit_mask = {ch0 first dim, ch0 second dim, ch1 first dim, ch1 second dim}
        th = self.threads[t]
        vals = ((0, dims[0], f["ch0_x"]), (0, dims[1], f["ch0_y"]), (1, dims[0], f["ch1_x"]), (1, dims[1], f["ch1_y"]))
        for s in self._adc_sets(t, f):
            for bit, (ch, d, v) in enumerate(vals):
                if f["bit_mask"] >> bit & 1:
                    th.adc[s][ch][d] = th.adc_cr[s][ch][d] = v & ADC_MASK[d]

    def SETADCXY(self, t, f):
        self._adc_set_fields(t, f, (0, 1))

    def SETADCZW(self, t, f):
        self._adc_set_fields(t, f, (2, 3))

    def SETADCXX(self, t, f):
        th = self.threads[t]
        for s in self._adc_sets(t, f):
            th.adc[s][0][0] = th.adc_cr[s][0][0] = f["x_start"]
            th.adc[s][1][0] = th.adc_cr[s][1][0] = f["x_end2"]

    def SETADC(self, t, f):
        v = f["value"]
        if v > 0xFFFF:
            # bits 17:16 are a thread override on Wormhole; ttsim BH accepts only 16-bit values
            raise self.unimpl(f"SETADC value 0x{v:X} > 0xFFFF (thread override)")
        th = self.threads[t]
        d, ch = f["dimension_index"], f["channel_index"]
        for s in self._adc_sets(t, f):
            th.adc[s][ch][d] = th.adc_cr[s][ch][d] = v & ADC_MASK[d]

    def _adc_inc(self, t, f, dims):
        th = self.threads[t]
        incs = ((0, dims[0], f["ch0_x"]), (0, dims[1], f["ch0_y"]), (1, dims[0], f["ch1_x"]), (1, dims[1], f["ch1_y"]))
        for s in self._adc_sets(t, f):
            for ch, d, v in incs:
                th.adc[s][ch][d] = (th.adc[s][ch][d] + v) & ADC_MASK[d]

    def INCADCXY(self, t, f):
        self._adc_inc(t, f, (0, 1))

    def INCADCZW(self, t, f):
        self._adc_inc(t, f, (2, 3))

    def _adc_addrcr(self, t, f, dims):
        th = self.threads[t]
        incs = ((0, dims[0], f["ch0_x"]), (0, dims[1], f["ch0_y"]), (1, dims[0], f["ch1_x"]), (1, dims[1], f["ch1_y"]))
        for s in self._adc_sets(t, f):
            for bit, (ch, d, v) in enumerate(incs):
                if f["bit_mask"] >> bit & 1:
                    th.adc_cr[s][ch][d] = (th.adc_cr[s][ch][d] + v) & ADC_MASK[d]
                    th.adc[s][ch][d] = th.adc_cr[s][ch][d]

    def ADDRCRXY(self, t, f):
        self._adc_addrcr(t, f, (0, 1))

    def ADDRCRZW(self, t, f):
        self._adc_addrcr(t, f, (2, 3))
