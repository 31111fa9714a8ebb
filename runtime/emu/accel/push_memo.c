/* push_one's memo of a Tensix's deferral state (included by sfpu_issue_native.c, next to push_one).
 *
 * push_one reads some twenty attributes of the Tensix, its thread, its cycle model and the SFPU timing per pushed
 * word (about 3.6k of its 10.8k x86 instructions a word in bench emu's sfpu_long, callgrind) and all but a few are the
 * same objects from one word to the next. The memo keeps, per thread, those objects as a plain push found them (the
 * thread empty, no REPLAY load, no timeline, tm.issue not spied, work queued) and when they may be reused: while the
 * Tensix's and the cycle model's instance dicts have the version tags they had then (CPython's dict version, PEP 509:
 * globally unique, changed by every change of the dict, also by the interpreter's specialised attribute stores) and
 * the classes of the Tensix, thread, cycle model and SFPU timing have theirs (changed by any change of a class in the
 * MRO: a class attribute defined later, tests/emu/test_sfpu_issue_native.py). What can change without either is read
 * on every word: the thread (tx.threads[th]), its __slots__ (FIFO, ready queue, MOP output, REPLAY load, latch,
 * blocked), the latched wait's block mask (a slot of the latch class the memo was filled with), the SFPU timing's
 * `rec` slot, the queue's length, config words 0 and 1, and the cycle model's C state (timing_state.c: event_t read
 * there, issue_t and the instruction counts written there; the memo needs it, as the C issue of SFPU words does). The
 * objects are borrowed: the dicts hold them while their versions stand. push_fast answers with the memo or declines
 * (0: push_one's full path then runs, and fills the memo where it takes a word without Dst access). It takes an
 * SFPLOAD / SFPSTORE too, with the Dst access context read for the word (dst_access) and tx.current written (a slot
 * of the Tensix since w26; where a class keeps it in the dict, that change is followed: before, each Dst access went
 * the full path and its write of `current` sent the next word there too, 4 of the long body's 171 words cost ~1/12 of
 * its issue). TT_EMU_PUSH_MEMO_NATIVE=0 turns
 * it off (push_entry's switch). */

typedef struct {
    PyObject *tx, *txd, *tm, *tmd, *thobj, *stiming;
    PyObject **txdp, **tmdp;          /* where tx's and tm's dict pointers are (fixed for a fixed-size object) */
    uint64_t vtx, vtm;
    unsigned int tv_tx, tv_tm, tv_th, tv_st, tv_latch;
    PyTypeObject *latch_tp;           /* the latch's class (NULL: none was latched) and its `block` slot */
    Py_ssize_t block_off;
    PyObject *threads, *fast, *cword, *dq, *ctx, *cfg;
    ThreadTiming *ts;                 /* the cycle model's C state (tm's; also the Tensix's instruction counts') */
    Py_ssize_t off[6], rec_off;       /* ThreadState's fifo, ready, mop_out, replay_load, latch, blocked; rec */
    long long fl;                     /* the lane-flag code of tx._dq_flags */
} push_memo;
enum { PM_FIFO, PM_READY, PM_MOPOUT, PM_LOAD, PM_LATCH, PM_BLOCKED };
static push_memo push_memos[3];
static long long memo_taken, memo_filled;      /* words push_fast took, memos filled (push_memo_counts) */

/* collections.deque, the type of a thread's FIFO, ready queue and MOP output (push_memo_fill looks it up) */
static PyTypeObject *deque_type;

#define SLOT(o, off) (*(PyObject **)((char *)(o) + (off)))

/* o's instance dict where every name in names[0..n) is read from it by get_attr and written by set_attr (no class
 * defines it, generic get / set), else NULL; borrowed */
static PyObject *plain_dict_of(PyObject *o, PyObject *const *names, int n) {
    PyObject *dict = NULL;
    if (Py_TYPE(o)->tp_setattro != PyObject_GenericSetAttr)
        return NULL;
    for (int k = 0; k < n; k++) {
        PyObject *d, *dk = plain_dict(o, names[k], &d);
        if (!dk || (dict && dk != dict))
            return NULL;
        dict = dk;
    }
    return dict;
}

/* The memo of thread th filled from the Tensix as it is now, just after push_one took a word (fl: the flag code it
 * left), or cleared where that state is not the plain one push_fast takes. No error: where a read fails, it clears
 * the memo and the error. */
static void push_memo_fill(PyObject *tx, long long th, long long fl) {
    push_memo *m = &push_memos[th], z = {0};
    *m = z;
    /* (all read below; `current`, written by a Dst access, is not among them: tensix.py keeps it in a slot) */
    PyObject *txn[] = {s_threads, s_fast, s_cword, s_tm, s_deferred, s_c_ctx, s_cfg, s_instructions, s_dq_flags};
    PyObject *tmn[] = {s_rec, s_sfpu_timing, s_clock};
    PyObject *txd = DICT_TAGS ? plain_dict_of(tx, txn, 9) : NULL;     /* (no tags: no memo) */
    if (!txd)
        goto clear;
    if (!deque_type) {
        PyObject *collections = PyImport_ImportModule("collections");
        PyObject *dq_tp = collections ? PyObject_GetAttrString(collections, "deque") : NULL;
        Py_XDECREF(collections);
        if (!dq_tp || !PyType_Check(dq_tp)) {
            Py_XDECREF(dq_tp);
            goto clear;
        }
        deque_type = (PyTypeObject *)dq_tp;        /* (kept: a reference held for the module's life) */
    }
    PyObject *v[9];
    for (int k = 0; k < 9; k++)
        if (!(v[k] = PyDict_GetItemWithError(txd, txn[k])))
            goto clear;
    PyObject *threads = v[0], *tm = v[3], *ctx = v[5];
    if (!PyList_CheckExact(threads) || PyList_GET_SIZE(threads) <= th || !PyDict_CheckExact(v[1])
        || !PyDict_CheckExact(v[2]) || !dq_is_queue(v[4]) || !PyTuple_CheckExact(ctx) || PyTuple_GET_SIZE(ctx) != 9
        || !PyList_CheckExact(v[6]) || PyList_GET_SIZE(v[6]) < 2 || !(m->ts = tm_state(tm))
        || row_state(v[7]) != m->ts || ((TimingRow *)v[7])->row != ROW_INSTRUCTIONS)
        goto clear;
    PyObject *thobj = PyList_GET_ITEM(threads, th), *tmd = plain_dict_of(tm, tmn, 3);
    if (!tmd || PyDict_Contains(tmd, s_issue) != 0)
        goto clear;
    PyObject *tv[3];
    for (int k = 0; k < 3; k++)
        if (!(tv[k] = PyDict_GetItemWithError(tmd, tmn[k])))
            goto clear;
    if (tv[0] != Py_None || PyTuple_GET_ITEM(ctx, 0) != tv[2])
        goto clear;
    PyObject *thn[6] = {s_fifo, s_ready, s_mop_out, s_replay_load, s_latch, s_blocked};
    for (int k = 0; k < 6; k++)
        if ((m->off[k] = slot_offset(Py_TYPE(thobj), thn[k])) < 0)
            goto clear;
    PyObject *st = tv[1];
    PyObject *latch = SLOT(thobj, m->off[PM_LATCH]);
    if ((m->rec_off = slot_offset(Py_TYPE(st), s_rec)) < 0 || SLOT(thobj, m->off[PM_LOAD]) != Py_None || !latch)
        goto clear;
    if (latch != Py_None) {
        m->latch_tp = Py_TYPE(latch);
        if ((m->block_off = slot_offset(m->latch_tp, s_block)) < 0 || !(m->tv_latch = type_tag(m->latch_tp)))
            goto clear;
    }
    if (Py_TYPE(tx)->tp_itemsize || Py_TYPE(tm)->tp_itemsize || !(m->txdp = _PyObject_GetDictPtr(tx))
        || !(m->tmdp = _PyObject_GetDictPtr(tm)))
        goto clear;                /* (a variable-size object's dict pointer moves with its size) */
    m->txd = txd, m->tm = tm, m->tmd = tmd, m->thobj = thobj, m->stiming = st;
    m->threads = threads, m->fast = v[1], m->cword = v[2], m->dq = v[4], m->ctx = ctx, m->cfg = v[6];
    m->fl = fl;
    m->tv_tx = type_tag(Py_TYPE(tx)), m->tv_tm = type_tag(Py_TYPE(tm)), m->tv_th = type_tag(Py_TYPE(thobj));
    m->tv_st = type_tag(Py_TYPE(st));
    if (!m->tv_tx || !m->tv_tm || !m->tv_th || !m->tv_st)
        goto clear;
    m->vtx = dict_version(txd), m->vtm = dict_version(tmd);
    m->tx = tx;
    memo_filled++;
    return;
clear:
    *m = z;
    PyErr_Clear();
}

/* A word's facts (tx._fast[word]) and C facts (tx._cword[word], NULL: none) by its value: two dict look-ups of an
 * int key cost some 550 instructions a word (SFPU words differ mostly in their high bits, and the dicts' slots are
 * chosen by the low ones). Open addressing over 4 slots (a long body has some 140 distinct words); valid while both
 * dicts are the ones it was filled from with the version tags they had then (they change when a word is first
 * decoded or the SFPU is replaced), emptied otherwise, by a new epoch (a slot of an older one is free: the memset of
 * the table had cost sfpu_long ~9 instructions a word, its dicts' tags change some four times a tile). The objects
 * are borrowed: the dicts hold them. */
#define WORD_MEMO 512      /* (a power of 2) */
#define WORD_PROBES 4
typedef struct { uint32_t w; PyObject *fast, *rec; uint64_t epoch; } word_entry;
static struct {
    PyObject *fastd, *cwordd;
    uint64_t vf, vc, epoch;         /* (the slots start in epoch 0, the first fill makes it 1) */
    word_entry e[WORD_MEMO];
} word_memo;

/* the entry of word w (fast NULL: an error set) */
static word_entry word_facts_of(PyObject *fastd, PyObject *cwordd, PyObject *word, uint32_t w) {
    word_entry miss = {0};
    if (word_memo.fastd != fastd || word_memo.cwordd != cwordd || dict_version(fastd) != word_memo.vf
        || dict_version(cwordd) != word_memo.vc) {
        word_memo.epoch++;
        word_memo.fastd = fastd, word_memo.cwordd = cwordd;
        word_memo.vf = dict_version(fastd), word_memo.vc = dict_version(cwordd);
    }
    uint32_t k = (uint32_t)(w * 0x9E3779B1u) >> 23;
    word_entry *e = NULL;
    for (int j = 0; j < WORD_PROBES; j++) {
        word_entry *x = &word_memo.e[(k + j) % WORD_MEMO];
        if (x->epoch != word_memo.epoch) {
            e = x;
            break;
        }
        if (x->w == w)
            return *x;
    }
    PyObject *fast = PyDict_GetItemWithError(fastd, word), *rec = fast ? PyDict_GetItemWithError(cwordd, word) : NULL;
    if (!fast || (!rec && PyErr_Occurred())) {
        if (!PyErr_Occurred())      /* (no facts yet: push_one's full path, not an error) */
            miss.fast = Py_None;
        return miss;
    }
    word_entry found = {w, fast, rec, word_memo.epoch};
    if (e)                          /* (all four slots taken: not kept) */
        *e = found;
    return found;
}

/* whether a thread's word queue q holds words (1), 0 empty, -1 with an error set; an unset slot counts as busy (the
 * full path then decides). A list's or deque's length is its object's size field (CPython's deque keeps it there, as
 * its len() reads it): PyObject_IsTrue's protocol walk costs more than the rest of the test. */
static int queue_busy(PyObject *q) {
    if (!q)
        return 1;
    if ((deque_type && Py_IS_TYPE(q, deque_type)) || PyList_CheckExact(q))
        return Py_SIZE(q) != 0;
    return PyObject_IsTrue(q);
}

/* the memo of thread th, where it still describes tx (the checks above), else NULL */
static push_memo *push_memo_valid(PyObject *tx, long long th) {
    push_memo *m = &push_memos[th];
    if (m->tx != tx || type_tag(Py_TYPE(tx)) != m->tv_tx)
        return NULL;
    if (*m->txdp != m->txd || dict_version(m->txd) != m->vtx)      /* (the same object: its dict pointer's place) */
        return NULL;
    if (PyList_GET_SIZE(m->threads) <= th || PyList_GET_ITEM(m->threads, th) != m->thobj
        || type_tag(Py_TYPE(m->thobj)) != m->tv_th || type_tag(Py_TYPE(m->tm)) != m->tv_tm)
        return NULL;
    if (*m->tmdp != m->tmd || dict_version(m->tmd) != m->vtm || type_tag(Py_TYPE(m->stiming)) != m->tv_st)
        return NULL;
    return m;
}

/* push_one's case through the memo: 1 with *result push()'s return value, 0 declined (nothing changed: push_one's
 * full path decides), -1 with an error set */
static int push_fast(PyObject *tx, long long th, PyObject *thread_o, PyObject *word, uint32_t w, PyObject *t_o,
                     PyObject *dq_max, PyObject **result) {
    push_memo *m = push_memo_valid(tx, th);
    if (!m)
        return 0;
    PyObject *thobj = m->thobj;
    for (int k = PM_FIFO; k <= PM_MOPOUT; k++) {
        int busy = queue_busy(SLOT(thobj, m->off[k]));
        if (busy)
            return busy < 0 ? -1 : 0;
    }
    PyObject *rec = SLOT(m->stiming, m->rec_off), *blocked = SLOT(thobj, m->off[PM_BLOCKED]);
    PyObject *latch = SLOT(thobj, m->off[PM_LATCH]), *lb = NULL;
    if (SLOT(thobj, m->off[PM_LOAD]) != Py_None || !latch || rec != Py_None || !blocked || !DQ_SIZE(m->dq)
        || PyList_GET_SIZE(m->cfg) < 2)
        return 0;
    long long latch_block = 0;
    if (latch != Py_None) {              /* (a latch of another class than the memo's: push_one's full path) */
        if (Py_TYPE(latch) != m->latch_tp || type_tag(m->latch_tp) != m->tv_latch
            || !(lb = SLOT(latch, m->block_off)))
            return 0;
        if (get_ll(lb, "latch block", &latch_block))
            return -1;
    }
    word_entry facts = word_facts_of(m->fast, m->cword, word, w);
    PyObject *fast = facts.fast;
    if (!fast)
        return -1;
    if (!facts.rec || !PyTuple_Check(fast) || PyTuple_GET_SIZE(fast) != 7)
        return 0;               /* (not deferrable or no C facts: push_one's full path) */
    int is_mem = PyTuple_GET_ITEM(fast, 2) == Py_True;
    if (!is_mem && PyTuple_GET_ITEM(fast, 2) != Py_False)
        return 0;
    PyObject *c0 = Py_NewRef(PyList_GET_ITEM(m->cfg, 0)), *c1 = Py_NewRef(PyList_GET_ITEM(m->cfg, 1)), *r = NULL;
    PyObject *mem = NULL;
    run_io io;                  /* the run's integer arguments as C values (each input set: no zeroing of the rest) */
    io.rec0 = facts.rec, io.c_in = 1, io.was_blocked = blocked != Py_None, io.th = th, io.j = 0;
    io.fl = m->fl, io.latch_block = latch_block;
    io.event_t = m->ts->event_t;
    if (!get_ll(t_o, "t", &io.t)
        && !get_ll(dq_max, "dq_max", &io.dq_max) && !get_ll(c0, "cfg0", &io.cfg0) && !get_ll(c1, "cfg1", &io.cfg1)
        && (!is_mem || (mem = dst_access(tx, thobj, m->tm, io.cfg0, io.cfg1)))) {
        PyObject *all[16] = {m->ctx, word, NULL, NULL, NULL, m->cword, m->dq, NULL, c0, c1, thread_o, NULL, NULL, NULL,
                             NULL, is_mem ? mem : Py_None};
        r = sfpu_run_body(all, 16, 1, 1, &io);
    }
    Py_DECREF(c0);
    Py_DECREF(c1);
    Py_XDECREF(mem);
    if (!r)
        return -1;
    if (r == Py_None) {
        Py_DECREF(r);
        return 0;
    }
    /* push()'s epilogue (push_one's): issue_t, the flag state, the Dst access named for errors, unblocked, counted;
     * the memo follows its own writes */
    Py_DECREF(r);
    int unchanged = dict_version(m->txd) == m->vtx;      /* (the run changed nothing in the dict: re-armed below) */
    long long fl = io.fl;
    int bad = fl < 0 || fl > 8;
    if (bad)
        PyErr_SetString(PyExc_ValueError, "issue_run: a lane-flag state out of range");
    bad = bad || (fl != m->fl && PyDict_SetItem(m->txd, s_dq_flags, flag_states[fl]) < 0);   /* (else: equal, kept) */
    bad = bad || (is_mem && set_current(tx, thread_o, word, PyTuple_GET_ITEM(fast, 0)));
    if (!bad) {
        m->ts->issue_t = io.last_c;
        Py_SETREF(SLOT(thobj, m->off[PM_BLOCKED]), Py_NewRef(Py_None));
        m->ts->instructions[th]++;
    }
    if (bad) {
        m->tx = NULL;
        return -1;
    }
    if (unchanged)
        m->vtx = dict_version(m->txd);
    else
        m->tx = NULL;
    m->fl = fl;
    memo_taken++;
    *result = PyLong_FromLongLong(io.t - 1);
    return *result ? 1 : -1;
}

/* push_memo_counts(): (words push_fast took, memos filled) since the module was loaded: tests see the memo used */
static PyObject *push_memo_counts(PyObject *self, PyObject *unused) {
    return Py_BuildValue("(LL)", memo_taken, memo_filled);
}
