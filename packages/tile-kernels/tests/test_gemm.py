"""matmul and bmm on the CPU interpreter: numerics against float64 on edge shapes, epilogues, split-K, errors."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
import tile.frontend as tile
import tile.kernels as tk
from helpers_kernels import U32, act_ref, array, assert_within, cast_error, f64, gemm_bound, tensor
from tile.frontend import ArgumentError, OwnershipError
from tile.kernels import _gemm_configs

SMALL = tk.Config.of(BM=16, BN=16, BK=16, GROUP=2, SPLIT=1)


def _ref_bound(
    a: np.ndarray[Any, Any],
    b: np.ndarray[Any, Any],
    dtype: str,
    out: str,
    *,
    bias: np.ndarray[Any, Any] | None = None,
    act: str | None = None,
    res: np.ndarray[Any, Any] | None = None,
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    pre = f64(a) @ f64(b)
    err = gemm_bound(a, b, a.shape[-1], dtype)
    if bias is not None:
        pre = pre + f64(bias)
        err = err + U32 * np.abs(pre)
    ref = act_ref(pre, act)
    # Activations have slopes below 1.2; exp/tanh/divide add a few f32 ulps; the erf fit is within 1.5e-7.
    err = 1.2 * err + 8 * U32 * np.abs(ref) + (1.5e-7 * np.abs(pre) if act == "gelu" else 0.0)
    if res is not None:
        ref = ref + f64(res)
        err = err + U32 * np.abs(ref)
    return ref, err + cast_error(out, ref)


@pytest.mark.parametrize("dtype", ["f16", "bf16", "f32"])
@pytest.mark.parametrize(("m", "n", "k"), [(5, 7, 40), (33, 17, 9)])
def test_matmul_matches_float64_on_edge_tiles(dtype: str, m: int, n: int, k: int) -> None:
    rng = np.random.default_rng(m * n * k)
    a, b = array(rng, dtype, (m, k)), array(rng, dtype, (k, n))
    z = tk.matmul(tensor(a), tensor(b), config=SMALL)
    assert z.shape == (m, n)
    assert z.dtype.name == dtype
    assert_within(z.to_numpy(), *_ref_bound(a, b, dtype, dtype))


@pytest.mark.parametrize("act", sorted(tk.ACTIVATIONS, key=str))
def test_fused_epilogue(act: str | None) -> None:
    rng = np.random.default_rng(1)
    a, b = array(rng, "bf16", (9, 24)), array(rng, "bf16", (24, 20))
    bias, res = array(rng, "f32", (20,)), array(rng, "f16", (9, 20))
    z = tk.matmul(tensor(a), tensor(b), bias=tensor(bias), activation=act, residual=tensor(res), out_dtype=tile.f32)
    assert z.dtype == tile.f32
    ref, bound = _ref_bound(a, b, "bf16", "f32", bias=bias, act=act, res=res)
    assert_within(z.to_numpy(), ref, bound)


@pytest.mark.parametrize("out_dtype", ["f16", "bf16", "f32"])
def test_output_dtype_cast(out_dtype: str) -> None:
    rng = np.random.default_rng(2)
    a, b = array(rng, "f16", (6, 10)), array(rng, "f16", (10, 3))
    z = tk.matmul(tensor(a), tensor(b), out_dtype=out_dtype)
    assert z.dtype.name == out_dtype
    assert_within(z.to_numpy(), *_ref_bound(a, b, "f16", out_dtype))


@pytest.mark.parametrize("m", [1, 3, 16])
def test_split_k_for_decode_sizes(m: int) -> None:
    rng = np.random.default_rng(m)
    a, b = array(rng, "f16", (m, 100)), array(rng, "f16", (100, 21))
    bias = array(rng, "f16", (21,))
    config = tk.Config.of(BM=16, BN=16, BK=16, GROUP=1, SPLIT=4)
    z = tk.matmul(tensor(a), tensor(b), bias=tensor(bias), activation="silu", config=config)
    assert_within(z.to_numpy(), *_ref_bound(a, b, "f16", "f16", bias=bias, act="silu"))


def test_default_config_splits_k_only_when_blocks_would_idle() -> None:
    assert _gemm_configs.default(1, 7, 100)["SPLIT"] == 4  # one N tile, 4 K tiles: 4 splits fill the 4 blocks
    assert _gemm_configs.default(1, 7, 20)["SPLIT"] == 1  # one K tile: nothing to split
    assert _gemm_configs.default(1, 4096, 4096)["SPLIT"] == 1  # enough N tiles for every block
    assert _gemm_configs.default(64, 7, 4096)["SPLIT"] == 1  # not a decode size
    rng = np.random.default_rng(3)
    a, b = array(rng, "f16", (1, 100)), array(rng, "f16", (100, 7))
    assert_within(tk.matmul(a, b).to_numpy(), *_ref_bound(a, b, "f16", "f16"))  # the default path, split


@pytest.mark.parametrize("dtype", ["f8e4m3fn", "f8e5m2"])
def test_f8_inputs_accumulate_in_f32(dtype: str) -> None:
    rng = np.random.default_rng(4)
    a, b = array(rng, dtype, (7, 48)), array(rng, dtype, (48, 5))
    z = tk.matmul(tensor(a), tensor(b), config=SMALL)
    assert z.dtype == tile.bf16
    assert_within(z.to_numpy(), *_ref_bound(a, b, dtype, "bf16"))


def test_inputs_are_borrowed_and_any_strides_work() -> None:
    rng = np.random.default_rng(5)
    x, w = array(rng, "f32", (4, 12)), array(rng, "f32", (9, 12))  # w in a Linear layer's (N, K) layout
    xt, wt = tensor(x), tensor(w)
    z = tk.matmul(xt, wt.T, config=SMALL)
    assert not xt.moved
    assert not wt.moved  # the caller's handles stay usable
    assert_within(z.to_numpy(), *_ref_bound(x, w.T, "f32", "f32"))
    z = tk.matmul(x, np.ascontiguousarray(w.T))  # numpy arrays, borrowed through DLPack
    assert_within(z.to_numpy(), *_ref_bound(x, w.T, "f32", "f32"))


def test_out_is_written_and_moved() -> None:
    rng = np.random.default_rng(6)
    a, b = array(rng, "f32", (3, 5)), array(rng, "f32", (5, 4))
    out = tile.full(tile.f32, [3, 4], np.nan)
    z = tk.matmul(a, b, out=out)
    assert out.moved
    assert_within(z.to_numpy(), *_ref_bound(a, b, "f32", "f32"))


def test_out_overlapping_an_input_is_refused() -> None:
    a = tile.ones(tile.f32, [4, 4])
    with pytest.raises(OwnershipError, match="overlap"):
        tk.matmul(a, tile.ones(tile.f32, [4, 4]), out=a)
    np.testing.assert_array_equal(a.to_numpy(), np.ones((4, 4)))  # untouched, still usable


def test_empty_results_launch_nothing() -> None:
    z = tk.matmul(np.ones((0, 3), np.float16), np.ones((3, 5), np.float16))
    assert z.shape == (0, 5)
    z = tk.matmul(np.ones((2, 0), np.float32), np.ones((0, 3), np.float32), bias=np.ones(3, np.float32))
    np.testing.assert_array_equal(z.to_numpy(), np.ones((2, 3)))  # K = 0: the epilogue of a zero accumulator


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"a": np.ones((2, 3, 4), np.float16)}, "must have 2 dimensions"),
        ({"b": np.ones((5, 2), np.float16)}, "inner dimensions differ"),
        ({"b": np.ones((4, 2), np.float32)}, "a is f16 but b is f32"),
        ({"a": np.ones((2, 4), np.int32), "b": np.ones((4, 2), np.int32)}, "has dtype i32"),
        ({"activation": "tanh"}, "activation 'tanh'"),
        ({"bias": np.ones(3, np.float32)}, "bias has shape [3], expected [2]"),
        ({"residual": np.ones((2, 3), np.float32)}, "residual has shape [2, 3], expected [2, 2]"),
        ({"out_dtype": tile.i32}, "out_dtype i32"),
        ({"out_dtype": "float16"}, "is not a dtype"),
        ({"out": tile.zeros(tile.f32, [2, 2]), "out_dtype": "f16"}, "out has dtype f32; this call writes f16"),
        ({"out": tile.zeros(tile.i32, [2, 2])}, "out has dtype i32"),
        ({"out": tile.zeros(tile.f16, [2, 3])}, "out has shape [2, 3], expected [2, 2]"),
        ({"config": tk.Config.of(BM=16, BN=24, BK=16, GROUP=1, SPLIT=1)}, "powers of two"),
        ({"config": tk.Config.of(BM=16, BN=16, BK=16)}, "lacks GROUP"),
        ({"a": tile.zeros(tile.f16, [2, 4]).partition([1, 4])}, "is a partition"),
        ({"a": [[1.0]]}, "pass a tile Tensor"),
    ],
)
def test_bad_input_gets_a_typed_error(kwargs: dict[str, Any], message: str) -> None:
    args: dict[str, Any] = {"a": np.ones((2, 4), np.float16), "b": np.ones((4, 2), np.float16)} | kwargs
    a, b = args.pop("a"), args.pop("b")
    with pytest.raises(ArgumentError) as info:
        tk.matmul(a, b, **args)
    assert message in str(info.value)
    assert isinstance(info.value, tile.TileError)


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_bmm_matches_float64(dtype: str) -> None:
    rng = np.random.default_rng(7)
    a, b = array(rng, dtype, (3, 5, 19)), array(rng, dtype, (3, 19, 6))
    z = tk.bmm(tensor(a), tensor(b), out_dtype=tile.f32, config=SMALL)
    assert z.shape == (3, 5, 6)
    ref = np.einsum("bmk,bkn->bmn", f64(a), f64(b))
    bound = (19 + 2) * U32 * np.einsum("bmk,bkn->bmn", np.abs(f64(a)), np.abs(f64(b))) + U32 * np.abs(ref)
    assert_within(z.to_numpy(), ref, bound)


def test_bmm_errors() -> None:
    with pytest.raises(ArgumentError, match="need \\(B, M, K\\) and \\(B, K, N\\)"):
        tk.bmm(np.ones((2, 3, 4), np.float16), np.ones((3, 4, 5), np.float16))
    with pytest.raises(ArgumentError, match="must have 3 dimensions"):
        tk.bmm(np.ones((3, 4), np.float16), np.ones((4, 5), np.float16))


def test_a_moved_input_is_refused_with_the_fix() -> None:
    a = tile.ones(tile.f32, [2, 2])
    a.partition([2, 2])  # moves a
    with pytest.raises(tile.MovedError, match="moved"):
        tk.matmul(a, np.ones((2, 2), np.float32))
