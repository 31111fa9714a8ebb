/* The NoC time model's reservation (runtime/emu/noc.py Fabric._reserve with Busy.free_from and Busy.take, the
 * reference, which tests/emu/test_noc_native.py pins this against) in C: the first cycle from s0 at which every
 * resource of a transfer is free for d cycles from its offset on, the resources visited round and round until all of
 * them in a row accept it, then taken there. It works on the Busy objects' own lists of interval starts and ends
 * (sorted, disjoint, Python ints), so the Python side keeps no copy. A CPython extension module built by
 * accel/native.py; loaded by accel/noc_native.py. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
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

/* reserve(res: list of (Busy, offset), s0, d) -> s: Fabric._reserve's cycle, the resources taken there */
static PyObject *reserve(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    long long s0 = nargs == 3 ? PyLong_AsLongLong(args[1]) : 0, d = nargs == 3 ? PyLong_AsLongLong(args[2]) : 0;
    if (nargs != 3 || !PyList_Check(args[0]) || PyErr_Occurred()) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "reserve(res: list of (Busy, offset), s0, d)");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(args[0]);
    PyObject **lists = PyMem_Calloc(2 * (size_t)(n ? n : 1), sizeof *lists), *r = NULL;
    long long *off = PyMem_Calloc((size_t)(n ? n : 1), sizeof *off), s = s0;
    if (!lists || !off) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t k = 0; k < n; k++) {        /* each resource's lists (new references) and offset */
        PyObject *item = PyList_GET_ITEM(args[0], k), *busy;
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2) {
            PyErr_SetString(PyExc_TypeError, "reserve: res holds (Busy, offset) pairs");
            goto done;
        }
        busy = PyTuple_GET_ITEM(item, 0);
        lists[2 * k] = PyObject_GetAttr(busy, s_starts);
        lists[2 * k + 1] = lists[2 * k] ? PyObject_GetAttr(busy, s_ends) : NULL;
        off[k] = PyLong_AsLongLong(PyTuple_GET_ITEM(item, 1));
        if (!lists[2 * k + 1] || PyErr_Occurred())
            goto done;
        if (!PyList_CheckExact(lists[2 * k]) || !PyList_CheckExact(lists[2 * k + 1])) {
            PyErr_SetString(PyExc_TypeError, "reserve: a Busy's starts and ends are lists");
            goto done;
        }
    }
    for (Py_ssize_t i = 0, in_a_row = 0; in_a_row < n; i = i + 1 < n ? i + 1 : 0) {
        PyObject *starts = lists[2 * i], *ends = lists[2 * i + 1];
        Py_ssize_t m = PyList_GET_SIZE(ends);
        if (m && at(ends, m - 1) > s + off[i]) {
            long long f = free_from(starts, ends, s + off[i], d) - off[i];
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
        if (take(lists[2 * k], lists[2 * k + 1], s + off[k], d) < 0 || PyErr_Occurred())
            goto done;
    r = PyLong_FromLongLong(s);
done:
    for (Py_ssize_t k = 0; lists && k < 2 * n; k++)
        Py_XDECREF(lists[k]);
    PyMem_Free(lists);
    PyMem_Free(off);
    return r;
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

/* send(context, initiator) -> None when the send is done as Niu._send_in_python does it, NotImplemented (nothing
 * changed) where Python must do it: another request kind, a check that fails (Python raises), an MMIO address, a peer
 * not met yet, a DRAM page a write would have to create. context: (regs, own coordinate word, peers, counters,
 * requests, bytes, sent, DRAM page bits) of one NIU (Niu._c_context). */
static PyObject *send(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    PyObject *ctx = nargs == 2 ? args[0] : NULL;
    long buf = ctx ? PyLong_AsLong(args[1]) : -1;
    if (!ctx || !PyTuple_Check(ctx) || PyTuple_GET_SIZE(ctx) != 8 || buf < 0 || buf > 3) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "send(NIU context: a tuple of 8, initiator 0..3)");
        return NULL;
    }
    PyObject *regs = PyTuple_GET_ITEM(ctx, 0), *peers = PyTuple_GET_ITEM(ctx, 2);
    PyObject *counters = PyTuple_GET_ITEM(ctx, 3), *requests = PyTuple_GET_ITEM(ctx, 4);
    PyObject *bytes = PyTuple_GET_ITEM(ctx, 5), *sent = PyTuple_GET_ITEM(ctx, 6);
    uint32_t own = (uint32_t)PyLong_AsUnsignedLong(PyTuple_GET_ITEM(ctx, 1));
    int page_bits = (int)PyLong_AsLong(PyTuple_GET_ITEM(ctx, 7));
    if (PyErr_Occurred())
        return NULL;
    if (!PyDict_Check(peers) || !PyDict_Check(counters) || !PyDict_Check(requests) || !PyDict_Check(bytes)
        || !PyList_Check(sent) || page_bits < 1 || page_bits > 40) {
        PyErr_SetString(PyExc_TypeError, "send: the NIU context's peers, tallies, sent list or page bits");
        return NULL;
    }
    Py_buffer rv;
    if (PyObject_GetBuffer(regs, &rv, PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    if (rv.len != 4 * NIU_REGS * 4) {
        PyBuffer_Release(&rv);
        PyErr_SetString(PyExc_ValueError, "send: the NIU's registers are not 4 x 12 uint32");
        return NULL;
    }
    uint32_t r[NIU_REGS];
    memcpy(r, (const uint32_t *)rv.buf + buf * NIU_REGS, sizeof r);
    PyBuffer_Release(&rv);
    uint32_t ctrl = r[R_CTRL], kind = ctrl & CTRL_TYPE, length = r[R_AT_LEN_BE];
    unsigned long long targ = (unsigned long long)r[R_TARG_MID] << 32 | r[R_TARG_LO];
    unsigned long long ret = (unsigned long long)r[R_RET_MID] << 32 | r[R_RET_LO];
    if (ctrl & (CTRL_FATAL | CTRL_BRCST | CTRL_PATH_RESERVE | CTRL_WR_INLINE) || (kind != 0 && kind != 2)
        || length < 1 || length > MAX_LEN)
        Py_RETURN_NOTIMPLEMENTED;
    endpoint src, dst, *peer;
    unsigned long long from = targ, to = ret;
    if (kind == 0) {                            /* a read: from the peer at TARG_HI into this tile */
        if (!(ctrl & CTRL_RESP_MARKED) || r[R_RET_HI] != own || r[R_TARG_HI] >> 12
            || !endpoint_of(peers, r[R_TARG_HI], &src) || !endpoint_of(peers, own, &dst))
            goto python;
        peer = &src;
    } else {                                    /* a write: from this tile to the peer at RET_HI */
        if (r[R_TARG_HI] != own || r[R_RET_HI] >> 12 || !endpoint_of(peers, own, &src)
            || !endpoint_of(peers, r[R_RET_HI], &dst))
            goto python;
        peer = &dst;
    }
    if (src.pages != Py_None && dst.pages != Py_None)
        goto python;                            /* (the own tile is never a DRAM bank) */
    if ((from - to) & ((kind == 0 && src.pages != Py_None ? 64 : 16) - 1) || !range_ok(&src, from, length)
        || !range_ok(&dst, to, length))
        goto python;
    if (dst.pages != Py_None) {                 /* a write must not create a page: Python does */
        int missing = dram_spans(&dst, page_bits, to, length, span_missing, NULL);
        if (missing)
            return missing < 0 ? NULL : Py_NewRef(Py_NotImplemented);
    }
    /* the data: DRAM -> L1, L1 -> DRAM, or L1 -> L1 (possibly the same tile: moved as through a copy) */
    Py_buffer lv;
    const endpoint *tile = src.pages == Py_None ? &src : &dst;
    if (PyObject_GetBuffer(tile->l1, &lv, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    int bad = 0;
    if (src.pages != Py_None) {
        bad = !fits(lv.len, to, length) || dram_spans(&src, page_bits, from, length, span_read, (uint8_t *)lv.buf + to);
    } else if (dst.pages != Py_None) {
        bad = !fits(lv.len, from, length) || dram_spans(&dst, page_bits, to, length, span_write,
                                                        (uint8_t *)lv.buf + from);
    } else {
        Py_buffer dv;
        if (PyObject_GetBuffer(dst.l1, &dv, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) {
            PyBuffer_Release(&lv);
            return NULL;
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
        return NULL;
    }
    /* Niu._record's entry and the tallies */
    PyObject *bank = PyTuple_GET_ITEM(peer->desc, 4), *where = kind == 0 || dst.pages != Py_None ? NULL
        : PyLong_FromUnsignedLongLong(to);
    PyObject *n = PyLong_FromUnsignedLong(length), *rec = NULL;
    if (n && (kind == 0 || dst.pages != Py_None || where))
        rec = PyTuple_Pack(5, kind == 0 ? s_read : s_write, PyTuple_GET_ITEM(peer->desc, 0), n, bank,
                           where ? where : Py_None);
    Py_XDECREF(n), Py_XDECREF(where);
    if (!rec || PyList_Append(sent, rec) < 0) {
        Py_XDECREF(rec);
        return NULL;
    }
    Py_DECREF(rec);
    PyObject *name = kind == 0 ? s_read : s_write;
    if (add_to(requests, name, 1) < 0 || add_to(bytes, name, length) < 0)
        return NULL;
    if (kind == 0)
        bad = bump(counters, RD_RESP_RECEIVED);
    else if (ctrl & CTRL_RESP_MARKED)
        bad = bump(counters, NONPOSTED_WR_REQ_SENT) || bump(counters, WR_ACK_RECEIVED);
    else
        bad = bump(counters, POSTED_WR_REQ_SENT);
    if (bad)
        return NULL;
    Py_RETURN_NONE;
python:
    if (PyErr_Occurred())
        return NULL;
    Py_RETURN_NOTIMPLEMENTED;
}

static PyMethodDef methods[] = {
    {"send", (PyCFunction)(void (*)(void))send, METH_FASTCALL,
     "send(NIU context, initiator): a unicast read or write between L1 and DRAM or L1 as Niu._send_in_python does it, "
     "or NotImplemented"},
    {"reserve", (PyCFunction)(void (*)(void))reserve, METH_FASTCALL,
     "reserve(res, s0, d): the first cycle from s0 at which every (Busy, offset) of res is free for d cycles; taken"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "noc_native", NULL, -1, methods};

PyMODINIT_FUNC PyInit_noc_native(void) {
    if (!(s_starts = PyUnicode_InternFromString("starts")) || !(s_ends = PyUnicode_InternFromString("ends"))
        || !(s_read = PyUnicode_InternFromString("read")) || !(s_write = PyUnicode_InternFromString("write")))
        return NULL;
    return PyModule_Create(&module);
}
