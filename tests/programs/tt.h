/* Tiny helpers for the ttsim/emu test programs. */
#ifndef TTSIM_PROGS_TT_H
#define TTSIM_PROGS_TT_H
#include <stdint.h>

#define REG32(a) (*(volatile uint32_t *)(uintptr_t)(a))
#define ARGS_BASE 0x100u
#define ARG(i) REG32(ARGS_BASE + 4u * (i))

/* NIU (NoC interface), initiator 0 */
#define NOC_BASE(noc) (0xFFB20000u + 0x10000u * (noc))
#define NOC_TARG_ADDR_LO 0x00u
#define NOC_TARG_ADDR_MID 0x04u
#define NOC_TARG_ADDR_HI 0x08u
#define NOC_RET_ADDR_LO 0x0Cu
#define NOC_RET_ADDR_MID 0x10u
#define NOC_RET_ADDR_HI 0x14u
#define NOC_PACKET_TAG 0x18u
#define NOC_CTRL 0x1Cu
#define NOC_AT_LEN_BE 0x20u
#define NOC_CMD_CTRL 0x40u
#define NOC_ID_LOGICAL 0x148u
#define NIU_MST_WR_ACK_RECEIVED 0x204u
#define NIU_MST_RD_RESP_RECEIVED 0x208u
#define NOC_CTRL_READ 0x10u          /* read | RESP_MARKED */
#define NOC_CTRL_WRITE_ACKED 0x12u   /* write | RESP_MARKED */
#define NOC_MAX_REQ 16384u

static inline uint32_t noc_rd(uint32_t noc, uint32_t reg) { return REG32(NOC_BASE(noc) + reg); }
static inline void noc_wr(uint32_t noc, uint32_t reg, uint32_t v) { REG32(NOC_BASE(noc) + reg) = v; }

/* DRAM/L1 (xy = x | y << 6) -> own L1, split into <= 16 KiB requests; waits for all responses. */
static inline void noc_read(uint32_t noc, uint32_t src_xy, uint32_t src, uint32_t dst, uint32_t len) {
    uint32_t me = noc_rd(noc, NOC_ID_LOGICAL) & 0xFFFu;
    uint32_t expect = noc_rd(noc, NIU_MST_RD_RESP_RECEIVED);
    while (len) {
        uint32_t n = len < NOC_MAX_REQ ? len : NOC_MAX_REQ;
        while (noc_rd(noc, NOC_CMD_CTRL)) {}
        noc_wr(noc, NOC_CTRL, NOC_CTRL_READ);
        noc_wr(noc, NOC_PACKET_TAG, 0);
        noc_wr(noc, NOC_TARG_ADDR_LO, src);
        noc_wr(noc, NOC_TARG_ADDR_MID, 0);
        noc_wr(noc, NOC_TARG_ADDR_HI, src_xy);
        noc_wr(noc, NOC_RET_ADDR_LO, dst);
        noc_wr(noc, NOC_RET_ADDR_MID, 0);
        noc_wr(noc, NOC_RET_ADDR_HI, me);
        noc_wr(noc, NOC_AT_LEN_BE, n);
        noc_wr(noc, NOC_CMD_CTRL, 1);
        (void)noc_rd(noc, NOC_CMD_CTRL);
        expect++;
        src += n; dst += n; len -= n;
    }
    while ((int32_t)(noc_rd(noc, NIU_MST_RD_RESP_RECEIVED) - expect) < 0) {}
    __asm__ volatile("fence rw, rw" ::: "memory");
}

/* own L1 -> DRAM/L1 (dst_xy), acked writes, split into <= 16 KiB requests; waits for all acks. */
static inline void noc_write(uint32_t noc, uint32_t src, uint32_t dst_xy, uint32_t dst, uint32_t len) {
    uint32_t me = noc_rd(noc, NOC_ID_LOGICAL) & 0xFFFu;
    uint32_t expect = noc_rd(noc, NIU_MST_WR_ACK_RECEIVED);
    while (len) {
        uint32_t n = len < NOC_MAX_REQ ? len : NOC_MAX_REQ;
        while (noc_rd(noc, NOC_CMD_CTRL)) {}
        noc_wr(noc, NOC_CTRL, NOC_CTRL_WRITE_ACKED);
        noc_wr(noc, NOC_PACKET_TAG, 0);
        noc_wr(noc, NOC_TARG_ADDR_LO, src);
        noc_wr(noc, NOC_TARG_ADDR_MID, 0);
        noc_wr(noc, NOC_TARG_ADDR_HI, me);
        noc_wr(noc, NOC_RET_ADDR_LO, dst);
        noc_wr(noc, NOC_RET_ADDR_MID, 0);
        noc_wr(noc, NOC_RET_ADDR_HI, dst_xy);
        noc_wr(noc, NOC_AT_LEN_BE, n);
        noc_wr(noc, NOC_CMD_CTRL, 1);
        (void)noc_rd(noc, NOC_CMD_CTRL);
        expect++;
        src += n; dst += n; len -= n;
    }
    while ((int32_t)(noc_rd(noc, NIU_MST_WR_ACK_RECEIVED) - expect) < 0) {}
}
#endif
