"""Typing rules of the verifier for tensor views, pointers, memory and atomic ops, tokens and shape queries.

Each rule returns a list of problems; `_verify_types.type_problems` dispatches to them by op name (views and
accesses through them are in `_verify_views`).
"""

from __future__ import annotations

from collections.abc import Callable

from tile.ir._format_text import assert_format_texts, format_text_problem
from tile.ir._ir import Operation, Value
from tile.ir._types import (
    PointerType,
    ScalarType,
    TensorViewType,
    TileType,
    TokenType,
    Type,
    i1,
    i8,
    i32,
    i64,
    scalar,
)

__all__ = ["MEMORY_RULES", "token_problems"]


def _scalar_int(t: Type) -> bool:
    return isinstance(t, TileType) and t.rank == 0 and isinstance(t.element, ScalarType) and t.element.is_int


def _pointee(t: Type) -> ScalarType | None:
    if isinstance(t, TileType) and isinstance(t.element, PointerType):
        return t.element.pointee
    return None


def token_problems(op: Operation) -> list[str]:
    problems = []
    for i, spec in enumerate(op.segments):
        group = op.operand_group(i)
        if spec and _group_name(op, i) == "token" and not isinstance(group[0].type, TokenType):
            problems.append(f"token operand must be a token, got {group[0].type}")
    return problems


def _group_name(op: Operation, index: int) -> str:
    from tile.ir.ops import CATALOG

    return CATALOG[op.name].operands[index].name


def _make_tensor_view(op: Operation) -> list[str]:
    tv = op.results[0].type
    base, shape, strides = op.operand_group(0), op.operand_group(1), op.operand_group(2)
    if not isinstance(tv, TensorViewType):
        return [f"result must be a tensor_view, got {tv}"]
    problems = []
    base_type = base[0].type
    if _pointee(base_type) != tv.element or not isinstance(base_type, TileType) or base_type.rank:
        problems.append(f"base must be tile<ptr<{tv.element}>>, got {base_type}")
    if len(shape) != sum(d is None for d in tv.shape) or len(strides) != sum(s is None for s in tv.strides):
        problems.append("give one shape operand per '?' size and one stride operand per '?' stride of the result")
    if any(not _scalar_int(v.type) for v in shape + strides):
        problems.append("dynamic sizes and strides must be scalar integer tiles")
    elif len({v.type for v in shape + strides}) > 1:
        kinds = ", ".join(str(v.type) for v in shape + strides)
        problems.append(f"dynamic sizes and strides must all have one type, got {kinds}")
    if any(d is not None and d <= 0 for d in tv.shape + tv.strides):
        problems.append(f"static sizes and strides must be positive, got {tv}")
    return problems


def _i32x3(op: Operation) -> list[str]:
    bad = [r.type for r in op.results if r.type != scalar(i32)]
    return [f"results must be tile<i32>, got {bad[0]}"] if bad else []


def _ptr_access(op: Operation) -> list[str]:
    names = {"load_ptr_tko": (0, None), "store_ptr_tko": (0, 1), "atomic_rmw_tko": (0, 1), "atomic_cas_tko": (0, 2)}
    ptr_index, value_index = names[op.name]
    pointers = op.operands[ptr_index].type
    pointee = _pointee(pointers)
    if pointee is None or not isinstance(pointers, TileType):
        return [f"pointers must be a tile of pointers, got {pointers}"]
    want = pointers.with_element(pointee)
    values = [op.results[0].type] if value_index is None else [op.operands[i].type for i in range(1, value_index + 1)]
    if op.name.startswith("atomic"):
        values.append(op.results[0].type)
    problems = [f"value type {t} must be {want}" for t in values if t != want]
    mask = _optional(op, "mask")
    if mask is not None and mask.type != pointers.with_element(i1):
        problems.append(f"mask must be {pointers.with_element(i1)}, got {mask.type}")
    padding = _optional(op, "paddingValue")
    if padding is not None and padding.type != want:
        problems.append(f"padding value must be {want}, got {padding.type}")
    return problems + token_problems(op)


def _optional(op: Operation, name: str) -> Value | None:
    from tile.ir.ops import CATALOG

    names = [spec.name for spec in CATALOG[op.name].operands]
    if name not in names:
        return None
    group = op.operand_group(names.index(name))
    return group[0] if group else None


def _offset(op: Operation) -> list[str]:
    pointers, offsets = (v.type for v in op.operands)
    if _pointee(pointers) is None or not isinstance(pointers, TileType) or not isinstance(offsets, TileType):
        return [f"offset takes a pointer tile and an integer tile, got {pointers} and {offsets}"]
    problems = [] if op.results[0].type == pointers else [f"result must be {pointers}"]
    if offsets.shape != pointers.shape or not isinstance(offsets.element, ScalarType) or offsets.element.is_float:
        problems.append(f"offsets must be an integer tile of shape {pointers.shape}, got {offsets}")
    return problems


def _shape_query(op: Operation) -> list[str]:
    src = op.operands[0].type
    rank = src.rank if isinstance(src, TensorViewType) else len(getattr(src, "tile_shape", ()))
    problems = [] if len(op.results) == rank else [f"needs {rank} results (one per dim), got {len(op.results)}"]
    bad = [r.type for r in op.results if not _scalar_int(r.type)]
    return problems + [f"results must be scalar integer tiles, got {t}" for t in bad]


def _cat(op: Operation) -> list[str]:
    a, b = (v.type for v in op.operands)
    res, dim = op.results[0].type, op.attributes.get("dim")
    if not all(isinstance(t, TileType) for t in (a, b, res)) or not isinstance(dim, int):
        return ["cat takes two tiles"]
    assert isinstance(a, TileType)
    assert isinstance(b, TileType)
    if a.rank != b.rank or a.element != b.element or not 0 <= dim < a.rank:
        return [f"cat needs tiles of one rank and element type and a valid dim, got {a}, {b}, dim={dim}"]
    shape = list(a.shape)
    shape[dim] += b.shape[dim]
    same_rest = all(x == y for i, (x, y) in enumerate(zip(a.shape, b.shape, strict=True)) if i != dim)
    return (
        [] if same_rest and res == a.with_shape(tuple(shape)) else [f"cat result must be {a.with_shape(tuple(shape))}"]
    )


def _iota(op: Operation) -> list[str]:
    t = op.results[0].type
    ok = isinstance(t, TileType) and t.rank == 1 and isinstance(t.element, ScalarType) and t.element.is_int
    if not ok:
        return [f"iota yields a 1-D integer tile, got {t}"]
    assert isinstance(t, TileType)
    assert isinstance(t.element, ScalarType)
    if t.shape[0] > 2**t.element.bits:
        return [f"iota of {t.shape[0]} elements does not fit {t.element}"]
    return []


def _assert(op: Operation) -> list[str]:
    t = op.operands[0].type
    ok = isinstance(t, TileType) and t.element == i1
    problems = [] if ok else [f"assert condition must be an i1 tile, got {t}"]
    texts = (format_text_problem(text, what) for what, text in assert_format_texts(op))  # see _format_text
    return problems + [p for p in texts if p is not None]


def _pointer_cast(op: Operation) -> list[str]:
    src, dst = op.operands[0].type, op.results[0].type
    if not isinstance(src, TileType) or not isinstance(dst, TileType) or src.shape != dst.shape:
        return [f"{op.name} keeps the tile shape: {src} -> {dst}"]
    want_src = "pointer" if op.name in ("ptr_to_int", "ptr_to_ptr") else "i64"
    want_dst = "pointer" if op.name in ("int_to_ptr", "ptr_to_ptr") else "i64"
    problems = []
    for t, want, what in ((src, want_src, "operand"), (dst, want_dst, "result")):
        ok = isinstance(t.element, PointerType) if want == "pointer" else t.element == i64
        if not ok:
            problems.append(f"{what} must be a tile of {'pointers' if want == 'pointer' else 'i64'}, got {t}")
    return problems


def _byte_size(t: TileType) -> int:
    count = 1
    for d in t.shape:
        count *= d
    bits = t.element.bits if isinstance(t.element, ScalarType) else 64
    return count * bits // 8


def _pack(op: Operation) -> list[str]:
    src, dst = op.operands[0].type, op.results[0].type
    if not isinstance(src, TileType) or not isinstance(dst, TileType):
        return [f"{op.name} takes and yields tiles"]
    if src.rank != dst.rank:
        return [f"{op.name} keeps the rank: {src} -> {dst}"]
    if _byte_size(src) != _byte_size(dst):
        return [f"{op.name} keeps the size in bytes: {src} ({_byte_size(src)}) -> {dst} ({_byte_size(dst)})"]
    return []


def _bytes_side(op: Operation) -> list[str]:
    side = op.results[0].type if op.name == "pack" else op.operands[0].type
    ok = isinstance(side, TileType) and side.element == i8
    return [] if ok else [f"{op.name} works on i8 byte tiles, got {side}"]


MEMORY_RULES: dict[str, Callable[[Operation], list[str]]] = {
    "int_to_ptr": _pointer_cast,
    "ptr_to_int": _pointer_cast,
    "ptr_to_ptr": _pointer_cast,
    "pack": lambda op: _pack(op) + _bytes_side(op),
    "unpack": lambda op: _pack(op) + _bytes_side(op),
    "multimem_load_reduce_view_tko": token_problems,
    "multimem_reduce_view_tko": token_problems,
    "multimem_store_view_tko": token_problems,
    "make_tensor_view": _make_tensor_view,
    "get_tile_block_id": _i32x3,
    "get_num_tile_blocks": _i32x3,
    "load_ptr_tko": _ptr_access,
    "store_ptr_tko": _ptr_access,
    "atomic_rmw_tko": _ptr_access,
    "atomic_cas_tko": _ptr_access,
    "offset": _offset,
    "get_tensor_shape": _shape_query,
    "get_index_space_shape": _shape_query,
    "cat": _cat,
    "iota": _iota,
    "assert": _assert,
    "atomic_red_view_tko": token_problems,
    "gdc_launch_dependents_tko": token_problems,
    "gdc_wait_tko": token_problems,
}
