"""Review 7: attacks on the safe API by a second adversarial review (tuple parameters, the compiled launch path's
steps, tile.kernels, tile.distributed). Each test names the hole in its docstring, failed before its fix, and asserts
the typed error or the right result. They run on the CPU interpreter, on both launch paths (``TILE_PURE_PYTHON=1``
and the compiled extension, when built).
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import tile.frontend as tile
from tile import aio

sys.path.insert(0, str(Path(__file__).parent))
from helpers_adversarial import load_path  # a sibling helper module

from tile.frontend import f32

GROUP_KERNELS = Path(__file__).resolve().parents[2] / "packages/tile-frontend/tests/kernels/group_kernels.py"


@pytest.fixture(autouse=True)
def _cpu() -> None:
    tile.set_backend("cpu")


@pytest.fixture
def gk() -> ModuleType:
    return load_path("adversarial_group_kernels", GROUP_KERNELS)


def _vector(value: float) -> tile.Tensor:
    return tile.from_numpy(np.full(16, value, np.float32))


class _Claims(list[Any]):
    """A list whose ``__len__`` lies (its elements come from list's own iterator)."""

    def __init__(self, items: list[Any], claimed: int) -> None:
        super().__init__(items)
        self.claimed = claimed

    def __len__(self) -> int:
        return self.claimed


def test_a_tuple_argument_is_read_once(gk: ModuleType) -> None:
    """Hole: a tuple argument was read twice, ``len()`` for the specialization and iteration for the arguments, so a
    list whose ``__len__`` disagrees with its elements (or one another thread mutates mid-call) was compiled for one
    length and flattened as another: the call was refused with a wrong arity ("takes 3 arguments but 4 were given"),
    and two such lists that cancel out compiled a kernel for lengths no argument had, regrouping the caller's handles
    into the wrong tuples. Now each container is read once and the call sees what it iterates."""
    z = tile.zeros(f32, [16]).partition((16,))
    xs = _Claims([_vector(1.0), _vector(2.0), _vector(3.0)], claimed=2)
    z, got = gk.sum_all(z, xs).sync()
    assert len(got) == 3  # the three elements it holds, not the two it claims
    assert z.unpartition().to_numpy().tolist() == [6.0] * 16


def test_two_lying_tuples_regroup_as_passed(gk: ModuleType) -> None:
    """Hole (the same class): ``outs`` claiming 1 element while holding 2, ``xs`` claiming 3 while holding 2, add up
    to the right number of flat arguments, so the launch was built for lengths (1, 3): the second output partition
    was checked against ``xs[0]`` (refused with a message about an argument the caller never passed that way)."""
    outs = _Claims([tile.zeros(f32, [16]).partition((16,)) for _ in range(2)], claimed=1)
    xs = _Claims([_vector(1.0), _vector(2.0)], claimed=3)
    got_outs, got_xs, _ = gk.grouped_scale(outs, xs, 2.0).sync()
    assert (len(got_outs), len(got_xs)) == (2, 2)
    assert [p.unpartition().to_numpy()[0] for p in got_outs] == [2.0, 4.0]


def test_a_refused_lying_tuple_leaves_handles_usable(gk: ModuleType) -> None:
    """The refusal side: a container that is not a tuple or list is refused before anything is read from it, and the
    tensors the caller passed in a bad call stay usable."""
    x = _vector(1.0)
    z = tile.zeros(f32, [16]).partition((16,))
    with pytest.raises(tile.ArgumentError, match=r"is a tuple of tensors, got set: pass a tuple or list"):
        gk.sum_all(z, {x})
    z, got = gk.sum_all(z, [x]).sync()
    assert z.unpartition().to_numpy().tolist() == [1.0] * 16
    assert got[0].to_numpy().tolist() == [1.0] * 16


# -- graph I/O: a refused write ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "why"),
    [(["a"] * 16, "could not convert"), ([[1.0], [1.0, 2.0]], "inhomogeneous"), ([object()] * 16, "float")],
    ids=["strings", "ragged", "objects"],
)
def test_graph_write_refuses_bad_data_with_a_typed_error(data: object, why: str) -> None:
    """Hole: ``tile.graph_write(graph, x, data)`` with data numpy cannot convert (strings, ragged lists, objects)
    raised numpy's bare ``ValueError``/``TypeError``, which ``except tile.TileError`` does not catch and which says
    nothing of what to pass. Now an ``ArgumentError`` naming the dtype and shape wanted; ``x`` is not moved."""
    k = load_path("adversarial_handle_kernels", Path(__file__).parent / "kernels" / "handle_kernels.py")
    stream = aio.HostStream()
    x, y = tile.ones(f32, [16]), tile.ones(f32, [16])
    with k.add(tile.zeros(f32, [16]).partition((16,)), x[()], y[()]).graph(stream) as graph:
        with pytest.raises(tile.ArgumentError, match=rf"cannot be converted to f32 values: .*{why}.*shape \[16\]"):
            tile.graph_write(graph, x, data)
        x = tile.graph_write(graph, x, np.full(16, 2.0, np.float32)).sync_on(graph.context)  # x was not moved
        graph.launch().sync_on(stream)
    assert x.to_numpy().tolist() == [2.0] * 16


# -- tile.kernels.qwen3: the model's public state ------------------------------------------------------------------


@pytest.mark.parametrize("graphed", [False, True], ids=["forward", "decode-graph"])
@pytest.mark.parametrize("length", [-3, 2.0], ids=["negative", "float"])
def test_a_bad_model_length_is_refused_before_the_caches_move(graphed: bool, length: object) -> None:
    """Hole: ``Qwen3.length`` is public and only its upper bound was checked. ``model.length = -3`` ran the step: the
    RoPE kernel indexed its tables at -3 (caught in the kernel, a KernelAssertionError on the interpreter, a trap
    that ends the CUDA context on the GPU), and the failed chain released the KV caches it had moved in, so every
    later ``forward`` (or ``DecodeGraph.step``, whose input tensor was lost with it) raised MovedError: the model was
    unusable for good. Now the step is refused before anything moves, and the model works once the length is sane."""
    from tile.kernels.qwen3 import TINY, DecodeGraph, Qwen3, random_weights

    model = Qwen3(TINY, random_weights(TINY, seed=1), max_seq=8)
    model.forward([1, 2])
    graph = DecodeGraph(model) if graphed else None
    model.length = length  # type: ignore[assignment]  # the bad state under test
    with pytest.raises(tile.ArgumentError, match=r"length is .*an int from 0 to 8\); call reset\(\)"):
        graph.step(1) if graph is not None else model.forward([1])
    model.length = 2
    logits = graph.step(3) if graph is not None else model.forward([3])
    assert logits.shape == (TINY.vocab_size,)
    assert np.isfinite(logits).all()
    if graph is not None:
        graph.close()
    assert model.length == 3


# -- tile.kernels: counts that are not integers --------------------------------------------------------------------


def test_kernels_counts_must_be_integers() -> None:
    """Hole: ``tk.top_k(x, 1.5)`` failed with a bare ``AttributeError`` ('float' object has no attribute
    'bit_length'), and ``tk.decode_attention(..., splits=2.5)`` or ``splits=True`` ran with the float or bool taken
    as a split count. A count, a ``top_k`` or a seed is now an integer or an ``ArgumentError`` naming it."""
    import tile.kernels as tk
    from tile.frontend import f16

    x = tile.ones(f32, [2, 8])
    with pytest.raises(tile.ArgumentError, match=r"top_k: k must be an integer, got float 1\.5"):
        tk.top_k(x, 1.5)  # type: ignore[arg-type]  # the bad input under test
    with pytest.raises(tile.ArgumentError, match=r"sample: top_k must be an integer, got float 2\.0"):
        tk.sample(x, 1.0, top_k=2.0)  # type: ignore[arg-type]  # the bad input under test
    q, kc, vc = tile.ones(f16, [1, 2, 16]), tile.ones(f16, [1, 2, 8, 16]), tile.ones(f16, [1, 2, 8, 16])
    for bad in (2.5, True):
        with pytest.raises(tile.ArgumentError, match=r"decode_attention: splits must be an integer, got"):
            tk.decode_attention(q, kc, vc, [8], splits=bad)  # type: ignore[arg-type]  # the bad input under test
    assert [t.shape for t in tk.top_k(x, np.int64(2))] == [(2, 2), (2, 2)]  # numpy integers are integers
    assert tk.decode_attention(q, kc, vc, [8], splits=2).shape == (1, 2, 16)
