/* The Tensix's issue of plain SFPU words a core pushes one at a time, in C (loaded by sfpu_issue_native.py).
 *
 * A CPython extension module. Its hot function, issue_run: for a run of `.ttinsn` words pushed to a thread whose
 * frontend is empty (no FIFO, MOP or ready words, no REPLAY load), it does for each word what
 * deferral.py's push_many does for a deferrable SFPU word without Dst access: the FIFO accepts it and the MOP expander
 * takes it (cycles.TensixTiming.accept_take), the cycle model issues it (TensixTiming.issue_sfpu with
 * SfpuTiming.regular), the deferral's abstract lane-flag state follows it, and its data effect is appended to the
 * deferred queue as the same tuple push_many appends. It stops, with nothing changed for that word, at the first word
 * it was not given facts for (cword), at a word the Wait Gate's latch holds, at a full queue, and where SfpuTiming.regular would raise a strict error: the
 * Python path then takes that word (and raises). The cycle model's state is read once per call and written back once.
 * pack_records turns a run of the deferred queue's entries into the records sfpu_native.c executes, in one call.
 * Python stays the reference (tests/emu/test_sfpu_issue_native.py pins cycles, queue and bits to it).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#define MAX_DEPTH 64

/* Per-word facts, packed by sfpu_issue_native.word_facts in this order (little-endian int64s). */
typedef struct {
    int64_t block, reads, seen, writes, mad, two_cycle, indirect, is_nop;
    int64_t ftab;          /* -1: no flag write; else 4 bits per entry state lf * 3 + use: the state after it */
} word_facts;

static int depth = 28, mop_penalty = 1;
static int64_t all_lregs = (1 << 17) - 1;
static PyObject *zero;            /* the queue entry's unused Dst base */
static PyObject *s_mad_cycle, *s_mad_writes, *s_mad_macro, *s_nop_only_cycle, *s_busy_until, *s_strict, *s_append;

static PyObject *configure(PyObject *self, PyObject *args) {
    if (!PyArg_ParseTuple(args, "iiL", &depth, &mop_penalty, &all_lregs))
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

/* issue_run(ctx, words, j, t, thread, cword, dq, flags, cfg0, cfg1, thread_obj, was_blocked, event_t, dq_max,
 *           latch_block)
 * ctx: (clock, fe, gate, after_mop, first, stalls, issued, taken, sfpu timing) of the cycle model;
 * cword: word -> (name, fields, packed word_facts); flags: the deferral's lane-flag state, lf * 3 + use (2 = mixed);
 * latch_block: the block mask of the Wait Gate's latched wait instruction (0: none), which holds a word it blocks.
 * Returns None when words[j] is not taken, else (next j, next push time, last issue cycle, flags). */
static PyObject *issue_run(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 15) {
        PyErr_SetString(PyExc_TypeError, "issue_run takes 15 arguments");
        return NULL;
    }
    PyObject *ctx = args[0], *words = args[1], *cword = args[5], *dq = args[6];
    PyObject *cfg0 = args[8], *cfg1 = args[9], *thobj = args[10];
    long long j0, t, th, fl, event_t, dq_max, latch_block;
    if (get_ll(args[2], "j", &j0) || get_ll(args[3], "t", &t) || get_ll(args[4], "thread", &th)
        || get_ll(args[7], "flags", &fl) || get_ll(args[12], "event_t", &event_t)
        || get_ll(args[13], "dq_max", &dq_max) || get_ll(args[14], "latch_block", &latch_block))
        return NULL;
    int was_blocked = PyObject_IsTrue(args[11]);
    if (!PyTuple_Check(ctx) || PyTuple_GET_SIZE(ctx) != 9 || !PyTuple_Check(words) || !PyDict_Check(cword)
        || !PyList_Check(dq) || was_blocked < 0 || th < 0 || th > 2) {
        PyErr_SetString(PyExc_TypeError, "issue_run: arguments of the wrong kind");
        return NULL;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(words), j = (Py_ssize_t)j0;
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
    int head = 0;                 /* ring[head] is the oldest of qlen */
    Py_ssize_t appended = 0;
    long long last_c = 0;

    while (j < n) {
        PyObject *w = PyTuple_GET_ITEM(words, j);
        rec = PyDict_GetItemWithError(cword, w);
        if (!rec) {
            if (PyErr_Occurred())
                return NULL;
            break;
        }
        const word_facts *f = (const word_facts *)PyBytes_AS_STRING(PyTuple_GET_ITEM(rec, 2));
        if (PyList_GET_SIZE(dq) >= dq_max || (latch_block & f->block))
            break;
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
        /* the deferred queue's entry, as push_many builds it */
        PyObject *c_o = PyLong_FromLongLong(c);
        if (!c_o)
            return NULL;
        PyObject *entry = PyTuple_Pack(9, w, PyTuple_GET_ITEM(rec, 0), PyTuple_GET_ITEM(rec, 1), Py_None,
                                       zero, c_o, cfg0, cfg1, thobj);
        Py_DECREF(c_o);
        /* Untracked by the cyclic GC, as CPython untracks tuples of atoms: its one container, the decoded fields, is
         * shared by every entry of the word and never refers back. (Tracked, the queue's tens of thousands of entries
         * made the collections the GC runs during a long body cost 3-4x the issue itself.) */
        if (entry)
            PyObject_GC_UnTrack(entry);
        if (!entry || PyList_Append(dq, entry) < 0) {
            Py_XDECREF(entry);
            return NULL;
        }
        Py_DECREF(entry);
        /* commit the word's effects on the cycle model */
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
        last_c = c;
        t = a + 1;
        was_blocked = 0;
        j++;
    }
    if (j == (Py_ssize_t)j0)
        Py_RETURN_NONE;

    /* write the state back */
    if (set_item_ll(clock_l, th, clock) || set_item_ll(fe_l, th, fe) || set_item_ll(stalls_l, th, stalls)
        || set_item_ll(issued_l, th, issued) || (first_o == Py_None && set_item_ll(first_l, th, first)))
        return NULL;
    Py_INCREF(Py_False);
    if (PyList_SetItem(after_l, th, Py_False))
        return NULL;
    Py_ssize_t keep = appended < depth ? appended : depth;   /* the deque keeps the newest `depth` */
    for (Py_ssize_t i = qlen - keep; i < qlen; i++) {
        PyObject *v = PyLong_FromLongLong(ring[(head + i) % depth]);
        PyObject *r = v ? PyObject_CallMethodOneArg(q, s_append, v) : NULL;
        Py_XDECREF(v);
        if (!r)
            return NULL;
        Py_DECREF(r);
    }
    if (set_attr_ll(st, s_mad_cycle, mad_cycle) || set_attr_ll(st, s_mad_writes, mad_writes)
        || PyObject_SetAttr(st, s_mad_macro, mad_macro ? Py_True : Py_False)
        || set_attr_ll(st, s_nop_only_cycle, nop_only) || set_attr_ll(st, s_busy_until, busy))
        return NULL;
    return Py_BuildValue("(nLLL)", j, t, last_c, fl);
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
    {"configure", configure, METH_VARARGS, "configure(fifo_depth, mop_transition_penalty, all_lregs)"},
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
    return PyModule_Create(&module);
}
