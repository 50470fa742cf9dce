"""Review 32: an adversarial look, from safe kernels only (no ``unchecked=True``), at the kernel language and its
compiler: loop counters, sub-tiles of a block's own output, ordered and transposed loads, gather/scatter, tuples of
tensors and compile-time constants, on the CPU interpreter and in the Tile IR the compiler emits. Each hole's test
names it and failed before its fix.

Holes found and fixed:

- A 64-bit ``range`` loop not proven in range whose step may pass 1 (review 24 left it open): ``range(a, 2**63 - 1,
  d)`` with ``a``/``d`` i64 parameters was a Tile IR ``for`` whose ``iv + d`` after the last value wraps past
  ``2**63 - 1`` (``a = 2**63 - 2, d = 2**62`` runs once in Python and on the interpreter, whose ``for`` counts in
  Python ints). Tile IR's ``for`` keeps its variable in ``[lb, ub)``: a GPU loop that wrapped would go on from below
  ``lb``, and a compiler may assume it does not and fold the guard ``i - a >= 0`` away. There is no wider type to count
  in (review 24 counts i32 loops in i64), so such a loop is now a ``loop`` whose next value stops at ``ub``: ``iv +
  step`` when ``ub - iv`` (read unsigned, exact) exceeds ``step``, else ``ub``.
- A ``range`` loop with ``break`` (any width) was a ``loop`` stepping by a wrapping ``iv + step``: near the top of the
  type the variable went negative, still below ``ub``, and the loop went on (the interpreter, and a GPU, ran
  iterations Python's ``range`` does not have: ``range(2**31 - 2, 2**31 - 1, 2**30)`` cycled through four values
  until the interpreter's iteration cap). Its next value stops at ``ub`` the same way now.

Tried and found solid (probed on the interpreter and in the emitted IR, not kept as tests): sub-tiles of a shape
that is not a power of two or larger than the owned tile, also when picked by a ``Const`` or a dtype comparison
(compile errors); a sub-tile view escaping a ``tiles()`` walk or chosen between branches (compile errors); an
``order=(1, 0)`` partition's ``num_tiles`` bounding a loop that indexes another tensor, and the reverse (counts
follow the order; a mismatch is the launcher's ArgumentError); tuples of outputs walked in two orders, or at the own
tile and walked, through ``Cs[0]`` and through ``for c in Cs`` (compile errors: one TensorV per element), indexed
by ``len(Cs)``, negatively, by a loop result (compile errors or the right element); globals changed between calls
(annotations are read once at decoration, the body's shape mismatch is a compile error; a changed tuple global reuses
the kernel compiled before, which is self-consistent: its launch checks come from its own ABI); ``tile.abs`` of the
minimum (Tile IR's ``absi`` reads its result unsigned: defined); loop-parallel sub-tile stores with read-back or a
second store in the same iteration (re-chained by StoreScope). gather/scatter and atomics need ``unchecked=True``.
"""

from __future__ import annotations

from types import ModuleType

import numpy as np
import pytest
from helpers_adversarial import ir_lines as _lines
from helpers_adversarial import load_source, time_limit
from helpers_adversarial import out16 as _out
from helpers_adversarial import vec as _vec

import tile.frontend as tile

SOURCE = """
import tile.frontend as tile
from tile.frontend import Mut, Tensor, f32, i32, i64


@tile.entry
def stepped_near_the_top_64(z: Mut[Tensor[f32, (16,)]], x: Tensor[f32, (-1,)], a: i64, d: i64):
    px = x.partition((16,))
    acc = tile.zeros((16,), f32)
    for i in range(a, 9223372036854775807, d):
        acc = acc + px.load((i - a,))  # NEAR-THE-TOP-64
    z.store(acc)


@tile.entry
def skips_near_the_top_64(z: Mut[Tensor[f32, (16,)]], x: Tensor[f32, (-1,)], a: i64, d: i64):
    px = x.partition((16,))
    acc = tile.zeros((16,), f32)
    for i in range(a, 9223372036854775807, d):
        if i == a:
            continue
        acc = acc + px.load((i - a,))
    z.store(acc)


@tile.entry
def breaks_near_the_top(z: Mut[Tensor[f32, (16,)]], x: Tensor[f32, (-1,)], a: i32, d: i32):
    px = x.partition((16,))
    acc = tile.zeros((16,), f32)
    for i in range(a, 2147483647, d):
        if i == 5:
            break
        acc = acc + px.load(((i - a) & 7,))
    z.store(acc)


@tile.entry
def breaks_near_the_top_64(z: Mut[Tensor[f32, (16,)]], x: Tensor[f32, (-1,)], a: i64, d: i64):
    px = x.partition((16,))
    acc = tile.zeros((16,), f32)
    for i in range(a, 9223372036854775807, d):
        if i == 5:
            break
        acc = acc + px.load(((i - a) & 7,))
    z.store(acc)
"""


@pytest.fixture(scope="module")
def kernels(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    return load_source("adversarial_review32_kernels", SOURCE, tmp_path_factory.mktemp("adversarial_review32"))


@pytest.fixture(autouse=True)
def _cpu_backend() -> None:
    tile.set_backend("cpu")


def _defined_before(lines: list[str], name: str, at: int) -> str:
    """The op defining SSA value ``name`` nearest above line ``at`` (the printer reuses names across regions)."""
    return next(line for line in reversed(lines[:at]) if line.strip().startswith(f"{name} = "))


def _tiles_sum(tiles: list[int]) -> np.ndarray:
    return sum((np.arange(16, dtype=np.float32) + 16 * t for t in tiles), np.zeros(16, dtype=np.float32))


# -- hole: a 64-bit range loop whose step could carry its variable past 2**63 - 1 ------------------------------------

I64_TOP = 2**63 - 1


@pytest.mark.parametrize(
    ("a", "step", "tiles"), [(I64_TOP - 1, 2**62, [0]), (I64_TOP - 4, 2, [0, 2]), (I64_TOP - 3, 1, [0, 1, 2])]
)
def test_a_64_bit_loop_whose_step_could_wrap_stops_at_its_bound(
    kernels: ModuleType, a: int, step: int, tiles: list[int]
) -> None:
    """Python runs ``range(2**63 - 2, 2**63 - 1, 2**62)`` once; the emitted loop must not be a ``for`` whose
    ``iv + step`` wraps: it is a ``loop`` whose next value is ``ub`` once ``ub - iv`` (unsigned) is not above the
    step."""
    (z, *_) = kernels.stepped_near_the_top_64(_out(), _vec(), a, step).sync()
    np.testing.assert_array_equal(z.unpartition().to_numpy(), _tiles_sum(tiles))
    lines = _lines(kernels.stepped_near_the_top_64)
    text = "\n".join(lines)
    assert not [line for line in lines if " for %" in line], f"a 64-bit for whose step could wrap it:\n{text}"
    (at,) = [k for k, line in enumerate(lines) if line.strip().startswith("continue ") and "tile<i64>" in line]
    nxt = lines[at].split("continue ")[1].split(",")[0].strip()
    select = _defined_before(lines, nxt, at)
    assert " select " in select, f"the loop's next value is not clamped at its bound:\n{text}"
    cond = select.split(" select ")[1].split(",")[0].strip()
    compare = _defined_before(lines, cond, at)
    assert "cmpi greater_than" in compare, text
    assert "unsigned" in compare, text


@pytest.mark.parametrize("name", ["breaks_near_the_top", "breaks_near_the_top_64"])
@pytest.mark.parametrize(("below_top", "step", "tiles"), [(1, 2**30, [0]), (4, 2, [0, 2]), (3, 1, [0, 1, 2])])
def test_a_loop_with_break_stops_at_its_bound_near_the_top(
    kernels: ModuleType, name: str, below_top: int, step: int, tiles: list[int]
) -> None:
    """Before: the ``loop`` a ``break`` makes stepped by a wrapping ``iv + step``; from ``2**31 - 2`` by ``2**30`` it
    wrapped to ``-2**31 + 2**30 - 2``, still below ``ub``, and cycled (the interpreter stopped at its iteration cap)."""
    top = I64_TOP if name.endswith("64") else 2**31 - 1
    with time_limit(60):
        (z, *_) = getattr(kernels, name)(_out(), _vec(), top - below_top, step).sync()
    np.testing.assert_array_equal(z.unpartition().to_numpy(), _tiles_sum(tiles))


@pytest.mark.parametrize(("below_top", "step", "tiles"), [(1, 2**62, []), (4, 2, [2]), (3, 1, [1, 2])])
def test_a_64_bit_loop_with_continue_stops_at_its_bound(
    kernels: ModuleType, below_top: int, step: int, tiles: list[int]
) -> None:
    """A ``continue`` in such a loop (now a ``loop``) goes on with the same clamped next value: the first iteration
    is skipped and nothing runs past ``ub``."""
    (z, *_) = kernels.skips_near_the_top_64(_out(), _vec(), I64_TOP - below_top, step).sync()
    np.testing.assert_array_equal(z.unpartition().to_numpy(), _tiles_sum(tiles))
    lines = _lines(kernels.skips_near_the_top_64)
    assert not [line for line in lines if " for %" in line], "\n".join(lines)
    continues = [line for line in lines if line.strip().startswith("continue ") and "tile<i64>" in line]
    assert len(continues) == 2, "\n".join(lines)  # the skip's and the body's end, both with the clamped next value
    assert len({c.split("continue ")[1].split(",")[0] for c in continues}) == 1, "\n".join(lines)
