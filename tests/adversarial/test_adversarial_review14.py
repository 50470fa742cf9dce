"""Review 14: Tile's interop and lifetime surfaces attacked from safe code (foreign tensors through DLPack, numpy and
``__cuda_array_interface__``; exports outliving a free or a move; graphs; tile.aio and tile.distributed ownership;
tile.kernels' host APIs and the autotuner's disk records).

Holes found and closed here:

- ``Tensor.__cuda_array_interface__`` handed another library (cupy, numba) a raw pointer that Tile did not track: the
  consumer keeps only the Tensor object, so ``t.free()`` released the memory (and ``t.partition(...)`` let a kernel
  write it) while the consumer still read it. DLPack exports are tracked (the free waits, the partition is refused),
  the interface is not and cannot be (the consumer never says when it is done), so device tensors no longer offer it:
  reading it raises `UntrackedExportError` (an `AttributeError` too, so ``hasattr`` is False and libraries take the
  DLPack route), which says to use ``from_dlpack`` or ``lend()``.
  tile.core had the same hole for its own users (``cupy.asarray(buffer); buffer.free()``): ``DeviceBuffer`` and
  ``DeviceView`` now refuse the interface the same way (``tile.core.UntrackedExportError``, an `AttributeError`),
  saying to use ``cupy.from_dlpack(buf)`` / ``torch.from_dlpack(buf)``, which tile.core tracks.
- ``tile.from_dlpack(buffer.view(...))`` of a tile.core buffer: ``tile.core.borrow`` hands a DeviceView back as it
  is, with no export registered, so ``buffer.free()`` succeeded under the tensor, which read freed memory and, once
  the pool reused the block, wrote into another buffer. The frontend now imports such a view through DLPack, which
  tile.core tracks (the free raises ``StateError`` while the tensor lives).
- Device memory not aligned to its element size was borrowed (a kernel's access faults and kills the context); it is
  refused. cuda.core's untyped ``ValueError`` for part-element strides now reaches the user as `ArgumentError`.
- ``tile.kernels.rope``: ``head_dim`` was used as given (a numpy int refused by the partition, a float a bare
  ``TypeError``, a lying int subclass past the range check) and ``theta`` unchecked; both are read once, typed.

Tried and found solid (no test added where earlier reviews cover it): stride-0, overlapping, negative, byte-swapped
and misaligned host arrays; read-only arrays through DLPack, ``__array_interface__`` and wrappers; exports made
writable again; graphs whose captured inputs are freed, partitioned, lent, exported or written by ``graph_write``;
tile.kernels ``out=`` aliasing an input, broadcast, non-contiguous, too small, a share or a loan; sizes as bools,
floats, numpy ints and lying ints; hand-picked and on-disk autotune configs (a record only selects a candidate).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import tile.core as tc
import tile.frontend as tile
from tile.core.testing import SimDriver, simulated


@pytest.fixture
def sim() -> Iterator[SimDriver]:
    with simulated(asynchronous=True, seed=1) as driver:
        yield driver
        gc.collect()
    assert driver.bugs == [], driver.bugs


class UnownedMemory:
    """What cupy / numba keep of a ``__cuda_array_interface__`` import: the pointer and the exporting object."""

    def __init__(self, exporter: Any) -> None:
        self.ptr = exporter.__cuda_array_interface__["data"][0]
        self.exporter = exporter


# -- hole: __cuda_array_interface__ was an export Tile did not track -------------------------------------------------


def test_a_device_tensor_refuses_an_untracked_cuda_array_interface(sim: SimDriver) -> None:
    """Before the fix the consumer got the pointer, ``t.free()`` closed the buffer at once and the consumer read
    freed memory (a partition of ``t`` would likewise have let a kernel write what the consumer reads)."""
    t = tile.from_numpy(np.arange(16, dtype=np.float32), device=tc.Device(0))
    with pytest.raises(tile.UntrackedExportError, match=r"from_dlpack.*lend\(\)"):
        UnownedMemory(t)
    assert not hasattr(t, "__cuda_array_interface__")  # libraries that probe for it take the DLPack route instead
    with pytest.raises(AttributeError, match="does not track"):
        t.__cuda_array_interface__  # noqa: B018  # the property itself is the attack
    buffer = t._storage.buffer
    assert buffer is not None
    consumer = t.__dlpack__(max_version=(1, 0))  # the tracked route: the free waits for the consumer
    t.free()
    assert not buffer.closed
    del consumer
    assert buffer.closed


def test_the_refused_interface_leaves_the_tensor_usable(sim: SimDriver) -> None:
    t = tile.from_numpy(np.arange(8, dtype=np.float32), device=tc.Device(0))
    with pytest.raises(tile.TileError, match="DLPack"):
        t.__cuda_array_interface__  # noqa: B018
    z = t.partition([8])  # no export was registered by the refused read
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.arange(8, dtype=np.float32))


def test_a_core_buffer_and_its_views_refuse_an_untracked_cuda_array_interface(sim: SimDriver) -> None:
    """tile.core had the same hole for its own users: ``cupy.asarray(buffer); buffer.free()`` freed the memory under
    the consumer, which kept only the pointer and the exporting object. Buffers and every view (of a buffer, of
    borrowed or of raw memory) now refuse the interface; the DLPack route is tracked (the free is refused while the
    consumer lives)."""
    buffer = tc.DeviceBuffer.from_host(np.arange(16, dtype=np.float32))
    view = buffer.view(np.float32, (4, 4))
    raw = tc.DeviceView(buffer.ptr, np.dtype(np.float32), (16,), (4,), device=buffer.device, owner=None, unchecked=True)
    for exporter in (buffer, view, raw, buffer.view("bfloat16")):
        with pytest.raises(tc.UntrackedExportError, match=r"cupy\.from_dlpack.*torch\.from_dlpack"):
            UnownedMemory(exporter)
        assert not hasattr(exporter, "__cuda_array_interface__")  # libraries that probe take the DLPack route
        with pytest.raises(AttributeError, match="does not track"):
            exporter.__cuda_array_interface__  # noqa: B018  # the property itself is the attack
    assert issubclass(tc.UntrackedExportError, tc.TileError)
    consumer = buffer.__dlpack__(max_version=(1, 0))  # the tracked route: the free waits for the consumer
    with pytest.raises(tc.StateError, match="DLPack"):
        buffer.free()
    assert not buffer.closed
    del consumer
    buffer.free()
    assert buffer.closed


# -- hole: a tile.core view borrowed by tile.from_dlpack outlived its buffer ------------------------------------------


def test_a_borrowed_core_view_keeps_its_buffer_from_being_freed(sim: SimDriver) -> None:
    """``tile.core.borrow`` hands a DeviceView back as it is, so ``tile.from_dlpack(buffer.view(...))`` kept the raw
    pointer with no export registered: ``buffer.free()`` succeeded, the tensor read freed memory, and once the pool
    gave the block to a new buffer a partition of the tensor wrote into that buffer. The borrow now takes the DLPack
    route, which tile.core tracks: the free is refused while the tensor lives."""
    buffer = tc.DeviceBuffer.allocate(256)
    buffer.view(np.float32, 8).copy_from(np.arange(8, dtype=np.float32))
    t = tile.from_dlpack(buffer.view(np.float32, 8))
    with pytest.raises(tc.StateError, match="still viewed through DLPack"):
        buffer.free()
    np.testing.assert_array_equal(t.to_numpy(), np.arange(8, dtype=np.float32))
    del t
    gc.collect()
    buffer.free()  # the borrow is gone: the buffer frees as usual
    assert buffer.closed


def test_a_borrowed_read_only_core_view_stays_read_only(sim: SimDriver) -> None:
    buffer = tc.DeviceBuffer.allocate(64)
    view = tc.DeviceView(buffer.ptr, np.dtype(np.float32), (8,), (4,), device=tc.Device(0), owner=buffer, readonly=True)
    t = tile.from_dlpack(view)
    with pytest.raises(tile.BorrowError, match="read-only foreign memory"):
        t.partition([8])
    del t
    gc.collect()
    buffer.free()
    assert buffer.closed


# -- hole: foreign device layouts the frontend misread -------------------------------------------------------------


class CudaArray:
    """Another library's device array known only through ``__cuda_array_interface__`` (as numba or cupy offer it)."""

    def __init__(self, ptr: int, strides: tuple[int, ...], owner: object) -> None:
        self.owner = owner
        self.__cuda_array_interface__ = {
            "shape": (4,),
            "typestr": "<f4",
            "data": (ptr, False),
            "strides": strides,
            "version": 3,
        }


def test_a_foreign_device_array_with_part_element_strides_gets_a_typed_error(sim: SimDriver) -> None:
    """cuda.core's ``ValueError`` for a ``__cuda_array_interface__`` whose strides are not whole elements escaped
    ``tile.from_dlpack`` untyped (the host route says the same with `ArgumentError`)."""
    buffer = tc.DeviceBuffer.allocate(64)
    with pytest.raises(tile.ArgumentError, match=r"strides must be divisible by itemsize.*non-negative strides"):
        tile.from_dlpack(CudaArray(buffer.ptr, (6,), buffer))
    gc.collect()
    buffer.free()  # the refused borrow left nothing behind
    assert buffer.closed


def test_a_foreign_device_array_not_aligned_to_its_elements_is_refused(sim: SimDriver) -> None:
    """A view two bytes into a buffer, as f32, was borrowed and partitioned: a kernel's f32 access there faults
    (misaligned address), which kills the CUDA context. It is refused before any handle exists."""
    buffer = tc.DeviceBuffer.allocate(64)
    view = tc.DeviceView(buffer.ptr + 2, np.dtype(np.float32), (4,), (4,), device=tc.Device(0), owner=buffer)
    with pytest.raises(tile.ArgumentError, match="not aligned to its 4-byte elements"):
        tile.from_dlpack(view)
    del view
    gc.collect()
    buffer.free()  # the refused borrow left nothing behind
    assert buffer.closed


# -- weak message: rope's head_dim was used as given ------------------------------------------------------------------


class LyingInt(int):
    """An int whose comparisons say "in range" and whose int() is another number."""

    def __int__(self) -> int:
        return 4096

    def __index__(self) -> int:
        return 4096

    def __lt__(self, other: object) -> bool:
        return False

    def __gt__(self, other: object) -> bool:
        return False


@pytest.mark.parametrize("head_dim", [16.0, True, LyingInt(16)])
@pytest.mark.parametrize("name", ["rope", "rope_op"])
def test_rope_reads_head_dim_once_as_an_int(name: str, head_dim: object) -> None:
    """A float or a bool head_dim, or an int subclass that lies in comparisons, was used as given: the lying one
    passed rope's range check and was refused later by the partition with a message about tile extents."""
    import tile.kernels as tk

    x = tile.from_numpy(np.ones((4, 32), np.float32))
    with pytest.raises(tile.ArgumentError, match=rf"{name}: head_dim (must be an integer|4096 must be a power of two)"):
        getattr(tk, name)(x, np.arange(4), theta=10000.0, head_dim=head_dim)
    assert not x.moved


def test_rope_takes_a_numpy_head_dim() -> None:
    import tile.kernels as tk

    x = np.random.default_rng(0).random((4, 32)).astype(np.float32)
    got = tk.rope(x, np.arange(4), theta=10000.0, head_dim=np.int64(16)).to_numpy()
    np.testing.assert_allclose(got, tk.rope(x, np.arange(4), theta=10000.0, head_dim=16).to_numpy())


@pytest.mark.parametrize("theta", ["1e6", None, True])
def test_rope_refuses_a_theta_that_is_not_a_number(theta: object) -> None:
    """A string or None theta raised a bare TypeError from the comparison; a bool passed as 1."""
    import tile.kernels as tk

    with pytest.raises(tile.ArgumentError, match="rope: theta must be a real number"):
        tk.rope(np.ones((4, 32), np.float32), np.arange(4), theta=theta, head_dim=16)  # type: ignore[arg-type]
