"""Variables carried through loops and ``if`` branches, tuples included.

A loop or a run-time ``if`` turns every variable it reassigns into values of the structured op (loop values, branch
results). A variable may hold a tuple (``best = (value, index)``): it is flattened, leaf by leaf in order, into
those values and rebuilt from them afterwards. Invariant: a carried variable keeps its structure (a single value
or a tuple of the same nesting) and every leaf keeps its type on every path; anything else is a CompileError at the
user's line.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from tile.compiler._kir import Value
from tile.compiler._typecheck_arith import is_const, type_name
from tile.compiler._typecheck_expr import ExprMixin
from tile.compiler._types import DType, TileType, Type

__all__ = ["CarryMixin", "Struct"]

# The shape of a carried variable: None for one value, a tuple of Structs for a tuple.
Struct = tuple["Struct", ...] | None


def struct_of(value: object) -> Struct:
    """The structure of ``value``: nested tuples down to single values."""
    return tuple(struct_of(v) for v in value) if isinstance(value, tuple) else None


def leaf_count(s: Struct) -> int:
    """How many flat values a variable of structure ``s`` carries."""
    return 1 if s is None else sum(leaf_count(p) for p in s)


def rebuild(s: Struct, leaves: Iterator[object]) -> object:
    """The variable of structure ``s`` from its flat values (in order)."""
    return next(leaves) if s is None else tuple(rebuild(p, leaves) for p in s)


def _describe(s: Struct) -> str:
    return "a single value" if s is None else f"a tuple of {len(s)}"


class CarryMixin(ExprMixin):
    """Flattening of carried variables (tuples of tiles, scalars and numbers) into op values."""

    def flat_leaves(self, name: str, value: object, s: Struct) -> list[object]:
        """``value`` flattened along ``s``; fails when its structure is not ``s``."""
        if s is None:
            if isinstance(value, tuple):
                self.fail(
                    f"variable '{name}' changes from a single value to a tuple of {len(value)} inside the loop or "
                    "branch; give it one structure on every path"
                )
            return [value]
        if not isinstance(value, tuple) or len(value) != len(s):
            got = f"a tuple of {len(value)}" if isinstance(value, tuple) else type_name(value)
            self.fail(
                f"variable '{name}' is {_describe(s)} at the start of the loop or branch but {got} here; give it "
                "one structure on every path"
            )
        return [leaf for v, p in zip(value, s, strict=True) for leaf in self.flat_leaves(name, v, p)]

    def carried_inits(self, names: list[str]) -> tuple[list[Value], list[Type], list[Struct]]:
        """The initial flat values, their types and each variable's structure, for a loop carrying ``names``."""
        inits: list[Value] = []
        structs: list[Struct] = []
        for n in names:
            value = self.env[n]
            s = struct_of(value)
            structs.append(s)
            for leaf in self.flat_leaves(n, value, s):
                v = self.materialize(leaf) if is_const(leaf) else leaf
                if not isinstance(v, Value):
                    where = "a tuple holding " if s is not None else ""
                    self.fail(
                        f"'{n}' is {where}a {type_name(leaf)} and cannot be reassigned inside a loop; only tiles, "
                        "scalars, numbers and tuples of them can"
                    )
                inits.append(v)
        return inits, [v.type for v in inits], structs

    def carried_values(self, names: list[str], types: list[Type], structs: list[Struct]) -> list[Value]:
        """The current values of ``names``, flattened and coerced to the carried ``types``."""
        leaves = [
            (n, leaf) for n, s in zip(names, structs, strict=True) for leaf in self.flat_leaves(n, self.env[n], s)
        ]
        return [self.coerce_to(n, leaf, t) for (n, leaf), t in zip(leaves, types, strict=True)]

    def bind_carried(self, names: list[str], structs: list[Struct], values: Sequence[object]) -> dict[str, object]:
        """``names`` rebuilt from flat op values (loop block arguments or results)."""
        it: Iterator[object] = iter(values)
        return {n: rebuild(s, it) for n, s in zip(names, structs, strict=True)}

    def coerce_to(self, name: str, value: object, ty: Type) -> Value:
        """``value`` as a runtime value of ``ty`` (constants materialize; anything else must match)."""
        if isinstance(value, Value) and value.type == ty:
            return value
        if is_const(value) and isinstance(ty, TileType) and isinstance(ty.elem, DType):
            return self.materialize(value, ty.elem, ty.shape)
        shown = str(ty) if not name.startswith("$") else "a memory token"
        return self.fail(
            f"variable '{name}' changes type: it is {shown} at the start of the loop or branch but "
            f"{type_name(value)} here; give it one type on every path (e.g. initialize with tile.zeros(...))"
        )
