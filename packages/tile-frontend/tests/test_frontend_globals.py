"""Globals a kernel reads at compile time, on the CPU interpreter and on both launch paths: a value (a number, a string,
None, a dtype, an enum member, or a tuple/frozenset of those, nested) is compiled in and checked on every call, so a
rebinding to another value recompiles and one to an equal value does not; a mutable global (a list) is refused at the
line that reads it."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import tile.frontend as tile
from tile.compiler import CompileError, compile_kernel
from tile.compiler._captures import Captures
from tile.frontend import _entry, f16, f32

KERNELS = Path(__file__).parent / "kernels" / "global_kernels.py"


@pytest.fixture
def g(globk: ModuleType) -> ModuleType:
    """The kernels of ``tests/kernels/global_kernels.py`` (their globals are rebound by the tests, then restored)."""
    return globk


@pytest.fixture
def compiles(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the kernels compiled (asked of tile.compiler) while the test runs."""
    seen: list[str] = []
    real = compile_kernel

    def counting(fn: Callable[..., object], *args: Any, **kwargs: Any) -> Any:
        seen.append(getattr(fn, "__name__", "?"))
        return real(fn, *args, **kwargs)

    monkeypatch.setattr(_entry, "compile_kernel", counting)
    return seen


def run(kernel: Any, *inputs: np.ndarray) -> np.ndarray:
    """Launch ``kernel`` on a 16-element f32 output in tiles of 8 and return the output (tensors made by tile, so a
    repeated launch takes the compiled path's plan where the extension is active)."""
    out = tile.zeros(f32, [16]).partition([8])
    result = kernel(out, *(tile.from_numpy(x) for x in inputs)).sync()
    host: np.ndarray = result[0].unpartition().to_numpy()
    return host


def test_a_changed_tuple_global_recompiles_and_gives_the_new_result(
    g: ModuleType, path: str, monkeypatch: pytest.MonkeyPatch, compiles: list[str]
) -> None:
    monkeypatch.setattr(g, "SUB", (2,))
    assert (run(g.fill_sub) == 2).all()
    assert (run(g.fill_sub) == 2).all()  # the fast path of the same layout: still the (2,) kernel
    monkeypatch.setattr(g, "SUB", (4,))
    assert (run(g.fill_sub) == 4).all()  # the sub-tile shape (4,), not the cached (2,) kernel
    assert (run(g.fill_sub) == 4).all()
    monkeypatch.setattr(g, "SUB", (2,))
    assert (run(g.fill_sub) == 2).all()
    assert compiles.count("fill_sub") <= 3  # one per rebinding at most (the first may be cached from another test)


def test_a_global_rebound_to_an_equal_value_does_not_recompile(
    g: ModuleType, path: str, monkeypatch: pytest.MonkeyPatch, compiles: list[str]
) -> None:
    monkeypatch.setattr(g, "SUB", (2,))
    run(g.fill_sub)
    compiles.clear()
    for _ in range(3):
        monkeypatch.setattr(
            g, "SUB", tuple(range(2, 3))
        )  # (2,), a new tuple object each time, equal to the compiled one
        assert (run(g.fill_sub) == 2).all()
    assert compiles == []
    monkeypatch.setattr(g, "SUB", (8,))
    assert (run(g.fill_sub) == 8).all()
    assert compiles == ["fill_sub"]


def test_a_module_attribute_and_a_closure_variable_are_reads_too(
    g: ModuleType, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(g.cfg, "SUB", (2,))
    assert (run(g.fill_cfg) == 2).all()
    monkeypatch.setattr(g.cfg, "SUB", (4,))
    assert (run(g.fill_cfg) == 4).all()
    fill_box, rebind = g.closure_kernel((2,))
    assert (run(fill_box) == 2).all()
    assert (run(fill_box) == 2).all()
    rebind((8,))
    assert (run(fill_box) == 8).all()
    rebind([8])
    with pytest.raises(CompileError, match=re.escape("reads the mutable global 'box' (a list)")):
        run(fill_box)


def test_a_list_global_is_refused_at_the_line_that_reads_it(g: ModuleType, path: str) -> None:
    line = next(i for i, text in enumerate(KERNELS.read_text().splitlines(), 1) if text.endswith("# reads TABLE"))
    message = (
        rf"global_kernels\.py:{line}:\d+: error: the kernel reads the mutable global 'TABLE' \(a list\) at compile "
        r"time.*Pass it as a Const\[\.\.\.\] parameter, or make it a tuple"
    )
    with pytest.raises(CompileError, match=message):
        g.fill_table(tile.from_numpy(np.zeros(16, np.float32)).partition([8]))


def test_a_tuple_global_rebound_to_a_list_is_refused_on_the_next_call(
    g: ModuleType, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(g, "SUB", (2,))
    assert (run(g.fill_sub) == 2).all()
    monkeypatch.setattr(g, "SUB", [2])
    host = np.zeros(16, np.float32)
    out = tile.from_dlpack(host).partition([8])
    with pytest.raises(CompileError, match=re.escape("reads the mutable global 'SUB' (a list)")):
        g.fill_sub(out)
    monkeypatch.setattr(g, "SUB", (4,))
    g.fill_sub(out).sync()  # the refused call moved nothing: the handle is still usable
    assert (host == 4).all()


def test_nested_tuples_dtypes_and_frozensets_are_values(
    g: ModuleType, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert (run(g.fill_nested) == 105).all()  # ((2, (3,)), f32) and 4 in {4, 8}
    monkeypatch.setattr(g, "NESTED", ((1, (6,)), f16))
    assert (run(g.fill_nested) == 107).all()
    monkeypatch.setattr(g, "SIZES", frozenset({8, 16}))
    assert (run(g.fill_nested) == 7).all()


def test_an_enum_global_switches_the_compiled_code(g: ModuleType, path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    x = np.arange(16, dtype=np.float32) + 0.25
    monkeypatch.setattr(g, "MODE", g.Mode.DOUBLE)
    np.testing.assert_array_equal(run(g.by_mode, x), 2 * x)
    monkeypatch.setattr(g, "MODE", g.Mode.NEGATE)
    np.testing.assert_array_equal(run(g.by_mode, x), -x)


def test_a_dtype_global_switches_the_compiled_code(g: ModuleType, path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    x = (np.arange(16, dtype=np.float32) + 1) / 3
    monkeypatch.setattr(g, "HALF", f16)
    np.testing.assert_array_equal(run(g.cast_through, x), x.astype(np.float16).astype(np.float32))
    monkeypatch.setattr(g, "HALF", f32)
    np.testing.assert_array_equal(run(g.cast_through, x), x)


@pytest.mark.parametrize(
    ("before", "after", "fresh"),
    [
        ((2, (3,)), (2, tuple(range(3, 4))), True),  # equal, another object: adopted
        (1, True, False),  # equal in Python, compiled differently
        (1, 1.0, False),
        (0.0, -0.0, False),  # a float is a value by its bits
        (frozenset({1, 2}), frozenset({2, 1}), True),
        (f32, f16, False),
    ],
)
def test_captures_compare_by_identity_then_by_type_and_value(before: object, after: object, fresh: bool) -> None:
    namespace: dict[str, object] = {"X": before}
    captured = Captures(((namespace, "X", before),))
    namespace["X"] = after
    assert captured.fresh() is fresh
    if fresh:  # the equal value was adopted: the next test is by identity
        assert captured.key() == Captures(((namespace, "X", after),)).key()
        del namespace["X"]
        assert captured.fresh() is False
