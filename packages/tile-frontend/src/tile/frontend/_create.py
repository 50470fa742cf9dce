"""Making tensors: ``zeros/ones/full/empty/arange/linspace/eye/rand/randn``, ``from_numpy`` and ``from_dlpack``.

Invariants: every function returns a new live `Tensor` that owns fresh memory on ``device=`` (``"cpu"``, a GPU
ordinal, ``"cuda:1"`` or ``tile.Device(1)``; by default the current backend's: the host for the CPU backend,
``tile.core.Device(0)`` for the GPU), except `from_dlpack`, which borrows the producer's memory
without copying (and never frees it). Random tensors come from one seeded generator (`manual_seed`), so a run is
reproducible. Creation takes the dtype first, as cuTile Rust does (``tile.zeros(f32, [1024])``), or numpy's way
(``tile.zeros([1024], f32)`` / ``dtype=``).

``zeros``, ``ones``, ``full`` and ``arange`` are also kernel-language ops: the objects here are those ops (the
compiler sees the same `LangOp`), and calling them from ordinary Python makes a host tensor.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Hashable
from typing import Any, ParamSpec

import numpy as np

from tile.compiler.lang import OPS, DType, LangOp, f32, i64
from tile.frontend import _device
from tile.frontend._backend import backend
from tile.frontend._dtypes import as_dtype, dtype_of, is_dtype_like, numpy_dtype
from tile.frontend._errors import ArgumentError, HostMemoryError
from tile.frontend._placement import resolve
from tile.frontend._site import user_site
from tile.frontend._storage import HOST, Storage
from tile.frontend._tensor import MAX_BYTES, Tensor

__all__ = [
    "arange",
    "empty",
    "eye",
    "from_dlpack",
    "from_numpy",
    "full",
    "linspace",
    "manual_seed",
    "ones",
    "rand",
    "randn",
    "zeros",
]

P = ParamSpec("P")
_rng = np.random.default_rng(0)


def manual_seed(seed: int) -> None:
    """Reset the generator behind `rand` and `randn`."""
    global _rng  # noqa: PLW0603  # one process-wide generator, as numpy.random and torch.manual_seed have
    _rng = np.random.default_rng(seed)


def _gpu_device() -> Hashable:
    found: Hashable = _device.default_device()
    return found


def _target(device: object) -> Hashable:
    """Where a new tensor goes: ``device`` resolved (``"cpu"``, ``1``, ``"cuda:1"``, ``tile.Device(1)``), else the
    current backend's default (the host, or GPU 0)."""
    if device is None:
        return HOST if backend() == "cpu" else _gpu_device()
    return resolve(device)


def _numpy(what: str, make: Callable[[], Any]) -> np.ndarray[Any, Any]:
    """``make()``, numpy's conversion of user values, with its ValueError / TypeError / OverflowError (a string, a
    ragged list, an object, a value out of the dtype's range) as an `ArgumentError` saying what to pass."""
    try:
        return np.asarray(make())
    except (ValueError, TypeError, OverflowError) as error:
        message = f"{what}: the values cannot be converted ({error}); pass numbers or a numeric array"
        raise ArgumentError(message) from None


def _store(array: np.ndarray[Any, Any], dtype: DType, device: object) -> Tensor:
    """Copy a host array into a new owned tensor of ``dtype`` on ``device``."""
    array = _numpy(f"a {dtype.name} tensor", lambda: np.asarray(array, dtype=numpy_dtype(dtype)))
    if not array.flags.c_contiguous:  # (np.ascontiguousarray would also turn a 0-d array into shape (1,))
        array = np.ascontiguousarray(array)
    where = _target(device)
    if where == HOST:
        storage = Storage.host_owned(array.nbytes)
        if array.nbytes:
            assert storage.host is not None
            storage.host[: array.nbytes] = array.reshape(-1).view(np.uint8)
    else:
        storage = _device.upload(array, where)
    return Tensor._make(storage, dtype, array.shape, site=user_site())


def _allocating(make: Callable[P, Tensor]) -> Callable[P, Tensor]:
    """``make`` with the host's MemoryError (numpy's, for the CPU backend or a staging copy) as a typed error."""

    @functools.wraps(make)
    def checked(*args: P.args, **kwargs: P.kwargs) -> Tensor:
        try:
            return make(*args, **kwargs)
        except MemoryError as exc:
            raise HostMemoryError(
                f"{make.__name__.lstrip('_')}(): the host cannot allocate this tensor ({exc}); use a smaller shape, "
                "or free tensors you no longer need"
            ) from None

    return checked


def _shape(shape: object) -> tuple[int, ...]:
    dims = shape if isinstance(shape, (tuple, list)) else (shape,)
    if not all(isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n >= 0 for n in dims):
        raise ArgumentError(f"a shape is a non-negative int or a sequence of them; got {shape!r}")
    return tuple(int(n) for n in dims)


def _nbytes(dtype: DType, shape: tuple[int, ...]) -> int:
    """The exact byte size of a new ``shape`` tensor (Python ints: no wrap-around), refused beyond `MAX_BYTES`."""
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes > MAX_BYTES or any(n > MAX_BYTES for n in shape):
        raise ArgumentError(
            f"a {dtype.name} tensor of shape {list(shape)} would need {nbytes} bytes, beyond the {MAX_BYTES}-byte "
            "limit of 64-bit indexing; use a smaller shape"
        )
    return nbytes


def _dtype_shape(a: object, b: object, dtype: object, default: DType) -> tuple[DType, tuple[int, ...]]:
    """Accept ``(dtype, shape)``, ``(shape, dtype)`` or ``(shape,)`` with ``dtype=``; the size is checked."""
    if is_dtype_like(a) and not isinstance(a, int):
        dt, shape = as_dtype(a), _shape(b)
    else:
        chosen = b if b is not None else dtype
        dt, shape = (as_dtype(chosen) if chosen is not None else default), _shape(a)
    _nbytes(dt, shape)
    return dt, shape


@_allocating
def empty(a: object, b: object = None, *, dtype: object = None, device: object = None) -> Tensor:
    """An uninitialised tensor: ``empty(f32, [M, N])`` (or ``empty([M, N], f32)``)."""
    dt, shape = _dtype_shape(a, b, dtype, f32)
    where = _target(device)
    nbytes = _nbytes(dt, shape)
    storage = Storage.host_owned(nbytes) if where == HOST else _device.allocate(nbytes, where)
    return Tensor._make(storage, dt, shape, site=user_site())


@_allocating
def _full(a: object, b: object = None, value: object = None, *, dtype: object = None, device: object = None) -> Tensor:
    """A tensor filled with ``value``: ``full(f32, [4], 2.5)`` or ``full([4], 2.5, dtype=f32)``."""
    if is_dtype_like(a) and not isinstance(a, int):
        dt, shape, fill = as_dtype(a), _shape(b), value
    else:
        dt, shape, fill = as_dtype(dtype if dtype is not None else f32), _shape(a), b
    if fill is None:
        raise ArgumentError("full() needs a fill value: full(f32, shape, value)")
    _nbytes(dt, shape)
    return _store(_numpy("full()", lambda: np.full(shape, fill, numpy_dtype(dt))), dt, device)


@_allocating
def _zeros(a: object, b: object = None, *, dtype: object = None, device: object = None) -> Tensor:
    """A tensor of zeros: ``zeros(f32, [1024])`` (or ``zeros([1024], f32)``)."""
    dt, shape = _dtype_shape(a, b, dtype, f32)
    return _store(np.zeros(shape, numpy_dtype(dt)), dt, device)


@_allocating
def _ones(a: object, b: object = None, *, dtype: object = None, device: object = None) -> Tensor:
    """A tensor of ones: ``ones(f32, [1024])`` (or ``ones([1024], f32)``)."""
    dt, shape = _dtype_shape(a, b, dtype, f32)
    return _store(np.ones(shape, numpy_dtype(dt)), dt, device)


@_allocating
def _arange(*args: Any, dtype: object = None, device: object = None) -> Tensor:
    """``arange([dtype,] [start,] stop[, step])``: evenly spaced values (default dtype i64 for ints, else f32)."""
    if args and is_dtype_like(args[0]) and not isinstance(args[0], int):
        dtype, args = args[0], args[1:]
    if not 1 <= len(args) <= 3:
        raise ArgumentError("arange takes [dtype,] stop, or start, stop[, step]")
    values = _numpy("arange()", lambda: np.arange(*args))
    dt = as_dtype(dtype) if dtype is not None else (i64 if values.dtype.kind in "iu" else f32)
    return _store(values, dt, device)


@_allocating
def linspace(start: float, stop: float, num: int, *, dtype: object = None, device: object = None) -> Tensor:
    """``num`` evenly spaced values from ``start`` to ``stop`` inclusive (default dtype f32)."""
    dt = as_dtype(dtype) if dtype is not None else f32
    return _store(_numpy("linspace()", lambda: np.linspace(start, stop, num)), dt, device)


@_allocating
def eye(n: int, m: int | None = None, *, dtype: object = None, device: object = None) -> Tensor:
    """The ``n x m`` identity matrix (default dtype f32)."""
    dt = as_dtype(dtype) if dtype is not None else f32
    return _store(_numpy("eye()", lambda: np.eye(n, m)), dt, device)


@_allocating
def rand(a: object, b: object = None, *, dtype: object = None, device: object = None) -> Tensor:
    """Uniform values in ``[0, 1)`` from the seeded generator: ``rand(f32, [M, N])``."""
    dt, shape = _dtype_shape(a, b, dtype, f32)
    return _store(_rng.random(shape), dt, device)


@_allocating
def randn(a: object, b: object = None, *, dtype: object = None, device: object = None) -> Tensor:
    """Standard-normal values from the seeded generator: ``randn(f16, [M, N])``."""
    dt, shape = _dtype_shape(a, b, dtype, f32)
    return _store(_rng.standard_normal(shape), dt, device)


@_allocating
def from_numpy(array: Any, *, dtype: object = None, device: object = None) -> Tensor:
    """A new tensor holding a copy of ``array`` (converted to ``dtype`` when given)."""
    arr = _numpy("from_numpy()", lambda: np.asarray(array))
    dt = as_dtype(dtype) if dtype is not None else dtype_of(arr.dtype)
    return _store(arr, dt, device)


def from_dlpack(obj: Any) -> Tensor:
    """Borrow a foreign array (numpy, torch, cupy, ...) without copying.

    Host arrays become CPU-backend tensors and device arrays GPU tensors. Tile never frees borrowed memory; the
    producer is kept alive by the tensor. Every overlap with another handle is found by address range, so two
    borrows of one buffer cannot both be written.
    """
    device_type = obj.__dlpack_device__()[0] if hasattr(obj, "__dlpack_device__") else None
    if device_type == 1 or (device_type is None and hasattr(obj, "__array_interface__")):
        try:
            array = np.from_dlpack(obj) if device_type == 1 else np.asarray(obj)
        except (BufferError, TypeError, ValueError, RuntimeError) as exc:  # (numpy: RuntimeError for bf16, f8)
            raise ArgumentError(
                f"cannot borrow {type(obj).__name__}: {exc}; pass a numeric array of a dtype numpy can view (a host "
                "bfloat16 or float8 array cannot be borrowed: convert it, e.g. torch's t.float(), or copy it in "
                "with tile.from_numpy(..., dtype=...))"
            ) from None
        return _borrow_host(array, obj)
    storage, np_dtype, shape, strides, offset = _device.borrow(obj)
    return Tensor._make(storage, dtype_of(np_dtype), shape, strides=strides, offset=offset, site=user_site())


def _borrow_host(arr: np.ndarray[Any, Any], owner: object) -> Tensor:
    item = arr.dtype.itemsize
    if any(s < 0 or s % item for s in arr.strides):
        raise ArgumentError("only non-negative strides that are multiples of the item size can be borrowed")
    lo = int(arr.__array_interface__["data"][0])
    span = sum((n - 1) * s for n, s in zip(arr.shape, arr.strides, strict=False)) + item if arr.size else 0
    storage = Storage.host_foreign(lo, lo + span, not arr.flags.writeable, (owner, arr))
    strides = tuple(s // item for s in arr.strides)
    return Tensor._make(storage, dtype_of(arr.dtype), arr.shape, strides=strides, site=user_site())


@dataclasses.dataclass(frozen=True, repr=False)
class HostOrKernelOp(LangOp):
    """A kernel-language op that also has a host meaning: in a kernel the compiler sees the `LangOp`; called
    from Python it makes a host tensor."""

    host: Callable[..., Tensor] = dataclasses.field(default=_zeros, compare=False)

    def __call__(self, *args: object, **kwargs: object) -> Tensor:
        return self.host(*args, **kwargs)


def _dual(name: str, host: Callable[..., Tensor]) -> HostOrKernelOp:
    op = OPS[name]
    fields = {f.name: getattr(op, f.name) for f in dataclasses.fields(LangOp)}
    dual = HostOrKernelOp(**fields, host=host)
    object.__setattr__(dual, "__doc__", host.__doc__)
    return dual


zeros = _dual("zeros", _zeros)
ones = _dual("ones", _ones)
full = _dual("full", _full)
arange = _dual("arange", _arange)
