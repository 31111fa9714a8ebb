"""The cost model of the placement, per 32x32 tile in Tensix cycles: what one FPU op, an SFPU program, an unpack
and a pack cost (`COST`), and a split's total (`cycles`)."""
from __future__ import annotations

from tt_backend.lowering.codegen.sfpu_codegen import compile_sfpu
from tt_backend.lowering.dag import ValueDAG, VNode
from tt_backend.lowering.placement.choice import FpuOp, Split
from tt_backend.lowering.plan import TILE_BYTES

# Per 32x32 tile, in Tensix cycles. Documented (docs/performance.md §6): SFPU issues 1 instruction/cycle
# (SFPMAD latency 2: the code generator orders the body so few readers follow their producer and pads the hazards
# with SFPNOP; the auto-stalls left are counted, SfpuProgram.body_stalls, so a row step = instructions + stalls); FPU
# ELWMUL/MVMUL 1 cycle per 8x16 block per fidelity phase, ELWADD/ELWSUB 1 per block, latency 5; ZEROACC/SETRWC 1.
# L1 bandwidth (WH L1.md, the numbers runtime/emu/cycles.py uses): an unpacker reads 64 B per cycle, the packer writes
# 16 B per cycle. The current templates keep one Dst group in flight, so unpack, math and pack of a tile do not
# overlap: the per-tile cost is their sum. RISC-V/NoC time (reader, writer) is the same for every placement and left out.
COST = {"sfpu_per_instruction": 1, "fpu_per_block_phase": 1, "fpu_latency": 5, "fpu_setrwc": 1, "zeroacc": 1,
        "unpack_bytes_per_cycle": 64, "pack_bytes_per_cycle": 16, "blocks_per_tile": 8, "faces_per_tile": 4,
        "rows_per_tile": 32}


def sfpu_program_cycles(setup: int, body: int) -> int:
    return COST["sfpu_per_instruction"] * (setup + COST["rows_per_tile"] * body)


def fpu_op_cycles(op: FpuOp) -> int:
    c = COST["blocks_per_tile"] * COST["fpu_per_block_phase"] * op.phases + COST["fpu_latency"]
    c += COST["faces_per_tile"] * COST["fpu_setrwc"]
    if op.kind == "ELWMUL":          # ELWMUL accumulates: the result slot is zeroed first (one ZEROACC per face)
        c += COST["faces_per_tile"] * COST["zeroacc"]
    return c


def unpack_cycles(fmt: str) -> int:
    return TILE_BYTES[fmt] // COST["unpack_bytes_per_cycle"]


def pack_cycles(fmt: str) -> int:
    return TILE_BYTES[fmt] // COST["pack_bytes_per_cycle"]


def cycles(sp: Split, in_formats: list[str], out_format: str, n_tiles: int, sfpu_counts: tuple[int, int]) -> dict:
    """Per-tile cost of a split; `sfpu_counts` = (setup instructions, body cycles) of its compiled SFPU program."""
    unpack = sum(unpack_cycles(in_formats[j]) for j in sp.dst_inputs)
    unpack += sum(unpack_cycles(in_formats[o.a]) + unpack_cycles(in_formats[o.b]) for o in sp.fpu_ops)
    # a bf16 input reaches Dst through SrcA + ELWADD (docs/sfpu_path.md §5.2)
    fpu = sum(COST["blocks_per_tile"] + COST["fpu_latency"] + COST["faces_per_tile"] * COST["fpu_setrwc"]
              for j in sp.dst_inputs if in_formats[j] == "bf16")
    fpu += sum(fpu_op_cycles(o) for o in sp.fpu_ops)
    sfpu = sfpu_program_cycles(*sfpu_counts)
    pack = pack_cycles(out_format)
    total = unpack + fpu + sfpu + pack
    return {"unpack": unpack, "fpu": fpu, "sfpu": sfpu, "pack": pack, "total": total, "tiles": n_tiles,
            "kernel": total * n_tiles}


_OP_CYCLES: dict[tuple, int] = {}


def sfpu_op_cycles(n: VNode, src_dtypes: tuple[str, ...]) -> int:
    """Cycles per tile of one op on the SFPU: its instruction sequence (compiled alone, loads/store not counted)."""
    key = (n.op, n.dtype, src_dtypes)
    if key not in _OP_CYCLES:
        d = ValueDAG()
        srcs = tuple(d.add("LOAD", dt, (), j) for j, dt in enumerate(src_dtypes))
        d.out = d.add(n.op, n.dtype, srcs, n.arg)
        try:
            p = compile_sfpu(d, len(srcs), n.dtype)
            _OP_CYCLES[key] = sfpu_program_cycles(0, max(0, len(p.body) + p.body_stalls - len(srcs) - 1))
        except Exception:
            _OP_CYCLES[key] = 0
    return _OP_CYCLES[key]
