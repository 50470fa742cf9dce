"""Every op runs in the interpreter: tile.ir's one-kernel-per-op samples, and every kernel of tile-ir's cuTile
Python corpus (attention, layernorm, atomics, fp8/tf32/int8 GEMMs, gather/scatter, 13.5 insert and grid
dependency control...) runs a block on random inputs without an interpreter error or a token-order error;
its attention (plain and causal) and layernorm kernels match numpy over their whole grids."""

from __future__ import annotations

import io
import sys
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from tile.ir import LATEST, interp, read_bytecode
from tile.ir.ops import CATALOG

# helpers_ir_* modules live beside the tests; --import-mode=importlib does not put this folder on sys.path
sys.path.insert(0, str(Path(__file__).parent))

from helpers_ir_samples import build_sample


def test_the_interpreter_covers_the_whole_catalog() -> None:
    assert set(CATALOG) == set(interp.SUPPORTED_OPS)


@pytest.mark.parametrize("name", sorted(set(CATALOG) - {"assume"}))
def test_sample_kernel_runs(name: str) -> None:
    """Each sample runs; the samples only store back what they loaded, so the f32 buffer keeps its values (the
    ops' results are checked in test_ir_interp_ops*.py, see test_ir_interp_op_registry.py)."""
    x, xi = np.arange(64, dtype=np.float32), np.arange(64, dtype=np.int32)
    interp.launch(build_sample(name, LATEST), 1, [x, 16, xi], stdout=io.StringIO())
    assert x.tolist() == list(range(64))


def test_sample_assume_is_checked() -> None:
    """The sample promises div_by<4> on iota (0, 1, 2, ...): a broken promise, which the interpreter reports."""
    x, xi = np.arange(64, dtype=np.float32), np.arange(64, dtype=np.int32)
    with pytest.raises(interp.InterpError, match="assume"):
        interp.launch(build_sample("assume", LATEST), 1, [x, 16, xi])


def _corpus() -> list[Any]:
    """The corpus entries; without cuTile Python (a test dependency) one placeholder that the requires_cutile
    marker skips, or fails under TILE_REQUIRE_CUTILE=1, instead of the 44 cases silently vanishing."""
    try:
        from cutile_corpus.kernels import CORPUS
    except ImportError:
        return [pytest.param(None, id="cutile-missing")]
    return list(CORPUS)


def _argument(param: Any, name: str, rng: np.random.Generator) -> list[Any]:
    """Random arguments for one cuTile parameter constraint (arrays in cuTile's ABI; scalars as 3 / 1.0)."""
    if not hasattr(param, "ndim"):
        return [3 if "int" in str(param.dtype) else 1.0]
    dtype = np.dtype(ml_dtypes.bfloat16 if "bfloat16" in str(param.dtype) else str(param.dtype).split(".")[-1])
    square = name.startswith("gemm") and param.ndim == 2  # A's K extent must equal B's
    shape = (256, 256) if square else {1: (1024,), 2: (64, 1024), 3: (2, 128, 64)}[param.ndim]
    if dtype.kind == "f" or dtype == ml_dtypes.bfloat16:
        array = rng.uniform(0.5, 2.0, shape).astype(dtype)
    else:
        array = rng.integers(0, 16, shape).astype(dtype)  # also valid gather indices and histogram bins
    return [array, *array.shape, *(s // array.itemsize for s in array.strides)]


@pytest.mark.requires_cutile
@pytest.mark.parametrize("entry", _corpus(), ids=lambda e: e.name)
def test_cutile_corpus_kernel_runs(entry: Any) -> None:
    from cutile_corpus.kernels import export

    module = read_bytecode(export(entry, entry.versions[0]))
    rng = np.random.default_rng(0)
    args = [v for p in entry.params if hasattr(p, "dtype") for v in _argument(p, entry.name, rng)]
    before = [a.copy() for a in args if isinstance(a, np.ndarray)]
    stdout = io.StringIO()
    interp.launch(module, (1, 1, 1), args, stdout=stdout)
    after = [a for a in args if isinstance(a, np.ndarray)]
    wrote = any(not np.array_equal(b, a, equal_nan=True) for b, a in zip(before, after, strict=True))
    assert wrote or stdout.getvalue(), f"{entry.name} ran but wrote and printed nothing"


def _corpus_module(name: str) -> Any:
    from cutile_corpus.kernels import CORPUS, export

    entry = next(e for e in CORPUS if e.name == name)
    return read_bytecode(export(entry, entry.versions[0]))


def _abi(*values: Any) -> list[Any]:
    out: list[Any] = []
    for v in values:
        out += [v, *v.shape, *(s // v.itemsize for s in v.strides)] if isinstance(v, np.ndarray) else [v]
    return out


@pytest.mark.requires_cutile
@pytest.mark.parametrize(("name", "causal"), [("attention", False), ("attention_causal", True)])
def test_cutile_corpus_attention_matches_numpy(name: str, causal: bool) -> None:
    """Flash attention with base-2 softmax (exp2, no log2(e) factor), online rescaling and an f16 P @ V."""
    rng = np.random.default_rng(1)
    heads, seq, dim = 2, 128, 64
    q, k, v = (rng.standard_normal((heads, seq, dim)).astype(np.float16) for _ in range(3))
    out = np.zeros((heads, seq, dim), np.float16)
    scale = 0.125
    interp.launch(_corpus_module(name), (seq // 64, heads), _abi(q, k, v, out, scale))
    s = np.einsum("hqd,hkd->hqk", q.astype(np.float64), k.astype(np.float64)) * scale
    if causal:
        s = np.where(np.tril(np.ones((seq, seq), bool)), s, -np.inf)
    p = np.exp2(s - s.max(axis=-1, keepdims=True))
    expect = np.einsum("hqk,hkd->hqd", p / p.sum(axis=-1, keepdims=True), v.astype(np.float64))
    # The corpus tolerance rule (tile-compiler tests, corpus/tc_tol.py): an f16 output and an f16 P, f32 sums over
    # `seq` keys, C = 16. A 10% scaling of the output fails it (rtol 2e-2 and atol 5e-3 let it pass).
    u16, u32 = 2.0**-11, 2.0**-24
    rms = float(np.sqrt(np.mean(expect**2)))
    atol = 16 * rms * (2 * u16 + np.sqrt(seq) * u32)
    np.testing.assert_allclose(out.astype(np.float64), expect, rtol=16 * u16, atol=atol)
    with pytest.raises(AssertionError, match="Mismatched elements"):
        np.testing.assert_allclose((out * np.float16(1.1)).astype(np.float64), expect, rtol=16 * u16, atol=atol)


@pytest.mark.requires_cutile
def test_cutile_corpus_layernorm_matches_numpy() -> None:
    rng = np.random.default_rng(2)
    x = rng.standard_normal((8, 1024)).astype(np.float32)
    w, bias = rng.standard_normal(1024).astype(np.float32), rng.standard_normal(1024).astype(np.float32)
    out = np.zeros_like(x)
    interp.launch(_corpus_module("layernorm"), 8, _abi(x, w, bias, out, 1e-5))
    mean = x.mean(axis=1, keepdims=True)
    expect = (x - mean) / np.sqrt(((x - mean) ** 2).mean(axis=1, keepdims=True) + 1e-5) * w + bias
    np.testing.assert_allclose(out, expect, rtol=1e-4, atol=1e-4)
