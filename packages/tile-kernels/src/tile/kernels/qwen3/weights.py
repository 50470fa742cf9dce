"""Qwen3 weights: read a Hugging Face safetensors checkpoint directory, write one, or make seeded random weights.

Weights are a ``dict`` from the checkpoint's tensor names (``model.layers.0.self_attn.q_proj.weight``, ...; see
`Qwen3Config.weight_shapes`) to bf16 numpy arrays (``ml_dtypes.bfloat16``).

The safetensors format is read here directly (an 8-byte little-endian header length, a JSON header giving each
tensor's dtype, shape and byte range, then the raw little-endian bytes) rather than through the ``safetensors``
package: its numpy API cannot return bf16 (numpy has no bf16 type), which is what every Qwen3 checkpoint holds, and
its torch API would make torch a dependency. Files are memory-mapped, so a tensor is read once, when converted.
"""

from __future__ import annotations

import itertools
import json
import math
import struct
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np

from tile.frontend import ArgumentError
from tile.kernels.qwen3.config import Qwen3Config

__all__ = ["WeightsError", "load_checkpoint", "random_weights", "read_safetensors", "save_checkpoint"]

Weights = dict[str, np.ndarray[Any, Any]]
Progress = Callable[[str, int, int], None]
"""``progress(name, done, total)``: called after each tensor is read or made."""
Select = dict[str, tuple[slice, ...]]
"""The part of each tensor to keep, by name (``full[select[name]]``; a missing name or ``()``: all of it); slices of
step 1 (a tensor-parallel rank's shard: `tile.kernels.qwen3.tp.shard_slices`)."""

_DTYPES: dict[str, Any] = {
    "BF16": ml_dtypes.bfloat16,
    "F16": np.float16,
    "F32": np.float32,
    "F64": np.float64,
    "I32": np.int32,
    "I64": np.int64,
}
_NAMES = {np.dtype(v): k for k, v in _DTYPES.items()}
_MAX_HEADER = 100 * 1024 * 1024


class WeightsError(ArgumentError):
    """A checkpoint that cannot be used: unreadable file, malformed header, missing tensor or wrong shape."""


def read_safetensors(path: str | Path) -> Iterator[tuple[str, np.ndarray[Any, Any]]]:
    """Yield ``(name, array)`` for every tensor of one ``.safetensors`` file (read-only, memory-mapped arrays).

    Raises `WeightsError` naming the file and the tensor, before yielding anything, for a file that cannot be read, a
    malformed header (not a JSON object, a name given twice, a dtype it does not know, a shape that is not a list of
    non-negative ints), or byte ranges that do not match their shapes, lie outside the file or overlap.
    """
    path = Path(path)
    header, start, size = _header(path)
    entries = []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype = np.dtype(_DTYPES[info["dtype"]])
            shape = _ints(info["shape"], None)
            begin, end = _ints(info["data_offsets"], 2)
        except (KeyError, TypeError, ValueError):
            raise WeightsError(f"{path}: tensor {name!r} has a malformed entry {info!r}") from None
        count = math.prod(shape)  # a Python int: a hostile shape cannot wrap around to match its byte range
        if not 0 <= begin <= end <= size - start or end - begin != count * dtype.itemsize:
            raise WeightsError(f"{path}: tensor {name!r} ({info['dtype']} {list(shape)}) has byte range {begin}..{end}")
        entries.append((name, dtype, shape, begin, end, count))
    ranges = sorted((begin, end, name) for name, _, _, begin, end, count in entries if count)
    for (_, end, first), (begin, _, second) in itertools.pairwise(ranges):
        if begin < end:
            raise WeightsError(f"{path}: tensors {first!r} and {second!r} have overlapping byte ranges")
    for name, dtype, shape, begin, _, count in entries:
        if count == 0:
            yield name, np.zeros(shape, dtype)
        else:
            yield name, np.memmap(path, dtype=dtype.newbyteorder("<"), mode="r", offset=start + begin, shape=shape)


def _header(path: Path) -> tuple[Any, int, int]:
    """The JSON header of a safetensors file, where its data starts, and the file's size."""
    try:
        size = path.stat().st_size
        with path.open("rb") as f:
            raw = f.read(8)
            if len(raw) < 8:
                raise WeightsError(f"{path}: shorter than a safetensors header")
            (n,) = struct.unpack("<Q", raw)
            if n > min(_MAX_HEADER, size - 8):
                raise WeightsError(f"{path}: header length {n} is larger than the file allows; not a safetensors file")
            text = f.read(n)
    except OSError as exc:
        raise WeightsError(f"{path}: cannot be read as a safetensors file ({exc})") from None
    header = _json(text, f"{path}: the header")
    if not isinstance(header, dict):
        raise WeightsError(f"{path}: the header is not a JSON object")
    return header, 8 + n, size


def _json(text: bytes | str, what: str) -> Any:
    """``json.loads(text)``, refusing a name given twice in an object (json keeps the last one silently)."""

    def unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in pairs:
            if key in out:
                raise WeightsError(f"{what} names {key!r} twice")
            out[key] = value
        return out

    try:
        return json.loads(text, object_pairs_hook=unique)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise WeightsError(f"{what} is not JSON ({type(exc).__name__}: {str(exc)[:200]})") from None


def _ints(value: Any, length: int | None) -> tuple[int, ...]:
    """The JSON list ``value`` of ints in ``0 .. 2**63`` (``length`` of them if given, else at most numpy's 64
    dimensions); ValueError otherwise."""
    if not isinstance(value, list) or len(value) != (len(value) if length is None else length) or len(value) > 64:
        raise ValueError(value)
    if not all(type(v) is int and 0 <= v < 2**63 for v in value):
        raise ValueError(value)
    return tuple(value)


def _files(directory: Path) -> list[Path]:
    index = directory / "model.safetensors.index.json"
    if index.is_file():
        try:
            text = index.read_text()
        except (OSError, UnicodeDecodeError) as exc:
            raise WeightsError(f"{index}: cannot be read ({exc})") from None
        data = _json(text, str(index))
        weight_map = data.get("weight_map") if isinstance(data, dict) else None
        if not isinstance(weight_map, dict) or not all(isinstance(f, str) for f in weight_map.values()):
            raise WeightsError(f"{index}: 'weight_map' must map tensor names to file names")
        files = sorted(set(weight_map.values()))
        for f in files:  # a file of this directory, by name: an index cannot send the loader elsewhere
            if Path(f).is_absolute() or Path(f).name != f or f in (".", ".."):
                raise WeightsError(f"{index}: {f!r} is not a file name of this directory; the index names files in it")
        return [directory / f for f in files]
    files = sorted(directory.glob("*.safetensors"))
    if not files:
        raise WeightsError(f"{directory}: no *.safetensors files (and no model.safetensors.index.json)")
    return files


def load_checkpoint(
    directory: str | Path, config: Qwen3Config, progress: Progress | None = None, *, select: Select | None = None
) -> Weights:
    """Read the Qwen3 tensors of a Hugging Face checkpoint directory as bf16 arrays.

    Every tensor `Qwen3Config.weight_shapes` names must be there, once, with its shape (f16/f32/f64 tensors are
    converted to bf16, integer ones refused); ``lm_head.weight`` is ignored for a tied model. With ``select`` only
    that part of each tensor is read (the files are memory-mapped). An index names files of the directory by name.
    Raises `WeightsError` naming what is missing or wrong.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise WeightsError(f"{directory}: not a directory; pass a Hugging Face checkpoint directory")
    shapes = config.weight_shapes()
    out: Weights = {}
    found: dict[str, Path] = {}
    for file in _files(directory):
        for name, array in read_safetensors(file):
            if name not in shapes:
                continue
            if array.shape != shapes[name]:
                raise WeightsError(
                    f"{file}: {name} has shape {list(array.shape)}, the config needs {list(shapes[name])}"
                )
            if array.dtype.kind != "f" and array.dtype != ml_dtypes.bfloat16:
                raise WeightsError(f"{file}: {name} holds {array.dtype} values; weights are floating point")
            if name in found:  # two files giving one tensor: which one is meant cannot be told
                raise WeightsError(f"{file}: {name} is also in {found[name]}; a checkpoint holds each tensor once")
            found[name] = file
            out[name] = np.ascontiguousarray(array[(select or {}).get(name, ())], dtype=ml_dtypes.bfloat16)
            if progress is not None:
                progress(name, len(out), len(shapes))
    missing = [n for n in shapes if n not in out]
    if missing:
        raise WeightsError(f"{directory}: {len(missing)} tensor(s) missing, first {missing[0]!r}")
    return out


def save_checkpoint(weights: Weights, config: Qwen3Config, directory: str | Path) -> Path:
    """Write ``weights`` as ``model.safetensors`` plus ``config.json`` (loadable by ``Qwen3ForCausalLM``)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset, order = 0, []
    for name, array in weights.items():
        arr = np.ascontiguousarray(array)
        if arr.dtype not in _NAMES:
            raise WeightsError(f"save_checkpoint: {name} has dtype {arr.dtype}, which safetensors cannot hold")
        header[name] = {
            "dtype": _NAMES[arr.dtype],
            "shape": list(arr.shape),
            "data_offsets": [offset, offset + arr.nbytes],
        }
        offset += arr.nbytes
        order.append(arr)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the format aligns the data to 8 bytes
    with (directory / "model.safetensors").open("wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for arr in order:
            f.write(arr.astype(arr.dtype.newbyteorder("<"), copy=False).tobytes())
    (directory / "config.json").write_text(json.dumps(config.to_hf(), indent=2))
    return directory


_POOL = 1 << 20


def random_weights(
    config: Qwen3Config, seed: int = 0, progress: Progress | None = None, *, select: Select | None = None
) -> Weights:
    """Seeded random bf16 weights of the exact checkpoint shapes.

    Matrices are normal with variance ``1 / fan_in`` (activations stay O(1) through the layers, logits are O(1)),
    embeddings standard normal, norm weights ``1 + 0.1 * normal``. Tensors larger than a million elements are cut
    from one seeded pool of normal values at seeded offsets (fast enough for 32B; the values are for timing).
    With ``select``, each tensor is that part of the same full tensor, made without making the rest of a large one
    (only its selected rows), so tensor-parallel ranks derive their shards of the same model independently.
    """
    rng = np.random.default_rng(seed)
    pool = rng.standard_normal(_POOL, dtype=np.float32)
    out: Weights = {}
    shapes = config.weight_shapes()
    for name, shape in shapes.items():
        count = int(np.prod(shape))
        scale = np.float32(1.0 if len(shape) == 1 or "embed_tokens" in name else shape[1] ** -0.5)
        part = (select or {}).get(name, ())
        if count <= _POOL:
            values = rng.standard_normal(count, dtype=np.float32) * scale
            values = 1.0 + 0.1 * values if len(shape) == 1 else values
            array = values.astype(ml_dtypes.bfloat16).reshape(shape)[part]
        else:  # bf16 from the start: a 32B model's matrices never exist in f32
            rolled = np.roll((pool * scale).astype(ml_dtypes.bfloat16), int(rng.integers(_POOL)))
            array = _rows_of_periodic(rolled, shape, part)
        out[name] = np.ascontiguousarray(array)
        if progress is not None:
            progress(name, len(out), len(shapes))
    return out


def _rows_of_periodic(period: np.ndarray[Any, Any], shape: tuple[int, ...], part: tuple[slice, ...]) -> Any:
    """``np.resize(period, prod(shape)).reshape(shape)[part]``, making only the selected rows: element ``k`` of the
    flat tensor is ``period[k % len(period)]``, so rows ``a..b`` start at ``period[a * row % len(period)]``."""
    first, last, step = (part[0] if part else slice(None)).indices(shape[0])
    if step != 1:
        raise ArgumentError(f"random_weights: select takes slices of step 1, got {part[0]}")
    row = int(np.prod(shape[1:], dtype=np.int64))
    start = first * row % period.size
    rows = np.resize(np.roll(period, -start), max(0, last - first) * row).reshape(max(0, last - first), *shape[1:])
    columns = (slice(None), *part[1:])
    return rows[columns]
