"""The steady-state launch path (`_plan`): a call layout checked once skips binding and specializing, yet every
misuse that a repeated layout can still carry (moved or freed handles, out-of-range scalars, aliasing through
different addresses, outside views) gets the same typed error as the first call."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import tile.frontend as tile
from tile.frontend import _signature, f32

N = 1024


def _warm(kernel: Any, *args: Any) -> tuple[Any, ...]:
    """Launch once so the kernel holds a plan for this layout; return the handed-back handles."""
    return tuple(kernel(*args).sync())


@pytest.fixture
def binds(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record every full bind (the slow path)."""
    calls: list[str] = []
    real = _signature.bind

    def counting(kernel: str, *args: Any, **kwargs: Any) -> Any:
        calls.append(kernel)
        return real(kernel, *args, **kwargs)

    monkeypatch.setattr("tile.frontend._entry.bind", counting)
    return calls


def test_a_repeated_layout_skips_the_full_checks(k: ModuleType, binds: list[str]) -> None:
    z, x, y = _warm(k.add, tile.zeros(f32, [N]).partition([128]), tile.ones(f32, [N]), tile.ones(f32, [N]))
    warm = len(binds)  # 0 when an earlier test already launched this layout
    for _ in range(3):
        z, x, y = k.add(z, x, y).sync()
    assert len(binds) == warm
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.full(N, 2.0, np.float32))


def test_keyword_consts_and_scalars_take_the_plan(k: ModuleType, binds: list[str]) -> None:
    z, x, n = _warm(k.scale_int, tile.zeros(f32, [N]).partition([128]), tile.ones(f32, [N]), 3)
    warm = len(binds)
    z, x, n = k.scale_int(z, x, 5).sync()
    assert len(binds) == warm
    assert n == 5
    with pytest.raises(tile.ArgumentError, match="does not fit in i32"):
        k.scale_int(z, x, 2**40)
    z, x, w = _warm(k.with_const, z, x, 2)
    assert (z, x, w)[2] == 2
    out = k.with_const(z, x, k=2).sync()
    assert len(out) == 3
    assert out[2] == 2


def test_a_moved_handle_on_a_known_layout_is_still_a_moved_error(k: ModuleType) -> None:
    z, x, y = _warm(k.add, tile.zeros(f32, [N]).partition([128]), tile.ones(f32, [N]), tile.ones(f32, [N]))
    op = k.add(z, x, y)
    with pytest.raises(tile.MovedError, match="moved into the launch of add"):
        k.add(z, x, y)
    z, x, y = op.sync()
    x.free()
    with pytest.raises(
        tile.FreedError, match=r"freed at .*test_frontend_plan\.py:\d+; keep the tensor .* or make a new one"
    ):
        k.add(z, x, y)


def test_aliasing_with_the_same_layout_is_still_caught(k: ModuleType) -> None:
    z, x, y = _warm(k.add, tile.zeros(f32, [N]).partition([128]), tile.ones(f32, [N]), tile.ones(f32, [N]))
    host = np.zeros(2 * N, np.float32)
    alias_z = tile.from_dlpack(host[:N]).partition([128])
    with pytest.raises(tile.BorrowError, match="a writer holds it"):  # x's layout, overlapping the output
        tile.from_dlpack(host[N // 2 : N // 2 + N])
    del alias_z
    host_out = np.zeros(N, np.float32)
    bystander = tile.from_dlpack(host_out[:8])  # a borrow alive when the output is made
    with pytest.raises(tile.BorrowError, match="1 other live handle"):
        tile.from_dlpack(host_out).partition([128])
    del bystander
    out = tile.from_dlpack(host_out).partition([128])
    out, x, y = k.add(out, x, y).sync()
    np.testing.assert_array_equal(host_out, np.full(N, 2.0, np.float32))
    z, x, y = k.add(z, x, y).sync()
    assert not z.moved


def _line_of(marker: str) -> int:
    """The line of this file holding ``marker`` (a comment on a launch line)."""
    lines = Path(__file__).read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if line.endswith(marker) and "_line_of" not in line)


def test_the_last_plan_names_each_call_site_in_moved_errors(k: ModuleType, binds: list[str]) -> None:
    z, x, y = _warm(k.add, tile.zeros(f32, [N]).partition([128]), tile.ones(f32, [N]), tile.ones(f32, [N]))
    warm = len(binds)
    for _ in range(2):  # the second pass takes the plan's cached site
        first = k.add(z, x, y)  # site A
        with pytest.raises(tile.MovedError, match=rf"{Path(__file__).name}:{_line_of('# site A')}"):
            x.to_numpy()
        z, x, y = first.sync()
        second = k.add(z, x, y)  # site B
        with pytest.raises(tile.MovedError, match=rf"{Path(__file__).name}:{_line_of('# site B')}"):
            k.add(z, x, y)
        z, x, y = second.sync()
    assert len(binds) == warm + 2  # only the two refused calls ran the full path (which raised)
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.full(N, 2.0, np.float32))


def test_the_last_plan_refuses_what_its_key_would_not_match(k: ModuleType) -> None:
    z, x, y = _warm(k.add, tile.zeros(f32, [N]).partition([128]), tile.ones(f32, [N]), tile.ones(f32, [N]))
    z, x1, x2 = k.add(z, x, x).sync()  # one tensor twice: the distinct plan must not take it
    assert x1 is x2
    z, x, y = k.add(z, x1, y).sync()
    z, x, y = k.add(z, x, y).sync()
    longer = tile.ones(f32, [2 * N])  # another layout of the same classes
    z2, _, _ = k.add(tile.zeros(f32, [2 * N]).partition([128]), longer, tile.full(f32, [2 * N], 2.0)).sync()
    np.testing.assert_array_equal(z2.unpartition().to_numpy(), np.full(2 * N, 3.0, np.float32))
    with pytest.raises(
        tile.GridError, match=r"explicit grid \[4, 1, 1\] differs.*drop \.grid\(\.\.\.\)"
    ):  # a clone with an explicit grid re-checks it (the outputs give 8 blocks)
        k.add.grid((4, 1, 1))(z, x, y)
    z, x, y = k.add(z, x, y).sync()
    assert not z.moved
    assert not x.moved
    assert not y.moved


def test_the_last_plan_rechecks_scalars_consts_and_keywords(k: ModuleType) -> None:
    z, x, n = _warm(k.scale_int, tile.zeros(f32, [N]).partition([128]), tile.ones(f32, [N]), 3)
    z, x, n = k.scale_int(z, x, 4).sync()
    with pytest.raises(tile.ArgumentError, match=r"argument 'n' of scale_int\(\) is a i32 scalar, got float 2\.5"):
        k.scale_int(z, x, 2.5)  # another scalar class: the full path reports it
    with pytest.raises(tile.ArgumentError, match="does not fit in i32"):
        k.scale_int(z, x, -(2**40))
    z, x, n = k.scale_int(z, x, 2).sync()
    assert n == 2
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.full(N, 2.0, np.float32))
    z, x, c = _warm(k.with_const, tile.zeros(f32, [N]).partition([128]), x, 2)
    z, x, c = k.with_const(z, x, 3).sync()  # another Const value: another plan
    assert c == 3
    z, x, c = k.with_const(z, x, k=3).sync()  # the same Const as a keyword
    assert c == 3


def test_a_launched_output_stays_held_while_input_views_are_fine(k: ModuleType) -> None:
    host = np.zeros(N, np.float32)
    out = tile.from_dlpack(host).partition([128])
    x, y = tile.ones(f32, [N]), tile.ones(f32, [N])
    out, x, y = k.add(out, x, y).sync()
    with pytest.raises(tile.BorrowError, match="a writer holds it"):  # the partition holds its memory throughout
        tile.from_dlpack(host[8:16])
    view = x[:8]  # a live view of an input is fine: inputs are shared reads
    out, x, y = k.add(out, x, y).sync()
    assert view.to_numpy().tolist() == [1.0] * 8


@pytest.mark.parametrize(
    ("position", "value", "pattern"),
    [
        (2, False, None),
        (2, np.bool_(True), None),  # not a builtin class: the check itself decides
        (2, 1, r"'flag' of scale_mixed\(\) is a \w+ scalar, got int"),
        (3, 2**32 - 1, None),
        (3, 0, None),
        (3, 2**32, "does not fit in u32"),
        (3, -1, "does not fit in u32"),
        (4, 2**31 - 1, None),
        (4, -(2**31), None),
        (4, 2**31, "does not fit in i32"),
        (4, -(2**31) - 1, "does not fit in i32"),
        (4, True, "i32 scalar, got bool"),
        (4, 2.0, "i32 scalar, got float"),
        (5, 7, None),
        (5, -1e300, None),
        (5, True, "f64 scalar, got bool"),
        (5, "1", "f64 scalar, got str"),
    ],
)
def test_the_plan_passes_what_the_scalar_check_passes_and_nothing_else(
    k: ModuleType, binds: list[str], position: int, value: Any, pattern: str | None
) -> None:
    """The plan decides plain scalars of the parameter's builtin classes without calling the check (`_plan._passes`,
    and `_fastlaunch` likewise): at each edge of the ranges it must agree with the check, on the plan's path."""
    args = list(_warm(k.scale_mixed, tile.zeros(f32, [N]).partition([128]), tile.ones(f32, [N]), True, 2, 3, 0.5))
    warm = len(binds)
    same_class = type(args[position]) is type(value)  # else another layout, so another plan (after a full bind)
    args[position] = value
    if pattern is None:
        out = k.scale_mixed(*args).sync()
        assert (len(binds) == warm) is same_class  # the plan took it
        assert out[position] is value
        return
    with pytest.raises(tile.ArgumentError, match=pattern):
        k.scale_mixed(*args)
    out = k.scale_mixed(*args[:2], True, 2, 3, 0.5).sync()  # nothing was moved: the handles are still usable
    assert out[0].unpartition().to_numpy()[0] == 3.0


def test_alternating_layouts_take_their_recent_plans_and_keep_every_check(
    k: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kernel called with a few layouts in turn (a model's GEMV per projection) takes each layout's recent plan, not
    the keyed path; a recent plan still refuses a moved handle and aliasing, and a new layout still runs the full
    checks. Seen to catch: `_remember` not keeping the previous plans (every alternate call went to the keyed path).

    A kernel object of its own: the session's ``k.add`` keeps the plans of every layout an earlier test launched
    (launch-path tests use ``N // 2``), and then the "new" layout below would take its kept plan."""
    from tile.frontend._entry import Kernel

    add = tile.entry(k.add.fn)
    keyed: list[int] = []
    real = Kernel._call_checked

    def counting(self: Kernel, args: Any, generics: Any) -> Any:
        keyed.append(len(args))
        return real(self, args, generics)

    monkeypatch.setattr(Kernel, "_call_checked", counting)
    sizes = (N, 2 * N, 4 * N)
    handles = {
        n: _warm(add, tile.zeros(f32, [n]).partition([128]), tile.ones(f32, [n]), tile.ones(f32, [n])) for n in sizes
    }
    warm = len(keyed)
    assert warm == len(sizes)  # a kernel of its own: each first layout took the full path
    for _ in range(3):
        for n in sizes:
            handles[n] = tuple(add(*handles[n]).sync())
    assert len(keyed) == warm  # every call took a recent plan
    for n in sizes:
        np.testing.assert_array_equal(handles[n][0].unpartition().to_numpy(), np.full(n, 2.0, np.float32))
    z, x, y = (tile.zeros(f32, [N]).partition([128]), tile.ones(f32, [N]), tile.ones(f32, [N]))
    op = add(z, x, y)
    with pytest.raises(tile.MovedError, match="moved into the launch of add"):
        add(z, x, y)
    z, x, y = op.sync()
    big = tile.zeros(f32, [2 * N]).partition([128]), tile.ones(f32, [2 * N]), tile.ones(f32, [2 * N])
    add(*big).sync()  # the latest plan is another layout's now: N's is a recent one
    x.free()
    with pytest.raises(tile.FreedError, match=r"freed at .*test_frontend_plan\.py:\d+"):
        add(z, x, y)
    half = tile.ones(f32, [N // 2])
    before = len(keyed)
    z2, _, _ = add(tile.zeros(f32, [N // 2]).partition([128]), half, tile.ones(f32, [N // 2])).sync()
    assert len(keyed) > before  # a new layout: the full path
    np.testing.assert_array_equal(z2.unpartition().to_numpy(), np.full(N // 2, 2.0, np.float32))
