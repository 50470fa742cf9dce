"""Types in the text syntax `tileirdisasm` prints, both ways: `type_text` and `parse_type`.

The spelling follows the dialect's printers exactly (``tile<128x64xf16>``, ``tensor_view<?x8xf32,
strides=[?,1]>`` with no blank between strides, ``partition_view<tile=(64x32), padding_value = zero,
tensor_view<...>, dim_map=[1, 0]>``); `parse_type` accepts exactly what `type_text` produces.
"""

from __future__ import annotations

import re

from tile.ir._lexer import Lexer
from tile.ir._types import (
    SCALARS,
    GatherScatterViewType,
    Padding,
    PartitionViewType,
    PointerAttr,
    PointerType,
    ScalarType,
    StridedViewType,
    TensorViewType,
    TileType,
    TokenType,
    Type,
    token,
)

__all__ = ["parse_type", "type_text", "types_text"]

_SCALARS = {s.name: s for s in SCALARS}
_PADDINGS = {str(p): p for p in Padding}


def _extent(value: int | None) -> str:
    return "?" if value is None else str(value)


def _padding(padding: Padding | None) -> str:
    return "" if padding is None else f"padding_value = {padding}, "


def _dim_map(dim_map: tuple[int, ...]) -> str:
    return "" if dim_map == tuple(range(len(dim_map))) else f", dim_map=[{', '.join(map(str, dim_map))}]"


def type_text(t: Type) -> str:  # noqa: PLR0911 - one return per type kind reads as a table
    """Return the text of `t` as tileirdisasm prints it."""
    if isinstance(t, ScalarType):
        return t.name
    if isinstance(t, TokenType):
        return "token"
    if isinstance(t, PointerType):
        attr = "" if t.ptr_attr is None else f", <{PointerAttr(t.ptr_attr)}>"
        return f"ptr<{t.pointee.name}{attr}>"
    if isinstance(t, TileType):
        return f"tile<{''.join(f'{d}x' for d in t.shape)}{type_text(t.element)}>"
    if isinstance(t, TensorViewType):
        dims = "".join(f"{_extent(d)}x" for d in t.shape)
        strides = f", strides=[{','.join(_extent(s) for s in t.strides)}]" if t.shape else ""
        attr = "" if t.ptr_attr is None else f", #cuda_tile.ptr_attr<{PointerAttr(t.ptr_attr)}>"
        return f"tensor_view<{dims}{t.element.name}{strides}{attr}>"
    if isinstance(t, PartitionViewType):
        shape = "x".join(map(str, t.tile_shape))
        return f"partition_view<tile=({shape}), {_padding(t.padding)}{type_text(t.tensor_view)}{_dim_map(t.dim_map)}>"
    if isinstance(t, StridedViewType):
        shape = "x".join(map(str, t.tile_shape))
        steps = ",".join(map(str, t.traversal_strides))
        return (
            f"strided_view<tile=({shape}), traversal_strides=[{steps}], {_padding(t.padding)}"
            f"{type_text(t.tensor_view)}{_dim_map(t.dim_map)}>"
        )
    if isinstance(t, GatherScatterViewType):
        shape = "x".join(map(str, t.tile_shape))
        return (
            f"gather_scatter_view<tile=({shape}), {_padding(t.padding)}{type_text(t.tensor_view)}, "
            f"sparse_dim={t.sparse_dim}>"
        )
    raise TypeError(f"no text form for type {t!r}")


def types_text(types: list[Type] | tuple[Type, ...]) -> str:
    """Comma-separated `type_text` of each type."""
    return ", ".join(type_text(t) for t in types)


def _scalar(lex: Lexer) -> ScalarType:
    start = lex.pos
    name = lex.keyword("an element type")
    if name not in _SCALARS:
        raise lex.error(f"unknown element type '{name}'", start)
    return _SCALARS[name]


def _shape_and_element(lex: Lexer, allow_dynamic: bool) -> tuple[list[int | None], Type]:
    """Parse ``d0xd1x...xELEM`` where ELEM is a scalar or ``ptr<...>``."""
    dims: list[int | None] = []
    while True:
        lex.skip()
        if allow_dynamic and lex.accept("?"):
            dims.append(None)
        elif lex.text[lex.pos : lex.pos + 1].isdigit():
            dims.append(lex.integer())
        else:
            break
        if lex.text[lex.pos : lex.pos + 1] != "x":
            raise lex.error("expected 'x' after a dimension")
        lex.pos += 1
    element: Type = _pointer(lex) if lex.at("ptr") else _scalar(lex)
    return dims, element


def _ptr_attr(lex: Lexer) -> int:
    start = lex.pos
    word = lex.keyword("a pointer attribute")
    names = {str(a): a for a in PointerAttr}
    if word not in names:
        raise lex.error(f"unknown pointer attribute '{word}'; expected one of {', '.join(names)}", start)
    return int(names[word])


def _pointer(lex: Lexer) -> PointerType:
    lex.expect("ptr")
    lex.expect("<")
    pointee = _scalar(lex)
    attr = None
    if lex.accept(","):
        lex.expect("<")
        attr = _ptr_attr(lex)
        lex.expect(">")
    lex.expect(">")
    return PointerType(pointee, ptr_attr=attr)


def _int_list(lex: Lexer, open_: str, close: str, sep: str) -> list[int]:
    lex.expect(open_)
    values: list[int] = []
    while not lex.accept(close):
        if values:
            lex.expect(sep)
        values.append(lex.integer())
    return values


def _tile_shape(lex: Lexer) -> tuple[int, ...]:
    lex.expect("tile")
    lex.expect("=")
    lex.expect("(")
    values = [lex.integer()]
    while lex.text.startswith("x", lex.pos):
        lex.pos += 1
        values.append(lex.integer())
    lex.expect(")")
    lex.expect(",")
    return tuple(values)


def _opt_padding(lex: Lexer) -> Padding | None:
    if not lex.accept("padding_value"):
        return None
    lex.expect("=")
    start = lex.pos
    word = lex.keyword("a padding value")
    if word not in _PADDINGS:
        raise lex.error(f"unknown padding value '{word}'; expected one of {', '.join(_PADDINGS)}", start)
    lex.expect(",")
    return _PADDINGS[word]


def _opt_dim_map(lex: Lexer, rank: int) -> tuple[int, ...]:
    if lex.accept(","):
        lex.expect("dim_map")
        lex.expect("=")
        return tuple(_int_list(lex, "[", "]", ","))
    return tuple(range(rank))


def _tensor_view(lex: Lexer) -> TensorViewType:
    lex.expect("tensor_view")
    lex.expect("<")
    dims, element = _shape_and_element(lex, allow_dynamic=True)
    strides: list[int | None] = []
    if lex.accept(","):
        lex.expect("strides")
        lex.expect("=")
        lex.expect("[")
        while not lex.accept("]"):
            if strides:
                lex.expect(",")
            strides.append(None if lex.accept("?") else lex.integer())
    attr = None
    if lex.accept(","):
        lex.expect("#cuda_tile.ptr_attr")
        lex.expect("<")
        attr = _ptr_attr(lex)
        lex.expect(">")
    lex.expect(">")
    if not isinstance(element, ScalarType):
        raise lex.error("a tensor_view element must be a number type")
    return TensorViewType(element, tuple(dims), tuple(strides), ptr_attr=attr)


def _view(lex: Lexer, kind: str) -> Type:
    lex.expect("<")
    shape = _tile_shape(lex)
    steps: tuple[int, ...] = ()
    if kind == "strided_view":
        lex.expect("traversal_strides")
        lex.expect("=")
        steps = tuple(_int_list(lex, "[", "]", ","))
        lex.expect(",")
    padding = _opt_padding(lex)
    tv = _tensor_view(lex)
    result: Type
    if kind == "gather_scatter_view":
        lex.expect(",")
        lex.expect("sparse_dim")
        lex.expect("=")
        result = GatherScatterViewType(shape, tv, lex.integer(), padding)
    elif kind == "strided_view":
        result = StridedViewType(shape, steps, tv, _opt_dim_map(lex, len(shape)), padding)
    else:
        result = PartitionViewType(shape, tv, _opt_dim_map(lex, len(shape)), padding)
    lex.expect(">")
    return result


_SIMPLE_TILE = re.compile(r"tile<[0-9x]*(?:[A-Za-z0-9]+|ptr<[A-Za-z0-9]+>)>")
_SEEN: dict[str, Type] = {}


def parse_type(lex: Lexer) -> Type:
    """Parse one type at the lexer's position."""
    lex.skip()
    # Kernels repeat a handful of tile types thousands of times: remember the simple ones by their text.
    m = _SIMPLE_TILE.match(lex.text, lex.pos)
    if m is not None and (known := _SEEN.get(m.group(0))) is not None:
        lex.pos = m.end()
        return known
    start = lex.pos
    parsed = _parse_type(lex, start)
    if m is not None and lex.pos == m.end() and len(_SEEN) < 4096:
        _SEEN[m.group(0)] = parsed
    return parsed


def _parse_type(lex: Lexer, start: int) -> Type:
    word = lex.peek_keyword()
    if word == "token":
        lex.keyword()
        return token
    if word == "tile":
        lex.keyword()
        lex.expect("<")
        dims, element = _shape_and_element(lex, allow_dynamic=False)
        lex.expect(">")
        return TileType(tuple(d for d in dims if d is not None), element)  # type: ignore[arg-type]  # element is a scalar or pointer
    if word == "ptr":
        return _pointer(lex)
    if word == "tensor_view":
        return _tensor_view(lex)
    if word in ("partition_view", "strided_view", "gather_scatter_view"):
        lex.keyword()
        return _view(lex, word)
    if word in _SCALARS:
        return _scalar(lex)
    raise lex.error(f"expected a type, found {lex.describe()}", start)
