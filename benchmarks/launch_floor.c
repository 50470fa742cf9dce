/* The driver's share of a kernel launch's host time, for bench_launch_floor.py: cuLaunchKernel called from C in a
 * loop (the floor no Python launcher can go under) and from one METH_FASTCALL call per launch (the floor of any
 * launcher with a Python-level call per launch). Built against the stable ABI, so one build loads on Python 3.10+.
 * The driver is looked up with dlopen, so the module imports on machines without one (calls then raise). */
#define Py_LIMITED_API 0x030A0000
#include <Python.h>
#include <dlfcn.h>
#include <time.h>

typedef int (*launch_fn)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *,
                         void **, void **);
typedef int (*sync_fn)(void *);
static launch_fn cu_launch;
static sync_fn cu_sync;

static int load_driver(void) {
    if (cu_launch) return 0;
    void *lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (!lib) return -1;
    cu_launch = (launch_fn)dlsym(lib, "cuLaunchKernel");
    cu_sync = (sync_fn)dlsym(lib, "cuStreamSynchronize");
    return cu_launch && cu_sync ? 0 : -1;
}

/* Arguments of both functions: kernel handle, grid x, stream handle, kernelParams address (ints). */
static int parse(PyObject *const *args, Py_ssize_t n, Py_ssize_t want, void **fn, unsigned *grid, void **stream,
                 void ***params) {
    if (n != want) {
        PyErr_Format(PyExc_TypeError, "expected %zd arguments, got %zd", want, n);
        return -1;
    }
    if (load_driver()) {
        PyErr_SetString(PyExc_RuntimeError, "libcuda.so.1 (cuLaunchKernel) could not be loaded");
        return -1;
    }
    *fn = PyLong_AsVoidPtr(args[0]);
    *grid = (unsigned)PyLong_AsUnsignedLong(args[1]);
    *stream = PyLong_AsVoidPtr(args[2]);
    *params = (void **)PyLong_AsVoidPtr(args[3]);
    return PyErr_Occurred() ? -1 : 0;
}

static PyObject *launch(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    (void)self;
    void *fn, *stream, **params;
    unsigned grid;
    if (parse(args, n, 4, &fn, &grid, &stream, &params)) return NULL;
    int rc = cu_launch(fn, grid, 1, 1, 1, 1, 1, 0, stream, params, NULL);
    if (rc) return PyErr_Format(PyExc_RuntimeError, "cuLaunchKernel failed: CUresult %d", rc);
    Py_RETURN_NONE;
}

/* loop(kernel, grid, stream, params, count): launch count times, wait, return nanoseconds per launch. */
static PyObject *loop(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    (void)self;
    void *fn, *stream, **params;
    unsigned grid;
    if (parse(args, n > 4 ? 4 : n, 4, &fn, &grid, &stream, &params)) return NULL;
    long count = n == 5 ? PyLong_AsLong(args[4]) : -1;
    if (count <= 0) return PyErr_Format(PyExc_ValueError, "loop needs a positive launch count as its 5th argument");
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long i = 0; i < count; i++) {
        int rc = cu_launch(fn, grid, 1, 1, 1, 1, 1, 0, stream, params, NULL);
        if (rc) return PyErr_Format(PyExc_RuntimeError, "cuLaunchKernel failed: CUresult %d", rc);
    }
    cu_sync(stream);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return PyFloat_FromDouble(((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / count);
}

static PyMethodDef methods[] = {
    {"launch", (PyCFunction)(void (*)(void))launch, METH_FASTCALL, "cuLaunchKernel(kernel, grid, stream, params)"},
    {"loop", (PyCFunction)(void (*)(void))loop, METH_FASTCALL, "count launches from C; ns per launch"},
    {NULL, NULL, 0, NULL},
};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "launch_floor", NULL, -1, methods, NULL, NULL, NULL, NULL};
PyMODINIT_FUNC PyInit_launch_floor(void) { return PyModule_Create(&module); }
