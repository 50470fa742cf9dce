"""Ops over ``tile.core`` work: ``launch``, ``copy``, ``alloc``, ``free``.

Each op takes its arguments when built and hands back what it was given once its work is done (``launch``
returns its argument tuple, ``copy`` its destination), so the buffers a kernel writes come back to host
code only after the kernel finished. On a CUDA context they call ``tile.core`` with that context's stream
(never an implicit stream). On a host stream, ``copy``, ``alloc`` and ``free`` work on host buffers
(anything exporting a contiguous buffer: bytearray, numpy arrays), so pipelines and graphs can be
exercised on the CPU; ``launch`` needs a CUDA context (the CPU interpreter enqueues with ``host_call``).
``alloc`` and ``free`` are refused inside a graph capture.
"""

from __future__ import annotations

from typing import Any, TypeVar

from tile.aio import _cuda
from tile.aio._context import HOST, ExecutionContext
from tile.aio._cuda import CudaContext
from tile.aio._errors import ContextMismatchError, CopyError
from tile.aio._op import DeviceOp

__all__ = ["alloc", "copy", "free", "launch"]

D = TypeVar("D")


def _stream_of(ctx: ExecutionContext, op: DeviceOp[Any]) -> Any:
    if type(ctx) is CudaContext:  # the common case, without the ABC-backed isinstance below
        return ctx.stream
    if not isinstance(ctx, CudaContext):
        raise ContextMismatchError(op._describe(), "a CUDA stream", repr(ctx))
    return ctx.stream


class _Launch(DeviceOp[tuple[Any, ...]]):
    __slots__ = ("_args", "_block", "_function", "_grid", "_shared_mem", "_signature", "_unchecked")

    def __init__(
        self,
        function: Any,
        grid: Any,
        args: tuple[Any, ...],
        *,
        block: Any,
        shared_mem: int,
        signature: Any,
        unchecked: bool = False,
    ):
        super().__init__()
        self._function = function
        self._grid = grid
        self._args = args
        self._block = block
        self._shared_mem = shared_mem
        self._signature = signature
        self._unchecked = unchecked

    def _describe(self) -> str:
        return f"the launch of kernel {getattr(self._function, 'name', self._function)!r}"

    def _execute(self, ctx: ExecutionContext) -> tuple[Any, ...]:
        stream = _stream_of(ctx, self)
        _cuda.core().launch(
            self._function,
            self._grid,
            self._block,
            self._args,
            stream=stream,
            shared_mem=self._shared_mem,
            signature=self._signature,
            **({"unchecked": True} if self._unchecked else {}),  # only the opt-out travels (a checked launch as before)
        )
        return self._args

    def _drop(self) -> None:
        del self._function, self._args


class _Copy(DeviceOp[D]):
    __slots__ = ("_dst", "_src")

    def __init__(self, dst: D, src: Any) -> None:
        super().__init__()
        self._dst = dst
        self._src = src

    def _execute(self, ctx: ExecutionContext) -> D:
        dst, src = self._dst, self._src
        if isinstance(ctx, CudaContext):
            _cuda.core().copy(dst, src, stream=ctx.stream, sync=False)
        elif ctx.device is HOST:
            target, source = _host_bytes(dst, "destination"), _host_bytes(src, "source")
            if target.nbytes != source.nbytes:
                raise CopyError(f"copy of {source.nbytes} bytes into a {target.nbytes}-byte destination")

            def run() -> None:
                target[:] = source

            ctx.enqueue(run)
        else:
            raise ContextMismatchError(self._describe(), "a CUDA stream or a host stream", repr(ctx))
        return dst

    def _drop(self) -> None:
        del self._dst, self._src


def _host_bytes(obj: object, role: str) -> memoryview:
    try:
        view = memoryview(obj)  # type: ignore[arg-type]  # checked here: anything with the buffer protocol
    except TypeError:
        raise CopyError(f"the {role} ({type(obj).__name__}) is not a host buffer") from None
    if not view.contiguous:
        raise CopyError(f"the {role} is not contiguous")
    if view.readonly and role == "destination":
        raise CopyError("the destination is read-only")
    return view.cast("B")


class _Alloc(DeviceOp[Any]):
    __slots__ = ("_nbytes",)

    def __init__(self, nbytes: int) -> None:
        super().__init__()
        self._nbytes = nbytes

    def _describe(self) -> str:
        return f"alloc({self._nbytes})"

    def _refusal(self, ctx: ExecutionContext) -> str | None:
        return "it allocates memory (a graph would bake in one allocation, or allocate again at each replay)"

    def _execute(self, ctx: ExecutionContext) -> Any:
        if isinstance(ctx, CudaContext):
            return _cuda.core().DeviceBuffer.allocate(self._nbytes, device=ctx.device, stream=ctx.stream)
        if ctx.device is HOST:
            return bytearray(self._nbytes)
        raise ContextMismatchError(self._describe(), "a CUDA stream or a host stream", repr(ctx))


class _Free(DeviceOp[None]):
    __slots__ = ("_buffer",)

    def __init__(self, buffer: Any) -> None:
        super().__init__()
        self._buffer = buffer

    def _refusal(self, ctx: ExecutionContext) -> str | None:
        return "it frees memory (a replay would free it again)"

    def _execute(self, ctx: ExecutionContext) -> None:
        buffer = self._buffer
        if isinstance(ctx, CudaContext):
            buffer.record_use(ctx.stream)  # the stream-ordered free waits for this stream's earlier work
            buffer.free()
        else:
            ctx.enqueue(lambda: _keep(buffer))  # host memory goes when the stream is past its last use

    def _drop(self) -> None:
        del self._buffer


def _keep(_: object) -> None:
    """Holds a buffer until the host stream reaches this point."""


def launch(
    function: Any,
    grid: Any,
    args: tuple[Any, ...] | list[Any],
    *,
    block: Any = (1, 1, 1),
    shared_mem: int = 0,
    signature: Any = None,
    unchecked: bool = False,
) -> DeviceOp[tuple[Any, ...]]:
    """Return an op that launches a ``tile.core.Function``; its output is ``args`` (handed back when the
    kernel is done).

    Parameters
    ----------
    function : tile.core.Function
        The kernel.
    grid, block : int or tuple of int
        Launch dimensions (Tile IR kernels use block ``(1, 1, 1)``).
    args : sequence
        Kernel arguments, as ``tile.core.launch`` takes them.
    shared_mem : int
        Dynamic shared memory in bytes.
    signature : optional
        Argument kinds for ``tile.core.launch`` (e.g. ``("ptr", "i32")``).
    unchecked : bool
        Passed to ``tile.core.launch``: lets pointer arguments be raw int addresses (trusted as given).
    """
    return _Launch(
        function, grid, tuple(args), block=block, shared_mem=shared_mem, signature=signature, unchecked=unchecked
    )


def copy(dst: D, src: Any) -> DeviceOp[D]:
    """Return an op copying ``src`` into ``dst`` in stream order; its output is ``dst``.

    Parameters
    ----------
    dst : DeviceBuffer, DeviceView or host buffer
        Destination. On a CUDA context anything ``tile.core.copy`` takes; on a host stream a writable,
        contiguous host buffer.
    src : object
        Source of the same size; owned by the op until the copy is done.

    Returns
    -------
    DeviceOp
        The op producing ``dst``.
    """
    return _Copy(dst, src)


def alloc(nbytes: int) -> DeviceOp[Any]:
    """Return an op allocating memory on the context's device; refused inside a graph capture.

    Parameters
    ----------
    nbytes : int
        Size in bytes.

    Returns
    -------
    DeviceOp
        The op producing a stream-ordered ``tile.core.DeviceBuffer`` (CUDA) or a ``bytearray`` (host).
    """
    return _Alloc(nbytes)


def free(buffer: Any) -> DeviceOp[None]:
    """Return an op freeing a buffer after the context's earlier work; refused inside a graph capture.

    Parameters
    ----------
    buffer : DeviceBuffer or host buffer
        What to free: a ``DeviceBuffer`` is freed stream-ordered after this context's work; a host buffer is
        dropped once the host stream reaches this point.

    Returns
    -------
    DeviceOp
        The op (output None).
    """
    return _Free(buffer)
