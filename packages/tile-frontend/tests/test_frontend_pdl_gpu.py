"""Programmatic dependent launch on the GPU (lead's GPU batch, sm_90+): chains of dependent ``@tile.entry(pdl=True)``
kernels, each calling ``tile.launch_dependents()`` first (so the next one may start as early as the hardware lets
it), give exact results on a stream and replayed as a CUDA graph (whose edges are then programmatic). A kernel that
did not wait at entry would read its predecessor's output while it is being written; large grids make that show.

Run with ``TILE_REQUIRE_GPU=1 pytest packages/tile-frontend/tests/test_frontend_pdl_gpu.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import tile.frontend as tile
from tile.frontend import f32

pytestmark = [pytest.mark.gpu, pytest.mark.requires_tileiras]
N = 1 << 22
STEPS = 48


@pytest.fixture(autouse=True)
def _gpu_backend() -> Iterator[None]:
    tile.set_backend("gpu")
    yield
    tile.set_backend("cpu")


def _chain(k: ModuleType, kernels: list[Any]) -> Any:
    """``STEPS`` launches, each adding one to its predecessor's output: the last output is ``STEPS`` everywhere."""
    ones = tile.ones(f32, [N])

    def step(kernel: Any) -> Any:
        return lambda out: kernel(tile.full(f32, [N], np.nan).partition([1024]), out[0].unpartition(), ones[()])

    op = kernels[0](tile.full(f32, [N], np.nan).partition([1024]), tile.zeros(f32, [N]), ones[()])
    for i in range(1, STEPS):
        op = op.then(step(kernels[i % len(kernels)]))
    return op


@pytest.mark.parametrize("mix", ["pdl", "alternating"])
def test_a_chain_of_pdl_kernels_on_a_stream_is_exact(k: ModuleType, mix: str) -> None:
    kernels = [k.add_pdl] if mix == "pdl" else [k.add_pdl, k.add]
    z, _, _ = _chain(k, kernels).sync()
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.full(N, STEPS, np.float32))


def test_a_chain_of_pdl_kernels_replayed_as_a_cuda_graph_is_exact(k: ModuleType) -> None:
    graph = _chain(k, [k.add_pdl]).graph()
    assert graph.kind == "cuda"
    for _ in range(5):
        out = graph.launch().then(lambda _: tile.graph_read(graph, graph.output[0])).sync_on(graph.context)
        np.testing.assert_array_equal(out.to_numpy(), np.full(N, STEPS, np.float32))
    graph.close()
