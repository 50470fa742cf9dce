"""Review 33: tile.kernels.qwen3 (and ``tk.sample``) from the outside: a hostile or broken Hugging Face checkpoint
directory (the safetensors reader, the index, ``config.json``), the samplers' arguments and logits, torchrun's
environment, and the model's KV caches as public state. Each hole's test names it in its docstring, failed before its
fix, and asserts the typed error or the right answer; they run on the CPU interpreter.

Holes found and fixed:

- safetensors headers: a shape whose element count overflows int64 (``[2**62, 4]``) wrapped to a byte range of 0 and
  passed the range check, then numpy raised ``ValueError``; a dimension past int64 raised ``OverflowError``; a deeply
  nested header ``RecursionError``; a name given twice kept the last entry silently; a shape given as a string
  (``"12"``) was read digit by digit; two tensors' byte ranges could overlap. All are `WeightsError` now, naming
  the file and the tensor (counts in Python ints; a JSON ``object_pairs_hook`` refuses repeated names).
- The index: a ``weight_map`` naming ``../other/model.safetensors`` (or an absolute path) loaded tensors from outside
  the checkpoint directory; a malformed index raised ``JSONDecodeError``, ``AttributeError`` or ``TypeError``; a file it
  names that is missing (or a directory called ``x.safetensors``) raised ``FileNotFoundError``/``IsADirectoryError``.
  The index names files of the directory, by name, or is refused; unreadable files are `WeightsError`.
- A tensor given by two files was taken from the last one silently (another file's zeros could replace the norm
  weights); an integer tensor of the right shape was converted to bf16 as if it were weights. Both refused.
- ``Sampler``: a NaN temperature passed the ``< 0`` check and ``numpy`` raised ``ValueError`` on the first draw
  (``inf``: every logit equally likely); NaN logits were returned by greedy (argmax finds the NaN) and broke sampling
  (``ValueError``), as did a ``+inf`` logit or every logit ``-inf``; ``(2, vocab)`` logits were flattened and an id
  past the vocabulary returned; ``top_k=2.5`` was truncated; a negative seed raised numpy's ``ValueError``.
- ``Qwen3Config``: ``"rope_theta": "abc"`` raised ``ValueError``; ``"tie_word_embeddings": "false"`` tied the
  embeddings (a non-empty string is true); a string eps was kept; ``true`` for a count was 1; a ``config.json`` that is
  not JSON or not an object raised ``JSONDecodeError``/``AttributeError``. Fields are checked by kind now.
- ``tk.sample`` (the device sampler): a temperature below ~3e-39 made ``1 / temperature`` inf in f32 (and large
  logits overflowed the product), so every positive logit tied at inf and the first won, not the largest; a row of
  nothing but NaN returned 2147483647, an id past the vocabulary. The kernel adds ``temperature * noise`` to the
  logits now (the same argmax) and answers 0 for a row of NaN, as ``tk.argmax`` does.
- ``torchrun_world``: ``RANK=x`` raised ``ValueError``, ``RANK`` past ``WORLD_SIZE`` was returned. `BackendError` now.
- The KV caches (``model.k_cache[i]``, public lists): a pass moves each layer's caches into its launches in turn, so a
  cache the kernels refuse at layer 1 (another shape, the same tensor as another layer's) failed the chain after
  layer 0's caches were moved into it, and the model was left with moved handles (every later call: ``MovedError``).
  `Qwen3.steps` checks every cache first (forward and `DecodeGraph` both build from it); a float token id (``1.7``)
  was truncated to 1, refused now.

Tried and found solid: a header length past the file end or above 100 MB, three data offsets, offsets out of range
or negative, a shape that does not match the config, a missing tensor (existing checks, test_qwen3.py); decoding past
``max_seq`` (forward and `DecodeGraph.step` refuse before running), positions after `Qwen3.reset` while a graph is
open (it writes from position 0 again, as the docs say), `DecodeGraph` on a context that is not one (its capture
fails first, nothing moved), a step after ``close`` (``ClosedError``), a second graph of one model (refused), two
models given one cache tensor (the second model's pass takes it; the first then sees it moved, now a typed
`ArgumentError` before anything runs). Symlinked files are followed on purpose (a Hugging Face cache's snapshot
directory links its files to ``../../blobs``); only the index's names are confined to the directory.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tile.frontend as tile
from tile.kernels.qwen3 import (
    TINY,
    DecodeGraph,
    Qwen3,
    Qwen3Config,
    Sampler,
    WeightsError,
    load_checkpoint,
    random_weights,
    read_safetensors,
    save_checkpoint,
)
from tile.kernels.qwen3.tp import torchrun_world


def _file(path: Path, header: dict[str, Any] | bytes, data: bytes = b"") -> Path:
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)
    return path


@pytest.fixture(scope="module")
def weights() -> dict[str, Any]:
    return random_weights(TINY, seed=5)


# -- hole: safetensors headers the reader misread ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("shape", "offsets"),
    [
        ([2**62, 4], [0, 0]),
        ([2**64], [0, 0]),
        ([0, 2**70], [0, 0]),
        ([1] * 65, [0, 4]),
        ("12", [0, 8]),
        ([2, True], [0, 8]),
    ],
)
def test_a_malformed_or_overflowing_tensor_entry_is_a_weights_error(
    tmp_path: Path, shape: Any, offsets: list[int]
) -> None:
    """Hole: ``[2**62, 4]`` f32 is 2**66 bytes, which wrapped to 0 in int64 and matched an empty range (then numpy's
    ValueError); ``[2**64]`` raised OverflowError, ``[0, 2**70]`` (no bytes) and 65 dimensions numpy's ValueError;
    ``"12"`` was read as the shape (1, 2)."""
    file = _file(
        tmp_path / "a.safetensors", {"x": {"dtype": "F32", "shape": shape, "data_offsets": offsets}}, b"\0" * 9
    )
    with pytest.raises(WeightsError, match=r"tensor 'x' (has a malformed entry|\(F32 .* has byte range)"):
        list(read_safetensors(file))


def test_a_deeply_nested_header_is_a_weights_error(tmp_path: Path) -> None:
    """Hole: ``[[[[...`` a hundred thousand deep raised RecursionError from the JSON decoder."""
    with pytest.raises(WeightsError, match="the header is not JSON"):
        list(read_safetensors(_file(tmp_path / "a.safetensors", b"[" * 100_000)))


def test_a_tensor_named_twice_in_one_header_is_refused(tmp_path: Path) -> None:
    """Hole: JSON keeps the last of two entries of one name; which tensor the file means cannot be told."""
    entry = '{"dtype": "F32", "shape": [1], "data_offsets": [%d, %d]}'
    text = ('{"x": ' + entry % (0, 4) + ', "x": ' + entry % (4, 8) + "}").encode()
    with pytest.raises(WeightsError, match="names 'x' twice"):
        list(read_safetensors(_file(tmp_path / "a.safetensors", text, b"\0" * 8)))


def test_overlapping_byte_ranges_are_refused(tmp_path: Path) -> None:
    """Hole: two tensors reading the same bytes were accepted (the format lays tensors one after another)."""
    header = {
        "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
        "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]},
    }
    with pytest.raises(WeightsError, match="'a' and 'b' have overlapping byte ranges"):
        list(read_safetensors(_file(tmp_path / "a.safetensors", header, b"\0" * 12)))


def test_an_unreadable_file_is_a_weights_error(tmp_path: Path, weights: dict[str, Any]) -> None:
    """Hole: a missing file raised FileNotFoundError, a directory called ``x.safetensors`` IsADirectoryError."""
    with pytest.raises(WeightsError, match="cannot be read as a safetensors file"):
        list(read_safetensors(tmp_path / "none.safetensors"))
    save_checkpoint(weights, TINY, tmp_path)
    (tmp_path / "x.safetensors").mkdir()
    with pytest.raises(WeightsError, match=r"x\.safetensors: cannot be read as a safetensors file"):
        load_checkpoint(tmp_path, TINY)


# -- hole: the index could point outside the directory, and broke untyped -------------------------------------------


@pytest.mark.parametrize("name", ["../other/model.safetensors", "ABSOLUTE", "sub/model.safetensors", ".."])
def test_the_index_names_files_of_the_directory_only(tmp_path: Path, weights: dict[str, Any], name: str) -> None:
    """Hole: ``weight_map`` values were joined to the directory as given: ``../other/...`` or an absolute path loaded
    another directory's checkpoint (this test's loads succeeded before the fix)."""
    other = save_checkpoint(weights, TINY, tmp_path / "other")
    save_checkpoint(weights, TINY, other / "sub")
    target = str(other / "model.safetensors") if name == "ABSOLUTE" else name
    here = tmp_path / "here" if name.startswith("..") or name == "ABSOLUTE" else other
    here.mkdir(exist_ok=True)
    (here / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"model.norm.weight": target}}))
    with pytest.raises(WeightsError, match="is not a file name of this directory"):
        load_checkpoint(here, TINY)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("{not json", "is not JSON"),
        ("[1]", "'weight_map' must map tensor names to file names"),
        ('{"weight_map": {"a": 5}}', "'weight_map' must map tensor names to file names"),
        ('{"weight_map": {"a": "gone.safetensors"}}', r"gone\.safetensors: cannot be read"),
    ],
)
def test_a_malformed_index_is_a_weights_error(tmp_path: Path, text: str, match: str) -> None:
    """Hole: JSONDecodeError, AttributeError ('list' has no 'get'), TypeError (a path joined with an int) and
    FileNotFoundError came out of `load_checkpoint`."""
    (tmp_path / "model.safetensors.index.json").write_text(text)
    with pytest.raises(WeightsError, match=match):
        load_checkpoint(tmp_path, TINY)


# -- hole: tensors given twice or as integers were taken ----------------------------------------------------------


def test_a_tensor_in_two_files_is_refused(tmp_path: Path, weights: dict[str, Any]) -> None:
    """Hole: the last file read won: a second file's zeros replaced the final norm's weights silently."""
    save_checkpoint(weights, TINY, tmp_path)
    save_checkpoint({"model.norm.weight": np.zeros(TINY.hidden_size, np.float32)}, TINY, tmp_path / "b")
    (tmp_path / "b" / "model.safetensors").rename(tmp_path / "z.safetensors")
    with pytest.raises(WeightsError, match=r"model\.norm\.weight is also in .*model\.safetensors"):
        load_checkpoint(tmp_path, TINY)


def test_an_integer_tensor_is_not_taken_as_weights(tmp_path: Path, weights: dict[str, Any]) -> None:
    """Hole: an I32 tensor of the right shape was converted to bf16 (0, 1, 2, ... as norm weights)."""
    save_checkpoint({**weights, "model.norm.weight": np.arange(TINY.hidden_size, dtype=np.int32)}, TINY, tmp_path)
    with pytest.raises(WeightsError, match=r"model\.norm\.weight holds int32 values; weights are floating point"):
        load_checkpoint(tmp_path, TINY)


# -- hole: config.json fields of the wrong kind -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [
        ("rope_theta", "abc", "rope_theta must be a finite number > 0"),
        ("rope_theta", float("nan"), "rope_theta must be a finite number > 0"),
        ("rms_norm_eps", "x", "rms_norm_eps must be a finite number > 0"),
        ("tie_word_embeddings", "false", "tie_word_embeddings must be true or false"),
        ("num_hidden_layers", True, "num_hidden_layers must be a positive int"),
    ],
)
def test_config_fields_are_checked_by_kind(field: str, value: object, match: str) -> None:
    """Hole: ``float("abc")`` raised ValueError; ``"false"`` tied the embeddings (a non-empty string is true, so
    ``lm_head.weight`` was ignored); a string eps reached the kernels; ``true`` was one layer."""
    with pytest.raises(tile.ArgumentError, match=match):
        Qwen3Config.from_hf({**TINY.to_hf(), field: value})
    assert Qwen3Config.from_hf({**TINY.to_hf(), "rope_theta": 10000}).rope_theta == 10000.0  # ints are numbers


def test_a_config_json_that_is_not_an_object_is_an_argument_error(tmp_path: Path) -> None:
    """Hole: JSONDecodeError from `Qwen3Config.from_dir`, AttributeError from `from_hf` for a list."""
    (tmp_path / "config.json").write_text("{bad")
    with pytest.raises(tile.ArgumentError, match="cannot be read as JSON"):
        Qwen3Config.from_dir(tmp_path)
    with pytest.raises(tile.ArgumentError, match="holds a list, not a JSON object"):
        Qwen3Config.from_hf([1])  # type: ignore[arg-type]


# -- hole: torchrun's environment taken unchecked -----------------------------------------------------------------


@pytest.mark.parametrize(("rank", "world"), [("x", "2"), ("2", "2"), ("-1", "2"), ("0", "two")])
def test_torchrun_world_refuses_a_rank_outside_the_world(
    monkeypatch: pytest.MonkeyPatch, rank: str, world: str
) -> None:
    """Hole: ``int("x")`` raised ValueError; ``RANK=2`` of two was returned as this process's place."""
    monkeypatch.setenv("RANK", rank)
    monkeypatch.setenv("WORLD_SIZE", world)
    with pytest.raises(tile.BackendError, match="are not a rank of a world of processes"):
        torchrun_world(2)


# -- hole: the sampler's arguments and logits ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"temperature": float("nan"), "top_k": 3}, "temperature must be finite"),
        ({"temperature": float("inf")}, "temperature must be finite"),
        ({"temperature": 1.0, "top_k": 2.5}, "top_k an int"),
        ({"temperature": 1.0, "top_k": True}, "not a bool"),
        ({"seed": -1}, "the seed is not one numpy takes"),
    ],
)
def test_sampler_arguments_are_checked(kwargs: dict[str, Any], match: str) -> None:
    """Hole: NaN passed ``temperature < 0`` and broke every draw; inf made every logit equally likely; 2.5 tokens
    were 2; a negative seed raised numpy's ValueError."""
    with pytest.raises(tile.ArgumentError, match=match):
        Sampler(**kwargs)


_BAD_LOGITS = [
    ([0.0, np.nan, 5.0], "logit 1 is NaN"),
    ([[0.0, 1.0], [5.0, 0.0]], r"logits of shape \[2, 2\]"),
    ([], r"logits of shape \[0\]"),
]


@pytest.mark.parametrize(
    ("temperature", "logits", "match"),
    [(t, *case) for t in (0.0, 1.0) for case in _BAD_LOGITS] + [(1.0, [-np.inf, -np.inf], "every logit is -inf")],
)
def test_sampler_refuses_logits_it_cannot_choose_from(temperature: float, logits: Any, match: str) -> None:
    """Hole: greedy returned the NaN's id (argmax finds it) and sampling raised numpy's ValueError; two rows were
    flattened (greedy answered 2, past a vocabulary of 2); an empty row raised ValueError; every logit ``-inf`` made
    the probabilities NaN (greedy still takes the first of them)."""
    with pytest.raises(tile.ArgumentError, match=match):
        Sampler(temperature=temperature)(np.array(logits))


def test_sampler_draws_an_infinite_logit_and_never_a_minus_infinite_one() -> None:
    """Hole: ``inf - inf`` made the probabilities NaN (numpy's ValueError). The softmax's limit now: a ``+inf``
    logit takes all the mass, a ``-inf`` one none; a tiny temperature that overflows the scaled logits is the same."""
    assert {Sampler(temperature=1.0, seed=s)(np.array([0.0, np.inf, 5.0])) for s in range(20)} == {1}
    assert {Sampler(temperature=1.0, seed=s)(np.array([-np.inf, 0.0, 0.0])) for s in range(40)} == {1, 2}
    assert {Sampler(temperature=1e-308, seed=s)(np.array([1.0, 2.0, 3.0])) for s in range(20)} == {2}
    assert Sampler()(np.array([[0.0, 3.0, 1.0]])) == 1  # one row as (1, vocab) is still taken


# -- hole: a refused cache lost the earlier layers' caches; float token ids ----------------------------------------


@pytest.fixture(scope="module")
def model(weights: dict[str, Any]) -> Qwen3:
    return Qwen3(TINY, weights, max_seq=8)


def _fresh(model: Qwen3) -> None:
    model.reset()
    assert model.forward([1, 2]).shape == (TINY.vocab_size,)  # every cache live


@pytest.mark.parametrize("case", ["shape", "same", "view", "freed", "numpy"])
@pytest.mark.parametrize("via", ["forward", "graph"])
def test_a_bad_cache_is_refused_before_any_layer_moves(model: Qwen3, case: str, via: str) -> None:
    """Hole: layer 1's cache was checked only when layer 1's launch was made, after layer 0's caches had moved into
    the chain; the refused call left the model with moved handles (MovedError for every later call)."""
    _fresh(model)
    saved = model.k_cache[1]
    shape = [TINY.num_key_value_heads, model.max_seq, TINY.head_dim]
    if case == "shape":
        bad: Any = tile.zeros(tile.bf16, [shape[0], 4, shape[2]])
    elif case == "same":
        bad = model.k_cache[0]
    elif case == "view":
        bad = model.v_cache[0].reshape(*shape)
    elif case == "freed":
        bad = tile.zeros(tile.bf16, shape)
        bad.free()
    else:
        bad = np.zeros(shape, np.float32)
    model.k_cache[1] = bad
    match = r"Qwen3\.k_cache\[1\] is|k_cache\[\d\] and Qwen3\.k_cache\[\d\] share memory|v_cache\[0\] share memory"
    run = (lambda: model.forward([3, 4])) if via == "forward" else (lambda: DecodeGraph(model))
    with pytest.raises(tile.ArgumentError, match=match):
        run()
    assert not model.graphed
    del bad  # a view of layer 0's cache would hold off its next pass (BorrowError)
    model.k_cache[1] = saved
    assert model.forward([5]).shape == (TINY.vocab_size,)  # layer 0's caches were never moved


def test_a_float_token_id_is_refused(model: Qwen3) -> None:
    """Hole: ``int(1.7)`` ran token 1; a float id is a caller's bug (the tokenizer's ids are ints)."""
    _fresh(model)
    with pytest.raises(tile.ArgumentError, match=r"token id 1\.7 is not an int"):
        model.forward([1.7])  # type: ignore[list-item]
    with DecodeGraph(model) as graph, pytest.raises(tile.ArgumentError, match=r"token id 2\.9 is not an int"):
        graph.greedy(2.9)  # type: ignore[arg-type]
    assert model.length == 2
    assert model.forward([np.int64(3)]).shape == (TINY.vocab_size,)


# -- hole: the device sampler (tk.sample) past f32's range, and on rows of NaN ---------------------------------------


@pytest.mark.parametrize("top_k", [0, 2])
@pytest.mark.parametrize(
    ("logits", "temperature"),
    [([1.0, 2.0, 3.0, -1.0], 1e-39), ([1.0, 2.0, 3.0, -1.0], 1e-320), ([1e38, 2e38, 3e38], 0.5)],
)
def test_device_sampling_at_a_tiny_temperature_takes_the_largest_logit(
    logits: list[float], temperature: float, top_k: int
) -> None:
    """Hole: the kernel scaled the logits by ``1 / temperature``, which overflowed f32 (1e39 is inf: every positive
    logit became inf and the first of them won; 2 * 3e38 too): ``tk.sample`` answered 0 (or 1) where the softmax at
    that temperature is all on index 2. It adds ``temperature * noise`` to the logits now (same argmax, no overflow)."""
    import tile.kernels as tk

    x = tile.from_numpy(np.array([logits], np.float32))
    assert [int(tk.sample(x, temperature, top_k=top_k, seed=s).to_numpy()[0]) for s in range(4)] == [2] * 4


@pytest.mark.parametrize("top_k", [0, 2])
def test_device_sampling_a_row_of_nan_gives_an_id_inside_the_row(top_k: int) -> None:
    """Hole: a row of nothing but NaN kept no candidate and ``tk.sample`` returned 2147483647, an id past any
    vocabulary (the embedding lookup of the next step would trap on it). 0 now, as ``tk.argmax`` answers."""
    import tile.kernels as tk

    x = tile.from_numpy(np.full((2, 5), np.nan, np.float32))
    assert tk.sample(x, 1.0, top_k=top_k, seed=3).to_numpy().tolist() == [0, 0]
    assert tk.argmax(x).to_numpy().tolist() == [0, 0]


@pytest.mark.gpu
@pytest.mark.requires_tileiras
@pytest.mark.parametrize("top_k", [0, 50])
def test_gpu_sampling_at_a_tiny_temperature_and_on_nan_rows(gpu: None, top_k: int) -> None:
    """The two device-sampler holes above on the GPU: a vocabulary-wide row at temperature 1e-39 gives its argmax,
    rows of NaN give 0."""
    import tile.kernels as tk

    logits = np.random.default_rng(2).standard_normal((4, 151936)).astype(np.float32) * 3
    logits[2:] = np.nan
    picks = tk.sample(tile.from_numpy(logits), 1e-39, top_k=top_k, seed=9).to_numpy()
    assert picks.tolist() == [*np.argmax(logits[:2], axis=1).tolist(), 0, 0]
    assert tk.sample(tile.from_numpy(logits), 1.0, top_k=top_k, seed=9).to_numpy()[2:].tolist() == [0, 0]
