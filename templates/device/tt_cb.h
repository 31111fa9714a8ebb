/* Circular buffers in L1 between one producer core and one consumer core.
 *
 * Each CB has `depth` slots of `slot_bytes` at `base`, and two free-running u32 counters in a control block in L1:
 * `pushed` (+0, written only by the producer) and `popped` (+16, written only by the consumer; a separate 16-byte
 * line so the two writers never share an L0 cache line). Occupancy = pushed - popped, wrap-safe. Each side keeps its
 * own counter and slot index locally; the other side's counter is polled with a fence.
 * The control block is zeroed by BRISC before it signals ready (tt_kernel.h handshake). */
#ifndef TT_CB_H
#define TT_CB_H

#include "tt_kernel.h"

typedef struct {
    uint32_t base;        /* L1 address of slot 0 */
    uint32_t slot_bytes;
    uint32_t depth;
    uint32_t ctrl;        /* L1 address of the control block */
    uint32_t count;       /* this side's counter (pushed for the producer, popped for the consumer) */
    uint32_t slot;        /* this side's current slot index, count % depth without a division */
} tt_cb_t;

#define TT_CB_PUSHED(cb) TT_REG32((cb)->ctrl + 0u)
#define TT_CB_POPPED(cb) TT_REG32((cb)->ctrl + 16u)

static inline void tt_cb_init(tt_cb_t *cb, uint32_t base, uint32_t slot_bytes, uint32_t depth, uint32_t ctrl)
{
    cb->base = base;
    cb->slot_bytes = slot_bytes;
    cb->depth = depth;
    cb->ctrl = ctrl;
    cb->count = 0;
    cb->slot = 0;
}

/* called by BRISC only, before tt_signal_ready */
static inline void tt_cb_reset_ctrl(uint32_t ctrl)
{
    TT_REG32(ctrl + 0u) = 0;
    TT_REG32(ctrl + 16u) = 0;
}

static inline uint32_t tt_cb_slot_addr(const tt_cb_t *cb) { return cb->base + cb->slot * cb->slot_bytes; }

static inline void tt_cb_advance(tt_cb_t *cb)
{
    cb->count++;
    cb->slot = cb->slot + 1u == cb->depth ? 0u : cb->slot + 1u;
}

/* producer: wait for a free slot, return its L1 address */
static inline uint32_t tt_cb_reserve(tt_cb_t *cb)
{
    TT_WAIT_UNTIL(cb->count - TT_CB_POPPED(cb) < cb->depth);
    return tt_cb_slot_addr(cb);
}

/* the L1 address of the slot `ahead` slots past the current one, without waiting for it */
static inline uint32_t tt_cb_slot_ahead(const tt_cb_t *cb, uint32_t ahead)
{
    uint32_t slot = cb->slot + ahead;
    return cb->base + (slot < cb->depth ? slot : slot - cb->depth) * cb->slot_bytes;
}

/* producer: the slot `ahead` slots past the current one (tiles reserved and filling but not pushed yet: a reader with
 * several tiles' reads in flight), once it is free */
static inline uint32_t tt_cb_reserve_ahead(tt_cb_t *cb, uint32_t ahead)
{
    TT_WAIT_UNTIL(cb->count + ahead - TT_CB_POPPED(cb) < cb->depth);
    return tt_cb_slot_ahead(cb, ahead);
}

/* producer: the slot's data is complete in L1 (NoC read waited for / packer idle) */
static inline void tt_cb_push(tt_cb_t *cb)
{
    tt_cb_advance(cb);
    tt_fence();
    TT_CB_PUSHED(cb) = cb->count;
    tt_fence();
}

/* consumer: wait for a filled slot, return its L1 address */
static inline uint32_t tt_cb_wait(tt_cb_t *cb)
{
    TT_WAIT_UNTIL(TT_CB_PUSHED(cb) - cb->count > 0u);
    return tt_cb_slot_addr(cb);
}

/* consumer: the filled slot `ahead` slots past the current one (slots being written out but not popped yet: a writer
 * with several tiles' writes in flight), once it is pushed */
static inline uint32_t tt_cb_wait_ahead(tt_cb_t *cb, uint32_t ahead)
{
    TT_WAIT_UNTIL(TT_CB_PUSHED(cb) - cb->count > ahead);
    return tt_cb_slot_ahead(cb, ahead);
}

/* consumer: done reading the slot (after the unpacker / NoC write finished with it) */
static inline void tt_cb_pop(tt_cb_t *cb)
{
    tt_cb_advance(cb);
    tt_fence();
    TT_CB_POPPED(cb) = cb->count;
    tt_fence();
}

#endif
