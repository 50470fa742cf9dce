"""Every op of the catalog runs in the interpreter: tile.ir's one-kernel-per-op samples execute without error."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import numpy as np
import pytest

from tile.ir import LATEST, interp
from tile.ir.ops import CATALOG

# helpers_ir_* modules live beside the tests; --import-mode=importlib does not put this folder on sys.path
sys.path.insert(0, str(Path(__file__).parent))

from helpers_ir_samples import build_sample


def test_the_interpreter_covers_the_whole_catalog() -> None:
    assert set(CATALOG) == set(interp.SUPPORTED_OPS)


@pytest.mark.parametrize("name", sorted(set(CATALOG) - {"assume"}))
def test_sample_kernel_runs(name: str) -> None:
    x, xi = np.arange(64, dtype=np.float32), np.arange(64, dtype=np.int32)
    interp.launch(build_sample(name, LATEST), 1, [x, 16, xi], stdout=io.StringIO())


def test_sample_assume_is_checked() -> None:
    """The sample promises div_by<4> on iota (0, 1, 2, ...): a broken promise, which the interpreter reports."""
    x, xi = np.arange(64, dtype=np.float32), np.arange(64, dtype=np.int32)
    with pytest.raises(interp.InterpError, match="assume"):
        interp.launch(build_sample("assume", LATEST), 1, [x, 16, xi])
