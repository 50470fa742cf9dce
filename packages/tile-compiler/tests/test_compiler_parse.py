"""Stages parse and resolve: source capture and positions, helper discovery, the parameter kinds, name binding."""

from __future__ import annotations

import ast
import importlib
import inspect
import sys
from pathlib import Path
from typing import Any

import pytest

from tile.compiler._diagnostics import CompileError
from tile.compiler._parse import parse
from tile.compiler._resolve import resolve
from tile.compiler._types import DTYPES
from tile.compiler.lang import OPS

CORPUS = Path(__file__).parent / "corpus"
if str(CORPUS) not in sys.path:
    sys.path.insert(0, str(CORPUS))
k: Any = importlib.import_module("tc_unit_kernels")
lib: Any = importlib.import_module("tc_corpus_lib")


def test_parse_keeps_file_and_line_of_the_def() -> None:
    tree = parse(k.every_param_kind)
    lines, first = inspect.getsourcelines(k.every_param_kind)
    assert tree.filename == k.__file__
    assert tree.first_line == first
    assert tree.name == "every_param_kind"
    assert isinstance(tree.tree, ast.FunctionDef)
    body_line = tree.tree.body[0].lineno + tree.line_offset
    assert "z.store" in lines[body_line - first]
    assert tree.loc(tree.tree.body[0]).line == body_line
    assert tree.loc(tree.tree.body[0]).source_line.strip().startswith("z.store(")


def test_parse_is_cached_per_function() -> None:
    assert parse(k.promotes) is parse(k.promotes)


def test_parse_finds_helpers_across_modules_and_hashes_them() -> None:
    tree = parse(k.inlines)
    helpers = {h.name for h in tree.helpers}
    assert helpers == {"twice", "clamp"}
    assert parse(lib.clamp) in tree.helpers
    assert len(tree.source_hash) == 64
    assert tree.source_hash != parse(k.promotes).source_hash


def test_parse_rejects_lambdas_and_builtins() -> None:
    with pytest.raises(CompileError, match="must be a plain 'def' function"):
        parse(lambda z: z)
    with pytest.raises(CompileError, match="cannot read the source of 'len'"):
        parse(len)


def test_dump_shows_the_ast() -> None:
    text = parse(k.promotes).dump()
    assert text.startswith("# promotes from ")
    assert "FunctionDef" in text


def test_resolve_parameter_kinds() -> None:
    r = resolve(parse(k.every_param_kind))
    kinds = {p.name: (p.kind, p.dtype.name if p.dtype else None, p.shape) for p in r.params}
    assert kinds == {
        "z": ("mut", "f32", ("BM", "BN")),
        "x": ("tensor", "f16", (-1, 64)),
        "n": ("scalar", "i32", ()),
        "s": ("scalar", "f32", ()),
        "flag": ("scalar", "i1", ()),
        "k": ("const", None, ()),
    }
    assert r.params[-1].const_kind is int


def test_resolve_binds_free_names_and_treats_generics_as_locals() -> None:
    r = resolve(parse(k.every_param_kind))
    assert r.names["tile"].sum is OPS["sum"]
    assert r.names["f32"] is DTYPES["f32"]
    assert {"BM", "BN", "z", "x"} <= r.locals
    assert "BM" not in r.names
    assert "param z: mut" in r.dump()


def test_resolve_binds_module_attributes_lazily() -> None:
    r = resolve(parse(k.inlines))
    assert r.names["lib"] is lib
    assert r.names["twice"] is k.twice


def test_no_function_attribute_marks_a_kernel_unchecked() -> None:
    # unchecked=True is a compile option of one kernel object; a mark on the shared function would leak to its
    # checked twins (tile.entry(body) beside tile.entry(unchecked=True)(body)), so parsing reads none.
    memory: Any = importlib.import_module("tc_corpus_memory")
    memory.inplace_scale.__tile_unchecked__ = True
    try:
        assert not hasattr(resolve(parse(memory.inplace_scale)), "unchecked")
        assert not hasattr(parse(memory.inplace_scale), "unchecked")
    finally:
        del memory.inplace_scale.__tile_unchecked__
