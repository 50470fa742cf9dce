/* tile.frontend._fastlaunch's shared declarations (internal): the state `bind*` fills (_fastlaunch_module.c), the
 * slot offsets and their accessors, the step outcomes, and the functions one part of the module calls in another.
 * Every symbol is hidden in the built module (-fvisibility=hidden) except its init function. */
#ifndef TILE_FASTLAUNCH_H
#define TILE_FASTLAUNCH_H

#define Py_LIMITED_API 0x030A0000
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stddef.h>

extern PyObject *NEG_ZERO;     /* _plan.NEG_ZERO: a -0.0 float argument as packed (bound by bind) */
extern PyObject *host_running; /* tile.core._reaper.RUNNING: host functions running (bound by bind_core) */
extern PyObject *Tensor_t, *Partition_t, *Shared_t, *Storage_t, *Plan_t, *Launch_t, *InFlight_t, *IN_FLIGHT, *PLAIN,
    *FOREIGN, *OURS, *lock_acquire, *lock_release, *s_release, *s_check_scalar, *s_grid, *s_unchecked, *s_name,
    *s_f_back, *s_co_filename, *s_launch, *s_ctx, *s_site, *s_device, *s_stream, *s_held, *s_synchronize, *s_park, *s_execute, *s_next,
    *run_state, *run_note, *claim_acquire, *claim_release, *claim_locked, *CudaContext_t, *Prepared_t, *use_acquire, *use_release,
    *invalidation, *core_check, *s_cuLaunchKernel, *zero, *Link_t, *Then_t, *RETURNED, *BUILTIN, *HOST, *s_run_in,
    *s_step, *s_take, *s_claim_run, *s_hand_off, *then_fate_of, *then_code, *then_fate, *s_f_globals, *s_f_lasti, *s_tile_prefix;
extern long then_lasti;
extern allocfunc then_alloc;
extern allocfunc tensor_alloc, partition_alloc, launch_alloc;

/* Slot offsets, found by `bind`. */
enum {
    T_FATE, T_STORAGE, T_LAYOUT, T_RANGE, T_DTYPE, T_SHAPE, T_OFFSET, T_STRIDES, T_SITE, /* Tensor */
    W_FATE, W_TENSOR, P_TILE, SH_USERS,                                                  /* Partition, Shared */
    S_FREED, S_HANDLES, S_EXPORTS, S_PENDING, S_KEEPALIVE,                               /* Storage */
    PL_GIVEN, PL_EXPLICIT, PL_GENERICS, PL_USER_CONSTS, PL_TENSORS, PL_WRAPPED, PL_PAIRS, PL_OTHERS, PL_SCALARS,
    PL_TAIL, PL_ALIAS, PL_MOVED, PL_LENT, PL_HELD, PL_SHARES, PL_GRID, PL_PACKING, PL_PREPARED, PL_SITE, PL_SYNCED,
    PL_CHAINED, /* Plan */
    L_FATE, L_KERNEL, L_PLAN, L_SITE, L_VALUES, L_GRID, L_AFTER, L_LENT,                     /* Launch */
    C_STREAM, C_DEVICE,                                                                      /* CudaContext */
    PR_EPOCH, PR_LAUNCH, PR_CALL, PR_SHARED, PR_KEEP,                             /* tile.core's PreparedLaunch */
    K_SRC, K_FN, K_NEXT, K_SITE, M_SRC, K_FATE,                                     /* tile.aio's Then, Map (a _Link's _src) */
    CP_DICTS, CP_CELLS,                                                        /* tile.compiler's Captures */
    N_SLOTS
};
extern const char *slot_names[N_SLOTS];
extern Py_ssize_t off[N_SLOTS];

/* A slot's value (borrowed; NULL when empty): the object holds it. */
#define GET(o, k) (*(PyObject **)((char *)(o) + off[k]))

/* Store a new reference in a slot; the old value goes to `*dead` (released by the caller when the step is done, so no
 * deallocation runs code in the middle of it), or is released now when dead is NULL. */
static inline void put(PyObject *o, int k, PyObject *value, PyObject **dead) {
    PyObject **slot = (PyObject **)((char *)o + off[k]);
    PyObject *old = *slot;
    Py_INCREF(value);
    *slot = value;
    if (dead) *dead = old;
    else Py_XDECREF(old);
}

/* Outcomes of a step: go on, the call is not handled here (the pure path decides), or a Python error. */
enum { OK = 0, NO = 1, ERR = -1 };

static inline Py_ssize_t as_index(PyObject *o) { return PyLong_AsSsize_t(o); }

/* _fastlaunch_module.c */
int probe(PyObject *cls, const int *ks, int count);
PyObject *dict_attr(PyObject *o, PyObject *name);

/* _fastlaunch_checks.c */
PyObject *storage_of(PyObject *t);
int same_sign(PyObject *a, PyObject *b);
int matches(PyObject *plan, PyObject *args);
int scalars_ok(PyObject *plan, PyObject *args, PyObject *check, PyObject *kernel);
int no_overlap(PyObject *plan, PyObject *args);

/* _fastlaunch_admit.c */
int fate_slot(PyObject *v);
PyObject *admit_impl(PyObject *plan, PyObject *args, PyObject *generics, PyObject *explicit, int unchecked,
                     PyObject *check, PyObject *kernel, PyObject *fate, PyObject *name, PyObject *site);
PyObject *admit_move(PyObject *self, PyObject *const *argv, Py_ssize_t n);
PyObject *release_impl(PyObject *plan, PyObject *values, PyObject *lent);
PyObject *release(PyObject *self, PyObject *const *argv, Py_ssize_t n);

/* _fastlaunch_call.c */
int enter(void);
void leave(int paused);
PyObject *drop_held(PyObject *op, PyObject **values, PyObject **lent);
PyObject *drop_impl(PyObject *op);
PyObject *drop(PyObject *self, PyObject *const *argv, Py_ssize_t n);
PyObject *user_frame(void);
int frame_lasti(PyObject *frame, long *lasti);
PyObject *call(PyObject *self, PyObject *const *argv, Py_ssize_t n);

/* _fastlaunch.c */
PyObject *replay(PyObject *self, PyObject *const *argv, Py_ssize_t n);
PyObject *execute_impl(PyObject *op, PyObject *ctx, int lend, PyObject *builtin, PyObject *host);
PyObject *execute(PyObject *self, PyObject *const *argv, Py_ssize_t n);

/* _fastlaunch_run.c */
int claim(PyObject *op, PyObject *fate);
PyObject *claim_run_impl(PyObject *op, PyObject *verb, PyObject *site, PyObject *ctx, PyObject *builtin,
                         PyObject *host, PyObject *link);
PyObject *claim_run(PyObject *self, PyObject *const *argv, Py_ssize_t n);
PyObject *sync_launch(PyObject *self, PyObject *const *argv, Py_ssize_t n);

/* _fastlaunch_links.c */
PyObject *run_links(PyObject *self, PyObject *const *argv, Py_ssize_t n);
PyObject *release_links(PyObject *self, PyObject *const *argv, Py_ssize_t n);
PyObject *then(PyObject *self, PyObject *const *argv, Py_ssize_t n);

#endif
