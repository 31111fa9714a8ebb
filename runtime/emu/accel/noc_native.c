/* The NoC time model's reservation (runtime/emu/noc.py Fabric._reserve with Busy.free_from and Busy.take, the
 * reference, which tests/emu/test_noc_native.py pins this against) in C: the first cycle from s0 at which every
 * resource of a transfer is free for d cycles from its offset on, the resources visited round and round until all of
 * them in a row accept it, then taken there. It works on the Busy objects' own lists of interval starts and ends
 * (sorted, disjoint, Python ints), so the Python side keeps no copy. A CPython extension module built by
 * accel/native.py; loaded by accel/noc_native.py. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

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

static PyMethodDef methods[] = {
    {"reserve", (PyCFunction)(void (*)(void))reserve, METH_FASTCALL,
     "reserve(res, s0, d): the first cycle from s0 at which every (Busy, offset) of res is free for d cycles; taken"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "noc_native", NULL, -1, methods};

PyMODINIT_FUNC PyInit_noc_native(void) {
    if (!(s_starts = PyUnicode_InternFromString("starts")) || !(s_ends = PyUnicode_InternFromString("ends")))
        return NULL;
    return PyModule_Create(&module);
}
