"""Tensor-parallel Qwen3 (`tile.kernels.qwen3.tp`): sharding, the rows argmax, the runner's refusals in one process,
and the TP model against the one-device model across processes (`helpers_tp.py`): on the CPU (interpreter + gloo,
2 and 4 ranks, the latter with fewer KV heads than ranks) where torch is installed, and on two GPUs (``multi_gpu``).

GPU run (lead's 2-GPU batch): ``NCCL_NVLS_ENABLE=0 TILE_REQUIRE_MULTI_GPU=1 pytest
packages/tile-kernels/tests/test_qwen3_tp.py -m multi_gpu``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
import tile.frontend as tile
from helpers_tp import WORKER, run_ranks
from tile.frontend import ArgumentError
from tile.kernels.qwen3 import CONFIGS, TINY, Qwen3Config, local_config, random_weights, shard_slices
from tile.kernels.qwen3.tp import argmax_rows, sliced_shape


@pytest.mark.parametrize("n", [2, 4])
def test_shards_tile_every_matrix_and_replicate_the_rest(n: int) -> None:
    c = Qwen3Config("small", 64, 2, 8, 4, 96, head_dim=8, vocab_size=40)  # 32B's head layout, scaled down
    shapes = c.weight_shapes()
    parts = [shard_slices(c, r, n) for r in range(n)]
    for name, shape in shapes.items():
        cut = [np.zeros(shape, dtype=np.int8) for _ in parts]
        for r, p in enumerate(parts):
            cut[r][p[name]] += 1
        total = np.sum(cut, axis=0)
        for r, p in enumerate(parts):
            assert sliced_shape(shape, p[name]) == cut[r][p[name]].shape
        if any(k in name for k in ("q_proj", "k_proj", "v_proj", "o_proj", "gate_", "up_", "down_", "lm_head")):
            assert total.min() == total.max() == 1, name  # split: every element on exactly one rank
        else:
            assert total.min() == total.max() == n, name  # replicated
    assert local_config(c, n).group == c.group  # the GQA groups stay whole on a rank
    loc = local_config(CONFIGS["32B"], 2)
    assert (loc.num_attention_heads, loc.num_key_value_heads, loc.intermediate_size) == (32, 4, 12800)


def test_fewer_kv_heads_than_ranks_replicates_each_kv_head_with_its_query_heads() -> None:
    c, n = TINY, 4  # 4 query heads, 2 KV heads: ranks 0 and 1 share KV head 0, ranks 2 and 3 KV head 1
    hd = c.head_dim
    for r in range(n):
        p = shard_slices(c, r, n)
        assert p["model.layers.0.self_attn.q_proj.weight"] == (slice(r * hd, (r + 1) * hd),)
        kv = r // 2
        assert p["model.layers.0.self_attn.k_proj.weight"] == (slice(kv * hd, (kv + 1) * hd),)
        q_head = r  # its one query head's KV head, in the one-device model, is q_head // group
        assert q_head // c.group == kv
    assert local_config(c, n).num_key_value_heads == 1


def test_shapes_that_do_not_split_are_refused() -> None:
    with pytest.raises(tile.ArgumentError, match=r"does not split over 3 ranks: attention heads \(4\)"):
        local_config(TINY, 3)
    odd = Qwen3Config(**{**TINY.__dict__, "num_attention_heads": 12, "num_key_value_heads": 3})
    with pytest.raises(tile.ArgumentError, match=r"KV heads \(3: neither a multiple nor a divisor"):
        local_config(odd, 4)
    with pytest.raises(tile.ArgumentError, match="rank 2 is not one of 2 ranks"):
        shard_slices(TINY, 2, 2)


@pytest.mark.parametrize("rows", [slice(0, 7), slice(3, 11), slice(9, None)])
def test_random_weights_select_makes_that_part_of_the_full_tensor(rows: slice) -> None:
    big = Qwen3Config(**{**TINY.__dict__, "vocab_size": 1 << 15, "intermediate_size": 1 << 14})  # > 1M elements
    full = random_weights(big, seed=4)
    names = ["lm_head.weight", "model.layers.1.mlp.down_proj.weight", "model.layers.0.self_attn.q_proj.weight"]
    select = {names[0]: (rows,), names[1]: (slice(None), rows), names[2]: (rows,)}
    part = random_weights(big, seed=4, select=select)
    for name in names:
        np.testing.assert_array_equal(part[name], full[name][select[name]])
        assert part[name].flags.c_contiguous
    np.testing.assert_array_equal(part["model.norm.weight"], full["model.norm.weight"])  # unselected: all of it
    with pytest.raises(tile.ArgumentError, match="slices of step 1"):
        random_weights(big, select={names[0]: (slice(0, 8, 2),)})


@pytest.mark.parametrize("shape", [(2, 5000), (4, 64), (3, 4096 * 2 + 3)])
def test_the_rows_argmax_is_numpys_argmax_of_the_flattened_rows(shape: tuple[int, int]) -> None:
    rng = np.random.default_rng(shape[1])
    x = rng.standard_normal(shape).astype(np.float32)
    x[shape[0] - 1, 0] = x[0, shape[1] - 1] = 9.0  # a tie across rows: the first one in row order wins
    got = argmax_rows(tile.from_numpy(x)).sync()[0].unpartition().to_numpy()
    assert int(got[0]) == int(np.argmax(x)) == shape[1] - 1
    x[0, shape[1] - 1] = 0.0  # now the last row's first column
    got = argmax_rows(tile.from_numpy(x)).sync()[0].unpartition().to_numpy()
    assert int(got[0]) == int(np.argmax(x)) == (shape[0] - 1) * shape[1]


def test_the_rows_argmax_skips_nan_and_refuses_what_it_cannot_read() -> None:
    x = np.full((3, 600), np.nan, np.float32)
    x[2, 599] = -1.0  # the only number, in the last row's last (partial) chunk
    assert int(argmax_rows(tile.from_numpy(x)).sync()[0].unpartition().to_numpy()[0]) == 3 * 600 - 1
    x[2, 599] = np.nan  # nothing but NaN: 0
    assert int(argmax_rows(tile.from_numpy(x)).sync()[0].unpartition().to_numpy()[0]) == 0
    with pytest.raises(ArgumentError, match="logits has dtype f16; supported: f32"):
        argmax_rows(tile.from_numpy(x.astype(np.float16)))
    with pytest.raises(ArgumentError, match="logits must have 2 dimensions"):
        argmax_rows(tile.from_numpy(x.reshape(-1)))


def test_runner_refuses_tp_outside_torchrun(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from tile.kernels.qwen3.__main__ import main

    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.delenv("RANK", raising=False)
    assert main(["--model", "tiny", "--tp", "2"]) == 2
    assert "torchrun --nproc-per-node 2 -m tile.kernels.qwen3 --tp 2" in capsys.readouterr().err
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("RANK", "0")
    assert main(["--model", "tiny", "--tp", "2"]) == 2
    assert "torchrun started 4 processes: use --nproc-per-node 2" in capsys.readouterr().err


def test_tp_model_takes_only_its_shard() -> None:
    pytest.importorskip("torch")
    from tile.kernels.qwen3 import TPQwen3

    full = random_weights(TINY, seed=1)
    with pytest.raises(tile.ArgumentError, match=r"rank 0 of 2 holds \[32, 64\]"):
        TPQwen3(TINY, full, rank=0, world=2)


def _ranks(backend: str, name: str, world: int, *extra: str) -> list[str]:
    pytest.importorskip("torch")
    outputs = run_ranks([str(WORKER), backend, name, *extra], world, env={"TILE_AUTOTUNE": "0"})
    for r, out in enumerate(outputs):
        assert f"rank {r} ok" in out, out
    return outputs


@pytest.mark.parametrize("world", [2, 4])
def test_tp_matches_one_device_on_the_cpu(world: int) -> None:
    """Prompt and 8 greedy tokens, tp=N logits within twice the bf16 budget of tp=1 and the same greedy choices; the
    captured step replays the eager chain bit for bit; ownership misuse around the collectives raises (helpers_tp)."""
    _ranks("cpu", "tiny", world)


def test_runner_under_two_ranks_on_the_cpu() -> None:
    pytest.importorskip("torch")
    args = ["-m", "tile.kernels.qwen3", "--model", "tiny", "--tp", "2", "--prompt-len", "4", "--new-tokens", "4"]
    outs = run_ranks([*args, "--plain-progress"], 2, env={"TILE_INTERPRET": "1"})
    assert "tensor-parallel over 2" in outs[0]
    assert "tokens:" in outs[0]
    assert "tokens:" not in outs[1]  # rank 0 prints


@pytest.mark.multi_gpu
@pytest.mark.requires_tileiras
@pytest.mark.parametrize("name", ["tiny", "0.6B-2"])
def test_tp2_matches_one_gpu(name: str) -> None:
    """As the CPU test, on two GPUs with NCCL (the decode step's all-reduces captured into the CUDA graph)."""
    _ranks("gpu", name, 2)


@pytest.mark.multi_gpu
@pytest.mark.requires_tileiras
def test_tp2_with_one_shot_all_reduces_matches_one_gpu() -> None:
    """The same checks with `tile.distributed.enable_one_shot`: the decode step's all-reduces on torch's one-shot path
    (eager and captured), within the same budget of the one-GPU model."""
    _ranks("gpu", "0.6B-2", 2, "one-shot")
