"""The declarative format of an op catalog entry.

One `OpDef` per opcode states everything the writer, reader, builder and verifier need:

- ``results``: named results, each with the version it appeared in; ``variadic_results`` when the count is
  only known per instance (``for``, ``if``, ``reduce``...); ``counted_results`` when the bytecode writes the
  result count before the typerefs (true for every op with a variadic operand or result).
- ``operands``: ordered groups (`SINGLE`, `OPTIONAL`, `VARIADIC`) and how they are laid out
  (`OperandLayout`).
- ``attrs``: inline attributes in bytecode order (`AttrKind` says the encoding); ``optional`` attributes and
  `AttrKind.UNIT` attributes are present iff their flag bit is set; attributes newer than the op have a
  ``since`` and a ``default`` that is the only value older versions can express.
- ``flags``: names of the optional attrs, unit attrs and optional operands, in flag-bit order;
  ``flags_since`` is the first version that writes the flags varint (None: never written).
- ``regions`` and ``terminator``; ``infer`` names the result-type rule the builder applies when no result
  type is given (see `tile.ir._infer`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, IntEnum

from tile.ir._version import V13_1, Version

__all__ = ["AttrKind", "AttrSpec", "OpDef", "OperandKind", "OperandLayout", "OperandSpec", "ResultSpec"]


class OperandKind(Enum):
    """Arity of one operand group."""

    SINGLE = "single"
    OPTIONAL = "optional"
    VARIADIC = "variadic"


class OperandLayout(Enum):
    """How operand ids follow the attributes.

    FIXED: just the ids. TOTAL: a total count, then every id (the only non-single group takes the rest).
    SEGMENTED: per group, a single id, a count plus ids (variadic), or an id if its flag bit is set.
    """

    FIXED = "fixed"
    TOTAL = "total"
    SEGMENTED = "segmented"


class AttrKind(Enum):
    """Inline encoding of an op attribute."""

    ENUM = "enum"  # varint of the enum code
    INT = "int"  # varint
    BOOL = "bool"  # one byte 0/1
    STRING = "string"  # string-table index
    TYPE = "type"  # type-table index
    I32_LIST = "i32_list"  # count + little-endian i32 each
    BOOL_LIST = "bool_list"  # count + one byte each
    DENSE = "dense"  # constant-table index; element type/shape from the op's result type
    ARRAY = "array"  # count + self-contained attributes
    HINTS = "hints"  # untagged dictionary: count + (arch string, tagged dictionary)*
    TAGGED = "tagged"  # one self-contained attribute
    UNIT = "unit"  # presence only, a flag bit (value: bool)


@dataclass(frozen=True)
class OperandSpec:
    """One operand group."""

    name: str
    kind: OperandKind = OperandKind.SINGLE


@dataclass(frozen=True)
class ResultSpec:
    """One named result and the first bytecode version that encodes it.

    A result newer than its op (only ``print_tko``'s ``result_token``, 13.2) still exists in NVIDIA's IR at older
    versions: ``tileirdisasm`` prints it and NVIDIA's reader supplies it (a token). Bytecode of an older version does
    not encode it, so it cannot be used there; our reader supplies it too, our writer leaves it out, and an op built
    for an older version may also be made without it (`OpDef.result_counts`).
    """

    name: str
    since: Version = V13_1


@dataclass(frozen=True)
class AttrSpec:
    """One inline attribute."""

    name: str
    kind: AttrKind
    enum: type[IntEnum] | None = None
    optional: bool = False
    since: Version = V13_1
    default: object = None
    allowed: tuple[IntEnum, ...] | None = None  # enum values NVIDIA's verifier accepts here (None: all)


@dataclass(frozen=True)
class OpDef:
    """The catalog entry of one op (see the module docstring)."""

    name: str
    opcode: int
    family: str
    since: Version = V13_1
    results: tuple[ResultSpec, ...] = ()
    variadic_results: bool = False
    counted_results: bool = False
    operands: tuple[OperandSpec, ...] = ()
    layout: OperandLayout = OperandLayout.FIXED
    attrs: tuple[AttrSpec, ...] = ()
    flags: tuple[str, ...] = ()
    flags_since: Version | None = None
    regions: int = 0
    terminator: bool = False
    infer: str = "explicit"

    def attr(self, name: str) -> AttrSpec:
        """Return the attribute spec called `name` (KeyError if the op has none)."""
        for spec in self.attrs:
            if spec.name == name:
                return spec
        raise KeyError(f"'{self.name}' has no attribute {name!r}; it has {[a.name for a in self.attrs]}")

    def results_at(self, version: Version) -> tuple[ResultSpec, ...]:
        """The fixed results that bytecode `version` encodes."""
        return tuple(r for r in self.results if r.since <= version)

    def result_counts(self, version: Version) -> frozenset[int]:
        """How many results an op may have at `version`: the encoded ones, or all of them (see `ResultSpec`)."""
        return frozenset((len(self.results_at(version)), len(self.results)))

    def operand_index(self, name: str) -> int:
        """Index of the operand group called `name`."""
        for i, spec in enumerate(self.operands):
            if spec.name == name:
                return i
        raise KeyError(f"'{self.name}' has no operand {name!r}; it has {[o.name for o in self.operands]}")


def single(*names: str) -> tuple[OperandSpec, ...]:
    """Shorthand for a run of single operands."""
    return tuple(OperandSpec(n) for n in names)


def opt(name: str) -> OperandSpec:
    """Shorthand for an optional operand."""
    return OperandSpec(name, OperandKind.OPTIONAL)


def var(name: str) -> OperandSpec:
    """Shorthand for a variadic operand."""
    return OperandSpec(name, OperandKind.VARIADIC)


def res(*names: str, since: Version = V13_1) -> tuple[ResultSpec, ...]:
    """Shorthand for a run of results."""
    return tuple(ResultSpec(n, since) for n in names)
