/* batch_run: mop_batch.MopBatchMixin.batch_sfpu's steady case in C (included by sfpu_issue_native.c, whose attribute
 * helpers and interned names it uses). A MOP of identical REPLAYs puts K repetitions of one SFPU body in a thread's
 * ready queue; once batch_sfpu has run that body from the same address key and relative cycle-model state, every
 * analysis it makes is in its memos (the body's plan, the Dst address analysis, the timing memo, the C program), and
 * what is left is ~25 us of Python reading the state those memos are keyed by. batch_run reads the same state, looks
 * the same keys up, and where every look-up hits does what batch_sfpu's memo-hit path does: the cycle model advanced
 * by the timing memo, the RWCs by the repetitions' increments, the kept program run by sfpu_native.c's sfpu_run, the
 * words popped. Anything else (a miss, a refusal, deferred work queued, lane enables not cached, a blocked thread, a
 * timeline recorder, a structure not as expected) returns 0 with nothing changed, and batch_sfpu's Python, the
 * reference, takes the batch (tests/emu/test_mop_speed.py pins the two together). */

static PyObject *s_batch_plans, *s_batch_addr_cache, *s_batch_timing, *s_batch_programs, *s_batch_runs, *s_en_cache,
    *s_all_enabled, *s_flags_after, *s_lane_config_any, *s_lreg, *s_lane_flags, *s_use_lane_flags, *s_dst_name,
    *s_rows32, *s_fp32_enabled, *s_srcb_is_fp16, *s_cycle, *s_clear;

typedef int32_t (*sfpu_run_fn)(uint32_t *lreg, uint8_t *lane_flags, uint8_t *use_lane_flags, uint32_t *dst,
                               uint8_t *written, const int32_t *prog, int32_t n);
static sfpu_run_fn batch_sfpu_run;      /* sfpu_native.c's sfpu_run (configure_batch: its address in that library) */

static PyObject *configure_batch(PyObject *self, PyObject *args) {
    unsigned long long addr;
    if (!PyArg_ParseTuple(args, "K", &addr))
        return NULL;
    batch_sfpu_run = (sfpu_run_fn)(uintptr_t)addr;
    Py_RETURN_NONE;
}

static int batch_names(void) {
    name_ref names[] = {
        {&s_batch_plans, "_batch_plans"}, {&s_batch_addr_cache, "_batch_addr_cache"},
        {&s_batch_timing, "_batch_timing"}, {&s_batch_programs, "_batch_programs"}, {&s_batch_runs, "_batch_runs"},
        {&s_en_cache, "_en"}, {&s_all_enabled, "all_enabled"}, {&s_flags_after, "_flags_after"},
        {&s_lane_config_any, "lane_config_any"}, {&s_lreg, "lreg"}, {&s_lane_flags, "lane_flags"},
        {&s_use_lane_flags, "use_lane_flags"}, {&s_dst_name, "dst"}, {&s_rows32, "rows32"},
        {&s_fp32_enabled, "sfpu_fp32_enabled"}, {&s_srcb_is_fp16, "srcb_is_fp16"}, {&s_cycle, "cycle"},
        {&s_clear, "clear"},
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
    PyObject *a[N_BOUND] = {NULL}, *dst = get_attr(raw, s_dst_name);
    int r = -1;
    if (!dst || !(a[B_LREG] = get_attr(raw, s_lreg)) || !(a[B_LF] = get_attr(raw, s_lane_flags))
        || !(a[B_USE] = get_attr(raw, s_use_lane_flags)) || !(a[B_ROWS] = get_attr(dst, s_rows32))
        || !(a[B_WRITTEN] = get_attr(dst, s_written)))
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

enum { G_PLANS, G_BODY, G_PLAN, G_DQ, G_RAW, G_EN, G_ALLEN, G_SCHED, G_FAFTER, G_LCANY, G_CFG, G_THCFG, G_RWC, G_AKEY,
       G_STEPS, G_ADDRS, G_AN, G_STRICT, G_DSTRAW, G_WRITTEN, G_TM, G_BLOCKED, G_REC, G_ST, G_CLOCK, G_FE, G_FIRST,
       G_GATE, G_FPUW, G_STALLS, G_ISSUED, G_KEY3, G_TKEY, G_TIMING, G_MEMO, G_RESOLVED, G_BKEY, G_PROGRAMS, G_NATIVE,
       G_RKEY, G_RUNS, G_KEPT, G_CURRENT, G_N };

/* batch_run(tx, t, th, min_reps, max_words, native_min) -> n: the words batch_sfpu's memo-hit path executed (n > 0);
 * 0 where batch_sfpu refuses at once (fewer than min_reps repetitions: its first test); -1 where this declines (nothing
 * changed: batch_sfpu's Python decides); -2 - done where sfpu_run stopped at record `done` (the cycle model advanced;
 * the caller raises as sfpu_native.run_at does). */
static PyObject *batch_run(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    long long t, min_reps, max_words, native_min;
    if (nargs != 6 || get_ll(args[1], "thread", &t) || get_ll(args[3], "min_reps", &min_reps)
        || get_ll(args[4], "max_words", &max_words) || get_ll(args[5], "native_min", &native_min)) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "batch_run(tx, t, th, min_reps, max_words, native_min)");
        return NULL;
    }
    if (!batch_sfpu_run || t < 0 || t > 2 || max_words < 1 || max_words > 65536)
        return PyLong_FromLong(-1);
    PyObject *tx = args[0], *th = args[2], *g[G_N] = {NULL}, *ready = NULL, *result = NULL;
    long long declined = 0;
#define DECLINE do { PyErr_Clear(); declined = 1; goto out; } while (0)
#define NEED(cond) do { if (!(cond)) DECLINE; } while (0)
    /* the ready queue's period (find_period) and body */
    NEED(ready = get_attr(th, s_ready));
    Py_ssize_t n_words = first_words(ready, (Py_ssize_t)max_words), p, k;
    NEED(n_words >= 0);
    best_period(word_val, n_words, &p, &k);
    if (k < min_reps) {
        result = PyLong_FromLong(0);
        goto out;
    }
    NEED(g[G_BODY] = PyTuple_New(p));
    for (Py_ssize_t i = 0; i < p; i++)
        PyTuple_SET_ITEM(g[G_BODY], i, Py_NewRef(word_buf[i]));
    NEED((g[G_PLANS] = get_attr(tx, s_batch_plans)) && (g[G_PLAN] = dict_get(g[G_PLANS], g[G_BODY])));
    NEED(PyTuple_Check(g[G_PLAN]) && PyTuple_GET_SIZE(g[G_PLAN]) == 2);
    PyObject *entries = PyTuple_GET_ITEM(g[G_PLAN], 0), *mems = PyTuple_GET_ITEM(g[G_PLAN], 1);
    NEED(PyList_Check(entries) && PyList_GET_SIZE(entries) == p && PyList_Check(mems));
    Py_ssize_t nm = PyList_GET_SIZE(mems);
    NEED(nm <= 32);
    /* the SFPU as `self.sfpu` gives it with nothing deferred: lane enables cached, all on, the plain state */
    NEED((g[G_DQ] = get_attr(tx, s_deferred)) && PyObject_Length(g[G_DQ]) == 0);
    NEED((g[G_RAW] = get_attr(tx, s_raw_sfpu)) && (g[G_EN] = get_attr(g[G_RAW], s_en_cache)) && g[G_EN] != Py_None);
    NEED((g[G_ALLEN] = get_attr(g[G_RAW], s_all_enabled)) && PyObject_IsTrue(g[G_ALLEN]) == 1);
    NEED((g[G_SCHED] = get_attr(g[G_RAW], s_scheduled)) && PyObject_IsTrue(g[G_SCHED]) == 0);
    NEED((g[G_FAFTER] = get_attr(g[G_RAW], s_flags_after)) && g[G_FAFTER] == Py_None);
    NEED((g[G_LCANY] = get_attr(g[G_RAW], s_lane_config_any)) && PyObject_IsTrue(g[G_LCANY]) == 0);
    /* the loads' and stores' modes (sfpu_format_flags), the address modifiers' steps (addr_mod_steps) */
    long long c0, c1, v;
    NEED((g[G_CFG] = get_attr(tx, s_cfg)) && !list_int(g[G_CFG], 0, &c0) && !list_int(g[G_CFG], 1, &c1));
    int fp32 = (int)(c1 >> 30 & 1), srcb16 = srcb_fp16_like(c0, c1);
    NEED((g[G_THCFG] = get_attr(th, s_cfg)) && PyList_Check(g[G_THCFG]));
    NEED((g[G_RESOLVED] = PyTuple_New(nm)) && (g[G_STEPS] = PyTuple_New(nm)));
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
        PyObject *mo = PyLong_FromLongLong(m), *st = Py_BuildValue("(LLL)", ab & 0x3F, ab >> 8 & 0x3F, dm & 0x3FF);
        if (mo)
            PyTuple_SET_ITEM(g[G_RESOLVED], j, mo);
        if (st)
            PyTuple_SET_ITEM(g[G_STEPS], j, st);
        NEED(mo && st);
    }
    /* the Dst address analysis (batch_addrs) of (body, k, start address, steps) */
    long long base_cfg, rwc_d, per_rep[3];
    NEED(!list_int(g[G_THCFG], 1, &base_cfg) && (g[G_RWC] = get_attr(th, s_rwc)) && PyDict_Check(g[G_RWC]));
    PyObject *d_o = PyDict_GetItemWithError(g[G_RWC], s_d);
    NEED(d_o && PyLong_Check(d_o) && !get_ll(d_o, "RWC", &rwc_d));
    NEED(g[G_AKEY] = Py_BuildValue("(OnLO)", g[G_BODY], k, (base_cfg & 0xFFF) + rwc_d, g[G_STEPS]));
    NEED((g[G_ADDRS] = get_attr(tx, s_batch_addr_cache)) && (g[G_AN] = dict_get(g[G_ADDRS], g[G_AKEY])));
    NEED(PyTuple_Check(g[G_AN]) && PyTuple_GET_SIZE(g[G_AN]) == 3);
    PyObject *need_rows = PyTuple_GET_ITEM(g[G_AN], 1), *per = PyTuple_GET_ITEM(g[G_AN], 2);
    for (int j = 0; j < 3; j++)
        NEED(!tuple_int(per, j, &per_rep[j]));
    NEED((g[G_STRICT] = get_attr(tx, s_strict)));
    int strict = PyObject_IsTrue(g[G_STRICT]);
    NEED(strict >= 0);
    if (strict && need_rows != Py_None) {      /* a load must find the rows written before the batch */
        NEED((g[G_DSTRAW] = get_attr(tx, s_dst_raw)) && (g[G_WRITTEN] = get_attr(g[G_DSTRAW], s_written)));
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
    NEED((g[G_TM] = get_attr(tx, s_tm)) && (g[G_BLOCKED] = get_attr(th, s_blocked)) && g[G_BLOCKED] == Py_None);
    NEED((g[G_REC] = get_attr(g[G_TM], s_rec)) && g[G_REC] == Py_None);
    NEED((g[G_ST] = get_attr(g[G_TM], s_sfpu_timing)) && !timing_slots(g[G_ST]));
    NEED((g[G_CLOCK] = get_attr(g[G_TM], s_clock)) && (g[G_FE] = get_attr(g[G_TM], s_fe))
         && (g[G_FIRST] = get_attr(g[G_TM], s_first)) && (g[G_GATE] = get_attr(g[G_TM], s_gate))
         && (g[G_FPUW] = get_attr(g[G_TM], s_dst_fpu_write)) && (g[G_STALLS] = get_attr(g[G_TM], s_stalls))
         && (g[G_ISSUED] = get_attr(g[G_TM], s_issued)));
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
    PyObject *mad_state = Py_None;
    if (mad == b - 1) {
        PyObject *mad_writes = slot_obj(g[G_ST], T_MAD_WRITES), *mad_macro = slot_obj(g[G_ST], T_MAD_MACRO);
        mad_state = mad_writes && mad_macro ? PyTuple_Pack(2, mad_writes, mad_macro) : NULL;
        Py_XDECREF(mad_writes);
        Py_XDECREF(mad_macro);
    } else {
        Py_INCREF(mad_state);
    }
    NEED(mad_state);
    g[G_KEY3] = Py_BuildValue("(LON)", b - clock, nop == b ? Py_True : Py_False, mad_state);
    NEED(g[G_KEY3] && (g[G_TKEY] = Py_BuildValue("(OnOO)", g[G_BODY], k, g[G_KEY3], Py_False)));
    NEED((g[G_TIMING] = get_attr(tx, s_batch_timing)) && (g[G_MEMO] = dict_get(g[G_TIMING], g[G_TKEY])));
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
    NEED((g[G_BKEY] = PyTuple_Pack(2, g[G_BODY], g[G_RESOLVED])) && (g[G_PROGRAMS] = get_attr(tx, s_batch_programs))
         && (g[G_NATIVE] = dict_get(g[G_PROGRAMS], g[G_BKEY])) && PyTuple_Check(g[G_NATIVE]));
    NEED((g[G_RKEY] = PyTuple_Pack(2, g[G_AKEY], g[G_RESOLVED])) && (g[G_RUNS] = get_attr(tx, s_batch_runs))
         && (g[G_KEPT] = dict_get(g[G_RUNS], g[G_RKEY])));
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
    if (bad || set_attr(tx, s_current, g[G_CURRENT]) < 0 || set_attr_ll(tx, s_issue_t, c) < 0
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
    if (n == PyObject_Length(ready))
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
    Py_XDECREF(ready);
    for (int j = 0; j < G_N; j++)
        Py_XDECREF(g[j]);
    return result;
#undef NEED
#undef DECLINE
}
