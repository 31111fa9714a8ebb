"""Render a KernelPlan into the C99 sources of one kernel (five cores) plus its generated headers.

`render(plan)` returns {"brisc": reader, "ncrisc": writer, "trisc0"/"trisc1"/"trisc2": the compute source (compiled
with -DTRISC_UNPACK/-DTRISC_MATH/-DTRISC_PACK by runtime.compile), "tt_isa.h", "tt_layout.h", "args.h"}.
`split(rendered)` separates that into (sources, headers) for runtime.compile.compile_kernel.

Every Tensix word the templates push is built here with isa.encode by field name (checked against the words listed
in unpack-sfpu-pack.md by tests/test_templates.py), so the templates contain no magic numbers.
"""
from __future__ import annotations

import jinja2

from tt_backend.lowering.plan import CB_DEPTH, DTYPE_SIZE, STAGING_BYTES, TILE_BYTES, TILE_ELEMS, KernelPlan, Stream
from tt_backend.chip import isa, layout
from tt_backend.chip.errors import UnsupportedOp
from tt_backend.templates import TEMPLATE_DIR

CORE_SOURCES = ("brisc", "ncrisc", "trisc0", "trisc1", "trisc2")
HEADERS = ("tt_isa.h", "tt_layout.h", "args.h")

# Shared L1 words (start-up "ready" words, circular-buffer control blocks): layout.SYNC_BASE, see templates/layout.py
SYNC_BASE, SYNC_CB_OFFSET, SYNC_CB_STRIDE = layout.SYNC_BASE, layout.SYNC_CB_OFFSET, layout.SYNC_CB_STRIDE

_env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATE_DIR)), undefined=jinja2.StrictUndefined,
                          keep_trailing_newline=True)


# Instructions one MOP may expand to: ttsim puts a MOP's whole expansion into its thread FIFO at once and stops with
# "pipe 1 inst fifo full" beyond 512 entries (seen with 32 x 22-word replays), so a tile's row steps are split into
# MOPs of at most this many instructions, with a wait for the thread to drain between them.
MOP_EXPANSION_LIMIT = 256


def _hex(v: int) -> str:
    return f"0x{v:08X}u"


def _w(name: str, **fields: int) -> str:
    return _hex(isa.encode(name, **fields))


# --- Tensix words (unpack-sfpu-pack.md sections 3-7, 10) -------------------------------------------------------
SEM_UNPACKED, SEM_MATHDONE, SEM_FREE = 0, 1, 2


def tensix_words() -> dict:
    w = {
        # TRISC0: semaphores (one Dst group in flight: every max is 1), unpacker 0 ADCs, per-tile config, UNPACR
        "seminit_unpacked": _w("SEMINIT", max_value=1, init_value=0, sem_sel=1 << SEM_UNPACKED),
        "seminit_mathdone": _w("SEMINIT", max_value=1, init_value=0, sem_sel=1 << SEM_MATHDONE),
        "seminit_free": _w("SEMINIT", max_value=1, init_value=1, sem_sel=1 << SEM_FREE),
        "unp_adcxy_reset": _w("SETADCXY", cnt_set_mask=1, bit_mask=0xB),   # keep ch1.X (the x end)
        "unp_adczw_reset": _w("SETADCZW", cnt_set_mask=1, bit_mask=0xF),
        "unp_adcxx_face": _w("SETADCXX", cnt_set_mask=1, x_end2=255, x_start=0),
        "unp_adczw_tile": _w("SETADCZW", cnt_set_mask=1, bit_mask=0x5),
        "stall_cfg_unpack": _w("STALLWAIT", stall_res=0x80, wait_res=0x3),  # B7 config; C0 ThCon | C1 unpacker0
        "wrcfg_unp_base": _w("WRCFG", gpr_address=4, cfg_reg=76),
        "wrcfg_unp_dest": _w("WRCFG", gpr_address=5, cfg_reg=84),
        "wrcfg_gpr6_cfg64": _w("WRCFG", gpr_address=6, cfg_reg=64),
        "wrcfg_gpr7_cfg72": _w("WRCFG", gpr_address=7, cfg_reg=72),
        "wrcfg_gpr8_cfg73": _w("WRCFG", gpr_address=8, cfg_reg=73),
        "wrcfg_gpr9_cfg57": _w("WRCFG", gpr_address=9, cfg_reg=57),
        "unpacr_dst_face": _w("UNPACR", addr_mode=0x11, ovrd_thread_id=1, last=1),
        "unpacr_srca_face": _w("UNPACR", addr_mode=0x01, ovrd_thread_id=1, set_dat_valid=1, last=1),
        "unpacr_nop_zero_srcb": _w("UNPACR_NOP", unpacker_select=1, set_dvalid=1, unpack_pop=1),
        "srca_ovrd_on": _w("SETC16", setc16_reg=5, setc16_value=4),
        "srca_ovrd_off": _w("SETC16", setc16_reg=5, setc16_value=0),
        "stall_sync_unpack": _w("STALLWAIT", stall_res=0x2, wait_res=0x2),   # B1 sync; C1 unpacker0
        "sempost_unpacked": _w("SEMPOST", sem_sel=1 << SEM_UNPACKED),
        # TRISC1
        "dst_sec1_incr2": _w("SETC16", setc16_reg=29, setc16_value=2),
        "ab_sec2_srca8": _w("SETC16", setc16_reg=14, setc16_value=8),
        "dst_sec2_incr8": _w("SETC16", setc16_reg=30, setc16_value=8),
        "math_offset": [_w("SETC16", setc16_reg=1, setc16_value=64 * s) for s in range(8)],
        "setrwc_all": _w("SETRWC", bit_mask=0x7),
        "elwadd8": _w("ELWADD", addr_mode=2, dst=0),
        "setrwc_release": _w("SETRWC", clear_ab_vld=3, bit_mask=0x3),
        "setrwc_dst": _w("SETRWC", bit_mask=0x4),
        "stall_sfpu_after_fpu": _w("STALLWAIT", stall_res=0x100, wait_res=0x10),  # B8 SFPU; C4 FPU
        "stall_sync_math": _w("STALLWAIT", stall_res=0x2, wait_res=0x810),        # B1 sync; C4 FPU | C11 SFPU
        "sempost_mathdone": _w("SEMPOST", sem_sel=1 << SEM_MATHDONE),
        # TRISC2
        "pack_sec0": _w("SETC16", setc16_reg=37, setc16_value=4),
        "pack_sec1": _w("SETC16", setc16_reg=38, setc16_value=0x1020),
        "pack_sec2": _w("SETC16", setc16_reg=39, setc16_value=0x2020),
        "pck_adcxy_reset": _w("SETADCXY", cnt_set_mask=4, bit_mask=0xB),
        "pck_adczw_reset": _w("SETADCZW", cnt_set_mask=4, bit_mask=0xF),
        "pck_adcxx_row": _w("SETADCXX", cnt_set_mask=4, x_end2=15, x_start=0),
        "stall_cfg_pack": _w("STALLWAIT", stall_res=0x80, wait_res=0x9),     # B7 config; C0 ThCon | C3 packer
        "wrcfg_pck_dest": _w("WRCFG", gpr_address=4, cfg_reg=69),
        "wrcfg_pck_offset": _w("WRCFG", gpr_address=5, cfg_reg=180),
        "pacr_rows": _w("PACR", addr_mode=0),
        "pacr_next_face": _w("PACR", addr_mode=1),
        "pacr_last": _w("PACR", addr_mode=2, last=1),
        "stall_sync_pack": _w("STALLWAIT", stall_res=0x2, wait_res=0x8),      # B1 sync; C3 packer
        "sempost_free": _w("SEMPOST", sem_sel=1 << SEM_FREE),
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


# --- streams -------------------------------------------------------------------------------------------------------
_TILE_LOAD = {"fp32": "TT_REG32(src + 4u * i)", "bf16": "(uint32_t)TT_L1_U16(src + 2u * i)"}
_TILE_STORE = {"fp32": "TT_REG32(dst + 4u * i) = v;", "bf16": "TT_L1_U16(dst + 2u * i) = (uint16_t)v;"}
_DRAM_LOAD = {"bool": "(TT_L1_U8(p) != 0u ? 1u : 0u)", "bfloat16": "(uint32_t)TT_L1_U16(p)",
              "float32": "TT_REG32(p)", "int32": "TT_REG32(p)"}
_DRAM_STORE = {"bool": "TT_L1_U8(p) = v != 0u ? 1u : 0u;", "bfloat16": "TT_L1_U16(p) = (uint16_t)v;",
               "float32": "TT_REG32(p) = v;", "int32": "TT_REG32(p) = v;"}


def _stream_ctx(plan: KernelPlan, s: Stream, j: int | None) -> dict:
    if s.dtype not in DTYPE_SIZE:
        raise UnsupportedOp(f"{plan.name}: dtype {s.dtype} has no DRAM/tile conversion")
    esz, fmt = DTYPE_SIZE[s.dtype], s.tile_format
    if s.contiguous:
        # a bulk copy needs DRAM element size == tile element size; bool is widened/narrowed in place
        mode = "contiguous bool" if s.dtype == "bool" else "contiguous"
    else:
        mode = "gather" if j is not None else "scatter"
    red = plan.reduce
    if red is not None:   # reduction layout (plan.ReducePlan): the reader walks (output, reduce index) per datum
        if j is None: mode = "red scatter"
        elif j == red.mask_input: mode = "red mask"
        elif s.value is not None: mode = "red computed"
        elif s.contiguous: mode = "red contiguous"   # lowering/reduce.py: 32 lanes, a tile is a run of the buffer
        else: mode = "red gather"
    elif s.value is not None:
        mode = "computed"
    runs = _affine_runs(plan, s) if mode == "gather" else None
    if runs is not None:
        mode = runs["mode"]
    name = f"in{j}" if j is not None else "out"
    if mode in ("gather", "scatter", "red gather", "red scatter", *RUN_MODES) and f"stage_{name}" not in plan.l1:
        raise ValueError(f"{plan.name}: stream {name} is gathered but has no staging window (run allocate_l1)")
    return {
        "j": j, "buf": s.buf, "dtype": s.dtype, "fmt": fmt, "esz": esz, "mode": mode,
        "index_c": s.index_c, "valid_c": s.valid_c or "1", "value_c": s.value_c,
        "load_expr": _DRAM_LOAD[s.dtype], "store_stmt": _TILE_STORE[fmt],
        "tile_load": _TILE_LOAD[fmt], "dram_store": _DRAM_STORE[s.dtype],
        # reduction pads (k >= K) still read this stream (element k = 0): max pads, streams indexed by o only
        "pad_read": int(red is not None and j is not None and j != red.mask_input
                        and (red.pad_clamp or not red.k_dep[j])),
        "runs": runs,
    }


# --- the elementwise reader's run paths -------------------------------------------------------------------------
# An input stream whose index is affine in the ranges and ungated (Stream.coef, no valid) is read in runs instead of
# per datum: the innermost ranges whose coefficients chain like one flattened range (coef[k] == stride * size of the
# ranges inside it; size-1 ranges always merge) form a run of `run` elements with index base + stride * q, where base
# is affine in the remaining outer ranges. Per run the reader does one of
#   broadcast (stride 0): fetch the one value, replicate it with plain stores (a CB slot that already holds the same
#                         value across the whole tile is not rewritten);
#   runs (stride 1):      one NoC read straight into the CB slot when DRAM and slot addresses are congruent mod 64 and
#                         the element sizes agree, else the run is brought into the staging window with one NoC read
#                         and copied/converted from there;
#   strided (any other):  walk the window with a constant byte step, no per-datum index evaluation;
#   columns (strided, short runs, next outer range contiguous: transposes): the whole runs of a tile form a block
#                         whose columns are contiguous in the buffer: one source segment per column, stored with a
#                         constant step of `run` datums; partial runs at the tile's edges go datum by datum.
# A buffer that fits the staging window is read into it once ("resident") and runs are then plain L1 reads; a larger
# one is reloaded per miss, a full window ahead when consecutive accesses are near, just the bytes needed when they are
# far apart (sparse), ending at the datum for descending walks.
# Gated (pad) and non-affine indices, and strided runs shorter than STRIDED_MIN_RUN, keep the per-datum gather.
RUN_MODES = ("broadcast", "runs", "strided", "columns")
DIRECT_MIN_BYTES = 64        # a run at least this long goes straight into the CB slot when congruent
STRIDED_MIN_RUN = 4          # shorter strided runs cost more per run (window check, chunking) than per-datum gather
STRIDED_MIN_RUN_RESIDENT = 2  # the same when the buffer is resident in the window (no window check per run)
COLUMNS_MAX_RUN = 48         # strided runs whose next outer range has coefficient 1 are walked by columns (a block of
                             # whole runs copied one contiguous source segment at a time) when shorter than this or
                             # when the buffer is not resident (a long strided run reloads the window many times)


def _u32(v: int) -> str:
    return f"{v & 0xFFFFFFFF}u"


def _affine_runs(plan: KernelPlan, s: Stream) -> dict | None:
    """The run structure of an ungated affine elementwise input stream (see RUN_MODES), or None (per-datum gather)."""
    ranges = list(plan.ranges) or [1]
    if (plan.reduce is not None or s.coef is None or s.valid is not None or s.value is not None
            or len(s.coef) != len(ranges) + 1):
        return None
    a, const = list(s.coef[:-1]), s.coef[-1]
    k = len(ranges) - 1
    while k >= 0 and ranges[k] == 1:
        k -= 1
    stride, run, m = (a[k], ranges[k], k) if k >= 0 else (0, 1, 0)
    while m > 0 and (ranges[m - 1] == 1 or a[m - 1] == stride * run):
        m -= 1
        run *= ranges[m]
    esz = DTYPE_SIZE[s.dtype]
    # a buffer that fits the staging window is read into it once: no per-run reloads (one that fills it exactly needs a
    # 64-aligned DRAM address, as the bulk paths do: the reader checks)
    resident = plan.buffers[s.buf].nbytes <= STAGING_BYTES
    tight = plan.buffers[s.buf].nbytes > STAGING_BYTES - 64
    outer = [(ranges[i], a[i]) for i in range(m) if ranges[i] > 1]
    mode = "broadcast" if stride == 0 else "runs" if stride == 1 else "strided"
    if mode == "strided" and outer and outer[-1][1] == 1 and (run < COLUMNS_MAX_RUN or not resident):
        mode = "columns"   # a transpose-like walk: the next outer range is contiguous in the buffer
    elif mode == "strided" and run < (STRIDED_MIN_RUN_RESIDENT if resident else STRIDED_MIN_RUN):
        return None
    # staging-window reloads: a full window when the next access is near (dense), else only the bytes needed
    step = abs(stride) * esz if mode in ("strided", "columns") else abs(outer[-1][1]) * esz if outer else 0
    dense = step <= STAGING_BYTES // 4
    if mode in ("strided", "columns") and stride < 0 and dense:
        # walking down: the window ends just past the request (a column is at most a tile's bytes)
        back, span = STAGING_BYTES - (4 * TILE_ELEMS + 128 if mode == "columns" else 128), STAGING_BYTES
    else:
        back, span = 0, STAGING_BYTES if dense else 0
    # outer range o_i: decomposed from the run number once per tile, then advanced with a carry chain per run
    init = [f"uint32_t o{i} = o % {size}u; o /= {size}u;" for i, (size, _) in reversed(list(enumerate(outer)))]
    init.append("(void)o;")
    base = " + ".join([_u32(const)] + [f"{_u32(c)} * o{i}" for i, (_, c) in enumerate(outer)])

    def advance(i: int) -> str:
        if i < 0:
            return ""
        size, c = outer[i]
        inner = advance(i - 1)
        return (f"if (++o{i} < {size}u) base += {_u32(c)}; "
                f"else {{ o{i} = 0; base -= {_u32(c * (size - 1))};{' ' + inner if inner else ''} }}")
    block = ""
    if mode == "columns":   # advance the innermost outer range by nb runs (nb <= what is left of it)
        i, (size, _) = len(outer) - 1, outer[-1]
        inner = advance(i - 1)
        block = (f"o{i} += nb; base += nb; if (o{i} == {size}u) {{ o{i} = 0; base -= {size}u;"
                 f"{' ' + inner if inner else ''} }}")
    doc = " + ".join([f"{c} * o{i}" for i, (_, c) in enumerate(outer)] + [f"{stride} * q", str(const)])
    return {"mode": mode, "run": run, "stride": stride, "stride_u": _u32(stride), "step": _u32(stride * esz),
            "neg": stride < 0, "direct_min": max(1, DIRECT_MIN_BYTES // esz),
            "init": init, "base": base, "advance": advance(len(outer) - 1) or "(void)0;", "doc": doc,
            "back": back, "span": span, "outer": outer, "resident": resident, "tight": tight, "block": block,
            "last_outer": f"o{len(outer) - 1}", "last_size": outer[-1][0] if outer else 1,
            "direct": mode == "runs" and esz == TILE_BYTES[s.tile_format] // TILE_ELEMS}


def reader_mode(plan: KernelPlan, j: int) -> str:
    """How the reader moves input stream j: contiguous | gather | broadcast | runs | strided | computed | red ..."""
    return _stream_ctx(plan, plan.inputs[j], j)["mode"]


def args_header(plan: KernelPlan) -> str:
    ranges = list(plan.ranges) or [1]
    lines = [f"/* Generated by lowering/render.py for kernel {plan.name}: do not edit. */",
             "#ifndef TT_ARGS_H", "#define TT_ARGS_H", "#include <stdint.h>", "",
             "/* argument block (plan.arg_words): n_tiles, n_elements, DRAM address of each buffer */",
             "#define ARG_N_TILES 0", "#define ARG_N_ELEMENTS 1", "#define ARG_BUF(k) (2 + (k))",
             f"#define TT_SYNC_BASE 0x{SYNC_BASE:X}u",
             f"#define TT_CB_CTRL(k) (TT_SYNC_BASE + 0x{SYNC_CB_OFFSET:X}u + {SYNC_CB_STRIDE}u * (k))",
             f"#define TT_N_INPUTS {len(plan.inputs)}u", f"#define TT_CB_DEPTH {CB_DEPTH}u",
             f"#define TT_TILE_ELEMS {TILE_ELEMS}u", f"#define TT_STAGING_BYTES {STAGING_BYTES}u"]
    for k, b in enumerate(plan.buffers):
        lines.append(f"#define BUF{k}_NBYTES {b.nbytes}u  /* {b.dtype}, tinygrad slot {b.slot} */")
    for j, s in enumerate(plan.inputs):
        lines += [f"#define IN{j}_CB 0x{plan.l1[f'cb_in{j}']:X}u", f"#define IN{j}_TILE_BYTES {TILE_BYTES[s.tile_format]}u"]
        if f"stage_in{j}" in plan.l1:
            lines.append(f"#define IN{j}_STAGE 0x{plan.l1[f'stage_in{j}']:X}u")
    lines += [f"#define OUT_CB 0x{plan.l1['cb_out']:X}u", f"#define OUT_TILE_BYTES {TILE_BYTES[plan.output.tile_format]}u"]
    if "stage_out" in plan.l1:
        lines.append(f"#define OUT_STAGE 0x{plan.l1['stage_out']:X}u")
    if plan.reduce is not None:
        lines += _reduce_defines(plan)
    lines += ["", "/* iteration space, outermost first; flat index = row-major over it */",
              f"#define TT_N_RANGES {len(ranges)}",
              f"static const uint32_t tt_ranges[TT_N_RANGES] = {{{', '.join(f'{r}u' for r in ranges)}}};",
              "static inline void tt_iter_set(uint32_t *r, uint32_t e)",
              "{",
              "    for (int k = TT_N_RANGES - 1; k >= 0; k--) { r[k] = e % tt_ranges[k]; e /= tt_ranges[k]; }",
              "}",
              "static inline void tt_iter_next(uint32_t *r)",
              "{",
              "    for (int k = TT_N_RANGES - 1; k >= 0; k--) { if (++r[k] < tt_ranges[k]) return; r[k] = 0; }",
              "}",
              "#endif", ""]
    return "\n".join(lines)


def _reduce_defines(plan: KernelPlan) -> list[str]:
    """Reduction layout constants (plan.ReducePlan) and the (output o, reduce index k) -> ranges map."""
    red = plan.reduce
    n_out = len(red.out_sizes)
    lines = ["", "/* reduction: outputs o x reduce index k; tile t = group * RED_T + tk (plan.ReducePlan) */",
             f"#define RED_O {red.n_out}u", f"#define RED_K {red.n_red}u", f"#define RED_LANES {red.lanes}u",
             f"#define RED_CELLS {red.cells}u", f"#define RED_T {red.tiles_per_group}u",
             f"#define RED_STEPS {red.steps}u  /* row steps per output (32: all; fewer for short reductions) */",
             f"#define RED_PASSES {red.passes}u  /* a two-pass reduction streams each group's tiles twice */",
             f"#define RED_RES_LANE {min(red.lanes, 8) - 1}u  /* result lane of output 0 after the lane combine */",
             "/* reduce index of datum i (row step, lane) of tile tk of a group: with 32 lanes any order is one output's,",
             " * so k follows the datum order (a tile is a run of consecutive k); else (tk*steps + step)*lanes + lane */",
             "#define RED_K_OF(tk, i, step, lane) (RED_LANES == 32u ? (tk) * TT_TILE_ELEMS + (i) : "
             "((tk) * RED_STEPS + (step) % RED_STEPS) * RED_LANES + (lane) % RED_LANES)",
             "static inline void tt_red_set(uint32_t *r, uint32_t o, uint32_t k)", "{"]
    for i in range(len(plan.ranges) - 1, -1, -1):
        v, size = ("o", plan.ranges[i]) if i < n_out else ("k", plan.ranges[i])
        lines.append(f"    r[{i}] = {v} % {size}u; {v} /= {size}u;")
    lines += ["    (void)o; (void)k;", "}"]
    return lines


def _check(plan: KernelPlan) -> None:
    if not plan.l1:
        raise ValueError(f"{plan.name}: plan has no L1 allocation (run tt_backend.lowering.plan.allocate_l1 first)")
    n = len(plan.inputs)
    if not 1 <= n <= 7:
        raise UnsupportedOp(f"{plan.name}: {n} input streams; the compute kernel handles 1..7 (one Dst slot each)")
    if not 0 <= plan.sfpu.out_slot < 8 or plan.sfpu.dst_slots > 8:
        raise UnsupportedOp(f"{plan.name}: SFPU program uses Dst slots beyond the 8 of 32-bit mode")
    if not plan.sfpu.body:
        raise ValueError(f"{plan.name}: empty SFPU body")
    for name, st in [(f"input {j}", st) for j, st in enumerate(plan.inputs)] + [("output", plan.output)]:
        if not 0 <= st.buf < len(plan.buffers):
            raise ValueError(f"{plan.name}: {name} names buffer {st.buf}, the plan has {len(plan.buffers)}")
        need = plan.n_elements * DTYPE_SIZE[st.dtype]
        if st.contiguous and plan.buffers[st.buf].nbytes < need:
            # a bulk copy moves n_elements elements: it must never run past the end of the buffer
            raise ValueError(f"{plan.name}: {name} is contiguous over {plan.n_elements} elements ({need} bytes) but "
                             f"buffer {st.buf} has {plan.buffers[st.buf].nbytes} bytes")
    for word in plan.sfpu.setup + plan.sfpu.body:
        if not 0 <= word < 0xC0000000:
            raise ValueError(f"{plan.name}: 0x{word:08x} is not a Tensix word")


# --- FPU elementwise ops (lowering/placement.py): in_a -> SrcA (unpacker 0), in_b -> SrcB (unpacker 1), per face,
# then ELWMUL (phases inner: slot 4 = next phase, slot 3 = next 8x16 block + phase 0) / ELWADD / ELWSUB into a Dst slot
SRC_FORMAT_CODE = {"bf16": 5, "tf32": 4}
UNP1_CFG_STATIC = {113: 0x00040001, 121: 0x0000000F, 59: 0}     # y_dim 1, z_dim 4 faces; uncompressed; SrcB row 0


def fpu_words() -> dict:
    return {
        "ab_sec3_next": _w("SETC16", setc16_reg=15, setc16_value=0x0808),     # SrcA += 8, SrcB += 8
        "dst_sec3_next": _w("SETC16", setc16_reg=31, setc16_value=0x8008),    # Dst += 8, FidelityClear
        "ab_sec4_phase": _w("SETC16", setc16_reg=16, setc16_value=0),
        "dst_sec4_phase": _w("SETC16", setc16_reg=32, setc16_value=0x2000),   # FidelityIncr 1
        "unp1_adcxy_reset": _w("SETADCXY", cnt_set_mask=2, bit_mask=0xB),
        "unp1_adczw_reset": _w("SETADCZW", cnt_set_mask=2, bit_mask=0xF),
        "unp1_adcxx_face": _w("SETADCXX", cnt_set_mask=2, x_end2=255, x_start=0),
        "unp01_adczw_tile": _w("SETADCZW", cnt_set_mask=3, bit_mask=0x5),
        "stall_cfg_unpack01": _w("STALLWAIT", stall_res=0x80, wait_res=0x7),  # B7 config; C0 ThCon | C1/C2 unpackers
        "wrcfg_gpr10_cfg112": _w("WRCFG", gpr_address=10, cfg_reg=112),
        "wrcfg_gpr11_cfg120": _w("WRCFG", gpr_address=11, cfg_reg=120),
        "wrcfg_gpr12_cfg124": _w("WRCFG", gpr_address=12, cfg_reg=124),
        "unpacr_srcb_face": _w("UNPACR", unpack_block_selection=1, addr_mode=0x01, ovrd_thread_id=1, set_dat_valid=1,
                               last=1),
        "elw_phase": {k: _w(k, addr_mode=4, dst=0) for k in ("ELWMUL", "ELWADD", "ELWSUB")},
        "elw_next": {k: _w(k, addr_mode=3, dst=0) for k in ("ELWMUL", "ELWADD", "ELWSUB")},
    }


def fpu_ctx(plan: KernelPlan) -> list[dict]:
    """One entry per FpuOp: the unpacker config words of both operands and the ZEROACC words of its Dst slot."""
    out = []
    for o in plan.fpu_ops:
        l1 = [plan.inputs[o.a].tile_format, plan.inputs[o.b].tile_format]
        desc = [0x01000015 if f == "bf16" else 0x01000010 for f in l1]     # in format, uncompressed, x_dim 256
        code_a, code_b = SRC_FORMAT_CODE[o.fmt_a], SRC_FORMAT_CODE[o.fmt_b]
        out.append({"node": o.node, "kind": o.kind, "a": o.a, "b": o.b, "fmt_a": o.fmt_a, "fmt_b": o.fmt_b,
                    "phases": o.phases, "slot": o.slot,
                    "cfg64": _hex(desc[0]), "cfg72": _hex(0x20 | code_a), "cfg112": _hex(desc[1]), "cfg120": _hex(code_b),
                    "zeroacc": [_w("ZEROACC", clear_mode=1, use_32_bit_mode=1, addr_mode=0, where=4 * o.slot + f)
                                for f in range(4)] if o.kind == "ELWMUL" else []})
    return out


def render(plan: KernelPlan) -> dict[str, str]:
    _check(plan)
    r = list(plan.ranges) or [1]
    inputs = [_stream_ctx(plan, s, j) for j, s in enumerate(plan.inputs)]
    out = _stream_ctx(plan, plan.output, None)
    formats = [s["fmt"] for s in inputs]
    mixed = len(set(formats)) > 1
    w = tensix_words()
    w["srca_ovrd_initial"] = w["srca_ovrd_on"] if formats[0] == "bf16" else w["srca_ovrd_off"]
    unp_init = dict(UNPACK_CFG[formats[0]]) | UNPACK_CFG_COMMON
    if "bf16" in formats:
        unp_init[120] = FORMAT_CODE["bf16"]   # unpacker 1 tags its zeroed SrcB bank as bf16
    ctx = {
        "name": plan.name, "inputs": inputs, "out": out, "mixed": mixed, "any_bf16": "bf16" in formats,
        "r_params": ", ".join(f"uint32_t r{k}" for k in range(len(r))),
        "r_unused": "".join(f"(void)r{k}; " for k in range(len(r))),
        "r_args": ", ".join(f"r[{k}]" for k in range(len(r))),
        "w": w, "out_slot": plan.sfpu.out_slot,
        "unp": {"init": {i: _hex(v) for i, v in unp_init.items()},
                "fp32": {i: _hex(v) for i, v in UNPACK_CFG["fp32"].items()},
                "bf16": {i: _hex(v) for i, v in UNPACK_CFG["bf16"].items()}},
        "pck": {i: _hex(v) for i, v in PACK_CFG[out["fmt"]].items()},
        "alu_format": _hex(alu_format_word(formats, out["fmt"])),
        "sfpu": {"setup": [_hex(x) for x in plan.sfpu.setup], "body": [_hex(x) for x in plan.sfpu.body]},
        "red": None if plan.reduce is None else {
            "acc_init": [_hex(x) for x in plan.reduce.acc_init], "finish": [_hex(x) for x in plan.reduce.finish],
            "post_setup": [_hex(x) for x in plan.reduce.post.setup],
            "post_body": [_hex(x) for x in plan.reduce.post.body], "acc_reg": plan.reduce.acc_reg,
            "lanes": plan.reduce.lanes, "acc_slot": plan.reduce.acc_slot, "steps": plan.reduce.steps,
            "group_store": [_hex(x) for x in plan.reduce.group_store],
            "post_skip": [_hex(x) for x in plan.reduce.post_skip],
            "pass1": None if plan.reduce.pass1 is None else {   # two-pass reductions: the first pass
                "setup": [_hex(x) for x in plan.reduce.pass1.sfpu.setup],
                "body": [_hex(x) for x in plan.reduce.pass1.sfpu.body],
                "acc_init": [_hex(x) for x in plan.reduce.pass1.acc_init],
                "finish": [_hex(x) for x in plan.reduce.pass1.finish],
                "group_store": [_hex(x) for x in plan.reduce.pass1.group_store], "slot": plan.reduce.pass1.slot}},
    }
    # SFPU body issue: a body of <= 32 words is recorded once in the replay buffer and each tile's 32 row steps are
    # one MOP (template 1: 32 x REPLAY of the body) instead of 32 x body TTI pushes from TRISC1 (same instruction
    # stream after the MOP/replay expanders; the emulator can then run the row steps batched)
    body = plan.sfpu.body
    ctx["sfpu_replay"] = len(body) <= 32 and (plan.reduce is None or plan.reduce.steps == 32)
    if ctx["sfpu_replay"]:
        replay = isa.encode("REPLAY", load_mode=0, execute_while_loading=0, len=len(body), start_idx=0)
        nop = isa.encode("NOP")
        ctx["mop_cfg_base"] = _hex(layout.MOP_CFG_BASE)
        # MopCfg: OuterCount 1, InnerCount rows_per_mop, StartOp/EndOp0/EndOp1 NOP, LoopOp REPLAY, LoopOp1 NOP (no
        # alternation), Loop0Last/Loop1Last REPLAY
        rows_per_mop = 32
        while rows_per_mop > 1 and rows_per_mop * len(body) > MOP_EXPANSION_LIMIT:
            rows_per_mop //= 2
        ctx["mop_count"] = 32 // rows_per_mop
        ctx["mop_cfg"] = [_hex(v) for v in (1, rows_per_mop, nop, nop, nop, replay, nop, replay, replay)]
        ctx["replay_record"] = _w("REPLAY", load_mode=1, execute_while_loading=0, len=len(body), start_idx=0)
        ctx["mop_body"] = _w("MOP", mop_type=1, loop_count=0, zmask_lo16_or_loop_count=0)
    if plan.reduce is not None:
        ctx["out_slot"] = plan.reduce.post.out_slot
    if plan.fpu_ops:   # FPU placement: operands to SrcA/SrcB, unpacker 0 reconfigured per input (so always "mixed")
        ctx["w"] = w | fpu_words()
        ctx.update(fpu=fpu_ctx(plan), mixed=True, unp1_static={i: _hex(v) for i, v in UNP1_CFG_STATIC.items()})
    else:
        ctx["fpu"] = []
    for s in inputs:
        s["dst"] = plan.dst_inputs is None or s["j"] in plan.dst_inputs
    ctx["any_fpu"] = bool(plan.fpu_ops) or any(s["fmt"] == "bf16" and s["dst"] for s in inputs)
    return kernel_sources(ctx, "reader.c.j2", "writer.c.j2", "compute.c.j2", args_header(plan))


def kernel_sources(ctx: dict, reader: str, writer: str, compute: str, args_h: str) -> dict[str, str]:
    """The five core sources (one compute source, compiled once per TRISC) and the generated headers of a kernel."""
    compute_src = _env.get_template(compute).render(ctx)
    return {
        "brisc": _env.get_template(reader).render(ctx),
        "ncrisc": _env.get_template(writer).render(ctx),
        "trisc0": compute_src, "trisc1": compute_src, "trisc2": compute_src,
        "tt_isa.h": isa.c_header(), "tt_layout.h": layout.c_header(), "args.h": args_h,
    }


def split(rendered: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """(sources per core, generated headers) as tt_backend.runtime.compile.compile_kernel takes them."""
    return ({c: rendered[c] for c in CORE_SOURCES if c in rendered},
            {h: rendered[h] for h in HEADERS if h in rendered})
