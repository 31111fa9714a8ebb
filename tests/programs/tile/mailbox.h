/* Mailboxes (BabyRISCV/Mailboxes.md), the Dst window (Dst.md) and the GPR window (ScalarUnit.md) for the tile tests.
   ROLE: 0 = BRISC, 1..3 = TRISC0..2 (mailbox index of the core). */
#ifndef MAILBOX_H
#define MAILBOX_H
#include "tile_test.h"

#define MB(i) (0xFFEC0000u + 0x1000u * (i))   /* write: me -> core i; read: core i -> me */
#define MB_QUERY(i) (MB(i) + 4u)              /* read: 1 if core i -> me holds a value (hardware; fatal in ttsim) */
#define REGFILE 0xFFE00000u
#define DST_BASE 0xFFBD8000u
#define TENSIX_CFG(i) (0xFFEF0000u + 4u * (i))
#define PUSH(w) (REG(0xFFE40000u) = (w))
#define RESULTS 0x30000u

/* Make an earlier load complete before anything later starts (ManualTTSync.md / MemoryOrdering.md): consume it. */
static inline void consume(uint32_t v) { __asm__ volatile("addi x0, %0, 0" :: "r"(v)); }
/* A store to MMIO finished before what follows: read the same address back and consume it. */
static inline void store_done(uint32_t addr) { consume(REG(addr)); }
/* Wait until this TRISC's Tensix thread has finished everything pushed so far (ManualTTSync.md). */
static inline void ttsync(void) { REG(0xFFE80004u) = 0; consume(REG(0xFFE80004u)); }
#endif
