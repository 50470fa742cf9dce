"""The generic, catalog-driven half of the op builder (`tile.ir.Builder` adds the structured ops).

Every op in the catalog can be built generically with `Builder.create`. Single-result ops are also available
as methods named after the op (``b.addf``, ``b.exp``, ``b.make_partition_view``...), resolved through the
catalog: positional arguments fill the operand groups in order (a variadic group takes a sequence, an optional
one a value or None), keyword arguments name attributes (or operand groups), ``result_type=`` overrides
inference, ``loc=`` sets the location. Ops with several results, no result or regions have explicit methods
(`load_view_tko`, `get_tile_block_id`, `return_`, `for_`, `if_`, `loop`, `reduce`, `scan`...) in `_builder.py`.

Invariant: the builder appends to its current block (`BuilderBase.block`); `at` switches it temporarily.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from tile.ir._errors import IRTypeError
from tile.ir._infer import infer_results
from tile.ir._ir import Block, Operation, Value
from tile.ir._location import Location
from tile.ir._normalize import normalize_attr
from tile.ir._types import Type
from tile.ir._version import LATEST, Version
from tile.ir.ops import CATALOG, AttrKind, OpDef, OperandKind, lookup

__all__ = ["BuilderBase", "OperandArg"]

OperandArg = Value | Sequence[Value] | None


class BuilderBase:
    """Appends ops to a block (generic part of `tile.ir.Builder`).

    Parameters
    ----------
    block
        Where new ops go (e.g. ``function.body``).
    version
        Target bytecode version. Ops get every result of their catalog entry, as in NVIDIA's IR, including results
        the version's bytecode does not encode (``print_tko``'s token before 13.2, which then cannot be used).
    loc
        Location given to new ops unless a call passes ``loc=``.
    """

    def __init__(self, block: Block, *, version: Version = LATEST, loc: Location | None = None) -> None:
        self.block = block
        self.version = version
        self.loc = loc

    @contextmanager
    def at(self, block: Block) -> Iterator[Block]:
        """Temporarily append to `block` instead of the current block."""
        saved, self.block = self.block, block
        try:
            yield block
        finally:
            self.block = saved

    @contextmanager
    def location(self, loc: Location | None) -> Iterator[None]:
        """Temporarily give new ops the location `loc`."""
        saved, self.loc = self.loc, loc
        try:
            yield
        finally:
            self.loc = saved

    def create(
        self,
        name: str,
        operands: Sequence[OperandArg] = (),
        attrs: Mapping[str, Any] | None = None,
        result_types: Sequence[Type] | None = None,
        loc: Location | None = None,
    ) -> Operation:
        """Build op `name` from per-group `operands` and append it; returns the new `Operation`."""
        opdef = lookup(name)
        flat, segments = _flatten(opdef, operands)
        values = _attributes(opdef, attrs or {})
        _fill_inbounds(opdef, values, segments)
        if result_types is None:
            rule = opdef.infer if not opdef.variadic_results else "explicit"
            result_types = infer_results(name, rule, [v.type for v in flat], values)
        op = Operation(
            name,
            flat,
            result_types,
            attributes=values,
            num_regions=opdef.regions,
            segments=segments,
            loc=loc or self.loc,
        )
        return self.block.append(op)

    def __getattr__(self, name: str) -> Callable[..., Value]:
        if name.startswith("_"):
            raise AttributeError(name)
        opdef = CATALOG.get(name)
        if opdef is None:
            raise AttributeError(f"Builder has no method or Tile IR op named {name!r}; see tile.ir.ops.CATALOG")
        return lambda *args, **kwargs: self._single(opdef, args, kwargs)

    def _single(self, opdef: OpDef, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Value:
        op = self.call(opdef.name, *args, **kwargs)
        if len(op.results) != 1:
            raise IRTypeError(f"'{opdef.name}' has {len(op.results)} results; use b.call('{opdef.name}', ...)")
        return op.results[0]

    def call(self, name: str, /, *args: Any, **kwargs: Any) -> Operation:
        """Build op `name` with positional operand groups and keyword attributes; returns the `Operation`."""
        opdef = lookup(name)
        result_type = kwargs.pop("result_type", None)
        result_types = kwargs.pop("result_types", None)
        if result_type is not None:
            result_types = [result_type]
        loc = kwargs.pop("loc", None)
        groups: list[OperandArg] = list(args)
        for spec in opdef.operands[len(args) :]:
            groups.append(kwargs.pop(spec.name, None if spec.kind is not OperandKind.VARIADIC else ()))
        return self.create(name, groups, kwargs, result_types, loc)


def _flatten(opdef: OpDef, groups: Sequence[OperandArg]) -> tuple[list[Value], list[int]]:
    if len(groups) > len(opdef.operands):
        raise IRTypeError(f"'{opdef.name}' takes {len(opdef.operands)} operand groups, got {len(groups)}")
    flat: list[Value] = []
    segments: list[int] = []
    for spec, group in zip(opdef.operands, list(groups) + [None] * (len(opdef.operands) - len(groups)), strict=False):
        items = _group_values(opdef, spec.name, spec.kind, group)
        flat.extend(items)
        segments.append(len(items))
    return flat, segments


def _group_values(opdef: OpDef, name: str, kind: OperandKind, group: OperandArg) -> list[Value]:
    if kind is OperandKind.VARIADIC:
        if isinstance(group, Value) or group is None:
            raise IRTypeError(f"operand '{name}' of '{opdef.name}' takes a sequence of values")
        items = list(group)
    elif group is None:
        if kind is OperandKind.SINGLE:
            raise IRTypeError(f"'{opdef.name}' needs operand '{name}'")
        items = []
    elif isinstance(group, Value):
        items = [group]
    else:
        raise IRTypeError(f"operand '{name}' of '{opdef.name}' takes one Value, got {type(group).__name__}")
    for item in items:
        if not isinstance(item, Value):
            raise IRTypeError(f"operand '{name}' of '{opdef.name}' must be a Value, got {type(item).__name__}")
    return items


def _attributes(opdef: OpDef, given: Mapping[str, Any]) -> dict[str, object]:
    unknown = set(given) - {a.name for a in opdef.attrs}
    if unknown:
        names = [a.name for a in opdef.attrs]
        raise IRTypeError(f"'{opdef.name}' has no attribute {sorted(unknown)}; its attributes are {names}")
    out: dict[str, object] = {}
    for spec in opdef.attrs:
        value = given.get(spec.name, spec.default)
        if value is None:
            if spec.optional:
                continue
            raise IRTypeError(f"'{opdef.name}' needs attribute '{spec.name}'")
        if spec.kind is AttrKind.UNIT and value is False:
            continue
        out[spec.name] = normalize_attr(spec, value)
    return out


def _fill_inbounds(opdef: OpDef, values: dict[str, object], segments: Sequence[int]) -> None:
    """Give ``inbounds`` one flag per index (NVIDIA's verifier requires it); empty means all false."""
    if values.get("inbounds") == ():
        values["inbounds"] = (False,) * segments[opdef.operand_index("index")]
