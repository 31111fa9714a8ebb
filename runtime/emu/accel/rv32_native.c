/* The baby RISC-V cores' instructions that touch only registers, L1 and the core's local RAM, in C: the same bits,
 * the same instruction counts and the same block boundaries as runtime/emu/rv32.py (the reference, which the equality
 * tests pin this against), and the stores that fill an NIU's command registers (niu_store). Given the bus's callables
 * (bus_calls, rv32_native.py `MMIO_EXITS`), C also makes the one call rv32.py's block makes for an aligned 32-bit load
 * or store elsewhere (MMIO: mmio_load / mmio_store with core.pos at its position; a store to the core's own Tensix push
 * window: the tile's pusher, which does what that store's handler does) and for a run of `.ttinsn` words (PUSHM,
 * PUSHP or push_tensix), and carries on; a Stall the call raises ends the quantum at that instruction (RV_STALL: it is
 * retried), any other error leaves run() with pc naming the culprit. Given the tile's direct push context, a TRISC's
 * runs and push-window stores go to plain_run in C instead (direct_run), the pusher taking only what it leaves; loads
 * of L1 lines written after the core's cycle are answered from the tile's write log (causal_log.h) where the tile's
 * past() would answer them. Everything else (other MMIO, misaligned or region-crossing accesses, CSRs, atomics,
 * illegal words, fetches outside L1, and the above without bus_calls) is handed back to Python at that instruction:
 * rv_run returns RV_PYTHON with pc naming it and n how many instructions Python executes there (a run of `.ttinsn`
 * words that rv32.py pushes with one PUSHM call, else 1), and rv32.py's own translation of those instructions executes
 * them.
 *
 * rv32.py's run() checks its budget and its spin detection only where a translated block starts: after a branch or
 * jump, after MAX_BLOCK instructions, at the end of L1. This file keeps the same points (in_block counts the
 * instructions of the current block), so a quantum retires exactly the instructions it retires there. rv32.py looks
 * at a block's purity (no store, push, CSR write or atomic) before it runs; here an impure instruction clears the
 * spin snapshot as it executes. That gives the same state at every block start: a snapshot taken where an impure
 * block starts is cleared by that block before any check could use it, and a core is found back at a snapshot's pc
 * only after that block ran to its end.
 * A CPython extension module (its one function run(state address) costs a tenth of a ctypes call, and a core
 * returns here at every MMIO word, push and CSR), built by accel/native.py with the host compiler against Python's
 * headers; loaded by accel/rv32_native.py. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "causal_log.h"
#include "py_tags.h"      /* dict_version, type_tag */
#include "py_switch.h"    /* switch_set: the switch setters */

#define L1_SIZE 0x180000u
#define LOCAL_BASE 0xFFB00000u
#define MAX_BLOCK 64u
#define SPIN_CHAIN 16u
#define NO_SPIN 0xFFFFFFFFu

enum { RV_ERROR = -1, RV_BUDGET = 0, RV_SPIN = 1, RV_PARKED = 2, RV_PYTHON = 3, RV_STALL = 4 };

/* shared with accel/rv32_native.py (STATE_FIELDS there): uint32 words after the two pointers */
typedef struct {
    uint8_t *l1, *local;
    uint32_t local_size, multi_push;   /* multi_push: the bus gave PUSHM (runs of `.ttinsn` words in one call;
                                        * MULTI_*) */
    uint32_t pc, done, budget, in_block, spin_pc, chain, exit_n;
    uint32_t causal;                   /* the causal-load rule for loads of lines stamped after t0 + done (CAUSAL_*) */
    uint32_t *niu_regs[2];             /* each NIU's initiator registers (noc.py Niu.regs), or NULL: Python's */
    uint32_t niu_base[2];              /* where each NIU's register window starts in the core's address space */
    uint32_t x[32], spin_x[32];
    uint64_t *stamp, t0;               /* rv32.py set_stamper: per L1 line, the cycle of its last store (t0 + done) */
    uint64_t *log, *log_n;             /* the tile's L1 write log (tile.py Tile.l1_log): a ring of LOG_SIZE entries
                                        * (line, cycle, word address, the word before the store); its count */
    uint32_t push_base, push_size;     /* the core's own Tensix push window (bus_calls.window), size 0: none */
    uint64_t *log_head, *log_prev;     /* the write log's index by line (causal_log.h log_index) */
} rv_state;
/* the word offsets rv32_native.py writes: X = 20, STAMP = 84, T0 = 86, LOG = 88, PUSH_BASE = 92, LOG_INDEX = 94,
 * STATE_WORDS = 98 */
_Static_assert(offsetof(rv_state, x) == 4 * 20 && offsetof(rv_state, stamp) == 4 * 84 &&
               offsetof(rv_state, t0) == 4 * 86 && offsetof(rv_state, log) == 4 * 88 &&
               offsetof(rv_state, push_base) == 4 * 92 && offsetof(rv_state, log_head) == 4 * 94 &&
               sizeof(rv_state) == 4 * 98, "rv32_native.py's word offsets");
/* rv_state.multi_push (rv32_native.py NativeRun.run): each `.ttinsn` word pushed on its own (no PUSHM); runs cut at
 * block starts as rv32.py's blocks cut them; runs joined across block starts where C makes the bus calls (ttinsn_run) */
enum { MULTI_OFF = 0, MULTI_BLOCK = 1, MULTI_JOIN = 2 };
/* rv_state.causal (rv32.py set_stamp_wait; rv32_native.py NativeRun.run): no rule; such a load is Python's; C reads
 * it from the write log (l1_word_at) and hands back only what the log cannot answer (the core then waits in Python) */
enum { CAUSAL_OFF = 0, CAUSAL_HAND_BACK = 1, CAUSAL_IN_C = 2 };

/* The bus's callables (rv32_native.py NativeRun.run passes them in this order), borrowed for one run() call:
 * core (its pos and sub are set / read), name, mmio_load, mmio_store, window (push(pos, word) for the push window, or
 * None), pushp, pushm (or None: as in the core's namespace), push_tensix, stamp_base (or None), Stall. */
#define BUS_CALLS 10
typedef struct { PyObject *core, *name, *load, *store, *window, *pushp, *pushm, *push, *base, *stall; } bus_calls;
_Static_assert(sizeof(bus_calls) == BUS_CALLS * sizeof(PyObject *), "filled slot by slot");
static PyObject *s_pos, *s_sub, *s_mm_record, *s_pm_done, *s_pm_t, *s_sem_value, *s_sem_posts, *s_rec, *s_latency_of, *four, *zero;
static PyObject *s_thread_idle, *s_thread_done, *s_sem_mmio_write, *s_sem_max, *s_strict, *s_tm, *s_event_t, *s_popleft,
    *s_append;
static PyObject *s_instret, *s_parked, *s_spinning, *s_soft_reset, *s_python_quanta, *s_pc, *s_past_in_c, *s_calls,
    *s_clock;

/* The attributes the round loop and the bus calls read or write on every quantum: RV32Core's, NativeRun's, Tile's and
 * Tensix's __slots__ members (rv32.py, rv32_native.py, tile.py, tensix.py), read and written here at the member's offset where that is
 * what PyObject_GetAttr / PyObject_SetAttr do: the object's class has the generic getattr and setattr and the name
 * resolves there to a writable object member (no class in the MRO redefines it). The offset is remembered per name
 * with the class and its version tag (any change of a class in its MRO changes it, and no two classes get the same
 * one). An empty member, another class, or slots_on 0 (rv32_native.py SLOTS_NATIVE, the reference) goes by name. By
 * name each access had cost ~200 x86 instructions (the type look-up and the generic call), ~25 of them a quantum. */
enum { SL_PC, SL_INSTRET, SL_POS, SL_SUB, SL_PARKED, SL_SPINNING, SL_QUANTA, SL_PAST_IN_C, SL_CALLS, SL_SOFT_RESET,
       SL_CLOCK, SL_SEM_VALUE, SL_SEM_MAX, SL_SEM_POSTS, SL_STRICT, SL_PM_DONE, SL_PM_T, SL_N };
static PyObject **const slot_names[SL_N] = {&s_pc, &s_instret, &s_pos, &s_sub, &s_parked, &s_spinning,
                                            &s_python_quanta, &s_past_in_c, &s_calls, &s_soft_reset, &s_clock,
                                            &s_sem_value, &s_sem_max, &s_sem_posts, &s_strict, &s_pm_done, &s_pm_t};
static struct { PyTypeObject *tp; unsigned int tag; Py_ssize_t off; } slot_memo[SL_N];
static int slots_on = 1;

/* the offset of the writable object slot `name` of class tp, or -1 (also for a member of a class tp does not derive
 * from, which the generic look-up would refuse) */
static Py_ssize_t slot_offset(PyTypeObject *tp, PyObject *name) {
    PyObject *descr = _PyType_Lookup(tp, name);
    if (!descr || !Py_IS_TYPE(descr, &PyMemberDescr_Type) || !PyType_IsSubtype(tp, PyDescr_TYPE(descr)))
        return -1;
    PyMemberDef *m = ((PyMemberDescrObject *)descr)->d_member;
    return m->type == T_OBJECT_EX && !(m->flags & READONLY) ? m->offset : -1;
}

/* the address of o's member for attribute k, or NULL where it goes by name */
static PyObject **slot_at(PyObject *o, int k) {
    PyTypeObject *tp = Py_TYPE(o);
    unsigned int tag = type_tag(tp);
    if (tp == slot_memo[k].tp && tag && tag == slot_memo[k].tag)
        return (PyObject **)((char *)o + slot_memo[k].off);
    if (!slots_on || tp->tp_getattro != PyObject_GenericGetAttr || tp->tp_setattro != PyObject_GenericSetAttr)
        return NULL;
    Py_ssize_t off = slot_offset(tp, *slot_names[k]);
    if (off < 0 || !(tag = type_tag(tp)))         /* (_PyType_Lookup gave tp a tag where it can have one) */
        return NULL;
    slot_memo[k].tp = tp, slot_memo[k].tag = tag, slot_memo[k].off = off;
    return (PyObject **)((char *)o + off);
}

/* getattr(o, attribute k): a new reference, or NULL with an error set */
static PyObject *slot_get(PyObject *o, int k) {
    PyObject **p = slot_at(o, k);
    return p && *p ? Py_NewRef(*p) : PyObject_GetAttr(o, *slot_names[k]);
}

/* setattr(o, attribute k, v): 0, or -1 with an error set */
static int slot_set(PyObject *o, int k, PyObject *v) {
    PyObject **p = slot_at(o, k);
    if (!p)
        return PyObject_SetAttr(o, *slot_names[k], v);
    Py_XSETREF(*p, Py_NewRef(v));
    return 0;
}

/* getattr(o, attribute k) as a C long long: 0, or -1 with an error set */
static int slot_ll(PyObject *o, int k, long long *v) {
    PyObject *a = slot_get(o, k);
    if (!a)
        return -1;
    *v = PyLong_AsLongLong(a);
    Py_DECREF(a);
    return *v == -1 && PyErr_Occurred() ? -1 : 0;
}

/* getattr(o, attribute k)'s truth: 1 / 0, -1 with an error set */
static int slot_true(PyObject *o, int k) {
    PyObject *a = slot_get(o, k);
    int t = a ? PyObject_IsTrue(a) : -1;
    Py_XDECREF(a);
    return t;
}

/* o.attribute_k += by (an int attribute): 0, or -1 with an error set */
static int slot_add(PyObject *o, int k, long long by) {
    long long v;
    PyObject *n;
    if (slot_ll(o, k, &v) || !(n = PyLong_FromLongLong(v + by)))
        return -1;
    int r = slot_set(o, k, n);
    Py_DECREF(n);
    return r;
}

/* plain_run's C entries (sfpu_issue_native.c's capsules): "sfpu_issue.plain_run", called with plain_run's arguments,
 * and "sfpu_issue.plain_run_c" (tx, words, thread, facts, &j, &t): 0 with (j, t) = (next j, next push time), -1 with
 * (j, t) = the word that raised and its push time */
typedef PyObject *(*plain_run_entry)(PyObject *, PyObject *const *, Py_ssize_t);
typedef int (*plain_run_c_entry)(PyObject *, PyObject *, PyObject *, PyObject *, long long *, long long *);

/* A TRISC's `.ttinsn` runs handed to plain_run from here (rv32_native.py DIRECT_PUSH; the tile's direct push context,
 * run()'s third argument, borrowed for one call): what the tile's pusher (tile.py Tile._multi_pusher) and the Tensix's
 * push_many -> push_run do for the words plain_run takes, the core's stall and the thread's push count kept in the
 * tile's dict and list; the words it leaves (no facts yet, SFPU words, MVMULs, a full FIFO) go to the pusher, or
 * where it is the tile's own, to the push_many it calls, with its accounting (direct_many). */
#define DIRECT_FIELDS 15
typedef struct {
    plain_run_entry fn;                /* NULL: every run goes to the pusher (unless cfn) */
    plain_run_c_entry cfn;             /* plain_run_c, called instead of fn where the context gives it */
    PyObject *tx, *thread, *facts, *progress, *stall, *pushes, *waits, *full, *allowed, *name;
    PyObject *pushm, *many;            /* the tile's PUSHM pusher for the core and the push_many it calls, which C calls
                                        * itself while the core's PUSHM is that pusher (direct_many); many NULL: never */
    const char *never_plain;           /* per opcode, nonzero where no word has facts (plain_takes), or NULL */
    PyObject *runs;                    /* the core's runs' tuples kept by pc (run_words), or NULL */
    PyObject *tile;                    /* the tile whose PC buffer C serves (sem_load, pcbuf_store), or NULL */
    uint32_t sem_base, n_sems, extra;  /* the semaphore window: n_sems words from sem_base, its MMIO latency */
    int sem_loads;                     /* C serves the semaphore loads (sem_load) */
    uint32_t sync;                     /* TTSync's address: C serves its loads and stores and the semaphore stores (0:
                                        * the bus calls do) */
    PyObject *sync_wait;               /* the wait reason of a TTSync load while the thread is busy */
    int sem_stores;                    /* C makes a semaphore store's post or get itself (sem_store), not through the
                                        * Tensix's sem_mmio_write */
    PyObject *idle_ref, *done_ref, *tm_done_ref;   /* frontend.py's thread_idle, tensix.py's thread_done and
                                        * cycles.py's TensixTiming.done, which ttsync_load answers itself while they
                                        * are the Tensix's and its cycle model's (ttsync_query), or NULL: called */
    Py_ssize_t thread_i;
    long long base;                    /* the core's cycle less its stall (tbase + instret): fixed during one run() */
    int ready;                         /* allowed() as asked at the run's first push: 1, 0 (pushers only), -1 not yet */
} direct_push;

static inline int32_t sx(uint32_t v) { return (int32_t)v; }
static inline uint32_t sext(uint32_t v, int bits) {
    uint32_t s = 1u << (bits - 1);
    return ((v & ((s << 1) - 1)) ^ s) - s;
}
static inline uint32_t imm_i(uint32_t w) { return sext(w >> 20, 12); }
static inline uint32_t imm_s(uint32_t w) { return sext(((w >> 25) << 5) | ((w >> 7) & 31), 12); }
static inline uint32_t imm_b(uint32_t w) {
    return sext(((w >> 31) << 12) | (((w >> 7) & 1) << 11) | (((w >> 25) & 0x3F) << 5) | (((w >> 8) & 0xF) << 1), 13);
}
static inline uint32_t imm_j(uint32_t w) {
    return sext(((w >> 31) << 20) | (((w >> 12) & 0xFF) << 12) | (((w >> 20) & 1) << 11)
                | (((w >> 21) & 0x3FF) << 1), 21);
}
static inline uint32_t rotl(uint32_t a, uint32_t s) { s &= 31; return s ? (a << s) | (a >> (32 - s)) : a; }
static inline uint32_t rotr(uint32_t a, uint32_t s) { s &= 31; return s ? (a >> s) | (a << (32 - s)) : a; }

static uint32_t grev(uint32_t v, uint32_t k) {          /* Bitmanip 0.94 grevi: stage i swaps 2**i-bit blocks */
    static const uint32_t mask[5] = {0x55555555u, 0x33333333u, 0x0F0F0F0Fu, 0x00FF00FFu, 0x0000FFFFu};
    for (int i = 0; i < 5; i++)
        if (k >> i & 1) v = ((v & mask[i]) << (1 << i)) | ((v >> (1 << i)) & mask[i]);
    return v;
}

static uint32_t orcb(uint32_t v) {
    uint32_t r = 0;
    for (int s = 0; s < 32; s += 8) if (v >> s & 0xFF) r |= 0xFFu << s;
    return r;
}

/* opcode 0x63: whether the branch of funct3 f3 is taken on (a, b) into *taken; 0 when f3 names no branch */
static int branch_taken(uint32_t f3, uint32_t a, uint32_t b, int *taken) {
    switch (f3) {
    case 0: *taken = a == b; return 1;
    case 1: *taken = a != b; return 1;
    case 4: *taken = sx(a) < sx(b); return 1;
    case 5: *taken = sx(a) >= sx(b); return 1;
    case 6: *taken = a < b; return 1;
    case 7: *taken = a >= b; return 1;
    default: return 0;
    }
}

/* opcode 0x33 (R-type, M, Zba, Zbb, pack); 0 when (funct7, funct3) is not an instruction rv32.py knows */
static int op_r(uint32_t f7, uint32_t f3, uint32_t a, uint32_t b, uint32_t *out) {
    uint32_t r;
    switch (f7 << 3 | f3) {
    case 0x00 << 3 | 0: r = a + b; break;
    case 0x20 << 3 | 0: r = a - b; break;
    case 0x00 << 3 | 1: r = a << (b & 31); break;
    case 0x00 << 3 | 2: r = sx(a) < sx(b); break;
    case 0x00 << 3 | 3: r = a < b; break;
    case 0x00 << 3 | 4: r = a ^ b; break;
    case 0x00 << 3 | 5: r = a >> (b & 31); break;
    case 0x20 << 3 | 5: r = (uint32_t)(sx(a) >> (b & 31)); break;
    case 0x00 << 3 | 6: r = a | b; break;
    case 0x00 << 3 | 7: r = a & b; break;
    case 0x01 << 3 | 0: r = a * b; break;
    case 0x01 << 3 | 1: r = (uint32_t)((uint64_t)((int64_t)sx(a) * (int64_t)sx(b)) >> 32); break;
    case 0x01 << 3 | 2: r = (uint32_t)((uint64_t)((int64_t)sx(a) * (int64_t)b) >> 32); break;
    case 0x01 << 3 | 3: r = (uint32_t)(((uint64_t)a * b) >> 32); break;
    case 0x01 << 3 | 4:                 /* division by zero and INT_MIN / -1 as RISC-V defines them */
        r = b == 0 ? 0xFFFFFFFFu : (a == 0x80000000u && b == 0xFFFFFFFFu) ? a : (uint32_t)(sx(a) / sx(b)); break;
    case 0x01 << 3 | 5: r = b ? a / b : 0xFFFFFFFFu; break;
    case 0x01 << 3 | 6:
        r = b == 0 ? a : (a == 0x80000000u && b == 0xFFFFFFFFu) ? 0 : (uint32_t)(sx(a) % sx(b)); break;
    case 0x01 << 3 | 7: r = b ? a % b : a; break;
    case 0x10 << 3 | 2: r = (a << 1) + b; break;
    case 0x10 << 3 | 4: r = (a << 2) + b; break;
    case 0x10 << 3 | 6: r = (a << 3) + b; break;
    case 0x20 << 3 | 7: r = a & ~b; break;
    case 0x20 << 3 | 6: r = a | ~b; break;
    case 0x20 << 3 | 4: r = ~(a ^ b); break;
    case 0x05 << 3 | 4: r = sx(a) < sx(b) ? a : b; break;
    case 0x05 << 3 | 5: r = a < b ? a : b; break;
    case 0x05 << 3 | 6: r = sx(a) > sx(b) ? a : b; break;
    case 0x05 << 3 | 7: r = a > b ? a : b; break;
    case 0x30 << 3 | 1: r = rotl(a, b); break;
    case 0x30 << 3 | 5: r = rotr(a, b); break;
    case 0x04 << 3 | 4: r = (a & 0xFFFF) | ((b & 0xFFFF) << 16); break;
    default: return 0;
    }
    *out = r;
    return 1;
}

/* opcode 0x13 (I-type ALU, shift immediates, unary Zbb), in rv32.py's lookup order; 0 when not an instruction */
static int op_i(uint32_t w, uint32_t a, uint32_t *out) {
    uint32_t f3 = (w >> 12) & 7, f7 = w >> 25, s = (w >> 20) & 31, imm = imm_i(w);
    switch (f3) {
    case 0: *out = a + imm; return 1;
    case 2: *out = sx(a) < sx(imm); return 1;
    case 3: *out = a < imm; return 1;
    case 4: *out = a ^ imm; return 1;
    case 6: *out = a | imm; return 1;
    case 7: *out = a & imm; return 1;
    }
    if (f3 == 1 && f7 == 0x00) { *out = a << s; return 1; }
    if (f3 == 5) {
        switch (f7) {
        case 0x00: *out = a >> s; return 1;
        case 0x20: *out = (uint32_t)(sx(a) >> s); return 1;
        case 0x30: *out = rotr(a, s); return 1;
        case 0x34: *out = grev(a, s); return 1;
        }
    }
    switch (f3 << 12 | (w >> 20)) {
    case 1 << 12 | 0x600: *out = a ? (uint32_t)__builtin_clz(a) : 32; return 1;
    case 1 << 12 | 0x601: *out = a ? (uint32_t)__builtin_ctz(a) : 32; return 1;
    case 1 << 12 | 0x602: *out = (uint32_t)__builtin_popcount(a); return 1;
    case 1 << 12 | 0x604: *out = sext(a, 8); return 1;
    case 1 << 12 | 0x605: *out = sext(a, 16); return 1;
    case 5 << 12 | 0x287: *out = orcb(a); return 1;
    }
    return 0;
}

/* a store, a push, a CSR write or an atomic: what makes a block impure in rv32.py (a loop of such blocks is no spin) */
static int impure(uint32_t w) {
    uint32_t op = w & 0x7F, f3 = (w >> 12) & 7;
    return (w & 3) != 3 || op == 0x23 || op == 0x2F || (op == 0x73 && (f3 == 1 || f3 == 5 || ((w >> 15) & 31)));
}

/* where an aligned access of `size` bytes at a lies in L1 or this core's local RAM, else NULL (Python's slow path) */
static inline uint8_t *fast(const rv_state *s, uint32_t a, uint32_t size) {
    if (a & (size - 1)) return 0;
    if (a < L1_SIZE) return s->l1 + a;
    if (a - LOCAL_BASE < s->local_size) return s->local + (a - LOCAL_BASE);
    return 0;
}

/* an aligned word outside L1 and local RAM, where rv32.py's slow path makes one bus call (mmio_load / mmio_store) */
static inline int mmio_word(const rv_state *s, uint32_t a) {
    return !(a & 3) && a >= L1_SIZE && a - LOCAL_BASE >= s->local_size;
}

/* fn(args) as rv32.py's block calls it at position s->done (core.pos set first where the callee reads it): the new
 * reference, or NULL with the error set */
static PyObject *bus_call(rv_state *s, const bus_calls *c, PyObject *fn, PyObject **args, size_t n, int set_pos) {
    PyObject *pos = PyLong_FromUnsignedLong(s->done), *r = NULL;
    if (pos && (!set_pos || !slot_set(c->core, SL_POS, pos))) {
        if (!set_pos)
            args[0] = pos;
        r = PyObject_Vectorcall(fn, args, n, NULL);
    }
    Py_XDECREF(pos);
    return r;
}

/* word j of the `.ttinsn` run at pc as pushed (isa.from_ttinsn) */
static inline uint32_t run_word(const rv_state *s, uint32_t pc, uint32_t j) {
    uint32_t insn;
    memcpy(&insn, s->l1 + pc + 4 * j, 4);
    return rotr(insn, 2);
}

/* the `.ttinsn` run of n words at pc as the tuple of the words pushed (isa.from_ttinsn), or NULL */
static PyObject *ttinsn_words(const rv_state *s, uint32_t pc, uint32_t n) {
    PyObject *words = PyTuple_New(n);
    for (uint32_t j = 0; words && j < n; j++) {
        PyObject *v = PyLong_FromUnsignedLong(run_word(s, pc, j));
        if (!v) { Py_CLEAR(words); break; }
        PyTuple_SET_ITEM(words, j, v);
    }
    return words;
}

/* stall_in's last answer with the dict's version tag (py_tags.h) and the name (held, so that no other object takes
 * its address): a run's pushes read the running core's stall two or three times between its changes. Kept under
 * cycles_memo_on, round_cycles' memo of the same dicts (below), with its switch. */
static struct { PyObject *dict, *name; uint64_t version; long long v; } stall_last;
static int cycles_memo_on = 1;

/* the core's stall as the tile keeps it (stall[name], the tile's dict) into *v; -1 with an error set */
static int stall_in(PyObject *stall, PyObject *name, long long *v) {
    uint64_t version = cycles_memo_on && PyDict_Check(stall) ? dict_version(stall) : 0;
    if (version && stall_last.dict == stall && stall_last.version == version && stall_last.name == name) {
        *v = stall_last.v;
        return 0;
    }
    PyObject *o = PyDict_Check(stall) ? PyDict_GetItemWithError(stall, name) : NULL;
    if (!o) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_KeyError, "run: the tile keeps no stall for the core");
        return -1;
    }
    *v = PyLong_AsLongLong(o);
    if (*v == -1 && PyErr_Occurred())
        return -1;
    if (version && dict_version(stall) == version) {      /* (the look-up left the dict as it was) */
        stall_last.dict = stall, stall_last.version = version, stall_last.v = *v;
        Py_XSETREF(stall_last.name, Py_NewRef(name));
    }
    return 0;
}

static int stall_of(const direct_push *d, long long *v) { return stall_in(d->stall, d->name, v); }

/* the pusher's bookkeeping for the j words pushed from cycle t on whose next push time is `next` (tile.py
 * Tile._multi_pusher): the core's stall grows by what they waited, the thread's push count by j; s->t0 follows */
static int direct_account(rv_state *s, direct_push *d, long long t, long long j, long long next) {
    long long stall, pushed;
    PyObject *o = PyList_GetItem(d->pushes, d->thread_i), *v = NULL, *p = NULL;
    if (!o || stall_of(d, &stall) || ((pushed = PyLong_AsLongLong(o)) == -1 && PyErr_Occurred()))
        return -1;
    long long waited = next - t - j;
    stall += waited;
    /* (a run that waited nothing leaves the stall as it is: an equal int, where most of elementwise512's runs are) */
    int bad = waited && (!(v = PyLong_FromLongLong(stall)) || PyDict_SetItem(d->stall, d->name, v) < 0);
    bad = bad || !(p = PyLong_FromLongLong(pushed + j)) || PyList_SetItem(d->pushes, d->thread_i, p) < 0;
    Py_XDECREF(v);
    if (bad && !p)
        return -1;
    s->t0 = (uint64_t)(d->base + stall);
    return bad ? -1 : 0;
}

/* plain_run's Python-callable (the reference entry; TT_EMU_PLAIN_ENTRY_NATIVE=0) for words[j0:] pushed from cycle t on,
 * the progress list set first to what pm_done / pm_t become if it raises before its first word (push_run sets the
 * same): 0 with (*j, *next) = (next j, next push time); 1 when plain_run raised, (*j, *next) = the word that raised and
 * its push time (progress's items); -1 on another error (nothing pushed to account) */
static int plain_call_ref(direct_push *d, PyObject *words, long long j0, long long t, long long *j, long long *next) {
    PyObject *rec = PyObject_GetAttr(d->tx, s_mm_record), *t_o = rec ? PyLong_FromLongLong(t) : NULL, *r = NULL;
    PyObject *j_o = t_o ? PyLong_FromLongLong(j0) : NULL;
    if (j_o && (PyList_SetItem(d->progress, 0, Py_NewRef(j_o)) < 0
                || PyList_SetItem(d->progress, 1, Py_NewRef(t_o)) < 0))
        Py_CLEAR(j_o);
    if (j_o) {
        PyObject *args[8] = {d->tx, words, j_o, t_o, d->thread, d->facts, d->progress,
                             rec != Py_None ? Py_True : Py_False};
        r = d->fn(NULL, args, 8);
    }
    Py_XDECREF(rec), Py_XDECREF(t_o), Py_XDECREF(j_o);
    if (r) {
        int bad = !PyArg_ParseTuple(r, "LL", j, next);
        Py_DECREF(r);
        return bad ? -1 : 0;
    }
    if (!j_o)
        return -1;
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    PyObject *j_e = PyList_GetItem(d->progress, 0), *t_j = PyList_GetItem(d->progress, 1);
    int bad = !j_e || !t_j || ((*j = PyLong_AsLongLong(j_e)) == -1 && PyErr_Occurred())
              || ((*next = PyLong_AsLongLong(t_j)) == -1 && PyErr_Occurred());
    if (bad) {                                      /* (the bookkeeping's own error replaces plain_run's) */
        Py_XDECREF(et), Py_XDECREF(ev), Py_XDECREF(tb);
        return -1;
    }
    PyErr_Restore(et, ev, tb);
    return 1;
}

/* plain_run's C entry (plain_run_c) for words[j0:] pushed from cycle t on: plain_call_ref's answers without its
 * argument and result objects */
static int plain_call_c(direct_push *d, PyObject *words, long long j0, long long t, long long *j, long long *next) {
    *j = j0, *next = t;
    return d->cfn(d->tx, words, d->thread, d->facts, j, next) ? 1 : 0;
}

/* plain_run for words[j0:] of the tuple `words` pushed from position s->done on, at the core's exact cycle: *end = the
 * word it stopped before; on an error (at word *end, the words before it accounted as the pusher does, and core.sub
 * set to it when `run_sub`: the `.ttinsn` run's pusher does that, the push window's does not) -1 */
static int direct_run(rv_state *s, const bus_calls *c, direct_push *d, PyObject *words, uint32_t j0, uint32_t *end,
                      int run_sub) {
    long long stall, j, next;
    *end = j0;
    if (!words || stall_of(d, &stall))
        return -1;
    long long t = d->base + stall + s->done + j0;  /* the pusher's tbase + instret + stall + pos of words[j0] */
    int raised = d->cfn ? plain_call_c(d, words, j0, t, &j, &next) : plain_call_ref(d, words, j0, t, &j, &next);
    if (raised < 0)
        return -1;
    if (!raised) {
        if (direct_account(s, d, t, j - j0, next))
            return -1;
        *end = (uint32_t)j;
        return 0;
    }
    /* plain_run raised at word j (pushed at `next`): push_run's pm_done / pm_t, the pusher's accounting and core.sub,
     * and a Stall's wait reason, the error kept */
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    PyObject *j_e = PyLong_FromLongLong(j), *t_j = j_e ? PyLong_FromLongLong(next) : NULL;
    int bad = !t_j || slot_set(d->tx, SL_PM_DONE, j_e) || slot_set(d->tx, SL_PM_T, t_j)
              || (run_sub && slot_set(c->core, SL_SUB, j_e)) || direct_account(s, d, t, j - j0, next)
              || (et && PyErr_GivenExceptionMatches(et, c->stall) && PyDict_SetItem(d->waits, d->name, d->full) < 0);
    Py_XDECREF(j_e), Py_XDECREF(t_j);
    if (bad) {                                      /* (the bookkeeping's own error replaces plain_run's) */
        Py_XDECREF(et), Py_XDECREF(ev), Py_XDECREF(tb);
        return -1;
    }
    PyErr_Restore(et, ev, tb);
    *end = (uint32_t)j;
    return -1;
}

/* The tile's PUSHM pusher's call for words[k:m] of the tuple `words` pushed from position s->done + k on (tile.py
 * Tile._multi_pusher's push, made here without its frame): the Tensix's push_many at the core's exact cycle, then the
 * pusher's accounting (direct_account). If word j of them raises: the words before it accounted as the pusher does
 * (the Tensix's pm_done / pm_t), core.sub and *sub = j, a Stall's wait reason, -1 with the error kept (a bookkeeping
 * error replaces it, as in the pusher). 0: pushed, s->t0 exact */
static int direct_many(rv_state *s, const bus_calls *c, direct_push *d, PyObject *words, uint32_t k, uint32_t m,
                       uint32_t *sub) {
    long long stall, j = 0, next;
    *sub = 0;
    if (stall_of(d, &stall) || slot_set(c->core, SL_SUB, zero) < 0)    /* as push_python before PUSHM */
        return -1;
    long long t = d->base + stall + s->done + k;   /* the pusher's tbase + instret + stall + pos of words[k] */
    PyObject *run = PyTuple_GetSlice(words, k, m), *t_o = run ? PyLong_FromLongLong(t) : NULL, *r = NULL;
    if (t_o) {
        PyObject *args[3] = {d->thread, run, t_o};
        r = PyObject_Vectorcall(d->many, args, 3, NULL);
    }
    Py_XDECREF(run);
    Py_XDECREF(t_o);
    if (r) {
        next = PyLong_AsLongLong(r);
        Py_DECREF(r);
        return (next == -1 && PyErr_Occurred()) || direct_account(s, d, t, m - k, next) ? -1 : 0;
    }
    if (!t_o)
        return -1;
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    PyObject *j_o = slot_get(d->tx, SL_PM_DONE), *t_j = j_o ? slot_get(d->tx, SL_PM_T) : NULL;
    int bad = !t_j || slot_set(c->core, SL_SUB, j_o) < 0
              || ((j = PyLong_AsLongLong(j_o)) == -1 && PyErr_Occurred())
              || ((next = PyLong_AsLongLong(t_j)) == -1 && PyErr_Occurred()) || direct_account(s, d, t, j, next)
              || (et && PyErr_GivenExceptionMatches(et, c->stall) && PyDict_SetItem(d->waits, d->name, d->full) < 0);
    Py_XDECREF(j_o);
    Py_XDECREF(t_j);
    if (bad) {
        Py_XDECREF(et), Py_XDECREF(ev), Py_XDECREF(tb);
        return -1;
    }
    PyErr_Restore(et, ev, tb);
    *sub = (uint32_t)j;
    return -1;
}

/* load_timing's memo of the last tile's `rec` and `_latency_of` (borrowed from its dict): valid while the tile's class
 * keeps its version tag (no class in its MRO defines either name, and the look-up is the generic one, so both are the
 * instance dict's) and that dict its identity and version tag. Reading them by PyObject_GetAttr had cost ~520 x86
 * instructions a load, some 7,000 loads an elementwise512 launch. tile_memo(False) (rv32_native.py TILE_MEMO_NATIVE)
 * turns it off: every load reads both attributes, the reference. */
static struct { PyTypeObject *tp; unsigned int tag; PyObject *dict; uint64_t version; PyObject *rec, *timed; } timing_memo;
static int tile_memo_on = 1;

/* the instance dict of `tile` where both names are plain attributes of its class (above), else NULL (borrowed) */
static PyObject *timing_dict(PyObject *tile) {
    PyTypeObject *tp = Py_TYPE(tile);
    if (!DICT_TAGS || !tile_memo_on || tp->tp_getattro != PyObject_GenericGetAttr)
        return NULL;
    if (tp != timing_memo.tp || !timing_memo.tag || type_tag(tp) != timing_memo.tag) {
        if (_PyType_Lookup(tp, s_rec) || _PyType_Lookup(tp, s_latency_of) || !type_tag(tp))
            return NULL;                    /* (_PyType_Lookup gave tp a version tag where it can have one) */
        timing_memo.tp = tp, timing_memo.tag = type_tag(tp), timing_memo.dict = NULL;
    }
    PyObject **dp = _PyObject_GetDictPtr(tile);
    return dp && *dp && PyDict_CheckExact(*dp) ? *dp : NULL;
}

/* tile.rec and tile._latency_of (new references) from the memo where it holds, else read and the memo refilled; 0, or
 * -1 with an error set */
static int timing_attrs(PyObject *tile, PyObject **rec, PyObject **timed) {
    PyObject *dict = timing_dict(tile);
    if (dict && dict == timing_memo.dict && dict_version(dict) == timing_memo.version) {
        *rec = Py_NewRef(timing_memo.rec), *timed = Py_NewRef(timing_memo.timed);
        return 0;
    }
    *rec = PyObject_GetAttr(tile, s_rec);
    *timed = *rec ? PyObject_GetAttr(tile, s_latency_of) : NULL;
    if (!*timed) {
        Py_CLEAR(*rec);
        return -1;
    }
    timing_memo.dict = NULL;                /* (refilled only where the dict holds what was read) */
    if (dict && PyDict_GetItemWithError(dict, s_rec) == *rec && PyDict_GetItemWithError(dict, s_latency_of) == *timed)
        timing_memo.dict = dict, timing_memo.version = dict_version(dict), timing_memo.rec = *rec,
        timing_memo.timed = *timed;
    return 0;
}

/* Whether a bus load of core `name` on `tile` pays the MMIO latency (*latency: the name in tile._latency_of); 1 where
 * the tile records a timeline (Python's bus call records the load's stalls), 0 otherwise, -1 with an error set */
static int load_timing(PyObject *tile, PyObject *name, int *latency) {
    PyObject *rec, *timed;
    if (timing_attrs(tile, &rec, &timed))
        return -1;
    *latency = PyDict_CheckExact(timed) ? PyDict_Contains(timed, name) : PySequence_Contains(timed, name);
    int recording = rec != Py_None;
    Py_XDECREF(rec);
    Py_XDECREF(timed);
    return *latency < 0 ? -1 : recording;
}

/* core.pos = s->done, as a bus call sets it, and the core's stall in the tile's dict (unless it is `was`); -1 with an
 * error set */
static int bus_effects(rv_state *s, const bus_calls *c, direct_push *d, long long stall, long long was) {
    PyObject *pos = PyLong_FromUnsignedLong(s->done), *o = stall != was ? PyLong_FromLongLong(stall) : NULL;
    int bad = !pos || slot_set(c->core, SL_POS, pos) < 0 || (stall != was && (!o
              || PyDict_SetItem(d->stall, d->name, o) < 0));
    Py_XDECREF(pos);
    Py_XDECREF(o);
    return bad ? -1 : 0;
}

static int queue_true(PyObject *th, int k);
static PyObject *s_threads, *s_done, *s_macro_threads, *s_work_done, *s_sfpu, *s_busy_until;

/* whether o.<name> is the function `ref` its class defines: the generic attribute look-up, the class's look-up finds
 * ref and the instance's dict does not shadow it; 1 / 0, -1 with an error set */
static int own_method(PyObject *o, PyObject *name, PyObject *ref) {
    PyObject **dp;
    if (!ref || Py_TYPE(o)->tp_getattro != PyObject_GenericGetAttr || _PyType_Lookup(Py_TYPE(o), name) != ref)
        return 0;
    if (!(dp = _PyObject_GetDictPtr(o)) || !*dp)
        return 1;
    PyObject *shadow = PyDict_GetItemWithError(*dp, name);
    return shadow ? 0 : PyErr_Occurred() ? -1 : 1;
}

/* tx.<method>(thread) for the core's thread (a new reference, or NULL with an error set) */
static PyObject *thread_method(const direct_push *d, PyObject *method) {
    PyObject *args[2] = {d->tx, d->thread};
    return PyObject_VectorcallMethod(method, args, 2, NULL);
}

/* tx.thread_idle(thread): read here from the thread's queues as frontend.py's method reads them (not (fifo or mop_out
 * or ready)) while that method is the Tensix's (own_method), else the method called. Its call had cost ~3,900 x86
 * instructions. 1 idle, 0 not, -1 with an error set. */
static int thread_idle(const direct_push *d) {
    int own = own_method(d->tx, s_thread_idle, d->idle_ref);
    if (own <= 0) {
        PyObject *r = own < 0 ? NULL : thread_method(d, s_thread_idle);
        int idle = r ? PyObject_IsTrue(r) : -1;
        Py_XDECREF(r);
        return idle;
    }
    PyObject *threads = PyObject_GetAttr(d->tx, s_threads), *th = threads ? PyObject_GetItem(threads, d->thread) : NULL;
    int busy = th ? 0 : -1;
    for (int k = 0; busy == 0 && k < 3; k++)
        busy = queue_true(th, k);
    Py_XDECREF(th);
    Py_XDECREF(threads);
    return busy < 0 ? -1 : !busy;
}

/* o.<name>, or o.<name>[key] where key is given, as a C long long where it is an int (exactly) that fits: 1, 0 where it
 * is not (nothing raised), -1 with an error set */
static int int_attr(PyObject *o, PyObject *name, PyObject *key, long long *v) {
    PyObject *a = PyObject_GetAttr(o, name), *x = a && key ? PyObject_GetItem(a, key) : a ? Py_NewRef(a) : NULL;
    int overflow = 0, ok = x && PyLong_CheckExact(x);
    *v = ok ? PyLong_AsLongLongAndOverflow(x, &overflow) : 0;
    Py_XDECREF(a);
    Py_XDECREF(x);
    if (!x || (*v == -1 && PyErr_Occurred()))
        return -1;
    return ok && !overflow;
}

/* tx.thread_done(thread) as tensix.py's method -> cycles.py TensixTiming.done compute it (max(clock[t] + 1,
 * work_done[t], min(sfpu.busy_until, clock[t] + 2))) while both are the Tensix's and its cycle model's (own_method)
 * and the thread has issued no SFPLOADMACRO (whose SFPU part asks the SFPU state itself), the values read being ints;
 * else the method called. Its call had cost ~6,700 x86 instructions. 0 with *v, -1 with an error set. */
static int thread_done(const direct_push *d, long long *v) {
    PyObject *tm = NULL, *sfpu = NULL;
    long long clock, macro, work, busy;
    int in_c = own_method(d->tx, s_thread_done, d->done_ref);
    if (in_c > 0)
        in_c = (tm = PyObject_GetAttr(d->tx, s_tm)) ? own_method(tm, s_done, d->tm_done_ref) : -1;
    if (in_c > 0)
        in_c = int_attr(tm, s_macro_threads, NULL, &macro);
    if (in_c > 0 && (macro >> d->thread_i & 1))
        in_c = 0;
    if (in_c > 0)
        in_c = int_attr(tm, s_clock, d->thread, &clock);
    if (in_c > 0)
        in_c = int_attr(tm, s_work_done, d->thread, &work);
    if (in_c > 0)
        in_c = (sfpu = PyObject_GetAttr(tm, s_sfpu)) ? int_attr(sfpu, s_busy_until, NULL, &busy) : -1;
    Py_XDECREF(tm);
    Py_XDECREF(sfpu);
    if (in_c < 0)
        return -1;
    if (!in_c) {
        PyObject *r = thread_method(d, s_thread_done);
        *v = r ? PyLong_AsLongLong(r) : -1;
        Py_XDECREF(r);
        return *v == -1 && PyErr_Occurred() ? -1 : 0;
    }
    long long sfpu_end = busy < clock + 2 ? busy : clock + 2;
    *v = clock + 1;
    if (work > *v)
        *v = work;
    if (sfpu_end > *v)
        *v = sfpu_end;
    return 0;
}

/* A TRISC's TTSync load (tile.py mmio_load -> _pcbuf_load, the reference): the MMIO latency in the timed mode (the
 * core is in the tile's _latency_of), then, while the Tensix's thread_idle says no, a Stall with the wait reason set
 * (the latency stays charged, as there); else the core waits until thread_done and reads 0. 1 with *v set, 0 where
 * the bus call must do it (a tile recording a timeline), -1 with an error set (the Stall among them). */
static int ttsync_load(rv_state *s, const bus_calls *c, direct_push *d, uint32_t *v) {
    int latency, recording = load_timing(d->tile, d->name, &latency);
    long long stall, was, done;
    if (recording)
        return recording < 0 ? -1 : 0;
    if (stall_of(d, &was))
        return -1;
    stall = was + (latency ? d->extra : 0);
    int idle = thread_idle(d);
    if (idle < 0 || bus_effects(s, c, d, stall, was))
        return -1;
    if (!idle) {
        if (PyDict_SetItem(d->waits, d->name, d->sync_wait) == 0)
            PyErr_SetNone(c->stall);
        return -1;
    }
    if (thread_done(d, &done))
        return -1;
    was = stall;
    if (done > d->base + stall + s->done)            /* tile.py _wait_until */
        stall = done - d->base - s->done;
    if (bus_effects(s, c, d, stall, was))
        return -1;
    *v = 0;
    return 1;
}

/* sync.py SyncMixin.sem_mmio_write(i, value, t) without its Python frames (d->sem_stores): the Tensix's latest event
 * cycle (tm.event_t) moves on to t, then an odd value takes one from semaphore i and its oldest counted post (SEMGET;
 * nothing at 0), an even one adds one counted from t (SEMPOST; saturating at 15). 1 made, 0 where the method must
 * (strict mode's errors: a SEMGET at 0, a SEMPOST at the semaphore's Max; nothing changed), -1 with an error set. */
static int sem_store(const direct_push *d, uint32_t i, uint32_t value, long long t) {
    PyObject *values = slot_get(d->tx, SL_SEM_VALUE);
    PyObject *maxima = values ? slot_get(d->tx, SL_SEM_MAX) : NULL;
    PyObject *posts = maxima ? slot_get(d->tx, SL_SEM_POSTS) : NULL;
    PyObject *strict_o = posts ? slot_get(d->tx, SL_STRICT) : NULL, *tm = NULL, *q = NULL, *r = NULL;
    int done = -1, strict = strict_o ? PyObject_IsTrue(strict_o) : -1;
    long long v = 0, max = 0, event = 0;
    if (strict < 0)
        goto out;
    if (!PyList_Check(values) || !PyList_Check(maxima) || !PyList_Check(posts) || i >= PyList_GET_SIZE(values)
        || i >= PyList_GET_SIZE(maxima) || i >= PyList_GET_SIZE(posts)) {
        PyErr_SetString(PyExc_TypeError, "sem_store: the Tensix's sem_value, sem_max and sem_posts are not lists of "
                                         "its semaphores");
        goto out;
    }
    v = PyLong_AsLongLong(PyList_GET_ITEM(values, i));
    max = v == -1 && PyErr_Occurred() ? -1 : PyLong_AsLongLong(PyList_GET_ITEM(maxima, i));
    if (PyErr_Occurred())
        goto out;
    if (strict && (value & 1 ? v == 0 : v >= max)) {
        done = 0;                                    /* (sem_mmio_write raises, naming the store) */
        goto out;
    }
    if (!(tm = PyObject_GetAttr(d->tx, s_tm)) || !(r = PyObject_GetAttr(tm, s_event_t))
        || ((event = PyLong_AsLongLong(r)) == -1 && PyErr_Occurred()))
        goto out;
    Py_CLEAR(r);
    if (t > event && (!(r = PyLong_FromLongLong(t)) || PyObject_SetAttr(tm, s_event_t, r) < 0))
        goto out;
    Py_CLEAR(r);
    q = Py_NewRef(PyList_GET_ITEM(posts, i));
    if (value & 1 ? v == 0 : v >= 15) {
        done = 1;                                    /* (SEMGET at 0 does nothing, SEMPOST at 15 saturates) */
        goto out;
    }
    if (!(r = PyLong_FromLongLong(value & 1 ? v - 1 : v + 1)) || PyList_SetItem(values, i, Py_NewRef(r)) < 0)
        goto out;
    Py_CLEAR(r);
    if (value & 1) {
        Py_ssize_t n = PyObject_Length(q);
        r = n > 0 ? PyObject_CallMethodNoArgs(q, s_popleft) : n == 0 ? Py_NewRef(Py_None) : NULL;
    } else {
        PyObject *t_o = PyLong_FromLongLong(t);
        r = t_o ? PyObject_CallMethodOneArg(q, s_append, t_o) : NULL;
        Py_XDECREF(t_o);
    }
    done = r ? 1 : -1;
out:
    Py_XDECREF(values), Py_XDECREF(maxima), Py_XDECREF(posts), Py_XDECREF(strict_o), Py_XDECREF(tm), Py_XDECREF(q);
    Py_XDECREF(r);
    return done;
}

/* A TRISC's 32-bit store in its PC buffer (tile.py mmio_store -> _pcbuf_store, the reference): TTSync's is discarded,
 * a semaphore's is the Tensix's sem_mmio_write(i, value, the core's cycle). 1 made, 0 where the bus call must (another
 * address, or C serves none: d->sync 0), -1 with an error set. */
static int pcbuf_store(rv_state *s, const bus_calls *c, direct_push *d, uint32_t addr, uint32_t value) {
    long long stall;
    if (!d->sync || (addr != d->sync && addr - d->sem_base >= 4 * d->n_sems))
        return 0;
    if (stall_of(d, &stall) || bus_effects(s, c, d, stall, stall))
        return -1;
    if (addr == d->sync)
        return 1;
    int made = d->sem_stores ? sem_store(d, (addr - d->sem_base) >> 2, value, d->base + stall + s->done) : 0;
    if (made)
        return made;
    PyObject *i = PyLong_FromUnsignedLong((addr - d->sem_base) >> 2), *v = i ? PyLong_FromUnsignedLong(value) : NULL;
    PyObject *t = v ? PyLong_FromLongLong(d->base + stall + s->done) : NULL, *r = NULL;
    if (t) {
        PyObject *args[4] = {d->tx, i, v, t};
        r = PyObject_VectorcallMethod(s_sem_mmio_write, args, 4, NULL);
    }
    Py_XDECREF(i), Py_XDECREF(v), Py_XDECREF(t);
    Py_XDECREF(r);
    return r ? 1 : -1;
}

/* A TRISC's 32-bit load in the direct push context's semaphore window (tile.py mmio_load -> _pcbuf_load, the
 * reference): the core's stall grows by the window's MMIO latency in the timed mode (the core is in the tile's
 * _latency_of); the value is the Tensix's sem_value[i], and a nonzero one is seen from the cycle of the oldest counted
 * post (sem_posts[i][0]) on, so the core waits until then (its cycle: d->base + its stall + its position; core.pos
 * set as the bus call sets it). 1 with *v set, 0 where Python's bus call must do it (another address, or a tile
 * recording a timeline, which records those stalls), -1 with an error set. */
static int sem_load(rv_state *s, const bus_calls *c, direct_push *d, uint32_t addr, uint32_t *v) {
    uint32_t i = (addr - d->sem_base) >> 2;
    long long value, posted = 0, stall, was;
    if (!d->sem_loads || addr - d->sem_base >= 4 * d->n_sems)
        return 0;
    int latency, recording = load_timing(d->tile, d->name, &latency);
    if (recording)
        return recording < 0 ? -1 : 0;
    if (stall_of(d, &stall))
        return -1;
    was = stall;
    if (latency)
        stall += d->extra;
    PyObject *values = slot_get(d->tx, SL_SEM_VALUE), *item = values ? PySequence_GetItem(values, i) : NULL;
    Py_XDECREF(values);
    if (!item)
        return -1;
    value = PyLong_AsLongLong(item);
    Py_DECREF(item);
    if (value == -1 && PyErr_Occurred())
        return -1;
    if (value) {
        PyObject *posts = slot_get(d->tx, SL_SEM_POSTS), *q = posts ? PySequence_GetItem(posts, i) : NULL;
        Py_XDECREF(posts);
        Py_ssize_t n = q ? PyObject_Length(q) : -1;
        PyObject *first = n > 0 ? PySequence_GetItem(q, 0) : NULL;
        Py_XDECREF(q);
        if (n < 0 || (n > 0 && !first))
            return -1;
        if (first) {
            posted = PyLong_AsLongLong(first);
            Py_DECREF(first);
            if (posted == -1 && PyErr_Occurred())
                return -1;
        }
        long long now = d->base + stall + s->done;
        if (posted > now)
            stall += posted - now;
    }
    if (bus_effects(s, c, d, stall, was))
        return -1;
    *v = (uint32_t)value;
    return 1;
}

/* the `.ttinsn` run of n words at pc as the tuple of the words pushed (ttinsn_words), kept in d->runs by pc with the
 * run's bytes in L1: where they are still those, the kept tuple again instead of n new ints (a loop's body pushed
 * each turn); otherwise a new one, kept in its place. A new reference, or NULL */
static PyObject *run_words(const rv_state *s, const direct_push *d, uint32_t pc, uint32_t n) {
    if (!d->runs)
        return ttinsn_words(s, pc, n);
    PyObject *key = PyLong_FromUnsignedLong(pc), *kept = key ? PyDict_GetItemWithError(d->runs, key) : NULL;
    PyObject *words = NULL, *raw = NULL, *entry = NULL;
    if (kept && PyTuple_Check(kept) && PyTuple_GET_SIZE(kept) == 2 && PyBytes_Check(PyTuple_GET_ITEM(kept, 0))
        && PyBytes_GET_SIZE(PyTuple_GET_ITEM(kept, 0)) == 4 * (Py_ssize_t)n && PyTuple_Check(PyTuple_GET_ITEM(kept, 1))
        && PyTuple_GET_SIZE(PyTuple_GET_ITEM(kept, 1)) == (Py_ssize_t)n
        && !memcmp(PyBytes_AS_STRING(PyTuple_GET_ITEM(kept, 0)), s->l1 + pc, 4 * (size_t)n)) {
        words = Py_NewRef(PyTuple_GET_ITEM(kept, 1));
    } else if (key && !PyErr_Occurred() && (words = ttinsn_words(s, pc, n))
               && (!(raw = PyBytes_FromStringAndSize((const char *)s->l1 + pc, 4 * (Py_ssize_t)n))
                   || !(entry = PyTuple_Pack(2, raw, words)) || PyDict_SetItem(d->runs, key, entry) < 0)) {
        Py_CLEAR(words);
    }
    Py_XDECREF(key), Py_XDECREF(raw), Py_XDECREF(entry);
    return words;
}

/* whether plain_run may run in this run() call (d->allowed(), asked once: direct_issue.py _c_issue_allowed); -1 with
 * an error set */
static int direct_ready(direct_push *d) {
    if (!d->fn && !d->cfn)
        return 0;
    if (d->ready < 0) {
        PyObject *r = PyObject_CallNoArgs(d->allowed);
        if (!r || (d->ready = PyObject_IsTrue(r)) < 0) {
            Py_XDECREF(r);
            return -1;
        }
        Py_DECREF(r);
    }
    return d->ready;
}

/* plain_takes' answers kept by the word's value (an exact int: the facts dict finds the same entry for any int of that
 * value) with the facts dict and its version tag (py_tags.h: an equal tag is the same, unchanged dict; the pointer is
 * only compared), in a direct-mapped table: a kernel pushes a few hundred distinct words again and again, and the
 * facts change only where a word gets its first. takes_memo_on 0 (rv32_native.py TAKES_MEMO_NATIVE, the reference)
 * or no tags (Python 3.12) looks each word up. The look-up (the int's hash, the probe) and the name's compare had cost
 * ~400 x86 instructions a run. */
enum { TAKES_MEMO = 1024 };
static struct { PyObject *facts; uint64_t version; uint32_t value; int answer; } takes_memo[TAKES_MEMO];
static int takes_memo_on = 1;

/* takes_memo(on) -> None: whether plain_takes keeps its answers (rv32_native.py TAKES_MEMO_NATIVE sets it when the
 * module loads, the tests both ways); the memo is dropped either way */
static PyObject *takes_memo_set(PyObject *self, PyObject *on) {
    (void)self;
    if (switch_set(on, &takes_memo_on))
        return NULL;
    memset(takes_memo, 0, sizeof takes_memo);
    Py_RETURN_NONE;
}

/* plain_takes' answer from the facts dict itself */
static int plain_takes_read(const direct_push *d, PyObject *word) {
    PyObject *rec = PyDict_GetItemWithError(d->facts, word);
    if (!rec || rec == Py_None)
        return PyErr_Occurred() ? -1 : 0;
    if (!PyTuple_Check(rec) || PyTuple_GET_SIZE(rec) < 1 || !PyUnicode_Check(PyTuple_GET_ITEM(rec, 0))) {
        PyErr_SetString(PyExc_TypeError, "direct push: a word's facts of the wrong shape");
        return -1;
    }
    return PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(rec, 0), "MVMUL") != 0;
}

/* whether plain_run may take `word` (its value: raw) where the thread's frontend is empty: direct_issue.py recorded
 * facts for it (a 5-tuple named by its [0]) and it is no MVMUL (whose runs the Tensix's push_many records whole); no
 * look-up for an opcode none of whose words have facts (d->never_plain); the answer kept (takes_memo); -1 on an
 * error */
static int plain_takes(const direct_push *d, PyObject *word, uint32_t raw) {
    if (d->never_plain && d->never_plain[raw >> 24])
        return 0;
    uint64_t version = takes_memo_on && PyDict_Check(d->facts) && PyLong_CheckExact(word) ? dict_version(d->facts) : 0;
    unsigned long value = version ? PyLong_AsUnsignedLong(word) : 0;
    if (value > 0xFFFFFFFFul) {             /* (no .ttinsn word: looked up, the error too) */
        PyErr_Clear();
        version = 0;
    }
    size_t k = (size_t)(((uint64_t)value * 0x9E3779B97F4A7C15ull) >> 54) % TAKES_MEMO;
    if (version && takes_memo[k].facts == d->facts && takes_memo[k].version == version && takes_memo[k].value == value)
        return takes_memo[k].answer;
    int answer = plain_takes_read(d, word);
    if (version && answer >= 0 && dict_version(d->facts) == version) {      /* (the look-up left the dict as it was) */
        takes_memo[k].facts = d->facts, takes_memo[k].version = version;
        takes_memo[k].value = (uint32_t)value, takes_memo[k].answer = answer;
    }
    return answer;
}

/* the pushers' part of push_run: the n words at pc (PUSHM if `multi`, else PUSHP, else push_tensix); `run`: those
 * words as the tuple PUSHM is given (a new reference, taken here), or NULL to read them */
static int push_python(rv_state *s, const bus_calls *c, uint32_t pc, uint32_t n, int multi, PyObject *run,
                       uint32_t *sub) {
    PyObject *words = multi ? (run ? run : ttinsn_words(s, pc, n)) : NULL, *r = NULL, *w = NULL;
    *sub = 0;
    if (multi) {
        PyObject *args[2] = {NULL, words};
        if (words && !slot_set(c->core, SL_SUB, zero))
            r = bus_call(s, c, c->pushm, args, 2, 0);
        if (!r && words) {
            PyObject *et, *ev, *tb, *j;
            PyErr_Fetch(&et, &ev, &tb);
            j = slot_get(c->core, SL_SUB);
            *sub = j ? (uint32_t)PyLong_AsUnsignedLongMask(j) : 0;
            Py_XDECREF(j);
            PyErr_Restore(et, ev, tb);
        }
        Py_XDECREF(words);
    } else {
        uint32_t insn;
        memcpy(&insn, s->l1 + pc, 4);
        if ((w = PyLong_FromUnsignedLong(rotr(insn, 2)))) {
            PyObject *args[2] = {c->name, w};
            r = c->pushp != Py_None ? bus_call(s, c, c->pushp, args, 2, 0) : bus_call(s, c, c->push, args, 2, 1);
        }
        Py_XDECREF(w);
    }
    Py_XDECREF(r);
    return r ? 1 : -1;
}

/* the pushes of the `.ttinsn` run of n words at pc: to plain_run where d allows; each stretch of words it leaves, up
 * to the next word it may take, through the pushers (PUSHM for several, else PUSHP, else push_tensix), so that the
 * Tensix's push_many sees whole runs of SFPU words and MVMULs; where PUSHM is the tile's own pusher, to that push_many
 * from here (direct_many). On an error, *sub = the word that raised (PUSHM sets core.sub). 0: only plain_run and
 * push_many ran (s->t0 is exact), 1: a pusher was called, -1: an error */
static int push_run(rv_state *s, const bus_calls *c, direct_push *d, uint32_t pc, uint32_t n, uint32_t *sub) {
    int multi = n > 1, pushers = 0, ready = direct_ready(d);
    *sub = 0;
    if (ready <= 0)
        return ready < 0 ? -1 : push_python(s, c, pc, n, multi, NULL, sub);
    PyObject *words = run_words(s, d, pc, n);
    if (!words)
        return -1;
    uint32_t k = 0, m;
    while (k < n) {
        int take = plain_takes(d, PyTuple_GET_ITEM(words, k), run_word(s, pc, k));
        if (take > 0) {
            if (direct_run(s, c, d, words, k, &k, 1)) {
                *sub = k;
                pushers = -1;
                break;
            }
            if (k == n)
                break;
        }
        for (m = k + 1; take >= 0 && m < n && !(take = plain_takes(d, PyTuple_GET_ITEM(words, m), run_word(s, pc, m)));
             m++) {}
        if (take < 0) {
            pushers = -1;
            *sub = k;
            break;
        }
        int r;
        if (multi && d->many && c->pushm == d->pushm) {
            r = direct_many(s, c, d, words, k, m, sub);
        } else {
            PyObject *run = multi ? PyTuple_GetSlice(words, k, m) : NULL;
            s->done += k;                           /* the pushers take words[k:m] at their positions */
            r = multi && !run ? -1 : push_python(s, c, pc + 4 * k, m - k, multi, run, sub);
            s->done -= k;
            pushers = r < 0 ? pushers : 1;
        }
        if (r < 0) {
            *sub += k;
            pushers = -1;
            break;
        }
        k = m;
    }
    Py_DECREF(words);
    return pushers;
}

/* a store of `word` to the core's own push window handed to plain_run as the window's pusher would push it: 1 if
 * it took the word, 0 if the pusher must (no direct push now, or a word plain_run does not take), -1 on an error */
static int window_push(rv_state *s, const bus_calls *c, direct_push *d, uint32_t word) {
    int ready = direct_ready(d);
    if (ready <= 0)
        return ready;
    PyObject *w = PyLong_FromUnsignedLong(word), *one = w ? PyTuple_New(1) : NULL;    /* (words[0], as push_run's) */
    if (one)
        PyTuple_SET_ITEM(one, 0, w);
    else
        Py_XDECREF(w);
    int take = one ? plain_takes(d, w, word) : -1;
    uint32_t taken = 0;
    if (take > 0 && direct_run(s, c, d, one, 0, &taken, 0))
        take = -1;
    Py_XDECREF(one);
    return take < 0 ? -1 : (int)taken;
}

/* The stamp base of the core round_quantum runs where it is the tile's own (Tile._stamper's lambda, tbase[who] +
 * core.instret + stall[who]), which refresh_t0 then computes as round_base does instead of calling it (a call had cost
 * ~1,400 x86 instructions, some 1,200 an elementwise512 launch): the lambda, the round's context and the core's index,
 * set by round_quantum around its run() call (and put back after it: a bus call may run another tile's round);
 * base NULL: none. own_base_on: switched off by own_base(False) (rv32_native.py OWN_BASE_NATIVE), the lambda called. */
typedef struct round_ctx round_ctx;
typedef struct { PyObject *base; const round_ctx *r; Py_ssize_t i; } own_stamp_at;
static own_stamp_at own_stamp;
static int own_base_on = 1;
static int round_cycles(const round_ctx *r, Py_ssize_t i, long long *t);

/* the cycle model's stamp base again (stamp_base()): a bus call may have stalled the core */
static int refresh_t0(rv_state *s, const bus_calls *c) {
    long long t;
    if (own_base_on && own_stamp.base && c->base == own_stamp.base) {
        if (round_cycles(own_stamp.r, own_stamp.i, &t))
            return -1;
        if (t >= 0) {                       /* (a negative one: the lambda's answer raises in the conversion below) */
            s->t0 = (uint64_t)t;
            return 0;
        }
    }
    PyObject *v = PyObject_CallNoArgs(c->base);
    if (!v)
        return -1;
    s->t0 = PyLong_AsUnsignedLongLong(v);
    Py_DECREF(v);
    return s->t0 == (uint64_t)-1 && PyErr_Occurred() ? -1 : 0;
}

/* An NIU register window: 4 initiators of 0x800 bytes; the registers below 0x30 of each hold the command being
 * built (noc.py, Niu.store). A 32-bit store there is kept in the NIU's register file, which Python reads when the send
 * (NOC_CMD_CTRL) is written, so the several register stores of a NoC command cost no hand-back each. What noc.py
 * refuses (NOC_AT_LEN_BE_1, PACKET_TAG bits outside the trid, a nonzero BRCST_EXCLUDE), the send, every other
 * register and misaligned addresses go to Python. Such a store has no timing of its own (tile.py charges none). */
#define NIU_INITIATORS 4u
#define NIU_INITIATOR_STRIDE 0x800u
#define NIU_PLAIN_END 0x30u
#define NIU_PACKET_TAG 0x18u
#define NIU_PACKET_TAG_TRID 0x3C00u
#define NIU_AT_LEN_BE_1 0x24u
#define NIU_BRCST_EXCLUDE 0x2Cu

static int niu_store(rv_state *s, uint32_t addr, uint32_t v) {
    for (int i = 0; i < 2; i++) {
        uint32_t off = addr - s->niu_base[i], reg = off % NIU_INITIATOR_STRIDE;
        if (!s->niu_regs[i] || off >= NIU_INITIATORS * NIU_INITIATOR_STRIDE) continue;
        if (off & 3 || reg >= NIU_PLAIN_END || reg == NIU_AT_LEN_BE_1
            || (reg == NIU_PACKET_TAG && v & ~NIU_PACKET_TAG_TRID) || (reg == NIU_BRCST_EXCLUDE && v))
            return 0;
        s->niu_regs[i][off / NIU_INITIATOR_STRIDE * (NIU_PLAIN_END / 4) + reg / 4] = v;
        return 1;
    }
    return 0;
}

/* An NIU response counter's or NOC_CMD_CTRL's load served in C (rv32_native.py NIU_LOADS_NATIVE; tile.py mmio_load ->
 * _niu_load is the reference): run()'s fourth argument, borrowed for one call: the tile, its stall dict, the NIU window's MMIO latency,
 * then per NIU its window, its counters (noc.py Niu.counters) and the tile's due completions and last shown counts
 * (tile.py _niu_due[i], _niu_seen[i]). A counter shows the requests complete at the core's cycle; a read that would
 * show what the last one showed while requests are due waits for the next completion (tile.py _niu_load). */
#define NIU_LOAD_FIELDS 11
#define NIU_COUNTER_BASE 0x200u
#define NIU_RESPONSE_COUNTERS 3u       /* ATOMIC_RESP_RECEIVED, WR_ACK_RECEIVED, RD_RESP_RECEIVED (noc.py 0, 1, 2) */
#define NIU_CMD_CTRL 0x40u
typedef struct {
    PyObject *tile, *stall, *name;     /* NULL tile: every NIU load is Python's */
    uint32_t extra, base[2];
    PyObject *counters[2], *due[2], *seen[2];
    long long nbase;                   /* the core's cycle less its stall (tbase + instret): fixed during one run() */
} niu_loads;

/* the core's cycle less its stall at run()'s start (*nbase; s->t0 is exact there) from the tile's stall dict; -1
 * with an error set */
static int cycle_base(PyObject *stall, PyObject *name, const rv_state *s, long long *nbase) {
    long long v;
    if (stall_in(stall, name, &v))
        return -1;
    *nbase = (long long)s->t0 - v;
    return 0;
}

/* run()'s NIU load context from its fourth argument (None: none); -1 with an error set */
static int niu_loads_from(PyObject *o, const rv_state *s, const bus_calls *c, niu_loads *g) {
    memset(g, 0, sizeof *g);
    if (o == Py_None)
        return 0;
    if (!c || c->base == Py_None || !PyTuple_Check(o) || PyTuple_GET_SIZE(o) != NIU_LOAD_FIELDS) {
        PyErr_SetString(PyExc_TypeError, "run: an NIU load context needs bus calls with stamp_base and 11 fields");
        return -1;
    }
    PyObject **f = &PyTuple_GET_ITEM(o, 0);
    g->tile = f[0], g->stall = f[1], g->name = c->name;
    g->extra = (uint32_t)PyLong_AsUnsignedLong(f[2]);
    for (int i = 0; i < 2; i++) {
        g->base[i] = (uint32_t)PyLong_AsUnsignedLong(f[3 + 4 * i]);
        g->counters[i] = f[4 + 4 * i], g->due[i] = f[5 + 4 * i], g->seen[i] = f[6 + 4 * i];
        if (!PyErr_Occurred() && (!PyDict_Check(g->counters[i]) || !PyDict_Check(g->due[i])
                                  || !PyDict_Check(g->seen[i])))
            PyErr_SetString(PyExc_TypeError, "run: an NIU load context's counters, due and seen are dicts");
    }
    if (PyErr_Occurred() || !PyDict_Check(g->stall))
        goto bad;
    if (!cycle_base(g->stall, g->name, s, &g->nbase))
        return 0;
bad:
    if (!PyErr_Occurred())
        PyErr_SetString(PyExc_TypeError, "run: an NIU load context of the wrong shape");
    return -1;
}

/* del due[:bisect_right(due, now)] on a sorted list of ints; -1 with an error set */
static int drop_done(PyObject *due, long long now) {
    Py_ssize_t k = 0, n = PyList_GET_SIZE(due);
    for (; k < n; k++) {
        long long t = PyLong_AsLongLong(PyList_GET_ITEM(due, k));
        if (t == -1 && PyErr_Occurred())
            return -1;
        if (t > now)
            break;
    }
    return k ? PyList_SetSlice(due, 0, k, NULL) : 0;
}

/* tile.py mmio_load + _niu_load for a response counter or NOC_CMD_CTRL at addr into *v: 1 served, 0 not one C serves (another
 * register, a tile recording a timeline), -1 with an error set */
static int niu_load(rv_state *s, const bus_calls *c, const niu_loads *g, uint32_t addr, uint32_t *v) {
    int i = 0;
    uint32_t reg = 0;
    for (; i < 2; i++)
        if (addr - g->base[i] < NIU_INITIATORS * NIU_INITIATOR_STRIDE) {
            reg = (addr - g->base[i]) % NIU_INITIATOR_STRIDE;
            break;
        }
    if (i == 2 || (reg != NIU_CMD_CTRL && reg - NIU_COUNTER_BASE >= 4 * NIU_RESPONSE_COUNTERS))
        return 0;
    int latency, recording = load_timing(g->tile, g->name, &latency);
    if (recording)
        return recording < 0 ? -1 : 0;
    /* NOC_CMD_CTRL reads 0 (a request completes inside its send: noc.py), and has no due completions */
    PyObject *key = PyLong_FromLong(((long)reg - (long)NIU_COUNTER_BASE) >> 2), *o, *pos = NULL, *stall_o = NULL;
    long long value = 0, stall = 0, was = 0;
    int bad = !key;
    if (!bad && reg != NIU_CMD_CTRL && (o = PyDict_GetItemWithError(g->counters[i], key)))
        bad = (value = PyLong_AsLongLong(o)) == -1 && PyErr_Occurred();
    bad = bad || PyErr_Occurred();
    if (!bad && latency) {
        bad = stall_in(g->stall, g->name, &was) < 0;
        stall = was + g->extra;
        PyObject *due = bad ? NULL : PyDict_GetItemWithError(g->due[i], key);
        bad = bad || PyErr_Occurred();
        if (!bad && due && !PyList_Check(due)) {
            PyErr_SetString(PyExc_TypeError, "niu_load: a response counter's due completions are not a list");
            bad = 1;
        }
        if (!bad && due && PyList_GET_SIZE(due)) {
            long long now = g->nbase + stall + s->done;
            bad = drop_done(due, now) < 0;
            Py_ssize_t n = bad ? 0 : PyList_GET_SIZE(due);
            PyObject *seen = n ? PyDict_GetItemWithError(g->seen[i], key) : NULL;
            if (n && seen && PyLong_AsLongLong(seen) == (long long)((uint64_t)(value - n) & 0xFFFFFFFFu)) {
                long long first = PyLong_AsLongLong(PyList_GET_ITEM(due, 0));
                if (first > now)
                    stall += first - now;              /* tile.py _wait_until(due[0]) */
                bad = PyErr_Occurred() || drop_done(due, g->nbase + stall + s->done) < 0;
            }
            bad = bad || PyErr_Occurred();
            if (!bad) {
                value = (long long)((uint64_t)(value - PyList_GET_SIZE(due)) & 0xFFFFFFFFu);
                PyObject *shown = PyLong_FromLongLong(value);
                bad = !shown || PyDict_SetItem(g->seen[i], key, shown) < 0;
                Py_XDECREF(shown);
            }
        }
    }
    if (!bad && latency && stall != was)
        bad = !(stall_o = PyLong_FromLongLong(stall)) || PyDict_SetItem(g->stall, g->name, stall_o) < 0;
    if (!bad)                           /* as the bus call would leave it */
        bad = !(pos = PyLong_FromUnsignedLong(s->done)) || slot_set(c->core, SL_POS, pos) < 0;
    Py_XDECREF(key);
    Py_XDECREF(pos);
    Py_XDECREF(stall_o);
    if (bad)
        return -1;
    *v = (uint32_t)value;
    return 1;
}

/* A core's NOC_CMD_CTRL store (a send) made in C with its time (noc_native.py ISSUE_NATIVE; tile.py mmio_store ->
 * _niu_store is the reference): run()'s fifth argument, borrowed for one call: noc_native's issue capsule, the tile,
 * its stall dict, then per NIU its window, its send context (noc.py Niu._c_context) and its timing context (tile.py
 * Tile._issue_timing). issue makes the request and times it issued at the core's cycle, or leaves it to the bus call
 * (a request kind or route it does not take; then nothing changed). */
#define NIU_SEND_FIELDS 9
typedef int (*issue_entry)(PyObject *ctx, long buf, PyObject *timing, long long start, long long *done);
typedef struct {
    issue_entry fn;                    /* NULL: every send is Python's */
    PyObject *tile, *stall, *name;
    uint32_t base[2];
    PyObject *ctx[2], *timing[2];
    long long nbase;                   /* the core's cycle less its stall (tbase + instret): fixed during one run() */
} niu_sends;

/* run()'s send context from its fifth argument (None: none); -1 with an error set */
static int niu_sends_from(PyObject *o, const rv_state *s, const bus_calls *c, niu_sends *e) {
    memset(e, 0, sizeof *e);
    if (o == Py_None)
        return 0;
    if (!c || c->base == Py_None || !PyTuple_Check(o) || PyTuple_GET_SIZE(o) != NIU_SEND_FIELDS) {
        PyErr_SetString(PyExc_TypeError, "run: a send context needs bus calls with stamp_base and 9 fields");
        return -1;
    }
    PyObject **f = &PyTuple_GET_ITEM(o, 0);
    e->fn = (issue_entry)PyCapsule_GetPointer(f[0], "noc_native.issue");
    e->tile = f[1], e->stall = f[2], e->name = c->name;
    for (int i = 0; i < 2; i++) {
        e->base[i] = (uint32_t)PyLong_AsUnsignedLong(f[3 + 3 * i]);
        e->ctx[i] = f[4 + 3 * i], e->timing[i] = f[5 + 3 * i];
    }
    return !e->fn || PyErr_Occurred() || cycle_base(e->stall, e->name, s, &e->nbase) ? -1 : 0;
}

/* a 32-bit store of v at addr as tile.py _niu_store's timed path makes it where it is a send issue takes: 1 made, 0
 * the bus call's (another register or value, a tile recording a timeline or untimed, what issue leaves), -1 with an
 * error set */
static int niu_send(rv_state *s, const bus_calls *c, const niu_sends *e, uint32_t addr, uint32_t v) {
    int i = 0;
    for (; i < 2 && addr - e->base[i] >= NIU_INITIATORS * NIU_INITIATOR_STRIDE; i++) {}
    if (i == 2 || v != 1 || (addr - e->base[i]) % NIU_INITIATOR_STRIDE != NIU_CMD_CTRL)
        return 0;
    int latency, recording = load_timing(e->tile, e->name, &latency);
    if (recording || !latency)
        return recording < 0 ? -1 : 0;
    long long stall, done;
    if (stall_in(e->stall, e->name, &stall))
        return -1;
    int made = e->fn(e->ctx[i], (long)((addr - e->base[i]) / NIU_INITIATOR_STRIDE), e->timing[i],
                     e->nbase + stall + s->done, &done);
    if (made <= 0)
        return made;
    PyObject *pos = PyLong_FromUnsignedLong(s->done);  /* as the bus call would leave it */
    int bad = !pos || slot_set(c->core, SL_POS, pos) < 0;
    Py_XDECREF(pos);
    return bad ? -1 : 1;
}

static inline void log_write(rv_state *s, uint32_t addr, uint64_t cycle) {   /* tile.py Tile._log_write */
    uint64_t n = (*s->log_n)++, *e = s->log + 4 * (n % LOG_SIZE);
    uint32_t word = addr & ~3u, old;
    memcpy(&old, s->l1 + word, 4);
    e[0] = addr >> STAMP_SHIFT; e[1] = cycle; e[2] = word; e[3] = old;
    log_index(s->log_head, s->log_prev, e[0], n);
}

/* How many `.ttinsn` words from pc on make one run (one PUSHM call). Within the current block; or, where `join` (the
 * bus calls are C's, so no translated piece sees the run), on across the block starts the run reaches while the
 * budget lasts: at such a start the core's only work is a snapshot for the spin test, which the run's next push
 * clears again, so the pushes and state are those of the runs cut there, pushed in one push_many call instead of one
 * per block (the Tensix's push_many is push() of each word in turn). *starts: the block starts inside the run. */
static uint32_t ttinsn_run(const rv_state *s, uint32_t pc, int join, uint32_t *starts) {
    uint32_t n = 1;
    *starts = 0;
    while (pc + 4 * n < L1_SIZE && (s->l1[pc + 4 * n] & 3) != 3) {
        if ((s->in_block + n) % MAX_BLOCK == 0) {
            if (!join || s->done + n >= s->budget)
                break;
            ++*starts;
        }
        n++;
    }
    return n;
}

static int rv_run(rv_state *s, const bus_calls *c, direct_push *d, const niu_loads *g, const niu_sends *e) {
    uint32_t *x = s->x, pc = s->pc, sub = 0;
    int stale = 0;                                               /* t0 older than the last bus call */
    for (;;) {
        if (s->in_block >= MAX_BLOCK || (s->in_block && pc == L1_SIZE)) s->in_block = 0;
        if (s->in_block == 0) {                                  /* a block starts here */
            if (s->done >= s->budget) { s->pc = pc; return RV_BUDGET; }
            if (pc >= L1_SIZE || pc & 3) break;                  /* the fetch fault is Python's */
            if (s->spin_pc == pc && !memcmp(x, s->spin_x, sizeof s->spin_x)) {
                s->pc = pc;
                return RV_SPIN;
            }
            if (s->spin_pc == NO_SPIN || s->chain > SPIN_CHAIN || s->spin_pc == pc) {
                s->spin_pc = pc; memcpy(s->spin_x, x, sizeof s->spin_x); s->chain = 0;
            } else {
                s->chain++;
            }
        }
        uint32_t w;
        memcpy(&w, s->l1 + pc, 4);
        uint32_t op = w & 0x7F, rd = (w >> 7) & 31, f3 = (w >> 12) & 7;
        uint32_t a = x[(w >> 15) & 31], b = x[(w >> 20) & 31], next = pc + 4, v = 0;
        int end = 0;                                             /* a branch or jump: the block ends after it */
        if ((w & 3) != 3) {                                      /* .ttinsn: Python pushes the run */
            uint32_t n = 1, starts = 0;
            if (s->multi_push)
                n = ttinsn_run(s, pc, c && s->multi_push == MULTI_JOIN, &starts);
            s->spin_pc = NO_SPIN;
            if (!c) {
                s->exit_n = n; s->pc = pc;
                return RV_PYTHON;
            }
            int pushers = push_run(s, c, d, pc, n, &sub);
            if (pushers < 0)
                goto bus_error;
            if (starts) {                                        /* what the block starts inside the run left */
                memcpy(s->spin_x, x, sizeof s->spin_x);
                s->chain = 0;
            }
            stale = pushers;
            pc += 4 * n;
            s->done += n;
            s->in_block += n - starts * MAX_BLOCK;
            continue;
        }
        switch (op) {
        case 0x33: if (!op_r(w >> 25, f3, a, b, &v)) goto python; break;
        case 0x13: if (!op_i(w, a, &v)) goto python; break;
        case 0x37: v = w & 0xFFFFF000u; break;
        case 0x17: v = pc + (w & 0xFFFFF000u); break;
        case 0x03: {
            uint32_t addr = a + imm_i(w), size = f3 == 2 ? 4 : (f3 & 3) == 1 ? 2 : 1;
            uint8_t *p;
            if (c && f3 == 2 && mmio_word(s, addr)) {            /* a load has no effect on the spin snapshot */
                int got = !d->tile ? 0 : addr == d->sync ? ttsync_load(s, c, d, &v) : sem_load(s, c, d, addr, &v);
                if (!got && g->tile)
                    got = niu_load(s, c, g, addr, &v);
                if (got < 0)
                    goto bus_error;
                stale = 1;
                if (got)
                    break;
                PyObject *a_o = PyLong_FromUnsignedLong(addr), *args[3] = {c->name, a_o, four};
                PyObject *r = a_o ? bus_call(s, c, c->load, args, 3, 1) : NULL;
                Py_XDECREF(a_o);
                if (r) {
                    v = (uint32_t)PyLong_AsUnsignedLongMask(r);
                    Py_DECREF(r);
                    if (v == 0xFFFFFFFFu && PyErr_Occurred())
                        goto bus_error;
                }
                if (!r)
                    goto bus_error;
                stale = 1;
                break;
            }
            if (f3 == 3 || f3 >= 6 || !(p = fast(s, addr, size))) goto python;
            /* the causal-load rule (tile.py Tile.l1_at): a line written later than this core's cycle reads as it was
             * then (a t0 left stale by a bus call is a lower bound of the cycle: refreshed before the lookup) */
            if (s->causal && addr < L1_SIZE && s->stamp[addr >> STAMP_SHIFT] > s->t0 + s->done) {
                uint32_t then;
                if (s->causal != CAUSAL_IN_C) goto python;
                if (stale) {
                    if (refresh_t0(s, c))
                        goto bus_error;
                    stale = 0;
                }
                if (!l1_word_at(s->l1, s->stamp, s->log, *s->log_n, s->log_head, s->log_prev, addr, s->t0 + s->done,
                                &then)) goto python;
                p = (uint8_t *)&then + (addr & 3);               /* little-endian host, as the stores */
            }
            switch (f3) {
            case 0: v = (uint32_t)(int32_t)*(int8_t *)p; break;
            case 1: { int16_t h; memcpy(&h, p, 2); v = (uint32_t)(int32_t)h; break; }
            case 2: memcpy(&v, p, 4); break;
            case 4: v = *p; break;
            case 5: { uint16_t h; memcpy(&h, p, 2); v = h; break; }
            }
            break;
        }
        case 0x23: {
            uint32_t addr = a + imm_s(w), size = 1u << f3;
            uint8_t *p;
            s->spin_pc = NO_SPIN;
            if (f3 > 2) goto python;
            if ((p = fast(s, addr, size))) {
                if (addr < L1_SIZE && s->stamp) {
                    if (stale) {
                        if (refresh_t0(s, c))
                            goto bus_error;
                        stale = 0;
                    }
                    s->stamp[addr >> STAMP_SHIFT] = s->t0 + s->done;
                    if (s->log) log_write(s, addr, s->t0 + s->done);
                }
                memcpy(p, &b, size);                             /* little-endian host (rv32.py checks it) */
            } else if (f3 != 2) {
                goto python;
            } else if (!niu_store(s, addr, b)) {
                if (!c || !mmio_word(s, addr)) goto python;
                int sent = e->fn ? niu_send(s, c, e, addr, b) : 0;
                if (!sent && d->tile)
                    sent = pcbuf_store(s, c, d, addr, b);
                if (sent < 0)
                    goto bus_error;
                if (sent) {                                      /* (no stall: t0 as it was) */
                    rd = 0;
                    break;
                }
                int window = c->window != Py_None && addr - s->push_base < s->push_size;
                int pushed = window ? window_push(s, c, d, b) : 0;
                if (pushed < 0)
                    goto bus_error;
                if (pushed) {
                    stale = 0;                                   /* (direct_run left t0 exact) */
                    rd = 0;
                    break;
                }
                PyObject *a_o = PyLong_FromUnsignedLong(addr), *v_o = PyLong_FromUnsignedLong(b), *r = NULL;
                if (a_o && v_o) {
                    PyObject *args[4] = {c->name, a_o, four, v_o};
                    if (window)
                        args[1] = v_o;
                    r = window ? bus_call(s, c, c->window, args, 2, 0) : bus_call(s, c, c->store, args, 4, 1);
                }
                Py_XDECREF(a_o);
                Py_XDECREF(v_o);
                if (!r)
                    goto bus_error;
                Py_DECREF(r);
                stale = 1;
            }
            rd = 0;
            break;
        }
        case 0x63: {
            int taken;
            if (!branch_taken(f3, a, b, &taken)) goto python;
            if (taken) next = pc + imm_b(w);
            rd = 0; end = 1;
            break;
        }
        case 0x6F:
            if (imm_j(w) == 0 && rd == 0) {                      /* `j .`: the core parks; the jump retires once */
                s->done++; s->in_block = 0; s->pc = pc;
                return RV_PARKED;
            }
            v = next; next = pc + imm_j(w); end = 1;
            break;
        case 0x67:
            if (f3) goto python;
            v = next; next = (a + imm_i(w)) & ~1u; end = 1;
            break;
        case 0x0F:
            if (f3) goto python;
            rd = 0;
            break;
        default:
            goto python;
        }
        if (rd) x[rd] = v;
        pc = next;
        s->done++;
        s->in_block = end ? 0 : s->in_block + 1;
        continue;
    python:
        break;
    bus_error:                                                   /* sub: the word of a pushed run that raised */
        s->pc = pc + 4 * sub;
        s->done += sub;
        if (!PyErr_ExceptionMatches(c->stall))
            return RV_ERROR;
        PyErr_Clear();                                           /* retried by the next run() */
        return RV_STALL;
    }
    /* MMIO, CSRs, atomics, anything not an instruction: Python; an impure one ends the spin snapshot */
    if (pc < L1_SIZE && !(pc & 3)) {
        uint32_t w;
        memcpy(&w, s->l1 + pc, 4);
        if (impure(w)) s->spin_pc = NO_SPIN;
    }
    s->exit_n = 1; s->pc = pc;
    return RV_PYTHON;
}

/* a register's value as the tile's peek(name, addr) answers it (tile.py Tile.peek), a new reference or NULL with an
 * error set: through `peek`, or where `peek` is a table (tile.py Tile.reg_peek: the window base, its count of words and
 * the list of their values, or None for a core that may peek none) without a Python call: the list's item for an
 * address inside the window, None elsewhere. `addr_o`: addr as a Python int, or NULL (made where the call needs it) */
static PyObject *reg_peek(PyObject *peek, PyObject *name, PyObject *addr_o, uint32_t addr) {
    if (!PyTuple_Check(peek)) {
        PyObject *made = addr_o ? NULL : PyLong_FromUnsignedLong(addr), *call[2] = {name, addr_o ? addr_o : made};
        PyObject *r = call[1] ? PyObject_Vectorcall(peek, call, 2, NULL) : NULL;
        Py_XDECREF(made);
        return r;
    }
    PyObject *values = PyTuple_GET_SIZE(peek) == 3 ? PyTuple_GET_ITEM(peek, 2) : NULL;
    unsigned long base = values ? PyLong_AsUnsignedLong(PyTuple_GET_ITEM(peek, 0)) : 0;
    unsigned long count = values ? PyLong_AsUnsignedLong(PyTuple_GET_ITEM(peek, 1)) : 0;
    if (!values || PyErr_Occurred() || (values != Py_None && (!PyList_Check(values)
                                                              || (Py_ssize_t)count > PyList_GET_SIZE(values)))) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "peek table: (window base, words, their values: a list of at least "
                                             "that many, or None)");
        return NULL;
    }
    uint32_t off = addr - (uint32_t)base;
    if (values == Py_None || off >= 4 * count)
        return Py_NewRef(Py_None);
    return Py_NewRef(PyList_GET_ITEM(values, off >> 2));
}

/* rv32.py RV32Core.spin_reads for a core run() stopped spinning, where its probe only loads (the common wait loop):
 * one turn of the loop from pc on a copy of the registers, block by block as rv32.py translates them (a block ends
 * after a branch or jump, after MAX_BLOCK instructions, at the end of L1), the registers compared after each of at
 * most PROBE_BLOCKS blocks. An aligned L1 load is logged and reads L1, or the word as of the core's cycle where the
 * probe's translated load asks the tile's past() (its line stamped later than the probe's SBASE + the position in the
 * block) and the write log can tell; an aligned local RAM load reads it unlogged; an aligned word load elsewhere asks
 * peek (a value: logged; None: the turn stops there). An aligned store to local RAM is made, as rv32.py's probe makes
 * it (its local RAM view is the core's). Anything the probe would do otherwise (another store, a push, a CSR, an
 * atomic, a misaligned access, a fault, an illegal word, parking) is left to rv32.py's probe. */
#define PROBE_BLOCKS (SPIN_CHAIN + 2u)
enum { PROBE_BACK = 0, PROBE_OTHER = 1, PROBE_NONE = 2, PROBE_PYTHON = 3, PROBE_ERROR = -1 };
typedef struct {
    uint32_t addr, size;
} probe_read;

/* one probe load at `addr` of the instruction w, k instructions into its block, into *v; PROBE_BACK (go on),
 * PROBE_OTHER (peek had nothing: the turn stops), PROBE_PYTHON or PROBE_ERROR */
static int probe_load(const rv_state *s, uint32_t w, uint32_t addr, uint32_t k, const uint64_t *cycle,
                      const uint64_t *sbase, PyObject *peek, PyObject *name, probe_read *log, uint32_t *n_log,
                      uint32_t *v) {
    uint32_t f3 = (w >> 12) & 7, size = f3 == 2 ? 4 : (f3 & 3) == 1 ? 2 : 1;
    uint8_t *p;
    if (f3 == 3 || f3 >= 6 || addr & (size - 1)) return PROBE_PYTHON;
    if (!(p = fast(s, addr, size))) {
        if (f3 != 2) return PROBE_PYTHON;
        if (peek == Py_None) return PROBE_OTHER;
        PyObject *r = reg_peek(peek, name, NULL, addr);
        if (!r) return PROBE_ERROR;
        if (r == Py_None) { Py_DECREF(r); return PROBE_OTHER; }
        unsigned long long value = PyLong_Check(r) ? PyLong_AsUnsignedLongLong(r) : (unsigned long long)-1;
        Py_DECREF(r);
        if (value > 0xFFFFFFFFull) { PyErr_Clear(); return PROBE_PYTHON; }   /* (not a register value) */
        log[(*n_log)++] = (probe_read){addr, 4};
        *v = (uint32_t)value;
        return PROBE_BACK;
    }
    uint32_t then;
    if (addr < L1_SIZE) {
        log[(*n_log)++] = (probe_read){addr, size};
        if (sbase && s->stamp[addr >> STAMP_SHIFT] > *sbase + k && cycle
            && l1_word_at(s->l1, s->stamp, s->log, *s->log_n, s->log_head, s->log_prev, addr, *cycle + k, &then))
            p = (uint8_t *)&then + (addr & 3);
    }
    switch (f3) {
    case 0: *v = (uint32_t)(int32_t)*(int8_t *)p; break;
    case 1: { int16_t h; memcpy(&h, p, 2); *v = (uint32_t)(int32_t)h; break; }
    case 2: memcpy(v, p, 4); break;
    case 4: *v = *p; break;
    case 5: { uint16_t h; memcpy(&h, p, 2); *v = h; break; }
    }
    return PROBE_BACK;
}

typedef struct {
    uint32_t off, old, size;      /* the store's bytes only: an sb / sh may end at the last byte of local RAM */
} local_store;

/* the probe's turn from s->pc with the registers s->x; *other: the address peek had nothing for (PROBE_OTHER); the
 * local RAM words it stored to, with what they held before, in undo (restored where rv32.py's probe takes over) */
static int probe_turn(const rv_state *s, const uint64_t *cycle, const uint64_t *sbase, PyObject *peek,
                      PyObject *name, probe_read *log, uint32_t *n_log, uint32_t *other, local_store *undo,
                      uint32_t *n_undo) {
    uint32_t x[32], pc = s->pc;
    memcpy(x, s->x, sizeof x);
    for (uint32_t block = 0; block < PROBE_BLOCKS; block++) {
        for (uint32_t k = 0;; k++) {
            if (k == MAX_BLOCK || (k && pc == L1_SIZE)) break;
            if (pc >= L1_SIZE || pc & 3) return PROBE_PYTHON;
            uint32_t w;
            memcpy(&w, s->l1 + pc, 4);
            uint32_t op = w & 0x7F, rd = (w >> 7) & 31, f3 = (w >> 12) & 7;
            uint32_t a = x[(w >> 15) & 31], b = x[(w >> 20) & 31], next = pc + 4, v = 0;
            int end = 0, why;
            if ((w & 3) != 3) return PROBE_PYTHON;
            switch (op) {
            case 0x33: if (!op_r(w >> 25, f3, a, b, &v)) return PROBE_PYTHON; break;
            case 0x13: if (!op_i(w, a, &v)) return PROBE_PYTHON; break;
            case 0x37: v = w & 0xFFFFF000u; break;
            case 0x17: v = pc + (w & 0xFFFFF000u); break;
            case 0x03:
                why = probe_load(s, w, a + imm_i(w), k, cycle, sbase, peek, name, log, n_log, &v);
                if (why == PROBE_OTHER) *other = a + imm_i(w);
                if (why != PROBE_BACK) return why;
                break;
            case 0x63:
                if (!branch_taken(f3, a, b, &end)) return PROBE_PYTHON;
                if (end) next = pc + imm_b(w);
                rd = 0; end = 1;
                break;
            case 0x6F:
                if (imm_j(w) == 0 && rd == 0) return PROBE_PYTHON;     /* `j .`: parking */
                v = next; next = pc + imm_j(w); end = 1;
                break;
            case 0x67:
                if (f3) return PROBE_PYTHON;
                v = next; next = (a + imm_i(w)) & ~1u; end = 1;
                break;
            case 0x23: {                      /* rv32.py's probe stores to local RAM as the core would */
                uint32_t addr = a + imm_s(w), size = 1u << f3;
                if (f3 > 2 || addr & (size - 1) || addr - LOCAL_BASE >= s->local_size) return PROBE_PYTHON;
                undo[*n_undo].off = addr - LOCAL_BASE;
                undo[*n_undo].size = size;
                memcpy(&undo[(*n_undo)++].old, s->local + (addr - LOCAL_BASE), size);
                memcpy(s->local + (addr - LOCAL_BASE), &b, size);
                rd = 0;
                break;
            }
            case 0x0F:                                           /* fence: no effect here */
                if (f3) return PROBE_PYTHON;
                rd = 0;
                break;
            default:
                return PROBE_PYTHON;
            }
            if (rd) x[rd] = v;
            pc = next;
            if (end) break;
        }
        if (pc == s->pc && !memcmp(x, s->x, sizeof x))
            return PROBE_BACK;
    }
    return PROBE_NONE;
}

/* ---- The registers' objects memo: a core's register list x (rv32.py core.x) comes back into the state at each
 * quantum and probe (regs_in) and goes out at its end (end), 32 PyLong reads each way although Python rarely writes
 * x between them. Kept per list: the int objects last read or written at each index with their values, each held (a
 * strong reference: while held, no other object can take its address, so the same object at an index is the same
 * value). An index whose object is the one held skips the read. A small direct-mapped table by the list's address;
 * a list that takes another's slot evicts it. REGS_MEMO_NATIVE (rv32_native.py, TT_EMU_REGS_MEMO_NATIVE=0: every
 * register read from its object, the reference) sets regs_memo_on through regs_memo(). */
enum { REG_MEMO_SLOTS = 64 };
typedef struct {
    PyObject *list;                      /* the core's x (held), or NULL */
    PyObject *obj[32];                   /* the object last seen at each index (held), or NULL */
    unsigned long val[32];               /* its value */
} reg_memo;
static reg_memo reg_memos[REG_MEMO_SLOTS];
static int regs_memo_on = 1;

/* an entry emptied: its references dropped */
static void reg_memo_clear(reg_memo *m) {
    for (int i = 0; i < 32; i++)
        Py_CLEAR(m->obj[i]);
    Py_CLEAR(m->list);
}

/* x's entry (a new one, an older list's evicted, where x has none), or NULL where the memo is off */
static reg_memo *reg_memo_of(PyObject *x) {
    if (!regs_memo_on)
        return NULL;
    reg_memo *m = &reg_memos[((uintptr_t)x >> 6) % REG_MEMO_SLOTS];
    if (m->list != x) {
        reg_memo_clear(m);
        m->list = Py_NewRef(x);
    }
    return m;
}

/* x[i]'s value as PyLong_AsUnsignedLong gives it (-1 with an error set), through m where it holds x[i] */
static inline unsigned long reg_value(reg_memo *m, PyObject *x, int i) {
    PyObject *o = PyList_GET_ITEM(x, i);
    if (m && m->obj[i] == o)
        return m->val[i];
    unsigned long v = PyLong_AsUnsignedLong(o);
    if (m && !(v == (unsigned long)-1 && PyErr_Occurred())) {
        Py_XSETREF(m->obj[i], Py_NewRef(o));
        m->val[i] = v;
    }
    return v;
}

/* x[i] = v (a new int) where m holds it too; -1 with an error set */
static int reg_store(reg_memo *m, PyObject *x, int i, uint32_t v) {
    PyObject *o = PyLong_FromUnsignedLong(v), *old = PyList_GET_ITEM(x, i);
    if (!o)
        return -1;
    PyList_SET_ITEM(x, i, o);
    Py_DECREF(old);
    if (m) {
        Py_XSETREF(m->obj[i], Py_NewRef(o));
        m->val[i] = v;
    }
    return 0;
}

/* regs_memo(on) -> None: whether regs_in and end keep the register lists' objects (reg_memo; rv32_native.py
 * REGS_MEMO_NATIVE sets it when the module loads, the tests both ways); the memo is dropped either way */
static PyObject *regs_memo(PyObject *self, PyObject *on) {
    (void)self;
    if (switch_set(on, &regs_memo_on))
        return NULL;
    for (int k = 0; k < REG_MEMO_SLOTS; k++)
        reg_memo_clear(&reg_memos[k]);
    Py_RETURN_NONE;
}

/* slots(on) -> None: whether slot_at reads and writes the hot attributes at their members' offsets (rv32_native.py
 * SLOTS_NATIVE sets it when the module loads, the tests both ways); off, the offsets remembered are dropped */
static PyObject *slots(PyObject *self, PyObject *on) {
    (void)self;
    if (switch_set(on, &slots_on))
        return NULL;
    memset(slot_memo, 0, sizeof slot_memo);
    Py_RETURN_NONE;
}

/* the core's registers (rv32.py core.x: a list of 32 ints in 0 .. 2**32) and pc into the state; -1 with an error set */
static int regs_in(rv_state *s, PyObject *x, PyObject *pc) {
    if (!PyList_Check(x) || PyList_GET_SIZE(x) != 32) {
        PyErr_SetString(PyExc_TypeError, "the core's registers: a list of 32 ints");
        return -1;
    }
    reg_memo *m = reg_memo_of(x);
    for (int i = 0; i < 32; i++)
        s->x[i] = (uint32_t)reg_value(m, x, i);
    s->pc = (uint32_t)PyLong_AsUnsignedLong(pc);
    return PyErr_Occurred() ? -1 : 0;
}

/* the n bytes at L1 address addr as they were at `cycle` where the write log can tell, else as they are (tile.py
 * _peek_word's answer at a cycle): a bytes object, or NULL with ValueError where they are not inside one word */
static PyObject *l1_bytes_at(const uint8_t *l1, const uint64_t *stamp, const uint64_t *log, uint64_t count,
                             const uint64_t *head, const uint64_t *prev, uint32_t addr, uint32_t n, uint64_t cycle) {
    uint32_t then;
    if (n > 4 - (addr & 3)) {
        PyErr_Format(PyExc_ValueError, "%u bytes at 0x%X are not inside one word of L1", n, addr);
        return NULL;
    }
    int known = l1_word_at(l1, stamp, log, count, head, prev, addr, cycle, &then);
    return PyBytes_FromStringAndSize(known ? (const char *)&then + (addr & 3) : (const char *)l1 + addr, n);
}

/* the words a frozen wait loop read, as tile.py Tile._peek_words gives them at `cycle` for _freeze: each L1 word of
 * `reads` ((addr, n) tuples, n inside one word) as it was at `cycle` where the write log can tell, else as it is; a
 * register (beyond L1) as peek(name, addr) answers it */
static PyObject *probe_seen(const rv_state *s, PyObject *reads, uint64_t cycle, PyObject *peek, PyObject *name) {
    Py_ssize_t count = PyList_GET_SIZE(reads);
    PyObject *out = PyList_New(count);
    for (Py_ssize_t i = 0; out && i < count; i++) {
        PyObject *t = PyList_GET_ITEM(reads, i), *w;
        uint32_t addr = (uint32_t)PyLong_AsUnsignedLong(PyTuple_GET_ITEM(t, 0));
        uint32_t n = (uint32_t)PyLong_AsUnsignedLong(PyTuple_GET_ITEM(t, 1));
        if (addr >= L1_SIZE) {
            w = reg_peek(peek, name, PyTuple_GET_ITEM(t, 0), addr);
        } else {
            w = l1_bytes_at(s->l1, s->stamp, s->log, *s->log_n, s->log_head, s->log_prev, addr, n, cycle);
        }
        if (!w) {
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, i, w);
    }
    return out;
}

/* the probe's reads as its answer lists them: [(addr, size), ...], each word once in the order of its first read
 * (a compare over the log, which holds at most PROBE_BLOCKS * MAX_BLOCK reads, instead of a dict of tuples: some 2k
 * x86 instructions a probe); NULL with an error set */
static PyObject *probe_reads(const probe_read *log, uint32_t n_log) {
    PyObject *reads = PyList_New(0);
    for (uint32_t i = 0; reads && i < n_log; i++) {
        uint32_t k = 0;
        while (k < i && (log[k].addr != log[i].addr || log[k].size != log[i].size))
            k++;
        if (k < i)
            continue;                                   /* (read before) */
        PyObject *a = PyLong_FromUnsignedLong(log[i].addr), *b = a ? PyLong_FromUnsignedLong(log[i].size) : NULL;
        PyObject *t = b ? PyTuple_Pack(2, a, b) : NULL;
        Py_XDECREF(a), Py_XDECREF(b);
        if (!t || PyList_Append(reads, t) < 0)
            Py_CLEAR(reads);
        Py_XDECREF(t);
    }
    return reads;
}
/* probe(state address, x, pc, cycle or None, sbase or None, peek or None, name) -> rv32.py spin_reads' answer for
 * the turn from pc with the registers x (both kept in the state, as run() keeps them): (the words read, in order, each
 * once; the address peek had nothing for, or None), or None; NotImplemented where rv32.py's probe must answer. cycle: the core's cycle (the tile's past() reads as of cycle + the position in the block), None
 * without the causal-load rule or where C must not answer it; sbase: the probe's SBASE, None without the rule. With a
 * seen cycle (tile.py _freeze, under the causal-load rule with the tile's write log in the state), a turn that comes
 * back answers (the words read, None, what they held at that cycle: probe_seen) instead. */
static PyObject *probe(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    rv_state *s = nargs == 7 || nargs == 8 ? PyLong_AsVoidPtr(args[0]) : NULL;
    uint64_t cycle = 0, sbase = 0, seen_at = 0;
    PyObject *seen_arg = nargs == 8 ? args[7] : Py_None;
    if (s && !regs_in(s, args[1], args[2])) {
        if (seen_arg != Py_None) seen_at = PyLong_AsUnsignedLongLong(seen_arg);
        args += 2;
        if (args[1] != Py_None) cycle = PyLong_AsUnsignedLongLong(args[1]);
        if (args[2] != Py_None) sbase = PyLong_AsUnsignedLongLong(args[2]);
    }
    if (!s || PyErr_Occurred()) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "probe(state address, x, pc, cycle, sbase, peek, name[, seen cycle])");
        return NULL;
    }
    if (args[2] != Py_None && (args[1] == Py_None || !s->stamp || !s->log))
        Py_RETURN_NOTIMPLEMENTED;                                /* the rule without C's write log: Python's */
    static probe_read log[PROBE_BLOCKS * MAX_BLOCK];
    static local_store undo[PROBE_BLOCKS * MAX_BLOCK];
    uint32_t n_log = 0, other = 0, n_undo = 0;
    int why = probe_turn(s, args[1] != Py_None ? &cycle : NULL, args[2] != Py_None ? &sbase : NULL, args[3], args[4],
                         log, &n_log, &other, undo, &n_undo);
    if (why == PROBE_ERROR || why == PROBE_PYTHON)     /* rv32.py's probe starts from the same local RAM */
        while (n_undo--)
            memcpy(s->local + undo[n_undo].off, &undo[n_undo].old, undo[n_undo].size);
    if (why == PROBE_ERROR) return NULL;
    if (why == PROBE_PYTHON) Py_RETURN_NOTIMPLEMENTED;
    if (why == PROBE_NONE) Py_RETURN_NONE;
    /* the answer's tuple packed from its items (Py_BuildValue's format parsing had cost ~500 x86 instructions) */
    PyObject *reads = probe_reads(log, n_log), *r = NULL, *last = NULL;
    if (reads && why != PROBE_OTHER && seen_arg != Py_None && s->log) {
        if ((last = probe_seen(s, reads, seen_at, args[3], args[4])))
            r = PyTuple_Pack(3, reads, Py_None, last);
    } else if (reads) {
        last = why == PROBE_OTHER ? PyLong_FromUnsignedLong(other) : Py_NewRef(Py_None);
        r = last ? PyTuple_Pack(2, reads, last) : NULL;
    } else if (!PyErr_Occurred())
        PyErr_NoMemory();
    Py_XDECREF(reads);
    Py_XDECREF(last);
    return r;
}

/* the PC buffer context t (tile.py Tile._direct_push's `sems`: tile, semaphore base, n, extra, semaphore loads or
 * not, TTSync's address or 0, a TTSync load's wait reason, semaphore stores or not, the TTSync methods C answers for
 * (3) or None) into d, item by item (PyArg_ParseTuple's format parsing had cost ~800 x86 instructions a run() call);
 * -1 with an error set */
static int pcbuf_from(PyObject *t, direct_push *d) {
    PyObject **f = PyTuple_Check(t) && PyTuple_GET_SIZE(t) == 9 ? &PyTuple_GET_ITEM(t, 0) : NULL;
    PyObject *refs = f ? f[8] : NULL;
    if (!f || !PyUnicode_Check(f[6]) || (refs != Py_None && (!PyTuple_Check(refs) || PyTuple_GET_SIZE(refs) != 3))) {
        PyErr_SetString(PyExc_TypeError, "run: a PC buffer context of the wrong shape");
        return -1;
    }
    d->tile = f[0], d->sync_wait = f[6];
    d->sem_base = (uint32_t)PyLong_AsUnsignedLongMask(f[1]), d->n_sems = (uint32_t)PyLong_AsUnsignedLongMask(f[2]);
    d->extra = (uint32_t)PyLong_AsUnsignedLongMask(f[3]), d->sync = (uint32_t)PyLong_AsUnsignedLongMask(f[5]);
    if (PyErr_Occurred() || (d->sem_loads = PyObject_IsTrue(f[4])) < 0 || (d->sem_stores = PyObject_IsTrue(f[7])) < 0)
        return -1;
    if (refs != Py_None)
        d->idle_ref = PyTuple_GET_ITEM(refs, 0), d->done_ref = PyTuple_GET_ITEM(refs, 1),
        d->tm_done_ref = PyTuple_GET_ITEM(refs, 2);
    return 0;
}

/* the direct push context `o` (None, or (plain_run capsule, tx, thread, facts, progress, the tile's stall dict, its
 * push counts, its wait reasons, the full FIFO's wait reason, allowed, the PC buffer C serves (pcbuf_from) or None,
 * the tile's PUSHM pusher
 * and its push_many or two Nones): tile.py
 * Tile._direct_push) into *d, for the bus calls c of a core whose cycle at position 0 is s->t0; -1 with an error set */
static int direct_from(PyObject *o, const rv_state *s, const bus_calls *c, direct_push *d) {
    long long stall;
    memset(d, 0, sizeof *d);
    if (o == Py_None)
        return 0;
    if (!c || c->base == Py_None || !PyTuple_Check(o) || PyTuple_GET_SIZE(o) != DIRECT_FIELDS) {
        PyErr_SetString(PyExc_TypeError, "run: a direct push context needs bus calls with stamp_base and 15 fields");
        return -1;
    }
    PyObject **f = &PyTuple_GET_ITEM(o, 0);
    if (PyCapsule_IsValid(f[0], "sfpu_issue.plain_run_c"))
        d->cfn = (plain_run_c_entry)PyCapsule_GetPointer(f[0], "sfpu_issue.plain_run_c");
    else
        d->fn = (plain_run_entry)PyCapsule_GetPointer(f[0], "sfpu_issue.plain_run");
    d->tx = f[1], d->thread = f[2], d->facts = f[3], d->progress = f[4], d->stall = f[5], d->pushes = f[6];
    d->waits = f[7], d->full = f[8], d->allowed = f[9], d->name = c->name, d->ready = -1;
    d->pushm = f[11], d->many = f[12] != Py_None ? f[12] : NULL;
    if (f[13] != Py_None && (!PyBytes_Check(f[13]) || PyBytes_GET_SIZE(f[13]) != 256)) {
        PyErr_SetString(PyExc_TypeError, "run: a direct push context's opcode table is 256 bytes or None");
        return -1;
    }
    d->never_plain = f[13] != Py_None ? PyBytes_AS_STRING(f[13]) : NULL;
    if (f[14] != Py_None && !PyDict_Check(f[14])) {
        PyErr_SetString(PyExc_TypeError, "run: a direct push context's kept runs are a dict or None");
        return -1;
    }
    d->runs = f[14] != Py_None ? f[14] : NULL;
    if (f[10] != Py_None && pcbuf_from(f[10], d))
        return -1;
    d->thread_i = PyLong_AsSsize_t(d->thread);
    if ((!d->fn && !d->cfn) || PyErr_Occurred() || !PyDict_Check(d->stall) || !PyList_Check(d->pushes)
        || !PyDict_Check(d->waits) || !PyList_Check(d->progress) || d->thread_i < 0
        || d->thread_i >= PyList_GET_SIZE(d->pushes)
        || stall_of(d, &stall)) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "run: a direct push context of the wrong shape");
        return -1;
    }
    d->base = (long long)s->t0 - stall;
    return 0;
}

/* a quantum's start once the registers and pc are in the state (regs_in): its budget, push and causal-load modes,
 * nothing done yet, no block begun, no spin snapshot (begin's, and run_rounds' round_quantum's) */
static void quantum_start(rv_state *s, uint32_t budget, uint32_t multi_push, uint32_t causal) {
    s->budget = budget, s->multi_push = multi_push, s->causal = causal;
    s->done = s->in_block = s->chain = 0;
    s->spin_pc = NO_SPIN;
}

/* begin(state address, x, pc, budget, multi_push, causal): a quantum's start (rv32_native.py NativeRun.run): the
 * registers and pc into the state, then quantum_start */
static PyObject *begin(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    rv_state *s = nargs == 6 ? PyLong_AsVoidPtr(args[0]) : NULL;
    if (!s || regs_in(s, args[1], args[2])) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "begin(state address, x, pc, budget, multi_push, causal)");
        return NULL;
    }
    uint32_t budget = (uint32_t)PyLong_AsUnsignedLong(args[3]), multi_push = (uint32_t)PyLong_AsUnsignedLong(args[4]);
    uint32_t causal = (uint32_t)PyLong_AsUnsignedLong(args[5]);
    if (PyErr_Occurred())
        return NULL;
    quantum_start(s, budget, multi_push, causal);
    Py_RETURN_NONE;
}

/* end(state address, x): the state's registers back into the list x (only those that differ: the rest keep their
 * objects) */
static PyObject *end(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    rv_state *s = nargs == 2 ? PyLong_AsVoidPtr(args[0]) : NULL;
    if (!s || !PyList_Check(args[1]) || PyList_GET_SIZE(args[1]) != 32) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "end(state address, x: a list of 32 ints)");
        return NULL;
    }
    reg_memo *m = reg_memo_of(args[1]);
    for (int i = 0; i < 32; i++) {
        unsigned long was = reg_value(m, args[1], i);
        if (was == (unsigned long)-1 && PyErr_Occurred())
            return NULL;
        if (was != s->x[i] && reg_store(m, args[1], i, s->x[i]) < 0)
            return NULL;
    }
    Py_RETURN_NONE;
}

/* run(address of an rv_state, bus_calls tuple or None, direct push context or None, NIU load context or None, send
 * context or None) -> RV_BUDGET ... RV_STALL: the address is rv32_native.py's state array's; an error a bus call
 * raised leaves with pc and done at the culprit */
static PyObject *run(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    rv_state *s = nargs == 5 ? PyLong_AsVoidPtr(args[0]) : NULL;
    if (!s) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "run(state address, bus calls: tuple or None, direct push or None, NIU "
                                             "loads or None, sends or None)");
        return NULL;
    }
    bus_calls c;
    direct_push d;
    if (args[1] != Py_None) {
        if (!PyTuple_Check(args[1]) || PyTuple_GET_SIZE(args[1]) != BUS_CALLS) {
            PyErr_SetString(PyExc_TypeError, "run: bus calls: a tuple of 10");
            return NULL;
        }
        PyObject **slot = (PyObject **)&c;
        for (int i = 0; i < BUS_CALLS; i++)
            slot[i] = PyTuple_GET_ITEM(args[1], i);
    }
    niu_loads g;
    niu_sends e;
    if (direct_from(args[2], s, args[1] != Py_None ? &c : NULL, &d)
        || niu_loads_from(args[3], s, args[1] != Py_None ? &c : NULL, &g)
        || niu_sends_from(args[4], s, args[1] != Py_None ? &c : NULL, &e))
        return NULL;
    int why = rv_run(s, args[1] != Py_None ? &c : NULL, &d, &g, &e);
    return why == RV_ERROR ? NULL : PyLong_FromLong(why);
}

/* the tile's write log for the lookups below: the addresses of L1, the line stamps, the ring, its count and its
 * index (rv32_native.py LogLookups) */
typedef struct { uint8_t *l1; uint64_t *stamp, *log, *log_n, *head, *prev; } write_log;

/* l1_at(write log address, addr, n, cycle) -> the n bytes at L1 addr (inside one aligned word) as they were at
 * `cycle`, or None when the log cannot tell (tile.py Tile.l1_at) */
static PyObject *l1_at(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    const write_log *g = nargs == 4 ? PyLong_AsVoidPtr(args[0]) : NULL;
    uint32_t addr = g ? (uint32_t)PyLong_AsUnsignedLong(args[1]) : 0;
    uint32_t n = g ? (uint32_t)PyLong_AsUnsignedLong(args[2]) : 0;
    uint64_t cycle = g ? PyLong_AsUnsignedLongLong(args[3]) : 0;
    uint32_t then;
    if (!g || PyErr_Occurred()) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "l1_at(write log address, addr, n, cycle)");
        return NULL;
    }
    if (addr >= L1_SIZE || n > 4 - (addr & 3)) {
        PyErr_Format(PyExc_ValueError, "l1_at: %u bytes at 0x%X are not inside one word of L1", n, addr);
        return NULL;
    }
    if (!l1_word_at(g->l1, g->stamp, g->log, *g->log_n, g->head, g->prev, addr, cycle, &then))
        Py_RETURN_NONE;
    return PyBytes_FromStringAndSize((const char *)&then + (addr & 3), n);
}

/* peek_words(write log address, reads, cycle or None) -> for each (addr, n) of reads, the n bytes at L1 addr: as they
 * were at `cycle` where the log can tell (l1_at's rule: n inside one word), else as they are; None for an address
 * beyond L1 (tile.py Tile._peek_word, the reference, asks the tile's peek there) */
static PyObject *peek_words(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    const write_log *g = nargs == 3 ? PyLong_AsVoidPtr(args[0]) : NULL;
    uint64_t cycle = g && args[2] != Py_None ? PyLong_AsUnsignedLongLong(args[2]) : 0;
    if (!g || PyErr_Occurred() || !PyList_Check(args[1])) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "peek_words(write log address, reads: list of (addr, n), cycle or None)");
        return NULL;
    }
    Py_ssize_t count = PyList_GET_SIZE(args[1]);
    PyObject *out = PyList_New(count);
    for (Py_ssize_t i = 0; out && i < count; i++) {
        unsigned int addr, n;
        PyObject *w;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(args[1], i), "II", &addr, &n)) {
            Py_CLEAR(out);
            break;
        }
        if (addr >= L1_SIZE) {
            w = Py_NewRef(Py_None);
        } else if (args[2] == Py_None) {
            w = PyBytes_FromStringAndSize((const char *)g->l1 + addr, n < L1_SIZE - addr ? n : L1_SIZE - addr);
        } else {
            w = l1_bytes_at(g->l1, g->stamp, g->log, *g->log_n, g->head, g->prev, addr, n, cycle);
        }
        if (!w) {
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, i, w);
    }
    return out;
}

/* first_write_after(write log address, addr, cycle) -> the cycle of the earliest logged store to the word at L1 addr
 * after `cycle`, or None (tile.py Tile.first_write_after) */
static PyObject *first_write(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    const write_log *g = nargs == 3 ? PyLong_AsVoidPtr(args[0]) : NULL;
    uint32_t addr = g ? (uint32_t)PyLong_AsUnsignedLong(args[1]) : 0;
    uint64_t cycle = g ? PyLong_AsUnsignedLongLong(args[2]) : 0, first;
    if (!g || PyErr_Occurred()) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "first_write_after(write log address, addr, cycle)");
        return NULL;
    }
    if (addr >= L1_SIZE || !first_write_after(g->log, *g->log_n, g->head, g->prev, addr, cycle, &first))
        Py_RETURN_NONE;                                          /* (nothing beyond L1 is logged) */
    return PyLong_FromUnsignedLongLong(first);
}

/* one of thaw's reads, a tuple (addr, size), into *addr and *n as PyArg_ParseTuple's "II" takes them (masked to 32
 * bits), without its format parsing (~350 x86 instructions a read); 0, or -1 with a TypeError */
static int thaw_read(PyObject *t, unsigned int *addr, unsigned int *n) {
    if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 2) {
        PyErr_SetString(PyExc_TypeError, "thaw: a read is a tuple (addr, size)");
        return -1;
    }
    unsigned long a = PyLong_AsUnsignedLongMask(PyTuple_GET_ITEM(t, 0)), b = 0;
    if ((a == (unsigned long)-1 && PyErr_Occurred())
        || ((b = PyLong_AsUnsignedLongMask(PyTuple_GET_ITEM(t, 1))) == (unsigned long)-1 && PyErr_Occurred()))
        return -1;
    *addr = (unsigned int)a, *n = (unsigned int)b;
    return 0;
}

/* thaw(write log address, reads, seen, cycle, last key or None, peek, who) -> (key, resume cycle or None): tile.py
 * Tile._thaw's decision under the causal-load rule for a frozen wait loop, in one call. reads: (addr, n), an L1 word
 * (n inside one word) or a register the tile's peek(who, addr) answers (a semaphore: an int, or None); NotImplemented
 * where peek answers something else. `seen`: the words as _freeze read them at the core's cycle. The key is the log's
 * count and the words as they are now (one bytes object: _thaw's (count, words) tuple, whose reads do not change while
 * the core is frozen); the same key as `last` means nothing was written since: (last, None) at once. Otherwise the
 * words as of `cycle`: a changed one resumes the core (at the latest stamp of the changed L1 lines the log cannot
 * place, 0 if there is none), an unchanged set at the first logged store after `cycle` to an L1 word read, None (stays
 * frozen) without one. */
enum { THAW_MAX_READS = 64, REG_KEY = 9 };      /* a register's part of the key: None / int, and 8 bytes of value */
static PyObject *thaw(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    const write_log *g = nargs == 7 ? PyLong_AsVoidPtr(args[0]) : NULL;
    uint64_t cycle = g ? PyLong_AsUnsignedLongLong(args[3]) : 0;
    if (!g || PyErr_Occurred() || !PyList_Check(args[1]) || !PyList_Check(args[2])
        || PyList_GET_SIZE(args[1]) != PyList_GET_SIZE(args[2])) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "thaw(write log address, reads, seen: lists of one length, cycle, last, "
                                             "peek, who)");
        return NULL;
    }
    Py_ssize_t count = PyList_GET_SIZE(args[1]), total = 8;
    unsigned int addr[THAW_MAX_READS], n[THAW_MAX_READS];
    PyObject *reg[THAW_MAX_READS] = {0}, *out = NULL, *key = NULL;
    if (count > THAW_MAX_READS)
        Py_RETURN_NOTIMPLEMENTED;
    for (Py_ssize_t i = 0; i < count; i++) {
        if (thaw_read(PyList_GET_ITEM(args[1], i), &addr[i], &n[i]))
            goto done;
        if (addr[i] >= L1_SIZE) {               /* a register: as the tile's peek reads it */
            reg[i] = reg_peek(args[5], args[6], PyTuple_GET_ITEM(PyList_GET_ITEM(args[1], i), 0), addr[i]);
            if (!reg[i])
                goto done;
            if (reg[i] != Py_None && (!PyLong_CheckExact(reg[i]) || _PyLong_Sign(reg[i]) < 0
                                      || PyLong_AsUnsignedLongLong(reg[i]) == (unsigned long long)-1)) {
                PyErr_Clear();
                out = Py_NewRef(Py_NotImplemented);
                goto done;
            }
            total += REG_KEY;
            continue;
        }
        if (n[i] > 4 - (addr[i] & 3)) {
            PyErr_Format(PyExc_ValueError, "thaw: %u bytes at 0x%X are not inside one word of L1", n[i], addr[i]);
            goto done;
        }
        total += n[i];
    }
    if (!(key = PyBytes_FromStringAndSize(NULL, total)))
        goto done;
    char *k = PyBytes_AS_STRING(key);
    uint64_t log_n = *g->log_n;
    memcpy(k, &log_n, 8);
    for (Py_ssize_t i = 0, at = 8; i < count; i++) {
        if (reg[i]) {
            uint64_t v = reg[i] == Py_None ? 0 : PyLong_AsUnsignedLongLong(reg[i]);
            k[at] = reg[i] != Py_None;
            memcpy(k + at + 1, &v, 8);
            at += REG_KEY;
        } else {
            memcpy(k + at, g->l1 + addr[i], n[i]);
            at += n[i];
        }
    }
    PyObject *last = args[4];
    if (PyBytes_Check(last) && PyBytes_GET_SIZE(last) == total && !memcmp(PyBytes_AS_STRING(last), k, total)) {
        out = PyTuple_Pack(2, last, Py_None);
        goto done;
    }
    int changed = 0, found = 0;
    uint64_t resume = 0, first;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *old = PyList_GET_ITEM(args[2], i);
        if (reg[i]) {
            int differs = PyObject_RichCompareBool(reg[i], old, Py_NE);
            if (differs < 0)
                goto done;
            changed |= differs;
            continue;
        }
        uint32_t then;
        int known = l1_word_at(g->l1, g->stamp, g->log, log_n, g->head, g->prev, addr[i], cycle, &then);
        const char *now = known ? (const char *)&then + (addr[i] & 3) : (const char *)g->l1 + addr[i];
        if (PyBytes_Check(old) && PyBytes_GET_SIZE(old) == n[i] && !memcmp(PyBytes_AS_STRING(old), now, n[i]))
            continue;
        changed = 1;
        if (!known && g->stamp[addr[i] >> STAMP_SHIFT] > resume)
            resume = g->stamp[addr[i] >> STAMP_SHIFT];
    }
    for (Py_ssize_t i = 0; !changed && i < count; i++)
        if (!reg[i] && first_write_after(g->log, log_n, g->head, g->prev, addr[i], cycle, &first)
            && (!found || first < resume)) {
            resume = first;
            found = 1;
        }
    PyObject *at = !changed && !found ? Py_NewRef(Py_None) : PyLong_FromUnsignedLongLong(resume);
    out = at ? PyTuple_Pack(2, key, at) : NULL;
    Py_XDECREF(at);
done:
    for (Py_ssize_t i = 0; i < count; i++)
        Py_XDECREF(reg[i]);
    Py_XDECREF(key);
    return out;
}

/* ----------------------------------------------------------------------------------------- the scheduler's rounds */
/* tile.py Tile.run's rounds in one call (run's loop and Tile._round are the reference; ROUND_NATIVE there): per round
 * each released core's thaw test, quantum and wait-loop probe in turn, least advanced first, and the Tensix's idle
 * test after each quantum; after it the spinners' catch-up and the tile's clock. It makes in C what
 * the Python path makes through C calls anyway (the thaw, NativeRun.run's begin / run / end, the probe) and asks
 * the tile's and the runner's own methods for everything else (a core on the Python blocks or handing back, a
 * thaw or probe Python must answer, a stepping Tensix). The context is tile.py Tile._native_rounds' tuple. */
enum { RC_TILE, RC_NAMES, RC_CORES, RC_BITS, RC_FROZEN, RC_FAULT, RC_WAIT, RC_SELF_TIMED, RC_POPS, RC_STALL, RC_TBASE,
       RC_POLL_AGAIN, RC_THAW_KEY, RC_REG_PEEKS, RC_THAW_LOG, RC_PROBE_AT, RC_LATENCY, RC_IDLE, RC_TENSIX, RC_QUANTUM,
       RC_SPINNING, RC_EMU_ERROR, RC_MMIO_EXITS, RC_DIRECT_PUSH, RC_PROBE_NATIVE, RC_JOINED_RUNS, RC_RUNNERS,
       RC_FIELDS };
/* per core, what its runner and core hold fixed during one run() (Tile._native_runner: no core changes them), or
 * None for a core without the C part */
enum { RN_NATIVE, RN_X, RN_NS, RN_BASE, RN_OWN_BASE, RN_STAMPS, RN_ARG, RN_FN, RN_DIRECT, RN_LOADS, RN_SENDS,
       RN_FIELDS };
enum { ROUND_MAX_CORES = 8 };
#define BUDGET_CAP 0x80000000LL          /* rv32_native.py BUDGET_CAP */

struct round_ctx {
    PyObject **f;                        /* the context's fields */
    Py_ssize_t n_cores;
    int probe_at, latency, mmio_exits, direct_push, probe_native, joined_runs;
    long long quantum;
};

static PyObject *s_bus_calls, *s_resume, *s_run, *s_thaw_m, *s_thaw_in_python, *s_freeze, *s_probe_attr, *s_peek,
    *s_peek_words, *s_times_its_reads, *s_core_failed, *s_threads, *s_fifo, *s_mop_out, *s_ready, *s_step, *s_empty,
    *s_pushm_key, *s_past_key, *s_sbase_key, *s_instructions, *s_catch_up, *s_nothing_progressed;

/* getattr(o, name)'s truth: 1 / 0, -1 with an error set */
static int attr_true(PyObject *o, PyObject *name) {
    PyObject *a = PyObject_GetAttr(o, name);
    int t = a ? PyObject_IsTrue(a) : -1;
    Py_XDECREF(a);
    return t;
}

/* d[key] as a C long long (a KeyError if missing): 0, or -1 with an error set */
static int dict_ll(PyObject *d, PyObject *key, long long *v) {
    PyObject *o = PyDict_GetItemWithError(d, key);
    if (!o) {
        if (!PyErr_Occurred())
            PyErr_SetObject(PyExc_KeyError, key);
        return -1;
    }
    *v = PyLong_AsLongLong(o);
    return *v == -1 && PyErr_Occurred() ? -1 : 0;
}

/* Tile.cycles' two dicts by core name, the tile's _tbase and _stall, are read for each core ~12 times a round (the
 * sort, the stamp bases, the thaws, the clock's advance) and change far less often: a core's value is kept with the
 * dict's version tag (py_tags.h: an equal tag is the same, unchanged dict) and the context's tuple of names (held, so
 * that no other tuple takes its address), and given again while both are those. cycles_memo_on 0 (rv32_native.py
 * CYCLES_MEMO_NATIVE, the reference) or no tags (Python 3.12) reads the dict each time. A look-up had cost ~120 x86
 * instructions, two a core a read. */
typedef struct {
    PyObject *dict, *names;              /* (names held) */
    uint64_t version;
    uint32_t known;                      /* a bit per core index: v[i] holds its value */
    long long v[ROUND_MAX_CORES];
} cycles_memo;
static cycles_memo tbase_memo, stall_memo;

/* d[names[i]] as a C long long through m (dict_ll's answers): 0, or -1 with an error set */
static int memo_ll(cycles_memo *m, PyObject *d, PyObject *names, Py_ssize_t i, long long *v) {
    uint64_t version = dict_version(d);
    if (!cycles_memo_on || !version)
        return dict_ll(d, PyTuple_GET_ITEM(names, i), v);
    if (m->dict != d || m->version != version || m->names != names) {
        m->dict = d, m->version = version, m->known = 0;
        Py_XSETREF(m->names, Py_NewRef(names));
    }
    if (m->known >> i & 1) {
        *v = m->v[i];
        return 0;
    }
    if (dict_ll(d, PyTuple_GET_ITEM(names, i), v))
        return -1;
    m->v[i] = *v, m->known |= 1u << i;
    return 0;
}

/* cycles_memo(on) -> None: whether round_cycles and stall_in keep the tbase and stall values (rv32_native.py
 * CYCLES_MEMO_NATIVE sets it when the module loads, the tests both ways); the memo is dropped either way */
static PyObject *cycles_memo_set(PyObject *self, PyObject *on) {
    (void)self;
    if (switch_set(on, &cycles_memo_on))
        return NULL;
    cycles_memo *const memos[2] = {&tbase_memo, &stall_memo};
    for (int k = 0; k < 2; k++) {
        Py_CLEAR(memos[k]->names);
        memos[k]->dict = NULL, memos[k]->known = 0;
    }
    Py_CLEAR(stall_last.name);
    stall_last.dict = NULL;
    Py_RETURN_NONE;
}

/* Tile.cycles(name) of core i: tbase + instret + stall */
static int round_cycles(const round_ctx *r, Py_ssize_t i, long long *t) {
    PyObject *names = r->f[RC_NAMES];
    long long tbase, instret, stall;
    if (memo_ll(&tbase_memo, r->f[RC_TBASE], names, i, &tbase)
        || slot_ll(PyTuple_GET_ITEM(r->f[RC_CORES], i), SL_INSTRET, &instret)
        || memo_ll(&stall_memo, r->f[RC_STALL], names, i, &stall))
        return -1;
    *t = tbase + instret + stall;
    return 0;
}

/* a method's truth: 1 / 0, -1 with an error set */
static int call_true(PyObject *o, PyObject *method, PyObject *arg) {
    PyObject *res = PyObject_CallMethodOneArg(o, method, arg);
    int t = res ? PyObject_IsTrue(res) : -1;
    Py_XDECREF(res);
    return t;
}

/* Tile._thaw(name) for frozen core i: 1 runs again, 0 stays frozen, -1 with an error set. C's thaw where _thaw would
 * call it (the context's write log), its answer applied as _thaw applies it (no timeline: _wait_until's stall). */
static int round_thaw(const round_ctx *r, Py_ssize_t i) {
    PyObject *tile = r->f[RC_TILE], *name = PyTuple_GET_ITEM(r->f[RC_NAMES], i);
    if (r->f[RC_THAW_LOG] == Py_None)
        return call_true(tile, s_thaw_m, name);
    PyObject *entry = PyDict_GetItemWithError(r->f[RC_FROZEN], name);
    PyObject *peek = entry ? PyDict_GetItemWithError(r->f[RC_REG_PEEKS], name) : NULL;
    long long t;
    if (!peek || !PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) != 2 || round_cycles(r, i, &t)) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "round: a frozen core's (reads, seen) or its peek is missing");
        return -1;
    }
    PyObject *last = PyDict_GetItemWithError(r->f[RC_THAW_KEY], name);
    if (!last && PyErr_Occurred())
        return -1;
    PyObject *t_o = PyLong_FromLongLong(t);
    if (!t_o)
        return -1;
    PyObject *args[7] = {r->f[RC_THAW_LOG], PyTuple_GET_ITEM(entry, 0), PyTuple_GET_ITEM(entry, 1), t_o,
                         last ? last : Py_None, peek, name};
    PyObject *answer = thaw(NULL, args, 7);
    Py_DECREF(t_o);
    if (!answer)
        return -1;
    if (answer == Py_NotImplemented) {
        Py_DECREF(answer);
        return call_true(tile, s_thaw_in_python, name);
    }
    int out = -1;
    PyObject *resume = PyTuple_GET_ITEM(answer, 1);
    if (PyDict_SetItem(r->f[RC_THAW_KEY], name, PyTuple_GET_ITEM(answer, 0)) < 0)
        goto done;
    if (resume == Py_None) {
        out = 0;
        goto done;
    }
    long long at = PyLong_AsLongLong(resume);
    if ((at == -1 && PyErr_Occurred()) || PyDict_DelItem(r->f[RC_FROZEN], name) < 0)
        goto done;
    if (at > t) {                        /* _wait_until(name, at): a later resume cycle is a stall until then */
        long long stall;
        PyObject *v;
        if (dict_ll(r->f[RC_STALL], name, &stall) || !(v = PyLong_FromLongLong(stall + at - t)))
            goto done;
        int bad = PyDict_SetItem(r->f[RC_STALL], name, v);
        Py_DECREF(v);
        if (bad < 0)
            goto done;
    }
    out = 1;
done:
    Py_DECREF(answer);
    return out;
}

/* The error of core `name`'s quantum: an EmuError goes through Tile._core_failed (the core's fault, the error
 * naming it), handled as the except clause of _round would; -1 always */
static int round_failed(const round_ctx *r, PyObject *name) {
    PyObject *type, *exc, *tb;
    PyErr_Fetch(&type, &exc, &tb);
    PyErr_NormalizeException(&type, &exc, &tb);
    if (tb && exc)
        PyException_SetTraceback(exc, tb);
    int emu = exc ? PyObject_IsInstance(exc, r->f[RC_EMU_ERROR]) : 0;
    if (emu <= 0) {
        if (emu < 0) {
            Py_XDECREF(type);
            Py_XDECREF(exc);
            Py_XDECREF(tb);
        } else
            PyErr_Restore(type, exc, tb);
        return -1;
    }
    PyObject *was = PyErr_GetHandledException();
    PyErr_SetHandledException(exc);
    PyObject *res = PyObject_CallMethodObjArgs(r->f[RC_TILE], s_core_failed, name, exc, NULL);
    PyErr_SetHandledException(was);
    Py_XDECREF(was);
    Py_XDECREF(res);
    Py_XDECREF(type);
    Py_DECREF(exc);
    Py_XDECREF(tb);
    if (res && !PyErr_Occurred())
        PyErr_SetString(PyExc_RuntimeError, "round: Tile._core_failed returned");
    return -1;
}

/* core.stamp_base() of core i with runner fields u: the tile's own (Tile._stamper's lambda, tbase + instret + stall)
 * read here, another called; a new reference, or NULL with an error set */
static PyObject *round_base(const round_ctx *r, Py_ssize_t i, PyObject *const *u) {
    long long t;
    if (u[RN_OWN_BASE] != Py_True)
        return PyObject_CallNoArgs(u[RN_BASE]);
    return round_cycles(r, i, &t) ? NULL : PyLong_FromLongLong(t);
}

/* core.run(budget): the runner's C part called as NativeRun.run calls it where no Python quanta are owed (begin,
 * the stamp base, the first call; a hand-back goes on in NativeRun.resume, as does every other case: NativeRun.run,
 * or rv32.py's run for a core without the C part). *n: the instructions retired; 0, or -1 with an error set. */
static int round_quantum(const round_ctx *r, Py_ssize_t i, long long budget, long long *n) {
    PyObject *core = PyTuple_GET_ITEM(r->f[RC_CORES], i), *runner = PyTuple_GET_ITEM(r->f[RC_RUNNERS], i);
    PyObject *native = runner != Py_None ? PyTuple_GET_ITEM(runner, RN_NATIVE) : Py_None;
    PyObject *budget_o = PyLong_FromLongLong(budget), *res = NULL;
    long long owed = 0;
    if (!budget_o || (native != Py_None && slot_ll(native, SL_QUANTA, &owed)))
        goto out;
    if (native == Py_None || owed || !r->mmio_exits) {
        res = PyObject_CallMethodOneArg(native == Py_None ? core : native, s_run, budget_o);
        goto out;
    }
    PyObject **u = &PyTuple_GET_ITEM(runner, 0);
    PyObject *x = u[RN_X], *ns = u[RN_NS], *base = u[RN_BASE], *stamps = u[RN_STAMPS], *arg = u[RN_ARG];
    PyObject *pc = slot_get(core, SL_PC), *calls = NULL, *why = NULL;
    PyObject *direct = base != Py_None && r->direct_push ? u[RN_DIRECT] : Py_None;
    PyObject *loads = base != Py_None ? u[RN_LOADS] : Py_None, *sends = base != Py_None ? u[RN_SENDS] : Py_None;
    rv_state *s = pc ? PyLong_AsVoidPtr(arg) : NULL;
    int causal = 0, past = 0, multi = 0, begun = 0;
    if (!s || slot_set(core, SL_SPINNING, Py_False) < 0)
        goto done;
    if ((causal = PyDict_Contains(ns, s_past_key)) < 0 || (causal && (past = slot_true(native, SL_PAST_IN_C)) < 0)
        || (multi = PyDict_Contains(ns, s_pushm_key)) < 0 || regs_in(s, x, pc))
        goto done;
    causal = causal && stamps != Py_None;
    quantum_start(s, (uint32_t)(budget < 0 ? 0 : budget > BUDGET_CAP ? BUDGET_CAP : budget),     /* NativeRun.run's */
                  multi ? (r->joined_runs ? MULTI_JOIN : MULTI_BLOCK) : MULTI_OFF,
                  causal ? (past ? CAUSAL_IN_C : CAUSAL_HAND_BACK) : CAUSAL_OFF);
    begun = 1;
    if (!(calls = slot_get(native, SL_CALLS)))       /* (NativeRun._bus_calls, built once) */
        goto done;
    if (calls == Py_None) {
        Py_DECREF(calls);
        if (!(calls = PyObject_CallMethodNoArgs(native, s_bus_calls)))
            goto done;
    }
    if (base != Py_None) {                  /* a piece may have stalled the core (NativeRun.resume) */
        PyObject *b = round_base(r, i, u);
        if (!b)
            goto done;
        s->t0 = PyLong_AsUnsignedLongLong(b);
        int bad = PyErr_Occurred() || (causal && PyDict_SetItem(ns, s_sbase_key, b) < 0);
        Py_DECREF(b);
        if (bad)
            goto done;
    }
    PyObject *fargs[5] = {arg, calls, direct, loads, sends};
    own_stamp_at outer = own_stamp;
    own_stamp.base = u[RN_OWN_BASE] == Py_True ? base : NULL, own_stamp.r = r, own_stamp.i = i;
    why = PyObject_Vectorcall(u[RN_FN], fargs, 5, NULL);
    own_stamp = outer;
    if (!why) {
        PyObject *type, *value, *tb, *pc_now = PyLong_FromUnsignedLong(s->pc);    /* pc names the culprit */
        PyErr_Fetch(&type, &value, &tb);
        if (pc_now)
            slot_set(core, SL_PC, pc_now);
        Py_XDECREF(pc_now);
        PyErr_Restore(type, value, tb);
        goto done;
    }
    long w = PyLong_AsLong(why);
    if (w == -1 && PyErr_Occurred())
        goto done;
    if (w == RV_PYTHON) {
        begun = 0;                          /* (resume ends the quantum, also on an error) */
        res = PyObject_CallMethodOneArg(native, s_resume, why);
        goto done;
    }
    PyObject *eargs[2] = {arg, x}, *e = end(NULL, eargs, 2), *pc_o = e ? PyLong_FromUnsignedLong(s->pc) : NULL;
    begun = 0;
    Py_XDECREF(e);
    if (pc_o && slot_set(core, SL_PC, pc_o) == 0 && slot_add(core, SL_INSTRET, s->done) == 0
        && slot_set(core, SL_POS, zero) == 0 && slot_set(core, SL_SPINNING, w == RV_SPIN ? Py_True : Py_False) == 0
        && slot_set(core, SL_PARKED, w == RV_PARKED ? Py_True : Py_False) == 0)
        res = PyLong_FromUnsignedLong(s->done);
    Py_XDECREF(pc_o);
done:
    if (begun) {                            /* NativeRun.resume's except clause: the culprit's instructions retired */
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        long long now_pc;
        if (slot_ll(core, SL_PC, &now_pc) == 0 && slot_add(core, SL_INSTRET, s->done + ((now_pc - s->pc) >> 2)) == 0
            && slot_set(core, SL_POS, zero) == 0) {
            PyObject *eargs[2] = {arg, x}, *e = end(NULL, eargs, 2);
            Py_XDECREF(e);
        }
        PyErr_Clear();
        PyErr_Restore(type, value, tb);
    }
    Py_XDECREF(pc);
    Py_XDECREF(calls);
    Py_XDECREF(why);
out:
    Py_XDECREF(budget_o);
    if (!res)
        return -1;
    *n = PyLong_AsLongLong(res);
    Py_DECREF(res);
    return *n == -1 && PyErr_Occurred() ? -1 : 0;
}

/* Tile._freeze(name) for core i, which its quantum left spinning: 1 a spinner this round, 0 not, -1 with an error
 * set. The C probe where _freeze would reach it (core.spin_reads -> NativeRun.spin_reads with the core's cycle as
 * seen_at), its answer applied as _freeze applies it; _freeze itself wherever Python decides or answers. */
static int round_freeze(const round_ctx *r, Py_ssize_t i) {
    if (!r->latency)
        return 1;
    PyObject *tile = r->f[RC_TILE], *name = PyTuple_GET_ITEM(r->f[RC_NAMES], i);
    PyObject *core = PyTuple_GET_ITEM(r->f[RC_CORES], i);
    if (!r->probe_at || !r->probe_native)
        return call_true(tile, s_freeze, name);
    PyObject *runner = PyTuple_GET_ITEM(r->f[RC_RUNNERS], i), *probed = NULL, *peek = NULL, *sbase = NULL;
    PyObject *stamp = NULL, *t_o = NULL, *pc = NULL, *res = NULL;
    PyObject *const *u = runner != Py_None ? &PyTuple_GET_ITEM(runner, 0) : NULL;
    int out = -1, python = !u, past = 1;
    long long t;
    if (python || !(probed = PyObject_GetAttr(core, s_probe_attr)) || !(peek = PyObject_GetAttr(u[RN_NATIVE], s_peek)))
        goto done;
    if (!(sbase = PyDict_GetItemWithError(u[RN_NS], s_sbase_key)) && PyErr_Occurred())
        goto done;
    sbase = Py_NewRef(sbase ? sbase : Py_None);
    if (sbase != Py_None && (past = slot_true(u[RN_NATIVE], SL_PAST_IN_C)) < 0)
        goto done;
    /* rv32.py spin_reads' first call (it builds core._probe), a probe only Python answers, an unresolved peek */
    python = probed == Py_None || !past || peek == Py_NotImplemented;
    if (python || round_cycles(r, i, &t) || !(t_o = PyLong_FromLongLong(t)))
        goto done;
    /* the tile's own stamp base is the cycle just read (round_base's sum, and no Python ran since) */
    stamp = sbase == Py_None ? Py_NewRef(Py_None) : u[RN_OWN_BASE] == Py_True ? Py_NewRef(t_o) : round_base(r, i, u);
    if (!stamp || !(pc = slot_get(core, SL_PC)))
        goto done;
    PyObject *pargs[8] = {u[RN_ARG], u[RN_X], pc, stamp, sbase, peek, name, t_o};
    if (!(res = probe(NULL, pargs, 8)))
        goto done;
    if ((python = res == Py_NotImplemented))
        goto done;
    PyObject *poll = r->f[RC_POLL_AGAIN];
    if (res == Py_None) {                   /* no turn back: polled once more, unless already at this loop */
        PyObject *prev = PyDict_GetItemWithError(poll, name);
        int other = prev ? PyObject_RichCompareBool(prev, pc, Py_NE) : !PyErr_Occurred();
        if (other < 0 || (other && PyDict_SetItem(poll, name, pc) < 0))
            goto done;
        out = !other;
        goto done;
    }
    int has = PyDict_Contains(poll, name);
    if (has < 0 || (has && PyDict_DelItem(poll, name) < 0))
        goto done;
    PyObject *reads = PyTuple_GET_ITEM(res, 0), *other = PyTuple_GET_ITEM(res, 1);
    if (other == Py_None) {
        PyObject *seen = PyTuple_GET_SIZE(res) == 3 ? Py_NewRef(PyTuple_GET_ITEM(res, 2))
                                                    : PyObject_CallMethodObjArgs(tile, s_peek_words, name, reads, t_o,
                                                                                 NULL);
        PyObject *entry = seen ? PyTuple_Pack(2, reads, seen) : NULL;
        Py_XDECREF(seen);
        int bad = !entry || PyDict_SetItem(r->f[RC_FROZEN], name, entry) < 0;
        Py_XDECREF(entry);
        if (bad || ((has = PyDict_Contains(r->f[RC_THAW_KEY], name)) < 0)
            || (has && PyDict_DelItem(r->f[RC_THAW_KEY], name) < 0))
            goto done;
    } else {
        int timed = call_true(tile, s_times_its_reads, other);
        if (timed < 0 || (timed && PySet_Add(r->f[RC_SELF_TIMED], name) < 0))
            goto done;
    }
    out = 1;
done:
    Py_XDECREF(probed);
    Py_XDECREF(peek);
    Py_XDECREF(sbase);
    Py_XDECREF(stamp);
    Py_XDECREF(t_o);
    Py_XDECREF(pc);
    Py_XDECREF(res);
    return python && !PyErr_Occurred() ? call_true(tile, s_freeze, name) : out;
}

/* The queues round_busy tests, a thread's fifo, mop_out and ready (thread_state.ThreadState's __slots__), at their
 * offsets, which their member descriptors give: resolved once per class and used while the class keeps its version
 * tag (any change of a class in its MRO changes it, and no two classes get the same one); a class without such slots
 * is asked by attribute. Through PyObject_GetAttr each test had cost ~170 x86 instructions, nine a round. */
static struct { PyTypeObject *tp; unsigned int tag; Py_ssize_t off[3]; } queue_slots;

/* the address of th's queue slot k (0 fifo, 1 mop_out, 2 ready), or NULL where its class has none */
static PyObject **queue_slot(PyObject *th, int k) {
    PyTypeObject *tp = Py_TYPE(th);
    unsigned int tag = PyType_HasFeature(tp, Py_TPFLAGS_VALID_VERSION_TAG) ? tp->tp_version_tag : 0;
    if (tp != queue_slots.tp || !tag || tag != queue_slots.tag) {
        PyObject *const names[3] = {s_fifo, s_mop_out, s_ready};
        Py_ssize_t off[3];
        for (int i = 0; i < 3; i++)
            if ((off[i] = slot_offset(tp, names[i])) < 0)
                return NULL;
        if (!PyType_HasFeature(tp, Py_TPFLAGS_VALID_VERSION_TAG))     /* (_PyType_Lookup gave it one if it can) */
            return NULL;
        queue_slots.tp = tp, queue_slots.tag = tp->tp_version_tag;
        memcpy(queue_slots.off, off, sizeof off);
    }
    return (PyObject **)((char *)th + queue_slots.off[k]);
}

/* the truth of th's queue k: 1 / 0, -1 with an error set */
static int queue_true(PyObject *th, int k) {
    static PyObject **const names[3] = {&s_fifo, &s_mop_out, &s_ready};
    PyObject **p = queue_slot(th, k);
    return p && *p ? PyObject_IsTrue(*p) : attr_true(th, *names[k]);
}

/* Tile._tensix_busy: a thread with words in its FIFO, MOP expander or ready queue (frontend.py thread_idle, read
 * here where the Tensix's is that method, else asked); 1 / 0, -1 with an error set */
static int round_busy(const round_ctx *r) {
    PyObject *plain = r->f[RC_IDLE], *tensix = r->f[RC_TENSIX];
    if (plain == Py_None) {
        for (long t = 0; t < 3; t++) {
            PyObject *t_o = PyLong_FromLong(t);
            int idle = t_o ? call_true(tensix, s_thread_idle, t_o) : -1;
            Py_XDECREF(t_o);
            if (idle <= 0)
                return idle < 0 ? -1 : 1;
        }
        return 0;
    }
    PyObject *threads = PyObject_GetAttr(plain, s_threads);
    int busy = threads ? 0 : -1;
    for (Py_ssize_t t = 0; busy == 0 && t < 3; t++) {
        PyObject *th = PySequence_GetItem(threads, t);
        for (int k = 0; th && busy == 0 && k < 3; k++)
            busy = queue_true(th, k);
        if (!th)
            busy = -1;
        Py_XDECREF(th);
    }
    Py_XDECREF(threads);
    return busy;
}

/* one core's turn of the round (_round's loop body) for core i: *riscv and *progress grow, spinners may get its name;
 * 0, or -1 with an error set */
static int round_turn(const round_ctx *r, Py_ssize_t i, long long left, long long quantum, long long *riscv,
                      long long *progress, PyObject *spinners) {
    PyObject *name = PyTuple_GET_ITEM(r->f[RC_NAMES], i), *core = PyTuple_GET_ITEM(r->f[RC_CORES], i);
    long long reset, bit = PyLong_AsLongLong(PyTuple_GET_ITEM(r->f[RC_BITS], i));
    if ((bit == -1 && PyErr_Occurred()) || slot_ll(r->f[RC_TILE], SL_SOFT_RESET, &reset))
        return -1;
    if (reset & bit)
        return 0;
    int parked = slot_true(core, SL_PARKED), frozen;
    PyObject *fault = parked == 0 ? PyDict_GetItemWithError(r->f[RC_FAULT], name) : NULL;
    int faulted = fault ? PyObject_IsTrue(fault) : -1;
    if (parked || faulted) {
        if (!fault && parked == 0 && !PyErr_Occurred())
            PyErr_SetObject(PyExc_KeyError, name);
        return parked > 0 || faulted > 0 ? 0 : -1;
    }
    if ((frozen = PyDict_Contains(r->f[RC_FROZEN], name)) < 0)
        return -1;
    if (frozen) {
        int thawed = round_thaw(r, i);
        if (thawed <= 0)
            return thawed < 0 ? -1 : PyList_Append(spinners, name);
    }
    if (PyDict_SetItem(r->f[RC_WAIT], name, s_empty) < 0 || PySet_Discard(r->f[RC_SELF_TIMED], name) < 0)
        return -1;
    PyObject *pops = PyDict_GetItemWithError(r->f[RC_POPS], name);
    if (!pops && PyErr_Occurred())
        return -1;
    pops = Py_NewRef(pops ? pops : Py_None);
    long long n, budget = left - *riscv < quantum ? left - *riscv : quantum;
    if (round_quantum(r, i, budget, &n)) {
        Py_DECREF(pops);
        return round_failed(r, name);
    }
    *riscv += n;
    int spinning = slot_true(core, SL_SPINNING), frz = 0;
    if (spinning > 0) {
        PyObject *now = PyDict_GetItemWithError(r->f[RC_POPS], name);
        int moved = now || !PyErr_Occurred() ? PyObject_RichCompareBool(pops, now ? now : Py_None, Py_NE) : -1;
        if (moved < 0 || (moved && slot_set(core, SL_SPINNING, Py_False) < 0))
            spinning = -1;
        else if (moved)
            spinning = 0;       /* a store-free loop that pops a mailbox changes state: not a spin */
    }
    Py_DECREF(pops);
    if (spinning < 0 || (spinning && (frz = round_freeze(r, i)) < 0))
        return -1;
    if (frz) {
        if (PyList_Append(spinners, name) < 0 || PyDict_SetItem(r->f[RC_WAIT], name, r->f[RC_SPINNING]) < 0)
            return -1;
    } else {
        *progress += n;
        PyObject *poll = r->f[RC_POLL_AGAIN];
        int has = !spinning && PyDict_GET_SIZE(poll) ? PyDict_Contains(poll, name) : 0;
        if (has < 0 || (has && PyDict_DelItem(poll, name) < 0))
            return -1;
    }
    int busy = round_busy(r);
    if (busy > 0) {
        PyObject *res = PyObject_CallMethodNoArgs(r->f[RC_TENSIX], s_step);
        Py_XDECREF(res);
        busy = res ? 0 : -1;
    }
    return busy;
}

/* the context's runners: one per core, None or a tuple of RN_FIELDS whose registers are a list of 32 and namespace a
 * dict (regs_in and the look-ups below rely on it) */
static int runners_ok(const round_ctx *r) {
    PyObject *runners = r->f[RC_RUNNERS];
    if (!PyTuple_Check(runners) || PyTuple_GET_SIZE(runners) != r->n_cores)
        return 0;
    for (Py_ssize_t i = 0; i < r->n_cores; i++) {
        PyObject *u = PyTuple_GET_ITEM(runners, i);
        if (u != Py_None && (!PyTuple_Check(u) || PyTuple_GET_SIZE(u) != RN_FIELDS
                             || !PyDict_Check(PyTuple_GET_ITEM(u, RN_NS)) || !PyList_Check(PyTuple_GET_ITEM(u, RN_X))))
            return 0;
    }
    return 1;
}

/* the context tuple into *r; 0, or -1 with an error set */
static int round_ctx_from(PyObject *ctx, round_ctx *r) {
    if (!PyTuple_Check(ctx) || PyTuple_GET_SIZE(ctx) != RC_FIELDS) {
        PyErr_SetString(PyExc_TypeError, "round: a context of the wrong shape");
        return -1;
    }
    r->f = &PyTuple_GET_ITEM(ctx, 0);
    r->n_cores = PyTuple_Check(r->f[RC_NAMES]) ? PyTuple_GET_SIZE(r->f[RC_NAMES]) : -1;
    if (r->n_cores < 0 || r->n_cores > ROUND_MAX_CORES || !PyTuple_Check(r->f[RC_CORES])
        || PyTuple_GET_SIZE(r->f[RC_CORES]) != r->n_cores || !PyTuple_Check(r->f[RC_BITS])
        || PyTuple_GET_SIZE(r->f[RC_BITS]) != r->n_cores || !PyDict_Check(r->f[RC_FROZEN])
        || !PyDict_Check(r->f[RC_FAULT]) || !PyDict_Check(r->f[RC_WAIT]) || !PySet_Check(r->f[RC_SELF_TIMED])
        || !PyDict_Check(r->f[RC_POPS]) || !PyDict_Check(r->f[RC_STALL]) || !PyDict_Check(r->f[RC_TBASE])
        || !PyDict_Check(r->f[RC_POLL_AGAIN]) || !PyDict_Check(r->f[RC_THAW_KEY]) || !PyDict_Check(r->f[RC_REG_PEEKS])
        || !runners_ok(r)) {
        PyErr_SetString(PyExc_TypeError, "round: a context of the wrong shape");
        return -1;
    }
    r->quantum = PyLong_AsLongLong(r->f[RC_QUANTUM]);
    if ((r->probe_at = PyObject_IsTrue(r->f[RC_PROBE_AT])) < 0 || (r->latency = PyObject_IsTrue(r->f[RC_LATENCY])) < 0
        || (r->mmio_exits = PyObject_IsTrue(r->f[RC_MMIO_EXITS])) < 0
        || (r->direct_push = PyObject_IsTrue(r->f[RC_DIRECT_PUSH])) < 0
        || (r->probe_native = PyObject_IsTrue(r->f[RC_PROBE_NATIVE])) < 0
        || (r->joined_runs = PyObject_IsTrue(r->f[RC_JOINED_RUNS])) < 0 || PyErr_Occurred())
        return -1;
    return 0;
}

/* Tile._round(left): *riscv and *progress, and the spinners (a new list), or NULL with an error set */
static PyObject *one_round(const round_ctx *r, long long left, long long *riscv, long long *progress) {
    /* least advanced first (sorted by Tile.cycles: stable, so ties keep the tile's order of cores) */
    long long cycles[ROUND_MAX_CORES];
    Py_ssize_t order[ROUND_MAX_CORES];
    for (Py_ssize_t i = 0; i < r->n_cores; i++) {
        if (round_cycles(r, i, &cycles[i]))
            return NULL;
        Py_ssize_t k = i;
        for (; k > 0 && cycles[order[k - 1]] > cycles[i]; k--)
            order[k] = order[k - 1];
        order[k] = i;
    }
    *riscv = *progress = 0;
    PyObject *spinners = PyList_New(0);
    for (Py_ssize_t k = 0; spinners && k < r->n_cores && *riscv < left; k++)
        if (round_turn(r, order[k], left, r->quantum, riscv, progress, spinners))
            Py_CLEAR(spinners);
    return spinners;
}

/* the Tensix's instructions per thread (tensix.instructions: 3 ints) into v; 0, or -1 with an error set */
static int tensix_counts(const round_ctx *r, long long v[3]) {
    PyObject *l = PyObject_GetAttr(r->f[RC_TENSIX], s_instructions);
    int bad = !l;
    for (Py_ssize_t t = 0; !bad && t < 3; t++) {
        PyObject *o = PySequence_GetItem(l, t);
        v[t] = o ? PyLong_AsLongLong(o) : -1;
        bad = !o || (v[t] == -1 && PyErr_Occurred());
        Py_XDECREF(o);
    }
    Py_XDECREF(l);
    return bad ? -1 : 0;
}

/* Tile._advance_clock: the tile's clock to the latest cycle of a core out of reset and of the Tensix's threads (its
 * cycle model's clock); 0, or -1 with an error set */
static int round_advance(const round_ctx *r) {
    PyObject *tile = r->f[RC_TILE];
    long long c, held;
    if (slot_ll(tile, SL_CLOCK, &c) || slot_ll(tile, SL_SOFT_RESET, &held))
        return -1;
    for (Py_ssize_t i = 0; i < r->n_cores; i++) {
        long long bit = PyLong_AsLongLong(PyTuple_GET_ITEM(r->f[RC_BITS], i)), t;
        if (bit == -1 && PyErr_Occurred())
            return -1;
        if (held & bit)
            continue;
        if (round_cycles(r, i, &t))
            return -1;
        if (t > c)
            c = t;
    }
    PyObject *tm = PyObject_GetAttr(r->f[RC_TENSIX], s_tm), *clock = NULL;     /* (getattr(tensix, "tm", None)) */
    if (!tm) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError))
            return -1;
        PyErr_Clear();
    }
    if (tm && tm != Py_None) {
        Py_ssize_t n = (clock = PyObject_GetAttr(tm, s_clock)) ? PySequence_Length(clock) : -1;
        for (Py_ssize_t t = 0; n >= 0 && t < n; t++) {
            PyObject *o = PySequence_GetItem(clock, t);
            long long v = o ? PyLong_AsLongLong(o) : -1;
            if (!o || (v == -1 && PyErr_Occurred()))
                n = -1;
            else if (v > c)
                c = v;
            Py_XDECREF(o);
        }
        Py_XDECREF(clock);
        if (n < 0) {
            Py_DECREF(tm);
            return -1;
        }
    }
    Py_XDECREF(tm);
    PyObject *c_o = PyLong_FromLongLong(c);
    int bad = !c_o || slot_set(tile, SL_CLOCK, c_o) < 0;
    Py_XDECREF(c_o);
    return bad ? -1 : 0;
}

/* Whether Tile._catch_up(spinners) has a core to move: some spinner neither frozen nor timed by its reads, in the
 * timed mode (it returns at once otherwise); 1 / 0, -1 with an error set */
static int untimed_spinners(const round_ctx *r, PyObject *spinners) {
    if (!r->latency)
        return 0;
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(spinners); k++) {
        PyObject *name = PyList_GET_ITEM(spinners, k);
        int frozen = PyDict_Contains(r->f[RC_FROZEN], name);
        int timed = frozen ? frozen : PySet_Contains(r->f[RC_SELF_TIMED], name);
        if (timed <= 0)
            return timed < 0 ? -1 : 1;
    }
    return 0;
}

/* run(context, max_instructions) -> the instructions retired: tile.py Tile.run's loop of rounds, each one_round
 * (_round), the Tensix stepped while busy, the spinners caught up (_catch_up, asked where it has one to move), the
 * clock advanced; a round where nothing progressed ends it through Tile._nothing_progressed. */
static PyObject *round_loop(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    round_ctx r;
    long long max_instructions = nargs == 2 ? PyLong_AsLongLong(args[1]) : 0, total = 0;
    if (nargs != 2 || PyErr_Occurred()) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "run_rounds(context: Tile._native_rounds' tuple, max_instructions)");
        return NULL;
    }
    if (round_ctx_from(args[0], &r))
        return NULL;
    while (total < max_instructions) {
        long long before[3], after[3], riscv, progress, tensix = 0;
        PyObject *spinners = tensix_counts(&r, before) ? NULL : one_round(&r, max_instructions - total, &riscv,
                                                                          &progress);
        if (!spinners)
            return NULL;
        int busy = round_busy(&r), bad = busy < 0;
        if (busy > 0) {
            PyObject *res = PyObject_CallMethodNoArgs(r.f[RC_TENSIX], s_step);
            bad = !res;
            Py_XDECREF(res);
        }
        if (!bad && !(bad = tensix_counts(&r, after)))
            for (int t = 0; t < 3; t++)
                tensix |= after[t] - before[t], total += after[t] - before[t];
        total += riscv;
        int loose = bad ? -1 : untimed_spinners(&r, spinners);
        bad = loose < 0;
        if (loose > 0) {
            PyObject *res = PyObject_CallMethodOneArg(r.f[RC_TILE], s_catch_up, spinners);
            bad = !res;
            Py_XDECREF(res);
        }
        bad = bad || round_advance(&r);
        if (!bad && progress == 0 && !tensix) {       /* everyone parked, spinning, in reset or blocked */
            PyObject *res = PyObject_CallMethodOneArg(r.f[RC_TILE], s_nothing_progressed, spinners);
            bad = !res;
            Py_XDECREF(res);
            Py_DECREF(spinners);
            if (bad)
                return NULL;
            break;
        }
        Py_DECREF(spinners);
        if (bad)
            return NULL;
    }
    return PyLong_FromLongLong(total);
}

/* tile_memo(on) -> None: whether load_timing keeps a tile's attributes between loads (timing_memo; rv32_native.py
 * TILE_MEMO_NATIVE sets it when the module loads, the tests both ways); off, the memo is dropped */
static PyObject *tile_memo(PyObject *self, PyObject *on) {
    (void)self;
    if (switch_set(on, &tile_memo_on))
        return NULL;
    timing_memo.tp = NULL, timing_memo.dict = NULL;
    Py_RETURN_NONE;
}

/* own_base(on) -> None: whether refresh_t0 computes the tile's own stamp base (own_stamp; rv32_native.py
 * OWN_BASE_NATIVE sets it when the module loads, the tests both ways) */
static PyObject *own_base(PyObject *self, PyObject *on) {
    (void)self;
    if (switch_set(on, &own_base_on))
        return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"tile_memo", tile_memo, METH_O, "tile_memo(on): whether bus loads keep the tile's rec and _latency_of reads"},
    {"own_base", own_base, METH_O, "own_base(on): whether run() computes the tile's own stamp base itself"},
    {"regs_memo", regs_memo, METH_O, "regs_memo(on): whether the register lists' objects are kept between quanta"},
    {"cycles_memo", cycles_memo_set, METH_O, "cycles_memo(on): whether the cores' tbase and stall values are kept"},
    {"takes_memo", takes_memo_set, METH_O, "takes_memo(on): whether plain_takes' answers are kept"},
    {"slots", slots, METH_O, "slots(on): whether the hot attributes are read and written at their members' offsets"},
    {"l1_at", (PyCFunction)(void (*)(void))l1_at, METH_FASTCALL,
     "l1_at(write log address, addr, n, cycle): L1 bytes as they were at cycle, None if the log cannot tell"},
    {"first_write_after", (PyCFunction)(void (*)(void))first_write, METH_FASTCALL,
     "first_write_after(write log address, addr, cycle): the first logged store to the word after cycle, or None"},
    {"probe", (PyCFunction)(void (*)(void))probe, METH_FASTCALL,
     "probe(state address, x, pc, cycle, sbase, peek, name): spin_reads' answer for a loop that only loads, or "
     "NotImplemented"},
    {"peek_words", (PyCFunction)(void (*)(void))peek_words, METH_FASTCALL,
     "peek_words(write log address, reads, cycle): each L1 word of reads as of cycle where the log tells, else now"},
    {"thaw", (PyCFunction)(void (*)(void))thaw, METH_FASTCALL,
     "thaw(write log address, reads, seen, cycle, last key, peek, who): a frozen loop's new key and resume "
     "cycle (or None)"},
    {"begin", (PyCFunction)(void (*)(void))begin, METH_FASTCALL,
     "begin(state address, x, pc, budget, multi_push, causal): a quantum's registers, pc and counters into the state"},
    {"end", (PyCFunction)(void (*)(void))end, METH_FASTCALL,
     "end(state address, x): the state's registers back into the list x"},
    {"run", (PyCFunction)(void (*)(void))run, METH_FASTCALL,
     "run(state address, bus calls, direct push, NIU loads, sends): the core runs until its budget, a spin, parking, "
     "a stall or a hand-back"},
    {"run_rounds", (PyCFunction)(void (*)(void))round_loop, METH_FASTCALL,
     "run_rounds(context, max_instructions): tile.py Tile.run's rounds in one call: the instructions retired"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "rv32_native", NULL, -1, methods};

PyMODINIT_FUNC PyInit_rv32_native(void) {
    if (!(s_pos = PyUnicode_InternFromString("pos")) || !(s_sub = PyUnicode_InternFromString("sub"))
        || !(s_mm_record = PyUnicode_InternFromString("mm_record"))
        || !(s_pm_done = PyUnicode_InternFromString("pm_done")) || !(s_pm_t = PyUnicode_InternFromString("pm_t"))
        || !(s_sem_value = PyUnicode_InternFromString("sem_value"))
        || !(s_sem_posts = PyUnicode_InternFromString("sem_posts")) || !(s_rec = PyUnicode_InternFromString("rec"))
        || !(s_latency_of = PyUnicode_InternFromString("_latency_of"))
        || !(s_thread_idle = PyUnicode_InternFromString("thread_idle"))
        || !(s_thread_done = PyUnicode_InternFromString("thread_done"))
        || !(s_done = PyUnicode_InternFromString("done"))
        || !(s_macro_threads = PyUnicode_InternFromString("macro_threads"))
        || !(s_work_done = PyUnicode_InternFromString("work_done"))
        || !(s_sfpu = PyUnicode_InternFromString("sfpu"))
        || !(s_busy_until = PyUnicode_InternFromString("busy_until"))
        || !(s_sem_mmio_write = PyUnicode_InternFromString("sem_mmio_write"))
        || !(s_sem_max = PyUnicode_InternFromString("sem_max")) || !(s_strict = PyUnicode_InternFromString("strict"))
        || !(s_tm = PyUnicode_InternFromString("tm")) || !(s_event_t = PyUnicode_InternFromString("event_t"))
        || !(s_popleft = PyUnicode_InternFromString("popleft")) || !(s_append = PyUnicode_InternFromString("append"))
        || !(s_instret = PyUnicode_InternFromString("instret"))
        || !(s_parked = PyUnicode_InternFromString("parked"))
        || !(s_spinning = PyUnicode_InternFromString("spinning"))
        || !(s_soft_reset = PyUnicode_InternFromString("soft_reset"))
        || !(s_python_quanta = PyUnicode_InternFromString("python_quanta"))
        || !(s_pc = PyUnicode_InternFromString("pc"))
        || !(s_past_in_c = PyUnicode_InternFromString("past_in_c"))
        || !(s_calls = PyUnicode_InternFromString("calls"))
        || !(s_bus_calls = PyUnicode_InternFromString("_bus_calls"))
        || !(s_resume = PyUnicode_InternFromString("resume"))
        || !(s_run = PyUnicode_InternFromString("run"))
        || !(s_thaw_m = PyUnicode_InternFromString("_thaw"))
        || !(s_thaw_in_python = PyUnicode_InternFromString("_thaw_in_python"))
        || !(s_freeze = PyUnicode_InternFromString("_freeze"))
        || !(s_probe_attr = PyUnicode_InternFromString("_probe"))
        || !(s_peek = PyUnicode_InternFromString("peek"))
        || !(s_peek_words = PyUnicode_InternFromString("_peek_words"))
        || !(s_times_its_reads = PyUnicode_InternFromString("_times_its_reads"))
        || !(s_core_failed = PyUnicode_InternFromString("_core_failed"))
        || !(s_threads = PyUnicode_InternFromString("threads"))
        || !(s_fifo = PyUnicode_InternFromString("fifo"))
        || !(s_mop_out = PyUnicode_InternFromString("mop_out"))
        || !(s_ready = PyUnicode_InternFromString("ready"))
        || !(s_step = PyUnicode_InternFromString("step"))
        || !(s_empty = PyUnicode_InternFromString(""))
        || !(s_pushm_key = PyUnicode_InternFromString("PUSHM"))
        || !(s_past_key = PyUnicode_InternFromString("PAST"))
        || !(s_sbase_key = PyUnicode_InternFromString("SBASE"))
        || !(s_instructions = PyUnicode_InternFromString("instructions"))
        || !(s_clock = PyUnicode_InternFromString("clock")) || !(s_catch_up = PyUnicode_InternFromString("_catch_up"))
        || !(s_nothing_progressed = PyUnicode_InternFromString("_nothing_progressed"))
        || !(four = PyLong_FromLong(4)) || !(zero = PyLong_FromLong(0)))
        return NULL;
    return PyModule_Create(&module);
}
