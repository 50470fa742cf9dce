"""Qwen3 on the CPU interpreter: configs, the safetensors reader/writer, random weights, sampling, the runner, and the
forward pass against a float64 numpy implementation written here from the published architecture (the
``transformers`` comparison is in ``test_qwen3_hf.py``)."""

from __future__ import annotations

import json
import struct
import sys
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import tile.frontend as tile
from tile import aio
from tile.kernels.qwen3 import (
    CONFIGS,
    TINY,
    DecodeGraph,
    Qwen3,
    Qwen3Config,
    Sampler,
    WeightsError,
    config_for,
    load_checkpoint,
    random_weights,
    read_safetensors,
    rope_tables,
    save_checkpoint,
)
from tile.kernels.qwen3.__main__ import main

sys.path.insert(0, str(Path(__file__).parent))  # helpers beside the tests (importlib import mode)
from helpers_kernels import lowered_op_names

U_BF16 = 2.0**-8


@pytest.mark.parametrize(
    ("name", "billions"), [("0.6B", 0.60), ("1.7B", 1.72), ("4B", 4.02), ("8B", 8.19), ("14B", 14.77), ("32B", 32.76)]
)
def test_configs_have_the_published_parameter_counts(name: str, billions: float) -> None:
    c = config_for(name)
    assert round(c.num_parameters() / 1e9, 2) == billions
    assert (c.head_dim, c.vocab_size, c.rope_theta, c.rms_norm_eps) == (128, 151936, 1e6, 1e-6)
    assert c.tie_word_embeddings == (name in ("0.6B", "1.7B", "4B"))
    assert Qwen3Config.from_hf(c.to_hf(), name=name) == c


def test_config_errors() -> None:
    with pytest.raises(tile.ArgumentError, match="unknown Qwen3 size"):
        config_for("3B")
    with pytest.raises(tile.ArgumentError, match="multiple of the KV head count"):
        Qwen3Config("bad", 64, 1, 3, 2, 128)
    with pytest.raises(tile.ArgumentError, match="only dense Qwen3"):
        Qwen3Config.from_hf({**CONFIGS["4B"].to_hf(), "model_type": "llama"})
    with pytest.raises(tile.ArgumentError, match="RoPE scaling"):
        Qwen3Config.from_hf({**CONFIGS["4B"].to_hf(), "rope_scaling": {"rope_type": "yarn"}})


def test_random_weights_are_seeded_bf16_of_the_checkpoint_shapes() -> None:
    a, b, c = random_weights(TINY, seed=3), random_weights(TINY, seed=3), random_weights(TINY, seed=4)
    assert {n: w.shape for n, w in a.items()} == TINY.weight_shapes()
    assert all(w.dtype == ml_dtypes.bfloat16 for w in a.values())
    assert all(np.array_equal(a[n], b[n]) for n in a)
    assert not np.array_equal(a["model.embed_tokens.weight"], c["model.embed_tokens.weight"])


def test_safetensors_round_trip_and_bad_files(tmp_path: Path) -> None:
    weights = random_weights(TINY, seed=0)
    save_checkpoint(weights, TINY, tmp_path)
    assert Qwen3Config.from_dir(tmp_path) == Qwen3Config.from_hf(TINY.to_hf(), name=tmp_path.name)
    loaded = load_checkpoint(tmp_path, TINY)
    assert all(np.array_equal(loaded[n], weights[n]) for n in weights)
    file = tmp_path / "model.safetensors"
    raw = file.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    header["model.norm.weight"]["shape"] = [TINY.hidden_size + 1]  # byte range no longer matches the shape
    text = json.dumps(header).encode()
    (tmp_path / "bad.safetensors").write_bytes(struct.pack("<Q", len(text)) + text + raw[8 + n :])
    with pytest.raises(WeightsError, match="byte range"):
        list(read_safetensors(tmp_path / "bad.safetensors"))
    (tmp_path / "bad.safetensors").write_bytes(struct.pack("<Q", 1 << 40) + b"{}")
    with pytest.raises(WeightsError, match="header length"):
        list(read_safetensors(tmp_path / "bad.safetensors"))
    (tmp_path / "bad.safetensors").unlink()
    with pytest.raises(WeightsError, match="missing"):
        load_checkpoint(tmp_path, CONFIGS["0.6B"].__class__(**{**TINY.__dict__, "num_hidden_layers": 3}))
    with pytest.raises(WeightsError, match="shape"):
        load_checkpoint(tmp_path, Qwen3Config(**{**TINY.__dict__, "intermediate_size": 96}))


def test_sampler() -> None:
    logits = np.array([0.0, 3.0, 1.0, 2.9, -5.0])
    assert Sampler()(logits) == 1
    assert Sampler(temperature=1.0, top_k=1)(logits) == 1
    assert [Sampler().greedy, Sampler(temperature=1.0, top_k=1).greedy, Sampler(temperature=1.0).greedy] == [
        True,
        True,
        False,
    ]
    draws = [Sampler(temperature=1.0, top_k=2, seed=s)(logits) for s in range(40)]
    assert set(draws) == {1, 3}  # only the two largest, both drawn
    assert draws == [Sampler(temperature=1.0, top_k=2, seed=s)(logits) for s in range(40)]
    with pytest.raises(tile.ArgumentError, match=">= 0"):
        Sampler(temperature=-1.0)


def _reference(w: dict[str, Any], c: Qwen3Config, ids: list[int]) -> np.ndarray[Any, Any]:
    """Qwen3 in float64 from the published architecture (pre-norm, GQA, q/k RMSNorm, neox RoPE, SwiGLU)."""
    f = {n: np.asarray(a, dtype=np.float64) for n, a in w.items()}

    def norm(x: Any, weight: Any) -> Any:
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + c.rms_norm_eps) * weight

    cos, sin = (t[: len(ids)].astype(np.float64) for t in rope_tables(c, len(ids)))

    def rope(x: Any) -> Any:  # (T, heads, hd)
        a, b = np.split(x, 2, axis=-1)
        return np.concatenate([a * cos[:, None] - b * sin[:, None], b * cos[:, None] + a * sin[:, None]], -1)

    t, hd = len(ids), c.head_dim
    x = f["model.embed_tokens.weight"][ids]
    for n in range(c.num_hidden_layers):
        p = f"model.layers.{n}."
        h = norm(x, f[p + "input_layernorm.weight"])
        q = rope(norm((h @ f[p + "self_attn.q_proj.weight"].T).reshape(t, -1, hd), f[p + "self_attn.q_norm.weight"]))
        k = rope(norm((h @ f[p + "self_attn.k_proj.weight"].T).reshape(t, -1, hd), f[p + "self_attn.k_norm.weight"]))
        v = (h @ f[p + "self_attn.v_proj.weight"].T).reshape(t, -1, hd)
        k, v = np.repeat(k, c.group, axis=1), np.repeat(v, c.group, axis=1)
        s = np.einsum("thd,shd->hts", q, k) / np.sqrt(hd) + np.triu(np.full((t, t), -np.inf), 1)
        e = np.exp(s - s.max(-1, keepdims=True))
        o = np.einsum("hts,shd->thd", e / e.sum(-1, keepdims=True), v).reshape(t, -1)
        x = x + o @ f[p + "self_attn.o_proj.weight"].T
        h = norm(x, f[p + "post_attention_layernorm.weight"])
        g, u = h @ f[p + "mlp.gate_proj.weight"].T, h @ f[p + "mlp.up_proj.weight"].T
        x = x + (g / (1 + np.exp(-g)) * u) @ f[p + "mlp.down_proj.weight"].T
    head = f["model.embed_tokens.weight" if c.tie_word_embeddings else "lm_head.weight"]
    return np.asarray(norm(x, f["model.norm.weight"]) @ head.T)


def _decode(model: Qwen3, ids: list[int], graph: bool) -> list[np.ndarray[Any, Any]]:
    """Each token's logits, decoded eagerly (one chain per token) or by replaying a captured `DecodeGraph`."""
    if not graph:
        return [model.forward([i]) for i in ids]
    with DecodeGraph(model) as step:
        return [step.step(i) for i in ids]


@pytest.mark.parametrize("attention", ["one", "split"])
@pytest.mark.parametrize("graph", [False, True], ids=["eager", "graph"])
@pytest.mark.parametrize("tied", [False, True])
def test_prefill_and_decode_match_a_float64_reference(tied: bool, graph: bool, attention: str) -> None:
    # Error budget: activations are rounded to bf16 (unit u = 2^-8) at each kernel boundary; a logit inherits about
    # one relative rounding per sublayer output that feeds the residual stream (2 per layer) plus the final norm and
    # the embedding: (2 * layers + 2) * u * max|logit|.
    c = Qwen3Config(**{**TINY.__dict__, "tie_word_embeddings": tied})
    w = random_weights(c, seed=5)
    ids = [3, 141, 59, 26, 5, 35, 89, 79, 32, 38]
    # 64 positions: enough key tiles for the interpreter's split form to split (16 would be one split either way).
    model = Qwen3(c, w, max_seq=64, decode_attention=attention)
    got = np.concatenate([model.forward(ids[:7], all_logits=True), np.stack(_decode(model, ids[7:], graph))])
    ref = _reference(w, c, ids)
    budget = (2 * c.num_hidden_layers + 2) * U_BF16 * np.abs(ref).max(axis=-1, keepdims=True)
    assert np.all(np.abs(got - ref) <= budget), float((np.abs(got - ref) / budget).max())
    assert model.length == len(ids)


def test_chunked_prefill_longer_than_an_attention_tile_matches_the_reference() -> None:
    # Prefill runs the library's flash attention on the cache with a causal offset: a first chunk of 21 tokens (two
    # query and key tiles of 16 on the interpreter, the second partial), a second chunk of 13 at position 21 (not on a
    # tile edge; its keys span both chunks), then decoding; the cache holds 64 positions, most past the causal limit.
    model, got, ref, budget = chunked_prefill(TINY, seed=7, rng=1, chunks=(21, 13), decoded=3, max_seq=64)
    assert np.all(np.abs(got - ref) <= budget), float((np.abs(got - ref) / budget).max())
    assert model.length == 37


def chunked_prefill(
    c: Qwen3Config, *, seed: int, rng: int, chunks: tuple[int, int], decoded: int, max_seq: int
) -> tuple[Qwen3, np.ndarray[Any, Any], np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """Two prefill chunks of ``chunks`` tokens, then ``decoded`` one-token steps, on random weights: the model, its
    logits of every position, the float64 reference's and the bf16 error budget (also used by the GPU test)."""
    w = random_weights(c, seed=seed)
    a, b = chunks
    ids = [int(i) for i in np.random.default_rng(rng).integers(0, c.vocab_size, a + b + decoded)]
    model = Qwen3(c, w, max_seq=max_seq)
    first = model.forward(ids[:a], all_logits=True)
    second = model.forward(ids[a : a + b], all_logits=True)
    got = np.concatenate([first, second, np.stack([model.forward([i]) for i in ids[a + b :]])])
    ref = _reference(w, c, ids)
    budget = (2 * c.num_hidden_layers + 2) * U_BF16 * np.abs(ref).max(axis=-1, keepdims=True)
    return model, got, ref, budget


def test_steps_refuse_a_start_past_the_cache() -> None:
    model = Qwen3(TINY, random_weights(TINY), max_seq=16)
    inputs = tile.from_numpy(np.array([1, 2, 3, 0], dtype=np.int32))
    with pytest.raises(tile.ArgumentError, match="3 tokens from position 14 do not fit the cache of 16"):
        model.steps(inputs, 3, head=False, start=14)
    with pytest.raises(tile.ArgumentError, match="from position -1"):
        model.steps(inputs, 3, head=False, start=-1)
    assert len(model.steps(inputs, 3, head=False, start=13)) > 0


@pytest.mark.parametrize(
    ("mode", "max_seq", "launched"),
    [
        ("auto", 128, {"decode_one"}),  # short caches: one kernel (ONE_KERNEL_SEQ)
        ("auto", 256, {"decode_split", "decode_combine"}),  # longer ones: split over the sequence, then combined
        ("one", 2048, {"decode_one"}),
        ("split", 64, {"decode_split", "decode_combine"}),
    ],
)
def test_decode_attention_is_one_kernel_for_short_caches(
    monkeypatch: pytest.MonkeyPatch, mode: str, max_seq: int, launched: set[str]
) -> None:
    from tile.kernels._source import kernels, launch_pdl

    seen = set[str]()

    def spy(name: str, kernel: Any) -> Any:
        def launch(*args: Any, **kw: Any) -> Any:
            seen.add(name)
            return kernel(*args, **kw)

        return launch

    for pdl in (False, True):  # the plain kernels and the PDL copies (`Qwen3`'s default)
        with launch_pdl(pdl):
            module = kernels("_attention_kernels")
        for name in ("decode_one", "decode_split", "decode_combine"):
            monkeypatch.setattr(module, name, spy(name, getattr(module, name)))
    model = Qwen3(TINY, random_weights(TINY, seed=2), max_seq=max_seq, decode_attention=mode)
    model.forward([4, 5])
    assert not seen  # a multi-token pass uses the library's flash attention
    model.forward([6])
    assert seen == launched
    with pytest.raises(tile.ArgumentError, match="decode_attention='fused'; pass 'auto', 'one'"):
        Qwen3(TINY, random_weights(TINY, seed=2), decode_attention="fused")


def test_the_decode_graph_replays_the_eager_step_exactly_and_hands_the_cache_back() -> None:
    w = random_weights(TINY, seed=3)
    eager, graphed = Qwen3(TINY, w, max_seq=16), Qwen3(TINY, w, max_seq=16)
    eager.forward([5, 6, 7])
    graphed.forward([5, 6, 7])
    tokens = [9, 2, 40, 11]
    want = [eager.forward([t]) for t in tokens]
    step = DecodeGraph(graphed)
    with pytest.raises(tile.ArgumentError, match="already has an open decode graph"):
        DecodeGraph(graphed)
    with pytest.raises(tile.ArgumentError, match="a decode graph holds the KV cache"):
        graphed.forward([1])
    got = [step.step(t) for t in tokens]
    with pytest.raises(tile.ArgumentError, match="outside the vocabulary"):
        step.step(TINY.vocab_size)
    assert graphed.length == 7  # a refused token runs nothing
    step.close()
    step.close()  # idempotent
    for a, b in zip(want, got, strict=True):
        np.testing.assert_array_equal(a, b)  # the same kernels on the same data, bit for bit
    np.testing.assert_array_equal(graphed.forward([3]), eager.forward([3]))  # the cache came back, positions agree
    with DecodeGraph(graphed, on=aio.HostStream()) as again:  # a second capture on a given context
        np.testing.assert_array_equal(again.step(8), eager.forward([8]))
        while graphed.length < graphed.max_seq:
            again.step(1)
        with pytest.raises(tile.ArgumentError, match="exceed the cache of 16"):
            again.step(1)


def test_greedy_decoding_on_the_device_picks_the_host_argmax() -> None:
    w = random_weights(TINY, seed=6)
    host, device = Qwen3(TINY, w, max_seq=16), Qwen3(TINY, w, max_seq=16)
    token = int(np.argmax(host.forward([1, 2])))
    device.forward([1, 2])
    with DecodeGraph(device) as graph:
        for _ in range(5):
            got = graph.greedy(token)
            token = int(np.argmax(host.forward([token])))
            assert got == token
    assert device.length == host.length


@pytest.mark.parametrize("n", [1, 5000, 4096 * 2 + 3])
def test_the_argmax_kernel_takes_the_first_maximum_across_chunks(n: int) -> None:
    import tile.kernels as tk  # the model's greedy step is the library's argmax

    rng = np.random.default_rng(n)
    row = rng.standard_normal((1, n)).astype(np.float32)
    row[0, n // 3] = row[0, n - 1] = 9.0  # a tie across chunks: the first one wins, as in numpy
    got = tk.argmax_op(tile.from_numpy(row)).sync()[0].unpartition().to_numpy()
    assert int(got[0]) == int(np.argmax(row))
    row[0, :] = -np.inf  # padding (-inf) never wins over a real column, even one that is -inf itself
    assert int(tk.argmax_op(tile.from_numpy(row)).sync()[0].unpartition().to_numpy()[0]) == 0


def test_forward_refuses_bad_input_and_keeps_its_state() -> None:
    model = Qwen3(TINY, random_weights(TINY), max_seq=8)
    model.forward([1, 2, 3])
    with pytest.raises(tile.ArgumentError, match="outside the vocabulary"):
        model.forward([TINY.vocab_size])
    with pytest.raises(tile.ArgumentError, match="exceed the cache of 8"):
        model.forward(list(range(6)))
    assert model.length == 3
    before = model.forward([4])
    model.reset()
    model.forward([1, 2, 3])
    np.testing.assert_array_equal(model.forward([4]), before)


def test_runner(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["--model", "tiny", "--prompt-len", "4", "--new-tokens", "3", "--plain-progress"]) == 0
    out = capsys.readouterr()
    assert "prefill: 4 tokens" in out.out
    assert "decode: 2 tokens" in out.out
    graphed = out.out.split("tokens:")[1].split()
    assert len(graphed) == 3
    assert "25/25" in out.err
    assert main(["--model", "tiny", "--prompt-len", "4", "--new-tokens", "3", "--plain-progress", "--eager"]) == 0
    assert capsys.readouterr().out.split("tokens:")[1].split() == graphed  # the graph decodes what eager does
    sampled = ["--model", "tiny", "--prompt-len", "4", "--new-tokens", "4", "--temperature", "1", "--plain-progress"]
    assert main(sampled) == 0
    drawn = capsys.readouterr().out.split("tokens:")[1].split()
    assert main([*sampled, "--eager"]) == 0  # host sampling from the graph's logits row draws what eager draws
    assert capsys.readouterr().out.split("tokens:")[1].split() == drawn
    assert main(["--model", "tiny", "--tp", "0"]) == 2  # (--tp 2 without torchrun: test_qwen3_tp)
    assert "--tp must be >= 1" in capsys.readouterr().err
    save_checkpoint(random_weights(TINY, seed=2), TINY, tmp_path)
    args = [
        "--weights",
        str(tmp_path),
        "--prompt-len",
        "3",
        "--new-tokens",
        "2",
        "--temperature",
        "0.8",
        "--top-k",
        "5",
    ]
    assert main(args) == 0
    assert main(["--model", "3B"]) == 1


def _lower_for_sm_90(
    name: str, consts: dict[str, Any], arrays: dict[str, tuple[str, int]], dtypes: Any, stem: str = "_qwen3_kernels"
) -> set[str]:
    from tile.compiler import ArraySpec, Specialization
    from tile.kernels._source import kernels

    kernel = getattr(kernels(stem), name)
    assert not kernel.unchecked
    params = {
        a: ArraySpec(dt, n, stride_one=tuple(i == n - 1 for i in range(n)), shape_div=(16,) * n)
        for a, (dt, n) in arrays.items()
    }
    spec = Specialization.make(params=params, consts=consts, dtypes=dtypes, options=kernel.options)
    return lowered_op_names(kernel, spec)


HEAD = {"cos": ("f32", 2), "sin": ("f32", 2), "pos": ("i32", 1)}
WQK = {"wq": ("bf16", 2), "wk": ("bf16", 2)}
QWEN3_KERNELS: dict[str, tuple[dict[str, Any], dict[str, tuple[str, int]], dict[str, str]]] = {
    "qkv_prep": (
        {"BT": 1024, "HD": 128, "HALF": 64, "OFF": 16, "KV": 8},
        {"z": ("bf16", 2), "zk": ("bf16", 3), "zv": ("bf16", 3), "x": ("bf16", 2), **WQK, **HEAD},
        {"O": "bf16", "C": "bf16", "D": "bf16", "W": "bf16"},
    ),
    "qkv_prep_one": (  # decode's one token
        {"BT": 1024, "HD": 128, "HALF": 64, "NX": 6144, "OFF": 32, "KV": 8},
        {"z": ("bf16", 2), "zk": ("bf16", 3), "zv": ("bf16", 3), "x": ("bf16", 2), **WQK, **HEAD},
        {"O": "bf16", "C": "bf16", "D": "bf16", "W": "bf16", "RT": "f32"},
    ),
    "qkv_prep_rows": (  # a prefill's form: 32 tokens a block, whole cache tiles in one store (ALIGNED)
        {"R": 32, "GHD": 128, "HD": 128, "HALF": 64, "G": 1, "NX": 4096, "OFF": 16, "KV": 8, "ALIGNED": True},
        {"z": ("bf16", 2), "zk": ("bf16", 3), "zv": ("bf16", 3), "x": ("bf16", 2), **WQK, **HEAD},
        {"O": "bf16", "C": "bf16", "D": "bf16", "W": "bf16", "RT": "f32"},
    ),
}


@pytest.mark.parametrize("name", sorted(QWEN3_KERNELS))
def test_kernels_are_checked_and_lower_for_sm_90(name: str) -> None:
    # Token ids and positions are data, so these kernels keep in-kernel index checks (unlike the GEMMs): that is the
    # point, a bad id or position faults instead of reading or writing past the tensor.
    ops = _lower_for_sm_90(name, *QWEN3_KERNELS[name])
    checked = bool(ops & {"int_to_ptr", "assert"})
    assert checked, f"{name}: no index checks in the kernel"
