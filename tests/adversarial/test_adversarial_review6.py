"""Review 6: attacks on the safe API found by an adversarial review of the features added last session (the compiled
launch path, placement, graph I/O, tile.kernels ops, subclassing). Each test names the hole in its docstring, failed
before its fix, and asserts the typed error (which says what to do) and that the user's objects stay usable. They run
on the CPU interpreter, on both launch paths (``TILE_PURE_PYTHON=1`` and the compiled extension, when built).
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import tile.frontend as tile

sys.path.insert(0, str(Path(__file__).parent))
from helpers_adversarial import KERNELS, load_path, load_source  # a sibling helper module

from tile.frontend import f32


@pytest.fixture(autouse=True)
def _cpu() -> None:
    tile.set_backend("cpu")


@pytest.fixture
def k() -> ModuleType:
    return load_path("adversarial_handle_kernels", KERNELS / "handle_kernels.py")


# -- 1. subclassing a class the launch trusts -------------------------------------------------------------------


def _final_classes() -> list[type[Any]]:
    from tile.frontend._lend import Lent

    return [tile.Tensor, tile.Partition, tile.Shared, Lent, tile.Kernel, tile.Launch]


@pytest.mark.parametrize("cls", _final_classes(), ids=lambda c: c.__name__)
def test_a_class_the_launch_trusts_cannot_be_subclassed(cls: type[Any]) -> None:
    """Hole: ``class Evil(tile.Tensor): __slots__ = ()`` with an overriding ``shape`` property, then
    ``x.__class__ = Evil`` (the layouts match), made the full launch path read the lie (it reads ``t.shape``,
    ``p.tile_shape``, ``kernel.unchecked`` through the class): a kernel read 64 elements of an 8-element tensor, a
    partition could claim a larger tile, a Kernel subclass could report ``unchecked`` without the greppable opt-out."""
    with pytest.raises(tile.FinalClassError, match=r"cannot subclass tile's .*Wrap the handle in a class of your own"):
        type("Evil", (cls,), {"__slots__": ()})
    with pytest.raises(TypeError, match="cannot subclass tile's"):  # the builtin a caller would catch, too
        type("Evil", (cls,), {})


def test_a_tensor_cannot_be_given_an_overriding_class(k: ModuleType) -> None:
    """Hole: the end-to-end attack: an 8-element input whose class reports 64 elements was accepted by the launch
    (only the interpreter's in-kernel checks stopped the read; on the GPU it reads past the allocation)."""
    x, y, z = tile.ones(f32, [16]), tile.ones(f32, [16]), tile.zeros(f32, [16])
    with pytest.raises(tile.FinalClassError, match=r"class .*Evil cannot subclass tile's Tensor"):

        class Evil(tile.Tensor):
            __slots__ = ()

            @property
            def shape(self) -> tuple[int, ...]:
                return (64,)

    assert type(x) is tile.Tensor
    z, x, y = k.add(z.partition((16,)), x, y).sync()  # everything still usable
    assert z.unpartition().to_numpy().tolist() == [2.0] * 16


# -- 2. tile.kernels ops: what a caller gets back, and a refused call ----------------------------------------------


def test_a_kernels_op_placeholder_cannot_be_unshared() -> None:
    """Hole: ``tk.matmul_op(a, b).sync()`` hands back the launch's arguments, among them the process-wide placeholder
    ``Shared`` passed for the missing bias and residual; ``unshare()`` on it took it away from every later call in the
    process (each then failed with MovedError), and gave the caller a writable tensor of memory every call reads."""
    import tile.kernels as tk

    a, b = tile.ones(f32, [4, 8]), tile.ones(f32, [8, 4])
    config = tk.autotune.Config.of(BM=16, BN=16, BK=16, GROUP=1, SPLIT=1)
    handed_back = tk.matmul_op(a, b, config=config).sync()
    placeholders = [v for v in handed_back if isinstance(v, tile.Shared)]
    assert placeholders, "the op hands back its placeholder inputs"
    for s in placeholders:
        with pytest.raises(tile.BorrowError, match=r"shared for good .*copy.deepcopy it for a share of your own"):
            s.unshare()
        assert s.to_numpy().sum() == 0.0  # still readable, still the process's
    assert tk.matmul(a, b, config=config).to_numpy().tolist() == [[8.0] * 4] * 4  # later calls unaffected


def test_a_permanent_share_refuses_unshare_but_copies() -> None:
    """The class the placeholder fix belongs to: ``t.share(permanent=True)`` is a share nobody can take back; a
    deep copy is an ordinary share of its own."""
    s = tile.arange(f32, 4).share(permanent=True)
    with pytest.raises(tile.BorrowError, match="shared for good"):
        s.unshare()
    mine = __import__("copy").deepcopy(s)
    assert mine.unshare().to_numpy().tolist() == [0.0, 1.0, 2.0, 3.0]
    t = tile.arange(f32, 4)
    with pytest.raises(tile.ArgumentError, match=r"share\(permanent=...\) takes True or False, got int"):
        t.share(permanent=1)  # type: ignore[arg-type]  # the bad input under test
    assert t.share().unshare().to_numpy().tolist() == [0.0, 1.0, 2.0, 3.0]  # t was not moved


def test_a_refused_kernels_op_leaves_out_usable() -> None:
    """Hole: ``tk.rmsnorm_op(x, w, eps="bad", out=o)`` partitioned ``o`` before the launch refused the bad scalar;
    the refused call left ``o`` moved into a partition nobody could reach (the caller's tensor was lost)."""
    import tile.kernels as tk

    x, w, o = tile.ones(f32, [4, 8]), tile.ones(f32, [8]), tile.zeros(f32, [4, 8])
    with pytest.raises(tile.ArgumentError, match="eps"):
        tk.rmsnorm_op(x, w, eps="bad", out=o)  # type: ignore[arg-type]  # the bad input under test
    assert o.to_numpy().sum() == 0.0  # o is live again
    result = tk.rmsnorm_op(x, w, out=o).sync()[0].unpartition()
    assert np.allclose(result.to_numpy(), 1.0, atol=1e-3)


def test_partitioned_gives_back_only_what_no_launch_took(k: ModuleType) -> None:
    """``tile.partitioned``: a refused call inside the block gives the partition back to the tensor; a launch that
    took it keeps it (the tensor stays moved, whatever the block raises afterwards)."""
    z, x = tile.zeros(f32, [16]), tile.ones(f32, [16])
    with pytest.raises(tile.ArgumentError, match="str"), tile.partitioned(z, [16]) as p:
        k.scale(p, x, "two")  # refused: a str for an i32
    assert z.to_numpy().sum() == 0.0
    taken: list[Any] = []

    def launch_then_fail() -> None:
        with tile.partitioned(z, [16]) as p:
            taken.append(k.scale(p, x, 3))
            raise RuntimeError("after the launch")

    with pytest.raises(RuntimeError, match="after the launch"):
        launch_then_fail()
    with pytest.raises(tile.MovedError, match="partition"):
        z.to_numpy()
    out = taken[0].sync()
    assert out[0].unpartition().to_numpy().tolist() == [3.0] * 16
    with pytest.raises(tile.ArgumentError, match="takes a Tensor to partition, got Partition"):
        tile.partitioned(out[0], [16])


# -- 3. numbers that report one value to the check and another to the kernel ------------------------------------


class _Lying(int):
    """An int whose ``__int__`` and ``__index__`` say 2, whatever its value."""

    def __int__(self) -> int:
        return 2

    def __index__(self) -> int:
        return 2


@pytest.mark.parametrize("path", ["first call", "repeated call"])
def test_a_scalar_is_checked_and_packed_as_one_value(k: ModuleType, path: str) -> None:
    """Hole: the range check of an ``i32`` scalar read ``int(a)`` (a subclass's ``__int__``: 2) while the kernel
    received the object itself (on the GPU: ``int(a)`` again, which a stateful ``__int__`` can change), so
    ``_Lying(2**40)`` passed as an in-range i32. The launch now reads the number's own value once, without its
    methods, checks it and packs it."""
    if path == "repeated call":  # the plan's path (and the compiled one, which leaves user types to it)
        z, x, _ = k.scale(tile.zeros(f32, [16]).partition((16,)), tile.ones(f32, [16]), 1).sync()
    p, x = tile.zeros(f32, [16]).partition((16,)), tile.ones(f32, [16])
    with pytest.raises(tile.ArgumentError, match=r"= 1099511627776 does not fit in i32"):
        k.scale(p, x, _Lying(2**40))
    z, x, n = k.scale(p, x, _Lying(3)).sync()  # the refused call moved nothing
    assert type(n) is int
    assert n == 3
    assert z.unpartition().to_numpy().tolist() == [3.0] * 16


# -- 4. placement: an object that claims to be a device ------------------------------------------------------------


def test_a_device_is_named_by_its_type_not_its_claims() -> None:
    """Hole: ``tensor.to(device)`` and every ``device=`` resolved the device with ``device in ("cpu", "host")`` (the
    object's ``__eq__``: user code in the middle of the copy step) and ``isinstance(device, tile.Device)``, which an
    object passes by claiming ``__class__ = tile.Device``: it was then used as the GPU to allocate on and copy to,
    with whatever ``ordinal`` and ``context`` it reported."""
    from tile import core

    ran: list[str] = []

    class Impostor:
        __class__ = core.Device  # type: ignore[assignment]  # the claim under test
        ordinal = 0

        def __eq__(self, other: object) -> bool:
            ran.append("__eq__")
            return False

        __hash__ = object.__hash__

    t = tile.arange(f32, 4)
    with pytest.raises(tile.ArgumentError, match=r"is not a device: use 'cpu', a GPU ordinal"):
        t.to(Impostor())
    with pytest.raises(tile.ArgumentError, match="is not a device"):
        tile.zeros(f32, [4], device=Impostor())
    assert not ran, "none of the object's code ran"
    assert t.to("cpu").to_numpy().tolist() == [0.0, 1.0, 2.0, 3.0]  # t still usable


# -- 5. a kernel compiled for its own grid (a tiles() walk run once) launched on another grid --------------------------

WALK = """
import tile.frontend as tile
from tile.frontend import Mut, Tensor, f32


@tile.entry
def bump(z: Mut[Tensor[f32, ("BM", "BN")]]):
    for idx in z.tiles():
        z.store(z.load(idx) + 1.0, at=idx)
"""


def test_an_own_grid_kernel_never_runs_on_another_grid(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tried, found closed: a launch without ``.grid()`` compiles a ``tiles()`` walk as its one iteration (one block
    per tile); run on a smaller grid, tiles would stay unwritten. ``kernel.grid(g)`` clones share the kernel's
    caches, and ahead-of-time artifacts (``tile compile``, ``--any-grid``) reach launches through the disk cache,
    whose ABI does not record own_grid: the compile key does (``Specialization.own_grid``), in memory and on disk,
    so a ``.grid(g)`` launch always gets the loop, even from a cache an own-grid launch filled."""
    monkeypatch.setenv("TILE_CACHE_DIR", str(tmp_path / "cache"))
    walk = load_source("adversarial_review6_walk", WALK, tmp_path)

    def run(kernel: Any) -> list[float]:
        z = tile.zeros(f32, [10, 6]).partition([2, 2])  # 5 x 3 tiles
        (z,) = kernel(z).sync()
        return sorted(set(z.unpartition().to_numpy().ravel().tolist()))

    own = walk.bump.compile(tile.zeros(f32, [10, 6]).partition([2, 2]))
    assert run(walk.bump) == [1.0]
    fresh = load_source("adversarial_review6_walk", WALK, tmp_path)  # new kernel objects: only the disk cache is shared
    again = fresh.bump.compile(tile.zeros(f32, [10, 6]).partition([2, 2]))
    assert again.origin in ("memory", "disk")  # the shared caches serve it (the disk one `tile compile` fills)
    assert again.key == own.key
    anywhere = fresh.bump.grid((4,)).compile(tile.zeros(f32, [10, 6]).partition([2, 2]))
    assert anywhere.origin == "compiled"  # not the own-grid entry the caches hold
    assert anywhere.key != own.key
    assert "for " in anywhere.ir_text()
    assert "for " not in own.ir_text()
    for grid in [(4,), (1,), (40,), (2, 2)]:
        assert run(fresh.bump.grid(grid)) == [1.0], grid  # every tile once, whatever the grid


# -- 6. graph I/O with an object that only looks like a graph ----------------------------------------------------


class _LookalikeGraph:
    """Says yes to every question graph_write and graph_read ask, and hands the op back to run whenever."""

    closed = False

    def recorded_on(self, ctx: object) -> bool:
        return True

    def update(self, op: Any) -> Any:
        return op


def test_graph_io_takes_only_a_real_graph(k: ModuleType) -> None:
    """Hole: ``graph_write``/``graph_read`` asked the graph argument which handles it captured (``recorded_on``)
    and ordered the copy with its ``update``: a look-alike object exempted another graph's captured view of ``x`` and
    ran the copy whenever its caller liked, so it wrote memory the real graph's replays read (and read memory they
    write)."""
    from tile import aio

    stream = aio.HostStream()
    x = tile.zeros(f32, [256])
    graph = k.add(tile.zeros(f32, [256]).partition([128]), x[()], tile.ones(f32, [256])).graph(stream)
    with pytest.raises(tile.ArgumentError, match=r"graph_write: graph is a _LookalikeGraph; pass the tile.aio.Graph"):
        tile.graph_write(_LookalikeGraph(), x, np.ones(256))  # type: ignore[arg-type]  # the look-alike under test
    with pytest.raises(tile.ArgumentError, match="graph_read: graph is a _LookalikeGraph"):
        tile.graph_read(_LookalikeGraph(), graph.output[0])  # type: ignore[arg-type]
    x = tile.graph_write(graph, x, np.full(256, 2.0)).sync_on(stream)  # x still usable with its real graph
    graph.launch().sync_on(stream)
    out = tile.graph_read(graph, graph.output[0]).sync_on(stream)
    assert out.to_numpy().tolist() == [3.0] * 256
    graph.close()


# -- 7. the compiled launch path's slot reads ---------------------------------------------------------------------


def test_the_compiled_hand_back_reads_slots_only_of_the_classes_that_have_them(k: ModuleType) -> None:
    """Known, now closed: the compiled ``release``/``execute`` read a value's wrapper slot (``_tensor``) and fate slot
    at fixed offsets without checking its class, so a non-handle in a plan's handle position would be read as one
    (a wild read). Safe code cannot put one there: the classes are final (section 1) and every value passed the
    exact-class checks; the hand-back now checks the class too and raises instead (reached here through the private
    module, the only way to get there)."""
    from tile.frontend import _accel

    module = _accel.compiled()
    if module is None:
        pytest.skip("the compiled launch path is not built here")
    launch = k.add(tile.zeros(f32, [8]).partition([4]), tile.ones(f32, [8]), tile.ones(f32, [8]))
    plan = launch._plan
    with pytest.raises(RuntimeError, match="tile: a launch argument without its storage"):
        module.release(plan, (object(), object(), object()), None)
    with pytest.raises(RuntimeError, match="not a Tensor or Partition"):
        module.release(plan, (object(), object(), object()), "a lent fate")
    z, _, _ = launch.sync()  # the real launch is unaffected
    assert z.unpartition().to_numpy().tolist() == [2.0] * 8


# -- 8. a DType made by the caller ------------------------------------------------------------------------------------

DTYPE_GENERIC = """
import tile.frontend as tile
from tile.frontend import Mut, Tensor


@tile.entry
def fill2(a: Mut[Tensor["T", "B"]], b: Mut[Tensor["T", "B"]], x: Tensor["T", -1]):
    a.store(tile.load_tile_like(x, a))
    b.store(tile.load_tile_like(x, b))
"""


def test_a_dtype_made_elsewhere_is_refused(tmp_path: Path) -> None:
    """Hole: ``tile.DType`` is a public dataclass and ``as_dtype`` returned any instance as it is: an "f32" of 8 bits
    sized and addressed views one byte per element while a dtype-generic kernel compiled for "f32" wrote four, so
    ``x[0:8]`` and ``x[8:16]`` partitioned as disjoint and one launch wrote both outputs over the same bytes (the
    interpreter caught it; a GPU would race)."""
    from tile.compiler.lang import DType

    k = load_source("adversarial_review6_dtypes", DTYPE_GENERIC, tmp_path)
    for fake in (DType("f32", "f", 8, "f32", "float32"), DType("f16", "f", 32, "f16", "float16")):
        with pytest.raises(tile.ArgumentError, match=r"DType\(name='f\d+', bits=\d+, ...\) is not one of Tile's"):
            tile.zeros(fake, [16])
    same = DType("f32", "f", 32, "f32", "float32")  # equal to Tile's own: resolves to it
    x = tile.zeros(same, [16])
    assert x.dtype is f32
    a, b = x[0:8], x[8:16]
    del x
    pa, pb = a.partition([8]), b.partition([8])
    pa, pb, _ = k.fill2(pa, pb, tile.ones(f32, [8])).sync()
    assert pa.unpartition().to_numpy().tolist() == [1.0] * 8
