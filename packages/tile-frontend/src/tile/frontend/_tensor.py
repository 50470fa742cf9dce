"""`Tensor`: a handle on a typed, strided window of a `Storage` (host or device), with move semantics.

Invariants:
- A handle is live, moved (into a launch or a partition: ``_fate`` says where) or freed; every public method
  checks this first and raises `MovedError` / `FreedError` naming the site and the fix.
- Views (``reshape``, indexing, ``permute``) are zero-copy handles on the same storage; each one is a shared borrow
  that blocks partitioning overlapping memory while it is alive.
- Strides are in elements and never negative; ``offset`` is in elements from the storage's first byte.
- ``Tensor[dtype, shape]`` (subscripting the class) is the kernel-language annotation, so one name serves the
  host handle and the kernel signature.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from tile.compiler.lang import DType
from tile.compiler.lang import Tensor as _Annotation
from tile.compiler.lang._annotations import TensorAnnotation
from tile.core import Uncopyable
from tile.frontend._dtypes import numpy_dtype
from tile.frontend._errors import (
    ArgumentError,
    BackendError,
    Exact,
    FinalClassError,
    FreedError,
    InFlight,
    UntrackedExportError,
    final_class_error,
    frozen,
    refuse_subclass,
)
from tile.frontend._handle import FIX, check_fate
from tile.frontend._site import user_site
from tile.frontend._storage import HOST, Storage, owning

if TYPE_CHECKING:
    from tile.frontend._lend import Lent
    from tile.frontend._partition import Partition
    from tile.frontend._shared import Shared

__all__ = ["Tensor", "contiguous_strides"]

_FIX = FIX  # the name the other modules import


def contiguous_strides(shape: Sequence[int]) -> tuple[int, ...]:
    """Row-major strides (in elements) of ``shape``."""
    out, step = [], 1
    for n in reversed(shape):
        out.append(step)
        step *= n if n > 1 else 1  # max(n, 1) without the call: this runs for every handle made
    return tuple(reversed(out))


class Tensor(Uncopyable, metaclass=Exact):
    """A host handle on device (or, on the CPU backend, host) memory.

    Create tensors with `tile.zeros`, `tile.ones`, `tile.from_numpy`, `tile.from_dlpack`, ...; pass them to
    kernels (they are moved into the launch and handed back by ``.sync()``/``await``), partition them for output
    with `partition`, and read them back with `to_numpy`. Every attribute is read-only: what a launch checked
    (dtype, shape, strides) cannot change under it.
    """

    __slots__ = (
        "__weakref__",
        "_dtype",
        "_fate",
        "_layout",
        "_offset",
        "_range",
        "_shape",
        "_site",
        "_storage",
        "_strides",
    )
    _range: tuple[int, int]
    _layout: tuple[Any, ...]
    _storage: Storage
    _shape: tuple[int, ...]
    _strides: tuple[int, ...]
    _offset: int
    _site: str
    _fate: tuple[str, str] | None
    _dtype: DType

    @classmethod
    def subclass_error(cls, qualname: str) -> FinalClassError:
        """The error the `Exact` metaclass raises for defining ``qualname``, a subclass of this class."""
        return final_class_error(cls, qualname)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        raise refuse_subclass(cls)  # launches trust this class's methods: see FinalClassError

    def __init__(self) -> None:
        raise TypeError("make tensors with tile.zeros/ones/full/empty/arange/from_numpy/from_dlpack")

    # copy.copy and pickling refuse (Uncopyable): a second handle on the same memory would be a second owner.
    _copy_fix = (
        "for a new tensor holding the same values use .copy() (or copy.deepcopy); to send it elsewhere, .to_numpy()"
    )

    def __deepcopy__(self, memo: dict[int, Any]) -> Tensor:
        """A new tensor owning a copy of the elements (what deep-copying a value means): see `copy`."""
        return self.copy()

    def __class_getitem__(cls, item: Any) -> TensorAnnotation:
        return _Annotation[item]

    @classmethod
    def _make(
        cls,
        storage: Storage,
        dtype: DType,
        shape: Sequence[int],
        *,
        strides: Sequence[int] | None = None,
        offset: int = 0,
        site: str | None = None,
        span: tuple[int, int] | None = None,
    ) -> Tensor:
        """A new handle (registered with ``storage``) of the layout; ``span`` is the layout's checked byte span when
        the caller has it (a handle of the same layout on the same storage: `_same_view`), else it is checked here."""
        self = object.__new__(cls)
        self._storage, self._dtype, self._shape, self._offset = storage, dtype, tuple(shape), offset
        self._strides = tuple(strides) if strides is not None else contiguous_strides(shape)
        self._site, self._fate = site or user_site(), None
        self._range = span if span is not None else _checked_span(storage, dtype, self._shape, self._strides, offset)
        # What a launch's layout key reads from this view (see _plan): fixed for the handle's life, like _range.
        self._layout = (dtype.name, self._shape, self._strides, self._range[0] & 15, storage.device)
        storage.add(self)
        return self

    # -- state --------------------------------------------------------------------------------------------------

    def _check(self, admit: bool = False) -> Storage:
        """Raise if this handle cannot be used (``admit``: by the kernel call taking it); return its storage."""
        fate = self._fate
        if fate is not None and not (admit and type(fate) is InFlight and fate.takeable()):
            check_fate(self._describe(), fate, admit)  # raises; described only then (chains take in-flight handles)
        storage = self._storage
        if storage.freed_at is not None:
            raise FreedError(
                f"{self._describe()} views memory that was freed at {storage.freed_at}; "
                "keep the tensor until you no longer need it, or make a new one"
            )
        return storage

    @owning
    def _move(self, kind: str, where: str, admit: bool = False) -> Tensor:
        """Hand this handle's view to a new handle and mark this one moved (``kind`` picks the fix hint; ``admit``: the
        kernel call taking it may take it in flight)."""
        self._check(admit)
        return self._hand_over((kind, where))

    def _hand_over(self, fate: tuple[str, str]) -> Tensor:
        """`_move` for a handle whose state was just checked (the launch fast path checks all arguments first)."""
        storage = self._storage
        new = object.__new__(Tensor)
        # One attribute store each (a tuple assignment would build and unpack a tuple): this runs per handle per launch.
        new._storage = storage
        new._dtype = self._dtype
        new._shape = self._shape
        new._offset = self._offset
        new._strides = self._strides
        new._site = self._site
        new._fate = None
        new._range = self._range
        new._layout = self._layout
        handles = storage._handles  # Storage.replace, inlined: this runs per handle per launch
        handles.pop(id(self), None)
        handles[id(new)] = weakref.ref(new)
        self._fate = fate
        return new

    @property
    def moved(self) -> bool:
        """True once the handle was moved into a launch or a partition (or freed)."""
        return self._fate is not None or self._storage.freed_at is not None

    @property
    def in_flight(self) -> bool:
        """True for a handle in flight: handed on by a launch before its work was done (inside a ``.then()`` or
        ``.map()`` function, or a graph capture's). Only a kernel call may take it (ownership rule 11)."""
        return type(self._fate) is InFlight

    def _describe(self) -> str:
        return f"Tensor({self.dtype.name}, {list(self._shape)}) created at {self._site}"

    def _byte_range(self) -> tuple[int, int]:
        """The absolute bytes ``[lo, hi)`` the elements span (fixed for the handle's life)."""
        return self._range

    # -- metadata -----------------------------------------------------------------------------------------------

    @property
    def dtype(self) -> DType:
        """Element type (read-only)."""
        return self._dtype

    @dtype.setter
    def dtype(self, value: object) -> None:
        raise frozen(self, "dtype", "make a converted copy instead: tile.from_numpy(t.to_numpy(), dtype=...)")

    @property
    def shape(self) -> tuple[int, ...]:
        """Extents."""
        return self._shape

    @property
    def strides(self) -> tuple[int, ...]:
        """Strides in elements."""
        return self._strides

    @property
    def ndim(self) -> int:
        """Rank."""
        return len(self._shape)

    @property
    def size(self) -> int:
        """Number of elements."""
        return math.prod(self._shape)

    @property
    def nbytes(self) -> int:
        """Bytes of the elements (``size * itemsize``)."""
        return self.size * self.dtype.itemsize

    @property
    def device(self) -> object:
        """``"cpu"`` for the CPU backend, else the ``tile.core.Device`` holding the memory."""
        return self._storage.device

    @property
    def is_contiguous(self) -> bool:
        """True for a dense row-major layout."""
        step = 1  # the row-major stride of each axis, innermost first (as `contiguous_strides`, in one pass)
        for n, s in zip(reversed(self._shape), reversed(self._strides), strict=True):
            if n > 1 and s != step:
                return False
            step *= n if n > 1 else 1
        return True

    def data_ptr(self) -> int:
        """Address of element ``[0, ..., 0]`` (for ``Ptr`` parameters of unchecked kernels only)."""
        self._check()
        return self._address()

    def _address(self) -> int:
        return self._storage.address + self._offset * self.dtype.itemsize

    def __repr__(self) -> str:
        state = "moved" if self.moved else str(self.device)
        return f"Tensor({self.dtype.name}, {list(self._shape)}, {state})"

    # -- views --------------------------------------------------------------------------------------------------

    @owning
    def _view(self, shape: Sequence[int], strides: Sequence[int], offset: int) -> Tensor:
        return Tensor._make(self._check(), self.dtype, shape, strides=strides, offset=offset, site=user_site())

    @owning
    def _same_view(self) -> Tensor:
        """``t[()]``, the borrow every library call makes of its inputs: a new handle of this handle's own layout,
        whose byte span was checked when this one was made (same storage, shape, strides and offset)."""
        storage = self._check()
        shape, strides, offset, span = self._shape, self._strides, self._offset, self._range
        return Tensor._make(storage, self._dtype, shape, strides=strides, offset=offset, site=user_site(), span=span)

    def reshape(self, *shape: int | Sequence[int]) -> Tensor:
        """A zero-copy view with a new shape (one extent may be -1); needs a contiguous tensor."""
        dims = _dims(shape)
        if dims.count(-1) > 1 or min(dims, default=0) < -1:
            raise ArgumentError(f"reshape{tuple(dims)}: extents are >= 0 with at most one -1")
        if -1 in dims:
            known = math.prod(n for n in dims if n != -1)
            dims[dims.index(-1)] = self.size // known if known else 0
        if math.prod(dims) != self.size:
            raise ArgumentError(f"cannot reshape {list(self._shape)} ({self.size} elements) into {dims}")
        if not self.is_contiguous:
            raise ArgumentError(f"reshape needs a contiguous tensor; {self!r} is a strided view: call .copy() first")
        return self._view(dims, contiguous_strides(dims), self._offset)

    def permute(self, *axes: int | Sequence[int]) -> Tensor:
        """A zero-copy view with dimensions reordered by ``axes``."""
        order = _dims(axes)
        if sorted(order) != list(range(self.ndim)):
            raise ArgumentError(f"permute{tuple(order)} is not a permutation of the {self.ndim} axes of {self!r}")
        return self._view([self._shape[a] for a in order], [self._strides[a] for a in order], self._offset)

    @property
    def T(self) -> Tensor:  # noqa: N802  # numpy's spelling of the reversed-axes view
        """The view with all axes reversed."""
        return self.permute(*reversed(range(self.ndim)))

    def __getitem__(self, key: Any) -> Tensor:
        """Basic indexing: ints (drop the axis) and slices with a positive step; a zero-copy view."""
        if type(key) is tuple and not key:
            return self._same_view()
        keys = key if isinstance(key, tuple) else (key,)
        if len(keys) > self.ndim:
            raise ArgumentError(f"too many indices ({len(keys)}) for {self!r}")
        shape, strides, offset = [], [], self._offset
        for axis, (n, s) in enumerate(zip(self._shape, self._strides, strict=False)):
            k = keys[axis] if axis < len(keys) else _ALL
            if k is _ALL or (type(k) is slice and k.start is None and k.stop is None and k.step is None):
                shape.append(n)  # the whole axis (``t[()]`` borrows take this path on every axis)
                strides.append(s)
            elif isinstance(k, (int, np.integer)) and not isinstance(k, bool):
                if not -n <= k < n:
                    raise ArgumentError(f"index {k} is out of bounds for axis {axis} of {self!r}")
                offset += (int(k) % n) * s
            elif isinstance(k, slice):
                try:
                    start, stop, step = k.indices(n)
                except (TypeError, ValueError) as exc:
                    raise ArgumentError(f"bad slice {k!r} for axis {axis} of {self!r}: {exc}") from None
                if step <= 0:
                    raise ArgumentError("slices need a positive step (negative strides are not supported)")
                shape.append(len(range(start, stop, step)))
                strides.append(s * step)
                offset += start * s if shape[-1] else 0
            else:
                raise ArgumentError(f"index {k!r} is not an int or a slice")
        return self._view(shape, strides, offset)

    # -- data ---------------------------------------------------------------------------------------------------

    def _host_array(self) -> np.ndarray[Any, Any]:
        """A zero-copy numpy view of a host tensor's elements."""
        self._check()
        return self._elements()

    def _elements(self) -> np.ndarray[Any, Any]:
        """The host elements without the handle check: a launch that owns this handle reads memory another handle
        freed meanwhile (the free is deferred until the launch is done)."""
        storage = self._storage
        if storage.host is None:
            raise BackendError(f"{self!r} lives on a GPU; use .to_numpy() to copy it to the host")
        item = self.dtype.itemsize
        lo, hi = (b - storage.address for b in self._byte_range())
        if hi == lo:  # no element: an empty allocation holds a single byte, which no item-size view can cover
            return np.empty(self._shape, numpy_dtype(self.dtype))
        flat = storage.host[lo:hi]
        strides = tuple(s * item for s in self._strides)
        return np.lib.stride_tricks.as_strided(flat.view(numpy_dtype(self.dtype)), self._shape, strides)

    @owning
    def to_numpy(self) -> np.ndarray[Any, Any]:
        """Copy the elements into a new numpy array (blocks for device tensors)."""
        storage = self._check()
        if storage.host is not None:
            return np.array(self._host_array(), copy=True)
        from tile.frontend import _device

        return _device.read(self)

    def numpy(self) -> np.ndarray[Any, Any]:
        """Alias of `to_numpy`."""
        return self.to_numpy()

    def __len__(self) -> int:
        if not self._shape:
            raise TypeError("len() of a 0-d tensor")
        return self._shape[0]

    def __iter__(self) -> Any:
        raise TypeError(f"{self!r} is not iterable on the host: read it with .to_numpy()")

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray[Any, Any]:
        out = self.to_numpy()
        return out if dtype is None else out.astype(dtype)

    def to(self, device: object) -> Tensor:
        """A new tensor on ``device`` (``"cpu"``, a GPU ordinal, ``"cuda:1"``, ``tile.Device(1)``) holding a copy.

        This tensor is only read and stays usable; the result always owns fresh memory, also on the same device.
        Between two GPUs the copy is a peer copy (``cuMemcpyPeerAsync``, direct where peer access is possible).
        Blocks until the copy is done.
        """
        from tile.frontend._placement import to

        return to(self, device)

    def copy(self) -> Tensor:
        """A new tensor owning a contiguous copy of these elements."""
        from tile.frontend._create import from_numpy

        return from_numpy(self.to_numpy(), dtype=self.dtype, device=self._check().device)

    @owning
    def free(self) -> None:
        """Free the storage now (every handle on it becomes unusable); a pending launch keeps it until done."""
        self._check().free(user_site())

    @owning
    def share(self, *, permanent: bool = False) -> Shared:
        """Move this tensor into a `Shared` handle that many launches may read at once (not moved by launches).

        With ``permanent=True`` the share can never be unshared (`Shared.unshare` raises `BorrowError`): for a
        constant a library passes to every call (a placeholder input), which its callers see in the arguments a
        launch hands back and must not be able to take away from later calls.
        """
        from tile.frontend._shared import share

        if type(permanent) is not bool:  # checked before the move; no user __bool__ runs inside the step
            raise ArgumentError(f"share(permanent=...) takes True or False, got {type(permanent).__name__}")
        return share(self, user_site(), permanent)

    @owning
    def partition(self, tile_shape: Sequence[int]) -> Partition:
        """Split this tensor into disjoint tiles for a kernel's ``Mut`` output; moves the tensor.

        Parameters
        ----------
        tile_shape
            The tile each block owns, one power-of-two extent per axis (rank 1 to 3). Shapes need not divide:
            edge tiles are padded on load and masked on store.

        Raises
        ------
        BorrowError
            Another live handle (a view, a share, a foreign import) overlaps this tensor's memory.
        """
        from tile.frontend._partition import make_partition

        return make_partition(self, tile_shape, user_site())

    # -- interop ------------------------------------------------------------------------------------------------

    def __dlpack_device__(self) -> tuple[int, int]:
        storage = self._check()
        return (1, 0) if storage.device == HOST else (2, int(storage.device.ordinal))  # type: ignore[attr-defined]  # a tile.core.Device

    @owning
    def __dlpack__(self, *, stream: Any = None, **kwargs: Any) -> Any:
        """Export through DLPack (zero-copy) read-only; the consumer's array counts as a live borrow while it exists.

        The export carries DLPack 1.0's read-only flag, so it needs a consumer that asks for DLPack 1.0 (numpy >= 2.1,
        recent torch); a legacy request gets ``BufferError``. For a writable export, `lend` the tensor.
        """
        storage = self._check()
        version = kwargs.get("max_version")
        if version is None or tuple(version) < (1, 0):
            raise BufferError(
                f"{self._describe()} is exported read-only, which only DLPack 1.0 can express, and the consumer asked "
                "for a legacy capsule: use a consumer that passes max_version=(1, 0) (numpy >= 2.1, recent torch), "
                "or .lend() the tensor for a writable export"
            )
        if storage.host is not None:
            view: Any = self._host_array()
            view.flags.writeable = False
            capsule = view.__dlpack__(**kwargs)
        else:
            from tile.frontend import _device

            view = _device.view(self, export=True)
            capsule = view.__dlpack__(stream=stream, **kwargs)
        storage.export(*self._byte_range(), f"a DLPack export of {self._describe()}", view)
        return capsule

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        """Not offered: a ``__cuda_array_interface__`` consumer keeps a raw pointer and this tensor object, never
        saying when it is done, so Tile could not hold a free or a partition off while it still reads. Raises
        `UntrackedExportError` (an `AttributeError`: ``hasattr`` is False, and libraries take the DLPack route)."""
        storage = self._check()
        where = "host tensors (CPU backend)" if storage.host is not None else "device tensors"
        raise UntrackedExportError(
            f"{self._describe()}: {where} have no __cuda_array_interface__, an export Tile does not track (a free "
            "or a partition could follow while the consumer still reads the memory); export through DLPack "
            "instead, which Tile tracks: torch.from_dlpack(t) or cupy.from_dlpack(t) "
            "(read-only), or lend() the tensor to let another library write it"
        )

    @owning
    def lend(self) -> Lent:
        """Lend this tensor to another library for writing, through DLPack; moves the tensor.

        ``__dlpack__`` exports read-only. A `Lent` exports writable views (``torch.from_dlpack(lent)``) and is
        the only handle on the memory until ``lent.reclaim()`` gives the tensor back, once those views are gone.

        Raises
        ------
        BorrowError
            Another live handle overlaps this tensor's memory, or the memory is read-only.
        """
        from tile.frontend._lend import lend

        return lend(self, user_site())


MAX_BYTES = 2**63 - 1
"""The largest byte span (and extent, stride, offset) a tensor may have: kernels index memory with 64-bit ints."""


_ALL = slice(None)


def _checked_span(
    storage: Storage, dtype: DType, shape: tuple[int, ...], strides: tuple[int, ...], offset: int
) -> tuple[int, int]:
    """The absolute bytes ``[lo, hi)`` a layout spans, computed exactly (Python ints); refuse a layout that reaches
    outside its storage or beyond the 64-bit index range, so no later size or offset arithmetic can wrap."""
    item = dtype.itemsize
    # One pass (this runs for every handle made): the signs, the reach and the largest extent or step together.
    valid = offset >= 0 and len(shape) == len(strides)
    reach, top, empty = 1, offset, False
    if valid:
        for n, s in zip(shape, strides, strict=True):
            if n < 0 or s < 0:
                valid = False
                break
            if n == 0:
                empty = True
            reach += (n - 1) * s
            if n > top or s > top:  # comparisons, not a max() call: this loop runs per axis per handle
                top = n if n > s else s
    if not valid:
        raise ArgumentError(f"invalid layout: shape {list(shape)}, strides {list(strides)}, offset {offset}")
    if empty:
        reach = 0
    lo = storage.address + offset * item
    hi = lo + reach * item
    if max(top, (offset + reach) * item) > MAX_BYTES:
        raise ArgumentError(
            f"a {dtype.name} tensor of shape {list(shape)} (strides {list(strides)}, offset {offset}) reaches beyond "
            f"the 64-bit index range kernels use ({MAX_BYTES} bytes); use smaller extents or steps"
        )
    if lo < storage.address or hi > storage.address + storage.nbytes:
        raise ArgumentError(
            f"a {dtype.name} tensor of shape {list(shape)} (strides {list(strides)}, offset {offset}) spans bytes "
            f"[{lo - storage.address}, {hi - storage.address}) of memory that holds {storage.nbytes} bytes; "
            "a view must lie inside the memory it views"
        )
    return lo, hi


def _dims(args: Sequence[int | Sequence[int]]) -> list[int]:
    """Accept ``f(2, 3)`` and ``f((2, 3))``: Python or numpy ints (not bools: ``reshape(2.5, -1)`` is refused, never
    truncated to ``reshape(2, 12)``)."""
    seq: Sequence[object] = args[0] if len(args) == 1 and isinstance(args[0], (tuple, list)) else args
    for n in seq:
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
            raise ArgumentError(f"extents and axes are ints; got {type(n).__name__} {n!r} in {tuple(seq)!r}")
    return [int(n) for n in seq]  # type: ignore[call-overload]  # each was checked to be an int above
