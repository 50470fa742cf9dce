"""Typing rules of the verifier for views: the ``make_*_view`` ops and every access through a view.

`VIEW_ACCESS` says, per access op, where the accessed tile is, which view kinds the op takes and whether all
scalar indices must share one type; one rule (`_access`) checks every row. The rules follow tileiras 13.5:

- a view of tile rank R takes R integer indices (i1/i8/i16/i32/i64 tiles); the accessed tile is
  ``tile<tile_shape x element>``; ``inbounds`` has one flag per index;
- partition and strided views take scalar indices; a gather/scatter view takes, at ``sparse_dim``, a 1-D i32
  or i64 index tile as long as the tile's ``sparse_dim`` extent, and scalars elsewhere;
- f4E2M1FN views need exactly one static unit stride (the packing dimension), and a gather/scatter view may
  not gather along it; f16/bf16 multimem views need exactly one static unit stride too;
- a strided view has one positive traversal stride per dim; a gather/scatter view has the tensor's rank and a
  ``sparse_dim`` inside it; nan/inf/neg_zero padding needs a float element type.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tile.ir._ir import Operation
from tile.ir._types import (
    GatherScatterViewType,
    Padding,
    PartitionViewType,
    StridedViewType,
    TensorViewType,
    TileType,
    Type,
    bf16,
    f4E2M1FN,
    f16,
    i1,
    i8,
    i16,
    i32,
    i64,
)

__all__ = ["VIEW_RULES"]

_INDEX_ELEMENTS = (i1, i8, i16, i32, i64)
_GATHER_ELEMENTS = (i32, i64)  # narrower index tiles pass tileirdisasm but tileiras 13.5 cannot compile them
_FLOAT_PADDING = (Padding.NEG_ZERO, Padding.NAN, Padding.POS_INF, Padding.NEG_INF)
_ALL_VIEWS = (PartitionViewType, StridedViewType, GatherScatterViewType)
_KIND_NAMES = {PartitionViewType: "partition_view", StridedViewType: "strided_view"}
_KIND_NAMES[GatherScatterViewType] = "gather_scatter_view"
_View = PartitionViewType | StridedViewType | GatherScatterViewType


@dataclass(frozen=True)
class _Access:
    """How one op accesses a view: `tile` is ``result`` or the operand group holding the stored tile."""

    tile: str
    views: tuple[type, ...] = _ALL_VIEWS
    uniform_indices: bool = True  # all scalar indices of one type (atomic_red_view_tko mixes them freely)
    multimem: bool = False


VIEW_ACCESS: dict[str, _Access] = {
    "load_view_tko": _Access("result"),
    "store_view_tko": _Access("tile"),
    "atomic_red_view_tko": _Access("value", (PartitionViewType, StridedViewType), uniform_indices=False),
    "multimem_load_reduce_view_tko": _Access("result", (PartitionViewType,), multimem=True),
    "multimem_reduce_view_tko": _Access("tile", (PartitionViewType,), multimem=True),
    "multimem_store_view_tko": _Access("tile", (PartitionViewType,), multimem=True),
}


def _access(op: Operation) -> list[str]:
    spec = VIEW_ACCESS[op.name]
    view = op.operands_named("view")[0].type
    if not isinstance(view, _ALL_VIEWS):
        return []  # reported by the generic view-operand check
    if not isinstance(view, spec.views):
        allowed = " or ".join(_KIND_NAMES[k] for k in spec.views)
        return [f"{op.name} does not take a {_KIND_NAMES[type(view)]}; use a {allowed}"]
    index = op.operands_named("index")
    tile = op.results[0].type if spec.tile == "result" else op.operands_named(spec.tile)[0].type
    want = TileType(view.tile_shape, view.tensor_view.element)
    problems = [] if tile == want else [f"tile type {tile} does not match the view's tile {want}"]
    problems += _index_problems(view, [v.type for v in index], uniform=spec.uniform_indices)
    inbounds = op.attributes.get("inbounds", ())
    if isinstance(inbounds, tuple) and inbounds and len(inbounds) != len(index):
        problems.append(f"inbounds needs one flag per index ({len(index)}), got {len(inbounds)}")
    problems += _packing_problems(view)
    if spec.multimem and view.tensor_view.element in (f16, bf16) and len(_unit_dims(view.tensor_view)) != 1:
        got = len(_unit_dims(view.tensor_view))
        problems.append(f"f16/bf16 multimem views need exactly one static unit stride in {view.tensor_view}; got {got}")
    return problems


def _index_problems(view: _View, types: list[Type], *, uniform: bool) -> list[str]:
    rank = len(view.tile_shape)
    if len(types) != rank:
        return [f"view of rank {rank} needs {rank} indices, got {len(types)}"]
    sparse = view.sparse_dim if isinstance(view, GatherScatterViewType) else None
    problems = []
    for i, t in enumerate(types):
        if not isinstance(t, TileType) or t.element not in _INDEX_ELEMENTS:
            problems.append(f"index {i} must be a tile of i1, i8, i16, i32 or i64, got {t}")
        elif i == sparse and t.shape != (view.tile_shape[i],):
            problems.append(
                f"index {i} (the gather/scatter view's sparse_dim) must be a 1-D index tile of "
                f"{view.tile_shape[i]} elements (the tile's extent there), got {t}"
            )
        elif i == sparse and t.element not in _GATHER_ELEMENTS:
            problems.append(
                f"index {i} (the gather/scatter index tile) must hold i32 or i64: tileiras 13.5 fails to compile "
                f'{t} ("failed to compile Tile IR program", no detail)'
            )
        elif i != sparse and t.rank:
            problems.append(f"index {i} must be a scalar tile, got {t}")
    scalars = [t for i, t in enumerate(types) if i != sparse]
    if uniform and not problems and any(t != scalars[0] for t in scalars):
        problems.append(f"scalar indices must share one type, got {', '.join(map(str, scalars))}")
    return problems


def _unit_dims(tv: TensorViewType) -> list[int]:
    return [d for d, stride in enumerate(tv.strides) if stride == 1]


def _packing_problems(view: _View) -> list[str]:
    """f4 elements are packed two per byte along the one dim whose stride is statically 1."""
    tv = view.tensor_view
    if tv.element != f4E2M1FN:
        return []
    units = _unit_dims(tv)
    if len(units) != 1:
        return [f"an f4 view needs exactly one static unit stride (its packing dim) in {tv}; got {len(units)}"]
    if isinstance(view, GatherScatterViewType) and view.sparse_dim == units[0]:
        return [f"an f4 gather/scatter view cannot gather along its packing dim {units[0]}; gather another dim"]
    return []


def _make_view(op: Operation) -> list[str]:
    view = op.results[0].type
    if not isinstance(view, _ALL_VIEWS):
        return [f"result must be a view type, got {view}"]
    problems = [] if op.operands[0].type == view.tensor_view else [f"operand must be {view.tensor_view}"]
    rank = view.tensor_view.rank
    if isinstance(view, GatherScatterViewType):
        if len(view.tile_shape) != rank or not rank:
            problems.append(f"a gather/scatter view's tile needs the tensor view's rank {rank}, got {view.tile_shape}")
        if not 0 <= view.sparse_dim < rank:
            problems.append(f"sparse_dim {view.sparse_dim} is outside the {rank} dims of the tensor view")
    elif len(view.tile_shape) != rank or sorted(view.dim_map) != list(range(rank)):
        problems.append(f"tile shape and dim_map must cover the {rank} dims of the tensor view")
    if isinstance(view, StridedViewType):
        strides = view.traversal_strides
        if len(strides) != len(view.tile_shape) or any(s <= 0 for s in strides):
            problems.append(f"a strided view needs one positive traversal stride per tile dim, got {list(strides)}")
    if view.padding in _FLOAT_PADDING and not view.tensor_view.element.is_float:
        problems.append(f"padding {view.padding} needs a float element type, got {view.tensor_view.element}")
    return problems


VIEW_RULES: dict[str, Callable[[Operation], list[str]]] = {
    **dict.fromkeys(VIEW_ACCESS, _access),
    "make_partition_view": _make_view,
    "make_strided_view": _make_view,
    "make_gather_scatter_view": _make_view,
}
