"""Unpackers (UNPACR, UNPACR_NOP) and the packer (PACR) of the Tensix model, exactly the paths verified on ttsim in
unpack-sfpu-pack.md sections 3, 6 and 8 (plus unpacker 1 -> SrcB from fpu-path.md section 5):

* unpacker 0: FP32 L1 -> Dst32b (bit exact), BF16 L1 -> SrcA, FP32 L1 -> SrcA as TF32 / BF16 (truncation);
* unpacker 1: BF16 L1 -> SrcB (and the FP32 -> TF32/BF16 truncations); UNPACR_NOP hands over a zeroed bank;
* packer: Dst32b -> L1 FP32 (identity) and FP32 -> BF16 (early conversion, round half away from zero).

Anything else raises EmuUnimplemented naming the format or field. Mixed into `tensix.Tensix`.
"""
from __future__ import annotations

import numpy as np

from runtime.emu.tensix_fpu import DST32_ROWS, SRC_ROWS

_FMT_NAMES = {0: "FP32", 1: "FP16", 2: "BFP8a", 3: "BFP4a", 4: "TF32", 5: "BF16", 6: "BFP8", 7: "BFP4", 8: "INT32",
              9: "UINT16", 10: "FP8", 11: "BFP2a", 14: "INT8", 15: "BFP2"}
_FMT_BYTES = {0: 4, 4: 4, 5: 2, 8: 4, 1: 2, 9: 2, 14: 1, 10: 1}

UNP0, UNP1, PACK = 0, 1, 2


def _fmt(code: int) -> str:
    return f"{code} ({_FMT_NAMES.get(code, '?')})"


def fp32_to_bf16_packer(x: np.ndarray) -> np.ndarray:
    """The packer's early FP32 -> BF16 conversion (Read_32b_data=1, Dstacc=In=BF16): NaN -> Inf of the same sign,
    round half away from zero on the magnitude, exponent-0 results (denormals, zeros of either sign) -> +0."""
    x = x.astype(np.uint32)
    nan = (x & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    x = np.where(nan, (x & np.uint32(0x80000000)) | np.uint32(0x7F800000), x)
    r = ((x.astype(np.uint64) + 0x8000) >> 16).astype(np.uint32)
    r = np.where((r & 0x7FFF) < 0x80, np.uint32(0), r)
    return r.astype(np.uint16)


class UnpackPackMixin:
    def _init_packer(self):
        self.packer_open = False     # a PACR stream is in progress (no `last` yet): continue at packer_addr
        self.packer_addr = 0

    # ------------------------------------------------------------------------------------------------ helpers
    def _l1_read(self, addr: int, nbytes: int) -> np.ndarray:
        if addr < 0 or addr + nbytes > self.l1.size:
            raise self.err(f"L1 read 0x{addr:X}..0x{addr + nbytes:X} out of bounds")
        return self.l1[addr:addr + nbytes]

    def _l1_write(self, addr: int, data: bytes | np.ndarray) -> None:
        data = np.frombuffer(data, np.uint8) if isinstance(data, bytes) else data.view(np.uint8).reshape(-1)
        if addr < 0 or addr + data.size > self.l1.size:
            raise self.err(f"L1 write 0x{addr:X}..0x{addr + data.size:X} out of bounds")
        self.l1[addr:addr + data.size] = data

    # ------------------------------------------------------------------------------------------------ UNPACR
    def UNPACR(self, t, f):
        sel = f["unpack_block_selection"]
        src = "SrcB" if sel else "SrcA"
        # An unpacker stalls while the Src bank it owns next is still valid (handed to the FPU); unpacker 0 checks
        # this even when it writes Dst (unpack-sfpu-pack.md 3.2).
        bank = self.srcb_unpack_bank if sel else self.srca_unpack_bank
        if (self.srcb_valid if sel else self.srca_valid)[bank]:
            return f"UNPACR: {src} bank {bank} still valid (owned by the FPU)"
        for name in ("ovrd_thread_id", "last"):
            if not f[name]:
                if self.strict:
                    raise self.err(f"UNPACR with {name}=0 (ttsim requires 1)")
                raise self.unimpl(f"UNPACR {name}=0")
        for name in ("search_cache_flush", "row_search", "auto_inc_context_id", "srcb_bcast", "zero_write2",
                     "addr_cnt_context_id", "cfg_context_id", "cfg_context_cnt_inc"):
            if f[name]:
                raise self.unimpl(f"UNPACR {name}={f[name]}")
        self._check_state_bank(t)
        th = self.threads[t]
        cfg = self.cfg
        context = (th.cfg[41] >> (8 if sel else 0)) & 0xF
        if context:
            raise self.unimpl(f"UNPACR config context {context} (UNPACK_MISC_CFG_CfgContextOffset_{sel})")
        desc0, desc1 = (cfg[112], cfg[113]) if sel else (cfg[64], cfg[65])
        reg2 = cfg[120] if sel else cfg[72]              # THCON_SECn_REG2
        zc = cfg[121] if sel else cfg[73]                # Disable_zero_compress_cntx*, Unpack_if_sel_cntx*
        if not zc & 1:
            raise self.unimpl(f"UNPACR of zero-compressed input (THCON_SEC{sel}_REG2_Disable_zero_compress_cntx0=0)")
        for bit, what in ((8, "Haloize_mode"), (9, "Tileize_mode"), (14, "Ovrd_data_format"),
                          (15, "Upsample_and_interleave")):
            if reg2 >> bit & 1:
                raise self.unimpl(f"UNPACR with THCON_SEC{sel}_REG2_{what}=1")
        if reg2 >> 12 & 3:
            raise self.unimpl(f"UNPACR with THCON_SEC{sel}_REG2_Upsample_rate={reg2 >> 12 & 3}")
        if not sel and reg2 >> 16 & 0xF:
            raise self.unimpl("UNPACR with THCON_SEC0_REG2_Shift_amount_cntx0 != 0 (column shift)")
        in_fmt, out_fmt = desc0 & 0xF, reg2 & 0xF
        to_dst = not sel and bool(zc >> 4 & 1)           # Unpack_if_sel_cntx0
        conv = self._unpack_conversion(in_fmt, out_fmt, to_dst, src)
        in_bytes = _FMT_BYTES[in_fmt]
        out_bytes = 4 if to_dst else _FMT_BYTES[out_fmt]

        x_dim = (cfg[86] & 0xFFFF) if not sel else desc0 >> 16   # Tile_x_dim_cntx0 overrides for unpacker 0
        y_dim = desc1 & 0xFF
        z_dim = (desc1 >> 16 & 0xFF) or 1
        if sel:
            ystride1, zstride1, wstride1 = cfg[58] >> 16, cfg[59] & 0xFFFF, cfg[59] >> 16
            base, offset = cfg[124], cfg[140] & 0xFFFF
        else:
            ystride1, zstride1, wstride1 = cfg[56] >> 16, cfg[57] & 0xFFFF, cfg[57] >> 16
            base, offset = cfg[76], cfg[92] & 0xFFFF
        (x0, y0, z0, w0), (x1, y1, z1, w1) = th.adc[sel]
        if x0 > x1:
            raise self.err(f"UNPACR with ADC ch0.X={x0} > ch1.X={x1} (datum count would be negative)")
        count = x1 - x0 + 1
        first = x0 + y0 * x_dim + z0 * x_dim * y_dim + w0 * x_dim * y_dim * z_dim
        l1_addr = (base + offset + 1) * 16 + first * in_bytes     # rows of 16 datums, contiguous (no tileize)

        dst_addr = (y1 * ystride1 + z1 * zstride1 + w1 * wstride1) // out_bytes
        skip = 0
        if not sel:
            ctx = cfg[84] & 0xFFFF                          # Dest_cntx0_address
            if to_dst or cfg[50] >> 8 & 1:                  # UNP0_ADD_DEST_ADDR_CNTR
                dst_addr += ctx
            else:
                dst_addr = ctx
            if dst_addr < 64:
                # hardware drops the first 4 rows of the computed address; ttsim refuses (pf03)
                if self.strict:
                    raise self.err(f"UNPACR unpacker 0 to address {dst_addr} < 64: missing the +64 "
                                   "(4-row) bias in THCON_SEC0_REG5_Dest_cntx0_address")
                skip = 64 - dst_addr
                dst_addr = 64
            dst_addr -= 64
        if dst_addr % 16:
            raise self.unimpl(f"UNPACR to a {'Dst' if to_dst else src} address {dst_addr} not on a row boundary")
        set_ovrd = th.cfg[5] >> 2 & 1                       # SRCA_SET_SetOvrdWithAddr
        if to_dst and set_ovrd:
            raise self.err("UNPACR to Dst with SRCA_SET_SetOvrdWithAddr=1 (Dst row would wrap; ttsim pf05)")
        if not to_dst and not set_ovrd:
            raise self.unimpl(f"UNPACR to {src} with SRCA_SET_SetOvrdWithAddr=0 (set it with SETC16 5, 4)")
        if not to_dst and th.cfg[5] & 3:
            raise self.unimpl(f"UNPACR with SRCA_SET_Base={th.cfg[5] & 3}")

        if not to_dst and not sel and count > 16:
            # Wide SrcA unpacks write in bursts of rows; a burst straddling a 16-row set drops writes on hardware
            # (ttsim refuses). BH default throttle: bursts of 128 bytes = 4 rows (16-bit) / 2 rows (32-bit input).
            if cfg[70] >> 3 & 1:
                raise self.unimpl("UNPACR to SrcA with THCON_SEC0_REG1_ovrd_default_throttle_mode=1")
            burst = max(1, min(8, 128 // (2 * 8 * in_bytes)))
            if (dst_addr // 16) % burst:
                raise self.err(f"UNPACR of {count} datums to SrcA starting at row {dst_addr // 16}, not a multiple "
                               f"of the {burst}-row burst (writes would be dropped)")
        raw = self._l1_read(l1_addr, count * in_bytes)
        vals = conv(raw)
        if skip:
            vals = vals[skip:]
        n = vals.size
        if to_dst:
            r0, r1 = dst_addr // 16, (dst_addr + n + 15) // 16
            if r1 > DST32_ROWS:
                raise self.err(f"UNPACR writes Dst32b rows {r0}..{r1 - 1} beyond row 511")
            self.dst.rows32.reshape(-1)[dst_addr:dst_addr + n] = vals
            self.dst.written[r0:r1] = True
        else:
            idx = dst_addr + np.arange(n)
            rows, cols = idx // 16, idx % 16
            if sel:
                if rows.size and rows[-1] >= SRC_ROWS:
                    raise self.err(f"UNPACR writes SrcB row {int(rows[-1])} beyond row 63")
                self.srcb[bank, rows, cols] = vals
            else:
                self.srca[bank, rows & (SRC_ROWS - 1), cols] = vals    # BH wraps SrcA rows (ttsim)
        am = f["addr_mode"]
        adc = th.adc[sel]
        adc[0][2] = (adc[0][2] + (am & 3)) & 0xFF
        adc[0][1] = (adc[0][1] + (am >> 2 & 3)) & 0x1FFF
        adc[1][2] = (adc[1][2] + (am >> 4 & 3)) & 0xFF
        adc[1][1] = (adc[1][1] + (am >> 6 & 3)) & 0x1FFF
        if f["set_dat_valid"]:
            self._hand_to_fpu(sel, bank, out_fmt)

    def _hand_to_fpu(self, sel: int, bank: int, fmt: int) -> None:
        if sel:
            self.srcb_valid[bank] = True
            self.srcb_format[bank] = fmt
            self.srcb_unpack_bank ^= 1
        else:
            self.srca_valid[bank] = True
            self.srca_format[bank] = fmt
            self.srca_unpack_bank ^= 1

    def _unpack_conversion(self, in_fmt: int, out_fmt: int, to_dst: bool, src: str):
        """Return raw L1 bytes -> np.uint32 datums (Dst32b value, or fp32-layout 19-bit Src value)."""
        if to_dst:
            if in_fmt == 0 and out_fmt == 0:
                return lambda raw: raw.view("<u4").astype(np.uint32)       # bit exact, NaN payloads kept
            raise self.unimpl(f"UNPACR to Dst with in format {_fmt(in_fmt)}, out format {_fmt(out_fmt)} "
                              "(only FP32 -> Dst32b)")
        if in_fmt == 0:
            if out_fmt == 0:
                raise self.err(f"UNPACR FP32 into {src} with Out_data_format FP32 (undefined; ttsim fatal)")
            if out_fmt == 4:
                return lambda raw: raw.view("<u4") & np.uint32(0xFFFFE000)  # TF32: truncate 13 bits
            if out_fmt == 5:
                def fp32_to_bf16_src(raw):
                    v = raw.view("<u4").astype(np.uint32)
                    v = np.where((v >> 23 & 0xFF) == 0, v & np.uint32(0x80000000), v)  # denormals -> signed 0
                    return v & np.uint32(0xFFFF0000)
                return fp32_to_bf16_src
        elif in_fmt == 5 and out_fmt == 5:
            return lambda raw: raw.view("<u2").astype(np.uint32) << 16
        elif in_fmt != out_fmt and in_fmt in _FMT_NAMES:
            raise self.err(f"UNPACR in format {_fmt(in_fmt)} mismatches out format {_fmt(out_fmt)} "
                           "(only FP32 input may change format)")
        raise self.unimpl(f"UNPACR to {src} with in format {_fmt(in_fmt)}, out format {_fmt(out_fmt)}")

    # ------------------------------------------------------------------------------------------------ UNPACR_NOP
    def UNPACR_NOP(self, t, f):
        sel = f["unpacker_select"]
        if f["unpack_pop"] != 1:
            raise self.unimpl(f"UNPACR_NOP unpack_pop={f['unpack_pop']} (only 1: stall, clear, set dvalid)")
        for name in ("bank_clr_ctrl", "clr_to1_fmt_ctrl", "msg_clr_cnt", "stream_id"):
            if f[name]:
                raise self.unimpl(f"UNPACR_NOP {name}={f[name]}")
        if f["src_clr_val_ctrl"] > (0 if sel else 1):
            raise self.unimpl(f"UNPACR_NOP src_clr_val_ctrl={f['src_clr_val_ctrl']} on unpacker {sel}")
        src = "SrcB" if sel else "SrcA"
        valid = self.srcb_valid if sel else self.srca_valid
        unpack_bank = self.srcb_unpack_bank if sel else self.srca_unpack_bank
        matrix_bank = self.srcb_matrix_bank if sel else self.srca_matrix_bank
        # ttsim: waits on the FPU's bank unless stall_clr_cntrl selects the unpacker's own bank
        wait_bank = unpack_bank if f["stall_clr_cntrl"] else matrix_bank
        if valid[wait_bank]:
            return f"UNPACR_NOP: {src} bank {wait_bank} still valid (owned by the FPU)"
        if f["set_dvalid"] and valid[unpack_bank]:
            return f"UNPACR_NOP: {src} bank {unpack_bank} still valid (owned by the FPU)"
        regs = self.srcb if sel else self.srca
        # src_clr_val_ctrl=1 fills SrcA with "negative infinity" as the FPU sees it
        regs[unpack_bank] = np.uint32(0xFFFFE000) if f["src_clr_val_ctrl"] else np.uint32(0)
        if f["set_dvalid"]:
            self._hand_to_fpu(sel, unpack_bank, (self.cfg[120] if sel else self.cfg[72]) & 0xF)

    # ------------------------------------------------------------------------------------------------ PACR
    def PACR(self, t, f):
        for name in ("flush", "ctxt_ctrl", "ovrd_thread_id", "zero_write", "addr_cnt_context", "row_pad_zero",
                     "cfg_context", "concat", "dst_access_mode"):
            if f[name]:
                raise self.unimpl(f"PACR {name}={f[name]}")
        sel = f["read_intf_sel"]
        if sel not in (0, 1, 3, 5, 10):
            raise self.unimpl(f"PACR read_intf_sel={sel}")
        self._check_state_bank(t)
        cfg = self.cfg
        th = self.threads[t]
        c68, c70, c71 = cfg[68], cfg[70], cfg[71]
        if c68:
            raise self.unimpl("packer THCON_SEC0_REG1_Row_start_section_size/Exp_section_size != 0")
        for bit, what in ((1, "Add_l1_dest_addr_offset"), (12, "Dis_shared_exp_assembler"),
                          (13, "Auto_set_last_pacr_intf_sel"), (14, "Enable_out_fifo"), (15, "Sub_l1_tile_header_size"),
                          (16, "Source_interface_selection"), (22, "Add_tile_header_size")):
            if c70 >> bit & 1:
                raise self.unimpl(f"packer THCON_SEC0_REG1_{what}=1")
        if c70 >> 17 & 0xF:
            raise self.unimpl("packer THCON_SEC0_REG1_pack_start_intf_pos != 0")
        if c71 & 0x7FFFF or c71 >> 20 & 1:
            raise self.unimpl("packer downsampling / Pack_L1_Acc / Exp_threshold_en (cfg 71)")
        if cfg[2] >> 2 & 0xF:
            raise self.unimpl("packer ReLU (STACC_RELU_ApplyRelu != 0)")
        if cfg[28] >> 23 & 1:
            raise self.unimpl("PACK_COUNTERS_SEC0_pack_yz_transposed=1")
        if cfg[180] >> 12 & 0x3F:
            raise self.unimpl("DEST_TARGET_REG_CFG_PACK_SEC0_ZOffset != 0")
        if cfg[20] or cfg[24] >> 16 & 0x1FF or cfg[19] >> 8 & 1:
            raise self.unimpl("packer edge-mask row sets / edge mode (cfg 19, 20, 24[24:16])")
        dstacc, in_fmt, out_fmt = cfg[1] >> 25 & 0xF, c70 >> 8 & 0xF, c70 >> 4 & 0xF
        rd = cfg[18]
        if dstacc != in_fmt:
            raise self.err(f"packer In_data_format {_fmt(in_fmt)} != ALU_FORMAT_SPEC_REG2_Dstacc {_fmt(dstacc)} "
                           "(undefined; ttsim pf21)")
        mode = (rd & 1) << 8 | in_fmt << 4 | out_fmt
        if mode not in (0x100, 0x155):
            raise self.unimpl(f"packer conversion Read_32b_data={rd & 1} In={_fmt(in_fmt)} Out={_fmt(out_fmt)} "
                              f"(pack_fmt_conv_mode=0x{mode:X}; only FP32->FP32 and FP32->BF16 from a 32-bit Dst)")
        if rd >> 2 & 1:
            raise self.unimpl("packer FP32->BF16 truncation (PCK_DEST_RD_CTRL_Read_int8 = Read_raw = 1)")
        if rd >> 3 & 1:
            raise self.unimpl("packer PCK_DEST_RD_CTRL_Round_10b_mant=1")
        esz = 4 if in_fmt == 0 else 2
        out_bytes = 4 if out_fmt == 0 else 2

        (x0, y0, z0, w0), (x1, y1, z1, w1) = th.adc[PACK]
        if x0:
            raise self.unimpl(f"PACR with packer ADC ch0.X={x0} (must be 0)")
        per = x1 - x0 + 1
        if per != 16 and not (per == 8 and sel == 1):
            if self.strict and per > 16:
                raise self.err(f"PACR X range {x0}..{x1}: the packer reads at most 16 datums per interface "
                               "(ttsim pf22: use SETADCXX x_end=15)")
            raise self.unimpl(f"PACR with {per} datums per read interface (16, or 8 with read_intf_sel=1)")
        ys, zs, ws = cfg[12] >> 16, cfg[13] & 0xFFFF, cfg[13] >> 16
        src_addr = (y0 * ys + z0 * zs + w0 * ws) // esz
        if src_addr % 16:
            raise self.unimpl(f"PACR from Dst datum address {src_addr} not on a row boundary")
        row0 = src_addr // 16 + (cfg[180] & 0xFFF)
        offsets = {0: (0, 1, 2, 3), 1: (0,), 3: (0, 1), 5: (0, 2), 10: (1, 3)}[sel]
        rows = [row0 + o for o in offsets]
        if rows[-1] >= DST32_ROWS:
            raise self.err(f"PACR reads Dst32b row {rows[-1]} beyond row 511")
        vals = self.dst.rows32[rows, :per].reshape(-1)
        mask = cfg[24] & 0xFFFF
        if mask != 0xFFFF:
            keep = np.array([(mask >> c) & 1 for c in range(per)] * len(rows), bool)
            vals = np.where(keep, vals, np.uint32(0))
        if mode == 0x155:
            out = fp32_to_bf16_packer(vals).astype("<u2")
        else:
            out = vals.astype("<u4")
        if not self.packer_open:
            if z1 or w1:
                raise self.unimpl(f"PACR with packer ADC ch1.Z={z1} / ch1.W={w1} (L1 side)")
            self.packer_addr = (cfg[69] + 1) * 16 + 16 * ((y1 * (cfg[14] >> 16)) >> 4)
        addr = self.packer_addr
        self._l1_write(addr, out)
        addr += out.size * out_bytes
        if f["last"]:
            pad = -addr % 16      # `last` zero-pads the stream to the next 16 bytes
            if pad:
                self._l1_write(addr, bytes(pad))
            self.packer_open = False
        else:
            self.packer_open = True
        self.packer_addr = addr
        self._pack_addr_mod(th, f["addr_mode"])

    def _pack_addr_mod(self, th, mode: int) -> None:
        """ADDR_MOD_PACK_SEC<mode> (thread cfg 37+mode) applied to the packer ADC Y/Z counters after a PACR."""
        m = th.cfg[37 + mode]
        if m >> 10 & 1:
            raise self.unimpl(f"ADDR_MOD_PACK_SEC{mode}_YdstCR=1")
        adc, cr = th.adc[PACK], th.adc_cr[PACK]
        if m >> 5 & 1:                        # YsrcClear
            adc[0][1] = cr[0][1] = 0
        elif m >> 4 & 1:                      # YsrcCR
            cr[0][1] = (cr[0][1] + (m & 0xF)) & 0x1FFF
            adc[0][1] = cr[0][1]
        else:
            adc[0][1] = (adc[0][1] + (m & 0xF)) & 0x1FFF
        if m >> 11 & 1:                       # YdstClear
            adc[1][1] = cr[1][1] = 0
        else:
            adc[1][1] = (adc[1][1] + (m >> 6 & 0xF)) & 0x1FFF
        if m >> 13 & 1:                       # ZsrcClear
            adc[0][2] = cr[0][2] = 0
        else:
            adc[0][2] = (adc[0][2] + (m >> 12 & 1)) & 0xFF
        if m >> 15 & 1:                       # ZdstClear
            adc[1][2] = cr[1][2] = 0
        else:
            adc[1][2] = (adc[1][2] + (m >> 14 & 1)) & 0xFF
