"""Every attention and elementwise kernel, lowered for sm_90 at its GPU tile shapes: safe (no unchecked kernel), the
kernels whose indices come from data keep their in-kernel checks, and (tier 2) each compiles through tileiras to a
cubin (no GPU needed)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from tile.compiler import ArraySpec, Specialization, compile_kernel
from tile.kernels._source import kernels

sys.path.insert(0, str(Path(__file__).parent))  # helpers beside the tests (importlib import mode)
from helpers_kernels import entries, lowered_op_names, lowered_sm90

STEMS = ("_attention_kernels", "_elementwise_kernels")
Case = tuple[str, str, dict[str, Any], dict[str, tuple[str, int]], dict[str, str]]
QKV3 = {"q": ("bf16", 3), "k": ("bf16", 3), "v": ("bf16", 3)}
CASES: dict[str, Case] = {
    "fmha_causal_d128": (
        "_attention_kernels",
        "fmha",
        {"BM": 128, "D": 128, "BN": 64, "GROUP": 4, "CAUSAL": True, "EVEN_K": False},
        {"o": ("bf16", 3), **QKV3},
        {"T": "bf16"},
    ),
    "fmha_causal_d64_mha": (
        "_attention_kernels",
        "fmha",
        {"BM": 128, "D": 64, "BN": 64, "GROUP": 1, "CAUSAL": True, "EVEN_K": False},
        {"o": ("f16", 3), "q": ("f16", 3), "k": ("f16", 3), "v": ("f16", 3)},
        {"T": "f16"},
    ),
    "fmha_full_d64": (
        "_attention_kernels",
        "fmha",
        {"BM": 128, "D": 64, "BN": 128, "GROUP": 1, "CAUSAL": False, "EVEN_K": True},
        {"o": ("f16", 3), "q": ("f16", 3), "k": ("f16", 3), "v": ("f16", 3)},
        {"T": "f16"},
    ),
    "fmha_rows_causal_d128": (  # Qwen3's prefill: q and o rows (T, Hq * D), GQA over (Hkv, max_seq, D) caches
        "_attention_kernels",
        "fmha_rows",
        {"BM": 128, "D": 128, "BN": 64, "GROUP": 4, "CAUSAL": True, "EVEN_K": True},
        {"o": ("bf16", 2), "q": ("bf16", 2), "k": ("bf16", 3), "v": ("bf16", 3)},
        {"T": "bf16"},
    ),
    "fmha_rows_causal_d64_mha": (
        "_attention_kernels",
        "fmha_rows",
        {"BM": 128, "D": 64, "BN": 64, "GROUP": 1, "CAUSAL": True, "EVEN_K": False},
        {"o": ("f16", 2), "q": ("f16", 2), "k": ("f16", 3), "v": ("f16", 3)},
        {"T": "f16"},
    ),
    "decode_split": (
        "_attention_kernels",
        "decode_split",
        {"HBD": 512, "HB": 4, "D": 128, "BN": 64, "TPS": 8, "GROUP": 4, "HKV": 8},
        {"acc_out": ("f32", 3), "m_out": ("f32", 3), "l_out": ("f32", 3), "q": ("bf16", 2), "k": ("bf16", 3)}
        | {"v": ("bf16", 3), "lengths": ("i32", 1)},
        {"T": "bf16"},
    ),
    "decode_split_tps1": (  # one key tile a block (short contexts): no loop, the loads before the length
        "_attention_kernels",
        "decode_split",
        {"HBD": 512, "HB": 4, "D": 128, "BN": 64, "TPS": 1, "GROUP": 4, "HKV": 8},
        {"acc_out": ("f32", 3), "m_out": ("f32", 3), "l_out": ("f32", 3), "q": ("bf16", 2), "k": ("bf16", 3)}
        | {"v": ("bf16", 3), "lengths": ("i32", 1)},
        {"T": "bf16"},
    ),
    "decode_combine": (
        "_attention_kernels",
        "decode_combine",
        {"D": 128, "HB": 4, "NQB": 8, "SC": 16},
        {"o": ("bf16", 2), "acc": ("f32", 3), "m": ("f32", 3), "l": ("f32", 3)},
        {"O": "bf16"},
    ),
    "decode_one": (
        "_attention_kernels",
        "decode_one",
        {"HBD": 512, "HB": 4, "D": 128, "BN": 64, "GROUP": 4, "HKV": 8},
        {"o": ("bf16", 2), "q": ("bf16", 2), "k": ("bf16", 3), "v": ("bf16", 3), "lengths": ("i32", 1)},
        {"T": "bf16"},
    ),
    "kv_append": (
        "_attention_kernels",
        "kv_append",
        {"SP": 4096, "D": 128, "HKV": 8},
        {"kc": ("bf16", 3), "vc": ("bf16", 3), "kn": ("bf16", 3), "vn": ("bf16", 3), "positions": ("i32", 1)},
        {"C": "bf16"},
    ),
    "rope": (
        "_elementwise_kernels",
        "rope",
        {"HD": 128, "HALF": 64},
        {"z": ("bf16", 2), "x": ("bf16", 2), "positions": ("i32", 1)},
        {"T": "bf16", "P": "i32"},
    ),
    "swiglu": (
        "_elementwise_kernels",
        "swiglu",
        {"BM": 4, "BN": 1024},
        {"z": ("bf16", 2), "gate": ("bf16", 2), "up": ("bf16", 2)},
        {"O": "bf16", "T": "bf16"},
    ),
    "swiglu_fused": (
        "_elementwise_kernels",
        "swiglu_fused",
        {"BM": 4, "BN": 1024, "UP": 3},
        {"z": ("bf16", 2), "gu": ("bf16", 2)},
        {"O": "bf16", "T": "bf16"},
    ),
    "embed": (
        "_elementwise_kernels",
        "embed",
        {"BH": 1024},
        {"z": ("bf16", 2), "table": ("bf16", 2), "ids": ("i64", 1)},
        {"T": "bf16", "I": "i64"},
    ),
    "argmax_parts": (
        "_elementwise_kernels",
        "argmax_parts",
        {"BN": 1024, "FLAT": 0},
        {"zv": ("f32", 2), "zi": ("i32", 2), "x": ("f32", 2)},
        {"T": "f32"},
    ),
    "argmax_pick": (
        "_elementwise_kernels",
        "argmax_pick",
        {"BC": 256, "FLAT": 0},
        {"z": ("i32", 1), "vals": ("f32", 2), "idxs": ("i32", 2)},
        {},
    ),
    "argmax_pick_flat": (  # tensor-parallel logits: one block reads every row's partials
        "_elementwise_kernels",
        "argmax_pick",
        {"BC": 256, "FLAT": 1},
        {"z": ("i32", 1), "vals": ("f32", 2), "idxs": ("i32", 2)},
        {},
    ),
    "top_k": (
        "_elementwise_kernels",
        "top_k",
        {"KP": 64, "K": 50, "BN": 4096},
        {"zv": ("bf16", 2), "zi": ("i32", 2), "x": ("bf16", 2)},
        {"T": "bf16"},
    ),
    "sample": (
        "_elementwise_kernels",
        "sample",
        {"K": 50, "BN": 4096},
        {"z": ("i32", 1), "x": ("f32", 2)},
        {"T": "f32"},
    ),
}
# Kernels that index with values read from data (positions, token ids) or a GQA head mapping the compiler cannot
# prove in range: they must keep a check inside the kernel, which is what makes a bad value fault.
CHECKED = {"kv_append", "embed"}
# Kernels whose every index is proven or checked by the launcher: no check may slow their loops down (the MHA prefill
# main loop in particular, the form benchmarked against cuTile Python's sample).
PROVEN = {
    "fmha_full_d64",
    "fmha_causal_d64_mha",
    "fmha_rows_causal_d64_mha",
    "argmax_parts",
    "argmax_pick",
    "argmax_pick_flat",
    "top_k",
    "sample",
    "swiglu",
}


def _arrays(dims: dict[str, tuple[str, int]]) -> dict[str, ArraySpec]:
    return {
        name: ArraySpec(dt, n, stride_one=tuple(i == n - 1 for i in range(n)), shape_div=(16,) * n)
        for name, (dt, n) in dims.items()
    }


def _spec(case: str) -> tuple[Any, Specialization]:
    stem, name, consts, arrays, dtypes = CASES[case]
    kernel = getattr(kernels(stem), name)
    return kernel, Specialization.make(params=_arrays(arrays), consts=consts, dtypes=dtypes, options=kernel.options)


def test_every_kernel_is_covered_and_none_is_unchecked() -> None:
    found = entries(STEMS)
    assert {(stem, name) for stem, name, *_ in CASES.values()} == set(found)
    assert [key for key, kernel in found.items() if kernel.unchecked] == []


@pytest.mark.parametrize("case", sorted(CASES))
def test_lowers_for_sm_90(case: str) -> None:
    ops = lowered_op_names(*_spec(case))
    if case in CHECKED:
        assert ops & {"int_to_ptr", "assert"}, f"{case}: an index read from data is not checked in the kernel"
    if case in PROVEN:
        assert not ops & {"int_to_ptr", "assert"}, f"{case} checks a tile index inside the kernel"


def _loops(op: Any) -> list[tuple[Any, set[str]]]:
    """Every ``for`` op under ``op`` with the names of the ops nested in it."""
    return [(f, {o.name for o in f.walk()}) for f in op.walk() if f.name == "for"]


@pytest.mark.parametrize(
    ("case", "loops"),
    [
        ("fmha_causal_d128", 2),
        ("fmha_causal_d64_mha", 2),
        ("fmha_full_d64", 1),
        ("fmha_rows_causal_d128", 2),
        ("fmha_rows_causal_d64_mha", 2),
    ],
)
def test_prefill_key_loops_split_at_the_mask_and_check_nothing(case: str, loops: int) -> None:
    """The prefill's key tiles run in a tight loop without mask code and, where a mask is needed (causal, a partial
    last tile), a second loop with it (as cuTile Python splits its loop); no loop holds an index check, GQA's included
    (its head mapping is checked once per tile, before the loops)."""
    module = lowered_sm90(*_spec(case))
    found = [loop for fn in module.functions for op in fn.body.ops for loop in _loops(op)]
    assert len(found) == loops
    assert "select" not in found[0][1], "the first key loop masks its scores"
    for _, inside in found:
        assert not inside & {"int_to_ptr", "assert"}, f"{case} checks an index inside a key loop"
        assert "if" not in inside, f"{case} branches inside a key loop"
    if loops == 2:
        assert "select" in found[1][1]


@pytest.mark.requires_tileiras
@pytest.mark.parametrize("case", sorted(CASES))
def test_kernel_compiles_for_sm_90(case: str) -> None:
    kernel, spec = _spec(case)
    compiled = compile_kernel(kernel.fn, spec, "sm_90", cache=False)
    assert compiled.cubin is not None
    assert compiled.cubin[:4] == b"\x7fELF"
