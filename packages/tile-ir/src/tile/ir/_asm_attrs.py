"""Attribute values in text, both ways: dense constants, identities, hints, assume predicates, strings.

Spellings follow `tileirdisasm`: ``<f32: 1.500000e+00> : tile<4xf32>`` (a one-element buffer is a splat),
``[0xFF800000 : f32, 0 : i32]``, ``<sm_90 = {occupancy = 2}>``, ``bounded<0, ?>``, ``div_by<16>``,
``"text\\0A"`` (MLIR string escapes).
"""

from __future__ import annotations

from tile.ir._asm_floats import float_bits_from_text, float_text
from tile.ir._asm_types import parse_type, type_text
from tile.ir._attrs import (
    Attr,
    BoolAttr,
    Bounded,
    DenseElementsAttr,
    DictAttr,
    DivBy,
    FloatAttr,
    IntegerAttr,
    OptimizationHints,
    SameElements,
)
from tile.ir._lexer import Lexer
from tile.ir._types import SCALARS, ScalarType, TileType, i32, i64

__all__ = [
    "dense_text",
    "element_text",
    "enum_from_word",
    "enum_word",
    "escape",
    "hints_text",
    "number_element",
    "parse_dense",
    "parse_hints",
    "parse_identities",
    "parse_predicate",
    "predicate_text",
    "typed_attr_text",
]

_SCALARS = {s.name: s for s in SCALARS}


_ENUM_WORDS = {"nsw": "no_signed_wrap", "nuw": "no_unsigned_wrap", "nw": "no_wrap"}
_WORD_ENUMS = {v: k for k, v in _ENUM_WORDS.items()}


def enum_word(member: object) -> str:
    """The keyword of an enum member in `<...>` attribute syntax (integer overflow uses long names)."""
    return _ENUM_WORDS.get(str(member), str(member))


def enum_from_word(word: str) -> str:
    """The inverse of `enum_word`: the member's short name."""
    return _WORD_ENUMS.get(word, word)


def escape(text: str) -> str:
    """Quote `text` as MLIR does: printable ASCII kept, ``\\`` doubled, anything else ``\\XX``."""
    out = []
    for byte in text.encode("utf-8", errors="surrogateescape"):
        ch = chr(byte)
        if ch == "\\":
            out.append("\\\\")
        elif 0x20 <= byte < 0x7F and ch != '"':
            out.append(ch)
        else:
            out.append(f"\\{byte:02X}")
    return '"' + "".join(out) + '"'


def _signed(raw: int, bits: int) -> int:
    return raw - (1 << bits) if bits > 1 and raw >> (bits - 1) else raw


def element_text(elem: ScalarType, raw: int) -> str:
    """One element of `elem` with raw bits `raw`."""
    if elem.is_float:
        return float_text(elem, raw)
    if elem.bits == 1:
        return "true" if raw else "false"
    return str(_signed(raw, elem.bits))


def number_element(t: TileType) -> ScalarType:
    """The element type of a constant tile; a pointer element (invalid IR, printed best-effort) reads as i64."""
    return t.element if isinstance(t.element, ScalarType) else i64


def _elements(attr: DenseElementsAttr) -> list[int]:
    elem = number_element(attr.type)
    count = 1
    for d in attr.type.shape:
        count *= d
    if elem.bits == 1:
        if len(attr.data) == 1 and count > 1 and attr.data[0] in (0, 0xFF):
            return [attr.data[0] & 1]
        return [attr.data[i // 8] >> (i % 8) & 1 for i in range(count)]
    width = max(elem.bits // 8, 1) if elem.name != "tf32" else 3
    return [int.from_bytes(attr.data[i : i + width], "little") for i in range(0, len(attr.data), width)]


def _nested(values: list[str], shape: tuple[int, ...]) -> str:
    if len(shape) <= 1:
        return "[" + ", ".join(values) + "]"
    step = len(values) // shape[0]
    return "[" + ", ".join(_nested(values[i : i + step], shape[1:]) for i in range(0, len(values), step)) + "]"


def dense_text(attr: DenseElementsAttr) -> str:
    """``<elem: value(s)> : type`` for a constant."""
    elem = number_element(attr.type)
    raws = _elements(attr)
    texts = [element_text(elem, r) for r in raws]
    body = texts[0] if len(texts) == 1 else _nested(texts, attr.type.shape)
    return f"<{elem.name}: {body}> : {type_text(attr.type)}"


def typed_attr_text(attr: Attr) -> str:
    """``value : type`` for an integer or float attribute (as in reduce identities)."""
    if isinstance(attr, FloatAttr):
        return f"{float_text(attr.type, attr.bits)} : {attr.type.name}"
    if isinstance(attr, IntegerAttr):
        value = attr.value & ((1 << attr.type.bits) - 1)
        return f"{element_text(attr.type, value)} : {attr.type.name}"
    raise TypeError(f"no typed text for {attr!r}")


def _untyped(attr: Attr) -> str:
    if isinstance(attr, BoolAttr):
        return "true" if attr.value else "false"
    if isinstance(attr, IntegerAttr):
        return str(attr.value)
    raise TypeError(f"unsupported hint value {attr!r}")


def hints_text(hints: OptimizationHints) -> str:
    """``<arch = {key = value, ...}, ...>`` (keys sorted, as MLIR dictionaries print)."""
    archs = [
        f"{arch} = {{{', '.join(f'{k} = {_untyped(v)}' for k, v in sorted(d.items))}}}"
        for arch, d in sorted(hints.by_arch)
    ]
    return "<" + ", ".join(archs) + ">"


def predicate_text(pred: object) -> str:
    """``div_by<16>``, ``div_by<16, every 2 along 1>``, ``same_elements<[1, 2]>``, ``bounded<0, ?>``."""
    if isinstance(pred, DivBy):
        every = f", every {pred.every} along {pred.along}" if pred.every is not None else ""
        return f"div_by<{pred.divisor}{every}>"
    if isinstance(pred, SameElements):
        return f"same_elements<[{', '.join(map(str, pred.values))}]>"
    if isinstance(pred, Bounded):
        lb = "?" if pred.lb is None else str(pred.lb)
        ub = "?" if pred.ub is None else str(pred.ub)
        return f"bounded<{lb}, {ub}>"
    raise TypeError(f"not an assume predicate: {pred!r}")


# --- parsing -------------------------------------------------------------------------------------------


def _element_raw(lex: Lexer, elem: ScalarType) -> int:
    start = lex.pos
    if elem.bits == 1 and lex.peek_keyword() in ("true", "false"):
        return int(lex.keyword() == "true")
    text = lex.number()
    try:
        if elem.is_float:
            return float_bits_from_text(elem, text)
        value = int(text, 0)
    except ValueError as exc:
        raise lex.error(f"invalid {elem.name} literal '{text}': {exc}", start) from None
    if not -(1 << (elem.bits - 1)) <= value < (1 << elem.bits):
        raise lex.error(f"integer constant {value} out of range for {elem.name}", start)
    return value & ((1 << elem.bits) - 1)


def _flat_values(lex: Lexer, elem: ScalarType, out: list[int]) -> None:
    if lex.accept("["):
        while not lex.accept("]"):
            if (out and not lex.at("[")) or lex.at(","):
                lex.accept(",")
            _flat_values(lex, elem, out)
    else:
        out.append(_element_raw(lex, elem))


def parse_dense(lex: Lexer) -> DenseElementsAttr:
    """Parse ``<elem: values> : type``."""
    lex.expect("<")
    start = lex.pos
    name = lex.keyword("an element type")
    if name not in _SCALARS:
        raise lex.error(f"unknown element type '{name}'", start)
    elem = _SCALARS[name]
    lex.expect(":")
    raws: list[int] = []
    _flat_values(lex, elem, raws)
    lex.expect(">")
    lex.expect(":")
    type_pos = lex.pos
    t = parse_type(lex)
    if not isinstance(t, TileType) or t.element != elem:
        raise lex.error(f"constant of {name} needs a tile of {name}, got {type_text(t)}", type_pos)
    return DenseElementsAttr(t, _pack(elem, raws))


def _pack(elem: ScalarType, raws: list[int]) -> bytes:
    if elem.bits == 1:
        if len(raws) == 1:
            return b"\xff" if raws[0] else b"\x00"
        packed = bytearray((len(raws) + 7) // 8)
        for i, r in enumerate(raws):
            packed[i // 8] |= r << (i % 8)
        return bytes(packed)
    width = 3 if elem.name == "tf32" else max(elem.bits // 8, 1)
    return b"".join(r.to_bytes(width, "little") for r in raws)


def parse_identities(lex: Lexer) -> tuple[Attr, ...]:
    """Parse ``[value : type, ...]``."""
    lex.expect("[")
    out: list[Attr] = []
    while not lex.accept("]"):
        if out:
            lex.expect(",")
        value_pos = lex.pos
        text = "true" if lex.accept("true") else "false" if lex.accept("false") else lex.number()
        lex.expect(":")
        start = lex.pos
        name = lex.keyword("an element type")
        if name not in _SCALARS:
            raise lex.error(f"unknown element type '{name}'", start)
        elem = _SCALARS[name]
        try:
            if elem.is_float:
                out.append(FloatAttr(elem, float_bits_from_text(elem, text)))
            else:
                out.append(
                    IntegerAttr(elem, {"true": 1, "false": 0}[text] if text in ("true", "false") else int(text, 0))
                )
        except ValueError as exc:
            raise lex.error(f"invalid identity '{text}': {exc}", value_pos) from None
    return tuple(out)


def parse_hints(lex: Lexer) -> OptimizationHints:
    """Parse ``<arch = {key = value, ...}, ...>``."""
    lex.expect("<")
    archs: list[tuple[str, DictAttr]] = []
    while not lex.accept(">"):
        if archs:
            lex.expect(",")
        arch = lex.keyword("an architecture such as sm_90")
        lex.expect("=")
        lex.expect("{")
        items: list[tuple[str, Attr]] = []
        while not lex.accept("}"):
            if items:
                lex.expect(",")
            key = lex.keyword("a hint name")
            lex.expect("=")
            if lex.peek_keyword() in ("true", "false"):
                items.append((key, BoolAttr(lex.keyword() == "true")))
            else:
                items.append((key, IntegerAttr(i32, lex.integer())))
        archs.append((arch, DictAttr(tuple(items))))
    return OptimizationHints(tuple(archs))


def _bound(lex: Lexer) -> int | None:
    return None if lex.accept("?") else lex.integer()


def parse_predicate(lex: Lexer) -> object:
    """Parse an assume predicate."""
    start = lex.pos
    kind = lex.keyword("an assume predicate")
    lex.expect("<")
    if kind == "div_by":
        divisor = lex.integer()
        every = along = None
        if lex.accept(","):
            lex.expect("every")
            every = lex.integer()
            lex.expect("along")
            along = lex.integer()
        pred: object = DivBy(divisor, every, along)
    elif kind == "bounded":
        lb = _bound(lex)
        lex.expect(",")
        pred = Bounded(lb, _bound(lex))
    elif kind == "same_elements":
        lex.expect("[")
        values: list[int] = []
        while not lex.accept("]"):
            if values:
                lex.expect(",")
            values.append(lex.integer())
        pred = SameElements(tuple(values))
    else:
        raise lex.error(f"unknown assume predicate '{kind}' (expected div_by, same_elements or bounded)", start)
    lex.expect(">")
    return pred
