"""Programmatic dependent launch in the library and the Qwen3 decode step: ``Qwen3(..., pdl=True)`` runs the PDL
copies of the kernel modules (`tile.kernels._source`), which give the same logits bit for bit on the interpreter,
eagerly and through a captured `DecodeGraph`; the decode kernels' PDL copies lower with the entry wait and the
``launch_dependents`` hint (the plain ones with neither, so they need no bytecode 13.4), and tileiras assembles them."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tile.frontend as tile
from tile.compiler import ArraySpec, Specialization, compile_kernel
from tile.kernels import _gemv, _rowforms
from tile.kernels._source import kernels, launch_pdl, pdl_requested
from tile.kernels.qwen3 import TINY, DecodeGraph, Qwen3, random_weights

sys.path.insert(0, str(Path(__file__).parent))  # helpers and the compile tests' cases beside the tests
import test_attention_compile as attention_cases
import test_kernels_compile as kernel_cases
from helpers_kernels import entries, lowered_sm90

STEMS = (
    "_attention_kernels",
    "_elementwise_kernels",
    "_fused_kernels",
    "_gemm_kernels",
    "_qwen3_kernels",
    "_row_chunked",
    "_row_kernels",
)
# The kernels one decode step launches (fused or not, split or not), each with `tile.launch_dependents()` at its start
# in the PDL copy, by the compile tests' case that specializes it.
DECODE_KERNEL_CASES = {
    "gemm_split_k": kernel_cases,
    "reduce_split_k": kernel_cases,
    "gemv_mma_bf16_residual": kernel_cases,
    "gemv_dot_norm_swiglu": kernel_cases,
    "gemv_wx_norm_swiglu": kernel_cases,
    "gemv_wx_split_k": kernel_cases,
    "gemm_split_fused_norm_glu": kernel_cases,
    "gemv_wx_split_fused_norm_glu": kernel_cases,
    "reduce_split_fused_norm_glu": kernel_cases,
    "rmsnorm": kernel_cases,
    "rmsnorm_chunked": kernel_cases,
    "decode_split": attention_cases,
    "decode_one": attention_cases,
    "decode_combine": attention_cases,
    "swiglu_fused": attention_cases,
    "embed": attention_cases,
    "argmax_parts": attention_cases,
    "argmax_pick": attention_cases,
    "qkv_prep_one": None,  # the model's own kernel: specialized below
}
QKV_PREP_ONE = (
    {"BT": 1024, "HD": 128, "HALF": 64, "NX": 6144, "OFF": 32, "KV": 8},
    {"z": ("bf16", 2), "zk": ("bf16", 3), "zv": ("bf16", 3), "x": ("bf16", 2), "wq": ("bf16", 2)}
    | {"wk": ("bf16", 2), "cos": ("f32", 2), "sin": ("f32", 2), "pos": ("i32", 1)},
    {"O": "bf16", "C": "bf16", "D": "bf16", "W": "bf16", "RT": "f32"},
)


def _specialized(case: str, pdl: bool) -> tuple[Any, Specialization]:
    """The kernel of ``case`` (plain or PDL copy) and its sm_90 specialization."""
    source = DECODE_KERNEL_CASES[case]
    if source is None:
        stem, name, (consts, dims, dtypes) = "_qwen3_kernels", case, QKV_PREP_ONE
        params = {
            a: ArraySpec(dt, n, stride_one=tuple(i == n - 1 for i in range(n)), shape_div=(16,) * n)
            for a, (dt, n) in dims.items()
        }
    else:
        stem, name, consts, dims, dtypes = source.CASES[case]
        params = kernel_cases._arrays(**dims) if source is kernel_cases else attention_cases._arrays(dims)
    with launch_pdl(pdl):
        kernel = getattr(kernels(stem), name)
    return kernel, Specialization.make(params=params, consts=consts, dtypes=dtypes, options=kernel.options)


def _op_names(case: str, pdl: bool) -> list[str]:
    return [op.name for fn in lowered_sm90(*_specialized(case, pdl)).functions for op in fn.walk()]


def test_the_pdl_copies_hold_pdl_kernels_and_the_plain_ones_none() -> None:
    plain = entries(STEMS)
    with launch_pdl(True):
        assert pdl_requested()
        copies = entries(STEMS)
        assert kernels("_gemm_kernels").__name__ == "tile.kernels._gemm_kernels_pdl"
    assert not pdl_requested()
    assert set(plain) == set(copies)
    assert [key for key, k in plain.items() if k.options.pdl] == []
    assert [key for key, k in copies.items() if not k.options.pdl] == []
    with pytest.raises(tile.ArgumentError, match="pass True or False"), launch_pdl(1):
        pass


def test_hinted_variants_keep_the_pdl_request() -> None:
    # The occupancy / warp variants are kernel objects of their own, cached: each request gets its own.
    with launch_pdl(True):
        gemv, rows = _gemv._kernel(3, 2), _rowforms._variant("_row_kernels", "rmsnorm", 2, 0)
    assert gemv.options.pdl
    assert rows.options.pdl
    assert gemv.options.occupancy == 2
    assert rows.options.occupancy == 2
    plain_gemv, plain_rows = _gemv._kernel(3, 2), _rowforms._variant("_row_kernels", "rmsnorm", 2, 0)
    assert not plain_gemv.options.pdl
    assert not plain_rows.options.pdl


@pytest.mark.parametrize("case", sorted(DECODE_KERNEL_CASES))
def test_decode_kernels_wait_first_and_let_the_next_start_in_the_pdl_copy_only(case: str) -> None:
    names = _op_names(case, pdl=True)
    assert names[0] == "gdc_wait_tko"  # the compiler's entry wait, before every memory access
    assert names.count("gdc_launch_dependents_tko") == 1  # the hint at the start of the body
    plain = _op_names(case, pdl=False)
    assert not {"gdc_wait_tko", "gdc_launch_dependents_tko"} & set(plain)  # nothing needing bytecode 13.4


@pytest.mark.requires_tileiras
@pytest.mark.parametrize("case", ["gemv_wx_norm_swiglu", "decode_split", "qkv_prep_one", "rmsnorm", "argmax_pick"])
def test_tileiras_assembles_the_pdl_decode_kernels(case: str) -> None:
    kernel, spec = _specialized(case, pdl=True)
    compiled = compile_kernel(kernel.fn, spec, "sm_90", cache=False)
    assert compiled.abi.waits_prior_grid  # what makes the launcher ask for the programmatic launch
    assert compiled.cubin is not None
    assert compiled.cubin[:4] == b"\x7fELF"


def _run(pdl: bool, graph: bool) -> tuple[np.ndarray[Any, Any], list[np.ndarray[Any, Any]]]:
    attention = "split" if graph else "one"  # both decode attention forms, one in each mode
    model = Qwen3(TINY, random_weights(TINY, seed=11), max_seq=64, pdl=pdl, decode_attention=attention)
    prefill = model.forward([3, 141, 59, 26, 5], all_logits=True)
    tokens = [35, 89, 79, 32]
    if not graph:
        return prefill, [model.forward([t]) for t in tokens]
    with DecodeGraph(model) as step:
        return prefill, [step.step(t) for t in tokens]


@pytest.mark.parametrize("graph", [False, True], ids=["eager", "graph"])
def test_a_pdl_model_gives_the_plain_models_logits_bit_for_bit(monkeypatch: pytest.MonkeyPatch, graph: bool) -> None:
    launched: list[str] = []
    with launch_pdl(True):
        copy = kernels("_attention_kernels")
    for name in ("decode_one", "decode_split", "decode_combine"):  # the PDL kernels are the ones that run
        kernel = getattr(copy, name)

        def spy(*args: Any, _kernel: Any = kernel, _name: str = name, **kw: Any) -> Any:
            launched.append(_name)
            return _kernel(*args, **kw)

        monkeypatch.setattr(copy, name, spy)
    want_prefill, want = _run(pdl=False, graph=graph)
    assert launched == []
    got_prefill, got = _run(pdl=True, graph=graph)
    assert set(launched) == ({"decode_split", "decode_combine"} if graph else {"decode_one"})
    np.testing.assert_array_equal(got_prefill, want_prefill)
    for a, b in zip(want, got, strict=True):
        np.testing.assert_array_equal(a, b)


def test_pdl_is_a_bool_option_that_may_change() -> None:
    w = random_weights(TINY, seed=1)
    with pytest.raises(tile.ArgumentError, match="pdl='on'; pass True"):
        Qwen3(TINY, w, max_seq=8, pdl="on")  # type: ignore[arg-type]
    model = Qwen3(TINY, w, max_seq=8)
    plain = model.forward([1, 2])
    model.reset()
    model.pdl = True
    np.testing.assert_array_equal(model.forward([1, 2]), plain)
    with pytest.raises(tile.ArgumentError, match="pdl=None"):
        model.pdl = None  # type: ignore[assignment]
    assert model.pdl is True
