"""The verifier: structure, dominance, version availability, attributes, hints and per-op typing.

`verify(module, version)` raises `VerifyError` listing every problem found (each prefixed with where it
is: ``@kernel/op 3 'addf'``). It checks: each op exists in the catalog and in `version`; operand groups
match the catalog; attributes are known, present when required, of the right kind, and expressible in
`version`; types exist in `version`; every operand is defined before use in the same or an enclosing block
(values of a region never leak out); blocks end in the right terminator and only there; region arguments
and terminator operands agree with the op's types; hint names and values are valid; memory orderings are
allowed for the op; and the per-op typing rules of `_verify_types`. One rule is stricter than bytecode: a
constant's `DenseElementsAttr` type must equal its result type (bytecode stores only the result type).
"""

from __future__ import annotations

from tile.ir._attrs import ArrayAttr, DenseElementsAttr, FloatAttr, IntegerAttr, OptimizationHints
from tile.ir._enums import MemoryOrdering
from tile.ir._errors import VerifyError
from tile.ir._ir import MAX_NESTING, Block, Function, Module, Operation, Value
from tile.ir._location import CallSite, DILoc, FileLoc, Location
from tile.ir._types import FunctionType, PointerType, ScalarType, TileType, Type, scalar, type_since
from tile.ir._verify_attrs import attr_kind_problem
from tile.ir._verify_hints import hint_problems
from tile.ir._verify_regions import region_problems
from tile.ir._verify_typedefs import typedef_problems
from tile.ir._verify_types import type_problems
from tile.ir._version import LATEST, Version
from tile.ir.ops import CATALOG, PREVIEW, AttrKind, AttrSpec, OpDef, OperandKind

__all__ = ["verify", "verify_problems"]

_HINT_KIND = {"load_view_tko": "view", "store_view_tko": "view", "load_ptr_tko": "pointer", "store_ptr_tko": "pointer"}
_LOADS = {MemoryOrdering.WEAK, MemoryOrdering.RELAXED, MemoryOrdering.ACQUIRE}
_STORES = {MemoryOrdering.WEAK, MemoryOrdering.RELAXED, MemoryOrdering.RELEASE}
_ATOMICS = {MemoryOrdering.RELAXED, MemoryOrdering.ACQUIRE, MemoryOrdering.RELEASE, MemoryOrdering.ACQ_REL}
_ORDERINGS = {"load_view_tko": _LOADS, "load_ptr_tko": _LOADS, "store_view_tko": _STORES, "store_ptr_tko": _STORES}
_ORDERINGS |= {"atomic_rmw_tko": _ATOMICS, "atomic_cas_tko": _ATOMICS}
_MAX_REPORTED = 20
_NON_ENTRY = (  # the 'simt' preview: tile.ir never writes the public-preview header tag it needs
    "non-entry (device) functions are the 'simt' preview: tileiras 13.5 rejects them (\"uses preview feature "
    "'simt', which is not enabled\") unless run with --preview=simt on public-preview bytecode, which tile.ir "
    "does not write; make it an entry (entry=True) or inline it"
)


def verify(module: Module, version: Version | str = LATEST) -> None:
    """Raise `VerifyError` unless `module` is valid Tile IR for bytecode `version`.

    Parameters
    ----------
    module
        The module to check.
    version
        The bytecode version it will be written at (ops, fields and types must exist there).

    Raises
    ------
    VerifyError
        Listing every problem found (up to 20 shown), each prefixed with where it is.
    """
    problems = verify_problems(module, version)
    if problems:
        shown = problems[:_MAX_REPORTED]
        more = f"\n  ... and {len(problems) - len(shown)} more" if len(problems) > len(shown) else ""
        raise VerifyError(f"{len(problems)} problem(s):\n  " + "\n  ".join(shown) + more)


def verify_problems(module: Module, version: Version | str = LATEST) -> list[str]:
    """Return every problem of `module` for bytecode `version` (empty when valid)."""
    checker = _Checker(Version.parse(version))
    checker.globals = {g.name: g.type for g in module.globals}
    for g in module.globals:
        checker.where = f"global {g.name!r}"
        checker.type_version(g.type)
    if len(checker.globals) != len(module.globals):
        checker.problems.append("global names must be unique")
    names: set[str] = set()
    for fn in module.functions:
        if not fn.name or fn.name in names:
            checker.problems.append(f"@{fn.name}: function names must be unique and non-empty")
        names.add(fn.name)
        checker.function(fn)
    return checker.problems


class _Checker:
    def __init__(self, version: Version) -> None:
        self.version = version
        self.globals: dict[str, TileType] = {}
        self.problems: list[str] = []
        self.visible: set[Value] = set()
        self.defined: set[Value] = set()
        self.unencoded: dict[Value, str] = {}  # results this version's bytecode leaves out -> why they can't be used
        self.where = ""
        self.depth = 0  # regions entered

    def report(self, message: str) -> None:
        self.problems.append(f"{self.where}: {message}")

    def function(self, fn: Function) -> None:
        self.where = f"@{fn.name}"
        if not fn.entry:
            self.report(_NON_ENTRY)
        if not isinstance(fn.type, FunctionType) or fn.type.results:
            self.report("an entry's signature must be a function type without results")
        elif [a.type for a in fn.body.args] != list(fn.type.inputs):
            self.report("the body block arguments must match the signature's parameter types")
        self.type_version(fn.type)
        if fn.hints is not None:
            self.hints(fn.hints, "entry")
        self.visible = set(fn.body.args)
        self.defined = set(fn.body.args)
        self.block(fn.body, ("return",), f"@{fn.name}")

    def type_version(self, t: Type) -> None:
        invalid = typedef_problems(t)
        for problem in invalid:
            self.report(problem)
        since = type_since(t)
        if since > self.version and not invalid:
            self.report(f"type {t} needs bytecode {since}+")

    def hints(self, hints: object, kind: str) -> None:
        if not isinstance(hints, OptimizationHints):
            self.report("optimization_hints must be OptimizationHints")
            return
        for problem in hint_problems(hints, kind, self.version):
            self.report(problem)

    def define(self, values: list[Value], owner: Operation | Block) -> None:
        """Record definitions; a value defined twice (or by the wrong owner) breaks value numbering."""
        for index, value in enumerate(values):
            if value in self.defined or value.owner is not owner or value.index != index:
                self.report(f"value {value!r} is defined twice or does not belong to its definer")
            self.defined.add(value)
        self.visible.update(values)

    def block(self, block: Block, terminators: tuple[str, ...], path: str) -> None:
        self.where = path
        added = [a for a in block.args if a not in self.visible]
        if block.parent is not None:
            self.define(block.args, block)
            for arg in block.args:
                self.type_version(arg.type)
        if not block.ops or block.ops[-1].name not in terminators:
            last = block.ops[-1].name if block.ops else "nothing"
            self.where = path
            self.report(f"block must end with {' or '.join(terminators)}, but ends with {last}")
        for index, op in enumerate(block.ops):
            op_path = f"{path}/op {index} '{op.name}'"
            self.where = op_path + _source(op.loc)
            self.op(op, is_last=index == len(block.ops) - 1, path=op_path)
            added += op.results
            self.where = op_path + _source(op.loc)
            self.define(op.results, op)
        self.visible.difference_update(added)

    def op(self, op: Operation, *, is_last: bool, path: str) -> None:
        opdef = CATALOG.get(op.name)
        if opdef is None:
            self.report(f"op '{op.name}' {PREVIEW[op.name]}" if op.name in PREVIEW else f"unknown op '{op.name}'")
            return
        if opdef.terminator and not is_last:
            self.report("a terminator must be the last op of its block")
        if opdef.since > self.version:
            self.report(f"op '{op.name}' needs bytecode {opdef.since}+ (target {self.version})")
        self.operands(op, opdef)
        self.attributes(op, opdef)
        for v in op.results:
            self.type_version(v.type)
        encoded = opdef.results_at(self.version)
        if not opdef.variadic_results and len(op.results) not in opdef.result_counts(self.version):
            self.report(f"has {len(op.results)} results; bytecode {self.version} defines {len(encoded)}")
        newer = zip(opdef.results[len(encoded) :], op.results[len(encoded) :], strict=False)  # or built without
        for spec, value in newer:
            self.unencoded[value] = (
                f"uses '{op.name}' result '{spec.name}', which bytecode {self.version} does not encode "
                f"(it does from {spec.since}): target {spec.since}+ or leave it unused"
            )
        malformed = self.problems_in_shape(op, opdef)  # typing rules index operands and results by position
        for problem in [] if malformed else type_problems(op) + region_problems(op):
            self.report(problem)
        self.regions(op, opdef, path)

    def problems_in_shape(self, op: Operation, opdef: OpDef) -> bool:
        """Whether the op's operand groups or result count are off (already reported; typing would misread it)."""
        expected = len(opdef.results_at(self.version))
        if len(op.segments) != len(opdef.operands) or sum(op.segments) != len(op.operands):
            return True
        arity = {OperandKind.SINGLE: (1, 1), OperandKind.OPTIONAL: (0, 1), OperandKind.VARIADIC: (0, len(op.operands))}
        if any(not arity[g.kind][0] <= n <= arity[g.kind][1] for g, n in zip(opdef.operands, op.segments, strict=True)):
            return True
        return not opdef.variadic_results and not expected <= len(op.results) <= expected + 1

    def operands(self, op: Operation, opdef: OpDef) -> None:
        for v in op.operands:
            if v not in self.visible:
                self.report(f"operand {v!r} is not defined before this use (or is out of scope)")
            elif v in self.unencoded:
                self.report(self.unencoded[v])
        if len(op.segments) != len(opdef.operands) or sum(op.segments) != len(op.operands):
            self.report(f"operand segments {op.segments} do not match the groups {[g.name for g in opdef.operands]}")
            return
        for spec, n in zip(opdef.operands, op.segments, strict=True):
            if spec.kind is OperandKind.SINGLE and n != 1:
                self.report(f"operand '{spec.name}' takes one value, got {n}")
            if spec.kind is OperandKind.OPTIONAL and n > 1:
                self.report(f"operand '{spec.name}' takes at most one value, got {n}")
            flagged_since = opdef.flags_since if spec.name in opdef.flags else None
            if n and flagged_since is not None and flagged_since > self.version:
                self.report(f"operand '{spec.name}' needs bytecode {flagged_since}+ (target {self.version})")

    def attributes(self, op: Operation, opdef: OpDef) -> None:
        known = {a.name: a for a in opdef.attrs}
        for name in op.attributes:
            if name not in known:
                self.report(f"unknown attribute '{name}'")
        for spec in opdef.attrs:
            value = op.attributes.get(spec.name)
            if value is None:
                if not spec.optional and spec.kind is not AttrKind.UNIT and spec.since <= self.version:
                    self.report(f"missing attribute '{spec.name}'")
                continue
            self.attribute(op, spec, value)
        for value in op.attributes.values():
            for t in _attribute_types(value):
                self.type_version(t)
        if op.name == "get_global":
            self.global_ref(op)
        if "optimization_hints" in op.attributes:
            self.hints(op.attributes["optimization_hints"], _HINT_KIND.get(op.name, "view"))
        self.ordering(op)

    def attribute(self, op: Operation, spec: AttrSpec, value: object) -> None:
        if (problem := attr_kind_problem(spec.name, spec.kind, value)) is not None:
            self.report(problem)  # the value checks below assume the kind's canonical shape
            return
        if spec.enum is not None and not isinstance(value, spec.enum):
            self.report(f"attribute '{spec.name}' must be a {spec.enum.__name__}, got {value!r}")
        elif spec.allowed is not None and value not in spec.allowed:
            choices = ", ".join(map(str, spec.allowed))
            self.report(f"{spec.name} = {value} is not allowed on '{op.name}'; use one of {choices}")
        if spec.since > self.version and not _expressible_before(spec, value):
            self.report(f"attribute {spec.name}={value!r} needs bytecode {spec.since}+")

    def global_ref(self, op: Operation) -> None:
        name = op.attributes.get("name")
        target = self.globals.get(name) if isinstance(name, str) else None
        if target is None:
            self.report(f"get_global refers to {name!r}, which is not a global of the module")
        elif op.results and op.results[0].type != scalar(PointerType(_scalar_element(target))):
            self.report(f"get_global {name!r} yields tile<ptr<{target.element}>>, not {op.results[0].type}")

    def ordering(self, op: Operation) -> None:
        allowed = _ORDERINGS.get(op.name)
        ordering = op.attributes.get("memory_ordering_semantics")
        if allowed is not None and ordering not in allowed:
            self.report(f"memory ordering {ordering} is not allowed here; use one of {', '.join(map(str, allowed))}")
        if ordering not in (None, MemoryOrdering.WEAK) and op.attributes.get("memory_scope") is None:
            self.report(f"memory ordering {ordering} needs a memory_scope")
        if ordering is MemoryOrdering.WEAK and op.attributes.get("memory_scope") is not None:
            self.report("a weak access takes no memory_scope")

    def regions(self, op: Operation, opdef: OpDef, path: str) -> None:
        if len(op.regions) != opdef.regions:
            self.report(f"must have {opdef.regions} regions, has {len(op.regions)}")
            return
        if op.regions and self.depth >= MAX_NESTING:
            self.report(f"regions nested more than {MAX_NESTING} deep; flatten the control flow")
            return
        self.depth += 1
        for r_index, region in enumerate(op.regions):
            optional_else = op.name == "if" and r_index == 1 and not op.results
            if len(region.blocks) != 1 and not (optional_else and not region.blocks):
                self.report(f"region {r_index} must have exactly one block, has {len(region.blocks)}")
            for block in region.blocks:
                self.block(block, _terminators(op), f"{path}/region {r_index}")
        self.depth -= 1
        self.where = path


def _source(loc: Location | None) -> str:
    """`` (file:line:col)`` of an op location, so problems point at the user's source when it is known."""
    while isinstance(loc, CallSite):
        loc = loc.callee
    if isinstance(loc, (DILoc, FileLoc)):
        return f" ({loc.filename}:{loc.line}:{loc.column})"
    return ""


def _expressible_before(spec: AttrSpec, value: object) -> bool:
    """Whether a version older than `spec.since` can carry `value` (only the default can be implied)."""
    if spec.kind is AttrKind.UNIT:
        return value is False
    if spec.kind is AttrKind.BOOL_LIST:
        return isinstance(value, tuple) and not any(value)
    return type(value) is type(spec.default) and value == spec.default


def _scalar_element(t: TileType) -> ScalarType:
    assert isinstance(t.element, ScalarType), "globals hold number tiles"
    return t.element


def _attribute_types(value: object) -> list[Type]:
    """Types carried inside an attribute value (dense constants, typed integers and floats, arrays)."""
    if isinstance(value, (DenseElementsAttr, IntegerAttr, FloatAttr)):
        return [value.type]
    if isinstance(value, ArrayAttr):
        return [t for e in value.elements for t in _attribute_types(e)]
    return []


def _terminators(op: Operation) -> tuple[str, ...]:
    if op.name == "for":
        return ("continue",)
    if op.name == "loop":
        return ("continue", "break")
    if op.name == "if" and _inside_loop(op):
        return ("yield", "continue", "break")
    if op.name == "if" and _only_ifs_above(op):
        return ("yield", "return")  # an early exit from the kernel (what cuTile Python writes for `return`)
    return ("yield",)


def _only_ifs_above(op: Operation) -> bool:
    """Whether every op enclosing `op` is an `if`: NVIDIA's verifier lets `return` end such a branch only."""
    block = op.parent
    while block is not None and block.parent is not None and block.parent.parent is not None:
        owner = block.parent.parent
        if owner.name != "if":
            return False
        block = owner.parent
    return True


def _inside_loop(op: Operation) -> bool:
    block = op.parent
    while block is not None and block.parent is not None and block.parent.parent is not None:
        owner = block.parent.parent
        if owner.name in ("for", "loop"):
            return True
        block = owner.parent
    return False
