"""The code the benchmarked examples compile to for sm_90, pinned where it decides their speed against cuTile Python:
``examples/attention.py`` (the FMHA benchmark) scales its scores with one ``fma`` per element and stores each walked
output tile without ordering it after the previous tile's store; a chunked rmsnorm written as
``benchmarks/bench_lang_rmsnorm.py`` writes it leaves its chunk stores unordered with each other. No GPU needed."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from tile.compiler import CompileOptions
from tile.compiler._kir import Block, Op, Value
from tile.compiler._parse import parse
from tile.compiler._resolve import resolve
from tile.compiler._spec import ArraySpec, Specialization, Target
from tile.compiler._typecheck import TypedKernel, typecheck

ROOT = Path(__file__).resolve().parents[3]


def _module(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _walk(block: Block) -> Iterator[Op]:
    for op in block.ops:
        yield op
        for region in op.regions:
            yield from _walk(region)


def _typed(
    fn: object,
    arrays: dict[str, ArraySpec],
    options: CompileOptions,
    dtypes: dict[str, str] | None = None,
    own_grid: bool = True,
    **consts: int,
) -> TypedKernel:
    spec = Specialization.make(params=arrays, consts=consts, dtypes=dtypes, options=options, own_grid=own_grid)
    return typecheck(resolve(parse(fn)), spec, Target("sm_90"))  # type: ignore[arg-type]  # a kernel function


def _loop_stores(t: TypedKernel) -> list[str]:
    """For each store in a ``for`` body: 'before' when it takes a token from outside the loop, else 'chained'."""
    out = []
    for loop in (op for op in _walk(t.ir.body) if op.name == "for"):
        inside = {v.id for v in loop.regions[0].args} | {r.id for op in _walk(loop.regions[0]) for r in op.results}
        for store in (op for op in loop.regions[0].ops if op.name == "store_view_tko"):
            token = store.operands[3]
            assert isinstance(token, Value)
            out.append("chained" if token.id in inside else "before")
    return out


@pytest.mark.parametrize("own_grid", [False, True])
@pytest.mark.parametrize("causal", [False, True])
def test_attention_fuses_the_score_scaling_and_leaves_walked_stores_unordered(causal: bool, own_grid: bool) -> None:
    example = _module(ROOT / "examples" / "attention.py")
    f16x3 = ArraySpec("f16", 3, stride_one=(False, False, True))
    arrays = dict.fromkeys(("o", "q", "k", "v"), f16x3)
    kernel = example.attention
    t = _typed(kernel.fn, arrays, kernel.options, None, own_grid, BM=128, D=64, BN=128, CAUSAL=causal, EVEN_K=True)
    names = [op.name for op in _walk(t.ir.body)]
    # Causal: two key loops, as cuTile Python splits its loop at the mask start; the first one without mask code.
    key_loops = [op for op in _walk(t.ir.body) if op.name == "for" and len(op.results) >= 3]  # not the tiles() walk
    assert len(key_loops) == (2 if causal else 1)
    assert names.count("fma") == 2 * len(key_loops)  # per loop: s * scale - m (with a negf), l * alpha + sum
    assert "subf" in names  # m_i - m_ij stays a subtraction: it has no product
    # Every load is proven in range (the masked loop starts at tile.maximum(.., 0)): no in-kernel guard, and the key
    # loops carry only (acc, m, l), no memory token (their helper touches no memory).
    assert "int_to_ptr" not in names
    assert all(str(v.type) != "token" for loop in key_loops for v in loop.results)
    # Any grid: the o.tiles() walk is a loop whose stores are unordered; the own grid (a launch without .grid()):
    # one tile per block, the walk is an if around the body (only the key loop is a for).
    assert _loop_stores(t) == ([] if own_grid else ["before"])
    assert [op.name for op in t.ir.body.ops].count("if") == (1 if own_grid else 0)
    scores = [
        op.name for op in _walk(t.ir.body) if op.results and getattr(op.results[0].type, "shape", None) == (128, 128)
    ]
    assert scores.count("select") == (1 if causal else 0)  # the mask, on the diagonal tiles only
    assert scores.count("cmpi") == (1 if causal else 0)  # rows >= cols: full key tiles need no cols < n_k test
    assert "andi" not in scores


def test_a_chunked_rmsnorm_leaves_its_chunk_stores_unordered() -> None:
    bench = _module(ROOT / "benchmarks" / "bench_lang_rmsnorm.py")
    f16x2 = ArraySpec("f16", 2, stride_one=(False, True))
    arrays = {"z": f16x2, "x": f16x2, "w": ArraySpec("f16", 1, stride_one=(True,))}
    for kernel in (bench.SAFE, bench.UNCHECKED):
        t = _typed(kernel.fn, arrays, kernel.options, {"T": "f16"}, NT=4096, TILE=1024)
        assert _loop_stores(t) == ["before"]
        assert [op.name for op in _walk(t.ir.body)].count("fma") == 1  # acc + x * x


@pytest.mark.parametrize(("bm", "additive"), [(64, True), (128, False)])
def test_attention_masks_64_row_query_tiles_additively(bm: int, additive: bool) -> None:
    # 64-row tiles: s + where(keep, 0, -inf), cuTile's form (the where(keep, s, ..) form keeps the compare results
    # alive across the MMA's wait, which at occupancy 4 spills, SASS); larger tiles: where(keep, s, -inf).
    example = _module(ROOT / "examples" / "attention.py")
    f16x3 = ArraySpec("f16", 3, stride_one=(False, False, True))
    arrays = dict.fromkeys(("o", "q", "k", "v"), f16x3)
    kernel = example.attention
    t = _typed(kernel.fn, arrays, kernel.options, None, True, BM=bm, D=64, BN=64, CAUSAL=True, EVEN_K=True)
    masked = [op for op in _walk(t.ir.body) if op.name == "for" and len(op.results) >= 3][-1]
    body = list(_walk(masked.regions[0]))
    [select] = [op for op in body if op.name == "select" and getattr(op.results[0].type, "shape", None) == (bm, 64)]
    users = {op.name for op in body if select.results[0] in op.operands}
    assert ("addf" in users) == additive
    scores = {r.id for op in body if op.name == "mmaf" for r in op.results}
    selects_scores = any(isinstance(v, Value) and v.id in scores for v in select.operands)
    assert selects_scores != additive  # the where form selects among the MMA's scores, the additive one constants
