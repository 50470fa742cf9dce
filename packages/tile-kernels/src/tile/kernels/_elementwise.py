"""Elementwise and selection kernels' Python API: `rope`, `swiglu`, `swiglu_fused`, `embedding`, `argmax`, `top_k`,
`sample`, and the ``*_op`` forms for chains. Kernels are in ``_elementwise_kernels.tilepy``.

Each plain function borrows its inputs, waits for its work and returns a new tensor; each ``*_op`` returns the launch
(its first output is the output partition) and takes tensors in flight for its activation input. Math is f32 inside
every kernel; outputs are in the input's dtype.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

import tile.frontend as tile
from tile.aio import DeviceOp
from tile.frontend import ArgumentError, Tensor, f32, i32
from tile.kernels import _args
from tile.kernels._source import kernels

__all__ = [
    "argmax",
    "argmax_op",
    "embedding",
    "embedding_op",
    "rope",
    "rope_op",
    "sample",
    "sample_op",
    "swiglu",
    "swiglu_fused",
    "swiglu_fused_op",
    "swiglu_op",
    "top_k",
]

_STEM = "_elementwise_kernels"
_IDS = ("i32", "i64")
MAX_TOP_K = 1024
MAX_TEMPERATURE = 1e30
"""The temperature `sample` runs at for any larger one (both are uniform draws for logits below 1e28)."""
Op = DeviceOp[tuple[Any, ...]]


def _nothing(op: str, dtype: tile.DType, shape: Sequence[int], plain: bool) -> Tensor | None:
    """None when a ``shape`` result has elements. Without any, there is no launch: a plain form's result is a new
    empty tensor (as `tk.matmul`'s), an ``*_op`` form is refused (it has no launch to return, as `tk.matmul_op`)."""
    if math.prod(shape):
        return None
    if not plain:
        raise ArgumentError(f"{op}: the result {list(shape)} is empty; there is nothing to launch")
    return tile.empty(dtype, list(shape))


def _wait(made: Op | Tensor) -> Tensor:
    """A plain form's result: the op's first output once it ran, or `_nothing`'s empty tensor."""
    return made if isinstance(made, Tensor) else _args.first_output(made.sync())


def _launched(made: Op | Tensor) -> Op:
    """An ``*_op`` form's op (`_nothing` raised instead of handing it a tensor)."""
    assert not isinstance(made, Tensor)
    return made


def _index_tensor(value: object, name: str, op: str, inflight: bool) -> tuple[Tensor, np.ndarray[Any, Any] | None]:
    """An integer index tensor (ints, a numpy array, or a tensor) and its values when they can be read here."""
    if isinstance(value, Tensor) and value.in_flight:
        if not inflight:
            raise ArgumentError(f"{op}: {name} is in flight; use the _op form inside a chain")
        t, host = value, None
    elif isinstance(value, (Sequence, np.ndarray)) and not isinstance(value, Tensor):
        host = np.asarray(value)
        if host.dtype.kind not in "iu" and host.size:
            raise ArgumentError(f"{op}: {name} must be integers, got dtype {host.dtype}")
        t = tile.from_numpy(_narrowest(host, name, op))
    else:
        t = _args.as_input(value, name, op)
        host = None if inflight else np.asarray(t.to_numpy())
    if t.dtype.name not in _IDS:
        raise ArgumentError(f"{op}: {name} has dtype {t.dtype.name}; pass i32 or i64 indices")
    return t, host


def _narrowest(host: np.ndarray[Any, Any], name: str, op: str) -> np.ndarray[Any, Any]:
    """Host indices as i32, or i64 when one is outside i32 (a cast to i32 wrapped ``2**32 + 5`` to 5: rope rotated
    that row by another angle without an error); one outside i64 too (a u64 past it) is refused."""
    for dtype in (np.int32, np.int64):
        info = np.iinfo(dtype)
        if not host.size or (int(host.min()) >= info.min and int(host.max()) <= info.max):
            return host.astype(dtype)
    bad = int(host.max()) if int(host.max()) > np.iinfo(np.int64).max else int(host.min())
    raise ArgumentError(f"{op}: {name} holds {bad}, outside the i64 range of indices")


# -- RoPE ------------------------------------------------------------------------------------------------------------


def rope(x: object, positions: object, *, theta: float, head_dim: int) -> Tensor:
    """Rotary position embedding, neox style (the first half of each head rotated with the second).

    Parameters
    ----------
    x
        ``(T, H * head_dim)`` rows or ``(T, H, head_dim)``; f16, bf16 or f32.
    positions
        ``(T,)`` integer positions (ints or an i32/i64 tensor).
    theta
        The RoPE base (Qwen3: 1e6).
    head_dim
        Even, a power of two from 2 to 1024.

    Returns
    -------
    Tensor
        ``x`` rotated, of its shape and dtype: ``[a, b] -> [a cos - b sin, b cos + a sin]`` at angles
        ``p * theta ** (-2i / head_dim)`` (f32).
    """
    op = "rope"
    head_dim = _args.integer(head_dim, "head_dim", op)  # read once: a numpy int works, a float or a bool is refused
    t = _args.as_input(x, "x", op)
    shape = tuple(t.shape)
    rows = _rope_rows(t, head_dim, op)
    pos, _ = _index_tensor(positions, "positions", op, False)
    return _wait(_rope(op, rows, pos, theta, head_dim, plain=True)).reshape(*shape)


def rope_op(x: object, positions: object, *, theta: float, head_dim: int) -> Op:
    """`rope` as an op: ``x`` as ``(T, H * head_dim)`` rows (may be in flight), positions as in `rope` (may be in
    flight); the op's output ``[0]`` is the rotated rows' partition."""
    op = "rope_op"
    head_dim = _args.integer(head_dim, "head_dim", op)
    t = _args.operand(x, "x", op)
    pos, _ = _index_tensor(positions, "positions", op, True)
    return _launched(_rope(op, _rope_rows(t, head_dim, op), pos, theta, head_dim, plain=False))


def _rope_rows(t: Tensor, head_dim: int, op: str) -> Tensor:
    _args.check_dtype(t, "x", op, _args.FLOATS)
    if head_dim < 2 or head_dim > 1024 or head_dim & (head_dim - 1):
        raise ArgumentError(f"{op}: head_dim {head_dim} must be a power of two from 2 to 1024")
    if t.ndim == 3 and t.shape[2] == head_dim and not t.in_flight and t.is_contiguous:
        return t.reshape(t.shape[0], t.shape[1] * head_dim)
    if t.ndim != 2 or t.shape[1] % head_dim:
        raise ArgumentError(
            f"{op}: x has shape {list(t.shape)}; pass contiguous (T, H, {head_dim}) or rows (T, H * {head_dim})"
        )
    return t


def _rope(op: str, rows: Tensor, pos: Tensor, theta: float, head_dim: int, *, plain: bool) -> Op | Tensor:
    if tuple(pos.shape) != (rows.shape[0],):
        raise ArgumentError(f"{op}: positions has shape {list(pos.shape)}, expected [{rows.shape[0]}] (one per row)")
    theta = _args.real(theta, "theta", op)
    if not theta > 1.0 or not math.isfinite(theta):
        raise ArgumentError(f"{op}: theta {theta} must be a finite number > 1")
    if (empty := _nothing(op, rows.dtype, rows.shape, plain)) is not None:
        return empty
    z = tile.empty(rows.dtype, list(rows.shape)).partition([1, head_dim])
    made: Op = kernels(_STEM).rope(z, rows, pos, math.log2(theta), HALF=head_dim // 2)
    return made


# -- SwiGLU ----------------------------------------------------------------------------------------------------------


def _tiles(n: int) -> tuple[int, int]:
    """(BM, BN) of an elementwise launch over rows of ``n`` columns: about 4096 elements per block."""
    bn = min(_args.next_pow2(n), 1024)
    return max(1, 4096 // bn), bn


def swiglu(gate: object, up: object) -> Tensor:
    """``silu(gate) * up`` of two ``(T, I)`` tensors (f16, bf16 or f32, one dtype), in f32; a new ``(T, I)`` tensor
    of their dtype."""
    return _wait(_swiglu("swiglu", gate, up, borrow=True))


def swiglu_op(gate: object, up: object) -> Op:
    """`swiglu` as an op (``gate`` and ``up`` may be tensors in flight); output ``[0]`` is the result partition."""
    return _launched(_swiglu("swiglu_op", gate, up, borrow=False))


def _swiglu(op: str, gate: object, up: object, *, borrow: bool) -> Op | Tensor:
    get = _args.as_input if borrow else _args.operand
    a, b = get(gate, "gate", op), get(up, "up", op)
    for t, name in ((a, "gate"), (b, "up")):
        _args.check_dtype(t, name, op, _args.FLOATS)
        _args.ensure_rank(t, name, op, 2)
    if tuple(a.shape) != tuple(b.shape) or a.dtype != b.dtype:
        raise ArgumentError(f"{op}: gate {a!r} and up {b!r} must have one shape and dtype")
    if (empty := _nothing(op, a.dtype, a.shape, borrow)) is not None:
        return empty
    bm, bn = _tiles(a.shape[1])
    z = tile.empty(a.dtype, list(a.shape)).partition([bm, bn])
    made: Op = kernels(_STEM).swiglu(z, a, b)
    return made


def swiglu_fused(gu: object) -> Tensor:
    """``silu(gate) * up`` of the fused ``(T, 2 * I)`` rows of a concatenated gate/up projection (gate first), as
    `swiglu`; a new ``(T, I)`` tensor."""
    return _wait(_swiglu_fused("swiglu_fused", gu, borrow=True))


def swiglu_fused_op(gu: object) -> Op:
    """`swiglu_fused` as an op (``gu`` may be in flight). Columns per block are the largest power of two up to 1024
    dividing ``I``, so the up half starts on a tile boundary."""
    return _launched(_swiglu_fused("swiglu_fused_op", gu, borrow=False))


def _swiglu_fused(op: str, gu: object, *, borrow: bool) -> Op | Tensor:
    t = (_args.as_input if borrow else _args.operand)(gu, "gu", op)
    _args.check_dtype(t, "gu", op, _args.FLOATS)
    _args.ensure_rank(t, "gu", op, 2)
    m, n2 = t.shape
    if n2 % 2 or n2 == 0:
        raise ArgumentError(f"{op}: gu has {n2} columns; pass the (T, 2 * I) concatenation, gate first")
    inner = n2 // 2
    if (empty := _nothing(op, t.dtype, (m, inner), borrow)) is not None:
        return empty
    bn = min(inner & -inner, 1024)
    z = tile.empty(t.dtype, [m, inner]).partition([max(1, 4096 // bn) if m > 1 else 1, bn])
    made: Op = kernels(_STEM).swiglu_fused(z, t, UP=inner // bn)
    return made


# -- embedding -------------------------------------------------------------------------------------------------------


def embedding(table: object, ids: object) -> Tensor:
    """Rows ``table[ids]``: ``table`` ``(V, H)`` (any dtype), ``ids`` ``(T,)`` integers; a new ``(T, H)``.

    Raises `ArgumentError` for an id outside ``[0, V)`` (checked here; the kernel checks every id it reads too).
    """
    return _wait(_embedding("embedding", table, ids, inflight=False))


def embedding_op(table: object, ids: object) -> Op:
    """`embedding` as an op; ``ids`` may be in flight (then not read here: an id outside the table faults in the
    kernel instead of reading other memory). Output ``[0]`` is the ``(T, H)`` partition."""
    return _launched(_embedding("embedding_op", table, ids, inflight=True))


def _embedding(op: str, table: object, ids: object, *, inflight: bool) -> Op | Tensor:
    tab = _args.as_input(table, "table", op)
    _args.ensure_rank(tab, "table", op, 2)
    idt, host = _index_tensor(ids, "ids", op, inflight)
    _args.ensure_rank(idt, "ids", op, 1)
    vocab, h = tab.shape
    if host is not None:
        bad = [int(i) for i in host.reshape(-1) if not 0 <= int(i) < vocab]
        if bad:
            raise ArgumentError(f"{op}: id {bad[0]} is outside the table's {vocab} rows")
    if (empty := _nothing(op, tab.dtype, (idt.shape[0], h), not inflight)) is not None:
        return empty
    bh = min(_args.next_pow2(h), 1024)
    z = tile.empty(tab.dtype, [idt.shape[0], h]).partition([1, bh])
    made: Op = kernels(_STEM).embed(z, tab, idt)
    return made


# -- selection -------------------------------------------------------------------------------------------------------


def _rows_in(x: object, op: str, inflight: bool) -> Tensor:
    t = (_args.operand if inflight else _args.as_input)(x, "x", op)
    _args.check_dtype(t, "x", op, _args.FLOATS)
    if t.ndim == 1 and not t.in_flight:
        t = t.reshape(1, t.shape[0])
    _args.ensure_rank(t, "x", op, 2)
    if t.shape[1] == 0 or t.shape[0] == 0:
        raise ArgumentError(f"{op}: x of shape {list(t.shape)} is empty; there is nothing to choose from")
    _check_indexable(t.shape[1], op)
    return t


MAX_INDEX = 2**31 - 1 - 4096
"""The most elements the selection kernels index: their indices are i32 (chunk padding included, up to 4096 past the
end) and ``2**31 - 1`` is their no-candidate mark."""


def _check_indexable(n: int, op: str) -> None:
    """`ArgumentError` for ``n`` elements an i32 index cannot reach (it wrapped: a wrong, negative index came back)."""
    if n > MAX_INDEX:
        raise ArgumentError(f"{op}: {n} elements to choose from; the i32 indices reach {MAX_INDEX}: split the rows")


def _chunk(n: int) -> int:
    return min(_args.next_pow2(n), 4096 if tile.backend() == "gpu" else 256)


def argmax(x: object) -> Tensor:
    """Index of the largest value of each row of ``x`` (``(R, N)`` or ``(N,)``; the first on ties); i32 ``(R,)``.

    NaN values are skipped (a row of only NaN gives 0). Two launches: every chunk of every row is reduced in parallel,
    then each row's partials."""
    return _args.first_output(_argmax(_rows_in(x, "argmax", False)).sync())


def argmax_op(x: object) -> Op:
    """`argmax` as an op (``x`` ``(R, N)``, may be in flight); output ``[0]`` is the i32 ``(R,)`` partition."""
    return _argmax(_rows_in(x, "argmax_op", True))


def _argmax(t: Tensor, *, flat: bool = False) -> Op:
    """Two launches chained: `argmax_parts` reduces each chunk of each row to its (value, first index) in parallel,
    `argmax_pick` takes each row's best partial. With ``flat`` the rows are one vector: one index into
    ``t.reshape(-1)``. The op's output is ``(z, t)``: the i32 partition, then the input handed back."""
    rows, n = t.shape
    if flat:
        _check_indexable(rows * n, "argmax_rows")  # one index into every row read as one vector
    bn = min(_args.next_pow2(n), 1024 if tile.backend() == "gpu" else 256)
    chunks = -(-n // bn)
    vals = tile.empty(f32, [rows, chunks]).partition([1, 1])
    idxs = tile.empty(i32, [rows, chunks]).partition([1, 1])
    k = kernels(_STEM)  # read now: the pick below is made later, maybe outside this call's launch_pdl block
    first: Op = k.argmax_parts(vals, idxs, t, BN=bn, FLAT=int(flat))
    bc = min(_args.next_pow2(chunks), 1024 if tile.backend() == "gpu" else 8)

    def pick(out: tuple[Any, ...]) -> Any:
        # The partials are handed on in flight: the pick runs after the first stage, with no wait between.
        z = tile.empty(i32, [1 if flat else rows]).partition([1])
        made = k.argmax_pick(z, out[0].unpartition(), out[1].unpartition(), BC=bc, FLAT=int(flat))
        return made.map(lambda res: (res[0], out[2]))

    return first.then(pick)


def top_k(x: object, k: int) -> tuple[Tensor, Tensor]:
    """The ``k`` largest values of each row of ``x`` (``(R, N)`` or ``(N,)``) and their indices, values descending
    (ties: lower index first; NaNs rank after every number, by index, as a sort that puts NaN last, so the indices are
    always distinct and inside the row); ``((R, k)`` values of x's dtype, ``(R, k)`` i32 indices). Each row costs
    ``k`` passes over it, so this is for small ``k`` (at most `MAX_TOP_K`)."""
    op = "top_k"
    k = _args.integer(k, "k", op)
    t = _rows_in(x, op, False)
    rows, n = t.shape
    if not 1 <= k <= min(n, MAX_TOP_K):
        raise ArgumentError(f"{op}: k={k} must be in [1, {min(n, MAX_TOP_K)}] for rows of {n}")
    kp = _args.next_pow2(k)
    zv = tile.empty(t.dtype, [rows, k]).partition([1, kp])
    zi = tile.empty(i32, [rows, k]).partition([1, kp])
    out = kernels(_STEM).top_k(zv, zi, t, K=k, BN=_chunk(n)).sync()
    return out[0].unpartition(), out[1].unpartition()


def sample(x: object, temperature: float, top_k: int = 0, seed: int = 0) -> Tensor:
    """One index per row of ``x`` (``(R, N)`` or ``(N,)`` logits) drawn from ``softmax(x / temperature)`` over the
    row's ``top_k`` largest values (all for 0); i32 ``(R,)``.

    ``temperature == 0`` or ``top_k == 1`` is greedy (`argmax`). Sampling is the Gumbel-max trick with noise from a
    hash of ``(seed, row, index)``: deterministic for a seed, different per seed; change the seed every step. A tiny
    temperature tends to greedy (no overflow: the noise is scaled by it, not the logits by its inverse); a row of
    nothing but NaN gives 0, as `argmax` does.
    """
    return _args.first_output(_sample("sample", x, temperature, top_k, seed, borrow=True).sync())


def sample_op(x: object, temperature: float, top_k: int = 0, seed: int = 0) -> Op:
    """`sample` as an op (``x`` ``(R, N)``, may be in flight); output ``[0]`` is the i32 ``(R,)`` partition. The
    seed is baked into the op (and into a captured graph)."""
    return _sample("sample_op", x, temperature, top_k, seed, borrow=False)


def _sample(op: str, x: object, temperature: float, top_k: int, seed: int, *, borrow: bool) -> Op:
    temperature = _args.real(temperature, "temperature", op)
    top_k, seed = _args.integer(top_k, "top_k", op), _args.integer(seed, "seed", op)
    if not temperature >= 0 or not math.isfinite(temperature) or top_k < 0:
        raise ArgumentError(f"{op}: temperature ({temperature}) must be finite and >= 0, top_k ({top_k}) >= 0")
    t = _rows_in(x, op, not borrow)
    if temperature == 0 or top_k == 1:
        return _argmax(t)
    n = t.shape[1]
    if top_k > MAX_TOP_K:
        raise ArgumentError(f"{op}: top_k={top_k} is more than {MAX_TOP_K}")
    k = min(top_k, n)
    z = tile.empty(i32, [t.shape[0]]).partition([1])
    seed32 = int(seed) % (1 << 31)
    # Above MAX_TEMPERATURE every draw is uniform for any logits below 1e28; capped, the noise times it stays finite.
    made: Op = kernels(_STEM).sample(z, t, min(temperature, MAX_TEMPERATURE), seed32, K=k, BN=_chunk(n))
    return made
