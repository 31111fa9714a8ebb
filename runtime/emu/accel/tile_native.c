/* The data side of the tile words in C (loaded by tile_native.py): numpy bindings over tile_data.c's unpacker
 * (UNPACR), packer (PACR), MVMUL and ELWMUL / ELWADD / ELWSUB.
 *
 * The handlers in unpack_pack.py and tensix_fpu.py keep every check, address computation, bank handshake and
 * counter update; where a word's configuration is one the C part covers, they call these functions for its data
 * effect instead of building numpy temporaries; tests/emu/test_tile_native.py pins both paths together on random
 * words and compiled kernels (TT_EMU_TILE_NATIVE=0 keeps the Python path). The same functions serve the handlers'
 * common case in C (tile_handlers.c, in the issue path of sfpu_issue_native.c).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "tile_data.c"       /* tile_unpack, tile_pack, tile_mvmul, tile_elw and their conversion codes */

/* ---------------------------------------------------------------------------------------------- bindings */
static int get_buffer(PyObject *o, Py_buffer *view, int writable, Py_ssize_t itemsize, const char *what) {
    if (PyObject_GetBuffer(o, view, PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0)) < 0)
        return -1;
    if (view->itemsize != itemsize) {
        PyErr_Format(PyExc_TypeError, "%s: %zd-byte items, expected %zd", what, view->itemsize, itemsize);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* unpack(l1 (uint8), start byte, count, kind, out (uint32, C-contiguous), out offset) -> True, or False when the L1
 * range is out of bounds (the caller's Python path then raises its error). */
static PyObject *py_unpack(PyObject *self, PyObject *args) {
    PyObject *l1o, *outo;
    long long start, count, off;
    int kind;
    if (!PyArg_ParseTuple(args, "OLLiOL", &l1o, &start, &count, &kind, &outo, &off))
        return NULL;
    if (kind < 0 || kind >= UNP_KINDS)
        return PyErr_Format(PyExc_ValueError, "unpack: kind %d", kind);
    Py_buffer l1, out;
    if (get_buffer(l1o, &l1, 0, 1, "unpack l1") < 0)
        return NULL;
    if (get_buffer(outo, &out, 1, 4, "unpack out") < 0) {
        PyBuffer_Release(&l1);
        return NULL;
    }
    PyObject *res;
    if (off < 0 || count < 0 || off > out.len / 4 || count > out.len / 4 - off)     /* no overflow in the sum */
        res = PyErr_Format(PyExc_IndexError, "unpack: %lld datums at %lld outside the %zd-word target", count, off,
                           out.len / 4);
    else {
        res = tile_unpack(l1.buf, l1.len, start, count, kind, (uint32_t *)out.buf + off) ? Py_False : Py_True;
        Py_INCREF(res);
    }
    PyBuffer_Release(&out);
    PyBuffer_Release(&l1);
    return res;
}

/* pack(rows32 (Dst32b: uint32 (512, 16)), first, n_rows, step, per, kind, l1 (uint8), addr) -> bytes written, or -1
 * when the L1 range is out of bounds. */
static PyObject *py_pack(PyObject *self, PyObject *args) {
    PyObject *dsto, *l1o;
    int first, n_rows, step, per, kind;
    long long addr;
    if (!PyArg_ParseTuple(args, "OiiiiiOL", &dsto, &first, &n_rows, &step, &per, &kind, &l1o, &addr))
        return NULL;
    if (kind < 0 || kind >= PACK_KINDS || per < 0 || per > 16 || n_rows < 1 || n_rows > 1024 || step < 1 ||
        step > 1024 || first < 0 || first > 1024)     /* keeps first + step * (n_rows - 1) far from overflow */
        return PyErr_Format(PyExc_ValueError, "pack: kind %d, %d rows of %d from row %d step %d", kind, n_rows, per,
                            first, step);
    Py_buffer dst, l1;
    if (get_buffer(dsto, &dst, 0, 4, "pack rows32") < 0)
        return NULL;
    if (get_buffer(l1o, &l1, 1, 1, "pack l1") < 0) {
        PyBuffer_Release(&dst);
        return NULL;
    }
    PyObject *res;
    int rows = kind == PACK_DST16_BF16 ? 1024 : 512;        /* Dst16b rows, or Dst32b rows */
    if (dst.len != 512 * 16 * 4 || first + step * (n_rows - 1) >= rows)
        res = PyErr_Format(PyExc_IndexError, "pack: Dst rows %d..%d outside Dst", first,
                           first + step * (n_rows - 1));
    else
        res = PyLong_FromLongLong(tile_pack(dst.buf, first, n_rows, step, per, kind, l1.buf, l1.len, addr));
    PyBuffer_Release(&l1);
    PyBuffer_Release(&dst);
    return res;
}

/* The five state buffers of an FPU word: SrcA bank, SrcB bank (uint32 (64, 16)), Dst32b (uint32 (512, 16)), its
 * `written` (bool (512,)) and `cleared16` (bool (1024,)); 0, or -1 with an exception set and nothing held. */
static int fpu_buffers(PyObject *objs[5], Py_buffer v[5]) {
    static const Py_ssize_t sizes[5] = {64 * 16 * 4, 64 * 16 * 4, 512 * 16 * 4, 512, 1024};
    for (int i = 0; i < 5; i++) {
        int bad = get_buffer(objs[i], &v[i], i >= 2, i < 3 ? 4 : 1, "FPU state") < 0;
        if (!bad && v[i].len != sizes[i]) {
            PyErr_Format(PyExc_ValueError, "FPU state buffer %d has %zd bytes, expected %zd", i, v[i].len, sizes[i]);
            PyBuffer_Release(&v[i]);
            bad = 1;
        }
        if (bad) {
            while (i-- > 0)
                PyBuffer_Release(&v[i]);
            return -1;
        }
    }
    return 0;
}

static void release_buffers(Py_buffer v[5]) {
    for (int i = 0; i < 5; i++)
        PyBuffer_Release(&v[i]);
}

/* mvmul(srca bank, ra, srcb bank, rb, rows32, written, cleared16, rd, mask_a, mask_b, phase) -> None */
static PyObject *py_mvmul(PyObject *self, PyObject *args) {
    PyObject *o[5];
    int ra, rb, rd, phase;
    unsigned int mask_a, mask_b;
    if (!PyArg_ParseTuple(args, "OiOiOOOiIIi", &o[0], &ra, &o[1], &rb, &o[2], &o[3], &o[4], &rd, &mask_a, &mask_b,
                          &phase))
        return NULL;
    if (ra < 0 || ra > 48 || rb < 0 || rb > 56 || rd < 0 || rd > 504 || rd % 8 || phase < 0 || phase > 3)
        return PyErr_Format(PyExc_ValueError, "mvmul: SrcA row %d, SrcB row %d, Dst row %d, phase %d", ra, rb, rd,
                            phase);
    Py_buffer v[5];
    if (fpu_buffers(o, v) < 0)
        return NULL;
    tile_mvmul(v[0].buf, ra, v[1].buf, rb, v[2].buf, v[3].buf, v[4].buf, rd, mask_a, mask_b, phase);
    release_buffers(v);
    Py_RETURN_NONE;
}

/* elw(srca bank, ra, srcb bank, rb, rows32, written, cleared16, rd, mask_a, mask_b, op, bcast, flush, accumulate,
 * phase) -> None */
static PyObject *py_elw(PyObject *self, PyObject *args) {
    PyObject *o[5];
    int ra, rb, rd, op, bcast, flush, accumulate, phase;
    unsigned int mask_a, mask_b;
    if (!PyArg_ParseTuple(args, "OiOiOOOiIIiippi", &o[0], &ra, &o[1], &rb, &o[2], &o[3], &o[4], &rd, &mask_a,
                          &mask_b, &op, &bcast, &flush, &accumulate, &phase))
        return NULL;
    if (ra < 0 || ra > 56 || rb < 0 || rb > 56 || rd < 0 || rd > 504 || rd % 8 || op < ELW_MUL || op > ELW_SUB ||
        bcast < 0 || bcast > 3 || phase < 0 || phase > 3)
        return PyErr_Format(PyExc_ValueError, "elw: SrcA row %d, SrcB row %d, Dst row %d, op %d, bcast %d, phase %d",
                            ra, rb, rd, op, bcast, phase);
    Py_buffer v[5];
    if (fpu_buffers(o, v) < 0)
        return NULL;
    tile_elw(v[0].buf, ra, v[1].buf, rb, v[2].buf, v[3].buf, v[4].buf, rd, mask_a, mask_b, op, bcast, flush,
             accumulate, phase);
    release_buffers(v);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"mvmul", py_mvmul, METH_VARARGS, "one MVMUL's data effect (see tile_mvmul)"},
    {"elw", py_elw, METH_VARARGS, "one ELWMUL / ELWADD / ELWSUB's data effect (see tile_elw)"},
    {"unpack", py_unpack, METH_VARARGS, "L1 datums -> Src/Dst words (see tile_unpack)"},
    {"pack", py_pack, METH_VARARGS, "Dst rows -> L1 datums (see tile_pack)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "tile_native", NULL, -1, methods};

PyMODINIT_FUNC PyInit_tile_native(void) { return PyModule_Create(&module); }
