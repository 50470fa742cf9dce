/* The compiled path's moves: `Plan.hand_over` (a new handle per moved argument), `Launch.__init__`, `Plan.admit` +
 * `Plan.hand_over` in one step (`admit_move`), and `Launch._drop`'s hand-back (`release`). */
#include "_fastlaunch.h"

/* The objects every compiled launch makes (a handle per moved argument, the Launch) leave the cyclic collector's
 * lists. A chain keeps them alive until its hand-back, so the young collections walked them and promoted them, and
 * each object promoted brings the next full collection (which walks every object of the process) sooner: over the
 * simulated driver the collector took as much time per .then link as the compiled path's own work
 * (benchmarks/gc_chain.py). Untracking only hides an object from the collector: what it references stays alive (the
 * collector counts its references as outside ones) and refcounting frees it as before, but a cycle through it is
 * never collected. So an object leaves the lists only when nothing it references can lead back to it through the
 * user's objects (review 43: a borrowed tensor stored on the object it borrows from, or a launch stored on the user's
 * stream object it was ordered after, kept that memory for good, where the pure path's collection freed it):
 * - a handle of owned memory: it holds its storage (whose registry keeps weak references to its handles, and which
 *   holds Tile's own buffer or host array), layout values and a fate (None or a string pair at the move). A borrowed
 *   storage holds its producer (`keepalive`: the user's array or DLPack object, which may hold the handle), so its
 *   handles (and partitions of them) stay tracked;
 * - a Launch whose values tuple left the lists too (only such handles and plain scalars) and that was taken from no
 *   launch in flight (`after` None: an InFlight holds its context, whose stream holds the user's stream object). It
 *   holds its kernel's name, its plan (which holds no launch), site, grid and fates.
 * What a lend sets later (the InFlight fate of a launch's handles and its `_lent`) is cleared by the hand-back once
 * the work is done; until then the work keeps the memory on both paths (an executed launch's __del__ releases
 * nothing). The one cycle of Tile's own is a parked launch's (its fate -> the completion's callback -> the launch),
 * broken when the work completes. */
static void untrack(PyObject *o) {
    if (PyObject_GC_IsTracked(o)) PyObject_GC_UnTrack(o);
}

/* Whether the tensor's storage is owned memory, holding no producer of the user's (`Storage.keepalive` None). */
static int owned_storage(PyObject *t) {
    PyObject *s = (PyObject *)Py_TYPE(t) == Tensor_t ? storage_of(t) : NULL;
    return s && GET(s, S_KEEPALIVE) == Py_None;
}

/* A tuple none of whose items is tracked (the values of a launch of handles and scalars) cannot be in a cycle either:
 * untracked now, not at the next collection (which keeps a tuple of objects of Python classes tracked). */
static void untrack_leaves(PyObject *t) {
    if (!PyTuple_Check(t) || !PyObject_GC_IsTracked(t)) return;
    for (Py_ssize_t k = 0, n = PyTuple_Size(t); k < n; k++)
        if (PyObject_GC_IsTracked(PyTuple_GetItem(t, k))) return;
    PyObject_GC_UnTrack(t);
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
    if (owned_storage(new)) untrack(new);
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
    if (owned_storage(t)) untrack(new);
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
int fate_slot(PyObject *v) {
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
    untrack_leaves(values);
    if (!PyObject_GC_IsTracked(values) && after == Py_None) untrack(op);
    return op;
}

/* `Plan.admit` + `Plan.hand_over` + `Launch.__init__` (see the top of the file). ``check`` is the kernel's
 * `_check_scalar`, or NULL: then it is read from ``kernel`` when the plan has scalars. ``name`` NULL: return
 * (values, after) instead of the Launch. The caller holds OWNERSHIP with the collector paused. */
PyObject *admit_impl(PyObject *plan, PyObject *args, PyObject *generics, PyObject *explicit, int unchecked,
                     PyObject *check, PyObject *kernel, PyObject *fate, PyObject *name, PyObject *site) {
    if ((PyObject *)Py_TYPE(plan) != Plan_t || !PyTuple_Check(args)) Py_RETURN_NONE;
    /* Plan.admit's preamble: the argument count, the grid object, the generics; a user type's Const or generic
     * (user_consts) needs the pure path's recheck. */
    PyObject *given = GET(plan, PL_GIVEN), *plan_generics = GET(plan, PL_GENERICS);
    if (!given || !plan_generics || PyTuple_Size(args) != as_index(given) || explicit != GET(plan, PL_EXPLICIT) ||
        GET(plan, PL_USER_CONSTS) != Py_False)
        Py_RETURN_NONE;
    if (!PyDict_Check(generics)) Py_RETURN_NONE;
    PyObject *key, *value;
    for (Py_ssize_t pos = 0; PyDict_Next(generics, &pos, &key, &value);) {
        /* Only plain values (`_plan._plain`): comparing another class's value runs the user's __eq__ inside the step,
         * OWNERSHIP held (review 43: one waiting for another thread's use of a tensor hung both); the keyed path
         * checks it (ArgumentError for a generic that is no int). */
        int plain = PyUnicode_CheckExact(key) && Py_TYPE(Py_TYPE(value)) == &PyType_Type
                        ? PySet_Contains(PLAIN, (PyObject *)Py_TYPE(value))
                        : 0;
        if (plain <= 0) return plain < 0 ? NULL : Py_NewRef(Py_None);
    }
    if (PyDict_Check(plan_generics) && PyDict_Size(generics) == 0) {
        if (PyDict_Size(plan_generics) != 0) Py_RETURN_NONE;
    } else {
        int eq = PyObject_RichCompareBool(generics, plan_generics, Py_EQ);
        if (eq <= 0) return eq < 0 ? NULL : Py_NewRef(Py_None);
        for (Py_ssize_t pos = 0; PyDict_Next(generics, &pos, &key, &value);) {
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

PyObject *admit_move(PyObject *self, PyObject *const *argv, Py_ssize_t n) {
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
PyObject *release_impl(PyObject *plan, PyObject *values, PyObject *lent) {
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

PyObject *release(PyObject *self, PyObject *const *argv, Py_ssize_t n) {
    (void)self;
    if (n != 3) return PyErr_Format(PyExc_TypeError, "release takes 3 arguments, got %zd", n);
    return release_impl(argv[0], argv[1], argv[2]);
}
