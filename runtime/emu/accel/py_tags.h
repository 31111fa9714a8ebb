/* CPython's version tags, read by the C parts' memos (rv32_native.c, sfpu_issue_native.c and the files it includes).
 *
 * A dict's version tag (PEP 509): every change of a dict changes it and no two dicts are given the same one, so an
 * equal tag means the same, unchanged dict. Python 3.12 deprecated it: there DICT_TAGS is 0, dict_version answers 0
 * and the memos keyed on it are off.
 * A class's version tag: changed by any change of a class in its MRO, never given to two classes; type_tag answers 0
 * (never a valid tag) where the class has none. */
#ifndef TT_PY_TAGS_H
#define TT_PY_TAGS_H
#include <Python.h>
#include <stdint.h>

#define DICT_TAGS (PY_VERSION_HEX < 0x030C0000)
static uint64_t dict_version(PyObject *d) {
#if DICT_TAGS
    return ((PyDictObject *)d)->ma_version_tag;
#else
    (void)d;
    return 0;
#endif
}

static unsigned int type_tag(PyTypeObject *tp) {
    return PyType_HasFeature(tp, Py_TPFLAGS_VALID_VERSION_TAG) ? tp->tp_version_tag : 0;
}
#endif
