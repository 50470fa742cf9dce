"""What the verifier rejects because tile.ir does not model it: preview functions and unknown element types.

tileiras 13.5 has a 'simt' preview (non-entry functions, ``preview$call``): it needs ``--preview=simt`` and
public-preview bytecode (a non-zero header tag), which tile.ir never writes, so a non-entry function is an
error here, as it is for tileiras without the flag. Element types must be the `SCALARS` of `tile.ir._types`;
``f8E5M3FNU`` (tag 130, 13.4+) exists in tileiras 13.5 but compiles only for sm_107, so it is not modelled and
gets a message saying so. (The preview ops themselves are listed in `tile.ir.ops.PREVIEW`.)
"""

from __future__ import annotations

from tile.ir._types import (
    SCALARS,
    FunctionType,
    GatherScatterViewType,
    PartitionViewType,
    PointerType,
    ScalarType,
    StridedViewType,
    TensorViewType,
    TileType,
    Type,
)

__all__ = ["NON_ENTRY", "unknown_element_problems"]

NON_ENTRY = (
    "non-entry (device) functions are the 'simt' preview: tileiras 13.5 rejects them (\"uses preview feature "
    "'simt', which is not enabled\") unless run with --preview=simt on public-preview bytecode, which tile.ir "
    "does not write; make it an entry (entry=True) or inline it"
)
_E5M3 = (
    "element type f8E5M3FNU (tileirdisasm spells it fnv8E5M3FNU; type tag 130, bytecode 13.4+) is not modelled by "
    "tile.ir: tileiras 13.5 compiles it only for sm_107; use f8E4M3FN or f8E5M2"
)
_UNMODELLED = {"f8E5M3FNU": _E5M3, "fnv8E5M3FNU": _E5M3}
_KNOWN = ", ".join(s.name for s in SCALARS)
_VIEWS = (PartitionViewType, StridedViewType, GatherScatterViewType)


def _elements(t: Type) -> list[ScalarType]:
    """Every element type inside `t` (tile elements, pointees, tensor and view elements, signatures)."""
    if isinstance(t, FunctionType):
        return [s for x in t.inputs + t.results for s in _elements(x)]
    inner: object = t.tensor_view if isinstance(t, _VIEWS) else t
    inner = inner.element if isinstance(inner, (TileType, TensorViewType)) else inner
    inner = inner.pointee if isinstance(inner, PointerType) else inner
    return [inner] if isinstance(inner, ScalarType) else []


def unknown_element_problems(t: Type) -> list[str]:
    """One message per element type inside `t` that is not one of tile.ir's `SCALARS`."""
    unknown = dict.fromkeys(s for s in _elements(t) if s not in SCALARS)
    return [
        _UNMODELLED.get(
            s.name, f"element type {s.name} (tag {s.tag}) is not a Tile IR type; use one of tile.ir.SCALARS"
        )
        for s in unknown
    ]
