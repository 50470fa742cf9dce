"""A safe CUDA API for Python: devices, streams, events, owned buffers, modules and launches.

tile.core sits on ``tile.bindings`` (checked driver calls) and on cuda-python's ``cuda.core`` where that serves
(streams, events, kernels); a prepared launch calls ``cuLaunchKernel`` directly on an argument block built once,
which is cheaper than cuda.core's launcher. What it adds is ownership: every handle knows whether it owns
what it wraps, owned device memory is freed exactly once and stream-ordered after every recorded use, and misuse
(use after free, double free, out-of-bounds copy, wrong device, destroyed stream, wrong arch, wrong argument
count) raises a typed error with a fix hint *before* anything is changed. Importing tile.core touches no driver.

Public API
----------
Devices and contexts
    ``Device(ordinal=0)`` - one object per ordinal (compare with ``is`` or ``==``; hashable). ``.ordinal``,
    ``.name``, ``.compute_capability`` ``(9, 0)``, ``.arch`` ``"sm_90"``, ``.sm_count``, ``.total_memory``,
    ``.l2_cache_size``; ``.make_current()`` makes its primary context current on the calling thread (every
    tile.core call does this itself when needed, from any thread); ``.synchronize()``;
    ``.create_stream(priority=0)``, ``.create_event(timing=False, blocking_sync=False)``;
    ``.default_stream`` (a Tile-owned non-blocking stream, never the legacy NULL stream);
    ``.allocate(nbytes, stream=None)``; ``.memory_pool`` (``used_bytes``, ``reserved_bytes``, ``trim()``);
    ``.mem_info()`` ``(free, total)``; ``.stream_priorities`` ``(lowest, highest)``. ``Device.count()``.
    ``.can_access_peer(other)``, ``.enable_peer_access(other)`` (context and memory-pool access; idempotent).
Streams and events
    ``Stream(device=None, priority=0)`` creates an owned non-blocking stream; ``Stream.borrow(obj, device=None,
    allow_null=False, unchecked=False)`` wraps a foreign one (an int ``CUstream`` only with ``unchecked=True``, any
    ``__cuda_stream__`` object, ``cuda.core.Stream``, torch / cupy streams) and keeps ``obj`` alive (``.owner``);
    handle 0 (the legacy NULL stream) is refused unless ``allow_null``. ``.handle`` (int), ``.device``, ``.priority``,
    ``.owned``, ``.closed``,
    ``.synchronize()`` (blocks), ``.query()`` (True when idle), ``.record(event=None) -> Event``,
    ``.wait(event_or_stream)``, ``.is_capturing()``, ``.close()``, ``__cuda_stream__``; ``with .in_use() as raw:``
    for a driver call of one's own on the handle (a close meanwhile defers the destroy to the block's end).
    ``Event(device=None, timing=False, blocking_sync=False)``: ``.handle``, ``.record(stream)``, ``.query()``,
    ``.synchronize()`` (blocks, releases the GIL), ``.elapsed_ms(since)``, ``.close()``.
Memory
    ``DeviceBuffer.allocate(nbytes, device=None, stream=None, ready=False)`` / ``DeviceBuffer.from_host(array,
    stream=None, ready=False)``: owned, stream-ordered (``cuMemAllocFromPoolAsync`` / ``cuMemFreeAsync`` on its
    ``.stream``); with ``ready=True`` the allocation is complete on return and any stream may use the memory without
    ordering (allocated on a private per-device stream that carries only allocations, so it never waits for queued
    frees or kernels; freed on a private free stream after the ``.stream``'s queued work and every recorded use;
    without ``stream`` its ``.stream`` is a private one that carries ready buffers' copies and never a free).
    The pool adds no hidden cross-stream waits: memory freed elsewhere is reused once its free completed. ``.ptr``,
    ``.nbytes``, ``.device``, ``.stream``, ``.closed``; ``.view(dtype, shape=None, offset=0) -> DeviceView``
    (bounds-checked); ``.copy_from(src)``, ``.copy_to(dst)``, ``.fill(value)``, ``.to_numpy(dtype, shape)``;
    ``.record_use(stream)`` (the free waits for it); ``.free()`` (exactly once; also ``with`` and GC).
    ``DeviceView``: typed, strided window on device memory (made by ``buffer.view``, ``borrow`` or, checked against
    it, over a borrowed view; over any other raw address only with ``DeviceView(..., unchecked=True)``): ``.ptr``,
    ``.dtype``, ``.shape``, ``.strides`` in bytes, ``.size``, ``.nbytes``, ``.is_contiguous``, ``.readonly``,
    ``.device``, ``.owner``, ``.buffer``; the same copy methods (contiguous views only), exported through
    ``__dlpack__`` / ``__dlpack_device__`` so torch / cupy view it without a copy (``cupy.from_dlpack(buf)``,
    ``torch.from_dlpack(buf)``); buffers and views offer no ``__cuda_array_interface__`` (``UntrackedExportError``).
    ``borrow(obj, stream=None)`` -> ``DeviceView`` of a foreign DLPack / ``__cuda_array_interface__`` producer
    (torch, cupy), zero-copy, never owning, keeping ``obj`` alive. ``PinnedBuffer.allocate(nbytes)`` /
    ``PinnedBuffer.empty(shape, dtype)``: page-locked host memory, ``.array`` (numpy view whose base keeps it
    alive), ``.record_use(stream)``; released by the garbage collector after its recorded uses complete.
    ``copy(dst, src, stream=None, sync=True)``: checked host<->device, device<->device (partly overlapping ranges of
    one device are refused) (between two GPUs a peer
    copy, ``cuMemcpyPeerAsync``, with peer access enabled where ``Device.can_access_peer`` allows).
Modules and launches
    ``Module.from_cubin(data, device=None)`` / ``Module.load(path, device=None)`` (the cubin's arch is checked
    against the device first); ``module.function(name) -> Function`` (``.name``, ``.num_params``,
    ``.param_layout``, ``.attributes``). ``launch(function, grid, block, args, *, stream=None, shared_mem=0,
    signature=None)``; ``prepare(...same...) -> PreparedLaunch`` packs
    and checks the arguments once, and ``prepared()`` relaunches with no per-call checks. Argument kinds
    (``signature``): ``"ptr"`` (DeviceBuffer, writable DeviceView, or an int address with ``unchecked=True``: the
    kernel may write through it), ``"cptr"`` (the same, read-only views too: the kernel only reads through it, C's
    ``const T*``), ``"i8"``, ``"i16"``, ``"i32"``, ``"i64"``, ``"u8"``, ``"u16"``, ``"u32"``, ``"u64"`` (each as wide
    as its bits), ``"f16"``, ``"bf16"``, ``"f32"``, ``"f64"``; without a signature numpy scalars keep their type and
    buffers and writable views are ``"ptr"``. A read-only view (``view.readonly``) for a ``"ptr"`` parameter or without
    a signature is a `LaunchArgumentError`.
    Building blocks: ``KINDS``, ``pack_args``, ``param_layout`` (CUDA parameter-block offsets), ``cubin_arch``.
Errors (all derive from ``TileError``, Tile's one root ``tile.errors.TileError``, and a builtin)
    ``UseAfterFreeError``, ``DoubleFreeError``, ``OutOfBoundsError``, ``LayoutMismatchError``, ``WrongDeviceError``,
    ``WrongTypeError`` (an object of a kind the call cannot use), ``StreamClosedError``, ``NullHandleError``,
    ``ArchMismatchError``, ``LaunchArgumentError``, ``FactoryError`` (a handle class called directly instead of its
    factory: ``DeviceBuffer()``, ``Function(...)``, ``PreparedLaunch(...)``, ``MemoryPool(...)``; a ``WrongTypeError``
    naming the factory), ``StateError``
    (e.g. freeing memory a DLPack consumer still views, timing an event created without timing), ``ReadOnlyError``
    (assigning a field the checks trust), ``FinalClassError`` (subclassing a handle class) and
    ``UntrackedExportError`` (reading a buffer's or view's ``__cuda_array_interface__``; an ``AttributeError``,
    as tile.frontend's); driver failures
    are ``CudaError``; no driver is ``DriverNotFoundError``; a device ordinal out of range is ``InvalidDeviceError``
    (these three are tile-bindings' classes, re-exported here because tile.core's own calls raise them).

Stream ordering and blocking
----------------------------
Stream-ordered (return at once, run in order on the given stream): ``allocate``, ``free``, ``copy``/``copy_from``/
``copy_to``/``fill`` with ``sync=False``, ``launch``, ``Stream.record``, ``Stream.wait``. Blocking: ``copy``
family with ``sync=True`` (the default; waits for that stream), ``to_numpy``, ``Stream.synchronize``,
``Event.synchronize``, ``Device.synchronize``.
``stream=None`` always means the buffer's own stream (``DeviceBuffer.stream``) or the device's
``default_stream``, never the legacy NULL stream. A free is never enqueued on a stream that is capturing a
graph: it is deferred until the capture ends. Work captured on a stream records no use of its buffers (the capture
runs nothing; whoever replays keeps them alive), and a buffer's first use inside a capture waits for its allocation
on the host. Closing a stream records a final event; buffers whose home stream was closed are freed on the default
stream after it.

Handles are not copies
----------------------
Every handle that owns or shares a resource (``DeviceBuffer``, ``PinnedBuffer``, ``DeviceView``, ``Stream``,
``Event``, ``Module``, ``Function``, ``MemoryPool``, ``PreparedLaunch``, ``PackedArgs``) refuses ``copy.copy``,
``copy.deepcopy`` and pickling with ``HandleCopyError``: a copy would be a second owner (two frees, two closes).
A ``Device`` names a GPU, so its copies are the device itself.

Handles do not lie
------------------
The checks trust what a handle reports (a buffer's ``ptr`` and ``nbytes``, a view's ``shape`` and ``strides``, a
stream's ``handle``, a prepared launch's ``buffers``), so the handle classes are final (``FinalClassError`` when
subclassed; ``isinstance`` is true only for the exact class, so an object claiming ``__class__ = DeviceBuffer`` is
refused), their fields are read-only once made (``ReadOnlyError``), and integer arguments are used as the exact
``int`` that was checked (an ``int`` subclass cannot pass a check as one number and be used as another).

Ownership across libraries
--------------------------
Exports through DLPack keep the buffer alive and block an explicit ``free()`` (``StateError``) until the consumer
lets go; the consumer's stream is ordered after the buffer's stream at export and the free waits for it.
Buffers and views offer no ``__cuda_array_interface__``: its consumer (cupy, numba) keeps a raw pointer and never
says when it is done, so an explicit ``free()`` could not wait for it (reading the property raises
``UntrackedExportError``, also an ``AttributeError``, so ``hasattr`` is False and libraries take the DLPack route:
``cupy.from_dlpack(buf)``, ``torch.from_dlpack(buf)``). Borrowed memory (``borrow``) orders
the producer's pending work before the given stream once, at borrow time; later work on the producer's own stream
must be ordered by the caller (``Stream.wait``). A launch, and an asynchronous copy or fill, holds the borrowed views
and host arrays it uses (not Tile buffers or ``PinnedBuffer``s, whose releases wait for their recorded uses) until
it completes, so the caller may drop them at once; they are let go at the next safe point after (see
``tile.core._keepalive``). A graph capture holds nothing: whoever replays the graph keeps its memory alive.

Raw memory is an explicit opt-out
---------------------------------
Safe code names device memory only through Tile buffers, their views, and views of borrowed arrays (checked
against them). An int address or stream handle is trusted only with ``unchecked=True`` (``launch``, ``prepare``,
``pack_args``, ``DeviceView``, ``Stream.borrow``): greppable, like ``@tile.entry(unchecked=True)``. What a DLPack or
``__cuda_array_interface__`` producer exports is trusted as those protocols require.

Finalizers at a bad time
------------------------
A handle's finalizer never calls the driver inside a CUDA host function (mark such code with ``host_callback()``;
tile.aio's host work is marked; a driver call asked for there raises ``HostFunctionError``) and never blocks (pinned
memory's release synchronizes the context): the release waits for the next safe point (an allocation, a free, a
synchronize) and for the uses it must follow. A buffer whose finalizer the garbage collector runs is released there
too, once nothing refers to it (a finalizer of the same garbage may have kept it: it then stays allocated).
"""

from typing import TYPE_CHECKING

from tile.bindings import CudaError, DriverNotFoundError, InvalidDeviceError, TileError
from tile.core._args import KINDS, ArgKind, PackedArgs, pack_args, param_layout
from tile.core._buffer import DeviceBuffer
from tile.core._context import Device, MemoryPool
from tile.core._copy import copy
from tile.core._cubin import cubin_arch
from tile.core._errors import (
    ArchMismatchError,
    DoubleFreeError,
    FactoryError,
    FinalClassError,
    HandleCopyError,
    HostFunctionError,
    LaunchArgumentError,
    LayoutMismatchError,
    NullHandleError,
    OutOfBoundsError,
    ReadOnlyError,
    StateError,
    StreamClosedError,
    UntrackedExportError,
    UseAfterFreeError,
    WrongDeviceError,
    WrongTypeError,
)
from tile.core._event import Event
from tile.core._foreign import borrow
from tile.core._launch import PreparedLaunch, prepare

if TYPE_CHECKING:
    from tile.core._launch import launch
else:  # the compiled launch when built (the same checks and errors), else the pure-Python one: see _compiled
    from tile.core._compiled import launch
from tile.core._module import Function, Module
from tile.core._nocopy import Uncopyable
from tile.core._pinned import PinnedBuffer
from tile.core._reaper import host_callback
from tile.core._stream import Stream, begin_thread_capture, end_thread_capture, thread_is_capturing
from tile.core._view import DeviceView

__all__ = [
    "KINDS",
    "ArchMismatchError",
    "ArgKind",
    "CudaError",
    "Device",
    "DeviceBuffer",
    "DeviceView",
    "DoubleFreeError",
    "DriverNotFoundError",
    "Event",
    "FactoryError",
    "FinalClassError",
    "Function",
    "HandleCopyError",
    "HostFunctionError",
    "InvalidDeviceError",
    "LaunchArgumentError",
    "LayoutMismatchError",
    "MemoryPool",
    "Module",
    "NullHandleError",
    "OutOfBoundsError",
    "PackedArgs",
    "PinnedBuffer",
    "PreparedLaunch",
    "ReadOnlyError",
    "StateError",
    "Stream",
    "StreamClosedError",
    "TileError",
    "Uncopyable",
    "UntrackedExportError",
    "UseAfterFreeError",
    "WrongDeviceError",
    "WrongTypeError",
    "begin_thread_capture",
    "borrow",
    "copy",
    "cubin_arch",
    "end_thread_capture",
    "host_callback",
    "launch",
    "pack_args",
    "param_layout",
    "prepare",
    "thread_is_capturing",
]
