"""``Qwen3(..., pdl=True)`` on the GPU: the captured decode step's kernel-to-kernel edges are programmatic (stream
capture kept the launch attribute: each kernel may start while the one before it finishes) and none are without it;
the PDL step decodes the same greedy tokens with the same logits (to within bf16 rounding) as the plain one.

Run with ``TILE_REQUIRE_GPU=1 pytest packages/tile-kernels/tests/test_qwen3_pdl_gpu.py -m gpu`` (sm_90+).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
import tile.frontend as tile
from test_qwen3 import U_BF16
from tile.bindings import check, driver
from tile.kernels.qwen3 import CONFIGS, DecodeGraph, Qwen3, Qwen3Config, random_weights

pytestmark = [pytest.mark.gpu, pytest.mark.requires_tileiras]
CONFIG = Qwen3Config(**{**CONFIGS["0.6B"].__dict__, "num_hidden_layers": 2})


@pytest.fixture(autouse=True)
def _gpu_backend(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TILE_AUTOTUNE", "0")
    tile.set_backend("gpu")
    yield
    tile.set_backend("cpu")


def _kernel_edges(step: DecodeGraph) -> list[bool]:
    """For every edge between two kernel nodes of the captured graph: whether it is programmatic."""
    d = driver()
    graph = step.graph._replay._graph  # type: ignore[attr-defined]  # the CUgraph the CUDA replay instantiated
    *_, count = check(d.cuGraphGetEdges(graph, 0), "cuGraphGetEdges")
    src, dst, data, _ = check(d.cuGraphGetEdges(graph, count), "cuGraphGetEdges")
    kernel = d.CUgraphNodeType.CU_GRAPH_NODE_TYPE_KERNEL

    def is_kernel(node: Any) -> bool:
        return bool(check(d.cuGraphNodeGetType(node), "cuGraphNodeGetType") == kernel)

    programmatic = d.CUgraphDependencyType.CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC
    return [e.type == programmatic for a, b, e in zip(src, dst, data, strict=True) if is_kernel(a) and is_kernel(b)]


def _decode(pdl: bool, tokens: int) -> tuple[list[bool], list[int], list[np.ndarray[Any, Any]]]:
    model = Qwen3(CONFIG, random_weights(CONFIG, seed=4), max_seq=256, pdl=pdl)
    token = int(np.argmax(model.forward([int(i) for i in np.random.default_rng(1).integers(0, 1000, 20)])))
    ids, logits = [], []
    with DecodeGraph(model) as step:
        edges = _kernel_edges(step)
        for _ in range(tokens):
            row = step.step(token)
            token = int(np.argmax(row))
            ids.append(token)
            logits.append(row)
    return edges, ids, logits


def test_the_pdl_decode_graph_has_programmatic_edges_and_decodes_the_same_tokens() -> None:
    plain_edges, plain_ids, plain_logits = _decode(pdl=False, tokens=8)
    edges, ids, logits = _decode(pdl=True, tokens=8)
    assert plain_edges
    assert not any(plain_edges)  # no attribute, no programmatic edge
    assert len(edges) == len(plain_edges)
    assert all(edges), f"{edges.count(False)} of {len(edges)} kernel edges lost the programmatic launch in capture"
    assert ids == plain_ids
    for a, b in zip(plain_logits, logits, strict=True):
        np.testing.assert_allclose(b, a, rtol=0, atol=4 * U_BF16 * float(np.abs(a).max()))
