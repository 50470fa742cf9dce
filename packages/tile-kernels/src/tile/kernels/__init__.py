"""tile-kernels: a library of safe, tuned Tile kernels with a plain Python API.

``import tile.kernels as tk``; every function takes Tile tensors (or torch/cupy/numpy arrays, borrowed zero-copy
through DLPack), waits for its work and returns a new Tile tensor (or writes ``out=``, which is moved in: use the
returned tensor). Inputs are borrowed, so the caller's handles stay usable. Nothing here is ``unchecked``: every
kernel keeps Tile's safety contract (disjoint output tiles, bounds-checked or padded accesses).

Chains: `matmul_op`, `rmsnorm_op` and `add_rmsnorm_op` return the op instead of waiting (a ``tile.aio.DeviceOp``
whose output's first element is the output partition), so a model step composes as one ``.then()`` chain and can be
captured as a graph; their activation inputs may be tensors in flight (``out[0].unpartition()`` of the previous
launch).

Matmul family: `matmul` (persistent grouped GEMM, fused bias / activation / residual / cast epilogue; for decode sizes
M <= 16 one-kernel GEMV forms with narrow output tiles raced against skinny and split-K tiles), `bmm` (batched). Row
kernels over the last dim, any row length (short rows whole in registers, several per block; long rows in chunks):
`softmax`, `log_softmax`, `rmsnorm`, `layernorm`, `add_rmsnorm` (fused residual add), `rmsnorm_heads` (per head,
Qwen3's q/k norm). Attention: `attention` (FMHA prefill, GQA, causal or not), `decode_attention` (flash-decoding over
a KV cache), `append_kv`. Elementwise and selection: `rope`, `swiglu`, `swiglu_fused`, `embedding`, `argmax`,
`top_k`, `sample`. Most have ``*_op`` forms for chains. `autotune`: the config tuner and its on-disk records.
``from tile.kernels import bench``: the benchmark harness (CUDA-event timing with the L2 flushed, interleaved shuffled
rounds against peers, JSON, SVG plots); a subpackage, not imported by ``import tile.kernels``. Errors
are `tile.frontend`'s (`ArgumentError`, `BackendError`; this package defines none of its own): ``except
tk.TileError`` (the one root, `tile.errors.TileError`, re-exported here) catches them all.
"""

from __future__ import annotations

from tile.frontend import TileError
from tile.kernels import autotune
from tile.kernels._addnorm import add_rmsnorm, add_rmsnorm_op, rmsnorm_op
from tile.kernels._attention import HEAD_DIMS, attention, attention_op
from tile.kernels._decode import append_kv, append_kv_op, decode_attention, decode_attention_op
from tile.kernels._elementwise import (
    MAX_TOP_K,
    argmax,
    argmax_op,
    embedding,
    embedding_op,
    rope,
    rope_op,
    sample,
    sample_op,
    swiglu,
    swiglu_fused,
    swiglu_fused_op,
    swiglu_op,
    top_k,
)
from tile.kernels._gemm import ACTIVATIONS, bmm, matmul, matmul_op
from tile.kernels._rows import layernorm, log_softmax, rmsnorm, rmsnorm_heads, softmax
from tile.kernels.autotune import Config

__all__ = [
    "ACTIVATIONS",
    "HEAD_DIMS",
    "MAX_TOP_K",
    "Config",
    "TileError",
    "add_rmsnorm",
    "add_rmsnorm_op",
    "append_kv",
    "append_kv_op",
    "argmax",
    "argmax_op",
    "attention",
    "attention_op",
    "autotune",
    "bmm",
    "decode_attention",
    "decode_attention_op",
    "embedding",
    "embedding_op",
    "layernorm",
    "log_softmax",
    "matmul",
    "matmul_op",
    "rmsnorm",
    "rmsnorm_heads",
    "rmsnorm_op",
    "rope",
    "rope_op",
    "sample",
    "sample_op",
    "softmax",
    "swiglu",
    "swiglu_fused",
    "swiglu_fused_op",
    "swiglu_op",
    "top_k",
]
