/* NoC interface unit (NIU) requests between this tile's L1 and DRAM.
 *
 * DRAM addresses are interleaved page by page over the eight banks (chip/interleave.py, docs/memory_map.md): page
 * p = addr >> TT_DRAM_PAGE_SHIFT lives in bank p % 8 at bank offset (p / 8) pages + the address's offset in its page,
 * so a request is split at page boundaries, one NoC request per page piece, each to its bank's translated coordinate.
 *
 * Completion protocol: the NIU counters (RD_RESP_RECEIVED, WR_ACK_RECEIVED) are never reset between launches, so
 * the kernel snapshots them at start and keeps its own "issued" counts; a wait polls until the counter has caught up
 * (wrap-safe signed difference). Requests longer than 16 KiB are split in software (ttsim refuses them; hardware
 * splits only when both addresses are 64-byte aligned); a page is smaller, so the page split covers it. One
 * response/ack is expected per request.
 * Alignment rules: DRAM->L1 reads need src == dst (mod 64), writes need src == dst (mod 16); violations retire
 * the core with TT_ERR_NOC_ALIGN instead of corrupting memory.
 * Each NIU must have a single user core: BRISC uses NoC0, NCRISC NoC1. */
#ifndef TT_NOC_H
#define TT_NOC_H

#include "tt_kernel.h"

/* per-initiator registers (command buffer 0) */
#define TT_NOC_TARG_ADDR_LO 0x00u
#define TT_NOC_TARG_ADDR_MID 0x04u
#define TT_NOC_TARG_ADDR_HI 0x08u
#define TT_NOC_RET_ADDR_LO 0x0Cu
#define TT_NOC_RET_ADDR_MID 0x10u
#define TT_NOC_RET_ADDR_HI 0x14u
#define TT_NOC_PACKET_TAG 0x18u
#define TT_NOC_CTRL 0x1Cu
#define TT_NOC_AT_LEN_BE 0x20u
#define TT_NOC_AT_DATA 0x28u
#define TT_NOC_CMD_CTRL 0x40u
/* per-NIU registers */
#define TT_NOC_ID_LOGICAL 0x148u
#define TT_NIU_MST_WR_ACK_RECEIVED 0x204u
#define TT_NIU_MST_RD_RESP_RECEIVED 0x208u

#define TT_NOC_CTRL_READ 0x10u          /* read | RESP_MARKED (required for reads) */
#define TT_NOC_CTRL_WRITE_ACKED 0x12u   /* write | RESP_MARKED: non-posted, one ack when the data landed */
#define TT_NOC_CTRL_ATOMIC 0x11u        /* atomic | RESP_MARKED */
#define TT_NOC_CTRL_MCAST_ACKED 0x132u  /* write | RESP_MARKED | BRCST | PATH_RESERVE: one ack per receiver */
#define TT_NOC_AT_INCR 0x107Cu          /* increment-and-get, 32-bit, of a 16-byte aligned word */
#define TT_NOC_MAX_REQUEST 16384u
#define TT_DRAM_PAGE_BYTES (1u << TT_DRAM_PAGE_SHIFT)

typedef struct {
    uint32_t base;        /* TT_NOC0_BASE or TT_NOC1_BASE */
    uint32_t own_xy;      /* translated coordinates of this tile, for return addresses */
    uint32_t rd_issued;   /* expected RD_RESP_RECEIVED once every issued read has completed */
    uint32_t wr_issued;   /* expected WR_ACK_RECEIVED once every issued write has been acked */
} tt_noc_t;

#define TT_NIU(noc, off) TT_REG32((noc)->base + (off))

static inline void tt_noc_init(tt_noc_t *noc, uint32_t base)
{
    noc->base = base;
    /* NOC_ID_LOGICAL, not NOC_NODE_ID: the latter is in raw NoC1 coordinates on NoC1 */
    noc->own_xy = TT_REG32(base + TT_NOC_ID_LOGICAL) & 0xFFFu;
    noc->rd_issued = TT_REG32(base + TT_NIU_MST_RD_RESP_RECEIVED);
    noc->wr_issued = TT_REG32(base + TT_NIU_MST_WR_ACK_RECEIVED);
}

/* a request's fields, once the NIU is free (the send is tt_noc_send); every field is rewritten because the registers
 * keep old values across launches. `len`: the byte count, or an atomic's operation word (TT_NOC_AT_INCR) */
static inline void tt_noc_setup(tt_noc_t *noc, uint32_t ctrl, uint32_t targ_lo, uint32_t targ_xy, uint32_t ret_lo,
                                uint32_t ret_xy, uint32_t len)
{
    TT_WAIT_UNTIL(TT_NIU(noc, TT_NOC_CMD_CTRL) == 0u);
    TT_NIU(noc, TT_NOC_CTRL) = ctrl;
    TT_NIU(noc, TT_NOC_PACKET_TAG) = 0u;
    TT_NIU(noc, TT_NOC_TARG_ADDR_LO) = targ_lo;
    TT_NIU(noc, TT_NOC_TARG_ADDR_MID) = 0u;
    TT_NIU(noc, TT_NOC_TARG_ADDR_HI) = targ_xy;
    TT_NIU(noc, TT_NOC_RET_ADDR_LO) = ret_lo;
    TT_NIU(noc, TT_NOC_RET_ADDR_MID) = 0u;
    TT_NIU(noc, TT_NOC_RET_ADDR_HI) = ret_xy;
    TT_NIU(noc, TT_NOC_AT_LEN_BE) = len;
}

static inline void tt_noc_send(tt_noc_t *noc)
{
    TT_NIU(noc, TT_NOC_CMD_CTRL) = 1u;
    (void)TT_NIU(noc, TT_NOC_CMD_CTRL);   /* read back: orders the send before later counter reads */
}

/* one request of 1..16384 bytes */
static inline void tt_noc_issue(tt_noc_t *noc, uint32_t ctrl, uint32_t targ_lo, uint32_t targ_xy, uint32_t ret_lo,
                                uint32_t ret_xy, uint32_t len)
{
    tt_noc_setup(noc, ctrl, targ_lo, targ_xy, ret_lo, ret_xy, len);
    tt_noc_send(noc);
}

/* the bytes of DRAM address `dram` that stay in one bank (up to the end of its page), at most `len` */
static inline uint32_t tt_dram_piece(uint32_t dram, uint32_t len)
{
    uint32_t room = TT_DRAM_PAGE_BYTES - (dram & (TT_DRAM_PAGE_BYTES - 1u));
    return len < room ? len : room;
}

/* the translated NoC coordinate word of the bank holding DRAM address `dram`: endpoint `col` of the bank's three, so
 * that no two banks share a NoC row (chip/interleave.py bank_xy) */
static inline uint32_t tt_dram_bank_xy(uint32_t dram)
{
    uint32_t bank = (dram >> TT_DRAM_PAGE_SHIFT) & (TT_DRAM_BANKS - 1u);
    uint32_t col = bank / TT_DRAM_BANKS_PER_COLUMN, row = bank - col * TT_DRAM_BANKS_PER_COLUMN;
    return (TT_DRAM_BANK_X0 + col) | ((TT_DRAM_BANK_Y0 + TT_DRAM_BANK_Y_STEP * row + col) << 6);
}

/* the offset of DRAM address `dram` inside its bank */
static inline uint32_t tt_dram_bank_offset(uint32_t dram)
{
    uint32_t page = dram >> TT_DRAM_PAGE_SHIFT;
    return ((page / TT_DRAM_BANKS) << TT_DRAM_PAGE_SHIFT) | (dram & (TT_DRAM_PAGE_BYTES - 1u));
}

/* A core's tiles [begin, end) of a split launch walked from a rotated start (tile k -> tt_range_at(k, ...)): the
 * cores' ranges start at multiples of their length, often all in bank 0, and walked in order they would ask the same
 * bank at the same time; rotated, core i = begin / (end - begin) starts in bank i mod 8, so the cores spread their
 * requests over the eight banks. The reader and the writer walk alike; the compute threads only count tiles. */
static inline uint32_t tt_range_rotation(uint32_t begin, uint32_t end)
{
    uint32_t n = end - begin;
    if (n == 0u) return 0u;
    uint32_t rot = ((begin / n) - begin) & (TT_DRAM_BANKS - 1u);
    return rot < n ? rot : rot % n;
}

static inline uint32_t tt_range_at(uint32_t k, uint32_t begin, uint32_t end, uint32_t rot)
{
    uint32_t t = k + rot;
    return t < end ? t : t - (end - begin);
}

/* DRAM [dram, dram+len) -> L1 [l1, l1+len); returns at once, complete after tt_noc_read_wait */
static inline void tt_noc_read_dram(tt_noc_t *noc, uint32_t dram, uint32_t l1, uint32_t len)
{
    if ((dram ^ l1) & 63u) tt_fail(TT_ERR_NOC_ALIGN);
    while (len) {
        uint32_t n = tt_dram_piece(dram, len);
        tt_noc_issue(noc, TT_NOC_CTRL_READ, tt_dram_bank_offset(dram), tt_dram_bank_xy(dram), l1, noc->own_xy, n);
        noc->rd_issued++;
        dram += n;
        l1 += n;
        len -= n;
    }
}

static inline void tt_noc_read_wait(tt_noc_t *noc)
{
    TT_WAIT_UNTIL((int32_t)(TT_NIU(noc, TT_NIU_MST_RD_RESP_RECEIVED) - noc->rd_issued) >= 0);
}

/* wait for the reads issued before `mark` (an earlier noc->rd_issued), not the later ones: readers keep several
 * tiles' reads in flight and take them in order (responses count in issue order per NIU) */
static inline void tt_noc_read_wait_mark(tt_noc_t *noc, uint32_t mark)
{
    TT_WAIT_UNTIL((int32_t)(TT_NIU(noc, TT_NIU_MST_RD_RESP_RECEIVED) - mark) >= 0);
}

/* the writes issued before `mark` (a wr_issued value) are acked: their sources may be reused */
static inline void tt_noc_write_wait_mark(tt_noc_t *noc, uint32_t mark)
{
    TT_WAIT_UNTIL((int32_t)(TT_NIU(noc, TT_NIU_MST_WR_ACK_RECEIVED) - mark) >= 0);
}

/* L1 [l1, l1+len) -> DRAM [dram, dram+len), non-posted; the source may be reused after tt_noc_write_wait */
static inline void tt_noc_write_dram(tt_noc_t *noc, uint32_t l1, uint32_t dram, uint32_t len)
{
    if ((dram ^ l1) & 15u) tt_fail(TT_ERR_NOC_ALIGN);
    tt_fence();   /* the core's own stores to the source (bool narrowing, scatter runs) land before the NIU reads it */
    while (len) {
        uint32_t n = tt_dram_piece(dram, len);
        tt_noc_issue(noc, TT_NOC_CTRL_WRITE_ACKED, l1, noc->own_xy, tt_dram_bank_offset(dram), tt_dram_bank_xy(dram), n);
        noc->wr_issued++;
        dram += n;
        l1 += n;
        len -= n;
    }
}

/* The fields every DRAM write of a core shares (write, acked; tag 0; the upper address words; this tile as the
 * source), set once: tt_noc_write_dram_kept then rewrites only what changes per request (the source address, the
 * bank's offset and coordinate, the length), 4 register stores instead of 9. Only for a core whose NIU sends nothing
 * but such writes after it (the NIU keeps a register's value until it is rewritten): a writer of many short runs,
 * templates/blocks/scatter.c.j2 `ring` */
static inline void tt_noc_write_keep(tt_noc_t *noc)
{
    uint32_t base = noc->base;
    TT_WAIT_UNTIL(TT_REG32(base + TT_NOC_CMD_CTRL) == 0u);
    TT_REG32(base + TT_NOC_CTRL) = TT_NOC_CTRL_WRITE_ACKED;
    TT_REG32(base + TT_NOC_PACKET_TAG) = 0u;
    TT_REG32(base + TT_NOC_TARG_ADDR_MID) = 0u;
    TT_REG32(base + TT_NOC_TARG_ADDR_HI) = noc->own_xy;
    TT_REG32(base + TT_NOC_RET_ADDR_MID) = 0u;
}

/* one request after tt_noc_write_keep: L1 [l1, l1+len) to offset `bank_off` of the DRAM bank at `bank_xy` (len
 * within one page). Not read back: the next request's wait for the NIU and tt_noc_write_wait's counter poll load
 * after it, and a poll that passed the send before it landed only polls longer */
static inline void tt_noc_write_kept(tt_noc_t *noc, uint32_t l1, uint32_t bank_off, uint32_t bank_xy, uint32_t len)
{
    uint32_t base = noc->base;   /* a local: the register stores would otherwise reload it each time */
    TT_WAIT_UNTIL(TT_REG32(base + TT_NOC_CMD_CTRL) == 0u);
    TT_REG32(base + TT_NOC_TARG_ADDR_LO) = l1;
    TT_REG32(base + TT_NOC_RET_ADDR_LO) = bank_off;
    TT_REG32(base + TT_NOC_RET_ADDR_HI) = bank_xy;
    TT_REG32(base + TT_NOC_AT_LEN_BE) = len;
    TT_REG32(base + TT_NOC_CMD_CTRL) = 1u;
    noc->wr_issued++;
}

/* tt_noc_write_dram after tt_noc_write_keep */
static inline void tt_noc_write_dram_kept(tt_noc_t *noc, uint32_t l1, uint32_t dram, uint32_t len)
{
    if ((dram ^ l1) & 15u) tt_fail(TT_ERR_NOC_ALIGN);
    tt_fence();
    while (len) {
        uint32_t n = tt_dram_piece(dram, len);
        tt_noc_write_kept(noc, l1, tt_dram_bank_offset(dram), tt_dram_bank_xy(dram), n);
        dram += n;
        l1 += n;
        len -= n;
    }
}

/* the first request of a write of L1 [l1, l1+len) to DRAM [dram, dram+len) set up in the NIU (the bytes that stay in
 * one bank: returned), not sent: tt_noc_write_send sends it once the source is complete, so that a writer waiting
 * for its source has the request's address work done before (the NIU is this core's writer's alone) */
static inline uint32_t tt_noc_write_prepare(tt_noc_t *noc, uint32_t l1, uint32_t dram, uint32_t len)
{
    if ((dram ^ l1) & 15u) tt_fail(TT_ERR_NOC_ALIGN);
    uint32_t n = tt_dram_piece(dram, len);
    tt_noc_setup(noc, TT_NOC_CTRL_WRITE_ACKED, l1, noc->own_xy, tt_dram_bank_offset(dram), tt_dram_bank_xy(dram), n);
    return n;
}

static inline void tt_noc_write_send(tt_noc_t *noc)
{
    tt_fence();
    tt_noc_send(noc);
    noc->wr_issued++;
}

static inline void tt_noc_write_wait(tt_noc_t *noc)
{
    TT_WAIT_UNTIL((int32_t)(TT_NIU(noc, TT_NIU_MST_WR_ACK_RECEIVED) - noc->wr_issued) >= 0);
}

/* A window of a DRAM buffer cached in L1, for element gathers. [lo, hi) are the DRAM bytes currently held at
 * `l1` (64-byte aligned, `size` bytes). A miss reloads the window starting at the element aligned down to 64
 * (the DRAM read congruence rule), never past the end of the buffer. */
typedef struct {
    uint32_t l1, size;
    uint32_t lo, hi;
} tt_window_t;

static inline void tt_window_init(tt_window_t *w, uint32_t l1, uint32_t size)
{
    w->l1 = l1;
    w->size = size;
    w->lo = w->hi = 0;
}

/* L1 address of the `esz`-byte element at DRAM address `addr` of the buffer [buf, buf_end) */
static inline uint32_t tt_window_fetch(tt_noc_t *noc, tt_window_t *w, uint32_t buf, uint32_t buf_end, uint32_t addr,
                                       uint32_t esz)
{
    if (addr < buf || addr + esz > buf_end) tt_fail(TT_ERR_GATHER_OOB);
    if (addr < w->lo || addr + esz > w->hi) {
        uint32_t lo = addr & ~63u;
        uint32_t len = buf_end - lo < w->size ? buf_end - lo : w->size;
        tt_noc_read_dram(noc, lo, w->l1, len);
        tt_noc_read_wait(noc);
        tt_fence();
        w->lo = lo;
        w->hi = lo + len;
    }
    return w->l1 + (addr - w->lo);
}

/* The window load of tt_window_span below, issued and not waited for: returns the read mark after which the window
 * holds [addr, addr+len) (tt_noc_read_wait_mark), the current count when it holds them already. A reader issues a
 * resident buffer's load this way among its streams' reads, so that its first use does not wait for the later ones. */
static inline uint32_t tt_window_span_issue(tt_noc_t *noc, tt_window_t *w, uint32_t buf, uint32_t buf_end,
                                            uint32_t addr, uint32_t len, uint32_t back, uint32_t span)
{
    if (addr < buf || addr + len > buf_end || addr + len < addr) tt_fail(TT_ERR_GATHER_OOB);
    if (addr < w->lo || addr + len > w->hi) {
        uint32_t lo = (addr - buf > back ? addr - back : buf) & ~63u;
        uint32_t n = addr + len - lo;
        if (n < span) n = span;
        if (n > w->size) n = w->size;
        if (n > buf_end - lo) n = buf_end - lo;
        tt_noc_read_dram(noc, lo, w->l1, n);
        w->lo = lo;
        w->hi = lo + n;
    }
    return noc->rd_issued;
}

/* L1 address of the bytes [addr, addr+len) of the buffer [buf, buf_end) (the reader's run paths). On a miss the window
 * is reloaded from `back` bytes below addr (not below buf), aligned down to 64, for max(span, what is needed) bytes,
 * at most the window size and never past buf_end: span = size reads ahead (dense walks), span = 0 reads just the
 * request (sparse walks), back > 0 serves descending walks. Needs len + back + 63 <= size. */
static inline uint32_t tt_window_span(tt_noc_t *noc, tt_window_t *w, uint32_t buf, uint32_t buf_end, uint32_t addr,
                                      uint32_t len, uint32_t back, uint32_t span)
{
    uint32_t before = noc->rd_issued;
    if (tt_window_span_issue(noc, w, buf, buf_end, addr, len, back, span) != before) {
        tt_noc_read_wait(noc);
        tt_fence();
    }
    return w->l1 + (addr - w->lo);
}

/* L1 [l1, l1+len) -> L1 [dst, dst+len) of the Tensix tile at xy (translated, x | y << 6), non-posted: complete after
 * tt_noc_write_wait (one ack per request) */
static inline void tt_noc_write_tile(tt_noc_t *noc, uint32_t l1, uint32_t xy, uint32_t dst, uint32_t len)
{
    if ((dst ^ l1) & 15u) tt_fail(TT_ERR_NOC_ALIGN);
    tt_fence();   /* the core's own stores to the source land before the NIU reads it */
    while (len) {
        uint32_t n = len < TT_NOC_MAX_REQUEST ? len : TT_NOC_MAX_REQUEST;
        tt_noc_issue(noc, TT_NOC_CTRL_WRITE_ACKED, l1, noc->own_xy, dst, xy, n);
        noc->wr_issued++;
        dst += n;
        l1 += n;
        len -= n;
    }
}

/* L1 [l1, l1+len) -> L1 [dst, dst+len) of the `receivers` Tensix tiles of rectangle `rect` (end_x | end_y << 6 |
 * start_x << 12 | start_y << 18, start <= end: NoC0 only; the sender excluded), non-posted: complete after
 * tt_noc_write_wait */
static inline void tt_noc_mcast_write(tt_noc_t *noc, uint32_t l1, uint32_t rect, uint32_t dst, uint32_t len,
                                      uint32_t receivers)
{
    if ((dst ^ l1) & 15u) tt_fail(TT_ERR_NOC_ALIGN);
    tt_fence();
    while (len) {
        uint32_t n = len < TT_NOC_MAX_REQUEST ? len : TT_NOC_MAX_REQUEST;
        tt_noc_issue(noc, TT_NOC_CTRL_MCAST_ACKED, l1, noc->own_xy, dst, rect, n);
        noc->wr_issued += receivers;
        dst += n;
        l1 += n;
        len -= n;
    }
}

/* the 16-byte aligned L1 word `addr` of the tile at xy += 1 (a semaphore another core polls); the old value lands in
 * this tile's word `ret`. Ordered after this NIU's earlier writes to that tile only once they are acked
 * (tt_noc_write_wait first). */
static inline void tt_noc_atomic_inc(tt_noc_t *noc, uint32_t xy, uint32_t addr, uint32_t ret)
{
    tt_noc_setup(noc, TT_NOC_CTRL_ATOMIC, addr, xy, ret, noc->own_xy, TT_NOC_AT_INCR);
    TT_NIU(noc, TT_NOC_AT_DATA) = 1u;
    tt_noc_send(noc);
}

/* wait until the L1 word at addr (a semaphore other cores increment over the NoC) has reached `target` (wrap-safe) */
static inline void tt_sem_wait_at_least(uint32_t addr, uint32_t target)
{
    TT_WAIT_UNTIL((int32_t)(TT_REG32(addr) - target) >= 0);
}

#endif
