"""Review 9: the compiled launch path against the pure one, tile.distributed on the CPU, graphs, and handles dropped
or used from threads and failing ``.then`` functions. Each hole's test names it in its docstring, failed before its
fix, and asserts the typed error. They run on the CPU interpreter, on both launch paths (the ``path`` fixture
switches in-process; ``TILE_PURE_PYTHON=1`` runs the whole module on the pure one). The distributed tests need torch
(a one-process gloo group) and are skipped without it.

Attempts that turned out already closed (the most important have a test below):

- compiled vs pure: read side by side, ``admit_impl`` does `Plan.admit`'s checks in the same order (count, grid,
  generics, layouts and fates, identity pairs, Const values, scalars, aliasing) and leaves every other call to the
  pure path; its comparisons are between builtin values, the fates it replaces die after the step, and a moved
  handle's old object stays referenced by the caller's tuple until the step is done. The one place it ran user code
  inside a step is the hole below (a class's metaclass).
- tile.distributed (gloo, world size 1): using, freeing or partitioning a tensor an all_reduce owns (MovedError); the
  same tensor, or overlapping views of one tensor, as out and inp of all_gather/reduce_scatter (AliasError /
  BorrowError); a Shared as the written tensor (BorrowError); an all_reduce captured into a graph: its output refuses
  every use, free and partition until ``graph.close()`` (InFlightError), and is live after it.
- graphs: a ``graph_read``/``graph_write`` made before ``graph.close()`` and run after it (ClosedError: the captured
  tensor was already freed, nothing is read); ``graph_read`` of a view of a captured tensor or ``graph_write`` of
  another dtype into a captured tensor (InFlightError); ``close()`` waits for the last replay before handing back.
- a ``.then`` function that raises mid-chain (also after making a launch it never returns): the run waits for the
  work already enqueued before the hand-back, so the output memory stays held (a new borrow is refused) until the
  queued kernel is done; the moved handles are dead (MovedError), never owned twice. Same on both paths.
- two threads launching on the same partition and input at once (the switch interval at a microsecond): exactly one
  launch is made, the other call raises MovedError, on both paths (the ownership lock orders check and move).
- an ``__index__`` that frees, partitions, shares or lends the tensor being sliced, reshaped or partitioned: the view
  is made only if the tensor is still live after it ran (FreedError / MovedError), never a view of freed memory.
- keyword generics and Const values of user types: both paths compare them before the handle checks, or check the
  handles again after (``user_consts``), so their ``__eq__`` cannot change what is moved.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import tile.frontend as tile
from tile import aio
from tile.frontend import f32

sys.path.insert(0, str(Path(__file__).parent))
from helpers_adversarial import KERNELS, load_path  # a sibling helper module


@pytest.fixture(autouse=True)
def _cpu() -> None:
    tile.set_backend("cpu")


@pytest.fixture
def k() -> ModuleType:
    return load_path("adversarial_handle_kernels", KERNELS / "handle_kernels.py")


# -- 1. a scalar whose class has a metaclass -------------------------------------------------------------------------


def test_a_number_whose_class_has_a_metaclass_cannot_take_a_checked_handle(k: ModuleType, path: str) -> None:
    """Hole: the launch tests whether a scalar's class is a plain number (``type(n) in _PLAIN``, in C
    ``PySet_Contains``) after it checked the handles and before it moves them, and skips the re-check for a plain one.
    That set lookup runs the metaclass's ``__hash__`` and ``__eq__``: an ``int`` subclass whose metaclass hashes like
    ``int`` and compares equal to it passed as plain, and its ``__hash__`` unpartitioned the checked output: the
    launch was made (on both paths) while the user held a live tensor on the memory it writes, and failed in
    ``.sync()`` with an AttributeError. Now a number whose class has a metaclass is refused by the scalar check, and
    the plain test never looks such a class up (`_plan._plain`, the same in C)."""
    stolen: list[Any] = []
    victim: list[Any] = []

    class Meta(type):
        def __hash__(cls) -> int:
            if victim and not stolen:
                stolen.append(victim[0].unpartition())
            return hash(int)

        def __eq__(cls, other: object) -> bool:
            return other is int or type.__eq__(cls, other)

    class Sneaky(int, metaclass=Meta):
        pass

    z, x = tile.zeros(f32, [16]).partition((16,)), tile.ones(f32, [16])
    with pytest.raises(tile.ArgumentError, match=r"got Sneaky, whose class has the metaclass Meta .*pass int\(n\)"):
        k.scale(z, x, Sneaky(3))  # before the fix: accepted, and the plan kept the class
    victim.append(z)
    with pytest.raises(tile.MovedError, match=r"was unpartitioned at .*use the Tensor that \.unpartition\(\)"):
        k.scale(z, x, Sneaky(3))  # its code runs (the keyed lookup hashes the class), the re-check after it refuses
    assert len(stolen) == 1
    assert stolen[0].to_numpy().tolist() == [0.0] * 16  # the user's tensor: live, and no launch writes it
    z, x, _ = k.scale(stolen[0].partition((16,)), x, 3).sync()
    assert z.unpartition().to_numpy().tolist() == [3.0] * 16


def test_a_number_with_any_metaclass_is_refused(k: ModuleType, path: str) -> None:
    """The refusal does not depend on what the metaclass claims: one that adds nothing is refused too (the launch
    would run its code wherever it tests the class), before and after a plan for plain ints exists."""

    class Meta(type):
        pass

    class Quiet(int, metaclass=Meta):
        pass

    z, x = tile.zeros(f32, [16]).partition((16,)), tile.ones(f32, [16])
    for _ in range(2):
        with pytest.raises(tile.ArgumentError, match=r"got Quiet, whose class has the metaclass Meta"):
            k.scale(z, x, Quiet(3))
        z, x, _ = k.scale(z, x, 3).sync()
    assert z.unpartition().to_numpy().tolist() == [3.0] * 16


def test_a_bool_scalar_is_read_by_its_type(path: str, tmp_path: Path) -> None:
    """Hole: the i1 scalar check read ``isinstance(a, bool)``, which reads ``__class__``: an object with
    ``__class__ = bool`` was accepted as a bool scalar (review 17 of the handles suite read type() for numbers only),
    and the kernel received the object itself. The check reads type() now."""
    from helpers_adversarial import load_source

    source = (
        "import tile.frontend as tile\nfrom tile.frontend import Mut, Tensor, f32, i1\n\n\n@tile.entry\n"
        'def pick(z: Mut[Tensor[f32, "B"]], flag: i1):\n    z.store(z.load() + 1.0)\n'
    )
    m = load_source("review9_bool_kernels", source, tmp_path)

    class Spoof:
        __class__ = bool  # type: ignore[assignment]  # isinstance(Spoof(), bool) is True

    z = tile.zeros(f32, [8]).partition((8,))
    with pytest.raises(tile.ArgumentError, match=r"argument 'flag' of pick\(\) is a i1 scalar, got Spoof"):
        m.pick(z, Spoof())
    (z, flag) = m.pick(z, True).sync()
    assert flag is True
    assert z.unpartition().to_numpy().tolist() == [1.0] * 8


# -- 1b. an object that claims a handle's class -------------------------------------------------------------------


def _forgery(real: Any, cls: type[Any], shape: tuple[int, ...]) -> Any:
    """An object whose ``__class__`` says ``cls`` and that reports ``shape``, everything else read from ``real``."""

    class Forged:
        __class__ = cls  # isinstance reads it

        def __getattr__(self, name: str) -> Any:
            return shape if name == "shape" else getattr(real, name)

    return Forged()


def test_a_forged_handle_is_no_handle(k: ModuleType, path: str) -> None:
    """Hole: every handle check (the launch's argument kinds, ``_ownership``, graph_write, the collectives) used
    ``isinstance``, which reads an object's ``__class__``: a plain object with ``__class__ = tile.Tensor`` that
    reported 64 elements for a 16-element tensor was accepted as the kernel's input on both paths (its shape went
    into the entry ABI: on the GPU the kernel reads 48 elements past the allocation). Now the handle classes'
    metaclass makes ``isinstance`` test the exact type (`_errors.Exact`), so a forgery is refused as what it is."""
    real = tile.ones(f32, [16])
    fake = _forgery(real, tile.Tensor, (64,))
    assert not isinstance(fake, tile.Tensor)
    z = tile.zeros(f32, [64]).partition((64,))
    with pytest.raises(tile.ArgumentError, match=r"argument 'x' of scale\(\) needs a tile Tensor, got Forged"):
        k.scale(z, fake, 2)
    out = _forgery(z, tile.Partition, (64,))
    with pytest.raises(tile.ArgumentError, match=r"argument 'z' of scale\(\) is a Mut output and needs a Partition"):
        k.scale(out, tile.ones(f32, [64]), 2)
    assert real.to_numpy().tolist() == [1.0] * 16  # nothing was moved: both are usable
    assert z.unpartition().to_numpy().tolist() == [0.0] * 64


def test_graph_write_refuses_a_forged_tensor(k: ModuleType) -> None:
    """The same forgery as ``graph_write``'s destination (it would have copied into the address it reported)."""
    stream = aio.HostStream()
    x = tile.ones(f32, [16])
    graph = k.scale(tile.zeros(f32, [16]).partition((16,)), x[()], 2).graph(stream)
    with pytest.raises(tile.ArgumentError, match=r"graph_write: dst is a Forged; pass the tensor"):
        tile.graph_write(graph, _forgery(x, tile.Tensor, (64,)), np.zeros(64))
    graph.close()
    assert x.to_numpy().tolist() == [1.0] * 16


# -- 1c. two threads, one partition -------------------------------------------------------------------------------


def _race_once(k: ModuleType) -> None:
    """Two threads call ``scale`` on the same handles at once: one launch is made, the other call is refused."""
    z, x = tile.zeros(f32, [16]).partition((16,)), tile.ones(f32, [16])
    made: list[Any] = []
    refused: list[str] = []
    start = threading.Barrier(2)

    def launch() -> None:
        start.wait()
        try:
            made.append(k.scale(z, x, 2))
        except tile.MovedError as error:
            refused.append(str(error))

    threads = [threading.Thread(target=launch) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(made) == 1
    assert len(refused) == 1
    assert "moved into the launch of scale" in refused[0]
    out, _, _ = made[0].sync()
    assert out.unpartition().to_numpy().tolist() == [2.0] * 16


def test_two_threads_launching_on_one_partition_make_one_launch(k: ModuleType, path: str) -> None:
    """Closed: the check and the move are one step under the ownership lock, on both paths."""
    k.scale(tile.zeros(f32, [16]).partition((16,)), tile.ones(f32, [16]), 2).sync()  # the plan: the fast path runs
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for _ in range(50):
            _race_once(k)
    finally:
        sys.setswitchinterval(interval)


# -- 2. a .then function that raises mid-chain --------------------------------------------------------------------


def test_a_failing_then_hands_back_only_after_the_queued_work(k: ModuleType, path: str) -> None:
    """Closed: the chain's error is reported after the launch already enqueued finishes; until then the output's
    memory stays held (a second borrow is refused), and the moved handles stay dead."""
    stream = aio.HostStream(worker=True)
    arr = np.zeros(16, np.float32)
    gate = threading.Event()
    stream.enqueue(gate.wait)  # the stream is busy: the launch waits behind this
    seen: list[str] = []

    def probe() -> None:
        time.sleep(0.2)
        try:
            tile.from_dlpack(arr)
            seen.append("borrowed while the launch was queued")
        except tile.BorrowError:
            seen.append("refused")
        gate.set()

    def boom(out: tuple[Any, ...]) -> Any:
        raise RuntimeError("boom")

    z = tile.from_dlpack(arr).partition((16,))
    thread = threading.Thread(target=probe)
    thread.start()
    with pytest.raises(RuntimeError, match="boom"):
        k.scale(z, tile.ones(f32, [16]), 2).then(boom).sync_on(stream)
    thread.join()
    stream.close()
    assert seen == ["refused"]
    with pytest.raises(tile.MovedError, match="moved into the launch of scale"):
        z.unpartition()
    assert arr.tolist() == [2.0] * 16  # the queued launch ran to the end


# -- 2b. closing a graph while a replay is queued ----------------------------------------------------------------


def test_closing_a_graph_waits_for_a_queued_replay(k: ModuleType) -> None:
    """Closed: ``graph.close()`` from another thread, while a replay waits on a busy stream, returns (and hands the
    output back to be freed) only after the replay ran."""
    stream = aio.HostStream(worker=True)
    graph = k.scale(tile.zeros(f32, [16]).partition((16,)), tile.ones(f32, [16]), 2).graph(stream)
    gate = threading.Event()
    stream.enqueue(gate.wait)
    events: list[str] = []

    def replay() -> None:
        graph.launch().sync_on(stream)

    def close() -> None:
        z, _, _ = graph.close()
        events.append("closed")
        assert z.unpartition().to_numpy().tolist() == [2.0] * 16  # the replay's result: it ran before the close
        events.append("read")

    replayer = threading.Thread(target=replay)
    replayer.start()
    deadline = time.monotonic() + 30
    while graph._held.last is None and time.monotonic() < deadline:  # the replay is enqueued (behind the gate)
        time.sleep(0.01)
    assert graph._held.last is not None
    closer = threading.Thread(target=close)
    closer.start()
    time.sleep(0.2)
    events.append("gate opened")
    gate.set()
    replayer.join()
    closer.join()
    stream.close()
    assert events == ["gate opened", "closed", "read"]


# -- 3. tile.distributed on the CPU ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def group(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    pytest.importorskip("torch")
    import tile.frontend.distributed as d

    store = tmp_path_factory.mktemp("dist") / "store"
    d.init("gloo", init_method=f"file://{store}", rank=0, world_size=1)
    yield d
    d.destroy()


def test_a_captured_collectives_tensor_belongs_to_the_graph(group: Any) -> None:
    """Closed: an all_reduce captured into a graph leaves its tensor captured until ``graph.close()``."""
    stream = aio.HostStream()
    graph = group.all_reduce(tile.ones(f32, [16])).graph(stream)
    out = graph.output
    for misuse in (out.to_numpy, out.free, lambda: out.partition([16])):
        with pytest.raises(tile.InFlightError, match=r"captured into a graph by the all_reduce"):
            misuse()
    graph.launch().sync_on(stream)
    back = graph.close()
    assert back.to_numpy().tolist() == [1.0] * 16


def test_a_collective_refuses_overlapping_out_and_inp(group: Any) -> None:
    """Closed: the same tensor or overlapping views as out and inp are refused, and nothing is moved."""
    t = tile.zeros(f32, [4])
    with pytest.raises(tile.AliasError, match=r"all_gather: the tensor it writes .* overlaps another"):
        group.all_gather(t, t)
    whole = tile.zeros(f32, [8])
    with pytest.raises(tile.AliasError, match=r"all_gather: the tensor it writes .* overlaps another"):
        group.all_gather(whole[0:4], whole[2:6])
    with pytest.raises(tile.BorrowError, match=r"would write Shared.*a share is read-only"):
        group.all_reduce(t.share())
    assert whole.to_numpy().tolist() == [0.0] * 8


def test_a_collective_refuses_a_forged_tensor(group: Any) -> None:
    """The forged tensor of test_a_forged_handle_is_no_handle, given to an all_reduce (torch would have written the
    address it reported)."""
    real = tile.zeros(f32, [16])
    with pytest.raises(tile.ArgumentError, match=r"all_reduce takes Tile tensors \(or shares, to read\); got Forged"):
        group.all_reduce(_forgery(real, tile.Tensor, (64,)))
    assert real.to_numpy().tolist() == [0.0] * 16
