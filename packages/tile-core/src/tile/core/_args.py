"""Kernel argument kinds and packing: Python values to the typed scalars the launcher copies into the parameter block.

Invariants: each kind is one table entry (size, numpy carrier, range); values are converted and range-checked
once, at packing, so a prepared argument block needs no per-launch work; pointers come only from live Tile
memory of the launch's device (or a non-zero int address, only with ``unchecked=True``); an argument list is
checked against the kernel's parameter count and sizes before anything is launched. Pure numpy: testable without a GPU.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import ml_dtypes
import numpy as np

from tile.core._buffer import DeviceBuffer
from tile.core._errors import LaunchArgumentError, NullHandleError, WrongDeviceError
from tile.core._layout import as_index
from tile.core._nocopy import Uncopyable
from tile.core._view import DeviceView

if TYPE_CHECKING:
    from tile.core._context import Device

__all__ = ["KINDS", "ArgKind", "PackedArgs", "infer_kind", "pack_args", "param_layout"]


def _integer(bits: int, carrier: type[np.integer[Any]]) -> Callable[[Any], Any]:
    low, high = -(2 ** (bits - 1)), 2 ** (bits - 1)

    def convert(value: Any) -> Any:
        if type(value) is int and low <= value < high:  # the common case, without the checks below
            return carrier(value)
        number = as_index(value)  # an exact int: what is checked is what is packed
        if number is None:
            raise LaunchArgumentError(f"expected an integer for an i{bits} parameter, got {value!r}")
        if not low <= number < high:
            raise LaunchArgumentError(f"{number} does not fit an i{bits} parameter ([{low}, {high}))")
        return carrier(number)

    return convert


def _unsigned(bits: int, carrier: type[np.unsignedinteger[Any]]) -> Callable[[Any], Any]:
    high = 2**bits

    def convert(value: Any) -> Any:
        if type(value) is int and 0 <= value < high:  # the common case, without the checks below
            return carrier(value)
        number = as_index(value)  # an exact int: what is checked is what is packed
        if number is None:
            raise LaunchArgumentError(f"expected an integer for a u{bits} parameter, got {value!r}")
        if not 0 <= number < high:
            raise LaunchArgumentError(f"{number} does not fit a u{bits} parameter ([0, {high}))")
        return carrier(number)

    return convert


def _floating(carrier: Any, name: str) -> Callable[[Any], Any]:
    def convert(value: Any) -> Any:
        if type(value) is float:  # the common case, without the checks below
            return carrier(value)
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise LaunchArgumentError(f"expected a number for an {name} parameter, got {value!r}")
        if isinstance(value, (int, np.integer)):  # through float: ml_dtypes' bfloat16 takes no int of 2**63 or more
            try:
                value = float(value)
            except OverflowError:
                bits = int(value).bit_length()
                raise LaunchArgumentError(f"an integer of {bits} bits fits no float ({name} parameter)") from None
        return carrier(value)

    return convert


def _bf16(value: Any) -> Any:
    # numpy has no bfloat16 scalar of its own: the same 2 bytes travel as a uint16 bit pattern.
    return _floating(ml_dtypes.bfloat16, "bf16")(value).view(np.uint16)


@dataclass(frozen=True)
class ArgKind:
    """One parameter kind: its name, size in bytes and converter to the launcher's scalar."""

    name: str
    size: int
    convert: Callable[[Any], Any]


KINDS: dict[str, ArgKind] = {
    kind.name: kind
    for kind in (
        ArgKind("ptr", 8, lambda value: value),  # resolved against the device in _pointer(); never read-only memory
        ArgKind("cptr", 8, lambda value: value),  # a pointer the kernel only reads (C's ``const T*``): any view
        ArgKind("i8", 1, _integer(8, np.int8)),  # narrow integers are as narrow in the kernel's parameter block
        ArgKind("i16", 2, _integer(16, np.int16)),
        ArgKind("u8", 1, _unsigned(8, np.uint8)),
        ArgKind("u16", 2, _unsigned(16, np.uint16)),
        ArgKind("i32", 4, _integer(32, np.int32)),
        ArgKind("i64", 8, _integer(64, np.int64)),
        ArgKind("u32", 4, _unsigned(32, np.uint32)),  # the same cells as i32/i64: the upper half of the range too
        ArgKind("u64", 8, _unsigned(64, np.uint64)),
        ArgKind("f16", 2, _floating(np.float16, "f16")),
        ArgKind("bf16", 2, _bf16),
        ArgKind("f32", 4, _floating(np.float32, "f32")),
        ArgKind("f64", 8, _floating(np.float64, "f64")),
    )
}
# The pointer kinds: "ptr" (the kernel may write through it: refused for a read-only view) and "cptr" (read only).
POINTER_KINDS = frozenset({"ptr", "cptr"})
_SCALAR_KINDS = {
    np.dtype(np.int8): "i8",
    np.dtype(np.int16): "i16",
    np.dtype(np.uint8): "u8",
    np.dtype(np.uint16): "u16",
    np.dtype(np.int32): "i32",
    np.dtype(np.int64): "i64",
    np.dtype(np.uint32): "u32",
    np.dtype(np.uint64): "u64",
    np.dtype(np.float16): "f16",
    np.dtype(ml_dtypes.bfloat16): "bf16",
    np.dtype(np.float32): "f32",
    np.dtype(np.float64): "f64",
}


def _readonly(what: str, how: str) -> LaunchArgumentError:
    return LaunchArgumentError(
        f'{what} is read-only (its producer lent it for reading) but a "ptr" parameter may be written through: '
        f"{how}declare the parameter \"cptr\" (e.g. signature=('cptr', 'ptr', 'i32')) if the kernel only reads it, "
        "or pass a writable view"
    )


def infer_kind(value: Any) -> str:
    """The kind of an argument given without a signature: Tile memory is ``ptr``, numpy scalars keep their type.

    A read-only view is refused: nothing tells whether the kernel writes through the parameter, so only a signature
    declaring it ``"cptr"`` may pass it."""
    if isinstance(value, DeviceBuffer):
        return "ptr"
    if isinstance(value, DeviceView):
        if value.readonly:
            raise _readonly(f"{value!r}", 'a kind inferred from a view is "ptr": pass a signature and ')
        return "ptr"
    if isinstance(value, np.generic) and value.dtype in _SCALAR_KINDS:
        return _SCALAR_KINDS[value.dtype]
    raise LaunchArgumentError(
        f"cannot tell the parameter type of {value!r} ({type(value).__name__}): pass a signature "
        "(e.g. signature=('ptr', 'i32', 'f32')) or typed scalars such as np.int32(n)"
    )


def param_layout(kinds: Sequence[str]) -> tuple[tuple[int, int], ...]:
    """``(offset, size)`` of each parameter in a CUDA parameter block (natural alignment)."""
    layout, offset = [], 0
    for name in kinds:
        size = KINDS[name].size
        offset = (offset + size - 1) // size * size
        layout.append((offset, size))
        offset += size
    return tuple(layout)


# (kinds, kernel layout) pairs already found compatible: the check is pure, so it runs once per pair.
_CHECKED_LAYOUTS: set[tuple[tuple[str, ...], tuple[tuple[int, int], ...]]] = set()
_CHECKED_KINDS: set[tuple[str, ...]] = set()
# The latest (kinds, layout) pair that passed: a loop launching one kernel compares its kinds with it (no hashing of the
# nested layout per launch). It holds the layout object, so an identity test cannot match a new layout at its address.
_LAST_CHECKED: list[tuple[tuple[str, ...], object]] = [((), object())]


@dataclass(frozen=True)
class PackedArgs(Uncopyable):
    """Converted arguments: the scalars for the launcher and the Tile buffers they point into."""

    _copy_fix = "pack the arguments again with tile.core.pack_args(...)"

    kinds: tuple[str, ...]
    values: tuple[Any, ...]
    buffers: tuple[DeviceBuffer, ...]
    views: tuple[DeviceView, ...] = ()  # views of memory no Tile buffer owns: they keep their producers alive


def _pointer(
    value: Any, device: Device | None, index: int, unchecked: bool, kind: str
) -> tuple[int, DeviceBuffer | DeviceView | None]:
    if isinstance(value, (DeviceBuffer, DeviceView)):
        if device is not None and value.device is not device:
            raise WrongDeviceError(
                f"argument {index} lives on device {value.device.ordinal} but the launch is on device "
                f"{device.ordinal}: copy it over or launch on its device"
            )
        if kind != "cptr" and isinstance(value, DeviceView) and value.readonly:  # (a view's readonly is immutable)
            raise _readonly(f"argument {index} ({value!r})", "")
        owner = value if isinstance(value, DeviceBuffer) else (value.buffer if value.buffer is not None else value)
        return value.ptr, owner
    address = as_index(value)
    if address is not None:
        if unchecked is not True:
            raise LaunchArgumentError(
                f"argument {index} is the raw address {value!r}, which no check can vouch for: pass the DeviceBuffer "
                "or DeviceView it lies in (tile.core.borrow(obj) for a foreign array), or opt out explicitly with "
                "unchecked=True"
            )
        if address == 0:
            raise NullHandleError(f"argument {index} is a null pointer: pass a DeviceBuffer or a live address")
        return address, None
    raise LaunchArgumentError(f"argument {index} must be a DeviceBuffer, DeviceView or address, got {value!r}")


def pack_args(
    args: Sequence[Any],
    signature: Sequence[str] | None = None,
    *,
    device: Device | None = None,
    expected: tuple[tuple[int, int], ...] | None = None,
    unchecked: bool = False,
) -> PackedArgs:
    """Convert and check kernel arguments.

    Parameters
    ----------
    args : sequence
        The values, in parameter order.
    signature : sequence of str, optional
        A kind per argument (see ``KINDS``); inferred from the values when omitted.
    device : Device, optional
        Pointers must live on this device.
    expected : sequence of (offset, size), optional
        The kernel's parameter layout; count and sizes must match.
    unchecked : bool
        Let ``"ptr"`` and ``"cptr"`` arguments be int addresses (trusted as given, read-only or not); without it they
        are `LaunchArgumentError`.

    A read-only `DeviceView` (``view.readonly``) is accepted only for a ``"cptr"`` parameter (`LaunchArgumentError`
    for a ``"ptr"`` one, and when the kinds are inferred).
    """
    args, kinds = _checked_kinds(args, signature, expected)
    values, buffers, views = [], [], []
    for index, (kind, value) in enumerate(zip(kinds, args, strict=True)):
        if kind in POINTER_KINDS:
            address, owner = _pointer(value, device, index, unchecked, kind)
            values.append(address)
            if isinstance(owner, DeviceView):
                views.append(owner)
            elif owner is not None and owner not in buffers:
                buffers.append(owner)
        else:
            values.append(KINDS[kind].convert(value))
    return PackedArgs(kinds, tuple(values), tuple(buffers), tuple(views))


def _checked_kinds(
    args: Sequence[Any], signature: Sequence[str] | None, expected: tuple[tuple[int, int], ...] | None
) -> tuple[tuple[Any, ...], tuple[str, ...]]:
    """The arguments as a tuple and their kinds, checked against each other and the kernel's layout (once per pair)."""
    args = tuple(args)
    kinds = _kind_names(signature) if signature is not None else tuple(infer_kind(v) for v in args)
    last = _LAST_CHECKED[0]
    fresh = not (expected is last[1] and kinds == last[0])  # else a launch like the previous one: its checks passed
    unknown = [k for k in kinds if k not in KINDS] if fresh and kinds not in _CHECKED_KINDS else []
    if unknown:
        raise LaunchArgumentError(f"unknown argument kind(s) {unknown}: use one of {sorted(KINDS)}")
    if len(kinds) != len(args):
        raise LaunchArgumentError(f"the signature has {len(kinds)} kinds but {len(args)} arguments were given")
    if fresh:
        _CHECKED_KINDS.add(kinds)
        if expected is not None:
            if (kinds, expected) not in _CHECKED_LAYOUTS:
                _check_layout(kinds, tuple(expected))
                _CHECKED_LAYOUTS.add((kinds, tuple(expected)))
            _LAST_CHECKED[0] = (kinds, expected)
    return args, kinds


# Per kinds tuple: for each argument, None for a pointer, else the [low, high) range in which an exact int is packed as
# is (an empty range for float kinds: they always convert). Built once per kinds tuple, read per launch.
_FAST: dict[tuple[str, ...], tuple[tuple[int, int] | None, ...]] = {}


def _fast_ranges(kinds: tuple[str, ...]) -> tuple[tuple[int, int] | None, ...]:
    ranges: list[tuple[int, int] | None] = []
    for kind in kinds:
        bits = int(kind[1:]) if kind[0] in "iu" else 0
        if kind in POINTER_KINDS:
            ranges.append(None)
        elif kind[0] == "i":
            ranges.append((-(2 ** (bits - 1)), 2 ** (bits - 1)))
        elif kind[0] == "u":
            ranges.append((0, 2**bits))
        else:
            ranges.append((0, 0))
    result = _FAST[kinds] = tuple(ranges)
    return result


def pack_launch(
    args: Sequence[Any],
    signature: Sequence[str] | None,
    *,
    device: Device | None,
    expected: tuple[tuple[int, int], ...] | None,
    unchecked: bool = False,
) -> tuple[tuple[str, ...], list[Any], list[DeviceBuffer], list[DeviceView]]:
    """`pack_args` for a launch enqueued at once: the same checks, in the same order, raising the same errors, but no
    `PackedArgs` record, and an exact int in its kind's range is kept as is (``struct`` packs it into the same bytes as
    its numpy carrier). Returns the kinds, the values, the buffers (each once) and the foreign views."""
    args, kinds = _checked_kinds(args, signature, expected)
    ranges = _FAST.get(kinds) or _fast_ranges(kinds)
    values: list[Any] = []
    buffers: list[DeviceBuffer] = []
    views: list[DeviceView] = []
    for index, value in enumerate(args):
        bounds = ranges[index]
        if bounds is None:
            if type(value) is DeviceBuffer and (
                value.device is device or device is None
            ):  # final class: the exact test is isinstance
                values.append(value.ptr)  # raises once freed, as `_pointer` does
                if value not in buffers:
                    buffers.append(value)
                continue
            address, owner = _pointer(value, device, index, unchecked, kinds[index])
            values.append(address)
            if isinstance(owner, DeviceView):
                views.append(owner)
            elif owner is not None and owner not in buffers:
                buffers.append(owner)
        elif type(value) is int and bounds[0] <= value < bounds[1]:
            values.append(value)
        else:
            values.append(KINDS[kinds[index]].convert(value))
    return kinds, values, buffers, views


# The latest signature that was a tuple of exact strs: a tuple cannot change, so the same object needs no second look
# (held here, so no other tuple can take its address while it is compared by identity).
_LAST_SIGNATURE: list[object] = [None]


def _kind_names(signature: Sequence[str]) -> tuple[str, ...]:
    """The signature as exact strs: a str subclass could hash and compare as one kind and be packed as another."""
    if signature is _LAST_SIGNATURE[0]:
        return signature  # type: ignore[return-value]  # an exact tuple of exact strs: checked when it was stored
    kinds = tuple(signature)
    if all(type(kind) is str for kind in kinds):
        if type(signature) is tuple:
            _LAST_SIGNATURE[0] = signature
        return kinds
    if isinstance(signature, str) or not all(isinstance(kind, str) for kind in kinds):
        raise LaunchArgumentError(
            f"signature {signature!r} must be a sequence of kind names (str): e.g. ('ptr', 'i32')"
        )
    return tuple(str.__str__(kind) for kind in kinds)


def _check_layout(kinds: tuple[str, ...], expected: tuple[tuple[int, int], ...]) -> None:
    if len(kinds) != len(expected):
        raise LaunchArgumentError(
            f"the kernel takes {len(expected)} parameters but {len(kinds)} arguments were given: pass one argument "
            "per kernel parameter (arrays often expand to pointer, shape and stride parameters)"
        )
    for index, ((_, want), (_, got)) in enumerate(zip(expected, param_layout(kinds), strict=True)):
        if want != got:
            raise LaunchArgumentError(
                f"argument {index} is {kinds[index]} ({got} bytes) but the kernel's parameter {index} has {want} "
                "bytes: fix the signature"
            )
