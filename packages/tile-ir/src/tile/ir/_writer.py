"""Bytecode writer for Tile IR versions 13.1-13.5.

`write_bytecode(module, version)` returns the exact layout of that version: header, Func, Global, Constant,
Debug, Type, (Producer), String sections and the end byte. Output is deterministic: the same module and
version always give the same bytes. A module produced by the reader carries a `Layout`; written back at the
same version it reproduces the input bytes.
"""

from __future__ import annotations

from tile.ir._attrs import ArrayAttr, OptimizationHints
from tile.ir._encoding import MAGIC, ByteWriter, encode_table
from tile.ir._errors import UnsupportedVersionError, VerifyError
from tile.ir._ir import Function, Module
from tile.ir._layout import SECTION_IDS, Layout
from tile.ir._tables import TableSet
from tile.ir._types import FunctionType
from tile.ir._version import V13_3, V13_5, Version
from tile.ir._writer_ops import BodyWriter

__all__ = ["write_bytecode"]

_CANONICAL = (
    ("func", 8),
    ("global", None),
    ("constant", 8),
    ("debug", 8),
    ("type", 4),
    ("producer", None),
    ("string", 4),
)
_FLAG_ENTRY = 0x02
_FLAG_HINTS = 0x04


def write_bytecode(module: Module, version: Version | str) -> bytes:
    """Encode `module` as Tile IR bytecode of `version` ("13.1" ... "13.5").

    Parameters
    ----------
    module
        The module to encode; it should pass `verify` for the same version.
    version
        Target bytecode version (a `Version` or its "13.x" spelling).

    Returns
    -------
    bytes
        The file contents; identical for identical inputs.

    Raises
    ------
    UnsupportedVersionError
        An op, type or field of the module does not exist in `version`.
    VerifyError
        The module is malformed (e.g. an operand used before its definition).
    """
    version = Version.parse(version)
    layout = module.layout if module.layout is not None and module.layout.version == version else None
    tables = TableSet(version)
    if layout is not None:
        tables.strings.seed(layout.strings)
        tables.types.seed(layout.types)
        tables.constants.seed(layout.constants)
        tables.debug.seed(layout.debug_attrs)
    payloads = _payloads(module, tables, layout)
    out = ByteWriter()
    out.raw(MAGIC)
    out.raw(bytes([version.major, version.minor, 0, 0]))
    for section_id, alignment in _section_order(layout, payloads):
        out.section(section_id, payloads[section_id], alignment)
    out.byte(0)
    return bytes(out.buf)


def _section_order(layout: Layout | None, payloads: dict[int, bytes]) -> list[tuple[int, int | None]]:
    if layout is not None:
        return [(sid, align) for sid, align in layout.sections if sid in payloads]
    return [(SECTION_IDS[name], align) for name, align in _CANONICAL if SECTION_IDS[name] in payloads]


def _payloads(module: Module, tables: TableSet, layout: Layout | None) -> dict[int, bytes]:
    present = {sid for sid, _ in layout.sections} if layout is not None else set()
    has_debug = SECTION_IDS["debug"] in present or _any_location(module)
    func, debug_runs = _func_section(module, tables, has_debug)
    payloads = {SECTION_IDS["func"]: func}
    if module.globals:
        payloads[SECTION_IDS["global"]] = _global_section(module, tables)
    if module.producer is not None:
        if tables.version < V13_3:
            raise UnsupportedVersionError(f"the producer section needs bytecode 13.3+, target is {tables.version}")
        producer = ByteWriter()
        producer.varint(tables.string(module.producer))
        payloads[SECTION_IDS["producer"]] = bytes(producer.buf)
    if has_debug:
        payloads[SECTION_IDS["debug"]] = _debug_section(debug_runs, tables)
    if len(tables.constants) or layout is None or SECTION_IDS["constant"] in present:
        payloads[SECTION_IDS["constant"]] = _table(tables.constants.entries(), 8)
    if len(tables.types) or SECTION_IDS["type"] in present:
        payloads[SECTION_IDS["type"]] = _table(tables.types.entries(), 4)
    payloads[SECTION_IDS["string"]] = _table(tables.strings.entries(), 4)
    return payloads


def _any_location(module: Module) -> bool:
    from tile.ir._location import CallSite, DILoc

    locs = [fn.loc for fn in module.functions] + [op.loc for fn in module.functions for op in fn.walk()]
    return any(isinstance(loc, (DILoc, CallSite)) for loc in locs)


def _table(entries: list[bytes], width: int) -> bytes:
    out = ByteWriter()
    encode_table(out, entries, width)
    return bytes(out.buf)


def _func_section(module: Module, tables: TableSet, has_debug: bool) -> tuple[bytes, list[list[int]]]:
    out = ByteWriter()
    out.varint(len(module.functions))
    names: set[str] = set()
    runs: list[list[int]] = []
    for index, fn in enumerate(module.functions):
        if not fn.name or fn.name in names:
            raise VerifyError(f"function names must be unique and non-empty; got {fn.name!r} twice or empty")
        names.add(fn.name)
        body = BodyWriter(tables, fn.name)
        code = body.body(fn.body)
        runs.append([tables.location(fn.loc), *body.locs])
        _function_record(fn, tables, out, index + 1 if has_debug else 0, code)
    return bytes(out.buf), runs


def _function_record(fn: Function, tables: TableSet, out: ByteWriter, loc_index: int, code: bytes) -> None:
    if not isinstance(fn.type, FunctionType) or fn.type.results:
        raise VerifyError(f"@{fn.name}: an entry's signature must be a function type without results")
    out.varint(tables.string(fn.name))
    out.varint(tables.type(fn.type))
    modern = tables.version >= V13_5
    with_hints = fn.entry and fn.hints is not None and not modern
    out.byte((_FLAG_ENTRY if fn.entry else 0) | (_FLAG_HINTS if with_hints else 0))
    out.varint(loc_index)
    if with_hints or (modern and fn.entry):
        tables.attr(fn.hints or OptimizationHints(()), out)
    if modern:
        tables.attr(fn.arg_attrs or ArrayAttr(()), out)
    elif fn.arg_attrs is not None and fn.arg_attrs.elements:
        raise UnsupportedVersionError(f"@{fn.name}: argument attributes need bytecode 13.5+")
    out.varint(len(code))
    out.raw(code)


def _global_section(module: Module, tables: TableSet) -> bytes:
    out = ByteWriter()
    out.varint(len(module.globals))
    for g in module.globals:
        out.varint(tables.string(g.name))
        out.varint(tables.type(g.type))
        out.varint(tables.constant(g.value.data))
        out.varint(g.alignment)
        if tables.version >= V13_3:
            out.varint(int(g.visibility))
            out.varint(int(g.constant))
        elif g.constant or g.visibility:
            raise UnsupportedVersionError(f"global {g.name!r}: constant/private globals need bytecode 13.3+")
    return bytes(out.buf)


def _debug_section(runs: list[list[int]], tables: TableSet) -> bytes:
    out = ByteWriter()
    out.varint(len(runs))
    out.pad_to(4)
    start = 0
    for run in runs:
        out.raw(start.to_bytes(4, "little"))
        start += len(run)
    out.varint(start)
    out.pad_to(8)
    for run in runs:
        for attr_id in run:
            out.raw(attr_id.to_bytes(8, "little"))
    entries = tables.debug.entries() or [b"\x00"]  # an empty attribute table trips NVIDIA's decoder
    encode_table(out, entries, 4)
    return bytes(out.buf)
