"""One error root: ``except tile.TileError`` (the frontend's) catches whatever any Tile package raises.

One case per package raises a real error through that package's public API (no GPU needed) and catches it as the
frontend's ``TileError``; a walk over every module of every package checks that each exception class defined there
derives from the one root, `tile.errors.TileError`, and that every package's ``TileError`` is that same class.
A package that legitimately defines no exception class of its own (tile-kernels raises the frontend's) is listed in
`DEFINES_NONE`: the walk still imports and scans each of its modules and must then find nothing, so a class added
there later fails here until it is checked like every other package's.
"""

from __future__ import annotations

import copy
import importlib
import inspect
import pkgutil
from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import tile.frontend as tile
from tile.errors import TileError as Root

PACKAGES = [
    "tile.errors",
    "tile.ir",
    "tile.bindings",
    "tile.core",
    "tile.aio",
    "tile.compiler",
    "tile.frontend",
    "tile.kernels",
]
# Packages whose modules define no exception class, and why (the walk checks that they still define none).
DEFINES_NONE: dict[str, str] = {}  # none today: tile.kernels defines WeightsError (qwen3)


def _modules(name: str) -> list[ModuleType]:
    package = importlib.import_module(name)
    found = [package]
    for info in pkgutil.walk_packages(package.__path__, prefix=f"{name}."):
        if info.name.rsplit(".", 1)[-1] == "__main__":
            continue  # importing a __main__ runs the command line
        found.append(importlib.import_module(info.name))
    return found


def _exception_classes(module: ModuleType) -> list[type[BaseException]]:
    return [
        cls
        for _, cls in inspect.getmembers(module, inspect.isclass)
        if issubclass(cls, BaseException) and cls.__module__ == module.__name__
    ]


@pytest.mark.parametrize("name", PACKAGES)
def test_every_exception_class_a_package_defines_derives_from_the_one_root(name: str) -> None:
    classes = [cls for module in _modules(name) for cls in _exception_classes(module)]
    if name in DEFINES_NONE:
        assert classes == [], f"{name} now defines {classes}: take it out of DEFINES_NONE so they are checked"
    else:
        assert classes, f"{name} defines no exception class: the walk found nothing to check"
    strays = sorted(f"{cls.__module__}.{cls.__qualname__}" for cls in classes if not issubclass(cls, Root))
    assert strays == []


@pytest.mark.parametrize("name", PACKAGES)
def test_every_package_re_exports_the_root_itself(name: str) -> None:
    assert importlib.import_module(name).TileError is Root
    assert tile.TileError is Root


def test_the_walk_finds_a_stray_exception_class() -> None:
    stray = ModuleType("stray")
    exec("class LostError(Exception): pass", stray.__dict__)
    stray.LostError.__module__ = "stray"
    assert [c.__name__ for c in _exception_classes(stray)] == ["LostError"]
    assert not issubclass(stray.LostError, tile.TileError)


def _race() -> None:
    """Two tile blocks store to one tile of z: the tile-ir interpreter's race detector reports it."""
    from tile.ir import (
        Builder,
        Function,
        FunctionType,
        Module,
        PartitionViewType,
        TensorViewType,
        f32,
        i32,
        interp,
        ptr,
        scalar,
    )

    i32s = scalar(i32)
    fn = Function("race", FunctionType((scalar(ptr(f32)), i32s, i32s) * 2))
    b = Builder(fn.body)
    tv = TensorViewType(f32, (None,), (None,))
    x, z = (
        b.call("make_tensor_view", fn.params[k], [fn.params[k + 1]], [fn.params[k + 2]], result_type=tv).results[0]
        for k in (0, 3)
    )
    pv = PartitionViewType((4,), tv, (0,))
    tok = b.make_token()
    bx, _, _ = b.get_tile_block_id()
    tx, _ = b.load_view_tko(b.make_partition_view(x, result_type=pv), [bx], tok)
    b.call("store_view_tko", tx, b.make_partition_view(z, result_type=pv), [b.constant(0, i32s)], tok)
    b.return_()
    xs, zs = np.arange(16, dtype=np.float32), np.zeros(16, np.float32)
    interp.launch(Module([fn]), 4, [xs, 16, 1, zs, 16, 1])


def _verify() -> None:
    from tile.ir import Builder, Function, FunctionType, Module, verify

    fn = Function("no_return", FunctionType(()))
    Builder(fn.body)  # a body without its terminator
    verify(Module([fn]))


def _bytecode() -> None:
    from tile.ir import read_bytecode

    read_bytecode(b"\x7fTileIR\x00\xff")


def _asm() -> None:
    from tile.ir import parse_module

    parse_module("cuda_tile.module @m { entry @k() { return } ")


def _driver() -> None:
    import tile.bindings as tb

    raise tb.error_for(2, "cuMemAlloc")  # what `check` raises for CUDA_ERROR_OUT_OF_MEMORY


def _core_copy() -> None:
    import tile.core

    class Handle(tile.core.Uncopyable):
        pass

    copy.copy(Handle())


def _aio_knob(monkeypatch: pytest.MonkeyPatch) -> None:
    import tile.aio

    monkeypatch.setenv("TILE_AIO_POOL_SIZE", "zero")
    tile.aio.stream_pool(tile.aio.HOST)  # sizes the pool from the knob


def _compile() -> None:
    import tile.compiler as tc

    def kernel(z):  # type: ignore[no-untyped-def]  # the missing annotation is the error
        pass

    tc.compile_kernel(kernel, None, tc.Target.cpu(), cache=False)


def _frontend_argument() -> None:
    tile.zeros(tile.f32, [-1])


CASES: dict[str, Callable[..., None]] = {
    "ir-interp-data-race": _race,
    "ir-verify": _verify,
    "ir-bytecode": _bytecode,
    "ir-asm": _asm,
    "bindings-driver": _driver,
    "core-copy": _core_copy,
    "aio-knob": _aio_knob,
    "compiler-compile": _compile,
    "frontend-argument": _frontend_argument,
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_frontend_root_catches_a_real_error_of_every_package(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    run = CASES[case]
    args: list[Any] = [monkeypatch] if "monkeypatch" in inspect.signature(run).parameters else []
    with pytest.raises(tile.TileError) as caught:
        run(*args)
    package = type(caught.value).__module__.split(".")[1]
    assert package == case.split("-", maxsplit=1)[0], f"{case} raised {type(caught.value)!r} from another package"


def test_both_stacks_refuse_changes_to_trusted_handles_with_the_shared_guards() -> None:
    """tile.core and tile.frontend share `tile.errors.Exact` and derive their read-only and final-class errors from
    tile.errors' classes, so one ``except tile.errors.ProtectedError`` (or the builtin) catches either stack's."""
    import tile.core as tc
    import tile.errors as te
    import tile.frontend._errors as fe
    from tile.core._final import Exact as CoreExact

    assert fe.Exact is te.Exact
    assert CoreExact is te.Exact
    assert type(tile.Tensor) is te.Exact
    assert type(tc.DeviceBuffer) is te.Exact
    pairs = [
        (tile.FrozenError, te.ReadOnlyError, AttributeError),
        (tc.ReadOnlyError, te.ReadOnlyError, AttributeError),
        (tile.FinalClassError, te.FinalClassError, TypeError),
        (tc.FinalClassError, te.FinalClassError, TypeError),
    ]
    for cls, shared, builtin in pairs:
        assert issubclass(cls, shared)
        assert issubclass(cls, te.ProtectedError)
        assert issubclass(cls, builtin)
        assert issubclass(cls, Root)

    with pytest.raises(te.ProtectedError, match=r"\.dtype is read-only") as frozen:
        tile.zeros(tile.f32, [4]).dtype = tile.f64
    assert type(frozen.value) is tile.FrozenError
    with pytest.raises(te.FinalClassError, match="cannot subclass tile's Tensor") as final:
        type("Evil", (tile.Tensor,), {})
    assert type(final.value) is tile.FinalClassError
    with pytest.raises(te.FinalClassError, match=r"cannot subclass tile\.core's DeviceBuffer") as final:
        type("Evil", (tc.DeviceBuffer,), {})
    assert type(final.value) is tc.FinalClassError
