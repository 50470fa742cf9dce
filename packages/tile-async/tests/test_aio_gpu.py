"""GPU tier: tile.aio over real CUDA streams with the vec_add kernel (tile-core's bytecode fixture, assembled
by tileiras for the test device). Run on the H100: ``TILE_REQUIRE_GPU=1 pytest -m gpu packages/tile-async``."""

from __future__ import annotations

import asyncio
import math
import os
import subprocess
import weakref
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pytest

from tile import aio

pytestmark = [pytest.mark.gpu, pytest.mark.requires_tileiras]

T = TypeVar("T")
FIXTURE = Path(__file__).parents[2] / "tile-core" / "tests" / "fixtures" / "vec_add.tileirbc"
SIGNATURE = ("ptr", "i32", "i32") * 3
N = 1024
TILE = 128


@pytest.fixture(scope="module")
def tc() -> Any:
    import tile.core

    return tile.core


@pytest.fixture(scope="module")
def device(tc: Any) -> Any:
    return tc.Device(0)


@pytest.fixture(scope="module")
def vec_add(tc: Any, device: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    import tile.bindings as tb

    found = tb.find_tileiras()
    assert found is not None, "tileiras not found: pip install nvidia-cuda-tileiras or set TILE_TILEIRAS"
    out = tmp_path_factory.mktemp("cubin") / "vec_add.cubin"
    env = {k: v for k, v in os.environ.items() if k != "CUDA_HOME"}
    subprocess.run([str(found.path), f"--gpu-name={device.arch}", "-o", str(out), str(FIXTURE)], check=True, env=env)
    return tc.Module.from_cubin(out.read_bytes(), device=device).function("vec_add")


@pytest.fixture
def ctx(tc: Any, device: Any) -> Iterator[aio.CudaContext]:
    stream = tc.Stream(device)
    yield aio.CudaContext(stream)
    stream.synchronize()


@pytest.fixture(autouse=True)
def cuda_default(device: Any) -> Iterator[None]:
    with aio.use_device(device):
        yield


def run_bounded(coro: Coroutine[Any, Any, T]) -> T:
    """asyncio.run with a deadline: a lost wake-up fails the test instead of hanging the GPU batch."""

    async def bounded() -> T:
        return await asyncio.wait_for(coro, timeout=60)

    return asyncio.run(bounded())


def add(fn: Any, z: Any, x: Any, y: Any, n: int = N) -> aio.DeviceOp[tuple[Any, ...]]:
    """z = x + y for n float32 values, as an op."""
    return aio.launch(fn, math.ceil(n / TILE), [x, n, 1, y, n, 1, z, n, 1], signature=SIGNATURE)


def buffers(tc: Any, ctx: aio.CudaContext, *arrays: np.ndarray) -> list[Any]:
    return [tc.DeviceBuffer.from_host(a, stream=ctx.stream) for a in arrays]


def host(buf: Any, n: int = N) -> np.ndarray:
    return np.asarray(buf.to_numpy(np.float32, n))


def test_context_protocol_on_a_stream(tc: Any, ctx: aio.CudaContext, device: Any) -> None:
    assert ctx.device is device
    assert aio.with_context(lambda c: c).sync_on(ctx.stream) == ctx  # a bare stream is wrapped
    done = ctx.record()
    done.wait()
    assert done.query()
    assert ctx.query()
    other = aio.CudaContext(tc.Stream(device))
    other.wait(done)
    other.synchronize()


def test_sync_await_and_schedule_launch(tc: Any, ctx: aio.CudaContext, vec_add: Any) -> None:
    rng = np.random.default_rng()
    x, y = rng.standard_normal(N, dtype=np.float32), rng.standard_normal(N, dtype=np.float32)
    bx, by, bz = buffers(tc, ctx, x, y, np.full(N, np.nan, np.float32))
    out = add(vec_add, bz, bx, by).sync_on(ctx)
    assert out[6] is bz
    np.testing.assert_allclose(host(bz), x + y, rtol=1e-6)

    bz.copy_from(np.zeros(N, np.float32))

    async def main() -> Any:
        return await add(vec_add, bz, by, by).schedule(aio.SingleStream(ctx))

    run_bounded(main())
    np.testing.assert_allclose(host(bz), 2 * y, rtol=1e-6)
    add(vec_add, bz, bx, bx).sync()  # the default policy's CUDA pool
    np.testing.assert_allclose(host(bz), 2 * x, rtol=1e-6)


def pipeline(fn: Any, acc: Any, ones: Any, n_ops: int, n: int = N) -> aio.DeviceOp[list[tuple[Any, ...]]]:
    return aio.collect(add(fn, acc, acc, ones, n) for _ in range(n_ops))


def test_a_1000_op_pipeline_agrees_in_sync_await_and_graph_modes(tc: Any, ctx: aio.CudaContext, vec_add: Any) -> None:
    ones = np.ones(N, np.float32)
    start = np.random.default_rng().integers(0, 100, N).astype(np.float32)
    expected = start + 1000
    results = {}
    b_ones, acc = buffers(tc, ctx, ones, start)
    pipeline(vec_add, acc, b_ones, 1000).sync_on(ctx)
    results["sync"] = host(acc)

    acc.copy_from(start)

    async def main() -> None:
        await pipeline(vec_add, acc, b_ones, 1000).schedule(aio.SingleStream(ctx))

    run_bounded(main())
    results["await"] = host(acc)

    acc.copy_from(start)
    with pipeline(vec_add, acc, b_ones, 1000).graph(ctx) as graph:
        assert graph.kind == "cuda"
        np.testing.assert_array_equal(host(acc), start)  # capture ran nothing
        graph.launch().sync_on(ctx)
    results["graph"] = host(acc)
    for mode, got in results.items():
        np.testing.assert_array_equal(got, expected, err_msg=mode)


def test_graph_update_copies_new_inputs(tc: Any, ctx: aio.CudaContext, vec_add: Any) -> None:
    x = np.arange(N, dtype=np.float32)
    bx, by, bz = buffers(tc, ctx, x, x, np.zeros(N, np.float32))
    graph = add(vec_add, bz, bx, by).graph(ctx)
    graph.launch().sync_on(ctx)
    np.testing.assert_array_equal(host(bz), 2 * x)
    new = np.full(N, 3, np.float32)
    graph.update(aio.copy(bx, new)).then(lambda _: graph.launch()).sync_on(ctx)
    np.testing.assert_array_equal(host(bz), new + x)
    other = aio.CudaContext(tc.Stream(ctx.device))
    graph.launch().sync_on(other)  # replays on another stream are ordered after the previous one
    graph.close()


def test_capture_refuses_allocation_and_leaves_the_stream_usable(tc: Any, ctx: aio.CudaContext, vec_add: Any) -> None:
    with pytest.raises(aio.CaptureError, match="allocates memory"):
        aio.alloc(1024).graph(ctx)
    (bx,) = buffers(tc, ctx, np.ones(N, np.float32))
    late = add(vec_add, bx, bx, bx).then(lambda _: aio.alloc(64))
    with pytest.raises(aio.CaptureError, match="allocates memory"):
        late.graph(ctx)
    assert not ctx.stream.is_capturing()
    add(vec_add, bx, bx, bx).sync_on(ctx)
    np.testing.assert_array_equal(host(bx), np.full(N, 2, np.float32))  # the aborted capture ran nothing


def test_cancelled_await_releases_inputs_only_after_the_kernels(
    tc: Any, ctx: aio.CudaContext, vec_add: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TILE_AIO_SPIN_US", "0")
    n = 1 << 24  # 500 launches of this size keep the GPU busy well past the cancel (1 << 22 did not on an H200)
    b_ones, acc = buffers(tc, ctx, np.ones(n, np.float32), np.zeros(n, np.float32))

    class Token:
        pass

    token = Token()
    idle_at_release: list[bool] = []
    weakref.finalize(token, lambda: idle_at_release.append(ctx.stream.query()))
    op = aio.zip(aio.collect(add(vec_add, acc, acc, b_ones, n) for _ in range(500)), aio.value(token))
    del token

    async def main() -> None:
        task = asyncio.ensure_future(op.schedule(aio.SingleStream(ctx)))
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        while not idle_at_release:  # bounded by run_bounded's timeout
            await asyncio.sleep(0.001)

    run_bounded(main())
    assert idle_at_release == [True]
    np.testing.assert_array_equal(host(acc, n), np.full(n, 500, np.float32))


def test_host_call_on_a_cuda_stream_runs_in_order_and_reports_errors(
    tc: Any, ctx: aio.CudaContext, vec_add: Any
) -> None:
    (bx,) = buffers(tc, ctx, np.ones(N, np.float32))
    seen: list[str] = []
    add(vec_add, bx, bx, bx).then(lambda _: aio.host_call(seen.append, "after kernel")).sync_on(ctx)
    assert seen == ["after kernel"]

    def fail() -> None:
        raise ArithmeticError("host callback failed")

    with pytest.raises(ArithmeticError, match="host callback failed"):
        aio.host_call(fail).sync_on(ctx)
    assert aio.value(1).sync_on(ctx) == 1


def test_await_waits_through_the_waiter_thread(
    tc: Any, ctx: aio.CudaContext, vec_add: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TILE_AIO_SPIN_US", "0")
    # 2**24 elements: the 200 adds run ~10 ms on an H100, longer than enqueueing them takes (with 2**20 they were
    # done before the await began waiting, and the ticker never ran: seen on the H100).
    n = 1 << 24
    b_ones, acc = buffers(tc, ctx, np.ones(n, np.float32), np.zeros(n, np.float32))

    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    async def main() -> int:
        beside = asyncio.create_task(ticker())
        await asyncio.sleep(0)
        started = ticks
        await pipeline(vec_add, acc, b_ones, 200, n).schedule(aio.SingleStream(ctx))
        beside.cancel()
        return ticks - started

    # Bug caught: an await that blocks the event loop until the GPU finishes (no waiter thread) lets no other
    # task run meanwhile; through the waiter thread the loop keeps ticking during the 200 launches.
    assert run_bounded(main()) > 0
    np.testing.assert_array_equal(host(acc, n), np.full(n, 200, np.float32))


def test_shared_output_across_two_streams(tc: Any, ctx: aio.CudaContext, device: Any, vec_add: Any) -> None:
    x = np.arange(N, dtype=np.float32)
    bx, bz, bw = buffers(tc, ctx, x, np.zeros(N, np.float32), np.zeros(N, np.float32))
    first = add(vec_add, bz, bx, bx).shared()  # z = 2x on ctx
    other = aio.CudaContext(tc.Stream(device))
    first.sync_on(ctx)
    first.then(lambda out: add(vec_add, bw, out[6], out[6])).sync_on(other)  # w = 2z on another stream
    np.testing.assert_array_equal(host(bw), 4 * x)


def test_capture_with_buffers_of_another_stream(tc: Any, ctx: aio.CudaContext, device: Any, vec_add: Any) -> None:
    """REQUESTS.md item 8: buffers owned by another stream and first used inside the capture. The capture waits
    for their allocation on the host (a stream wait would tie it to uncaptured work) and records no per-launch
    event (one recorded in a capture could never be waited on), so more launches than tile.core's event window
    capture, replay right, and the buffers free cleanly afterwards."""
    home = tc.Stream(device)
    x = np.arange(N, dtype=np.float32)
    bx, acc = (tc.DeviceBuffer.from_host(a, stream=home) for a in (x, np.zeros(N, np.float32)))
    with aio.collect(add(vec_add, acc, acc, bx) for _ in range(12)).graph(ctx) as graph:
        assert not ctx.stream.is_capturing()
        graph.launch().sync_on(ctx)
        graph.launch().sync_on(ctx)
    np.testing.assert_array_equal(host(acc), 24 * x)
    bx.free()
    acc.free()
    home.synchronize()
