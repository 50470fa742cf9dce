"""matmul's fusions on the CPU interpreter: the RMSNorm prologue (``norm=``) and the SwiGLU epilogue (``swiglu=True``)
against float64 for every GEMV form, M from 1 to 16 and N, K off the tiles; above M = 16 the norm chained before the
big GEMM (its SwiGLU epilogue: test_gemm_glu.py); the op's outputs in a chain; the tuner's fused candidates; and the
misuse errors."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
import tile.frontend as tile
import tile.kernels as tk
from helpers_kernels import U32, UNIT, array, assert_within, cast_error, f64, gemm_bound, tensor
from tile.frontend import ArgumentError
from tile.kernels import _fused, _gemm_configs, _gemv, autotune

EPS = 1e-5


def gemv(form: int, bm: int, bn: int = 8, bk: int = 16, **hints: int) -> tk.Config:
    values = {"LAT": 3, "TMA": 1, "OCC": 0, "GROUP": 1, "SPLIT": 1} | hints
    return tk.Config.of(FORM=form, BM=bm, BN=bn, BK=bk, **values)


# (FORM, BM): BM 0 is M rounded up to a power of two (gemv_dot); gemv_wx at 8 (M = 16 spans two row tiles) and 16.
FORMS = [
    pytest.param(1, 16, id="mma"),
    pytest.param(2, 0, id="dot"),
    pytest.param(3, 8, id="wx8"),
    pytest.param(3, 16, id="wx16"),
]


def _config(form: int, bm: int, m: int, norm_form: int | None = None) -> tk.Config:
    bm = bm or min(16, 1 << (m - 1).bit_length())
    extra = {} if norm_form is None else {"NORM": norm_form}
    return gemv(form, bm, bk=16 if form != 2 else 8, **extra)


def _normed(x: np.ndarray[Any, Any], g: np.ndarray[Any, Any], dtype: str) -> tuple[Any, Any]:
    """rmsnorm(x, g) in float64 and a bound on the kernel's normed operand: f32 math over K, rounded to ``dtype``."""
    xd = f64(x)
    h = xd / np.sqrt(np.mean(xd * xd, axis=1, keepdims=True) + EPS) * f64(g)
    return h, (UNIT[dtype] + (x.shape[1] + 8) * U32) * np.abs(h)


def _swiglu_ref(h: Any, h_err: Any, wg: Any, wu: Any, dtype: str) -> tuple[Any, Any]:
    """silu(h @ wg) * (h @ wu) and its bound, given the activation ``h`` within ``h_err``."""
    k = h.shape[1]
    gate, up = h @ f64(wg), h @ f64(wu)
    eg = gemm_bound(h, wg, k, dtype) + h_err @ np.abs(f64(wg)) + U32 * np.abs(gate)
    eu = gemm_bound(h, wu, k, dtype) + h_err @ np.abs(f64(wu)) + U32 * np.abs(up)
    silu = gate / (1.0 + np.exp(-gate))
    ref = silu * up
    return ref, 1.2 * eg * np.abs(up) + np.abs(silu) * eu + 8 * U32 * np.abs(ref)


@pytest.mark.parametrize(("form", "bm"), FORMS)
@pytest.mark.parametrize("m", [1, 5, 16])
@pytest.mark.parametrize("dtype", ["bf16", "f32"])
@pytest.mark.parametrize("norm_form", [1, 2], ids=["scale-first", "one-pass"])
def test_norm_prologue_matches_float64(form: int, bm: int, m: int, dtype: str, norm_form: int) -> None:
    rng = np.random.default_rng(m + 7 * form)
    n, k = 37, 70  # neither divides the tiles
    x, w, g = array(rng, dtype, (m, k), scale=3.0), array(rng, dtype, (n, k)), array(rng, "f32", (k,))
    config = _config(form, bm, m, norm_form)
    z = tk.matmul(tensor(x), tensor(w).T, norm=tensor(g), eps=EPS, config=config)
    h, h_err = _normed(x, g, dtype)
    ref = h @ f64(w).T
    bound = gemm_bound(h, w.T, k, dtype) + h_err @ np.abs(f64(w).T) + 2 * U32 * np.abs(ref) + cast_error(dtype, ref)
    assert z.shape == (m, n)
    assert_within(z.to_numpy(), ref, bound)


@pytest.mark.parametrize(("form", "bm"), FORMS)
@pytest.mark.parametrize("m", [1, 3, 16])
@pytest.mark.parametrize("norm", [0, 1, 2], ids=["no-norm", "norm-scale-first", "norm-one-pass"])
def test_swiglu_epilogue_matches_float64(form: int, bm: int, m: int, norm: int) -> None:
    rng = np.random.default_rng(3 * m + form)
    inner, k = 21, 45  # I and K off the tiles; the up half starts mid-tile of the fused weight
    x, wgu, g = array(rng, "bf16", (m, k)), array(rng, "bf16", (2 * inner, k)), array(rng, "bf16", (k,))
    extra: dict[str, Any] = {"norm": tensor(g), "eps": EPS} if norm else {}
    config = _config(form, bm, m, norm or None)
    z = tk.matmul(tensor(x), tensor(wgu).T, swiglu=True, config=config, **extra)
    h, h_err = _normed(x, g, "bf16") if norm else (f64(x), np.zeros((m, k)))
    ref, err = _swiglu_ref(h, h_err, wgu[:inner].T, wgu[inner:].T, "bf16")
    assert z.shape == (m, inner)
    assert z.dtype == tile.bf16
    assert_within(z.to_numpy(), ref, err + cast_error("bf16", ref))


def test_fused_decode_matches_the_unfused_pair() -> None:
    # The product the model's unfused steps compute (rmsnorm, then matmul; matmul, then swiglu_fused), within the
    # bf16 rounding the fused forms do differently (the normed operand's, the gate/up sums').
    rng = np.random.default_rng(5)
    x, w, g = array(rng, "bf16", (1, 96)), array(rng, "bf16", (80, 96), scale=0.1), array(rng, "bf16", (96,))
    fused = tk.matmul(tensor(x), tensor(w).T, norm=tensor(g), eps=EPS).to_numpy()
    unfused = tk.matmul(tk.rmsnorm(tensor(x), tensor(g), eps=EPS), tensor(w).T).to_numpy()
    np.testing.assert_allclose(f64(fused), f64(unfused), rtol=2**-7, atol=2**-7)
    gu_fused = tk.matmul(tensor(x), tensor(w).T, swiglu=True).to_numpy()
    gu_unfused = tk.swiglu_fused(tk.matmul(tensor(x), tensor(w).T)).to_numpy()
    np.testing.assert_allclose(f64(gu_fused), f64(gu_unfused), rtol=2**-6, atol=2**-6)


@pytest.mark.parametrize(("norm", "swiglu"), [(True, False), (False, True), (True, True)])
def test_big_m_runs_the_norm_then_the_big_gemm(norm: bool, swiglu: bool) -> None:
    rng = np.random.default_rng(9)
    m, inner, k = 20, 19, 40
    x, wgu, g = array(rng, "f32", (m, k)), array(rng, "f32", (2 * inner, k)), array(rng, "f32", (k,))
    extra: dict[str, Any] = {"norm": tensor(g), "eps": EPS} if norm else {}
    z = tk.matmul(tensor(x), tensor(wgu).T, swiglu=swiglu, **extra).to_numpy()
    h, h_err = _normed(x, g, "f32") if norm else (f64(x), np.zeros((m, k)))
    if swiglu:
        ref, err = _swiglu_ref(h, h_err, wgu[:inner].T, wgu[inner:].T, "f32")
    else:
        ref = h @ f64(wgu).T
        err = gemm_bound(h, wgu.T, k, "f32") + h_err @ np.abs(f64(wgu).T) + 2 * U32 * np.abs(ref)
    assert_within(z, ref, err + cast_error("f32", ref))


@pytest.mark.parametrize("m", [1, 20])
def test_fused_op_hands_back_the_unnormed_rows_in_flight(m: int) -> None:
    # A decode step: x is the residual stream, in flight from the previous launch; norm= projects its normed rows
    # and hands x back as the op's second output, for the residual add after.
    rng = np.random.default_rng(m)
    x, w, g = array(rng, "f32", (m, 24)), array(rng, "f32", (30, 24)), array(rng, "f32", (24,))
    first = tk.matmul_op(tensor(x), tensor(np.eye(24, dtype=np.float32)))  # x @ I: x in flight

    def project(out: tuple[Any, ...]) -> Any:
        return tk.matmul_op(out[0].unpartition(), tensor(w).T, norm=tensor(g), eps=EPS)

    done = first.then(project).sync()
    h, h_err = _normed(x, g, "f32")
    ref = h @ f64(w).T
    bound = gemm_bound(h, w.T, 24, "f32") + h_err @ np.abs(f64(w).T) + 4 * U32 * np.abs(ref)
    assert_within(done[0].unpartition().to_numpy(), ref, bound)
    np.testing.assert_array_equal(done[1].to_numpy(), x)


def test_fused_candidates_are_the_plain_ones_split_included() -> None:
    found = _gemv.candidates(1, 9728, 132) + _gemm_configs.SKINNY  # decode_candidates on an H100 / H200
    fused = _fused.Fusion(None, EPS, swiglu=True)
    kept = _fused.candidates(found, fused)
    assert all(c.get("FORM", 0) in (1, 2, 3) or c["SPLIT"] > 1 for c in kept)
    assert any(c.get("FORM", 0) == 0 and c["SPLIT"] == 1 for c in found)  # the persistent skinny tile, left out
    dropped = [c for c in found if c not in kept]
    assert all(c.get("FORM", 0) in (0, 2) for c in dropped)
    assert all(c.get("FORM", 0) == 2 or c["SPLIT"] == 1 for c in dropped)  # every split config is kept
    assert all(c["BM"] * c["BN"] * c["BK"] * 2 <= 8192 for c in kept if c.get("FORM", 0) == 2)
    assert all("NORM" not in c.as_dict() for c in kept)
    qkv = _gemv.candidates(1, 6144, 132)  # where the plain tuner has gemv_wx splits to pick from
    assert any(c.get("FORM", 0) == 3 and c["SPLIT"] > 1 for c in _fused.candidates(qkv, fused))
    normed = _fused.candidates(found, _fused.Fusion(tensor(np.ones(3, np.float32)), EPS, swiglu=False))
    assert sorted(c["NORM"] for c in normed) == sorted([1, 2] * (len(normed) // 2))  # both prologue forms, each
    assert {c.as_dict().get("FORM", 0) for c in normed if c["SPLIT"] > 1} == {0, 3}  # skinny and gemv_wx splits
    assert _fused.default(16, 132, gpu=True)["SPLIT"] == 1  # too few columns for _gemv.default: 8 wide, no split
    assert _fused.Fusion(tensor(np.ones(3, np.float32)), EPS, swiglu=True).tag() == "norm+swiglu"


def test_fused_tuning_key_is_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    keys: list[dict[str, object]] = []
    real = autotune.Autotuner.choose

    def spy(self: autotune.Autotuner, key: dict[str, object], *args: Any, **kwargs: Any) -> tk.Config:
        keys.append(dict(key))
        return real(self, key, *args, **kwargs)

    monkeypatch.setattr(autotune.Autotuner, "choose", spy)
    x, w = tensor(np.ones((1, 8), np.float32)), tensor(np.ones((16, 8), np.float32))
    tk.matmul(x, w.T)
    tk.matmul(x, w.T, swiglu=True)
    tk.matmul(x, w.T, norm=tensor(np.ones(8, np.float32)))
    assert [k.get("fused") for k in keys] == [None, "swiglu", "norm"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"norm": np.ones(7, np.float32)}, "pass the \\(8,\\) RMSNorm weight"),
        ({"norm": np.ones((1, 8), np.float32)}, "pass the \\(8,\\) RMSNorm weight"),
        ({"norm": np.ones(8, np.int32)}, "norm"),
        ({"norm": np.ones(8, np.float32), "eps": "small"}, "eps must be a real number"),
        ({"swiglu": 1}, "swiglu must be True or False"),
        ({"swiglu": True, "bias": np.ones(14, np.float32)}, "pass no bias, activation or residual"),
        ({"swiglu": True, "activation": "relu"}, "pass no bias, activation or residual"),
        ({"swiglu": True, "config": tk.Config.of(BM=16, BN=32, BK=32, GROUP=1, SPLIT=1)}, "persistent skinny GEMM"),
        ({"norm": np.ones(8, np.float32), "config": tk.Config.of(BM=16, BN=32, BK=32, GROUP=1, SPLIT=1)}, "GEMV"),
        ({"swiglu": True, "config": gemv(3, 8, SPLIT=17)}, "splits K in 1..16 runs"),
        ({"swiglu": True, "config": gemv(2, 1, bn=64, bk=128)}, "budget"),
        ({"norm": np.ones(8, np.float32), "config": gemv(1, 16, NORM=3)}, "NORM picks the norm= prologue's form"),
        ({"swiglu": True, "config": gemv(1, 16, NORM=2)}, "give it only with norm="),
        ({"config": gemv(1, 16, NORM=1)}, "give it only with norm="),
    ],
)
def test_fusion_misuse_gets_a_typed_error(kwargs: dict[str, Any], message: str) -> None:
    b = np.ones((8, 14), np.float32)
    with pytest.raises(ArgumentError, match=message):
        tk.matmul(np.ones((1, 8), np.float32), b, **kwargs)


def test_swiglu_needs_an_even_width_and_fusions_refuse_f8() -> None:
    with pytest.raises(ArgumentError, match="needs b of \\(K, 2 \\* I\\) columns"):
        tk.matmul(np.ones((1, 8), np.float32), np.ones((8, 7), np.float32), swiglu=True)
    x8 = tile.zeros(tile.f8e4m3fn, [1, 8])
    for fusion in ({"swiglu": True}, {"norm": np.ones(8, np.float32)}):
        with pytest.raises(ArgumentError, match="not f8e4m3fn"):
            tk.matmul(x8, tile.zeros(tile.f8e4m3fn, [8, 8]), **fusion)


# The split-K forms: (FORM, BM), the skinny GEMM tile (0) and gemv_wx (3); K = 70 is 5 tiles of 16, so SPLIT 2 and 3
# leave a short last run and 8 is cut to 5 runs of one tile.
SPLIT_FORMS = [pytest.param((0, 16), id="skinny"), pytest.param((3, 8), id="wx8"), pytest.param((3, 16), id="wx16")]


def _split(form: int, bm: int, split: int, norm: int) -> tk.Config:
    values: dict[str, int] = {"BM": bm, "BN": 8, "BK": 16, "GROUP": 1, "SPLIT": split}
    if form:
        values |= {"FORM": form, "LAT": 3, "TMA": 1, "OCC": 0}
    return tk.Config.of(**values, **({"NORM": norm} if norm else {}))


@pytest.mark.parametrize("layout", SPLIT_FORMS)
@pytest.mark.parametrize("rows", [(1, 2), (5, 3), (16, 8)], ids=["m1-split2", "m5-split3", "m16-split8"])
@pytest.mark.parametrize(
    ("norm", "swiglu"),
    [(1, False), (2, False), (0, True), (1, True), (2, True)],
    ids=["norm-scale-first", "norm-one-pass", "swiglu", "norm-scale-first-swiglu", "norm-one-pass-swiglu"],
)
def test_split_k_fusions_match_float64(layout: tuple[int, int], rows: tuple[int, int], norm: int, swiglu: bool) -> None:
    (form, bm), (m, split) = layout, rows
    rng = np.random.default_rng(11 * m + form + norm)
    n, k = 21, 70  # off the tiles; with swiglu the up half starts mid-tile of the fused weight
    x, w, g = array(rng, "bf16", (m, k), scale=3.0), array(rng, "bf16", ((2 if swiglu else 1) * n, k)), None
    extra: dict[str, Any] = {}
    if norm:
        g = array(rng, "bf16", (k,))
        extra = {"norm": tensor(g), "eps": EPS}
    z = tk.matmul(tensor(x), tensor(w).T, swiglu=swiglu, config=_split(form, bm, split, norm), **extra)
    h, h_err = _normed(x, g, "bf16") if g is not None else (f64(x), np.zeros((m, k)))
    if swiglu:
        ref, err = _swiglu_ref(h, h_err, w[:n].T, w[n:].T, "bf16")
    else:
        ref = h @ f64(w).T
        err = gemm_bound(h, w.T, k, "bf16") + h_err @ np.abs(f64(w).T) + 2 * U32 * np.abs(ref)
    assert z.shape == (m, n)
    assert_within(z.to_numpy(), ref, err + cast_error("bf16", ref))


@pytest.mark.parametrize("form", [0, 3])
def test_split_fused_op_hands_back_the_unnormed_rows_in_flight(form: int) -> None:
    rng = np.random.default_rng(form)
    x, w, g = array(rng, "f32", (2, 40)), array(rng, "f32", (2 * 12, 40)), array(rng, "f32", (40,))
    first = tk.matmul_op(tensor(x), tensor(np.eye(40, dtype=np.float32)))  # x @ I: x in flight
    config = _split(form, 16, 3, 2)

    def project(out: tuple[Any, ...]) -> Any:
        return tk.matmul_op(out[0].unpartition(), tensor(w).T, norm=tensor(g), eps=EPS, swiglu=True, config=config)

    done = first.then(project).sync()
    h, h_err = _normed(x, g, "f32")
    ref, err = _swiglu_ref(h, h_err, w[:12].T, w[12:].T, "f32")
    assert_within(done[0].unpartition().to_numpy(), ref, err + 4 * U32 * np.abs(ref))
    np.testing.assert_array_equal(done[1].to_numpy(), x)


@pytest.mark.parametrize("form", [1, 2, 3])
@pytest.mark.parametrize("m", [17, 64])
def test_a_norm_config_above_the_gemv_rows_is_refused_not_ignored(m: int, form: int) -> None:
    """Above M = 16 the norm runs apart and the big GEMM takes the config: a ``NORM`` key there (valid or not, as
    ``NORM=3`` is refused at M <= 16) would be ignored, so it is refused, by both the call and the op builder."""
    x, b = np.ones((m, 8), np.float32), np.ones((8, 14), np.float32)
    config = tk.Config.of(BM=16, BN=32, BK=32, GROUP=1, SPLIT=1, NORM=form)
    with pytest.raises(ArgumentError, match="is a GEMV form \\(FORM, NORM\\); above M = 16"):
        tk.matmul(x, b, norm=np.ones(8, np.float32), config=config)
    with pytest.raises(ArgumentError, match="is a GEMV form \\(FORM, NORM\\); above M = 16"):
        tk.matmul_op(x, b, norm=np.ones(8, np.float32), config=config)
