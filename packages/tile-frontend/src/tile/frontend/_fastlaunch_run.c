/* A launch's claim and execution: `Then._step`'s claim and run (`claim_run`) and `run_sync` of a plain launch
 * (`sync`). */
#include "_fastlaunch.h"

/* The fate a launch synced at the user's current line gets, ("executed by .sync_on()", (file, line)) as
 * `DeviceOp._claim` makes it, kept on the plan as (code, lasti, verb, fate) for the next sync at that position (a new
 * reference). */
static PyObject *sync_fate(PyObject *plan, PyObject *verb) {
    PyObject *frame = user_frame();
    if (!frame) return NULL;
    long lasti;
    if (frame_lasti(frame, &lasti) < 0) return Py_DECREF(frame), NULL;
    PyObject *code = (PyObject *)PyFrame_GetCode((PyFrameObject *)frame);
    PyObject *last = GET(plan, PL_SYNCED), *result = NULL;
    if (last && PyTuple_Check(last) && PyTuple_Size(last) == 4 && PyTuple_GetItem(last, 0) == code &&
        PyTuple_GetItem(last, 2) == verb && PyLong_AsLong(PyTuple_GetItem(last, 1)) == lasti) {
        Py_DECREF(code);
        Py_DECREF(frame);
        return Py_NewRef(PyTuple_GetItem(last, 3));
    }
    PyErr_Clear();
    int line = PyFrame_GetLineNumber((PyFrameObject *)frame);
    Py_DECREF(frame);
    PyObject *file = PyObject_GetAttr(code, s_co_filename);
    PyObject *number = file ? PyLong_FromLong(line) : NULL;
    PyObject *at = number ? PyLong_FromLong(lasti) : NULL;
    PyObject *site = at ? PyTuple_Pack(2, file, number) : NULL;
    PyObject *fate = site ? PyTuple_Pack(2, verb, site) : NULL;
    PyObject *entry = fate ? PyTuple_Pack(4, code, at, verb, fate) : NULL;
    if (entry) {
        put(plan, PL_SYNCED, entry, NULL);
        result = Py_NewRef(fate);
    }
    Py_DECREF(code);
    Py_XDECREF(file);
    Py_XDECREF(number);
    Py_XDECREF(at);
    Py_XDECREF(site);
    Py_XDECREF(fate);
    Py_XDECREF(entry);
    return result;
}

/* Set the thread's execution lock (`tile.aio._lock`) to `value`; 0, or -1 with an error. */
static int set_held(PyObject *value) { return PyObject_SetAttr(run_state, s_held, value); }

/* Take `op` for one use under `_CLAIMING` with the fate `fate` (`DeviceOp._claim`): 1 taken, 0 it was taken before
 * (nothing changed), -1 an error.
 *
 * The test and the take are a read and a store of one slot (the old value None: its release runs no code), so this
 * thread keeps the GIL from the test to the store. When `_CLAIMING.locked()` says no thread holds the lock, that is
 * already exclusive, and the lock's acquire and release (about four times the cost of the test, for their argument
 * parsing) are skipped: a thread that holds the lock has returned from `acquire` (its `locked` flag or bit is set
 * before that return) and is inside `DeviceOp._claim` until it releases; one that has not returned from it yet cannot
 * return before it takes the GIL, after this step, and then sees the store. When the lock is held, this waits for it
 * as before. (The module is built only for GIL builds of CPython: see _fastlaunch.c.) */
int claim(PyObject *op, PyObject *fate) {
    PyObject *r = PyObject_CallNoArgs(claim_locked);
    if (!r) return -1;
    int held = r != Py_False;
    Py_DECREF(r);
    if (held) {
        r = PyObject_CallNoArgs(claim_acquire);
        if (!r) return -1;
        Py_DECREF(r);
    }
    PyObject *now = GET(op, L_FATE);
    int taken = now && now != Py_None;
    if (!taken) put(op, L_FATE, fate, NULL);
    if (held) {
        r = PyObject_CallNoArgs(claim_release);
        if (!r) return -1; /* cannot happen: this thread holds the lock */
        Py_DECREF(r);
    }
    return !taken;
}

/* claim_run(launch, verb, site, ctx, BUILTIN_CONTEXTS, HOST, link): `Then._step`'s claim of the launch its function
 * returned ("verb at site", the fate kept on the plan for the next link of that site), the link's hold on it
 * (`link._next`, so the tree releases it also when its execution fails) and its execution in flight (the compiled
 * `execute`, else `Launch._execute`). NotImplemented, with nothing changed, when the launch was claimed
 * before (the generic claim then raises OpConsumedError). */
PyObject *claim_run_impl(PyObject *op, PyObject *verb, PyObject *site, PyObject *ctx, PyObject *builtin,
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
    if ((PyObject *)Py_TYPE(link) == Then_t) { /* the link owns it now (released with the tree): its slot, set */
        PyObject *old;
        put(link, K_NEXT, op, &old);
        Py_XDECREF(old); /* None: a link runs once (its run claimed it) */
    } else if (PyObject_SetAttr(link, s_next, op) < 0) {
        return NULL;
    }
    PyObject *output = execute_impl(op, ctx, 1, builtin, host);
    if (output == Py_None) {
        Py_DECREF(output);
        output = PyObject_CallMethodObjArgs(op, s_execute, ctx, NULL);
    }
    return output;
}

PyObject *claim_run(PyObject *self, PyObject *const *argv, Py_ssize_t n) {
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
PyObject *sync_launch(PyObject *self, PyObject *const *argv, Py_ssize_t n) {
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
    } else if (!PyErr_ExceptionMatches(PyExc_Exception)) { /* not `except Exception`: e.g. KeyboardInterrupt */
        /* The work may still run: the launch keeps its handles and hands them back once it is done (`Launch._park`,
         * `tile.aio._run.park`), then the interrupt goes on. */
        PyObject *it, *iv, *itb;
        PyErr_Fetch(&it, &iv, &itb);
        if (type) {
            PyErr_NormalizeException(&type, &value, &trace);
            if (trace && value) PyException_SetTraceback(value, trace);
        }
        r = PyObject_CallMethodObjArgs(op, s_park, ctx, output ? output : Py_None, value ? value : Py_None, NULL);
        if (r) Py_DECREF(r);
        else PyErr_WriteUnraisable(op);
        Py_XDECREF(type), Py_XDECREF(value), Py_XDECREF(trace), Py_XDECREF(output);
        PyErr_Restore(it, iv, itb);
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
