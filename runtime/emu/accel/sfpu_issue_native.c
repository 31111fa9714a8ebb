/* The Tensix's issue of the words a core pushes one at a time, in C (loaded by sfpu_issue_native.py): the SFPU words
 * (issue_run; push_word for one pushed by its own push(); ready_run for those a REPLAY put in the ready queue;
 * pack_records; find_period, mop_batch's period search) and the others (plain_run, drain_run, further below).
 *
 * A CPython extension module. Its hot function, issue_run: for a run of `.ttinsn` words pushed to a thread whose
 * frontend is empty (no FIFO, MOP or ready words, no REPLAY load), it does for each deferrable SFPU word what
 * deferral.py's push_many (and, for SFPLOAD / SFPSTORE, push() and DeferralMixin.defer) does: the FIFO accepts it and
 * the MOP expander takes it (cycles.TensixTiming.accept_take), the cycle model issues it (TensixTiming.issue_sfpu with
 * SfpuTiming.regular and, for a load, sfpload_hazard), the deferral's abstract lane-flag state follows it, its data
 * effect is appended to the deferred queue (as the same tuple to a list, as a record to a DeferredQueue:
 * sfpu_queue.c), and for a Dst access its address is resolved, a store's
 * rows are marked written and the RWC address modifier applies (TensixFpu.apply_addr_mod without the fidelity
 * phase). It stops, with nothing changed for that word, at the first word it was not given facts for (cword), at a
 * word the Wait Gate's latch holds, at a full queue, and wherever the Python path raises or does more (a strict error
 * of SfpuTiming.regular or sfpload_hazard, a strict load of Dst rows not all written, a Dst access defer() does not
 * queue, an address modifier apply_addr_mod refuses): the Python path then takes that word. The cycle model's state
 * is read once per call and written back once.
 * pack_records turns a run of the deferred queue's entries into the records sfpu_native.c executes, in one call.
 * Python stays the reference (tests/emu/test_sfpu_issue_native.py pins cycles, queue and bits to it; for plain_run
 * and drain_run, tests/emu/test_direct_issue.py).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>
#include "py_tags.h"      /* dict_version, type_tag: the memos' validity */
#include "py_switch.h"    /* switch_set: the switch setters (this file's and tile_handlers.c's) */

#define MAX_DEPTH 64
#include "timing_state.c"     /* ThreadTiming: the cycle model's per-thread issue state, and its views */

/* Per-word facts, packed by sfpu_issue_native.word_facts in this order (little-endian int64s). */
typedef struct {
    int64_t block, reads, seen, writes, mad, two_cycle, indirect, is_nop;
    int64_t ftab;          /* -1: no flag write; else 4 bits per entry state lf * 3 + use: the state after it */
    int64_t is_mem, is_store, reads_dst, imm, amode, vd, mod0;    /* SFPLOAD / SFPSTORE: Dst access */
} word_facts;

static int depth = 28, mop_penalty = 1, dst_rwc_mask = 1023, src_rwc_mask = 63, fpu_to_sfpload_gap = 4;
/* getattr / setattr through the instance's dict or slot where no class defines the name (below: cheaper than
 * PyObject_GetAttr's generic lookup, the same answers) */
static PyObject *get_attr(PyObject *o, PyObject *name);
/* attribute names interned once at module start: a table of (where to keep it, its name); 0, or -1 with an error set
 * (used here and by the included tile_handlers.c and mop_batch_native.c) */
typedef struct { PyObject **p; const char *s; } name_ref;
static int intern_names(const name_ref *names, size_t n) {
    for (size_t k = 0; k < n; k++)
        if (!(*names[k].p = PyUnicode_InternFromString(names[k].s)))
            return -1;
    return 0;
}
#define INTERN_NAMES(table) intern_names((table), sizeof (table) / sizeof (table)[0])
static int set_attr(PyObject *o, PyObject *name, PyObject *v);
/* the offset of the __slots__ member (an object slot; a writable one if asked) the class attribute `descr` describes,
 * else -1 */
static Py_ssize_t member_offset(PyObject *descr, int writable) {
    if (!descr || !Py_IS_TYPE(descr, &PyMemberDescr_Type))
        return -1;
    PyMemberDef *m = ((PyMemberDescrObject *)descr)->d_member;
    return m->type == T_OBJECT_EX && !(writable && (m->flags & READONLY)) ? m->offset : -1;
}

/* the offset of the writable __slots__ member `name` of tp, or -1 where it is not one */
static Py_ssize_t slot_offset(PyTypeObject *tp, PyObject *name) {
    return member_offset(_PyType_Lookup(tp, name), 1);
}

/* The offsets of a few writable __slots__ members of one class, kept while the class keeps its version tag (any
 * change of a class in its MRO changes it, and no two classes get the same one): the thread's (th_slot) and the
 * latch's (new_latch) */
#define SLOT_LAYOUT_MOST 9
typedef struct { PyTypeObject *tp; unsigned int tag; Py_ssize_t off[SLOT_LAYOUT_MOST]; } slot_layout;

/* whether l describes tp as it is now */
static int slot_layout_current(const slot_layout *l, PyTypeObject *tp) {
    return tp == l->tp && l->tag && type_tag(tp) == l->tag;
}

/* 1 with l describing tp's members `names` (n <= SLOT_LAYOUT_MOST; resolved where l did not describe tp as it is
 * now), 0 where one of them is not a writable object slot of tp (l unchanged) */
static int slot_layout_of(slot_layout *l, PyTypeObject *tp, PyObject **const *names, int n) {
    if (slot_layout_current(l, tp))
        return 1;
    Py_ssize_t off[SLOT_LAYOUT_MOST];
    for (int i = 0; i < n; i++)
        if ((off[i] = slot_offset(tp, *names[i])) < 0)
            return 0;
    unsigned int tag = type_tag(tp);         /* (_PyType_Lookup gave it one where it can have one) */
    if (!tag)
        return 0;
    l->tp = tp, l->tag = tag;
    memcpy(l->off, off, (size_t)n * sizeof *off);
    return 1;
}
static int64_t all_lregs = (1 << 17) - 1, load_modes = 0, store_modes = 0;   /* modes: bit per 32-bit Dst mode */
static PyObject *zero;            /* the queue entry's unused Dst base */
static PyObject *s_mad_cycle, *s_mad_writes, *s_mad_macro, *s_nop_only_cycle, *s_busy_until, *s_strict, *s_append;
static PyObject *rwc_keys[6];     /* "a", "a_cr", "b", "b_cr", "d", "d_cr" */

static PyObject *configure(PyObject *self, PyObject *args) {
    if (!PyArg_ParseTuple(args, "iiLLLiii", &depth, &mop_penalty, &all_lregs, &load_modes, &store_modes,
                          &dst_rwc_mask, &src_rwc_mask, &fpu_to_sfpload_gap))
        return NULL;
    if (depth < 1 || depth > MAX_DEPTH) {
        PyErr_Format(PyExc_ValueError, "FIFO depth %d outside 1..%d", depth, MAX_DEPTH);
        return NULL;
    }
    Py_RETURN_NONE;
}

/* get_ll's general case: any int (PyLong_AsLongLong), a TypeError naming `what` otherwise */
static int get_ll_slow(PyObject *o, const char *what, long long *out) {
    *out = PyLong_AsLongLong(o);
    if (*out == -1 && PyErr_Occurred()) {
        PyErr_Format(PyExc_TypeError, "sfpu_issue: %s is not an integer", what);
        return -1;
    }
    return 0;
}

/* *out = the int o, 0; -1 with a TypeError naming `what`. The small int read in line at every call (gcc kept the whole
 * function out of line: ~24 instructions a call, three a pushed word in push_fast alone), the rest out of line. */
__attribute__((always_inline)) static inline int get_ll(PyObject *o, const char *what, long long *out) {
    if (PyLong_CheckExact(o)) {     /* cycles, words, config words read here: before 3.12 an int of at most two
                                     * 30-bit digits, from 3.12 a compact (one-digit) int */
#if PY_VERSION_HEX >= 0x030C0000
        if (PyUnstable_Long_IsCompact((PyLongObject *)o)) {
            *out = PyUnstable_Long_CompactValue((PyLongObject *)o);
            return 0;
        }
#else
        Py_ssize_t size = Py_SIZE(o);
        const digit *d = ((PyLongObject *)o)->ob_digit;
        if (size >= -1 && size <= 1) {
            *out = size * (long long)d[0];
            return 0;
        }
        if (size == 2 || size == -2) {
            long long v = (long long)d[0] | (long long)d[1] << PyLong_SHIFT;
            *out = size > 0 ? v : -v;
            return 0;
        }
#endif
    }
    return get_ll_slow(o, what, out);
}

static int attr_ll(PyObject *o, PyObject *name, long long *out) {
    PyObject *v = get_attr(o, name);
    if (!v)
        return -1;
    *out = PyLong_AsLongLong(v);
    Py_DECREF(v);
    if (*out == -1 && PyErr_Occurred()) {
        PyErr_Format(PyExc_TypeError, "sfpu_issue: %U is not an integer", name);
        return -1;
    }
    return 0;
}

static int set_attr_ll(PyObject *o, PyObject *name, long long v) {
    PyObject *p = PyLong_FromLongLong(v);
    if (!p)
        return -1;
    int r = set_attr(o, name, p);
    Py_DECREF(p);
    return r;
}

static int set_item_ll(PyObject *list, Py_ssize_t i, long long v) {
    ThreadTiming *s = row_state(list);            /* (a row of the cycle model's C state) */
    if (s)
        return row_set_ll(s, list, i, v);
    PyObject *p = PyLong_FromLongLong(v);
    return p ? PyList_SetItem(list, i, p) : -1;      /* (steals p) */
}

/* seq.name(*args) (n of them, at most 1), as PyObject_VectorcallMethod answers it: for a type that cannot change (the
 * FIFO records and queues are collections.deque) the method's descriptor is looked up once and called (the method
 * look-up had cost more than the append or popleft itself); a METH_O or METH_NOARGS method (deque's append and
 * popleft) through its C function, which the descriptor's vectorcall would call after checking the argument count
 * this call fixes (that dispatch had cost ~90 of the ~140 x86 instructions of a ready queue's append or popleft) */
typedef struct { PyTypeObject *tp; PyObject *descr; PyCFunction meth; int flags; } method_memo;
static PyObject *memo_call(method_memo *m, PyObject *name, PyObject *seq, PyObject *const *args, size_t n) {
    PyTypeObject *tp = Py_TYPE(seq);
    if (tp != m->tp && PyType_HasFeature(tp, Py_TPFLAGS_IMMUTABLETYPE)) {
        PyObject *d = _PyType_Lookup(tp, name);
        if (d && Py_IS_TYPE(d, &PyMethodDescr_Type)) {     /* called with seq as self below */
            PyMethodDef *def = ((PyMethodDescrObject *)d)->d_method;
            Py_INCREF(tp);
            Py_XSETREF(m->tp, tp);
            Py_XSETREF(m->descr, Py_NewRef(d));
            m->meth = def->ml_meth, m->flags = def->ml_flags;
        }
    }
    PyObject *stack[2] = {seq, n ? args[0] : NULL};
    if (tp != m->tp)
        return PyObject_VectorcallMethod(name, stack, (n + 1) | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    if (m->flags == (n ? METH_O : METH_NOARGS))
        return m->meth(seq, stack[1]);
    return PyObject_Vectorcall(m->descr, stack, n + 1, NULL);
}

static method_memo append_memo;
static PyObject *append_call(PyObject *seq, PyObject *v) {
    return memo_call(&append_memo, s_append, seq, &v, 1);
}

/* TensixFpu._upd of one RWC (r[0] the counter, r[1] its _Cr shadow); -1 where it raises (nothing changed). */
static int upd(long long *r, long long incr, int clear, int cr, int c_to_cr, long long mask) {
    if (c_to_cr) {
        if (clear || cr)
            return -1;
        r[0] = r[1] = (r[0] + incr) & mask;
    } else if (clear) {
        r[0] = r[1] = 0;
    } else if (cr) {
        r[0] = r[1] = (r[1] + incr) & mask;
    } else {
        r[0] = (r[0] + incr) & mask;
    }
    return 0;
}

/* sfpu_native.c's record of a word (an 8-tuple of ints, sfpu_native.record) into out; -1 with an exception set */
static int record_ints(PyObject *r, int32_t out[8]) {
    if (!PyTuple_Check(r) || PyTuple_GET_SIZE(r) != 8) {
        PyErr_SetString(PyExc_TypeError, "sfpu_issue: an SFPU record of the wrong shape");
        return -1;
    }
    for (int k = 0; k < 8; k++) {
        long v = PyLong_AsLong(PyTuple_GET_ITEM(r, k));
        if (v == -1 && PyErr_Occurred())
            return -1;
        out[k] = (int32_t)v;
    }
    return 0;
}

/* a word's record looked up in records (sfpu_native's table: word -> record, None for a word it does not run) into out:
 * 1, or 0 where it has none (the packed run stops there), -1 with an exception set */
static int lookup_record(PyObject *records, PyObject *word, int32_t out[8]) {
    PyObject *r = PyDict_GetItemWithError(records, word);
    if (!r)
        return PyErr_Occurred() ? -1 : 0;
    if (r == Py_None)
        return 0;
    return record_ints(r, out) < 0 ? -1 : 1;
}

#include "sfpu_queue.c"     /* DeferredQueue: the deferred queue as packed records */

#define DQ_SIZE(dq) (dq_is_queue(dq) ? ((DeferredQueue *)(dq))->n : PyList_GET_SIZE(dq))

/* A word's C facts (cword[word]: name, fields, packed word_facts) by its value, for the issue loop (sfpu_run_io) and
 * its callers' first look: a dict look-up of an SFPU word (a large int key: its hash and the probe) cost ~300 x86
 * instructions, a tenth of tile_long's; this memo's ~30. Open addressing over 4 slots of 1,024, valid while `cword` is
 * the dict it was filled from with the version tag it had then (it changes when a word is first decoded or the SFPU
 * is replaced); emptied otherwise, by a new epoch (a slot of an older one is free: clearing the table each time had
 * cost a first tile's 150 new words 2 M instructions); the records are borrowed (the dict holds them while its
 * version stands). Off (WORD_MEMO_NATIVE, TT_EMU_WORD_MEMO_NATIVE=0; read with the push switches, entry_read): the
 * dict look-up each time. */
#define CWORD_MEMO 1024      /* (a power of 2) */
#define CWORD_PROBES 4
static struct {
    PyObject *d;
    uint64_t v, epoch;              /* (the slots start in epoch 0, the first fill makes it 1) */
    struct { uint64_t epoch; uint32_t w; PyObject *rec; } e[CWORD_MEMO];
    long long hits;                 /* look-ups the memo answered (word_memo_hits: tests see it used) */
} cword_memo;
static int word_memo_on(void);

/* the word of an int object (exact, 0 <= w < 2^32) into *w: 1, else 0 (no error) */
static int word_value(PyObject *o, uint32_t *w) {
#if DICT_TAGS          /* (before 3.12: the sign in ob_size, 30-bit digits) */
    Py_ssize_t size = PyLong_CheckExact(o) ? Py_SIZE(o) : -1;
    if (size < 0 || size > 2)
        return 0;
    const digit *d = ((PyLongObject *)o)->ob_digit;
    unsigned long long v = size == 0 ? 0 : size == 1 ? d[0] : d[0] | (unsigned long long)d[1] << PyLong_SHIFT;
    *w = (uint32_t)v;
    return v <= 0xFFFFFFFFull;
#else
    (void)o, (void)w;
    return 0;
#endif
}

/* The memo made valid for `cword` (emptied by a new epoch where it is another dict or its version tag changed) */
static inline void cword_memo_for(PyObject *cword) {
    if (cword_memo.d != cword || dict_version(cword) != cword_memo.v) {
        cword_memo.d = cword, cword_memo.v = dict_version(cword);
        cword_memo.epoch++;
    }
}

/* cword[word] through the memo (w: the word's value, word_value), borrowed; NULL where it has none, with an error set
 * where the look-up failed */
static inline PyObject *cword_memo_find(PyObject *cword, PyObject *word, uint32_t w) {
    cword_memo_for(cword);
    uint32_t k = (uint32_t)(w * 0x9E3779B1u) >> 22;
    int free = -1;
    for (int j = 0; j < CWORD_PROBES; j++) {
        int i = (int)((k + (uint32_t)j) % CWORD_MEMO);
        if (cword_memo.e[i].epoch != cword_memo.epoch) {
            free = i;
            break;
        }
        if (cword_memo.e[i].w == w) {
            cword_memo.hits++;
            return cword_memo.e[i].rec;
        }
    }
    PyObject *rec = PyDict_GetItemWithError(cword, word);
    if (rec && free >= 0) {         /* (all four slots taken: not kept) */
        cword_memo.e[free].epoch = cword_memo.epoch;
        cword_memo.e[free].w = w, cword_memo.e[free].rec = rec;
    }
    return rec;
}

/* The records of the last words tuple issued (push_many's run: rv32_native.c hands a loop body's run as the same tuple
 * each turn), by position, with each word's value: a word's look-up in the memo above (its value read, the hash, the
 * probes) had cost ~45 x86 instructions, its slot here ~10. Valid while `words` is that tuple (held, so that no other
 * takes its address) and `cword` the dict the records came from with the version tag it had then (a new epoch
 * otherwise); under the word memo's switch. Runs longer than BLOCK_MEMO words or shorter than BLOCK_MEMO_MIN (a
 * drain's or a short push's, seldom the same tuple again) use the memo above alone: holding those had changed which
 * allocator pools the one-word pushes' ints land in (sfpu_long: a new pool ~ every word, +1.5 M instructions a call). */
#define BLOCK_MEMO 512
#define BLOCK_MEMO_MIN 16
static struct {
    PyObject *words, *cword;
    uint64_t v, epoch;
    uint64_t filled[BLOCK_MEMO];        /* the epoch in which slot j was filled */
    PyObject *rec[BLOCK_MEMO];          /* (borrowed from cword, as the memo above) */
    uint32_t w[BLOCK_MEMO];
} block_memo;

/* the block memo made valid for `words` (a tuple of n words) and `cword`: 1, or 0 where it does not take the run */
static int block_memo_for(PyObject *words, Py_ssize_t n, PyObject *cword) {
    if (!DICT_TAGS || n > BLOCK_MEMO || n < BLOCK_MEMO_MIN)
        return 0;
    if (block_memo.words != words || block_memo.cword != cword || block_memo.v != dict_version(cword)) {
        Py_XSETREF(block_memo.words, Py_NewRef(words));
        block_memo.cword = cword, block_memo.v = dict_version(cword);
        block_memo.epoch++;
    }
    return 1;
}

/* cword[word], borrowed; NULL where it has none, with an error set where the look-up (or the switch's read) failed */
static PyObject *cword_rec(PyObject *cword, PyObject *word) {
    uint32_t w;
    int on = word_value(word, &w) ? word_memo_on() : 0;
    if (on <= 0)
        return on < 0 ? NULL : PyDict_GetItemWithError(cword, word);
    return cword_memo_find(cword, word, w);
}

/* word_memo_hits(): the look-ups cword_rec's memo answered since the module was loaded */
static PyObject *word_memo_hits(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    return PyLong_FromLongLong(cword_memo.hits);
}

/* The deferred queue's entry of word w (rec: its cword record), as push_many / defer build it: (w, name, fields,
 * None or (is_store, vd, mode, addr) of a Dst access, Dst base, issue cycle c, cfg0, cfg1, thread). Filled in place
 * (PyTuple_Pack's and Py_BuildValue's argument handling cost more than the rest of a word's issue). */
static PyObject *queue_entry(PyObject *w, PyObject *rec, const word_facts *f, long long mode, long long addr,
                             long long dst_base, long long c, PyObject *cfg0, PyObject *cfg1, PyObject *thobj) {
    PyObject *e = PyTuple_New(9), *mem = f->is_mem ? PyTuple_New(4) : Py_NewRef(Py_None);
    PyObject *c_o = PyLong_FromLongLong(c), *base = f->is_mem ? PyLong_FromLongLong(dst_base) : Py_NewRef(zero);
    if (!e || !mem || !c_o || !base) {
        Py_XDECREF(e), Py_XDECREF(mem), Py_XDECREF(c_o), Py_XDECREF(base);
        return NULL;
    }
    if (f->is_mem) {
        PyObject *vd = PyLong_FromLongLong(f->vd), *mo = PyLong_FromLongLong(mode), *ad = PyLong_FromLongLong(addr);
        PyTuple_SET_ITEM(mem, 0, Py_NewRef(f->is_store ? Py_True : Py_False));
        PyTuple_SET_ITEM(mem, 1, vd);
        PyTuple_SET_ITEM(mem, 2, mo);
        PyTuple_SET_ITEM(mem, 3, ad);
        if (!vd || !mo || !ad) {
            Py_DECREF(e), Py_DECREF(mem), Py_DECREF(c_o), Py_DECREF(base);
            return NULL;
        }
    }
    PyObject *items[9] = {Py_NewRef(w), Py_NewRef(PyTuple_GET_ITEM(rec, 0)), Py_NewRef(PyTuple_GET_ITEM(rec, 1)),
                          mem, base, c_o, Py_NewRef(cfg0), Py_NewRef(cfg1), Py_NewRef(thobj)};
    for (int k = 0; k < 9; k++)
        PyTuple_SET_ITEM(e, k, items[k]);
    return e;
}

/* The Vector Unit's timing state (cycles.SfpuTiming, a class with __slots__, or sfpu_timing_class()'s, whose fields but
 * `strict` are timing_state.c's SfpuTimingState members) is read and written at its members' offsets, which their
 * member descriptors give (getattr / setattr cost more than a whole pushed word's issue otherwise): resolved once per
 * class, checked on every call. Order: mad_cycle, mad_writes, mad_macro, nop_only_cycle, busy_until, strict. */
enum { T_MAD_CYCLE, T_MAD_WRITES, T_MAD_MACRO, T_NOP_ONLY, T_BUSY, T_STRICT, N_TIMING };
static PyTypeObject *timing_type;
static Py_ssize_t timing_off[N_TIMING];
static int timing_kind[N_TIMING];      /* the member's type: T_OBJECT_EX (a __slots__ member), T_LONGLONG or T_BOOL */

static int timing_slots(PyObject *st) {
    PyTypeObject *tp = Py_TYPE(st);
    if (tp == timing_type)
        return 0;
    PyObject *names[N_TIMING] = {s_mad_cycle, s_mad_writes, s_mad_macro, s_nop_only_cycle, s_busy_until, s_strict};
    Py_ssize_t off[N_TIMING];
    int kind[N_TIMING];
    for (int k = 0; k < N_TIMING; k++) {
        PyObject *d = _PyType_Lookup(tp, names[k]);        /* (borrowed) */
        PyMemberDef *m = d && Py_IS_TYPE(d, &PyMemberDescr_Type) ? ((PyMemberDescrObject *)d)->d_member : NULL;
        if (!m || (m->flags & READONLY) || (m->type != T_OBJECT_EX && m->type != T_LONGLONG && m->type != T_BOOL)) {
            PyErr_Format(PyExc_TypeError, "sfpu_issue: %s.%U is not a __slots__ or C member", tp->tp_name, names[k]);
            return -1;
        }
        off[k] = m->offset, kind[k] = m->type;
    }
    memcpy(timing_off, off, sizeof off);
    memcpy(timing_kind, kind, sizeof kind);
    Py_INCREF(tp);
    Py_XSETREF(timing_type, tp);
    return 0;
}

__attribute__((always_inline)) static inline int slot_ll(PyObject *st, int k, long long *out) {
    char *p = (char *)st + timing_off[k];
    if (timing_kind[k] != T_OBJECT_EX) {
        *out = timing_kind[k] == T_BOOL ? *p : *(long long *)p;
        return 0;
    }
    PyObject *v = *(PyObject **)p;
    if (!v) {
        PyErr_SetString(PyExc_AttributeError, "sfpu_issue: an SfpuTiming slot is unset");
        return -1;
    }
    if (PyBool_Check(v)) {      /* (`strict`, a bool in every class: get_ll's general case had read it, ~35 a call) */
        *out = v == Py_True;
        return 0;
    }
    return get_ll(v, "SfpuTiming slot", out);
}

/* the member's value as an object (a new reference, NULL with an error set) */
static PyObject *slot_obj(PyObject *st, int k) {
    char *p = (char *)st + timing_off[k];
    if (timing_kind[k] == T_BOOL)
        return PyBool_FromLong(*p);
    if (timing_kind[k] == T_LONGLONG)
        return PyLong_FromLongLong(*(long long *)p);
    PyObject *v = *(PyObject **)p;
    if (!v)
        PyErr_SetString(PyExc_AttributeError, "sfpu_issue: an SfpuTiming slot is unset");
    return Py_XNewRef(v);
}

static int set_slot(PyObject *st, int k, PyObject *v) {      /* (steals v) */
    if (!v)
        return -1;
    char *p = (char *)st + timing_off[k];
    if (timing_kind[k] == T_OBJECT_EX) {
        Py_XSETREF(*(PyObject **)p, v);
        return 0;
    }
    long long x;
    int bad = timing_kind[k] == T_BOOL ? (x = PyObject_IsTrue(v)) < 0 : get_ll(v, "SfpuTiming member", &x);
    Py_DECREF(v);
    if (bad)
        return -1;
    if (timing_kind[k] == T_BOOL)
        *p = (char)x;
    else
        *(long long *)p = x;
    return 0;
}

/* set_slot of the integer v (mad_macro: its truth); the member cases in line (the issue writes busy_until for most
 * words) */
__attribute__((always_inline)) static inline int set_slot_ll(PyObject *st, int k, long long v) {
    char *p = (char *)st + timing_off[k];
    if (timing_kind[k] == T_LONGLONG) {
        *(long long *)p = v;
        return 0;
    }
    if (timing_kind[k] == T_BOOL) {
        *p = v != 0;
        return 0;
    }
    return set_slot(st, k, k == T_MAD_MACRO ? PyBool_FromLong(v != 0) : PyLong_FromLongLong(v));
}

/* issue_run(ctx, words, j, t, thread, cword, dq, flags, cfg0, cfg1, thread_obj, was_blocked, event_t, dq_max,
 *           latch_block, mem)
 * ctx: (clock, fe, gate, after_mop, first, stalls, issued, taken, sfpu timing) of the cycle model;
 * cword: word -> (name, fields, packed word_facts); flags: the deferral's lane-flag state, lf * 3 + use (2 = mixed);
 * latch_block: the block mask of the Wait Gate's latched wait instruction (0: none), which holds a word it blocks;
 * mem: None (stop at SFPLOAD / SFPSTORE), or (the thread's ThreadConfig list, its RWC dict, Dst's rows-written bool
 * array, the cycle model's dst_fpu_write dict, the mode Mod0 0 resolves to).
 * Returns None when words[j] is not taken, else (next j, next push time, last issue cycle, flags, index of the last
 * SFPLOAD / SFPSTORE taken or -1). sfpu_run is issue_run (pushed), push_word (pushed, `words` one word, below) and
 * ready_run (not pushed, below). */
typedef struct {
    PyObject *rec0;                   /* in: words[j]'s C facts where the caller has them (borrowed), else NULL */
    int c_in;                         /* in: the integer arguments are these fields (j, t, fl, th, ...), not args' */
    int was_blocked;
    long long th, event_t, dq_max, latch_block, cfg0, cfg1;
    long long j, t, last_c, fl, last_mem;   /* out: the result's items, where it was taken (in: with c_in) */
} run_io;
static PyObject *sfpu_run_io(PyObject *const *args, Py_ssize_t nargs, int pushed, int one_word, run_io *io);
static PyObject *sfpu_run(PyObject *const *args, Py_ssize_t nargs, int pushed, int one_word) {
    return sfpu_run_io(args, nargs, pushed, one_word, NULL);
}

/* The body below is compiled twice: here for every caller, and inlined in push_fast (push_memo.c), where a word
 * pushed on its own (most of bench emu's sfpu_long) has its constants folded in: one word, pushed, its C arguments
 * in io, so the one-pass loop and the tests these decide go (callgrind: ~140 x86 instructions a word) */
static PyObject *sfpu_run_body(PyObject *const *args, Py_ssize_t nargs, int pushed, int one_word, run_io *io);
static PyObject *sfpu_run_io(PyObject *const *args, Py_ssize_t nargs, int pushed, int one_word, run_io *io) {
    return sfpu_run_body(args, nargs, pushed, one_word, io);
}

/* sfpu_run with, where io is given, the first word's C facts from io and its result in io (Py_True where it took
 * words: no result tuple; push_memo.c's caller) */
__attribute__((always_inline)) static inline PyObject *sfpu_run_body(PyObject *const *args, Py_ssize_t nargs,
                                                                     int pushed, int one_word, run_io *io) {
    if (nargs != 16) {
        PyErr_SetString(PyExc_TypeError, "issue_run / ready_run take 16 arguments");
        return NULL;
    }
    PyObject *ctx = args[0], *words = args[1], *cword = args[5], *dq = args[6];
    PyObject *cfg0 = args[8], *cfg1 = args[9], *thobj = args[10], *mem = args[15];
    long long j0, t, th, fl, event_t, dq_max, latch_block;
    int was_blocked, c_in = io && io->c_in;
    if (c_in) {                       /* (push_fast: no ints made to be read back here) */
        j0 = io->j, t = io->t, th = io->th, fl = io->fl, event_t = io->event_t, dq_max = io->dq_max;
        latch_block = io->latch_block, was_blocked = io->was_blocked;
    } else {
        if (get_ll(args[2], "j", &j0) || get_ll(args[3], "t", &t) || get_ll(args[4], "thread", &th)
            || get_ll(args[7], "flags", &fl) || get_ll(args[12], "event_t", &event_t)
            || get_ll(args[13], "dq_max", &dq_max) || get_ll(args[14], "latch_block", &latch_block))
            return NULL;
        was_blocked = PyObject_IsTrue(args[11]);
    }
    if (!PyTuple_Check(ctx) || PyTuple_GET_SIZE(ctx) != 9 || !(one_word || PyTuple_Check(words)) || !PyDict_Check(cword)
        || !(PyList_Check(dq) || dq_is_queue(dq)) || was_blocked < 0 || th < 0 || th > 2
        || (mem != Py_None
            && (!PyTuple_Check(mem) || PyTuple_GET_SIZE(mem) != 5 || !PyList_Check(PyTuple_GET_ITEM(mem, 0))
                || PyList_GET_SIZE(PyTuple_GET_ITEM(mem, 0)) < 64 || !PyDict_Check(PyTuple_GET_ITEM(mem, 1))
                || !PyDict_Check(PyTuple_GET_ITEM(mem, 3))))) {
        PyErr_SetString(PyExc_TypeError, "issue_run: arguments of the wrong kind");
        return NULL;
    }
    PyObject *const *wv = one_word ? &args[1] : &PyTuple_GET_ITEM(words, 0);
    Py_ssize_t n = one_word ? 1 : PyTuple_GET_SIZE(words), j = (Py_ssize_t)j0;
    /* the common refusal (a word not seen yet, a full queue; the cycle model's state in Python lists,
     * TT_EMU_TIMING_NATIVE=0: Python's path) answered before the state is read */
    ThreadTiming *S = row_state(PyTuple_GET_ITEM(ctx, 0));
    if (j < 0 || j >= n || DQ_SIZE(dq) >= dq_max || !S || S->depth != depth)
        Py_RETURN_NONE;
    /* a DeferredQueue's records hold config words 0 and 1 and the thread as integers */
    long long cfg0_v = 0, cfg1_v = 0, thread_v = 0;
    if (c_in)
        cfg0_v = io->cfg0, cfg1_v = io->cfg1, thread_v = th;
    else if (dq_is_queue(dq) && (get_ll(cfg0, "cfg0", &cfg0_v) || get_ll(cfg1, "cfg1", &cfg1_v)
                                 || get_ll(thobj, "thread", &thread_v)))
        return NULL;
    PyObject *rec = io && io->rec0 ? io->rec0 : cword_rec(cword, wv[j]);
    if (!rec) {
        if (PyErr_Occurred())
            return NULL;
        Py_RETURN_NONE;
    }

    /* the cycle model's state of thread th (its C state: timing_state.c) and the Vector Unit */
    PyObject *st = PyTuple_GET_ITEM(ctx, 8);
    long long clock = S->clock[th], fe = S->fe[th], mask = S->gate_mask[th], until = S->gate_until[th];
    long long stalls = S->stalls[th], issued = S->issued[th], first = S->first[th];
    long long mad_cycle, mad_writes, mad_macro, nop_only, busy, strict;
    if (timing_slots(st) || slot_ll(st, T_MAD_CYCLE, &mad_cycle) || slot_ll(st, T_MAD_WRITES, &mad_writes)
        || slot_ll(st, T_MAD_MACRO, &mad_macro) || slot_ll(st, T_NOP_ONLY, &nop_only)
        || slot_ll(st, T_BUSY, &busy) || slot_ll(st, T_STRICT, &strict))
        return NULL;
    int has_first = S->has_first[th], after_mop = S->after_mop[th];
    /* the SFPU timing's values as read: only what changed is written back */
    const long long mad_cycle0 = mad_cycle, mad_writes0 = mad_writes;
    const long long mad_macro0 = mad_macro, nop_only0 = nop_only, busy0 = busy;
    /* taken: when the last `depth` words left the FIFO (the C state's ring, oldest first); a pushed word's departure
     * goes in (ring_push) when the word is committed, as TensixTiming.take appends it */
    const long long *ring = S->taken[th];
    /* Dst access: the thread's config and RWCs, Dst's rows written, the FPU's last Dst writes */
    PyObject *cfg_l = NULL, *rwc_d = NULL, *fpu_w = NULL;
    long long rwc[6] = {0}, rwc0[6] = {0}, src_mode = 0;     /* rwc0: the RWCs as read (only changed ones written) */
    Py_buffer written;             /* (filled by PyObject_GetBuffer with a Dst access; else only these two are read) */
    written.obj = NULL, written.buf = NULL;
    if (mem != Py_None) {
        cfg_l = PyTuple_GET_ITEM(mem, 0);
        rwc_d = PyTuple_GET_ITEM(mem, 1);
        fpu_w = PyTuple_GET_ITEM(mem, 3);
        for (int k = 0; k < 6; k++) {
            PyObject *v = PyDict_GetItemWithError(rwc_d, rwc_keys[k]);
            if (!v) {
                if (!PyErr_Occurred())
                    PyErr_SetString(PyExc_KeyError, "issue_run: an RWC is missing");
                return NULL;
            }
            if (get_ll(v, "RWC", &rwc[k]))
                return NULL;
            rwc0[k] = rwc[k];
        }
        if (get_ll(PyTuple_GET_ITEM(mem, 4), "mode", &src_mode)
            || PyObject_GetBuffer(PyTuple_GET_ITEM(mem, 2), &written, PyBUF_WRITABLE) < 0)
            return NULL;
        if (written.len < 512 || written.itemsize != 1) {
            PyBuffer_Release(&written);
            PyErr_SetString(PyExc_TypeError, "issue_run: Dst's rows-written array is not 512 bools");
            return NULL;
        }
    }
    unsigned char *wr = (unsigned char *)written.buf;
    Py_ssize_t last_mem = -1;
    long long last_c = 0;
    PyObject *result = NULL;

    /* cword_rec's switch, read once for the block (per word it had cost ~25 x86 instructions of tile_long's ~1.6 k):
     * it only chooses between two look-ups with the same answer */
    int word_memo = word_memo_on();
    if (word_memo < 0)
        goto fail;
    int by_pos = word_memo > 0 && !one_word && block_memo_for(words, n, cword);
    while (j < n) {
        PyObject *w = wv[j];
        uint32_t w32;                               /* the word's value where it is a small exact int (word_value) */
        int has_w32;
        if (by_pos && block_memo.words == words && block_memo.filled[j] == block_memo.epoch
            && dict_version(cword) == block_memo.v) {   /* (words: a re-entrant push may have taken the memo over) */
            rec = block_memo.rec[j], w32 = block_memo.w[j], has_w32 = 1;
            cword_memo.hits++;
        } else {
            has_w32 = word_value(w, &w32);
            if (j > (Py_ssize_t)j0) {               /* (words[j0]'s record: looked up above) */
                rec = has_w32 && word_memo ? cword_memo_find(cword, w, w32) : PyDict_GetItemWithError(cword, w);
                if (!rec) {
                    if (PyErr_Occurred())
                        goto fail;
                    break;
                }
            }
            if (by_pos && has_w32 && dict_version(cword) == block_memo.v) {
                block_memo.filled[j] = block_memo.epoch;
                block_memo.rec[j] = rec, block_memo.w[j] = w32;
            }
        }
        const word_facts *f = (const word_facts *)PyBytes_AS_STRING(PyTuple_GET_ITEM(rec, 2));
        if (DQ_SIZE(dq) >= dq_max || (latch_block & f->block) || (f->is_mem && mem == Py_None))
            break;
        /* defer(): the Dst access it queues, and the address modifier, which must not raise */
        long long dst_base = 0, mode = 0, addr = 0, nrwc[6];
        if (f->is_mem) {
            long long c1, am[2], bias;
            if (f->amode < 0 || f->amode > 7)
                break;                             /* (no such address modifier: the Python path names it) */
            if (get_ll(PyList_GET_ITEM(cfg_l, 1), "cfg", &c1)
                || get_ll(PyList_GET_ITEM(cfg_l, 12 + f->amode), "cfg", &am[0])
                || get_ll(PyList_GET_ITEM(cfg_l, 28 + f->amode), "cfg", &am[1])
                || get_ll(PyList_GET_ITEM(cfg_l, 47 + f->amode), "cfg", &bias))
                goto fail;
            dst_base = (c1 & 0xFFF) + rwc[4];
            mode = f->mod0 ? f->mod0 : src_mode;
            addr = (f->imm + dst_base) & 0x3FF;
            if (mode < 0 || mode > 63 || !(((f->is_store ? store_modes : load_modes) >> mode) & 1) || (addr & 1)
                || addr >= 512 || bias)
                break;
            long long ab = am[0], dm = am[1];
            for (int k = 0; k < 6; k++)
                nrwc[k] = rwc[k];
            if (upd(nrwc, ab & 0x3F, ab >> 7 & 1, ab >> 6 & 1, 0, src_rwc_mask)
                || upd(nrwc + 2, ab >> 8 & 0x3F, ab >> 15 & 1, ab >> 14 & 1, 0, src_rwc_mask)
                || upd(nrwc + 4, dm & 0x3FF, dm >> 11 & 1, dm >> 10 & 1, dm >> 12 & 1, dst_rwc_mask))
                break;
            if (!f->is_store && strict) {
                long long r0 = addr & 0x1FC;
                if (!(wr[r0] && wr[r0 + 1] && wr[r0 + 2] && wr[r0 + 3]))
                    break;                         /* the handler's exact check, after the queue executed */
            }
        }
        /* accept_take: a full FIFO (the last `depth` words all left after t) holds the push until the oldest left */
        long long a = t, nfe = fe;
        if (pushed) {
            if (S->taken_len[th] == depth && ring[S->taken_head[th]] > t)
                a = ring[S->taken_head[th]];
            if (after_mop)
                nfe = (fe > clock + 1 ? fe : clock + 1) + mop_penalty;
            if (a > nfe)
                nfe = a;
        }
        /* issue_sfpu */
        long long c = clock + 1;
        if (nfe > c)
            c = nfe;
        if (until > c && (f->block != -1 ? (f->block & mask) != 0 : mask == 0x1FF))
            c = until;
        if (was_blocked && event_t + 1 > c)
            c = event_t + 1;
        if (f->reads_dst && strict) {                 /* sfpload_hazard */
            long long ha = (f->imm + dst_base) & 0x3FC;
            PyObject *key = PyLong_FromLongLong((ha & 0x1FF) >> 3);
            if (!key)
                goto fail;
            PyObject *wv = PyDict_GetItemWithError(fpu_w, key);
            Py_DECREF(key);
            long long wc;
            if (!wv && PyErr_Occurred())
                goto fail;
            if (wv && wv != Py_None) {
                if (get_ll(wv, "dst_fpu_write", &wc))
                    goto fail;
                if (c - wc < fpu_to_sfpload_gap)
                    break;
            }
        }
        long long mc = mad_cycle, mw = mad_writes, mm = mad_macro, nop = nop_only, b = busy;
        if (c == nop || c == mc + 1 || f->two_cycle) {       /* SfpuTiming.regular */
            if (c == nop && !f->is_nop)
                c += 1;
            if (c == mc + 1) {
                if (mm) {
                    if ((f->reads & mw) && strict)
                        break;                                 /* a strict error: Python raises it */
                } else if (f->indirect || (mw == all_lregs && f->reads)) {
                    c += 1;
                } else if (f->seen & mw) {
                    c += 1;
                } else if ((f->reads & mw) && strict) {
                    break;
                }
            }
            if (f->mad) {
                mc = c;
                mw = f->writes;
                mm = 0;
            }
            if (f->two_cycle)
                nop = c + 1;
            long long done = c + ((f->mad || f->two_cycle) ? 2 : 1);
            if (done > b)
                b = done;
        } else if (f->mad) {
            mc = c;
            mw = f->writes;
            mm = 0;
            if (c + 2 > b)
                b = c + 2;
        } else if (c >= b) {
            b = c + 1;
        }
        /* the deferred queue's entry, as push_many / defer build it (a DeferredQueue's: a record) */
        if (dq_is_queue(dq)) {
            DeferredQueue *q = (DeferredQueue *)dq;
            if (has_w32 ? dq_push_word(q, w, w32, rec, (int)f->is_mem, (int)f->is_store, f->vd, mode, addr,
                                       f->is_mem ? dst_base : 0, c, cfg0_v, cfg1_v, thread_v)
                        : dq_push(q, w, rec, (int)f->is_mem, (int)f->is_store, f->vd, mode, addr,
                                  f->is_mem ? dst_base : 0, c, cfg0_v, cfg1_v, thread_v))
                goto fail;
        } else {
            PyObject *entry = queue_entry(w, rec, f, mode, addr, dst_base, c, cfg0, cfg1, thobj);
            /* Untracked by the cyclic GC, as CPython untracks tuples of atoms: the containers it holds (the decoded
             * fields, cfg0, cfg1) are shared by every entry of the word and never refer back. (Tracked, the queue's
             * tens of thousands of entries made the collections the GC runs during a long body cost 3-4x the issue
             * itself.) */
            if (entry)
                PyObject_GC_UnTrack(entry);
            if (!entry || PyList_Append(dq, entry) < 0) {
                Py_XDECREF(entry);
                goto fail;
            }
            Py_DECREF(entry);
        }
        /* commit the word's effects on the cycle model, the RWCs and Dst's rows written */
        if (pushed) {
            ring_push(S, th, a > clock ? a : clock);
            fe = nfe;
            after_mop = 0;
            t = a + 1;
        }
        if (!has_first) {
            first = c;
            has_first = 1;
        } else if (c - clock > 1) {
            stalls += c - clock - 1;
        }
        clock = c;
        issued++;
        mad_cycle = mc, mad_writes = mw, mad_macro = mm, nop_only = nop, busy = b;
        if (f->ftab >= 0)
            fl = (f->ftab >> (4 * fl)) & 15;
        if (f->is_mem) {
            if (f->is_store) {      /* every lane enabled (use 0, or use 1 with lane flags 1): the rows are written */
                long long lf = fl / 3, use = fl % 3;
                if (use == 0 || (use == 1 && lf == 1))
                    memset(wr + (addr & 0x1FC), 1, 4);
            }
            for (int k = 0; k < 6; k++)
                rwc[k] = nrwc[k];
            last_mem = j;
        }
        last_c = c;
        was_blocked = 0;
        j++;
    }
    if (j == (Py_ssize_t)j0) {
        Py_INCREF(Py_None);
        result = Py_None;
        goto out;
    }

    /* write the state back */
    S->clock[th] = clock, S->stalls[th] = stalls, S->issued[th] = issued;
    S->first[th] = first, S->has_first[th] = 1;
    if (pushed)
        S->fe[th] = fe, S->after_mop[th] = 0;
    if ((mad_cycle != mad_cycle0 && set_slot_ll(st, T_MAD_CYCLE, mad_cycle))
        || (mad_writes != mad_writes0 && set_slot_ll(st, T_MAD_WRITES, mad_writes))
        || (mad_macro != mad_macro0 && set_slot_ll(st, T_MAD_MACRO, mad_macro))
        || (nop_only != nop_only0 && set_slot_ll(st, T_NOP_ONLY, nop_only))
        || (busy != busy0 && set_slot_ll(st, T_BUSY, busy)))
        goto fail;
    if (last_mem >= 0) {
        for (int k = 0; k < 6; k++) {
            if (rwc[k] == rwc0[k])      /* (an RWC the words left as it was keeps its int: ~1 in 6 changes) */
                continue;
            PyObject *v = PyLong_FromLongLong(rwc[k]);
            int bad = !v || PyDict_SetItem(rwc_d, rwc_keys[k], v) < 0;
            Py_XDECREF(v);
            if (bad)
                goto fail;
        }
    }
    if (io) {
        io->j = j, io->t = t, io->last_c = last_c, io->fl = fl, io->last_mem = last_mem;
        result = Py_NewRef(Py_True);
        goto out;
    }
    result = PyTuple_New(5);          /* (j, t, last_c, fl, last_mem), without Py_BuildValue's format parsing */
    if (!result)
        goto fail;
    PyObject *items[5] = {PyLong_FromSsize_t(j), PyLong_FromLongLong(t), PyLong_FromLongLong(last_c),
                          PyLong_FromLongLong(fl), PyLong_FromSsize_t(last_mem)};
    for (int k = 0; k < 5; k++)
        PyTuple_SET_ITEM(result, k, items[k]);
    if (!items[0] || !items[1] || !items[2] || !items[3] || !items[4])
        Py_CLEAR(result);
    goto out;
fail:
    result = NULL;
out:
    if (written.obj)
        PyBuffer_Release(&written);
    return result;
}

static PyObject *issue_run(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    return sfpu_run(args, nargs, 1, 0);
}

/* push_word(ctx, word, t, thread, cword, dq, flags, cfg0, cfg1, thread_obj, was_blocked, event_t, dq_max, latch_block,
 * mem): issue_run of the one-word run (word,) from j = 0, for deferral.push (a word pushed on its own), without the
 * tuple; the same result. */
static PyObject *push_word(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 15) {
        PyErr_SetString(PyExc_TypeError, "push_word takes 15 arguments");
        return NULL;
    }
    PyObject *all[16] = {args[0], args[1], zero};
    memcpy(all + 3, args + 2, 13 * sizeof *args);
    return sfpu_run(all, 16, 1, 1);
}

/* ready_run(ctx, words, j, 0, thread, ...): issue_run's arguments and result for words the frontend has taken already,
 * the head of the thread's ready queue (deferral.py's drain_deferrable): each issued as issue_run issues a pushed word
 * but without the FIFO's accept and the MOP expander's take (the FIFO record, the frontend cycle and the MOP
 * transition stay as they are; the returned push time is the given one). */
static PyObject *ready_run(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    return sfpu_run(args, nargs, 0, 0);
}

/* The first `most` items of the iterable `words` in buffers this module keeps: the objects (borrowed: the caller keeps
 * `words` unchanged while it uses them) and their values as words. Their count; -1 with an exception set where an item
 * is not an integer below 2^32 (find_period's errors) or the iteration fails. A ready queue holds few distinct word
 * objects many times over: a value is converted once per object (a small memo by address, valid within the call,
 * while `words` holds every object). */
static PyObject **word_buf;
static uint32_t *word_val;
static Py_ssize_t word_cap;
static Py_ssize_t first_words(PyObject *words, Py_ssize_t most) {
    if (most > word_cap) {
        PyObject **b = PyMem_Realloc(word_buf, (size_t)most * sizeof *b);
        if (b)
            word_buf = b;
        uint32_t *v = b ? PyMem_Realloc(word_val, (size_t)most * sizeof *v) : NULL;
        if (!v) {
            PyErr_NoMemory();
            return -1;
        }
        word_val = v, word_cap = most;
    }
    struct { PyObject *o; uint32_t v; } memo[64] = {{NULL, 0}};
    int list = PyList_CheckExact(words);          /* (a list: read in place, no iterator) */
    PyObject *it = list ? NULL : PyObject_GetIter(words), *item;
    if (!list && !it)
        return -1;
    Py_ssize_t n = 0;
    while (n < most && (item = list ? (n < PyList_GET_SIZE(words) ? Py_NewRef(PyList_GET_ITEM(words, n)) : NULL)
                                    : PyIter_Next(it))) {
        size_t h = ((uintptr_t)item >> 4) & 63;
        if (memo[h].o != item) {
            unsigned long v = PyLong_AsUnsignedLong(item);
            if (v == (unsigned long)-1 && PyErr_Occurred()) {
                Py_DECREF(item);
                break;
            }
            if (v > 0xFFFFFFFFul) {
                PyErr_SetString(PyExc_ValueError, "find_period: a word above 2^32 - 1");
                Py_DECREF(item);
                break;
            }
            memo[h].o = item, memo[h].v = (uint32_t)v;
        }
        word_val[n] = memo[h].v;
        word_buf[n++] = item;
        Py_DECREF(item);          /* (words holds it) */
    }
    Py_XDECREF(it);
    return PyErr_Occurred() ? -1 : n;
}

/* mop_batch.find_period's search over words w[0..n): the body length p <= 32 whose k leading back-to-back repetitions
 * cover most of them (the first such p among equals; (0, 0) when no body repeats). */
static void best_period(const uint32_t *w, Py_ssize_t n, Py_ssize_t *best_p, Py_ssize_t *best_k) {
    *best_p = *best_k = 0;
    for (Py_ssize_t p = 1; p <= 32 && p <= n / 2; p++) {
        Py_ssize_t k = 1;
        while ((k + 1) * p <= n && !memcmp(w + k * p, w, (size_t)p * sizeof *w))
            k++;
        if (k >= 2 && k * p > *best_k * *best_p)
            *best_p = p, *best_k = k;
    }
}

/* find_period(words, most) -> (p, k): mop_batch.find_period of the first `most` items of the iterable `words` (a thread's
 * ready queue, without copying it into a list): best_period. Items are words (integers below 2^32). */
static PyObject *find_period(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    long long most;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "find_period(words, most)");
        return NULL;
    }
    if (get_ll(args[1], "most", &most))
        return NULL;
    if (most < 0 || most > 65536) {
        PyErr_SetString(PyExc_ValueError, "find_period: most outside 0..65536");
        return NULL;
    }
    Py_ssize_t n = first_words(args[0], (Py_ssize_t)most), p, k;
    if (n < 0)
        return NULL;
    best_period(word_val, n, &p, &k);
    return Py_BuildValue("(nn)", p, k);
}

/* pack_records(entries, i, records) -> (k, bytes): the sfpu_native records (8 int32s each: op, mod, va, vb, vc, vd,
 * imm, addr) of deferred entries i, i + 1, ... as deferral._dq_exec_run builds them one by one: the word's record from
 * `records` (word -> record), an SFPLOAD / SFPSTORE entry's with its mode and Dst address (sfpu_native.at_address).
 * Stops at the first entry whose word has no record there yet or a None one (not the C part's): k of them packed. */
static PyObject *pack_records(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !PyList_Check(args[0]) || !PyDict_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "pack_records(entries: list, i: int, records: dict)");
        return NULL;
    }
    PyObject *entries = args[0], *records = args[2];
    Py_ssize_t i0 = PyLong_AsSsize_t(args[1]), n = PyList_GET_SIZE(entries);
    if (i0 == -1 && PyErr_Occurred())
        return NULL;
    if (i0 < 0 || i0 > n) {
        PyErr_SetString(PyExc_IndexError, "pack_records: start outside the entries");
        return NULL;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, (n - i0) * 8 * (Py_ssize_t)sizeof(int32_t));
    if (!out)
        return NULL;
    int32_t *p = (int32_t *)PyBytes_AS_STRING(out);
    Py_ssize_t i = i0;
    for (; i < n; i++) {
        PyObject *e = PyList_GET_ITEM(entries, i);
        if (!PyTuple_Check(e) || PyTuple_GET_SIZE(e) < 4)
            goto bad;
        int found = lookup_record(records, PyTuple_GET_ITEM(e, 0), p);
        if (found < 0)
            goto fail;
        if (!found)
            break;
        PyObject *mem = PyTuple_GET_ITEM(e, 3);      /* (is_store, vd, mode, addr) of a Dst access, else None */
        if (mem != Py_None) {
            if (!PyTuple_Check(mem) || PyTuple_GET_SIZE(mem) != 4)
                goto bad;
            long mode = PyLong_AsLong(PyTuple_GET_ITEM(mem, 2)), addr = PyLong_AsLong(PyTuple_GET_ITEM(mem, 3));
            if ((mode == -1 || addr == -1) && PyErr_Occurred())
                goto fail;
            p[1] = (int32_t)mode;
            p[7] = (int32_t)addr;
        }
        p += 8;
    }
    if (_PyBytes_Resize(&out, (i - i0) * 8 * (Py_ssize_t)sizeof(int32_t)) < 0)
        return NULL;
    return Py_BuildValue("(nN)", i - i0, out);
bad:
    PyErr_SetString(PyExc_TypeError, "pack_records: an entry or record of the wrong shape");
fail:
    Py_DECREF(out);
    return NULL;
}

/* ---------------------------------------------------------------------------------------------- plain words
 * plain_run: for a run of non-SFPU words pushed to a thread whose frontend is empty, what direct_issue.push and
 * Tensix.issue_head do for each (a word pushed to a thread with work queued: FrontendMixin.push, see plain_run;
 * drain_run: Tensix._drain's loop): the FIFO accepts it and the MOP expander takes it (TensixTiming.accept_take), it
 * waits at the head of the ready queue while the Wait Gate's latch blocks it, the deferred SFPU work executes, its
 * Python handler runs, and the cycle model issues it (TensixTiming.issue for an unblocked instruction of kind plain,
 * sync, wait, unpack, pack or FPU: the issue rule, the units' busy times, the sync events). Only handlers, the latch's
 * condition (Tensix.latch_unmet), the deferred queue, a SEMPOST's post stamps, a STALLWAIT's release and
 * SFPLOADMACRO-scheduled work are called back in Python. The cycle model's state is read and written per word (a
 * handler may read it). It stops after a word that blocks (left at the head of the ready queue, as issue_head leaves
 * it) and before the first word without facts. */

/* plain_facts, packed by DirectIssueMixin._plain_facts in this order (little-endian int64s) */
typedef struct {
    int64_t block, kind, sel, is_unpacr_nop, is_sempost, sem_sel;
    int64_t latency, dst_writer, src_reader, is_mvmul, dst;    /* FPU: FPU_TIMING's latency, the Dst / Src roles */
    int64_t c_handler;                                          /* tile_handlers.c's H_* code, or 0: Python's */
} plain_facts;
enum { K_PLAIN = 0, K_SFPU = 1, K_FPU = 2, K_UNPACK = 3, K_PACK = 4, K_WAIT = 5, K_SYNC = 6 };

static int unpack_bytes_per_cycle = 64, pack_bytes_per_cycle = 16;
static long long element_bits_of[16];
static PyObject *s_tm, *s_threads, *s_deferred, *s_flush_deferred, *s_current, *s_latch, *s_block, *s_latch_unmet,
    *s_blocked, *s_handler_blocked, *s_popleft, *s_ready, *s_issue_t, *s_instructions, *s_clock, *s_fe, *s_gate,
    *s_after_mop, *s_first, *s_stalls, *s_issued, *s_taken, *s_event_t, *s_unpack_busy, *s_pack_busy, *s_nop_t,
    *s_src_ready, *s_srca_unpack_bank, *s_srcb_unpack_bank, *s_cfg, *s_adc, *s_raw_sfpu, *s_scheduled,
    *s_run_scheduled, *s_stamp_posts, *s_waited, *s_kind, *s_cond, *s_stallwait, *s_bank_a, *s_bank_b,
    *s_rwc, *s_d, *s_srca_matrix_bank, *s_srcb_matrix_bank, *s_dst_fpu_write, *s_bank_read, *s_fpu_busy,
    *s_bank_wait, *s_fifo, *s_fifo_t, *s_mop_out, *s_batch_skip, *s_replay_load, *s_mm_record, *s_flush_mvmul, *s_drain,
    *s_work_done;
static int dst_read_latency = 5, fifo_depth = 32;

static PyObject *configure_plain(PyObject *self, PyObject *args) {
    PyObject *bits;
    if (!PyArg_ParseTuple(args, "iiOii", &unpack_bytes_per_cycle, &pack_bytes_per_cycle, &bits, &dst_read_latency,
                          &fifo_depth))
        return NULL;
    if (!PyTuple_Check(bits) || PyTuple_GET_SIZE(bits) != 16 || unpack_bytes_per_cycle < 1 || pack_bytes_per_cycle < 1) {
        PyErr_SetString(PyExc_ValueError, "configure_plain(unpack B/cycle, pack B/cycle, 16 element bits, "
                                          "FPU Dst read latency, FIFO depth)");
        return NULL;
    }
    for (int i = 0; i < 16; i++)
        if (get_ll(PyTuple_GET_ITEM(bits, i), "element bits", &element_bits_of[i]))
            return NULL;
    Py_RETURN_NONE;
}

#include "tile_handlers.c"     /* tile_handler: UNPACR, PACR, MVMUL and ELW*'s common case in C */

static method_memo popleft_memo;
static PyObject *popleft_call(PyObject *seq) {
    return memo_call(&popleft_memo, s_popleft, seq, NULL, 0);
}

static int list_ll(PyObject *list, Py_ssize_t i, long long *out) {
    ThreadTiming *s = row_state(list);            /* (a row of the cycle model's C state) */
    if (s)
        return row_ll(s, list, i, out);
    PyObject *v = PyList_GetItem(list, i);
    return v ? get_ll(v, "list item", out) : -1;
}

/* attribute `name` of o (a new reference), a list of at least `n` items */
static PyObject *attr_list(PyObject *o, PyObject *name, Py_ssize_t n) {
    PyObject *v = get_attr(o, name);
    if (v && !row_state(v) && (!PyList_Check(v) || PyList_GET_SIZE(v) < n)) {
        PyErr_Format(PyExc_TypeError, "plain_run: %U is not a list of %zd", name, n);
        Py_CLEAR(v);
    }
    return v;
}

static PyObject *call_method(PyObject *o, PyObject *name, PyObject *const *args, size_t n) {
    PyObject *stack[5] = {o};
    for (size_t i = 0; i < n; i++)
        stack[i + 1] = args[i];
    return PyObject_VectorcallMethod(name, stack, (n + 1) | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
}

/* TensixTiming._adc_count: the datums of the ADC set s's X range (16 when empty); the range the word's handler in C
 * read where it read this set (run_view.adc_x_set) */
static int adc_count(run_view *rv, int s, long long *n) {
    if (rv->adc_x_set == s + 1) {
        long long x0 = rv->adc_x[0], x1 = rv->adc_x[1];
        *n = x1 - x0 + 1 > 0 ? x1 - x0 + 1 : 16;
        return 0;
    }
    PyObject *adc = view_get(rv, V_ADC);
    if (!adc)
        return -1;
    PyObject *set = PyList_Check(adc) ? PyList_GetItem(adc, s) : NULL;
    PyObject *ch0 = set && PyList_Check(set) ? PyList_GetItem(set, 0) : NULL;
    PyObject *ch1 = set && PyList_Check(set) ? PyList_GetItem(set, 1) : NULL;
    long long x0, x1;
    int bad = !ch0 || !ch1 || !PyList_Check(ch0) || !PyList_Check(ch1) || list_ll(ch0, 0, &x0) || list_ll(ch1, 0, &x1);
    if (bad) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "plain_run: a thread's ADCs are not lists");
        return -1;
    }
    *n = x1 - x0 + 1 > 0 ? x1 - x0 + 1 : 16;
    return 0;
}

/* The cycle model's int `name` (event_t, fpu_busy, pack_busy, nop_t): its C member where the model holds its state in
 * C (timing_state.c), else NULL (an instance attribute: read and written by name) */
static long long *tm_scalar(PyObject *tm, PyObject *name) {
    ThreadTiming *s = tm_state(tm);
    if (!s)
        return NULL;
    return name == s_event_t ? &s->event_t : name == s_fpu_busy ? &s->fpu_busy : name == s_pack_busy ? &s->pack_busy
           : name == s_nop_t ? &s->nop_t : NULL;
}

static int tm_get(PyObject *tm, PyObject *name, long long *out) {
    long long *p = tm_scalar(tm, name);
    if (!p)
        return attr_ll(tm, name, out);
    *out = *p;
    return 0;
}

static int tm_set(PyObject *tm, PyObject *name, long long v) {
    long long *p = tm_scalar(tm, name);
    if (!p)
        return set_attr_ll(tm, name, v);
    *p = v;
    return 0;
}

/* tm.name = max(tm.name, v) */
static int tm_set_max(PyObject *tm, PyObject *name, long long v) {
    long long old;
    if (tm_get(tm, name, &old))
        return -1;
    return v > old ? tm_set(tm, name, v) : 0;
}

/* the cycle model's int `name` as an object (a new reference; NULL with an error set) */
static PyObject *tm_obj(PyObject *tm, PyObject *name) {
    long long *p = tm_scalar(tm, name);
    return p ? PyLong_FromLongLong(*p) : get_attr(tm, name);
}

/* Tensix.issue_t = c: the cycle model's C member (the Tensix's property reads it there), else by name */
static int set_issue_t(PyObject *tx, PyObject *tm, long long c) {
    ThreadTiming *s = tm_state(tm);
    if (!s)
        return set_attr_ll(tx, s_issue_t, c);
    s->issue_t = c;
    return 0;
}

/* TensixTiming.work_done[th] = max(it, done): thread th's FPU / unpacker / packer work ends by `done` */
static int record_work(run_view *rv, long long th, long long done) {
    ThreadTiming *s = tm_state(rv->tm);
    if (s) {
        if (done > s->work_done[th])
            s->work_done[th] = done;
        return 0;
    }
    PyObject *l = view_list(rv, V_WORK_DONE);
    long long old;
    return !l || list_ll(l, th, &old) || (done > old && set_item_ll(l, th, done)) ? -1 : 0;
}

/* The cycle model's per-thread lists, read once per call (TensixTiming.FIXED: bound once, then mutated in place). */
typedef struct {
    PyObject *clock, *fe, *gate, *after_mop, *first, *stalls, *issued, *taken;
} tm_lists;
_Static_assert(sizeof(tm_lists) == TIMING_BOUND * sizeof(PyObject *), "ThreadTiming.bound keeps one tm_lists");

static void tm_lists_release(tm_lists *l) {
    Py_CLEAR(l->clock);
    Py_CLEAR(l->fe);
    Py_CLEAR(l->gate);
    Py_CLEAR(l->after_mop);
    Py_CLEAR(l->first);
    Py_CLEAR(l->stalls);
    Py_CLEAR(l->issued);
    Py_CLEAR(l->taken);
}

/* The lists of the cycle model whose `clock` list was read last (strong references: that list cannot be freed, so its
 * address names that model): TensixTiming.FIXED binds them once, so the same clock list means the same lists, and a
 * call reads one attribute instead of eight. Only Python lists are kept here: a model with its state in C is held by
 * its views (timing_state.c), so keeping them here would keep the last Tensix that issued alive after it is dropped;
 * that model keeps its own memo (ThreadTiming.bound, traversed by the garbage collector). */
static tm_lists tm_memo;

static int tm_lists_get(PyObject *tm, tm_lists *l) {
    enum { N = sizeof(tm_lists) / sizeof(PyObject *) };
    ThreadTiming *s = tm_state(tm);
    PyObject **memo = s ? s->bound : &tm_memo.clock;    /* (the C state keeps its own: ThreadTiming.bound) */
    PyObject *clock = attr_list(tm, s_clock, 3);
    if (clock && clock == memo[0]) {
        Py_DECREF(clock);
        PyObject **to = &l->clock;
        for (size_t i = 0; i < N; i++)
            to[i] = Py_NewRef(memo[i]);
        return 0;
    }
    if ((l->clock = clock) && (l->fe = attr_list(tm, s_fe, 3)) && (l->gate = attr_list(tm, s_gate, 3))
        && (l->after_mop = attr_list(tm, s_after_mop, 3)) && (l->first = attr_list(tm, s_first, 3))
        && (l->stalls = attr_list(tm, s_stalls, 3)) && (l->issued = attr_list(tm, s_issued, 3))
        && (l->taken = attr_list(tm, s_taken, 3))) {
        PyObject **from = &l->clock;
        for (size_t i = 0; i < N; i++)
            Py_XSETREF(memo[i], Py_NewRef(from[i]));
        return 0;
    }
    tm_lists_release(l);
    return -1;
}

static int rows_native_on(void);

/* The C state whose rows L's lists are for thread th, each the view of its own row (taken[th]: the ring of thread th),
 * or NULL: Python lists (TT_EMU_TIMING_NATIVE=0), views bound elsewhere, or PLAIN_ROWS_NATIVE off
 * (TT_EMU_PLAIN_ROWS_NATIVE=0: list_ll and the others, the reference, then); -1 in *err with an exception set where
 * the switch's read failed. With it plain_run_core and plain_word read and write the rows in the struct directly
 * (accept_take_state, issue_rows_state): through list_ll and row_set_ll, each a type check and a row switch, the
 * FIFO's accept and take and the issue's row updates had cost ~250 and ~150 x86 instructions a word. */
static ThreadTiming *rows_state(const tm_lists *L, long long th, int *err) {
    static const int rows[] = {ROW_CLOCK, ROW_FE, ROW_GATE, ROW_AFTER_MOP, ROW_FIRST, ROW_STALLS, ROW_ISSUED};
    int on = rows_native_on();
    *err = on < 0;
    PyObject *const *l = &L->clock;
    ThreadTiming *s = on > 0 ? row_state(l[0]) : NULL;
    for (size_t i = 0; s && i < sizeof rows / sizeof rows[0]; i++)
        if (row_state(l[i]) != s || ((TimingRow *)l[i])->row != rows[i])
            return NULL;
    int rth;
    return s && ring_state(PyList_GET_ITEM(L->taken, th), &rth) == s && rth == th ? s : NULL;
}

/* TensixTiming._run_scheduled_sfpu: SFPLOADMACRO-scheduled work due by cycle c runs first */
static int run_scheduled(run_view *rv, long long c) {
    PyObject *sfpu = view_get(rv, V_RAW_SFPU);
    if (!sfpu)
        return -1;
    int due = 0;
    if (sfpu != Py_None) {
        PyObject *sch = get_attr(sfpu, s_scheduled);
        due = sch ? PyObject_IsTrue(sch) : -1;
        Py_XDECREF(sch);
    }
    if (due <= 0)
        return due;
    PyObject *c_o = PyLong_FromLongLong(c);
    PyObject *r = c_o ? call_method(rv->tm, s_run_scheduled, &c_o, 1) : NULL;
    view_drop(rv);
    Py_XDECREF(c_o);
    Py_XDECREF(r);
    return r ? 0 : -1;
}

/* The bank tables' key (side, bank) (a new reference): for banks 0-3 one tuple per key made once (building the tuple
 * with Py_BuildValue for every look-up had cost more than the look-up) */
#define BANK_KEYS 4
static PyObject *bank_keys[2][BANK_KEYS];
static PyObject *bank_key(PyObject *side, long long bank) {
    int s = side == s_bank_b;
    if (bank < 0 || bank >= BANK_KEYS)
        return Py_BuildValue("(OL)", side, bank);
    if (!bank_keys[s][bank])
        bank_keys[s][bank] = Py_BuildValue("(OL)", side, bank);
    return Py_XNewRef(bank_keys[s][bank]);
}

/* d[(side, bank)] (a Src bank's cycle; default 0) */
static int bank_get(PyObject *d, PyObject *side, long long bank, long long *out) {
    PyObject *key = bank_key(side, bank);
    if (!key)
        return -1;
    PyObject *v = PyDict_GetItemWithError(d, key);
    Py_DECREF(key);
    *out = 0;
    if (!v)
        return PyErr_Occurred() ? -1 : 0;
    return get_ll(v, "bank cycle", out);
}

static int bank_set(PyObject *d, PyObject *side, long long bank, long long v) {
    PyObject *key = bank_key(side, bank), *val = PyLong_FromLongLong(v);
    int r = key && val ? PyDict_SetItem(d, key, val) : -1;
    Py_XDECREF(key);
    Py_XDECREF(val);
    return r;
}

/* TensixTiming.issue's FPU part: the Dst read-after-write auto-stall, the Src banks' data, the banks it held, the
 * FPU's busy time and the event that hands banks back */
static int fpu_issue(run_view *rv, const plain_facts *f, long long row, long long bank_a, long long bank_b,
                     long long *c) {
    PyObject *dfw = view_dict(rv, V_DST_FPU_WRITE), *src_ready = dfw ? view_dict(rv, V_SRC_READY) : NULL;
    PyObject *bank_read = src_ready ? view_dict(rv, V_BANK_READ) : NULL;
    if (!bank_read)
        return -1;
    if (f->dst_writer) {
        PyObject *blk = PyLong_FromLongLong(row >> 3);
        if (!blk)
            return -1;
        PyObject *w = PyDict_GetItemWithError(dfw, blk);
        long long wc;
        if ((!w && PyErr_Occurred()) || (w && w != Py_None && get_ll(w, "dst_fpu_write", &wc))) {
            Py_DECREF(blk);
            return -1;
        }
        if (w && w != Py_None && *c < wc + dst_read_latency)
            *c = wc + dst_read_latency;
        if (f->src_reader) {
            long long ra, rb;
            if (bank_get(src_ready, s_bank_a, bank_a, &ra) || bank_get(src_ready, s_bank_b, bank_b, &rb)) {
                Py_DECREF(blk);
                return -1;
            }
            if (ra > *c)
                *c = ra;
            if (rb > *c)
                *c = rb;
        }
        PyObject *c_o = PyLong_FromLongLong(*c);
        int bad = !c_o || PyDict_SetItem(dfw, blk, c_o) < 0;
        Py_XDECREF(c_o);
        Py_DECREF(blk);
        if (bad)
            return -1;
    }
    return bank_set(bank_read, s_bank_a, bank_a, *c) || bank_set(bank_read, s_bank_b, bank_b, *c)
           || run_scheduled(rv, *c) || tm_set_max(rv->tm, s_fpu_busy, *c + f->latency)
           || tm_set_max(rv->tm, s_event_t, *c) ? -1 : 0;
}

/* tensix.py's module and the Tensix methods C stands in for (Tensix.drain's first test, handler_blocked,
 * src_bank_state), read at the first use (tensix.py imports this module, so not at its start): 0, or -1 */
static PyObject *tensix_module, *tensix_drain, *tensix_handler_blocked, *tensix_src_bank_state,
    *s_retry_on_bank_change, *s_bank_state, *s_src_bank_state;
static int tensix_refs(void) {
    if (tensix_module)
        return 0;
    PyObject *mod = PyImport_ImportModule("tt_backend.runtime.emu.tensix");
    PyObject *cls = mod ? PyObject_GetAttrString(mod, "Tensix") : NULL;
    int ok = cls && (s_retry_on_bank_change = PyUnicode_InternFromString("RETRY_ON_BANK_CHANGE"))
             && (s_bank_state = PyUnicode_InternFromString("bank_state"))
             && (s_src_bank_state = PyUnicode_InternFromString("src_bank_state"))
             && (tensix_drain = PyObject_GetAttr(cls, s_drain))
             && (tensix_handler_blocked = PyObject_GetAttr(cls, s_handler_blocked))
             && (tensix_src_bank_state = PyObject_GetAttr(cls, s_src_bank_state));
    Py_XDECREF(cls);
    if (!ok) {
        Py_XDECREF(mod);
        Py_CLEAR(tensix_drain);
        Py_CLEAR(tensix_handler_blocked);
        Py_CLEAR(tensix_src_bank_state);
        return -1;
    }
    tensix_module = mod;
    return 0;
}

/* Tensix.handler_blocked(thread, why, bank): the word waits; 0, or -1 with an exception set. Takes `why`'s reference.
 * For the reference methods in C: the thread's blocked reason and bank_wait, and with a bank wait the Src banks'
 * state as src_bank_state gives it (valid A0 A1 B0 B1, then the unpacker's and the FPU's bank of SrcA and SrcB). */
static int handler_blocked(run_view *rv, PyObject *why, PyObject *bank) {
    int ref = tensix_refs() ? -1 : method_is_ref(rv->tx, s_handler_blocked, tensix_handler_blocked, NULL);
    if (ref > 0 && bank == Py_True)
        ref = method_is_ref(rv->tx, s_src_bank_state, tensix_src_bank_state, NULL);
    PyObject *r = NULL;
    if (ref == 0) {
        PyObject *hb[3] = {rv->th, why, bank};
        r = call_method(rv->tx, s_handler_blocked, hb, 3);
        view_drop(rv);
    } else if (ref > 0 && !set_attr(rv->th, s_blocked, why) && !set_attr(rv->th, s_bank_wait, bank)) {
        PyObject *va = bank == Py_True ? view_list(rv, V_SRCA_VALID) : NULL;
        PyObject *vb = va ? view_list(rv, V_SRCB_VALID) : NULL;
        PyObject *const side[4] = {s_srca_unpack_bank, s_srca_matrix_bank, s_srcb_unpack_bank, s_srcb_matrix_bank};
        PyObject *state = vb && PyList_GET_SIZE(va) == 2 && PyList_GET_SIZE(vb) == 2 ? PyTuple_New(8) : NULL;
        for (int i = 0; state && i < 8; i++) {
            PyObject *item = i < 4 ? Py_NewRef(PyList_GET_ITEM(i < 2 ? va : vb, i & 1)) : get_attr(rv->tx, side[i - 4]);
            if (!item)
                Py_CLEAR(state);
            else
                PyTuple_SET_ITEM(state, i, item);
        }
        if (vb && !state && !PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "plain_run: the Src banks' valid flags are not lists of 2");
        r = bank != Py_True ? Py_NewRef(Py_None) : state && !set_attr(rv->th, s_bank_state, state) ? Py_NewRef(Py_None)
                                                                                                  : NULL;
        Py_XDECREF(state);
    }
    Py_DECREF(why);
    if (!r)
        return -1;
    Py_DECREF(r);
    return 0;
}

/* The thread's __slots__ (thread_state.ThreadState) the C issue reads and writes on every word: latch, blocked,
 * bank_wait, replay_load, batch_skip, and the queues plain_run reads on each call (ready, fifo, fifo_t, mop_out), at
 * their offsets (slot_layout). Through get_attr each read had cost some 170 instructions (callgrind of matmul256: 4 a
 * word). */
enum { TS_LATCH, TS_BLOCKED, TS_BANK_WAIT, TS_REPLAY_LOAD, TS_BATCH_SKIP, TS_READY, TS_FIFO, TS_FIFO_T, TS_MOP_OUT,
       N_TS };
static slot_layout ts_slots;
_Static_assert(N_TS <= SLOT_LAYOUT_MOST, "a slot_layout holds the thread's slots");
static PyObject **const ts_names[N_TS] = {&s_latch, &s_blocked, &s_bank_wait, &s_replay_load, &s_batch_skip, &s_ready,
                                          &s_fifo, &s_fifo_t, &s_mop_out};

/* the address of the slot k of thobj, or NULL: its class has no such writable slot (get_attr / set_attr then).
 * Inline, the layout's check first: some 65,000 calls an elementwise512 launch had cost ~30 x86 instructions each. */
static inline PyObject **th_slot(PyObject *thobj, int k) {
    PyTypeObject *tp = Py_TYPE(thobj);
    if (!slot_layout_current(&ts_slots, tp) && !slot_layout_of(&ts_slots, tp, ts_names, N_TS))
        return NULL;
    return (PyObject **)((char *)thobj + ts_slots.off[k]);
}

/* thobj's slot k (a new reference), NULL with an error set */
static inline PyObject *th_get(PyObject *thobj, int k) {
    PyObject **p = th_slot(thobj, k);
    return p && *p ? Py_NewRef(*p) : get_attr(thobj, *ts_names[k]);
}

static inline int th_set(PyObject *thobj, int k, PyObject *v) {
    PyObject **p = th_slot(thobj, k);
    if (!p)
        return set_attr(thobj, *ts_names[k], v);
    Py_XSETREF(*p, Py_NewRef(v));
    return 0;
}

/* Tensix.current = v (the word being executed), written for every word plain_run and drain_run issue: at its slot's
 * offset (tensix.py keeps it in a slot), resolved once per class version, where the class stores it there (set_attr's
 * look-ups had cost ~270 x86 instructions a word); set_attr otherwise (a class of its own __setattr__ or layout) */
static slot_layout current_slot;
static PyObject **const current_names[1] = {&s_current};
static int put_current(PyObject *tx, PyObject *v) {
    PyTypeObject *tp = Py_TYPE(tx);
    if (tp->tp_setattro != PyObject_GenericSetAttr || !slot_layout_of(&current_slot, tp, current_names, 1))
        return set_attr(tx, s_current, v);
    Py_XSETREF(*(PyObject **)((char *)tx + current_slot.off[0]), Py_NewRef(v));
    return 0;
}

/* TensixTiming.issue's rows for a word of thread th issued at c, the thread's clock having been `clock`: the first
 * issue cycle, else the stall cycles since the last; the clock and the issued count. 0, or -1 with an error set. */
static int issue_rows(const tm_lists *L, long long th, long long clock, long long c) {
    int unset = first_unset(L->first, th);
    if (unset < 0)
        return -1;
    if (unset) {
        if (set_item_ll(L->first, th, c))
            return -1;
    } else if (c - clock - 1 > 0) {
        long long s;
        if (list_ll(L->stalls, th, &s) || set_item_ll(L->stalls, th, s + c - clock - 1))
            return -1;
    }
    long long iss;
    return set_item_ll(L->clock, th, c) || list_ll(L->issued, th, &iss) || set_item_ll(L->issued, th, iss + 1) ? -1 : 0;
}

/* issue_rows on the C state s whose rows they are (rows_state) */
static void issue_rows_state(ThreadTiming *s, long long th, long long clock, long long c) {
    if (!s->has_first[th])
        s->first[th] = c, s->has_first[th] = 1;
    else if (c - clock - 1 > 0)
        s->stalls[th] += c - clock - 1;
    s->clock[th] = c;
    s->issued[th]++;
}

/* One word, at the head of the ready queue already: the Wait Gate, the handler, the issue rule. 1 when it issued, 0
 * when it blocked, -1 on an error. */
static int plain_word(run_view *rv, const tm_lists *L, ThreadTiming *rs, PyObject *tobj, long long th, PyObject *rec,
                      PyObject *fields, int was_blocked, long long *issue) {
    PyObject *tx = rv->tx, *tm = rv->tm, *thobj = rv->th;
    const plain_facts *f = (const plain_facts *)PyBytes_AS_STRING(PyTuple_GET_ITEM(rec, 4));
    PyObject *r;
    /* the Wait Gate: a latched wait instruction blocking this word holds it until its conditions are met */
    PyObject *latch = th_get(thobj, TS_LATCH);
    if (!latch)
        return -1;
    if (latch != Py_None) {
        long long lb;
        if (latch_ll(latch, LATCH_BLOCK, &lb)) {
            Py_DECREF(latch);
            return -1;
        }
        if (f->block == -1 ? lb == 0x1FF : (lb & f->block) != 0) {
            PyObject *why = latch_why(rv, tobj, latch);
            Py_DECREF(latch);
            if (!why)
                return -1;
            if (why != Py_None)
                return handler_blocked(rv, why, Py_False);
            Py_DECREF(why);
            if (th_set(thobj, TS_LATCH, Py_None))
                return -1;
        } else {
            Py_DECREF(latch);
        }
    } else {
        Py_DECREF(latch);
    }
    /* anything but a deferrable SFPU word: the deferred work first */
    PyObject *dq = view_get(rv, V_DEFERRED);
    Py_ssize_t queued = dq ? PyObject_Length(dq) : -1;
    if (queued < 0)
        return -1;
    if (queued) {
        r = call_method(tx, s_flush_deferred, NULL, 0);
        view_drop(rv);
        if (!r)
            return -1;
        Py_DECREF(r);
    }
    /* TensixTiming.pre: the state its timing needs from before the handler ran */
    long long bank = 0, row = 0, bank_a = 0, bank_b = 0;
    if (f->kind == K_UNPACK && attr_ll(tx, f->sel ? s_srcb_unpack_bank : s_srca_unpack_bank, &bank))
        return -1;
    rv->banks = f->kind == K_UNPACK ? (f->sel ? BANKS_UNPACK_B : BANKS_UNPACK_A) : 0;
    rv->unpack_bank = bank;
    if (f->kind == K_FPU) {
        PyObject *cfg = view_list(rv, V_TH_CFG), *rwc = cfg ? view_dict(rv, V_RWC) : NULL;
        long long c1, rwc_v[7];
        if (!rwc || list_ll(cfg, 1, &c1) || rwc_read(rwc, rwc_v) || attr_ll(tx, s_srca_matrix_bank, &bank_a)
            || attr_ll(tx, s_srcb_matrix_bank, &bank_b))
            return -1;
        row = ((c1 & 0xFFF) + rwc_v[4] + f->dst) & 0x1FF;
        rv->banks = BANKS_MATRIX;
        rv->matrix_bank[0] = bank_a, rv->matrix_bank[1] = bank_b;
    }
    PyObject *why = NULL;
    rv->adc_x_set = 0;                  /* (an earlier word's: its handler may have been a SETADC*) */
    int in_c = f->c_handler ? tile_handler(rv, fields, f->c_handler, &why) : 0;
    rv->banks = 0;
    if (in_c < 0)
        return -1;
    if (!in_c) {
        PyObject *hargs[2] = {tobj, fields};
        why = PyObject_Vectorcall(PyTuple_GET_ITEM(rec, 2), hargs, 2, NULL);
        view_drop(rv);
        if (!why)
            return -1;
        if (why == Py_None)
            Py_CLEAR(why);
    }
    if (why)
        return handler_blocked(rv, why, (f->kind == K_FPU || f->kind == K_UNPACK) ? Py_True : Py_False);
    /* TensixTiming.issue (bank_wait: its handler had blocked it on a Src bank) */
    int bank_wait = 0;
    if (was_blocked) {
        PyObject *bw = th_get(thobj, TS_BANK_WAIT);
        bank_wait = bw ? PyObject_IsTrue(bw) : -1;
        Py_XDECREF(bw);
        if (bank_wait < 0)
            return -1;
    }
    PyObject *key = NULL;
    int ok = 0;
    long long clock, fe, mask, until, c;
    if (rs)
        clock = rs->clock[th], fe = rs->fe[th], mask = rs->gate_mask[th], until = rs->gate_until[th];
    else if (list_ll(L->clock, th, &clock) || list_ll(L->fe, th, &fe) || gate_pair(L->gate, th, &mask, &until))
        goto out;
    c = clock + 1 > fe ? clock + 1 : fe;
    if (until > c && (f->block != -1 ? (f->block & mask) != 0 : mask == 0x1FF))
        c = until;
    if (was_blocked) {              /* woken by the release of its bank, its banks' data, or the latest event */
        long long woken, v;
        if (bank_wait && f->kind == K_UNPACK) {
            PyObject *br = view_dict(rv, V_BANK_READ);
            if (!br || bank_get(br, f->sel ? s_bank_b : s_bank_a, bank, &woken))
                goto out;
        } else if (bank_wait && f->kind == K_FPU && f->src_reader) {
            PyObject *sr = view_dict(rv, V_SRC_READY);
            if (!sr || bank_get(sr, s_bank_a, bank_a, &woken) || bank_get(sr, s_bank_b, bank_b, &v))
                goto out;
            if (v > woken)
                woken = v;
            if (tm_get(tm, s_nop_t, &v))
                goto out;
            if (v > woken)
                woken = v;
        } else if (tm_get(tm, s_event_t, &woken)) {
            goto out;
        }
        if (woken + 1 > c)
            c = woken + 1;
    }
    if (f->kind == K_UNPACK) {
        long long ub, n, cfgw;
        ThreadTiming *s = tm_state(tm);                 /* (unpack_busy: its C row, else the list) */
        PyObject *cfg = view_list(rv, V_TX_CFG), *busy_l = !cfg || s ? NULL : view_list(rv, V_UNPACK_BUSY);
        if (!cfg || (!s && !busy_l) || list_ll(cfg, f->sel ? 112 : 64, &cfgw)
            || (s ? (ub = s->unpack_busy[f->sel], 0) : list_ll(busy_l, f->sel, &ub)) || adc_count(rv, (int)f->sel, &n))
            goto out;
        if (ub > c)
            c = ub;
        long long bits = n * element_bits_of[cfgw & 0xF], per = 8LL * unpack_bytes_per_cycle;
        long long done = c + (bits > per ? (bits + per - 1) / per : 1);
        PyObject *src_ready = view_get(rv, V_SRC_READY);
        PyObject *done_o = src_ready ? PyLong_FromLongLong(done) : NULL;
        key = done_o ? bank_key(f->sel ? s_bank_b : s_bank_a, bank) : NULL;
        if (key && s)
            s->unpack_busy[f->sel] = done;
        int bad = !key || (!s && set_item_ll(busy_l, f->sel, done)) || PyObject_SetItem(src_ready, key, done_o) < 0
                  || tm_set_max(tm, s_event_t, done) || record_work(rv, th, done);
        Py_XDECREF(done_o);
        if (bad)
            goto out;
    } else if (f->kind == K_FPU) {
        long long fb;
        if (fpu_issue(rv, f, row, bank_a, bank_b, &c) || tm_get(tm, s_fpu_busy, &fb) || record_work(rv, th, fb))
            goto out;
    } else if (f->kind == K_PACK) {
        long long pb, n;
        if (run_scheduled(rv, c) || tm_get(tm, s_pack_busy, &pb) || adc_count(rv, 2, &n))
            goto out;
        if (pb > c)
            c = pb;
        long long bytes = n * 4;
        long long done = c + (bytes > pack_bytes_per_cycle ? (bytes + pack_bytes_per_cycle - 1) / pack_bytes_per_cycle
                                                           : 1);
        if (tm_set(tm, s_pack_busy, done) || record_work(rv, th, done))
            goto out;
    } else if (f->is_unpacr_nop) {
        if (tm_set(tm, s_nop_t, c))
            goto out;
    } else if (f->kind == K_SYNC) {
        if (tm_set_max(tm, s_event_t, c))
            goto out;
        if (f->is_sempost && sem_stamp(rv, f->sem_sel, c))
            goto out;
    }
    if (rs)
        issue_rows_state(rs, th, clock, c);
    if ((!rs && issue_rows(L, th, clock, c)) || set_issue_t(tx, tm, c))
        goto out;
    if (f->kind == K_WAIT && wait_release(rv, L->gate, tobj, th, c))    /* the unit-busy conditions of its latch */
        goto out;
    *issue = c;
    ok = 1;
out:
    Py_XDECREF(key);
    return ok ? 1 : -1;
}

/* The facts direct_issue.py recorded for the word `w` (its _plain_facts: a 5-tuple whose [3] holds the three threads'
 * `current`, [4] the packed plain_facts): 1 with *rec set (borrowed from `facts`), 0 where C does not take the word
 * (no entry yet, or None), -1 with an exception set. `who` names the caller in the error. */
static int plain_record(PyObject *facts, PyObject *w, const char *who, PyObject **rec) {
    PyObject *r = PyDict_GetItemWithError(facts, w);
    if (!r || r == Py_None)
        return PyErr_Occurred() ? -1 : 0;
    if (!PyTuple_Check(r) || PyTuple_GET_SIZE(r) != 5 || !PyBytes_Check(PyTuple_GET_ITEM(r, 4))
        || PyBytes_GET_SIZE(PyTuple_GET_ITEM(r, 4)) != sizeof(plain_facts)
        || !PyTuple_Check(PyTuple_GET_ITEM(r, 3)) || PyTuple_GET_SIZE(PyTuple_GET_ITEM(r, 3)) != 3) {
        PyErr_Format(PyExc_TypeError, "%s: a word's facts of the wrong shape", who);
        return -1;
    }
    *rec = r;
    return 1;
}

/* plain_run_core's memo of the facts of a run's words, by the run's tuple: rv32_native.c gives a run's tuple again
 * while L1 holds its words (run_words), and plain_record's dict look-up of a word (a large int key: its hash, the probe
 * and an int comparison) had cost ~310 x86 instructions a word. Direct-mapped by the tuple's address; an entry holds
 * the tuple (so that no other tuple gets its address while it is kept) and the records of its first RUN_MEMO_WORDS
 * words as plain_record found them (borrowed: the facts dict holds them while its version tag stands; Py_None where
 * C does not take the word; NULL not looked up yet), valid for one facts dict with the version tag it had then (any
 * change of the dict, such as a word's facts recorded, empties the entry). Off (PLAIN_MEMO_NATIVE,
 * TT_EMU_PLAIN_MEMO_NATIVE=0; read with the push switches, entry_read) or without version tags: plain_record each
 * time. */
#define RUN_MEMO 256            /* entries (a power of 2) */
#define RUN_MEMO_WORDS 32
typedef struct {
    PyObject *words, *facts;
    uint64_t v;
    PyObject *rec[RUN_MEMO_WORDS];
} run_memo_entry;
static run_memo_entry run_memo[RUN_MEMO];
static long long run_memo_hits;         /* words the memo answered (plain_memo_hits: tests see it used) */
static int plain_memos_on(void);

/* the entry of the tuple `words` for the dict `facts` (emptied where it held another tuple, dict or version), NULL
 * where the memo is off; -1 in *err with an exception set where the switch's read failed */
static run_memo_entry *run_memo_for(PyObject *words, PyObject *facts, int *err) {
    int on = DICT_TAGS ? plain_memos_on() : 0;
    *err = on < 0;
    if (on <= 0)
        return NULL;
    uintptr_t a = (uintptr_t)words;
    run_memo_entry *e = &run_memo[(a >> 4 ^ a >> 12) & (RUN_MEMO - 1)];
    if (e->words != words || e->facts != facts || e->v != dict_version(facts)) {
        Py_XSETREF(e->words, Py_NewRef(words));
        e->facts = facts, e->v = dict_version(facts);
        memset(e->rec, 0, sizeof e->rec);
    }
    return e;
}

/* plain_record for words[j] (w) through the tuple's memo entry e (NULL: the memo is off): the same answers. The entry
 * answers only while it is still the tuple's and the dict's (a nested plain_run, from a handler's Python, may have
 * taken it over for another tuple since the caller chose it). */
static int run_record(run_memo_entry *e, PyObject *words, PyObject *facts, PyObject *w, Py_ssize_t j,
                      PyObject **rec) {
    if (!e || j >= RUN_MEMO_WORDS || e->words != words || e->facts != facts)
        return plain_record(facts, w, "plain_run", rec);
    if (e->v != dict_version(facts)) {      /* (the facts changed since: a handler's Python recorded a word's) */
        e->v = dict_version(facts);
        memset(e->rec, 0, sizeof e->rec);
    }
    PyObject *r = e->rec[j];
    if (r) {
        run_memo_hits++;
        *rec = r;
        return r != Py_None;
    }
    int found = plain_record(facts, w, "plain_run", rec);
    if (found >= 0 && e->v == dict_version(facts))          /* (the look-up left the dict as it was) */
        e->rec[j] = found ? *rec : Py_None;
    return found;
}

/* plain_run_core's reads of the Tensix tx (its cycle model tm, threads and instruction counts) and of tm's lists
 * (tm_lists_get), kept per Tensix in two parts: tx's while tx's instance dict keeps its version tag and its class its
 * tag, tm's lists while tm's do (a dict then holds the same objects: any change of a dict changes its tag, no two dicts
 * get the same one, and a class attribute defined later changes its class's). Those reads had cost ~1.3k x86
 * instructions a call (get_attr's and attr_list's look-ups; some 5,500 calls an elementwise512 launch); the Tensix's
 * dict keeps its tag between most calls since `current` is a slot (tensix.py; the packer's position, written by every
 * PACR, is what changes it most of the rest), the cycle model's between nearly all. A part is filled only where each name read is an attribute of the instance's dict
 * (plain_dict_of, once per class tag) and the dict did not change while it was read; the objects are borrowed (the
 * dicts hold them while their tags stand). Off with the run memo (PLAIN_MEMO_NATIVE) or without version tags. */
#define TX_MEMO 8               /* entries (a power of 2), by the Tensix's address */
typedef struct {
    PyObject *tx, *txd;         /* (tx only compared: a Tensix made later at its address has another dict) */
    uint64_t vtx;
    unsigned int tag_tx, tag_tm;    /* the classes whose names were found plain (0: none yet) */
    PyObject *tm, *threads, *instr, *mm;
    PyObject *tmd;              /* (NULL: no lists kept) */
    uint64_t vtm;
    PyObject *lists[TIMING_BOUND];
} tx_memo_entry;
static tx_memo_entry tx_memo[TX_MEMO];
static long long tx_memo_hits;          /* calls whose reads the memo answered, lists included (plain_memo_hits) */
static PyObject *plain_dict_of(PyObject *o, PyObject *const *names, int n);      /* (push_memo.c) */

static tx_memo_entry *tx_memo_slot(PyObject *tx) {
    uintptr_t a = (uintptr_t)tx;
    return &tx_memo[(a >> 4 ^ a >> 10) & (TX_MEMO - 1)];
}

/* o's instance dict (borrowed) where it is an exact dict, else NULL */
static PyObject *exact_dict(PyObject *o) {
    PyObject **dp = _PyObject_GetDictPtr(o);
    return dp && *dp && PyDict_CheckExact(*dp) ? *dp : NULL;
}

/* whether `o`'s instance dict is `d` with the version tag v and its class has the tag `tag` (not 0) */
static int dict_unchanged(PyObject *o, PyObject *d, uint64_t v, unsigned int tag) {
    PyObject **dp = _PyObject_GetDictPtr(o);
    return tag && type_tag(Py_TYPE(o)) == tag && dp && *dp == d && dict_version(d) == v;
}

/* o's instance dict where the n `names` are attributes of it (plain_dict_of), asked once per class tag (*tag: the
 * class last found so), else NULL */
static PyObject *names_dict(PyObject *o, PyObject *const *names, int n, unsigned int *tag) {
    unsigned int now = type_tag(Py_TYPE(o));
    if (now && now == *tag)
        return exact_dict(o);
    PyObject *d = plain_dict_of(o, names, n);
    *tag = d ? now : 0;
    return d;
}

/* plain_run_core's run's view kept from one call to the next for the same Tensix and thread: view_drop at each call's
 * end had made the next read its items again (~5 a call, ~110 x86 instructions each through get_attr_hinted and
 * view_get, some 5,500 calls an elementwise512 launch) and clear the view. An item is kept where its read was its
 * owner's instance dict's (no class in the MRO defines the name and the class reads attributes generically: the
 * hint's `plain`) or a __slots__ member's (the hint's offset), as the hint says for the owner's class at its version
 * tag; the next call keeps it where the owner is the same object with its class at that tag and, for a dict item, the
 * same dict at the version tag it had as the last call ended (any change of a dict changes its tag, and no two dicts
 * get the same one), for a slot item the member still holding the item: get_attr would answer the item again. Between
 * an item's read and the call's end only C ran, which rebinds no item (run_view's comment), so the tags taken at the
 * end (C's own writes, such as the cycle model's ints, included) vouch for the items held then. An entry holds its
 * items (strong references, as a view does) until it serves another Tensix or thread or drops them. Off
 * (TT_EMU_VIEW_KEEP_NATIVE=0, view_keep_native), with the hints off or without version tags: each call reads its
 * items anew. */
#define VIEW_KEEP 8             /* entries (a power of 2), by the Tensix's address and the thread */
/* (o, d only compared; dp: where o keeps its dict pointer, which stays there while o lives with its class) */
typedef struct { PyObject *o, *d, **dp; uint64_t v; unsigned int tag; } owner_stamp;
typedef struct {
    run_view rv;                /* (rv.tx / tm / th: the last call's, only compared) */
    long long th;
    int busy;                   /* a call is using it (a nested call for the same Tensix and thread: a fresh view) */
    owner_stamp own[4];         /* the owners (VO_TX, VO_TM, VO_TH, VO_DST) as the last call ended */
} kept_view;
static kept_view kept_views[VIEW_KEEP];
static int keep_in_c = 1;
static long long view_keep_hits;        /* owners whose items a call found kept (view_keep_counts) */

/* the owner o as it is now (exact_dict: its dict, NULL where it has none; the version tags) */
static void stamp_owner(owner_stamp *s, PyObject *o) {
    s->o = o;
    s->dp = o && !Py_TYPE(o)->tp_itemsize ? _PyObject_GetDictPtr(o) : NULL;     /* (a variable-size object's moves) */
    s->d = s->dp && *s->dp && PyDict_CheckExact(*s->dp) ? *s->dp : NULL;
    s->v = s->d ? dict_version(s->d) : 0;
    s->tag = o ? type_tag(Py_TYPE(o)) : 0;
}

/* whether o is the object s stamped with its class at the same tag (0 no) and then (1) or also its dict the same
 * dict at the same tag (2) */
static int stamp_holds(const owner_stamp *s, PyObject *o) {
    if (!o || o != s->o || !s->tag || type_tag(Py_TYPE(o)) != s->tag)
        return 0;
    return s->d && *s->dp == s->d && dict_version(s->d) == s->v ? 2 : 1;
}

/* the view's items `drop` dropped */
static void view_forget(run_view *rv, uint32_t drop) {
    for (uint32_t h = drop & rv->held; h; h &= h - 1) {
        int k = __builtin_ctz(h);
        Py_CLEAR(rv->v[k]);
        rv->data[k].buf = NULL;
    }
    rv->held &= ~drop, rv->slots &= ~drop, rv->loose &= ~drop;
}

/* the items of owner code o (VO_*) */
static uint32_t owner_mask[4];
static inline uint32_t owner_items(int o) {
    if (!owner_mask[VO_TX])
        for (int k = 0; k < V_N; k++)
            owner_mask[view_items[k].owner] |= 1u << k;
    return owner_mask[o];
}

/* the view's items of owner code o (obj: that owner now, s: its stamp as the last call ended) that get_attr would
 * read again as they are kept (obj the same object, its class at the same tag, and a dict item's dict at the same tag
 * or a slot item's member still holding it), the others dropped */
static inline void view_sift(run_view *rv, int o, PyObject *obj, const owner_stamp *s) {
    uint32_t mine = rv->held & owner_items(o);
    if (!mine)
        return;
    int holds = stamp_holds(s, obj);
    uint32_t drop = !holds ? mine : holds == 1 ? mine & ~rv->slots : 0;
    for (uint32_t h = mine & rv->slots & ~drop; h; h &= h - 1) {
        int k = __builtin_ctz(h);
        if (*(PyObject **)((char *)obj + rv->off[k]) != rv->v[k])
            drop |= 1u << k;
    }
    view_keep_hits += (mine & ~drop) != 0;
    if (drop)
        view_forget(rv, drop);
}

/* The view for a plain_run call on thread th (thobj) of tx (cycle model tm): the kept one for them with the items that
 * stand (view_sift; Dst's after the Tensix's, its object being the V_DST item), marked busy; else `fresh`, empty */
static run_view *view_reuse(PyObject *tx, PyObject *tm, PyObject *thobj, long long th, run_view *fresh) {
    uintptr_t a = (uintptr_t)tx;
    kept_view *e = &kept_views[(a >> 4 ^ a >> 10 ^ (uintptr_t)th) & (VIEW_KEEP - 1)];
    if (!keep_in_c || !hints_in_c || !DICT_TAGS || !thobj || e->busy) {
        *fresh = (run_view){tx, tm, thobj};
        return fresh;
    }
    run_view *rv = &e->rv;
    if (rv->tx != tx || e->th != th) {
        view_drop(rv);
    } else {
        PyObject *now[3] = {tx, tm, thobj};
        for (int o = VO_TX; o <= VO_TH; o++)
            view_sift(rv, o, now[o], &e->own[o]);
        view_sift(rv, VO_DST, rv->held >> V_DST & 1 ? rv->v[V_DST] : NULL, &e->own[VO_DST]);
    }
    rv->tx = tx, rv->tm = tm, rv->th = thobj;
    rv->adc_x_set = 0, rv->banks = 0;
    e->th = th, e->busy = 1;
    return rv;
}

/* the end of the call that used view rv (view_reuse's answer given `fresh`): a kept view's owners stamped as they
 * are now, its items held for the next call; the fresh view dropped */
static void view_keep(run_view *rv, run_view *fresh) {
    if (rv == fresh) {
        view_drop(rv);
        return;
    }
    kept_view *e = (kept_view *)rv;         /* (an entry's first member) */
    if (!keep_in_c || !hints_in_c) {        /* (switched off during the call: view_keep_native skipped it, busy) */
        view_drop(rv), rv->tx = NULL;
        e->busy = 0;
        return;
    }
    view_forget(rv, rv->loose);
    PyObject *owners[4] = {rv->tx, rv->tm, rv->th, rv->held >> V_DST & 1 ? rv->v[V_DST] : NULL};
    for (int o = 0; o < 4; o++)
        stamp_owner(&e->own[o], owners[o]);
    e->busy = 0;
}

/* view_keep_native(on): whether plain_run keeps its view between calls (sfpu_issue_native.VIEW_KEEP_NATIVE; off: the
 * kept views dropped, each call reads its items anew) */
static PyObject *view_keep_native(PyObject *self, PyObject *on) {
    (void)self;
    if (switch_set(on, &keep_in_c))
        return NULL;
    for (int i = 0; !keep_in_c && i < VIEW_KEEP; i++)
        if (!kept_views[i].busy)
            view_drop(&kept_views[i].rv), kept_views[i].rv.tx = NULL;
    Py_RETURN_NONE;
}

/* view_keep_counts() -> how often a plain_run call found an owner's items kept, since the module was loaded */
static PyObject *view_keep_counts(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    return PyLong_FromLongLong(view_keep_hits);
}

/* tx.tm, tx.threads and tx.instructions (lists of 3 or the C state's views) and tx.mm_record (its truth in *mm),
 * new references, through tx's part of the entry e where it holds (else read, and that part filled): 0, or -1 with an
 * exception set (all NULL) */
static int tx_attrs(tx_memo_entry *e, PyObject *tx, PyObject **tm, PyObject **threads, PyObject **instr, int *mm) {
    if (e->tx == tx && dict_unchanged(tx, e->txd, e->vtx, e->tag_tx)
        && !(PyList_Check(e->threads) && PyList_GET_SIZE(e->threads) < 3)
        && !(PyList_Check(e->instr) && PyList_GET_SIZE(e->instr) < 3)) {    /* (shortened: attr_list's error) */
        *tm = Py_NewRef(e->tm), *threads = Py_NewRef(e->threads), *instr = Py_NewRef(e->instr);
        *mm = e->mm != Py_None;
        return 0;
    }
    e->tx = NULL;
    PyObject *const txn[4] = {s_mm_record, s_tm, s_threads, s_instructions};
    PyObject *txd = names_dict(tx, txn, 4, &e->tag_tx);
    uint64_t v = txd ? dict_version(txd) : 0;
    PyObject *mm_o = get_attr(tx, s_mm_record);
    *mm = mm_o && mm_o != Py_None;
    *tm = mm_o ? get_attr(tx, s_tm) : NULL;
    *threads = *tm ? attr_list(tx, s_threads, 3) : NULL;
    *instr = *threads ? attr_list(tx, s_instructions, 3) : NULL;
    Py_XDECREF(mm_o);           /* (kept below only while tx's dict, which holds it, is as it was) */
    if (!*instr) {
        Py_CLEAR(*tm);
        Py_CLEAR(*threads);
        return -1;
    }
    if (txd && exact_dict(tx) == txd && dict_version(txd) == v) {  /* (read from the dict, which stayed as it was) */
        e->tx = tx, e->txd = txd, e->vtx = v;
        e->tm = *tm, e->threads = *threads, e->instr = *instr, e->mm = mm_o;
    }
    return 0;
}

/* tm's lists into L (new references) through the entry e's lists where they hold for tm, else tm_lists_get (and
 * those kept where they are tm's dict's own): 0, or -1 with an exception set (L empty) */
static int tm_lists_memo(tx_memo_entry *e, PyObject *tm, tm_lists *L) {
    PyObject **to = &L->clock;
    if (e->tmd && e->tx && e->tm == tm && dict_unchanged(tm, e->tmd, e->vtm, e->tag_tm)) {
        for (int k = 0; k < TIMING_BOUND; k++)
            to[k] = Py_NewRef(e->lists[k]);
        tx_memo_hits++;
        return 0;
    }
    e->tmd = NULL;
    if (tm_lists_get(tm, L))
        return -1;
    /* (tm_lists_get may answer from its own memo of the lists bound with the same clock list: kept only where they
     * are what tm's dict holds now) */
    PyObject *const tmn[TIMING_BOUND] = {s_clock, s_fe, s_gate, s_after_mop, s_first, s_stalls, s_issued, s_taken};
    PyObject *tmd = e->tx && e->tm == tm ? names_dict(tm, tmn, TIMING_BOUND, &e->tag_tm) : NULL;
    for (int k = 0; tmd && k < TIMING_BOUND; k++)
        if (PyDict_GetItem(tmd, tmn[k]) != to[k])
            tmd = NULL;
    if (tmd) {
        e->tmd = tmd, e->vtm = dict_version(tmd);
        memcpy(e->lists, to, sizeof e->lists);
    }
    return 0;
}

/* tx.tm, tx.threads, tx.instructions and tm's lists, new references, and whether tx.mm_record is not None (*mm),
 * through tx's memo entry where the memo is on: 0, or -1 with an exception set (all NULL) */
static int tx_parts(PyObject *tx, PyObject **tm, PyObject **threads, PyObject **instr, int *mm, tm_lists *L) {
    int on = DICT_TAGS ? plain_memos_on() : 0;
    *tm = *threads = *instr = NULL;
    if (on < 0)
        return -1;
    if (!on) {
        PyObject *mm_o = get_attr(tx, s_mm_record);
        *mm = mm_o && mm_o != Py_None;
        *tm = mm_o ? get_attr(tx, s_tm) : NULL;
        Py_XDECREF(mm_o);
        *threads = *tm ? attr_list(tx, s_threads, 3) : NULL;
        *instr = *threads && !tm_lists_get(*tm, L) ? attr_list(tx, s_instructions, 3) : NULL;
    } else {
        tx_memo_entry *e = tx_memo_slot(tx);
        if (!tx_attrs(e, tx, tm, threads, instr, mm) && tm_lists_memo(e, *tm, L))
            Py_CLEAR(*instr);
    }
    if (!*instr) {
        Py_CLEAR(*tm);
        Py_CLEAR(*threads);
        tm_lists_release(L);
        return -1;
    }
    return 0;
}

/* plain_memo_hits(): (words of a pushed run whose facts the run memo answered, plain_run calls whose Tensix reads its
 * memo answered) since the module was loaded */
static PyObject *plain_memo_hits(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    return Py_BuildValue("(LL)", run_memo_hits, tx_memo_hits);
}

/* whether the FIFO's ring q (taken[th]) holds `depth` words (1, *oldest = q[0]) or fewer (0); -1 with an exception
 * set. A view of the C state is read directly; a deque through len(q) and q[0]. */
static int fifo_full_oldest(PyObject *q, long long *oldest) {
    int rth;
    ThreadTiming *rs = ring_state(q, &rth);
    if (rs) {
        if (rs->taken_len[rth] != depth)
            return 0;
        *oldest = ring_oldest(rs, rth);
        return 1;
    }
    Py_ssize_t qlen = PySequence_Size(q);
    if (qlen != depth)
        return qlen < 0 ? -1 : 0;
    PyObject *o = PySequence_GetItem(q, 0);
    int bad = !o || get_ll(o, "taken", oldest);
    Py_XDECREF(o);
    return bad ? -1 : 1;
}

/* TensixTiming.accept for a word pushed at t to a thread whose recent FIFO departures are q (taken[th]): a full FIFO,
 * whose last `depth` words all left after t, holds the push until the oldest left. *a: the accept cycle. 0, or -1 with
 * an exception set. */
static int fifo_accept(PyObject *q, long long t, long long *a) {
    long long oldest;
    int full = fifo_full_oldest(q, &oldest);
    *a = full > 0 && oldest > t ? oldest : t;
    return full < 0 ? -1 : 0;
}

/* q.append(v) for taken[th] (a ring of the C state: pushed directly; a deque: its append): 0, or -1 with an
 * exception set */
static int ring_push_ll(PyObject *q, long long v) {
    int rth;
    ThreadTiming *rs = ring_state(q, &rth);
    if (rs) {
        ring_push(rs, rth, v);
        return 0;
    }
    PyObject *o = PyLong_FromLongLong(v), *r = o ? append_call(q, o) : NULL;
    Py_XDECREF(o);
    Py_XDECREF(r);
    return r ? 0 : -1;
}

/* TensixTiming.accept then take, for a word pushed at t to thread th (the rows: the cycle model's lists or
 * timing_state.c's views; q: taken[th]). accept (with `accept`): a full FIFO, whose last `depth` words all left after
 * t, holds the push until the oldest left; without it the word was accepted at t and is taken from the FIFO now. take:
 * its departure max(a, clock) goes into q, and fe = max(a, fe), fe first past the MOP transition penalty where
 * after_mop (then cleared). *a_out: the accept cycle a. 0, or -1 with an exception set. */
static int accept_take(PyObject *clock_l, PyObject *fe_l, PyObject *after_l, PyObject *q, long long th, long long t,
                       int accept, long long *a_out) {
    long long clock, fe, a = t;
    if (list_ll(clock_l, th, &clock) || list_ll(fe_l, th, &fe) || (accept && fifo_accept(q, t, &a)))
        return -1;
    int after = after_mop_of(after_l, th);
    if (after < 0)
        return -1;
    if (ring_push_ll(q, a > clock ? a : clock))
        return -1;
    if (after) {                                        /* the MOP transition penalty */
        fe = (fe > clock + 1 ? fe : clock + 1) + mop_penalty;
        if (after_mop_clear(after_l, th) < 0)
            return -1;
    }
    *a_out = a;
    return set_item_ll(fe_l, th, a > fe ? a : fe);
}

/* accept_take for thread th on the C state s whose rows plain_run_core's are (rows_state): the same updates, read and
 * written in s */
static void accept_take_state(ThreadTiming *s, int th, long long t, long long *a_out) {
    long long clock = s->clock[th], fe = s->fe[th], a = t;
    if (s->taken_len[th] == depth && ring_oldest(s, th) > t)       /* (fifo_accept: a full FIFO holds the push) */
        a = ring_oldest(s, th);
    ring_push(s, th, a > clock ? a : clock);
    if (s->after_mop[th]) {                                         /* the MOP transition penalty */
        fe = (fe > clock + 1 ? fe : clock + 1) + mop_penalty;
        s->after_mop[th] = 0;
    }
    *a_out = a;
    s->fe[th] = a > fe ? a : fe;
}

/* Tensix.drain's first test in C, for plain_run's pushes into a busy thread (about ten thousand a matmul256 launch
 * find its thread blocked on the same Src banks) and step_run's drains: 1 when drain(thread) would return 0 at once,
 * having changed nothing (the thread's head word blocked in its handler on a Src bank, tensix.RETRY_ON_BANK_CHANGE
 * on, read at each call so that a test turning it off reaches Python, and the banks as they were then:
 * src_bank_state's eight items), 0 when drain must run (also where `drain` is not Tensix.drain itself: a spy on the
 * class or the instance), -1 with an exception set. */
static int drain_idle(run_view *rv) {
    if (tensix_refs())
        return -1;
    int ref = method_is_ref(rv->tx, s_drain, tensix_drain, NULL);
    if (ref <= 0)
        return ref;
    PyObject *retry = PyDict_GetItemWithError(PyModule_GetDict(tensix_module), s_retry_on_bank_change);
    if (!retry)
        return PyErr_Occurred() ? -1 : 0;
    PyObject *th = rv->th, *v = th_get(th, TS_BANK_WAIT);
    int idle = v ? PyObject_IsTrue(v) : -1;
    Py_XDECREF(v);
    if (idle > 0) {
        v = th_get(th, TS_BLOCKED);
        idle = v ? v != Py_None : -1;
        Py_XDECREF(v);
    }
    if (idle > 0)
        idle = PyObject_IsTrue(retry);
    PyObject *state = idle > 0 ? get_attr(th, s_bank_state) : NULL;
    if (!state)
        return idle > 0 ? -1 : idle;
    PyObject *va = view_list(rv, V_SRCA_VALID), *vb = va ? view_list(rv, V_SRCB_VALID) : NULL;
    PyObject *const side[4] = {s_srca_unpack_bank, s_srca_matrix_bank, s_srcb_unpack_bank, s_srcb_matrix_bank};
    idle = !vb ? -1 : PyTuple_CheckExact(state) && PyTuple_GET_SIZE(state) == 8 && PyList_GET_SIZE(va) == 2
                          && PyList_GET_SIZE(vb) == 2;
    for (int i = 0; idle > 0 && i < 8; i++) {   /* (src_bank_state's order: valid A0 A1 B0 B1, then the banks) */
        PyObject *now = i < 4 ? Py_NewRef(PyList_GET_ITEM(i < 2 ? va : vb, i & 1)) : get_attr(rv->tx, side[i - 4]);
        idle = now ? PyObject_RichCompareBool(PyTuple_GET_ITEM(state, i), now, Py_EQ) : -1;
        Py_XDECREF(now);
    }
    Py_DECREF(state);
    return idle;
}

static PyObject *cdrain_run(run_view *rv, PyObject *tobj);     /* (below: Tensix.drain in C) */

/* plain_run's work for words[j:] of the tuple `words` pushed to thread th (tobj: its int) from cycle t on, shared by
 * the Python-callable plain_run and the C entry plain_run_c (below). facts: word -> (name, fields, handler, (tx.current
 * for threads 0, 1, 2), packed plain_facts) or None; recording: an MVMUL run records (accel/fpu_batch.py): only MVMULs
 * are taken then, else no MVMUL (-1: whether tx.mm_record is not None, read with the Tensix's other attributes).
 * A word pushed while the thread has work queued goes into its FIFO and the thread drains (FrontendMixin.push; the
 * drain: cdrain_run), any word; else it is issued directly (plain_word) if it has facts and the thread holds no
 * REPLAY load and no blocked word. It stops before a word it does not take (a full FIFO: the Python path raises the
 * Stall). The caller has checked that no timeline is attached and direct issue is on. 0 with *j_io / *t_io = (next j,
 * next push time); -1 with an exception set and *at_j / *at_t = the word being pushed then and its push time (*at_j
 * -1: before the first word was pushed). The thread's queues are read from their slots (th_get): an attribute read
 * each had cost ~145 x86 instructions a call. */
static int plain_run_core(PyObject *tx, PyObject *words, PyObject *tobj, long long th, PyObject *facts, int recording,
                          long long *j_io, long long *t_io, long long *at_j, long long *at_t) {
    long long j = *j_io, t = *t_io;
    PyObject *tm, *threads, *instr_l;
    tm_lists L = {0};
    int mm, parts_err = tx_parts(tx, &tm, &threads, &instr_l, &mm, &L);
    if (recording < 0)
        recording = mm;
    PyObject *thobj = parts_err ? NULL : PyList_GET_ITEM(threads, th);
    PyObject *ready = thobj ? th_get(thobj, TS_READY) : NULL;
    PyObject *fifo = ready ? th_get(thobj, TS_FIFO) : NULL;
    PyObject *fifo_t = fifo ? th_get(thobj, TS_FIFO_T) : NULL;
    PyObject *mop_out = fifo_t ? th_get(thobj, TS_MOP_OUT) : NULL;
    int ok = 0;
    run_view fresh, *rv = view_reuse(tx, tm, thobj, th, &fresh);    /* (kept from the last call where it stands) */
    *at_j = -1, *at_t = 0;                  /* the word being pushed, for the caller if an exception leaves */
    int memo_err = 0, rows_err = 0;
    run_memo_entry *memo = mop_out ? run_memo_for(words, facts, &memo_err) : NULL;
    ThreadTiming *rs = mop_out && !memo_err ? rows_state(&L, th, &rows_err) : NULL;
    if (!mop_out || memo_err || rows_err)
        goto out;
    /* (the instruction counts: tx.instructions, the C state's own row where rs is that state) */
    long long *icount = rs && row_state(instr_l) == rs && ((TimingRow *)instr_l)->row == ROW_INSTRUCTIONS
                            ? &rs->instructions[th] : NULL;
    PyObject *q = PyList_GET_ITEM(L.taken, th);
    Py_ssize_t n = PyTuple_GET_SIZE(words);
    while (j < n) {
        PyObject *w = PyTuple_GET_ITEM(words, j);
        Py_ssize_t nfifo = PyObject_Length(fifo), nready = PyObject_Length(ready), nmop = PyObject_Length(mop_out);
        if (nfifo < 0 || nready < 0 || nmop < 0)
            goto out;
        if (nfifo || nready || nmop) {
            /* FrontendMixin.push: a thread with work queued takes any word into its FIFO, then drains */
            long long wv;
            if (get_ll(w, "word", &wv))
                goto out;
            if (nfifo >= fifo_depth || wv < 0 || wv > 0xFFFFFFFFLL)
                break;                                  /* (the Python path raises the Stall, masks the word) */
            *at_j = j, *at_t = t;
            long long a;
            if (fifo_accept(q, t, &a))                  /* TensixTiming.accept */
                goto out;
            PyObject *a_o = PyLong_FromLongLong(a), *r = NULL, *r2 = NULL, *r3 = NULL;
            if (a_o && (r = append_call(fifo, w)) && (r2 = append_call(fifo_t, a_o))) {
                int idle = drain_idle(rv);
                r3 = idle < 0 ? NULL : idle ? Py_NewRef(Py_None) : cdrain_run(rv, tobj);
            }
            view_drop(rv);
            Py_XDECREF(a_o), Py_XDECREF(r), Py_XDECREF(r2), Py_XDECREF(r3);
            if (!r3)
                goto out;
            t = a + 1;
            j++;
            continue;
        }
        /* direct issue: the thread's frontend is empty; not while a REPLAY load records or a word is blocked */
        PyObject *load = th_get(thobj, TS_REPLAY_LOAD);
        PyObject *blocked = load ? th_get(thobj, TS_BLOCKED) : NULL;
        int busy = load && blocked && (load != Py_None || blocked != Py_None);
        Py_XDECREF(load);
        Py_XDECREF(blocked);
        if (!load || !blocked)
            goto out;
        if (busy)
            break;
        PyObject *rec;
        int found = run_record(memo, words, facts, w, j, &rec);
        if (found < 0)
            goto out;
        if (!found)
            break;
        if (((const plain_facts *)PyBytes_AS_STRING(PyTuple_GET_ITEM(rec, 4)))->is_mvmul != recording)
            break;                                      /* (the drain's MVMUL recording: direct_issue.push's rule) */
        *at_j = j, *at_t = t;
        long long a;
        if (rs)
            accept_take_state(rs, (int)th, t, &a);
        else if (accept_take(L.clock, L.fe, L.after_mop, q, th, t, 1, &a))
            goto out;
        /* at the head of the ready queue while the Wait Gate and the handler decide */
        PyObject *r = append_call(ready, w);
        if (!r)
            goto out;
        Py_DECREF(r);
        if (put_current(tx, PyTuple_GET_ITEM(PyTuple_GET_ITEM(rec, 3), th)))
            goto out;
        long long c;
        int issued = plain_word(rv, &L, rs, tobj, th, rec, PyTuple_GET_ITEM(rec, 1), 0, &c);
        if (issued < 0)
            goto out;
        j++;
        t = a + 1;
        if (!issued)
            break;                                      /* blocked: it stays at the head */
        r = popleft_call(ready);
        if (!r)
            goto out;
        Py_DECREF(r);
        if (th_set(thobj, TS_BLOCKED, Py_None))
            goto out;
        long long cnt;
        if (icount)
            ++*icount;
        else if (list_ll(instr_l, th, &cnt) || set_item_ll(instr_l, th, cnt + 1))
            goto out;
    }
    ok = 1;
    *j_io = j, *t_io = t;
out:
    view_keep(rv, &fresh);
    Py_XDECREF(tm);
    Py_XDECREF(threads);
    Py_XDECREF(ready);
    tm_lists_release(&L);
    Py_XDECREF(instr_l);
    Py_XDECREF(fifo);
    Py_XDECREF(fifo_t);
    Py_XDECREF(mop_out);
    return ok ? 0 : -1;
}

/* plain_run(tx, words, j, t, thread, facts, progress, recording) -> (next j, next push time): plain_run_core from
 * Python (direct_issue.py push_run). progress: a list whose items 0 and 1 hold (j, push time) of the word being pushed
 * when an exception leaves (left as they were if none was). */
static PyObject *plain_run(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 8 || !PyTuple_Check(args[1]) || !PyDict_Check(args[5]) || !PyList_Check(args[6])
        || PyList_GET_SIZE(args[6]) != 2) {
        PyErr_SetString(PyExc_TypeError, "plain_run(tx, words: tuple, j, t, thread, facts: dict, progress: list, "
                                         "recording)");
        return NULL;
    }
    int recording = PyObject_IsTrue(args[7]);
    if (recording < 0)
        return NULL;
    PyObject *progress = args[6];
    long long j, t, th, at_j, at_t;
    if (get_ll(args[2], "j", &j) || get_ll(args[3], "t", &t) || get_ll(args[4], "thread", &th))
        return NULL;
    if (th < 0 || th > 2 || j < 0) {
        PyErr_SetString(PyExc_ValueError, "plain_run: no such thread or position");
        return NULL;
    }
    if (!plain_run_core(args[0], args[1], args[4], th, args[5], recording, &j, &t, &at_j, &at_t))
        return Py_BuildValue("(LL)", j, t);
    if (at_j >= 0) {
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);
        if (set_item_ll(progress, 0, at_j) || set_item_ll(progress, 1, at_t))
            PyErr_Clear();                              /* (the first exception is the one to report) */
        PyErr_Restore(et, ev, tb);
    }
    return NULL;
}

/* plain_run's C entry for rv32_native.c's pushes (the capsule "sfpu_issue.plain_run_c"; sfpu_issue_native.py
 * PLAIN_ENTRY_NATIVE): plain_run_core for the Tensix tx's thread `tobj` (an int 0..2), the MVMUL recording read from
 * tx.mm_record as push_run reads it, without plain_run's argument parsing, result tuple or progress list (each ~0.5-1k
 * x86 instructions a call, some 5,500 calls an elementwise512 launch). 0 with *j_io / *t_io = (next j, next push
 * time); -1 with an exception set and *j_io / *t_io = the word being pushed then and its push time (as given if it
 * raised before the first word). */
static int plain_run_c(PyObject *tx, PyObject *words, PyObject *tobj, PyObject *facts, long long *j_io,
                       long long *t_io) {
    long long th, at_j, at_t;
    if (!PyTuple_Check(words) || !PyDict_Check(facts)) {
        PyErr_SetString(PyExc_TypeError, "plain_run_c(tx, words: tuple, thread, facts: dict, j, t)");
        return -1;
    }
    if (get_ll(tobj, "thread", &th))
        return -1;
    if (th < 0 || th > 2 || *j_io < 0) {
        PyErr_SetString(PyExc_ValueError, "plain_run: no such thread or position");
        return -1;
    }
    if (!plain_run_core(tx, words, tobj, th, facts, -1, j_io, t_io, &at_j, &at_t))
        return 0;
    if (at_j >= 0)
        *j_io = at_j, *t_io = at_t;
    return -1;
}

/* TensixTiming.take of the FIFO's head word, not a MOP (popped from fifo and fifo_t): 0, or -1 with an exception */
static int fifo_take(const tm_lists *L, long long th, PyObject *fifo, PyObject *fifo_t) {
    PyObject *pt = popleft_call(fifo_t), *r = pt ? popleft_call(fifo) : NULL;
    Py_XDECREF(r);
    long long push_t, a;
    int bad = !r || get_ll(pt, "fifo_t", &push_t)
              || accept_take(L->clock, L->fe, L->after_mop, PyList_GET_ITEM(L->taken, th), th, push_t, 0, &a);
    Py_XDECREF(pt);
    return bad ? -1 : 0;
}

/* frontend's constants and caches and the replay buffer's names, which mop_batch_native.c (included below) defines */
static PyObject *mop_frontend, *s_op_replay, *s_used_bits, *s_replay_name, *s_replay_fields, *s_len, *s_start_idx,
    *s_load_mode, *s_ewl, *s_replay_buf, *s_extend;
static int mop_init(void);
static int mop_frontend_ll(PyObject *name, PyObject *bits_of, long long *out);
static int mop_field(PyObject *fields, PyObject *name, long long *out);
static PyObject *dict_get(PyObject *d, PyObject *key);

/* drain_run's replay expander for word w at the FIFO's head, no REPLAY load under way (next_instruction's REPLAY
 * that plays back, not from a MOP): the FIFO's take (TensixTiming.take, not a MOP), then the buffered words
 * replay_buf[start_idx + i mod 32], i < len, to the ready queue. matmul256's unpacker REPLAYs come this way, some 770
 * a warm launch, each a Python next_instruction and a second drain_run call before. 1 when it expanded w; 0 when w is
 * left to Python's next_instruction, nothing changed: not a REPLAY, reserved bits set in strict mode (Python raises),
 * a load (load_mode), len 0 or execute_while_loading alone (Python raises), its fields not in frontend's cache yet
 * (Python fills it); -1 with an exception set. */
static int drain_replay(PyObject *tx, const tm_lists *L, long long th, PyObject *thobj, PyObject *w, PyObject *fifo,
                        PyObject *fifo_t, PyObject *ready) {
    long long wv, op_replay, used, count, start, load_mode, ewl;
    if (!PyLong_Check(w) || get_ll(w, "word", &wv) || mop_init())
        return -1;
    if (mop_frontend_ll(s_op_replay, NULL, &op_replay) || wv < 0 || wv > 0xFFFFFFFFLL || (wv >> 24) != op_replay
        || mop_frontend_ll(s_used_bits, s_replay_name, &used))
        return 0;
    PyObject *strict_o = get_attr(tx, s_strict);
    int strict = strict_o ? PyObject_IsTrue(strict_o) : -1;
    Py_XDECREF(strict_o);
    if (strict < 0)
        return -1;
    if (strict && (wv & ~used & 0xFFFFFFFFLL))
        return 0;
    PyObject *cache = PyDict_GetItemWithError(mop_frontend, s_replay_fields);
    PyObject *fields = cache ? dict_get(cache, w) : NULL;
    int usable = fields && PyDict_Check(fields) && !mop_field(fields, s_len, &count)
                 && !mop_field(fields, s_start_idx, &start) && !mop_field(fields, s_load_mode, &load_mode)
                 && !mop_field(fields, s_ewl, &ewl);
    Py_XDECREF(fields);
    if (PyErr_Occurred())
        return -1;
    if (!usable || load_mode || ewl || count < 1 || count > 32 || start < 0 || start > 31)
        return 0;
    PyObject *rb = get_attr(thobj, s_replay_buf);
    if (!rb)
        return -1;
    PyObject *seq = PyList_Check(rb) && PyList_GET_SIZE(rb) == 32 ? PyList_New((Py_ssize_t)count) : NULL;
    for (Py_ssize_t i = 0; seq && i < count; i++)
        PyList_SET_ITEM(seq, i, Py_NewRef(PyList_GET_ITEM(rb, (start + i) % 32)));
    Py_DECREF(rb);
    if (!seq)
        return PyErr_Occurred() ? -1 : 0;
    PyObject *r = fifo_take(L, th, fifo, fifo_t) ? NULL : call_method(ready, s_extend, &seq, 1);
    Py_DECREF(seq);
    if (!r)
        return -1;
    Py_DECREF(r);
    return 1;
}

/* drain_run(tx, thread, facts) -> (issued, more): Tensix._drain's loop while the head of the thread's queue is a word
 * plain_run takes (its facts in `facts`), what next_instruction and issue_head do for it: the next word of the MOP
 * expander's output, else of the FIFO (no REPLAY load; the word not one the expanders act on, as no such word has
 * facts) goes to the ready queue, the FIFO's taken (TensixTiming.take), and a REPLAY that plays back from the FIFO's
 * head is expanded (drain_replay); the head, blocked before or not, goes through the Wait Gate, the handler and the
 * issue rule (plain_word); a recorded MVMUL run is executed before any other word (flush_mvmul(keep=True)). Returns
 * the words issued, and more = True when the head is left for Python's loop (a word without facts, MOP work, a REPLAY
 * drain_replay leaves), False when the thread is empty or its head blocked. The caller counts the instructions. */
static PyObject *drain_run(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !PyDict_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "drain_run(tx, thread, facts: dict)");
        return NULL;
    }
    PyObject *tx = args[0], *tobj = args[1], *facts = args[2];
    long long th;
    if (get_ll(tobj, "thread", &th))
        return NULL;
    if (th < 0 || th > 2) {
        PyErr_SetString(PyExc_ValueError, "drain_run: no such thread");
        return NULL;
    }
    PyObject *tm = get_attr(tx, s_tm), *threads = tm ? attr_list(tx, s_threads, 3) : NULL;
    PyObject *thobj = threads ? PyList_GET_ITEM(threads, th) : NULL;
    PyObject *ready = thobj ? get_attr(thobj, s_ready) : NULL;
    PyObject *fifo = ready ? get_attr(thobj, s_fifo) : NULL;
    PyObject *fifo_t = fifo ? get_attr(thobj, s_fifo_t) : NULL;
    PyObject *mop_out = fifo_t ? get_attr(thobj, s_mop_out) : NULL;
    PyObject *result = NULL, *r;
    tm_lists L = {0};
    run_view rv = {tx, tm, thobj};
    long long issued = 0;
    int more = 0, rows_err = 0;
    ThreadTiming *rs = mop_out && !tm_lists_get(tm, &L) ? rows_state(&L, th, &rows_err) : NULL;
    if (!L.clock || rows_err)
        goto out;
    for (;;) {
        Py_ssize_t nready = PyObject_Length(ready);
        if (nready < 0)
            goto out;
        if (nready == 0) {
            Py_ssize_t nmop = PyObject_Length(mop_out), nfifo = PyObject_Length(fifo);
            if (nmop < 0 || nfifo < 0 || th_set(thobj, TS_BATCH_SKIP, zero))
                goto out;
            if (!nmop && !nfifo)
                break;
            PyObject *load = th_get(thobj, TS_REPLAY_LOAD);
            if (!load)
                goto out;
            Py_DECREF(load);
            PyObject *w = PySequence_GetItem(nmop ? mop_out : fifo, 0);     /* (the MOP expander's output first) */
            if (!w)
                goto out;
            PyObject *rec = PyDict_GetItemWithError(facts, w);
            if (load != Py_None || !rec || rec == Py_None) {
                int expanded = PyErr_Occurred() ? -1 : load != Py_None || nmop ? 0
                                                       : drain_replay(tx, &L, th, thobj, w, fifo, fifo_t, ready);
                Py_DECREF(w);
                if (expanded < 0)
                    goto out;
                if (expanded)
                    continue;                           /* its words at the head now */
                more = 1;
                break;
            }
            /* a word the MOP expander emitted has no frontend timing; the FIFO's is taken (TensixTiming.take) */
            r = nmop ? popleft_call(mop_out) : fifo_take(&L, th, fifo, fifo_t) ? NULL : Py_NewRef(Py_None);
            Py_XDECREF(r);
            r = r ? append_call(ready, w) : NULL;
            Py_DECREF(w);
            if (!r)
                goto out;
            Py_DECREF(r);
        }
        PyObject *head = PySequence_GetItem(ready, 0);
        if (!head)
            goto out;
        PyObject *rec;
        int found = plain_record(facts, head, "drain_run", &rec);
        Py_DECREF(head);                                /* (the queue keeps it) */
        if (found < 0)
            goto out;
        if (!found) {
            more = 1;
            break;
        }
        if (!((const plain_facts *)PyBytes_AS_STRING(PyTuple_GET_ITEM(rec, 4)))->is_mvmul) {
            PyObject *mm = get_attr(tx, s_mm_record);
            int recorded = mm ? PyObject_IsTrue(mm) : -1;
            Py_XDECREF(mm);
            if (recorded < 0)
                goto out;
            if (recorded) {                             /* anything else sees the recorded MVMULs' Dst */
                PyObject *keep = Py_True;
                r = call_method(tx, s_flush_mvmul, &keep, 1);
                view_drop(&rv);
                if (!r)
                    goto out;
                Py_DECREF(r);
            }
        }
        PyObject *blocked = th_get(thobj, TS_BLOCKED);
        if (!blocked)
            goto out;
        int was_blocked = blocked != Py_None;
        Py_DECREF(blocked);
        if (put_current(tx, PyTuple_GET_ITEM(PyTuple_GET_ITEM(rec, 3), th)))
            goto out;
        long long c;
        int ok = plain_word(&rv, &L, rs, tobj, th, rec, PyTuple_GET_ITEM(rec, 1), was_blocked, &c);
        if (ok < 0)
            goto out;
        if (!ok)
            break;                                      /* blocked: it stays at the head */
        r = popleft_call(ready);
        if (!r)
            goto out;
        Py_DECREF(r);
        if (th_set(thobj, TS_BLOCKED, Py_None))
            goto out;
        issued++;
    }
    result = Py_BuildValue("(LO)", issued, more ? Py_True : Py_False);
out:                            /* (on an error, the words issued before it are not counted: as _drain) */
    view_drop(&rv);
    tm_lists_release(&L);
    Py_XDECREF(tm);
    Py_XDECREF(threads);
    Py_XDECREF(ready);
    Py_XDECREF(fifo);
    Py_XDECREF(fifo_t);
    Py_XDECREF(mop_out);
    return result;
}

/* the names and the counting helper defined further down (push_one's and mop_batch_native.c's) */
static PyObject *s_rec, *s_sfpu_timing, *s_dict, *s_issue;
static int count_issued(PyObject *tx, long long th, long long n);

/* Tensix's own _drain, drain_in_c and flush_mvmul, the Tensix's facts dict's name, fpu_batch's module dict (its
 * BATCH_MVMUL, read at each drain: tests turn it off) */
static struct {
    PyObject *pydrain, *drain_in_c, *flush, *s_pydrain, *s_drain_in_c, *s_plain, *fpu_batch, *s_batch;
} cdrain;
static int cdrain_refs(void) {
    if (cdrain.fpu_batch)
        return 0;
    if (tensix_refs())
        return -1;
    PyObject *cls = PyObject_GetAttrString(tensix_module, "Tensix");
    PyObject *fb = cls ? PyImport_ImportModule("tt_backend.runtime.emu.accel.fpu_batch") : NULL;
    int ok = fb && (cdrain.s_pydrain = PyUnicode_InternFromString("_drain"))
             && (cdrain.s_drain_in_c = PyUnicode_InternFromString("drain_in_c"))
             && (cdrain.s_plain = PyUnicode_InternFromString("_plain"))
             && (cdrain.s_batch = PyUnicode_InternFromString("BATCH_MVMUL"))
             && (cdrain.pydrain = PyObject_GetAttr(cls, cdrain.s_pydrain))
             && (cdrain.drain_in_c = PyObject_GetAttr(cls, cdrain.s_drain_in_c))
             && (cdrain.flush = PyObject_GetAttr(cls, s_flush_mvmul));
    Py_XDECREF(cls);
    if (!ok) {
        Py_XDECREF(fb);
        return -1;
    }
    cdrain.fpu_batch = PyModule_GetDict(fb);    /* (the module stays imported: a borrowed dict is safe) */
    Py_INCREF(cdrain.fpu_batch);
    Py_DECREF(fb);
    return 0;
}

/* 1 where the drain may run in C: drain, _drain, drain_in_c and flush_mvmul Tensix's own (no spy on the class or the
 * instance) and DirectIssueMixin._c_issue_allowed's test passed (no timeline recorded, the cycle model not spied);
 * 0 where not, -1 with an exception set */
static int cdrain_allowed(PyObject *tx, PyObject *tm) {
    int ok = method_is_ref(tx, s_drain, tensix_drain, NULL);
    if (ok > 0)
        ok = method_is_ref(tx, cdrain.s_pydrain, cdrain.pydrain, NULL);
    if (ok > 0)
        ok = method_is_ref(tx, cdrain.s_drain_in_c, cdrain.drain_in_c, NULL);
    if (ok > 0)
        ok = method_is_ref(tx, s_flush_mvmul, cdrain.flush, NULL);
    PyObject *rec = ok > 0 ? get_attr(tm, s_rec) : NULL, *st = rec ? get_attr(tm, s_sfpu_timing) : NULL;
    PyObject *srec = st ? get_attr(st, s_rec) : NULL, *d = srec ? get_attr(tm, s_dict) : NULL;
    if (d) {
        ok = rec == Py_None && srec == Py_None && PyDict_Check(d) ? !PyDict_Contains(d, s_issue) : 0;
    } else if (ok > 0) {                /* a cycle model without these: Tensix.drain, whose drain_in_c asks again */
        PyErr_Clear();
        ok = 0;
    }
    Py_XDECREF(rec);
    Py_XDECREF(st);
    Py_XDECREF(srec);
    Py_XDECREF(d);
    return ok < 0 ? -1 : ok;
}

/* Tensix.drain(thread) past its first test (the caller's drain_idle answered it), for step_run's and plain_run's
 * drains (matmul256: some 1,180 a warm launch, each a Python drain, _drain and drain_in_c, most of them issuing
 * everything in drain_run): the MVMUL recording around it (mm_record = [] unless one records already or
 * fpu_batch.BATCH_MVMUL is off; then flush_mvmul, called where it has recorded steps, else mm_record = None as it
 * sets it, also when the drain raises), and _drain's loop: drain_run on the Tensix's facts, then where that leaves
 * the head to Python (more) Tensix._drain itself, which goes on from there (its first drain_run returns at once).
 * The words drain_run issued are counted as _drain counts its own: not where the drain raises. Where cdrain_allowed
 * says no, Tensix.drain is called. The executed instructions (a new int), or NULL with an exception set. */
static PyObject *cdrain_run(run_view *rv, PyObject *tobj) {
    long long th, issued = 0;
    int ok = cdrain_refs() || get_ll(tobj, "thread", &th) ? -1 : cdrain_allowed(rv->tx, rv->tm);
    if (ok <= 0)
        return ok < 0 ? NULL : call_method(rv->tx, s_drain, &tobj, 1);
    PyObject *tx = rv->tx, *mm = get_attr(tx, s_mm_record), *batch = PyDict_GetItemWithError(cdrain.fpu_batch,
                                                                                                cdrain.s_batch);
    int record = !mm || !batch ? -1 : mm == Py_None ? PyObject_IsTrue(batch) : 0;
    Py_XDECREF(mm);
    if (record < 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_AttributeError, "fpu_batch.BATCH_MVMUL");
        return NULL;
    }
    PyObject *fresh = record ? PyList_New(0) : NULL;
    if (record && (!fresh || set_attr(tx, s_mm_record, fresh))) {
        Py_XDECREF(fresh);
        return NULL;
    }
    Py_XDECREF(fresh);
    PyObject *facts = get_attr(tx, cdrain.s_plain), *rest = NULL, *r = NULL;
    if (facts) {
        PyObject *a[3] = {tx, tobj, facts};
        r = drain_run(NULL, a, 3);
    }
    view_drop(rv);
    if (r && (get_ll(PyTuple_GET_ITEM(r, 0), "drain_run", &issued)
              || !(rest = PyTuple_GET_ITEM(r, 1) == Py_True ? call_method(tx, cdrain.s_pydrain, &tobj, 1)
                                                              : PyLong_FromLong(0))))
        Py_CLEAR(r);
    view_drop(rv);
    PyObject *n = rest ? PyLong_FromLongLong(issued) : NULL, *total = n ? PyNumber_Add(n, rest) : NULL;
    if (total && count_issued(tx, th, issued))
        Py_CLEAR(total);
    Py_XDECREF(facts);
    Py_XDECREF(r);
    Py_XDECREF(rest);
    Py_XDECREF(n);
    if (record) {                                       /* flush_mvmul(), also where the drain raised */
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);
        PyObject *recs = get_attr(tx, s_mm_record);
        int empty = !recs ? -1 : PyList_CheckExact(recs) && PyList_GET_SIZE(recs) == 0;
        Py_XDECREF(recs);
        PyObject *f = empty < 0 ? NULL : empty ? (set_attr(tx, s_mm_record, Py_None) ? NULL : Py_NewRef(Py_None))
                                               : PyObject_CallMethodNoArgs(tx, s_flush_mvmul);
        view_drop(rv);
        if (!f) {                                       /* (flush_mvmul's error replaces the drain's, as in Python) */
            Py_XDECREF(et), Py_XDECREF(ev), Py_XDECREF(tb);
            Py_CLEAR(total);
        } else {
            Py_DECREF(f);
            PyErr_Restore(et, ev, tb);
        }
    }
    return total;
}

/* step_run(tx) -> instructions executed: Tensix.step's loop: the Wait Gate's latches polled (poll_latches: a latch
 * whose conditions are met is forgotten; latch_met decides, Python's latch_unmet where it cannot, a replaced
 * poll_latches is called instead), then each thread with work queued drained (tx.drain(thread): cdrain_run) unless
 * drain_idle says that drain would return 0 at once (blocked on unchanged Src banks), until no thread moves. */
static PyObject *step_run(PyObject *self, PyObject *tx) {
    PyObject *tm = get_attr(tx, s_tm), *threads = tm ? attr_list(tx, s_threads, 3) : NULL, *r;
    run_view rv = {tx, tm, NULL};
    long long total = 0, n, done;
    int poll_ref = !threads || sync_refs() ? -1 : method_is_ref(tx, h_poll_latches, ref_poll_latches, NULL);
    int bad = poll_ref < 0;
    while (!bad) {
        if (!poll_ref) {
            r = PyObject_CallMethodNoArgs(tx, h_poll_latches);
            view_drop(&rv);
            bad = !r;
            Py_XDECREF(r);
        }
        for (int t = 0; !bad && poll_ref && t < 3; t++) {      /* sync.poll_latches */
            view_drop(&rv);                                     /* (the view's thread items are the old thread's) */
            PyObject *th = rv.th = Py_NewRef(PyList_GET_ITEM(threads, t));    /* (held across latch_unmet's call) */
            PyObject *latch = th_get(th, TS_LATCH), *tobj = PyLong_FromLong(t);
            int met = !latch || !tobj ? -1 : latch == Py_None ? 0 : latch_met(&rv, latch);
            if (met == 2) {
                PyObject *stack[3] = {tx, tobj, latch};
                r = PyObject_VectorcallMethod(s_latch_unmet, stack, 3 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
                view_drop(&rv);
                met = !r ? -1 : r == Py_None;
                Py_XDECREF(r);
            }
            bad = met < 0 || (met == 1 && th_set(th, TS_LATCH, Py_None));
            Py_XDECREF(latch);
            Py_XDECREF(tobj);
            Py_DECREF(th);
        }
        for (int t = n = 0; !bad && t < 3; t++) {
            view_drop(&rv);
            rv.th = PyList_GET_ITEM(threads, t);
            int busy = 0;
            PyObject *const queues[3] = {s_fifo, s_mop_out, s_ready};
            for (int k = 0; !busy && k < 3; k++) {
                PyObject *q = get_attr(rv.th, queues[k]);
                busy = q ? PyObject_IsTrue(q) : -1;
                Py_XDECREF(q);
            }
            int idle = busy > 0 ? drain_idle(&rv) : 0;
            if (busy < 0 || idle < 0) {
                bad = 1;
            } else if (busy && !idle) {
                PyObject *tobj = PyLong_FromLong(t);
                r = tobj ? cdrain_run(&rv, tobj) : NULL;
                view_drop(&rv);
                bad = !r || get_ll(r, "drain", &done);
                n += bad ? 0 : done;
                Py_XDECREF(r);
                Py_XDECREF(tobj);
            }
        }
        if (bad || !n)
            break;
        total += n;
    }
    view_drop(&rv);
    Py_XDECREF(tm);
    Py_XDECREF(threads);
    return bad ? NULL : PyLong_FromLongLong(total);
}

/* push_one(tx, thread, word, t, dq_max, replays): deferral.push's C case whole, for a word pushed by its own push()
 * call to a thread with deferred work queued: push() reads the Tensix's state, the word's facts and the cycle model's
 * lists and calls push_word, then writes its results back; here those Python steps are C attribute reads and writes
 * around the same push_word (about 4 us of push()'s bytecode per word before). A word that is not deferrable goes to
 * replay_push (above) when `replays` is true. Returns None, with nothing changed, wherever push() would not reach
 * push_word with these arguments or push_word does not take the word, or where the queue is empty (push() then asks
 * the SFPU whether it is plain and the lane flags' state): push() goes on as before. Else push()'s return value. */
static PyObject *s_fast, *s_cword, *s_c_ctx, *s_rec, *s_sfpu_timing, *s_dq_flags, *s_dst_raw, *s_written,
    *s_issue, *s_dict;
static PyObject *flag_states[9];      /* deferral's FLAG_STATES: (lf, use), None for "differs between lanes" */

/* getattr(o, name) for push_one's reads, as the generic lookup answers it but without its general steps (about
 * half of push_one's cost was PyObject_GetAttr, then about 300 instructions a read): an attribute no class in the
 * MRO defines (plain_name) is read from the instance's dict, a __slots__ member at its offset; anything else through
 * PyObject_GetAttr. A managed instance dict (Python 3.11+: the attributes kept inline) is made a real dict on the
 * first read (_PyObject_GetDictPtr does so once for good; the interpreter's own attribute caches then use the dict's
 * hint instead of the inline slot: the bench rows that run Python paths did not change, docs/tools.md §2), so a read
 * is one dict look-up. */
/* plain_name's memo: (type, its version tag, name) seen without a class attribute of that name. A type's version tag
 * changes whenever a class in its MRO is modified (PyType_Modified), and a tag is never given to two types, so an
 * entry can neither go stale nor name a later type at a reused address (the interpreter's method cache relies on the
 * same). */
#define PLAIN_MEMO 256      /* (a power of 2; push_one reads some 30 (type, name) pairs) */
#define PLAIN_PROBES 4
static struct { PyTypeObject *tp; unsigned int version; PyObject *name; } plain_memo[PLAIN_MEMO];

/* 1 when no class in tp's MRO defines `name` (the generic lookup then reads the instance's dict), else 0 (its
 * descriptor is the type lookup's answer: d, borrowed) */
static int plain_name(PyTypeObject *tp, PyObject *name, PyObject **d) {
    size_t k = (size_t)((((uintptr_t)tp ^ (uintptr_t)name) * 0x9E3779B97F4A7C15ull) >> 56), free = PLAIN_MEMO;
    unsigned int tag = type_tag(tp);
    *d = NULL;
    for (int j = 0; j < PLAIN_PROBES; j++) {           /* (probing 4 slots: pairs that hash alike keep theirs) */
        size_t i = (k + j) % PLAIN_MEMO;
        if (plain_memo[i].tp == tp && plain_memo[i].name == name) {
            if (tag && plain_memo[i].version == tag)
                return 1;
            free = i;
            break;
        }
        if (free == PLAIN_MEMO && !plain_memo[i].tp)
            free = i;
    }
    *d = _PyType_Lookup(tp, name);       /* (borrowed; it gives tp a version tag where it has none) */
    if (*d || !(tag = type_tag(tp)))
        return !*d;
    if (free == PLAIN_MEMO)
        free = k;
    plain_memo[free].tp = tp;
    plain_memo[free].version = tag;
    plain_memo[free].name = name;
    return 1;
}

/* the instance dict of o for an attribute `name` no class defines (borrowed), or NULL: not such a one, or no dict */
static PyObject *plain_dict(PyObject *o, PyObject *name, PyObject **d) {
    PyTypeObject *tp = Py_TYPE(o);
    if (tp->tp_getattro != PyObject_GenericGetAttr || !plain_name(tp, name, d))
        return NULL;
    PyObject **dp = _PyObject_GetDictPtr(o);
    return dp && *dp && PyDict_CheckExact(*dp) ? *dp : NULL;
}

static PyObject *get_attr(PyObject *o, PyObject *name) {
    PyObject *d = NULL, *dict = plain_dict(o, name, &d);
    if (dict) {
        PyObject *v = PyDict_GetItemWithError(dict, name);
        if (v)
            return Py_NewRef(v);
        if (PyErr_Occurred())
            return NULL;
    } else if (member_offset(d, 0) >= 0) {
        PyObject *v = *(PyObject **)((char *)o + member_offset(d, 0));
        if (v)
            return Py_NewRef(v);
    }
    return PyObject_GetAttr(o, name);    /* (also the AttributeError of a missing one) */
}

/* setattr(o, name, v) for push_one's writes, as get_attr reads: into the instance's dict for an attribute no class
 * defines, a __slots__ member at its offset */
static int set_attr(PyObject *o, PyObject *name, PyObject *v) {
    PyObject *d = NULL, *dict = Py_TYPE(o)->tp_setattro == PyObject_GenericSetAttr ? plain_dict(o, name, &d) : NULL;
    if (dict)
        return PyDict_SetItem(dict, name, v);
    Py_ssize_t off = member_offset(d, 1);
    if (off >= 0) {
        Py_XSETREF(*(PyObject **)((char *)o + off), Py_NewRef(v));
        return 0;
    }
    return PyObject_SetAttr(o, name, v);
}

/* sfpu_format_flags (tensix_sfpu.py)'s second flag: the SrcB format MOD0_FMT_SRCB resolves by is FP16-like */
static int srcb_fp16_like(long long c0, long long c1) {
    long long srcb = (c0 >> 9 & 1) ? (c0 >> 5 & 0xF) : (c1 >> 21 & 0xF);
    return !(srcb == 0 || srcb == 4 || srcb == 5 || srcb == 6 || srcb == 7 || srcb == 15 || srcb == 8 || srcb == 9);
}

/* resolve_sfpu_mode (tensix_sfpu.py): SFPLOAD / SFPSTORE Mod0 0 resolved by config words 0 and 1 */
static long long sfpu_mode_of(long long c0, long long c1) {
    return (c1 >> 30 & 1) ? 3 : srcb_fp16_like(c0, c1) ? 1 : 2;
}

static int flag_code(PyObject *fl, long long *code) {
    if (!PyTuple_Check(fl) || PyTuple_GET_SIZE(fl) != 2)
        return -1;
    long long v[2];
    for (int k = 0; k < 2; k++) {
        PyObject *x = PyTuple_GET_ITEM(fl, k);
        if (x == Py_None)
            v[k] = 2;
        else if (get_ll(x, "a lane-flag state", &v[k]) || v[k] < 0 || v[k] > 1)
            return -1;
    }
    *code = v[0] * 3 + v[1];
    return 0;
}

/* What an issue_run call's caller does with its result (push()'s, push_many's and _ready_run_c's epilogues): the
 * Tensix's issue_t (r[2]; tm its cycle model) and flag state (r[3], a flag_states code); 0, or -1 with an error set */
static int issue_epilogue(PyObject *tx, PyObject *tm, PyObject *r) {
    long long fl, c;
    if (get_ll(PyTuple_GET_ITEM(r, 3), "flags", &fl) || get_ll(PyTuple_GET_ITEM(r, 2), "issue_t", &c))
        return -1;
    if (fl < 0 || fl > 8) {
        PyErr_SetString(PyExc_ValueError, "issue_run: a lane-flag state out of range");
        return -1;
    }
    return set_issue_t(tx, tm, c) < 0 || set_attr(tx, s_dq_flags, flag_states[fl]) < 0 ? -1 : 0;
}

/* Tensix.current = (thread, word, what): the Dst access an error names; 0, or -1 with an error set */
static int set_current(PyObject *tx, PyObject *thread_o, PyObject *word, PyObject *what) {
    PyObject *cur = PyTuple_Pack(3, thread_o, word, what);
    int bad = !cur || set_attr(tx, s_current, cur) < 0;
    Py_XDECREF(cur);
    return bad ? -1 : 0;
}

/* tx.instructions[th] += n: the words issued, counted as _drain counts them; 0, or -1 with an error set */
static int count_issued(PyObject *tx, long long th, long long n) {
    PyObject *instr = get_attr(tx, s_instructions);
    ThreadTiming *s = instr ? row_state(instr) : NULL;     /* (a row of the cycle model's C state: counted there) */
    if (s) {
        long long was;
        int bad = row_ll(s, instr, th, &was) || row_set_ll(s, instr, th, was + n);
        Py_DECREF(instr);
        return bad ? -1 : 0;
    }
    PyObject *was = instr ? PySequence_GetItem(instr, th) : NULL;
    PyObject *d = was ? PyLong_FromLongLong(n) : NULL, *now = d ? PyNumber_Add(was, d) : NULL;
    int bad = !now || PySequence_SetItem(instr, th, now) < 0;
    Py_XDECREF(instr);
    Py_XDECREF(was);
    Py_XDECREF(d);
    Py_XDECREF(now);
    return bad ? -1 : 0;
}

/* The Tensix's config words 0 and 1 (the SFPU's formats: sfpu_mode_of, sfpu_format_flags) as objects (new references
 * in *c0o and *c1o, as far as it got: the caller releases them) and as values; 0, or -1 with an error set */
static int sfpu_cfg_words(PyObject *tx, PyObject **c0o, PyObject **c1o, long long *c0, long long *c1) {
    PyObject *cfg = get_attr(tx, s_cfg);
    int bad = !cfg || !(*c0o = PySequence_GetItem(cfg, 0)) || !(*c1o = PySequence_GetItem(cfg, 1))
              || get_ll(*c0o, "cfg0", c0) || get_ll(*c1o, "cfg1", c1);
    Py_XDECREF(cfg);
    return bad ? -1 : 0;
}

/* The Dst access context of an SFPU load or store (deferral._c_memory): the thread's config and RWCs, Dst's written
 * rows, the FPU's pending Dst writes, the SFPU's load / store mode; a new reference, NULL with an error set */
static PyObject *dst_access(PyObject *tx, PyObject *thobj, PyObject *tm, long long c0, long long c1) {
    PyObject *thcfg = get_attr(thobj, s_cfg), *rwc = thcfg ? get_attr(thobj, s_rwc) : NULL;
    PyObject *dst = rwc ? get_attr(tx, s_dst_raw) : NULL, *written = dst ? get_attr(dst, s_written) : NULL;
    PyObject *fpuw = written ? get_attr(tm, s_dst_fpu_write) : NULL;
    PyObject *mode = fpuw ? PyLong_FromLongLong(sfpu_mode_of(c0, c1)) : NULL;
    PyObject *mem = mode ? PyTuple_Pack(5, thcfg, rwc, written, fpuw, mode) : NULL;
    Py_XDECREF(thcfg);
    Py_XDECREF(rwc);
    Py_XDECREF(dst);
    Py_XDECREF(written);
    Py_XDECREF(fpuw);
    Py_XDECREF(mode);
    return mem;
}

/* The cycle model and the deferred queue as the C issue takes them (push()'s conditions, shared by replay_push,
 * push_one and many_one): no timeline recorded (tm.rec and its SFPU timing's rec None), tm.issue not spied (not in
 * tm's instance dict; no dict: Python's), the queue not empty (unless empty_ok), the C context made with this cycle
 * model (tx._c_ctx[0] is tm.clock), whose state is the C one (timing_state.c). New references to tm, the queue and
 * the context in *tm, *dq, *ctx as far as it got (the caller releases them), the queue's length in *queued; 1 taken,
 * 0 Python's path, -1 with an error set. */
static int plain_issue_state(PyObject *tx, PyObject **tm, PyObject **dq, PyObject **ctx, Py_ssize_t *queued,
                             int empty_ok) {
    PyObject *rec = NULL, *stiming = NULL, *srec = NULL, *tmdict = NULL, *clock = NULL;
    int r = -1, spied = 1;
    if (!(*tm = get_attr(tx, s_tm)) || !(rec = get_attr(*tm, s_rec)) || !(stiming = get_attr(*tm, s_sfpu_timing))
        || !(srec = get_attr(stiming, s_rec)) || !(tmdict = get_attr(*tm, s_dict))
        || (spied = PyDict_Check(tmdict) ? PyDict_Contains(tmdict, s_issue) : 1) < 0)
        goto out;
    if (rec != Py_None || srec != Py_None || spied) {
        r = 0;
        goto out;
    }
    if (!(*dq = get_attr(tx, s_deferred)) || (*queued = PyObject_Length(*dq)) < 0)
        goto out;
    if (!*queued && !empty_ok) {
        r = 0;
        goto out;
    }
    if (!(*ctx = get_attr(tx, s_c_ctx)) || !(clock = get_attr(*tm, s_clock)))
        goto out;
    r = PyTuple_Check(*ctx) && PyTuple_GET_SIZE(*ctx) >= 1 && PyTuple_GET_ITEM(*ctx, 0) == clock
        && row_state(clock);
out:
    Py_XDECREF(rec);
    Py_XDECREF(stiming);
    Py_XDECREF(srec);
    Py_XDECREF(tmdict);
    Py_XDECREF(clock);
    return r;
}

/* The issue block: what push_one and many_one read before their issue, in this order in each one's own slots (a
 * tx._cword, then issue_inputs' new references; the caller releases them) */
enum { B_CWORD, B_TM, B_DQ, B_CTX, B_C0, B_C1, B_FLAGS, B_BLOCKED, B_EVENT, B_N };

static int plain_sfpu_flags(PyObject *tx, PyObject **flags, const char *who);

/* push()'s and push_many's reads after the thread's own checks, into in[B_TM..B_EVENT]: plain_issue_state, the SFPU's
 * config words, the lane-flag state and its code *fl, the thread's blocked and the cycle model's event_t. With
 * empty_ok (push_many's run with nothing queued), an empty queue is taken too, for a plain SFPU, with the lane-flag
 * state deferral.uniform_flags reads from it (push_many's `dq or sfpu.is_plain()` test); else the queue's flags.
 * 1 plain (all read), 0 Python's path, -1 with an error set, -2 a lane-flag state of the wrong kind (the caller's error
 * names it) */
static int issue_inputs(PyObject *tx, PyObject *thobj, PyObject **in, long long *c0, long long *c1, long long *fl,
                        int empty_ok) {
    Py_ssize_t queued;             /* (a new cycle model: push() and push_many make its context) */
    int plain = plain_issue_state(tx, &in[B_TM], &in[B_DQ], &in[B_CTX], &queued, empty_ok);
    if (plain <= 0)
        return plain;
    if (!queued && (plain = plain_sfpu_flags(tx, &in[B_FLAGS], "many_one")) <= 0)
        return plain;
    if (sfpu_cfg_words(tx, &in[B_C0], &in[B_C1], c0, c1) || (queued && !(in[B_FLAGS] = get_attr(tx, s_dq_flags))))
        return -1;
    if (flag_code(in[B_FLAGS], fl))
        return -2;
    if (!(in[B_BLOCKED] = th_get(thobj, TS_BLOCKED)) || !(in[B_EVENT] = tm_obj(in[B_TM], s_event_t)))
        return -1;
    return 1;
}

/* sfpu_run on `words` (one word: push()'s arguments; a tuple: push_many's) from the issue block `in`, with the flag
 * code fl, the latch's block mask and the Dst access context mem (None: none): its result, NULL with an error set */
static PyObject *issue_block_run(PyObject *const *in, PyObject *words, PyObject *t_o, PyObject *thread_o,
                                 PyObject *dq_max, long long fl, long long latch_block, PyObject *mem, int one_word) {
    PyObject *flo = PyLong_FromLongLong(fl), *lbo = PyLong_FromLongLong(latch_block), *r = NULL;
    if (flo && lbo) {
        PyObject *all[16] = {in[B_CTX], words, zero, t_o, thread_o, in[B_CWORD], in[B_DQ], flo, in[B_C0], in[B_C1],
                             thread_o, in[B_BLOCKED] != Py_None ? Py_True : Py_False, in[B_EVENT], dq_max, lbo, mem};
        r = sfpu_run(all, 16, 1, one_word);
    }
    Py_XDECREF(flo);
    Py_XDECREF(lbo);
    return r;
}

/* replay_push(tx, thread, word, t, dq_max): push()'s path for a REPLAY word (replay, not load) pushed on its own to an
 * empty thread, in C: what FrontendMixin.push -> Tensix.drain -> _drain do for it there (with nothing queued, where
 * the SFPU is plain: the first REPLAY after the queue executed; push_entry's configure_push gives uniform_flags).
 * The FIFO accepts the word and the MOP expander takes it (TensixTiming.accept, take); the replay expander puts the
 * buffer's `count` words from `start` in the ready queue; when there are 8 or more, batch_sfpu tries them and finds
 * fewer than BATCH_MIN_REPS repetitions (tx._batch_min_reps; a run of more is left to Python: the check comes before
 * any change), so batch_skip is their count; drain_deferrable issues them as ready_run does (sfpu_run, not pushed),
 * and the drain ends with the thread empty (batch_skip 0). tx._replays maps such a REPLAY word to (start, count)
 * (deferral.py's replay_spec: no reserved bits, count 1..32). Where ready_run stops short of the last word, the
 * words left go to the ready queue and Tensix.drain takes them from there as _drain's loop would have (the words
 * issued counted after it returns, as _drain counts them). Returns None with nothing changed wherever push() would
 * do anything else (no facts for the word, a busy or blocked thread, a latched Wait Gate, MVMULs recorded, a timeline
 * or spied cycle model, a full queue, an empty one with the SFPU not plain, a new cycle model, a first word without C
 * facts, a batch to try);
 * else push()'s return value, the cycle the push was accepted. */
static PyObject *entry_deferral;   /* deferral's module dict (configure_push, below): its uniform_flags */
static PyObject *s_replays, *s_replay_buf, *s_extend, *s_batch_min_reps, *s_is_plain, *s_uniform_flags;

enum { R_REPLAYS, R_THREADS, R_FIFO, R_READY, R_MOPOUT, R_LOAD, R_LATCH, R_BLOCKED, R_MM, R_TM, R_DQ, R_CTX,
       R_CWORD, R_RB, R_WORDS, R_C0, R_C1, R_FLAGS, R_EVENT, R_MEM, R_FLO, R_R, R_A, R_MINREPS, R_N };

static PyObject *replay_push(PyObject *tx, PyObject *thread_o, long long th, PyObject *word, PyObject *t_o,
                             PyObject *dq_max_o) {
    PyObject *o[R_N] = {NULL}, *result = NULL;
    long long start, count, t, dq_max, c0, c1, fl;
#define GET(k, obj, name) (o[k] = get_attr((obj), (name)))
    if (!GET(R_REPLAYS, tx, s_replays))
        goto out;
    if (!PyDict_Check(o[R_REPLAYS]))
        goto none;
    PyObject *spec = PyDict_GetItemWithError(o[R_REPLAYS], word);
    if (!spec) {
        if (PyErr_Occurred())
            goto out;
        goto none;
    }
    if (spec == Py_None)
        goto none;
    if (!PyTuple_Check(spec) || PyTuple_GET_SIZE(spec) != 2 || get_ll(PyTuple_GET_ITEM(spec, 0), "start", &start)
        || get_ll(PyTuple_GET_ITEM(spec, 1), "count", &count) || get_ll(t_o, "t", &t)
        || get_ll(dq_max_o, "dq_max", &dq_max))
        goto bad;
    if (start < 0 || start > 31 || count < 1 || count > 32)
        goto bad;
    /* the thread: empty, no REPLAY load, no latch, not blocked; no MVMULs recorded */
    PyObject *thobj;
    if (!GET(R_THREADS, tx, s_threads) || !(thobj = PySequence_GetItem(o[R_THREADS], th)))
        goto out;
    Py_SETREF(o[R_THREADS], thobj);
    if (!GET(R_FIFO, thobj, s_fifo) || !GET(R_READY, thobj, s_ready) || !GET(R_MOPOUT, thobj, s_mop_out)
        || !GET(R_LOAD, thobj, s_replay_load) || !GET(R_LATCH, thobj, s_latch) || !GET(R_BLOCKED, thobj, s_blocked)
        || !GET(R_MM, tx, s_mm_record))
        goto out;
    for (int k = R_FIFO; k <= R_MOPOUT; k++) {
        Py_ssize_t len = PyObject_Length(o[k]);
        if (len < 0)
            goto out;
        if (len)
            goto none;
    }
    if (o[R_LOAD] != Py_None || o[R_LATCH] != Py_None || o[R_BLOCKED] != Py_None || o[R_MM] != Py_None)
        goto none;
    /* the cycle model and the queue as the C issue takes them (plain_issue_state: an empty queue too where
     * uniform_flags can be asked, below); the queue not full */
    Py_ssize_t queued;
    int plain = plain_issue_state(tx, &o[R_TM], &o[R_DQ], &o[R_CTX], &queued, entry_deferral != NULL);
    if (plain <= 0) {
        if (plain < 0)
            goto out;
        goto none;
    }
    if (!GET(R_CWORD, tx, s_cword))
        goto out;
    if (queued >= dq_max || !PyDict_Check(o[R_CWORD]) || PyTuple_GET_SIZE(o[R_CTX]) != 9)
        goto none;
    /* the words the replay expander emits; the first must be one the C issue knows (an SFPU word: batch_sfpu and
     * drain_deferrable are tried), and no batch may be due */
    if (!GET(R_RB, thobj, s_replay_buf))
        goto out;
    if (!PyList_Check(o[R_RB]) || PyList_GET_SIZE(o[R_RB]) != 32)
        goto bad;
    if (!(o[R_WORDS] = PyTuple_New(count)))
        goto out;
    uint32_t vals[32];
    for (long long i = 0; i < count; i++) {
        PyObject *w = PyList_GET_ITEM(o[R_RB], (start + i) % 32);
        unsigned long v = PyLong_AsUnsignedLong(w);
        if (v == (unsigned long)-1 && PyErr_Occurred())
            goto out;
        vals[i] = (uint32_t)v;
        PyTuple_SET_ITEM(o[R_WORDS], i, Py_NewRef(w));
    }
    int known = PyDict_Contains(o[R_CWORD], PyTuple_GET_ITEM(o[R_WORDS], 0));
    if (known <= 0) {
        if (known < 0)
            goto out;
        goto none;
    }
    if (count >= 8) {
        Py_ssize_t p, k;
        long long min_reps;
        best_period(vals, (Py_ssize_t)count, &p, &k);
        if (!GET(R_MINREPS, tx, s_batch_min_reps) || get_ll(o[R_MINREPS], "batch min reps", &min_reps))
            goto out;
        if (k >= min_reps)
            goto none;
    }
    /* ready_run's arguments, as deferral._ready_run_c builds them: with nothing queued, only for a plain SFPU
     * (sfpu.is_plain()), with the lane-flag state deferral.uniform_flags reads from it */
    if (!queued) {
        int yes = plain_sfpu_flags(tx, &o[R_FLAGS], "replay_push");
        if (!yes)
            goto none;
        if (yes < 0)
            goto out;
    } else if (!GET(R_FLAGS, tx, s_dq_flags)) {
        goto out;
    }
    if (sfpu_cfg_words(tx, &o[R_C0], &o[R_C1], &c0, &c1) || !(o[R_EVENT] = tm_obj(o[R_TM], s_event_t))
        || !(o[R_MEM] = dst_access(tx, thobj, o[R_TM], c0, c1)))
        goto out;
    if (flag_code(o[R_FLAGS], &fl))
        goto bad;
    if (!(o[R_FLO] = PyLong_FromLongLong(fl)))
        goto out;
    /* from here on the push takes effect: TensixTiming.accept, then take (not a MOP) */
    PyObject *ctx = o[R_CTX], *q = PyList_GetItem(PyTuple_GET_ITEM(ctx, 7), th);
    long long a;
    if (!q || accept_take(PyTuple_GET_ITEM(ctx, 0), PyTuple_GET_ITEM(ctx, 1), PyTuple_GET_ITEM(ctx, 3), q, th, t, 1,
                          &a))
        goto out;
    /* drain_deferrable's ready_run over the whole expansion */
    PyObject *all[16] = {ctx, o[R_WORDS], zero, zero, thread_o, o[R_CWORD], o[R_DQ], o[R_FLO], o[R_C0], o[R_C1],
                         thread_o, Py_False, o[R_EVENT], dq_max_o, zero, o[R_MEM]};
    if (!(o[R_R] = sfpu_run(all, 16, 0, 0)))
        goto out;
    Py_ssize_t done = 0;
    if (o[R_R] != Py_None) {     /* its epilogue (_ready_run_c): issue_t, the flag state, the word named, unblocked */
        PyObject *r = o[R_R];
        long long j;
        if (get_ll(PyTuple_GET_ITEM(r, 0), "j", &j) || issue_epilogue(tx, o[R_TM], r))
            goto out;
        done = (Py_ssize_t)j;
        PyObject *last = PyTuple_GET_ITEM(o[R_WORDS], done - 1), *rec = PyDict_GetItemWithError(o[R_CWORD], last);
        if (!rec) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_KeyError, "replay_push: the last word issued has no C facts");
            goto out;
        }
        if (set_current(tx, thread_o, last, PyTuple_GET_ITEM(rec, 0)))
            goto out;
    }
    if (done < count) {          /* the rest from the ready queue, by Tensix.drain */
        PyObject *rest = PyTuple_GetSlice(o[R_WORDS], done, count);
        PyObject *r = rest ? PyObject_CallMethodOneArg(o[R_READY], s_extend, rest) : NULL;
        Py_XDECREF(rest);
        if (!r)
            goto out;
        Py_DECREF(r);
        if (set_attr_ll(thobj, s_batch_skip, count >= 8 ? count : 0) || !(r = call_method(tx, s_drain, &thread_o, 1)))
            goto out;
        Py_DECREF(r);
    } else if (set_attr_ll(thobj, s_batch_skip, 0)) {
        goto out;
    }
    /* _drain's count of the words issued (those of the drain above counted by it) */
    if (done && count_issued(tx, th, done))
        goto out;
    result = PyLong_FromLongLong(a);
    goto out;
#undef GET
bad:
    PyErr_SetString(PyExc_TypeError, "replay_push: the Tensix's replay state is of the wrong kind");
    goto out;
none:
    result = Py_NewRef(Py_None);
out:
    for (int k = 0; k < R_N; k++)
        Py_XDECREF(o[k]);
    return result;
}

/* With nothing queued, the C issue takes a run only for a plain SFPU (sfpu.is_plain()), with the lane-flag state
 * deferral.uniform_flags reads from it, as deferral._ready_run_c asks them: 1 with *flags set (a new reference), 0
 * the SFPU is not plain, -1 with an error set. `who` names the caller in the error. */
static int batch_is_plain(PyObject *raw);                            /* (mop_batch_native.c) */
static PyObject *batch_uniform_flags(PyObject *uniform, PyObject *sfpu);  /* (mop_batch_native.c) */

static int plain_sfpu_flags(PyObject *tx, PyObject **flags, const char *who) {
    PyObject *sfpu = get_attr(tx, s_raw_sfpu);
    int yes = sfpu ? batch_is_plain(sfpu) : -1;          /* (sfpu.is_plain(), its attributes read in C) */
    PyObject *uniform = yes > 0 ? PyDict_GetItemWithError(entry_deferral, s_uniform_flags) : NULL;
    if (yes > 0 && !uniform && !PyErr_Occurred())
        PyErr_Format(PyExc_KeyError, "%s: deferral.uniform_flags is missing", who);
    *flags = uniform ? batch_uniform_flags(uniform, sfpu) : NULL;
    Py_XDECREF(sfpu);
    return yes <= 0 ? yes : *flags ? 1 : -1;
}

#include "push_memo.c"     /* push_one's memo of the Tensix's deferral state: push_fast */

enum { O_THREADS, O_FIFO, O_READY, O_MOPOUT, O_REPLAY, O_FAST, O_LATCH, O_LBLOCK, O_CWORD, O_MEM = O_CWORD + B_N, O_R,
       O_N };       /* (O_CWORD: the issue block) */

static PyObject *push_one(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 6 && nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "push_one(tx, thread, word, t, dq_max, replays[, memo])");
        return NULL;
    }
    PyObject *tx = args[0], *thread_o = args[1], *word = args[2];
    long long th, w, c0, c1, fl, latch_block = 0;
    if (get_ll(thread_o, "thread", &th) || get_ll(word, "word", &w))
        return NULL;
    if (th < 0 || th > 2 || w < 0 || w > 0xFFFFFFFFll)    /* (push() masks the word first: its own path) */
        Py_RETURN_NONE;
    int memo = nargs == 7 ? PyObject_IsTrue(args[6]) : 0;
    if (memo < 0)
        return NULL;
    if (memo) {                                            /* the steady state: push_memo.c */
        PyObject *taken_t;
        int taken = push_fast(tx, th, thread_o, word, (uint32_t)w, args[3], args[4], &taken_t);
        if (taken)
            return taken > 0 ? taken_t : NULL;
    }
    PyObject *o[O_N] = {NULL}, *result = NULL;     /* (the full path's references: not zeroed for push_fast's words) */
#define GET(k, obj, name) (o[k] = get_attr((obj), (name)))
    /* push()'s conditions (their order does not matter: none changes anything), the word's facts first: the
     * cheapest refusal of a word that is not deferrable */
    if (!GET(O_FAST, tx, s_fast) || !PyDict_Check(o[O_FAST]))
        goto bad;
    PyObject *fast = PyDict_GetItemWithError(o[O_FAST], word);
    if (!fast && PyErr_Occurred())
        goto out;
    if (!fast || fast == Py_None) {      /* not deferrable: a REPLAY's case, if asked for (replays true) */
        int replays = PyObject_IsTrue(args[5]);
        if (replays < 0)
            goto out;
        result = replays ? replay_push(tx, thread_o, th, word, args[3], args[4]) : Py_NewRef(Py_None);
        goto out;
    }
    PyObject *thobj;
    if (!GET(O_THREADS, tx, s_threads) || !(thobj = PySequence_GetItem(o[O_THREADS], th)))
        goto out;
    Py_SETREF(o[O_THREADS], thobj);
    int busy;
    if (!GET(O_FIFO, thobj, s_fifo) || (busy = PyObject_IsTrue(o[O_FIFO])) < 0)
        goto out;
    if (!busy && (!GET(O_READY, thobj, s_ready) || (busy = PyObject_IsTrue(o[O_READY])) < 0))
        goto out;
    if (!busy && (!GET(O_MOPOUT, thobj, s_mop_out) || (busy = PyObject_IsTrue(o[O_MOPOUT])) < 0))
        goto out;
    if (!busy && !GET(O_REPLAY, thobj, s_replay_load))
        goto out;
    if (busy || o[O_REPLAY] != Py_None)
        goto none;
    if (!PyTuple_Check(fast) || PyTuple_GET_SIZE(fast) != 7)
        goto bad;
    long long fblock;
    int is_mem = PyObject_IsTrue(PyTuple_GET_ITEM(fast, 2));
    if (is_mem < 0 || get_ll(PyTuple_GET_ITEM(fast, 3), "block", &fblock) || !GET(O_LATCH, thobj, s_latch))
        goto out;
    if (o[O_LATCH] != Py_None) {
        if (!GET(O_LBLOCK, o[O_LATCH], s_block) || get_ll(o[O_LBLOCK], "latch block", &latch_block))
            goto out;
        if (latch_block & fblock)
            goto none;
    }
    if (!GET(O_CWORD, tx, s_cword) || !PyDict_Check(o[O_CWORD]))
        goto bad;
    int known = PyDict_Contains(o[O_CWORD], word);
    if (known <= 0) {
        if (known < 0)
            goto out;
        goto none;
    }
    /* push_word's arguments, as push() builds them */
    int plain = issue_inputs(tx, thobj, &o[O_CWORD], &c0, &c1, &fl, 0);
    if (plain == 0)
        goto none;
    if (plain == -2)
        goto bad;
    if (plain < 0)
        goto out;
    PyObject *mem = Py_None;
    if (is_mem && !(mem = o[O_MEM] = dst_access(tx, thobj, o[O_CWORD + B_TM], c0, c1)))
        goto out;
    if (!(o[O_R] = issue_block_run(&o[O_CWORD], word, args[3], thread_o, args[4], fl, latch_block, mem, 1)))
        goto out;
    if (o[O_R] == Py_None)
        goto none;
    /* push()'s epilogue: issue_t, the flag state, the Dst access named for errors, unblocked, counted */
    PyObject *r = o[O_R];
    long long t_new;
    if (get_ll(PyTuple_GET_ITEM(r, 1), "t", &t_new) || issue_epilogue(tx, o[O_CWORD + B_TM], r)
        || (is_mem && set_current(tx, thread_o, word, PyTuple_GET_ITEM(fast, 0)))
        || th_set(thobj, TS_BLOCKED, Py_None) < 0 || count_issued(tx, th, 1))
        goto out;
    if (memo && !is_mem && !get_ll(PyTuple_GET_ITEM(r, 3), "flags", &fl))
        push_memo_fill(tx, th, fl);
    result = PyLong_FromLongLong(t_new - 1);
    goto out;
#undef GET
bad:
    PyErr_SetString(PyExc_TypeError, "push_one: the Tensix's deferral state is of the wrong kind");
    goto out;
none:
    result = Py_NewRef(Py_None);
out:
    for (int k = 0; k < O_N; k++)
        Py_XDECREF(o[k]);
    return result;
}

/* push_entry(tx, thread, word, t=0): DeferralMixin.push in C, bound as a Tensix's `push` (deferral._init_deferral):
 * push_one with push()'s arguments (deferral.DQ_MAX, REPLAY_NATIVE and READY_NATIVE, read at each call as push()
 * reads them), and where it does not take the word, or ISSUE_NATIVE is off, DeferralMixin.push_python(tx, thread,
 * word, t): push()'s Python frame goes (bench emu's sfpu_long: 14.6k -> 13.5k instructions a word, callgrind).
 * configure_push hands over the two modules' dicts and push_python. */
static PyObject *entry_switches, *entry_deferral, *entry_rest;
static PyObject *s_issue_native, *s_replay_native, *s_ready_native, *s_dq_max, *s_push_memo_native;
static PyObject *s_word_memo_native, *s_plain_memo_native, *s_plain_rows_native;

static PyObject *configure_push(PyObject *self, PyObject *args) {
    PyObject *sw, *df, *rest;
    if (!PyArg_ParseTuple(args, "O!O!O", &PyDict_Type, &sw, &PyDict_Type, &df, &rest))
        return NULL;
    Py_XSETREF(entry_switches, Py_NewRef(sw));
    Py_XSETREF(entry_deferral, Py_NewRef(df));
    Py_XSETREF(entry_rest, Py_NewRef(rest));
    Py_RETURN_NONE;
}

/* the truth of d[key] (-1 with an exception where it is missing or has none) */
static int dict_flag(PyObject *d, PyObject *key) {
    PyObject *v = PyDict_GetItemWithError(d, key);
    if (!v) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_KeyError, "push_entry: %U is missing", key);
        return -1;
    }
    return PyObject_IsTrue(v);
}

/* The switches push_entry and push_many_entry read at each call (ISSUE_NATIVE; with it DQ_MAX, REPLAY_NATIVE and
 * READY_NATIVE, PUSH_MEMO_NATIVE), kept while the two module dicts keep their version tags (push_memo.c: any
 * assignment to a module global changes its dict's); 0, or -1 with an error set */
static struct {
    PyObject *sw, *df;
    uint64_t vsw, vdf;
    int on, replays, memo, word_memo, plain_memos, rows;
    PyObject *dq_max;
} entry_now;
static int entry_read(void) {
    if (DICT_TAGS && entry_now.sw == entry_switches && entry_now.df == entry_deferral
        && dict_version(entry_switches) == entry_now.vsw && dict_version(entry_deferral) == entry_now.vdf)
        return 0;
    entry_now.sw = entry_now.df = NULL;
    int on = dict_flag(entry_switches, s_issue_native), replays = 0, memo = 0;
    PyObject *dq_max = NULL;
    if (on < 0)
        return -1;
    if (on) {
        dq_max = PyDict_GetItemWithError(entry_deferral, s_dq_max);
        replays = dq_max ? dict_flag(entry_switches, s_replay_native) : -1;
        if (replays > 0)
            replays = dict_flag(entry_switches, s_ready_native);
        if (replays >= 0)
            memo = dict_flag(entry_switches, s_push_memo_native);
        if (replays < 0 || memo < 0) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_KeyError, "push_entry: DQ_MAX is missing");
            return -1;
        }
    }
    int word_memo = dict_flag(entry_switches, s_word_memo_native);
    int plain_memos = word_memo < 0 ? -1 : dict_flag(entry_switches, s_plain_memo_native);
    int rows = plain_memos < 0 ? -1 : dict_flag(entry_switches, s_plain_rows_native);
    if (rows < 0)
        return -1;
    entry_now.on = on, entry_now.replays = replays, entry_now.memo = memo, entry_now.dq_max = dq_max;
    entry_now.word_memo = word_memo, entry_now.plain_memos = plain_memos, entry_now.rows = rows;
    entry_now.vsw = dict_version(entry_switches), entry_now.vdf = dict_version(entry_deferral);
    entry_now.sw = entry_switches, entry_now.df = entry_deferral;
    return 0;
}

/* cword_rec's switch: WORD_MEMO_NATIVE as entry_read last read it (0 before configure_push: no memo), -1 with an
 * error set */
static int word_memo_on(void) {
    if (!entry_switches)
        return 0;
    return entry_read() ? -1 : entry_now.word_memo;
}

/* run_record's switch: PLAIN_MEMO_NATIVE as entry_read last read it (0 before configure_push: no memo), -1 with an
 * error set */
static int plain_memos_on(void) {
    if (!entry_switches)
        return 0;
    return entry_read() ? -1 : entry_now.plain_memos;
}

/* rows_state's switch: PLAIN_ROWS_NATIVE as entry_read last read it (0 before configure_push), -1 with an error set */
static int rows_native_on(void) {
    if (!entry_switches)
        return 0;
    return entry_read() ? -1 : entry_now.rows;
}

static PyObject *push_entry(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (!entry_rest) {
        PyErr_SetString(PyExc_TypeError, "push_entry: configure_push was not called");
        return NULL;
    }
    if (!kwnames && (nargs == 3 || nargs == 4)) {
        if (entry_read())
            return NULL;
        if (entry_now.on) {
            PyObject *t_o = nargs == 4 ? args[3] : zero;
            if (entry_now.memo) {       /* push_one's first step, push_fast, without its argument vector (where it
                                         * declines, push_one asks it again: ~1 % of sfpu_long's words, then the full
                                         * path, which fills the memo) */
                long long th, w;
                if (get_ll(args[1], "thread", &th) || get_ll(args[2], "word", &w))
                    return NULL;
                if (th >= 0 && th <= 2 && w >= 0 && w <= 0xFFFFFFFFll) {
                    PyObject *taken_t;
                    int taken = push_fast(args[0], th, args[1], args[2], (uint32_t)w, t_o, entry_now.dq_max,
                                          &taken_t);
                    if (taken)
                        return taken > 0 ? taken_t : NULL;
                }
            }
            PyObject *a[7] = {args[0], args[1], args[2], t_o, entry_now.dq_max,
                              entry_now.replays ? Py_True : Py_False, entry_now.memo ? Py_True : Py_False};
            PyObject *r = push_one(self, a, 7);
            if (r != Py_None)
                return r;                 /* (its result, or NULL: its error) */
            Py_DECREF(r);
        }
    }
    return PyObject_Vectorcall(entry_rest, args, nargs, kwnames);
}

/* many_one(tx, thread, words, t, dq_max): push_many's issue_run call for the run of deferrable words at the head of
 * `words` (deferral.DeferralMixin.push_many, its first pass round its loop), in C: where the thread is empty (no FIFO
 * words, ready words, MOP output or REPLAY load), no timeline is recorded, the cycle model is not spied, its C context
 * is the current one (push_one's rule), work is queued (so push_many's `dq or sfpu.is_plain()` holds and the flag
 * state is tx._dq_flags) and words[0] has C facts: issue_run over words from 0 with push_many's arguments and its
 * epilogue (issue_t, the flag state, the Dst access named for errors, unblocked, the words counted). Returns (i, t):
 * i words issued, the next push at t; None with nothing changed wherever push_many would do anything else first. */
enum { M_THREADS, M_FIFO, M_READY, M_MOPOUT, M_LOAD, M_CWORD, M_LATCH = M_CWORD + B_N, M_LBLOCK, M_MEM, M_R,
       M_N };       /* (M_CWORD: the issue block) */

static PyObject *many_one(PyObject *tx, PyObject *thread_o, PyObject *words, PyObject *t_o, PyObject *dq_max) {
    PyObject *o[M_N] = {NULL}, *result = NULL;
    long long th, c0, c1, fl, latch_block = 0;
    if (get_ll(thread_o, "thread", &th))
        return NULL;
    if (th < 0 || th > 2 || !PyTuple_Check(words) || PyTuple_GET_SIZE(words) < 1 || !PyLong_Check(t_o))
        Py_RETURN_NONE;
#define GET(k, obj, name) (o[k] = get_attr((obj), (name)))
    if (!GET(M_CWORD, tx, s_cword) || !PyDict_Check(o[M_CWORD]))
        goto bad;
    if (!cword_rec(o[M_CWORD], PyTuple_GET_ITEM(words, 0))) {
        if (PyErr_Occurred())
            goto out;
        goto none;
    }
    PyObject *thobj;
    if (!GET(M_THREADS, tx, s_threads) || !(thobj = PySequence_GetItem(o[M_THREADS], th)))
        goto out;
    Py_SETREF(o[M_THREADS], thobj);
    if (!GET(M_FIFO, thobj, s_fifo) || !GET(M_READY, thobj, s_ready) || !GET(M_MOPOUT, thobj, s_mop_out)
        || !GET(M_LOAD, thobj, s_replay_load))
        goto out;
    for (int k = M_FIFO; k <= M_MOPOUT; k++) {
        Py_ssize_t len = PyObject_Length(o[k]);
        if (len < 0)
            goto out;
        if (len)
            goto none;
    }
    if (o[M_LOAD] != Py_None)
        goto none;
    int plain = issue_inputs(tx, thobj, &o[M_CWORD], &c0, &c1, &fl, 1);
    if (plain == 0)
        goto none;
    if (plain == -2)
        goto bad;
    if (plain < 0 || !GET(M_LATCH, thobj, s_latch))
        goto out;
    if (o[M_LATCH] != Py_None && (!GET(M_LBLOCK, o[M_LATCH], s_block)
                                  || get_ll(o[M_LBLOCK], "latch block", &latch_block)))
        goto out;
    /* push_many passes the Dst access context (deferral._c_memory) with every run */
    if (!(o[M_MEM] = dst_access(tx, thobj, o[M_CWORD + B_TM], c0, c1)))
        goto out;
    if (!(o[M_R] = issue_block_run(&o[M_CWORD], words, t_o, thread_o, dq_max, fl, latch_block, o[M_MEM], 0)))
        goto out;
    if (o[M_R] == Py_None)
        goto none;
    /* push_many's epilogue of an issue_run call */
    PyObject *r = o[M_R];
    long long i, last_mem;
    if (get_ll(PyTuple_GET_ITEM(r, 0), "i", &i) || get_ll(PyTuple_GET_ITEM(r, 4), "last_mem", &last_mem))
        goto out;
    if (i < 1 || i > PyTuple_GET_SIZE(words) || last_mem >= i) {
        PyErr_SetString(PyExc_ValueError, "many_one: issue_run's count of words out of range");
        goto out;
    }
    if (issue_epilogue(tx, o[M_CWORD + B_TM], r))
        goto out;
    if (last_mem >= 0) {
        PyObject *w = PyTuple_GET_ITEM(words, last_mem), *rec = PyDict_GetItemWithError(o[M_CWORD], w);
        if (!rec || !PyTuple_Check(rec) || PyTuple_GET_SIZE(rec) < 1) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "many_one: a word's C facts of the wrong shape");
            goto out;
        }
        if (set_current(tx, thread_o, w, PyTuple_GET_ITEM(rec, 0)))
            goto out;
    }
    if (th_set(thobj, TS_BLOCKED, Py_None) < 0 || count_issued(tx, th, i))
        goto out;
    result = PyTuple_Pack(2, PyTuple_GET_ITEM(r, 0), PyTuple_GET_ITEM(r, 1));
    goto out;
#undef GET
bad:
    PyErr_SetString(PyExc_TypeError, "many_one: the Tensix's deferral state is of the wrong kind");
    goto out;
none:
    result = Py_NewRef(Py_None);
out:
    for (int k = 0; k < M_N; k++)
        Py_XDECREF(o[k]);
    return result;
}

/* push_many_entry(tx, thread, words, t): a Tensix's push_many in C (deferral._init_deferral binds it where the class's
 * push_many is one whose run of deferrable words at the head is DeferralMixin.push_many's issue_run call): many_one
 * (ISSUE_NATIVE and DQ_MAX read at each call, as push_many reads them), then the class's push_many for the words it
 * left, if any (pm_done made relative to the whole run where that raises); every other case: the class's push_many.
 * The Python frames of the pushes of a TRISC's `.ttinsn` run go (tile.py Tile._multi_pusher). */
static PyObject *s_push_many, *s_pm_done;

/* After many_one's words, the next one to mop_push (mop_batch_native.c), as DeferralMixin.push_many's loop would hand
 * it a MOP first (MOP_PUSH_NATIVE read at each call; mop_push answers None for any other word); where it takes the
 * word, *i and *t move past it. 0, or -1 with the exception set and pm_done / pm_t naming the word (push_many's
 * contract) */
static PyObject *mop_push(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
static PyObject *s_mop_push_native;

static int many_mop(PyObject *tx, PyObject *thread_o, PyObject *w, Py_ssize_t *i, PyObject **t) {
    if (!s_mop_push_native && !(s_mop_push_native = PyUnicode_InternFromString("MOP_PUSH_NATIVE")))
        return -1;
    int on = dict_flag(entry_switches, s_mop_push_native);
    if (on <= 0) {
        if (on == 0)
            return 0;
        goto fail;
    }
    PyObject *a[4] = {tx, thread_o, w, *t}, *r = mop_push(NULL, a, 4);
    long long at;
    if (!r)
        goto fail;
    if (r == Py_None) {
        Py_DECREF(r);
        return 0;
    }
    *i += 1;                                           /* (the MOP is taken) */
    PyObject *next = get_ll(r, "mop_push", &at) ? NULL : PyLong_FromLongLong(at + 1);
    Py_DECREF(r);
    if (!next)
        goto fail;
    Py_SETREF(*t, next);
    return 0;
fail:;                                                 /* push_many's contract: pm_done and pm_t say how far it got */
    PyObject *et, *ev, *tb, *j = PyLong_FromSsize_t(*i);
    PyErr_Fetch(&et, &ev, &tb);
    if (!j || PyObject_SetAttr(tx, s_pm_done, j) < 0 || PyObject_SetAttrString(tx, "pm_t", *t) < 0)
        PyErr_Clear();
    Py_XDECREF(j);
    PyErr_Restore(et, ev, tb);
    return -1;
}

static PyObject *push_many_entry(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (!entry_switches) {
        PyErr_SetString(PyExc_TypeError, "push_many_entry: configure_push was not called");
        return NULL;
    }
    if (nargs < 1) {
        PyErr_SetString(PyExc_TypeError, "push_many_entry(tx, thread, words, t)");
        return NULL;
    }
    PyObject *rest = PyObject_GetAttr((PyObject *)Py_TYPE(args[0]), s_push_many), *r = NULL;
    if (!rest)
        return NULL;
    Py_ssize_t i = 0;
    PyObject *t = NULL;
    if (!kwnames && nargs == 4) {
        if (entry_read())
            goto out;
        PyObject *dq_max = entry_now.dq_max;
        if (entry_now.on) {
            PyObject *taken = many_one(args[0], args[1], args[2], args[3], dq_max);
            if (!taken)
                goto fail_first;
            if (taken != Py_None) {
                i = PyLong_AsSsize_t(PyTuple_GET_ITEM(taken, 0));
                t = Py_NewRef(PyTuple_GET_ITEM(taken, 1));
                Py_DECREF(taken);
                if (i < PyTuple_GET_SIZE(args[2]) && many_mop(args[0], args[1], PyTuple_GET_ITEM(args[2], i), &i, &t)) {
                    Py_DECREF(t);              /* (mop_push raised: pm_done and pm_t name the MOP) */
                    goto out;
                }
                if (i == PyTuple_GET_SIZE(args[2])) {
                    r = t;
                    goto out;
                }
                PyObject *left = PyTuple_GetSlice(args[2], i, PyTuple_GET_SIZE(args[2]));
                if (left) {
                    PyObject *a[4] = {args[0], args[1], left, t};
                    r = PyObject_Vectorcall(rest, a, 4, NULL);
                    Py_DECREF(left);
                }
                Py_DECREF(t);
                if (!r) {                  /* pm_done: the word that raised, counted from the whole run's start */
                    PyObject *et, *ev, *tb;
                    PyErr_Fetch(&et, &ev, &tb);
                    PyObject *j = PyObject_GetAttr(args[0], s_pm_done), *j1 = NULL;
                    if (j) {
                        PyObject *di = PyLong_FromSsize_t(i);
                        j1 = di ? PyNumber_Add(j, di) : NULL;
                        Py_XDECREF(di);
                    }
                    if (!j1 || PyObject_SetAttr(args[0], s_pm_done, j1) < 0) {
                        Py_XDECREF(j);
                        Py_XDECREF(j1);
                        Py_XDECREF(et);
                        Py_XDECREF(ev);
                        Py_XDECREF(tb);
                        goto out;
                    }
                    Py_DECREF(j);
                    Py_DECREF(j1);
                    PyErr_Restore(et, ev, tb);
                }
                goto out;
            }
            Py_DECREF(taken);
        }
    }
    r = PyObject_Vectorcall(rest, args, nargs, kwnames);
    goto out;
fail_first:                                /* issue_run raised at the run's start: push_many's contract */
    {
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);
        if (PyObject_SetAttr(args[0], s_pm_done, zero) < 0 || PyObject_SetAttrString(args[0], "pm_t", args[3]) < 0) {
            Py_XDECREF(et);
            Py_XDECREF(ev);
            Py_XDECREF(tb);
            goto out;
        }
        PyErr_Restore(et, ev, tb);
    }
out:
    Py_DECREF(rest);
    return r;
}

/* The module `m` with plain_run's C entries as capsules for the RISC-V C core (rv32_native.c), which calls them for its
 * `.ttinsn` runs without a Python frame: PLAIN_RUN_CAPSULE ("sfpu_issue.plain_run", the Python-callable with its
 * arguments) and PLAIN_RUN_C_CAPSULE ("sfpu_issue.plain_run_c", plain_run_c). */
typedef PyObject *(*plain_run_entry)(PyObject *, PyObject *const *, Py_ssize_t);
typedef int (*plain_run_c_entry)(PyObject *, PyObject *, PyObject *, PyObject *, long long *, long long *);
static PyObject *export_plain_run(PyObject *m) {
    PyObject *cap = m ? PyCapsule_New((void *)(plain_run_entry)plain_run, "sfpu_issue.plain_run", NULL) : NULL;
    PyObject *cap_c = m ? PyCapsule_New((void *)(plain_run_c_entry)plain_run_c, "sfpu_issue.plain_run_c", NULL) : NULL;
    if (!cap || PyModule_AddObject(m, "PLAIN_RUN_CAPSULE", cap) < 0) {
        Py_XDECREF(cap);
        Py_XDECREF(cap_c);
        Py_XDECREF(m);
        return NULL;
    }
    if (!cap_c || PyModule_AddObject(m, "PLAIN_RUN_C_CAPSULE", cap_c) < 0) {
        Py_XDECREF(cap_c);
        Py_XDECREF(m);
        return NULL;
    }
    return m;
}

#include "mop_batch_native.c"   /* batch_run: mop_batch.batch_sfpu's memo-hit case; mop_push: a MOP's push */

static PyMethodDef methods[] = {
    {"configure", configure, METH_VARARGS, "configure(fifo_depth, mop_transition_penalty, all_lregs, load_modes, store_modes, dst_rwc_mask, "
     "src_rwc_mask, fpu_to_sfpload_gap)"},
    {"issue_run", (PyCFunction)(void (*)(void))issue_run, METH_FASTCALL, "see the module comment"},
    {"ready_run", (PyCFunction)(void (*)(void))ready_run, METH_FASTCALL, "see its comment"},
    {"push_word", (PyCFunction)(void (*)(void))push_word, METH_FASTCALL, "see its comment"},
    {"push_one", (PyCFunction)(void (*)(void))push_one, METH_FASTCALL, "see its comment"},
    {"push_memo_counts", push_memo_counts, METH_NOARGS, "see push_memo.c"},
    {"word_memo_hits", word_memo_hits, METH_NOARGS, "look-ups cword_rec's memo answered (tests)"},
    {"plain_memo_hits", plain_memo_hits, METH_NOARGS, "words and calls plain_run's memos answered (tests)"},
    {"push_entry", (PyCFunction)(void (*)(void))push_entry, METH_FASTCALL | METH_KEYWORDS, "see its comment"},
    {"push_many_entry", (PyCFunction)(void (*)(void))push_many_entry, METH_FASTCALL | METH_KEYWORDS,
     "see its comment"},
    {"configure_push", configure_push, METH_VARARGS, "configure_push(switches dict, deferral's dict, push_python)"},
    {"find_period", (PyCFunction)(void (*)(void))find_period, METH_FASTCALL, "see its comment"},
    {"batch_run", (PyCFunction)(void (*)(void))batch_run, METH_FASTCALL, "see mop_batch_native.c"},
    {"mop_push", (PyCFunction)(void (*)(void))mop_push, METH_FASTCALL, "see mop_batch_native.c"},
    {"configure_batch", configure_batch, METH_VARARGS, "configure_batch(address of sfpu_native.c's sfpu_run, "
     "sfpu_native.traffic, new_queue)"},
    {"pack_records", (PyCFunction)(void (*)(void))pack_records, METH_FASTCALL, "see its comment"},
    {"configure_plain", configure_plain, METH_VARARGS, "configure_plain(unpack_bytes_per_cycle, pack_bytes_per_cycle, "
     "element_bits, fpu_dst_read_latency, fifo_depth)"},
    {"plain_run", (PyCFunction)(void (*)(void))plain_run, METH_FASTCALL, "see its comment"},
    {"drain_run", (PyCFunction)(void (*)(void))drain_run, METH_FASTCALL, "see its comment"},
    {"step_run", step_run, METH_O, "see its comment"},
    {"configure_tiles", configure_tiles, METH_VARARGS, "configure_tiles(src19 masks, format classes)"},
    {"handler_counts", handler_counts, METH_NOARGS, "words each tile handler code ran in C"},
    {"wait_native", wait_native, METH_O, "wait_native(on): the wait words' latch and SFPU busy time in C or Python"},
    {"dict_hints_native", dict_hints_native, METH_O, "dict_hints_native(on): the run's view read at dict hints or not"},
    {"view_keep_native", view_keep_native, METH_O, "view_keep_native(on): plain_run's view kept between calls or not"},
    {"view_keep_counts", view_keep_counts, METH_NOARGS, "view_keep_counts() -> owners' items plain_run found kept"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "sfpu_issue", NULL, -1, methods};

PyMODINIT_FUNC PyInit_sfpu_issue(void) {
    if (!(s_mad_cycle = PyUnicode_InternFromString("mad_cycle")) ||
        !(s_mad_writes = PyUnicode_InternFromString("mad_writes")) ||
        !(s_mad_macro = PyUnicode_InternFromString("mad_macro")) ||
        !(s_nop_only_cycle = PyUnicode_InternFromString("nop_only_cycle")) ||
        !(s_busy_until = PyUnicode_InternFromString("busy_until")) ||
        !(s_strict = PyUnicode_InternFromString("strict")) || !(s_append = PyUnicode_InternFromString("append")) ||
        !(zero = PyLong_FromLong(0)))
        return NULL;
    name_ref names[] = {
        {&s_tm, "tm"}, {&s_threads, "threads"}, {&s_deferred, "deferred"}, {&s_flush_deferred, "flush_deferred"},
        {&s_current, "current"}, {&s_latch, "latch"}, {&s_block, "block"}, {&s_latch_unmet, "latch_unmet"},
        {&s_blocked, "blocked"}, {&s_handler_blocked, "handler_blocked"}, {&s_popleft, "popleft"}, {&s_ready, "ready"},
        {&s_issue_t, "issue_t"}, {&s_instructions, "instructions"}, {&s_clock, "clock"}, {&s_fe, "fe"},
        {&s_gate, "gate"}, {&s_after_mop, "after_mop"}, {&s_first, "first"}, {&s_stalls, "stalls"},
        {&s_issued, "issued"}, {&s_taken, "taken"}, {&s_event_t, "event_t"}, {&s_unpack_busy, "unpack_busy"},
        {&s_pack_busy, "pack_busy"}, {&s_nop_t, "nop_t"}, {&s_src_ready, "src_ready"},
        {&s_srca_unpack_bank, "srca_unpack_bank"}, {&s_srcb_unpack_bank, "srcb_unpack_bank"}, {&s_cfg, "cfg"},
        {&s_adc, "adc"}, {&s_raw_sfpu, "raw_sfpu"}, {&s_scheduled, "scheduled"},
        {&s_run_scheduled, "_run_scheduled_sfpu"}, {&s_stamp_posts, "stamp_posts"}, {&s_waited, "waited"},
        {&s_kind, "kind"}, {&s_cond, "cond"}, {&s_stallwait, "STALLWAIT"}, {&s_bank_a, "a"}, {&s_bank_b, "b"},
        {&s_rwc, "rwc"}, {&s_d, "d"}, {&s_srca_matrix_bank, "srca_matrix_bank"},
        {&s_srcb_matrix_bank, "srcb_matrix_bank"}, {&s_dst_fpu_write, "dst_fpu_write"}, {&s_bank_read, "bank_read"},
        {&s_fpu_busy, "fpu_busy"}, {&s_bank_wait, "bank_wait"}, {&s_fifo, "fifo"}, {&s_fifo_t, "fifo_t"},
        {&s_mop_out, "mop_out"}, {&s_batch_skip, "batch_skip"}, {&s_replay_load, "replay_load"},
        {&s_mm_record, "mm_record"}, {&s_flush_mvmul, "flush_mvmul"}, {&s_drain, "drain"},
        {&s_work_done, "work_done"},
    };
    if (INTERN_NAMES(names))
        return NULL;
    const char *keys[6] = {"a", "a_cr", "b", "b_cr", "d", "d_cr"};
    for (int k = 0; k < 6; k++)
        if (!(rwc_keys[k] = PyUnicode_InternFromString(keys[k])))
            return NULL;
    name_ref push_names[] = {
        {&s_fast, "_fast"}, {&s_cword, "_cword"}, {&s_c_ctx, "_c_ctx"}, {&s_rec, "rec"}, {&s_sfpu_timing, "sfpu"},
        {&s_dq_flags, "_dq_flags"}, {&s_dst_raw, "_dst"}, {&s_written, "written"}, {&s_issue, "issue"},
        {&s_dict, "__dict__"}, {&s_replays, "_replays"}, {&s_replay_buf, "replay_buf"},
        {&s_extend, "extend"}, {&s_is_plain, "is_plain"}, {&s_uniform_flags, "uniform_flags"},
        {&s_batch_min_reps, "_batch_min_reps"}, {&s_issue_native, "ISSUE_NATIVE"},
        {&s_replay_native, "REPLAY_NATIVE"}, {&s_ready_native, "READY_NATIVE"}, {&s_dq_max, "DQ_MAX"},
        {&s_push_memo_native, "PUSH_MEMO_NATIVE"}, {&s_word_memo_native, "WORD_MEMO_NATIVE"},
        {&s_plain_memo_native, "PLAIN_MEMO_NATIVE"}, {&s_plain_rows_native, "PLAIN_ROWS_NATIVE"},
        {&s_push_many, "push_many"}, {&s_pm_done, "pm_done"},
    };
    if (INTERN_NAMES(push_names))
        return NULL;
    for (int k = 0; k < 9; k++) {       /* code lf * 3 + use, 2 for None */
        PyObject *lf = k / 3 == 2 ? Py_NewRef(Py_None) : PyLong_FromLong(k / 3);
        PyObject *use = k % 3 == 2 ? Py_NewRef(Py_None) : PyLong_FromLong(k % 3);
        flag_states[k] = lf && use ? PyTuple_Pack(2, lf, use) : NULL;
        Py_XDECREF(lf);
        Py_XDECREF(use);
        if (!flag_states[k])
            return NULL;
    }
    if (tile_handlers_init() || batch_names() || PyType_Ready(&DeferredQueue_Type) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m && (PyModule_AddObjectRef(m, "DeferredQueue", (PyObject *)&DeferredQueue_Type) < 0 || timing_state_init(m)))
        Py_CLEAR(m);
    return export_plain_run(m);
}
