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
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from helpers_adversarial import load_source

import tile.frontend as tile
from tile import aio
from tile.frontend import f32

SOURCE = """
import tile.frontend as tile
from tile.frontend import Const, Mut, Tensor, f32


@tile.entry
def scale_by_const(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1], c: Const[float]):
    z.store(tile.load_tile_like(x, z) * c)
"""


@pytest.fixture(scope="module")
def kernels(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    return load_source("adversarial_review18_kernels", SOURCE, tmp_path_factory.mktemp("review18"))


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
        assert not storage.dropped, "the memory was freed under the queued kernel"
    finally:
        gate.set()
        runner.join()
    assert len(results) == 1
    assert storage.pending == 0
    assert storage.dropped, "the deferred free ran once the first run's tree was released"
    out = results[0][1]
    z = out if isinstance(out, tile.Partition) else out[0]
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.full(64, 2, np.float32))
