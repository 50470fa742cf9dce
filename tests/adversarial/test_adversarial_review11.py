"""Review 11: tile.core as a standalone safe CUDA API (a user who installs only tile-core and never the frontend), and
tile.bindings under it. Each hole's test names it in its docstring, failed before its fix, and asserts the typed
error; they run tile.core's GPU code paths on the CPU against the simulated driver (``tile.core.testing``), whose
memory checks turn an out-of-bounds access or a use of freed memory into an entry in ``driver.bugs`` (an
``AssertionError`` where it happens, in its immediate mode).

Holes fixed (each was reachable from safe code: no ``unsafe`` flag, no underscore name):

- an ``int`` subclass lying in ``__radd__``/``__lt__``/``__mod__`` as a view's ``offset`` passed the bounds check as 0
  and moved the view's pointer wherever its ``__radd__`` said (``buffer.view(np.uint8, 16, offset=Liar(0)).fill(1)``
  wrote past the buffer); the same for ``copy_from``/``copy_to`` offsets, shapes and grid extents. Integers are now
  taken as the exact ``int`` that was checked (``as_index``).
- the fields the checks read were plain attributes: ``buffer.nbytes = 1 << 20`` then ``buffer.fill(0)`` wrote a
  megabyte past a 16-byte allocation; ``view.shape = ...``, ``view.readonly = False`` (writing memory a producer
  exported read-only), ``prepared.buffers = ()`` (the relaunch guard then missed a freed buffer), ``stream.handle =
  ...`` (a buffer skipped the wait that orders a stream after its allocation), ``function.param_layout = ...`` (the
  argument count check passed, the driver read parameters past the block). They are read-only now (`ReadOnlyError`).
- the handle classes could be subclassed (a ``DeviceBuffer`` subclass overriding ``ptr``) or forged (a plain class
  with ``__class__ = tc.DeviceBuffer`` passed ``isinstance`` and reported the pointer and size it liked to
  ``copy``). They are final (`FinalClassError`) and ``isinstance`` is exact.
- ``DeviceView(ptr, dtype, shape, strides, buffer=b, ...)`` made directly (the public constructor) trusted its
  address and extents: a view of a Tile buffer now must lie inside it, on its device, and the buffer must be live.
- a `PreparedLaunch` kept only the Tile buffers it points into: a borrowed view (``tc.borrow(...)``) it points into
  was dropped with the launch's other arguments, its producer freed the memory, and the next call of the prepared
  launch ran the kernel on freed memory. It keeps those views alive now.
- ``shared_mem=-1`` and grid or block extents of 2**32 or more reached ``cuLaunchKernel`` (an untyped
  ``OverflowError`` from cuda-python's conversion on the GPU); now `LaunchArgumentError` before anything is enqueued.
- ``copy`` between partly overlapping ranges of one device (two views of one buffer, or ``copy_from`` a view of the
  buffer itself) was enqueued: ``cuMemcpy`` leaves the result undefined. Refused with `LayoutMismatchError`.
- ``buffer.view(np.uint8, np.int64(4))`` raised an untyped ``TypeError`` (a numpy integer as a shape).
- a free on another thread between a use's checks and its enqueue: ``launch``, a prepared launch, a copy, a fill or a
  DLPack export saw the buffer live, the other thread's free was enqueued first, and the kernel or copy ran on freed
  memory. A use now holds ``use_lock`` from its checks until it is enqueued and recorded (never across a blocking
  wait), and a free takes it; a blocking copy on another stream records its use too (the free came during its wait).
- ``module.unload()`` says its functions can no longer be launched, but a launch prepared before kept launching.
- host arrays: a numpy subclass overriding ``nbytes`` (or ``ctypes``, ``flags``, ``dtype``) set a host copy's size (a
  16-byte array claiming 1 MiB took a megabyte device-to-host: the process hung in a corrupted heap), and an object
  array took device bytes as PyObject pointers. Copies read the plain ndarray view and refuse object dtypes.
- ``Device(n)`` (tile.bindings' ``device_handle``) compared the ordinal through the int's own comparisons: an int
  subclass claiming to be in range reached ``cuDeviceGet`` with any ordinal. Checked and kept as the exact int.
- a buffer remembered the stream handles it was ordered on; the driver reuses a destroyed stream's handle, so a new
  stream skipped the wait for the buffer's allocation. A handle counts only while its stream is alive and open.

Attempts that turned out already closed (the most important have a test below):

- use after free and double free through views, exports and prepared launches of Tile buffers (UseAfterFreeError /
  DoubleFreeError before the driver); a DLPack export blocks an explicit free (StateError) until the consumer lets go,
  and a view outliving its buffer refuses ``ptr``; pinned memory's release waits for its recorded uses (and
  ``cuMemFreeHost`` synchronizes), and ``.array`` keeps it alive.
- two threads freeing one buffer free it once; a free on a capturing stream is deferred; copying a closed stream's
  buffer orders it on the default stream; streams and events refuse use after close, and a stream of another device
  is refused by copies and launches (WrongDeviceError).
- launch argument packing: bools, numpy bools, floats, huge ints, numpy scalars of other widths, ``None`` and objects
  for every kind are LaunchArgumentError; a null int address is NullHandleError; an unknown kind or a wrong count is
  refused before the stream is touched.
- negative or unaligned view offsets, negative extents, views larger than the buffer: OutOfBoundsError /
  LayoutMismatchError; strided and read-only views refuse copies and fills.

Left as is (documented trust, not a hole in the checks): a launch's int address argument, a ``DeviceView`` made
directly over a foreign address (no Tile buffer), ``Stream.borrow`` of an int handle and ``__dlpack__(stream=...)``
of a consumer's stream handle are trusted as given; an explicit ``free()`` while a ``__cuda_array_interface__``
consumer still uses the memory is the caller's promise.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import tile.core as tc
from tile.core.testing import VEC_ADD_SIGNATURE, SimDriver, simulated, sm90_cubin

ARGS = VEC_ADD_SIGNATURE


@pytest.fixture
def sim() -> Iterator[SimDriver]:
    with simulated() as driver:
        yield driver


@pytest.fixture
def vec_add(sim: SimDriver) -> tc.Function:
    return tc.Module.from_cubin(sm90_cubin()).function("vec_add")


class Liar(int):
    """An int that passes comparisons and range checks as itself but adds as 4096 more (``ptr + offset``)."""

    def __radd__(self, other: object) -> int:
        return int(other) + 4096  # type: ignore[call-overload,no-any-return]

    def __add__(self, other: object) -> int:
        return 0

    def __lt__(self, other: object) -> bool:
        return False

    def __gt__(self, other: object) -> bool:
        return False

    def __mod__(self, other: object) -> int:
        return 0


def _vec_args(x: Any, y: Any, z: Any, n: int = 128) -> list[Any]:
    return [x, n, 1, y, n, 1, z, n, 1]


def test_a_lying_int_offset_is_used_as_the_value_it_was_checked_as(sim: SimDriver) -> None:
    """Hole: ``offset=Liar(0)`` passed the bounds check as 0, and ``ptr + offset`` ran its ``__radd__``: the view
    pointed 4096 bytes past a 16-byte buffer and ``fill`` wrote there (the simulator saw an access outside every
    allocation). The offset is now taken as the exact int 0."""
    buffer = tc.DeviceBuffer.allocate(16)
    view = buffer.view(np.uint8, 16, offset=Liar(0))
    assert view.ptr == buffer.ptr
    view.fill(1)
    buffer.copy_from(np.full(4, 7, np.uint8), offset=Liar(12))
    np.testing.assert_array_equal(buffer.to_numpy()[8:], [1, 1, 1, 1, 7, 7, 7, 7])
    with pytest.raises(tc.OutOfBoundsError, match="fall outside the 16-byte buffer"):
        buffer.copy_from(np.zeros(8, np.uint8), offset=Liar(12))
    assert sim.bugs == []


def test_numpy_integers_and_int_subclasses_are_shapes(sim: SimDriver) -> None:
    """Hole: a numpy integer as a shape raised an untyped TypeError ('numpy.int64' object is not iterable)."""
    buffer = tc.DeviceBuffer.allocate(16)
    assert buffer.view(np.uint8, np.int64(4)).shape == (4,)
    assert type(buffer.view(np.uint8, (Liar(2), np.uint8(3))).shape[0]) is int
    with pytest.raises(tc.LayoutMismatchError, match="extents must be non-negative ints"):
        buffer.view(np.uint8, (2, None))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("make", "field", "value"),
    [
        (lambda: tc.DeviceBuffer.allocate(16), "nbytes", 1 << 20),
        (lambda: tc.DeviceBuffer.allocate(16), "stream", None),
        (lambda: tc.DeviceBuffer.allocate(16), "device", None),
        (lambda: tc.DeviceBuffer.allocate(16).view(np.uint8), "shape", (1 << 20,)),
        (lambda: tc.DeviceBuffer.allocate(16).view(np.uint8), "strides", (0,)),
        (lambda: tc.DeviceBuffer.allocate(16).view(np.uint8), "readonly", False),
        (lambda: tc.DeviceBuffer.allocate(16).view(np.uint8), "dtype", np.dtype(np.float64)),
        (lambda: tc.PinnedBuffer.allocate(16), "nbytes", 1 << 20),
        (lambda: tc.PinnedBuffer.allocate(16), "ptr", 8),
        (tc.Stream, "handle", 0),
        (tc.Stream, "owned", True),
        (tc.Event, "timing", True),
        (lambda: tc.Device(0), "context", None),
        (lambda: tc.Device(0).memory_pool, "handle", None),
    ],
)
def test_fields_the_checks_trust_are_read_only(sim: SimDriver, make: Any, field: str, value: Any) -> None:
    """Hole: these were plain attributes; ``buffer.nbytes = 1 << 20`` then ``buffer.fill(0)`` wrote a megabyte past
    a 16-byte allocation, ``view.shape = (1 << 20,)`` the same through a view, ``stream.handle = home.handle`` made a
    buffer skip ordering that stream after its allocation."""
    handle = make()
    before = getattr(handle, field)
    with pytest.raises(tc.ReadOnlyError, match=f"{field} is read-only"):
        setattr(handle, field, value)
    with pytest.raises(tc.ReadOnlyError, match=f"{field} cannot be deleted"):
        delattr(handle, field)
    assert getattr(handle, field) is before


def test_a_buffer_cannot_be_resized_to_write_past_its_allocation(sim: SimDriver) -> None:
    """Hole: ``buffer.nbytes = 1 << 20; buffer.fill(0)``: the simulator saw a 1 MiB write into a 16-byte buffer."""
    buffer = tc.DeviceBuffer.allocate(16)
    with pytest.raises(tc.ReadOnlyError, match="nbytes is read-only"):
        buffer.nbytes = 1 << 20
    buffer.fill(0)  # still the 16 bytes it has
    assert buffer.nbytes == 16
    assert sim.bugs == []


def test_a_prepared_launch_cannot_forget_its_buffers(sim: SimDriver, vec_add: tc.Function) -> None:
    """Hole: ``prepared.buffers = ()`` emptied what the relaunch guard rechecks, so after ``free()`` the prepared
    launch ran on freed memory; its fields are read-only now and the freed buffer is caught."""
    buffer = tc.DeviceBuffer.allocate(512)
    prepared = tc.prepare(vec_add, 1, 1, _vec_args(buffer, buffer, buffer), signature=ARGS)
    with pytest.raises(tc.ReadOnlyError, match="buffers is read-only"):
        prepared.buffers = ()
    with pytest.raises(tc.ReadOnlyError, match="stream is read-only"):
        prepared.stream = tc.Stream()
    buffer.free()
    with pytest.raises(tc.UseAfterFreeError, match="was freed; prepare with live buffers"):
        prepared()
    assert sim.kinds("launch") == []


def test_a_function_cannot_claim_another_parameter_layout(sim: SimDriver, vec_add: tc.Function) -> None:
    """Hole: ``function.param_layout = ((0, 8),)`` (a cached_property, so assignable) made a one-argument launch pass
    the count check; the driver then read eight more parameters past the argument block."""
    with pytest.raises(tc.ReadOnlyError, match="param_layout is read-only"):
        vec_add.param_layout = ((0, 8),)
    buffer = tc.DeviceBuffer.allocate(512)
    with pytest.raises(tc.LaunchArgumentError, match="the kernel takes 9 parameters but 1 arguments were given"):
        tc.launch(vec_add, 1, 1, [buffer], signature=("ptr",))


def test_handle_classes_are_final(sim: SimDriver) -> None:
    """Hole: a subclass overriding ``ptr`` was accepted, and ``copy`` wrote through the address it reported."""
    for base in (tc.DeviceBuffer, tc.DeviceView, tc.PinnedBuffer, tc.Stream, tc.Event, tc.Module, tc.Function):
        with pytest.raises(tc.FinalClassError, match=rf"cannot subclass tile\.core's {base.__name__}"):
            type("Lying", (base,), {"ptr": property(lambda self: 0x1234)})
    with pytest.raises(tc.FinalClassError, match=r"cannot subclass tile\.core's PreparedLaunch"):
        type("Lying", (tc.PreparedLaunch,), {})


def test_handle_classes_stay_final_when_the_metaclass_is_bypassed(sim: SimDriver) -> None:
    """Hole (left by review 11, closed after it): ``type.__new__(Exact, ...)`` skips ``Exact.__new__``, where the
    subclass refusal lived, and made a subclass of a tile.core handle class (its instances failed the exact
    ``isinstance``, but the class existed). `Frozen.__init_subclass__`, which ``type.__new__`` always calls, refuses
    it too."""
    from tile.errors import Exact

    for base in (tc.DeviceBuffer, tc.DeviceView, tc.Stream, tc.PreparedLaunch, tc.Device):
        with pytest.raises(tc.FinalClassError, match=rf"cannot subclass tile\.core's {base.__name__}"):
            type.__new__(Exact, "Lying", (base,), {"ptr": property(lambda self: 0x1234)})


def test_a_forged_class_attribute_is_not_a_buffer(sim: SimDriver) -> None:
    """Hole: an object whose class says ``__class__ = tc.DeviceBuffer`` passed ``isinstance``, and ``copy`` wrote 64
    bytes to the ``ptr`` it reported (outside every allocation)."""
    target = tc.DeviceBuffer.allocate(16)

    class Forged:
        __class__ = tc.DeviceBuffer  # type: ignore[assignment]
        ptr, nbytes, device, stream, buffer = target.ptr, 64, target.device, target.stream, None
        dtype, readonly, is_contiguous = None, False, True

    forged = Forged()
    assert not isinstance(forged, tc.DeviceBuffer)
    with pytest.raises(TypeError, match=r"copy\(\) moves data to or from device memory"):
        tc.copy(forged, np.zeros(64, np.uint8))
    assert sim.bugs == []


def test_a_view_made_directly_must_lie_inside_its_buffer(sim: SimDriver) -> None:
    """Hole: the public ``DeviceView`` constructor trusted its address and extents even when it named the Tile
    buffer it views: a 1 MiB view of a 16-byte buffer wrote past it. It is checked against the buffer now."""
    buffer = tc.DeviceBuffer.allocate(16)
    u8 = np.dtype(np.uint8)
    with pytest.raises(tc.OutOfBoundsError, match=r"covers bytes \[0, 1048576\) of <DeviceBuffer 16 bytes"):
        tc.DeviceView(buffer.ptr, u8, (1 << 20,), (1,), device=buffer.device, owner=buffer, buffer=buffer)
    with pytest.raises(tc.OutOfBoundsError, match=r"covers bytes \[-4, 12\)"):
        tc.DeviceView(buffer.ptr - 4, u8, (16,), (1,), device=buffer.device, owner=buffer)
    with pytest.raises(tc.OutOfBoundsError, match=r"covers bytes \[-12, 4\)"):  # a negative stride reaching below
        tc.DeviceView(buffer.ptr, np.dtype(np.int32), (4,), (-4,), device=buffer.device, owner=buffer)
    with pytest.raises(tc.LayoutMismatchError, match="one int byte stride per extent"):
        tc.DeviceView(buffer.ptr, u8, (4, 4), (4,), device=buffer.device, owner=buffer)
    inside = tc.DeviceView(buffer.ptr + 12, np.dtype(np.int32), (4,), (-4,), device=buffer.device, owner=buffer)
    assert inside.nbytes == 16
    buffer.free()
    with pytest.raises(tc.UseAfterFreeError, match="was freed"):
        tc.DeviceView(buffer._ptr, u8, (4,), (1,), device=buffer.device, owner=buffer)
    assert sim.bugs == []


def test_a_view_made_directly_must_name_its_buffers_device() -> None:
    """Hole (with the one above): a view claiming device 1 for memory of device 0 passed the launch's device check."""
    with simulated(devices=2) as sim:
        buffer = tc.DeviceBuffer.allocate(16)
        with pytest.raises(tc.WrongDeviceError, match=r"lives on device 0: pass device=buffer\.device"):
            tc.DeviceView(buffer.ptr, np.dtype(np.uint8), (16,), (1,), device=tc.Device(1), owner=buffer)
        assert sim.bugs == []


def test_a_prepared_launch_keeps_borrowed_views_alive(sim: SimDriver, vec_add: tc.Function) -> None:
    """Hole: a prepared launch kept only Tile buffers; a borrowed view (here of a Tile buffer through DLPack, whose
    capsule alone keeps the buffer) was dropped after ``prepare``, the buffer was freed, and the next call launched
    on freed memory (the simulator saw the kernel touch no live allocation)."""
    buffer = tc.DeviceBuffer.from_host(np.arange(128, dtype=np.float32))
    out = tc.DeviceBuffer.allocate(512)
    view = tc.borrow(buffer)
    assert view.buffer is buffer  # Tile memory borrowed back is its buffer's (review 29): the launch holds the buffer
    prepared = tc.prepare(vec_add, 1, 1, _vec_args(view, view, out), signature=ARGS)
    del view, buffer
    gc.collect()
    prepared()
    np.testing.assert_array_equal(out.to_numpy(np.float32), 2 * np.arange(128, dtype=np.float32))
    assert sim.bugs == []
    del prepared
    gc.collect()
    assert len(sim.device_mem) == 1  # the borrowed buffer went with the launch


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"shared_mem": -1}, "shared_mem=-1 is invalid"),
        ({"shared_mem": 2**32}, "shared_mem=4294967296 is invalid"),
        ({"shared_mem": 1.5}, "shared_mem=1.5 is invalid"),
        ({"shared_mem": True}, "shared_mem=True is invalid"),
        ({"grid": 2**32}, "grid 4294967296 is invalid: give 1 to 3 positive ints below 2"),
        ({"grid": (1, 2**40)}, "grid .* is invalid"),
        ({"block": (Liar(-5),)}, "block .* is invalid"),
        ({"block": (1, 1, 1, 1)}, "block .* is invalid"),
    ],
)
def test_launch_extents_and_shared_memory_are_checked(
    sim: SimDriver, vec_add: tc.Function, options: dict[str, Any], message: str
) -> None:
    """Hole: ``shared_mem`` was not checked at all and extents only for being positive: ``shared_mem=-1``, a float,
    or a grid of 2**32 reached ``cuLaunchKernel``, where cuda-python's C conversion raises an untyped OverflowError
    (the simulator, which converts nothing, launched them). A lying int's ``__lt__`` let -5 pass as positive."""
    buffer = tc.DeviceBuffer.allocate(512)
    call: dict[str, Any] = {"grid": 1, "block": 1, **options}
    for entry in (tc.launch, tc.prepare):
        with pytest.raises(tc.LaunchArgumentError, match=message):
            entry(
                vec_add, call.pop("grid"), call.pop("block"), _vec_args(buffer, buffer, buffer), signature=ARGS, **call
            )
        call = {"grid": 1, "block": 1, **options}
    assert sim.kinds("launch") == []


def test_launch_scalars_are_packed_as_the_value_checked(sim: SimDriver, vec_add: tc.Function) -> None:
    """Closed already for values; now typed: an int subclass lying in ``__int__`` and ``__index__`` is packed as its
    true value (range-checked as that), and a str subclass as a signature kind is read as its true text."""

    class Small(int):
        def __int__(self) -> int:
            return 0

        def __index__(self) -> int:
            return 0

    class Kind(str):
        def __eq__(self, other: object) -> bool:
            return True

        def __hash__(self) -> int:
            return hash("ptr")

    buffer = tc.DeviceBuffer.allocate(512)
    with pytest.raises(tc.LaunchArgumentError, match="1099511627776 does not fit an i32 parameter"):
        tc.launch(vec_add, 1, 1, [buffer, Small(2**40), 1, buffer, 128, 1, buffer, 128, 1], signature=ARGS)
    signature = [Kind(k) for k in ARGS]
    signature[1] = Kind("i64")
    with pytest.raises(
        tc.LaunchArgumentError, match=r"argument 1 is i64 \(8 bytes\) but the kernel's parameter 1 has 4"
    ):
        tc.launch(vec_add, 1, 1, _vec_args(buffer, buffer, buffer), signature=signature)
    with pytest.raises(tc.LaunchArgumentError, match="must be a sequence of kind names"):
        tc.launch(vec_add, 1, 1, _vec_args(buffer, buffer, buffer), signature=[*ARGS[:-1], 3])  # type: ignore[list-item]
    assert sim.kinds("launch") == []


def test_partly_overlapping_copies_are_refused(sim: SimDriver) -> None:
    """Hole: a copy between two views of one buffer 16 bytes apart, or ``copy_from`` a view of the buffer itself, was
    enqueued; ``cuMemcpy`` leaves overlapping ranges undefined. A range copied onto itself keeps its bytes."""
    buffer = tc.DeviceBuffer.from_host(np.arange(64, dtype=np.uint8))
    with pytest.raises(tc.LayoutMismatchError, match=r"overlap \(16 bytes apart, 32 bytes each"):
        tc.copy(buffer.view(np.uint8, 32, 0), buffer.view(np.uint8, 32, 16))
    with pytest.raises(tc.LayoutMismatchError, match=r"overlap \(8 bytes apart, 32 bytes each"):
        buffer.copy_from(buffer.view(np.uint8, 32, 0), offset=8)
    with pytest.raises(tc.LayoutMismatchError, match=r"overlap \(8 bytes apart, 32 bytes each"):
        buffer.copy_to(buffer.view(np.uint8, 32, 0), offset=8)
    tc.copy(buffer.view(np.uint8, 32, 32), buffer.view(np.uint8, 32, 0))  # adjacent: fine
    tc.copy(buffer.view(np.uint8, 16, 0), buffer.view(np.uint8, 16, 0))  # itself: fine
    expected = np.concatenate([np.arange(32), np.arange(32)])
    np.testing.assert_array_equal(buffer.to_numpy(), expected)
    assert sim.bugs == []


def test_already_closed_use_after_free_paths(sim: SimDriver, vec_add: tc.Function) -> None:
    """Closed: views, exports and launches of a freed buffer, and a double free, fail typed before the driver."""
    buffer = tc.DeviceBuffer.allocate(512)
    view = buffer.view(np.float32)
    buffer.free()
    with pytest.raises(tc.UseAfterFreeError, match="was freed: keep the buffer alive"):
        view.fill(1.0)
    with pytest.raises(tc.UseAfterFreeError, match="was freed"):
        view.__dlpack__()
    with pytest.raises(tc.UseAfterFreeError, match="was freed"):
        tc.launch(vec_add, 1, 1, _vec_args(view, view, view), signature=ARGS)
    with pytest.raises(tc.DoubleFreeError, match="was already freed"):
        buffer.free()
    assert sim.kinds("launch") == []
    assert sim.bugs == []


def _free_from_another_thread_before(sim: SimDriver, call: str, buffer: tc.DeviceBuffer) -> threading.Thread:
    """Make the simulator's ``call`` start a thread that frees ``buffer`` (and give it 0.3 s) before the call runs:
    another thread freeing the buffer between a use's checks and the driver call that enqueues the use."""
    enqueue = getattr(sim, call)
    freer = threading.Thread(target=buffer.free)

    def racing(*args: Any) -> Any:
        if freer.ident is None:
            freer.start()
            freer.join(0.3)
        return enqueue(*args)

    setattr(sim, call, racing)  # an instance attribute: tile.bindings.driver() is the simulator
    return freer


def _assert_freed_after_the_use(sim: SimDriver, freer: threading.Thread, buffer: tc.DeviceBuffer, use: str) -> None:
    freer.join()
    assert buffer.closed
    assert sim.bugs == []
    kinds = [entry[0] for entry in sim.log if entry[0] in {use, "free"}]
    assert kinds[-2:] == [use, "free"]


def test_a_free_on_another_thread_waits_for_a_launch_that_saw_the_buffer_live(
    sim: SimDriver, vec_add: tc.Function
) -> None:
    """Hole: a launch checked its buffers, another thread freed one (a stream-ordered free, enqueued at once), and
    the launch was enqueued after the free: the kernel ran on freed memory (the simulator saw it touch no live
    allocation). A use now holds ``use_lock`` from its checks until it is enqueued and recorded, and a free takes it."""
    buffer = tc.DeviceBuffer.allocate(512)
    freer = _free_from_another_thread_before(sim, "cuLaunchKernel", buffer)
    tc.launch(vec_add, 1, 1, _vec_args(buffer, buffer, buffer), signature=ARGS)
    _assert_freed_after_the_use(sim, freer, buffer, "launch")


def test_a_free_on_another_thread_waits_for_a_prepared_launch(sim: SimDriver, vec_add: tc.Function) -> None:
    """Hole: the same race against a prepared launch, between its epoch guard and ``cuLaunchKernel``."""
    buffer = tc.DeviceBuffer.allocate(512)
    freer = _free_from_another_thread_before(sim, "cuLaunchKernel", buffer)  # before prepare: it keeps the call
    prepared = tc.prepare(vec_add, 1, 1, _vec_args(buffer, buffer, buffer), signature=ARGS)
    prepared()
    _assert_freed_after_the_use(sim, freer, buffer, "launch")
    with pytest.raises(tc.UseAfterFreeError, match="was freed; prepare with live buffers"):
        prepared()


def test_a_free_on_another_thread_waits_for_a_copy_on_another_stream(sim: SimDriver) -> None:
    """Hole: a blocking copy on a stream other than the buffer's recorded no use (it waited for itself), so a free
    on another thread while it was enqueued or waited for was not ordered after it."""
    buffer = tc.DeviceBuffer.allocate(64)
    freer = _free_from_another_thread_before(sim, "cuMemcpyHtoDAsync", buffer)
    buffer.copy_from(np.ones(64, np.uint8), stream=tc.Stream())
    _assert_freed_after_the_use(sim, freer, buffer, "copy")
    assert any(entry[0] == "wait" for entry in sim.log[-4:])  # the free waited for the copy's stream


def test_an_unloaded_modules_prepared_launch_is_refused(sim: SimDriver, vec_add: tc.Function) -> None:
    """Hole: ``module.unload()`` says its functions can no longer be launched, but a launch prepared before kept
    launching (the guard checked only buffers and the stream)."""
    buffer = tc.DeviceBuffer.allocate(512)
    prepared = tc.prepare(vec_add, 1, 1, _vec_args(buffer, buffer, buffer), signature=ARGS)
    vec_add.module.unload()
    with pytest.raises(tc.UseAfterFreeError, match="its module was unloaded"):
        prepared()
    assert sim.kinds("launch") == []


def test_a_reused_stream_handle_is_ordered_after_the_allocation_again(sim: SimDriver) -> None:
    """Hole: a buffer remembered the handles of streams it had been ordered on; the driver reuses a destroyed
    stream's handle, so a new stream with the old handle skipped the wait for the buffer's allocation (its first
    use could run before the memory was the buffer's). A handle counts only while its stream is alive and open."""
    destroyed: list[int] = []
    destroy, create = sim.cuStreamDestroy, sim.cuStreamCreateWithPriority

    def destroy_and_remember(stream: Any) -> Any:
        destroyed.append(int(stream))
        return destroy(stream)

    def create_reusing(flags: int, priority: int) -> Any:
        result, raw = create(flags, priority)
        if destroyed:  # as the driver may: the handle of a destroyed stream names the next one
            raw = type(raw)(destroyed.pop())
        return result, raw

    sim.cuStreamDestroy, sim.cuStreamCreateWithPriority = destroy_and_remember, create_reusing  # type: ignore[method-assign]
    buffer = tc.DeviceBuffer.allocate(64)
    first = tc.Stream()
    buffer.fill(0, stream=first)
    handle = first.handle
    first.close()
    second = tc.Stream()
    assert second.handle == handle
    waits = len([entry for entry in sim.kinds("wait") if entry[1] == handle])
    buffer.fill(1, stream=second)
    assert len([entry for entry in sim.kinds("wait") if entry[1] == handle]) == waits + 1
    buffer.fill(2, stream=second)  # ordered once per stream, as before
    assert len([entry for entry in sim.kinds("wait") if entry[1] == handle]) == waits + 1
    assert sim.bugs == []


def test_host_arrays_report_their_memory_as_it_is(sim: SimDriver) -> None:
    """Hole: a numpy subclass overriding ``nbytes`` set the size of a host copy (with a 16-byte array claiming 1 MiB,
    a device-to-host copy wrote a megabyte past it and the process hung in a corrupted heap); an object array took
    device bytes as its PyObject pointers. The copy now reads the plain ndarray view and refuses object dtypes."""

    class Claims16(np.ndarray):
        @property
        def nbytes(self) -> int:
            return 16

    buffer = tc.DeviceBuffer.allocate(16)
    host = np.zeros(64, np.uint8).view(Claims16)  # the real array is larger: the unfixed copy stays inside it
    with pytest.raises(tc.LayoutMismatchError, match="copy size mismatch: destination has 64 bytes, source 16"):
        tc.copy(host, buffer)
    with pytest.raises(tc.OutOfBoundsError, match=r"bytes \[0, 64\) fall outside the 16-byte buffer"):
        buffer.copy_to(host)
    objects = np.empty(2, object)
    with pytest.raises(tc.LayoutMismatchError, match="holds Python objects"):
        buffer.copy_to(objects)
    with pytest.raises(tc.LayoutMismatchError, match="holds Python objects"):
        buffer.copy_from(objects)
    assert objects.tolist() == [None, None]
    assert sim.kinds("copy") == []


def test_a_lying_device_ordinal_is_checked_as_its_value(sim: SimDriver) -> None:
    """Hole (tile.bindings): ``device_handle`` compared the ordinal with the device count through the int's own
    comparisons, so an int subclass claiming to be in range reached ``cuDeviceGet`` with ordinal 5 on a one-GPU
    machine (the simulator, which takes any ordinal, made a Device 5); a true 0 made ``Device.ordinal`` the subclass."""

    class InRange(int):
        def __ge__(self, other: object) -> bool:
            return True

        def __lt__(self, other: object) -> bool:
            return True

    with pytest.raises(tc.InvalidDeviceError, match="device 5 does not exist: this machine has 1 device"):
        tc.Device(InRange(5))
    device = tc.Device(InRange(0))
    assert device is tc.Device(0)
    assert type(device.ordinal) is int
