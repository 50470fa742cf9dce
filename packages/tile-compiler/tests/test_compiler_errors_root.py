"""tile-compiler's errors are caught by both stacks' roots and survive pickling as themselves."""

from __future__ import annotations

import pickle

import pytest

import tile.bindings
import tile.compiler as tc
import tile.ir

ERRORS = [tc.CompileError, tc.TileirasError, tc.TileirasNotFoundError, tc.ToolchainError, tc.SpecError, tc.KnobError]


@pytest.mark.parametrize("cls", ERRORS, ids=lambda c: c.__name__)
def test_every_compiler_error_derives_from_both_roots(cls: type[Exception]) -> None:
    assert issubclass(cls, tc.TileError)
    assert issubclass(cls, tile.ir.TileError)
    assert issubclass(cls, tile.bindings.TileError)


def test_a_compile_error_is_caught_as_a_runtime_tile_error_and_pickles() -> None:
    def kernel(z):  # type: ignore[no-untyped-def]  # the missing annotation is the error
        pass

    with pytest.raises(tile.bindings.TileError) as caught:
        tc.compile_kernel(kernel, None, tc.Target.cpu(), cache=False)
    assert isinstance(caught.value, tc.CompileError)
    again = pickle.loads(pickle.dumps(caught.value))
    assert type(again) is type(caught.value)
    assert str(again) == str(caught.value)
