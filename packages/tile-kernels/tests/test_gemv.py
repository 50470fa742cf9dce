"""The decode GEMV forms of matmul (M <= 16) on the CPU interpreter: numerics against float64 for M in {1, 3, 16},
odd N and K, every epilogue, both weight layouts; the config checks, the default and the tuner's candidates."""

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
from tile.frontend import ArgumentError
from tile.kernels import _args, _gemm_configs, _gemv, autotune


def gemv(form: int, bm: int, bn: int = 8, bk: int = 16, **hints: int) -> tk.Config:
    values = {"LAT": 3, "TMA": 1, "OCC": 0, "GROUP": 1, "SPLIT": 1} | hints
    return tk.Config.of(FORM=form, BM=bm, BN=bn, BK=bk, **values)


# (FORM, BM, SPLIT). BM 0: M rounded up to a power of two; gemv_wx at 8 (M = 16 spans two row tiles of it) and 16,
# and split over K in 3 runs (the last one shorter, or empty where K has fewer tiles: only 2 of 3 runs then).
FORMS = [
    pytest.param(1, 16, 1, id="mma"),
    pytest.param(2, 0, 1, id="dot"),
    pytest.param(3, 8, 1, id="wx8"),
    pytest.param(3, 16, 1, id="wx16"),
    pytest.param(3, 8, 3, id="wx8-split3"),
    pytest.param(3, 16, 2, id="wx16-split2"),
]


def _reference(
    a: np.ndarray[Any, Any],
    b: np.ndarray[Any, Any],
    dtype: str,
    out: str,
    *,
    bias: np.ndarray[Any, Any] | None,
    act: str | None,
    res: np.ndarray[Any, Any] | None,
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    pre = f64(a) @ f64(b) + (0.0 if bias is None else f64(bias))
    err = gemm_bound(a, b, a.shape[1], dtype) + U32 * np.abs(pre)
    ref = act_ref(pre, act)
    err = 1.2 * err + 8 * U32 * np.abs(ref) + (1.5e-7 * np.abs(pre) if act == "gelu" else 0.0)
    if res is not None:
        ref = ref + f64(res)
        err = err + U32 * np.abs(ref)
    return ref, err + cast_error(out, ref)


@pytest.mark.parametrize(("form", "bm", "split"), FORMS)
@pytest.mark.parametrize("m", [1, 3, 16])
@pytest.mark.parametrize("act", sorted(tk.ACTIVATIONS, key=str))
def test_gemv_forms_match_float64_with_every_epilogue(form: int, bm: int, split: int, m: int, act: str | None) -> None:
    rng = np.random.default_rng(m + form)
    n, k = 37, 70  # neither divides the tiles: edge tiles along N and K
    x, w = array(rng, "bf16", (m, k)), array(rng, "bf16", (n, k))  # w in a Linear layer's (N, K) layout
    bias, res = array(rng, "f32", (n,)), array(rng, "bf16", (m, n))
    config = gemv(form, bm or _args.next_pow2(m), SPLIT=split)
    z = tk.matmul(tensor(x), tensor(w).T, bias=bias, activation=act, residual=tensor(res), config=config)
    assert z.dtype == tile.bf16
    assert_within(z.to_numpy(), *_reference(x, w.T, "bf16", "bf16", bias=bias, act=act, res=res))


@pytest.mark.parametrize(("form", "bm", "split"), FORMS)
@pytest.mark.parametrize(("dtype", "out"), [("f16", "f32"), ("f32", "f16"), ("bf16", "f32")])
def test_gemv_forms_on_row_major_weights_and_output_casts(form: int, bm: int, split: int, dtype: str, out: str) -> None:
    rng = np.random.default_rng(11)
    x, b = array(rng, dtype, (3, 45)), array(rng, dtype, (45, 29))  # b stored (K, N): the other layout
    z = tk.matmul(
        tensor(x), tensor(b), out_dtype=out, config=gemv(form, bm or 4, bn=16, bk=32, TMA=0, LAT=5, OCC=2, SPLIT=split)
    )
    assert z.dtype.name == out
    assert_within(z.to_numpy(), *_reference(x, b, dtype, out, bias=None, act=None, res=None))


@pytest.mark.parametrize(("form", "bm", "split"), FORMS)
def test_gemv_op_takes_inputs_in_flight(form: int, bm: int, split: int) -> None:
    # A decode chain: the GEMV's activation and residual are the previous launch's output, handed on in flight.
    rng = np.random.default_rng(12)
    x, w1, w2 = array(rng, "f32", (1, 24)), array(rng, "f32", (40, 24)), array(rng, "f32", (24, 40))
    config = gemv(form, bm or 1, SPLIT=split)
    first = tk.matmul_op(tensor(x), tensor(w1).T, config=config)
    op = first.then(lambda out: tk.matmul_op(out[0].unpartition(), tensor(w2).T, residual=tensor(x), config=config))
    got = op.sync()[0].unpartition().to_numpy()
    h = f64(x) @ f64(w1).T
    h_err = gemm_bound(x, w1.T, 24, "f32") + U32 * np.abs(h)  # the first GEMV's f32 output
    ref = h @ f64(w2).T + f64(x)
    bound = h_err @ np.abs(f64(w2).T) + gemm_bound(h, w2.T, 40, "f32") + 2 * U32 * np.abs(ref)
    assert_within(got, ref, bound)


def test_default_config_is_a_gemv_form_unless_n_is_too_small() -> None:
    wide = _gemm_configs.default(1, 4096, 4096)
    assert (wide["FORM"], wide["SPLIT"]) == (1, 1)
    assert _gemm_configs.default(16, 4096, 64)["FORM"] == 1
    small = _gemm_configs.default(1, 7, 100)  # one 32-wide tile for 4 interpreter blocks: K is split instead
    assert small.as_dict().get("FORM", 0) == 0
    assert small["SPLIT"] == 4
    assert _gemm_configs.default(17, 4096, 4096).as_dict().get("FORM", 0) == 0  # not a decode size


def test_gemv_default_widens_tiles_only_while_every_sm_keeps_two_blocks() -> None:
    sms = 132
    assert _gemv.default(1000, sms, gpu=True) is None  # 125 blocks of 8 leave SMs idle: the caller splits K
    widths = {n: getattr(_gemv.default(n, sms, gpu=True), "values", None) for n in (2560, 6144, 151936)}
    assert {n: dict(v or ())["BN"] for n, v in widths.items()} == {2560: 8, 6144: 16, 151936: 64}  # 320, 384 blocks
    # Below 32 columns the tiles are 128 deep: deeper ones spill registers (results/gemv_sass.json).
    assert {n: dict(v or ())["BK"] for n, v in widths.items()} == {2560: 128, 6144: 128, 151936: 128}


def test_decode_candidates_fit_the_shape() -> None:
    sms = 132
    few = _gemv.candidates(1, 2560, sms)
    assert {c["BN"] for c in few if c["SPLIT"] == 1} == {8, 16}  # 32-wide tiles would give 80 blocks for 132 SMs
    assert {c["FORM"] for c in few} == {1, 2, 3}
    assert all(c["BM"] * c["BN"] * c["BK"] <= 8192 for c in few if c["FORM"] == 2)
    many = _gemv.candidates(16, 2560, sms)
    assert {c["FORM"] for c in many} == {1, 3}  # no dot form above M = 4
    # Below 32 columns (all N = 2560 has) the mma runs on CUDA cores and spills at BK >= 256: 128-deep tiles only;
    # from 32 columns gemv_mma's weight tiles are 4096 or 8192 elements (the warp MMA, no spills).
    assert {c["BK"] for c in (*few, *many) if c["FORM"] in (1, 3) and c["BN"] < 32} == {128}
    assert {c["BN"] * c["BK"] for c in _gemv.candidates(1, 6144, sms) if c["FORM"] == 1 and c["BN"] >= 32} == {
        4096,
        8192,
    }
    # gemv_wx: its 16-wide tiles with the activation padded to 16 rows (8 where M <= 8) ...
    assert {(c["BM"], c["BN"]) for c in many if c["FORM"] == 3 and c["SPLIT"] == 1} == {(16, 16)}
    assert {(c["BM"], c["BN"]) for c in few if c["FORM"] == 3 and c["SPLIT"] == 1} == {(8, 16)}
    # ... and split over K at 64 and 128 wide (40 and 20 tiles): the least power of two filling 132 SMs, and twice it.
    assert {(c["BN"], c["SPLIT"]) for c in few if c["SPLIT"] > 1} == {(64, 4), (64, 8), (128, 8)}
    assert all(c["FORM"] == 3 for c in (*few, *many) if c["SPLIT"] > 1)
    assert not any(c["SPLIT"] > 1 for c in _gemv.candidates(1, 19456, sms))  # 152 tiles of 128 fill the SMs
    assert {c["BN"] for c in _gemv.candidates(1, 151936, sms) if c["FORM"] == 3} == {16, 64, 128}
    assert {c["BM"] for c in _gemv.candidates(3, 2560, sms) if c["FORM"] == 2} == {4}
    assert {c["BN"] for c in _gemv.candidates(1, 151936, sms) if c["FORM"] == 1} == {8, 64, 128}  # 8, two widest
    assert len(_gemv.candidates(1, 151936, sms)) <= 34
    assert not any(-(-2560 // c["BN"]) * c["SPLIT"] < sms for c in (*few, *many))  # every SM gets a block
    for config in (*few, *many, *_gemv.candidates(16, 151936, sms)):
        _gemm_configs.check_config(config, "matmul")  # every candidate passes the checks a hand-picked config gets


def test_decode_candidates_race_gemv_forms_against_skinny_tiles() -> None:
    """The skinny tiles stay candidates at every N: dropping them where N is large (a first version did) slowed
    Qwen3-4B decode on an H100 from 175 to 166 tokens/s."""
    for n in (40, 4096, 151936):
        candidates = _gemm_configs.decode_candidates(1, n)
        assert {c.as_dict().get("FORM", 0) for c in candidates} >= {0, 1, 2}
        assert set(_gemm_configs.SKINNY) <= set(candidates)


def test_fine_buckets_keep_decode_shapes_apart() -> None:
    shapes = (1024, 2560, 4096, 5120, 6144, 8192, 9728, 10240, 19456, 25600, 51200, 151936)
    buckets = [autotune.fine_bucket(n) for n in shapes]
    assert buckets == [1024, 2560, 4096, 5120, 6144, 8192, 10240, 10240, 20480, 28672, 57344, 163840]
    assert [autotune.fine_bucket(n) for n in (1, 16, 17, 18, 33)] == [1, 16, 20, 20, 40]
    assert all(n <= autotune.fine_bucket(n) <= 1.25 * n for n in range(17, 5000))


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"FORM": 4}, "FORM must be 0"),
        ({"SPLIT": 2}, "give SPLIT=1"),
        ({"FORM": 3, "SPLIT": 0}, "SPLIT >= 1"),
        ({"FORM": 3, "SPLIT": 17}, "splits K in 1..16"),
        ({"LAT": 0}, "LAT in 1..10"),
        ({"TMA": 2}, "TMA 0 or 1"),
        ({"OCC": 33}, "OCC in 0..32"),
        ({"BN": 12}, "powers of two"),
    ],
)
def test_bad_gemv_config_gets_a_typed_error(values: dict[str, int], message: str) -> None:
    config = tk.Config.of(**(gemv(1, 16).as_dict() | values))
    with pytest.raises(ArgumentError, match=message):
        tk.matmul(np.ones((1, 4), np.float16), np.ones((4, 2), np.float16), config=config)


def test_bmm_refuses_a_gemv_config() -> None:
    with pytest.raises(ArgumentError, match="are matmul's"):
        tk.bmm(np.ones((1, 2, 4), np.float16), np.ones((1, 4, 2), np.float16), config=gemv(1, 16))
