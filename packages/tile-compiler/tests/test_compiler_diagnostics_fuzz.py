"""Robustness: random (mostly ill-typed) kernel expressions either compile or raise a CompileError that points at
the kernel's line; the checker never crashes with an internal error or a stray Python exception."""

from __future__ import annotations

import importlib.util
import itertools
import shutil
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tile.compiler._diagnostics import CompileError
from tile.compiler._parse import parse
from tile.compiler._resolve import resolve
from tile.compiler._spec import Specialization, Target
from tile.compiler._typecheck import typecheck

_counter = itertools.count()
_DIR = Path(tempfile.mkdtemp(prefix="tile_diag_fuzz_"))


@pytest.fixture(scope="module", autouse=True)
def _remove_the_kernel_files() -> Iterator[None]:
    """The generated kernel sources stay in _DIR while the module runs (diagnostics read them), then go."""
    yield
    shutil.rmtree(_DIR, ignore_errors=True)


leaves = st.sampled_from(
    ["x", "v", "i", "2", "2.5", "True", "(1, 2)", "f32", "i32", "tile", "None", "'s'", "x.shape", "BM", "z"]
)
unary = st.sampled_from(
    [
        "tile.exp({})",
        "tile.sum({}, axis=1)",
        "tile.max({})",
        "{}.astype(i32)",
        "{}.reshape((BN, BM))",
        "-{}",
        "tile.argmax({}, 0)",
        "{}.T",
        "tile.cumsum({}, 1)",
        "{}[0]",
        "tile.broadcast_to({}, (BM, BN))",
        "not {}",
        "tile.isnan({})",
        "tile.expand_dims({}, 0)",
        "{}.dtype",
        "tile.arange({})",
    ]
)
binary = st.sampled_from(
    [
        "{} + {}",
        "{} * {}",
        "{} // {}",
        "{} / {}",
        "{} < {}",
        "tile.maximum({}, {})",
        "tile.where({} > 0, {}, 1.0)",
        "tile.mma({}, {}, tile.zeros((BM, BM), f32))",
        "tile.cat({}, {}, 0)",
        "{} & {}",
        "{} @ {}",
        "{} % {}",
        "tile.full((BM,), {}, {})",
        "{} if {} else 0",
    ]
)


def _grow(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.tuples(unary, children).map(lambda t: t[0].format(t[1])),
        st.tuples(binary, children, children).map(lambda t: t[0].format(t[1], t[2], t[2])),
    )


expressions = st.recursive(leaves, _grow, max_leaves=6)

_TEMPLATE = """
import tile.compiler.lang as tile
from tile.compiler.lang import Mut, Tensor, f16, f32, i32


def fuzz(z: Mut[Tensor[f32, ("BM", "BN")]], xs: Tensor[f16, (-1, -1)], vs: Tensor[f32, -1]):
    bm, bn, _ = tile.block_id()
    x = xs.partition((BM, BN)).load((bm, bn))
    v = vs.partition((BN,)).load((bn,))
    i = bm
    r = {expr}
    z.store(r)
"""


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expressions)
def test_random_expressions_compile_or_report_at_the_users_line(expr: str) -> None:
    text = _TEMPLATE.format(expr=expr)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # "2[0]" is a SyntaxWarning that the test run turns into an error
            compile(text, "<fuzz>", "exec")
    except SyntaxError:
        assume(False)  # e.g. "2.astype(i32)": not Python, so not the compiler's business
    path = _DIR / f"tile_diag_{next(_counter)}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None
    assert spec.loader is not None
    module: Any = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    error: CompileError | None = None
    try:
        typecheck(resolve(parse(module.fuzz)), Specialization.make(consts={"BM": 16, "BN": 32}), Target("sm_90"))
    except CompileError as err:
        error = err
    if error is not None:
        assert not error.message.startswith("internal compiler error"), error.message
        assert error.filename == str(path)
        assert error.line in (11, 12), str(error)  # the expression's line or the store of its result
