"""Review 6: attacks on the safe API found by an adversarial review of the features added last session (the compiled
launch path, placement, graph I/O, tile.kernels ops, subclassing). Each test names the hole in its docstring, failed
before its fix, and asserts the typed error (which says what to do) and that the user's objects stay usable. They run
on the CPU interpreter, on both launch paths (``TILE_PURE_PYTHON=1`` and the compiled extension, when built).
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import tile.frontend as tile

sys.path.insert(0, str(Path(__file__).parent))
from helpers_adversarial import KERNELS, load_path  # a sibling helper module

from tile.frontend import f32


@pytest.fixture(autouse=True)
def _cpu() -> None:
    tile.set_backend("cpu")


@pytest.fixture
def k() -> ModuleType:
    return load_path("adversarial_handle_kernels", KERNELS / "handle_kernels.py")


# -- 1. subclassing a class the launch trusts -------------------------------------------------------------------


def _final_classes() -> list[type[Any]]:
    from tile.frontend._lend import Lent

    return [tile.Tensor, tile.Partition, tile.Shared, Lent, tile.Kernel, tile.Launch]


@pytest.mark.parametrize("cls", _final_classes(), ids=lambda c: c.__name__)
def test_a_class_the_launch_trusts_cannot_be_subclassed(cls: type[Any]) -> None:
    """Hole: ``class Evil(tile.Tensor): __slots__ = ()`` with an overriding ``shape`` property, then
    ``x.__class__ = Evil`` (the layouts match), made the full launch path read the lie (it reads ``t.shape``,
    ``p.tile_shape``, ``kernel.unchecked`` through the class): a kernel read 64 elements of an 8-element tensor, a
    partition could claim a larger tile, a Kernel subclass could report ``unchecked`` without the greppable opt-out."""
    with pytest.raises(tile.FinalClassError, match=r"cannot subclass tile's .*Wrap the handle in a class of your own"):
        type("Evil", (cls,), {"__slots__": ()})
    with pytest.raises(TypeError):  # the builtin a caller would catch, too
        type("Evil", (cls,), {})


def test_a_tensor_cannot_be_given_an_overriding_class(k: ModuleType) -> None:
    """Hole: the end-to-end attack: an 8-element input whose class reports 64 elements was accepted by the launch
    (only the interpreter's in-kernel checks stopped the read; on the GPU it reads past the allocation)."""
    x, y, z = tile.ones(f32, [16]), tile.ones(f32, [16]), tile.zeros(f32, [16])
    with pytest.raises(tile.FinalClassError):

        class Evil(tile.Tensor):
            __slots__ = ()

            @property
            def shape(self) -> tuple[int, ...]:
                return (64,)

    assert type(x) is tile.Tensor
    z, x, y = k.add(z.partition((16,)), x, y).sync()  # everything still usable
    assert z.unpartition().to_numpy().tolist() == [2.0] * 16
