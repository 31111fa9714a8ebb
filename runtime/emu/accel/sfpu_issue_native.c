/* The Tensix's issue of the SFPU words a core pushes one at a time, in C (loaded by sfpu_issue_native.py).
 *
 * A CPython extension module. Its hot function, issue_run: for a run of `.ttinsn` words pushed to a thread whose
 * frontend is empty (no FIFO, MOP or ready words, no REPLAY load), it does for each deferrable SFPU word what
 * deferral.py's push_many (and, for SFPLOAD / SFPSTORE, push() and DeferralMixin.defer) does: the FIFO accepts it and
 * the MOP expander takes it (cycles.TensixTiming.accept_take), the cycle model issues it (TensixTiming.issue_sfpu with
 * SfpuTiming.regular and, for a load, sfpload_hazard), the deferral's abstract lane-flag state follows it, its data
 * effect is appended to the deferred queue as the same tuple, and for a Dst access its address is resolved, a store's
 * rows are marked written and the RWC address modifier applies (TensixFpu.apply_addr_mod without the fidelity
 * phase). It stops, with nothing changed for that word, at the first word it was not given facts for (cword), at a
 * word the Wait Gate's latch holds, at a full queue, and wherever the Python path raises or does more (a strict error
 * of SfpuTiming.regular or sfpload_hazard, a strict load of Dst rows not all written, a Dst access defer() does not
 * queue, an address modifier apply_addr_mod refuses): the Python path then takes that word. The cycle model's state
 * is read once per call and written back once.
 * pack_records turns a run of the deferred queue's entries into the records sfpu_native.c executes, in one call.
 * Python stays the reference (tests/emu/test_sfpu_issue_native.py pins cycles, queue and bits to it).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define MAX_DEPTH 64

/* Per-word facts, packed by sfpu_issue_native.word_facts in this order (little-endian int64s). */
typedef struct {
    int64_t block, reads, seen, writes, mad, two_cycle, indirect, is_nop;
    int64_t ftab;          /* -1: no flag write; else 4 bits per entry state lf * 3 + use: the state after it */
    int64_t is_mem, is_store, reads_dst, imm, amode, vd, mod0;    /* SFPLOAD / SFPSTORE: Dst access */
} word_facts;

static int depth = 28, mop_penalty = 1, dst_rwc_mask = 1023, src_rwc_mask = 63, fpu_to_sfpload_gap = 4;
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

static int get_ll(PyObject *o, const char *what, long long *out) {
    *out = PyLong_AsLongLong(o);
    if (*out == -1 && PyErr_Occurred()) {
        PyErr_Format(PyExc_TypeError, "issue_run: %s is not an integer", what);
        return -1;
    }
    return 0;
}

static int attr_ll(PyObject *o, PyObject *name, long long *out) {
    PyObject *v = PyObject_GetAttr(o, name);
    if (!v)
        return -1;
    int r = get_ll(v, PyUnicode_AsUTF8(name), out);
    Py_DECREF(v);
    return r;
}

static int set_attr_ll(PyObject *o, PyObject *name, long long v) {
    PyObject *p = PyLong_FromLongLong(v);
    if (!p)
        return -1;
    int r = PyObject_SetAttr(o, name, p);
    Py_DECREF(p);
    return r;
}

static int set_item_ll(PyObject *list, Py_ssize_t i, long long v) {
    PyObject *p = PyLong_FromLongLong(v);
    return p ? PyList_SetItem(list, i, p) : -1;      /* (steals p) */
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

/* issue_run(ctx, words, j, t, thread, cword, dq, flags, cfg0, cfg1, thread_obj, was_blocked, event_t, dq_max,
 *           latch_block, mem)
 * ctx: (clock, fe, gate, after_mop, first, stalls, issued, taken, sfpu timing) of the cycle model;
 * cword: word -> (name, fields, packed word_facts); flags: the deferral's lane-flag state, lf * 3 + use (2 = mixed);
 * latch_block: the block mask of the Wait Gate's latched wait instruction (0: none), which holds a word it blocks;
 * mem: None (stop at SFPLOAD / SFPSTORE), or (the thread's ThreadConfig list, its RWC dict, Dst's rows-written bool
 * array, the cycle model's dst_fpu_write dict, the mode Mod0 0 resolves to).
 * Returns None when words[j] is not taken, else (next j, next push time, last issue cycle, flags, index of the last
 * SFPLOAD / SFPSTORE taken or -1). */
static PyObject *issue_run(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 16) {
        PyErr_SetString(PyExc_TypeError, "issue_run takes 16 arguments");
        return NULL;
    }
    PyObject *ctx = args[0], *words = args[1], *cword = args[5], *dq = args[6];
    PyObject *cfg0 = args[8], *cfg1 = args[9], *thobj = args[10], *mem = args[15];
    long long j0, t, th, fl, event_t, dq_max, latch_block;
    if (get_ll(args[2], "j", &j0) || get_ll(args[3], "t", &t) || get_ll(args[4], "thread", &th)
        || get_ll(args[7], "flags", &fl) || get_ll(args[12], "event_t", &event_t)
        || get_ll(args[13], "dq_max", &dq_max) || get_ll(args[14], "latch_block", &latch_block))
        return NULL;
    int was_blocked = PyObject_IsTrue(args[11]);
    if (!PyTuple_Check(ctx) || PyTuple_GET_SIZE(ctx) != 9 || !PyTuple_Check(words) || !PyDict_Check(cword)
        || !PyList_Check(dq) || was_blocked < 0 || th < 0 || th > 2
        || (mem != Py_None
            && (!PyTuple_Check(mem) || PyTuple_GET_SIZE(mem) != 5 || !PyList_Check(PyTuple_GET_ITEM(mem, 0))
                || PyList_GET_SIZE(PyTuple_GET_ITEM(mem, 0)) < 64 || !PyDict_Check(PyTuple_GET_ITEM(mem, 1))
                || !PyDict_Check(PyTuple_GET_ITEM(mem, 3))))) {
        PyErr_SetString(PyExc_TypeError, "issue_run: arguments of the wrong kind");
        return NULL;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(words), j = (Py_ssize_t)j0;
    /* the common refusal (a word not seen yet, a full queue) answered before the state is read */
    if (j < 0 || j >= n || PyList_GET_SIZE(dq) >= dq_max)
        Py_RETURN_NONE;
    PyObject *rec = PyDict_GetItemWithError(cword, PyTuple_GET_ITEM(words, j));
    if (!rec) {
        if (PyErr_Occurred())
            return NULL;
        Py_RETURN_NONE;
    }

    /* the cycle model's state of thread th and the Vector Unit */
    PyObject *clock_l = PyTuple_GET_ITEM(ctx, 0), *fe_l = PyTuple_GET_ITEM(ctx, 1), *gate_l = PyTuple_GET_ITEM(ctx, 2);
    PyObject *after_l = PyTuple_GET_ITEM(ctx, 3), *first_l = PyTuple_GET_ITEM(ctx, 4);
    PyObject *stalls_l = PyTuple_GET_ITEM(ctx, 5), *issued_l = PyTuple_GET_ITEM(ctx, 6);
    PyObject *taken_l = PyTuple_GET_ITEM(ctx, 7), *st = PyTuple_GET_ITEM(ctx, 8);
    long long clock, fe, mask, until, stalls, issued, first = 0;
    long long mad_cycle, mad_writes, mad_macro, nop_only, busy, strict;
    PyObject *gate = PyList_GetItem(gate_l, th), *first_o = PyList_GetItem(first_l, th);
    PyObject *after_o = PyList_GetItem(after_l, th), *q = PyList_GetItem(taken_l, th);
    if (!gate || !first_o || !after_o || !q || !PyTuple_Check(gate) || PyTuple_GET_SIZE(gate) != 2
        || get_ll(PyList_GetItem(clock_l, th), "clock", &clock) || get_ll(PyList_GetItem(fe_l, th), "fe", &fe)
        || get_ll(PyTuple_GET_ITEM(gate, 0), "gate mask", &mask)
        || get_ll(PyTuple_GET_ITEM(gate, 1), "gate until", &until)
        || get_ll(PyList_GetItem(stalls_l, th), "stalls", &stalls)
        || get_ll(PyList_GetItem(issued_l, th), "issued", &issued)
        || (first_o != Py_None && get_ll(first_o, "first", &first))
        || attr_ll(st, s_mad_cycle, &mad_cycle) || attr_ll(st, s_mad_writes, &mad_writes)
        || attr_ll(st, s_mad_macro, &mad_macro) || attr_ll(st, s_nop_only_cycle, &nop_only)
        || attr_ll(st, s_busy_until, &busy) || attr_ll(st, s_strict, &strict))
        return NULL;
    int has_first = first_o != Py_None, after_mop = PyObject_IsTrue(after_o);
    /* taken: when the last `depth` words left the FIFO (a deque with maxlen depth), oldest first */
    long long ring[MAX_DEPTH];
    Py_ssize_t qlen = PySequence_Size(q);
    if (qlen < 0 || qlen > depth || after_mop < 0)
        return NULL;
    for (Py_ssize_t i = 0; i < qlen; i++) {
        PyObject *v = PySequence_GetItem(q, i);
        int bad = !v || get_ll(v, "taken", &ring[i]);
        Py_XDECREF(v);
        if (bad)
            return NULL;
    }
    /* Dst access: the thread's config and RWCs, Dst's rows written, the FPU's last Dst writes */
    PyObject *cfg_l = NULL, *rwc_d = NULL, *fpu_w = NULL;
    long long rwc[6] = {0}, src_mode = 0;
    Py_buffer written = {0};
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
    int head = 0;                 /* ring[head] is the oldest of qlen */
    Py_ssize_t appended = 0, last_mem = -1;
    long long last_c = 0;
    PyObject *result = NULL;

    while (j < n) {
        PyObject *w = PyTuple_GET_ITEM(words, j);
        rec = PyDict_GetItemWithError(cword, w);
        if (!rec) {
            if (PyErr_Occurred())
                goto fail;
            break;
        }
        const word_facts *f = (const word_facts *)PyBytes_AS_STRING(PyTuple_GET_ITEM(rec, 2));
        if (PyList_GET_SIZE(dq) >= dq_max || (latch_block & f->block) || (f->is_mem && mem == Py_None))
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
        long long oldest = ring[head];
        long long a = (qlen == depth && oldest > t) ? oldest : t;
        long long nfe = fe;
        if (after_mop)
            nfe = (fe > clock + 1 ? fe : clock + 1) + mop_penalty;
        if (a > nfe)
            nfe = a;
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
        /* the deferred queue's entry, as push_many / defer build it */
        PyObject *entry;
        if (f->is_mem) {
            entry = Py_BuildValue("(OOO(OLLL)LLOOO)", w, PyTuple_GET_ITEM(rec, 0), PyTuple_GET_ITEM(rec, 1),
                                  f->is_store ? Py_True : Py_False, f->vd, mode, addr, dst_base, c, cfg0, cfg1, thobj);
        } else {
            PyObject *c_o = PyLong_FromLongLong(c);
            if (!c_o)
                goto fail;
            entry = PyTuple_Pack(9, w, PyTuple_GET_ITEM(rec, 0), PyTuple_GET_ITEM(rec, 1), Py_None, zero, c_o, cfg0,
                                 cfg1, thobj);
            Py_DECREF(c_o);
        }
        /* Untracked by the cyclic GC, as CPython untracks tuples of atoms: the containers it holds (the decoded fields,
         * cfg0, cfg1) are shared by every entry of the word and never refer back. (Tracked, the queue's tens of thousands of entries
         * made the collections the GC runs during a long body cost 3-4x the issue itself.) */
        if (entry)
            PyObject_GC_UnTrack(entry);
        if (!entry || PyList_Append(dq, entry) < 0) {
            Py_XDECREF(entry);
            goto fail;
        }
        Py_DECREF(entry);
        /* commit the word's effects on the cycle model, the RWCs and Dst's rows written */
        long long left = a > clock ? a : clock;
        if (qlen == depth) {
            ring[head] = left;
            head = (head + 1) % depth;
        } else {
            ring[(head + qlen) % depth] = left;
            qlen++;
        }
        appended++;
        fe = nfe;
        after_mop = 0;
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
        t = a + 1;
        was_blocked = 0;
        j++;
    }
    if (j == (Py_ssize_t)j0) {
        Py_INCREF(Py_None);
        result = Py_None;
        goto out;
    }

    /* write the state back */
    if (set_item_ll(clock_l, th, clock) || set_item_ll(fe_l, th, fe) || set_item_ll(stalls_l, th, stalls)
        || set_item_ll(issued_l, th, issued) || (first_o == Py_None && set_item_ll(first_l, th, first)))
        goto fail;
    Py_INCREF(Py_False);
    if (PyList_SetItem(after_l, th, Py_False))
        goto fail;
    Py_ssize_t keep = appended < depth ? appended : depth;   /* the deque keeps the newest `depth` */
    for (Py_ssize_t i = qlen - keep; i < qlen; i++) {
        PyObject *v = PyLong_FromLongLong(ring[(head + i) % depth]);
        PyObject *r = v ? PyObject_CallMethodOneArg(q, s_append, v) : NULL;
        Py_XDECREF(v);
        if (!r)
            goto fail;
        Py_DECREF(r);
    }
    if (set_attr_ll(st, s_mad_cycle, mad_cycle) || set_attr_ll(st, s_mad_writes, mad_writes)
        || PyObject_SetAttr(st, s_mad_macro, mad_macro ? Py_True : Py_False)
        || set_attr_ll(st, s_nop_only_cycle, nop_only) || set_attr_ll(st, s_busy_until, busy))
        goto fail;
    if (last_mem >= 0) {
        for (int k = 0; k < 6; k++) {
            PyObject *v = PyLong_FromLongLong(rwc[k]);
            int bad = !v || PyDict_SetItem(rwc_d, rwc_keys[k], v) < 0;
            Py_XDECREF(v);
            if (bad)
                goto fail;
        }
    }
    result = Py_BuildValue("(nLLLn)", j, t, last_c, fl, last_mem);
    goto out;
fail:
    result = NULL;
out:
    if (written.obj)
        PyBuffer_Release(&written);
    return result;
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
        PyObject *r = PyDict_GetItemWithError(records, PyTuple_GET_ITEM(e, 0));
        if (!r) {
            if (PyErr_Occurred())
                goto fail;
            break;
        }
        if (r == Py_None)
            break;
        if (!PyTuple_Check(r) || PyTuple_GET_SIZE(r) != 8)
            goto bad;
        for (int k = 0; k < 8; k++) {
            long v = PyLong_AsLong(PyTuple_GET_ITEM(r, k));
            if (v == -1 && PyErr_Occurred())
                goto fail;
            p[k] = (int32_t)v;
        }
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

static PyMethodDef methods[] = {
    {"configure", configure, METH_VARARGS, "configure(fifo_depth, mop_transition_penalty, all_lregs, load_modes, store_modes, dst_rwc_mask, "
     "src_rwc_mask, fpu_to_sfpload_gap)"},
    {"issue_run", (PyCFunction)(void (*)(void))issue_run, METH_FASTCALL, "see the module comment"},
    {"pack_records", (PyCFunction)(void (*)(void))pack_records, METH_FASTCALL, "see its comment"},
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
    const char *keys[6] = {"a", "a_cr", "b", "b_cr", "d", "d_cr"};
    for (int k = 0; k < 6; k++)
        if (!(rwc_keys[k] = PyUnicode_InternFromString(keys[k])))
            return NULL;
    return PyModule_Create(&module);
}
