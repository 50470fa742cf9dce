/* The compiled hot path of a repeated kernel launch (see _accel.py): `Plan.admit` + `Plan.hand_over` in one call.
 *
 * admit_move(plan, args, generics, explicit, unchecked, check, fate) does what the pure path's `Plan.admit` then
 * `Plan.hand_over` do for the latest plan of a kernel, in the same order, on the same Python objects (it reads and
 * writes the same slots through the C API, so both paths interoperate): the layout match with each handle's state
 * (fate None, this plan's lent fate, or in flight; storage not freed), the scalar checks, the aliasing re-check, then
 * the moves (a new handle per moved argument, the fate set on the old one, the storage's handle registry updated).
 * It returns (values, after), or None when it does not handle the call: any call the common case does not cover (a
 * user-defined scalar or Const type, a storage with other handles or exports, several lenders, a failed check, a
 * layout mismatch). It returns None only before it changed anything, so the caller then runs the pure path, which
 * accepts or rejects the call and raises the precise typed error. It never raises an ownership error itself.
 *
 * It runs with OWNERSHIP held and the cyclic collector paused (the caller is @owning) and runs no user code: the
 * comparisons it makes are between builtin values (layout tuples, plain scalars), the check it calls is Tile's own.
 * Built against the stable ABI (abi3, Python 3.10+). Free-threaded builds: not supported (no Py_mod_gil slot), so
 * importing it there re-enables the GIL; the ownership lock still orders every step. */
#define Py_LIMITED_API 0x030A0000
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObject *Tensor_t, *Partition_t, *InFlight_t, *IN_FLIGHT, *PLAIN, *FOREIGN;
static allocfunc tensor_alloc, partition_alloc;

/* Interned attribute names. */
static PyObject *s_fate, *s_storage, *s_freed_at, *s_layout, *s_tensor, *s_tile_shape, *s_range, *s__handles,
    *s_exports, *s_dtype, *s_shape, *s_offset, *s_strides, *s_site, *s_given, *s_explicit, *s_generics,
    *s_user_consts, *s_tensors, *s_wrapped, *s_pairs, *s_others, *s_scalars, *s_tail, *s_alias, *s_moved, *s_lent;

#define NAME(var, text)                                                                                              \
    if (!(var = PyUnicode_InternFromString(text))) return -1;

static int intern_names(void) {
    NAME(s_fate, "_fate") NAME(s_storage, "_storage") NAME(s_freed_at, "freed_at") NAME(s_layout, "_layout")
    NAME(s_tensor, "_tensor") NAME(s_tile_shape, "_tile_shape") NAME(s_range, "_range") NAME(s__handles, "_handles")
    NAME(s_exports, "_exports") NAME(s_dtype, "_dtype") NAME(s_shape, "_shape") NAME(s_offset, "_offset")
    NAME(s_strides, "_strides") NAME(s_site, "_site") NAME(s_given, "given") NAME(s_explicit, "explicit")
    NAME(s_generics, "generics") NAME(s_user_consts, "user_consts") NAME(s_tensors, "tensors")
    NAME(s_wrapped, "wrapped") NAME(s_pairs, "pairs") NAME(s_others, "others") NAME(s_scalars, "scalars")
    NAME(s_tail, "tail") NAME(s_alias, "alias") NAME(s_moved, "moved") NAME(s_lent, "lent")
    return 0;
}

/* Outcomes of a step: go on, the call is not handled here (the pure path decides), or a Python error. */
enum { OK = 0, NO = 1, ERR = -1 };

/* A slot's value as a borrowed reference: the object holds it, and nothing here runs code that could reassign it. */
static PyObject *peek(PyObject *o, PyObject *name) {
    PyObject *v = PyObject_GetAttr(o, name);
    if (v) Py_DECREF(v);
    return v;
}

static Py_ssize_t as_index(PyObject *o) { return PyLong_AsSsize_t(o); }

/* A fate a kernel call may take (as `Plan._matches` tests it): none, this plan's own lent fate, or in flight. */
static int takeable(PyObject *f, PyObject *lent) {
    if (f == Py_None || f == lent) return 1;
    if ((PyObject *)Py_TYPE(f) != InFlight_t) return 0;
    return PyTuple_GetItem(f, 0) == IN_FLIGHT;
}

/* The handle's tensor is live: no fate of its own (when wrapped) and its storage not freed. */
static int unfreed(PyObject *t) {
    PyObject *storage = peek(t, s_storage);
    if (!storage) return ERR;
    PyObject *freed = peek(storage, s_freed_at);
    if (!freed) return ERR;
    return freed == Py_None ? OK : NO;
}

/* `layout` is `t._layout` (identity first, then equality of builtin tuples). */
static int same_layout(PyObject *t, PyObject *layout) {
    PyObject *own = peek(t, s_layout);
    if (!own) return ERR;
    if (own == layout) return OK;
    int eq = PyObject_RichCompareBool(own, layout, Py_EQ);
    return eq < 0 ? ERR : eq ? OK : NO;
}

/* `Plan._matches`: the arguments have the plan's layout and every handle is live or takeable. */
static int matches(PyObject *plan, PyObject *args) {
    PyObject *lent = peek(plan, s_lent);
    PyObject *tensors = peek(plan, s_tensors), *wrapped = peek(plan, s_wrapped);
    PyObject *pairs = peek(plan, s_pairs), *others = peek(plan, s_others);
    if (!lent || !tensors || !wrapped || !pairs || !others) return ERR;
    int rc;
    for (Py_ssize_t k = 0, n = PyTuple_Size(tensors); k < n; k++) {
        PyObject *entry = PyTuple_GetItem(tensors, k);
        PyObject *t = PyTuple_GetItem(args, as_index(PyTuple_GetItem(entry, 0)));
        if (!t) return ERR;
        if ((PyObject *)Py_TYPE(t) != Tensor_t) return NO;
        PyObject *f = peek(t, s_fate);
        if (!f) return ERR;
        if (!takeable(f, lent)) return NO;
        if ((rc = unfreed(t)) != OK) return rc;
        if ((rc = same_layout(t, PyTuple_GetItem(entry, 1))) != OK) return rc;
    }
    for (Py_ssize_t k = 0, n = PyTuple_Size(wrapped); k < n; k++) {
        PyObject *entry = PyTuple_GetItem(wrapped, k);
        PyObject *a = PyTuple_GetItem(args, as_index(PyTuple_GetItem(entry, 0)));
        if (!a) return ERR;
        if ((PyObject *)Py_TYPE(a) != PyTuple_GetItem(entry, 1)) return NO;
        PyObject *f = peek(a, s_fate);
        if (!f) return ERR;
        if (!takeable(f, lent)) return NO;
        PyObject *tile = PyTuple_GetItem(entry, 3);
        if (tile != Py_None) {
            PyObject *own = peek(a, s_tile_shape);
            if (!own) return ERR;
            int eq = PyObject_RichCompareBool(own, tile, Py_EQ);
            if (eq <= 0) return eq < 0 ? ERR : NO;
        }
        PyObject *t = peek(a, s_tensor);
        if (!t) return ERR;
        PyObject *tf = peek(t, s_fate);
        if (!tf) return ERR;
        if (tf != Py_None) return NO;
        if ((rc = unfreed(t)) != OK) return rc;
        if ((rc = same_layout(t, PyTuple_GetItem(entry, 2))) != OK) return rc;
    }
    for (Py_ssize_t k = 0, n = PyTuple_Size(pairs); k < n; k++) {
        PyObject *pair = PyTuple_GetItem(pairs, k);
        PyObject *a = PyTuple_GetItem(args, as_index(PyTuple_GetItem(pair, 0)));
        PyObject *b = PyTuple_GetItem(args, as_index(PyTuple_GetItem(pair, 1)));
        if (!a || !b) return ERR;
        if (a == b) return NO;
    }
    for (Py_ssize_t k = 0, n = PyTuple_Size(others); k < n; k++) {
        PyObject *entry = PyTuple_GetItem(others, k);
        PyObject *a = PyTuple_GetItem(args, as_index(PyTuple_GetItem(entry, 0)));
        if (!a) return ERR;
        if ((PyObject *)Py_TYPE(a) != PyTuple_GetItem(entry, 1)) return NO;
        if (PyTuple_GetItem(entry, 2) == Py_True) {  /* a Const: its class is plain (user_consts is false) */
            int eq = PyObject_RichCompareBool(a, PyTuple_GetItem(entry, 3), Py_EQ);
            if (eq <= 0) return eq < 0 ? ERR : NO;
        }
    }
    return PyErr_Occurred() ? ERR : OK;
}

/* The scalar checks of `Plan.try_launch`, for plain scalar classes only (a user type's __int__ needs the recheck
 * the pure path does). A failed check is not handled: the full path reports it, in argument order. */
static int scalars_ok(PyObject *plan, PyObject *args, PyObject *check) {
    PyObject *scalars = peek(plan, s_scalars);
    if (!scalars) return ERR;
    for (Py_ssize_t k = 0, n = PyTuple_Size(scalars); k < n; k++) {
        PyObject *entry = PyTuple_GetItem(scalars, k);
        PyObject *value = PyTuple_GetItem(args, as_index(PyTuple_GetItem(entry, 0)));
        if (!value) return ERR;
        int plain = PySet_Contains(PLAIN, (PyObject *)Py_TYPE(value));
        if (plain <= 0) return plain < 0 ? ERR : NO;
        PyObject *r = PyObject_CallFunctionObjArgs(check, PyTuple_GetItem(entry, 1), value, NULL);
        if (!r) {
            PyErr_Clear();
            return NO;
        }
        Py_DECREF(r);
    }
    return OK;
}

static int range_of(PyObject *t, unsigned long long *lo, unsigned long long *hi) {
    PyObject *r = peek(t, s_range);
    if (!r) return ERR;
    *lo = PyLong_AsUnsignedLongLong(PyTuple_GetItem(r, 0));
    *hi = PyLong_AsUnsignedLongLong(PyTuple_GetItem(r, 1));
    if (PyErr_Occurred()) {
        PyErr_Clear();
        return NO;  /* not a plain address range: the pure path compares the ints */
    }
    return OK;
}

static PyObject *tensor_of(PyObject *a) { return (PyObject *)Py_TYPE(a) == Tensor_t ? a : peek(a, s_tensor); }

/* `_overlaps`, common case only: no output overlaps another argument, and each output's storage holds no other
 * handle, no export and there are no foreign imports. Anything else is not handled (the pure path searches). */
static int no_overlap(PyObject *plan, PyObject *args) {
    PyObject *alias = peek(plan, s_alias);
    if (!alias) return ERR;
    for (Py_ssize_t k = 0, n = PyTuple_Size(alias); k < n; k++) {
        PyObject *entry = PyTuple_GetItem(alias, k);
        PyObject *out = PyTuple_GetItem(args, as_index(PyTuple_GetItem(entry, 0)));
        if (!out) return ERR;
        PyObject *t = peek(out, s_tensor);
        if (!t) return ERR;
        unsigned long long lo, hi, olo, ohi;
        int rc = range_of(t, &lo, &hi);
        if (rc != OK) return rc;
        PyObject *others = PyTuple_GetItem(entry, 1);
        for (Py_ssize_t m = 0, nn = PyTuple_Size(others); m < nn; m++) {
            PyObject *a = PyTuple_GetItem(args, as_index(PyTuple_GetItem(others, m)));
            PyObject *ot = a ? tensor_of(a) : NULL;
            if (!ot) return ERR;
            if ((rc = range_of(ot, &olo, &ohi)) != OK) return rc;
            if (olo < hi && lo < ohi) return NO;
        }
        PyObject *storage = peek(t, s_storage);
        if (!storage) return ERR;
        PyObject *handles = peek(storage, s__handles), *exports = peek(storage, s_exports);
        if (!handles || !exports) return ERR;
        if (PyDict_Size(handles) != 1 || PyDict_Size(FOREIGN) != 0) return NO;
        int any = PyObject_IsTrue(exports);
        if (any) return any < 0 ? ERR : NO;
    }
    return PyErr_Occurred() ? ERR : OK;
}

/* `Tensor._hand_over`: a new handle on the same view takes this one's place in the storage's registry. */
static PyObject *move_tensor(PyObject *v, PyObject *fate) {
    static PyObject **copied[] = {&s_storage, &s_dtype, &s_shape, &s_offset, &s_strides, &s_site, &s_range, &s_layout};
    PyObject *new = tensor_alloc((PyTypeObject *)Tensor_t, 0);
    if (!new) return NULL;
    for (size_t k = 0; k < sizeof copied / sizeof *copied; k++) {
        PyObject *value = PyObject_GetAttr(v, *copied[k]);
        int rc = value ? PyObject_SetAttr(new, *copied[k], value) : -1;
        Py_XDECREF(value);
        if (rc) goto fail;
    }
    if (PyObject_SetAttr(new, s_fate, Py_None)) goto fail;
    PyObject *storage = peek(v, s_storage);
    PyObject *handles = storage ? peek(storage, s__handles) : NULL;
    if (!handles) goto fail;
    PyObject *old_key = PyLong_FromVoidPtr(v), *new_key = PyLong_FromVoidPtr(new), *ref = PyWeakref_NewRef(new, NULL);
    int rc = !old_key || !new_key || !ref;
    if (!rc && PyDict_DelItem(handles, old_key)) {  /* handles.pop(id(self), None) */
        if (PyErr_ExceptionMatches(PyExc_KeyError)) PyErr_Clear();
        else rc = 1;
    }
    rc = rc || PyDict_SetItem(handles, new_key, ref) || PyObject_SetAttr(v, s_fate, fate);
    Py_XDECREF(old_key);
    Py_XDECREF(new_key);
    Py_XDECREF(ref);
    if (rc) goto fail;
    return new;
fail:
    Py_DECREF(new);
    return NULL;
}

/* `Partition._hand_over`: a new partition wraps the same tensor (which stays registered). */
static PyObject *move_partition(PyObject *v, PyObject *fate) {
    PyObject *new = partition_alloc((PyTypeObject *)Partition_t, 0);
    if (!new) return NULL;
    PyObject *t = PyObject_GetAttr(v, s_tensor), *tile = PyObject_GetAttr(v, s_tile_shape);
    int rc = !t || !tile || PyObject_SetAttr(new, s_tensor, t) || PyObject_SetAttr(new, s_tile_shape, tile) ||
             PyObject_SetAttr(new, s_fate, Py_None) || PyObject_SetAttr(v, s_fate, fate);
    Py_XDECREF(t);
    Py_XDECREF(tile);
    if (rc) {
        Py_DECREF(new);
        return NULL;
    }
    return new;
}

static PyObject *admit_move(PyObject *self, PyObject *const *argv, Py_ssize_t n) {
    (void)self;
    if (n != 7) return PyErr_Format(PyExc_TypeError, "admit_move takes 7 arguments, got %zd", n);
    if (!Tensor_t) return PyErr_Format(PyExc_RuntimeError, "tile.frontend._fastlaunch.bind() was not called");
    PyObject *plan = argv[0], *args = argv[1], *generics = argv[2], *explicit = argv[3], *check = argv[5];
    PyObject *fate = argv[6];
    int unchecked = PyObject_IsTrue(argv[4]);
    if (unchecked < 0 || !PyTuple_Check(args)) return unchecked < 0 ? NULL : Py_NewRef(Py_None);
    /* Plan.admit's preamble: the argument count, the grid object, the generics; a user type's Const or generic
     * (user_consts) needs the pure path's recheck. */
    PyObject *given = peek(plan, s_given), *plan_explicit = peek(plan, s_explicit);
    PyObject *plan_generics = peek(plan, s_generics), *user_consts = peek(plan, s_user_consts);
    if (!given || !plan_explicit || !plan_generics || !user_consts) return NULL;
    if (PyTuple_Size(args) != as_index(given) || explicit != plan_explicit || user_consts != Py_False)
        Py_RETURN_NONE;
    int eq = PyObject_RichCompareBool(generics, plan_generics, Py_EQ);
    if (eq <= 0) return eq < 0 ? NULL : Py_NewRef(Py_None);
    int rc = matches(plan, args);
    if (rc == OK) rc = scalars_ok(plan, args, check);
    if (rc == OK && !unchecked) rc = no_overlap(plan, args);
    if (rc != OK) return rc == ERR ? NULL : Py_NewRef(Py_None);

    /* The call's values (trailing keyword Consts appended), and the one lender of the handles taken in flight (several
     * lenders: the pure path collects them). Nothing has changed yet. */
    PyObject *tail = peek(plan, s_tail), *moved = peek(plan, s_moved);
    if (!tail || !moved) return NULL;
    Py_ssize_t nargs = PyTuple_Size(args), ntail = PyTuple_Size(tail);
    PyObject *after = Py_None;
    for (Py_ssize_t k = 0, m = PyTuple_Size(moved); k < m; k++) {
        PyObject *v = PyTuple_GetItem(args, as_index(PyTuple_GetItem(moved, k)));
        PyObject *f = v ? peek(v, s_fate) : NULL;
        if (!f) return NULL;
        if (f != Py_None && f != after) {
            if (after != Py_None) Py_RETURN_NONE;
            after = f;
        }
    }
    PyObject *out = PyTuple_New(nargs + ntail);
    if (!out) return NULL;
    for (Py_ssize_t k = 0; k < nargs + ntail; k++) {
        PyObject *v = k < nargs ? PyTuple_GetItem(args, k) : PyTuple_GetItem(tail, k - nargs);
        Py_INCREF(v);
        PyTuple_SetItem(out, k, v);
    }
    Py_INCREF(after);  /* the moves below replace the fate that holds it */
    for (Py_ssize_t k = 0, m = PyTuple_Size(moved); k < m; k++) {
        Py_ssize_t i = as_index(PyTuple_GetItem(moved, k));
        PyObject *v = PyTuple_GetItem(out, i);
        PyObject *new = (PyObject *)Py_TYPE(v) == Tensor_t ? move_tensor(v, fate) : move_partition(v, fate);
        if (!new) {
            Py_DECREF(after);
            Py_DECREF(out);
            return NULL;
        }
        PyTuple_SetItem(out, i, new);  /* steals new, drops the old handle (args still holds it) */
    }
    PyObject *result = PyTuple_Pack(2, out, after);
    Py_DECREF(out);
    Py_DECREF(after);
    return result;
}

/* bind(Tensor, Partition, InFlight, IN_FLIGHT, PLAIN, FOREIGN): the classes and registries the hot path tests. */
static PyObject *bind(PyObject *self, PyObject *const *argv, Py_ssize_t n) {
    (void)self;
    if (n != 6) return PyErr_Format(PyExc_TypeError, "bind takes 6 arguments, got %zd", n);
    if (!PyType_Check(argv[0]) || !PyType_Check(argv[1]) || !PyType_Check(argv[2]))
        return PyErr_Format(PyExc_TypeError, "bind: Tensor, Partition and InFlight must be classes");
    if (!PyFrozenSet_Check(argv[4]) || !PyDict_Check(argv[5]))
        return PyErr_Format(PyExc_TypeError, "bind: PLAIN must be a frozenset and FOREIGN a dict");
    tensor_alloc = (allocfunc)PyType_GetSlot((PyTypeObject *)argv[0], Py_tp_alloc);
    partition_alloc = (allocfunc)PyType_GetSlot((PyTypeObject *)argv[1], Py_tp_alloc);
    if (!tensor_alloc || !partition_alloc) return PyErr_Format(PyExc_TypeError, "bind: classes without tp_alloc");
    PyObject **slots[] = {&Tensor_t, &Partition_t, &InFlight_t, &IN_FLIGHT, &PLAIN, &FOREIGN};
    for (int k = 0; k < 6; k++) {
        Py_XDECREF(*slots[k]);
        *slots[k] = Py_NewRef(argv[k]);
    }
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"admit_move", (PyCFunction)(void (*)(void))admit_move, METH_FASTCALL,
     "admit_move(plan, args, generics, explicit, unchecked, check, fate) -> (values, after) | None"},
    {"bind", (PyCFunction)(void (*)(void))bind, METH_FASTCALL,
     "bind(Tensor, Partition, InFlight, IN_FLIGHT, PLAIN, FOREIGN)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fastlaunch", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__fastlaunch(void) {
    if (intern_names()) return NULL;
    return PyModule_Create(&module);
}
