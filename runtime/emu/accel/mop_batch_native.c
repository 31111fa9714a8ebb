/* batch_run: mop_batch.MopBatchMixin.batch_sfpu's steady case in C, and mop_push (below): a MOP's push up to it
 * (included by sfpu_issue_native.c, whose attribute helpers and interned names they use). A MOP of identical REPLAYs
 * puts K repetitions of one SFPU body in a thread's ready queue; once batch_sfpu has run that body from the same
 * address key and relative cycle-model state, every analysis it makes is in its memos (the body's plan, the Dst address
 * analysis, the timing memo, the C program), and what is left is ~25 us of Python reading the state those memos are
 * keyed by. batch_run reads the same state, looks the same keys up, and where every look-up hits does what batch_sfpu's
 * memo-hit path does: the cycle model advanced by the timing memo, the RWCs by the repetitions' increments, the kept
 * program run by sfpu_native.c's sfpu_run, the words popped; deferred work queued ahead of the MOP (elementwise512's
 * SFPENCC a tile) is executed and the lane enables cached first, as batch_sfpu's `self.sfpu` and `enabled()` do.
 * Anything else (a miss, a refusal, a blocked thread, a timeline recorder, a structure not as expected) returns -1 with
 * nothing changed but that, and batch_sfpu's Python, the reference, takes the batch (tests/emu/test_mop_speed.py pins
 * the two together). */

static PyObject *s_batch_plans, *s_batch_addr_cache, *s_batch_timing, *s_batch_programs, *s_batch_runs, *s_en_cache,
    *s_all_enabled, *s_flags_after, *s_lane_config_any, *s_lreg, *s_lane_flags, *s_use_lane_flags, *s_dst_name,
    *s_rows32, *s_fp32_enabled, *s_srcb_is_fp16, *s_cycle, *s_clear, *s_enabled, *s_records_cache, *s_c_key,
    *s_row_mask, *s_new_queue, *s_issue_native;

typedef int32_t (*sfpu_run_fn)(uint32_t *lreg, uint8_t *lane_flags, uint8_t *use_lane_flags, uint32_t *dst,
                               uint8_t *written, const int32_t *prog, int32_t n);
static sfpu_run_fn batch_sfpu_run;      /* sfpu_native.c's sfpu_run (configure_batch: its address in that library) */
/* configure_batch's too: sfpu_native.traffic, sfpu_issue_native.new_queue; and DeferralMixin.flush_deferred (the
 * reference the small flush below stands in for: a class that overrides it keeps its own), found at first use
 * (deferral.py imports this module) */
static PyObject *batch_traffic, *batch_new_queue, *batch_flush_ref;

static PyObject *configure_batch(PyObject *self, PyObject *args) {
    unsigned long long addr;
    PyObject *traffic, *new_queue;
    if (!PyArg_ParseTuple(args, "KO!O", &addr, &PyDict_Type, &traffic, &new_queue))
        return NULL;
    batch_sfpu_run = (sfpu_run_fn)(uintptr_t)addr;
    Py_XSETREF(batch_traffic, Py_NewRef(traffic));
    Py_XSETREF(batch_new_queue, Py_NewRef(new_queue));
    Py_RETURN_NONE;
}

/* module.cls.<name>, the reference method a fast path stands for, found once into *ref (held), or NULL with an error
 * set */
static PyObject *reference_method(PyObject **ref, const char *module, const char *cls_name, PyObject *name) {
    if (!*ref) {
        PyObject *mod = PyImport_ImportModule(module);
        PyObject *cls = mod ? PyObject_GetAttrString(mod, cls_name) : NULL;
        *ref = cls ? PyObject_GetAttr(cls, name) : NULL;
        Py_XDECREF(cls);
        Py_XDECREF(mod);
    }
    return *ref;
}

/* DeferralMixin.flush_deferred, or NULL with an error set */
static PyObject *batch_flush_reference(void) {
    return reference_method(&batch_flush_ref, "tt_backend.runtime.emu.accel.deferral", "DeferralMixin",
                            s_flush_deferred);
}

static int batch_names(void) {
    name_ref names[] = {
        {&s_batch_plans, "_batch_plans"}, {&s_batch_addr_cache, "_batch_addr_cache"},
        {&s_batch_timing, "_batch_timing"}, {&s_batch_programs, "_batch_programs"}, {&s_batch_runs, "_batch_runs"},
        {&s_en_cache, "_en"}, {&s_all_enabled, "all_enabled"}, {&s_flags_after, "_flags_after"},
        {&s_lane_config_any, "lane_config_any"}, {&s_lreg, "lreg"}, {&s_lane_flags, "lane_flags"},
        {&s_use_lane_flags, "use_lane_flags"}, {&s_dst_name, "dst"}, {&s_rows32, "rows32"},
        {&s_fp32_enabled, "sfpu_fp32_enabled"}, {&s_srcb_is_fp16, "srcb_is_fp16"}, {&s_cycle, "cycle"},
        {&s_clear, "clear"}, {&s_enabled, "enabled"}, {&s_records_cache, "_records"}, {&s_c_key, "C"},
        {&s_row_mask, "_row_mask"}, {&s_new_queue, "new_queue"}, {&s_issue_native, "ISSUE_NATIVE"},
    };
    return INTERN_NAMES(names);
}

/* The SFPU arrays sfpu_run takes (sfpu_native._state's: LRegs (17, 32) uint32, lane flags and their use (32,) bool,
 * Dst (512, 16) uint32, Dst rows written (512,) bool) and their data pointers, kept for the same objects as _state
 * keeps them (an array object keeps its buffer: nothing in the emulator resizes one in place). */
enum { B_LREG, B_LF, B_USE, B_ROWS, B_WRITTEN, N_BOUND };
static PyObject *bound[N_BOUND];
static void *bound_ptr[N_BOUND];

static void *array_data(PyObject *a, Py_ssize_t bytes, Py_ssize_t itemsize) {
    Py_buffer v;
    if (PyObject_GetBuffer(a, &v, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyErr_Clear();
        return NULL;
    }
    const char *f = v.format ? v.format : "B";
    char code = f[strlen(f) - 1];
    int ok = v.len == bytes && v.itemsize == itemsize && (itemsize == 4 ? code == 'I' : code == '?');
    void *p = ok ? v.buf : NULL;
    PyBuffer_Release(&v);
    return p;
}

/* 0 with bound_ptr valid for raw's arrays, 1 where they are not the plain arrays (the Python path's), -1 on error */
static int bind_arrays(PyObject *raw) {
    static attr_hint h[N_BOUND + 1];             /* (the arrays' reads and, last, raw.dst's) */
    PyObject *a[N_BOUND] = {NULL}, *dst = get_attr_hinted(raw, s_dst_name, &h[N_BOUND]);
    int r = -1;
    if (!dst || !(a[B_LREG] = get_attr_hinted(raw, s_lreg, &h[B_LREG]))
        || !(a[B_LF] = get_attr_hinted(raw, s_lane_flags, &h[B_LF]))
        || !(a[B_USE] = get_attr_hinted(raw, s_use_lane_flags, &h[B_USE]))
        || !(a[B_ROWS] = get_attr_hinted(dst, s_rows32, &h[B_ROWS]))
        || !(a[B_WRITTEN] = get_attr_hinted(dst, s_written, &h[B_WRITTEN])))
        goto out;
    int same = 1;
    for (int k = 0; k < N_BOUND; k++)
        same &= a[k] == bound[k];
    r = 0;
    if (!same) {
        static const Py_ssize_t bytes[N_BOUND] = {17 * 32 * 4, 32, 32, 512 * 16 * 4, 512};
        static const Py_ssize_t size[N_BOUND] = {4, 1, 1, 4, 1};
        void *p[N_BOUND];
        for (int k = 0; k < N_BOUND; k++)
            if (!(p[k] = array_data(a[k], bytes[k], size[k])))
                r = 1;
        if (!r)
            for (int k = 0; k < N_BOUND; k++) {
                Py_XSETREF(bound[k], Py_NewRef(a[k]));
                bound_ptr[k] = p[k];
            }
    }
out:
    Py_XDECREF(dst);
    for (int k = 0; k < N_BOUND; k++)
        Py_XDECREF(a[k]);
    return r;
}

/* v (borrowed, may be NULL) as a C integer; 1 (no error) where it is not one */
static int int_of(PyObject *v, long long *out) {
    if (!v || !PyLong_Check(v))
        return 1;
    *out = PyLong_AsLongLong(v);
    if (*out == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 1;
    }
    return 0;
}

/* item i of a list (a list: the commit writes some of them back) or of a tuple as a C integer; 1 where it is not */
static int list_int(PyObject *list, Py_ssize_t i, long long *out) {
    ThreadTiming *s = row_state(list);            /* (a row of the cycle model's C state) */
    if (s) {
        int bad = i >= 3 || row_ll(s, list, i, out);
        PyErr_Clear();
        return bad;
    }
    return int_of(PyList_Check(list) && i < PyList_GET_SIZE(list) ? PyList_GET_ITEM(list, i) : NULL, out);
}

static int tuple_int(PyObject *t, Py_ssize_t i, long long *out) {
    return int_of(PyTuple_Check(t) && i < PyTuple_GET_SIZE(t) ? PyTuple_GET_ITEM(t, i) : NULL, out);
}

/* d[key] as a new reference, NULL (no error) where missing or d is not a dict */
static PyObject *dict_get(PyObject *d, PyObject *key) {
    PyObject *v = PyDict_Check(d) && key ? PyDict_GetItemWithError(d, key) : NULL;
    if (!v)
        PyErr_Clear();
    return Py_XNewRef(v);
}

/* The expansion mop_push has not yet put in the thread's ready queue (MOP_LAZY_NATIVE): the queue was empty, and
 * batch_try, which runs the words from this list, takes them all in the common case, so the queue's extend and the
 * batch's clear both go. Wherever anything else could look at the queue the words (those the batch left) are put there
 * first, so that the queue holds what the reference's would: before a Python call in batch_try (lazy_fill:
 * flush_deferred, enabled(), a replaced method), before batch_sfpu's Python after a decline, before Tensix.drain after
 * a part batch or none, on an error (mop_push). `period`: the list repeats its first `period` objects (the REPLAY's
 * body), which lets batch_try reuse the period search (lazy_period). */
typedef struct {
    PyObject *ready, *words;
    Py_ssize_t period;
    int in_ready;
} lazy_words;
static lazy_words *batch_lazy;       /* mop_push's, while its batch_try runs; NULL otherwise */

/* put the lazy words from index `from` on in the ready queue (once); 0, -1 with an error set */
static int lazy_fill_from(lazy_words *lw, Py_ssize_t from) {
    if (!lw || lw->in_ready)
        return 0;
    lw->in_ready = 1;
    if (lw == batch_lazy)
        batch_lazy = NULL;
    if (from >= PyList_GET_SIZE(lw->words))
        return 0;
    PyObject *rest = from ? PyList_GetSlice(lw->words, from, PyList_GET_SIZE(lw->words)) : Py_NewRef(lw->words);
    PyObject *r = rest ? call_method(lw->ready, s_extend, &rest, 1) : NULL;
    Py_XDECREF(rest);
    Py_XDECREF(r);
    return r ? 0 : -1;
}

/* all of batch_lazy's words in the ready queue before Python code runs; 0, -1 with an error set */
static int lazy_fill(void) {
    return lazy_fill_from(batch_lazy, 0);
}

/* sfpu_issue_native.new_queue(), which flush_deferred calls for its new queue: where that module's `new_queue` is still
 * the function configure_batch was given and its ISSUE_NATIVE is on, what it returns (a DeferredQueue of this module)
 * made here without its Python frame; else whatever the module's `new_queue` now returns. NULL with an error set */
static PyObject *batch_fresh_queue(void) {
    PyObject *globals = PyFunction_Check(batch_new_queue) ? PyFunction_GET_GLOBALS(batch_new_queue) : NULL;
    PyObject *now = globals ? PyDict_GetItemWithError(globals, s_new_queue) : NULL;
    PyObject *on = globals ? PyDict_GetItemWithError(globals, s_issue_native) : NULL;
    if (PyErr_Occurred())
        return NULL;
    if (now == batch_new_queue && on == Py_True) {
        PyObject *no_args = PyTuple_New(0);
        PyObject *q = no_args ? dq_new(&DeferredQueue_Type, no_args, NULL) : NULL;
        Py_XDECREF(no_args);
        return q;
    }
    return lazy_fill() ? NULL : PyObject_CallNoArgs(now ? now : batch_new_queue);
}


/* not o.<name>: 1 or 0, -1 with an error set */
static int batch_attr_false(PyObject *o, PyObject *name) {
    PyObject *v = get_attr(o, name);
    int yes = v ? PyObject_IsTrue(v) : -1;
    Py_XDECREF(v);
    return yes < 0 ? -1 : !yes;
}

/* o.<name> is None: 1 or 0, -1 with an error set */
static int batch_attr_none(PyObject *o, PyObject *name) {
    PyObject *v = get_attr(o, name);
    int none = v == Py_None;
    Py_XDECREF(v);
    return v ? none : -1;
}

/* sfpu.is_plain() (runtime/emu/sfpu.py's SFPU.is_plain: no scheduled work, no pending flag update, no LaneConfig bit)
 * read here where raw's class has that method and the instance no own: 1 plain, 0 not, -1 with an error set */
static PyObject *plain_ref;
static int batch_is_plain(PyObject *raw) {
    if (!reference_method(&plain_ref, "tt_backend.runtime.emu.sfpu", "SFPU", s_is_plain))
        return -1;
    static class_memo plain_class;
    int is_ref = method_is_ref(raw, s_is_plain, plain_ref, &plain_class);
    if (is_ref < 0)
        return -1;
    if (!is_ref) {
        PyObject *r = lazy_fill() ? NULL : call_method(raw, s_is_plain, NULL, 0);
        int yes = r ? PyObject_IsTrue(r) : -1;
        Py_XDECREF(r);
        return yes;
    }
    int yes = batch_attr_false(raw, s_scheduled);          /* (in its order: `and` stops at the first no) */
    if (yes == 1)
        yes = batch_attr_none(raw, s_flags_after);
    if (yes == 1)
        yes = batch_attr_false(raw, s_lane_config_any);
    return yes;
}

/* deferral.uniform_flags(sfpu): (LaneFlags, UseLaneFlagsForLaneEnable), each 1 / 0 where equal on all 32 lanes, else
 * None; counted here where `uniform` is deferral's own function and both are 32-lane bool arrays, else called. A new
 * reference, NULL with an error set */
static PyObject *batch_uniform_flags(PyObject *uniform, PyObject *sfpu) {
    PyObject *name = PyFunction_Check(uniform) ? ((PyFunctionObject *)uniform)->func_name : NULL;
    int own = name && PyFunction_GET_GLOBALS(uniform) == entry_deferral && PyUnicode_Check(name)
              && !PyUnicode_Compare(name, s_uniform_flags);
    PyObject *lf = own ? get_attr(sfpu, s_lane_flags) : NULL, *use = lf ? get_attr(sfpu, s_use_lane_flags) : NULL;
    const uint8_t *a = use ? array_data(lf, 32, 1) : NULL, *b = a ? array_data(use, 32, 1) : NULL;
    PyObject *r = NULL;
    if (b) {
        int n = 0, m = 0;
        for (int i = 0; i < 32; i++)
            n += a[i] != 0, m += b[i] != 0;
        PyObject *codes[2] = {n == 32 ? PyLong_FromLong(1) : n == 0 ? PyLong_FromLong(0) : Py_NewRef(Py_None),
                              m == 32 ? PyLong_FromLong(1) : m == 0 ? PyLong_FromLong(0) : Py_NewRef(Py_None)};
        r = codes[0] && codes[1] ? PyTuple_Pack(2, codes[0], codes[1]) : NULL;
        Py_XDECREF(codes[0]);
        Py_XDECREF(codes[1]);
    }
    Py_XDECREF(lf);
    Py_XDECREF(use);
    if (b)
        return r;
    PyErr_Clear();               /* (not this case: the function itself, which raises what it raises) */
    return PyObject_CallOneArg(uniform, sfpu);
}

/* array_data(a, 32, 1) of a 32-lane bool array, its pointer kept with the array (held) in slot `which` for the next
 * call with the same object (a buffer does not move: bind_arrays' rule); NULL where not such an array */
static const uint8_t *lanes_data(PyObject *a, int which) {
    static PyObject *kept[2];
    static const uint8_t *kept_ptr[2];
    if (a != kept[which]) {
        const uint8_t *p = array_data(a, 32, 1);
        if (!p)
            return NULL;
        Py_XSETREF(kept[which], Py_NewRef(a));
        kept_ptr[which] = p;
    }
    return kept_ptr[which];
}

/* Whether raw._en, SfpuState.enabled()'s cache, holds what enabled() would compute now from the lane flags, their use
 * (bound_ptr's, as sfpu_run left them) and the row mask, with all_enabled its count's answer: then invalidating it
 * (flush_deferred's run does) and asking enabled() again (batch_sfpu does) would make an equal array and the same
 * all_enabled, and the cache may stay. 1 it may, 0 not (None, not a 32-lane bool array, or another value) */
static int enables_unchanged(PyObject *raw) {
    static attr_hint h[3];
    PyObject *en = get_attr_hinted(raw, s_en_cache, &h[0]), *rm = NULL, *all_o = NULL;
    int same = 0, all_was;
    if (en && en != Py_None && (rm = get_attr_hinted(raw, s_row_mask, &h[1]))
        && (all_o = get_attr_hinted(raw, s_all_enabled, &h[2]))
        && (all_was = PyObject_IsTrue(all_o)) >= 0) {
        const uint8_t *e = lanes_data(en, 0), *r = lanes_data(rm, 1);
        const uint8_t *lf = bound_ptr[B_LF], *use = bound_ptr[B_USE];
        if (e && r) {
            int all = 1;
            same = 1;
            for (int i = 0; i < 32; i++) {
                int on = (lf[i] || !use[i]) && !r[i];
                same &= e[i] == on;
                all &= on;
            }
            same &= all == all_was;
        }
    }
    PyErr_Clear();
    Py_XDECREF(en);
    Py_XDECREF(rm);
    Py_XDECREF(all_o);
    return same;
}

/* DeferralMixin.flush_deferred of queue dq (a DeferredQueue of fewer than 4 entries: no period search, no batch, the
 * entries run one by one) where the SFPU is plain (the caller checked) and every entry's word has its sfpu_native
 * record in tx._records: what _dq_exec_run's one packed call does (the records run by sfpu_run on the arrays
 * bind_arrays bound, the lane enables invalidated (kept where enables_unchanged: the same cache again), the SFPU's
 * instruction count and sfpu_native.traffic["C"] counted, its cycle the last entry's issue cycle), then
 * flush_deferred's own epilogue (the SFPU's formats from the last entry's config words, a new queue (batch_fresh_queue),
 * no flag state). 1 done, 0 not this case (nothing changed: the caller calls
 * flush_deferred), -1 with an error set, -2 - done where sfpu_run stopped at record `done` (as batch_run's). */
static int batch_small_flush(PyObject *tx, PyObject *dq, PyObject *raw, Py_ssize_t *stopped) {
    if (!dq_is_queue(dq) || !batch_traffic || !batch_new_queue)
        return 0;
    DeferredQueue *q = (DeferredQueue *)dq;
    Py_ssize_t n = q->n;
    if (n < 1 || n >= 4)
        return 0;
    PyObject *ref = batch_flush_reference();
    if (!ref)
        return -1;
    static class_memo flush_class;          /* (an instance's own flush_deferred, a spy's, or the class's another) */
    int is_ref = method_is_ref(tx, s_flush_deferred, ref, &flush_class);
    if (is_ref <= 0)
        return is_ref;
    if (bind_arrays(raw) != 0) {
        PyErr_Clear();
        return 0;
    }
    PyObject *records = get_attr(tx, s_records_cache);
    if (!records || !PyDict_Check(records)) {
        Py_XDECREF(records);
        PyErr_Clear();
        return 0;
    }
    int32_t prog[3 * 8];
    for (Py_ssize_t i = 0; i < n; i++) {
        const dq_entry *e = &q->e[i];
        dq_word *wd = &q->words[e->wid];
        if (!wd->has_record) {
            PyObject *w = PyLong_FromUnsignedLong(e->w);
            int found = w ? lookup_record(records, w, wd->rec) : -1;
            Py_XDECREF(w);
            if (found <= 0) {
                Py_DECREF(records);
                return found;              /* (0: a word without a record: _dq_exec_run's Python takes it) */
            }
            wd->has_record = 1;
        }
        memcpy(prog + 8 * i, wd->rec, sizeof wd->rec);
        if (e->mem) {
            prog[8 * i + 1] = e->mode;
            prog[8 * i + 7] = e->addr;
        }
    }
    Py_DECREF(records);
    const dq_entry *last = &q->e[n - 1];
    long long instructions, c0 = last->cfg0, c1 = last->cfg1;
    if (attr_ll(raw, s_instructions, &instructions) < 0)
        return -1;
    PyObject *fresh = batch_fresh_queue();
    if (!fresh)
        return -1;
    /* flush_deferred's order: the new queue and no flag state, then the run, the counts, the cycle, the formats */
    int bad = set_attr(tx, s_deferred, fresh) < 0 || set_attr(tx, s_dq_flags, Py_None) < 0
              || set_attr_ll(raw, s_instructions, instructions + n) < 0;
    Py_DECREF(fresh);
    if (bad)
        return -1;
    int32_t done = batch_sfpu_run(bound_ptr[B_LREG], bound_ptr[B_LF], bound_ptr[B_USE], bound_ptr[B_ROWS],
                                  bound_ptr[B_WRITTEN], prog, (int32_t)n);
    if (!(done == n && enables_unchanged(raw)) && set_attr(raw, s_en_cache, Py_None) < 0)
        return -1;
    if (done != n) {
        *stopped = done;
        return -2;
    }
    PyObject *was = PyDict_GetItemWithError(batch_traffic, s_c_key);
    long long count;
    if (!was || get_ll(was, "traffic", &count)) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_KeyError, "sfpu_native.traffic has no 'C'");
        return -1;
    }
    PyObject *now = PyLong_FromLongLong(count + n);
    bad = !now || PyDict_SetItem(batch_traffic, s_c_key, now) < 0;
    Py_XDECREF(now);
    if (bad || set_attr_ll(raw, s_cycle, last->c) < 0
        || set_attr(raw, s_fp32_enabled, c1 >> 30 & 1 ? Py_True : Py_False) < 0
        || set_attr(raw, s_srcb_is_fp16, srcb_fp16_like(c0, c1) ? Py_True : Py_False) < 0)
        return -1;
    return 1;
}

/* batch_try's look-ups in batch_sfpu's five memo dicts (_batch_plans, _batch_addr_cache, _batch_timing,
 * _batch_programs, _batch_runs), each remembering the last LOOK_SLOTS keys it found: the key as C integers (the body's
 * words and the numbers of the key tuple batch_sfpu builds, in order), the dict (held: its identity is not reused),
 * its version tag and the value (held). An equal key in the same dict with the same tag finds the same value, so the
 * key tuple is neither built nor hashed (elementwise512: its tiles' keys take two Dst start addresses in turn). Off
 * without dict tags. */
enum { L_PLANS, L_ADDRS, L_TIMING, L_PROGRAMS, L_RUNS, N_LOOK };
#define LOOK_SLOTS 4
#define LOOK_KEY_MAX (1 + 32 + 3 + 4 * 32)
typedef struct {
    PyObject *dict, *value;
    uint64_t version;
    Py_ssize_t n;
    long long key[LOOK_KEY_MAX];
} look_memo;
static look_memo look_memos[N_LOOK][LOOK_SLOTS];
static int look_next[N_LOOK];            /* the slot the next kept key replaces (in turn) */

/* the value remembered for key[0..n) in d (a new reference), NULL where not (n < 0: not to be remembered) */
static PyObject *look_hit(int which, PyObject *d, const long long *key, Py_ssize_t n) {
    if (!DICT_TAGS || n < 0)
        return NULL;
    for (int i = 0; i < LOOK_SLOTS; i++) {
        const look_memo *m = &look_memos[which][i];
        if (m->dict == d && m->n == n && m->version == dict_version(d)
            && !memcmp(m->key, key, (size_t)n * sizeof *key))
            return Py_NewRef(m->value);
    }
    return NULL;
}

/* remember d's value for key[0..n) (n < 0: nothing) */
static void look_keep(int which, PyObject *d, const long long *key, Py_ssize_t n, PyObject *value) {
    if (!DICT_TAGS || n < 0 || n > LOOK_KEY_MAX || !PyDict_Check(d))
        return;
    look_memo *m = &look_memos[which][look_next[which]];
    look_next[which] = (look_next[which] + 1) % LOOK_SLOTS;
    Py_XSETREF(m->dict, Py_NewRef(d));
    Py_XSETREF(m->value, Py_NewRef(value));
    m->version = dict_version(d), m->n = n;
    memcpy(m->key, key, (size_t)n * sizeof *key);
}

/* d[key] through memo slot `which` (raw: key[0..n), see look_hit), `*py` the key tuple, built by make(ctx) only on a
 * miss (the caller keeps it); a new reference, NULL (no error) where absent or make failed */
static PyObject *look_get(int which, PyObject *d, const long long *key, Py_ssize_t n, PyObject **py,
                          PyObject *(*make)(void *), void *ctx) {
    PyObject *v = look_hit(which, d, key, n);
    if (v)
        return v;
    if (!*py && !(*py = make(ctx)))
        return NULL;
    v = dict_get(d, *py);
    if (v)
        look_keep(which, d, key, n, v);
    return v;
}

/* What batch_try's key tuples are built from (the raw keys' parts), and the tuples built so far (owned). words: the
 * body's p words, held: word_buf's items are borrowed from the ready queue and the buffer is shared, and a key may be
 * built after Python ran (a flush, a replaced helper), which can push (first_words refills word_buf) or pop them. */
typedef struct {
    Py_ssize_t p, k, nm;
    long long start, steps[32][3], modes[32], dclock, nop_now;
    PyObject *words[32], *mad_state, *body, *modes_t, *akey, *key3;
} batch_keys;

static void batch_keys_release(batch_keys *b) {
    for (Py_ssize_t i = 0; i < b->p; i++)
        Py_XDECREF(b->words[i]);
    Py_XDECREF(b->mad_state);
    Py_XDECREF(b->body);
    Py_XDECREF(b->modes_t);
    Py_XDECREF(b->akey);
    Py_XDECREF(b->key3);
}

/* the body's words as a tuple: batch_sfpu's body, the plans' key */
static PyObject *body_of(batch_keys *b) {
    if (!b->body && (b->body = PyTuple_New(b->p)))
        for (Py_ssize_t i = 0; i < b->p; i++)
            PyTuple_SET_ITEM(b->body, i, Py_NewRef(b->words[i]));
    return b->body;
}

static PyObject *make_body(void *ctx) {
    return Py_XNewRef(body_of(ctx));
}

static PyObject *modes_of(batch_keys *b) {
    if (!b->modes_t)
        b->modes_t = ints_tuple(b->modes, b->nm);
    return b->modes_t;
}

/* (body, k, start address, steps): batch_sfpu's akey */
static PyObject *make_akey(void *ctx) {
    batch_keys *b = ctx;
    if (b->akey)
        return Py_NewRef(b->akey);
    PyObject *steps = PyTuple_New(b->nm);
    for (Py_ssize_t j = 0; steps && j < b->nm; j++) {
        PyObject *st = ints_tuple(b->steps[j], 3);
        if (!st)
            Py_CLEAR(steps);
        else
            PyTuple_SET_ITEM(steps, j, st);
    }
    b->akey = steps && body_of(b) ? Py_BuildValue("(OnLO)", b->body, b->k, b->start, steps) : NULL;
    Py_XDECREF(steps);
    return Py_XNewRef(b->akey);
}

/* (body, k, (clock offset, nop now, mad state), False): batch_sfpu's timing key (no recorder) */
static PyObject *make_tkey(void *ctx) {
    batch_keys *b = ctx;
    if (!b->key3)
        b->key3 = Py_BuildValue("(LOO)", b->dclock, b->nop_now ? Py_True : Py_False, b->mad_state);
    return b->key3 && body_of(b) ? Py_BuildValue("(OnOO)", b->body, b->k, b->key3, Py_False) : NULL;
}

/* (body, modes): batch_sfpu's bkey */
static PyObject *make_bkey(void *ctx) {
    batch_keys *b = ctx;
    return body_of(b) && modes_of(b) ? PyTuple_Pack(2, b->body, b->modes_t) : NULL;
}

/* (akey, modes): batch_sfpu's rkey */
static PyObject *make_rkey(void *ctx) {
    batch_keys *b = ctx;
    PyObject *akey = make_akey(b);
    PyObject *r = akey && modes_of(b) ? PyTuple_Pack(2, akey, b->modes_t) : NULL;
    Py_XDECREF(akey);
    return r;
}

enum { G_PLANS, G_BODY, G_PLAN, G_DQ, G_RAW, G_EN, G_ALLEN, G_SCHED, G_FAFTER, G_LCANY, G_CFG, G_THCFG, G_RWC, G_AKEY,
       G_ADDRS, G_AN, G_STRICT, G_DSTRAW, G_WRITTEN, G_TM, G_BLOCKED, G_REC, G_ST, G_CLOCK, G_FE, G_FIRST, G_GATE,
       G_FPUW, G_STALLS, G_ISSUED, G_TKEY, G_TIMING, G_MEMO, G_BKEY, G_PROGRAMS, G_NATIVE, G_RKEY, G_RUNS, G_KEPT,
       G_CURRENT, G_N };

/* batch_run(tx, t, th, min_reps, max_words, native_min) -> n: the words batch_sfpu's memo-hit path executed (n > 0);
 * 0 where batch_sfpu refuses at once (fewer than min_reps repetitions: its first test); -1 where this declines (nothing
 * changed: batch_sfpu's Python decides); -2 - done where sfpu_run stopped at record `done` (the cycle model advanced;
 * the caller raises as sfpu_native.run_at does). */
static PyObject *batch_try(PyObject *tx, long long t, PyObject *th, long long min_reps, long long max_words,
                           long long native_min, lazy_words *lw);

static PyObject *batch_run(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    long long t, min_reps, max_words, native_min;
    if (nargs != 6 || get_ll(args[1], "thread", &t) || get_ll(args[3], "min_reps", &min_reps)
        || get_ll(args[4], "max_words", &max_words) || get_ll(args[5], "native_min", &native_min)) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "batch_run(tx, t, th, min_reps, max_words, native_min)");
        return NULL;
    }
    return batch_try(args[0], t, args[2], min_reps, max_words, native_min, NULL);
}

/* The last period search of a periodic word list (lazy_period): its length, period, the period's word values and the
 * answer (best_period's p, k) */
static struct {
    Py_ssize_t n, period, p, k;
    uint32_t vals[32];
} period_memo;

/* first_words and best_period of the first `most` of lw's words, which repeat their first lw->period objects: the
 * values of n words with that period are those of the first `period` ones, so an equal length, period and first
 * values give the search's last answer, with only the first 32 words (best_period's p <= 32: word_buf's items batch_try
 * reads) converted. n, or -1 with an exception set (first_words') */
static Py_ssize_t lazy_period(lazy_words *lw, Py_ssize_t most, Py_ssize_t *p, Py_ssize_t *k) {
    Py_ssize_t n = PyList_GET_SIZE(lw->words) < most ? PyList_GET_SIZE(lw->words) : most, per = lw->period;
    Py_ssize_t head = first_words(lw->words, n < 32 ? n : 32);
    if (head < 0)
        return -1;
    if (per < 1 || per > head || per > 32) {
        n = first_words(lw->words, n);
        if (n >= 0)
            best_period(word_val, n, p, k);
        return n;
    }
    if (period_memo.n == n && period_memo.period == per && !memcmp(period_memo.vals, word_val, (size_t)per * 4)) {
        *p = period_memo.p, *k = period_memo.k;
        return n;
    }
    period_memo.period = 0;                    /* (kept again below once the search is done) */
    memcpy(period_memo.vals, word_val, (size_t)per * 4);
    if (first_words(lw->words, n) != n)
        return -1;
    best_period(word_val, n, p, k);
    period_memo.n = n, period_memo.period = per, period_memo.p = *p, period_memo.k = *k;
    return n;
}

/* batch_run's work; `lw`: the words mop_push just expanded for th's empty ready queue (a list, read instead of the
 * queue), there already (in_ready) or not yet (put there before batch_try's Python calls; a batch taken from the list
 * leaves the queue as it is, mop_push queues the words after it), or NULL: the queue's */
static PyObject *batch_try(PyObject *tx, long long t, PyObject *th, long long min_reps, long long max_words,
                           long long native_min, lazy_words *lw) {
    if (!batch_sfpu_run || t < 0 || t > 2 || max_words < 1 || max_words > 65536)
        return PyLong_FromLong(-1);
    static attr_hint batch_hints[G_N];        /* (each slot read from one kind of object, by one name) */
    PyObject *g[G_N] = {NULL}, *ready = NULL, *result = NULL;
#define BGET(slot, o, name) (g[slot] = get_attr_hinted(o, name, &batch_hints[slot]))
    batch_keys bk = {0};
    long long declined = 0;
#define DECLINE do { PyErr_Clear(); declined = 1; goto out; } while (0)
#define NEED(cond) do { if (!(cond)) DECLINE; } while (0)
    /* the ready queue's period (find_period) and body */
    if (lw && !lw->in_ready)
        batch_lazy = lw;
    static attr_hint ready_hint;
    NEED(ready = get_attr_hinted(th, s_ready, &ready_hint));
    Py_ssize_t p, k, n_words = lw && lw->period ? lazy_period(lw, (Py_ssize_t)max_words, &p, &k)
                                                : first_words(lw ? lw->words : ready, (Py_ssize_t)max_words);
    NEED(n_words >= 0);
    if (!(lw && lw->period))
        best_period(word_val, n_words, &p, &k);
    if (k < min_reps) {
        result = PyLong_FromLong(0);
        goto out;
    }
    /* the look-ups' raw keys (look_memos): [p, the body's words, k, start address, nm, steps, modes] for the plans (its
     * first 1 + p), the address analysis (to the steps) and the kept runs (all); remembered only for a body of exact
     * ints (what the dicts hash and compare as the raw key does) */
    long long lk[LOOK_KEY_MAX], tk[1 + 32 + 3], pk[1 + 32 + 1 + 32];
    int memo_ok = 1;
    NEED(p <= 32);
    lk[0] = p;
    for (Py_ssize_t i = 0; i < p; i++) {
        lk[1 + i] = word_val[i];
        memo_ok &= PyLong_CheckExact(word_buf[i]);
        bk.words[i] = Py_NewRef(word_buf[i]);
    }
    Py_ssize_t nb = 1 + p;
    bk.p = p, bk.k = k;
    NEED((BGET(G_PLANS, tx, s_batch_plans))
         && (g[G_PLAN] = look_get(L_PLANS, g[G_PLANS], lk, memo_ok ? nb : -1, &g[G_BODY], make_body, &bk)));
    NEED(PyTuple_Check(g[G_PLAN]) && PyTuple_GET_SIZE(g[G_PLAN]) == 2);
    PyObject *entries = PyTuple_GET_ITEM(g[G_PLAN], 0), *mems = PyTuple_GET_ITEM(g[G_PLAN], 1);
    NEED(PyList_Check(entries) && PyList_GET_SIZE(entries) == p && PyList_Check(mems));
    Py_ssize_t nm = PyList_GET_SIZE(mems);
    NEED(nm <= 32);
    /* the SFPU as batch_sfpu's `self.sfpu` and `sfpu.enabled()` leave it, at the same point (after the plan): deferred
     * work executed (flush_deferred; a SFPENCC pushed ahead of the MOP), the lane enables cached; then all on, the
     * plain state. A decline after this point leaves the flushed queue and the cache, which batch_sfpu's own calls
     * would find so: they do nothing then */
    Py_ssize_t queued;
    NEED((BGET(G_DQ, tx, s_deferred)) && (queued = PyObject_Length(g[G_DQ])) >= 0);
    NEED(BGET(G_RAW, tx, s_raw_sfpu));
    if (queued) {                              /* (a flush that raises: as batch_sfpu's self.sfpu raises) */
        Py_ssize_t stopped = 0;
        int small = batch_is_plain(g[G_RAW]);     /* (_dq_exec_run's test) */
        if (small > 0)
            small = batch_small_flush(tx, g[G_DQ], g[G_RAW], &stopped);
        if (small == -2) {
            result = PyLong_FromSsize_t(-2 - stopped);
            goto out;
        }
        if (small < 0)
            goto out;
        if (small == 0) {
            PyObject *r = lazy_fill() ? NULL : call_method(tx, s_flush_deferred, NULL, 0);
            if (!r)
                goto out;
            Py_DECREF(r);
        }
    }
    NEED(BGET(G_EN, g[G_RAW], s_en_cache));
    if (g[G_EN] == Py_None) {
        Py_SETREF(g[G_EN], lazy_fill() ? NULL : call_method(g[G_RAW], s_enabled, NULL, 0));
        if (!g[G_EN])
            goto out;
    }
    NEED((BGET(G_ALLEN, g[G_RAW], s_all_enabled)) && PyObject_IsTrue(g[G_ALLEN]) == 1);
    NEED((BGET(G_SCHED, g[G_RAW], s_scheduled)) && PyObject_IsTrue(g[G_SCHED]) == 0);
    NEED((BGET(G_FAFTER, g[G_RAW], s_flags_after)) && g[G_FAFTER] == Py_None);
    NEED((BGET(G_LCANY, g[G_RAW], s_lane_config_any)) && PyObject_IsTrue(g[G_LCANY]) == 0);
    /* the loads' and stores' modes (sfpu_format_flags), the address modifiers' steps (addr_mod_steps) */
    long long c0, c1, v;
    NEED((BGET(G_CFG, tx, s_cfg)) && !list_int(g[G_CFG], 0, &c0) && !list_int(g[G_CFG], 1, &c1));
    int fp32 = (int)(c1 >> 30 & 1), srcb16 = srcb_fp16_like(c0, c1);
    NEED((BGET(G_THCFG, th, s_cfg)) && PyList_Check(g[G_THCFG]));
    bk.nm = nm;
    for (Py_ssize_t j = 0; j < nm; j++) {
        PyObject *mem = PyList_GET_ITEM(mems, j);
        long long is_store, amode, mod0, ab, dm, bias;
        NEED(PyTuple_Check(mem) && PyTuple_GET_SIZE(mem) == 6 && !tuple_int(mem, 1, &is_store)
             && !tuple_int(mem, 3, &amode) && !tuple_int(mem, 5, &mod0) && amode >= 0 && amode < 8);
        long long m = mod0 ? mod0 : sfpu_mode_of(c0, c1);
        NEED(m >= 0 && m < 64 && ((is_store ? store_modes : load_modes) >> m & 1));
        NEED(!list_int(g[G_THCFG], 47 + amode, &bias) && bias == 0);
        NEED(!list_int(g[G_THCFG], 12 + amode, &ab) && !list_int(g[G_THCFG], 28 + amode, &dm));
        NEED(!(ab & 0xC0C0) && !(dm & 0x1C00));
        bk.modes[j] = m;
        bk.steps[j][0] = ab & 0x3F, bk.steps[j][1] = ab >> 8 & 0x3F, bk.steps[j][2] = dm & 0x3FF;
    }
    /* the Dst address analysis (batch_addrs) of (body, k, start address, steps) */
    long long base_cfg, rwc_d, per_rep[3];
    NEED(!list_int(g[G_THCFG], 1, &base_cfg) && (BGET(G_RWC, th, s_rwc)) && PyDict_Check(g[G_RWC]));
    PyObject *d_o = PyDict_GetItemWithError(g[G_RWC], s_d);
    NEED(d_o && PyLong_Check(d_o) && !get_ll(d_o, "RWC", &rwc_d));
    bk.start = (base_cfg & 0xFFF) + rwc_d;
    lk[nb] = k, lk[nb + 1] = bk.start, lk[nb + 2] = nm;
    for (Py_ssize_t j = 0; j < nm; j++)
        memcpy(&lk[nb + 3 + 3 * j], bk.steps[j], sizeof bk.steps[j]);
    Py_ssize_t na = nb + 3 + 3 * nm;
    NEED((BGET(G_ADDRS, tx, s_batch_addr_cache))
         && (g[G_AN] = look_get(L_ADDRS, g[G_ADDRS], lk, memo_ok ? na : -1, &g[G_AKEY], make_akey, &bk)));
    NEED(PyTuple_Check(g[G_AN]) && PyTuple_GET_SIZE(g[G_AN]) == 3);
    PyObject *need_rows = PyTuple_GET_ITEM(g[G_AN], 1), *per = PyTuple_GET_ITEM(g[G_AN], 2);
    for (int j = 0; j < 3; j++)
        NEED(!tuple_int(per, j, &per_rep[j]));
    NEED((BGET(G_STRICT, tx, s_strict)));
    int strict = PyObject_IsTrue(g[G_STRICT]);
    NEED(strict >= 0);
    if (strict && need_rows != Py_None) {      /* a load must find the rows written before the batch */
        NEED((BGET(G_DSTRAW, tx, s_dst_raw)) && (BGET(G_WRITTEN, g[G_DSTRAW], s_written)));
        Py_buffer rows, wr;
        NEED(PyObject_GetBuffer(need_rows, &rows, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) == 0);
        int bad = rows.itemsize != 8 || !rows.format || strchr("qlL", rows.format[strlen(rows.format) - 1]) == NULL;
        if (!bad && PyObject_GetBuffer(g[G_WRITTEN], &wr, PyBUF_C_CONTIGUOUS) == 0) {
            const int64_t *r = rows.buf;
            const uint8_t *w = wr.buf;
            for (Py_ssize_t i = 0; i < rows.len / 8 && !bad; i++)
                bad = wr.itemsize != 1 || r[i] < 0 || r[i] >= wr.len || !w[r[i]];
            PyBuffer_Release(&wr);
        } else
            bad = 1;
        PyBuffer_Release(&rows);
        NEED(!bad);
    }
    /* the timing memo under batch_timing.key's key */
    NEED((BGET(G_TM, tx, s_tm)) && (BGET(G_BLOCKED, th, s_blocked)) && g[G_BLOCKED] == Py_None);
    NEED((BGET(G_REC, g[G_TM], s_rec)) && g[G_REC] == Py_None);
    NEED((BGET(G_ST, g[G_TM], s_sfpu_timing)) && !timing_slots(g[G_ST]));
    NEED((BGET(G_CLOCK, g[G_TM], s_clock)) && (BGET(G_FE, g[G_TM], s_fe))
         && (BGET(G_FIRST, g[G_TM], s_first)) && (BGET(G_GATE, g[G_TM], s_gate))
         && (BGET(G_FPUW, g[G_TM], s_dst_fpu_write)) && (BGET(G_STALLS, g[G_TM], s_stalls))
         && (BGET(G_ISSUED, g[G_TM], s_issued)));
    long long clock, b, gate1, nop, mad, busy, stalls, issued;
    NEED(!list_int(g[G_CLOCK], t, &clock) && !list_int(g[G_FE], t, &b) && !list_int(g[G_STALLS], t, &stalls)
         && !list_int(g[G_ISSUED], t, &issued));
    if (b <= clock)
        b = clock + 1;
    NEED((row_state(g[G_FIRST]) || PyList_Check(g[G_FIRST])) && first_unset(g[G_FIRST], t) == 0);
    NEED(row_state(g[G_GATE]) || PyList_Check(g[G_GATE]));
    long long gate0;
    NEED(!gate_pair(g[G_GATE], t, &gate0, &gate1));
    NEED(gate1 <= b && PyDict_Check(g[G_FPUW]));
    Py_ssize_t pos = 0;
    PyObject *key_o, *val_o;
    while (PyDict_Next(g[G_FPUW], &pos, &key_o, &val_o))
        NEED(PyLong_Check(val_o) && !get_ll(val_o, "FPU write", &v) && v <= b - fpu_to_sfpload_gap);
    NEED(!slot_ll(g[G_ST], T_NOP_ONLY, &nop) && !slot_ll(g[G_ST], T_MAD_CYCLE, &mad) && nop <= b && mad <= b - 1
         && !slot_ll(g[G_ST], T_BUSY, &busy));
    if (mad == b - 1) {
        PyObject *mad_writes = slot_obj(g[G_ST], T_MAD_WRITES), *mad_macro = slot_obj(g[G_ST], T_MAD_MACRO);
        bk.mad_state = mad_writes && mad_macro ? PyTuple_Pack(2, mad_writes, mad_macro) : NULL;
        Py_XDECREF(mad_writes);
        Py_XDECREF(mad_macro);
    } else {
        bk.mad_state = Py_NewRef(Py_None);
    }
    NEED(bk.mad_state);
    bk.dclock = b - clock, bk.nop_now = nop == b;
    memcpy(tk, lk, (size_t)nb * sizeof *lk);    /* [p, the body's words, k, clock offset, nop now] (no mad state) */
    tk[nb] = k, tk[nb + 1] = bk.dclock, tk[nb + 2] = bk.nop_now;
    Py_ssize_t nt = memo_ok && bk.mad_state == Py_None ? nb + 3 : -1;
    NEED((BGET(G_TIMING, tx, s_batch_timing))
         && (g[G_MEMO] = look_get(L_TIMING, g[G_TIMING], tk, nt, &g[G_TKEY], make_tkey, &bk)));
    PyObject *memo = g[G_MEMO];
    long long d_clock, d_busy, d_stalls, d_issued, nop_rel = 0, mad_rel = 0;
    NEED(PyTuple_Check(memo) && PyTuple_GET_SIZE(memo) == 7 && PyTuple_GET_ITEM(memo, 6) == Py_None
         && !tuple_int(memo, 0, &d_clock) && !tuple_int(memo, 3, &d_busy) && !tuple_int(memo, 4, &d_stalls)
         && !tuple_int(memo, 5, &d_issued));
    PyObject *nop_m = PyTuple_GET_ITEM(memo, 1), *mad_m = PyTuple_GET_ITEM(memo, 2);
    NEED(nop_m == Py_None || !tuple_int(memo, 1, &nop_rel));
    NEED(mad_m == Py_None || (PyTuple_Check(mad_m) && PyTuple_GET_SIZE(mad_m) == 3 && !tuple_int(mad_m, 0, &mad_rel)));
    /* the kept C program of (address key, modes) */
    NEED(k < native_min);
    memcpy(pk, lk, (size_t)nb * sizeof *lk);    /* [p, the body's words, nm, modes] */
    pk[nb] = nm;
    memcpy(&pk[nb + 1], bk.modes, (size_t)nm * sizeof *bk.modes);
    memcpy(&lk[na], bk.modes, (size_t)nm * sizeof *bk.modes);
    NEED((BGET(G_PROGRAMS, tx, s_batch_programs))
         && (g[G_NATIVE] = look_get(L_PROGRAMS, g[G_PROGRAMS], pk, memo_ok ? nb + 1 + nm : -1, &g[G_BKEY], make_bkey,
                                    &bk))
         && PyTuple_Check(g[G_NATIVE]));
    NEED((BGET(G_RUNS, tx, s_batch_runs))
         && (g[G_KEPT] = look_get(L_RUNS, g[G_RUNS], lk, memo_ok ? na + nm : -1, &g[G_RKEY], make_rkey, &bk)));
    long long prog_addr, n = (long long)k * p, instructions;
    NEED(PyTuple_Check(g[G_KEPT]) && PyTuple_GET_SIZE(g[G_KEPT]) == 2 && !tuple_int(g[G_KEPT], 1, &prog_addr)
         && prog_addr && n <= INT32_MAX);
    NEED(bind_arrays(g[G_RAW]) == 0);
    PyObject *last = PyList_GET_ITEM(entries, p - 1);
    NEED(PyTuple_Check(last) && PyTuple_GET_SIZE(last) >= 2);
    NEED(g[G_CURRENT] = Py_BuildValue("(LOO)", t, PyTuple_GET_ITEM(last, 0), PyTuple_GET_ITEM(last, 1)));
    PyObject *rwc_a = PyDict_GetItemWithError(g[G_RWC], s_bank_a), *rwc_b = PyDict_GetItemWithError(g[G_RWC], s_bank_b);
    long long ra, rb;
    NEED(rwc_a && rwc_b && PyLong_Check(rwc_a) && PyLong_Check(rwc_b) && !get_ll(rwc_a, "RWC", &ra)
         && !get_ll(rwc_b, "RWC", &rb));
    NEED(!attr_ll(g[G_RAW], s_instructions, &instructions));
    /* commit: batch_timing.replay, the RWCs, Tensix.current / issue_t, the SFPU's formats, the run, the words */
    long long c = b + d_clock;
    if ((nop_m != Py_None && set_slot(g[G_ST], T_NOP_ONLY, PyLong_FromLongLong(b + nop_rel)))
        || (mad_m != Py_None && (set_slot(g[G_ST], T_MAD_CYCLE, PyLong_FromLongLong(b + mad_rel))
                                 || set_slot(g[G_ST], T_MAD_WRITES, Py_NewRef(PyTuple_GET_ITEM(mad_m, 1)))
                                 || set_slot(g[G_ST], T_MAD_MACRO, Py_NewRef(PyTuple_GET_ITEM(mad_m, 2)))))
        || (b + d_busy > busy && set_slot(g[G_ST], T_BUSY, PyLong_FromLongLong(b + d_busy)))
        || set_item_ll(g[G_STALLS], t, stalls + d_stalls) || set_item_ll(g[G_ISSUED], t, issued + d_issued)
        || set_item_ll(g[G_CLOCK], t, c))
        goto out;
    PyObject *rv[3] = {PyLong_FromLongLong((ra + k * per_rep[0]) & 0x3F),
                       PyLong_FromLongLong((rb + k * per_rep[1]) & 0x3F),
                       PyLong_FromLongLong((rwc_d + k * per_rep[2]) & 0x3FF)};
    PyObject *rk[3] = {s_bank_a, s_bank_b, s_d};
    int bad = 0;
    for (int j = 0; j < 3; j++) {
        bad |= !rv[j] || PyDict_SetItem(g[G_RWC], rk[j], rv[j]) < 0;
        Py_XDECREF(rv[j]);
    }
    if (bad || set_attr(tx, s_current, g[G_CURRENT]) < 0 || set_issue_t(tx, g[G_TM], c) < 0
        || set_attr(g[G_RAW], s_fp32_enabled, fp32 ? Py_True : Py_False) < 0
        || set_attr(g[G_RAW], s_srcb_is_fp16, srcb16 ? Py_True : Py_False) < 0
        || set_attr_ll(g[G_RAW], s_instructions, instructions + n) < 0)
        goto out;
    int32_t done = batch_sfpu_run(bound_ptr[B_LREG], bound_ptr[B_LF], bound_ptr[B_USE], bound_ptr[B_ROWS],
                                  bound_ptr[B_WRITTEN], (const int32_t *)(uintptr_t)prog_addr, (int32_t)n);
    if (done != n) {
        result = PyLong_FromLongLong(-2 - (long long)done);
        goto out;
    }
    if (set_attr_ll(g[G_RAW], s_cycle, c) < 0)
        goto out;
    PyObject *r = NULL;
    if (batch_lazy == lw && lw)                /* (the words not in the queue: mop_push queues those after the batch) */
        r = Py_NewRef(Py_None);
    else if (n == PyObject_Length(ready))
        r = PyObject_CallMethodNoArgs(ready, s_clear);
    else
        for (long long i = 0; i < n; i++) {
            r = PyObject_CallMethodNoArgs(ready, s_popleft);
            if (!r || i == n - 1)
                break;
            Py_DECREF(r);
        }
    if (!r)
        goto out;
    Py_DECREF(r);
    result = PyLong_FromLongLong(n);
out:
    if (declined)
        result = PyLong_FromLong(-1);
    batch_lazy = NULL;                         /* (words still not queued: the caller queues them, mop_push) */
    Py_XDECREF(ready);
    for (int j = 0; j < G_N; j++)
        Py_XDECREF(g[j]);
    batch_keys_release(&bk);
    return result;
#undef BGET
#undef NEED
#undef DECLINE
}

/* mop_push(tx, thread, word, t) -> the accepted cycle, or None with nothing changed: FrontendMixin.push of a MOP word
 * to an idle thread (nothing in its FIFO, MOP output or ready queue, no REPLAY load, not blocked, no latched wait, no
 * MVMUL recording) whose expansion is K identical REPLAYs of a buffered body of 2 or more words (elementwise512's
 * compute kernel: a tile's SFPU body as one MOP), in C up to batch_sfpu: the FIFO's accept and the MOP expander's take
 * (TensixTiming.accept, take(is_mop=True)), the expansion from frontend's cache (_MOP_EXPANSIONS; a miss: None, the
 * Python path fills it), the replay expander's K x body into the ready queue (the first REPLAY's long_replay_in_mop
 * clears after_mop), then batch_sfpu itself for an SFPU word at the head (a method call: its switches, the C batch_run
 * and its Python reference as ever; no batch found: batch_skip, as _drain sets it). Where it takes every word, the
 * drain ends there (the thread empty, blocked None, the words counted); anything else is left in the ready queue to
 * Tensix.drain, which continues exactly where _drain's loop would (next_instruction finds the ready queue filled,
 * batch_skip as _drain left it). The class's drain and _drain must be Tensix's, the
 * cycle model neither recorded nor spied, the MOP and REPLAY words free of reserved bits in strict mode (else None:
 * Python raises). */
/* the last expansion mop_push found to be K identical REPLAYs (held: its identity is not reused while it is kept) */
static PyObject *mop_uniform_exp;
static PyObject *mop_frontend, *mop_drain_ref, *mop_pydrain_ref, *s_mop_expansions, *s_replay_fields, *s_used_bits,
    *s_op_replay, *s_op_mop, *s_mask_hi, *s_mop_cfg, *s_len, *s_start_idx, *s_load_mode, *s_ewl, *s_batch_sfpu_name,
    *s_pydrain, *s_mop_name, *s_replay_name, *s_decoded_cache;

static int mop_init(void) {
    if (mop_frontend)
        return 0;
    name_ref names[] = {
        {&s_mop_expansions, "_MOP_EXPANSIONS"}, {&s_replay_fields, "_REPLAY_FIELDS"}, {&s_used_bits, "_USED_BITS"},
        {&s_op_replay, "_OP_REPLAY"}, {&s_op_mop, "_OP_MOP"}, {&s_mask_hi, "mask_hi"}, {&s_mop_cfg, "mop_cfg"},
        {&s_len, "len"}, {&s_start_idx, "start_idx"}, {&s_load_mode, "load_mode"},
        {&s_ewl, "execute_while_loading"}, {&s_batch_sfpu_name, "batch_sfpu"}, {&s_pydrain, "_drain"},
        {&s_mop_name, "MOP"}, {&s_replay_name, "REPLAY"}, {&s_decoded_cache, "_decoded"},
    };
    if (INTERN_NAMES(names))
        return -1;
    /* (first use: frontend.py and tensix.py import this module, so not at its start) */
    PyObject *fmod = PyImport_ImportModule("tt_backend.runtime.emu.frontend");
    PyObject *tmod = fmod ? PyImport_ImportModule("tt_backend.runtime.emu.tensix") : NULL;
    PyObject *cls = tmod ? PyObject_GetAttrString(tmod, "Tensix") : NULL;
    PyObject *drain = cls ? PyObject_GetAttr(cls, s_drain) : NULL, *pydrain = drain ? PyObject_GetAttr(cls, s_pydrain)
                                                                                    : NULL;
    Py_XDECREF(tmod);
    Py_XDECREF(cls);
    if (!pydrain) {
        Py_XDECREF(fmod);
        Py_XDECREF(drain);
        return -1;
    }
    mop_drain_ref = drain;
    mop_pydrain_ref = pydrain;
    mop_frontend = PyModule_GetDict(fmod);      /* (the module stays imported: a borrowed dict is safe) */
    Py_INCREF(mop_frontend);
    Py_DECREF(fmod);
    return 0;
}

/* frontend's module-level int `name` (through its dict) and, with `bits_of`, _USED_BITS[bits_of]: 0, 1 where absent */
static int mop_frontend_ll(PyObject *name, PyObject *bits_of, long long *out) {
    PyObject *v = PyDict_GetItemWithError(mop_frontend, name);
    if (v && bits_of)
        v = PyDict_Check(v) ? PyDict_GetItemWithError(v, bits_of) : NULL;
    if (!v || !PyLong_Check(v)) {
        PyErr_Clear();
        return 1;
    }
    return get_ll(v, "frontend constant", out) ? (PyErr_Clear(), 1) : 0;
}

/* d[name] as a C integer where it is an int (with `exact`: not of a subclass, a bool), 0; 1 where not (no error) */
static int dict_item_ll(PyObject *d, PyObject *name, int exact, const char *what, long long *out) {
    PyObject *v = PyDict_GetItemWithError(d, name);
    if (!v || !(exact ? PyLong_CheckExact(v) : PyLong_Check(v)) || get_ll(v, what, out)) {
        PyErr_Clear();
        return 1;
    }
    return 0;
}

/* fields[name] of a decoded REPLAY (a dict) as a C integer: 0, 1 where absent */
static int mop_field(PyObject *fields, PyObject *name, long long *out) {
    return dict_item_ll(fields, name, 0, "REPLAY field", out);
}

/* The modules batch_sfpu's call of batch_run goes through (their dicts: the modules stay imported), MopBatchMixin's
 * batch_sfpu and chip.errors.EmuUnimplemented, found at mop_push's first direct batch */
static PyObject *direct_mop_batch, *direct_issue, *direct_sfpu_native, *direct_deferral, *direct_batch_sfpu,
    *direct_unimplemented, *s_batch_closed_form, *s_batch_min_reps_g, *s_batch_max_words, *s_native_batch_min,
    *s_batch_run_name, *s_batch_native, *s_native_sfpu, *s_traffic;

static int direct_init(void) {
    if (direct_unimplemented)
        return 0;
    name_ref names[] = {
        {&s_batch_closed_form, "BATCH_CLOSED_FORM"}, {&s_batch_min_reps_g, "BATCH_MIN_REPS"},
        {&s_batch_max_words, "BATCH_MAX_WORDS"}, {&s_native_batch_min, "NATIVE_BATCH_MIN"},
        {&s_batch_run_name, "batch_run"}, {&s_batch_native, "BATCH_NATIVE"}, {&s_native_sfpu, "NATIVE_SFPU"},
        {&s_traffic, "traffic"},
    };
    if (INTERN_NAMES(names))
        return -1;
    const char *mods[4] = {"tt_backend.runtime.emu.accel.mop_batch", "tt_backend.runtime.emu.accel.sfpu_issue_native",
                           "tt_backend.runtime.emu.accel.sfpu_native", "tt_backend.runtime.emu.accel.deferral"};
    PyObject **dicts[4] = {&direct_mop_batch, &direct_issue, &direct_sfpu_native, &direct_deferral};
    for (int i = 0; i < 4; i++) {
        PyObject *m = *dicts[i] ? NULL : PyImport_ImportModule(mods[i]);
        if (!*dicts[i] && !m)
            return -1;
        if (m) {
            *dicts[i] = Py_NewRef(PyModule_GetDict(m));
            Py_DECREF(m);
        }
    }
    PyObject *cls = PyDict_GetItemString(direct_mop_batch, "MopBatchMixin");
    if (!direct_batch_sfpu && !(direct_batch_sfpu = cls ? PyObject_GetAttr(cls, s_batch_sfpu_name) : NULL)) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_AttributeError, "mop_batch.MopBatchMixin");
        return -1;
    }
    PyObject *err = PyImport_ImportModule("tt_backend.chip.errors");
    direct_unimplemented = err ? PyObject_GetAttrString(err, "EmuUnimplemented") : NULL;
    Py_XDECREF(err);
    return direct_unimplemented ? 0 : -1;
}

/* d[name] as a C integer where it is an exact int: 0, 1 where not */
static int direct_ll(PyObject *d, PyObject *name, long long *out) {
    return dict_item_ll(d, name, 1, "batch setting", out);
}

/* Whether tx.batch_sfpu(t, th) would be MopBatchMixin.batch_sfpu calling this module's batch_run (its
 * BATCH_CLOSED_FORM, sfpu_issue_native.batch_run the module's own with BATCH_NATIVE and sfpu_native.NATIVE_SFPU on,
 * sfpu_native.traffic the dict configure_batch was given), with the arguments it would pass: 1 (filled in), 0 not,
 * -1 with an error set */
static int direct_batch(PyObject *tx, long long *min_reps, long long *max_words, long long *native_min) {
    if (direct_init())
        return -1;
    static class_memo batch_class;
    int is_ref = method_is_ref(tx, s_batch_sfpu_name, direct_batch_sfpu, &batch_class);
    if (is_ref <= 0 || !batch_sfpu_run)
        return is_ref < 0 ? -1 : 0;
    PyObject *run = PyDict_GetItemWithError(direct_issue, s_batch_run_name);
    int ours = run && PyFunction_Check(run) && PyFunction_GET_GLOBALS(run) == direct_issue
               && PyUnicode_Check(((PyFunctionObject *)run)->func_name)
               && !PyUnicode_Compare(((PyFunctionObject *)run)->func_name, s_batch_run_name);
    if (PyErr_Occurred())
        return -1;
    return ours && PyDict_GetItemWithError(direct_mop_batch, s_batch_closed_form) == Py_True
           && PyDict_GetItemWithError(direct_issue, s_batch_native) == Py_True
           && PyDict_GetItemWithError(direct_sfpu_native, s_native_sfpu) == Py_True
           && PyDict_GetItemWithError(direct_sfpu_native, s_traffic) == batch_traffic
           && !direct_ll(direct_mop_batch, s_batch_min_reps_g, min_reps)
           && !direct_ll(direct_mop_batch, s_batch_max_words, max_words)
           && !direct_ll(direct_deferral, s_native_batch_min, native_min);
}

/* batch_sfpu(t, th) for mop_push, which just expanded lw's words for th's ready queue: batch_try on them where
 * direct_batch says batch_sfpu would call batch_run, with what batch_sfpu does with its answer (the C traffic counted;
 * -2 - done: its EmuUnimplemented); the method itself where not or batch_run declines (-1: its Python decides). A new
 * reference to the count, NULL with an error set */
static PyObject *mop_batch_sfpu(PyObject *tx, PyObject *t_o, long long t, PyObject *th, lazy_words *lw) {
    long long min_reps, max_words, native_min, n;
    int direct = direct_batch(tx, &min_reps, &max_words, &native_min);
    if (direct < 0)
        return NULL;
    PyObject *r = direct ? batch_try(tx, t, th, min_reps, max_words, native_min, lw) : NULL;
    if (direct && (!r || get_ll(r, "batch_run", &n))) {
        Py_XDECREF(r);
        return NULL;
    }
    if (!direct || n == -1) {
        Py_XDECREF(r);
        if (lazy_fill_from(lw, 0))             /* (batch_sfpu's Python reads the queue) */
            return NULL;
        PyObject *call[2] = {t_o, th};
        return call_method(tx, s_batch_sfpu_name, call, 2);
    }
    if (n < -1) {
        Py_DECREF(r);
        PyErr_Format(direct_unimplemented, "sfpu_native.run: a kept MOP program's record %lld is not the C part's",
                     -2 - n);
        return NULL;
    }
    if (n > 0) {
        PyObject *was = PyDict_GetItemWithError(batch_traffic, s_c_key);
        long long count;
        PyObject *now = NULL;
        if (!was || get_ll(was, "traffic", &count) || !(now = PyLong_FromLongLong(count + n))
            || PyDict_SetItem(batch_traffic, s_c_key, now) < 0) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_KeyError, "C");
            Py_XDECREF(now);
            Py_DECREF(r);
            return NULL;
        }
        Py_DECREF(now);
    }
    return r;
}

enum { P_TM, P_REC, P_ST, P_SREC, P_TMDICT, P_THREADS, P_TH, P_FIFO, P_READY, P_MOPOUT, P_LOAD, P_BLOCKED, P_LATCH,
       P_MM, P_STRICT, P_MASK, P_CFG, P_KEY, P_EXP, P_FIELDS, P_RB, P_SEQ, P_N, P_DRAINED, P_NUM };

/* sfpu_issue_native.MOP_LAZY_NATIVE (read at each push: lazy_words): 1 on, 0 off (or no switches configured: mop_push
 * called on its own), -1 with an error set */
static PyObject *s_mop_lazy_native;
static int mop_lazy_on(void) {
    if (!entry_switches)
        return 0;
    if (!s_mop_lazy_native && !(s_mop_lazy_native = PyUnicode_InternFromString("MOP_LAZY_NATIVE")))
        return -1;
    return dict_flag(entry_switches, s_mop_lazy_native);
}

static PyObject *mop_push(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    long long th, t, w, op_mop, op_replay, used_mop, used_replay;
    if (nargs != 4 || get_ll(args[1], "thread", &th) || get_ll(args[2], "word", &w) || get_ll(args[3], "t", &t)) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "mop_push(tx, thread, word, t)");
        return NULL;
    }
    if (mop_init())
        return NULL;
    static attr_hint push_hints[P_NUM];       /* (each slot read from one kind of object, by one name) */
    PyObject *tx = args[0], *o[P_NUM] = {NULL}, *result = NULL;
#define PGET(slot, obj, name) (o[slot] = get_attr_hinted(obj, name, &push_hints[slot]))
    tm_lists L = {0};
    lazy_words lw = {NULL, NULL, 0, 1};
    int have_lists = 0;
#define NONE_IF(cond) do { if (cond) { PyErr_Clear(); result = Py_NewRef(Py_None); goto out; } } while (0)
    NONE_IF(th < 0 || th > 2 || w < 0 || w > 0xFFFFFFFFLL);
    NONE_IF(mop_frontend_ll(s_op_mop, NULL, &op_mop) || mop_frontend_ll(s_op_replay, NULL, &op_replay)
            || mop_frontend_ll(s_used_bits, s_mop_name, &used_mop)
            || mop_frontend_ll(s_used_bits, s_replay_name, &used_replay) || (w >> 24) != op_mop);
    /* Tensix.drain and _drain themselves (no override on the class or the instance) */
    static class_memo drain_class, pydrain_class;
    int drain_ref = method_is_ref(tx, s_drain, mop_drain_ref, &drain_class);
    if (drain_ref > 0)
        drain_ref = method_is_ref(tx, s_pydrain, mop_pydrain_ref, &pydrain_class);
    if (drain_ref < 0)
        goto out;
    NONE_IF(!drain_ref);
    /* the cycle model neither recorded nor spied (the C issue paths' rule) */
    NONE_IF(!(PGET(P_TM, tx, s_tm))
            || !(PGET(P_REC, o[P_TM], s_rec)) || o[P_REC] != Py_None
            || !(PGET(P_ST, o[P_TM], s_sfpu_timing))
            || !(PGET(P_SREC, o[P_ST], s_rec)) || o[P_SREC] != Py_None
            || !(PGET(P_TMDICT, o[P_TM], s_dict)) || !PyDict_Check(o[P_TMDICT]));
    int spied = PyDict_Contains(o[P_TMDICT], s_issue);
    if (spied < 0)
        goto out;
    NONE_IF(spied);
    /* the thread idle */
    NONE_IF(!(PGET(P_THREADS, tx, s_threads))
            || !(o[P_TH] = PySequence_GetItem(o[P_THREADS], th)));
    PyObject *thobj = o[P_TH];
    NONE_IF(!(PGET(P_FIFO, thobj, s_fifo))
            || !(PGET(P_READY, thobj, s_ready))
            || !(PGET(P_MOPOUT, thobj, s_mop_out)) || PyObject_Length(o[P_FIFO]) != 0
            || PyObject_Length(o[P_READY]) != 0 || PyObject_Length(o[P_MOPOUT]) != 0);
    NONE_IF(!(PGET(P_LOAD, thobj, s_replay_load)) || o[P_LOAD] != Py_None
            || !(PGET(P_BLOCKED, thobj, s_blocked)) || o[P_BLOCKED] != Py_None
            || !(PGET(P_LATCH, thobj, s_latch)) || o[P_LATCH] != Py_None
            || !(PGET(P_MM, tx, s_mm_record)) || o[P_MM] != Py_None);
    int strict;
    NONE_IF(!(PGET(P_STRICT, tx, s_strict))
            || (strict = PyObject_IsTrue(o[P_STRICT])) < 0);
    NONE_IF(strict && (w & ~used_mop & 0xFFFFFFFFLL));
    /* the expansion, from the expander's cache: K identical REPLAYs */
    NONE_IF(!(PGET(P_MASK, thobj, s_mask_hi))
            || !(PGET(P_CFG, thobj, s_mop_cfg))
            || !PyList_Check(o[P_CFG]) || !(o[P_KEY] = PyTuple_New(2 + PyList_GET_SIZE(o[P_CFG]))));
    PyTuple_SET_ITEM(o[P_KEY], 0, Py_NewRef(args[2]));
    PyTuple_SET_ITEM(o[P_KEY], 1, Py_NewRef(o[P_MASK]));
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(o[P_CFG]); i++)
        PyTuple_SET_ITEM(o[P_KEY], 2 + i, Py_NewRef(PyList_GET_ITEM(o[P_CFG], i)));
    PyObject *cache = PyDict_GetItemWithError(mop_frontend, s_mop_expansions);
    NONE_IF(!cache || !PyDict_Check(cache) || !(o[P_EXP] = dict_get(cache, o[P_KEY])) || !PyTuple_Check(o[P_EXP]));
    Py_ssize_t k = PyTuple_GET_SIZE(o[P_EXP]);
    NONE_IF(k < 1);
    PyObject *rw = PyTuple_GET_ITEM(o[P_EXP], 0);
    long long r;
    NONE_IF(!PyLong_Check(rw) || get_ll(rw, "REPLAY", &r) || (r >> 24) != op_replay
            || (strict && (r & ~used_replay & 0xFFFFFFFFLL)));
    if (o[P_EXP] != mop_uniform_exp) {        /* (a tuple found uniform before is uniform: tuples do not change) */
        for (Py_ssize_t i = 1; i < k; i++) {
            int same = PyObject_RichCompareBool(PyTuple_GET_ITEM(o[P_EXP], i), rw, Py_EQ);
            if (same < 0)
                goto out;
            NONE_IF(!same);
        }
        Py_XSETREF(mop_uniform_exp, Py_NewRef(o[P_EXP]));
    }
    PyObject *fields_cache = PyDict_GetItemWithError(mop_frontend, s_replay_fields);
    long long count, start, load_mode, ewl;
    NONE_IF(!fields_cache || !PyDict_Check(fields_cache) || !(o[P_FIELDS] = dict_get(fields_cache, rw))
            || !PyDict_Check(o[P_FIELDS]) || mop_field(o[P_FIELDS], s_len, &count)
            || mop_field(o[P_FIELDS], s_start_idx, &start) || mop_field(o[P_FIELDS], s_load_mode, &load_mode)
            || mop_field(o[P_FIELDS], s_ewl, &ewl));
    NONE_IF(count < 2 || count > 32 || start < 0 || start > 31 || load_mode || ewl || count * k < 8);
    NONE_IF(!(PGET(P_RB, thobj, s_replay_buf)) || !PyList_Check(o[P_RB])
            || PyList_GET_SIZE(o[P_RB]) != 32);
    NONE_IF(!(o[P_SEQ] = PyList_New((Py_ssize_t)(count * k))));
    for (Py_ssize_t i = 0; i < count * k; i++)
        PyList_SET_ITEM(o[P_SEQ], i, Py_NewRef(PyList_GET_ITEM(o[P_RB], (start + i % count) % 32)));
    NONE_IF(tm_lists_get(o[P_TM], &L));
    have_lists = 1;
    /* from here on the push takes effect: accept, then take of a MOP (no transition penalty; after_mop set by the take
     * and cleared by the long REPLAY it emits) */
    PyObject *q = PyList_GetItem(L.taken, th);
    long long clock, fe, a;
    if (!q || list_ll(L.clock, th, &clock) || list_ll(L.fe, th, &fe) || fifo_accept(q, t, &a))
        goto out;
    if (ring_push_ll(q, a > clock ? a : clock))
        goto out;
    if (set_item_ll(L.fe, th, a > fe ? a : fe) || after_mop_clear(L.after_mop, th) < 0
        || set_attr_ll(thobj, s_batch_skip, 0) < 0)
        goto out;
    lw = (lazy_words){o[P_READY], o[P_SEQ], count, 0};
    int lazy = mop_lazy_on();
    if (lazy <= 0 && (lazy < 0 || lazy_fill_from(&lw, 0)))    /* (off: the words in the queue now, as before) */
        goto out;
    if (!lazy)
        lw.period = 0;
    /* _drain's batch_sfpu for an SFPU word at the head (its kind from the decoder's cache; not cached: the drain
     * decodes it and decides), and the batch_skip it sets where that finds no batch */
    PyObject *decoded = get_attr(tx, s_decoded_cache), *d = decoded ? dict_get(decoded, PyList_GET_ITEM(o[P_SEQ], 0))
                                                                     : NULL;
    long long kind = -1, n = 0;
    int sfpu_head = d && PyTuple_Check(d) && PyTuple_GET_SIZE(d) == 7 && !tuple_int(d, 5, &kind) && kind == K_SFPU;
    Py_XDECREF(d);
    Py_XDECREF(decoded);
    if (PyErr_Occurred())
        goto out;
    if (sfpu_head && (!(o[P_N] = mop_batch_sfpu(tx, args[1], th, thobj, &lw)) || get_ll(o[P_N], "batch_sfpu", &n)))
        goto out;
    if (lazy_fill_from(&lw, (Py_ssize_t)n))    /* (the words a batch left, all with none: as the reference's queue) */
        goto out;
    if (n == count * k) {                      /* the whole expansion: the drain ends with the thread empty */
        if (set_attr(thobj, s_blocked, Py_None) < 0 || count_issued(tx, th, n))
            goto out;
    } else {                                   /* the rest is Tensix.drain's, which counts its own words */
        if ((n > 0 && set_attr(thobj, s_blocked, Py_None) < 0)
            || (sfpu_head && n == 0 && set_attr_ll(thobj, s_batch_skip, count * k) < 0))
            goto out;
        if (!(o[P_DRAINED] = call_method(tx, s_drain, &args[1], 1)))
            goto out;
        if (n > 0 && count_issued(tx, th, n))
            goto out;
    }
    result = PyLong_FromLongLong(a);
out:
    if (!result && !lw.in_ready) {             /* (an error after the push took effect: the queue as the reference's) */
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);
        if (lazy_fill_from(&lw, 0))
            PyErr_Clear();
        PyErr_Restore(et, ev, tb);
    }
    if (have_lists)
        tm_lists_release(&L);
    for (int i = 0; i < P_NUM; i++)
        Py_XDECREF(o[i]);
    return result;
#undef PGET
#undef NONE_IF
}
