"""The FPU matmul's epilogue: an SFPU pass over each finished fp32 C tile in Dst, between the last MVMUL and the
packer, that does the output's bf16 rounding the writer (a RISC-V) used to do per element. The pack thread runs it
(fpu_matmul.DST_SET: on one set of Dst slots while the math thread's MVMULs fill the other), in place.

Modes (by the matmul's output, `epilogue_mode`):
* "pair" (bf16 output): per row step (4 Dst rows x 8 column pairs) the even and the odd columns are loaded as raw
  32-bit words, each is rounded to bf16, and one word gets the even column's bf16 in its low half and the odd column's
  in its high half. It is stored in the even column (the odd column gets the rounded odd value, so the whole tile is
  defined). The packer writes the tile as fp32 and the writer copies every even word of a face row: 16 bf16 outputs,
  row-major, with no arithmetic per element (blocks/untilize.c.j2, paired). 16 row steps per tile.
* "dst16" (bf16 output whose rows the packer writes row-major, matmul_spec.out_packed_rows): every datum rounded to
  bf16 in the high half of its word, stored as opaque bits (SFPSTORE MOD0_FMT_HI16: without the field order Dst keeps
  a float's high half in), so that the packer's INT16 mode, which copies a Dst word's stored high half
  (docs/fpu_path.md §8.6), writes the rounded bf16 itself, 16 outputs per face row, with no conversion of its own.
  32 row steps per tile.
* "round" (fp32 output of a bf16-rounded result): every datum rounded; the writer copies. 32 row steps per tile.
* None (fp32 output): no epilogue.

The rounding is the writer's (blocks/l1.c.j2 fp32_to_bf16, what tinygrad's cast gives on every non-NaN value): round
to nearest even as integer arithmetic on the fp32 bits, r + 0x7fff + ((r >> 16) & 1), high half kept; a NaN keeps its
sign and high payload with the quiet bit set, (r | 0x400000) >> 16. Raw loads and stores (INT32 mode) neither flush
denormals nor touch NaN, so the bits equal the RISC-V's. The packer's own fp32 -> bf16 conversion is not used: it
rounds ties away from zero, flushes denormals and turns NaN into Inf (docs/sfpu_path.md §8).

In place: the math offset selects the tile's slot. An SFPSTORE's 8x16 block of Dst is not readable for a few cycles
(sfpu_codegen.DST_READ_GAP), so consecutive row steps take different blocks: each step advances the Dst RWC by a
block (BLOCK_ROWS), and a tile is 2 (pair: 4 rows, both column parities per step) or 4 passes (a column parity of 4
rows per step) of 8 steps, each pass starting at its own address within the first block (PASS_OFFSETS, a SETRWC).
Each pass is one MOP (8 x the body: at most 184 instructions, within replay.MOP_EXPANSION_LIMIT), and the passes are
pushed back to back, without waiting for the thread to drain between them: ttsim expands a MOP into the thread's
512-entry FIFO at once, but takes a pushed word (the MOP included) only while that FIFO holds at most 52, so an
expansion this size always fits (ttsim `tensix_can_push_inst`); the hardware's MOP expander emits its expansion one
instruction per cycle, held back by what is downstream (ISA `MOPExpander.md`). The drains had cost the pack thread
about 180 cycles per tile.
"""
from __future__ import annotations

import functools

from tt_backend.lowering.codegen import sfpu_ops as so
from tt_backend.lowering.codegen.replay import replay_issue
from tt_backend.lowering.codegen.sfpu_codegen import assemble, pool_setup
from tt_backend.lowering.codegen.words import hex_u32, word_u32
from tt_backend.lowering.families.matmul_spec import MatmulSpec, out_packed_rows
from tt_backend.lowering.families.mover_cost import epilogue_cycles

ROUND_ADD, QUIET, HIGH = 0x7FFF, 0x00400000, 0xFFFF0000
ROUND_POOL = {ROUND_ADD: 11, so.F32_INF: 12, QUIET: 13}
POOLS = {"pair": ROUND_POOL | {HIGH: 14}, "round": ROUND_POOL | {HIGH: 14},   # the constants, in LReg11-14 (set once)
         "dst16": ROUND_POOL}
EVEN, ODD = 0, 2                      # Imm10 of the even / odd columns of a row step (docs/sfpu_path.md §5.3)
SLOT_STEP = 6                         # the address-modifier slot of the row step's last store (MVMUL leaves 6 free)
STEPS = {"pair": 16, "round": 32, "dst16": 32}     # row steps per tile
BLOCK_ROWS = 8                        # Dst rows of an 8x16 block: the Dst RWC per row step (one block per step)
PASS_OFFSETS = {"pair": (0, 4), "round": (0, 2, 4, 6), "dst16": (0, 2, 4, 6)}   # each pass's first Dst address


def epilogue_mode(spec: MatmulSpec) -> str | None:
    if spec.out.dtype == "bfloat16":
        return "dst16" if out_packed_rows(spec) else "pair"
    return "round" if spec.round_bf16 else None


def round_bf16(e: so.Emitter, r: int, t: tuple[int, int], out: int | None, high: bool) -> None:
    """out = the bf16 of fp32 bits r (the writer's rounding, see the module doc) in out's high half (high: low half
    zero) or its low half (high half zero); out None: left in t[0]'s high half (its low half not cleared). r is kept
    unless out == r; t: two scratch LRegs. 9 instructions (8 for out None)."""
    t1, t3 = t
    e.shl(t1, r, 15)
    e.shr(t1, t1, 31)                               # (r >> 16) & 1
    e.iadd(t1, e.creg(t3, ROUND_ADD))
    e.iadd(t1, r)                                   # r + 0x7fff + lsb
    e.setsgn_imm(t3, r, 0)
    e.gt(t3, e.creg(t3, so.F32_INF))                # NaN lanes: |r| > Inf
    e.or3(t1, r, e.creg(t3, QUIET))
    e.endif()
    if out is None:
        return
    if high:
        e.and3(out, t1, e.creg(t3, HIGH))
    else:
        e.shr(out, t1, 16)


@functools.lru_cache(maxsize=None)
def body(mode: str) -> tuple[int, ...]:
    """One row step's words (the last store advances the Dst RWC by BLOCK_ROWS through slot SLOT_STEP)."""
    e = so.Emitter(POOLS[mode])
    out = 0                                         # in place
    e.load(0, EVEN, so.LOAD_INT32)
    result, store_mode = 0, so.LOAD_INT32
    if mode == "pair":
        e.load(1, ODD, so.LOAD_INT32)
        round_bf16(e, 0, (2, 3), 0, high=False)
        round_bf16(e, 1, (2, 3), 1, high=True)
        e.or3(0, 0, 1)                              # even column's bf16 low, odd column's high
        e.store(1, out + ODD)
    elif mode == "dst16":
        round_bf16(e, 0, (2, 3), None, high=True)
        result, store_mode = 2, so.STORE_HI16       # the packer copies the high half; the low half is never read
    else:
        round_bf16(e, 0, (2, 3), 0, high=True)
    e.store(result, out + EVEN, addr_mode=SLOT_STEP, mod0=store_mode)
    assert not e.wanted, "every constant is pooled"
    return tuple(assemble(e.ins))


def epilogue_tile_cycles(spec: MatmulSpec) -> int:
    """The epilogue's predicted cycles per output tile (mover_cost.epilogue_cycles; 0 without one)."""
    mode = epilogue_mode(spec)
    return 0 if mode is None else epilogue_cycles(len(body(mode)), STEPS[mode])


def epilogue_ctx(spec: MatmulSpec) -> dict | None:
    """The compute template's `epi`: mode, SFPU setup and body words, the address-modifier slot's (AB, Dst) SETC16
    words, the MOP-of-REPLAY issue (codegen/replay.py), the slot the packer takes. None: no epilogue."""
    mode = epilogue_mode(spec)
    if mode is None:
        return None
    words = body(mode)
    issue = replay_issue(len(words), STEPS[mode] // len(PASS_OFFSETS[mode]))
    assert issue is not None, f"the {mode} epilogue fits the replay buffer"
    return {"mode": mode, "setup": [hex_u32(w) for w in pool_setup(POOLS[mode])], "body": [hex_u32(w) for w in words],
            "slot": (word_u32("SETC16", setc16_reg=12 + SLOT_STEP, setc16_value=0),
                     word_u32("SETC16", setc16_reg=28 + SLOT_STEP, setc16_value=BLOCK_ROWS)),
            "passes": [word_u32("SETRWC", bit_mask=4, rwc_d=a) for a in PASS_OFFSETS[mode]],
            **issue}
