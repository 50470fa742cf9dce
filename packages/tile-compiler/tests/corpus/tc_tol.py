"""How close a corpus kernel's output must be to its numpy reference: derived from dtypes and reduction length.

One rule, for the CPU interpreter tier and the GPU tier alike. The reference is computed in float64 from the very
inputs the kernel reads, so what separates them is the kernel's own rounding:

* the last rounding, to the output dtype: relative error ``u(out)``;
* a reduction of length ``k`` carried in an accumulator ``acc``: each step rounds the running sum, whose size is
  that of the result, and the rounding errors add up like a random walk, ``sqrt(k) * u(acc) * |result|``;
* a rounding of operands the reference keeps exact (``rounded``: tf32 operands of a GEMM, attention's P cast to
  f16, the ``approx`` transcendentals of the GPU): ``u(rounded) * |result|``.

With ``|result|`` taken as the root mean square of the reference (``scale``) and a safety factor ``C``::

    rtol = C * u(out)
    atol = C * scale * (u(out) + sqrt(k) * u(acc) + u(rounded))

``u`` is the unit roundoff (half the machine epsilon); integer outputs have ``u = 0`` and must match exactly.
`C` = 16 leaves room for the worst of the thousands of elements compared and for the GPU's tensor cores, which
align and add their products in hardware order (fp8 GEMMs on Hopper keep about 14 bits of the sum, hence the
``fp8_mma`` accumulator). These bounds catch what looser fixed tolerances let through: a GEMM accumulating in
f16 instead of f32, or any output scaled by 2% (10% in attention) — `test_compiler_corpus_tol.py` shows both.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import ml_dtypes
import numpy as np

__all__ = ["SAFETY", "Tol", "unit_roundoff"]

SAFETY = 16.0
"""The factor ``C`` above."""

_NAMED = {
    "tf32": 2.0**-11,  # 10 explicit mantissa bits
    "fp8_mma": 2.0**-14,  # Hopper's fp8 tensor-core accumulator keeps ~14 bits (DeepSeek-V3 report, §3.3.2)
    "approx": 2.0**-21,  # PTX sin/cos/ex2/lg2 .approx.f32: about 2**-21 (absolute for sin/cos, relative otherwise)
}


def unit_roundoff(dtype: str | np.dtype[np.generic] | type) -> float:
    """Half the machine epsilon of a float dtype (or a name of `_NAMED`); 0 for integers and booleans."""
    if isinstance(dtype, str) and dtype in _NAMED:
        return _NAMED[dtype]
    kind = np.dtype(dtype)
    if kind.kind in "iub":
        return 0.0
    return float(ml_dtypes.finfo(kind).eps) / 2  # type: ignore[no-untyped-call]  # finfo is unannotated there


@dataclass(frozen=True)
class Tol:
    """The rounding a corpus kernel does that its reference does not (see the module docstring)."""

    acc: str = "float32"
    k: int = 1
    rounded: str | None = None
    exact: bool = False  # bit-exact: the reference models every rounding (flush-to-zero of subnormals, say)

    def bounds(self, got: np.ndarray, want: np.ndarray) -> tuple[float, float]:
        """(rtol, atol) for comparing the kernel's output `got` with the reference `want`."""
        out = unit_roundoff(got.dtype)
        if out == 0.0 or self.exact:
            return 0.0, 0.0
        finite = np.asarray(want, dtype=np.float64)
        finite = finite[np.isfinite(finite)]
        scale = float(np.sqrt(np.mean(finite**2))) if finite.size else 0.0
        acc = math.sqrt(self.k) * unit_roundoff(self.acc)
        extra = unit_roundoff(self.rounded) if self.rounded else 0.0
        return SAFETY * out, SAFETY * scale * (out + acc + extra)

    def assert_close(self, got: np.ndarray, want: np.ndarray, what: str) -> None:
        """Compare in float64 within `bounds` (NaN matches NaN), naming `what` on failure."""
        rtol, atol = self.bounds(got, want)
        np.testing.assert_allclose(
            got.astype("float64"),
            np.asarray(want).astype("float64"),
            rtol=rtol,
            atol=atol,
            equal_nan=True,
            err_msg=f"{what} (tolerance {self}: rtol={rtol:.3g}, atol={atol:.3g})",
        )
