"""Random elementwise kernels (operators, constants, broadcasting, promotion, select, math) compile, run in tile.ir's
interpreter and agree with the same expression evaluated by numpy in the kernel's dtypes."""

from __future__ import annotations

import importlib.util
import itertools
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tile.compiler import specialize
from tile.compiler._lower import lower
from tile.compiler._parse import parse
from tile.compiler._resolve import resolve
from tile.compiler._spec import Target
from tile.compiler._typecheck import typecheck
from tile.ir import interp  # a declared dependency (tile-ir[interp]): missing, it must fail, not skip

ROWS, COLS, BM, BN = 32, 64, 16, 32
_counter = itertools.count()
_DIR = Path(tempfile.mkdtemp(prefix="tile_fuzz_"))


@pytest.fixture(scope="module", autouse=True)
def _remove_the_kernel_files() -> Iterator[None]:
    """The generated kernel sources stay in _DIR while the module runs (diagnostics read them), then go."""
    yield
    shutil.rmtree(_DIR, ignore_errors=True)


# (kernel text, numpy text) pairs; "x" is a (BM, BN) tile, "v" a (BN,) row that broadcasts.
# Float constants only: an int constant alone (tile.where(c, 3, 3)) is an i32 tile, which the typing rules refuse to
# add to a float tile implicitly (the examples below cover int constants next to float tiles).
leaves = st.sampled_from([("x", "x"), ("v", "v"), ("2.0", "2.0"), ("0.5", "0.5"), ("-3.0", "-3.0")])


def _combine(children: st.SearchStrategy[tuple[str, str]]) -> st.SearchStrategy[tuple[str, str]]:
    binary = st.tuples(st.sampled_from(["+", "-", "*"]), children, children).map(
        lambda t: (f"({t[1][0]} {t[0]} {t[2][0]})", f"({t[1][1]} {t[0]} {t[2][1]})")
    )
    fns = st.tuples(st.sampled_from(["maximum", "minimum"]), children, children).map(
        lambda t: (f"tile.{t[0]}({t[1][0]}, {t[2][0]})", f"np.{t[0]}({t[1][1]}, {t[2][1]})")
    )
    select = st.tuples(children, children, children).map(
        lambda t: (
            f"tile.where({t[0][0]} > 0.0, {t[1][0]}, {t[2][0]})",
            f"np.where({t[0][1]} > 0, {t[1][1]}, {t[2][1]})",
        )
    )
    unary = st.tuples(st.sampled_from(["abs", "negative"]), children).map(
        lambda t: (f"tile.{t[0]}({t[1][0]})", f"np.{t[0]}({t[1][1]})")
    )
    division = st.tuples(children, children).map(
        lambda t: (f"({t[0][0]} / (tile.abs({t[1][0]}) + 1.0))", f"({t[0][1]} / (np.abs({t[1][1]}) + 1.0))")
    )
    return st.one_of(binary, fns, select, unary, division)


expressions = st.recursive(leaves, _combine, max_leaves=8).filter(lambda e: re.search(r"\bx\b", e[0]) is not None)

_TEMPLATE = """
import tile.compiler.lang as tile
from tile.compiler.lang import Mut, Tensor, {xd}, f32


def fuzz(z: Mut[Tensor[f32, ("BM", "BN")]], xs: Tensor[{xd}, (-1, -1)], vs: Tensor[f32, -1]):
    bm, bn, _ = tile.block_id()
    x = xs.partition((BM, BN)).load((bm, bn))
    v = vs.partition((BN,)).load((bn,))
    z.store(tile.zeros((BM, BN), f32) + ({expr}))
"""


def _kernel(expr: str, xd: str) -> Any:
    path = _DIR / f"tile_fuzz_{next(_counter)}.py"
    path.write_text(_TEMPLATE.format(expr=expr, xd=xd))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.fuzz


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@example(("tile.where(x > 0.0, 3, 2.0)", "np.where(x > 0, 3, 2.0)"), "f32", 0)  # two constants of different kinds
@example(("(x // 1.0) * 3 - x % 2.0 + v * 2", "(x // 1.0) * 3 - np.mod(x, 2.0) + v * 2"), "f16", 1)
@example(("x % -0.5 + (v // 0.5)", "np.mod(x, -0.5) + np.floor_divide(v, 0.5)"), "f32", 2)
@given(expressions, st.sampled_from(["f32", "f16"]), st.integers(0, 2**32 - 1))
def test_random_elementwise_kernels_match_numpy(expr: tuple[str, str], xd: str, seed: int) -> None:
    kernel = _kernel(expr[0], xd)
    rng = np.random.default_rng(seed)
    xs = rng.uniform(-2, 2, (ROWS, COLS)).astype("float16" if xd == "f16" else "float32")
    vs = rng.uniform(-2, 2, COLS).astype("float32")
    z = np.full((ROWS, COLS), np.nan, np.float32)
    spec = specialize(kernel, {"z": z.shape, "xs": xs.shape, "vs": vs.shape}, consts={"BM": BM, "BN": BN})
    target = Target("sm_90")
    module = lower(typecheck(resolve(parse(kernel)), spec, target), target).module
    args = [z, *z.shape, COLS, 1, xs, *xs.shape, COLS, 1, vs, COLS, 1]
    interp.launch(module, (ROWS // BM, COLS // BN), args)
    # The numpy twin in the kernel's own dtypes (numpy's weak Python-float constants keep f16 as the kernel's do):
    # a float64 twin disagrees wherever f16 rounding flips a select, e.g. x * x underflowing to 0 in `x * x > 0`.
    x, v = xs, vs[None, :]
    want = np.broadcast_to(eval(expr[1], {"np": np, "x": x, "v": v}), z.shape).astype("float64")
    tol = 2e-2 if xd == "f16" else 1e-4
    np.testing.assert_allclose(z, want, rtol=tol, atol=tol)
