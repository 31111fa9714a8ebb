/* The common case of the tile words' handlers in C, for the issue path (included by sfpu_issue_native.c, whose
 * plain_word calls tile_handler before the Python handler): UNPACR (unpack_pack.py), PACR and its address modifier,
 * MVMUL and ELWMUL / ELWADD / ELWSUB (tensix_fpu.py) with apply_addr_mod and the bank release, MOVA2D into a 16-bit
 * Dst row (tensix_fpu.py), the ADC setters SETADC / SETADCXY / SETADCZW / SETADCXX and the register setters SETDMAREG,
 * SETC16 and WRCFG (config.py). The state they read
 * and write is the Tensix's own Python objects (config and ThreadConfig lists, ADC lists, the RWC dict, the banks'
 * valid and format lists, the numpy Src banks, Dst and L1), read through the C API, so the Python handlers, which
 * stay the reference, see exactly what C left.
 *
 * tile_handler answers 1 (done: the handler would have returned None), 2 (blocked on a Src bank, with the handler's
 * reason), 0 (not taken: the caller runs the Python handler) or -1 (an exception). It takes a word only when every
 * check the Python handler makes passes and every value it needs is one tile_data.c covers; it decides that before it
 * changes anything, so a word it leaves runs wholly in Python. The conditions that leave a word to Python
 * (tests/emu/test_tile_handlers.py's random programs meet the first, Dst-address, edge-mask, conversion and raising
 * ones, with the whole state compared after every step):
 *   - UNPACR / PACR whose setup (the word and config words of its cache key) is not in the handler's setup cache yet
 *     (the first of each configuration: Python checks and caches it);
 *   - a conversion tile_data.c does not cover (native_kind None: BFP, FP8, INT8, ReLU, L1 accumulation, ...),
 *     Tileize_mode, a Dst address below the 4-row bias, SrcA row wrap, an edge mask that is not all ones;
 *   - anything the Python handler refuses or raises at (out-of-range rows or L1 ranges, INT8 math, a 16-bit Dst,
 *     5-bit-exponent sources, ADDR_MOD bias, the CR/Clear combinations, ...): it raises there, with its message;
 *   - MVMUL while a pushed MVMUL run has recorded steps (fpu_batch flushes them first, in Python).
 * The Python side (direct_issue._plain_facts) gives a word a handler code only when its handler is the reference
 * function itself (not a spy: direct_issue._C_HANDLED) and direct_issue.tile_handlers_in_c() (HANDLERS_NATIVE, i.e.
 * TT_EMU_TILE_HANDLERS_NATIVE, the tile data in C, the handlers' setup caches on). */
#include "tile_data.c"

enum { H_NONE = 0, H_UNPACR = 1, H_PACR = 2, H_MVMUL = 3, H_ELWMUL = 4, H_ELWADD = 5, H_ELWSUB = 6, H_MOVA2D = 7,
       H_SETADC = 8, H_SETADCXY = 9, H_SETADCZW = 10, H_SETADCXX = 11, H_SETDMAREG = 12, H_SETC16 = 13, H_WRCFG = 14,
       H_STALLWAIT = 15, H_SEMWAIT = 16, H_SEMPOST = 17, H_SEMGET = 18, H_SETRWC = 19, H_ZEROACC = 20, H_CODES };
/* per Src format code (fpu_math): which operand lists admit it, its 5-bit-exponent style, whether MOVA2D writes it
 * as Dst16b BF16 */
enum { FMT_MM_A = 1, FMT_MM_B = 2, FMT_ELW_A = 4, FMT_ELW_B = 8, FMT_5BIT = 16, FMT_MOV_BF16 = 32 };

static long long handler_taken[H_CODES];     /* words each handler code ran in C (tests assert C was taken) */
static uint32_t src19_mask_of[16];           /* fpu_math.src19_mask */
static int fmt_class[16];
static PyObject *k_sel, *k_addr_mode, *k_set_dat_valid, *k_last, *k_dst, *k_instr_mod19, *k_dest_accum_en,
    *k_clear_dvalid, *k_instr_mod, *k_src, *k_dest_32b_lo, *k_cnt_set_mask, *k_value, *k_dimension_index,
    *k_channel_index, *k_bit_mask, *k_ch_xy[4], *k_x_start, *k_x_end2, *k_set_signals_mode, *k_reg_index_16b,
    *k_payload, *k_setc16_reg, *k_setc16_value, *k_cfg_reg, *k_wr128b, *k_gpr_address, *h_gpr, *h_srca, *h_srcb,
    *h_srca_valid, *h_srcb_valid, *h_srca_format, *h_srcb_format, *h_l1, *h_dst_obj,
    *h_rows32, *h_written, *h_cleared16, *h_adc_cr, *h_unpack_setups, *h_pack_setups, *h_packer,
    *h_fid, *k_wait_res, *k_stall_res, *k_wait_sem_cond,
    *k_sem_sel, *k_rwc_cr, *k_rwc_a, *k_rwc_b, *k_rwc_d, *k_clear_ab_vld, *h_sem_value, *h_sem_max, *h_sem_posts,
    *h_sems, *h_semwait, *h_sfpu_busy, *h_latch_type, *k_clear_mode, *k_use_32_bit_mode,
    *k_clear_zero_flags, *k_where, *h_poll_latches, *h_init, *h_word, *h_tx, *h_timing;

/* configure_tiles(src19 masks (16), format classes (16)) */
static PyObject *configure_tiles(PyObject *self, PyObject *args) {
    PyObject *masks, *classes;
    if (!PyArg_ParseTuple(args, "O!O!", &PyTuple_Type, &masks, &PyTuple_Type, &classes))
        return NULL;
    if (PyTuple_GET_SIZE(masks) != 16 || PyTuple_GET_SIZE(classes) != 16) {
        PyErr_SetString(PyExc_ValueError, "configure_tiles(16 src19 masks, 16 format classes)");
        return NULL;
    }
    for (int i = 0; i < 16; i++) {
        long long m, c;
        if (get_ll(PyTuple_GET_ITEM(masks, i), "src19 mask", &m) || get_ll(PyTuple_GET_ITEM(classes, i), "class", &c))
            return NULL;
        src19_mask_of[i] = (uint32_t)m;
        fmt_class[i] = (int)c;
    }
    Py_RETURN_NONE;
}

/* wait_native(on): whether new_latch may build a latch in C and wait_release read the SFPU's busy time in C
 * (sfpu_issue_native.WAIT_NATIVE; off: the Latch class is called and tm.sfpu_busy() asked, as before) */
static int wait_in_c = 1;
static PyObject *wait_native(PyObject *self, PyObject *on) {
    (void)self;
    if (switch_set(on, &wait_in_c))
        return NULL;
    Py_RETURN_NONE;
}

/* dict_hints_native(on): whether the run's view reads its items at the dict entry where each was last
 * (get_attr_hinted; sfpu_issue_native.DICT_HINTS_NATIVE; off: get_attr's look-up, as before) */
static int hints_in_c = 1;
static PyObject *dict_hints_native(PyObject *self, PyObject *on) {
    (void)self;
    if (switch_set(on, &hints_in_c))
        return NULL;
    Py_RETURN_NONE;
}

/* handler_counts() -> the words each handler code ran in C since the module loaded (index: the code) */
static PyObject *handler_counts(PyObject *self, PyObject *unused) {
    PyObject *t = PyTuple_New(H_CODES);
    for (int i = 0; t && i < H_CODES; i++) {
        PyObject *v = PyLong_FromLongLong(handler_taken[i]);
        if (!v) {
            Py_CLEAR(t);
            break;
        }
        PyTuple_SET_ITEM(t, i, v);
    }
    return t;
}

static int tile_handlers_init(void) {
    name_ref names[] = {
        {&k_sel, "unpack_block_selection"}, {&k_addr_mode, "addr_mode"}, {&k_set_dat_valid, "set_dat_valid"},
        {&k_last, "last"}, {&k_dst, "dst"}, {&k_instr_mod19, "instr_mod19"}, {&k_dest_accum_en, "dest_accum_en"},
        {&k_clear_dvalid, "clear_dvalid"}, {&k_instr_mod, "instr_mod"}, {&k_src, "src"},
        {&k_dest_32b_lo, "dest_32b_lo"}, {&k_cnt_set_mask, "cnt_set_mask"}, {&k_value, "value"},
        {&k_dimension_index, "dimension_index"}, {&k_channel_index, "channel_index"}, {&k_bit_mask, "bit_mask"},
        {&k_ch_xy[0], "ch0_x"}, {&k_ch_xy[1], "ch0_y"}, {&k_ch_xy[2], "ch1_x"}, {&k_ch_xy[3], "ch1_y"},
        {&k_x_start, "x_start"}, {&k_x_end2, "x_end2"}, {&k_set_signals_mode, "set_signals_mode"},
        {&k_reg_index_16b, "reg_index_16b"}, {&k_payload, "payload"}, {&k_setc16_reg, "setc16_reg"},
        {&k_setc16_value, "setc16_value"}, {&k_cfg_reg, "cfg_reg"}, {&k_wr128b, "wr128b"},
        {&k_gpr_address, "gpr_address"}, {&h_gpr, "gpr"}, {&h_srca, "srca"}, {&h_srcb, "srcb"},
        {&h_srca_valid, "srca_valid"},
        {&h_srcb_valid, "srcb_valid"}, {&h_srca_format, "srca_format"}, {&h_srcb_format, "srcb_format"},
        {&h_l1, "l1"}, {&h_dst_obj, "_dst"}, {&h_rows32, "rows32"}, {&h_written, "written"},
        {&h_cleared16, "cleared16"}, {&h_adc_cr, "adc_cr"}, {&h_unpack_setups, "_unpack_setups"},
        {&h_pack_setups, "_pack_setups"}, {&h_packer, "_packer"},
        {&h_fid, "fid"}, {&k_wait_res, "wait_res"}, {&k_stall_res, "stall_res"}, {&k_wait_sem_cond, "wait_sem_cond"},
        {&k_sem_sel, "sem_sel"}, {&k_rwc_cr, "rwc_cr"}, {&k_rwc_a, "rwc_a"}, {&k_rwc_b, "rwc_b"}, {&k_rwc_d, "rwc_d"},
        {&k_clear_ab_vld, "clear_ab_vld"}, {&h_sem_value, "sem_value"}, {&h_sem_max, "sem_max"},
        {&h_sem_posts, "sem_posts"}, {&h_sems, "sems"}, {&h_semwait, "SEMWAIT"},
        {&h_sfpu_busy, "sfpu_busy"}, {&h_latch_type, "Latch"}, {&k_clear_mode, "clear_mode"},
        {&k_use_32_bit_mode, "use_32_bit_mode"}, {&k_clear_zero_flags, "clear_zero_flags"}, {&k_where, "where"},
        {&h_poll_latches, "poll_latches"}, {&h_init, "__init__"}, {&h_word, "word"},
        {&h_tx, "tx"}, {&h_timing, "timing"},
    };
    return INTERN_NAMES(names);
}

/* ------------------------------------------------------------------------------------------------ a run's view
 * The containers plain_word and the handlers read (lists, dicts, numpy arrays and the Dst object: the Python state
 * binds them once and mutates them in place), each read by get_attr at its first use in a plain_run / drain_run call
 * and kept until that call's next call into Python (a handler, flush_deferred, the latch's condition, ...; view_drop),
 * which is the only code that could rebind one: between two such calls only this C runs, and it rebinds none, so each
 * answer is the one get_attr would give. (An MVMUL made 28 attribute reads, 18 of them of these.) */
enum { V_TX_CFG, V_SRCA_VALID, V_SRCB_VALID, V_SRCA_FORMAT, V_SRCB_FORMAT, V_UNPACK_SETUPS, V_PACK_SETUPS, V_L1,
       V_SRCA, V_SRCB, V_DST, V_ROWS32, V_WRITTEN, V_CLEARED16, V_DST_FPU_WRITE, V_SRC_READY, V_BANK_READ,
       V_WORK_DONE, V_UNPACK_BUSY, V_RAW_SFPU, V_DEFERRED, V_TH_CFG, V_ADC, V_ADC_CR, V_RWC, V_GPR, V_PACKER, V_STRICT,
       V_SEM_VALUE, V_SEM_MAX, V_SEM_POSTS, V_N };
enum { VO_TX, VO_TM, VO_TH, VO_DST };              /* whose attribute (VO_DST: the V_DST item's) */
static const struct { int owner; PyObject **name; } view_items[V_N] = {
    [V_TX_CFG] = {VO_TX, &s_cfg}, [V_SRCA_VALID] = {VO_TX, &h_srca_valid}, [V_SRCB_VALID] = {VO_TX, &h_srcb_valid},
    [V_SRCA_FORMAT] = {VO_TX, &h_srca_format}, [V_SRCB_FORMAT] = {VO_TX, &h_srcb_format},
    [V_UNPACK_SETUPS] = {VO_TX, &h_unpack_setups}, [V_PACK_SETUPS] = {VO_TX, &h_pack_setups}, [V_L1] = {VO_TX, &h_l1},
    [V_SRCA] = {VO_TX, &h_srca}, [V_SRCB] = {VO_TX, &h_srcb}, [V_DST] = {VO_TX, &h_dst_obj},
    [V_ROWS32] = {VO_DST, &h_rows32}, [V_WRITTEN] = {VO_DST, &h_written}, [V_CLEARED16] = {VO_DST, &h_cleared16},
    [V_DST_FPU_WRITE] = {VO_TM, &s_dst_fpu_write}, [V_SRC_READY] = {VO_TM, &s_src_ready},
    [V_BANK_READ] = {VO_TM, &s_bank_read}, [V_WORK_DONE] = {VO_TM, &s_work_done},
    [V_UNPACK_BUSY] = {VO_TM, &s_unpack_busy},
    [V_RAW_SFPU] = {VO_TX, &s_raw_sfpu}, [V_DEFERRED] = {VO_TX, &s_deferred}, [V_TH_CFG] = {VO_TH, &s_cfg},
    [V_ADC] = {VO_TH, &s_adc},
    [V_ADC_CR] = {VO_TH, &h_adc_cr}, [V_RWC] = {VO_TH, &s_rwc}, [V_GPR] = {VO_TH, &h_gpr},
    [V_PACKER] = {VO_TX, &h_packer}, [V_STRICT] = {VO_TX, &s_strict}, [V_SEM_VALUE] = {VO_TX, &h_sem_value},
    [V_SEM_MAX] = {VO_TX, &h_sem_max}, [V_SEM_POSTS] = {VO_TX, &h_sem_posts},
};
_Static_assert(V_N <= 32, "run_view.held has a bit an item");
/* a numpy array's data as view_buffer found it (buf NULL: not found yet) */
typedef struct { void *buf; Py_ssize_t len, itemsize; } item_data;
typedef struct {
    PyObject *tx, *tm, *th;                    /* (borrowed: the caller holds them for the call) */
    PyObject *v[V_N];                          /* (strong references, NULL until read) */
    uint32_t held;                             /* the items held (bit k: v[k]), so that view_drop visits only those */
    /* of those, the ones read from a __slots__ member (at off[k]) and the ones read neither from one nor from the
     * owner's instance dict (a property, a class attribute, ...; or the hints off): what a kept view checks (below) */
    uint32_t slots, loose;
    Py_ssize_t off[V_N];
    item_data data[V_N];                       /* view_buffer's answer for v[k] while v[k] is held */
    /* ADC set adc_x_set - 1's X range (x0, x1 of its two channels) as the word's handler in C read it (0: none);
     * the handlers move only Y and Z, so it is the range after the word too, which its timing (adc_count) reads */
    int adc_x_set;
    long long adc_x[2];
    /* the Src bank numbers plain_word read for its word's timing just before the handler runs (nothing runs in
     * between), which the handler would read again: `banks` says which are set (BANKS_*) */
    int banks;
    long long matrix_bank[2], unpack_bank;
} run_view;
enum { BANKS_MATRIX = 1, BANKS_UNPACK_A = 2, BANKS_UNPACK_B = 4 };

/* tx.srca_matrix_bank / srcb_matrix_bank (side 0 / 1), as plain_word read them where it did */
static int matrix_bank(run_view *rv, int side, long long *out) {
    if (rv->banks & BANKS_MATRIX) {
        *out = rv->matrix_bank[side];
        return 0;
    }
    return attr_ll(rv->tx, side ? s_srcb_matrix_bank : s_srca_matrix_bank, out);
}

/* The entry of a dict's keys where a name was found (a hint): a dict with string keys keeps each key at one index of
 * its entries until the keys are rebuilt, and the Tensix's and its units' attribute dicts are not rebuilt between
 * words, so the entry at the hint, where it still holds the very name, holds its value; that is checked, not assumed
 * (the index within the entries in use, the key the same object), and anything else takes the dict's look-up. The
 * look-up in the Tensix's dict of some 150 attributes, colliding names probed one by one, had cost ~120 instructions
 * a read; every run's view reads its items again after Python ran (view_drop). The layout is CPython 3.11's
 * (Include/internal/pycore_dict.h); other versions look up as before. */
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
#define DICT_HINTS 1
typedef struct {               /* (3.11's struct _dictkeysobject) */
    Py_ssize_t dk_refcnt;
    uint8_t dk_log2_size, dk_log2_index_bytes, dk_kind;
    uint32_t dk_version;
    Py_ssize_t dk_usable, dk_nentries;
    char dk_indices[];
} keys_311;
typedef struct { PyObject *key, *value; } str_entry_311;     /* (PyDictUnicodeEntry: the keys of kind 1 and 2) */

/* the string-key entries of dict d, their count in *n; NULL where its keys are of the general kind */
static str_entry_311 *dict_str_entries(PyDictObject *d, Py_ssize_t *n) {
    keys_311 *k = (keys_311 *)d->ma_keys;
    if (k->dk_kind != 1 && k->dk_kind != 2)
        return NULL;
    *n = k->dk_nentries;
    return (str_entry_311 *)&k->dk_indices[(size_t)1 << k->dk_log2_index_bytes];
}

/* d[name] (borrowed; NULL with no exception: not there) read at *hint where the entry there holds `name`, else
 * looked up, *hint then set to the entry that holds it */
static PyObject *dict_get_hinted(PyObject *d, PyObject *name, Py_ssize_t *hint) {
    PyDictObject *dict = (PyDictObject *)d;
    Py_ssize_t n, i = *hint;
    str_entry_311 *e = dict_str_entries(dict, &n);
    if (e && i >= 0 && i < n && e[i].key == name) {
        PyObject *v = dict->ma_values ? ((PyObject **)dict->ma_values)[i] : e[i].value;   /* (split: its values) */
        if (v)
            return v;
    }
    PyObject *v = PyDict_GetItemWithError(d, name);
    for (i = 0; v && e && i < n; i++)               /* (a new hint: its entry; the key compared as the object) */
        if (e[i].key == name) {
            *hint = i;
            break;
        }
    return v;
}
#else
#define DICT_HINTS 0
#endif

static PyObject *plain_dict(PyObject *o, PyObject *name, PyObject **d);    /* (sfpu_issue_native.c, with get_attr) */

/* Where get_attr_hinted last read a name: the object's class with its version tag then (0: none yet), whether no
 * class in its MRO defines the name (plain: the instance's dict answers) or else the offset of the __slots__ member
 * the class's attribute describes (-1: neither), and the dict entry (dict_get_hinted) */
typedef struct { PyTypeObject *tp; unsigned int tag; int plain; Py_ssize_t off, ix; } attr_hint;

/* get_attr(o, name), the class's answer (plain_dict's type look-up, ~80 instructions) remembered by its version tag:
 * the instance dict read at the hint (dict_get_hinted), a __slots__ member at its offset */
static PyObject *get_attr_hinted(PyObject *o, PyObject *name, attr_hint *h) {
#if DICT_HINTS
    PyTypeObject *tp = Py_TYPE(o);
    PyObject *dict = NULL, *v;
    if (!hints_in_c)
        return get_attr(o, name);
    if (h->tag && tp == h->tp && type_tag(tp) == h->tag) {
        PyObject **dp = h->plain ? _PyObject_GetDictPtr(o) : NULL;
        dict = dp && *dp && PyDict_CheckExact(*dp) ? *dp : NULL;
        if (h->off >= 0 && (v = *(PyObject **)((char *)o + h->off)))
            return Py_NewRef(v);
    } else {
        PyObject *d = NULL;
        dict = plain_dict(o, name, &d);
        h->tp = tp, h->plain = dict != NULL, h->off = member_offset(d, 0);
        h->tag = dict || d ? type_tag(tp) : 0;            /* (d: a class defines it; else no dict: not remembered) */
    }
    if (dict && (v = dict_get_hinted(dict, name, &h->ix)))
        return Py_NewRef(v);
    if (PyErr_Occurred())
        return NULL;
#else
    (void)h;
#endif
    return get_attr(o, name);
}

static PyObject *view_read(run_view *rv, int k);
static attr_hint view_hints[V_N];          /* (every Tensix binds its items in one order: one hint an item) */

/* the owner of the view's item k (borrowed), NULL where it has none (VO_DST: the V_DST item, read if need be) */
static PyObject *view_owner(run_view *rv, int k) {
    int o = view_items[k].owner;
    if (o != VO_DST)
        return o == VO_TX ? rv->tx : o == VO_TM ? rv->tm : rv->th;
    return rv->v[V_DST] ? rv->v[V_DST] : view_read(rv, V_DST);
}

/* the item k just read from `owner` into the view: held, and where the read came from (run_view.slots / loose), as
 * its hint says for owner's class now */
static void view_hold(run_view *rv, int k, PyObject *owner) {
    const attr_hint *h = &view_hints[k];
    uint32_t bit = 1u << k;
    rv->held |= bit;
    if (!hints_in_c || !h->tag || h->tp != Py_TYPE(owner) || type_tag(h->tp) != h->tag || (!h->plain && h->off < 0))
        rv->loose |= bit;
    else if (!h->plain)
        rv->slots |= bit, rv->off[k] = h->off;
}

/* view_get's read of item k, not held yet */
static PyObject *view_read(run_view *rv, int k) {
    PyObject *owner = view_owner(rv, k);
    rv->v[k] = owner ? get_attr_hinted(owner, *view_items[k].name, &view_hints[k]) : NULL;
    if (rv->v[k])
        view_hold(rv, k, owner);
    return rv->v[k];
}

/* item k (borrowed: the view holds it until view_drop), or NULL with an exception set (in line: some 110k reads an
 * elementwise512 launch, nearly all of an item held) */
static inline PyObject *view_get(run_view *rv, int k) {
    return rv->v[k] ? rv->v[k] : view_read(rv, k);
}

/* item k, a list (borrowed), or NULL with an exception set */
static PyObject *view_list(run_view *rv, int k) {
    PyObject *l = view_get(rv, k);
    if (l && !PyList_Check(l)) {
        PyErr_Format(PyExc_TypeError, "plain issue: %U is not a list", *view_items[k].name);
        return NULL;
    }
    return l;
}

/* item k, a dict (borrowed), or NULL with an exception set */
static PyObject *view_dict(run_view *rv, int k) {
    PyObject *d = view_get(rv, k);
    if (d && !PyDict_Check(d)) {
        PyErr_Format(PyExc_TypeError, "plain issue: %U is not a dict", *view_items[k].name);
        return NULL;
    }
    return d;
}

/* forget every item read: Python ran and may have rebound one */
static void view_drop(run_view *rv) {
    for (uint32_t h = rv->held; h; h &= h - 1) {
        int k = __builtin_ctz(h);
        Py_CLEAR(rv->v[k]);
        rv->data[k].buf = NULL;
    }
    rv->held = rv->slots = rv->loose = 0;
    rv->adc_x_set = 0;
}

/* ------------------------------------------------------------------------------------------------ state access */
static int field(PyObject *fields, PyObject *key, long long *out) {
    PyObject *v = PyDict_GetItemWithError(fields, key);
    if (!v) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_KeyError, "tile_handler: no field %U", key);
        return -1;
    }
    return get_ll(v, "field", out);
}

/* The fields memo: a word's fields dict (compared only, never dereferenced), its version tag, the key set read (a
 * static table of key names, named by its address) and their values. The decoder's fields dicts are kept and never
 * changed, so each word's handler finds its fields here after its first time (4-5 dict look-ups a word before); the
 * tag (see dict_version) makes an entry answer only for that dict unchanged. Without tags every read goes to the
 * dict. */
#define FIELDS_MEMO_BITS 10     /* (elementwise512 has hundreds of distinct fields dicts: 64 slots missed ~60 %) */
#define FIELDS_MEMO (1 << FIELDS_MEMO_BITS)
#define FIELDS_MOST 6
static struct {
    PyObject *fields;
    uint64_t version;
    PyObject **const *keys;
    long long v[FIELDS_MOST];
} fields_memo[FIELDS_MEMO];

/* the n fields `keys` names (n <= FIELDS_MOST) of `fields` into out: 0, or -1 with field's exception */
static int fields_read(PyObject *fields, PyObject **const *keys, int n, long long *out) {
    size_t i = (size_t)((((uintptr_t)fields ^ (uintptr_t)keys) * 0x9E3779B97F4A7C15ull) >> (64 - FIELDS_MEMO_BITS));
    uint64_t tag = dict_version(fields);
    if (DICT_TAGS && fields_memo[i].fields == fields && fields_memo[i].version == tag && fields_memo[i].keys == keys) {
        memcpy(out, fields_memo[i].v, n * sizeof *out);
        return 0;
    }
    for (int k = 0; k < n; k++)
        if (field(fields, *keys[k], &out[k]))
            return -1;
    if (DICT_TAGS) {
        fields_memo[i].fields = fields;
        fields_memo[i].version = tag;
        fields_memo[i].keys = keys;
        memcpy(fields_memo[i].v, out, n * sizeof *out);
    }
    return 0;
}

/* n ints of `list` from index `first` (a list of at least first + n items) */
static int list_lls(PyObject *list, Py_ssize_t first, Py_ssize_t n, long long *out) {
    if (!PyList_Check(list) || PyList_GET_SIZE(list) < first + n) {
        PyErr_SetString(PyExc_TypeError, "tile_handler: a state list too short");
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if (get_ll(PyList_GET_ITEM(list, first + i), "state list item", &out[i]))
            return -1;
    return 0;
}

/* The items of `list` at the n indices `idx` (each below `size`, the list's least length), each into out[idx[k]]:
 * only the config words a handler reads */
static int list_pick(PyObject *list, Py_ssize_t size, const int *idx, int n, long long *out) {
    if (!PyList_Check(list) || PyList_GET_SIZE(list) < size) {
        PyErr_SetString(PyExc_TypeError, "tile_handler: a config list too short");
        return -1;
    }
    for (int k = 0; k < n; k++)
        if (get_ll(PyList_GET_ITEM(list, idx[k]), "config word", &out[idx[k]]))
            return -1;
    return 0;
}

/* The numpy arrays view_buffer handed out last (strong references, so an address is not reused while here, and numpy
 * refuses to resize an array referenced elsewhere: the data pointer stays valid; the emulator never makes its state
 * arrays read-only). A hit skips PyObject_GetBuffer and its release, a fifth of the tile handlers' time in C. */
#define BUFFER_MEMO 16
static struct { PyObject *obj; void *buf; Py_ssize_t len, itemsize; } buffer_memo[BUFFER_MEMO];
static int buffer_memo_next;

/* A buffer of the view's item k: C-contiguous, writable, `itemsize`-byte items, at least `len` bytes; 0 or -1. For a
 * numpy array the view holds no export (v->obj NULL: PyBuffer_Release does nothing; the memo keeps the array alive),
 * and the run's view keeps the answer with the item (rv->data: the item it holds cannot be freed or resized, so its
 * data stays where it was; the memo's scan and view_get were most of a PACR's three Dst buffers);
 * any other object's view is an export the caller releases. */
static int view_buffer(run_view *rv, int k, Py_buffer *v, Py_ssize_t itemsize, Py_ssize_t len) {
    PyObject *name = *view_items[k].name;
    item_data *data = &rv->data[k];
    if (!data->buf) {                /* (else the view's item, held since, is the array found then) */
        PyObject *a = view_get(rv, k);
        if (!a)
            return -1;
        int i = 0;
        while (i < BUFFER_MEMO && buffer_memo[i].obj != a)
            i++;
        if (i == BUFFER_MEMO) {
            int r = PyObject_GetBuffer(a, v, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE);
            if (r < 0 || strcmp(Py_TYPE(a)->tp_name, "numpy.ndarray")) {
                if (r == 0 && (v->itemsize != itemsize || v->len < len)) {
                    PyErr_Format(PyExc_TypeError, "tile_handler: %U is not a buffer of %zd-byte items", name,
                                 itemsize);
                    PyBuffer_Release(v);
                    r = -1;
                }
                return r;
            }
            i = buffer_memo_next;
            buffer_memo_next = (i + 1) % BUFFER_MEMO;
            Py_XSETREF(buffer_memo[i].obj, Py_NewRef(a));
            buffer_memo[i].buf = v->buf;
            buffer_memo[i].len = v->len;
            buffer_memo[i].itemsize = v->itemsize;
            PyBuffer_Release(v);
        }
        data->buf = buffer_memo[i].buf;
        data->len = buffer_memo[i].len;
        data->itemsize = buffer_memo[i].itemsize;
    }
    memset(v, 0, sizeof *v);
    v->buf = data->buf;
    v->len = data->len;
    v->itemsize = data->itemsize;
    if (v->itemsize != itemsize || v->len < len) {
        PyErr_Format(PyExc_TypeError, "tile_handler: %U is not a buffer of %zd-byte items", name, itemsize);
        return -1;
    }
    return 0;
}

/* Dst32b, its `written` rows and `cleared16` flags (dst.py's Dst); 0 or -1 with nothing held */
static int dst_buffers(run_view *rv, Py_buffer v[3]) {
    int r = -1;
    if (!view_buffer(rv, V_ROWS32, &v[0], 4, 512 * 16 * 4)) {
        if (!view_buffer(rv, V_WRITTEN, &v[1], 1, 512)) {
            if (!view_buffer(rv, V_CLEARED16, &v[2], 1, 1024))
                r = 0;
            else
                PyBuffer_Release(&v[1]);
        }
        if (r)
            PyBuffer_Release(&v[0]);
    }
    return r;
}

/* whether ADC set s of `adc` is a list of two lists of at least 4 items, as adc_read reads it (the setters write
 * items without reading them: adc_read's 8 int reads a set had been most of a SETADC*); 0 with a TypeError set */
static int adc_shaped(PyObject *adc, int s) {
    PyObject *set = PyList_Check(adc) && PyList_GET_SIZE(adc) > s ? PyList_GET_ITEM(adc, s) : NULL;
    int ok = set && PyList_Check(set) && PyList_GET_SIZE(set) >= 2;
    for (int ch = 0; ok && ch < 2; ch++)
        ok = PyList_Check(PyList_GET_ITEM(set, ch)) && PyList_GET_SIZE(PyList_GET_ITEM(set, ch)) >= 4;
    if (!ok)
        PyErr_SetString(PyExc_TypeError, "tile_handler: a thread's ADCs are not lists");
    return ok;
}

/* ADC set `s` of a thread, as (x0, y0, z0, w0, x1, y1, z1, w1), from `adc` (ThreadState.adc or .adc_cr): the shape
 * checked as the setters check it, then the 8 ints read from the channels' item arrays */
static int adc_read(PyObject *adc, int s, long long v[8]) {
    if (!adc_shaped(adc, s))
        return -1;
    PyObject *set = PyList_GET_ITEM(adc, s);
    for (int ch = 0; ch < 2; ch++) {
        PyObject **item = ((PyListObject *)PyList_GET_ITEM(set, ch))->ob_item;
        for (int i = 0; i < 4; i++)
            if (get_ll(item[i], "ADC", &v[4 * ch + i]))
                return -1;
    }
    return 0;
}

/* the X range of ADC set s (a: as adc_read gives it) kept in the view for the word's timing */
static void adc_x_keep(run_view *rv, int s, const long long a[8]) {
    rv->adc_x_set = s + 1;
    rv->adc_x[0] = a[0];
    rv->adc_x[1] = a[4];
}

/* ADC set `s` written back as adc_read reads it: only the items that differ from `old` (adc_read's answer before the
 * word; an unchanged item keeps its equal int, as rwc_write's counters do). A word moves two or three of the 8 (a
 * PACR wrote 16 ints, each a new object and the old one's release, for the 2 to 4 that change). */
static int adc_write(PyObject *adc, int s, const long long old[8], const long long v[8]) {
    PyObject *set = PyList_GET_ITEM(adc, s);
    for (int i = 0; i < 8; i++)
        if (v[i] != old[i] && set_item_ll(PyList_GET_ITEM(set, i >> 2), i & 3, v[i]))
            return -1;
    return 0;
}

/* The cache key tuple: id(f) then the items of `list` at `idx` (n of them) */
static PyObject *cache_key(PyObject *fields, PyObject *const *lists, const int *which, const int *idx, int n) {
    PyObject *key = PyTuple_New(n + 1), *id = PyLong_FromVoidPtr(fields);
    if (!key || !id) {
        Py_XDECREF(key);
        Py_XDECREF(id);
        return NULL;
    }
    PyTuple_SET_ITEM(key, 0, id);
    for (int i = 0; i < n; i++) {
        PyObject *l = lists[which[i]];
        if (PyList_GET_SIZE(l) <= idx[i]) {
            Py_DECREF(key);
            PyErr_SetString(PyExc_TypeError, "tile_handler: a config list too short");
            return NULL;
        }
        PyObject *v = PyList_GET_ITEM(l, idx[i]);
        Py_INCREF(v);
        PyTuple_SET_ITEM(key, i + 1, v);
    }
    return key;
}

/* o's value where it is an int that fits a long long: 0, else 1 with no exception set (the key's config words: the
 * common small int read in line, where PyLong_AsLongLongAndOverflow was a call per word) */
static int key_ll(PyObject *o, long long *out) {
    if (!PyLong_CheckExact(o))
        return 1;
    if (!get_ll(o, "setup key", out))
        return 0;
    PyErr_Clear();                                   /* (get_ll_slow's overflow) */
    return 1;
}

/* item i of a setup tuple as an integer (None -> -1; bools as 0 / 1) */
static int setup_ll(PyObject *setup, Py_ssize_t i, long long *out) {
    PyObject *v = PyTuple_GET_ITEM(setup, i);
    if (v == Py_None) {
        *out = -1;
        return 0;
    }
    return get_ll(v, "setup item", out);
}

/* The setup look-ups' memo: a handler's key as integers (id(f), then its config words), the dict it was looked up in
 * with the dict's version tag then, and the setup's items from `first` on as setup_ll reads them. A dict's version
 * tag changes with every change to it and is never given to two dicts, so while it is the same the dict's answer for
 * the key is too: a hit skips building the key tuple, hashing it and comparing its 23 items (most of an UNPACR's cost
 * in C before). Without the tag (DICT_TAGS) every look-up goes to the dict. */
#define SETUP_MEMO 8
#define SETUP_KEY 23
#define SETUP_ITEMS 20
typedef struct {
    PyObject *dict;                 /* (compared only, never dereferenced: the tag says whether it is the same dict) */
    uint64_t version;
    long long key[SETUP_KEY], s[SETUP_ITEMS];
    PyObject *word[SETUP_KEY - 1];  /* the config words' int objects key[1..] was read from (strong references) */
} setup_entry;
/* last: the entry that answered last; least: the lengths the key's lists need (its largest index + 1, once known:
 * each memo serves one handler's key) */
typedef struct { setup_entry e[SETUP_MEMO]; int next, last; Py_ssize_t least[2]; } setup_memo;
static setup_memo unpack_memo, pack_memo;

/* whether the config words of the lists' `items` at `idx` (n of them, `which` list each; the lists long enough) are
 * the very objects entry e holds: an int is immutable and e's reference keeps it from being freed, so the same
 * objects are the same key (the common case: the config lists keep their items between words), found without
 * reading the ints or comparing the key */
static int setup_same_words(const setup_entry *e, PyObject **const *items, const int *which, const int *idx, int n) {
    for (int i = 0; i < n; i++)
        if (items[which[i]][idx[i]] != e->word[i])
            return 0;
    return 1;
}

/* whether `lists` (1 or 2 of them) are as long as m's key needs (m->least, found from which / idx at the first call) */
static int setup_lists_long(setup_memo *m, PyObject *const *lists, const int *which, const int *idx, int n) {
    if (!m->least[0]) {
        for (int i = 0; i < n; i++)
            if (idx[i] + 1 > m->least[which[i]])
                m->least[which[i]] = idx[i] + 1;
    }
    for (int l = 0; l < 2; l++)
        if (m->least[l] && PyList_GET_SIZE(lists[l]) < m->least[l])
            return 0;
    return 1;
}

/* e's config word objects set to those of `lists` (the key just read from them: each an int) */
static void setup_hold_words(setup_entry *e, PyObject *const *lists, const int *which, const int *idx, int n) {
    for (int i = 0; i < n; i++)
        Py_XSETREF(e->word[i], Py_NewRef(PyList_GET_ITEM(lists[which[i]], idx[i])));
}

/* The setup of `fields` under the config words of `lists` at `idx` (n of them, `which` list each) from the view's dict
 * k, a tuple of ns items: 1 with s[first..ns) filled, 0 where it is not cached (Python checks the configuration), -1
 * on an error. */
static int setup_lookup(run_view *rv, int k, setup_memo *m, PyObject *fields, PyObject *const *lists, const int *which,
                        const int *idx, int n, int ns, int first, long long *s) {
    PyObject *d = view_get(rv, k);
    if (!d || !PyDict_Check(d)) {
        if (d)
            PyErr_SetString(PyExc_TypeError, "tile_handler: a setup cache that is not a dict");
        return -1;
    }
    long long key[SETUP_KEY];
    int exact = DICT_TAGS && n + 1 <= SETUP_KEY && ns <= SETUP_ITEMS;
    uint64_t version = dict_version(d);
    key[0] = (long long)(uintptr_t)fields;
    exact = exact && setup_lists_long(m, lists, which, idx, n);     /* (else the tuple path says what is wrong) */
    PyObject **const items[2] = {exact ? ((PyListObject *)lists[0])->ob_item : NULL,
                                 exact && m->least[1] ? ((PyListObject *)lists[1])->ob_item : NULL};
    for (int j = 0; exact && j < SETUP_MEMO; j++) {  /* (an entry of this word holding the same config words) */
        setup_entry *e = &m->e[(m->last + j) % SETUP_MEMO];
        if (e->dict == d && e->version == version && e->key[0] == key[0] && setup_same_words(e, items, which, idx, n)) {
            memcpy(s + first, e->s + first, sizeof(long long) * (size_t)(ns - first));
            m->last = (m->last + j) % SETUP_MEMO;
            return 1;
        }
    }
    for (int i = 0; exact && i < n; i++)
        if (key_ll(items[which[i]][idx[i]], &key[i + 1]))
            exact = 0;                               /* (the tuple path says what is wrong) */
    for (int j = 0; exact && j < SETUP_MEMO; j++) {  /* (the last answer first: a run repeats one configuration) */
        setup_entry *e = &m->e[(m->last + j) % SETUP_MEMO];
        if (e->dict == d && e->version == version && !memcmp(e->key, key, sizeof(long long) * (size_t)(n + 1))) {
            memcpy(s + first, e->s + first, sizeof(long long) * (size_t)(ns - first));
            m->last = (m->last + j) % SETUP_MEMO;
            setup_hold_words(e, lists, which, idx, n);
            return 1;
        }
    }
    PyObject *tk = cache_key(fields, lists, which, idx, n);
    PyObject *setup = tk ? PyDict_GetItemWithError(d, tk) : NULL;
    Py_XDECREF(tk);
    if (!setup)
        return PyErr_Occurred() ? -1 : 0;
    if (!PyTuple_Check(setup) || PyTuple_GET_SIZE(setup) != ns) {
        PyErr_SetString(PyExc_TypeError, "tile_handler: a cached setup of the wrong shape");
        return -1;
    }
    for (int i = first; i < ns; i++)
        if (setup_ll(setup, i, &s[i]))
            return -1;
    if (exact) {
        setup_entry *e = &m->e[m->next];
        m->next = (m->next + 1) % SETUP_MEMO;
        e->dict = d;
        e->version = version;
        memcpy(e->key, key, sizeof(long long) * (size_t)(n + 1));
        memcpy(e->s + first, s + first, sizeof(long long) * (size_t)(ns - first));
        setup_hold_words(e, lists, which, idx, n);
    }
    return 1;
}

/* ------------------------------------------------------------------------------------------------ UNPACR */
static const int unpack_key_list[22] = {1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
static const int unpack_key_idx[22] = {0, 5, 41, 1, 50, 56, 57, 58, 59, 62, 64, 65, 70, 71, 72, 73, 86, 112, 113, 119,
                                       120, 121};     /* ThreadConfig 0, 5, 41 then config words: UNPACR's cache key */

static const int unpack_cfg_read[5] = {76, 84, 92, 124, 140};    /* the base, offset and Dst context words */

static int h_unpacr(run_view *rv, PyObject *fields, PyObject *cfg, PyObject *tcfg, PyObject **why) {
    PyObject *tx = rv->tx;
    static PyObject **const keys[] = {&k_sel, &k_addr_mode, &k_set_dat_valid};
    long long f[3], bank;
    if (fields_read(fields, keys, 3, f))
        return -1;
    if (rv->banks & (f[0] ? BANKS_UNPACK_B : BANKS_UNPACK_A))
        bank = rv->unpack_bank;
    else if (attr_ll(tx, f[0] ? s_srcb_unpack_bank : s_srca_unpack_bank, &bank))
        return -1;
    long long sel = f[0], am = f[1], set_valid = f[2];
    PyObject *valid = view_get(rv, sel ? V_SRCB_VALID : V_SRCA_VALID);
    if (!valid)
        return -1;
    int busy = PyList_Check(valid) && PyList_GET_SIZE(valid) == 2 ? PyObject_IsTrue(PyList_GET_ITEM(valid, bank & 1))
                                                                   : -1;
    if (busy) {                                              /* still valid: the handler's reason */
        if (busy < 0) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "tile_handler: the Src banks' valid flags are not a list of 2");
            return -1;
        }
        *why = PyUnicode_FromFormat("UNPACR: Src%c bank %lld still valid (owned by the FPU)", sel ? 'B' : 'A', bank);
        return *why ? 2 : -1;
    }
    PyObject *lists[2] = {cfg, tcfg};
    long long s[20], c[141], a[8], a_before[8];
    int found = setup_lookup(rv, V_UNPACK_SETUPS, &unpack_memo, fields, lists, unpack_key_list, unpack_key_idx, 22, 20,
                             1, s);
    if (found <= 0)
        return found;                                        /* 0: a configuration not seen yet: Python checks it */
    PyObject *adc = view_get(rv, V_ADC);
    if (!adc || adc_read(adc, (int)sel, a) || list_pick(cfg, 141, unpack_cfg_read, 5, c))
        return -1;
    memcpy(a_before, a, sizeof a);
    adc_x_keep(rv, (int)sel, a);
    long long in_bits = s[1], out_align = s[2], x_dim = s[3], y_dim = s[4], z_dim = s[5], exp_section = s[10];
    long long tileize = s[14], to_dst = s[15], add_dest_cntr = s[16], burst = s[17], out_fmt = s[18], kind = s[19];
    /* (a kind tile_data.c does not know, or whose datum size is not the setup's, is Python's: tile_unpack would refuse
     * it after the state changed) */
    if (kind < 0 || kind >= UNP_KINDS || in_bits != 8 * unp_in_bytes[kind] || tileize || a[0] > a[4] || a[7]
        || out_align <= 0)
        return 0;
    long long count = a[4] - a[0] + 1;
    long long first = a[0] + a[1] * x_dim + a[2] * x_dim * y_dim + a[3] * x_dim * y_dim * z_dim;
    long long base = sel ? c[124] : c[76], offset = (sel ? c[140] : c[92]) & 0xFFFF;
    long long start_bits = ((base + offset + 1) * 16 + exp_section) * 8 + first * in_bits;
    long long dst_addr = (a[5] * s[6] + a[6] * s[7] + a[7] * s[8]);
    if (dst_addr < 0)
        return 0;
    dst_addr /= out_align;
    if (!sel) {
        long long ctx = c[84] & 0xFFFF;
        dst_addr = add_dest_cntr ? dst_addr + ctx : ctx;
        if (dst_addr < 64)                                   /* the dropped rows (or strict mode's error) */
            return 0;
        dst_addr -= 64;
    }
    if (dst_addr % 16 || (burst && count > 16 && dst_addr / 16 % burst) || start_bits & 7)
        return 0;
    Py_buffer l1, tgt, dv[3];
    if (view_buffer(rv, V_L1, &l1, 1, 0))
        return -1;
    if (start_bits < 0 || start_bits + count * in_bits > (long long)l1.len * 8) {
        PyBuffer_Release(&l1);
        return 0;
    }
    uint32_t *target;
    if (to_dst) {
        if ((dst_addr + count + 15) / 16 > 512) {
            PyBuffer_Release(&l1);
            return 0;
        }
        if (dst_buffers(rv, dv)) {
            PyBuffer_Release(&l1);
            return -1;
        }
        target = dv[0].buf;
    } else {
        if (dst_addr + count > 64 * 16 || view_buffer(rv, sel ? V_SRCB : V_SRCA, &tgt, 4, 2 * 64 * 16 * 4)) {
            PyBuffer_Release(&l1);
            return PyErr_Occurred() ? -1 : 0;                /* (beyond SrcB / SrcA's row wrap: Python) */
        }
        target = (uint32_t *)tgt.buf + (bank & 1) * 64 * 16;
    }
    /* taken: from here on the state changes */
    tile_unpack(l1.buf, l1.len, start_bits >> 3, count, (int)kind, target + dst_addr);
    PyBuffer_Release(&l1);
    if (to_dst) {
        memset((uint8_t *)dv[1].buf + dst_addr / 16, 1, (size_t)((dst_addr + count + 15) / 16 - dst_addr / 16));
        for (int i = 0; i < 3; i++)
            PyBuffer_Release(&dv[i]);
    } else {
        PyBuffer_Release(&tgt);
    }
    a[2] = (a[2] + (am & 3)) & 0xFF;
    a[1] = (a[1] + (am >> 2 & 3)) & 0x1FFF;
    a[6] = (a[6] + (am >> 4 & 3)) & 0xFF;
    a[5] = (a[5] + (am >> 6 & 3)) & 0x1FFF;
    int r = adc_write(adc, (int)sel, a_before, a) ? -1 : 1;
    if (r == 1 && set_valid) {                               /* _hand_to_fpu */
        PyObject *fmts = view_get(rv, sel ? V_SRCB_FORMAT : V_SRCA_FORMAT);
        Py_INCREF(Py_True);
        if (!fmts || PyList_SetItem(valid, bank & 1, Py_True) || !PyList_Check(fmts)
            || set_item_ll(fmts, bank & 1, out_fmt) || set_attr_ll(tx, sel ? s_srcb_unpack_bank : s_srca_unpack_bank,
                                                                   bank ^ 1))
            r = -1;
    }
    return r;
}

/* ------------------------------------------------------------------------------------------------ PACR */
static const int pack_key_list[13] = {0};
static const int pack_key_idx[13] = {0, 1, 2, 12, 13, 18, 19, 24, 28, 68, 70, 71, 180};    /* PACR's cache key */
static const int pacr_rows[11][3] = {[0] = {0, 4, 1}, [1] = {0, 1, 1}, [3] = {0, 2, 1}, [5] = {0, 2, 2},
                                     [10] = {1, 2, 2}};                  /* unpack_pack._PACR_ROWS */

/* _pack_addr_mod's new packer ADCs (a: as adc_read gives them) and the _Cr shadows it sets (cr: as adc_read's order;
 * bit i of *cr_set: cr[i] set). It reads one shadow, cr[1], only where pack_cr_read says so (the caller read it then);
 * -1 where it raises. */
static int pack_addr_mod(long long m, long long a[8], long long cr[8], int *cr_set) {
    if (m >> 10 & 1)
        return -1;
    *cr_set = 0;
    if (m >> 5 & 1)
        a[1] = cr[1] = 0, *cr_set |= 1 << 1;
    else if (m >> 4 & 1)
        a[1] = cr[1] = (cr[1] + (m & 0xF)) & 0x1FFF, *cr_set |= 1 << 1;
    else
        a[1] = (a[1] + (m & 0xF)) & 0x1FFF;
    if (m >> 11 & 1)
        a[5] = cr[5] = 0, *cr_set |= 1 << 5;
    else
        a[5] = (a[5] + (m >> 6 & 0xF)) & 0x1FFF;
    if (m >> 13 & 1)
        a[2] = cr[2] = 0, *cr_set |= 1 << 2;
    else
        a[2] = (a[2] + (m >> 12 & 1)) & 0xFF;
    if (m >> 15 & 1)
        a[6] = cr[6] = 0, *cr_set |= 1 << 6;
    else
        a[6] = (a[6] + (m >> 14 & 1)) & 0xFF;
    return 0;
}

/* whether pack_addr_mod(m) reads the shadow cr[1] (YsrcCR without YsrcClear): most address modifiers read no shadow,
 * so the PACR reads none (it had read all 8, and compared all 8 to write them back) */
static int pack_cr_read(long long m) {
    return !(m >> 5 & 1) && m >> 4 & 1;
}

/* The shadow items of ADC set s that `set` names (bit i: item i in adc_read's order) written as v[i] where they
 * differ (an equal one keeps its int); `adc_cr` as adc_read checks it. 0 or -1. */
static int adc_items_write(PyObject *adc_cr, int s, int set, const long long v[8]) {
    if (!set)
        return 0;
    if (!adc_shaped(adc_cr, s))
        return -1;
    PyObject *chans = PyList_GET_ITEM(adc_cr, s);
    for (int i = 0; i < 8; i++) {
        PyObject *ch = PyList_GET_ITEM(chans, i >> 2);
        long long old;
        if (set >> i & 1 && (list_lls(ch, i & 3, 1, &old) || (old != v[i] && set_item_ll(ch, i & 3, v[i]))))
            return -1;
    }
    return 0;
}

/* a tuple of the n integers v (a new reference), or NULL with an exception set; without Py_BuildValue's format
 * parsing, which had cost more than the tuple (mop_batch_native.c's key tuples) */
static PyObject *ints_tuple(const long long *v, Py_ssize_t n) {
    PyObject *t = PyTuple_New(n);
    for (Py_ssize_t i = 0; t && i < n; i++) {
        PyObject *o = PyLong_FromLongLong(v[i]);
        if (!o)
            Py_CLEAR(t);
        else
            PyTuple_SET_ITEM(t, i, o);
    }
    return t;
}

static const int pack_cfg_read[12] = {14, 20, 21, 22, 23, 24, 25, 26, 27, 28, 69, 180};
static const int pack_tcfg_read[5] = {0, 37, 38, 39, 40};     /* CFG_STATE_ID, ADDR_MOD_PACK_SEC0..3 */

/* The Tensix's packer stream state (unpack_pack.py's _packer: open, addr, exp_addr, then the tile position
 * generator's X, Y, Z) as PACR reads it: whether the stream is open and the five ints. 0, or -1 with an exception set
 * (not a list of six items, an int that is not one). */
enum { PK_OPEN, PK_ADDR, PK_EXP_ADDR, PK_TPG, PK_N = PK_TPG + 3 };
static int packer_read(PyObject *pk, int *open, long long v[PK_N]) {
    if (!PyList_Check(pk) || PyList_GET_SIZE(pk) != PK_N) {
        PyErr_SetString(PyExc_TypeError, "tile_handler: the packer state is not a list of six items");
        return -1;
    }
    *open = PyObject_IsTrue(PyList_GET_ITEM(pk, PK_OPEN));
    return *open < 0 ? -1 : list_lls(pk, PK_ADDR, PK_N - PK_ADDR, v + PK_ADDR);
}

/* The packer stream state after a PACR written back: the open flag and the ints that differ from `old` (an
 * unchanged one keeps its equal int, as adc_write does). 0 or -1. */
static int packer_write(PyObject *pk, PyObject *open, const long long old[PK_N], const long long v[PK_N]) {
    if (PyList_GET_ITEM(pk, PK_OPEN) != open && PyList_SetItem(pk, PK_OPEN, Py_NewRef(open)) < 0)
        return -1;
    for (int i = PK_ADDR; i < PK_N; i++)
        if (v[i] != old[i] && set_item_ll(pk, i, v[i]))
            return -1;
    return 0;
}

/* whether every row's edge mask keeps all 16 columns (row r's mask: config word 24 + its 2-bit field r of the mapping
 * word), checked per mask word where some is not all ones (a row's look-up had cost ~6 instructions, 16 a PACR) */
static int edge_masks_keep_all(const long long *c) {
    long long mapping = c[20 + (c[24] >> 17 & 3)];
    int full = 0;
    for (int k = 0; k < 4; k++)
        full |= ((c[24 + k] & 0xFFFF) == 0xFFFF) << k;
    if (full == 0xF || (!mapping && full & 1))
        return 1;
    for (int row = 0; row < 16; row++)
        if (!(full >> (mapping >> 2 * row & 3) & 1))
            return 0;
    return 1;
}

static int h_pacr(run_view *rv, PyObject *fields, PyObject *cfg, PyObject *tcfg) {
    static PyObject **const pack_keys[] = {&k_addr_mode, &k_last};
    PyObject *lists[1] = {cfg};
    int open;
    long long s[19], c[181], tc[53], a[8], cr[8] = {0}, a_before[8], f[2], am, last, pk[PK_N] = {0}, pk_after[PK_N];
    int cr_set;
    int found = setup_lookup(rv, V_PACK_SETUPS, &pack_memo, fields, lists, pack_key_list, pack_key_idx, 13, 19, 0, s);
    if (found <= 0)
        return found;
    PyObject *adc = view_get(rv, V_ADC), *adc_cr = adc ? view_get(rv, V_ADC_CR) : NULL;
    PyObject *packer = adc_cr ? view_get(rv, V_PACKER) : NULL;
    /* (adc_cr's shape checked before anything changes, as the PACR's write of it at the end relies on it) */
    if (!packer || packer_read(packer, &open, pk) || adc_read(adc, 2, a) || !adc_shaped(adc_cr, 2)
        || list_pick(cfg, 181, pack_cfg_read, 12, c) || list_pick(tcfg, 53, pack_tcfg_read, 5, tc)
        || fields_read(fields, pack_keys, 2, f))
        return -1;
    am = f[0], last = f[1];
    if ((am & 3) == am && pack_cr_read(tc[37 + am]) && adc_read(adc_cr, 2, cr))
        return -1;
    memcpy(a_before, a, sizeof a);
    memcpy(pk_after, pk, sizeof pk);
    adc_x_keep(rv, 2, a);
    long long sel = s[0], c68 = s[1], rd32 = s[5], esz = s[12], out_bits = s[13], ys = s[14], zs = s[15], ws = s[16];
    long long kind = s[18], per = a[4] - a[0] + 1;
    if (kind < 0 || kind >= PACK_KINDS || out_bits != 8 * pack_out_bytes[kind] || tc[0] & 1 || a[0]
        || (per != 16 && !(per == 8 && sel == 1)) || esz <= 0 || ys % esz || zs % esz
        || ws % esz || sel < 0 || sel > 10 || !pacr_rows[sel][1] || (am & 3) != am)
        return 0;
    long long src_addr = (a[1] * ys + a[2] * zs + a[3] * ws) / esz;
    if (src_addr % 16)
        return 0;
    long long n_dst_rows = rd32 ? 512 : 1024, row0 = src_addr / 16 + (c[180] & 0xFFF);
    if (!rd32)
        row0 &= n_dst_rows - 1;
    long long first = pacr_rows[sel][0] + row0, n_rows = pacr_rows[sel][1], step = pacr_rows[sel][2];
    if (first + step * (n_rows - 1) >= n_dst_rows || first < 0)
        return 0;
    long long count = per * n_rows, *pos = pk_after + PK_TPG;
    if (!open) {                                              /* stream start */
        if (a[6] || a[7])
            return 0;
        pk_after[PK_EXP_ADDR] = (c[69] + 1) * 16 + 16 * ((a[5] * (c[14] >> 16)) >> 4);
        pk_after[PK_ADDR] = pk_after[PK_EXP_ADDR] + (out_bits <= 8 ? 16 * (c68 >> 16) : 0);
        pos[0] = pos[1] = pos[2] = 0;
    }
    /* _edge_masks where every row's mask keeps all 16 columns (the rest is Python's): every datum kept, the tile
     * position generator advanced by `count` datums (X per datum, Y per 16, wrapping at pack_reads_per_xy_plane) */
    long long rpp = c[28] >> 8 & 0xFF;
    if (!edge_masks_keep_all(c))
        return 0;
    long long ylin = pos[1] + (pos[0] + count) / 16;
    pos[0] = (pos[0] + count) % 16;
    pos[1] = rpp ? ylin % rpp : ylin;
    pos[2] = rpp ? pos[2] + ylin / rpp : pos[2];
    long long paddr = pk_after[PK_ADDR], nbytes = count * out_bits / 8, end = paddr + nbytes;
    long long pad = last ? (16 - end % 16) % 16 : 0;
    if (out_bits % 8 || paddr < 0 || end < 0 || pack_addr_mod(tc[37 + am], a, cr, &cr_set))
        return 0;
    Py_buffer l1, dv[3];
    if (view_buffer(rv, V_L1, &l1, 1, 0))
        return -1;
    if (end + pad > l1.len) {
        PyBuffer_Release(&l1);
        return 0;
    }
    if (dst_buffers(rv, dv)) {
        PyBuffer_Release(&l1);
        return -1;
    }
    /* taken: from here on the state changes */
    tile_pack(dv[0].buf, (int)first, (int)n_rows, (int)step, (int)per, (int)kind, l1.buf, l1.len, paddr);
    memset((uint8_t *)l1.buf + end, 0, (size_t)pad);
    PyBuffer_Release(&l1);
    for (int i = 0; i < 3; i++)
        PyBuffer_Release(&dv[i]);
    pk_after[PK_ADDR] = end;
    if (packer_write(packer, last ? Py_False : Py_True, pk, pk_after) || adc_write(adc, 2, a_before, a)
        || adc_items_write(adc_cr, 2, cr_set, cr))
        return -1;
    return 1;
}

/* ---------------------------------------------------------------------------------------------- MVMUL, ELW*, MOVA2D */
/* The RWC memo: a thread's RWC dict (compared only), its version tag after C last read or wrote it, and the seven
 * counters then. The counters change with every FPU word, but mostly by C (rwc_write), which records the new tag and
 * values: the next word's read is then a hit where Python has not written the dict since (7 dict look-ups a word
 * before). */
#define RWC_MEMO 4
static struct { PyObject *dict; uint64_t version; long long v[7]; } rwc_memo[RWC_MEMO];
static int rwc_memo_next;

static void rwc_remember(PyObject *rwc, const long long v[7]) {
    if (!DICT_TAGS)
        return;
    int i = 0;
    while (i < RWC_MEMO && rwc_memo[i].dict != rwc)
        i++;
    if (i == RWC_MEMO) {
        i = rwc_memo_next;
        rwc_memo_next = (i + 1) % RWC_MEMO;
    }
    rwc_memo[i].dict = rwc;
    rwc_memo[i].version = dict_version(rwc);
    memcpy(rwc_memo[i].v, v, sizeof rwc_memo[i].v);
}

/* A thread's RWCs (a, a_cr, b, b_cr, d, d_cr in rwc_keys' order, then fid) from its RWC dict; 0 or -1 */
static int rwc_read(PyObject *rwc, long long out[7]) {
    for (int i = 0; DICT_TAGS && i < RWC_MEMO; i++)
        if (rwc_memo[i].dict == rwc && rwc_memo[i].version == dict_version(rwc)) {
            memcpy(out, rwc_memo[i].v, sizeof rwc_memo[i].v);
            return 0;
        }
    for (int k = 0; k < 7; k++) {
        PyObject *v = PyDict_GetItemWithError(rwc, k < 6 ? rwc_keys[k] : h_fid);
        if (!v || get_ll(v, "RWC", &out[k])) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "tile_handler: a thread's RWCs are not a dict of ints");
            return -1;
        }
    }
    rwc_remember(rwc, out);
    return 0;
}

/* the counters that changed from `old` to `v` written back (an unchanged one keeps its equal int) */
static int rwc_write(PyObject *rwc, const long long old[7], const long long v[7]) {
    for (int k = 0; k < 7; k++) {
        if (v[k] == old[k])
            continue;
        PyObject *o = PyLong_FromLongLong(v[k]);
        int bad = !o || PyDict_SetItem(rwc, k < 6 ? rwc_keys[k] : h_fid, o) < 0;
        Py_XDECREF(o);
        if (bad)
            return -1;
    }
    rwc_remember(rwc, v);
    return 0;
}

/* apply_addr_mod(addr_mode) with its fidelity step on the RWCs rwc_read gave (tc: the thread config words
 * fpu_tcfg_pick reads); -1 where it raises (ADDR_MOD bias, DestCToCR with Clear / CR), nothing changed then */
static int rwc_addr_mod(const long long *tc, long long addr_mode, long long rwc[7]) {
    long long ab = tc[12 + addr_mode], dm = tc[28 + addr_mode], n[7];
    memcpy(n, rwc, sizeof n);
    if (tc[47 + addr_mode] || upd(n, ab & 0x3F, ab >> 7 & 1, ab >> 6 & 1, 0, src_rwc_mask)
        || upd(n + 2, ab >> 8 & 0x3F, ab >> 15 & 1, ab >> 14 & 1, 0, src_rwc_mask)
        || upd(n + 4, dm & 0x3FF, dm >> 11 & 1, dm >> 10 & 1, dm >> 12 & 1, dst_rwc_mask))
        return -1;
    n[6] = dm >> 15 & 1 ? 0 : (n[6] + (dm >> 13 & 3)) & 3;
    memcpy(rwc, n, sizeof n);
    return 0;
}

/* Everything the FPU words' common case reads, and _finish's new counters and banks, decided before any change. */
typedef struct {
    long long rwc[7];            /* a, a_cr, b, b_cr, d, d_cr (rwc_keys' order), fid */
    long long rwc_before[7];     /* (the same before the word) */
    long long bank_a, bank_b, fa, fb, ra, rb, rd, phase, flush;    /* ra, rb: the Src rows (RWCs before the word) */
    int release_a, release_b;    /* _release_banks: the bank goes back to the unpacker (else only the FPU moves on) */
} fpu_plan;

/* The checks of _banks_ready, _math_mode (fp32 Dst, 8-bit exponents, no INT8), the rows (_fpu_dst_row) and _finish
 * (apply_addr_mod with its fidelity step, _release_banks) for a word `name` whose Src lists admit `a_class` /
 * `b_class`: 1 with p filled (p->rwc already the counters after the word), 2 with *why set (a new reference: the
 * reason it waits for a Src bank), 0 where Python takes the word, -1 on an error. */
static int fpu_plan_make(run_view *rv, PyObject *rwc, const long long *c, const long long *tc, long long dst_field,
                         long long addr_mode, long long clear_dvalid, int a_class, int b_class, int ra_align,
                         const char *name, fpu_plan *p, PyObject **why) {
    PyObject *va = view_get(rv, V_SRCA_VALID), *vb = va ? view_get(rv, V_SRCB_VALID) : NULL;
    PyObject *fa_l = vb ? view_get(rv, V_SRCA_FORMAT) : NULL;
    PyObject *fb_l = fa_l ? view_get(rv, V_SRCB_FORMAT) : NULL;
    int ok_a = -1, ok_b = -1;
    if (!fb_l || matrix_bank(rv, 0, &p->bank_a) || matrix_bank(rv, 1, &p->bank_b)
        || list_lls(fa_l, p->bank_a & 1, 1, &p->fa) || list_lls(fb_l, p->bank_b & 1, 1, &p->fb)
        || !PyList_Check(va) || !PyList_Check(vb) || PyList_GET_SIZE(va) != 2 || PyList_GET_SIZE(vb) != 2
        || (ok_a = PyObject_IsTrue(PyList_GET_ITEM(va, p->bank_a & 1))) < 0
        || (ok_b = PyObject_IsTrue(PyList_GET_ITEM(vb, p->bank_b & 1))) < 0)
        return -1;
    if (rwc_read(rwc, p->rwc))
        return -1;
    memcpy(p->rwc_before, p->rwc, sizeof p->rwc);
    if (!ok_a || !ok_b) {                            /* _banks_ready's reason */
        *why = PyUnicode_FromFormat("%s: Src%c bank %lld not valid (waiting for the unpacker)", name, ok_a ? 'B' : 'A',
                                    ok_a ? p->bank_b & 1 : p->bank_a & 1);
        return *why ? 2 : -1;
    }
    if (c[0] >> 4 & 1 || c[1] & 7 || c[220] & 3 || c[1] >> 31 & 1 || !(c[1] >> 29 & 1))
        return 0;                                    /* not fp32-Dst, non-INT8, non-stochastic math */
    if (tc[2] & 1)
        p->fa = c[1] >> 17 & 0xF;                    /* _implied_formats: DISABLE_IMPLIED_SRCA_FMT */
    if (tc[3] & 1)
        p->fb = c[1] >> 21 & 0xF;
    if (p->fa < 0 || p->fa > 15 || p->fb < 0 || p->fb > 15 || fmt_class[p->fa] & FMT_5BIT
        || !(fmt_class[p->fa] & a_class) || !(fmt_class[p->fb] & b_class))
        return 0;
    p->ra = p->rwc[0];
    p->rb = p->rwc[2];
    if (p->ra % ra_align || p->rb % 8 || p->ra < 0 || p->ra + 16 > 64 || p->rb < 0 || p->rb + 8 > 64)
        return 0;                                    /* (rows past the Src bank: Python's slice says what happens) */
    p->rd = ((tc[1] & 0xFFF) + p->rwc[4] + dst_field) & 1023;
    if (p->rd % 8 || p->rd + 8 > 512)
        return 0;
    p->phase = (p->rwc[6] + tc[11]) & 3;
    p->flush = !(c[2] & 1);
    /* _finish: apply_addr_mod(addr_mode) (no bias state; not DestCToCR with Clear / CR), then the bank release */
    if (rwc_addr_mod(tc, addr_mode, p->rwc))
        return 0;
    p->release_a = clear_dvalid & 1 ? (tc[7] & 1 ? 1 : 2) : 0;     /* 2: valid flag cleared too */
    p->release_b = clear_dvalid & 2 ? (tc[7] & 2 ? 1 : 2) : 0;
    return 1;
}

/* _finish's changes: the new RWCs, then the bank release */
static int fpu_plan_commit(run_view *rv, PyObject *rwc, const fpu_plan *p) {
    if (rwc_write(rwc, p->rwc_before, p->rwc))
        return -1;
    for (int side = 0; side < 2; side++) {
        int release = side ? p->release_b : p->release_a;
        if (!release)
            continue;
        long long bank = side ? p->bank_b : p->bank_a;
        if (release == 2) {
            PyObject *valid = view_list(rv, side ? V_SRCB_VALID : V_SRCA_VALID);
            if (!valid || PyList_SetItem(valid, bank & 1, Py_NewRef(Py_False)) < 0)
                return -1;
        }
        if (set_attr_ll(rv->tx, side ? s_srcb_matrix_bank : s_srca_matrix_bank, bank ^ 1))
            return -1;
    }
    return 0;
}

static const int fpu_cfg_read[4] = {0, 1, 2, 220};
static const int fpu_tcfg_read[5] = {1, 2, 3, 7, 11};
static const int addr_mod_base[3] = {12, 28, 47};        /* ADDR_MOD_AB_SEC0, ADDR_MOD_DST_SEC0, ADDR_MOD_BIAS_SEC0 */

/* The thread config words an FPU word reads (fpu_tcfg_read) and, of the 24 ADDR_MOD_*_SEC words, the three of its
 * `addr_mode` (0-7); the other 21 are not read */
static int fpu_tcfg_pick(PyObject *tcfg, long long addr_mode, long long tc[55]) {
    if (list_pick(tcfg, 55, fpu_tcfg_read, 5, tc))
        return -1;
    int am[3];
    for (int k = 0; k < 3; k++)
        am[k] = addr_mod_base[k] + (int)addr_mode;
    return list_pick(tcfg, 55, am, 3, tc);
}

/* MVMUL (no broadcast row) and ELWMUL / ELWADD / ELWSUB */
static int h_fpu(run_view *rv, PyObject *fields, PyObject *cfg, PyObject *tcfg, int code, PyObject **why) {
    static PyObject **const mvmul_keys[] = {&k_dst, &k_addr_mode, &k_clear_dvalid, &k_instr_mod19};
    static PyObject **const elw_keys[] = {&k_dst, &k_addr_mode, &k_clear_dvalid, &k_instr_mod19, &k_dest_accum_en};
    long long c[221], tc[55], f[5] = {0};
    if (list_pick(cfg, 221, fpu_cfg_read, 4, c)
        || (code == H_MVMUL ? fields_read(fields, mvmul_keys, 4, f) : fields_read(fields, elw_keys, 5, f)))
        return -1;
    long long dst_field = f[0], addr_mode = f[1], clear_dvalid = f[2], mod19 = f[3], accum = f[4];
    int mvmul = code == H_MVMUL, mul = code == H_ELWMUL;
    if (dst_field & 7 || (addr_mode & 7) != addr_mode
        || (mvmul ? mod19 != 0 : (mul && accum) || mod19 < 0 || mod19 > 3))
        return 0;                /* (MVMUL's broadcast row, and what the handler refuses first) */
    if (fpu_tcfg_pick(tcfg, addr_mode, tc))
        return -1;
    PyObject *rwc = view_dict(rv, V_RWC);
    if (!rwc)
        return -1;
    fpu_plan p;
    static const char *names[H_CODES] = {[H_MVMUL] = "MVMUL", [H_ELWMUL] = "ELWMUL", [H_ELWADD] = "ELWADD",
                                         [H_ELWSUB] = "ELWSUB"};
    int r = fpu_plan_make(rv, rwc, c, tc, dst_field, addr_mode, clear_dvalid, mvmul ? FMT_MM_A : FMT_ELW_A,
                          mvmul ? FMT_MM_B : FMT_ELW_B, mvmul ? 16 : 8, names[code], &p, why);
    if (r == 1 && !mvmul && !mul && p.phase)
        r = 0;                   /* ELWADD / ELWSUB in a fidelity phase: Python raises */
    if (r == 1 && mvmul) {       /* a pushed MVMUL run with steps recorded: fpu_batch flushes them, in Python */
        PyObject *rec = get_attr(rv->tx, s_mm_record);
        int recorded = rec ? (rec == Py_None ? 0 : PyObject_IsTrue(rec)) : -1;
        Py_XDECREF(rec);
        if (recorded || c[2] & 1)          /* (Zero_Flag_disabled_src: MVMUL refuses it) */
            r = recorded < 0 ? -1 : 0;
    }
    Py_buffer sa, sb, dv[3];
    if (r == 1 && view_buffer(rv, V_SRCA, &sa, 4, 2 * 64 * 16 * 4))
        r = -1;
    else if (r == 1 && view_buffer(rv, V_SRCB, &sb, 4, 2 * 64 * 16 * 4)) {
        PyBuffer_Release(&sa);
        r = -1;
    } else if (r == 1 && dst_buffers(rv, dv)) {
        PyBuffer_Release(&sa);
        PyBuffer_Release(&sb);
        r = -1;
    }
    if (r == 1) {                /* taken: from here on the state changes */
        const uint32_t *a = (const uint32_t *)sa.buf + (p.bank_a & 1) * 64 * 16;
        const uint32_t *b = (const uint32_t *)sb.buf + (p.bank_b & 1) * 64 * 16;
        if (mvmul)
            tile_mvmul(a, (int)p.ra, b, (int)p.rb, dv[0].buf, dv[1].buf, dv[2].buf, (int)p.rd, src19_mask_of[p.fa],
                       src19_mask_of[p.fb], (int32_t)p.phase);
        else
            tile_elw(a, (int)p.ra, b, (int)p.rb, dv[0].buf, dv[1].buf, dv[2].buf, (int)p.rd, src19_mask_of[p.fa],
                     src19_mask_of[p.fb], code - H_ELWMUL, (int)mod19, (int)p.flush, mul || accum, (int)p.phase);
        PyBuffer_Release(&sa);
        PyBuffer_Release(&sb);
        for (int i = 0; i < 3; i++)
            PyBuffer_Release(&dv[i]);
        r = fpu_plan_commit(rv, rwc, &p) ? -1 : 1;
    }
    return r;
}

/* MOVA2D of 8 rows (instr_mod 2) from a SrcA bank of a format it writes as Dst16b BF16 (not TF32, not dest_32b_lo):
 * tensix_fpu.MOVA2D with _mov_to_dst's Dst.write16 (the high halves of Dst32b rows for Dst16b rows with bit 3 clear,
 * the low halves, shuffled, for the others), then apply_addr_mod. */
static int h_mova2d(run_view *rv, PyObject *fields, PyObject *cfg, PyObject *tcfg, PyObject **why) {
    PyObject *tx = rv->tx;
    long long c[221], tc[55], mod, dst_field, src_field, lo, addr_mode, bank, fmt, rwc_v[7], rwc_before[7];
    if (field(fields, k_instr_mod, &mod) || field(fields, k_dst, &dst_field) || field(fields, k_src, &src_field)
        || field(fields, k_dest_32b_lo, &lo) || field(fields, k_addr_mode, &addr_mode)
        || attr_ll(tx, s_srca_matrix_bank, &bank))
        return -1;
    if (mod != 2 || dst_field & 7 || src_field & 7 || (bank & 1) != bank || (addr_mode & 7) != addr_mode)
        return 0;                                    /* (what the handler refuses before the bank test) */
    PyObject *valid = view_get(rv, V_SRCA_VALID);
    int ok = valid && PyList_Check(valid) && PyList_GET_SIZE(valid) == 2 ? PyObject_IsTrue(PyList_GET_ITEM(valid, bank))
                                                                         : -1;
    if (ok < 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "tile_handler: the Src banks' valid flags are not a list of 2");
        return -1;
    }
    if (!ok) {
        *why = PyUnicode_FromFormat("MOVA2D: SrcA bank %lld not valid (waiting for the unpacker)", bank);
        return *why ? 2 : -1;
    }
    PyObject *fmts = view_get(rv, V_SRCA_FORMAT), *rwc = fmts ? view_dict(rv, V_RWC) : NULL;
    if (!rwc || list_lls(fmts, bank, 1, &fmt) || list_pick(cfg, 221, fpu_cfg_read, 4, c)
        || fpu_tcfg_pick(tcfg, addr_mode, tc) || rwc_read(rwc, rwc_v))
        return -1;
    memcpy(rwc_before, rwc_v, sizeof rwc_v);
    if (tc[2] & 1)                                   /* _mov_fmt: the declared format, else the bank's */
        fmt = c[0] >> 4 & 1 ? c[0] & 0xF : c[1] >> 17 & 0xF;
    long long sr = src_field + rwc_v[0], rd = ((tc[1] & 0xFFF) + rwc_v[4] + dst_field) & dst_rwc_mask;
    if (c[220] & 3 || fmt < 0 || fmt > 15 || !(fmt_class[fmt] & FMT_MOV_BF16) || lo || sr % 8 || sr < 0 || sr >= 64
        || rd % 8 || rd + 8 > 1024 || rwc_addr_mod(tc, addr_mode, rwc_v))
        return 0;
    Py_buffer sa, dv[3];
    if (view_buffer(rv, V_SRCA, &sa, 4, 2 * 64 * 16 * 4))
        return -1;
    if (dst_buffers(rv, dv)) {
        PyBuffer_Release(&sa);
        return -1;
    }
    /* taken: from here on the state changes */
    const uint32_t *v = (const uint32_t *)sa.buf + (bank * 64 + sr) * 16;
    int high = !(rd & 8);
    uint32_t *rows32 = dv[0].buf;
    for (long long i = 0; i < 8; i++) {
        long long r32 = ((rd + i) >> 4 << 3 | ((rd + i) & 7)) & 511;         /* dst.py's _row16_to_32 */
        uint32_t *row = rows32 + r32 * 16;
        for (int col = 0; col < 16; col++) {
            uint32_t w = v[i * 16 + col];
            if (!(c[2] & 1) && !(w & 0x7F800000u))
                w = 0;                               /* denormals (and -0) flushed unless Zero_Flag_disabled_src */
            row[col] = high ? (w & 0xFFFF0000u) | (row[col] & 0xFFFFu)
                            : (row[col] & 0xFFFF0000u) | shuffle_bf16(w >> 16);
        }
        ((uint8_t *)dv[1].buf)[r32] = 1;
        ((uint8_t *)dv[2].buf)[rd + i] = 0;
    }
    PyBuffer_Release(&sa);
    for (int i = 0; i < 3; i++)
        PyBuffer_Release(&dv[i]);
    return rwc_write(rwc, rwc_before, rwc_v) ? -1 : 1;
}

/* ------------------------------------------------------------------------------------------------ ADC setters */
static const long long adc_mask[4] = {0x3FFFF, 0x1FFF, 0xFF, 0xFF};      /* config.ADC_MASK, per dimension */

/* SETADC, SETADCXY, SETADCZW, SETADCXX (config.py): up to four (channel, dimension, value) writes to the ADC and
 * its _Cr shadow of every set cnt_set_mask names (_adc_sets: unpacker 0, unpacker 1, packer) */
static int h_adc(run_view *rv, PyObject *fields, long long code) {
    /* (each form's fields read at once through the fields memo: one look-up a field had been a third of the word) */
    static PyObject **const adc_keys[] = {&k_cnt_set_mask, &k_value, &k_channel_index, &k_dimension_index};
    static PyObject **const xx_keys[] = {&k_cnt_set_mask, &k_x_start, &k_x_end2};
    static PyObject **const xy_keys[] = {&k_cnt_set_mask, &k_bit_mask, &k_ch_xy[0], &k_ch_xy[1], &k_ch_xy[2],
                                         &k_ch_xy[3]};
    long long f[6], sets, n = 0, ch[4], dim[4], val[4];
    if (code == H_SETADC) {
        if (fields_read(fields, adc_keys, 4, f))
            return -1;
        val[0] = f[1], ch[0] = f[2], dim[0] = f[3];
        if (val[0] > 0xFFFF || ch[0] < 0 || ch[0] > 1 || dim[0] < 0 || dim[0] > 3)
            return 0;                                /* (the handler refuses a thread override) */
        val[0] &= adc_mask[dim[0]];
        n = 1;
    } else if (code == H_SETADCXX) {
        if (fields_read(fields, xx_keys, 3, f))
            return -1;
        val[0] = f[1], val[1] = f[2];
        ch[0] = dim[0] = dim[1] = 0;
        ch[1] = 1;
        n = 2;
    } else {                                         /* SETADCXY / ZW: bit i of bit_mask writes ch0 x, y, ch1 x, y */
        if (fields_read(fields, xy_keys, 6, f))
            return -1;
        for (int bit = 0; bit < 4; bit++) {
            if (!(f[1] >> bit & 1))
                continue;
            ch[n] = bit >> 1;
            dim[n] = (bit & 1) + (code == H_SETADCZW ? 2 : 0);
            val[n] = f[2 + bit] & adc_mask[dim[n]];
            n++;
        }
    }
    sets = f[0];
    PyObject *adc[2] = {view_get(rv, V_ADC), view_get(rv, V_ADC_CR)};
    if (!adc[0] || !adc[1])
        return -1;
    for (int s = 0; s < 3; s++)                      /* (the shapes first: nothing changes on an error) */
        if (sets >> s & 1 && (!adc_shaped(adc[0], s) || !adc_shaped(adc[1], s)))
            return -1;
    for (int s = 0; s < 3; s++)
        for (int k = 0; sets >> s & 1 && k < n; k++)
            for (int j = 0; j < 2; j++)
                if (set_item_ll(PyList_GET_ITEM(PyList_GET_ITEM(adc[j], s), ch[k]), dim[k], val[k]))
                    return -1;
    return 1;
}

/* ------------------------------------------------------------------------------------------------ register setters
 * SETDMAREG (one 16-bit half of a GPR), SETC16 (one ThreadConfig word) and WRCFG (one or four backend config words
 * from GPRs), config.py's handlers: a word they raise at (SETDMAREG's set_signals_mode form, a register or config
 * index out of range, WRCFG in config state bank 1) is left to them. WRCFG stores the GPR items themselves, as the
 * list assignment does. */
static int h_setter(run_view *rv, PyObject *fields, PyObject *cfg, PyObject *tcfg, long long code) {
    static PyObject **const dma_keys[] = {&k_set_signals_mode, &k_reg_index_16b, &k_payload};
    static PyObject **const c16_keys[] = {&k_setc16_reg, &k_setc16_value};
    static PyObject **const wr_keys[] = {&k_cfg_reg, &k_wr128b, &k_gpr_address};
    long long f[3], old;
    if (code == H_SETC16) {
        if (fields_read(fields, c16_keys, 2, f))
            return -1;
        if (f[0] < 0 || f[0] >= PyList_GET_SIZE(tcfg))          /* (the list is THREAD_CFG_WORDS long) */
            return 0;
        return set_item_ll(tcfg, (Py_ssize_t)f[0], f[1]) ? -1 : 1;
    }
    PyObject *gpr = view_list(rv, V_GPR);
    if (!gpr)
        return -1;
    Py_ssize_t ngpr = PyList_GET_SIZE(gpr);
    if (code == H_SETDMAREG) {
        if (fields_read(fields, dma_keys, 3, f))
            return -1;
        long long g = f[1] >> 1;
        if (f[0] || f[1] < 0 || g >= ngpr)
            return 0;
        if (list_lls(gpr, g, 1, &old))
            return -1;
        return set_item_ll(gpr, (Py_ssize_t)g, f[1] & 1 ? (old & 0xFFFF) | f[2] << 16 : (old & 0xFFFF0000) | f[2])
            ? -1 : 1;
    }
    if (fields_read(fields, wr_keys, 3, f) || list_lls(tcfg, 0, 1, &old))
        return -1;
    long long n = f[1] ? 4 : 1, idx = f[1] ? f[0] & ~3 : f[0], g = f[1] ? f[2] & ~3 : f[2];
    if (old & 1 || idx < 0 || idx + n > PyList_GET_SIZE(cfg) || g < 0 || g + n > ngpr)
        return 0;                                    /* (check_state_bank; the list is CFG_WORDS long) */
    for (long long k = 0; k < n; k++)
        if (PyList_SetItem(cfg, (Py_ssize_t)(idx + k), Py_NewRef(PyList_GET_ITEM(gpr, g + k))) < 0)
            return -1;
    return 1;
}

/* ------------------------------------------------------------------------------------------------ ZEROACC
 * tensix_fpu.ZEROACC with Dst.undefine32 / undefine16 on the Dst arrays, then (one-row and 16-row modes)
 * apply_addr_mod; a form it raises at (Revert, a Dst remap, a row or face out of range, INT8 math, ADDR_MOD bias or
 * DestCToCR with Clear / CR) is left to it. */
static void zeroacc_rows(Py_buffer dv[3], long long first, long long n, int dst32b) {
    uint32_t *rows32 = dv[0].buf;
    uint8_t *written = dv[1].buf, *cleared16 = dv[2].buf;
    for (long long r = first; r < first + n; r++) {
        if (dst32b) {                                /* undefine32: the whole row, its high half's mark */
            long long r32 = r & 511;
            memset(rows32 + r32 * 16, 0, 16 * sizeof *rows32);
            cleared16[(r32 & 0x1F8) << 1 | (r32 & 7)] = 1;
            written[r32] = 0;
        } else {                                     /* undefine16: one half of a Dst32b row */
            long long r16 = r & 1023, r32 = (r16 >> 4) << 3 | (r16 & 7);
            uint32_t keep = r16 & 8 ? 0xFFFF0000u : 0x0000FFFFu;
            for (int col = 0; col < 16; col++)
                rows32[r32 * 16 + col] &= keep;
            cleared16[r16] = 1;
            written[r32] = 0;
        }
    }
}

static int h_zeroacc(run_view *rv, PyObject *fields, PyObject *cfg, PyObject *tcfg) {
    static PyObject **const keys[] = {&k_clear_mode, &k_use_32_bit_mode, &k_clear_zero_flags, &k_where, &k_addr_mode};
    long long f[5], c[221], tc[55], rwc_v[7], rwc_before[7];
    PyObject *rwc = view_dict(rv, V_RWC);
    if (!rwc || fields_read(fields, keys, 5, f) || list_pick(cfg, 221, fpu_cfg_read, 4, c))
        return -1;
    long long mode = f[0] | f[1] << 2, imm = f[3], addr_mode = f[4], first, n;
    int dst32b, moves = (mode & 3) <= 1;
    if (f[2] || c[220] & 3 || (addr_mode & 7) != addr_mode)
        return 0;                                    /* (Revert, a Dst remap: the handler raises) */
    if (fpu_tcfg_pick(tcfg, addr_mode, tc) || rwc_read(rwc, rwc_v))
        return -1;
    memcpy(rwc_before, rwc_v, sizeof rwc_v);
    long long offset = (tc[1] & 0xFFF) + rwc_v[4];
    int absolute = c[220] >> 3 & 1;
    if (mode == 0 || mode == 4) {                    /* one row: Dst32b with a 32-bit Dst, else Dst16b */
        first = imm + offset, n = 1, dst32b = c[1] >> 29 & 1;
        if (first >= 1024 || c[1] >> 31 & 1 || (dst32b && first >= 512))
            return 0;
    } else if (mode == 1) {                          /* 16 Dst16b rows */
        first = 16 * (imm + (!absolute && offset & 512 ? 32 : 0)), n = 16, dst32b = 0;
        if (first >= 64 * 16)
            return 0;
    } else if (mode == 5) {                          /* 16 Dst32b rows */
        first = 16 * (imm + (!absolute && offset & 0x300 ? 16 : 0)), n = 16, dst32b = 1;
        if (first >= 32 * 16)
            return 0;
    } else if (mode == 2 || mode == 6) {             /* half of Dst */
        first = 512 * imm, n = 512, dst32b = 0;
        if (imm > 1)
            return 0;
    } else if (mode == 3 || mode == 7) {             /* all of Dst */
        first = 0, n = 1024, dst32b = 0;
        if (imm)
            return 0;
    } else {
        return 0;
    }
    if (first < 0 || (moves && rwc_addr_mod(tc, addr_mode, rwc_v)))
        return 0;
    Py_buffer dv[3];
    if (dst_buffers(rv, dv))
        return -1;
    zeroacc_rows(dv, first, n, dst32b);              /* taken: from here on the state changes */
    for (int i = 0; i < 3; i++)
        PyBuffer_Release(&dv[i]);
    return moves && rwc_write(rwc, rwc_before, rwc_v) ? -1 : 1;
}

/* ------------------------------------------------------------------------------------------------ sync unit, RWCs
 * STALLWAIT and SEMWAIT (the latch they leave on the thread), SEMPOST and SEMGET (sync.py) and SETRWC (tensix_fpu.py);
 * and for plain_word what it asked Python around a word: whether a latch's conditions are met (latch_unmet: C answers
 * "met"; the reason text of an unmet one stays Python's), the release of a wait's unit-busy conditions
 * (TensixTiming.waited) and a SEMPOST's post stamps (stamp_posts). A handler declines (0) where the Python one raises
 * (strict: a SEMPOST at Max, a SEMGET at zero; releasing a Src bank that is not valid), and each question goes to the
 * Python method where that method is not the reference one (a spy on the class or the instance). */
static PyObject *sync_module, *ref_latch_unmet, *ref_stamp_posts, *ref_waited, *ref_poll_latches, *ref_latch_init,
    *ref_sfpu_busy, *ref_busy_until;
static int list_ll(PyObject *list, Py_ssize_t i, long long *out);     /* (sfpu_issue_native.c: a list or a view) */
static long long stallwait_lag, b6_block;

/* the sync module and the reference methods, read at the first use (the modules import this one) */
static int sync_refs(void) {
    if (sync_module)
        return 0;
    PyObject *sync = PyImport_ImportModule("tt_backend.runtime.emu.sync");
    PyObject *cycles = sync ? PyImport_ImportModule("tt_backend.runtime.emu.cycles") : NULL;
    PyObject *mixin = cycles ? PyObject_GetAttrString(sync, "SyncMixin") : NULL;
    PyObject *timing = mixin ? PyObject_GetAttrString(cycles, "TensixTiming") : NULL;
    PyObject *lag = timing ? PyObject_GetAttrString(cycles, "STALLWAIT_LAG") : NULL;
    PyObject *b6 = lag ? PyObject_GetAttrString(sync, "B6") : NULL;
    PyObject *state = b6 ? PyImport_ImportModule("tt_backend.runtime.emu.thread_state") : NULL;
    PyObject *latch = state ? PyObject_GetAttr(state, h_latch_type) : NULL;
    PyObject *sfpu = latch ? PyImport_ImportModule("tt_backend.runtime.emu.sfpu") : NULL;
    PyObject *sfpu_cls = sfpu ? PyObject_GetAttrString(sfpu, "SFPU") : NULL;
    int ok = sfpu_cls && !get_ll(lag, "STALLWAIT_LAG", &stallwait_lag) && !get_ll(b6, "B6", &b6_block)
             && (ref_latch_init = PyObject_GetAttr(latch, h_init))
             && (ref_sfpu_busy = PyObject_GetAttr(timing, h_sfpu_busy))
             && (ref_busy_until = PyObject_GetAttr(sfpu_cls, s_busy_until))
             && (ref_latch_unmet = PyObject_GetAttr(mixin, s_latch_unmet))
             && (ref_stamp_posts = PyObject_GetAttr(mixin, s_stamp_posts))
             && (ref_waited = PyObject_GetAttr(timing, s_waited))
             && (ref_poll_latches = PyObject_GetAttr(mixin, h_poll_latches));
    Py_XDECREF(cycles), Py_XDECREF(mixin), Py_XDECREF(timing), Py_XDECREF(lag), Py_XDECREF(b6);
    Py_XDECREF(state), Py_XDECREF(latch), Py_XDECREF(sfpu), Py_XDECREF(sfpu_cls);
    if (!ok) {
        Py_CLEAR(ref_latch_init);
        Py_CLEAR(ref_sfpu_busy);
        Py_CLEAR(ref_busy_until);
        Py_CLEAR(ref_latch_unmet);
        Py_CLEAR(ref_stamp_posts);
        Py_CLEAR(ref_waited);
        Py_CLEAR(ref_poll_latches);
        Py_XDECREF(sync);
        return -1;
    }
    sync_module = sync;
    return 0;
}

/* Whether class tp's attribute `name` is `ref`, remembered by the class's version tag (a change of the class or of
 * one in its MRO changes it; no two classes are given one): the type look-up is made once per class state, not on
 * every call (its cache is shared by every class and name, and a colliding pair misses there each time) */
typedef struct {
    unsigned int tag;
    int same;
} class_memo;

static int class_attr_is(PyTypeObject *tp, PyObject *name, PyObject *ref, class_memo *m) {
    unsigned int tag = type_tag(tp);
    if (tag && tag == m->tag)
        return m->same;
    m->same = _PyType_Lookup(tp, name) == ref;
    m->tag = type_tag(tp);                   /* (the look-up gives the class a valid tag) */
    return m->same;
}

/* whether o.name is `ref` as its class has it (not replaced on the class or the instance): 1, 0, or -1 with an
 * exception set; the class's answer remembered in m (class_attr_is) where given, else looked up */
static int method_is_ref(PyObject *o, PyObject *name, PyObject *ref, class_memo *m) {
    PyObject **dp = _PyObject_GetDictPtr(o), *own = dp && *dp ? PyDict_GetItemWithError(*dp, name) : NULL;
    if (own || PyErr_Occurred())
        return PyErr_Occurred() ? -1 : 0;
    return m ? class_attr_is(Py_TYPE(o), name, ref, m) : _PyType_Lookup(Py_TYPE(o), name) == ref;
}

/* the semaphores a mask selects, in order (sync.SEM_LISTS): their count */
static int sems_of(long long mask, int out[8]) {
    int n = 0;
    for (int i = 0; i < 8; i++)
        if (mask >> i & 1)
            out[n++] = i;
    return n;
}

/* the Tensix's semaphore values and maxima (each a list of 8) into v and m, and its posts list (borrowed: the view
 * holds it), or NULL with an exception set */
static PyObject *sem_state(run_view *rv, long long v[8], long long m[8]) {
    PyObject *val = view_get(rv, V_SEM_VALUE), *max = val ? view_get(rv, V_SEM_MAX) : NULL;
    PyObject *posts = max ? view_get(rv, V_SEM_POSTS) : NULL;
    if (posts && (!PyList_Check(posts) || PyList_GET_SIZE(posts) != 8 || list_lls(val, 0, 8, v)
                  || list_lls(max, 0, 8, m))) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "tile_handler: the semaphores' posts are not a list of 8");
        return NULL;
    }
    return posts;
}

/* The Latch class new_latch builds in C: one whose instances are made by type's call and object's __new__ and set up by
 * thread_state.Latch's own __init__ (which sets its five __slots__ members and nothing else), with those members'
 * offsets; kept while the class keeps its version tag (any change of it or a class in its MRO, a replaced __init__
 * included, changes the tag). The Python call of the class had been most of a STALLWAIT's cost in C. */
static PyObject **const latch_names[5] = {&s_kind, &s_cond, &h_sems, &s_block, &h_word};
static slot_layout latch_layout;
_Static_assert(sizeof latch_names / sizeof *latch_names <= SLOT_LAYOUT_MOST, "a slot_layout holds the latch's slots");

/* 1 where `cls` is such a class (latch_layout then describes it), else 0 (the class is called) */
static int latch_built_in_c(PyObject *cls) {
    PyTypeObject *tp = (PyTypeObject *)cls;
    if (!wait_in_c || !PyType_CheckExact(cls))
        return 0;
    if (slot_layout_current(&latch_layout, tp))
        return 1;
    if (tp->tp_new != PyBaseObject_Type.tp_new || _PyType_Lookup(tp, h_init) != ref_latch_init
        || tp->tp_setattro != PyObject_GenericSetAttr || tp->tp_getattro != PyObject_GenericGetAttr)
        return 0;                              /* (an own __setattr__ / __getattribute__: the class's way) */
    return slot_layout_of(&latch_layout, tp, latch_names, (int)(sizeof latch_names / sizeof *latch_names));
}

enum { LATCH_KIND, LATCH_COND, LATCH_SEMS, LATCH_BLOCK, LATCH_WORD };      /* (latch_names' order) */

/* latch.<latch_names[k]> (a new reference; NULL with an exception set): the slot read at latch_layout's offset where
 * the latch's class is the one described there, unchanged (get_attr's member path, without its type look-up), else
 * get_attr */
static PyObject *latch_get(PyObject *latch, int k) {
    if (slot_layout_current(&latch_layout, Py_TYPE(latch))) {
        PyObject *v = *(PyObject **)((char *)latch + latch_layout.off[k]);
        if (v)
            return Py_NewRef(v);
    }
    return get_attr(latch, *latch_names[k]);
}

/* latch.<latch_names[k]> as an integer: 0, or -1 with an exception set */
static int latch_ll(PyObject *latch, int k, long long *out) {
    PyObject *v = latch_get(latch, k);
    int r = v ? get_ll(v, "latch field", out) : -1;
    Py_XDECREF(v);
    return r;
}

/* sync.Latch(kind, cond, sems, block, word), the class sync.py names (Latch.__init__ sets its own slots only: the view
 * stays valid): built in C where latch_built_in_c says the call would do just that, else the class is called */
static PyObject *new_latch(PyObject *kind, long long cond, long long sems, long long block, PyObject *word) {
    PyObject *cls = PyDict_GetItemWithError(PyModule_GetDict(sync_module), h_latch_type);
    if (!cls) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_AttributeError, "sync.Latch");
        return NULL;
    }
    PyObject *a[5] = {kind, PyLong_FromLongLong(cond), PyLong_FromLongLong(sems), PyLong_FromLongLong(block), word};
    PyObject *r = NULL;
    if (a[1] && a[2] && a[3] && latch_built_in_c(cls)) {
        PyTypeObject *tp = (PyTypeObject *)cls;
        if ((r = tp->tp_alloc(tp, 0)))
            for (int i = 0; i < 5; i++)
                *(PyObject **)((char *)r + latch_layout.off[i]) = Py_NewRef(a[i]);
    } else if (a[1] && a[2] && a[3]) {
        r = PyObject_Vectorcall(cls, a, 5, NULL);
    }
    Py_XDECREF(a[1]), Py_XDECREF(a[2]), Py_XDECREF(a[3]);
    return r;
}

/* STALLWAIT and SEMWAIT: the latch, whose word is the one being executed (Tensix.current) */
static int h_wait(run_view *rv, PyObject *fields, long long code) {
    static PyObject **const stall_keys[] = {&k_wait_res, &k_stall_res};
    static PyObject **const sem_keys[] = {&k_wait_sem_cond, &k_sem_sel, &k_stall_res};
    long long f[3];
    if (sync_refs()
        || (code == H_STALLWAIT ? fields_read(fields, stall_keys, 2, f) : fields_read(fields, sem_keys, 3, f)))
        return -1;
    PyObject *cur = get_attr(rv->tx, s_current), *latch = NULL;
    if (cur && (!PyTuple_Check(cur) || PyTuple_GET_SIZE(cur) != 3))
        PyErr_SetString(PyExc_TypeError, "tile_handler: Tensix.current is not a 3-tuple");
    else if (cur && code == H_STALLWAIT)
        latch = new_latch(s_stallwait, f[0] ? f[0] : 0x0F, 0, f[1] ? f[1] : b6_block, PyTuple_GET_ITEM(cur, 1));
    else if (cur)                /* SEMWAIT.md: no condition = STALLWAIT with the default condition mask */
        latch = f[0] ? new_latch(h_semwait, f[0], f[1], f[2] ? f[2] : b6_block, PyTuple_GET_ITEM(cur, 1))
                     : new_latch(s_stallwait, 0x0F, 0, f[2] ? f[2] : b6_block, PyTuple_GET_ITEM(cur, 1));
    Py_XDECREF(cur);
    int r = latch ? set_attr(rv->th, s_latch, latch) : -1;
    Py_XDECREF(latch);
    return r ? -1 : 1;
}

/* SEMPOST and SEMGET on the semaphores of sem_sel: decided for all of them before anything changes */
static int h_sem(run_view *rv, PyObject *fields, long long code) {
    static PyObject **const keys[] = {&k_sem_sel};
    long long mask, v[8], m[8];
    int sems[8];
    if (fields_read(fields, keys, 1, &mask))
        return -1;
    PyObject *strict_o = view_get(rv, V_STRICT), *posts = strict_o ? sem_state(rv, v, m) : NULL;
    PyObject *val = posts ? view_get(rv, V_SEM_VALUE) : NULL;
    int strict = val ? PyObject_IsTrue(strict_o) : -1, n = sems_of(mask & 0xFF, sems), r = strict < 0 ? -1 : 1;
    for (int k = 0; strict > 0 && k < n; k++)
        if (code == H_SEMPOST ? v[sems[k]] >= m[sems[k]] : v[sems[k]] == 0)
            r = 0;                               /* (the handler raises at this semaphore: Python's) */
    for (int k = 0; r == 1 && k < n; k++) {
        int i = sems[k];
        PyObject *q = PyList_GET_ITEM(posts, i), *res;
        if (code == H_SEMPOST && v[i] < 15) {
            res = set_item_ll(val, i, v[i] + 1) ? NULL : append_call(q, zero);
        } else if (code == H_SEMGET && v[i] > 0) {
            Py_ssize_t len = set_item_ll(val, i, v[i] - 1) ? -1 : PyObject_Length(q);
            res = len > 0 ? PyObject_CallMethodNoArgs(q, s_popleft) : len == 0 ? Py_NewRef(Py_None) : NULL;
        } else {
            continue;                            /* (SEMPOST at 15 saturates, SEMGET at zero does nothing) */
        }
        if (!res)
            r = -1;
        Py_XDECREF(res);
    }
    return r;
}

/* SETRWC: the counters it sets, then the bank release (_release_banks) */
static int h_setrwc(run_view *rv, PyObject *fields, PyObject *tcfg) {
    static PyObject **const keys[] = {&k_bit_mask, &k_rwc_cr, &k_rwc_a, &k_rwc_b, &k_rwc_d, &k_clear_ab_vld};
    long long f[6], r[7], old[7], cfg7 = 0, bank[2] = {0, 0};
    PyObject *rwc = view_dict(rv, V_RWC), *valid[2] = {NULL, NULL};
    if (!rwc || fields_read(fields, keys, 6, f) || rwc_read(rwc, r))
        return -1;
    long long m = f[0], crs = f[1], release = f[5];
    memcpy(old, r, sizeof r);
    if (m & 1)
        r[0] = r[1] = (f[2] + (crs & 1 ? r[1] : 0)) & src_rwc_mask;
    if (m & 2)
        r[2] = r[3] = (f[3] + (crs & 2 ? r[3] : 0)) & src_rwc_mask;
    if (m & 4 || crs & 8)
        r[4] = r[5] = (f[4] + (crs & 8 ? r[4] : crs & 4 ? r[5] : 0)) & dst_rwc_mask;
    if (m & 8)
        r[6] = 0;
    if (release && (list_lls(tcfg, 7, 1, &cfg7) || attr_ll(rv->tx, s_srca_matrix_bank, &bank[0])
                    || attr_ll(rv->tx, s_srcb_matrix_bank, &bank[1])))
        return -1;
    for (int side = 0; side < 2; side++) {       /* (the bank tests first: a release that raises is Python's) */
        if (!(release >> side & 1) || cfg7 >> side & 1)
            continue;
        valid[side] = view_list(rv, side ? V_SRCB_VALID : V_SRCA_VALID);
        if (!valid[side])
            return -1;
        if ((bank[side] & 1) != bank[side] || PyList_GET_SIZE(valid[side]) != 2)
            return 0;
        int ok = PyObject_IsTrue(PyList_GET_ITEM(valid[side], bank[side]));
        if (ok <= 0)
            return ok;
    }
    if (rwc_write(rwc, old, r))
        return -1;
    for (int side = 0; side < 2; side++) {
        if (!(release >> side & 1))
            continue;
        if (valid[side] && PyList_SetItem(valid[side], bank[side], Py_NewRef(Py_False)) < 0)
            return -1;
        if (set_attr_ll(rv->tx, side ? s_srcb_matrix_bank : s_srca_matrix_bank, bank[side] ^ 1))
            return -1;
    }
    return 1;
}

/* whether the latch's conditions are all met, as sync.latch_unmet decides it: 1 met, 0 not met, 2 ask that method
 * (it is not the reference one, or the state is not what it expects), -1 with an exception set */
static int latch_met(run_view *rv, PyObject *latch) {
    static class_memo unmet_class;
    int ref = sync_refs() ? -1 : method_is_ref(rv->tx, s_latch_unmet, ref_latch_unmet, &unmet_class);
    PyObject *kind = ref > 0 ? latch_get(latch, LATCH_KIND) : NULL;
    if (!kind)
        return ref > 0 ? -1 : ref < 0 ? -1 : 2;
    int sem = PyObject_RichCompareBool(kind, h_semwait, Py_EQ);
    Py_DECREF(kind);
    long long cond, sems, v[8], m[8];
    if (sem < 0 || latch_ll(latch, LATCH_COND, &cond))
        return -1;
    if (sem) {
        int idx[8], n;
        if (latch_ll(latch, LATCH_SEMS, &sems) || !sem_state(rv, v, m))
            return -1;
        n = sems_of(sems & 0xFF, idx);
        for (int k = 0; k < n; k++)
            if ((cond & 1 && v[idx[k]] == 0) || (cond & 2 && v[idx[k]] >= m[idx[k]]))
                return 0;
        return 1;
    }
    if (!(cond & 0x1E0))         /* C0-C4, C9-C12 hold at once in this model; C5-C8: the Src banks' owners */
        return 1;
    PyObject *const bank_of[4] = {s_srca_unpack_bank, s_srcb_unpack_bank, s_srca_matrix_bank, s_srcb_matrix_bank};
    for (int k = 0; k < 4; k++) {
        if (!(cond >> (5 + k) & 1))
            continue;
        PyObject *valid = view_list(rv, k & 1 ? V_SRCB_VALID : V_SRCA_VALID);
        long long bank;
        if (!valid || attr_ll(rv->tx, bank_of[k], &bank))
            return -1;
        if ((bank & 1) != bank || PyList_GET_SIZE(valid) != 2)
            return 2;
        int owned = PyObject_IsTrue(PyList_GET_ITEM(valid, bank));      /* (valid: the FPU owns the bank) */
        if (owned < 0)
            return -1;
        if (owned == (k < 2))
            return 0;
    }
    return 1;
}

/* Tensix.latch_unmet(thread, latch) for plain_word's Wait Gate (a new reference: None when met, else the reason) */
static PyObject *latch_why(run_view *rv, PyObject *tobj, PyObject *latch) {
    int met = latch_met(rv, latch);
    if (met == 1 || met < 0)
        return met < 0 ? NULL : Py_NewRef(Py_None);
    PyObject *stack[3] = {rv->tx, tobj, latch};
    PyObject *why = PyObject_VectorcallMethod(s_latch_unmet, stack, 3 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    view_drop(rv);
    return why;
}

/* tm.sfpu_busy() without the two Python calls where they would read the state as C does: 1 with *v set, 0 where
 * Python is asked, -1 with an exception set. That is where tm.sfpu_busy and tx.raw_sfpu.busy_until are the reference
 * methods (cycles.TensixTiming.sfpu_busy, sfpu.SFPU.busy_until), tm.tx is this run's Tensix and no SFPLOADMACRO work
 * is scheduled: the answer is then the SFPU timing's int busy_until (no SFPU: 0). (The two calls had cost ~7,000
 * instructions a STALLWAIT on the SFPU.) */
static int sfpu_busy_in_c(run_view *rv, long long *v) {
    static class_memo busy_class, until_class;
    int ref = wait_in_c ? method_is_ref(rv->tm, h_sfpu_busy, ref_sfpu_busy, &busy_class) : 0;
    PyObject *tx = ref > 0 ? get_attr(rv->tm, h_tx) : NULL, *raw = NULL;
    Py_XDECREF(tx);                                  /* (compared only) */
    if (ref <= 0 || !tx || tx != rv->tx)
        return ref < 0 || (ref > 0 && !tx) ? -1 : 0;
    if (!(raw = view_get(rv, V_RAW_SFPU)))
        return -1;
    if (raw == Py_None) {
        *v = 0;
        return 1;
    }
    if ((ref = method_is_ref(raw, s_busy_until, ref_busy_until, &until_class)) <= 0)
        return ref;
    PyObject *sch = get_attr(raw, s_scheduled);
    PyObject *timing = sch && PyList_CheckExact(sch) && !PyList_GET_SIZE(sch) ? get_attr(raw, h_timing) : NULL;
    PyObject *until = timing ? get_attr(timing, s_busy_until) : NULL;
    int r = until && PyLong_CheckExact(until) && !get_ll(until, "busy_until", v);
    if (!r)            /* (work scheduled, another type, a missing attribute, an overflow: Python answers or raises) */
        PyErr_Clear();
    Py_XDECREF(sch), Py_XDECREF(timing), Py_XDECREF(until);
    return r;
}

/* After a wait instruction issued at c on thread `tobj` (th): TensixTiming.waited(thread, c, cond, block) for the latch
 * it left (a STALLWAIT's cond, 0 for a SEMWAIT's), in C for the reference method: its unit-busy conditions hold until
 * the units are idle (the Vector Unit's busy time asked of tm.sfpu_busy()), and the block mask lifts STALLWAIT_LAG
 * later. 0, or -1 with an exception set. */
/* gate[i] = (mask, until): on the cycle model's C row its two ints where mask is an int (the pair's objects not
 * made), else the pair set as an item. 0, or -1 with an exception set. */
static int gate_set(PyObject *gate_l, Py_ssize_t i, PyObject *mask, long long until) {
    ThreadTiming *s = row_state(gate_l);
    if (s && i >= 0 && i < 3 && PyLong_Check(mask)) {
        long long m = PyLong_AsLongLong(mask);
        if (m == -1 && PyErr_Occurred())
            return -1;
        s->gate_mask[i] = m, s->gate_until[i] = until;
        return 0;
    }
    PyObject *u = PyLong_FromLongLong(until), *pair = u ? PyTuple_Pack(2, mask, u) : NULL;
    int r = pair ? PySequence_SetItem(gate_l, i, pair) : -1;
    Py_XDECREF(u), Py_XDECREF(pair);
    return r;
}

static int wait_release(run_view *rv, PyObject *gate_l, PyObject *tobj, long long th, long long c) {
    static attr_hint latch_hint;
    PyObject *lt = get_attr_hinted(rv->th, s_latch, &latch_hint);
    if (!lt || lt == Py_None) {
        Py_XDECREF(lt);
        return lt ? 0 : -1;
    }
    PyObject *kind = latch_get(lt, LATCH_KIND), *blk = kind ? latch_get(lt, LATCH_BLOCK) : NULL, *res = NULL;
    int sw = blk ? PyObject_RichCompareBool(kind, s_stallwait, Py_EQ) : -1;
    PyObject *cond = sw == 1 ? latch_get(lt, LATCH_COND) : sw == 0 ? PyLong_FromLong(0) : NULL;
    static class_memo waited_class;
    int ref = !cond ? -1 : sync_refs() ? -1 : method_is_ref(rv->tm, s_waited, ref_waited, &waited_class);
    long long cd = 0, release = c + 1, v;
    if (ref == 0) {
        PyObject *c_o = PyLong_FromLongLong(c);
        PyObject *stack[5] = {rv->tm, tobj, c_o, cond, blk};
        res = c_o ? PyObject_VectorcallMethod(s_waited, stack, 5 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL) : NULL;
        view_drop(rv);
        Py_XDECREF(c_o);
    } else if (ref == 1 && !get_ll(cond, "cond", &cd)) {
        ThreadTiming *ts = tm_state(rv->tm);           /* (the units' busy times: its C members, else by name) */
        PyObject *busy = cd & 6 && !ts ? view_list(rv, V_UNPACK_BUSY) : NULL;
        int bad = cd & 6 && !ts && !busy;
        for (int i = 0; !bad && i < 2; i++)
            if (cd >> (i + 1) & 1 && !(bad = ts ? (v = ts->unpack_busy[i], 0) : list_ll(busy, i, &v)) && v > release)
                release = v;
        if (!bad && cd & 8 && !(bad = ts ? (v = ts->pack_busy, 0) : attr_ll(rv->tm, s_pack_busy, &v)) && v > release)
            release = v;
        if (!bad && cd & 16 && !(bad = ts ? (v = ts->fpu_busy, 0) : attr_ll(rv->tm, s_fpu_busy, &v)) && v > release)
            release = v;
        if (!bad && cd & (1 << 11)) {
            int in_c = sfpu_busy_in_c(rv, &v);
            if (!in_c) {
                PyObject *s = PyObject_CallMethodNoArgs(rv->tm, h_sfpu_busy);
                view_drop(rv);
                bad = !s || get_ll(s, "sfpu_busy", &v);
                Py_XDECREF(s);
            }
            bad = bad || in_c < 0;
            if (!bad && v > release)
                release = v;
        }
        res = !bad && !gate_set(gate_l, th, blk, release + stallwait_lag) ? Py_NewRef(Py_None) : NULL;
    }
    Py_DECREF(lt), Py_XDECREF(kind), Py_XDECREF(blk), Py_XDECREF(cond);
    Py_XDECREF(res);
    return res ? 0 : -1;
}

/* After a SEMPOST of the semaphores of `mask` issued at c: Tensix.stamp_posts(mask, c), in C for the reference method
 * (each one's newest counted post gets the cycle). 0, or -1 with an exception set. */
static int sem_stamp(run_view *rv, long long mask, long long c) {
    static class_memo stamp_class;
    int ref = sync_refs() ? -1 : method_is_ref(rv->tx, s_stamp_posts, ref_stamp_posts, &stamp_class), sems[8], r = -1;
    PyObject *a[3] = {rv->tx, PyLong_FromLongLong(mask), PyLong_FromLongLong(c)}, *res = NULL;
    if (ref == 0 && a[1] && a[2]) {
        res = PyObject_VectorcallMethod(s_stamp_posts, a, 3 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
        view_drop(rv);
        r = res ? 0 : -1;
    } else if (ref == 1 && a[2]) {
        PyObject *posts = view_get(rv, V_SEM_POSTS);
        int n = sems_of(mask & 0xFF, sems);
        r = posts && PyList_Check(posts) && PyList_GET_SIZE(posts) == 8 ? 0 : -1;
        if (posts && r)
            PyErr_SetString(PyExc_TypeError, "plain_run: the semaphores' posts are not a list of 8");
        for (int k = 0; !r && k < n; k++) {
            PyObject *q = PyList_GET_ITEM(posts, sems[k]);
            Py_ssize_t len = PyObject_Length(q);
            r = len < 0 || (len > 0 && PySequence_SetItem(q, len - 1, a[2]) < 0) ? -1 : 0;
        }
    }
    Py_XDECREF(a[1]), Py_XDECREF(a[2]), Py_XDECREF(res);
    return r;
}

/* The handler of word `code` (H_*) in C for thread object `thobj`, after plain_word ran the Wait Gate and flushed the
 * deferred work: 1 done, 2 blocked on a Src bank (*why: the handler's reason, a new reference), 0 not taken (run the
 * Python handler), -1 on an error (see the top of this file). */
static int tile_handler(run_view *rv, PyObject *fields, long long code, PyObject **why) {
    PyObject *cfg = view_get(rv, V_TX_CFG), *tcfg = cfg ? view_get(rv, V_TH_CFG) : NULL;
    int r = -1;
    if (!tcfg || !PyList_Check(cfg) || !PyList_Check(tcfg) || !PyDict_Check(fields)) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "tile_handler: config words or fields of the wrong kind");
    } else if (code == H_UNPACR) {
        r = h_unpacr(rv, fields, cfg, tcfg, why);
    } else if (code == H_PACR) {
        r = h_pacr(rv, fields, cfg, tcfg);
    } else if (code >= H_SETADC && code <= H_SETADCXX) {
        r = h_adc(rv, fields, code);
    } else if (code >= H_SETDMAREG && code <= H_WRCFG) {
        r = h_setter(rv, fields, cfg, tcfg, code);
    } else if (code == H_STALLWAIT || code == H_SEMWAIT) {
        r = h_wait(rv, fields, code);
    } else if (code == H_SEMPOST || code == H_SEMGET) {
        r = h_sem(rv, fields, code);
    } else if (code == H_SETRWC) {
        r = h_setrwc(rv, fields, tcfg);
    } else if (code == H_ZEROACC) {
        r = h_zeroacc(rv, fields, cfg, tcfg);
    } else if (code == H_MOVA2D) {
        r = h_mova2d(rv, fields, cfg, tcfg, why);
    } else if (code >= H_MVMUL && code <= H_ELWSUB) {
        r = h_fpu(rv, fields, cfg, tcfg, (int)code, why);
    } else {
        PyErr_Format(PyExc_ValueError, "tile_handler: no handler code %lld", code);
    }
    if (r == 1)
        handler_taken[code]++;
    return r;
}
