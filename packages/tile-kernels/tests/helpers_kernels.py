"""Inputs and error bounds for the tile-kernels tests.

Inputs are drawn in float32 and rounded to the dtype under test; references are computed in float64 from the rounded
values, so input rounding is not an error. Bounds follow the standard rounding-error analysis: a dot product of
length K accumulated in f32 is within ``K * u32 * (|a| @ |b|)`` of the exact one, every f32 operation after it adds
about ``u32`` relative error, the final cast adds ``u_out * |ref|``. Constants are small integers on top of those.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

import tile.frontend as tile

NP_DTYPES: dict[str, Any] = {
    "f16": np.float16,
    "bf16": ml_dtypes.bfloat16,
    "f32": np.float32,
    "f8e4m3fn": ml_dtypes.float8_e4m3fn,
    "f8e5m2": ml_dtypes.float8_e5m2,
}
# Unit roundoff (half an ulp at 1) of each format.
UNIT = {"f16": 2.0**-11, "bf16": 2.0**-8, "f32": 2.0**-24, "f8e4m3fn": 2.0**-4, "f8e5m2": 2.0**-3}
U32 = UNIT["f32"]
# Half the spacing of each format's subnormals: the absolute error of a cast below the normal range.
TINY = {"f16": 2.0**-25, "bf16": 2.0**-134, "f32": 2.0**-150, "f8e4m3fn": 2.0**-10, "f8e5m2": 2.0**-17}
# GPU matrix units may multiply f32 operands as tf32 (10-bit mantissa), and Hopper's f8 MMA accumulates with about
# 14 mantissa bits; f16/bf16 MMA accumulates in f32 but may truncate instead of round (twice the unit).
U_TF32 = 2.0**-11
U_F8_ACC = 2.0**-13


def array(rng: np.random.Generator, dtype: str, shape: tuple[int, ...], scale: float = 1.0) -> np.ndarray[Any, Any]:
    """Normal values times ``scale``, rounded to ``dtype`` (as a numpy array of that dtype)."""
    return (rng.standard_normal(shape).astype(np.float32) * scale).astype(NP_DTYPES[dtype])


def tensor(values: np.ndarray[Any, Any]) -> tile.Tensor:
    """A Tile tensor holding a copy of ``values``."""
    return tile.from_numpy(np.ascontiguousarray(values))


def f64(values: Any) -> np.ndarray[Any, Any]:
    """``values`` as a float64 array (a copy)."""
    return np.array(values, dtype=np.float64)


def gemm_bound(
    a: np.ndarray[Any, Any], b: np.ndarray[Any, Any], k: int, in_dtype: str, *, gpu: bool = False
) -> np.ndarray[Any, Any]:
    """Elementwise bound on ``|computed - exact|`` of an f32-accumulated ``a @ b`` before the epilogue."""
    acc, product = U32, 0.0
    if gpu:
        acc = U_F8_ACC if in_dtype.startswith("f8") else 2 * U32
        product = U_TF32 if in_dtype == "f32" else 0.0
    return f64(((k + 2) * acc + product) * (np.abs(f64(a)) @ np.abs(f64(b))))


def cast_error(out: str, ref: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Bound on the error of rounding ``ref`` to the output format ``out``."""
    return f64(UNIT[out] * np.abs(ref) + TINY[out])


def assert_within(out: np.ndarray[Any, Any], ref: np.ndarray[Any, Any], bound: np.ndarray[Any, Any] | float) -> None:
    """Every element of ``out`` lies within ``bound`` of ``ref`` (a tiny absolute floor covers exact zeros)."""
    err = np.abs(f64(out) - ref)
    limit = np.broadcast_to(np.asarray(bound, dtype=np.float64), err.shape) + 1e-30
    worst = np.unravel_index(np.argmax(err / limit), err.shape)
    assert np.all(err <= limit), (
        f"max error/bound {float(err[worst] / limit[worst]):.3g} at {worst}: got {out[worst]}, want {ref[worst]}"
    )


def act_ref(x: np.ndarray[Any, Any], name: str | None) -> np.ndarray[Any, Any]:
    """The activations in float64 (exact erf through math.erf)."""
    import math

    if name is None:
        return x
    if name == "relu":
        return f64(np.maximum(x, 0.0))
    if name == "silu":
        return f64(x / (1.0 + np.exp(-x)))
    if name == "gelu":
        return f64(0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0))))
    if name == "gelu_tanh":
        return f64(0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3))))
    raise ValueError(name)


def lowered_sm90(kernel: Any, spec: Any) -> Any:
    """The Tile IR module ``kernel`` (a tile.kernels entry) lowers to for ``spec`` on sm_90, without tileiras."""
    from tile.compiler import Target
    from tile.compiler._lower import lower
    from tile.compiler._parse import parse
    from tile.compiler._resolve import resolve
    from tile.compiler._typecheck import typecheck

    target = Target("sm_90")
    return lower(typecheck(resolve(parse(kernel.fn)), spec, target), target).module


def lowered_op_names(kernel: Any, spec: Any) -> set[str]:
    """The names of every op in `lowered_sm90`'s module (``int_to_ptr`` / ``assert``: an index checked inside)."""
    return {op.name for fn in lowered_sm90(kernel, spec).functions for op in fn.walk()}


def entries(stems: Any) -> dict[tuple[str, str], Any]:
    """Every ``@tile.entry`` kernel of the given ``.tilepy`` stems, keyed ``(stem, name)``."""
    from tile.kernels._source import kernels

    return {
        (stem, name): value
        for stem in stems
        for name, value in vars(kernels(stem)).items()
        if hasattr(value, "unchecked") and hasattr(value, "fn")
    }
