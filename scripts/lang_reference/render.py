"""Render docs/frontend/language-reference.md from the compiler's tables and the hand-written parts beside this file.

Sources of truth: the op catalog `tile.compiler.lang.OPS` (names, parameters, families, Tile IR ops, one-line docs),
the method table `METHODS`, the annotations of `tile.compiler.lang`, the dtype table, the math-mode table of
`tile.compiler._math_modes` (read from the Tile IR op catalog) and the signature of ``tile.entry``. What no table
holds (per-family prose and dtypes, the methods that are not ops, the examples) lives in `sections` and the
``snippets_*`` modules. `check_coverage` refuses a page that leaves anything out: a new op, family, method or entry
option without docs and an example is an error here, and so a test failure.
"""

from __future__ import annotations

import inspect
import re

import tile.frontend as tile
from lang_reference.sections import (
    ENTRY_OPTIONS,
    FAMILY_DTYPES,
    FAMILY_IR,
    IR_NOTES,
    METHOD_DOCS,
    RECEIVERS,
    SECTIONS,
    TUPLE_DOC,
)
from lang_reference.snippets_math import MATH_SNIPPETS
from lang_reference.snippets_memory import MEMORY_SNIPPETS, PRINTS
from tile.compiler import lang
from tile.compiler._math_modes import FTZ_OPS, roundings
from tile.compiler._typecheck_raw import _ATOMIC_MODES
from tile.compiler._types import DTYPES
from tile.compiler.lang import METHODS, OPS, LangOp

__all__ = ["PAGE", "PRELUDE", "GenError", "check_coverage", "render", "snippets"]

PAGE = "docs/frontend/language-reference.md"
PRELUDE = """\
import numpy as np
import tile.frontend as tile
from tile.frontend import Const, Mut, Ptr, Tensor, f16, f32, i32
"""
GLOBALS_DOC = (
    "A kernel (and every helper it calls) may read module globals, closure variables and module attributes; they are "
    "read when it compiles. Each one is either a value, compiled in: an `int`, `float`, `bool`, `str`, `None`, a "
    "dtype, an enum member (`Mode.FAST`, compared with `==`), or a `tuple`/`frozenset` of those, nested to any "
    "depth; or code: a module, a class, a function, a `@tile.function` helper, a kernel-language op. Values are part "
    "of the compile-cache key, and every call checks them again (by identity, then by type and value where the object "
    "changed): rebinding one to another value compiles the kernel again, to an equal value does not. Anything else (a "
    "list, a dict, a numpy array, an arbitrary object) is a compile error at the line that reads it, since it could "
    "change without the compiled kernel knowing: pass it as a `Const[...]` parameter, or make it a tuple. A "
    "decorator's arguments are not read at compile time and may be anything `@tile.entry` accepts. Python's `math` "
    "functions fold at compile time when every argument is a compile-time number (`math.sqrt(2.0 / math.pi)` in a "
    "GELU is a float constant); on a tile or a run-time scalar they are a compile error naming the tile op to use "
    "(`tile.sqrt`)."
)
ANNOTATIONS = ("Tensor", "Mut", "Const", "Ptr", "tuple")
TOPICS = ("tile methods", "entry", "by_arch", "globals")


class GenError(Exception):
    """The tables and the hand-written parts disagree: something is undocumented, or documented but gone."""


def snippets() -> dict[str, str]:
    """Every example on the page by key (an op, a method row, an annotation or a topic), as a complete script
    without the prelude."""
    both = {**MATH_SNIPPETS, **MEMORY_SNIPPETS}
    if len(both) != len(MATH_SNIPPETS) + len(MEMORY_SNIPPETS):
        raise GenError(f"examples defined twice: {sorted(set(MATH_SNIPPETS) & set(MEMORY_SNIPPETS))}")
    return both


def _method_rows() -> dict[str, list[str]]:
    """Each non-op method row (``partition_load``) and the ``receiver.method`` spellings that reach it."""
    rows: dict[str, list[str]] = {}
    for kind, table in METHODS.items():
        if kind == "tile":
            continue
        for method, row in table.items():
            rows.setdefault(row, []).append(f"{RECEIVERS[kind]}.{method}")
    return rows


def check_coverage() -> None:
    """Raise `GenError` unless every op, family, method, annotation and entry option is documented with an
    example, and every hand-written entry still names something that exists."""
    families = [f for s in SECTIONS for f in s.families]
    problems: list[str] = []
    if len(families) != len(set(families)):
        problems.append("a family is listed in two sections")
    missing = {op.family for op in OPS.values()} - set(families)
    problems += [f"op family {f!r} is in no section of sections.SECTIONS" for f in sorted(missing)]
    problems += [f"family {f!r} has no dtypes in sections.FAMILY_DTYPES" for f in families if f not in FAMILY_DTYPES]
    problems += [
        f"tile.{n} lowers to no listed Tile IR op and has no IR_NOTES entry"
        for n, op in OPS.items()
        if not any(op.ir) and n not in IR_NOTES
    ]
    rows = _method_rows()
    problems += [
        f"method row {r!r} ({', '.join(rows[r])}) has no sections.METHOD_DOCS entry"
        for r in rows
        if r not in METHOD_DOCS
    ]
    problems += [f"tile method {m!r} is no OPS row" for m in METHODS["tile"].values() if m not in OPS]
    wanted = [*OPS, *rows, *ANNOTATIONS, *TOPICS]
    examples = snippets()
    problems += [f"{k!r} has no example in the snippets modules" for k in wanted if k not in examples]
    problems += [f"example {k!r} documents nothing that exists" for k in examples if k not in wanted]
    problems += [f"example {k!r} checks nothing (no assertion)" for k, code in examples.items() if "assert" not in code]
    shown = examples.get("tile methods", "")
    problems += [f"the tile methods example does not call .{m}(" for m in METHODS["tile"] if f".{m}(" not in shown]
    options = [n for n, p in inspect.signature(tile.entry).parameters.items() if p.kind is p.KEYWORD_ONLY]
    if sorted(options) != sorted(ENTRY_OPTIONS):
        problems.append(f"sections.ENTRY_OPTIONS lists {sorted(ENTRY_OPTIONS)}, tile.entry takes {sorted(options)}")
    problems += [f"PRINTS names {k!r}, which has no example" for k in PRINTS if k not in examples]
    if problems:
        raise GenError("the language reference is out of date:\n  " + "\n  ".join(problems))


def _slug(title: str) -> str:
    """The anchor mkdocs (Python-Markdown's toc) gives a heading."""
    text = re.sub(r"[^\w\s-]", "", title).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def _signature(op: LangOp) -> str:
    parts = []
    for p in op.params:
        parts.append(f"*{p.name}" if p.variadic else p.name if p.required else f"{p.name}={p.default!r}")
    return f"tile.{op.name}({', '.join(parts)})"


def _ir(op: LangOp) -> str:
    if op.name in IR_NOTES:
        return IR_NOTES[op.name]
    if op.family == "atomic":
        signed, unsigned, floats = _ATOMIC_MODES[op.ir[0]]
        kinds = f"`{signed}` (signed ints), `{unsigned}` (unsigned ints), " + (
            f"`{floats}` (floats)" if floats else "no float mode"
        )
        return f"`atomic_rmw_tko` with `mode`: {kinds}"
    names = [n for n in op.ir if n]
    if len(op.ir) == 2 and all(op.ir) and op.ir[0] != op.ir[1]:
        text = f"`{op.ir[0]}` (floats), `{op.ir[1]}` (ints)"
    else:
        text = ", ".join(f"`{n}`" for n in names) + (" (floats only)" if len(op.ir) == 2 and not op.ir[1] else "")
    return FAMILY_IR.get(op.family, "{ir}").format(ir=text)


def _modes(op: LangOp) -> tuple[str, str] | None:
    """What ``rounding=`` and ``flush_to_zero=`` of ``op`` accept (``None`` when it takes neither parameter)."""
    takes = {p.name for p in op.params} & {"rounding", "flush_to_zero"}
    if not takes:
        return None
    ir = op.ir[0]
    allowed = roundings(ir) if "rounding" in takes else ()
    rnd = ", ".join(f'`"{r}"`' for r in allowed) or "—"
    ftz = "yes" if "flush_to_zero" in takes and ir in FTZ_OPS else "—"
    return ftz, rnd


def _modes_line(op: LangOp) -> str | None:
    modes = _modes(op)
    if modes is None:
        return None
    ftz, rnd = modes
    if (ftz, rnd) == ("—", "—"):
        return "modes: none (`rounding=` and `flush_to_zero=` are compile errors; Tile IR's op has neither)"
    return f"modes: `flush_to_zero=` {'yes' if ftz == 'yes' else 'no'}; `rounding=` {rnd if rnd != '—' else 'no'}"


def _code(code: str, lang_name: str = "python") -> list[str]:
    return [f"```{lang_name}", *code.rstrip("\n").split("\n"), "```", ""]


def _example(key: str) -> list[str]:
    out = _code(snippets()[key])
    if key in PRINTS:
        out += ["prints", "", *_code(PRINTS[key], "text")]
    return out


def _op_entry(op: LangOp) -> list[str]:
    lines = [f"### `tile.{op.name}`", "", f"`{_signature(op)}`: {op.doc}.", ""]
    lines.append(f"- dtypes: {FAMILY_DTYPES[op.family]}")
    lines.append(f"- Tile IR: {_ir(op)}")
    if (modes := _modes_line(op)) is not None:
        lines.append(f"- {modes}")
    methods = [m for m, row in METHODS["tile"].items() if row == op.name]
    if methods:
        rest = ", ".join(p.name for p in op.params[1:] if not p.variadic)
        lines.append(f"- method: `t.{methods[0]}({rest})`")
    return [*lines, "", *_example(op.name)]


def _method_entry(row: str, spellings: list[str]) -> list[str]:
    doc = METHOD_DOCS[row]
    names = ", ".join(f"`{s}`" for s in spellings)
    sig = f"{spellings[0]}({doc.signature})"
    return [f"### {names}", "", f"`{sig}`: {doc.doc}.", "", f"- Tile IR: {doc.ir}", "", *_example(row)]


def _header() -> list[str]:
    toc = [f"- [{s.title}](#{_slug(s.title)})" for s in SECTIONS]
    return [
        "# Language reference",
        "",
        "<!-- Generated by `python scripts/gen_lang_reference.py` from tile.compiler's op catalog (OPS, METHODS), its",
        "     annotations, dtype and math-mode tables, and scripts/lang_reference/. Do not edit by hand. -->",
        "",
        "Every name the kernel language offers, with its signature, the dtypes it takes, the Tile IR ops it lowers "
        "to and a complete example. The page is generated from the compiler's own tables, and the test suite runs "
        "every example on the CPU interpreter (`tests/test_lang_reference.py`), so what is shown is what works. "
        "The [tutorial](tutorial.md) introduces the language; the [typing rules](../compiler/typing-rules.md) give "
        "promotion, broadcasting, operators and the memory rules in full.",
        "",
        "Each example is a script to run after this prelude:",
        "",
        *_code(PRELUDE),
        "- [Annotations and dtypes](#annotations-and-dtypes)",
        "- [Kernels and helpers](#kernels-and-helpers)",
        "- [Math modes](#math-modes)",
        *toc,
        "- [Tile methods](#tile-methods)",
        "",
    ]


def _annotations() -> list[str]:
    lines = ["## Annotations and dtypes", ""]
    kinds = {
        "Tensor": lang.TensorAnnotation,
        "Mut": lang.MutAnnotation,
        "Const": lang.ConstAnnotation,
        "Ptr": lang.PtrAnnotation,
    }
    for name in ANNOTATIONS:
        if name == "tuple":
            lines += ["### `tuple[Tensor[...], ...]`", "", TUPLE_DOC, "", *_example(name)]
            continue
        doc = " ".join(inspect.getdoc(kinds[name]).split())  # type: ignore[union-attr]  # all documented
        lines += [f"### `{name}`", "", doc, "", *_example(name)]
    lines += ["### Dtypes", "", "| name | kind | bits | numpy |", "|---|---|---|---|"]
    kind_names = {"b": "bool", "i": "signed int", "u": "unsigned int", "f": "float"}
    for dt in DTYPES.values():
        alias = " (`tile.bool_`)" if dt.name == "i1" else ""
        lines.append(f"| `tile.{dt.name}`{alias} | {kind_names[dt.kind]} | {dt.bits} | `{dt.numpy}` |")
    return [*lines, ""]


def _kernels() -> list[str]:
    lines = [
        "## Kernels and helpers",
        "",
        "`@tile.entry` makes a kernel and `@tile.entry(option=...)` one with options; `@tile.function` marks a "
        "helper, a plain Python function in the kernel language that kernels inline at each call.",
        "",
        "| option | takes | what it does |",
        "|---|---|---|",
    ]
    lines += [f"| `{name}` | {takes} | {what} |" for name, (takes, what) in ENTRY_OPTIONS.items()]
    lines += ["", *_example("entry")]
    lines += ["### `tile.by_arch`", "", " ".join(inspect.getdoc(tile.by_arch).split()), "", *_example("by_arch")]  # type: ignore[union-attr]
    lines += ["### Globals and closure variables", "", GLOBALS_DOC, "", *_example("globals")]
    return lines


def _math_modes() -> list[str]:
    lines = [
        "## Math modes",
        "",
        "Read from the Tile IR op catalog: a call takes `flush_to_zero=` where its Tile IR op has that attribute, and "
        "the roundings its `rounding_mode` allows; anything else is a compile error at the call. `flush_to_zero`, "
        '`"approx"` and `"full"` are f32-only. `@tile.entry(flush_to_zero=True, approx=True)` makes them the '
        "kernel's defaults.",
        "",
        "| call | Tile IR op | `flush_to_zero=` | `rounding=` |",
        "|---|---|---|---|",
    ]
    without = []
    for op in OPS.values():
        modes = _modes(op)
        if modes is None:
            continue
        if modes == ("—", "—"):
            without.append(f"`tile.{op.name}`")
            continue
        lines.append(f"| [`tile.{op.name}`](#tile{op.name}) | `{op.ir[0]}` | {modes[0]} | {modes[1]} |")
    lines += ["", f"{', '.join(without)} take neither mode: their Tile IR ops have no such attribute.", ""]
    return lines


def _tile_methods() -> list[str]:
    lines = [
        "## Tile methods",
        "",
        "A tile `t` also has these methods; each is the function of the same name with `t` as its first argument.",
        "",
        "| method | same as |",
        "|---|---|",
    ]
    for method, row in METHODS["tile"].items():
        rest = ", ".join(p.name for p in OPS[row].params[1:] if not p.variadic)
        lines.append(f"| `t.{method}({rest})` | [`tile.{row}`](#tile{row}) |")
    return [*lines, "", *_example("tile methods")]


def render() -> str:
    """The page, as committed (after `check_coverage`)."""
    check_coverage()
    rows = _method_rows()
    lines = [*_header(), *_annotations(), *_kernels(), *_math_modes()]
    for section in SECTIONS:
        lines += [f"## {section.title}", "", section.intro, ""]
        lines += [ln for op in OPS.values() if op.family in section.families for ln in _op_entry(op)]
        lines += [
            ln for row, sp in rows.items() if METHOD_DOCS[row].section == section.key for ln in _method_entry(row, sp)
        ]
    lines += _tile_methods()
    return "\n".join(lines).rstrip("\n") + "\n"
