"""The root is one plain Exception subclass that every concrete error can mix with a builtin base."""

from __future__ import annotations

import pickle

import pytest

import tile.errors


def test_the_root_is_an_exception_and_nothing_more() -> None:
    assert tile.errors.TileError.__mro__ == (tile.errors.TileError, Exception, BaseException, object)
    assert tile.errors.__all__ == ["TileError"]


def test_a_subclass_mixing_a_builtin_is_caught_by_both() -> None:
    class BadInputError(tile.errors.TileError, ValueError):
        pass

    with pytest.raises(tile.errors.TileError, match="x"):
        raise BadInputError("x")
    with pytest.raises(ValueError, match="x"):
        raise BadInputError("x")


def test_the_root_pickles_as_itself() -> None:
    again = pickle.loads(pickle.dumps(tile.errors.TileError("why")))
    assert type(again) is tile.errors.TileError
    assert str(again) == "why"
