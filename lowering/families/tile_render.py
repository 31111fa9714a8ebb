"""Render a tile-pipeline plan (tile_plan.TilePlan: elementwise kernels and SFPU reductions) into the C99 sources of
one kernel (five cores, templates reader.c.j2 / compute.c.j2 / writer.c.j2) plus its generated args.h.
"""
from __future__ import annotations

from tt_backend.lowering.codegen.args_header import ArgsHeader
from tt_backend.lowering.codegen.c_exprs import INDEX_LOAD, INDEX_LOAD_TYPE
from tt_backend.lowering.codegen.sources import kernel_sources
from tt_backend.lowering.codegen.mvmul import dst_token_words
from tt_backend.lowering.codegen.tensix import (FORMAT_CODE, PACK_CFG, SEM_UNPACK_READ, SEM_UNPACKED, UNPACK_CFG,
                                                UNPACK_CFG_COMMON,
                                                alu_format_word, tensix_words)
from tt_backend.lowering.codegen.words import hex_u32, word_u32
from tt_backend.lowering.codegen.l1 import STAGING_BYTES
from tt_backend.lowering.codegen.replay import REPLAY_WORDS, replay_issue
from tt_backend.lowering.codegen.sfpu_codegen import MAX_SLOTS, SETUP
from tt_backend.lowering.families.mover_cost import NOC_BYTES_PER_CYCLE, reads_in_flight
from tt_backend.lowering.families.tile_plan import (CB_DEPTH, READ_AHEAD, WRITE_AHEAD, ReducePass, ReducePlan,
                                                    TilePlan, index_load_buffers, window_bytes)
from tt_backend.lowering.families.tile_streams import reduce_datums, reduce_next_k, stream_ctx
from tt_backend.lowering.placement.choice import FpuOp
from tt_backend.lowering.plan import DTYPE_SIZE, TILE_BYTES, TILE_ELEMS
from tt_backend.chip import isa
from tt_backend.chip.errors import UnsupportedOp

FACE_DATUMS = 256       # datums of one 16x16 face: one UNPACR (unpacker 0's x counter, `unp_adcxx_face`)
TILE_FACES = TILE_ELEMS // FACE_DATUMS


def args_header(plan: TilePlan, generator: str, red: ReducePlan | None, datums: bool = False) -> str:
    """args.h of a tile-pipeline kernel; `datums`: with the reduction layout's datum table (a red affine reader)."""
    ranges = list(plan.ranges) or [1]
    h = ArgsHeader(generator, plan.name,
                   "argument block (plan.arg_words): n_tiles, n_elements, DRAM address of each buffer")
    h.add(f"#define TT_N_INPUTS {len(plan.inputs)}u", f"#define TT_CB_DEPTH {CB_DEPTH}u",
          f"#define READ_AHEAD {READ_AHEAD}u", f"#define WRITE_AHEAD {WRITE_AHEAD}u",
          f"#define TT_TILE_ELEMS {TILE_ELEMS}u", f"#define TT_STAGING_BYTES {STAGING_BYTES}u").buffers(plan.buffers)
    for j, s in enumerate(plan.inputs):
        h.add(f"#define IN{j}_CB 0x{plan.l1[f'cb_in{j}']:X}u", f"#define IN{j}_TILE_BYTES {TILE_BYTES[s.tile_format]}u")
        if f"stage_in{j}" in plan.l1:
            h.add(f"#define IN{j}_STAGE 0x{plan.l1[f'stage_in{j}']:X}u",
                  f"#define IN{j}_STAGE_BYTES {window_bytes(plan, f'in{j}')}u")
    for k in index_load_buffers(plan):
        h.add(f"#define LD{k}_STAGE 0x{plan.l1[f'stage_ld{k}']:X}u")
    h.add(f"#define OUT_CB 0x{plan.l1['cb_out']:X}u", f"#define OUT_TILE_BYTES {TILE_BYTES[plan.output.tile_format]}u")
    if "stage_out" in plan.l1:
        h.add(f"#define OUT_STAGE 0x{plan.l1['stage_out']:X}u")
    h.add("/* this core's tiles [begin, end): the argument words after the buffers (plan.core_arg_words) */",
          f"#define ARG_TILE_BEGIN ARG_BUF({len(plan.buffers)})", f"#define ARG_TILE_END ARG_BUF({len(plan.buffers) + 1})")
    if plan.tile_grid is not None:
        h.add(*_grid_defines(*plan.tile_grid))
    if red is not None:
        h.add(*_reduce_defines(plan, red))
    if datums:
        table = reduce_datums(red)
        h.add("/* datum of each (output cell, kk) of a reduction tile, cell-major (tile_streams.reduce_datums) */",
              f"static const uint16_t tt_red_datums[{len(table)}] = {{{', '.join(map(str, table))}}};")
    return h.add("", "/* iteration space, outermost first; flat index = row-major over it */",
                 f"#define TT_N_RANGES {len(ranges)}",
                 f"static const uint32_t tt_ranges[TT_N_RANGES] = {{{', '.join(f'{r}u' for r in ranges)}}};",
                 "static inline void tt_iter_set(uint32_t *r, uint32_t e)",
                 "{",
                 "    for (int k = TT_N_RANGES - 1; k >= 0; k--) { r[k] = e % tt_ranges[k]; e /= tt_ranges[k]; }",
                 "}",
                 "static inline void tt_iter_next(uint32_t *r)",
                 "{",
                 "    for (int k = TT_N_RANGES - 1; k >= 0; k--) { if (++r[k] < tt_ranges[k]) return; r[k] = 0; }",
                 "}").text()


def _grid_defines(rows: int, columns: int) -> list[str]:
    """The walk of the tiles column by column over a grid of rows x columns tiles (tile_streams.tile_grid)."""
    return ["", f"/* position k of a core's range -> tile: a grid of {rows} x {columns} tiles walked column by column, "
                "the tiles past it in order (tile_streams.tile_grid) */",
            f"#define TT_GRID_ROWS {rows}u", f"#define TT_GRID_COLS {columns}u",
            "static inline uint32_t tt_tile_at(uint32_t k)", "{",
            "    if (k >= TT_GRID_ROWS * TT_GRID_COLS) return k;",
            "    return (k % TT_GRID_ROWS) * TT_GRID_COLS + k / TT_GRID_ROWS;", "}",
            "/* one past the last tile of this core's walk (range ending at position end) down tile t's grid column */",
            "static inline uint32_t tt_column_end(uint32_t t, uint32_t end)", "{",
            "    if (t >= TT_GRID_ROWS * TT_GRID_COLS) return end;",
            "    uint32_t row = t / TT_GRID_COLS, k = (t % TT_GRID_COLS) * TT_GRID_ROWS + row;",
            "    uint32_t left = end - k < TT_GRID_ROWS - row ? end - k : TT_GRID_ROWS - row;",
            "    return t + (left - 1u) * TT_GRID_COLS + 1u;", "}"]


def _reduce_defines(plan: TilePlan, red: ReducePlan) -> list[str]:
    """Reduction layout constants (tile_plan.ReducePlan) and the (output o, reduce index k) -> ranges map."""
    n_out = len(red.out_sizes)
    lines = ["", "/* reduction: outputs o x reduce index k; tile t = group * RED_T + tk (plan.ReducePlan) */",
             f"#define RED_O {red.n_out}u", f"#define RED_K {red.n_red}u", f"#define RED_LANES {red.lanes}u",
             f"#define RED_CELLS {red.cells}u", f"#define RED_T {red.tiles_per_group}u",
             f"#define RED_STEPS {red.steps}u  /* row steps per output (32: all; fewer for short reductions) */",
             f"#define RED_PASSES {red.passes}u  /* a two-pass reduction streams each group's tiles twice */",
             f"#define RED_RES_LANE {min(red.lanes, 8) - 1}u  /* result lane of output 0 after the lane combine */",
             "/* an output's reduce indices in one tile: k = tk * RED_KT + kk (tt_red_datums: the datum of each kk) */",
             "#define RED_KT (RED_STEPS * RED_LANES)",
             "static inline void tt_red_set(uint32_t *r, uint32_t o, uint32_t k)", "{"]
    for i in range(len(plan.ranges) - 1, -1, -1):
        v, size = ("o", plan.ranges[i]) if i < n_out else ("k", plan.ranges[i])
        lines.append(f"    r[{i}] = {v} % {size}u; {v} /= {size}u;")
    lines += ["    (void)o; (void)k;", "}"]
    return lines


def _check(plan: TilePlan) -> None:
    if not plan.l1:
        raise ValueError(f"{plan.name}: plan has no L1 allocation "
                         "(run tt_backend.lowering.families.tile_plan.allocate_l1 first)")
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
    for word in [w for words in plan.sfpu.issued(plan.target.macro_free) for w in words]:
        if not 0 <= word < 0xC0000000:
            raise ValueError(f"{plan.name}: 0x{word:08x} is not a Tensix word")


# --- FPU elementwise ops (lowering/placement/choice.py): in_a -> SrcA (unpacker 0), in_b -> SrcB (unpacker 1), per
# face, then ELWMUL / ELWADD / ELWSUB into a Dst slot, the fidelity phases outside the face's two 8x16 blocks (slot 3 =
# next block, slot 4 = next phase back at the face's first block, slot 5 = the face done: Dst to the next face, which
# becomes the CR; phase 0): a block's next phase waits one block instead of its own write's latency
# (docs/fpu_path.md §7)
SRC_FORMAT_CODE = {"bf16": 5, "tf32": 4}
UNP1_CFG_STATIC = {113: 0x00040001, 121: 0x0000000F, 59: 0}     # y_dim 1, z_dim 4 faces; uncompressed; SrcB row 0


def fpu_words() -> dict:
    return {
        "ab_sec3_block": word_u32("SETC16", setc16_reg=15, setc16_value=0x0808),    # SrcA += 8, SrcB += 8
        "dst_sec3_block": word_u32("SETC16", setc16_reg=31, setc16_value=0x0008),   # Dst += 8
        "ab_sec4_phase": word_u32("SETC16", setc16_reg=16, setc16_value=0x8080),    # SrcA := SrcB := 0 (Clear)
        "dst_sec4_phase": word_u32("SETC16", setc16_reg=32, setc16_value=0x2400),   # Dst := CR, FidelityIncr 1
        "ab_sec5_face": word_u32("SETC16", setc16_reg=17, setc16_value=0),          # (SETRWC resets SrcA/SrcB)
        "dst_sec5_face": word_u32("SETC16", setc16_reg=33, setc16_value=0x9008),    # Dst += 8, CR := Dst, FidelityClear
        "unp1_adcxy_reset": word_u32("SETADCXY", cnt_set_mask=2, bit_mask=0xB),
        "unp1_adczw_reset": word_u32("SETADCZW", cnt_set_mask=2, bit_mask=0xF),
        "unp1_adcxx_face": word_u32("SETADCXX", cnt_set_mask=2, x_end2=255, x_start=0),
        "unp01_adczw_tile": word_u32("SETADCZW", cnt_set_mask=3, bit_mask=0x5),
        # B7 config; C0 ThCon | C1/C2 unpackers
        "stall_cfg_unpack01": word_u32("STALLWAIT", stall_res=0x80, wait_res=0x7),
        "wrcfg_gpr10_cfg112": word_u32("WRCFG", gpr_address=10, cfg_reg=112),
        "wrcfg_gpr11_cfg120": word_u32("WRCFG", gpr_address=11, cfg_reg=120),
        "wrcfg_gpr12_cfg124": word_u32("WRCFG", gpr_address=12, cfg_reg=124),
        # B1 sync; C1/C2 unpackers | C4 FPU (fpu_on_unpacker: TRISC0's thread posts UNPACKED after its FPU ops); B1
        # sync; C11 SFPU (TRISC1's thread then waits only for its SFPU body)
        "stall_sync_fpu_unpack": word_u32("STALLWAIT", stall_res=0x2, wait_res=0x16),
        "stall_sync_sfpu": word_u32("STALLWAIT", stall_res=0x2, wait_res=0x800),
        "unpacr_srcb_face": word_u32("UNPACR", unpack_block_selection=1, addr_mode=0x01, ovrd_thread_id=1,
                                     set_dat_valid=1, last=1),
        "elw_block": {k: word_u32(k, addr_mode=3, dst=0) for k in ("ELWMUL", "ELWADD", "ELWSUB")},
        "elw_phase": {k: word_u32(k, addr_mode=4, dst=0) for k in ("ELWMUL", "ELWADD", "ELWSUB")},
        "elw_face": {k: word_u32(k, addr_mode=5, dst=0) for k in ("ELWMUL", "ELWADD", "ELWSUB")},
    }


def fpu_ctx(plan: TilePlan, fpu_ops: list[FpuOp]) -> list[dict]:
    """One entry per FpuOp: the unpacker config words of both operands and the ZEROACC words of its Dst slot."""
    out = []
    for o in fpu_ops:
        l1 = [plan.inputs[o.a].tile_format, plan.inputs[o.b].tile_format]
        desc = [0x01000015 if f == "bf16" else 0x01000010 for f in l1]     # in format, uncompressed, x_dim 256
        code_a, code_b = SRC_FORMAT_CODE[o.fmt_a], SRC_FORMAT_CODE[o.fmt_b]
        out.append({"node": o.node, "kind": o.kind, "a": o.a, "b": o.b, "fmt_a": o.fmt_a, "fmt_b": o.fmt_b,
                    "phases": o.phases, "slot": o.slot,
                    "cfg64": hex_u32(desc[0]), "cfg72": hex_u32(0x20 | code_a), "cfg112": hex_u32(desc[1]),
                    "cfg120": hex_u32(code_b),
                    "zeroacc": zeroacc_words(o) if o.kind == "ELWMUL" else []})
    return out


def zeroacc_words(o: FpuOp, group: int = 0) -> list[str]:
    """The ZEROACC words of the four fp32 faces of the ELWMUL's Dst slot, `group` slots further on (MATH_Offset is 0
    when they are issued: a 16-row ZEROACC only takes the offset's Dst half, not the offset)."""
    return [word_u32("ZEROACC", clear_mode=1, use_32_bit_mode=1, addr_mode=0, where=4 * (o.slot + group) + f)
            for f in range(4)]


def _red_ctx(red: ReducePlan) -> dict:
    """The templates' `red` context: the reduction's programs as C literals and its layout."""
    return {
        "acc_init": [hex_u32(x) for x in red.acc_init], "finish": [hex_u32(x) for x in red.finish],
        "post_setup": [hex_u32(x) for x in red.post.setup],
        "post_body": [hex_u32(x) for x in red.post.body], "acc_reg": red.acc_reg,
        "lanes": red.lanes, "acc_slot": red.acc_slot, "steps": red.steps,
        "group_store": [hex_u32(x) for x in red.group_store],
        "post_skip": [hex_u32(x) for x in red.post_skip],
        "pass1": _pass_ctx(red.pass1),   # two-pass reductions: the first pass
        "pass2": _pass_ctx(red.pass2),   # a fused reduction's second level (fused_reduce.py)
        "fused": red.fused, "resident": red.resident, "out_step": red.out_step}


def _pass_ctx(p: ReducePass | None) -> dict | None:
    """An earlier pass of a multi-pass reduction (tile_plan.ReducePass) as C literals."""
    return None if p is None else {
        "setup": [hex_u32(x) for x in p.sfpu.setup], "body": [hex_u32(x) for x in p.sfpu.body],
        "acc_init": [hex_u32(x) for x in p.acc_init], "finish": [hex_u32(x) for x in p.finish],
        "group_store": [hex_u32(x) for x in p.group_store], "slot": p.slot}


def _pass_replays(red_ctx: dict, start: int) -> None:
    """A fused reduction's earlier passes: each pass's body recorded in TRISC1's replay buffer after the words already
    there (`start`: the post's body, which the MOP replays), as many row steps of it as fit (a power of two, the
    other pass's one row step left room), so that the RISC-V pushes one REPLAY per that many row steps instead of the
    body's words (a loop of 4 TTIs per row step took 6 cycles, the SFPU 5; one REPLAY per row step 3, as many as the
    SFPU's 3-word body). Sets each pass context's "record" / "replay" / "record_words" / "replays" (REPLAYs per tile)
    where one row step fits the buffer (else None: its words are pushed)."""
    passes = [p for p in (red_ctx["pass1"], red_ctx["pass2"]) if p is not None]
    for i, p in enumerate(passes):
        n = len(p["body"])
        room = REPLAY_WORDS - start - sum(len(q["body"]) for q in passes[i + 1:])
        rows = 1
        while rows < 32 and 2 * rows * n <= room:
            rows *= 2
        fits = n <= room
        p["record"] = word_u32("REPLAY", load_mode=1, execute_while_loading=0, len=rows * n,
                               start_idx=start) if fits else None
        p["replay"] = word_u32("REPLAY", load_mode=0, execute_while_loading=0, len=rows * n,
                               start_idx=start) if fits else None
        p["record_words"], p["replays"] = p["body"] * rows, 32 // rows
        start += rows * n if fits else 0


# Two Dst groups in flight (issue #10 item 3): the three threads alternate tile by tile between the slots the plan
# names and the same slots `group` slots further on, so the unpacker fills tile t+1's group and the FPU and SFPU work
# on it while the packer drains tile t's. The semaphores count up to DST_GROUPS (FREE starts full); compute.c.j2
# picks a tile's group by the parity of its index.
DST_GROUPS = 2
assert DST_GROUPS == 2, "compute.c.j2 alternates two Dst groups ((t - tile_begin) & 1)"


def second_dst_group(plan: TilePlan, inputs: list[dict], fpu_ops: list[FpuOp],
                     red: ReducePlan | None = None, cores: int | None = None) -> int | None:
    """The offset in slots of the second Dst group, None with one tile per core or no room for one. Every tile's group
    holds the inputs unpacked to Dst per tile, the FPU results, the output and the SFPU's spills (the per-tile slots);
    the first group (offset 0) holds as well the inputs sent and unpacked once (a head the SFPU setup reads), which
    stay there for every tile. The offset is the smallest at which the per-tile slots, moved, stay inside Dst and meet
    none of the first group's slots: neither its per-tile slots nor the once-sent head's.
    A reduction (`red`) alternates its input tiles the same way, its accumulator living in an LReg; the lane combine
    and the post-reduce program write the group of the output's last tile (its accumulator and output slots are
    per-tile slots too). Only a one-pass reduction of 32 row steps (a two-pass one's first-pass results and a short
    one's step-group results stay in Dst across tiles), and only with one output per core: a tile that produces no
    output gives its group back as soon as its SFPU pass is done, so with several outputs a later output's lane
    combine could overwrite its group's output slot while the packer still reads the earlier output there.
    A fused reduction (all its passes alternate groups; the levels' result slots are shared by both groups) has the
    same hazard where a core holds several groups of tiles: FREE is one count for both Dst groups, and the first tile
    of a core's next group posts it from TRISC1 (no output) while the packer may still hold the last output tile m of
    the group before (its output CB full): then the next group's tiles without output are posted by TRISC1 too, and
    each tile among them two, four, ... after m enters m's Dst group, up to the next group's first output tile. It is
    kept only where none of those writes the slot the packer reads: the next first output tile is an even number of
    tiles after m (a group's tiles before its outputs, tiles_per_group * (passes - 1), even) and no earlier pass's
    scratch is in the output slot.
    `cores`: the launch's cores, if not the plan's (the launch model prices other counts)."""
    cores = plan.cores if cores is None else cores
    if plan.n_tiles <= cores:      # one tile per core: nothing to overlap
        return None
    if red is not None and not red.fused and (red.pass1 is not None or red.steps != 32 or red.groups > plan.cores):
        return None
    per_tile = {s["j"] for s in inputs if s["dst"] and not s["once"]} | {o.slot for o in fpu_ops} \
        | _slots(plan.sfpu.out_slot, plan.sfpu.dst_slots)
    shared: set[int] = set()
    if red is not None and red.fused:
        per_tile |= _slots(red.post.out_slot, red.post.dst_slots)
        levels = [p for p in (red.pass1, red.pass2) if p is not None]
        level_slots = [set(range(p.slot, p.slot + p.n_acc)) for p in levels]
        shared = set().union(*level_slots)
        scratch = set().union(*(_slots(p.sfpu.out_slot, p.sfpu.dst_slots) - set().union(*level_slots[i:])
                                for i, p in enumerate(levels)))   # a pass's scratch in its own or a later level's
        per_tile |= scratch                                       # slots: dead while it runs
        if red.groups > cores and (red.tiles_per_group * (red.passes - 1) % 2 or red.post.out_slot in scratch):
            return None
    elif red is not None:
        per_tile |= set(range(red.acc_slot, red.acc_slot + red.n_acc)) | _slots(red.post.out_slot, red.post.dst_slots)
    moved = per_tile | shared
    first = moved | {s["j"] for s in inputs if s["dst"] and s["once"]}
    for k in range(1, MAX_SLOTS - max(moved)):
        if not {x + k for x in moved} & first:
            return k
    return None


def _slots(out_slot: int, dst_slots: int) -> set[int]:
    """The Dst slots an SFPU program writes: its output slot and its spills up to dst_slots."""
    return set(range(out_slot, max(dst_slots, out_slot + 1)))


def shared_finish(words: list[int], slots: range, group: int) -> list[str]:
    """A fused reduction's finish with two Dst groups: run with MATH_Offset 0, each of its stores to a level's result
    slots (`slots`) is made twice, into the first group's slot and into the second group's (`group` slots on), so that
    the later passes read the results in either group."""
    out = []
    for word in words:
        out.append(word)
        name, f = isa.decode(word)
        if name == "SFPSTORE" and f["dest_reg_addr"] // 64 in slots:
            assert f["sfpu_addr_mode"] == 0, "a store made twice must not advance Dst's RWC twice"
            out.append(isa.encode(name, **{**f, "dest_reg_addr": f["dest_reg_addr"] + 64 * group}))
    return [hex_u32(x) for x in out]


def dst_passes(red: ReducePlan, fpu_ops: list[FpuOp], j: int) -> int:
    """The passes (bit p: pass p) of a fused reduction that unpack its input j to Dst. Where the group stays resident
    in its CBs, those whose programs read it (ReducePlan.pass_inputs; an FPU op's operands come through the Src
    banks); otherwise every pass, since the reader sends every stream in every pass and each tile must be waited for
    and popped, but the last one where only its FPU ops read it (they wait for it)."""
    if red.resident:
        return red.pass_inputs[j]
    last = 1 << (red.passes - 1)
    fpu_only = any(j in (o.a, o.b) for o in fpu_ops) and not red.pass_inputs[j] & last
    return (1 << red.passes) - 1 - (last if fpu_only else 0)


def input_roles(plan: TilePlan, inputs: list[dict], dst_inputs: list[int] | None, in_flight: bool,
                red: ReducePlan | None = None, fpu_ops: list[FpuOp] = ()) -> bool:
    """Sets each input context's Dst roles ("dst", "dst_faces", "once", "head_first"; a fused reduction's
    "pass_mask": the passes that unpack it to Dst, 0 for every pass, and "first_pass": the first that waits for it);
    returns whether the SFPU setup runs once per core (setup_once)."""
    for s in inputs:
        s["dst"] = dst_inputs is None or s["j"] in dst_inputs
        s["pass_mask"] = s["first_pass"] = 0
        if red is not None and red.fused:
            every, mask = (1 << red.passes) - 1, dst_passes(red, fpu_ops, s["j"])
            waits = mask | (1 << (red.passes - 1) if any(s["j"] in (o.a, o.b) for o in fpu_ops) else 0)
            s["dst"], s["pass_mask"] = mask != 0, (mask if mask != every else 0)
            s["first_pass"] = (waits & -waits).bit_length() - 1 if waits else 0
        # a head input's tile is read by the SFPU setup at row step 0 only: the faces holding its written datums
        s["dst_faces"] = -(-s["runs"]["head"] // FACE_DATUMS) if s["runs"] and s["runs"]["head"] else TILE_FACES
    # the SFPU setup computes from constants and uniform inputs only (scalars of the whole kernel,
    # frontend.uniform_inputs): the same values for every tile, kept in LReg11-14, which the body only reads. It
    # runs for a core's first tile only; a head (an input only the setup reads) is then sent and unpacked for that
    # tile only, where the reader keeps its reads in flight. A setup that is the lane-enable reset alone (SETUP)
    # stays per tile: TRISC1's first-tile test costs about what its one word does (2048^2 a*b+a on 13 cores:
    # 151,458 cycles once against 150,988 per tile)
    setup_once = red is None and len(plan.sfpu.setup) > len(SETUP)
    # (a bf16 head reaches Dst through the math thread's ELWADDs from SrcA on every tile: it stays per tile)
    for s in inputs:
        s["once"] = setup_once and in_flight and bool(s["runs"] and s["runs"]["head"]) and s["fmt"] != "bf16"
        # a head whose window load is one NoC flit (the bytes a link moves per cycle: a scalar) is read before the
        # first tile's reads, which it delays by that one cycle; a larger one after them
        s["head_first"] = plan.buffers[s["buf"]].nbytes <= NOC_BYTES_PER_CYCLE
    return setup_once


def _dst_groups(plan: TilePlan, fpu_ops: list[FpuOp], dst_inputs: list[int] | None,
                cores: int | None) -> tuple[int | None, list[dict]]:
    """An elementwise kernel's second Dst group on `cores` cores (default: the plan's), as render_tile_kernel decides
    it, and its input contexts with their Dst roles."""
    inputs = [stream_ctx(plan, s, j) for j, s in enumerate(plan.inputs)]
    input_roles(plan, inputs, dst_inputs, reads_ahead(inputs))
    return second_dst_group(plan, inputs, fpu_ops, cores=cores), inputs


def reads_ahead(inputs: list[dict]) -> bool:
    """Whether an elementwise kernel's reader keeps several tiles' reads in flight (reader.c.j2 `in_flight`; it then
    walks a core's tiles from a rotated start), from its input contexts (stream_ctx)."""
    return bool(inputs) and reads_in_flight([(s["mode"], s["fmt"], s["runs"]) for s in inputs])


def dst_group(plan: TilePlan, fpu_ops: list[FpuOp], dst_inputs: list[int] | None) -> int | None:
    """An elementwise kernel's second Dst group offset in slots (second_dst_group), None for one group in flight."""
    return _dst_groups(plan, fpu_ops, dst_inputs, None)[0]


def dst_overlap(plan: TilePlan, fpu_ops: list[FpuOp], dst_inputs: list[int] | None, cores: int) -> str | None:
    """How an elementwise launch on `cores` cores overlaps its threads, as render_tile_kernel decides it (for the
    launch model, mover_cost.compute_stage): None (one Dst group), "groups" (two Dst groups) or "fpu_on_unpacker"."""
    group, inputs = _dst_groups(plan, fpu_ops, dst_inputs, cores)
    return None if not group else "fpu_on_unpacker" if fpu_on_unpacker(fpu_ops, group, inputs) else "groups"


def group_words(posts: int) -> dict:
    """The semaphore words of two Dst groups in flight (`posts`: UNPACKED posts per tile): MATHDONE and FREE count
    up to DST_GROUPS, UNPACKED up to DST_GROUPS * posts."""
    return dst_token_words(DST_GROUPS) | {"seminit_unpacked": word_u32(
        "SEMINIT", max_value=DST_GROUPS * posts, init_value=0, sem_sel=1 << SEM_UNPACKED)}


def fpu_on_unpacker(fpu_ops: list[FpuOp], group: int | None, inputs: list[dict]) -> bool:
    """Whether TRISC0's thread issues the FPU op, right behind its operands' unpacks: one FPU op, two Dst groups, and
    no input unpacked to Dst after the core's first tile (a head sent once at most), so the unpackers' formats are
    written for the first tile only and TRISC0's RISC-V pushes little more per tile than the unpacks and the op. Any
    thread may issue any unit's instructions (per-thread RWCs, MATH_Offset and ADDR_MODs: ISA `ELWMUL.md`), so tile
    t+1's op runs in the other group while TRISC1's thread issues tile t's SFPU body (issue #10 item 3: FPU and SFPU
    in parallel); TRISC0's thread posts UNPACKED once more per tile, after the op. With a Dst input per tile (fp32
    x*y + y, MUL pinned to the FPU, 4 tiles on one core: 2,556 -> 2,600 cycles) TRISC0's per-tile words outweigh
    the overlap, so those keep the op on TRISC1."""
    return len(fpu_ops) == 1 and bool(group) and all(s["once"] for s in inputs if s["dst"])


def elwadd_on_unpacker(fpu_ops: list[FpuOp], group: int | None, inputs: list[dict]) -> bool:
    """Whether TRISC0's thread moves the bf16 inputs into Dst itself (SrcA + 0 by ELWADD, `sfpu_path.md` §1.1), each
    face's ELWADDs one face behind its unpacks, instead of TRISC1's thread: with two Dst groups, tile t+1's ELWADDs
    then run while TRISC1's thread issues tile t's SFPU body (on TRISC1's they waited behind it, and the unpacker's
    third face waited for them: the two Src banks), and TRISC1's thread issues SFPU words only. Kernels with FPU ops
    are fpu_on_unpacker's or keep every FPU word on TRISC1."""
    return bool(group) and not fpu_ops and any(s["fmt"] == "bf16" and s["dst"] for s in inputs)


# fpu_on_unpacker: the first tile's operand set-up, the same on every core's first tile (the operands' formats, written
# for that tile only, and its slots' addresses: each CB's first slot, a compile-time constant), in GPRs of their own,
# (GPR, config register) per word. TRISC0 writes them before its first unpack, so the first tile's operands wait only
# for the WRCFGs behind a once-sent head's unpack, not for the RISC-V's address arithmetic and SETDMAREG pushes (the
# head takes GPR4-9, the later tiles' addresses GPR4 and GPR12; a thread has 64 GPRs: ISA `SETDMAREG.md`)
FIRST_TILE_GPRS = ((13, 64), (14, 72), (15, 73), (16, 57), (17, 84), (18, 112), (19, 120), (20, 76), (21, 124))


# fused_fpu: each FPU op's operand formats (the config words FIRST_TILE_GPRS writes but the addresses) in GPRs of
# their own from FUSED_OP_GPRS on, written before TRISC0's loop: the op's WRCFGs follow the switch from another
# configuration without the RISC-V's SETDMAREG pushes (compute.c.j2 fused_fpu, unpack.fpu_operands `state`)
FUSED_OP_GPRS = 24
ADDRESS_CFGS = (76, 124)


def _config_gprs(c: dict, i: int, unp_bf16: dict) -> None:
    """Sets the context c of a fused reduction's FPU op i's "config_gprs": as first_gprs, its formats only."""
    _first_tile_gprs(c, unp_bf16)
    cfgs = [cfg for _, cfg in FIRST_TILE_GPRS if cfg not in ADDRESS_CFGS]
    first = {g["cfg"]: g for g in c.pop("first_gprs")}
    c["config_gprs"] = [{**first[cfg], "gpr": g, "wrcfg": word_u32("WRCFG", gpr_address=g, cfg_reg=cfg)}
                        for g, cfg in zip(range(FUSED_OP_GPRS + len(cfgs) * i, 64), cfgs)]
    assert len(c["config_gprs"]) == len(cfgs), "a Tensix thread has 64 GPRs"


def _first_tile_gprs(c: dict, unp_bf16: dict) -> None:
    """Sets FPU op context c's "first_gprs": per config word of its first tile, the GPR, value (a C expression) and
    WRCFG word."""
    values = {64: c["cfg64"], 72: c["cfg72"], 73: hex_u32(unp_bf16[73]), 57: hex_u32(unp_bf16[57]),
              84: "64u",   # SrcA rows 0-15 of the unpacker's bank
              112: c["cfg112"], 120: c["cfg120"],
              76: f"tt_l1_addr16(IN{c['a']}_CB)", 124: f"tt_l1_addr16(IN{c['b']}_CB)"}
    c["first_gprs"] = [{"gpr": g, "value": values[cfg], "cfg": cfg,
                        "wrcfg": word_u32("WRCFG", gpr_address=g, cfg_reg=cfg)} for g, cfg in FIRST_TILE_GPRS]


def _face_replays(fpu: list[dict], w: dict) -> None:
    """fpu_on_unpacker: each FPU op's per-face words (its phases over the face's blocks, the banks given back) recorded
    once in TRISC0's replay buffer, one after the other, so that TRISC0's RISC-V pushes one REPLAY per face instead of
    the words (it pushes the operands' unpacks and configuration as well, and would otherwise be the slower side).
    Sets each op's "face_words" and, where they all fit the buffer, "face_record" / "face_replay" (else None)."""
    start = 0
    for c in fpu:
        c["face_words"] = [w["elw_block"][c["kind"]], w["elw_phase"][c["kind"]]] * (c["phases"] - 1) \
            + [w["elw_block"][c["kind"]], w["elw_face"][c["kind"]], w["setrwc_release"]]
        c["face_start"], start = start, start + len(c["face_words"])
    fits = start <= REPLAY_WORDS
    for c in fpu:
        n = len(c["face_words"])
        c["face_record"] = word_u32("REPLAY", load_mode=1, execute_while_loading=0, len=n,
                                    start_idx=c["face_start"]) if fits else None
        c["face_replay"] = word_u32("REPLAY", load_mode=0, execute_while_loading=0, len=n,
                                    start_idx=c["face_start"]) if fits else None


def render_tile_kernel(plan: TilePlan, generator: str, red: ReducePlan | None = None, fpu_ops: list[FpuOp] = (),
                       dst_inputs: list[int] | None = None, programs: dict[str, str] | None = None) -> dict[str, str]:
    """The sources of a tile-pipeline kernel: `red` the reduction of an SFPU reduction kernel (the templates' red
    branch), `fpu_ops` the FPU ops of an elementwise placement and `dst_inputs` the inputs unpacked to Dst (None: all);
    `generator` is the family module args.h names; `programs`: {core: source} of the cores that run a program shared
    by kernels (lowering/families/shared_programs.py) instead of the templates' code."""
    _check(plan)
    r = list(plan.ranges) or [1]
    inputs = [stream_ctx(plan, s, j, red) for j, s in enumerate(plan.inputs)]
    out = stream_ctx(plan, plan.output, None, red)
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
        "unp": {"init": {i: hex_u32(v) for i, v in unp_init.items()},
                "fp32": {i: hex_u32(v) for i, v in UNPACK_CFG["fp32"].items()},
                "bf16": {i: hex_u32(v) for i, v in UNPACK_CFG["bf16"].items()}},
        "pck": {i: hex_u32(v) for i, v in PACK_CFG[out["fmt"]].items()},
        "alu_format": hex_u32(alu_format_word(formats, out["fmt"])),
        # the schedule the target takes: with SFPLOADMACRO (and its drain after the row steps) unless macro-free
        "sfpu": dict(zip(("setup", "body", "drain"),
                         ([hex_u32(x) for x in words] for words in plan.sfpu.issued(plan.target.macro_free)))),
        "red": None if red is None else _red_ctx(red) | {"next_k": reduce_next_k(plan, red)},
        "compact_reader": bool(plan.compact_reader),
        "index_loads": [{"k": k, "slot": plan.buffers[k].slot, "esz": DTYPE_SIZE[plan.buffers[k].dtype],
                         "load_expr": INDEX_LOAD[plan.buffers[k].dtype],
                         "c_type": INDEX_LOAD_TYPE[plan.buffers[k].dtype]} for k in index_load_buffers(plan)],
        # each core takes a range of tiles from its argument block (the grid split, tile_plan.TilePlan.core_arg_words)
        "tiles": ("tile_begin", "tile_end"),
        "tile_grid": plan.tile_grid is not None,   # range positions -> tiles through tt_tile_at
        # the reader keeps several tiles' reads in flight where every input is one NoC read per tile (or, beside
        # them, a head broadcast: mover_cost.reads_in_flight)
        "in_flight": reads_ahead(inputs) if red is None else
                     bool(plan.inputs) and red.reads_in_flight([s["mode"] for s in inputs]),
        "tile_decl": "tile_begin = tt_arg(ARG_TILE_BEGIN), tile_end = tt_arg(ARG_TILE_END)",
    }
    # SFPU body issue: a body of <= 32 words is recorded once in the replay buffer and each tile's 32 row steps are
    # one MOP (template 1: 32 x REPLAY of the body) instead of 32 x body TTI pushes from TRISC1 (same instruction
    # stream after the MOP/replay expanders; the emulator can then run the row steps batched)
    issue = replay_issue(len(ctx["sfpu"]["body"])) if red is None or red.steps == 32 else None
    ctx["sfpu_replay"] = issue is not None
    if issue is not None:
        ctx.update(issue)
    if red is not None:
        ctx["out_slot"] = red.post.out_slot
        if red.fused and red.steps == 32:
            _pass_replays(ctx["red"], len(ctx["sfpu"]["body"]) if issue is not None else 0)
    # a reduction's writer reads only its outputs' datums (ReducePlan.out_datum): the packer packs the faces that
    # hold them
    ctx["out_faces"] = TILE_FACES if red is None or red.fused else \
        max(red.out_datum(j) for j in range(red.cells)) // FACE_DATUMS + 1
    if fpu_ops:   # FPU placement: operands to SrcA/SrcB, unpacker 0 reconfigured per input (so always "mixed")
        ctx["w"] = w | fpu_words()
        ctx.update(fpu=fpu_ctx(plan, fpu_ops), mixed=True,
                   unp1_static={i: hex_u32(v) for i, v in UNP1_CFG_STATIC.items()})
    else:
        ctx["fpu"] = []
    ctx["setup_once"] = input_roles(plan, inputs, dst_inputs, ctx["in_flight"], red, fpu_ops)
    # TRISC1's thread issues FPU words before its SFPU program (a fused reduction's FPU ops are TRISC0's, fused_fpu)
    ctx["any_fpu"] = (bool(fpu_ops) and not (red is not None and red.fused)) or any(
        s["fmt"] == "bf16" and s["dst"] for s in inputs)
    # FPU ops beside Dst inputs that are all unpacked straight to Dst: the SFPU setup (which reads only Dst inputs,
    # uniform values hoisted out of the row loop) is issued before the FPU ops, once those inputs are in, and runs
    # while the unpackers bring the FPU's operands (a bf16 Dst input reaches Dst through an FPU ELWADD: not then)
    ctx["setup_first"] = bool(fpu_ops) and red is None and len(plan.sfpu.setup) > 0 and not any(
        s["fmt"] == "bf16" and s["dst"] for s in inputs)
    ctx["group"] = second_dst_group(plan, inputs, fpu_ops, red)
    if red is not None and red.fused and ctx["group"]:
        for p, c in ((red.pass1, ctx["red"]["pass1"]), (red.pass2, ctx["red"]["pass2"])):
            if p is not None:
                c["finish"] = shared_finish(p.finish, range(p.slot, p.slot + p.n_acc), ctx["group"])
    ctx["dst_groups"] = DST_GROUPS if ctx["group"] else 1
    ctx["fpu_on_unpacker"] = (red is None or not red.fused) and fpu_on_unpacker(fpu_ops, ctx["group"], inputs)
    # a fused reduction with two Dst groups: TRISC0's thread copies its bf16 inputs from SrcA to Dst (the ELWADDs)
    # right behind their unpacks. On TRISC1's thread they waited behind the previous tile's SFPU pass (one thread
    # issues in order), and the unpacker's next SrcA bank behind them: the second group gained nothing (RMSNorm-2048
    # fused: 2,719 -> 2,385 cycles; bf16_on_unpacker). Other kernels make the same moves in the order measured for
    # kernels of one pass (elwadd_on_unpacker)
    fused = red is not None and red.fused
    ctx["bf16_on_unpacker"] = fused and elwadd_on_unpacker([], ctx["group"], inputs)
    ctx["elwadd_on_unpacker"] = not fused and elwadd_on_unpacker(fpu_ops, ctx["group"], inputs)
    # a fused reduction's FPU ops (its last pass's, fused_reduce.elementwise_placement) are issued by TRISC0's
    # thread right behind their operands' unpacks, as fpu_on_unpacker's, with the unpackers configured per tile (the
    # earlier passes unpack the streams to Dst); with two Dst groups tile t+1's ops then run while TRISC1's thread
    # issues tile t's SFPU program
    ctx["fused_fpu"] = fused and bool(fpu_ops)
    if ctx["bf16_on_unpacker"]:
        ctx["w"] = ctx["w"] | {"stall_sync_fpu_unpack": fpu_words()["stall_sync_fpu_unpack"]}
    # TRISC1's thread then issues SFPU words only: it waits for its SFPU alone before a post, not for the FPU, which
    # runs TRISC0's words of the next tile
    ctx["math_on_unpacker"] = ctx["fpu_on_unpacker"] or ctx["elwadd_on_unpacker"]
    if ctx["elwadd_on_unpacker"]:
        # the zeroed SrcB bank waits for its own bank as an UNPACR does (stall_clr_cntrl, ISA WH
        # `UNPACR_NOP_ZEROSRC.md` WaitLikeUnpacr), not for the FPU's current one: that one is freed by this thread's
        # ELWADDs behind it, so the second face's NOP would wait for ever
        ctx["w"] = ctx["w"] | fpu_words() | {"unpacr_nop_zero_srcb": word_u32(
            "UNPACR_NOP", unpacker_select=1, set_dvalid=1, unpack_pop=1, stall_clr_cntrl=1)}
    ctx["lagged_pops"] = ctx["fpu_on_unpacker"] and -(-plan.n_tiles // plan.cores) <= CB_DEPTH
    if ctx["fpu_on_unpacker"] or ctx["fused_fpu"]:
        _face_replays(ctx["fpu"], ctx["w"])
    if ctx["fused_fpu"]:
        for i, c in enumerate(ctx["fpu"]):
            _config_gprs(c, i, UNPACK_CFG["bf16"])
    if ctx["fpu_on_unpacker"]:
        for c in ctx["fpu"]:
            _first_tile_gprs(c, UNPACK_CFG["bf16"])
        # TRISC0's RISC-V pops a tile's CB slots once its thread posts UNPACK_READ (the unpackers are done with
        # them) instead of draining its thread (TTSync) per tile: it goes on to the next tile's words while the FPU
        # ops run. Where a core's tiles all fit its CBs (no read waits for a popped slot) it pops them one tile late,
        # after pushing the next tile's words (E_2048 on one core, 2 tiles: 1,996 -> 1,980 cycles); with more tiles
        # at once (RMSNorm's x * (1/r) * w at 16 tiles: 6,317 one tile late, 6,156 at once). At most the two tiles
        # FREE lets in flight are posted and not yet taken.
        ctx["w"] = ctx["w"] | {
            "seminit_unpack_read": word_u32("SEMINIT", max_value=DST_GROUPS, init_value=0,
                                            sem_sel=1 << SEM_UNPACK_READ),
            "sempost_unpack_read": word_u32("SEMPOST", sem_sel=1 << SEM_UNPACK_READ),
            "stall_sync_unpack01": word_u32("STALLWAIT", stall_res=0x2, wait_res=0x6)}   # B1 sync; C1/C2
    if ctx["group"]:
        posts = 2 if ctx["fpu_on_unpacker"] and ctx["setup_first"] else 1     # UNPACKED posts per tile
        ctx["w"] = ctx["w"] | group_words(posts)
        for o, c in zip(fpu_ops, ctx["fpu"]):
            c["zeroacc_b"] = zeroacc_words(o, ctx["group"]) if o.kind == "ELWMUL" else []
    datums = red is not None
    return kernel_sources(ctx, "reader.c.j2", "writer.c.j2", "compute.c.j2", args_header(plan, generator, red, datums),
                          programs)
