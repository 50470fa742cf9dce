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
 * build this module there and launches take the pure-Python path (the ownership lock orders every step).
 *
 * The module's parts, compiled together into one extension (hatch_build.py), share _fastlaunch.h:
 *   _fastlaunch.c          this overview, `Plan.enqueue`'s packing and relaunch (`replay`), `Launch._execute` (`execute`)
 *   _fastlaunch_checks.c   the admission checks: layout and handle states, scalars, aliasing
 *   _fastlaunch_admit.c    the moves, `Launch.__init__`, `admit_move` and the hand-back (`release`)
 *   _fastlaunch_call.c     `call` and `drop`: the user's call site, the step under OWNERSHIP
 *   _fastlaunch_run.c      a launch's claim and execution: `claim_run`, `sync`
 *   _fastlaunch_links.c    tile.aio's `.then()` chains: `then`, `run_links`, `release_links`
 *   _fastlaunch_module.c   the shared state, the `bind*` calls that fill it, the function table, `PyInit__fastlaunch` */
#include "_fastlaunch.h"

/* `PreparedLaunch.__call__` of tile.core (bound by `bind_core`) when its guard holds, it tracks no buffer of another
 * stream and holds no borrowed view (`_keep`): under tile.core's `use_lock`, the invalidation epoch compared, then its
 * `cuLaunchKernel(*_call)` and the result checked by tile.bindings' `check` (which raises the typed error). Any other
 * case (another class, a changed epoch: a free or close since, buffers of other streams to track, views to hold)
 * calls the method itself, which does the same under the same lock and raises its errors. Returns a new reference to
 * None, or NULL with the error set. */
static PyObject *relaunch(PyObject *call) {
    if (!Prepared_t || (PyObject *)Py_TYPE(call) != Prepared_t) return PyObject_CallNoArgs(call);
    PyObject *shared = GET(call, PR_SHARED), *keep = GET(call, PR_KEEP), *fn = GET(call, PR_LAUNCH),
             *args = GET(call, PR_CALL);
    if (!shared || !keep || !fn || !args || !PyTuple_Check(shared) || PyTuple_Size(shared) != 0 ||
        !PyTuple_Check(keep) || PyTuple_Size(keep) != 0 || !PyTuple_Check(args))
        return PyObject_CallNoArgs(call); /* buffers of other streams or borrowed views to hold: the method tracks them */
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

PyObject *replay(PyObject *self, PyObject *const *argv, Py_ssize_t n) {
    (void)self;
    if (n != 4) return PyErr_Format(PyExc_TypeError, "replay takes 4 arguments, got %zd", n);
    return replay_impl(argv[0], argv[1], argv[2], argv[3]);
}

/* execute(launch, ctx, lend, BUILTIN_CONTEXTS, HOST): `Launch._execute` for a GPU launch on one of tile.aio's own
 * contexts whose in-flight arguments (if any) come from a launch on the same context and whose prepared launch
 * repeats: relaunch it, lend the handles (with ``lend``) and return the values. None when it does not handle the
 * execution (another context, a CPU launch, a new prepared launch, ordering after another context): then nothing was
 * done and the pure path runs it, raising its errors. */
PyObject *execute_impl(PyObject *op, PyObject *ctx, int lend, PyObject *builtin, PyObject *host) {
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
        PyObject *producer = dict_attr(after, s_ctx); /* an InFlight's ctx: a plain instance attribute */
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
            int exact = (PyObject *)Py_TYPE(fate) == InFlight_t; /* its ctx and site: plain instance attributes */
            PyObject *c = exact ? dict_attr(fate, s_ctx) : PyObject_GetAttr(fate, s_ctx);
            PyObject *s = !c ? NULL : exact ? dict_attr(fate, s_site) : PyObject_GetAttr(fate, s_site);
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

PyObject *execute(PyObject *self, PyObject *const *argv, Py_ssize_t n) {
    (void)self;
    if (n != 5) return PyErr_Format(PyExc_TypeError, "execute takes 5 arguments, got %zd", n);
    int lend = PyObject_IsTrue(argv[2]);
    if (lend < 0) return NULL;
    return execute_impl(argv[0], argv[1], lend, argv[3], argv[4]);
}
