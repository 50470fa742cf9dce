"""Every tile.kernels kernel, lowered for sm_90: safe (no unchecked kernel), with every tile index proven or left to
the launcher (no check inside the kernel, which would slow a Hopper GEMM's main loop down), and (tier 2) compiled
through tileiras to a cubin (no GPU needed), with the epilogue branches that use the most of the kernel language on.
GEMMs use 32x32x32 tiles here (tileiras takes 10-15 s on the GPU configs' 128x128x64 on two cores; the GPU tests
compile those), row kernels their real tile shapes."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from tile.compiler import ArraySpec, Specialization, compile_kernel
from tile.kernels._source import kernels

sys.path.insert(0, str(Path(__file__).parent))  # helpers beside the tests (importlib import mode)
from helpers_kernels import entries, lowered_op_names


def _arrays(**dims: tuple[str, int]) -> dict[str, ArraySpec]:
    """Row-major tensors of the given (dtype, rank), extents divisible by 16 as the GPU tests' are; a negative rank
    is a transposed view (contiguous along dim 0)."""
    return {
        name: ArraySpec(
            dt, abs(n), stride_one=tuple(i == (0 if n < 0 else n - 1) for i in range(abs(n))), shape_div=(16,) * abs(n)
        )
        for name, (dt, n) in dims.items()
    }


# A decode GEMV's operands: the weight b is a Linear layer's (N, K) weight seen as (K, N), contiguous along K (dim 0).
# Unfused, the norm weight g and the up half u are placeholders; fused (NORM, GLU), u is the weight's second half.
GEMV_ARRAYS = {"z": ("bf16", 2), "a": ("bf16", 2), "b": ("bf16", -2), "bias": ("f32", 1), "res": ("bf16", 2)}
GEMV_ARRAYS |= {"g": ("f32", 1), "u": ("f32", 2)}
GEMV_FUSED = GEMV_ARRAYS | {"g": ("bf16", 1), "u": ("bf16", -2)}
PLAIN = {"NORM": 0, "GLU": False}
FUSED = {"ACT": 0, "HAS_BIAS": False, "HAS_RES": False, "NORM": 1, "GLU": True}
FUSED_DTYPES = {"O": "bf16", "T": "bf16", "BT": "f32", "RT": "bf16", "G": "bf16", "U": "bf16"}
GEMM_EPILOGUE = {"ACT": 3, "HAS_BIAS": True, "HAS_RES": True}
CASES: dict[str, tuple[str, str, dict[str, Any], dict[str, tuple[str, int]], dict[str, str]]] = {
    "gemm_bf16_bias_gelu_residual": (
        "_gemm_kernels",
        "gemm",
        {"BM": 32, "BN": 32, "BK": 32, "GROUP": 8, **GEMM_EPILOGUE},
        {"z": ("bf16", 2), "a": ("bf16", 2), "b": ("bf16", 2), "bias": ("f32", 1), "res": ("bf16", 2)},
        {"O": "bf16", "T": "bf16", "BT": "f32", "RT": "bf16"},
    ),
    "gemm_f8e4m3fn_silu": (
        "_gemm_kernels",
        "gemm",
        {"BM": 32, "BN": 32, "BK": 32, "GROUP": 8, "ACT": 2, "HAS_BIAS": False, "HAS_RES": False},
        {"z": ("bf16", 2), "a": ("f8e4m3fn", 2), "b": ("f8e4m3fn", 2), "bias": ("f32", 1), "res": ("f32", 2)},
        {"O": "bf16", "T": "f8e4m3fn", "BT": "f32", "RT": "f32"},
    ),
    "gemm_glu": (
        "_gemm_kernels",
        "gemm_glu",
        {"BM": 32, "BN": 32, "BK": 32, "GROUP": 8},
        {"z": ("bf16", 2), "a": ("bf16", 2), "b": ("bf16", -2), "u": ("bf16", -2)},
        {"O": "bf16", "T": "bf16"},
    ),
    "gemm_split_k": (
        "_gemm_kernels",
        "gemm_split_k",
        {"BM": 16, "BN": 128, "BK": 128, "SPLIT": 4},
        {"z": ("f32", 3), "a": ("f16", 2), "b": ("f16", 2)},
        {"T": "f16"},
    ),
    "reduce_split_k": (
        "_gemm_kernels",
        "reduce_split_k",
        {"BM": 16, "BN": 128, "ACT": 4, "HAS_BIAS": True, "HAS_RES": True},
        {"z": ("f16", 2), "partials": ("f32", 3), "bias": ("f16", 1), "res": ("f16", 2)},
        {"O": "f16", "BT": "f16", "RT": "f16"},
    ),
    "gemv_mma_bf16_residual": (
        "_gemm_kernels",
        "gemv_mma",
        {"BM": 16, "BN": 8, "BK": 256, "LAT": 3, "TMA": True, "ACT": 0, "HAS_BIAS": False, "HAS_RES": True, **PLAIN},
        GEMV_ARRAYS,
        {"O": "bf16", "T": "bf16", "BT": "f32", "RT": "bf16", "G": "f32", "U": "f32"},
    ),
    "gemv_dot_bf16_bias_silu": (
        "_gemm_kernels",
        "gemv_dot",
        {"BM": 1, "BN": 16, "BK": 512, "LAT": 4, "TMA": False, "ACT": 2, "HAS_BIAS": True, "HAS_RES": False, **PLAIN},
        GEMV_ARRAYS | {"z": ("f32", 2), "bias": ("bf16", 1)},
        {"O": "f32", "T": "bf16", "BT": "bf16", "RT": "bf16", "G": "f32", "U": "f32"},
    ),
    "gemv_wx_bf16_bias_gelu_residual": (
        "_gemm_kernels",
        "gemv_wx",
        {"BM": 8, "BN": 64, "BK": 128, "LAT": 3, "TMA": True, **GEMM_EPILOGUE, **PLAIN},
        GEMV_ARRAYS,
        {"O": "bf16", "T": "bf16", "BT": "f32", "RT": "bf16", "G": "f32", "U": "f32"},
    ),
    "gemv_mma_norm_swiglu": (
        "_gemm_kernels",
        "gemv_mma",
        {"BM": 16, "BN": 64, "BK": 128, "LAT": 3, "TMA": True, **FUSED, "NORM": 2},
        GEMV_FUSED,
        FUSED_DTYPES,
    ),
    "gemv_dot_norm_swiglu": (
        "_gemm_kernels",
        "gemv_dot",
        {"BM": 1, "BN": 8, "BK": 512, "LAT": 4, "TMA": False, **FUSED},
        GEMV_FUSED,
        FUSED_DTYPES,
    ),
    "gemv_wx_norm_swiglu": (
        "_gemm_kernels",
        "gemv_wx",
        {"BM": 8, "BN": 64, "BK": 256, "LAT": 3, "TMA": True, **FUSED},
        GEMV_FUSED,
        FUSED_DTYPES,
    ),
    "gemv_wx_norm_one_pass": (
        "_gemm_kernels",
        "gemv_wx",
        {"BM": 8, "BN": 64, "BK": 256, "LAT": 3, "TMA": True, **FUSED, "NORM": 2, "GLU": False},
        GEMV_FUSED,
        FUSED_DTYPES,
    ),
    "gemv_wx_split_k": (
        "_gemm_kernels",
        "gemv_wx_split_k",
        {"BM": 16, "BN": 64, "BK": 256, "SPLIT": 4, "LAT": 4, "TMA": False},
        {"z": ("f32", 3), "a": ("bf16", 2), "b": ("bf16", -2)},
        {"T": "bf16"},
    ),
    "gemm_split_fused_norm_glu": (
        "_fused_kernels",
        "gemm_split_fused",
        {"BM": 16, "BN": 32, "BK": 32, "SPLIT": 4, "NORM": 1, "GLU": True},
        {"z": ("f32", 3), "a": ("bf16", 2), "b": ("bf16", -2), "g": ("bf16", 1), "u": ("bf16", -2)},
        {"T": "bf16", "G": "bf16", "U": "bf16"},
    ),
    "gemv_wx_split_fused_norm_one_pass": (
        "_fused_kernels",
        "gemv_wx_split_fused",
        {"BM": 8, "BN": 64, "BK": 256, "SPLIT": 4, "LAT": 3, "TMA": True, "NORM": 2, "GLU": False},
        {"z": ("f32", 3), "a": ("bf16", 2), "b": ("bf16", -2), "g": ("bf16", 1), "u": ("f32", 2)},
        {"T": "bf16", "G": "bf16", "U": "f32"},
    ),
    "gemv_wx_split_fused_norm_glu": (
        "_fused_kernels",
        "gemv_wx_split_fused",
        {"BM": 8, "BN": 64, "BK": 128, "SPLIT": 2, "LAT": 4, "TMA": False, "NORM": 1, "GLU": True},
        {"z": ("f32", 3), "a": ("bf16", 2), "b": ("bf16", -2), "g": ("bf16", 1), "u": ("bf16", -2)},
        {"T": "bf16", "G": "bf16", "U": "bf16"},
    ),
    "reduce_split_fused_norm_glu": (
        "_fused_kernels",
        "reduce_split_fused",
        {"BM": 16, "BN": 32, "BK": 128, "SPLIT": 4, "NORM": 2, "GLU": True},
        {"z": ("bf16", 2), "a": ("bf16", 2), "partials": ("f32", 3)},
        {"O": "bf16", "T": "bf16"},
    ),
    "bmm": (
        "_gemm_kernels",
        "bmm",
        {"BM": 32, "BN": 32, "BK": 32},
        {"z": ("f16", 3), "a": ("f16", 3), "b": ("f16", 3)},
        {"O": "f16", "T": "f16"},
    ),
    "log_softmax": (
        "_row_kernels",
        "softmax",
        {"BM": 4, "NP": 1024, "N": 1000, "LOG": True, "LAT": 0},
        {"z": ("bf16", 2), "x": ("bf16", 2)},
        {"O": "bf16", "T": "bf16"},
    ),
    "layernorm": (
        "_row_kernels",
        "layernorm",
        {"BM": 2, "NP": 4096, "N": 4096, "HAS_W": True, "HAS_B": True, "LAT": 0},
        {"z": ("f16", 2), "x": ("f16", 2), "w": ("bf16", 1), "b": ("f32", 1)},
        {"O": "f16", "T": "f16", "W": "bf16", "B": "f32"},
    ),
    "rmsnorm": (
        "_row_kernels",
        "rmsnorm",
        {"BM": 1, "NP": 8192, "N": 5000, "LAT": 1},
        {"z": ("f16", 2), "x": ("f16", 2), "w": ("f32", 1)},
        {"O": "f16", "T": "f16", "W": "f32"},
    ),
    "add_rmsnorm": (
        "_row_kernels",
        "add_rmsnorm",
        {"BM": 2, "NP": 2048, "N": 2048, "LAT": 0},
        {"z": ("bf16", 2), "s": ("bf16", 2), "x": ("bf16", 2), "r": ("bf16", 2), "w": ("bf16", 1)},
        {"O": "bf16", "S": "bf16", "T": "bf16", "R": "bf16", "W": "bf16"},
    ),
    "softmax_chunked": (
        "_row_chunked",
        "softmax_chunked",
        {"BM": 1, "NP": 32768, "N": 32768, "BN": 2048, "LOG": False, "LAT": 1},
        {"z": ("f16", 2), "x": ("f16", 2)},
        {"O": "f16", "T": "f16"},
    ),
    "rmsnorm_chunked": (
        "_row_chunked",
        "rmsnorm_chunked",
        {"BM": 2, "NP": 16384, "N": 16384, "BN": 1024, "LAT": 0},
        {"z": ("bf16", 2), "x": ("bf16", 2), "w": ("bf16", 1)},
        {"O": "bf16", "T": "bf16", "W": "bf16"},
    ),
    "add_rmsnorm_chunked": (
        "_row_chunked",
        "add_rmsnorm_chunked",
        {"BM": 1, "NP": 8192, "N": 5000, "BN": 1024, "LAT": 0},
        {"z": ("f16", 2), "s": ("f16", 2), "x": ("f16", 2), "r": ("f16", 2), "w": ("f32", 1)},
        {"O": "f16", "S": "f16", "T": "f16", "R": "f16", "W": "f32"},
    ),
    "layernorm_chunked": (
        "_row_chunked",
        "layernorm_chunked",
        {"BM": 1, "NP": 32768, "N": 32768, "BN": 4096, "HAS_W": True, "HAS_B": True, "LAT": 0},
        {"z": ("f16", 2), "x": ("f16", 2), "w": ("f16", 1), "b": ("f16", 1)},
        {"O": "f16", "T": "f16", "W": "f16", "B": "f16"},
    ),
    "rmsnorm_heads": (
        "_row_chunked",
        "rmsnorm_heads",
        {"BM": 4, "NP": 4096, "N": 4096, "BN": 1024, "D": 128, "LAT": 0},
        {"z": ("bf16", 2), "x": ("bf16", 2), "w": ("bf16", 1)},
        {"O": "bf16", "T": "bf16", "W": "bf16"},
    ),
}


def _spec(case: str) -> tuple[Any, Specialization]:
    stem, name, consts, arrays, dtypes = CASES[case]
    kernel = getattr(kernels(stem), name)
    return kernel, Specialization.make(params=_arrays(**arrays), consts=consts, dtypes=dtypes, options=kernel.options)


def test_every_kernel_is_covered_and_none_is_unchecked() -> None:
    found = entries(("_gemm_kernels", "_fused_kernels", "_row_kernels", "_row_chunked"))
    assert {(stem, name) for stem, name, *_ in CASES.values()} == set(found)
    assert [key for key, kernel in found.items() if kernel.unchecked] == []


@pytest.mark.parametrize("case", sorted(CASES))
def test_no_index_check_is_left_in_the_kernel(case: str) -> None:
    ops = lowered_op_names(*_spec(case))
    # An unproven index becomes a branch to a store through int_to_ptr (or an assert with debug guards).
    assert not ops & {"int_to_ptr", "assert"}, f"{case} checks a tile index inside the kernel"


@pytest.mark.requires_tileiras
@pytest.mark.parametrize("case", sorted(CASES))
def test_kernel_compiles_for_sm_90(case: str) -> None:
    kernel, spec = _spec(case)
    compiled = compile_kernel(kernel.fn, spec, "sm_90", cache=False)
    assert compiled.cubin is not None
    assert compiled.cubin[:4] == b"\x7fELF"
