"""Parameter annotations of kernel signatures: ``Tensor[dt, shape]``, ``Mut[...]``, ``Const[...]``, ``Ptr[dt]``.

Invariants: subscripting builds an immutable, hashable annotation value that the compiler inspects; nothing here
holds data at run time. Shape items are ints (static extent), -1 (dynamic) or strings (const generics).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tile.compiler._types import DType

__all__ = ["Const", "ConstAnnotation", "Mut", "MutAnnotation", "Ptr", "PtrAnnotation", "Tensor", "TensorAnnotation"]

ShapeItem = int | str


def _shape_items(shape: object) -> tuple[ShapeItem, ...]:
    items = shape if isinstance(shape, (tuple, list)) else (shape,)
    for item in items:
        ok = (isinstance(item, str) and item.isidentifier()) or (type(item) is int and (item > 0 or item == -1))
        if not ok:
            raise TypeError(f"tensor shape items are positive ints, -1 (dynamic) or const-generic names; got {item!r}")
    return tuple(items)


@dataclass(frozen=True)
class TensorAnnotation:
    """``Tensor[dtype, shape]``: a read-only tensor; shape items are ints, -1 or generic names; the dtype may be a
    generic name too (bound from the specialization, usable as a dtype in the body)."""

    dtype: DType | str
    shape: tuple[ShapeItem, ...]


@dataclass(frozen=True)
class MutAnnotation:
    """``Mut[Tensor[dtype, tile_shape]]``: an output partition; the shape is the tile each block owns."""

    tensor: TensorAnnotation


@dataclass(frozen=True)
class ConstAnnotation:
    """``Const[int]`` (or float/bool): a compile-time parameter, one compiled kernel per value."""

    kind: type


@dataclass(frozen=True)
class PtrAnnotation:
    """``Ptr[dtype]``: a raw device pointer (only in kernels marked unchecked)."""

    dtype: DType


class _Subscript:
    """An annotation factory: ``Name[...]`` builds the annotation value (typed for checkers as a ``__getitem__``)."""

    def __init__(self, name: str, doc: str) -> None:
        self._name = name
        self.__doc__ = doc

    def __repr__(self) -> str:
        return self._name


class _TensorFactory(_Subscript):
    def __getitem__(self, item: Any) -> TensorAnnotation:
        ok = isinstance(item, tuple) and len(item) == 2
        if not ok or not (isinstance(item[0], DType) or (isinstance(item[0], str) and item[0].isidentifier())):
            raise TypeError(
                'write Tensor[dtype, shape], e.g. Tensor[f32, -1], Tensor[f16, ("BM", "BK")] or a dtype '
                'generic Tensor["T", -1]'
            )
        return TensorAnnotation(item[0], _shape_items(item[1]))


class _MutFactory(_Subscript):
    def __getitem__(self, item: Any) -> MutAnnotation:
        if not isinstance(item, TensorAnnotation):
            raise TypeError("write Mut[Tensor[dtype, tile_shape]]")
        if -1 in item.shape:
            raise TypeError("the shape of a Mut tensor is its tile shape: use ints or const-generic names, not -1")
        return MutAnnotation(item)


class _ConstFactory(_Subscript):
    def __getitem__(self, item: Any) -> ConstAnnotation:
        if item not in (int, float, bool):
            raise TypeError("write Const[int], Const[float] or Const[bool]")
        return ConstAnnotation(item)


class _PtrFactory(_Subscript):
    def __getitem__(self, item: Any) -> PtrAnnotation:
        if not isinstance(item, DType):
            raise TypeError("write Ptr[dtype], e.g. Ptr[f32]")
        return PtrAnnotation(item)


Tensor = _TensorFactory("Tensor", 'Annotation of a tensor parameter: ``Tensor[f32, (-1, "BK")]``.')
Mut = _MutFactory("Mut", 'Annotation of an output partition: ``Mut[Tensor[f32, ("BM", "BN")]]``.')
Const = _ConstFactory("Const", "Annotation of a compile-time parameter: ``Const[int]``, float or bool.")
Ptr = _PtrFactory("Ptr", "Annotation of a raw device pointer parameter: ``Ptr[f32]`` (unchecked only).")
