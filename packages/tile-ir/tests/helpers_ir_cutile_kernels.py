"""cuTile Python kernels exported to bytecode as reader test inputs (cuTile needs them in a real file)."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import cuda.tile as ct

__all__ = ["KERNELS", "export"]


def _kernel(fn: Callable[..., None]) -> Any:
    """`ct.kernel` behind a typed signature (cuda.tile ships no type information)."""
    return ct.kernel(fn)


@_kernel
def vadd(a: Any, b: Any, c: Any) -> None:
    i = ct.bid(0)
    ct.store(c, index=(i,), tile=ct.load(a, index=(i,), shape=(128,)) + ct.load(b, index=(i,), shape=(128,)))


@_kernel
def softmax(x: Any, y: Any) -> None:
    i = ct.bid(0)
    t = ct.load(x, index=(i, 0), shape=(1, 64), padding_mode=ct.PaddingMode.NEG_INF)
    e = ct.exp(t - ct.max(t, axis=1, keepdims=True))
    ct.store(y, index=(i, 0), tile=e / ct.sum(e, axis=1, keepdims=True))


@_kernel
def matmul(a: Any, b: Any, c: Any) -> None:
    bm, bn = ct.bid(0), ct.bid(1)
    acc = ct.full((32, 32), 0.0, dtype=ct.float32)
    for k in range(ct.num_tiles(a, axis=1, shape=(32, 16))):
        x = ct.load(a, index=(bm, k), shape=(32, 16))
        y = ct.load(b, index=(k, bn), shape=(16, 32))
        acc = ct.mma(x, y, acc)
    ct.store(c, index=(bm, bn), tile=acc.astype(c.dtype))


@_kernel
def cumsum(x: Any, y: Any) -> None:
    i = ct.bid(0)
    ct.store(y, index=(i,), tile=ct.cumsum(ct.load(x, index=(i,), shape=(64,)), axis=0))


@_kernel
def clamp_cast(x: Any, y: Any) -> None:
    i = ct.bid(0)
    t = ct.load(x, index=(i,), shape=(64,))
    ct.store(y, index=(i,), tile=ct.where(t > 0.0, t, 0.0).astype(ct.float16))


def _array(dtype: Any, ndim: int) -> Any:
    from cuda.tile.compilation import ArrayConstraint

    return ArrayConstraint(
        dtype,
        ndim,
        index_dtype=ct.int32,
        stride_lower_bound_incl=0,
        alias_groups=(),
        may_alias_internally=False,
        stride_constant=[None] * (ndim - 1) + [1],
        base_addr_divisible_by=16,
    )


KERNELS: dict[str, tuple[Any, list[tuple[Any, int]]]] = {
    "vadd": (vadd, [(ct.float32, 1)] * 3),
    "softmax": (softmax, [(ct.float32, 2)] * 2),
    "matmul": (matmul, [(ct.float16, 2), (ct.float16, 2), (ct.float32, 2)]),
    "cumsum": (cumsum, [(ct.float32, 1)] * 2),
    "clamp_cast": (clamp_cast, [(ct.float32, 1), (ct.float16, 1)]),
}


def export(name: str, version: str) -> bytes:
    """Export kernel `name` as Tile IR bytecode of `version` with cuTile Python."""
    import cuda.tile._compile as cutile_compile
    from cuda.tile.compilation import CallingConvention, KernelSignature, export_kernel

    kernel, params = KERNELS[name]
    signature = KernelSignature([_array(d, n) for d, n in params], CallingConvention.cutile_python_v2())
    buf = io.BytesIO()
    saved = cutile_compile.dev_features_enabled
    if version == "13.5":
        # cuTile 1.7.0 gates 13.5 behind its developer-features switch; its 13.5 writer is complete
        cutile_compile.dev_features_enabled = lambda: True
    try:
        # cuTile exports architecture-independent bytecode only from 13.3; older versions name a target
        target = "sm_90" if version in ("13.1", "13.2") else None
        export_kernel(
            kernel, [signature], buf, gpu_code=target, output_format="tileir_bytecode", bytecode_version=version
        )
    finally:
        cutile_compile.dev_features_enabled = saved
    return buf.getvalue()
