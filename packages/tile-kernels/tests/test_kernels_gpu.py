"""tile.kernels on the GPU at realistic shapes: numerics against float64 with the same rounding-error bounds as the
CPU tests (widened for the GPU's matrix units, see helpers_kernels), outputs poisoned with NaN before each call, and
the autotuner's records written and reused.

Run with ``TILE_REQUIRE_GPU=1 pytest packages/tile-kernels -m gpu``; skipped where no GPU is visible.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
import tile.frontend as tile
import tile.kernels as tk
from helpers_kernels import U32, act_ref, array, assert_within, cast_error, f64, gemm_bound, tensor
from tile.kernels import autotune

pytestmark = [pytest.mark.gpu, pytest.mark.requires_tileiras]


@pytest.fixture(autouse=True)
def _gpu_backend(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TILE_AUTOTUNE", "0")  # default configs, except where a test tunes on purpose
    tile.set_backend("gpu")
    yield
    tile.set_backend("cpu")


def _poison(dtype: str, shape: tuple[int, ...]) -> tile.Tensor:
    return tile.full(getattr(tile, dtype), list(shape), np.nan)


def _matmul_check(m: int, n: int, k: int, dtype: str, out: str, **epilogue: Any) -> None:
    rng = np.random.default_rng(m + n + k)
    a, b = array(rng, dtype, (m, k)), array(rng, dtype, (k, n))
    bias = array(rng, "f32", (n,)) if epilogue.get("bias") else None
    res = array(rng, "bf16", (m, n)) if epilogue.get("residual") else None
    act = epilogue.get("activation")
    z = tk.matmul(
        tensor(a),
        tensor(b),
        bias=None if bias is None else tensor(bias),
        activation=act,
        residual=None if res is None else tensor(res),
        out=_poison(out, (m, n)),
    )
    pre = f64(a) @ f64(b) + (0.0 if bias is None else f64(bias))
    err = gemm_bound(a, b, k, dtype, gpu=True) + U32 * np.abs(pre)
    ref = act_ref(pre, act)
    err = 1.2 * err + 8 * U32 * np.abs(ref) + (1.5e-7 * np.abs(pre) if act == "gelu" else 0.0)
    if res is not None:
        ref = ref + f64(res)
    assert_within(z.to_numpy(), ref, err + U32 * np.abs(ref) + cast_error(out, ref))


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize(("m", "n", "k"), [(2048, 2048, 2048), (1000, 1030, 999)])
def test_matmul(dtype: str, m: int, n: int, k: int) -> None:
    _matmul_check(m, n, k, dtype, dtype)


@pytest.mark.parametrize("act", ["silu", "gelu", "gelu_tanh"])
def test_matmul_fused_epilogue(act: str) -> None:
    _matmul_check(512, 768, 1024, "bf16", "f32", bias=True, activation=act, residual=True)


@pytest.mark.parametrize("m", [1, 4, 16])
def test_decode_sizes_split_k(m: int) -> None:
    _matmul_check(m, 4096, 4096, "f16", "f16")


@pytest.mark.parametrize("dtype", ["f8e4m3fn", "f8e5m2"])
def test_matmul_f8(dtype: str) -> None:
    from tile import core

    if tuple(core.Device(0).compute_capability) < (8, 9):
        with pytest.raises(tile.BackendError, match="sm_89"):
            tk.matmul(tile.zeros(getattr(tile, dtype), [16, 16]), tile.zeros(getattr(tile, dtype), [16, 16]))
        return
    _matmul_check(1024, 1024, 1024, dtype, "bf16")


def test_bmm() -> None:
    rng = np.random.default_rng(0)
    a, b = array(rng, "f16", (8, 300, 128)), array(rng, "f16", (8, 128, 260))
    z = tk.bmm(tensor(a), tensor(b), out=_poison("f32", (8, 300, 260)))
    ref = np.einsum("bmk,bkn->bmn", f64(a), f64(b))
    bound = (128 + 2) * 2 * U32 * np.einsum("bmk,bkn->bmn", np.abs(f64(a)), np.abs(f64(b))) + cast_error("f32", ref)
    assert_within(z.to_numpy(), ref, bound)


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("n", [4096, 3000])
def test_row_kernels(dtype: str, n: int) -> None:
    rng = np.random.default_rng(n)
    x, w, b = array(rng, dtype, (1024, n), scale=2.0), array(rng, "bf16", (n,)), array(rng, "bf16", (n,))
    xd = f64(x)
    shifted = xd - xd.max(axis=-1, keepdims=True)
    ref = np.exp(shifted) / np.exp(shifted).sum(axis=-1, keepdims=True)
    z = tk.softmax(tensor(x), out=_poison(dtype, x.shape))
    assert_within(z.to_numpy(), ref, 2 * (n + 8 + np.abs(shifted)) * U32 * ref + cast_error(dtype, ref))
    ref = xd / np.sqrt((xd * xd).mean(axis=-1, keepdims=True) + 1e-6) * f64(w)
    z = tk.rmsnorm(tensor(x), tensor(w), out=_poison(dtype, x.shape))
    assert_within(z.to_numpy(), ref, 2 * (n + 8) * U32 * np.abs(ref) + cast_error(dtype, ref))
    r = 1.0 / np.sqrt(xd.var(axis=-1, keepdims=True) + 1e-5)
    normed = (xd - xd.mean(axis=-1, keepdims=True)) * r * f64(w)
    ref = normed + f64(b)
    mean_err = (n + 2) * U32 * np.abs(xd).mean(axis=-1, keepdims=True)
    bound = 2 * (n + 8) * U32 * np.abs(normed) + 2 * mean_err * r * np.abs(f64(w)) + U32 * np.abs(f64(b))
    z = tk.layernorm(tensor(x), tensor(w), tensor(b), out=_poison(dtype, x.shape))
    assert_within(z.to_numpy(), ref, bound + cast_error(dtype, ref))


def test_autotuning_writes_a_record_that_a_fresh_tuner_reuses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TILE_AUTOTUNE", "1")
    tuner = autotune.Autotuner("softmax", source="gpu-test", timer=autotune.wall_timer, cache_dir=tmp_path)
    old = autotune.set_tuner("softmax", tuner)
    try:
        x = tensor(array(np.random.default_rng(1), "f16", (512, 1024)))
        tk.softmax(x)
        assert tuner.tuned == 1
        records = json.loads((tmp_path / "v1" / "softmax.json").read_text())["records"]
        (record,) = records.values()
        assert record["seconds"] > 0
        fresh = autotune.Autotuner("softmax", source="gpu-test", timer=autotune.wall_timer, cache_dir=tmp_path)
        autotune.set_tuner("softmax", fresh)
        tk.softmax(x)
        assert fresh.tuned == 0
    finally:
        autotune.set_tuner("softmax", old)


def test_torch_tensors_through_dlpack() -> None:
    torch = pytest.importorskip("torch")
    a = torch.randn(256, 512, device="cuda", dtype=torch.float16)
    w = torch.randn(384, 512, device="cuda", dtype=torch.float16)
    z = tk.matmul(a, w.T, activation="silu")  # w.T: a strided view, borrowed as is
    an, wn = a.cpu().numpy(), w.cpu().numpy().T
    ref = act_ref(f64(an) @ f64(wn), "silu")
    bound = 1.2 * gemm_bound(an, wn, 512, "f16", gpu=True) + 8 * U32 * np.abs(ref) + cast_error("f16", ref)
    assert_within(torch.from_dlpack(z).cpu().numpy(), ref, bound)
