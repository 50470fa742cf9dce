"""The corpus tolerance rule (corpus/tc_tol.py) rejects the bugs fixed tolerances let through.

Each test feeds the rule a corpus case's reference and a result computed the wrong way in numpy (an f16
accumulator, a 2% or 10% scaling), and the result computed the right way. The same bugs made in the code were
tried by hand against test_compiler_corpus_interp.py, where the former tolerances (rtol 2e-2, atol 2e-2 or 0.5)
passed them:

* interpreter `_mma` rounding its accumulator to f16: fails gemm, gemm_bf16, batched_gemm, gemm_swizzled,
  gemm_persistent and both scatter GEMMs. It survives where the kernel legitimately rounds as coarsely: gemm_tf32
  (tf32 operands), gemm_f8 (the fp8 tensor-core accumulator), matmul_operator, batch_broadcast_matmul and
  attention (f16 results or f16 P), gemm_f16_out (f16 output);
* every float `store_view_tko` scaling by 1.02: fails every float GEMM stored through a view, flash_attention and
  flash_attention_causal (so 10% does too).
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest

CORPUS = Path(__file__).parent / "corpus"
if str(CORPUS) not in sys.path:
    sys.path.insert(0, str(CORPUS))

_tol = importlib.import_module("tc_tol")  # the corpus directory is not a package: imported by path
SAFETY, Tol, unit_roundoff = _tol.SAFETY, _tol.Tol, _tol.unit_roundoff
CASES = {c.name: c for m in ("tc_corpus_mma", "tc_corpus_nn") for c in importlib.import_module(m).CASES}


def _case_data(name: str) -> tuple[Any, dict[str, Any], np.ndarray]:
    case = CASES[name]
    args = case.inputs(np.random.default_rng(7))
    (want,) = case.reference(dict(args)).values()
    return case, args, np.asarray(want)


def test_unit_roundoff_of_the_dtypes() -> None:
    assert unit_roundoff("float32") == 2.0**-24
    assert unit_roundoff("float16") == 2.0**-11
    assert unit_roundoff(ml_dtypes.bfloat16) == 2.0**-8
    assert unit_roundoff("tf32") == 2.0**-11
    assert unit_roundoff("int32") == 0.0


def test_integer_outputs_must_match_exactly() -> None:
    assert Tol(k=1024).bounds(np.zeros(3, np.int32), np.zeros(3)) == (0.0, 0.0)
    with pytest.raises(AssertionError, match="Mismatched elements: 1 / 3"):
        Tol().assert_close(np.array([1, 2, 4], np.int32), np.array([1, 2, 3]), "ints")


def test_the_bound_grows_with_the_reduction_length_and_the_accumulator() -> None:
    got, want = np.ones(4, np.float32), np.ones(4)
    _, short = Tol(k=16).bounds(got, want)
    _, long = Tol(k=1024).bounds(got, want)
    _, half = Tol(acc="float16", k=1024).bounds(got, want)
    assert long == pytest.approx(SAFETY * (2.0**-24 + 32 * 2.0**-24))
    assert short < long < half


def _tiled_gemm(x: np.ndarray, y: np.ndarray, acc_dtype: str, bk: int = 32) -> np.ndarray:
    """The corpus GEMM's loop: per BK slice an exact f32 product, added into an accumulator of `acc_dtype`."""
    acc = np.zeros((x.shape[0], y.shape[1]), acc_dtype)
    for k in range(0, x.shape[1], bk):
        part = x[:, k : k + bk].astype(np.float32) @ y[k : k + bk].astype(np.float32)
        acc = (acc.astype(np.float32) + part).astype(acc_dtype)
    return acc.astype(np.float32)


@pytest.mark.parametrize("name", ["gemm", "gemm_bf16", "gemm_swizzled"])
def test_an_f16_accumulator_in_an_f32_gemm_fails(name: str) -> None:
    """Mutant: the GEMM accumulates in f16 (bug class: a wrong accumulator type in lowering or in `mma`)."""
    case, args, want = _case_data(name)
    x, y = args["x"], args["y"]
    rows, cols = x.shape[0], y.shape[1]
    case.tol.assert_close(_tiled_gemm(x, y, "float32"), want[:rows, :cols], name)
    with pytest.raises(AssertionError, match="Mismatched elements"):
        case.tol.assert_close(_tiled_gemm(x, y, "float16"), want[:rows, :cols], name)


@pytest.mark.parametrize(
    ("name", "scale"),
    [
        *[(name, 1.02) for name in ("gemm", "gemm_f8", "matmul_operator", "gemm_tf32", "gemm_f16_out")],
        *[("flash_attention", 1.1), ("flash_attention", 1.02), ("flash_attention_causal", 1.02)],
    ],
)
def test_a_scaled_output_fails(name: str, scale: float) -> None:
    """Mutant: the output comes out scaled (a wrong softmax normalisation, a stray factor in an epilogue)."""
    case, args, want = _case_data(name)
    out_dtype = next(v for k, v in args.items() if k in ("z", "o")).dtype
    case.tol.assert_close(want.astype(out_dtype), want, name)
    with pytest.raises(AssertionError, match="Mismatched elements"):
        case.tol.assert_close((want * scale).astype(out_dtype), want, name)
