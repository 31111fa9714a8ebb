/* The cycle model's state the C issue reads and writes on every word, held in C (included by sfpu_issue_native.c;
 * the base of the cycle model class sfpu_issue_native.tensix_timing_class() makes with cycles.TensixTiming).
 *
 * TensixTiming's clock, fe, gate, after_mop, first, stalls and issued (one entry per Tensix thread) and taken (per
 * thread, when the last `depth` words left the FIFO) are read and written by the C issue on every pushed SFPU word;
 * its event_t, fpu_busy, pack_busy, nop_t, unpack_busy (per unpacker) and work_done (per thread), and the Tensix's
 * instruction counts (per thread) and issue_t, by the C issue of every plain word (plain_word) or pushed word
 * (push_fast).
 * Kept in Python lists, deques and instance attributes, those reads and writes were most of sfpu_run_io's cost
 * (callgrind of bench emu's sfpu_long: some 1.8k of its 3k x86 instructions a word converting ints and calling list /
 * deque methods) and some 170 instructions an attribute in plain_word (matmul256). Here they live in one C struct per
 * cycle model (ThreadTiming), which the C issue reads and writes directly; Python sees the scalars as int members of
 * the cycle model and the rest through views with the lists' and deques' semantics for what the cycle model does with
 * them: TimingRow (a fixed list of 3, or of 2 for unpack_busy: item get / set, len, iteration, == and repr as a list;
 * gate's items are (mask, until) pairs, first's an int or None, after_mop's bools) and TakenRing (a deque with maxlen
 * `depth` for len, item get, iteration and append; == and repr as a list, not as a deque: the cycle model and the
 * tests compare list(ring)). The views hold the cycle model (the Tensix's Python attributes hold them: a cycle the
 * garbage collector sees through their tp_traverse). TT_EMU_TIMING_NATIVE=0 keeps the lists and plain int attributes
 * (cycles.py's reference; the C issue of SFPU words, sfpu_run_io under issue_run, push_word and ready_run, then
 * declines).
 */

enum { TIMING_BOUND = 8 };
enum { ROW_CLOCK, ROW_FE, ROW_STALLS, ROW_ISSUED, ROW_FIRST, ROW_AFTER_MOP, ROW_GATE, ROW_UNPACK_BUSY, ROW_WORK_DONE,
       ROW_INSTRUCTIONS, N_ROWS };

typedef struct {
    PyObject_HEAD
    long long clock[3], fe[3], stalls[3], issued[3], first[3], gate_mask[3], gate_until[3];
    char has_first[3], after_mop[3];
    long long taken[3][MAX_DEPTH];     /* ring buffers: taken[th][(taken_head[th] + i) % depth] is the i-th oldest */
    int taken_head[3], taken_len[3], depth;
    long long event_t, fpu_busy, pack_busy, nop_t;     /* TensixTiming's scalars (its int members) */
    long long unpack_busy[2], work_done[3];
    long long instructions[3];                         /* the Tensix's words executed per thread */
    long long issue_t;                                 /* the Tensix's issue cycle of the word being executed */
    /* the attributes of the cycle model plain_run and drain_run read on every call (clock, fe, gate, after_mop,
     * first, stalls, issued: the views, and taken: the list of rings), as tm_lists_get read them last (strong
     * references: the model and its views form a cycle the garbage collector sees through timing_traverse) */
    PyObject *bound[TIMING_BOUND];
} ThreadTiming;

typedef struct {
    PyObject_HEAD
    ThreadTiming *s;
    int row;
} TimingRow;

typedef struct {
    PyObject_HEAD
    ThreadTiming *s;
    int th;
} TakenRing;

static PyTypeObject ThreadTiming_Type, TimingRow_Type, TakenRing_Type;

/* the int64 array of an integer row (clock, fe, stalls, issued; first's values, gate's until) */
static long long *row_ints(ThreadTiming *s, int row) {
    switch (row) {
    case ROW_CLOCK: return s->clock;
    case ROW_FE: return s->fe;
    case ROW_STALLS: return s->stalls;
    case ROW_ISSUED: return s->issued;
    case ROW_FIRST: return s->first;
    case ROW_UNPACK_BUSY: return s->unpack_busy;
    case ROW_WORK_DONE: return s->work_done;
    case ROW_INSTRUCTIONS: return s->instructions;
    default: return s->gate_until;
    }
}

/* the row's length: one entry per thread, per unpacker for unpack_busy */
static Py_ssize_t row_n(int row) {
    return row == ROW_UNPACK_BUSY ? 2 : 3;
}

/* The Vector Unit's timing state (cycles.SfpuTiming's mad_cycle, mad_writes, mad_macro, nop_only_cycle and
 * busy_until, read and written by the C issue on every SFPU word) as C members: SfpuTimingState is the base of the
 * class sfpu_issue_native.sfpu_timing_class() makes with cycles.SfpuTimingRules (its methods) and the other slots. */
typedef struct {
    PyObject_HEAD
    long long mad_cycle, mad_writes, nop_only_cycle, busy_until;
    char mad_macro;
} SfpuTimingState;

static PyMemberDef sfpu_state_members[] = {
    {"mad_cycle", T_LONGLONG, offsetof(SfpuTimingState, mad_cycle), 0, "issue cycle of the last MAD-class instruction"},
    {"mad_writes", T_LONGLONG, offsetof(SfpuTimingState, mad_writes), 0, "its destination LRegs"},
    {"mad_macro", T_BOOL, offsetof(SfpuTimingState, mad_macro), 0, "it was scheduled by SFPLOADMACRO"},
    {"nop_only_cycle", T_LONGLONG, offsetof(SfpuTimingState, nop_only_cycle), 0, "the cycle only SFPNOP is taken on"},
    {"busy_until", T_LONGLONG, offsetof(SfpuTimingState, busy_until), 0, "the cycle the SFPU has no work left after"},
    {NULL},
};

static PyTypeObject SfpuTimingState_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "sfpu_issue.SfpuTimingState",
    .tp_basicsize = sizeof(SfpuTimingState),
    .tp_new = PyType_GenericNew,
    .tp_members = sfpu_state_members,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "the Vector Unit's timing state as C members (see timing_state.c)",
};

/* ---------------------------------------------------------------------------------------------- TimingRow */
static Py_ssize_t row_len(PyObject *self) {
    return row_n(((TimingRow *)self)->row);
}

static PyObject *row_item(PyObject *self, Py_ssize_t i) {
    TimingRow *r = (TimingRow *)self;
    ThreadTiming *s = r->s;
    if (i < 0 || i >= row_n(r->row)) {
        PyErr_SetString(PyExc_IndexError, "list index out of range");
        return NULL;
    }
    switch (r->row) {
    case ROW_FIRST:
        return s->has_first[i] ? PyLong_FromLongLong(s->first[i]) : Py_NewRef(Py_None);
    case ROW_AFTER_MOP:
        return PyBool_FromLong(s->after_mop[i]);
    case ROW_GATE:
        return Py_BuildValue("(LL)", s->gate_mask[i], s->gate_until[i]);
    default:
        return PyLong_FromLongLong(row_ints(s, r->row)[i]);
    }
}

static int int_value(PyObject *v, long long *out) {
    if (!PyLong_Check(v)) {
        PyErr_Format(PyExc_TypeError, "a cycle-model entry takes an int, not %.100s", Py_TYPE(v)->tp_name);
        return -1;
    }
    *out = PyLong_AsLongLong(v);
    return *out == -1 && PyErr_Occurred() ? -1 : 0;
}

static int row_ass_item(PyObject *self, Py_ssize_t i, PyObject *v) {
    TimingRow *r = (TimingRow *)self;
    ThreadTiming *s = r->s;
    if (i < 0 || i >= row_n(r->row)) {
        PyErr_SetString(PyExc_IndexError, "list assignment index out of range");
        return -1;
    }
    if (!v) {
        PyErr_SetString(PyExc_TypeError, "a cycle-model row has a fixed length");
        return -1;
    }
    switch (r->row) {
    case ROW_FIRST:
        if (v == Py_None) {
            s->has_first[i] = 0;
            return 0;
        }
        if (int_value(v, &s->first[i]))
            return -1;
        s->has_first[i] = 1;
        return 0;
    case ROW_AFTER_MOP: {
        int b = PyObject_IsTrue(v);
        if (b < 0)
            return -1;
        s->after_mop[i] = (char)b;
        return 0;
    }
    case ROW_GATE: {
        long long mask, until;
        PyObject *p = PySequence_Fast(v, "a Wait Gate entry is a (mask, until) pair");
        if (!p)
            return -1;
        int bad = PySequence_Fast_GET_SIZE(p) != 2;
        if (bad)
            PyErr_SetString(PyExc_TypeError, "a Wait Gate entry is a (mask, until) pair");
        bad = bad || int_value(PySequence_Fast_GET_ITEM(p, 0), &mask)
              || int_value(PySequence_Fast_GET_ITEM(p, 1), &until);
        Py_DECREF(p);
        if (bad)
            return -1;
        s->gate_mask[i] = mask, s->gate_until[i] = until;
        return 0;
    }
    default:
        return int_value(v, &row_ints(s, r->row)[i]);
    }
}

/* == and != (and the orderings) as the list it stands for */
static PyObject *as_list_compare(PyObject *self, PyObject *other, int op) {
    PyObject *a = PySequence_List(self), *b = NULL, *r = NULL;
    if (a && (Py_IS_TYPE(other, &TimingRow_Type) || Py_IS_TYPE(other, &TakenRing_Type)))
        b = PySequence_List(other);
    else if (a)
        b = Py_NewRef(other);
    if (b)
        r = PyObject_RichCompare(a, b, op);
    Py_XDECREF(a);
    Py_XDECREF(b);
    return r;
}

static PyObject *as_list_repr(PyObject *self) {
    PyObject *a = PySequence_List(self), *r = a ? PyObject_Repr(a) : NULL;
    Py_XDECREF(a);
    return r;
}

/* a view holds its state, which may be the cycle model whose attribute it is: the collector follows that reference */
static int row_traverse(PyObject *self, visitproc visit, void *arg) {
    Py_VISIT(((TimingRow *)self)->s);
    return 0;
}

static void row_dealloc(PyObject *self) {
    PyObject_GC_UnTrack(self);
    Py_XDECREF(((TimingRow *)self)->s);
    PyObject_GC_Del(self);
}

static PySequenceMethods row_seq = {.sq_length = row_len, .sq_item = row_item, .sq_ass_item = row_ass_item};

static PyTypeObject TimingRow_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "sfpu_issue.TimingRow",
    .tp_basicsize = sizeof(TimingRow),
    .tp_dealloc = row_dealloc,
    .tp_traverse = row_traverse,
    .tp_as_sequence = &row_seq,
    .tp_hash = PyObject_HashNotImplemented,
    .tp_richcompare = as_list_compare,
    .tp_repr = as_list_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "one row of the cycle model's C state (per thread, or per unpacker: unpack_busy), seen as a list",
};

/* ---------------------------------------------------------------------------------------------- TakenRing */
static Py_ssize_t ring_len(PyObject *self) {
    TakenRing *q = (TakenRing *)self;
    return q->s->taken_len[q->th];
}

static PyObject *ring_item(PyObject *self, Py_ssize_t i) {
    TakenRing *q = (TakenRing *)self;
    ThreadTiming *s = q->s;
    if (i < 0 || i >= s->taken_len[q->th]) {
        PyErr_SetString(PyExc_IndexError, "deque index out of range");
        return NULL;
    }
    return PyLong_FromLongLong(s->taken[q->th][(s->taken_head[q->th] + i) % s->depth]);
}

/* the ring of thread th keeps the newest `depth` values: v goes in, the oldest out when it is full */
static void ring_push(ThreadTiming *s, int th, long long v) {
    /* (head < depth and len <= depth: the wrap is one subtraction, not a division, which the C issue had paid for
     * every SFPU word it issued) */
    int head = s->taken_head[th], len = s->taken_len[th], depth = s->depth;
    if (len == depth) {
        s->taken[th][head] = v;
        s->taken_head[th] = head + 1 == depth ? 0 : head + 1;
    } else {
        s->taken[th][head + len >= depth ? head + len - depth : head + len] = v;
        s->taken_len[th]++;
    }
}

static PyObject *ring_append(PyObject *self, PyObject *v) {
    TakenRing *q = (TakenRing *)self;
    long long x;
    if (int_value(v, &x))
        return NULL;
    ring_push(q->s, q->th, x);
    Py_RETURN_NONE;
}

static PyObject *ring_maxlen(PyObject *self, void *unused) {
    return PyLong_FromLong(((TakenRing *)self)->s->depth);
}

static int ring_traverse(PyObject *self, visitproc visit, void *arg) {
    Py_VISIT(((TakenRing *)self)->s);
    return 0;
}

static void ring_dealloc(PyObject *self) {
    PyObject_GC_UnTrack(self);
    Py_XDECREF(((TakenRing *)self)->s);
    PyObject_GC_Del(self);
}

static PySequenceMethods ring_seq = {.sq_length = ring_len, .sq_item = ring_item};
static PyMethodDef ring_methods[] = {
    {"append", ring_append, METH_O, "append(v): v is the newest; the oldest leaves a full ring"},
    {NULL, NULL, 0, NULL},
};
static PyGetSetDef ring_getset[] = {{"maxlen", ring_maxlen, NULL, "the ring's capacity", NULL}, {NULL}};

static PyTypeObject TakenRing_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "sfpu_issue.TakenRing",
    .tp_basicsize = sizeof(TakenRing),
    .tp_dealloc = ring_dealloc,
    .tp_traverse = ring_traverse,
    .tp_as_sequence = &ring_seq,
    .tp_methods = ring_methods,
    .tp_getset = ring_getset,
    .tp_hash = PyObject_HashNotImplemented,
    .tp_richcompare = as_list_compare,
    .tp_repr = as_list_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_SEQUENCE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "when the last `maxlen` words left a thread's FIFO, oldest first (a deque with maxlen, in C)",
};

/* ---------------------------------------------------------------------------------------------- ThreadTiming */
static PyObject *timing_new(PyTypeObject *tp, PyObject *args, PyObject *kw) {
    int d;
    if (!PyArg_ParseTuple(args, "i", &d))
        return NULL;
    if (d < 1 || d > MAX_DEPTH) {
        PyErr_Format(PyExc_ValueError, "ThreadTiming: FIFO depth %d outside 1..%d", d, MAX_DEPTH);
        return NULL;
    }
    ThreadTiming *s = (ThreadTiming *)tp->tp_alloc(tp, 0);      /* (zeroed: the cycle model's initial state) */
    if (s)
        s->depth = d;
    return (PyObject *)s;
}

/* rows(): (clock, fe, gate, after_mop, first, stalls, issued, taken, unpack_busy, work_done, instructions): the views
 * the cycle model binds (taken a list of the three threads' rings; instructions the Tensix's) */
static PyObject *timing_rows(PyObject *self, PyObject *unused) {
    static const int order[] = {ROW_CLOCK, ROW_FE, ROW_GATE, ROW_AFTER_MOP, ROW_FIRST, ROW_STALLS, ROW_ISSUED,
                                ROW_UNPACK_BUSY, ROW_WORK_DONE, ROW_INSTRUCTIONS};
    enum { N_ORDER = sizeof order / sizeof order[0], TAKEN_AT = 7 };
    PyObject *out = PyTuple_New(N_ORDER + 1), *taken = PyList_New(3);
    if (!out || !taken)
        goto fail;
    for (int k = 0; k < N_ORDER; k++) {
        TimingRow *r = PyObject_GC_New(TimingRow, &TimingRow_Type);
        if (!r)
            goto fail;
        r->s = (ThreadTiming *)Py_NewRef(self), r->row = order[k];
        PyObject_GC_Track(r);
        PyTuple_SET_ITEM(out, k < TAKEN_AT ? k : k + 1, (PyObject *)r);
    }
    for (int th = 0; th < 3; th++) {
        TakenRing *q = PyObject_GC_New(TakenRing, &TakenRing_Type);
        if (!q)
            goto fail;
        q->s = (ThreadTiming *)Py_NewRef(self), q->th = th;
        PyObject_GC_Track(q);
        PyList_SET_ITEM(taken, th, (PyObject *)q);
    }
    PyTuple_SET_ITEM(out, TAKEN_AT, taken);
    return out;
fail:
    Py_XDECREF(out);
    Py_XDECREF(taken);
    return NULL;
}

static int timing_traverse(PyObject *self, visitproc visit, void *arg) {
    ThreadTiming *s = (ThreadTiming *)self;
    for (int i = 0; i < TIMING_BOUND; i++)
        Py_VISIT(s->bound[i]);
    return 0;
}

static int timing_clear(PyObject *self) {
    ThreadTiming *s = (ThreadTiming *)self;
    for (int i = 0; i < TIMING_BOUND; i++)
        Py_CLEAR(s->bound[i]);
    return 0;
}

static void timing_dealloc(PyObject *self) {
    PyObject_GC_UnTrack(self);
    timing_clear(self);
    Py_TYPE(self)->tp_free(self);
}

/* TensixTiming's scalars, as its int attributes */
static PyMemberDef timing_members[] = {
    {"event_t", T_LONGLONG, offsetof(ThreadTiming, event_t), 0, "latest cycle a semaphore / Src bank / mutex changed"},
    {"fpu_busy", T_LONGLONG, offsetof(ThreadTiming, fpu_busy), 0, "the cycle the FPU is busy until"},
    {"pack_busy", T_LONGLONG, offsetof(ThreadTiming, pack_busy), 0, "the cycle the packer is busy until"},
    {"nop_t", T_LONGLONG, offsetof(ThreadTiming, nop_t), 0, "issue cycle of the latest UNPACR_NOP"},
    {"issue_t", T_LONGLONG, offsetof(ThreadTiming, issue_t), 0, "the Tensix's: issue cycle of the word executed"},
    {NULL},
};

static PyMethodDef timing_methods[] = {
    {"rows", timing_rows, METH_NOARGS,
     "(clock, fe, gate, after_mop, first, stalls, issued, taken, unpack_busy, work_done, instructions) as views"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject ThreadTiming_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "sfpu_issue.ThreadTiming",
    .tp_basicsize = sizeof(ThreadTiming),
    .tp_new = timing_new,
    .tp_methods = timing_methods,
    .tp_members = timing_members,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = timing_traverse,
    .tp_clear = timing_clear,
    .tp_dealloc = timing_dealloc,
    .tp_doc = "ThreadTiming(depth): the cycle model's issue state in C: per thread and the Tensix's scalars (see timing_state.c)",
};

static int timing_state_init(PyObject *m) {
    if (PyType_Ready(&ThreadTiming_Type) < 0 || PyType_Ready(&TimingRow_Type) < 0
        || PyType_Ready(&TakenRing_Type) < 0 || PyType_Ready(&SfpuTimingState_Type) < 0)
        return -1;
    return PyModule_AddObjectRef(m, "ThreadTiming", (PyObject *)&ThreadTiming_Type) < 0
           || PyModule_AddObjectRef(m, "SfpuTimingState", (PyObject *)&SfpuTimingState_Type) < 0 ? -1 : 0;
}

/* ------------------------------------------------------------- the other C readers' access (lists or views) */
/* the C state `row` (a TensixTiming attribute) is a view of, or NULL: a Python list (TT_EMU_TIMING_NATIVE=0) */
static ThreadTiming *row_state(PyObject *row) {
    return Py_IS_TYPE(row, &TimingRow_Type) ? ((TimingRow *)row)->s : NULL;
}

/* the C state of the cycle model tm (the class tensix_timing_class() makes), or NULL: its state is Python's */
static ThreadTiming *tm_state(PyObject *tm) {
    return PyObject_TypeCheck(tm, &ThreadTiming_Type) ? (ThreadTiming *)tm : NULL;
}

/* gate[i] of a view or of a list of pairs: 0, or -1 with an error set */
static int gate_pair(PyObject *gate_l, Py_ssize_t i, long long *mask, long long *until) {
    ThreadTiming *s = row_state(gate_l);
    if (s) {
        *mask = s->gate_mask[i], *until = s->gate_until[i];
        return 0;
    }
    PyObject *g = PyList_GetItem(gate_l, i);
    if (!g)
        return -1;
    if (!PyTuple_Check(g) || PyTuple_GET_SIZE(g) != 2) {
        PyErr_SetString(PyExc_TypeError, "a Wait Gate entry is not a pair");
        return -1;
    }
    *mask = PyLong_AsLongLong(PyTuple_GET_ITEM(g, 0));
    *until = PyLong_AsLongLong(PyTuple_GET_ITEM(g, 1));
    return PyErr_Occurred() ? -1 : 0;
}

/* an integer row's item i of a view (row_state(row) is s): 0, or -1 with an error set (an unset `first`, gate) */
static int row_ll(ThreadTiming *s, PyObject *row, Py_ssize_t i, long long *out) {
    int k = ((TimingRow *)row)->row;
    if (i < 0 || i >= row_n(k) || k == ROW_GATE || (k == ROW_FIRST && !s->has_first[i])) {
        PyErr_SetString(PyExc_TypeError, "sfpu_issue: a cycle-model item is not an integer");
        return -1;
    }
    *out = k == ROW_AFTER_MOP ? s->after_mop[i] : row_ints(s, k)[i];
    return 0;
}

static int row_set_ll(ThreadTiming *s, PyObject *row, Py_ssize_t i, long long v) {
    int k = ((TimingRow *)row)->row;
    if (i < 0 || i >= row_n(k) || k == ROW_GATE) {
        PyErr_SetString(PyExc_TypeError, "sfpu_issue: not an integer item of the cycle model");
        return -1;
    }
    if (k == ROW_AFTER_MOP)
        s->after_mop[i] = v != 0;
    else
        row_ints(s, k)[i] = v;
    if (k == ROW_FIRST)
        s->has_first[i] = 1;
    return 0;
}

/* the C state of the ring q (a view of taken[th], *th set to its thread), or NULL: q is a Python deque
 * (TT_EMU_TIMING_NATIVE=0). fifo_accept and accept_take then read and push its values directly: through its sequence
 * methods (PySequence_Size, an int object for q[0], an append method call) each push had cost some 300 x86
 * instructions (callgrind of elementwise512: 11 M a launch in accept_take). */
static ThreadTiming *ring_state(PyObject *q, int *th) {
    if (!Py_IS_TYPE(q, &TakenRing_Type))
        return NULL;
    *th = ((TakenRing *)q)->th;
    return ((TakenRing *)q)->s;
}

/* the oldest value of thread th's ring (q[0]; the ring is not empty) */
static long long ring_oldest(const ThreadTiming *s, int th) {
    return s->taken[th][s->taken_head[th]];
}

/* first[i] is None: 1, else 0; -1 with an error set */
static int first_unset(PyObject *first_l, Py_ssize_t i) {
    ThreadTiming *s = row_state(first_l);
    if (s)
        return !s->has_first[i];
    PyObject *v = PyList_GetItem(first_l, i);
    return v ? v == Py_None : -1;
}

/* after_mop[i]'s truth (-1 with an error set), and after_mop[i] = False */
static int after_mop_of(PyObject *after_l, Py_ssize_t i) {
    ThreadTiming *s = row_state(after_l);
    if (s)
        return s->after_mop[i];
    PyObject *v = PyList_GetItem(after_l, i);
    return v ? PyObject_IsTrue(v) : -1;
}

static int after_mop_clear(PyObject *after_l, Py_ssize_t i) {
    ThreadTiming *s = row_state(after_l);
    if (s) {
        s->after_mop[i] = 0;
        return 0;
    }
    return PyList_SetItem(after_l, i, Py_NewRef(Py_False));
}
