"""Edge partitions write exactly their elements: tiles that do not divide the extent are masked on store.

The random programs of views, partitions, unpartitions, drops and launches that used to live here are superseded by
``tests/adversarial/test_ownership_model.py``, which runs longer sequences of every host operation against a
reference model and checks both ways that exactly the allowed calls succeed. What it does not cover is kept here:
extents that the tile does not divide (its launches all have one length).
"""

from __future__ import annotations

from types import ModuleType

import numpy as np
import pytest

import tile.frontend as tile
from tile.frontend import f32


@pytest.mark.parametrize("n", [1, 127, 129, 1000])
def test_edge_partitions_write_exactly_their_elements(k: ModuleType, n: int) -> None:
    host = np.full(n + 64, -7.0, np.float32)
    z = tile.from_dlpack(host[:n]).partition([128])
    k.add(z, tile.ones(f32, [n]), tile.ones(f32, [n])).sync()
    np.testing.assert_array_equal(host[:n], np.full(n, 2.0, np.float32))
    np.testing.assert_array_equal(host[n:], np.full(64, -7.0, np.float32))
