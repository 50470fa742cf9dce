/* `Kernel.__call__` (`call`) and `Launch._drop` (`drop`) as one C call each: the user's call site, then the step
 * under OWNERSHIP with the cyclic collector paused. */
#include "_fastlaunch.h"

/* One step under OWNERSHIP with the cyclic collector paused, as `_storage.owning` and `OWNED` make it: `enter` takes
 * the lock (it may wait, the GIL released, like `with OWNERSHIP`) and returns whether it paused the collector (-1: an
 * error); `leave` restores the collector and gives the lock back, keeping a pending exception. */
int enter(void) {
    PyObject *r = PyObject_CallNoArgs(lock_acquire);
    if (!r) return -1;
    Py_DECREF(r);
    return PyGC_Disable();
}

void leave(int paused) {
    if (paused) PyGC_Enable();
    PyObject *type, *value, *trace;
    PyErr_Fetch(&type, &value, &trace);
    PyObject *r = PyObject_CallNoArgs(lock_release);
    if (r) Py_DECREF(r);
    else PyErr_WriteUnraisable(lock_release); /* cannot happen: this thread holds the lock it releases */
    PyErr_Restore(type, value, trace);
}

/* `Launch._drop`'s step, OWNERSHIP held: the launch's values and lent fate go to *values and *lent (new references, or
 * NULL: the caller releases them after leaving the step, so no handle dies inside it) and the hand-back is done. */
PyObject *drop_held(PyObject *op, PyObject **values, PyObject **lent) {
    *values = *lent = NULL;
    PyObject *now = GET(op, L_VALUES), *plan = GET(op, L_PLAN);
    if (!now || now == Py_None || !plan) return Py_NewRef(Py_None);
    put(op, L_VALUES, Py_None, values); /* values, self._values = self._values, None */
    put(op, L_LENT, Py_None, lent);
    return release_impl(plan, *values, *lent ? *lent : Py_None);
}

/* drop(launch): `Launch._drop` (the hand-back once the work is done), the step holding OWNERSHIP. */
PyObject *drop_impl(PyObject *op) {
    PyObject *values, *lent;
    int paused = enter();
    if (paused < 0) return NULL;
    PyObject *result = drop_held(op, &values, &lent);
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

/* Whether a code object's file lies under OURS (`_site._ours`), remembered for the last CODES code objects seen: a pure
 * function of the file name (OURS is fixed), so an entry never goes stale, and each entry holds its code object (its
 * address is not reused while cached). A walk thus tests a frame of a known function by identity, not by the prefix
 * tests of its file name against each of OURS. 1 ours, 0 not, -1 an error. */
#define CODES 8
static PyObject *codes[CODES];
static char codes_ours[CODES];
static int codes_next;

static int code_is_ours(PyObject *code) {
    for (int k = 0; k < CODES; k++)
        if (codes[k] == code) return codes_ours[k];
    PyObject *file = PyObject_GetAttr(code, s_co_filename);
    if (!file) return -1;
    int ours = 0;
    for (Py_ssize_t k = 0, m = PyTuple_Size(OURS); k < m && !ours && ours >= 0; k++)
        ours = (int)PyUnicode_Tailmatch(file, PyTuple_GetItem(OURS, k), 0, PY_SSIZE_T_MAX, -1);
    Py_DECREF(file);
    if (ours < 0) return -1;
    PyObject *old = codes[codes_next];
    codes[codes_next] = Py_NewRef(code);
    codes_ours[codes_next] = (char)ours;
    codes_next = (codes_next + 1) % CODES;
    Py_XDECREF(old);
    return ours;
}

/* The innermost frame outside tile.frontend and tile.aio (`_site.user_site`: the outermost frame if all are), as a new
 * reference. */
PyObject *user_frame(void) {
    PyObject *frame = (PyObject *)PyEval_GetFrame();
    if (!frame) return PyErr_Format(PyExc_RuntimeError, "tile: a kernel call without a Python frame");
    Py_INCREF(frame);
    for (;;) {
        PyObject *code = (PyObject *)PyFrame_GetCode((PyFrameObject *)frame);
        int ours = code_is_ours(code);
        Py_DECREF(code);
        if (ours <= 0) {
            if (ours == 0) return frame;
            break;
        }
        PyObject *back = PyObject_GetAttr(frame, s_f_back);
        if (!back) break;
        if (back == Py_None) {
            Py_DECREF(back);
            return frame;
        }
        Py_DECREF(frame);
        frame = back;
    }
    Py_DECREF(frame);
    return NULL;
}

/* The frame's f_lasti, its last instruction's offset in its code object: with the code object, a position that names
 * one line. The sites are cached by it, not by line: `PyFrame_GetLineNumber` decodes the line table from the start of
 * the code object (microseconds at the end of a long function, per call). 0, or -1 with an error. */
int frame_lasti(PyObject *frame, long *lasti) {
    PyObject *v = PyObject_GetAttr(frame, s_f_lasti);
    if (!v) return -1;
    *lasti = PyLong_AsLong(v);
    Py_DECREF(v);
    return *lasti == -1 && PyErr_Occurred() ? -1 : 0;
}

/* The plan's call site for the user's frame (`launch_again`'s site): (code, line, "file:line", the moved-fate, lasti),
 * made once per call site (code and lasti); a new reference. */
static PyObject *site_of(PyObject *plan, PyObject *name) {
    PyObject *frame = user_frame();
    if (!frame) return NULL;
    long lasti;
    if (frame_lasti(frame, &lasti) < 0) return Py_DECREF(frame), NULL;
    PyObject *code = (PyObject *)PyFrame_GetCode((PyFrameObject *)frame);
    PyObject *site = GET(plan, PL_SITE), *result = NULL;
    if (site && PyTuple_Check(site) && PyTuple_Size(site) == 5 && PyTuple_GetItem(site, 0) == code &&
        PyLong_AsLong(PyTuple_GetItem(site, 4)) == lasti) {
        Py_DECREF(code);
        Py_DECREF(frame);
        return Py_NewRef(site);
    }
    PyErr_Clear(); /* an int that is no C long (not from here): make the site */
    int line = PyFrame_GetLineNumber((PyFrameObject *)frame);
    Py_DECREF(frame);
    PyObject *file = PyObject_GetAttr(code, s_co_filename);
    PyObject *where = file ? PyUnicode_FromFormat("%S:%d", file, line) : NULL;
    PyObject *what = where ? PyUnicode_FromFormat("moved into the launch of %S at %U", name, where) : NULL;
    PyObject *fate = what ? PyTuple_Pack(2, s_launch, what) : NULL;
    PyObject *number = fate ? PyLong_FromLong(line) : NULL;
    PyObject *at = number ? PyLong_FromLong(lasti) : NULL;
    if (at) result = PyTuple_Pack(5, code, number, where, fate, at);
    if (result) put(plan, PL_SITE, result, NULL);
    Py_DECREF(code);
    Py_XDECREF(file);
    Py_XDECREF(where);
    Py_XDECREF(what);
    Py_XDECREF(fate);
    Py_XDECREF(number);
    Py_XDECREF(at);
    return result;
}

/* The names, the sentinel and the classes `captures_hold` and `call` read, found on their first use: `Kernel` (final:
 * FinalClassError; its `__name__`, `_grid`, `unchecked` and `_captures` are plain instance attributes, read from its
 * __dict__) and `Captures` (its `_dicts` and `_cells` slots, read at their offsets from an instance of exactly it). */
static PyObject *s_captures, *s_dicts, *s_cells, *s_cell_contents, *MISSING, *Kernel_k, *Captures_k;

static int captures_init(void) {
    if (MISSING) return 0;
    if (!(s_captures = PyUnicode_InternFromString("_captures")) || !(s_dicts = PyUnicode_InternFromString("_dicts")) ||
        !(s_cells = PyUnicode_InternFromString("_cells")) ||
        !(s_cell_contents = PyUnicode_InternFromString("cell_contents")))
        return -1;
    PyObject *entry = PyImport_ImportModule("tile.frontend._entry");
    PyObject *kernel = entry ? PyObject_GetAttrString(entry, "Kernel") : NULL;
    Py_XDECREF(entry);
    PyObject *module = kernel ? PyImport_ImportModule("tile.compiler._captures") : NULL;
    PyObject *captures = module ? PyObject_GetAttrString(module, "Captures") : NULL;
    PyObject *missing = captures ? PyObject_GetAttrString(module, "MISSING") : NULL;
    Py_XDECREF(module);
    static const int slots[] = {CP_DICTS, CP_CELLS};
    if (!missing || !PyType_Check(kernel) || !PyType_Check(captures) || probe(captures, slots, 2)) {
        if (missing && !PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "tile: Kernel or Captures is not a class");
        Py_XDECREF(kernel);
        Py_XDECREF(captures);
        Py_XDECREF(missing);
        return -1;
    }
    Kernel_k = kernel;
    Captures_k = captures;
    MISSING = missing; /* last: set means ready */
    return 0;
}

/* kernel.name: from its __dict__ for a Kernel (see above), else the generic walk. A new reference. */
static PyObject *kernel_attr(PyObject *kernel, PyObject *name) {
    return (PyObject *)Py_TYPE(kernel) == Kernel_k ? dict_attr(kernel, name) : PyObject_GetAttr(kernel, name);
}

/* captures._dicts (part 0) or ._cells (part 1): the slot of a Captures, else the generic walk. A new reference. */
static PyObject *captures_part(PyObject *captures, int part) {
    PyObject *v = (PyObject *)Py_TYPE(captures) == Captures_k ? GET(captures, part ? CP_CELLS : CP_DICTS) : NULL;
    return v ? Py_NewRef(v) : PyObject_GetAttr(captures, part ? s_cells : s_dicts); /* (an empty slot raises) */
}

/* What a read's holder holds for its name now (`_captures.held`): a dict's entry or a cell's contents, MISSING when
 * absent; a new reference, NULL with an error. */
static PyObject *held_now(PyObject *holder, PyObject *name) {
    if (PyDict_Check(holder)) {
        PyObject *now = PyDict_GetItemWithError(holder, name);
        return now ? Py_NewRef(now) : PyErr_Occurred() ? NULL : Py_NewRef(MISSING);
    }
    PyObject *now = PyObject_GetAttr(holder, s_cell_contents);
    if (!now && PyErr_ExceptionMatches(PyExc_ValueError)) { /* an emptied cell */
        PyErr_Clear();
        return Py_NewRef(MISSING);
    }
    return now;
}

/* `Captures.fresh`'s identity test of the kernel's compile-time reads (`Kernel._captures`: each (holder, name, found)
 * of its `_dicts` and `_cells`): 1 every holder still holds the object found, 0 one moved (the pure path then tests
 * by value, adopts an equal value or recompiles), -1 an error. */
static int captures_hold(PyObject *kernel) {
    if (captures_init() < 0) return -1;
    PyObject *captures = kernel_attr(kernel, s_captures);
    if (!captures) return -1;
    int same = captures == Py_None ? 0 : 1; /* no captures yet: the pure path compiles */
    for (int part = 0; part < 2 && same == 1; part++) {
        PyObject *reads = captures_part(captures, part);
        if (!reads) {
            same = -1;
            break;
        }
        if (!PyTuple_Check(reads)) same = 0;
        for (Py_ssize_t k = 0, m = same == 1 ? PyTuple_Size(reads) : 0; k < m && same == 1; k++) {
            PyObject *read = PyTuple_GetItem(reads, k);
            if (!read || !PyTuple_Check(read) || PyTuple_Size(read) != 3) {
                same = read ? 0 : -1;
                break;
            }
            PyObject *now = held_now(PyTuple_GetItem(read, 0), PyTuple_GetItem(read, 1));
            if (!now) same = -1;
            else same = now == PyTuple_GetItem(read, 2);
            Py_XDECREF(now);
        }
        Py_DECREF(reads);
    }
    Py_DECREF(captures);
    return same;
}

/* call(plan, kernel, args, generics): `Kernel.__call__` for the kernel's latest plan, as `_call_again` and
 * `launch_again` do it: the user's call site, then OWNERSHIP with the collector paused around the checks and the
 * moves (`admit_impl`), after the identity test of the kernel's compile-time reads (`captures_hold`). The Launch, or
 * None when the compiled path does not handle the call (nothing changed). */
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
    int hold = captures_hold(kernel); /* a global the compiled code read moved: the pure path decides */
    if (hold <= 0) return hold < 0 ? NULL : Py_NewRef(Py_None);
    PyObject *name = kernel_attr(kernel, s_name), *explicit = NULL, *flag = NULL, *site = NULL, *result = NULL;
    if (!name || !(explicit = kernel_attr(kernel, s_grid)) || !(flag = kernel_attr(kernel, s_unchecked)) ||
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
