"""The C the readers and writers use to move one element: read it from a DRAM line staged in L1 (`DRAM_LOAD`, by
dtype, `p` the element's address, result the tile datum as a uint32), write it back (`DRAM_STORE`, from `v`), and
read or write datum `i` of a tile in L1 (`TILE_LOAD` / `TILE_STORE`, by tile format, the tile at `src` / `dst`), and
read one element as index math takes it (`INDEX_LOAD`, with its C type `INDEX_LOAD_TYPE`).
bool is one byte in DRAM and 0/1 in a tile; bf16 tiles hold 16-bit datums, fp32 tiles 32-bit ones."""
from __future__ import annotations

DRAM_LOAD = {"bool": "(TT_L1_U8(p) != 0u ? 1u : 0u)", "bfloat16": "(uint32_t)TT_L1_U16(p)",
             "float32": "TT_REG32(p)", "int32": "TT_REG32(p)", "uint32": "TT_REG32(p)"}
DRAM_STORE = {"bool": "TT_L1_U8(p) = v != 0u ? 1u : 0u;", "bfloat16": "TT_L1_U16(p) = (uint16_t)v;",
              "float32": "TT_REG32(p) = v;", "int32": "TT_REG32(p) = v;",
              "uint32": "TT_REG32(p) = v;"}
# the narrow dtypes (lowering/plan.py LANE_DTYPE): integers are sign- or zero-extended to the int32 lane value and
# truncated back (the lane value is already in range); float16 goes through tt_convert.h (exact widening; narrowing
# rounds to nearest even with overflow to inf, denormals and NaN as IEEE binary16 defines them)
DRAM_LOAD.update({"int8": "(uint32_t)(int32_t)(int8_t)TT_L1_U8(p)", "uint8": "(uint32_t)TT_L1_U8(p)",
                  "int16": "(uint32_t)(int32_t)(int16_t)TT_L1_U16(p)", "uint16": "(uint32_t)TT_L1_U16(p)",
                  "float16": "tt_f16_to_f32(TT_L1_U16(p))"})
DRAM_STORE.update({"int8": "TT_L1_U8(p) = (uint8_t)v;", "uint8": "TT_L1_U8(p) = (uint8_t)v;",
                   "int16": "TT_L1_U16(p) = (uint16_t)v;", "uint16": "TT_L1_U16(p) = (uint16_t)v;",
                   "float16": "TT_L1_U16(p) = tt_f32_to_f16(v);"})
TILE_LOAD = {"fp32": "TT_REG32(src + 4u * i)", "bf16": "(uint32_t)TT_L1_U16(src + 2u * i)"}
TILE_STORE = {"fp32": "TT_REG32(dst + 4u * i) = v;", "bf16": "TT_L1_U16(dst + 2u * i) = (uint16_t)v;"}
# index math that reads a buffer (lowering/index.py LOAD, templates/blocks/index_loads.c.j2): integers and bools as
# their uint32 lane value (DRAM_LOAD), floats as the C float of their value (a bfloat16 is the top half of a float32)
INDEX_LOAD = {**DRAM_LOAD, "float32": "tt_f32_from_bits(TT_REG32(p))",
              "bfloat16": "tt_f32_from_bits((uint32_t)TT_L1_U16(p) << 16)",
              "float16": "tt_f32_from_bits(tt_f16_to_f32(TT_L1_U16(p)))"}
INDEX_LOAD_TYPE = {dt: "float" if dt in ("float32", "bfloat16", "float16") else "uint32_t" for dt in INDEX_LOAD}
