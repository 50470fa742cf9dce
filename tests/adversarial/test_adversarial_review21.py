"""Review 21: an adversarial look, from safe code only, at tile.kernels' newer public APIs on the CPU interpreter
(``matmul_op``'s ``norm=``/``swiglu=`` fusions and split-K, Qwen3's ``prep_qkv`` in its decode and multi-token forms,
decode attention, ``append_kv``) and tile.frontend.distributed's ownership rules. Each hole's test names it and
failed before its fix.

Holes found and fixed:

- ``prep_qkv`` bounded the cache position by the key cache alone: a value cache shorter than the key cache faulted
  inside the kernel after the key rows were written (decode), or, in a multi-token pass, silently dropped the values
  that landed past its end; a ``sin`` table shorter than ``cos`` reached the kernel (its grid check fired, naming a
  kernel line); wrong ranks, a numpy cache or a non-real ``eps`` raised untyped ``ValueError``; ``heads=0`` got a
  partition error. All are refused with `ArgumentError` before anything is partitioned.
- ``matmul_op(a, b, norm=g, out=o)`` above ``MAX_M`` rows (rmsnorm launch, then the GEMM chained) partitioned ``o``
  only when the chain reached the GEMM: after the op was made the caller could still read ``o``, lend it to another
  launch or pass it as that op's own input, unlike every other form (``o`` is the op's once it is made). It is held
  from the op's making now (a refused call gives it back).

Tried and found solid: ``prep_qkv`` with the same tensor as both caches or ``pos``/``qkv`` viewing a cache (moved /
borrow errors), numpy ``tokens``/``start``, a bool ``start``, ``group``/``occupancy`` (review 18); decode attention
with lengths past the cache, a NaN scale, ``splits=True``, an f32 lengths tensor, ``plus=2**31 - 1`` (clamped in the
kernel); ``append_kv`` with positions past the end (host and kernel checks), the same cache twice, new rows viewing
the cache; fused matmul with ``out=a``, ``norm`` viewing ``out``, a wrong SwiGLU ``out`` shape, split-K configs with
SPLIT above the K tiles or BK above K (correct results). Noted, not a safety hole: ``eps`` NaN or negative is taken
by every RMSNorm of the library (a NaN result, no access outside); a bool inside a lengths list is read as 0/1.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tile.frontend as tile
import tile.kernels as tk
from tile.kernels.qwen3 import _ops


def _tables(rows: int, half: int) -> tuple[tile.Tensor, tile.Tensor]:
    angles = np.arange(rows)[:, None] * np.ones(half)[None, :] * 0.1
    return tile.from_numpy(np.cos(angles).astype(np.float32)), tile.from_numpy(np.sin(angles).astype(np.float32))


def _prep(k_cache: Any, v_cache: Any, *, n: int, p: int, tokens: int | None = None, **kw: Any) -> Any:
    cos, sin = kw.pop("tables", _tables(8, 8))
    w = tile.ones(tile.bf16, [1, 16])
    qkv = tile.zeros(tile.bf16, [n, 128])
    pos = tile.from_numpy(np.array([p], np.int32))
    start = None if tokens is None else p
    args = {"heads": 4, "cos": cos, "sin": sin, "pos": pos, "eps": 1e-6, "tokens": tokens, "start": start} | kw
    return _ops.prep_qkv(k_cache, v_cache, qkv, w, w, **args)


# -- hole: prep_qkv took a value cache of another shape ----------------------------------------------------------


@pytest.mark.parametrize(("n", "p", "tokens"), [(1, 6, None), (2, 5, None), (4, 4, 2)])
def test_prep_qkv_refuses_a_value_cache_shorter_than_the_key_cache(n: int, p: int, tokens: int | None) -> None:
    """Hole: the kernels bound the position by the key cache: decode wrote the keys, then faulted on the values; a
    multi-token pass wrote no value past the short cache's end and reported success. Refused on the host now, and
    the caches stay the caller's."""
    kc, vc = tile.zeros(tile.bf16, [2, 8, 16]), tile.zeros(tile.bf16, [2, 4, 16])
    with pytest.raises(tile.ArgumentError, match=r"pass two caches of one shape and dtype"):
        _prep(kc, vc, n=n, p=p, tokens=tokens)
    assert not kc.to_numpy().any()  # nothing written, both handles usable
    assert not vc.to_numpy().any()


def test_prep_qkv_refuses_caches_of_two_dtypes() -> None:
    with pytest.raises(tile.ArgumentError, match=r"pass two caches of one shape and dtype"):
        _prep(tile.zeros(tile.bf16, [2, 8, 16]), tile.zeros(tile.f16, [2, 8, 16]), n=1, p=0)


def test_prep_qkv_refuses_a_sin_table_shorter_than_cos() -> None:
    """Hole: the multi-token pass sliced both tables at its start but checked only cos's length."""
    cos, _ = _tables(8, 8)
    _, sin = _tables(4, 8)
    caches = tile.zeros(tile.bf16, [2, 8, 16]), tile.zeros(tile.bf16, [2, 8, 16])
    with pytest.raises(tile.ArgumentError, match=r"sin is \[4, 8\] but cos is \[8, 8\]"):
        _prep(*caches, n=4, p=4, tokens=2, tables=(cos, sin))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"heads": 0}, r"heads=0; pass the model's number of query heads"),
        ({"heads": True}, r"heads must be an integer, got bool"),
        ({"eps": "tiny"}, r"eps must be a real number, got str"),
    ],
)
def test_prep_qkv_refuses_bad_scalars_with_a_typed_error(change: dict[str, Any], message: str) -> None:
    caches = tile.zeros(tile.bf16, [2, 8, 16]), tile.zeros(tile.bf16, [2, 8, 16])
    with pytest.raises(tile.ArgumentError, match=message):
        _prep(*caches, n=1, p=0, **change)


@pytest.mark.parametrize("cache", ["2-D", "numpy"])
def test_prep_qkv_refuses_caches_that_are_not_3d_tile_tensors(cache: str) -> None:
    """Hole: ``kv, s, hd = k_cache.shape`` raised ValueError (or numpy's own error deep inside)."""
    value: Any = tile.zeros(tile.bf16, [8, 16]) if cache == "2-D" else np.zeros((2, 8, 16), np.float32)
    with pytest.raises(tile.ArgumentError, match=r"k_cache must be a 3-D Tile tensor"):
        _prep(value, tile.zeros(tile.bf16, [2, 8, 16]), n=1, p=0)


# -- hole: the fused matmul above MAX_M rows left out= with the caller until the GEMM ran -------------------------


def _rms(x: np.ndarray[Any, Any], g: np.ndarray[Any, Any], eps: float = 1e-6) -> np.ndarray[Any, Any]:
    return np.asarray(x / np.sqrt((x * x).mean(axis=1, keepdims=True) + eps) * g)


def test_a_fused_matmul_op_over_max_m_owns_its_out_from_its_making() -> None:
    """Hole: ``o`` stayed live until the chain reached the GEMM: the caller could read it, or pass it to another
    launch, while the op that writes it existed (every other form moves it when the op is made)."""
    rng = np.random.default_rng(21)
    a_np, b_np = rng.standard_normal((32, 64)).astype(np.float32), rng.standard_normal((64, 32)).astype(np.float32)
    g_np = rng.standard_normal(64).astype(np.float32)
    o = tile.zeros(tile.f32, [32, 32])
    made = tk.matmul_op(tile.from_numpy(a_np), tile.from_numpy(b_np), norm=tile.from_numpy(g_np), out=o)
    with pytest.raises(tile.MovedError, match=r"was moved into \.partition\(\)"):
        o.to_numpy()
    with pytest.raises(tile.MovedError, match=r"was moved into \.partition\(\)"):
        tk.matmul(o, tile.from_numpy(np.ones((32, 8), np.float32)))
    result = made.sync()[0].unpartition().to_numpy()
    np.testing.assert_allclose(result, _rms(a_np, g_np) @ b_np, rtol=1e-4, atol=1e-4)


def test_a_fused_matmul_op_over_max_m_refuses_out_equal_to_a_when_made() -> None:
    """With ``out=a`` the partition is refused when the op is made (before: when the chain ran, after the norm had
    run), and ``a`` stays the caller's."""
    a = tile.from_numpy(np.ones((32, 32), np.float32))
    b, g = tile.from_numpy(np.ones((32, 32), np.float32)), tile.from_numpy(np.ones(32, np.float32))
    with pytest.raises(tile.BorrowError, match=r"that needs exclusive memory"):
        tk.matmul_op(a, b, norm=g, out=a)
    assert a.to_numpy().sum() == 32 * 32


def test_a_refused_fused_matmul_op_over_max_m_gives_out_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """The out= held from the op's making comes back to the caller when the chain's first launch (the rmsnorm) is
    refused (simulated: no argument that `matmul_op` takes gets past its own checks and is refused there)."""
    from tile.kernels import _addnorm

    def refused(*_: object, **__: object) -> None:
        raise tile.ArgumentError("rmsnorm_op: refused")

    monkeypatch.setattr(_addnorm, "rmsnorm_op", refused)
    o = tile.zeros(tile.f32, [32, 32])
    a, b = tile.from_numpy(np.ones((32, 32), np.float32)), tile.from_numpy(np.ones((32, 32), np.float32))
    with pytest.raises(tile.ArgumentError, match=r"rmsnorm_op: refused"):
        tk.matmul_op(a, b, norm=tile.ones(tile.f32, [32]), out=o)
    assert not o.moved
    assert o.to_numpy().sum() == 0


@pytest.mark.parametrize("src", [True, 0.0, "0", None])
def test_broadcast_refuses_a_src_that_is_not_an_int(src: Any) -> None:
    """``src=True`` or ``0.0`` passed the rank range check and went to torch; ``"0"`` raised a bare TypeError. The
    refusal comes first (no torch needed) and the tensor stays the caller's."""
    import tile.frontend.distributed as dist

    t = tile.zeros(tile.f32, [4])
    with pytest.raises(tile.ArgumentError, match=r"broadcast: src must be a rank \(an int\)"):
        dist.broadcast(t, src=src)
    assert not t.moved
