# ruff: noqa: N803, PLR0917  # Triton's conventions: compile-time parameters in capitals, kernels take their pointers positionally
"""Triton's one-program-per-row kernels of the row algorithms Tile's row kernels compute, the peer of
``bench_rows.py`` (imported only when ``import triton`` works).

Each is the plain form of Triton's tutorials (``02-fused-softmax``, ``05-layer-norm``) and of Liger's kernels: one
program per row, the whole row in registers (``BLOCK`` = the row length rounded up to a power of two, masked loads
and stores), f32 math, the warp count from the row length (4 up to 2048 columns, 8 up to 8192, 16 above, as the
softmax tutorial picks). Per-head rmsnorm runs one program per row of ``heads * D`` with the row reshaped to
``(heads, D)``. Every ``launch_*`` takes torch tensors and writes ``out`` (and ``summed``) in place.
"""

from __future__ import annotations

from typing import Any

import triton
import triton.language as tl


def _warps(block: int) -> int:
    return 4 if block <= 2048 else 8 if block <= 8192 else 16


@triton.jit
def _softmax(z, x, stride_z, stride_x, N, BLOCK: tl.constexpr, LOG: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    t = tl.load(x + row * stride_x + cols, mask=cols < N, other=-float("inf")).to(tl.float32)
    shifted = t - tl.max(t, axis=0)
    e = tl.exp(shifted)
    total = tl.sum(e, axis=0)
    if LOG:
        tl.store(z + row * stride_z + cols, (shifted - tl.log(total)).to(z.dtype.element_ty), mask=cols < N)
    else:
        tl.store(z + row * stride_z + cols, (e / total).to(z.dtype.element_ty), mask=cols < N)


@triton.jit
def _rmsnorm(z, x, w, stride_z, stride_x, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    t = tl.load(x + row * stride_x + cols, mask=cols < N, other=0.0).to(tl.float32)
    g = tl.load(w + cols, mask=cols < N, other=0.0).to(tl.float32)
    y = t * tl.rsqrt(tl.sum(t * t, axis=0) / N + eps) * g
    tl.store(z + row * stride_z + cols, y.to(z.dtype.element_ty), mask=cols < N)


@triton.jit
def _add_rmsnorm(z, s, x, r, w, stride, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    a = tl.load(x + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(r + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    t = (a + b).to(s.dtype.element_ty)
    tl.store(s + row * stride + cols, t, mask=mask)
    tf = t.to(tl.float32)
    g = tl.load(w + cols, mask=mask, other=0.0).to(tl.float32)
    y = tf * tl.rsqrt(tl.sum(tf * tf, axis=0) / N + eps) * g
    tl.store(z + row * stride + cols, y.to(z.dtype.element_ty), mask=mask)


@triton.jit
def _layernorm(z, x, w, b, stride_z, stride_x, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    t = tl.load(x + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(t, axis=0) / N
    d = tl.where(mask, t - mean, 0.0)
    y = d * tl.rsqrt(tl.sum(d * d, axis=0) / N + eps)
    y = y * tl.load(w + cols, mask=mask, other=0.0).to(tl.float32) + tl.load(b + cols, mask=mask).to(tl.float32)
    tl.store(z + row * stride_z + cols, y.to(z.dtype.element_ty), mask=mask)


@triton.jit
def _rmsnorm_heads(z, x, w, stride_z, stride_x, eps, H: tl.constexpr, D: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, H)[:, None] * D + tl.arange(0, D)[None, :]
    t = tl.load(x + row * stride_x + offs).to(tl.float32)
    g = tl.load(w + tl.arange(0, D)).to(tl.float32)[None, :]
    y = t * tl.rsqrt(tl.sum(t * t, axis=1, keep_dims=True) / D + eps) * g
    tl.store(z + row * stride_z + offs, y.to(z.dtype.element_ty))


def launch(name: str, out: Any, x: Any, *, w: Any = None, b: Any = None, r: Any = None, summed: Any = None) -> None:
    """Run the Triton kernel ``name`` (``softmax``, ``log_softmax``, ``rmsnorm``, ``layernorm``, ``add_rmsnorm``,
    ``rmsnorm_heads``) over the rows of the 2-D torch tensor ``x`` (last stride 1) into ``out``."""
    m, n = x.shape
    block = triton.next_power_of_2(n)
    opts = {"num_warps": _warps(block)}
    if name in ("softmax", "log_softmax"):
        _softmax[(m,)](out, x, out.stride(0), x.stride(0), n, BLOCK=block, LOG=name == "log_softmax", **opts)
    elif name == "rmsnorm":
        _rmsnorm[(m,)](out, x, w, out.stride(0), x.stride(0), n, 1e-6, BLOCK=block, **opts)
    elif name == "add_rmsnorm":
        _add_rmsnorm[(m,)](out, summed, x, r, w, x.stride(0), n, 1e-6, BLOCK=block, **opts)
    elif name == "layernorm":
        _layernorm[(m,)](out, x, w, b, out.stride(0), x.stride(0), n, 1e-5, BLOCK=block, **opts)
    elif name == "rmsnorm_heads":
        d = w.shape[0]
        _rmsnorm_heads[(m,)](out, x, w, out.stride(0), x.stride(0), 1e-6, H=n // d, D=d, **opts)
    else:
        raise ValueError(name)
