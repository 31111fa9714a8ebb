"""Unpackers (UNPACR, UNPACR_NOP) and the packer (PACR) of the Tensix model. Mixed into `tensix.Tensix`.

Format conversions are the pure functions of `formats.py`; this module does addressing, configuration decoding and
the per-datum pipeline. Facts: docs/sfpu_path.md §3, 6, 8; WH `UNPACR_Regular.md`, `Unpackers/*`, `PACR.md`,
`Packers/*` (FormatConversion, ReLU, EdgeMasking); Blackhole specifics the docs leave open follow ttsim, the oracle.

Unpackers: every documented L1 format into SrcA/SrcB (FP32 -> TF32/BF16/FP16, BF16, FP16, BFP8/4/2 with a separate
exponent section or Force_shared_exp, FP8 (E5M2, or E4M3 with Unp_LF8_4b_exp), INT8/UINT8, INT16), and into Dst32b
FP32 / TF32 (= FP32 into Dst) / INT32; contiguous rows or Tileize_mode (rows of 32 datums, 16 for 8-bit formats,
RowStride from Shift_amount_cntx0..2). 16-bit Dst targets raise EmuUnimplemented.
Packer: every (Read_32b_data=1, Dstacc=In, Out) conversion ttsim implements (FP32, FP16 via TF32, FP8, BF16,
BFP8/4/2, E8M6, INT32, INT16, INT8/UINT8), ReLU, edge masks with row-set mapping, Pack_L1_Acc (FP32/FP16/BF16),
the BFP exponent section (Exp_section_size); from a 16-bit Dst (Read_32b_data=0) the FP16/E5M6/BF16/E8M6/INT16
modes ttsim implements (not yet cross-checked against ttsim: no emulator path writes Dst16b the way ttsim does).
"""
from __future__ import annotations

import numpy as np

from tt_backend.chip.numerics import formats as F
from tt_backend.runtime.emu.accel import tile_native
from tt_backend.runtime.emu.tensix_fpu import DST32_ROWS, SRC_ROWS

_FMT_NAMES = F.NAMES
_BFP_BITS = {F.BFP8: 8, F.BFP4: 4, F.BFP2: 2}
# PACR's checks and derived values are cached per (word, the config words they read): a third of PACR's time in an
# elementwise kernel, every PACR of a tile re-checking the same configuration. Tests turn it off (the reference path).
PACK_SETUP_CACHE = True
# An unpack without Tileize_mode reads its rows back to back: whole-byte datums come from one slice of L1 instead of a
# gather by bit address. Tests turn it off (the reference path).
UNPACK_CONTIGUOUS = True
# UNPACR's checks and derived values are cached per (word, the config words they read), as PACR's: a matmul's
# unpackers re-checked the same configuration for every face (a sixth of a bf16 matmul's host time). Tests turn it off.
UNPACK_SETUP_CACHE = True
# A PACR whose conversion is the identity (a 32-bit Dst packed as FP32 or INT32, no ReLU, no L1 accumulation) that keeps
# every datum copies the Dst rows to L1 as they are, without the early/late conversion steps. Tests turn it off.
PACK_PLAIN_COPY = True
_WHOLE_BYTE = {8: np.uint8, 16: np.dtype("<u2"), 32: np.dtype("<u4")}
# PACR read_intf_sel -> the Dst rows its interfaces read, as (first, count, step) from the start row
_PACR_ROWS = {0: (0, 4, 1), 1: (0, 1, 1), 3: (0, 2, 1), 5: (0, 2, 2), 10: (1, 2, 2)}

UNP0, UNP1, PACK = 0, 1, 2

# (Read_32b_data, Dstacc = In_data_format, Out_data_format) combinations the packer model implements: exactly the
# modes ttsim accepts (tensix_pacr pack_fmt_conv_mode), for a 16-bit and a 32-bit Dst.
_PACK_MODES_16 = {0x10, 0x11, 0x15, 0x1A, 0x26, 0x50, 0x55, 0x56, 0x57, 0x5F, 0x60, 0x65, 0x66, 0x67, 0x99}
_PACK_MODES_32 = {0x100, 0x101, 0x106, 0x107, 0x10F, 0x111, 0x11A, 0x155, 0x166, 0x167, 0x188, 0x199, 0x1EE}


def _fmt(code: int) -> str:
    return f"{code} ({_FMT_NAMES.get(code, '?')})"


# The packer's output stream state, one list the Tensix binds once (_packer) and PACR updates in place: the C PACR
# (tile_handlers.c) reads and writes its items without an attribute look-up or write on the Tensix (four of them a
# PACR had been ~40 % of its cost in C). The properties below are its names.
_OPEN, _ADDR, _EXP_ADDR, _TPG = 0, 1, 2, 3      # (the tile position generator's X, Y, Z at _TPG.._TPG + 2)


def _packer_item(i: int, doc: str) -> property:
    def get(self):
        return self._packer[i]

    def set(self, v):
        self._packer[i] = v
    return property(get, set, doc=doc)


def _get_tpg(self) -> tuple[int, int, int]:
    return tuple(self._packer[_TPG:_TPG + 3])


def _set_tpg(self, v) -> None:
    x, y, z = v
    self._packer[_TPG:_TPG + 3] = x, y, z


class UnpackPackMixin:
    packer_open = _packer_item(_OPEN, "a PACR stream is in progress (no `last` yet): continue at packer_addr")
    packer_addr = _packer_item(_ADDR, "the L1 address the stream's next datums go to")
    packer_exp_addr = _packer_item(_EXP_ADDR, "BFP output: where the next shared exponent byte goes")
    packer_tpg = property(_get_tpg, _set_tpg, doc="edge-mask tile position generator (X, Y, Z), reset at each stream "
                                                  "start")

    def _init_packer(self):
        self._packer = [False, 0, 0, 0, 0, 0]    # open, addr, exp_addr, tpg X, Y, Z (the properties above)
        self._pack_setups: dict[tuple, tuple] = {}    # PACR's cache key -> _pack_setup()
        self._edge_keeps: dict[tuple, tuple] = {}     # _edge_keep's key -> (datums kept, position after, all kept)
        self._unpack_setups: dict[tuple, tuple] = {}  # UNPACR's cache key -> _unpack_setup()

    # ------------------------------------------------------------------------------------------------ helpers
    def _l1_read(self, addr: int, nbytes: int) -> np.ndarray:
        if addr < 0 or addr + nbytes > self.l1.size:
            raise self.undefined(f"L1 read 0x{addr:X}..0x{addr + nbytes:X} out of bounds")
        return self.l1[addr:addr + nbytes]

    def _l1_write(self, addr: int, data: bytes | np.ndarray) -> None:
        data = np.frombuffer(data, np.uint8) if isinstance(data, bytes) else data.view(np.uint8).reshape(-1)
        if addr < 0 or addr + data.size > self.l1.size:
            raise self.undefined(f"L1 write 0x{addr:X}..0x{addr + data.size:X} out of bounds")
        self.l1[addr:addr + data.size] = data

    # ------------------------------------------------------------------------------------------------ UNPACR
    def UNPACR(self, t, f):
        sel = f["unpack_block_selection"]
        # An unpacker stalls while the Src bank it owns next is still valid (handed to the FPU); unpacker 0 checks
        # this even when it writes Dst (docs/sfpu_path.md §3.2).
        bank = self.srcb_unpack_bank if sel else self.srca_unpack_bank
        if (self.srcb_valid if sel else self.srca_valid)[bank]:
            return f"UNPACR: {'SrcB' if sel else 'SrcA'} bank {bank} still valid (owned by the FPU)"
        th = self.threads[t]
        cfg = self.cfg
        tc = th.cfg
        key = (id(f), tc[0], tc[5], tc[41], cfg[1], cfg[50], cfg[56], cfg[57], cfg[58], cfg[59], cfg[62], cfg[64],
               cfg[65], cfg[70], cfg[71], cfg[72], cfg[73], cfg[86], cfg[112], cfg[113], cfg[119], cfg[120], cfg[121])
        setup = self._unpack_setups.get(key) if UNPACK_SETUP_CACHE else None
        if setup is None:
            setup = self._unpack_setup(t, f)
            if len(self._unpack_setups) >= 256:
                self._unpack_setups.clear()
            self._unpack_setups[key] = setup
        (conv, in_bits, out_align, x_dim, y_dim, z_dim, ystride1, zstride1, wstride1, bfp_bits, exp_section,
         forced_exp, row_width, row_stride, tileize, to_dst, add_dest_cntr, burst, out_fmt, native_kind) = setup
        (x0, y0, z0, w0), (x1, y1, z1, w1) = th.adc[sel]
        if x0 > x1:
            raise self.undefined(f"UNPACR with ADC ch0.X={x0} > ch1.X={x1} (datum count would be negative)")
        if w1:
            raise self.unimpl(f"UNPACR with ADC ch1.W={w1}")
        count = x1 - x0 + 1
        first = x0 + y0 * x_dim + z0 * x_dim * y_dim + w0 * x_dim * y_dim * z_dim
        base, offset = (cfg[124], cfg[140] & 0xFFFF) if sel else (cfg[76], cfg[92] & 0xFFFF)
        exp_base = (base + offset + 1) * 16
        data_base = exp_base + exp_section
        start_bits = data_base * 8 + first * in_bits
        if tileize and start_bits % 128:
            raise self.undefined(f"UNPACR Tileize_mode with L1 start 0x{start_bits // 8:X} not 16-byte aligned")

        dst_addr = (y1 * ystride1 + z1 * zstride1 + w1 * wstride1) // out_align
        skip = 0
        if not sel:
            ctx = cfg[84] & 0xFFFF                          # Dest_cntx0_address
            dst_addr = dst_addr + ctx if add_dest_cntr else ctx
            if dst_addr < 64:
                # hardware drops the first 4 rows of the computed address; ttsim refuses (pf03)
                if self.strict:
                    raise self.undefined(f"UNPACR unpacker 0 to address {dst_addr} < 64: missing the +64 "
                                         "(4-row) bias in THCON_SEC0_REG5_Dest_cntx0_address")
                skip = 64 - dst_addr
                dst_addr = 64
            dst_addr -= 64
        if dst_addr % 16:
            raise self.unimpl(f"UNPACR to a {'Dst' if to_dst else 'SrcB' if sel else 'SrcA'} address {dst_addr} not "
                              "on a row boundary")
        if burst and count > 16 and dst_addr // 16 % burst:
            raise self.undefined(f"UNPACR to SrcA starting at row {dst_addr // 16}, not a multiple of the {burst}-row "
                                 "burst (writes would be dropped)")
        c = tile_native.module() if native_kind is not None and not (tileize or skip or start_bits & 7) else None
        if c is not None and 0 <= start_bits and start_bits + count * in_bits <= self.l1.size * 8:
            vals, n = None, count                       # moved by tile_native.unpack below
        else:                                           # (an L1 range out of bounds: this path raises)
            c = None
            if UNPACK_CONTIGUOUS and not tileize and not bfp_bits and in_bits in _WHOLE_BYTE and not start_bits & 7:
                raw = self._l1_datums(start_bits, count, in_bits)     # rows back to back: one slice of L1
            else:
                i = np.arange(count, dtype=np.int64)
                bit_addr = start_bits + in_bits * (i % row_width) + row_stride * 8 * (i // row_width)
                raw = self._l1_gather(bit_addr, in_bits)
            exps = None
            if bfp_bits:
                if forced_exp is not None:
                    exps = np.full(count, forced_exp, np.uint32)
                else:
                    exps = self._l1_gather((exp_base + (first + np.arange(count, dtype=np.int64)) // 16) * 8, 8)
            vals = conv(raw, exps)
            if skip:
                vals = vals[skip:]
            n = vals.size
        if to_dst:
            r0, r1 = dst_addr // 16, (dst_addr + n + 15) // 16
            if r1 > DST32_ROWS:
                raise self.undefined(f"UNPACR writes Dst32b rows {r0}..{r1 - 1} beyond row 511")
            target = self.dst.rows32
            self.dst.written[r0:r1] = True
        elif sel:
            if dst_addr + n > SRC_ROWS * 16:
                raise self.undefined(f"UNPACR writes SrcB row {(dst_addr + n - 1) // 16} beyond row 63")
            target = self.srcb[bank]
        else:
            target = self.srca[bank]
        if dst_addr + n <= target.size:
            if c is not None:
                self._native_unpack(c, start_bits, n, native_kind, target, dst_addr)
            else:
                target.reshape(-1)[dst_addr:dst_addr + n] = vals
        else:                                           # BH wraps SrcA rows (ttsim)
            if c is not None:
                vals = np.empty(n, np.uint32)
                self._native_unpack(c, start_bits, n, native_kind, vals, 0)
            target.reshape(-1)[np.arange(dst_addr, dst_addr + n) % (SRC_ROWS * 16)] = vals
        am = f["addr_mode"]
        adc = th.adc[sel]
        adc[0][2] = (adc[0][2] + (am & 3)) & 0xFF
        adc[0][1] = (adc[0][1] + (am >> 2 & 3)) & 0x1FFF
        adc[1][2] = (adc[1][2] + (am >> 4 & 3)) & 0xFF
        adc[1][1] = (adc[1][1] + (am >> 6 & 3)) & 0x1FFF
        if f["set_dat_valid"]:
            self._hand_to_fpu(sel, bank, out_fmt)

    def _unpack_setup(self, t, f) -> tuple:
        """UNPACR's checks and derived values that depend only on the word's fields and the config words UNPACR's
        cache key holds (check_state_bank among them): the same errors, the same values."""
        sel = f["unpack_block_selection"]
        src = "SrcB" if sel else "SrcA"
        for name in ("ovrd_thread_id", "last"):
            if not f[name]:
                if self.strict:
                    raise self.unspecified(f"UNPACR with {name}=0 (ttsim requires 1)")
                raise self.unimpl(f"UNPACR {name}=0")
        for name in ("search_cache_flush", "row_search", "auto_inc_context_id", "srcb_bcast", "zero_write2",
                     "addr_cnt_context_id", "cfg_context_id", "cfg_context_cnt_inc"):
            if f[name]:
                raise self.unimpl(f"UNPACR {name}={f[name]}")
        self.check_state_bank(t)
        th = self.threads[t]
        cfg = self.cfg
        context = (th.cfg[41] >> (8 if sel else 0)) & 0xF
        if context:
            raise self.unimpl(f"UNPACR config context {context} (UNPACK_MISC_CFG_CfgContextOffset_{sel})")
        desc0, desc1 = (cfg[112], cfg[113]) if sel else (cfg[64], cfg[65])
        reg2 = cfg[120] if sel else cfg[72]              # THCON_SECn_REG2
        zc = cfg[121] if sel else cfg[73]    # Disable_zero_compress_cntx*, Unpack_if_sel_cntx*, Force_shared_exp
        if not zc & 1:
            raise self.unimpl(f"UNPACR of zero-compressed input (THCON_SEC{sel}_REG2_Disable_zero_compress_cntx0=0)")
        for bit, what in ((8, "Haloize_mode"), (14, "Ovrd_data_format"), (15, "Upsample_and_interleave")):
            if reg2 >> bit & 1:
                raise self.unimpl(f"UNPACR with THCON_SEC{sel}_REG2_{what}=1")
        if reg2 >> 12 & 3:
            raise self.unimpl(f"UNPACR with THCON_SEC{sel}_REG2_Upsample_rate={reg2 >> 12 & 3}")
        tileize = bool(reg2 >> 9 & 1)
        if not sel and not tileize and reg2 >> 16 & 0xF:
            raise self.unimpl("UNPACR with THCON_SEC0_REG2_Shift_amount_cntx0 != 0 (column shift)")
        in_fmt, out_fmt = desc0 & 0xF, reg2 & 0xF
        if in_fmt not in _FMT_NAMES or out_fmt not in _FMT_NAMES:
            raise self.undefined(f"UNPACR with undefined format code in={in_fmt} out={out_fmt}")
        to_dst = not sel and bool(zc >> 4 & 1)           # Unpack_if_sel_cntx0
        if to_dst:                                       # names the unmodelled 16-bit Dst targets first
            self._unpack_conversion(in_fmt, out_fmt, to_dst, src, sel)
        if in_fmt == F.FP32:
            if out_fmt not in (F.FP32, F.FP16, F.TF32, F.BF16):
                raise self.undefined(f"UNPACR FP32 input with Out_data_format {_fmt(out_fmt)} (undefined: FP32 "
                                     "converts only to FP32/TF32/BF16/FP16)")
        elif in_fmt != out_fmt:
            raise self.undefined(f"UNPACR in format {_fmt(in_fmt)} mismatches out format {_fmt(out_fmt)} "
                                 "(only FP32 input may change format)")
        conv = self._unpack_conversion(in_fmt, out_fmt, to_dst, src, sel)
        in_bits, out_bits = F.element_bits(in_fmt), F.element_bits(out_fmt)
        out_align = 4 if to_dst else (out_bits + 7) // 8

        x_dim = (cfg[86] & 0xFFFF) if not sel else desc0 >> 16   # Tile_x_dim_cntx0 overrides for unpacker 0
        y_dim = desc1 & 0xFF
        z_dim = (desc1 >> 16 & 0xFF) or 1
        if sel:
            ystride1, zstride1, wstride1 = cfg[58] >> 16, cfg[59] & 0xFFFF, cfg[59] >> 16
        else:
            ystride1, zstride1, wstride1 = cfg[56] >> 16, cfg[57] & 0xFFFF, cfg[57] >> 16
        for what, v in (("Ystride", ystride1), ("Zstride", zstride1), ("Wstride", wstride1)):
            if v % out_align:
                raise self.unimpl(f"UNPACR UNP{sel}_ADDR_CTRL {what}={v} not a multiple of the {out_align}-byte "
                                  "output datum")
        bfp_bits = _BFP_BITS.get(in_fmt)
        force_exp = bool(zc >> 8 & 1)
        exp_section, forced_exp = 0, None
        if bfp_bits:
            if force_exp:
                forced_exp = cfg[62 if sel else 50] & 0xFF                 # UNPn_FORCED_SHARED_EXP
            else:
                if desc0 >> 5 & 1:
                    raise self.unimpl("UNPACR of BFP data without an exponent section (TileDescriptor "
                                      "NoBFPExpSection=1)")
                # the exponent section (one byte per 16 datums of the whole tile, padded to 16 bytes) precedes the data
                exp_section = F.bfp_exp_section_bytes(x_dim * y_dim * z_dim)
        # Blackhole reads rows of 32 datums (16 for 8-bit and narrower formats) [ttsim]; rows are contiguous unless
        # Tileize_mode gives a row stride in bytes (Shift_amount_cntx0..2 as bits [7:4], [11:8], [15:12]).
        row_width = 16 if in_bits <= 8 else 32
        if tileize:
            if sel:
                raise self.unimpl("UNPACR Tileize_mode on unpacker 1")
            if in_bits < 8:
                raise self.undefined(f"UNPACR Tileize_mode with {in_bits}-bit datums (undefined)")
            row_stride = ((reg2 >> 16 & 0xF) << 4) | ((reg2 >> 20 & 0xF) << 8) | ((reg2 >> 24 & 0xF) << 12)
        else:
            row_stride = in_bits * row_width // 8
        set_ovrd = th.cfg[5] >> 2 & 1                       # SRCA_SET_SetOvrdWithAddr
        if to_dst and set_ovrd:
            raise self.undefined("UNPACR to Dst with SRCA_SET_SetOvrdWithAddr=1 (Dst row would wrap; ttsim pf05)")
        if not to_dst and not set_ovrd:
            raise self.unimpl(f"UNPACR to {src} with SRCA_SET_SetOvrdWithAddr=0 (set it with SETC16 5, 4)")
        if not to_dst and th.cfg[5] & 3:
            raise self.unimpl(f"UNPACR with SRCA_SET_Base={th.cfg[5] & 3}")
        add_dest_cntr = to_dst or bool(cfg[50] >> 8 & 1)        # UNP0_ADD_DEST_ADDR_CNTR
        burst = 0 if to_dst or sel else self._srca_burst(in_bits, tileize, reg2 >> 4 & 3)
        native_kind = tile_native.UNPACK_KINDS.get((in_fmt, out_fmt, to_dst))      # (None: the Python path only)
        return (conv, in_bits, out_align, x_dim, y_dim, z_dim, ystride1, zstride1, wstride1, bfp_bits, exp_section,
                forced_exp, row_width, row_stride, tileize, to_dst, add_dest_cntr, burst, out_fmt, native_kind)

    def _srca_burst(self, in_bits: int, tileize: bool, throttle: int) -> int:
        """Rows per SrcA write burst: wide SrcA unpacks write in bursts of rows, and a burst straddling a 16-row set
        drops writes on hardware (ttsim refuses). Burst size from the L1 fetch speed (x1/x2/x4/x8 = 16 << mode bytes
        per cycle): BFP2 runs at x1, tileize at x4; on BH without ovrd_default_throttle_mode 8-bit formats run at
        x8, others at x4, and x4 with >= 16-bit datums moves 128 bytes [ttsim]."""
        if in_bits == 2:
            throttle = 0
        elif tileize:
            throttle = 2
        elif not self.cfg[70] >> 3 & 1:                  # THCON_SEC0_REG1_ovrd_default_throttle_mode
            throttle = 3 if in_bits == 8 else 2
        nbytes = 128 if throttle == 2 and in_bits >= 16 else 16 << throttle
        return max(1, min(8, nbytes // (2 * in_bits)))

    def _native_unpack(self, c, start_bits: int, n: int, kind: int, target: np.ndarray, offset: int) -> None:
        """tile_native.unpack of n datums from L1 byte start_bits / 8; the caller checked the L1 range, so a refusal
        (False: out of bounds) is an emulator fault, raised rather than leaving the target unwritten."""
        if not c.unpack(self.l1, start_bits >> 3, n, kind, target, offset):
            raise self.undefined(f"L1 read of {n} datums at 0x{start_bits >> 3:X} out of bounds")

    def _l1_datums(self, start_bits: int, count: int, bits: int) -> np.ndarray:
        """_l1_gather of `count` consecutive datums of 8, 16 or 32 bits from a byte-aligned bit address."""
        if count == 0:
            return np.zeros(0, np.uint32)
        lo, hi = start_bits, start_bits + count * bits
        if lo < 0 or hi > self.l1.size * 8:
            raise self.undefined(f"L1 read 0x{lo // 8:X}..0x{(hi + 7) // 8:X} out of bounds")
        return self.l1[lo >> 3:hi >> 3].view(_WHOLE_BYTE[bits]).astype(np.uint32)

    def _l1_gather(self, bit_addr: np.ndarray, bits: int) -> np.ndarray:
        """Datums of `bits` bits at L1 bit addresses (little endian; sub-byte datums from the low bits up)."""
        if bit_addr.size == 0:
            return np.zeros(0, np.uint32)
        lo, hi = int(bit_addr.min()), int(bit_addr.max()) + bits
        if lo < 0 or hi > self.l1.size * 8:
            raise self.undefined(f"L1 read 0x{lo // 8:X}..0x{(hi + 7) // 8:X} out of bounds")
        byte = bit_addr >> 3
        if bits < 8:
            return ((self.l1[byte].astype(np.uint32) >> (bit_addr & 7).astype(np.uint32)) & ((1 << bits) - 1))
        v = np.zeros(bit_addr.size, np.uint32)
        for k in range(bits // 8):
            v |= self.l1[byte + k].astype(np.uint32) << np.uint32(8 * k)
        return v

    def _unpack_conversion(self, in_fmt: int, out_fmt: int, to_dst: bool, src: str, sel: int):
        """(raw L1 datums, shared exponents or None) -> np.uint32 datums in the fp32 layout (Dst32b / Src)."""
        if to_dst:
            # Into a 32-bit Dst: FP32, TF32 ("TF32 means FP32" into Dst) and INT32 are bit-exact copies.
            if (in_fmt, out_fmt) in ((F.FP32, F.FP32), (F.FP32, F.TF32), (F.INT32, F.INT32)):
                return lambda raw, e: raw
            raise self.unimpl(f"UNPACR to Dst with in format {_fmt(in_fmt)}, out format {_fmt(out_fmt)} "
                              "(only FP32/TF32/INT32 -> Dst32b; 16-bit Dst targets are not modelled)")
        if in_fmt == F.FP32:
            if out_fmt == F.FP32:
                raise self.undefined(f"UNPACR FP32 into {src} with Out_data_format FP32 (undefined; ttsim fatal)")
            fn = {F.TF32: F.unp_fp32_to_tf32, F.BF16: F.unp_fp32_to_bf16, F.FP16: F.unp_fp32_to_fp16}[out_fmt]
            return lambda raw, e: fn(raw)
        if in_fmt == F.BF16:
            return lambda raw, e: F.bf16_to_src(raw)
        if in_fmt == F.FP16:
            return lambda raw, e: F.fp16_to_src(raw)
        if in_fmt in _BFP_BITS:
            bits = _BFP_BITS[in_fmt]
            return lambda raw, e: F.bfp_to_src(raw, e, bits)
        if in_fmt == F.FP8:
            exp_4b = bool((self.cfg[119] if sel else self.cfg[71]) >> 22 & 1)     # THCON_SECn_REG1_Unp_LF8_4b_exp
            return lambda raw, e: F.fp8_to_src(raw, exp_4b)
        if in_fmt == F.INT8:
            unsigned = bool(self.cfg[1] >> (16 if sel else 15) & 1)           # ALU_FORMAT_SPEC_REG0_Src?Unsigned
            return lambda raw, e: F.int8_to_src(raw, unsigned)
        if in_fmt == F.INT16:
            return lambda raw, e: F.int16_to_src(raw)
        if in_fmt in (F.INT32, F.TF32):
            raise self.undefined(f"UNPACR in format {_fmt(in_fmt)} into {src} (not possible; only into Dst)")
        raise self.unimpl(f"UNPACR to {src} with in format {_fmt(in_fmt)}, out format {_fmt(out_fmt)} "
                          "(BFPxa formats)")

    def _hand_to_fpu(self, sel: int, bank: int, fmt: int) -> None:
        if sel:
            self.srcb_valid[bank] = True
            self.srcb_format[bank] = fmt
            self.srcb_unpack_bank ^= 1
        else:
            self.srca_valid[bank] = True
            self.srca_format[bank] = fmt
            self.srca_unpack_bank ^= 1

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
        cfg = self.cfg
        key = (id(f), cfg[0], cfg[1], cfg[2], cfg[12], cfg[13], cfg[18], cfg[19], cfg[24], cfg[28], cfg[68], cfg[70],
               cfg[71], cfg[180])
        setup = self._pack_setups.get(key) if PACK_SETUP_CACHE else None
        if setup is None:
            setup = self._pack_setup(t, f)
            if len(self._pack_setups) >= 256:
                self._pack_setups.clear()
            self._pack_setups[key] = setup
        else:
            self.check_state_bank(t)              # (the one check of _pack_setup that is not about f or cfg)
        (sel, c68, c71, in_fmt, out_fmt, rd32, read_unsigned, read_raw, round10, relu_mode, relu_thr, acc, esz,
         out_bits, ys, zs, ws, plain, native_kind) = setup
        th = self.threads[t]
        (x0, y0, z0, w0), (x1, y1, z1, w1) = th.adc[PACK]
        if x0:
            raise self.unimpl(f"PACR with packer ADC ch0.X={x0} (must be 0)")
        per = x1 - x0 + 1
        if per != 16 and not (per == 8 and sel == 1):
            if self.strict and per > 16:
                raise self.undefined(f"PACR X range {x0}..{x1}: the packer reads at most 16 datums per interface "
                                     "(ttsim pf22: use SETADCXX x_end=15)")
            raise self.unimpl(f"PACR with {per} datums per read interface (16, or 8 with read_intf_sel=1)")
        for what, v in (("Ystride", ys), ("Zstride", zs), ("Wstride", ws)):
            if v % esz:
                raise self.undefined(f"PACR PCK0_ADDR_CTRL {what}={v} not a multiple of the {esz}-byte In_data_format")
        src_addr = (y0 * ys + z0 * zs + w0 * ws) // esz
        if src_addr % 16:
            raise self.unimpl(f"PACR from Dst datum address {src_addr} not on a row boundary")
        n_dst_rows = DST32_ROWS if rd32 else 2 * DST32_ROWS
        row0 = src_addr // 16 + (cfg[180] & 0xFFF)
        if not rd32:
            row0 &= n_dst_rows - 1                  # the 10-bit Dst16b row wraps [ttsim]
        first, n_rows, step = _PACR_ROWS[sel]
        first += row0
        last = first + step * (n_rows - 1)
        if last >= n_dst_rows:
            raise self.undefined(f"PACR reads Dst{32 if rd32 else 16}b row {last} beyond row {n_dst_rows - 1}")
        count = per * n_rows
        if out_bits <= 8 and count % 16:
            raise self.unimpl(f"PACR of {count} datums to {_fmt(out_fmt)} (8-bit and BFP outputs need multiples "
                              "of 16)")

        # stream start: L1 address (and the BFP/8-bit exponent section) from L1_Dest_addr + ch1.Y * Ystride1
        if not self.packer_open:
            if z1 or w1:
                raise self.unimpl(f"PACR with packer ADC ch1.Z={z1} / ch1.W={w1} (L1 side)")
            start = (cfg[69] + 1) * 16 + 16 * ((y1 * (cfg[14] >> 16)) >> 4)
            self.packer_exp_addr = start
            self.packer_addr = start + (16 * (c68 >> 16) if out_bits <= 8 else 0)   # Exp_section_size (16 B)
            self.packer_tpg = (0, 0, 0)
        keep, all_kept = self._edge_keep(count)
        addr, nbytes = self.packer_addr, count * out_bits // 8
        c = tile_native.module() if native_kind is not None and all_kept else None
        if c is not None and 0 <= addr and addr + nbytes <= self.l1.size:   # (else the Python path raises)
            c.pack(self.dst.rows32, first, n_rows, step, per, native_kind, self.l1, addr)
            self._pack_stream(th, f, nbytes)
            return
        if rd32:
            rows = self.dst.rows32[first:last + 1:step, :per]
        else:
            r16 = np.repeat(np.arange(first, last + 1, step), per)
            rows = self.dst.read16(r16, np.tile(np.arange(per), n_rows))
        if plain and all_kept and PACK_PLAIN_COPY:
            self._l1_write(addr, rows)
            self._pack_stream(th, f, nbytes)
            return
        vals = rows.reshape(-1).astype(np.uint32)
        if rd32:
            inter, kind = self._pack_early(vals, in_fmt, read_raw, read_unsigned)
        else:
            inter, kind = self._pack_early16(vals, in_fmt, read_raw, round10)
        if relu_mode:
            if kind not in ("fp32", "b16", "tf32", "int32") or (kind == "int32" and relu_mode != 1):
                raise self.unimpl(f"packer ReLU mode {relu_mode} with intermediate format {_fmt(in_fmt)}")
            if relu_mode >= 2 and relu_thr & 0x8000:
                raise self.undefined(f"packer ReLU threshold 0x{relu_thr:04X} is negative (undefined)")
            inter = F.relu(inter, kind, relu_mode, relu_thr)
        if not (all_kept and inter.dtype == np.uint32):     # (else np.where would return an equal copy)
            inter = np.where(keep, inter, np.uint32(0))   # masked datums enter the late conversion as 0
        out = self._pack_late(inter, in_fmt, out_fmt, c71, bool(rd32))

        if out_fmt in _BFP_BITS:
            bits = _BFP_BITS[out_fmt]
            exps, datums = F.bf16_to_bfp(out, bits)
            self._l1_write(self.packer_exp_addr, exps.astype(np.uint8))
            self.packer_exp_addr += exps.size
            data = F.bfp_datums_to_bytes(datums, bits)
        else:
            dt = _WHOLE_BYTE[out_bits]
            if acc:
                old = self._l1_read(addr, count * out_bits // 8).view(dt).astype(np.uint32)
                out = {F.FP32: F.l1_acc_fp32, F.BF16: F.l1_acc_bf16, F.FP16: F.l1_acc_fp16}[out_fmt](old, out)
            data = out.astype(dt)
        self._l1_write(addr, data)
        self._pack_stream(th, f, data.size * data.itemsize, out_fmt in _BFP_BITS)

    def _pack_stream(self, th, f, nbytes: int, bfp: bool = False) -> None:
        """PACR's end, after its `nbytes` bytes of L1 datums were written at the stream's address: the stream padded
        and closed by `last`, the packer's address modifier applied."""
        addr = self.packer_addr + nbytes
        if f["last"]:
            pad = -addr % 16      # `last` zero-pads the stream (and a BFP exponent stream) to the next 16 bytes
            if pad:
                self._l1_write(addr, bytes(pad))
            if bfp and self.packer_exp_addr % 16:
                self._l1_write(self.packer_exp_addr, bytes(-self.packer_exp_addr % 16))
            self.packer_open = False
        else:
            self.packer_open = True
        self.packer_addr = addr
        self._pack_addr_mod(th, f["addr_mode"])

    def _pack_setup(self, t, f) -> tuple:
        """PACR's checks and derived values that depend only on the word's fields and the config words PACR's cache
        key holds (in the reference order; check_state_bank among them): the same errors, the same values."""
        for name in ("flush", "ctxt_ctrl", "ovrd_thread_id", "zero_write", "addr_cnt_context", "row_pad_zero",
                     "cfg_context", "concat", "dst_access_mode"):
            if f[name]:
                raise self.unimpl(f"PACR {name}={f[name]}")
        sel = f["read_intf_sel"]
        if sel not in (0, 1, 3, 5, 10):
            raise self.unimpl(f"PACR read_intf_sel={sel}")
        self.check_state_bank(t)
        cfg = self.cfg
        c68, c70, c71 = cfg[68], cfg[70], cfg[71]
        if c68 & 0xFFFF:
            raise self.unimpl("packer THCON_SEC0_REG1_Row_start_section_size != 0")
        for bit, what in ((1, "Add_l1_dest_addr_offset"), (12, "Dis_shared_exp_assembler"),
                          (13, "Auto_set_last_pacr_intf_sel"), (14, "Enable_out_fifo"), (15, "Sub_l1_tile_header_size"),
                          (16, "Source_interface_selection"), (22, "Add_tile_header_size")):
            if c70 >> bit & 1:
                raise self.unimpl(f"packer THCON_SEC0_REG1_{what}=1")
        if c70 >> 17 & 0xF:
            raise self.unimpl("packer THCON_SEC0_REG1_pack_start_intf_pos != 0")
        if c71 & 0x7FFFF:
            raise self.unimpl("packer downsampling (THCON_SEC0_REG1_Downsample_mask/rate)")
        if c71 >> 20 & 1:
            raise self.unimpl("packer exponent thresholding (THCON_SEC0_REG1_Exp_threshold_en=1)")
        if cfg[28] >> 23 & 1:
            raise self.unimpl("PACK_COUNTERS_SEC0_pack_yz_transposed=1")
        if cfg[180] >> 12 & 0x3F:
            raise self.unimpl("DEST_TARGET_REG_CFG_PACK_SEC0_ZOffset != 0")
        if cfg[19] >> 8 & 1:
            raise self.unimpl("PCK_EDGE_TILE_FACE_SET_SELECT_enable=1")
        if cfg[24] >> 16 & 1:
            raise self.unimpl("packer edge mode -Inf (PCK_EDGE_MODE_mode=1)")
        if cfg[1] >> 2 & 1:
            raise self.unimpl("packer stochastic rounding (ALU_ROUNDING_MODE_Packer_srnd_en=1; PRNG not modelled)")
        dstacc = cfg[0] >> 10 & 0xF if cfg[0] >> 14 & 1 else cfg[1] >> 25 & 0xF     # Dstacc_override / _val
        in_fmt, out_fmt = c70 >> 8 & 0xF, c70 >> 4 & 0xF
        rd = cfg[18]
        rd32, read_unsigned, read_raw, round10 = rd & 1, rd >> 1 & 1, rd >> 2 & 1, rd >> 3 & 1
        if dstacc != in_fmt:
            raise self.undefined(f"packer In_data_format {_fmt(in_fmt)} != ALU_FORMAT_SPEC_REG2_Dstacc {_fmt(dstacc)} "
                                 "(undefined; ttsim pf21)")
        mode = rd32 << 8 | in_fmt << 4 | out_fmt
        if mode not in (_PACK_MODES_32 if rd32 else _PACK_MODES_16):
            raise self.unimpl(f"packer conversion Read_32b_data={rd32} In={_fmt(in_fmt)} Out={_fmt(out_fmt)} "
                              f"(pack_fmt_conv_mode=0x{mode:X})")
        if rd32:
            # TF32 rounding for an FP16 intermediate needs Round_10b_mant=1; every other mode needs it 0 [ttsim]
            if round10 != (in_fmt == F.FP16):
                raise self.unimpl(f"packer PCK_DEST_RD_CTRL_Round_10b_mant={round10} with pack_fmt_conv_mode="
                                  f"0x{mode:X}")
            if read_raw and in_fmt not in (F.BF16, F.BFP8, F.INT8):
                raise self.unimpl(f"packer Read_raw (PCK_DEST_RD_CTRL_Read_int8=1) with intermediate {_fmt(in_fmt)}")
        else:
            # from a 16-bit Dst Round_10b_mant only selects BF16 -> FP16 ahead of FP8 (0x1A) [ttsim]
            if round10 and mode != 0x1A:
                raise self.unimpl(f"packer PCK_DEST_RD_CTRL_Round_10b_mant=1 with pack_fmt_conv_mode=0x{mode:X}")
            if read_raw and in_fmt == F.BFP8A:
                raise self.unimpl("packer FP16 -> E5M7 truncation (Read_raw with intermediate BFP8a)")
        relu_mode, relu_thr = cfg[2] >> 2 & 0xF, cfg[2] >> 6 & 0xFFFF
        if relu_mode > 3:
            raise self.unimpl(f"packer STACC_RELU_ApplyRelu={relu_mode}")
        acc = bool(c71 >> 19 & 1)                                     # THCON_SEC0_REG1_Pack_L1_Acc
        if acc and out_fmt not in (F.FP32, F.FP16, F.BF16):
            raise self.unimpl(f"Pack_L1_Acc with Out_data_format {_fmt(out_fmt)} (only FP32/FP16/BF16)")
        esz = max(1, F.element_bits(in_fmt) // 8)             # stride unit: the In_data_format datum size
        out_bits = F.element_bits(out_fmt)

        ys, zs, ws = cfg[12] >> 16, cfg[13] & 0xFFFF, cfg[13] >> 16
        plain = bool(rd32) and in_fmt == out_fmt and in_fmt in (F.FP32, F.INT32) and not relu_mode and not acc
        # (Read_raw truncates where the C part rounds BF16; it changes nothing for FP32, INT32 and INT16)
        native = not (relu_mode or acc or read_raw and in_fmt == F.BF16)
        native_kind = tile_native.PACK_KINDS.get((rd32, in_fmt, out_fmt)) if native else None
        return (sel, c68, c71, in_fmt, out_fmt, rd32, read_unsigned, read_raw, round10, relu_mode, relu_thr, acc, esz,
                out_bits, ys, zs, ws, plain, native_kind)

    def _edge_keep(self, count: int) -> tuple[np.ndarray, bool]:
        """(_edge_masks, whether it keeps every datum), cached per (count, tile position, the config words it reads)
        with the position it leaves."""
        cfg = self.cfg
        key = (count, self.packer_tpg, cfg[20], cfg[21], cfg[22], cfg[23], cfg[24], cfg[25], cfg[26], cfg[27], cfg[28])
        hit = self._edge_keeps.get(key) if PACK_SETUP_CACHE else None
        if hit is None:
            keep = self._edge_masks(count)
            keep.flags.writeable = False
            if len(self._edge_keeps) >= 1024:
                self._edge_keeps.clear()
            hit = self._edge_keeps[key] = (keep, self.packer_tpg, bool(keep.all()))
        self.packer_tpg = hit[1]
        return hit[0], hit[2]

    def _edge_masks(self, count: int) -> np.ndarray:
        """EdgeMasking.md: per datum, c = TILE_ROW_SET_MAPPING[select].row_set_mapping[TPG.Y & 15], keep the datum
        if PCK_EDGE_OFFSET_SEC[c].mask has its column bit; the tile position generator advances X per datum, Y per
        16 datums, wrapping Y at pack_reads_per_xy_plane."""
        cfg = self.cfg
        x, y, z = self.packer_tpg
        b = cfg[24] >> 17 & 3                                          # PCK_EDGE_TILE_ROW_SET_SELECT (packer 0)
        mapping = cfg[20 + b]
        masks = [cfg[24 + k] & 0xFFFF for k in range(4)]
        rpp = cfg[28] >> 8 & 0xFF                                      # pack_reads_per_xy_plane
        lin = x + np.arange(count)
        if len(set(masks[mapping >> (2 * r) & 3] for r in range(16))) == 1:
            keep_row = None                                            # every row uses the same mask
            mask = masks[mapping & 3]
        else:
            if not 1 <= rpp <= 16:
                raise self.unimpl(f"edge masks that differ by row with pack_reads_per_xy_plane={rpp}")
            yy = (y + lin // 16) % rpp
            keep_row = np.array([masks[mapping >> (2 * (r & 15)) & 3] for r in range(16)])[yy]
        ylin = y + (x + count) // 16
        if rpp:
            self.packer_tpg = ((x + count) % 16, ylin % rpp, z + ylin // rpp)
        else:
            self.packer_tpg = ((x + count) % 16, ylin, z)
        col = np.arange(count) % 16     # the datum's Dst column (PACR always starts at column 0)
        if keep_row is None:
            return ((mask >> col) & 1).astype(bool)
        return ((keep_row >> col) & 1).astype(bool)

    def _pack_early(self, v: np.ndarray, inter: int, read_raw: int, read_unsigned: int):
        """Early conversion from Dst32b to the intermediate format -> (values, kind for ReLU)."""
        if inter == F.FP32:
            return v, "fp32"
        if inter == F.INT32:
            return v, "int32"
        if inter == F.BF16:
            return (F.early_fp32_to_bf16_trunc(v) if read_raw else F.early_fp32_to_bf16(v)), "b16"
        if inter == F.BFP8:
            return (F.early_fp32_to_bf16_trunc(v) if read_raw else F.early_fp32_to_e8m6(v)), "b16"
        if inter == F.FP16:
            return F.early_fp32_to_tf32(v), "tf32"
        if inter == F.INT8:
            if read_raw:
                return F.early_int32_to_int8_raw(v, bool(read_unsigned)), "int8"
            shift = 0
            if self.cfg[8] & 1:                                       # INT_DESCALE_Enable
                if self.cfg[8] >> 1 & 1:
                    raise self.unimpl("packer INT_DESCALE_Mode=1 (per-Z shift amounts)")
                shift = self.cfg[187] & 31
            return F.early_int32_to_int8(v, bool(read_unsigned), shift), "int8"
        if inter == F.INT16:
            # the raw high half of the Dst32b storage, whose BF16 field order is Sign,Man,Exp [ttsim]
            return F.shuffle_bf16(v >> 16), "int16"
        raise self.unimpl(f"packer early conversion to {_fmt(inter)}")

    def _pack_early16(self, h: np.ndarray, inter: int, read_raw: int, round10: int):
        """Early conversion from Dst16b (physical field order) to the intermediate format."""
        if inter in (F.FP16, F.BFP8A):
            if inter == F.FP16 and round10:                           # Dst holds BF16 here (mode 0x1A)
                return F.early_bf16_to_fp16(F.unshuffle_bf16(h)), "b16"
            v = F.dst16_to_fp16(h)
            return (F.early_fp16(v, bool(read_raw)) if inter == F.FP16 else F.early_fp16_to_e5m6(v)), "b16"
        if inter in (F.BF16, F.BFP8):
            return F.early_bf16(F.unshuffle_bf16(h), inter == F.BFP8, bool(read_raw)), "b16"
        if inter == F.INT16:
            return h, "int16"
        raise self.unimpl(f"packer early conversion from a 16-bit Dst to {_fmt(inter)}")

    def _pack_late(self, v: np.ndarray, inter: int, out: int, c71: int, rd32: bool) -> np.ndarray:
        """Late conversion from the intermediate format to the L1 format (before any BFP block step)."""
        if inter == out and inter in (F.FP32, F.BF16, F.INT32, F.INT16, F.INT8):
            return v
        if inter in (F.BF16, F.BFP8) and out == F.FP32:
            return F.late_to_fp32_from16(v)
        if inter == F.BFP8 and out == F.BF16:
            return v
        if inter == F.BFP8A and out == F.BFP8:
            return F.late_fp16_to_bf16(v)
        if inter == F.FP32 and out == F.FP16:
            return F.fp32_to_fp16_sat_trunc(v)
        if inter == F.FP32 and out in _BFP_BITS:
            return F.late_fp32_to_bf16_for_bfp(v)
        if inter in (F.BFP8, F.BF16) and out in _BFP_BITS:
            return v
        if inter == F.FP16 and rd32:                                  # a 32-bit Dst gave TF32: narrow to FP16
            v = F.late_tf32_to_fp16(v)
        if inter == F.FP16 and out == F.FP16:
            return v
        if inter == F.FP16 and out == F.FP32:
            return F.late_fp16_to_fp32(v)
        if inter == F.FP16 and out == F.BF16:
            return F.late_fp16_to_bf16(v)
        if inter == F.FP16 and out == F.FP8:
            if not c71 >> 23 & 1:
                raise self.unimpl("packer FP16 -> FP8 (E5M2) late conversion (only Pac_LF8_4b_exp=1 / E4M3)")
            return F.late_fp16_to_fp8(v, True)
        raise self.unimpl(f"packer late conversion {_fmt(inter)} -> {_fmt(out)}")

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
