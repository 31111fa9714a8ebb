/* The deferred SFPU queue (deferral.py's `deferred`) as packed C records, included by sfpu_issue_native.c.
 *
 * Before, every SFPU word the C issue (issue_run, push_word, ready_run) deferred became a 9-item Python tuple appended
 * to a list (with a PyLong for its issue cycle and, for a Dst access, a 4-tuple), and executing the queue read the
 * tuples back: a list of their words for the period search, list slices compared per candidate body, and
 * pack_records converting each tuple into sfpu_native's record. In tile_long that object traffic (allocation,
 * deallocation, the cyclic GC's passes over it) cost more than the issue rule and the numerics together.
 *
 * DeferredQueue keeps each entry as a C struct; the C issue appends without creating a Python object, and the queue's
 * execution asks it for the period search (period), a body's words (words) and sfpu_native's records (pack) in one
 * call each. It is still the sequence the Python path sees: len(), append() of the entry tuple the Python path builds
 * (w, name, fields, None or (is_store, vd, mode, addr), Dst base, issue cycle, cfg0, cfg1, thread), and indexing or
 * slicing, which builds those tuples back, equal to what was appended (tests/emu/test_sfpu_issue_native.py compares
 * list(queue) against the Python path's list after every push). A word's name and decoded fields are kept once per
 * queue in its word table (a word always decodes the same). */

#define WID_MEMO 1024
#define WID_PROBES 4     /* (the memo's slots a word may take: its hash's and the next three) */

typedef struct {
    int64_t c, cfg0, cfg1, dst_base;   /* issue cycle, config words 0 and 1, Dst base */
    uint32_t w;                        /* the instruction word */
    int32_t wid;                       /* index into the queue's word table */
    int32_t vd, mode, addr;            /* a Dst access's LReg, mode and address */
    int16_t thread;
    uint8_t mem;                       /* 0: no Dst access, 1: SFPLOAD, 2: SFPSTORE */
} dq_entry;

typedef struct {
    PyObject *names;                   /* a tuple whose items 0 and 1 are the word's name and decoded fields */
    int has_record;                    /* rec below holds the word's sfpu_native record */
    int32_t rec[8];
} dq_word;

typedef struct {
    PyObject_HEAD
    dq_entry *e;
    Py_ssize_t n, cap;
    dq_word *words;
    Py_ssize_t nw, wcap;
    PyObject *wid;                     /* dict: word -> index into `words` */
    /* words registered lately and their indices + 1 (0: none; the allocation zeroes it), by a hash of the word and
     * up to WID_PROBES slots from there: a body repeats its words, and the dict look-up was about half of an append's
     * cost (the bench's 171-word body: 91 % hits with one slot a word, the words sharing a slot evicting each other
     * every row step; tile_long then still made ~4 k dict look-ups a call) */
    uint32_t memo_w[WID_MEMO];
    int32_t memo_wid1[WID_MEMO];
} DeferredQueue;

static PyTypeObject DeferredQueue_Type;

static int dq_is_queue(PyObject *o) {
    return Py_IS_TYPE(o, &DeferredQueue_Type);
}

/* The word memo's first slot for word w (Fibonacci hashing: WID_MEMO is 2^10) */
static inline size_t dq_memo_slot(uint32_t w) {
    return (uint32_t)(w * 2654435761u) >> 22;
}

/* The word table's index of word w (w_obj: it as a Python int), registering `names` for it on first sight. */
static int32_t dq_word_id(DeferredQueue *q, PyObject *w_obj, uint32_t w, PyObject *names) {
    size_t m0 = dq_memo_slot(w), m = m0;
    /* (a slot is never emptied while the queue lives, so a word is in the slots before the first empty one) */
    for (int j = 0; j < WID_PROBES; j++) {
        size_t i = (m0 + (size_t)j) % WID_MEMO;
        if (!q->memo_wid1[i]) {
            m = i;
            break;
        }
        if (q->memo_w[i] == w)
            return q->memo_wid1[i] - 1;
    }
    PyObject *id = PyDict_GetItemWithError(q->wid, w_obj);
    Py_ssize_t k;
    if (id) {
        k = PyLong_AsSsize_t(id);
    } else {
        if (PyErr_Occurred())
            return -1;
        if (q->nw == q->wcap) {
            Py_ssize_t cap = q->wcap ? 2 * q->wcap : 64;
            dq_word *p = PyMem_Realloc(q->words, (size_t)cap * sizeof *p);
            if (!p) {
                PyErr_NoMemory();
                return -1;
            }
            q->words = p, q->wcap = cap;
        }
        k = q->nw;
        PyObject *ko = PyLong_FromSsize_t(k);
        if (!ko || PyDict_SetItem(q->wid, w_obj, ko) < 0) {
            Py_XDECREF(ko);
            return -1;
        }
        Py_DECREF(ko);
        q->words[k] = (dq_word){Py_NewRef(names), 0, {0}};
        q->nw++;
    }
    q->memo_w[m] = w, q->memo_wid1[m] = (int32_t)k + 1;
    return (int32_t)k;
}

/* The entry array of the largest queue freed so far, kept for the next new queue to take: each execution of the queue
 * replaces it with an empty one (deferral.flush_deferred), which had grown again from 1,024 entries by doubling, a
 * copy each time (bench emu's sfpu_long, some 5,500 entries a flush: 3 % of its instructions in realloc's copies) */
static dq_entry *spare_e;
static Py_ssize_t spare_cap;
/* The largest entry array a queue has grown to. The spare above is one array and several queues are alive around a
 * flush (sfpu_long's body: four short queues between two of 5,473 entries), so a long queue often starts from 1,024
 * entries again: past its first array it grows to this size at once, one copy instead of a doubling ladder's three
 * (sfpu_long: ~70 x86 instructions a word in realloc's copies), at most eight times its array a step, so that a
 * queue just past 1,024 entries does not take the largest array any queue of the process needed. */
static Py_ssize_t peak_cap;

/* The slot of q's next entry, its array taken from the spare, made or grown where it is full */
static dq_entry *dq_grow(DeferredQueue *q) {
    if (!q->cap && spare_e) {
        q->e = spare_e, q->cap = spare_cap;
        spare_e = NULL, spare_cap = 0;
    }
    if (q->n == q->cap) {
        Py_ssize_t cap = q->cap ? 2 * q->cap : 1024;
        if (q->cap && cap < peak_cap)       /* (at most 8x a step: one queue's peak does not size every queue) */
            cap = peak_cap < 8 * q->cap ? peak_cap : 8 * q->cap;
        dq_entry *p = PyMem_Realloc(q->e, (size_t)cap * sizeof *p);
        if (!p) {
            PyErr_NoMemory();
            return NULL;
        }
        q->e = p, q->cap = cap;
        if (cap > peak_cap)
            peak_cap = cap;
    }
    return &q->e[q->n];
}

/* The C issue's append: word w_obj, of value w (rec: its cword record (name, fields, facts)), issued at cycle c. */
static inline int dq_push_word(DeferredQueue *q, PyObject *w_obj, uint32_t w, PyObject *rec, int is_mem, int is_store,
                               long long vd, long long mode, long long addr, long long dst_base, long long c,
                               long long cfg0, long long cfg1, long long thread) {
    int32_t wid = dq_word_id(q, w_obj, w, rec);
    dq_entry *e = wid < 0 ? NULL : q->n < q->cap ? &q->e[q->n] : dq_grow(q);   /* (dq_grow's call: a full array) */
    if (!e)
        return -1;
    *e = (dq_entry){c, cfg0, cfg1, dst_base, w, wid, (int32_t)vd, (int32_t)mode, (int32_t)addr, (int16_t)thread,
                    (uint8_t)(is_mem ? 1 + is_store : 0)};
    q->n++;
    return 0;
}

/* dq_push_word of word w_obj read here (it must be a 32-bit int) */
static int dq_push(DeferredQueue *q, PyObject *w_obj, PyObject *rec, int is_mem, int is_store, long long vd,
                   long long mode, long long addr, long long dst_base, long long c, long long cfg0, long long cfg1,
                   long long thread) {
    long long wv;
    if (get_ll(w_obj, "a queued word", &wv))
        return -1;
    if (wv < 0 || wv > 0xFFFFFFFFLL) {
        PyErr_SetString(PyExc_OverflowError, "DeferredQueue: a queued word is not 32-bit");
        return -1;
    }
    return dq_push_word(q, w_obj, (uint32_t)wv, rec, is_mem, is_store, vd, mode, addr, dst_base, c, cfg0, cfg1,
                        thread);
}

static int in_i32(long long v) {
    return v >= INT32_MIN && v <= INT32_MAX;
}

/* append(entry): the Python path's entry tuple, stored as a record (what it cannot hold exactly is refused). */
static PyObject *dq_append(DeferredQueue *q, PyObject *t) {
    if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 9) {
        PyErr_SetString(PyExc_TypeError, "DeferredQueue.append: an entry is a 9-tuple");
        return NULL;
    }
    long long v[5], m[3] = {0, 0, 0};     /* Dst base, c, cfg0, cfg1, thread; vd, mode, addr */
    for (int k = 0; k < 5; k++)
        if (get_ll(PyTuple_GET_ITEM(t, 4 + k), "a queue entry's field", &v[k]))
            return NULL;
    PyObject *mem = PyTuple_GET_ITEM(t, 3);
    int is_store = 0;
    if (mem != Py_None) {
        if (!PyTuple_Check(mem) || PyTuple_GET_SIZE(mem) != 4 || !PyBool_Check(PyTuple_GET_ITEM(mem, 0))) {
            PyErr_SetString(PyExc_TypeError, "DeferredQueue.append: a Dst access is (is_store, vd, mode, addr)");
            return NULL;
        }
        is_store = PyTuple_GET_ITEM(mem, 0) == Py_True;
        for (int k = 0; k < 3; k++)
            if (get_ll(PyTuple_GET_ITEM(mem, 1 + k), "a Dst access's field", &m[k]))
                return NULL;
    }
    if (!in_i32(m[0]) || !in_i32(m[1]) || !in_i32(m[2]) || v[4] < 0 || v[4] > INT16_MAX) {
        PyErr_SetString(PyExc_ValueError, "DeferredQueue.append: a field outside the record's range");
        return NULL;
    }
    PyObject *names = PyTuple_GetSlice(t, 1, 3);
    if (!names)
        return NULL;
    int r = dq_push(q, PyTuple_GET_ITEM(t, 0), names, mem != Py_None, is_store, m[0], m[1], m[2], v[0], v[1], v[2],
                    v[3], v[4]);
    Py_DECREF(names);
    if (r < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* Entry i as the Python path's tuple. */
static PyObject *dq_tuple(DeferredQueue *q, Py_ssize_t i) {
    const dq_entry *e = &q->e[i];
    PyObject *names = q->words[e->wid].names;
    PyObject *mem = Py_NewRef(Py_None);
    if (e->mem) {
        Py_DECREF(mem);
        mem = Py_BuildValue("(Oiii)", e->mem == 2 ? Py_True : Py_False, e->vd, e->mode, e->addr);
        if (!mem)
            return NULL;
    }
    return Py_BuildValue("(kOONLLLLi)", (unsigned long)e->w, PyTuple_GET_ITEM(names, 0), PyTuple_GET_ITEM(names, 1),
                         mem, (long long)e->dst_base, (long long)e->c, (long long)e->cfg0, (long long)e->cfg1,
                         (int)e->thread);
}

static Py_ssize_t dq_len(PyObject *o) {
    return ((DeferredQueue *)o)->n;
}

static PyObject *dq_item(PyObject *o, Py_ssize_t i) {
    DeferredQueue *q = (DeferredQueue *)o;
    if (i < 0 || i >= q->n) {
        PyErr_SetString(PyExc_IndexError, "DeferredQueue index out of range");
        return NULL;
    }
    return dq_tuple(q, i);
}

static PyObject *dq_subscript(PyObject *o, PyObject *key) {
    DeferredQueue *q = (DeferredQueue *)o;
    if (PySlice_Check(key)) {
        Py_ssize_t start, stop, step;
        if (PySlice_Unpack(key, &start, &stop, &step) < 0)
            return NULL;
        Py_ssize_t len = PySlice_AdjustIndices(q->n, &start, &stop, step);
        PyObject *out = PyList_New(len);
        for (Py_ssize_t k = 0; out && k < len; k++) {
            PyObject *t = dq_tuple(q, start + k * step);
            if (!t)
                Py_CLEAR(out);
            else
                PyList_SET_ITEM(out, k, t);
        }
        return out;
    }
    Py_ssize_t i = PyNumber_AsSsize_t(key, PyExc_IndexError);
    if (i == -1 && PyErr_Occurred())
        return NULL;
    return dq_item(o, i < 0 ? i + q->n : i);
}

static int dq_range(DeferredQueue *q, Py_ssize_t lo, Py_ssize_t hi, const char *who) {
    if (lo < 0 || lo > hi || hi > q->n) {
        PyErr_Format(PyExc_IndexError, "DeferredQueue.%s: %zd..%zd outside the %zd entries", who, lo, hi, q->n);
        return -1;
    }
    return 0;
}

/* period(i, n, most) -> (p, k): deferral._dq_period over the words of entries 0..n: the body length p <= most whose
 * k >= 2 back-to-back repetitions from entry i cover most entries (the first such p among equals; a repetition count
 * covering all but less than one body ends the search), (0, 0) when none. */
static PyObject *dq_period(DeferredQueue *q, PyObject *const *args, Py_ssize_t nargs) {
    Py_ssize_t i, n, most;
    if (nargs != 3 || (i = PyLong_AsSsize_t(args[0])) == -1 || (n = PyLong_AsSsize_t(args[1])) == -1
        || (most = PyLong_AsSsize_t(args[2])) == -1) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "DeferredQueue.period(i, n, most)");
        return NULL;
    }
    if (dq_range(q, i, n, "period") || i == n)
        return i == n && !PyErr_Occurred() ? Py_BuildValue("(ii)", 0, 0) : NULL;
    const dq_entry *e = q->e;
    uint32_t w0 = e[i].w;
    Py_ssize_t best_p = 0, best_k = 0, lim = n < i + most + 1 ? n : i + most + 1;
    for (Py_ssize_t j = i + 1; j < lim; j++) {
        if (e[j].w != w0)
            continue;
        Py_ssize_t p = j - i;
        if (i + 2 * p > n)
            break;
        Py_ssize_t k = 1;
        for (;;) {
            Py_ssize_t s = i + k * p, x = 0;
            if (s + p > n)
                break;
            while (x < p && e[s + x].w == e[i + x].w)
                x++;
            if (x < p)
                break;
            k++;
        }
        if (k >= 2 && k * p > best_k * best_p) {
            best_p = p, best_k = k;
            if (n - i - k * p < p)
                break;
        }
    }
    return Py_BuildValue("(nn)", best_p, best_k);
}

/* words(i, p) -> the words of entries i..i+p, a tuple (a body's key). */
static PyObject *dq_words(DeferredQueue *q, PyObject *const *args, Py_ssize_t nargs) {
    Py_ssize_t i, p;
    if (nargs != 2 || (i = PyLong_AsSsize_t(args[0])) == -1 || (p = PyLong_AsSsize_t(args[1])) == -1) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "DeferredQueue.words(i, p)");
        return NULL;
    }
    if (p < 0 || dq_range(q, i, i + p, "words"))
        return p < 0 ? (PyErr_SetString(PyExc_ValueError, "DeferredQueue.words: p < 0"), NULL) : NULL;
    PyObject *out = PyTuple_New(p);
    for (Py_ssize_t k = 0; out && k < p; k++) {
        PyObject *w = PyLong_FromUnsignedLong(q->e[i + k].w);
        if (!w)
            Py_CLEAR(out);
        else
            PyTuple_SET_ITEM(out, k, w);
    }
    return out;
}

/* pack(i, hi, records) -> (k, bytes): pack_records (below) of entries i..hi: the sfpu_native records (8 int32s) of
 * entries i, i + 1, ..., an SFPLOAD / SFPSTORE's with its mode and Dst address; stops at the first entry whose word
 * has no record in `records` (word -> record) yet or a None one. A word's record is read from `records` once per
 * queue. */
static PyObject *dq_pack(DeferredQueue *q, PyObject *const *args, Py_ssize_t nargs) {
    Py_ssize_t i0, hi;
    if (nargs != 3 || !PyDict_Check(args[2]) || (i0 = PyLong_AsSsize_t(args[0])) == -1
        || (hi = PyLong_AsSsize_t(args[1])) == -1) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "DeferredQueue.pack(i, hi, records: dict)");
        return NULL;
    }
    if (dq_range(q, i0, hi, "pack"))
        return NULL;
    PyObject *out = PyBytes_FromStringAndSize(NULL, (hi - i0) * 8 * (Py_ssize_t)sizeof(int32_t));
    if (!out)
        return NULL;
    int32_t *p = (int32_t *)PyBytes_AS_STRING(out);
    Py_ssize_t i = i0;
    for (; i < hi; i++, p += 8) {
        const dq_entry *e = &q->e[i];
        dq_word *wd = &q->words[e->wid];
        if (!wd->has_record) {
            PyObject *w = PyLong_FromUnsignedLong(e->w);
            int found = w ? lookup_record(args[2], w, wd->rec) : -1;
            Py_XDECREF(w);
            if (found < 0)
                goto fail;
            if (!found)
                break;
            wd->has_record = 1;
        }
        memcpy(p, wd->rec, sizeof wd->rec);
        if (e->mem) {
            p[1] = e->mode;
            p[7] = e->addr;
        }
    }
    if (_PyBytes_Resize(&out, (i - i0) * 8 * (Py_ssize_t)sizeof(int32_t)) < 0)
        return NULL;
    return Py_BuildValue("(nN)", i - i0, out);
fail:
    Py_DECREF(out);
    return NULL;
}

/* The last queue freed, kept whole for the next new queue: a queue is 8 KiB of word memo that its allocation zeroes,
 * and every flush frees one and makes another (elementwise512: once a tile, ~9k instructions in the allocation's
 * memset). Kept with its memo slots zeroed again (those its words used: dq_forget) and its word dict empty, so that
 * taking it back is a fresh queue. */
static DeferredQueue *dq_kept;

/* Zero the word memo slots q's words used and empty its word dict (their keys: the words as ints); the whole memo
 * where that is cheaper or a key is not an int. Called on a queue being freed (an error set here is cleared). */
static void dq_forget(DeferredQueue *q) {
    Py_ssize_t pos = 0;
    PyObject *key, *val;
    int all = PyDict_GET_SIZE(q->wid) > WID_MEMO / 8;
    while (!all && PyDict_Next(q->wid, &pos, &key, &val)) {
        if (!PyLong_Check(key)) {
            all = 1;
            break;
        }
        size_t m0 = dq_memo_slot((uint32_t)PyLong_AsUnsignedLongMask(key));
        for (int j = 0; j < WID_PROBES; j++) {          /* (the slots dq_word_id may have given it) */
            size_t m = (m0 + (size_t)j) % WID_MEMO;
            q->memo_w[m] = 0, q->memo_wid1[m] = 0;
        }
    }
    if (all || PyErr_Occurred()) {
        PyErr_Clear();
        memset(q->memo_w, 0, sizeof q->memo_w);
        memset(q->memo_wid1, 0, sizeof q->memo_wid1);
    }
    PyDict_Clear(q->wid);
}

static PyObject *dq_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    if (PyTuple_GET_SIZE(args) || (kw && PyDict_GET_SIZE(kw))) {
        PyErr_SetString(PyExc_TypeError, "DeferredQueue() takes no arguments");
        return NULL;
    }
    if (type == &DeferredQueue_Type && dq_kept) {
        DeferredQueue *q = dq_kept;
        dq_kept = NULL;
        return PyObject_Init((PyObject *)q, type);
    }
    DeferredQueue *q = (DeferredQueue *)type->tp_alloc(type, 0);
    if (!q)
        return NULL;
    if (!(q->wid = PyDict_New())) {
        Py_DECREF(q);
        return NULL;
    }
    return (PyObject *)q;
}

static void dq_dealloc(DeferredQueue *q) {
    for (Py_ssize_t k = 0; k < q->nw; k++)
        Py_DECREF(q->words[k].names);
    PyMem_Free(q->words);
    if (q->cap > spare_cap) {        /* (the larger array kept: a long body's queue keeps its size) */
        PyMem_Free(spare_e);
        spare_e = q->e, spare_cap = q->cap;
    } else {
        PyMem_Free(q->e);
    }
    if (!dq_kept && Py_IS_TYPE(q, &DeferredQueue_Type) && q->wid) {
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);             /* (freed while an exception is pending: it stays) */
        dq_forget(q);
        PyErr_Restore(et, ev, tb);
        q->e = NULL, q->n = q->cap = 0;
        q->words = NULL, q->nw = q->wcap = 0;
        dq_kept = q;
        return;
    }
    Py_XDECREF(q->wid);
    Py_TYPE(q)->tp_free((PyObject *)q);
}

static PyMethodDef dq_methods[] = {
    {"append", (PyCFunction)dq_append, METH_O, "append(entry): the Python path's entry tuple"},
    {"period", (PyCFunction)(void (*)(void))dq_period, METH_FASTCALL, "period(i, n, most) -> (p, k)"},
    {"words", (PyCFunction)(void (*)(void))dq_words, METH_FASTCALL, "words(i, p) -> tuple"},
    {"pack", (PyCFunction)(void (*)(void))dq_pack, METH_FASTCALL, "pack(i, hi, records) -> (k, bytes)"},
    {NULL, NULL, 0, NULL},
};

static PySequenceMethods dq_as_sequence = {.sq_length = dq_len, .sq_item = dq_item};
static PyMappingMethods dq_as_mapping = {.mp_length = dq_len, .mp_subscript = dq_subscript};

static PyTypeObject DeferredQueue_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "sfpu_issue.DeferredQueue",
    .tp_basicsize = sizeof(DeferredQueue),
    .tp_dealloc = (destructor)dq_dealloc,
    .tp_as_sequence = &dq_as_sequence,
    .tp_as_mapping = &dq_as_mapping,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "the deferred SFPU queue as packed records (sfpu_queue.c)",
    .tp_methods = dq_methods,
    .tp_new = dq_new,
};
