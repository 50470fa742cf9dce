"""Review 24: Tile IR operations whose result is undefined for some inputs, reachable from safe kernels. The CPU
interpreter defines every op for every input; Tile IR (and the LLVM under tileiras) may not, and a compiler may fold
away an in-kernel bounds check on an index computed through an undefined result. Each hole's test runs the kernel on
the interpreter and checks the emitted IR keeps the op's inputs inside its defined range; each failed before its fix.

Holes found and fixed:

- A signed ``//``, ``%`` or ``tile.cdiv`` of the minimum by -1: Tile IR's ``divi`` calls it undefined (it overflows;
  LLVM's ``sdiv``/``srem`` of it are too), the interpreter wraps (the minimum) and gives the remainder 0. A run-time
  divisor of -1 is now replaced by 1 before the op and the quotient is the negation (``0 - x``, wrapping); a constant
  -1 is the negation (or the remainder 0) without the op.
- ``tile.cdiv`` skipped the defined division of review 23: a run-time divisor of 0 reached ``divi`` (undefined), and
  ``tile.cdiv(n, 0)`` compiled. It shares the ``//`` lowering now (a run-time 0 divides by 1, a constant 0 is a compile
  error).
- A run-time ``range`` step: Tile IR's ``for`` requires a positive step (the interpreter refused a step below 1 with
  an internal error; the GPU was undefined, and a compiler may assume the variable stays in ``[lb, ub)``). A step
  below 1 now stops the kernel (an assertion naming the line), and the ``for`` gets step 1 over an empty range.
- An i32 ``range`` loop not proven in range, with a step that may pass 1: its last value plus the step could pass
  ``2**31 - 1`` (``range(2**31 - 2, 2**31 - 1, 2**30)``). The interpreter stops at ``ub``; Tile IR's ``for`` says its
  variable stays in ``[lb, ub)``, so a GPU loop that wraps to ``-2**31`` (or a compiler that assumes it cannot) would
  disagree. Such a loop now counts in i64 (no wrap for i32 bounds) and truncates its variable to i32 (exact).

Checked and found defined or unreachable (see the report): shifts, division by zero and ``ftoi`` (review 23);
``addi``/``subi``/``muli``/``shli``/``trunci`` are all emitted with ``overflow=none`` (wrapping, defined);
``exti``/``ftof``/``itof``/``mulhii``/``maxi``/``mini``/``select`` have no undefined inputs; ``extract`` indices are
checked and clamped (constant ones outside are compile errors); ``iota`` is i32 of a tile extent; ``offset`` (pointer
arithmetic) is only in ``unchecked=True`` kernels; ``get_index_space_shape`` into i32 fits because no dim exceeds
``2**31 - 1`` (ArgumentError at launch); ``make_tensor_view`` gets i64 shapes and strides when a tensor's extents,
strides or reach pass i32; the ``assume bounded<0, ?>`` on extents and strides holds (Tensor refuses negative strides
and extents) and every ``assume div_by`` is derived from the launch's own extents, strides and address (all in the
compile cache key: address & 15, divisibility capped at 16); the schedule of ``z.tiles()`` divides by tile counts only
inside the walk (``t`` below their product, so none is 0); a ``tiles()`` walk's step is the block count (>= 1).
"""

from __future__ import annotations

from types import ModuleType

import numpy as np
import pytest
from helpers_adversarial import ir_lines as _lines
from helpers_adversarial import load_source
from helpers_adversarial import out16 as _out
from helpers_adversarial import vec as _vec

import tile.frontend as tile
from tile.compiler import CompileError
from tile.ir.interp import KernelAssertionError

SOURCE = """
import tile.frontend as tile
from tile.frontend import Mut, Tensor, f32, i32, i64


@tile.entry
def divided_by_run_time(z: Mut[Tensor[f32, (16,)]], x: Tensor[f32, (-1,)], a: i32, d: i32):
    z.store(x.partition((16,)).load(((a // d & 3) + a % d,)))  # DIVIDED


@tile.entry
def divided_by_minus_one(z: Mut[Tensor[f32, (16,)]], x: Tensor[f32, (-1,)], a: i32, d: i32):
    z.store(x.partition((16,)).load(((a // -1 & 3) + a % -1,)))  # BY-MINUS-ONE


@tile.entry
def ceil_divided(z: Mut[Tensor[f32, (16,)]], x: Tensor[f32, (-1,)], a: i32, d: i32):
    z.store(x.partition((16,)).load((tile.cdiv(a, d) & 7,)))  # CDIV


@tile.entry
def ceil_divided_by_zero(z: Mut[Tensor[f32, (16,)]], x: Tensor[f32, (-1,)], a: i32, d: i32):
    z.store(x.partition((16,)).load((tile.cdiv(a, 0),)))  # CDIV-BY-0


@tile.entry
def stepped(z: Mut[Tensor[f32, (16,)]], x: Tensor[f32, (-1,)], a: i32, d: i32):
    px = x.partition((16,))
    acc = tile.zeros((16,), f32)
    for i in range(0, a, d):  # STEPPED
        acc = acc + px.load((i,))
    z.store(acc)


@tile.entry
def stepped_near_the_top(z: Mut[Tensor[f32, (16,)]], x: Tensor[f32, (-1,)], a: i32, d: i32):
    px = x.partition((16,))
    acc = tile.zeros((16,), f32)
    for i in range(a, 2147483647, d):
        acc = acc + px.load((i - a,))  # NEAR-THE-TOP
    z.store(acc)
"""

MIN = -(2**31)


@pytest.fixture(scope="module")
def kernels(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    return load_source("adversarial_review24_kernels", SOURCE, tmp_path_factory.mktemp("adversarial_review24"))


@pytest.fixture(autouse=True)
def _cpu_backend() -> None:
    tile.set_backend("cpu")


def line_of(marker: str) -> str:
    """``file:line`` of the kernel source line tagged ``# marker``."""
    (number,) = [i for i, text in enumerate(SOURCE.splitlines(), 1) if text.endswith(f"# {marker}")]
    return f"adversarial_review24_kernels.py:{number}"


def _defined_by(lines: list[str], name: str) -> str:
    """The op that defines SSA value ``name``."""
    return next(line for line in lines if line.strip().startswith(f"{name} = "))


def _divisor_is_never_minus_one(lines: list[str], op: str) -> None:
    """Every ``op`` divides by a select whose condition compared the divisor with -1 (and 0)."""
    text = "\n".join(lines)
    found = [line for line in lines if f" {op} " in line]
    assert found, f"no {op} in:\n{text}"
    for line in found:
        divisor = line.split(f" {op} ")[1].split(",")[1].split()[0]
        select = _defined_by(lines, divisor)
        assert " select " in select, f"{op} by an unguarded divisor:\n{text}"
        condition = _defined_by(lines, select.split(" select ")[1].split(",")[0])
        compares = [_defined_by(lines, v.strip()) for v in condition.split(" ori ")[1].split(":")[0].split(",")]
        assert any("cst_-1_" in c for c in compares), f"{op}'s divisor is not compared with -1:\n{text}"


# -- hole: the signed minimum divided by -1 ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "d", "tile_index"),
    [(MIN, -1, 0), (-6, -1, 2), (7, 2, 4), (-7, 2, 1), (7, 0, 3), (MIN + 1, -1, 3)],
)
def test_a_run_time_divisor_of_minus_one_is_defined_in_the_kernel(
    kernels: ModuleType, a: int, d: int, tile_index: int
) -> None:
    """``MIN // -1`` wraps to ``MIN`` (``& 3`` is tile 0) and ``MIN % -1`` is 0, as the interpreter defines them; the
    lowering never hands ``divi``/``remi`` a divisor of -1 (Tile IR: the overflow is undefined)."""
    (z, *_) = kernels.divided_by_run_time(_out(), _vec(), a, d).sync()
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.arange(16) + 16 * tile_index)
    lines = _lines(kernels.divided_by_run_time)
    for op in ("divi", "remi"):
        _divisor_is_never_minus_one(lines, op)


@pytest.mark.parametrize(("a", "tile_index"), [(MIN, 0), (-6, 2), (5, 3)])
def test_a_constant_divisor_of_minus_one_negates_without_a_division(
    kernels: ModuleType, a: int, tile_index: int
) -> None:
    (z, *_) = kernels.divided_by_minus_one(_out(), _vec(), a, 1).sync()
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.arange(16) + 16 * tile_index)
    text = "\n".join(lines := _lines(kernels.divided_by_minus_one))
    assert not any(" divi " in line or " remi " in line for line in lines), text
    assert any(" subi " in line for line in lines), text


# -- hole: tile.cdiv divided by whatever it was given ----------------------------------------------------------------


@pytest.mark.parametrize(("a", "d", "tile_index"), [(7, 2, 4), (7, 0, 7), (MIN, -1, 0), (-9, -2, 5)])
def test_a_run_time_cdiv_divisor_of_zero_or_minus_one_is_defined_in_the_kernel(
    kernels: ModuleType, a: int, d: int, tile_index: int
) -> None:
    """``tile.cdiv(7, 0)`` divides by 1 (the interpreter's meaning), ``tile.cdiv(MIN, -1)`` wraps to ``MIN``."""
    (z, *_) = kernels.ceil_divided(_out(), _vec(), a, d).sync()
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.arange(16) + 16 * tile_index)
    _divisor_is_never_minus_one(_lines(kernels.ceil_divided), "divi")


def test_cdiv_by_the_constant_zero_is_a_compile_error(kernels: ModuleType) -> None:
    with pytest.raises(CompileError, match=r"tile\.cdiv by the constant 0") as e:
        kernels.ceil_divided_by_zero(_out(), _vec(), 7, 1)
    assert line_of("CDIV-BY-0") in str(e.value)


# -- hole: a run-time range step below 1 -------------------------------------------------------------------------


@pytest.mark.parametrize(("n", "step", "tiles"), [(4, 2, [0, 2]), (3, 1, [0, 1, 2]), (8, 100, [0]), (0, 5, [])])
def test_a_positive_run_time_range_step_runs_as_python_says(
    kernels: ModuleType, n: int, step: int, tiles: list[int]
) -> None:
    (z, *_) = kernels.stepped(_out(), _vec(), n, step).sync()
    want = sum((np.arange(16) + 16 * t for t in tiles), np.zeros(16))
    np.testing.assert_array_equal(z.unpartition().to_numpy(), want)


@pytest.mark.parametrize("step", [0, -1, MIN])
def test_a_run_time_range_step_below_one_stops_the_kernel(kernels: ModuleType, step: int) -> None:
    """Before: the interpreter raised an internal error at the ``for``, and the GPU's ``for`` had an undefined step.
    Now an in-kernel check names the line, and the ``for`` itself only ever steps by a positive value."""
    with pytest.raises(KernelAssertionError, match=r"range\(\) step must be positive") as e:
        kernels.stepped(_out(), _vec(), 4, step).sync()
    assert line_of("STEPPED") in str(e.value)
    lines = _lines(kernels.stepped)
    text = "\n".join(lines)
    loop = next(line for line in lines if " for %" in line)
    step_value = loop.split("step ")[1].split(")")[0]
    select = _defined_by(lines, step_value)
    if " exti " in select:  # counted in i64 (see the next test): the step widened
        select = _defined_by(lines, select.split(" exti ")[1].split()[0])
    assert " select " in select, f"the for steps by an unchecked value:\n{text}"
    check = _defined_by(lines, select.split(" select ")[1].split(",")[0])
    assert "cmpi greater_than" in check, text


# -- hole: an i32 loop variable that the step could carry past 2**31 - 1 -----------------------------------------


@pytest.mark.parametrize(
    ("a", "step", "tiles"), [(2**31 - 2, 2**30, [0]), (2**31 - 5, 2, [0, 2]), (2**31 - 4, 1, [0, 1, 2])]
)
def test_a_run_time_step_near_the_top_of_i32_counts_in_i64(
    kernels: ModuleType, a: int, step: int, tiles: list[int]
) -> None:
    """``range(2**31 - 2, 2**31 - 1, 2**30)`` runs once (Python, the interpreter); in i32 the ``for``'s next value
    would wrap to ``-2**31 + ...``. The ``for`` counts in i64 and the kernel's variable is its truncation to i32."""
    (z, *_) = kernels.stepped_near_the_top(_out(), _vec(), a, step).sync()
    want = sum((np.arange(16) + 16 * t for t in tiles), np.zeros(16))
    np.testing.assert_array_equal(z.unpartition().to_numpy(), want)
    lines = _lines(kernels.stepped_near_the_top)
    text = "\n".join(lines)
    loop = next(line for line in lines if " for %" in line)
    assert ": tile<i64> iter_values" in loop, f"an i32 for whose step could wrap it:\n{text}"
    variable = loop.split(" for ")[1].split()[0]
    assert any(f"trunci {variable} :" in line and "-> tile<i32>" in line for line in lines), text
