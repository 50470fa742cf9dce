"""Tile's Qwen3 against Hugging Face ``transformers``' ``Qwen3ForCausalLM`` (an independent implementation) with the
same random weights, on the CPU interpreter: logits over a prompt and decoded tokens, and the greedy tokens.

The tolerance is derived from bf16 rounding itself rather than picked: both models are also run in float32 by
``transformers`` (the same bf16 weights, upcast exactly), which is the near-exact reference. The error of a bf16
evaluation comes from rounding activations to bf16 (unit 2^-8) between ops; Tile rounds at a subset of the places
``transformers``' bf16 run rounds (once per kernel, while torch rounds after every op: norms, RoPE products, softmax,
SiLU, the gated product, each residual add), so to first order its error is no larger. The check allows twice the
error that ``transformers``' own bf16 run shows at the same step (independent roundings need not cancel the same way),
and greedy tokens must agree where the reference's top-2 logit gap exceeds both errors, which the test asserts holds
at every step (so agreement is not luck). Skipped without ``transformers`` (a test dependency).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tile.kernels.qwen3 import TINY, DecodeGraph, Qwen3, load_checkpoint, random_weights, save_checkpoint

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

PROMPT = [17, 3, 200, 45, 99, 128, 7, 64]
NEW_TOKENS = 8


def _hf(directory: Path, dtype: Any) -> Any:
    model = transformers.Qwen3ForCausalLM.from_pretrained(directory, dtype=dtype, attn_implementation="eager")
    return model.eval()


def _hf_logits(model: Any, ids: list[int]) -> np.ndarray[Any, Any]:
    with torch.no_grad():
        out = model(torch.tensor([ids])).logits[0]
    return np.asarray(out.float().numpy(), dtype=np.float64)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_checkpoint(random_weights(TINY, seed=1), TINY, tmp_path_factory.mktemp("qwen3-tiny"))


@pytest.mark.parametrize("graph", [False, True], ids=["eager", "graph"])
def test_logits_and_greedy_tokens_match_transformers(checkpoint: Path, graph: bool) -> None:
    hf16, hf32 = _hf(checkpoint, torch.bfloat16), _hf(checkpoint, torch.float32)
    ids = list(PROMPT)
    for _ in range(NEW_TOKENS):  # transformers' own greedy continuation, in bf16
        ids.append(int(np.argmax(_hf_logits(hf16, ids)[-1])))
    ref, ref16 = _hf_logits(hf32, ids), _hf_logits(hf16, ids)

    model = Qwen3(TINY, load_checkpoint(checkpoint, TINY), max_seq=len(PROMPT) + NEW_TOKENS + 1)
    ours = [model.forward(PROMPT, all_logits=True)]
    # Teacher-forced on the reference's tokens (one near-tie cannot derail the rest); eagerly or by graph replay.
    if graph:
        with DecodeGraph(model) as step:
            ours += [step.step(token)[None, :] for token in ids[len(PROMPT) : -1]]
    else:
        ours += [model.forward([token])[None, :] for token in ids[len(PROMPT) : -1]]
    got = np.concatenate(ours).astype(np.float64)
    assert got.shape[0] == len(ids) - 1

    first = len(PROMPT) - 1  # rows whose argmax picks a generated token
    decided = 0
    for row in range(len(ids) - 1):
        hf_err = np.abs(ref16[row] - ref[row]).max()
        tile_err = np.abs(got[row] - ref[row]).max()
        assert tile_err <= 2 * hf_err, (
            f"position {row}: Tile is {tile_err:.3g} from float32, transformers' bf16 {hf_err:.3g}"
        )
        top2 = np.sort(ref[row])[-2:]
        if row >= first and top2[1] - top2[0] > tile_err + hf_err:  # a clear winner: greedy must pick it
            decided += 1
            assert int(np.argmax(got[row])) == ids[row + 1], f"position {row}: Tile's greedy token differs"
    # A near tie (the top-2 gap within both errors) may go either way in bf16; most steps must be clear.
    assert decided >= 0.75 * (len(ids) - 1 - first), f"only {decided} clear greedy steps"


def test_reads_a_checkpoint_written_by_transformers(tmp_path: Path) -> None:
    torch.manual_seed(0)
    hf = transformers.Qwen3ForCausalLM(transformers.Qwen3Config(**TINY.to_hf())).to(torch.bfloat16)
    hf.save_pretrained(tmp_path)
    weights = load_checkpoint(tmp_path, TINY)
    state = hf.state_dict()
    assert set(weights) == set(TINY.weight_shapes())
    for name, array in weights.items():
        np.testing.assert_array_equal(array.astype(np.float32), state[name].float().numpy(), err_msg=name)
