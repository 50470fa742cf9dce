"""Numerics of the corpus on CPU: each kernel, specialized for its inputs as a launch would be (so every ``assume``
fact is checked by the interpreter), runs in tile.ir's reference interpreter and must match its numpy reference
(and touch nothing else: unwritten outputs keep their poison)."""

from __future__ import annotations

import importlib
import io
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tile.compiler import specialize
from tile.compiler._parse import parse
from tile.compiler._resolve import resolve
from tile.compiler._spec import KernelABI, Target
from tile.compiler._typecheck import typecheck
from tile.ir import interp  # a declared dependency (tile-ir[interp]): missing, it must fail, not skip

CORPUS = Path(__file__).parent / "corpus"
if str(CORPUS) not in sys.path:
    sys.path.insert(0, str(CORPUS))
MODULES = sorted(p.stem for p in CORPUS.glob("tc_corpus_*.py") if p.stem not in ("tc_corpus_case", "tc_corpus_lib"))
CASES = [c for m in MODULES for c in importlib.import_module(m).CASES if c.reference is not None]


def _abi_args(abi: KernelABI, args: dict[str, Any]) -> list[Any]:
    out: list[Any] = []
    for slot in abi.slots:
        value = args[slot.param]
        if slot.role in ("base", "pointer"):
            out.append(value)
        elif slot.role == "shape":
            out.append(value.shape[slot.axis])
        elif slot.role == "stride":
            out.append(value.strides[slot.axis] // value.itemsize)
        else:
            out.append(int(value) if slot.dtype.startswith(("i", "u")) else value)
    return out


def _grid(case: Any, args: dict[str, Any]) -> tuple[int, ...]:
    if case.grid is not None:
        return tuple(case.grid(args))
    resolved = resolve(parse(case.kernel))
    mut = next(p for p in resolved.params if p.kind == "mut")
    tile = [case.consts[d] if isinstance(d, str) else d for d in mut.shape]
    return tuple(math.ceil(e / t) for e, t in zip(args[mut.name].shape, tile, strict=True))


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_corpus_matches_numpy_in_the_interpreter(case: Any) -> None:
    from tile.compiler._lower import lower

    target = Target("sm_90")
    args = case.inputs(np.random.default_rng(7))
    shapes = {k: v.shape for k, v in args.items() if isinstance(v, np.ndarray)}
    # A case with its own grid launches tiles() walks on any grid: compile them as loops (as kernel.grid(g) does).
    own_grid = case.grid is None
    spec = specialize(case.kernel, shapes, consts=dict(case.consts), options=case.options, own_grid=own_grid)
    typed = typecheck(resolve(parse(case.kernel)), spec, target)
    module = lower(typed, target).module
    expected = case.reference({k: v.copy() if isinstance(v, np.ndarray) else v for k, v in args.items()})
    interp.launch(module, _grid(case, args), _abi_args(typed.abi, args), stdout=io.StringIO())
    for name, want in expected.items():
        got = args[name]
        case.tol.assert_close(got, want, f"{case.name}: output '{name}'")


@pytest.mark.parametrize(
    ("shape", "group"), [((16, 32), None), ((32, 16), None), ((32, 64), None), ((16, 64), 1), ((48, 32), 2)]
)
def test_a_tile_walk_over_an_output_of_compile_time_extents(shape: tuple[int, int], group: int | None) -> None:
    """tile.compiler takes outputs whose extents are compiled in (`ArraySpec.static_shape`): tile counts are then
    constants, and a count of 1 folds the tile-number division away. Every tile is written once, by its own number.
    Mutants killed (scripts/mutation.py): the fold in ``_nonnegative_divide`` taken for a count of 2 (``b == 1``
    into ``b == 2``), for every count but 1 (``==`` into ``!=``) or every constant count (``and`` into ``or``), and
    the remainder by a count of 1 made 1."""
    from tile.compiler import ArraySpec, Specialization
    from tile.compiler._lower import lower

    k = importlib.import_module("tc_unit_kernels")
    kernel = k.copies_by_walk if group is None else k.grouped_tiles
    x = np.arange(shape[0] * shape[1], dtype=np.float32).reshape(shape)
    z = np.full(shape, np.nan, np.float32)
    spec = Specialization.make(
        params={"z": ArraySpec("f32", 2, static_shape=shape), "x": ArraySpec.of("f32", shape, (shape[1], 1))},
        consts={"B": 16},
        own_grid=False,
    )
    typed = typecheck(resolve(parse(kernel)), spec, Target("sm_90"))
    interp.launch(lower(typed, Target("sm_90")).module, (3,), _abi_args(typed.abi, {"z": z, "x": x}))
    if group is None:
        np.testing.assert_array_equal(z, x)
    else:  # grouped_tiles sums each row of tiles of x into every tile of that row
        rows = x.reshape(shape[0] // 16, 16, shape[1] // 16, 16).sum(axis=2)
        np.testing.assert_array_equal(z, np.repeat(rows, shape[1] // 16, axis=1).reshape(shape))
