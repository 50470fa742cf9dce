/* tile.aio's `.then()` chains (bound by `bind_links`): building a link (`then`), running a chain (`run_links`) and
 * releasing it (`release_links`), each in a loop. */
#include "_fastlaunch.h"

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
PyObject *run_links(PyObject *self, PyObject *const *argv, Py_ssize_t n) {
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

/* What a release step drops while it holds OWNERSHIP (a link's function, a launch's handles, the ops taken off the
 * stack), released once the step is left: nothing the release frees runs code (a `__del__`, a deferred free) inside
 * it. DEAD_MAX bounds the step: a full buffer leaves it, releases them and takes it again. */
#define DEAD_MAX 240
struct step {
    int paused; /* `enter`'s result while OWNERSHIP is held, -1 while it is not */
    int n;
    PyObject *dead[DEAD_MAX];
};

static void step_leave(struct step *st) {
    if (st->paused >= 0) leave(st->paused);
    st->paused = -1;
    for (int k = 0; k < st->n; k++) Py_XDECREF(st->dead[k]); /* may run code: outside the step */
    st->n = 0;
}

/* Keep o (a reference the caller gives up, or NULL) to release after the step; released now when no step is held. */
static void step_drop(struct step *st, PyObject *o) {
    if (st->paused < 0) Py_XDECREF(o);
    else st->dead[st->n++] = o;
}

/* release_links(op): `DeviceOp._release` of a chain: each op's `_hand_off` (a Then's and a plain Launch's compiled: its
 * slots emptied, `Launch._drop`'s hand-back), its children released next, in the same order as the pure loop. The
 * launches' hand-backs share one hold of OWNERSHIP (each `drop` would take it and give it back: a chain of a hundred
 * launches took it a hundred times, with the device idle after the chain's last kernel); any other op's Python
 * `_hand_off` runs outside it. */
PyObject *release_links(PyObject *self, PyObject *const *argv, Py_ssize_t n) {
    (void)self;
    if (n != 1) return PyErr_Format(PyExc_TypeError, "release_links(op)");
    if (!Then_t || !Launch_t) return PyErr_Format(PyExc_RuntimeError, "bind_links() was not called");
    PyObject *stack = PyList_New(1);
    if (!stack) return NULL;
    PyList_SetItem(stack, 0, Py_NewRef(argv[0]));
    struct step st;
    st.paused = -1, st.n = 0;
    Py_ssize_t size;
    int rc = 0;
    while (!rc && (size = PyList_Size(stack)) > 0) {
        if (st.n > DEAD_MAX - 4) step_leave(&st); /* a Then keeps 2, a Launch 3, each op 1 */
        PyObject *op = Py_NewRef(PyList_GetItem(stack, size - 1));
        rc = PyList_SetSlice(stack, size - 1, size, NULL);
        if (rc) {
        } else if ((PyObject *)Py_TYPE(op) == Then_t && GET(op, K_SRC) && GET(op, K_FN) && GET(op, K_NEXT)) {
            PyObject *src = take(op, K_SRC), *fn = take(op, K_FN), *next = take(op, K_NEXT);
            step_drop(&st, fn); /* `del self._src, self._fn, self._next`, the source and the next op kept to release */
            rc = PyList_Append(stack, src);
            if (!rc && next != Py_None) rc = PyList_Append(stack, next);
            step_drop(&st, src), step_drop(&st, next);
        } else if ((PyObject *)Py_TYPE(op) == Launch_t) { /* `Launch._hand_off`: no children */
            if (st.paused < 0 && (st.paused = enter()) < 0) {
                st.paused = -1;
                rc = -1;
            } else {
                PyObject *values, *lent, *r = drop_held(op, &values, &lent);
                rc = r ? 0 : -1;
                Py_XDECREF(r); /* None */
                step_drop(&st, values), step_drop(&st, lent);
            }
        } else {
            step_leave(&st); /* a Python `_hand_off`: outside the step */
            PyObject *children = PyObject_CallMethodObjArgs(op, s_hand_off, NULL);
            rc = !children || PyList_SetSlice(stack, PyList_Size(stack), PyList_Size(stack), children);
            Py_XDECREF(children);
        }
        step_drop(&st, op);
    }
    step_leave(&st);
    Py_DECREF(stack);
    return rc ? NULL : Py_NewRef(Py_None);
}

/* The fate `DeviceOp.then` gives the op it moves at the user's line: the innermost frame whose module is not Tile's
 * (`caller_site`: its globals' __name__ not under "tile."), its (file, line) looked up by tile.aio's `_then_fate`, the
 * last one kept for its (code, lasti) (a chain is built at one line; see `frame_lasti`). A new reference, or NULL with
 * an error. */
static PyObject *then_fate_here(void) {
    PyObject *frame = (PyObject *)PyEval_GetFrame();
    if (!frame) return PyErr_Format(PyExc_RuntimeError, "tile: .then() without a Python frame");
    Py_INCREF(frame);
    for (;;) { /* f_back only of Tile's frames: reading it makes the caller's frame object */
        PyObject *globals = PyObject_GetAttr(frame, s_f_globals);
        if (!globals) return Py_DECREF(frame), NULL;
        PyObject *name = PyDict_Check(globals) ? PyDict_GetItemWithError(globals, s_name) : NULL;
        int tile = name && PyUnicode_Check(name) && PyUnicode_Tailmatch(name, s_tile_prefix, 0, PY_SSIZE_T_MAX, -1) == 1;
        Py_DECREF(globals);
        if (PyErr_Occurred()) return Py_DECREF(frame), NULL;
        if (!tile) break;
        PyObject *back = PyObject_GetAttr(frame, s_f_back);
        if (!back) return Py_DECREF(frame), NULL;
        if (back == Py_None) {
            Py_DECREF(back);
            break;
        }
        Py_DECREF(frame);
        frame = back;
    }
    long lasti;
    if (frame_lasti(frame, &lasti) < 0) return Py_DECREF(frame), NULL;
    PyObject *code = (PyObject *)PyFrame_GetCode((PyFrameObject *)frame);
    if (code == then_code && lasti == then_lasti && then_fate)
        return Py_DECREF(code), Py_DECREF(frame), Py_NewRef(then_fate);
    int line = PyFrame_GetLineNumber((PyFrameObject *)frame); /* decodes the line table: only for a new position */
    Py_DECREF(frame);
    PyObject *file = PyObject_GetAttr(code, s_co_filename), *number = PyLong_FromLong(line);
    PyObject *where = file && number ? PyTuple_Pack(2, file, number) : NULL;
    PyObject *fate = where ? PyObject_CallFunctionObjArgs(then_fate_of, where, NULL) : NULL;
    Py_XDECREF(file), Py_XDECREF(number), Py_XDECREF(where);
    if (!fate || !PyTuple_Check(fate) || PyTuple_Size(fate) != 2) {
        if (fate) PyErr_Format(PyExc_TypeError, "tile.aio's _then_fate returned %R", fate);
        return Py_DECREF(code), Py_XDECREF(fate), NULL;
    }
    PyObject *old[] = {then_code, then_fate};
    then_code = code, then_lasti = lasti, then_fate = Py_NewRef(fate);
    Py_XDECREF(old[0]), Py_XDECREF(old[1]);
    return fate;
}

/* then(op, fn): `DeviceOp.then` for a plain Launch or a Then: the fate at the user's line, the claim under _CLAIMING,
 * and the Then link (its slots set as `Then.__init__` sets them). NotImplemented, having changed nothing, for another op
 * or one claimed before (`DeviceOp.then` then raises OpConsumedError). */
PyObject *then(PyObject *self, PyObject *const *argv, Py_ssize_t n) {
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
