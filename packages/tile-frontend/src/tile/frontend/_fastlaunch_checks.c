/* The compiled path's admission checks (`Plan._matches`, the scalar checks of `Plan.try_launch`, `_overlaps`): read
 * only, they change nothing, and say OK, NO (not handled: the pure path decides) or ERR. */
#include "_fastlaunch.h"

/* A fate a kernel call may take (as `Plan._matches` tests it): none, this plan's own lent fate, or in flight. */
static int takeable(PyObject *f, PyObject *lent) {
    if (f == Py_None || f == lent) return 1;
    if ((PyObject *)Py_TYPE(f) != InFlight_t) return 0;
    return PyTuple_GetItem(f, 0) == IN_FLIGHT;
}

/* The tensor's storage, when it is a Storage (NULL: not handled). */
PyObject *storage_of(PyObject *t) {
    PyObject *s = GET(t, T_STORAGE);
    return s && (PyObject *)Py_TYPE(s) == Storage_t ? s : NULL;
}

/* A bare tensor argument: exactly a Tensor, with a takeable fate, unfreed, of this layout. */
static int tensor_ok(PyObject *t, PyObject *layout, PyObject *lent) {
    if ((PyObject *)Py_TYPE(t) != Tensor_t) return NO;
    PyObject *f = GET(t, T_FATE), *s = storage_of(t), *own = GET(t, T_LAYOUT);
    if (!f || !s || !own || !takeable(f, lent) || GET(s, S_FREED) != Py_None) return NO;
    if (own == layout) return OK;
    int eq = PyObject_RichCompareBool(own, layout, Py_EQ);
    return eq < 0 ? ERR : eq ? OK : NO;
}

/* A wrapped argument (Partition or Shared): this class, takeable, this tile shape, its tensor live and of this
 * layout. */
static int wrapper_ok(PyObject *a, PyObject *entry, PyObject *lent) {
    PyObject *cls = PyTuple_GetItem(entry, 1), *layout = PyTuple_GetItem(entry, 2), *tile = PyTuple_GetItem(entry, 3);
    if ((PyObject *)Py_TYPE(a) != cls || (cls != Partition_t && cls != Shared_t)) return NO;
    PyObject *f = GET(a, W_FATE), *t = GET(a, W_TENSOR);
    if (!f || !t || !takeable(f, lent) || (PyObject *)Py_TYPE(t) != Tensor_t) return NO;
    if (tile != Py_None) {
        PyObject *own = GET(a, P_TILE);
        if (!own) return NO;
        int eq = PyObject_RichCompareBool(own, tile, Py_EQ);
        if (eq <= 0) return eq < 0 ? ERR : NO;
    }
    return GET(t, T_FATE) == Py_None ? tensor_ok(t, layout, lent) : NO;
}

/* `Plan._matches`: the arguments have the plan's layout and every handle is live or takeable. */
/* 0 when ``a`` and ``b`` (equal values) are floats of opposite signs (``-0.0 == 0.0``: a Const or generic of the
 * other zero needs its own plan, `_plan._same_sign`), else 1. */
int same_sign(PyObject *a, PyObject *b) {
    if (!PyFloat_CheckExact(a) || !PyFloat_CheckExact(b)) return 1;
    return !signbit(PyFloat_AsDouble(a)) == !signbit(PyFloat_AsDouble(b));
}

int matches(PyObject *plan, PyObject *args) {
    PyObject *lent = GET(plan, PL_LENT), *tensors = GET(plan, PL_TENSORS), *wrapped = GET(plan, PL_WRAPPED);
    PyObject *pairs = GET(plan, PL_PAIRS), *others = GET(plan, PL_OTHERS);
    if (!lent || !tensors || !wrapped || !pairs || !others) return NO;
    int rc;
    for (Py_ssize_t k = 0, n = PyTuple_Size(tensors); k < n; k++) {
        PyObject *entry = PyTuple_GetItem(tensors, k);
        PyObject *t = PyTuple_GetItem(args, as_index(PyTuple_GetItem(entry, 0)));
        if (!t) return ERR;
        if ((rc = tensor_ok(t, PyTuple_GetItem(entry, 1), lent)) != OK) return rc;
    }
    for (Py_ssize_t k = 0, n = PyTuple_Size(wrapped); k < n; k++) {
        PyObject *entry = PyTuple_GetItem(wrapped, k);
        PyObject *a = PyTuple_GetItem(args, as_index(PyTuple_GetItem(entry, 0)));
        if (!a) return ERR;
        if ((rc = wrapper_ok(a, entry, lent)) != OK) return rc;
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
        PyObject *value = PyTuple_GetItem(entry, 3);
        PyObject *a = PyTuple_GetItem(args, as_index(PyTuple_GetItem(entry, 0)));
        if (!a) return ERR;
        if ((PyObject *)Py_TYPE(a) != PyTuple_GetItem(entry, 1)) return NO;
        if (PyTuple_GetItem(entry, 2) == Py_True) { /* a Const: its class is plain (user_consts is false) */
            int eq = PyObject_RichCompareBool(a, value, Py_EQ);
            if (eq <= 0) return eq < 0 ? ERR : NO;
            if (!same_sign(a, value)) return NO;
        }
    }
    return PyErr_Occurred() ? ERR : OK;
}

/* 1 when ``value`` is one the scalar check passes without calling it: of one of the entry's builtin classes exactly and,
 * for an integer scalar, in its range (`_plan._passes`); 0 when the check must decide; -1 on error. */
static int passes(PyObject *entry, PyObject *value) {
    PyObject *exact = PyTuple_GetItem(entry, 2);
    if (!exact || !PyTuple_Check(exact)) return -1;
    int found = 0;
    for (Py_ssize_t k = 0; k < PyTuple_Size(exact) && !found; k++)
        found = (PyObject *)Py_TYPE(value) == PyTuple_GetItem(exact, k);
    if (!found) return 0;
    PyObject *lo = PyTuple_GetItem(entry, 3), *hi = PyTuple_GetItem(entry, 4);
    if (!lo || !hi) return -1;
    if (lo == Py_None) return 1;
    int low = PyObject_RichCompareBool(lo, value, Py_LE); /* builtin ints: no user code runs */
    if (low <= 0) return low;
    return PyObject_RichCompareBool(value, hi, Py_LE);
}

/* The scalar checks of `Plan.try_launch`, for plain scalar classes only (a user type's __int__ needs the recheck
 * the pure path does). A failed check is not handled: the full path reports it, in argument order. */
int scalars_ok(PyObject *plan, PyObject *args, PyObject *check, PyObject *kernel) {
    PyObject *scalars = GET(plan, PL_SCALARS);
    if (!scalars) return NO;
    Py_ssize_t n = PyTuple_Size(scalars);
    if (!n) return OK;
    Py_XINCREF(check); /* NULL: read from the kernel when a value needs the check */
    int rc = OK;
    for (Py_ssize_t k = 0; k < n && rc == OK; k++) {
        PyObject *entry = PyTuple_GetItem(scalars, k);
        PyObject *value = PyTuple_GetItem(args, as_index(PyTuple_GetItem(entry, 0)));
        if (!value) {
            rc = ERR;
            break;
        }
        int fine = passes(entry, value);
        if (fine) {
            if (fine < 0) rc = ERR;
            continue;
        }
        /* `_plan._plain`: a class with a metaclass is never plain (its __hash__/__eq__ would run inside the step) */
        int plain = Py_TYPE(Py_TYPE(value)) != &PyType_Type ? 0 : PySet_Contains(PLAIN, (PyObject *)Py_TYPE(value));
        if (plain <= 0) {
            rc = plain < 0 ? ERR : NO;
            break;
        }
        if (!check && !(check = PyObject_GetAttr(kernel, s_check_scalar))) {
            rc = ERR;
            break;
        }
        PyObject *r = PyObject_CallFunctionObjArgs(check, PyTuple_GetItem(entry, 1), value, NULL);
        if (!r) {
            PyErr_Clear();
            rc = NO;
        }
        Py_XDECREF(r);
    }
    Py_XDECREF(check);
    return rc;
}

/* The handle's tensor: itself, or the tensor a Partition/Shared wraps (checked by `matches`). */
static PyObject *tensor_of(PyObject *a) { return (PyObject *)Py_TYPE(a) == Tensor_t ? a : GET(a, W_TENSOR); }

static int range_of(PyObject *t, unsigned long long *lo, unsigned long long *hi) {
    PyObject *r = GET(t, T_RANGE);
    if (!r || !PyTuple_Check(r) || PyTuple_Size(r) != 2) return NO;
    *lo = PyLong_AsUnsignedLongLong(PyTuple_GetItem(r, 0));
    *hi = PyLong_AsUnsignedLongLong(PyTuple_GetItem(r, 1));
    if (PyErr_Occurred()) {
        PyErr_Clear();
        return NO; /* not a plain address range: the pure path compares the ints */
    }
    return OK;
}

/* `_overlaps`, common case only: no output overlaps another argument, and each output's storage holds no other
 * handle, no export and there are no foreign imports. Anything else is not handled (the pure path searches). */
int no_overlap(PyObject *plan, PyObject *args) {
    PyObject *alias = GET(plan, PL_ALIAS);
    if (!alias) return NO;
    for (Py_ssize_t k = 0, n = PyTuple_Size(alias); k < n; k++) {
        PyObject *entry = PyTuple_GetItem(alias, k);
        PyObject *out = PyTuple_GetItem(args, as_index(PyTuple_GetItem(entry, 0)));
        if (!out) return ERR;
        PyObject *t = GET(out, W_TENSOR);
        unsigned long long lo, hi, olo, ohi;
        int rc = range_of(t, &lo, &hi);
        if (rc != OK) return rc;
        PyObject *others = PyTuple_GetItem(entry, 1);
        for (Py_ssize_t m = 0, nn = PyTuple_Size(others); m < nn; m++) {
            PyObject *a = PyTuple_GetItem(args, as_index(PyTuple_GetItem(others, m)));
            if (!a) return ERR;
            if ((rc = range_of(tensor_of(a), &olo, &ohi)) != OK) return rc;
            if (olo < hi && lo < ohi) return NO;
        }
        PyObject *storage = storage_of(t);
        PyObject *handles = storage ? GET(storage, S_HANDLES) : NULL, *exports = storage ? GET(storage, S_EXPORTS) : NULL;
        if (!handles || !exports || !PyDict_Check(handles)) return NO;
        if (PyDict_Size(handles) != 1 || PyDict_Size(FOREIGN) != 0) return NO;
        int any = PyObject_IsTrue(exports);
        if (any) return any < 0 ? ERR : NO;
    }
    return PyErr_Occurred() ? ERR : OK;
}
