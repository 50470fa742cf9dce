"""DLPack export for Tile memory, built with ctypes: versioned ``dltensor_versioned`` capsules (DLPack 1.0, which can
say "read-only") for consumers that ask for them, legacy ``dltensor`` capsules for the others.

Invariants: every exported capsule keeps its owner alive until the consumer calls the tensor's deleter, or
until the capsule itself is collected unconsumed (then the capsule destructor calls the deleter); the deleter
runs exactly once per export; read-only memory is exported only in a versioned capsule with the read-only flag
set (a legacy capsule cannot say it, so that export is refused with ``BufferError``, as numpy does);
``live_exports(owner)`` counts exports whose deleter has not run yet, so an owner can refuse to free memory a
consumer still views. Device-type agnostic: the same code exports host memory
(kDLCPU), which is how it is tested without a GPU.
"""

from __future__ import annotations

import ctypes
import itertools
import threading
from typing import Any

import numpy as np

from tile.core._errors import LayoutMismatchError

__all__ = [
    "FLAG_READ_ONLY",
    "KDL_CPU",
    "KDL_CUDA",
    "KDL_CUDA_HOST",
    "dlpack_dtype",
    "export_capsule",
    "live_exports",
    "live_owners",
    "wants_versioned",
]

KDL_CPU, KDL_CUDA, KDL_CUDA_HOST = 1, 2, 3
_KIND_CODES = {"i": 0, "u": 1, "f": 2, "c": 5, "b": 6}
_BFLOAT = 4


class _DLDevice(ctypes.Structure):
    _fields_ = (("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32))


class _DLDataType(ctypes.Structure):
    _fields_ = (("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16))


class _DLTensor(ctypes.Structure):
    _fields_ = (
        ("data", ctypes.c_void_p),
        ("device", _DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    )


class _DLManagedTensor(ctypes.Structure):
    pass


_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(_DLManagedTensor))
_DLManagedTensor._fields_ = (("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _DELETER))


class _DLPackVersion(ctypes.Structure):
    _fields_ = (("major", ctypes.c_uint32), ("minor", ctypes.c_uint32))


class _DLManagedTensorVersioned(ctypes.Structure):
    pass


_DELETER_V = ctypes.CFUNCTYPE(None, ctypes.POINTER(_DLManagedTensorVersioned))
_DLManagedTensorVersioned._fields_ = (
    ("version", _DLPackVersion),
    ("manager_ctx", ctypes.c_void_p),
    ("deleter", _DELETER_V),
    ("flags", ctypes.c_uint64),
    ("dl_tensor", _DLTensor),
)
FLAG_READ_ONLY = 1 << 0
VERSION = (1, 0)

_CAPSULE_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_api = ctypes.pythonapi
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = (ctypes.c_void_p, ctypes.c_char_p, _CAPSULE_DESTRUCTOR)
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = (ctypes.c_void_p, ctypes.c_char_p)
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = (ctypes.c_void_p, ctypes.c_char_p)

_NAME = b"dltensor"
_NAME_V = b"dltensor_versioned"
_lock = threading.RLock()  # re-entrant: a capsule destructor may run (GC) while it is held
_ids = itertools.count(1)
# export id -> (managed tensor, shape array, strides array, owner): what must outlive the consumer's use.
_live: dict[int, tuple[Any, Any, Any, object]] = {}


def _delete(managed: Any) -> None:
    with _lock:
        _live.pop(int(managed.contents.manager_ctx or 0), None)


def _destroy_capsule(capsule: int) -> None:
    # A consumed capsule is renamed "used_dltensor[_versioned]"; only an unconsumed one still owns its tensor.
    if _api.PyCapsule_IsValid(capsule, _NAME):
        address = _api.PyCapsule_GetPointer(capsule, _NAME)
        _delete(ctypes.cast(address, ctypes.POINTER(_DLManagedTensor)))
    elif _api.PyCapsule_IsValid(capsule, _NAME_V):
        address = _api.PyCapsule_GetPointer(capsule, _NAME_V)
        _delete(ctypes.cast(address, ctypes.POINTER(_DLManagedTensorVersioned)))


_deleter = _DELETER(_delete)
_deleter_v = _DELETER_V(_delete)
_capsule_destructor = _CAPSULE_DESTRUCTOR(_destroy_capsule)


def wants_versioned(max_version: tuple[int, int] | None) -> bool:
    """True when a consumer's ``max_version`` accepts a DLPack 1.x capsule."""
    return max_version is not None and tuple(max_version) >= VERSION


def dlpack_dtype(dtype: np.dtype[Any]) -> tuple[int, int]:
    """Return the DLPack ``(code, bits)`` of a numpy or ml_dtypes dtype."""
    if dtype.name == "bfloat16":
        return _BFLOAT, 16
    code = _KIND_CODES.get(dtype.kind)
    if code is None:
        raise LayoutMismatchError(f"dtype {dtype} has no DLPack equivalent: use a numeric dtype")
    return code, dtype.itemsize * 8


def export_capsule(
    ptr: int,
    dtype: np.dtype[Any],
    shape: tuple[int, ...],
    strides: tuple[int, ...],
    *,
    device: tuple[int, int],
    owner: object,
    readonly: bool = False,
    versioned: bool = False,
) -> object:
    """Return a DLPack capsule describing the memory; ``owner`` stays alive until the consumer is done.

    Parameters
    ----------
    ptr : int
        Address of element 0.
    dtype, shape : numpy dtype and tuple of int
        Element type and extents.
    strides : tuple of int
        Byte strides; each must be a multiple of the item size.
    device : tuple of int
        ``(device_type, device_id)``, e.g. ``(KDL_CUDA, 0)``.
    owner : object
        Kept referenced until the tensor's deleter runs.
    readonly : bool
        The consumer must not write: sets DLPack 1.0's read-only flag (needs ``versioned``).
    versioned : bool
        Make a DLPack 1.0 ``dltensor_versioned`` capsule (the consumer passed ``max_version >= (1, 0)``).

    Raises
    ------
    BufferError
        For ``readonly`` without ``versioned``: a legacy capsule cannot tell the consumer not to write.
    """
    if readonly and not versioned:
        raise BufferError(
            "this memory is exported read-only, which only DLPack 1.0 can express, and the consumer asked for a "
            "legacy capsule: use a consumer that passes max_version=(1, 0) (numpy >= 2.1, recent torch), or ask "
            "the memory's owner for a writable export"
        )
    if any(s % dtype.itemsize for s in strides):
        raise LayoutMismatchError(f"strides {strides} are not whole elements of {dtype}: DLPack cannot express them")
    code, bits = dlpack_dtype(dtype)
    ndim = len(shape)
    shape_arr = (ctypes.c_int64 * max(ndim, 1))(*shape)
    strides_arr = (ctypes.c_int64 * max(ndim, 1))(*(s // dtype.itemsize for s in strides))
    managed: Any = _DLManagedTensorVersioned() if versioned else _DLManagedTensor()
    tensor = managed.dl_tensor
    tensor.data, tensor.device, tensor.ndim = ptr, _DLDevice(*device), ndim
    tensor.dtype = _DLDataType(code, bits, 1)
    tensor.shape = ctypes.cast(shape_arr, ctypes.POINTER(ctypes.c_int64))
    tensor.strides = ctypes.cast(strides_arr, ctypes.POINTER(ctypes.c_int64))
    tensor.byte_offset = 0
    key = next(_ids)
    managed.manager_ctx, managed.deleter = key, (_deleter_v if versioned else _deleter)
    if versioned:
        managed.version = _DLPackVersion(*VERSION)
        managed.flags = FLAG_READ_ONLY if readonly else 0
    with _lock:
        _live[key] = (managed, shape_arr, strides_arr, owner)
    return _api.PyCapsule_New(ctypes.addressof(managed), _NAME_V if versioned else _NAME, _capsule_destructor)


def live_exports(owner: object) -> int:
    """Return how many exports of ``owner`` a consumer may still be using."""
    with _lock:
        return sum(1 for entry in _live.values() if entry[3] is owner)


def live_owners() -> list[object]:
    """Return the owner of each export a consumer may still be using (once per owner): how an import recognizes
    memory this process exported itself and a consumer (the importer among them) still holds."""
    with _lock:
        owners = {id(entry[3]): entry[3] for entry in _live.values()}
    return list(owners.values())
