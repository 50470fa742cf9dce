/* The module: the state the other parts share (the bound classes and values, interned names, slot offsets), the
 * `bind*` calls that fill it, and the module's function table. */
#include "_fastlaunch.h"

PyObject *NEG_ZERO, *host_running;
PyObject *Tensor_t, *Partition_t, *Shared_t, *Storage_t, *Plan_t, *Launch_t, *InFlight_t, *IN_FLIGHT, *PLAIN,
    *FOREIGN, *OURS, *lock_acquire, *lock_release, *s_release, *s_check_scalar, *s_grid, *s_unchecked, *s_name,
    *s_f_back, *s_co_filename, *s_launch, *s_ctx, *s_site, *s_device, *s_stream, *s_held, *s_synchronize, *s_park, *s_execute, *s_next,
    *run_state, *run_note, *claim_acquire, *claim_release, *claim_locked, *CudaContext_t, *Prepared_t, *use_acquire, *use_release,
    *invalidation, *core_check, *s_cuLaunchKernel, *zero, *Link_t, *Then_t, *RETURNED, *BUILTIN, *HOST, *s_run_in,
    *s_step, *s_take, *s_claim_run, *s_hand_off, *then_fate_of, *then_code, *then_fate, *s_f_globals, *s_f_lasti, *s_tile_prefix;
long then_lasti;
allocfunc then_alloc;
allocfunc tensor_alloc, partition_alloc, launch_alloc;

const char *slot_names[N_SLOTS] = {
    "_fate", "_storage", "_layout", "_range", "_dtype", "_shape", "_offset", "_strides", "_site",
    "_fate", "_tensor", "_tile_shape", "_users",
    "freed_at", "_handles", "_exports", "pending", "keepalive",
    "given", "explicit", "generics", "user_consts", "tensors", "wrapped", "pairs", "others", "scalars",
    "tail", "alias", "moved", "lent", "held", "shares", "grid", "packing", "prepared", "site", "synced", "chained",
    "_fate", "_kernel", "_plan", "_site", "_values", "_grid", "_after", "_lent",
    "_stream", "_device",
    "_epoch", "_launch", "_call", "_shared", "_keep",
    "_src", "_fn", "_next", "_site", "_src", "_fate",
    "_dicts", "_cells",
};
Py_ssize_t off[N_SLOTS];

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
    /* `claim` tests `locked()` (see there): only a plain `_thread.lock` is known to report its holder so */
    PyObject *thread = PyImport_ImportModule("_thread");
    PyObject *lock_t = thread ? PyObject_GetAttrString(thread, "LockType") : NULL;
    Py_XDECREF(thread);
    if (!lock_t) return NULL;
    int plain = (PyObject *)Py_TYPE(argv[2]) == lock_t;
    Py_DECREF(lock_t);
    if (!plain) return PyErr_Format(PyExc_TypeError, "bind_run: the claiming lock is not a threading.Lock()");
    PyObject *acquire = PyObject_GetAttrString(argv[2], "acquire");
    PyObject *release_ = acquire ? PyObject_GetAttrString(argv[2], "release") : NULL;
    PyObject *locked = release_ ? PyObject_GetAttrString(argv[2], "locked") : NULL;
    if (!locked) {
        Py_XDECREF(acquire);
        Py_XDECREF(release_);
        return NULL;
    }
    PyObject *old[] = {run_state, run_note, claim_acquire, claim_release, claim_locked, CudaContext_t};
    CudaContext_t = Py_NewRef(argv[3]);
    run_state = Py_NewRef(argv[0]);
    run_note = Py_NewRef(argv[1]);
    claim_acquire = acquire;
    claim_release = release_;
    claim_locked = locked;
    for (int k = 0; k < 6; k++) Py_XDECREF(old[k]);
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
    static const int prepared[] = {PR_EPOCH, PR_LAUNCH, PR_CALL, PR_SHARED, PR_KEEP};
    if (probe(argv[0], prepared, 5)) return NULL;
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
int probe(PyObject *cls, const int *ks, int count) {
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

/* o.name, new reference, for an instance of a class of Tile's whose attribute `name` is a plain instance attribute
 * (none of the classes in its MRO defines it: no descriptor, no __getattr__; the caller tests the exact type): the
 * value in its __dict__, one lookup instead of the generic attribute walk (the type's MRO, then the dict). Absent
 * from the dict (a class default such as `Kernel._captures`): the walk, which also raises its AttributeError. */
PyObject *dict_attr(PyObject *o, PyObject *name) {
    PyObject *d = PyObject_GenericGetDict(o, NULL);
    if (!d) return NULL;
    PyObject *v = PyDict_Check(d) ? PyDict_GetItemWithError(d, name) : NULL;
    Py_XINCREF(v);
    Py_DECREF(d);
    return v || PyErr_Occurred() ? v : PyObject_GetAttr(o, name);
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
    static const int storage[] = {S_FREED, S_HANDLES, S_EXPORTS, S_PENDING, S_KEEPALIVE};
    static const int plan[] = {PL_GIVEN, PL_EXPLICIT, PL_GENERICS, PL_USER_CONSTS, PL_TENSORS, PL_WRAPPED,
                               PL_PAIRS, PL_OTHERS, PL_SCALARS, PL_TAIL, PL_ALIAS, PL_MOVED, PL_LENT, PL_HELD,
                               PL_SHARES, PL_GRID, PL_PACKING, PL_PREPARED, PL_SITE, PL_SYNCED, PL_CHAINED};
    static const int launch[] = {L_FATE, L_KERNEL, L_PLAN, L_SITE, L_VALUES, L_GRID, L_AFTER, L_LENT};
    static const int shared[] = {SH_USERS};
    if (probe(argv[0], tensor, 9) || probe(argv[1], partition, 3) || probe(argv[3], storage, 5) ||
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
                 {&s_synchronize, "synchronize"}, {&s_park, "_park"}, {&s_execute, "_execute"}, {&s_next, "_next"},
                 {&s_cuLaunchKernel, "cuLaunchKernel"}, {&s_run_in, "_run_in"},
                 {&s_step, "_step"}, {&s_take, "_take"}, {&s_claim_run, "_claim_run"}, {&s_hand_off, "_hand_off"},
                 {&s_f_globals, "f_globals"}, {&s_f_lasti, "f_lasti"}, {&s_tile_prefix, "tile."}};
    for (size_t k = 0; k < sizeof names / sizeof *names; k++)
        if (!(*names[k].name = PyUnicode_InternFromString(names[k].text))) return NULL;
    if (!(zero = PyLong_FromLong(0))) return NULL;
    return PyModule_Create(&module);
}
