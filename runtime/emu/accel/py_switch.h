/* The shared step of the C parts' switch setters (METH_O functions given a Python truth value by their module's
 * Python side when it loads, and by the tests: rv32_native.c, sfpu_issue_native.c and tile_handlers.c). */
#ifndef TT_PY_SWITCH_H
#define TT_PY_SWITCH_H
#include <Python.h>

/* *flag := on's truth (0 or 1); 0, or -1 with Python's error set where its truth cannot be taken (flag unchanged) */
static int switch_set(PyObject *on, int *flag) {
    int v = PyObject_IsTrue(on);
    if (v < 0)
        return -1;
    *flag = v;
    return 0;
}
#endif
