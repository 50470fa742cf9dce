/* `Kernel.__call__` (`call`) and `Launch._drop` (`drop`) as one C call each: the user's call site, then the step
 * under OWNERSHIP with the cyclic collector paused. */
#include "_fastlaunch.h"

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
PyObject *drop_impl(PyObject *op) {
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

PyObject *drop(PyObject *self, PyObject *const *argv, Py_ssize_t n) {
    (void)self;
    if (n != 1 || (PyObject *)Py_TYPE(argv[0]) != Launch_t) return PyErr_Format(PyExc_TypeError, "drop(launch)");
    return drop_impl(argv[0]);
}

/* The innermost frame outside tile.frontend and tile.aio (`_site.user_site`), as a new reference. */
PyObject *user_frame(void) {
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
PyObject *call(PyObject *self, PyObject *const *argv, Py_ssize_t n) {
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
