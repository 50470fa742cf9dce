/* tile.core._fastcore: the compiled form of tile.core.launch for its one hot case, a launch that repeats the very
 * objects of its function's plan's last launch (tile.core._plan, _plancode) on the plan's stream.
 *
 * It makes the checks of _plancode's generated code for that case, in the same order, under use_lock (acquired and
 * released through the lock's own methods, as `with use_lock` does): an exact int grid, block and shared memory size
 * in range, the plan of this signature object, its stream, no host function running, an exact list or tuple of the
 * plan's length (its items read once, into this call), the invalidation epoch unchanged, the plan not busy, each
 * pointer argument the remembered object itself (`is` on its weak reference's referent), each scalar the very object
 * whose value the plan's cells hold, and the plan's driver the current one. A plan with float scalars (whose
 * converters may run a value's own methods) or with buffers of other streams (whose use is recorded after the launch)
 * is not taken here. Whatever is not this case, and every error before the driver call, goes to the pure-Python
 * launch (`fallback`, bound by `bind`) with the same arguments, after this call has released the lock and changed
 * nothing: so both accept and refuse exactly the same calls. No user code runs between the checks and the launch. */
#define Py_LIMITED_API 0x030A0000
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define MAX_ARGS 64               /* more parameters: the pure path */
#define UINT_END 4294967296LL      /* the driver takes extents and the shared memory size as C unsigned ints */

static PyObject *fallback, *lock_acquire, *lock_release, *invalidation, *running, *get_driver, *check_result;
static PyObject *s_launch_plan, *s_fixed, *s_stream, *s_epoch, *s_busy, *s_refs, *s_last, *s_driver,
    *s_driver_launch, *s_kernel, *s_shared, *s_views, *s__raw, *s_call_name, *s_module, *s_device, *s__default_stream, *k_stream, *k_shared_mem, *k_signature, *k_unchecked, *one, *zero;

/* An exact int in [low, 2**32), or -1. */
static long long extent(PyObject *o, long long low) {
    if (!PyLong_CheckExact(o)) return -1;
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow || (v == -1 && PyErr_Occurred())) return PyErr_Clear(), -1;
    return v >= low && v < UINT_END ? v : -1;
}

/* `getattr(o, name) is expected`, for fields that only the plan sets. */
static int field_is(PyObject *o, PyObject *name, PyObject *expected) {
    PyObject *v = PyObject_GetAttr(o, name);
    if (!v) return PyErr_Clear(), 0;
    int same = v == expected;
    Py_DECREF(v);
    return same;
}

/* `ref() is expected` for a weak reference (or the plan's stand-in callable) `ref`. */
static int referent_is(PyObject *ref, PyObject *expected) {
    PyObject *v = PyObject_CallNoArgs(ref);
    if (!v) return PyErr_Clear(), 0;
    int same = v == expected;
    Py_DECREF(v);
    return same;
}

/* The launch, under use_lock: 1 launched, 0 not this case (nothing done), -1 an error of the driver call. `fixed` is
 * the plan's (signature, size, plain, pointer positions, scalar positions, kernelParams address). */
static int planned_locked(PyObject *plan, PyObject *fixed, PyObject *args, PyObject *stream, PyObject *const *extents) {
    PyObject *items[MAX_ARGS], *refs = NULL, *last = NULL, *driver = NULL, *call = NULL;
    PyObject *kernel = NULL, *raw = NULL, *packed = NULL, *result = NULL, *v = NULL;
    int list = PyList_CheckExact(args), outcome = 0, claimed = 0;
    Py_ssize_t n = list ? PyList_Size(args) : PyTuple_Size(args), count = 0;
    if (n < 0 || n > MAX_ARGS) goto done;
    /* Read once, before anything that allocates (a finalizer the collector runs then may change a list). */
    for (; count < n; count++) items[count] = Py_NewRef(list ? PyList_GetItem(args, count) : PyTuple_GetItem(args, count));
    PyObject *at = PyTuple_GetItem(fixed, 3), *sat = PyTuple_GetItem(fixed, 4), *address = PyTuple_GetItem(fixed, 5);
    if (PyLong_AsSsize_t(PyTuple_GetItem(fixed, 1)) != n || PyTuple_GetItem(fixed, 2) != Py_True) goto done;
    if (!PyTuple_CheckExact(at) || !PyTuple_CheckExact(sat) || !address) goto done;
    v = PyObject_GetAttr(plan, s_epoch);
    if (!v || PyObject_RichCompareBool(v, PyList_GetItem(invalidation, 0), Py_EQ) != 1) goto done; /* ints */
    Py_CLEAR(v);
    if (!field_is(plan, s_busy, Py_False)) goto done;
    /* Claimed from here until the driver has read the block: a launch made meanwhile (a finalizer the collector runs
     * at an allocation below, or in get_driver's Python frame) takes the full path and leaves the block alone. */
    if (PyObject_SetAttr(plan, s_busy, Py_True) < 0) goto done;
    claimed = 1;
    if (!(v = PyObject_GetAttr(plan, s_stream)) || !referent_is(v, stream)) goto done;
    Py_CLEAR(v);
    if (!(v = PyObject_GetAttr(plan, s_shared)) || !PyTuple_CheckExact(v) || PyTuple_Size(v) != 0) goto done;
    Py_CLEAR(v); /* and no borrowed view to hold until the kernel completes (the pure path's `_track` holds them) */
    if (!(v = PyObject_GetAttr(plan, s_views)) || !PyTuple_CheckExact(v) || PyTuple_Size(v) != 0) goto done;
    if (!(refs = PyObject_GetAttr(plan, s_refs))) goto done;
    if (!PyTuple_CheckExact(refs) || PyTuple_Size(refs) != PyTuple_Size(at)) goto done;
    for (Py_ssize_t k = 0; k < PyTuple_Size(at); k++) {
        Py_ssize_t i = PyLong_AsSsize_t(PyTuple_GetItem(at, k));
        if (i < 0 || i >= n || !referent_is(PyTuple_GetItem(refs, k), items[i])) goto done;
    }
    if (!(last = PyObject_GetAttr(plan, s_last))) goto done;
    if (!PyTuple_CheckExact(last) || PyTuple_Size(last) != PyTuple_Size(sat)) goto done;
    for (Py_ssize_t k = 0; k < PyTuple_Size(sat); k++) {
        Py_ssize_t i = PyLong_AsSsize_t(PyTuple_GetItem(sat, k));
        if (i < 0 || i >= n || PyTuple_GetItem(last, k) != items[i]) goto done;
    }
    if (PyErr_Occurred()) goto done;
    if (!(driver = PyObject_CallNoArgs(get_driver))) { PyErr_Clear(); goto done; } /* the pure path raises it */
    if (!field_is(plan, s_driver, driver)) goto done;
    if (!(call = PyObject_GetAttr(plan, s_driver_launch)) || !(kernel = PyObject_GetAttr(plan, s_kernel)) ||
        !(raw = PyObject_GetAttr(stream, s__raw)))
        goto done;
    packed = PyTuple_Pack(11, kernel, extents[0], one, one, extents[1], one, one, extents[2], raw, address, zero);
    if (!packed) goto done;
    outcome = 1; /* from here on: launched, or the driver call's error */
    result = PyObject_Call(call, packed, NULL);
    if (!result) outcome = -1;
    else if (!PyTuple_Check(result) || PyTuple_Size(result) < 1 ||
             PyObject_RichCompareBool(PyTuple_GetItem(result, 0), zero, Py_EQ) != 1) {
        PyErr_Clear();
        PyObject *checked = PyObject_CallFunctionObjArgs(check_result, result, s_call_name, NULL);
        if (!checked) outcome = -1;
        Py_XDECREF(checked);
    }
done:
    if (outcome == 0) PyErr_Clear();
    if (claimed) {
        PyObject *type, *value, *trace;
        PyErr_Fetch(&type, &value, &trace);
        if (PyObject_SetAttr(plan, s_busy, Py_False) < 0) PyErr_Clear();
        PyErr_Restore(type, value, trace);
    }
    for (Py_ssize_t k = 0; k < count; k++) Py_DECREF(items[k]);
    Py_XDECREF(v), Py_XDECREF(refs), Py_XDECREF(last), Py_XDECREF(driver);
    Py_XDECREF(call), Py_XDECREF(kernel), Py_XDECREF(raw), Py_XDECREF(packed);
    Py_XDECREF(result);
    return outcome;
}

/* `function.module.device`'s default stream once made (as_stream(None, device) returns it), else NULL; a new reference. */
static PyObject *default_stream(PyObject *function) {
    PyObject *module = PyObject_GetAttr(function, s_module), *device = NULL, *stream = NULL;
    if (module && (device = PyObject_GetAttr(module, s_device))) stream = PyObject_GetAttr(device, s__default_stream);
    Py_XDECREF(module), Py_XDECREF(device);
    if (!stream || stream == Py_None) PyErr_Clear(), Py_XDECREF(stream), stream = NULL;
    return stream;
}

/* 1 launched, 0 not this case, -1 an error (of the lock or the driver call). */
static int planned(PyObject *const *argv, Py_ssize_t nargs, PyObject *kwnames) {
    PyObject *stream = Py_None, *signature = Py_None, *shared = zero;
    Py_ssize_t nkw = kwnames ? PyTuple_Size(kwnames) : 0;
    if (nargs != 4) return 0;
    for (Py_ssize_t j = 0; j < nkw; j++) {
        PyObject *name = PyTuple_GetItem(kwnames, j), *value = argv[nargs + j];
        if (PyUnicode_Compare(name, k_stream) == 0) stream = value;
        else if (PyUnicode_Compare(name, k_signature) == 0) signature = value;
        else if (PyUnicode_Compare(name, k_shared_mem) == 0) shared = value;
        else if (PyUnicode_Compare(name, k_unchecked) != 0) return PyErr_Clear(), 0; /* the pure path's TypeError */
    }
    long running_now = PyLong_AsLong(PyList_GetItem(running, 0));
    if (running_now != 0 || PyErr_Occurred()) return PyErr_Clear(), 0;
    if (extent(argv[1], 1) < 0 || extent(argv[2], 1) < 0 || extent(shared, 0) < 0) return 0;
    PyObject *plan = PyObject_GetAttr(argv[0], s_launch_plan), *fixed = NULL;
    if (!plan) return PyErr_Clear(), 0;
    stream = stream == Py_None ? default_stream(argv[0]) : Py_NewRef(stream);
    if (!stream) return Py_DECREF(plan), 0;
    int outcome = 0;
    if (plan != Py_None && (fixed = PyObject_GetAttr(plan, s_fixed)) && PyTuple_CheckExact(fixed) &&
        PyTuple_Size(fixed) == 6 && PyTuple_GetItem(fixed, 0) == signature &&
        (PyList_CheckExact(argv[3]) || PyTuple_CheckExact(argv[3]))) {
        PyObject *held = PyObject_CallNoArgs(lock_acquire);
        if (!held) outcome = -1;
        else {
            Py_DECREF(held);
            PyObject *extents[3] = {argv[1], argv[2], shared};
            outcome = planned_locked(plan, fixed, argv[3], stream, extents);
            PyObject *type, *value, *trace;
            PyErr_Fetch(&type, &value, &trace);
            PyObject *released = PyObject_CallNoArgs(lock_release);
            if (released) Py_DECREF(released), PyErr_Restore(type, value, trace);
            else Py_XDECREF(type), Py_XDECREF(value), Py_XDECREF(trace), outcome = -1;
        }
    }
    if (!fixed) PyErr_Clear();
    Py_XDECREF(fixed);
    Py_DECREF(plan);
    Py_DECREF(stream);
    return outcome;
}

static PyObject *call_fallback(PyObject *const *argv, Py_ssize_t nargs, PyObject *kwnames) {
    PyObject *args = PyTuple_New(nargs), *kwargs = kwnames ? PyDict_New() : NULL, *result = NULL;
    if (!args || (kwnames && !kwargs)) goto done;
    for (Py_ssize_t i = 0; i < nargs; i++) PyTuple_SetItem(args, i, Py_NewRef(argv[i]));
    for (Py_ssize_t j = 0; kwnames && j < PyTuple_Size(kwnames); j++)
        if (PyDict_SetItem(kwargs, PyTuple_GetItem(kwnames, j), argv[nargs + j]) < 0) goto done;
    result = PyObject_Call(fallback, args, kwargs);
done:
    Py_XDECREF(args), Py_XDECREF(kwargs);
    return result;
}

static PyObject *launch(PyObject *self, PyObject *const *argv, Py_ssize_t nargs, PyObject *kwnames) {
    (void)self;
    if (!fallback) return PyErr_Format(PyExc_RuntimeError, "tile.core._fastcore.launch: bind() was not called");
    int outcome = planned(argv, nargs, kwnames);
    if (outcome < 0) return NULL;
    if (outcome > 0) Py_RETURN_NONE;
    return call_fallback(argv, nargs, kwnames);
}

/* bind(launch, use_lock, invalidation, RUNNING, driver, check): the pure-Python launch and what the planned case reads. */
static PyObject *bind(PyObject *self, PyObject *const *argv, Py_ssize_t n) {
    (void)self;
    if (n != 6 || !PyCallable_Check(argv[0]) || !PyList_CheckExact(argv[2]) || !PyList_CheckExact(argv[3]) ||
        PyList_Size(argv[2]) != 1 || PyList_Size(argv[3]) != 1 || !PyCallable_Check(argv[4]) ||
        !PyCallable_Check(argv[5]))
        return PyErr_Format(PyExc_TypeError, "bind(launch, use_lock, invalidation, RUNNING, driver, check)");
    PyObject *acquire = PyObject_GetAttrString(argv[1], "acquire"), *release = PyObject_GetAttrString(argv[1], "release");
    if (!acquire || !release) return Py_XDECREF(acquire), Py_XDECREF(release), NULL;
    PyObject *old[] = {fallback, lock_acquire, lock_release, invalidation, running, get_driver, check_result};
    fallback = Py_NewRef(argv[0]), lock_acquire = acquire, lock_release = release;
    invalidation = Py_NewRef(argv[2]), running = Py_NewRef(argv[3]);
    get_driver = Py_NewRef(argv[4]), check_result = Py_NewRef(argv[5]);
    for (size_t k = 0; k < sizeof old / sizeof *old; k++) Py_XDECREF(old[k]);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"bind", (PyCFunction)(void (*)(void))bind, METH_FASTCALL,
     "bind(launch, use_lock, invalidation, RUNNING, driver, check): what the compiled launch reads and falls back to."},
    {"launch", (PyCFunction)(void (*)(void))launch, METH_FASTCALL | METH_KEYWORDS,
     "launch($module, /, function, grid, block, args, *, stream=None, shared_mem=0, signature=None, unchecked=False)\n"
     "--\n\n"
     "Check, pack and enqueue one launch (see tile.core.prepare for the parameters): the compiled form of the\n"
     "pure-Python tile.core launch (TILE_PURE_PYTHON=1 selects that one), with the same checks and errors; it\n"
     "relaunches a function's planned launch of the very same arguments on the plan's stream itself and hands every\n"
     "other call to the pure-Python launch."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fastcore", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__fastcore(void) {
    struct {
        PyObject **name;
        const char *text;
    } names[] = {{&s_launch_plan, "_launch_plan"}, {&s_fixed, "fixed"}, {&s_stream, "stream"},
                 {&s_epoch, "epoch"}, {&s_busy, "busy"}, {&s_refs, "_refs"}, {&s_last, "_last"},
                 {&s_driver, "driver"}, {&s_driver_launch, "driver_launch"}, {&s_kernel, "kernel"},
                 {&s_shared, "shared"}, {&s_views, "views"}, {&s__raw, "_raw"}, {&s_module, "module"}, {&s_device, "device"},
                 {&s__default_stream, "_default_stream"}, {&s_call_name, "cuLaunchKernel"}, {&k_stream, "stream"}, {&k_shared_mem, "shared_mem"},
                 {&k_signature, "signature"}, {&k_unchecked, "unchecked"}};
    for (size_t k = 0; k < sizeof names / sizeof *names; k++)
        if (!(*names[k].name = PyUnicode_InternFromString(names[k].text))) return NULL;
    if (!(one = PyLong_FromLong(1)) || !(zero = PyLong_FromLong(0))) return NULL;
    return PyModule_Create(&module);
}
