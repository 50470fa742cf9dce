"""attention, decode_attention, append_kv on the CPU interpreter: float64 references (GQA through repeated KV heads),
odd sequence lengths, both head dims and dtypes, causal and not, and the refusals."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
import tile.frontend as tile
import tile.kernels as tk
from helpers_kernels import UNIT, array, assert_within, cast_error, f64, tensor
from tile.frontend import ArgumentError
from tile.kernels._source import kernels

Array = np.ndarray[Any, Any]


def reference(
    q: Array, k: Array, v: Array, causal: bool, scale: float | None = None, *, offset: int | None = None
) -> tuple[Array, Array]:
    """softmax(q k^T * scale) v in float64 for (B, H, S, D) arrays with GQA, and the bound ``P @ |V|`` scale; causal
    query ``i`` sits at key position ``offset + i`` (default ``Sk - Sq``)."""
    q, k, v = f64(q), f64(k), f64(v)
    group = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    s = q @ k.swapaxes(-1, -2) * (q.shape[-1] ** -0.5 if scale is None else scale)
    sq, sk = s.shape[-2:]
    if causal:
        off = sk - sq if offset is None else offset
        s = np.where(np.arange(sk)[None, :] <= np.arange(sq)[:, None] + off, s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    out: Array = p @ v
    mag: Array = p @ np.abs(v)
    return out, mag


def bound(dtype: str, ref: Array, mag: Array) -> Array:
    # P is rounded to the input dtype before the PV product (UNIT[dtype] per term), scores and exp2 add a few f32
    # units per element of the row; then the output cast.
    return f64((3 * UNIT[dtype] + 1e-5) * mag + cast_error(dtype, ref))


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("case", [(1, 4, 2, 37, 37), (2, 3, 1, 19, 19), (1, 2, 2, 9, 40)])
def test_attention(dtype: str, d: int, causal: bool, case: tuple[int, int, int, int, int]) -> None:
    b, hq, hkv, sq, sk = case  # batch, query heads, KV heads, queries, keys
    rng = np.random.default_rng(sq + d)
    q, k, v = array(rng, dtype, (b, hq, sq, d)), array(rng, dtype, (b, hkv, sk, d)), array(rng, dtype, (b, hkv, sk, d))
    z = tk.attention(tensor(q), tensor(k), tensor(v), causal=causal)
    assert z.shape == (b, hq, sq, d)
    assert z.dtype.name == dtype
    ref, mag = reference(q, k, v, causal)
    assert_within(z.to_numpy(), ref, bound(dtype, ref, mag))


def test_attention_configs_scale_and_numpy_inputs() -> None:
    rng = np.random.default_rng(3)
    q, k, v = (array(rng, "f16", (1, 2, 45, 64)) for _ in range(3))
    ref, mag = reference(q, k, v, True, scale=0.05)
    for config in (tk.Config.of(BM=32, BN=16), tk.Config.of(BM=16, BN=32)):
        z = tk.attention(q, k, v, causal=True, scale=0.05, config=config)  # numpy arrays, borrowed through DLPack
        assert_within(z.to_numpy(), ref, bound("f16", ref, mag))


def test_attention_tuning_races_chained_samples_over_copies(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The prefill tuner (on the GPU) races the candidates with interleaved samples; a sample is _LAUNCHES launches
    chained and waited for once, rotating over scratch copies larger than L2 together; the call runs the winner."""
    from tile.kernels import _attention, autotune

    launches: list[tuple[int, int, int]] = []  # (BM, BN, q's address) of every fmha launch
    real = kernels

    class Spy:
        def __init__(self, stem: str) -> None:
            self.real = real(stem)

        def fmha(self, z: Any, q: tile.Tensor, *args: Any, **consts: Any) -> Any:
            launches.append((z.tile_shape[1], consts["BN"], q.data_ptr()))
            return self.real.fmha(z, q, *args, **consts)

    monkeypatch.setattr(_attention, "kernels", Spy)
    configs = (tk.Config.of(BM=16, BN=16), tk.Config.of(BM=32, BN=16))
    monkeypatch.setattr(_attention, "_PREFILL", configs)
    raced: list[int] = []

    def race(fns: Any) -> list[float | None]:
        raced.append(len(fns))
        for fn in fns:
            fn()
        return [2.0, 1.0]  # the second config is the faster

    tuner = autotune.Autotuner("attention", source="s", timer=lambda fn: 0.0, cache_dir=tmp_path, race=race)
    old = autotune.set_tuner("attention", tuner)
    try:
        rng = np.random.default_rng(5)
        q, k, v = (array(rng, "f16", (1, 2, 20, 16)) for _ in range(3))
        z = tk.attention(tensor(q), tensor(k), tensor(v), causal=False)
    finally:
        autotune.set_tuner("attention", old)
    ref, mag = reference(q, k, v, False)
    assert_within(z.to_numpy(), ref, bound("f16", ref, mag))
    n = _attention._LAUNCHES
    assert raced == [2]
    assert len(launches) == 2 * n + 1
    assert [c[:2] for c in launches] == [(16, 16)] * n + [(32, 16)] * (n + 1)
    scratch = {c[2] for c in launches[:n]}
    assert len(scratch) == n  # tiny operands: each launch of a sample reads its own copy
    assert launches[-1][2] not in scratch  # the call itself runs on the caller's q with the winner


def test_attention_call_is_one_launch_and_its_output(monkeypatch: pytest.MonkeyPatch) -> None:
    """A call does what ``examples/attention.py``'s launch does, nothing more: one ``fmha`` launch, one allocation
    (the output), no copy of q, k or v (a copy allocates), no toolchain lookup for the tuning key after the first
    call, and five tensor handles (a view per input, the output and its 4-D view). A call waits for
    its kernel, so its host time adds to it: on an H200 host each handle cost 13-17 us and the toolchain lookup
    35 us (about 1 ms here); the kernel of a 1k-token d64 FMHA runs 0.34 ms."""
    import tile.compiler
    from tile.frontend import _execute, _launch
    from tile.frontend._storage import Storage
    from tile.frontend._tensor import Tensor
    from tile.kernels import autotune

    rng = np.random.default_rng(8)
    q, k, v = (array(rng, "f16", (1, 2, 24, 16)) for _ in range(3))
    tq, tk_, tv = tensor(q), tensor(k), tensor(v)
    found = tile.compiler.toolchain()
    counts = {"launch": 0, "alloc": 0, "toolchain": 0, "handles": 0}
    real_run, real_owned, real_make = _execute.run_cpu, Storage.host_owned, Tensor._make

    def run_cpu(*args: Any) -> None:
        counts["launch"] += 1
        real_run(*args)

    def host_owned(cls: type[Storage], nbytes: int) -> Storage:
        counts["alloc"] += 1
        return real_owned(nbytes)

    def toolchain() -> Any:
        counts["toolchain"] += 1
        return found

    def make(cls: type[Tensor], *args: Any, **kwargs: Any) -> Tensor:
        counts["handles"] += 1
        return real_make(*args, **kwargs)

    monkeypatch.setattr(_launch, "run_cpu", run_cpu)
    monkeypatch.setattr(Storage, "host_owned", classmethod(host_owned))
    monkeypatch.setattr(tile.compiler, "toolchain", toolchain)
    monkeypatch.setattr(Tensor, "_make", classmethod(make))
    monkeypatch.setattr(autotune, "device_arch", lambda: "sm_90")  # the GPU's key, which names tileiras
    monkeypatch.setattr(autotune, "_ENVIRONMENTS", {})
    outputs = [tk.attention(tq, tk_, tv, causal=True) for _ in range(3)]
    assert counts == {"launch": 3, "alloc": 3, "toolchain": 1, "handles": 15}
    ref, mag = reference(q, k, v, True)
    for z in outputs:
        assert_within(z.to_numpy(), ref, bound("f16", ref, mag))
    tq.reshape(2, 24, 16)  # the caller's handles stay usable


def test_attention_op_flattened() -> None:
    rng = np.random.default_rng(4)
    q, k, v = (array(rng, "bf16", (2, 21, 64)) for _ in range(3))
    out = tk.attention_op(tensor(q), tensor(k), tensor(v), causal=False).sync()
    ref, mag = reference(q[None], k[None], v[None], False)
    assert_within(out[0].unpartition().to_numpy(), ref[0], bound("bf16", ref[0], mag[0]))


@pytest.mark.parametrize(
    ("shapes", "kwargs", "message"),
    [
        (((1, 2, 8, 48), (1, 2, 8, 48)), {}, "one of [16, 32, 64, 128, 256]"),
        (((1, 3, 8, 64), (1, 2, 8, 64)), {}, "Hkv must divide Hq"),
        (((1, 2, 8, 64), (1, 2, 4, 64)), {"causal": True}, "at least as many keys (4) as queries (8)"),
        (((2, 2, 8, 64), (1, 2, 8, 64)), {}, "q has batch 2 but k has 1"),
        (((8, 64),), {}, "must be (B, H, S, D)"),
    ],
)
def test_attention_refusals(shapes: tuple[tuple[int, ...], ...], kwargs: dict[str, Any], message: str) -> None:
    q = tile.zeros(tile.f16, list(shapes[0]))
    kv = tile.zeros(tile.f16, list(shapes[-1]))
    with pytest.raises(ArgumentError) as err:
        tk.attention(q, kv, kv, causal=kwargs.get("causal", False))
    assert message in str(err.value)


def test_attention_refuses_dtype_and_strided() -> None:
    x = tile.zeros(tile.f32, [1, 1, 8, 64])
    with pytest.raises(ArgumentError, match="supported: bf16, f16"):
        tk.attention(x, x, x, causal=False)
    y = tile.zeros(tile.f16, [1, 8, 2, 64]).permute(0, 2, 1, 3)
    with pytest.raises(ArgumentError, match="strided view"):
        tk.attention(y, y, y, causal=False)


def _decode_ref(q: Array, kc: Array, vc: Array, lengths: list[int]) -> tuple[Array, Array]:
    outs, mags = [], []
    for b, n in enumerate(lengths):
        if n == 0:
            outs.append(np.zeros(q.shape[1:]))
            mags.append(np.zeros(q.shape[1:]))
            continue
        r, m = reference(q[b : b + 1, :, None], kc[b : b + 1, :, :n], vc[b : b + 1, :, :n], False)
        outs.append(r[0, :, 0])
        mags.append(m[0, :, 0])
    return np.stack(outs), np.stack(mags)


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("case", [(4, 1, [45], None), (6, 2, [0, 50, 17], 3), (2, 2, [1, 8], 1)])
def test_decode_attention(dtype: str, d: int, case: tuple[int, int, list[int], int | None]) -> None:
    hq, hkv, lengths, splits = case
    rng = np.random.default_rng(d + hq)
    b, s = len(lengths), 50
    q = array(rng, dtype, (b, hq, d))
    kc, vc = array(rng, dtype, (b, hkv, s, d)), array(rng, dtype, (b, hkv, s, d))
    z = tk.decode_attention(tensor(q), tensor(kc), tensor(vc), lengths, splits=splits)
    assert z.shape == (b, hq, d)
    ref, mag = _decode_ref(q, kc, vc, lengths)
    assert_within(z.to_numpy(), ref, bound(dtype, ref, mag))


@pytest.mark.parametrize(
    ("splits", "kernels_run", "chunk"),
    [
        (1, ["decode_one"], None),
        (3, ["decode_split", "decode_combine"], 4),
        (20, ["decode_split", "decode_combine"], 16),
    ],
)
def test_decode_forms(monkeypatch: pytest.MonkeyPatch, splits: int, kernels_run: list[str], chunk: int | None) -> None:
    """One split runs one kernel (no partials); more run the split kernel into a whole number of the combine's
    chunks (20 splits: two chunks of 16, 12 empty slots) and the combine; the results agree with float64."""
    from tile.kernels import _decode

    ran: list[tuple[str, dict[str, Any], tuple[int, ...]]] = []

    class Spy:
        def __init__(self, stem: str) -> None:
            self.real = kernels(stem)

        def __getattr__(self, name: str) -> Any:
            fn = getattr(self.real, name)

            def launch(*args: Any, **consts: Any) -> Any:
                ran.append((name, consts, tuple(args[0].shape)))
                return fn(*args, **consts)

            return launch

    monkeypatch.setattr(_decode, "kernels", Spy)
    rng = np.random.default_rng(splits)
    lengths, s, d = [300, 0, 129], 320, 64
    q = array(rng, "bf16", (3, 4, d))
    kc, vc = array(rng, "bf16", (3, 1, s, d)), array(rng, "bf16", (3, 1, s, d))
    z = tk.decode_attention(tensor(q), tensor(kc), tensor(vc), lengths, splits=splits)
    ref, mag = _decode_ref(q, kc, vc, lengths)
    assert_within(z.to_numpy(), ref, bound("bf16", ref, mag))
    assert [name for name, *_ in ran] == kernels_run
    if chunk is not None:
        assert ran[1][1]["SC"] == chunk
        assert ran[0][2][1] % chunk == 0  # the partials' split slots: a whole number of chunks
        assert ran[0][2][1] >= splits


def test_decode_attention_rows_and_tensor_lengths() -> None:
    rng = np.random.default_rng(8)
    q, kc, vc = array(rng, "bf16", (1, 8, 64)), array(rng, "bf16", (1, 2, 33, 64)), array(rng, "bf16", (1, 2, 33, 64))
    lengths = tile.from_numpy(np.array([20], np.int32))
    out = tk.decode_attention_op(tensor(q.reshape(1, 8 * 64)), tensor(kc[0]), tensor(vc[0]), lengths, plus=1).sync()
    ref, mag = _decode_ref(q, kc, vc, [21])  # plus=1: the length is the new token's position + 1
    got = out[0].unpartition().to_numpy().reshape(1, 8, 64)
    assert_within(got, ref, bound("bf16", ref, mag))


def test_decode_refusals() -> None:
    q, kc = tile.zeros(tile.f16, [2, 4, 64]), tile.zeros(tile.f16, [2, 2, 16, 64])
    with pytest.raises(ArgumentError, match=r"lengths holds 17, outside \[0, 16\]"):
        tk.decode_attention(q, kc, kc, [3, 17])
    with pytest.raises(ArgumentError, match=r"expected \[2\]"):
        tk.decode_attention(q, kc, kc, [3])
    with pytest.raises(ArgumentError, match="Hkv dividing Hq"):
        tk.decode_attention(tile.zeros(tile.f16, [2, 3, 64]), kc, kc, [1, 1])
    with pytest.raises(ArgumentError, match="splits must be >= 1"):
        tk.decode_attention(q, kc, kc, [1, 1], splits=0)


@pytest.mark.parametrize("scale", [0.0, -0.125, math.inf, math.nan])
def test_a_scale_that_would_unhide_masked_scores_is_refused(scale: float) -> None:
    """The kernels hide masked scores with a large negative number before the scale: a negative scale made them the
    largest scores (a partial last key tile attended to padding), so only a positive finite scale is taken."""
    q, kc = tile.zeros(tile.f16, [2, 4, 64]), tile.zeros(tile.f16, [2, 2, 16, 64])
    with pytest.raises(ArgumentError, match="scale must be a positive finite number"):
        tk.decode_attention(q, kc, kc, [3, 5], scale=scale)
    qp = tile.zeros(tile.f16, [1, 2, 16, 64])
    with pytest.raises(ArgumentError, match="scale must be a positive finite number"):
        tk.attention(qp, qp, qp, causal=True, scale=scale)


def test_append_kv_writes_only_the_new_rows() -> None:
    rng = np.random.default_rng(5)
    kc, vc = array(rng, "bf16", (2 * 3, 21, 64)), array(rng, "bf16", (2 * 3, 21, 64))
    kn, vn = array(rng, "bf16", (2, 3, 4, 64)), array(rng, "bf16", (2, 3, 4, 64))
    k2, v2 = tk.append_kv(tensor(kc), tensor(vc), tensor(kn), tensor(vn), [0, 17])
    want_k, want_v = kc.copy().reshape(2, 3, 21, 64), vc.copy().reshape(2, 3, 21, 64)
    want_k[0, :, 0:4], want_k[1, :, 17:21] = kn[0], kn[1]
    want_v[0, :, 0:4], want_v[1, :, 17:21] = vn[0], vn[1]
    np.testing.assert_array_equal(f64(k2.to_numpy()), f64(want_k.reshape(6, 21, 64)))
    np.testing.assert_array_equal(f64(v2.to_numpy()), f64(want_v.reshape(6, 21, 64)))


def test_append_kv_refusals_and_kernel_check() -> None:
    kc, new = tile.zeros(tile.f16, [2, 8, 64]), tile.zeros(tile.f16, [2, 3, 64])
    with pytest.raises(ArgumentError, match=r"positions holds 6, outside \[0, 5\]"):
        tk.append_kv(kc, tile.zeros(tile.f16, [2, 8, 64]), new, new, [6])
    with pytest.raises(ArgumentError, match=r"cache = cache\.reshape"):
        tk.append_kv(tile.zeros(tile.f16, [1, 2, 8, 64]), kc, new, new, [0])
    # The kernel asserts the position itself: a bad one reaching it faults instead of writing.
    a, b = (
        tile.zeros(tile.f16, [2, 8, 64]).partition([1, 8, 64]),
        tile.zeros(tile.f16, [2, 8, 64]).partition([1, 8, 64]),
    )
    bad = tile.from_numpy(np.array([7], np.int32))
    with pytest.raises(tile.KernelFaultError, match="outside the cache"):
        kernels("_attention_kernels").kv_append(a, b, new, new, bad, HKV=2).sync()


def test_prefill_then_decode_agree() -> None:
    # One sequence: attention over all 12 positions, causal, equals decode attention of the last query.
    rng = np.random.default_rng(6)
    q, k, v = (array(rng, "f16", (1, 4, 12, 64)) for _ in range(3))
    full = tk.attention(tensor(q), tensor(k), tensor(v), causal=True).to_numpy()
    last = tk.decode_attention(tensor(q[:, :, -1]), tensor(k), tensor(v), [12]).to_numpy()
    assert math.isclose(float(np.abs(f64(full[:, :, -1]) - f64(last)).max()), 0.0, abs_tol=2e-3)


def test_decode_step_as_one_chain() -> None:
    # Two append_kv_op (the second takes the cache partitions the first handed on, in flight) and a
    # decode_attention_op reading the caches in flight: one chain, one wait; the caches come back at the end.
    rng = np.random.default_rng(9)
    hq, hkv, s, d = 4, 2, 24, 64
    kc, vc = np.zeros((hkv, s, d), np.float16), np.zeros((hkv, s, d), np.float16)
    kc[:, :5], vc[:, :5] = array(rng, "f16", (hkv, 5, d)), array(rng, "f16", (hkv, 5, d))
    new = [(array(rng, "f16", (hkv, 1, d)), array(rng, "f16", (hkv, 1, d))) for _ in range(2)]
    q = array(rng, "f16", (1, hq * d))
    lengths = tile.from_numpy(np.array([6], np.int32))  # the last new token's position; plus=1 makes it a length

    def second(out: Any) -> Any:
        return tk.append_kv_op(out[0], out[1], tensor(new[1][0]), tensor(new[1][1]), [6])

    def attend(out: Any) -> Any:
        return tk.decode_attention_op(tensor(q), out[0].unpartition(), out[1].unpartition(), lengths, plus=1)

    first = tk.append_kv_op(tensor(kc), tensor(vc), tensor(new[0][0]), tensor(new[0][1]), [5])
    out = first.then(second).then(attend).sync()
    for i, (kn, vn) in enumerate(new):
        kc[:, 5 + i], vc[:, 5 + i] = kn[:, 0], vn[:, 0]
    np.testing.assert_array_equal(out[2].to_numpy(), kc)
    np.testing.assert_array_equal(out[3].to_numpy(), vc)
    ref, mag = _decode_ref(q.reshape(1, hq, d), kc[None], vc[None], [7])
    assert_within(out[0].unpartition().to_numpy().reshape(1, hq, d), ref, bound("f16", ref, mag))
    with pytest.raises(ArgumentError, match="in flight, which cannot be partitioned"):
        tk.append_kv_op(tensor(kc), tensor(vc), tensor(new[0][0]), tensor(new[0][1]), [5]).then(
            lambda o: tk.append_kv_op(o[0].unpartition(), o[1], tensor(new[1][0]), tensor(new[1][1]), [6])
        ).sync()


def test_append_kv_writes_foreign_caches_in_place() -> None:
    # A numpy (or torch, cupy) cache of shape (B, Hkv, S, D) is borrowed through DLPack and written where it is.
    kc, vc = np.zeros((2, 2, 8, 64), np.float16), np.zeros((2, 2, 8, 64), np.float16)
    kn, vn = np.ones((2, 2, 1, 64), np.float16), np.full((2, 2, 1, 64), 2.0, np.float16)
    k2, _ = tk.append_kv(kc, vc, kn, vn, np.array([3, 7]))
    assert k2.shape == (4, 8, 64)
    want_k, want_v = np.zeros_like(kc), np.zeros_like(vc)
    want_k[0, :, 3], want_k[1, :, 7] = 1, 1
    want_v[0, :, 3], want_v[1, :, 7] = 2, 2
    np.testing.assert_array_equal(kc, want_k)
    np.testing.assert_array_equal(vc, want_v)
