"""The GPU backend (lead's GPU batch): the same launches and rules as on the CPU, against device memory.

Run with ``TILE_REQUIRE_GPU=1 pytest packages/tile-frontend -m gpu``; skipped where no GPU is visible.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import tile.frontend as tile
from tile.frontend import bf16, f16, f32

pytestmark = [pytest.mark.gpu, pytest.mark.requires_tileiras]
N = 1 << 20


@pytest.fixture(autouse=True)
def _gpu_backend() -> Iterator[None]:
    tile.set_backend("gpu")
    yield
    tile.set_backend("cpu")


def _poisoned(n: int) -> tile.Partition:
    return tile.full(f32, [n], np.nan).partition([1024])


def test_tensors_live_on_the_device() -> None:
    t = tile.arange(f32, 10)
    assert t.device != "cpu"
    assert t.__dlpack_device__()[0] == 2
    assert not hasattr(t, "__cuda_array_interface__")  # untracked: exports go through DLPack
    np.testing.assert_array_equal(t[2:8:3].to_numpy(), np.arange(2, 8, 3, dtype=np.float32))
    np.testing.assert_array_equal(t.reshape(2, 5).T.to_numpy(), np.arange(10, dtype=np.float32).reshape(2, 5).T)


def test_add(k: ModuleType) -> None:
    x, y = tile.randn(f32, [N + 5]), tile.randn(f32, [N + 5])
    expected = x.to_numpy().astype(np.float64) + y.to_numpy()
    z, _, _ = k.add(tile.full(f32, [N + 5], np.nan).partition([1024]), x, y).sync()
    np.testing.assert_allclose(z.unpartition().to_numpy(), expected, rtol=1e-6)


@pytest.mark.parametrize(("dtype", "kernel"), [(f16, "gemm"), (bf16, "gemm_bf16")])
def test_gemm(k: ModuleType, dtype: Any, kernel: str) -> None:
    a, b = tile.randn(dtype, [512, 256]), tile.randn(dtype, [256, 384])
    expected = a.to_numpy().astype(np.float64) @ b.to_numpy().astype(np.float64)
    c, _, _, _ = getattr(k, kernel)(tile.full(f32, [512, 384], np.nan).partition([64, 64]), a, b, BK=32).sync()
    np.testing.assert_allclose(c.unpartition().to_numpy(), expected, rtol=1e-3, atol=1e-3)


def test_views_and_edge_tiles(k: ModuleType) -> None:
    src = np.random.default_rng(3).random((300, 200)).astype(np.float32)
    x = tile.from_numpy(src)[10:250, 7:180]
    z, _ = k.matrix_copy(tile.full(f32, [240, 173], np.nan).partition([32, 32]), x).sync()
    np.testing.assert_array_equal(z.unpartition().to_numpy(), src[10:250, 7:180])


def test_ownership_errors_on_device_memory(k: ModuleType) -> None:
    x, y, z = tile.ones(f32, [N]), tile.ones(f32, [N]), _poisoned(N)
    k.add(z, x, y).sync()
    with pytest.raises(
        tile.MovedError, match=r"moved into the launch of add at .*test_frontend_gpu\.py:\d+; use the handles"
    ):
        x.to_numpy()
    t = tile.zeros(f32, [N])
    view = t[5:10]
    with pytest.raises(
        tile.BorrowError, match=r"cannot partition .* \(at .*test_frontend_gpu\.py:\d+\): that needs exclusive memory"
    ):
        t.partition([1024])
    del view
    t.partition([1024])


def test_foreign_device_memory_aliasing(k: ModuleType) -> None:
    from tile import core

    buffer = core.DeviceBuffer.allocate(N * 4)
    out = tile.from_dlpack(buffer.view(np.float32, (N,))).partition([1024])
    with pytest.raises(tile.BorrowError, match="a writer holds it"):  # the output's partition holds the memory
        tile.from_dlpack(buffer.view(np.float32, (N,)))
    z, _, _ = k.add(out, tile.ones(f32, [N]), tile.ones(f32, [N])).sync()
    with pytest.raises(tile.BorrowError, match="a writer holds it"):
        tile.from_dlpack(buffer.view(np.float32, (N,)))
    z.unpartition()
    np.testing.assert_array_equal(tile.from_dlpack(buffer.view(np.float32, (N,))).to_numpy(), np.full(N, 2.0))


def test_free_while_pending_is_stream_ordered(k: ModuleType) -> None:
    x = tile.full(f32, [N], 3.0)
    other = x[:]
    op = k.add(_poisoned(N), x, tile.ones(f32, [N]))
    other.free()
    # Bug caught: a free not ordered after the pending launch hands x's memory to this allocation, whose fill
    # the launch would then read (z != 4), or the launch's late read would race the fill.
    reused = tile.full(f32, [N], 100.0)
    z, _, _ = op.sync()
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.full(N, 4.0, np.float32))
    np.testing.assert_array_equal(reused.to_numpy(), np.full(N, 100.0, np.float32))


def test_await_and_graph(k: ModuleType) -> None:
    async def run() -> np.ndarray[Any, Any]:
        z, _, _ = await k.add(_poisoned(N), tile.ones(f32, [N]), tile.ones(f32, [N]))
        out: np.ndarray[Any, Any] = z.unpartition().to_numpy()
        return out

    np.testing.assert_array_equal(asyncio.run(run()), np.full(N, 2.0, np.float32))
    graph = k.accumulate(tile.zeros(f32, [N]).partition([1024]), tile.ones(f32, [N])).graph()
    for _ in range(3):
        graph.launch().sync()
    graph.close()
    z, _ = graph.output
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.full(N, 3.0, np.float32))


def test_graph_write_and_graph_read_between_cuda_graph_replays(k: ModuleType) -> None:
    """A captured chain (the second kernel reads the first one's output in flight) fed through graph_write and drained
    through graph_read, on a CUDA graph: each copy is ordered between replays on the graph's stream."""
    x = tile.zeros(f32, [N])

    def second(out: tuple[Any, ...]) -> Any:
        return k.add(tile.zeros(f32, [N]).partition([1024]), out[0].unpartition(), tile.ones(f32, [N]))

    op = k.add(tile.zeros(f32, [N]).partition([1024]), x[()], tile.ones(f32, [N])).then(second)
    graph = op.graph()
    assert graph.kind == "cuda"
    for v in (1.0, 4.0, 9.0):
        x = tile.graph_write(graph, x, np.full(N, v)).sync_on(graph.context)
        out = graph.launch().then(lambda _: tile.graph_read(graph, graph.output[0])).sync_on(graph.context)
        np.testing.assert_array_equal(out.to_numpy(), np.full(N, v + 2, np.float32))
    graph.close()
    np.testing.assert_array_equal(x.to_numpy(), np.full(N, 9.0, np.float32))


def test_threads_launch_concurrently_on_their_own_streams(k: ModuleType) -> None:
    import tile.core as tc

    xs, ys = tile.randn(f32, [N]).share(), tile.randn(f32, [N]).share()  # read by every thread's launches at once
    expected = xs.to_numpy().astype(np.float64) + ys.to_numpy()
    results: dict[int, Any] = {}

    def worker(i: int) -> None:
        try:
            stream = tc.Device(0).create_stream()
            z = _poisoned(N)
            for _ in range(25):
                z, _, _ = k.add(z, xs, ys).sync_on(stream)
            results[i] = z.unpartition().to_numpy()
        except Exception as exc:  # reported by the assertion below, in the test's thread
            results[i] = exc

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(4):
        np.testing.assert_allclose(results[i], expected, rtol=1e-6)
    assert xs.users == 0
    assert ys.users == 0
    xs.unshare().free()


def test_cpu_tensors_cannot_join_a_gpu_launch(k: ModuleType) -> None:
    with pytest.raises(tile.BackendError, match="different devices"):
        k.add(_poisoned(N), tile.ones(f32, [N], device="cpu"), tile.ones(f32, [N]))


@pytest.mark.parametrize("library", ["torch", "cupy"])
def test_foreign_framework_memory(k: ModuleType, library: str) -> None:
    lib = pytest.importorskip(library)
    out = lib.zeros(N, device="cuda") if library == "torch" else lib.zeros(N, dtype=lib.float32)

    def read(array: Any) -> np.ndarray[Any, Any]:
        return np.asarray(array.cpu().numpy() if library == "torch" else lib.asnumpy(array))

    if library == "torch":
        lib.cuda.synchronize()  # the producer filled the memory on its own stream
    else:
        lib.cuda.runtime.deviceSynchronize()
    z = tile.from_dlpack(out)
    alias = tile.from_dlpack(out[N // 2 :])
    with pytest.raises(
        tile.BorrowError, match=r"cannot partition .* \(at .*test_frontend_gpu\.py:\d+\): that needs exclusive memory"
    ):
        z.partition([1024])
    del alias
    k.add(z.partition([1024]), tile.ones(f32, [N]), tile.full(f32, [N], 2.0)).sync()
    np.testing.assert_array_equal(read(out), np.full(N, 3.0, np.float32))
    back = tile.arange(f32, 16)
    seen = lib.from_dlpack(back)
    np.testing.assert_array_equal(read(seen), np.arange(16, dtype=np.float32))
    with pytest.raises(tile.BorrowError, match="DLPack export"):
        back.partition([16])
