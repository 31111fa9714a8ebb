/* The causal-load rule's lookups in the tile's write log of RISC-V L1 stores (tile.py Tile.l1_at and
 * first_write_after are the reference, docs/ARCHITECTURE.md "Causal loads"): the ring of LOG_SIZE entries (line, cycle,
 * word address, the word before the store) as uint64 quadruples, filled by tile.py _log_write and rv32_native.c
 * log_write, its count, and the per-line stamps of the last write. Included by rv32_native.c, whose core answers its
 * own loads with them and whose module exports them to tile.py. */
#include <stdint.h>
#include <string.h>

#define LOG_SIZE 1024u                 /* tile.py WRITE_LOG */
#define STAMP_SHIFT 4u                 /* rv32.py STAMP_SHIFT */

/* *value = the aligned word at L1 addr & ~3 as it was at `cycle`: the logged stores after it undone, newest first in
 * ring order, down to the newest store to its line at or before it. 0 when that is not known: the line's last write
 * (its stamp) is later than both `cycle` and every logged store to the line (a NoC transfer, whose data the log does
 * not keep), or the ring no longer holds every store after `cycle` (Tile.l1_at's None). */
static int l1_word_at(const uint8_t *l1, const uint64_t *stamp, const uint64_t *log, uint64_t count, uint32_t addr,
                      uint64_t cycle, uint32_t *value) {
    uint32_t word = addr & ~3u;
    uint64_t line = addr >> STAMP_SHIFT, held = count < LOG_SIZE ? count : LOG_SIZE, logged_last = 0;
    int complete = count <= LOG_SIZE;
    memcpy(value, l1 + word, 4);
    if (stamp[line] <= cycle)
        return 1;
    for (uint64_t k = 0; k < held; k++) {
        const uint64_t *e = log + 4 * ((count - 1 - k) % LOG_SIZE);
        if (e[0] != line)
            continue;
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
static int first_write_after(const uint64_t *log, uint64_t count, uint32_t addr, uint64_t cycle, uint64_t *first) {
    uint64_t held = count < LOG_SIZE ? count : LOG_SIZE, word = addr & ~3u;
    int found = 0;
    for (uint64_t k = 0; k < held; k++) {
        const uint64_t *e = log + 4 * k;
        if (e[2] == word && e[1] > cycle && (!found || e[1] < *first)) {
            *first = e[1];
            found = 1;
        }
    }
    return found;
}
