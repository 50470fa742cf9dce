"""Tier 3: every corpus kernel with a numpy reference compiles for this GPU, runs through tile.core and matches its
reference (outputs are poisoned before the run; inputs are fresh random values; comparisons in float64)."""

from __future__ import annotations

import importlib
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tile.compiler._parse import parse
from tile.compiler._resolve import resolve
from tile.compiler._spec import KernelABI, Target

CORPUS = Path(__file__).parent / "corpus"
if str(CORPUS) not in sys.path:
    sys.path.insert(0, str(CORPUS))
MODULES = sorted(p.stem for p in CORPUS.glob("tc_corpus_*.py") if p.stem not in ("tc_corpus_case", "tc_corpus_lib"))
CASES = [c for m in MODULES for c in importlib.import_module(m).CASES if c.reference is not None]
_SIGNATURE = {"i32": "i32", "i64": "i64", "f16": "f16", "bf16": "bf16", "f32": "f32", "f64": "f64"}


def _grid(case: Any, args: dict[str, Any]) -> tuple[int, ...]:
    if case.grid is not None:
        return tuple(case.grid(args))
    mut = next(p for p in resolve(parse(case.kernel)).params if p.kind == "mut")
    tile = [case.consts[d] if isinstance(d, str) else d for d in mut.shape]
    return tuple(math.ceil(e / t) for e, t in zip(args[mut.name].shape, tile, strict=True))


def _pack(abi: KernelABI, args: dict[str, Any], buffers: dict[str, Any]) -> tuple[list[Any], list[str]]:
    values: list[Any] = []
    kinds: list[str] = []
    for slot in abi.slots:
        value = args[slot.param]
        if slot.role in ("base", "pointer"):
            values.append(buffers[slot.param])
            kinds.append("ptr")
            continue
        if slot.role == "shape":
            values.append(value.shape[slot.axis])
        elif slot.role == "stride":
            values.append(value.strides[slot.axis] // value.itemsize)
        else:
            values.append(value)
        kinds.append(_SIGNATURE[slot.dtype])
    return values, kinds


@pytest.mark.gpu
@pytest.mark.requires_tileiras
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_corpus_matches_numpy_on_the_gpu(case: Any) -> None:
    from tile import core
    from tile.compiler import compile_kernel, specialize

    device = core.Device(0)
    if int(device.arch[3:]) < min(int(a[3:]) for a in case.archs):
        pytest.skip(f"{case.name} needs {case.archs[0]} or newer, this GPU is {device.arch}")
    args = case.inputs(np.random.default_rng(2026))
    arrays = {k: v for k, v in args.items() if isinstance(v, np.ndarray)}
    expected = case.reference({k: v.copy() if isinstance(v, np.ndarray) else v for k, v in args.items()})
    shapes = {k: v.shape for k, v in arrays.items()}
    # A case with its own grid launches tiles() walks on any grid: compile them as loops (as kernel.grid(g) does).
    own_grid = case.grid is None
    spec = specialize(case.kernel, shapes, consts=dict(case.consts), options=case.options, own_grid=own_grid)
    compiled = compile_kernel(case.kernel, spec, Target(device.arch))
    assert compiled.cubin is not None
    function = core.Module.from_cubin(compiled.cubin, device=device).function(compiled.entry)
    stream = device.default_stream
    buffers = {
        k: core.DeviceBuffer.from_host(np.ascontiguousarray(v), device=device, stream=stream) for k, v in arrays.items()
    }
    values, kinds = _pack(compiled.abi, args, buffers)
    core.launch(function, _grid(case, args), (1, 1, 1), values, stream=stream, signature=kinds)
    stream.synchronize()
    for name, want in expected.items():
        got = buffers[name].to_numpy(arrays[name].dtype, arrays[name].shape)
        case.tol.assert_close(got, want, f"{case.name}: output '{name}' on {device.name}")
    for buffer in buffers.values():
        buffer.free()
