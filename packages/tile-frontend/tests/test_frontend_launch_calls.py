"""The driver calls of tile.frontend's safe launches, counted on tile.core's simulated driver, on both launch paths.

Each real driver call costs the host one to three microseconds, so a change that adds one to a launch shows here
(docs/development.md, "Driver calls per launch", has the table): a launch waited for is one ``cuLaunchKernel`` and
one ``cuStreamSynchronize``; each link of a same-stream ``.then`` chain adds one ``cuLaunchKernel`` and nothing else
(stream order is the ordering; the hand-back waits once, for the whole chain). The kernels are compiled to bytecode
only (no tileiras) and run in the simulator by a numpy body over the packed arguments, so the asynchronous tests
check the values too: a chain whose links were misordered, or handed back before their work ran, reads wrong bytes
or leaves an entry in ``SimDriver.bugs``.
"""

from __future__ import annotations

import ctypes
import dataclasses
import gc
import sys
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from cuda.bindings import driver as real

import tile.bindings as tb
import tile.core as tc
import tile.frontend as tile
from tile.compiler import compile_kernel
from tile.core.testing import SimDriver, SimKernel, counting_calls, simulated, sm90_cubin
from tile.frontend import _accel, _entry, _execute, f32
from tile.frontend._execute import GPU_KIND

N, B = 1024, 128
BUILT = _accel.compiled() is not None


def _floats(ptr: int, n: int) -> np.ndarray[Any, Any]:
    return np.ctypeslib.as_array((ctypes.c_float * n).from_address(ptr))


def _add_body(values: tuple[int, ...], grid: tuple[int, int, int]) -> tuple[list[tuple[int, int]], Any]:
    """``add(z, x, y)``'s effect: z = x + y over the grid's tiles (its arguments: base, shape, stride for each)."""
    z, nz, _, x, _, _, y, _, _ = values
    n = min(nz, grid[0] * B)

    def run() -> None:
        _floats(z, n)[:] = _floats(x, n) + _floats(y, n)

    return [(z, 4 * n), (x, 4 * n), (y, 4 * n)], run


def _accumulate_body(values: tuple[int, ...], grid: tuple[int, int, int]) -> tuple[list[tuple[int, int]], Any]:
    """``accumulate(z, x)``'s effect: z += x over the grid's tiles."""
    z, nz, _, x, _, _ = values
    n = min(nz, grid[0] * B)

    def run() -> None:
        _floats(z, n)[:] += _floats(x, n)

    return [(z, 4 * n), (x, 4 * n)], run


def _simulated_gpu(monkeypatch: pytest.MonkeyPatch, k: ModuleType, seed: int, eagerness: float) -> Iterator[SimDriver]:
    # The kernels' compile caches get the simulator's stand-in cubins here: give them empty caches for the test (the
    # monkeypatch puts the session's back after), or later tests of the session module would launch those cubins.
    for kernel in (k.add, k.accumulate):
        for cache in ("_cache", "_by_layout", "_plans"):
            monkeypatch.setattr(kernel, cache, {})
    with simulated(asynchronous=True, seed=seed) as sim:
        sim.eagerness = eagerness

        # The kernels may come from the compile cache: the simulator knows them by name beforehand.
        sim.add_kernel(SimKernel("add", ["ptr", "i32", "i32"] * 3, _add_body))
        sim.add_kernel(SimKernel("accumulate", ["ptr", "i32", "i32"] * 2, _accumulate_body))

        def compile_for_sim(fn: Any, spec: Any, target: Any, **kwargs: Any) -> Any:
            compiled = compile_kernel(fn, spec, target, cubin=False, **kwargs)
            if target.arch == "cpu":
                return compiled
            kinds = [GPU_KIND.get(s.dtype, "ptr") for s in compiled.abi.slots]
            assert kinds == sim.kernels[compiled.entry].signature, "the simulator runs add and accumulate only"
            return dataclasses.replace(compiled, cubin=sm90_cubin())

        monkeypatch.setattr(_entry, "compile_kernel", compile_for_sim)
        # Modules and prepared launches of an earlier simulated session belong to its devices: start afresh.
        monkeypatch.setattr(_execute, "_modules", {})
        monkeypatch.setattr(_execute, "_prepared", {})
        tile.set_backend("gpu")
        try:
            yield sim
        finally:
            tile.set_backend("cpu")
            gc.collect()
    assert sim.bugs == [], sim.bugs


@pytest.fixture
def sim(monkeypatch: pytest.MonkeyPatch, k: ModuleType) -> Iterator[SimDriver]:
    yield from _simulated_gpu(monkeypatch, k, seed=1, eagerness=0.0)


def _operands() -> list[Any]:
    gpu = tc.Device(0)
    return [
        tile.zeros(f32, [N], device=gpu).partition([B]),
        tile.from_numpy(np.arange(N, dtype=np.float32), device=gpu),
        tile.ones(f32, [N], device=gpu),
    ]


def _chain(add: Any, args: list[Any], n: int, stream: Any) -> list[Any]:
    """``n`` launches of ``add`` on the same arguments, each made by the previous one's ``then``, waited for once."""
    op = add(*args)
    for _ in range(n - 1):
        op = op.then(lambda out: add(*out))
    return list(op.sync_on(stream))


def test_a_launch_waited_for_is_a_launch_and_a_synchronize(sim: SimDriver, path: str, k: ModuleType) -> None:
    """``add(...).sync_on(s)`` and ``.sync()``: one ``cuLaunchKernel`` and one ``cuStreamSynchronize``, nothing else.
    Bugs caught: an event recorded (or created, queried) per launch for the hand-back, a context make-current or
    capture query per launch."""
    add = k.add
    stream = tc.Device(0).create_stream()
    with counting_calls(sim) as calls:
        args = list(add(*_operands()).sync_on(stream))  # compiles, plans and prepares the launch
        args = list(add(*args).sync())
        calls.clear()
        args = list(add(*args).sync_on(stream))
        assert dict(calls) == {"cuLaunchKernel": 1, "cuStreamSynchronize": 1}
        calls.clear()
        args = list(add(*args).sync())
        assert dict(calls) == {"cuLaunchKernel": 1, "cuStreamSynchronize": 1}
    np.testing.assert_array_equal(args[0].unpartition().to_numpy(), np.arange(N) + 1)


def _settle() -> None:
    """Destroy now what earlier tests left to the collector (their streams), not inside a count: collections and
    tile.core's deferred releases (a finalized handle's release waits for a safe point, or for a resurrecting
    finalizer of the same garbage to let go) until a round releases nothing more."""
    from tile.core import _reaper

    for _ in range(10):
        if not gc.collect() and not _reaper.pending():
            return
        _reaper.drain()


def test_each_link_of_a_same_stream_chain_is_one_launch(sim: SimDriver, path: str, k: ModuleType) -> None:
    """A ``.then`` chain of n launches on one stream: n ``cuLaunchKernel`` and one ``cuStreamSynchronize`` in all,
    the hand-back of every link included. Bugs caught: an event (or a stream wait) between links, one event per link
    for the hand-back."""
    _settle()
    stream = tc.Device(0).create_stream()
    with counting_calls(sim) as calls:
        args = _chain(k.add, _operands(), 2, stream)  # compiles, plans (replacing an earlier test's plan) and prepares
        _settle()  # the replaced plan's garbage (an earlier simulated device's streams) goes now, not in a count
        for n in (1, 2, 11):
            calls.clear()
            args = _chain(k.add, args, n, stream)
            assert dict(calls) == {"cuLaunchKernel": n, "cuStreamSynchronize": 1}, n
            gc.collect()
            assert dict(calls) == {"cuLaunchKernel": n, "cuStreamSynchronize": 1}, f"{n}, released"


@pytest.mark.parametrize("eagerness", [0.0, 1.0])
def test_the_benchmarks_chain_and_waited_launches_make_one_launch_each(
    monkeypatch: pytest.MonkeyPatch, path: str, k: ModuleType, eagerness: float
) -> None:
    """``bench_frontend.py --launch-only``'s two Tile loops, counted whole: a 100-link ``.then`` chain is 100
    ``cuLaunchKernel`` and one ``cuStreamSynchronize``, and 50 ``add(...).sync_on(s)`` are 50 of each, their hand-backs
    and garbage included, with the operands made as the benchmark makes them (no device named). At eagerness 1.0
    every driver call first runs the work queued before it, as a GPU that keeps up with the host: a call made only
    once a kernel is seen done (an event query or a stream query to hand back early, a context check) shows there.
    The same per-launch calls as ``ct.launch`` (one launch; a launch and a synchronize when waited for)."""
    for sim in _simulated_gpu(monkeypatch, k, seed=4, eagerness=eagerness):
        stream = tc.Device(0).create_stream()
        x = np.arange(N, dtype=np.float32)
        args: list[Any] = [tile.zeros(f32, [N]).partition([B]), tile.from_numpy(x), tile.ones(f32, [N])]
        with counting_calls(sim) as calls:  # (a prepared launch keeps the cuLaunchKernel it was made with)
            args = _chain(k.add, args, 2, stream)  # compiles, plans and prepares the launch
            gc.collect()
            calls.clear()
            args = _chain(k.add, args, 100, stream)
            gc.collect()
            assert dict(calls) == {"cuLaunchKernel": 100, "cuStreamSynchronize": 1}
            calls.clear()
            for _ in range(50):
                args = list(k.add(*args).sync_on(stream))
            gc.collect()
            assert dict(calls) == {"cuLaunchKernel": 50, "cuStreamSynchronize": 50}
        np.testing.assert_array_equal(args[0].unpartition().to_numpy(), np.arange(N) + 1)
        del args
        gc.collect()
        assert sim.bugs == [], sim.bugs


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("eagerness", [0.0, 0.3])
def test_a_chain_runs_in_order_and_hands_back_after_its_work(
    monkeypatch: pytest.MonkeyPatch, path: str, k: ModuleType, seed: int, eagerness: float
) -> None:
    """Chains on an asynchronous simulated driver (work queued until a wait, or run early by a seeded scheduler):
    each link reads the previous link's output (an overwrite, then two accumulations: the sum is right only in chain
    order), the hand-back comes after the last, and the bytes read on the host after it are the chain's; no access
    touched freed memory (``sim.bugs``). Bug caught: the hand-back's ``synchronize`` skipped (``CudaContext.
    synchronize`` as ``pass``: the host reads an earlier value)."""
    for sim in _simulated_gpu(monkeypatch, k, seed, eagerness):
        stream = tc.Device(0).create_stream()
        z, x, y = _operands()
        op = k.add(z, x, y)  # z = x + y, then z += x twice: 3x + y only in this order
        op = op.then(lambda out: k.accumulate(out[0], out[1])).then(lambda out: k.accumulate(*out))
        z, x = op.sync_on(stream)
        np.testing.assert_array_equal(z.unpartition().to_numpy(), 3 * np.arange(N) + 1)
        del z, x, y, op
        gc.collect()
        assert sim.bugs == [], sim.bugs


def test_a_relaunch_rechecks_after_a_free_and_raises_a_failed_launch(
    sim: SimDriver, path: str, k: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The prepared relaunch (on the compiled path, `relaunch` in C under tile.core's ``use_lock``): a free anywhere
    bumps tile.core's invalidation epoch, after which the relaunch revalidates and still launches once; a launch the
    driver refuses raises tile.bindings' typed CudaError on both paths. Bugs caught: the guard's epoch ignored, a failed
    ``cuLaunchKernel`` result taken as a success."""
    stream = tc.Device(0).create_stream()
    with counting_calls(sim) as calls:  # (a prepared launch keeps the cuLaunchKernel it was made with)
        args = list(k.add(*_operands()).sync_on(stream))  # compiles, plans and prepares the launch
        args = list(k.add(*args).sync_on(stream))  # the prepared launch, relaunched
        tc.DeviceBuffer.allocate(64).free()  # an unrelated free: every prepared launch rechecks its buffers
        calls.clear()
        args = list(k.add(*args).sync_on(stream))
        assert dict(calls) == {"cuLaunchKernel": 1, "cuStreamSynchronize": 1}
    z = args[0].unpartition()
    np.testing.assert_array_equal(z.to_numpy(), np.arange(N) + 1)
    args[0] = z.partition([B])
    (plan,) = k.add._plans.values()
    prepared = plan.prepared[3]
    refused = (real.CUresult.CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES,)
    monkeypatch.setattr(prepared, "_launch", lambda *_: refused)
    with pytest.raises(tb.CudaError, match="CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"):
        k.add(*args).sync_on(stream)


def test_repeated_launches_and_chains_keep_memory_flat(sim: SimDriver, path: str, k: ModuleType) -> None:
    """Thousands of launches waited for and of ``.then`` links allocate nothing that outlives them: the count of live
    Python memory blocks after 2,000 more of each is where it was after the first 500 (a reference the compiled path
    forgot to drop, a tuple or a result per launch, leaks a block each). ``benchmarks/bench_launch_sim.py --leaks``
    runs 10^5."""
    stream = tc.Device(0).create_stream()
    args = _operands()

    def burst(n: int) -> None:
        nonlocal args
        for _ in range(n // 10):
            for _ in range(5):
                args = list(k.add(*args).sync_on(stream))
            args = _chain(k.add, args, 5, stream)
            sim.log.clear()  # the simulator's own record of each call

    burst(500)
    gc.collect()
    before = sys.getallocatedblocks()
    burst(2000)
    gc.collect()
    assert sys.getallocatedblocks() - before < 200
