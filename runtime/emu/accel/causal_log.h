/* The causal-load rule's lookups in the tile's write log of RISC-V L1 stores (tile.py Tile.l1_at and
 * first_write_after are the reference, docs/ARCHITECTURE.md "Causal loads"): the ring of LOG_SIZE entries (line, cycle,
 * word address, the word before the store) as uint64 quadruples, filled by tile.py _log_write and rv32_native.c
 * log_write, its count, its index by line (log_index), and the per-line stamps of the last write. Included by
 * rv32_native.c, whose core answers its own loads with them and whose module exports them to tile.py. */
#include <stdint.h>
#include <string.h>

#define LOG_SIZE 1024u                 /* tile.py WRITE_LOG */
#define STAMP_SHIFT 4u                 /* rv32.py STAMP_SHIFT */

/* The index that finds a line's logged stores without a scan of the ring: per L1 line (head), 1 + the number of its
 * newest logged store (0: none), and per ring slot (prev), 1 + the number of the store to the same line before the one
 * held there (0: none). tile.py _log_write and rv32_native.c log_write keep it as they log; a store number below
 * count - LOG_SIZE has left the ring, and so have all before it. */
static inline void log_index(uint64_t *head, uint64_t *prev, uint64_t line, uint64_t n) {
    prev[n % LOG_SIZE] = head[line];
    head[line] = n + 1;
}

/* the slot of the logged store the index names by `at` (1 + its number), or -1 when it names none or one the ring no
 * longer holds */
static inline int64_t log_slot(uint64_t at, uint64_t count) {
    return at && at - 1 + LOG_SIZE >= count ? (int64_t)((at - 1) % LOG_SIZE) : -1;
}

/* *value = the aligned word at L1 addr & ~3 as it was at `cycle`: the logged stores after it undone, newest first (the
 * line's stores through the index), down to the newest store to its line at or before it. 0 when that is not known:
 * the line's last write (its stamp) is later than both `cycle` and every logged store to the line (a NoC transfer,
 * whose data the log does not keep), or the ring no longer holds every store after `cycle` (Tile.l1_at's None). */
static int l1_word_at(const uint8_t *l1, const uint64_t *stamp, const uint64_t *log, uint64_t count,
                      const uint64_t *head, const uint64_t *prev, uint32_t addr, uint64_t cycle, uint32_t *value) {
    uint32_t word = addr & ~3u;
    uint64_t line = addr >> STAMP_SHIFT, logged_last = 0;
    int complete = count <= LOG_SIZE;
    memcpy(value, l1 + word, 4);
    if (stamp[line] <= cycle)
        return 1;
    for (int64_t k = log_slot(head[line], count); k >= 0; k = log_slot(prev[k], count)) {
        const uint64_t *e = log + 4 * k;
        if (e[1] > logged_last)
            logged_last = e[1];
        if (e[1] <= cycle) {
            complete = 1;
            break;
        }
        if (e[2] == word)
            *value = (uint32_t)e[3];
    }
    return complete && stamp[line] <= (logged_last > cycle ? logged_last : cycle);
}

/* the cycle of the earliest logged store to the word at L1 addr after `cycle` into *first; 0 if there is none */
static int first_write_after(const uint64_t *log, uint64_t count, const uint64_t *head, const uint64_t *prev,
                             uint32_t addr, uint64_t cycle, uint64_t *first) {
    uint64_t word = addr & ~3u;
    int found = 0;
    for (int64_t k = log_slot(head[addr >> STAMP_SHIFT], count); k >= 0; k = log_slot(prev[k], count)) {
        const uint64_t *e = log + 4 * k;
        if (e[2] == word && e[1] > cycle && (!found || e[1] < *first)) {
            *first = e[1];
            found = 1;
        }
    }
    return found;
}
