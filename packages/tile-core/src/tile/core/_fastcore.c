/* tile.core._fastcore: the compiled form of tile.core.launch for its one hot case, a launch that repeats the very
 * objects of its function's plan's last launch (tile.core._plan, _plancode) on the plan's stream.
 *
 * It makes the checks of _plancode's generated code for that case, in the same order, under use_lock (acquired and
 * released through the lock's own methods, as `with use_lock` does): an exact Function (review 39), an exact int grid,
 * block and shared memory size in range, the plan of this signature object, its stream, no host function running, an
 * exact list or tuple of the plan's length (its items read once, into this call), the invalidation epoch unchanged, the
 * plan not busy, each pointer argument the remembered object itself (`is` on its weak reference's referent), each
 * scalar the very object whose value the plan's cells hold, and the plan's driver the current one. A plan with float
 * scalars (whose converters may run a value's own methods) or with buffers of other streams (whose use is recorded
 * after the launch) is not taken here. Whatever is not this case, and every error before the driver call, goes to the
 * pure-Python launch (`fallback`, bound by `bind`) with the same arguments, after this call has released the lock and
 * changed nothing: so both accept and refuse exactly the same calls. No user code runs between the checks and the
 * launch.
 *
 * What keeps it cheap: the plan (an exact LaunchPlan) is read by slot offsets found at bind, weak references without
 * a call (PyWeakref_GetObject, only compared), the epoch by identity first, the current driver as tile.bindings keeps
 * it (its state's `module`: a driver swap, as the simulator makes, is seen at the next launch), and the driver's
 * argument tuple is the plan's kept one while its objects are the very same. */
#define Py_LIMITED_API 0x030A0000
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define MAX_ARGS 64               /* more parameters: the pure path */
#define UINT_END 4294967296LL      /* the driver takes extents and the shared memory size as C unsigned ints */
#define CALL_SIZE 11               /* cuLaunchKernel's arguments */

static PyObject *fallback, *lock_acquire, *lock_release, *invalidation, *running, *driver_state, *check_result;
static PyObject *plan_type, *ref_type, *function_type; /* LaunchPlan (slots read by offset), weakref.ref, Function */
static PyObject *s_launch_plan, *s_module, *s_device, *s__default_stream, *s_call_name, *k_stream, *k_shared_mem,
    *k_signature, *k_unchecked, *one, *zero;

/* The LaunchPlan slots read here, by offset (found by `probe` at bind: a slot's value is NULL while unset). Read
 * and written only under use_lock, as the pure path does, with no Python code run in between. */
enum {
    P_FIXED, P_EPOCH, P_BUSY, P_STREAM, P_RAW, P_SHARED, P_VIEWS, P_REFS, P_LAST, P_DRIVER, P_LAUNCH, P_KERNEL, P_CALL,
    N_P
};
static const char *const slot_names[N_P] = {"fixed", "epoch", "busy", "stream", "raw", "shared", "views", "_refs",
                                            "_last", "driver", "driver_launch", "kernel", "_call"};
static Py_ssize_t off[N_P];
#define GET(o, k) (*(PyObject **)((char *)(o) + off[k]))

/* An exact int in [low, 2**32), or -1. */
static long long extent(PyObject *o, long long low) {
    if (!PyLong_CheckExact(o)) return -1;
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow || (v == -1 && PyErr_Occurred())) return PyErr_Clear(), -1;
    return v >= low && v < UINT_END ? v : -1;
}

/* `ref() is expected` for a weak reference `ref` (the plan's only ones are exact `weakref.ref`s; anything else, the
 * plan's stand-in callable included, is no match), never for a collected referent (which reads None). */
static int referent_is(PyObject *ref, PyObject *expected) {
    if (!ref || Py_TYPE(ref) != (PyTypeObject *)ref_type) return 0;
    PyObject *v = PyWeakref_GetObject(ref); /* borrowed: only compared */
    return v && v != Py_None && v == expected;
}

/* Two ints equal: the same object (the plan keeps the epoch object it read), or exact ints of one value. */
static int same_int(PyObject *a, PyObject *b) {
    if (a == b) return 1;
    if (!a || !b || !PyLong_CheckExact(a) || !PyLong_CheckExact(b)) return 0;
    int oa = 0, ob = 0;
    long long x = PyLong_AsLongLongAndOverflow(a, &oa), y = PyLong_AsLongLongAndOverflow(b, &ob);
    if (PyErr_Occurred()) return PyErr_Clear(), 0;
    return !oa && !ob && x == y;
}

/* An empty exact tuple (a slot's value). */
static int empty(PyObject *o) { return o && PyTuple_CheckExact(o) && PyTuple_Size(o) == 0; }

static void set_busy(PyObject *plan, PyObject *value) {
    PyObject **slot = (PyObject **)((char *)plan + off[P_BUSY]), *old = *slot;
    *slot = Py_NewRef(value);
    Py_XDECREF(old); /* a bool: no code runs */
}

/* The launch, under use_lock: 1 launched, 0 not this case (nothing done), -1 an error of the driver call. `fixed` is
 * the plan's (signature, size, plain, pointer positions, scalar positions, kernelParams address). */
static int planned_locked(PyObject *plan, PyObject *fixed, PyObject *args, PyObject *stream, PyObject *const *extents) {
    PyObject *items[MAX_ARGS], *module = NULL, *call = NULL, *packed = NULL, *result = NULL, *replaced = NULL;
    int list = PyList_CheckExact(args), outcome = 0, claimed = 0;
    Py_ssize_t n = list ? PyList_Size(args) : PyTuple_Size(args), count = 0;
    if (n < 0 || n > MAX_ARGS) goto done;
    /* Read once, before anything that allocates (a finalizer the collector runs then may change a list). */
    for (; count < n; count++) items[count] = Py_NewRef(list ? PyList_GetItem(args, count) : PyTuple_GetItem(args, count));
    PyObject *at = PyTuple_GetItem(fixed, 3), *sat = PyTuple_GetItem(fixed, 4), *address = PyTuple_GetItem(fixed, 5);
    if (PyLong_AsSsize_t(PyTuple_GetItem(fixed, 1)) != n || PyTuple_GetItem(fixed, 2) != Py_True) goto done;
    if (!PyTuple_CheckExact(at) || !PyTuple_CheckExact(sat) || !address) goto done;
    /* Borrowed from the plan (held by the caller): no Python code runs until the driver call, whose arguments are
     * held by `packed` and callable by `call`. */
    if (!same_int(GET(plan, P_EPOCH), PyList_GetItem(invalidation, 0))) goto done;
    if (GET(plan, P_BUSY) != Py_False || !referent_is(GET(plan, P_STREAM), stream)) goto done;
    /* Claimed from here until the driver has read the block: a launch made meanwhile (a finalizer the collector runs
     * at an allocation below) takes the full path, which neither packs nor remembers into a busy plan, so the block
     * and the plan's slots borrowed below stay as they are (review 34). */
    set_busy(plan, Py_True);
    claimed = 1;
    /* No buffer of another stream to record a use mark for, no borrowed view to hold until the kernel completes (the
     * pure path's `_track` does both). */
    if (!empty(GET(plan, P_SHARED)) || !empty(GET(plan, P_VIEWS))) goto done;
    PyObject *refs = GET(plan, P_REFS), *last = GET(plan, P_LAST);
    if (!refs || !PyTuple_CheckExact(refs) || PyTuple_Size(refs) != PyTuple_Size(at)) goto done;
    for (Py_ssize_t k = 0; k < PyTuple_Size(at); k++) {
        Py_ssize_t i = PyLong_AsSsize_t(PyTuple_GetItem(at, k));
        if (i < 0 || i >= n || !referent_is(PyTuple_GetItem(refs, k), items[i])) goto done;
    }
    if (!last || !PyTuple_CheckExact(last) || PyTuple_Size(last) != PyTuple_Size(sat)) goto done;
    for (Py_ssize_t k = 0; k < PyTuple_Size(sat); k++) {
        Py_ssize_t i = PyLong_AsSsize_t(PyTuple_GetItem(sat, k));
        if (i < 0 || i >= n || PyTuple_GetItem(last, k) != items[i]) goto done;
    }
    if (PyErr_Occurred()) goto done;
    /* The current driver (`tile.bindings.driver()` once initialised; else the pure path initialises it or raises)
     * is the one the plan read `driver_launch` from. */
    if (!(module = PyObject_GetAttr(driver_state, s_module)) || module == Py_None || GET(plan, P_DRIVER) != module)
        goto done;
    PyObject *kernel = GET(plan, P_KERNEL), *raw = GET(plan, P_RAW);
    if (!kernel || !raw || !(call = GET(plan, P_LAUNCH))) goto done;
    Py_INCREF(call);
    /* The driver's arguments: the tuple of the plan's last compiled launch when it holds the very same objects (a
     * tuple: nothing can change it), else a new one, kept for the next launch. */
    PyObject *values[CALL_SIZE] = {kernel, extents[0], one, one, extents[1], one, one, extents[2], raw, address, zero};
    PyObject *kept = GET(plan, P_CALL);
    int same = kept && PyTuple_CheckExact(kept) && PyTuple_Size(kept) == CALL_SIZE;
    for (int k = 0; same && k < CALL_SIZE; k++) same = PyTuple_GetItem(kept, k) == values[k];
    if (same) packed = Py_NewRef(kept);
    else {
        if (!(packed = PyTuple_New(CALL_SIZE))) goto done;
        for (int k = 0; k < CALL_SIZE; k++) PyTuple_SetItem(packed, k, Py_NewRef(values[k]));
        PyObject **slot = (PyObject **)((char *)plan + off[P_CALL]);
        replaced = *slot; /* released at the end: after the launch */
        *slot = Py_NewRef(packed);
    }
    outcome = 1; /* from here on: launched, or the driver call's error */
    result = PyObject_Call(call, packed, NULL);
    if (!result) outcome = -1;
    else {
        PyObject *code = PyTuple_Check(result) && PyTuple_Size(result) >= 1 ? PyTuple_GetItem(result, 0) : NULL;
        /* an int (CUresult is an IntEnum) of value 0: success, as `result[0] != 0` is False for it */
        int ok = code && PyLong_Check(code) && PyLong_AsLong(code) == 0 && !PyErr_Occurred();
        PyErr_Clear();
        if (!ok) {
            PyObject *checked = PyObject_CallFunctionObjArgs(check_result, result, s_call_name, NULL);
            if (!checked) outcome = -1;
            Py_XDECREF(checked);
        }
    }
done:
    if (outcome == 0) PyErr_Clear();
    if (claimed) set_busy(plan, Py_False); /* a slot write: no code runs, the error (if any) stays set */
    for (Py_ssize_t k = 0; k < count; k++) Py_DECREF(items[k]);
    Py_XDECREF(module), Py_XDECREF(call), Py_XDECREF(packed), Py_XDECREF(result), Py_XDECREF(replaced);
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

/* A keyword's name is `expected`: interned (a call site's names are) or equal. */
static int named(PyObject *name, PyObject *expected) {
    return name == expected || PyUnicode_Compare(name, expected) == 0;
}

/* 1 launched, 0 not this case, -1 an error (of the lock or the driver call). */
static int planned(PyObject *const *argv, Py_ssize_t nargs, PyObject *kwnames) {
    PyObject *stream = Py_None, *signature = Py_None, *shared = zero;
    Py_ssize_t nkw = kwnames ? PyTuple_Size(kwnames) : 0;
    /* An exact tile.core Function, as the pure path requires (anything else: its WrongTypeError). */
    if (nargs != 4 || Py_TYPE(argv[0]) != (PyTypeObject *)function_type) return 0;
    for (Py_ssize_t j = 0; j < nkw; j++) {
        PyObject *name = PyTuple_GetItem(kwnames, j), *value = argv[nargs + j];
        if (named(name, k_stream)) stream = value;
        else if (named(name, k_signature)) signature = value;
        else if (named(name, k_shared_mem)) shared = value;
        else if (!named(name, k_unchecked)) return PyErr_Clear(), 0; /* the pure path's TypeError */
    }
    PyErr_Clear(); /* (a failed comparison reads as "not equal") */
    long running_now = PyLong_AsLong(PyList_GetItem(running, 0));
    if (running_now != 0 || PyErr_Occurred()) return PyErr_Clear(), 0;
    if (extent(argv[1], 1) < 0 || extent(argv[2], 1) < 0 || extent(shared, 0) < 0) return 0;
    PyObject *plan = PyObject_GetAttr(argv[0], s_launch_plan), *fixed = NULL;
    if (!plan) return PyErr_Clear(), 0;
    if (Py_TYPE(plan) != (PyTypeObject *)plan_type || (!PyList_CheckExact(argv[3]) && !PyTuple_CheckExact(argv[3])))
        return Py_DECREF(plan), 0;
    /* Held: acquiring the lock may wait, letting other threads run (and replace the plan's fields). */
    fixed = Py_XNewRef(GET(plan, P_FIXED));
    if (!fixed || !PyTuple_CheckExact(fixed) || PyTuple_Size(fixed) != 6 || PyTuple_GetItem(fixed, 0) != signature)
        return Py_XDECREF(fixed), Py_DECREF(plan), 0;
    stream = stream == Py_None ? default_stream(argv[0]) : Py_NewRef(stream);
    int outcome = 0;
    if (stream) {
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
        Py_DECREF(stream);
    }
    Py_DECREF(fixed);
    Py_DECREF(plan);
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

/* The offsets of `slot_names` in instances of `cls`, into `found`: a unique object written through each attribute of
 * a fresh instance is found in its layout (then the slot is emptied again). */
static int probe(PyObject *cls, Py_ssize_t *found) {
    PyObject *basic = PyObject_GetAttrString(cls, "__basicsize__");
    Py_ssize_t size = basic ? PyLong_AsSsize_t(basic) : -1;
    Py_XDECREF(basic);
    allocfunc alloc = (allocfunc)PyType_GetSlot((PyTypeObject *)cls, Py_tp_alloc);
    if (size <= 0 || !alloc) return PyErr_Format(PyExc_TypeError, "bind: %R has no instance layout", cls), -1;
    PyObject *o = alloc((PyTypeObject *)cls, 0);
    if (!o) return -1;
    int rc = 0;
    for (int k = 0; k < N_P && !rc; k++) {
        PyObject *mark = PyList_New(0);
        rc = !mark || PyObject_SetAttrString(o, slot_names[k], mark);
        found[k] = 0;
        for (Py_ssize_t at = (Py_ssize_t)sizeof(PyObject); !rc && at + (Py_ssize_t)sizeof(PyObject *) <= size;
             at += (Py_ssize_t)sizeof(PyObject *))
            if (*(PyObject **)((char *)o + at) == mark) found[k] = at;
        if (!rc && !found[k]) rc = 1, PyErr_Format(PyExc_TypeError, "bind: %R.%s is not a slot", cls, slot_names[k]);
        if (!rc) rc = PyObject_DelAttrString(o, slot_names[k]);
        Py_XDECREF(mark);
    }
    Py_DECREF(o);
    return rc ? -1 : 0;
}

/* bind(launch, use_lock, invalidation, RUNNING, driver_state, check, LaunchPlan, Function): the pure-Python launch and
 * what the planned case reads (`driver_state.module`: tile.bindings' initialised driver, or None). */
static PyObject *bind(PyObject *self, PyObject *const *argv, Py_ssize_t n) {
    (void)self;
    if (n != 8 || !PyCallable_Check(argv[0]) || !PyList_CheckExact(argv[2]) || !PyList_CheckExact(argv[3]) ||
        PyList_Size(argv[2]) != 1 || PyList_Size(argv[3]) != 1 || !PyCallable_Check(argv[5]) ||
        !PyType_Check(argv[6]) || !PyType_Check(argv[7]))
        return PyErr_Format(PyExc_TypeError,
                            "bind(launch, use_lock, invalidation, RUNNING, driver_state, check, LaunchPlan, Function)");
    Py_ssize_t found[N_P];
    if (probe(argv[6], found) < 0) return NULL; /* (`off` is only changed with `plan_type`, below) */
    PyObject *ref = PyWeakref_NewRef(argv[6], NULL);
    if (!ref) return NULL;
    PyObject *acquire = PyObject_GetAttrString(argv[1], "acquire"), *release = PyObject_GetAttrString(argv[1], "release");
    if (!acquire || !release) return Py_DECREF(ref), Py_XDECREF(acquire), Py_XDECREF(release), NULL;
    PyObject *old[] = {fallback, lock_acquire, lock_release, invalidation, running, driver_state, check_result,
                       plan_type, ref_type, function_type};
    fallback = Py_NewRef(argv[0]), lock_acquire = acquire, lock_release = release;
    invalidation = Py_NewRef(argv[2]), running = Py_NewRef(argv[3]), driver_state = Py_NewRef(argv[4]);
    check_result = Py_NewRef(argv[5]), plan_type = Py_NewRef(argv[6]), function_type = Py_NewRef(argv[7]);
    ref_type = Py_NewRef((PyObject *)Py_TYPE(ref));
    memcpy(off, found, sizeof off);
    Py_DECREF(ref);
    for (size_t k = 0; k < sizeof old / sizeof *old; k++) Py_XDECREF(old[k]);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"bind", (PyCFunction)(void (*)(void))bind, METH_FASTCALL,
     "bind(launch, use_lock, invalidation, RUNNING, driver_state, check, LaunchPlan, Function): what the compiled\n"
     "launch reads\n"
     "and falls back to."},
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
    } names[] = {{&s_launch_plan, "_launch_plan"}, {&s_module, "module"}, {&s_device, "device"},
                 {&s__default_stream, "_default_stream"}, {&s_call_name, "cuLaunchKernel"}, {&k_stream, "stream"},
                 {&k_shared_mem, "shared_mem"}, {&k_signature, "signature"}, {&k_unchecked, "unchecked"}};
    for (size_t k = 0; k < sizeof names / sizeof *names; k++)
        if (!(*names[k].name = PyUnicode_InternFromString(names[k].text))) return NULL;
    if (!(one = PyLong_FromLong(1)) || !(zero = PyLong_FromLong(0))) return NULL;
    return PyModule_Create(&module);
}
