"""Review 13: an adversarial look at what was merged on 2026-11-26 after review 12 (tile.core's ready allocations and
per-stream use marks, the frontend's ``t[()]`` span reuse, recent plans and the C call's early layout test, the
autotune ``recall`` of tile.kernels, attention's ``offset=`` and rows layout, Qwen3's ``qkv_prep``). The tile.core
tests run its GPU code paths on the CPU against the asynchronous driver simulator (``tile.core.testing``): work stays
queued until something waits for it, and the simulator's memory checks (``sim.bugs``) see work that runs on freed
memory. Each hole's test names it, failed before its fix, and asserts the typed error.

Holes found and fixed:

- a buffer's own copy to or from host memory (``buf.copy_from(array)``, ``buf.copy_to(array)``, ``from_host``), with
  no ``stream=``, went to the buffer's home stream even when that stream was closed: the copy was enqueued on the
  destroyed stream handle (a driver handle that may name another stream by then), with ``sync=False`` without any
  error, and with ``sync=True`` the StreamClosedError came from the wait, after the copy was queued. The buffer's
  free (ordered after the closed stream's last work as it was at the close) did not wait for it, so the copy could
  run after the free. Now the copy raises StreamClosedError before anything is enqueued (pass ``stream=``).
- a stream closed by another thread while a launch on it was under way: ``launch``/``prepare`` checked the stream
  was open before taking ``use_lock``, and ``Stream.close`` did not take it. A close in between let the launch be
  enqueued on the destroyed handle; a close during the launch (after ``cuLaunchKernel``, before the use was
  recorded) made the use mark's record raise, so a buffer of another home stream never learned of the launch and
  its free did not wait for the kernel (the simulator sees the kernel run on freed memory). Now ``Stream.close``
  holds ``use_lock`` (its invalidation bump included), and launches check the stream is open under the lock: a
  launch either comes entirely before the close (recorded, and the close's final event follows it) or raises
  StreamClosedError before anything is enqueued.
- ``autotune.Config`` took any values: ``Config.of(BM=16.0, ...)`` made the matmul's config check fail with a bare
  TypeError (``float & float``) - or, once the equal ``BM=16`` config had passed the check (``_check_config`` keeps
  the configs it passed, and ``16.0 == 16`` hashes alike), skip the check and reach the launch, which refused the
  float grid with a GridError unrelated to the config. A Config's parameters are now exact ints (bools refused) and
  its names strings, checked once when it is made (`ArgumentError`), so the cache of passed configs can only hold
  int configs and no float one compares equal to them any more.

- Qwen3's ``qkv_prep`` checked the device position as ``p0 + n_new <= S`` in i32: a position near ``2**31`` wrapped
  the sum negative and passed, and only the compiler's guard on the RoPE table's partition index stopped the launch
  (no memory was touched, but the kernel's own check was void). It is now ``p0 <= S - n_new``, which cannot wrap.

Bug found and fixed on the way (a refusal, no safety hole): a buffer (not ready) whose home stream was closed could not
be used on any other stream: ordering the new stream after the allocation recorded an event on the closed home stream
(StreamClosedError). It now waits for the closed stream's final event (recorded by the close, after the allocation).

Attempts that turned out already closed (tests below):

- a buffer used on stream A (its use mark recorded), then another buffer used on A (the same mark re-recorded), then
  the first buffer freed: the free waits for the mark's latest record, which follows both uses (a wait reads the
  latest record when it is made); the same with the free deferred by a capture of its home stream and the mark
  re-recorded meanwhile.
- a ready buffer used on its home stream (not recorded) and on another stream, freed while the home stream is busy:
  the private free stream waits for both (the ``home.query()`` shortcut only skips an idle home stream, and a use
  can only be enqueued before the free marks the buffer freed, under ``use_lock``).
- ``t[()]`` of a freed or moved handle raises before reusing the source's span; the span it reuses is the source's
  own (same storage, shape, strides and offset).
- autotune ``recall`` keys carry every raw parameter of the key (shape, dtypes, epilogue, environment): a call of
  another dtype or epilogue of the same shape misses and is chosen (and checked) on its own.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import tile.core as tc
import tile.core._launch as core_launch
import tile.frontend as tile
from tile.core.testing import VEC_ADD_SIGNATURE, SimDriver, simulated, sm90_cubin
from tile.frontend import ArgumentError, FreedError
from tile.kernels import autotune


@pytest.fixture
def sim() -> Iterator[SimDriver]:
    with simulated(asynchronous=True) as driver:
        driver.eagerness = 0.0  # nothing runs before something waits for it: the log shows the order
        yield driver
        driver.drain_all()
    assert driver.bugs == [], driver.bugs


@pytest.fixture
def vec_add(sim: SimDriver) -> tc.Function:
    return tc.Module.from_cubin(sm90_cubin()).function("vec_add")


def _queued(sim: SimDriver, stream: tc.Stream) -> int:
    return len(sim.queues.get(stream.handle, ()))


def _args(*buffers: tc.DeviceBuffer) -> list[Any]:
    x, y, z = buffers
    return [x, 32, 1, y, 32, 1, z, 32, 1]


# -- hole: a buffer's default copy stream closed --------------------------------------------------------------------


@pytest.mark.parametrize("ready", [False, True])
@pytest.mark.parametrize("direction", ["copy_from", "copy_to"])
def test_a_copy_on_a_closed_home_stream_is_refused_before_it_is_enqueued(
    sim: SimDriver, ready: bool, direction: str
) -> None:
    """Hole: the host copy of a buffer whose home stream was closed went onto the destroyed stream handle."""
    home = tc.Stream()
    buffer = tc.DeviceBuffer.allocate(128, stream=home, ready=ready)
    home.close()
    closed = _queued(sim, home)  # the close's final record
    host = np.zeros(128, np.uint8)
    for sync in (False, True):
        with pytest.raises(tc.StreamClosedError, match=r"home stream .* was closed: pass stream="):
            getattr(buffer, direction)(host, sync=sync)
        assert _queued(sim, home) == closed, "a copy was enqueued on the destroyed stream"
    other = tc.Stream()  # still usable with a stream of its own, and freed cleanly
    buffer.copy_from(np.full(128, 7, np.uint8), stream=other)
    buffer.copy_to(host, stream=other)
    assert (host == 7).all()
    buffer.free()


# -- hole: a stream closed by another thread during a launch --------------------------------------------------------


@pytest.mark.parametrize("how", ["launch", "prepare"])
def test_a_stream_closed_by_another_thread_before_the_lock_gets_no_launch(
    sim: SimDriver, vec_add: tc.Function, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """Hole: the stream was checked before ``use_lock``; another thread's close in between let the launch go onto the
    destroyed stream handle (with no error when every buffer's home is that stream)."""
    work = tc.Stream()
    x = tc.DeviceBuffer.allocate(128, stream=work, ready=True)
    checked: Callable[[object, tc.Device], tc.Stream] = getattr(core_launch, "as_stream")  # noqa: B009  # not re-exported

    def then_closed(stream: object, device: tc.Device) -> tc.Stream:
        chosen = checked(stream, device)
        closer = threading.Thread(target=chosen.close)
        closer.start()
        closer.join()
        return chosen

    monkeypatch.setattr(core_launch, "as_stream", then_closed)
    call = tc.launch if how == "launch" else lambda *a, **k: tc.prepare(*a, **k)()
    with pytest.raises(tc.StreamClosedError, match="was closed"):
        call(vec_add, 1, 1, _args(x, x, x), signature=VEC_ADD_SIGNATURE, stream=work)
    assert _queued(sim, work) == 1, "a launch was enqueued on the destroyed stream (after the close's final record)"
    x.free()


def test_a_close_on_another_thread_waits_until_the_launch_is_recorded(sim: SimDriver, vec_add: tc.Function) -> None:
    """Hole: a close during the launch (after ``cuLaunchKernel``) made the use mark's record raise, so the buffer (of
    another home stream) never learned of the kernel and its free ran before it (the simulator's memory check)."""
    work = tc.Stream()
    x = tc.DeviceBuffer.allocate(128, ready=True)
    driver_launch = sim.cuLaunchKernel
    closers: list[threading.Thread] = []

    def close_meanwhile(*args: Any) -> Any:
        result = driver_launch(*args)
        closer = threading.Thread(target=work.close)
        closer.start()
        closer.join(0.2)  # the close must wait for the launch to be recorded: it is still blocked now
        closers.append(closer)
        return result

    sim.cuLaunchKernel = close_meanwhile  # type: ignore[method-assign,assignment]
    try:
        tc.launch(vec_add, 1, 1, _args(x, x, x), signature=VEC_ADD_SIGNATURE, stream=work)
    finally:
        sim.cuLaunchKernel = driver_launch  # type: ignore[method-assign]
        for closer in closers:
            closer.join()
    assert work.closed
    assert x._uses.events, "the launch was not recorded on the buffer"
    x.free()
    sim.drain(tc.Device(0)._private_stream("free").handle)  # the free first: it must wait for the kernel


def test_prepared_launches_see_a_close_from_another_thread(sim: SimDriver, vec_add: tc.Function) -> None:
    """The relaunch guard and the close are ordered by ``use_lock``: a relaunch after the close raises."""
    work = tc.Stream()
    x = tc.DeviceBuffer.allocate(128, ready=True)
    again = tc.prepare(vec_add, 1, 1, _args(x, x, x), signature=VEC_ADD_SIGNATURE, stream=work)
    again()
    closer = threading.Thread(target=work.close)
    closer.start()
    closer.join()
    queued = _queued(sim, work)
    with pytest.raises(tc.StreamClosedError, match="its stream was closed"):
        again()
    assert _queued(sim, work) == queued
    x.free()


# -- closed: use marks, ready frees ---------------------------------------------------------------------------------


def test_a_mark_re_recorded_for_another_buffer_still_covers_the_first_use(sim: SimDriver, vec_add: tc.Function) -> None:
    """Closed: the free waits for the mark's latest record, which follows every use it stood for."""
    home, work = tc.Stream(), tc.Stream()
    x = tc.DeviceBuffer.allocate(128, stream=home)
    y = tc.DeviceBuffer.allocate(128, stream=home)
    tc.launch(vec_add, 1, 1, _args(x, x, x), signature=VEC_ADD_SIGNATURE, stream=work)
    tc.launch(vec_add, 1, 1, _args(y, y, y), signature=VEC_ADD_SIGNATURE, stream=work)  # the mark re-recorded
    assert x._uses.events == y._uses.events == [work._mark]
    x.free()
    sim.drain(home.handle)  # the free first: it runs only after both kernels
    assert [e[0] for e in sim.log if e[0] in ("launch", "free")] == ["launch", "launch", "free"]
    y.free()


def test_a_deferred_free_waits_for_a_mark_re_recorded_meanwhile(sim: SimDriver, vec_add: tc.Function) -> None:
    """Closed: a free deferred by a capture of its home stream keeps the mark; a later record only waits longer."""
    home, work = tc.Stream(), tc.Stream()
    x = tc.DeviceBuffer.allocate(128, stream=home)
    y = tc.DeviceBuffer.allocate(128, stream=tc.Stream())  # of a third stream: its launch on work re-records the mark
    tc.launch(vec_add, 1, 1, _args(x, x, x), signature=VEC_ADD_SIGNATURE, stream=work)
    sim.capturing.add(home.handle)  # a graph captures the home stream: the free is deferred
    x.free()
    assert not sim.kinds("free")
    tc.launch(vec_add, 1, 1, _args(y, y, y), signature=VEC_ADD_SIGNATURE, stream=work)
    sim.capturing.discard(home.handle)
    z = tc.DeviceBuffer.allocate(64, stream=home)  # runs the deferred free
    sim.drain(home.handle)
    launches = [i for i, e in enumerate(sim.log) if e[0] == "launch"]
    frees = [i for i, e in enumerate(sim.log) if e[0] == "free"]
    assert len(launches) == 2
    assert frees
    assert frees[0] > launches[-1]
    y.free()
    z.free()


def test_a_ready_buffer_busy_on_its_home_and_another_stream_is_freed_after_both(
    sim: SimDriver, vec_add: tc.Function
) -> None:
    """Closed: uses on the home stream are not recorded, but the free stream waits for a busy home stream."""
    home, work = tc.Stream(), tc.Stream()
    x = tc.DeviceBuffer.allocate(128, stream=home, ready=True)
    tc.launch(vec_add, 1, 1, _args(x, x, x), signature=VEC_ADD_SIGNATURE, stream=home)
    tc.launch(vec_add, 1, 1, _args(x, x, x), signature=VEC_ADD_SIGNATURE, stream=work)
    x.free()
    sim.drain(tc.Device(0)._private_stream("free").handle)
    assert [e[0] for e in sim.log if e[0] in ("launch", "free")] == ["launch", "launch", "free"]


# -- closed: the frontend's t[()] ------------------------------------------------------------------------------------


def test_the_same_view_of_a_freed_or_moved_handle_raises() -> None:
    """Closed: ``t[()]`` checks the handle before reusing its span."""
    t = tile.from_numpy(np.arange(8, dtype=np.float32))
    view = t[()]
    assert view._range == t._range
    assert (view.shape, view.strides) == (t.shape, t.strides)
    view.free()
    with pytest.raises(FreedError, match="freed"):
        t[()]


# -- hole: autotune configs of non-int values -----------------------------------------------------------------------


@pytest.mark.parametrize("value", [16.0, True, np.float32(16), "16"])
def test_a_config_takes_only_int_parameters(value: object) -> None:
    """Hole: a float (or bool, or str) parameter reached the families' checks as it was."""
    with pytest.raises(ArgumentError, match=r"BM=.* is not an int"):
        autotune.Config.of(BM=value, BN=16, BK=16, GROUP=1, SPLIT=1)  # type: ignore[arg-type]
    with pytest.raises(ArgumentError, match="parameter names are strings"):
        autotune.Config(((1, 16),))  # type: ignore[arg-type]


def test_a_float_config_equal_to_a_checked_one_is_refused_before_the_launch() -> None:
    """Hole: ``Config.of(BM=16.0)`` equals ``Config.of(BM=16)``, which the matmul's check had passed and cached."""
    import tile.kernels as tk

    x = tile.from_numpy(np.ones((4, 32), np.float16))
    y = tile.from_numpy(np.ones((32, 16), np.float16))
    good = autotune.Config.of(BM=16, BN=16, BK=16, GROUP=1, SPLIT=1)
    np.testing.assert_array_equal(tk.matmul(x, y, config=good).to_numpy(), np.full((4, 16), 32, np.float16))
    with pytest.raises(ArgumentError, match=r"BM=16\.0 is not an int"):
        tk.matmul(x, y, config=autotune.Config.of(BM=16.0, BN=16, BK=16, GROUP=1, SPLIT=1))  # type: ignore[arg-type]
    assert np.asarray(x.to_numpy()).sum() == 4 * 32  # the inputs stay usable


# -- closed: autotune recall keys -----------------------------------------------------------------------------------


def test_a_matmul_recall_key_determines_its_tuning_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """Closed: calls of one shape but another dtype, output dtype, epilogue or weight layout never share a stand-in
    key that stands for two tuning keys (a recalled config is always the one `choose` would give)."""
    import json

    import tile.kernels as tk

    seen: dict[Any, set[str]] = {}

    def choose(self: autotune.Autotuner, key: Any, candidates: Any, default: Any, run: Any, **kw: Any) -> Any:
        seen.setdefault(kw["recall"], set()).add(json.dumps(dict(key), sort_keys=True, default=str))
        return default

    tuner = autotune.Autotuner("matmul-review13", source="s", timer=lambda fn: 1.0, cache_dir=None)
    monkeypatch.setattr(autotune.Autotuner, "choose", choose)
    monkeypatch.setattr(autotune, "tuner", lambda family, source: tuner)
    for dtype in (np.float16, np.float32):
        x = tile.from_numpy(np.ones((4, 32), dtype))
        y = tile.from_numpy(np.ones((32, 24), dtype))
        tk.matmul(x, y)
        tk.matmul(x, y, out_dtype=tile.f32)
        tk.matmul(x, y, activation="relu")
        tk.matmul(x, y, bias=tile.from_numpy(np.ones(24, np.float32)))
        tk.matmul(x, tile.from_numpy(np.ones((24, 32), dtype)).T)
        tk.matmul(tile.from_numpy(np.ones((5, 32), dtype)), y)
    assert len(seen) == 9  # a transposed weight shares the plain call's key, so does f32 output of f32 inputs
    assert all(len(texts) == 1 for texts in seen.values()), seen


# -- hole: qkv_prep's position check wrapped ------------------------------------------------------------------------


@pytest.mark.parametrize("position", [2**31 - 1, 2**31 - 2])
@pytest.mark.parametrize("tokens", [None, 2])
def test_qkv_prep_refuses_a_position_whose_end_wraps(position: int, tokens: int | None) -> None:
    """Hole: the kernel's own check ``p0 + n_new <= S`` wrapped in i32 for a position near 2**31 and passed; only the
    compiler's guard on the RoPE table's partition stopped the launch (a table as long as the position would not
    have). It is now ``p0 <= S - n_new``, which cannot wrap."""
    from tile.kernels.qwen3 import _ops

    w = tile.zeros(tile.bf16, [1, 16])
    angles = np.arange(8, dtype=np.float64)[:, None] * np.ones(8)[None, :]
    cos, sin = tile.from_numpy(np.cos(angles).astype(np.float32)), tile.from_numpy(np.sin(angles).astype(np.float32))
    caches = (tile.zeros(tile.bf16, [2, 8, 16]), tile.zeros(tile.bf16, [2, 8, 16]))
    pos = tile.from_numpy(np.array([position], dtype=np.int32))
    qkv = tile.zeros(tile.bf16, [2, 128])
    if tokens is None:
        made = _ops.prep_qkv(*caches, qkv, w, w, heads=4, cos=cos, sin=sin, pos=pos, eps=1e-6)
        with pytest.raises(tile.KernelFaultError, match=r"qkv_prep: a position is outside the cache"):
            made.sync()
        return
    # A multi-token pass takes its start on the host too (checked there) and asserts pos holds it on the device.
    with pytest.raises(tile.ArgumentError, match=r"do not fit the cache of 8 positions"):
        _ops.prep_qkv(*caches, qkv, w, w, heads=4, cos=cos, sin=sin, pos=pos, eps=1e-6, tokens=tokens, start=position)
    made = _ops.prep_qkv(*caches, qkv, w, w, heads=4, cos=cos, sin=sin, pos=pos, eps=1e-6, tokens=tokens, start=0)
    with pytest.raises(tile.KernelFaultError, match=r"the pos tensor does not hold the pass's start"):
        made.sync()
