"""The matrix engine's pipeline, shared by the FPU matmul and the FPU sum (a matmul against a tile of ones): whole-tile
unpacks of both operands (SrcA, SrcB), MVMUL address-modifier slots and one K block's MVMULs per fidelity phase, and
the thread words around them (docs/fpu_path.md §3, 7, 8).
"""
from __future__ import annotations

from tt_backend.lowering.codegen.tensix import SEM_FREE, SEM_MATHDONE, tensix_words
from tt_backend.lowering.codegen.words import word_u32

UNPACK_CFG_MM = {   # docs/fpu_path.md §3 (whole-tile unpacks, both unpackers)
    "bf16": {64: 0x04000015, 72: 5, 112: 0x04000015, 120: 5},
    "tf32": {64: 0x04000010, 72: 4, 112: 0x04000010, 120: 4},
}
UNPACK_CFG_MM_COMMON = {65: 0x00010001, 73: 0xF, 84: 0x00400040, 86: 0x04000400, 92: 0, 50: 0,
                        113: 0x00010001, 121: 0xF, 59: 0}
ALU_FORMAT_MM = {"bf16": 0x20AA0000, "tf32": 0x20880000}   # SrcA/SrcB format, Dstacc fp32, Fp32_enabled
# MVMUL address-modifier slots (docs/fpu_path.md §7): (AB value, DST value)
MVMUL_SLOTS = {0: (0x0800, 0), 1: (0x1800, 0), 2: (0x1810, 0), 3: (0x2810, 0), 4: (0x8080, 0x2000),
               5: (0x8080, 0x8000), 7: (0, 0)}
# one phase of a 32x32x32 MVMUL (section 8.5): (slot, dst row)
MVMUL_PHASE = [(0, 0), (1, 8), (0, 32), (2, 40), (0, 16), (1, 24), (0, 48), (3, 56),
               (0, 0), (1, 8), (0, 32), (2, 40), (0, 16), (1, 24), (0, 48), (4, 56)]


def mvmul_words(phases: int, release: int = 3) -> list[str]:
    """All MVMULs of one K block: `phases` x 16; the very last uses slot 5 (Src RWCs and the phase to 0) and
    releases the Src banks of `release` (bit 0 SrcA, bit 1 SrcB)."""
    words = []
    for p in range(phases):
        for i, (slot, dst) in enumerate(MVMUL_PHASE):
            last = p == phases - 1 and i == 15
            words.append(word_u32("MVMUL", addr_mode=5 if last else slot, dst=dst, clear_dvalid=release if last else 0))
    return words


def matmul_words(phases: int) -> dict:
    """The words of the matrix-engine pipeline (both unpackers take whole tiles, MVMUL into an fp32 Dst tile) on top
    of `tensix_words`, whose packer words it keeps; `phases` fidelity phases per K block."""
    w = tensix_words()   # the packer words are the elementwise kernels' (fp32 Dst tile at row 0)
    w.update({
        "seminit_mathdone": word_u32("SEMINIT", max_value=1, init_value=0, sem_sel=1 << SEM_MATHDONE),
        "seminit_free": word_u32("SEMINIT", max_value=1, init_value=1, sem_sel=1 << SEM_FREE),
        "srca_ovrd_on": word_u32("SETC16", setc16_reg=5, setc16_value=4),
        "unpack_misc": word_u32("SETC16", setc16_reg=41, setc16_value=0),
        "unp_adcxy_reset": word_u32("SETADCXY", cnt_set_mask=3, bit_mask=0xA),
        "unp_adczw_reset": word_u32("SETADCZW", cnt_set_mask=3, bit_mask=0xF),
        "unp_adcxx_tile": word_u32("SETADCXX", cnt_set_mask=3, x_end2=1023, x_start=0),
        # B7 config; C0 ThCon | C1/C2 unpackers
        "stall_cfg_unpack": word_u32("STALLWAIT", stall_res=0x80, wait_res=0x7),
        "wrcfg_unp0_base": word_u32("WRCFG", gpr_address=4, cfg_reg=76),
        "wrcfg_unp1_base": word_u32("WRCFG", gpr_address=5, cfg_reg=124),
        "unpacr_srca": word_u32("UNPACR", unpack_block_selection=0, addr_mode=1, ovrd_thread_id=1, set_dat_valid=1,
                                last=1),
        "unpacr_srcb": word_u32("UNPACR", unpack_block_selection=1, addr_mode=1, ovrd_thread_id=1, set_dat_valid=1,
                                last=1),
        "clr_dvalid_enable": word_u32("SETC16", setc16_reg=7, setc16_value=0),
        "math_offset0": word_u32("SETC16", setc16_reg=1, setc16_value=0),
        "setrwc_all": word_u32("SETRWC", bit_mask=0xF),
        "zeroacc": zeroacc_slot(0),
        # per Dst slot s (64 fp32 rows): its four 16-row faces, 32-bit face indices 4s..4s+3 (math offset 0)
        "zeroacc_slot": [zeroacc_slot(s) for s in range(8)],
        "stall_sync_math_fpu": word_u32("STALLWAIT", stall_res=0x2, wait_res=0x10),   # B1 sync; C4 FPU
        "sempost_mathdone": word_u32("SEMPOST", sem_sel=1 << SEM_MATHDONE),
        "slots": [(word_u32("SETC16", setc16_reg=12 + k, setc16_value=ab),
                   word_u32("SETC16", setc16_reg=28 + k, setc16_value=d))
                  for k, (ab, d) in MVMUL_SLOTS.items()],
        "mvmul": mvmul_words(phases),
        # the K block's last MVMUL when the A tile in SrcB serves the next output tile too: SrcA's bank only
        "mvmul_last_keep_b": mvmul_words(phases, release=1)[-1],
        # one unpacker's base and Z counters rewritten while the other one works: B7 config; C0 ThCon | C1 unpacker 0
        # (tensix_words' stall_cfg_unpack, which this dict replaces by the wait for both) or C2 unpacker 1
        "stall_cfg_unp0": w["stall_cfg_unpack"],
        "stall_cfg_unp1": word_u32("STALLWAIT", stall_res=0x80, wait_res=0x5),
        "unp0_adczw_reset": word_u32("SETADCZW", cnt_set_mask=1, bit_mask=0xF),
        "unp1_adczw_reset": word_u32("SETADCZW", cnt_set_mask=2, bit_mask=0xF),
    })
    return w


def zeroacc_slot(slot: int) -> list[str]:
    """ZEROACC of Dst slot `slot` (rows 64 slot .. 64 slot + 63 of the fp32 Dst), face by face: ZEROACC's 32-bit
    face index is absolute within the Dst half the math offset selects (0 here), 16 rows each."""
    return [word_u32("ZEROACC", clear_mode=1, use_32_bit_mode=1, addr_mode=7, where=4 * slot + f) for f in range(4)]


# Per unpacker (0: SrcA, the matmul's B; 1: SrcB, its A), what face_row_words and face_row_cfg depend on: the ADC set
# (SETADCXX / SETADCXY cnt_set_mask), the replay buffer entries its face-row UNPACRs are recorded in (the thread's
# 32-entry buffer holds both operands' 15)
FACE_ROW_ADC = {0: 1, 1: 2}
FACE_ROW_REPLAY = {0: 16, 1: 0}


def face_row_words(unpacker: int, tiles: int = 1) -> dict:
    """Unpacker `unpacker` taking a tile out of a row-major panel instead of a tilized tile (the FPU matmul's A in
    SrcB, fpu_matmul.a_panel_rows; its B in SrcA, fpu_matmul.b_panel_rows): the row length as the tile's x_dim, so ADC
    ch0 (x, y, z) addresses datum x + y * row + z * 16 rows (y_dim 16) from the unpacker's base. Per face: ch0 y
    := 0, the face's 16 columns as the x range (SETADCXX; cols[j]: of the j-th of `tiles` tiles side by side from
    the base, so that consecutive tiles of a row need no base rewrite), then 16 UNPACRs of one face row each, every
    one stepping the source row (ch0 y) and the Src row (ch1 z, Zstride one row: ttsim does not take a RISC-V write
    of unpacker 1's Ystride word, cfg 58; unpacker 0 adds its ch1 counters to Dest_cntx0_address only with
    UNP0_ADD_DEST_ADDR_CNTR, face_row_cfg); the last of face 1 also steps ch0 z (faces 2 and 3 are rows 16-31), the
    last of face 3 hands the bank to the FPU. The tile's SETADCZW zeroes both z counters first. Same Src contents as
    one whole-tile UNPACR of the tilized tile (docs/fpu_path.md §3, §5)."""
    row = dict(unpack_block_selection=unpacker, ovrd_thread_id=1, last=1)
    adc, at = FACE_ROW_ADC[unpacker], FACE_ROW_REPLAY[unpacker]
    return {
        "adcy0": word_u32("SETADCXY", cnt_set_mask=adc, bit_mask=0x2),          # ch0 y := 0
        "cols": [[word_u32("SETADCXX", cnt_set_mask=adc, x_start=32 * j + c, x_end2=32 * j + c + 15) for c in (0, 16)]
                 for j in range(tiles)],
        "row": word_u32("UNPACR", addr_mode=0x14, **row),                        # ch0 y += 1, ch1 z += 1
        "row_down": word_u32("UNPACR", addr_mode=0x15, **row),                   # and ch0 z += 1
        "row_last": word_u32("UNPACR", addr_mode=0x14, set_dat_valid=1, **row),
        # a face's first 15 row UNPACRs, recorded once in thread 0's replay buffer and replayed per face: the
        # RISC-V pushes 4 words per face instead of 18
        "record": word_u32("REPLAY", load_mode=1, execute_while_loading=0, len=15, start_idx=at),
        "replay": word_u32("REPLAY", load_mode=0, execute_while_loading=0, len=15, start_idx=at),
    }


UNP0_X_DIM = 86    # Tile_x_dim_cntx0 [15:0] beside the cntx1 one [31:16] (the matmul rewrites it per block of B)
UNP0_X_DIM_HIGH = UNPACK_CFG_MM_COMMON[UNP0_X_DIM] & 0xFFFF0000
UNP0_DESC1 = 65    # unpacker 0's TileDescriptor word 1: y_dim 16 for the face-row walk, 1 for whole tiles
FACE_ROW_Y_DIM = 0x00010010   # TileDescriptor word 1 of the face-row walk: y_dim 16


def face_row_cfg(unpacker: int, row_datums: int) -> dict[int, int]:
    """Unpacker `unpacker`'s configuration for face_row_words on bf16 rows of `row_datums`: the x_dim (unpacker 1:
    its TileDescriptor, cfg 112; unpacker 0: Tile_x_dim_cntx0, cfg 86, which overrides its descriptor's), y_dim 16
    (TileDescriptor word 1, cfg 113 / 65: the ch0 z stride is 16 rows), Zstride 32 bytes (UNP1 cfg 59 / UNP0 cfg 57:
    one Src row of bf16); unpacker 0 also UNP0_ADD_DEST_ADDR_CNTR (cfg 50 bit 8), without which its Src address is
    Dest_cntx0_address alone."""
    assert row_datums < 1 << 16, "a 16-bit x_dim"
    if unpacker:
        return {112: row_datums << 16 | UNPACK_CFG_MM["bf16"][112] & 0xFFFF, 113: FACE_ROW_Y_DIM, 59: 32}
    return {UNP0_X_DIM: UNP0_X_DIM_HIGH | row_datums, UNP0_DESC1: FACE_ROW_Y_DIM, 57: 32, 50: 1 << 8}


# The B tilize pass on the Tensix (fpu_matmul with b_layout "tensix"; tests/support/pack_cases.py walk_tilize_config,
# bit-identical on ttsim): unpacker 0's face-row walk into SrcA, eight MOVA2Ds of 8 rows into Dst16b (cfg 1 with
# Fp32_enabled = 0 and Dstacc BF16 for the pass: MOVA2D writes a bf16 SrcA bank as 16-bit Dst rows), the packer
# writing the tile in face layout as bf16 from 16-bit rows (Read_32b_data = 0)
ALU_FORMAT_TILIZE = 5 << 25 | 5 << 21 | 5 << 17   # Dstacc, SrcB, SrcA BF16; Fp32_enabled 0
PACK_CFG_TILIZE = {18: 0, 70: 0x551, 14: 0}      # Read_32b_data 0, BF16 -> BF16, Ystride1 0 (face layout)
MOVA2D_SLOT = 6                                   # a math-thread address modifier the MVMULs leave free


def tilize_pass_words() -> dict:
    """The math thread's words of the B tilize pass: the MOVA2D address modifier (Src and Dst += 8 rows), MOVA2D
    of 8 rows (instr_mod 2) and the SrcA bank handed back (SETRWC clear_ab_vld, Src RWCs := 0)."""
    return {"mova2d_slot": (word_u32("SETC16", setc16_reg=12 + MOVA2D_SLOT, setc16_value=8),
                            word_u32("SETC16", setc16_reg=28 + MOVA2D_SLOT, setc16_value=8)),
            "mova2d": word_u32("MOVA2D", dst=0, src=0, instr_mod=2, addr_mode=MOVA2D_SLOT),
            "release_srca": word_u32("SETRWC", clear_ab_vld=1, bit_mask=3)}


def dst_token_words(slots: int) -> dict:
    """MATHDONE and FREE counting up to `slots` Dst sets in flight between the math thread and the packer's thread
    (FREE starts full): with an epilogue the matmul's groups alternate between two sets of Dst slots
    (fpu_matmul.DST_SET), so the math thread waits only for the packer to be done with the set it reuses."""
    return {"seminit_mathdone": word_u32("SEMINIT", max_value=slots, init_value=0, sem_sel=1 << SEM_MATHDONE),
            "seminit_free": word_u32("SEMINIT", max_value=slots, init_value=slots, sem_sel=1 << SEM_FREE)}


def packed_rows_words(pitch: int) -> dict:
    """The packer writing a Dst tile row-major into a panel of `pitch`-byte rows in L1 instead of a face-layout slot
    (fpu_matmul with matmul_spec.out_packed_rows): one PACR stream per face row (read_intf_sel=1: one Dst row of 16
    datums, `last` on each), each placed by a SETADC of ch1.Y: with Ystride1 = 32 bytes (16 bf16, half a tile row,
    packed_rows_cfg) the stream starts at L1_Dest + 32 * ch1.Y, so face f's row r (tile row 16 (f // 2) + r,
    columns 16 (f % 2)..) goes to ch1.Y = (tile row) * pitch / 32 + f % 2. The Dst side walks the tile as the
    face-layout pack does (ADDR_MOD_PACK_SEC0: Y += 1 per row, SEC1: next face, SEC2: tile done). The same scheme
    as tests/diff/test_diff_pack_ttsim.py's "untilize" cases, bit-exact against ttsim."""
    assert pitch % 32 == 0 and (31 * pitch) // 32 + 1 < 1 << 13, "ch1.Y is a 13-bit counter"
    rows = []
    for face in range(4):
        for r in range(16):
            rows.append(word_u32("SETADC", cnt_set_mask=4, channel_index=1, dimension_index=1,
                                 value=(16 * (face // 2) + r) * pitch // 32 + face % 2))
            rows.append(word_u32("PACR", read_intf_sel=1, last=1, addr_mode=0 if r < 15 else 2 if face == 3 else 1))
    return {"pack_sec0": word_u32("SETC16", setc16_reg=37, setc16_value=1), "pacr_panel_rows": rows}


def packed_rows_cfg(pack_cfg: dict[int, int]) -> dict[int, int]:
    """The packer's configuration for packed_rows_words from the bf16 one: In = Out = INT16 (the stored high half of a
    Dst word, unconverted: the epilogue's "dst16" stores, opaque bits, make it the rounded bf16; the math thread sets
    ALU_FORMAT_SPEC_REG2_Dstacc to INT16 to match, PACKED_ROWS_DSTACC), Ystride1 (cfg 14) 32 bytes."""
    return pack_cfg | {70: 0x991, 14: 32 << 16}


PACKED_ROWS_DSTACC = 9 << 25   # cfg 1 ALU_FORMAT_SPEC_REG2_Dstacc = INT16: read only by the packer (docs/fpu_path.md §8.6)
