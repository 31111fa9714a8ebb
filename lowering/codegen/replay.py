"""An SFPU body issued per tile by the MOP expander instead of word by word: the body is recorded once in TRISC1's
replay buffer (at most REPLAY_WORDS words) and each tile's row steps are one or more MOPs of template 1 (InnerCount x
REPLAY of the body). Same instruction stream after the expanders as pushing every word with a TTI, at a fraction of
the RISC-V's issue cycles; the emulator can run the row steps batched. Used by the tile pipeline's SFPU programs
(lowering/families/tile_render.py) and the matmul's Dst epilogue (lowering/families/matmul_epilogue.py).
"""
from __future__ import annotations

from tt_backend.lowering.codegen.words import hex_u32, word_u32
from tt_backend.chip import isa, layout

REPLAY_WORDS = 32
# Instructions one MOP may expand to: ttsim puts a MOP's whole expansion into its thread FIFO at once and stops with
# "pipe 1 inst fifo full" beyond 512 entries (seen with 32 x 22-word replays), so a tile's row steps are split into
# MOPs of at most this many instructions, with a wait for the thread to drain between them.
MOP_EXPANSION_LIMIT = 256


def replay_issue(body_len: int, row_steps: int = 32) -> dict | None:
    """The template context of a body of `body_len` words run `row_steps` times per tile (a power of two), or None
    when the body does not fit the replay buffer: mop_cfg_base, mop_cfg (the nine MopCfg words), replay_record (the
    REPLAY word that records the body), mop_body (the MOP word), mop_count (MOPs per tile), mop_steps (row steps)."""
    if body_len > REPLAY_WORDS:
        return None
    replay = isa.encode("REPLAY", load_mode=0, execute_while_loading=0, len=body_len, start_idx=0)
    nop = isa.encode("NOP")
    rows_per_mop = row_steps
    while rows_per_mop > 1 and rows_per_mop * body_len > MOP_EXPANSION_LIMIT:
        rows_per_mop //= 2
    # MopCfg: OuterCount 1, InnerCount rows_per_mop, StartOp/EndOp0/EndOp1 NOP, LoopOp REPLAY, LoopOp1 NOP (no
    # alternation), Loop0Last/Loop1Last REPLAY
    return {"mop_cfg_base": hex_u32(layout.MOP_CFG_BASE), "mop_count": row_steps // rows_per_mop,
            "mop_steps": row_steps,
            "mop_cfg": [hex_u32(v) for v in (1, rows_per_mop, nop, nop, nop, replay, nop, replay, replay)],
            "replay_record": word_u32("REPLAY", load_mode=1, execute_while_loading=0, len=body_len, start_idx=0),
            "mop_body": word_u32("MOP", mop_type=1, loop_count=0, zmask_lo16_or_loop_count=0)}
