"""The root is one plain Exception subclass that every concrete error can mix with a builtin base; the guards on
trusted handles (`Exact`, the `ProtectedError` family) are shared by tile.core and tile.frontend."""

from __future__ import annotations

import pickle

import pytest

import tile.errors


def test_the_root_is_an_exception_and_nothing_more() -> None:
    assert tile.errors.TileError.__mro__ == (tile.errors.TileError, Exception, BaseException, object)
    assert tile.errors.__all__ == ["Exact", "FinalClassError", "ProtectedError", "ReadOnlyError", "TileError"]


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


def test_the_refusals_share_one_base_and_keep_their_builtins() -> None:
    errors = tile.errors
    assert errors.ProtectedError.__mro__[1:] == (errors.TileError, Exception, BaseException, object)
    assert issubclass(errors.ReadOnlyError, errors.ProtectedError)
    assert issubclass(errors.ReadOnlyError, AttributeError)
    assert issubclass(errors.FinalClassError, errors.ProtectedError)
    assert issubclass(errors.FinalClassError, TypeError)
    for cls in (errors.ProtectedError, errors.ReadOnlyError, errors.FinalClassError):
        again = pickle.loads(pickle.dumps(cls("why")))
        assert type(again) is cls
        assert str(again) == "why"


class Trusted(metaclass=tile.errors.Exact):
    pass


class PackageFinalError(tile.errors.FinalClassError):
    pass


class TrustedWithHook(metaclass=tile.errors.Exact):
    @classmethod
    def subclass_error(cls, qualname: str) -> tile.errors.FinalClassError:
        return PackageFinalError(f"{qualname} may not extend {cls.__name__}: wrap it")


def test_an_exact_class_is_final_with_the_default_error() -> None:
    with pytest.raises(tile.errors.FinalClassError, match=r"class .*Sub cannot subclass .*Trusted: .*has-a, not is-a"):

        class Sub(Trusted):
            pass

    with pytest.raises(TypeError, match="cannot subclass"):  # the builtin a caller would catch, too
        type("Sub", (Trusted,), {})


def test_a_class_names_its_own_error_through_subclass_error() -> None:
    with pytest.raises(PackageFinalError, match=r"^.*Sub may not extend TrustedWithHook: wrap it$"):

        class Sub(TrustedWithHook):
            pass


def test_a_second_base_does_not_hide_the_trusted_one() -> None:
    class Other:
        pass

    with pytest.raises(tile.errors.FinalClassError, match="cannot subclass"):

        class Sub(Other, Trusted):
            pass


def test_isinstance_is_by_exact_type_so_a_forged_class_attribute_fails() -> None:
    class Forged:
        __class__ = Trusted  # type: ignore[assignment]

    forged: object = Forged()
    assert type(forged) is Forged
    assert not isinstance(forged, Trusted)  # the builtin test would be fooled: forged.__class__ is Trusted
    assert isinstance(Trusted(), Trusted)
    assert not isinstance(object(), Trusted)


def test_plain_classes_with_the_metaclass_are_created() -> None:
    made = tile.errors.Exact("Made", (), {"x": 1})
    assert type(made) is tile.errors.Exact
    assert made.x == 1  # type: ignore[attr-defined]
