"""The tile-pipeline renderer (tt_backend.lowering.families.tile_render) and the templates, without a compiler: the
words, config values and structure of the sources."""
from __future__ import annotations

import re

import pytest

from tt_backend.lowering.codegen import tensix
from tt_backend.lowering.codegen.sources import CORE_SOURCES, HEADERS, split
from tt_backend.lowering.families.elementwise import ElementwisePlan
from tt_backend.lowering.families.tile_plan import allocate_l1
from tt_backend.lowering.families.tile_render import second_dst_group
from tt_backend.lowering.index import IndexExpr
from tt_backend.lowering.plan import Buffer, SfpuProgram, Stream
from tt_backend.chip import isa, layout

BODY = [isa.encode("SFPLOAD", lreg_ind=0, instr_mod0=3, dest_reg_addr=0),
        isa.encode("SFPLOAD", lreg_ind=1, instr_mod0=3, dest_reg_addr=64),
        isa.encode("SFPADD", lreg_src_a=10, lreg_src_b=0, lreg_src_c=1, lreg_dest=2),
        isa.encode("SFPSTORE", lreg_ind=2, instr_mod0=3, sfpu_addr_mode=1, dest_reg_addr=128)]


def plan(b_dtype="float32", out_dtype="bfloat16", gather=True, out_contig=True, setup=()):
    n = 3000
    esz = {"float32": 4, "bfloat16": 2, "int32": 4, "bool": 1}
    bufs = [Buffer(0, out_dtype, n * esz[out_dtype]), Buffer(1, "float32", 4 * n), Buffer(2, b_dtype, n * esz[b_dtype])]
    r0, r1 = IndexExpr.range_var(0), IndexExpr.range_var(1)
    p = ElementwisePlan("add_t", (30, 100), bufs,
                   [Stream(1, "float32", r0 * 100 + r1, contiguous=True),
                    Stream(2, b_dtype, r1 * 30 + r0 if gather else r0 * 100 + r1, valid=r1.lt(99) if gather
                           else None, contiguous=not gather)],
                   Stream(0, out_dtype, r0 * 100 + r1 if out_contig else r1 * 30 + r0, contiguous=out_contig),
                   SfpuProgram(list(setup), BODY, 3, 2))
    return allocate_l1(p)


def test_render_returns_five_sources_and_three_headers(monkeypatch):
    monkeypatch.setenv("TT_SHARED_PROGRAMS", "0")         # the kernel's own code on every core
    out = plan().render()
    assert set(out) == set(CORE_SOURCES) | set(HEADERS)
    assert out["trisc0"] == out["trisc1"] == out["trisc2"]          # one source, three -D builds
    sources, headers = split(out)
    assert set(sources) == set(layout.CORES) and set(headers) == {"tt_isa.h", "tt_layout.h", "args.h"}
    assert headers["tt_isa.h"] == isa.c_header() and headers["tt_layout.h"] == layout.c_header()


# the words docs/sfpu_path.md §10 lists, by the names the templates use
DOC_WORDS = {
    "unp_adcxy_reset": 0x5120000B, "unp_adczw_reset": 0x5420000F, "unp_adcxx_face": 0x5E23FC00,
    "stall_cfg_unpack": 0xA2400003, "wrcfg_unp_base": 0xB004004C, "wrcfg_unp_dest": 0xB0050054,
    "unp_adczw_tile": 0x54200005, "unpacr_dst_face": 0x42088081, "stall_sync_unpack": 0xA2010002,
    "sempost_unpacked": 0xA4000004, "unpacr_srca_face": 0x420080C1, "unpacr_nop_zero_srcb": 0x43800101,
    "srca_ovrd_on": 0xB2050004, "dst_sec1_incr2": 0xB21D0002, "ab_sec2_srca8": 0xB20E0008,
    "dst_sec2_incr8": 0xB21E0008, "setrwc_all": 0x37000007, "elwadd8": 0x28008000, "setrwc_release": 0x37C00003,
    "setrwc_dst": 0x37000004, "stall_sync_math": 0xA2010810, "sempost_mathdone": 0xA4000008,
    "pack_sec0": 0xB2250004, "pack_sec1": 0xB2261020, "pack_sec2": 0xB2272020, "pck_adcxy_reset": 0x5180000B,
    "pck_adczw_reset": 0x5480000F, "pck_adcxx_row": 0x5E803C00, "stall_cfg_pack": 0xA2400009,
    "wrcfg_pck_dest": 0xB0040045, "wrcfg_pck_offset": 0xB00500B4, "pacr_rows": 0x41000000,
    "pacr_next_face": 0x41008000, "pacr_last": 0x41010001, "stall_sync_pack": 0xA2010008, "sempost_free": 0xA4000010,
}


def test_tensix_words_match_the_reference():
    w = tensix.tensix_words()
    for name, word in DOC_WORDS.items():
        assert int(w[name].rstrip("u"), 16) == word, name
    assert int(w["math_offset"][0].rstrip("u"), 16) == 0xB2010000
    # one Dst group in flight: every semaphore has max 1, FREE starts at 1
    assert [isa.decode(int(w[k].rstrip("u"), 16))[1] for k in ("seminit_unpacked", "seminit_free")] == [
        {"sem_sel": 1, "init_value": 0, "max_value": 1}, {"sem_sel": 4, "init_value": 1, "max_value": 1}]


@pytest.mark.parametrize("ins,out,word", [(["fp32"], "fp32", 0x60000000), (["fp32"], "bf16", 0x6A000000),
                                          (["bf16"], "fp32", 0x60AA0000), (["bf16", "fp32"], "bf16", 0x6AAA0000)])
def test_alu_format_word(ins, out, word):
    assert tensix.alu_format_word(ins, out) == word


def test_config_values_per_path():
    fp32 = plan(out_dtype="float32").render()["trisc1"]   # the compute source (TRISC0/2 may run shared programs)
    assert "tt_cfg_write(64, 0x01000010u)" in fp32 and "tt_cfg_write(57, 0x00000400u)" in fp32
    assert "unpack_select" not in fp32 and "tt_cfg_write(120" not in fp32
    assert "tt_cfg_write(70, 0x00000001u)" in fp32                       # packer fp32 -> fp32
    bf = plan(out_dtype="bfloat16").render()["trisc1"]
    assert "tt_cfg_write(70, 0x00000551u)" in bf and "tt_cfg_write(12, 0x00200002u)" in bf
    mixed = plan(b_dtype="bfloat16").render()["trisc1"]
    assert "unpack_select(0)" in mixed and "unpack_select(1)" in mixed and "tt_cfg_write(120, 0x00000005u)" in mixed
    # input 0 (fp32) goes to Dst slot 0 of the tile's Dst group (the plan has several tiles: the second group is 3
    # slots on, past the per-tile slots 0-2), input 1 (bf16) through SrcA; TRISC0's thread ELWADDs only input 1 into
    # slot 1 (elwadd_on_unpacker: 2 per face), TRISC1's none
    assert "/* Dest_cntx0_address: slot 0 of the tile's group" in mixed
    assert "tt_set_gpr(5, grp ? 3136u : 64u);" in mixed.splitlines()[mixed.splitlines().index(
        "            /* Dest_cntx0_address: slot 0 of the tile's group + the 4-row bias */") + 1]
    compute = plan(b_dtype="bfloat16").render()["trisc1"]
    math = compute[compute.index("#elif defined(TRISC_MATH)"):compute.index("#elif defined(TRISC_PACK)")]
    assert "slot 1" in mixed and mixed.count("0x28008000u") == 8 and "0xB2010040u" in mixed
    assert "0x28008000u" not in math


def test_second_dst_group():
    """The second Dst group's offset: the smallest at which the per-tile slots, moved, meet none of the first group's
    (a once-sent head's included) and stay inside Dst; none with one tile per core or no room."""
    p = plan()                                          # 3 tiles on one core
    per_tile = [{"j": 0, "dst": True, "once": False}, {"j": 1, "dst": True, "once": False}]
    assert second_dst_group(p, per_tile, []) == 3       # slots 0, 1 and the output 2
    head = [{"j": 0, "dst": True, "once": False}, {"j": 1, "dst": True, "once": True}]
    assert second_dst_group(p, head, []) == 3           # per tile 0 and 2: offset 1 would move slot 0 onto the head
    p.sfpu = SfpuProgram([], BODY, 6, 2)                # output 2 and spills to 5: per-tile slots 0-5 of 8, no room
    assert second_dst_group(p, per_tile, []) is None
    p = plan()
    p.cores = p.n_tiles                                 # one tile per core: nothing to overlap
    assert second_dst_group(p, per_tile, []) is None


def test_sfpu_words_emitted_once_per_position():
    src = plan(setup=[isa.encode("SFPLOADI", lreg_ind=2, imm16=0x4000)]).render()["trisc1"]
    math = src[src.index("#elif defined(TRISC_MATH)"):]
    assert "TTI(0x71204000u);" in math
    # the body (<= 32 words) is recorded once in the replay buffer; each tile issues one MOP (32 x REPLAY)
    rec = math[math.index(f"TTI(0x{isa.encode('REPLAY', load_mode=1, len=len(BODY)):08X}u);"):]
    assert re.findall(r"TTI\((0x[0-9A-F]+)u\)", rec)[1:1 + len(BODY)] == [f"0x{w:08X}" for w in BODY]
    assert math.count(f"TTI(0x{isa.encode('MOP', mop_type=1):08X}u);") == 1


def test_stream_modes_and_args_header():
    p = plan(b_dtype="bool", out_dtype="bool", gather=True, out_contig=False)
    out = p.render()
    reader, writer, args = out["brisc"], out["ncrisc"], out["args.h"]
    assert "read_in0(" in reader and "gather_in1(" in reader
    assert "((r1 < 99))" in reader and "((r1 * 30) + r0)" in reader and "TT_L1_U8(p) != 0u" in reader
    assert "scatter_out(" in writer and "TT_L1_U8(p) = v != 0u" in writer
    assert f"#define IN1_STAGE 0x{p.l1['stage_in1']:X}u" in args and f"#define OUT_STAGE 0x{p.l1['stage_out']:X}u" in args
    assert "tt_ranges[TT_N_RANGES] = {30u, 100u}" in args and "#define BUF2_NBYTES 3000u" in args
    contig_bool = plan(b_dtype="bool", out_dtype="bool", gather=False).render()
    assert "widened to u32 0/1 in place" in contig_bool["brisc"]
    assert "narrow u32 words to bool bytes in place" in contig_bool["ncrisc"]


def test_render_rejects_bad_plans():
    p = plan()
    p.l1 = {}
    with pytest.raises(ValueError, match="allocate_l1"):
        p.render()
    p = plan(gather=False)
    p.buffers[2].nbytes = 100
    with pytest.raises(ValueError, match="contiguous over 3000 elements"):
        p.render()
    p = plan()
    p.sfpu = SfpuProgram([], [0xC0000001], 3, 2)
    with pytest.raises(ValueError, match="not a Tensix word"):
        p.render()


def test_sync_area_is_outside_images_and_data():
    assert layout.SYNC_BASE >= layout.IMAGE_SLOT["trisc2"] + layout.IMAGE_SLOT_SIZE
    assert layout.SYNC_BASE + layout.SYNC_CB_OFFSET + 8 * layout.SYNC_CB_STRIDE + 32 <= layout.DATA_BASE
