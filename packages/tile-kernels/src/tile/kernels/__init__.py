"""tile-kernels: a library of safe, tuned Tile kernels with a plain Python API.

``import tile.kernels as tk``; every function takes Tile tensors (or torch/cupy/numpy arrays, borrowed zero-copy
through DLPack), waits for its work and returns a new Tile tensor (or writes ``out=``, which is moved in: use the
returned tensor). Inputs are borrowed, so the caller's handles stay usable. Nothing here is ``unchecked``: every
kernel keeps Tile's safety contract (disjoint output tiles, bounds-checked or padded accesses).

Matmul family: `matmul` (persistent grouped GEMM, fused bias / activation / residual / cast epilogue, split-K for
decode sizes M <= 16), `bmm` (batched). Row kernels (whole row in one tile, over the last dim): `softmax`,
`rmsnorm`, `layernorm`. `autotune`: the config tuner and its on-disk records. Errors are `tile.frontend`'s
(`ArgumentError`, `BackendError`; this package defines none of its own): ``except tk.TileError`` (the one root,
`tile.errors.TileError`, re-exported here) catches them all.
"""

from __future__ import annotations

from tile.frontend import TileError
from tile.kernels import autotune
from tile.kernels._gemm import ACTIVATIONS, bmm, matmul
from tile.kernels._rows import MAX_ROW, layernorm, log_softmax, rmsnorm, softmax
from tile.kernels.autotune import Config

__all__ = [
    "ACTIVATIONS",
    "MAX_ROW",
    "Config",
    "TileError",
    "autotune",
    "bmm",
    "layernorm",
    "log_softmax",
    "matmul",
    "rmsnorm",
    "softmax",
]
