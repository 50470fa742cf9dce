"""Devices, their primary contexts and Tile's per-device memory pool.

Invariants: there is one :class:`Device` per ordinal per process (``Device(0) is Device(0)``); its primary
context is retained once and never released, so it outlives every Tile object; :meth:`Device.make_current`
makes it current on the calling thread only when another context is current, so any thread can use any device.
Tile allocates from its own memory pool per device (release threshold: never), so frees feed later allocations
without returning memory to the OS and the pool's ``used_bytes`` measures exactly what Tile holds. The pool never
inserts stream dependencies of its own (``REUSE_ALLOW_INTERNAL_DEPENDENCIES`` off): an allocation reuses memory
freed on its own stream, freed before a wait it made, or whose free already completed, else it takes fresh memory, so
an allocation never waits for another stream's frees (and the work those wait for). Each device has three private
streams for ready buffers: one that carries only their allocations, one only their frees, and their default home
stream (their copies and fills by default), which carries no free.
"""

from __future__ import annotations

import operator
import threading
from typing import TYPE_CHECKING, Any, ClassVar

import tile.bindings as tb
from tile.bindings import check
from tile.core import _reaper
from tile.core._errors import WrongTypeError, factory_error
from tile.core._final import Exact, Frozen
from tile.core._layout import as_index
from tile.core._nocopy import Uncopyable

if TYPE_CHECKING:
    from tile.core._buffer import DeviceBuffer
    from tile.core._event import Event
    from tile.core._stream import Stream

__all__ = ["Device", "MemoryPool"]

_NEVER_RELEASE = 2**64 - 1


class MemoryPool(Frozen, Uncopyable, metaclass=Exact):
    """Tile's stream-ordered memory pool on one device (``cuMemPoolCreate``); final, ``handle`` and ``device``
    read-only (see ``tile.core._final``)."""

    _copy_fix = "use device.memory_pool (one pool per device)"
    _frozen = frozenset({"handle", "device"})

    def __init__(self, *args: object, **kwargs: object) -> None:
        raise factory_error("MemoryPool", "device.memory_pool (one pool per device)")

    @classmethod
    def _make(cls, device: Device) -> MemoryPool:
        """Create the pool of ``device``; only `Device.memory_pool` calls this, once."""
        self = cls.__new__(cls)
        self._setup(device)
        return self

    def _setup(self, device: Device) -> None:
        d = _reaper.driver()
        props = d.CUmemPoolProps()
        props.allocType = d.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
        props.handleTypes = d.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_NONE
        props.location.type = d.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
        props.location.id = device.ordinal
        self.device = device
        self.handle: Any = check(d.cuMemPoolCreate(props), "cuMemPoolCreate")
        attr = d.CUmemPool_attribute.CU_MEMPOOL_ATTR_RELEASE_THRESHOLD
        check(d.cuMemPoolSetAttribute(self.handle, attr, d.cuuint64_t(_NEVER_RELEASE)), "cuMemPoolSetAttribute")
        # No hidden waits: with this on, an allocation could make its stream wait for another stream's free and so
        # for every kernel that free waits on (a ready allocation's synchronize would then drain the GPU).
        internal = d.CUmemPool_attribute.CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES
        check(d.cuMemPoolSetAttribute(self.handle, internal, 0), "cuMemPoolSetAttribute")

    def _attribute(self, name: str) -> int:
        d = _reaper.driver()
        attr = getattr(d.CUmemPool_attribute, f"CU_MEMPOOL_ATTR_{name}")
        return int(check(d.cuMemPoolGetAttribute(self.handle, attr), "cuMemPoolGetAttribute"))

    @property
    def used_bytes(self) -> int:
        """Bytes of the pool currently allocated (including frees not yet reached by their stream)."""
        return self._attribute("USED_MEM_CURRENT")

    @property
    def reserved_bytes(self) -> int:
        """Bytes of device memory the pool holds, used or not."""
        return self._attribute("RESERVED_MEM_CURRENT")

    def trim(self, keep_bytes: int = 0) -> None:
        """Return unused memory to the device, keeping at least ``keep_bytes`` reserved (memory of allocations still
        live, or freed but still used by queued work, is never returned).

        Raises
        ------
        WrongTypeError
            For a ``keep_bytes`` that is not an int in ``[0, 2**64)`` (before the driver).
        """
        keep = as_index(keep_bytes)  # the exact int: no lying comparisons
        if keep is None or not 0 <= keep < 2**64:
            raise WrongTypeError(f"trim(keep_bytes={keep_bytes!r}): give the bytes to keep reserved, an int >= 0")
        check(_reaper.driver().cuMemPoolTrimTo(self.handle, keep), "cuMemPoolTrimTo")


class Device(Frozen, metaclass=Exact):
    """A CUDA device and its primary context; one instance per ordinal (final; ``ordinal``, ``handle`` and
    ``context`` are read-only: see ``tile.core._final``).

    Parameters
    ----------
    ordinal : int
        The device index (``0 <= ordinal < Device.count()``).

    Raises
    ------
    tile.bindings.DriverNotFoundError
        Without a usable driver.
    tile.bindings.InvalidDeviceError
        For an ordinal that does not exist.
    """

    _frozen = frozenset({"ordinal", "handle", "context"})
    _instances: ClassVar[dict[int, Device]] = {}
    _lock: ClassVar[threading.RLock] = threading.RLock()  # re-entrant: GC-run finalizers may need it

    ordinal: int
    handle: Any
    context: Any
    _context_int: int
    _pool: MemoryPool | None
    _default_stream: Stream | None
    _private: dict[str, Stream]
    _cache: dict[str, Any]

    def __new__(cls, ordinal: int = 0) -> Device:
        found = cls._instances.get(ordinal) if type(ordinal) is int else None
        if found is not None:
            return found
        handle = tb.device_handle(ordinal)  # InvalidDeviceError unless an int of an existing device
        ordinal = operator.index(ordinal)  # the exact int, as the check used it (never an int subclass)
        with cls._lock:
            if ordinal not in cls._instances:
                self = super().__new__(cls)
                self.ordinal, self.handle = ordinal, handle
                self.context = check(_reaper.driver().cuDevicePrimaryCtxRetain(handle), "cuDevicePrimaryCtxRetain")
                self._context_int = int(self.context)
                self._pool, self._default_stream, self._private, self._cache = None, None, {}, {}
                cls._instances[ordinal] = self
            return cls._instances[ordinal]

    # A Device names a GPU (one instance per ordinal): copies are that same instance.
    def __copy__(self) -> Device:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Device:
        return self

    @staticmethod
    def count() -> int:
        """Return how many devices are visible (raises DriverNotFoundError without a driver)."""
        return tb.device_count()

    def __repr__(self) -> str:
        return f"<Device {self.ordinal}: {self.name} ({self.arch})>"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Device, (self.ordinal,))

    def _cached(self, key: str, compute: Any) -> Any:
        if key not in self._cache:
            self._cache[key] = compute()
        return self._cache[key]

    @property
    def name(self) -> str:
        """The marketing name, e.g. ``"NVIDIA H100 80GB HBM3"``."""
        return str(self._cached("name", lambda: tb.device_name(self.ordinal)))

    @property
    def compute_capability(self) -> tuple[int, int]:
        """``(major, minor)``, e.g. ``(9, 0)``."""
        cc: tuple[int, int] = self._cached("cc", lambda: tb.compute_capability(self.ordinal))
        return cc

    @property
    def arch(self) -> str:
        """The SM architecture name, e.g. ``"sm_90"``."""
        major, minor = self.compute_capability
        return f"sm_{major}{minor}"

    def attribute(self, name: str) -> int:
        """Return a ``CU_DEVICE_ATTRIBUTE_*`` value by (case-insensitive) suffix, cached."""
        return int(self._cached(f"attr:{name.lower()}", lambda: tb.device_attribute(self.ordinal, name)))

    @property
    def sm_count(self) -> int:
        """Number of streaming multiprocessors."""
        return self.attribute("multiprocessor_count")

    @property
    def l2_cache_size(self) -> int:
        """L2 cache size in bytes."""
        return self.attribute("l2_cache_size")

    @property
    def total_memory(self) -> int:
        """Total device memory in bytes."""
        return int(self._cached("mem", lambda: tb.device_total_memory(self.ordinal)))

    def make_current(self) -> None:
        """Make this device's primary context current on the calling thread (a no-op when it already is)."""
        d = _reaper.driver()
        current = check(d.cuCtxGetCurrent(), "cuCtxGetCurrent")
        if int(current) != self._context_int:
            check(d.cuCtxSetCurrent(self.context), "cuCtxSetCurrent")

    def synchronize(self) -> None:
        """Block until all work on this device is done."""
        self.make_current()
        check(_reaper.driver().cuCtxSynchronize(), "cuCtxSynchronize")
        _reaper.drain()  # a safe point for releases deferred by finalizers (their uses may just have completed)

    def mem_info(self) -> tuple[int, int]:
        """Return ``(free, total)`` device memory in bytes, as the driver sees it."""
        self.make_current()
        free, total = check(_reaper.driver().cuMemGetInfo(), "cuMemGetInfo")
        return int(free), int(total)

    @property
    def memory_pool(self) -> MemoryPool:
        """Tile's memory pool on this device (created on first use)."""
        if self._pool is None:
            with Device._lock:
                if self._pool is None:
                    self.make_current()
                    self._pool = MemoryPool._make(self)
        return self._pool

    @property
    def default_stream(self) -> Stream:
        """A Tile-owned non-blocking stream used when a call is given no stream (never the legacy NULL stream)."""
        if self._default_stream is None:
            from tile.core._stream import Stream

            with Device._lock:
                if self._default_stream is None:
                    self._default_stream = Stream._create(self, 0, protected=True)
        return self._default_stream

    def _private_stream(self, role: str) -> Stream:
        """One of the device's private streams: ``"alloc"`` (ready allocations only), ``"free"`` (their frees only),
        ``"home"`` (the default ``stream`` of ready buffers: their copies, fills and reads; never a free).

        Never captured, never closed (protected); the first two are never handed out, so what is queued on each is
        exactly what its role says, and synchronizing the allocation stream waits for allocations alone.
        """
        found = self._private.get(role)
        if found is None:
            from tile.core._stream import Stream

            with Device._lock:
                found = self._private.get(role)
                if found is None:
                    found = self._private[role] = Stream._create(self, 0, protected=True)
        return found

    @property
    def stream_priorities(self) -> tuple[int, int]:
        """``(lowest, highest)`` stream priority values; numerically lower runs first, e.g. ``(0, -5)``."""

        def query() -> tuple[int, int]:
            self.make_current()
            least, greatest = check(_reaper.driver().cuCtxGetStreamPriorityRange(), "cuCtxGetStreamPriorityRange")
            return int(least), int(greatest)

        priorities: tuple[int, int] = self._cached("priorities", query)
        return priorities

    def create_stream(self, priority: int = 0) -> Stream:
        """Create an owned non-blocking stream; lower ``priority`` numbers run first (see ``stream_priorities``)."""
        from tile.core._stream import Stream

        return Stream._create(self, priority, protected=False)

    def create_event(self, *, timing: bool = False, blocking_sync: bool = False) -> Event:
        """Create an event; ``blocking_sync`` makes waiting threads sleep instead of spin."""
        from tile.core._event import Event

        return Event(self, timing=timing, blocking_sync=blocking_sync)

    def can_access_peer(self, peer: Device) -> bool:
        """Whether this device can map ``peer``'s memory directly (``cuDeviceCanAccessPeer``; False for itself)."""
        if peer is self:
            return False
        found: bool = self._cached(
            f"peer:{peer.ordinal}",
            lambda: bool(
                check(_reaper.driver().cuDeviceCanAccessPeer(self.handle, peer.handle), "cuDeviceCanAccessPeer")
            ),
        )
        return found

    def enable_peer_access(self, peer: Device) -> bool:
        """Let this device read and write ``peer``'s memory directly when the hardware allows it; idempotent.

        Enables context peer access (``cuCtxEnablePeerAccess``) and maps ``peer``'s Tile memory pool for this device
        (``cuMemPoolSetAccess``: pool allocations need both). Returns False, changing nothing, when
        `can_access_peer` says no: peer copies then still work, staged by the driver.
        """
        if not self.can_access_peer(peer):
            return False
        with Device._lock:
            if self._cache.get(f"peer-on:{peer.ordinal}"):
                return True
            d = _reaper.driver()
            self.make_current()
            (err,) = d.cuCtxEnablePeerAccess(peer.context, 0)
            if err != d.CUresult.CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED:
                check((err,), "cuCtxEnablePeerAccess")
            desc = d.CUmemAccessDesc()
            desc.location.type = d.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
            desc.location.id = self.ordinal
            desc.flags = d.CUmemAccess_flags.CU_MEM_ACCESS_FLAGS_PROT_READWRITE
            check(d.cuMemPoolSetAccess(peer.memory_pool.handle, [desc], 1), "cuMemPoolSetAccess")
            self._cache[f"peer-on:{peer.ordinal}"] = True
        return True

    def allocate(self, nbytes: int, *, stream: Stream | None = None) -> DeviceBuffer:
        """Allocate ``nbytes`` of device memory, stream-ordered on ``stream`` (default: ``default_stream``)."""
        from tile.core._buffer import DeviceBuffer

        return DeviceBuffer.allocate(nbytes, device=self, stream=stream)
