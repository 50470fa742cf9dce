"""Review 26: ``tile.kernels.bench`` (results files, the SVG, the contenders' mapping), ``tile.distributed`` on gloo,
and DLPack with torch CPU tensors. Each hole's test names it in its docstring, failed before its fix, and asserts the
typed error; the rest pin attempts that held. The torch tests are skipped without torch.

Attempts that held (read, or tried below):

- bench's GPU side (on tile.core's simulated driver, below, and read): `Timer` borrows a stream with
  ``tile.core.Stream.borrow``, which keeps the torch/cupy stream object alive while the wrapper lives, and never closes
  it; ``close()`` twice is idempotent (``Event.close`` is); a callable that closes the timer mid-call gets
  ``UseAfterFreeError`` from ``Event.record``, not a record on a destroyed event, and one that closes the stream it is
  timed on gets ``StreamClosedError``; the flush buffer's free is stream-ordered after its last fill (the simulator
  sees no driver bug). A callable that raises or re-enters `measure` leaves nothing queued (the end event is recorded
  and waited for in ``finally``; a nested `measure` has its own timer).
- SVG: labels, titles and colours were already XML-escaped (``<script>`` and quotes stay text); what broke the file
  was characters XML cannot hold at all (below).
- tile.distributed: using, partitioning or re-borrowing what a collective owns (MovedError / BorrowError); the same
  tensor or overlapping views as out and inp of all_gather (AliasError); writing a Shared (BorrowError); a
  collective in a ``.then`` chain and captured in a graph; a collective whose torch call raises releases its hold and
  its pending count exactly once (below); ``enable_one_shot`` without ``unchecked=True`` (ArgumentError).
- DLPack: a torch view of a Tile tensor holds off partition and lend (BorrowError) and ``reclaim`` of a Lent while a
  torch sub-view lives; overlapping (as_strided) and broadcast (stride 0) torch tensors imported are refused as
  outputs (AliasError); a torch storage offset is honoured. A torch ``resize_`` of a borrowed tensor is documented
  as outside what Tile can see (ownership guide, "What is not checked").
"""

from __future__ import annotations

import gc
import json
import math
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tile.frontend as tile
from tile.frontend import ArgumentError, f32
from tile.kernels import bench

# -- 1. tile.kernels.bench -------------------------------------------------------------------------------------------


def _comparison() -> bench.Comparison:
    return bench.compare({"a": lambda: None, "b": lambda: None}, rounds=2, reps=2, warmup=0, nbytes=1024)


def _edit(data: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    node: Any = data
    for key in path[:-1]:
        node = node[key]
    if value is _DELETE:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return data


_DELETE = object()

CRAFTED = [
    (("contenders", "a", "times_ms"), [float("nan")], "a time of contender 'a' must be a finite number, got nan"),
    (("contenders", "a", "times_ms"), [float("inf")], "a time of contender 'a' must be a finite number, got inf"),
    (("contenders", "a", "times_ms"), [-1.0], "times must be finite numbers"),
    (("contenders", "a", "times_ms"), ["1.0"], "a time of contender 'a' must be a finite number"),
    (("contenders", "a", "times_ms"), [True], "a time of contender 'a' must be a finite number"),
    (("contenders", "a", "times_ms"), 5, "times_ms must be a list"),
    (("contenders", "a", "times_ms"), [], "needs a tuple of at least one time"),
    (("contenders", "a"), _DELETE, None),  # (a contender may be absent: it just is not there)
    (("contenders",), [1, 2], "contenders must be an object with string keys"),
    (("rounds",), True, "rounds must be a finite integer"),
    (("reps",), 0, "reps must be positive"),
    (("seed",), 1.5, "seed must be a finite integer"),
    (("order",), "<script>", "order must be one of"),
    (("baseline",), 3, "baseline must be a string"),
    (("nbytes",), float("nan"), "nbytes must be a finite number"),
    (("nbytes",), -8, "nbytes must be positive"),
    (("schedule",), [[1]], "schedule must be a list of strings"),
    (("failures",), {"a": 3}, "the failure of 'a' must be a string"),
    (("info",), None, "info must be an object"),
    (("order",), _DELETE, "the comparison has no 'order'"),
]


@pytest.mark.parametrize(("where", "value", "message"), CRAFTED)
def test_a_crafted_comparison_file_is_refused_with_a_typed_error(
    tmp_path: Path, where: tuple[Any, ...], value: Any, message: str | None
) -> None:
    """Hole: ``Comparison.from_json`` trusted the file: a NaN, negative or infinite time was loaded (a NaN median
    sorts anywhere, and `plot` then raised an OverflowError or drew ``nan`` coordinates), a string time was turned
    into a number, a missing or mistyped field raised KeyError/TypeError from inside, and a bool passed as a count."""
    data = _edit(_comparison().to_dict(), where, value)
    path = tmp_path / "crafted.json"
    path.write_text(json.dumps(data))
    if message is None:
        assert "a" not in bench.Comparison.from_json(path).samples
        return
    with pytest.raises(ArgumentError, match=message):
        bench.Comparison.from_json(path)


def test_a_file_that_is_not_json_is_a_typed_error(tmp_path: Path) -> None:
    """Hole: ``from_json`` of a truncated file raised json's JSONDecodeError, not a Tile error."""
    path = tmp_path / "cut.json"
    path.write_text(json.dumps(_comparison().to_dict())[:40])
    with pytest.raises(ArgumentError, match="is not a JSON comparison"):
        bench.Comparison.from_json(path)
    with pytest.raises(ArgumentError, match="is not a JSON sweep"):
        bench.Sweep.from_json(path)


@pytest.mark.parametrize(
    ("size", "message"),
    [("<script>", "size must be a finite number"), (-1, "size must be positive"), (float("inf"), "finite number")],
)
def test_a_crafted_sweep_file_is_refused_with_a_typed_error(tmp_path: Path, size: Any, message: str) -> None:
    """Hole: ``Sweep.from_json`` loaded any size: a string one made `plot` fail with a TypeError, an infinite one drew
    ``nan`` coordinates into the SVG."""
    sweep = bench.Sweep("s", info={"device": "test"})
    sweep.add(1024, _comparison())
    data = sweep.to_dict()
    data["points"][0]["size"] = size
    path = tmp_path / "sweep.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ArgumentError, match=message):
        bench.Sweep.from_json(path)


def test_sweep_add_refuses_an_infinite_size() -> None:
    """Hole: ``Sweep.add(math.inf, ...)`` passed its ``size > 0`` check and drew ``nan`` coordinates."""
    with pytest.raises(ArgumentError, match="size must be a positive number, finite"):
        bench.Sweep("s", info={}).add(math.inf, _comparison())


def test_a_median_of_zero_does_not_lose_the_comparison(tmp_path: Path) -> None:
    """Hole: a baseline whose median is 0 (calls below the clock's resolution) made ``ratios`` and ``to_dict`` raise
    ZeroDivisionError, and ``gbps`` too: the whole comparison was lost at ``to_json``."""
    zero, one = bench.Sample((0.0, 0.0, 1.0)), bench.Sample((1.0,))
    c = bench.Comparison({"a": zero, "b": one}, {}, "a", "fixed", 0, 1, 1, [["a", "b"]], nbytes=1e9)
    assert c.ratios == {"a": None, "b": None}
    assert zero.gbps(1e9) == math.inf
    assert c.value("b", "GB/s") == pytest.approx(1000.0)
    back = bench.Comparison.from_json(c.to_json(tmp_path / "zero.json"))
    assert back.samples == c.samples


def test_svg_labels_cannot_break_the_file_or_inject_markup() -> None:
    """Hole: a contender named with a control character (``"\\x00"``, ``"\\x1b"``: XML cannot hold them, escaped or
    not) made an SVG no browser or XML parser reads. Markup (``<script>``, quotes) was escaped already and stays so."""
    names = ["tile\x00", "esc\x1b[1m", '<script>alert("x")</script>', "ok"]
    sweep = bench.Sweep('"><script>', info={"device": "dev\x07"})
    sweep.add(1024, bench.compare({n: (lambda: None) for n in names}, rounds=1, reps=1, warmup=0, nbytes=1))
    svg = bench.plot(sweep, "GB/s")
    root = ET.fromstring(svg)  # raised ParseError ("not well-formed (invalid token)") before the fix
    assert not [e for e in root.iter() if e.tag.endswith("script")]
    texts = [t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}text")]
    assert "tile\ufffd" in texts
    assert '<script>alert("x")</script>' in texts


def test_compare_runs_the_contenders_it_checked() -> None:
    """Hole: ``compare`` iterated the caller's mapping while running the contenders: one that added an entry (a
    cache keyed by name, say) stopped the whole comparison with "dictionary changed size during iteration", and one
    that replaced another contender made it run something never checked."""
    contenders: dict[str, Callable[[], object]] = {}

    def a() -> None:
        contenders["late"] = lambda: None

    def b() -> None:
        contenders["a"] = 42  # type: ignore[assignment]  # (the adversary)

    contenders.update(a=a, b=b)
    result = bench.compare(contenders, rounds=2, reps=1, warmup=1, order="fixed")
    assert sorted(result.samples) == ["a", "b"]
    assert not result.failures


def test_a_sample_refuses_times_that_are_not_finite() -> None:
    """Hole: ``Sample((nan,))`` was accepted; its median, quartiles and rates were NaN."""
    with pytest.raises(ArgumentError, match="times must be finite numbers >= 0"):
        bench.Sample((float("nan"), 1.0))


def test_timer_misuse_on_the_simulated_gpu_is_typed(sim: Any, gpu: None) -> None:
    """Held: closing the timer, or the stream it times on, from inside the timed call raises tile.core's typed errors
    (nothing is recorded on a destroyed event or stream; the simulated driver, checked by ``sim``, sees no bug)."""
    import tile.core as tc

    timer = bench.Timer()
    assert timer.time_ms(lambda: None) >= 0
    with pytest.raises(tc.UseAfterFreeError, match="was closed: create a new Event"):
        timer.time_ms(timer.close)
    timer.close()  # twice: idempotent
    stream = tc.Stream(tc.Device(0))
    with pytest.raises(tc.StreamClosedError, match="was closed: create a new Stream"):
        bench.measure(stream.close, reps=1, warmup=0, stream=stream)
    with pytest.raises(tc.StreamClosedError, match="was closed: create a new Stream"):
        bench.measure(lambda: None, reps=1, stream=stream)


# -- 2. tile.distributed on gloo -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def group(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    pytest.importorskip("torch")
    import tile.frontend.distributed as d

    store = tmp_path_factory.mktemp("dist26") / "store"
    d.init("gloo", init_method=f"file://{store}", rank=0, world_size=1)
    yield d
    d.destroy()


def test_a_collective_whose_torch_call_raises_releases_exactly_once(
    group: Any, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    """Held: torch raising inside the collective gives its memory back once (pending 0, not -1; a new borrow works),
    and the moved handle stays dead."""
    torch = pytest.importorskip("torch")

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("gloo connection reset")

    a = np.arange(8, dtype=np.float32)
    t = tile.from_dlpack(a)
    storage = t._storage
    op = group.all_reduce(t)
    monkeypatch.setattr(torch.distributed, "all_reduce", broken)
    with pytest.raises(RuntimeError, match="gloo connection reset"):
        op.sync()
    with pytest.raises(tile.MovedError, match="moved into the all_reduce"):
        t.to_numpy()
    del op
    gc.collect()
    assert storage.pending == 0
    assert tile.from_dlpack(a).partition([8]).unpartition().to_numpy().tolist() == list(range(8))


def test_collectives_refuse_aliasing_and_shared_writes(group: Any) -> None:
    """Held: out and inp of all_gather overlapping (same tensor, overlapping views) and a Shared written."""
    t = tile.arange(f32, 8)
    with pytest.raises(tile.AliasError, match="overlaps another of its tensors"):
        group.all_gather(t, t)
    with pytest.raises(tile.AliasError, match="overlaps another of its tensors"):
        group.all_gather(t[0:4], t[2:6])
    with pytest.raises(tile.BorrowError, match="a share is read-only"):
        group.all_reduce(t.share())
    with pytest.raises(ArgumentError, match="pass unchecked=True"):
        group.enable_one_shot(1 << 12)


# -- 3. DLPack with torch CPU tensors --------------------------------------------------------------------------------


def test_torch_bfloat16_and_float8_borrows_are_typed_errors() -> None:
    """Hole: ``tile.from_dlpack`` of a torch bfloat16 or float8 CPU tensor raised numpy's RuntimeError ("Unsupported
    dtype in DLTensor"), which ``except tile.TileError`` does not catch."""
    torch = pytest.importorskip("torch")
    for dtype in (torch.bfloat16, torch.float8_e4m3fn):
        with pytest.raises(ArgumentError, match="a host bfloat16 or float8 array cannot be borrowed"):
            tile.from_dlpack(torch.zeros(4, dtype=dtype))


def test_torch_views_of_tile_memory_and_torch_layouts_held() -> None:
    """Held: a torch view of a Tile tensor holds it off partition and lend; overlapping and broadcast torch layouts
    are refused as outputs; a storage offset is honoured."""
    torch = pytest.importorskip("torch")
    t = tile.ones(f32, [8])
    view = torch.from_dlpack(t)
    for misuse in (lambda: t.partition([2]), t.lend):
        with pytest.raises(tile.BorrowError, match="needs exclusive memory"):
            misuse()
    del view
    gc.collect()
    lent = t.partition([2]).unpartition().lend()
    sub = torch.from_dlpack(lent)[2:4]
    with pytest.raises(tile.BorrowError, match=r"array\(s\) made from it by another library are still alive"):
        lent.reclaim()
    del sub
    gc.collect()
    lent.reclaim()
    for weird in (torch.zeros(16).as_strided((4, 4), (1, 1)), torch.zeros(4).expand(8, 4)):
        with pytest.raises(tile.AliasError, match="cannot partition"):
            tile.from_dlpack(weird).partition([2, 2])
    base = torch.arange(16, dtype=torch.float32)
    assert tile.from_dlpack(base[3:]).to_numpy()[:3].tolist() == [3.0, 4.0, 5.0]
