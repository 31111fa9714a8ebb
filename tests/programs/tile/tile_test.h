/* Shared helpers for the tile test programs: MMIO access and a blocking NoC request (docs/launch_noc.md §5.4). */
#ifndef TILE_TEST_H
#define TILE_TEST_H
#include <stdint.h>

#define REG(a) (*(volatile uint32_t *)(uintptr_t)(a))
#define L1(a) REG(a)

#define NOC_BASE(n) (0xFFB20000u + 0x10000u * (n))
#define NOC_TARG_LO 0x00
#define NOC_TARG_MID 0x04
#define NOC_TARG_HI 0x08
#define NOC_RET_LO 0x0C
#define NOC_RET_MID 0x10
#define NOC_RET_HI 0x14
#define NOC_PACKET_TAG 0x18
#define NOC_CTRL 0x1C
#define NOC_AT_LEN_BE 0x20
#define NOC_AT_DATA 0x28
#define NOC_CMD_CTRL 0x40
#define NOC_ID_LOGICAL 0x148
#define NIU_WR_ACK 0x204
#define NIU_RD_RESP 0x208

#define XY(x, y) ((x) | ((y) << 6))

/* One request on initiator 0 of NoC `n`; waits for the counter `counter` to rise by one. */
static inline void noc_request(unsigned n, uint32_t ctrl, uint32_t targ, uint32_t targ_hi, uint32_t ret,
                               uint32_t ret_hi, uint32_t len, uint32_t counter) {
    uint32_t b = NOC_BASE(n);
    while (REG(b + NOC_CMD_CTRL)) {}
    uint32_t before = REG(b + counter);
    REG(b + NOC_CTRL) = ctrl;
    REG(b + NOC_PACKET_TAG) = 0;
    REG(b + NOC_TARG_LO) = targ;
    REG(b + NOC_TARG_MID) = 0;
    REG(b + NOC_TARG_HI) = targ_hi;
    REG(b + NOC_RET_LO) = ret;
    REG(b + NOC_RET_MID) = 0;
    REG(b + NOC_RET_HI) = ret_hi;
    REG(b + NOC_AT_LEN_BE) = len;
    REG(b + NOC_CMD_CTRL) = 1;
    (void)REG(b + NOC_CMD_CTRL);
    while (REG(b + counter) == before) {}
}

/* DRAM (x,y)@src -> own L1 dst */
static inline void noc_read(unsigned n, uint32_t x, uint32_t y, uint32_t src, uint32_t dst, uint32_t len) {
    uint32_t me = REG(NOC_BASE(n) + NOC_ID_LOGICAL) & 0xFFF;
    noc_request(n, 0x10, src, XY(x, y), dst, me, len, NIU_RD_RESP);
}

/* own L1 src -> DRAM (x,y)@dst, non-posted */
static inline void noc_write(unsigned n, uint32_t src, uint32_t x, uint32_t y, uint32_t dst, uint32_t len) {
    uint32_t me = REG(NOC_BASE(n) + NOC_ID_LOGICAL) & 0xFFF;
    noc_request(n, 0x12, src, me, dst, XY(x, y), len, NIU_WR_ACK);
}
#endif
