"""The examples in the public modules' docstrings run and print what they claim (doctest)."""

from __future__ import annotations

import doctest
import importlib

import pytest

PUBLIC = ["tile.bindings", "tile.core", "tile.aio", "tile.ir", "tile.compiler", "tile.frontend"]


@pytest.mark.parametrize("name", PUBLIC)
def test_docstring_examples_run(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} docstring examples in {name} failed"


def test_the_tile_ir_builder_example_is_exercised() -> None:
    result = doctest.testmod(importlib.import_module("tile.ir"), verbose=False)
    assert result.attempted >= 10
