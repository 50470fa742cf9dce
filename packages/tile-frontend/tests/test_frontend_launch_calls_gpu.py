"""The driver calls of bench_frontend's launch loops on the real driver (lead's GPU batch): the simulator's counts hold.

``test_frontend_launch_calls.py`` pins the calls on tile.core's simulated driver; this file counts the real
``cuda.bindings.driver`` functions (``tile.core.testing.counting_calls`` wraps the module's ``cu*`` functions for the
block) around the same two loops ``bench_frontend.py --launch-only`` times: a 100-link same-stream ``.then`` chain
waited for once is 100 ``cuLaunchKernel`` and one ``cuStreamSynchronize``, and 50 ``add(...).sync_on(s)`` are 50 of
each (hand-backs and garbage included), on both launch paths. A call that only the real driver's path makes (a context
check, a query once kernels complete, which a GPU does at once for these small kernels) fails here, not there.

Run with ``TILE_REQUIRE_GPU=1 pytest packages/tile-frontend/tests/test_frontend_launch_calls_gpu.py``.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import tile.bindings as tb
import tile.core as tc
import tile.frontend as tile
from tile.core.testing import counting_calls
from tile.frontend import f32

pytestmark = [pytest.mark.gpu, pytest.mark.requires_tileiras]
N, B, LINKS, SYNCS = 1024, 128, 100, 50


@pytest.fixture(autouse=True)
def _gpu_backend() -> Iterator[None]:
    tile.set_backend("gpu")
    yield
    tile.set_backend("cpu")


def _chain(add: Any, args: list[Any], n: int, stream: Any) -> list[Any]:
    op = add(*args)
    for _ in range(n - 1):
        op = op.then(lambda out: add(*out))
    return list(op.sync_on(stream))


def test_the_benchmarks_loops_make_one_launch_each_on_the_real_driver(path: str, k: ModuleType) -> None:
    """As on the simulator: per chain link one ``cuLaunchKernel``; per waited launch one more ``cuStreamSynchronize``.
    The values after 152 launches of ``z = x + y`` are ``x + 1``."""
    stream = tc.Device(0).create_stream()
    x = np.arange(N, dtype=np.float32)
    args: list[Any] = [tile.zeros(f32, [N]).partition([B]), tile.from_numpy(x), tile.ones(f32, [N])]
    with counting_calls(tb.driver()) as calls:  # (a prepared launch keeps the cuLaunchKernel it was made with)
        args = _chain(k.add, args, 2, stream)  # compiles (or loads), plans and prepares the launch on this stream
        gc.collect()
        calls.clear()
        args = _chain(k.add, args, LINKS, stream)
        gc.collect()
        assert dict(calls) == {"cuLaunchKernel": LINKS, "cuStreamSynchronize": 1}
        calls.clear()
        for _ in range(SYNCS):
            args = list(k.add(*args).sync_on(stream))
        gc.collect()
        assert dict(calls) == {"cuLaunchKernel": SYNCS, "cuStreamSynchronize": SYNCS}
    np.testing.assert_array_equal(args[0].unpartition().to_numpy(), x + 1)
