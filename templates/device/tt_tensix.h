/* Helpers for the three TRISC threads: config stores, semaphores seen from the RISC-V side, waiting for the
 * thread's Tensix instructions to drain, and run-time GPR loads for in-stream WRCFG.
 *
 * Semaphores are taken by the RISC-V (poll the value, store 1 to decrement) rather than with an in-stream SEMWAIT:
 * a thread blocked in SEMWAIT would also block its RISC-V on the next push, and it could never see the host's stop
 * flag. Posting stays in-stream (STALLWAIT + SEMPOST) so it is ordered after the work it announces. */
#ifndef TT_TENSIX_H
#define TT_TENSIX_H

#include "tt_kernel.h"
#include "tt_isa.h"

/* semaphore numbers and their SEMINIT/SEMPOST mask bits */
#define TT_SEM_UNPACKED 0u   /* T0 -> T1: input tiles are in Dst (fp32 path) / all unpacks issued and done */
#define TT_SEM_MATHDONE 1u   /* T1 -> T2: output tile computed in Dst */
#define TT_SEM_FREE 2u       /* T2 -> T0: the Dst group may be overwritten */
#define TT_SEM_UNPACK_READ 3u   /* T0's thread -> its RISC-V: the unpackers have read a tile's CB slots */
#define TT_SEM_MASK(s) (1u << (s))

/* config word i, written from the RISC-V: only before the thread has pushed anything that reads it */
static inline void tt_cfg_write(uint32_t i, uint32_t value) { TT_REG32(TT_TENSIX_CFG_BASE + 4u * i) = value; }

static inline uint32_t tt_sem_value(uint32_t sem) { return TT_REG32(TT_SEMAPHORE_BASE + 4u * sem); }

/* wait until the semaphore is > 0, then decrement it (a RISC-V store of 1 is a SEMGET) */
static inline void tt_sem_take(uint32_t sem)
{
    TT_WAIT_UNTIL(tt_sem_value(sem) > 0u);
    TT_REG32(TT_SEMAPHORE_BASE + 4u * sem) = 1u;
}

/* block the RISC-V until every instruction this thread pushed has completed (ManualTTSync.md): the store is
 * discarded by hardware but keeps the load from overtaking older pushes; the load stalls until the thread is idle. */
static inline void tt_tensix_idle(void)
{
    TT_REG32(TT_TENSIX_SYNC) = 0u;
    (void)TT_REG32(TT_TENSIX_SYNC);
}

/* GPR := value through two in-stream SETDMAREGs (16 bits each), for a following WRCFG */
static inline void tt_set_gpr(uint32_t gpr, uint32_t value)
{
    TT_PUSH(TT_OP_SETDMAREG(2u * gpr, 0u, value & 0xFFFFu));
    TT_PUSH(TT_OP_SETDMAREG(2u * gpr + 1u, 0u, value >> 16));
}

/* L1 byte address -> the unpacker/packer base address encoding (16-byte units, minus one) */
static inline uint32_t tt_l1_addr16(uint32_t addr) { return (addr >> 4) - 1u; }

#endif
