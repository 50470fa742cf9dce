/* The compiled hot path of a repeated kernel launch (see _accel.py): `Plan.admit` + `Plan.hand_over` + the `Launch`
 * in one call, `Plan.enqueue`'s packing and relaunch, and `Launch._drop`'s hand-back.
 *
 * It also runs `Launch._execute` for a repeated GPU launch on the same context (`execute`).
 *
 * call(plan, kernel, args, generics) is `Kernel.__call__` on the kernel's latest plan as one C call: it finds the
 * user's call site (the innermost frame outside tile.frontend and tile.aio, as `_site.user_site` does; the plan keeps
 * the messages formatted for it), takes OWNERSHIP and pauses the cyclic collector (as `_storage.owning` does), runs
 * admit_move's step and gives both back. drop(launch) is `Launch._drop` the same way: the hand-back under OWNERSHIP.
 *
 * admit_move(plan, args, generics, explicit, unchecked, check, fate[, Launch, name, site]) does what the pure path's
 * `Plan.admit`, `Plan.hand_over` and `Launch.__init__` do for the latest plan of a kernel, in the same order, on the
 * same Python objects (so both paths interoperate): the layout match with each handle's state (fate None, this plan's
 * lent fate, or in flight; storage not freed), the scalar checks, the aliasing re-check, then the moves (a new handle
 * per moved argument, the fate set on the old one, the storage's handle registry updated) and the pending counts. It
 * returns the Launch (or, given 7 arguments, (values, after)), or None when it does not handle the call: any call the
 * common case does not cover (a user-defined scalar or Const type, a storage with other handles or exports, several
 * lenders, a failed check, a layout mismatch). It returns None only before it changed anything, so the caller then
 * runs the pure path, which accepts or rejects the call and raises the precise typed error. It raises no ownership
 * error itself.
 *
 * It runs with OWNERSHIP held and the cyclic collector paused (the caller is @owning) and runs no user code: its
 * comparisons are between builtin values (layout tuples, plain scalars), the check it calls is Tile's own.
 *
 * Slots: the classes it reads (Tensor, Partition/Shared, Storage, Plan, Launch) keep their state in __slots__, which
 * CPython stores as object pointers at fixed offsets in each instance. The stable ABI does not expose those offsets,
 * so `bind` finds each one by writing a unique object through the attribute and locating it in a fresh instance; the
 * hot path then reads and writes the slot directly (after checking the object's exact class), which is what makes it
 * faster than the interpreter's own specialised attribute access. A slot found empty is treated as "not handled".
 *
 * Built against the stable ABI (abi3, CPython 3.10+). Free-threaded CPython has no stable ABI: the build hook does not
 * build this module there and launches take the pure-Python path (the ownership lock orders every step). */
#define Py_LIMITED_API 0x030A0000
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stddef.h>

static PyObject *NEG_ZERO;
static PyObject *host_running; /* tile.core._reaper.RUNNING: host functions running (bound by bind_core) */ /* _plan.NEG_ZERO: a -0.0 float argument as packed (bound by bind) */
static PyObject *Tensor_t, *Partition_t, *Shared_t, *Storage_t, *Plan_t, *Launch_t, *InFlight_t, *IN_FLIGHT, *PLAIN,
    *FOREIGN, *OURS, *lock_acquire, *lock_release, *s_release, *s_check_scalar, *s_grid, *s_unchecked, *s_name,
    *s_f_back, *s_co_filename, *s_launch, *s_ctx, *s_site, *s_device, *s_stream, *s_held, *s_synchronize, *s_execute, *s_next,
    *run_state, *run_note, *claim_acquire, *claim_release, *CudaContext_t, *Prepared_t, *use_acquire, *use_release,
    *invalidation, *core_check, *s_cuLaunchKernel, *zero, *Link_t, *Then_t, *RETURNED, *BUILTIN, *HOST, *s_run_in,
    *s_step, *s_take, *s_claim_run, *s_hand_off, *then_fate_of, *then_code, *then_fate, *s_f_globals, *s_f_lineno, *s_tile_prefix;
static int then_line;
static allocfunc then_alloc;
static allocfunc tensor_alloc, partition_alloc, launch_alloc;
static int probe(PyObject *cls, const int *ks, int count);

/* Slot offsets, found by `bind`. */
enum {
    T_FATE, T_STORAGE, T_LAYOUT, T_RANGE, T_DTYPE, T_SHAPE, T_OFFSET, T_STRIDES, T_SITE, /* Tensor */
    W_FATE, W_TENSOR, P_TILE, SH_USERS,                                                  /* Partition, Shared */
    S_FREED, S_HANDLES, S_EXPORTS, S_PENDING,                                            /* Storage */
    PL_GIVEN, PL_EXPLICIT, PL_GENERICS, PL_USER_CONSTS, PL_TENSORS, PL_WRAPPED, PL_PAIRS, PL_OTHERS, PL_SCALARS,
    PL_TAIL, PL_ALIAS, PL_MOVED, PL_LENT, PL_HELD, PL_SHARES, PL_GRID, PL_PACKING, PL_PREPARED, PL_SITE, PL_SYNCED,
    PL_CHAINED, /* Plan */
    L_FATE, L_KERNEL, L_PLAN, L_SITE, L_VALUES, L_GRID, L_AFTER, L_LENT,                     /* Launch */
    C_STREAM, C_DEVICE,                                                                      /* CudaContext */
    PR_EPOCH, PR_LAUNCH, PR_CALL, PR_SHARED,                                      /* tile.core's PreparedLaunch */
    K_SRC, K_FN, K_NEXT, K_SITE, M_SRC, K_FATE,                                     /* tile.aio's Then, Map (a _Link's _src) */
    N_SLOTS
};
static const char *slot_names[N_SLOTS] = {
    "_fate", "_storage", "_layout", "_range", "_dtype", "_shape", "_offset", "_strides", "_site",
    "_fate", "_tensor", "_tile_shape", "_users",
    "freed_at", "_handles", "_exports", "pending",
    "given", "explicit", "generics", "user_consts", "tensors", "wrapped", "pairs", "others", "scalars",
    "tail", "alias", "moved", "lent", "held", "shares", "grid", "packing", "prepared", "site", "synced", "chained",
    "_fate", "_kernel", "_plan", "_site", "_values", "_grid", "_after", "_lent",
    "_stream", "_device",
    "_epoch", "_launch", "_call", "_shared",
    "_src", "_fn", "_next", "_site", "_src", "_fate",
};
static Py_ssize_t off[N_SLOTS];

/* A slot's value (borrowed; NULL when empty): the object holds it. */
#define GET(o, k) (*(PyObject **)((char *)(o) + off[k]))

/* Store a new reference in a slot; the old value goes to `*dead` (released by the caller when the step is done, so no
 * deallocation runs code in the middle of it), or is released now when dead is NULL. */
static void put(PyObject *o, int k, PyObject *value, PyObject **dead) {
    PyObject **slot = (PyObject **)((char *)o + off[k]);
    PyObject *old = *slot;
    Py_INCREF(value);
    *slot = value;
    if (dead) *dead = old;
    else Py_XDECREF(old);
}

/* Outcomes of a step: go on, the call is not handled here (the pure path decides), or a Python error. */
enum { OK = 0, NO = 1, ERR = -1 };

static Py_ssize_t as_index(PyObject *o) { return PyLong_AsSsize_t(o); }

/* A fate a kernel call may take (as `Plan._matches` tests it): none, this plan's own lent fate, or in flight. */
static int takeable(PyObject *f, PyObject *lent) {
    if (f == Py_None || f == lent) return 1;
    if ((PyObject *)Py_TYPE(f) != InFlight_t) return 0;
    return PyTuple_GetItem(f, 0) == IN_FLIGHT;
}

/* The tensor's storage, when it is a Storage (NULL: not handled). */
static PyObject *storage_of(PyObject *t) {
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

/* 0 when ``a`` and ``b`` (equal values) are floats of opposite signs (``-0.0 == 0.0``: a Const or generic of the
 * other zero needs its own plan, `_plan._same_sign`), else 1. */
static int same_sign(PyObject *a, PyObject *b) {
    if (!PyFloat_CheckExact(a) || !PyFloat_CheckExact(b)) return 1;
    return !signbit(PyFloat_AsDouble(a)) == !signbit(PyFloat_AsDouble(b));
}

/* `Plan._matches`: the arguments have the plan's layout and every handle is live or takeable. */
static int matches(PyObject *plan, PyObject *args) {
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
static int scalars_ok(PyObject *plan, PyObject *args, PyObject *check, PyObject *kernel) {
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
static int no_overlap(PyObject *plan, PyObject *args) {
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

/* `Tensor._hand_over`: a new handle on the same view takes this one's place in the storage's registry. */
static PyObject *move_tensor(PyObject *v, PyObject *fate, PyObject **dead) {
    static const int copied[] = {T_STORAGE, T_DTYPE, T_SHAPE, T_OFFSET, T_STRIDES, T_SITE, T_RANGE, T_LAYOUT};
    for (size_t k = 0; k < sizeof copied / sizeof *copied; k++)
        if (!GET(v, copied[k])) return PyErr_Format(PyExc_RuntimeError, "tile: a tensor without %s", slot_names[copied[k]]);
    PyObject *handles = GET(GET(v, T_STORAGE), S_HANDLES);
    if (!handles || !PyDict_Check(handles)) return PyErr_Format(PyExc_RuntimeError, "tile: a storage without handles");
    PyObject *new = tensor_alloc((PyTypeObject *)Tensor_t, 0);
    if (!new) return NULL;
    for (size_t k = 0; k < sizeof copied / sizeof *copied; k++) put(new, copied[k], GET(v, copied[k]), NULL);
    put(new, T_FATE, Py_None, NULL);
    PyObject *old_key = PyLong_FromVoidPtr(v), *new_key = PyLong_FromVoidPtr(new), *ref = PyWeakref_NewRef(new, NULL);
    int rc = !old_key || !new_key || !ref;
    if (!rc && PyDict_DelItem(handles, old_key)) { /* handles.pop(id(self), None) */
        if (PyErr_ExceptionMatches(PyExc_KeyError)) PyErr_Clear();
        else rc = 1;
    }
    rc = rc || PyDict_SetItem(handles, new_key, ref);
    Py_XDECREF(old_key);
    Py_XDECREF(new_key);
    Py_XDECREF(ref);
    if (rc) {
        Py_DECREF(new);
        return NULL;
    }
    put(v, T_FATE, fate, dead);
    return new;
}

/* `Partition._hand_over`: a new partition wraps the same tensor (which stays registered). */
static PyObject *move_partition(PyObject *v, PyObject *fate, PyObject **dead) {
    PyObject *t = GET(v, W_TENSOR), *tile = GET(v, P_TILE);
    if (!t || !tile) return PyErr_Format(PyExc_RuntimeError, "tile: a partition without its tensor");
    PyObject *new = partition_alloc((PyTypeObject *)Partition_t, 0);
    if (!new) return NULL;
    put(new, W_TENSOR, t, NULL);
    put(new, P_TILE, tile, NULL);
    put(new, W_FATE, Py_None, NULL);
    put(v, W_FATE, fate, dead);
    return new;
}

/* o's int slot k += delta (the pending and user counts). */
static int add_to(PyObject *o, int k, long delta) {
    PyObject *value = GET(o, k);
    if (!value) return PyErr_Format(PyExc_RuntimeError, "tile: an empty %s count", slot_names[k]), -1;
    long now = PyLong_AsLong(value);
    if (now == -1 && PyErr_Occurred()) return -1;
    PyObject *sum = PyLong_FromLong(now + delta);
    if (!sum) return -1;
    put(o, k, sum, NULL);
    Py_DECREF(sum);
    return 0;
}

/* True for an object of exactly the class whose slot k is read (slots are read at fixed offsets: reading one of another
 * class's instance would read whatever lies there). The classes are final (FinalClassError), so a plan's handle
 * positions hold exactly these; this keeps a broken invariant from becoming a wild read. */
static int is_wrapper(PyObject *v) { return (PyObject *)Py_TYPE(v) == Partition_t || (PyObject *)Py_TYPE(v) == Shared_t; }

/* The fate slot of a moved handle (a Tensor or a Partition), or -1 with a RuntimeError. */
static int fate_slot(PyObject *v) {
    if ((PyObject *)Py_TYPE(v) == Tensor_t) return T_FATE;
    if ((PyObject *)Py_TYPE(v) == Partition_t) return W_FATE;
    PyErr_SetString(PyExc_RuntimeError, "tile: a moved launch argument that is not a Tensor or Partition");
    return -1;
}

/* The storage of the handle at position (i, inner) of `plan.held`. */
static PyObject *held_storage(PyObject *values, PyObject *entry) {
    PyObject *v = PyTuple_GetItem(values, as_index(PyTuple_GetItem(entry, 0)));
    if (!v) return NULL;
    PyObject *t = PyTuple_GetItem(entry, 1) == Py_True ? (is_wrapper(v) ? GET(v, W_TENSOR) : NULL) : v;
    PyObject *s = t && (PyObject *)Py_TYPE(t) == Tensor_t ? storage_of(t) : NULL;
    if (!s) PyErr_SetString(PyExc_RuntimeError, "tile: a launch argument without its storage");
    return s;
}

/* `Launch.__init__`: the op, with one pending count per handle argument and one user per share. */
static PyObject *make_launch(PyObject *name, PyObject *plan, PyObject *values, PyObject *site, PyObject *after) {
    PyObject *grid = GET(plan, PL_GRID), *held = GET(plan, PL_HELD), *shares = GET(plan, PL_SHARES);
    if (!grid || !held || !shares) return PyErr_Format(PyExc_RuntimeError, "tile: a plan without grid/held/shares");
    PyObject *op = launch_alloc((PyTypeObject *)Launch_t, 0);
    if (!op) return NULL;
    put(op, L_FATE, Py_None, NULL);
    put(op, L_KERNEL, name, NULL);
    put(op, L_PLAN, plan, NULL);
    put(op, L_SITE, site, NULL);
    put(op, L_GRID, grid, NULL);
    put(op, L_AFTER, after, NULL);
    put(op, L_LENT, Py_None, NULL);
    put(op, L_VALUES, Py_None, NULL); /* until every count is taken: __del__ releases only a counted launch */
    int rc = 0;
    for (Py_ssize_t k = 0, n = PyTuple_Size(held); k < n && !rc; k++) {
        PyObject *storage = held_storage(values, PyTuple_GetItem(held, k));
        rc = !storage || add_to(storage, S_PENDING, 1);
    }
    for (Py_ssize_t k = 0, n = PyTuple_Size(shares); k < n && !rc; k++) {
        PyObject *v = PyTuple_GetItem(values, as_index(PyTuple_GetItem(shares, k)));
        if (v && (PyObject *)Py_TYPE(v) != Shared_t) {
            PyErr_SetString(PyExc_RuntimeError, "tile: a shared launch argument that is not a Shared");
            v = NULL;
        }
        rc = !v || add_to(v, SH_USERS, 1);
    }
    if (rc) { /* a MemoryError mid-count, as in the pure path: the counts taken keep their memory (a leak, never a
                 free under a launch) */
        Py_DECREF(op);
        return NULL;
    }
    put(op, L_VALUES, values, NULL);
    return op;
}

/* `Plan.admit` + `Plan.hand_over` + `Launch.__init__` (see the top of the file). ``check`` is the kernel's
 * `_check_scalar`, or NULL: then it is read from ``kernel`` when the plan has scalars. ``name`` NULL: return
 * (values, after) instead of the Launch. The caller holds OWNERSHIP with the collector paused. */
static PyObject *admit_impl(PyObject *plan, PyObject *args, PyObject *generics, PyObject *explicit, int unchecked,
                            PyObject *check, PyObject *kernel, PyObject *fate, PyObject *name, PyObject *site) {
    if ((PyObject *)Py_TYPE(plan) != Plan_t || !PyTuple_Check(args)) Py_RETURN_NONE;
    /* Plan.admit's preamble: the argument count, the grid object, the generics; a user type's Const or generic
     * (user_consts) needs the pure path's recheck. */
    PyObject *given = GET(plan, PL_GIVEN), *plan_generics = GET(plan, PL_GENERICS);
    if (!given || !plan_generics || PyTuple_Size(args) != as_index(given) || explicit != GET(plan, PL_EXPLICIT) ||
        GET(plan, PL_USER_CONSTS) != Py_False)
        Py_RETURN_NONE;
    if (PyDict_Check(generics) && PyDict_Check(plan_generics) && PyDict_Size(generics) == 0) {
        if (PyDict_Size(plan_generics) != 0) Py_RETURN_NONE;
    } else {
        int eq = PyObject_RichCompareBool(generics, plan_generics, Py_EQ);
        if (eq <= 0) return eq < 0 ? NULL : Py_NewRef(Py_None);
        PyObject *key, *value;
        for (Py_ssize_t pos = 0; PyDict_Check(generics) && PyDict_Next(generics, &pos, &key, &value);) {
            PyObject *theirs = PyDict_Check(plan_generics) ? PyDict_GetItemWithError(plan_generics, key) : NULL;
            if (!theirs || !same_sign(value, theirs)) return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
        }
    }
    int rc = matches(plan, args);
    if (rc == OK) rc = scalars_ok(plan, args, check, kernel);
    if (rc == OK && !unchecked) rc = no_overlap(plan, args);
    if (rc != OK) return rc == ERR ? NULL : Py_NewRef(Py_None);

    /* The call's values (trailing keyword Consts appended), and the one lender of the handles taken in flight (several
     * lenders: the pure path collects them). Nothing has changed yet. */
    PyObject *tail = GET(plan, PL_TAIL), *moved = GET(plan, PL_MOVED);
    if (!tail || !moved) Py_RETURN_NONE;
    Py_ssize_t nargs = PyTuple_Size(args), ntail = PyTuple_Size(tail), nmoved = PyTuple_Size(moved);
    if (nmoved > 64) Py_RETURN_NONE; /* more moved handles than the step's buffer: the pure path */
    PyObject *after = Py_None;
    for (Py_ssize_t k = 0; k < nmoved; k++) {
        PyObject *v = PyTuple_GetItem(args, as_index(PyTuple_GetItem(moved, k)));
        if (!v) return NULL;
        PyObject *f = GET(v, (PyObject *)Py_TYPE(v) == Tensor_t ? T_FATE : W_FATE);
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
    PyObject *dead[64] = {NULL}; /* the replaced fates: released once the step is done */
    Py_INCREF(after);
    PyObject *result = NULL;
    for (Py_ssize_t k = 0; k < nmoved; k++) {
        Py_ssize_t i = as_index(PyTuple_GetItem(moved, k));
        PyObject *v = PyTuple_GetItem(out, i);
        PyObject *new = (PyObject *)Py_TYPE(v) == Tensor_t ? move_tensor(v, fate, &dead[k])
                        : (PyObject *)Py_TYPE(v) == Partition_t
                            ? move_partition(v, fate, &dead[k])
                            : PyErr_Format(PyExc_RuntimeError, "tile: a moved argument that is no handle");
        if (!new) goto done;
        PyTuple_SetItem(out, i, new); /* steals new, drops the old handle (args still holds it) */
    }
    result = name ? make_launch(name, plan, out, site, after) : PyTuple_Pack(2, out, after);
done:
    Py_DECREF(out);
    Py_DECREF(after);
    for (Py_ssize_t k = 0; k < nmoved; k++) Py_XDECREF(dead[k]);
    return result;
}

static PyObject *admit_move(PyObject *self, PyObject *const *argv, Py_ssize_t n) {
    (void)self;
    if (n != 7 && n != 10) return PyErr_Format(PyExc_TypeError, "admit_move takes 7 or 10 arguments, got %zd", n);
    if (!Tensor_t) return PyErr_Format(PyExc_RuntimeError, "tile.frontend._fastlaunch.bind() was not called");
    if (n == 10 && argv[7] != Launch_t) return PyErr_Format(PyExc_TypeError, "admit_move: not the bound Launch class");
    int unchecked = PyObject_IsTrue(argv[4]);
    if (unchecked < 0) return NULL;
    return admit_impl(argv[0], argv[1], argv[2], argv[3], unchecked, argv[5], NULL, argv[6], n == 10 ? argv[8] : NULL,
                      n == 10 ? argv[9] : NULL);
}

/* release(plan, values, lent): `Launch._drop`'s hand-back, after `_values` was taken (OWNERSHIP held). */
static PyObject *release_impl(PyObject *plan, PyObject *values, PyObject *lent) {
    if ((PyObject *)Py_TYPE(plan) != Plan_t || !PyTuple_Check(values))
        return PyErr_Format(PyExc_TypeError, "release: not a plan and its values");
    PyObject *moved = GET(plan, PL_MOVED), *held = GET(plan, PL_HELD), *shares = GET(plan, PL_SHARES);
    if (!moved || !held || !shares) return PyErr_Format(PyExc_RuntimeError, "tile: a plan without moved/held/shares");
    if (lent != Py_None) { /* the work is done: what it handed on early is live (unless moved on since) */
        for (Py_ssize_t k = 0, m = PyTuple_Size(moved); k < m; k++) {
            PyObject *v = PyTuple_GetItem(values, as_index(PyTuple_GetItem(moved, k)));
            int fate = v ? fate_slot(v) : -1;
            if (fate < 0) return NULL;
            if (GET(v, fate) == lent) put(v, fate, Py_None, NULL);
        }
    }
    for (Py_ssize_t k = 0, m = PyTuple_Size(held); k < m; k++) {
        PyObject *storage = held_storage(values, PyTuple_GetItem(held, k));
        if (!storage) return NULL;
        if (GET(storage, S_FREED) == Py_None) {
            if (add_to(storage, S_PENDING, -1)) return NULL;
        } else { /* storage.release(): may perform the deferred free */
            PyObject *r = PyObject_CallMethodObjArgs(storage, s_release, NULL);
            if (!r) return NULL;
            Py_DECREF(r);
        }
    }
    for (Py_ssize_t k = 0, m = PyTuple_Size(shares); k < m; k++) {
        PyObject *v = PyTuple_GetItem(values, as_index(PyTuple_GetItem(shares, k)));
        if (v && (PyObject *)Py_TYPE(v) != Shared_t)
            return PyErr_Format(PyExc_RuntimeError, "tile: a shared launch argument that is not a Shared");
        if (!v || add_to(v, SH_USERS, -1)) return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *release(PyObject *self, PyObject *const *argv, Py_ssize_t n) {
    (void)self;
    if (n != 3) return PyErr_Format(PyExc_TypeError, "release takes 3 arguments, got %zd", n);
    return release_impl(argv[0], argv[1], argv[2]);
}

/* One step under OWNERSHIP with the cyclic collector paused, as `_storage.owning` and `OWNED` make it: `enter` takes
 * the lock (it may wait, the GIL released, like `with OWNERSHIP`) and returns whether it paused the collector (-1: an
 * error); `leave` restores the collector and gives the lock back, keeping a pending exception. */
static int enter(void) {
    PyObject *r = PyObject_CallNoArgs(lock_acquire);
    if (!r) return -1;
    Py_DECREF(r);
    return PyGC_Disable();
}

static void leave(int paused) {
    if (paused) PyGC_Enable();
    PyObject *type, *value, *trace;
    PyErr_Fetch(&type, &value, &trace);
    PyObject *r = PyObject_CallNoArgs(lock_release);
    if (r) Py_DECREF(r);
    else PyErr_WriteUnraisable(lock_release); /* cannot happen: this thread holds the lock it releases */
    PyErr_Restore(type, value, trace);
}

/* drop(launch): `Launch._drop` (the hand-back once the work is done), the step holding OWNERSHIP. */
static PyObject *drop_impl(PyObject *op) {
    PyObject *values = NULL, *lent = NULL, *result = NULL;
    int paused = enter();
    if (paused < 0) return NULL;
    PyObject *now = GET(op, L_VALUES), *plan = GET(op, L_PLAN);
    if (!now || now == Py_None || !plan) {
        result = Py_NewRef(Py_None);
    } else {
        put(op, L_VALUES, Py_None, &values); /* values, self._values = self._values, None */
        put(op, L_LENT, Py_None, &lent);
        result = release_impl(plan, values, lent ? lent : Py_None);
    }
    leave(paused);
    Py_XDECREF(values); /* the handles may die here, after the step, as the pure path's locals do */
    Py_XDECREF(lent);
    return result;
}

static PyObject *drop(PyObject *self, PyObject *const *argv, Py_ssize_t n) {
    (void)self;
    if (n != 1 || (PyObject *)Py_TYPE(argv[0]) != Launch_t) return PyErr_Format(PyExc_TypeError, "drop(launch)");
    return drop_impl(argv[0]);
}

/* The innermost frame outside tile.frontend and tile.aio (`_site.user_site`), as a new reference. */
static PyObject *user_frame(void) {
    PyObject *frame = (PyObject *)PyEval_GetFrame();
    if (!frame) return PyErr_Format(PyExc_RuntimeError, "tile: a kernel call without a Python frame");
    Py_INCREF(frame);
    for (;;) {
        PyObject *back = PyObject_GetAttr(frame, s_f_back);
        if (!back) break;
        if (back == Py_None) {
            Py_DECREF(back);
            return frame;
        }
        PyObject *code = (PyObject *)PyFrame_GetCode((PyFrameObject *)frame);
        PyObject *file = code ? PyObject_GetAttr(code, s_co_filename) : NULL;
        Py_XDECREF(code);
        if (!file) {
            Py_DECREF(back);
            break;
        }
        int ours = 0;
        for (Py_ssize_t k = 0, m = PyTuple_Size(OURS); k < m && !ours && ours >= 0; k++)
            ours = (int)PyUnicode_Tailmatch(file, PyTuple_GetItem(OURS, k), 0, PY_SSIZE_T_MAX, -1);
        Py_DECREF(file);
        if (ours <= 0) {
            Py_DECREF(back);
            if (ours < 0) break;
            return frame;
        }
        Py_DECREF(frame);
        frame = back;
    }
    Py_DECREF(frame);
    return NULL;
}

/* The plan's call site for the user's frame (`launch_again`'s site): (code, line, "file:line", the moved-fate),
 * made once per call site; a new reference. */
static PyObject *site_of(PyObject *plan, PyObject *name) {
    PyObject *frame = user_frame();
    if (!frame) return NULL;
    PyObject *code = (PyObject *)PyFrame_GetCode((PyFrameObject *)frame);
    int line = PyFrame_GetLineNumber((PyFrameObject *)frame);
    Py_DECREF(frame);
    PyObject *site = GET(plan, PL_SITE), *result = NULL;
    if (site && PyTuple_Check(site) && PyTuple_Size(site) == 4 && PyTuple_GetItem(site, 0) == code &&
        PyLong_AsLong(PyTuple_GetItem(site, 1)) == line) {
        Py_DECREF(code);
        return Py_NewRef(site);
    }
    PyErr_Clear(); /* an int that is no C long (not from here): make the site */
    PyObject *file = PyObject_GetAttr(code, s_co_filename);
    PyObject *where = file ? PyUnicode_FromFormat("%S:%d", file, line) : NULL;
    PyObject *what = where ? PyUnicode_FromFormat("moved into the launch of %S at %U", name, where) : NULL;
    PyObject *fate = what ? PyTuple_Pack(2, s_launch, what) : NULL;
    PyObject *number = fate ? PyLong_FromLong(line) : NULL;
    if (number) result = PyTuple_Pack(4, code, number, where, fate);
    if (result) put(plan, PL_SITE, result, NULL);
    Py_DECREF(code);
    Py_XDECREF(file);
    Py_XDECREF(where);
    Py_XDECREF(what);
    Py_XDECREF(fate);
    Py_XDECREF(number);
    return result;
}

/* call(plan, kernel, args, generics): `Kernel.__call__` for the kernel's latest plan, as `_call_again` and
 * `launch_again` do it: the user's call site, then OWNERSHIP with the collector paused around the checks and the
 * moves (`admit_impl`). The Launch, or None when the compiled path does not handle the call (nothing changed). */
static PyObject *call(PyObject *self, PyObject *const *argv, Py_ssize_t n) {
    (void)self;
    if (n != 4) return PyErr_Format(PyExc_TypeError, "call takes 4 arguments, got %zd", n);
    if (!Tensor_t) return PyErr_Format(PyExc_RuntimeError, "tile.frontend._fastlaunch.bind() was not called");
    PyObject *plan = argv[0], *kernel = argv[1], *args = argv[2], *generics = argv[3];
    if ((PyObject *)Py_TYPE(plan) != Plan_t || !PyTuple_Check(args)) Py_RETURN_NONE;
    /* A call of another layout (a kernel tries its recent plans in turn) is turned away before the walk to the user's
     * frame: the same read-only layout test admit_impl starts with, which it repeats under the lock. */
    PyObject *given = GET(plan, PL_GIVEN);
    if (!given || PyTuple_Size(args) != as_index(given)) Py_RETURN_NONE;
    int layout = matches(plan, args);
    if (layout != OK) return layout == ERR ? NULL : Py_NewRef(Py_None);
    PyObject *name = PyObject_GetAttr(kernel, s_name), *explicit = NULL, *flag = NULL, *site = NULL, *result = NULL;
    if (!name || !(explicit = PyObject_GetAttr(kernel, s_grid)) || !(flag = PyObject_GetAttr(kernel, s_unchecked)) ||
        !(site = site_of(plan, name)))
        goto done;
    int unchecked = PyObject_IsTrue(flag);
    if (unchecked < 0) goto done;
    int paused = enter();
    if (paused < 0) goto done;
    result = admit_impl(plan, args, generics, explicit, unchecked, NULL, kernel, PyTuple_GetItem(site, 3), name,
                        PyTuple_GetItem(site, 2));
    leave(paused);
done:
    Py_XDECREF(name);
    Py_XDECREF(explicit);
    Py_XDECREF(flag);
    Py_XDECREF(site);
    return result;
}

/* `PreparedLaunch.__call__` of tile.core (bound by `bind_core`) when its guard holds and it tracks no buffer of another
 * stream: under tile.core's `use_lock`, the invalidation epoch compared, then its `cuLaunchKernel(*_call)` and the
 * result checked by tile.bindings' `check` (which raises the typed error). Any other case (another class, a changed
 * epoch: a free or close since, buffers of other streams to track) calls the method itself, which does the same under
 * the same lock and raises its errors. Returns a new reference to None, or NULL with the error set. */
static PyObject *relaunch(PyObject *call) {
    if (!Prepared_t || (PyObject *)Py_TYPE(call) != Prepared_t) return PyObject_CallNoArgs(call);
    PyObject *shared = GET(call, PR_SHARED), *fn = GET(call, PR_LAUNCH), *args = GET(call, PR_CALL);
    if (!shared || !fn || !args || !PyTuple_Check(shared) || PyTuple_Size(shared) != 0 || !PyTuple_Check(args))
        return PyObject_CallNoArgs(call);
    PyObject *running = host_running ? PyList_GetItem(host_running, 0) : NULL;
    if (!running || !PyLong_Check(running) || PyLong_AsLong(running) != 0) /* a host function runs: it may be ours */
        return PyErr_Occurred() ? NULL : PyObject_CallNoArgs(call);
    PyObject *r = PyObject_CallNoArgs(use_acquire);
    if (!r) return NULL;
    Py_DECREF(r);
    PyObject *epoch = GET(call, PR_EPOCH), *now = PyList_GetItem(invalidation, 0), *out = NULL, *result = NULL;
    int same = epoch && now ? PyObject_RichCompareBool(epoch, now, Py_EQ) : -1;
    if (same > 0) {
        Py_INCREF(fn); /* the slots are the launch's own, but a relaunch runs the driver: hold what it calls */
        Py_INCREF(args);
        out = PyObject_Call(fn, args, NULL);
        Py_DECREF(fn);
        Py_DECREF(args);
        PyObject *code = out ? PySequence_GetItem(out, 0) : NULL;
        int failed = code ? PyObject_RichCompareBool(code, zero, Py_NE) : -1;
        Py_XDECREF(code);
        if (failed > 0) {
            PyObject *checked = PyObject_CallFunctionObjArgs(core_check, out, s_cuLaunchKernel, NULL);
            Py_XDECREF(checked); /* raises for a failed launch: result stays NULL */
        } else if (failed == 0) {
            result = Py_NewRef(Py_None);
        }
    }
    PyObject *type, *value, *trace;
    PyErr_Fetch(&type, &value, &trace);
    r = PyObject_CallNoArgs(use_release);
    if (r) Py_DECREF(r);
    else PyErr_WriteUnraisable(use_release); /* cannot happen: this thread holds the lock it releases */
    PyErr_Restore(type, value, trace);
    Py_XDECREF(out);
    if (same == 0 && !PyErr_Occurred()) return PyObject_CallNoArgs(call); /* revalidates (or raises), then launches */
    return result;
}

/* replay(plan, values, grid, stream): `Plan.enqueue`'s packing; relaunch the plan's last prepared launch when stream,
 * grid and packed arguments repeat and return None, else return the packed arguments (the caller prepares them). */
static PyObject *replay_impl(PyObject *plan, PyObject *values, PyObject *grid, PyObject *stream) {
    if ((PyObject *)Py_TYPE(plan) != Plan_t || !PyTuple_Check(values))
        return PyErr_Format(PyExc_TypeError, "replay: not a plan and its values");
    PyObject *packing = GET(plan, PL_PACKING);
    PyObject *template = packing ? PyTuple_GetItem(packing, 0) : NULL, *slots = packing ? PyTuple_GetItem(packing, 1) : NULL;
    if (!template || !slots) return NULL;
    Py_ssize_t size = PyTuple_Size(template);
    PyObject *args = PyTuple_New(size);
    if (!args) return NULL;
    for (Py_ssize_t k = 0; k < size; k++) {
        PyObject *v = PyTuple_GetItem(template, k);
        Py_INCREF(v);
        PyTuple_SetItem(args, k, v);
    }
    for (Py_ssize_t k = 0, m = PyTuple_Size(slots); k < m; k++) {
        PyObject *slot = PyTuple_GetItem(slots, k);
        Py_ssize_t pos = as_index(PyTuple_GetItem(slot, 0));
        long mode = PyLong_AsLong(PyTuple_GetItem(slot, 1));
        PyObject *v = PyTuple_GetItem(values, as_index(PyTuple_GetItem(slot, 2)));
        PyObject *packed = NULL;
        if (v && mode == 1) { /* _BASE: the handle's base address */
            PyObject *t = (PyObject *)Py_TYPE(v) == Tensor_t                                    ? v
                          : (PyObject *)Py_TYPE(v) == Partition_t || (PyObject *)Py_TYPE(v) == Shared_t ? GET(v, W_TENSOR)
                                                                                                         : NULL;
            PyObject *range = t ? GET(t, T_RANGE) : NULL;
            packed = range ? PyTuple_GetItem(range, 0) : NULL;
            if (!packed && !PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "tile: a base without a range");
            Py_XINCREF(packed);
        } else if (v && mode == 2) { /* _INT: int(v) */
            packed = (PyObject *)Py_TYPE(v) == (PyObject *)&PyLong_Type ? Py_NewRef(v) : PyNumber_Long(v);
        } else if (v) { /* _RAW: a float scalar as is, a zero as 0.0 or NEG_ZERO (`_plan._raw`) */
            int truth = PyObject_IsTrue(v); /* plain number types only (`try_launch`): no user code */
            if (truth > 0) {
                packed = Py_NewRef(v);
            } else if (truth == 0) {
                double d = PyFloat_AsDouble(v);
                if (!(d == -1.0 && PyErr_Occurred())) packed = signbit(d) ? Py_NewRef(NEG_ZERO) : PyFloat_FromDouble(0.0);
            }
        }
        if (!packed || PyErr_Occurred()) {
            Py_XDECREF(packed);
            Py_DECREF(args);
            return NULL;
        }
        PyTuple_SetItem(args, pos, packed);
    }
    PyObject *last = GET(plan, PL_PREPARED);
    if (last && last != Py_None && PyTuple_GetItem(last, 0) == stream) {
        int same = PyObject_RichCompareBool(PyTuple_GetItem(last, 2), args, Py_EQ);
        if (same > 0) same = PyObject_RichCompareBool(PyTuple_GetItem(last, 1), grid, Py_EQ);
        if (same < 0) {
            Py_DECREF(args);
            return NULL;
        }
        if (same) {
            Py_DECREF(args);
            PyObject *call = PyTuple_GetItem(last, 3);
            Py_INCREF(call); /* the prepared launch may replace plan.prepared while it runs */
            PyObject *r = relaunch(call);
            Py_DECREF(call);
            if (!r) return NULL;
            Py_DECREF(r);
            Py_RETURN_NONE;
        }
    }
    return args;
}

static PyObject *replay(PyObject *self, PyObject *const *argv, Py_ssize_t n) {
    (void)self;
    if (n != 4) return PyErr_Format(PyExc_TypeError, "replay takes 4 arguments, got %zd", n);
    return replay_impl(argv[0], argv[1], argv[2], argv[3]);
}

/* execute(launch, ctx, lend, BUILTIN_CONTEXTS, HOST): `Launch._execute` for a GPU launch on one of tile.aio's own
 * contexts whose in-flight arguments (if any) come from a launch on the same context and whose prepared launch
 * repeats: relaunch it, lend the handles (with ``lend``) and return the values. None when it does not handle the
 * execution (another context, a CPU launch, a new prepared launch, ordering after another context): then nothing was
 * done and the pure path runs it, raising its errors. */
static PyObject *execute_impl(PyObject *op, PyObject *ctx, int lend, PyObject *builtin, PyObject *host) {
    if ((PyObject *)Py_TYPE(op) != Launch_t || !PyAnySet_Check(builtin)) Py_RETURN_NONE;
    int ours = PySet_Contains(builtin, (PyObject *)Py_TYPE(ctx));
    if (ours <= 0) return ours < 0 ? NULL : Py_NewRef(Py_None);
    PyObject *values = GET(op, L_VALUES), *after = GET(op, L_AFTER), *plan = GET(op, L_PLAN), *grid = GET(op, L_GRID);
    PyObject *site = GET(op, L_SITE);
    if (!values || values == Py_None || !after || !plan || !grid || !site || (PyObject *)Py_TYPE(plan) != Plan_t)
        Py_RETURN_NONE;
    PyObject *packing = GET(plan, PL_PACKING);
    if (!packing || packing == Py_None) Py_RETURN_NONE;
    Py_INCREF(values);
    PyObject *result = NULL, *stream = NULL, *fate = NULL;
    if (after != Py_None) { /* taken in flight: handled only from a launch on this same context (stream order) */
        if ((PyObject *)Py_TYPE(after) != InFlight_t) goto none;
        PyObject *producer = PyObject_GetAttr(after, s_ctx);
        if (!producer) goto done;
        Py_DECREF(producer); /* compared by identity only */
        if (producer != ctx) goto none;
    }
    if (CudaContext_t && (PyObject *)Py_TYPE(ctx) == CudaContext_t) { /* its slots, not its properties */
        stream = GET(ctx, C_STREAM);
        if (!stream || !GET(ctx, C_DEVICE)) goto none;
        Py_INCREF(stream);
    } else {
        PyObject *device = PyObject_GetAttr(ctx, s_device);
        if (!device) goto done;
        Py_DECREF(device); /* compared by identity only */
        if (device == host) goto none;
        stream = PyObject_GetAttr(ctx, s_stream);
        if (!stream) goto done;
    }
    PyObject *packed = replay_impl(plan, values, grid, stream);
    if (!packed) goto done;
    if (packed != Py_None) { /* a new prepared launch: nothing was launched, the pure path prepares it */
        Py_DECREF(packed);
        goto none;
    }
    Py_DECREF(packed);
    if (lend) { /* hand the moved handles on in flight (`Launch._execute`) */
        fate = Py_NewRef(GET(plan, PL_LENT) ? GET(plan, PL_LENT) : Py_None);
        int reuse = fate != Py_None;
        if (reuse) {
            PyObject *c = PyObject_GetAttr(fate, s_ctx), *s = c ? PyObject_GetAttr(fate, s_site) : NULL;
            reuse = c == ctx && s == site;
            Py_XDECREF(c);
            Py_XDECREF(s);
            if (PyErr_Occurred()) goto done;
        }
        if (!reuse) {
            Py_DECREF(fate);
            fate = PyObject_CallMethod(op, "_fate_on", "O", ctx);
            if (!fate) goto done;
        }
        PyObject *moved = GET(plan, PL_MOVED);
        for (Py_ssize_t k = 0, m = moved ? PyTuple_Size(moved) : 0; k < m; k++) {
            PyObject *v = PyTuple_GetItem(values, as_index(PyTuple_GetItem(moved, k)));
            int slot = v ? fate_slot(v) : -1;
            if (slot < 0) goto done;
            put(v, slot, fate, NULL);
        }
        put(op, L_LENT, fate, NULL);
    }
    result = Py_NewRef(values);
    goto done;
none:
    result = Py_NewRef(Py_None);
done:
    Py_DECREF(values);
    Py_XDECREF(stream);
    Py_XDECREF(fate);
    return result;
}

static PyObject *execute(PyObject *self, PyObject *const *argv, Py_ssize_t n) {
    (void)self;
    if (n != 5) return PyErr_Format(PyExc_TypeError, "execute takes 5 arguments, got %zd", n);
    int lend = PyObject_IsTrue(argv[2]);
    if (lend < 0) return NULL;
    return execute_impl(argv[0], argv[1], lend, argv[3], argv[4]);
}

/* The fate a launch synced at the user's current line gets, ("executed by .sync_on()", (file, line)) as
 * `DeviceOp._claim` makes it, kept on the plan for the next sync at that line (a new reference). */
static PyObject *sync_fate(PyObject *plan, PyObject *verb) {
    PyObject *frame = user_frame();
    if (!frame) return NULL;
    PyObject *code = (PyObject *)PyFrame_GetCode((PyFrameObject *)frame);
    int line = PyFrame_GetLineNumber((PyFrameObject *)frame);
    Py_DECREF(frame);
    PyObject *last = GET(plan, PL_SYNCED), *result = NULL;
    if (last && PyTuple_Check(last) && PyTuple_Size(last) == 4 && PyTuple_GetItem(last, 0) == code &&
        PyTuple_GetItem(last, 2) == verb && PyLong_AsLong(PyTuple_GetItem(last, 1)) == line) {
        Py_DECREF(code);
        return Py_NewRef(PyTuple_GetItem(last, 3));
    }
    PyErr_Clear();
    PyObject *file = PyObject_GetAttr(code, s_co_filename);
    PyObject *number = file ? PyLong_FromLong(line) : NULL;
    PyObject *site = number ? PyTuple_Pack(2, file, number) : NULL;
    PyObject *fate = site ? PyTuple_Pack(2, verb, site) : NULL;
    PyObject *entry = fate ? PyTuple_Pack(4, code, number, verb, fate) : NULL;
    if (entry) {
        put(plan, PL_SYNCED, entry, NULL);
        result = Py_NewRef(fate);
    }
    Py_DECREF(code);
    Py_XDECREF(file);
    Py_XDECREF(number);
    Py_XDECREF(site);
    Py_XDECREF(fate);
    return result;
}

/* Set the thread's execution lock (`tile.aio._lock`) to `value`; 0, or -1 with an error. */
static int set_held(PyObject *value) { return PyObject_SetAttr(run_state, s_held, value); }

/* Take `op` for one use under `_CLAIMING` with the fate `fate` (`DeviceOp._claim`): 1 taken, 0 it was taken before
 * (nothing changed), -1 an error. */
static int claim(PyObject *op, PyObject *fate) {
    PyObject *r = PyObject_CallNoArgs(claim_acquire);
    if (!r) return -1;
    Py_DECREF(r);
    PyObject *now = GET(op, L_FATE);
    int taken = now && now != Py_None;
    if (!taken) put(op, L_FATE, fate, NULL);
    r = PyObject_CallNoArgs(claim_release);
    if (!r) return -1; /* cannot happen: this thread holds the lock */
    Py_DECREF(r);
    return !taken;
}

/* claim_run(launch, verb, site, ctx, BUILTIN_CONTEXTS, HOST, link): `Then._step`'s claim of the launch its function
 * returned ("verb at site", the fate kept on the plan for the next link of that site), the link's hold on it
 * (`link._next`, so the tree releases it also when its execution fails) and its execution in flight (the compiled
 * `execute`, else `Launch._execute`). NotImplemented, with nothing changed, when the launch was claimed
 * before (the generic claim then raises OpConsumedError). */
static PyObject *claim_run_impl(PyObject *op, PyObject *verb, PyObject *site, PyObject *ctx, PyObject *builtin,
                                PyObject *host, PyObject *link) {
    if ((PyObject *)Py_TYPE(op) != Launch_t) Py_RETURN_NOTIMPLEMENTED;
    PyObject *plan = GET(op, L_PLAN);
    if (!plan || (PyObject *)Py_TYPE(plan) != Plan_t) Py_RETURN_NOTIMPLEMENTED;
    PyObject *last = GET(plan, PL_CHAINED), *fate = NULL;
    if (last && PyTuple_Check(last) && PyTuple_Size(last) == 2 && PyTuple_GetItem(last, 0) == verb &&
        PyTuple_GetItem(last, 1) == site) {
        fate = Py_NewRef(last); /* the same (verb, site) objects: the same fate */
    } else {
        PyErr_Clear();
        if (!(fate = PyTuple_Pack(2, verb, site))) return NULL;
        put(plan, PL_CHAINED, fate, NULL);
    }
    int took = claim(op, fate);
    Py_DECREF(fate);
    if (took <= 0) return took < 0 ? NULL : Py_NewRef(Py_NotImplemented);
    if (PyObject_SetAttr(link, s_next, op) < 0) return NULL; /* the link owns it now (released with the tree) */
    PyObject *output = execute_impl(op, ctx, 1, builtin, host);
    if (output == Py_None) {
        Py_DECREF(output);
        output = PyObject_CallMethodObjArgs(op, s_execute, ctx, NULL);
    }
    return output;
}

static PyObject *claim_run(PyObject *self, PyObject *const *argv, Py_ssize_t n) {
    (void)self;
    if (n != 7) return PyErr_Format(PyExc_TypeError, "claim_run takes 7 arguments, got %zd", n);
    if (!claim_acquire) return PyErr_Format(PyExc_RuntimeError, "tile.frontend._fastlaunch.bind_run() was not called");
    return claim_run_impl(argv[0], argv[1], argv[2], argv[3], argv[4], argv[5], argv[6]);
}

/* sync(launch, ctx, verb, BUILTIN_CONTEXTS, HOST): `tile.aio._run.run_sync` of a plain launch, as one C call: the
 * execution lock, the claim (its fate "verb at the user's line", the site kept on the plan), the execution (the
 * compiled `execute`, else `Launch._execute`), the wait, the hand-back, then the output or the first error. Returns
 * NotImplemented before changing anything when it does not handle the call (the lock held, the launch already
 * claimed, not a plain launch): the generic path then runs and raises the typed error. The claim takes `_CLAIMING`
 * like every other claim, so two threads executing one launch never both get it. */
static PyObject *sync_launch(PyObject *self, PyObject *const *argv, Py_ssize_t n) {
    (void)self;
    if (n != 5) return PyErr_Format(PyExc_TypeError, "sync takes 5 arguments, got %zd", n);
    if (!run_state) return PyErr_Format(PyExc_RuntimeError, "tile.frontend._fastlaunch.bind_run() was not called");
    PyObject *op = argv[0], *ctx = argv[1], *verb = argv[2];
    if ((PyObject *)Py_TYPE(op) != Launch_t || !PyUnicode_Check(verb)) Py_RETURN_NOTIMPLEMENTED;
    PyObject *plan = GET(op, L_PLAN), *now = GET(op, L_FATE);
    if (!plan || (PyObject *)Py_TYPE(plan) != Plan_t || (now && now != Py_None)) Py_RETURN_NOTIMPLEMENTED;
    PyObject *held = PyObject_GetAttr(run_state, s_held);
    if (!held) return NULL;
    int busy = PyObject_IsTrue(held);
    Py_DECREF(held);
    if (busy) return busy < 0 ? NULL : Py_NewRef(Py_NotImplemented);
    PyObject *fate = sync_fate(plan, verb);
    if (!fate) return NULL;
    int took = claim(op, fate); /* `DeviceOp._claim`'s test and take, under `_CLAIMING` */
    Py_DECREF(fate);
    if (took <= 0) return took < 0 ? NULL : Py_NewRef(Py_NotImplemented); /* taken meanwhile: the generic path raises */
    PyObject *r;
    if (set_held(Py_True) < 0) return NULL; /* cannot fail for a threading.local; nothing was enqueued */
    PyObject *type = NULL, *value = NULL, *trace = NULL;
    PyObject *output = execute_impl(op, ctx, 0, argv[3], argv[4]);
    if (output == Py_None) {
        Py_DECREF(output);
        output = PyObject_CallMethodObjArgs(op, s_execute, ctx, Py_False, NULL);
    }
    if (!output) PyErr_Fetch(&type, &value, &trace); /* the work enqueued so far still runs: report after it */
    if (set_held(Py_False) < 0) PyErr_WriteUnraisable(run_state);
    r = PyObject_CallMethodObjArgs(ctx, s_synchronize, NULL);
    if (r) {
        Py_DECREF(r);
    } else if (!PyErr_ExceptionMatches(PyExc_Exception)) { /* as `except Exception`: e.g. KeyboardInterrupt */
        Py_XDECREF(type), Py_XDECREF(value), Py_XDECREF(trace), Py_XDECREF(output);
        return NULL;
    } else if (type) {
        PyErr_Clear(); /* the first error wins */
    } else {
        PyErr_Fetch(&type, &value, &trace);
        PyErr_NormalizeException(&type, &value, &trace);
        if (trace) PyException_SetTraceback(value, trace);
        r = value ? PyObject_CallFunctionObjArgs(run_note, value, op, NULL) : NULL;
        if (r) Py_DECREF(r);
        else PyErr_WriteUnraisable(run_note);
    }
    r = drop_impl(op);
    if (r) {
        Py_DECREF(r);
    } else if (type) {
        PyErr_WriteUnraisable(op);
    } else {
        PyErr_Fetch(&type, &value, &trace);
    }
    if (type) {
        Py_XDECREF(output);
        PyErr_Restore(type, value, trace);
        return NULL;
    }
    return output;
}

/* ---- tile.aio's `.then()` chains (bound by `bind_links`) ---------------------------------------------------------- */

/* A link of a chain: an instance of tile.aio's `_Link` (Then, Map, or a subclass: `_src` is _Link's own slot, at the
 * same offset in all of them). */
static int is_link(PyObject *o) { return PyType_IsSubtype(Py_TYPE(o), (PyTypeObject *)Link_t); }

/* One `Then._step` on `out` (a new reference, consumed): the link's function, then, for a plain Launch, the compiled
 * claim and run (`claim_run_impl`; NotImplemented: claimed before, `Launch._claim_run` raises), else `Then._take`,
 * which checks the result is an op and claims and runs it. A Map or a subclass runs its own Python `_step`. */
static PyObject *step(PyObject *link, PyObject *out, PyObject *ctx) {
    PyObject *fn = GET(link, K_FN), *site = GET(link, K_SITE), *next;
    if ((PyObject *)Py_TYPE(link) != Then_t || !fn || !site) {
        next = PyObject_CallMethodObjArgs(link, s_step, out, ctx, NULL);
        Py_DECREF(out);
        return next;
    }
    Py_INCREF(fn), Py_INCREF(site); /* the function may drop anything it can reach: keep what this step reads */
    PyObject *op = PyObject_CallFunctionObjArgs(fn, out, NULL);
    Py_DECREF(out);
    if (!op) {
        next = NULL;
    } else if ((PyObject *)Py_TYPE(op) == Launch_t) {
        next = claim_run_impl(op, RETURNED, site, ctx, BUILTIN, HOST, link);
        if (next == Py_NotImplemented) {
            Py_DECREF(next);
            next = PyObject_CallMethodObjArgs(op, s_claim_run, RETURNED, site, ctx, link, NULL);
        }
    } else {
        next = PyObject_CallMethodObjArgs(link, s_take, op, ctx, NULL);
    }
    Py_XDECREF(op);
    Py_DECREF(fn), Py_DECREF(site);
    return next;
}

/* run_links(link, ctx): `_Link._execute`: the chain's first op run on ctx (`_run_in`), then every link's step bottom-up,
 * in a loop (a chain thousands of links deep does not recurse). NotImplemented, with nothing done, when a link lost
 * its source (the pure path then raises as it would). */
static PyObject *run_links(PyObject *self, PyObject *const *argv, Py_ssize_t n) {
    (void)self;
    if (n != 2) return PyErr_Format(PyExc_TypeError, "run_links(link, ctx)");
    if (!Then_t || !Launch_t || !claim_acquire)
        return PyErr_Format(PyExc_RuntimeError, "tile.frontend._fastlaunch.bind_links() was not called");
    PyObject *op = argv[0], *ctx = argv[1], *links = PyList_New(0);
    if (!links) return NULL;
    while (is_link(op)) {
        if (PyList_Append(links, op) < 0) return Py_DECREF(links), NULL;
        if (!(op = GET(op, K_SRC))) return Py_DECREF(links), Py_NewRef(Py_NotImplemented);
    }
    Py_INCREF(op);
    PyObject *out = PyObject_CallMethodObjArgs(op, s_run_in, ctx, NULL);
    Py_DECREF(op);
    for (Py_ssize_t i = PyList_Size(links) - 1; out && i >= 0; i--) out = step(PyList_GetItem(links, i), out, ctx);
    Py_DECREF(links);
    return out;
}

/* Take slot k's reference out of o (the slot left empty, as `del` leaves it). */
static PyObject *take(PyObject *o, int k) {
    PyObject **slot = (PyObject **)((char *)o + off[k]), *value = *slot;
    *slot = NULL;
    return value;
}

/* release_links(op): `DeviceOp._release` of a chain: each op's `_hand_off` (a Then's and a plain Launch's compiled: its
 * slots emptied, `Launch._drop`'s hand-back), its children released next, in the same order as the pure loop. */
static PyObject *release_links(PyObject *self, PyObject *const *argv, Py_ssize_t n) {
    (void)self;
    if (n != 1) return PyErr_Format(PyExc_TypeError, "release_links(op)");
    if (!Then_t || !Launch_t) return PyErr_Format(PyExc_RuntimeError, "bind_links() was not called");
    PyObject *stack = PyList_New(1);
    if (!stack) return NULL;
    PyList_SetItem(stack, 0, Py_NewRef(argv[0]));
    Py_ssize_t size;
    int rc = 0;
    while (!rc && (size = PyList_Size(stack)) > 0) {
        PyObject *op = Py_NewRef(PyList_GetItem(stack, size - 1));
        rc = PyList_SetSlice(stack, size - 1, size, NULL);
        if (rc) {
        } else if ((PyObject *)Py_TYPE(op) == Then_t && GET(op, K_SRC) && GET(op, K_FN) && GET(op, K_NEXT)) {
            PyObject *src = take(op, K_SRC), *fn = take(op, K_FN), *next = take(op, K_NEXT);
            Py_DECREF(fn); /* `del self._src, self._fn, self._next`, the source and the next op kept to release */
            rc = PyList_Append(stack, src);
            if (!rc && next != Py_None) rc = PyList_Append(stack, next);
            Py_DECREF(src), Py_DECREF(next);
        } else if ((PyObject *)Py_TYPE(op) == Launch_t) {
            PyObject *r = drop_impl(op); /* `Launch._hand_off`: no children */
            rc = r ? 0 : -1;
            Py_XDECREF(r);
        } else {
            PyObject *children = PyObject_CallMethodObjArgs(op, s_hand_off, NULL);
            rc = !children || PyList_SetSlice(stack, PyList_Size(stack), PyList_Size(stack), children);
            Py_XDECREF(children);
        }
        Py_DECREF(op);
    }
    Py_DECREF(stack);
    return rc ? NULL : Py_NewRef(Py_None);
}

/* The fate `DeviceOp.then` gives the op it moves at the user's line: the innermost frame whose module is not Tile's
 * (`caller_site`: its globals' __name__ not under "tile."), its (file, line) looked up by tile.aio's `_then_fate`, the
 * last one kept for its (code, line) (a chain is built at one line). A new reference, or NULL with an error. */
static PyObject *then_fate_here(void) {
    PyObject *frame = (PyObject *)PyEval_GetFrame();
    if (!frame) return PyErr_Format(PyExc_RuntimeError, "tile: .then() without a Python frame");
    Py_INCREF(frame);
    for (;;) {
        PyObject *back = PyObject_GetAttr(frame, s_f_back), *globals = back ? PyObject_GetAttr(frame, s_f_globals) : NULL;
        if (!globals) return Py_XDECREF(back), Py_DECREF(frame), NULL;
        PyObject *name = PyDict_Check(globals) ? PyDict_GetItemWithError(globals, s_name) : NULL;
        int tile = name && PyUnicode_Check(name) && PyUnicode_Tailmatch(name, s_tile_prefix, 0, PY_SSIZE_T_MAX, -1) == 1;
        Py_DECREF(globals);
        if (PyErr_Occurred()) return Py_DECREF(back), Py_DECREF(frame), NULL;
        if (back == Py_None || !tile) {
            Py_DECREF(back);
            break;
        }
        Py_DECREF(frame);
        frame = back;
    }
    PyObject *code = (PyObject *)PyFrame_GetCode((PyFrameObject *)frame);
    int line = PyFrame_GetLineNumber((PyFrameObject *)frame);
    Py_DECREF(frame);
    if (code == then_code && line == then_line && then_fate) return Py_DECREF(code), Py_NewRef(then_fate);
    PyObject *file = PyObject_GetAttr(code, s_co_filename), *number = PyLong_FromLong(line);
    PyObject *where = file && number ? PyTuple_Pack(2, file, number) : NULL;
    PyObject *fate = where ? PyObject_CallFunctionObjArgs(then_fate_of, where, NULL) : NULL;
    Py_XDECREF(file), Py_XDECREF(number), Py_XDECREF(where);
    if (!fate || !PyTuple_Check(fate) || PyTuple_Size(fate) != 2) {
        if (fate) PyErr_Format(PyExc_TypeError, "tile.aio's _then_fate returned %R", fate);
        return Py_DECREF(code), Py_XDECREF(fate), NULL;
    }
    PyObject *old[] = {then_code, then_fate};
    then_code = code, then_line = line, then_fate = Py_NewRef(fate);
    Py_XDECREF(old[0]), Py_XDECREF(old[1]);
    return fate;
}

/* then(op, fn): `DeviceOp.then` for a plain Launch or a Then: the fate at the user's line, the claim under _CLAIMING,
 * and the Then link (its slots set as `Then.__init__` sets them). NotImplemented, having changed nothing, for another op
 * or one claimed before (`DeviceOp.then` then raises OpConsumedError). */
static PyObject *then(PyObject *self, PyObject *const *argv, Py_ssize_t n) {
    (void)self;
    if (n != 2) return PyErr_Format(PyExc_TypeError, "then(op, fn)");
    if (!Then_t || !then_alloc || !claim_acquire) return PyErr_Format(PyExc_RuntimeError, "bind_links() was not called");
    PyObject *op = argv[0], *fn = argv[1];
    if ((PyObject *)Py_TYPE(op) != Launch_t && (PyObject *)Py_TYPE(op) != Then_t) Py_RETURN_NOTIMPLEMENTED;
    PyObject *fate = then_fate_here();
    if (!fate) return NULL;
    PyObject *link = then_alloc((PyTypeObject *)Then_t, 0);
    if (!link) return Py_DECREF(fate), NULL;
    int took = claim(op, fate); /* L_FATE and K_FATE: DeviceOp's one `_fate` slot (checked by bind_links) */
    if (took <= 0) {
        Py_DECREF(fate), Py_DECREF(link);
        return took < 0 ? NULL : Py_NewRef(Py_NotImplemented);
    }
    put(link, K_FATE, Py_None, NULL);
    put(link, K_SRC, op, NULL);
    put(link, K_FN, fn, NULL);
    put(link, K_SITE, PyTuple_GetItem(fate, 1), NULL);
    put(link, K_NEXT, Py_None, NULL);
    Py_DECREF(fate);
    return link;
}

/* bind_links(_Link, Then, Map, RETURNED, BUILTIN_CONTEXTS, HOST, _then_fate): tile.aio's chain classes (their slots), the fate verb
 * of an op a .then() function returned, and what a launch's execution checks its context against. */
static PyObject *bind_links(PyObject *self, PyObject *const *argv, Py_ssize_t n) {
    (void)self;
    if (n != 7 || !PyType_Check(argv[0]) || !PyType_Check(argv[1]) || !PyType_Check(argv[2]) ||
        !PyUnicode_Check(argv[3]) || !PyCallable_Check(argv[6]))
        return PyErr_Format(PyExc_TypeError, "bind_links(_Link, Then, Map, RETURNED, BUILTIN_CONTEXTS, HOST, _then_fate)");
    if (!Launch_t) return PyErr_Format(PyExc_RuntimeError, "bind_links: bind() was not called");
    static const int links[] = {K_SRC, K_FN, K_NEXT, K_SITE, K_FATE}, map[] = {M_SRC};
    if (probe(argv[1], links, 5) || probe(argv[2], map, 1)) return NULL;
    if (off[K_SRC] != off[M_SRC]) return PyErr_Format(PyExc_TypeError, "bind_links: Then and Map differ in _src");
    if (off[K_FATE] != off[L_FATE]) return PyErr_Format(PyExc_TypeError, "bind_links: Then and Launch differ in _fate");
    then_alloc = (allocfunc)PyType_GetSlot((PyTypeObject *)argv[1], Py_tp_alloc);
    Py_XDECREF(then_fate_of);
    then_fate_of = Py_NewRef(argv[6]);
    PyObject *old[] = {Link_t, Then_t, RETURNED, BUILTIN, HOST};
    Link_t = Py_NewRef(argv[0]);
    Then_t = Py_NewRef(argv[1]);
    RETURNED = Py_NewRef(argv[3]);
    BUILTIN = Py_NewRef(argv[4]);
    HOST = Py_NewRef(argv[5]);
    for (int k = 0; k < 5; k++) Py_XDECREF(old[k]);
    Py_RETURN_NONE;
}

/* bind_run(tile.aio._lock._state, tile.aio._run._note_waited_for, tile.aio._op._CLAIMING, tile.aio.CudaContext): what
 * `sync` uses of tile.aio, and the context class whose stream `execute` reads from its slot (a CUDA context's device
 * is never the host: only that class, exactly, is read so; a subclass such as a capture's recorder goes through its
 * attributes). */
static PyObject *bind_run(PyObject *self, PyObject *const *argv, Py_ssize_t n) {
    (void)self;
    if (n != 4 || !PyCallable_Check(argv[1]) || !PyType_Check(argv[3]))
        return PyErr_Format(PyExc_TypeError, "bind_run(state, note, claiming, CudaContext)");
    static const int context[] = {C_STREAM, C_DEVICE};
    if (probe(argv[3], context, 2)) return NULL;
    PyObject *acquire = PyObject_GetAttrString(argv[2], "acquire");
    PyObject *release_ = acquire ? PyObject_GetAttrString(argv[2], "release") : NULL;
    if (!release_) {
        Py_XDECREF(acquire);
        return NULL;
    }
    PyObject *old[] = {run_state, run_note, claim_acquire, claim_release, CudaContext_t};
    CudaContext_t = Py_NewRef(argv[3]);
    run_state = Py_NewRef(argv[0]);
    run_note = Py_NewRef(argv[1]);
    claim_acquire = acquire;
    claim_release = release_;
    for (int k = 0; k < 5; k++) Py_XDECREF(old[k]);
    Py_RETURN_NONE;
}

/* bind_core(PreparedLaunch, use_lock, invalidation, check, RUNNING): tile.core's prepared launch class (its guard
 * slots), the lock its call holds, the epoch list it compares, tile.bindings' result check and the count of host
 * functions running (while one runs, the method itself refuses a launch from inside it), for `relaunch`. */
static PyObject *bind_core(PyObject *self, PyObject *const *argv, Py_ssize_t n) {
    (void)self;
    if (n != 5 || !PyType_Check(argv[0]) || !PyList_Check(argv[2]) || !PyCallable_Check(argv[3]) ||
        !PyList_Check(argv[4]))
        return PyErr_Format(PyExc_TypeError, "bind_core(PreparedLaunch, use_lock, invalidation, check, RUNNING)");
    static const int prepared[] = {PR_EPOCH, PR_LAUNCH, PR_CALL, PR_SHARED};
    if (probe(argv[0], prepared, 4)) return NULL;
    PyObject *acquire = PyObject_GetAttrString(argv[1], "acquire");
    PyObject *release_ = acquire ? PyObject_GetAttrString(argv[1], "release") : NULL;
    if (!release_) {
        Py_XDECREF(acquire);
        return NULL;
    }
    PyObject *old[] = {Prepared_t, use_acquire, use_release, invalidation, core_check, host_running};
    Prepared_t = Py_NewRef(argv[0]);
    use_acquire = acquire;
    use_release = release_;
    invalidation = Py_NewRef(argv[2]);
    core_check = Py_NewRef(argv[3]);
    host_running = Py_NewRef(argv[4]);
    for (int k = 0; k < 6; k++) Py_XDECREF(old[k]);
    Py_RETURN_NONE;
}

/* The offset of slot `name` in instances of `cls`: write a unique object through the attribute of a fresh instance
 * and find it. Every probed slot is set to None afterwards, so the instance's __del__ sees a finished object. */
static int probe(PyObject *cls, const int *ks, int count) {
    PyObject *basic = PyObject_GetAttrString(cls, "__basicsize__");
    Py_ssize_t size = basic ? PyLong_AsSsize_t(basic) : -1;
    Py_XDECREF(basic);
    allocfunc alloc = (allocfunc)PyType_GetSlot((PyTypeObject *)cls, Py_tp_alloc);
    if (size <= 0 || !alloc) return PyErr_Format(PyExc_TypeError, "bind: %R has no instance layout", cls), -1;
    PyObject *o = alloc((PyTypeObject *)cls, 0);
    if (!o) return -1;
    int rc = 0;
    for (int j = 0; j < count && !rc; j++) {
        int k = ks[j];
        PyObject *mark = PyList_New(0);
        rc = !mark || PyObject_SetAttrString(o, slot_names[k], mark);
        off[k] = 0;
        for (Py_ssize_t at = (Py_ssize_t)sizeof(PyObject); !rc && at + (Py_ssize_t)sizeof(PyObject *) <= size;
             at += (Py_ssize_t)sizeof(PyObject *))
            if (*(PyObject **)((char *)o + at) == mark) off[k] = at;
        if (!rc && !off[k]) {
            PyErr_Format(PyExc_TypeError, "bind: %R.%s is not a slot", cls, slot_names[k]);
            rc = 1;
        }
        if (!rc) rc = PyObject_SetAttrString(o, slot_names[k], Py_None);
        Py_XDECREF(mark);
    }
    Py_DECREF(o);
    return rc ? -1 : 0;
}

/* bind(Tensor, Partition, Shared, Storage, Plan, Launch, InFlight, IN_FLIGHT, PLAIN, FOREIGN, OURS, OWNERSHIP,
 * NEG_ZERO). */
static PyObject *bind(PyObject *self, PyObject *const *argv, Py_ssize_t n) {
    (void)self;
    if (n != 13) return PyErr_Format(PyExc_TypeError, "bind takes 13 arguments, got %zd", n);
    if (!PyFloat_Check(argv[12])) return PyErr_Format(PyExc_TypeError, "bind: NEG_ZERO must be a float");
    if (!PyTuple_Check(argv[10])) return PyErr_Format(PyExc_TypeError, "bind: OURS must be a tuple of paths");
    for (Py_ssize_t k = 0; k < PyTuple_Size(argv[10]); k++)
        if (!PyUnicode_Check(PyTuple_GetItem(argv[10], k)))
            return PyErr_Format(PyExc_TypeError, "bind: OURS must be a tuple of paths");
    PyObject *acquire = PyObject_GetAttrString(argv[11], "acquire");
    PyObject *release_ = acquire ? PyObject_GetAttrString(argv[11], "release") : NULL;
    if (!release_) {
        Py_XDECREF(acquire);
        return NULL;
    }
    PyObject *old[] = {lock_acquire, lock_release, OURS, NEG_ZERO};
    lock_acquire = acquire;
    lock_release = release_;
    OURS = Py_NewRef(argv[10]);
    NEG_ZERO = Py_NewRef(argv[12]);
    for (int k = 0; k < 4; k++) Py_XDECREF(old[k]);
    for (int k = 0; k < 7; k++)
        if (!PyType_Check(argv[k])) return PyErr_Format(PyExc_TypeError, "bind: argument %d must be a class", k);
    if (!PyFrozenSet_Check(argv[8]) || !PyDict_Check(argv[9]))
        return PyErr_Format(PyExc_TypeError, "bind: PLAIN must be a frozenset and FOREIGN a dict");
    static const int tensor[] = {T_FATE, T_STORAGE, T_LAYOUT, T_RANGE, T_DTYPE, T_SHAPE, T_OFFSET, T_STRIDES, T_SITE};
    static const int partition[] = {W_FATE, W_TENSOR, P_TILE};
    static const int storage[] = {S_FREED, S_HANDLES, S_EXPORTS, S_PENDING};
    static const int plan[] = {PL_GIVEN, PL_EXPLICIT, PL_GENERICS, PL_USER_CONSTS, PL_TENSORS, PL_WRAPPED,
                               PL_PAIRS, PL_OTHERS, PL_SCALARS, PL_TAIL, PL_ALIAS, PL_MOVED, PL_LENT, PL_HELD,
                               PL_SHARES, PL_GRID, PL_PACKING, PL_PREPARED, PL_SITE, PL_SYNCED, PL_CHAINED};
    static const int launch[] = {L_FATE, L_KERNEL, L_PLAN, L_SITE, L_VALUES, L_GRID, L_AFTER, L_LENT};
    static const int shared[] = {SH_USERS};
    if (probe(argv[0], tensor, 9) || probe(argv[1], partition, 3) || probe(argv[3], storage, 4) ||
        probe(argv[4], plan, 21) || probe(argv[5], launch, 8))
        return NULL;
    Py_ssize_t fate = off[W_FATE], inner = off[W_TENSOR];
    if (probe(argv[2], (const int[]){W_FATE, W_TENSOR}, 2) || probe(argv[2], shared, 1)) return NULL;
    if (off[W_FATE] != fate || off[W_TENSOR] != inner)
        return PyErr_Format(PyExc_TypeError, "bind: Partition and Shared lay out their wrapper slots differently");
    tensor_alloc = (allocfunc)PyType_GetSlot((PyTypeObject *)argv[0], Py_tp_alloc);
    partition_alloc = (allocfunc)PyType_GetSlot((PyTypeObject *)argv[1], Py_tp_alloc);
    launch_alloc = (allocfunc)PyType_GetSlot((PyTypeObject *)argv[5], Py_tp_alloc);
    PyObject **bound[] = {&Tensor_t, &Partition_t, &Shared_t, &Storage_t, &Plan_t, &Launch_t, &InFlight_t, &IN_FLIGHT,
                          &PLAIN, &FOREIGN};
    for (int k = 0; k < 10; k++) {
        Py_XDECREF(*bound[k]);
        *bound[k] = Py_NewRef(argv[k]);
    }
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"admit_move", (PyCFunction)(void (*)(void))admit_move, METH_FASTCALL,
     "admit_move(plan, args, generics, explicit, unchecked, check, fate[, Launch, name, site]) -> Launch | "
     "(values, after) | None"},
    {"call", (PyCFunction)(void (*)(void))call, METH_FASTCALL,
     "call(plan, kernel, args, generics) -> Launch | None (Kernel.__call__ on the kernel's latest plan)"},
    {"drop", (PyCFunction)(void (*)(void))drop, METH_FASTCALL, "drop(launch): Launch._drop, holding OWNERSHIP"},
    {"release", (PyCFunction)(void (*)(void))release, METH_FASTCALL,
     "release(plan, values, lent): a launch's hand-back (Launch._drop)"},
    {"replay", (PyCFunction)(void (*)(void))replay, METH_FASTCALL,
     "replay(plan, values, grid, stream) -> None (relaunched) | packed arguments"},
    {"execute", (PyCFunction)(void (*)(void))execute, METH_FASTCALL,
     "execute(launch, ctx, lend, BUILTIN_CONTEXTS, HOST) -> values | None (Launch._execute, common case)"},
    {"sync", (PyCFunction)(void (*)(void))sync_launch, METH_FASTCALL,
     "sync(launch, ctx, verb, BUILTIN_CONTEXTS, HOST) -> output | NotImplemented (run_sync of a plain launch)"},
    {"claim_run", (PyCFunction)(void (*)(void))claim_run, METH_FASTCALL,
     "claim_run(launch, verb, site, ctx, BUILTIN_CONTEXTS, HOST, link) -> output | NotImplemented (Then._step's claim + run)"},
    {"run_links", (PyCFunction)(void (*)(void))run_links, METH_FASTCALL,
     "run_links(link, ctx) -> output | NotImplemented (_Link._execute: a .then()/.map() chain's steps, in a loop)"},
    {"release_links", (PyCFunction)(void (*)(void))release_links, METH_FASTCALL,
     "release_links(op): DeviceOp._release of a chain (its ops' hand-off, in a loop)"},
    {"then", (PyCFunction)(void (*)(void))then, METH_FASTCALL,
     "then(op, fn) -> Then | NotImplemented (DeviceOp.then of a plain Launch or a Then link)"},
    {"bind_links", (PyCFunction)(void (*)(void))bind_links, METH_FASTCALL,
     "bind_links(_Link, Then, Map, RETURNED, BUILTIN_CONTEXTS, HOST, _then_fate): tile.aio's chains, for run_links"},
    {"bind_run", (PyCFunction)(void (*)(void))bind_run, METH_FASTCALL,
     "bind_run(state, note, claiming, CudaContext): the execution-lock state, _note_waited_for, _CLAIMING, CudaContext"},
    {"bind_core", (PyCFunction)(void (*)(void))bind_core, METH_FASTCALL,
     "bind_core(PreparedLaunch, use_lock, invalidation, check, RUNNING): tile.core's relaunch, for the compiled "
     "relaunch"},
    {"bind", (PyCFunction)(void (*)(void))bind, METH_FASTCALL,
     "bind(Tensor, Partition, Shared, Storage, Plan, Launch, InFlight, IN_FLIGHT, PLAIN, FOREIGN, OURS, OWNERSHIP, "
     "NEG_ZERO)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fastlaunch", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__fastlaunch(void) {
    struct {
        PyObject **name;
        const char *text;
    } names[] = {{&s_release, "release"}, {&s_check_scalar, "_check_scalar"}, {&s_grid, "_grid"},
                 {&s_unchecked, "unchecked"}, {&s_name, "__name__"}, {&s_f_back, "f_back"},
                 {&s_co_filename, "co_filename"}, {&s_launch, "launch"}, {&s_ctx, "ctx"}, {&s_site, "site"},
                 {&s_device, "device"}, {&s_stream, "stream"}, {&s_held, "held"},
                 {&s_synchronize, "synchronize"}, {&s_execute, "_execute"}, {&s_next, "_next"},
                 {&s_cuLaunchKernel, "cuLaunchKernel"}, {&s_run_in, "_run_in"},
                 {&s_step, "_step"}, {&s_take, "_take"}, {&s_claim_run, "_claim_run"}, {&s_hand_off, "_hand_off"},
                 {&s_f_globals, "f_globals"}, {&s_f_lineno, "f_lineno"}, {&s_tile_prefix, "tile."}};
    for (size_t k = 0; k < sizeof names / sizeof *names; k++)
        if (!(*names[k].name = PyUnicode_InternFromString(names[k].text))) return NULL;
    if (!(zero = PyLong_FromLong(0))) return NULL;
    return PyModule_Create(&module);
}
