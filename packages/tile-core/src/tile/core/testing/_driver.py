# ruff: noqa: N802 - the simulator mirrors the CUDA driver's function names (cuInit, cuMemFreeAsync, ...)
"""A driver of one or more GPUs (sm_90) whose device memory is host memory: allocation, copies, fills, kernels, peers.

Every device access is checked against the live allocations when the work runs (a fault on the real GPU), and a
stream-ordered free that runs while work on another stream still touching the memory is queued is noted as a bug
(a race on the real GPU, where the pool may hand the memory to someone else). Each allocation remembers its device
(its pool's): a kernel enqueued on a stream of one device that touches another device's memory is noted as a bug
(Tile never launches a kernel on memory of another GPU: nothing would order it with that memory's frees).
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from cuda.bindings import driver as real

from tile.core._args import param_layout
from tile.core.testing._graphs import SimGraphs
from tile.core.testing._streams import OK, Work

VEC_ADD_SIGNATURE = ("ptr", "i32", "i32") * 3
"""vec_add(x, nx, sx, y, ny, sy, z, nz, sz): the simulator's built-in kernel (128 elements of z per block)."""


@dataclass
class SimKernel:
    """A kernel the simulated cubin holds: its handle, parameter layout and what it does.

    ``body(values, grid)`` gets the parameter values (read when the launch is called, as the driver copies them)
    and returns the device byte ranges the launch touches and the function that does the work when it runs."""

    name: str
    signature: Sequence[str]
    body: Callable[[tuple[int, ...], tuple[int, int, int]], tuple[list[tuple[int, int]], Callable[[], None]]]
    handle: int = 0x4B00

    @property
    def arguments_info(self) -> list[Any]:
        return [_Info(offset, size) for offset, size in param_layout(self.signature)]

    @property
    def attributes(self) -> Any:
        return _Attributes()


@dataclass
class _Info:
    offset: int
    size: int


@dataclass
class _Attributes:
    num_regs: int = 24
    max_threads_per_block: int = 1024
    shared_size_bytes: int = 0
    local_size_bytes: int = 0
    const_size_bytes: int = 0


def _floats(ptr: int, n: int) -> np.ndarray[Any, Any]:
    return np.ctypeslib.as_array((ctypes.c_float * n).from_address(ptr))


def vec_add_body(
    values: tuple[int, ...], grid: tuple[int, int, int]
) -> tuple[list[tuple[int, int]], Callable[[], None]]:
    x, _, _, y, _, _, z, nz, _ = values
    n = min(nz, grid[0] * 128)

    def run() -> None:
        _floats(z, n)[:] = _floats(x, n) + _floats(y, n)

    return [(x, 4 * n), (y, 4 * n), (z, 4 * n)], run


_READERS: dict[str, Any] = {"ptr": ctypes.c_uint64, "i32": ctypes.c_int32, "i64": ctypes.c_int64, "f32": ctypes.c_float}


class SimDriver(SimGraphs):
    """Stands in for ``cuda.bindings.driver``; enums, handle types and structs come from the real bindings."""

    CU_MEMHOSTALLOC_PORTABLE = real.CU_MEMHOSTALLOC_PORTABLE
    peer_capable = True  # every pair of simulated devices can map each other

    def __init__(self, devices: int = 1, *, asynchronous: bool = False, seed: int = 0) -> None:
        super().__init__(asynchronous=asynchronous, seed=seed)
        self.devices = devices
        self.stream_devices: dict[int, int] = {}
        self.pool_devices: dict[int, int] = {}
        self.alloc_devices: dict[int, int] = {}
        self.device_mem: dict[int, np.ndarray[Any, Any]] = {}
        self.host_mem: dict[int, np.ndarray[Any, Any]] = {}
        self.freeing: set[int] = set()
        self.priorities: dict[int, int] = {}
        self.kernels: dict[str, SimKernel] = {"vec_add": SimKernel("vec_add", VEC_ADD_SIGNATURE, vec_add_body)}

    def __getattribute__(self, name: str) -> Any:
        found = object.__getattribute__(self, name)
        inside = getattr(object.__getattribute__(self, "current"), "host_func", 0) if name[:2] == "cu" else 0
        if inside and name[2:3].isupper():
            # CUDA forbids driver calls inside a host function: the real driver fails them (or deadlocks).
            self.bug(f"{name} called inside a host function (CUDA forbids driver calls there)")
            return lambda *args: (real.CUresult.CUDA_ERROR_NOT_PERMITTED,)
        return found

    def __getattr__(self, name: str) -> Any:
        if name.startswith("cu") and name[2:3].isupper():
            raise AttributeError(f"the simulator does not implement {name}")
        return getattr(real, name)  # enums, handle types, structs

    def add_kernel(self, kernel: SimKernel) -> SimKernel:
        """Make ``kernel`` loadable by name from any simulated cubin (it gets its own handle)."""
        kernel.handle = 0x4B00 + len(self.kernels)
        self.kernels[kernel.name] = kernel
        return kernel

    def kinds(self, kind: str) -> list[tuple[Any, ...]]:
        return [entry for entry in self.log if entry[0] == kind]

    # device and context
    def cuInit(self, flags: int) -> tuple[Any]:
        return (OK,)

    def cuDriverGetVersion(self) -> tuple[Any, int]:
        return OK, 13000

    def cuDeviceGetCount(self) -> tuple[Any, int]:
        return OK, self.devices

    def cuDeviceGet(self, ordinal: int) -> tuple[Any, Any]:
        return OK, real.CUdevice(ordinal)

    def cuDeviceGetAttribute(self, attr: Any, dev: Any) -> tuple[Any, int]:
        values = {"COMPUTE_CAPABILITY_MAJOR": 9, "COMPUTE_CAPABILITY_MINOR": 0, "MULTIPROCESSOR_COUNT": 132}
        values["L2_CACHE_SIZE"] = 50 << 20
        return OK, values[attr.name.removeprefix("CU_DEVICE_ATTRIBUTE_")]

    def cuDeviceGetName(self, size: int, dev: Any) -> tuple[Any, bytes]:
        return OK, b"Simulated H100".ljust(size, b"\0")

    def cuDeviceTotalMem(self, dev: Any) -> tuple[Any, int]:
        return OK, 80 << 30

    def cuDevicePrimaryCtxRetain(self, dev: Any) -> tuple[Any, Any]:
        return OK, real.CUcontext(0xC0 + int(dev))

    def cuCtxGetCurrent(self) -> tuple[Any, Any]:
        return OK, real.CUcontext(getattr(self.current, "ctx", 0))

    def cuCtxSetCurrent(self, ctx: Any) -> tuple[Any]:
        self.current.ctx = int(ctx)
        self.log.append(("set_current", threading.get_ident()))
        return (OK,)

    def cuCtxGetStreamPriorityRange(self) -> tuple[Any, int, int]:
        return OK, 0, -5

    def cuMemGetInfo(self) -> tuple[Any, int, int]:
        used = sum(a.nbytes for a in self.device_mem.values())
        return OK, (80 << 30) - used, 80 << 30

    def cuGetErrorString(self, code: Any) -> tuple[Any, bytes]:
        return OK, b"simulated failure"

    # memory
    def cuMemPoolCreate(self, props: Any) -> tuple[Any, Any]:
        assert 0 <= props.location.id < self.devices
        handle = next(self.ids)
        self.pool_devices[handle] = int(props.location.id)
        return OK, real.CUmemoryPool(handle)

    def cuMemPoolSetAttribute(self, pool: Any, attr: Any, value: Any) -> tuple[Any]:
        self.log.append(("pool_set", attr.name, int(value)))
        return (OK,)

    def cuMemPoolGetAttribute(self, pool: Any, attr: Any) -> tuple[Any, Any]:
        return OK, real.cuuint64_t(sum(a.nbytes for a in self.device_mem.values()))

    def cuMemAllocFromPoolAsync(self, size: int, pool: Any, stream: Any) -> tuple[Any, Any]:
        if self.capturing and self.mode() != real.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED:
            return real.CUresult.CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, None  # what the H100 answers
        array = np.zeros(size, np.uint8)
        self.device_mem[array.ctypes.data] = array
        on = self.stream_devices.get(int(stream), 0)  # a test's own allocation (no pool): its stream's device
        self.alloc_devices[array.ctypes.data] = self.pool_devices.get(int(pool), on) if pool is not None else on
        self.log.append(("alloc", array.ctypes.data, int(stream)))
        if int(stream) in self.capture_of:  # a relaxed capture's allocation: a node of the graph (._graphs)
            self.enqueue(Work(int(stream), lambda: None, kind="alloc"))
        self.progress()
        return OK, real.CUdeviceptr(array.ctypes.data)

    def cuMemFreeAsync(self, ptr: Any, stream: Any) -> tuple[Any]:
        address, st = int(ptr), int(stream)
        if address not in self.device_mem or address in self.freeing:
            return (real.CUresult.CUDA_ERROR_INVALID_VALUE,)
        self.freeing.add(address)

        def run() -> None:
            size = self.device_mem[address].nbytes
            for work in self.pending():
                if any(p < address + size and address < p + n for p, n in work.ranges):
                    self.bug(
                        f"memory {address:#x} freed on stream {st:#x} while work on stream {work.stream:#x} "
                        "that touches it is still queued (the free is not ordered after that work)"
                    )
            del self.device_mem[address]
            self.alloc_devices.pop(address, None)
            self.freeing.discard(address)
            self.log.append(("free", address, st))

        self.enqueue(Work(st, run, kind="free"))
        return (OK,)

    def cuMemHostAlloc(self, size: int, flags: int) -> tuple[Any, int]:
        array = np.zeros(size, np.uint8)
        self.host_mem[array.ctypes.data] = array
        return OK, array.ctypes.data

    def cuMemFreeHost(self, ptr: int) -> tuple[Any]:
        self.drain_all()  # as the driver: freeing pinned memory synchronizes
        del self.host_mem[ptr]
        self.log.append(("free_host", ptr))
        return (OK,)

    def device_range(self, ptr: int, nbytes: int) -> bool:
        """Every device access must lie inside one live allocation (else the real GPU would fault)."""
        for base, array in self.device_mem.items():
            if base <= ptr and ptr + nbytes <= base + array.nbytes:
                return True
        self.bug(f"device access [{ptr:#x}, +{nbytes}) outside every live allocation")
        return False

    def live(self, ranges: list[tuple[int, int]]) -> bool:
        """True when every range is device memory still allocated (work that is not is skipped, and noted)."""
        return all([self.device_range(p, n) for p, n in ranges])  # noqa: C419  # note every bad range

    def cuPointerGetAttribute(self, attr: Any, ptr: Any) -> tuple[Any, Any]:
        """``IS_MANAGED`` (never) and ``DEVICE_ORDINAL`` (the allocation's device) of simulated device memory; for
        any other address ``CUDA_ERROR_INVALID_VALUE``, as the driver answers for memory it does not know."""
        address = int(ptr)
        base = next((b for b, a in self.device_mem.items() if b <= address < b + max(a.nbytes, 1)), None)
        name = attr.name.removeprefix("CU_POINTER_ATTRIBUTE_")
        if base is None or name not in ("IS_MANAGED", "DEVICE_ORDINAL"):
            return real.CUresult.CUDA_ERROR_INVALID_VALUE, None
        return OK, (False if name == "IS_MANAGED" else self.alloc_devices.get(base, 0))

    def pinned(self, ptr: int, nbytes: int) -> bool:
        return any(base <= ptr and ptr + nbytes <= base + a.nbytes for base, a in self.host_mem.items())

    def _copy(self, dst: Any, src: Any, n: int, stream: Any, kind: str) -> tuple[Any]:
        d, s, st = int(dst), int(src), int(stream)
        ranges = [(d, n)] if kind != "DtoH" else []
        ranges += [(s, n)] if kind != "HtoD" else []
        staged = None
        if kind == "HtoD" and not self.pinned(s, n):  # pageable: the driver stages the bytes before returning
            staged = (ctypes.c_uint8 * n).from_buffer_copy((ctypes.c_uint8 * n).from_address(s))
        pageable_read = kind == "DtoH" and not self.pinned(d, n)  # returns once the copy is done

        def run() -> None:
            if self.live(ranges):
                ctypes.memmove(d, ctypes.addressof(staged) if staged is not None else s, n)
            self.log.append(("copy", kind, d, s, n, st))

        work = Work(st, run, ranges, kind="memcpy")
        if pageable_read and st in self.capture_of:  # a copy that returns once done cannot be captured
            return (real.CUresult.CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,)
        if pageable_read:
            self.drain(st)
            self.execute(work)
        else:
            self.enqueue(work)
        return (OK,)

    def cuMemcpyHtoDAsync(self, dst: Any, src: Any, n: int, stream: Any) -> tuple[Any]:
        return self._copy(dst, src, n, stream, "HtoD")

    def cuMemcpyDtoHAsync(self, dst: Any, src: Any, n: int, stream: Any) -> tuple[Any]:
        return self._copy(dst, src, n, stream, "DtoH")

    def cuMemcpyAsync(self, dst: Any, src: Any, n: int, stream: Any) -> tuple[Any]:
        return self._copy(dst, src, n, stream, "DtoD")

    def cuDeviceCanAccessPeer(self, dev: Any, peer: Any) -> tuple[Any, int]:
        return OK, int(self.peer_capable and int(dev) != int(peer))

    def cuCtxEnablePeerAccess(self, peer_ctx: Any, flags: int) -> tuple[Any]:
        self.log.append(("peer_access", int(peer_ctx)))
        return (OK,)

    def cuMemPoolSetAccess(self, pool: Any, descs: Any, count: int) -> tuple[Any]:
        self.log.append(("pool_access", int(pool), [d.location.id for d in descs]))
        return (OK,)

    def cuMemcpyPeerAsync(  # noqa: PLR0917  # the driver API's positional signature
        self, dst: Any, dst_ctx: Any, src: Any, src_ctx: Any, n: int, stream: Any
    ) -> tuple[Any]:
        return self._copy(dst, src, n, stream, "Peer")

    def _memset(self, ptr: Any, value: int, count: int, stream: Any, dtype: Any) -> tuple[Any]:
        size, p, st = np.dtype(dtype).itemsize, int(ptr), int(stream)

        def run() -> None:
            if self.live([(p, count * size)]):
                np.ctypeslib.as_array((ctypes.c_uint8 * (count * size)).from_address(p)).view(dtype)[:] = value
            self.log.append(("memset", size, p, count, st))

        self.enqueue(Work(st, run, [(p, count * size)], kind="memset"))
        return (OK,)

    def cuMemsetD8Async(self, ptr: Any, value: int, count: int, stream: Any) -> tuple[Any]:
        return self._memset(ptr, value, count, stream, np.uint8)

    def cuMemsetD16Async(self, ptr: Any, value: int, count: int, stream: Any) -> tuple[Any]:
        return self._memset(ptr, value, count, stream, np.uint16)

    def cuMemsetD32Async(self, ptr: Any, value: int, count: int, stream: Any) -> tuple[Any]:
        return self._memset(ptr, value, count, stream, np.uint32)

    # streams (their queues, events and synchronization: SimStreams)
    def cuStreamCreateWithPriority(self, flags: int, priority: int) -> tuple[Any, Any]:
        assert flags == int(real.CUstream_flags.CU_STREAM_NON_BLOCKING)
        handle = next(self.ids)
        self.priorities[handle] = priority
        self.stream_devices[handle] = getattr(self.current, "ctx", 0xC0) - 0xC0
        return OK, real.CUstream(handle)

    def cuStreamDestroy(self, stream: Any) -> tuple[Any]:
        self.log.append(("stream_destroy", int(stream)))  # queued work still completes, as in the driver
        return (OK,)

    def cuStreamGetPriority(self, stream: Any) -> tuple[Any, int]:
        return OK, self.priorities.get(int(stream), 0)

    def cuStreamGetDevice(self, stream: Any) -> tuple[Any, Any]:
        return OK, real.CUdevice(self.stream_devices.get(int(stream), 0))

    def cuStreamIsCapturing(self, stream: Any) -> tuple[Any, Any]:
        status = "ACTIVE" if int(stream) in self.capturing else "NONE"
        return OK, getattr(real.CUstreamCaptureStatus, f"CU_STREAM_CAPTURE_STATUS_{status}")

    def cuThreadExchangeStreamCaptureMode(self, mode: Any) -> tuple[Any, Any]:
        previous, self.current.mode = self.mode(), mode
        return OK, previous

    def cuLaunchKernel(  # noqa: PLR0917  # the driver's positional signature
        self, f: Any, gx: int, gy: int, gz: int, bx: int, by: int, bz: int, shmem: int, stream: Any, params: int, _: Any
    ) -> tuple[Any]:
        kernel = next((k for k in self.kernels.values() if k.handle == int(f)), None)
        assert kernel is not None, f"launch of an unknown kernel handle {int(f):#x}"
        cells = (ctypes.c_void_p * len(kernel.signature)).from_address(params)
        values = tuple(
            _READERS[kind].from_address(cell).value for kind, cell in zip(kernel.signature, cells, strict=True)
        )
        ranges, body = kernel.body(values, (gx, gy, gz))
        st = int(stream)
        self._same_device(st, ranges)

        def run() -> None:
            if self.live(ranges):
                body()
            self.log.append(("launch", st, (gx, gy, gz)))

        self.enqueue(Work(st, run, ranges, kind="kernel"))
        return (OK,)

    def _same_device(self, stream: int, ranges: list[tuple[int, int]]) -> None:
        """Note a kernel on a stream of one device touching memory allocated on another (found by its base)."""
        on = self.stream_devices.get(stream, 0)
        for ptr, nbytes in ranges:
            for base, array in self.device_mem.items():
                home = self.alloc_devices.get(base, on)
                if base <= ptr < base + max(array.nbytes, 1) and nbytes and home != on:
                    self.bug(f"a kernel on device {on} (stream {stream:#x}) touches memory {ptr:#x} of device {home}")

    def cuLaunchKernelEx(self, config: Any, f: Any, params: int, extra: Any) -> tuple[Any]:
        """``cuLaunchKernel`` with a ``CUlaunchConfig``; its attributes' ids are logged (``("launch_attrs", ids)``).
        The simulator runs a programmatic (PDL) launch in stream order, as a kernel that waits at entry behaves."""
        c = config
        self.log.append(("launch_attrs", tuple(int(a.id) for a in c.attrs[: c.numAttrs])))
        grid, block = (c.gridDimX, c.gridDimY, c.gridDimZ), (c.blockDimX, c.blockDimY, c.blockDimZ)
        return self.cuLaunchKernel(f, *grid, *block, c.sharedMemBytes, c.hStream, params, extra)
