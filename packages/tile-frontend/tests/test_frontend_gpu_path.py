"""The GPU backend's code path (device storage, entry-ABI packing, module loading, launch on a stream) run on this
machine against a stand-in for the tile.core calls it makes: "device memory" is host memory at real addresses, and
the stand-in ``launch`` interprets the kernel's own Tile IR against it. The stand-ins mirror tile.core's signatures
(keyword-only arguments included), so a call the real API would reject fails here too; the real thing runs in
test_frontend_gpu.py on a GPU. Needs tileiras: the launcher compiles a real sm_90 cubin for the stand-in device."""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import tile.compiler as tile_compiler
import tile.core as tile_core
import tile.frontend as tile
import tile.ir as tile_ir
from tile.aio import Completion, CudaContext, ExecutionContext
from tile.aio._context import BUILTIN_CONTEXTS
from tile.frontend import _accel, f16, f32
from tile.frontend import _entry as entry_module
from tile.frontend import _launch as launch_module

pytestmark = pytest.mark.requires_tileiras
_BYTECODE: dict[bytes, bytes] = {}  # cubin -> the Tile IR bytecode it was made from


class FakeDevice:
    """``tile.core.Device`` stand-in, installed as that class: ``Device(0)`` is the one fake device, and its type is
    the installed class (placement resolves devices by exact type, never by asking the object)."""

    ordinal, arch, name = 0, "sm_90", "stand-in GPU"
    synchronized = 0  # device-wide synchronizations asked for (what Storage.settle does)
    _one: FakeDevice | None = None

    def __new__(cls, ordinal: int = 0) -> FakeDevice:  # one instance, as tile.core.Device keeps one per ordinal
        if cls._one is None:
            cls._one = super().__new__(cls)
        return cls._one

    def synchronize(self) -> None:
        FakeDevice.synchronized += 1


DEVICE = FakeDevice()


class FakeStream:
    device = DEVICE
    closed = False  # as tile.core.Stream.closed (tile.aio enqueues nothing on a closed stream)

    def synchronize(self) -> None:
        pass


FakeDevice.default_stream = FakeStream()  # type: ignore[attr-defined]  # set once both classes exist
FakeDeviceClass = FakeDevice
"""What the fake harness installs as ``tile.core.Device``."""


class FakeBuffer:
    raw: np.ndarray[Any, Any]
    ptr: int
    nbytes: int
    device: Any
    stream: FakeStream
    closed: bool
    ready: bool  # what tile.core's ready allocation promises: usable on any stream at once (the frontend needs it)

    def __init__(self) -> None:
        raise TypeError("use allocate/from_host")

    @classmethod
    def allocate(cls, nbytes: int, *, device: Any = None, stream: object = None, ready: bool = False) -> FakeBuffer:
        self = object.__new__(cls)
        self.ready = ready
        self.raw = np.zeros(nbytes, np.uint8)
        self.ptr, self.nbytes, self.device, self.stream, self.closed = (
            self.raw.ctypes.data,
            nbytes,
            device,
            FakeStream(),
            False,
        )
        return self

    @classmethod
    def from_host(
        cls, array: Any, *, device: Any = None, stream: object = None, sync: bool = True, ready: bool = False
    ) -> FakeBuffer:
        self = cls.allocate(max(array.nbytes, 1), device=device, ready=ready)
        self.raw[: array.nbytes] = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
        return self

    def free(self) -> None:
        assert not self.closed, "double free"
        self.closed = True


class FakeView:
    def __init__(
        self,
        ptr: int,
        dtype: Any,
        shape: tuple[int, ...],
        strides: tuple[int, ...],
        *,
        device: Any,
        owner: object,
        buffer: Any = None,
        readonly: bool = False,
        unchecked: bool = False,
    ) -> None:
        self.ptr, self.dtype, self.shape, self.strides = ptr, np.dtype(dtype), shape, strides
        self.device, self.owner, self.buffer, self.readonly = device, owner, buffer, readonly
        self.unchecked = unchecked

    def _array(self) -> np.ndarray[Any, Any]:
        span = sum((n - 1) * s for n, s in zip(self.shape, self.strides, strict=True)) + self.dtype.itemsize
        raw = np.ctypeslib.as_array((ctypes.c_uint8 * span).from_address(self.ptr))
        return np.lib.stride_tricks.as_strided(
            raw.view(self.dtype) if raw.size % self.dtype.itemsize == 0 else raw, self.shape, self.strides
        )

    def to_numpy(self, *, stream: object = None) -> np.ndarray[Any, Any]:
        return np.array(self._array(), copy=True)

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.ptr, self.readonly), "version": 3}

    def __dlpack__(self, *, stream: int | None = None, **kwargs: Any) -> FakeCapsule:
        # tile.core's capsule keeps the buffer alive when the view has one, else the view itself
        return FakeCapsule(self.buffer if self.buffer is not None else self)


class FakeCapsule:
    """What a consumer (torch, cupy) holds while it uses an export: a reference to the capsule's owner."""

    def __init__(self, owner: object) -> None:
        self.owner = owner


class FakeModule:
    def __init__(self, cubin: bytes) -> None:
        self.program = tile_ir.read_bytecode(_BYTECODE[cubin])

    @classmethod
    def from_cubin(cls, data: bytes, *, device: Any = None, name: str = "") -> FakeModule:
        assert data[:4] == b"\x7fELF", "a cubin is an ELF image"
        return cls(data)

    def function(self, name: str) -> Any:
        assert any(f.name == name for f in self.program.functions), f"no entry {name}"
        return self


def fake_launch(
    function: Any,
    grid: Any,
    block: Any,
    args: Any,
    *,
    stream: object = None,
    shared_mem: int = 0,
    signature: Any = None,
) -> None:
    from tile.ir import interp

    assert tuple(block) == (1, 1, 1)
    assert signature is not None
    assert len(signature) == len(args)
    memory, mapped = interp.Memory(), []
    for kind, value in zip(signature, args, strict=True):
        if kind == "ptr":  # a real host address standing for a device address: map the page-free span behind it
            span = np.ctypeslib.as_array((ctypes.c_uint8 * (1 << 22)).from_address(value & ~4095))
            mapped.append(memory.map(span) + (value & 4095))
        else:
            mapped.append(value)
    interp.launch(function.program, tuple(grid), mapped, memory, check_races=False)


PREPARED_PDL: list[tuple[str, bool]] = []


def fake_prepare(
    function: Any,
    grid: Any,
    block: Any,
    args: Any,
    *,
    stream: object = None,
    shared_mem: int = 0,
    signature: Any = None,
    unchecked: bool = False,
    pdl: bool = False,
) -> Callable[[], None]:
    """tile.core.prepare: check once, return the relaunchable call (here: interpret the kernel each time, in stream
    order, as a PDL kernel's entry wait makes it run). ``PREPARED_PDL`` records each prepare's ``pdl``."""
    PREPARED_PDL.append((function.program.functions[0].name, pdl))
    assert unchecked is True  # the frontend passes addresses of handles it checked: its own, explicit opt-out
    assert signature is not None
    assert len(signature) == len(args)
    args = tuple(args)
    return lambda: fake_launch(function, grid, block, args, stream=stream, shared_mem=shared_mem, signature=signature)


class FakeCudaContext(ExecutionContext):
    stream = FakeStream()

    @property
    def device(self) -> Any:
        return DEVICE

    def enqueue(self, fn: Callable[[], object]) -> None:
        fn()

    def record(self) -> Completion:
        raise NotImplementedError

    def wait(self, completion: Completion) -> None:
        pass

    def synchronize(self) -> None:
        pass

    def query(self) -> bool:
        return True


@pytest.fixture
def fake_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    install_fakes(monkeypatch)


def install_fakes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Stand the fakes in for tile.core's device calls (also used by benchmarks/bench_launch_cpu.py)."""
    # A test double standing in for tile.aio's CudaContext, whose completions launches rely on (it runs work inline).
    monkeypatch.setattr(launch_module, "BUILTIN_CONTEXTS", BUILTIN_CONTEXTS | {FakeCudaContext})
    monkeypatch.setattr(tile_core, "DeviceBuffer", FakeBuffer)
    monkeypatch.setattr(tile_core, "DeviceView", FakeView)
    monkeypatch.setattr(tile_core, "Module", FakeModule)
    monkeypatch.setattr(tile_core, "launch", fake_launch)
    monkeypatch.setattr(tile_core, "prepare", fake_prepare)
    monkeypatch.setattr(tile_core, "Device", FakeDeviceClass)

    def compile_and_remember(fn: Any, spec: Any, target: Any, **kwargs: Any) -> Any:
        compiled = tile_compiler.compile_kernel(fn, spec, target, **kwargs)
        if compiled.cubin is not None:
            _BYTECODE[compiled.cubin] = compiled.bytecode
        return compiled

    monkeypatch.setattr(entry_module, "compile_kernel", compile_and_remember)


def _gpu(make: Callable[..., tile.Tensor], *args: Any) -> tile.Tensor:
    return make(*args, device=DEVICE)


def test_device_tensors_round_trip(fake_gpu: None) -> None:
    t = _gpu(tile.arange, f32, 24).reshape(4, 6)
    assert t.device is DEVICE
    np.testing.assert_array_equal(t.T[1:, ::2].to_numpy(), np.arange(24, dtype=np.float32).reshape(4, 6).T[1:, ::2])
    assert not hasattr(t, "__cuda_array_interface__")  # untracked: exports go through DLPack


def test_launch_on_a_cuda_context(fake_gpu: None, k: ModuleType) -> None:
    x = _gpu(tile.from_numpy, np.arange(1000, dtype=np.float32))
    y = _gpu(tile.full, f32, [1000], 0.5)
    op = k.add(_gpu(tile.zeros, f32, [1000]).partition([128]), x, y)
    assert op.compile().target.arch == "sm_90"
    assert op.compile().cubin
    z, x, _ = op.sync_on(FakeCudaContext())
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.arange(1000, dtype=np.float32) + 0.5)


_CHAIN_OF_4 = ["run_links", "execute", "execute", "execute", "execute"]
"""What the compiled path does for a chain of four launches on a foreign context: the chain runs in one
`_fastlaunch.run_links` call (tile.aio's ``_run_links`` hook), which claims each launch and executes it through
`_fastlaunch.execute` (looked up on the module, so seen here; `claim_run` is not reached): nothing is left to the pure
path."""
_CHAIN_OF_4_AIO = ["run_links", "execute"]
"""The same chain on tile.aio's own `CudaContext`: `run_links` executes the first launch through `_fastlaunch.execute`
and claims and relaunches the three links' launches inside C (its stream read from the context's slot)."""


def _spy_compiled(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The compiled steps that handled a launch's execution, in order (``"pure"``: one the pure path had to run)."""
    from tile.aio import _combinators

    seen: list[str] = []
    execute, claim_run, run_links = _accel.execute, _accel.claim_run, _combinators._run_links
    assert run_links is not None  # the compiled path installed tile.aio's hook

    def spy_execute(*a: Any) -> Any:
        done = execute(*a)
        seen.append("execute" if done is not None else "pure")
        return done

    def spy_claim_run(*a: Any) -> Any:  # noted first: a step it leaves to the pure path comes after it
        seen.append("claim_run")
        return claim_run(*a)

    def spy_run_links(*a: Any) -> Any:
        seen.append("run_links")
        return run_links(*a)

    monkeypatch.setattr(_accel, "execute", spy_execute)
    monkeypatch.setattr(_accel, "claim_run", spy_claim_run)
    monkeypatch.setattr(_combinators, "_run_links", spy_run_links)
    return seen


@pytest.mark.parametrize("path", ["pure", "compiled"])
def test_a_then_chain_on_a_cuda_context_on_both_launch_paths(
    fake_gpu: None, k: ModuleType, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if path == "compiled" and _accel.compiled() is None:
        pytest.skip(_accel.reason())
    ctx = FakeCudaContext()
    args = (_gpu(tile.zeros, f32, [256]).partition([128]), _gpu(tile.ones, f32, [256]), _gpu(tile.ones, f32, [256]))
    z, x, y = k.add(*args).sync_on(ctx)  # compiles, makes the plan and its prepared launch
    z, x, y = k.add(z, x, y).sync_on(ctx)
    previous = _accel.use(path)
    try:
        executed = _spy_compiled(monkeypatch) if path == "compiled" else []
        op = k.add(z, x, y)
        for _ in range(3):
            op = op.then(lambda out: k.add(*out))
        z, x, y = op.sync_on(ctx)
        out = z.unpartition()
        np.testing.assert_array_equal(out.to_numpy(), np.full(256, 2, np.float32))
        z = out.partition([128])
        assert executed == (_CHAIN_OF_4 if path == "compiled" else [])
        peek = k.add(z, x, y).then(lambda out: out[1].to_numpy())
        with pytest.raises(tile.InFlightError, match="handed on by the launch of add"):
            peek.sync_on(ctx)
    finally:
        _accel.use(previous)


def test_gemm_with_strided_device_views(fake_gpu: None, k: ModuleType) -> None:
    a = _gpu(tile.randn, f16, [64, 96])
    b = _gpu(tile.randn, f16, [48, 96]).T  # a transposed view: strides (1, 96)
    expected = a.to_numpy().astype(np.float64) @ b.to_numpy().astype(np.float64)
    c, _, _, _ = k.gemm(_gpu(tile.empty, f32, [64, 48]).partition([32, 16]), a, b, BK=32).sync_on(FakeCudaContext())
    np.testing.assert_allclose(c.unpartition().to_numpy(), expected, rtol=1e-3, atol=1e-3)


def test_device_free_waits_for_the_launch(fake_gpu: None, k: ModuleType) -> None:
    x = _gpu(tile.ones, f32, [256])
    alias = x[:]
    buffer = x._storage.buffer
    op = k.add(_gpu(tile.zeros, f32, [256]).partition([128]), x, _gpu(tile.ones, f32, [256]))
    alias.free()
    assert not buffer.closed  # the launch holds it, even before it is enqueued
    op.sync_on(FakeCudaContext())
    assert buffer.closed


def test_a_device_dlpack_export_is_a_live_borrow(fake_gpu: None) -> None:
    back = _gpu(tile.arange, f32, 16)
    buffer = back._storage.buffer
    consumer = back.__dlpack__(max_version=(1, 0))
    with pytest.raises(tile.BorrowError, match="DLPack export"):
        back.partition([16])
    back.free()
    assert not buffer.closed  # the consumer still reads the memory: the free waits for it
    del consumer
    assert buffer.closed


def test_device_exports_are_read_only_unless_lent(fake_gpu: None) -> None:
    """The device view behind ``__dlpack__`` is read-only; only a `Lent` tensor's is writable, and a legacy
    (pre-DLPack 1.0) consumer cannot be told "read-only", so it is refused. ``__cuda_array_interface__``, an export
    Tile cannot track, is not offered at all."""
    t = _gpu(tile.arange, f32, 16)
    with pytest.raises(tile.UntrackedExportError, match="no __cuda_array_interface__"):
        t.__cuda_array_interface__  # noqa: B018  # reading the property is the export
    with pytest.raises(BufferError, match="legacy capsule"):
        t.__dlpack__()
    from tile.frontend import _device

    assert _device.view(t, export=True).readonly
    lent = t.lend()
    consumer = lent.__dlpack__(max_version=(1, 0))
    assert lent.consumers == 1
    del consumer
    assert lent.consumers == 0
    lent.reclaim()


def test_work_another_library_queued_through_an_export_ends_before_tile_writes_or_frees(fake_gpu: None) -> None:
    """Dropping a consumer's array does not mean the work it queued on its own stream ran: before Tile partitions,
    lends or frees the memory (or takes a loan back), the device finishes it. Memory never exported pays nothing."""
    t = _gpu(tile.arange, f32, 16)
    before = FakeDevice.synchronized
    t = t.partition([16]).unpartition()
    assert FakeDevice.synchronized == before  # never exported: no wait
    consumer = t.__dlpack__(max_version=(1, 0))
    del consumer
    z = t.partition([16])
    assert FakeDevice.synchronized == before + 1
    t = z.unpartition()
    t.partition([16]).unpartition()
    assert FakeDevice.synchronized == before + 1  # once per export, not per partition
    lent = _gpu(tile.zeros, f32, [16]).lend()
    writer = lent.__dlpack__(max_version=(1, 0))
    del writer
    lent.reclaim()
    assert FakeDevice.synchronized == before + 2
    u = _gpu(tile.zeros, f32, [16])
    buffer = u._storage.buffer
    reader = u.__dlpack__(max_version=(1, 0))
    u.free()
    assert not buffer.closed  # the consumer still holds it
    del reader
    assert buffer.closed
    assert FakeDevice.synchronized == before + 3  # and the free waited for its queued work


def test_a_gpu_launch_refuses_a_host_stream(fake_gpu: None, k: ModuleType) -> None:
    from tile.aio import HostStream

    op = k.add(_gpu(tile.zeros, f32, [256]).partition([128]), _gpu(tile.ones, f32, [256]), _gpu(tile.ones, f32, [256]))
    with pytest.raises(tile.BackendError, match="host stream"):
        op.sync_on(HostStream())


@pytest.mark.parametrize("path", ["pure", "compiled"])
def test_launches_on_tile_aios_own_cuda_context_on_both_launch_paths(
    fake_gpu: None, k: ModuleType, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A `CudaContext` (over a fake stream): the compiled path reads its stream from the context's slot
    (`_fastlaunch.execute`) and runs ``.sync_on`` in one step (`_fastlaunch.sync`); both paths give the same result."""
    if path == "compiled" and _accel.compiled() is None:
        pytest.skip(_accel.reason())
    ctx = CudaContext(FakeStream())
    args = (_gpu(tile.zeros, f32, [256]).partition([128]), _gpu(tile.ones, f32, [256]), _gpu(tile.ones, f32, [256]))
    z, x, y = k.add(*args).sync_on(ctx)  # compiles, makes the plan and its prepared launch
    previous = _accel.use(path)
    executed = _spy_compiled(monkeypatch) if path == "compiled" else []
    try:
        z, x, y = k.add(z, x, y).sync_on(ctx)
        op = k.add(z, x, y)
        for _ in range(3):
            op = op.then(lambda out: k.add(*out))
        z, x, y = op.sync_on(ctx)
    finally:
        _accel.use(previous)
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.full(256, 2, np.float32))
    assert x._storage.pending == 0
    assert executed == (_CHAIN_OF_4_AIO if path == "compiled" else [])  # the chain's launches, relaunched in C


@pytest.mark.parametrize("path", ["pure", "compiled"])
@pytest.mark.parametrize("zero", [0.0, np.float32(0.0), 0])
def test_a_negative_zero_scalar_is_not_taken_for_the_last_launchs_positive_zero(
    fake_gpu: None, k: ModuleType, path: str, zero: Any
) -> None:
    """``-0.0 == 0.0``: a launch repeated with ``a = -0.0`` after one with ``a = 0.0`` (or the other way round) was
    matched by value and relaunched the launch prepared with the other zero (``Plan.enqueue``, ``_fastlaunch.replay``
    and the prepared-launch cache): ``a * 1 + (-0.0)`` came out with the wrong sign."""
    if path == "compiled" and _accel.compiled() is None:
        pytest.skip(_accel.reason())
    ctx = FakeCudaContext()
    x, y = _gpu(tile.ones, f32, [256]), _gpu(tile.full, f32, [256], -0.0)
    z = _gpu(tile.zeros, f32, [256]).partition([128])
    previous = _accel.use(path)
    try:
        for a, negative in [(zero, False), (-0.0, True), (np.float32(-0.0), True), (zero, False), (-0.0, True)]:
            z, _, x, y = k.axpy(z, a, x, y).sync_on(ctx)
            out = z.unpartition()
            got = out.to_numpy()
            z = out.partition([128])
            assert np.signbit(got).tolist() == [negative] * 256, f"a={a!r}: {got[:4]}"
    finally:
        _accel.use(previous)


@pytest.mark.parametrize("path", ["pure", "compiled"])
def test_nan_scalars_never_match_but_keep_the_prepared_launches_bounded(
    fake_gpu: None, k: ModuleType, path: str
) -> None:
    """A fresh NaN equals no earlier one: every launch prepares anew, and the prepared-launch cache stays capped."""
    from tile.frontend import _execute

    if path == "compiled" and _accel.compiled() is None:
        pytest.skip(_accel.reason())
    ctx = FakeCudaContext()
    x, y = _gpu(tile.ones, f32, [128]), _gpu(tile.zeros, f32, [128])
    z = _gpu(tile.zeros, f32, [128]).partition([128])
    previous = _accel.use(path)
    try:
        for _ in range(_execute._PREPARED_CAP + 8):
            z, _, x, y = k.axpy(z, float("nan"), x, y).sync_on(ctx)
            assert len(_execute._prepared) <= _execute._PREPARED_CAP
    finally:
        _accel.use(previous)
    assert np.isnan(z.unpartition().to_numpy()).all()


@pytest.mark.parametrize("path", ["pure", "compiled"])
@pytest.mark.parametrize(
    ("first", "second"),
    [(np.float16(0.1), 0.1), (np.float32(0.1), 0.1), (np.float16(7e-8), 7e-8)],
    ids=["f16", "f32", "f16-subnormal"],
)
def test_a_numpy_float_scalar_equal_to_a_float_is_not_taken_for_its_launch(
    fake_gpu: None, k: ModuleType, path: str, first: Any, second: float
) -> None:
    """numpy compares a numpy float with a Python float in the numpy type (NEP 50): ``np.float16(0.1) == 0.1``, though
    they are different numbers. Were launches matched by value alone, ``a = 0.1`` after ``a = np.float16(0.1)`` (or the
    other way round) would relaunch the launch packed with the other number. They are not: the scalar's class is part
    of the plan's layout, so each class has its own plan and prepared launch (review 18: tried, held)."""
    if path == "compiled" and _accel.compiled() is None:
        pytest.skip(_accel.reason())
    assert first == second  # equal to numpy
    assert float(first) != second  # different numbers
    ctx = FakeCudaContext()
    x, y = _gpu(tile.ones, f32, [256]), _gpu(tile.zeros, f32, [256])
    z = _gpu(tile.zeros, f32, [256]).partition([128])
    previous = _accel.use(path)
    try:
        for a in [first, second, first, second]:
            z, _, x, y = k.axpy(z, a, x, y).sync_on(ctx)
            out = z.unpartition()
            got = out.to_numpy()
            z = out.partition([128])
            assert got.tolist() == [float(np.float32(float(a)))] * 256, f"a={a!r}: {got[:4]}"
    finally:
        _accel.use(previous)


def test_only_a_kernel_that_waits_for_its_predecessors_is_prepared_with_pdl(fake_gpu: None, k: ModuleType) -> None:
    # @tile.entry(pdl=True) compiles the entry wait (the ABI's waits_prior_grid); only then may tile.core launch the
    # kernel with programmatic stream serialization.
    PREPARED_PDL.clear()
    for kernel in (k.add_pdl, k.add):
        args = (_gpu(tile.zeros, f32, [256]).partition([128]), _gpu(tile.ones, f32, [256]), _gpu(tile.ones, f32, [256]))
        z, _, _ = kernel(*args).sync_on(FakeCudaContext())
        np.testing.assert_array_equal(z.unpartition().to_numpy(), np.full(256, 2, np.float32))
    assert PREPARED_PDL == [("add_pdl", True), ("add", False)]
