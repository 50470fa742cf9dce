"""tile.aio over the real tile.core and an asynchronous driver simulator (``tile.core.testing``), no GPU needed.

Unlike test_aio_cuda_sim.py (a stand-in tile.core whose work runs at once), here ``Device``, ``Stream``, ``Event``
and ``DeviceBuffer`` are tile.core's own, and the simulated streams keep their work queued until the host
synchronizes or queries, or a seeded scheduler runs some of it early. A missing wait or an early free therefore
shows as wrong bytes or as an entry in ``sim.bugs``; each test runs under three scheduler seeds. The mutant each
test was seen to catch is noted in it. The same behaviour is checked on the H100 by test_aio_gpu.py.
"""

from __future__ import annotations

import ctypes
import gc
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import tile.core as tc
from tile import aio
from tile.aio import _cuda, _policy
from tile.core.testing import VEC_ADD_SIGNATURE, SimDriver, simulated, sm90_cubin

N = 256


@pytest.fixture(params=[1, 2, 3], ids=lambda seed: f"seed{seed}")
def sim(request: pytest.FixtureRequest) -> Iterator[SimDriver]:
    with simulated(asynchronous=True, seed=request.param) as driver:
        yield driver
        for dev in list(tc.Device._instances.values()):  # default pools hold simulated streams
            _policy._policies.pop(dev, None)
        _cuda._recent.clear()
        gc.collect()
    assert driver.bugs == [], driver.bugs


@pytest.fixture
def vec_add(sim: SimDriver) -> tc.Function:
    return tc.Module.from_cubin(sm90_cubin()).function("vec_add")


def add(fn: tc.Function, z: Any, x: Any, y: Any, n: int = N) -> aio.DeviceOp[tuple[Any, ...]]:
    """z = x + y (n float32 elements); raw int addresses are taken (the tests below use them on purpose)."""
    raw = any(type(a) is int for a in (x, y, z))
    return aio.launch(fn, (n // 128, 1, 1), [x, n, 1, y, n, 1, z, n, 1], signature=VEC_ADD_SIGNATURE, unchecked=raw)


def context() -> aio.CudaContext:
    return aio.CudaContext(tc.Stream(tc.Device(0)))


def on(ctx: aio.CudaContext, data: np.ndarray[Any, Any]) -> tc.DeviceBuffer:
    return tc.DeviceBuffer.from_host(data, stream=ctx.stream)


def queued(sim: SimDriver, ctx: aio.CudaContext) -> int:
    return len(sim.queues.get(ctx.stream.handle, ()))


def test_sync_on_returns_after_the_work_and_a_then_chain_runs_in_order(sim: SimDriver, vec_add: tc.Function) -> None:
    """Mutants killed: ``CudaContext.synchronize`` not synchronizing its stream (sync_on returns with the chain
    still queued); a ``.then`` step reading the previous step's output before it was written (not stream-ordered)."""
    ctx = context()
    x = np.arange(N, dtype=np.float32)
    bx, bz = on(ctx, x), on(ctx, np.zeros(N, np.float32))
    op = aio.copy(bz, np.zeros(N, np.float32).tobytes()).then(lambda z: add(vec_add, z, bx, bx))
    for _ in range(3):
        op = op.then(lambda out: add(vec_add, out[6], out[6], bx))  # z = z + x
    assert op.sync_on(ctx)[6] is bz
    assert queued(sim, ctx) == 0, "sync_on returned before its work ran"
    assert len(sim.kinds("launch")) == 4
    np.testing.assert_array_equal(bz.to_numpy(np.float32), 5 * x)


def test_a_cross_stream_wait_orders_the_consumer_after_the_producer(sim: SimDriver, vec_add: tc.Function) -> None:
    """The consumer reads the producer's output through raw pointers (foreign memory: tile.core tracks no use of
    it, so only aio's wait orders the two). Mutant killed: ``CudaContext.wait`` dropping
    ``self._stream.wait(completion.event)``: the consumer's kernel then runs when its own stream is synchronized,
    before the producer's, and reads zeros."""
    producer, consumer = context(), context()
    x = np.arange(N, dtype=np.float32)
    bx, bz, bw = on(producer, x), on(producer, np.zeros(N, np.float32)), on(producer, np.zeros(N, np.float32))
    tc.launch(vec_add, 2, 1, [bx, N, 1, bx, N, 1, bz, N, 1], stream=producer.stream, signature=VEC_ADD_SIGNATURE)
    done = producer.record()
    consumer.wait(done)
    add(vec_add, bw.ptr, bz.ptr, bz.ptr).sync_on(consumer)  # w = 2z, on the consumer's stream
    np.testing.assert_array_equal(bw.to_numpy(np.float32), 4 * x)
    assert done.query() or queued(sim, producer) > 0
    producer.synchronize()
    assert done.query()


def test_a_shared_output_is_waited_for_on_another_stream(sim: SimDriver, vec_add: tc.Function) -> None:
    """The first run's context is recorded and every later context waits on it (raw pointers again: only aio orders
    the streams). Mutant killed: ``Shared`` skipping ``ctx.wait(...)`` for a context other than the first run's."""
    first_ctx, other = context(), context()
    x = np.arange(N, dtype=np.float32)
    bx, bz, bw = on(first_ctx, x), on(first_ctx, np.zeros(N, np.float32)), on(first_ctx, np.zeros(N, np.float32))
    first = add(vec_add, bz, bx, bx).shared()  # z = 2x
    assert first.sync_on(first_ctx)[6] is bz
    # more work on the first run's stream (z = 2z), then the shared output used on another stream: the shared op
    # records the first context lazily (now, after that work), and the other stream waits for the record
    z = bz.ptr
    args = [z, N, 1, z, N, 1, z, N, 1]
    tc.launch(vec_add, 2, 1, args, stream=first_ctx.stream, signature=VEC_ADD_SIGNATURE, unchecked=True)
    first.then(lambda _: add(vec_add, bw.ptr, z, z)).sync_on(other)
    np.testing.assert_array_equal(bw.to_numpy(np.float32), 8 * x)


def test_a_stream_ordered_free_waits_for_uses_on_other_streams(sim: SimDriver, vec_add: tc.Function) -> None:
    """``aio.free`` on the buffer's home stream while a kernel using it is still queued on another stream: the free
    must wait for it (else the pool could hand the memory out while the kernel reads it). Mutant killed: tile.core's
    free not making the freeing stream wait on the buffer's recorded uses (``sim.bugs`` then notes the race)."""
    home, user = context(), context()
    x = np.arange(N, dtype=np.float32)
    bx, bz = on(home, x), on(user, np.zeros(N, np.float32))
    home.synchronize()
    add(vec_add, bz, bx, bx).sync_on(user)  # a first use, finished
    sim.eagerness = 0.0  # the next kernel is a long one: nothing queued runs before a synchronization needs it
    tc.launch(vec_add, 2, 1, [bx, N, 1, bx, N, 1, bz, N, 1], stream=user.stream, signature=VEC_ADD_SIGNATURE)
    aio.free(bx).sync_on(home)
    assert sim.bugs == [], sim.bugs
    assert queued(sim, user) == 0, "the free ran without waiting for the use"
    user.synchronize()
    np.testing.assert_array_equal(bz.to_numpy(np.float32), 2 * x)
    assert bx._ptr in {entry[1] for entry in sim.kinds("free")}


def test_aio_copy_and_free_on_one_context_stay_in_stream_order(sim: SimDriver, vec_add: tc.Function) -> None:
    """alloc, copy in, launch, copy out into pinned-free host bytes and free in one tree: each step sees the one
    before. Mutant killed: ``CudaContext.synchronize`` not synchronizing (the bytes read are stale)."""
    ctx = context()
    x = np.arange(N, dtype=np.float32)
    bz = on(ctx, np.zeros(N, np.float32))
    op = aio.alloc(4 * N).then(lambda b: aio.copy(b, x.tobytes()))
    op = op.then(lambda b: add(vec_add, bz, b, b)).then(lambda out: aio.free(out[0]))
    op.sync_on(ctx)
    assert queued(sim, ctx) == 0
    np.testing.assert_array_equal(bz.to_numpy(np.float32), 2 * x)


def test_aio_free_on_another_context_waits_for_that_contexts_work(sim: SimDriver, vec_add: tc.Function) -> None:
    """``aio.free(buffer)`` run on a context other than the buffer's home stream, after that context queued work on
    the memory that tile.core could not see (a raw pointer): the free, queued on the home stream, must wait for it,
    even when the GPU runs the home stream first. Mutant killed: ``_Free`` not calling
    ``buffer.record_use(ctx.stream)`` before ``buffer.free()``."""
    home, ctx = context(), context()
    x = np.arange(N, dtype=np.float32)
    bx, bz = on(home, x), on(ctx, np.zeros(N, np.float32))
    home.synchronize()
    sim.eagerness = 0.0
    args = [bx.ptr, N, 1, bx.ptr, N, 1, bz, N, 1]
    tc.launch(vec_add, 2, 1, args, stream=ctx.stream, signature=VEC_ADD_SIGNATURE, unchecked=True)
    run_home_first = aio.with_context(lambda _: sim.drain(home.stream.handle))  # the GPU picks the home stream
    aio.free(bx).then(lambda _: run_home_first).sync_on(ctx)
    assert sim.bugs == [], sim.bugs
    np.testing.assert_array_equal(bz.to_numpy(np.float32), 2 * x)


def test_host_work_on_a_cuda_context_runs_when_its_stream_reaches_it(sim: SimDriver, vec_add: tc.Function) -> None:
    """A host callback (``cuLaunchHostFunc``) queued after a kernel sees the kernel's output, and runs only when
    the stream gets there. Mutant killed: ``CudaContext.enqueue`` running ``fn`` at once on the host instead of
    through the driver (it then reads zeros)."""
    ctx = context()
    x = np.arange(N, dtype=np.float32)
    bx, bz = on(ctx, x), on(ctx, np.zeros(N, np.float32))
    sim.eagerness = 0.0
    seen: list[float] = []
    op = add(vec_add, bz, bx, bx).then(
        lambda _: aio.host_call(lambda: seen.append(float(np.ctypeslib.as_array(_floats(bz.ptr)).sum())))
    )
    op.sync_on(ctx)
    assert seen == [float(2 * x.sum())]
    assert sim.kinds("host_func") == [("host_func", ctx.stream.handle)]


def _floats(ptr: int) -> Any:
    return (ctypes.c_float * N).from_address(ptr)
