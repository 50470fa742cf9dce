"""Fixtures shared by the adversarial reviews: ``path`` runs a test once per launch path (the pure-Python one, and the
compiled one where the extension is built), switched in-process and restored after."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tile.frontend import _accel

PATHS = ["pure", pytest.param("compiled", marks=pytest.mark.skipif(_accel.compiled() is None, reason=_accel.reason()))]


@pytest.fixture(params=PATHS)
def path(request: pytest.FixtureRequest) -> Iterator[str]:
    """Each test runs once per launch path, switched in-process and restored after."""
    previous = _accel.use(request.param)
    yield request.param
    _accel.use(previous)
