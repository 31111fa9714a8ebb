/* The NoC time model's reservation (runtime/emu/noc.py Fabric._reserve with Busy.free_from and Busy.take, the
 * reference, which tests/emu/test_noc_native.py pins this against) in C: the first cycle from s0 at which every
 * resource of a transfer is free for d cycles from its offset on, the resources visited round and round until all of
 * them in a row accept it, then taken there. It works on the Busy objects' own lists of interval starts and ends
 * (sorted, disjoint, Python ints), so the Python side keeps no copy. A CPython extension module built by
 * accel/native.py; loaded by accel/noc_native.py. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>

static PyObject *s_starts, *s_ends;

/* list[i] as a C integer (the cycles fit in 64 bits; a larger one raises OverflowError) */
static inline long long at(PyObject *list, Py_ssize_t i) { return PyLong_AsLongLong(PyList_GET_ITEM(list, i)); }

/* bisect_right (right != 0: the first index whose value is > t) or bisect_left (the first whose value is >= t) */
static Py_ssize_t bisect(PyObject *list, long long t, int right) {
    Py_ssize_t lo = 0, hi = PyList_GET_SIZE(list);
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi) / 2;
        long long v = at(list, mid);
        if (right ? v <= t : v < t) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* Busy.free_from: the earliest f >= t such that [f, f + d) meets no interval */
static long long free_from(PyObject *starts, PyObject *ends, long long t, long long d) {
    Py_ssize_t n = PyList_GET_SIZE(starts);
    for (Py_ssize_t i = bisect(ends, t, 1); i < n && at(starts, i) < t + d; i++)
        t = at(ends, i);
    return t;
}

/* a new list [v], or NULL */
static PyObject *single(long long v) {
    PyObject *o = PyLong_FromLongLong(v), *l = o ? PyList_New(1) : NULL;
    if (!l) { Py_XDECREF(o); return NULL; }
    PyList_SET_ITEM(l, 0, o);
    return l;
}

/* Busy.take: [s, s + d) becomes busy, merged with the intervals it touches; -1 with an error set */
static int take(PyObject *starts, PyObject *ends, long long s, long long d) {
    long long e = s + d;
    Py_ssize_t m = PyList_GET_SIZE(ends);
    long long last = m ? at(ends, m - 1) : 0;
    if (!m || last < s) {                       /* after every interval */
        PyObject *a = PyLong_FromLongLong(s), *b = a ? PyLong_FromLongLong(e) : NULL;
        int bad = !b || PyList_Append(starts, a) < 0 || PyList_Append(ends, b) < 0;
        Py_XDECREF(a), Py_XDECREF(b);
        return bad ? -1 : 0;
    }
    if (last == s) {                            /* right behind the last one */
        PyObject *b = PyLong_FromLongLong(e);
        return b ? PyList_SetItem(ends, m - 1, b) : -1;
    }
    Py_ssize_t i = bisect(ends, s, 0), j = i, n = PyList_GET_SIZE(starts);
    for (; j < n && at(starts, j) <= e; j++) {
        long long a = at(starts, j), b = at(ends, j);
        if (a < s) s = a;
        if (b > e) e = b;
    }
    PyObject *ls = single(s), *le = ls ? single(e) : NULL;
    int bad = !le || PyList_SetSlice(starts, i, j, ls) < 0 || PyList_SetSlice(ends, i, j, le) < 0;
    Py_XDECREF(ls), Py_XDECREF(le);
    return bad ? -1 : 0;
}

/* ---- A C-backed Busy (noc.py Busy is the reference, whose methods and lists it mirrors): the intervals as C
 * integers, (start, end) pairs in one array, so that a reservation makes no Python int and appends to no list (a
 * launch of elementwise512 had made ~17,900 ints and ~14,300 list appends). `starts` and `ends` are the Python view:
 * new lists of the values on each read (they are read by tests and the reference path only). Fabric._res makes these
 * while noc_native.busy_class() gives the type (TT_EMU_NOC_BUSY_NATIVE=0: noc.py's Busy). */
typedef struct {
    PyObject_HEAD
    long long *iv;                              /* iv[2i], iv[2i + 1]: the i-th interval's start and end */
    Py_ssize_t n, cap;                          /* intervals held, room for */
} CBusy;

static PyTypeObject CBusy_Type;

static void cbusy_dealloc(CBusy *b) {
    PyMem_Free(b->iv);
    Py_TYPE(b)->tp_free((PyObject *)b);
}

/* the first interval whose end is > t (right) or >= t */
static Py_ssize_t cbusy_bisect(const CBusy *b, long long t, int right) {
    Py_ssize_t lo = 0, hi = b->n;
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi) / 2;
        long long v = b->iv[2 * mid + 1];
        if (right ? v <= t : v < t) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* Busy.free_from */
static long long cbusy_free_from(const CBusy *b, long long t, long long d) {
    for (Py_ssize_t i = cbusy_bisect(b, t, 1); i < b->n && b->iv[2 * i] < t + d; i++)
        t = b->iv[2 * i + 1];
    return t;
}

/* room for one more interval; -1 with an error set */
static int cbusy_grow(CBusy *b) {
    if (b->n < b->cap)
        return 0;
    Py_ssize_t cap = b->cap ? 2 * b->cap : 8;
    long long *iv = PyMem_Realloc(b->iv, 2 * (size_t)cap * sizeof *iv);
    if (!iv) {
        PyErr_NoMemory();
        return -1;
    }
    b->iv = iv, b->cap = cap;
    return 0;
}

/* Busy.take: [s, s + d) becomes busy, merged with the intervals it touches; -1 with an error set */
static int cbusy_take(CBusy *b, long long s, long long d) {
    long long e = s + d;
    if (!b->n || b->iv[2 * b->n - 1] < s) {     /* after every interval */
        if (cbusy_grow(b) < 0)
            return -1;
        b->iv[2 * b->n] = s, b->iv[2 * b->n + 1] = e;
        b->n++;
        return 0;
    }
    if (b->iv[2 * b->n - 1] == s) {             /* right behind the last one */
        b->iv[2 * b->n - 1] = e;
        return 0;
    }
    Py_ssize_t i = cbusy_bisect(b, s, 0), j = i;
    for (; j < b->n && b->iv[2 * j] <= e; j++) {
        if (b->iv[2 * j] < s) s = b->iv[2 * j];
        if (b->iv[2 * j + 1] > e) e = b->iv[2 * j + 1];
    }
    if (j == i && cbusy_grow(b) < 0)            /* (j == i: a new interval between two, the rest moved up one) */
        return -1;
    memmove(b->iv + 2 * (i + 1), b->iv + 2 * j, 2 * (size_t)(b->n - j) * sizeof *b->iv);
    b->n += i + 1 - j;
    b->iv[2 * i] = s, b->iv[2 * i + 1] = e;
    return 0;
}

/* Busy.forget_before: the intervals that end before t dropped */
static void cbusy_forget_before(CBusy *b, long long t) {
    Py_ssize_t i = cbusy_bisect(b, t, 0);
    memmove(b->iv, b->iv + 2 * i, 2 * (size_t)(b->n - i) * sizeof *b->iv);
    b->n -= i;
}

/* two C integers from a method's arguments; -1 with an error set */
static int two_ints(PyObject *const *args, Py_ssize_t nargs, const char *usage, long long *a, long long *b) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, usage);
        return -1;
    }
    *a = PyLong_AsLongLong(args[0]);
    *b = *a == -1 && PyErr_Occurred() ? -1 : PyLong_AsLongLong(args[1]);
    return PyErr_Occurred() ? -1 : 0;
}

static PyObject *cbusy_py_free_from(CBusy *b, PyObject *const *args, Py_ssize_t nargs) {
    long long t, d;
    return two_ints(args, nargs, "free_from(t, d)", &t, &d) < 0 ? NULL : PyLong_FromLongLong(cbusy_free_from(b, t, d));
}

static PyObject *cbusy_py_take(CBusy *b, PyObject *const *args, Py_ssize_t nargs) {
    long long s, d;
    if (two_ints(args, nargs, "take(s, d)", &s, &d) < 0 || cbusy_take(b, s, d) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *cbusy_py_forget_before(CBusy *b, PyObject *t_obj) {
    long long t = PyLong_AsLongLong(t_obj);
    if (t == -1 && PyErr_Occurred())
        return NULL;
    cbusy_forget_before(b, t);
    Py_RETURN_NONE;
}

/* the view: a new list of the starts (which = 0) or the ends (1) */
static PyObject *cbusy_list(CBusy *b, int which) {
    PyObject *l = PyList_New(b->n);
    for (Py_ssize_t i = 0; l && i < b->n; i++) {
        PyObject *v = PyLong_FromLongLong(b->iv[2 * i + which]);
        if (!v) {
            Py_CLEAR(l);
            break;
        }
        PyList_SET_ITEM(l, i, v);
    }
    return l;
}

static PyObject *cbusy_starts(CBusy *b, void *unused) { (void)unused; return cbusy_list(b, 0); }
static PyObject *cbusy_ends(CBusy *b, void *unused) { (void)unused; return cbusy_list(b, 1); }

static PyMethodDef cbusy_methods[] = {
    {"free_from", (PyCFunction)(void (*)(void))cbusy_py_free_from, METH_FASTCALL,
     "free_from(t, d): the earliest s >= t such that [s, s + d) is free"},
    {"take", (PyCFunction)(void (*)(void))cbusy_py_take, METH_FASTCALL, "take(s, d): [s, s + d) becomes busy"},
    {"forget_before", (PyCFunction)cbusy_py_forget_before, METH_O,
     "forget_before(t): drop the intervals that end before cycle t"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef cbusy_getset[] = {
    {"starts", (getter)cbusy_starts, NULL, "the intervals' starts (a new list)", NULL},
    {"ends", (getter)cbusy_ends, NULL, "the intervals' ends (a new list)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject CBusy_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "noc_native.Busy",
    .tp_doc = "The busy intervals of one resource as C integers (noc.py Busy is the reference)",
    .tp_basicsize = sizeof(CBusy),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_dealloc = (destructor)cbusy_dealloc,
    .tp_methods = cbusy_methods,
    .tp_getset = cbusy_getset,
};

/* The Busy class's slots: where its instances keep `starts` and `ends` (the member descriptors' offsets, found on the
 * first Busy seen), so that a reservation reads the lists without an attribute look-up each; another type's objects
 * (a subclass among them) go through PyObject_GetAttr */
static PyTypeObject *busy_type;
static Py_ssize_t busy_starts_at, busy_ends_at;

/* the offset of a `name` slot (a T_OBJECT_EX member) of type t, or -1 */
static Py_ssize_t slot_offset(PyTypeObject *t, PyObject *name) {
    PyObject *descr = _PyType_Lookup(t, name);       /* (borrowed) */
    if (!descr || !Py_IS_TYPE(descr, &PyMemberDescr_Type))
        return -1;
    PyMemberDef *m = ((PyMemberDescrObject *)descr)->d_member;
    return m->type == T_OBJECT_EX && !(m->flags & READONLY) ? m->offset : -1;
}

/* busy.<name> (slot: the offset of its slot for the Busy type) as a new reference, or NULL with an error set */
static PyObject *busy_list(PyObject *busy, PyObject *name, Py_ssize_t *slot) {
    if (!busy_type && Py_TYPE(busy)->tp_dictoffset == 0) {
        Py_ssize_t a = slot_offset(Py_TYPE(busy), s_starts), b = slot_offset(Py_TYPE(busy), s_ends);
        if (a >= 0 && b >= 0) {
            busy_starts_at = a, busy_ends_at = b;
            busy_type = (PyTypeObject *)Py_NewRef(Py_TYPE(busy));
        }
    }
    if (Py_TYPE(busy) == busy_type) {
        PyObject *v = *(PyObject **)((char *)busy + *slot);
        if (v)
            return Py_NewRef(v);
    }
    return PyObject_GetAttr(busy, name);
}

/* One resource of a reservation: a C-backed Busy (c) or another Busy's lists (new references), and its offset */
typedef struct {
    CBusy *c;
    PyObject *starts, *ends;
    long long off;
} resource;

/* r from res's (Busy, offset) pair; -1 with an error set */
static int resource_from(PyObject *item, resource *r) {
    if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2) {
        PyErr_SetString(PyExc_TypeError, "reserve: res holds (Busy, offset) pairs");
        return -1;
    }
    PyObject *busy = PyTuple_GET_ITEM(item, 0);
    r->off = PyLong_AsLongLong(PyTuple_GET_ITEM(item, 1));
    if (r->off == -1 && PyErr_Occurred())
        return -1;
    if (Py_IS_TYPE(busy, &CBusy_Type)) {
        r->c = (CBusy *)busy;                   /* (borrowed: res holds it while the reservation runs) */
        return 0;
    }
    r->starts = busy_list(busy, s_starts, &busy_starts_at);
    r->ends = r->starts ? busy_list(busy, s_ends, &busy_ends_at) : NULL;
    if (!r->ends)
        return -1;
    if (!PyList_CheckExact(r->starts) || !PyList_CheckExact(r->ends)) {
        PyErr_SetString(PyExc_TypeError, "reserve: a Busy's starts and ends are lists");
        return -1;
    }
    return 0;
}

/* whether r is busy after cycle t (its last interval ends later): only then can it move a reservation at t */
static int busy_after(const resource *r, long long t) {
    if (r->c)
        return r->c->n && r->c->iv[2 * r->c->n - 1] > t;
    Py_ssize_t m = PyList_GET_SIZE(r->ends);
    return m && at(r->ends, m - 1) > t;
}

static long long resource_free_from(const resource *r, long long t, long long d) {
    return r->c ? cbusy_free_from(r->c, t, d) : free_from(r->starts, r->ends, t, d);
}

static int resource_take(const resource *r, long long s, long long d) {
    return r->c ? cbusy_take(r->c, s, d) : take(r->starts, r->ends, s, d);
}

/* Fabric._reserve's cycle for res (a list of (Busy, offset)) from s0 for d cycles into *s, the resources taken
 * there; -1 with an error set */
#define RESERVE_ON_STACK 16                     /* resources a route has (some ten): no allocation for those */
static int reserve_in(PyObject *res, long long s0, long long d, long long *s_out) {
    Py_ssize_t n = PyList_GET_SIZE(res);
    resource here[RESERVE_ON_STACK];
    long long s = s0;
    int heap = n > RESERVE_ON_STACK, r = -1;
    resource *rs = heap ? PyMem_Calloc((size_t)n, sizeof *rs) : memset(here, 0, sizeof here);
    if (!rs) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t k = 0; k < n; k++)
        if (resource_from(PyList_GET_ITEM(res, k), &rs[k]) < 0)
            goto done;
    for (Py_ssize_t i = 0, in_a_row = 0; in_a_row < n; i = i + 1 < n ? i + 1 : 0) {
        if (busy_after(&rs[i], s + rs[i].off)) {
            long long f = resource_free_from(&rs[i], s + rs[i].off, d) - rs[i].off;
            if (f > s) {
                s = f;
                in_a_row = 0;
            }
        }
        if (PyErr_Occurred())
            goto done;
        in_a_row++;
    }
    for (Py_ssize_t k = 0; k < n; k++)
        if (resource_take(&rs[k], s + rs[k].off, d) < 0 || PyErr_Occurred())
            goto done;
    *s_out = s;
    r = 0;
done:
    for (Py_ssize_t k = 0; k < n; k++)
        Py_XDECREF(rs[k].starts), Py_XDECREF(rs[k].ends);
    if (heap)
        PyMem_Free(rs);
    return r;
}

/* reserve(res: list of (Busy, offset), s0, d) -> s: Fabric._reserve's cycle, the resources taken there */
static PyObject *reserve(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    long long s0 = nargs == 3 ? PyLong_AsLongLong(args[1]) : 0, d = nargs == 3 ? PyLong_AsLongLong(args[2]) : 0, s;
    if (nargs != 3 || !PyList_Check(args[0]) || PyErr_Occurred()) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "reserve(res: list of (Busy, offset), s0, d)");
        return NULL;
    }
    return reserve_in(args[0], s0, d, &s) < 0 ? NULL : PyLong_FromLongLong(s);
}

/* ---- Niu._send's common case (noc.py Niu._send_in_python is the reference): a unicast read into this tile's L1 or
 * write from it, between L1 (no MMIO) and a DRAM bank or a tile's L1 the NIU has met before. Constants from noc.py. */
#define NIU_REGS 12                 /* N_PLAIN_REGISTERS per initiator */
#define R_TARG_LO 0
#define R_TARG_MID 1
#define R_TARG_HI 2
#define R_RET_LO 3
#define R_RET_MID 4
#define R_RET_HI 5
#define R_CTRL 7
#define R_AT_LEN_BE 8
#define CTRL_TYPE 0x3u
#define CTRL_WR_INLINE (1u << 3)
#define CTRL_RESP_MARKED (1u << 4)
#define CTRL_BRCST (1u << 5)
#define CTRL_PATH_RESERVE (1u << 8)
#define CTRL_FATAL ((1u << 2) | (1u << 9) | (0x7u << 10) | (1u << 16) | (0x1FFu << 18) | (0xFu << 27) | (1u << 31))
#define MAX_LEN 16384u
#define MMIO_START 0xFF000000ull
#define WR_ACK_RECEIVED 1
#define RD_RESP_RECEIVED 2
#define NONPOSTED_WR_REQ_SENT 10
#define POSTED_WR_REQ_SENT 11

static PyObject *s_read, *s_write;

/* one end of a transfer: a tile's L1 (pages NULL) or a DRAM bank's page dict */
typedef struct { PyObject *desc, *l1, *pages; unsigned long long size; } endpoint;

/* peers[hi] (Niu._c_peers: (xy, L1 array or None, DRAM pages or None, size, DRAM bank or None)) into *e; 0 when the
 * NIU has not met it (Python resolves it) */
static int endpoint_of(PyObject *peers, uint32_t hi, endpoint *e) {
    PyObject *key = PyLong_FromUnsignedLong(hi);
    e->desc = key ? PyDict_GetItemWithError(peers, key) : NULL;
    Py_XDECREF(key);
    if (!e->desc || !PyTuple_Check(e->desc) || PyTuple_GET_SIZE(e->desc) != 5)
        return 0;
    e->l1 = PyTuple_GET_ITEM(e->desc, 1);
    e->pages = PyTuple_GET_ITEM(e->desc, 2);
    e->size = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(e->desc, 3));
    return !PyErr_Occurred() && (e->pages == Py_None ? e->l1 != Py_None : PyDict_Check(e->pages));
}

/* whether [addr, + n) of an endpoint is a range Python would move without an error (an L1 range, not MMIO) */
static int range_ok(const endpoint *e, unsigned long long addr, unsigned long long n) {
    if (e->pages == Py_None && addr >= MMIO_START && !(addr >> 32))
        return 0;
    return addr <= e->size && n <= e->size - addr;     /* (not addr + n: a 64-bit address near 2^64 wraps) */
}

/* whether [off, + n) lies in a buffer of len bytes, without the wrap of off + n */
static int fits(Py_ssize_t len, unsigned long long off, unsigned long long n) {
    return off <= (unsigned long long)len && n <= (unsigned long long)len - off;
}

/* each page span of [addr, + n) of a DRAM bank: its page (a writable uint8 buffer, or NULL where the bank has none),
 * the offset in it, the offset in the request and the length; calls f(arg, ...); -1 on an error */
typedef int (*span_fn)(void *arg, uint8_t *page, unsigned long long off, unsigned long long pos, unsigned long long n);
static int dram_spans(const endpoint *e, int page_bits, unsigned long long addr, unsigned long long n, span_fn f,
                      void *arg) {
    unsigned long long page_size = 1ull << page_bits;
    for (unsigned long long done = 0; done < n;) {
        unsigned long long a = addr + done, off = a & (page_size - 1), take = n - done;
        if (take > page_size - off)
            take = page_size - off;
        PyObject *key = PyLong_FromUnsignedLongLong(a >> page_bits), *page;
        page = key ? PyDict_GetItemWithError(e->pages, key) : NULL;
        Py_XDECREF(key);
        if (PyErr_Occurred())
            return -1;
        Py_buffer view = {0};
        if (page && PyObject_GetBuffer(page, &view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0)
            return -1;
        if (page && (unsigned long long)view.len < off + take) {
            PyBuffer_Release(&view);
            PyErr_SetString(PyExc_ValueError, "send: a DRAM page is shorter than the page size");
            return -1;
        }
        int bad = f(arg, page ? view.buf : NULL, off, done, take);
        if (page)
            PyBuffer_Release(&view);
        if (bad)
            return bad;
        done += take;
    }
    return 0;
}

static int span_missing(void *arg, uint8_t *page, unsigned long long off, unsigned long long pos,
                        unsigned long long n) {
    return page ? 0 : 1;
}

static int span_read(void *arg, uint8_t *page, unsigned long long off, unsigned long long pos, unsigned long long n) {
    uint8_t *out = arg;
    if (page)
        memcpy(out + pos, page + off, n);
    else
        memset(out + pos, 0, n);                /* an untouched page reads as zero (dram.py) */
    return 0;
}

static int span_write(void *arg, uint8_t *page, unsigned long long off, unsigned long long pos,
                      unsigned long long n) {
    memcpy(page + off, (const uint8_t *)arg + pos, n);
    return 0;
}

/* counters[c] += 1 (mod 2^32), Niu._bump */
static int bump(PyObject *counters, long c) {
    PyObject *key = PyLong_FromLong(c), *old = key ? PyDict_GetItemWithError(counters, key) : NULL;
    unsigned long long v = old ? PyLong_AsUnsignedLongLong(old) : 0;
    PyObject *now = !key || PyErr_Occurred() ? NULL : PyLong_FromUnsignedLongLong((v + 1) & 0xFFFFFFFFull);
    int bad = !now || PyDict_SetItem(counters, key, now) < 0;
    Py_XDECREF(key), Py_XDECREF(now);
    return bad ? -1 : 0;
}

/* d[name] += by */
static int add_to(PyObject *d, PyObject *name, unsigned long long by) {
    PyObject *old = PyDict_GetItemWithError(d, name), *inc = old ? PyLong_FromUnsignedLongLong(by) : NULL;
    PyObject *now = inc ? PyNumber_Add(old, inc) : NULL;
    int bad = !now || PyDict_SetItem(d, name, now) < 0;
    Py_XDECREF(inc), Py_XDECREF(now);
    if (!old && !PyErr_Occurred())
        PyErr_SetString(PyExc_KeyError, "send: a request kind missing from the NIU's tallies");
    return bad ? -1 : 0;
}

/* A unicast read or write Niu._send_in_python would make without an error, decoded from one initiator's registers
 * (plan_send) and then made (move). */
typedef struct {
    uint32_t ctrl, kind, length;
    unsigned long long from, to;
    endpoint src, dst;
    int peer_is_src;                            /* a read's peer is its source, a write's its destination */
    PyObject *counters, *requests, *bytes, *sent;
    int page_bits;
} xfer;

/* the command of initiator `buf` of the NIU context ctx (Niu._c_context: (regs, own coordinate word, peers, counters,
 * requests, bytes, sent, DRAM page bits)) into *t: 1 when C can make it, 0 where Python must (another request kind, a
 * check that fails, an MMIO address, a peer not met yet, a DRAM page a write would have to create), -1 with an error
 * set; nothing changed in any case */
static int plan_send(PyObject *ctx, long buf, xfer *t) {
    if (!PyTuple_Check(ctx) || PyTuple_GET_SIZE(ctx) != 8 || buf < 0 || buf > 3) {
        PyErr_SetString(PyExc_TypeError, "send: an NIU context (a tuple of 8) and an initiator 0..3");
        return -1;
    }
    PyObject *regs = PyTuple_GET_ITEM(ctx, 0), *peers = PyTuple_GET_ITEM(ctx, 2);
    t->counters = PyTuple_GET_ITEM(ctx, 3), t->requests = PyTuple_GET_ITEM(ctx, 4);
    t->bytes = PyTuple_GET_ITEM(ctx, 5), t->sent = PyTuple_GET_ITEM(ctx, 6);
    uint32_t own = (uint32_t)PyLong_AsUnsignedLong(PyTuple_GET_ITEM(ctx, 1));
    t->page_bits = (int)PyLong_AsLong(PyTuple_GET_ITEM(ctx, 7));
    if (PyErr_Occurred())
        return -1;
    if (!PyDict_Check(peers) || !PyDict_Check(t->counters) || !PyDict_Check(t->requests) || !PyDict_Check(t->bytes)
        || !PyList_Check(t->sent) || t->page_bits < 1 || t->page_bits > 40) {
        PyErr_SetString(PyExc_TypeError, "send: the NIU context's peers, tallies, sent list or page bits");
        return -1;
    }
    Py_buffer rv;
    if (PyObject_GetBuffer(regs, &rv, PyBUF_C_CONTIGUOUS) < 0)
        return -1;
    if (rv.len != 4 * NIU_REGS * 4) {
        PyBuffer_Release(&rv);
        PyErr_SetString(PyExc_ValueError, "send: the NIU's registers are not 4 x 12 uint32");
        return -1;
    }
    uint32_t r[NIU_REGS];
    memcpy(r, (const uint32_t *)rv.buf + buf * NIU_REGS, sizeof r);
    PyBuffer_Release(&rv);
    uint32_t ctrl = t->ctrl = r[R_CTRL], kind = t->kind = ctrl & CTRL_TYPE, length = t->length = r[R_AT_LEN_BE];
    unsigned long long from = t->from = (unsigned long long)r[R_TARG_MID] << 32 | r[R_TARG_LO];
    unsigned long long to = t->to = (unsigned long long)r[R_RET_MID] << 32 | r[R_RET_LO];
    if (ctrl & (CTRL_FATAL | CTRL_BRCST | CTRL_PATH_RESERVE | CTRL_WR_INLINE) || (kind != 0 && kind != 2)
        || length < 1 || length > MAX_LEN)
        return 0;
    t->peer_is_src = kind == 0;
    if (kind == 0) {                            /* a read: from the peer at TARG_HI into this tile */
        if (!(ctrl & CTRL_RESP_MARKED) || r[R_RET_HI] != own || r[R_TARG_HI] >> 12
            || !endpoint_of(peers, r[R_TARG_HI], &t->src) || !endpoint_of(peers, own, &t->dst))
            return PyErr_Occurred() ? -1 : 0;
    } else {                                    /* a write: from this tile to the peer at RET_HI */
        if (r[R_TARG_HI] != own || r[R_RET_HI] >> 12 || !endpoint_of(peers, own, &t->src)
            || !endpoint_of(peers, r[R_RET_HI], &t->dst))
            return PyErr_Occurred() ? -1 : 0;
    }
    if (t->src.pages != Py_None && t->dst.pages != Py_None)
        return 0;                               /* (the own tile is never a DRAM bank) */
    if ((from - to) & ((kind == 0 && t->src.pages != Py_None ? 64 : 16) - 1) || !range_ok(&t->src, from, length)
        || !range_ok(&t->dst, to, length))
        return PyErr_Occurred() ? -1 : 0;
    if (t->dst.pages != Py_None) {              /* a write must not create a page: Python does */
        int missing = dram_spans(&t->dst, t->page_bits, to, length, span_missing, NULL);
        if (missing)
            return missing < 0 ? -1 : 0;
    }
    return 1;
}

/* the request `t` made as Niu._send_in_python makes it: the data moved, the counters bumped, the tallies, and
 * Niu._record's entry appended to the NIU's sent list when `record`; -1 with an error set */
static int move(const xfer *t, int record) {
    /* the data: DRAM -> L1, L1 -> DRAM, or L1 -> L1 (possibly the same tile: moved as through a copy) */
    const endpoint *src = &t->src, *dst = &t->dst, *peer = t->peer_is_src ? src : dst;
    unsigned long long from = t->from, to = t->to, length = t->length;
    Py_buffer lv;
    const endpoint *tile = src->pages == Py_None ? src : dst;
    if (PyObject_GetBuffer(tile->l1, &lv, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0)
        return -1;
    int bad = 0;
    if (src->pages != Py_None) {
        bad = !fits(lv.len, to, length) || dram_spans(src, t->page_bits, from, length, span_read,
                                                      (uint8_t *)lv.buf + to);
    } else if (dst->pages != Py_None) {
        bad = !fits(lv.len, from, length) || dram_spans(dst, t->page_bits, to, length, span_write,
                                                        (uint8_t *)lv.buf + from);
    } else {
        Py_buffer dv;
        if (PyObject_GetBuffer(dst->l1, &dv, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) {
            PyBuffer_Release(&lv);
            return -1;
        }
        bad = !fits(lv.len, from, length) || !fits(dv.len, to, length);
        if (!bad)
            memmove((uint8_t *)dv.buf + to, (const uint8_t *)lv.buf + from, length);
        PyBuffer_Release(&dv);
    }
    PyBuffer_Release(&lv);
    if (bad) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "send: an L1 array is shorter than its endpoint's size");
        return -1;
    }
    if (record) {                               /* Niu._record's entry */
        PyObject *bank = PyTuple_GET_ITEM(peer->desc, 4), *where = t->kind == 0 || dst->pages != Py_None ? NULL
            : PyLong_FromUnsignedLongLong(to);
        PyObject *n = PyLong_FromUnsignedLongLong(length), *rec = NULL;
        if (n && (t->kind == 0 || dst->pages != Py_None || where))
            rec = PyTuple_Pack(5, t->kind == 0 ? s_read : s_write, PyTuple_GET_ITEM(peer->desc, 0), n, bank,
                               where ? where : Py_None);
        Py_XDECREF(n), Py_XDECREF(where);
        if (!rec || PyList_Append(t->sent, rec) < 0) {
            Py_XDECREF(rec);
            return -1;
        }
        Py_DECREF(rec);
    }
    PyObject *name = t->kind == 0 ? s_read : s_write;
    if (add_to(t->requests, name, 1) < 0 || add_to(t->bytes, name, length) < 0)
        return -1;
    if (t->kind == 0)
        bad = bump(t->counters, RD_RESP_RECEIVED);
    else if (t->ctrl & CTRL_RESP_MARKED)
        bad = bump(t->counters, NONPOSTED_WR_REQ_SENT) || bump(t->counters, WR_ACK_RECEIVED);
    else
        bad = bump(t->counters, POSTED_WR_REQ_SENT);
    return bad ? -1 : 0;
}

/* send(context, initiator) -> None when the send is done as Niu._send_in_python does it, NotImplemented (nothing
 * changed) where Python must do it (plan_send). context: Niu._c_context. */
static PyObject *send(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    xfer t;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "send(NIU context, initiator 0..3)");
        return NULL;
    }
    long buf = PyLong_AsLong(args[1]);
    int how = PyErr_Occurred() ? -1 : plan_send(args[0], buf, &t);
    if (how <= 0)
        return how < 0 ? NULL : Py_NewRef(Py_NotImplemented);
    if (move(&t, 1) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* ---- the send with its time (tile.py Tile._niu_store's timed part, with noc.py Fabric.transfer, is the reference):
 * the request made as send makes it (its record is the time model's only: not kept), then the transfer's completion
 * from its route's cached resources (Fabric._paths; a route not cached yet is Python's, which caches it), the
 * reservation, the peer tile's L1 lines stamped for a write there, the completion due on the response counter it
 * bumps, and the NIU's busy end. The timing context, one per NIU of a tile (tile.py Tile._issue_timing): (fabric,
 * its route cache, the NoC index, the tile's (x, y), the chip's tiles, the tile's due completions of this NIU, the
 * tile's NIU busy ends, (NoC bytes per cycle, DRAM bank bytes per cycle, NIU latency, hop latency, DRAM latency,
 * stamp shift)). */
#define TIMING_FIELDS 8
static PyObject *s_transfers, *s_wait_cycles, *s_l1_stamp;

/* o.name += by (a Python int attribute); nothing where by is 0 (the sum is the value it has: most transfers wait for
 * nothing, and the read, add and write had cost ~800 x86 instructions) */
static int add_attr(PyObject *o, PyObject *name, long long by) {
    if (!by)
        return 0;
    PyObject *old = PyObject_GetAttr(o, name), *inc = old ? PyLong_FromLongLong(by) : NULL;
    PyObject *now = inc ? PyNumber_Add(old, inc) : NULL;
    int bad = !now || PyObject_SetAttr(o, name, now) < 0;
    Py_XDECREF(old), Py_XDECREF(inc), Py_XDECREF(now);
    return bad ? -1 : 0;
}

/* bisect.insort(due.setdefault(counter, []), done); -1 with an error set */
static int insort_due(PyObject *due, long counter, long long done) {
    PyObject *key = PyLong_FromLong(counter), *list = key ? PyDict_GetItemWithError(due, key) : NULL;
    PyObject *v = key && !PyErr_Occurred() ? PyLong_FromLongLong(done) : NULL;
    int bad = !v;
    if (!bad && !list) {
        bad = !(list = PyList_New(0)) || PyDict_SetItem(due, key, list) < 0;
        Py_XDECREF(list);                       /* (the dict holds it) */
    } else if (!bad && !PyList_Check(list)) {
        PyErr_SetString(PyExc_TypeError, "issue: a due list that is no list");
        bad = 1;
    }
    if (!bad) {
        Py_ssize_t lo = 0, hi = PyList_GET_SIZE(list);
        while (lo < hi && !bad) {
            Py_ssize_t mid = (lo + hi) / 2;
            long long m = at(list, mid);
            bad = m == -1 && PyErr_Occurred();
            if (done < m) hi = mid;
            else lo = mid + 1;
        }
        bad = bad || PyList_Insert(list, lo, v) < 0;
    }
    Py_XDECREF(key), Py_XDECREF(v);
    return bad ? -1 : 0;
}

/* the lines of [addr, + n) of the tile's L1 stamped with at least `cycle` (tile.py Tile.stamp_l1); -1 with an error */
static int stamp_lines(PyObject *tile, unsigned long long addr, unsigned long long n, unsigned long long cycle,
                       int shift) {
    PyObject *stamps = PyObject_GetAttr(tile, s_l1_stamp);
    Py_buffer b;
    if (!stamps || PyObject_GetBuffer(stamps, &b, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) {
        Py_XDECREF(stamps);
        return -1;
    }
    Py_DECREF(stamps);
    unsigned long long first = addr >> shift, last = (addr + n - 1) >> shift;
    int bad = b.itemsize != 8 || (unsigned long long)b.len / 8 <= last;
    for (uint64_t *line = (uint64_t *)b.buf + first; !bad && line <= (uint64_t *)b.buf + last; line++)
        if (*line < cycle)
            *line = cycle;
    PyBuffer_Release(&b);
    if (bad)
        PyErr_SetString(PyExc_ValueError, "issue: a tile's L1 stamps are no uint64 array covering the write");
    return bad ? -1 : 0;
}

/* The send of initiator `buf` issued at cycle `start` with its time (above): 1 with *done its completion, 0 where
 * Python must (plan_send's cases, a route not cached), -1 with an error set. Also the C entry of the capsule
 * "noc_native.issue" (rv32_native.c calls it for a core's NOC_CMD_CTRL store). */
static int issue_at(PyObject *ctx, long buf, PyObject *timing, long long start, long long *done) {
    xfer t;
    long long k[6];
    if (!PyTuple_Check(timing) || PyTuple_GET_SIZE(timing) != TIMING_FIELDS) {
        PyErr_SetString(PyExc_TypeError, "issue: a timing context is a tuple of 8");
        return -1;
    }
    PyObject **f = &PyTuple_GET_ITEM(timing, 0);
    if (!PyTuple_Check(f[7]) || PyTuple_GET_SIZE(f[7]) != 6) {
        PyErr_SetString(PyExc_TypeError, "issue: the timing context's constants are a tuple of 6 ints");
        return -1;
    }
    for (int j = 0; j < 6; j++)                 /* (read one by one: PyArg_ParseTuple's format had cost ~800) */
        if ((k[j] = PyLong_AsLongLong(PyTuple_GET_ITEM(f[7], j))) == -1 && PyErr_Occurred())
            return -1;
    if (!PyDict_Check(f[1]) || !PyDict_Check(f[4]) || !PyDict_Check(f[5]) || !PyList_Check(f[6])) {
        PyErr_SetString(PyExc_TypeError, "issue: the timing context's route cache, tiles, due or busy ends");
        return -1;
    }
    int how = plan_send(ctx, buf, &t);
    if (how <= 0)
        return how;
    const endpoint *peer = t.peer_is_src ? &t.src : &t.dst;
    PyObject *bank = PyTuple_GET_ITEM(peer->desc, 4), *xy = PyTuple_GET_ITEM(peer->desc, 0);
    PyObject *key = PyTuple_Pack(5, f[2], t.kind == 0 ? s_read : s_write, f[3], xy, bank);
    PyObject *path = key ? PyDict_GetItemWithError(f[1], key) : NULL;
    Py_XDECREF(key);
    if (!path)
        return PyErr_Occurred() ? -1 : 0;
    long long lead, hops, s;
    if (!PyTuple_Check(path) || PyTuple_GET_SIZE(path) != 3 || !PyList_Check(PyTuple_GET_ITEM(path, 0))) {
        PyErr_SetString(PyExc_TypeError, "issue: a cached route is (resources, lead, hops)");
        return -1;
    }
    lead = PyLong_AsLongLong(PyTuple_GET_ITEM(path, 1));
    hops = PyLong_AsLongLong(PyTuple_GET_ITEM(path, 2));
    PyObject *target = NULL;
    if (!t.peer_is_src && t.dst.pages == Py_None && !(target = PyDict_GetItemWithError(f[4], xy)) && !PyErr_Occurred())
        PyErr_SetString(PyExc_KeyError, "issue: the chip has no tile at a write's destination");
    if (PyErr_Occurred() || move(&t, 0) < 0)
        return -1;
    /* Fabric.transfer */
    long long n = t.length, flits = (n + k[0] - 1) / k[0], d = flits, dram = bank != Py_None;
    if (dram && (n + k[1] - 1) / k[1] > d)
        d = (n + k[1] - 1) / k[1];
    if (reserve_in(PyTuple_GET_ITEM(path, 0), start + lead, d, &s) < 0 || add_attr(f[0], s_transfers, 1) < 0
        || add_attr(f[0], s_wait_cycles, s - (start + lead)) < 0)
        return -1;
    *done = s + 2 * k[2] + k[3] * (hops > 1 ? hops : 1) + flits + (dram ? k[4] : 0) - lead + (d - flits);
    /* tile.py Tile._niu_store: the peer's lines, the due completion, the NIU's busy end */
    if (target && stamp_lines(target, t.to, t.length, (unsigned long long)*done, (int)k[5]) < 0)
        return -1;
    long counter = t.kind == 0 ? RD_RESP_RECEIVED : t.ctrl & CTRL_RESP_MARKED ? WR_ACK_RECEIVED : -1;
    if (counter >= 0 && insort_due(f[5], counter, *done) < 0)
        return -1;
    Py_ssize_t i = PyLong_AsSsize_t(f[2]);
    if (i < 0 || i >= PyList_GET_SIZE(f[6])) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_IndexError, "issue: the NoC index has no busy end");
        return -1;
    }
    long long busy = at(f[6], i);
    if (busy == -1 && PyErr_Occurred())
        return -1;
    if (*done > (start > busy ? start : busy)) {
        PyObject *o = PyLong_FromLongLong(*done);
        if (!o || PyList_SetItem(f[6], i, o) < 0)
            return -1;
    }
    return 1;
}

/* issue(NIU context, initiator, timing context, start) -> the completion cycle, or NotImplemented (nothing changed)
 * where Python must make the send and time it */
static PyObject *issue(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "issue(NIU context, initiator, timing context, start)");
        return NULL;
    }
    long long start = PyLong_AsLongLong(args[3]), done;
    long buf = PyLong_AsLong(args[1]);
    int how = PyErr_Occurred() ? -1 : issue_at(args[0], buf, args[2], start, &done);
    if (how <= 0)
        return how < 0 ? NULL : Py_NewRef(Py_NotImplemented);
    return PyLong_FromLongLong(done);
}

static PyMethodDef methods[] = {
    {"send", (PyCFunction)(void (*)(void))send, METH_FASTCALL,
     "send(NIU context, initiator): a unicast read or write between L1 and DRAM or L1 as Niu._send_in_python does it, "
     "or NotImplemented"},
    {"issue", (PyCFunction)(void (*)(void))issue, METH_FASTCALL,
     "issue(NIU context, initiator, timing context, start): send's request with its time (the completion cycle), or "
     "NotImplemented"},
    {"reserve", (PyCFunction)(void (*)(void))reserve, METH_FASTCALL,
     "reserve(res, s0, d): the first cycle from s0 at which every (Busy, offset) of res is free for d cycles; taken"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "noc_native", NULL, -1, methods};

PyMODINIT_FUNC PyInit_noc_native(void) {
    if (!(s_starts = PyUnicode_InternFromString("starts")) || !(s_ends = PyUnicode_InternFromString("ends"))
        || !(s_read = PyUnicode_InternFromString("read")) || !(s_write = PyUnicode_InternFromString("write"))
        || !(s_transfers = PyUnicode_InternFromString("transfers"))
        || !(s_wait_cycles = PyUnicode_InternFromString("wait_cycles"))
        || !(s_l1_stamp = PyUnicode_InternFromString("l1_stamp")))
        return NULL;
    PyObject *mod = PyModule_Create(&module), *capsule = mod ? PyCapsule_New((void *)issue_at, "noc_native.issue", NULL)
        : NULL;
    if (!capsule || PyModule_AddObject(mod, "issue_entry", capsule) < 0) {   /* (steals the capsule on success) */
        Py_XDECREF(capsule);
        Py_XDECREF(mod);
        return NULL;
    }
    if (PyType_Ready(&CBusy_Type) < 0 || PyModule_AddObjectRef(mod, "Busy", (PyObject *)&CBusy_Type) < 0) {
        Py_DECREF(mod);
        return NULL;
    }
    return mod;
}
