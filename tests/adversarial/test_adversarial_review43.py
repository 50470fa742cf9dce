"""Adversarial review 43: the compiled launch paths read line by line (tile.frontend's ``_fastlaunch*.c``, tile.core's
``_fastcore.c`` with its generated launcher) for reference counts, half-done error paths, unchecked results,
arithmetic in the packing and stable-ABI use, and the newest change (chain17): the compiled path takes the Launch,
its moved handles and their values tuple out of the cyclic collector's lists (``PyObject_GC_UnTrack``). Safe code
only, on the CPU interpreter, each case on both launch paths (``path``).

Hole found and fixed (each test below failed before the fix, on the compiled path only):

- A cycle of the user's objects through an untracked object was never collected, so the memory it held was kept for
  good where the pure path's collection freed it. Untracking hides an object's references from the collector, which
  then counts them as references from outside: whatever the object reaches stays alive, and so does any cycle through
  it. chain17 assumed nothing an untracked object references leads back to it; two things do:
  - a borrowed tensor's storage holds its producer (``Storage.keepalive``: the user's DLPack or array object, a
    torch tensor on the GPU, which has a ``__dict__``). A handle moved by a compiled launch and stored on that object
    (``owner.keep = x`` after ``x, = k(x).sync()``), or an unrun launch of it stored there, made the cycle
    owner -> handle -> storage -> owner; the borrowed memory (and the launch's pending counts) stayed for good;
  - a launch taking a handle in flight (inside a ``.then`` function) holds the producer's `InFlight` fate, which
    holds its context, which holds the user's objects (a CUDA context its stream, whose owner is the user's stream
    object; a host stream its name, which may be a ``str`` subclass). That launch stored on such an object and never
    run made a cycle the collector could not see; its handles' memory stayed for good.
  The compiled path now untracks a moved handle only when its storage (a partition's: its tensor's) is owned memory
  (no ``keepalive``), and a Launch only when its values tuple left the lists (only such handles and plain scalars)
  and it took nothing in flight (``_after`` None). Owned handles and the launches of a ``.sync()`` loop still leave
  them (``benchmarks/gc_chain.py``, 300 chains of 100 links over 70k ballast objects: the same 550/50/1 collections
  per generation as before the fix).

- A repeated call compared its keyword generics with the plan's (``generics == plan.generics``, both paths) inside
  the step, OWNERSHIP held and the collector paused, so a user class's ``__eq__`` ran there (user code in the step:
  one waiting for another thread's use of a tensor hangs both threads), and a value saying it equals the plan's int
  was launched, though a first call refuses every generic that is no int (``ArgumentError``). Both paths now compare
  only plain values there (`_plan._plain`: builtin and numpy numbers, exact ``str`` names); any other call goes to the
  keyed path, which refuses it as a first call does.

Tried, and held (read in the source; the cheap ones pinned below):

- borrowed references across calls that run Python code: ``relaunch`` holds the prepared launch, its driver function
  and argument tuple across the driver call; ``replay`` holds the call it relaunches (``plan.prepared`` may be
  replaced meanwhile); ``execute`` holds the values tuple and the stream; a ``.then`` step holds the link's function
  and site across the function (which may drop the chain); ``release_links`` keeps what a step drops and releases it
  after leaving OWNERSHIP, bounded (a step adds at most 4 to a buffer emptied above 236 of 240); ``_fastcore`` reads
  the argument list's items once, with new references, before anything allocates, and claims the plan (``busy``)
  from its guard to the driver call (review 34);
- sizes and positions: the plan's positions index tuples of the plan's own length (``given`` checked first);
  ``admit`` leaves more than 64 moved handles (its ``dead`` buffer) to the pure path; ``_fastcore`` leaves more than
  64 arguments, and extents outside ``[1, 2**32)`` (``[0, 2**32)`` for shared memory), to the pure path, which raises;
  a scalar is packed only after its range check (`_plan._passes` / the kernel's own check);
- the layout and scalar checks compare only builtin values (exact classes; a class with a metaclass is never plain,
  so no user ``__eq__``/``__hash__`` runs); after the fix above nothing the user defined runs inside the step;
- error paths: ``leave`` restores the collector and gives OWNERSHIP back on every path (pinned: after the refused
  generic both are as they were, nothing moved); a refused claim (``then``, ``claim_run``, ``sync``) changes nothing;
  what can fail after a move is a MemoryError or a broken invariant (RuntimeError), not reachable from safe code;
- stable ABI: every call is in the limited API of 3.10 (``PyObject_GC_IsTracked`` since 3.9); slot offsets are found
  by ``bind``'s probe of fresh instances, never from struct layouts;
- an untracked object's references that change after its creation (the InFlight fate a lend gives a launch's handles
  and its ``_lent``) are cleared by the hand-back once the work is done; until then the work keeps the memory on both
  paths (an executed launch's ``__del__`` releases nothing), so no leak beyond the pure path's.
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from helpers_adversarial import load_path

import tile.frontend as tile
from tile.aio import DeviceOp, HostStream
from tile.frontend import ArgumentError, MovedError, f32
from tile.frontend._storage import _FOREIGN, OWNERSHIP

N = 128
FE_KERNELS = Path(__file__).resolve().parents[2] / "packages/tile-frontend/tests/kernels/fe_kernels.py"


@pytest.fixture(scope="module")
def k() -> ModuleType:
    """tile.frontend's test kernels (``add``: ``z = x + y``, ``no_output``: reads ``x``)."""
    module: ModuleType = load_path("review43_fe_kernels", FE_KERNELS)
    return module


@pytest.fixture(autouse=True)
def collected() -> Iterator[None]:
    """Each test starts from a collected heap, so a probe's referent dies only through the test's own release."""
    gc.collect()
    yield
    gc.collect()


class Producer:
    """A user's array exporting through DLPack, with a ``__dict__`` (as a torch tensor has)."""

    def __init__(self) -> None:
        self.data = np.ones(N, np.float32)

    def __dlpack__(self, **kwargs: Any) -> Any:
        return self.data.__dlpack__(**kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        return self.data.__dlpack_device__()


def _fresh() -> tuple[Any, Any, Any]:
    return tile.zeros(f32, [N]).partition([16]), tile.ones(f32, [N]), tile.ones(f32, [N])


# --- hole: a cycle through an in-flight fate's context --------------------------------------------------------


class Name(str):
    """A host stream's name: a ``str`` subclass, which has a ``__dict__``."""

    __slots__ = ("__dict__",)


def _chain_on(k: ModuleType, stream: HostStream, keep: Callable[[DeviceOp[Any]], None]) -> weakref.ref[Any]:
    """A chain on ``stream`` whose function launches the handles it got in flight and gives that launch, unrun, to
    ``keep``; returns a weak reference to the in-flight input's storage. Every call launches from the same lines, so
    the plans (and the fate the first launch lends, kept on its plan for this call site) are the same."""

    def then(out: tuple[Any, ...]) -> DeviceOp[Any]:
        keep(k.add(*out))  # takes the in-flight handles: the launch holds their producer's fate, and its context
        made: DeviceOp[Any] = k.add(*_fresh())
        return made

    z, x, y = _fresh()
    storage = weakref.ref(x._storage)
    k.add(z, x, y).then(then).sync_on(stream)
    return storage


def test_an_unrun_launch_of_in_flight_handles_stored_on_the_stream_is_collected(k: ModuleType, path: str) -> None:
    """Before the fix (compiled path): the launch made from in-flight handles was untracked; stored on the stream's
    name, the cycle launch -> fate -> stream -> name -> launch (once the plan's cached fate moved on to another
    stream) was never collected, and the launch's handles kept their memory for good."""
    assert not _FOREIGN, "a borrowed storage is alive: the compiled path leaves launches with outputs to the pure one"
    for _ in range(2):  # the plans, then the compiled path's own case
        _chain_on(k, HostStream(), lambda op: None)
    name = Name("review43")

    def keep(op: DeviceOp[Any], name: Name = name) -> None:  # the name only, not this frame
        name.keep = op  # type: ignore[attr-defined]  # the user's own attribute

    storage = _chain_on(k, HostStream(name=name), keep)
    del keep
    _chain_on(k, HostStream(), lambda op: None)  # the plan's cached fate now names another stream
    del name
    gc.collect()
    assert storage() is None, "the cycle through the in-flight fate's stream was never collected"


# --- hole: a cycle through a borrowed storage's producer -----------------------------------------------------


def test_a_moved_borrowed_handle_stored_on_its_producer_is_collected(k: ModuleType, path: str) -> None:
    """Before the fix (compiled path): the handle a compiled launch handed back was untracked, so the cycle
    producer -> handle -> storage -> producer was never collected and the borrowed memory stayed for good."""
    reads = k.no_output.grid((1, 1, 1))
    for _ in range(2):  # the plan, then the compiled path's own case
        (t,) = reads(tile.ones(f32, [N])).sync()
    owner = Producer()
    (x,) = reads(tile.from_dlpack(owner)).sync()
    (x,) = reads(x).sync()
    storage = weakref.ref(x._storage)
    owner.keep = x  # type: ignore[attr-defined]  # the user's own attribute
    del owner, x
    gc.collect()
    assert storage() is None, "the cycle through the borrowed storage's producer was never collected"
    assert (t.to_numpy() == 1).all()


def test_an_unrun_launch_of_a_borrowed_handle_stored_on_its_producer_is_collected(k: ModuleType, path: str) -> None:
    """Before the fix (compiled path): the unrun Launch was untracked, its values and handles too; the cycle
    producer -> launch -> handle -> storage -> producer kept the launch (and its pending count) for good. Collected,
    the launch is dropped unrun, its count given back (`Launch.__del__`)."""
    reads = k.no_output.grid((1, 1, 1))
    for _ in range(2):
        reads(tile.ones(f32, [N])).sync()
    owner = Producer()
    x = tile.from_dlpack(owner)
    storage = weakref.ref(x._storage)
    owner.op = reads(x)  # type: ignore[attr-defined]  # the user's own attribute
    del owner
    with pytest.raises(MovedError, match=r"was moved into the launch of no_output"):
        x.to_numpy()  # moved into the launch: the same typed error on both paths
    del x
    gc.collect()
    assert storage() is None, "the cycle through the unrun launch was never collected"


# --- held: what the compiled path still takes out of the collector, and the same errors --------------------------


def test_owned_handles_and_a_plain_launch_still_leave_the_collector(k: ModuleType, path: str) -> None:
    """The fix keeps chain17's gain where no cycle can form: a launch of owned handles taken from no launch in flight
    (and its values and handles) is untracked on the compiled path; one taking a borrowed handle is not."""
    compiled = path == "compiled"
    for _ in range(2):
        k.add(*_fresh()).sync()
    op = k.add(*_fresh())
    assert [gc.is_tracked(o) for o in (op, op._values, *op._values)] == [not compiled] * 5
    op.sync()
    reads = k.no_output.grid((1, 1, 1))
    for _ in range(2):
        reads(tile.ones(f32, [N])).sync()
    owner = Producer()
    borrowed = reads(tile.from_dlpack(owner))
    assert [gc.is_tracked(o) for o in (borrowed, borrowed._values, *borrowed._values)] == [True] * 3
    borrowed.sync()


class LooksLike:
    """A generic keyword's value that says it equals the plan's int: no int, which the keyed path refuses."""

    def __init__(self, value: int, seen: list[bool]) -> None:
        self.value, self.seen = value, seen

    def __eq__(self, other: object) -> bool:
        self.seen.append(OWNERSHIP._is_owned())  # type: ignore[attr-defined]  # RLock's own test
        return other == self.value

    def __hash__(self) -> int:
        return hash(self.value)


# --- hole: a generic's __eq__ run inside the step -------------------------------------------------------------


def test_a_generic_that_is_no_int_is_refused_on_a_repeated_call_too(k: ModuleType, path: str) -> None:
    """Before the fix (both paths): a repeated call compared its keyword generics with the plan's
    (``generics == plan.generics``) inside the step, OWNERSHIP held and the collector paused: the value's own
    ``__eq__`` ran there (user code in the step, which may wait for another thread's use of a tensor), and a value
    saying it equals the plan's was launched, though a first call refuses every generic that is no int
    (ArgumentError). Now only plain values are compared there; any other goes to the keyed path, which refuses it."""
    g = k.generic_input
    for _ in range(2):
        g(tile.zeros(f32, [N]).partition([16]), tile.ones(f32, [N]), N=N).sync()
    op = g(tile.zeros(f32, [N]).partition([16]), tile.ones(f32, [N]), N=N)
    assert gc.is_tracked(op) == (path == "pure")  # an int generic: still the compiled path's own case
    op.sync()
    seen: list[bool] = []
    z, x = tile.zeros(f32, [N]).partition([16]), tile.ones(f32, [N])
    with pytest.raises(ArgumentError, match="must be an int"):
        g(z, x, N=LooksLike(N, seen))
    assert True not in seen, "the generic's __eq__ ran inside the step"
    assert gc.isenabled()
    assert not OWNERSHIP._is_owned()  # type: ignore[attr-defined]  # RLock's own test
    np.testing.assert_array_equal(g(z, x, N=N).sync()[1].to_numpy(), np.ones(N, np.float32))  # nothing moved
