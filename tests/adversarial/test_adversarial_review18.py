"""Review 18: an adversarial look, from safe code only, at what was merged after review 17 (``Launch.__del__`` handing
back launches moved into an op dropped unrun, tile.core's ``HostFunctionError``, the -0.0/NaN launch keys, the
two-stage argmax, decode attention's one-key-tile form, ``qkv_prep_one``, the fused split-K GEMV forms). Each hole's
test names it, failed before its fix (both launch paths) and asserts the behaviour or the typed error.

Holes found and fixed:

- a ``.shared()`` op (and ``.unzip()``, built on it) handed its inner op back when released by a tree that never
  reached it, once another tree had run it: a tree failing before the shared op (``zip(failing, s)``) released the
  inner launch while the first run's kernel was still queued on another stream. Its pending counts dropped to zero, so
  a ``free()`` through another handle of the memory ran at once (on the GPU a use after free of the queued kernel;
  on the CPU the interpreter found its argument gone), and the handles it had lent in flight came back live. Now the
  inner op is handed back only once the first run's work is done (`tile.aio._shared`: a completion recorded right
  after the first run); the tree that ran it, or one that waited for it, releases it then.
- driver calls inside a CUDA host function past review 17's guard: ``tile.core.Device``'s queries (the count, an
  ordinal not seen before, a name, attribute, memory size or compute capability not yet cached) and tile.bindings'
  device query helpers (``device_count()``, ``driver_version()``, ``device_name()``...) called the driver there (the
  simulator records it; CUDA fails the call or deadlocks). tile.bindings runs a guard before its queries'
  driver calls (``set_query_guard``), which tile.core sets to raise `HostFunctionError` inside a host function. (The
  raw ``tile.bindings.driver()`` module is the caller's own, like ctypes.) Also tried there and refused or harmless:
  DLPack export of a device tensor and ``__dlpack_device__`` (no driver call), ``tc.borrow``, ``to_numpy``,
  ``from_numpy``/``zeros`` on the device, a view's ``free()`` (refused), ``DeviceBuffer.free()`` (deferred).

Tried and found solid (tests below where cheap, else reasoned):

- ``Launch.__del__``'s new hand-back: every execution except a run's root lends (``_execute(ctx, lend=True)`` sets
  ``_lent`` in both paths right after the enqueue: nothing between them raises), and a root's fate is "executed by",
  never "moved into"; a launch a ``.then()`` function returned is claimed "returned by", so a chain whose link raised
  after earlier links ran, a captured chain (``_run_in`` on the recorder lends the "captured" fate) whose graph is
  dropped unclosed, a ``Graph.update()`` op, an awaited chain (the run holds the tree until its completion) and zips
  keep their counts until their release. A launch moved and never run hands back, as review 17 wanted.
- numpy float scalars equal to a Python float (NEP 50: ``np.float16(0.1) == 0.1``) never reuse the other's prepared
  launch: the scalar's class is part of the plan's layout (test in packages/tile-frontend/tests/
  test_frontend_gpu_path.py); the ``_prepared`` cache hashes by value (equal hashes of different float64 values that
  a float16 would take for equal cannot be built: they differ by a multiple of 2**61 - 1 scaled by a power of two).
- deferred releases of garbage-collected handles: a handle's finalizer runs once (PEP 442), so the queue holds at
  most one entry per resurrected handle, which the program keeps alive itself; a resurrected buffer stays usable,
  its explicit ``free()`` runs once and the queued release is dropped (simulator: no bugs).
- the new kernels on the CPU interpreter (it checks bounds): the two-stage argmax at 1, 2, 255-257, 2049-2050
  columns, 1 and 3 rows, NaN, all-NaN, all -inf and tied rows (numpy's nanargmax, 0 for all-NaN); decode attention
  at caches of 1, 5, 16, 17, 48 positions (shorter than one key tile included), splits None/1/2/3/100 (one key
  tile a split, slots past the keys), GQA 1/2/8, lengths 0..S; ``decode_attention_op`` given lengths past the
  cache, negative or 2**31 - 1 (not read on the host) runs without an access outside; ``prep_qkv``'s ``group=``
  (not a power of two, not dividing the heads) and ``occupancy=`` (outside 0..32) are refused on the host, and
  ``occupancy`` makes a safe ``tile.entry`` of the same function. (Noted, not a safety hole: ``argmax``'s FLAT
  indices are i32, ``r * N + col``, so a flat row set of more than 2**31 elements would give a wrapped index.)
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import tile.bindings as tb
import tile.core as tc
import tile.frontend as tile
from tile import aio
from tile.core.testing import SimDriver
from tile.frontend import f32


def _fail(_: object) -> object:
    raise ZeroDivisionError("the tree fails before it reaches the shared op")


def _shared(op: aio.DeviceOp[Any]) -> tuple[aio.DeviceOp[Any], aio.DeviceOp[Any]]:
    s = op.shared()
    return s, s


def _unzipped(op: aio.DeviceOp[Any]) -> tuple[aio.DeviceOp[Any], aio.DeviceOp[Any]]:
    z, x, _ = op.unzip(3)
    return z, x


@pytest.mark.parametrize("share", [_shared, _unzipped], ids=["shared", "unzip"])
def test_a_tree_that_never_reached_a_shared_op_does_not_hand_it_back_while_its_first_run_is_queued(
    kernels: ModuleType, path: str, share: Callable[[aio.DeviceOp[Any]], tuple[aio.DeviceOp[Any], aio.DeviceOp[Any]]]
) -> None:
    x = tile.ones(f32, [64])
    keep = x[0:32]  # another handle of the storage the launch reads
    storage = x._storage
    s, t = share(kernels.scale_by_const(tile.zeros(f32, [64]).partition([32]), x, 2.0))
    del x
    gate = threading.Event()
    first, other = aio.HostStream(worker=True), aio.HostStream(worker=True)
    results: list[Any] = []

    def run_first() -> None:  # the first run: its kernel queued behind work that waits for the gate
        results.append(aio.zip(aio.host_call(gate.wait), s).sync_on(first))

    runner = threading.Thread(target=run_first)
    runner.start()
    try:
        while storage.pending == 0 or first.query():
            gate.wait(0.001)  # until the first run's kernel is queued
        with pytest.raises(ZeroDivisionError, match="before it reaches the shared op"):
            aio.zip(aio.value(None).map(_fail), t).sync_on(other)  # released here; it never ran the shared op
        assert storage.pending == 1, "the shared launch was handed back while its kernel was queued"
        keep.free()
        freed_early = storage.dropped
        assert not freed_early, "the memory was freed under the queued kernel"
    finally:
        gate.set()
        runner.join()
    assert len(results) == 1
    assert storage.pending == 0
    assert storage.dropped, "the deferred free ran once the first run's tree was released"
    out = results[0][1]
    z = out if isinstance(out, tile.Partition) else out[0]
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.full(64, 2, np.float32))


_QUERIES: dict[str, Callable[[tc.Device], object]] = {
    "Device.count": lambda _: tc.Device.count(),
    "Device(1)": lambda _: tc.Device(1),  # no such device: the ordinal check asks the driver for the count
    "attribute": lambda device: device.attribute("multiprocessor_count"),
    "name": lambda device: device.name,
    "total_memory": lambda device: device.total_memory,
    "compute_capability": lambda device: device.compute_capability,
    "tile.bindings.device_count": lambda _: tb.device_count(),
    "tile.bindings.driver_version": lambda _: tb.driver_version(),
    "tile.bindings.device_name": lambda _: tb.device_name(0),
}


@pytest.mark.parametrize("query", list(_QUERIES))
def test_device_queries_are_refused_inside_a_host_function(sim: SimDriver, query: str) -> None:
    """tile.core refused its driver calls inside a host function, but a `Device`'s queries (an ordinal not seen
    before, a name or attribute not yet cached, the count) and tile.bindings' query helpers called the driver there
    (the simulator records it: CUDA fails the call or deadlocks)."""
    stream = tc.Stream()
    device = stream.device
    ask = _QUERIES[query]
    seen: list[BaseException] = []

    def host_fn() -> None:
        try:
            ask(device)
        except tc.TileError as exc:
            seen.append(exc)
            raise

    with pytest.raises(tc.HostFunctionError, match=r"device query.*inside a CUDA host function"):
        aio.host_call(host_fn).sync_on(aio.CudaContext(stream))
    assert sim.bugs == [], "a driver call was made inside the host function"
    assert [type(e) for e in seen] == [tc.HostFunctionError]
    if query != "Device(1)":
        ask(device)  # outside a host function the same query is fine
