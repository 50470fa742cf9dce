"""Device placement: naming devices (``"cpu"``, ``1``, ``"cuda:1"``, ``tile.Device(1)``) and ``tensor.to(device)``.

Invariants: `resolve` maps every accepted spelling to `HOST` or the one ``tile.core.Device`` of that ordinal, and
refuses anything else (and a GPU ordinal that does not exist) with a typed error before any memory is touched.
`to` always returns a new tensor owning fresh memory on the target device; the source is only read (it must be a
live handle: not moved, lent, partitioned or in flight), so it stays usable and its memory is never shared.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import TYPE_CHECKING

import numpy as np

from tile.bindings import TileError
from tile.frontend._errors import ArgumentError, BackendError
from tile.frontend._storage import HOST, Storage, owning

if TYPE_CHECKING:
    from tile.frontend._tensor import Tensor

__all__ = ["device_name", "resolve", "to"]

_GPU_NAMES = ("gpu", "cuda")
_NP_INTS = frozenset(np.dtype(c).type for c in "bBhHiIlLqQ")


def resolve(device: object, default: Hashable | None = None) -> Hashable:
    """The device ``device`` names: `HOST` for ``"cpu"``/``"host"``, else a ``tile.core.Device``.

    ``None`` gives ``default``; ``"gpu"``/``"cuda"`` is GPU 0; an int ``i`` or ``"cuda:i"`` is GPU ``i``; a
    ``tile.core.Device`` is itself.

    Raises
    ------
    ArgumentError
        For anything else (a negative ordinal, an unknown name).
    BackendError
        For a GPU that is not visible here (no driver, or an ordinal beyond the device count).
    """
    from tile import core

    if device is None and default is not None:
        return default
    kind = type(device)  # not isinstance, and no == on the object: its class's code must not run (nor lie)
    if kind is core.Device:
        return device
    if device is HOST or (kind is str and device in ("cpu", "host")):
        return HOST
    ordinal: int | None = None
    if isinstance(device, int) and issubclass(kind, int) and not issubclass(kind, bool):
        ordinal = int.__index__(device)  # the int it is, not what a subclass's __int__ says
    elif isinstance(device, np.integer) and kind in _NP_INTS:
        ordinal = int(device)
    elif isinstance(device, str) and kind is str and device in _GPU_NAMES:
        ordinal = 0
    elif isinstance(device, str) and kind is str and device.startswith("cuda:") and device[5:].isdigit():
        ordinal = int(device[5:])
    if ordinal is None or ordinal < 0:
        raise ArgumentError(
            f"{device!r} is not a device: use 'cpu', a GPU ordinal (0, 1, ...), 'cuda:1' or tile.Device(1)"
        )
    try:
        return core.Device(ordinal)
    except TileError as exc:
        raise BackendError(
            f"GPU {ordinal} is not available here ({exc}); pick an ordinal below tile.Device.count(), or 'cpu'"
        ) from None


def device_name(device: object) -> str:
    """``"cpu"`` or ``"cuda:<ordinal>"``: how messages name a device."""
    ordinal = getattr(device, "ordinal", None)
    return f"cuda:{ordinal}" if ordinal is not None else str(device)


@owning
def to(tensor: Tensor, device: object) -> Tensor:
    """A new tensor on ``device`` holding a copy of ``tensor``'s elements (see `Tensor.to`)."""
    from tile.frontend import _device
    from tile.frontend._site import user_site
    from tile.frontend._tensor import Tensor

    storage = tensor._check()
    where = resolve(device)
    if where == HOST:
        array = np.array(tensor._host_array(), copy=True) if storage.host is not None else _device.read(tensor)
        out = Storage.host_owned(array.nbytes)
        if array.nbytes:
            assert out.host is not None
            out.host[: array.nbytes] = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
        return Tensor._make(out, tensor.dtype, tensor.shape, site=user_site())
    if storage.host is not None or not tensor.is_contiguous:
        fresh = _device.upload(tensor.to_numpy(), where)  # strided device views go through the host
    else:
        fresh = _device.copy_to(tensor, where)  # device to device: on one GPU, or a peer copy between two
    return Tensor._make(fresh, tensor.dtype, tensor.shape, site=user_site())
